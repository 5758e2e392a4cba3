// SPDX-License-Identifier: MIT
// This-adjusting thunks: C's entry for B::g adjusts `this` and jumps to
// C::g.  At -O0 GCC writes such thunks as assembly (output_mi_thunk), past
// every RTL pass.
struct A { virtual int f(int x) { return x + 1; } int a; };
struct B { virtual int g(int x) { return x + 2; } int b; };
struct C : A, B { int g(int x) override { return x + 3; } };

__attribute__((noinline)) int call(B *b) { return b->g(1); }

int main()
{
	C c;
	return call(&c) == 4 ? 0 : 1;
}

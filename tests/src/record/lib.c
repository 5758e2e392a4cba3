/* SPDX-License-Identifier: MIT */
/* lib.c - the library prog.c dlopens: lib_fn() is padded too. */
__attribute__((noinline)) int lib_fn(int x)
{
	return x * 3;
}

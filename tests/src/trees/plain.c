/* SPDX-License-Identifier: MIT */
/* plain.c - built with the plugin but without exit sites (exit=0), linked
 * into trees: plain_fn() is shown as entry only, leaf() as its callee. */
int leaf(int x);

__attribute__((noinline)) int plain_fn(int x)
{
	int r = leaf(x);

	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

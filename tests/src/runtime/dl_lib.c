/* SPDX-License-Identifier: MIT */
/* dl_lib.c - a library built with the plugin and without libftpad, loaded
 * with dlopen by dl.c and dl_plain.c. */
__attribute__((noipa)) long lib_square(long x)
{
	return x * x;
}

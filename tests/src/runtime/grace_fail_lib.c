/* SPDX-License-Identifier: MIT */
/* grace_fail_lib.c - a library built with the plugin, whose site
 * grace_fail.c's register enables before it fails on the program's own. */
__attribute__((noipa)) long lib_work(long x)
{
	return x * 3 + 1;
}

/* SPDX-License-Identifier: MIT */
/* traced_lib.c - the padded library traced.c and traced_cxx.cc dlopen. */
__attribute__((noipa)) long t_lib_square(long x)
{
	return x * x;
}

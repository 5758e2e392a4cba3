/* SPDX-License-Identifier: MIT */
/*
 * A 32-bit process that waits forever, with no libc (Debian's i686 cross
 * compiler comes without one): ftpad attach must refuse it.  Built with
 * i686-linux-gnu-gcc -nostdlib -static.
 */
void _start(void)
{
	for (;;)
		__asm__ volatile("int $0x80" : : "a"(29) : "memory"); /* pause() */
}

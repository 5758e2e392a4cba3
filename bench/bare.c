/* SPDX-License-Identifier: MIT */
/*
 * bare.c - the empty callback that bare_x86_64.S's trampoline calls
 * through a pointer, as ftpad calls ops->func; built without -pg.
 */
void bare_empty(unsigned long ip, unsigned long parent_ip, void *ops, void *regs);

void bare_empty(unsigned long ip, unsigned long parent_ip, void *ops, void *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
}

void (*bare_callback)(unsigned long, unsigned long, void *, void *) = bare_empty;
char bare_ops[64];

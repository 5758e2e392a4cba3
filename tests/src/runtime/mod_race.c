/* SPDX-License-Identifier: MIT */
/*
 * dlclose racing with register and unregister: one
 * thread loops dlopen, a call, dlclose of a padded library while the main
 * thread loops ftpad_register_ops/ftpad_unregister_ops of an ops that
 * traces everything.  Usage: mod_race lib.so rounds.  Exit 0 and "ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ftpad.h"

static const char *lib;
static int rounds, done;
static unsigned long calls;

static void count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
}

static struct ftpad_ops ops = { .func = count };

static void *loader(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds; i++) {
		void *h = dlopen(lib, RTLD_NOW);
		int (*all)(int) = h ? (int (*)(int))dlsym(h, "mod_call_all") : NULL;

		if (!all) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			exit(3);
		}
		all(1);
		if (dlclose(h))
			exit(4);
	}
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long cycles = 0;
	pthread_t t;
	int err;

	if (argc < 3)
		return 2;
	lib = argv[1];
	rounds = atoi(argv[2]);
	if (pthread_create(&t, NULL, loader, NULL))
		return 2;
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		err = ftpad_register_ops(&ops);
		if (!err)
			err = ftpad_unregister_ops(&ops);
		if (err) {
			fprintf(stderr, "ftpad: %s\n", ftpad_strerror(err));
			return 5;
		}
		cycles++;
	}
	pthread_join(t, NULL);
	printf("ok: %d rounds, %lu register cycles\n", rounds, cycles);
	return 0;
}

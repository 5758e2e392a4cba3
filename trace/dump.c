/* SPDX-License-Identifier: MIT */
/* dump.c - `ftpad dump --chrome|--perfetto|--folded|--pprof DIR [-o FILE]`. */
#include <getopt.h>
#include <stdio.h>

#include "viewers.h"

static const char dump_usage[] =
	"usage: ftpad dump --chrome|--perfetto|--folded|--pprof [-o FILE] [--raw-names] [DIR]\n"
	"  --chrome    Chrome's JSON trace events (chrome://tracing, Perfetto UI, speedscope)\n"
	"  --perfetto  Perfetto's protobuf trace (ui.perfetto.dev): about 11 bytes an event\n"
	"  --folded    folded stacks with self nanoseconds (flamegraph.pl, ftpad flame)\n"
	"  --pprof     a gzipped pprof profile of the calls: calls/count and self/nanoseconds\n"
	"              per call path (go tool pprof, Pyroscope, Parca)\n"
	"  -o FILE     write FILE (through a temporary renamed over it), not standard output\n"
	"  --raw-names C++ names as the sites file has them, not demangled\n"
	"DIR: the trace directory (default ftpad.data)\n";

int trace_cmd_dump(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "chrome", no_argument, NULL, 'c' },
		{ "perfetto", no_argument, NULL, 'p' },
		{ "folded", no_argument, NULL, 'f' },
		{ "pprof", no_argument, NULL, 'P' },
		{ "output", required_argument, NULL, 'o' },
		{ "raw-names", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int (*dump)(struct trace *, const char *) = NULL;
	const char *out = NULL;
	unsigned open_flags = 0;
	struct trace t;
	const char *dir;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': dump = trace_dump_chrome; break;
		case 'p': dump = trace_dump_perfetto; break;
		case 'f': dump = trace_dump_folded; break;
		case 'P': dump = trace_dump_pprof; break;
		case 'o': out = optarg; break;
		case 'r': open_flags |= TRACE_OPEN_RAW_NAMES; break;
		case 'h': return fputs(dump_usage, stdout), 0;
		default: return trace_usage_error("dump: bad option '%s'", argv[optind - 1]);
		}
	}
	if (!dump)
		return trace_usage_error("dump: %s", "say which format: --chrome, --perfetto, --folded or --pprof");
	dir = trace_dir_arg("dump", argc, argv, &rc);
	if (!dir)
		return rc;
	if (trace_open(&t, dir, open_flags))
		return 1;
	rc = dump(&t, out);
	trace_close(&t);
	return rc;
}

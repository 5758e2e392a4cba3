/* SPDX-License-Identifier: MIT */
/* report.c - `ftpad report DIR [-s KEY]`: per function calls, total, self,
 * average and max, largest first (ties by name). */
#include <getopt.h>
#include <stdlib.h>

#include "out.h"
#include "viewers.h"

static const char report_usage[] =
	"usage: ftpad report [-s total|self|calls|avg|max|name] [--raw-names] [DIR]\n";

int trace_cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "raw-names", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	enum stats_key key = KEY_TOTAL;
	unsigned open_flags = 0;
	struct stats_walk s;
	struct tree_stats total;
	struct trace t;
	struct out *o;
	uint32_t *order;
	char said[1024];
	size_t n;
	const char *dir;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:h", longopts, NULL)) != -1) {
		if (c == 's' && stats_key_parse(optarg, &key))
			return trace_usage_error("report: unknown sort key '%s' (total, self, calls, "
						 "avg, max, name)", optarg);
		if (c == 'r')
			open_flags |= TRACE_OPEN_RAW_NAMES;
		if (c == 'h')
			return fputs(report_usage, stdout), 0;
		if (c == '?')
			return trace_usage_error("report: bad option '%s'", argv[optind - 1]);
	}
	dir = trace_dir_arg("report", argc, argv, &rc);
	if (!dir)
		return rc;
	if (trace_open(&t, dir, open_flags))
		return 1;
	if (!trace_has_exits(&t))
		trace_say_no_exits(&t, "warning", "report");
	stats_collect(&t, &s, &total);
	n = stats_order(&t, &s, key, &order);
	o = out_open(NULL);
	stats_print(o, &t, &s, order, n);
	tree_stats_say(&total, said, sizeof(said));
	out_str(o, "# ");
	out_str(o, said);
	out_char(o, '\n');
	rc = out_close(o) ? 1 : 0;
	free(order);
	free(s.by_sym);
	trace_close(&t);
	return rc;
}

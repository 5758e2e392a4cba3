/* SPDX-License-Identifier: MIT */
/*
 * ftpad flame: folded stacks in, one self-contained SVG flame graph out.
 *
 * The input is what `ftpad dump --folded` writes: one line per distinct
 * stack, "outer;...;inner N", N the self time of the innermost frame in
 * nanoseconds.  The SVG carries its own CSS and JavaScript (zoom on click,
 * reset, search), fetches nothing, and is a pure function of its input: the
 * same folded lines give the same bytes.
 */
#ifndef FTPAD_FLAME_H
#define FTPAD_FLAME_H

#include <stdio.h>

struct ftpad_flame_options {
	const char *input_name; /* names the input in error messages */
	const char *title;      /* NULL: "Flame graph" */
	unsigned width;         /* image width in pixels; 0: 1200 */
	/* Frames narrower than this many pixels are left out (with their
	 * children): a million-call trace would otherwise give an SVG no
	 * browser opens.  0 keeps every frame; a negative value means 0.1. */
	double min_frame_px;
};

/* Read folded stacks from folded_in, write the SVG to svg_out.  Returns 0,
 * or -1 after printing "ftpad: error: <input_name>:<line>: <reason>" (bad
 * line, overflow, no memory) or a write error to stderr. */
int ftpad_flame_svg(FILE *folded_in, FILE *svg_out, const struct ftpad_flame_options *o);

/* Where `ftpad flame DIR` gets its folded stacks: write the trace
 * directory's folded stacks to out, as `ftpad dump --folded DIR` does
 * (OPEN_FLAGS: reader.h's enum trace_open_flags); return 0, or -1 after
 * printing an error. */
int ftpad_flame_folded_from_trace(const char *dir, unsigned open_flags, FILE *out);

#endif

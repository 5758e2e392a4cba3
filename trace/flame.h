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

#include <stdint.h>
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

/*
 * The graph frame by frame: what ftpad_flame_svg() makes of folded lines,
 * and what `ftpad flame DIR` makes of a trace's call paths directly, since
 * their folded text grows as the square of the recursion's depth.
 */
struct ftpad_flame_tree;
#define FTPAD_FLAME_ROOT 0 /* the node every stack starts from ("all") */
/* An empty tree, or NULL after saying that memory ran out. */
struct ftpad_flame_tree *ftpad_flame_tree_new(void);
/* The child of node PARENT called NAME[0..LEN), made if new; siblings are
 * merged by name.  NAME is made what the SVG can carry, in place (a byte
 * XML cannot hold becomes '?', a ';' ':').  SIZE_MAX after saying that
 * memory ran out. */
size_t ftpad_flame_tree_child(struct ftpad_flame_tree *t, size_t parent, char *name, size_t len);
/* Adds NS of self time to NODE; -1 (nothing said) if the graph's total
 * would overflow 64 bits. */
int ftpad_flame_tree_add(struct ftpad_flame_tree *t, size_t node, uint64_t ns);
/* Writes the SVG (once: it sums and sorts the tree); 0, or -1 after saying
 * why. */
int ftpad_flame_tree_svg(struct ftpad_flame_tree *t, FILE *svg_out, const struct ftpad_flame_options *o);
void ftpad_flame_tree_free(struct ftpad_flame_tree *t);

/* Where `ftpad flame DIR` gets its frames: the trace directory's call
 * paths, the stacks `ftpad dump --folded DIR` writes (OPEN_FLAGS: reader.h's
 * enum trace_open_flags), as a tree; NULL after printing an error. */
struct ftpad_flame_tree *ftpad_flame_tree_from_trace(const char *dir, unsigned open_flags);

#endif

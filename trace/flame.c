/* SPDX-License-Identifier: MIT */
/*
 * ftpad flame: an SVG flame graph from folded stacks (see flame.h).
 *
 * The folded lines become a tree of frames (children merged by name, then
 * sorted by name so that input order does not matter); each frame is drawn
 * as a <g class="frame"> holding a <title> tooltip, a <rect> and a clipped
 * <text>.  Every frame also carries its position on the time axis
 * (data-s: start, data-t: total, data-d: depth, all integers) so that the
 * embedded script can zoom and search without any floating-point guesswork,
 * and so that tests can check the geometry from the DOM.
 */
#define _GNU_SOURCE
#include "flame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NO_NODE SIZE_MAX
#define DEFAULT_WIDTH 1200u
#define DEFAULT_MIN_FRAME_PX 0.1
#define SIDE_PAD 10     /* pixels left and right of the frames */
#define FRAME_H 16      /* one row of frames, rect plus a 1-pixel gap */
#define HEADER_H 44     /* title and buttons */
#define FOOTER_H 24     /* the details line */
#define FONT_PX 12
#define CHAR_PX 7.2     /* width of one monospace character at FONT_PX */
#define MAX_WIDTH 100000u

struct frame_node {
	char *name;
	size_t parent;   /* made before its children: a smaller index */
	size_t first_child;
	size_t next_sibling;
	uint64_t total; /* ns in this frame; and below, once the tree is summed */
	uint32_t depth;
};

/* The tree under construction: the nodes, and an open-addressing index
 * from (parent, name) to the child, so that merging a line is linear in its
 * length however many siblings there are. */
struct ftpad_flame_tree {
	struct frame_node *nodes;
	size_t count, cap;
	size_t *index; /* NO_NODE or a node; its size is a power of two */
	size_t index_cap;
	uint32_t max_depth;
	uint64_t sum; /* every ns added: the root's total once summed */
};

static int oom(const char *what)
{
	fprintf(stderr, "ftpad: error: flame: out of memory (%s)\n", what);
	return -1;
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a: stable across runs and machines */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static size_t slot_of(const struct ftpad_flame_tree *t, size_t parent, const char *name)
{
	size_t mask = t->index_cap - 1;
	size_t i = (name_hash(name) ^ (parent * 0x9e3779b97f4a7c15ull)) & mask;

	for (;; i = (i + 1) & mask) {
		size_t n = t->index[i];

		if (n == NO_NODE || (t->nodes[n].parent == parent && !strcmp(t->nodes[n].name, name)))
			return i;
	}
}

static int grow_index(struct ftpad_flame_tree *t)
{
	size_t old_cap = t->index_cap;
	size_t *old = t->index;

	t->index_cap = old_cap ? old_cap * 2 : 1024;
	t->index = malloc(t->index_cap * sizeof(*t->index));
	if (!t->index) {
		t->index = old;
		t->index_cap = old_cap;
		return oom("frame index");
	}
	for (size_t i = 0; i < t->index_cap; i++)
		t->index[i] = NO_NODE;
	for (size_t n = 1; n < t->count; n++) /* the root is never looked up */
		t->index[slot_of(t, t->nodes[n].parent, t->nodes[n].name)] = n;
	free(old);
	return 0;
}

static size_t add_node(struct ftpad_flame_tree *t, size_t parent, const char *name, size_t len)
{
	if (t->count == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct frame_node *nodes = realloc(t->nodes, cap * sizeof(*nodes));

		if (!nodes)
			return NO_NODE;
		t->nodes = nodes;
		t->cap = cap;
	}
	struct frame_node *n = &t->nodes[t->count];
	n->name = strndup(name, len);
	if (!n->name)
		return NO_NODE;
	n->parent = parent;
	n->first_child = NO_NODE;
	n->next_sibling = NO_NODE;
	n->total = 0;
	n->depth = parent == NO_NODE ? 0 : t->nodes[parent].depth + 1;
	if (parent != NO_NODE) {
		n->next_sibling = t->nodes[parent].first_child;
		t->nodes[parent].first_child = t->count;
	}
	if (n->depth > t->max_depth)
		t->max_depth = n->depth;
	return t->count++;
}

static void make_xml_safe(char *s);

size_t ftpad_flame_tree_child(struct ftpad_flame_tree *t, size_t parent, char *name, size_t len)
{
	char saved = name[len];

	if ((t->count + 1) * 2 > t->index_cap && grow_index(t))
		return NO_NODE;
	name[len] = '\0';
	for (char *c = name; (c = strchr(c, ';')); c++)
		*c = ':'; /* one frame: a ';' would split it in folded text */
	make_xml_safe(name);
	size_t slot = slot_of(t, parent, name);
	size_t n = t->index[slot];
	if (n == NO_NODE) {
		n = add_node(t, parent, name, len);
		if (n != NO_NODE)
			t->index[slot] = n;
		else
			oom("frames");
	}
	name[len] = saved;
	return n;
}

int ftpad_flame_tree_add(struct ftpad_flame_tree *t, size_t node, uint64_t ns)
{
	if (t->sum > UINT64_MAX - ns)
		return -1;
	t->sum += ns;
	t->nodes[node].total += ns; /* its own: the parents get it when summed */
	return 0;
}

/* Each frame's total becomes its own time and all below it: children come
 * after their parent, so one backward pass adds each into its parent
 * (linear, however deep the tree). */
static void sum_totals(struct ftpad_flame_tree *t)
{
	for (size_t n = t->count; n-- > 1;)
		t->nodes[t->nodes[n].parent].total += t->nodes[n].total;
}

/*
 * Names go into XML as they are, so a byte that XML 1.0 cannot carry (a
 * control character, or a byte that is not part of valid UTF-8) becomes '?'
 * here, once: an odd symbol name then shows as '?' rather than making the
 * whole SVG unreadable.  Returns how many bytes of s form one character.
 */
static size_t utf8_char_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the 2nd byte */

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* beyond U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

static void make_xml_safe(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t len = utf8_char_len(p);

		if (len == 0 || (*p < 0x20 && *p != '\t')) {
			*p++ = '?';
			continue;
		}
		p += len;
	}
}

static int line_error(const struct ftpad_flame_options *o, size_t line, const char *why)
{
	fprintf(stderr, "ftpad: error: %s:%zu: %s\n", o->input_name ? o->input_name : "<folded>",
		line, why);
	return -1;
}

/* "f1;f2;f3 N": split off N (the last blank-separated word). */
static int split_count(char *text, size_t *stack_len, uint64_t *ns)
{
	size_t len = strlen(text);

	while (len && strchr(" \t\r\n", text[len - 1]))
		text[--len] = '\0';
	char *blank = strrchr(text, ' ');
	char *tab = strrchr(text, '\t');
	if (!blank || (tab && tab > blank))
		blank = tab;
	if (!blank || !blank[1])
		return -1;
	uint64_t v = 0;
	for (const char *d = blank + 1; *d; d++) {
		if (*d < '0' || *d > '9' || v > (UINT64_MAX - (uint64_t)(*d - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*d - '0');
	}
	while (blank > text && (blank[-1] == ' ' || blank[-1] == '\t'))
		blank--;
	*stack_len = (size_t)(blank - text);
	*ns = v;
	return 0;
}

static int add_line(struct ftpad_flame_tree *t, char *text, size_t line,
		    const struct ftpad_flame_options *o)
{
	size_t stack_len;
	uint64_t ns;

	if (split_count(text, &stack_len, &ns))
		return line_error(o, line, "expected 'frame;frame;... NANOSECONDS'");
	if (stack_len == 0)
		return line_error(o, line, "empty stack");
	text[stack_len] = '\0';
	size_t node = FTPAD_FLAME_ROOT;
	for (char *name = text;;) {
		size_t len = strcspn(name, ";");

		if (len == 0)
			return line_error(o, line, "empty frame name");
		node = ftpad_flame_tree_child(t, node, name, len);
		if (node == NO_NODE)
			return -1;
		if (!name[len])
			break;
		name += len + 1;
	}
	if (ftpad_flame_tree_add(t, node, ns))
		return line_error(o, line, "total time overflows 64 bits");
	return 0;
}

static int read_folded(struct ftpad_flame_tree *t, FILE *in, const struct ftpad_flame_options *o)
{
	char *text = NULL;
	size_t size = 0, line = 0;
	int err = 0;

	while (!err && getline(&text, &size, in) != -1) {
		line++;
		if (text[strspn(text, " \t\r\n")] == '\0')
			continue; /* blank lines are harmless */
		err = add_line(t, text, line, o);
	}
	if (!err && ferror(in)) {
		fprintf(stderr, "ftpad: error: %s: read failed: %s\n",
			o->input_name ? o->input_name : "<folded>", strerror(errno));
		err = -1;
	}
	free(text);
	return err;
}

static int by_name(const void *a, const void *b, void *nodes)
{
	const struct frame_node *n = nodes;

	return strcmp(n[*(const size_t *)a].name, n[*(const size_t *)b].name);
}

/* Children in name order, as flame graphs draw them: the picture depends
 * on what was called, not on which stack came first in the input. */
static int sort_children(struct ftpad_flame_tree *t)
{
	size_t *kids = NULL, cap = 0;

	for (size_t p = 0; p < t->count; p++) {
		size_t k = 0;

		for (size_t c = t->nodes[p].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) {
			if (k == cap) {
				size_t *more = realloc(kids, (cap = cap ? cap * 2 : 64) * sizeof(*kids));
				if (!more) {
					free(kids);
					return oom("sorting");
				}
				kids = more;
			}
			kids[k++] = c;
		}
		if (k < 2)
			continue;
		qsort_r(kids, k, sizeof(*kids), by_name, t->nodes);
		t->nodes[p].first_child = kids[0];
		for (size_t i = 0; i + 1 < k; i++)
			t->nodes[kids[i]].next_sibling = kids[i + 1];
		t->nodes[kids[k - 1]].next_sibling = NO_NODE;
	}
	free(kids);
	return 0;
}

static void put_escaped(FILE *f, const char *s, size_t max_chars)
{
	for (size_t n = 0; *s && n < max_chars; n++) {
		size_t len = utf8_char_len((const unsigned char *)s);

		if (len == 0 || ((unsigned char)*s < 0x20 && *s != '\t')) {
			fputc('?', f); /* a title given on the command line */
			s++;
			continue;
		}
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fwrite(s, 1, len, f);
		}
		s += len;
	}
}

static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* The label a frame of width_px shows: the whole name, its start and "..",
 * or nothing.  The script's clip() uses the same rule after a zoom. */
static void put_label(FILE *f, const char *name, double width_px)
{
	double fit = (width_px - 6) / CHAR_PX;
	size_t chars = utf8_chars(name);

	if (fit < 3)
		return;
	if ((double)chars <= fit) {
		put_escaped(f, name, chars);
		return;
	}
	put_escaped(f, name, (size_t)fit - 2);
	fputs("..", f);
}

static void put_duration(FILE *f, uint64_t ns)
{
	if (ns >= 1000000000u)
		fprintf(f, "%.3f s", (double)ns / 1e9);
	else if (ns >= 1000000u)
		fprintf(f, "%.3f ms", (double)ns / 1e6);
	else if (ns >= 1000u)
		fprintf(f, "%.3f us", (double)ns / 1e3);
	else
		fprintf(f, "%" PRIu64 " ns", ns);
}

/* A warm colour from the name alone, so a function keeps its colour from
 * one graph to the next and the output bytes depend only on the input. */
static void put_colour(FILE *f, const char *name)
{
	uint32_t h = name_hash(name);

	fprintf(f, "rgb(%u,%u,%u)", 205 + h % 50, 70 + (h >> 8) % 150, 20 + (h >> 16) % 60);
}

struct layout {
	unsigned width, height;
	double scale;  /* pixels per ns */
	double min_px;
};

static void put_frame(FILE *f, const struct ftpad_flame_tree *t, size_t n, uint64_t start,
		      const struct layout *l)
{
	const struct frame_node *node = &t->nodes[n];
	double x = SIDE_PAD + (double)start * l->scale;
	double w = (double)node->total * l->scale;
	double y = l->height - FOOTER_H - (double)(node->depth + 1) * FRAME_H;

	fputs("<g class=\"frame\" data-name=\"", f);
	put_escaped(f, node->name, SIZE_MAX);
	fprintf(f, "\" data-s=\"%" PRIu64 "\" data-t=\"%" PRIu64 "\" data-d=\"%" PRIu32 "\">",
		start, node->total, node->depth);
	fputs("<title>", f);
	put_escaped(f, node->name, SIZE_MAX);
	fputs(" (", f);
	put_duration(f, node->total);
	fprintf(f, ", %.2f%%)</title>", 100.0 * (double)node->total / (double)t->nodes[0].total);
	fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"", x, y, w,
		FRAME_H - 1);
	put_colour(f, node->name);
	fprintf(f, "\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3, y + FRAME_H - 4.5);
	put_label(f, node->name, w);
	fputs("</text></g>\n", f);
}

/* Every frame wide enough to see, parents before children, children in
 * name order: iterative, since a recursion 100,000 calls deep is a trace
 * this must draw. */
static int put_frames(FILE *f, const struct ftpad_flame_tree *t, const struct layout *l)
{
	struct pending { size_t node; uint64_t start; } *stack;
	size_t depth = 0;

	stack = malloc(((size_t)t->max_depth + 1) * sizeof(*stack));
	if (!stack)
		return oom("drawing");
	stack[depth++] = (struct pending){ 0, 0 };
	while (depth) {
		struct pending p = stack[--depth];
		const struct frame_node *node = &t->nodes[p.node];

		if (node->next_sibling != NO_NODE)
			stack[depth++] = (struct pending){ node->next_sibling, p.start + node->total };
		if (node->total == 0 || (double)node->total * l->scale < l->min_px)
			continue; /* nor its children: they are narrower still */
		put_frame(f, t, p.node, p.start, l);
		if (node->first_child != NO_NODE)
			stack[depth++] = (struct pending){ node->first_child, p.start };
	}
	free(stack);
	return 0;
}

/* The viewer: zoom, reset, search: trace/flame.js, which the build makes
 * this NUL-terminated array (trace/embed.cmake). */
extern const char flame_script[];

static const char style[] =
	"text { font-family: monospace; font-size: 12px; fill: #000; }\n"
	".frame text { pointer-events: none; }\n"
	".frame:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
	".ancestor { opacity: 0.6; }\n"
	".button { cursor: pointer; fill: #1a4fa0; text-decoration: underline; }\n"
	"#title { font-size: 17px; text-anchor: middle; }\n"
	"#matched { text-anchor: end; }\n";

static void put_head(FILE *f, const struct ftpad_flame_tree *t, const struct layout *l,
		     const char *title)
{
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n", f);
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%u\" height=\"%u\" "
		"viewBox=\"0 0 %u %u\" data-total=\"%" PRIu64 "\">\n",
		l->width, l->height, l->width, l->height, t->nodes[0].total);
	fputs("<!-- made by ftpad flame: click a frame to zoom, Ctrl-F to search -->\n", f);
	fprintf(f, "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n", style);
	fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n", flame_script);
	fprintf(f, "<rect id=\"background\" x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" "
		"fill=\"#f8f8f0\"/>\n",
		l->width, l->height);
	fprintf(f, "<text id=\"title\" x=\"%.1f\" y=\"22\">", l->width / 2.0);
	put_escaped(f, title, SIZE_MAX);
	fputs("</text>\n", f);
	fprintf(f, "<text id=\"reset\" class=\"button\" x=\"%d\" y=\"38\" display=\"none\">Reset zoom</text>\n",
		SIDE_PAD);
	fprintf(f, "<text id=\"search\" class=\"button\" x=\"%u\" y=\"22\">Search</text>\n",
		l->width - SIDE_PAD - 110);
	fprintf(f, "<text id=\"clear\" class=\"button\" x=\"%u\" y=\"22\">Clear</text>\n",
		l->width - SIDE_PAD - 45);
	fprintf(f, "<text id=\"matched\" x=\"%u\" y=\"38\"></text>\n", l->width - SIDE_PAD);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", SIDE_PAD,
		l->height - 8);
}

struct ftpad_flame_tree *ftpad_flame_tree_new(void)
{
	struct ftpad_flame_tree *t = calloc(1, sizeof(*t));

	if (!t || add_node(t, NO_NODE, "all", 3) == NO_NODE || grow_index(t)) {
		if (t)
			ftpad_flame_tree_free(t);
		oom("frames");
		return NULL;
	}
	return t;
}

void ftpad_flame_tree_free(struct ftpad_flame_tree *t)
{
	for (size_t i = 0; i < t->count; i++)
		free(t->nodes[i].name);
	free(t->nodes);
	free(t->index);
	free(t);
}

/* The image width o asks for; 0 after saying it is out of range. */
static unsigned width_of(const struct ftpad_flame_options *o)
{
	unsigned width = o->width ? o->width : DEFAULT_WIDTH;

	if (width < 2 * SIDE_PAD + 100 || width > MAX_WIDTH) {
		fprintf(stderr, "ftpad: error: flame: width %u is out of range (%u to %u)\n",
			width, 2 * SIDE_PAD + 100, MAX_WIDTH);
		return 0;
	}
	return width;
}

int ftpad_flame_tree_svg(struct ftpad_flame_tree *t, FILE *svg_out, const struct ftpad_flame_options *o)
{
	struct layout l;
	int err;

	l.width = width_of(o);
	if (!l.width)
		return -1;
	l.min_px = o->min_frame_px < 0 ? DEFAULT_MIN_FRAME_PX : o->min_frame_px;
	sum_totals(t);
	err = sort_children(t);
	if (!err) {
		l.height = HEADER_H + FOOTER_H + (t->max_depth + 1) * FRAME_H;
		l.scale = t->nodes[0].total ? (double)(l.width - 2 * SIDE_PAD) / (double)t->nodes[0].total : 0;
		put_head(svg_out, t, &l, o->title ? o->title : "Flame graph");
		fputs("<g id=\"frames\">\n", svg_out);
		err = put_frames(svg_out, t, &l);
		fputs("</g>\n</svg>\n", svg_out);
	}
	if (!err && (fflush(svg_out) || ferror(svg_out))) {
		fprintf(stderr, "ftpad: error: flame: writing the SVG failed: %s\n", strerror(errno));
		err = -1;
	}
	return err;
}

int ftpad_flame_svg(FILE *folded_in, FILE *svg_out, const struct ftpad_flame_options *o)
{
	struct ftpad_flame_tree *t;
	int err;

	if (!width_of(o) || !(t = ftpad_flame_tree_new()))
		return -1;
	err = read_folded(t, folded_in, o);
	if (!err)
		err = ftpad_flame_tree_svg(t, svg_out, o);
	ftpad_flame_tree_free(t);
	return err;
}

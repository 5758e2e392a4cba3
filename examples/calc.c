/* SPDX-License-Identifier: MIT */
/*
 * calc.c - a small calculator, ftpad's demo program.
 *
 *   calc 'let r = 2' 'pi * r ^ 2' 'max(1, r, 3) - sqrt(16)'
 *   echo '1 + 2 * 3' | calc
 *
 * Each argument is one statement; with none, calc reads one per line from
 * standard input.  '#' starts a comment.  An expression's value is printed;
 * `let NAME = EXPR` binds a variable.  An error names its column, and calc
 * exits 1 at the end if any statement failed.  Each statement is parsed by
 * recursive descent into a malloc'd tree, evaluated, and freed:
 *
 *   statement := 'let' IDENT '=' expr | expr
 *   expr      := term (('+' | '-') term)*
 *   term      := unary (('*' | '/' | '%') unary)*
 *   unary     := ('-' | '+') unary | factor
 *   factor    := primary ('^' unary)?           so -2^2 = -4, 2^3^2 = 512
 *   primary   := NUMBER | IDENT | IDENT '(' (expr (',' expr)*)? ')' | '(' expr ')'
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 31
#define MAX_VARS 64
#define MAX_ARGS 8
#define MAX_LINE 1024

/* TOK_OP is one of + - * / % ^ ( ) , = */
enum token_kind { TOK_END, TOK_NUMBER, TOK_IDENT, TOK_LET, TOK_OP, TOK_INVALID };

struct token {
	enum token_kind kind;
	int column;		/* 1-based, for error messages */
	double number;		/* TOK_NUMBER */
	char text[MAX_NAME + 1]; /* TOK_IDENT; TOK_OP and TOK_INVALID: the character */
};

struct lexer {
	const char *src;
	const char *pos;
	struct token tok;	/* the current, not yet consumed, token */
};

enum node_kind { NODE_NUMBER, NODE_VARIABLE, NODE_UNARY, NODE_BINARY, NODE_CALL };

struct node {
	enum node_kind kind;
	int column;
	char op;			/* NODE_UNARY, NODE_BINARY */
	double number;			/* NODE_NUMBER */
	char name[MAX_NAME + 1];	/* NODE_VARIABLE, NODE_CALL */
	int nargs;			/* NODE_CALL */
	struct node *kids[MAX_ARGS];	/* operands or arguments */
};

struct variable {
	char name[MAX_NAME + 1];
	double value;
};

struct calc {
	struct variable vars[MAX_VARS];
	int nvars;
	char error[128];	/* set by the first error of a statement */
	int error_column;
};

static bool failed(const struct calc *calc)
{
	return calc->error[0] != '\0';
}

static void set_error(struct calc *calc, int column, const char *fmt, ...)
{
	va_list ap;

	if (failed(calc))
		return;		/* keep the first error: it is the cause */
	va_start(ap, fmt);
	vsnprintf(calc->error, sizeof(calc->error), fmt, ap);
	va_end(ap);
	calc->error_column = column;
}

static void next_token(struct lexer *lx)
{
	struct token *tok = &lx->tok;

	while (isspace((unsigned char)*lx->pos))
		lx->pos++;
	memset(tok, 0, sizeof(*tok));
	tok->column = (int)(lx->pos - lx->src) + 1;

	if (*lx->pos == '\0' || *lx->pos == '#') {	/* '#' starts a comment */
		tok->kind = TOK_END;
	} else if (isdigit((unsigned char)*lx->pos) || *lx->pos == '.') {
		char *end;

		errno = 0;
		tok->number = strtod(lx->pos, &end);
		tok->kind = (end == lx->pos || errno == ERANGE) ? TOK_INVALID : TOK_NUMBER;
		tok->text[0] = *lx->pos;
		lx->pos = end == lx->pos ? lx->pos + 1 : end;
	} else if (isalpha((unsigned char)*lx->pos) || *lx->pos == '_') {
		size_t len = 0;

		while (isalnum((unsigned char)lx->pos[len]) || lx->pos[len] == '_')
			len++;
		if (len > MAX_NAME) {
			tok->kind = TOK_INVALID;
			tok->text[0] = *lx->pos;
		} else {
			memcpy(tok->text, lx->pos, len);
			tok->kind = strcmp(tok->text, "let") == 0 ? TOK_LET : TOK_IDENT;
		}
		lx->pos += len;
	} else {
		tok->kind = strchr("+-*/%^(),=", *lx->pos) ? TOK_OP : TOK_INVALID;
		tok->text[0] = *lx->pos++;
	}
}

static bool is_op(const struct lexer *lx, char op)
{
	return lx->tok.kind == TOK_OP && lx->tok.text[0] == op;
}

static bool expect_op(struct calc *calc, struct lexer *lx, char op)
{
	if (!is_op(lx, op)) {
		set_error(calc, lx->tok.column, "expected '%c'", op);
		return false;
	}
	next_token(lx);
	return true;
}

/* A node made from @tok: its column, and its number, name or operator. */
static struct node *new_node(struct calc *calc, enum node_kind kind, const struct token *tok)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n) {
		set_error(calc, tok->column, "out of memory");
		return NULL;
	}
	n->kind = kind;
	n->column = tok->column;
	n->number = tok->number;
	n->op = tok->text[0];
	memcpy(n->name, tok->text, sizeof(n->name));
	return n;
}

static void free_node(struct node *n)
{
	for (int i = 0; n && i < MAX_ARGS; i++)
		free_node(n->kids[i]);
	free(n);
}

/* An operator node over @left (and @right), which are NULL if their parse
 * failed: then, or if memory runs out, it frees them and returns NULL. */
static struct node *new_operator(struct calc *calc, enum node_kind kind, const struct token *op,
				 struct node *left, struct node *right)
{
	struct node *n = NULL;

	if (left && (right || kind == NODE_UNARY))
		n = new_node(calc, kind, op);
	if (!n) {
		free_node(left);
		free_node(right);
		return NULL;
	}
	n->kids[0] = left;
	n->kids[1] = right;
	return n;
}

static struct node *parse_expr(struct calc *calc, struct lexer *lx);
static struct node *parse_unary(struct calc *calc, struct lexer *lx);

static void report_unexpected(struct calc *calc, const struct token *tok)
{
	if (tok->kind == TOK_END)
		set_error(calc, tok->column, "unexpected end of input");
	else if (tok->kind == TOK_INVALID)
		set_error(calc, tok->column, "invalid name, number or character at '%s'", tok->text);
	else
		set_error(calc, tok->column, "unexpected '%s'", tok->text);
}

/* IDENT '(' args? ')', with the identifier already consumed. */
static struct node *parse_call(struct calc *calc, struct lexer *lx, const struct token *name)
{
	struct node *call = new_node(calc, NODE_CALL, name);

	if (!call)
		return NULL;
	next_token(lx);		/* '(' */
	while (!is_op(lx, ')')) {
		if (call->nargs == MAX_ARGS) {
			set_error(calc, lx->tok.column, "too many arguments (at most %d)", MAX_ARGS);
			goto fail;
		}
		call->kids[call->nargs] = parse_expr(calc, lx);
		if (!call->kids[call->nargs++])
			goto fail;
		if (!is_op(lx, ','))
			break;
		next_token(lx);
	}
	if (!expect_op(calc, lx, ')'))
		goto fail;
	return call;
fail:
	free_node(call);
	return NULL;
}

static struct node *parse_primary(struct calc *calc, struct lexer *lx)
{
	struct token tok = lx->tok;
	struct node *n;

	if (tok.kind == TOK_NUMBER || tok.kind == TOK_IDENT) {
		next_token(lx);
		if (tok.kind == TOK_IDENT && is_op(lx, '('))
			return parse_call(calc, lx, &tok);
		return new_node(calc, tok.kind == TOK_NUMBER ? NODE_NUMBER : NODE_VARIABLE, &tok);
	}
	if (!is_op(lx, '(')) {
		report_unexpected(calc, &tok);
		return NULL;
	}
	next_token(lx);
	n = parse_expr(calc, lx);
	if (n && !expect_op(calc, lx, ')')) {
		free_node(n);
		return NULL;
	}
	return n;
}

static struct node *parse_factor(struct calc *calc, struct lexer *lx)
{
	struct node *base = parse_primary(calc, lx);
	struct token op = lx->tok;

	if (!base || !is_op(lx, '^'))
		return base;
	next_token(lx);
	return new_operator(calc, NODE_BINARY, &op, base, parse_unary(calc, lx));
}

static struct node *parse_unary(struct calc *calc, struct lexer *lx)
{
	struct token op = lx->tok;

	if (!is_op(lx, '-') && !is_op(lx, '+'))
		return parse_factor(calc, lx);
	next_token(lx);
	return new_operator(calc, NODE_UNARY, &op, parse_unary(calc, lx), NULL);
}

static struct node *parse_term(struct calc *calc, struct lexer *lx)
{
	struct node *left = parse_unary(calc, lx);

	while (left && (is_op(lx, '*') || is_op(lx, '/') || is_op(lx, '%'))) {
		struct token op = lx->tok;

		next_token(lx);
		left = new_operator(calc, NODE_BINARY, &op, left, parse_unary(calc, lx));
	}
	return left;
}

static struct node *parse_expr(struct calc *calc, struct lexer *lx)
{
	struct node *left = parse_term(calc, lx);

	while (left && (is_op(lx, '+') || is_op(lx, '-'))) {
		struct token op = lx->tok;

		next_token(lx);
		left = new_operator(calc, NODE_BINARY, &op, left, parse_term(calc, lx));
	}
	return left;
}

static double fn_sqrt(const double *a, int n) { (void)n; return sqrt(a[0]); }
static double fn_abs(const double *a, int n) { (void)n; return fabs(a[0]); }

static double fn_min(const double *a, int n)
{
	double m = a[0];

	while (--n > 0)
		m = fmin(m, a[n]);
	return m;
}

static double fn_max(const double *a, int n)
{
	double m = a[0];

	while (--n > 0)
		m = fmax(m, a[n]);
	return m;
}

static const struct builtin {
	const char *name;
	int min_args, max_args;
	double (*fn)(const double *args, int nargs);
} builtins[] = {
	{ "sqrt", 1, 1, fn_sqrt },
	{ "abs", 1, 1, fn_abs },
	{ "min", 1, MAX_ARGS, fn_min },
	{ "max", 1, MAX_ARGS, fn_max },
};

static const struct builtin *find_builtin(const char *name)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (strcmp(builtins[i].name, name) == 0)
			return &builtins[i];
	return NULL;
}

static struct variable *find_variable(struct calc *calc, const char *name)
{
	for (int i = 0; i < calc->nvars; i++)
		if (strcmp(calc->vars[i].name, name) == 0)
			return &calc->vars[i];
	return NULL;
}

static bool set_variable(struct calc *calc, const char *name, double value)
{
	struct variable *var = find_variable(calc, name);

	if (!var) {
		if (calc->nvars == MAX_VARS)
			return false;
		var = &calc->vars[calc->nvars++];
		memcpy(var->name, name, sizeof(var->name));
	}
	var->value = value;
	return true;
}

static double eval(struct calc *calc, const struct node *n);

static double eval_binary(struct calc *calc, const struct node *n)
{
	double l = eval(calc, n->kids[0]);
	double r = eval(calc, n->kids[1]);

	switch (n->op) {
	case '+': return l + r;
	case '-': return l - r;
	case '*': return l * r;
	case '^': return pow(l, r);
	case '/':
	case '%':
		if (r == 0) {
			set_error(calc, n->column, "division by zero");
			return 0;
		}
		return n->op == '/' ? l / r : fmod(l, r);
	}
	return 0;
}

static double eval_call(struct calc *calc, const struct node *n)
{
	const struct builtin *b = find_builtin(n->name);
	double args[MAX_ARGS];

	if (!b) {
		set_error(calc, n->column, "unknown function '%s'", n->name);
		return 0;
	}
	if (n->nargs < b->min_args || n->nargs > b->max_args) {
		set_error(calc, n->column, "wrong number of arguments to '%s'", n->name);
		return 0;
	}
	for (int i = 0; i < n->nargs; i++)
		args[i] = eval(calc, n->kids[i]);
	return b->fn(args, n->nargs);
}

static double eval(struct calc *calc, const struct node *n)
{
	const struct variable *var;

	switch (n->kind) {
	case NODE_NUMBER:
		return n->number;
	case NODE_VARIABLE:
		var = find_variable(calc, n->name);
		if (!var) {
			set_error(calc, n->column, "unknown variable '%s'", n->name);
			return 0;
		}
		return var->value;
	case NODE_UNARY:
		return n->op == '-' ? -eval(calc, n->kids[0]) : eval(calc, n->kids[0]);
	case NODE_BINARY:
		return eval_binary(calc, n);
	case NODE_CALL:
		return eval_call(calc, n);
	}
	return 0;
}

/* Parse, evaluate and print one statement; false if it failed. */
static bool run_statement(struct calc *calc, const char *line)
{
	struct lexer lx = { .src = line, .pos = line };
	char name[MAX_NAME + 1] = "";
	struct node *tree;
	double value = 0;

	calc->error[0] = '\0';
	next_token(&lx);
	if (lx.tok.kind == TOK_END)
		return true;	/* blank, or only a comment */
	if (lx.tok.kind == TOK_LET) {
		next_token(&lx);
		if (lx.tok.kind != TOK_IDENT)
			set_error(calc, lx.tok.column, "expected a name after 'let'");
		memcpy(name, lx.tok.text, sizeof(name));
		next_token(&lx);
		if (!failed(calc))
			expect_op(calc, &lx, '=');
	}
	tree = failed(calc) ? NULL : parse_expr(calc, &lx);
	if (tree && lx.tok.kind != TOK_END)
		report_unexpected(calc, &lx.tok);
	if (!failed(calc))
		value = eval(calc, tree);
	if (!failed(calc) && name[0] && !set_variable(calc, name, value))
		set_error(calc, 1, "too many variables (at most %d)", MAX_VARS);
	free_node(tree);

	if (failed(calc)) {
		fprintf(stderr, "calc: error: column %d: %s\n  %s\n  %*s^\n", calc->error_column,
			calc->error, line, calc->error_column - 1, "");
		return false;
	}
	if (name[0])
		printf("%s = ", name);
	printf("%.15g\n", value);
	return true;
}

static int run_stdin(struct calc *calc)
{
	char line[MAX_LINE];
	int status = 0;

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!run_statement(calc, line))
			status = 1;
	}
	return status;
}

int main(int argc, char **argv)
{
	struct calc *calc = calloc(1, sizeof(*calc));
	int status = 0;

	if (!calc) {
		perror("calc");
		return 1;
	}
	set_variable(calc, "pi", 3.14159265358979323846);
	set_variable(calc, "e", 2.71828182845904523536);

	if (argc < 2)
		status = run_stdin(calc);
	for (int i = 1; i < argc; i++)
		if (!run_statement(calc, argv[i]))
			status = 1;
	free(calc);
	return status;
}

/*
 * test_msg_doc.c - docs/PROTOCOL.md checked against lib/msg and lib/wire.
 *
 *   - the "## Messages" table has one row per descriptor and a descriptor
 *     per row, with equal op, name (" (push)" added for MSG_PUSH) and
 *     request and reply columns equal to req_layout and rep_layout;
 *   - each row's layouts, read by a small interpreter (walk_*), consume
 *     exactly the bytes msg_encode wrote for every filled struct of
 *     msg_cases.h, and with tagged values each field is where the layout
 *     says it is (see msg_cases.h): the doc is checked against the
 *     encoders, not only against the descriptors' strings;
 *   - the composite types (fid, time, attr, statfs) are expanded from the
 *     "## Value types" table, which is walked against wire_put_*, and the
 *     "## Frames" table against wire_hdr_encode;
 *   - the prose list of changes kept in the duplicate request cache is the
 *     set of MSG_DRC descriptors;
 *   - the interpreter refuses wrong layouts (so it can fail).
 *
 * The doc is found as docs/PROTOCOL.md under $CAIRN_SRC_DIR, the working
 * directory, or a parent of this binary's directory (tests/run.sh runs
 * unit tests in a scratch directory, not in the repository, so the last
 * is the usual case); a missing doc fails the tests.
 *
 * `test_msg_doc --vectors` prints, instead of testing, one line per
 * message and direction: NAME req|rep HEX, the tagged encoding;
 * tests/integration/test_proto.py feeds those to the Python client's
 * codec, which reads the same table.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/msg.h"
#include "../../lib/wire.h"
#include "check.h"
#include "msg_cases.h"

#define TIMES "\xc3\x97"        /* "×" in UTF-8 */
#define EMPTY "\xe2\x80\x93"    /* "–" (en dash): an empty payload */

/* The bits of tag_value that do not depend on ctr; the zero bits between
 * hash and counter are included, so a misaligned read shows. */
static uint64_t tag_mask(int kind)
{
	switch (kind) {
	case K_U8:  return 0xff;
	case K_U16: return 0xffff;
	case K_U32:
	case K_I32: return 0xfffff000u;
	default:    return 0xffffffffff000000ull;
	}
}

/* --- docs/PROTOCOL.md --------------------------------------------------------------- */

struct row {
	int line;
	int n;
	char *c[6];
};

struct doc {
	char *text;            /* the file, NUL-terminated */
	char *cut[3];          /* copies the tables are cut from */
	struct row msg[64];    /* "## Messages": [0] is the header row */
	int nmsg;
	struct row vt[16];     /* "## Value types" */
	int nvt;
	struct row fr[16];     /* "## Frames" */
	int nfr;
};

static struct doc doc;
static const char *doc_file;

static int readable(const char *dir, char *path, size_t size)
{
	char lib[PATH_MAX];

	if (snprintf(path, size, "%s/docs/PROTOCOL.md", dir) >= (int)size ||
	    snprintf(lib, sizeof(lib), "%s/lib/msg.h", dir) >= (int)sizeof(lib))
		return 0;
	return !access(path, R_OK) && !access(lib, R_OK);
}

static const char *find_doc(void)
{
	static char path[PATH_MAX];
	char dir[PATH_MAX];
	const char *env = getenv("CAIRN_SRC_DIR");
	ssize_t n;

	if (env && *env)
		return readable(env, path, sizeof(path)) ? path : NULL;
	if (readable(".", path, sizeof(path)))
		return path;
	n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n <= 0)
		return NULL;
	dir[n] = '\0';
	for (int up = 0; up < 6; up++) {
		char *slash = strrchr(dir, '/');

		if (!slash || slash == dir)
			break;
		*slash = '\0';
		if (readable(dir, path, sizeof(path)))
			return path;
	}
	return NULL;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/*
 * The first table after the line `heading` (before the next "## "), cut
 * out of a private copy: rows[0] is the header row, the separator row is
 * skipped. Returns the number of rows, or -1 without the heading.
 */
static int parse_table(const char *heading, char **cut, struct row *rows,
		       int max)
{
	char *p = strdup(doc.text), *e;
	int line = 1, nrows = 0, found = 0;

	if (!p)
		abort();
	*cut = p;
	for (; *p; p = e + 1, line++) {
		e = strchr(p, '\n');
		if (!e)
			e = p + strlen(p) - 1;
		else
			*e = '\0';
		if (!found) {
			found = !strcmp(p, heading);
			continue;
		}
		if (p[0] != '|') {
			if (nrows || !strncmp(p, "## ", 3))
				break;
			continue;
		}
		struct row r = { .line = line };
		char *q = p + 1, *bar;
		int sep = 1;

		while ((bar = strchr(q, '|')) && r.n < 6) {
			*bar = '\0';
			r.c[r.n] = trim(q);
			sep &= strspn(r.c[r.n], "-: ") == strlen(r.c[r.n]);
			r.n++;
			q = bar + 1;
		}
		if (sep)
			continue;
		if (nrows == max)
			break;
		rows[nrows++] = r;
	}
	return found ? nrows : -1;
}

static int load_doc(void)
{
	FILE *fp;
	long size;

	if (doc.text)
		return 0;
	doc_file = find_doc();
	if (!doc_file) {
		fprintf(stderr, "  cannot find docs/PROTOCOL.md (with lib/msg.h "
			"beside docs/) in $CAIRN_SRC_DIR, the working directory "
			"or above this binary\n");
		return -1;
	}
	fp = fopen(doc_file, "r");
	if (!fp || fseek(fp, 0, SEEK_END) || (size = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET)) {
		fprintf(stderr, "  cannot read %s\n", doc_file);
		if (fp)
			fclose(fp);
		return -1;
	}
	doc.text = xmalloc(size + 1);
	if (fread(doc.text, 1, size, fp) != (size_t)size) {
		fprintf(stderr, "  short read of %s\n", doc_file);
		fclose(fp);
		free(doc.text);
		doc.text = NULL;
		return -1;
	}
	fclose(fp);
	doc.text[size] = '\0';
	doc.nmsg = parse_table("## Messages", &doc.cut[0], doc.msg, 64);
	doc.nvt = parse_table("## Value types", &doc.cut[1], doc.vt, 16);
	doc.nfr = parse_table("## Frames", &doc.cut[2], doc.fr, 16);
	return 0;
}

static void free_doc(void)
{
	for (int i = 0; i < 3; i++)
		free(doc.cut[i]);
	free(doc.text);
}

/* --- the layout interpreter ---------------------------------------------------------- */

/*
 * A layout is what a table cell says: "–" (empty), or items separated by
 * commas outside parentheses. An item is "TYPE [field name]", "N bytes
 * [field name]", or "[then ]VAR × (LAYOUT)", repeating LAYOUT as often as
 * the integer field VAR read before says. A parenthesis after a field
 * name is a remark, except "(`VALUE`)", which is the field's value. TYPE
 * is an integer type, str, blob, or a row of the Value types table, whose
 * encoding is itself a layout, optionally ending in "(N bytes)".
 */
struct walk {
	struct rbuf r;
	const char *root;   /* the message's whole layout */
	int tags;           /* check tagged values (struct fill TAGGED) */
	int depth;
	struct { char name[48]; uint64_t v; } var[32];
	int nvar;
	char err[512];
};

static int walk_layout(struct walk *wk, const char *s, size_t n);

static int walk_fail(struct walk *wk, const char *fmt, const char *s,
		     size_t n, const char *more)
{
	if (!wk->err[0])
		snprintf(wk->err, sizeof(wk->err), fmt, (int)n, s, more,
			 wk->r.off, wk->r.len);
	return -1;
}

static const struct { const char *name; int kind; unsigned size; } ints[] = {
	{ "u8", K_U8, 1 }, { "u16", K_U16, 2 }, { "u32", K_U32, 4 },
	{ "u64", K_U64, 8 }, { "i32", K_I32, 4 }, { "i64", K_I64, 8 },
};

/* The field name of s[0..n) (parentheses dropped, spaces collapsed) into
 * name; a "(`VALUE`)" remark into *value (returns 1 if there was one). */
static int field_name(const char *s, size_t n, char *name, size_t size,
		      uint64_t *value)
{
	size_t o = 0;
	int depth = 0, has = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '(') {
			if (depth++ == 0 && i + 1 < n && s[i + 1] == '`') {
				*value = strtoull(s + i + 2, NULL, 0);
				has = 1;
			}
			continue;
		}
		if (s[i] == ')') {
			depth--;
			continue;
		}
		if (depth)
			continue;
		if (s[i] == ' ' && (o == 0 || name[o - 1] == ' '))
			continue;
		if (o + 1 < size)
			name[o++] = s[i];
	}
	while (o && name[o - 1] == ' ')
		o--;
	name[o] = '\0';
	return has;
}

/* Is `name` the count of a "name × (...)" in the message's layout? */
static int is_count(const struct walk *wk, const char *name)
{
	char pat[64];
	const char *p = wk->root;

	snprintf(pat, sizeof(pat), "%s " TIMES " (", name);
	while ((p = strstr(p, pat))) {
		if (p == wk->root || p[-1] == ' ' || p[-1] == ',')
			return 1;
		p++;
	}
	return 0;
}

static int walk_int(struct walk *wk, int kind, unsigned size, const char *s,
		    size_t n, const char *rest, size_t rn)
{
	char name[48];
	uint64_t v = 0, want = 0;
	int fixed = field_name(rest, rn, name, sizeof(name), &want);

	switch (size) {
	case 1: v = wire_get_u8(&wk->r); break;
	case 2: v = wire_get_u16(&wk->r); break;
	case 4: v = wire_get_u32(&wk->r); break;
	case 8: v = wire_get_u64(&wk->r); break;
	}
	if (wk->r.err)
		return walk_fail(wk, "'%.*s': past the end%s (at %zu of %zu)",
				 s, n, "");
	if (fixed && v != want)
		return walk_fail(wk, "'%.*s': the encoder wrote another value"
				 "%s (at %zu of %zu)", s, n, "");
	if (wk->tags && !fixed && name[0] && !is_count(wk, name) &&
	    (v & tag_mask(kind)) != (tag_value(kind, name, 0) & tag_mask(kind)))
		return walk_fail(wk, "'%.*s': the encoder wrote a field that is "
				 "not '%s' here (at %zu of %zu)", s, n, name);
	if (wk->nvar < (int)(sizeof(wk->var) / sizeof(wk->var[0]))) {
		snprintf(wk->var[wk->nvar].name, sizeof(wk->var[0].name),
			 "%s", name);
		wk->var[wk->nvar++].v = v;
	}
	return 0;
}

/* str and blob: the content starts "name#" when tagged and non-empty. */
static int walk_sized(struct walk *wk, int blob, const char *s, size_t n,
		      const char *rest, size_t rn)
{
	char name[48];
	uint64_t unused;
	size_t len;
	const char *p;

	field_name(rest, rn, name, sizeof(name), &unused);
	if (blob)
		p = wire_get_blob(&wk->r, &len, WIRE_MAX_PAYLOAD);
	else
		p = wire_get_str(&wk->r, &len, 65535);
	if (!p)
		return walk_fail(wk, "'%.*s': past the end%s (at %zu of %zu)",
				 s, n, "");
	if (wk->tags && len && name[0] &&
	    (len <= strlen(name) || memcmp(p, name, strlen(name)) ||
	     p[strlen(name)] != '#'))
		return walk_fail(wk, "'%.*s': the encoder wrote a field that is "
				 "not '%s' here (at %zu of %zu)", s, n, name);
	return 0;
}

/* A composite type: its Value types row, walked, and its size checked. */
static int walk_composite(struct walk *wk, const struct row *r, const char *s,
			  size_t n)
{
	const char *def = r->c[1];
	size_t dn = strlen(def), start = wk->r.off;
	unsigned size = 0;
	const char *open = strrchr(def, '(');

	if (open && def[dn - 1] == ')' &&
	    sscanf(open, "(%u bytes)", &size) == 1) {
		dn = open - def;
		while (dn && def[dn - 1] == ' ')
			dn--;
	}
	if (++wk->depth > 8)
		return walk_fail(wk, "'%.*s': types nest too deep%s (at %zu of "
				 "%zu)", s, n, "");
	if (walk_layout(wk, def, dn))
		return -1;
	wk->depth--;
	if (size && wk->r.off - start != size)
		return walk_fail(wk, "'%.*s': %s says a different size (at %zu "
				 "of %zu)", s, n, "the Value types table");
	return 0;
}

/* The first pat in s[0..n), or NULL. */
static const char *find(const char *s, size_t n, const char *pat)
{
	size_t k = strlen(pat);

	for (size_t i = 0; i + k <= n; i++)
		if (!strncmp(s + i, pat, k))
			return s + i;
	return NULL;
}

static int walk_item(struct walk *wk, const char *s, size_t n)
{
	const char *x, *sp;
	size_t wn;

	if (n >= 5 && !memcmp(s, "then ", 5))
		s += 5, n -= 5;
	x = find(s, n, " " TIMES " (");
	if (x) {
		const char *in = x + strlen(" " TIMES " (");
		char var[48];
		uint64_t unused, count = 0;
		int found = 0;

		if (s[n - 1] != ')')
			return walk_fail(wk, "'%.*s': no ')' at the end%s (at "
					 "%zu of %zu)", s, n, "");
		field_name(s, x - s, var, sizeof(var), &unused);
		for (int i = wk->nvar - 1; i >= 0 && !found; i--)
			if (!strcmp(wk->var[i].name, var))
				count = wk->var[i].v, found = 1;
		if (!found)
			return walk_fail(wk, "'%.*s': no field '%s' before it "
					 "(at %zu of %zu)", s, n, var);
		for (uint64_t i = 0; i < count; i++)
			if (walk_layout(wk, in, s + n - 1 - in))
				return -1;
		return 0;
	}
	sp = memchr(s, ' ', n);
	wn = sp ? (size_t)(sp - s) : n;
	const char *rest = s + wn;
	size_t rn = n - wn;

	if (strspn(s, "0123456789") == wn && rn >= 6 &&
	    !memcmp(rest, " bytes", 6)) {
		size_t len = strtoul(s, NULL, 10);
		char name[48];
		uint64_t unused;
		const uint8_t *p = wire_get_bytes(&wk->r, len);
		uint32_t h;

		field_name(rest + 6, rn - 6, name, sizeof(name), &unused);
		h = name_hash(name);
		if (!p)
			return walk_fail(wk, "'%.*s': past the end%s (at %zu "
					 "of %zu)", s, n, "");
		for (size_t i = 0; wk->tags && i < len; i++)
			if (p[i] != (uint8_t)(h + 7 * i))
				return walk_fail(wk, "'%.*s': the encoder wrote "
						 "a field that is not '%s' here"
						 " (at %zu of %zu)", s, n,
						 name);
		return 0;
	}
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (strlen(ints[i].name) == wn && !memcmp(s, ints[i].name, wn))
			return walk_int(wk, ints[i].kind, ints[i].size, s, n,
					rest, rn);
	if (wn == 3 && !memcmp(s, "str", 3))
		return walk_sized(wk, 0, s, n, rest, rn);
	if (wn == 4 && !memcmp(s, "blob", 4))
		return walk_sized(wk, 1, s, n, rest, rn);
	for (int i = 1; i < doc.nvt; i++)
		if (strlen(doc.vt[i].c[0]) == wn &&
		    !memcmp(s, doc.vt[i].c[0], wn) && doc.vt[i].n >= 2)
			return walk_composite(wk, &doc.vt[i], s, n);
	return walk_fail(wk, "'%.*s': unknown type%s (at %zu of %zu)", s, n,
			 "");
}

static int walk_layout(struct walk *wk, const char *s, size_t n)
{
	const char *end = s + n;

	if (n == strlen(EMPTY) && !memcmp(s, EMPTY, n))
		return 0;
	while (s < end) {
		const char *p = s;
		int depth = 0, tick = 0;

		for (; p < end; p++) {
			if (*p == '`')
				tick = !tick;
			else if (!tick && *p == '(')
				depth++;
			else if (!tick && *p == ')')
				depth--;
			else if (!tick && !depth && *p == ',')
				break;
		}
		const char *a = s, *b = p;
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		if (a == b)
			return walk_fail(wk, "'%.*s': empty item%s (at %zu of "
					 "%zu)", s, n, "");
		if (walk_item(wk, a, b - a))
			return -1;
		s = p < end ? p + 1 : end;
	}
	return 0;
}

/* Walk bytes p[0..len) by layout; 0 if it consumes exactly all of them. */
static int walk(const char *layout, int tags, const void *p, size_t len,
		char *err, size_t errsz)
{
	struct walk *wk = calloc(1, sizeof(*wk));
	int rc;

	if (!wk)
		abort();
	rbuf_init(&wk->r, p, len);
	wk->root = layout;
	wk->tags = tags;
	rc = walk_layout(wk, layout, strlen(layout));
	if (!rc && rbuf_left(&wk->r))
		rc = -1, snprintf(wk->err, sizeof(wk->err), "%zu of %zu bytes "
				  "left over", rbuf_left(&wk->r), len);
	snprintf(err, errsz, "%s", wk->err);
	free(wk);
	return rc;
}

/* The "acknowledged: ..." and "not acknowledged: ..." reply cells of a
 * push mean an empty payload (none is sent for the latter). */
static const char *payload_layout(const char *cell)
{
	return strncmp(cell, "acknowledged:", 13) &&
	       strncmp(cell, "not acknowledged:", 17) ? cell : EMPTY;
}

static const struct row *doc_row(unsigned op)
{
	for (int i = 1; i < doc.nmsg; i++)
		if (doc.msg[i].n >= 1 && strtoul(doc.msg[i].c[0], NULL, 10) == op)
			return &doc.msg[i];
	return NULL;
}

/* The table has one row per descriptor and the descriptor's strings. */
static void test_doc_table(void)
{
	size_t n;
	const struct msg_desc *d = msg_descs(&n);

	if (load_doc() || doc.nmsg < 2) {
		fprintf(stderr, "  no \"## Messages\" table in %s\n",
			doc_file ? doc_file : "docs/PROTOCOL.md");
		failed_here++;
		return;
	}
	const struct row *h = &doc.msg[0];
	CHECK(h->n == 4 && !strcmp(h->c[0], "op") && !strcmp(h->c[1], "name")
	      && !strcmp(h->c[2], "request") && !strcmp(h->c[3], "reply"));
	for (int i = 1; i < doc.nmsg; i++) {
		const struct row *r = &doc.msg[i];
		char *e = "";
		unsigned long op = r->n == 4 ? strtoul(r->c[0], &e, 10) : 0;
		const struct msg_desc *dd = !*e ? msg_desc(op) : NULL;

		if (r->n != 4) {
			fprintf(stderr, "  PROTOCOL.md:%d: a row of %d cells, "
				"not 4\n", r->line, r->n);
			failed_here++;
			continue;
		}
		if (!dd) {
			fprintf(stderr, "  PROTOCOL.md:%d: row for op '%s' "
				"but no descriptor in lib/msg.c\n", r->line,
				r->c[0]);
			failed_here++;
			continue;
		}
		if (doc_row(op) != r) {
			fprintf(stderr, "  PROTOCOL.md:%d: a second row for "
				"op %lu\n", r->line, op);
			failed_here++;
		}
		size_t nl = strlen(dd->name);
		int push = dd->flags & MSG_PUSH;
		if (strncmp(r->c[1], dd->name, nl) ||
		    strcmp(r->c[1] + nl, push ? " (push)" : "")) {
			fprintf(stderr, "  PROTOCOL.md:%d: op %lu is named "
				"'%s', the descriptor '%s'%s\n", r->line, op,
				r->c[1], dd->name, push ? " (push)" : "");
			failed_here++;
		}
		for (int dir = 0; dir < 2; dir++) {
			const char *lay = dir ? dd->rep_layout : dd->req_layout;

			if (strcmp(r->c[2 + dir], lay)) {
				fprintf(stderr, "  PROTOCOL.md:%d: %s %s is\n"
					"    doc:  '%s'\n    desc: '%s'\n",
					r->line, dd->name, dir_name[dir],
					r->c[2 + dir], lay);
				failed_here++;
			}
		}
		if (payload_layout(r->c[3]) != r->c[3] && !push) {
			fprintf(stderr, "  PROTOCOL.md:%d: only a push's reply "
				"is an acknowledgement\n", r->line);
			failed_here++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!doc_row(d[i].op)) {
			fprintf(stderr, "  PROTOCOL.md has no row for op %u "
				"%s\n", d[i].op, d[i].name);
			failed_here++;
		}
	}
}

/* Each row's layouts, read by the interpreter, consume exactly what
 * msg_encode writes, field by field. */
static void test_doc_layouts_walk_encodings(void)
{
	if (load_doc() || doc.nmsg < 2) {
		failed_here++;
		return;
	}
	for (size_t k = 0; k < NCASES; k++) {
		const struct row *r = doc_row(cases[k].op);

		if (!r || r->n != 4)
			continue;   /* test_doc_table reports it */
		for (int dir = 0; dir < 2; dir++) {
			for (int v = 0; v < NVARIANT; v++) {
				struct fill f;
				union msg_any m;
				struct wbuf w;
				char err[512];

				if (encode_case(&cases[k], dir, v, &f, &m, &w))
					goto next;
				if (walk(payload_layout(r->c[2 + dir]),
					 v == TAGGED, w.data, w.len, err,
					 sizeof(err))) {
					fprintf(stderr, "  PROTOCOL.md:%d: %s "
						"%s (%s values, %zu bytes): "
						"%s\n", r->line,
						msg_name(cases[k].op),
						dir_name[dir], variant_name[v],
						w.len, err);
					failed_here++;
				}
next:
				wbuf_free(&w);
				fill_free(&f);
			}
		}
	}
}

static const struct row *vt_row(const char *type)
{
	for (int i = 1; i < doc.nvt; i++)
		if (!strcmp(doc.vt[i].c[0], type) && doc.vt[i].n >= 2)
			return &doc.vt[i];
	return NULL;
}

/* The Value types table against lib/wire: each composite row walks what
 * wire_put_* writes; str and blob have the length prefixes wire uses. */
static void test_doc_value_types(void)
{
	struct fill f = { .variant = TAGGED };
	struct cairn_fid fid;
	struct cairn_time t;
	struct cairn_attr a;
	struct cairn_statfs sf;
	struct wbuf w;
	char err[512];
	const struct row *r;

	if (load_doc() || doc.nvt < 2) {
		fprintf(stderr, "  no \"## Value types\" table\n");
		failed_here++;
		return;
	}
	r = vt_row("u8/u16/u32/u64, i32/i64");
	CHECK(r && !strcmp(r->c[1], "little-endian"));
	r = vt_row("str");
	CHECK(r && !strncmp(r->c[1], "u16 length, then that many bytes", 32));
	r = vt_row("blob");
	CHECK(r && !strncmp(r->c[1], "u32 length, then that many bytes", 32));

	static const char *const comp[] = { "fid", "time", "attr", "statfs" };
	for (size_t i = 0; i < sizeof(comp) / sizeof(comp[0]); i++) {
		wbuf_init(&w);
		switch (i) {
		case 0: fill_fid(&f, &fid); wire_put_fid(&w, &fid); break;
		case 1: fill_time(&f, &t); wire_put_time(&w, &t); break;
		case 2: fill_attr(&f, &a); wire_put_attr(&w, &a); break;
		case 3: fill_statfs(&f, &sf); wire_put_statfs(&w, &sf); break;
		}
		if (!vt_row(comp[i])) {
			fprintf(stderr, "  Value types has no row '%s'\n",
				comp[i]);
			failed_here++;
		} else if (walk(comp[i], 1, w.data, w.len, err, sizeof(err))) {
			fprintf(stderr, "  Value types '%s' against wire_put_%s"
				": %s\n", comp[i], comp[i], err);
			failed_here++;
		}
		wbuf_free(&w);
	}
}

/* The Frames table against wire_hdr_encode: types and offsets. */
static void test_doc_frame_header(void)
{
	struct wire_hdr h;
	uint8_t buf[WIRE_HDR_SIZE];
	char layout[512] = "", err[512];
	unsigned off = 0;

	if (load_doc() || doc.nfr < 2) {
		fprintf(stderr, "  no \"## Frames\" table\n");
		failed_here++;
		return;
	}
	for (int i = 1; i < doc.nfr; i++) {
		const struct row *r = &doc.fr[i];
		unsigned size = 0;

		if (r->n < 3) {
			failed_here++;
			continue;
		}
		CHECK_EQ(strtoul(r->c[0], NULL, 10), off);
		for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
			if (!strcmp(r->c[1], ints[k].name))
				size = ints[k].size;
		if (!size) {
			fprintf(stderr, "  Frames: type '%s'?\n", r->c[1]);
			failed_here++;
		}
		off += size;
		snprintf(layout + strlen(layout), sizeof(layout) - strlen(layout),
			 "%s%s %s", i > 1 ? ", " : "", r->c[1], r->c[2]);
	}
	CHECK_EQ(off, WIRE_HDR_SIZE);
	h.len = (uint32_t)tag_value(K_U32, "len", 1);
	h.op = (uint16_t)tag_value(K_U16, "op", 2);
	h.flags = (uint16_t)tag_value(K_U16, "flags", 3);
	h.id = (uint32_t)tag_value(K_U32, "id", 4);
	h.status = (int32_t)tag_value(K_I32, "status", 5);
	wire_hdr_encode(buf, &h);
	if (walk(layout, 1, buf, sizeof(buf), err, sizeof(err))) {
		fprintf(stderr, "  Frames '%s' against wire_hdr_encode: %s\n",
			layout, err);
		failed_here++;
	}
}

/* The duplicate request cache's ops, listed in prose, are MSG_DRC's. */
static void test_doc_drc_list(void)
{
	const char *key = "outcome of its recent changes (";
	const char *p, *e;
	size_t n;
	const struct msg_desc *d = msg_descs(&n);
	unsigned listed = 0, want = 0;

	if (load_doc())
		return (void)failed_here++;
	p = strstr(doc.text, key);
	e = p ? strchr(p, ')') : NULL;
	if (!e) {
		fprintf(stderr, "  PROTOCOL.md: no '%s...)' list\n", key);
		failed_here++;
		return;
	}
	p += strlen(key);
	while (p < e) {
		size_t wn = strcspn(p, ",) \n");
		char name[32];

		snprintf(name, sizeof(name), "%.*s", (int)wn, p);
		p += wn;
		p += strspn(p, ", \n");
		if (!name[0])
			continue;
		size_t i = 0;
		while (i < n && strcmp(d[i].name, name))
			i++;
		if (i == n || !(d[i].flags & MSG_DRC)) {
			fprintf(stderr, "  PROTOCOL.md lists %s as kept in the "
				"duplicate request cache; its descriptor does "
				"not say MSG_DRC\n", name);
			failed_here++;
		} else {
			listed++;
		}
	}
	for (size_t i = 0; i < n; i++)
		want += !!(d[i].flags & MSG_DRC);
	CHECK_EQ(listed, want);
}

/* A layout edit must be noticed: the interpreter refuses an encoding
 * read by a wrong layout (a self-test of the checker). */
static void test_walker_refuses(void)
{
	static const struct { unsigned op; const char *wrong; } bad[] = {
		{ OP_CREATE, "fid dir, str name, u32 mode, u32 gid, u32 uid, "
			     "u32 rdev, u32 flags" },     /* swapped names */
		{ OP_CREATE, "fid dir, str name, u64 mode, u32 gid, u32 rdev, "
			     "u32 flags" },               /* same size */
		{ OP_SETATTR, "fid, u32 valid, u32 mode, u32 uid, u32 gid, "
			      "u64 size, time atime, time mtime" },
		{ OP_READ, "fid, u64 offset, u16 length" },
		{ OP_LOOKUP, "fid dir, blob name" },
		{ OP_RENAME, "fid src dir, str dst name, fid dst dir, "
			     "str src name, u32 flags" },
		{ OP_HELLO, "u32 magic (`0x4e524144`), u32 version, 16 bytes "
			    "client id, u32 flags" },
		{ OP_HELLO, "u32 magic (`0x4e524143`), u32 version, 16 bytes "
			    "server id, u32 flags" },
		{ OP_CB_BREAK, "u32 count, count " TIMES " (fid, str name), "
			       "u8 more" },
		{ OP_CB_BREAK, "u32 count, fid, str name" },
		{ OP_FSYNC, "fid, u32 flags, sometype x" },
	};

	if (load_doc())
		return (void)failed_here++;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct tcase *c = NULL;
		struct fill f;
		union msg_any m;
		struct wbuf w;
		char err[512];

		for (size_t k = 0; k < NCASES; k++)
			if (cases[k].op == bad[i].op)
				c = &cases[k];
		if (!c || encode_case(c, 0, TAGGED, &f, &m, &w))
			continue;
		if (!walk(bad[i].wrong, 1, w.data, w.len, err, sizeof(err))) {
			fprintf(stderr, "  the interpreter accepts '%s' for %s\n",
				bad[i].wrong, msg_name(bad[i].op));
			failed_here++;
		}
		/* and the right one from the descriptor */
		if (walk(msg_desc(bad[i].op)->req_layout, 1, w.data, w.len, err,
			 sizeof(err))) {
			fprintf(stderr, "  %s: %s\n", msg_name(bad[i].op), err);
			failed_here++;
		}
		wbuf_free(&w);
		fill_free(&f);
	}
}

/* --- vectors for the Python client ----------------------------------------------------- */

static int print_vectors(void)
{
	for (size_t k = 0; k < NCASES; k++) {
		for (int dir = 0; dir < 2; dir++) {
			struct fill f;
			union msg_any m;
			struct wbuf w;

			if (encode_case(&cases[k], dir, TAGGED, &f, &m, &w))
				return 1;
			printf("%s %s ", msg_name(cases[k].op), dir ? "rep" : "req");
			for (size_t i = 0; i < w.len; i++)
				printf("%02x", w.data[i]);
			printf("\n");
			wbuf_free(&w);
			fill_free(&f);
		}
	}
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--vectors"))
		return print_vectors();
	run("msgdoc PROTOCOL.md message table matches the descriptors",
	    test_doc_table);
	run("msgdoc PROTOCOL.md layouts walk the encoders' bytes",
	    test_doc_layouts_walk_encodings);
	run("msgdoc PROTOCOL.md value types match lib/wire",
	    test_doc_value_types);
	run("msgdoc PROTOCOL.md frame header matches lib/wire",
	    test_doc_frame_header);
	run("msgdoc PROTOCOL.md DRC list matches MSG_DRC", test_doc_drc_list);
	run("msgdoc layout interpreter refuses wrong layouts",
	    test_walker_refuses);
	free_doc();
	return failed_total ? 1 : 0;
}

/*
 * fuzz_msg - every message decoder of lib/msg.c, requests and replies.
 *
 * Input: one selector byte, then a payload. The selector's low 7 bits are
 * the opcode (CB_BREAK is 64, so every opcode fits), bit 7 picks the
 * direction: 0 the request (or push), 1 the reply (or acknowledgement).
 * tests/fuzz/record.py writes captured traffic in this form. Built with
 * -DFUZZ_OP=N the opcode bits are ignored and N is used, so one message
 * can be fuzzed alone on the same corpus.
 *
 * For each input: msg_decode must accept or refuse with a reason, never
 * read outside the payload (the payload ends where the fuzzer's buffer
 * ends, so ASan sees any over-read) nor write outside union msg_any. On
 * success the decoded struct is encoded again and must give back the very
 * same bytes (the encoding is canonical: one value, one byte string); the
 * streamed parts (READDIR and BULKSTAT entries, CB_BREAK records,
 * ORPHAN_DROP FIDs, REMOVES, CREATES, CREATEATTR and LKRETURN entries)
 * are walked to the end and must yield exactly count items, and
 * ORPHAN_DROP, REMOVES, CREATES, CREATEATTR and LKRETURN encoded from
 * arrays of their items must be the
 * input again; the replies the
 * server builds in place (READ, GETXATTR/LISTXATTR, READDIR, BULKSTAT,
 * CB_BREAK) are built again that
 * way and must match too; decoded names go through the receivers' checks.
 *
 * A violated property calls abort() (not assert: it must hold in any
 * build), after printing what differed.
 *
 * At exit the target prints, per message and direction, how many inputs
 * were tried and how many decoded, so a run shows which decoders the
 * fuzzer actually reached (docs/RELIABILITY.md).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../lib/msg.h"

#define SEL_REPLY 0x80u
#define SEL_OP    0x7fu

static unsigned long tried[SEL_OP + 1][2], decoded[SEL_OP + 1][2];

static void print_stats(void)
{
	size_t n;
	const struct msg_desc *d = msg_descs(&n);
	unsigned long unknown = 0;

	for (unsigned op = 0; op <= SEL_OP; op++)
		if (!msg_desc(op))
			unknown += tried[op][0] + tried[op][1];
	fprintf(stderr, "fuzz_msg: %-12s %12s %12s %12s %12s\n", "op",
		"req tried", "req decoded", "rep tried", "rep decoded");
	for (size_t i = 0; i < n; i++) {
		unsigned op = d[i].op;

		fprintf(stderr, "fuzz_msg: %-12s %12lu %12lu %12lu %12lu\n",
			d[i].name, tried[op][0], decoded[op][0], tried[op][1],
			decoded[op][1]);
	}
	fprintf(stderr, "fuzz_msg: %-12s %12lu (refused: unknown opcode)\n",
		"unknown", unknown);
}

static void fail(const char *what, unsigned op, int reply,
		 const uint8_t *want, size_t wlen, const uint8_t *got,
		 size_t glen)
{
	fprintf(stderr, "fuzz_msg: %s %s: %s (input %zu bytes, re-encoded "
		"%zu)\n", msg_name(op), reply ? "reply" : "request", what, wlen,
		glen);
	for (size_t i = 0; i < wlen && i < glen; i++) {
		if (want[i] != got[i]) {
			fprintf(stderr, "fuzz_msg: first difference at byte %zu:"
				" input 0x%02x, re-encoded 0x%02x\n", i, want[i],
				got[i]);
			break;
		}
	}
	abort();
}

/* w must hold exactly p[0..len). Frees w. */
static void expect_same(struct wbuf *w, const char *how, unsigned op,
			int reply, const uint8_t *p, size_t len)
{
	if (w->err) {
		fprintf(stderr, "fuzz_msg: %s: encoder error %d\n", how, w->err);
		fail(how, op, reply, p, len, w->data, w->len);
	}
	if (w->len != len || (len && memcmp(w->data, p, len)))
		fail(how, op, reply, p, len, w->data, w->len);
	wbuf_free(w);
}

/* The receivers' acceptability checks must be total on any decoded str. */
static void check_name(const struct msg_str *s, int xattr)
{
	char *buf = malloc(s->len + 1);

	if (!buf)
		abort();
	if (xattr)
		(void)msg_xattr_name_check(s);
	else
		(void)msg_name_check(s);
	if (msg_str_copy(buf, s) != buf || strlen(buf) > s->len)
		abort();
	free(buf);
}

static void check_readdir(const struct msg_readdir_rep *rep, unsigned op,
			  const uint8_t *p, size_t len)
{
	struct rbuf it;
	struct msg_dirent e;
	struct wbuf w;
	uint32_t n = 0;
	size_t at;

	wbuf_init(&w);
	at = msg_readdir_rep_begin(&w);
	rbuf_init(&it, rep->ents.p, rep->ents.len);
	while (msg_dirent_next(&it, &e)) {
		check_name(&e.name, 0);
		msg_dirent_put(&w, &e);
		n++;
	}
	if (it.err || n != rep->count || rbuf_left(&it))
		fail("msg_dirent_next walk disagrees with count", op, 1, p, len,
		     w.data, w.len);
	msg_readdir_rep_end(&w, at, n, rep->eof);
	expect_same(&w, "rebuilt with msg_readdir_rep_begin/put/end", op, 1,
		    p, len);
}

static void check_bulkstat(const struct msg_bulkstat_rep *rep, unsigned op,
			   const uint8_t *p, size_t len)
{
	struct rbuf it;
	struct msg_dirent e;
	struct wbuf w;
	uint32_t n = 0;
	size_t at;

	wbuf_init(&w);
	at = msg_bulkstat_rep_begin(&w);
	rbuf_init(&it, rep->ents.p, rep->ents.len);
	while (msg_dirent_next(&it, &e)) {
		check_name(&e.name, 0);
		msg_dirent_put(&w, &e);
		n++;
	}
	if (it.err || n != rep->count || rbuf_left(&it))
		fail("msg_dirent_next walk disagrees with count", op, 1, p, len,
		     w.data, w.len);
	msg_bulkstat_rep_end(&w, at, &rep->dir, rep->new_cookie, n, rep->eof);
	expect_same(&w, "rebuilt with msg_bulkstat_rep_begin/put/end", op, 1,
		    p, len);
}

static void check_cb_break(const struct msg_cb_break *b, unsigned op,
			   const uint8_t *p, size_t len)
{
	struct rbuf it;
	struct msg_cbrec rec;
	struct wbuf w;
	uint32_t n = 0;
	size_t at;

	wbuf_init(&w);
	at = msg_cb_break_begin(&w);
	rbuf_init(&it, b->recs.p, b->recs.len);
	while (msg_cbrec_next(&it, &rec)) {
		if (rec.name.len)
			check_name(&rec.name, 0);
		msg_cbrec_put(&w, &rec);
		n++;
	}
	if (it.err || n != b->count || rbuf_left(&it))
		fail("msg_cbrec_next walk disagrees with count", op, 0, p, len,
		     w.data, w.len);
	msg_cb_break_end(&w, at, n);
	expect_same(&w, "rebuilt with msg_cb_break_begin/put/end", op, 0, p,
		    len);
}

/*
 * A streamed list of a decoded message walked to its end with next: an
 * array of its count items of esz bytes each (to free). It fails unless
 * the walk yields exactly count items and ends at the list's end.
 */
static void *walk_list(const struct msg_bytes *list, uint32_t count,
		       size_t esz, int (*next)(struct rbuf *, void *),
		       unsigned op, const uint8_t *p, size_t len)
{
	uint8_t *a = malloc((count ? count : 1) * esz);
	struct rbuf it;
	uint32_t n = 0;

	if (!a)
		abort();
	rbuf_init(&it, list->p, list->len);
	while (n < count && next(&it, a + (size_t)n * esz))
		n++;
	if (it.err || n != count || rbuf_left(&it) || next(&it, a))
		fail("the list's walk disagrees with its count", op, 0, p, len,
		     p, len);
	return a;
}

static int next_fid(struct rbuf *it, void *e)
{
	return msg_fid_next(it, e);
}

static int next_rment(struct rbuf *it, void *e)
{
	return msg_rment_next(it, e);
}

static int next_rment_at(struct rbuf *it, void *e)
{
	return msg_rment_at_next(it, e);
}

static int next_lkent(struct rbuf *it, void *e)
{
	return msg_lkent_next(it, e);
}

/* REMOVES and REMOVESAT: the entries walk to count, their names go
 * through the server's check, and sent from an array (as a client sends
 * them) they are the input again; the reply's statuses likewise. */
static void check_removes(const struct msg_removes_req *q, unsigned op,
			  const uint8_t *p, size_t len)
{
	struct msg_removes_req a = { .dir = q->dir, .count = q->count };
	struct msg_rment *e;
	struct wbuf w;

	if (q->ents)
		fail("decoded with ents set", op, 0, p, len, p, len);
	e = walk_list(&q->list, q->count, sizeof(*e),
		      op == OP_REMOVESAT ? next_rment_at : next_rment, op, p,
		      len);
	for (uint32_t i = 0; i < q->count; i++)
		check_name(&e[i].name, 0);
	a.ents = e;
	wbuf_init(&w);
	msg_encode(op, 0, &w, &a);
	expect_same(&w, "encoded from an array of the entries", op, 0, p, len);
	free(e);
}

/* LKRETURN: the locks walk to count and, sent from an array, are the
 * input again. */
static void check_lkreturn(const struct msg_lkreturn_req *q, unsigned op,
			   const uint8_t *p, size_t len)
{
	struct msg_lkreturn_req a = { .fid = q->fid, .flags = q->flags,
				      .count = q->count };
	struct msg_lkent *e;
	struct wbuf w;

	if (q->ents)
		fail("decoded with ents set", op, 0, p, len, p, len);
	e = walk_list(&q->list, q->count, sizeof(*e), next_lkent, op, p, len);
	a.ents = e;
	wbuf_init(&w);
	msg_encode(op, 0, &w, &a);
	expect_same(&w, "encoded from an array of the locks", op, 0, p, len);
	free(e);
}

static void check_removes_rep(const struct msg_removes_rep *r, unsigned op,
			      const uint8_t *p, size_t len)
{
	struct msg_removes_rep a = { .dir = r->dir, .count = r->count };
	int32_t *st = malloc((r->count ? r->count : 1) * sizeof(*st));
	struct wbuf w;

	if (!st)
		abort();
	if (r->status || r->list.len != (size_t)r->count * 4)
		fail("statuses disagree with count", op, 1, p, len, p, len);
	for (uint32_t i = 0; i < r->count; i++)
		st[i] = msg_removes_status(r, i);
	if (msg_removes_status(r, r->count) != -EPROTO)
		fail("a status past count", op, 1, p, len, p, len);
	a.status = st;
	wbuf_init(&w);
	msg_encode(op, 1, &w, &a);
	expect_same(&w, "encoded from an array of the statuses", op, 1, p,
		    len);
	free(st);
}

/* CREATES: request entries and reply entries walk to count, names go
 * through the server's check, and both encoded from arrays are the input
 * again. */
static void check_creates(const union msg_any *m, unsigned op, int reply,
			  const uint8_t *p, size_t len)
{
	const struct msg_creates_req *q = &m->creates_req;
	const struct msg_creates_rep *r = &m->creates_rep;
	uint32_t count = reply ? r->count : q->count, n = 0;
	struct msg_cent *ce = malloc((count ? count : 1) * sizeof(*ce));
	struct msg_crep *re = malloc((count ? count : 1) * sizeof(*re));
	union msg_any a;
	struct rbuf it;
	struct wbuf w;
	int ok;

	if (!ce || !re)
		abort();
	if (reply ? r->ents != NULL : q->ents != NULL)
		fail("decoded with ents set", op, reply, p, len, p, len);
	if (reply)
		rbuf_init(&it, r->list.p, r->list.len);
	else
		rbuf_init(&it, q->list.p, q->list.len);
	while (n < count && (reply ? msg_crep_next(&it, &re[n]) :
			     msg_cent_next(&it, &ce[n]))) {
		if (!reply)
			check_name(&ce[n].name, 0);
		n++;
	}
	ok = !it.err && n == count && !rbuf_left(&it);
	if (!ok || (reply ? msg_crep_next(&it, &re[0]) :
		    msg_cent_next(&it, &ce[0])))
		fail("entry walk disagrees with count", op, reply, p, len, p,
		     len);
	memset(&a, 0, sizeof(a));
	if (reply)
		a.creates_rep = (struct msg_creates_rep){
			.dir = r->dir, .count = n, .ents = re };
	else
		a.creates_req = (struct msg_creates_req){
			.dir = q->dir, .count = n, .ents = ce };
	wbuf_init(&w);
	msg_encode(op, reply, &w, &a);
	expect_same(&w, "encoded from an array of the entries", op, reply, p,
		    len);
	free(ce);
	free(re);
}

/* CREATEATTR's request: its entries walk to count, names go through the
 * server's check, and encoded from an array they are the input again
 * (its reply is CREATES'). */
static void check_createattr(const struct msg_createattr_req *q, unsigned op,
			     const uint8_t *p, size_t len)
{
	struct msg_createattr_req a = { .dir = q->dir };
	struct msg_centa *e = malloc((q->count ? q->count : 1) * sizeof(*e));
	struct rbuf it;
	struct wbuf w;
	uint32_t n = 0;

	if (!e)
		abort();
	if (q->ents)
		fail("decoded with ents set", op, 0, p, len, p, len);
	rbuf_init(&it, q->list.p, q->list.len);
	while (n < q->count && msg_centa_next(&it, &e[n]))
		check_name(&e[n++].c.name, 0);
	if (it.err || n != q->count || rbuf_left(&it) ||
	    msg_centa_next(&it, &e[0]))
		fail("msg_centa_next walk disagrees with count", op, 0, p, len,
		     p, len);
	a.count = n;
	a.ents = e;
	wbuf_init(&w);
	msg_encode(op, 0, &w, &a);
	expect_same(&w, "encoded from an array of the entries", op, 0, p, len);
	free(e);
}

/* ORPHAN_DROP: the FIDs walk to count, and sent from an array (as a
 * client sends them) they are the input again. */
static void check_orphan_drop(const struct msg_orphan_drop_req *q,
			      unsigned op, const uint8_t *p, size_t len)
{
	struct msg_orphan_drop_req a = { .count = q->count };
	struct cairn_fid *fids;
	struct wbuf w;

	if (q->fids)
		fail("decoded with fids set", op, 0, p, len, p, len);
	fids = walk_list(&q->list, q->count, sizeof(*fids), next_fid, op, p,
			 len);
	a.fids = fids;
	wbuf_init(&w);
	msg_encode(op, 0, &w, &a);
	expect_same(&w, "encoded from an array of the FIDs", op, 0, p, len);
	free(fids);
}

static void check_read_rep(const struct msg_read_rep *rep, unsigned op,
			   const uint8_t *p, size_t len)
{
	struct wbuf w;
	uint8_t *d;
	size_t at;
	uint32_t n = (uint32_t)rep->data.len;

	/* The server reserves the asked length and may fill less. */
	wbuf_init(&w);
	d = msg_read_rep_reserve(&w, n + 7, &at);
	if (d) {
		memset(d, 0xa5, n + 7);
		memcpy(d, rep->data.p, n);
	}
	msg_read_rep_finish(&w, at, &rep->attr, n);
	expect_same(&w, "rebuilt with msg_read_rep_reserve/finish", op, 1, p,
		    len);
}

static void check_sized_rep(const struct msg_sized_rep *rep, unsigned op,
			    const uint8_t *p, size_t len)
{
	struct wbuf w;
	uint8_t *d;
	size_t at;
	uint32_t n = (uint32_t)rep->value.len;

	wbuf_init(&w);
	d = msg_sized_rep_reserve(&w, n + 3, &at);
	if (d && n)
		memcpy(d, rep->value.p, n);
	msg_sized_rep_finish(&w, at, rep->size, n);
	expect_same(&w, "rebuilt with msg_sized_rep_reserve/finish", op, 1, p,
		    len);
}

/* What only some messages have: names to check, parts built in place. */
static void check_parts(unsigned op, int reply, const union msg_any *m,
			const uint8_t *p, size_t len)
{
	switch (reply ? op | 0x100u : op) {
	case OP_LOOKUP:
		check_name(&m->lookup_req.name, 0);
		break;
	case OP_CREATE:
		check_name(&m->create_req.name, 0);
		break;
	case OP_SYMLINK:
		check_name(&m->symlink_req.name, 0);
		break;
	case OP_LINK:
		check_name(&m->link_req.name, 0);
		break;
	case OP_REMOVE:
		check_name(&m->remove_req.name, 0);
		break;
	case OP_RENAME:
		check_name(&m->rename_req.sname, 0);
		check_name(&m->rename_req.dname, 0);
		break;
	case OP_SETXATTR:
		check_name(&m->setxattr_req.name, 1);
		break;
	case OP_GETXATTR:
		check_name(&m->getxattr_req.name, 1);
		break;
	case OP_REMOVEXATTR:
		check_name(&m->removexattr_req.name, 1);
		break;
	case OP_CB_BREAK:
		check_cb_break(&m->cb_break, op, p, len);
		break;
	case OP_ORPHAN_DROP:
		check_orphan_drop(&m->orphan_drop_req, op, p, len);
		break;
	case OP_REMOVES:
	case OP_REMOVESAT:
		check_removes(&m->removes_req, op, p, len);
		break;
	case OP_REMOVES | 0x100u:
	case OP_REMOVESAT | 0x100u:
		check_removes_rep(&m->removes_rep, op, p, len);
		break;
	case OP_LKRETURN:
		check_lkreturn(&m->lkreturn_req, op, p, len);
		break;
	case OP_CREATES:
	case OP_CREATES | 0x100u:
	case OP_CREATEATTR | 0x100u:
		check_creates(m, op, reply, p, len);
		break;
	case OP_CREATEATTR:
		check_createattr(&m->createattr_req, op, p, len);
		break;
	case OP_READDIR | 0x100u:
		check_readdir(&m->readdir_rep, op, p, len);
		break;
	case OP_BULKSTAT | 0x100u:
		check_bulkstat(&m->bulkstat_rep, op, p, len);
		break;
	case OP_READ | 0x100u:
		check_read_rep(&m->read_rep, op, p, len);
		break;
	case OP_GETXATTR | 0x100u:
	case OP_LISTXATTR | 0x100u:
		check_sized_rep(&m->sized_rep, op, p, len);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int registered;
	union msg_any *m;
	const char *why = NULL;
	struct wbuf w;
	unsigned op;
	int reply, rc;

	if (!registered) {
		registered = 1;
		atexit(print_stats);
	}
	if (size < 1)
		return 0;
	op = data[0] & SEL_OP;
#ifdef FUZZ_OP
	op = FUZZ_OP;
#endif
	reply = !!(data[0] & SEL_REPLY);
	const uint8_t *p = data + 1;
	size_t len = size - 1;

	tried[op & SEL_OP][reply]++;
	/* Exactly the union's size on the heap: ASan catches a decoder
	 * writing past its struct's storage. */
	m = malloc(sizeof(*m));
	if (!m)
		abort();
	memset(m, 0x5a, sizeof(*m));
	rc = msg_decode(op, reply, p, len, m, &why);
	if (rc) {
		if (rc != -EPROTO || !why)
			abort();
		if (!msg_desc(op) && strcmp(why, "unknown opcode"))
			abort();
		goto out;
	}
	if (!msg_desc(op))
		abort();
	decoded[op & SEL_OP][reply]++;

	wbuf_init(&w);
	msg_encode(op, reply, &w, m);
	expect_same(&w, "msg_encode of the decoded struct", op, reply, p, len);
	check_parts(op, reply, m, p, len);
out:
	free(m);
	return 0;
}

/*
 * test_msg.c - unit tests for lib/msg.h: the codec and the receivers'
 * checks.
 *
 *   - every descriptor has a test case (msg_cases.h), and the descriptor
 *     table answers lookups and keeps its flag rules;
 *   - every request and reply round trips: decoded fields equal the
 *     encoded ones, and encoding them again gives the same bytes; in three
 *     fill variants (tagged values, maximal strings and blobs, extreme
 *     integers with empty strings);
 *   - every strict prefix of an encoding is refused as short, one byte
 *     more as trailing; READDIR, BULKSTAT, CB_BREAK and ORPHAN_DROP
 *     counts that lie are refused;
 *   - the iterators walk exactly count records; the in-place builders
 *     give what msg_encode gives and msg_decode accepts;
 *   - msg_name_check and msg_xattr_name_check at their edges.
 *
 * test_msg_doc.c checks docs/PROTOCOL.md against the same encoders.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed. Buffers under test are malloc'ed at their exact size so
 * ASan catches any read past the end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/msg.h"
#include "../../lib/wire.h"
#include "check.h"
#include "msg_cases.h"

/* A heap copy of exactly len bytes, so overreads are caught by ASan. */
static uint8_t *dup_exact(const void *p, size_t len)
{
	uint8_t *q = malloc(len ? len : 1);

	if (!q)
		abort();
	if (len)
		memcpy(q, p, len);
	return q;
}

static const char WHY_SHORT[] = "payload too short or a bad field";
static const char WHY_TRAIL[] = "trailing bytes";

/* --- the codec ------------------------------------------------------------------- */

static void test_case_table(void)
{
	size_t n;
	const struct msg_desc *d = msg_descs(&n);

	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		while (k < NCASES && cases[k].op != d[i].op)
			k++;
		if (k == NCASES) {
			fprintf(stderr, "  descriptor %u %s has no test case "
				"here: add one to cases[]\n", d[i].op,
				d[i].name);
			failed_here++;
		}
	}
	for (size_t k = 0; k < NCASES; k++) {
		if (!msg_desc(cases[k].op)) {
			fprintf(stderr, "  test case for op %u has no "
				"descriptor\n", cases[k].op);
			failed_here++;
		}
	}
}

static void test_descriptors(void)
{
	size_t n;
	const struct msg_desc *d = msg_descs(&n);

	CHECK(n >= OP__COUNT - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned fl = d[i].flags;

		CHECK(msg_desc(d[i].op) == &d[i]);
		CHECK(i == 0 || d[i - 1].op < d[i].op);
		CHECK(!strcmp(msg_name(d[i].op), d[i].name));
		CHECK(d[i].req_enc && d[i].req_dec && d[i].rep_enc &&
		      d[i].rep_dec && d[i].req_layout && d[i].rep_layout);
		/* What the server relies on: a cached outcome is a change, a
		 * change never runs on the reader thread, pushes are the
		 * opcodes from 64 up. */
		if ((fl & MSG_DRC) && !(fl & MSG_CHANGES))
			fprintf(stderr, "  %s: MSG_DRC without MSG_CHANGES\n",
				d[i].name), failed_here++;
		if ((fl & MSG_INLINE) && (fl & MSG_CHANGES))
			fprintf(stderr, "  %s: MSG_INLINE and MSG_CHANGES\n",
				d[i].name), failed_here++;
		CHECK(!!(fl & MSG_PUSH) == (d[i].op >= OP_CB_BREAK));
	}
	for (unsigned op = 1; op < OP__COUNT; op++)
		CHECK(msg_desc(op) != NULL);
	CHECK(msg_desc(0) == NULL);
	CHECK(msg_desc(OP__COUNT) == NULL);
	CHECK(msg_desc(OP_CB_BREAK - 1) == NULL);
	CHECK(msg_desc(OP_CB_RECALL) != NULL);
	CHECK(msg_desc(OP_CB_LOCKWAKE) != NULL);
	CHECK(msg_desc(OP_CB_LKRECALL) != NULL);
	CHECK(msg_desc(OP_CB_LKRECALL + 1) == NULL);
	CHECK(msg_desc(0xffff) == NULL);
	CHECK(!strcmp(msg_name(999), "unknown"));
	CHECK(msg_has(OP_WRITE, MSG_CHANGES | MSG_DRC));
	CHECK(msg_has(OP_WRITEATTR, MSG_CHANGES | MSG_DRC));
	CHECK(msg_has(OP_CREATEATTR, MSG_CHANGES | MSG_DRC));
	CHECK(!msg_has(OP_READ, MSG_CHANGES));
	CHECK(msg_has(OP_PING, MSG_INLINE));
	CHECK(!msg_has(999, 0));

	const char *why = NULL;
	union msg_any m;
	CHECK_EQ(msg_decode(999, 0, "", 0, &m, &why), -EPROTO);
	CHECK(why && !strcmp(why, "unknown opcode"));
	struct wbuf w;
	wbuf_init(&w);
	msg_encode(999, 0, &w, &m);
	CHECK_EQ(w.err, -EINVAL);
	CHECK_EQ(w.len, 0);
	wbuf_free(&w);
}

/* Decode, compare field by field, encode again and compare bytes. */
static void test_round_trip(void)
{
	for (size_t k = 0; k < NCASES; k++) {
		for (int dir = 0; dir < 2; dir++) {
			for (int v = 0; v < NVARIANT; v++) {
				const struct tcase *c = &cases[k];
				struct fill f;
				union msg_any m, m2;
				struct wbuf w, w2;
				const char *why = "";
				uint8_t *buf;
				int rc;

				if (encode_case(c, dir, v, &f, &m, &w))
					goto next;
				buf = dup_exact(w.data, w.len);
				/* Garbage first: the decoder must set every
				 * field. */
				memset(&m2, 0x5a, sizeof(m2));
				rc = msg_decode(c->op, dir, buf, w.len, &m2, &why);
				if (rc) {
					fprintf(stderr, "  %s %s (%s): decode "
						"of %zu bytes: %d (%s)\n",
						msg_name(c->op), dir_name[dir],
						variant_name[v], w.len, rc, why);
					failed_here++;
				} else if (!c->sh[dir]->eq(&m, &m2)) {
					fprintf(stderr, "  %s %s (%s): decoded "
						"fields differ from the "
						"encoded ones\n",
						msg_name(c->op), dir_name[dir],
						variant_name[v]);
					failed_here++;
				} else {
					wbuf_init(&w2);
					msg_encode(c->op, dir, &w2, &m2);
					if (w2.err || w2.len != w.len ||
					    (w.len && memcmp(w.data, w2.data,
							     w.len))) {
						fprintf(stderr, "  %s %s (%s): "
							"re-encoding differs\n",
							msg_name(c->op),
							dir_name[dir],
							variant_name[v]);
						failed_here++;
					}
					wbuf_free(&w2);
				}
				free(buf);
next:
				wbuf_free(&w);
				fill_free(&f);
			}
		}
	}
}

/* Every strict prefix of an encoding is refused as short; the encoding
 * with one byte more is refused as trailing bytes. Prefixes are tried on
 * the small variants only (each costs a decode). */
static void test_prefixes_and_trailing(void)
{
	for (size_t k = 0; k < NCASES; k++) {
		for (int dir = 0; dir < 2; dir++) {
			for (int v = 0; v < NVARIANT; v++) {
				const struct tcase *c = &cases[k];
				struct fill f;
				union msg_any m, m2;
				struct wbuf w;
				const char *why;
				uint8_t *buf;
				int rc, bad = 0;

				if (encode_case(c, dir, v, &f, &m, &w))
					goto next;
				for (size_t n = 0; v != BIG && n < w.len; n++) {
					buf = dup_exact(w.data, n);
					why = "";
					rc = msg_decode(c->op, dir, buf, n, &m2,
							&why);
					if ((rc != -EPROTO ||
					     strcmp(why, WHY_SHORT)) && !bad++)
						fprintf(stderr, "  %s %s (%s): "
							"prefix of %zu/%zu bytes:"
							" %d (%s)\n",
							msg_name(c->op),
							dir_name[dir],
							variant_name[v], n,
							w.len, rc, why);
					free(buf);
				}
				if (v == BIG && w.len) {
					buf = dup_exact(w.data, w.len - 1);
					why = "";
					rc = msg_decode(c->op, dir, buf,
							w.len - 1, &m2, &why);
					if (rc != -EPROTO || strcmp(why, WHY_SHORT))
						bad++;
					free(buf);
				}
				wire_put_u8(&w, 0);
				buf = dup_exact(w.data, w.len);
				why = "";
				rc = msg_decode(c->op, dir, buf, w.len, &m2, &why);
				if (rc != -EPROTO || strcmp(why, WHY_TRAIL)) {
					fprintf(stderr, "  %s %s (%s): one "
						"trailing byte: %d (%s)\n",
						msg_name(c->op), dir_name[dir],
						variant_name[v], rc, why);
					bad++;
				}
				free(buf);
				failed_here += bad;
next:
				wbuf_free(&w);
				fill_free(&f);
			}
		}
	}
}

/* Decode p[0..len) as op's reply (dir 1) or request (dir 0) with the
 * u32 count at offset `at` replaced. */
static int decode_with_count(unsigned op, int dir, const uint8_t *p,
			     size_t len, size_t at, uint32_t count,
			     const char **why)
{
	uint8_t *buf = dup_exact(p, len);
	union msg_any m;
	int rc;

	buf[at] = count;
	buf[at + 1] = count >> 8;
	buf[at + 2] = count >> 16;
	buf[at + 3] = count >> 24;
	*why = "";
	rc = msg_decode(op, dir, buf, len, &m, why);
	free(buf);
	return rc;
}

/* A count that promises more records than follow, or fewer, is refused;
 * a huge one is refused without walking (get_records' bound). */
static void test_counts_that_lie(void)
{
	static const struct { unsigned op; int dir; size_t at; } lists[] = {
		{ OP_READDIR, 1, 0 }, { OP_CB_BREAK, 0, 0 },
		{ OP_ORPHAN_DROP, 0, 0 },
		/* after attr dir and u64 new entry cookie */
		{ OP_BULKSTAT, 1, WIRE_ATTR_SIZE + 8 },
	};

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const struct tcase *c = NULL;
		struct fill f;
		union msg_any m;
		struct wbuf w;
		const char *why;
		uint32_t count;
		size_t at;

		for (size_t k = 0; k < NCASES; k++)
			if (cases[k].op == lists[i].op)
				c = &cases[k];
		if (!c || encode_case(c, lists[i].dir, TAGGED, &f, &m, &w)) {
			failed_here++;
			continue;
		}
		count = lists[i].op == OP_READDIR ? m.readdir_rep.count :
			lists[i].op == OP_BULKSTAT ? m.bulkstat_rep.count :
			lists[i].op == OP_ORPHAN_DROP ?
			m.orphan_drop_req.count : m.cb_break.count;
		at = lists[i].at;
		CHECK(count > 0);
		CHECK_EQ(decode_with_count(c->op, lists[i].dir, w.data, w.len,
					   at, count, &why), 0);
		CHECK_EQ(decode_with_count(c->op, lists[i].dir, w.data, w.len,
					   at, count + 1, &why), -EPROTO);
		CHECK(!strcmp(why, WHY_SHORT));
		CHECK_EQ(decode_with_count(c->op, lists[i].dir, w.data, w.len,
					   at, count - 1, &why), -EPROTO);
		CHECK(!strcmp(why, WHY_TRAIL));
		CHECK_EQ(decode_with_count(c->op, lists[i].dir, w.data, w.len,
					   at, UINT32_MAX, &why), -EPROTO);
		CHECK_EQ(decode_with_count(c->op, lists[i].dir, w.data, w.len,
					   at, 0, &why), -EPROTO);
		CHECK(!strcmp(why, WHY_TRAIL));
		wbuf_free(&w);
		fill_free(&f);
	}
}

/* msg_dirent_next, msg_cbrec_next and msg_fid_next yield exactly the
 * records encoded, for 0, 1 and many records, and keep answering 0 at the
 * end. */
static void test_iterators(void)
{
	for (uint32_t count = 0; count <= 40; count += count < 2 ? 1 : 19) {
		struct msg_dirent ents[40], e;
		struct msg_cbrec recs[40], rec;
		struct fill f = { .variant = TAGGED };
		union msg_any m;
		struct wbuf w, wc;
		struct rbuf it;
		uint8_t *buf, *bufc;
		uint32_t seen;

		wbuf_init(&w);
		wbuf_init(&wc);
		for (uint32_t i = 0; i < count; i++) {
			fill_dirent(&f, &ents[i], i);
			fill_cbrec(&f, &recs[i], i);
		}
		size_t at = msg_readdir_rep_begin(&w);
		size_t atc = msg_cb_break_begin(&wc);
		for (uint32_t i = 0; i < count; i++) {
			msg_dirent_put(&w, &ents[i]);
			msg_cbrec_put(&wc, &recs[i]);
		}
		msg_readdir_rep_end(&w, at, count, 1);
		msg_cb_break_end(&wc, atc, count);
		CHECK_EQ(w.err, 0);
		CHECK_EQ(wc.err, 0);

		buf = dup_exact(w.data, w.len);
		CHECK_EQ(msg_decode(OP_READDIR, 1, buf, w.len, &m, NULL), 0);
		CHECK_EQ(m.readdir_rep.count, count);
		rbuf_init(&it, m.readdir_rep.ents.p, m.readdir_rep.ents.len);
		for (seen = 0; msg_dirent_next(&it, &e); seen++)
			CHECK(seen < count && dirent_eq(&e, &ents[seen]));
		CHECK_EQ(seen, count);
		CHECK_EQ(msg_dirent_next(&it, &e), 0);
		CHECK_EQ(it.err, 0);

		bufc = dup_exact(wc.data, wc.len);
		CHECK_EQ(msg_decode(OP_CB_BREAK, 0, bufc, wc.len, &m, NULL), 0);
		CHECK_EQ(m.cb_break.count, count);
		rbuf_init(&it, m.cb_break.recs.p, m.cb_break.recs.len);
		for (seen = 0; msg_cbrec_next(&it, &rec); seen++)
			CHECK(seen < count && cbrec_eq(&rec, &recs[seen]));
		CHECK_EQ(seen, count);
		CHECK_EQ(msg_cbrec_next(&it, &rec), 0);

		struct cairn_fid fids[40], fid;
		struct msg_orphan_drop_req q = { count, fids, { NULL, 0 } };
		struct wbuf wf;
		uint8_t *buff;

		for (uint32_t i = 0; i < count; i++)
			fill_fid(&f, &fids[i]);
		wbuf_init(&wf);
		msg_encode(OP_ORPHAN_DROP, 0, &wf, &q);
		CHECK_EQ(wf.err, 0);
		CHECK_EQ(wf.len, 4 + (size_t)count * WIRE_FID_SIZE);
		buff = dup_exact(wf.data, wf.len);
		CHECK_EQ(msg_decode(OP_ORPHAN_DROP, 0, buff, wf.len, &m, NULL),
			 0);
		CHECK_EQ(m.orphan_drop_req.count, count);
		CHECK(m.orphan_drop_req.fids == NULL);
		rbuf_init(&it, m.orphan_drop_req.list.p,
			  m.orphan_drop_req.list.len);
		for (seen = 0; msg_fid_next(&it, &fid); seen++)
			CHECK(seen < count && fid_eq(&fid, &fids[seen]));
		CHECK_EQ(seen, count);
		CHECK_EQ(msg_fid_next(&it, &fid), 0);
		free(buff);
		wbuf_free(&wf);
		free(buf);
		free(bufc);
		wbuf_free(&w);
		wbuf_free(&wc);
		fill_free(&f);
	}
}

/*
 * A payload built in place must be what msg_encode writes for the same
 * values, and msg_decode must accept it. Built after a frame header, as
 * the server builds it, so the offsets the builders take are not 0.
 */
static void check_built(const char *what, unsigned op, const struct wbuf *w,
			size_t at, const void *m)
{
	struct wbuf want;
	union msg_any got;
	uint8_t *buf;

	wbuf_init(&want);
	msg_encode(op, 1, &want, m);
	if (w->err || want.err || w->len - at != want.len ||
	    memcmp(w->data + at, want.data ? want.data : (uint8_t *)"",
		   want.len)) {
		fprintf(stderr, "  %s: built %zu bytes (err %d), not the %zu "
			"msg_encode writes\n", what, w->len - at, w->err,
			want.len);
		failed_here++;
	}
	buf = dup_exact(w->data + at, w->len - at);
	if (msg_decode(op, 1, buf, w->len - at, &got, NULL)) {
		fprintf(stderr, "  %s: msg_decode refuses what was built\n",
			what);
		failed_here++;
	}
	free(buf);
	wbuf_free(&want);
}

static void test_builders(void)
{
	static const struct { uint32_t cap, size, n; } sized[] = {
		{ 0, 12, 0 },          /* size-only query */
		{ 64, 10, 10 },
		{ 64, 200, 64 },       /* the receiver's ERANGE is policy */
		{ 65536, 65536, 65536 },
	};
	static const struct { uint32_t len, n; } reads[] = {
		{ 0, 0 }, { 100, 100 }, { 100, 37 }, { 4096, 0 },
		{ CAIRN_MAX_IO, CAIRN_MAX_IO },
	};
	struct fill f = { .variant = TAGGED };
	struct cairn_attr a;
	struct wbuf w;
	size_t hdr, at;
	uint8_t *p;
	char what[80];

	fill_attr(&f, &a);
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		struct msg_read_rep want = { .attr = a };

		wbuf_init(&w);
		hdr = wire_frame_begin(&w, OP_READ, WF_REPLY, 7, 0);
		p = msg_read_rep_reserve(&w, reads[i].len, &at);
		CHECK(p != NULL);
		CHECK_EQ(at, WIRE_HDR_SIZE);
		for (uint32_t k = 0; p && k < reads[i].n; k++)
			p[k] = (uint8_t)(k * 13 + 1);
		msg_read_rep_finish(&w, at, &a, reads[i].n);
		wire_frame_end(&w, hdr);
		want.data.p = p;
		want.data.len = reads[i].n;
		snprintf(what, sizeof(what), "READ reserve %u, fill %u",
			 reads[i].len, reads[i].n);
		if (p)
			check_built(what, OP_READ, &w, at, &want);
		CHECK_EQ(w.len, WIRE_HDR_SIZE + WIRE_ATTR_SIZE + 4 + reads[i].n);
		wbuf_free(&w);
	}
	for (size_t i = 0; i < sizeof(sized) / sizeof(sized[0]); i++) {
		struct msg_sized_rep want = { .size = sized[i].size };

		wbuf_init(&w);
		hdr = wire_frame_begin(&w, OP_GETXATTR, WF_REPLY, 8, 0);
		p = msg_sized_rep_reserve(&w, sized[i].cap, &at);
		CHECK(p != NULL);
		for (uint32_t k = 0; p && k < sized[i].n; k++)
			p[k] = (uint8_t)(k * 7 + 3);
		msg_sized_rep_finish(&w, at, sized[i].size, sized[i].n);
		wire_frame_end(&w, hdr);
		want.value.p = p;
		want.value.len = sized[i].n;
		snprintf(what, sizeof(what), "sized reserve %u, size %u, "
			 "fill %u", sized[i].cap, sized[i].size, sized[i].n);
		if (p) {
			check_built(what, OP_GETXATTR, &w, at, &want);
			check_built(what, OP_LISTXATTR, &w, at, &want);
		}
		wbuf_free(&w);
	}
	for (int eof = 0; eof <= 2; eof++) {
		struct msg_dirent e[3];
		struct msg_readdir_rep want = { .count = 3, .eof = !!eof };
		struct wbuf ents;

		wbuf_init(&w);
		wbuf_init(&ents);
		hdr = wire_frame_begin(&w, OP_READDIR, WF_REPLY, 9, 0);
		at = msg_readdir_rep_begin(&w);
		for (int i = 0; i < 3; i++) {
			fill_dirent(&f, &e[i], i);
			msg_dirent_put(&w, &e[i]);
			msg_dirent_put(&ents, &e[i]);
		}
		/* eof 2: any non-zero value goes on the wire as 1. */
		msg_readdir_rep_end(&w, at, 3, eof);
		wire_frame_end(&w, hdr);
		want.ents.p = ents.data;
		want.ents.len = ents.len;
		snprintf(what, sizeof(what), "READDIR eof %d", eof);
		check_built(what, OP_READDIR, &w, at, &want);
		wbuf_free(&w);
		wbuf_free(&ents);
	}
	for (int eof = 0; eof <= 2; eof++) {
		struct msg_dirent e[3];
		struct msg_bulkstat_rep want = { .count = 3, .eof = !!eof };
		struct wbuf ents;

		fill_attr(&f, &want.dir);
		want.new_cookie = 1000 + (uint64_t)eof;
		wbuf_init(&w);
		wbuf_init(&ents);
		hdr = wire_frame_begin(&w, OP_BULKSTAT, WF_REPLY, 11, 0);
		at = msg_bulkstat_rep_begin(&w);
		for (int i = 0; i < 3; i++) {
			size_t before = ents.len;

			fill_dirent(&f, &e[i], i);
			msg_dirent_put(&w, &e[i]);
			msg_dirent_put(&ents, &e[i]);
			/* What the server's byte cap counts per entry. */
			CHECK_EQ(msg_dirent_size(e[i].name.len),
				 ents.len - before);
		}
		msg_bulkstat_rep_end(&w, at, &want.dir, want.new_cookie, 3, eof);
		wire_frame_end(&w, hdr);
		want.ents.p = ents.data;
		want.ents.len = ents.len;
		snprintf(what, sizeof(what), "BULKSTAT eof %d", eof);
		check_built(what, OP_BULKSTAT, &w, at, &want);
		wbuf_free(&w);
		wbuf_free(&ents);
	}
	{
		struct msg_cbrec r[3];
		struct msg_cb_break want = { .count = 3 };
		struct wbuf recs;
		struct wbuf want_w;
		uint8_t *buf;
		union msg_any got;

		wbuf_init(&w);
		wbuf_init(&recs);
		hdr = wire_frame_begin(&w, OP_CB_BREAK, WF_PUSH, 10, 0);
		at = msg_cb_break_begin(&w);
		for (int i = 0; i < 3; i++) {
			fill_cbrec(&f, &r[i], i);
			msg_cbrec_put(&w, &r[i]);
			msg_cbrec_put(&recs, &r[i]);
		}
		msg_cb_break_end(&w, at, 3);
		wire_frame_end(&w, hdr);
		want.recs.p = recs.data;
		want.recs.len = recs.len;
		/* A push: the request direction. */
		wbuf_init(&want_w);
		msg_encode(OP_CB_BREAK, 0, &want_w, &want);
		CHECK_EQ(w.err, 0);
		CHECK(w.len - at == want_w.len &&
		      !memcmp(w.data + at, want_w.data, want_w.len));
		buf = dup_exact(w.data + at, w.len - at);
		CHECK_EQ(msg_decode(OP_CB_BREAK, 0, buf, w.len - at, &got,
				    NULL), 0);
		free(buf);
		wbuf_free(&want_w);
		wbuf_free(&recs);
		wbuf_free(&w);
	}
	/* A failed wbuf stays failed: builders neither write nor crash. */
	wbuf_init(&w);
	w.err = -ENOMEM;
	CHECK(msg_read_rep_reserve(&w, 10, &at) == NULL);
	msg_read_rep_finish(&w, at, &a, 10);
	CHECK(msg_sized_rep_reserve(&w, 10, &at) == NULL);
	msg_sized_rep_finish(&w, at, 10, 10);
	at = msg_readdir_rep_begin(&w);
	msg_readdir_rep_end(&w, at, 5, 1);
	at = msg_bulkstat_rep_begin(&w);
	msg_bulkstat_rep_end(&w, at, &a, 7, 5, 1);
	at = msg_cb_break_begin(&w);
	msg_cb_break_end(&w, at, 5);
	CHECK_EQ(w.len, 0);
	CHECK_EQ(w.err, -ENOMEM);
	wbuf_free(&w);
	fill_free(&f);
}

/* A str the wire cannot carry fails the encoder instead of truncating. */
static void test_encode_limits(void)
{
	struct msg_lookup_req q = { 0 };
	struct wbuf w;
	char *big = xmalloc(65536);

	memset(big, 'x', 65536);
	q.name.p = big;
	q.name.len = 65536;
	wbuf_init(&w);
	msg_encode(OP_LOOKUP, 0, &w, &q);
	CHECK(w.err != 0);
	wbuf_free(&w);
	free(big);

	/* A time's nsec is below 10^9 or the payload does not decode. */
	struct msg_attr a = { 0 };
	const char *why = "";
	uint8_t *buf;
	for (uint32_t ns = 999999999u; ns <= 1000000000u; ns++) {
		a.attr.mtime.nsec = ns;
		wbuf_init(&w);
		msg_encode(OP_GETATTR, 1, &w, &a);
		buf = dup_exact(w.data, w.len);
		CHECK_EQ(msg_decode(OP_GETATTR, 1, buf, w.len, &a, &why),
			 ns < 1000000000u ? 0 : -EPROTO);
		free(buf);
		wbuf_free(&w);
	}
}

/* --- acceptability ----------------------------------------------------------------- */

/* Run check on exactly-sized heap copy of s[0..len). */
static int name_rc(int (*check)(const struct msg_str *), const char *s,
		   size_t len)
{
	uint8_t *buf = dup_exact(s, len);
	struct msg_str m = { (const char *)buf, len };
	int rc = check(&m);

	free(buf);
	return rc;
}

static void test_name_check(void)
{
	char n[300];

	memset(n, 'x', sizeof(n));
	CHECK_EQ(name_rc(msg_name_check, "a", 1), 0);
	CHECK_EQ(name_rc(msg_name_check, n, 255), 0);
	CHECK_EQ(name_rc(msg_name_check, n, 256), -ENAMETOOLONG);
	CHECK_EQ(name_rc(msg_name_check, n, 300), -ENAMETOOLONG);
	CHECK_EQ(name_rc(msg_name_check, "", 0), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, ".", 1), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, "..", 2), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, "...", 3), 0);
	CHECK_EQ(name_rc(msg_name_check, ".a", 2), 0);
	CHECK_EQ(name_rc(msg_name_check, "..a", 3), 0);
	CHECK_EQ(name_rc(msg_name_check, "/", 1), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, "a/b", 3), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, "ab/", 3), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, "a\0b", 3), -EINVAL);
	CHECK_EQ(name_rc(msg_name_check, "\0", 1), -EINVAL);
	/* ". " and a name that is ".." only as a prefix are ordinary. */
	CHECK_EQ(name_rc(msg_name_check, ". ", 2), 0);
	CHECK_EQ(name_rc(msg_name_check, "\xff\xfe", 2), 0);
	/* Too long wins over invalid, as the header states the order. */
	n[10] = '/';
	CHECK_EQ(name_rc(msg_name_check, n, 256), -ENAMETOOLONG);
	CHECK_EQ(name_rc(msg_name_check, n, 255), -EINVAL);
}

static void test_xattr_name_check(void)
{
	char n[300];

	memset(n, 'x', sizeof(n));
	memcpy(n, "user.", 5);
	CHECK_EQ(name_rc(msg_xattr_name_check, "user.a", 6), 0);
	CHECK_EQ(name_rc(msg_xattr_name_check, n, 255), 0);
	CHECK_EQ(name_rc(msg_xattr_name_check, n, 256), -ERANGE);
	CHECK_EQ(name_rc(msg_xattr_name_check, "", 0), -ERANGE);
	CHECK_EQ(name_rc(msg_xattr_name_check, "user.\0x", 7), -EINVAL);
	CHECK_EQ(name_rc(msg_xattr_name_check, "system.x", 8), -EOPNOTSUPP);
	CHECK_EQ(name_rc(msg_xattr_name_check, "system.", 7), -EOPNOTSUPP);
	CHECK_EQ(name_rc(msg_xattr_name_check,
			 "system.posix_acl_access", 23), -EOPNOTSUPP);
	CHECK_EQ(name_rc(msg_xattr_name_check, "user.system.x", 13), 0);
	/* "system" alone is not in the system. namespace. */
	CHECK_EQ(name_rc(msg_xattr_name_check, "system", 6), 0);
	/* A '/' is fine in an xattr name. */
	CHECK_EQ(name_rc(msg_xattr_name_check, "user.a/b", 8), 0);
	memcpy(n, "system.", 7);
	CHECK_EQ(name_rc(msg_xattr_name_check, n, 256), -ERANGE);

	char dst[8];
	struct msg_str s = { "abc!!", 3 };
	CHECK(!strcmp(msg_str_copy(dst, &s), "abc"));
	s.p = NULL;
	s.len = 0;
	CHECK(!strcmp(msg_str_copy(dst, &s), ""));
}

/* eof is 0 or 1, created its defined bits (CREATED, CREATED_TOKEN):
 * any other byte would be a second encoding of the same reply (found by
 * fuzz_msg: tests/fuzz/crashes/fuzz_msg). */
static void test_bools(void)
{
	static const struct {
		unsigned op;
		size_t at;  /* offset of the u8 in an encoding of the reply */
		unsigned max;
	} bools[] = { { OP_CREATE, 0, CREATED | CREATED_TOKEN },
		      { OP_READDIR, 4, 1 },
		      { OP_BULKSTAT, WIRE_ATTR_SIZE + 8 + 4, 1 } };

	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
		union msg_any m;
		struct wbuf w;
		const char *why = NULL;

		memset(&m, 0, sizeof(m));
		wbuf_init(&w);
		msg_encode(bools[i].op, 1, &w, &m);
		CHECK(w.err == 0 && w.len > bools[i].at);
		for (unsigned v = 0; v < 256 && !w.err; v++) {
			w.data[bools[i].at] = (uint8_t)v;
			int rc = msg_decode(bools[i].op, 1, w.data, w.len, &m,
					    &why);
			CHECK_EQ(rc, v <= bools[i].max ? 0 : -EPROTO);
		}
		wbuf_free(&w);
	}
	/* A CB_BREAK record's flags: 0 or CB_ORPHANED, nothing else. */
	{
		struct msg_cbrec rec = { { 1, 2, 3 }, { "", 0 }, 0 };
		struct msg_cb_break b = { .count = 1 };
		struct wbuf recs, w;
		union msg_any m;

		wbuf_init(&recs);
		wbuf_init(&w);
		msg_cbrec_put(&recs, &rec);
		b.recs.p = recs.data;
		b.recs.len = recs.len;
		msg_encode(OP_CB_BREAK, 0, &w, &b);
		CHECK(w.err == 0 && w.len == 4 + WIRE_FID_SIZE + 2 + 1);
		for (unsigned v = 0; v < 256 && !w.err; v++) {
			w.data[w.len - 1] = (uint8_t)v;
			CHECK_EQ(msg_decode(OP_CB_BREAK, 0, w.data, w.len, &m,
					    NULL),
				 v <= (CB_ORPHANED | CB_ATTRS_ONLY) ? 0 : -EPROTO);
		}
		wbuf_free(&w);
		wbuf_free(&recs);
	}
}

int main(void)
{
	run("msg every descriptor has a test case", test_case_table);
	run("msg descriptors: lookup, names, flags", test_descriptors);
	run("msg round trip of every request and reply", test_round_trip);
	run("msg strict prefixes short, one more byte trailing",
	    test_prefixes_and_trailing);
	run("msg READDIR/BULKSTAT/CB_BREAK/ORPHAN_DROP counts that lie",
	    test_counts_that_lie);
	run("msg dirent/cbrec/fid iterators walk exactly count",
	    test_iterators);
	run("msg in-place builders match msg_encode", test_builders);
	run("msg str over 65535 not encoded, nsec >= 10^9 not decoded",
	    test_encode_limits);
	run("msg u8 flags created defined bits only, eof (READDIR, BULKSTAT) "
	    "0 or 1, CB_BREAK record flags defined bits only",
	    test_bools);
	run("msg name check edges", test_name_check);
	run("msg xattr name check edges", test_xattr_name_check);
	return failed_total ? 1 : 0;
}

/*
 * test_callback.c - unit tests for server/callback.h: registering
 * promises, breaks that skip the changer, entry records, one batch per
 * client, the memory bound and eviction, dropping a client, the recheck
 * that closes the reply/break race, the CB_BREAK frame encoding, and the
 * acknowledgement waits: which frames a change waits for, and the
 * wait-for graph that refuses exactly the waits that could deadlock
 * (docs/LOCKING.md).
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/msg.h"
#include "../../lib/proto.h"
#include "../../lib/wire.h"
#include "../../server/callback.h"
#include "check.h"

/* Fake connection owners: count the references the table hands out. */
struct owner {
	const char *name;
	int holds;
};

static void hold(void *p)
{
	((struct owner *)p)->holds++;
}

static struct cairn_fid F(uint64_t vnode)
{
	return (struct cairn_fid){ 1, vnode, (uint32_t)(vnode * 7 + 1) };
}

static int fid_eq(struct cairn_fid a, struct cairn_fid b)
{
	return a.vol == b.vol && a.vnode == b.vnode && a.uniq == b.uniq;
}

static int nbatches(const struct cb_batch *b)
{
	int n = 0;
	for (; b; b = b->next)
		n++;
	return n;
}

static const struct cb_batch *batch_of(const struct cb_batch *b, void *owner)
{
	for (; b; b = b->next)
		if (b->owner == owner)
			return b;
	return NULL;
}

static int has_rec(const struct cb_batch *b, struct cairn_fid fid,
		   const char *name)
{
	size_t n = name ? strlen(name) : 0;
	for (uint32_t i = 0; b && i < b->count; i++)
		if (fid_eq(b->rec[i].fid, fid) && b->rec[i].namelen == n &&
		    (!n || !memcmp(b->rec[i].name, name, n)))
			return 1;
	return 0;
}

static void test_register_and_break(void)
{
	struct owner oa = { "a", 0 }, ob = { "b", 0 };
	struct cb_table *t = cb_table_create(1000, hold);
	struct cb_client a, b;
	struct cb_batch *out = NULL, *ev = NULL;
	struct cairn_fid x = F(10), y = F(11);

	cb_client_init(t, &a, &oa);
	cb_client_init(t, &b, &ob);
	CHECK_EQ(cb_register(t, &a, &x, 1, &ev), 0);
	CHECK_EQ(cb_register(t, &b, &x, 1, &ev), 0);
	CHECK_EQ(cb_register(t, &b, &y, 1, &ev), 0);
	CHECK_EQ(cb_register(t, &b, &y, 1, &ev), 0); /* refresh, no dup */
	CHECK(ev == NULL);
	CHECK_EQ(cb_count(t), 3);

	struct cb_change ch = { x, NULL, 0, 0, 0 };
	CHECK_EQ(cb_break(t, &a, &ch, 1, &out), 1);
	CHECK_EQ(nbatches(out), 1);
	CHECK(batch_of(out, &ob) != NULL);
	CHECK(batch_of(out, &oa) == NULL);
	CHECK(has_rec(batch_of(out, &ob), x, NULL));
	CHECK_EQ(ob.holds, 1);
	CHECK_EQ(oa.holds, 0);
	/* b's promise on x is gone, a's (the changer's) stays. */
	CHECK_EQ(cb_count(t), 2);
	CHECK_EQ(a.count, 1);
	CHECK_EQ(b.count, 1);
	cb_batch_free(out);

	/* Once broken, b hears nothing more about x until it re-registers. */
	out = NULL;
	CHECK_EQ(cb_break(t, &a, &ch, 1, &out), 0);
	CHECK(out == NULL);

	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	CHECK_EQ(cb_count(t), 0);
	cb_table_destroy(t);
}

static void test_entries_one_batch(void)
{
	struct owner oa = { "a", 0 }, ob = { "b", 0 }, oc = { "c", 0 };
	struct cb_table *t = cb_table_create(1000, hold);
	struct cb_client a, b, c;
	struct cb_batch *out = NULL, *ev = NULL;
	struct cairn_fid d = F(1), moved = F(20), other = F(21);

	cb_client_init(t, &a, &oa);
	cb_client_init(t, &b, &ob);
	cb_client_init(t, &c, &oc);
	struct cairn_fid bf[2] = { d, moved };
	cb_register(t, &a, &d, 1, &ev);
	cb_register(t, &b, bf, 2, &ev);
	cb_register(t, &c, &other, 1, &ev);

	/* A rename within d by a: both names, and the moved object for
	 * everyone including the changer. */
	struct cb_change ch[3] = {
		{ d, "old", 3, 0, 0 },
		{ d, "new", 3, 0, 0 },
		{ moved, NULL, 0, 1, 0 },
	};
	int n = cb_break(t, &a, ch, 3, &out);
	CHECK_EQ(n, 3);
	CHECK_EQ(nbatches(out), 1); /* only b: a changed it, c holds nothing */
	const struct cb_batch *bb = batch_of(out, &ob);
	CHECK(bb && bb->count == 3);
	CHECK(has_rec(bb, d, "old"));
	CHECK(has_rec(bb, d, "new"));
	CHECK(has_rec(bb, moved, NULL));
	CHECK_EQ(b.count, 0);
	CHECK_EQ(a.count, 1); /* a keeps d: its reply has fresh attrs */
	CHECK_EQ(c.count, 1);
	cb_batch_free(out);

	/* `all` reaches the changer too. */
	out = NULL;
	struct cb_change ca = { d, NULL, 0, 1, 0 };
	CHECK_EQ(cb_break(t, &a, &ca, 1, &out), 1);
	CHECK(batch_of(out, &oa) != NULL);
	CHECK_EQ(a.count, 0);
	cb_batch_free(out);

	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_drop_client(t, &c);
	cb_table_destroy(t);
}

static void test_bounded(void)
{
	struct owner oa = { "a", 0 }, ob = { "b", 0 };
	struct cb_table *t = cb_table_create(100, hold);
	struct cb_client a, b;
	struct cb_batch *ev = NULL;
	int evicted_a = 0, evicted_b = 0;

	cb_client_init(t, &a, &oa);
	cb_client_init(t, &b, &ob);
	for (uint64_t v = 1; v <= 60; v++) {
		struct cairn_fid f = F(v);
		cb_register(t, &a, &f, 1, &ev);
	}
	CHECK(ev == NULL);
	for (uint64_t v = 1000; v < 2000; v++) {
		struct cairn_fid f = F(v);
		cb_register(t, &b, &f, 1, &ev);
		CHECK(cb_count(t) <= 100);
	}
	CHECK_EQ(cb_count(t), 100);
	for (struct cb_batch *e = ev; e; e = e->next) {
		if (e->owner == &oa)
			evicted_a += (int)e->count;
		else
			evicted_b += (int)e->count;
	}
	/* The oldest go first: all of a's, then b's oldest. */
	CHECK_EQ(evicted_a, 60);
	CHECK_EQ(evicted_b, 1000 - 100);
	CHECK_EQ(a.count, 0);
	CHECK_EQ(b.count, 100);
	cb_batch_free(ev);

	/* The survivors are b's newest and still break normally. */
	struct cb_batch *out = NULL;
	struct cb_change ch = { F(1999), NULL, 0, 0, 0 };
	CHECK_EQ(cb_break(t, &a, &ch, 1, &out), 1);
	cb_batch_free(out);
	out = NULL;
	ch.fid = F(1000);
	CHECK_EQ(cb_break(t, &a, &ch, 1, &out), 0);

	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	CHECK_EQ(cb_count(t), 0);
	cb_table_destroy(t);
}

static void test_drop_client(void)
{
	struct owner oa = { "a", 0 }, ob = { "b", 0 };
	struct cb_table *t = cb_table_create(1000, NULL);
	struct cb_client a, b;
	struct cb_batch *ev = NULL, *out = NULL;
	struct cairn_fid fids[50];

	cb_client_init(t, &a, &oa);
	cb_client_init(t, &b, &ob);
	for (int i = 0; i < 50; i++)
		fids[i] = F((uint64_t)i + 1);
	cb_register(t, &a, fids, 50, &ev);
	cb_register(t, &b, fids, 10, &ev);
	CHECK_EQ(cb_count(t), 60);
	cb_drop_client(t, &a);
	CHECK_EQ(cb_count(t), 10);
	CHECK_EQ(a.count, 0);
	/* A change now reaches b only. */
	struct cb_change ch = { fids[3], NULL, 0, 0, 0 };
	CHECK_EQ(cb_break(t, NULL, &ch, 1, &out), 1);
	CHECK(out && out->owner == &ob && !out->next);
	cb_batch_free(out);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

static void test_recheck_race(void)
{
	struct owner oa = { "a", 0 }, ob = { "b", 0 };
	struct cb_table *t = cb_table_create(1000, hold);
	struct cb_client a, b;
	struct cb_batch *ev = NULL, *out = NULL, *again = NULL;
	struct cairn_fid x = F(42), y = F(43);

	cb_client_init(t, &a, &oa);
	cb_client_init(t, &b, &ob);

	/* a reads x (seq0), b changes x and breaks before a registers. */
	uint64_t seq0 = cb_seq(t);
	struct cb_change ch = { x, NULL, 0, 0, 0 };
	cb_break(t, &b, &ch, 1, &out);
	CHECK(out == NULL); /* nobody held x yet */
	cb_register(t, &a, &x, 1, &ev);
	CHECK_EQ(cb_recheck(t, &a, seq0, &x, 1, &again), 1);
	CHECK(again && again->owner == &oa && has_rec(again, x, NULL));
	CHECK_EQ(a.count, 0); /* the stale promise is gone */
	cb_batch_free(again);

	/* a's own change does not re-break a. */
	again = NULL;
	seq0 = cb_seq(t);
	cb_break(t, &a, &ch, 1, &out);
	cb_register(t, &a, &x, 1, &ev);
	CHECK_EQ(cb_recheck(t, &a, seq0, &x, 1, &again), 0);
	CHECK(again == NULL);

	/* Nothing changed since seq0: nothing to do. */
	seq0 = cb_seq(t);
	cb_register(t, &a, &y, 1, &ev);
	CHECK_EQ(cb_recheck(t, &a, seq0, &y, 1, &again), 0);

	/* b then a change the same fid after seq0: a still learns of b's. */
	seq0 = cb_seq(t);
	cb_break(t, &b, &ch, 1, &out);
	cb_batch_free(out);
	out = NULL;
	cb_break(t, &a, &ch, 1, &out);
	cb_batch_free(out);
	out = NULL;
	CHECK_EQ(cb_recheck(t, &a, seq0, &x, 1, &again), 1);
	cb_batch_free(again);

	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

static void test_encode(void)
{
	struct owner ob = { "b", 0 };
	struct cb_table *t = cb_table_create(10, NULL);
	struct cb_client a, b;
	struct cb_batch *ev = NULL, *out = NULL;
	struct cairn_fid d = F(5);
	struct wbuf w;

	cb_client_init(t, &a, NULL);
	cb_client_init(t, &b, &ob);
	cb_register(t, &b, &d, 1, &ev);
	struct cb_change ch[2] = { { d, "name", 4, 0, 0 }, { d, NULL, 0, 0, 0 } };
	CHECK_EQ(cb_break(t, &a, ch, 2, &out), 2);
	CHECK(out != NULL);
	wbuf_init(&w);
	cb_batch_encode(out, &w);
	CHECK_EQ(w.err, 0);

	struct wire_hdr h;
	CHECK_EQ(wire_hdr_decode(w.data, &h), 0);
	CHECK_EQ(h.op, OP_CB_BREAK);
	CHECK_EQ(h.flags, WF_PUSH);
	CHECK_EQ(h.id, 0);
	CHECK_EQ(h.len, w.len - WIRE_HDR_SIZE);
	/* What a client reads: the push decodes with the message codec. */
	struct msg_cb_break m;
	struct msg_cbrec rec;
	struct rbuf it;
	int seen_named = 0, seen_self = 0, n = 0;
	CHECK_EQ(msg_decode(OP_CB_BREAK, 0, w.data + WIRE_HDR_SIZE, h.len, &m,
			    NULL), 0);
	CHECK_EQ(m.count, 2);
	rbuf_init(&it, m.recs.p, m.recs.len);
	while (msg_cbrec_next(&it, &rec)) {
		CHECK(fid_eq(rec.fid, d));
		if (rec.name.len == 4 && !memcmp(rec.name.p, "name", 4))
			seen_named = 1;
		if (rec.name.len == 0)
			seen_self = 1;
		n++;
	}
	CHECK_EQ(n, 2);
	CHECK(seen_named && seen_self);
	wbuf_free(&w);
	cb_batch_free(out);
	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

/* --- acknowledgement waits ------------------------------------------------ */

/* A client connection that said HELLO (id byte `who`). */
static void hello(struct cb_table *t, struct cb_client *cl, void *owner,
		  uint8_t who, uint32_t flags)
{
	uint8_t id[16] = { who };

	cb_client_init(t, cl, owner);
	cb_client_hello(t, cl, id, flags);
}

/* A frame to cl: one record, fid itself (name NULL) or its entry. */
static struct cb_batch *frame(struct cb_client *cl, struct cairn_fid fid,
			      const char *name)
{
	struct cb_batch *b = calloc(1, sizeof(*b) + sizeof(b->rec[0]));

	b->owner = cl->owner;
	b->cl = cl;
	b->cap = 1;
	b->count = 1;
	b->rec[0] = (struct cb_record){ fid, name, name ? strlen(name) : 0, 0 };
	return b;
}

/* Send a one-record frame for w (NULL: nobody waits); returns its id. */
static uint32_t send1(struct cb_table *t, struct cb_wait *w,
		      struct cb_client *cl, struct cairn_fid fid,
		      const char *name)
{
	struct cb_batch *b = frame(cl, fid, name);
	uint32_t id = cb_frame_add(t, w, b);

	cb_batch_free(b);
	return id;
}

static void done_count(void *arg)
{
	(*(int *)arg)++;
}

/* A wait for a change of one object (name NULL) or one entry. */
static struct cb_wait *change_wait(struct cb_table *t, struct cb_client *cl,
				   struct cairn_fid fid, const char *name,
				   int pages, int *done)
{
	struct cb_change ch = { fid, name, name ? strlen(name) : 0, 0, 0 };

	return cb_wait_new(t, cl, &ch, 1, pages, done_count, done);
}

#define ACKING (HELLO_CB_ACK | HELLO_CB_NOLOCK)

static void test_ack_wait(void)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a, b, c;
	struct cairn_fid f = F(1);
	int done = 0;

	hello(t, &a, NULL, 1, ACKING);
	hello(t, &b, NULL, 2, ACKING);
	hello(t, &c, NULL, 3, 0); /* does not acknowledge */
	struct cb_wait *w = change_wait(t, &a, f, NULL, 1, &done);
	uint32_t ib = send1(t, w, &b, f, NULL);
	uint32_t ic = send1(t, w, &c, f, NULL);
	CHECK(ib && ic && ib != ic);
	CHECK_EQ(cb_wait_arm(t, w), 0); /* waits for b only */
	CHECK_EQ(cb_ack(t, &c, ic), -ENOENT);
	CHECK_EQ(cb_ack(t, &a, ib), -ENOENT); /* not a's frame */
	CHECK_EQ(done, 0);
	CHECK_EQ(cb_ack(t, &b, ib), 0);
	CHECK_EQ(done, 1);
	CHECK_EQ(cb_ack(t, &b, ib), -ENOENT);

	/* A fire-and-forget frame is remembered until acknowledged. */
	uint32_t i2 = send1(t, NULL, &b, f, NULL);
	CHECK_EQ(b.nframes, 1);
	CHECK_EQ(cb_ack(t, &b, i2), 0);
	CHECK_EQ(b.nframes, 0);

	/* Nothing outstanding: arm says so and done is not called. */
	w = change_wait(t, &a, f, NULL, 0, &done);
	send1(t, w, &c, f, NULL);
	CHECK_EQ(cb_wait_arm(t, w), 1);

	/* A client gone settles what waits for it. */
	w = change_wait(t, &a, f, NULL, 0, &done);
	send1(t, w, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, w), 0);
	cb_client_gone(t, &b);
	CHECK_EQ(done, 2);
	CHECK_EQ(b.nframes, 0);
	CHECK_EQ(cb_ack_cycles(t), 0);
	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_drop_client(t, &c);
	cb_table_destroy(t);
}

static void test_ack_own_client(void)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a1, a2, b;
	struct cairn_fid f = F(1);
	int done = 0;

	/* a2 is a's new connection (same client id): a change of a never
	 * waits for a, on either connection, and that is no cycle. */
	hello(t, &a1, NULL, 1, ACKING);
	hello(t, &a2, NULL, 1, ACKING);
	hello(t, &b, NULL, 2, ACKING);
	struct cb_wait *w = change_wait(t, &a1, f, NULL, 1, &done);
	send1(t, w, &a1, f, NULL);
	send1(t, w, &a2, f, NULL);
	uint32_t ib = send1(t, w, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, w), 0);
	CHECK_EQ(cb_ack(t, &b, ib), 0);
	CHECK_EQ(done, 1);
	CHECK_EQ(cb_ack_cycles(t), 0);
	cb_drop_client(t, &a1);
	cb_drop_client(t, &a2);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

/*
 * Two clients create in one directory at once: each create waits for the
 * other's acknowledgement of an entry record. Acknowledging one needs the
 * directory's lock, which the other client's own create holds, unless the
 * client drops entries without it (HELLO_CB_NOLOCK).
 */
static void create_create(uint32_t flags, int want_cycles)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a, b;
	struct cairn_fid d = F(1);
	int done = 0;

	hello(t, &a, NULL, 1, flags);
	hello(t, &b, NULL, 2, flags);
	struct cb_wait *wa = change_wait(t, &a, d, "x", 0, &done);
	uint32_t ib = send1(t, wa, &b, d, "x");
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	struct cb_wait *wb = change_wait(t, &b, d, "y", 0, &done);
	uint32_t ia = send1(t, wb, &a, d, "y");
	CHECK_EQ(cb_ack_cycles(t), want_cycles);
	CHECK_EQ(cb_wait_arm(t, wb), want_cycles ? 1 : 0);
	cb_ack(t, &a, ia);
	cb_ack(t, &b, ib);
	CHECK_EQ(done, want_cycles ? 1 : 2);
	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

static void test_ack_create_create(void)
{
	create_create(HELLO_CB_ACK | HELLO_CB_NOLOCK, 0);
	create_create(HELLO_CB_ACK, 1);
}

/*
 * Writes: a client's WRITE in progress holds the pages its acknowledgement
 * of a break of that file must drop. Two clients writing one file they
 * both cache do deadlock; writing two different files does not.
 */
static void test_ack_writes(void)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a, b;
	struct cairn_fid f = F(1), g = F(2);
	int done = 0;

	hello(t, &a, NULL, 1, ACKING);
	hello(t, &b, NULL, 2, ACKING);
	/* a writes f (b caches it), b writes g (a caches it). */
	struct cb_wait *wa = change_wait(t, &a, f, NULL, 1, &done);
	uint32_t ib = send1(t, wa, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	struct cb_wait *wb = change_wait(t, &b, g, NULL, 1, &done);
	uint32_t ia = send1(t, wb, &a, g, NULL);
	CHECK_EQ(cb_wait_arm(t, wb), 0);
	CHECK_EQ(cb_ack_cycles(t), 0);
	cb_ack(t, &a, ia);
	cb_ack(t, &b, ib);
	CHECK_EQ(done, 2);

	/* Both write f: the second cannot wait. */
	wa = change_wait(t, &a, f, NULL, 1, &done);
	ib = send1(t, wa, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	wb = change_wait(t, &b, f, NULL, 1, &done);
	send1(t, wb, &a, f, NULL);
	CHECK_EQ(cb_ack_cycles(t), 1);
	CHECK_EQ(cb_wait_arm(t, wb), 1);
	cb_ack(t, &b, ib);
	CHECK_EQ(done, 3);

	/* A chmod of f holds no pages: no cycle with a write of f. */
	wa = change_wait(t, &a, f, NULL, 1, &done);
	ib = send1(t, wa, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	wb = change_wait(t, &b, f, NULL, 0, &done);
	ia = send1(t, wb, &a, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wb), 0);
	CHECK_EQ(cb_ack_cycles(t), 1);
	cb_ack(t, &a, ia);
	cb_ack(t, &b, ib);
	CHECK_EQ(done, 5);
	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

/*
 * A client acknowledges its frames in order, so an acknowledgement may
 * wait for what an earlier unacknowledged frame needs, even one nobody
 * waits for. Here b's write of f (which a caches) holds f's pages and
 * waits for a; a (which takes directory locks to drop entries) has an
 * unacknowledged break of an entry of d, so a's acknowledgement may wait
 * for a's own create in d. That create breaks b with an entry record,
 * which b drops without locks, but only after the earlier break of f.
 */
static void earlier_frames(int earlier, int want_cycles)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a, b;
	struct cairn_fid f = F(1), d = F(2);
	int done = 0;

	hello(t, &a, NULL, 1, HELLO_CB_ACK);
	hello(t, &b, NULL, 2, ACKING);
	uint32_t iq = send1(t, NULL, &a, d, "q");
	struct cb_wait *wb = change_wait(t, &b, f, NULL, 1, &done);
	uint32_t ia = send1(t, wb, &a, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wb), 0);
	uint32_t iff = earlier ? send1(t, NULL, &b, f, NULL) : 0;
	struct cb_wait *wa = change_wait(t, &a, d, "x", 0, &done);
	uint32_t ib = send1(t, wa, &b, d, "x");
	CHECK_EQ(cb_ack_cycles(t), want_cycles);
	CHECK_EQ(cb_wait_arm(t, wa), want_cycles ? 1 : 0);
	if (iff)
		CHECK_EQ(cb_ack(t, &b, iff), 0);
	cb_ack(t, &b, ib);
	cb_ack(t, &a, iq);
	cb_ack(t, &a, ia);
	CHECK_EQ(done, want_cycles ? 1 : 2);
	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_table_destroy(t);
}

static void test_ack_earlier_frames(void)
{
	earlier_frames(1, 1);
	earlier_frames(0, 0);
}

/*
 * The parked-resend case: b's change of d runs for b's old connection b1
 * (b reconnected as b2; its resend waits for that change in the duplicate
 * request cache) and waits for a. a's change of d then breaks b on b2. A
 * client that takes d's lock to drop the entry deadlocks on its own
 * resent request: the graph sees it because b1 and b2 are one node.
 */
static void resend(uint8_t b2_id, int want_cycles)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a, b1, b2;
	struct cairn_fid d = F(1);
	int done = 0;

	hello(t, &a, NULL, 1, HELLO_CB_ACK);
	hello(t, &b1, NULL, 2, HELLO_CB_ACK);
	hello(t, &b2, NULL, b2_id, HELLO_CB_ACK);
	struct cb_wait *wb = change_wait(t, &b1, d, "y", 0, &done);
	uint32_t ia = send1(t, wb, &a, d, "y");
	CHECK_EQ(cb_wait_arm(t, wb), 0);
	cb_client_gone(t, &b1); /* the old connection closed */
	struct cb_wait *wa = change_wait(t, &a, d, "x", 0, &done);
	uint32_t ib = send1(t, wa, &b2, d, "x");
	CHECK_EQ(cb_ack_cycles(t), want_cycles);
	CHECK_EQ(cb_wait_arm(t, wa), want_cycles ? 1 : 0);
	cb_ack(t, &b2, ib);
	cb_ack(t, &a, ia);
	CHECK_EQ(done, want_cycles ? 1 : 2);
	cb_drop_client(t, &a);
	cb_drop_client(t, &b1);
	cb_drop_client(t, &b2);
	cb_table_destroy(t);
}

static void test_ack_resend(void)
{
	resend(2, 1); /* b2 is b: a cycle, refused */
	resend(3, 0); /* another client: no cycle */
}

/*
 * A request of b parked behind a's write token on f may hold f's pages
 * in b's kernel (a READ): a's changes neither keep waiting nor start
 * waiting for b's acknowledgement of a record of f while it is parked,
 * but still do for another object, for an entry of f, and for another
 * client; once b's request has run again (cb_unblock) they wait again.
 */
static void test_ack_parked_reader(void)
{
	struct cb_table *t = cb_table_create(100, NULL);
	struct cb_client a, b, c;
	struct cairn_fid f = F(1), g = F(2);
	int done = 0;

	hello(t, &a, NULL, 1, ACKING);
	hello(t, &b, NULL, 2, HELLO_CB_ACK); /* takes directory locks */
	hello(t, &c, NULL, 3, ACKING);
	/* a's grant waits for b and c; then b's READ of f parks behind a. */
	struct cb_wait *wa = change_wait(t, &a, f, NULL, 0, &done);
	uint32_t ib = send1(t, wa, &b, f, NULL);
	uint32_t ic = send1(t, wa, &c, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	struct cb_blockent *blk = cb_block(t, &b, &a, &f);
	CHECK(blk != NULL);
	CHECK_EQ(cb_ack_cycles(t), 1);
	CHECK_EQ(done, 0);           /* c still to answer */
	CHECK_EQ(cb_ack(t, &c, ic), 0);
	CHECK_EQ(done, 1);           /* b not waited for any more */
	CHECK_EQ(cb_ack(t, &b, ib), 0); /* still its frame to answer */

	/* While parked: a new change of a's skips b's record of f only. */
	wa = change_wait(t, &a, f, NULL, 1, &done);
	send1(t, wa, &b, f, NULL);
	CHECK_EQ(cb_ack_cycles(t), 2);
	uint32_t ig = send1(t, wa, &b, g, NULL);
	uint32_t ie = send1(t, wa, &b, f, "x"); /* an entry: a lock, no pages */
	CHECK_EQ(cb_ack_cycles(t), 2);
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	cb_ack(t, &b, ig);
	CHECK_EQ(done, 1);
	cb_ack(t, &b, ie);
	CHECK_EQ(done, 2);
	/* Another holder's changes are not affected. */
	struct cb_wait *wc = change_wait(t, &c, f, NULL, 0, &done);
	uint32_t ib2 = send1(t, wc, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wc), 0);
	CHECK_EQ(cb_ack_cycles(t), 2);
	cb_ack(t, &b, ib2);
	CHECK_EQ(done, 3);

	/* Run again: a waits for b again. */
	cb_unblock(t, blk);
	wa = change_wait(t, &a, f, NULL, 0, &done);
	ib = send1(t, wa, &b, f, NULL);
	CHECK_EQ(cb_wait_arm(t, wa), 0);
	CHECK_EQ(cb_ack_cycles(t), 2);
	cb_ack(t, &b, ib);
	CHECK_EQ(done, 4);
	cb_unblock(t, NULL); /* out of memory at cb_block: nothing to undo */
	cb_drop_client(t, &a);
	cb_drop_client(t, &b);
	cb_drop_client(t, &c);
	cb_table_destroy(t);
}

int main(void)
{
	run("callback register and break skip the changer",
	    test_register_and_break);
	run("callback entry records in one batch per client",
	    test_entries_one_batch);
	run("callback table is bounded, oldest evicted", test_bounded);
	run("callback drop client", test_drop_client);
	run("callback recheck closes the reply/break race", test_recheck_race);
	run("callback CB_BREAK frame encoding", test_encode);
	run("callback acknowledgement waits", test_ack_wait);
	run("callback never waits for the changer's own client",
	    test_ack_own_client);
	run("callback concurrent creates in one directory",
	    test_ack_create_create);
	run("callback concurrent writes", test_ack_writes);
	run("callback acknowledgements wait for earlier frames",
	    test_ack_earlier_frames);
	run("callback a resent change is its client's", test_ack_resend);
	run("callback a parked reader is not waited for by the holder",
	    test_ack_parked_reader);
	return failed_total ? 1 : 0;
}

/*
 * deliver.c - reply delivery. See deliver.h.
 *
 * A reply whose breaks are to be acknowledged moves, with everything that
 * follows it, into a struct parked on the heap; the connection is parked
 * (conn_park) so it stays alive and keeps its promises until the reply has
 * gone. parked_done, run by whichever thread settles the last
 * acknowledgement, finishes it exactly as deliver_reply would have.
 *
 * Changes of clients that said HELLO_REPLAY go through the duplicate
 * request cache first (deliver_begin): a resent change is answered from
 * it, and the reply of an original is recorded in reply_finish, when it
 * is sent, i.e. after its breaks were acknowledged; duplicates that
 * arrived meanwhile are answered then too (drc_replay).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "callback.h"
#include "deliver.h"
#include "drc.h"
#include "handlers.h"
#include "server.h"
#include "stats.h"
#include "store.h"

/* Everything that follows the breaks' acknowledgement. */
struct parked {
	const struct srv_ctx *ctx;
	struct conn *c;
	struct wbuf w;            /* the reply frame */
	uint64_t seq0;
	uint16_t op;
	size_t in_bytes;
	struct cb_batch *evicted;
	struct timespec t0;       /* when the wait began; 0 if none */
	struct drc_client *dc;    /* the cache entry to complete, if any */
	struct drc_entry *de;
	char close_after[64];
	int np;
	struct cairn_fid *fid;    /* the reply's promises: fids below when
				   * parked, else the handler's own array */
	struct cairn_fid fids[];
};

/* b could not be sent: its client never learns that it was made a holder
 * of the orphans its records flag (orphan_holders), so it gives up those
 * holds here instead of never. */
static void unhold(const struct srv_ctx *ctx, const struct cb_batch *b)
{
	for (uint32_t i = 0; i < b->count; i++)
		if (b->rec[i].flags & CB_ORPHANED)
			store_orphan_drop(ctx->st, conn_client_id(b->owner),
					  &b->rec[i].fid, 1, NULL);
}

/*
 * Deliver CB_BREAK batches; releases the references the table took. With
 * w, w waits for each frame's acknowledgement where cb_frame_add decides
 * it may (never for the changer's own client, on this connection or
 * another: that client reads the break before the reply it belongs to).
 * A frame that cannot be sent is settled at once (its client is closing).
 */
static void send_batches(const struct srv_ctx *ctx, struct cb_batch *list,
			 struct cb_wait *w)
{
	struct wbuf wb;

	wbuf_init(&wb);
	for (struct cb_batch *b = list; b; b = b->next) {
		struct conn *oc = b->owner;
		size_t n;

		b->id = cb_frame_add(ctx->cb, w, b);
		wbuf_reset(&wb);
		cb_batch_encode(b, &wb);
		n = wb.len;
		if (wb.err)
			conn_fail(oc, "cannot encode callback break: %s",
				  strerror(-wb.err));
		if (!wb.err && conn_send(oc, &wb) == 0) {
			stats_cb_break(ctx->stats, b->count, n);
		} else {
			cb_ack(ctx->cb, b->cl, b->id);
			unhold(ctx, b);
		}
		conn_put(oc);
	}
	wbuf_free(&wb);
	cb_batch_free(list);
}

/* --- the duplicate request cache ------------------------------------------ */

/*
 * Re-break for cl what another client changed since seq0 among fids
 * (cb_recheck): the reply that carries them may predate that change,
 * and the change did not wait for cl, which held no promise then.
 * Called twice around the reply: before it, so that a client that checks
 * its break sequence does not cache the reply (and the changer, which
 * may have returned already, is not contradicted by any cache of cl's);
 * after it, so that a client that applies frames in order drops what it
 * cached from it.
 */
static void rebreak(const struct srv_ctx *ctx, struct conn *c, uint64_t seq0,
		    const struct cairn_fid *fids, int n)
{
	struct cb_batch *again = NULL;

	if (n && cb_recheck(ctx->cb, conn_cb_client(c), seq0, fids, n,
			    &again) < 0)
		conn_fail(c, "cannot record a callback break: out of memory");
	send_batches(ctx, again, NULL);
}

/*
 * Answer a duplicate on c from the cache: the original's reply frame (its
 * id is the duplicate's), its promises registered for c, and re-broken
 * around it for whatever changed since the original began (rebreak from
 * the original's seq0, as for any reply computed before a concurrent
 * change).
 */
static void drc_replay(const struct srv_ctx *ctx, struct conn *c,
		       const struct drc_reply *r)
{
	struct cb_batch *evicted = NULL;
	struct cb_client *cl = conn_cb_client(c);
	struct wbuf w;

	if (r->nfid && cb_register(ctx->cb, cl, r->fid, r->nfid, &evicted) < 0)
		log_warn("peer %s: callback table out of memory", conn_peer(c));
	rebreak(ctx, c, r->seq0, r->fid, r->nfid);
	wbuf_init(&w);
	wire_put_bytes(&w, r->frame, r->len);
	if (w.err)
		conn_fail(c, "out of memory for a cached reply");
	else
		conn_send(c, &w);
	wbuf_free(&w);
	rebreak(ctx, c, r->seq0, r->fid, r->nfid);
	send_batches(ctx, evicted, NULL);
}

/* Release duplicates parked on a cache entry (drc_begin parked their
 * connections through the hook): answer each with r, or, with r NULL,
 * fail its connection (it sent the same malformed bytes). */
static void drc_release(const struct srv_ctx *ctx, struct drc_waiter *wl,
			const struct drc_reply *r)
{
	while (wl) {
		struct drc_waiter *n = wl->next;
		struct conn *c = wl->owner;

		if (r)
			drc_replay(ctx, c, r);
		else
			conn_fail(c, "resent a malformed request");
		conn_unpark(c);
		free(wl);
		wl = n;
	}
}

/* Answer request h on c with an error frame and nothing else. */
static void reply_status(struct conn *c, const struct wire_hdr *h,
			 int status)
{
	struct wbuf w;
	size_t hdr;

	wbuf_init(&w);
	hdr = wire_frame_begin(&w, h->op, WF_REPLY, h->id, status);
	wire_frame_end(&w, hdr);
	conn_send(c, &w);
	wbuf_free(&w);
}

int deliver_begin(const struct srv_ctx *ctx, struct conn *c,
		  const struct wire_hdr *h, struct delivery *d)
{
	struct drc_reply *rep = NULL;
	enum drc_verdict v;

	d->seq0 = cb_seq(ctx->cb);
	d->dc = msg_has(h->op, MSG_DRC) ? conn_drc(c) : NULL;
	d->de = NULL;
	if (!d->dc)
		return 0;
	v = drc_begin(d->dc, c, h->id, h->op, &d->de, &rep);
	switch (v) {
	case DRC_REPLAY:
		log_debug("peer %s: %s id %u answered from the duplicate "
			  "request cache", conn_peer(c), msg_name(h->op),
			  h->id);
		drc_replay(ctx, c, rep);
		drc_reply_free(rep);
		return 1;
	case DRC_WAITING:
		return 1; /* answered when the original is */
	case DRC_NOMEM:
		reply_status(c, h, -ENOMEM);
		return 1;
	case DRC_RUN:
	case DRC_UNCACHED:
		break;
	}
	return 0;
}

void deliver_abort(const struct srv_ctx *ctx, struct delivery *d)
{
	if (d->de)
		drc_release(ctx, drc_abort(d->dc, d->de), NULL);
	d->de = NULL;
}

/* --- the reply ---------------------------------------------------------------- */

static uint64_t us_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - t0->tv_sec) * 1000000u +
	       (uint64_t)((now.tv_nsec - t0->tv_nsec) / 1000);
}

/* Send the reply, with the re-breaks around it, then evict. Returns
 * -EPROTO if the connection was closed on purpose after the reply. */
static int reply_finish(struct parked *p)
{
	const struct srv_ctx *ctx = p->ctx;
	size_t out_bytes = p->w.len;

	if (p->de) {
		/* Done now that every break was acknowledged: a duplicate
		 * may have its reply from here on. */
		struct drc_reply r = { .frame = p->w.data, .len = p->w.len,
				       .fid = p->fid, .nfid = p->np,
				       .seq0 = p->seq0 };
		drc_release(ctx, drc_finish(p->dc, p->de, &r), &r);
		p->de = NULL;
	}
	if (p->t0.tv_sec || p->t0.tv_nsec)
		stats_cb_ack_wait(ctx->stats, us_since(&p->t0));
	rebreak(ctx, p->c, p->seq0, p->fid, p->np);
	conn_send(p->c, &p->w);
	rebreak(ctx, p->c, p->seq0, p->fid, p->np);
	send_batches(ctx, p->evicted, NULL);
	p->evicted = NULL;
	stats_op(ctx->stats, p->op, p->in_bytes, out_bytes);
	if (p->close_after[0]) {
		conn_fail(p->c, "%s", p->close_after);
		return -EPROTO;
	}
	return 0;
}

/* cb_wait done callback: the parked reply may go now. */
static void parked_done(void *arg)
{
	struct parked *p = arg;
	struct conn *c = p->c;

	reply_finish(p);
	wbuf_free(&p->w);
	free(p);
	conn_unpark(c);
}

/*
 * out made orphan an orphan, held by c's client. Every other client that
 * held a promise on it (those whose batches in brk have its record) may
 * have it open: make each a holder too, before any of them can read its
 * break (a holder drops it as soon as it knows it does not have it open),
 * and flag their records CB_ORPHANED. Nothing is flagged when the store
 * fails or the orphan is gone already: those clients are no holders.
 */
static void orphan_holders(const struct srv_ctx *ctx, struct conn *c,
			   struct cb_batch *brk, const struct cairn_fid *orphan)
{
	const uint8_t *self = conn_client_id(c);
	uint8_t (*ids)[STORE_HOLDER_SIZE] = NULL;
	size_t n = 0, cap = 0;
	int rc;

	for (struct cb_batch *b = brk; b; b = b->next) {
		const uint8_t *id = conn_client_id(b->owner);

		if (!memcmp(id, self, STORE_HOLDER_SIZE))
			continue;
		for (uint32_t i = 0; i < b->count; i++) {
			if (b->rec[i].namelen ||
			    !cairn_fid_eq(&b->rec[i].fid, orphan))
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 8;
				void *p = realloc(ids, nc * sizeof(*ids));

				if (!p) {
					log_error("orphan holders: out of "
						  "memory");
					free(ids);
					return;
				}
				ids = p;
				cap = nc;
			}
			memcpy(ids[n++], id, STORE_HOLDER_SIZE);
			break;
		}
	}
	if (!n)
		return;
	rc = store_orphan_hold(ctx->st, orphan, &ids[0][0], n);
	free(ids);
	if (rc < 0)
		log_error("orphan %llu: cannot record its other holders: %s",
			  (unsigned long long)orphan->vnode, strerror(-rc));
	if (rc <= 0)
		return;
	for (struct cb_batch *b = brk; b; b = b->next) {
		if (!memcmp(conn_client_id(b->owner), self, STORE_HOLDER_SIZE))
			continue;
		for (uint32_t i = 0; i < b->count; i++)
			if (!b->rec[i].namelen &&
			    cairn_fid_eq(&b->rec[i].fid, orphan))
				b->rec[i].flags |= CB_ORPHANED;
	}
}

/*
 * Break what out changed for the other clients. Returns where the rest of
 * the delivery lives: *local, or, when acknowledgements are to be waited
 * for, a copy on the heap with *wait open for it (not yet armed).
 */
static struct parked *break_changes(const struct srv_ctx *ctx,
				    struct conn *c, struct parked *local,
				    const struct handler_out *out,
				    struct cb_wait **wait)
{
	struct cb_batch *brk = NULL;
	struct parked *p = NULL;

	*wait = NULL;
	if (cb_break(ctx->cb, conn_cb_client(c), out->ch, out->nch, &brk) < 0)
		log_error("callback break: out of memory");
	for (int i = 0; brk && i < out->norphan; i++)
		orphan_holders(ctx, c, brk, &out->orphan[i]);
	if (brk)
		p = malloc(sizeof(*p) + (size_t)out->np * sizeof(p->fids[0]));
	if (p) {
		*p = *local;
		p->fid = p->fids;
		memcpy(p->fids, out->pfid, (size_t)out->np * sizeof(p->fids[0]));
		/* A WRITE holds its pages in the requester's kernel, and so
		 * does a WTOKEN (a client asks for it from its WRITE); a
		 * WRITEATTR is a WRITE. */
		*wait = cb_wait_new(ctx->cb, conn_cb_client(c), out->ch,
				    out->nch, local->op == OP_WRITE ||
				    local->op == OP_WRITEATTR ||
				    local->op == OP_WTOKEN,
				    parked_done, p);
	}
	if (*wait) {
		clock_gettime(CLOCK_MONOTONIC, &p->t0);
	} else {
		/* Nothing to wait for, or out of memory: break without
		 * waiting, as a client that never acknowledges would get. */
		free(p);
		p = local;
	}
	send_batches(ctx, brk, *wait);
	return p;
}

int deliver_reply(const struct srv_ctx *ctx, struct conn *c,
		  const struct wire_hdr *h, struct delivery *d,
		  struct handler_out *out)
{
	struct parked local = { .ctx = ctx, .c = c, .w = out->w,
				.seq0 = d->seq0, .op = h->op,
				.in_bytes = WIRE_HDR_SIZE + (size_t)h->len,
				.np = out->np, .fid = out->pfid,
				.dc = d->dc, .de = d->de };
	struct parked *p = &local;
	struct cb_wait *wait = NULL;
	int ret = 0;

	/* A cache entry belongs to a cache handle. A request run on the
	 * reader thread (MSG_INLINE) only reads LMDB: it changes nothing, so
	 * it never waits for a group commit or for acknowledgements, and the
	 * reader keeps reading acknowledgements (docs/LOCKING.md). */
	CAIRN_ASSERT(!d->de || d->dc);
	CAIRN_ASSERT(!out->nch || !msg_has(h->op, MSG_INLINE));
	memcpy(local.close_after, out->close_after, sizeof(local.close_after));
	wbuf_init(&out->w); /* the reply belongs to the delivery now */
	d->de = NULL;
	if (out->nch)
		p = break_changes(ctx, c, &local, out, &wait);
	/* Parked on the heap exactly when a wait is open for it. */
	CAIRN_ASSERT((p != &local) == (wait != NULL));
	if (out->np && cb_register(ctx->cb, conn_cb_client(c), out->pfid,
				   out->np, &p->evicted) < 0)
		log_warn("peer %s: callback table out of memory",
			 conn_peer(c));
	if (wait) {
		conn_park(c); /* before arming: done may run at once */
		if (!cb_wait_arm(ctx->cb, wait))
			goto out; /* parked_done finishes, on another thread */
		conn_unpark(c);
		p->t0 = (struct timespec){ 0 }; /* settled already: no wait */
	}
	ret = reply_finish(p);
	wbuf_free(&p->w);
	if (p != &local)
		free(p);
out:
	handler_out_free(out);
	return ret;
}

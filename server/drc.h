/*
 * drc.h - the server's duplicate request cache (docs/PROTOCOL.md,
 * "Retransmission after a reconnect").
 *
 * A client that said HELLO_REPLAY keeps a request's id when it resends it
 * on a new connection, and never reuses an id otherwise. For such clients
 * the server remembers, per 16-byte client id (stable across reconnects),
 * the outcome of its recent changes: request id -> in progress, or done
 * with the encoded reply frame and the FIDs that reply promised. A resent
 * change is then answered from the cache instead of being executed twice
 * (a repeated REMOVE would otherwise say -ENOENT although it happened).
 *
 * A duplicate of a request still in progress (its original runs, or waits
 * for callback acknowledgements, on behalf of the dead connection) is
 * parked on the entry, and gets the reply from whichever thread finishes
 * the original (drc_finish returns the parked duplicates to the caller).
 * The cache never touches a connection: it stores the duplicate's owner
 * as an opaque pointer and calls the park hook given to drc_create, which
 * keeps that owner alive until the caller has answered it. Nothing ever
 * blocks in here.
 *
 * Bounds: at most DRC_MAX_DONE finished entries per client (the oldest are
 * dropped first; entries in progress are never dropped), and a client with
 * no connection left is forgotten after DRC_IDLE_S seconds. The cache
 * lives in memory only: a restarted server has forgotten everything. The
 * namespace changes are covered across restarts by the store instead
 * (store.h, store_tag_set); the others are executed again.
 *
 * Locking: one mutex per table, a leaf: the park hook runs under it and
 * must take no lock (the server's is conn_park, two atomic increments).
 * See docs/LOCKING.md.
 */
#ifndef CAIRN_DRC_H
#define CAIRN_DRC_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

#define DRC_MAX_DONE 256
#define DRC_IDLE_S   600

struct drc;
struct drc_client;
struct drc_entry;

/* A finished request's outcome. */
struct drc_reply {
	const uint8_t *frame;        /* the whole reply frame, header included */
	size_t len;
	const struct cairn_fid *fid; /* promises the reply carries */
	int nfid;
	uint64_t seq0;               /* cb_seq() before the original ran */
};

/* A duplicate parked on an entry in progress; the park hook was called
 * with its owner. */
struct drc_waiter {
	struct drc_waiter *next;
	void *owner;
};

enum drc_verdict {
	DRC_RUN,      /* new request: execute it, then drc_finish/drc_abort */
	DRC_REPLAY,   /* done before: send *rep (a copy; drc_reply_free) */
	DRC_WAITING,  /* in progress: parked, the finisher answers it */
	DRC_UNCACHED, /* not cacheable (id reused for another op): execute */
	DRC_NOMEM,    /* cannot park it: answer -ENOMEM */
};

/*
 * Create a cache. park, if not NULL, is called under the cache's lock
 * with the owner of every duplicate parked on an entry in progress
 * (drc_begin), so the caller can keep that owner alive until it answers
 * it (drc_finish, drc_abort); it must not take any lock. Returns NULL on
 * allocation failure.
 */
struct drc *drc_create(void (*park)(void *owner));
/* Every client handle must have been released. */
void drc_destroy(struct drc *d);

/*
 * The cache of client `id`, created on first use, with a reference for
 * the caller (a connection holds one for its life). Also forgets idle
 * clients. Returns NULL on allocation failure (the connection is then
 * served without a cache).
 */
struct drc_client *drc_client_get(struct drc *d, const uint8_t id[16]);
void drc_client_put(struct drc_client *dc);

/*
 * Request `id` of opcode `op` arrives from `owner` (the server's conn).
 * DRC_RUN: *e is the new entry in progress. DRC_REPLAY: *rep is a copy of
 * the cached outcome. DRC_WAITING: owner was parked on the entry in
 * progress (the park hook was called with it).
 */
enum drc_verdict drc_begin(struct drc_client *dc, void *owner, uint32_t id,
			   uint16_t op, struct drc_entry **e,
			   struct drc_reply **rep);
/*
 * The request of entry e was answered with r (copied). Returns the parked
 * duplicates: the caller sends r to each, then releases what the park
 * hook took (conn_unpark) and frees it. e must not be used afterwards.
 */
struct drc_waiter *drc_finish(struct drc_client *dc, struct drc_entry *e,
			      const struct drc_reply *r);
/* The request of entry e was not answered (malformed): forget e. Returns
 * its parked duplicates, as drc_finish. */
struct drc_waiter *drc_abort(struct drc_client *dc, struct drc_entry *e);
void drc_reply_free(struct drc_reply *r);

/* Forget clients idle for DRC_IDLE_S (cheap; call it now and then). */
void drc_expire(struct drc *d);
/* Requests answered from the cache, for STATUS. */
uint64_t drc_hits(struct drc *d);
/* Clients and finished entries held, for STATUS. */
void drc_counts(struct drc *d, long *clients, long *entries);

#endif

/*
 * deliver.h - reply delivery: what happens to a request around its
 * handler (handlers.h).
 *
 * Before the handler: deliver_begin takes the callback sequence number
 * and admits a change of a client that said HELLO_REPLAY to the duplicate
 * request cache (drc.h); a resent change is answered from the cache, or
 * parked behind its original, and never reaches a handler.
 *
 * After it, deliver_reply sends what the handler produced, in this order,
 * which is what makes callbacks safe against concurrent requests:
 *
 *   seq0 = cb_seq()            deliver_begin, before the store is asked
 *   handler                    store call, reply encoded
 *   cb_break + send            other clients learn of the change...
 *   cb_register
 *   wait for the acks          ...and have invalidated their kernel's
 *                              copies before the changer's reply is sent
 *   cb_recheck + send          re-break what a concurrent change made
 *                              stale (it did not wait for us: we held no
 *                              promise yet), before the reply...
 *   send reply                 (and record it in the cache)
 *   cb_recheck + send          ...and after it (see rebreak in deliver.c)
 *
 * The wait holds no thread: when breaks are outstanding, the reply and
 * everything after it are parked, and sent by whichever thread settles the
 * last acknowledgement. The wait never includes the changer's own client:
 * it reads the break before this reply. See callback.h for why this
 * cannot deadlock and docs/LOCKING.md for the whole picture.
 *
 * Called on the thread that runs the request (the connection's reader or a
 * worker), holding no lock.
 */
#ifndef CAIRN_DELIVER_H
#define CAIRN_DELIVER_H

#include <stdint.h>
#include "../lib/wire.h"

struct srv_ctx;
struct conn;
struct handler_out;
struct drc_client;
struct drc_entry;

/* A request admitted to run: filled by deliver_begin. */
struct delivery {
	uint64_t seq0;            /* cb_seq() before the handler ran */
	struct drc_client *dc;    /* the cache entry to complete, if any */
	struct drc_entry *de;
};

/*
 * Request h arrived on c. Returns 0 when it is to be run (d filled; end
 * with deliver_reply or deliver_abort), or 1 when it has been dealt with
 * already: answered from the duplicate request cache, parked behind its
 * original (answered when that one is), or answered -ENOMEM.
 */
int deliver_begin(const struct srv_ctx *ctx, struct conn *c,
		  const struct wire_hdr *h, struct delivery *d);

/*
 * Deliver out, the handler's outcome for request h on c: break, register,
 * wait for acknowledgements (parked, without holding the thread), send,
 * recheck; record the reply in the cache. Releases out. Returns 0, or
 * -EPROTO when the connection was closed on purpose after the reply
 * (out->close_after): the caller must stop reading from c.
 */
int deliver_reply(const struct srv_ctx *ctx, struct conn *c,
		  const struct wire_hdr *h, struct delivery *d,
		  struct handler_out *out);

/* The request was not answered (its payload was malformed and c has been
 * failed): forget its cache entry, failing the connections of duplicates
 * parked on it (they sent the same bytes). */
void deliver_abort(const struct srv_ctx *ctx, struct delivery *d);

#endif

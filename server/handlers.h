/*
 * handlers.h - the server's request handlers, one per opcode of
 * docs/PROTOCOL.md, dispatched through a table indexed by opcode.
 *
 * A request flows one way: the connection's reader (server.c) reads and
 * checks the frame, delivery admits it (deliver.h: the duplicate request
 * cache), handler_run() executes it, and delivery sends what it produced.
 * A handler decodes its request, checks that every field is acceptable
 * (answering an errno as Linux would when one is not), calls the store and
 * encodes the reply frame. It also records what delivery needs: the FIDs
 * whose attributes the reply carries (promises for the requester) and the
 * things it changed (callback breaks for the other clients). A handler
 * never sends anything; promises, breaks and the duplicate request cache's
 * entries are delivery's business.
 */
#ifndef CAIRN_HANDLERS_H
#define CAIRN_HANDLERS_H

#include <stdint.h>
#include <time.h>
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "callback.h"

struct server;
struct store;
struct stats;
struct conn;
struct orphan_table;
struct tok_table;
struct lk_table;

/* Server-wide state the handlers and delivery use; set up once by
 * server.c, then read-only. Every pointer outlives every request. */
struct srv_ctx {
	struct server *srv;
	struct store *st;
	struct cb_table *cb;
	struct stats *stats;
	struct orphan_table *orph; /* holders of orphans (orphan.h) */
	struct tok_table *tok;     /* write tokens (token.h) */
	struct lk_table *lk;       /* locks (lock.h) */
	uint8_t server_id[16];
	uint64_t epoch;           /* changes every time the server starts */
	struct timespec started;  /* CLOCK_MONOTONIC */
	int no_root_squash;       /* uid 0 in credentials stays root */
};

#define HANDLER_MAX_CHANGES 32
_Static_assert(HANDLER_MAX_CHANGES <= CB_MAX_CHANGES,
	       "one request's changes must fit one cb_break call");

/*
 * What one request produced, for delivery. Filled by handler_run, read
 * by deliver_reply, released with handler_out_free. Not movable (pfid
 * may point at pfix).
 */
struct handler_out {
	struct wbuf w;              /* the complete reply frame */
	/* FIDs of the attrs in the reply: promises for the requester. */
	struct cairn_fid *pfid;     /* pfix, or malloc'ed when it outgrew it */
	int np, pcap;
	struct cairn_fid pfix[4];
	int nomem;                  /* a promise could not be recorded */
	/* What the request changed: breaks for the other clients. The names
	 * point into the request's payload, valid until delivery returns. */
	struct cb_change ch[HANDLER_MAX_CHANGES];
	int nch;
	/* Set: the changes stand although the request failed (what failed
	 * came after them: SA_SYNC), so they are broken all the same. */
	int changed;
	/* Objects the change made orphans: every other client their
	 * breaks reach becomes a holder (deliver.c). */
	struct cairn_fid orphan[CAIRN_REMOVES_MAX];
	int norphan;
	/* Non-empty: fail the connection with this reason after the reply
	 * (a HELLO of an unsupported version). */
	char close_after[64];
	/* Set: another client holds park_fid's write token; the request
	 * changed nothing and must wait for it (server.c parks it; no
	 * reply was built). */
	int park;
	struct cairn_fid park_fid;
};

/*
 * Execute request (h, payload of h->len bytes) received on c and encode
 * its reply frame into out. Returns 0 (out filled: an error reply carries
 * no payload and promises nothing, except a negative LOOKUP, which
 * promises the directory), or -EPROTO when the payload was malformed or
 * was a failed handshake: the connection has then been failed (reason
 * logged), out holds nothing to release, and the caller must stop reading
 * from c. An opcode without a handler is answered -ENOSYS.
 */
int handler_run(const struct srv_ctx *ctx, struct conn *c,
		const struct wire_hdr *h, const uint8_t *payload,
		struct handler_out *out);
void handler_out_free(struct handler_out *out);

/*
 * 0 when every request opcode (every descriptor that is not a push) has
 * a handler; otherwise -ENOSYS with *missing set to the first one's name.
 * server_start refuses to run without them.
 */
int handlers_check(const char **missing);

/*
 * Serve the operations named in list (comma or space separated, as in
 * PROTOCOL.md, any case) as a server that predates them would: answered
 * -ENOSYS, having done nothing. For testing clients against older
 * servers; `cairn serve` takes the list from $CAIRN_SERVE_WITHOUT. Call
 * before serving. Returns 0, or -EINVAL with err set for a name that is
 * not an operation (or is AUTH or HELLO).
 */
#define HANDLERS_WITHOUT_ENV "CAIRN_SERVE_WITHOUT"
int handlers_refuse(const char *list, char *err, size_t errsz);

#endif

/*
 * callback.h - the server's callback promise table.
 *
 * A promise says "client C's copy of object F is current; I will tell C
 * before anyone else's change to F is acknowledged". Every reply that
 * carries an attr registers one for the requester (cb_register); a change
 * collects the holders to notify and drops their promises (cb_break).
 *
 * The table is a pure data structure: it never touches a socket. Functions
 * that produce notifications return a list of struct cb_batch, one per
 * client to notify, which the caller encodes (cb_batch_encode), sends and
 * frees (cb_batch_free) after the table lock is released. So a slow client
 * never holds up the table.
 *
 * Memory is bounded: at most `max_promises` promises exist. Registering
 * past the bound evicts the oldest promises (of any client); each evicted
 * holder gets a batch so it learns the promise is gone.
 *
 * Race between a reply and a concurrent change. A reply computed from an
 * old version can be registered after the change's break ran, or be sent
 * after the break it caused. Either way the client could keep stale data.
 * The table therefore counts breaks (a sequence number) and remembers, per
 * hash slot of FIDs, the last break and who made it. A handler takes
 * cb_seq() before asking the store, registers, sends its reply, then calls
 * cb_recheck(): any FID of the reply broken by another client since that
 * sequence number is broken again for the requester, now after the reply
 * on the same connection. Hash collisions only cause extra breaks.
 *
 * Acknowledgements. Every CB_BREAK frame carries a non-zero id
 * (cb_frame_add); a client that said HELLO_CB_ACK answers it once its
 * kernel no longer holds the broken copies. A change is acknowledged only
 * after its breaks are: the handler opens a wait (cb_wait_new), adds each
 * break frame (cb_frame_add), sends the frames, registers, then arms the
 * wait (cb_wait_arm). The wait's `done` callback runs exactly once, with
 * no lock held, when every frame it waits for is settled: acknowledged
 * (cb_ack), its client gone (cb_client_gone, cb_drop_client), or timed
 * out (cb_expire, which first reports the silent clients as lost).
 * Nothing blocks: the reply of a waiting change is sent by whichever
 * thread settles the last frame, so no worker thread is held while
 * clients answer.
 *
 * Deadlock avoidance. A client's acknowledgement can depend on its own
 * requests in progress: its kernel invalidation may need a lock (a
 * directory's i_rwsem, a file's locked pages) that one of its FUSE
 * requests holds while it waits for our reply. Only replies that wait for
 * acknowledgements (waits) are held back by anyone, so a deadlock is a
 * cycle "wait X of client A waits for client B's acknowledgement, which
 * waits for B's wait Y, which waits for A's acknowledgement, which waits
 * for X". The table keeps that graph exactly enough to see such cycles:
 *
 *   - A node is a client (its HELLO client id), not a connection, so a
 *     change parked on an old connection of a client that reconnected
 *     (its resend waits for it in the duplicate request cache) is still
 *     that client's.
 *   - An acknowledgement on a connection may wait only for the client's
 *     own waits that hold a lock one of the connection's unacknowledged
 *     frames needs: the locked pages of an object a record names without
 *     a name, which only a WRITE in progress holds (cb_wait_new's
 *     `pages`); and, unless the client said HELLO_CB_NOLOCK, the i_rwsem
 *     of the directory of an entry record, which any change of that
 *     directory holds. A HELLO_CB_NOLOCK client drops directory entries
 *     without taking the directory's lock (docs/LOCKING.md), so its
 *     acknowledgement of entry records never waits for its own requests.
 *   - A frame to the changer's own client is never waited for: the client
 *     reads it before the reply it belongs to (same connection, or the
 *     duplicate request cache's replay on its new one), and nobody else is
 *     involved.
 *
 * cb_frame_add does not wait for a client when waiting could close a
 * cycle; that break is then delivered without being waited for (it still
 * carries an id and is still acknowledged), and counted (cb_ack_cycles).
 * See docs/LOCKING.md.
 */
#ifndef CAIRN_CALLBACK_H
#define CAIRN_CALLBACK_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"
#include "../lib/wire.h"

struct cb_table;
struct cb_promise;

struct cb_node;
struct cb_ackent;

/*
 * Per-connection state, embedded in the owner's connection object and set
 * up with cb_client_init. The first four fields are guarded by the
 * table's lock, the rest by its ack lock; callers only read `owner`.
 */
struct cb_client {
	void *owner;              /* handed back in batches */
	uint64_t id;              /* unique per cb_client_init, never reused */
	struct cb_promise *head;  /* this client's promises */
	size_t count;
	int acks;                 /* acknowledges breaks (HELLO_CB_ACK) */
	int nolock;               /* ... entry records without locks
				   * (HELLO_CB_NOLOCK) */
	int gone;                 /* never acknowledges again */
	struct cb_node *node;     /* its client id's node (cb_client_hello) */
	struct cb_ackent *frames; /* frames sent, not yet acknowledged */
	unsigned nframes;
	int untracked;            /* a frame went out over CB_FRAMES_MAX: what
				   * its acknowledgement waits for is unknown */
};

/*
 * One changed thing. name NULL (or namelen 0): the object fid itself
 * (attributes or data). Otherwise the directory entry `name` of directory
 * fid. `all` says who gets a record: CB_OTHERS, every holder but the
 * changer, whose promise stays (its reply carries the fresh state);
 * CB_ALL, the changer too (objects the change touched but whose fresh
 * attributes are not in the changer's reply); CB_OTHERS_GONE, every
 * holder but the changer, whose promise is dropped without a record (an
 * object the change destroyed, and the changer said it forgets it
 * itself: REMOVE with RM_SELF).
 * flags: CB_ATTRS_ONLY (lib/proto.h) when the object's change was to
 * attributes only, copied to its records (a record two changes share keeps
 * it only if both had it). name must stay valid until the batches are
 * encoded.
 */
enum { CB_OTHERS = 0, CB_ALL = 1, CB_OTHERS_GONE = 2 };

struct cb_change {
	struct cairn_fid fid;
	const char *name;
	size_t namelen;
	int all;
	uint8_t flags;
};

struct cb_record {
	struct cairn_fid fid;
	const char *name; /* not owned */
	size_t namelen;
	uint8_t flags;    /* CB_ATTRS_ONLY from the change; CB_ORPHANED
			   * (lib/proto.h), set by the caller before
			   * encoding */
};

/* Notifications owed to one client: one CB_BREAK frame. */
struct cb_batch {
	struct cb_batch *next;
	void *owner;       /* the cb_client's owner, held via the hold hook */
	struct cb_client *cl; /* its table entry (valid while owner is held) */
	uint32_t id;       /* frame id (0 until the caller sets it) */
	uint32_t count;
	uint32_t cap;
	struct cb_record rec[];
};

/*
 * Create a table holding at most max_promises (>= 1) promises. hold, if
 * not NULL, is called under one of the table's locks with the owner of
 * every client put into a batch or passed to cb_expire's lost, so the
 * caller can take a reference that keeps the owner alive until the batch
 * is sent; it must take no lock. Returns NULL on allocation failure.
 */
struct cb_table *cb_table_create(size_t max_promises, void (*hold)(void *));
/* Every client must have been dropped (cb_drop_client) first. */
void cb_table_destroy(struct cb_table *t);

void cb_client_init(struct cb_table *t, struct cb_client *cl, void *owner);

/* Current break sequence number; take it before reading the store. */
uint64_t cb_seq(struct cb_table *t);

/*
 * Register (or refresh) cl's promise on each of fids[0..n). Evictions
 * needed to stay under the bound are appended to *evicted. Returns 0 or
 * -ENOMEM (then some promises may be missing: the client simply gets no
 * break for them, so -ENOMEM also breaks them for cl through *evicted).
 */
int cb_register(struct cb_table *t, struct cb_client *cl,
		const struct cairn_fid *fids, int n, struct cb_batch **evicted);

/* Whether a client other than cl holds a promise on fid now. */
int cb_others_hold(struct cb_table *t, const struct cb_client *cl,
		   const struct cairn_fid *fid);

/* Changes one cb_break call takes at most. */
#define CB_MAX_CHANGES 32

/*
 * A change by `changer` (may be NULL) touched ch[0..n) (n <=
 * CB_MAX_CHANGES, else -EINVAL). Every other client holding a promise on
 * a changed fid gets one batch with one record per change it holds a
 * promise on; those promises are dropped.
 * Bumps the break sequence. Appends batches to *out. Returns the number
 * of records, or -ENOMEM (then the affected clients' promises on the
 * changed fids are dropped without notice being possible; the caller
 * should treat that as fatal for them).
 */
int cb_break(struct cb_table *t, const struct cb_client *changer,
	     const struct cb_change *ch, int n, struct cb_batch **out);

/*
 * After sending a reply that carried fids[0..n), taken at sequence seq0:
 * for every fid broken by a client other than cl since seq0, drop cl's
 * promise and append a record for cl to *out. Returns the number of
 * records or -ENOMEM.
 */
int cb_recheck(struct cb_table *t, struct cb_client *cl, uint64_t seq0,
	       const struct cairn_fid *fids, int n, struct cb_batch **out);

/* Drop every promise of cl (its connection is going away); implies
 * cb_client_gone, and releases cl's node. */
void cb_drop_client(struct cb_table *t, struct cb_client *cl);

/* Number of promises in the table. */
size_t cb_count(struct cb_table *t);

/*
 * Append batch b as one CB_BREAK push frame with id b->id to w, built
 * with lib/msg.h's CB_BREAK codec (one record per b->rec).
 */
void cb_batch_encode(const struct cb_batch *b, struct wbuf *w);
/* Free a list of batches (does not release the owners' references). */
void cb_batch_free(struct cb_batch *b);

/* --- acknowledgements (see the top of this file) ------------------------ */

/* How long a change waits for a client's acknowledgement before that
 * client is declared lost: the protocol's, which clients' leases are
 * shorter than (lib/proto.h). */
#define CB_ACK_TIMEOUT_MS CAIRN_CB_ACK_MS
/* Unacknowledged frames remembered per connection; past it, frames nobody
 * waits for go out unrecorded (see cb_client.untracked). */
#define CB_FRAMES_MAX 4096

struct cb_wait;

/*
 * cl said HELLO with client id `id` and HELLO_* `flags`: it acknowledges
 * breaks (HELLO_CB_ACK; only such clients are waited for), entry records
 * without its own locks (HELLO_CB_NOLOCK), and every connection with the
 * same id is the same node of the wait-for graph. Call once, before cl's
 * first request runs. Out of memory, cl is a node of its own.
 */
void cb_client_hello(struct cb_table *t, struct cb_client *cl,
		     const uint8_t id[16], uint32_t flags);

/*
 * Open a wait for a change requested by `waiter` that changed ch[0..n)
 * (n <= CB_MAX_CHANGES, copied); `pages`: while the request is in
 * progress, the requester's kernel holds the cached pages of those
 * objects locked (a WRITE). done(arg) will be called once, after
 * cb_wait_arm. Returns NULL on allocation failure (the caller then
 * replies without waiting).
 */
struct cb_wait *cb_wait_new(struct cb_table *t, struct cb_client *waiter,
			    const struct cb_change *ch, int n, int pages,
			    void (*done)(void *arg), void *arg);
/*
 * The id for batch b's frame (to b->cl), recorded as unacknowledged until
 * cb_ack or the client is gone. With w not NULL, w waits for its
 * acknowledgement if b->cl acknowledges breaks, is not gone, is not the
 * waiter's own client and waiting cannot close a cycle (see above); with
 * w NULL nothing waits (a fire-and-forget break). Returns a non-zero id.
 * Only b->cl and b's records are read, during the call.
 */
uint32_t cb_frame_add(struct cb_table *t, struct cb_wait *w,
		      const struct cb_batch *b);
/*
 * A request of client `blocked` that holds fid's pages locked in its
 * kernel (a READ, a WRITE) is parked behind the write token of client
 * `holder` (token.h). blocked's acknowledgement of a break that needs
 * those pages then waits for the token, which holder returns only after
 * its own changes are acknowledged: a cycle the waits alone do not show.
 * So until cb_unblock (of what cb_block returned, once the request runs
 * again; NULL is ignored),
 * no change of holder's waits for such a frame of blocked, including
 * the ones already waiting (they may complete: their done runs). The
 * frames are still delivered and acknowledged; counted in cb_ack_cycles.
 * Out of memory, only the waits already open are let go.
 */
struct cb_blockent;
struct cb_blockent *cb_block(struct cb_table *t, struct cb_client *blocked,
			     struct cb_client *holder,
			     const struct cairn_fid *fid);
void cb_unblock(struct cb_table *t, struct cb_blockent *b);

/* Breaks not waited for because waiting could have closed a cycle. */
uint64_t cb_ack_cycles(struct cb_table *t);
/*
 * Start w's clock (CB_ACK_TIMEOUT_MS). Returns 1 when nothing is
 * outstanding: w is then freed and done is NOT called (the caller goes
 * on itself). Returns 0 when done will be called later, by another
 * thread or by one of the calls below made later on this one.
 */
int cb_wait_arm(struct cb_table *t, struct cb_wait *w);
/*
 * Client cl acknowledged break `id` (or its frame could not be sent: the
 * sender calls this too). Unknown ids and ids of frames to other clients
 * are ignored. May run the done callbacks of waits it completes. Returns
 * 0, or -ENOENT for an id not recorded.
 */
int cb_ack(struct cb_table *t, struct cb_client *cl, uint32_t id);
/*
 * cl will never acknowledge anything again (its connection is closing):
 * stop waiting for it now and never wait for it again. Runs the done
 * callbacks of waits it completes. cb_drop_client implies it.
 */
void cb_client_gone(struct cb_table *t, struct cb_client *cl);
/*
 * Time out waits armed more than CB_ACK_TIMEOUT_MS ago. Every client that
 * one of them still waits for is marked gone and passed to lost(arg,
 * owner) with a reference taken by the hold hook, which lost must
 * release; then the done callbacks of every wait that completed run.
 * Returns the number of clients lost.
 */
int cb_expire(struct cb_table *t, void (*lost)(void *arg, void *owner),
	      void *arg);

#endif

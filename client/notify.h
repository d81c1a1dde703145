/*
 * notify.h - callback breaks: from the server's push to the kernel's caches.
 *
 * The rpc reader thread hands every push to notify_on_push() and every
 * reconnect to notify_on_reconnect(). Those update the inode table at once
 * (the promise is gone) and queue invalidations; a dedicated notifier
 * thread then calls fuse_lowlevel_notify_inval_inode / _inval_entry. The
 * notify calls take the kernel's inode locks, which a FUSE request in
 * progress may hold while it waits for our reply, so they are never made
 * from a FUSE handler, from the rpc reader thread, or with any lock held.
 *
 * Break sequence: every break and reconnect advances a counter under a
 * write lock. A handler snapshots it (notify_seq) before sending its
 * request, and replies to the kernel between notify_reply_begin() and
 * notify_reply_end() (a read lock). notify_reply_begin() returns 1 when no
 * break arrived since the snapshot: only then may the reply promise the
 * kernel long cache lifetimes. Because a break that arrives later is
 * queued only after the reply reached the kernel, its invalidation cannot
 * be overtaken by the reply it invalidates.
 *
 * Acknowledgements: a CB_BREAK push carries an id, and the server holds
 * back the change that caused it until we answer (docs/PROTOCOL.md). The
 * answer is queued behind the push's invalidations and sent by the
 * notifier thread only once every one of them returned, so "acked" means
 * "the kernel no longer holds what was broken". A stuck notifier costs us
 * the connection (the server times the ack out), never anyone else's
 * progress.
 *
 * Life cycle: notify_create() -> notify_start() -> ... -> notify_stop()
 * -> notify_destroy(). The on_* callbacks may run before notify_start (no
 * table yet: breaks are then ignored, as nothing was handed to the kernel).
 */
#ifndef CAIRN_CLIENT_NOTIFY_H
#define CAIRN_CLIENT_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

struct notify;
struct itab;
struct dcache;
struct fuse_session;
struct rpc;

/* Returns 0 and *out, or -ENOMEM. */
int notify_create(struct notify **out);
/*
 * The HELLO flags (lib/proto.h) the notifier can honour on this kernel,
 * for the connection's first HELLO: HELLO_CB_NOLOCK when the kernel can
 * advance its dentry epoch (Linux 6.16 or later, going by uname).
 * notify_start checks it and has the connection say the truth from then
 * on (rpc_update_hello_flags: a reconnect, if the guess was wrong).
 */
uint32_t notify_hello_flags(void);
/* Bind to the mounted session, inode table and connection
 * (acknowledgements are sent through it, and its calls that change
 * something are watched: rpc_set_call_hook; call before rpc_start), and
 * start the notifier threads. Returns 0 or a negative errno. */
int notify_start(struct notify *n, struct fuse_session *se, struct itab *t,
		 struct rpc *rpc);
/* Stop the thread (pending invalidations are dropped: the session is
 * going away) and log what it did: callback break records received,
 * reconnects, kernel invalidations made and failed (other than ENOENT: a
 * failure may leave the kernel caching what a break ended), and
 * acknowledgements sent. Safe to call when not started. */
void notify_stop(struct notify *n);
void notify_destroy(struct notify *n);

/* Queue an invalidation of ino's attributes and pages in the kernel (no
 * acknowledgement, no sequence change). For a handler that handed the
 * kernel server data after a break for it may already have been applied
 * (its notify_reply_begin was not fresh): the data must not outlive this
 * reply. Callable from any thread that holds no lock. */
void notify_inval_inode(struct notify *n, uint64_t ino);

/* rpc_opts.on_push / on_reconnect / on_lapse; arg is the struct notify.
 * A lapse drops every promise as a reconnect does, except on what a write
 * token held covers (the held hook below), and touches nothing else. */
void notify_on_push(void *arg, uint16_t op, uint32_t id,
		    const uint8_t *payload, size_t len);
void notify_on_reconnect(void *arg, int epoch_changed);
void notify_on_lapse(void *arg, const char *why);

/* Apply breaks and reconnects to the cached directories too (set once,
 * before the session serves; dc must outlive n's use of it). */
void notify_set_dircache(struct notify *n, struct dcache *dc);

/* Called, with no lock held, on the rpc's reader thread, for every
 * CB_BREAK record flagged CB_ORPHANED (we were made a holder of that
 * orphan); it must only queue, never call the server. Set once, before
 * the session serves. */
void notify_set_orphan_hook(struct notify *n,
			    void (*fn)(void *arg, const struct cairn_fid *fid),
			    void *arg);

/* Write-back (client/wback.h): recall(arg, fid) for every FID of a
 * CB_RECALL push, and reconnected(arg) after a reconnect, both on the
 * rpc's reader thread with no lock held; they must only queue. held(arg,
 * &fids) (wb_held) at a lapse, with seq_lock held: what the write tokens
 * held keep. Set once, before the session serves. */
void notify_set_wback_hooks(struct notify *n,
			    void (*recall)(void *arg,
					   const struct cairn_fid *fid),
			    void (*reconnected)(void *arg),
			    size_t (*held)(void *arg, struct cairn_fid **out),
			    void *arg);

/* Current break sequence number (see above). */
/* Make the kernel write inode ino's dirty pages to the daemon (under the
 * writeback cache) and drop its pages and attributes, before returning:
 * called by a request handler (not the notifier), never while the caller
 * holds anything a WRITE of ino needs. 0 or a negative errno. */
int notify_writeback_inode(struct notify *n, uint64_t ino);
/* The kernel changed a file through inode ino: its other incarnations go
 * out of date (itab_stale_others), their pages and names invalidated.
 * One table lookup when there are none. */
void notify_stale_others(struct notify *n, uint64_t ino);
/* Put data (len bytes at off) in inode ino's page cache. A store past
 * the kernel's size of the file moves it there: the one way to grow the
 * size of an inode the kernel holds under the writeback cache (it
 * ignores the size in our attributes). Same callers as above. */
int notify_store(struct notify *n, uint64_t ino, uint64_t off,
		 const void *data, size_t len);

/* Locks (fs_lock.c): wake(arg, fid) for each CB_LOCKWAKE, recall(arg,
 * fid) for each CB_LKRECALL; reconnected(arg) after each reconnect.
 * Called on the rpc's reader thread: they must not call the server. */
void notify_set_lock_hooks(struct notify *n,
			   void (*wake)(void *arg, const struct cairn_fid *fid),
			   void (*recall)(void *arg, const struct cairn_fid *fid),
			   void (*reconnected)(void *arg), void *arg);

uint64_t notify_seq(struct notify *n);
/* Enter the reply section; returns 1 if no break since `seq`, else 0.
 * Must be paired with notify_reply_end() on the same thread; sections do
 * not nest, and nothing inside one waits for the server. */
int notify_reply_begin(struct notify *n, uint64_t seq);
/* The same, for a reply whose attributes are of other objects than
 * vnodes[0..nv): 2 when no break came since `seq` (as 1 above); 1 when
 * every break since was about those objects alone (the server breaks
 * the changer's own promise on an object its change touched but whose
 * attributes the reply lacks: a rename's moved file, an unlink's
 * victim), as far as the last NOTIFY_LOG breaks tell: the reply's
 * attributes are current, but not what this client keeps of those
 * objects (a listing holding them); else 0. */
int notify_reply_begin_except(struct notify *n, uint64_t seq,
			      const uint64_t *vnodes, int nv);
void notify_reply_end(struct notify *n);

/*
 * Counters, for `cairn status MOUNTPOINT` (client/ctl.h); read with
 * atomics, no lock, from any thread. ack_us_* time each acknowledgement
 * from the push's arrival on the rpc reader to the ack written to the
 * socket: the kernel invalidations it waited for and the queue ahead of
 * it, i.e. how long this client held the other client's change back.
 */
struct notify_stats {
	uint64_t pushes;        /* CB_BREAK messages received */
	uint64_t breaks;        /* break records they carried */
	uint64_t reconnects;    /* every promise dropped at once */
	uint64_t invals_sent;   /* kernel invalidations made */
	uint64_t invals_failed; /* ... that failed other than ENOENT */
	uint64_t acks;          /* acknowledgements sent */
	uint64_t epochs;        /* dentry epoch advances (dentries of a
				 * directory our own change may hold) */
	uint64_t rescues;       /* ... of them while an invalidation by
				 * name waited for such a change */
	uint64_t barriers;      /* inodes not found, waited for while a
				 * reply was being linked */
	uint64_t stale_others; /* writes that put other incarnations of
				 * their file out of date */
	uint64_t ack_us_total;
	uint64_t ack_us_max;
	uint64_t queued;        /* work items waiting for the notifier */
};
void notify_get_stats(struct notify *n, struct notify_stats *out);

/*
 * Debug check (CAIRN_DEBUG builds; nothing otherwise): abort unless the
 * calling thread holds none of n's locks, i.e. is neither inside a reply
 * section nor applying a break. Called before anything that waits for the
 * server: the rpc reader needs seq_lock for writing to deliver any reply
 * (docs/LOCKING.md).
 */
void notify_assert_not_held(struct notify *n);

#endif

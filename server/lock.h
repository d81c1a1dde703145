/*
 * lock.h - flock and POSIX byte-range locks, granted by the server and
 * held across every client of the volume (docs/PROTOCOL.md, "Locks").
 *
 * The table keeps, per locked file, the locks (lib/lkset.h) and the
 * clients waiting for them. Locks belong to a client (its HELLO client
 * id), not to a connection: a client that reconnects still holds them.
 * When a client's last connection ends, its locks are kept for the lease
 * (`cairn serve --lock-lease`) and then dropped, so a dead client blocks
 * nobody for longer. After a server start, a grace period (`--lock-grace`)
 * lets clients reclaim the locks they held (LK_RECLAIM) before anyone
 * gets a new one.
 *
 * A request that conflicts answers -EAGAIN; with LK_WAIT the requester's
 * connection is also noted as waiting on the file, and CB_LOCKWAKE is
 * pushed to it when a lock of that file is released or downgraded (or the
 * grace period ends): the client asks again. Nobody polls. A POSIX wait
 * that would close a cycle of owners waiting for each other, across
 * clients, answers -EDEADLK instead.
 *
 * Delegation (LOCKD): when a grant leaves every lock of a file with one
 * client, no other client waits for one or asked for one in the last
 * 10 s, the file's locks may be delegated to that client: it grants,
 * tests and releases them among its own owners without asking. Another
 * client's request then recalls them (CB_LKRECALL; it is answered
 * -EINPROGRESS and woken by CB_LOCKWAKE once they are back), and the
 * holder hands back every lock it holds on the file (LKRETURN). A
 * holder that does not within the lease loses them.
 *
 * Locking: one mutex, a leaf except that pushes are sent after it is
 * dropped (docs/LOCKING.md). Every function may be called from any thread.
 */
#ifndef CAIRN_SERVER_LOCK_H
#define CAIRN_SERVER_LOCK_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/lkset.h"
#include "../lib/proto.h"

struct conn;
struct lk_table;
struct lk_client;

#define LK_LEASE_MS 10000u /* default --lock-lease */
#define LK_GRACE_MS 10000u /* default --lock-grace */
#define LK_MAX_PER_CLIENT 65536u

/*
 * The grace period applies only when clients may hold locks from before
 * this start: the table keeps a marker file, DATA/locks-held, from its
 * first grant until a stop with no lock held. Without the marker (first
 * start, clean stop) the server grants at once.
 */
struct lk_table *lk_table_create(const char *data_dir, unsigned lease_ms,
				 unsigned grace_ms);
/* The server stopped cleanly: no lock held, the marker goes. */
void lk_table_stopped(struct lk_table *t);
void lk_table_destroy(struct lk_table *t);

/* A connection of client `id` said HELLO: its client record (created,
 * or found with its locks, its lease expiry cancelled). NULL: out of
 * memory. */
struct lk_client *lk_attach(struct lk_table *t, const uint8_t id[16]);
/* Connection c of cl ended: its waits end; when it was cl's last
 * connection, cl's lease starts. */
void lk_detach(struct lk_table *t, struct lk_client *cl, struct conn *c);

/*
 * LOCK: req's owner/range/type/kind (req->client is set here). flags:
 * LK_WAIT, LK_RECLAIM, LK_CANCEL, and LK_DELEG (LOCKD: the file's locks
 * may be delegated; *deleg says whether they are now). 0: granted
 * (released); -EAGAIN: in conflict (with LK_WAIT c now waits);
 * -EINPROGRESS (LK_DELEG only): another client's delegation is being
 * recalled, c waits for its return; -EDEADLK; -ENOLCK: a reclaim the
 * server cannot grant, or too many locks; -ENOMEM.
 */
int lk_lock(struct lk_table *t, struct conn *c, struct lk_client *cl,
	    const struct cairn_fid *fid, struct lkent *req, uint32_t flags,
	    int *deleg);

/* GETLK: 1 and *out the first conflicting lock (out->pid 0 when it is
 * another client's), or 0 and out->type LK_UN; with LK_DELEG in flags,
 * -EINPROGRESS as lk_lock. */
int lk_test(struct lk_table *t, struct conn *c, struct lk_client *cl,
	    const struct cairn_fid *fid, const struct lkent *req,
	    uint32_t flags, struct lkent *out);

/* LKRETURN: cl's locks of fid are ents[0..n) now (their client set
 * here), and its delegation of fid ends. 0; -ENOLCK: the file was not
 * delegated to cl (revoked, or the server restarted) and another client
 * holds a conflicting lock now, or too many locks; -ENOMEM. */
int lk_return(struct lk_table *t, struct lk_client *cl,
	      const struct cairn_fid *fid, struct lkent *ents, size_t n);

/* The lease (ms), and how many lock ranges cl holds now. */
unsigned lk_lease_ms(const struct lk_table *t);
size_t lk_client_locks(struct lk_table *t, const struct lk_client *cl);

/* Drop the locks of clients whose lease ran out; wake waiters when the
 * grace period ends. Called by the server's expiry thread. */
void lk_expire(struct lk_table *t);

struct lk_stats {
	uint64_t locks, waiters, clients, granted, conflicts, wakes,
		 reclaims, expired, deadlocks;
	uint64_t delegs, delegs_granted, recalls, deleg_returned,
		 deleg_revoked;
	int in_grace;
};
void lk_get_stats(struct lk_table *t, struct lk_stats *out);

#endif

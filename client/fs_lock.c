/*
 * fs_lock.c - flock and fcntl locks that hold across clients: the kernel's
 * SETLK/SETLKW/GETLK and flock go to the server (docs/PROTOCOL.md, "Locks";
 * server/lock.h), and so do the releases the kernel leaves to the file
 * system: POSIX locks at every close (FLUSH carries the closing process's
 * lock owner), flock and OFD locks when the open file goes (RELEASE).
 *
 * The daemon keeps a copy of the locks this mount holds (lib/lkset.h),
 * per file, for three things: a close of a file with no locks asks the
 * server nothing; after a reconnect the locks are reclaimed (a restarted
 * server lost them); and a lock the server would not give back is
 * reported to the next lock call on that file (EIO), never dropped
 * silently.
 *
 * Caching follows the locks. Before a lock is released, the file's dirty
 * pages go to the daemon and its journal to the server, so the next
 * holder reads what this one wrote; a grant carries the file's attributes
 * and the kernel's pages are dropped if another client changed the file.
 *
 * A blocking request (F_SETLKW, flock without LOCK_NB) that conflicts
 * waits in the daemon for the server's CB_LOCKWAKE on the file (or a
 * reconnect), then asks again; an interrupt (Ctrl-C) ends the wait at
 * once and cancels it on the server.
 *
 * Delegation: a grant may come with the file's delegation (LOCKD,
 * LKD_DELEG: no other client asked for its locks lately). This client
 * then grants, tests and releases the file's locks among its own owners
 * itself, with no call and no shipping at a release (SQLite's nine lock
 * steps a transaction). When another client asks, the server recalls
 * them (CB_LKRECALL): the reclaimer thread writes the kernel's dirty
 * pages of the file and its journal to the server and hands back every
 * lock held (LKRETURN); requests on the file wait for that, then go to
 * the server. A request that would have to wait here for another owner
 * of ours hands the delegation back first and waits at the server, which
 * checks for deadlocks. After a reconnect every delegation is handed
 * back in place of the reclaims; at unmount, likewise.
 *
 * With `cairn mount --local-locks` none of this runs: the kernel keeps
 * each client's locks to itself and opens and closes never enter the
 * daemon (fs.c).
 *
 * Locking: L->lock is a leaf (no call is made holding it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include "fs_int.h"
#include "inode.h"
#include "notify.h"
#include "wback.h"
#include "../lib/clock.h"
#include "../lib/lkset.h"
#include "../lib/log.h"

#define LK_BUCKETS 256u
/* A waiter asks the server again after this long without a wake-up
 * (only a lost push makes that needed). */
#define LK_REASK_MS 30000
/* While it holds locks, the client says something to the server at least
 * this often (a PING when nothing else goes): the server closes the
 * connection of a lock holder silent for longer than its lease. */
#define LK_RENEW_MS 1000
/* A request for a range we hold already, refused (a server in its grace
 * that has not seen our reclaim yet): asked again this many times, the
 * later ones this far apart. */
#define LK_HELD_RETRIES 20
#define LK_HELD_PAUSE_MS 50
/* At unmount, delegations are handed back for at most this long (the
 * server revokes what is left a lease after another client asks). */
#define LK_STOP_RETURN_MS 5000

enum { DG_NONE, DG_HELD, DG_RETURNING };

struct fs_lkfile {
	struct fs_lkfile *next;
	struct cairn_fid fid;
	struct lkset set;      /* ours; client NULL */
	uint64_t gen;          /* CB_LOCKWAKE count */
	int lost;              /* a lock of it could not be reclaimed */
	int nwait;             /* requests of ours waiting on it */
	int deleg;             /* DG_*: its locks are ours to grant */
	int recall_due;        /* hand them back (the reclaimer) */
	int inflight;          /* LOCKDs on their way: a recall may come
				* before the grant it recalls */
	int recall_early;      /* ... and one did */
	fuse_ino_t ino;        /* for the pages at a hand-back */
};

struct fs_locks {
	pthread_mutex_t lock;
	pthread_cond_t cond;   /* gen, a file's gen, reclaiming, stopping */
	struct fs_lkfile *b[LK_BUCKETS];
	uint64_t gen;          /* reconnects */
	int reclaim_due, reclaiming, stopping, started;
	int recall_due;        /* some file's recall_due is set */
	int no_lockd;          /* atomic: the server knows no LOCKD */
	pthread_t reclaimer;
	uint64_t held, waiting, lost, reclaimed, calls, wakes, pings;
	uint64_t delegs, deleg_granted, deleg_returned, local;
	uint64_t reconnects;
	uint64_t next_fh;
	int64_t last_call_ms;  /* atomic: CLOCK_MONOTONIC ms of the last call */
};

static size_t lk_bucket(const struct cairn_fid *fid)
{
	return (size_t)((fid->vnode * 0x9e3779b97f4a7c15ull) >> 40) %
	       LK_BUCKETS;
}

static struct fs_lkfile *lkfile(struct fs_locks *L,
				const struct cairn_fid *fid, int create)
{
	struct fs_lkfile **b = &L->b[lk_bucket(fid)], *f;

	for (f = *b; f; f = f->next)
		if (f->fid.vnode == fid->vnode && f->fid.uniq == fid->uniq &&
		    f->fid.vol == fid->vol)
			return f;
	if (!create || !(f = calloc(1, sizeof(*f))))
		return NULL;
	f->fid = *fid;
	f->next = *b;
	*b = f;
	return f;
}

static void tidy(struct fs_locks *L, struct fs_lkfile *f);

/* Record what the server granted or released (L->lock held). */
static void mirror(struct fs_locks *L, const struct cairn_fid *fid,
		   const struct lkent *e)
{
	struct fs_lkfile *f = lkfile(L, fid, e->type != LK_UN);
	size_t n0;

	if (!f)
		return;
	n0 = f->set.n;
	if (lkset_apply(&f->set, e, NULL))
		log_error("out of memory recording a lock of vnode %" PRIu64
			  ": it is not reclaimed after a server restart",
			  fid->vnode);
	L->held += f->set.n - n0;
	tidy(L, f);
}

/* Do we hold all of e's range for its owner, with its type or a
 * stronger one? */
static int held_here(struct fs_locks *L, const struct cairn_fid *fid,
		     const struct lkent *e)
{
	struct fs_lkfile *f;
	int held;

	pthread_mutex_lock(&L->lock);
	f = lkfile(L, fid, 0);
	held = f && lkset_holds(&f->set, e);
	pthread_mutex_unlock(&L->lock);
	return held;
}

/* Forget f once it holds nothing to remember (L->lock held). */
static void tidy(struct fs_locks *L, struct fs_lkfile *f)
{
	if (!f->set.n && !f->lost && !f->nwait && f->deleg == DG_NONE &&
	    !f->inflight && !f->recall_due) {
		/* Its wake-ups move the global count instead, so that
		 * wake_gen never goes back: a waiter that read it before a
		 * wake-up counted here still sees the change. */
		L->gen += f->gen;
		for (struct fs_lkfile **pp = &L->b[lk_bucket(&f->fid)]; *pp;
		     pp = &(*pp)->next)
			if (*pp == f) {
				*pp = f->next;
				free(f);
				break;
			}
	}
}

/* --- calls ---------------------------------------------------------------- */

/*
 * LOCK, or LOCKD when deleg is given (*deleg: the grant came with the
 * file's delegation). A server without LOCKD is asked with LOCK from
 * then on.
 */
static int lock_call(fuse_req_t req, struct fs *fs,
		     const struct cairn_fid *fid, const struct lkent *e,
		     uint32_t flags, struct cairn_attr *a, int *deleg)
{
	struct fs_locks *L = fs->locks;
	struct msg_lock_req q = {
		.fid = *fid, .owner = e->owner, .start = e->start,
		.end = e->end, .pid = e->pid, .type = e->type,
		.flags = flags | (e->flock ? LK_FLOCK : 0),
	};
	struct msg_lockd_rep p;
	int rc;

	__atomic_add_fetch(&L->calls, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&L->last_call_ms, clock_mono_ms(), __ATOMIC_RELAXED);
	if (deleg) {
		*deleg = 0;
		if (!__atomic_load_n(&L->no_lockd, __ATOMIC_RELAXED)) {
			rc = fs_rpc(req, fs, OP_LOCKD, &q, &p, NULL);
			if (rc != -ENOSYS) {
				if (!rc && a)
					*a = p.attr;
				if (!rc)
					*deleg = (p.flags & LKD_DELEG) != 0;
				return rc;
			}
			if (!__atomic_exchange_n(&L->no_lockd, 1,
						 __ATOMIC_RELAXED))
				log_info("the server delegates no locks (no "
					 "LOCKD): every lock call goes to it");
		}
	}
	rc = fs_rpc(req, fs, OP_LOCK, &q, (struct msg_attr *)&p, NULL);
	if (!rc && a)
		*a = p.attr;
	return rc;
}

/*
 * Answer e here if fid's locks are delegated to us (L->lock held): 1 and
 * *rc, or 0: ask the server. A hand-back under way is waited out; a
 * request that would wait for another owner of ours hands the delegation
 * back first (the server waits and checks for deadlocks).
 */
static int local_lock(struct fs_locks *L, const struct cairn_fid *fid,
		      const struct lkent *e, int sleep, int *rc)
{
	struct fs_lkfile *f;
	size_t n0;

	for (;;) {
		if (L->stopping || !(f = lkfile(L, fid, 0)) ||
		    f->deleg == DG_NONE)
			return 0;
		if (f->deleg == DG_HELD && !(e->type != LK_UN && sleep &&
					     lkset_conflict(&f->set, e)))
			break;
		if (f->deleg == DG_HELD) {
			/* A wait: hand back, then ask the server. */
			f->recall_due = 1;
			L->recall_due = 1;
			pthread_cond_broadcast(&L->cond);
		}
		pthread_cond_wait(&L->cond, &L->lock);
	}
	L->local++;
	if (e->type != LK_UN && lkset_conflict(&f->set, e)) {
		*rc = -EAGAIN;
		return 1;
	}
	n0 = f->set.n;
	*rc = lkset_apply(&f->set, e, NULL) ? -ENOLCK : 0;
	L->held += f->set.n - n0;
	tidy(L, f);
	return 1;
}

/* The same, taking L->lock. */
static int local_lock_call(struct fs_locks *L, const struct cairn_fid *fid,
			   const struct lkent *e, int sleep, int *rc)
{
	int done;

	pthread_mutex_lock(&L->lock);
	done = local_lock(L, fid, e, sleep, rc);
	pthread_mutex_unlock(&L->lock);
	return done;
}

/*
 * Before a release: the kernel's dirty pages of ino to the daemon, and
 * the journal's changes of fid to the server, so that the next holder
 * reads them.
 */
static int ship(struct fs *fs, fuse_ino_t ino, const struct cairn_fid *fid,
		int pages)
{
	int rc;

	if (pages && fs->wb && (rc = notify_writeback_inode(fs->ntf, ino)))
		log_warn("could not write back inode %" PRIu64 " before a "
			 "lock release: %s", (uint64_t)ino, strerror(-rc));
	return fs_wb_settle(fs, fid);
}

/*
 * A grant: take the attributes; if the file changed since the kernel
 * cached it, its pages go. The kernel keeps its own size for an inode
 * it holds (the writeback cache): a file another client made longer
 * would still read short through a descriptor opened before, so its
 * last byte is stored in the kernel's cache, which moves the size.
 * (Nothing makes the kernel take a smaller size: a file another client
 * truncated reads zeros past its end through such a descriptor.) The
 * file's other inodes and names in the kernel went with the break that
 * told us of the change (itab_break).
 */
static void revalidate(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		       uint64_t seq, const struct cairn_attr *a)
{
	struct cairn_attr old;
	int current = 0;
	int had = itab_attr_last(fs->itab, ino, &old, &current) == 0;
	struct msg_read_req q = { .fid = a->fid, .len = 1 };
	struct msg_read_rep p;
	struct rpc_reply rep;
	int rc;

	fs_note_attrs(fs, seq, a, NULL);
	if (had && old.dv == a->dv)
		return;
	notify_writeback_inode(fs->ntf, ino);
	if (!fs->wb || !S_ISREG(a->mode) || !a->size)
		return;
	q.off = a->size - 1;
	if ((rc = fs_rpc(req, fs, OP_READ, &q, &p, &rep)))
		return; /* a read through it fetches what it needs */
	if (p.data.len == 1 && (rc = notify_store(fs->ntf, ino, q.off,
						  p.data.p, 1)))
		log_warn("could not give the kernel the size of inode %" PRIu64
			 " (%" PRIu64 " bytes) after a lock grant: %s",
			 (uint64_t)ino, a->size, strerror(-rc));
	rpc_reply_free(&rep);
}

/*
 * Send a release (e: LK_UN) once the file's changes are on the server;
 * the file's write token, idle now, goes back with it, so that the next
 * holder's reads wait for no recall.
 */
static int unlock_call(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		       const struct cairn_fid *fid, const struct lkent *e,
		       int pages)
{
	int rc, ret;

	if ((rc = ship(fs, ino, fid, pages)))
		log_warn("lock release of vnode %" PRIu64 ": its changes are "
			 "not on the server yet (%s)", fid->vnode,
			 strerror(-rc));
	ret = !rc && wb_return_begin(fs->wbk, fid);
	rc = lock_call(req, fs, fid, e, ret ? LK_RETURN : 0, NULL, NULL);
	if (ret)
		wb_return_end(fs->wbk, fid, rc == 0);
	return rc;
}

/* Release owner's locks of one kind on fid, everywhere; 0 when none. */
static int release_owner(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			 const struct cairn_fid *fid, uint64_t owner, int flk,
			 int pages)
{
	struct fs_locks *L = fs->locks;
	struct lkent e = { .owner = owner, .start = 0, .end = LK_EOF,
			   .type = LK_UN, .flock = (uint8_t)flk };
	struct fs_lkfile *f;
	int has = 0, rc;

	pthread_mutex_lock(&L->lock);
	if ((f = lkfile(L, fid, 0)))
		for (const struct lkent *x = f->set.head; x; x = x->next)
			if (x->owner == owner && x->flock == flk)
				has = 1;
	if (has && local_lock(L, fid, &e, 0, &rc)) {
		pthread_mutex_unlock(&L->lock);
		return rc;
	}
	pthread_mutex_unlock(&L->lock);
	if (!has)
		return 0;
	rc = unlock_call(req, fs, ino, fid, &e, pages);
	if (rc == -ESTALE || rc == -ENOENT)
		rc = 0; /* the file is gone: so are its locks */
	if (!rc) {
		pthread_mutex_lock(&L->lock);
		mirror(L, fid, &e);
		pthread_mutex_unlock(&L->lock);
	}
	return rc;
}

/* EIO once for a file whose lock was lost (not reclaimed). */
static int take_lost(struct fs_locks *L, const struct cairn_fid *fid)
{
	struct fs_lkfile *f;
	int lost = 0;

	pthread_mutex_lock(&L->lock);
	if ((f = lkfile(L, fid, 0)) && f->lost) {
		f->lost = 0;
		lost = 1;
	}
	pthread_mutex_unlock(&L->lock);
	return lost ? -EIO : 0;
}

struct waitctx {
	struct fs_locks *L;
	int intr;
};

static void on_intr(fuse_req_t req, void *data)
{
	struct waitctx *w = data;

	pthread_mutex_lock(&w->L->lock);
	w->intr = 1;
	pthread_cond_broadcast(&w->L->cond);
	pthread_mutex_unlock(&w->L->lock);
}

/* The wake-up count of fid plus the reconnect count (L->lock held). */
static uint64_t wake_gen(struct fs_locks *L, const struct cairn_fid *fid)
{
	struct fs_lkfile *f = lkfile(L, fid, 0);

	return L->gen + (f ? f->gen : 0);
}

/*
 * Wait for a CB_LOCKWAKE of fid (its count moved from gen), a reconnect
 * or an interrupt, at most LK_REASK_MS. -EINTR when interrupted or
 * stopping (the server is told we wait no more), else 0: ask again.
 */
static int wait_wake(fuse_req_t req, struct fs *fs,
		     const struct cairn_fid *fid, const struct lkent *e,
		     uint64_t gen)
{
	struct fs_locks *L = fs->locks;
	struct waitctx wc = { L, 0 };
	struct timespec until;

	if (req)
		fuse_req_interrupt_func(req, on_intr, &wc);
	clock_deadline(CLOCK_REALTIME, LK_REASK_MS, &until);
	pthread_mutex_lock(&L->lock);
	struct fs_lkfile *wf = lkfile(L, fid, 1);

	/* Its wake-ups are counted on its entry: keep it. One made just
	 * now counts from 0, as wake_gen did without it; a wake-up that
	 * found no entry moved L->gen. */
	if (wf)
		wf->nwait++;
	L->waiting++;
	while (!wc.intr && !L->stopping && wake_gen(L, fid) == gen)
		if (pthread_cond_timedwait(&L->cond, &L->lock,
					   &until) == ETIMEDOUT)
			break;
	L->waiting--;
	if (wf) {
		wf->nwait--;
		tidy(L, wf);
	}
	pthread_mutex_unlock(&L->lock);
	if (req)
		fuse_req_interrupt_func(req, NULL, NULL);
	if (wc.intr || L->stopping) {
		/* Not waiting any more: the server may forget us. */
		lock_call(NULL, fs, fid, e, LK_CANCEL, NULL, NULL);
		return -EINTR;
	}
	return 0;
}

/* A grant came (deleg: with the file's delegation) for a request sent
 * when L->reconnects was rc0: record it. */
static void granted(struct fs_locks *L, const struct cairn_fid *fid,
		    fuse_ino_t ino, const struct lkent *e, int deleg,
		    uint64_t rc0)
{
	struct fs_lkfile *f;

	pthread_mutex_lock(&L->lock);
	mirror(L, fid, e);
	if ((f = lkfile(L, fid, deleg))) {
		if (!--f->inflight)
			pthread_cond_broadcast(&L->cond);
		if (deleg && f->deleg == DG_NONE) {
			f->deleg = DG_HELD;
			f->ino = ino;
			L->delegs++;
			L->deleg_granted++;
			if (L->reconnects != rc0) {
				/* Granted before a reconnect this grant's
				 * thread did not see: back with the
				 * reclaims. */
				f->deleg = DG_RETURNING;
				L->reclaim_due = 1;
				L->reclaiming = 1;
				pthread_cond_broadcast(&L->cond);
			}
		}
		if (f->recall_early) {
			/* Its recall came first. */
			f->recall_early = 0;
			if (f->deleg == DG_HELD) {
				f->recall_due = 1;
				L->recall_due = 1;
				pthread_cond_broadcast(&L->cond);
			}
		}
		tidy(L, f);
	}
	pthread_mutex_unlock(&L->lock);
}

/* A LOCKD of fid leaves (1) or came back without a grant (-1). */
static void inflight(struct fs_locks *L, const struct cairn_fid *fid, int d)
{
	struct fs_lkfile *f;

	pthread_mutex_lock(&L->lock);
	if ((f = lkfile(L, fid, d > 0))) {
		f->inflight += d;
		if (!f->inflight) {
			f->recall_early = 0;
			pthread_cond_broadcast(&L->cond);
		}
		tidy(L, f);
	}
	pthread_mutex_unlock(&L->lock);
}

/*
 * Take (or release) lock e on ino: the common path of setlk and flock.
 * sleep: wait for a conflicting lock to go.
 */
static int do_lock(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		   struct lkent *e, int sleep)
{
	struct fs_locks *L = fs->locks;
	struct cairn_fid fid;
	struct cairn_attr a;
	int rc, refused = 0;

	if ((rc = itab_fid(fs->itab, ino, &fid)) || (rc = take_lost(L, &fid)))
		return rc;
	if (e->type == LK_UN) {
		if (local_lock_call(L, &fid, e, 0, &rc))
			return rc;
		if ((rc = unlock_call(req, fs, ino, &fid, e, 1)))
			return rc;
		pthread_mutex_lock(&L->lock);
		mirror(L, &fid, e);
		pthread_mutex_unlock(&L->lock);
		return 0;
	}
	for (;;) {
		uint64_t seq = notify_seq(fs->ntf), gen, rc0;
		int deleg;

		pthread_mutex_lock(&L->lock);
		while (L->reclaiming && !L->stopping)
			pthread_cond_wait(&L->cond, &L->lock);
		gen = wake_gen(L, &fid);
		rc0 = L->reconnects;
		if (local_lock(L, &fid, e, sleep, &rc)) {
			/* Delegated to us (possibly by another thread's
			 * grant meanwhile): answered here. */
			pthread_mutex_unlock(&L->lock);
			return rc;
		}
		pthread_mutex_unlock(&L->lock);
		inflight(L, &fid, 1);
		rc = lock_call(req, fs, &fid, e, sleep ? LK_WAIT : 0, &a,
			       &deleg);
		if (!rc) {
			granted(L, &fid, ino, e, deleg, rc0);
			revalidate(req, fs, ino, seq, &a);
			return 0;
		}
		inflight(L, &fid, -1);
		if (rc == -EINPROGRESS) {
			/* Another client's delegation of the file is on its
			 * way back: ask again once it is. */
			if ((rc = wait_wake(req, fs, &fid, e, gen)))
				return rc;
			continue;
		}
		if (rc == -EAGAIN && !sleep && held_here(L, &fid, e) &&
		    ++refused <= LK_HELD_RETRIES) {
			/* We hold the whole range already (a downgrade, or
			 * a lock asked again): a server only refuses that
			 * in its grace after a restart, before our reclaim
			 * (this request was resent ahead of it). Ask again
			 * once the reclaim is in. */
			pthread_mutex_lock(&L->lock);
			while (L->reclaiming && !L->stopping)
				pthread_cond_wait(&L->cond, &L->lock);
			pthread_mutex_unlock(&L->lock);
			if (refused > 1) {
				struct timespec ts = {
					0, LK_HELD_PAUSE_MS * 1000000L
				};

				nanosleep(&ts, NULL);
			}
			continue;
		}
		if (rc != -EAGAIN || !sleep)
			return rc;
		/* Wait for the server's wake-up, a reconnect or an
		 * interrupt; then ask again. */
		if ((rc = wait_wake(req, fs, &fid, e, gen)))
			return rc;
	}
}

/* --- FUSE operations -------------------------------------------------------- */

static uint8_t lk_type(short t)
{
	return t == F_RDLCK ? LK_RD : t == F_WRLCK ? LK_WR : LK_UN;
}

static int range(const struct flock *l, struct lkent *e)
{
	if (l->l_start < 0 || l->l_len < 0)
		return -EINVAL;
	e->start = (uint64_t)l->l_start;
	if (l->l_len == 0 || (uint64_t)l->l_len - 1 >= LK_EOF - e->start)
		e->end = LK_EOF;
	else
		e->end = e->start + (uint64_t)l->l_len - 1;
	return 0;
}

void fs_op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		 struct flock *lock)
{
	struct fs *fs = req_fs(req);
	struct msg_lock_req q = { .owner = fi->lock_owner,
				  .pid = (uint32_t)lock->l_pid,
				  .type = lk_type(lock->l_type) };
	struct msg_getlk_rep p;
	struct lkent e = { 0 };
	struct fs_locks *L = fs->locks;
	int rc;

	if ((rc = range(lock, &e)) || (rc = itab_fid(fs->itab, ino, &q.fid)))
		goto out;
	q.start = e.start;
	q.end = e.end;
	e.owner = q.owner;
	e.pid = q.pid;
	e.type = (uint8_t)q.type;
	for (;;) {
		const struct lkent *x;
		struct fs_lkfile *f;
		uint64_t gen;

		pthread_mutex_lock(&L->lock);
		while ((f = lkfile(L, &q.fid, 0)) &&
		       f->deleg == DG_RETURNING && !L->stopping)
			pthread_cond_wait(&L->cond, &L->lock);
		if (f && f->deleg == DG_HELD) {
			/* Ours to answer. */
			L->local++;
			p = (struct msg_getlk_rep){ .type = LK_UN };
			if ((x = lkset_conflict(&f->set, &e)))
				p = (struct msg_getlk_rep){
					.type = x->type, .start = x->start,
					.end = x->end, .pid = x->pid };
			pthread_mutex_unlock(&L->lock);
			break;
		}
		gen = wake_gen(L, &q.fid);
		pthread_mutex_unlock(&L->lock);
		if (!__atomic_load_n(&L->no_lockd, __ATOMIC_RELAXED))
			q.flags = LK_DELEG;
		__atomic_add_fetch(&L->calls, 1, __ATOMIC_RELAXED);
		rc = fs_rpc(req, fs, OP_GETLK, &q, &p, NULL);
		if (rc == -EINVAL && q.flags) {
			/* A server from before delegations. */
			__atomic_store_n(&L->no_lockd, 1, __ATOMIC_RELAXED);
			q.flags = 0;
			continue;
		}
		if (rc == -EINPROGRESS) {
			/* Another client's delegation is on its way back. */
			if ((rc = wait_wake(req, fs, &q.fid, &e, gen)))
				goto out;
			continue;
		}
		if (rc)
			goto out;
		break;
	}
	if (p.type == LK_UN) {
		lock->l_type = F_UNLCK;
	} else {
		lock->l_type = p.type == LK_RD ? F_RDLCK : F_WRLCK;
		lock->l_whence = SEEK_SET;
		lock->l_start = (off_t)p.start;
		lock->l_len = p.end >= LK_EOF ? 0 :
			      (off_t)(p.end - p.start + 1);
		lock->l_pid = (pid_t)p.pid;
	}
	fuse_reply_lock(req, lock);
	return;
out:
	reply_error(req, rc);
}

void fs_op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		 struct flock *lock, int sleep)
{
	struct lkent e = { .owner = fi->lock_owner, .fh = fi->fh,
			   .pid = (uint32_t)lock->l_pid,
			   .type = lk_type(lock->l_type) };
	int rc = range(lock, &e);

	reply_error(req, rc ? rc : do_lock(req, req_fs(req), ino, &e, sleep));
}

void fs_op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		 int op)
{
	int how = op & (LOCK_SH | LOCK_EX | LOCK_UN);
	struct lkent e = {
		.owner = fi->lock_owner, .fh = fi->fh, .start = 0,
		.end = LK_EOF, .pid = (uint32_t)fuse_req_ctx(req)->pid,
		.type = how == LOCK_SH ? LK_RD : how == LOCK_EX ? LK_WR : LK_UN,
		.flock = 1,
	};

	reply_error(req, do_lock(req, req_fs(req), ino, &e,
				 !(op & LOCK_NB)));
}

/*
 * FLUSH: a close(). POSIX says the process loses every lock it holds on
 * the file; the kernel leaves that to us (it has written the file's dirty
 * pages back already). Without --local-locks only: there the first FLUSH
 * is answered ENOSYS and the kernel sends no more.
 */
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct cairn_fid fid;
	int rc;

	if (!fs->locks) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if ((!wb_busy(fs->wbk) &&
	     !__atomic_load_n(&fs->locks->held, __ATOMIC_RELAXED)) ||
	    itab_fid(fs->itab, ino, &fid)) {
		fuse_reply_err(req, 0);
		return;
	}
	/* The kernel wrote the file's pages to us before this: the journal
	 * holds a whole close, which a recall may now hand over. */
	wb_closed(fs->wbk, &fid);
	rc = release_owner(req, fs, ino, &fid, fi->lock_owner, 0, 0);
	reply_error(req, rc);
}

/*
 * RELEASE: the open file is gone. Its flock lock goes with it, and so do
 * OFD locks taken through it: a process's own POSIX locks were released
 * by the FLUSH of its close already, so whatever is left recorded with
 * this open's handle belongs to the open file itself.
 */
void fs_lock_release(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	struct fs_locks *L = fs->locks;
	uint64_t owners[16];
	size_t n = 0;
	struct cairn_fid fid;
	struct fs_lkfile *f;

	if (!L || !L->held || itab_fid(fs->itab, ino, &fid))
		return;
	if (fi->flock_release)
		release_owner(NULL, fs, ino, &fid, fi->lock_owner, 1, 0);
	pthread_mutex_lock(&L->lock);
	if ((f = lkfile(L, &fid, 0)))
		for (const struct lkent *x = f->set.head; x && n < 16;
		     x = x->next)
			if (!x->flock && x->fh == fi->fh)
				owners[n++] = x->owner;
	pthread_mutex_unlock(&L->lock);
	for (size_t i = 0; i < n; i++)
		release_owner(NULL, fs, ino, &fid, owners[i], 0, 0);
	(void)req;
}

uint64_t fs_lock_next_fh(struct fs *fs)
{
	return fs->locks ? __atomic_add_fetch(&fs->locks->next_fh, 1,
					      __ATOMIC_RELAXED) : 0;
}

/* --- wake-ups and reclaims ------------------------------------------------ */

static void on_wake(void *arg, const struct cairn_fid *fid)
{
	struct fs_locks *L = arg;
	struct fs_lkfile *f;

	pthread_mutex_lock(&L->lock);
	L->wakes++;
	if ((f = lkfile(L, fid, 0)))
		f->gen++;
	else
		L->gen++; /* a waiter with no lock of the file yet */
	pthread_cond_broadcast(&L->cond);
	pthread_mutex_unlock(&L->lock);
}

/* CB_LKRECALL of fid: the reclaimer hands it back. */
static void on_recall(void *arg, const struct cairn_fid *fid)
{
	struct fs_locks *L = arg;
	struct fs_lkfile *f;

	pthread_mutex_lock(&L->lock);
	if ((f = lkfile(L, fid, 0))) {
		if (f->deleg == DG_HELD) {
			f->recall_due = 1;
			L->recall_due = 1;
			pthread_cond_broadcast(&L->cond);
		} else if (f->inflight) {
			f->recall_early = 1; /* before its grant's reply */
		}
	}
	pthread_mutex_unlock(&L->lock);
}

static void on_reconnect(void *arg)
{
	struct fs_locks *L = arg;

	pthread_mutex_lock(&L->lock);
	L->gen++;
	L->reconnects++;
	/* Delegations go back in place of their reclaims; until then
	 * their files' requests wait. */
	for (size_t i = 0; i < LK_BUCKETS; i++)
		for (struct fs_lkfile *f = L->b[i]; f; f = f->next)
			if (f->deleg == DG_HELD)
				f->deleg = DG_RETURNING;
	if (L->held || L->delegs) {
		L->reclaim_due = 1;
		L->reclaiming = 1;
	}
	pthread_cond_broadcast(&L->cond);
	pthread_mutex_unlock(&L->lock);
}

/* Is rc a lost connection (the next reconnect reclaims)? */
static int conn_error(int rc)
{
	return rc == -EINTR || rc == -ENOTCONN || rc == -ETIMEDOUT ||
	       rc == -ECONNRESET || rc == -EPIPE || rc == -EIO;
}

/*
 * Hand f's delegation back (L->lock held, f->deleg DG_RETURNING; the
 * lock is dropped around the calls): the kernel's dirty pages and the
 * journal's changes of the file go to the server first, then every lock
 * we hold of it, with the write token. reclaim: after a reconnect (they
 * count as reclaimed). Returns 0, or a lost connection's error (the
 * locks stay ours, reclaimed after the reconnect).
 */
static int hand_back(struct fs *fs, struct fs_lkfile *f, int reclaim)
{
	struct fs_locks *L = fs->locks;
	struct cairn_fid fid = f->fid;
	fuse_ino_t ino = f->ino;
	struct msg_lkent *ents = NULL;
	size_t n = 0;
	int rc = 0, ret;

	/* A grant on its way may be part of what goes back: wait for it
	 * (new requests wait for the hand-back; these come back at once). */
	while (f->inflight && !L->stopping)
		pthread_cond_wait(&L->cond, &L->lock);
	if (f->set.n && !(ents = calloc(f->set.n, sizeof(*ents))))
		rc = -ENOMEM;
	for (struct lkent *e = f->set.head; e && ents; e = e->next)
		ents[n++] = (struct msg_lkent){
			.owner = e->owner, .start = e->start, .end = e->end,
			.pid = e->pid, .type = e->type,
			.flags = e->flock ? LK_FLOCK : 0 };
	pthread_mutex_unlock(&L->lock);
	if (!rc) {
		struct msg_lkreturn_req q = { .fid = fid, .count = (uint32_t)n,
					      .ents = ents };
		int shipped = ino ? ship(fs, ino, &fid, 1) : -ENOENT;

		ret = !shipped && wb_return_begin(fs->wbk, &fid);
		q.flags = ret ? LKR_TOKEN : 0;
		__atomic_add_fetch(&L->calls, 1, __ATOMIC_RELAXED);
		rc = fs_rpc(NULL, fs, OP_LKRETURN, &q, NULL, NULL);
		if (ret)
			wb_return_end(fs->wbk, &fid, rc == 0);
	}
	free(ents);
	pthread_mutex_lock(&L->lock);
	if (rc && !conn_error(rc)) {
		log_error("locks of vnode %" PRIu64 " lost: the server would "
			  "not take them back from this client (%s); the next "
			  "lock call on the file fails with EIO", fid.vnode,
			  strerror(-rc));
		L->held -= f->set.n;
		L->lost += f->set.n;
		lkset_clear(&f->set);
		f->lost = 1;
		rc = 0;
	}
	f->deleg = DG_NONE;
	L->delegs--;
	if (!rc)
		L->deleg_returned++;
	if (!rc && reclaim)
		L->reclaimed += f->set.n; /* taken back after a reconnect */
	pthread_cond_broadcast(&L->cond);
	return rc;
}

/* Hand back every delegation recalled (L->lock held, dropped around the
 * calls). */
static void hand_back_recalled(struct fs *fs)
{
	struct fs_locks *L = fs->locks;

	while (L->recall_due && !L->stopping) {
		struct fs_lkfile *f = NULL;

		L->recall_due = 0;
		for (size_t i = 0; i < LK_BUCKETS && !f; i++)
			for (f = L->b[i]; f; f = f->next)
				if (f->recall_due)
					break;
		if (!f)
			break;
		f->recall_due = 0;
		L->recall_due = 1; /* look for more */
		if (f->deleg != DG_HELD) {
			tidy(L, f);
			continue;
		}
		f->deleg = DG_RETURNING;
		if (hand_back(fs, f, 0)) {
			L->reclaim_due = 1; /* reconnecting: reclaim them */
			L->reclaiming = 1;
		}
		tidy(L, f);
	}
}

/* Ask for one file's locks again; those refused are lost. */
static void reclaim_file(struct fs *fs, struct fs_lkfile *snap)
{
	struct fs_locks *L = fs->locks;
	size_t lost = 0, ok = 0;

	for (struct lkent *e = snap->set.head; e; e = e->next) {
		int rc = lock_call(NULL, fs, &snap->fid, e, LK_RECLAIM, NULL,
				   NULL);

		if (rc == 0) {
			ok++;
			continue;
		}
		if (conn_error(rc)) {
			/* The connection went again: the next reconnect
			 * reclaims. */
			pthread_mutex_lock(&L->lock);
			L->reclaim_due = 1;
			pthread_mutex_unlock(&L->lock);
			return;
		}
		log_error("lock of vnode %" PRIu64 " (%s, bytes %" PRIu64
			  "-%" PRIu64 ") lost: the server would not give it "
			  "back after the reconnect (%s); the next lock call "
			  "on the file fails with EIO", snap->fid.vnode,
			  e->flock ? "flock" : "fcntl", e->start, e->end,
			  strerror(-rc));
		struct lkent un = *e;

		un.type = LK_UN;
		pthread_mutex_lock(&L->lock);
		mirror(L, &snap->fid, &un);
		struct fs_lkfile *f = lkfile(L, &snap->fid, 1);
		if (f)
			f->lost = 1;
		L->lost++;
		pthread_mutex_unlock(&L->lock);
		lost++;
	}
	pthread_mutex_lock(&L->lock);
	L->reclaimed += ok;
	pthread_mutex_unlock(&L->lock);
	(void)lost;
}

static void *reclaimer(void *arg)
{
	struct fs *fs = arg;
	struct fs_locks *L = fs->locks;

	pthread_mutex_lock(&L->lock);
	for (;;) {
		while (!L->reclaim_due && !L->stopping) {
			struct timespec until;

			if (L->recall_due && !L->reclaiming) {
				hand_back_recalled(fs);
				continue;
			}

			clock_deadline(CLOCK_REALTIME, LK_RENEW_MS, &until);
			if (pthread_cond_timedwait(&L->cond, &L->lock,
						   &until) != ETIMEDOUT ||
			    !L->held || L->reclaiming ||
			    clock_mono_ms() - __atomic_load_n(&L->last_call_ms,
							__ATOMIC_RELAXED) <
			    LK_RENEW_MS)
				continue;
			/* Holding locks, and quiet: keep the lease. */
			L->pings++;
			pthread_mutex_unlock(&L->lock);
			__atomic_store_n(&L->last_call_ms, clock_mono_ms(),
					 __ATOMIC_RELAXED);
			fs_rpc(NULL, fs, OP_PING, &(struct msg_empty){ 0 },
			       NULL, NULL);
			pthread_mutex_lock(&L->lock);
		}
		if (L->stopping)
			break;
		L->reclaim_due = 0;
		/* Delegations first: each goes back whole. */
		for (int again = 1; again && !L->stopping;) {
			again = 0;
			for (size_t i = 0; i < LK_BUCKETS && !again; i++)
				for (struct fs_lkfile *f = L->b[i]; f;
				     f = f->next)
					if (f->deleg == DG_RETURNING ||
					    (f->deleg == DG_HELD &&
					     f->recall_due)) {
						f->deleg = DG_RETURNING;
						f->recall_due = 0;
						if (hand_back(fs, f, 1))
							L->reclaim_due = 1;
						tidy(L, f);
						again = 1;
						break;
					}
		}
		/* A copy of every other file's locks: the calls run
		 * unlocked. */
		struct fs_lkfile *todo = NULL;

		for (size_t i = 0; i < LK_BUCKETS; i++)
			for (struct fs_lkfile *f = L->b[i]; f; f = f->next) {
				struct fs_lkfile *c;

				if (!f->set.n || f->deleg != DG_NONE ||
				    !(c = calloc(1, sizeof(*c))))
					continue;
				c->fid = f->fid;
				for (struct lkent *e = f->set.head; e;
				     e = e->next)
					lkset_apply(&c->set, e, NULL);
				c->next = todo;
				todo = c;
			}
		pthread_mutex_unlock(&L->lock);
		for (struct fs_lkfile *c = todo, *n; c; c = n) {
			n = c->next;
			reclaim_file(fs, c);
			lkset_clear(&c->set);
			free(c);
		}
		pthread_mutex_lock(&L->lock);
		if (!L->reclaim_due)
			L->reclaiming = 0;
		L->gen++;
		pthread_cond_broadcast(&L->cond);
	}
	L->reclaiming = 0;
	pthread_cond_broadcast(&L->cond);
	pthread_mutex_unlock(&L->lock);
	return NULL;
}

/* --- life ------------------------------------------------------------------ */

int fs_locks_start(struct fs *fs)
{
	struct fs_locks *L = calloc(1, sizeof(*L));

	if (!L)
		return -ENOMEM;
	pthread_mutex_init(&L->lock, NULL);
	pthread_cond_init(&L->cond, NULL);
	fs->locks = L; /* before the thread, which reads it */
	if (pthread_create(&L->reclaimer, NULL, reclaimer, fs)) {
		fs->locks = NULL;
		pthread_cond_destroy(&L->cond);
		pthread_mutex_destroy(&L->lock);
		free(L);
		return -EAGAIN;
	}
	L->started = 1;
	notify_set_lock_hooks(fs->ntf, on_wake, on_recall, on_reconnect, L);
	return 0;
}

void fs_locks_stop(struct fs *fs)
{
	struct fs_locks *L = fs->locks;

	if (!L)
		return;
	/* The session is over: delegations go back now, so that other
	 * clients do not wait a lease for them. */
	pthread_mutex_lock(&L->lock);
	for (size_t i = 0; i < LK_BUCKETS; i++)
		for (struct fs_lkfile *f = L->b[i]; f; f = f->next)
			if (f->deleg == DG_HELD)
				f->recall_due = 1, L->recall_due = 1;
	pthread_cond_broadcast(&L->cond);
	struct timespec until;

	clock_deadline(CLOCK_REALTIME, LK_STOP_RETURN_MS, &until);
	while ((L->recall_due || L->delegs) && !L->reclaim_due)
		if (pthread_cond_timedwait(&L->cond, &L->lock, &until) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&L->lock);
	notify_set_lock_hooks(fs->ntf, NULL, NULL, NULL, NULL);
	pthread_mutex_lock(&L->lock);
	L->stopping = 1;
	pthread_cond_broadcast(&L->cond);
	pthread_mutex_unlock(&L->lock);
	if (L->started)
		pthread_join(L->reclaimer, NULL);
	for (size_t i = 0; i < LK_BUCKETS; i++)
		for (struct fs_lkfile *f = L->b[i], *n; f; f = n) {
			n = f->next;
			lkset_clear(&f->set);
			free(f);
		}
	pthread_cond_destroy(&L->cond);
	pthread_mutex_destroy(&L->lock);
	fs->locks = NULL;
	free(L);
}

void fs_lock_print_stats(void *arg, FILE *out)
{
	struct fs *fs = arg;
	struct fs_locks *L = fs->locks;

	if (!L) {
		fprintf(out, "lk.global 0\n");
		return;
	}
	pthread_mutex_lock(&L->lock);
	fprintf(out, "lk.global 1\nlk.held %" PRIu64 "\nlk.waiting %" PRIu64
		"\nlk.lost %" PRIu64 "\nlk.reclaimed %" PRIu64 "\nlk.calls %"
		PRIu64 "\nlk.wakes %" PRIu64 "\nlk.pings %" PRIu64
		"\nlk.reclaiming %d\nlk.delegated %" PRIu64 "\nlk.deleg_granted %"
		PRIu64 "\nlk.deleg_returned %" PRIu64 "\nlk.local %" PRIu64
		"\n", L->held, L->waiting, L->lost,
		L->reclaimed, __atomic_load_n(&L->calls, __ATOMIC_RELAXED),
		L->wakes, L->pings, L->reclaiming, L->delegs, L->deleg_granted,
		L->deleg_returned, L->local);
	pthread_mutex_unlock(&L->lock);
}

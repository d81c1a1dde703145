/*
 * notify.c - callback-break notifier (see notify.h for the contract).
 *
 * Threads and locks (the order between them: docs/LOCKING.md):
 *   seq_lock (rwlock, writer-preferring) orders breaks against replies:
 *     the rpc reader takes it for writing to advance `seq`, update the inode
 *     table and queue work; FUSE handlers hold it for reading while they
 *     reply to the kernel.
 *   q_lock guards the work queue, our own changes in progress and the
 *     dentry worker's hand-off; every thread holds it only for a moment.
 *   The notifier thread runs the queue. It calls into the kernel with no
 *   lock held, and sends acknowledgements holding only the rpc's send
 *   lock. Dentry invalidations it hands to the dentry worker thread.
 *
 * Why dentry workers. fuse_lowlevel_notify_inval_entry takes the parent
 * directory's i_rwsem, which a FUSE request of this very mount holds while
 * it waits for the server (a create in that directory), and the server
 * may hold that request's reply until we acknowledge (another client's
 * create in the same directory waits for us the same way). We declared
 * HELLO_CB_NOLOCK: our acknowledgements never wait for such a lock. So a
 * dentry whose directory one of our own changes in progress may hold
 * (rpc call hook: own_begin/own_end) is not invalidated by name: the
 * kernel's dentry epoch is advanced instead (FUSE_NOTIFY_INC_EPOCH, Linux
 * 6.16), which makes every dentry of the mount revalidate before its next
 * use and takes no lock. Any other dentry goes to a worker thread, and
 * the notifier waits for it, unless one of our changes of that directory
 * starts meanwhile (the kernel took the lock before we could see the
 * request): then the worker is abandoned to the kernel, the epoch
 * advanced, and the queue goes on.
 *
 * Why the epoch covers only such a dentry: a dentry that a LOOKUP or
 * CREATE in progress will link takes the epoch of the request's start,
 * but one that a READDIRPLUS reply links takes it when linked, which can
 * be after we advanced it. No reply is being linked in a directory that
 * our own change holds (the change holds its i_rwsem exclusively; a
 * reply is linked under it, shared), so there the epoch is enough.
 *
 * Barrier: the kernel links a reply's inodes in the requesting task,
 * after our fuse_reply_* returned (and so after our reply section). An
 * inode invalidation in between finds no inode (ENOENT) and is lost,
 * and the kernel then caches the attributes we had just given it. That
 * task holds the directory's i_rwsem (shared) while it links, so when an
 * inode we handed to the kernel is not found, the notifier waits for
 * that lock (an entry invalidation of a name no dentry has) and tries
 * again.
 *
 * Invariants: `seq` changes only under seq_lock held for writing, and work
 * is queued only there too (so a break's invalidations are queued after
 * every reply section that began before it has ended); a thread holds
 * seq_lock at most once (reply sections do not nest: with a writer waiting,
 * a second read lock would wait for the writer, which waits for the
 * first); the queue is empty exactly when qlen is 0; only the notifier
 * threads call into the kernel; a worker has an item exactly in states
 * DW_WORK and DW_ABANDONED.
 *
 * glibc records the thread that holds an rwlock for writing, but not which
 * threads hold it for reading; seq_held below records how the calling
 * thread holds seq_lock, which the debug checks (lib/debug.h) need to tell
 * "this thread is in a reply section". It is kept in every build (one
 * thread-local store).
 *
 * Queue order is what makes an acknowledgement true: a push's items are
 * queued together, followed by its NK_ACK item, and the notifier thread
 * runs them in order, so the ack leaves only after every invalidation of
 * that push (and of every earlier one) returned or was replaced by an
 * epoch advance.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "dircache.h"
#include "inode.h"
#include "notify.h"
#include "rpc.h"
#include "../lib/clock.h"
#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"

/* The kernel's FUSE notification that advances the dentry epoch (Linux
 * 6.16, protocol 7.44; libfuse 3.14 predates it): a bare out header. */
#define NOTIFY_INC_EPOCH 8

/* Directories one of our changes in progress may hold locked. */
#define OWN_MAX 4
/* Threads that make the calls that take a directory's i_rwsem. */
#define DW_MAX 4
/* A name no dentry has: invalidating it only waits for the directory's
 * i_rwsem (see barrier()). */
#define BARRIER_NAME "/"

enum nkind {
	NK_INODE,   /* attributes and data of ino */
	NK_ENTRY,   /* dentry (parent, name), then the parent's attributes */
	NK_DENTRY,  /* dentry (parent, name) only (reconnect: parents are
		     * invalidated as inodes of their own) */
	NK_ACK,     /* acknowledge CB_BREAK `ack_id`: everything before it ran */
};

/* A dentry that only carries a stale ctime (a file's own name after a
 * CB_ATTRS_ONLY break, writeback cache): skipped rather than advancing the
 * dentry epoch when one of our requests holds its directory. */
#define NI_BEST_EFFORT 0x80u
/* A directory's name that may well still name the same directory:
 * expired, not dropped (expire_entry). Files' names are dropped: the
 * kernel must let go of a file's inode to take its new size and times
 * (writeback cache) and to forget an unlinked one (orphans). */
#define NI_EXPIRE 0x40u

struct nitem {
	struct nitem *next;
	enum nkind kind;
	uint64_t ino;     /* NK_INODE */
	uint64_t parent;  /* NK_ENTRY, NK_DENTRY */
	uint32_t ack_id;  /* NK_ACK */
	uint64_t rx_ns;   /* NK_ACK: when the push arrived (monotonic) */
	uint8_t flags;    /* NK_INODE from a CB_BREAK: the record's flags;
			   * NK_DENTRY: NI_BEST_EFFORT */
	uint16_t len;
	char name[];      /* len bytes + NUL */
};

/* One of our changes in progress (rpc call hook). q_lock. */
struct own {
	struct own *next, **pprev;
	uint64_t id;                /* never reused (n->own_ids) */
	int any;                    /* may hold any directory's i_rwsem */
	int n;
	uint64_t ino[OWN_MAX];      /* directories it may hold */
};

/* A dentry worker's state. */
enum dw_state {
	DW_IDLE,      /* waiting for an item */
	DW_WORK,      /* calling the kernel for item; the notifier waits */
	DW_DONE,      /* finished; the notifier takes note */
	DW_ABANDONED, /* calling the kernel for item; nobody waits */
};

/* A thread for the kernel calls that take a directory's i_rwsem. */
struct dworker {
	struct notify *n;
	pthread_t thread;
	enum dw_state state;        /* q_lock */
	struct nitem *item;         /* set in DW_WORK and DW_ABANDONED */
	int rescue;                 /* one of our changes that may hold
				     * item's directory began: stop waiting */
};

/* What the break that made seq was about (notify_reply_begin_except):
 * the objects of its records, or any (wild: a record naming an entry,
 * more than NLOG_VN objects, everything). */
#define NOTIFY_LOG 64
#define NLOG_VN 2
struct nlog {
	uint64_t seq;
	uint64_t vn[NLOG_VN];
	int nv;                     /* -1: wild */
};

struct notify {
	pthread_rwlock_t seq_lock;
	uint64_t seq;               /* written under seq_lock (write), atomic */
	struct nlog log[NOTIFY_LOG]; /* by seq % NOTIFY_LOG; seq_lock */
	struct itab *itab;          /* set once by notify_start */
	struct dcache *dc;          /* set once by notify_set_dircache */
	/* set once by notify_set_orphan_hook */
	void (*orphan_fn)(void *arg, const struct cairn_fid *fid);
	void *orphan_arg;
	/* set once by notify_set_wback_hooks */
	void (*recall_fn)(void *arg, const struct cairn_fid *fid);
	void (*reconnected_fn)(void *arg);
	size_t (*held_fn)(void *arg, struct cairn_fid **out);
	void *wb_arg;
	/* set once by notify_set_lock_hooks */
	void (*lkwake_fn)(void *arg, const struct cairn_fid *fid);
	void (*lkrecall_fn)(void *arg, const struct cairn_fid *fid);
	void (*lkreconnected_fn)(void *arg);
	void *lk_arg;
	struct fuse_session *se;    /* set once by notify_start */
	struct rpc *rpc;            /* set once by notify_start */

	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct nitem *head, *tail;  /* guarded by q_lock */
	size_t qlen;                /* guarded by q_lock */
	int stopping;               /* guarded by q_lock */
	int started;
	pthread_t thread;

	int epoch_ok;               /* set once by notify_start */
	/* CAIRN_TEST_INVAL_PAUSE_US, for tests only: a pause before each
	 * queued inode invalidation reaches the kernel, standing for a
	 * notifier busy with others (test_hung). */
	unsigned test_inval_pause_us;
	struct own *own;            /* our changes in progress; q_lock */
	int own_unknown;            /* ... not recorded (no memory); q_lock */
	uint64_t own_ids;           /* q_lock */
	uint64_t adv_dir, adv_own;  /* notifier thread only: the epoch was
				     * advanced while change adv_own held
				     * directory adv_dir */
	pthread_cond_t dw_cond;     /* a worker's state changed (q_lock) */
	struct dworker dw[DW_MAX];  /* states: q_lock */
	int ndw;                    /* workers started */

	/* atomics; logged by notify_stop, read by notify_get_stats
	 * (queued is not kept here: qlen under q_lock is) */
	struct notify_stats st;
};

struct nlist {
	struct nitem *head, *tail;
	size_t n;
};

/* How the calling thread holds seq_lock (it is taken and released only
 * through the two calls below), and whether it is the notifier thread. */
enum { SEQ_NONE, SEQ_READ, SEQ_WRITE };
static __thread int seq_held;
static __thread int on_notifier;

static void seq_take(struct notify *n, int mode)
{
	CAIRN_ASSERT(seq_held == SEQ_NONE);
	if (mode == SEQ_READ)
		pthread_rwlock_rdlock(&n->seq_lock);
	else
		pthread_rwlock_wrlock(&n->seq_lock);
	seq_held = mode;
}

static void seq_release(struct notify *n)
{
	CAIRN_ASSERT(seq_held != SEQ_NONE);
	if (seq_held == SEQ_WRITE)
		RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	else
		RWLOCK_ASSERT_HELD(&n->seq_lock);
	seq_held = SEQ_NONE;
	pthread_rwlock_unlock(&n->seq_lock);
}

static struct nitem *nitem_new(enum nkind kind, uint64_t ino, uint64_t parent,
			       const char *name, size_t len)
{
	struct nitem *it = malloc(sizeof(*it) + len + 1);

	if (!it)
		return NULL;
	it->next = NULL;
	it->kind = kind;
	it->ino = ino;
	it->parent = parent;
	it->ack_id = 0;
	it->rx_ns = 0;
	it->flags = 0;
	it->len = (uint16_t)len;
	if (len)
		memcpy(it->name, name, len);
	it->name[len] = '\0';
	return it;
}

static void nlist_add(struct nlist *l, struct nitem *it)
{
	if (l->tail)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	l->n++;
}

static void nlist_free(struct nlist *l)
{
	while (l->head) {
		struct nitem *next = l->head->next;

		free(l->head);
		l->head = next;
	}
	l->tail = NULL;
	l->n = 0;
}

/* Hand a list to the notifier thread (takes ownership). */
static void enqueue(struct notify *n, struct nlist *l)
{
	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	if (!l->head)
		return;
	pthread_mutex_lock(&n->q_lock);
	CAIRN_ASSERT((n->head == NULL) == (n->qlen == 0));
	if (n->tail)
		n->tail->next = l->head;
	else
		n->head = l->head;
	n->tail = l->tail;
	n->qlen += l->n;
	pthread_cond_signal(&n->q_cond);
	pthread_mutex_unlock(&n->q_lock);
	l->head = l->tail = NULL;
	l->n = 0;
}

int notify_create(struct notify **out)
{
	struct notify *n = calloc(1, sizeof(*n));
	pthread_rwlockattr_t ra;

	if (!n)
		return -ENOMEM;
	/* A steady stream of replies must not starve the break that
	 * invalidates them. */
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&n->seq_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&n->q_lock, NULL);
	pthread_cond_init(&n->q_cond, NULL);
	pthread_cond_init(&n->dw_cond, NULL);
	if (getenv("CAIRN_TEST_INVAL_PAUSE_US"))
		n->test_inval_pause_us =
			(unsigned)atoi(getenv("CAIRN_TEST_INVAL_PAUSE_US"));
	*out = n;
	return 0;
}

/* Ignore ENOENT: the kernel has already forgotten that inode or dentry.
 * name NULL: inode ino; else entry name of directory ino. */
static void count_result(struct notify *n, int rc, uint64_t ino,
			 const char *name)
{
	__atomic_add_fetch(&n->st.invals_sent, 1, __ATOMIC_RELAXED);
	if (rc == 0 || rc == -ENOENT)
		return;
	__atomic_add_fetch(&n->st.invals_failed, 1, __ATOMIC_RELAXED);
	log_debug("invalidate %s %llu/%s: %s", name ? "entry" : "inode",
		  (unsigned long long)ino, name ? name : "", strerror(-rc));
}

/* An acknowledgement left: how long the push waited for it. */
static void count_ack(struct notify *n, const struct nitem *it)
{
	uint64_t us = (clock_mono_ns() - it->rx_ns) / 1000u;
	uint64_t max = __atomic_load_n(&n->st.ack_us_max, __ATOMIC_RELAXED);

	__atomic_add_fetch(&n->st.acks, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n->st.ack_us_total, us, __ATOMIC_RELAXED);
	while (us > max &&
	       !__atomic_compare_exchange_n(&n->st.ack_us_max, &max, us, 0,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* --- the dentry epoch ------------------------------------------------------ */

/* Ask the kernel to advance its dentry epoch: 0 or a negative errno. */
static int epoch_write(struct notify *n)
{
	struct fuse_out_header oh = { .len = sizeof(oh),
				      .error = NOTIFY_INC_EPOCH };
	ssize_t w = write(fuse_session_fd(n->se), &oh, sizeof(oh));

	if (w == (ssize_t)sizeof(oh))
		return 0;
	return w < 0 ? -errno : -EIO;
}

/*
 * Advance the kernel's dentry epoch: every dentry of the mount is then
 * revalidated (a LOOKUP) before its next use. Takes no kernel lock.
 * Returns 0 or a negative errno (the kernel cannot).
 */
static int epoch_advance(struct notify *n)
{
	int rc = epoch_write(n);

	if (rc < 0) {
		log_error("cannot advance the kernel's dentry epoch: %s",
			  strerror(-rc));
		return rc;
	}
	__atomic_add_fetch(&n->st.epochs, 1, __ATOMIC_RELAXED);
	return 0;
}

uint32_t notify_hello_flags(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	/* A prediction, checked by notify_start's probe. */
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return 0;
	return major > 6 || (major == 6 && minor >= 16) ? HELLO_CB_NOLOCK : 0;
}

/* --- our own changes in progress --------------------------------------------- */

static void own_add(struct own *o, uint64_t ino)
{
	if (o->n < OWN_MAX)
		o->ino[o->n++] = ino;
	else
		o->any = 1;
}

/* The directory of entry (dir, name), as far as the inode table knows. */
static void own_add_entry(struct notify *n, struct own *o,
			  const struct cairn_fid *dir,
			  const struct msg_str *name)
{
	int64_t ino = n->itab ? itab_entry(n->itab, dir->vnode, name->p,
					   name->len)
			      : -ENOENT;
	if (ino > 0)
		own_add(o, (uint64_t)ino);
}

/*
 * The directories whose i_rwsem the kernel may hold for change `op` (the
 * FUSE request that made it is in progress): the directory of a name it
 * changes, the object it changes (a directory's own lock, for SETATTR and
 * xattrs), and a directory it removes or replaces.
 */
static void own_fill(struct notify *n, struct own *o, uint16_t op,
		     const struct wbuf *req)
{
	union msg_any m;

	if (!req || msg_decode(op, 0, req->data, req->len, &m, NULL)) {
		o->any = 1; /* cannot tell */
		return;
	}
	switch (op) {
	case OP_CREATE:
		own_add(o, m.create_req.dir.vnode);
		break;
	case OP_SYMLINK:
		own_add(o, m.symlink_req.dir.vnode);
		break;
	case OP_LINK:
		own_add(o, m.link_req.dir.vnode);
		break;
	case OP_REMOVE:
		own_add(o, m.remove_req.dir.vnode);
		if (m.remove_req.flags & RM_DIR)
			own_add_entry(n, o, &m.remove_req.dir,
				      &m.remove_req.name);
		break;
	case OP_REMOVES:
	case OP_REMOVESAT: {
		struct msg_rment e;
		struct rbuf it;

		own_add(o, m.removes_req.dir.vnode);
		rbuf_init(&it, m.removes_req.list.p, m.removes_req.list.len);
		while (op == OP_REMOVES ? msg_rment_next(&it, &e)
					: msg_rment_at_next(&it, &e))
			if (e.flags & RM_DIR)
				own_add_entry(n, o, &m.removes_req.dir, &e.name);
		break;
	}
	case OP_RENAME:
		own_add(o, m.rename_req.sdir.vnode);
		own_add(o, m.rename_req.ddir.vnode);
		own_add_entry(n, o, &m.rename_req.sdir, &m.rename_req.sname);
		own_add_entry(n, o, &m.rename_req.ddir, &m.rename_req.dname);
		break;
	case OP_SETATTR:
		own_add(o, m.setattr_req.fid.vnode);
		break;
	case OP_SETXATTR:
		own_add(o, m.setxattr_req.fid.vnode);
		break;
	case OP_REMOVEXATTR:
		own_add(o, m.removexattr_req.fid.vnode);
		break;
	default:
		break; /* file data, or no kernel lock at all */
	}
}

/* Which of our changes in progress may hold directory ino's i_rwsem:
 * its id, OWN_UNKNOWN when one may that we could not record, or 0. */
#define OWN_UNKNOWN UINT64_MAX
static uint64_t own_holds(const struct notify *n, uint64_t ino)
{
	LOCK_ASSERT_HELD(&n->q_lock);
	if (n->own_unknown)
		return OWN_UNKNOWN;
	for (const struct own *o = n->own; o; o = o->next) {
		if (o->any)
			return o->id;
		for (int i = 0; i < o->n; i++)
			if (o->ino[i] == ino)
				return o->id;
	}
	return 0;
}

/* rpc call hook: a change begins (on the calling FUSE handler thread). */
static void *own_begin(void *arg, uint16_t op, const struct wbuf *req)
{
	static struct own unknown; /* the cookie when out of memory */
	struct notify *n = arg;
	struct own *o = calloc(1, sizeof(*o));

	if (o)
		own_fill(n, o, op, req); /* takes itab.lock: before q_lock */
	pthread_mutex_lock(&n->q_lock);
	if (o) {
		o->id = ++n->own_ids;
		o->next = n->own;
		if (n->own)
			n->own->pprev = &o->next;
		o->pprev = &n->own;
		n->own = o;
	} else {
		n->own_unknown++;
	}
	/* A worker may be waiting for the lock this change's request holds:
	 * the notifier must not wait for it any more. */
	for (int i = 0; i < n->ndw; i++) {
		struct dworker *w = &n->dw[i];

		if (w->state == DW_WORK && own_holds(n, w->item->parent)) {
			w->rescue = 1;
			pthread_cond_broadcast(&n->dw_cond);
		}
	}
	pthread_mutex_unlock(&n->q_lock);
	return o ? (void *)o : (void *)&unknown;
}

/* rpc call hook: the change's call returned. */
static void own_end(void *arg, void *cookie)
{
	struct notify *n = arg;
	struct own *o = cookie;

	pthread_mutex_lock(&n->q_lock);
	if (o->pprev) {
		*o->pprev = o->next;
		if (o->next)
			o->next->pprev = o->pprev;
	} else {
		n->own_unknown--;
		o = NULL;
	}
	pthread_mutex_unlock(&n->q_lock);
	free(o);
}

/* --- running the queue ------------------------------------------------------- */

/*
 * Expire a dentry instead of dropping it: its next use revalidates it (a
 * LOOKUP), and it stays if the name still names the same node id. A
 * dropped (unhashed) directory dentry breaks every process whose working
 * directory it is (getcwd() fails with ENOENT until something looks the
 * name up again) and detaches what is mounted on it; so the names under
 * a directory another client changed, which are mostly unchanged, are
 * only expired. FUSE_NOTIFY_INVAL_ENTRY with FUSE_EXPIRE_ONLY (Linux
 * 6.2, protocol 7.38; libfuse 3.14 cannot send the flag, and its headers
 * still call the field padding). Only where the kernel advances dentry
 * epochs (6.16), which implies it.
 */
#define NOTIFY_INVAL_ENTRY 3
#define NOTIFY_EXPIRE_ONLY 1u

struct inval_entry_out {
	uint64_t parent;
	uint32_t namelen;
	uint32_t flags;
};

static int expire_entry(struct notify *n, const struct nitem *it)
{
	struct inval_entry_out e = { .parent = it->parent,
				     .namelen = it->len,
				     .flags = NOTIFY_EXPIRE_ONLY };
	struct fuse_out_header oh = {
		.len = (uint32_t)(sizeof(oh) + sizeof(e) + it->len + 1u),
		.error = NOTIFY_INVAL_ENTRY,
	};
	struct iovec iov[3] = {
		{ &oh, sizeof(oh) }, { &e, sizeof(e) },
		{ (void *)it->name, (size_t)it->len + 1u },
	};
	ssize_t w = writev(fuse_session_fd(n->se), iov, 3);

	if (w == (ssize_t)oh.len)
		return 0;
	return w < 0 ? -errno : -EIO;
}

static void inval_entry(struct notify *n, const struct nitem *it)
{
	int rc = it->kind == NK_DENTRY && (it->flags & NI_EXPIRE) &&
		 n->epoch_ok
		 ? expire_entry(n, it)
		 : fuse_lowlevel_notify_inval_entry(n->se, it->parent,
						    it->name, it->len);
	count_result(n, rc, it->parent, it->name);
}

static int inval_inode(struct notify *n, uint64_t ino)
{
	int rc = fuse_lowlevel_notify_inval_inode(n->se, ino, 0, 0);

	count_result(n, rc, ino, NULL);
	return rc;
}

/* A dentry worker: one kernel call at a time, for the notifier. */
static void *dentry_main(void *arg)
{
	struct dworker *w = arg;
	struct notify *n = w->n;

	on_notifier = 1;
	pthread_mutex_lock(&n->q_lock);
	for (;;) {
		/* The item, not the state, says there is work: the notifier
		 * may abandon an item (DW_ABANDONED) before we woke. */
		while (!w->item && !n->stopping)
			pthread_cond_wait(&n->dw_cond, &n->q_lock);
		if (!w->item)
			break; /* stopping */
		struct nitem *it = w->item;
		int stopping = n->stopping;
		pthread_mutex_unlock(&n->q_lock);

		/* An item not yet begun when we stop is dropped: the
		 * session is going and nothing waits for it. */
		if (!stopping)
			inval_entry(n, it);

		pthread_mutex_lock(&n->q_lock);
		free(it);
		w->item = NULL;
		w->state = w->state == DW_ABANDONED ? DW_IDLE : DW_DONE;
		pthread_cond_broadcast(&n->dw_cond);
	}
	pthread_mutex_unlock(&n->q_lock);
	return NULL;
}

/* How locked_call ended. */
enum lk {
	LK_DONE, /* the call returned */
	LK_OWN,  /* one of our changes holds (or may hold) the directory */
	LK_BUSY, /* every worker waits for such a change */
};

/*
 * Invalidate entry (it->parent, it->name), which takes directory
 * it->parent's i_rwsem, on a worker, and wait for it, unless one of our
 * own changes in progress may hold that lock, now or before the call
 * returns: then do not wait (the call goes on without us, or is not
 * made), and *holder gets that change's id if known (else 0). Takes it.
 */
static enum lk locked_call(struct notify *n, struct nitem *it,
			   uint64_t *holder)
{
	struct dworker *w = NULL;

	*holder = 0;
	pthread_mutex_lock(&n->q_lock);
	if ((*holder = own_holds(n, it->parent))) {
		pthread_mutex_unlock(&n->q_lock);
		free(it);
		return LK_OWN;
	}
	for (int i = 0; i < n->ndw && !w; i++)
		if (n->dw[i].state == DW_IDLE)
			w = &n->dw[i];
	if (!w) {
		pthread_mutex_unlock(&n->q_lock);
		free(it);
		return LK_BUSY;
	}
	w->item = it;
	w->state = DW_WORK;
	w->rescue = 0;
	pthread_cond_broadcast(&n->dw_cond);
	while (w->state == DW_WORK && !w->rescue && !n->stopping)
		pthread_cond_wait(&n->dw_cond, &n->q_lock);
	if (w->state == DW_DONE) {
		w->state = DW_IDLE;
		pthread_mutex_unlock(&n->q_lock);
		return LK_DONE;
	}
	w->state = DW_ABANDONED;
	pthread_mutex_unlock(&n->q_lock);
	__atomic_add_fetch(&n->st.rescues, 1, __ATOMIC_RELAXED);
	return LK_OWN;
}

/*
 * Invalidate the dentry of item it (NK_ENTRY or NK_DENTRY) without ever
 * waiting for a lock one of our changes in progress holds (see the head
 * of the file). Takes it.
 */
static void run_dentry(struct notify *n, struct nitem *it)
{
	uint64_t dir = it->parent, holder;
	int best_effort = it->kind == NK_DENTRY &&
			  (it->flags & NI_BEST_EFFORT);
	enum lk r;

	if (!n->epoch_ok) {
		/* Nothing else the kernel offers: wait for the lock (we did
		 * not say HELLO_CB_NOLOCK, so the server knows). */
		inval_entry(n, it);
		free(it);
		return;
	}
	r = locked_call(n, it, &holder);
	if (r == LK_DONE || best_effort)
		return;
	/* One advance covers every dentry of dir while the same change of
	 * ours holds it: nothing can link one there meanwhile. */
	if (r == LK_OWN && holder && holder != OWN_UNKNOWN &&
	    holder == n->adv_own && dir == n->adv_dir)
		return;
	if (epoch_advance(n) < 0) {
		log_error("a cached directory entry may outlive a callback "
			  "break: the kernel holds its directory for one of "
			  "our requests");
		return;
	}
	n->adv_own = r == LK_OWN ? holder : 0;
	n->adv_dir = dir;
}

/*
 * Wait until no task is linking a reply into directory dir (it holds
 * dir's i_rwsem shared while it does; our own change holding it
 * exclusively means none is), by invalidating a name no dentry has.
 */
static void barrier(struct notify *n, uint64_t dir)
{
	struct nitem *it = nitem_new(NK_DENTRY, 0, dir, BARRIER_NAME,
				     strlen(BARRIER_NAME));
	uint64_t holder;

	if (it)
		locked_call(n, it, &holder);
	__atomic_add_fetch(&n->st.barriers, 1, __ATOMIC_RELAXED);
}

/* Invalidate inode ino, also when the kernel is still linking it. */
static void run_inode(struct notify *n, uint64_t ino)
{
	uint64_t dir;

	/* Takes the inode's locked pages, which only our own READ
	 * (answered at once) or WRITE (the server knows) holds. */
	if (inval_inode(n, ino) != -ENOENT || !n->itab ||
	    itab_parent(n->itab, ino, &dir) || dir == ino)
		return;
	/* We handed it to the kernel and it has not forgotten it: either
	 * a reply is still being linked, or a FORGET is on its way. */
	barrier(n, dir);
	inval_inode(n, ino);
}

/* Run one item; takes it. */
static void run_item(struct notify *n, struct nitem *it)
{
	uint64_t parent = it->parent;
	int rc;

	/* The kernel calls below may wait for any request of this mount:
	 * never from a handler or the rpc reader, never under a lock. */
	CAIRN_ASSERT(on_notifier);
	CAIRN_ASSERT(seq_held == SEQ_NONE);
	LOCK_ASSERT_NOT_HELD(&n->q_lock);
	switch (it->kind) {
	case NK_INODE:
		if (n->test_inval_pause_us)
			usleep(n->test_inval_pause_us);
		run_inode(n, it->ino);
		free(it);
		break;
	case NK_ENTRY:
		run_dentry(n, it);
		/* The directory's attributes and any cached listing: takes
		 * no lock a request holds while it waits. */
		inval_inode(n, parent);
		break;
	case NK_DENTRY:
		run_dentry(n, it);
		break;
	case NK_ACK:
		rc = n->rpc ? rpc_send_ack(n->rpc, OP_CB_BREAK, it->ack_id)
			    : -ENOTCONN;
		if (rc == 0)
			count_ack(n, it);
		else
			log_debug("callback break %u not acknowledged: %s",
				  it->ack_id, strerror(-rc));
		free(it);
		break;
	}
}

static void *notify_main(void *arg)
{
	struct notify *n = arg;

	on_notifier = 1;
	for (;;) {
		struct nitem *it;

		pthread_mutex_lock(&n->q_lock);
		while (!n->head && !n->stopping)
			pthread_cond_wait(&n->q_cond, &n->q_lock);
		if (n->stopping) {
			pthread_mutex_unlock(&n->q_lock);
			break;
		}
		it = n->head;
		n->head = it->next;
		if (!n->head)
			n->tail = NULL;
		n->qlen--;
		CAIRN_ASSERT((n->head == NULL) == (n->qlen == 0));
		pthread_mutex_unlock(&n->q_lock);

		run_item(n, it);
	}
	return NULL;
}

/* Stop and join the dentry workers (one stuck in the kernel returns once
 * the session is gone). */
static void workers_stop(struct notify *n)
{
	pthread_mutex_lock(&n->q_lock);
	n->stopping = 1;
	pthread_cond_broadcast(&n->q_cond);
	pthread_cond_broadcast(&n->dw_cond);
	pthread_mutex_unlock(&n->q_lock);
	for (int i = 0; i < n->ndw; i++)
		pthread_join(n->dw[i].thread, NULL);
	n->ndw = 0;
}

int notify_start(struct notify *n, struct fuse_session *se, struct itab *t,
		 struct rpc *rpc)
{
	int rc;

	seq_take(n, SEQ_WRITE);
	n->se = se;
	n->itab = t;
	n->rpc = rpc;
	seq_release(n);
	/* Nothing is cached yet, so probing costs nothing. Our HELLO said
	 * what notify_hello_flags predicted; say what is true. */
	n->epoch_ok = epoch_write(n) == 0;
	if (rpc) {
		rpc_set_call_hook(rpc, own_begin, own_end, n);
		rpc_update_hello_flags(rpc, HELLO_CB_NOLOCK,
				       n->epoch_ok ? HELLO_CB_NOLOCK : 0);
	}
	if (!n->epoch_ok)
		log_warn("the kernel cannot advance the dentry epoch (Linux "
			 "6.16): a callback break may wait for our own "
			 "requests, and the server may not wait for it");
	for (; n->ndw < DW_MAX; n->ndw++) {
		n->dw[n->ndw].n = n;
		rc = pthread_create(&n->dw[n->ndw].thread, NULL, dentry_main,
				    &n->dw[n->ndw]);
		if (rc)
			break;
	}
	if (!rc)
		rc = pthread_create(&n->thread, NULL, notify_main, n);
	if (rc) {
		workers_stop(n);
		return -rc;
	}
	n->started = 1;
	return 0;
}

static uint64_t stat_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void notify_stop(struct notify *n)
{
	if (!n || !n->started)
		return;
	pthread_mutex_lock(&n->q_lock);
	n->stopping = 1;
	pthread_cond_broadcast(&n->q_cond);
	pthread_mutex_unlock(&n->q_lock);
	pthread_join(n->thread, NULL);
	workers_stop(n);
	n->started = 0;
	log_info("callback breaks: %llu records, %llu reconnects, %llu kernel "
		 "invalidations (%llu failed), %llu dentry epoch advances "
		 "(%llu while a dentry waited for our own request), %llu "
		 "waits for a reply being linked, %llu acknowledgements",
		 (unsigned long long)stat_get(&n->st.breaks),
		 (unsigned long long)stat_get(&n->st.reconnects),
		 (unsigned long long)stat_get(&n->st.invals_sent),
		 (unsigned long long)stat_get(&n->st.invals_failed),
		 (unsigned long long)stat_get(&n->st.epochs),
		 (unsigned long long)stat_get(&n->st.rescues),
		 (unsigned long long)stat_get(&n->st.barriers),
		 (unsigned long long)stat_get(&n->st.acks));
}

void notify_destroy(struct notify *n)
{
	struct nlist l;

	if (!n)
		return;
	notify_stop(n);
	l.head = n->head;
	l.tail = n->tail;
	l.n = n->qlen;
	nlist_free(&l);
	while (n->own) {
		struct own *o = n->own;
		n->own = o->next;
		free(o);
	}
	pthread_cond_destroy(&n->dw_cond);
	pthread_cond_destroy(&n->q_cond);
	pthread_mutex_destroy(&n->q_lock);
	pthread_rwlock_destroy(&n->seq_lock);
	free(n);
}

/* A break: seq moves on, and what it was about is logged (l, its
 * records; NULL: anything). */
static void bump_seq_for(struct notify *n, const struct nlist *l)
{
	uint64_t seq = n->seq + 1;
	struct nlog *e = &n->log[seq % NOTIFY_LOG];

	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	e->seq = seq;
	e->nv = l ? 0 : -1;
	for (const struct nitem *it = l ? l->head : NULL; it && e->nv >= 0;
	     it = it->next) {
		if (it->kind != NK_INODE || e->nv == NLOG_VN)
			e->nv = -1;
		else
			e->vn[e->nv++] = it->ino;
	}
	__atomic_store_n(&n->seq, seq, __ATOMIC_RELEASE);
}

static void bump_seq(struct notify *n)
{
	bump_seq_for(n, NULL);
}

/* Reconnect visitor: runs under the table's lock, only allocates. */
static void visit_all(void *arg, uint64_t ino, uint64_t parent,
		      const char *name, size_t len, int isdir)
{
	struct nlist *l = arg;
	struct nitem *it;

	if (name)
		it = nitem_new(NK_DENTRY, ino, parent, name, len);
	else
		it = nitem_new(NK_INODE, ino, 0, NULL, 0);
	if (it && name && isdir)
		it->flags |= NI_EXPIRE;
	if (it)
		nlist_add(l, it);
	else
		log_error("out of memory queueing invalidations");
}

/* The FIDs whose write tokens are held, sorted by fid_order. */
struct heldset {
	struct cairn_fid *v;
	size_t n;
};

static int fid_order(const void *a, const void *b)
{
	const struct cairn_fid *x = a, *y = b;

	if (x->vnode != y->vnode)
		return x->vnode < y->vnode ? -1 : 1;
	if (x->uniq != y->uniq)
		return x->uniq < y->uniq ? -1 : 1;
	return x->vol < y->vol ? -1 : x->vol > y->vol;
}

static int held_fid(void *arg, const struct cairn_fid *fid)
{
	const struct heldset *h = arg;

	return bsearch(fid, h->v, h->n, sizeof(*h->v), fid_order) != NULL;
}

static int held_vnode(void *arg, uint64_t vnode)
{
	const struct heldset *h = arg;
	size_t lo = 0, hi = h->n;

	/* Sorted by vnode first. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->v[mid].vnode < vnode)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < h->n && h->v[lo].vnode == vnode;
}

/* Every promise is gone: invalidate everything the kernel was given,
 * except what the write tokens in `held` cover (NULL: nothing is kept).
 * Called with seq_lock held for writing. */
static void break_everything(struct notify *n, struct nlist *l,
			     struct heldset *held)
{
	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	bump_seq(n);
	if (n->dc)
		dcache_clear_except(n->dc, held ? held_vnode : NULL, held);
	if (n->itab)
		itab_break_all_except(n->itab, held ? held_fid : NULL, held,
				      visit_all, l);
}

void notify_on_reconnect(void *arg, int epoch_changed)
{
	struct notify *n = arg;
	struct nlist l = { 0 };

	__atomic_add_fetch(&n->st.reconnects, 1, __ATOMIC_RELAXED);
	/* The server dropped our write tokens with the old connection. */
	if (n->reconnected_fn)
		n->reconnected_fn(n->wb_arg);
	/* Our lock waits ended with the old connection, and a restarted
	 * server lost our locks: reclaim them, wake the waiters. */
	if (n->lkreconnected_fn)
		n->lkreconnected_fn(n->lk_arg);
	seq_take(n, SEQ_WRITE);
	break_everything(n, &l, NULL);
	log_info("reconnected to server%s: invalidating %zu cached inodes and "
		 "entries", epoch_changed ? " (server restarted)" : "", l.n);
	enqueue(n, &l);
	seq_release(n);
}

void notify_on_lapse(void *arg, const char *why)
{
	struct notify *n = arg;
	struct heldset h = { 0 };
	struct nlist l = { 0 };

	/* Promises go; write tokens and locks are the server's to revoke,
	 * and it tells us when it does (or we learn it at the reconnect).
	 * What a held token covers stays: nobody else changes it until the
	 * token is recalled, and a change of ours the server no longer
	 * takes becomes a conflict copy, never lost (docs/ARCHITECTURE.md). */
	seq_take(n, SEQ_WRITE);
	if (n->held_fn && (h.n = n->held_fn(n->wb_arg, &h.v)))
		qsort(h.v, h.n, sizeof(*h.v), fid_order);
	break_everything(n, &l, &h);
	log_info("promises dropped (%s): invalidating %zu cached inodes and "
		 "entries; %zu objects held for write-back keep theirs", why,
		 l.n, h.n);
	enqueue(n, &l);
	seq_release(n);
	free(h.v);
}

/*
 * Decode a CB_BREAK payload (lib/msg.h) into a list of work items. A name
 * longer than any name can be is as broken as a short payload: the
 * protocol never sends one. Returns 0, -EPROTO or -ENOMEM (list freed).
 */
static int parse_break(const uint8_t *p, size_t len, struct nlist *l,
		       struct cairn_fid **orph, size_t *norph)
{
	struct msg_cb_break m;
	struct msg_cbrec rec;
	struct rbuf it;

	*orph = NULL;
	*norph = 0;
	if (msg_decode(OP_CB_BREAK, 0, p, len, &m, NULL))
		return -EPROTO;
	rbuf_init(&it, m.recs.p, m.recs.len);
	while (msg_cbrec_next(&it, &rec)) {
		struct nitem *item;

		if (rec.name.len > CAIRN_NAME_MAX) {
			nlist_free(l);
			free(*orph);
			*orph = NULL;
			*norph = 0;
			return -EPROTO;
		}
		/* The flag is about the object (an empty name) only. */
		if ((rec.flags & CB_ORPHANED) && !rec.name.len) {
			/* At most one per record: m.count bounds them. */
			if (!*orph && !(*orph = malloc(m.count *
						       sizeof(**orph)))) {
				nlist_free(l);
				return -ENOMEM;
			}
			(*orph)[(*norph)++] = rec.fid;
		}
		if (rec.name.len)
			item = nitem_new(NK_ENTRY, 0, rec.fid.vnode,
					 rec.name.p, rec.name.len);
		else
			item = nitem_new(NK_INODE, rec.fid.vnode, 0, NULL, 0);
		if (!item) {
			nlist_free(l);
			return -ENOMEM;
		}
		item->flags = rec.flags;
		nlist_add(l, item);
	}
	return 0;
}

/* Visitor for a broken directory's entries: each becomes a dentry
 * invalidation, except the entry the break itself names. */
struct kid_visit {
	struct nlist *out;
	const struct nitem *skip;
	uint64_t vn;      /* the broken object */
	int attrs_only;   /* its record had CB_ATTRS_ONLY */
	const uint64_t *objs; /* the objects the push breaks (their own */
	size_t nobjs;         /* records), or NULL: unknown */
};

/* Does the push v break object vn itself? Unknown: yes. */
static int push_breaks(const struct kid_visit *v, uint64_t vn)
{
	if (!v->objs)
		return 1;
	for (size_t i = 0; i < v->nobjs; i++)
		if (v->objs[i] == vn)
			return 1;
	return 0;
}

static void visit_kid(void *arg, uint64_t ino, uint64_t parent,
		      const char *name, size_t len, int isdir)
{
	struct kid_visit *v = arg;
	struct nitem *it;

	if (v->skip && v->skip->kind == NK_ENTRY && v->skip->parent == parent &&
	    v->skip->len == len && !memcmp(v->skip->name, name, len))
		return;
	/* Another incarnation of the broken object (client/inode.h). */
	it = name ? nitem_new(NK_DENTRY, ino, parent, name, len)
		  : nitem_new(NK_INODE, ino, 0, NULL, 0);
	if (it && name && v->attrs_only && ino &&
	    (ino & ITAB_VNODE_MASK) == v->vn)
		it->flags = NI_BEST_EFFORT;
	/* A directory's name in a broken directory (drop_kids), unless
	 * this push breaks that directory itself. */
	if (it && name && isdir && (ino & ITAB_VNODE_MASK) != v->vn &&
	    !push_breaks(v, ino & ITAB_VNODE_MASK))
		it->flags |= NI_EXPIRE;
	if (it)
		nlist_add(v->out, it);
	else
		log_error("out of memory queueing invalidations");
}

/* Apply the break to the table and keep only what the kernel may cache
 * (unknown inodes were never handed to it). Called with seq_lock held for
 * writing. */
static void apply_breaks(struct notify *n, struct nlist *in, struct nlist *out)
{
	struct nitem *it, *next;
	uint64_t *objs = in->n ? malloc(in->n * sizeof(*objs)) : NULL;
	size_t nobjs = 0;

	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	for (it = in->head; it && objs; it = it->next)
		if (it->kind == NK_INODE)
			objs[nobjs++] = it->ino;
	for (it = in->head; it; it = next) {
		uint64_t ino = it->kind == NK_INODE ? it->ino : it->parent;
		int attrs_only = it->kind == NK_INODE &&
				 (it->flags & CB_ATTRS_ONLY);
		struct kid_visit v = { out, it, ino, attrs_only, objs, nobjs };

		next = it->next;
		it->next = NULL;
		/* Cached listings and statuses the kernel may never have
		 * seen: whether or not the table knows ino. */
		if (n->dc)
			dcache_break(n->dc, ino);
		if (itab_break(n->itab, ino, attrs_only, visit_kid, &v) == 0)
			nlist_add(out, it);
		else
			free(it);
	}
	free(objs);
	in->head = in->tail = NULL;
	in->n = 0;
}

void notify_on_push(void *arg, uint16_t op, uint32_t id,
		    const uint8_t *payload, size_t len)
{
	struct notify *n = arg;
	struct nlist parsed = { 0 }, work = { 0 };
	struct nitem *ack = NULL;
	struct cairn_fid *orph = NULL;
	size_t norph = 0;
	int rc;

	if (op == OP_CB_LOCKWAKE || op == OP_CB_LKRECALL) {
		void (*fn)(void *, const struct cairn_fid *) =
			op == OP_CB_LOCKWAKE ? n->lkwake_fn : n->lkrecall_fn;
		struct msg_orphan_drop_req q;
		struct cairn_fid fid;
		struct rbuf it;

		if (msg_decode(op, 0, payload, len, &q, NULL)) {
			log_warn("malformed %s: ignored (%s)", msg_name(op),
				 op == OP_CB_LOCKWAKE ? "lock waiters ask "
				 "again within seconds" : "the server revokes "
				 "the delegation");
			return;
		}
		rbuf_init(&it, q.list.p, q.list.len);
		while (msg_fid_next(&it, &fid))
			if (fn)
				fn(n->lk_arg, &fid);
		return;
	}
	if (op == OP_CB_RECALL) {
		struct msg_orphan_drop_req q;
		struct cairn_fid fid;
		struct rbuf it;
		const char *why = NULL;

		if (msg_decode(OP_CB_RECALL, 0, payload, len, &q, &why)) {
			log_warn("malformed CB_RECALL (%s): ignored; the server "
				 "revokes the token", why ? why : "?");
			return;
		}
		rbuf_init(&it, q.list.p, q.list.len);
		while (msg_fid_next(&it, &fid))
			if (n->recall_fn)
				n->recall_fn(n->wb_arg, &fid);
		return;
	}
	if (op != OP_CB_BREAK) {
		log_warn("ignoring unknown push op %u", op);
		return;
	}
	if (id) {
		/* Allocated before any lock. Without it the server times
		 * us out and drops us: we lose the connection, not
		 * coherence. */
		ack = nitem_new(NK_ACK, 0, 0, NULL, 0);
		if (ack) {
			ack->ack_id = id;
			ack->rx_ns = clock_mono_ns();
		} else {
			log_error("out of memory: callback break %u will not "
				  "be acknowledged", id);
		}
	}
	rc = parse_break(payload, len, &parsed, &orph, &norph);
	__atomic_add_fetch(&n->st.pushes, 1, __ATOMIC_RELAXED);
	seq_take(n, SEQ_WRITE);
	if (rc < 0) {
		/* We cannot tell what broke, so everything did. */
		log_warn("malformed callback break (%s): invalidating "
			 "everything", strerror(-rc));
		break_everything(n, &work, NULL);
	} else {
		__atomic_add_fetch(&n->st.breaks, parsed.n, __ATOMIC_RELAXED);
		bump_seq_for(n, &parsed);
		if (n->itab)
			apply_breaks(n, &parsed, &work);
		else
			nlist_free(&parsed);
	}
	if (ack)
		nlist_add(&work, ack);
	enqueue(n, &work);
	seq_release(n);
	/* Orphans we now hold: after the break, with no lock held (the
	 * hook takes its own, which come before every other). */
	for (size_t i = 0; i < norph; i++) {
		if (n->orphan_fn)
			n->orphan_fn(n->orphan_arg, &orph[i]);
	}
	free(orph);
}

void notify_stale_others(struct notify *n, uint64_t ino)
{
	struct nlist work = { 0 };
	struct kid_visit v = { &work, NULL, ino & ITAB_VNODE_MASK, 0, NULL, 0 };

	if (!n->itab || !itab_has_others(n->itab, ino))
		return;
	seq_take(n, SEQ_WRITE);
	if (itab_stale_others(n->itab, ino, visit_kid, &v))
		__atomic_add_fetch(&n->st.stale_others, 1, __ATOMIC_RELAXED);
	enqueue(n, &work);
	seq_release(n);
}

int notify_writeback_inode(struct notify *n, uint64_t ino)
{
	int rc;

	if (!n->se)
		return 0;
	rc = fuse_lowlevel_notify_inval_inode(n->se, ino, 0, 0);
	return rc == -ENOENT ? 0 : rc;
}

int notify_store(struct notify *n, uint64_t ino, uint64_t off,
		 const void *data, size_t len)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	int rc;

	if (!n->se)
		return 0;
	bv.buf[0].mem = (void *)data;
	rc = fuse_lowlevel_notify_store(n->se, ino, (off_t)off, &bv, 0);
	return rc == -ENOENT ? 0 : rc;
}

void notify_inval_inode(struct notify *n, uint64_t ino)
{
	struct nlist l = { 0 };
	struct nitem *it = nitem_new(NK_INODE, ino, 0, NULL, 0);

	if (!it) {
		log_error("out of memory queueing an invalidation of inode %llu",
			  (unsigned long long)ino);
		return;
	}
	nlist_add(&l, it);
	/* enqueue() runs under the write lock, as for a break, so the
	 * queue keeps the order of the sequence. */
	seq_take(n, SEQ_WRITE);
	enqueue(n, &l);
	seq_release(n);
}

void notify_set_dircache(struct notify *n, struct dcache *dc)
{
	seq_take(n, SEQ_WRITE);
	n->dc = dc;
	seq_release(n);
}

void notify_set_orphan_hook(struct notify *n,
			    void (*fn)(void *arg, const struct cairn_fid *fid),
			    void *arg)
{
	seq_take(n, SEQ_WRITE);
	n->orphan_fn = fn;
	n->orphan_arg = arg;
	seq_release(n);
}

void notify_set_wback_hooks(struct notify *n,
			    void (*recall)(void *arg,
					   const struct cairn_fid *fid),
			    void (*reconnected)(void *arg),
			    size_t (*held)(void *arg, struct cairn_fid **out),
			    void *arg)
{
	seq_take(n, SEQ_WRITE);
	n->recall_fn = recall;
	n->reconnected_fn = reconnected;
	n->held_fn = held;
	n->wb_arg = arg;
	seq_release(n);
}

void notify_set_lock_hooks(struct notify *n,
			   void (*wake)(void *arg, const struct cairn_fid *fid),
			   void (*recall)(void *arg, const struct cairn_fid *fid),
			   void (*reconnected)(void *arg), void *arg)
{
	seq_take(n, SEQ_WRITE);
	n->lkwake_fn = wake;
	n->lkrecall_fn = recall;
	n->lkreconnected_fn = reconnected;
	n->lk_arg = arg;
	seq_release(n);
}

uint64_t notify_seq(struct notify *n)
{
	return __atomic_load_n(&n->seq, __ATOMIC_ACQUIRE);
}

int notify_reply_begin(struct notify *n, uint64_t seq)
{
	seq_take(n, SEQ_READ);
	return n->seq == seq;
}

int notify_reply_begin_except(struct notify *n, uint64_t seq,
			      const uint64_t *vnodes, int nv)
{
	seq_take(n, SEQ_READ);
	if (n->seq == seq)
		return 2;
	if (n->seq - seq > NOTIFY_LOG)
		return 0;
	for (uint64_t s = seq + 1; s <= n->seq; s++) {
		const struct nlog *e = &n->log[s % NOTIFY_LOG];

		if (e->seq != s || e->nv < 0)
			return 0;
		for (int i = 0; i < e->nv; i++) {
			int j = 0;

			while (j < nv && vnodes[j] != e->vn[i])
				j++;
			if (j == nv)
				return 0;
		}
	}
	return 1;
}

void notify_reply_end(struct notify *n)
{
	CAIRN_ASSERT(seq_held == SEQ_READ);
	seq_release(n);
}

void notify_get_stats(struct notify *n, struct notify_stats *out)
{
	out->pushes = stat_get(&n->st.pushes);
	out->breaks = stat_get(&n->st.breaks);
	out->reconnects = stat_get(&n->st.reconnects);
	out->invals_sent = stat_get(&n->st.invals_sent);
	out->invals_failed = stat_get(&n->st.invals_failed);
	out->acks = stat_get(&n->st.acks);
	out->epochs = stat_get(&n->st.epochs);
	out->rescues = stat_get(&n->st.rescues);
	out->barriers = stat_get(&n->st.barriers);
	out->stale_others = stat_get(&n->st.stale_others);
	out->ack_us_total = stat_get(&n->st.ack_us_total);
	out->ack_us_max = stat_get(&n->st.ack_us_max);
	pthread_mutex_lock(&n->q_lock);
	out->queued = n->qlen;
	pthread_mutex_unlock(&n->q_lock);
}

void notify_assert_not_held(struct notify *n)
{
	CAIRN_ASSERT(seq_held == SEQ_NONE);
	LOCK_ASSERT_NOT_HELD(&n->q_lock);
}

/*
 * notify.c - callback-break notifier (see notify.h for the contract).
 *
 * Threads and locks (the order between them: docs/LOCKING.md):
 *   seq_lock (rwlock, writer-preferring) orders breaks against replies:
 *     the rpc reader takes it for writing to advance `seq`, update the inode
 *     table and queue work; FUSE handlers hold it for reading while they
 *     reply to the kernel.
 *   q_lock guards the work queue; the notifier thread holds it only to pop.
 *   The notifier thread calls into the kernel with no lock held, and sends
 *   acknowledgements holding only the rpc's send lock.
 *
 * Invariants: `seq` changes only under seq_lock held for writing, and work
 * is queued only there too (so a break's invalidations are queued after
 * every reply section that began before it has ended); a thread holds
 * seq_lock at most once (reply sections do not nest: with a writer waiting,
 * a second read lock would wait for the writer, which waits for the
 * first); the queue is empty exactly when qlen is 0; only the notifier
 * thread calls into the kernel.
 *
 * glibc records the thread that holds an rwlock for writing, but not which
 * threads hold it for reading; seq_held below records how the calling
 * thread holds seq_lock, which the debug checks (lib/debug.h) need to tell
 * "this thread is in a reply section". It is kept in every build (one
 * thread-local store).
 *
 * Queue order is what makes an acknowledgement true: a push's items are
 * queued together, followed by its NK_ACK item, and the single notifier
 * thread runs them in order, so the ack leaves only after every
 * invalidation of that push (and of every earlier one) returned.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dircache.h"
#include "inode.h"
#include "notify.h"
#include "rpc.h"
#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"

enum nkind {
	NK_INODE,   /* attributes and data of ino */
	NK_ENTRY,   /* dentry (parent, name), then the parent's attributes */
	NK_DENTRY,  /* dentry (parent, name) only (reconnect: parents are
		     * invalidated as inodes of their own) */
	NK_ACK,     /* acknowledge CB_BREAK `ack_id`: everything before it ran */
};

struct nitem {
	struct nitem *next;
	enum nkind kind;
	uint64_t ino;     /* NK_INODE */
	uint64_t parent;  /* NK_ENTRY, NK_DENTRY */
	uint32_t ack_id;  /* NK_ACK */
	uint64_t rx_ns;   /* NK_ACK: when the push arrived (monotonic) */
	uint16_t len;
	char name[];      /* len bytes + NUL */
};

struct notify {
	pthread_rwlock_t seq_lock;
	uint64_t seq;               /* written under seq_lock (write), atomic */
	struct itab *itab;          /* set once by notify_start */
	struct dcache *dc;          /* set once by notify_set_dircache */
	struct fuse_session *se;    /* set once by notify_start */
	struct rpc *rpc;            /* set once by notify_start */

	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct nitem *head, *tail;  /* guarded by q_lock */
	size_t qlen;                /* guarded by q_lock */
	int stopping;               /* guarded by q_lock */
	int started;
	pthread_t thread;

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
	*out = n;
	return 0;
}

/* Ignore ENOENT: the kernel has already forgotten that inode or dentry. */
static void count_result(struct notify *n, int rc, const struct nitem *it)
{
	__atomic_add_fetch(&n->st.invals_sent, 1, __ATOMIC_RELAXED);
	if (rc == 0 || rc == -ENOENT)
		return;
	__atomic_add_fetch(&n->st.invals_failed, 1, __ATOMIC_RELAXED);
	log_debug("invalidate %s %llu/%s: %s",
		  it->kind == NK_INODE ? "inode" : "entry",
		  (unsigned long long)(it->kind == NK_INODE ? it->ino
							    : it->parent),
		  it->name, strerror(-rc));
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An acknowledgement left: how long the push waited for it. */
static void count_ack(struct notify *n, const struct nitem *it)
{
	uint64_t us = (now_ns() - it->rx_ns) / 1000u;
	uint64_t max = __atomic_load_n(&n->st.ack_us_max, __ATOMIC_RELAXED);

	__atomic_add_fetch(&n->st.acks, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n->st.ack_us_total, us, __ATOMIC_RELAXED);
	while (us > max &&
	       !__atomic_compare_exchange_n(&n->st.ack_us_max, &max, us, 0,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void run_item(struct notify *n, const struct nitem *it)
{
	int rc;

	/* The kernel calls below may wait for any request of this mount:
	 * never from a handler or the rpc reader, never under a lock. */
	CAIRN_ASSERT(on_notifier);
	CAIRN_ASSERT(seq_held == SEQ_NONE);
	LOCK_ASSERT_NOT_HELD(&n->q_lock);
	switch (it->kind) {
	case NK_INODE:
		rc = fuse_lowlevel_notify_inval_inode(n->se, it->ino, 0, 0);
		count_result(n, rc, it);
		break;
	case NK_ENTRY:
	case NK_DENTRY:
		rc = fuse_lowlevel_notify_inval_entry(n->se, it->parent,
						      it->name, it->len);
		count_result(n, rc, it);
		if (it->kind == NK_ENTRY) {
			/* The directory's attributes and any cached
			 * listing. */
			rc = fuse_lowlevel_notify_inval_inode(n->se,
							      it->parent, 0, 0);
			count_result(n, rc, it);
		}
		break;
	case NK_ACK:
		rc = n->rpc ? rpc_send_ack(n->rpc, OP_CB_BREAK, it->ack_id)
			    : -ENOTCONN;
		if (rc == 0)
			count_ack(n, it);
		else
			log_debug("callback break %u not acknowledged: %s",
				  it->ack_id, strerror(-rc));
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
		free(it);
	}
	return NULL;
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
	rc = pthread_create(&n->thread, NULL, notify_main, n);
	if (rc)
		return -rc;
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
	pthread_cond_signal(&n->q_cond);
	pthread_mutex_unlock(&n->q_lock);
	pthread_join(n->thread, NULL);
	n->started = 0;
	log_info("callback breaks: %llu records, %llu reconnects, %llu kernel "
		 "invalidations (%llu failed), %llu acknowledgements",
		 (unsigned long long)stat_get(&n->st.breaks),
		 (unsigned long long)stat_get(&n->st.reconnects),
		 (unsigned long long)stat_get(&n->st.invals_sent),
		 (unsigned long long)stat_get(&n->st.invals_failed),
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
	pthread_cond_destroy(&n->q_cond);
	pthread_mutex_destroy(&n->q_lock);
	pthread_rwlock_destroy(&n->seq_lock);
	free(n);
}

static void bump_seq(struct notify *n)
{
	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	__atomic_store_n(&n->seq, n->seq + 1, __ATOMIC_RELEASE);
}

/* Reconnect visitor: runs under the table's lock, only allocates. */
static void visit_all(void *arg, uint64_t ino, uint64_t parent,
		      const char *name, size_t len)
{
	struct nlist *l = arg;
	struct nitem *it;

	if (name)
		it = nitem_new(NK_DENTRY, 0, parent, name, len);
	else
		it = nitem_new(NK_INODE, ino, 0, NULL, 0);
	if (it)
		nlist_add(l, it);
	else
		log_error("out of memory queueing invalidations");
}

/* Every promise is gone: invalidate everything the kernel was given.
 * Called with seq_lock held for writing. */
static void break_everything(struct notify *n, struct nlist *l)
{
	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	bump_seq(n);
	if (n->dc)
		dcache_clear(n->dc);
	if (n->itab)
		itab_break_all(n->itab, visit_all, l);
}

void notify_on_reconnect(void *arg, int epoch_changed)
{
	struct notify *n = arg;
	struct nlist l = { 0 };

	__atomic_add_fetch(&n->st.reconnects, 1, __ATOMIC_RELAXED);
	seq_take(n, SEQ_WRITE);
	break_everything(n, &l);
	log_info("reconnected to server%s: invalidating %zu cached inodes and "
		 "entries", epoch_changed ? " (server restarted)" : "", l.n);
	enqueue(n, &l);
	seq_release(n);
}

/*
 * Decode a CB_BREAK payload (lib/msg.h) into a list of work items. A name
 * longer than any name can be is as broken as a short payload: the
 * protocol never sends one. Returns 0, -EPROTO or -ENOMEM (list freed).
 */
static int parse_break(const uint8_t *p, size_t len, struct nlist *l)
{
	struct msg_cb_break m;
	struct msg_cbrec rec;
	struct rbuf it;

	if (msg_decode(OP_CB_BREAK, 0, p, len, &m, NULL))
		return -EPROTO;
	rbuf_init(&it, m.recs.p, m.recs.len);
	while (msg_cbrec_next(&it, &rec)) {
		struct nitem *item;

		if (rec.name.len > CAIRN_NAME_MAX) {
			nlist_free(l);
			return -EPROTO;
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
		nlist_add(l, item);
	}
	return 0;
}

/* Visitor for a broken directory's entries: each becomes a dentry
 * invalidation, except the entry the break itself names. */
struct kid_visit {
	struct nlist *out;
	const struct nitem *skip;
};

static void visit_kid(void *arg, uint64_t ino, uint64_t parent,
		      const char *name, size_t len)
{
	struct kid_visit *v = arg;
	struct nitem *it;

	if (v->skip && v->skip->kind == NK_ENTRY && v->skip->parent == parent &&
	    v->skip->len == len && !memcmp(v->skip->name, name, len))
		return;
	it = nitem_new(NK_DENTRY, ino, parent, name, len);
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

	RWLOCK_ASSERT_WRHELD(&n->seq_lock);
	for (it = in->head; it; it = next) {
		struct kid_visit v = { out, it };
		uint64_t ino = it->kind == NK_INODE ? it->ino : it->parent;

		next = it->next;
		it->next = NULL;
		/* Cached listings and statuses the kernel may never have
		 * seen: whether or not the table knows ino. */
		if (n->dc)
			dcache_break(n->dc, ino);
		if (itab_break(n->itab, ino, visit_kid, &v) == 0)
			nlist_add(out, it);
		else
			free(it);
	}
	in->head = in->tail = NULL;
	in->n = 0;
}

void notify_on_push(void *arg, uint16_t op, uint32_t id,
		    const uint8_t *payload, size_t len)
{
	struct notify *n = arg;
	struct nlist parsed = { 0 }, work = { 0 };
	struct nitem *ack = NULL;
	int rc;

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
			ack->rx_ns = now_ns();
		} else {
			log_error("out of memory: callback break %u will not "
				  "be acknowledged", id);
		}
	}
	rc = parse_break(payload, len, &parsed);
	__atomic_add_fetch(&n->st.pushes, 1, __ATOMIC_RELAXED);
	seq_take(n, SEQ_WRITE);
	if (rc < 0) {
		/* We cannot tell what broke, so everything did. */
		log_warn("malformed callback break (%s): invalidating "
			 "everything", strerror(-rc));
		break_everything(n, &work);
	} else {
		__atomic_add_fetch(&n->st.breaks, parsed.n, __ATOMIC_RELAXED);
		bump_seq(n);
		if (n->itab)
			apply_breaks(n, &parsed, &work);
		else
			nlist_free(&parsed);
	}
	if (ack)
		nlist_add(&work, ack);
	enqueue(n, &work);
	seq_release(n);
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

uint64_t notify_seq(struct notify *n)
{
	return __atomic_load_n(&n->seq, __ATOMIC_ACQUIRE);
}

int notify_reply_begin(struct notify *n, uint64_t seq)
{
	seq_take(n, SEQ_READ);
	return n->seq == seq;
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

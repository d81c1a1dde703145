/*
 * callback.c - the callback promise table. See callback.h.
 *
 * Structure. A hash table of objects (struct cb_obj, keyed by the full FID)
 * each with the list of its promises. Every promise sits on three doubly
 * linked lists: its object's, its client's (to drop a client's promises in
 * O(promises)), and the table-wide age list (oldest first, refreshed on
 * re-registration) used to evict when the table is full. An object record
 * exists only while it has at least one promise.
 *
 * Locking: one mutex (t->lock) guards everything in the table, including
 * the cb_client fields but those of acknowledgements (ack_lock, below).
 * Nothing here
 * blocks or does I/O while holding it. Where the table's locks stand in
 * the server's lock order: docs/LOCKING.md.
 *
 * Invariants (checked in debug builds, lib/debug.h): t->count is the
 * number of promises and each client's count the number on its list;
 * t->count <= t->max once cb_register returns; the age list is empty iff
 * t->count is 0; an object record has a promise; a recent[] slot's seq
 * only grows and other_seq <= seq; a wait's outstanding is the number of
 * frames on its ents list, and a connection's nframes the number on its
 * frames list; the helpers below run under the lock their
 * section names; a wait's done callback, like cb_expire's lost, runs with
 * neither lock held.
 *
 * Recent breaks: t->recent[] is a fixed array of slots indexed by FID hash.
 * A slot remembers the sequence number of the last break of a FID hashing
 * there (seq), which client made it (changer), and the last break in that
 * slot by anyone other than `changer` (other_seq). So "was this FID broken
 * by someone other than me after s0?" is answered exactly up to
 * collisions, which only err towards an extra break.
 *
 * Acknowledgements have their own lock (t->ack_lock), never held together
 * with t->lock. Every frame sent to a client that acknowledges, and not
 * yet acknowledged, is one struct cb_ackent: hashed by id, on its
 * connection's list (cl->frames) and, when a wait waits for it, on that
 * wait's list (w->ents), with the locks acknowledging it may need (see
 * callback.h, "Deadlock avoidance"). Every open wait is on t->waits with
 * the objects its change changed; armed waits are also on t->armed in
 * arming order, which is deadline order since the timeout is a constant.
 * That is the whole wait-for graph: wait -> the connections of its frames
 * -> that client's waits holding a lock one of the connection's frames
 * needs -> ... A wait is freed by whoever settles its last frame once
 * armed, after running its callback. Clients are nodes (struct cb_node,
 * one per HELLO client id, shared by its connections).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../lib/clock.h"
#include "../lib/debug.h"
#include "../lib/msg.h"
#include "callback.h"

#define CB_RECENT_SLOTS 4096u
#define CB_ACK_BUCKETS  1024u
/* Waits (and connections) a cycle check follows before it assumes the
 * worst. */
#define CB_GRAPH_MAX    64
/* Clients one cb_expire call can declare lost (the rest: next call). */
#define CB_LOST_MAX     32

struct cb_obj {
	struct cb_obj *next; /* hash chain */
	struct cairn_fid fid;
	struct cb_promise *holders;
};

struct cb_promise {
	struct cb_obj *obj;
	struct cb_client *cl;
	struct cb_promise *onext, **oprev; /* object's holder list */
	struct cb_promise *cnext, **cprev; /* client's promise list */
	struct cb_promise *anext, *aprev;  /* age list */
};

struct cb_recent {
	uint64_t seq;       /* last break of a FID in this slot */
	uint64_t changer;   /* cb_client id that made it (0 = unknown) */
	uint64_t other_seq; /* last break here by someone other than changer */
};

/* A client, by its HELLO client id; shared by its connections. ack_lock. */
struct cb_node {
	struct cb_node *next;            /* t->nodes */
	uint8_t id[16];
	int refs;                        /* connections (cb_clients) on it */
};

/* A lock acknowledging a frame may need: the locked pages of object fid
 * (dir 0: a record without a name), or the i_rwsem of directory fid
 * (dir 1: an entry record, for a client without HELLO_CB_NOLOCK). */
struct cb_lockref {
	struct cairn_fid fid;
	int dir;
};

/* A frame sent and not yet acknowledged. All fields: ack_lock. */
struct cb_ackent {
	struct cb_ackent *hnext;          /* id hash chain */
	struct cb_ackent *cnext, **cprev; /* its connection's frames */
	struct cb_ackent *wnext, **wprev; /* its wait's frames (w set) */
	uint32_t id;
	struct cb_client *cl;             /* who must acknowledge */
	struct cb_wait *w;                /* who waits for it, or NULL */
	int nlock;
	struct cb_lockref lock[];
};

/* One change waiting for its breaks' acknowledgements. ack_lock. */
struct cb_wait {
	struct cb_wait *next, *prev;     /* t->armed; then a done list */
	struct cb_wait *tnext, **tprev;  /* t->waits */
	struct cb_client *waiter;
	struct cb_ackent *ents;          /* the frames it waits for */
	void (*done)(void *arg);
	void *arg;
	int outstanding;                 /* frames on ents */
	int armed;
	uint64_t deadline_ms;            /* CLOCK_MONOTONIC */
	int pages;                       /* its request holds fid[]'s pages */
	int nfid;
	struct cairn_fid fid[];          /* what its change changed */
};

/* A request of client `blocked`, holding the pages of fid locked in its
 * kernel, parked behind the write token of client `holder` (cb_block).
 * Only compared as keys (client_key), never followed. ack_lock. */
struct cb_blockent {
	struct cb_blockent *next;
	const void *blocked, *holder;
	struct cairn_fid fid;
	int n;                           /* requests parked so */
};

struct cb_table {
	pthread_mutex_t lock;
	void (*hold)(void *owner);
	size_t max;
	size_t count;              /* promises; guarded by lock */
	size_t nbuckets;           /* power of two */
	struct cb_obj **buckets;   /* guarded by lock */
	struct cb_promise *oldest; /* age list head; guarded by lock */
	struct cb_promise *newest; /* age list tail; guarded by lock */
	uint64_t seq;              /* break sequence; written under lock */
	uint64_t next_client_id;   /* guarded by lock */
	struct cb_recent recent[CB_RECENT_SLOTS]; /* guarded by lock */

	pthread_mutex_t ack_lock;  /* never held with lock */
	uint32_t next_ack;         /* guarded by ack_lock */
	struct cb_ackent *ack_hash[CB_ACK_BUCKETS]; /* guarded by ack_lock */
	struct cb_wait *waits;     /* open waits; guarded by ack_lock */
	struct cb_wait *armed_head, *armed_tail; /* guarded by ack_lock */
	struct cb_node *nodes;     /* guarded by ack_lock */
	struct cb_blockent *blocks; /* guarded by ack_lock */
	uint64_t cycles;           /* guarded by ack_lock */
};

static uint64_t fid_hash(const struct cairn_fid *f)
{
	uint64_t h = f->vnode * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)f->vol << 32 | f->uniq) * 0xc2b2ae3d27d4eb4full;
	return h ^ (h >> 29);
}

/* The table's two locks are never held together. */
static void table_lock(struct cb_table *t)
{
	LOCK_ASSERT_NOT_HELD(&t->ack_lock);
	pthread_mutex_lock(&t->lock);
}

/* The promise bookkeeping agrees with itself (cheap checks only). */
static void table_unlock(struct cb_table *t)
{
	CAIRN_ASSERT((t->count == 0) == (t->oldest == NULL));
	CAIRN_ASSERT((t->oldest == NULL) == (t->newest == NULL));
	pthread_mutex_unlock(&t->lock);
}

static void ack_lock(struct cb_table *t)
{
	LOCK_ASSERT_NOT_HELD(&t->lock);
	pthread_mutex_lock(&t->ack_lock);
}

/* Hooks and done callbacks run with neither lock held. */
static void assert_unlocked(struct cb_table *t)
{
	LOCK_ASSERT_NOT_HELD(&t->lock);
	LOCK_ASSERT_NOT_HELD(&t->ack_lock);
}

struct cb_table *cb_table_create(size_t max_promises, void (*hold)(void *))
{
	struct cb_table *t = calloc(1, sizeof(*t));
	size_t nb = 1024;

	if (!t)
		return NULL;
	while (nb < max_promises / 2 && nb < (1u << 20))
		nb <<= 1;
	t->buckets = calloc(nb, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return NULL;
	}
	t->nbuckets = nb;
	t->max = max_promises ? max_promises : 1;
	t->hold = hold;
	t->next_client_id = 1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->ack_lock, NULL);
	return t;
}

void cb_table_destroy(struct cb_table *t)
{
	if (!t)
		return;
	CAIRN_ASSERT(t->count == 0); /* every client dropped */
	/* Clients should be gone; free whatever is left anyway. */
	while (t->oldest) {
		struct cb_promise *p = t->oldest;
		t->oldest = p->anext;
		free(p);
	}
	for (size_t i = 0; i < t->nbuckets; i++) {
		while (t->buckets[i]) {
			struct cb_obj *o = t->buckets[i];
			t->buckets[i] = o->next;
			free(o);
		}
	}
	free(t->buckets);
	/* Frames and waits still open here belong to connections and
	 * requests that never finished; their owners are gone with the
	 * server. */
	for (size_t i = 0; i < CB_ACK_BUCKETS; i++) {
		while (t->ack_hash[i]) {
			struct cb_ackent *e = t->ack_hash[i];
			t->ack_hash[i] = e->hnext;
			free(e);
		}
	}
	while (t->waits) {
		struct cb_wait *w = t->waits;
		t->waits = w->tnext;
		free(w);
	}
	while (t->nodes) {
		struct cb_node *n = t->nodes;
		t->nodes = n->next;
		free(n);
	}
	while (t->blocks) {
		struct cb_blockent *b = t->blocks;
		t->blocks = b->next;
		free(b);
	}
	pthread_mutex_destroy(&t->ack_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void cb_client_init(struct cb_table *t, struct cb_client *cl, void *owner)
{
	table_lock(t);
	cl->owner = owner;
	cl->id = t->next_client_id++;
	cl->head = NULL;
	cl->count = 0;
	cl->acks = 0;
	cl->nolock = 0;
	cl->gone = 0;
	cl->node = NULL;
	cl->frames = NULL;
	cl->nframes = 0;
	cl->untracked = 0;
	table_unlock(t);
}

uint64_t cb_seq(struct cb_table *t)
{
	return __atomic_load_n(&t->seq, __ATOMIC_SEQ_CST);
}

size_t cb_count(struct cb_table *t)
{
	table_lock(t);
	size_t n = t->count;
	table_unlock(t);
	return n;
}

/* --- objects and promises (all under t->lock) --------------------------- */

static struct cb_obj **obj_slot(struct cb_table *t, const struct cairn_fid *f)
{
	struct cb_obj **pp = &t->buckets[fid_hash(f) & (t->nbuckets - 1)];
	while (*pp && !cairn_fid_eq(&(*pp)->fid, f))
		pp = &(*pp)->next;
	return pp;
}

static struct cb_obj *obj_find(struct cb_table *t, const struct cairn_fid *f)
{
	struct cb_obj *o = *obj_slot(t, f);

	/* An object record exists only while it has a promise. */
	CAIRN_ASSERT(!o || o->holders);
	return o;
}

static void age_unlink(struct cb_table *t, struct cb_promise *p)
{
	if (p->aprev)
		p->aprev->anext = p->anext;
	else
		t->oldest = p->anext;
	if (p->anext)
		p->anext->aprev = p->aprev;
	else
		t->newest = p->aprev;
	p->anext = p->aprev = NULL;
}

static void age_append(struct cb_table *t, struct cb_promise *p)
{
	p->anext = NULL;
	p->aprev = t->newest;
	if (t->newest)
		t->newest->anext = p;
	else
		t->oldest = p;
	t->newest = p;
}

/* Remove and free promise p; frees its object when it was the last. */
static void promise_drop(struct cb_table *t, struct cb_promise *p)
{
	struct cb_obj *o = p->obj;

	*p->oprev = p->onext;
	if (p->onext)
		p->onext->oprev = p->oprev;
	*p->cprev = p->cnext;
	if (p->cnext)
		p->cnext->cprev = p->cprev;
	age_unlink(t, p);
	CAIRN_ASSERT(p->cl->count > 0 && t->count > 0);
	p->cl->count--;
	t->count--;
	free(p);
	if (!o->holders) {
		struct cb_obj **pp = obj_slot(t, &o->fid);
		*pp = o->next;
		free(o);
	}
}

static struct cb_promise *promise_find(struct cb_obj *o,
				       const struct cb_client *cl)
{
	for (struct cb_promise *p = o ? o->holders : NULL; p; p = p->onext)
		if (p->cl == cl)
			return p;
	return NULL;
}

int cb_others_hold(struct cb_table *t, const struct cb_client *cl,
		   const struct cairn_fid *fid)
{
	struct cb_obj *o;
	int others = 0;

	pthread_mutex_lock(&t->lock);
	o = obj_find(t, fid);
	for (struct cb_promise *p = o ? o->holders : NULL; p && !others;
	     p = p->onext)
		others = p->cl != cl;
	pthread_mutex_unlock(&t->lock);
	return others;
}

/* --- batches -------------------------------------------------------------- */

/*
 * The batch for owner in *list with room for a record, created with room
 * for cap records. A list reused across calls may so hold several
 * batches (frames) for one owner.
 */
static struct cb_batch *batch_for(struct cb_table *t, struct cb_batch **list,
				  struct cb_client *cl, uint32_t cap)
{
	struct cb_batch *b;

	LOCK_ASSERT_HELD(&t->lock);
	for (b = *list; b; b = b->next)
		if (b->owner == cl->owner && b->count < b->cap)
			return b;
	b = calloc(1, sizeof(*b) + cap * sizeof(b->rec[0]));
	if (!b)
		return NULL;
	b->owner = cl->owner;
	b->cl = cl;
	b->cap = cap;
	if (t->hold)
		t->hold(cl->owner);
	b->next = *list;
	*list = b;
	return b;
}

/* Add a record unless it is already there (the same change twice). */
static int batch_add(struct cb_batch *b, const struct cairn_fid *fid,
		     const char *name, size_t namelen, uint8_t flags)
{
	for (uint32_t i = 0; i < b->count; i++)
		if (cairn_fid_eq(&b->rec[i].fid, fid) &&
		    b->rec[i].namelen == namelen &&
		    (!namelen || !memcmp(b->rec[i].name, name, namelen))) {
			b->rec[i].flags &= flags | (uint8_t)~CB_ATTRS_ONLY;
			return 0;
		}
	/* batch_for returns a batch with room, and cap = the number of
	 * changes, each adding at most one record per client. */
	CAIRN_ASSERT(b->count < b->cap);
	if (b->count == b->cap)
		return -ENOBUFS;
	b->rec[b->count++] = (struct cb_record){ *fid, name, namelen,
						 (uint8_t)(flags & CB_ATTRS_ONLY) };
	return 1;
}

void cb_batch_free(struct cb_batch *b)
{
	while (b) {
		struct cb_batch *next = b->next;
		free(b);
		b = next;
	}
}

void cb_batch_encode(const struct cb_batch *b, struct wbuf *w)
{
	size_t h = wire_frame_begin(w, OP_CB_BREAK, WF_PUSH, b->id, 0);
	size_t at = msg_cb_break_begin(w);

	for (uint32_t i = 0; i < b->count; i++) {
		const struct cb_record *r = &b->rec[i];
		struct msg_cbrec rec = {
			r->fid, { r->name, r->name ? r->namelen : 0 }, r->flags
		};
		msg_cbrec_put(w, &rec);
	}
	msg_cb_break_end(w, at, b->count);
	wire_frame_end(w, h);
}

/* --- register / evict ----------------------------------------------------- */

static int evict_oldest(struct cb_table *t, uint32_t cap,
			struct cb_batch **evicted)
{
	struct cb_promise *p = t->oldest;
	struct cb_batch *b;
	int ret = 0;

	LOCK_ASSERT_HELD(&t->lock);
	CAIRN_ASSERT(p); /* called while count > max >= 1 */
	b = batch_for(t, evicted, p->cl, cap);
	if (b)
		batch_add(b, &p->obj->fid, NULL, 0, 0);
	else
		ret = -ENOMEM; /* dropped silently: caller must fail the client */
	promise_drop(t, p);
	return ret;
}

static int register_one(struct cb_table *t, struct cb_client *cl,
			const struct cairn_fid *fid)
{
	struct cb_obj **slot = obj_slot(t, fid), *o = *slot;
	struct cb_promise *p = promise_find(o, cl);

	LOCK_ASSERT_HELD(&t->lock);
	if (p) {
		age_unlink(t, p);
		age_append(t, p);
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o) {
			free(p);
			return -ENOMEM;
		}
		o->fid = *fid;
		o->next = NULL;
		*slot = o;
	}
	p->obj = o;
	p->cl = cl;
	p->onext = o->holders;
	if (o->holders)
		o->holders->oprev = &p->onext;
	p->oprev = &o->holders;
	o->holders = p;
	p->cnext = cl->head;
	if (cl->head)
		cl->head->cprev = &p->cnext;
	p->cprev = &cl->head;
	cl->head = p;
	age_append(t, p);
	cl->count++;
	t->count++;
	return 0;
}

int cb_register(struct cb_table *t, struct cb_client *cl,
		const struct cairn_fid *fids, int n, struct cb_batch **evicted)
{
	int ret = 0;

	table_lock(t);
	for (int i = 0; i < n; i++) {
		int r = register_one(t, cl, &fids[i]);
		if (r < 0) {
			/* Without a promise the client must not trust fids[i]. */
			struct cb_batch *b = batch_for(t, evicted, cl,
						       (uint32_t)n);
			if (b)
				batch_add(b, &fids[i], NULL, 0, 0);
			ret = r;
		}
	}
	while (t->count > t->max) {
		int r = evict_oldest(t, (uint32_t)(n > 0 ? n : 1), evicted);
		if (r < 0)
			ret = r;
	}
	CAIRN_ASSERT(t->count <= t->max);
	table_unlock(t);
	return ret;
}

/* --- break ---------------------------------------------------------------- */

static void recent_note(struct cb_table *t, const struct cairn_fid *fid,
			uint64_t seq, uint64_t changer)
{
	struct cb_recent *s = &t->recent[fid_hash(fid) % CB_RECENT_SLOTS];

	LOCK_ASSERT_HELD(&t->lock);
	if (s->changer != changer) {
		s->other_seq = s->seq;
		s->changer = changer;
	}
	CAIRN_ASSERT(seq >= s->seq); /* seq only grows, under t->lock */
	s->seq = seq;
	CAIRN_ASSERT(s->other_seq <= s->seq);
}

/* Sequence of the last break of fid's slot by anyone but client `me`. */
static uint64_t recent_by_other(struct cb_table *t,
				const struct cairn_fid *fid, uint64_t me)
{
	struct cb_recent *s = &t->recent[fid_hash(fid) % CB_RECENT_SLOTS];

	LOCK_ASSERT_HELD(&t->lock);
	return s->changer != me ? s->seq : s->other_seq;
}

int cb_break(struct cb_table *t, const struct cb_client *changer,
	     const struct cb_change *ch, int n, struct cb_batch **out)
{
	uint64_t me = changer ? changer->id : 0;
	int records = 0, ret = 0;

	if (n > CB_MAX_CHANGES)
		return -EINVAL;
	table_lock(t);
	uint64_t seq = __atomic_add_fetch(&t->seq, 1, __ATOMIC_SEQ_CST);

	/* Pass 1: records. Promises stay until every change has been seen,
	 * so two changes on one fid (rename within a directory) both reach
	 * its holders. */
	for (int i = 0; i < n; i++) {
		struct cb_obj *o = obj_find(t, &ch[i].fid);

		recent_note(t, &ch[i].fid, seq, me);
		for (struct cb_promise *p = o ? o->holders : NULL; p;
		     p = p->onext) {
			if (p->cl == changer && ch[i].all != CB_ALL)
				continue;
			struct cb_batch *b = batch_for(t, out, p->cl,
						       (uint32_t)n);
			if (!b) {
				ret = -ENOMEM;
				continue;
			}
			if (batch_add(b, &ch[i].fid,
				      ch[i].namelen ? ch[i].name : NULL,
				      ch[i].namelen, ch[i].flags) > 0)
				records++;
		}
	}
	/* Pass 2: drop the broken promises. */
	for (int i = 0; i < n; i++) {
		struct cb_obj *o = obj_find(t, &ch[i].fid);
		struct cb_promise *p = o ? o->holders : NULL;

		while (p) {
			struct cb_promise *next = p->onext;
			int last = next == NULL;
			if (p->cl != changer || ch[i].all != CB_OTHERS)
				promise_drop(t, p); /* may free o */
			if (last)
				break;
			p = next;
		}
	}
	table_unlock(t);
	return ret < 0 ? ret : records;
}

int cb_recheck(struct cb_table *t, struct cb_client *cl, uint64_t seq0,
	       const struct cairn_fid *fids, int n, struct cb_batch **out)
{
	int records = 0;

	/* The common case, nothing broken anywhere since seq0, costs no
	 * lock: a break bumps seq under the lock before it records. */
	if (__atomic_load_n(&t->seq, __ATOMIC_SEQ_CST) == seq0)
		return 0;
	table_lock(t);
	for (int i = 0; i < n; i++) {
		if (recent_by_other(t, &fids[i], cl->id) <= seq0)
			continue;
		struct cb_promise *p = promise_find(obj_find(t, &fids[i]), cl);
		if (p)
			promise_drop(t, p);
		struct cb_batch *b = batch_for(t, out, cl, (uint32_t)n);
		if (!b) {
			records = -ENOMEM;
			goto out;
		}
		if (batch_add(b, &fids[i], NULL, 0, 0) > 0)
			records++;
	}
out:
	table_unlock(t);
	return records;
}

static void node_put(struct cb_table *t, struct cb_client *cl);

void cb_drop_client(struct cb_table *t, struct cb_client *cl)
{
	table_lock(t);
	while (cl->head)
		promise_drop(t, cl->head);
	CAIRN_ASSERT(cl->count == 0);
	table_unlock(t);
	cb_client_gone(t, cl);
	node_put(t, cl);
}

/* --- acknowledgements (all under t->ack_lock unless noted) -------------- */

static uint32_t ack_id_next(struct cb_table *t)
{
	LOCK_ASSERT_HELD(&t->ack_lock);
	if (++t->next_ack == 0)
		++t->next_ack;
	return t->next_ack;
}

static struct cb_ackent **ack_slot(struct cb_table *t, uint32_t id)
{
	struct cb_ackent **pp = &t->ack_hash[id % CB_ACK_BUCKETS];

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->hnext;
	return pp;
}

/* The graph node of connection cl: its client, or itself when it has
 * none (out of memory at HELLO). */
static const void *client_key(const struct cb_client *cl)
{
	return cl->node ? (const void *)cl->node : (const void *)cl;
}

void cb_client_hello(struct cb_table *t, struct cb_client *cl,
		     const uint8_t id[16], uint32_t flags)
{
	struct cb_node *fresh = malloc(sizeof(*fresh)), *n;

	ack_lock(t);
	cl->acks = (flags & HELLO_CB_ACK) != 0;
	cl->nolock = (flags & HELLO_CB_NOLOCK) != 0;
	CAIRN_ASSERT(!cl->node); /* HELLO is answered once per connection */
	for (n = t->nodes; n && memcmp(n->id, id, 16); n = n->next)
		;
	if (!n && fresh) {
		memcpy(fresh->id, id, 16);
		fresh->refs = 0;
		fresh->next = t->nodes;
		t->nodes = fresh;
		n = fresh;
		fresh = NULL;
	}
	if (n) {
		n->refs++;
		cl->node = n;
	}
	pthread_mutex_unlock(&t->ack_lock);
	free(fresh);
}

static void node_put(struct cb_table *t, struct cb_client *cl)
{
	struct cb_node *n = cl->node, **pp;

	if (!n)
		return;
	ack_lock(t);
	cl->node = NULL;
	CAIRN_ASSERT(n->refs > 0);
	if (--n->refs == 0) {
		for (pp = &t->nodes; *pp != n; pp = &(*pp)->next)
			;
		*pp = n->next;
		free(n);
	}
	pthread_mutex_unlock(&t->ack_lock);
}

/* Does acknowledging e need a lock that wait x's request holds? */
static int frame_needs(const struct cb_ackent *e, const struct cb_wait *x)
{
	for (int i = 0; i < e->nlock; i++) {
		if (!e->lock[i].dir && !x->pages)
			continue;
		for (int j = 0; j < x->nfid; j++)
			if (cairn_fid_eq(&e->lock[i].fid, &x->fid[j]))
				return 1;
	}
	return 0;
}

/*
 * May an acknowledgement on connection c wait for wait x? Only if x is a
 * change of c's own client whose request holds a lock that one of c's
 * unacknowledged frames (or e, about to be sent on c) needs, or if not
 * all of c's frames are known.
 */
static int ack_may_wait_for(const struct cb_client *c,
			    const struct cb_ackent *e, const struct cb_wait *x)
{
	if (client_key(x->waiter) != client_key(c))
		return 0;
	if (c->untracked || (e && frame_needs(e, x)))
		return 1;
	for (const struct cb_ackent *f = c->frames; f; f = f->cnext)
		if (frame_needs(f, x))
			return 1;
	return 0;
}

static int has_ptr(const void *const *set, int n, const void *p)
{
	for (int i = 0; i < n; i++)
		if (set[i] == p)
			return 1;
	return 0;
}

/*
 * Would making w wait for frame e (to e->cl) close a cycle? Follow the
 * graph from e: the waits an acknowledgement on e->cl may wait for, the
 * connections each of those waits for, their waits, and so on; a cycle
 * is w reached again. A graph too large to follow counts as a cycle: not
 * waiting is always safe, waiting in a cycle costs the timeout.
 */
static int wait_closes_cycle(struct cb_table *t, const struct cb_wait *w,
			     const struct cb_ackent *e)
{
	const void *todo[CB_GRAPH_MAX], *seen[CB_GRAPH_MAX];
	int ntodo = 0, nseen = 0;

	LOCK_ASSERT_HELD(&t->ack_lock);
	todo[ntodo++] = e->cl;
	for (int next = 0; next < ntodo; next++) {
		const struct cb_client *c = todo[next];

		for (const struct cb_wait *x = t->waits; x; x = x->tnext) {
			if (has_ptr(seen, nseen, x) ||
			    !ack_may_wait_for(c, c == e->cl ? e : NULL, x))
				continue;
			if (x == w || nseen == CB_GRAPH_MAX)
				return 1;
			seen[nseen++] = x;
			for (const struct cb_ackent *f = x->ents; f;
			     f = f->wnext) {
				if (has_ptr(todo, ntodo, f->cl))
					continue;
				if (ntodo == CB_GRAPH_MAX)
					return 1;
				todo[ntodo++] = f->cl;
			}
		}
	}
	return 0;
}

/* Take e off its wait's frames (e->w set): once armed with none left,
 * the wait is done, off the armed list and the open waits and onto
 * *done. */
static void frame_off_wait(struct cb_table *t, struct cb_ackent *e,
			   struct cb_wait **done)
{
	struct cb_wait *w = e->w;

	LOCK_ASSERT_HELD(&t->ack_lock);
	*e->wprev = e->wnext;
	if (e->wnext)
		e->wnext->wprev = e->wprev;
	e->w = NULL;
	CAIRN_ASSERT(w->outstanding > 0);
	if (--w->outstanding || !w->armed)
		return;
	CAIRN_ASSERT(!w->ents);
	if (w->prev)
		w->prev->next = w->next;
	else
		t->armed_head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		t->armed_tail = w->prev;
	*w->tprev = w->tnext;
	if (w->tnext)
		w->tnext->tprev = w->tprev;
	w->prev = NULL;
	w->next = *done;
	*done = w;
}

/* Remove frame e; a wait it completes moves to *done. */
static void ack_settle(struct cb_table *t, struct cb_ackent *e,
		       struct cb_wait **done)
{
	LOCK_ASSERT_HELD(&t->ack_lock);
	*ack_slot(t, e->id) = e->hnext;
	*e->cprev = e->cnext;
	if (e->cnext)
		e->cnext->cprev = e->cprev;
	CAIRN_ASSERT(e->cl->nframes > 0);
	e->cl->nframes--;
	if (e->w)
		frame_off_wait(t, e, done);
	free(e);
}

/* Settle every frame of cl (it is gone). */
static void ack_settle_client(struct cb_table *t, struct cb_client *cl,
			      struct cb_wait **done)
{
	while (cl->frames)
		ack_settle(t, cl->frames, done);
	CAIRN_ASSERT(cl->nframes == 0);
}

/* Without the lock: run and free completed waits. */
static void run_done(struct cb_table *t, struct cb_wait *w)
{
	if (w)
		assert_unlocked(t);
	while (w) {
		struct cb_wait *next = w->next;

		w->done(w->arg);
		free(w);
		w = next;
	}
}

/* Does acknowledging e need the pages of fid? */
static int frame_needs_pages(const struct cb_ackent *e,
			     const struct cairn_fid *fid)
{
	for (int i = 0; i < e->nlock; i++)
		if (!e->lock[i].dir && cairn_fid_eq(&e->lock[i].fid, fid))
			return 1;
	return 0;
}

/* Is e's client parked behind a token of waiter's client on an object
 * whose pages acknowledging e needs? Then waiting for e closes a cycle
 * the waits alone do not show (see cb_block). */
static int blocked_behind(struct cb_table *t, const struct cb_ackent *e,
			  const struct cb_client *waiter)
{
	LOCK_ASSERT_HELD(&t->ack_lock);
	for (const struct cb_blockent *b = t->blocks; b; b = b->next)
		if (b->blocked == client_key(e->cl) &&
		    b->holder == client_key(waiter) &&
		    frame_needs_pages(e, &b->fid))
			return 1;
	return 0;
}

struct cb_blockent *cb_block(struct cb_table *t, struct cb_client *blocked,
			     struct cb_client *holder,
			     const struct cairn_fid *fid)
{
	struct cb_wait *done = NULL;
	struct cb_blockent *b;

	ack_lock(t);
	for (b = t->blocks; b; b = b->next)
		if (b->blocked == client_key(blocked) &&
		    b->holder == client_key(holder) &&
		    cairn_fid_eq(&b->fid, fid))
			break;
	if (!b && (b = calloc(1, sizeof(*b)))) {
		b->blocked = client_key(blocked);
		b->holder = client_key(holder);
		b->fid = *fid;
		b->next = t->blocks;
		t->blocks = b;
	}
	if (b)
		b->n++;
	/* The holder's changes already waiting for blocked's frames on
	 * fid's pages wait no more. */
	for (struct cb_wait *w = t->waits; w; w = w->tnext) {
		struct cb_ackent *e = w->ents, *next;

		if (client_key(w->waiter) != client_key(holder))
			continue;
		for (; e; e = next) {
			next = e->wnext;
			/* e stays recorded, waited for by nobody. */
			if (client_key(e->cl) == client_key(blocked) &&
			    frame_needs_pages(e, fid)) {
				frame_off_wait(t, e, &done);
				t->cycles++;
			}
		}
	}
	pthread_mutex_unlock(&t->ack_lock);
	run_done(t, done);
	return b;
}

void cb_unblock(struct cb_table *t, struct cb_blockent *b)
{
	if (!b)
		return;
	ack_lock(t);
	CAIRN_ASSERT(b->n > 0);
	if (--b->n == 0) {
		struct cb_blockent **p = &t->blocks;

		while (*p != b)
			p = &(*p)->next;
		*p = b->next;
		free(b);
	}
	pthread_mutex_unlock(&t->ack_lock);
}

struct cb_wait *cb_wait_new(struct cb_table *t, struct cb_client *waiter,
			    const struct cb_change *ch, int n, int pages,
			    void (*done)(void *arg), void *arg)
{
	struct cb_wait *w;

	CAIRN_ASSERT(n >= 0 && n <= CB_MAX_CHANGES);
	if (n < 0 || n > CB_MAX_CHANGES)
		return NULL;
	w = calloc(1, sizeof(*w) + (size_t)n * sizeof(w->fid[0]));
	if (!w)
		return NULL;
	w->waiter = waiter;
	w->done = done;
	w->arg = arg;
	w->pages = pages;
	w->nfid = n;
	for (int i = 0; i < n; i++)
		w->fid[i] = ch[i].fid;
	ack_lock(t);
	w->tnext = t->waits;
	if (t->waits)
		t->waits->tprev = &w->tnext;
	w->tprev = &t->waits;
	t->waits = w;
	pthread_mutex_unlock(&t->ack_lock);
	return w;
}

/* What acknowledging b's frame may need (see struct cb_lockref). */
static int frame_locks(const struct cb_batch *b, int nolock,
		       struct cb_lockref *out)
{
	int n = 0;

	for (uint32_t i = 0; i < b->count; i++) {
		int dir = b->rec[i].namelen != 0;

		if (!dir || !nolock)
			out[n++] = (struct cb_lockref){ b->rec[i].fid, dir };
	}
	return n;
}

uint32_t cb_frame_add(struct cb_table *t, struct cb_wait *w,
		      const struct cb_batch *b)
{
	struct cb_client *cl = b->cl;
	struct cb_ackent *e = malloc(sizeof(*e) +
				     b->count * sizeof(e->lock[0]));
	uint32_t id;

	ack_lock(t);
	id = ack_id_next(t);
	if (!cl->acks || cl->gone)
		goto out; /* nothing to remember, nobody to wait for */
	if (!e) {
		cl->untracked = 1;
		goto out;
	}
	e->id = id;
	e->cl = cl;
	e->w = NULL;
	e->nlock = frame_locks(b, cl->nolock, e->lock);
	if (w && client_key(cl) != client_key(w->waiter)) {
		if (blocked_behind(t, e, w->waiter) ||
		    wait_closes_cycle(t, w, e)) {
			t->cycles++;
		} else {
			e->w = w;
			e->wnext = w->ents;
			if (w->ents)
				w->ents->wprev = &e->wnext;
			e->wprev = &w->ents;
			w->ents = e;
			w->outstanding++;
		}
	}
	if (!e->w && cl->nframes >= CB_FRAMES_MAX) {
		cl->untracked = 1;
		goto out;
	}
	e->hnext = t->ack_hash[id % CB_ACK_BUCKETS];
	t->ack_hash[id % CB_ACK_BUCKETS] = e;
	e->cnext = cl->frames;
	if (cl->frames)
		cl->frames->cprev = &e->cnext;
	e->cprev = &cl->frames;
	cl->frames = e;
	cl->nframes++;
	e = NULL;
out:
	pthread_mutex_unlock(&t->ack_lock);
	free(e); /* not recorded */
	return id;
}

uint64_t cb_ack_cycles(struct cb_table *t)
{
	ack_lock(t);
	uint64_t n = t->cycles;
	pthread_mutex_unlock(&t->ack_lock);
	return n;
}

int cb_wait_arm(struct cb_table *t, struct cb_wait *w)
{
	ack_lock(t);
	CAIRN_ASSERT(!w->armed);
	if (!w->outstanding) {
		*w->tprev = w->tnext;
		if (w->tnext)
			w->tnext->tprev = w->tprev;
		pthread_mutex_unlock(&t->ack_lock);
		free(w);
		return 1;
	}
	w->armed = 1;
	w->deadline_ms = clock_mono_ms() + CB_ACK_TIMEOUT_MS;
	w->next = NULL;
	w->prev = t->armed_tail;
	if (t->armed_tail)
		t->armed_tail->next = w;
	else
		t->armed_head = w;
	t->armed_tail = w;
	pthread_mutex_unlock(&t->ack_lock);
	return 0;
}

int cb_ack(struct cb_table *t, struct cb_client *cl, uint32_t id)
{
	struct cb_wait *done = NULL;
	struct cb_ackent *e;

	ack_lock(t);
	e = *ack_slot(t, id);
	if (!e || e->cl != cl) {
		pthread_mutex_unlock(&t->ack_lock);
		return -ENOENT;
	}
	ack_settle(t, e, &done);
	pthread_mutex_unlock(&t->ack_lock);
	run_done(t, done);
	return 0;
}

void cb_client_gone(struct cb_table *t, struct cb_client *cl)
{
	struct cb_wait *done = NULL;

	ack_lock(t);
	cl->gone = 1;
	ack_settle_client(t, cl, &done);
	pthread_mutex_unlock(&t->ack_lock);
	run_done(t, done);
}

int cb_expire(struct cb_table *t, void (*lost)(void *arg, void *owner),
	      void *arg)
{
	struct cb_client *gone[CB_LOST_MAX];
	void *owners[CB_LOST_MAX];
	struct cb_wait *done = NULL;
	uint64_t now = clock_mono_ms();
	int n = 0;

	ack_lock(t);
	/* Deadline order: stop at the first wait still in time. */
	for (struct cb_wait *w = t->armed_head;
	     w && w->deadline_ms <= now && n < CB_LOST_MAX; w = w->next) {
		for (struct cb_ackent *e = w->ents; e && n < CB_LOST_MAX;
		     e = e->wnext) {
			if (e->cl->gone)
				continue;
			e->cl->gone = 1;
			if (t->hold)
				t->hold(e->cl->owner);
			gone[n] = e->cl;
			owners[n++] = e->cl->owner;
		}
	}
	/* Settled after the walk: settling frees frames and waits. */
	for (int i = 0; i < n; i++)
		ack_settle_client(t, gone[i], &done);
	pthread_mutex_unlock(&t->ack_lock);
	if (n)
		assert_unlocked(t);
	for (int i = 0; i < n; i++)
		lost(arg, owners[i]);
	run_done(t, done);
	return n;
}

/*
 * token.c - write tokens. See token.h.
 *
 * A hash of tokens by FID, chained, grown by doubling. A token holds a
 * reference on its holder's connection (the recall is sent to it) and
 * the FIFO of requests parked behind it. Work that must not run under
 * the lock (sending a recall, resuming requests, dropping references) is
 * collected into a `later` and done after unlocking.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/clock.h"
#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"
#include "../lib/wire.h"
#include "server.h"
#include "token.h"

struct token {
	struct token *next;           /* hash chain */
	struct cairn_fid fid;
	struct conn *holder;          /* referenced */
	int64_t recalled_ms;          /* 0: no recall sent */
	int64_t heard_ms;             /* the holder's last change under it
				       * since the recall (tok_other) */
	struct tok_wait *whead, *wtail;
};

/*
 * A token given up while requests were parked behind it: until those
 * have run again (n of them, tok_gate_done) or TOK_GATE_MS passed, its
 * last holder may not take it again. Else a client rewriting a file in
 * a loop takes the token back before the other client's request runs,
 * and that request parks again, for ever (starved). Other clients may.
 */
struct gate {
	struct cairn_fid fid;
	const struct conn *c;         /* the last holder; compared only */
	int n;                        /* requests still to run again */
	int64_t until_ms;
	struct tok_wait *whead, *wtail; /* its grants, parked */
	int used;
};

struct tok_table {
	pthread_mutex_t lock;
	struct token **buckets;
	size_t nbuckets, n;
	struct gate gates[TOK_GATES];
	unsigned ngates;              /* in use (n > 0) */
	unsigned timeout_ms;
	void (*resume)(void *, struct tok_wait *);
	void *arg;
	struct tok_stats st;
};

/* What to do once the lock is dropped. */
struct later {
	struct tok_wait *resume;      /* requests to run again, in order */
	struct tok_wait **rtail;
	struct conn *recall;          /* send a recall of fid to it */
	struct cairn_fid recall_fid;
	struct conn *put[16];         /* references to drop */
	int nput;
	struct later *more;           /* overflow of put (rare) */
};

static size_t fid_hash(const struct cairn_fid *f)
{
	uint64_t h = f->vnode * 0x9e3779b97f4a7c15ull ^ f->uniq ^
		     ((uint64_t)f->vol << 32);

	return (size_t)(h ^ (h >> 29));
}

struct tok_table *tok_table_create(unsigned recall_timeout_ms,
				   void (*resume)(void *, struct tok_wait *),
				   void *arg)
{
	struct tok_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->nbuckets = 256;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->timeout_ms = recall_timeout_ms;
	t->resume = resume;
	t->arg = arg;
	return t;
}

void tok_table_destroy(struct tok_table *t)
{
	if (!t)
		return;
	/* The server stops its connections first: nothing is left. */
	CAIRN_ASSERT(t->n == 0);
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

size_t tok_count(struct tok_table *t)
{
	return __atomic_load_n(&t->n, __ATOMIC_RELAXED);
}

static struct token **slot(struct tok_table *t, const struct cairn_fid *fid)
{
	struct token **p = &t->buckets[fid_hash(fid) & (t->nbuckets - 1)];

	while (*p && !cairn_fid_eq(&(*p)->fid, fid))
		p = &(*p)->next;
	return p;
}

static void grow(struct tok_table *t)
{
	size_t nb = t->nbuckets * 2;
	struct token **b = calloc(nb, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct token *k = t->buckets[i], *next;

		for (; k; k = next) {
			struct token **d = &b[fid_hash(&k->fid) & (nb - 1)];

			next = k->next;
			k->next = *d;
			*d = k;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

static void later_init(struct later *l)
{
	memset(l, 0, sizeof(*l));
	l->rtail = &l->resume;
}

static void later_put(struct later *l, struct conn *c)
{
	while (l->nput == (int)(sizeof(l->put) / sizeof(l->put[0]))) {
		if (!l->more) {
			l->more = malloc(sizeof(*l->more));
			if (!l->more) {
				/* Cannot defer: drop it here. conn_put
				 * takes no lock of ours' order (a leaf
				 * refcount); see LOCKING.md. */
				conn_put(c);
				return;
			}
			later_init(l->more);
		}
		l = l->more;
	}
	l->put[l->nput++] = c;
}

/* fid's gate, or NULL; one whose time is up counts as done (the next
 * gates_open opens it) and is not returned. Under lock. */
static struct gate *gate_find(struct tok_table *t,
			      const struct cairn_fid *fid)
{
	if (!t->ngates)
		return NULL;
	for (unsigned i = 0; i < TOK_GATES; i++) {
		struct gate *g = &t->gates[i];

		if (!g->used || g->n <= 0 || !cairn_fid_eq(&g->fid, fid))
			continue;
		if (clock_mono_ms() < g->until_ms)
			return g;
		g->n = 0;
	}
	return NULL;
}

/* Open the gates that are done (n <= 0) and still hold grants, through
 * l. Under lock. */
static void gates_open(struct tok_table *t, struct later *l)
{
	for (unsigned i = 0; i < TOK_GATES; i++) {
		struct gate *g = &t->gates[i];

		if (!g->used || g->n > 0)
			continue;
		if (g->whead) {
			for (struct tok_wait *w = g->whead; w; w = w->next)
				w->gated = 0;
			*l->rtail = g->whead;
			l->rtail = &g->wtail->next;
		}
		memset(g, 0, sizeof(*g));
		__atomic_store_n(&t->ngates, t->ngates - 1, __ATOMIC_RELAXED);
	}
}

/* Unlink *p (a token) and free it: its waiters go to l->resume (and
 * behind a gate for its holder), the holder's reference to l->put. */
static void remove_token(struct tok_table *t, struct token **p,
			 struct later *l)
{
	struct token *k = *p;
	int parked = 0;

	*p = k->next;
	if (k->whead) {
		*l->rtail = k->whead;
		l->rtail = &k->wtail->next;
		for (struct tok_wait *w = k->whead; w; w = w->next)
			parked++;
	}
	/* A full table (TOK_GATES) just lets the holder back in. */
	for (unsigned i = 0; parked && i < TOK_GATES; i++) {
		struct gate *g = &t->gates[i];

		if (g->used)
			continue;
		*g = (struct gate){ .fid = k->fid, .c = k->holder,
				    .n = parked, .used = 1,
				    .until_ms = clock_mono_ms() + TOK_GATE_MS };
		__atomic_store_n(&t->ngates, t->ngates + 1, __ATOMIC_RELAXED);
		for (struct tok_wait *w = k->whead; w; w = w->next)
			w->gated = 1;
		break;
	}
	later_put(l, k->holder);
	free(k);
	__atomic_store_n(&t->n, t->n - 1, __ATOMIC_RELAXED);
	t->st.held = t->n;
}

static void later_run(struct tok_table *t, struct later *l)
{
	struct tok_wait *w = l->resume, *next;

	if (l->recall) {
		if (conn_push_fid(l->recall, OP_CB_RECALL, &l->recall_fid))
			log_debug("peer %s: recall of vnode %llu not sent",
				  conn_peer(l->recall),
				  (unsigned long long)l->recall_fid.vnode);
		conn_put(l->recall);
	}
	for (; w; w = next) {
		next = w->next;
		w->next = NULL;
		t->resume(t->arg, w);
	}
	for (struct later *m = l; m; m = m->more)
		for (int i = 0; i < m->nput; i++)
			conn_put(m->put[i]);
	for (struct later *m = l->more, *n; m; m = n) {
		n = m->more;
		free(m);
	}
}

/* Tokens c holds (under the lock). */
static size_t held_by(struct tok_table *t, struct conn *c)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct token *k = t->buckets[i]; k; k = k->next)
			n += k->holder == c;
	return n;
}

int tok_acquire(struct tok_table *t, struct conn *c,
		const struct cairn_fid *fid, int *fresh)
{
	struct token **p, *k;
	struct gate *g;
	struct later l;
	int ret = 0;

	*fresh = 0;
	later_init(&l);
	pthread_mutex_lock(&t->lock);
	p = slot(t, fid);
	if (*p) {
		ret = (*p)->holder == c ? 0 : 1;
		goto out;
	}
	if ((g = gate_find(t, fid)) && g->c == c) {
		ret = 1; /* tok_park puts it behind the gate */
		goto out;
	}
	/* The per-connection count is a walk, paid only near the limit. */
	if (t->n >= TOK_MAX ||
	    (t->n >= TOK_MAX_PER_CONN && held_by(t, c) >= TOK_MAX_PER_CONN)) {
		ret = -EAGAIN;
		goto out;
	}
	if (!(k = calloc(1, sizeof(*k)))) {
		ret = -EAGAIN;
		goto out;
	}
	k->fid = *fid;
	k->holder = c;
	conn_get(c);
	*p = k;
	__atomic_store_n(&t->n, t->n + 1, __ATOMIC_RELAXED);
	t->st.held = t->n;
	t->st.granted++;
	*fresh = 1;
	if (t->n > t->nbuckets * 2)
		grow(t);
out:
	gates_open(t, &l);
	pthread_mutex_unlock(&t->lock);
	later_run(t, &l);
	return ret;
}

int tok_holds(struct tok_table *t, struct conn *c,
	      const struct cairn_fid *fid)
{
	int ret;

	pthread_mutex_lock(&t->lock);
	ret = *slot(t, fid) && (*slot(t, fid))->holder == c;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int tok_other(struct tok_table *t, struct conn *c,
	      const struct cairn_fid *fid, int change)
{
	struct token *k;
	int other;

	if (!tok_count(t))
		return 0;
	pthread_mutex_lock(&t->lock);
	k = *slot(t, fid);
	other = k && k->holder != c;
	if (k && !other && change && k->recalled_ms)
		k->heard_ms = clock_mono_ms();
	pthread_mutex_unlock(&t->lock);
	return other;
}

int tok_find_other(struct tok_table *t, struct conn *c,
		   const struct cairn_fid *fids, int n)
{
	int ret = -1;

	if (!tok_count(t))
		return -1;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < n && ret < 0; i++) {
		struct token *k = *slot(t, &fids[i]);

		if (k && k->holder != c)
			ret = i;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

struct conn *tok_holder_get(struct tok_table *t, struct conn *c,
			    const struct cairn_fid *fid)
{
	struct conn *h = NULL;
	struct token *k;

	pthread_mutex_lock(&t->lock);
	k = *slot(t, fid);
	if (k && k->holder != c) {
		h = k->holder;
		conn_get(h);
	}
	pthread_mutex_unlock(&t->lock);
	return h;
}

/* w at the end of the FIFO *head..*tail. */
static void wait_append(struct tok_wait **head, struct tok_wait **tail,
			struct tok_wait *w)
{
	w->next = NULL;
	w->gated = 0;
	if (*tail)
		(*tail)->next = w;
	else
		*head = w;
	*tail = w;
}

int tok_park(struct tok_table *t, struct conn *c,
	     const struct cairn_fid *fid, struct tok_wait *w)
{
	struct later l;
	struct token *k;
	struct gate *g;

	later_init(&l);
	pthread_mutex_lock(&t->lock);
	k = *slot(t, fid);
	if (!k && (g = gate_find(t, fid)) && g->c == c) {
		wait_append(&g->whead, &g->wtail, w);
		pthread_mutex_unlock(&t->lock);
		return 1;
	}
	if (!k || k->holder == c) {
		gates_open(t, &l);
		pthread_mutex_unlock(&t->lock);
		later_run(t, &l);
		return 0;
	}
	wait_append(&k->whead, &k->wtail, w);
	t->st.parked++;
	if (!k->recalled_ms) {
		k->recalled_ms = clock_mono_ms();
		t->st.recalls++;
		l.recall = k->holder;
		l.recall_fid = *fid;
		conn_get(k->holder);
	}
	pthread_mutex_unlock(&t->lock);
	later_run(t, &l);
	return 1;
}

void tok_return(struct tok_table *t, struct conn *c,
		const struct cairn_fid *fid)
{
	struct later l;
	struct token **p;

	later_init(&l);
	pthread_mutex_lock(&t->lock);
	p = slot(t, fid);
	if (*p && (*p)->holder == c) {
		remove_token(t, p, &l);
		t->st.returned++;
	}
	pthread_mutex_unlock(&t->lock);
	later_run(t, &l);
}

void tok_conn_gone(struct tok_table *t, struct conn *c)
{
	struct later l;
	size_t n = 0;

	later_init(&l);
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct token **p = &t->buckets[i];

		while (*p) {
			if ((*p)->holder == c) {
				remove_token(t, p, &l);
				n++;
			} else {
				p = &(*p)->next;
			}
		}
	}
	/* Its gates hold nobody back now (the pointer may be reused). */
	for (unsigned i = 0; i < TOK_GATES; i++)
		if (t->gates[i].c == c)
			t->gates[i].c = NULL;
	pthread_mutex_unlock(&t->lock);
	if (n)
		log_info("peer %s: connection ended holding %zu write "
			 "token%s: dropped (the client sends what it kept "
			 "once it is back, if the files did not change)",
			 conn_peer(c), n, n == 1 ? "" : "s");
	later_run(t, &l);
}

void tok_gate_done(struct tok_table *t, const struct cairn_fid *fid)
{
	struct later l;
	struct gate *g;

	later_init(&l);
	pthread_mutex_lock(&t->lock);
	if ((g = gate_find(t, fid)))
		g->n--;
	gates_open(t, &l);
	pthread_mutex_unlock(&t->lock);
	later_run(t, &l);
}

void tok_expire(struct tok_table *t)
{
	struct later l;
	int64_t now = clock_mono_ms();

	if (!tok_count(t) && !__atomic_load_n(&t->ngates, __ATOMIC_RELAXED))
		return;
	later_init(&l);
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < TOK_GATES; i++)
		if (t->gates[i].used && now >= t->gates[i].until_ms)
			t->gates[i].n = 0;
	gates_open(t, &l);
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct token **p = &t->buckets[i];

		while (*p) {
			struct token *k = *p;

			/* Silent that long: a holder still sending what it
			 * kept (a long journal, a slow machine) is not. */
			if (k->recalled_ms &&
			    now - (k->heard_ms > k->recalled_ms
					   ? k->heard_ms : k->recalled_ms) >=
				    (int64_t)t->timeout_ms) {
				log_warn("peer %s: did not return its write "
					 "token on vnode %llu, nor send a change "
					 "under it, within %u ms of the recall "
					 "or its last change: revoked; what it "
					 "still sends for it is refused",
					 conn_peer(k->holder),
					 (unsigned long long)k->fid.vnode,
					 t->timeout_ms);
				t->st.revoked++;
				remove_token(t, p, &l);
			} else {
				p = &k->next;
			}
		}
	}
	pthread_mutex_unlock(&t->lock);
	later_run(t, &l);
}

void tok_get_stats(struct tok_table *t, struct tok_stats *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	pthread_mutex_unlock(&t->lock);
}

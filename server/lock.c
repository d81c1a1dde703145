/*
 * lock.c - the server's lock table (lock.h).
 *
 * Files with locks or waiters hang in a hash by FID; waiters are also
 * few enough to keep in one list (a waiter is a client blocked in
 * F_SETLKW or flock), which the deadlock check walks. Wake-ups are pushed
 * after the mutex is dropped: the table collects them, with a reference
 * on each connection, and sends them on the way out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lock.h"
#include "server.h"
#include "../lib/clock.h"
#include "../lib/log.h"
#include "../lib/msg.h"

#define NBUCKETS 4096u
#define DEADLOCK_DEPTH 16
/* A file whose locks two clients asked for within this long is not
 * delegated: each would recall it from the other in turn. */
#define LK_DELEG_QUIET_MS 10000

struct lk_client {
	struct lk_client *next;
	uint8_t id[16];
	int conns;
	int64_t expire_ms;     /* no connection: locks dropped then */
	size_t nlocks;
	size_t ndeleg;         /* files delegated to it */
};

struct lk_file {
	struct lk_file *hnext;
	struct cairn_fid fid;
	struct lkset set;
	size_t nwait;          /* waiters on it */
	/* Delegation (lock.h): the client that grants the file's locks
	 * itself, and the connection its recall goes to (a reference). */
	struct lk_client *deleg;
	struct conn *dconn;
	int64_t recall_ms;     /* recalled then (0: not recalled) */
	/* Who asked last, and when a request last came from another
	 * client than the one before: a file two clients lock in turn is
	 * not delegated (LK_DELEG_QUIET_MS). */
	const struct lk_client *last;
	int64_t mixed_ms;
};

struct lk_waiter {
	struct lk_waiter *next;
	struct lk_file *f;
	struct conn *c;        /* gets the wake-up */
	struct lkent req;      /* client: the lk_client */
	int recall;            /* waits for a delegation's return, not
				* for a lock (no deadlock edge) */
};

/* Pushes to send once the lock is dropped (op 0: only a connection
 * reference to drop). */
struct wakes {
	struct conn **c;
	struct cairn_fid *fid;
	uint16_t *op;
	size_t n, cap;
};

struct lk_table {
	char *marker;          /* DATA/locks-held */
	int marked;            /* atomic: the marker exists */
	pthread_mutex_t lock;
	struct lk_file *buckets[NBUCKETS];
	struct lk_client *clients;
	struct lk_waiter *waiters;
	unsigned lease_ms;
	int64_t grace_end_ms;
	int in_grace;
	struct lk_stats st;
};

static size_t bucket(const struct cairn_fid *fid)
{
	uint64_t h = fid->vnode * 0x9e3779b97f4a7c15ull ^ fid->vol;

	return (size_t)(h >> 32) % NBUCKETS;
}

struct lk_table *lk_table_create(const char *data_dir, unsigned lease_ms,
				 unsigned grace_ms)
{
	struct lk_table *t = calloc(1, sizeof(*t));

	if (!t || asprintf(&t->marker, "%s/locks-held", data_dir) < 0) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->lease_ms = lease_ms;
	t->marked = access(t->marker, F_OK) == 0;
	if (!t->marked)
		grace_ms = 0; /* nobody can hold a lock of ours */
	else if (grace_ms)
		log_info("clients may hold locks from before this start: for "
			 "%u ms only their reclaims are granted", grace_ms);
	t->grace_end_ms = clock_mono_ms() + grace_ms;
	t->in_grace = grace_ms > 0;
	return t;
}

/* From the first grant on, a restart must give clients their grace. */
static void mark(struct lk_table *t)
{
	int fd;

	if (__atomic_load_n(&t->marked, __ATOMIC_ACQUIRE))
		return;
	fd = open(t->marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || fsync(fd)) {
		log_error("cannot create %s (%s): after a crash, clients "
			  "would get no grace period to reclaim their locks",
			  t->marker, strerror(errno));
	} else {
		char *dir = strdup(t->marker), *sl = dir ? strrchr(dir, '/') : NULL;
		int dfd;

		if (sl)
			*sl = 0;
		if (sl && (dfd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
		__atomic_store_n(&t->marked, 1, __ATOMIC_RELEASE);
	}
	if (fd >= 0)
		close(fd);
}

void lk_table_stopped(struct lk_table *t)
{
	uint64_t held;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	held = t->st.locks + t->st.delegs; /* a holder's own grants count */
	pthread_mutex_unlock(&t->lock);
	if (!held && __atomic_load_n(&t->marked, __ATOMIC_ACQUIRE) &&
	    unlink(t->marker) && errno != ENOENT)
		log_warn("cannot remove %s: %s", t->marker, strerror(errno));
}

void lk_table_destroy(struct lk_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < NBUCKETS; i++)
		for (struct lk_file *f = t->buckets[i], *n; f; f = n) {
			n = f->hnext;
			if (f->dconn)
				conn_put(f->dconn);
			lkset_clear(&f->set);
			free(f);
		}
	for (struct lk_waiter *w = t->waiters, *n; w; w = n) {
		n = w->next;
		free(w);
	}
	for (struct lk_client *c = t->clients, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	pthread_mutex_destroy(&t->lock);
	free(t->marker);
	free(t);
}

static struct lk_file *file_find(struct lk_table *t,
				 const struct cairn_fid *fid, int create)
{
	struct lk_file **b = &t->buckets[bucket(fid)], *f;

	for (f = *b; f; f = f->hnext)
		if (cairn_fid_eq(&f->fid, fid))
			return f;
	if (!create || !(f = calloc(1, sizeof(*f))))
		return NULL;
	f->fid = *fid;
	f->hnext = *b;
	*b = f;
	return f;
}

/* Free f once nothing is locked, awaited or delegated in it, and its
 * history says nothing any more. */
static void file_tidy(struct lk_table *t, struct lk_file *f)
{
	if (f->set.n || f->nwait || f->deleg ||
	    (f->mixed_ms && clock_mono_ms() - f->mixed_ms < LK_DELEG_QUIET_MS))
		return;
	for (struct lk_file **pp = &t->buckets[bucket(&f->fid)]; *pp;
	     pp = &(*pp)->hnext)
		if (*pp == f) {
			*pp = f->hnext;
			free(f);
			return;
		}
}

/* Queue push op (0: none) of fid to c. ref: take a reference on c (else
 * the caller's is handed over). */
static void push_add(struct wakes *wk, struct conn *c,
		     const struct cairn_fid *fid, uint16_t op, int ref)
{
	for (size_t i = 0; ref && i < wk->n; i++)
		if (wk->c[i] == c && wk->op[i] == op &&
		    cairn_fid_eq(&wk->fid[i], fid))
			return;
	if (wk->n == wk->cap) {
		size_t cap = wk->cap ? wk->cap * 2 : 8;
		struct conn **nc = realloc(wk->c, cap * sizeof(*nc));

		if (nc)
			wk->c = nc;
		struct cairn_fid *nf = nc ? realloc(wk->fid,
						    cap * sizeof(*nf)) : NULL;
		if (nf)
			wk->fid = nf;
		uint16_t *no = nf ? realloc(wk->op, cap * sizeof(*no)) : NULL;
		if (!no) {
			/* A waiter not told asks again on its next wake-up,
			 * reconnect or interrupt; a holder not recalled
			 * loses its delegation after the lease. */
			log_error("lock table: out of memory for a push");
			return; /* a handed-over reference leaks: no put
				 * under the lock */
		}
		wk->op = no;
		wk->cap = cap;
	}
	if (ref)
		conn_get(c);
	wk->c[wk->n] = c;
	wk->op[wk->n] = op;
	wk->fid[wk->n++] = *fid;
}

static void wakes_add(struct wakes *wk, struct conn *c,
		      const struct cairn_fid *fid)
{
	push_add(wk, c, fid, OP_CB_LOCKWAKE, 1);
}

/* Remove the waiters for which pred(w, arg) holds; wake them into wk
 * when wk is given. */
static void waiters_remove(struct lk_table *t,
			   int (*pred)(const struct lk_waiter *w,
				       const void *arg),
			   const void *arg, struct wakes *wk)
{
	for (struct lk_waiter **pp = &t->waiters, *w; (w = *pp);) {
		if (!pred(w, arg)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (wk) {
			wakes_add(wk, w->c, &w->f->fid);
			t->st.wakes++;
		}
		w->f->nwait--;
		file_tidy(t, w->f);
		t->st.waiters--;
		free(w);
	}
}

static int on_file(const struct lk_waiter *w, const void *f)
{
	return w->f == f;
}

static int anyone(const struct lk_waiter *w, const void *arg)
{
	return 1;
}

static int of_conn(const struct lk_waiter *w, const void *c)
{
	return w->c == c;
}

/* The waiter this request replaces or cancels: same connection, owner,
 * kind and file. */
struct same_wait {
	struct conn *c;
	const struct lk_file *f;
	const struct lkent *req;
};

static int same_wait(const struct lk_waiter *w, const void *arg)
{
	const struct same_wait *s = arg;

	return w->c == s->c && w->f == s->f &&
	       w->req.client == s->req->client &&
	       w->req.owner == s->req->owner && w->req.flock == s->req->flock;
}

/* Everybody waiting on f asks again. Keeps f (the caller tidies it). */
static void wake_file(struct lk_table *t, struct lk_file *f, struct wakes *wk)
{
	f->nwait++; /* not freed under us by waiters_remove */
	waiters_remove(t, on_file, f, wk);
	f->nwait--;
}

static void send_wakes(struct lk_table *t, struct wakes *wk)
{
	for (size_t i = 0; i < wk->n; i++) {
		if (wk->op[i] && conn_push_fid(wk->c[i], wk->op[i],
					       &wk->fid[i]))
			log_debug("peer %s: %s for vnode %" PRIu64 " not sent",
				  conn_peer(wk->c[i]),
				  wk->op[i] == OP_CB_LOCKWAKE ? "lock wake-up" :
				  "lock recall", wk->fid[i].vnode);
		conn_put(wk->c[i]);
	}
	free(wk->c);
	free(wk->fid);
	free(wk->op);
}

static void grace_check(struct lk_table *t, struct wakes *wk)
{
	if (t->in_grace && clock_mono_ms() >= t->grace_end_ms) {
		t->in_grace = 0;
		log_info("lock grace period over: new locks are granted");
		waiters_remove(t, anyone, NULL, wk);
	}
}

struct lk_client *lk_attach(struct lk_table *t, const uint8_t id[16])
{
	struct lk_client *cl;

	pthread_mutex_lock(&t->lock);
	for (cl = t->clients; cl; cl = cl->next)
		if (!memcmp(cl->id, id, 16))
			break;
	if (!cl && (cl = calloc(1, sizeof(*cl)))) {
		memcpy(cl->id, id, 16);
		cl->next = t->clients;
		t->clients = cl;
		t->st.clients++;
	}
	if (cl) {
		cl->conns++;
		cl->expire_ms = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return cl;
}

static void client_free(struct lk_table *t, struct lk_client *cl)
{
	for (struct lk_client **pp = &t->clients; *pp; pp = &(*pp)->next)
		if (*pp == cl) {
			*pp = cl->next;
			free(cl);
			t->st.clients--;
			return;
		}
}

void lk_detach(struct lk_table *t, struct lk_client *cl, struct conn *c)
{
	if (!cl)
		return;
	pthread_mutex_lock(&t->lock);
	waiters_remove(t, of_conn, c, NULL);
	if (--cl->conns == 0) {
		if (cl->nlocks || cl->ndeleg)
			cl->expire_ms = clock_mono_ms() + t->lease_ms;
		else
			client_free(t, cl);
	}
	pthread_mutex_unlock(&t->lock);
}

/*
 * Does the owner of `who` (client, owner id) wait, directly or through
 * other waiting owners, for a lock that req's owner holds? Then req
 * waiting for `who` would close a cycle.
 */
static int waits_for(struct lk_table *t, const struct lkent *who,
		     const struct lkent *req, int depth)
{
	if (depth > DEADLOCK_DEPTH)
		return 0;
	for (struct lk_waiter *w = t->waiters; w; w = w->next) {
		if (w->recall || w->req.flock || w->req.client != who->client ||
		    w->req.owner != who->owner)
			continue;
		for (const struct lkent *e = w->f->set.head; e; e = e->next) {
			if (e->flock || (e->client == who->client &&
					   e->owner == who->owner))
				continue;
			if (!(e->start <= w->req.end && w->req.start <= e->end) ||
			    (e->type != LK_WR && w->req.type != LK_WR))
				continue;
			if ((e->client == req->client &&
			     e->owner == req->owner) ||
			    waits_for(t, e, req, depth + 1))
				return 1;
		}
	}
	return 0;
}

/* Register c as waiting for req on f (replacing its earlier wait). */
static int wait_add(struct lk_table *t, struct conn *c, struct lk_file *f,
		    const struct lkent *req)
{
	struct same_wait sw = { c, f, req };
	struct lk_waiter *w;

	waiters_remove(t, same_wait, &sw, NULL);
	if (!(w = malloc(sizeof(*w))))
		return -ENOMEM;
	w->f = f;
	w->c = c;
	w->req = *req;
	w->recall = 0;
	w->next = t->waiters;
	t->waiters = w;
	f->nwait++;
	t->st.waiters++;
	return 0;
}

/* Apply req to f's set, keeping the counts; wakes f's waiters when
 * something was freed. */
static int apply(struct lk_table *t, struct lk_client *cl, struct lk_file *f,
		 const struct lkent *req, struct wakes *wk)
{
	size_t n0 = f->set.n;
	int freed = 0, rc = lkset_apply(&f->set, req, &freed);

	if (rc)
		return rc;
	cl->nlocks += f->set.n - n0; /* unsigned wrap adds a negative */
	t->st.locks += f->set.n - n0;
	if (freed)
		wake_file(t, f, wk);
	return 0;
}

/* --- delegations ----------------------------------------------------------- */

/* Note who asks about f's locks (t->lock held). */
static void note_asker(struct lk_file *f, const struct lk_client *cl)
{
	if (f->last && f->last != cl)
		f->mixed_ms = clock_mono_ms();
	f->last = cl;
}

/* May f's locks be delegated to cl, which was just granted one? Not in
 * the grace, not while anyone waits, not when another client holds one
 * or asked lately (t->lock held). */
static int deleg_ok(struct lk_table *t, const struct lk_file *f,
		    const struct lk_client *cl)
{
	if (t->in_grace || f->deleg || f->nwait ||
	    (f->mixed_ms && clock_mono_ms() - f->mixed_ms < LK_DELEG_QUIET_MS))
		return 0;
	for (const struct lkent *e = f->set.head; e; e = e->next)
		if (e->client != cl)
			return 0;
	return 1;
}

static void deleg_start(struct lk_table *t, struct lk_file *f,
			struct lk_client *cl, struct conn *c)
{
	f->deleg = cl;
	f->dconn = c;
	conn_get(c);
	f->recall_ms = 0;
	cl->ndeleg++;
	t->st.delegs++;
	t->st.delegs_granted++;
}

/* f's delegation ends: its waiters ask again (t->lock held; the
 * connection reference is dropped with wk). */
static void deleg_end(struct lk_table *t, struct lk_file *f, struct wakes *wk)
{
	if (!f->deleg)
		return;
	f->deleg->ndeleg--;
	t->st.delegs--;
	f->deleg = NULL;
	f->recall_ms = 0;
	push_add(wk, f->dconn, &f->fid, 0, 0);
	f->dconn = NULL;
	wake_file(t, f, wk);
}

/* f is delegated to another client than req's: recall it (once) and let
 * c wait for its return. -EINPROGRESS, or -ENOMEM (t->lock held). */
static int deleg_busy(struct lk_table *t, struct conn *c, struct lk_file *f,
		      const struct lkent *req, struct wakes *wk)
{
	if (!f->recall_ms) {
		f->recall_ms = clock_mono_ms() | 1;
		t->st.recalls++;
		push_add(wk, f->dconn, &f->fid, OP_CB_LKRECALL, 1);
	}
	if (wait_add(t, c, f, req))
		return -ENOMEM;
	t->waiters->recall = 1; /* wait_add put it first */
	return -EINPROGRESS;
}

/* Does e conflict with a lock of f held by another client than cl? */
static int others_conflict(const struct lk_file *f, const struct lk_client *cl,
			   const struct lkent *e)
{
	for (const struct lkent *x = f->set.head; x; x = x->next)
		if (x->client != cl && x->flock == e->flock &&
		    x->start <= e->end && e->start <= x->end &&
		    (x->type == LK_WR || e->type == LK_WR))
			return 1;
	return 0;
}

int lk_return(struct lk_table *t, struct lk_client *cl,
	      const struct cairn_fid *fid, struct lkent *ents, size_t n)
{
	struct wakes wk = { 0 };
	struct lk_file *f;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	grace_check(t, &wk);
	if (!(f = file_find(t, fid, n > 0)))
		goto out; /* nothing held, nothing delegated */
	if (f->deleg != cl) {
		/* Revoked, or a server restarted since: the locks come
		 * back only if nobody else took theirs meanwhile. */
		for (size_t i = 0; i < n; i++)
			if (others_conflict(f, cl, &ents[i])) {
				rc = -ENOLCK;
				goto out;
			}
	}
	size_t k = lkset_drop_client(&f->set, cl);

	cl->nlocks -= k;
	t->st.locks -= k;
	for (size_t i = 0; i < n && !rc; i++) {
		ents[i].client = cl;
		if (cl->nlocks >= LK_MAX_PER_CLIENT)
			rc = -ENOLCK;
		else
			rc = apply(t, cl, f, &ents[i], &wk);
	}
	if (f->deleg == cl) {
		t->st.deleg_returned++;
		deleg_end(t, f, &wk);
	} else {
		wake_file(t, f, &wk);
	}
out:
	if (f)
		file_tidy(t, f);
	pthread_mutex_unlock(&t->lock);
	send_wakes(t, &wk);
	if (!rc && n)
		mark(t);
	return rc;
}

/* --- requests ---------------------------------------------------------------- */

int lk_lock(struct lk_table *t, struct conn *c, struct lk_client *cl,
	    const struct cairn_fid *fid, struct lkent *req, uint32_t flags,
	    int *deleg)
{
	struct wakes wk = { 0 };
	struct lk_file *f;
	const struct lkent *e = NULL;
	int rc = 0;

	req->client = cl;
	if (deleg)
		*deleg = 0;
	pthread_mutex_lock(&t->lock);
	grace_check(t, &wk);
	f = file_find(t, fid, !(flags & LK_CANCEL) && req->type != LK_UN);
	if (f && !(flags & LK_CANCEL))
		note_asker(f, cl);
	if (f && f->deleg && f->deleg != cl && req->type != LK_UN &&
	    !(flags & (LK_CANCEL | LK_RECLAIM))) {
		/* Another client grants the file's locks itself: it gives
		 * them back first. A client that knows no delegations
		 * waits as for a conflict (with LK_WAIT it is woken). */
		t->st.conflicts++;
		rc = deleg_busy(t, c, f, req, &wk);
		if (rc == -EINPROGRESS && !(flags & LK_DELEG))
			rc = -EAGAIN;
		goto out;
	}
	if (flags & LK_CANCEL || req->type == LK_UN) {
		if (f && flags & LK_CANCEL) {
			struct same_wait sw = { c, f, req };

			waiters_remove(t, same_wait, &sw, NULL);
		} else if (f) {
			rc = apply(t, cl, f, req, &wk);
		}
		goto out;
	}
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	if (flags & LK_RECLAIM) {
		if (lkset_covers(&f->set, req))
			rc = 0; /* still held: reconnected within the lease */
		else if (!t->in_grace || lkset_conflict(&f->set, req))
			rc = -ENOLCK;
		else
			rc = apply(t, cl, f, req, &wk);
		if (!rc)
			t->st.reclaims++;
		goto out;
	}
	/* During the grace only reclaims take locks; a request that takes
	 * nothing new (SQLite's downgrade of its write lock at the end of a
	 * transaction) is not a new lock. */
	if ((t->in_grace && !lkset_holds(&f->set, req)) ||
	    (e = lkset_conflict(&f->set, req))) {
		t->st.conflicts++;
		rc = -EAGAIN;
		if (!(flags & LK_WAIT))
			goto out;
		if (e && !req->flock && waits_for(t, e, req, 0)) {
			t->st.deadlocks++;
			rc = -EDEADLK;
		} else if (wait_add(t, c, f, req)) {
			rc = -ENOMEM;
		}
		goto out;
	}
	if (cl->nlocks >= LK_MAX_PER_CLIENT) {
		rc = -ENOLCK;
		goto out;
	}
	if (!(rc = apply(t, cl, f, req, &wk))) {
		struct same_wait sw = { c, f, req };

		t->st.granted++;
		waiters_remove(t, same_wait, &sw, NULL);
		if ((flags & LK_DELEG) && deleg && deleg_ok(t, f, cl))
			deleg_start(t, f, cl, c);
		if (deleg)
			*deleg = f->deleg == cl;
	}
out:
	if (f)
		file_tidy(t, f);
	pthread_mutex_unlock(&t->lock);
	send_wakes(t, &wk);
	if (!rc && req->type != LK_UN && !(flags & LK_CANCEL))
		mark(t);
	return rc;
}

int lk_test(struct lk_table *t, struct conn *c, struct lk_client *cl,
	    const struct cairn_fid *fid, const struct lkent *req,
	    uint32_t flags, struct lkent *out)
{
	struct wakes wk = { 0 };
	struct lkent q = *req;
	const struct lkent *e = NULL;
	struct lk_file *f;

	q.client = cl;
	pthread_mutex_lock(&t->lock);
	if ((f = file_find(t, fid, 0)))
		note_asker(f, cl);
	if (f && f->deleg && f->deleg != cl) {
		int rc = deleg_busy(t, c, f, &q, &wk);

		if (rc != -EINPROGRESS || (flags & LK_DELEG)) {
			pthread_mutex_unlock(&t->lock);
			send_wakes(t, &wk);
			return rc;
		}
		/* A client that knows no delegations: the holder may
		 * hold anything. */
		memset(out, 0, sizeof(*out));
		out->type = LK_WR;
		out->end = LK_EOF;
		pthread_mutex_unlock(&t->lock);
		send_wakes(t, &wk);
		return 1;
	}
	if (f)
		e = lkset_conflict(&f->set, &q);
	if (e) {
		*out = *e;
		out->next = NULL;
		if (e->client != cl)
			out->pid = 0;
	} else {
		memset(out, 0, sizeof(*out));
		out->type = LK_UN;
	}
	if (f)
		file_tidy(t, f);
	pthread_mutex_unlock(&t->lock);
	return e != NULL;
}

void lk_expire(struct lk_table *t)
{
	struct wakes wk = { 0 };
	int64_t now = clock_mono_ms();

	pthread_mutex_lock(&t->lock);
	grace_check(t, &wk);
	/* Delegations recalled a lease ago and not returned are revoked,
	 * with the holder's locks of the file (it learns at its return);
	 * files kept only for their history go. */
	for (size_t i = 0; i < NBUCKETS; i++)
		for (struct lk_file *f = t->buckets[i], *nf; f; f = nf) {
			nf = f->hnext;
			if (f->deleg && f->recall_ms &&
			    now - f->recall_ms >= (int64_t)t->lease_ms) {
				size_t k = lkset_drop_client(&f->set,
							     f->deleg);

				log_warn("lock delegation of vnode %" PRIu64
					 " not returned %u ms after its recall: "
					 "revoked, %zu lock%s of its holder "
					 "dropped", f->fid.vnode, t->lease_ms,
					 k, k == 1 ? "" : "s");
				f->deleg->nlocks -= k;
				t->st.locks -= k;
				t->st.expired += k;
				t->st.deleg_revoked++;
				deleg_end(t, f, &wk);
			}
			file_tidy(t, f);
		}
	for (struct lk_client **pp = &t->clients, *cl; (cl = *pp);) {
		if (cl->conns || !cl->expire_ms || cl->expire_ms > now) {
			pp = &cl->next;
			continue;
		}
		size_t n = 0;

		for (size_t i = 0; i < NBUCKETS; i++)
			for (struct lk_file *f = t->buckets[i], *nf; f;
			     f = nf) {
				size_t k;

				nf = f->hnext;
				if (f->deleg == cl)
					deleg_end(t, f, &wk);
				if (f->last == cl)
					f->last = NULL;
				if ((k = lkset_drop_client(&f->set, cl))) {
					n += k;
					wake_file(t, f, &wk);
				}
				file_tidy(t, f);
			}
		log_warn("lock lease of a client with no connection ran out "
			 "(%u ms): %zu lock%s dropped", t->lease_ms, n,
			 n == 1 ? "" : "s");
		t->st.locks -= n;
		t->st.expired += n;
		*pp = cl->next;
		free(cl);
		t->st.clients--;
	}
	pthread_mutex_unlock(&t->lock);
	send_wakes(t, &wk);
}

unsigned lk_lease_ms(const struct lk_table *t)
{
	return t->lease_ms;
}

size_t lk_client_locks(struct lk_table *t, const struct lk_client *cl)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = cl->nlocks;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void lk_get_stats(struct lk_table *t, struct lk_stats *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	out->in_grace = t->in_grace && clock_mono_ms() < t->grace_end_ms;
	pthread_mutex_unlock(&t->lock);
}

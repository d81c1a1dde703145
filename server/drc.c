/*
 * drc.c - duplicate request cache. See drc.h.
 *
 * One mutex guards the whole table: the client list and every client's
 * entries. Per client, entries sit in a small hash by request id and on an
 * age list (oldest first), from which finished entries are dropped once
 * there are more than DRC_MAX_DONE. Lookups cost a hash chain walk; the
 * lock is held for a few pointer updates and one small copy.
 *
 * Entry states: in progress (done 0, no reply; duplicates may be parked
 * on it) -> done (drc_finish: done 1, a reply, no parked duplicates), or
 * unlinked and freed (drc_abort, or drc_finish out of memory). Only done
 * entries are counted (ndone, nentries) and dropped by trim; a client
 * handle with refs 0 has no entry in progress (a request in progress
 * belongs to a connection holding a ref), so expiry frees only done
 * entries. Debug builds check these (lib/debug.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/debug.h"
#include "drc.h"

#define DRC_BUCKETS 128  /* per client; ~2-3 entries per chain when full */

struct drc_entry {
	struct drc_entry *hnext;       /* hash chain */
	struct drc_entry *prev, *next; /* age list, oldest first */
	uint32_t id;
	uint16_t op;
	int done;
	struct drc_waiter *waiters;    /* duplicates parked while in progress */
	struct drc_reply *rep;         /* once done (never NULL then) */
};

struct drc_client {
	struct drc_client *next;       /* d->clients */
	struct drc *d;
	uint8_t id[16];
	int refs;                      /* connections holding it */
	time_t idle_since;             /* CLOCK_MONOTONIC s, when refs hit 0 */
	long ndone;
	struct drc_entry *oldest, *newest;
	struct drc_entry *hash[DRC_BUCKETS];
};

struct drc {
	pthread_mutex_t lock;
	struct drc_client *clients;
	long nclients, nentries;
	time_t last_expire;
	uint64_t hits;                 /* atomic */
	void (*park)(void *owner);     /* set once by drc_create */
};

static time_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* A leaf lock: taken holding none of the cache's (the park hook, which
 * runs under it, must not come back in). */
static void drc_lock(struct drc *d)
{
	LOCK_ASSERT_NOT_HELD(&d->lock);
	pthread_mutex_lock(&d->lock);
}

struct drc *drc_create(void (*park)(void *owner))
{
	struct drc *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->park = park;
	pthread_mutex_init(&d->lock, NULL);
	d->last_expire = now_s();
	return d;
}

static void entry_free(struct drc_entry *e)
{
	drc_reply_free(e->rep);
	free(e);
}

/* Unlink e from its client's hash and age list. Caller holds d->lock. */
static void entry_unlink(struct drc_client *dc, struct drc_entry *e)
{
	struct drc_entry **pp = &dc->hash[e->id % DRC_BUCKETS];

	LOCK_ASSERT_HELD(&dc->d->lock);
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		dc->oldest = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		dc->newest = e->prev;
	if (e->done) {
		CAIRN_ASSERT(dc->ndone > 0 && dc->d->nentries > 0);
		dc->ndone--;
		dc->d->nentries--;
	}
}

/* Caller holds d->lock. */
static void client_free(struct drc_client *dc)
{
	CAIRN_ASSERT(dc->refs == 0);
	while (dc->oldest) {
		struct drc_entry *e = dc->oldest;
		CAIRN_ASSERT(e->done && !e->waiters);
		entry_unlink(dc, e);
		entry_free(e);
	}
	free(dc);
}

void drc_destroy(struct drc *d)
{
	if (!d)
		return;
	drc_lock(d); /* no other user is left; the helpers expect it */
	while (d->clients) {
		struct drc_client *dc = d->clients;
		d->clients = dc->next;
		client_free(dc);
	}
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* Caller holds d->lock. A client with refs 0 has nothing in progress: an
 * entry in progress belongs to a request whose connection holds a ref. */
static void expire_locked(struct drc *d, time_t now)
{
	struct drc_client **pp = &d->clients;

	LOCK_ASSERT_HELD(&d->lock);
	d->last_expire = now;
	while (*pp) {
		struct drc_client *dc = *pp;
		if (dc->refs == 0 && now - dc->idle_since >= DRC_IDLE_S) {
			*pp = dc->next;
			d->nclients--;
			client_free(dc);
		} else {
			pp = &dc->next;
		}
	}
}

void drc_expire(struct drc *d)
{
	time_t now = now_s();

	drc_lock(d);
	if (now != d->last_expire)
		expire_locked(d, now);
	pthread_mutex_unlock(&d->lock);
}

struct drc_client *drc_client_get(struct drc *d, const uint8_t id[16])
{
	struct drc_client *dc, *fresh = calloc(1, sizeof(*fresh));

	drc_lock(d);
	expire_locked(d, now_s());
	for (dc = d->clients; dc; dc = dc->next)
		if (!memcmp(dc->id, id, 16))
			break;
	if (!dc && fresh) {
		dc = fresh;
		fresh = NULL;
		dc->d = d;
		memcpy(dc->id, id, 16);
		dc->next = d->clients;
		d->clients = dc;
		d->nclients++;
	}
	if (dc)
		dc->refs++;
	pthread_mutex_unlock(&d->lock);
	free(fresh);
	return dc;
}

void drc_client_put(struct drc_client *dc)
{
	struct drc *d;

	if (!dc)
		return;
	d = dc->d;
	drc_lock(d);
	CAIRN_ASSERT(dc->refs > 0);
	if (--dc->refs == 0)
		dc->idle_since = now_s();
	pthread_mutex_unlock(&d->lock);
}

static struct drc_entry *find(struct drc_client *dc, uint32_t id)
{
	struct drc_entry *e = dc->hash[id % DRC_BUCKETS];

	while (e && e->id != id)
		e = e->hnext;
	return e;
}

static struct drc_reply *reply_copy(const struct drc_reply *r)
{
	size_t fsz = (size_t)r->nfid * sizeof(r->fid[0]);
	struct drc_reply *c = malloc(sizeof(*c) + fsz + r->len);

	if (!c)
		return NULL;
	struct cairn_fid *fid = (struct cairn_fid *)(c + 1);
	uint8_t *frame = (uint8_t *)fid + fsz;
	if (fsz)
		memcpy(fid, r->fid, fsz);
	memcpy(frame, r->frame, r->len);
	*c = (struct drc_reply){ .frame = frame, .len = r->len, .fid = fid,
				 .nfid = r->nfid, .seq0 = r->seq0 };
	return c;
}

void drc_reply_free(struct drc_reply *r)
{
	free(r); /* one allocation (reply_copy) */
}

enum drc_verdict drc_begin(struct drc_client *dc, void *owner, uint32_t id,
			   uint16_t op, struct drc_entry **out,
			   struct drc_reply **rep)
{
	struct drc *d = dc->d;
	struct drc_entry *e, *fresh = calloc(1, sizeof(*fresh));
	enum drc_verdict v;

	*out = NULL;
	*rep = NULL;
	drc_lock(d);
	e = find(dc, id);
	if (e && e->op != op) {
		v = DRC_UNCACHED; /* the client broke its promise of unique ids */
	} else if (e && e->done) {
		CAIRN_ASSERT(e->rep && !e->waiters);
		*rep = e->rep ? reply_copy(e->rep) : NULL;
		v = *rep ? DRC_REPLAY : DRC_NOMEM;
		if (*rep)
			__atomic_add_fetch(&d->hits, 1, __ATOMIC_RELAXED);
	} else if (e) {
		struct drc_waiter *w = malloc(sizeof(*w));
		v = DRC_NOMEM;
		if (w) {
			/* Kept alive until the original ends. */
			if (d->park)
				d->park(owner);
			w->owner = owner;
			w->next = e->waiters;
			e->waiters = w;
			v = DRC_WAITING;
			__atomic_add_fetch(&d->hits, 1, __ATOMIC_RELAXED);
		}
	} else if (!fresh) {
		v = DRC_UNCACHED;
	} else {
		e = fresh;
		fresh = NULL;
		e->id = id;
		e->op = op;
		e->hnext = dc->hash[id % DRC_BUCKETS];
		dc->hash[id % DRC_BUCKETS] = e;
		e->prev = dc->newest;
		if (dc->newest)
			dc->newest->next = e;
		else
			dc->oldest = e;
		dc->newest = e;
		*out = e;
		v = DRC_RUN;
	}
	pthread_mutex_unlock(&d->lock);
	free(fresh);
	return v;
}

/* Drop the oldest finished entries past the bound. Caller holds d->lock. */
static void trim(struct drc_client *dc, struct drc_entry **dead)
{
	struct drc_entry *e = dc->oldest;

	LOCK_ASSERT_HELD(&dc->d->lock);
	while (dc->ndone > DRC_MAX_DONE && e) {
		struct drc_entry *n = e->next;
		if (e->done) {
			entry_unlink(dc, e);
			e->hnext = *dead;
			*dead = e;
		}
		e = n;
	}
	CAIRN_ASSERT(dc->ndone <= DRC_MAX_DONE);
}

struct drc_waiter *drc_finish(struct drc_client *dc, struct drc_entry *e,
			      const struct drc_reply *r)
{
	struct drc *d = dc->d;
	struct drc_reply *copy = reply_copy(r);
	struct drc_entry *dead = NULL;
	struct drc_waiter *w;

	drc_lock(d);
	CAIRN_ASSERT(!e->done); /* finished once */
	w = e->waiters;
	e->waiters = NULL;
	if (copy) {
		e->rep = copy;
		e->done = 1;
		dc->ndone++;
		d->nentries++;
		trim(dc, &dead);
	} else {
		/* Cannot remember it: forget it (a resend runs again). */
		entry_unlink(dc, e);
		e->hnext = dead;
		dead = e;
	}
	pthread_mutex_unlock(&d->lock);
	while (dead) {
		struct drc_entry *n = dead->hnext;
		entry_free(dead);
		dead = n;
	}
	return w;
}

struct drc_waiter *drc_abort(struct drc_client *dc, struct drc_entry *e)
{
	struct drc *d = dc->d;
	struct drc_waiter *w;

	drc_lock(d);
	CAIRN_ASSERT(!e->done);
	w = e->waiters;
	e->waiters = NULL;
	entry_unlink(dc, e);
	pthread_mutex_unlock(&d->lock);
	entry_free(e);
	return w;
}

uint64_t drc_hits(struct drc *d)
{
	return __atomic_load_n(&d->hits, __ATOMIC_RELAXED);
}

void drc_counts(struct drc *d, long *clients, long *entries)
{
	drc_lock(d);
	*clients = d->nclients;
	*entries = d->nentries;
	pthread_mutex_unlock(&d->lock);
}

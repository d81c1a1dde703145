/*
 * orphan.c - orphans whose holder went away. See orphan.h.
 *
 * A client id's entry moves through two states:
 *   connected  nconn > 0: its orphans are never freed here;
 *   gone       nconn == 0 since gone_at: its orphans are freed by the
 *              first sweep at or after gone_at + grace, and the entry is
 *              forgotten by that sweep.
 * A client id without an entry is treated as gone since the table was
 * made (t->started): true for a holder that has not connected since the
 * server started, and for one whose entry a sweep forgot (it was gone
 * longer than the grace period, and started <= gone_at).
 *
 * A connection counts from its HELLO (orphan_client_up) until its reader
 * released it (orphan_client_down), after every request of it finished:
 * so no request of a holder runs while it is gone, and none can make an
 * orphan of a gone holder.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/debug.h"
#include "../lib/log.h"
#include "orphan.h"
#include "store.h"

struct holder {
	struct holder *next;
	uint8_t id[16];
	int nconn;         /* connections past HELLO */
	int64_t gone_at;   /* when nconn last dropped to 0 */
};

struct orphan_table {
	struct store *st;
	unsigned grace;
	int64_t started;
	pthread_mutex_t lock;
	struct holder *list;    /* lock */
	int64_t last_sweep;     /* lock */
	int64_t last_err_log;   /* lock: errors logged once a minute */
};

struct orphan_table *orphan_table_create(struct store *st, unsigned grace_s,
					 int64_t now)
{
	struct orphan_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->st = st;
	t->grace = grace_s;
	t->started = now;
	t->last_sweep = now;
	t->last_err_log = now - 60;
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void orphan_table_destroy(struct orphan_table *t)
{
	if (!t)
		return;
	while (t->list) {
		struct holder *h = t->list;

		t->list = h->next;
		free(h);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Caller holds t->lock. */
static struct holder **find(struct orphan_table *t, const uint8_t id[16])
{
	struct holder **p = &t->list;

	LOCK_ASSERT_HELD(&t->lock);
	while (*p && memcmp((*p)->id, id, 16))
		p = &(*p)->next;
	return p;
}

int orphan_client_up(struct orphan_table *t, const uint8_t id[16])
{
	struct holder *h = malloc(sizeof(*h)), **p;

	/* Allocated before locking; dropped if the id has an entry. */
	if (!h)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	p = find(t, id);
	if (*p) {
		(*p)->nconn++;
	} else {
		memcpy(h->id, id, 16);
		h->nconn = 1;
		h->gone_at = 0;
		h->next = t->list;
		t->list = h;
		h = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	free(h);
	return 0;
}

void orphan_client_down(struct orphan_table *t, const uint8_t id[16],
			int64_t now)
{
	struct holder **p;

	pthread_mutex_lock(&t->lock);
	p = find(t, id);
	/* orphan_client_up made it, and only a sweep removes it, never
	 * while a connection counts. */
	CAIRN_ASSERT(*p && (*p)->nconn > 0);
	if (*p && (*p)->nconn > 0 && --(*p)->nconn == 0)
		(*p)->gone_at = now;
	pthread_mutex_unlock(&t->lock);
}

/* Free what a gone holder holds. Caller holds t->lock. */
static uint64_t release(struct orphan_table *t, const uint8_t id[16],
			int64_t since, int64_t now)
{
	uint64_t freed = 0;
	int rc;

	LOCK_ASSERT_HELD(&t->lock);
	rc = store_orphan_release(t->st, id, ORPHAN_SWEEP_MAX, &freed);
	if (freed)
		log_info("orphans: released %" PRIu64 " of client "
			 "%02x%02x%02x%02x%02x%02x%02x%02x, without a "
			 "connection for %" PRId64 " s (grace %u s)", freed,
			 id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7],
			 now - since, t->grace);
	if (rc && now - t->last_err_log >= 60) {
		t->last_err_log = now;
		log_warn("orphans: cannot free those of client "
			 "%02x%02x%02x%02x%02x%02x%02x%02x: %s", id[0], id[1],
			 id[2], id[3], id[4], id[5], id[6], id[7],
			 strerror(-rc));
	}
	return freed;
}

uint64_t orphan_sweep(struct orphan_table *t, int64_t now)
{
	struct store_holder *hs = NULL;
	struct holder **p, *h;
	uint64_t freed = 0;
	size_t n = 0;
	int rc;

	pthread_mutex_lock(&t->lock);
	if (now == t->last_sweep) {
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	t->last_sweep = now;
	rc = store_orphan_holders(t->st, &hs, &n);
	if (rc && now - t->last_err_log >= 60) {
		t->last_err_log = now;
		log_warn("orphans: cannot list their holders: %s",
			 strerror(-rc));
	}
	for (size_t i = 0; i < n; i++) {
		int64_t since = t->started;

		h = *find(t, hs[i].id);
		if (h && h->nconn)
			continue;
		if (h)
			since = h->gone_at;
		if (now - since >= (int64_t)t->grace)
			freed += release(t, hs[i].id, since, now);
	}
	/* Gone longer than the grace period: treated as gone since start
	 * from now on, which frees whatever such a holder still holds at the
	 * next sweep just the same. */
	for (p = &t->list; (h = *p);) {
		if (h->nconn == 0 && now - h->gone_at >= (int64_t)t->grace) {
			*p = h->next;
			free(h);
		} else {
			p = &h->next;
		}
	}
	pthread_mutex_unlock(&t->lock);
	free(hs);
	return freed;
}

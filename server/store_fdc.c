/*
 * store_fdc.c - a bounded cache of open data file descriptors.
 *
 * READ and WRITE arrive in pieces of at most CAIRN_MAX_IO bytes; opening
 * and closing the data file around each one costs a path walk and two
 * system calls per request. The cache keeps up to fdc.cap descriptors
 * (O_RDWR) open, evicting the least recently used idle one.
 *
 * Entry states (all transitions under fdc.lock; open() and close() run
 * outside it):
 *   free   on the free list, not in the hash, fd -1;
 *   busy   in the hash, ref > 0, not on the LRU list;
 *   idle   in the hash, ref 0, on the LRU list (the only evictable state);
 *   dead   forgotten while busy: out of the hash, ref > 0; the last put
 *          closes fd and frees the entry.
 * Invariant: a vnode has at most one entry in the hash, and the hash
 * holds only descriptors of data files that were linked when the entry
 * was made and have not been forgotten since. Debug builds check the
 * states at each transition (lib/debug.h). A data file is created
 * (store_fdc_get with create) only under its vnode's vlock.
 *
 * Removing a data file is unlink, then store_fdc_forget. A descriptor
 * opened while a forget ran (fdc.gen moved between the lookup and the
 * insert) may be of a file just unlinked, so it is not cached; a
 * descriptor opened before the unlink is either cached already (and the
 * forget drops it) or inserted after the forget's gen bump (and refused).
 * Vnode numbers are never reused, so a forgotten vnode never comes back.
 *
 * A failed fsync also forgets the vnode (store_data.c): Linux reports a
 * writeback error once per open file and then clears it, so a later
 * fsync through the same descriptor would return 0 for lost data. The
 * object's sticky error state, not this cache, answers later syncs; the
 * forget only makes sure that descriptor is never used again. Here the
 * file stays linked and may be cached again on its next open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include "store_int.h"

struct fdc_ent {
	uint64_t vn;
	int fd;
	unsigned ref;
	int dead;
	struct fdc_ent *hnext;       /* hash chain, or the free list */
	struct fdc_ent *prev, *next; /* LRU list, idle entries only */
};

static unsigned fdc_hash(const struct fdc *c, uint64_t vn)
{
	return (unsigned)((vn * 0x9e3779b97f4a7c15ull) >> 40) &
	       (c->nbucket - 1);
}

static struct fdc_ent *fdc_find(struct fdc *c, uint64_t vn)
{
	struct fdc_ent *e;

	for (e = c->bucket[fdc_hash(c, vn)]; e; e = e->hnext)
		if (e->vn == vn)
			return e;
	return NULL;
}

static void hash_add(struct fdc *c, struct fdc_ent *e)
{
	struct fdc_ent **b = &c->bucket[fdc_hash(c, e->vn)];

	e->hnext = *b;
	*b = e;
}

static void hash_del(struct fdc *c, struct fdc_ent *e)
{
	struct fdc_ent **p = &c->bucket[fdc_hash(c, e->vn)];

	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	e->hnext = NULL;
}

static void lru_del(struct fdc *c, struct fdc_ent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->lru_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->lru_tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct fdc *c, struct fdc_ent *e)
{
	e->prev = NULL;
	e->next = c->lru_head;
	if (c->lru_head)
		c->lru_head->prev = e;
	else
		c->lru_tail = e;
	c->lru_head = e;
}

/* Entry back on the free list; returns its descriptor to close. */
static int ent_free(struct fdc *c, struct fdc_ent *e)
{
	int fd = e->fd;

	CAIRN_ASSERT(e->ref == 0); /* from idle, dead, or a fresh array */
	e->fd = -1;
	e->dead = 0;
	e->hnext = c->free;
	c->free = e;
	return fd;
}

/* Take a reference on a hashed entry. */
static void ent_hold(struct fdc *c, struct fdc_ent *e, struct store_fh *fh)
{
	CAIRN_ASSERT(!e->dead && e->fd >= 0); /* hashed: busy or idle */
	if (e->ref++ == 0)
		lru_del(c, e);
	fh->fd = e->fd;
	fh->e = e;
}

int store_fdc_init(struct store *st)
{
	struct fdc *c = &st->fdc;
	struct rlimit rl;
	unsigned cap = STORE_FDC_MAX;

	/* Leave most descriptors to connections and LMDB. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < cap)
		cap = (unsigned)(rl.rlim_cur / 4);
	pthread_mutex_init(&c->lock, NULL);
	c->cap = cap;
	for (c->nbucket = 1; c->nbucket < 2 * cap; c->nbucket *= 2)
		;
	c->ents = calloc(cap ? cap : 1, sizeof(*c->ents));
	c->bucket = calloc(c->nbucket, sizeof(*c->bucket));
	if (!c->ents || !c->bucket)
		return -ENOMEM;
	for (unsigned i = cap; i-- > 0;)
		ent_free(c, &c->ents[i]);
	return 0;
}

/* Called when no operation runs any more: every entry is free or idle. */
void store_fdc_destroy(struct store *st)
{
	struct fdc *c = &st->fdc;

	if (c->ents)
		for (unsigned i = 0; i < c->cap; i++) {
			CAIRN_ASSERT(c->ents[i].ref == 0);
			if (c->ents[i].fd >= 0)
				store_os.close(c->ents[i].fd);
		}
	free(c->ents);
	free(c->bucket);
	c->ents = NULL;
	c->bucket = NULL;
	pthread_mutex_destroy(&c->lock);
}

int store_fdc_get(struct store *st, uint64_t vn, int create,
		  struct store_fh *fh)
{
	struct fdc *c = &st->fdc;
	struct fdc_ent *e;
	char path[48];
	uint64_t gen;
	int fd, spare = -1;

	if (create)
		LOCK_ASSERT_HELD(store_vlock(st, vn));
	pthread_mutex_lock(&c->lock);
	if ((e = fdc_find(c, vn))) {
		ent_hold(c, e, fh);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	gen = c->gen;
	pthread_mutex_unlock(&c->lock);

	/* Open before create, so a file that this call really created is
	 * known: its name needs a directory sync before data is durable. */
	store_data_path(vn, path, sizeof(path));
	fd = store_os.openat(st->dirfd, path, O_RDWR, 0);
	if (fd < 0 && errno == ENOENT && create) {
		fd = store_os.openat(st->dirfd, path, O_RDWR | O_CREAT, 0600);
		if (fd >= 0)
			store_data_created(st, vn);
	}
	if (fd < 0)
		return -errno;
	fh->fd = fd;
	fh->e = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->gen != gen)
		goto out; /* a forget ran meanwhile: do not cache */
	if ((e = fdc_find(c, vn))) {
		/* Another thread cached it first: use that one. */
		spare = fd;
		ent_hold(c, e, fh);
		goto out;
	}
	if ((e = c->free)) {
		c->free = e->hnext;
	} else if ((e = c->lru_tail)) {
		CAIRN_ASSERT(e->ref == 0 && !e->dead); /* idle */
		lru_del(c, e);
		hash_del(c, e);
		spare = e->fd;
	} else {
		goto out; /* every entry busy: an uncached descriptor */
	}
	e->vn = vn;
	e->fd = fd;
	e->ref = 1;
	e->dead = 0;
	hash_add(c, e);
	fh->e = e;
out:
	pthread_mutex_unlock(&c->lock);
	if (spare >= 0)
		store_os.close(spare);
	return 0;
}

int store_fdc_peek(struct store *st, uint64_t vn, struct store_fh *fh)
{
	struct fdc *c = &st->fdc;
	struct fdc_ent *e;

	pthread_mutex_lock(&c->lock);
	if ((e = fdc_find(c, vn)))
		ent_hold(c, e, fh);
	pthread_mutex_unlock(&c->lock);
	return e ? 0 : -ENOENT;
}

void store_fdc_put(struct store *st, struct store_fh *fh)
{
	struct fdc *c = &st->fdc;
	struct fdc_ent *e = fh->e;
	int fd = -1;

	if (fh->fd < 0)
		return;
	if (!e) {
		fd = fh->fd;
	} else {
		pthread_mutex_lock(&c->lock);
		CAIRN_ASSERT(e->ref > 0);
		if (--e->ref == 0) {
			if (e->dead)
				fd = ent_free(c, e);
			else
				lru_push(c, e);
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (fd >= 0)
		store_os.close(fd);
	fh->fd = -1;
	fh->e = NULL;
}

void store_fdc_forget(struct store *st, uint64_t vn)
{
	struct fdc *c = &st->fdc;
	struct fdc_ent *e;
	int fd = -1;

	pthread_mutex_lock(&c->lock);
	c->gen++;
	if ((e = fdc_find(c, vn))) {
		hash_del(c, e);
		if (e->ref == 0) {
			lru_del(c, e);
			fd = ent_free(c, e);
		} else {
			e->dead = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (fd >= 0)
		store_os.close(fd);
}

unsigned store_fdc_count(struct store *st)
{
	struct fdc *c = &st->fdc;
	unsigned n = 0;

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < c->cap; i++)
		n += c->ents[i].fd >= 0;
	pthread_mutex_unlock(&c->lock);
	return n;
}

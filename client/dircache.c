/*
 * dircache.c - directories cached whole (see dircache.h for the contract).
 *
 * Structures:
 *   dlist  one cached listing: the directory's ino, the data version it
 *          shows, the cookie of its next new entry, its entries as an
 *          array in cookie order (binary search for READDIR offsets), and
 *          its place on the LRU list;
 *   dent   one entry: cookie, name, status, stale bit; hashed by
 *          (directory, name) for LOOKUP and by the object's vnode, so a
 *          break or a reply about an object reaches every entry naming it
 *          (hard links) without a walk;
 *   dmark  a directory being fetched (whether a break of it or a change
 *          of ours to it came since: the listing read may be older than
 *          what we know; whether a change of ours to any object came
 *          since: the statuses read may be older), or one found too big
 *          to cache (until its next break).
 *
 * Invariants: every dent is in exactly one dlist's array, in the name
 * hash and in the vnode hash; a dlist's array is strictly increasing in
 * cookie and every cookie is below its next_cookie; one (directory, name)
 * has at most one dent; nents is the number of dents; a dlist is on the
 * LRU list exactly while it is in the directory hash. Debug builds check
 * these where listings change (dlist_check).
 *
 * Locking: `lock` guards everything; it is a leaf (see dircache.h).
 * Allocation happens before locking where the size is known (a fetched
 * listing is built outside the lock and only hashed under it); the
 * copies READDIR takes and the entries our own changes add are
 * allocated under it, their size being known only there.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "dircache.h"
#include "inode.h"
#include "../lib/clock.h"
#include "../lib/debug.h"

/* Listings are the directory's, not one kernel inode's: a directory the
 * kernel holds under two node ids (a later incarnation, inode.h) has one
 * listing, keyed by its vnode number. */
#define DKEY(ino) ((ino) & ITAB_VNODE_MASK)

struct dlist;

struct dent {
	struct dent *nnext;           /* name hash chain */
	struct dent *vnext, **vpprev; /* vnode hash chain */
	struct dlist *list;
	uint64_t cookie;
	struct cairn_attr attr;
	unsigned stale : 1;
	uint16_t len;
	char name[];                  /* len bytes + NUL */
};

struct dlist {
	struct dlist *hnext;          /* directory hash chain */
	struct dlist *lnext, *lprev;  /* LRU list, most recent first */
	uint64_t dir;
	uint64_t dv;
	uint64_t next_cookie;
	struct dent **ents;           /* by cookie */
	size_t n, cap;
	unsigned expanded : 1;        /* dcache_take_subdirs gave its
				       * subdirectories out */
	unsigned hits;                /* lookups answered from it */
};

/* A listing being fetched: the same, not yet hashed. */
struct dcache_listing {
	struct dlist l;
};

struct dmark {
	struct dmark *next;
	uint64_t dir;
	unsigned fetching : 1;
	unsigned broken : 1;          /* dir broken or changed by us since */
	unsigned spoiled : 1;         /* an object changed by us since */
	unsigned toobig : 1;
};

struct dcache {
	pthread_mutex_t lock;
	pthread_cond_t fetched;       /* a fetch ended (dcache_fetch_wait) */
	struct dlist **lists;         /* by directory */
	size_t nlb;
	struct dent **names;          /* by (directory, name) */
	struct dent **vnodes;         /* by object vnode */
	size_t neb;                   /* buckets of names and vnodes */
	struct dlist lru;             /* sentinel */
	struct dmark *marks;
	size_t nlists, nents;
	struct {
		uint64_t hits, neg_hits, installs, edits, drops;
	} st;
};

#define DC_LIST_BUCKETS 256u
#define DC_ENT_BUCKETS  4096u

static void dc_lock(struct dcache *dc)
{
	LOCK_ASSERT_NOT_HELD(&dc->lock);
	pthread_mutex_lock(&dc->lock);
}

static void dc_unlock(struct dcache *dc)
{
	LOCK_ASSERT_HELD(&dc->lock);
	pthread_mutex_unlock(&dc->lock);
}

static size_t hash_u64(uint64_t v)
{
	v *= 0x9e3779b97f4a7c15ull;
	return (size_t)(v >> 29);
}

static size_t hash_name(uint64_t dir, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ dir;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	return (size_t)(h ^ (h >> 31));
}

/* --- listings being built ------------------------------------------------- */

static struct dent *dent_new(uint64_t cookie, const char *name, size_t len,
			     const struct cairn_attr *a)
{
	struct dent *d = calloc(1, sizeof(*d) + len + 1);

	if (!d)
		return NULL;
	d->cookie = cookie;
	d->attr = *a;
	d->len = (uint16_t)len;
	memcpy(d->name, name, len);
	d->name[len] = '\0';
	return d;
}

/* Make room for one more entry in l's array. */
static int dlist_reserve(struct dlist *l)
{
	struct dent **e;
	size_t cap;

	if (l->n < l->cap)
		return 0;
	cap = l->cap ? l->cap * 2 : 16;
	e = realloc(l->ents, cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	l->ents = e;
	l->cap = cap;
	return 0;
}

int dcache_listing_new(struct dcache_listing **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

int dcache_listing_add(struct dcache_listing *bl, uint64_t cookie,
		       const char *name, size_t len, const struct cairn_attr *a)
{
	struct dlist *l = &bl->l;
	struct dent *d;

	if (len == 0 || len > CAIRN_NAME_MAX || cookie < CAIRN_COOKIE_FIRST ||
	    (l->n && cookie <= l->ents[l->n - 1]->cookie))
		return -EINVAL;
	if (l->n >= DCACHE_DIR_MAX)
		return -EFBIG;
	if (dlist_reserve(l))
		return -ENOMEM;
	if (!(d = dent_new(cookie, name, len, a)))
		return -ENOMEM;
	d->list = l;
	l->ents[l->n++] = d;
	return 0;
}

size_t dcache_listing_count(const struct dcache_listing *l)
{
	return l->l.n;
}

static void dlist_free_ents(struct dlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->ents[i]);
	free(l->ents);
	l->ents = NULL;
	l->n = l->cap = 0;
}

void dcache_listing_free(struct dcache_listing *l)
{
	if (!l)
		return;
	dlist_free_ents(&l->l);
	free(l);
}

/* --- the cache ------------------------------------------------------------ */

int dcache_create(struct dcache **out)
{
	struct dcache *dc = calloc(1, sizeof(*dc));

	if (!dc)
		return -ENOMEM;
	dc->lists = calloc(DC_LIST_BUCKETS, sizeof(*dc->lists));
	dc->names = calloc(DC_ENT_BUCKETS, sizeof(*dc->names));
	dc->vnodes = calloc(DC_ENT_BUCKETS, sizeof(*dc->vnodes));
	if (!dc->lists || !dc->names || !dc->vnodes) {
		free(dc->lists);
		free(dc->names);
		free(dc->vnodes);
		free(dc);
		return -ENOMEM;
	}
	dc->nlb = DC_LIST_BUCKETS;
	dc->neb = DC_ENT_BUCKETS;
	dc->lru.lnext = dc->lru.lprev = &dc->lru;
	pthread_mutex_init(&dc->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&dc->fetched, &ca);
	pthread_condattr_destroy(&ca);
	*out = dc;
	return 0;
}

static struct dlist **lbucket(struct dcache *dc, uint64_t dir)
{
	return &dc->lists[hash_u64(dir) & (dc->nlb - 1)];
}

static struct dent **nbucket(struct dcache *dc, uint64_t dir,
			     const char *name, size_t len)
{
	return &dc->names[hash_name(dir, name, len) & (dc->neb - 1)];
}

static struct dent **vbucket(struct dcache *dc, uint64_t vnode)
{
	return &dc->vnodes[hash_u64(vnode) & (dc->neb - 1)];
}

static struct dlist *find_list(struct dcache *dc, uint64_t dir)
{
	struct dlist *l;

	LOCK_ASSERT_HELD(&dc->lock);
	for (l = *lbucket(dc, dir); l && l->dir != dir; l = l->hnext)
		;
	return l;
}

static struct dent *find_name(struct dcache *dc, uint64_t dir,
			      const char *name, size_t len)
{
	struct dent *d;

	LOCK_ASSERT_HELD(&dc->lock);
	for (d = *nbucket(dc, dir, name, len); d; d = d->nnext)
		if (d->list->dir == dir && d->len == len &&
		    !memcmp(d->name, name, len))
			return d;
	return NULL;
}

/* The listing's own invariants (dircache.c's head), in debug builds. */
static void dlist_check(const struct dlist *l)
{
#ifdef CAIRN_DEBUG
	for (size_t i = 0; i < l->n; i++) {
		CAIRN_ASSERT(l->ents[i]->list == l);
		CAIRN_ASSERT(i == 0 || l->ents[i - 1]->cookie <
				       l->ents[i]->cookie);
		CAIRN_ASSERT(l->ents[i]->cookie < l->next_cookie);
	}
#else
	(void)l;
#endif
}

static void lru_unlink(struct dlist *l)
{
	l->lprev->lnext = l->lnext;
	l->lnext->lprev = l->lprev;
	l->lnext = l->lprev = NULL;
}

static void lru_push(struct dcache *dc, struct dlist *l)
{
	l->lnext = dc->lru.lnext;
	l->lprev = &dc->lru;
	dc->lru.lnext->lprev = l;
	dc->lru.lnext = l;
}

static void lru_touch(struct dcache *dc, struct dlist *l)
{
	lru_unlink(l);
	lru_push(dc, l);
}

/* Hash entry d (its list set) by name and vnode. */
static void dent_hash(struct dcache *dc, struct dent *d)
{
	struct dent **b = nbucket(dc, d->list->dir, d->name, d->len);

	d->nnext = *b;
	*b = d;
	b = vbucket(dc, d->attr.fid.vnode);
	d->vnext = *b;
	if (*b)
		(*b)->vpprev = &d->vnext;
	*b = d;
	d->vpprev = b;
	dc->nents++;
}

/* Take d out of both hashes (not out of its array). */
static void dent_unhash(struct dcache *dc, struct dent *d)
{
	struct dent **p = nbucket(dc, d->list->dir, d->name, d->len);

	while (*p != d) {
		CAIRN_ASSERT(*p); /* d is in the name hash */
		p = &(*p)->nnext;
	}
	*p = d->nnext;
	*d->vpprev = d->vnext;
	if (d->vnext)
		d->vnext->vpprev = d->vpprev;
	CAIRN_ASSERT(dc->nents > 0);
	dc->nents--;
}

/* Re-key d's vnode hash after its status names another object. */
static void dent_set_attr(struct dcache *dc, struct dent *d,
			  const struct cairn_attr *a, int stale)
{
	if (d->attr.fid.vnode != a->fid.vnode) {
		struct dent **b = vbucket(dc, a->fid.vnode);

		*d->vpprev = d->vnext;
		if (d->vnext)
			d->vnext->vpprev = d->vpprev;
		d->vnext = *b;
		if (*b)
			(*b)->vpprev = &d->vnext;
		*b = d;
		d->vpprev = b;
	}
	d->attr = *a;
	d->stale = stale ? 1 : 0;
}

static void list_drop(struct dcache *dc, struct dlist *l)
{
	struct dlist **p = lbucket(dc, l->dir);

	while (*p != l) {
		CAIRN_ASSERT(*p);
		p = &(*p)->hnext;
	}
	*p = l->hnext;
	lru_unlink(l);
	for (size_t i = 0; i < l->n; i++)
		dent_unhash(dc, l->ents[i]);
	dlist_free_ents(l);
	free(l);
	CAIRN_ASSERT(dc->nlists > 0);
	dc->nlists--;
	dc->st.drops++;
}

static void drop_dir(struct dcache *dc, uint64_t dir)
{
	struct dlist *l = find_list(dc, dir);

	if (l)
		list_drop(dc, l);
}

void dcache_destroy(struct dcache *dc)
{
	if (!dc)
		return;
	dc_lock(dc);
	while (dc->lru.lnext != &dc->lru)
		list_drop(dc, dc->lru.lnext);
	CAIRN_ASSERT(dc->nents == 0 && dc->nlists == 0);
	while (dc->marks) {
		struct dmark *m = dc->marks;

		dc->marks = m->next;
		free(m);
	}
	dc_unlock(dc);
	free(dc->lists);
	free(dc->names);
	free(dc->vnodes);
	pthread_mutex_destroy(&dc->lock);
	pthread_cond_destroy(&dc->fetched);
	free(dc);
}

/* Double both entry hashes when they get crowded; on allocation failure
 * keep the old ones (chains get longer). */
static void grow_ent_hashes(struct dcache *dc)
{
	size_t nb = dc->neb * 2;
	struct dent **names, **vnodes;

	if (dc->nents <= dc->neb * 2)
		return;
	names = calloc(nb, sizeof(*names));
	vnodes = calloc(nb, sizeof(*vnodes));
	if (!names || !vnodes) {
		free(names);
		free(vnodes);
		return;
	}
	for (size_t i = 0; i < dc->neb; i++) {
		for (struct dent *d = dc->names[i], *next; d; d = next) {
			struct dent **b = &names[hash_name(d->list->dir,
				d->name, d->len) & (nb - 1)];

			next = d->nnext;
			d->nnext = *b;
			*b = d;
		}
		for (struct dent *d = dc->vnodes[i], *next; d; d = next) {
			struct dent **b = &vnodes[hash_u64(d->attr.fid.vnode) &
						  (nb - 1)];

			next = d->vnext;
			d->vnext = *b;
			if (*b)
				(*b)->vpprev = &d->vnext;
			*b = d;
			d->vpprev = b;
		}
	}
	free(dc->names);
	free(dc->vnodes);
	dc->names = names;
	dc->vnodes = vnodes;
	dc->neb = nb;
}

static void grow_list_hash(struct dcache *dc)
{
	size_t nb = dc->nlb * 2;
	struct dlist **b;

	if (dc->nlists <= dc->nlb * 2 || !(b = calloc(nb, sizeof(*b))))
		return;
	for (size_t i = 0; i < dc->nlb; i++) {
		for (struct dlist *l = dc->lists[i], *next; l; l = next) {
			struct dlist **p = &b[hash_u64(l->dir) & (nb - 1)];

			next = l->hnext;
			l->hnext = *p;
			*p = l;
		}
	}
	free(dc->lists);
	dc->lists = b;
	dc->nlb = nb;
}

/* --- fetching ------------------------------------------------------------- */

static struct dmark *find_mark(struct dcache *dc, uint64_t dir,
			       struct dmark ***pp)
{
	struct dmark **p;

	for (p = &dc->marks; *p; p = &(*p)->next)
		if ((*p)->dir == dir)
			break;
	if (pp)
		*pp = p;
	return *p;
}

static int fetch_begin(struct dcache *dc, uint64_t dir, int absent)
{
	struct dmark *m = calloc(1, sizeof(*m)), *old;
	int rc = 0;

	if (!m)
		return -ENOMEM;
	dc_lock(dc);
	old = find_mark(dc, dir, NULL);
	if (old) {
		rc = -EBUSY;
	} else if (absent && find_list(dc, dir)) {
		rc = -EEXIST;
	} else {
		m->dir = dir;
		m->fetching = 1;
		m->next = dc->marks;
		dc->marks = m;
		m = NULL;
	}
	dc_unlock(dc);
	free(m);
	return rc;
}

int dcache_fetch_wait(struct dcache *dc, uint64_t dir, int timeout_ms)
{
	dir = DKEY(dir);
	struct timespec until;
	struct dmark *m;
	int rc;

	clock_deadline(CLOCK_MONOTONIC, timeout_ms, &until);
	dc_lock(dc);
	while ((m = find_mark(dc, dir, NULL)) && m->fetching &&
	       pthread_cond_timedwait(&dc->fetched, &dc->lock, &until) == 0)
		;
	m = find_mark(dc, dir, NULL);
	rc = m && m->fetching ? -ETIMEDOUT : find_list(dc, dir) ? 0 : -ENOENT;
	dc_unlock(dc);
	return rc;
}

int dcache_fetch_begin(struct dcache *dc, uint64_t dir)
{
	dir = DKEY(dir);
	return fetch_begin(dc, dir, 0);
}

int dcache_fetch_begin_absent(struct dcache *dc, uint64_t dir)
{
	dir = DKEY(dir);
	return fetch_begin(dc, dir, 1);
}

/* Install l (hashed under the lock) as dir's listing. */
static void install(struct dcache *dc, uint64_t dir, struct dcache_listing *bl,
		    uint64_t dv, uint64_t new_cookie, int fresh)
{
	struct dlist *l = (struct dlist *)bl; /* l is bl's first member */

	drop_dir(dc, dir);
	/* Room: whole listings go, least recently used first. */
	while (dc->nents + l->n > DCACHE_ENTS_MAX && dc->lru.lprev != &dc->lru)
		list_drop(dc, dc->lru.lprev);
	l->dir = dir;
	l->dv = dv;
	l->next_cookie = new_cookie;
	for (size_t i = 0; i < l->n; i++) {
		l->ents[i]->list = l;
		l->ents[i]->stale = !fresh;
		dent_hash(dc, l->ents[i]);
	}
	l->hnext = *lbucket(dc, dir);
	*lbucket(dc, dir) = l;
	lru_push(dc, l);
	dc->nlists++;
	dc->st.installs++;
	grow_ent_hashes(dc);
	grow_list_hash(dc);
	dlist_check(l);
}

/* A listing must have one entry per name and cookies below new_cookie. */
static int listing_ok(struct dcache *dc, struct dcache_listing *bl,
		      uint64_t new_cookie)
{
	struct dlist *l = &bl->l;
	size_t nb = 16;
	struct dent **seen;
	int ok = 1;

	if (l->n && l->ents[l->n - 1]->cookie >= new_cookie)
		return 0;
	while (nb < l->n * 2)
		nb *= 2;
	if (!(seen = calloc(nb, sizeof(*seen))))
		return 0;
	/* A private open hash (linear probing) of the names. */
	for (size_t i = 0; i < l->n && ok; i++) {
		struct dent *d = l->ents[i];
		size_t h = hash_name(0, d->name, d->len) & (nb - 1);

		for (; seen[h]; h = (h + 1) & (nb - 1)) {
			if (seen[h]->len == d->len &&
			    !memcmp(seen[h]->name, d->name, d->len)) {
				ok = 0;
				break;
			}
		}
		seen[h] = d;
	}
	free(seen);
	(void)dc;
	return ok;
}

int dcache_fetch_end(struct dcache *dc, uint64_t dir,
		     struct dcache_listing *l, uint64_t dv,
		     uint64_t new_cookie, int fresh, int toobig)
{
	dir = DKEY(dir);
	struct dmark *m, **pm;
	int ok = l && listing_ok(dc, l, new_cookie), broken = 1;

	dc_lock(dc);
	m = find_mark(dc, dir, &pm);
	CAIRN_ASSERT(m && m->fetching); /* begun by dcache_fetch_begin */
	if (m) {
		broken = m->broken;
		*pm = m->next;
	}
	if (m && toobig && !broken) {
		/* Not again until dir's next break. */
		m->fetching = 0;
		m->toobig = 1;
		m->next = dc->marks;
		dc->marks = m;
		m = NULL;
	}
	if (m && m->spoiled)
		fresh = 0;
	if (ok && !broken) {
		install(dc, dir, l, dv, new_cookie, fresh);
		l = NULL;
	}
	pthread_cond_broadcast(&dc->fetched);
	dc_unlock(dc);
	free(m);
	if (l || !ok || broken) {
		dcache_listing_free(l);
		return 0;
	}
	return 1;
}

/* --- answering ------------------------------------------------------------- */

int dcache_lookup(struct dcache *dc, uint64_t dir, const char *name,
		  size_t len, struct cairn_attr *a)
{
	dir = DKEY(dir);
	struct dlist *l;
	struct dent *d;
	int rc;

	dc_lock(dc);
	l = find_list(dc, dir);
	if (!l) {
		rc = -ENOENT;
	} else if (!(d = find_name(dc, dir, name, len))) {
		dc->st.neg_hits++;
		lru_touch(dc, l);
		rc = 0;
	} else {
		*a = d->attr;
		rc = d->stale ? -EAGAIN : 1;
		if (rc == 1)
			dc->st.hits++;
		lru_touch(dc, l);
	}
	if (l && l->hits < UINT_MAX)
		l->hits++;
	dc_unlock(dc);
	return rc;
}

size_t dcache_take_subdirs(struct dcache *dc, uint64_t dir,
			   unsigned min_hits, struct cairn_fid *out, size_t max)
{
	dir = DKEY(dir);
	struct dlist *l;
	size_t n = 0;

	dc_lock(dc);
	l = find_list(dc, dir);
	if (l && !l->expanded && l->hits >= min_hits) {
		l->expanded = 1;
		for (size_t i = 0; i < l->n && n < max; i++) {
			const struct dent *d = l->ents[i];

			if ((d->attr.mode & S_IFMT) == S_IFDIR && !d->stale &&
			    !find_list(dc, d->attr.fid.vnode))
				out[n++] = d->attr.fid;
		}
	}
	dc_unlock(dc);
	return n;
}

int dcache_cached(struct dcache *dc, uint64_t dir)
{
	dir = DKEY(dir);
	int rc;

	dc_lock(dc);
	rc = find_list(dc, dir) != NULL;
	dc_unlock(dc);
	return rc;
}

/* Index of the first entry of l with a cookie above `cookie`. */
static size_t first_after(const struct dlist *l, uint64_t cookie)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->ents[mid]->cookie <= cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int dcache_read(struct dcache *dc, uint64_t dir, uint64_t cookie, size_t max,
		struct dcache_ent **out, size_t *n, int *eof)
{
	dir = DKEY(dir);
	struct dlist *l;
	struct dcache_ent *e = NULL;
	size_t i0, cnt = 0, names = 0;
	char *p;
	int rc = 0;

	dc_lock(dc);
	l = find_list(dc, dir);
	if (!l) {
		rc = -ENOENT;
		goto out;
	}
	lru_touch(dc, l);
	i0 = first_after(l, cookie);
	cnt = l->n - i0 < max ? l->n - i0 : max;
	for (size_t i = 0; i < cnt; i++)
		names += l->ents[i0 + i]->len + 1u;
	/* Sized by what is there: allocated under the lock. */
	e = malloc(cnt * sizeof(*e) + names + 1);
	if (!e) {
		rc = -ENOMEM;
		goto out;
	}
	p = (char *)(e + cnt);
	for (size_t i = 0; i < cnt; i++) {
		const struct dent *d = l->ents[i0 + i];

		e[i].cookie = d->cookie;
		e[i].attr = d->attr;
		e[i].stale = d->stale;
		e[i].len = d->len;
		e[i].name = p;
		memcpy(p, d->name, d->len + 1u);
		p += d->len + 1u;
	}
	*eof = i0 + cnt == l->n;
out:
	dc_unlock(dc);
	*out = e;
	*n = rc ? 0 : cnt;
	return rc;
}

/* --- breaks and replies -------------------------------------------------------- */

/* Every entry naming vnode: stale, or (a not NULL) status a, promised. */
static void set_vnode(struct dcache *dc, uint64_t vnode,
		      const struct cairn_attr *a)
{
	for (struct dent *d = *vbucket(dc, vnode); d; d = d->vnext) {
		if (d->attr.fid.vnode != vnode)
			continue;
		if (a && d->attr.fid.uniq == a->fid.uniq &&
		    a->dv < d->attr.dv) {
			continue; /* an older reply than what we hold */
		} else if (a && d->attr.fid.uniq == a->fid.uniq) {
			d->attr = *a;
			d->stale = 0;
		} else {
			d->stale = 1;
		}
	}
}

/*
 * A change of ours came back: fetches in progress may have read the
 * server before it. Their statuses are not taken as promised (spoiled),
 * and a listing of dir (a directory we changed; 0: none) is not taken
 * at all.
 */
static void own_change(struct dcache *dc, uint64_t dir)
{
	LOCK_ASSERT_HELD(&dc->lock);
	for (struct dmark *m = dc->marks; m; m = m->next) {
		if (!m->fetching)
			continue;
		m->spoiled = 1;
		if (m->dir == dir)
			m->broken = 1;
	}
}

void dcache_break(struct dcache *dc, uint64_t vnode)
{
	struct dmark *m, **pm;

	dc_lock(dc);
	drop_dir(dc, vnode);
	set_vnode(dc, vnode, NULL);
	m = find_mark(dc, vnode, &pm);
	if (m && m->fetching) {
		m->broken = 1;
	} else if (m) {
		*pm = m->next;   /* too big no longer: it changed */
		free(m);
	}
	dc_unlock(dc);
}

void dcache_clear(struct dcache *dc)
{
	dcache_clear_except(dc, NULL, NULL);
}

void dcache_clear_except(struct dcache *dc,
			 int (*keep)(void *arg, uint64_t vnode), void *arg)
{
	struct dlist *l, *next;
	struct dmark **pm;

	dc_lock(dc);
	for (l = dc->lru.lnext; l != &dc->lru; l = next) {
		next = l->lnext;
		if (!keep || !keep(arg, l->dir)) {
			list_drop(dc, l);
			continue;
		}
		/* The names stand; the status of what they name only where
		 * that is kept too. */
		for (size_t i = 0; i < l->n; i++)
			if (l->ents[i] && !keep(arg, DKEY(l->ents[i]->attr.fid.vnode)))
				l->ents[i]->stale = 1;
	}
	for (pm = &dc->marks; *pm;) {
		struct dmark *m = *pm;

		if (m->fetching) {
			m->broken = 1;
			pm = &m->next;
		} else {
			*pm = m->next;
			free(m);
		}
	}
	dc_unlock(dc);
}

void dcache_follow(struct dcache *dc, const struct cairn_attr *a, int fresh)
{
	struct dlist *l;

	dc_lock(dc);
	set_vnode(dc, a->fid.vnode, fresh ? a : NULL);
	/* Another version of a directory: it changed, and we do not know
	 * how. (A reply that raced a break of something else says nothing
	 * against the listing; a break of the directory dropped it.) */
	l = find_list(dc, a->fid.vnode);
	if (l && l->dv != a->dv)
		list_drop(dc, l);
	dc_unlock(dc);
}

void dcache_stale(struct dcache *dc, uint64_t vnode)
{
	dc_lock(dc);
	set_vnode(dc, vnode, NULL);
	own_change(dc, 0);
	dc_unlock(dc);
}

void dcache_stale_name(struct dcache *dc, uint64_t dir, const char *name,
		       size_t len)
{
	dir = DKEY(dir);
	struct dent *d;

	dc_lock(dc);
	if ((d = find_name(dc, dir, name, len)))
		set_vnode(dc, d->attr.fid.vnode, NULL);
	dc_unlock(dc);
}

/* --- our own changes ----------------------------------------------------------- */

/*
 * dir's listing if our change, which left the directory at version dv,
 * is the only one since the listing was read; else drop it and return
 * NULL. No break is needed for that: a listing still here was not broken
 * since it was read (a break drops it), and versions grow by one per
 * change, so dv one above the listing's is our change and nothing else.
 * (Breaks of other objects, such as the one an unlink breaks on the
 * removed file, say nothing about the listing.)
 */
static struct dlist *edit_begin(struct dcache *dc, uint64_t dir, uint64_t dv)
{
	struct dlist *l = find_list(dc, dir);

	if (!l)
		return NULL;
	if (dv != l->dv + 1) {
		list_drop(dc, l);
		return NULL;
	}
	return l;
}

static void edit_end(struct dcache *dc, struct dlist *l, uint64_t dv)
{
	l->dv = dv;
	dc->st.edits++;
	dlist_check(l);
	grow_ent_hashes(dc);
}

static size_t index_of(const struct dlist *l, const struct dent *d)
{
	size_t i = first_after(l, d->cookie - 1);

	CAIRN_ASSERT(i < l->n && l->ents[i] == d);
	return i;
}

/* Remove d from its listing and free it. */
static void dent_remove(struct dcache *dc, struct dent *d)
{
	struct dlist *l = d->list;
	size_t i = index_of(l, d);

	dent_unhash(dc, d);
	memmove(&l->ents[i], &l->ents[i + 1],
		(l->n - i - 1) * sizeof(l->ents[0]));
	l->n--;
	free(d);
}

/* Append a new entry to l with its next new entry cookie. 0 or -ENOMEM. */
static int dent_append(struct dcache *dc, struct dlist *l, const char *name,
		       size_t len, const struct cairn_attr *a, int stale)
{
	struct dent *d;

	if (l->n >= DCACHE_DIR_MAX || dlist_reserve(l) ||
	    !(d = dent_new(l->next_cookie, name, len, a)))
		return -ENOMEM;
	d->list = l;
	d->stale = stale ? 1 : 0;
	l->ents[l->n++] = d;
	l->next_cookie++;
	dent_hash(dc, d);
	return 0;
}

void dcache_touched(struct dcache *dc, uint64_t dir,
		    const struct cairn_attr *dattr)
{
	dir = DKEY(dir);
	struct dlist *l;

	dc_lock(dc);
	own_change(dc, dir);
	if ((l = edit_begin(dc, dir, dattr->dv)))
		edit_end(dc, l, dattr->dv);
	dc_unlock(dc);
}

void dcache_added(struct dcache *dc, uint64_t dir, const char *name,
		  size_t len, const struct cairn_attr *child,
		  const struct cairn_attr *dattr, int fresh)
{
	dir = DKEY(dir);
	struct dlist *l;
	struct dent *d;

	dc_lock(dc);
	own_change(dc, dir);
	l = find_list(dc, dir);
	if (l && dattr->dv == l->dv) {
		/* A create that found the file: nothing changed, and the
		 * name must be listed already. */
		d = find_name(dc, dir, name, len);
		if (!d || d->attr.fid.vnode != child->fid.vnode)
			list_drop(dc, l);
		goto out;
	}
	if (!(l = edit_begin(dc, dir, dattr->dv)))
		goto out;
	if (find_name(dc, dir, name, len) ||
	    dent_append(dc, l, name, len, child, 1)) {
		list_drop(dc, l); /* listed already: not what we know */
		goto out;
	}
	/* A new link changed the object's nlink and ctime: every entry
	 * naming it takes the reply's status, promised if no break came
	 * since the request was sent (one on the new object would not have
	 * found its entry). */
	set_vnode(dc, child->fid.vnode, fresh ? child : NULL);
	edit_end(dc, l, dattr->dv);
out:
	dc_unlock(dc);
}

void dcache_removed(struct dcache *dc, uint64_t dir, const char *name,
		    size_t len, const struct cairn_attr *dattr, int fresh)
{
	dir = DKEY(dir);
	struct dlist *l;
	struct dent *d;
	uint64_t vnode;

	dc_lock(dc);
	own_change(dc, dir);
	if ((d = find_name(dc, dir, name, len)))
		set_vnode(dc, d->attr.fid.vnode, NULL); /* nlink, ctime */
	if (!(l = edit_begin(dc, dir, dattr->dv)))
		goto out;
	if (!(d = find_name(dc, dir, name, len))) {
		list_drop(dc, l);
		goto out;
	}
	vnode = d->attr.fid.vnode;
	dent_remove(dc, d);
	set_vnode(dc, vnode, NULL);
	edit_end(dc, l, dattr->dv);
out:
	dc_unlock(dc);
}

/* A rename within one listing l. Returns 0, or -1 when l must go. */
static int rename_in(struct dcache *dc, struct dlist *l, const char *sname,
		     size_t slen, const char *dname, size_t dlen, int exchange)
{
	struct dent *s = find_name(dc, l->dir, sname, slen);
	struct dent *t = find_name(dc, l->dir, dname, dlen);
	struct cairn_attr sa;

	if (!s || s == t || (exchange && !t))
		return -1;
	sa = s->attr;
	if (exchange) {
		struct cairn_attr ta = t->attr;

		dent_set_attr(dc, s, &ta, 1);
		dent_set_attr(dc, t, &sa, 1);
		return 0;
	}
	if (t) {
		/* The destination keeps its cookie and now names s's object;
		 * the object it named lost a link. */
		set_vnode(dc, t->attr.fid.vnode, NULL);
		dent_set_attr(dc, t, &sa, 1);
		dent_remove(dc, s);
		return 0;
	}
	dent_remove(dc, s);
	return dent_append(dc, l, dname, dlen, &sa, 1) ? -1 : 0;
}

int dcache_renamed_here(struct dcache *dc, uint64_t dir, const char *sname,
			size_t slen, const char *dname, size_t dlen)
{
	dir = DKEY(dir);
	struct dlist *l;
	struct dent *s;
	struct cairn_attr sa;
	int stale, rc = -1;

	dc_lock(dc);
	own_change(dc, dir);
	if ((l = find_list(dc, dir))) {
		s = find_name(dc, dir, sname, slen);
		if (!s || find_name(dc, dir, dname, dlen)) {
			list_drop(dc, l);
		} else {
			sa = s->attr;
			stale = s->stale;
			dent_remove(dc, s);
			if (dent_append(dc, l, dname, dlen, &sa, stale)) {
				list_drop(dc, l);
			} else {
				edit_end(dc, l, l->dv);
				rc = 0;
			}
		}
	}
	dc_unlock(dc);
	return rc;
}

void dcache_renamed(struct dcache *dc, uint64_t sdir, const char *sname,
		    size_t slen, uint64_t ddir, const char *dname,
		    size_t dlen, int exchange, const struct cairn_attr *sattr,
		    const struct cairn_attr *dattr, int fresh)
{
	sdir = DKEY(sdir);
	ddir = DKEY(ddir);
	struct dlist *sl, *dl;
	struct dent *s, *t;

	dc_lock(dc);
	own_change(dc, sdir);
	own_change(dc, ddir);
	/* The objects' ctime changed (and a replaced one's nlink). */
	if ((s = find_name(dc, sdir, sname, slen)))
		set_vnode(dc, s->attr.fid.vnode, NULL);
	if ((t = find_name(dc, ddir, dname, dlen)))
		set_vnode(dc, t->attr.fid.vnode, NULL);
	if (sdir == ddir) {
		if ((sl = edit_begin(dc, sdir, sattr->dv))) {
			if (rename_in(dc, sl, sname, slen, dname, dlen,
				      exchange))
				list_drop(dc, sl);
			else
				edit_end(dc, sl, sattr->dv);
		}
		goto out;
	}
	sl = edit_begin(dc, sdir, sattr->dv);
	dl = edit_begin(dc, ddir, dattr->dv);
	s = sl ? find_name(dc, sdir, sname, slen) : NULL;
	t = dl ? find_name(dc, ddir, dname, dlen) : NULL;
	/* Moving an entry needs it from the source listing; an exchange
	 * needs both. Whatever cannot be edited goes. */
	if (sl && (!s || (exchange && !t))) {
		list_drop(dc, sl);
		sl = NULL;
	}
	if (dl && (!s || (exchange && !t))) {
		list_drop(dc, dl);
		dl = NULL;
	}
	if (exchange && sl && dl) {
		struct cairn_attr sa = s->attr, ta = t->attr;

		dent_set_attr(dc, s, &ta, 1);
		dent_set_attr(dc, t, &sa, 1);
	} else if (!exchange && dl) {
		struct cairn_attr sa = s->attr;

		if (t) {
			dent_set_attr(dc, t, &sa, 1);
		} else if (dent_append(dc, dl, dname, dlen, &sa, 1)) {
			list_drop(dc, dl);
			dl = NULL;
		}
	}
	if (!exchange && sl)
		dent_remove(dc, s);
	if (sl)
		edit_end(dc, sl, sattr->dv);
	if (dl)
		edit_end(dc, dl, dattr->dv);
out:
	dc_unlock(dc);
}

/* --- diagnostics ------------------------------------------------------------------ */

void dcache_get_stats(struct dcache *dc, struct dcache_stats *out)
{
	dc_lock(dc);
	out->listings = dc->nlists;
	out->entries = dc->nents;
	out->hits = dc->st.hits;
	out->neg_hits = dc->st.neg_hits;
	out->installs = dc->st.installs;
	out->edits = dc->st.edits;
	out->drops = dc->st.drops;
	dc_unlock(dc);
}

long dcache_count(struct dcache *dc, uint64_t dir)
{
	dir = DKEY(dir);
	struct dlist *l;
	long n;

	dc_lock(dc);
	l = find_list(dc, dir);
	n = l ? (long)l->n : -ENOENT;
	dc_unlock(dc);
	return n;
}

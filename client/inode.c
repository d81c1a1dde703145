/*
 * inode.c - the client's inode table (see inode.h for the contract).
 *
 * States of an inode:
 *
 *   absent --add_entry--> live (nlookup >= 1) --forget to 0--> freed
 *
 * A live inode is in the inode hash; the forget that brings nlookup to zero
 * unlinks and frees it at once. No pointer to an inode ever leaves this
 * file (callers get copies), so there are no other users to drain. The
 * root is created with the table and pinned (the kernel never forgets it).
 *
 * Entries: every (parent, name) the kernel was handed is an `iname` in the
 * entry hash, on its directory's `kids` list, and for a positive entry on
 * its owner inode's `names` list (a negative entry has owner NULL). One
 * (parent, name) is recorded at most once, mirroring the kernel's dcache:
 * handing out a name again replaces the old record.
 *
 * Why kids: the server covers a directory's entries with the promise on
 * the directory, and drops that promise on any break of it. So a break on
 * a directory uncovers every entry in it, and all of them are handed back
 * to the caller for invalidation.
 *
 * Callback state per inode:
 *   promise      set by replies that arrived with no break in between,
 *                cleared by breaks and reconnects;
 *   cache_valid  set when open (or create) filled the page cache at
 *                cache_dv after a fresh GETATTR; cleared with the promise;
 *   xabsent      bit mask of well-known xattrs known to be absent, valid
 *                with the promise;
 *   attr_valid   `attr` holds the object's current attributes: set by a
 *                reply that carried them with no break in between (and
 *                a data version not older than attr's, nor below
 *                attr_floor), cleared with the promise and when a change
 *                of ours came back without them (itab_attr_stale, which
 *                also raises attr_floor past the version it knew).
 *                GETATTR is answered from it.
 *
 * Invariants: cache_valid, xabsent and attr_valid imply promise; an inode owns at most
 * ITAB_NAMES_MAX names; a negative entry is always on its directory's kids;
 * t->nnegs is the sum of every inode's nnegs and t->nnames the number of
 * inames in the entry hash. Debug builds (lib/debug.h) check the first
 * three where inodes and entries change (inode_check, iname_insert,
 * iname_drop), the counters as they are decremented, and that both are 0
 * once itab_destroy has dropped every entry.
 *
 * Locking: everything is guarded by itab.lock. Every exported function
 * takes it itself, through table_lock, which asserts that the caller does
 * not hold it already: a visitor of itab_break/itab_break_all (run under
 * the lock) that called back into the table would deadlock. The helpers
 * that read or change the table assert that it is held. The calls a FUSE
 * request makes on its fast path are shaped so that it takes the lock and
 * searches once: open through itab_open_begin (FID, keep-cache decision
 * ), lookup through itab_fid_promise before its LOOKUP and
 * itab_add_entry (which reports the directory's promise) after it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include "inode.h"
#include "../lib/debug.h"

struct inode;

struct iname {
	struct iname *hnext;          /* entry hash chain */
	struct iname *next, **pprev;  /* owner's names (positive only) */
	struct iname *knext, **kpprev;/* directory's kids */
	struct inode *owner;          /* NULL for a negative entry */
	struct inode *dir;            /* parent inode while on its kids */
	uint64_t parent;
	uint16_t len;
	unsigned expired : 1;         /* a directory's name the kernel was
				       * told to expire, not drop (kept:
				       * the kernel's dentry still stands) */
	char name[];                  /* len bytes + NUL */
};

struct inode {
	struct inode *hnext;          /* inode hash chain */
	struct inode *vnext;          /* vnode hash chain (by fid.vnode) */
	uint64_t ino;
	struct cairn_fid fid;
	uint64_t nlookup;
	struct iname *names;          /* its own names, newest first */
	unsigned nnames;
	struct iname *kids;           /* entries in this directory */
	unsigned nnegs;               /* negative ones among kids */
	uint64_t dv;
	uint64_t cache_dv;
	uint32_t wgen;                /* opens for writing and truncates
				       * here, ever (itab_wopen) */
	struct cairn_attr attr;       /* current while attr_valid */
	uint64_t attr_floor;          /* attrs below this dv are old */
	unsigned promise : 1;
	unsigned cache_valid : 1;
	unsigned xabsent : 8;
	unsigned attr_valid : 1;
	unsigned pinned : 1;
	unsigned orphan : 1;          /* we removed a name of it with
				       * RM_KEEP/RN_KEEP (itab_set_orphan) */
	unsigned isreg : 1;           /* a regular file (S_ISREG) */
	unsigned isdir : 1;           /* a directory (S_ISDIR) */
	unsigned kstale : 1;          /* another client changed its data,
				       * size or times since the kernel
				       * loaded this incarnation */
	struct cairn_attr *gone;      /* itab_set_gone, else NULL */
	uint32_t wopen;               /* open for writing (itab_wopen) */
};

struct htab {
	void **b;
	size_t n;                     /* power of two */
};

struct itab {
	pthread_mutex_t lock;
	struct htab inodes;           /* by ino (the kernel's node id) */
	struct htab vnodes;           /* the same inodes, by fid.vnode */
	struct htab entries;
	size_t count;                 /* inodes */
	size_t nnames;                /* inames, positive and negative */
	size_t nnegs;
	int evict_files;              /* itab_set_evict_files */
};

#define ITAB_INITIAL_BUCKETS 1024u

static void table_lock(struct itab *t)
{
	LOCK_ASSERT_NOT_HELD(&t->lock);
	pthread_mutex_lock(&t->lock);
}

static void table_unlock(struct itab *t)
{
	LOCK_ASSERT_HELD(&t->lock);
	pthread_mutex_unlock(&t->lock);
}

/* The per-inode invariants of the file head, for an inode in the table
 * (lock held). */
static void inode_check(const struct inode *n)
{
	CAIRN_ASSERT(n->nlookup >= 1);
	CAIRN_ASSERT(n->promise ||
		     (!n->cache_valid && !n->xabsent && !n->attr_valid));
	CAIRN_ASSERT(n->nnames <= ITAB_NAMES_MAX);
}

static size_t hash_ino(uint64_t ino)
{
	ino *= 0x9e3779b97f4a7c15ull;
	return (size_t)(ino >> 29);
}

static size_t hash_entry(uint64_t parent, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ parent;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	return (size_t)(h ^ (h >> 31));
}

static int htab_init(struct htab *h)
{
	h->b = calloc(ITAB_INITIAL_BUCKETS, sizeof(*h->b));
	h->n = ITAB_INITIAL_BUCKETS;
	return h->b ? 0 : -ENOMEM;
}

static struct inode **ibucket(struct itab *t, uint64_t ino)
{
	return (struct inode **)&t->inodes.b[hash_ino(ino) & (t->inodes.n - 1)];
}

static struct iname **ebucket(struct itab *t, uint64_t parent,
			      const char *name, size_t len)
{
	size_t h = hash_entry(parent, name, len) & (t->entries.n - 1);

	return (struct iname **)&t->entries.b[h];
}

static struct inode *find(struct itab *t, uint64_t ino)
{
	struct inode *n;

	LOCK_ASSERT_HELD(&t->lock);
	n = *ibucket(t, ino);

	while (n && n->ino != ino)
		n = n->hnext;
	return n;
}

static struct inode **vbucket(struct itab *t, uint64_t vn)
{
	return (struct inode **)&t->vnodes.b[hash_ino(vn) & (t->vnodes.n - 1)];
}

/* The incarnation of vnode vn after n (n NULL: the first), in no order. */
static struct inode *next_inc(struct itab *t, uint64_t vn, struct inode *n)
{
	LOCK_ASSERT_HELD(&t->lock);
	n = n ? n->vnext : *vbucket(t, vn);
	while (n && n->fid.vnode != vn)
		n = n->vnext;
	return n;
}

#define FOR_INCS(t, vn, n) \
	for ((n) = next_inc((t), (vn), NULL); (n); (n) = next_inc((t), (vn), (n)))

/* The newest incarnation of vn (the highest generation), or NULL. */
static struct inode *newest_inc(struct itab *t, uint64_t vn)
{
	struct inode *n, *best = NULL;

	FOR_INCS(t, vn, n)
		if (!best || n->ino > best->ino)
			best = n;
	return best;
}

static int iname_eq(const struct iname *in, uint64_t parent, const char *name,
		    size_t len)
{
	return in->parent == parent && in->len == len &&
	       !memcmp(in->name, name, len);
}

static struct iname *find_entry(struct itab *t, uint64_t parent,
				const char *name, size_t len)
{
	struct iname *in;

	LOCK_ASSERT_HELD(&t->lock);
	in = *ebucket(t, parent, name, len);

	while (in && !iname_eq(in, parent, name, len))
		in = in->hnext;
	return in;
}

/* Moves every element of one old chain into bucket array b (nb buckets). */
typedef void (*rehash_fn)(void *chain, void **b, size_t nb);

/* Double a hash table; on allocation failure keep the old one (chains just
 * get longer). */
static void htab_grow(struct htab *h, rehash_fn rehash)
{
	size_t nb = h->n * 2;
	void **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < h->n; i++)
		rehash(h->b[i], b, nb);
	free(h->b);
	h->b = b;
	h->n = nb;
}

static void rehash_inodes(void *chain, void **b, size_t nb)
{
	for (struct inode *n = chain, *next; n; n = next) {
		size_t h = hash_ino(n->ino) & (nb - 1);

		next = n->hnext;
		n->hnext = b[h];
		b[h] = n;
	}
}

static void rehash_vnodes(void *chain, void **b, size_t nb)
{
	for (struct inode *n = chain, *next; n; n = next) {
		size_t h = hash_ino(n->fid.vnode) & (nb - 1);

		next = n->vnext;
		n->vnext = b[h];
		b[h] = n;
	}
}

/* Put a new inode in both hashes. */
static void inode_link(struct itab *t, struct inode *n)
{
	n->hnext = *ibucket(t, n->ino);
	*ibucket(t, n->ino) = n;
	n->vnext = *vbucket(t, n->fid.vnode);
	*vbucket(t, n->fid.vnode) = n;
	if (++t->count > t->inodes.n * 2) {
		htab_grow(&t->inodes, rehash_inodes);
		htab_grow(&t->vnodes, rehash_vnodes);
	}
}

/* Take n out of the vnode hash (the caller unlinks it from the other). */
static void vnode_unlink(struct itab *t, struct inode *n)
{
	struct inode **p = vbucket(t, n->fid.vnode);

	while (*p != n) {
		CAIRN_ASSERT(*p); /* n is in the vnode hash */
		p = &(*p)->vnext;
	}
	*p = n->vnext;
}

static void rehash_entries(void *chain, void **b, size_t nb)
{
	for (struct iname *in = chain, *next; in; in = next) {
		size_t h = hash_entry(in->parent, in->name, in->len) & (nb - 1);

		next = in->hnext;
		in->hnext = b[h];
		b[h] = in;
	}
}

static struct iname *iname_new(uint64_t parent, const char *name, size_t len)
{
	struct iname *in = calloc(1, sizeof(*in) + len + 1);

	if (!in)
		return NULL;
	in->parent = parent;
	in->len = (uint16_t)len;
	memcpy(in->name, name, len);
	in->name[len] = '\0';
	return in;
}

static void names_push(struct inode *owner, struct iname *in)
{
	in->owner = owner;
	in->next = owner->names;
	if (owner->names)
		owner->names->pprev = &in->next;
	owner->names = in;
	in->pprev = &owner->names;
	owner->nnames++;
}

static void names_unlink(struct iname *in)
{
	*in->pprev = in->next;
	if (in->next)
		in->next->pprev = in->pprev;
	in->owner->nnames--;
	in->owner = NULL;
	in->next = NULL;
	in->pprev = NULL;
}

/*
 * Record a new entry (not yet in the table): hashed, on its owner's names
 * (owner NULL: negative) and on its directory's kids (dir may be NULL when
 * the parent is unknown, for positive entries only).
 */
static void iname_insert(struct itab *t, struct iname *in, struct inode *owner,
			 struct inode *dir)
{
	struct iname **b;

	/* Recorded at most once; a negative entry is on its directory. */
	CAIRN_ASSERT(!find_entry(t, in->parent, in->name, in->len));
	CAIRN_ASSERT(owner || dir);
	b = ebucket(t, in->parent, in->name, in->len);
	in->hnext = *b;
	*b = in;
	t->nnames++;
	if (owner)
		names_push(owner, in);
	in->dir = dir;
	if (dir) {
		in->knext = dir->kids;
		if (dir->kids)
			dir->kids->kpprev = &in->knext;
		dir->kids = in;
		in->kpprev = &dir->kids;
		if (!owner) {
			dir->nnegs++;
			t->nnegs++;
		}
	}
	if (t->nnames > t->entries.n * 2)
		htab_grow(&t->entries, rehash_entries);
}

/* Remove `in` from the hash and both lists, and free it. */
static void iname_drop(struct itab *t, struct iname *in)
{
	struct iname **p;

	LOCK_ASSERT_HELD(&t->lock);
	CAIRN_ASSERT(in->owner || in->dir);
	p = ebucket(t, in->parent, in->name, in->len);
	while (*p != in) {
		CAIRN_ASSERT(*p); /* in is in the entry hash */
		p = &(*p)->hnext;
	}
	*p = in->hnext;
	CAIRN_ASSERT(t->nnames > 0);
	t->nnames--;
	if (in->dir) {
		*in->kpprev = in->knext;
		if (in->knext)
			in->knext->kpprev = in->kpprev;
		if (!in->owner) {
			CAIRN_ASSERT(in->dir->nnegs > 0 && t->nnegs > 0);
			in->dir->nnegs--;
			t->nnegs--;
		}
	}
	if (in->owner)
		names_unlink(in);
	free(in);
}

/* Keep at most ITAB_NAMES_MAX names per inode: after a reconnect the
 * dropped (oldest) dentry is not invalidated by name, but the inode itself
 * still is. */
static void trim_names(struct itab *t, struct inode *n)
{
	while (n->nnames > ITAB_NAMES_MAX) {
		struct iname *last = n->names;

		while (last->next)
			last = last->next;
		iname_drop(t, last);
	}
}

static void clear_promise(struct inode *n)
{
	n->promise = 0;
	n->cache_valid = 0;
	n->xabsent = 0;
	n->attr_valid = 0;
}

/* Take the data version of a reply (see itab_update). */
static void apply_attr(struct inode *n, const struct cairn_attr *a, int promise)
{
	n->dv = a->dv;
	if (promise) {
		n->promise = 1;
		/* Replies may be handled out of order: never go back to an
		 * older version, nor below what a change of ours made. */
		if (a->dv >= n->attr_floor &&
		    (!n->attr_valid || a->dv >= n->attr.dv)) {
			n->attr = *a;
			n->attr_valid = 1;
		}
		if (n->cache_valid)
			n->cache_dv = a->dv;
	} else {
		clear_promise(n);
	}
}

/* Forget every entry recorded for n: its own names and, for a directory,
 * the entries in it. */
static void drop_entries(struct itab *t, struct inode *n)
{
	while (n->names)
		iname_drop(t, n->names);
	while (n->kids)
		iname_drop(t, n->kids);
}

static void inode_free(struct itab *t, struct inode *n)
{
	/* The kernel forgot the directory, so its dentries are gone. */
	drop_entries(t, n);
	free(n->gone);
	free(n);
}

int itab_create(const struct cairn_attr *root, struct itab **out)
{
	struct itab *t;
	struct inode *n;

	if (root->fid.vnode != ITAB_ROOT_INO)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	n = calloc(1, sizeof(*n));
	if (!t || !n || htab_init(&t->inodes) || htab_init(&t->vnodes) ||
	    htab_init(&t->entries)) {
		if (t) {
			free(t->inodes.b);
			free(t->vnodes.b);
			free(t->entries.b);
		}
		free(t);
		free(n);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	n->ino = ITAB_ROOT_INO;
	n->fid = root->fid;
	n->nlookup = 1;
	n->pinned = 1;
	n->dv = root->dv;
	n->promise = 1;
	n->attr = *root;
	n->attr_valid = 1;
	pthread_mutex_lock(&t->lock);
	inode_link(t, n);
	pthread_mutex_unlock(&t->lock);
	*out = t;
	return 0;
}

void itab_destroy(struct itab *t)
{
	size_t freed = 0;

	if (!t)
		return;
	/* Nobody else uses the table any more; the lock is for the
	 * helpers' checks. */
	table_lock(t);
	for (size_t i = 0; i < t->inodes.n; i++) {
		struct inode *n = t->inodes.b[i], *next;

		for (; n; n = next) {
			next = n->hnext;
			inode_free(t, n);
			freed++;
		}
	}
	/* Every entry was dropped through iname_drop, which decrements the
	 * counters: anything left means they were wrong. */
	CAIRN_ASSERT(freed == t->count);
	CAIRN_ASSERT(t->nnames == 0 && t->nnegs == 0);
	table_unlock(t);
	free(t->inodes.b);
	free(t->vnodes.b);
	free(t->entries.b);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Does the kernel maybe hold directory n under a name it must not meet
 * in a lookup in parent: one it was told to expire, or one in another
 * incarnation of parent (n's old dentry under the directory's old node
 * id, which a rename by another client moved)? */
static int stale_alias(const struct inode *n, uint64_t parent)
{
	for (const struct iname *in = n->names; in; in = in->next)
		if (in->expired ||
		    (in->parent != parent &&
		     (in->parent & ITAB_VNODE_MASK) ==
		     (parent & ITAB_VNODE_MASK)))
			return 1;
	return 0;
}

int itab_add_entry(struct itab *t, uint64_t parent, const char *name,
		   size_t len, const struct cairn_attr *a, int promise,
		   int *dir_promise, uint64_t *nodeid)
{
	uint64_t vn = a->fid.vnode, ino = vn;
	struct inode *n, *m, *fresh, *dir;
	struct iname *in, *old;

	if (vn == 0 || len == 0 || len > CAIRN_NAME_MAX)
		return -EINVAL;
	/* Allocate before locking; freed below if unused. */
	fresh = calloc(1, sizeof(*fresh));
	in = iname_new(parent, name, len);
	if (!fresh || !in) {
		free(fresh);
		free(in);
		return -ENOMEM;
	}
	table_lock(t);
	n = newest_inc(t, vn);
	old = find_entry(t, parent, name, len);
	/* A directory's entry the kernel has (or had) here: its inode. */
	if (old && old->owner && old->owner->isdir &&
	    old->owner->fid.vnode == vn)
		n = old->owner;
	/* The kernel's inode of it is out of date in what the kernel keeps
	 * itself, or it is a directory the kernel may still hold under a
	 * name it was told to expire (or under an older incarnation of this
	 * parent), and this is another name: hand out a new one, under a new
	 * node id. (The kernel keeps one dentry per directory inode and
	 * would move the old one here, which it cannot do inside a rename:
	 * ESTALE.) */
	if (n && (n->kstale || (n->isdir && !(old && old->owner == n) &&
				stale_alias(n, parent))) &&
	    vn <= ITAB_VNODE_MASK &&
	    (n->ino >> ITAB_GEN_SHIFT) < ITAB_GEN_MAX) {
		ino = n->ino + (1ull << ITAB_GEN_SHIFT);
		n = NULL;
	}
	if (!n) {
		n = fresh;
		fresh = NULL;
		n->ino = ino;
		n->fid = a->fid;
		n->isreg = S_ISREG(a->mode) != 0;
		n->isdir = S_ISDIR(a->mode) != 0;
		inode_link(t, n);
	} else if (n->fid.uniq != a->fid.uniq) {
		/* Vnode numbers are never reused, so this is a broken server;
		 * follow it rather than keep a FID that can only be ESTALE. */
		n->fid = a->fid;
		clear_promise(n);
	}
	n->nlookup++;
	/* Linked again (a name handed out): not a removed file. */
	free(n->gone);
	n->gone = NULL;
	/* The promise and attributes are the FID's: every incarnation's. */
	FOR_INCS(t, vn, m)
		if (m->fid.uniq == a->fid.uniq)
			apply_attr(m, a, promise);

	dir = find(t, parent);
	if (old && old->owner == n) {
		old->expired = 0; /* looked up again: current */
		free(in);
	} else {
		/* A negative entry, or a name that now means another inode. */
		if (old)
			iname_drop(t, old);
		iname_insert(t, in, n, dir);
	}
	trim_names(t, n);
	inode_check(n);
	if (dir_promise)
		*dir_promise = dir && dir->promise;
	*nodeid = n->ino;
	table_unlock(t);
	free(fresh);
	return 0;
}

int itab_forget(struct itab *t, uint64_t ino, uint64_t cnt,
		struct cairn_fid *orphan)
{
	struct inode **p;
	int rc = 0;

	table_lock(t);
	for (p = ibucket(t, ino); *p; p = &(*p)->hnext)
		if ((*p)->ino == ino)
			break;
	if (*p && !(*p)->pinned) {
		struct inode *n = *p;

		n->nlookup = cnt >= n->nlookup ? 0 : n->nlookup - cnt;
		if (n->nlookup == 0) {
			*p = n->hnext;
			vnode_unlink(t, n);
			t->count--;
			/* Every incarnation carries the mark: the last one
			 * to go reports it. */
			if (n->orphan && orphan &&
			    !next_inc(t, n->fid.vnode, NULL)) {
				*orphan = n->fid;
				rc = 1;
			}
			inode_free(t, n);
		}
	}
	table_unlock(t);
	return rc;
}

int itab_add_negative(struct itab *t, uint64_t parent, const char *name,
		      size_t len)
{
	struct iname *in, *old;
	struct inode *dir;
	int rc = 0;

	if (len == 0 || len > CAIRN_NAME_MAX)
		return -EINVAL;
	in = iname_new(parent, name, len);
	if (!in)
		return -ENOMEM;
	table_lock(t);
	dir = find(t, parent);
	if (!dir) {
		rc = -ESTALE;
		goto out;
	}
	dir->promise = 1;
	old = find_entry(t, parent, name, len);
	if (old && !old->owner)
		goto out; /* already recorded; `in` freed below */
	/* The kernel drops a positive dentry it is told is negative. */
	if (old)
		iname_drop(t, old);
	if (dir->nnegs >= ITAB_NEGS_DIR_MAX ||
	    t->nnegs >= ITAB_NEGS_TOTAL_MAX) {
		rc = -ENOSPC;
		goto out;
	}
	iname_insert(t, in, NULL, dir);
	in = NULL;
	CAIRN_ASSERT(dir->nnegs <= ITAB_NEGS_DIR_MAX &&
		     t->nnegs <= ITAB_NEGS_TOTAL_MAX);
out:
	table_unlock(t);
	free(in);
	return rc;
}

void itab_remove_entry(struct itab *t, uint64_t parent, const char *name,
		       size_t len)
{
	struct iname *in;

	table_lock(t);
	in = find_entry(t, parent, name, len);
	if (in)
		iname_drop(t, in);
	table_unlock(t);
}

/* Re-key positive entry `in` under (parent, name), which must not be
 * recorded. */
static void iname_rekey(struct itab *t, struct iname *in, uint64_t parent,
			const char *name, size_t len)
{
	struct iname *moved = iname_new(parent, name, len);
	struct inode *owner = in->owner;

	iname_drop(t, in);
	/* Allocation under the lock: a rename is rare enough, and if it
	 * fails the name is merely not recorded (the inode still is). */
	if (moved)
		iname_insert(t, moved, owner, find(t, parent));
}

void itab_rename(struct itab *t, uint64_t oldparent, const char *oldname,
		 size_t oldlen, uint64_t newparent, const char *newname,
		 size_t newlen, int exchange)
{
	struct iname *src, *dst;

	table_lock(t);
	src = find_entry(t, oldparent, oldname, oldlen);
	dst = find_entry(t, newparent, newname, newlen);
	if (exchange && src && dst && src->owner && dst->owner) {
		struct inode *a = src->owner, *b = dst->owner;

		names_unlink(src);
		names_unlink(dst);
		names_push(b, src);
		names_push(a, dst);
		inode_check(a);
		inode_check(b);
	} else if (exchange) {
		if (src)
			iname_drop(t, src);
		if (dst)
			iname_drop(t, dst);
	} else {
		if (dst)
			iname_drop(t, dst);
		if (src && src->owner)
			iname_rekey(t, src, newparent, newname, newlen);
		else if (src)
			iname_drop(t, src);
	}
	table_unlock(t);
}

/*
 * What the accessors below report about one inode, copied under the lock
 * so that each of them is one consistent look.
 */
struct isnap {
	struct itab_info info;
	uint64_t parent;      /* of the first recorded name; the root: itself */
	unsigned xabsent;
};

/* Copy ino's state into *s: 0, or -ESTALE when ino is not in the table. */
static int snap(struct itab *t, uint64_t ino, struct isnap *s)
{
	struct inode *n;

	table_lock(t);
	n = find(t, ino);
	if (n) {
		s->info.fid = n->fid;
		s->info.nlookup = n->nlookup;
		s->info.nnames = n->nnames;
		s->info.nnegs = n->nnegs;
		s->info.promise = n->promise;
		s->info.cache_valid = n->cache_valid;
		s->info.dv = n->dv;
		s->info.cache_dv = n->cache_dv;
		s->info.wgen = n->wgen;
		s->parent = n->names ? n->names->parent : ino;
		s->xabsent = n->xabsent;
	}
	table_unlock(t);
	return n ? 0 : -ESTALE;
}

int itab_fid(struct itab *t, uint64_t ino, struct cairn_fid *fid)
{
	struct isnap s;
	int rc = snap(t, ino, &s);

	if (!rc)
		*fid = s.info.fid;
	return rc;
}

int itab_fid_promise(struct itab *t, uint64_t ino, struct cairn_fid *fid,
		     int *promise)
{
	struct isnap s;
	int rc = snap(t, ino, &s);

	if (!rc) {
		*fid = s.info.fid;
		*promise = s.info.promise;
	}
	return rc;
}

int itab_parent(struct itab *t, uint64_t ino, uint64_t *parent)
{
	struct isnap s;
	int rc = snap(t, ino, &s);

	if (!rc)
		*parent = s.parent;
	return rc;
}

void itab_update(struct itab *t, const struct cairn_attr *a, int promise)
{
	struct inode *n;

	table_lock(t);
	FOR_INCS(t, a->fid.vnode, n)
		if (n->fid.uniq == a->fid.uniq) {
			apply_attr(n, a, promise);
			inode_check(n);
		}
	table_unlock(t);
}

int itab_open_begin(struct itab *t, uint64_t ino, int keep,
		    struct cairn_fid *fid)
{
	struct inode *n;
	int rc = -ESTALE;

	table_lock(t);
	n = find(t, ino);
	if (n) {
		inode_check(n);
		*fid = n->fid;
		rc = keep && n->promise && n->cache_valid &&
		     n->cache_dv == n->dv;
		/* The pages are of an unknown version (dropped, or never
		 * filled under this promise), but the attributes are
		 * current: no need to ask the server. The kernel drops its
		 * pages and refills them at this version. */
		if (!rc && keep && n->promise && n->attr_valid &&
		    n->attr.dv == n->dv) {
			n->cache_valid = 1;
			n->cache_dv = n->dv;
			rc = 2;
		}
	}
	table_unlock(t);
	return rc;
}

void itab_cache_stale(struct itab *t, uint64_t ino)
{
	struct inode *n;

	table_lock(t);
	if ((n = find(t, ino)))
		n->cache_valid = 0;
	table_unlock(t);
}

void itab_open_end(struct itab *t, uint64_t ino, const struct cairn_attr *a,
		   int promise)
{
	struct inode *n;

	table_lock(t);
	n = find(t, ino);
	if (n && a->fid.vnode == n->fid.vnode && n->fid.uniq == a->fid.uniq) {
		apply_attr(n, a, promise);
		/* The kernel drops its pages for this open (no keep_cache)
		 * and refills them at a->dv; a promise makes that last. */
		if (promise) {
			n->cache_valid = 1;
			n->cache_dv = a->dv;
		}
	}
	if (n)
		inode_check(n);
	table_unlock(t);
}

int itab_attr_last(struct itab *t, uint64_t ino, struct cairn_attr *a,
		   int *current)
{
	struct inode *n;
	int rc = -ESTALE;

	table_lock(t);
	n = find(t, ino);
	if (n) {
		inode_check(n);
		rc = n->attr.fid.vnode ? 0 : -EAGAIN;
		if (!rc)
			*a = n->attr;
		*current = !rc && n->attr_valid;
	}
	table_unlock(t);
	return rc;
}

int itab_getattr(struct itab *t, uint64_t ino, struct cairn_attr *a)
{
	struct cairn_attr last;
	int current = 0, rc = itab_attr_last(t, ino, &last, &current);

	if (rc == -ESTALE)
		return rc;
	if (!current)
		return -EAGAIN;
	*a = last;
	return 0;
}

void itab_attr_stale(struct itab *t, uint64_t ino)
{
	struct inode *n;
	uint64_t vn;

	table_lock(t);
	n = find(t, ino);
	vn = n ? n->fid.vnode : ino;
	FOR_INCS(t, vn, n) {
		/* The change made a new version (if it happened at all):
		 * a reply computed before it must not make them current. */
		n->attr_valid = 0;
		if (n->attr_floor < n->attr.dv + 1)
			n->attr_floor = n->attr.dv + 1;
	}
	table_unlock(t);
}

void itab_set_atime(struct itab *t, uint64_t ino, struct cairn_time when)
{
	struct inode *n;

	table_lock(t);
	n = find(t, ino);
	if (n && n->attr_valid)
		n->attr.atime = when;
	table_unlock(t);
}

unsigned itab_xattr_absent(struct itab *t, uint64_t ino, unsigned mask)
{
	struct isnap s;

	return !snap(t, ino, &s) && s.info.promise ? s.xabsent & mask : 0;
}

void itab_set_xattr_absent(struct itab *t, uint64_t ino, unsigned mask, int v)
{
	struct inode *n;

	table_lock(t);
	n = find(t, ino);
	if (n && v && n->promise)
		n->xabsent |= mask & 0xffu;
	else if (n && !v)
		n->xabsent &= ~mask & 0xffu;
	if (n)
		inode_check(n);
	table_unlock(t);
}

/* An entry the kernel is told to forget (lock held). A directory's name
 * is only expired there (notify.c): the kernel's dentry stays until its
 * next use looks it up again, so the name stays here too, marked. */
static void drop_or_expire(struct itab *t, struct iname *in)
{
	if (in->owner && in->owner->isdir)
		in->expired = 1;
	else
		iname_drop(t, in);
}

/* Visit and drop every entry in directory n (lock held). */
static void drop_kids(struct itab *t, struct inode *n, itab_visit_fn fn,
		      void *arg)
{
	struct iname *in = n->kids, *next;

	for (; in; in = next) {
		next = in->knext;
		if (fn)
			fn(arg, in->owner ? in->owner->ino : 0, in->parent,
			   in->name, in->len, in->owner && in->owner->isdir);
		drop_or_expire(t, in);
	}
}

/* The kernel is to forget every name of n (itab_set_evict_files). */
static void drop_names(struct itab *t, struct inode *n, itab_visit_fn fn,
		       void *arg)
{
	while (n->names) {
		struct iname *in = n->names;

		if (fn)
			fn(arg, n->ino, in->parent, in->name, in->len,
			   n->isdir);
		iname_drop(t, in);
	}
}

void itab_set_evict_files(struct itab *t, int on)
{
	table_lock(t);
	t->evict_files = on != 0;
	table_unlock(t);
}

int itab_break(struct itab *t, uint64_t vn, int attrs_only, itab_visit_fn fn,
	       void *arg)
{
	struct inode *n;
	int found = 0;

	table_lock(t);
	FOR_INCS(t, vn, n) {
		found = 1;
		clear_promise(n);
		drop_kids(t, n, fn, arg);
		/* The kernel keeps a file's size, mtime and ctime: let it
		 * drop the inode if it can; one it holds is out of date only
		 * when more than attributes changed (ctime alone stays). */
		if (t->evict_files && n->isreg && attrs_only) {
			/* Best effort (the caller may skip one whose
			 * directory our own request holds): kept here. */
			for (struct iname *in = n->names; in && fn;
			     in = in->next)
				fn(arg, n->ino, in->parent, in->name,
				   in->len, n->isdir);
		} else if (t->evict_files && n->isreg) {
			drop_names(t, n, fn, arg);
			n->kstale = 1;
		}
		/* The caller invalidates node id vn itself. */
		if (n->ino != vn && fn)
			fn(arg, n->ino, 0, NULL, 0, n->isdir);
		inode_check(n);
	}
	table_unlock(t);
	return found ? 0 : -ENOENT;
}

int itab_has_others(struct itab *t, uint64_t ino)
{
	uint64_t vn = ino & ITAB_VNODE_MASK;
	struct inode *n;
	int others = 0;

	table_lock(t);
	FOR_INCS(t, vn, n)
		if (n->ino != ino) {
			others = 1;
			break;
		}
	table_unlock(t);
	return others;
}

int itab_stale_others(struct itab *t, uint64_t ino, itab_visit_fn fn,
		      void *arg)
{
	uint64_t vn = ino & ITAB_VNODE_MASK;
	struct inode *n;
	int k = 0;

	table_lock(t);
	if (t->evict_files) {
		FOR_INCS(t, vn, n) {
			if (n->ino == ino || !n->isreg)
				continue;
			drop_names(t, n, fn, arg);
			n->kstale = 1;
			fn(arg, n->ino, 0, NULL, 0, n->isdir);
			inode_check(n);
			k++;
		}
	}
	table_unlock(t);
	return k;
}

void itab_set_promised(struct itab *t, uint64_t ino)
{
	struct inode *n;

	table_lock(t);
	n = find(t, ino);
	if (n)
		n->promise = 1;
	table_unlock(t);
}

void itab_break_all(struct itab *t, itab_visit_fn fn, void *arg)
{
	itab_break_all_except(t, NULL, NULL, fn, arg);
}

/* Whether inode ino is one keep() spares (lock held). */
static int kept(struct itab *t, uint64_t ino,
		int (*keep)(void *karg, const struct cairn_fid *fid),
		void *karg)
{
	struct inode *n;

	return keep && (n = find(t, ino)) && keep(karg, &n->fid);
}

void itab_break_all_except(struct itab *t,
			   int (*keep)(void *karg, const struct cairn_fid *fid),
			   void *karg, itab_visit_fn fn, void *arg)
{
	table_lock(t);
	for (size_t i = 0; i < t->inodes.n; i++) {
		for (struct inode *n = t->inodes.b[i]; n; n = n->hnext) {
			int kn = keep && keep(karg, &n->fid);

			if (!kn) {
				clear_promise(n);
				/* What changed meanwhile is unknown. */
				if (t->evict_files && n->isreg)
					n->kstale = 1;
				fn(arg, n->ino, 0, NULL, 0, n->isdir);
			}
			for (struct iname *in = n->names; in; in = in->next)
				if (!kept(t, in->parent, keep, karg))
					fn(arg, n->ino, in->parent, in->name,
					   in->len, n->isdir);
			for (struct iname *in = n->kids; in && !kn;
			     in = in->knext)
				if (!in->owner)
					fn(arg, 0, in->parent, in->name,
					   in->len, 0);
		}
	}
	/* Every dentry not kept is being invalidated (directories'
	 * expired): forget them. An entry is kept with its directory. */
	for (size_t i = 0; i < t->inodes.n; i++)
		for (struct inode *n = t->inodes.b[i]; n; n = n->hnext) {
			struct iname *in, *next;

			if (!keep || !keep(karg, &n->fid))
				for (in = n->kids; in; in = next) {
					next = in->knext;
					drop_or_expire(t, in);
				}
			for (in = n->names; in; in = next) {
				next = in->next;
				if (!kept(t, in->parent, keep, karg))
					drop_or_expire(t, in);
			}
		}
	table_unlock(t);
}

int itab_set_gone(struct itab *t, uint64_t ino, const struct cairn_attr *a)
{
	struct cairn_attr *copy = malloc(sizeof(*copy));
	struct inode *n;
	int rc = -ENOENT;

	if (!copy)
		return -ENOMEM;
	*copy = *a;
	table_lock(t);
	n = find(t, ino);
	if (n && n->fid.vnode == a->fid.vnode && n->fid.uniq == a->fid.uniq) {
		free(n->gone);
		n->gone = copy;
		copy = NULL;
		rc = 0;
	}
	table_unlock(t);
	free(copy);
	return rc;
}

int itab_gone(struct itab *t, uint64_t ino, struct cairn_attr *a)
{
	struct inode *n;
	int rc = -ENOENT;

	table_lock(t);
	n = find(t, ino);
	if (n && n->gone) {
		*a = *n->gone;
		rc = 0;
	}
	table_unlock(t);
	return rc;
}

unsigned itab_wopen(struct itab *t, uint64_t ino, int delta)
{
	struct inode *n;
	unsigned ret = 0;

	table_lock(t);
	n = find(t, ino);
	if (n) {
		if (delta > 0) {
			n->wopen++;
			n->wgen++;
		} else if (delta < 0 && n->wopen)
			n->wopen--;
		ret = n->wopen;
	}
	table_unlock(t);
	return ret;
}

void itab_wgen_bump(struct itab *t, uint64_t ino)
{
	struct inode *n;

	table_lock(t);
	if ((n = find(t, ino)))
		n->wgen++;
	table_unlock(t);
}

/* Mark every incarnation of fid (lock held); 1 if there was one. */
static int mark_orphan(struct itab *t, const struct cairn_fid *fid)
{
	struct inode *n;
	int found = 0;

	FOR_INCS(t, fid->vnode, n)
		if (n->fid.vol == fid->vol && n->fid.uniq == fid->uniq) {
			n->orphan = 1;
			found = 1;
		}
	return found;
}

int itab_set_orphan(struct itab *t, uint64_t ino)
{
	struct inode *n;
	int found;

	table_lock(t);
	n = find(t, ino);
	found = n && mark_orphan(t, &n->fid);
	table_unlock(t);
	return found ? 0 : -ENOENT;
}

int itab_set_orphan_fid(struct itab *t, const struct cairn_fid *fid)
{
	int found;

	table_lock(t);
	found = mark_orphan(t, fid);
	table_unlock(t);
	return found ? 0 : -ENOENT;
}

void itab_take_orphans(struct itab *t,
		       void (*fn)(void *arg, const struct cairn_fid *fid),
		       void *arg)
{
	table_lock(t);
	for (size_t b = 0; b < t->inodes.n; b++)
		for (struct inode *n = t->inodes.b[b]; n; n = n->hnext)
			if (n->orphan) {
				struct inode *m;

				fn(arg, &n->fid);
				FOR_INCS(t, n->fid.vnode, m)
					m->orphan = 0;
			}
	table_unlock(t);
}

int itab_info(struct itab *t, uint64_t ino, struct itab_info *out)
{
	struct isnap s;

	if (snap(t, ino, &s))
		return -ENOENT;
	*out = s.info;
	return 0;
}

size_t itab_count(struct itab *t)
{
	size_t c;

	table_lock(t);
	c = t->count;
	table_unlock(t);
	return c;
}

void itab_get_counts(struct itab *t, struct itab_counts *out)
{
	memset(out, 0, sizeof(*out));
	table_lock(t);
	out->inodes = t->count;
	out->entries = t->nnames;
	out->negative = t->nnegs;
	/* Promises and orphans are bits of each inode, not counted as they
	 * change: one walk, for a status request now and then. */
	for (size_t b = 0; b < t->inodes.n; b++)
		for (struct inode *n = t->inodes.b[b]; n; n = n->hnext) {
			out->promises += n->promise;
			/* Once per file, not per incarnation. */
			out->orphans += n->orphan &&
					newest_inc(t, n->fid.vnode) == n;
		}
	table_unlock(t);
}

int64_t itab_entry(struct itab *t, uint64_t parent, const char *name,
		   size_t len)
{
	struct iname *in;
	int64_t rc = -ENOENT;

	table_lock(t);
	in = find_entry(t, parent, name, len);
	if (in)
		rc = in->owner ? (int64_t)in->owner->ino : 0;
	table_unlock(t);
	return rc;
}

/*
 * store_orphan.c - orphans: objects whose last name went while a client
 * may still have them open (store.h, "Orphans").
 *
 * States of a non-directory object:
 *   linked    nlink >= 1, named by that many entries, no orphans record;
 *   orphan    nlink 0, no entry, an orphans record (vnode -> its holders'
 *             client ids, at least one); inode, xattrs and data file
 *             kept;
 *   freed     no inode, no record; its data file removed after the
 *             commit (a crash in between leaves a stray data file, which
 *             store_open removes).
 * Transitions: linked -> orphan when a REMOVE with RM_KEEP, or a RENAME
 * with RN_KEEP over it, takes its last link (store_dir.c, unlink_obj: the
 * record is written in the removal's transaction, with the requester as
 * its holder; store_orphan_hold adds the other clients that may have it
 * open); orphan -> freed when its last holder drops it
 * (store_orphan_drop) or is released (store_orphan_release), each of the
 * others only leaving the list; linked -> freed as before without KEEP. An
 * orphan never goes back to linked: store_link refuses it (-ENOENT), and
 * nothing else names it.
 *
 * Invariants (checked by store_fsck): a record names an existing
 * non-directory with nlink 0 and no entry; an inode with nlink 0 has a
 * record. A record that breaks the first (corruption) is deleted by the
 * free that meets it, leaving the inode alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "store_int.h"

/* Orphans freed per transaction by store_orphan_release. */
#define RELEASE_BATCH 256

static void orphan_key(uint64_t vn, uint8_t kb[8], MDB_val *k)
{
	store_be64_put(kb, vn);
	k->mv_size = 8;
	k->mv_data = kb;
}

int store_orphan_add(struct store *st, MDB_txn *txn, uint64_t vn,
		     const uint8_t holder[STORE_HOLDER_SIZE])
{
	uint8_t kb[8];
	MDB_val k, v = { STORE_HOLDER_SIZE, (void *)holder };

	orphan_key(vn, kb, &k);
	return store_lmdb_err(mdb_put(txn, st->db_orphans, &k, &v, 0));
}

_Static_assert(STORE_HOLDER_SIZE == STORE_REC_HOLDER_SIZE &&
	       STORE_ORPHAN_HOLDERS_MAX == STORE_REC_HOLDERS_MAX,
	       "orphan holders: store.h and store_rec.h agree");

/* Index of id among the count holders at list, or -1. */
static long holder_find(const uint8_t *list, size_t count, const uint8_t *id)
{
	for (size_t i = 0; i < count; i++)
		if (!memcmp(list + i * STORE_HOLDER_SIZE, id,
			    STORE_HOLDER_SIZE))
			return (long)i;
	return -1;
}

struct hold_args {
	const struct cairn_fid *fid;
	const uint8_t *ids;
	size_t n;
	int is_orphan;
};

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, STORE_HOLDER_SIZE);
}

static int hold_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct hold_args *a = arg;
	uint8_t kb[8], *list;
	struct sinode ino;
	size_t count, m;
	MDB_val k, v;
	int rc;

	a->is_orphan = 0;
	orphan_key(a->fid->vnode, kb, &k);
	rc = mdb_get(txn, st->db_orphans, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return store_lmdb_err(rc);
	if ((rc = store_rec_orphan_decode(v.mv_data, v.mv_size, &count)))
		return 0; /* corrupt: left to fsck and the frees */
	rc = store_inode_get(st, txn, a->fid->vnode, &ino);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (ino.uniq != a->fid->uniq || ino.nlink != 0 || S_ISDIR(ino.mode))
		return 0;
	a->is_orphan = 1;
	if (!(list = malloc((count + a->n) * STORE_HOLDER_SIZE)))
		return -ENOMEM;
	memcpy(list, v.mv_data, count * STORE_HOLDER_SIZE);
	m = count;
	for (size_t i = 0; i < a->n && m < STORE_ORPHAN_HOLDERS_MAX; i++) {
		const uint8_t *id = a->ids + i * STORE_HOLDER_SIZE;

		if (holder_find(list, m, id) < 0)
			memcpy(list + m++ * STORE_HOLDER_SIZE, id,
			       STORE_HOLDER_SIZE);
	}
	rc = 0;
	if (m != count) {
		qsort(list, m, STORE_HOLDER_SIZE, id_cmp);
		v.mv_size = m * STORE_HOLDER_SIZE;
		v.mv_data = list;
		rc = store_lmdb_err(mdb_put(txn, st->db_orphans, &k, &v, 0));
	}
	free(list);
	return rc;
}

int store_orphan_hold(struct store *st, const struct cairn_fid *fid,
		      const uint8_t *ids, size_t n)
{
	struct hold_args a = { fid, ids, n, 0 };
	int rc;

	if (n == 0 || fid->vol != STORE_VOL || fid->vnode <= STORE_ROOT ||
	    fid->uniq == 0)
		return 0;
	if ((rc = store_tx(st, hold_tx, &a)))
		return rc;
	return a.is_orphan;
}

/* Freed objects whose data files go after the commit. */
struct freed {
	uint64_t *vn;       /* regular files among them */
	size_t nvn;
	size_t count;       /* objects freed */
};

/*
 * Give up holder's hold on orphan vn if it has one (and, with uniq
 * non-zero, the FID matches), freeing the orphan when it was the last
 * holder. Returns 0 (done, or not an orphan of holder: nothing done), or
 * an error of the store; *held (may be NULL) is set when holder had a
 * hold. f->vn has room for every vnode the caller may free.
 */
static int orphan_free(struct store *st, MDB_txn *txn, uint64_t vn,
		       uint32_t uniq, const uint8_t *holder, struct freed *f,
		       int *held)
{
	uint8_t kb[8];
	struct sinode ino;
	size_t count;
	MDB_val k, v;
	long at;
	int rc, have;

	if (held)
		*held = 0;
	orphan_key(vn, kb, &k);
	rc = mdb_get(txn, st->db_orphans, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return store_lmdb_err(rc);
	if ((rc = store_rec_orphan_decode(v.mv_data, v.mv_size, &count)))
		return rc;
	if ((at = holder_find(v.mv_data, count, holder)) < 0)
		return 0;
	rc = store_inode_get(st, txn, vn, &ino);
	if (rc && rc != -ENOENT)
		return rc;
	have = rc == 0;
	if (have && uniq && ino.uniq != uniq)
		return 0; /* not the FID of this orphan: a stale one */
	if (held)
		*held = 1;
	if (count > 1) {
		/* Others hold it still: only holder leaves the list (the
		 * order stays ascending). */
		uint8_t *list = malloc((count - 1) * STORE_HOLDER_SIZE);
		const uint8_t *old = v.mv_data;
		size_t i0 = (size_t)at;

		if (!list)
			return -ENOMEM;
		memcpy(list, old, i0 * STORE_HOLDER_SIZE);
		memcpy(list + i0 * STORE_HOLDER_SIZE,
		       old + (i0 + 1) * STORE_HOLDER_SIZE,
		       (count - 1 - i0) * STORE_HOLDER_SIZE);
		v.mv_data = list;
		v.mv_size = (count - 1) * STORE_HOLDER_SIZE;
		rc = store_lmdb_err(mdb_put(txn, st->db_orphans, &k, &v, 0));
		free(list);
		return rc;
	}
	if ((rc = store_lmdb_err(mdb_del(txn, st->db_orphans, &k, NULL))))
		return rc;
	/* A record of a missing or linked object is corruption: the record
	 * goes, the inode (if any) stays. */
	if (!have || ino.nlink != 0 || S_ISDIR(ino.mode))
		return 0;
	if ((rc = store_inode_del(st, txn, vn)))
		return rc;
	if (S_ISREG(ino.mode))
		f->vn[f->nvn++] = vn;
	f->count++;
	return 0;
}

/* After the commit: the data files of the regular files freed. */
static void freed_drop(struct store *st, const struct freed *f)
{
	for (size_t i = 0; i < f->nvn; i++)
		store_data_drop(st, f->vn[i], 0);
}

struct drop_args {
	const uint8_t *holder;
	const struct cairn_fid *fids;
	size_t n;
	struct freed f;
};

static int drop_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct drop_args *a = arg;
	int rc;

	a->f.nvn = a->f.count = 0;
	for (size_t i = 0; i < a->n; i++) {
		const struct cairn_fid *fid = &a->fids[i];

		/* Not a FID of ours (a uniq is never 0): ignored. */
		if (fid->vol != STORE_VOL || fid->vnode <= STORE_ROOT ||
		    fid->uniq == 0)
			continue;
		if ((rc = orphan_free(st, txn, fid->vnode, fid->uniq,
				      a->holder, &a->f, NULL)))
			return rc;
	}
	return 0;
}

int store_orphan_drop(struct store *st, const uint8_t holder[STORE_HOLDER_SIZE],
		      const struct cairn_fid *fids, size_t n, size_t *freed)
{
	struct drop_args a = { holder, fids, n, { NULL, 0, 0 } };
	int rc;

	if (freed)
		*freed = 0;
	if (n == 0)
		return 0;
	if (!(a.f.vn = malloc(n * sizeof(*a.f.vn))))
		return -ENOMEM;
	rc = store_tx(st, drop_tx, &a);
	if (rc == 0) {
		freed_drop(st, &a.f);
		if (freed)
			*freed = a.f.count;
	}
	free(a.f.vn);
	return rc;
}

struct release_args {
	const uint8_t *holder;
	uint64_t vn[RELEASE_BATCH];
	int more;           /* the batch was full: look again */
	size_t released;    /* holds given up */
	struct freed f;
};

/* The orphans record at the cursor (k, v): 0, or -EUCLEAN for one that
 * does not decode, which every walk skips (fsck reports it). */
static int orphan_rec(const MDB_val *k, const MDB_val *v, uint64_t *vn,
		      size_t *count)
{
	if (store_rec_orphan_key_decode(k->mv_data, k->mv_size, vn) ||
	    store_rec_orphan_decode(v->mv_data, v->mv_size, count))
		return -EUCLEAN;
	return 0;
}

/* Up to RELEASE_BATCH orphans of holder: found first, then freed (no
 * cursor is walked while records are deleted). */
static int release_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct release_args *a = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t vn;
	size_t n = 0, count;
	int rc, held;

	a->f.nvn = a->f.count = 0;
	a->more = 0;
	a->released = 0;
	if ((rc = mdb_cursor_open(txn, st->db_orphans, &cur)))
		return store_lmdb_err(rc);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (orphan_rec(&k, &v, &vn, &count) ||
		    holder_find(v.mv_data, count, a->holder) < 0)
			continue;
		if (n == RELEASE_BATCH) {
			a->more = 1;
			break;
		}
		a->vn[n++] = vn;
	}
	mdb_cursor_close(cur);
	rc = rc == MDB_NOTFOUND ? 0 : store_lmdb_err(rc);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = orphan_free(st, txn, a->vn[i], 0, a->holder, &a->f,
				 &held);
		a->released += held;
	}
	return rc;
}

int store_orphan_release(struct store *st,
			 const uint8_t holder[STORE_HOLDER_SIZE],
			 uint64_t max, uint64_t *freed)
{
	struct release_args *a = calloc(1, sizeof(*a));
	uint64_t total = 0;
	int rc;

	if (!a || !(a->f.vn = malloc(RELEASE_BATCH * sizeof(*a->f.vn)))) {
		free(a);
		rc = -ENOMEM;
		goto out;
	}
	a->holder = holder;
	do {
		if ((rc = store_tx(st, release_tx, a)))
			break;
		freed_drop(st, &a->f);
		total += a->released;
	} while (a->more && (max == 0 || total < max));
	free(a->f.vn);
	free(a);
out:
	if (freed)
		*freed = total;
	return rc;
}

int store_orphan_holders(struct store *st, struct store_holder **out,
			 size_t *n)
{
	struct store_holder *h = NULL, *nh;
	size_t nh_len = 0, cap = 0, i, count;
	MDB_cursor *cur = NULL;
	MDB_txn *txn;
	MDB_val k, v;
	uint64_t vn;
	int rc, nomem = 0;

	*out = NULL;
	*n = 0;
	if ((rc = store_rtxn(st, &txn)))
		return rc;
	if ((rc = mdb_cursor_open(txn, st->db_orphans, &cur))) {
		rc = store_lmdb_err(rc);
		goto out;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (orphan_rec(&k, &v, &vn, &count))
			continue;
		for (size_t j = 0; j < count && !nomem; j++) {
			const uint8_t *id = (const uint8_t *)v.mv_data +
					    j * STORE_HOLDER_SIZE;

			/* Holders are few (clients with files unlinked while
			 * open). */
			for (i = 0; i < nh_len &&
			     memcmp(h[i].id, id, STORE_HOLDER_SIZE); i++)
				;
			if (i == nh_len) {
				if (nh_len == cap) {
					cap = cap ? cap * 2 : 8;
					if (!(nh = realloc(h, cap * sizeof(*h)))) {
						nomem = 1;
						break;
					}
					h = nh;
				}
				memcpy(h[nh_len].id, id, STORE_HOLDER_SIZE);
				h[nh_len++].count = 0;
			}
			h[i].count++;
		}
		if (nomem)
			break;
	}
	rc = nomem ? -ENOMEM : rc == MDB_NOTFOUND ? 0 : store_lmdb_err(rc);
out:
	if (cur)
		mdb_cursor_close(cur);
	store_rtxn_end(st, txn);
	if (rc) {
		free(h);
		return rc;
	}
	*out = h;
	*n = nh_len;
	return 0;
}

int store_orphan_count(struct store *st, uint64_t *n)
{
	MDB_txn *txn;
	MDB_stat ms;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	rc = store_lmdb_err(mdb_stat(txn, st->db_orphans, &ms));
	store_rtxn_end(st, txn);
	if (rc == 0)
		*n = ms.ms_entries;
	return rc;
}

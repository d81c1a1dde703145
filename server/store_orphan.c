/*
 * store_orphan.c - orphans: objects whose last name went while a client
 * may still have them open (store.h, "Orphans").
 *
 * States of a non-directory object:
 *   linked    nlink >= 1, named by that many entries, no orphans record;
 *   orphan    nlink 0, no entry, an orphans record (vnode -> holder's
 *             client id); inode, xattrs and data file kept;
 *   freed     no inode, no record; its data file removed after the
 *             commit (a crash in between leaves a stray data file, which
 *             store_open removes).
 * Transitions: linked -> orphan when a REMOVE with RM_KEEP, or a RENAME
 * with RN_KEEP over it, takes its last link (store_dir.c, unlink_obj: the
 * record is written in the removal's transaction); orphan -> freed when
 * its holder drops it (store_orphan_drop) or is released
 * (store_orphan_release); linked -> freed as before without KEEP. An
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

/* Freed objects whose data files go after the commit. */
struct freed {
	uint64_t *vn;       /* regular files among them */
	size_t nvn;
	size_t count;       /* objects freed */
};

/*
 * Free orphan vn if holder holds it (and, with uniq non-zero, the FID
 * matches). Returns 0 (freed, or not an orphan of holder: nothing done),
 * or an error of the store. f->vn has room for every vnode the caller
 * may free.
 */
static int orphan_free(struct store *st, MDB_txn *txn, uint64_t vn,
		       uint32_t uniq, const uint8_t *holder, struct freed *f)
{
	uint8_t kb[8], id[STORE_HOLDER_SIZE];
	struct sinode ino;
	MDB_val k, v;
	int rc, have;

	orphan_key(vn, kb, &k);
	rc = mdb_get(txn, st->db_orphans, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return store_lmdb_err(rc);
	if ((rc = store_rec_orphan_decode(v.mv_data, v.mv_size, id)))
		return rc;
	if (memcmp(id, holder, STORE_HOLDER_SIZE))
		return 0;
	rc = store_inode_get(st, txn, vn, &ino);
	if (rc && rc != -ENOENT)
		return rc;
	have = rc == 0;
	if (have && uniq && ino.uniq != uniq)
		return 0; /* not the FID of this orphan: a stale one */
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
				      a->holder, &a->f)))
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
	struct freed f;
};

/* The orphans record at the cursor (k, v): 0, or -EUCLEAN for one that
 * does not decode, which every walk skips (fsck reports it). */
static int orphan_rec(const MDB_val *k, const MDB_val *v, uint64_t *vn,
		      uint8_t id[STORE_HOLDER_SIZE])
{
	if (store_rec_orphan_key_decode(k->mv_data, k->mv_size, vn) ||
	    store_rec_orphan_decode(v->mv_data, v->mv_size, id))
		return -EUCLEAN;
	return 0;
}

/* Up to RELEASE_BATCH orphans of holder: found first, then freed (no
 * cursor is walked while records are deleted). */
static int release_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct release_args *a = arg;
	uint8_t id[STORE_HOLDER_SIZE];
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t vn;
	size_t n = 0;
	int rc;

	a->f.nvn = a->f.count = 0;
	a->more = 0;
	if ((rc = mdb_cursor_open(txn, st->db_orphans, &cur)))
		return store_lmdb_err(rc);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (orphan_rec(&k, &v, &vn, id) ||
		    memcmp(id, a->holder, STORE_HOLDER_SIZE))
			continue;
		if (n == RELEASE_BATCH) {
			a->more = 1;
			break;
		}
		a->vn[n++] = vn;
	}
	mdb_cursor_close(cur);
	rc = rc == MDB_NOTFOUND ? 0 : store_lmdb_err(rc);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = orphan_free(st, txn, a->vn[i], 0, a->holder, &a->f);
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
		total += a->f.count;
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
	size_t nh_len = 0, cap = 0, i;
	uint8_t id[STORE_HOLDER_SIZE];
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
		if (orphan_rec(&k, &v, &vn, id))
			continue;
		/* Holders are few (clients with files unlinked while open). */
		for (i = 0; i < nh_len && memcmp(h[i].id, id, sizeof(id)); i++)
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
			memcpy(h[nh_len].id, id, sizeof(id));
			h[nh_len++].count = 0;
		}
		h[i].count++;
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

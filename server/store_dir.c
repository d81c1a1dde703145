/*
 * store_dir.c - namespace operations of the store: lookup, create,
 * symlink, link, remove, rename, readdir.
 *
 * A directory entry lives twice: dirents (dir, name) -> (child, cookie,
 * type) and dirseq (dir, cookie) -> name. Both are always changed in the
 * same transaction. An entry keeps its cookie for its whole life, also
 * when rename replaces or exchanges the object it names, so a READDIR
 * resumed from a cookie neither skips nor repeats entries that stayed.
 *
 * Invariants kept here (and checked by store_fsck):
 *   - a directory has exactly one entry naming it (the root none) and
 *     its inode's parent is the directory holding that entry;
 *   - a directory's nlink is 2 + its subdirectories, another object's
 *     nlink is the number of entries naming it;
 *   - an object whose last entry goes is deleted in the same transaction;
 *     its data file is removed after the commit (a crash in between leaves
 *     a data file without inode, which the next store_open removes);
 *     with RM_KEEP / RN_KEEP a non-directory becomes an orphan instead,
 *     recorded in the same transaction (store_orphan.c), and an orphan
 *     never gets a name again (link answers -ENOENT).
 * Every operation bumps dv of each object whose attributes it changed.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include "store_int.h"

static void dirent_key(uint64_t dir, const char *name, uint8_t *kb,
		       MDB_val *k)
{
	size_t n = strlen(name);

	store_be64_put(kb, dir);
	memcpy(kb + 8, name, n);
	k->mv_size = 8 + n;
	k->mv_data = kb;
}

static void dirseq_key(uint64_t dir, uint64_t cookie, uint8_t *kb,
		       MDB_val *k)
{
	store_be64_put(kb, dir);
	store_be64_put(kb + 8, cookie);
	k->mv_size = 16;
	k->mv_data = kb;
}

int store_dirent_get(struct store *st, MDB_txn *txn, uint64_t dir,
		     const char *name, uint64_t *child, uint64_t *cookie,
		     uint32_t *type)
{
	uint8_t kb[8 + CAIRN_NAME_MAX];
	struct store_rec_dirent de;
	MDB_val k, v;
	int rc;

	dirent_key(dir, name, kb, &k);
	rc = mdb_get(txn, st->db_dirents, &k, &v);
	if (rc)
		return store_lmdb_err(rc);
	if ((rc = store_rec_dirent_decode(v.mv_data, v.mv_size, &de)))
		return rc;
	*child = de.child;
	*cookie = de.cookie;
	*type = de.type;
	return 0;
}

/* Point the existing entry (dir, name) at another object. */
static int dirent_set(struct store *st, MDB_txn *txn, uint64_t dir,
		      const char *name, uint64_t child, uint64_t cookie,
		      uint32_t type)
{
	uint8_t kb[8 + CAIRN_NAME_MAX], vb[STORE_REC_DIRENT_SIZE];
	MDB_val k, v = { sizeof(vb), vb };
	struct store_rec_dirent de = { child, cookie, type & S_IFMT };

	dirent_key(dir, name, kb, &k);
	store_rec_dirent_encode(&de, vb);
	return store_lmdb_err(mdb_put(txn, st->db_dirents, &k, &v, 0));
}

/* New entry with the directory's next cookie (dino is updated, the
 * caller writes it back). */
static int dirent_add(struct store *st, MDB_txn *txn, uint64_t dir,
		      struct sinode *dino, const char *name, uint64_t child,
		      uint32_t type)
{
	uint8_t kb[16];
	MDB_val k, v = { strlen(name), (void *)name };
	uint64_t cookie = dino->next_cookie++;
	int rc;

	dirseq_key(dir, cookie, kb, &k);
	rc = mdb_put(txn, st->db_dirseq, &k, &v, MDB_NOOVERWRITE);
	if (rc)
		return rc == MDB_KEYEXIST ? -EIO : store_lmdb_err(rc);
	return dirent_set(st, txn, dir, name, child, cookie, type);
}

static int dirent_del(struct store *st, MDB_txn *txn, uint64_t dir,
		      const char *name, uint64_t cookie)
{
	uint8_t kb[8 + CAIRN_NAME_MAX];
	MDB_val k;
	int rc;

	dirent_key(dir, name, kb, &k);
	if ((rc = mdb_del(txn, st->db_dirents, &k, NULL)))
		return store_lmdb_err(rc);
	dirseq_key(dir, cookie, kb, &k);
	rc = mdb_del(txn, st->db_dirseq, &k, NULL);
	return rc == MDB_NOTFOUND ? -EIO : store_lmdb_err(rc);
}

/* 1 if directory dir has no entries, 0 if it has, or -errno. */
static int dir_empty(struct store *st, MDB_txn *txn, uint64_t dir)
{
	MDB_cursor *cur;
	uint8_t kb[16];
	MDB_val k, v;
	int rc;

	dirseq_key(dir, 0, kb, &k);
	if ((rc = mdb_cursor_open(txn, st->db_dirseq, &cur)))
		return store_lmdb_err(rc);
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		return 1;
	if (rc)
		return store_lmdb_err(rc);
	return k.mv_size != 16 || store_be64_get(k.mv_data) != dir;
}

/* 1 if directory anc is vn or one of its ancestors, 0 if not. */
static int dir_is_ancestor(struct store *st, MDB_txn *txn, uint64_t anc,
			   uint64_t vn)
{
	struct sinode ino;
	int rc;

	for (int depth = 0; depth < 100000; depth++) {
		if (vn == anc)
			return 1;
		if (vn == STORE_ROOT)
			return 0;
		if ((rc = store_inode_get(st, txn, vn, &ino)))
			return rc == -ENOENT ? -EIO : rc;
		vn = ino.parent;
	}
	return -EIO; /* a parent cycle: corrupt metadata */
}

/*
 * The directory a FID names as the directory of a name (lookup, create,
 * link, remove, rename, readdir): -ENOTDIR if it is something else,
 * -ENOENT if it was removed, -ESTALE if the FID is not one of ours (wrong
 * volume, or a uniq that does not match the vnode). ENOENT is what ext4
 * gives in a removed directory (a process whose cwd another one removed:
 * stat, open(O_CREAT), mkdir, mknod, symlink, link, rename, unlink, rmdir
 * and getdents all fail with ENOENT there). Operations on the object
 * itself keep -ESTALE for a removed FID (store_fid_get).
 */
static int dir_get(struct store *st, MDB_txn *txn, const struct cairn_fid *fid,
		   struct sinode *dino)
{
	int rc;

	if (fid->vol != STORE_VOL || fid->vnode == 0)
		return -ESTALE;
	rc = store_inode_get(st, txn, fid->vnode, dino); /* -ENOENT: gone */
	if (rc == 0 && dino->uniq != fid->uniq)
		rc = -ESTALE;
	if (rc == 0 && !S_ISDIR(dino->mode))
		rc = -ENOTDIR;
	return rc;
}

/* The object an entry names; its absence is corruption, not ENOENT. */
static int child_get(struct store *st, MDB_txn *txn, uint64_t vn,
		     struct sinode *ino)
{
	int rc = store_inode_get(st, txn, vn, ino);

	return rc == -ENOENT ? -EIO : rc;
}

int store_lookup(struct store *st, const struct cairn_fid *dir,
		 const char *name, struct cairn_attr *out)
{
	MDB_txn *txn;
	struct sinode dino, ino;
	uint64_t child, cookie;
	uint32_t type;
	int rc;

	if ((rc = store_name_check(name)))
		return rc;
	if ((rc = store_rtxn(st, &txn)))
		return rc;
	if ((rc = dir_get(st, txn, dir, &dino)) ||
	    (rc = store_dirent_get(st, txn, dir->vnode, name, &child, &cookie,
				   &type)) ||
	    (rc = child_get(st, txn, child, &ino)))
		goto out;
	store_attr_fill(st, child, &ino, out);
out:
	store_rtxn_end(st, txn);
	return rc;
}

/* ---- create / symlink ------------------------------------------------- */

struct create_args {
	const struct cairn_fid *dir;
	const char *name, *target;
	uint32_t mode, uid, gid, rdev, flags;
	const struct cairn_fid *want;   /* CR_FID: the new object's FID */
	struct cairn_time t;            /* CR_FID: its times */
	uint64_t size;                  /* CR_FID: its first bytes, written
					 * to its data file already or (data)
					 * to be its inline record
					 * (store_create_data) */
	const void *data;
	const struct store_setattr *then; /* CR_FID: attribute changes made
					   * with it (store_create_sized) */
	int inl;                        /* a regular file starts inline */
	int created;
	uint64_t vn;
	struct sinode ino, dino;
};

/* O_CREAT without O_EXCL on an existing name. */
static int create_existing(struct store *st, MDB_txn *txn,
			   struct create_args *a, uint64_t child,
			   uint32_t type)
{
	int rc;

	if (a->target || (a->flags & CR_EXCL) || !S_ISREG(a->mode))
		return -EEXIST;
	if (S_ISDIR(type))
		return -EISDIR;
	if (!S_ISREG(type))
		return -EEXIST;
	a->created = 0;
	a->vn = child;
	if ((rc = child_get(st, txn, child, &a->ino)) == 0)
		store_tx_result(child, &a->ino, 0);
	return rc;
}

/*
 * CR_FID: the object a->want, if it exists, was made by an earlier copy
 * of this request (a resend after a reconnect, or a replay after a
 * restart): answer as done (1). 0: it does not exist and may be made.
 */
static int create_fid_done(struct store *st, MDB_txn *txn,
			   struct create_args *a)
{
	int rc;

	if (a->want->vol != STORE_VOL)
		return -EINVAL;
	rc = store_inode_get(st, txn, a->want->vnode, &a->ino);
	if (rc == -ENOENT)
		return store_vnode_handed_out(st, txn, a->want->vnode);
	if (rc)
		return rc;
	if (a->ino.uniq != a->want->uniq)
		return -EEXIST;
	a->created = 2;
	a->vn = a->want->vnode;
	return 1;
}

static int create_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct create_args *a = arg;
	uint64_t child, cookie, dvn = a->dir->vnode;
	uint32_t type;
	MDB_val k, v;
	uint8_t kb[8];
	int rc;

	if ((rc = dir_get(st, txn, a->dir, &a->dino)))
		return rc;
	if (a->want && (rc = create_fid_done(st, txn, a)))
		return rc < 0 ? rc : 0;
	rc = store_dirent_get(st, txn, dvn, a->name, &child, &cookie, &type);
	if (rc == 0)
		return a->want ? -EEXIST
			       : create_existing(st, txn, a, child, type);
	if (rc != -ENOENT)
		return rc;
	if (S_ISDIR(a->mode) && a->dino.nlink >= STORE_MAXLINK)
		return -EMLINK;
	if (a->want) {
		store_inode_init(a->mode, a->t, &a->ino);
		a->ino.uniq = a->want->uniq;
		a->vn = a->want->vnode;
		if (a->size) {
			/* As a WR_KEEPTIME write after the create would. */
			a->ino.size = a->size;
			a->ino.dv++;
		}
	} else if ((rc = store_inode_new(st, txn, a->mode, &a->vn,
					 &a->ino))) {
		return rc;
	}
	a->ino.uid = a->uid;
	a->ino.gid = a->gid;
	if (S_ISCHR(a->mode) || S_ISBLK(a->mode))
		a->ino.rdev = a->rdev;
	if (a->dino.mode & S_ISGID) {
		a->ino.gid = a->dino.gid;
		if (S_ISDIR(a->mode))
			a->ino.mode |= S_ISGID;
	}
	if (S_ISDIR(a->mode)) {
		a->ino.parent = dvn;
		a->dino.nlink++;
	}
	if (a->target) {
		a->ino.size = strlen(a->target);
		store_be64_put(kb, a->vn);
		k.mv_size = 8;
		k.mv_data = kb;
		v.mv_size = a->ino.size;
		v.mv_data = (void *)a->target;
		if ((rc = mdb_put(txn, st->db_symlinks, &k, &v, 0)))
			return store_lmdb_err(rc);
	}
	/* A regular file starts inline (store_int.h), unless its first
	 * bytes are in a data file already. */
	if (S_ISREG(a->ino.mode) && a->inl && (a->data || !a->size)) {
		a->ino.flags |= SINODE_INLINE;
		if (a->data && (rc = store_inline_put(st, txn, a->vn, a->data,
						      a->size)))
			return rc;
	}
	if ((rc = dirent_add(st, txn, dvn, &a->dino, a->name, a->vn,
			     a->ino.mode)))
		return rc;
	store_touch_mc(&a->dino, a->ino.ctime);
	if (a->then)
		store_setattr_fields(&a->ino, a->then, store_now());
	if ((rc = store_inode_put(st, txn, a->vn, &a->ino)) ||
	    (rc = store_inode_put(st, txn, dvn, &a->dino)))
		return rc;
	a->created = 1;
	store_tx_result(a->vn, &a->ino, 1);
	return 0;
}

static int create_run(struct store *st, struct create_args *a,
		      struct cairn_attr *out, struct cairn_attr *dir_out)
{
	int rc;

	if ((rc = store_name_check(a->name)))
		return rc;
	if ((rc = store_tx(st, create_tx, a)))
		return rc;
	store_attr_fill(st, a->vn, &a->ino, out);
	store_attr_fill(st, a->dir->vnode, &a->dino, dir_out);
	return 0;
}

int store_create(struct store *st, const struct cairn_fid *dir,
		 const char *name, uint32_t mode, uint32_t uid, uint32_t gid,
		 uint32_t rdev, uint32_t flags, int *created,
		 struct cairn_attr *out, struct cairn_attr *dir_out)
{
	struct cairn_time t = { 0, 0 };

	return store_create_fid(st, dir, name, mode, uid, gid, rdev,
				flags & ~(uint32_t)CR_FID, NULL, t, created,
				out, dir_out);
}

int store_create_fid(struct store *st, const struct cairn_fid *dir,
		     const char *name, uint32_t mode, uint32_t uid,
		     uint32_t gid, uint32_t rdev, uint32_t flags,
		     const struct cairn_fid *fid, struct cairn_time t,
		     int *created, struct cairn_attr *out,
		     struct cairn_attr *dir_out)
{
	return store_create_sized(st, dir, name, mode, uid, gid, rdev, flags,
				  fid, t, 0, NULL, NULL, created, out, dir_out);
}

int store_create_sized(struct store *st, const struct cairn_fid *dir,
		       const char *name, uint32_t mode, uint32_t uid,
		       uint32_t gid, uint32_t rdev, uint32_t flags,
		       const struct cairn_fid *fid, struct cairn_time t,
		       uint64_t size, const void *data,
		       const struct store_setattr *then, int *created,
		       struct cairn_attr *out, struct cairn_attr *dir_out)
{
	struct create_args a = { .dir = dir, .name = name, .uid = uid,
				 .gid = gid, .rdev = rdev, .flags = flags,
				 .want = fid, .t = t, .size = size,
				 .data = data, .then = then,
				 /* With data the caller chose already. */
				 .inl = data || store_inline_room(st) != 0 };
	int rc;

	if (!!(flags & CR_FID) != !!fid || (then && !fid) ||
	    (then && (then->valid & SA_SIZE)) ||
	    (data && (size > STORE_INLINE_MAX ||
		      ((mode & S_IFMT) && (mode & S_IFMT) != S_IFREG))))
		return -EINVAL;
	if ((mode & S_IFMT) == 0)
		mode |= S_IFREG;
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFIFO: case S_IFSOCK:
	case S_IFCHR: case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	a.mode = mode & (S_IFMT | 07777);
	rc = create_run(st, &a, out, dir_out);
	if (rc == 0)
		*created = a.created;
	return rc;
}

int store_creates(struct store *st, const struct cairn_fid *dir,
		  struct store_cent *e, int n, struct cairn_attr *dir_out)
{
	struct create_args a[CAIRN_CREATES_MAX];
	void *args[CAIRN_CREATES_MAX];
	int res[CAIRN_CREATES_MAX], idx[CAIRN_CREATES_MAX];
	uint32_t room = store_inline_room(st);
	int k = 0, last = -1, rc;

	if (n < 1 || n > (int)CAIRN_CREATES_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		uint32_t mode = e[i].mode;

		e[i].created = 0;
		memset(&e[i].out, 0, sizeof(e[i].out));
		if ((mode & S_IFMT) == 0)
			mode |= S_IFREG;
		if (!S_ISREG(mode) || !(e[i].flags & CR_FID) ||
		    (e[i].flags & ~(uint32_t)(CR_EXCL | CR_FID | CR_TOKEN)) ||
		    (e[i].then && (e[i].then->valid & SA_SIZE))) {
			e[i].rc = -EINVAL;
			continue;
		}
		if (e[i].len > room || e[i].len > STORE_INLINE_MAX) {
			e[i].rc = -E2BIG;
			continue;
		}
		if ((e[i].rc = store_name_check(e[i].name)))
			continue;
		a[k] = (struct create_args){
			.dir = dir, .name = e[i].name,
			.mode = mode & (S_IFMT | 07777),
			.uid = e[i].uid, .gid = e[i].gid,
			.flags = e[i].flags & (CR_EXCL | CR_FID),
			.want = &e[i].fid, .t = e[i].t, .size = e[i].len,
			.data = e[i].len ? e[i].data : NULL,
			.then = e[i].then,
			.inl = e[i].len || room != 0,
		};
		args[k] = &a[k];
		idx[k++] = i;
	}
	if ((rc = store_tx_many(st, create_tx, args, res, k)))
		return rc;
	for (int j = 0; j < k; j++) {
		struct store_cent *x = &e[idx[j]];

		if ((x->rc = res[j]))
			continue;
		x->created = a[j].created;
		store_attr_fill(st, a[j].vn, &a[j].ino, &x->out);
		last = j;
	}
	/* Made by an earlier copy of the request that may not have got to
	 * write its first bytes (as store_create_data). */
	for (int j = 0; j < k; j++) {
		struct store_cent *x = &e[idx[j]];

		if (!x->rc && x->created == 2 && x->len && x->out.dv == 1)
			x->rc = store_write(st, &x->out.fid, 0, x->data, x->len,
					    WR_KEEPTIME, &x->out);
	}
	if (last >= 0) {
		store_attr_fill(st, dir->vnode, &a[last].dino, dir_out);
		return 0;
	}
	return store_getattr(st, dir, dir_out);
}

int store_symlink(struct store *st, const struct cairn_fid *dir,
		  const char *name, const char *target, uint32_t uid,
		  uint32_t gid, struct cairn_attr *out,
		  struct cairn_attr *dir_out)
{
	struct create_args a = { .dir = dir, .name = name, .target = target,
				 .mode = S_IFLNK | 0777, .uid = uid,
				 .gid = gid, .flags = CR_EXCL };
	size_t n = strlen(target);

	if (n == 0)
		return -ENOENT;
	if (n > CAIRN_SYMLINK_MAX)
		return -ENAMETOOLONG;
	return create_run(st, &a, out, dir_out);
}

int store_readlink(struct store *st, const struct cairn_fid *fid,
		   char *target, size_t *len)
{
	MDB_txn *txn;
	struct sinode ino;
	uint8_t kb[8];
	MDB_val k = { 8, kb }, v;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	if ((rc = store_fid_get(st, txn, fid, &ino)))
		goto out;
	if (!S_ISLNK(ino.mode)) {
		rc = -EINVAL;
		goto out;
	}
	store_be64_put(kb, fid->vnode);
	rc = mdb_get(txn, st->db_symlinks, &k, &v);
	if (rc) {
		rc = rc == MDB_NOTFOUND ? -EIO : store_lmdb_err(rc);
		goto out;
	}
	rc = store_rec_symlink_decode(v.mv_data, v.mv_size, target, len);
out:
	store_rtxn_end(st, txn);
	return rc;
}

/* ---- link / remove ---------------------------------------------------- */

struct link_args {
	const struct cairn_fid *fid, *dir;
	const char *name;
	struct sinode ino, dino;
};

static int link_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct link_args *a = arg;
	uint64_t child, cookie;
	uint32_t type;
	struct cairn_time now = store_now();
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, &a->ino)))
		return rc;
	if (S_ISDIR(a->ino.mode))
		return -EPERM;
	/* An orphan: linkat() of an unlinked open file gives ENOENT. */
	if (a->ino.nlink == 0)
		return -ENOENT;
	if ((rc = dir_get(st, txn, a->dir, &a->dino)))
		return rc;
	rc = store_dirent_get(st, txn, a->dir->vnode, a->name, &child,
			      &cookie, &type);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	if (a->ino.nlink >= STORE_MAXLINK)
		return -EMLINK;
	a->ino.nlink++;
	store_touch_c(&a->ino, now);
	store_touch_mc(&a->dino, now);
	if ((rc = dirent_add(st, txn, a->dir->vnode, &a->dino, a->name,
			     a->fid->vnode, a->ino.mode)) ||
	    (rc = store_inode_put(st, txn, a->fid->vnode, &a->ino)))
		return rc;
	return store_inode_put(st, txn, a->dir->vnode, &a->dino);
}

int store_link(struct store *st, const struct cairn_fid *fid,
	       const struct cairn_fid *dir, const char *name,
	       struct cairn_attr *out, struct cairn_attr *dir_out)
{
	struct link_args a = { fid, dir, name, { 0 }, { 0 } };
	int rc;

	if ((rc = store_name_check(name)) ||
	    (rc = store_tx(st, link_tx, &a)))
		return rc;
	store_attr_fill(st, fid->vnode, &a.ino, out);
	store_attr_fill(st, dir->vnode, &a.dino, dir_out);
	return 0;
}

/*
 * Drop one link of object vn (named by an entry that is already gone or
 * repointed): a directory goes at once (it was empty), another object when
 * its nlink reaches 0, unless holder is given: then it stays, with nlink
 * 0, as an orphan held by holder. *drop is set when a data file must go
 * after commit.
 */
static int unlink_obj(struct store *st, MDB_txn *txn, uint64_t vn,
		      struct sinode *ino, struct cairn_time now,
		      const uint8_t *holder, int *drop)
{
	int rc;

	if (S_ISDIR(ino->mode)) {
		ino->nlink = 0;
		return store_inode_del(st, txn, vn);
	}
	ino->nlink--;
	store_touch_c(ino, now);
	if (ino->nlink > 0)
		return store_inode_put(st, txn, vn, ino);
	if (holder) {
		if ((rc = store_orphan_add(st, txn, vn, holder)))
			return rc;
		return store_inode_put(st, txn, vn, ino);
	}
	*drop = S_ISREG(ino->mode);
	return store_inode_del(st, txn, vn);
}

struct remove_args {
	const struct cairn_fid *dir;
	const char *name;
	uint32_t flags;
	const uint8_t *holder;   /* RM_KEEP: the orphan's holder, else NULL */
	struct cairn_time t;     /* when (zero: now) */
	uint64_t vn;
	int drop;
	struct sinode ino, dino;
};

static int remove_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct remove_args *a = arg;
	uint64_t cookie, dvn = a->dir->vnode;
	uint32_t type;
	struct cairn_time now = a->t.sec || a->t.nsec ? a->t : store_now();
	int rc;

	a->drop = 0;
	if ((rc = dir_get(st, txn, a->dir, &a->dino)) ||
	    (rc = store_dirent_get(st, txn, dvn, a->name, &a->vn, &cookie,
				   &type)) ||
	    (rc = child_get(st, txn, a->vn, &a->ino)))
		return rc;
	if (a->flags & RM_DIR) {
		if (!S_ISDIR(a->ino.mode))
			return -ENOTDIR;
		if ((rc = dir_empty(st, txn, a->vn)) <= 0)
			return rc ? rc : -ENOTEMPTY;
		a->dino.nlink--;
	} else if (S_ISDIR(a->ino.mode)) {
		return -EISDIR;
	}
	store_touch_mc(&a->dino, now);
	if ((rc = dirent_del(st, txn, dvn, a->name, cookie)) ||
	    (rc = unlink_obj(st, txn, a->vn, &a->ino, now, a->holder,
			     &a->drop)))
		return rc;
	return store_inode_put(st, txn, dvn, &a->dino);
}

int store_remove(struct store *st, const struct cairn_fid *dir,
		 const char *name, uint32_t flags, const uint8_t *holder,
		 struct cairn_attr *dir_out, struct store_changed *ch)
{
	struct remove_args a = { .dir = dir, .name = name, .flags = flags };
	int rc;

	if (flags & ~(uint32_t)(RM_DIR | RM_KEEP | RM_SELF))
		return -EINVAL;
	if (flags & RM_KEEP) {
		if (!holder)
			return -EINVAL;
		a.holder = holder;
	}
	if ((rc = store_name_check(name)) ||
	    (rc = store_tx(st, remove_tx, &a)))
		return rc;
	if (a.drop)
		store_data_drop(st, a.vn, 0);
	store_attr_fill(st, dir->vnode, &a.dino, dir_out);
	ch->n = 1;
	store_fid_make(a.vn, &a.ino, &ch->fid[0]);
	ch->orphan = (struct cairn_fid){ 0 };
	ch->gone = 0;
	if (a.holder && a.ino.nlink == 0 && !S_ISDIR(a.ino.mode))
		ch->orphan = ch->fid[0];
	else if (a.ino.nlink == 0)
		ch->gone = 1;
	return 0;
}

/* The removal of one name of a directory, as store_remove without
 * RM_KEEP, for store_removes: the entry's result in ch. */
static void removed(struct store *st, const struct remove_args *a,
		    struct store_changed *ch)
{
	if (a->drop)
		store_data_drop(st, a->vn, 0);
	ch->n = 1;
	store_fid_make(a->vn, &a->ino, &ch->fid[0]);
	ch->orphan = (struct cairn_fid){ 0 };
	ch->gone = 0;
	if (a->holder && a->ino.nlink == 0 && !S_ISDIR(a->ino.mode))
		ch->orphan = ch->fid[0];
	else if (a->ino.nlink == 0)
		ch->gone = 1;
}

int store_removes(struct store *st, const struct cairn_fid *dir, int n,
		  const char *const *names, const uint32_t *flags,
		  const struct cairn_time *times, const uint8_t *holder,
		  int *rcs, struct cairn_attr *dir_out,
		  struct store_changed *ch)
{
	struct remove_args a[CAIRN_REMOVES_MAX];
	void *args[CAIRN_REMOVES_MAX];
	int res[CAIRN_REMOVES_MAX], idx[CAIRN_REMOVES_MAX];
	int k = 0, last = -1, rc;

	if (n < 1 || n > (int)CAIRN_REMOVES_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if ((flags[i] & ~(uint32_t)(RM_DIR | RM_KEEP | RM_SELF)) ||
		    ((flags[i] & RM_KEEP) && !holder))
			return -EINVAL;
		ch[i] = (struct store_changed){ 0 };
		if ((rcs[i] = store_name_check(names[i])))
			continue;
		a[k] = (struct remove_args){
			.dir = dir, .name = names[i],
			.flags = flags[i],
			.holder = (flags[i] & RM_KEEP) ? holder : NULL };
		if (times)
			a[k].t = times[i];
		args[k] = &a[k];
		idx[k++] = i;
	}
	if ((rc = store_tx_many(st, remove_tx, args, res, k)))
		return rc;
	for (int j = 0; j < k; j++) {
		if ((rcs[idx[j]] = res[j]))
			continue;
		removed(st, &a[j], &ch[idx[j]]);
		last = j;
	}
	/* The directory as the last removal left it (each saw the ones
	 * before it: one batch, in order). */
	if (last >= 0) {
		store_attr_fill(st, dir->vnode, &a[last].dino, dir_out);
		return 0;
	}
	return store_getattr(st, dir, dir_out);
}

/* ---- rename ----------------------------------------------------------- */

struct rename_args {
	const struct cairn_fid *sdir, *ddir;
	const char *sname, *dname;
	uint32_t flags;
	const uint8_t *holder;   /* RN_KEEP: a replaced target's holder */
	uint64_t svn, dvn;
	int have_dst, drop;
	struct sinode sd, dd, sino, dino;
};

/* The errors a local file system gives, in the kernel's order. */
static int rename_check(struct store *st, MDB_txn *txn, struct rename_args *a,
			int same)
{
	int sdir_moves = S_ISDIR(a->sino.mode) && !same;
	int rc;

	if ((a->flags & RN_EXCHANGE) && !a->have_dst)
		return -ENOENT;
	if ((a->flags & RN_NOREPLACE) && a->have_dst)
		return -EEXIST;
	/* Source must not be an ancestor of the target's directory. */
	if (sdir_moves &&
	    (rc = dir_is_ancestor(st, txn, a->svn, a->ddir->vnode)))
		return rc < 0 ? rc : -EINVAL;
	/* Target must not be an ancestor of the source's directory. */
	if (a->have_dst && S_ISDIR(a->dino.mode) && !same &&
	    (rc = dir_is_ancestor(st, txn, a->dvn, a->sdir->vnode)))
		return rc < 0 ? rc : (a->flags & RN_EXCHANGE) ? -EINVAL
							       : -ENOTEMPTY;
	if (a->have_dst && a->svn == a->dvn)
		return 0;
	if (a->have_dst && !(a->flags & RN_EXCHANGE)) {
		if (S_ISDIR(a->sino.mode) && !S_ISDIR(a->dino.mode))
			return -ENOTDIR;
		if (!S_ISDIR(a->sino.mode) && S_ISDIR(a->dino.mode))
			return -EISDIR;
		if (S_ISDIR(a->dino.mode) &&
		    (rc = dir_empty(st, txn, a->dvn)) <= 0)
			return rc ? rc : -ENOTEMPTY;
	}
	if (sdir_moves && a->dd.nlink >= STORE_MAXLINK &&
	    !(a->have_dst && S_ISDIR(a->dino.mode)))
		return -EMLINK;
	return 0;
}

static int rename_exchange(struct store *st, MDB_txn *txn,
			   struct rename_args *a, uint64_t scookie,
			   uint64_t dcookie, struct sinode *sd,
			   struct sinode *dd, int same, struct cairn_time now)
{
	int rc;

	if ((rc = dirent_set(st, txn, a->sdir->vnode, a->sname, a->dvn,
			     scookie, a->dino.mode)) ||
	    (rc = dirent_set(st, txn, a->ddir->vnode, a->dname, a->svn,
			     dcookie, a->sino.mode)))
		return rc;
	if (!same && S_ISDIR(a->sino.mode)) {
		a->sino.parent = a->ddir->vnode;
		sd->nlink--;
		dd->nlink++;
	}
	if (!same && S_ISDIR(a->dino.mode)) {
		a->dino.parent = a->sdir->vnode;
		dd->nlink--;
		sd->nlink++;
	}
	store_touch_c(&a->sino, now);
	store_touch_c(&a->dino, now);
	if ((rc = store_inode_put(st, txn, a->svn, &a->sino)))
		return rc;
	return store_inode_put(st, txn, a->dvn, &a->dino);
}

static int rename_move(struct store *st, MDB_txn *txn, struct rename_args *a,
		       uint64_t scookie, uint64_t dcookie, struct sinode *sd,
		       struct sinode *dd, int same, struct cairn_time now)
{
	int rc;

	if ((rc = dirent_del(st, txn, a->sdir->vnode, a->sname, scookie)))
		return rc;
	if (a->have_dst) {
		/* The entry keeps its cookie; its old object loses a link. */
		if ((rc = dirent_set(st, txn, a->ddir->vnode, a->dname, a->svn,
				     dcookie, a->sino.mode)))
			return rc;
		if (S_ISDIR(a->dino.mode))
			dd->nlink--;
		if ((rc = unlink_obj(st, txn, a->dvn, &a->dino, now,
				     a->holder, &a->drop)))
			return rc;
	} else if ((rc = dirent_add(st, txn, a->ddir->vnode, dd, a->dname,
				    a->svn, a->sino.mode))) {
		return rc;
	}
	if (!same && S_ISDIR(a->sino.mode)) {
		a->sino.parent = a->ddir->vnode;
		sd->nlink--;
		dd->nlink++;
	}
	store_touch_c(&a->sino, now);
	return store_inode_put(st, txn, a->svn, &a->sino);
}

static int rename_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct rename_args *a = arg;
	int same = a->sdir->vnode == a->ddir->vnode;
	/* One record when both directories are the same one. */
	struct sinode *sd = &a->sd, *dd = same ? &a->sd : &a->dd;
	struct cairn_time now = store_now();
	uint64_t scookie, dcookie = 0;
	uint32_t type;
	int rc;

	a->drop = 0;
	if ((rc = dir_get(st, txn, a->sdir, &a->sd)) ||
	    (rc = dir_get(st, txn, a->ddir, &a->dd)) ||
	    (rc = store_dirent_get(st, txn, a->sdir->vnode, a->sname, &a->svn,
				   &scookie, &type)) ||
	    (rc = child_get(st, txn, a->svn, &a->sino)))
		return rc;
	rc = store_dirent_get(st, txn, a->ddir->vnode, a->dname, &a->dvn,
			      &dcookie, &type);
	if (rc && rc != -ENOENT)
		return rc;
	a->have_dst = rc == 0;
	if (a->have_dst && (rc = child_get(st, txn, a->dvn, &a->dino)))
		return rc;
	if ((rc = rename_check(st, txn, a, same)))
		return rc;
	if (a->have_dst && a->svn == a->dvn)
		return 0; /* two links of one object: nothing to do */
	if (a->flags & RN_EXCHANGE)
		rc = rename_exchange(st, txn, a, scookie, dcookie, sd, dd,
				     same, now);
	else
		rc = rename_move(st, txn, a, scookie, dcookie, sd, dd, same,
				 now);
	if (rc)
		return rc;
	store_touch_mc(sd, now);
	if ((rc = store_inode_put(st, txn, a->sdir->vnode, sd)))
		return rc;
	if (same)
		return 0;
	store_touch_mc(dd, now);
	return store_inode_put(st, txn, a->ddir->vnode, dd);
}

int store_rename(struct store *st, const struct cairn_fid *sdir,
		 const char *sname, const struct cairn_fid *ddir,
		 const char *dname, uint32_t flags, const uint8_t *holder,
		 struct cairn_attr *sdir_out, struct cairn_attr *ddir_out,
		 struct store_changed *ch)
{
	struct rename_args a = { .sdir = sdir, .ddir = ddir, .sname = sname,
				 .dname = dname, .flags = flags };
	uint32_t how = flags & (RN_NOREPLACE | RN_EXCHANGE);
	int rc;

	if ((flags & ~(uint32_t)(RN_NOREPLACE | RN_EXCHANGE | RN_KEEP)) ||
	    how == (RN_NOREPLACE | RN_EXCHANGE))
		return -EINVAL;
	if (flags & RN_KEEP) {
		if (!holder)
			return -EINVAL;
		a.holder = holder;
	}
	if ((rc = store_name_check(sname)) || (rc = store_name_check(dname)))
		return rc;
	if ((rc = store_tx(st, rename_tx, &a)))
		return rc;
	if (a.drop)
		store_data_drop(st, a.dvn, 0);
	if (sdir->vnode == ddir->vnode)
		a.dd = a.sd;
	store_attr_fill(st, sdir->vnode, &a.sd, sdir_out);
	store_attr_fill(st, ddir->vnode, &a.dd, ddir_out);
	ch->n = 0;
	ch->orphan = (struct cairn_fid){ 0 };
	if (a.have_dst && a.svn == a.dvn)
		return 0;
	store_fid_make(a.svn, &a.sino, &ch->fid[ch->n++]);
	if (a.have_dst) {
		store_fid_make(a.dvn, &a.dino, &ch->fid[ch->n++]);
		if (a.holder && a.dino.nlink == 0 && !S_ISDIR(a.dino.mode))
			ch->orphan = ch->fid[ch->n - 1];
	}
	return 0;
}

/* ---- readdir ---------------------------------------------------------- */

/*
 * Listing a directory reads it: relatime applies as to a file's READ (ext4
 * updates atime in getdents). Only a listing from the start counts, so a
 * directory read in many batches costs at most one commit, and only when
 * relatime says the atime is due. Runs after the read transaction ended:
 * store_tx must not be called inside one.
 */
static void readdir_atime(struct store *st, const struct cairn_fid *dir,
			  struct sinode *dino)
{
	struct store_atime_args a = { dir, { 0 } };

	/* Best effort; on success dino follows (only its atime changed). */
	if (store_atime_due(dino, store_now()) &&
	    store_tx(st, store_atime_tx, &a) == 0 && a.ino.dv == dino->dv)
		dino->atime = a.ino.atime;
}

int store_readdir_attr(struct store *st, const struct cairn_fid *dir,
		       uint64_t cookie, uint32_t max, int atime,
		       store_dirent_fn fn, void *arg, int *eof,
		       struct cairn_attr *dir_out, uint64_t *next_cookie)
{
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	struct sinode dino, ino;
	struct cairn_attr attr;
	uint8_t kb[16];
	MDB_val k, v;
	char name[CAIRN_NAME_MAX + 1];
	uint64_t c, child, ck;
	uint32_t type, count = 0;
	size_t nlen;
	int rc;

	*eof = 0;
	if (cookie == UINT64_MAX && !dir_out && !next_cookie) {
		*eof = 1; /* past every cookie: nothing to read */
		return 0;
	}
	if ((rc = store_rtxn(st, &txn)))
		return rc;
	if ((rc = dir_get(st, txn, dir, &dino)))
		goto out;
	if (cookie == UINT64_MAX) {
		*eof = 1;
		goto out;
	}
	if ((rc = store_lmdb_err(mdb_cursor_open(txn, st->db_dirseq, &cur))))
		goto out;
	dirseq_key(dir->vnode, cookie < CAIRN_COOKIE_FIRST ?
		   CAIRN_COOKIE_FIRST : cookie + 1, kb, &k);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (rc == MDB_NOTFOUND || (rc == 0 && (k.mv_size != 16 ||
		    store_be64_get(k.mv_data) != dir->vnode))) {
			*eof = 1;
			rc = 0;
			break;
		}
		if (rc) {
			rc = store_lmdb_err(rc);
			break;
		}
		if (count == max)
			break;
		c = store_be64_get((uint8_t *)k.mv_data + 8);
		if ((rc = store_rec_name_decode(v.mv_data, v.mv_size, name,
						&nlen)))
			break;
		if ((rc = store_dirent_get(st, txn, dir->vnode, name, &child,
					   &ck, &type)) ||
		    (rc = child_get(st, txn, child, &ino))) {
			rc = rc == -ENOENT ? -EIO : rc;
			break;
		}
		store_attr_fill(st, child, &ino, &attr);
		if (fn(arg, c, name, nlen, &attr))
			break;
		count++;
	}
out:
	if (cur)
		mdb_cursor_close(cur);
	store_rtxn_end(st, txn);
	if (rc)
		return rc;
	if (atime && cookie == 0)
		readdir_atime(st, dir, &dino);
	if (dir_out)
		store_attr_fill(st, dir->vnode, &dino, dir_out);
	if (next_cookie)
		*next_cookie = dino.next_cookie;
	return 0;
}

int store_readdir(struct store *st, const struct cairn_fid *dir,
		  uint64_t cookie, uint32_t max, store_dirent_fn fn, void *arg,
		  int *eof)
{
	return store_readdir_attr(st, dir, cookie, max, 1, fn, arg, eof, NULL,
				  NULL);
}

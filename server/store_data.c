/*
 * store_data.c - file data and the attribute changes that go with it:
 * read, write, fsync, fallocate, setattr (truncate).
 *
 * A regular file's bytes live in DATA/objects/XX/N, or while it is small
 * in its inline record in LMDB (SINODE_INLINE, store_int.h: every regular
 * file starts so); its size lives in LMDB and wins. An inline file leaves
 * LMDB for good when a write or truncate takes it past STORE_INLINE_MAX,
 * or on fallocate (inline_out): its bytes are written to a new data file
 * and synced, with the directory entry, before the commit that clears the
 * flag (bytes an fsync made durable stay durable); a crash before that
 * commit leaves a data file the next open removes (strays_remove). A
 * write or truncate that stays within the limit rewrites the record in
 * its commit. The data file may be shorter than the size (a sparse
 * tail, or nothing written yet): those bytes read as zeros. It may also
 * be longer, when the server died after writing data but before the
 * metadata commit; those stale bytes must never become visible, so every
 * operation that makes bytes past the recorded size part of the file
 * (a write starting past it, a truncate up, fallocate) first cuts the data
 * file back to the recorded size.
 *
 * Operations that touch a data file hold the vnode's stripe lock
 * (store_vlock) from reading the recorded size until their metadata
 * commit, so the size they reasoned about cannot change under them. A data
 * file is created when the size first becomes non-zero (fsck relies on
 * it). If the object was deleted meanwhile (the commit says -ESTALE), the
 * data file this operation may have created is removed again.
 *
 * Descriptors come from the data file cache (store_fdc.c), not open().
 *
 * WR_SYNC and store_fsync sync the data and, when it may be needed, the
 * directory holding the data file (data_name_sync): otherwise a power cut
 * could lose the name of a file created since, and with it the data that
 * was acknowledged as stable.
 *
 * A failed sync is sticky (the lesson of PostgreSQL's "fsyncgate"). When
 * fsync or fdatasync of a data file fails, Linux has already marked the
 * unwritten pages clean and reports the error once per open file; a retry
 * returns 0 although the data never reached the disk, and the page cache
 * may go on serving bytes the disk does not hold. The object's data is
 * then in an unknown state. So data_sync_failed drops the descriptor from
 * the fd cache and records SINODE_DATA_LOST in the inode (committed, so it
 * survives a restart); from then on read, write, fsync, fallocate and a
 * truncate to a non-zero size answer -EIO. Attributes, names and xattrs
 * stay usable. The state ends when every byte is defined again: a
 * truncate to size 0 clears it, removing the object ends it. Syncs of an
 * object run under its vlock, so no second sync can see the success that
 * follows a reported error before the state is recorded. If the state
 * cannot be committed, lost_unrecorded fails every object's data until the
 * server restarts. A failed fsync of a directory objects/XX makes every
 * later sync of a file in XX fail (nm_failed) until the server restarts.
 * Not covered: an error that the kernel forgets before anyone syncs (the
 * inode evicted from memory meanwhile).
 *
 * A write does not clear set-user-ID / set-group-ID here: the FUSE client
 * does not ask for HANDLE_KILLPRIV, so the kernel clears them itself with
 * a SETATTR before an unprivileged write, truncate or fallocate, and
 * keeps them for a writer with CAP_FSETID, exactly as on ext4 (checked on
 * a real mount). Clearing them here as well would be wrong for root.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../lib/log.h"
#include "store_int.h"

#define FILE_MAX ((uint64_t)INT64_MAX)

/* 0 for a regular file, dir_err for a directory, else other_err. */
static int reg_only(const struct sinode *ino, int dir_err, int other_err)
{
	if (S_ISDIR(ino->mode))
		return dir_err;
	return S_ISREG(ino->mode) ? 0 : other_err;
}

/* The regular file a FID names, read in its own transaction. */
static int file_get(struct store *st, const struct cairn_fid *fid,
		    struct sinode *ino, int dir_err, int other_err)
{
	MDB_txn *txn;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	rc = store_fid_get(st, txn, fid, ino);
	store_rtxn_end(st, txn);
	return rc ? rc : reg_only(ino, dir_err, other_err);
}

/* Cut a data file that is longer than `keep` (stale bytes) back to it. */
static int data_trim(int fd, uint64_t keep)
{
	struct stat sb;

	if (store_os.fstat(fd, &sb) < 0)
		return -errno;
	if ((uint64_t)sb.st_size > keep &&
	    store_os.ftruncate(fd, (off_t)keep) < 0)
		return -errno;
	return 0;
}

/* -EIO if ino's data is in an unknown state (a failed sync), else 0. */
static int data_usable(struct store *st, const struct sinode *ino)
{
	if ((ino->flags & SINODE_DATA_LOST) ||
	    __atomic_load_n(&st->lost_unrecorded, __ATOMIC_RELAXED))
		return -EIO;
	return 0;
}

struct lost_args {
	const struct cairn_fid *fid;
};

static int lost_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct lost_args *a = arg;
	struct sinode ino;
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, &ino)))
		return rc;
	ino.flags |= SINODE_DATA_LOST;
	return store_inode_put(st, txn, a->fid->vnode, &ino);
}

/*
 * A sync of fid's data file failed with rc (caller holds the vlock): the
 * object enters the sticky error state (see the head of this file).
 * Returns rc, the error this call reports; later calls get -EIO.
 */
static int data_sync_failed(struct store *st, const struct cairn_fid *fid,
			    int rc)
{
	struct lost_args a = { fid };
	int mrc;

	LOCK_ASSERT_HELD(store_vlock(st, fid->vnode));
	store_fdc_forget(st, fid->vnode);
	mrc = store_tx(st, lost_tx, &a);
	if (mrc && mrc != -ESTALE) {
		__atomic_store_n(&st->lost_unrecorded, 1, __ATOMIC_RELAXED);
		log_error("%s: sync of vnode %" PRIu64 " failed (%s) and could "
			  "not be recorded (%s): all file data answers EIO "
			  "until restart", st->dir, fid->vnode, strerror(-rc),
			  strerror(-mrc));
	} else if (mrc == 0) {
		log_error("%s: sync of vnode %" PRIu64 " failed (%s): its data "
			  "answers EIO until it is truncated to 0 or removed",
			  st->dir, fid->vnode, strerror(-rc));
	}
	return rc;
}

void store_data_created(struct store *st, uint64_t vn)
{
	pthread_mutex_lock(&st->nm_lock);
	st->nm_created[vn & 0xff]++;
	pthread_mutex_unlock(&st->nm_lock);
}

/*
 * Make the name of vn's data file durable (fsync of the file itself does
 * not cover its directory entry), whichever operation created the file: a
 * write, a truncate up or a fallocate, in this run or an earlier one.
 * objects/XX is fsynced unless a completed fsync of it is known to cover
 * every file created there so far; the count is read before the fsync
 * starts, so files created during it are not counted as covered.
 */
static int data_name_sync(struct store *st, uint64_t vn)
{
	unsigned xx = (unsigned)(vn & 0xff);
	char path[16];
	uint64_t want;
	int fd, rc = 0;

	pthread_mutex_lock(&st->nm_lock);
	want = st->nm_created[xx];
	/* nm_synced only ever takes values nm_created had. */
	CAIRN_ASSERT(st->nm_synced[xx] <= want);
	if (st->nm_synced[xx] >= want)
		want = 0;
	if (st->nm_failed[xx])
		rc = -EIO;
	pthread_mutex_unlock(&st->nm_lock);
	if (want == 0 || rc)
		return rc;
	snprintf(path, sizeof(path), "objects/%02x", xx);
	fd = store_os.openat(st->dirfd, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return -errno;
	if (store_os.fsync(fd) < 0)
		rc = -errno;
	store_os.close(fd);
	if (rc) {
		/* Like a data file's: a retry on a new descriptor could
		 * report 0 for names that never reached the disk. */
		pthread_mutex_lock(&st->nm_lock);
		st->nm_failed[xx] = 1;
		pthread_mutex_unlock(&st->nm_lock);
		log_error("%s: sync of %s failed (%s): syncs of files in it "
			  "answer EIO until restart", st->dir, path,
			  strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&st->nm_lock);
	if (st->nm_synced[xx] < want)
		st->nm_synced[xx] = want;
	pthread_mutex_unlock(&st->nm_lock);
	return 0;
}

/* ---- read ------------------------------------------------------------- */

int store_atime_due(const struct sinode *ino, struct cairn_time now)
{
	return store_time_cmp(ino->atime, ino->mtime) <= 0 ||
	       store_time_cmp(ino->atime, ino->ctime) <= 0 ||
	       now.sec - ino->atime.sec >= 24 * 3600;
}

/* relatime (also for READDIR, see store_dir.c). */
int store_atime_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct store_atime_args *a = arg;
	struct cairn_time now = store_now();
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, &a->ino)))
		return rc;
	if (!store_atime_due(&a->ino, now))
		return 0;
	a->ino.atime = now;
	return store_inode_put(st, txn, a->fid->vnode, &a->ino);
}

static int data_pread(int fd, uint8_t *buf, uint32_t n, uint64_t off)
{
	uint32_t got = 0;
	ssize_t r;

	while (got < n) {
		r = store_os.pread(fd, buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (uint32_t)r;
	}
	memset(buf + got, 0, n - got); /* past the data file's end: zeros */
	return 0;
}

/*
 * fid's inode (*ino) and, while it is inline, bytes [off, off + len) of
 * it from its record (*n: how many there are), in one read transaction.
 * 1 when it was inline, 0 when it is not (or no longer: moved to a data
 * file since the caller looked), or -errno.
 */
static int inline_pread(struct store *st, const struct cairn_fid *fid,
			uint64_t off, uint32_t len, void *buf, uint32_t *n,
			struct sinode *ino)
{
	MDB_txn *txn;
	MDB_val v;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	rc = store_fid_get(st, txn, fid, ino);
	if (rc == 0 && (ino->flags & SINODE_INLINE) &&
	    (rc = store_inline_get(st, txn, fid->vnode, &v)) == 0) {
		uint32_t want = 0, have = 0;

		if (off < ino->size)
			want = ino->size - off < len
				       ? (uint32_t)(ino->size - off) : len;
		if (off < v.mv_size)
			have = v.mv_size - off < want
				       ? (uint32_t)(v.mv_size - off) : want;
		if (have)
			memcpy(buf, (const uint8_t *)v.mv_data + off, have);
		memset((uint8_t *)buf + have, 0, want - have);
		*n = want;
		rc = 1;
	}
	store_rtxn_end(st, txn);
	return rc;
}

int store_read(struct store *st, const struct cairn_fid *fid, uint64_t off,
	       uint32_t len, void *buf, uint32_t *n, struct cairn_attr *out)
{
	struct store_atime_args a = { fid, { 0 } };
	struct store_fh fh;
	uint32_t want = 0;
	int rc, inl;

	/* One read transaction: the inode, and an inline file's bytes. */
	if ((inl = inline_pread(st, fid, off, len, buf, &want, &a.ino)) < 0)
		return inl;
	if ((rc = reg_only(&a.ino, -EISDIR, -EINVAL)) ||
	    (rc = data_usable(st, &a.ino)))
		return rc;
	if (inl)
		goto done;
	if (off < a.ino.size)
		want = a.ino.size - off < len ? (uint32_t)(a.ino.size - off)
					      : len;
	if (want > 0) {
		rc = store_fdc_get(st, fid->vnode, 0, &fh);
		if (rc == -ENOENT) {
			memset(buf, 0, want);
		} else if (rc) {
			return rc;
		} else {
			rc = data_pread(fh.fd, buf, want, off);
			store_fdc_put(st, &fh);
			if (rc)
				return rc;
		}
	}
done:
	/* Best effort: a failed atime update does not fail the read. */
	if (store_atime_due(&a.ino, store_now())) {
		struct store_atime_args b = { fid, { 0 } };

		if (store_tx(st, store_atime_tx, &b) == 0)
			a.ino = b.ino;
	}
	*n = want;
	store_attr_fill(st, fid->vnode, &a.ino, out);
	return 0;
}

struct atime_many_args {
	const struct cairn_fid *fids;
	size_t n, moved;
};

static int atime_many_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct atime_many_args *a = arg;

	a->moved = 0;
	for (size_t i = 0; i < a->n; i++) {
		struct store_atime_args one = { &a->fids[i], { 0 } };
		int rc = store_fid_get(st, txn, one.fid, &one.ino);

		if (rc == -ESTALE || rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		if (S_ISDIR(one.ino.mode) || !store_atime_due(&one.ino,
							      store_now()))
			continue;
		if ((rc = store_atime_tx(st, txn, &one)))
			return rc;
		a->moved++;
	}
	return 0;
}

int store_atime_many(struct store *st, const struct cairn_fid *fids,
		     size_t n, size_t *moved)
{
	struct atime_many_args a = { fids, n, 0 };
	int rc = store_tx(st, atime_many_tx, &a);

	*moved = rc ? 0 : a.moved;
	return rc;
}

/* ---- write ------------------------------------------------------------ */

struct write_args {
	const struct cairn_fid *fid;
	uint64_t end;      /* new minimum size */
	struct sinode ino;
	int keeptime;      /* WR_KEEPTIME: mtime and ctime stay */
	/* WRITEATTR: the attribute changes applied after the write, in the
	 * same commit (never a size). */
	const struct store_setattr *then;
	/* An inline file's: the bytes at off go into its record (inl), or
	 * it leaves LMDB empty for the data file just written (uninline). */
	const uint8_t *inl;
	uint64_t off;
	uint32_t len;
	int uninline;
};

/* Record vn (size bytes before) with size `size` after: its bytes, then
 * zeros, then (len > 0) p's len bytes at off. In a write transaction. */
static int inline_rewrite(struct store *st, MDB_txn *txn, uint64_t vn,
			  uint64_t before, uint64_t size, const uint8_t *p,
			  uint64_t off, uint32_t len)
{
	uint8_t buf[STORE_INLINE_MAX];
	MDB_val v;
	size_t keep;
	int rc;

	if (size > STORE_INLINE_MAX || off + len > size)
		return -EIO;
	if ((rc = store_inline_get(st, txn, vn, &v)))
		return rc;
	keep = v.mv_size < before ? v.mv_size : (size_t)before;
	if (keep > size)
		keep = (size_t)size;
	if (keep)
		memcpy(buf, v.mv_data, keep);
	memset(buf + keep, 0, (size_t)size - keep);
	if (len)
		memcpy(buf + off, p, len);
	return store_inline_put(st, txn, vn, buf, (size_t)size);
}

static int write_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct write_args *a = arg;
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, &a->ino)))
		return rc;
	/* The caller holds the vlock: nothing moved it out meanwhile. */
	if ((a->inl || a->uninline) && !(a->ino.flags & SINODE_INLINE))
		return -EIO;
	if (a->uninline) {
		a->ino.flags &= ~SINODE_INLINE;
		if ((rc = store_inline_put(st, txn, a->fid->vnode, NULL, 0)))
			return rc;
	} else if (a->inl &&
		   (rc = inline_rewrite(st, txn, a->fid->vnode, a->ino.size,
					a->end > a->ino.size ? a->end
							     : a->ino.size,
					a->inl, a->off, a->len))) {
		return rc;
	}
	if (a->end > a->ino.size)
		a->ino.size = a->end;
	if (a->keeptime)
		a->ino.dv++; /* what store_touch_mc does besides the times */
	else
		store_touch_mc(&a->ino, store_now());
	if (a->then)
		store_setattr_fields(&a->ino, a->then, store_now());
	return store_inode_put(st, txn, a->fid->vnode, &a->ino);
}

/* Commit fn; drop the data file again if the object vanished meanwhile
 * (this operation may have created it). Caller holds vn's vlock, from
 * reading the size it reasoned about until this commit. */
static int data_commit_tx(struct store *st, uint64_t vn, store_tx_fn fn,
			  void *arg)
{
	int rc;

	LOCK_ASSERT_HELD(store_vlock(st, vn));
	rc = store_tx(st, fn, arg);
	if (rc == -ESTALE)
		store_data_drop(st, vn, 1); /* the caller holds the vlock */
	return rc;
}

static int data_commit(struct store *st, struct write_args *a)
{
	return data_commit_tx(st, a->fid->vnode, write_tx, a);
}

static int data_pwrite(int fd, const uint8_t *buf, uint32_t len, uint64_t off)
{
	uint32_t done = 0;
	ssize_t r;

	while (done < len) {
		r = store_os.pwrite(fd, buf + done, len - done,
				    (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		done += (uint32_t)r;
	}
	return 0;
}

static int out_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct write_args *a = arg;
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, &a->ino)))
		return rc;
	if (!(a->ino.flags & SINODE_INLINE))
		return -EIO; /* the caller holds the vlock */
	a->ino.flags &= ~SINODE_INLINE;
	if ((rc = store_inline_put(st, txn, a->fid->vnode, NULL, 0)))
		return rc;
	return store_inode_put(st, txn, a->fid->vnode, &a->ino);
}

/*
 * Move fid's bytes from its inline record to a data file (see the head of
 * the file), unless it is not inline (any more); *ino gets its state
 * after. Caller holds the vlock.
 */
static int inline_out(struct store *st, const struct cairn_fid *fid,
		      struct sinode *ino)
{
	struct write_args a = { .fid = fid };
	struct store_fh fh = { -1, NULL };
	uint8_t buf[STORE_INLINE_MAX];
	uint32_t n = 0;
	int rc;

	LOCK_ASSERT_HELD(store_vlock(st, fid->vnode));
	if ((rc = inline_pread(st, fid, 0, STORE_INLINE_MAX, buf, &n,
			       ino)) <= 0)
		return rc;
	if (n) {
		if ((rc = store_fdc_get(st, fid->vnode, 1, &fh)))
			return rc;
		if (store_os.ftruncate(fh.fd, 0) < 0 ||
		    (rc = data_pwrite(fh.fd, buf, n, 0)) ||
		    store_os.fdatasync(fh.fd) < 0)
			rc = rc ? rc : -errno;
		store_fdc_put(st, &fh);
		/* A failure leaves the file inline, its bytes unchanged. */
		if (rc || (rc = data_name_sync(st, fid->vnode)))
			return rc;
	}
	if ((rc = data_commit_tx(st, fid->vnode, out_tx, &a)) == 0)
		*ino = a.ino;
	return rc;
}

int store_write(struct store *st, const struct cairn_fid *fid, uint64_t off,
		const void *buf, uint32_t len, uint32_t flags,
		struct cairn_attr *out)
{
	return store_write_attr(st, fid, off, buf, len, flags, NULL, out);
}

int store_write_attr(struct store *st, const struct cairn_fid *fid,
		     uint64_t off, const void *buf, uint32_t len,
		     uint32_t flags, const struct store_setattr *then,
		     struct cairn_attr *out)
{
	struct write_args a = { .fid = fid, .end = off + len,
				.keeptime = !!(flags & WR_KEEPTIME),
				.then = then };
	pthread_mutex_t *l = store_vlock(st, fid->vnode);
	struct store_fh fh = { -1, NULL };
	int rc;

	if (off > FILE_MAX - len)
		return -EFBIG;
	pthread_mutex_lock(l);
	if ((rc = file_get(st, fid, &a.ino, -EISDIR, -EINVAL)) ||
	    (rc = data_usable(st, &a.ino)))
		goto out;
	if (len == 0)
		goto out; /* like write(2): nothing changes */
	if ((a.ino.flags & SINODE_INLINE) &&
	    off + len <= store_inline_room(st)) {
		a.inl = buf;
		a.off = off;
		a.len = len;
		if ((rc = data_commit(st, &a)) == 0 && (flags & WR_SYNC))
			rc = store_sync(st);
		goto out;
	}
	/* Past the limit: an empty one leaves LMDB in this commit. */
	if ((a.ino.flags & SINODE_INLINE) && a.ino.size == 0)
		a.uninline = 1;
	else if ((a.ino.flags & SINODE_INLINE) &&
		 (rc = inline_out(st, fid, &a.ino)))
		goto out;
	if ((rc = store_fdc_get(st, fid->vnode, 1, &fh)))
		goto out;
	if (off > a.ino.size && (rc = data_trim(fh.fd, a.ino.size)))
		goto out;
	if ((rc = data_pwrite(fh.fd, buf, len, off)))
		goto out;
	if ((flags & WR_SYNC) && store_os.fdatasync(fh.fd) < 0) {
		rc = data_sync_failed(st, fid, -errno);
		goto out;
	}
	if ((flags & WR_SYNC) && (rc = data_name_sync(st, fid->vnode)))
		goto out;
	if ((rc = data_commit(st, &a)) == 0 && (flags & WR_SYNC))
		rc = store_sync(st);
out:
	store_fdc_put(st, &fh);
	pthread_mutex_unlock(l);
	if (rc == 0)
		store_attr_fill(st, fid->vnode, &a.ino, out);
	return rc;
}

int store_create_data(struct store *st, const struct cairn_fid *dir,
		      const char *name, uint32_t mode, uint32_t uid,
		      uint32_t gid, uint32_t flags, const struct cairn_fid *fid,
		      struct cairn_time t, const void *data, uint32_t len,
		      const struct store_setattr *then, int *created,
		      struct cairn_attr *out, struct cairn_attr *dir_out)
{
	pthread_mutex_t *l = store_vlock(st, fid->vnode);
	struct store_fh fh = { -1, NULL };
	struct sinode ino;
	MDB_txn *txn;
	int rc, exists;

	if (!S_ISREG(mode) || !(flags & CR_FID) || len == 0 ||
	    len > CAIRN_MAX_IO)
		return -EINVAL;
	pthread_mutex_lock(l);
	if ((rc = store_rtxn(st, &txn))) {
		pthread_mutex_unlock(l);
		return rc;
	}
	rc = store_inode_get(st, txn, fid->vnode, &ino);
	store_rtxn_end(st, txn);
	exists = rc != -ENOENT;
	if (!exists && len <= store_inline_room(st)) {
		/* One commit makes the file and its inline record. */
		rc = store_create_sized(st, dir, name, mode, uid, gid, 0,
					flags, fid, t, len, data, then,
					created, out, dir_out);
	} else if (!exists) {
		/* The data first (a crash before the commit leaves a stray
		 * data file, which the next open removes), then one commit
		 * that makes the file with them. */
		if (!(rc = store_fdc_get(st, fid->vnode, 1, &fh)))
			rc = data_pwrite(fh.fd, data, len, 0);
		store_fdc_put(st, &fh);
		if (!rc)
			rc = store_create_sized(st, dir, name, mode, uid, gid,
						0, flags, fid, t, len, NULL,
						then, created, out, dir_out);
		/* Not made by us: what we wrote is no one's. */
		if (rc || *created != 1)
			store_data_drop(st, fid->vnode, 1);
	}
	pthread_mutex_unlock(l);
	if (!exists || rc)
		return rc;
	/* Made by an earlier copy of this request: its first bytes once,
	 * if that copy did not get to write them. */
	rc = store_create_fid(st, dir, name, mode, uid, gid, 0, flags, fid, t,
			      created, out, dir_out);
	if (rc == 0 && out->dv == 1)
		rc = store_write(st, &out->fid, 0, data, len, WR_KEEPTIME, out);
	return rc;
}

/* Metadata is synced on every commit already: only a regular file's data
 * (and its name) needs a sync, unless its bytes are inline. Under the vlock, see the head of the file. */
int store_fsync(struct store *st, const struct cairn_fid *fid,
		uint32_t flags)
{
	pthread_mutex_t *l = store_vlock(st, fid->vnode);
	struct store_fh fh = { -1, NULL };
	struct sinode ino;
	int rc;

	pthread_mutex_lock(l);
	rc = file_get(st, fid, &ino, 0, 0);
	if (rc)
		goto out;
	if (!S_ISREG(ino.mode) || (ino.flags & SINODE_INLINE)) {
		rc = store_sync(st);
		goto out;
	}
	if ((rc = data_usable(st, &ino)))
		goto out;
	rc = store_fdc_get(st, fid->vnode, 0, &fh);
	if (rc == -ENOENT) {
		rc = store_sync(st);
		goto out;
	}
	if (rc)
		goto out;
	if (flags & FS_DATASYNC)
		rc = store_os.fdatasync(fh.fd) < 0 ? -errno : 0;
	else
		rc = store_os.fsync(fh.fd) < 0 ? -errno : 0;
	store_fdc_put(st, &fh);
	if (rc)
		rc = data_sync_failed(st, fid, rc);
	else if (!(rc = data_name_sync(st, fid->vnode)))
		rc = store_sync(st);
out:
	pthread_mutex_unlock(l);
	return rc;
}

/* ---- fallocate -------------------------------------------------------- */

static const uint32_t falloc_modes[] = {
	0,
	FALLOC_FL_KEEP_SIZE,
	FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	FALLOC_FL_ZERO_RANGE,
	FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
};

static int data_fallocate(int fd, uint32_t mode, uint64_t off, uint64_t len)
{
	if (store_os.fallocate(fd, (int)mode, (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP || !(mode & FALLOC_FL_ZERO_RANGE))
		return -errno;
	/* No ZERO_RANGE on this file system: punch, then allocate. */
	if (store_os.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       (off_t)off, (off_t)len) < 0 ||
	    store_os.fallocate(fd, (int)(mode & FALLOC_FL_KEEP_SIZE),
			       (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}

int store_fallocate(struct store *st, const struct cairn_fid *fid,
		    uint32_t mode, uint64_t off, uint64_t len,
		    struct cairn_attr *out)
{
	/* ext4 (Linux 6.x) moves mtime and ctime on every successful
	 * fallocate, KEEP_SIZE and no-op allocations included. */
	struct write_args a = { .fid = fid };
	pthread_mutex_t *l = store_vlock(st, fid->vnode);
	struct store_fh fh = { -1, NULL };
	size_t i;
	int rc;

	for (i = 0; i < sizeof(falloc_modes) / sizeof(falloc_modes[0]); i++)
		if (falloc_modes[i] == mode)
			break;
	if (i == sizeof(falloc_modes) / sizeof(falloc_modes[0]))
		return -EOPNOTSUPP;
	if (len == 0)
		return -EINVAL;
	if (off > FILE_MAX || len > FILE_MAX - off)
		return -EFBIG;
	pthread_mutex_lock(l);
	if ((rc = file_get(st, fid, &a.ino, -EISDIR, -ENODEV)) ||
	    (rc = data_usable(st, &a.ino)) ||
	    ((a.ino.flags & SINODE_INLINE) &&
	     (rc = inline_out(st, fid, &a.ino))))
		goto out;
	if ((rc = store_fdc_get(st, fid->vnode, 1, &fh)) ||
	    (rc = data_trim(fh.fd, a.ino.size)) ||
	    (rc = data_fallocate(fh.fd, mode, off, len)))
		goto out;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > a.ino.size)
		a.end = off + len;
	rc = data_commit(st, &a);
out:
	store_fdc_put(st, &fh);
	pthread_mutex_unlock(l);
	if (rc == 0)
		store_attr_fill(st, fid->vnode, &a.ino, out);
	return rc;
}

/* ---- setattr ---------------------------------------------------------- */

struct setattr_args {
	const struct cairn_fid *fid;
	const struct store_setattr *sa;
	struct sinode ino;
};

/* chown (an owner or group given, changed or not) of anything but a
 * directory drops set-user-ID and (group-executable) set-group-ID, as
 * Linux's chown does; a mode given alongside wins. The client's kernel
 * leaves this to us (FUSE_HANDLE_KILLPRIV_V2, client/fuseio.h). */
static void setattr_owner(struct sinode *ino, const struct store_setattr *sa)
{
	if ((sa->valid & (SA_UID | SA_GID)) && !S_ISDIR(ino->mode) &&
	    !(sa->valid & SA_MODE)) {
		ino->mode &= ~(uint32_t)S_ISUID;
		if (ino->mode & S_IXGRP)
			ino->mode &= ~(uint32_t)S_ISGID;
	}
	if (sa->valid & SA_UID)
		ino->uid = sa->uid;
	if (sa->valid & SA_GID)
		ino->gid = sa->gid;
}

static int setattr_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct setattr_args *a = arg;
	const struct store_setattr *sa = a->sa;
	struct sinode *ino = &a->ino;
	struct cairn_time now = store_now();
	int keep;
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, ino)))
		return rc;
	keep = (sa->valid & SA_KEEPTIME) && S_ISREG(ino->mode);
	if (sa->valid & SA_SIZE) {
		if (S_ISDIR(ino->mode))
			return -EISDIR;
		if (!S_ISREG(ino->mode))
			return -EINVAL;
		/* Within the limit (store_setattr moved it out else). */
		if ((ino->flags & SINODE_INLINE) &&
		    (rc = inline_rewrite(st, txn, a->fid->vnode, ino->size,
					 sa->size, NULL, 0, 0)))
			return rc;
		ino->size = sa->size;
		if (!keep)
			ino->mtime = now;
		if (sa->size == 0) /* every byte defined again */
			ino->flags &= ~SINODE_DATA_LOST;
	}
	store_setattr_fields(ino, sa, now);
	return store_inode_put(st, txn, a->fid->vnode, ino);
}

/* What a SETATTR does besides the size (setattr_tx; after a write,
 * write_tx; after a create, create_tx): owner, mode, times, and the data
 * version moved. */
void store_setattr_fields(struct sinode *ino, const struct store_setattr *sa,
			  struct cairn_time now)
{
	int keep = (sa->valid & SA_KEEPTIME) && S_ISREG(ino->mode);

	setattr_owner(ino, sa);
	if (sa->valid & SA_MODE)
		ino->mode = (ino->mode & S_IFMT) | (sa->mode & 07777);
	if (sa->valid & SA_ATIME_NOW)
		ino->atime = now;
	else if (sa->valid & SA_ATIME)
		ino->atime = sa->atime;
	if (sa->valid & SA_MTIME_NOW)
		ino->mtime = now;
	else if (sa->valid & SA_MTIME)
		ino->mtime = sa->mtime;
	if (sa->valid & SA_CTIME)
		ino->ctime = sa->ctime;
	else if (!keep)
		ino->ctime = now;
	ino->dv += sa->steps ? sa->steps : 1;
}

/* Bring the data file in line with a new size before it is committed.
 * Caller holds the vlock. */
static int setattr_data(struct store *st, const struct cairn_fid *fid,
			uint64_t size)
{
	struct sinode ino;
	struct store_fh fh;
	int rc;

	LOCK_ASSERT_HELD(store_vlock(st, fid->vnode));
	if ((rc = file_get(st, fid, &ino, -EISDIR, -EINVAL)))
		return rc;
	if ((ino.flags & SINODE_INLINE) && size <= store_inline_room(st))
		return 0; /* setattr_tx rewrites the record */
	if ((ino.flags & SINODE_INLINE) && (rc = inline_out(st, fid, &ino)))
		return rc;
	if (size != 0 && (rc = data_usable(st, &ino)))
		return rc;
	rc = store_fdc_get(st, fid->vnode, size != 0, &fh);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = data_trim(fh.fd, size < ino.size ? size : ino.size);
	store_fdc_put(st, &fh);
	return rc;
}

int store_setattr(struct store *st, const struct cairn_fid *fid,
		  const struct store_setattr *sa, struct cairn_attr *out)
{
	struct setattr_args a = { fid, sa, { 0 } };
	pthread_mutex_t *l = store_vlock(st, fid->vnode);
	int rc;

	if (!(sa->valid & SA_SIZE)) {
		rc = store_tx(st, setattr_tx, &a);
	} else if (sa->size > FILE_MAX) {
		rc = -EFBIG;
	} else {
		pthread_mutex_lock(l);
		rc = setattr_data(st, fid, sa->size);
		if (rc == 0)
			rc = data_commit_tx(st, fid->vnode, setattr_tx, &a);
		pthread_mutex_unlock(l);
	}
	if (rc == 0)
		store_attr_fill(st, fid->vnode, &a.ino, out);
	return rc;
}

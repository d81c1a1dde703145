/*
 * store.c - the storage engine: opening a data directory, the LMDB record
 * formats, group commit, attributes and xattrs. Namespace operations live
 * in store_dir.c, file data in store_data.c, the cache of open data files
 * in store_fdc.c, the offline check in store_fsck.c; store_int.h is what
 * they share; orphans (unlinked objects kept for a client) are in
 * store_orphan.c. Opening a store also removes data files that a crash
 * left without an inode (strays_remove).
 *
 * Durability and group commit
 * ---------------------------
 * Every mutating call packages its LMDB work as a function (store_tx_fn)
 * and hands it to store_tx(). Callers queue up; one of them becomes the
 * batch leader, opens ONE LMDB write transaction, runs every queued
 * function in its own nested transaction (so one failing operation rolls
 * back only its own writes), and commits. Meanwhile new callers queue
 * behind it and form the next batch. A commit therefore covers every
 * operation that arrived while the previous one was syncing, and N
 * concurrent operations cost one commit instead of N.
 *
 * The environment is opened with MDB_NOMETASYNC: mdb_txn_commit()
 * fdatasync()s the batch's data pages, then writes the meta page that
 * points to them without a sync. The LMDB file is therefore always a
 * valid tree (kill -9 or power loss): the pages a meta page points to are
 * on disk before it is written. What a power cut may lose is the last
 * commit (its meta page), as a local file system loses recent changes
 * nobody synced; the next commit's fdatasync makes it durable, and so
 * does store_sync, which FSYNC (of a file or a directory), WR_SYNC, the
 * server's once-a-second tick and store_close call. That is the rule of a
 * local file system: a change is durable after fsync of the file or its
 * directory, or within about a second. What that saves is the meta
 * page's O_DSYNC write, the cheaper of the two syncs (strace over 200
 * creates, writes and removes: 643 fdatasyncs before, 637 after, time in
 * pwrite 24 ms before, 17 ms after). The fdatasync remains, one per
 * commit: about 150 us of an unlink's 380 us here (strace -T, p50).
 * MDB_NOSYNC with a shared mdb_env_sync() would skip the other sync too,
 * and is fine for kill -9 (committed pages are in the kernel's page cache
 * either way), but not for power loss: without the sync between data
 * pages and meta page, the kernel may write a new meta page before the
 * pages it points to, and with several commits between syncs LMDB may
 * already have reused pages that the last durable meta page still
 * references. ext4 does not preserve write order, so a power cut could
 * leave a corrupt tree. Concurrent operations still share one commit
 * (measured before NOMETASYNC: 8 threads x 200 creates took 396 commits,
 * 64 threads x 25 creates 63).
 *
 * A data file whose object a commit removed is unlinked right after that
 * commit, before it is durable. After a power cut that loses the commit
 * the object is back (as on a local file system) but its data is gone:
 * it reads as holes. Only an object removed within the last second, and
 * never synced, can come back like that.
 *
 * File data is written with pwrite() to the data file before its metadata
 * commit: after kill -9 it is in the page cache; after a power loss only
 * what WR_SYNC / store_fsync forced is guaranteed. LMDB's size is the
 * authority, so a crash between the data write and the commit can leave a
 * data file longer than the recorded size; such bytes are cut off before
 * they could become visible (see store_data.c).
 *
 * The environment uses MDB_NOTLS: read transactions are begun from any
 * server thread and are not tied to a thread's reader slot, so a thread
 * pool of any size works and a batch leader may be any thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include "../lib/log.h"
#include "store_int.h"

/* ---- OS seam ---------------------------------------------------------- */

static int os_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return openat(dirfd, path, flags | O_CLOEXEC, mode);
}

#define STORE_OS_REAL {			\
	.openat = os_openat,			\
	.close = close,				\
	.pread = pread,				\
	.pwrite = pwrite,			\
	.fsync = fsync,				\
	.fdatasync = fdatasync,			\
	.ftruncate = ftruncate,			\
	.fallocate = fallocate,			\
	.fstat = fstat,				\
	.fstatat = fstatat,			\
	.unlinkat = unlinkat,			\
}

static const struct store_os store_os_real = STORE_OS_REAL;
struct store_os store_os = STORE_OS_REAL;

void store_os_reset(void)
{
	store_os = store_os_real;
}

/* ---- small helpers ---------------------------------------------------- */

/*
 * Per-thread bookkeeping for the rules of store_int.h, read only by debug
 * builds' asserts (a thread-local add each; no lock): read transactions
 * this thread has open, and whether it is running a batch's functions.
 */
static __thread int rtxn_open;
static __thread int in_batch;

int store_lmdb_err(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case MDB_PAGE_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}

/*
 * The coarse clock (one timer tick), as Linux's own file systems stamp
 * times: a client kernel that keeps a file's times itself (the FUSE
 * writeback cache) reads the same clock, so on one machine a write in the
 * tick of the file's creation finds nothing to write back (no SETATTR).
 */
struct cairn_time store_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (struct cairn_time){ ts.tv_sec, (uint32_t)ts.tv_nsec };
}

int store_time_cmp(struct cairn_time a, struct cairn_time b)
{
	if (a.sec != b.sec)
		return a.sec < b.sec ? -1 : 1;
	if (a.nsec != b.nsec)
		return a.nsec < b.nsec ? -1 : 1;
	return 0;
}

void store_be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

uint64_t store_be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

int store_name_check(const char *name)
{
	size_t n = strlen(name);

	if (n == 0)
		return -ENOENT;
	if (n > CAIRN_NAME_MAX)
		return -ENAMETOOLONG;
	if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

/* ---- inode records ---------------------------------------------------- */

int store_inode_get(struct store *st, MDB_txn *txn, uint64_t vn,
		    struct sinode *ino)
{
	uint8_t kb[8];
	MDB_val k = { 8, kb }, v;
	int rc;

	store_be64_put(kb, vn);
	rc = mdb_get(txn, st->db_inodes, &k, &v);
	if (rc)
		return store_lmdb_err(rc);
	return store_rec_inode_decode(v.mv_data, v.mv_size, ino);
}

int store_inode_put(struct store *st, MDB_txn *txn, uint64_t vn,
		    const struct sinode *ino)
{
	uint8_t kb[8], vb[STORE_REC_INODE_SIZE];
	MDB_val k = { 8, kb }, v = { sizeof(vb), vb };

	store_be64_put(kb, vn);
	store_rec_inode_encode(ino, vb);
	return store_lmdb_err(mdb_put(txn, st->db_inodes, &k, &v, 0));
}

int store_fid_get(struct store *st, MDB_txn *txn, const struct cairn_fid *fid,
		  struct sinode *ino)
{
	int rc;

	if (fid->vol != STORE_VOL || fid->vnode == 0)
		return -ESTALE;
	rc = store_inode_get(st, txn, fid->vnode, ino);
	if (rc == -ENOENT || (rc == 0 && ino->uniq != fid->uniq))
		return -ESTALE;
	return rc;
}

void store_fid_make(uint64_t vn, const struct sinode *ino,
		    struct cairn_fid *fid)
{
	fid->vol = STORE_VOL;
	fid->vnode = vn;
	fid->uniq = ino->uniq;
}

/*
 * Entries live in LMDB, so a directory has no size of its own. Report
 * what ext4 would: one 4 KiB block when small, growing by blocks with the
 * entries, never shrinking (ext4 does not give blocks back on unlink
 * either). Entries ever added are counted by next_cookie; 32 bytes each
 * is ext4's cost for names of about 12 characters in an htree directory
 * (measured: 1000 8-character names take 28 KiB). Tools such as du and
 * some archivers treat a directory of size 0 as suspicious.
 */
static uint64_t dir_size(const struct sinode *ino)
{
	uint64_t added = ino->next_cookie > CAIRN_COOKIE_FIRST ?
			 ino->next_cookie - CAIRN_COOKIE_FIRST : 0;
	uint64_t blocks = (added + 4096 / 32 - 1) / (4096 / 32);

	return 4096 * (blocks ? blocks : 1);
}

void store_attr_fill(struct store *st, uint64_t vn, const struct sinode *ino,
		     struct cairn_attr *out)
{
	char path[48];
	struct stat sb;
	struct store_fh fh;
	int rc;

	memset(out, 0, sizeof(*out));
	store_fid_make(vn, ino, &out->fid);
	out->mode = ino->mode;
	out->nlink = ino->nlink;
	out->uid = ino->uid;
	out->gid = ino->gid;
	out->rdev = ino->rdev;
	out->size = ino->size;
	out->atime = ino->atime;
	out->mtime = ino->mtime;
	out->ctime = ino->ctime;
	out->dv = ino->dv;
	if (S_ISREG(ino->mode) && (ino->flags & SINODE_INLINE)) {
		/* What ext4 would give the bytes: whole 4 KiB blocks. */
		out->blocks = (ino->size + 4095) / 4096 * 8;
	} else if (S_ISREG(ino->mode)) {
		/* A cached descriptor spares the path walk (most of the
		 * cost of a GETATTR when the file is in use). */
		if (store_fdc_peek(st, vn, &fh) == 0) {
			rc = store_os.fstat(fh.fd, &sb);
			store_fdc_put(st, &fh);
		} else {
			store_data_path(vn, path, sizeof(path));
			rc = store_os.fstatat(st->dirfd, path, &sb, 0);
		}
		if (rc == 0)
			out->blocks = (uint64_t)sb.st_blocks;
	} else if (S_ISDIR(ino->mode)) {
		out->size = dir_size(ino);
		out->blocks = out->size / 512;
	}
}

static uint32_t uniq_new(void)
{
	uint32_t u = 0;

	if (getrandom(&u, sizeof(u), 0) != sizeof(u)) {
		struct cairn_time t = store_now();
		u = (uint32_t)t.sec ^ t.nsec ^ (uint32_t)rand();
	}
	return u ? u : 1;
}

static int meta_get(struct store *st, MDB_txn *txn, const char *key,
		    MDB_val *v)
{
	MDB_val k = { strlen(key), (void *)key };

	return store_lmdb_err(mdb_get(txn, st->db_meta, &k, v));
}

static int meta_put(struct store *st, MDB_txn *txn, const char *key,
		    const void *val, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v = { len, (void *)val };

	return store_lmdb_err(mdb_put(txn, st->db_meta, &k, &v, 0));
}

static int meta_put_u32(struct store *st, MDB_txn *txn, const char *key,
			uint32_t x)
{
	uint8_t b[4];

	store_rec_meta_u32_encode(x, b);
	return meta_put(st, txn, key, b, sizeof(b));
}

static int meta_put_u64(struct store *st, MDB_txn *txn, const char *key,
			uint64_t x)
{
	uint8_t b[8];

	store_rec_meta_u64_encode(x, b);
	return meta_put(st, txn, key, b, sizeof(b));
}

/* next_vnode, checked: every vnode in use (and every one handed out by
 * store_fids) is below it. */
static int next_vnode_get(struct store *st, MDB_txn *txn, uint64_t *next)
{
	MDB_val v;
	int rc;

	rc = meta_get(st, txn, "next_vnode", &v);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	if ((rc = store_rec_meta_u64_decode(v.mv_data, v.mv_size, next)))
		return rc;
	if (*next <= STORE_ROOT || *next == UINT64_MAX)
		return -EUCLEAN;
	return 0;
}

void store_inode_init(uint32_t mode, struct cairn_time now,
		      struct sinode *ino)
{
	memset(ino, 0, sizeof(*ino));
	ino->mode = mode;
	ino->nlink = S_ISDIR(mode) ? 2 : 1;
	ino->uniq = uniq_new();
	ino->dv = 1;
	ino->next_cookie = S_ISDIR(mode) ? CAIRN_COOKIE_FIRST : 0;
	ino->atime = ino->mtime = ino->ctime = now;
}

int store_inode_new(struct store *st, MDB_txn *txn, uint32_t mode,
		    uint64_t *vn, struct sinode *ino)
{
	uint64_t next;
	int rc;

	if ((rc = next_vnode_get(st, txn, &next)) ||
	    (rc = meta_put_u64(st, txn, "next_vnode", next + 1)))
		return rc;
	store_inode_init(mode, store_now(), ino);
	*vn = next;
	return 0;
}

int store_vnode_handed_out(struct store *st, MDB_txn *txn, uint64_t vn)
{
	uint64_t next;
	int rc;

	if ((rc = next_vnode_get(st, txn, &next)))
		return rc;
	return vn > STORE_ROOT && vn < next ? 0 : -EINVAL;
}

struct fids_args {
	uint32_t count;
	struct cairn_fid first;
};

static int fids_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct fids_args *a = arg;
	uint64_t next;
	int rc;

	if ((rc = next_vnode_get(st, txn, &next)))
		return rc;
	if (UINT64_MAX - next <= a->count)
		return -ENOSPC;
	if ((rc = meta_put_u64(st, txn, "next_vnode", next + a->count)))
		return rc;
	a->first.vol = STORE_VOL;
	a->first.vnode = next;
	a->first.uniq = uniq_new();
	return 0;
}

int store_fids(struct store *st, uint32_t count, struct cairn_fid *first)
{
	struct fids_args a = { .count = count };
	int rc;

	if (count == 0 || count > CAIRN_FIDS_MAX)
		return -EINVAL;
	if ((rc = store_tx(st, fids_tx, &a)))
		return rc;
	*first = a.first;
	return 0;
}

/* Delete every key of `dbi` that starts with BE8(vn). */
static int prefix_del(MDB_txn *txn, MDB_dbi dbi, uint64_t vn)
{
	MDB_cursor *cur;
	uint8_t kb[8];
	MDB_val k, v;
	int rc;

	store_be64_put(kb, vn);
	rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc)
		return store_lmdb_err(rc);
	for (;;) {
		k.mv_size = 8;
		k.mv_data = kb;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (rc || k.mv_size < 8 || store_be64_get(k.mv_data) != vn)
			break;
		if ((rc = mdb_cursor_del(cur, 0)))
			break;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : store_lmdb_err(rc);
}

int store_inode_del(struct store *st, MDB_txn *txn, uint64_t vn)
{
	uint8_t kb[8];
	MDB_val k = { 8, kb };
	int rc;

	store_be64_put(kb, vn);
	rc = mdb_del(txn, st->db_inodes, &k, NULL);
	if (rc)
		return store_lmdb_err(rc);
	rc = mdb_del(txn, st->db_symlinks, &k, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return store_lmdb_err(rc);
	rc = mdb_del(txn, st->db_inline, &k, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return store_lmdb_err(rc);
	return prefix_del(txn, st->db_xattrs, vn);
}

int store_inline_get(struct store *st, MDB_txn *txn, uint64_t vn,
		     MDB_val *v)
{
	uint8_t kb[8];
	MDB_val k = { 8, kb };
	int rc;

	store_be64_put(kb, vn);
	rc = mdb_get(txn, st->db_inline, &k, v);
	if (rc == MDB_NOTFOUND) {
		v->mv_size = 0;
		v->mv_data = NULL;
		return 0;
	}
	if (rc)
		return store_lmdb_err(rc);
	return v->mv_size > STORE_INLINE_MAX ? -EUCLEAN : 0;
}

/* Half of the map for metadata, whatever the small files take: a full
 * map fails every commit, removals included. */
uint32_t store_inline_room(struct store *st)
{
	MDB_envinfo ei;
	MDB_stat ms;

	if (!st->inline_max || mdb_env_info(st->env, &ei) ||
	    mdb_env_stat(st->env, &ms))
		return 0;
	return (uint64_t)(ei.me_last_pgno + 1) * ms.ms_psize <
		       st->inline_map_limit ? st->inline_max : 0;
}

int store_inline_put(struct store *st, MDB_txn *txn, uint64_t vn,
		     const void *p, size_t n)
{
	uint8_t kb[8];
	MDB_val k = { 8, kb }, v = { n, (void *)p };
	int rc;

	store_be64_put(kb, vn);
	if (n == 0) {
		rc = mdb_del(txn, st->db_inline, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : store_lmdb_err(rc);
	}
	return store_lmdb_err(mdb_put(txn, st->db_inline, &k, &v, 0));
}

void store_touch_c(struct sinode *ino, struct cairn_time now)
{
	ino->ctime = now;
	ino->dv++;
}

void store_touch_mc(struct sinode *ino, struct cairn_time now)
{
	ino->mtime = now;
	store_touch_c(ino, now);
}

/* ---- data files ------------------------------------------------------- */

void store_data_path(uint64_t vn, char *buf, size_t sz)
{
	snprintf(buf, sz, "objects/%02x/%" PRIx64, (unsigned)(vn & 0xff), vn);
}

pthread_mutex_t *store_vlock(struct store *st, uint64_t vn)
{
	/* A batch leader holds LMDB's write lock: a vlock taken in it would
	 * reverse the order. */
	CAIRN_ASSERT(!in_batch);
	return &st->vlock[(vn * 0x9e3779b97f4a7c15ull) >> 58];
}

void store_data_drop(struct store *st, uint64_t vn, int locked)
{
	char path[48];
	pthread_mutex_t *l = store_vlock(st, vn);

	store_data_path(vn, path, sizeof(path));
	if (locked) {
		LOCK_ASSERT_HELD(l);
	} else {
		LOCK_ASSERT_NOT_HELD(l);
		pthread_mutex_lock(l);
	}
	/* Unlink first: see store_fdc.c for why the order matters. */
	store_os.unlinkat(st->dirfd, path, 0);
	store_fdc_forget(st, vn);
	if (!locked)
		pthread_mutex_unlock(l);
}

/* ---- group commit ----------------------------------------------------- */

struct wop {
	store_tx_fn fn;
	void *arg;
	int rc;
	int done;
	pthread_cond_t *cond;         /* its owner waits here (gc_lock); one
				       * for all of store_tx_many's ops */
	struct wop *next;
	struct store_tag tag;         /* the request it runs for, if set */
	struct store_applied result;  /* what it made (store_tx_result), or
				       * with -EALREADY what it had made */
};

/* ---- changes applied exactly once ------------------------------------- */

/*
 * A client that resends a change after a reconnect keeps its request id
 * (HELLO_REPLAY). The server's duplicate request cache (drc.c) answers a
 * resend from memory, but a restarted server has forgotten it. So every
 * tagged change (store_tag_set: CREATE, SYMLINK, LINK, REMOVE, RENAME)
 * also records (client id, request id) -> the object it made, in the
 * `applied` database, in the transaction that makes the change. A resend
 * after a restart finds the record and fails with -EALREADY instead of
 * running again; the caller answers it from the current state
 * (store_applied_get). Records of a client more than APPLIED_WINDOW ids
 * behind its newest are deleted as it makes new ones, and every record is
 * deleted by store_applied_expire once older than the caller's bound.
 *
 * Key: 16-byte client id, be32 request id. Value: be64 vnode, be32
 * uniq, u8 created, be64 wall-clock seconds (21 bytes).
 */
#define APPLIED_WINDOW  65536u /* ids kept behind a client's newest */
#define APPLIED_PRUNE   4      /* old records deleted per new one, at most */
#define APPLIED_VAL     21

static __thread struct store_tag cur_tag;         /* the caller's */
static __thread struct store_applied cur_applied; /* the caller's */
static __thread struct wop *cur_wop;              /* the batch leader's */

void store_tag_set(const uint8_t client[16], uint32_t id)
{
	memcpy(cur_tag.client, client, 16);
	cur_tag.id = id;
	cur_tag.set = 1;
}

void store_tag_clear(void)
{
	cur_tag.set = 0;
}

void store_applied_get(struct store_applied *out)
{
	*out = cur_applied;
}

void store_tx_result(uint64_t vn, const struct sinode *ino, int created)
{
	CAIRN_ASSERT(cur_wop);
	store_fid_make(vn, ino, &cur_wop->result.fid);
	cur_wop->result.created = created;
}

static void applied_key(uint8_t kb[20], const uint8_t client[16],
			uint32_t id)
{
	memcpy(kb, client, 16);
	kb[16] = (uint8_t)(id >> 24);
	kb[17] = (uint8_t)(id >> 16);
	kb[18] = (uint8_t)(id >> 8);
	kb[19] = (uint8_t)id;
}

static uint32_t applied_key_id(const uint8_t *kb)
{
	return (uint32_t)kb[16] << 24 | (uint32_t)kb[17] << 16 |
	       (uint32_t)kb[18] << 8 | kb[19];
}

/* 0 and w->result filled: w's request was applied before; -ENOENT: not. */
static int applied_find(struct store *st, MDB_txn *txn, struct wop *w)
{
	uint8_t kb[20];
	MDB_val k = { 20, kb }, v;
	const uint8_t *p;
	int rc;

	applied_key(kb, w->tag.client, w->tag.id);
	if ((rc = mdb_get(txn, st->db_applied, &k, &v)))
		return store_lmdb_err(rc);
	if (v.mv_size != APPLIED_VAL)
		return -EIO;
	p = v.mv_data;
	w->result.fid.vol = STORE_VOL;
	w->result.fid.vnode = store_be64_get(p);
	w->result.fid.uniq = (uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 |
			     (uint32_t)p[10] << 8 | p[11];
	w->result.created = p[12];
	return 0;
}

static int applied_put(struct store *st, MDB_txn *txn, const struct wop *w)
{
	uint8_t kb[20], vb[APPLIED_VAL], old[APPLIED_PRUNE][20];
	MDB_val k = { 20, kb }, v = { sizeof(vb), vb };
	MDB_cursor *cur;
	uint32_t id = w->tag.id, uq = w->result.fid.uniq;
	int rc, n;

	store_be64_put(vb, w->result.fid.vnode);
	vb[8] = (uint8_t)(uq >> 24);
	vb[9] = (uint8_t)(uq >> 16);
	vb[10] = (uint8_t)(uq >> 8);
	vb[11] = (uint8_t)uq;
	vb[12] = (uint8_t)w->result.created;
	store_be64_put(vb + 13, (uint64_t)store_now().sec);
	applied_key(kb, w->tag.client, id);
	if ((rc = mdb_put(txn, st->db_applied, &k, &v, 0)))
		return store_lmdb_err(rc);
	if (id < APPLIED_WINDOW)
		return 0;
	/* Forget this client's records far behind the newest. */
	if ((rc = mdb_cursor_open(txn, st->db_applied, &cur)))
		return store_lmdb_err(rc);
	applied_key(kb, w->tag.client, 0);
	k.mv_size = 20;
	k.mv_data = kb;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	for (n = 0; rc == 0 && n < APPLIED_PRUNE; n++) {
		if (k.mv_size != 20 ||
		    memcmp(k.mv_data, w->tag.client, 16) ||
		    applied_key_id(k.mv_data) >= id - APPLIED_WINDOW)
			break;
		memcpy(old[n], k.mv_data, 20);
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return store_lmdb_err(rc);
	while (n-- > 0) {
		k.mv_size = 20;
		k.mv_data = old[n];
		if ((rc = mdb_del(txn, st->db_applied, &k, NULL)))
			return store_lmdb_err(rc);
	}
	return 0;
}

/* Run w's function in txn, once per request: see above. */
static int run_op(struct store *st, MDB_txn *txn, struct wop *w)
{
	int rc;

	if (w->tag.set) {
		rc = applied_find(st, txn, w);
		if (rc != -ENOENT)
			return rc ? rc : -EALREADY;
	}
	cur_wop = w;
	rc = w->fn(st, txn, w->arg);
	cur_wop = NULL;
	if (rc == 0 && w->tag.set)
		rc = applied_put(st, txn, w);
	return rc;
}

#define APPLIED_EXPIRE_MAX 4096 /* records one expiry deletes, at most */

struct expire_args {
	int64_t before;
	size_t n;
	uint8_t (*keys)[20];
};

static int applied_expire_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct expire_args *a = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	size_t i;
	int rc;

	a->n = 0;
	if ((rc = mdb_cursor_open(txn, st->db_applied, &cur)))
		return store_lmdb_err(rc);
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	for (; rc == 0 && a->n < APPLIED_EXPIRE_MAX;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size == 20 && v.mv_size == APPLIED_VAL &&
		    (int64_t)store_be64_get((const uint8_t *)v.mv_data + 13) >=
		    a->before)
			continue;
		if (k.mv_size == 20)
			memcpy(a->keys[a->n++], k.mv_data, 20);
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return store_lmdb_err(rc);
	for (i = 0; i < a->n; i++) {
		k.mv_size = 20;
		k.mv_data = a->keys[i];
		if ((rc = mdb_del(txn, st->db_applied, &k, NULL)))
			return store_lmdb_err(rc);
	}
	return 0;
}

int store_applied_expire(struct store *st, int64_t before, size_t *n)
{
	struct expire_args a = { before, 0, NULL };
	int rc;

	*n = 0;
	if (!(a.keys = malloc(APPLIED_EXPIRE_MAX * sizeof(*a.keys))))
		return -ENOMEM;
	if ((rc = store_tx(st, applied_expire_tx, &a)) == 0)
		*n = a.n;
	free(a.keys);
	return rc;
}

/* Bounds one transaction's dirty pages and the latency of its batch. */
#define GC_MAX_BATCH 128

static void gc_run(struct store *st, struct wop *batch)
{
	MDB_txn *txn, *child;
	struct wop *w;
	int rc;

	rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc) {
		for (w = batch; w; w = w->next)
			w->rc = store_lmdb_err(rc);
		return;
	}
	if (!batch->next) {
		/* Alone: no nested transaction needed to isolate a failure. */
		batch->rc = run_op(st, txn, batch);
		if (batch->rc) {
			mdb_txn_abort(txn);
			return;
		}
	} else {
		for (w = batch; w; w = w->next) {
			rc = mdb_txn_begin(st->env, txn, 0, &child);
			if (rc) {
				w->rc = store_lmdb_err(rc);
				continue;
			}
			w->rc = run_op(st, child, w);
			if (w->rc)
				mdb_txn_abort(child);
			else if ((rc = mdb_txn_commit(child)))
				w->rc = store_lmdb_err(rc);
		}
	}
	rc = mdb_txn_commit(txn);
	if (rc == 0) {
		__atomic_add_fetch(&st->commits, 1, __ATOMIC_SEQ_CST);
		return;
	}
	for (w = batch; w; w = w->next)
		if (w->rc == 0)
			w->rc = store_lmdb_err(rc);
}

/*
 * A full data directory must still let clients free space: a remove or an
 * orphan drop is an LMDB commit, and a commit that needs pages past the
 * end of data.mdb fails with ENOSPC once the disk is full. So the file
 * keeps STORE_META_RESERVE bytes allocated past its end (fallocate with
 * FALLOC_FL_KEEP_SIZE: blocks reserved, size unchanged, which LMDB never
 * looks at). Renewed at open and once a second (store_tick), not on the
 * fsync path; a failure is logged once per full spell.
 */
#define STORE_META_RESERVE (2 << 20)

static void meta_reserve(struct store *st)
{
	MDB_envinfo ei;
	MDB_stat ms;
	mdb_filehandle_t fd;
	off_t end;

	if (mdb_env_info(st->env, &ei) || mdb_env_stat(st->env, &ms) ||
	    mdb_env_get_fd(st->env, &fd))
		return;
	end = (off_t)(ei.me_last_pgno + 1) * ms.ms_psize;
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, end, STORE_META_RESERVE) == 0) {
		__atomic_store_n(&st->reserve_failed, 0, __ATOMIC_SEQ_CST);
	} else if (errno != EOPNOTSUPP &&
		   !__atomic_exchange_n(&st->reserve_failed, 1,
					__ATOMIC_SEQ_CST)) {
		log_warn("%s/meta: cannot keep %d MiB allocated for commits "
			 "(%s): on a full disk even removals may fail",
			 st->dir, STORE_META_RESERVE >> 20, strerror(errno));
	}
}

int store_sync(struct store *st)
{
	uint64_t want = __atomic_load_n(&st->commits, __ATOMIC_SEQ_CST);
	uint64_t done;
	int rc;

	if (__atomic_load_n(&st->sync_failed, __ATOMIC_SEQ_CST))
		return -EIO;
	if (__atomic_load_n(&st->synced, __ATOMIC_SEQ_CST) >= want)
		return 0;
	/* Covers every commit counted in want: each wrote its meta page
	 * before it was counted. */
	if ((rc = mdb_env_sync(st->env, 1))) {
		/* As for a data file: a retry could report 0 for pages the
		 * kernel already marked clean (store_data.c). */
		if (!__atomic_exchange_n(&st->sync_failed, 1,
					 __ATOMIC_SEQ_CST))
			log_error("%s/meta: sync failed (%s): every later "
				  "sync answers EIO until restart", st->dir,
				  mdb_strerror(rc));
		return -EIO;
	}
	__atomic_add_fetch(&st->syncs, 1, __ATOMIC_RELAXED);
	done = __atomic_load_n(&st->synced, __ATOMIC_SEQ_CST);
	while (done < want &&
	       !__atomic_compare_exchange_n(&st->synced, &done, want, 0,
					    __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST))
		;
	return 0;
}

uint64_t store_syncs(struct store *st)
{
	return __atomic_load_n(&st->syncs, __ATOMIC_RELAXED);
}

void store_tick(struct store *st)
{
	store_sync(st); /* logs a failure */
	meta_reserve(st);
}

/*
 * Queue ops[0..n) (consecutive, so they go in as few batches as
 * GC_MAX_BATCH allows) and return once every one is done: lead batches
 * while no one else does, else wait to be woken (for one of ours done, or
 * at the head of the queue when the leader left: one wake-up each, not a
 * herd per commit).
 */
static void tx_run(struct store *st, struct wop *ops, int n)
{
	pthread_cond_t cond;
	struct wop *batch, *last, *w, *next;
	int k;

	/* From a store_tx_fn this would wait for its own batch; under a
	 * read transaction it would pin a snapshot across a commit. */
	CAIRN_ASSERT(!in_batch);
	CAIRN_ASSERT(rtxn_open == 0);
	LOCK_ASSERT_NOT_HELD(&st->gc_lock);
	pthread_cond_init(&cond, NULL);
	for (k = 0; k < n; k++) {
		ops[k].cond = &cond;
		ops[k].next = k + 1 < n ? &ops[k + 1] : NULL;
	}
	pthread_mutex_lock(&st->gc_lock);
	*st->gc_tail = &ops[0];
	st->gc_tail = &ops[n - 1].next;
	while (!ops[n - 1].done) {
		/* Batches run in queue order: our last done, all are. */
		if (st->gc_leader) {
			pthread_cond_wait(&cond, &st->gc_lock);
			continue;
		}
		st->gc_leader = 1;
		batch = last = st->gc_head;
		for (k = 1; last->next && k < GC_MAX_BATCH; k++)
			last = last->next;
		st->gc_head = last->next;
		if (!st->gc_head)
			st->gc_tail = &st->gc_head;
		last->next = NULL;
		pthread_mutex_unlock(&st->gc_lock);

		/* Without gc_lock (callers queue for the next batch), holding
		 * LMDB's write lock; maybe the caller's vlock too. */
		in_batch = 1;
		gc_run(st, batch);
		in_batch = 0;

		pthread_mutex_lock(&st->gc_lock);
		/* Owners return once done is set and gc_lock is dropped. */
		for (w = batch; w; w = next) {
			next = w->next;
			w->done = 1;
			if (w->cond != &cond)
				pthread_cond_signal(w->cond);
		}
		st->gc_leader = 0;
		/* The next batch's first owner leads it. */
		if (st->gc_head)
			pthread_cond_signal(st->gc_head->cond);
	}
	pthread_mutex_unlock(&st->gc_lock);
	pthread_cond_destroy(&cond);
}

int store_tx(struct store *st, store_tx_fn fn, void *arg)
{
	struct wop op = { .fn = fn, .arg = arg, .tag = cur_tag };

	cur_tag.set = 0; /* the tag is for one change */
	tx_run(st, &op, 1);
	if (op.rc == -EALREADY)
		cur_applied = op.result;
	return op.rc;
}

int store_tx_many(struct store *st, store_tx_fn fn, void *const *args,
		  int *rcs, int n)
{
	struct wop *ops;

	CAIRN_ASSERT(!cur_tag.set); /* tags are for single changes */
	if (n <= 0)
		return 0;
	if (!(ops = calloc((size_t)n, sizeof(*ops))))
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		ops[i].fn = fn;
		ops[i].arg = args[i];
	}
	tx_run(st, ops, n);
	for (int i = 0; i < n; i++)
		rcs[i] = ops[i].rc;
	free(ops);
	return 0;
}

/* Read transactions are reset and renewed rather than begun and aborted:
 * mdb_txn_begin allocates, mdb_txn_renew does not, and with MDB_NOTLS any
 * thread may renew a transaction another thread reset. A reset transaction
 * keeps its reader slot but pins no snapshot. */
int store_rtxn(struct store *st, MDB_txn **txn)
{
	MDB_txn *t = NULL;
	int rc;

	CAIRN_ASSERT(!in_batch); /* a store_tx_fn reads through its txn */
	pthread_mutex_lock(&st->rt_lock);
	if (st->rt_n > 0)
		t = st->rt_pool[--st->rt_n];
	pthread_mutex_unlock(&st->rt_lock);
	if (t) {
		if (mdb_txn_renew(t) == 0) {
			*txn = t;
			rtxn_open++;
			return 0;
		}
		mdb_txn_abort(t);
	}
	rc = store_lmdb_err(mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn));
	if (rc == 0)
		rtxn_open++;
	return rc;
}

void store_rtxn_end(struct store *st, MDB_txn *txn)
{
	CAIRN_ASSERT(rtxn_open > 0); /* ended by the thread that began it */
	rtxn_open--;
	mdb_txn_reset(txn);
	pthread_mutex_lock(&st->rt_lock);
	if (st->rt_n < STORE_RTXN_POOL) {
		st->rt_pool[st->rt_n++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&st->rt_lock);
	if (txn)
		mdb_txn_abort(txn);
}

/* ---- open / close ----------------------------------------------------- */

/*
 * Ask the file system to spread objects/'s subdirectories over its
 * allocation groups (FS_TOPDIR_FL: ext4's Orlov allocator then treats them
 * as top-level directories). A data file is made in its directory's
 * group, so creations in different objects/XX do not contend for one
 * group, and an ext4 without a journal, which skips inodes freed in the
 * last minutes when it allocates, scans about 1/256 of them after a large
 * removal (cp -R of /usr/include right after rm -rf of a copy: server
 * CPU 1.9-2.0 s, 1.5-1.6 s spread). Best effort: other file systems have
 * no such flag. Only directories made afterwards are placed by it.
 */
static void spread_subdirs(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fl;

	if (fd < 0)
		return;
	if (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0 && !(fl & FS_TOPDIR_FL)) {
		fl |= FS_TOPDIR_FL;
		if (ioctl(fd, FS_IOC_SETFLAGS, &fl) < 0)
			log_debug("store %s: cannot set FS_TOPDIR_FL: %s",
				  path, strerror(errno));
	}
	close(fd);
}

/* mkdir -p: DATA's parents may not exist yet on first start. */
static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int store_lock_take(const char *dir, int *lockfd, char *err, size_t errsz)
{
	char path[4096], pid[32];
	ssize_t n;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/LOCK", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errsz, "cannot open %s: %s", path, strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		if (rc == -EBUSY)
			snprintf(err, errsz, "data directory %s is in use by "
				 "another cairn serve (pid %s)", dir,
				 pid[0] ? pid : "unknown");
		else
			snprintf(err, errsz, "cannot lock %s: %s", path,
				 strerror(-rc));
		close(fd);
		return rc;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		rc = -errno;
		snprintf(err, errsz, "cannot write %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	*lockfd = fd;
	return 0;
}

int store_env_open(const char *dir, unsigned flags, MDB_env **envp,
		   MDB_dbi dbi[STORE_NDBI], char *err, size_t errsz)
{
	static const char *names[STORE_NDBI] = {
		"inodes", "dirents", "dirseq", "xattrs", "symlinks", "meta",
		"orphans", "applied", "inline",
	};
	char path[4096];
	MDB_env *env = NULL;
	MDB_txn *txn = NULL;
	int rc, rdonly = !!(flags & MDB_RDONLY);

	snprintf(path, sizeof(path), "%s/meta", dir);
	if ((rc = mdb_env_create(&env)) ||
	    (rc = mdb_env_set_mapsize(env, STORE_MAPSIZE)) ||
	    (rc = mdb_env_set_maxdbs(env, 10)) ||
	    (rc = mdb_env_set_maxreaders(env, 1024)) ||
	    (rc = mdb_env_open(env, path, flags | MDB_NOTLS, 0600)))
		goto fail;
	if ((rc = mdb_txn_begin(env, NULL, rdonly ? MDB_RDONLY : 0, &txn)))
		goto fail;
	for (int i = 0; i < STORE_NDBI; i++) {
		rc = mdb_dbi_open(txn, names[i], rdonly ? 0 : MDB_CREATE,
				  &dbi[i]);
		if (rc == MDB_NOTFOUND && rdonly && i >= 6) {
			dbi[i] = 0; /* no orphans / applied changes /
				     * inline files yet */
			rc = 0;
		}
		if (rc)
			goto fail;
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc)
		goto fail;
	*envp = env;
	return 0;
fail:
	snprintf(err, errsz, "cannot open %s: %s", path, mdb_strerror(rc));
	if (txn)
		mdb_txn_abort(txn);
	if (env)
		mdb_env_close(env);
	return store_lmdb_err(rc);
}

struct init_args {
	char *err;
	size_t errsz;
	const uint8_t *adopt; /* server id from DATA/server-id, or NULL */
};

/*
 * The server id in meta: the adopted one if given, else kept if there is
 * one, else a new random one. A malformed stored id fails the open rather
 * than silently giving the server a new identity.
 */
static int init_server_id(struct store *st, MDB_txn *txn,
			  struct init_args *a)
{
	uint8_t sid[16];
	MDB_val v;
	int rc;

	if (a->adopt)
		return meta_put(st, txn, "server_id", a->adopt, 16);
	rc = meta_get(st, txn, "server_id", &v);
	if (rc == 0 && store_rec_meta_id_decode(v.mv_data, v.mv_size, sid)) {
		snprintf(a->err, a->errsz, "%s/meta: malformed server id "
			 "(%zu bytes)", st->dir, v.mv_size);
		return -EUCLEAN;
	}
	if (rc != -ENOENT)
		return rc;
	if (getrandom(sid, sizeof(sid), 0) != sizeof(sid))
		return -EIO;
	return meta_put(st, txn, "server_id", sid, sizeof(sid));
}

/* First start: format record, counters, server id and the root dir. On
 * later starts: checks the format, adopts or checks the server id. */
static int init_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct init_args *a = arg;
	struct sinode root;
	MDB_val v;
	uint32_t format;
	int rc;

	rc = meta_get(st, txn, "format", &v);
	if (rc == 0) {
		if (store_rec_meta_u32_decode(v.mv_data, v.mv_size, &format) ||
		    format < STORE_FORMAT_OLDEST || format > STORE_FORMAT) {
			snprintf(a->err, a->errsz, "%s/meta: unsupported "
				 "format version", st->dir);
			return -EPROTO;
		}
		if (format != STORE_FORMAT &&
		    (rc = meta_put_u32(st, txn, "format", STORE_FORMAT)))
			return rc;
		if ((rc = init_server_id(st, txn, a)))
			return rc;
		return store_inode_get(st, txn, STORE_ROOT, &root);
	}
	if (rc != -ENOENT)
		return rc;
	memset(&root, 0, sizeof(root));
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.uniq = 1;
	root.dv = 1;
	root.next_cookie = CAIRN_COOKIE_FIRST;
	root.parent = STORE_ROOT;
	root.atime = root.mtime = root.ctime = store_now();
	if ((rc = meta_put_u32(st, txn, "format", STORE_FORMAT)) ||
	    (rc = meta_put_u64(st, txn, "next_vnode", STORE_ROOT + 1)) ||
	    (rc = meta_put_u32(st, txn, "volume", STORE_VOL)) ||
	    (rc = init_server_id(st, txn, a)))
		return rc;
	return store_inode_put(st, txn, STORE_ROOT, &root);
}

/*
 * Remove data files whose vnode has no inode record, or an inline one.
 * store_remove deletes the data file after the commit that drops the
 * inode; a crash in between leaves the file behind, and nothing would ever
 * delete it. An inline file's is what a move out of LMDB wrote before a
 * crash stopped its commit (store_data.c). (An orphan
 * keeps its inode, so its data file stays.) Runs before
 * the store serves anyone, so nothing races with it. Best effort: a name
 * that is not exactly one of ours, or an inode that cannot be read, is
 * left for fsck to report.
 */
static void strays_remove(struct store *st)
{
	char path[48], want[48];
	struct sinode ino;
	struct dirent *de;
	MDB_txn *txn;
	uint64_t vn;
	char *end;
	DIR *d;
	int fd, rc;

	if (store_rtxn(st, &txn))
		return;
	for (unsigned xx = 0; xx < 256; xx++) {
		snprintf(path, sizeof(path), "objects/%02x", xx);
		fd = openat(st->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!(d = fdopendir(fd))) {
			close(fd);
			continue;
		}
		while ((de = readdir(d))) {
			errno = 0;
			vn = strtoull(de->d_name, &end, 16);
			if (de->d_name[0] == '.' || *end || errno)
				continue;
			store_data_path(vn, want, sizeof(want));
			snprintf(path, sizeof(path), "objects/%02x/%.20s", xx,
				 de->d_name);
			/* An inline file's: a move to a data file that the
			 * crash stopped before its commit. */
			if (strcmp(path, want) ||
			    ((rc = store_inode_get(st, txn, vn, &ino)) !=
			     -ENOENT &&
			     (rc || !(ino.flags & SINODE_INLINE))))
				continue;
			if (store_os.unlinkat(st->dirfd, path, 0) == 0)
				st->strays_removed++;
		}
		closedir(d);
	}
	store_rtxn_end(st, txn);
	if (st->strays_removed)
		log_info("%s: removed %lu data file(s) of deleted objects "
			 "(left by a crash)", st->dir, st->strays_removed);
}

/*
 * DATA/server-id: where servers before the id moved into LMDB kept it
 * (16 bytes, written with write + rename, so never short). store_open
 * adopts it into meta, so clients go on seeing the same server, and then
 * removes it. The removal needs no sync: if the file comes back after a
 * crash, the next start adopts the same id again. *found = 1 if the file
 * was there.
 */
static int sid_file_read(struct store *st, uint8_t id[16], int *found,
			 char *err, size_t errsz)
{
	uint8_t buf[17];
	ssize_t n;
	int fd, rc = 0;

	*found = 0;
	fd = store_os.openat(st->dirfd, "server-id", O_RDONLY, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		snprintf(err, errsz, "cannot open %s/server-id: %s", st->dir,
			 strerror(-rc));
		return rc;
	}
	do
		n = store_os.pread(fd, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		rc = -errno;
		snprintf(err, errsz, "cannot read %s/server-id: %s", st->dir,
			 strerror(-rc));
	} else if (n != 16) {
		rc = -EUCLEAN;
		snprintf(err, errsz, "%s/server-id: %zd bytes, a server id "
			 "has 16", st->dir, n);
	} else {
		memcpy(id, buf, 16);
		*found = 1;
	}
	store_os.close(fd);
	return rc;
}

/* After the adopted id is committed. Best effort: a file left behind is
 * adopted again (the same id) on the next start. */
static void sid_file_remove(struct store *st)
{
	static const char *const names[] = { "server-id", "server-id.tmp" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (store_os.unlinkat(st->dirfd, names[i], 0) < 0 &&
		    errno != ENOENT)
			log_warn("cannot remove %s/%s: %s", st->dir, names[i],
				 strerror(errno));
}

int store_server_id(struct store *st, uint8_t id[16])
{
	MDB_txn *txn;
	MDB_val v;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	rc = meta_get(st, txn, "server_id", &v);
	if (rc == -ENOENT)
		rc = -EUCLEAN; /* store_open made sure there is one */
	if (rc == 0)
		rc = store_rec_meta_id_decode(v.mv_data, v.mv_size, id);
	store_rtxn_end(st, txn);
	return rc;
}

/* fsync directory path (relative to DATA). */
static int dir_sync(struct store *st, const char *path, char *err,
		    size_t errsz)
{
	int fd, rc = 0;

	fd = store_os.openat(st->dirfd, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || store_os.fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		store_os.close(fd);
	if (rc)
		snprintf(err, errsz, "cannot sync %s/%s: %s", st->dir, path,
			 strerror(-rc));
	return rc;
}

/* 1 if DATA has no format record yet (a first start), else 0. */
static int store_fresh(struct store *st)
{
	MDB_txn *txn;
	MDB_val v;
	int rc;

	if (store_rtxn(st, &txn))
		return 0; /* init_tx will report it */
	rc = meta_get(st, txn, "format", &v);
	store_rtxn_end(st, txn);
	return rc == -ENOENT;
}

/*
 * First start: make the directories durable before the format record is
 * committed, each before its parent (fsync of a directory covers its
 * entries, not its own name), so that a power cut after the first
 * acknowledged change cannot lose objects/XX, the LMDB files' names in
 * meta/ (LMDB syncs their contents only) or DATA itself. Keyed on the
 * format record rather than on which mkdir succeeded, so a first start
 * interrupted by a crash syncs everything again on the next one. DATA's
 * parent is best effort (it may not be readable).
 */
static int dirs_sync(struct store *st, char *err, size_t errsz)
{
	char path[16];
	int fd, rc;

	for (int xx = 0; xx < 256; xx++) {
		snprintf(path, sizeof(path), "objects/%02x", xx);
		if ((rc = dir_sync(st, path, err, errsz)))
			return rc;
	}
	if ((rc = dir_sync(st, "objects", err, errsz)) ||
	    (rc = dir_sync(st, "meta", err, errsz)) ||
	    (rc = dir_sync(st, ".", err, errsz)))
		return rc;
	fd = store_os.openat(st->dirfd, "..", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return 0;
	rc = store_os.fsync(fd) < 0 ? -errno : 0;
	store_os.close(fd);
	if (rc)
		snprintf(err, errsz, "cannot sync %s/..: %s", st->dir,
			 strerror(-rc));
	return rc;
}

static uint32_t inline_max_default = STORE_INLINE_MAX;

void store_set_inline_max(uint32_t bytes)
{
	__atomic_store_n(&inline_max_default,
			 bytes < STORE_INLINE_MAX ? bytes : STORE_INLINE_MAX,
			 __ATOMIC_RELAXED);
}

int store_open(const char *dir, struct store **out, char *err, size_t errsz)
{
	struct store *st;
	MDB_dbi dbi[STORE_NDBI];
	char path[4096];
	struct init_args ia = { err, errsz, NULL };
	uint8_t adopt[16];
	int rc, sid_file;

	st = calloc(1, sizeof(*st));
	if (!st || !(st->dir = strdup(dir))) {
		free(st);
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	st->dirfd = st->lockfd = -1;
	st->inline_max = __atomic_load_n(&inline_max_default,
					 __ATOMIC_RELAXED);
	st->inline_map_limit = STORE_MAPSIZE / 2;
	pthread_mutex_init(&st->gc_lock, NULL);
	st->gc_tail = &st->gc_head;
	for (int i = 0; i < STORE_NSTRIPE; i++)
		pthread_mutex_init(&st->vlock[i], NULL);
	pthread_mutex_init(&st->rt_lock, NULL);
	pthread_mutex_init(&st->nm_lock, NULL);
	for (int i = 0; i < 256; i++)
		st->nm_created[i] = 1;
	if ((rc = store_fdc_init(st))) {
		snprintf(err, errsz, "out of memory");
		goto fail;
	}

	if ((rc = mkdir_p(dir, 0700))) {
		snprintf(err, errsz, "cannot create %s: %s", dir, strerror(-rc));
		goto fail;
	}
	if ((rc = store_lock_take(dir, &st->lockfd, err, errsz)))
		goto fail;
	for (int i = -2; i < 256; i++) {
		if (i == -2)
			snprintf(path, sizeof(path), "%s/meta", dir);
		else if (i == -1)
			snprintf(path, sizeof(path), "%s/objects", dir);
		else
			snprintf(path, sizeof(path), "%s/objects/%02x", dir, i);
		if ((rc = mkdir_p(path, 0700))) {
			snprintf(err, errsz, "cannot create %s: %s", path,
				 strerror(-rc));
			goto fail;
		}
		if (i == -1)
			spread_subdirs(path);
	}
	st->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dirfd < 0) {
		rc = -errno;
		snprintf(err, errsz, "cannot open %s: %s", dir, strerror(-rc));
		goto fail;
	}
	if ((rc = store_env_open(dir, MDB_NOMETASYNC, &st->env, dbi, err,
				 errsz)))
		goto fail;
	st->db_inodes = dbi[0];
	st->db_dirents = dbi[1];
	st->db_dirseq = dbi[2];
	st->db_xattrs = dbi[3];
	st->db_symlinks = dbi[4];
	st->db_meta = dbi[5];
	st->db_orphans = dbi[6];
	st->db_applied = dbi[7];
	st->db_inline = dbi[8];
	if (store_fresh(st) && (rc = dirs_sync(st, err, errsz)))
		goto fail;
	if ((rc = sid_file_read(st, adopt, &sid_file, err, errsz)))
		goto fail;
	if (sid_file)
		ia.adopt = adopt;
	err[0] = 0;
	if ((rc = store_tx(st, init_tx, &ia))) {
		if (!err[0])
			snprintf(err, errsz, "cannot initialise %s/meta: %s",
				 dir, strerror(-rc));
		goto fail;
	}
	if (sid_file && (rc = store_sync(st))) {
		snprintf(err, errsz, "cannot sync %s/meta: %s", dir,
			 strerror(-rc));
		goto fail;
	}
	if (sid_file) {
		sid_file_remove(st);
		log_info("%s: server id moved from %s/server-id into meta",
			 dir, dir);
	}
	strays_remove(st);
	meta_reserve(st);
	*out = st;
	return 0;
fail:
	store_close(st);
	return rc;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	CAIRN_ASSERT(!st->gc_head && !st->gc_leader); /* nothing runs */
	if (st->env)
		store_sync(st); /* logs a failure */
	store_fdc_destroy(st);
	while (st->rt_n > 0)
		mdb_txn_abort(st->rt_pool[--st->rt_n]);
	if (st->env)
		mdb_env_close(st->env);
	if (st->dirfd >= 0)
		close(st->dirfd);
	if (st->lockfd >= 0)
		close(st->lockfd); /* releases the flock */
	pthread_mutex_destroy(&st->gc_lock);
	for (int i = 0; i < STORE_NSTRIPE; i++)
		pthread_mutex_destroy(&st->vlock[i]);
	pthread_mutex_destroy(&st->rt_lock);
	pthread_mutex_destroy(&st->nm_lock);
	free(st->dir);
	free(st);
}

/* ---- attributes ------------------------------------------------------- */

static int getattr_vn(struct store *st, const struct cairn_fid *fid,
		      struct cairn_attr *out)
{
	MDB_txn *txn;
	struct sinode ino;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	rc = store_fid_get(st, txn, fid, &ino);
	store_rtxn_end(st, txn);
	if (rc == 0)
		store_attr_fill(st, fid->vnode, &ino, out);
	return rc;
}

int store_root(struct store *st, struct cairn_attr *out)
{
	struct cairn_fid fid = { STORE_VOL, STORE_ROOT, 1 };

	return getattr_vn(st, &fid, out);
}

int store_getattr(struct store *st, const struct cairn_fid *fid,
		  struct cairn_attr *out)
{
	return getattr_vn(st, fid, out);
}

int store_statfs(struct store *st, struct cairn_statfs *out)
{
	struct statvfs sv;
	uint64_t f;

	if (fstatvfs(st->dirfd, &sv) < 0)
		return -errno;
	f = sv.f_bsize ? sv.f_frsize : 1;
	memset(out, 0, sizeof(*out));
	out->bsize = (uint32_t)(sv.f_bsize ? sv.f_bsize : sv.f_frsize);
	out->blocks = (uint64_t)sv.f_blocks * f / out->bsize;
	out->bfree = (uint64_t)sv.f_bfree * f / out->bsize;
	out->bavail = (uint64_t)sv.f_bavail * f / out->bsize;
	out->files = sv.f_files;
	out->ffree = sv.f_ffree;
	out->namemax = CAIRN_NAME_MAX;
	return 0;
}

/* ---- extended attributes ---------------------------------------------- */

/* Key BE8(vnode) + name; rejects names Linux would. */
static int xattr_key(uint64_t vn, const char *name, uint8_t *kb,
		     MDB_val *k)
{
	size_t n = strlen(name);

	if (n == 0 || n > CAIRN_XATTR_NAME_MAX)
		return -ERANGE;
	if (!strncmp(name, "system.", 7))
		return -EOPNOTSUPP;
	store_be64_put(kb, vn);
	memcpy(kb + 8, name, n);
	k->mv_size = 8 + n;
	k->mv_data = kb;
	return 0;
}

/* user.* xattrs exist only on regular files and directories (as on ext4). */
static int xattr_allowed(const struct sinode *ino, const char *name)
{
	if (!strncmp(name, "user.", 5) && !S_ISREG(ino->mode) &&
	    !S_ISDIR(ino->mode))
		return -EPERM;
	return 0;
}

struct xattr_args {
	const struct cairn_fid *fid;
	const char *name;
	const void *val;
	size_t len;
	uint32_t flags;
	int remove;
};

static int xattr_tx(struct store *st, MDB_txn *txn, void *arg)
{
	struct xattr_args *a = arg;
	uint8_t kb[8 + CAIRN_XATTR_NAME_MAX];
	MDB_val k, v, old;
	struct sinode ino;
	int rc;

	if ((rc = store_fid_get(st, txn, a->fid, &ino)) ||
	    (rc = xattr_key(a->fid->vnode, a->name, kb, &k)) ||
	    (rc = xattr_allowed(&ino, a->name)))
		return rc;
	rc = mdb_get(txn, st->db_xattrs, &k, &old);
	if (rc && rc != MDB_NOTFOUND)
		return store_lmdb_err(rc);
	if (a->remove) {
		if (rc == MDB_NOTFOUND)
			return -ENODATA;
		rc = mdb_del(txn, st->db_xattrs, &k, NULL);
	} else {
		if (rc == 0 && (a->flags & XA_CREATE))
			return -EEXIST;
		if (rc == MDB_NOTFOUND && (a->flags & XA_REPLACE))
			return -ENODATA;
		v.mv_size = a->len;
		v.mv_data = (void *)a->val;
		rc = mdb_put(txn, st->db_xattrs, &k, &v, 0);
	}
	if (rc)
		return store_lmdb_err(rc);
	store_touch_c(&ino, store_now());
	return store_inode_put(st, txn, a->fid->vnode, &ino);
}

int store_setxattr(struct store *st, const struct cairn_fid *fid,
		   const char *name, const void *val, size_t len,
		   uint32_t flags)
{
	struct xattr_args a = { fid, name, val, len, flags, 0 };

	if (flags & ~(uint32_t)(XA_CREATE | XA_REPLACE))
		return -EINVAL;
	if (len > CAIRN_XATTR_SIZE_MAX)
		return -E2BIG;
	return store_tx(st, xattr_tx, &a);
}

int store_removexattr(struct store *st, const struct cairn_fid *fid,
		      const char *name)
{
	struct xattr_args a = { fid, name, NULL, 0, 0, 1 };

	return store_tx(st, xattr_tx, &a);
}

int store_getxattr(struct store *st, const struct cairn_fid *fid,
		   const char *name, void *buf, size_t size, size_t *len)
{
	uint8_t kb[8 + CAIRN_XATTR_NAME_MAX];
	MDB_txn *txn;
	MDB_val k, v;
	struct sinode ino;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	if ((rc = store_fid_get(st, txn, fid, &ino)) ||
	    (rc = xattr_key(fid->vnode, name, kb, &k)))
		goto out;
	rc = mdb_get(txn, st->db_xattrs, &k, &v);
	if (rc) {
		rc = rc == MDB_NOTFOUND ? -ENODATA : store_lmdb_err(rc);
		goto out;
	}
	rc = store_rec_xattr_val_decode(v.mv_data, v.mv_size, buf, size, len);
out:
	store_rtxn_end(st, txn);
	return rc;
}

int store_listxattr(struct store *st, const struct cairn_fid *fid, char *buf,
		    size_t size, size_t *len)
{
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	uint8_t kb[8];
	MDB_val k = { 8, kb }, v;
	struct sinode ino;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	size_t total = 0, n;
	uint64_t vn;
	int rc;

	if ((rc = store_rtxn(st, &txn)))
		return rc;
	if ((rc = store_fid_get(st, txn, fid, &ino)))
		goto out;
	if ((rc = store_lmdb_err(mdb_cursor_open(txn, st->db_xattrs, &cur))))
		goto out;
	store_be64_put(kb, fid->vnode);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size < 8 || store_be64_get(k.mv_data) != fid->vnode)
			break;
		if ((rc = store_rec_xattr_key_decode(k.mv_data, k.mv_size, &vn,
						     name, &n)))
			goto out;
		if (size > 0) {
			if (total + n + 1 > size) {
				rc = -ERANGE;
				goto out;
			}
			memcpy(buf + total, name, n + 1);
		}
		total += n + 1;
	}
	if (rc != 0 && rc != MDB_NOTFOUND) {
		rc = store_lmdb_err(rc);
		goto out;
	}
	rc = total > CAIRN_XATTR_LIST_MAX ? -E2BIG : 0;
	if (rc == 0)
		*len = total;
out:
	if (cur)
		mdb_cursor_close(cur);
	store_rtxn_end(st, txn);
	return rc;
}

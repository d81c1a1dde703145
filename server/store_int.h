/*
 * store_int.h - private to server/store*.c: the store object, the on-disk
 * record formats and the helpers the store's files share.
 *
 * LMDB named databases (all keys big-endian so cursors walk in order):
 *   inodes   BE8 vnode                -> inode record (INODE_REC_SIZE bytes)
 *   dirents  BE8 dir + name           -> u64 child, u64 cookie, u32 type
 *   dirseq   BE8 dir + BE8 cookie     -> name
 *   xattrs   BE8 vnode + name         -> value
 *   symlinks BE8 vnode                -> target
 *   meta     "format" u32, "next_vnode" u64, "volume" u32, "server_id" 16 B
 * Values are little-endian. dirents answers LOOKUP; dirseq gives READDIR an
 * order in which an entry's cookie never changes while others come and go
 * (cookies come from the directory's next_cookie and are never reused).
 *
 * Lock order: a vnode stripe (vlock), then gc_lock. The LMDB write lock is
 * taken only by a batch leader inside store_tx, which holds no gc_lock
 * while running the batch and never takes a vlock. No read transaction is
 * held across store_tx (a readdir callback must not call the store).
 */
#ifndef CAIRN_STORE_INT_H
#define CAIRN_STORE_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include "store.h"
#include "store_os.h"

#define STORE_FORMAT   1u
#define STORE_VOL      1u
#define STORE_ROOT     1u
#define STORE_NSTRIPE  64
#define STORE_MAPSIZE  (64ull << 30)
#define STORE_MAXLINK  65000u /* ext4's limit: EMLINK beyond */

/* In-memory form of an inode record. parent is the containing directory
 * for directories (their ".."); 0 for other objects, which may have many. */
struct sinode {
	uint32_t mode, nlink, uid, gid, rdev, uniq;
	uint64_t size, dv, next_cookie, parent;
	struct cairn_time atime, mtime, ctime;
};

/* Record: u8 version, 3 pad, 6 x u32, 4 x u64, 3 x time (i64 + u32). */
#define INODE_REC_VERSION 1u
#define INODE_REC_SIZE    (4 + 6 * 4 + 4 * 8 + 3 * 12)
#define DIRENT_VAL_SIZE   20

struct wop;

struct store {
	char *dir;
	int dirfd;   /* DATA, base of the objects/ paths */
	int lockfd;  /* DATA/LOCK, flock()ed for the store's lifetime */
	MDB_env *env;
	MDB_dbi db_inodes, db_dirents, db_dirseq, db_xattrs, db_symlinks,
		db_meta;

	/* Group commit: queued write ops and whether a leader runs a batch. */
	pthread_mutex_t gc_lock;
	pthread_cond_t gc_cond;
	struct wop *gc_head, **gc_tail; /* gc_lock */
	int gc_leader;                  /* gc_lock */

	/* Serialise everything that touches one vnode's data file (write,
	 * truncate, fallocate, deleting it), striped by vnode. Taken before
	 * a transaction is submitted, never by the batch leader. */
	pthread_mutex_t vlock[STORE_NSTRIPE];
};

/* A write operation run inside a group-commit transaction. Must not call
 * back into the store or take vlocks. Returns 0 or -errno; on error
 * everything it wrote is rolled back. */
typedef int (*store_tx_fn)(struct store *st, MDB_txn *txn, void *arg);

/* Run fn in a write transaction; returns when that transaction is
 * committed and synced (or failed). Result: fn's, or the commit's error. */
int store_tx(struct store *st, store_tx_fn fn, void *arg);
int store_rtxn(struct store *st, MDB_txn **txn);
int store_lmdb_err(int rc);

struct cairn_time store_now(void);
int store_time_cmp(struct cairn_time a, struct cairn_time b);

void store_be64_put(uint8_t *p, uint64_t v);
uint64_t store_be64_get(const uint8_t *p);

int store_inode_get(struct store *st, MDB_txn *txn, uint64_t vn,
		    struct sinode *ino);
int store_inode_put(struct store *st, MDB_txn *txn, uint64_t vn,
		    const struct sinode *ino);
int store_inode_decode(const MDB_val *v, struct sinode *ino);
/* The inode a FID names: -ESTALE if the volume, vnode or uniq is wrong. */
int store_fid_get(struct store *st, MDB_txn *txn, const struct cairn_fid *fid,
		  struct sinode *ino);
/* Attributes of an inode (stats the data file for the block count). */
void store_attr_fill(struct store *st, uint64_t vn, const struct sinode *ino,
		     struct cairn_attr *out);
void store_fid_make(uint64_t vn, const struct sinode *ino,
		    struct cairn_fid *fid);
/* A new inode: vnode from the meta counter, fresh uniq, times = now. */
int store_inode_new(struct store *st, MDB_txn *txn, uint32_t mode,
		    uint64_t *vn, struct sinode *ino);
/* Delete an inode record with its xattrs and symlink target. */
int store_inode_del(struct store *st, MDB_txn *txn, uint64_t vn);
/* Change of an object: ctime = now, dv + 1. */
void store_touch_c(struct sinode *ino, struct cairn_time now);
/* Entry change of a directory: mtime = ctime = now, dv + 1. */
void store_touch_mc(struct sinode *ino, struct cairn_time now);

/* "objects/XX/N" of vnode vn, into buf (at least 40 bytes). */
void store_data_path(uint64_t vn, char *buf, size_t sz);
/* Open vn's data file; -errno (-ENOENT if missing and not O_CREAT). */
int store_data_open(struct store *st, uint64_t vn, int flags);
pthread_mutex_t *store_vlock(struct store *st, uint64_t vn);
/* Remove vn's data file (after the inode is gone); takes the vlock. */
void store_data_drop(struct store *st, uint64_t vn);

int store_name_check(const char *name);
/* Take DIR/LOCK (flock, pid written into it); -EBUSY with the holder's pid
 * in err. */
int store_lock_take(const char *dir, int *lockfd, char *err, size_t errsz);
/* Open DIR/meta and the six databases in the order of struct store
 * (inodes, dirents, dirseq, xattrs, symlinks, meta). flags: 0 creates them,
 * MDB_RDONLY for fsck. */
int store_env_open(const char *dir, unsigned flags, MDB_env **envp,
		   MDB_dbi dbi[6], char *err, size_t errsz);
/* Directory entries (store_dir.c). */
int store_dirent_get(struct store *st, MDB_txn *txn, uint64_t dir,
		     const char *name, uint64_t *child, uint64_t *cookie,
		     uint32_t *type);
int store_dirent_decode(const MDB_val *v, uint64_t *child, uint64_t *cookie,
			uint32_t *type);

#endif

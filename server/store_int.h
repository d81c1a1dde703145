/*
 * store_int.h - private to server/store*.c: the store object, the LMDB
 * databases and the helpers the store's files share.
 *
 * LMDB named databases (all keys big-endian so cursors walk in order):
 *   inodes   BE8 vnode                -> inode record
 *   dirents  BE8 dir + name           -> u64 child, u64 cookie, u32 type
 *   dirseq   BE8 dir + BE8 cookie     -> name
 *   xattrs   BE8 vnode + name         -> value
 *   symlinks BE8 vnode                -> target
 *   orphans  BE8 vnode                -> holder's client id (16 bytes)
 *   inline   BE8 vnode                -> the bytes of a small file
 *   meta     "format" u32, "next_vnode" u64, "volume" u32, "server_id" 16 B
 *            (the one server id: store_server_id)
 * Values are little-endian; store_rec.h has the exact layouts and the one
 * encoder and decoder of each record. dirents answers LOOKUP; dirseq gives
 * READDIR an order in which an entry's cookie never changes while others
 * come and go (cookies come from the directory's next_cookie and are never
 * reused). orphans lists the objects whose last name went while a client
 * may still have them open (store_orphan.c): they keep their inode (nlink
 * 0) and data file until their holder drops them. A regular file keeps
 * its bytes in inline (flag SINODE_INLINE) from its creation until it
 * grows past STORE_INLINE_MAX or is fallocated (store_data.c): a small
 * file costs the server no file of its own to make, sync and delete.
 *
 * Locks: the vnode stripes (vlock), gc_lock, LMDB's write lock, rt_lock,
 * fdc.lock and nm_lock; the order in which they may be taken is stated
 * once, in docs/LOCKING.md ("Lock order (server)"). Rules the code relies
 * on, checked in debug builds (lib/debug.h): a store_tx_fn runs on the
 * batch leader, which holds no gc_lock, and never takes a vlock, opens a
 * read transaction or calls store_tx; no read transaction is held across
 * store_tx (a readdir callback must not call the store); functions that
 * say "caller holds the vlock" assert it.
 */
#ifndef CAIRN_STORE_INT_H
#define CAIRN_STORE_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include "../lib/debug.h"
#include "store.h"
#include "store_os.h"
#include "store_rec.h"

/* Format 2 added inline files (SINODE_INLINE, the inline database),
 * which a server of format 1 cannot read: opening a store of format 1
 * makes it format 2. */
#define STORE_FORMAT   2u
#define STORE_FORMAT_OLDEST 1u
#define STORE_VOL      1u
#define STORE_ROOT     1u
#define STORE_NSTRIPE  64
#define STORE_MAPSIZE  (64ull << 30)
#define STORE_MAXLINK  CAIRN_MAX_LINK
#define STORE_RTXN_POOL 32    /* idle read transactions kept for reuse */
#define STORE_FDC_MAX  256    /* data file descriptors kept open */
#define STORE_NDBI     9      /* LMDB databases, in struct store's order */
#define STORE_INLINE_MAX (16u * 1024u) /* bytes a file keeps in LMDB */

struct wop;
struct fdc_ent;

/* The data file cache (store_fdc.c): open descriptors of recently used
 * data files, so read and write do not open() and close() every call. */
struct fdc {
	pthread_mutex_t lock;
	struct fdc_ent *ents;      /* cap entries, allocated at open */
	struct fdc_ent **bucket;   /* hash by vnode, nbucket chains; lock */
	struct fdc_ent *free;      /* unused entries; lock */
	struct fdc_ent *lru_head;  /* idle (ref 0) entries, most recent */
	struct fdc_ent *lru_tail;  /* first; lock */
	unsigned cap, nbucket;
	uint64_t gen;              /* bumped by store_fdc_forget; lock */
};

struct store {
	char *dir;
	int dirfd;   /* DATA, base of the objects/ paths */
	int lockfd;  /* DATA/LOCK, flock()ed for the store's lifetime */
	MDB_env *env;
	MDB_dbi db_inodes, db_dirents, db_dirseq, db_xattrs, db_symlinks,
		db_meta, db_orphans, db_applied, db_inline;

	/* Group commit: queued write ops (each owner waits on its own
	 * condition) and whether a leader runs a batch. */
	pthread_mutex_t gc_lock;
	struct wop *gc_head, **gc_tail; /* gc_lock */
	int gc_leader;                  /* gc_lock */

	/* Serialise everything that changes or syncs one vnode's data file
	 * (write, truncate, fallocate, fsync, deleting it), striped by
	 * vnode. Taken before a transaction is submitted, never by the batch
	 * leader. */
	pthread_mutex_t vlock[STORE_NSTRIPE];

	/* Reset read transactions for mdb_txn_renew (no malloc per read). */
	pthread_mutex_t rt_lock;
	MDB_txn *rt_pool[STORE_RTXN_POOL]; /* rt_lock */
	int rt_n;                          /* rt_lock */

	struct fdc fdc;

	/* Durability of data file names (store_data.c). A new data file's
	 * directory entry in objects/XX is durable only after an fsync of
	 * objects/XX; fsync of the file does not cover it. nm_created[XX]
	 * counts files created in XX, nm_synced[XX] is the count that the
	 * last completed fsync of XX is known to cover. Starts at 1 / 0:
	 * names left by an earlier run (kill -9 keeps them in the page cache
	 * only) are not known durable either. */
	pthread_mutex_t nm_lock;
	uint64_t nm_created[256], nm_synced[256]; /* nm_lock */
	/* An fsync of objects/XX failed: names there are in an unknown
	 * state, every later sync of a file in XX fails (store_data.c). */
	uint8_t nm_failed[256];                   /* nm_lock */

	/* Set (never cleared) when a failed data sync could not be recorded
	 * in the object's inode: then no object's data can be trusted to
	 * be what was acknowledged, and all data operations fail with -EIO
	 * until the server restarts. Read and written with __atomic. */
	int lost_unrecorded;

	/* Commits are not synced one by one (MDB_NOMETASYNC, store.c):
	 * commits counts successful commits, synced the count the last
	 * completed store_sync covered; sync_failed (sticky) once a sync of
	 * the LMDB file failed. All read and written with __atomic. */
	uint64_t commits, synced;
	uint64_t syncs;            /* store_sync's mdb_env_syncs (atomic) */
	int sync_failed;
	int reserve_failed; /* the last meta_reserve failed (__atomic) */

	/* Stray data files (without an inode) removed by store_open (a
	 * crash between a remove's commit and its unlink leaves them). */
	unsigned long strays_removed;
	uint32_t inline_max;  /* store_set_inline_max when opened */
	uint64_t inline_map_limit; /* no new inline bytes once the map is
				    * used this far (store_inline_room) */
};

/* A write operation run inside a group-commit transaction. Must not call
 * back into the store or take vlocks. Returns 0 or -errno; on error
 * everything it wrote is rolled back. */
typedef int (*store_tx_fn)(struct store *st, MDB_txn *txn, void *arg);

/* Run fn in a write transaction; returns when that transaction is
 * committed and synced (or failed). Result: fn's, or the commit's error. */
int store_tx(struct store *st, store_tx_fn fn, void *arg);
/* fn on each of args[0..n) in order, each in a transaction of its own
 * nested in the batch's (one that fails is rolled back alone), in as few
 * commits as the batch size allows (one for up to 128); returns when all
 * are committed and synced: 0 with each result in rcs[i], or -ENOMEM
 * (nothing run). No tag (store_tag_set) applies. */
int store_tx_many(struct store *st, store_tx_fn fn, void *const *args,
		  int *rcs, int n);
/* A read transaction, reused from a pool when possible; end it with
 * store_rtxn_end (never mdb_txn_abort). */
int store_rtxn(struct store *st, MDB_txn **txn);
void store_rtxn_end(struct store *st, MDB_txn *txn);
int store_lmdb_err(int rc);

struct cairn_time store_now(void);
int store_time_cmp(struct cairn_time a, struct cairn_time b);

void store_be64_put(uint8_t *p, uint64_t v);
uint64_t store_be64_get(const uint8_t *p);

/* store_create_fid of a regular file whose data file holds size bytes
 * already (store_create_data): recorded with that size, one data version
 * further, as a WR_KEEPTIME write right after the create would leave it;
 * then, if `then`, as store_setattr of it would (in the same commit, and
 * only when this call makes the file). */
int store_create_sized(struct store *st, const struct cairn_fid *dir,
		       const char *name, uint32_t mode, uint32_t uid,
		       uint32_t gid, uint32_t rdev, uint32_t flags,
		       const struct cairn_fid *fid, struct cairn_time t,
		       uint64_t size, const void *data,
		       const struct store_setattr *then, int *created,
		       struct cairn_attr *out, struct cairn_attr *dir_out);
/* What a SETATTR does besides the size: owner, mode, times, and the data
 * version moved (sa->steps, 0 is 1). now: the times SA_*_NOW set. */
void store_setattr_fields(struct sinode *ino, const struct store_setattr *sa,
			  struct cairn_time now);
int store_inode_get(struct store *st, MDB_txn *txn, uint64_t vn,
		    struct sinode *ino);
/* An inline file's record (v points into the map while txn lives; an
 * empty file may have none: v then empty) and its replacement. */
int store_inline_get(struct store *st, MDB_txn *txn, uint64_t vn,
		     MDB_val *v);
/* The largest file that may keep its bytes in LMDB now: inline_max
 * while less than inline_map_limit (half the map) is in use, else 0. */
uint32_t store_inline_room(struct store *st);
int store_inline_put(struct store *st, MDB_txn *txn, uint64_t vn,
		     const void *p, size_t n);
int store_inode_put(struct store *st, MDB_txn *txn, uint64_t vn,
		    const struct sinode *ino);
/* The inode a FID names: -ESTALE if the volume, vnode or uniq is wrong. */
int store_fid_get(struct store *st, MDB_txn *txn, const struct cairn_fid *fid,
		  struct sinode *ino);
/* Attributes of an inode (stats the data file for the block count). */
void store_attr_fill(struct store *st, uint64_t vn, const struct sinode *ino,
		     struct cairn_attr *out);
void store_fid_make(uint64_t vn, const struct sinode *ino,
		    struct cairn_fid *fid);
/* A new inode: vnode from the meta counter, fresh uniq, times = now. */
void store_inode_init(uint32_t mode, struct cairn_time now,
		      struct sinode *ino);
/* 0 if vn was handed out (below next_vnode, above the root), else
 * -EINVAL: a CR_FID CREATE may use it. */
int store_vnode_handed_out(struct store *st, MDB_txn *txn, uint64_t vn);
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
/* vn's stripe lock; never taken inside a store_tx_fn. */
pthread_mutex_t *store_vlock(struct store *st, uint64_t vn);
/* Remove vn's data file (after the inode is gone): forgets its cached
 * descriptor and unlinks it. Takes the vlock unless the caller holds it
 * (locked = 1). */
void store_data_drop(struct store *st, uint64_t vn, int locked);

/* Relatime: 1 if reading object ino now should move its atime. */
int store_atime_due(const struct sinode *ino, struct cairn_time now);
/* Set atime of fid to now if still due; ino gets the inode as stored.
 * Not a modification: dv stays, so caches stay valid. */
struct store_atime_args {
	const struct cairn_fid *fid;
	struct sinode ino;
};
int store_atime_tx(struct store *st, MDB_txn *txn, void *arg);

/* A data file of vn was created (by store_fdc_get). */
void store_data_created(struct store *st, uint64_t vn);

/*
 * Data file descriptors (store_fdc.c). store_fdc_get gives a descriptor
 * of vn's data file open O_RDWR (created if `create`; -ENOENT if missing
 * otherwise), valid until the matching store_fdc_put. Users never close
 * it. store_fdc_forget (called after the file is unlinked, or after a
 * sync of its descriptor failed) drops vn from the cache; descriptors
 * still in use are closed by their last put.
 */
struct store_fh {
	int fd;
	struct fdc_ent *e; /* NULL: not cached, put closes fd */
};
int store_fdc_init(struct store *st);
void store_fdc_destroy(struct store *st);
int store_fdc_get(struct store *st, uint64_t vn, int create,
		  struct store_fh *fh);
void store_fdc_put(struct store *st, struct store_fh *fh);
/* Like store_fdc_get, but only a cached descriptor: -ENOENT if none. */
int store_fdc_peek(struct store *st, uint64_t vn, struct store_fh *fh);
void store_fdc_forget(struct store *st, uint64_t vn);
/* Descriptors held open by the cache (for tests). */
unsigned store_fdc_count(struct store *st);

int store_name_check(const char *name);
/* Take DIR/LOCK (flock, pid written into it); -EBUSY with the holder's pid
 * in err. */
int store_lock_take(const char *dir, int *lockfd, char *err, size_t errsz);
/* From a store_tx_fn that made object vn (ino): what a tagged change
 * records as its result (store_tag_set). */
void store_tx_result(uint64_t vn, const struct sinode *ino, int created);
/* Open DIR/meta and the STORE_NDBI databases in the order of struct
 * store (inodes, dirents, dirseq, xattrs, symlinks, meta, orphans).
 * flags: 0 creates them, MDB_RDONLY for fsck; read-only, a missing
 * orphans database (a data directory from before orphans) gives
 * dbi[6] = 0, which names no database of ours (LMDB's 0 and 1 are its
 * own). */
int store_env_open(const char *dir, unsigned flags, MDB_env **envp,
		   MDB_dbi dbi[STORE_NDBI], char *err, size_t errsz);
/* Record vn, whose last link this transaction removed, as an orphan held
 * by holder (store_orphan.c); the caller keeps its inode (nlink 0). */
int store_orphan_add(struct store *st, MDB_txn *txn, uint64_t vn,
		     const uint8_t holder[STORE_HOLDER_SIZE]);
/* Directory entries (store_dir.c). */
int store_dirent_get(struct store *st, MDB_txn *txn, uint64_t dir,
		     const char *name, uint64_t *child, uint64_t *cookie,
		     uint32_t *type);

#endif

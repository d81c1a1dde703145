/*
 * fs_int.h - what the files of the FUSE client share. Private to
 * client/fs*.c; fs.h is the contract for everyone else.
 *
 *   fs.c        the session and its operation table; sending requests and
 *               decoding replies; replies that carry attributes; getattr,
 *               setattr, statfs
 *   fs_name.c   names: lookup, forget, create, mknod, mkdir, symlink, link,
 *               unlink, rmdir, rename, readlink; fs_orphan.c releases
 *               unlinked files on the server once forgotten
 *   fs_file.c   open files: open, read, write, flush, release, fsync,
 *               fallocate
 *   fs_dir.c    directories: opendir, readdir, readdirplus, and fetching
 *               whole listings into the directory cache (dircache.h),
 *               which lookup, getattr and readdir answer from
 *   fs_xattr.c  extended attributes
 *
 * Shape of every handler: snapshot the break sequence (notify_seq), fill
 * the request's struct (lib/msg.h), call the server and decode its reply
 * with fs_rpc, then reply to the kernel inside notify_reply_begin/end.
 * Inside that section `fresh` says whether the promise carried by the
 * reply still stands; only then does the kernel get long timeouts
 * (entries, attributes, negative entries) and does the inode table record
 * the promise. The kernel's lookup count changes only on
 * replies that carry an entry, so those also record it in the inode table,
 * and take it back if the reply did not reach the kernel.
 *
 * Every server call made for a FUSE request passes that request (`req`;
 * NULL only for calls made after the reply, when nobody waits): the call
 * is then interruptible (fs_rpc). An interrupted call returns -EINTR,
 * which the handler answers like any error. No call is ever made between
 * notify_reply_begin and notify_reply_end (docs/LOCKING.md): the rpc
 * reader needs seq_lock for writing to deliver any reply. Debug builds
 * check this on every call (fs_call, notify_assert_not_held).
 *
 * Errors from the server are negative errnos; they become FUSE errors only
 * in the handlers, through reply_error().
 */
#ifndef CAIRN_CLIENT_FS_INT_H
#define CAIRN_CLIENT_FS_INT_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 35
#endif
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include "ccache.h"
#include "fs.h"
#include "rpc.h"
#include "../lib/msg.h"
#include "../lib/proto.h"

struct ccache;
struct dcache;
struct wb;
struct fs_locks;

/* Background calls (fs_dir.c): read-ahead of tree walks, and the atime
 * of files read from the chunk cache. */
#define FS_AHEAD_QUEUE   256u
#define FS_AHEAD_THREADS 2u
#define FS_WLOCKS        64u /* write lock stripes (fs_op_write) */
enum fs_bg_kind { FS_BG_LISTING, FS_BG_ATIME };
struct fs_bg_item {
	struct cairn_fid fid;
	enum fs_bg_kind kind;
};
struct fs_ahead {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fs_bg_item q[FS_AHEAD_QUEUE]; /* guarded by lock: a ring */
	size_t head, n;                     /* guarded by lock */
	int stopping;                       /* guarded by lock */
	unsigned nthreads;                  /* guarded by lock: intr[] live */
	struct rpc_intr intr[FS_AHEAD_THREADS];
	uint64_t fetched, dropped;          /* guarded by lock */
	unsigned gathering;                 /* guarded by lock: threads
					     * collecting atimes */
	unsigned started;
	pthread_t th[FS_AHEAD_THREADS];
};

/* Unlinked files the kernel has forgotten, to be released on the server
 * (fs_orphan.c). */
struct fs_orphans {
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* CLOCK_MONOTONIC */
	struct cairn_fid *q;         /* guarded by lock */
	size_t n, cap;               /* guarded by lock */
	int stopping, done, abandon; /* guarded by lock */
	int calling;                 /* guarded by lock: intr is live */
	struct rpc_intr intr;
	uint64_t sent, lost;         /* guarded by lock */
	int started;
	pthread_t thread;
};

struct fs_pin;
#define FS_PIN_BUCKETS 64

/* Chunks being fetched whole by a READ (fs_file.c, read_cached). */
#define FS_FETCHING_MAX 64
struct fs_fetching {
	pthread_mutex_t lock;
	pthread_cond_t done;
	int n;                                   /* guarded by lock */
	struct ccache_key k[FS_FETCHING_MAX];    /* guarded by lock */
};

struct fs {
	struct rpc *rpc;
	struct itab *itab;
	struct notify *ntf;
	struct dcache *dc;           /* cached directories (dircache.h) */
	struct ccache *cc;           /* the chunk cache, NULL when off; set
				      * before the session runs (fs_set_ccache) */

	pthread_mutex_t sf_lock;
	struct cairn_statfs sf;      /* guarded by sf_lock */
	struct timespec sf_when;     /* guarded by sf_lock; CLOCK_MONOTONIC */
	int sf_valid;                /* guarded by sf_lock */
	int sf_refreshing;           /* guarded by sf_lock */

	pthread_mutex_t init_lock;
	pthread_cond_t init_cond;
	int inited;                  /* guarded by init_lock: INIT answered */
	int no_open;                 /* the kernel sends no OPEN/RELEASE */
	int no_opendir;              /* nor OPENDIR/RELEASEDIR */
	int global_locks;            /* locks go to the server; set before
				      * the session (fs_set_global_locks) */
	struct fs_locks *locks;      /* fs_lock.c; NULL with --local-locks */
	int want_wb;                 /* ask for the writeback cache; set
				      * before the session (fs_set_writeback) */
	int wb;                      /* the kernel caches writes (from INIT) */
	/* One WRITE at a time per file (fs_op_write), striped by vnode;
	 * held across the WRITE round trip, nothing taken under it but the
	 * rpc's, the inode table's and the chunk cache's own locks. */
	pthread_mutex_t wlock[FS_WLOCKS];

	struct fs_orphans orph;
	struct fs_ahead ahead;
	struct wb *wbk;              /* write-back journal (wback.h), NULL
				      * when off; set before the session
				      * (fs_set_wback) */
	/* The version each open file reads (fs_file.c, "Whole versions"),
	 * by file handle. */
	pthread_mutex_t pin_lock;
	struct fs_pin *pins[FS_PIN_BUCKETS]; /* guarded by pin_lock */
	struct fs_fetching fetching;
	/* CAIRN_TEST_LIST_PAUSE_US, for tests only: a pause between
	 * copying a listing from the directory cache and answering with it,
	 * to widen the window a change's reply can come in (test_coherence). */
	unsigned test_list_pause_us;
};

static inline struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Answer with 0 or the errno of a negative return; anything odd is EIO. */
static inline void reply_error(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc == 0 ? 0 : (rc < 0 && rc > -4096) ? -rc : EIO);
}

/* Forget every open file's version (fs_file.c), at exit. */
void fs_pins_free(struct fs *fs);

/* --- requests (fs.c) ---------------------------------------------------- */

/*
 * Send request op, encoded from reqm (the op's request struct, lib/msg.h),
 * wait for the reply and decode it into repm (the op's reply struct; NULL
 * when nothing in it is wanted: it is checked all the same). Returns the
 * server's status, a transport error, or -EIO (logged with the op's name)
 * when the reply is malformed.
 *
 * With req, an INTERRUPT of req (the application got a signal) ends the
 * wait at once with -EINTR; the interrupt hook is registered only for the
 * duration of the call, so req may be answered as soon as this returns.
 *
 * keep: decoded names and data (struct msg_str, msg_bytes) point into the
 * reply's buffer. With keep, the buffer is handed to *keep on 0 (the
 * caller frees it with rpc_reply_free once done with repm; on error *keep
 * is empty). Without keep it is freed here, so the caller must not use
 * any pointer in repm.
 */
int fs_rpc(fuse_req_t req, struct fs *fs, uint16_t op, const void *reqm,
	   void *repm, struct rpc_reply *keep);
/* fs_rpc for the cache manager's own call on vnode's behalf (a write
 * token for the journal's changes), with the credentials of whoever last
 * opened it for writing (fs_note_opener), or none if unknown. No reply
 * buffer is kept. */
int fs_rpc_opener(struct fs *fs, uint64_t vnode, uint16_t op,
		  const void *reqm, void *repm);
/* Remember req's process as the one that opened vnode for writing. */
void fs_note_opener(fuse_req_t req, uint64_t vnode);
/* req's credential block (docs/PROTOCOL.md "Credentials") appended to w:
 * 1, or 0 when the request has none (a kernel thread's). */
int fs_req_cred(fuse_req_t req, struct wbuf *w);
/* fs_rpc for the cache manager's own call with a credential block kept
 * from an earlier request (cred of credlen bytes; none if credlen is 0).
 * keep as fs_rpc's: NULL, or the reply buffer repm points into, for the
 * caller to free (rpc_reply_free). */
int fs_rpc_cred(struct fs *fs, const void *cred, size_t credlen,
		uint16_t op, const void *reqm, void *repm,
		struct rpc_reply *keep);
/* Log that a well-formed reply to op holds a value no server may send;
 * returns -EIO. */
int fs_bad_reply(uint16_t op);

/* GETATTR of fid. */
int fs_getattr(fuse_req_t req, struct fs *fs, const struct cairn_fid *fid,
	       struct cairn_attr *a);
/* Changes of fid the write-back journal holds are sent first (wb_drain):
 * 0, or the error that keeps them from the server. Before anything that
 * must see this client's own writes on the server. */
int fs_wb_settle(struct fs *fs, const struct cairn_fid *fid);
/* Write-back in use: the journal is open and the kernel caches writes. */
static inline int fs_wb_on(const struct fs *fs)
{
	return fs->wbk && fs->wb;
}
/* SETATTR of size 0. */
int fs_truncate(fuse_req_t req, struct fs *fs, const struct cairn_fid *fid,
		struct cairn_attr *a);

/* Every bit of the absent-xattr cache (fs_xattr.c): a new object has none
 * of those names. */
unsigned fs_xattr_hot_all(void);

/* --- replies (fs.c) ----------------------------------------------------- */

/* An entry for `a` under node id nodeid (itab_add_entry's; the vnode for
 * READDIR without plus), with long timeouts only when fresh. */
void fs_fill_entry(struct fuse_entry_param *e, uint64_t nodeid,
		   const struct cairn_attr *a, int fresh);
/* Record attributes a from a reply, inside its reply section (fresh as
 * notify_reply_begin said): the inode table and the directory cache. */
void fs_take_attr(struct fs *fs, const struct cairn_attr *a, int fresh);
/* A directory's attributes from a reply: current for the inode table
 * (current), and for its cached listing only when fresh (a listing holds
 * its entries' attributes, which a break on one of them concerns). */
void fs_take_dir_attr(struct fs *fs, const struct cairn_attr *a, int current,
		      int fresh);
/* Record attributes (a and b may be NULL) from a reply that answers the
 * kernel with no attributes. */
void fs_note_attrs(struct fs *fs, uint64_t seq, const struct cairn_attr *a,
		   const struct cairn_attr *b);

/* --- open files --------------------------------------------------------- */

/* A listing of ino was used (listed, or min_hits lookups answered from
 * it): queue its subdirectories' listings for read-ahead (fs_dir.c).
 * Never blocks on the server. */
#define AHEAD_LOOKUPS 2u
void fs_dir_ahead(struct fs *fs, fuse_ino_t ino, unsigned min_hits);
/* Does relatime owe ino a new atime when it is read or listed? As the
 * server decides (store_atime_due): atime not after mtime or ctime, or a
 * day old; `unknown` when the table holds no current attributes. */
int fs_atime_due(struct fs *fs, fuse_ino_t ino, int unknown);
/* Read or listed without the server while relatime owes ino an atime:
 * our clock's time in the table until the server's comes back, and an
 * ATIME call in the background (fs_touch_atime). */
void fs_touch_cached_atime(struct fs *fs, fuse_ino_t ino);
/* A read was answered from the chunk cache, without the server, and
 * relatime owes fid an atime: let the server move it (ATIME, batched and
 * sent in the background; fs_dir.c). */
void fs_touch_atime(struct fs *fs, const struct cairn_fid *fid);
/* Calls made with req NULL on this thread use ir, so that another thread
 * can end them with rpc_interrupt (read-ahead threads; fs.c). */
void fs_set_call_intr(struct rpc_intr *ir);
/* This thread is a write-back shipper: its calls do not wait for the
 * creates the journal holds (wb_barrier). */
void fs_set_shipper(void);

/* FUSE forget of ino (fs_orphan.c): drop nlookup references; when that
 * frees an inode we removed a name of (itab_set_orphan), queue its FID
 * for ORPHAN_DROP. Never blocks on the server. */
void fs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup);
/* We were made a holder of orphan fid by another client's unlink
 * (CB_ORPHANED): mark its inode as fs_forget releases it, or, when the
 * kernel does not know it, queue it for ORPHAN_DROP at once. Never blocks
 * on the server; takes no lock the caller may hold (notify's hook:
 * fs_orphan_hook, arg the struct fs). */
void fs_orphan_release(struct fs *fs, const struct cairn_fid *fid);
void fs_orphan_hook(void *arg, const struct cairn_fid *fid);
/* open and opendir (fs_file.c). */
/* Reply to OPEN (e NULL) or CREATE, counting an open for writing until
 * its RELEASE (itab_wopen). Returns what fuse_reply_* returned. */
int fs_reply_open(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		  const struct fuse_entry_param *e, struct fuse_file_info *fi);
void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     int isdir);

/* --- the handlers, by file, for the operation table in fs.c ------------- */

/* fs_name.c */
void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count,
			struct fuse_forget_data *forgets);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, dev_t rdev);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode);
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode, struct fuse_file_info *fi);
void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		   const char *name);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		const char *newname);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname,
		  unsigned int flags);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);

/* fs_file.c */
void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);
/* fs_lock.c */
void fs_op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		 struct flock *lock);
void fs_op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		 struct flock *lock, int sleep);
void fs_op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		 int op);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* RELEASE of an open file: its flock and OFD locks go. */
void fs_lock_release(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		     struct fuse_file_info *fi);
/* A handle for a new open file (its OFD locks are known by it). */
uint64_t fs_lock_next_fh(struct fs *fs);
void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		     off_t length, struct fuse_file_info *fi);

/* fs_dir.c */
/*
 * Fetch directory ino's listing with BULKSTAT (flags BS_*) into the
 * directory cache, and its attributes into the inode table. Returns 0
 * when the listing is now cached; -EBUSY when another fetch of ino runs
 * or it is too big to cache; -EAGAIN when a break on it (or a change
 * between pages) spoilt the fetch; or the call's error.
 */
/* A directory this client just made is known empty (fs_dir.c). */
void fs_dir_made(struct fs *fs, uint64_t seq, const struct cairn_attr *a);
int fs_dir_fetch(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		 uint32_t flags);
/* After fs_dir_fetch failed with rc: is it worth asking the server name
 * by name (or page by page)? Not when the server or the connection
 * failed, nor when the request was interrupted: that call would too. */
static inline int fs_dir_fetch_fallback(int rc)
{
	return rc == -EBUSY || rc == -EAGAIN || rc == -EFBIG ||
	       rc == -ENOMEM;
}
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi);

/* fs_xattr.c */
void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *value, size_t size, int flags);
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif

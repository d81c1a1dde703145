/*
 * fs.h - the FUSE low-level operations of the Cairn client.
 *
 * Every operation becomes one (or, for large reads, a few) server
 * requests through the rpc; replies that carry attributes come with a
 * callback promise, so the kernel is told to cache entries and attributes
 * for a long time (see notify.h for how breaks end that). Writes go
 * through to the server (v0: no write-back yet), so close() needs nothing.
 *
 * The session's userdata is the struct fs. The fs borrows the rpc, inode
 * table and notifier: they must outlive the session loop.
 */
#ifndef CAIRN_CLIENT_FS_H
#define CAIRN_CLIENT_FS_H

#include <stdio.h>

struct fs;
struct rpc;
struct itab;
struct notify;
struct ccache;
struct fuse_lowlevel_ops;

/* How long the kernel may cache what a standing promise covers. */
#define FS_CACHE_TIMEOUT 86400.0

/* Returns 0 and *out, or -ENOMEM. */
int fs_create(struct rpc *r, struct itab *t, struct notify *n,
	      struct fs **out);
void fs_destroy(struct fs *fs);

/*
 * Whether to ask the kernel for its FUSE writeback cache (default on):
 * write() then only fills the page cache, and the kernel sends the dirty
 * pages in large WRITEs on close, fsync or background writeback. The
 * kernel then also keeps a regular file's size, mtime and ctime itself and
 * ignores ours; see docs/ARCHITECTURE.md, "Writes". Only before the
 * session loop starts.
 */
void fs_set_writeback(struct fs *fs, int on);
/* Locks granted by the server across clients (on, the default), or kept
 * by the kernel within this client (--local-locks). Before the session. */
void fs_set_global_locks(struct fs *fs, int on);
/* With global locks: the lock state and its reclaim thread
 * (fs_lock.c); after daemonizing, before the session serves. Stop after
 * the session ended, before the rpc goes. */
int fs_locks_start(struct fs *fs);
void fs_locks_stop(struct fs *fs);
/* `cairn status MOUNTPOINT`: the lk.* keys. */
void fs_lock_print_stats(void *arg, FILE *f);

/* Serve reads through the persistent chunk cache c (client/ccache.h), or
 * not (NULL). Only before the session loop starts; c must outlive it. */
void fs_set_ccache(struct fs *fs, struct ccache *c);
/* Keep writes in the write-back journal w (client/wback.h; NULL: none).
 * Before the session runs. */
struct wb;
void fs_set_wback(struct fs *fs, struct wb *w);

/*
 * The thread that releases unlinked files on the server once the kernel
 * forgot them (client/fs_orphan.c). Start before the session loop; stop
 * after the kernel is gone (unmounted) and before the rpc: it sends what
 * is left, waiting at most a few seconds for an unreachable server. Start
 * returns 0 or a negative errno.
 */
int fs_orphans_start(struct fs *fs);
void fs_orphans_stop(struct fs *fs);
/* Likewise the threads of directory read-ahead (client/fs_dir.c); stop
 * ends their calls at once. */
int fs_ahead_start(struct fs *fs);
void fs_ahead_stop(struct fs *fs);

/* The operation table to pass to fuse_session_new (with userdata fs). */
const struct fuse_lowlevel_ops *fs_ops(void);

/*
 * The directory cache's counters as `key value` lines with keys prefixed
 * "dir." (cairn status MOUNTPOINT; docs/cairn.1 lists them). Takes the
 * directory cache's lock briefly; safe from any thread.
 */
void fs_print_dir_stats(struct fs *fs, FILE *f);

/*
 * Wait until the kernel's FUSE INIT has been answered (the session loop
 * must be running), at most timeout_ms. Returns 0 or -ETIMEDOUT. The
 * kernel applies the reply after the daemon writes it, i.e. a moment
 * after this returns; a system call on the mount made afterwards waits
 * for that.
 */
int fs_wait_init(struct fs *fs, int timeout_ms);

/*
 * Fetch the server's statfs now (after rpc_start) so that statfs(2) can
 * always be answered from a recent value without waiting on the network.
 * Returns 0 or a negative errno.
 */
int fs_refresh_statfs(struct fs *fs);

#endif

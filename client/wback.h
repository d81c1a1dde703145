/*
 * wback.h - write-back: changes to regular files kept in a journal on
 * local disk and sent to the server in the background (docs/PROTOCOL.md,
 * "Write tokens"; docs/ARCHITECTURE.md, "Writes").
 *
 * With the kernel's writeback cache, a file's dirty pages reach the daemon
 * as WRITEs on close(), fsync() or background writeback, and its size and
 * times as SETATTRs. While the client holds the file's write token, those
 * are answered as soon as they are appended to the journal (CACHE/journal,
 * segment files of records with a CRC each): close() waits for no server.
 * Shipper threads send the journal's changes in order, one file at a
 * time each, under the token (WR_TOKEN, SA_TOKEN), and drop them once the
 * server has them. Before another client may look at the file the server
 * recalls the token: the shippers send what is left for it and give the
 * token back, so the other client sees everything written before the
 * close. Tokens idle for WB_IDLE_RETURN_MS are given back unasked, in
 * batches (WRETURN).
 *
 * Nothing acknowledged is lost when the daemon dies: the journal is
 * written before the kernel's WRITE is answered (to the page cache; an
 * fsync of the file sends it to the server and syncs it there). The next
 * mount of the same cache directory sends what is left, taking each
 * file's token again only at the data version it last knew (WT_DV). A
 * file another client changed meanwhile is a conflict: the changes are
 * written to CACHE/conflicts/ (applied to an empty sparse file, in
 * order), logged, and never laid over the other client's version.
 *
 * Reads, attribute requests, fsync and the changes the journal does not
 * keep (chmod, fallocate, ...) of a file with changes still in the
 * journal first wait for them to be sent (wb_drain), so this client's
 * own requests see its own writes.
 *
 * Locking: one mutex, taken with no other lock of the client held,
 * except fs.wlock (op_setattr calls in holding its file's stripe) and a
 * notify reply section (attr_to_stat's wb_patch); never held across a
 * server call, a journal write or a kernel call (docs/LOCKING.md).
 */
#ifndef CAIRN_CLIENT_WBACK_H
#define CAIRN_CLIENT_WBACK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include "../lib/proto.h"

struct wb;
struct fs;

/* Shipper threads. */
#define WB_THREADS          8u
/* A held token with nothing left to send goes back after this long. */
#define WB_IDLE_RETURN_MS   1000
/* A recall that comes while the file was truncated since its last close
 * (the kernel's FLUSH: a rewrite in progress) waits this long at most for
 * that close, so that the other client sees whole closes, not a rewrite
 * half done. */
#define WB_CLOSE_WAIT_MS    1000
/* How long a shipper waits before it tries again to take back the token
 * of a file that a change of ours outside the journal is moving
 * (wb_move_begin); its end wakes the shippers sooner. */
#define WB_MOVING_RETRY_MS  100
/* A file created here is sent at the latest this long after its creation
 * (WB_GATHER_MS more when it may go in a batch; with its first bytes and
 * the attribute changes after them; renamed meanwhile, under its new
 * name: wb_rename_created), or sooner when a
 * request needs it (wb_barrier, a recall, fsync, unmount). Not at once at
 * its close: rsync and cp -a set times and modes after it, and rsync
 * renames the file... */
#define WB_CREATE_HOLD_MS   50
/* ... and at most this long after its close (what follows a close at
 * once, a chmod, times, a rename, still goes with it; a later fsync
 * finds it sent), */
#define WB_CLOSED_HOLD_MS   5
/* A creation that could go in a batch (CREATES) waits this long more once
 * its hold ended, so that the ones after it in its directory go with it
 * (a batch goes as soon as it is full; anything that hurries the file
 * ends the wait). cp -R of /usr/include: about 1,600 creations a second
 * here, so about 16 (a full batch) in 10 ms. */
#define WB_GATHER_MS        10
/* ... or at its close while a recall came less than this long ago:
 * another client works in what we hold, and may look at the file next. */
#define WB_SHARED_MS        10000
/* A file's writes wait this long at most for what follows them: the
 * kernel writes a file's pages back at close and fsync, and its times
 * (SETATTR) right after; held, they go with the last write in one
 * request (WRITEATTR). Close, fsync, a recall, a request of ours that
 * names the file, and unmount send them at once. */
#define WB_WRITE_HOLD_MS    50
/* FIDs taken ahead at a time (FIDS) for files created here. */
#define WB_FIDS_AHEAD       512u
/* A request that may name a file created here waits at most this long
 * for its creation to reach the server (wb_barrier). */
#define WB_BARRIER_MS       5000
/* After the server refused a directory's token, ask again only after
 * this long. */
#define WB_DIR_RETRY_MS     1000
/* A file's consecutive attribute changes go as one SETATTR (SA_STEPS),
 * this many at most. */
#define WB_ATTR_MERGE_MAX   64u
/* Journal segments are this large at most. */
#define WB_SEGMENT_MAX      (64ull << 20)
/* Above this many bytes not yet sent, writers wait for the shippers. */
#define WB_PENDING_MAX      (512ull << 20)
/* How long unmount keeps trying while the server does not take what is
 * left (2 s when it answers ENOSPC, EDQUOT, EROFS or EFBIG), or, with
 * everything sent, to give back the tokens still held. */
#define WB_STOP_PATIENCE_S  10

/*
 * Open the journal in cache_dir/journal (created; locked against other
 * mounts of the same cache directory) and read what a previous mount left
 * there. Returns 0 and *out, or a negative errno (err filled: the mount
 * then writes through).
 */
int wb_open(const char *cache_dir, struct fs *fs, struct wb **out,
	    char *err, size_t errsz);
/* Start the shippers; what was left is sent first. */
int wb_start(struct wb *w);
/* Send everything (logging progress; when the server has not taken any of
 * it for WB_STOP_PATIENCE_S, leave the rest for the next mount and say
 * so), give back the tokens (for at most WB_STOP_PATIENCE_S once nothing
 * is left to send: the server drops them when the connection ends) and
 * stop the shippers. Call after the kernel is gone, while the rpc
 * runs. */
void wb_stop(struct wb *w);
void wb_close(struct wb *w);

/*
 * rc from wb_write, wb_setattr or wb_dir_token means the server was asked
 * and could not be reached for the mount's --timeout (or the call was
 * cut short): the caller fails the call with rc rather than send the
 * change itself, which would wait as long again.
 */
static inline int wb_gave_up(int rc)
{
	return rc == -EIO || rc == -EINTR || rc == -ESHUTDOWN;
}

/*
 * A WRITE of a regular file from the kernel's writeback cache: journal it
 * (0: answered), or -ENOSYS: the caller writes through (no token to be
 * had: the server's table is full, or the file is not a regular file),
 * having waited for what the journal holds for it (wb_drain). WRITEs of
 * one file may come in parallel (the kernel sends different pages).
 * When asking for the token found the server unreachable (wb_gave_up),
 * that error: the caller fails the call with it.
 */
int wb_write(struct wb *w, const struct cairn_fid *fid, const char *buf,
	     size_t n, uint64_t off);

/*
 * A SETATTR that changes only size, times, permission bits and owner
 * (valid: SA_SIZE, SA_MTIME, SA_CTIME, SA_ATIME, SA_MODE, SA_UID, SA_GID,
 * SA_KEEPTIME) of a regular file: journal it, 0. Else -ENOSYS: the caller
 * sends it itself after wb_drain. mode: the permission bits (07777) for
 * SA_MODE; uid, gid for SA_UID, SA_GID. The caller has decided that the
 * change is allowed (the kernel checked it: default_permissions) and
 * clears no set-ID bit (the server would). rewrite:
 * it is the kernel's O_TRUNC of an open, so a size change begins a
 * rewrite that the file's close (wb_closed) ends. Caller holds the file's
 * fs.wlock stripe.
 */
int wb_setattr(struct wb *w, const struct cairn_fid *fid, uint32_t valid,
	       uint64_t size, const struct cairn_time *mtime,
	       const struct cairn_time *ctime, const struct cairn_time *atime,
	       uint32_t mode, uint32_t uid, uint32_t gid, int rewrite);
/* Journal a change of directory dir's attributes (valid: SA_CTIME, and
 * any of SA_MTIME, SA_ATIME, SA_MODE, SA_UID, SA_GID) while we hold its
 * token: 0, with *dir_dv moved one version on as for wb_create (from the
 * directory's version as known), or -EAGAIN / -ENOSYS: the server does
 * it. It reaches the server after the creates and removes in the
 * directory answered before it, and before those after it. */
int wb_dir_setattr(struct wb *w, const struct cairn_fid *dir,
		   uint64_t *dir_dv, uint32_t valid,
		   const struct cairn_time *mtime,
		   const struct cairn_time *ctime,
		   const struct cairn_time *atime, uint32_t mode, uint32_t uid,
		   uint32_t gid);

/* Anything kept or held at all? (an atomic read; w may be NULL) */
int wb_busy(struct wb *w);
/* Attributes a (of a regular file) as they are with the changes the
 * journal holds for it applied: size, and the times the kernel sent; of
 * a directory, its journaled attribute changes (times, mode, owner;
 * wb_dir_setattr). For every reply that gives the kernel a file's or a
 * directory's attributes. */
void wb_patch(struct wb *w, struct cairn_attr *a);
/* A reply carried a's attributes: while we hold the token with nothing
 * in flight, its data version is where our next change starts. */
void wb_attr_seen(struct wb *w, const struct cairn_attr *a);
/* A change of ours that is not in the journal (a rename, link, removal,
 * xattr or attribute change sent at once) moves fid one version on the
 * server: begun before it is sent (returns whether it counts), ended
 * once its outcome is known (applied: it took effect). The journal's
 * changes of fid still to send, and those journaled after, then expect
 * the file one version further; while one is on its way, a token lost
 * with changes left is not taken again (wback.c). */
int wb_move_begin(struct wb *w, const struct cairn_fid *fid);
void wb_move_end(struct wb *w, const struct cairn_fid *fid, int begun,
		 int applied);
/* Send fid's changes now and wait for them: 0 (at once, without the
 * lock, when the journal holds nothing), or the error that keeps them
 * from the server (they stay in the journal). */
int wb_drain(struct wb *w, const struct cairn_fid *fid);
/* wb_drain for fsync: the last change goes durable (WR_SYNC, SA_SYNC)
 * where it can. 1 when it did, so the file's changes are durable on the
 * server; 0 when an FSYNC is needed still; or the error. */
int wb_sync(struct wb *w, const struct cairn_fid *fid);

/* The CREATE that made fid (with CR_TOKEN) returned: we hold its token,
 * at data version dv. */
void wb_created(struct wb *w, const struct cairn_fid *fid, uint64_t dv,
		uint64_t size);
/* CB_RECALL of fid (the rpc reader's notify hook): never blocks. */
void wb_recall(void *arg, const struct cairn_fid *fid);
/*
 * A close() of fid (the kernel's FLUSH, after it wrote the file's dirty
 * pages): what the journal holds of it now is a whole close, which a
 * recall may hand over. Without FLUSH (--local-locks mounts answer it
 * ENOSYS and never call this) recalls do not wait for closes.
 */
void wb_closed(struct wb *w, const struct cairn_fid *fid);
/*
 * A lock release is about to go to the server, after the file's changes
 * (fs_lock.c): if fid's token is held with nothing left to send, it goes
 * back with the release (LK_RETURN). wb_return_begin marks it so
 * (writers wait) and returns 1; wb_return_end(ok: the release was
 * answered) ends that. 0: nothing to give back.
 */
int wb_return_begin(struct wb *w, const struct cairn_fid *fid);
void wb_return_end(struct wb *w, const struct cairn_fid *fid, int ok);
/* After a reconnect every token is gone (the notify hook). */
void wb_reconnected(void *arg);

void wb_print_stats(void *arg, FILE *f);

/*
 * Creates answered here (docs/ARCHITECTURE.md, "Namespace changes
 * without a round trip each"). wb_dir_token: take directory dir's write
 * token with the credential block cred (the creating process's) (0, or an error: create on the server then).
 * wb_fid_take: a FID taken ahead (0), or -EAGAIN while there is none
 * (more are being asked for). wb_create: journal the creation of
 * regular file a (its FID, mode, owner, times, dv) as name in dir, sent
 * later with the credential block cred; the file's token is ours;
 * *dir_dv (the directory's version as known) becomes its version with
 * this create (creates not sent yet counted). Only
 * while dir's token is held: else -EAGAIN. wb_barrier: wait, at most
 * WB_BARRIER_MS, until the creation of each of fids[0..n) and every
 * create in those that are directories reached the server (fids NULL:
 * every create the journal holds); fs.c calls it before each request
 * with the FIDs it names.
 */
int wb_dir_token(struct wb *w, const struct cairn_fid *dir,
		 const void *cred, size_t credlen);
int wb_fid_take(struct wb *w, struct cairn_fid *out);
int wb_create(struct wb *w, const struct cairn_fid *dir, uint64_t *dir_dv,
	      const char *name, size_t len, const struct cairn_attr *a,
	      const void *cred, size_t credlen);
void wb_barrier(struct wb *w, const struct cairn_fid *const *fids, int n);
/* Whether fid's token is held here (and not recalled). */
int wb_holds(struct wb *w, const struct cairn_fid *fid);
/* Every FID whose token is held here (and not recalled), in *out
 * (malloc'd; NULL when out of memory). Returns how many. arg is the
 * struct wb (a notify hook). */
size_t wb_held(void *arg, struct cairn_fid **out);
/* 1 when the last change of fid in the journal is the removal of a name
 * of it; then *a (its attributes) gets the journal's (wb_patch). */
int wb_removal_last(struct wb *w, const struct cairn_fid *fid,
		    struct cairn_attr *a);
/* wb_barrier for the FIDs of an array (ORPHAN_DROP, ATIME). */
void wb_barrier_list(struct wb *w, const struct cairn_fid *fids, size_t n);
/*
 * The removal of name in dir, a name of victim, answered here: journaled
 * as victim's last change and sent later (REMOVE with flags | RM_FID,
 * with the credential block cred), a directory's (RM_DIR) after every
 * create and remove in it. Only while dir's token is held (and with
 * RM_DIR, victim's: nobody else can have put a name in it) and victim
 * has no removal pending already: else -EAGAIN. *dir_dv as for
 * wb_create. Changes to victim after it go through (wb_write and
 * wb_setattr refuse them). when: the time it was answered at, the
 * directory's mtime and ctime the caller gives the kernel (sent with it:
 * REMOVESAT).
 */
int wb_remove(struct wb *w, const struct cairn_fid *dir, uint64_t *dir_dv,
	      const char *name, size_t len, const struct cairn_fid *victim,
	      uint32_t flags, const struct cairn_time *when, const void *cred,
	      size_t credlen);
/*
 * A rename within directory dir of fid, whose creation answered here is
 * still in the journal and not yet on its way: the creation is journaled
 * again under the new name (the first record marked done), and goes to
 * the server as if made so (rsync's and editors' write to a temporary
 * name and rename, without a round trip). Only while dir's token is
 * held, with nothing else of dir's own waiting, no send of fid tried yet
 * and no removal of name pending in dir: else -EAGAIN (send the rename).
 * The caller has checked that name is free in dir's listing.
 */
int wb_rename_created(struct wb *w, const struct cairn_fid *dir,
		      const struct cairn_fid *fid, const char *name,
		      size_t len);

#endif

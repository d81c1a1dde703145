/*
 * store.h - the file server's storage engine for one data directory.
 *
 * Layout of a data directory:
 *   DATA/LOCK           flock()ed by the one `cairn serve` using DATA
 *   DATA/meta/          LMDB environment: inodes, directory entries, xattrs
 *   DATA/objects/XX/N   file data of vnode N (hex), XX = low byte of N
 * (DATA/server-id, where earlier versions kept the server id, is moved
 * into meta by store_open.)
 *
 * LMDB holds every object's attributes (size included: LMDB is the authority
 * on size, the data file may be shorter, and the bytes past its end read as
 * zeros). Vnode numbers are never reused. The root directory of volume 1 is
 * vnode 1. All functions are safe to call from many threads at once.
 *
 * Every function returns 0 or a negative errno with the meaning a local
 * Linux file system would give it (ENOENT, EEXIST, ENOTEMPTY, ...), plus
 * -ESTALE for a FID that no longer names an object. Attribute outputs are
 * filled only on success.
 *
 * Durability: when a mutating function returns 0 its metadata change is
 * committed to LMDB and synced (group commit batches concurrent callers into
 * one sync). File data written by store_write is in the server's page cache
 * (so it survives kill -9 of the server); with WR_SYNC, or after
 * store_fsync, it is on stable storage.
 *
 * A failed data sync is sticky. When store_fsync or a WR_SYNC store_write
 * fails to sync a file's data (the kernel has then dropped the unwritten
 * pages' dirty state: the data on disk is unknown, and a retried fsync
 * would return 0), that call returns the error and the file is marked in
 * its inode; from then on store_read, store_write, store_fsync,
 * store_fallocate and store_setattr to a non-zero size fail with -EIO for
 * that file, across restarts, until it is truncated to size 0 (every byte
 * is then defined) or removed. Its attributes, names and xattrs stay
 * usable; other files are not affected. store_fsck lists such files.
 * (Two cases last until the server restarts instead: if the mark itself
 * cannot be committed, every file's data fails with -EIO; if a sync of
 * the directory holding data files fails, syncs of the files in it do.)
 *
 * A record in LMDB that does not decode (store_rec.h) gives -EUCLEAN, as
 * ext4 gives for corrupt metadata.
 *
 * Mutating functions report the objects whose attributes changed besides the
 * ones returned, in `struct store_changed`, so the server can break callbacks
 * on them.
 */
#ifndef CAIRN_STORE_H
#define CAIRN_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

struct store;

/* Objects, besides those returned in attr outputs, that a change touched
 * (e.g. the unlinked file whose nlink dropped, the replaced rename target,
 * a moved directory whose ".." changed). */
struct store_changed {
	int n;
	struct cairn_fid fid[4];
	/* The object the change made an orphan (RM_KEEP/RN_KEEP took its
	 * last link), one of fid[]; vnode 0: none. */
	struct cairn_fid orphan;
	/* Bit i: the change destroyed fid[i] (its last link went and it
	 * is not an orphan). Set by store_remove only. */
	unsigned gone;
};

/*
 * Open (creating on first use) the store in `dir`. Takes an exclusive
 * flock on DIR/LOCK; if another process holds it, fails with -EBUSY and
 * err says "data directory DIR is in use by another cairn serve". Other
 * failures fill err with the path and reason. *out owned by the caller,
 * released with store_close.
 */
int store_open(const char *dir, struct store **out, char *err, size_t errsz);
void store_close(struct store *st);

/*
 * The largest file whose bytes stores opened from now on keep in LMDB
 * instead of a data file of its own (store_int.h); at most, and by
 * default, STORE_INLINE_MAX. 0: every file has a data file (as stores
 * before inline files did; the tests of data files use it).
 */
void store_set_inline_max(uint32_t bytes);

/*
 * The server's identity, 16 bytes that stay the same for the life of the
 * data directory (kept in meta, made at the first start; a DATA/server-id
 * left by an earlier version is adopted, so clients see the same id as
 * before). -EUCLEAN if the stored id is malformed.
 */
int store_server_id(struct store *st, uint8_t id[16]);

/* The root directory. */
int store_root(struct store *st, struct cairn_attr *out);
int store_getattr(struct store *st, const struct cairn_fid *fid,
		  struct cairn_attr *out);
/* name is NUL-terminated, already checked to be a valid component. */
int store_lookup(struct store *st, const struct cairn_fid *dir,
		 const char *name, struct cairn_attr *out);

struct store_setattr {
	uint32_t valid; /* SA_* */
	uint32_t mode, uid, gid;
	uint64_t size;
	struct cairn_time atime, mtime, ctime;
	uint32_t steps; /* the data version moves by this many; 0 is 1 */
};
int store_setattr(struct store *st, const struct cairn_fid *fid,
		  const struct store_setattr *sa, struct cairn_attr *out);

/*
 * Create a regular file, directory, fifo, socket or device node (type from
 * mode). flags: CR_EXCL. Without CR_EXCL, an existing regular file of that
 * name is returned with *created = 0. Set-group-ID directory rules apply.
 */
int store_create(struct store *st, const struct cairn_fid *dir,
		 const char *name, uint32_t mode, uint32_t uid, uint32_t gid,
		 uint32_t rdev, uint32_t flags, int *created,
		 struct cairn_attr *out, struct cairn_attr *dir_out);
/*
 * store_create with CR_FID (docs/PROTOCOL.md, "Objects named ahead"): the
 * new object is fid (a vnode store_fids handed out: else -EINVAL) with
 * times t, and the directory's mtime and ctime become t. If an object
 * with fid exists already the call is answered as done (*created = 2,
 * its attributes and the directory's) and changes nothing; another
 * object of that vnode, or the name existing: -EEXIST.
 */
int store_create_fid(struct store *st, const struct cairn_fid *dir,
		     const char *name, uint32_t mode, uint32_t uid,
		     uint32_t gid, uint32_t rdev, uint32_t flags,
		     const struct cairn_fid *fid, struct cairn_time t,
		     int *created, struct cairn_attr *out,
		     struct cairn_attr *dir_out);
/*
 * store_create_fid of a regular file with its first len bytes (CREATE's
 * data): in one commit when the object does not exist yet (its data file
 * is written first, under the vnode's lock; it goes again if the create
 * fails), else as store_create_fid and then store_write (WR_KEEPTIME)
 * when the object is still at data version 1. Either way the result is
 * what those two calls would give: size len, data version 2, the times t.
 */
int store_create_data(struct store *st, const struct cairn_fid *dir,
		      const char *name, uint32_t mode, uint32_t uid,
		      uint32_t gid, uint32_t flags, const struct cairn_fid *fid,
		      struct cairn_time t, const void *data, uint32_t len,
		      const struct store_setattr *then, int *created,
		      struct cairn_attr *out, struct cairn_attr *dir_out);
/* Hand out count (1 .. CAIRN_FIDS_MAX) FIDs for CR_FID creates: first,
 * and the vnodes after it with the same uniq. No vnode is handed out
 * twice. */
int store_fids(struct store *st, uint32_t count, struct cairn_fid *first);
int store_symlink(struct store *st, const struct cairn_fid *dir,
		  const char *name, const char *target, uint32_t uid,
		  uint32_t gid, struct cairn_attr *out,
		  struct cairn_attr *dir_out);
/* target: buffer of CAIRN_SYMLINK_MAX + 1 bytes, NUL-terminated on return. */
int store_readlink(struct store *st, const struct cairn_fid *fid,
		   char *target, size_t *len);
int store_link(struct store *st, const struct cairn_fid *fid,
	       const struct cairn_fid *dir, const char *name,
	       struct cairn_attr *out, struct cairn_attr *dir_out);
/*
 * flags: RM_DIR, RM_KEEP. ch gets the removed object. An object whose
 * last link goes is deleted with its data file; with RM_KEEP a
 * non-directory becomes an orphan held by `holder` instead (see Orphans
 * below). holder: the requester's client id, needed with RM_KEEP (else
 * -EINVAL), ignored without it.
 */
int store_remove(struct store *st, const struct cairn_fid *dir,
		 const char *name, uint32_t flags, const uint8_t *holder,
		 struct cairn_attr *dir_out, struct store_changed *ch);
/*
 * REMOVES: names[0..n) (n <= CAIRN_REMOVES_MAX) of dir, each as
 * store_remove with flags[i] (RM_DIR, RM_KEEP, RM_SELF; anything else:
 * -EINVAL for the whole call) and holder, at times[i] (the directory's
 * mtime and ctime, the object's ctime; NULL or a zero time: now), in
 * order, each on its own (one that fails changes nothing and the others
 * still happen), in one commit when nothing else fills the batch.
 * Returns 0 with rcs[i] each entry's result and ch[i] what it removed
 * (n 0 when it failed), and dir_out the directory after all of them; or
 * a negative errno for the call (nothing removed).
 */
int store_removes(struct store *st, const struct cairn_fid *dir, int n,
		  const char *const *names, const uint32_t *flags,
		  const struct cairn_time *times, const uint8_t *holder,
		  int *rcs, struct cairn_attr *dir_out,
		  struct store_changed *ch);
/*
 * CREATES: regular files e[0..n) (n <= CAIRN_CREATES_MAX) in dir, each as
 * store_create_data or store_create_fid would make it (CR_FID required;
 * first bytes of at most the inline room, else that entry's rc is -E2BIG
 * and nothing is done for it: the caller makes it alone), in order, each
 * on its own, in one commit when nothing else fills the batch. Returns 0
 * with each entry's rc, created and out filled, and dir_out the
 * directory after all of them; or a negative errno for the call.
 */
struct store_cent {
	const char *name;
	uint32_t mode, uid, gid, flags;
	struct cairn_fid fid;
	struct cairn_time t;
	const void *data;
	uint32_t len;
	/* Attribute changes made with the file when this call makes it (as
	 * store_setattr right after, in the same commit), or NULL. */
	const struct store_setattr *then;
	int rc, created;
	struct cairn_attr out;
};
int store_creates(struct store *st, const struct cairn_fid *dir,
		  struct store_cent *e, int n, struct cairn_attr *dir_out);
/* flags: RN_NOREPLACE, RN_EXCHANGE, RN_KEEP (with it a replaced
 * non-directory target whose last link goes becomes an orphan held by
 * holder, as RM_KEEP does). Other bits, or NOREPLACE with EXCHANGE:
 * -EINVAL. ch gets the moved object(s) and a replaced target. */
int store_rename(struct store *st, const struct cairn_fid *sdir,
		 const char *sname, const struct cairn_fid *ddir,
		 const char *dname, uint32_t flags, const uint8_t *holder,
		 struct cairn_attr *sdir_out, struct cairn_attr *ddir_out,
		 struct store_changed *ch);

/*
 * Directory listing from `cookie` (0 = start). Calls fn once per entry in
 * cookie order until fn returns non-zero or max entries were given; *eof
 * is set when the end was reached. fn is called inside a read transaction:
 * it must not call back into the store.
 */
typedef int (*store_dirent_fn)(void *arg, uint64_t next_cookie,
			       const char *name, size_t namelen,
			       const struct cairn_attr *attr);
int store_readdir(struct store *st, const struct cairn_fid *dir,
		  uint64_t cookie, uint32_t max, store_dirent_fn fn, void *arg,
		  int *eof);
/*
 * store_readdir, and with it the directory's attributes (dir_out) and the
 * cookie its next new entry will get (next_cookie), read in the same
 * read transaction as the entries: they describe exactly the listing
 * given (either may be NULL). With atime set, a listing from cookie 0
 * applies relatime to the directory's atime as store_readdir does (best
 * effort), and dir_out carries the new atime; without it the atime is
 * not touched.
 */
int store_readdir_attr(struct store *st, const struct cairn_fid *dir,
		       uint64_t cookie, uint32_t max, int atime,
		       store_dirent_fn fn, void *arg, int *eof,
		       struct cairn_attr *dir_out, uint64_t *next_cookie);

/* Read up to len bytes at off into buf; *n = bytes read (short only at
 * EOF). Applies relatime rules to atime. out = attributes after the read. */
int store_read(struct store *st, const struct cairn_fid *fid, uint64_t off,
	       uint32_t len, void *buf, uint32_t *n, struct cairn_attr *out);
/* Relatime for reads the server did not see: move each listed file's
 * atime to now where a READ would (store_read), in one transaction;
 * directories, unknown and stale FIDs are skipped. *moved = how many. */
int store_atime_many(struct store *st, const struct cairn_fid *fids,
		     size_t n, size_t *moved);
/* flags: WR_SYNC. Updates size, mtime, ctime, dv. */
int store_write(struct store *st, const struct cairn_fid *fid, uint64_t off,
		const void *buf, uint32_t len, uint32_t flags,
		struct cairn_attr *out);
/* store_write, then `then` (a SETATTR without SA_SIZE: owner, mode,
 * times, the data version moved by its steps) in the same commit. */
int store_write_attr(struct store *st, const struct cairn_fid *fid,
		     uint64_t off, const void *buf, uint32_t len,
		     uint32_t flags, const struct store_setattr *then,
		     struct cairn_attr *out);
/* flags: FS_DATASYNC. For a regular file its data, and for every object
 * every change committed so far (store_sync), are on stable storage when
 * it returns 0. */
int store_fsync(struct store *st, const struct cairn_fid *fid,
		uint32_t flags);
/*
 * Exactly once across restarts (store.c, "changes applied exactly once").
 * store_tag_set names the request the calling thread's next store change
 * runs for (client id, request id); the change records it in its own
 * transaction. If that request was applied before, the change does
 * nothing and fails with -EALREADY, and store_applied_get then gives the
 * object it had made (created file, directory or symlink; vnode 0 for the
 * others). The tag is used by the next transaction only; store_tag_clear
 * drops it when no transaction followed (an early error).
 */
struct store_tag {
	uint8_t client[16];
	uint32_t id;
	int set;
};
struct store_applied {
	struct cairn_fid fid;
	int created;
};
void store_tag_set(const uint8_t client[16], uint32_t id);
void store_tag_clear(void);
void store_applied_get(struct store_applied *out);
/* Delete up to 4096 records made before wall-clock second `before`;
 * *n = how many. */
int store_applied_expire(struct store *st, int64_t before, size_t *n);

/* Make every change committed so far durable (one fdatasync of the LMDB
 * file; nothing when nothing was committed since the last). 0 or -EIO;
 * a failure is sticky (every later call fails) and logged. */
int store_sync(struct store *st);
/* How many store_syncs synced something (STATUS store_syncs). */
uint64_t store_syncs(struct store *st);
/* Once a second: store_sync, and keep data.mdb's reserve for commits on a
 * full disk (store.c). */
void store_tick(struct store *st);
int store_fallocate(struct store *st, const struct cairn_fid *fid,
		    uint32_t mode, uint64_t off, uint64_t len,
		    struct cairn_attr *out);
int store_statfs(struct store *st, struct cairn_statfs *out);

/* name NUL-terminated. flags: XA_CREATE, XA_REPLACE. */
int store_setxattr(struct store *st, const struct cairn_fid *fid,
		   const char *name, const void *val, size_t len,
		   uint32_t flags);
/* Copies min(size, value length) bytes into buf when size > 0; *len = value
 * length. -ERANGE if size > 0 and the value is longer. */
int store_getxattr(struct store *st, const struct cairn_fid *fid,
		   const char *name, void *buf, size_t size, size_t *len);
/* NUL-terminated names back to back, same size rules as getxattr. */
int store_listxattr(struct store *st, const struct cairn_fid *fid, char *buf,
		    size_t size, size_t *len);
int store_removexattr(struct store *st, const struct cairn_fid *fid,
		      const char *name);

/*
 * Orphans. A non-directory whose last link a REMOVE with RM_KEEP (or a
 * RENAME with RN_KEEP over it) took keeps its inode, with nlink 0, its
 * xattrs and its data file: it stays usable by FID (getattr, read, write,
 * setattr, fsync, fallocate, xattrs) but has no name (store_link answers
 * -ENOENT). The orphans database records its holders: the client id of
 * the requester, in the same transaction as the removal, and then those
 * of the other clients that may have it open (store_orphan_hold). A
 * holder gives up its hold when it drops it (store_orphan_drop) or when
 * the server decides it is gone for good (store_orphan_release); the
 * orphan is freed (inode, xattrs, data file) when its last holder goes.
 */
#define STORE_HOLDER_SIZE 16
/* Holders one orphan keeps at most; more are not recorded. */
#define STORE_ORPHAN_HOLDERS_MAX 1024

/*
 * Add the n client ids at ids (n * STORE_HOLDER_SIZE bytes) to the
 * holders of orphan fid, in one transaction (ids it has already, and any
 * past STORE_ORPHAN_HOLDERS_MAX, are skipped). Returns 1 when fid is an
 * orphan (held by them now), 0 when it is not (freed already, or a
 * linked or unknown FID: nothing done), or an errno of the store.
 */
int store_orphan_hold(struct store *st, const struct cairn_fid *fid,
		      const uint8_t *ids, size_t n);

/*
 * Give up holder's hold on each of the n FIDs that is an orphan it holds,
 * all in one transaction, freeing those it was the last holder of; the
 * others (linked objects, unknown or stale FIDs, orphans it does not
 * hold) are ignored. *freed (may be NULL) gets how many were freed.
 * Returns 0 or an errno of the store.
 */
int store_orphan_drop(struct store *st, const uint8_t holder[STORE_HOLDER_SIZE],
		      const struct cairn_fid *fids, size_t n, size_t *freed);
/* Give up holder's holds, in transactions of a few hundred, until none is
 * left or at least max (0: no limit) were given up (freeing the orphans
 * it was the last holder of); *freed (may be NULL) gets how many holds
 * went, also on error. */
int store_orphan_release(struct store *st,
			 const uint8_t holder[STORE_HOLDER_SIZE],
			 uint64_t max, uint64_t *freed);
/* The holders of orphans with the number each holds (an orphan counts
 * once for each of its holders): *out a malloc'ed
 * array of *n (NULL and 0 when there are none), freed by the caller. */
struct store_holder {
	uint8_t id[STORE_HOLDER_SIZE];
	uint64_t count;
};
int store_orphan_holders(struct store *st, struct store_holder **out,
			 size_t *n);
/* How many orphans there are. */
int store_orphan_count(struct store *st, uint64_t *n);

/*
 * Offline consistency check of a stopped server's data directory (takes
 * DIR/LOCK; -EBUSY while a server runs). Prints one line per problem to
 * `report` (a FILE *) and returns the number of problems found (0 = clean)
 * or a negative errno if the check could not run (err filled).
 * Checks: every dirent names an existing inode of the recorded type; nlink
 * equals the number of entries naming each inode (+ subdirectories' ".."
 * for directories); no inode is unreachable from the root, except orphans
 * (an orphan record naming an existing non-directory with nlink 0 and no
 * entry; a record of a missing, linked or directory inode is a problem);
 * every regular file's data file exists or its size is 0; no data file
 * without an inode. *orphans (may be NULL) gets the number of orphans
 * seen.
 */
int store_fsck(const char *dir, void *report, unsigned long *orphans,
	       char *err, size_t errsz);

#endif

/*
 * inode.h - the client's inode table: what the kernel has been told.
 *
 * The FUSE inode number (node id) of an object is its FID's vnode number
 * (the root, vnode 1, is FUSE_ROOT_ID) and the FUSE generation is the
 * FID's uniq, so the table maps ino -> FID without any allocation of
 * numbers. The exceptions are a regular file whose kernel inode went out
 * of date while the kernel still held it (itab_set_evict_files), and a
 * directory found under another name while the kernel may still hold it
 * under one a break expired (another client moved it: the kernel would
 * have to move that dentry, and cannot inside a rename), or under a later
 * incarnation of its parent. Such an object is handed out again as a new
 * *incarnation*, node id vnode | gen << ITAB_GEN_SHIFT, and the old node
 * id lives on until the kernel forgets it. Every incarnation has its own
 * entry here; what the server says about the FID (breaks, attributes,
 * orphans) applies to all of them. Per inode it keeps:
 *
 *   - nlookup: the kernel's lookup count (every entry handed out by lookup,
 *     create, mknod, mkdir, symlink, link or readdirplus adds one; forget
 *     subtracts). It is the inode's reference count: when it reaches zero
 *     the inode leaves the table and is freed. The root is pinned.
 *   - names: the (parent ino, name) pairs the kernel got it under (at most
 *     ITAB_NAMES_MAX, oldest dropped), and for a directory every entry
 *     (positive or negative) handed out in it, so that a break or a lost
 *     connection can invalidate the dentries the kernel caches. Those of
 *     directories are only expired in the kernel (notify.c), and stay
 *     here marked so until looked up again or replaced.
 *   - the callback state: whether the server's promise stands, the last
 *     known data version and attributes (GETATTR is answered from them
 *     while they are current), and whether the kernel's page cache holds
 *     data of that version (set when a file is opened after a fresh
 *     GETATTR).
 *
 * Every function is thread-safe (one mutex inside; no function blocks or
 * calls out while holding it, except the visitors of itab_break and
 * itab_break_all, which must not block). Nothing here talks to the kernel or the server.
 *
 * Inode numbers are uint64_t (fuse_ino_t) so that this module does not
 * depend on libfuse and the unit test can drive it directly.
 */
#ifndef CAIRN_CLIENT_INODE_H
#define CAIRN_CLIENT_INODE_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

#define ITAB_ROOT_INO   1u
/* Node ids of later incarnations: the generation sits above the vnode
 * number (vnodes above ITAB_VNODE_MASK never get a second incarnation). */
#define ITAB_GEN_SHIFT  48
#define ITAB_VNODE_MASK ((1ull << ITAB_GEN_SHIFT) - 1)
#define ITAB_GEN_MAX    0xffffu
/* Names remembered per inode (hard links, renames); older ones dropped. */
#define ITAB_NAMES_MAX  16u
/* Negative entries remembered per directory and in total; beyond that the
 * caller must not let the kernel cache the negative entry for long. */
#define ITAB_NEGS_DIR_MAX   4096u
#define ITAB_NEGS_TOTAL_MAX 65536u

struct itab;

/* A copy of one inode's state, for diagnostics and tests. */
struct itab_info {
	struct cairn_fid fid;
	uint64_t nlookup;
	unsigned nnames;      /* (parent, name) pairs recorded for it */
	unsigned nnegs;       /* negative entries recorded in this directory */
	int promise;          /* 1 while the server's callback promise stands */
	int cache_valid;      /* 1 while the page cache matches cache_dv */
	uint64_t dv;
	uint64_t cache_dv;
	uint32_t wgen;        /* opens for writing and truncates here, ever
			       * (itab_wopen, itab_wgen_bump) */
};

/*
 * Create a table holding the root (from the HELLO reply; its vnode must be
 * ITAB_ROOT_INO). Returns 0 and *out, or -ENOMEM / -EINVAL.
 */
int itab_create(const struct cairn_attr *root, struct itab **out);
/* Free the table and every inode in it. */
void itab_destroy(struct itab *t);

/*
 * The kernel is being handed object `a` as entry `name` (len bytes, not
 * necessarily NUL-terminated) of directory `parent`: take one lookup
 * reference (creating the inode if needed), record the name, drop a
 * negative entry of that name, and take a->dv as the known data version.
 * `promise` says whether the callback promise carried by the reply still
 * stands (no break arrived meanwhile). dir_promise (may be NULL) gets
 * whether the promise on `parent` stands, which is what covers the name
 * (0 for an unknown parent). *nodeid gets the node id to hand the kernel:
 * the vnode number, or a new incarnation's (see the head of this file)
 * when the newest one the kernel holds is out of date. Returns 0, -ENOMEM
 * (nothing taken) or -EINVAL (vnode 0 or a name over CAIRN_NAME_MAX).
 */
int itab_add_entry(struct itab *t, uint64_t parent, const char *name,
		   size_t len, const struct cairn_attr *a, int promise,
		   int *dir_promise, uint64_t *nodeid);
/* Drop `n` lookup references (FUSE forget). Unknown inos are ignored.
 * Returns 1 when that freed an inode marked by itab_set_orphan (its FID
 * is copied to *orphan unless orphan is NULL), else 0. */
int itab_forget(struct itab *t, uint64_t ino, uint64_t n,
		struct cairn_fid *orphan);

/*
 * A negative LOOKUP reply arrived with no break in between: the server
 * promised the directory (as itab_set_promised), and the kernel is to be
 * handed the negative entry: record it. Returns 0, -ENOSPC when over
 * ITAB_NEGS_*_MAX (do not cache it for long), -ESTALE when the directory
 * is unknown, -ENOMEM (then nothing changed).
 */
int itab_add_negative(struct itab *t, uint64_t parent, const char *name,
		      size_t len);

/*
 * Names changed by our own requests: unlink/rmdir removed (parent, name);
 * rename moved (or with exchange = 1 swapped) the entries. These keep the
 * recorded names equal to the kernel's dentries. Never fail.
 */
void itab_remove_entry(struct itab *t, uint64_t parent, const char *name,
		       size_t len);
void itab_rename(struct itab *t, uint64_t oldparent, const char *oldname,
		 size_t oldlen, uint64_t newparent, const char *newname,
		 size_t newlen, int exchange);

/* The FID of ino: 0, or -ESTALE when the kernel should not know it. */
int itab_fid(struct itab *t, uint64_t ino, struct cairn_fid *fid);
/* itab_fid, and *promise gets whether the promise on ino stands. */
int itab_fid_promise(struct itab *t, uint64_t ino, struct cairn_fid *fid,
		     int *promise);
/* Parent ino of the first recorded name (root: itself). 0 or -ESTALE. */
int itab_parent(struct itab *t, uint64_t ino, uint64_t *parent);

/*
 * A reply from the server carried attributes `a` of a known inode
 * (unknown inodes are ignored). promise = 1: no break arrived meanwhile,
 * so the promise stands and `a` is the result of our own change or no
 * change at all; the page cache, if valid, follows to a->dv. promise = 0:
 * the promise is gone and the page cache is no longer trusted.
 */
void itab_update(struct itab *t, const struct cairn_attr *a, int promise);

/*
 * The attributes of ino, while its promise stands and a reply with no
 * break in between gave them (and no change of ours came back without
 * them since): 0 and *a. -EAGAIN: not known current (ask the server);
 * -ESTALE: the kernel should not know ino.
 */
int itab_getattr(struct itab *t, uint64_t ino, struct cairn_attr *a);
/* The attributes last recorded for ino, current or not: 0 and *a, with
 * *current as itab_getattr would have answered 0; -EAGAIN (none
 * recorded) or -ESTALE. */
int itab_attr_last(struct itab *t, uint64_t ino, struct cairn_attr *a,
		   int *current);
/* A change of ours to ino came back without its new attributes (SETXATTR,
 * REMOVEXATTR; the object an unlink or rename touched), or may have
 * happened (interrupted): the promise stands, but the attributes recorded
 * are no longer current, and only attributes of a newer data version
 * than theirs become current again. */
void itab_attr_stale(struct itab *t, uint64_t ino);

/* A read the server did not see moved ino's atime (relatime): record
 * `when` in the current attributes, if any, until the server's own value
 * comes back. The data version does not change. */
void itab_set_atime(struct itab *t, uint64_t ino, struct cairn_time when);

/*
 * Opening ino (open, opendir), in one look at the table: *fid gets its
 * FID. With keep set, when the kernel may keep its page cache (the promise
 * stands and the data version has not changed since the cache was filled),
 * the open is done here and 1 returned; the caller answers with
 * keep_cache. When the promise stands and the attributes are current but
 * the page cache is of no known version, the open is done here too and 2
 * returned: the caller answers without keep_cache (the kernel refills its
 * pages at the current version). Else 0: the caller fetches attributes
 * and finishes with itab_open_end. -ESTALE when the kernel should not
 * know ino.
 */
int itab_open_begin(struct itab *t, uint64_t ino, int keep,
		    struct cairn_fid *fid);
/* The kernel's pages of ino may hold another version than the current
 * one (an open reading an older version, fs_file.c): the next open lets
 * them go. */
void itab_cache_stale(struct itab *t, uint64_t ino);

/*
 * Finish opening ino (open, opendir, create) with its attributes `a`
 * fetched for the open: take them as itab_update does; when `promise`
 * stands, the page cache the kernel now fills holds version a->dv (a later
 * open may keep it). One look at the
 * table. Attributes of another object than ino are not taken.
 */
void itab_open_end(struct itab *t, uint64_t ino, const struct cairn_attr *a,
		   int promise);

/*
 * Absent-xattr cache for a few well-known names the kernel and tools ask
 * for constantly (security.capability on every write, security.selinux on
 * every ls -l), as a bit mask chosen by the caller (at most 8 bits).
 * itab_xattr_absent() returns the bits of `mask` known absent while the
 * promise stands; itab_set_xattr_absent() records `mask` as absent (v = 1,
 * only while the promise stands) or forgets it (v = 0).
 */
unsigned itab_xattr_absent(struct itab *t, uint64_t ino, unsigned mask);
void itab_set_xattr_absent(struct itab *t, uint64_t ino, unsigned mask, int v);

/*
 * Visitor for invalidations: ino is the named inode (0 for a negative
 * entry), isdir whether it is a directory; name NULL (parent 0) means the
 * inode itself. It runs with the table's lock held: it must only copy and
 * queue.
 */
typedef void (*itab_visit_fn)(void *arg, uint64_t ino, uint64_t parent,
			      const char *name, size_t len, int isdir);

/*
 * A callback break on the object of vnode vn (for an entry break, on its
 * directory), applied to every incarnation: the promise and the page cache
 * are gone, and since the server covers a directory's entries with the
 * directory's promise, every entry recorded in it is uncovered: each is
 * passed to fn (may be NULL) and forgotten, but a directory's is kept,
 * marked expired (see names above). An incarnation whose node id
 * is not vn is passed to fn itself (parent 0, name NULL); node id vn is
 * the caller's to invalidate. With itab_set_evict_files on, a regular
 * file's own names go the same way, and its kernel inodes are out of date:
 * the next entry handed out for it is a new incarnation. If attrs_only
 * (the server's CB_ATTRS_ONLY: only attributes the kernel takes from us
 * changed, and ctime) its names are passed to fn but kept (the caller may
 * leave a dentry it cannot invalidate without waiting), and its kernel
 * inodes stay as they are. Returns 0, or -ENOENT when the kernel was never
 * told about vn.
 */
int itab_break(struct itab *t, uint64_t vn, int attrs_only, itab_visit_fn fn,
	       void *arg);
/*
 * With the kernel's writeback cache, the kernel ignores the size, mtime and
 * ctime we give for a regular file it has in memory. Set on, itab_break of
 * a regular file also passes each of its recorded names to fn and forgets
 * them, so that the caller invalidates those dentries: the kernel then
 * drops the inode unless a file holds it open, and a later lookup loads
 * it with the server's attributes; if it was held, that lookup gets a new
 * incarnation (itab_add_entry). itab_break_all marks every regular file
 * out of date.
 */
void itab_set_evict_files(struct itab *t, int on);
/*
 * The kernel changed the file through inode ino (a write, a truncate):
 * its other incarnations (client/inode.h) hold a size and times that do
 * not follow, and pages that are out of date. Each is passed to fn
 * (parent 0, name NULL) and marked out of date, and its names are passed
 * to fn and forgotten, as itab_break does. Returns how many there were
 * (0, the common case: nothing else happens).
 */
int itab_stale_others(struct itab *t, uint64_t ino, itab_visit_fn fn,
		      void *arg);
/* Does the FID of ino have another incarnation in the table? */
int itab_has_others(struct itab *t, uint64_t ino);

/* The server promised ino in a reply that carried no attributes for it
 * (READDIR; for a negative LOOKUP, itab_add_negative does this): the
 * promise stands again. */
void itab_set_promised(struct itab *t, uint64_t ino);

/*
 * Every promise is gone (reconnect). Clears all callback state, calls fn
 * once per inode (parent 0, name NULL) and once per recorded entry, and
 * forgets every entry (directories' are kept, marked expired).
 */
void itab_break_all(struct itab *t, itab_visit_fn fn, void *arg);
/* The same, sparing every inode keep(karg, fid) says stands anyway (its
 * write token is held: a lapse, notify.c) and every entry in a spared
 * directory. keep runs under the table's lock: it must take none. */
void itab_break_all_except(struct itab *t,
			   int (*keep)(void *karg, const struct cairn_fid *fid),
			   void *karg, itab_visit_fn fn, void *arg);

/*
 * Files unlinked while maybe open. The kernel no longer tells us about
 * opens (no_open: docs/ARCHITECTURE.md), so every unlink or rename-over of
 * a file the kernel knows asks the server to keep it as an orphan
 * (RM_KEEP/RN_KEEP) and marks the inode here. When the kernel forgets a
 * marked inode (for an unlinked file: after its last close),
 * itab_forget hands its FID back so that the caller tells the server
 * (ORPHAN_DROP). itab_set_orphan: 0, or -ENOENT when ino is not known.
 */
int itab_set_orphan(struct itab *t, uint64_t ino);
/* The same for another client's unlink that made us a holder (CB_BREAK
 * flag CB_ORPHANED): marks the inode only when its FID is exactly fid; 0,
 * or -ENOENT (the kernel does not have it: release it at once). */
int itab_set_orphan_fid(struct itab *t, const struct cairn_fid *fid);
/* Unmount: pass the FID of every marked inode to fn and clear the marks
 * (fn runs under the table's lock: it must only copy). */
void itab_take_orphans(struct itab *t,
		       void (*fn)(void *arg, const struct cairn_fid *fid),
		       void *arg);

/*
 * A file whose last name we removed while the kernel knew it: `a` is what
 * it is now as far as we know (its attributes before, nlink 0), kept for
 * the kernel's write-back of its ctime, which then needs no server call
 * (client/fs.c, SETATTR). A name handed out for it again clears this.
 * itab_set_gone: 0, -ENOENT (unknown ino, or another FID), -ENOMEM;
 * itab_gone: 0 and *a, or -ENOENT.
 */
int itab_set_gone(struct itab *t, uint64_t ino, const struct cairn_attr *a);
int itab_gone(struct itab *t, uint64_t ino, struct cairn_attr *a);

/*
 * Opens for writing of node id ino the kernel has told us of (OPEN and
 * CREATE, until their RELEASE): add delta (+1, -1, or 0 to read) and
 * return the count (0 for an unknown ino). The kernel's O_TRUNC reaches
 * us as a SETATTR without a file handle, like truncate(2); a file open
 * for writing tells the two apart (client/fs.c).
 */
unsigned itab_wopen(struct itab *t, uint64_t ino, int delta);
/* A change of ino's data here without an open for writing (truncate(2)):
 * counted in itab_info's wgen, as such opens are. */
void itab_wgen_bump(struct itab *t, uint64_t ino);

/* State of one inode: 0, or -ENOENT. */
int itab_info(struct itab *t, uint64_t ino, struct itab_info *out);
/* Number of inodes in the table (the root included). */
size_t itab_count(struct itab *t);
/*
 * Counts for `cairn status MOUNTPOINT` (client/ctl.h): inodes (the root
 * included), recorded entries and the negative ones among them, inodes
 * whose promise stands, and inodes marked by itab_set_orphan. Walks the
 * whole table under its lock (those two are per-inode bits), so it is
 * for an occasional status request, not for a hot path.
 */
struct itab_counts {
	size_t inodes;
	size_t entries;
	size_t negative;
	size_t promises;
	size_t orphans;
};
void itab_get_counts(struct itab *t, struct itab_counts *out);
/* The inode entry (parent, name) is recorded for: its ino, 0 when it is
 * recorded as a negative entry, -ENOENT when not recorded. */
int64_t itab_entry(struct itab *t, uint64_t parent, const char *name,
		   size_t len);

#endif

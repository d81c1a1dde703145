/*
 * lkset.h - the byte-range locks of one file: POSIX record locks (fcntl,
 * OFD) and whole-file flock locks, with POSIX's splitting, merging,
 * upgrade and downgrade. The server keeps one set per locked file (the
 * truth, server/lock.c); the client keeps a copy of its own locks per file
 * so that it can reclaim them after a server restart and knows when a
 * close has nothing to release (client/fs_lock.c).
 *
 * An entry belongs to an owner: (client, owner id). `client` is an opaque
 * pointer (the server's client record; the client uses NULL for itself),
 * the owner id the kernel's lock owner (a POSIX owner: the process's file
 * table; an OFD or flock owner: the open file). flock and POSIX locks live
 * side by side and never conflict with each other, as on Linux.
 *
 * Ranges are inclusive [start, end]; end LK_EOF means "to the end of the
 * file, however it grows". Invariant kept by lkset_apply: one owner's
 * entries of one kind never overlap, and two of the same type never touch
 * (they are merged), so a range an owner holds contiguously with one type
 * is inside one entry.
 *
 * Not thread-safe: the caller's lock guards a set.
 */
#ifndef CAIRN_LIB_LKSET_H
#define CAIRN_LIB_LKSET_H

#include <stddef.h>
#include <stdint.h>

#define LK_EOF INT64_MAX /* the kernel's OFFSET_MAX */

struct lkent {
	struct lkent *next;
	const void *client;
	uint64_t owner;
	uint64_t start, end;   /* inclusive, end <= LK_EOF */
	uint32_t pid;          /* of the process that took it (F_GETLK) */
	uint8_t type;          /* LK_RD, LK_WR (lib/proto.h); LK_UN in a
				* request only */
	uint8_t flock;         /* 1: an flock lock (whole file) */
	uint64_t fh;           /* client only: the open file it was taken
				* through (an OFD lock goes with it) */
};

struct lkset {
	struct lkent *head;
	size_t n;
};

/* The entry another owner holds that req (LK_RD or LK_WR) conflicts with,
 * the one that starts first (F_GETLK's answer whatever order the set was
 * built in), or NULL. */
const struct lkent *lkset_conflict(const struct lkset *s,
				   const struct lkent *req);

/*
 * Apply req for its owner: LK_UN releases [start, end] of the owner's
 * locks of req's kind (splitting an entry that reaches beyond it); LK_RD
 * and LK_WR replace what the owner holds in the range with the new type
 * (upgrade, downgrade) and merge with its touching entries of that type.
 * Check lkset_conflict first: apply does not. *freed (may be NULL) is set
 * to 1 when some range was released or downgraded, so that waiters may
 * now get it. 0, or -ENOMEM with the set unchanged.
 */
int lkset_apply(struct lkset *s, const struct lkent *req, int *freed);

/* 1 if req's owner holds req's whole range with req's type (one entry). */
int lkset_covers(const struct lkset *s, const struct lkent *req);

/* 1 if req's owner holds every byte of req's range already, in one entry
 * or several, with req's type or a stronger one (a write lock holds a
 * read lock's range): applying req then takes nothing from anyone (a
 * downgrade, or a lock asked again). */
int lkset_holds(const struct lkset *s, const struct lkent *req);

/* Remove every entry of client (any owner, both kinds); the number
 * removed. */
size_t lkset_drop_client(struct lkset *s, const void *client);

/* Remove everything. */
void lkset_clear(struct lkset *s);

#endif

/*
 * ccache.h - the client's persistent chunk cache: file data kept on local
 * disk under --cache-dir, across remounts and restarts.
 *
 * A chunk is CCACHE_CHUNK (1 MiB, one READ) bytes of one *version* of a
 * file: it is named by (FID, data version, index) and never changes once
 * written, so a cached chunk can only be stale by being of a version that
 * is no longer current, and the caller decides that by asking for the
 * version it trusts (the promise rules, client/fs_file.c). A chunk is
 * shorter than CCACHE_CHUNK only where its version of the file ends.
 *
 * On disk, in DIR/chunks/ (DIR is the mount's cache directory):
 *   XX/NAME      one file per chunk: a header (key, length, one crc32 per
 *                32 KiB block, the header's own crc32) and the data
 *                (ccache_rec.h); written under tmp/ and renamed into place
 *   index/       LMDB: chunk key -> length and last use; last use -> key
 *   lock         flock()ed by the process using the cache
 *   dirty        present while a process has the cache open; holds the
 *                boot id of the kernel it ran under
 * Every read from the cache checks the header and the crc32 of every block
 * it returns; a chunk that fails (truncated, a flipped bit, a missing
 * file, a record the decoders refuse) is logged, deleted and reported as
 * not cached, so the caller fetches the data again. Nothing damaged is
 * ever returned.
 *
 * Crash safety without a single fsync on the read path: the index is
 * written with MDB_NOSYNC, which LMDB keeps consistent across a crash of
 * the *process* (its writes are in the kernel's page cache), not of the
 * machine. So at open the dirty marker tells what happened: absent, the
 * last user closed cleanly; present with this boot's id, the process died
 * (chunk files without an index record and leftovers in tmp/ are removed);
 * present with another boot's id, or unreadable, the machine went down
 * with the index possibly torn: the index is deleted and rebuilt from the
 * chunk files' headers. A missing, truncated or unopenable index is
 * rebuilt the same way. Chunk data is never trusted without its crc32s.
 *
 * Eviction: least recently used first, so that the chunk files' header and
 * data bytes stay under the limit given at open. Storing a chunk of version
 * dv also drops the file's chunks of older versions.
 *
 * Thread-safe: lookups run in parallel (LMDB read transactions); changes
 * to the index (store, touch, evict, discard) take the cache's mutex, a
 * leaf lock that is never held while calling out of this module.
 */
#ifndef CAIRN_CLIENT_CCACHE_H
#define CAIRN_CLIENT_CCACHE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/stat.h>
#include "ccache_rec.h"

struct ccache;

/* Default limit: this percentage of the free space of the cache
 * directory's file system at mount, at most CCACHE_DEFAULT_MAX. */
#define CCACHE_DEFAULT_PERCENT 10u
#define CCACHE_DEFAULT_MAX     (10ull << 30)

/*
 * Open (creating what is missing) the cache in DIR/chunks, holding at most
 * `limit` bytes (header and data of every chunk; chunks beyond it are
 * evicted at once). Recovers after a crash as described above, logging
 * what it found. Returns 0 and *out, -EBUSY when another process uses the
 * cache, or another negative errno (the caller runs without a cache).
 */
int ccache_open(const char *dir, uint64_t limit, struct ccache **out);
/* Sync the index, remove the dirty marker and free. NULL is ignored.
 * No other call may be running. */
void ccache_close(struct ccache *c);

/* Bytes of a chunk returned by ccache_get; free with ccache_buf_free. */
struct ccache_buf {
	void *mem;        /* owned */
	const uint8_t *p; /* the bytes asked for, inside mem */
	size_t len;
};
void ccache_buf_free(struct ccache_buf *b);

/*
 * Bytes [off, off + len) of chunk k, fewer if the chunk ends before
 * (b->len may be 0 when off is at or past its end). Every 32 KiB block
 * they come from is checked. Returns 0, -ENOENT when the chunk is not
 * cached (also when it was found damaged and discarded), -ENOMEM. A hit
 * makes the chunk the most recently used.
 */
int ccache_get(struct ccache *c, const struct ccache_key *k, uint32_t off,
	       uint32_t len, struct ccache_buf *b);

/*
 * Store the whole chunk k: its len bytes (1..CCACHE_CHUNK; fewer than
 * CCACHE_CHUNK only where its version ends). Replaces a copy of the same
 * key, drops the file's chunks of versions older than k->dv, and evicts
 * until the limit holds. Returns 0, -EFBIG when the chunk alone exceeds
 * the limit, or an I/O error (counted; nothing half-stored stays).
 * data is only read during the call.
 */
int ccache_put(struct ccache *c, const struct ccache_key *k,
	       const void *data, uint32_t len);

/* Drop every chunk of fid, whatever its version: its data may have
 * changed in a way the caller could not follow (a change whose outcome
 * it does not know). */
void ccache_forget_fid(struct ccache *c, const struct cairn_fid *fid);

/* Bytes the caller fetched from the server for reads (ccache only counts
 * them, for ccache_print_stats). */
void ccache_count_fetch(struct ccache *c, uint64_t bytes);

struct ccache_stats {
	uint64_t limit;           /* bytes */
	uint64_t used;            /* bytes on disk: headers and data */
	uint64_t chunks;
	uint64_t hits, misses;    /* ccache_get calls */
	uint64_t hit_bytes;       /* bytes returned by hits */
	uint64_t fetched_bytes;   /* ccache_count_fetch */
	uint64_t stored, stored_bytes;
	uint64_t evicted;         /* chunks evicted for space or superseded */
	uint64_t discarded;       /* chunks found damaged and deleted */
	uint64_t errors;          /* stores that failed */
};
void ccache_get_stats(struct ccache *c, struct ccache_stats *s);

/*
 * `key value` lines, every key starting with "cache.": enabled (0 for a
 * NULL c, and nothing else then), dir, chunk_size, limit_bytes, used_bytes,
 * chunks, hits, misses, hit_bytes, fetched_bytes, stored_chunks,
 * stored_bytes, evictions, discarded, errors.
 */
void ccache_print_stats(struct ccache *c, FILE *f);

/*
 * A size as --cache-size takes it: a decimal number of bytes, optionally
 * followed by K, M, G or T (powers of 1024, either case). Returns 0 or
 * -EINVAL (also on overflow).
 */
int ccache_parse_size(const char *s, uint64_t *out);
/* The default limit for a cache in dir (see CCACHE_DEFAULT_*); 0 when the
 * file system cannot be asked. */
uint64_t ccache_default_limit(const char *dir);

/*
 * The cache's seam to the operating system (STYLE.md 8), for tests that
 * inject ENOSPC, EIO or short transfers: every call on a chunk file goes
 * through it. libc conventions (-1 and errno). Process-global; tests set
 * entries before using a cache and call ccache_os_reset() after.
 */
struct ccache_os {
	int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	int (*fstat)(int fd, struct stat *st);
	int (*renameat)(int olddirfd, const char *oldpath, int newdirfd,
			const char *newpath);
};
extern struct ccache_os ccache_os;
void ccache_os_reset(void);

#endif

/*
 * ccache.h - the client's persistent chunk cache: file data kept on local
 * disk under --cache-dir, across remounts and restarts.
 *
 * A chunk is CCACHE_CHUNK (1 MiB, one READ) bytes of one *version* of a
 * file: a chunk file is named by (FID, data version, index) and holds the
 * chunk's bytes as they are at that version. It never changes once
 * written, so a cached chunk can only be stale by being of a version that
 * is no longer current, and the caller decides that by asking for the
 * version it trusts (the promise rules, client/fs_file.c). A chunk is
 * shorter than CCACHE_CHUNK only where its version of the file ends.
 *
 * Our own writes. Every write of ours makes a new version (Cairn is
 * write-through: one WRITE each, whose reply carries the new version), so
 * keeping what we wrote must not mean rewriting every chunk of the file
 * per write. Each file with chunks has a *lineage* {base, cur}: every
 * chunk of the file whose version is in [base, cur] holds that chunk's
 * bytes at version cur too. A write from cur to cur + 1 (ccache_write)
 * stores the chunks it changes at cur + 1, drops those it changes but
 * cannot rebuild, and moves cur: the chunks it did not touch stay where
 * they are, valid at the new version. The rules that keep this true:
 *   - at most one chunk per (fid, idx), whatever its version, so that
 *     replacing or dropping a chunk never leaves an older one behind that
 *     the lineage would take for current (eviction included);
 *   - a lookup of (fid, idx) at version dv hits the chunk of (fid, idx)
 *     when its version is dv, or when the lineage ends at dv (cur == dv)
 *     and the chunk's version is in [base, cur];
 *   - a fetched chunk of version dv (ccache_put) joins the lineage when
 *     cur == dv, replaces it with {dv, dv} (the file's other chunks
 *     dropped) when dv is newer or there is none, and is refused as
 *     outdated when dv < cur;
 *   - a write from old_dv to new_dv = old_dv + 1 (ccache_write) extends
 *     the lineage when cur == old_dv, does nothing when cur >= new_dv
 *     (the cache is there or beyond already), and otherwise starts a new
 *     lineage at old_dv, keeping only the chunks of version old_dv.
 * Every ordering of these calls is safe, and that is why: each statement
 * the cache makes ("this file holds chunk idx at version v", "chunk idx
 * is the same at versions v and cur") is about versions, whose bytes
 * never change, so once true it stays true; every transaction decides
 * what to drop from the index as it stands under the cache's lock, and
 * only adds statements it knows to be true (a fetched chunk; a chunk
 * rebuilt from bytes that were true at old_dv and the write that made
 * new_dv, which the caller vouches for). Two writes of ours may arrive out
 * of order, or race a fetch: then the cache loses hits (a lineage restarts
 * and drops chunks, a put is refused), never returns wrong bytes.
 * tests/unit/test_ccache.c plays the orderings.
 *
 * On disk, in DIR/chunks/ (DIR is the mount's cache directory):
 *   XX/NAME      one file per chunk: a header (key, length, one crc32 per
 *                32 KiB block, the header's own crc32) and the data
 *                (ccache_rec.h); written under tmp/ and renamed into place
 *   index/       LMDB: chunk key (fid, idx, dv) -> length and last use;
 *                last use -> key; fid -> lineage; the format version
 *   lock         flock()ed by the process using the cache
 *   dirty        present while a process has the cache open; holds the
 *                boot id of the kernel it ran under
 * Every read from the cache checks the header and the crc32 of every block
 * it returns; a chunk that fails (truncated, a flipped bit, a missing
 * file, a record the decoders refuse) is logged, deleted and reported as
 * not cached, so the caller fetches the data again. Nothing damaged is
 * ever returned.
 *
 * Crash safety without a single fsync on the read or write path: the
 * index is written with MDB_NOSYNC, which LMDB keeps consistent across a
 * crash of the *process* (its writes are in the kernel's page cache), not
 * of the machine. So at open the dirty marker tells what happened: absent,
 * the last user closed cleanly; present with this boot's id, the process
 * died (chunk files without an index record and leftovers in tmp/ are
 * removed); present with another boot's id, or unreadable, the machine
 * went down with the index possibly torn: the index is deleted and
 * rebuilt from the chunk files' headers. A missing, truncated or
 * unopenable index, or one of another format, is rebuilt the same way.
 * A rebuild knows no lineage (it is not in the files), keeps one chunk
 * per (fid, idx) (the newest version), and so serves exact versions only
 * until a fetch or a write starts a lineage again: a lost lineage only
 * loses hits. Chunk data is never trusted without its crc32s.
 *
 * Eviction: least recently used first, so that the chunk files' header and
 * data bytes stay under the limit given at open. A lineage goes with its
 * file's last chunk. A hit takes its place in that order when it happens
 * but reaches the index in a batch of 64 such hits (one write transaction
 * for them all: a cold read of a whole tree hits thousands of old
 * chunks), before any eviction, or at close; a crash loses only the order
 * of those still waiting.
 *
 * Thread-safe: lookups run in parallel (LMDB read transactions); changes
 * to the index (store, write, touch, evict, discard) take the cache's
 * mutex, a leaf lock that is never held while calling out of this module
 * (chunk files are built before it is taken).
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
/* A chunk of at most this many bytes is kept in the index itself (its
 * header and data, the bytes a chunk file would hold, in LMDB database
 * "small") rather than in a file of its own: creating and removing a
 * file per small chunk cost more than the rest of a small file's trip
 * through the client (ccache.c, "Small chunks"). 128 KiB: 98% of the
 * files of /usr/include; a file made per chunk cost the client 0.9 ms of
 * CPU each on this project's machines (ext4's inode allocator), 30% of
 * its CPU in a copy of that tree when the limit was 16 KiB. */
#define CCACHE_SMALL_MAX  (128u * 1024u)
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
/* 1 if the index has chunk k (its bytes are checked only when read);
 * counts neither a hit nor a miss. */
int ccache_has(struct ccache *c, const struct ccache_key *k);

/*
 * Store the whole chunk k, fetched from the server at version k->dv: its
 * len bytes (1..CCACHE_CHUNK; fewer than CCACHE_CHUNK only where that
 * version ends). It replaces any other chunk of (fid, idx); when k->dv is
 * above the file's lineage (or the file has none), the file's chunks of
 * other versions go and the lineage becomes {k->dv, k->dv}. Evicts until
 * the limit holds. Returns 0; -ESTALE when k is outdated (the lineage, or
 * a chunk of the file, is of a newer version; nothing changes); -EFBIG
 * when the chunk alone exceeds the limit; or an I/O error (counted;
 * nothing half-stored stays). data is only read during the call.
 */
int ccache_put(struct ccache *c, const struct ccache_key *k,
	       const void *data, uint32_t len);

/*
 * Our own WRITE of len bytes at off, data, took fid from version old_dv
 * and size old_size to new_dv and new_size; the caller vouches that
 * new_dv == old_dv + 1 as the server returned it, so nothing else changed
 * the file in between (refused with -EINVAL otherwise), and that
 * off + len <= new_size. Keeps the cache's chunks of fid valid at new_dv
 * where it can, in one index transaction:
 *   - when the lineage's cur is new_dv or beyond, nothing changes (a newer
 *     fetch or write got there first) and 0 is returned;
 *   - when it is not old_dv (or there is none), a new one starts at
 *     old_dv: the file's chunks of other versions go;
 *   - each chunk the write covers whole at new_dv (all of
 *     [idx * CCACHE_CHUNK, min((idx + 1) * CCACHE_CHUNK, new_size))) is
 *     stored at new_dv from data: one chunk file, no read;
 *   - a chunk it covers in part is rebuilt (its bytes at old_dv, zeros
 *     from the old end of file to the write, the written bytes) when its
 *     bytes at old_dv are cached, or it lay wholly past the old end, and
 *     the bytes carried over are few enough (at most 128 KiB or 16 times
 *     the bytes of the write: small writes into a large cached chunk
 *     drop it instead of copying it each time); else it is dropped;
 *   - a write starting past the old end of file, at most 4 chunks past
 *     the chunk that held it, also rebuilds that chunk (its bytes, then
 *     zeros) and stores the chunks between as zeros: the kernel's
 *     write-back sometimes sends the pages there after those beyond;
 *   - when the size changes, the chunk that held the old end of file and
 *     any past the new one go, unless stored above;
 *   - the lineage's cur becomes new_dv.
 * A write that changes only chunks that are not cached, of a file with
 * nothing cached, costs one read transaction and no write at all.
 * Safe in any order with other ccache_write and ccache_put calls for the
 * same file (see above). Returns 0, or a negative errno (counted as an
 * error, after every chunk of fid was dropped so that nothing wrong can be
 * served): -EINVAL, -ENOMEM, -EIO, -ENOSPC... A NULL c is ignored (0).
 * data is only read during the call.
 */
int ccache_write(struct ccache *c, const struct cairn_fid *fid,
		 uint64_t old_dv, uint64_t new_dv, uint64_t old_size,
		 uint64_t new_size, uint64_t off, const void *data,
		 uint32_t len);

/* Drop every chunk of fid, whatever its version, and its lineage: its
 * data may have changed in a way the caller could not follow (a change
 * whose outcome it does not know). */
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
	uint64_t stored, stored_bytes;   /* ccache_put */
	uint64_t written, written_bytes; /* chunks ccache_write stored */
	uint64_t evicted;         /* chunks evicted for space or superseded */
	uint64_t discarded;       /* chunks found damaged and deleted */
	uint64_t errors;          /* stores and ccache_write calls that failed */
};
void ccache_get_stats(struct ccache *c, struct ccache_stats *s);

/*
 * `key value` lines, every key starting with "cache.": enabled (0 for a
 * NULL c, and nothing else then), dir, chunk_size, limit_bytes, used_bytes,
 * chunks, hits, misses, hit_bytes, fetched_bytes, stored_chunks,
 * stored_bytes, written_chunks, written_bytes, evictions, discarded,
 * errors.
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

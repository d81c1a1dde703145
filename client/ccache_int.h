/*
 * ccache_int.h - what ccache.c and ccache_open.c, the two halves of the
 * chunk cache (ccache.h), share: the cache object and the index
 * primitives. Nothing outside those two files includes it. The rules
 * (states, invariants, locking) are at the head of ccache.c.
 */
#ifndef CAIRN_CLIENT_CCACHE_INT_H
#define CAIRN_CLIENT_CCACHE_INT_H

#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include "ccache.h"

#define CCACHE_NDIRS      256u   /* chunk files go in XX/, 00 to ff */
#define CCACHE_TOUCH_BATCH 64u

struct ccache {
	char dir[PATH_MAX];     /* DIR/chunks, for log lines */
	int dfd;                /* DIR/chunks */
	int lockfd;             /* DIR/chunks/lock, flock()ed */
	MDB_env *env;
	MDB_dbi db_chunks, db_lru, db_meta, db_lin, db_small;
	uint64_t limit;

	pthread_mutex_t lock;
	uint64_t used;          /* lock */
	uint64_t nchunks;       /* lock */
	uint64_t tick;          /* lock: the last tick handed out */
	int broken;             /* set under lock, read as a hint without */
	/* Hits waiting to become the most recently used (lock): written
	 * CCACHE_TOUCH_BATCH at a time, before any eviction, and at close.
	 * A cold read of a tree hits thousands of old chunks, and a write
	 * transaction each cost about ten page writes. */
	struct ccache_touch {
		struct ccache_key k;
		uint64_t tick;          /* its record's tick when hit */
		uint64_t to;            /* the tick it moves to, taken then */
	} touch[CCACHE_TOUCH_BATCH];
	unsigned ntouch;

	uint64_t tmp_seq;       /* atomic */
	/* Counters: relaxed atomics. */
	uint64_t hits, misses, hit_bytes, fetched, stored, stored_bytes,
		 written, written_bytes, evicted, discarded, errors;
};

#define ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_RELAXED)
#define GET(x)    __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct keyvec {
	struct ccache_key *v;
	size_t n, cap;
};

/* A write transaction and the totals it may change, restored if it does
 * not commit. Caller holds c->lock throughout. */
struct wtx {
	MDB_txn *txn;
	uint64_t used, nchunks, tick;
	struct keyvec unlink;   /* files to remove once committed */
	uint64_t evicted;       /* counted once committed */
};

/* Bytes on disk of a chunk of len data bytes. */
static inline uint64_t chunk_bytes(uint32_t len)
{
	return ccache_rec_hdr_bytes(len) + len;
}

/* All n bytes at off through the OS seam, or -errno (-EIO when short). */
int cc_read_full(int fd, void *buf, size_t n, off_t off);
/* The directory (0..CCACHE_NDIRS-1) of chunk k's file. */
unsigned cc_key_dir(const struct ccache_key *k);
/* CRC-32 as gzip's. */
uint32_t cc_crc(const void *p, size_t n);

/* An LMDB return code as 0 or a negative errno; damage makes the cache
 * broken (sticky: everything misses until the next open rebuilds). */
int cc_lmdb_err(struct ccache *c, int rc, const char *what);
/* Begin w (c->lock held), and end it: commit when rc is 0, else abort
 * and restore the totals; on commit, unlink the files of the chunks it
 * dropped. Returns the outcome. */
int cc_wtx_begin(struct ccache *c, struct wtx *w);
int cc_wtx_end(struct ccache *c, struct wtx *w, int rc);
/* Remove chunk k's file (c->lock held). */
void cc_unlink_key(struct ccache *c, const struct ccache_key *k);

/* The record of chunk k: 0, -ENOENT, -EUCLEAN (refused), or an error. */
int cc_rec_get(struct ccache *c, MDB_txn *txn, const struct ccache_key *k,
	       struct ccache_val *v);
/* Delete chunk k's records (its value v), or add k of len bytes as the
 * most recently used; both keep the totals. */
int cc_rec_del(struct ccache *c, struct wtx *w, const struct ccache_key *k,
	       const struct ccache_val *v);
int cc_rec_put(struct ccache *c, struct wtx *w, const struct ccache_key *k,
	       uint32_t len);
/*
 * Move cur (on the chunks db) to the next chunk record of at->fid (op
 * MDB_NEXT), or to the first at or after key *at (MDB_SET_RANGE): 0 and
 * its key in *k (*kv, *vv the raw record), -ENOENT when the file has no
 * more, or an error.
 */
int cc_seek_chunk(struct ccache *c, MDB_cursor *cur,
		  const struct ccache_key *at, int op, struct ccache_key *k,
		  MDB_val *kv, MDB_val *vv);
/* 1 when fid has no chunk record in txn (or on an error), else 0. */
int cc_fid_empty(struct ccache *c, MDB_txn *txn, const struct cairn_fid *fid);
/* Evict least recently used chunks until need more bytes fit. */
int cc_evict(struct ccache *c, struct wtx *w, uint64_t need);
/* Write the waiting hits into w (c->lock held); 0 or an LMDB error. */
int cc_touch_apply(struct ccache *c, struct wtx *w);

#endif

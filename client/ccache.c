/*
 * ccache.c - the persistent chunk cache (see ccache.h for the contract,
 * ccache_rec.h for the bytes on disk): its index, lookups, stores and our
 * own writes. Opening, recovery and closing are in ccache_open.c.
 *
 * States of a chunk, and what makes it move:
 *
 *   tmp file --rename + index record (one step under c->lock)--> cached
 *   cached --evicted, superseded, forgotten, found damaged--> gone
 *
 * A chunk file is complete before it gets its final name, and the final
 * name is in place before the index record that points to it is
 * committed, so a record never points to a file that is being written. A
 * crash can leave: files in tmp/ (removed at the next open), a file with
 * its final name and no record (an orphan: removed by the scan that
 * follows an unclean shutdown, or adopted by a rebuild), or, after a
 * machine crash, anything at all in the index (rebuilt from the files).
 * A record whose file is gone or damaged is found by the next lookup of
 * that chunk, which discards it.
 *
 * What the index says is true forever once it is true, which is what
 * makes every ordering safe (ccache.h, "Our own writes"). It says two
 * kinds of things: "file (fid, dv, idx) holds chunk idx of fid as it is
 * at version dv" (a chunk file is never rewritten, and a version's bytes
 * never change), and, through a lineage {base, cur}, "for every chunk of
 * fid recorded with a version in [base, cur], chunk idx is the same at
 * that version and at cur". Readers act on what a read transaction
 * showed them, which stays true after later transactions; a write
 * transaction must only add true statements, and decides what it drops
 * from what it sees under c->lock, never from an earlier look.
 *
 * Invariants, under c->lock: used is the sum of hdr + len over the chunks
 * db and nchunks its count; every chunks record has an lru record under
 * its tick and vice versa; tick is at least every tick in use. At most one
 * chunk per (fid, idx), whatever its version; when fid has a lineage,
 * every chunk of fid has a version in [base, cur]; a lineage exists only
 * for a fid with chunks (dropped with its last one). The index is changed
 * only under c->lock and only by one write transaction at a time (LMDB's
 * writer lock is therefore never contended: it nests inside c->lock, a
 * leaf). Chunk files are renamed into place and unlinked only under
 * c->lock, so a file name and its record change together as far as other
 * threads of this process can see.
 *
 * Small chunks: one of at most CCACHE_SMALL_MAX bytes is not a file but
 * a record of db small under its key, holding exactly the bytes its file
 * would (header with checksums, then data), written in the same
 * transaction as its index record (store) and deleted in the one that
 * drops the chunk (chunk_gone, where a file's unlink is queued). It skips
 * the tmp file and the rename; reads check it as they check a file.
 * A cache written before small chunks existed has them as files: a small
 * chunk without a record in db small is looked for there.
 *
 * Sync policy: none on the way (MDB_NOSYNC, no fsync of chunk files): the
 * crc32s decide whether a chunk's bytes can be trusted, and the dirty
 * marker (fsynced once at open) decides whether the index can be. The cost
 * of a machine crash is a rebuild from the chunk headers, not wrong data.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ccache_int.h"
#include "../lib/debug.h"
#include "../lib/log.h"

/* ---- OS seam ------------------------------------------------------------ */

static int os_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return openat(dirfd, path, flags | O_CLOEXEC, mode);
}

#define CCACHE_OS_REAL {		\
	.openat = os_openat,		\
	.pread = pread,			\
	.pwrite = pwrite,		\
	.fstat = fstat,			\
	.renameat = renameat,		\
}

static const struct ccache_os ccache_os_real = CCACHE_OS_REAL;
struct ccache_os ccache_os = CCACHE_OS_REAL;

void ccache_os_reset(void)
{
	ccache_os = ccache_os_real;
}

/* All n bytes at off, or -errno (-EIO for a short file). */
int cc_read_full(int fd, void *buf, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t r = ccache_os.pread(fd, buf, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		buf = (uint8_t *)buf + r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t r = ccache_os.pwrite(fd, buf, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		buf = (const uint8_t *)buf + r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

/* ---- names ------------------------------------------------------------- */

unsigned cc_key_dir(const struct ccache_key *k)
{
	uint64_t h = k->fid.vnode * 0x9e3779b97f4a7c15ull ^ k->dv ^
		     (uint64_t)k->idx * 0xff51afd7ed558ccdull ^ k->fid.uniq;

	return (unsigned)(h >> 56);
}

/* "XX/NAME", relative to c->dfd. */
static void key_path(const struct ccache_key *k, char out[64])
{
	char name[CCACHE_REC_NAME_LEN + 1];

	ccache_rec_name_encode(k, name);
	snprintf(out, 64, "%02x/%s", cc_key_dir(k), name);
}

/*
 * CRC-32 (IEEE 802.3, reflected: the one of gzip and zlib's crc32) from
 * ISA-L, which picks a carry-less-multiply version at run time: about
 * 9 GB/s here against zlib's 3, and every hit checks what it returns.
 */
uint32_t cc_crc(const void *p, size_t n)
{
	return crc32_gzip_refl(0, p, n);
}

/* ---- index ------------------------------------------------------------- */

/* An LMDB failure as an errno; damage puts the cache in its sticky broken
 * state (every lookup misses, nothing is stored, the next open rebuilds). */
int cc_lmdb_err(struct ccache *c, int rc, const char *what)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_MAP_FULL:
		return -ENOSPC;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_PANIC:
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
		if (!__atomic_exchange_n(&c->broken, 1, __ATOMIC_RELAXED))
			log_error("cache %s: index damaged (%s: %s); cache "
				  "off until the next mount rebuilds it",
				  c->dir, what, mdb_strerror(rc));
		return -EIO;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}

static int keyvec_add(struct keyvec *kv, const struct ccache_key *k)
{
	if (kv->n == kv->cap) {
		size_t cap = kv->cap ? kv->cap * 2 : 8;
		struct ccache_key *v = realloc(kv->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		kv->v = v;
		kv->cap = cap;
	}
	kv->v[kv->n++] = *k;
	return 0;
}

int cc_wtx_begin(struct ccache *c, struct wtx *w)
{
	LOCK_ASSERT_HELD(&c->lock);
	memset(w, 0, sizeof(*w));
	w->used = c->used;
	w->nchunks = c->nchunks;
	w->tick = c->tick;
	return cc_lmdb_err(c, mdb_txn_begin(c->env, NULL, 0, &w->txn),
			"begin");
}

void cc_unlink_key(struct ccache *c, const struct ccache_key *k)
{
	char path[64];

	key_path(k, path);
	if (unlinkat(c->dfd, path, 0) < 0 && errno != ENOENT)
		log_warn("cache %s: cannot remove %s: %s", c->dir, path,
			 strerror(errno));
}

/* Chunk k's bytes go once w commits: its small record now, its file
 * after the commit. */
static int chunk_gone(struct ccache *c, struct wtx *w, const struct ccache_key *k)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	MDB_val key = { sizeof(kb), kb };
	int rc;

	ccache_rec_key_encode(k, kb);
	rc = mdb_del(w->txn, c->db_small, &key, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return cc_lmdb_err(c, rc, "delete");
	return keyvec_add(&w->unlink, k);
}

/* A chunk dropped in w whose file just got a new copy under the same name
 * (a chunk stored again): its file must stay, and it was not evicted. */
static void unlink_cancel(struct wtx *w, const struct ccache_key *k)
{
	for (size_t i = 0; i < w->unlink.n; i++)
		if (ccache_rec_key_eq(&w->unlink.v[i], k)) {
			w->unlink.v[i] = w->unlink.v[--w->unlink.n];
			w->evicted--;
			return;
		}
}

/* Commit when rc is 0, else abort; returns the outcome. */
int cc_wtx_end(struct ccache *c, struct wtx *w, int rc)
{
	LOCK_ASSERT_HELD(&c->lock);
	if (!rc)
		rc = cc_lmdb_err(c, mdb_txn_commit(w->txn), "commit");
	else
		mdb_txn_abort(w->txn);
	if (rc) {
		c->used = w->used;
		c->nchunks = w->nchunks;
		c->tick = w->tick;
	} else {
		for (size_t i = 0; i < w->unlink.n; i++)
			cc_unlink_key(c, &w->unlink.v[i]);
		ADD(c->evicted, w->evicted);
	}
	free(w->unlink.v);
	return rc;
}

int cc_rec_get(struct ccache *c, MDB_txn *txn, const struct ccache_key *k,
	       struct ccache_val *v)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	MDB_val key = { sizeof(kb), kb }, val;
	int rc;

	ccache_rec_key_encode(k, kb);
	rc = mdb_get(txn, c->db_chunks, &key, &val);
	if (rc)
		return cc_lmdb_err(c, rc, "get");
	return ccache_rec_val_decode(val.mv_data, val.mv_size, v);
}

/* Remove the records of k (whose value is v): chunks and lru. */
int cc_rec_del(struct ccache *c, struct wtx *w, const struct ccache_key *k,
	       const struct ccache_val *v)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE], tb[CCACHE_REC_TICK_SIZE];
	MDB_val key = { sizeof(kb), kb }, tkey = { sizeof(tb), tb };
	int rc;

	ccache_rec_key_encode(k, kb);
	ccache_rec_tick_encode(v->tick, tb);
	rc = mdb_del(w->txn, c->db_chunks, &key, NULL);
	if (rc)
		return cc_lmdb_err(c, rc, "delete");
	rc = mdb_del(w->txn, c->db_lru, &tkey, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return cc_lmdb_err(c, rc, "delete");
	c->used -= chunk_bytes(v->len);
	c->nchunks--;
	return 0;
}

/* Record chunk k of len bytes with tick (unique, <= c->tick). */
static int rec_put_tick(struct ccache *c, struct wtx *w,
			const struct ccache_key *k, uint32_t len, uint64_t tick)
{
	struct ccache_val v = { .len = len, .tick = tick };
	uint8_t kb[CCACHE_REC_KEY_SIZE], vb[CCACHE_REC_VAL_SIZE],
		tb[CCACHE_REC_TICK_SIZE];
	MDB_val key = { sizeof(kb), kb }, val = { sizeof(vb), vb },
		tkey = { sizeof(tb), tb };
	int rc;

	ccache_rec_key_encode(k, kb);
	ccache_rec_val_encode(&v, vb);
	ccache_rec_tick_encode(v.tick, tb);
	if ((rc = mdb_put(w->txn, c->db_chunks, &key, &val, 0)) ||
	    (rc = mdb_put(w->txn, c->db_lru, &tkey, &key, 0)))
		return cc_lmdb_err(c, rc, "put");
	c->used += chunk_bytes(len);
	c->nchunks++;
	return 0;
}

/* Record chunk k of len bytes as the most recently used. */
int cc_rec_put(struct ccache *c, struct wtx *w, const struct ccache_key *k,
	       uint32_t len)
{
	return rec_put_tick(c, w, k, len, ++c->tick);
}

/* The lineage of fid: 0, -ENOENT when it has none, -EUCLEAN when its
 * record is damaged (then it has none: only exact versions hit). */
static int lin_get(struct ccache *c, MDB_txn *txn, const struct cairn_fid *fid,
		   struct ccache_lin *l)
{
	uint8_t fb[CCACHE_REC_FID_SIZE];
	MDB_val key = { sizeof(fb), fb }, val;
	int rc;

	ccache_rec_fid_encode(fid, fb);
	if ((rc = mdb_get(txn, c->db_lin, &key, &val)))
		return cc_lmdb_err(c, rc, "get");
	return ccache_rec_lin_decode(val.mv_data, val.mv_size, l);
}

static int lin_put(struct ccache *c, struct wtx *w, const struct cairn_fid *fid,
		   const struct ccache_lin *l)
{
	uint8_t fb[CCACHE_REC_FID_SIZE], lb[CCACHE_REC_LIN_SIZE];
	MDB_val key = { sizeof(fb), fb }, val = { sizeof(lb), lb };

	ccache_rec_fid_encode(fid, fb);
	ccache_rec_lin_encode(l, lb);
	return cc_lmdb_err(c, mdb_put(w->txn, c->db_lin, &key, &val, 0), "put");
}

static int lin_del(struct ccache *c, struct wtx *w, const struct cairn_fid *fid)
{
	uint8_t fb[CCACHE_REC_FID_SIZE];
	MDB_val key = { sizeof(fb), fb };
	int rc;

	ccache_rec_fid_encode(fid, fb);
	rc = mdb_del(w->txn, c->db_lin, &key, NULL);
	return rc == MDB_NOTFOUND ? 0 : cc_lmdb_err(c, rc, "delete");
}

/*
 * Move cur to the next chunk record of at->fid (op MDB_NEXT), or to the
 * first at or after key *at (MDB_SET_RANGE): 0 and its key in *k (*kv,
 * *vv the raw record), -ENOENT when the file has no more, or an error. A
 * key the decoders refuse ends the walk as if the file had no more chunks
 * (load() drops such records at open).
 */
int cc_seek_chunk(struct ccache *c, MDB_cursor *cur,
		  const struct ccache_key *at, int op,
		  struct ccache_key *k, MDB_val *kv, MDB_val *vv)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	int mrc;

	if (op == MDB_SET_RANGE) {
		ccache_rec_key_encode(at, kb);
		kv->mv_size = sizeof(kb);
		kv->mv_data = kb;
	}
	if ((mrc = mdb_cursor_get(cur, kv, vv, (MDB_cursor_op)op)))
		return mrc == MDB_NOTFOUND ? -ENOENT : cc_lmdb_err(c, mrc, "cursor");
	if (ccache_rec_key_decode(kv->mv_data, kv->mv_size, k) ||
	    !cairn_fid_eq(&k->fid, &at->fid))
		return -ENOENT;
	return 0;
}

/* 1 when fid has no chunk record in txn (or on an error), else 0. */
int cc_fid_empty(struct ccache *c, MDB_txn *txn, const struct cairn_fid *fid)
{
	struct ccache_key at = { .fid = *fid }, k;
	MDB_cursor *cur;
	MDB_val kv, vv;
	int rc;

	if (mdb_cursor_open(txn, c->db_chunks, &cur))
		return 1;
	rc = cc_seek_chunk(c, cur, &at, MDB_SET_RANGE, &k, &kv, &vv);
	mdb_cursor_close(cur);
	return rc != 0;
}

/* A lineage without chunks says nothing: drop it, so lineage records stay
 * as few as the files with chunks. */
static int lin_gc(struct ccache *c, struct wtx *w, const struct cairn_fid *fid)
{
	return cc_fid_empty(c, w->txn, fid) ? lin_del(c, w, fid) : 0;
}

/*
 * Evict least recently used chunks until `need` more bytes fit under the
 * limit. Stale lru records (no matching chunk) are dropped on the way.
 */
int cc_evict(struct ccache *c, struct wtx *w, uint64_t need)
{
	MDB_cursor *cur;
	MDB_val tkey, kval;
	int rc = 0, mrc;

	if (c->used + need <= c->limit)
		return 0;
	/* What was read lately is not the oldest. */
	if ((rc = cc_touch_apply(c, w)))
		return rc;
	if ((mrc = mdb_cursor_open(w->txn, c->db_lru, &cur)))
		return cc_lmdb_err(c, mrc, "cursor");
	while (!rc && c->used + need > c->limit) {
		struct ccache_key k;
		struct ccache_val v;
		uint64_t tick;
		int bad;

		if ((mrc = mdb_cursor_get(cur, &tkey, &kval, MDB_FIRST))) {
			if (mrc != MDB_NOTFOUND)
				rc = cc_lmdb_err(c, mrc, "cursor");
			break; /* nothing left to evict */
		}
		bad = ccache_rec_tick_decode(tkey.mv_data, tkey.mv_size,
					     &tick) ||
		      ccache_rec_key_decode(kval.mv_data, kval.mv_size, &k);
		if (!bad && !cc_rec_get(c, w->txn, &k, &v) && v.tick == tick) {
			if (!(rc = cc_rec_del(c, w, &k, &v)) &&
			    !(rc = chunk_gone(c, w, &k)))
				w->evicted++;
			if (!rc)
				rc = lin_gc(c, w, &k.fid);
			continue;
		}
		/* an lru record without its chunk: drop it */
		if ((mrc = mdb_cursor_del(cur, 0)))
			rc = cc_lmdb_err(c, mrc, "delete");
	}
	mdb_cursor_close(cur);
	return rc;
}

/*
 * Which chunks of a file drop() removes: those with an index in
 * [from, to], except those of version dv when keep is set; with stale,
 * a chunk of a version above dv fails the whole walk with -ESTALE.
 */
struct drop_spec {
	uint32_t from, to;
	int keep, stale;
	uint64_t dv;
};

static int drop(struct ccache *c, struct wtx *w, const struct cairn_fid *fid,
		const struct drop_spec *s)
{
	struct ccache_key at = { .fid = *fid, .dv = 0, .idx = s->from }, k;
	MDB_val key, val;
	MDB_cursor *cur;
	int rc, mrc, op = MDB_SET_RANGE;

	if ((mrc = mdb_cursor_open(w->txn, c->db_chunks, &cur)))
		return cc_lmdb_err(c, mrc, "cursor");
	while (!(rc = cc_seek_chunk(c, cur, &at, op, &k, &key, &val)) &&
	       k.idx <= s->to) {
		struct ccache_val v;

		op = MDB_NEXT;
		if (s->stale && k.dv > s->dv) {
			rc = -ESTALE; /* a newer version is cached */
			break;
		}
		if (s->keep && k.dv == s->dv)
			continue;
		if (ccache_rec_val_decode(val.mv_data, val.mv_size, &v)) {
			/* load() dropped bad records: this is new damage */
			rc = cc_lmdb_err(c, MDB_CORRUPTED, "walk");
			break;
		}
		if ((rc = cc_rec_del(c, w, &k, &v)) ||
		    (rc = chunk_gone(c, w, &k)))
			break;
		w->evicted++;
		/* Deleted under the cursor: find the next key again. */
		op = MDB_SET_RANGE;
		at = k;
	}
	mdb_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

/*
 * Chunk k turned out damaged (why): delete its record and file, unless
 * the record changed since the lookup saw `tick` (evicted or stored again
 * meanwhile: a race, not damage). Logs and counts real damage.
 */
static void discard(struct ccache *c, const struct ccache_key *k,
		    uint64_t tick, const char *why)
{
	char path[64];
	struct ccache_val v;
	struct wtx w;
	int rc, found;

	key_path(k, path);
	pthread_mutex_lock(&c->lock);
	if (cc_wtx_begin(c, &w)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	rc = cc_rec_get(c, w.txn, k, &v);
	found = rc == 0 && v.tick == tick;
	if (found) {
		rc = cc_rec_del(c, &w, k, &v);
	} else if (rc == -EUCLEAN) {
		/* the record itself is bad: drop it by key */
		uint8_t kb[CCACHE_REC_KEY_SIZE];
		MDB_val key = { sizeof(kb), kb };

		ccache_rec_key_encode(k, kb);
		rc = cc_lmdb_err(c, mdb_del(w.txn, c->db_chunks, &key, NULL),
			      "delete");
		found = 1;
	}
	if (found && !rc)
		rc = chunk_gone(c, &w, k);
	if (found && !rc)
		rc = lin_gc(c, &w, &k->fid);
	rc = cc_wtx_end(c, &w, found ? rc : -ENOENT);
	pthread_mutex_unlock(&c->lock);
	if (found && !rc) {
		ADD(c->discarded, 1);
		log_warn("cache %s: chunk %s: %s; discarded", c->dir, path,
			 why);
	}
}

/* ---- lookups ------------------------------------------------------------- */

/*
 * The chunk that holds chunk idx of fid as it is at version dv: the one
 * chunk of (fid, idx) when it is of version dv, or when fid's lineage
 * ends at dv and the chunk's version is in it. 0 with its own key in *pk
 * and its record in *v; -ENOENT; -EUCLEAN with *pk the key of a record
 * the decoders refuse.
 */
static int find(struct ccache *c, MDB_txn *txn, const struct cairn_fid *fid,
		uint32_t idx, uint64_t dv, struct ccache_key *pk,
		struct ccache_val *v)
{
	struct ccache_key at = { .fid = *fid, .dv = 0, .idx = idx };
	struct ccache_lin l;
	MDB_cursor *cur;
	MDB_val key, val;
	int rc, lin = -1, op = MDB_SET_RANGE;

	if ((rc = mdb_cursor_open(txn, c->db_chunks, &cur)))
		return cc_lmdb_err(c, rc, "cursor");
	/* One chunk per (fid, idx) is the rule; walking on costs nothing
	 * when it holds. */
	while (!(rc = cc_seek_chunk(c, cur, &at, op, pk, &key, &val)) &&
	       pk->idx == idx) {
		op = MDB_NEXT;
		if (pk->dv != dv) {
			if (lin < 0)
				lin = lin_get(c, txn, fid, &l) == 0;
			if (!lin || l.cur != dv || pk->dv < l.base ||
			    pk->dv > l.cur)
				continue;
		}
		rc = ccache_rec_val_decode(val.mv_data, val.mv_size, v);
		break;
	}
	mdb_cursor_close(cur);
	return rc == 0 && pk->idx != idx ? -ENOENT : rc;
}

/* Check the hsz header bytes of chunk k (len bytes, the index says):
 * 0 and *h, or -EUCLEAN with *why. */
static int hdr_check(const uint8_t *buf, size_t hsz, const struct ccache_key *k,
		     uint32_t len, struct ccache_hdr *h, const char **why)
{
	if (ccache_rec_hdr_decode(buf, hsz, h)) {
		*why = "malformed header";
		return -EUCLEAN;
	}
	if (h->hcrc != cc_crc(buf, hsz - 4)) {
		*why = "header checksum mismatch";
		return -EUCLEAN;
	}
	if (!ccache_rec_key_eq(&h->key, k) || h->len != len) {
		*why = "header names another chunk";
		return -EUCLEAN;
	}
	return 0;
}

/* Read and check the header of chunk k (fd open, index says len). */
static int check_hdr(int fd, const struct ccache_key *k, uint32_t len,
		     struct ccache_hdr *h, const char **why)
{
	uint8_t buf[CCACHE_REC_HDR_MAX];
	size_t hsz = ccache_rec_hdr_bytes(len);
	struct stat st;

	if (ccache_os.fstat(fd, &st) < 0) {
		*why = "cannot stat";
		return -EIO;
	}
	if ((uint64_t)st.st_size != hsz + len) {
		*why = "wrong size (truncated?)";
		return -EUCLEAN;
	}
	if (cc_read_full(fd, buf, hsz, 0)) {
		*why = "cannot read header";
		return -EIO;
	}
	return hdr_check(buf, hsz, k, len, h, why);
}

/*
 * Check the bytes of small chunk k (header and data, len data bytes as
 * the index says) as its record holds them: 0 and *h, or -EUCLEAN with
 * *why.
 */
static int check_rec(const uint8_t *buf, size_t n, const struct ccache_key *k,
		     uint32_t len, struct ccache_hdr *h, const char **why)
{
	size_t hsz = ccache_rec_hdr_bytes(len);
	int rc;

	if (n != hsz + len) {
		*why = "wrong size (truncated?)";
		return -EUCLEAN;
	}
	if ((rc = hdr_check(buf, hsz, k, len, h, why)))
		return rc;
	for (uint32_t i = 0; i < h->nblk; i++) {
		uint32_t at = i * CCACHE_BLOCK;

		if (cc_crc(buf + hsz + at, len - at < CCACHE_BLOCK
			   ? len - at : CCACHE_BLOCK) != h->crc[i]) {
			*why = "data checksum mismatch";
			return -EUCLEAN;
		}
	}
	return 0;
}

/*
 * chunk_read of a small chunk from its record in db small (every block
 * checked: it is at most CCACHE_SMALL_MAX bytes). -ENOENT when it has no
 * record there (a cache from before small chunks: its file).
 */
static int small_read(struct ccache *c, const struct ccache_key *k,
		      uint32_t vlen, uint32_t off, uint32_t len, uint32_t room,
		      struct ccache_buf *b, const char **why)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	MDB_val key = { sizeof(kb), kb }, val;
	struct ccache_hdr h;
	uint32_t end, start, stop;
	MDB_txn *txn;
	int rc;

	ccache_rec_key_encode(k, kb);
	if (mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn))
		return -ENOENT;
	rc = mdb_get(txn, c->db_small, &key, &val);
	if (rc) {
		mdb_txn_abort(txn);
		return -ENOENT;
	}
	if ((rc = check_rec(val.mv_data, val.mv_size, k, vlen, &h, why))) {
		mdb_txn_abort(txn);
		return rc;
	}
	/* As chunk_read: from the first block the bytes touch. */
	if (off >= vlen || len == 0) {
		mdb_txn_abort(txn);
		if (room && !(b->mem = calloc(1, room)))
			return -ENOMEM;
		return 0;
	}
	end = len > vlen - off ? vlen : off + len;
	start = off / CCACHE_BLOCK * CCACHE_BLOCK;
	stop = ((end - 1) / CCACHE_BLOCK + 1) * CCACHE_BLOCK;
	if (stop > vlen)
		stop = vlen;
	if (!(b->mem = malloc(stop - start > room ? stop - start : room))) {
		mdb_txn_abort(txn);
		return -ENOMEM;
	}
	memcpy(b->mem, (const uint8_t *)val.mv_data +
		       ccache_rec_hdr_bytes(vlen) + start, stop - start);
	mdb_txn_abort(txn);
	b->p = (uint8_t *)b->mem + (off - start);
	b->len = end - off;
	return 0;
}

/*
 * Bytes [off, off + len) of chunk k (len bytes long as its record says:
 * vlen), fewer if it ends before, every block they come from checked.
 * b->mem starts at the first block they touch and holds at least `room`
 * bytes. Returns 0; -EUCLEAN with *why when the chunk is damaged (the
 * caller discards it); -ENOENT when it cannot be read for a reason that
 * is not its own (out of descriptors, say); -ENOMEM.
 */
static int chunk_read(struct ccache *c, const struct ccache_key *k,
		      uint32_t vlen, uint32_t off, uint32_t len, uint32_t room,
		      struct ccache_buf *b, const char **why)
{
	struct ccache_hdr h;
	char path[64];
	uint32_t end, b0, b1, start, stop;
	uint8_t *mem = NULL;
	int fd, rc = -EUCLEAN;

	memset(b, 0, sizeof(*b));
	if (vlen <= CCACHE_SMALL_MAX &&
	    (rc = small_read(c, k, vlen, off, len, room, b, why)) != -ENOENT)
		return rc;
	rc = -EUCLEAN;
	key_path(k, path);
	fd = ccache_os.openat(c->dfd, path, O_RDONLY, 0);
	if (fd < 0 && errno != ENOENT)
		return -ENOENT;
	if (fd < 0) {
		*why = "file missing";
		return -EUCLEAN;
	}
	if (check_hdr(fd, k, vlen, &h, why))
		goto out;
	if (off >= vlen || len == 0) {
		if (room && !(b->mem = calloc(1, room)))
			rc = -ENOMEM;
		else
			rc = 0;
		goto out;
	}
	end = len > vlen - off ? vlen : off + len;
	b0 = off / CCACHE_BLOCK;
	b1 = (end - 1) / CCACHE_BLOCK + 1;
	start = b0 * CCACHE_BLOCK;
	stop = b1 * CCACHE_BLOCK > vlen ? vlen : b1 * CCACHE_BLOCK;
	if (!(mem = malloc(stop - start > room ? stop - start : room))) {
		rc = -ENOMEM;
		goto out;
	}
	if (cc_read_full(fd, mem, stop - start,
		      (off_t)(ccache_rec_hdr_bytes(vlen) + start))) {
		*why = "cannot read data";
		goto out;
	}
	for (uint32_t i = b0; i < b1; i++) {
		uint32_t at = i * CCACHE_BLOCK - start;
		uint32_t n = stop - start - at < CCACHE_BLOCK
			     ? stop - start - at : CCACHE_BLOCK;

		if (cc_crc(mem + at, n) != h.crc[i]) {
			*why = "data checksum mismatch";
			goto out;
		}
	}
	b->mem = mem;
	b->p = mem + (off - start);
	b->len = end - off;
	mem = NULL;
	rc = 0;
out:
	free(mem);
	close(fd);
	return rc;
}

int cc_touch_apply(struct ccache *c, struct wtx *w)
{
	unsigned n = c->ntouch;
	int rc = 0;

	LOCK_ASSERT_HELD(&c->lock);
	c->ntouch = 0;
	for (unsigned i = 0; i < n && !rc; i++) {
		const struct ccache_touch *t = &c->touch[i];
		struct ccache_val v;

		/* Only a record still as it was hit (not dropped, stored
		 * again or evicted since) moves. */
		if (cc_rec_get(c, w->txn, &t->k, &v) || v.tick != t->tick)
			continue;
		if (!(rc = cc_rec_del(c, w, &t->k, &v)))
			rc = rec_put_tick(c, w, &t->k, v.len, t->to);
	}
	return rc;
}

/* Make k the most recently used, if its record is still the one seen:
 * queued, and written with the next CCACHE_TOUCH_BATCH - 1. */
static void touch(struct ccache *c, const struct ccache_key *k, uint64_t tick)
{
	struct wtx w;

	pthread_mutex_lock(&c->lock);
	/* Recently used enough already: spare the write. */
	if (c->tick - tick < c->nchunks / 8 + 1)
		goto out;
	for (unsigned i = 0; i < c->ntouch; i++)
		if (c->touch[i].tick == tick &&
		    ccache_rec_key_eq(&c->touch[i].k, k))
			goto out;
	/* Its place in the order is taken now, when it is used. */
	c->touch[c->ntouch].k = *k;
	c->touch[c->ntouch].tick = tick;
	c->touch[c->ntouch].to = ++c->tick;
	if (++c->ntouch < CCACHE_TOUCH_BATCH)
		goto out;
	if (cc_wtx_begin(c, &w))
		c->ntouch = 0;
	else
		cc_wtx_end(c, &w, cc_touch_apply(c, &w));
out:
	pthread_mutex_unlock(&c->lock);
}

/*
 * The chunk that holds (fid, idx) at version dv, found in a read
 * transaction of its own: 0, *pk and *v as find() gives them; -ENOENT
 * (a damaged record is discarded on the way).
 */
static int lookup(struct ccache *c, const struct cairn_fid *fid, uint32_t idx,
		  uint64_t dv, struct ccache_key *pk, struct ccache_val *v)
{
	MDB_txn *txn;
	int rc;

	if (GET(c->broken))
		return -ENOENT;
	if ((rc = mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn))) {
		cc_lmdb_err(c, rc, "begin");
		return -ENOENT;
	}
	rc = find(c, txn, fid, idx, dv, pk, v);
	mdb_txn_abort(txn);
	if (rc == -EUCLEAN)
		discard(c, pk, 0, "bad index record");
	return rc ? -ENOENT : 0;
}

int ccache_get(struct ccache *c, const struct ccache_key *k, uint32_t off,
	       uint32_t len, struct ccache_buf *b)
{
	const char *why = NULL;
	struct ccache_key pk;
	struct ccache_val v;
	int rc;

	memset(b, 0, sizeof(*b));
	if (!c)
		return -ENOENT;
	if (lookup(c, &k->fid, k->idx, k->dv, &pk, &v))
		goto miss;
	rc = chunk_read(c, &pk, v.len, off, len, 0, b, &why);
	if (rc == -ENOMEM)
		return rc;
	if (rc == -EUCLEAN)
		discard(c, &pk, v.tick, why);
	if (rc)
		goto miss;
	ADD(c->hits, 1);
	ADD(c->hit_bytes, b->len);
	touch(c, &pk, v.tick);
	return 0;
miss:
	ADD(c->misses, 1);
	return -ENOENT;
}

int ccache_has(struct ccache *c, const struct ccache_key *k)
{
	struct ccache_key pk;
	struct ccache_val v;

	return c && lookup(c, &k->fid, k->idx, k->dv, &pk, &v) == 0;
}

void ccache_buf_free(struct ccache_buf *b)
{
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

/* ---- stores -------------------------------------------------------------- */

/* Where a chunk to be stored waits: a file in tmp/, or (a small chunk)
 * its bytes in memory. Built when either is set; csrc_free in the end. */
struct csrc {
	char tmp[64];
	uint8_t *mem;
	size_t mlen;
};

static int csrc_built(const struct csrc *s)
{
	return s->tmp[0] || s->mem;
}

static void csrc_free(struct csrc *s)
{
	free(s->mem);
	s->mem = NULL;
}

/* Chunk k's bytes, header and data, into s: a file in tmp/, or in
 * memory for a small chunk. */
static int write_tmp(struct ccache *c, const struct ccache_key *k,
		     const void *data, uint32_t len, struct csrc *s)
{
	struct ccache_hdr h = { .key = *k, .len = len };
	uint8_t hb[CCACHE_REC_HDR_MAX];
	size_t hsz;
	int fd, rc;

	h.nblk = ccache_rec_nblk(len);
	for (uint32_t i = 0; i < h.nblk; i++) {
		uint32_t at = i * CCACHE_BLOCK;

		h.crc[i] = cc_crc((const uint8_t *)data + at,
			       len - at < CCACHE_BLOCK ? len - at
						       : CCACHE_BLOCK);
	}
	hsz = ccache_rec_hdr_encode(&h, hb);
	h.hcrc = cc_crc(hb, hsz - 4);
	ccache_rec_hdr_encode(&h, hb);
	if (len <= CCACHE_SMALL_MAX) {
		if (!(s->mem = malloc(hsz + len)))
			return -ENOMEM;
		memcpy(s->mem, hb, hsz);
		memcpy(s->mem + hsz, data, len);
		s->mlen = hsz + len;
		return 0;
	}
	snprintf(s->tmp, sizeof(s->tmp), "tmp/%ld.%" PRIu64, (long)getpid(),
		 ADD(c->tmp_seq, 1));
	fd = ccache_os.openat(c->dfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL,
			      0600);
	if (fd < 0) {
		s->tmp[0] = '\0';
		return -errno;
	}
	rc = write_full(fd, hb, hsz, 0);
	if (!rc)
		rc = write_full(fd, data, len, (off_t)hsz);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc) {
		unlinkat(c->dfd, s->tmp, 0);
		s->tmp[0] = '\0';
	}
	return rc;
}

/* Give the file in tmp the name of k (creating its directory). */
static int place(struct ccache *c, const struct ccache_key *k,
		 const char *tmp)
{
	char path[64], dir[3];

	key_path(k, path);
	if (ccache_os.renameat(c->dfd, tmp, c->dfd, path) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	snprintf(dir, sizeof(dir), "%02x", cc_key_dir(k));
	if (mkdirat(c->dfd, dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return ccache_os.renameat(c->dfd, tmp, c->dfd, path) ? -errno : 0;
}

/* Place s as chunk k of len bytes and record it, in w, replacing a
 * record of k. *placed is set once a file has k's name (then, should w
 * be aborted, the caller removes it by that name); a small chunk's
 * record goes with w. */
static int store(struct ccache *c, struct wtx *w, const struct ccache_key *k,
		 uint32_t len, const struct csrc *s, int *placed)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	MDB_val key = { sizeof(kb), kb }, val = { s->mlen, s->mem };
	struct ccache_val v;
	int rc;

	if (!s->mem) {
		if ((rc = place(c, k, s->tmp)))
			return rc;
		*placed = 1;
		/* An older copy of k, dropped in w or still recorded, had
		 * this name: its file is gone already. */
		unlink_cancel(w, k);
	}
	/* Its record goes now; a small copy's bytes too, or (replaced by a
	 * small one) its file, once w commits. */
	rc = cc_rec_get(c, w->txn, k, &v);
	if (rc == -EUCLEAN)
		return cc_lmdb_err(c, MDB_CORRUPTED, "store");
	if (!rc && (rc = cc_rec_del(c, w, k, &v)))
		return rc;
	ccache_rec_key_encode(k, kb);
	if (!rc && v.len > CCACHE_SMALL_MAX && s->mem &&
	    (rc = keyvec_add(&w->unlink, k)))
		return rc;
	if (!rc && v.len <= CCACHE_SMALL_MAX && !s->mem &&
	    (rc = mdb_del(w->txn, c->db_small, &key, NULL)) &&
	    rc != MDB_NOTFOUND)
		return cc_lmdb_err(c, rc, "delete");
	if (s->mem && (rc = mdb_put(w->txn, c->db_small, &key, &val, 0)))
		return cc_lmdb_err(c, rc, "put");
	return cc_rec_put(c, w, k, len);
}

/* The index side of ccache_put: drop what chunk k supersedes, store it,
 * and move the lineage (ccache.h: "Fetched chunks"). */
static int put_index(struct ccache *c, struct wtx *w, const struct ccache_key *k,
		     uint32_t len, const struct csrc *src, int *placed)
{
	/* Default (no lineage, or k->dv above it): the file's chunks of
	 * other versions go, a newer one makes k outdated. */
	struct drop_spec s = { 0, UINT32_MAX, 1, 1, k->dv };
	struct ccache_lin l = { k->dv, k->dv }, old;
	int rc = lin_get(c, w->txn, &k->fid, &old);

	if (rc && rc != -ENOENT && rc != -EUCLEAN)
		return rc;
	if (!rc && k->dv < old.cur)
		return -ESTALE;
	if (!rc && k->dv == old.cur) {
		/* the lineage's own version: only this index changes */
		s = (struct drop_spec){ k->idx, k->idx, 0, 0, 0 };
		l = old;
	}
	if ((rc = drop(c, w, &k->fid, &s)) ||
	    (rc = cc_evict(c, w, chunk_bytes(len))) ||
	    (rc = store(c, w, k, len, src, placed)))
		return rc;
	return lin_put(c, w, &k->fid, &l);
}

/* Remove what a failed store left: the placed file, else the tmp one
 * (a small chunk's record went with the aborted transaction). */
static void store_undo(struct ccache *c, const struct ccache_key *k,
		       struct csrc *s, int placed)
{
	char path[64];

	if (placed) {
		key_path(k, path);
		unlinkat(c->dfd, path, 0);
	} else if (s->tmp[0]) {
		unlinkat(c->dfd, s->tmp, 0);
	}
	csrc_free(s);
}

int ccache_put(struct ccache *c, const struct ccache_key *k,
	       const void *data, uint32_t len)
{
	struct csrc src = { "", NULL, 0 };
	int rc, placed = 0;
	struct wtx w;

	if (!c || len == 0 || len > CCACHE_CHUNK)
		return -EINVAL;
	if (chunk_bytes(len) > c->limit)
		return -EFBIG;
	if (GET(c->broken))
		return -EIO;
	if ((rc = write_tmp(c, k, data, len, &src)))
		goto fail;
	pthread_mutex_lock(&c->lock);
	if ((rc = cc_wtx_begin(c, &w))) {
		pthread_mutex_unlock(&c->lock);
		store_undo(c, k, &src, 0);
		goto fail;
	}
	rc = put_index(c, &w, k, len, &src, &placed);
	rc = cc_wtx_end(c, &w, rc);
	if (rc)
		store_undo(c, k, &src, placed);
	pthread_mutex_unlock(&c->lock);
	csrc_free(&src);
	if (rc == -ESTALE)
		return rc;
	if (rc)
		goto fail;
	ADD(c->stored, 1);
	ADD(c->stored_bytes, len);
	return 0;
fail:
	ADD(c->errors, 1);
	log_debug("cache %s: cannot store a chunk: %s", c->dir, strerror(-rc));
	return rc;
}

/* Drop every chunk of fid and its lineage, in a transaction of its own. */
static int forget(struct ccache *c, const struct cairn_fid *fid)
{
	struct drop_spec all = { 0, UINT32_MAX, 0, 0, 0 };
	struct wtx w;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (!(rc = cc_wtx_begin(c, &w))) {
		if (!(rc = drop(c, &w, fid, &all)))
			rc = lin_del(c, &w, fid);
		rc = cc_wtx_end(c, &w, rc);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void ccache_forget_fid(struct ccache *c, const struct cairn_fid *fid)
{
	if (c && !GET(c->broken))
		forget(c, fid);
}

void ccache_count_fetch(struct ccache *c, uint64_t bytes)
{
	if (c)
		ADD(c->fetched, bytes);
}

/* ---- our own writes ---------------------------------------------------------- */

/*
 * What a patch may cost. A chunk a write covers only in part is rebuilt
 * (its cached bytes with the written ones over them, as a new chunk file)
 * only when the bytes it carries over are at most PATCH_MIN, or at most
 * PATCH_RATIO times the bytes of the write; otherwise it is dropped. (The
 * write's, not the piece's: a 1 MiB write 32 KiB past a chunk boundary
 * writes 32 KiB into the next chunk, and copying that chunk's other
 * 992 KiB is cheap beside the write.)
 * cp's 128 KiB writes still fill a chunk in 8 patches (3.5 MiB copied
 * per MiB written); a program writing 4 KiB at a time would copy about
 * 128 MiB per MiB without the bound, and now keeps the first 128 KiB of
 * each chunk.
 */
#define PATCH_MIN   (128u * 1024u)
#define PATCH_RATIO 16u

/*
 * A write that starts past the old end of file leaves zeros between the
 * two. The kernel's write-back sends a file's pages mostly in order but
 * not always: a run of pages kept back a moment arrives after the pages
 * beyond it, so the bytes around the old end are written last, into a
 * chunk this cache would not know. So such a write also rebuilds the
 * chunk that held the old end (its bytes, then zeros) and stores the
 * chunks wholly in the gap as zeros, up to GAP_MAX chunks from the old
 * end; a longer gap (a sparse file) keeps no chunk for it.
 */
#define GAP_MAX 4u

/* The write ccache_write describes. */
struct wop {
	struct cairn_fid fid;
	uint64_t old_dv, new_dv, old_size, new_size, off;
	const uint8_t *data;
	uint32_t len;
};

/* One chunk a write touches. */
struct wpiece {
	struct ccache_key k;    /* (fid, new_dv, idx) */
	uint32_t len;           /* its length at new_dv */
	uint32_t ws, we;        /* the bytes written, from the chunk's start */
	uint32_t old_len;       /* its length at old_dv (0: none) */
	int gap;                /* not written: zeros up to the write (GAP_MAX) */
	int have_old;           /* ok, ov: the chunk holding it at old_dv */
	struct ccache_key ok;
	struct ccache_val ov;
	struct csrc src;        /* its new bytes; not built: not stored */
	int placed;
};

/* The chunk op's pieces start at: the first it writes, or before it the
 * one holding the old end of file (GAP_MAX). */
static uint64_t wop_first(const struct wop *op)
{
	uint64_t first = op->off / CCACHE_CHUNK, old_end;

	if (!op->len || op->off <= op->old_size)
		return first;
	old_end = op->old_size / CCACHE_CHUNK;
	return first - old_end > GAP_MAX ? first : old_end;
}

/* The pieces of op (n of them, from wop_first) and whether any is
 * written only in part. */
static int wop_pieces(const struct wop *op, struct wpiece *ps, uint32_t n)
{
	uint64_t end = op->off + op->len, first = wop_first(op);
	int partial = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct wpiece *p = &ps[i];
		uint64_t base;

		memset(p, 0, sizeof(*p));
		p->k.fid = op->fid;
		p->k.dv = op->new_dv;
		p->k.idx = (uint32_t)(first + i);
		base = (uint64_t)p->k.idx * CCACHE_CHUNK;
		p->len = op->new_size - base < CCACHE_CHUNK
			 ? (uint32_t)(op->new_size - base) : CCACHE_CHUNK;
		p->gap = base + CCACHE_CHUNK <= op->off;
		if (!p->gap) {
			p->ws = (uint32_t)((op->off > base ? op->off : base) -
					   base);
			p->we = (uint32_t)((end < base + p->len
					    ? end : base + p->len) - base);
		}
		if (op->old_size > base)
			p->old_len = op->old_size - base < CCACHE_CHUNK
				     ? (uint32_t)(op->old_size - base)
				     : CCACHE_CHUNK;
		partial |= p->we - p->ws != p->len;
	}
	return partial;
}

/*
 * Look, in one read transaction, at what op's pieces written in part need:
 * the chunks holding their bytes at old_dv. Returns 1 when there is
 * nothing to do at all (the lineage is at new_dv or beyond already, or
 * the file has no chunk and no lineage and no piece can be built without
 * old bytes), else 0.
 */
static int wop_snapshot(struct ccache *c, const struct wop *op,
			struct wpiece *ps, uint32_t n)
{
	struct ccache_lin l;
	MDB_txn *txn;
	int lin, rc = 0;

	if (mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn))
		return 0; /* the commit will tell */
	lin = lin_get(c, txn, &op->fid, &l) == 0;
	if (lin && l.cur >= op->new_dv) {
		rc = 1;
	} else if (lin || !cc_fid_empty(c, txn, &op->fid)) {
		for (uint32_t i = 0; i < n; i++) {
			struct wpiece *p = &ps[i];

			if (p->we - p->ws != p->len && p->old_len)
				p->have_old = !find(c, txn, &op->fid, p->k.idx,
						    op->old_dv, &p->ok, &p->ov) &&
					      p->ov.len == p->old_len;
		}
	} else {
		/* Nothing cached: only pieces written whole, or past the
		 * old end of file, can be built. */
		rc = 1;
		for (uint32_t i = 0; i < n; i++)
			if (ps[i].we - ps[i].ws == ps[i].len || !ps[i].old_len)
				rc = 0;
	}
	mdb_txn_abort(txn);
	return rc;
}

/* Build piece p's bytes at new_dv (p->src) when they are known and
 * cheap enough (PATCH_*). 0 (p->src not built then), or a negative
 * errno. */
static int wpiece_build(struct ccache *c, const struct wop *op,
			struct wpiece *p)
{
	uint64_t base = (uint64_t)p->k.idx * CCACHE_CHUNK;
	uint32_t wlen = p->we - p->ws, carry = p->len - wlen;
	const uint8_t *src = p->gap ? NULL
				    : op->data + (base + p->ws - op->off);
	struct ccache_buf b = { 0 };
	const char *why = NULL;
	int rc;

	if (chunk_bytes(p->len) > c->limit)
		return 0;
	if (carry == 0)
		return write_tmp(c, &p->k, src, p->len, &p->src);
	if (!p->gap && carry > PATCH_MIN &&
	    carry > (uint64_t)PATCH_RATIO * op->len)
		return 0;
	if (!p->old_len) {
		/* past the old end of file: zeros up to the write */
		if (!(b.mem = calloc(1, p->len)))
			return -ENOMEM;
	} else {
		if (!p->have_old)
			return 0;
		rc = chunk_read(c, &p->ok, p->ov.len, 0, p->ov.len, p->len,
				&b, &why);
		if (rc == -EUCLEAN)
			discard(c, &p->ok, p->ov.tick, why);
		if (rc)
			return rc == -ENOMEM ? rc : 0;
		if (p->len > p->old_len)
			memset((uint8_t *)b.mem + p->old_len, 0,
			       p->len - p->old_len);
	}
	if (wlen)
		memcpy((uint8_t *)b.mem + p->ws, src, wlen);
	rc = write_tmp(c, &p->k, b.mem, p->len, &p->src);
	free(b.mem);
	return rc;
}

/*
 * The index side of ccache_write, under c->lock in w. Returns 1 when the
 * lineage is at new_dv or beyond already (nothing to add), 0, or a
 * negative errno.
 */
static int write_index(struct ccache *c, struct wtx *w, const struct wop *op,
		       struct wpiece *ps, uint32_t n)
{
	struct ccache_lin l;
	uint64_t need = 0;
	int rc = lin_get(c, w->txn, &op->fid, &l), lin = rc == 0;

	if (rc && rc != -ENOENT && rc != -EUCLEAN)
		return rc;
	if (lin && l.cur >= op->new_dv)
		return 1;
	if (!lin || l.cur != op->old_dv) {
		/* A lineage from old_dv: only chunks of that very version
		 * hold its bytes. */
		struct drop_spec s = { 0, UINT32_MAX, 1, 0, op->old_dv };

		if ((rc = drop(c, w, &op->fid, &s)))
			return rc;
		l.base = l.cur = op->old_dv;
	}
	if (op->new_size != op->old_size) {
		/* The chunk that held the old end, and any past the new one,
		 * have another length now. */
		uint64_t lo = (op->new_size < op->old_size ? op->new_size
							   : op->old_size) /
			      CCACHE_CHUNK;
		struct drop_spec s = {
			lo > UINT32_MAX ? UINT32_MAX : (uint32_t)lo,
			UINT32_MAX, 0, 0, 0
		};

		if ((rc = drop(c, w, &op->fid, &s)))
			return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct drop_spec s = { ps[i].k.idx, ps[i].k.idx, 0, 0, 0 };

		if ((rc = drop(c, w, &op->fid, &s)))
			return rc;
		if (csrc_built(&ps[i].src))
			need += chunk_bytes(ps[i].len);
	}
	if ((rc = cc_evict(c, w, need)))
		return rc;
	for (uint32_t i = 0; i < n; i++)
		if (csrc_built(&ps[i].src) &&
		    (rc = store(c, w, &ps[i].k, ps[i].len, &ps[i].src,
				&ps[i].placed)))
			return rc;
	l.cur = op->new_dv;
	if (cc_fid_empty(c, w->txn, &op->fid))
		return lin_del(c, w, &op->fid);
	return lin_put(c, w, &op->fid, &l);
}

int ccache_write(struct ccache *c, const struct cairn_fid *fid,
		 uint64_t old_dv, uint64_t new_dv, uint64_t old_size,
		 uint64_t new_size, uint64_t off, const void *data,
		 uint32_t len)
{
	struct wop op = { *fid, old_dv, new_dv, old_size, new_size, off,
			  data, len };
	struct wpiece one[2], *ps = one;
	uint64_t end = off + len;
	uint32_t n = 0;
	struct wtx w;
	int rc = 0;

	if (!c)
		return 0;
	if (GET(c->broken))
		return -EIO;
	if (new_dv != old_dv + 1 || end < off || end > new_size ||
	    (len && (end - 1) / CCACHE_CHUNK > UINT32_MAX)) {
		rc = -EINVAL;
		goto fail;
	}
	if (len)
		n = (uint32_t)((end - 1) / CCACHE_CHUNK - wop_first(&op) + 1);
	if (n > 2 && !(ps = calloc(n, sizeof(*ps)))) {
		rc = -ENOMEM;
		goto fail;
	}
	if (wop_pieces(&op, ps, n) && wop_snapshot(c, &op, ps, n))
		goto out;
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = wpiece_build(c, &op, &ps[i]);
	if (rc)
		goto undo;
	pthread_mutex_lock(&c->lock);
	if (!(rc = cc_wtx_begin(c, &w)))
		rc = cc_wtx_end(c, &w, write_index(c, &w, &op, ps, n));
	for (uint32_t i = 0; i < n && rc; i++)
		store_undo(c, &ps[i].k, &ps[i].src, ps[i].placed);
	pthread_mutex_unlock(&c->lock);
	if (rc == 1) { /* nothing to add */
		rc = 0;
		goto out;
	}
	if (rc)
		goto fail;
	for (uint32_t i = 0; i < n; i++)
		if (csrc_built(&ps[i].src)) {
			ADD(c->written, 1);
			ADD(c->written_bytes, ps[i].len);
		}
	goto out;
undo:
	for (uint32_t i = 0; i < n; i++)
		store_undo(c, &ps[i].k, &ps[i].src, 0);
fail:
	/* Whatever state the file's chunks are in, none may be served. */
	if (!GET(c->broken))
		forget(c, fid);
	ADD(c->errors, 1);
	log_debug("cache %s: cannot keep a write: %s", c->dir, strerror(-rc));
out:
	for (uint32_t i = 0; i < n; i++)
		csrc_free(&ps[i].src);
	if (ps != one)
		free(ps);
	return rc;
}

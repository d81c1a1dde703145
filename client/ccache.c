/*
 * ccache.c - the persistent chunk cache (see ccache.h for the contract,
 * ccache_rec.h for the bytes on disk).
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
 * Invariants, under c->lock: used is the sum of hdr + len over the chunks
 * db and nchunks its count; every chunks record has an lru record under
 * its tick and vice versa; tick is at least every tick in use. The index
 * is changed only under c->lock and only by one write transaction at a
 * time (LMDB's writer lock is therefore never contended: it nests inside
 * c->lock, a leaf). Chunk files are renamed into place and unlinked only
 * under c->lock, so a file name and its record change together as far as
 * other threads of this process can see.
 *
 * Sync policy: none on the way (MDB_NOSYNC, no fsync of chunk files): the
 * crc32s decide whether a chunk's bytes can be trusted, and the dirty
 * marker (fsynced once at open) decides whether the index can be. The cost
 * of a machine crash is a rebuild from the chunk headers, not wrong data.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <isa-l/crc.h>
#include <lmdb.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "ccache.h"
#include "../lib/debug.h"
#include "../lib/log.h"

/* Virtual size of the index map; the file grows only as used (about 150
 * bytes per chunk, so this bounds the cache at millions of chunks). */
#define CCACHE_MAP_SIZE   (1ull << 30)
#define CCACHE_MAX_READERS 512u
#define CCACHE_FORMAT     2u   /* 2: keys (fid, idx, dv) */
#define CCACHE_NDIRS      256u

struct ccache {
	char dir[PATH_MAX];     /* DIR/chunks, for log lines */
	int dfd;                /* DIR/chunks */
	int lockfd;             /* DIR/chunks/lock, flock()ed */
	MDB_env *env;
	MDB_dbi db_chunks, db_lru, db_meta;
	uint64_t limit;

	pthread_mutex_t lock;
	uint64_t used;          /* lock */
	uint64_t nchunks;       /* lock */
	uint64_t tick;          /* lock: the last tick handed out */
	int broken;             /* set under lock, read as a hint without */

	uint64_t tmp_seq;       /* atomic */
	/* Counters: relaxed atomics. */
	uint64_t hits, misses, hit_bytes, fetched, stored, stored_bytes,
		 evicted, discarded, errors;
};

#define ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_RELAXED)
#define GET(x)    __atomic_load_n(&(x), __ATOMIC_RELAXED)

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
static int read_full(int fd, void *buf, size_t n, off_t off)
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

static unsigned key_dir(const struct ccache_key *k)
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
	snprintf(out, 64, "%02x/%s", key_dir(k), name);
}

static uint64_t chunk_bytes(uint32_t len)
{
	return ccache_rec_hdr_bytes(len) + len;
}

/*
 * CRC-32 (IEEE 802.3, reflected: the one of gzip and zlib's crc32) from
 * ISA-L, which picks a carry-less-multiply version at run time: about
 * 9 GB/s here against zlib's 3, and every hit checks what it returns.
 */
static uint32_t crc(const void *p, size_t n)
{
	return crc32_gzip_refl(0, p, n);
}

/* ---- index ------------------------------------------------------------- */

/* An LMDB failure as an errno; damage puts the cache in its sticky broken
 * state (every lookup misses, nothing is stored, the next open rebuilds). */
static int lmdb_err(struct ccache *c, int rc, const char *what)
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

struct keyvec {
	struct ccache_key *v;
	size_t n, cap;
};

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

/* A write transaction and the totals it may change, restored if it does
 * not commit. Caller holds c->lock throughout. */
struct wtx {
	MDB_txn *txn;
	uint64_t used, nchunks, tick;
	struct keyvec unlink;   /* files to remove once committed */
};

static int wtx_begin(struct ccache *c, struct wtx *w)
{
	LOCK_ASSERT_HELD(&c->lock);
	memset(w, 0, sizeof(*w));
	w->used = c->used;
	w->nchunks = c->nchunks;
	w->tick = c->tick;
	return lmdb_err(c, mdb_txn_begin(c->env, NULL, 0, &w->txn),
			"begin");
}

static void unlink_key(struct ccache *c, const struct ccache_key *k)
{
	char path[64];

	key_path(k, path);
	if (unlinkat(c->dfd, path, 0) < 0 && errno != ENOENT)
		log_warn("cache %s: cannot remove %s: %s", c->dir, path,
			 strerror(errno));
}

/* Commit when rc is 0, else abort; returns the outcome. */
static int wtx_end(struct ccache *c, struct wtx *w, int rc)
{
	LOCK_ASSERT_HELD(&c->lock);
	if (!rc)
		rc = lmdb_err(c, mdb_txn_commit(w->txn), "commit");
	else
		mdb_txn_abort(w->txn);
	if (rc) {
		c->used = w->used;
		c->nchunks = w->nchunks;
		c->tick = w->tick;
	} else {
		for (size_t i = 0; i < w->unlink.n; i++)
			unlink_key(c, &w->unlink.v[i]);
	}
	free(w->unlink.v);
	return rc;
}

static int rec_get(struct ccache *c, MDB_txn *txn, const struct ccache_key *k,
		   struct ccache_val *v)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	MDB_val key = { sizeof(kb), kb }, val;
	int rc;

	ccache_rec_key_encode(k, kb);
	rc = mdb_get(txn, c->db_chunks, &key, &val);
	if (rc)
		return lmdb_err(c, rc, "get");
	return ccache_rec_val_decode(val.mv_data, val.mv_size, v);
}

/* Remove the records of k (whose value is v): chunks and lru. */
static int rec_del(struct ccache *c, struct wtx *w, const struct ccache_key *k,
		   const struct ccache_val *v)
{
	uint8_t kb[CCACHE_REC_KEY_SIZE], tb[CCACHE_REC_TICK_SIZE];
	MDB_val key = { sizeof(kb), kb }, tkey = { sizeof(tb), tb };
	int rc;

	ccache_rec_key_encode(k, kb);
	ccache_rec_tick_encode(v->tick, tb);
	rc = mdb_del(w->txn, c->db_chunks, &key, NULL);
	if (rc)
		return lmdb_err(c, rc, "delete");
	rc = mdb_del(w->txn, c->db_lru, &tkey, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return lmdb_err(c, rc, "delete");
	c->used -= chunk_bytes(v->len);
	c->nchunks--;
	return 0;
}

/* Record chunk k of len bytes as the most recently used. */
static int rec_put(struct ccache *c, struct wtx *w, const struct ccache_key *k,
		   uint32_t len)
{
	struct ccache_val v = { .len = len, .tick = ++c->tick };
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
		return lmdb_err(c, rc, "put");
	c->used += chunk_bytes(len);
	c->nchunks++;
	return 0;
}

/*
 * Evict least recently used chunks until `need` more bytes fit under the
 * limit. Stale lru records (no matching chunk) are dropped on the way.
 */
static int evict(struct ccache *c, struct wtx *w, uint64_t need)
{
	MDB_cursor *cur;
	MDB_val tkey, kval;
	int rc = 0, mrc;

	if (c->used + need <= c->limit)
		return 0;
	if ((mrc = mdb_cursor_open(w->txn, c->db_lru, &cur)))
		return lmdb_err(c, mrc, "cursor");
	while (!rc && c->used + need > c->limit) {
		struct ccache_key k;
		struct ccache_val v;
		uint64_t tick;
		int bad;

		if ((mrc = mdb_cursor_get(cur, &tkey, &kval, MDB_FIRST))) {
			if (mrc != MDB_NOTFOUND)
				rc = lmdb_err(c, mrc, "cursor");
			break; /* nothing left to evict */
		}
		bad = ccache_rec_tick_decode(tkey.mv_data, tkey.mv_size,
					     &tick) ||
		      ccache_rec_key_decode(kval.mv_data, kval.mv_size, &k);
		if (!bad && !rec_get(c, w->txn, &k, &v) && v.tick == tick) {
			if (!(rc = rec_del(c, w, &k, &v)) &&
			    !(rc = keyvec_add(&w->unlink, &k)))
				ADD(c->evicted, 1);
			continue;
		}
		/* an lru record without its chunk: drop it */
		if ((mrc = mdb_cursor_del(cur, 0)))
			rc = lmdb_err(c, mrc, "delete");
	}
	mdb_cursor_close(cur);
	return rc;
}

/*
 * Walk the chunks of fid (every version). keep_dv: drop versions older
 * than it, report a newer one with -ESTALE, and drop an older copy of
 * `same` without unlinking its file (the new one has its name). With
 * keep_dv 0, drop everything.
 */
static int fid_walk(struct ccache *c, struct wtx *w, const struct cairn_fid *fid,
		    uint64_t keep_dv, const struct ccache_key *same)
{
	struct ccache_key lo = { .fid = *fid, .dv = 0, .idx = 0 }, k;
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	MDB_val key = { sizeof(kb), kb }, val;
	MDB_cursor *cur;
	int rc = 0, mrc, op = MDB_SET_RANGE;

	ccache_rec_key_encode(&lo, kb);
	if ((mrc = mdb_cursor_open(w->txn, c->db_chunks, &cur)))
		return lmdb_err(c, mrc, "cursor");
	while (!rc) {
		struct ccache_val v;

		if ((mrc = mdb_cursor_get(cur, &key, &val, op))) {
			if (mrc != MDB_NOTFOUND)
				rc = lmdb_err(c, mrc, "cursor");
			break;
		}
		op = MDB_NEXT;
		if (ccache_rec_key_decode(key.mv_data, key.mv_size, &k) ||
		    k.fid.vol != fid->vol || k.fid.vnode != fid->vnode ||
		    k.fid.uniq != fid->uniq)
			break;
		if (keep_dv && k.dv > keep_dv) {
			rc = -ESTALE; /* a newer version is cached */
			break;
		}
		if (keep_dv && k.dv == keep_dv && !ccache_rec_key_eq(&k, same))
			continue;
		if (ccache_rec_val_decode(val.mv_data, val.mv_size, &v)) {
			/* load() dropped bad records: this is new damage */
			rc = lmdb_err(c, MDB_CORRUPTED, "walk");
			break;
		}
		if ((rc = rec_del(c, w, &k, &v)))
			break;
		/* Deleted under the cursor: find the next key again. */
		op = MDB_SET_RANGE;
		ccache_rec_key_encode(&k, kb);
		key.mv_size = sizeof(kb);
		key.mv_data = kb;
		if (same && ccache_rec_key_eq(&k, same))
			continue; /* its file is the new copy's */
		if (!(rc = keyvec_add(&w->unlink, &k)))
			ADD(c->evicted, 1);
	}
	mdb_cursor_close(cur);
	return rc;
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
	if (wtx_begin(c, &w)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	rc = rec_get(c, w.txn, k, &v);
	found = rc == 0 && v.tick == tick;
	if (found) {
		rc = rec_del(c, &w, k, &v);
	} else if (rc == -EUCLEAN) {
		/* the record itself is bad: drop it by key */
		uint8_t kb[CCACHE_REC_KEY_SIZE];
		MDB_val key = { sizeof(kb), kb };

		ccache_rec_key_encode(k, kb);
		rc = lmdb_err(c, mdb_del(w.txn, c->db_chunks, &key, NULL),
			      "delete");
		found = 1;
	}
	if (found && !rc)
		rc = keyvec_add(&w.unlink, k);
	rc = wtx_end(c, &w, found ? rc : -ENOENT);
	pthread_mutex_unlock(&c->lock);
	if (found && !rc) {
		ADD(c->discarded, 1);
		log_warn("cache %s: chunk %s: %s; discarded", c->dir, path,
			 why);
	}
}

/* ---- lookups ------------------------------------------------------------- */

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
	if (read_full(fd, buf, hsz, 0)) {
		*why = "cannot read header";
		return -EIO;
	}
	if (ccache_rec_hdr_decode(buf, hsz, h)) {
		*why = "malformed header";
		return -EUCLEAN;
	}
	if (h->hcrc != crc(buf, hsz - 4)) {
		*why = "header checksum mismatch";
		return -EUCLEAN;
	}
	if (!ccache_rec_key_eq(&h->key, k) || h->len != len) {
		*why = "header names another chunk";
		return -EUCLEAN;
	}
	return 0;
}

/* Make k the most recently used, if its record is still the one seen. */
static void touch(struct ccache *c, const struct ccache_key *k, uint64_t tick)
{
	struct ccache_val v;
	struct wtx w;
	int rc;

	pthread_mutex_lock(&c->lock);
	/* Recently used enough already: spare the write. */
	if (c->tick - tick < c->nchunks / 8 + 1 || wtx_begin(c, &w)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	rc = rec_get(c, w.txn, k, &v);
	if (!rc && v.tick != tick)
		rc = -ESTALE;
	if (!rc && !(rc = rec_del(c, &w, k, &v)))
		rc = rec_put(c, &w, k, v.len);
	wtx_end(c, &w, rc);
	pthread_mutex_unlock(&c->lock);
}

int ccache_get(struct ccache *c, const struct ccache_key *k, uint32_t off,
	       uint32_t len, struct ccache_buf *b)
{
	const char *why = NULL;
	struct ccache_hdr h;
	struct ccache_val v;
	char path[64];
	MDB_txn *txn;
	uint32_t end, b0, b1, start, stop;
	uint8_t *mem = NULL;
	int fd = -1, rc;

	memset(b, 0, sizeof(*b));
	if (!c || GET(c->broken))
		goto miss;
	if ((rc = mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn))) {
		lmdb_err(c, rc, "begin");
		goto miss;
	}
	rc = rec_get(c, txn, k, &v);
	mdb_txn_abort(txn);
	if (rc == -EUCLEAN) {
		why = "bad index record";
		v.tick = 0;
		goto bad;
	}
	if (rc)
		goto miss;
	key_path(k, path);
	fd = ccache_os.openat(c->dfd, path, O_RDONLY, 0);
	if (fd < 0 && errno != ENOENT)
		goto miss; /* out of descriptors, say: not the chunk's fault */
	if (fd < 0) {
		why = "file missing";
		goto bad;
	}
	if (check_hdr(fd, k, v.len, &h, &why))
		goto bad;
	if (off >= v.len || len == 0) {
		close(fd);
		goto hit;
	}
	end = len > v.len - off ? v.len : off + len;
	b0 = off / CCACHE_BLOCK;
	b1 = (end - 1) / CCACHE_BLOCK + 1;
	start = b0 * CCACHE_BLOCK;
	stop = b1 * CCACHE_BLOCK > v.len ? v.len : b1 * CCACHE_BLOCK;
	if (!(mem = malloc(stop - start))) {
		close(fd);
		return -ENOMEM;
	}
	if (read_full(fd, mem, stop - start,
		      (off_t)(ccache_rec_hdr_bytes(v.len) + start))) {
		why = "cannot read data";
		goto bad;
	}
	for (uint32_t i = b0; i < b1; i++) {
		uint32_t at = i * CCACHE_BLOCK - start;
		uint32_t n = stop - start - at < CCACHE_BLOCK
			     ? stop - start - at : CCACHE_BLOCK;

		if (crc(mem + at, n) != h.crc[i]) {
			why = "data checksum mismatch";
			goto bad;
		}
	}
	close(fd);
	b->mem = mem;
	b->p = mem + (off - start);
	b->len = end - off;
hit:
	ADD(c->hits, 1);
	ADD(c->hit_bytes, b->len);
	touch(c, k, v.tick);
	return 0;
bad:
	free(mem);
	if (fd >= 0)
		close(fd);
	discard(c, k, v.tick, why);
miss:
	if (c)
		ADD(c->misses, 1);
	return -ENOENT;
}

void ccache_buf_free(struct ccache_buf *b)
{
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

/* ---- stores -------------------------------------------------------------- */

/* Write chunk k to a new file under tmp/; its name goes to tmp. */
static int write_tmp(struct ccache *c, const struct ccache_key *k,
		     const void *data, uint32_t len, char tmp[64])
{
	struct ccache_hdr h = { .key = *k, .len = len };
	uint8_t hb[CCACHE_REC_HDR_MAX];
	size_t hsz;
	int fd, rc;

	h.nblk = ccache_rec_nblk(len);
	for (uint32_t i = 0; i < h.nblk; i++) {
		uint32_t at = i * CCACHE_BLOCK;

		h.crc[i] = crc((const uint8_t *)data + at,
			       len - at < CCACHE_BLOCK ? len - at
						       : CCACHE_BLOCK);
	}
	hsz = ccache_rec_hdr_encode(&h, hb);
	h.hcrc = crc(hb, hsz - 4);
	ccache_rec_hdr_encode(&h, hb);
	snprintf(tmp, 64, "tmp/%ld.%" PRIu64, (long)getpid(),
		 ADD(c->tmp_seq, 1));
	fd = ccache_os.openat(c->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -errno;
	rc = write_full(fd, hb, hsz, 0);
	if (!rc)
		rc = write_full(fd, data, len, (off_t)hsz);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		unlinkat(c->dfd, tmp, 0);
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
	snprintf(dir, sizeof(dir), "%02x", key_dir(k));
	if (mkdirat(c->dfd, dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return ccache_os.renameat(c->dfd, tmp, c->dfd, path) ? -errno : 0;
}

int ccache_put(struct ccache *c, const struct ccache_key *k,
	       const void *data, uint32_t len)
{
	char tmp[64], path[64];
	int rc, placed = 0;
	struct wtx w;

	if (!c || len == 0 || len > CCACHE_CHUNK)
		return -EINVAL;
	if (chunk_bytes(len) > c->limit)
		return -EFBIG;
	if (GET(c->broken))
		return -EIO;
	if ((rc = write_tmp(c, k, data, len, tmp)))
		goto fail;
	pthread_mutex_lock(&c->lock);
	if ((rc = wtx_begin(c, &w))) {
		pthread_mutex_unlock(&c->lock);
		unlinkat(c->dfd, tmp, 0);
		goto fail;
	}
	/* Older versions go; a newer one means this one is outdated. */
	rc = fid_walk(c, &w, &k->fid, k->dv, k);
	if (!rc)
		rc = evict(c, &w, chunk_bytes(len));
	if (!rc && !(rc = place(c, k, tmp)))
		placed = 1;
	if (!rc)
		rc = rec_put(c, &w, k, len);
	rc = wtx_end(c, &w, rc);
	if (rc && placed) {
		/* With no record the file must not stay. */
		key_path(k, path);
		unlinkat(c->dfd, path, 0);
	} else if (rc) {
		unlinkat(c->dfd, tmp, 0);
	}
	pthread_mutex_unlock(&c->lock);
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

void ccache_forget_fid(struct ccache *c, const struct cairn_fid *fid)
{
	struct wtx w;
	int rc;

	if (!c || GET(c->broken))
		return;
	pthread_mutex_lock(&c->lock);
	if (!(rc = wtx_begin(c, &w))) {
		rc = fid_walk(c, &w, fid, 0, NULL);
		wtx_end(c, &w, rc);
	}
	pthread_mutex_unlock(&c->lock);
}

void ccache_count_fetch(struct ccache *c, uint64_t bytes)
{
	if (c)
		ADD(c->fetched, bytes);
}

/* ---- open, recovery, close ----------------------------------------------- */

static int boot_id(char id[37])
{
	char buf[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	uint8_t rec[CCACHE_REC_BOOT_LEN];

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 36)
		return -EIO;
	buf[36] = '\0';
	if (ccache_rec_boot_encode(buf, rec))
		return -EIO;
	memcpy(id, buf, 37);
	return 0;
}

enum shutdown { SHUT_CLEAN, SHUT_PROCESS, SHUT_MACHINE };

/* How the last user of the cache went away (the dirty marker). */
static enum shutdown last_shutdown(struct ccache *c, const char *now)
{
	uint8_t buf[CCACHE_REC_BOOT_LEN + 1];
	char then[37];
	int fd = openat(c->dfd, "dirty", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? SHUT_CLEAN : SHUT_MACHINE;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || ccache_rec_boot_decode(buf, (size_t)n, then) ||
	    !now[0] || strcmp(then, now))
		return SHUT_MACHINE;
	return SHUT_PROCESS;
}

/* Write the dirty marker durably (before the index changes). An unknown
 * boot id writes one no decoder accepts: the next open rebuilds. */
static int mark_dirty(struct ccache *c, const char *now)
{
	uint8_t rec[CCACHE_REC_BOOT_LEN];
	const char *body = "unknown\n";
	size_t n = strlen(body);
	int fd, rc = 0;

	if (now[0] && !ccache_rec_boot_encode(now, rec)) {
		body = (const char *)rec;
		n = sizeof(rec);
	}
	fd = openat(c->dfd, "dirty.tmp", O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	errno = 0;
	if (write(fd, body, n) != (ssize_t)n || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	close(fd);
	if (!rc && renameat(c->dfd, "dirty.tmp", c->dfd, "dirty") < 0)
		rc = -errno;
	if (!rc && fsync(c->dfd) < 0)
		rc = -errno;
	return rc;
}

/* Remove every file in directory `name` of c->dfd. */
static void clear_dir(struct ccache *c, const char *name)
{
	int fd = openat(c->dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void env_close(struct ccache *c)
{
	if (c->env)
		mdb_env_close(c->env);
	c->env = NULL;
}

/*
 * Open the index. Returns 0 (*fresh: it holds no format record, i.e. was
 * just created or lost its contents), or a negative errno / -EUCLEAN when
 * it cannot be trusted (torn, truncated, another format).
 */
static int env_open(struct ccache *c, int *fresh)
{
	char path[PATH_MAX + 16];
	MDB_envinfo info;
	MDB_stat ms;
	MDB_txn *txn;
	MDB_val key = { 6, "format" }, val;
	struct stat st;
	int rc;

	*fresh = 0;
	snprintf(path, sizeof(path), "%s/index", c->dir);
	if ((rc = mdb_env_create(&c->env))) {
		c->env = NULL;
		return -ENOMEM;
	}
	if ((rc = mdb_env_set_maxdbs(c->env, 4)) ||
	    (rc = mdb_env_set_mapsize(c->env, CCACHE_MAP_SIZE)) ||
	    (rc = mdb_env_set_maxreaders(c->env, CCACHE_MAX_READERS)) ||
	    (rc = mdb_env_open(c->env, path, MDB_NOSYNC | MDB_NOTLS, 0600)))
		goto bad;
	/* A truncated file would fault when LMDB touches its missing pages:
	 * every page up to the last one in use must be in the file. */
	snprintf(path, sizeof(path), "%s/index/data.mdb", c->dir);
	if ((rc = mdb_env_info(c->env, &info)) ||
	    (rc = mdb_env_stat(c->env, &ms)))
		goto bad;
	if (stat(path, &st) < 0 ||
	    (uint64_t)st.st_size < ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize) {
		rc = MDB_CORRUPTED;
		goto bad;
	}
	if ((rc = mdb_txn_begin(c->env, NULL, 0, &txn)))
		goto bad;
	if ((rc = mdb_dbi_open(txn, "chunks", MDB_CREATE, &c->db_chunks)) ||
	    (rc = mdb_dbi_open(txn, "lru", MDB_CREATE, &c->db_lru)) ||
	    (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &c->db_meta))) {
		mdb_txn_abort(txn);
		goto bad;
	}
	rc = mdb_get(txn, c->db_meta, &key, &val);
	if (rc == MDB_NOTFOUND) {
		*fresh = 1;
		rc = 0;
	} else if (!rc && (val.mv_size != 4 ||
			   memcmp(val.mv_data, "\2\0\0\0", 4))) {
		rc = MDB_VERSION_MISMATCH;
	}
	if (rc) {
		mdb_txn_abort(txn);
		goto bad;
	}
	if ((rc = mdb_txn_commit(txn)))
		goto bad;
	return 0;
bad:
	log_warn("cache %s: index unusable: %s", c->dir, mdb_strerror(rc));
	env_close(c);
	return -EUCLEAN;
}

static int put_format(struct ccache *c, struct wtx *w)
{
	MDB_val key = { 6, "format" }, val = { 4, "\2\0\0\0" };

	return lmdb_err(c, mdb_put(w->txn, c->db_meta, &key, &val, 0), "put");
}

/* A chunk file found by the rebuild: 0 and *len if its header is sound
 * and names key k. */
static int adopt_check(int dirfd, const char *name, const struct ccache_key *k,
		       uint32_t *len)
{
	uint8_t buf[CCACHE_REC_HDR_MAX];
	struct ccache_hdr h;
	struct stat st;
	size_t hsz;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC), rc = -EUCLEAN;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 ||
	    read_full(fd, buf, CCACHE_REC_HDR_FIXED, 0) ||
	    ccache_rec_hdr_size(buf, CCACHE_REC_HDR_FIXED, &hsz) ||
	    read_full(fd, buf, hsz, 0) ||
	    ccache_rec_hdr_decode(buf, hsz, &h) ||
	    h.hcrc != crc(buf, hsz - 4) || !ccache_rec_key_eq(&h.key, k) ||
	    (uint64_t)st.st_size != hsz + h.len)
		goto out;
	*len = h.len;
	rc = 0;
out:
	close(fd);
	return rc;
}

/*
 * After an unclean shutdown: walk every chunk file. Files with a name that
 * is not a chunk's (or in the wrong directory) go. With rebuild (the index
 * was lost), a file whose header is sound is recorded again; otherwise a
 * file without a record is an orphan of a store cut short, and goes.
 * quiet: a new cache; say nothing unless files were found.
 */
static int scan(struct ccache *c, struct wtx *w, int rebuild, int quiet)
{
	unsigned long kept = 0, adopted = 0, removed = 0;

	for (unsigned i = 0; i < CCACHE_NDIRS; i++) {
		char dname[3];
		struct dirent *e;
		DIR *d;
		int fd;

		snprintf(dname, sizeof(dname), "%02x", i);
		fd = openat(c->dfd, dname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!(d = fdopendir(fd))) {
			close(fd);
			continue;
		}
		while ((e = readdir(d))) {
			struct ccache_key k;
			struct ccache_val v;
			uint32_t len = 0;
			int rc;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (ccache_rec_name_decode(e->d_name, strlen(e->d_name),
						   &k) || key_dir(&k) != i) {
				unlinkat(dirfd(d), e->d_name, 0);
				removed++;
				continue;
			}
			if (!rebuild) {
				if (!rec_get(c, w->txn, &k, &v)) {
					kept++;
					continue;
				}
			} else if (!adopt_check(dirfd(d), e->d_name, &k, &len)) {
				if ((rc = rec_put(c, w, &k, len))) {
					closedir(d);
					return rc;
				}
				adopted++;
				continue;
			}
			unlinkat(dirfd(d), e->d_name, 0);
			removed++;
		}
		closedir(d);
	}
	if (rebuild && (adopted || removed || !quiet))
		log_info("cache %s: index rebuilt from the chunk files: %lu "
			 "adopted, %lu removed", c->dir, adopted, removed);
	else if (!rebuild)
		log_info("cache %s: after an unclean shutdown: %lu chunks "
			 "kept, %lu orphan files removed", c->dir, kept,
			 removed);
	return 0;
}

/* Totals from the index, and every chunk record checked: a record the
 * decoders refuse, or without its lru record, is repaired or dropped. */
static int load(struct ccache *c, struct wtx *w)
{
	MDB_cursor *cur;
	MDB_val key, val;
	int mrc, op = MDB_FIRST;
	unsigned long dropped = 0;

	c->used = c->nchunks = 0;
	c->tick = 0;
	if ((mrc = mdb_cursor_open(w->txn, c->db_lru, &cur)))
		return lmdb_err(c, mrc, "cursor");
	if (!mdb_cursor_get(cur, &key, &val, MDB_LAST) &&
	    ccache_rec_tick_decode(key.mv_data, key.mv_size, &c->tick))
		c->tick = 0;
	mdb_cursor_close(cur);
	if ((mrc = mdb_cursor_open(w->txn, c->db_chunks, &cur)))
		return lmdb_err(c, mrc, "cursor");
	while (!(mrc = mdb_cursor_get(cur, &key, &val, op))) {
		struct ccache_key k, lk;
		struct ccache_val v;
		uint8_t tb[CCACHE_REC_TICK_SIZE];
		MDB_val tkey = { sizeof(tb), tb }, lval;

		op = MDB_NEXT;
		if (ccache_rec_key_decode(key.mv_data, key.mv_size, &k) ||
		    ccache_rec_val_decode(val.mv_data, val.mv_size, &v)) {
			if ((mrc = mdb_cursor_del(cur, 0)))
				break;
			dropped++;
			continue;
		}
		c->used += chunk_bytes(v.len);
		c->nchunks++;
		if (v.tick > c->tick)
			c->tick = v.tick;
		ccache_rec_tick_encode(v.tick, tb);
		if (mdb_get(w->txn, c->db_lru, &tkey, &lval) ||
		    ccache_rec_key_decode(lval.mv_data, lval.mv_size, &lk) ||
		    !ccache_rec_key_eq(&k, &lk)) {
			if ((mrc = mdb_put(w->txn, c->db_lru, &tkey, &key, 0)))
				break;
			dropped++;
		}
	}
	mdb_cursor_close(cur);
	if (dropped)
		log_warn("cache %s: %lu bad index records repaired or dropped",
			 c->dir, dropped);
	return mrc == MDB_NOTFOUND ? 0 : lmdb_err(c, mrc, "load");
}

/* With c->dfd open: the lock, the marker, the index, the recovery. */
static int open_locked(struct ccache *c)
{
	char now[37] = "", path[PATH_MAX + 32];
	enum shutdown how;
	struct wtx w;
	int fresh = 0, rebuild, damaged = 0, rc;

	c->lockfd = openat(c->dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->lockfd < 0)
		return -errno;
	if (flock(c->lockfd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	if ((mkdirat(c->dfd, "tmp", 0700) < 0 && errno != EEXIST) ||
	    (mkdirat(c->dfd, "index", 0700) < 0 && errno != EEXIST))
		return -errno;
	clear_dir(c, "tmp");
	boot_id(now);
	how = last_shutdown(c, now);
	rebuild = how == SHUT_MACHINE;
	if (rebuild)
		log_warn("cache %s: the machine went down with the cache open "
			 "(or its marker is damaged): rebuilding the index",
			 c->dir);
	if (rebuild || (damaged = env_open(c, &fresh) != 0)) {
		env_close(c);
		snprintf(path, sizeof(path), "%s/index/data.mdb", c->dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/index/lock.mdb", c->dir);
		unlink(path);
		if ((rc = env_open(c, &fresh)))
			return rc;
		rebuild = 1;
	}
	rebuild |= fresh;
	if ((rc = mark_dirty(c, now)))
		return rc;
	pthread_mutex_lock(&c->lock);
	if (!(rc = wtx_begin(c, &w))) {
		/* A rebuild starts from nothing: the files are the truth. */
		if (rebuild &&
		    ((rc = mdb_drop(w.txn, c->db_chunks, 0)) ||
		     (rc = mdb_drop(w.txn, c->db_lru, 0))))
			rc = lmdb_err(c, rc, "drop");
		if (!rc)
			rc = load(c, &w);
		if (!rc && (rebuild || how != SHUT_CLEAN))
			rc = scan(c, &w, rebuild,
				  how == SHUT_CLEAN && !damaged);
		if (!rc && rebuild)
			rc = put_format(c, &w);
		if (!rc)
			rc = evict(c, &w, 0);
		rc = wtx_end(c, &w, rc);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ccache_open(const char *dir, uint64_t limit, struct ccache **out)
{
	struct ccache *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->dfd = c->lockfd = -1;
	c->limit = limit;
	pthread_mutex_init(&c->lock, NULL);
	if (snprintf(c->dir, sizeof(c->dir), "%s/chunks", dir) >=
	    (int)sizeof(c->dir) - 96) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	if (mkdir(c->dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	c->dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dfd < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = open_locked(c)))
		goto fail;
	log_info("cache %s: %" PRIu64 " chunks, %" PRIu64 " of %" PRIu64
		 " bytes used", c->dir, c->nchunks, c->used, c->limit);
	*out = c;
	return 0;
fail:
	env_close(c);
	if (c->lockfd >= 0)
		close(c->lockfd);
	if (c->dfd >= 0)
		close(c->dfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return rc;
}

void ccache_close(struct ccache *c)
{
	struct ccache_stats s;
	int rc;

	if (!c)
		return;
	ccache_get_stats(c, &s);
	log_info("cache %s: closing: %" PRIu64 " hits (%" PRIu64 " bytes), %"
		 PRIu64 " misses, %" PRIu64 " bytes fetched, %" PRIu64
		 " chunks stored, %" PRIu64 " evicted, %" PRIu64 " discarded; %"
		 PRIu64 " chunks, %" PRIu64 " bytes", c->dir, s.hits,
		 s.hit_bytes, s.misses, s.fetched_bytes, s.stored, s.evicted,
		 s.discarded, s.chunks, s.used);
	rc = c->broken ? -EIO : lmdb_err(c, mdb_env_sync(c->env, 1), "sync");
	env_close(c);
	if (!rc) {
		unlinkat(c->dfd, "dirty", 0);
	} else {
		/* Leave a marker no open accepts: the next one rebuilds. */
		int fd = openat(c->dfd, "dirty", O_WRONLY | O_TRUNC | O_CLOEXEC);

		if (fd >= 0) {
			if (write(fd, "broken\n", 7) != 7)
				log_warn("cache %s: cannot mark the index "
					 "for a rebuild", c->dir);
			close(fd);
		}
	}
	close(c->lockfd);
	close(c->dfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- stats, options ------------------------------------------------------- */

void ccache_get_stats(struct ccache *c, struct ccache_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	s->used = c->used;
	s->chunks = c->nchunks;
	pthread_mutex_unlock(&c->lock);
	s->limit = c->limit;
	s->hits = GET(c->hits);
	s->misses = GET(c->misses);
	s->hit_bytes = GET(c->hit_bytes);
	s->fetched_bytes = GET(c->fetched);
	s->stored = GET(c->stored);
	s->stored_bytes = GET(c->stored_bytes);
	s->evicted = GET(c->evicted);
	s->discarded = GET(c->discarded);
	s->errors = GET(c->errors);
}

void ccache_print_stats(struct ccache *c, FILE *f)
{
	struct ccache_stats s;

	if (!c) {
		fprintf(f, "cache.enabled 0\n");
		return;
	}
	ccache_get_stats(c, &s);
	fprintf(f, "cache.enabled 1\n");
	fprintf(f, "cache.dir %s\n", c->dir);
	fprintf(f, "cache.chunk_size %u\n", CCACHE_CHUNK);
	fprintf(f, "cache.limit_bytes %" PRIu64 "\n", s.limit);
	fprintf(f, "cache.used_bytes %" PRIu64 "\n", s.used);
	fprintf(f, "cache.chunks %" PRIu64 "\n", s.chunks);
	fprintf(f, "cache.hits %" PRIu64 "\n", s.hits);
	fprintf(f, "cache.misses %" PRIu64 "\n", s.misses);
	fprintf(f, "cache.hit_bytes %" PRIu64 "\n", s.hit_bytes);
	fprintf(f, "cache.fetched_bytes %" PRIu64 "\n", s.fetched_bytes);
	fprintf(f, "cache.stored_chunks %" PRIu64 "\n", s.stored);
	fprintf(f, "cache.stored_bytes %" PRIu64 "\n", s.stored_bytes);
	fprintf(f, "cache.evictions %" PRIu64 "\n", s.evicted);
	fprintf(f, "cache.discarded %" PRIu64 "\n", s.discarded);
	fprintf(f, "cache.errors %" PRIu64 "\n", s.errors);
}

int ccache_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	uint64_t v = 0;
	const char *p = s;
	int shift = 0;

	if (!*p)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return -EINVAL;
	if (*p) {
		const char *u = strchr(units, *p | 0x20);

		if (!u || !*u || p[1])
			return -EINVAL;
		shift = 10 * (int)(u - units + 1);
	}
	if (shift && v > UINT64_MAX >> shift)
		return -EINVAL;
	*out = v << shift;
	return 0;
}

uint64_t ccache_default_limit(const char *dir)
{
	struct statvfs sv;
	uint64_t v;

	if (statvfs(dir, &sv) < 0)
		return 0;
	v = (uint64_t)sv.f_bavail * sv.f_frsize / 100 * CCACHE_DEFAULT_PERCENT;
	return v > CCACHE_DEFAULT_MAX ? CCACHE_DEFAULT_MAX : v;
}

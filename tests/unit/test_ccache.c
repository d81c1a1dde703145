/*
 * test_ccache.c - unit tests for the persistent chunk cache
 * (client/ccache.h), against real cache directories under a mkdtemp in
 * /tmp (removed at the end; its records' codec is test_ccache_rec.c):
 * --cache-size parsing, store and lookup (slices, short chunks, versions), LRU eviction
 * under the limit, chunks larger than the cache, damage found on lookup
 * (flipped data or header byte, truncated or missing file, only the blocks
 * read are checked), persistence across reopen, recovery after a process
 * crash (orphans and tmp files removed) and after a machine crash or a
 * deleted or truncated index (rebuilt from the chunk headers), ENOSPC
 * injected through the OS seam, the lock, forgetting a file, threads, the
 * checksum being gzip's CRC-32, and the statistics lines. Our own writes
 * (ccache_write) against a model of a file's versions: sequential 1 MiB
 * writes (one chunk file each, no read) and small appends hit at the last
 * version, partial writes, size changes, the orderings of writes and
 * fetches (shuffled, nested through the OS seam, in threads) never serve
 * a wrong byte, forget, eviction, the lineage across a reopen and lost in
 * a rebuild (exact versions only).
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <lmdb.h>

#include "../../client/ccache.h"
#include "../../client/ccache_rec.h"
#include "check.h"

#define MiB (1024u * 1024u)

static char tmpdir[64];
static int ndirs;

/* A fresh cache directory for one test. */
static const char *newdir(char *buf, size_t n)
{
	snprintf(buf, n, "%s/c%d", tmpdir, ndirs++);
	mkdir(buf, 0700);
	return buf;
}

/* Deterministic bytes of (seed, len). */
static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static struct ccache_key key(uint64_t vnode, uint64_t dv, uint32_t idx)
{
	struct ccache_key k = { { 7, vnode, 0xabcd0000u + (uint32_t)vnode },
				dv, idx };
	return k;
}

static uint64_t kseed(const struct ccache_key *k)
{
	return k->fid.vnode * 1000003u + k->dv * 1009u + k->idx;
}

/* Store chunk k filled from its seed. */
static int put(struct ccache *c, const struct ccache_key *k, uint32_t len)
{
	uint8_t *p = malloc(len);
	int rc;

	fill(p, len, kseed(k));
	rc = ccache_put(c, k, p, len);
	free(p);
	return rc;
}

/* 1 when [off, off + len) of chunk k (of total length tot) reads back
 * right, 0 on a miss, -1 on wrong bytes. */
static int get_ok(struct ccache *c, const struct ccache_key *k, uint32_t tot,
		  uint32_t off, uint32_t len)
{
	struct ccache_buf b;
	uint8_t *want = malloc(tot);
	uint32_t n = off >= tot ? 0 : (len > tot - off ? tot - off : len);
	int rc = ccache_get(c, k, off, len, &b), ok;

	if (rc) {
		free(want);
		return rc == -ENOENT ? 0 : -1;
	}
	fill(want, tot, kseed(k));
	ok = b.len == n && (n == 0 || !memcmp(b.p, want + off, n)) ? 1 : -1;
	ccache_buf_free(&b);
	free(want);
	return ok;
}

/* A chunk this long is a file of its own (longer than a small chunk). */
#define FILE_SZ (CCACHE_SMALL_MAX + 50000)

static void chunk_file(const char *dir, const struct ccache_key *k,
		       char *out, size_t n)
{
	char name[CCACHE_REC_NAME_LEN + 1];
	char d[300];
	struct dirent *e;
	DIR *dd;

	ccache_rec_name_encode(k, name);
	out[0] = 0;
	/* Its directory is the cache's business: search them. */
	for (int i = 0; i < 256; i++) {
		snprintf(d, sizeof(d), "%s/chunks/%02x", dir, i);
		if (!(dd = opendir(d)))
			continue;
		while ((e = readdir(dd)))
			if (!strcmp(e->d_name, name))
				snprintf(out, n, "%s/%s", d, name);
		closedir(dd);
	}
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	CHECK(fd >= 0);
	CHECK(pread(fd, &b, 1, off) == 1);
	b ^= 0x40;
	CHECK(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

static unsigned count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static struct ccache_stats stats(struct ccache *c)
{
	struct ccache_stats s;

	ccache_get_stats(c, &s);
	return s;
}

static void t_parse_size(void)
{
	uint64_t v = 1;

	CHECK_EQ(ccache_parse_size("0", &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(ccache_parse_size("4096", &v), 0);
	CHECK_EQ(v, 4096);
	CHECK_EQ(ccache_parse_size("100M", &v), 0);
	CHECK_EQ(v, 100ull << 20);
	CHECK_EQ(ccache_parse_size("2G", &v), 0);
	CHECK_EQ(v, 2ull << 30);
	CHECK_EQ(ccache_parse_size("4k", &v), 0);
	CHECK_EQ(v, 4096);
	CHECK_EQ(ccache_parse_size("1T", &v), 0);
	CHECK_EQ(v, 1ull << 40);
	CHECK_EQ(ccache_parse_size("", &v), -EINVAL);
	CHECK_EQ(ccache_parse_size("M", &v), -EINVAL);
	CHECK_EQ(ccache_parse_size("10X", &v), -EINVAL);
	CHECK_EQ(ccache_parse_size("10MB", &v), -EINVAL);
	CHECK_EQ(ccache_parse_size("-1", &v), -EINVAL);
	CHECK_EQ(ccache_parse_size("99999999999999999999", &v), -EINVAL);
	CHECK_EQ(ccache_parse_size("17179869184G", &v), -EINVAL);
}

/* ---- store and lookup ----------------------------------------------- */

static void t_store_get(void)
{
	char d[128];
	struct ccache *c;
	struct ccache_key a = key(2, 1, 0), b = key(2, 1, 1), z = key(3, 1, 0);
	struct ccache_stats s;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(put(c, &a, CCACHE_CHUNK), 0);
	CHECK_EQ(put(c, &b, 100000), 0); /* the file ends in chunk 1 */
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, 0, CCACHE_CHUNK), 1);
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, 5000, 70000), 1);
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, CCACHE_CHUNK - 1, 10), 1);
	CHECK_EQ(get_ok(c, &b, 100000, 99990, 100), 1);  /* 10 bytes */
	CHECK_EQ(get_ok(c, &b, 100000, 100000, 100), 1); /* 0 bytes */
	CHECK_EQ(get_ok(c, &b, 100000, 0, 0), 1);
	CHECK_EQ(get_ok(c, &z, CCACHE_CHUNK, 0, 10), 0);
	CHECK_EQ(ccache_put(c, &z, "x", 0), -EINVAL);
	s = stats(c);
	CHECK_EQ(s.chunks, 2);
	CHECK_EQ(s.used, ccache_rec_hdr_bytes(CCACHE_CHUNK) + CCACHE_CHUNK +
			 ccache_rec_hdr_bytes(100000) + 100000);
	CHECK_EQ(s.hits, 6);
	CHECK_EQ(s.misses, 1);
	CHECK_EQ(s.hit_bytes, CCACHE_CHUNK + 70000 + 1 + 10);
	CHECK_EQ(s.stored, 2);
	ccache_close(c);
}

/* A new version supersedes the old; an old one is not stored over a new. */
static void t_versions(void)
{
	char d[128];
	struct ccache *c;
	struct ccache_key v1 = key(4, 1, 0), v1b = key(4, 1, 1),
			  v2 = key(4, 2, 0), other = key(5, 1, 0);

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(put(c, &v1, 5000), 0);
	CHECK_EQ(put(c, &v1b, 5000), 0);
	CHECK_EQ(put(c, &other, 5000), 0);
	CHECK_EQ(put(c, &v1, 5000), 0); /* the same again: replaced */
	CHECK_EQ(stats(c).chunks, 3);
	CHECK_EQ(get_ok(c, &v1, 5000, 0, 5000), 1);
	CHECK_EQ(put(c, &v2, 6000), 0);
	CHECK_EQ(get_ok(c, &v1, 5000, 0, 5000), 0);
	CHECK_EQ(get_ok(c, &v1b, 5000, 0, 5000), 0);
	CHECK_EQ(get_ok(c, &v2, 6000, 0, 6000), 1);
	CHECK_EQ(get_ok(c, &other, 5000, 0, 5000), 1);
	CHECK_EQ(put(c, &v1, 5000), -ESTALE);
	CHECK_EQ(get_ok(c, &v1, 5000, 0, 5000), 0);
	CHECK_EQ(stats(c).chunks, 2);
	CHECK_EQ(stats(c).discarded, 0); /* superseded is not damaged */
	ccache_forget_fid(c, &v2.fid);
	CHECK_EQ(get_ok(c, &v2, 6000, 0, 6000), 0);
	CHECK_EQ(get_ok(c, &other, 5000, 0, 5000), 1);
	CHECK_EQ(stats(c).chunks, 1);
	ccache_close(c);
	snprintf(d + strlen(d), sizeof(d) - strlen(d), "/chunks/tmp");
	CHECK_EQ(count_files(d), 0);
}

/* Hits are written to the index in batches (CCACHE_TOUCH_BATCH) and at
 * close, each at its place in the order when it happened: small chunks,
 * many hits, then an eviction and a reopen that must both agree. */
static void t_touch_batches(void)
{
	enum { N = 150 };
	char d[128];
	struct ccache *c;
	uint64_t one = ccache_rec_hdr_bytes(4000) + 4000;
	struct ccache_key k[N + 40];

	for (int i = 0; i < N + 40; i++)
		k[i] = key(500 + (uint64_t)i, 1, 0);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), N * one + 10, &c), 0);
	if (!c)
		return;
	for (int i = 0; i < N; i++)
		CHECK_EQ(put(c, &k[i], 4000), 0);
	/* The older half is read, newest-read last: more than two
	 * batches' worth, so some are written and some wait. */
	for (int i = 0; i < N / 2; i++)
		CHECK_EQ(get_ok(c, &k[i], 4000, 0, 4000), 1);
	ccache_close(c);
	CHECK_EQ(ccache_open(d, N * one + 10, &c), 0);
	if (!c)
		return;
	/* 40 new chunks push out the 40 least recently used: the unread
	 * ones stored first, never a chunk that was read. */
	for (int i = N; i < N + 40; i++)
		CHECK_EQ(put(c, &k[i], 4000), 0);
	for (int i = 0; i < N / 2; i++)
		CHECK_EQ(get_ok(c, &k[i], 4000, 0, 10), 1);
	for (int i = N / 2; i < N / 2 + 40; i++)
		CHECK_EQ(get_ok(c, &k[i], 4000, 0, 10), 0);
	for (int i = N / 2 + 40; i < N + 40; i++)
		CHECK_EQ(get_ok(c, &k[i], 4000, 0, 10), 1);
	ccache_close(c);
}

static void t_evict_lru(void)
{
	char d[128];
	struct ccache *c;
	uint64_t one = ccache_rec_hdr_bytes(CCACHE_CHUNK) + CCACHE_CHUNK;
	struct ccache_key k[6];
	struct ccache_stats s;

	for (int i = 0; i < 6; i++)
		k[i] = key(10 + (uint64_t)i, 1, 0);
	/* Room for three whole chunks. */
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 3 * one + 100, &c), 0);
	if (!c)
		return;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(put(c, &k[i], CCACHE_CHUNK), 0);
	CHECK_EQ(get_ok(c, &k[0], CCACHE_CHUNK, 0, 100), 1); /* k0 used */
	CHECK_EQ(put(c, &k[3], CCACHE_CHUNK), 0);
	CHECK_EQ(get_ok(c, &k[1], CCACHE_CHUNK, 0, 100), 0); /* LRU went */
	CHECK_EQ(get_ok(c, &k[0], CCACHE_CHUNK, 0, 100), 1);
	CHECK_EQ(get_ok(c, &k[2], CCACHE_CHUNK, 0, 100), 1);
	CHECK_EQ(get_ok(c, &k[3], CCACHE_CHUNK, 0, 100), 1);
	for (int i = 4; i < 6; i++)
		CHECK_EQ(put(c, &k[i], CCACHE_CHUNK), 0);
	s = stats(c);
	CHECK_EQ(s.chunks, 3);
	CHECK(s.used <= s.limit);
	CHECK_EQ(s.evicted, 3);
	CHECK_EQ(get_ok(c, &k[5], CCACHE_CHUNK, 0, CCACHE_CHUNK), 1);
	ccache_close(c);
	/* A smaller limit at the next open evicts at once. */
	CHECK_EQ(ccache_open(d, one + 100, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).chunks, 1);
	CHECK_EQ(get_ok(c, &k[5], CCACHE_CHUNK, 0, CCACHE_CHUNK), 1);
	/* Chunks larger than the whole cache are refused, not stored. */
	ccache_close(c);
	CHECK_EQ(ccache_open(d, 512 * 1024, &c), 0);
	if (!c)
		return;
	CHECK_EQ(put(c, &k[0], CCACHE_CHUNK), -EFBIG);
	CHECK_EQ(put(c, &k[1], 4096), 0);
	CHECK_EQ(stats(c).chunks, 1);
	ccache_close(c);
}

/* ---- damage ------------------------------------------------------------ */

static void t_damage(void)
{
	char d[128], path[512];
	struct ccache *c;
	struct ccache_key a = key(20, 3, 0), b = key(21, 3, 0), e = key(22, 3, 0),
			  f = key(23, 3, 0);
	size_t hsz = ccache_rec_hdr_bytes(CCACHE_CHUNK);

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(put(c, &a, CCACHE_CHUNK), 0);
	CHECK_EQ(put(c, &b, CCACHE_CHUNK), 0);
	CHECK_EQ(put(c, &e, CCACHE_CHUNK), 0);
	CHECK_EQ(put(c, &f, CCACHE_CHUNK), 0);
	ccache_close(c);

	/* a: a flipped byte in block 5 of the data */
	chunk_file(d, &a, path, sizeof(path));
	flip_byte(path, (off_t)(hsz + 5 * CCACHE_BLOCK + 123));
	/* b: truncated */
	chunk_file(d, &b, path, sizeof(path));
	CHECK_EQ(truncate(path, (off_t)(hsz + 1000)), 0);
	/* e: a flipped byte in the header */
	chunk_file(d, &e, path, sizeof(path));
	flip_byte(path, 20);
	/* f: gone */
	chunk_file(d, &f, path, sizeof(path));
	CHECK_EQ(unlink(path), 0);

	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	/* Only the blocks read are checked: block 0 of a is fine... */
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, 0, CCACHE_BLOCK), 1);
	/* ...block 5 is not, and the whole chunk goes. */
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, 5 * CCACHE_BLOCK, 10), 0);
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, 0, CCACHE_BLOCK), 0);
	CHECK_EQ(get_ok(c, &b, CCACHE_CHUNK, 0, 100), 0);
	CHECK_EQ(get_ok(c, &e, CCACHE_CHUNK, 0, 100), 0);
	CHECK_EQ(get_ok(c, &f, CCACHE_CHUNK, 0, 100), 0);
	CHECK_EQ(stats(c).discarded, 4);
	CHECK_EQ(stats(c).chunks, 0);
	CHECK_EQ(stats(c).used, 0);
	chunk_file(d, &a, path, sizeof(path));
	CHECK_EQ(path[0], 0); /* the damaged file was deleted */
	/* and can be stored again */
	CHECK_EQ(put(c, &a, CCACHE_CHUNK), 0);
	CHECK_EQ(get_ok(c, &a, CCACHE_CHUNK, 0, CCACHE_CHUNK), 1);
	ccache_close(c);
}

/* The checksums on disk are CRC-32 as gzip's (check value of "123456789":
 * 0xcbf43926), so another tool can verify a chunk. A small one is in the
 * index (db "small"), with the bytes a chunk file would hold; no file. */
static void t_crc_format(void)
{
	char d[128], path[512];
	struct ccache *c;
	struct ccache_key k = key(90, 1, 0);
	uint8_t kb[CCACHE_REC_KEY_SIZE];
	struct ccache_hdr h;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val val;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(ccache_put(c, &k, "123456789", 9), 0);
	ccache_close(c);
	chunk_file(d, &k, path, sizeof(path));
	CHECK_EQ(path[0], 0);               /* no file anywhere */
	snprintf(path, sizeof(path), "%s/chunks/index", d);
	CHECK_EQ(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 5);
	CHECK_EQ(mdb_env_open(env, path, MDB_RDONLY, 0600), 0);
	CHECK_EQ(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	CHECK_EQ(mdb_dbi_open(txn, "small", 0, &dbi), 0);
	ccache_rec_key_encode(&k, kb);
	CHECK_EQ(mdb_get(txn, dbi, &(MDB_val){ sizeof(kb), kb }, &val), 0);
	CHECK_EQ(val.mv_size, ccache_rec_hdr_bytes(9) + 9);
	if (val.mv_size == ccache_rec_hdr_bytes(9) + 9) {
		CHECK_EQ(ccache_rec_hdr_decode(val.mv_data,
					       ccache_rec_hdr_bytes(9), &h), 0);
		CHECK_EQ(h.crc[0], 0xcbf43926u);
		CHECK_EQ(memcmp((const uint8_t *)val.mv_data +
				ccache_rec_hdr_bytes(9), "123456789", 9), 0);
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

/* A small chunk has no file; one stored over a file chunk of the same
 * key removes that file, and a file chunk over a small one removes its
 * record: whichever was stored last is read back, nothing is left over,
 * and a small chunk survives a clean reopen and the LRU touches. */
static void t_small(void)
{
	char d[128], path[512];
	struct ccache *c;
	struct ccache_key k = key(95, 1, 0), o = key(96, 1, 0);
	const uint32_t big = CCACHE_SMALL_MAX + 1;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(put(c, &k, CCACHE_SMALL_MAX), 0);
	chunk_file(d, &k, path, sizeof(path));
	CHECK_EQ(path[0], 0);               /* no file anywhere */
	CHECK_EQ(get_ok(c, &k, CCACHE_SMALL_MAX, 100, 5000), 1);
	CHECK_EQ(get_ok(c, &k, CCACHE_SMALL_MAX, 0, CCACHE_SMALL_MAX), 1);
	/* Within a later checksum block, and across two. */
	CHECK_EQ(get_ok(c, &k, CCACHE_SMALL_MAX, 2 * CCACHE_BLOCK + 7, 100), 1);
	CHECK_EQ(get_ok(c, &k, CCACHE_SMALL_MAX, CCACHE_BLOCK - 50, 100), 1);
	CHECK_EQ(get_ok(c, &k, CCACHE_SMALL_MAX, CCACHE_SMALL_MAX - 10, 100),
		 1);
	CHECK_EQ(put(c, &k, big), 0);
	chunk_file(d, &k, path, sizeof(path));
	CHECK(path[0] != 0);
	CHECK_EQ(access(path, F_OK), 0);
	CHECK_EQ(get_ok(c, &k, big, 0, big), 1);
	CHECK_EQ(put(c, &k, 300), 0);
	CHECK(access(path, F_OK) != 0);
	CHECK_EQ(get_ok(c, &k, 300, 0, 300), 1);
	CHECK_EQ(get_ok(c, &k, 300, 299, 10), 1);
	CHECK_EQ(put(c, &o, 4000), 0);
	for (int i = 0; i < 20; i++)        /* LRU touches keep the bytes */
		CHECK_EQ(get_ok(c, &o, 4000, 0, 4000), 1);
	CHECK_EQ(stats(c).chunks, 2);
	ccache_close(c);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(get_ok(c, &k, 300, 0, 300), 1);
	CHECK_EQ(get_ok(c, &o, 4000, 0, 4000), 1);
	ccache_forget_fid(c, &k.fid);
	CHECK_EQ(get_ok(c, &k, 300, 0, 300), 0);
	CHECK_EQ(get_ok(c, &o, 4000, 0, 4000), 1);
	CHECK_EQ(stats(c).chunks, 1);
	CHECK_EQ(stats(c).discarded, 0);
	ccache_close(c);
}

/* ---- persistence and recovery ------------------------------------------ */

static void t_reopen(void)
{
	char d[128];
	struct ccache *c;
	struct ccache_key k[3] = { key(30, 1, 0), key(30, 1, 1), key(31, 9, 4) };

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(put(c, &k[i], 70000 + (uint32_t)i), 0);
	ccache_close(c);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).chunks, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(get_ok(c, &k[i], 70000 + (uint32_t)i, 0, MiB), 1);
	ccache_close(c);
}

static void t_lock(void)
{
	char d[128];
	struct ccache *c, *c2 = NULL;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c2), -EBUSY);
	ccache_close(c);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c2), 0);
	ccache_close(c2);
}

/* A process that stored chunks and died without ccache_close, leaving an
 * orphan (a chunk file whose record never committed) and a tmp file. */
static void crash_child(const char *d, const struct ccache_key *k, int n)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct ccache *c;

		if (ccache_open(d, 64 * MiB, &c))
			_exit(1);
		for (int i = 0; i < n; i++)
			if (put(c, &k[i], FILE_SZ))
				_exit(1);
		_exit(0); /* no ccache_close */
	}
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void t_process_crash(void)
{
	char d[128], path[512], orphan[512], tmp[512], name[CCACHE_REC_NAME_LEN + 1];
	struct ccache *c;
	struct ccache_key k[3] = { key(40, 1, 0), key(41, 1, 0), key(42, 1, 0) };
	struct ccache_key o = key(43, 1, 0);
	char buf[2048];
	int fd;

	newdir(d, sizeof(d));
	crash_child(d, k, 3);
	snprintf(path, sizeof(path), "%s/chunks/dirty", d);
	CHECK(access(path, F_OK) == 0);
	/* An orphan: a copy of k[0]'s file under o's name, in a directory
	 * of its own (any of them will do for the scan). */
	chunk_file(d, &k[0], path, sizeof(path));
	ccache_rec_name_encode(&o, name);
	snprintf(orphan, sizeof(orphan), "%s", path);
	*strrchr(orphan, '/') = 0;
	snprintf(buf, sizeof(buf), "cp '%s' '%s/%s'", path, orphan, name);
	CHECK_EQ(system(buf), 0);
	snprintf(tmp, sizeof(tmp), "%s/chunks/tmp/123.4", d);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "half", 4) == 4);
	close(fd);

	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).chunks, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(get_ok(c, &k[i], FILE_SZ, 0, FILE_SZ), 1);
	CHECK_EQ(get_ok(c, &o, FILE_SZ, 0, 10), 0);
	CHECK(access(tmp, F_OK) != 0);
	chunk_file(d, &o, path, sizeof(path));
	CHECK_EQ(path[0], 0); /* the orphan went */
	ccache_close(c);
	snprintf(path, sizeof(path), "%s/chunks/dirty", d);
	CHECK(access(path, F_OK) != 0);
}

static void write_marker(const char *d, const char *body)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/chunks/dirty", d);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(body, f);
		fclose(f);
	}
}

/* The machine went down (another boot id in the marker), the index was
 * deleted, or it was truncated: rebuilt from the chunk headers, and a
 * chunk file with a bad header is not adopted. */
static void t_rebuild(void)
{
	char d[128], path[512];
	struct ccache *c;
	struct ccache_key k[4] = { key(50, 1, 0), key(50, 1, 1), key(51, 2, 0),
				   key(52, 2, 0) };
	size_t hsz = ccache_rec_hdr_bytes(FILE_SZ);

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(put(c, &k[i], FILE_SZ), 0);
	ccache_close(c);

	/* machine crash */
	write_marker(d, "00000000-0000-0000-0000-000000000000\n");
	chunk_file(d, &k[3], path, sizeof(path));
	flip_byte(path, 30); /* header: not adopted */
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).chunks, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(get_ok(c, &k[i], FILE_SZ, 0, FILE_SZ), 1);
	CHECK_EQ(get_ok(c, &k[3], FILE_SZ, 0, FILE_SZ), 0);
	chunk_file(d, &k[3], path, sizeof(path));
	CHECK_EQ(path[0], 0);
	ccache_close(c);

	/* deleted index; a data byte flipped meanwhile is found on read */
	snprintf(path, sizeof(path), "%s/chunks/index/data.mdb", d);
	CHECK_EQ(unlink(path), 0);
	chunk_file(d, &k[2], path, sizeof(path));
	flip_byte(path, (off_t)hsz + 7);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).chunks, 3);
	CHECK_EQ(get_ok(c, &k[0], FILE_SZ, 0, FILE_SZ), 1);
	CHECK_EQ(get_ok(c, &k[2], FILE_SZ, 0, FILE_SZ), 0);
	ccache_close(c);

	/* truncated index */
	snprintf(path, sizeof(path), "%s/chunks/index/data.mdb", d);
	CHECK_EQ(truncate(path, 4096 * 2 + 100), 0);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(get_ok(c, &k[0], FILE_SZ, 0, FILE_SZ), 1);
	CHECK_EQ(get_ok(c, &k[1], FILE_SZ, 0, FILE_SZ), 1);
	ccache_close(c);

	/* garbage index */
	snprintf(path, sizeof(path), "%s/chunks/index/data.mdb", d);
	{
		FILE *f = fopen(path, "w");

		CHECK(f != NULL);
		if (f) {
			for (int i = 0; i < 3000; i++)
				fputs("not an lmdb file ", f);
			fclose(f);
		}
	}
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).chunks, 2);
	CHECK_EQ(get_ok(c, &k[1], FILE_SZ, 0, FILE_SZ), 1);
	ccache_close(c);
}

/* ---- OS seam -------------------------------------------------------------- */

static int enospc_after; /* pwrite calls that still succeed */

static ssize_t pwrite_enospc(int fd, const void *buf, size_t n, off_t off)
{
	if (enospc_after-- > 0)
		return pwrite(fd, buf, n, off);
	errno = ENOSPC;
	return -1;
}

static ssize_t pwrite_short(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n > 1000 ? 1000 : n, off);
}

static int rename_eio(int a, const char *p, int b, const char *q)
{
	errno = EIO;
	return -1;
}

static void t_seam(void)
{
	char d[128], tmp[160];
	struct ccache *c;
	struct ccache_key a = key(60, 1, 0), b = key(61, 1, 0);

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	snprintf(tmp, sizeof(tmp), "%s/chunks/tmp", d);
	for (int after = 0; after < 2; after++) {
		enospc_after = after; /* header fails / data fails */
		ccache_os.pwrite = pwrite_enospc;
		CHECK_EQ(put(c, &a, FILE_SZ), -ENOSPC);
		ccache_os_reset();
	}
	ccache_os.renameat = rename_eio;
	CHECK_EQ(put(c, &a, FILE_SZ), -EIO);
	ccache_os_reset();
	CHECK_EQ(stats(c).errors, 3);
	CHECK_EQ(stats(c).chunks, 0);
	CHECK_EQ(count_files(tmp), 0);
	CHECK_EQ(get_ok(c, &a, FILE_SZ, 0, 10), 0);
	/* short writes are finished, not failed */
	ccache_os.pwrite = pwrite_short;
	CHECK_EQ(put(c, &b, FILE_SZ), 0);
	ccache_os_reset();
	CHECK_EQ(get_ok(c, &b, FILE_SZ, 0, FILE_SZ), 1);
	ccache_close(c);
}

/* ---- threads ---------------------------------------------------------------- */

struct thr {
	struct ccache *c;
	int id, bad;
};

/* Stores and reads a small set of keys with a limit that forces
 * eviction: every hit must return the right bytes. */
static void *thr_main(void *arg)
{
	struct thr *t = arg;
	uint64_t x = (uint64_t)t->id * 7919 + 1;

	for (int i = 0; i < 300; i++) {
		struct ccache_key k;
		uint32_t len;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		k = key(70 + (x >> 60) % 6, 1 + (x >> 50) % 2, (x >> 40) % 3);
		len = 4096 + (uint32_t)(kseed(&k) % 60000);
		if ((x >> 20) % 3 == 0) {
			int rc = put(t->c, &k, len);

			if (rc && rc != -ESTALE)
				t->bad++;
		} else if (get_ok(t->c, &k, len, (uint32_t)(x >> 8) % len,
				  20000) < 0) {
			t->bad++;
		}
	}
	return NULL;
}

static void t_threads(void)
{
	char d[128];
	struct ccache *c;
	struct thr t[4];
	pthread_t th[4];
	struct ccache_stats s;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 300 * 1024, &c), 0);
	if (!c)
		return;
	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){ c, i, 0 };
		CHECK_EQ(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(t[i].bad, 0);
	}
	s = stats(c);
	CHECK(s.used <= s.limit);
	CHECK(s.hits > 0);
	CHECK_EQ(s.discarded, 0);
	CHECK_EQ(s.errors, 0);
	ccache_close(c);
	/* and the totals agree with what the index holds after reopening */
	CHECK_EQ(ccache_open(d, 300 * 1024, &c), 0);
	if (!c)
		return;
	CHECK_EQ(stats(c).used, s.used);
	CHECK_EQ(stats(c).chunks, s.chunks);
	ccache_close(c);
}

/* ---- our own writes ------------------------------------------------------- */

/*
 * A file's versions as the server has them: version v (1..n) is sz[v]
 * bytes d[v]; write v (len[v] bytes at off[v]) made version v + 1. Its
 * data versions are mdv(v).
 */
#define NV 24
struct model {
	struct cairn_fid fid;
	int n;
	uint64_t sz[NV + 2], off[NV + 2];
	uint32_t len[NV + 2];
	uint8_t *d[NV + 2];
};

static uint64_t mdv(int v)
{
	return 1000 + (uint64_t)v;
}

static void model_init(struct model *m, uint64_t vnode, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->fid = key(vnode, 0, 0).fid;
	m->n = 1;
	m->sz[1] = size;
	m->d[1] = malloc(size + 1);
	fill(m->d[1], size, vnode);
}

/* Version n + 1: len new bytes at off over version n. */
static void model_write(struct model *m, uint64_t off, uint32_t len)
{
	int v = m->n;
	uint64_t sz = off + len > m->sz[v] ? off + len : m->sz[v];

	if (v > NV)
		abort(); /* a test wants more versions than NV */

	m->d[v + 1] = calloc(1, sz + 1);
	memcpy(m->d[v + 1], m->d[v], m->sz[v]);
	fill(m->d[v + 1] + off, len, m->fid.vnode * 7919 + (uint64_t)v);
	m->off[v] = off;
	m->len[v] = len;
	m->sz[v + 1] = sz;
	m->n++;
}

static void model_free(struct model *m)
{
	for (int v = 1; v <= m->n; v++)
		free(m->d[v]);
}

/* ccache_write of write v, as the client reports it once WRITE returns. */
static int mwrite(struct ccache *c, const struct model *m, int v)
{
	return ccache_write(c, &m->fid, mdv(v), mdv(v + 1), m->sz[v],
			    m->sz[v + 1], m->off[v], m->d[v + 1] + m->off[v],
			    m->len[v]);
}

static uint32_t mlen(const struct model *m, int v, uint32_t idx)
{
	uint64_t base = (uint64_t)idx * MiB;

	return base >= m->sz[v] ? 0 : m->sz[v] - base > MiB
		? MiB : (uint32_t)(m->sz[v] - base);
}

/* ccache_put of chunk idx as a READ at version v brings it. */
static int mput(struct ccache *c, const struct model *m, int v, uint32_t idx)
{
	struct ccache_key k = { m->fid, mdv(v), idx };

	return ccache_put(c, &k, m->d[v] + (uint64_t)idx * MiB,
			  mlen(m, v, idx));
}

/* Chunk idx at version v: 1 a hit with the right bytes, 0 a miss, -1
 * wrong bytes. */
static int mget(struct ccache *c, const struct model *m, int v, uint32_t idx)
{
	struct ccache_key k = { m->fid, mdv(v), idx };
	struct ccache_buf b;
	uint32_t want = mlen(m, v, idx);
	int ok;

	if (ccache_get(c, &k, 0, CCACHE_CHUNK, &b))
		return 0;
	ok = b.len == want &&
	     !memcmp(b.p, m->d[v] + (uint64_t)idx * MiB, want);
	ccache_buf_free(&b);
	return ok ? 1 : -1;
}

/* Every chunk of every version: the hits, or -1 if any is wrong. */
static int mcheck(struct ccache *c, const struct model *m)
{
	int hits = 0, r;

	for (int v = 1; v <= m->n; v++)
		for (uint32_t i = 0; i <= m->sz[m->n] / MiB + 1; i++) {
			if ((r = mget(c, m, v, i)) < 0) {
				fprintf(stderr, "  wrong bytes: version %d "
					"chunk %u\n", v, i);
				return -1;
			}
			hits += r;
		}
	return hits;
}

/* The OS seam, counting chunk files created and chunk reads; and a hook
 * run once at the next creation (after ccache_write looked at the index,
 * before it commits): how the tests put a call in between. */
static int n_creat, n_pread;
static void (*hook)(void);

static int openat_count(int dfd, const char *path, int flags, mode_t mode)
{
	if (flags & O_CREAT) {
		void (*h)(void) = hook;

		n_creat++;
		hook = NULL;
		if (h)
			h();
	}
	return openat(dfd, path, flags | O_CLOEXEC, mode);
}

static ssize_t pread_count(int fd, void *buf, size_t n, off_t off)
{
	n_pread++;
	return pread(fd, buf, n, off);
}

static void seam_count(void)
{
	n_creat = n_pread = 0;
	ccache_os.openat = openat_count;
	ccache_os.pread = pread_count;
}

/* A new file written 1 MiB at a time, as cp or dd do: each write costs
 * one chunk file (the last, 1000 bytes, none: a small chunk lives in the
 * index) and no read, and the last version hits everywhere. */
static void t_write_sequential(void)
{
	char d[128];
	struct ccache *c;
	struct model m;
	struct ccache_stats s;

	model_init(&m, 100, 0);
	for (int i = 0; i < 6; i++)
		model_write(&m, (uint64_t)i * MiB, MiB);
	model_write(&m, 6 * (uint64_t)MiB, 1000);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	seam_count();
	for (int v = 1; v < m.n; v++)
		CHECK_EQ(mwrite(c, &m, v), 0);
	CHECK_EQ(n_creat, 6);
	CHECK_EQ(n_pread, 0);
	ccache_os_reset();
	for (uint32_t i = 0; i < 7; i++)
		CHECK_EQ(mget(c, &m, m.n, i), 1);
	/* chunk 0 is of version 2: an exact hit there, a miss at 3 */
	CHECK_EQ(mget(c, &m, 2, 0), 1);
	CHECK_EQ(mget(c, &m, 3, 0), 0);
	CHECK_EQ(mcheck(c, &m), 7 + 6);
	s = stats(c);
	CHECK_EQ(s.written, 7);
	CHECK_EQ(s.written_bytes, 6 * MiB + 1000);
	CHECK_EQ(s.chunks, 7);
	CHECK_EQ(s.stored, 0);
	CHECK_EQ(s.errors, 0);
	/* the lineage survives a remount */
	ccache_close(c);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (c) {
		CHECK_EQ(mcheck(c, &m), 7 + 6);
		ccache_close(c);
	}
	model_free(&m);
}

/* Small appends patch the cached chunk; one crossing into the next chunk
 * patches the first and writes the second whole. */
static void t_write_appends(void)
{
	char d[128];
	struct ccache *c;
	struct model m;

	model_init(&m, 101, 0);
	model_write(&m, 0, 10000);
	for (int i = 0; i < 16; i++)
		model_write(&m, 10000 + (uint64_t)i * 6000, 6000);
	model_write(&m, 106000, MiB);
	for (int i = 0; i < 3; i++)
		model_write(&m, m.sz[m.n], 4096);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int v = 1; v < m.n; v++) {
		CHECK_EQ(mwrite(c, &m, v), 0);
		for (uint32_t i = 0; i < 2; i++)
			CHECK_EQ(mget(c, &m, v + 1, i), mlen(&m, v + 1, i) > 0);
	}
	CHECK_EQ(stats(c).chunks, 2);
	CHECK_EQ(stats(c).errors, 0);
	ccache_close(c);
	model_free(&m);
}

/* Partial writes: into a chunk not cached (it stays a miss, costs no
 * chunk file), into a cached one within the patch bound (patched) and
 * beyond it (dropped); the chunks not written stay valid. */
static void t_write_partial(void)
{
	char d[128];
	struct ccache *c;
	struct model m;

	model_init(&m, 102, 3 * MiB);
	model_write(&m, MiB + 10, 100);         /* chunk 1, not cached */
	model_write(&m, 2 * MiB + 4096, 4096);  /* chunk 2: 1020 KiB kept */
	model_write(&m, 0, 100 * 1024);         /* chunk 0: 924 KiB kept */
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(mput(c, &m, 1, 0), 0);
	CHECK_EQ(mput(c, &m, 1, 2), 0);
	seam_count();
	CHECK_EQ(mwrite(c, &m, 1), 0);
	CHECK_EQ(n_creat, 0);
	ccache_os_reset();
	CHECK_EQ(mget(c, &m, 2, 0), 1);
	CHECK_EQ(mget(c, &m, 2, 1), 0);
	CHECK_EQ(mget(c, &m, 2, 2), 1);
	CHECK_EQ(mwrite(c, &m, 2), 0);
	CHECK_EQ(mget(c, &m, 3, 0), 1);
	CHECK_EQ(mget(c, &m, 3, 2), 0);
	CHECK_EQ(mwrite(c, &m, 3), 0);
	CHECK_EQ(mget(c, &m, 4, 0), 1);
	CHECK_EQ(stats(c).written, 1);
	CHECK(mcheck(c, &m) >= 0);
	/* a file with nothing cached: a write in part stores nothing */
	{
		struct model e;

		model_init(&e, 103, 2 * MiB);
		model_write(&e, 5, 10);
		CHECK_EQ(mwrite(c, &e, 1), 0);
		CHECK_EQ(mcheck(c, &e), 0);
		CHECK_EQ(mput(c, &e, 1, 1), 0); /* no lineage: accepted */
		model_free(&e);
	}
	ccache_close(c);
	model_free(&m);
}

/* A write that changes the size: the chunk that held the old end is
 * rebuilt with zeros after its bytes, the chunks between it and the write
 * are zeros, the written chunk is zeros and the write; past a gap of more
 * than 4 chunks (a sparse file) the gap is not cached. */
static void t_write_size(void)
{
	char d[128];
	struct ccache *c;
	struct model m;

	model_init(&m, 104, MiB + MiB / 2);
	model_write(&m, 3 * (uint64_t)MiB + 5, 10);
	model_write(&m, m.sz[2], 100);
	model_write(&m, 3 * (uint64_t)MiB + 20, 50); /* same size */
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(mput(c, &m, 1, 0), 0);
	CHECK_EQ(mput(c, &m, 1, 1), 0);
	CHECK_EQ(mwrite(c, &m, 1), 0);
	CHECK_EQ(mget(c, &m, 2, 0), 1);
	CHECK_EQ(mget(c, &m, 2, 1), 1); /* its bytes, then zeros */
	CHECK_EQ(mget(c, &m, 2, 2), 1); /* in the gap: zeros */
	CHECK_EQ(mget(c, &m, 2, 3), 1); /* 5 zeros and the write */
	CHECK_EQ(mwrite(c, &m, 2), 0);
	CHECK_EQ(mget(c, &m, 3, 3), 1);
	CHECK_EQ(mget(c, &m, 3, 0), 1);
	CHECK_EQ(mwrite(c, &m, 3), 0);
	CHECK_EQ(mget(c, &m, 4, 0), 1);
	CHECK_EQ(mget(c, &m, 4, 1), 1);
	CHECK_EQ(mget(c, &m, 4, 2), 1);
	CHECK_EQ(mget(c, &m, 4, 3), 1);
	CHECK_EQ(stats(c).chunks, 4);
	CHECK(mcheck(c, &m) >= 0);
	/* a sparse file: 1 MiB + 10 bytes, then a write 6 chunks on */
	{
		struct model e;

		model_init(&e, 105, MiB + 10);
		model_write(&e, 8 * (uint64_t)MiB, 100);
		CHECK_EQ(mput(c, &e, 1, 0), 0);
		CHECK_EQ(mput(c, &e, 1, 1), 0);
		CHECK_EQ(mwrite(c, &e, 1), 0);
		CHECK_EQ(mget(c, &e, 2, 0), 1);
		for (uint32_t i = 1; i < 8; i++)
			CHECK_EQ(mget(c, &e, 2, i), 0);
		CHECK_EQ(mget(c, &e, 2, 8), 1);
		CHECK(mcheck(c, &e) >= 0);
		model_free(&e);
	}
	/* what the caller vouches for is checked */
	CHECK_EQ(ccache_write(c, &m.fid, mdv(4), mdv(6), m.sz[4], m.sz[4], 0,
			      "x", 1), -EINVAL);
	CHECK_EQ(ccache_write(c, &m.fid, mdv(4), mdv(5), m.sz[4], 10, 9,
			      "xy", 2), -EINVAL);
	CHECK_EQ(mcheck(c, &m), 0); /* and a failure drops the file */
	CHECK_EQ(stats(c).errors, 2);
	CHECK_EQ(ccache_write(NULL, &m.fid, 1, 2, 0, 1, 0, "x", 1), 0);
	ccache_close(c);
	model_free(&m);
}

/*
 * The kernel's write-back sends a file's pages mostly in order, not
 * always: here 1 MiB writes 32 KiB past each chunk boundary, and the one
 * for [2 MiB + 32 KiB, 3 MiB + 32 KiB) arrives after the two beyond it.
 * Every chunk of the result is cached all the same: a write's bytes in
 * the next chunk are few, but not few beside the write (the patch bound
 * is the write's), and the chunks the late write lands in were kept as
 * zeros by the write that skipped them.
 */
static void t_write_out_of_order(void)
{
	uint64_t offs[] = { 0, 32768, MiB + 32768, 3 * MiB + 32768,
			    4 * MiB + 32768, 2 * MiB + 32768 };
	char d[128];
	struct ccache *c;
	struct model m;

	model_init(&m, 106, 0);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		model_write(&m, offs[i], i ? MiB : 32768);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int v = 1; v < m.n; v++)
		CHECK_EQ(mwrite(c, &m, v), 0);
	for (uint32_t i = 0; i < 6; i++)
		CHECK_EQ(mget(c, &m, m.n, i), 1);
	CHECK_EQ(stats(c).errors, 0);
	CHECK(mcheck(c, &m) >= 0);
	ccache_close(c);
	model_free(&m);
}

/* A random file history: sizes up to 3.5 MiB, writes whole, in part,
 * appending, past the end; or (small) a file under 128 KiB, where every
 * write in part is a patch. */
static void model_random(struct model *m, uint64_t vnode, uint64_t *x,
			 int nw, int small)
{
	model_init(m, vnode, (*x >> 20) % (small ? 100000 : 7 * MiB / 2));
	for (int i = 0; i < nw; i++) {
		uint64_t sz = m->sz[m->n], off;
		uint32_t len;

		*x = *x * 6364136223846793005ull + 1442695040888963407ull;
		if (small) { /* every chunk within the patch bound */
			off = (*x >> 24) % (sz + 2000);
			len = 1 + (uint32_t)(*x >> 44) % 3000;
			model_write(m, off, len);
			continue;
		}
		switch ((*x >> 60) % 4) {
		case 0: /* whole chunks */
			off = (*x >> 30) % 4 * MiB;
			len = MiB * (1 + (uint32_t)(*x >> 20) % 2);
			break;
		case 1: /* append */
			off = sz;
			len = 1 + (uint32_t)(*x >> 24) % (200 * 1024);
			break;
		case 2: /* inside */
			off = sz ? (*x >> 16) % sz : 0;
			len = 1 + (uint32_t)(*x >> 40) % (64 * 1024);
			break;
		default: /* past the end, leaving a hole */
			off = sz + (*x >> 12) % (MiB + 5000);
			len = 1 + (uint32_t)(*x >> 36) % 70000;
			break;
		}
		if (off + len > 4 * (uint64_t)MiB)
			off = 4 * (uint64_t)MiB - len;
		model_write(m, off, len);
	}
}

/* Writes in order, out of order and missing, fetches of any version
 * before and after them: never a wrong byte. */
static void t_write_orderings(void)
{
	char d[128];
	struct ccache *c;
	uint64_t x = 12345;
	int hits = 0, wrong = 0, last_hits = 0;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int round = 0; round < 48 && !wrong; round++) {
		struct model m;
		int ev[64], n = 0, nw = 8;

		model_random(&m, 200 + (uint64_t)round, &x, nw, round >= 24);
		for (int v = 1; v <= nw; v++)
			ev[n++] = v;                 /* write v */
		for (int i = 0; i < 12; i++)
			ev[n++] = -(1 + i);          /* a fetch */
		/* even rounds: writes in order, fetches anywhere;
		 * odd rounds: everything shuffled */
		for (int i = n - 1; i > 0; i--) {
			int j, t;

			x = x * 6364136223846793005ull + 1;
			j = (int)((x >> 33) % (uint64_t)(i + 1));
			if (round % 2 == 0 && ev[i] > 0 && ev[j] > 0)
				continue;
			t = ev[i], ev[i] = ev[j], ev[j] = t;
		}
		for (int i = 0; i < n && !wrong; i++) {
			int v, r;

			x = x * 6364136223846793005ull + 1;
			if (ev[i] > 0) {
				CHECK_EQ(mwrite(c, &m, ev[i]), 0);
			} else {
				v = 1 + (int)((x >> 40) % (uint64_t)m.n);
				if (m.sz[v])
					mput(c, &m, v, (uint32_t)((x >> 20) %
						((m.sz[v] - 1) / MiB + 1)));
			}
			if ((r = mcheck(c, &m)) < 0)
				wrong++;
			else
				hits += r;
		}
		if (round % 2 == 0)
			for (uint32_t i = 0; i * (uint64_t)MiB < m.sz[m.n]; i++)
				last_hits += mget(c, &m, m.n, i) == 1;
		ccache_forget_fid(c, &m.fid);
		model_free(&m);
	}
	CHECK_EQ(wrong, 0);
	CHECK(hits > 100);
	CHECK(last_hits > 10);
	CHECK_EQ(stats(c).errors, 0);
	ccache_close(c);
}

/* What the hooks below run between a ccache_write's look at the index
 * and its commit. */
static struct ccache *hc;
static struct model *hm;

static void hook_put_old(void)
{
	CHECK_EQ(mput(hc, hm, 1, 1), 0); /* a fetch of version 1 lands */
}

static void hook_write_next(void)
{
	CHECK_EQ(mwrite(hc, hm, 2), 0); /* our next write overtakes */
}

static void hook_put_new(void)
{
	CHECK_EQ(mput(hc, hm, 2, 0), 0); /* a fetch after the write */
}

static void hook_forget(void)
{
	ccache_forget_fid(hc, &hm->fid);
}

/* A read that found a chunk in the index, before it opens its file: the
 * write overtakes it (and removes that file). */
static int rd_hooked;
static int openat_rd(int dfd, const char *path, int flags, mode_t mode)
{
	if (!(flags & O_CREAT) && rd_hooked++ == 0)
		CHECK_EQ(mwrite(hc, hm, 1), 0);
	return openat(dfd, path, flags | O_CLOEXEC, mode);
}

/* The orderings that need a call inside another, one by one. */
static void t_write_races(void)
{
	static void (*const hooks[])(void) = { hook_put_old, hook_write_next,
					       hook_put_new, hook_forget };
	char d[128];
	struct ccache *c;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int h = 0; h < 4; h++) {
		struct model m;

		/* write 1: chunk 0 whole, chunk 1 in part (not cached);
		 * write 2: chunk 1 in part */
		model_init(&m, 300 + (uint64_t)h, 2 * MiB);
		model_write(&m, 0, MiB + 100);
		model_write(&m, MiB + 200, 50);
		hc = c;
		hm = &m;
		CHECK_EQ(mput(c, &m, 1, 0), 0);
		seam_count();
		hook = hooks[h];
		CHECK_EQ(mwrite(c, &m, 1), 0);
		CHECK(hook == NULL);
		ccache_os_reset();
		CHECK(mcheck(c, &m) >= 0);
		if (h == 0) /* the old chunk 1 went: chunk 0 hits */
			CHECK_EQ(mget(c, &m, 2, 0), 1);
		if (h == 2) { /* the fetch is kept, the write adds nothing */
			CHECK_EQ(mget(c, &m, 2, 0), 1);
			CHECK_EQ(stats(c).written, 2);
		}
		if (h == 3) /* the write starts a lineage of its own */
			CHECK_EQ(mget(c, &m, 2, 0), 1);
		if (h != 1) {
			CHECK_EQ(mwrite(c, &m, 2), 0);
			CHECK(mcheck(c, &m) >= 0);
		}
		ccache_forget_fid(c, &m.fid);
		model_free(&m);
	}
	/* A lookup that found chunk 0 of version 1 through the lineage,
	 * then the write replaced it: the right bytes or a miss. */
	{
		struct model m;
		int r;

		model_init(&m, 310, MiB);
		model_write(&m, 0, MiB);
		hc = c;
		hm = &m;
		CHECK_EQ(mput(c, &m, 1, 0), 0);
		rd_hooked = 0;
		ccache_os.openat = openat_rd;
		r = mget(c, &m, 1, 0);
		ccache_os_reset();
		CHECK(r >= 0);
		CHECK_EQ(rd_hooked, 1);
		CHECK_EQ(mget(c, &m, 2, 0), 1);
		model_free(&m);
	}
	CHECK_EQ(stats(c).errors, 0);
	ccache_close(c);
}

/* Forgetting a file drops its lineage too: an older fetch is taken. */
static void t_write_forget(void)
{
	char d[128];
	struct ccache *c;
	struct model m;

	model_init(&m, 320, 5000);
	model_write(&m, 0, 1000);
	model_write(&m, 1000, 1000);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(mput(c, &m, 1, 0), 0);
	CHECK_EQ(mwrite(c, &m, 1), 0);
	CHECK_EQ(mwrite(c, &m, 2), 0);
	CHECK_EQ(mget(c, &m, 3, 0), 1);
	CHECK_EQ(mput(c, &m, 2, 0), -ESTALE); /* outdated */
	ccache_forget_fid(c, &m.fid);
	CHECK_EQ(mcheck(c, &m), 0);
	CHECK_EQ(stats(c).chunks, 0);
	CHECK_EQ(mput(c, &m, 2, 0), 0);
	CHECK_EQ(mget(c, &m, 2, 0), 1);
	CHECK_EQ(mget(c, &m, 3, 0), 0);
	ccache_close(c);
	model_free(&m);
}

/* Under a limit of two chunks: what is evicted misses, what stays is
 * right, and a file's lineage goes with its last chunk. */
static void t_write_evict(void)
{
	char d[128];
	struct ccache *c;
	struct model m;
	uint64_t one = ccache_rec_hdr_bytes(CCACHE_CHUNK) + CCACHE_CHUNK;

	model_init(&m, 330, 0);
	for (int i = 0; i < 5; i++)
		model_write(&m, (uint64_t)i * MiB, MiB);
	model_write(&m, 5 * (uint64_t)MiB, 3000);
	model_write(&m, 5 * (uint64_t)MiB + 3000, 3000);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 2 * one + 100, &c), 0);
	if (!c)
		return;
	for (int v = 1; v < m.n; v++) {
		CHECK_EQ(mwrite(c, &m, v), 0);
		CHECK(stats(c).used <= stats(c).limit);
		CHECK(mcheck(c, &m) >= 0);
	}
	CHECK_EQ(mget(c, &m, m.n, 5), 1);
	CHECK_EQ(mget(c, &m, m.n, 4), 1);
	CHECK_EQ(mget(c, &m, m.n, 0), 0);
	CHECK(stats(c).evicted >= 4);
	/* another file's chunks push all of it out */
	for (uint32_t i = 0; i < 2; i++) {
		struct ccache_key k = key(331, 1, i);

		CHECK_EQ(put(c, &k, CCACHE_CHUNK), 0);
	}
	CHECK_EQ(mcheck(c, &m), 0);
	CHECK_EQ(mput(c, &m, 2, 0), 0); /* no lineage left to refuse it */
	ccache_close(c);
	model_free(&m);
}

/* A lost index is rebuilt from the chunk files, which know no lineage:
 * each chunk then hits at its own version only; small chunks, which live
 * in the index, are gone with it (a miss, never wrong bytes). Also an
 * index of the previous format, and two chunk files of one (fid, idx). */
static void t_write_rebuild(void)
{
	char d[128], path[512], copy[600], cmd[1300];
	struct ccache *c;
	struct model m;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	struct ccache_key k1 = key(341, 1, 0), k2 = key(341, 2, 0),
			  k3 = key(342, 1, 0);
	const uint32_t l1 = CCACHE_SMALL_MAX + 5000, l2 = CCACHE_SMALL_MAX + 6000;

	model_init(&m, 340, 0);
	for (int i = 0; i < 3; i++)
		model_write(&m, (uint64_t)i * MiB, MiB);
	model_write(&m, 0, MiB);
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int v = 1; v < m.n; v++)
		CHECK_EQ(mwrite(c, &m, v), 0);
	/* chunks 0, 1, 2 of versions 5, 3, 4: all at 5, each at its own */
	CHECK_EQ(mcheck(c, &m), 3 + 2);
	/* k1's file kept aside, then superseded by k2 */
	CHECK_EQ(put(c, &k1, l1), 0);
	chunk_file(d, &k1, path, sizeof(path));
	snprintf(copy, sizeof(copy), "%s.keep", path);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, copy);
	CHECK_EQ(system(cmd), 0);
	CHECK_EQ(put(c, &k2, l2), 0);
	CHECK_EQ(put(c, &k3, 700), 0);
	CHECK_EQ(get_ok(c, &k3, 700, 0, 700), 1);
	ccache_close(c);
	CHECK_EQ(rename(copy, path), 0);

	write_marker(d, "00000000-0000-0000-0000-000000000000\n");
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(mcheck(c, &m), 3);
	CHECK_EQ(mget(c, &m, m.n, 0), 1);   /* stored at the last version */
	CHECK_EQ(mget(c, &m, m.n, 1), 0);   /* of version 3: no lineage */
	CHECK_EQ(mget(c, &m, 3, 1), 1);
	CHECK_EQ(get_ok(c, &k2, l2, 0, l2), 1);
	CHECK_EQ(get_ok(c, &k1, l1, 0, l1), 0); /* the older went */
	CHECK_EQ(get_ok(c, &k3, 700, 0, 700), 0); /* small: went too */
	CHECK_EQ(stats(c).chunks, 3 + 1);
	/* writing on starts a lineage from the chunks of that version */
	model_write(&m, 2 * (uint64_t)MiB, MiB);
	CHECK_EQ(mwrite(c, &m, m.n - 1), 0);
	CHECK_EQ(mget(c, &m, m.n, 0), 1);
	CHECK_EQ(mget(c, &m, m.n, 1), 0);
	CHECK_EQ(mget(c, &m, m.n, 2), 1);
	ccache_close(c);

	/* an index of format 1 (keys in another order) is rebuilt */
	snprintf(path, sizeof(path), "%s/chunks/index", d);
	CHECK_EQ(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 4);
	CHECK_EQ(mdb_env_open(env, path, 0, 0600), 0);
	CHECK_EQ(mdb_txn_begin(env, NULL, 0, &txn), 0);
	CHECK_EQ(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
	CHECK_EQ(mdb_put(txn, dbi, &(MDB_val){ 6, "format" },
			 &(MDB_val){ 4, "\1\0\0\0" }, 0), 0);
	CHECK_EQ(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(mcheck(c, &m), 2);
	CHECK_EQ(mget(c, &m, m.n, 0), 0);   /* the lineage is gone */
	CHECK_EQ(mget(c, &m, m.n - 1, 0), 1);
	CHECK_EQ(get_ok(c, &k2, l2, 0, l2), 1);
	ccache_close(c);
	model_free(&m);
}

struct wthr {
	struct ccache *c;
	struct model *m;
	int id, bad;
	volatile int *stop;
};

/* Thread 0 applies the writes (mostly in order), 1 fetches chunks of
 * random versions, 2 and 3 read random versions and check every byte. */
static void *wthr_main(void *arg)
{
	struct wthr *t = arg;
	uint64_t x = (uint64_t)t->id * 7919 + 17;
	int v = 1;

	while (!*t->stop) {
		int u, r;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		u = 1 + (int)((x >> 40) % (uint64_t)t->m->n);
		if (t->id == 0) {
			if (v >= t->m->n)
				break;
			u = v < t->m->n - 1 && (x >> 20) % 4 == 0 ? v + 1 : v;
			if (mwrite(t->c, t->m, u))
				t->bad++;
			if (u == v + 1 && mwrite(t->c, t->m, v))
				t->bad++;
			v += u == v + 1 ? 2 : 1;
		} else if (t->id == 1) {
			if (t->m->sz[u])
				mput(t->c, t->m, u, (uint32_t)((x >> 10) %
					((t->m->sz[u] - 1) / MiB + 1)));
		} else if ((r = mget(t->c, t->m, u, (uint32_t)(x >> 8) % 5)) < 0) {
			t->bad++;
		}
	}
	return NULL;
}

static void t_write_threads(void)
{
	char d[128];
	struct ccache *c;
	uint64_t x = 99;
	int bad = 0;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 6 * MiB, &c), 0);
	if (!c)
		return;
	for (int round = 0; round < 6; round++) {
		struct model m;
		struct wthr t[4];
		pthread_t th[4];
		volatile int stop = 0;

		model_random(&m, 400 + (uint64_t)round, &x, NV - 2, round % 2);
		for (int i = 0; i < 4; i++) {
			t[i] = (struct wthr){ c, &m, i, 0, &stop };
			CHECK_EQ(pthread_create(&th[i], NULL, wthr_main, &t[i]), 0);
		}
		pthread_join(th[0], NULL);
		stop = 1;
		for (int i = 0; i < 4; i++) {
			if (i)
				pthread_join(th[i], NULL);
			bad += t[i].bad;
		}
		CHECK(mcheck(c, &m) >= 0);
		model_free(&m);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(stats(c).errors, 0);
	CHECK(stats(c).used <= stats(c).limit);
	ccache_close(c);
}

static void t_print_stats(void)
{
	char d[128], *buf = NULL, *line, *save;
	size_t len = 0;
	struct ccache *c;
	int n = 0, bad = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f != NULL);
	if (!f)
		return;
	ccache_print_stats(NULL, f);
	fflush(f);
	CHECK(!strcmp(buf, "cache.enabled 0\n"));
	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	ccache_print_stats(c, f);
	fclose(f);
	CHECK(strstr(buf, "cache.chunk_size 1048576\n") != NULL);
	CHECK(strstr(buf, "cache.written_chunks 0\n") != NULL);
	CHECK(strstr(buf, "cache.written_bytes 0\n") != NULL);
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		n++;
		if (strncmp(line, "cache.", 6) || !strchr(line, ' '))
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(n, 1 + 17);
	free(buf);
	ccache_close(c);
}

int main(void)
{
	char cmd[128];

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_ccache.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	printf("1..23\n");
	run("parse_size", t_parse_size);
	run("store_and_get_slices", t_store_get);
	run("versions_supersede_and_forget", t_versions);
	run("lru_eviction_and_limits", t_evict_lru);
	run("lru_hits_written_in_batches_and_at_close", t_touch_batches);
	run("damage_detected_never_served", t_damage);
	run("checksums_are_gzip_crc32", t_crc_format);
	run("small_chunks_live_in_the_index", t_small);
	run("reopen_persistence", t_reopen);
	run("lock_ebusy", t_lock);
	run("process_crash_orphans_removed", t_process_crash);
	run("rebuild_after_machine_crash_or_lost_index", t_rebuild);
	run("os_seam_enospc_eio_short_writes", t_seam);
	run("threads_with_eviction", t_threads);
	run("write_sequential_1mib_hits_at_last_version", t_write_sequential);
	run("write_small_appends_patch", t_write_appends);
	run("write_partial_uncached_misses_bounded_patch", t_write_partial);
	run("write_out_of_order_keeps_every_chunk", t_write_out_of_order);
	run("write_past_end_keeps_old_end_and_gap", t_write_size);
	run("write_orderings_never_wrong_bytes", t_write_orderings);
	run("write_races_inside_calls", t_write_races);
	run("write_forget_drops_lineage", t_write_forget);
	run("write_eviction_tiny_limit", t_write_evict);
	run("write_rebuild_serves_exact_versions", t_write_rebuild);
	run("write_threads_never_wrong_bytes", t_write_threads);
	run("print_stats", t_print_stats);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return failed_total ? 1 : 0;
}

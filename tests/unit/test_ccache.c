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
 * checksum being gzip's CRC-32, and the statistics lines.
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
 * 0xcbf43926), so another tool can verify a chunk file. */
static void t_crc_format(void)
{
	char d[128], path[512];
	struct ccache *c;
	struct ccache_key k = key(90, 1, 0);
	uint8_t buf[CCACHE_REC_HDR_MAX];
	struct ccache_hdr h;
	FILE *f;

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(ccache_put(c, &k, "123456789", 9), 0);
	ccache_close(c);
	chunk_file(d, &k, path, sizeof(path));
	f = fopen(path, "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ(fread(buf, 1, ccache_rec_hdr_bytes(9), f),
		 ccache_rec_hdr_bytes(9));
	fclose(f);
	CHECK_EQ(ccache_rec_hdr_decode(buf, ccache_rec_hdr_bytes(9), &h), 0);
	CHECK_EQ(h.crc[0], 0xcbf43926u);
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
			if (put(c, &k[i], 50000))
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
		CHECK_EQ(get_ok(c, &k[i], 50000, 0, 50000), 1);
	CHECK_EQ(get_ok(c, &o, 50000, 0, 10), 0);
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
	size_t hsz = ccache_rec_hdr_bytes(60000);

	CHECK_EQ(ccache_open(newdir(d, sizeof(d)), 64 * MiB, &c), 0);
	if (!c)
		return;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(put(c, &k[i], 60000), 0);
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
		CHECK_EQ(get_ok(c, &k[i], 60000, 0, 60000), 1);
	CHECK_EQ(get_ok(c, &k[3], 60000, 0, 60000), 0);
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
	CHECK_EQ(get_ok(c, &k[0], 60000, 0, 60000), 1);
	CHECK_EQ(get_ok(c, &k[2], 60000, 0, 60000), 0);
	ccache_close(c);

	/* truncated index */
	snprintf(path, sizeof(path), "%s/chunks/index/data.mdb", d);
	CHECK_EQ(truncate(path, 4096 * 2 + 100), 0);
	CHECK_EQ(ccache_open(d, 64 * MiB, &c), 0);
	if (!c)
		return;
	CHECK_EQ(get_ok(c, &k[0], 60000, 0, 60000), 1);
	CHECK_EQ(get_ok(c, &k[1], 60000, 0, 60000), 1);
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
	CHECK_EQ(get_ok(c, &k[1], 60000, 0, 60000), 1);
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
		CHECK_EQ(put(c, &a, 100000), -ENOSPC);
		ccache_os_reset();
	}
	ccache_os.renameat = rename_eio;
	CHECK_EQ(put(c, &a, 100000), -EIO);
	ccache_os_reset();
	CHECK_EQ(stats(c).errors, 3);
	CHECK_EQ(stats(c).chunks, 0);
	CHECK_EQ(count_files(tmp), 0);
	CHECK_EQ(get_ok(c, &a, 100000, 0, 10), 0);
	/* short writes are finished, not failed */
	ccache_os.pwrite = pwrite_short;
	CHECK_EQ(put(c, &b, 100000), 0);
	ccache_os_reset();
	CHECK_EQ(get_ok(c, &b, 100000, 0, 100000), 1);
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
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		n++;
		if (strncmp(line, "cache.", 6) || !strchr(line, ' '))
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(n, 1 + 15);
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
	printf("1..13\n");
	run("parse_size", t_parse_size);
	run("store_and_get_slices", t_store_get);
	run("versions_supersede_and_forget", t_versions);
	run("lru_eviction_and_limits", t_evict_lru);
	run("damage_detected_never_served", t_damage);
	run("checksums_are_gzip_crc32", t_crc_format);
	run("reopen_persistence", t_reopen);
	run("lock_ebusy", t_lock);
	run("process_crash_orphans_removed", t_process_crash);
	run("rebuild_after_machine_crash_or_lost_index", t_rebuild);
	run("os_seam_enospc_eio_short_writes", t_seam);
	run("threads_with_eviction", t_threads);
	run("print_stats", t_print_stats);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return failed_total ? 1 : 0;
}

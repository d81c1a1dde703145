/*
 * test_wire.c - unit tests for lib/wire.h: round trips of every type,
 * bounds checks (sticky errors, limits, trailing bytes), frame headers, and
 * a fuzz loop that feeds random bytes through every decoder.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test (tests/run.sh
 * counts them); exit status 1 if any failed. Buffers under test are
 * malloc'ed at their exact size so ASan catches any read past the end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/proto.h"
#include "../../lib/wire.h"
#include "check.h"

/* A heap copy of exactly len bytes, so overreads are caught by ASan. */
static uint8_t *dup_exact(const void *p, size_t len)
{
	uint8_t *q = malloc(len ? len : 1);

	if (!q)
		abort();
	if (len)
		memcpy(q, p, len);
	return q;
}

static struct cairn_attr sample_attr(void)
{
	struct cairn_attr a = {
		.fid = { .vol = 0x01020304u, .vnode = 0x1122334455667788ull,
			 .uniq = 0xdeadbeefu },
		.mode = 0100644, .nlink = 3, .uid = 1000, .gid = 65534,
		.rdev = 0x0801, .size = 0x1234567890ull, .blocks = 77,
		.atime = { .sec = -5, .nsec = 999999999u },
		.mtime = { .sec = 0x7fffffffffffll, .nsec = 1 },
		.ctime = { .sec = 1700000000, .nsec = 0 },
		.dv = 0xffffffffffffffffull,
	};
	return a;
}

static int attr_eq(const struct cairn_attr *a, const struct cairn_attr *b)
{
	return a->fid.vol == b->fid.vol && a->fid.vnode == b->fid.vnode &&
	       a->fid.uniq == b->fid.uniq && a->mode == b->mode &&
	       a->nlink == b->nlink && a->uid == b->uid && a->gid == b->gid &&
	       a->rdev == b->rdev && a->size == b->size &&
	       a->blocks == b->blocks &&
	       a->atime.sec == b->atime.sec && a->atime.nsec == b->atime.nsec &&
	       a->mtime.sec == b->mtime.sec && a->mtime.nsec == b->mtime.nsec &&
	       a->ctime.sec == b->ctime.sec && a->ctime.nsec == b->ctime.nsec &&
	       a->dv == b->dv;
}

static void test_integers_round_trip(void)
{
	struct wbuf w;
	struct rbuf r;

	wbuf_init(&w);
	wire_put_u8(&w, 0xab);
	wire_put_u16(&w, 0xbeef);
	wire_put_u32(&w, 0xcafebabeu);
	wire_put_u64(&w, 0x0123456789abcdefull);
	wire_put_i32(&w, -2);
	wire_put_i64(&w, INT64_MIN);
	wire_put_u8(&w, 0);
	wire_put_u16(&w, 0xffff);
	wire_put_u32(&w, 0);
	wire_put_u64(&w, UINT64_MAX);
	wire_put_i32(&w, INT32_MIN);
	wire_put_i64(&w, INT64_MAX);
	CHECK_EQ(w.err, 0);
	CHECK_EQ(w.len, 2 * (1 + 2 + 4 + 8 + 4 + 8));

	uint8_t *buf = dup_exact(w.data, w.len);
	rbuf_init(&r, buf, w.len);
	CHECK_EQ(wire_get_u8(&r), 0xab);
	CHECK_EQ(wire_get_u16(&r), 0xbeef);
	CHECK_EQ(wire_get_u32(&r), 0xcafebabeu);
	CHECK(wire_get_u64(&r) == 0x0123456789abcdefull);
	CHECK_EQ(wire_get_i32(&r), -2);
	CHECK(wire_get_i64(&r) == INT64_MIN);
	CHECK_EQ(wire_get_u8(&r), 0);
	CHECK_EQ(wire_get_u16(&r), 0xffff);
	CHECK_EQ(wire_get_u32(&r), 0);
	CHECK(wire_get_u64(&r) == UINT64_MAX);
	CHECK(wire_get_i32(&r) == INT32_MIN);
	CHECK(wire_get_i64(&r) == INT64_MAX);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(rbuf_left(&r), 0);
	CHECK_EQ(wire_get_end(&r), 0);
	free(buf);
	wbuf_free(&w);
}

/* The byte order on the wire is little-endian whatever the host is. */
static void test_little_endian_layout(void)
{
	struct wbuf w;
	static const uint8_t want[] = {
		0x34, 0x12,                                     /* u16 */
		0x78, 0x56, 0x34, 0x12,                         /* u32 */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* u64 */
		0xff, 0xff, 0xff, 0xff,                         /* i32 -1 */
		0x03, 0x00, 'a', 'b', 'c',                      /* str */
		0x02, 0x00, 0x00, 0x00, 'x', 'y',               /* blob */
	};

	wbuf_init(&w);
	wire_put_u16(&w, 0x1234);
	wire_put_u32(&w, 0x12345678u);
	wire_put_u64(&w, 0x0102030405060708ull);
	wire_put_i32(&w, -1);
	wire_put_str(&w, "abc", 3);
	wire_put_blob(&w, "xy", 2);
	CHECK_EQ(w.err, 0);
	CHECK_EQ(w.len, sizeof(want));
	CHECK(w.len == sizeof(want) && memcmp(w.data, want, sizeof(want)) == 0);
	wbuf_free(&w);
}

static void test_str_blob_bytes_round_trip(void)
{
	struct wbuf w;
	struct rbuf r;
	size_t n = 99;
	char big[300];

	memset(big, 'n', sizeof(big));
	wbuf_init(&w);
	wire_put_str(&w, "hello", 5);
	wire_put_str(&w, "", 0);
	wire_put_str(&w, big, 255);
	wire_put_blob(&w, "\0\1\2", 3);
	wire_put_blob(&w, NULL, 0);
	wire_put_bytes(&w, "RAW!", 4);
	wire_put_str(&w, "cstr", 4);
	CHECK_EQ(w.err, 0);

	uint8_t *buf = dup_exact(w.data, w.len);
	rbuf_init(&r, buf, w.len);
	const char *s = wire_get_str(&r, &n, 255);
	CHECK(s && n == 5 && memcmp(s, "hello", 5) == 0);
	s = wire_get_str(&r, &n, 255);
	CHECK_EQ(n, 0);
	CHECK_EQ(r.err, 0);
	s = wire_get_str(&r, &n, 255);
	CHECK(s && n == 255 && memcmp(s, big, 255) == 0);
	const uint8_t *b = wire_get_blob(&r, &n, 16);
	CHECK(b && n == 3 && memcmp(b, "\0\1\2", 3) == 0);
	b = wire_get_blob(&r, &n, 16);
	CHECK_EQ(n, 0);
	const uint8_t *raw = wire_get_bytes(&r, 4);
	CHECK(raw && memcmp(raw, "RAW!", 4) == 0);
	char dst[16];
	CHECK_EQ(wire_get_cstr(&r, dst, sizeof(dst)), 4);
	CHECK(strcmp(dst, "cstr") == 0);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(wire_get_end(&r), 0);
	free(buf);
	wbuf_free(&w);
}

static void test_fid_time_attr_statfs_round_trip(void)
{
	struct wbuf w;
	struct rbuf r;
	struct cairn_fid f = { 7, 0xfedcba9876543210ull, 42 }, f2;
	struct cairn_time t = { -1234567890123ll, 123456789u }, t2;
	struct cairn_attr a = sample_attr(), a2;
	struct cairn_statfs s = { 1, 2, 3, 4, 5, 4096, 255 }, s2;

	wbuf_init(&w);
	wire_put_fid(&w, &f);
	CHECK_EQ(w.len, WIRE_FID_SIZE);
	wire_put_time(&w, &t);
	CHECK_EQ(w.len, WIRE_FID_SIZE + 12);
	wire_put_attr(&w, &a);
	CHECK_EQ(w.len, WIRE_FID_SIZE + 12 + WIRE_ATTR_SIZE);
	wire_put_statfs(&w, &s);
	CHECK_EQ(w.len, WIRE_FID_SIZE + 12 + WIRE_ATTR_SIZE + 5 * 8 + 2 * 4);
	CHECK_EQ(w.err, 0);

	uint8_t *buf = dup_exact(w.data, w.len);
	rbuf_init(&r, buf, w.len);
	memset(&f2, 0, sizeof(f2));
	memset(&t2, 0, sizeof(t2));
	memset(&a2, 0, sizeof(a2));
	memset(&s2, 0, sizeof(s2));
	wire_get_fid(&r, &f2);
	wire_get_time(&r, &t2);
	wire_get_attr(&r, &a2);
	wire_get_statfs(&r, &s2);
	CHECK_EQ(r.err, 0);
	CHECK(f2.vol == f.vol && f2.vnode == f.vnode && f2.uniq == f.uniq);
	CHECK(t2.sec == t.sec && t2.nsec == t.nsec);
	CHECK(attr_eq(&a, &a2));
	CHECK(s2.blocks == 1 && s2.bfree == 2 && s2.bavail == 3 &&
	      s2.files == 4 && s2.ffree == 5 && s2.bsize == 4096 &&
	      s2.namemax == 255);
	CHECK_EQ(wire_get_end(&r), 0);
	free(buf);
	wbuf_free(&w);
}

/* The attr layout must be exactly the one in docs/PROTOCOL.md. */
static void test_attr_layout(void)
{
	struct wbuf w;
	struct cairn_attr a = sample_attr();
	struct rbuf r;

	wbuf_init(&w);
	wire_put_attr(&w, &a);
	CHECK_EQ(w.len, WIRE_ATTR_SIZE);
	rbuf_init(&r, w.data, w.len);
	CHECK_EQ(wire_get_u32(&r), a.fid.vol);
	CHECK(wire_get_u64(&r) == a.fid.vnode);
	CHECK_EQ(wire_get_u32(&r), a.fid.uniq);
	CHECK_EQ(wire_get_u32(&r), a.mode);
	CHECK_EQ(wire_get_u32(&r), a.nlink);
	CHECK_EQ(wire_get_u32(&r), a.uid);
	CHECK_EQ(wire_get_u32(&r), a.gid);
	CHECK_EQ(wire_get_u32(&r), a.rdev);
	CHECK(wire_get_u64(&r) == a.size);
	CHECK(wire_get_u64(&r) == a.blocks);
	CHECK(wire_get_i64(&r) == a.atime.sec);
	CHECK_EQ(wire_get_u32(&r), a.atime.nsec);
	CHECK(wire_get_i64(&r) == a.mtime.sec);
	CHECK_EQ(wire_get_u32(&r), a.mtime.nsec);
	CHECK(wire_get_i64(&r) == a.ctime.sec);
	CHECK_EQ(wire_get_u32(&r), a.ctime.nsec);
	CHECK(wire_get_u64(&r) == a.dv);
	CHECK_EQ(wire_get_end(&r), 0);
	wbuf_free(&w);
}

static void test_read_past_end(void)
{
	static const uint8_t three[] = { 1, 2, 3 };
	uint8_t *buf = dup_exact(three, sizeof(three));
	struct rbuf r;

	rbuf_init(&r, buf, sizeof(three));
	CHECK_EQ(wire_get_u32(&r), 0);      /* 4 > 3 bytes left */
	CHECK(r.err != 0);
	CHECK_EQ(r.err, -EPROTO);

	/* Sticky: once failed, even a read that would fit returns 0. */
	CHECK_EQ(wire_get_u8(&r), 0);
	CHECK_EQ(r.err, -EPROTO);
	CHECK(wire_get_end(&r) != 0);

	/* Every getter fails cleanly on an empty buffer. */
	rbuf_init(&r, buf, 0);
	CHECK_EQ(wire_get_u8(&r), 0);
	CHECK(r.err);
	rbuf_init(&r, buf, 1);
	CHECK_EQ(wire_get_u16(&r), 0);
	CHECK(r.err);
	rbuf_init(&r, buf, 3);
	CHECK_EQ(wire_get_i32(&r), 0);
	CHECK(r.err);
	rbuf_init(&r, buf, 3);
	CHECK(wire_get_u64(&r) == 0);
	CHECK(r.err);
	rbuf_init(&r, buf, 3);
	CHECK(wire_get_i64(&r) == 0);
	CHECK(r.err);
	rbuf_init(&r, buf, 3);
	CHECK(wire_get_bytes(&r, 4) == NULL);
	CHECK(r.err);

	struct cairn_attr a;
	rbuf_init(&r, buf, 3);
	wire_get_attr(&r, &a);
	CHECK(r.err);
	struct cairn_fid f;
	rbuf_init(&r, buf, 3);
	wire_get_fid(&r, &f);
	CHECK(r.err);
	struct cairn_time t;
	rbuf_init(&r, buf, 3);
	wire_get_time(&r, &t);
	CHECK(r.err);
	struct cairn_statfs s;
	rbuf_init(&r, buf, 3);
	wire_get_statfs(&r, &s);
	CHECK(r.err);
	free(buf);
}

/* A str/blob whose length prefix claims more bytes than there are. */
static void test_length_prefix_past_end(void)
{
	static const uint8_t str[] = { 10, 0, 'a', 'b' };
	static const uint8_t blob[] = { 0xff, 0xff, 0xff, 0xff, 'a' };
	uint8_t *b1 = dup_exact(str, sizeof(str));
	uint8_t *b2 = dup_exact(blob, sizeof(blob));
	struct rbuf r;
	size_t n = 0;
	char dst[64];

	rbuf_init(&r, b1, sizeof(str));
	CHECK(wire_get_str(&r, &n, 255) == NULL);
	CHECK(r.err);
	rbuf_init(&r, b1, sizeof(str));
	wire_get_cstr(&r, dst, sizeof(dst));
	CHECK(r.err);
	rbuf_init(&r, b2, sizeof(blob));
	CHECK(wire_get_blob(&r, &n, UINT32_MAX) == NULL);
	CHECK(r.err);
	/* Truncated length prefix itself. */
	rbuf_init(&r, b1, 1);
	CHECK(wire_get_str(&r, &n, 255) == NULL);
	CHECK(r.err);
	free(b1);
	free(b2);
}

static void test_str_over_max(void)
{
	struct wbuf w;
	struct rbuf r;
	size_t n;
	char name[300];

	memset(name, 'x', sizeof(name));
	wbuf_init(&w);
	wire_put_str(&w, name, 256);
	wire_put_blob(&w, name, 300);
	CHECK_EQ(w.err, 0);

	rbuf_init(&r, w.data, w.len);
	CHECK(wire_get_str(&r, &n, CAIRN_NAME_MAX) == NULL);
	CHECK_EQ(r.err, -EPROTO);

	rbuf_init(&r, w.data, w.len);
	CHECK(wire_get_str(&r, &n, 256) != NULL); /* exactly max is fine */
	CHECK_EQ(n, 256);
	CHECK(wire_get_blob(&r, &n, 299) == NULL);
	CHECK(r.err);

	/* cstr: must fit dst with its NUL. */
	char dst[256];
	rbuf_init(&r, w.data, w.len);
	wire_get_cstr(&r, dst, sizeof(dst)); /* 256 bytes + NUL > 256 */
	CHECK(r.err);
	char dst2[257];
	rbuf_init(&r, w.data, w.len);
	CHECK_EQ(wire_get_cstr(&r, dst2, sizeof(dst2)), 256);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(strlen(dst2), 256);
	wbuf_free(&w);
}

static void test_cstr_rejects_nul(void)
{
	static const uint8_t s[] = { 3, 0, 'a', 0, 'b' };
	uint8_t *buf = dup_exact(s, sizeof(s));
	struct rbuf r;
	char dst[16];

	rbuf_init(&r, buf, sizeof(s));
	wire_get_cstr(&r, dst, sizeof(dst));
	CHECK(r.err);
	free(buf);
}

static void test_put_str_too_long(void)
{
	struct wbuf w;
	size_t big = 65536;
	char *s = malloc(big);

	if (!s)
		abort();
	memset(s, 'q', big);
	wbuf_init(&w);
	wire_put_str(&w, s, 65535); /* the largest a u16 length can say */
	CHECK_EQ(w.err, 0);
	CHECK_EQ(w.len, 2 + 65535);
	wire_put_str(&w, s, big);
	CHECK_EQ(w.err, -ENAMETOOLONG);
	wbuf_free(&w);
	free(s);
}

static void test_get_end_trailing(void)
{
	static const uint8_t five[] = { 1, 0, 0, 0, 9 };
	uint8_t *buf = dup_exact(five, sizeof(five));
	struct rbuf r;

	rbuf_init(&r, buf, sizeof(five));
	CHECK_EQ(wire_get_u32(&r), 1);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(rbuf_left(&r), 1);
	CHECK_EQ(wire_get_end(&r), -EPROTO); /* one trailing byte */

	rbuf_init(&r, buf, sizeof(five));
	wire_get_u32(&r);
	wire_get_u8(&r);
	CHECK_EQ(wire_get_end(&r), 0);

	rbuf_init(&r, buf, 0);
	CHECK_EQ(wire_get_end(&r), 0); /* empty payload, nothing read */
	free(buf);
}

static void test_frame_header(void)
{
	struct wbuf w;
	struct wire_hdr h;

	wbuf_init(&w);
	size_t off = wire_frame_begin(&w, OP_LOOKUP, WF_REPLY, 0x01020304u, -2);
	CHECK_EQ(off, 0);
	wire_put_u32(&w, 7);
	wire_put_str(&w, "abc", 3);
	wire_frame_end(&w, off);
	size_t off2 = wire_frame_begin(&w, OP_PING, 0, 9, 0);
	CHECK_EQ(off2, WIRE_HDR_SIZE + 9);
	wire_frame_end(&w, off2);
	CHECK_EQ(w.err, 0);
	CHECK_EQ(w.len, 2 * WIRE_HDR_SIZE + 9);

	uint8_t *buf = dup_exact(w.data, w.len);
	CHECK_EQ(wire_hdr_decode(buf, &h), 0);
	CHECK_EQ(h.len, 9);
	CHECK_EQ(h.op, OP_LOOKUP);
	CHECK_EQ(h.flags, WF_REPLY);
	CHECK_EQ(h.id, 0x01020304u);
	CHECK_EQ(h.status, -2);
	/* Raw layout: len, op, flags, id, status. */
	CHECK(buf[0] == 9 && buf[1] == 0 && buf[4] == OP_LOOKUP &&
	      buf[6] == WF_REPLY && buf[8] == 4 && buf[11] == 1 &&
	      buf[12] == 0xfe && buf[15] == 0xff);

	CHECK_EQ(wire_hdr_decode(buf + off2, &h), 0);
	CHECK_EQ(h.len, 0);
	CHECK_EQ(h.op, OP_PING);
	CHECK_EQ(h.id, 9);
	free(buf);
	wbuf_free(&w);
}

static void test_header_oversized(void)
{
	uint8_t hdr[WIRE_HDR_SIZE] = { 0 };
	struct wire_hdr h;
	uint32_t len;

	/* A sealed frame's len counts its tag too. */
	len = WIRE_MAX_PAYLOAD + WIRE_TAG_SIZE;
	memcpy(hdr, (uint8_t[4]){ len, len >> 8, len >> 16, len >> 24 }, 4);
	hdr[4] = OP_WRITE;
	CHECK_EQ(wire_hdr_decode(hdr, &h), 0);  /* exactly the limit is fine */
	CHECK_EQ(h.len, WIRE_MAX_PAYLOAD + WIRE_TAG_SIZE);

	len = WIRE_MAX_PAYLOAD + WIRE_TAG_SIZE + 1;
	memcpy(hdr, (uint8_t[4]){ len, len >> 8, len >> 16, len >> 24 }, 4);
	CHECK_EQ(wire_hdr_decode(hdr, &h), -EMSGSIZE);

	memset(hdr, 0xff, 4);
	CHECK_EQ(wire_hdr_decode(hdr, &h), -EMSGSIZE);
}

static void test_wbuf_reserve_reset(void)
{
	struct wbuf w;

	wbuf_init(&w);
	CHECK_EQ(w.len, 0);
	uint8_t *p = wbuf_reserve(&w, 100000);
	CHECK(p != NULL);
	if (p)
		memset(p, 0x5a, 100000);
	CHECK_EQ(w.len, 100000);
	wire_put_u8(&w, 1);
	CHECK_EQ(w.len, 100001);
	CHECK(w.data[99999] == 0x5a && w.data[100000] == 1);
	wbuf_reset(&w);
	CHECK_EQ(w.len, 0);
	CHECK_EQ(w.err, 0);
	wire_put_u16(&w, 0x0102);
	CHECK(w.len == 2 && w.data[0] == 2 && w.data[1] == 1);
	wbuf_free(&w);

	/* Many small puts force repeated growth. */
	wbuf_init(&w);
	for (uint32_t i = 0; i < 100000; i++)
		wire_put_u32(&w, i);
	CHECK_EQ(w.err, 0);
	CHECK_EQ(w.len, 400000);
	struct rbuf r;
	rbuf_init(&r, w.data, w.len);
	uint32_t bad = 0;
	for (uint32_t i = 0; i < 100000; i++)
		if (wire_get_u32(&r) != i)
			bad++;
	CHECK_EQ(bad, 0);
	CHECK_EQ(wire_get_end(&r), 0);
	wbuf_free(&w);
}

/* ---- fuzz ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure is reproducible. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Decode the buffer as a random sequence of fields; must never read out of
 * bounds, and once err is set every getter must return 0/NULL. */
static void fuzz_one(const uint8_t *buf, size_t len)
{
	struct rbuf r;
	struct wire_hdr h;
	size_t n;
	char dst[64];
	struct cairn_attr a;
	struct cairn_statfs s;
	struct cairn_fid f;
	struct cairn_time t;

	if (len >= WIRE_HDR_SIZE) {
		int rc = wire_hdr_decode(buf, &h);
		if (rc != 0 && rc != -EMSGSIZE) {
			fprintf(stderr, "  hdr_decode returned %d\n", rc);
			failed_here++;
		}
		if (rc == 0 && h.len > WIRE_MAX_PAYLOAD) {
			fprintf(stderr, "  hdr_decode accepted len %u\n", h.len);
			failed_here++;
		}
	}
	rbuf_init(&r, buf, len);
	for (int i = 0; i < 24; i++) {
		int had_err = r.err;
		uint64_t v = 0;
		const void *p = NULL;

		switch (rng() % 15) {
		case 0: v = wire_get_u8(&r); break;
		case 1: v = wire_get_u16(&r); break;
		case 2: v = wire_get_u32(&r); break;
		case 3: v = wire_get_u64(&r); break;
		case 4: v = (uint64_t)wire_get_i32(&r); break;
		case 5: v = (uint64_t)wire_get_i64(&r); break;
		case 6: p = wire_get_str(&r, &n, rng() % 300); break;
		case 7: wire_get_cstr(&r, dst, 1 + rng() % sizeof(dst)); break;
		case 8: p = wire_get_blob(&r, &n, rng() % 70000); break;
		case 9: p = wire_get_bytes(&r, rng() % 64); break;
		case 10: wire_get_fid(&r, &f); break;
		case 11: wire_get_time(&r, &t); break;
		case 12: wire_get_attr(&r, &a); break;
		case 13: wire_get_statfs(&r, &s); break;
		case 14: (void)wire_get_end(&r); break;
		}
		if (r.off > r.len) {
			fprintf(stderr, "  rbuf off %zu > len %zu\n", r.off, r.len);
			failed_here++;
			return;
		}
		if (had_err && (v != 0 || p != NULL)) {
			fprintf(stderr, "  getter returned data after err\n");
			failed_here++;
			return;
		}
		/* Touch what a successful getter handed back: ASan checks it. */
		if (p && !r.err) {
			volatile uint8_t sink = 0;
			const uint8_t *q = p;
			size_t k = (size_t)(q - buf);
			for (; k < r.off; k++)
				sink ^= buf[k];
			(void)sink;
		}
	}
}

static void test_fuzz_decoders(void)
{
	const int iters = 200000;

	for (int it = 0; it < iters && failed_here < 5; it++) {
		size_t len = rng() % 256;
		if (rng() % 8 == 0)
			len = WIRE_HDR_SIZE + rng() % 4;
		uint8_t *buf = malloc(len ? len : 1);
		if (!buf)
			abort();
		for (size_t i = 0; i < len; i++) {
			uint64_t x = rng();
			/* Bias towards small values so length prefixes often fit. */
			buf[i] = (x & 3) == 0 ? (uint8_t)(x >> 8) % 8 : (uint8_t)(x >> 16);
		}
		fuzz_one(buf, len);
		free(buf);
	}
}

/* Encode random values, decode them, compare: the codec is its own inverse. */
static void test_fuzz_round_trip(void)
{
	for (int it = 0; it < 20000 && failed_here < 5; it++) {
		struct wbuf w;
		struct rbuf r;
		uint64_t vals[16];
		int kinds[16];
		int k = 1 + rng() % 16;

		wbuf_init(&w);
		for (int i = 0; i < k; i++) {
			kinds[i] = rng() % 4;
			vals[i] = rng();
			switch (kinds[i]) {
			case 0: wire_put_u8(&w, (uint8_t)vals[i]); break;
			case 1: wire_put_u16(&w, (uint16_t)vals[i]); break;
			case 2: wire_put_u32(&w, (uint32_t)vals[i]); break;
			case 3: wire_put_u64(&w, vals[i]); break;
			}
		}
		uint8_t *buf = dup_exact(w.data, w.len);
		rbuf_init(&r, buf, w.len);
		for (int i = 0; i < k; i++) {
			uint64_t got = 0, want = vals[i];
			switch (kinds[i]) {
			case 0: got = wire_get_u8(&r); want = (uint8_t)want; break;
			case 1: got = wire_get_u16(&r); want = (uint16_t)want; break;
			case 2: got = wire_get_u32(&r); want = (uint32_t)want; break;
			case 3: got = wire_get_u64(&r); break;
			}
			if (got != want) {
				fprintf(stderr, "  round trip kind %d: %llx != %llx\n",
					kinds[i], (unsigned long long)got,
					(unsigned long long)want);
				failed_here++;
			}
		}
		if (wire_get_end(&r) != 0)
			failed_here++;
		free(buf);
		wbuf_free(&w);
	}
}

int main(void)
{
	run("wire integers round trip", test_integers_round_trip);
	run("wire little-endian layout", test_little_endian_layout);
	run("wire str/blob/bytes round trip", test_str_blob_bytes_round_trip);
	run("wire fid/time/attr/statfs round trip",
	    test_fid_time_attr_statfs_round_trip);
	run("wire attr layout matches PROTOCOL.md", test_attr_layout);
	run("wire read past end sets err, returns 0", test_read_past_end);
	run("wire length prefix past end", test_length_prefix_past_end);
	run("wire str over max", test_str_over_max);
	run("wire cstr rejects NUL", test_cstr_rejects_nul);
	run("wire put_str over 65535", test_put_str_too_long);
	run("wire get_end with trailing bytes", test_get_end_trailing);
	run("wire frame header round trip", test_frame_header);
	run("wire header oversized len", test_header_oversized);
	run("wire wbuf reserve/reset/growth", test_wbuf_reserve_reset);
	run("wire fuzz decoders (200k random buffers)", test_fuzz_decoders);
	run("wire fuzz encode/decode round trip", test_fuzz_round_trip);
	return failed_total ? 1 : 0;
}

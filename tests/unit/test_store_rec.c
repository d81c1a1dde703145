/*
 * test_store_rec.c - unit tests for server/store_rec.h, the pure encoders
 * and decoders of the store's LMDB records: every record on valid bytes,
 * and truncated, oversized and corrupted ones (fuzz_store_rec covers the
 * rest). No data directory is needed.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../../server/store_rec.h"
#include "check.h"

/* ---- record codecs (store_rec.h) -------------------------------------- */

/* Decoders get their bytes in a heap block of exactly n bytes, so that
 * under AddressSanitizer a read past the end is caught. */
static void *exact(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);

	if (q && n)
		memcpy(q, p, n);
	return q;
}

#define DEC(call_with_q, p, n) ({ \
	void *q = exact(p, n); \
	int r_ = call_with_q; \
	free(q); \
	r_; \
})

static void t_rec_inode(void)
{
	struct sinode in = {
		.mode = S_IFREG | 04755, .nlink = 3, .uid = 1000, .gid = 100,
		.rdev = 0, .uniq = 0xdeadbeef, .size = 1ull << 40, .dv = 7,
		.next_cookie = 0, .parent = 0,
		.atime = { -5, 999999999 }, .mtime = { 1700000000, 1 },
		.ctime = { 1700000001, 0 } };
	uint8_t b[STORE_REC_INODE_SIZE + 1];
	struct sinode out;

	store_rec_inode_encode(&in, b);
	memset(&out, 0xff, sizeof(out));
	CHECK_EQ(DEC(store_rec_inode_decode(q, sizeof(b) - 1, &out), b,
		     sizeof(b) - 1), 0);
	CHECK(out.mode == in.mode && out.nlink == 3 && out.uid == 1000 &&
	      out.gid == 100 && out.uniq == in.uniq && out.size == in.size &&
	      out.dv == 7 && out.flags == 0);
	CHECK(out.atime.sec == -5 && out.atime.nsec == 999999999 &&
	      out.mtime.sec == 1700000000 && out.ctime.sec == 1700000001);
	/* truncated, oversized, empty */
	CHECK_EQ(DEC(store_rec_inode_decode(q, sizeof(b) - 2, &out), b,
		     sizeof(b) - 2), -EUCLEAN);
	CHECK_EQ(DEC(store_rec_inode_decode(q, sizeof(b), &out), b,
		     sizeof(b)), -EUCLEAN);
	CHECK_EQ(store_rec_inode_decode(NULL, 0, &out), -EUCLEAN);
	/* version, unknown flag, reserved byte, nsec, file type, mode bits */
	{
		static const struct { size_t off; uint8_t val; } bad[] = {
			{ 0, 2 }, { 1, 0x80 }, { 3, 1 },
			{ 4 + 6 * 4 + 4 * 8 + 8 + 3, 0xff }, /* atime nsec */
			{ 4 + 1, 0xf0 },                       /* S_IFMT 0xf000 */
			{ 4 + 2, 0x01 },                       /* above S_IFMT */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			uint8_t c[STORE_REC_INODE_SIZE];

			store_rec_inode_encode(&in, c);
			c[bad[i].off] = bad[i].val;
			CHECK_EQ(store_rec_inode_decode(c, sizeof(c), &out),
				 -EUCLEAN);
		}
	}
	/* an inode record as stored before the flags byte existed */
	b[1] = 0;
	CHECK_EQ(store_rec_inode_decode(b, STORE_REC_INODE_SIZE, &out), 0);
}

static void t_rec_dirent(void)
{
	struct store_rec_dirent in = { 42, 1234567, S_IFDIR }, out;
	uint8_t b[STORE_REC_DIRENT_SIZE + 1], key[8 + CAIRN_NAME_MAX + 1];
	char name[CAIRN_NAME_MAX + 1];
	uint64_t dir, cookie;
	size_t len;

	store_rec_dirent_encode(&in, b);
	CHECK_EQ(DEC(store_rec_dirent_decode(q, STORE_REC_DIRENT_SIZE, &out),
		     b, STORE_REC_DIRENT_SIZE), 0);
	CHECK(out.child == 42 && out.cookie == 1234567 && out.type == S_IFDIR);
	CHECK_EQ(DEC(store_rec_dirent_decode(q, STORE_REC_DIRENT_SIZE - 1,
					     &out), b, STORE_REC_DIRENT_SIZE - 1),
		 -EUCLEAN);
	CHECK_EQ(store_rec_dirent_decode(b, sizeof(b), &out), -EUCLEAN);
	in.type = 0;
	store_rec_dirent_encode(&in, b);
	CHECK_EQ(store_rec_dirent_decode(b, STORE_REC_DIRENT_SIZE, &out),
		 -EUCLEAN);
	in = (struct store_rec_dirent){ 0, 3, S_IFREG };
	store_rec_dirent_encode(&in, b);
	CHECK_EQ(store_rec_dirent_decode(b, STORE_REC_DIRENT_SIZE, &out),
		 -EUCLEAN);

	/* dirent key: BE8 dir + name */
	memset(key, 0, 8);
	key[7] = 9;
	memset(key + 8, 'n', CAIRN_NAME_MAX + 1);
	CHECK_EQ(DEC(store_rec_dirent_key_decode(q, 8 + CAIRN_NAME_MAX, &dir,
						 name, &len),
		     key, 8 + CAIRN_NAME_MAX), 0);
	CHECK(dir == 9 && len == CAIRN_NAME_MAX && strlen(name) == len);
	CHECK_EQ(DEC(store_rec_dirent_key_decode(q, 8 + CAIRN_NAME_MAX + 1,
						 &dir, name, &len),
		     key, 8 + CAIRN_NAME_MAX + 1), -EUCLEAN);
	CHECK_EQ(DEC(store_rec_dirent_key_decode(q, 8, &dir, name, &len), key,
		     8), -EUCLEAN);
	CHECK_EQ(DEC(store_rec_dirent_key_decode(q, 7, &dir, name, &len), key,
		     7), -EUCLEAN);
	memcpy(key + 8, "a/b", 3);
	CHECK_EQ(store_rec_dirent_key_decode(key, 11, &dir, name, &len),
		 -EUCLEAN);
	memcpy(key + 8, "..", 2);
	CHECK_EQ(store_rec_dirent_key_decode(key, 10, &dir, name, &len),
		 -EUCLEAN);

	/* dirseq: key BE8 dir + BE8 cookie, value a name */
	memset(key, 0, 16);
	key[7] = 5;
	key[15] = 3;
	CHECK_EQ(DEC(store_rec_dirseq_key_decode(q, 16, &dir, &cookie), key,
		     16), 0);
	CHECK(dir == 5 && cookie == 3);
	CHECK_EQ(DEC(store_rec_dirseq_key_decode(q, 15, &dir, &cookie), key,
		     15), -EUCLEAN);
	CHECK_EQ(store_rec_dirseq_key_decode(key, 17, &dir, &cookie),
		 -EUCLEAN);
	CHECK_EQ(DEC(store_rec_name_decode(q, 4, name, &len), "file", 4), 0);
	CHECK(len == 4 && !strcmp(name, "file"));
	CHECK_EQ(store_rec_name_decode(NULL, 0, name, &len), -EUCLEAN);
	CHECK_EQ(store_rec_name_decode("a\0b", 3, name, &len), -EUCLEAN);
	CHECK_EQ(store_rec_name_decode(".", 1, name, &len), -EUCLEAN);
	memset(key, 'x', CAIRN_NAME_MAX + 1);
	CHECK_EQ(DEC(store_rec_name_decode(q, CAIRN_NAME_MAX + 1, name, &len),
		     key, CAIRN_NAME_MAX + 1), -EUCLEAN);
}

static void t_rec_meta_symlink_xattr(void)
{
	uint8_t b[17], id[16], key[8 + CAIRN_XATTR_NAME_MAX + 1], val[8];
	char target[CAIRN_SYMLINK_MAX + 2], name[CAIRN_XATTR_NAME_MAX + 1];
	uint64_t x64, vn;
	uint32_t x32;
	size_t len;

	store_rec_meta_u32_encode(0x01020304, b);
	CHECK_EQ(DEC(store_rec_meta_u32_decode(q, 4, &x32), b, 4), 0);
	CHECK_EQ(x32, 0x01020304);
	CHECK_EQ(DEC(store_rec_meta_u32_decode(q, 3, &x32), b, 3), -EUCLEAN);
	CHECK_EQ(store_rec_meta_u32_decode(b, 5, &x32), -EUCLEAN);
	store_rec_meta_u64_encode(0x0102030405060708ull, b);
	CHECK_EQ(DEC(store_rec_meta_u64_decode(q, 8, &x64), b, 8), 0);
	CHECK(x64 == 0x0102030405060708ull);
	CHECK_EQ(DEC(store_rec_meta_u64_decode(q, 7, &x64), b, 7), -EUCLEAN);
	CHECK_EQ(store_rec_meta_u64_decode(b, 9, &x64), -EUCLEAN);
	for (int i = 0; i < 16; i++)
		b[i] = (uint8_t)(i * 17);
	CHECK_EQ(DEC(store_rec_meta_id_decode(q, 16, id), b, 16), 0);
	CHECK(!memcmp(id, b, 16));
	CHECK_EQ(DEC(store_rec_meta_id_decode(q, 15, id), b, 15), -EUCLEAN);
	CHECK_EQ(store_rec_meta_id_decode(b, 17, id), -EUCLEAN);

	/* symlink target: 1..4095 bytes, no NUL */
	memset(target, 't', sizeof(target));
	CHECK_EQ(DEC(store_rec_symlink_decode(q, CAIRN_SYMLINK_MAX, target,
					      &len), target, CAIRN_SYMLINK_MAX),
		 0);
	CHECK(len == CAIRN_SYMLINK_MAX && strlen(target) == len);
	memset(target, 't', sizeof(target));
	CHECK_EQ(DEC(store_rec_symlink_decode(q, CAIRN_SYMLINK_MAX + 1, target,
					      &len), target,
		     CAIRN_SYMLINK_MAX + 1), -EUCLEAN);
	CHECK_EQ(store_rec_symlink_decode(NULL, 0, target, &len), -EUCLEAN);
	CHECK_EQ(store_rec_symlink_decode("a\0", 2, target, &len), -EUCLEAN);

	/* xattr key: BE8 vnode + 1..255 bytes, no NUL */
	memset(key, 0, 8);
	key[6] = 1;
	memcpy(key + 8, "user.k", 6);
	CHECK_EQ(DEC(store_rec_xattr_key_decode(q, 14, &vn, name, &len), key,
		     14), 0);
	CHECK(vn == 256 && len == 6 && !strcmp(name, "user.k"));
	CHECK_EQ(DEC(store_rec_xattr_key_decode(q, 8, &vn, name, &len), key,
		     8), -EUCLEAN);
	CHECK_EQ(DEC(store_rec_xattr_key_decode(q, 3, &vn, name, &len), key,
		     3), -EUCLEAN);
	memset(key + 8, 'x', CAIRN_XATTR_NAME_MAX + 1);
	CHECK_EQ(DEC(store_rec_xattr_key_decode(q, sizeof(key), &vn, name,
						&len), key, sizeof(key)),
		 -EUCLEAN);
	key[9] = 0;
	CHECK_EQ(store_rec_xattr_key_decode(key, 12, &vn, name, &len),
		 -EUCLEAN);

	/* xattr value: up to 64 KiB; the getxattr size rules */
	CHECK_EQ(DEC(store_rec_xattr_val_decode(q, 5, val, sizeof(val), &len),
		     "value", 5), 0);
	CHECK(len == 5 && !memcmp(val, "value", 5));
	CHECK_EQ(DEC(store_rec_xattr_val_decode(q, 5, NULL, 0, &len), "value",
		     5), 0);
	CHECK_EQ(len, 5);
	CHECK_EQ(DEC(store_rec_xattr_val_decode(q, 5, val, 4, &len), "value",
		     5), -ERANGE);
	CHECK_EQ(store_rec_xattr_val_decode(NULL, 0, NULL, 0, &len), 0);
	CHECK_EQ(len, 0);
	{
		size_t big = CAIRN_XATTR_SIZE_MAX + 1;
		uint8_t *p = calloc(1, big);

		CHECK_EQ(store_rec_xattr_val_decode(p, big, NULL, 0, &len),
			 -EUCLEAN);
		CHECK_EQ(store_rec_xattr_val_decode(p, big - 1, NULL, 0,
						    &len), 0);
		free(p);
	}
}

static void t_rec_orphan(void)
{
	uint8_t key[9] = { 0, 0, 0, 0, 0, 0, 1, 2, 3 }, b[49];
	uint64_t vn = 0;
	size_t count = 0;

	CHECK_EQ(DEC(store_rec_orphan_key_decode(q, 8, &vn), key, 8), 0);
	CHECK(vn == 0x102);
	CHECK_EQ(DEC(store_rec_orphan_key_decode(q, 7, &vn), key, 7),
		 -EUCLEAN);
	CHECK_EQ(DEC(store_rec_orphan_key_decode(q, 9, &vn), key, 9),
		 -EUCLEAN);
	memset(key, 0, sizeof(key));
	CHECK_EQ(store_rec_orphan_key_decode(key, 8, &vn), -EUCLEAN);
	for (int i = 0; i < 17; i++)
		b[i] = (uint8_t)(0xf0 - i);
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 16, &count), b, 16), 0);
	CHECK_EQ(count, 1);
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 15, &count), b, 15), -EUCLEAN);
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 17, &count), b, 17), -EUCLEAN);
	CHECK_EQ(store_rec_orphan_decode(NULL, 0, &count), -EUCLEAN);
	/* Several holders: strictly ascending, nothing else. */
	memset(b, 0, sizeof(b));
	b[15] = 1;
	b[31] = 2;
	b[47] = 3;
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 48, &count), b, 48), 0);
	CHECK_EQ(count, 3);
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 47, &count), b, 47), -EUCLEAN);
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 49, &count), b, 49), -EUCLEAN);
	b[31] = 1; /* a duplicate */
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 48, &count), b, 48), -EUCLEAN);
	b[31] = 4; /* out of order */
	CHECK_EQ(DEC(store_rec_orphan_decode(q, 48, &count), b, 48), -EUCLEAN);
	{
		size_t big = (STORE_REC_HOLDERS_MAX + 1) * 16;
		uint8_t *p = calloc(1, big);

		for (size_t i = 0; i < STORE_REC_HOLDERS_MAX + 1; i++) {
			p[i * 16 + 14] = (uint8_t)(i >> 8);
			p[i * 16 + 15] = (uint8_t)i;
		}
		CHECK_EQ(store_rec_orphan_decode(p, big - 16, &count), 0);
		CHECK_EQ(count, STORE_REC_HOLDERS_MAX);
		CHECK_EQ(store_rec_orphan_decode(p, big, &count), -EUCLEAN);
		free(p);
	}
}

int main(void)
{
	run("rec_inode_codec", t_rec_inode);
	run("rec_dirent_dirseq_codecs", t_rec_dirent);
	run("rec_meta_symlink_xattr_codecs", t_rec_meta_symlink_xattr);
	run("rec_orphan_codecs", t_rec_orphan);
	return failed_total ? 1 : 0;
}

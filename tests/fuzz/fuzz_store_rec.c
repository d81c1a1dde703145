/*
 * fuzz_store_rec - every decoder of the store's LMDB records
 * (server/store_rec.h).
 *
 * Input: one byte naming the record kind (enum below; tests/fuzz/record.py
 * writes real records from a store's LMDB in this form), then the record's
 * bytes. For REC_XATTR_VAL a second byte picks the caller's buffer size
 * (0: a size query; 255: exactly the record's length; else that many
 * bytes) before the record.
 *
 * Properties, each a abort() when violated:
 *   - a decoder returns 0 or -EUCLEAN (-ERANGE too for an xattr value that
 *     does not fit the buffer), reads only the record (its end is the
 *     fuzzer buffer's end) and writes only the output buffers its signature
 *     names (allocated at exactly that size here, so ASan sees more);
 *   - an accepted inode, dirent or meta number encodes back to the same
 *     bytes (one record, one encoding);
 *   - accepted names, targets and keys are what the header promises:
 *     lengths in bounds, no NUL (nor '/', ".", ".." for names), copied
 *     exactly and NUL-terminated, key prefixes read big-endian.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../server/store_rec.h"

enum rec_kind {
	REC_INODE,        /* inodes value */
	REC_DIRENT,       /* dirents value */
	REC_DIRENT_KEY,   /* dirents key */
	REC_DIRSEQ_KEY,   /* dirseq key */
	REC_NAME,         /* dirseq value */
	REC_META_U32,     /* meta "format", "volume" */
	REC_META_U64,     /* meta "next_vnode" */
	REC_META_ID,      /* meta "server_id" */
	REC_SYMLINK,      /* symlinks value */
	REC_XATTR_KEY,    /* xattrs key */
	REC_XATTR_VAL,    /* xattrs value */
	REC_ORPHAN_KEY,   /* orphans key */
	REC_ORPHAN,       /* orphans value */
	REC__COUNT
};

static const char *const kind_name[REC__COUNT] = {
	"inode", "dirent", "dirent_key", "dirseq_key", "name", "meta_u32",
	"meta_u64", "meta_id", "symlink", "xattr_key", "xattr_val",
	"orphan_key", "orphan",
};

static unsigned long tried[REC__COUNT], accepted[REC__COUNT];

static void print_stats(void)
{
	fprintf(stderr, "fuzz_store_rec: %-12s %12s %12s\n", "record", "tried",
		"accepted");
	for (int k = 0; k < REC__COUNT; k++)
		fprintf(stderr, "fuzz_store_rec: %-12s %12lu %12lu\n",
			kind_name[k], tried[k], accepted[k]);
}

static void fail(int kind, const char *what, size_t n)
{
	fprintf(stderr, "fuzz_store_rec: %s record of %zu bytes: %s\n",
		kind_name[kind], n, what);
	abort();
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* An accepted string: exactly s[0..n), NUL-terminated, no NUL inside. */
static void check_copy(int kind, const char *out, size_t len,
		       const uint8_t *s, size_t n, size_t max)
{
	if (len != n || len == 0 || len > max)
		fail(kind, "accepted length out of bounds", n);
	if (memcmp(out, s, n) || out[n] != 0 || memchr(s, 0, n))
		fail(kind, "accepted bytes not copied exactly", n);
}

static void check_name(int kind, const char *name, size_t len,
		       const uint8_t *s, size_t n)
{
	check_copy(kind, name, len, s, n, CAIRN_NAME_MAX);
	if (memchr(s, '/', n) || !strcmp(name, ".") || !strcmp(name, ".."))
		fail(kind, "accepted a name the namespace refuses", n);
}

/* Encoded output must be the input. */
static void check_same(int kind, const uint8_t *enc, const uint8_t *p,
		       size_t n)
{
	if (memcmp(enc, p, n))
		fail(kind, "does not encode back to the same bytes", n);
}

static int one(int kind, const uint8_t *p, size_t n, int size_sel)
{
	int rc = -EUCLEAN;

	switch (kind) {
	case REC_INODE: {
		struct sinode *in = malloc(sizeof(*in));
		uint8_t enc[STORE_REC_INODE_SIZE];

		rc = store_rec_inode_decode(p, n, in);
		if (!rc) {
			if (n != STORE_REC_INODE_SIZE)
				fail(kind, "accepted a wrong length", n);
			store_rec_inode_encode(in, enc);
			check_same(kind, enc, p, n);
		}
		free(in);
		break;
	}
	case REC_DIRENT: {
		struct store_rec_dirent *d = malloc(sizeof(*d));
		uint8_t enc[STORE_REC_DIRENT_SIZE];

		rc = store_rec_dirent_decode(p, n, d);
		if (!rc) {
			if (n != STORE_REC_DIRENT_SIZE || d->child == 0)
				fail(kind, "accepted a bad entry", n);
			store_rec_dirent_encode(d, enc);
			check_same(kind, enc, p, n);
		}
		free(d);
		break;
	}
	case REC_DIRENT_KEY:
	case REC_NAME: {
		char *name = malloc(CAIRN_NAME_MAX + 1);
		uint64_t dir = 0;
		size_t len = 0;

		if (kind == REC_NAME) {
			rc = store_rec_name_decode(p, n, name, &len);
			if (!rc)
				check_name(kind, name, len, p, n);
		} else {
			rc = store_rec_dirent_key_decode(p, n, &dir, name,
							 &len);
			if (!rc) {
				if (n < 8 || dir != be64(p))
					fail(kind, "bad key prefix", n);
				check_name(kind, name, len, p + 8, n - 8);
			}
		}
		free(name);
		break;
	}
	case REC_DIRSEQ_KEY: {
		uint64_t dir, cookie;

		rc = store_rec_dirseq_key_decode(p, n, &dir, &cookie);
		if (!rc && (n != 16 || dir != be64(p) ||
			    cookie != be64(p + 8)))
			fail(kind, "key not read as two big-endian u64", n);
		break;
	}
	case REC_META_U32: {
		uint32_t v;
		uint8_t enc[4];

		rc = store_rec_meta_u32_decode(p, n, &v);
		if (!rc) {
			if (n != 4)
				fail(kind, "accepted a wrong length", n);
			store_rec_meta_u32_encode(v, enc);
			check_same(kind, enc, p, n);
		}
		break;
	}
	case REC_META_U64: {
		uint64_t v;
		uint8_t enc[8];

		rc = store_rec_meta_u64_decode(p, n, &v);
		if (!rc) {
			if (n != 8)
				fail(kind, "accepted a wrong length", n);
			store_rec_meta_u64_encode(v, enc);
			check_same(kind, enc, p, n);
		}
		break;
	}
	case REC_META_ID: {
		uint8_t *id = malloc(STORE_REC_ID_SIZE);

		rc = store_rec_meta_id_decode(p, n, id);
		if (!rc && (n != STORE_REC_ID_SIZE || memcmp(id, p, n)))
			fail(kind, "id not copied exactly", n);
		free(id);
		break;
	}
	case REC_SYMLINK: {
		char *t = malloc(CAIRN_SYMLINK_MAX + 1);
		size_t len = 0;

		rc = store_rec_symlink_decode(p, n, t, &len);
		if (!rc)
			check_copy(kind, t, len, p, n, CAIRN_SYMLINK_MAX);
		free(t);
		break;
	}
	case REC_XATTR_KEY: {
		char *name = malloc(CAIRN_XATTR_NAME_MAX + 1);
		uint64_t vn = 0;
		size_t len = 0;

		rc = store_rec_xattr_key_decode(p, n, &vn, name, &len);
		if (!rc) {
			if (n <= 8 || vn != be64(p))
				fail(kind, "bad key prefix", n);
			check_copy(kind, name, len, p + 8, n - 8,
				   CAIRN_XATTR_NAME_MAX);
		}
		free(name);
		break;
	}
	case REC_XATTR_VAL: {
		size_t size = size_sel == 255 ? n : (size_t)size_sel;
		uint8_t *buf = malloc(size ? size : 1);
		size_t len = 0;

		rc = store_rec_xattr_val_decode(p, n, size ? buf : NULL, size,
						&len);
		if (rc == -ERANGE) {
			if (!size || n <= size)
				fail(kind, "-ERANGE although the value fits", n);
			rc = 0; /* a too small buffer, not a bad record */
		} else if (!rc) {
			if (len != n || n > CAIRN_XATTR_SIZE_MAX ||
			    (size && n > size) ||
			    (size && n && memcmp(buf, p, n)))
				fail(kind, "value not given back exactly", n);
		}
		free(buf);
		break;
	}
	case REC_ORPHAN_KEY: {
		uint64_t vn = 0;

		rc = store_rec_orphan_key_decode(p, n, &vn);
		if (!rc && (n != 8 || vn != be64(p) || vn == 0))
			fail(kind, "key not read as a big-endian vnode", n);
		break;
	}
	case REC_ORPHAN: {
		size_t count = 0;

		rc = store_rec_orphan_decode(p, n, &count);
		if (!rc && (n == 0 || n % STORE_REC_HOLDER_SIZE ||
			    count != n / STORE_REC_HOLDER_SIZE ||
			    count > STORE_REC_HOLDERS_MAX))
			fail(kind, "holders not counted exactly", n);
		for (size_t i = 1; !rc && i < count; i++)
			if (memcmp(p + (i - 1) * STORE_REC_HOLDER_SIZE,
				   p + i * STORE_REC_HOLDER_SIZE,
				   STORE_REC_HOLDER_SIZE) >= 0)
				fail(kind, "holders accepted out of order", n);
		break;
	}
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int registered;
	int kind, size_sel = 0, rc;
	const uint8_t *p;
	size_t n;

	if (!registered) {
		registered = 1;
		atexit(print_stats);
	}
	if (size < 1 || data[0] >= REC__COUNT)
		return 0;
	kind = data[0];
	p = data + 1;
	n = size - 1;
	if (kind == REC_XATTR_VAL) {
		if (n < 1)
			return 0;
		size_sel = p[0];
		p++;
		n--;
	}
	tried[kind]++;
	rc = one(kind, n ? p : NULL, n, size_sel);
	if (rc != 0 && rc != -EUCLEAN)
		fail(kind, "error other than -EUCLEAN", n);
	if (!rc)
		accepted[kind]++;
	return 0;
}

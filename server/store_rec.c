/*
 * store_rec.c - encoders and decoders of the store's LMDB records (the
 * layouts and the contract are in store_rec.h).
 *
 * Every decoder first checks the length against what the record must be,
 * then reads only inside it through struct rec (a cursor that refuses to
 * run past the end), then checks the values. The store never writes a
 * record these decoders refuse, so a refusal means damage (a disk or a
 * bug), never a record of another valid shape.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include "store_rec.h"

struct rec {
	const uint8_t *p;
	size_t n, off;
	int err; /* sticky: set when a read would pass the end */
};

static uint64_t rec_le(struct rec *r, size_t n)
{
	uint64_t v = 0;

	if (r->err || r->n - r->off < n) {
		r->err = -EUCLEAN;
		return 0;
	}
	for (size_t i = n; i-- > 0;)
		v = v << 8 | r->p[r->off + i];
	r->off += n;
	return v;
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void le_put(uint8_t **p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++, v >>= 8)
		(*p)[i] = (uint8_t)v;
	*p += n;
}

/* The file types the store creates (store_create, store_symlink). */
static int type_ok(uint32_t type)
{
	switch (type) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO:
	case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		return 1;
	default:
		return 0;
	}
}

/* ---- inode ------------------------------------------------------------ */

void store_rec_inode_encode(const struct sinode *in,
			    uint8_t out[STORE_REC_INODE_SIZE])
{
	uint8_t *p = out;
	const struct cairn_time *t[3] = { &in->atime, &in->mtime, &in->ctime };

	le_put(&p, STORE_REC_INODE_VERSION, 1);
	le_put(&p, in->flags, 1);
	le_put(&p, 0, 2);
	le_put(&p, in->mode, 4);
	le_put(&p, in->nlink, 4);
	le_put(&p, in->uid, 4);
	le_put(&p, in->gid, 4);
	le_put(&p, in->rdev, 4);
	le_put(&p, in->uniq, 4);
	le_put(&p, in->size, 8);
	le_put(&p, in->dv, 8);
	le_put(&p, in->next_cookie, 8);
	le_put(&p, in->parent, 8);
	for (int i = 0; i < 3; i++) {
		le_put(&p, (uint64_t)t[i]->sec, 8);
		le_put(&p, t[i]->nsec, 4);
	}
}

int store_rec_inode_decode(const void *p, size_t n, struct sinode *out)
{
	struct rec r = { p, n, 0, 0 };
	struct cairn_time *t[3] = { &out->atime, &out->mtime, &out->ctime };

	if (n != STORE_REC_INODE_SIZE)
		return -EUCLEAN;
	if (rec_le(&r, 1) != STORE_REC_INODE_VERSION)
		return -EUCLEAN;
	out->flags = (uint32_t)rec_le(&r, 1);
	if (rec_le(&r, 2) != 0 || (out->flags & ~SINODE_FLAGS_ALL))
		return -EUCLEAN;
	out->mode = (uint32_t)rec_le(&r, 4);
	out->nlink = (uint32_t)rec_le(&r, 4);
	out->uid = (uint32_t)rec_le(&r, 4);
	out->gid = (uint32_t)rec_le(&r, 4);
	out->rdev = (uint32_t)rec_le(&r, 4);
	out->uniq = (uint32_t)rec_le(&r, 4);
	out->size = rec_le(&r, 8);
	out->dv = rec_le(&r, 8);
	out->next_cookie = rec_le(&r, 8);
	out->parent = rec_le(&r, 8);
	for (int i = 0; i < 3; i++) {
		t[i]->sec = (int64_t)rec_le(&r, 8);
		t[i]->nsec = (uint32_t)rec_le(&r, 4);
		if (t[i]->nsec >= 1000000000u)
			return -EUCLEAN;
	}
	if (r.err || !type_ok(out->mode & S_IFMT) ||
	    (out->mode & ~(uint32_t)(S_IFMT | 07777)))
		return -EUCLEAN;
	return 0;
}

/* ---- directory entries ------------------------------------------------ */

void store_rec_dirent_encode(const struct store_rec_dirent *in,
			     uint8_t out[STORE_REC_DIRENT_SIZE])
{
	uint8_t *p = out;

	le_put(&p, in->child, 8);
	le_put(&p, in->cookie, 8);
	le_put(&p, in->type, 4);
}

int store_rec_dirent_decode(const void *p, size_t n,
			    struct store_rec_dirent *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != STORE_REC_DIRENT_SIZE)
		return -EUCLEAN;
	out->child = rec_le(&r, 8);
	out->cookie = rec_le(&r, 8);
	out->type = (uint32_t)rec_le(&r, 4);
	if (r.err || out->child == 0 || !type_ok(out->type))
		return -EUCLEAN;
	return 0;
}

int store_rec_name_decode(const void *p, size_t n,
			  char name[CAIRN_NAME_MAX + 1], size_t *len)
{
	if (n == 0 || n > CAIRN_NAME_MAX || memchr(p, '/', n) ||
	    memchr(p, 0, n))
		return -EUCLEAN;
	memcpy(name, p, n);
	name[n] = 0;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return -EUCLEAN;
	*len = n;
	return 0;
}

int store_rec_dirent_key_decode(const void *p, size_t n, uint64_t *dir,
				char name[CAIRN_NAME_MAX + 1], size_t *len)
{
	if (n < 8)
		return -EUCLEAN;
	*dir = be64(p);
	return store_rec_name_decode((const uint8_t *)p + 8, n - 8, name, len);
}

int store_rec_dirseq_key_decode(const void *p, size_t n, uint64_t *dir,
				uint64_t *cookie)
{
	if (n != 16)
		return -EUCLEAN;
	*dir = be64(p);
	*cookie = be64((const uint8_t *)p + 8);
	return 0;
}

/* ---- meta ------------------------------------------------------------- */

int store_rec_meta_u32_decode(const void *p, size_t n, uint32_t *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != 4)
		return -EUCLEAN;
	*out = (uint32_t)rec_le(&r, 4);
	return r.err;
}

int store_rec_meta_u64_decode(const void *p, size_t n, uint64_t *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != 8)
		return -EUCLEAN;
	*out = rec_le(&r, 8);
	return r.err;
}

void store_rec_meta_u32_encode(uint32_t v, uint8_t out[4])
{
	uint8_t *p = out;

	le_put(&p, v, 4);
}

void store_rec_meta_u64_encode(uint64_t v, uint8_t out[8])
{
	uint8_t *p = out;

	le_put(&p, v, 8);
}

int store_rec_meta_id_decode(const void *p, size_t n,
			     uint8_t id[STORE_REC_ID_SIZE])
{
	if (n != STORE_REC_ID_SIZE)
		return -EUCLEAN;
	memcpy(id, p, n);
	return 0;
}

/* ---- symlinks and xattrs ---------------------------------------------- */

int store_rec_symlink_decode(const void *p, size_t n,
			     char target[CAIRN_SYMLINK_MAX + 1], size_t *len)
{
	if (n == 0 || n > CAIRN_SYMLINK_MAX || memchr(p, 0, n))
		return -EUCLEAN;
	memcpy(target, p, n);
	target[n] = 0;
	*len = n;
	return 0;
}

int store_rec_xattr_key_decode(const void *p, size_t n, uint64_t *vn,
			       char name[CAIRN_XATTR_NAME_MAX + 1],
			       size_t *len)
{
	const uint8_t *s;

	if (n <= 8 || n - 8 > CAIRN_XATTR_NAME_MAX)
		return -EUCLEAN;
	s = (const uint8_t *)p + 8;
	if (memchr(s, 0, n - 8))
		return -EUCLEAN;
	*vn = be64(p);
	memcpy(name, s, n - 8);
	name[n - 8] = 0;
	*len = n - 8;
	return 0;
}

int store_rec_xattr_val_decode(const void *p, size_t n, void *buf,
			       size_t size, size_t *len)
{
	if (n > CAIRN_XATTR_SIZE_MAX)
		return -EUCLEAN;
	if (size > 0 && n > size)
		return -ERANGE;
	if (size > 0 && n > 0)
		memcpy(buf, p, n);
	*len = n;
	return 0;
}

/* ---- orphans ---------------------------------------------------------- */

int store_rec_orphan_key_decode(const void *p, size_t n, uint64_t *vn)
{
	if (n != 8 || be64(p) == 0)
		return -EUCLEAN;
	*vn = be64(p);
	return 0;
}

int store_rec_orphan_decode(const void *p, size_t n, size_t *count)
{
	const uint8_t *b = p;
	size_t c = n / STORE_REC_HOLDER_SIZE;

	if (n == 0 || n % STORE_REC_HOLDER_SIZE ||
	    c > STORE_REC_HOLDERS_MAX)
		return -EUCLEAN;
	/* Strictly ascending: one encoding per set of holders. */
	for (size_t i = 1; i < c; i++)
		if (memcmp(b + (i - 1) * STORE_REC_HOLDER_SIZE,
			   b + i * STORE_REC_HOLDER_SIZE,
			   STORE_REC_HOLDER_SIZE) >= 0)
			return -EUCLEAN;
	*count = c;
	return 0;
}

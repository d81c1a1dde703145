/*
 * ccache_rec.c - encoders and decoders of the chunk cache's on-disk
 * records (the layouts and the contract are in ccache_rec.h).
 *
 * Like server/store_rec.c: every decoder checks the length first, reads
 * through a cursor that refuses to run past the end, then checks the
 * values. The cache never writes a record these decoders refuse, so a
 * refusal means damage, and the caller discards what the record describes.
 */
#include <errno.h>
#include <string.h>
#include "ccache_rec.h"

struct rec {
	const uint8_t *p;
	size_t n, off;
	int err; /* sticky: set when a read would pass the end */
};

static uint64_t rec_get(struct rec *r, size_t n, int be)
{
	uint64_t v = 0;

	if (r->err || r->n - r->off < n) {
		r->err = -EUCLEAN;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		size_t at = be ? i : n - 1 - i;

		v = v << 8 | r->p[r->off + at];
	}
	r->off += n;
	return v;
}

static uint64_t rec_le(struct rec *r, size_t n)
{
	return rec_get(r, n, 0);
}

static uint64_t rec_be(struct rec *r, size_t n)
{
	return rec_get(r, n, 1);
}

static void put(uint8_t **p, uint64_t v, int n, int be)
{
	for (int i = 0; i < n; i++, v >>= 8)
		(*p)[be ? n - 1 - i : i] = (uint8_t)v;
	*p += n;
}

static const uint8_t hdr_magic[8] = { 'C', 'a', 'i', 'r', 'n', 'C', 'k',
				      CCACHE_REC_VERSION };

uint32_t ccache_rec_nblk(uint32_t len)
{
	return (uint32_t)(((uint64_t)len + CCACHE_BLOCK - 1) / CCACHE_BLOCK);
}

size_t ccache_rec_hdr_bytes(uint32_t len)
{
	return CCACHE_REC_HDR_FIXED + 4u * (size_t)ccache_rec_nblk(len) + 4u;
}

int ccache_rec_key_eq(const struct ccache_key *a, const struct ccache_key *b)
{
	return a->fid.vol == b->fid.vol && a->fid.vnode == b->fid.vnode &&
	       a->fid.uniq == b->fid.uniq && a->dv == b->dv &&
	       a->idx == b->idx;
}

/* ---- index key, value, lru key ----------------------------------------- */

void ccache_rec_key_encode(const struct ccache_key *k,
			   uint8_t out[CCACHE_REC_KEY_SIZE])
{
	uint8_t *p = out;

	put(&p, k->fid.vol, 4, 1);
	put(&p, k->fid.vnode, 8, 1);
	put(&p, k->fid.uniq, 4, 1);
	put(&p, k->idx, 4, 1);
	put(&p, k->dv, 8, 1);
}

int ccache_rec_key_decode(const void *p, size_t n, struct ccache_key *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != CCACHE_REC_KEY_SIZE)
		return -EUCLEAN;
	out->fid.vol = (uint32_t)rec_be(&r, 4);
	out->fid.vnode = rec_be(&r, 8);
	out->fid.uniq = (uint32_t)rec_be(&r, 4);
	out->idx = (uint32_t)rec_be(&r, 4);
	out->dv = rec_be(&r, 8);
	if (r.err || out->fid.vnode == 0)
		return -EUCLEAN;
	return 0;
}

void ccache_rec_val_encode(const struct ccache_val *v,
			   uint8_t out[CCACHE_REC_VAL_SIZE])
{
	uint8_t *p = out;

	put(&p, v->len, 4, 0);
	put(&p, 0, 4, 0);
	put(&p, v->tick, 8, 0);
}

int ccache_rec_val_decode(const void *p, size_t n, struct ccache_val *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != CCACHE_REC_VAL_SIZE)
		return -EUCLEAN;
	out->len = (uint32_t)rec_le(&r, 4);
	if (rec_le(&r, 4) != 0)
		return -EUCLEAN;
	out->tick = rec_le(&r, 8);
	if (r.err || out->len == 0 || out->len > CCACHE_CHUNK ||
	    out->tick == 0)
		return -EUCLEAN;
	return 0;
}

void ccache_rec_tick_encode(uint64_t tick, uint8_t out[CCACHE_REC_TICK_SIZE])
{
	uint8_t *p = out;

	put(&p, tick, 8, 1);
}

int ccache_rec_tick_decode(const void *p, size_t n, uint64_t *tick)
{
	struct rec r = { p, n, 0, 0 };

	if (n != CCACHE_REC_TICK_SIZE)
		return -EUCLEAN;
	*tick = rec_be(&r, 8);
	return r.err || *tick == 0 ? -EUCLEAN : 0;
}

/* ---- lineage key and value ---------------------------------------------- */

void ccache_rec_fid_encode(const struct cairn_fid *f,
			   uint8_t out[CCACHE_REC_FID_SIZE])
{
	uint8_t *p = out;

	put(&p, f->vol, 4, 1);
	put(&p, f->vnode, 8, 1);
	put(&p, f->uniq, 4, 1);
}

int ccache_rec_fid_decode(const void *p, size_t n, struct cairn_fid *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != CCACHE_REC_FID_SIZE)
		return -EUCLEAN;
	out->vol = (uint32_t)rec_be(&r, 4);
	out->vnode = rec_be(&r, 8);
	out->uniq = (uint32_t)rec_be(&r, 4);
	return r.err || out->vnode == 0 ? -EUCLEAN : 0;
}

void ccache_rec_lin_encode(const struct ccache_lin *l,
			   uint8_t out[CCACHE_REC_LIN_SIZE])
{
	uint8_t *p = out;

	put(&p, l->base, 8, 0);
	put(&p, l->cur, 8, 0);
}

int ccache_rec_lin_decode(const void *p, size_t n, struct ccache_lin *out)
{
	struct rec r = { p, n, 0, 0 };

	if (n != CCACHE_REC_LIN_SIZE)
		return -EUCLEAN;
	out->base = rec_le(&r, 8);
	out->cur = rec_le(&r, 8);
	return r.err || out->base > out->cur ? -EUCLEAN : 0;
}

/* ---- chunk file header -------------------------------------------------- */

size_t ccache_rec_hdr_encode(const struct ccache_hdr *h, uint8_t *out)
{
	uint8_t *p = out;

	memcpy(p, hdr_magic, sizeof(hdr_magic));
	p += sizeof(hdr_magic);
	put(&p, h->key.fid.vol, 4, 0);
	put(&p, h->key.fid.uniq, 4, 0);
	put(&p, h->key.fid.vnode, 8, 0);
	put(&p, h->key.dv, 8, 0);
	put(&p, h->key.idx, 4, 0);
	put(&p, h->len, 4, 0);
	put(&p, h->nblk, 4, 0);
	for (uint32_t i = 0; i < h->nblk && i < CCACHE_MAX_BLOCKS; i++)
		put(&p, h->crc[i], 4, 0);
	put(&p, h->hcrc, 4, 0);
	return (size_t)(p - out);
}

/* The fixed part; leaves r after nblk. */
static int hdr_fixed(struct rec *r, struct ccache_hdr *h)
{
	if (r->n < CCACHE_REC_HDR_FIXED ||
	    memcmp(r->p, hdr_magic, sizeof(hdr_magic)))
		return -EUCLEAN;
	r->off = sizeof(hdr_magic);
	h->key.fid.vol = (uint32_t)rec_le(r, 4);
	h->key.fid.uniq = (uint32_t)rec_le(r, 4);
	h->key.fid.vnode = rec_le(r, 8);
	h->key.dv = rec_le(r, 8);
	h->key.idx = (uint32_t)rec_le(r, 4);
	h->len = (uint32_t)rec_le(r, 4);
	h->nblk = (uint32_t)rec_le(r, 4);
	if (r->err || h->key.fid.vnode == 0 || h->len == 0 ||
	    h->len > CCACHE_CHUNK || h->nblk != ccache_rec_nblk(h->len))
		return -EUCLEAN;
	return 0;
}

int ccache_rec_hdr_size(const void *p, size_t n, size_t *size)
{
	struct rec r = { p, n, 0, 0 };
	struct ccache_hdr h;

	if (n != CCACHE_REC_HDR_FIXED || hdr_fixed(&r, &h))
		return -EUCLEAN;
	*size = ccache_rec_hdr_bytes(h.len);
	return 0;
}

int ccache_rec_hdr_decode(const void *p, size_t n, struct ccache_hdr *out)
{
	struct rec r = { p, n, 0, 0 };

	if (hdr_fixed(&r, out) || n != ccache_rec_hdr_bytes(out->len))
		return -EUCLEAN;
	for (uint32_t i = 0; i < out->nblk; i++)
		out->crc[i] = (uint32_t)rec_le(&r, 4);
	out->hcrc = (uint32_t)rec_le(&r, 4);
	return r.err ? -EUCLEAN : 0;
}

/* ---- file name ------------------------------------------------------------ */

static const char hexd[] = "0123456789abcdef";

static void hex_put(char **s, uint64_t v, int digits)
{
	for (int i = digits - 1; i >= 0; i--, v >>= 4)
		(*s)[i] = hexd[v & 15];
	*s += digits;
}

/* Lower-case hex only, so that each key has one name. */
static int hex_get(const char **s, int digits, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < digits; i++) {
		char c = (*s)[i];
		int d = c >= '0' && c <= '9' ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (d < 0)
			return -EUCLEAN;
		*v = *v << 4 | (uint64_t)d;
	}
	*s += digits;
	return 0;
}

static const int name_digits[5] = { 8, 16, 8, 16, 8 };

void ccache_rec_name_encode(const struct ccache_key *k,
			    char out[CCACHE_REC_NAME_LEN + 1])
{
	uint64_t v[5] = { k->fid.vol, k->fid.vnode, k->fid.uniq, k->dv,
			  k->idx };
	char *s = out;

	for (int i = 0; i < 5; i++) {
		if (i)
			*s++ = '-';
		hex_put(&s, v[i], name_digits[i]);
	}
	*s = '\0';
}

int ccache_rec_name_decode(const char *s, size_t n, struct ccache_key *out)
{
	uint64_t v[5];

	if (n != CCACHE_REC_NAME_LEN)
		return -EUCLEAN;
	for (int i = 0; i < 5; i++) {
		if (i && *s++ != '-')
			return -EUCLEAN;
		if (hex_get(&s, name_digits[i], &v[i]))
			return -EUCLEAN;
	}
	if (v[1] == 0)
		return -EUCLEAN;
	out->fid.vol = (uint32_t)v[0];
	out->fid.vnode = v[1];
	out->fid.uniq = (uint32_t)v[2];
	out->dv = v[3];
	out->idx = (uint32_t)v[4];
	return 0;
}

/* ---- dirty marker ---------------------------------------------------------- */

/* 8-4-4-4-12 lower-case hex digits. */
static int boot_ok(const char *id)
{
	for (int i = 0; i < 36; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;
		char c = id[i];

		if (dash ? c != '-'
			 : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return 1;
}

int ccache_rec_boot_encode(const char *id, uint8_t out[CCACHE_REC_BOOT_LEN])
{
	if (strnlen(id, 37) != 36 || !boot_ok(id))
		return -EINVAL;
	memcpy(out, id, 36);
	out[36] = '\n';
	return 0;
}

int ccache_rec_boot_decode(const void *p, size_t n, char id[37])
{
	const char *s = p;

	if (n != CCACHE_REC_BOOT_LEN || s[36] != '\n' || !boot_ok(s))
		return -EUCLEAN;
	memcpy(id, s, 36);
	id[36] = '\0';
	return 0;
}

/*
 * wire.c - bounds-checked little-endian codec. See wire.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "wire.h"

void wbuf_init(struct wbuf *w)
{
	memset(w, 0, sizeof(*w));
}

void wbuf_free(struct wbuf *w)
{
	free(w->data);
	wbuf_init(w);
}

void wbuf_reset(struct wbuf *w)
{
	w->len = 0;
	w->err = 0;
}

uint8_t *wbuf_reserve(struct wbuf *w, size_t n)
{
	if (w->err)
		return NULL;
	if (n > SIZE_MAX / 2 - w->len) {
		w->err = -ENOMEM;
		return NULL;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap < w->len + n)
			cap *= 2;
		uint8_t *p = realloc(w->data, cap);
		if (!p) {
			w->err = -ENOMEM;
			return NULL;
		}
		w->data = p;
		w->cap = cap;
	}
	uint8_t *p = w->data + w->len;
	w->len += n;
	return p;
}

static void le_store(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_load(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put_le(struct wbuf *w, uint64_t v, int n)
{
	uint8_t *p = wbuf_reserve(w, n);
	if (p)
		le_store(p, v, n);
}

void wire_put_u8(struct wbuf *w, uint8_t v) { put_le(w, v, 1); }
void wire_put_u16(struct wbuf *w, uint16_t v) { put_le(w, v, 2); }
void wire_put_u32(struct wbuf *w, uint32_t v) { put_le(w, v, 4); }
void wire_put_u64(struct wbuf *w, uint64_t v) { put_le(w, v, 8); }
void wire_put_i32(struct wbuf *w, int32_t v) { put_le(w, (uint32_t)v, 4); }
void wire_put_i64(struct wbuf *w, int64_t v) { put_le(w, (uint64_t)v, 8); }

void wire_put_bytes(struct wbuf *w, const void *p, size_t n)
{
	uint8_t *d = wbuf_reserve(w, n);
	if (d && n)
		memcpy(d, p, n);
}

void wire_put_str(struct wbuf *w, const char *s, size_t n)
{
	if (n > UINT16_MAX) {
		if (!w->err)
			w->err = -ENAMETOOLONG;
		return;
	}
	wire_put_u16(w, (uint16_t)n);
	wire_put_bytes(w, s, n);
}

void wire_put_blob(struct wbuf *w, const void *p, size_t n)
{
	if (n > UINT32_MAX) {
		if (!w->err)
			w->err = -EFBIG;
		return;
	}
	wire_put_u32(w, (uint32_t)n);
	wire_put_bytes(w, p, n);
}

void wire_put_fid(struct wbuf *w, const struct cairn_fid *f)
{
	wire_put_u32(w, f->vol);
	wire_put_u64(w, f->vnode);
	wire_put_u32(w, f->uniq);
}

void wire_put_time(struct wbuf *w, const struct cairn_time *t)
{
	wire_put_i64(w, t->sec);
	wire_put_u32(w, t->nsec);
}

void wire_put_attr(struct wbuf *w, const struct cairn_attr *a)
{
	wire_put_fid(w, &a->fid);
	wire_put_u32(w, a->mode);
	wire_put_u32(w, a->nlink);
	wire_put_u32(w, a->uid);
	wire_put_u32(w, a->gid);
	wire_put_u32(w, a->rdev);
	wire_put_u64(w, a->size);
	wire_put_u64(w, a->blocks);
	wire_put_time(w, &a->atime);
	wire_put_time(w, &a->mtime);
	wire_put_time(w, &a->ctime);
	wire_put_u64(w, a->dv);
}

void wire_put_statfs(struct wbuf *w, const struct cairn_statfs *s)
{
	wire_put_u64(w, s->blocks);
	wire_put_u64(w, s->bfree);
	wire_put_u64(w, s->bavail);
	wire_put_u64(w, s->files);
	wire_put_u64(w, s->ffree);
	wire_put_u32(w, s->bsize);
	wire_put_u32(w, s->namemax);
}

size_t wire_frame_begin(struct wbuf *w, uint16_t op, uint16_t flags,
			uint32_t id, int32_t status)
{
	size_t off = w->len;
	wire_put_u32(w, 0);
	wire_put_u16(w, op);
	wire_put_u16(w, flags);
	wire_put_u32(w, id);
	wire_put_i32(w, status);
	return off;
}

void wire_frame_end(struct wbuf *w, size_t hdr_off)
{
	if (w->err)
		return;
	size_t len = w->len - hdr_off - WIRE_HDR_SIZE;
	if (len > WIRE_MAX_PAYLOAD) {
		w->err = -EMSGSIZE;
		return;
	}
	le_store(w->data + hdr_off, len, 4);
}

void wire_hdr_encode(uint8_t buf[WIRE_HDR_SIZE], const struct wire_hdr *h)
{
	le_store(buf, h->len, 4);
	le_store(buf + 4, h->op, 2);
	le_store(buf + 6, h->flags, 2);
	le_store(buf + 8, h->id, 4);
	le_store(buf + 12, (uint32_t)h->status, 4);
}

int wire_hdr_decode(const uint8_t buf[WIRE_HDR_SIZE], struct wire_hdr *h)
{
	h->len = (uint32_t)le_load(buf, 4);
	h->op = (uint16_t)le_load(buf + 4, 2);
	h->flags = (uint16_t)le_load(buf + 6, 2);
	h->id = (uint32_t)le_load(buf + 8, 4);
	h->status = (int32_t)(uint32_t)le_load(buf + 12, 4);
	return h->len > WIRE_MAX_PAYLOAD + WIRE_TAG_SIZE ? -EMSGSIZE : 0;
}

void rbuf_init(struct rbuf *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->err = 0;
}

/* Consume n bytes; NULL (and sticky -EPROTO) if they are not there. */
static const uint8_t *take(struct rbuf *r, size_t n)
{
	if (r->err)
		return NULL;
	if (n > r->len - r->off) {
		r->err = -EPROTO;
		return NULL;
	}
	const uint8_t *p = r->p + r->off;
	r->off += n;
	return p;
}

static uint64_t get_le(struct rbuf *r, int n)
{
	const uint8_t *p = take(r, n);
	return p ? le_load(p, n) : 0;
}

uint8_t wire_get_u8(struct rbuf *r) { return (uint8_t)get_le(r, 1); }
uint16_t wire_get_u16(struct rbuf *r) { return (uint16_t)get_le(r, 2); }
uint32_t wire_get_u32(struct rbuf *r) { return (uint32_t)get_le(r, 4); }
uint64_t wire_get_u64(struct rbuf *r) { return get_le(r, 8); }
int32_t wire_get_i32(struct rbuf *r) { return (int32_t)(uint32_t)get_le(r, 4); }
int64_t wire_get_i64(struct rbuf *r) { return (int64_t)get_le(r, 8); }

const void *wire_get_bytes(struct rbuf *r, size_t n)
{
	return take(r, n);
}

const char *wire_get_str(struct rbuf *r, size_t *n, size_t max)
{
	size_t len = wire_get_u16(r);
	*n = 0;
	if (r->err)
		return NULL;
	if (len > max) {
		r->err = -EPROTO;
		return NULL;
	}
	const char *p = (const char *)take(r, len);
	if (p)
		*n = len;
	return p;
}

size_t wire_get_cstr(struct rbuf *r, char *dst, size_t dstsz)
{
	size_t n;
	const char *p = wire_get_str(r, &n, dstsz ? dstsz - 1 : 0);
	if (dstsz)
		dst[0] = '\0';
	if (!p)
		return 0;
	if (memchr(p, '\0', n)) {
		r->err = -EPROTO;
		return 0;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
	return n;
}

const void *wire_get_blob(struct rbuf *r, size_t *n, size_t max)
{
	size_t len = wire_get_u32(r);
	*n = 0;
	if (r->err)
		return NULL;
	if (len > max) {
		r->err = -EPROTO;
		return NULL;
	}
	const void *p = take(r, len);
	if (p)
		*n = len;
	return p;
}

void wire_get_fid(struct rbuf *r, struct cairn_fid *f)
{
	f->vol = wire_get_u32(r);
	f->vnode = wire_get_u64(r);
	f->uniq = wire_get_u32(r);
}

void wire_get_time(struct rbuf *r, struct cairn_time *t)
{
	t->sec = wire_get_i64(r);
	t->nsec = wire_get_u32(r);
	if (t->nsec >= 1000000000u && !r->err)
		r->err = -EPROTO;
}

void wire_get_attr(struct rbuf *r, struct cairn_attr *a)
{
	wire_get_fid(r, &a->fid);
	a->mode = wire_get_u32(r);
	a->nlink = wire_get_u32(r);
	a->uid = wire_get_u32(r);
	a->gid = wire_get_u32(r);
	a->rdev = wire_get_u32(r);
	a->size = wire_get_u64(r);
	a->blocks = wire_get_u64(r);
	wire_get_time(r, &a->atime);
	wire_get_time(r, &a->mtime);
	wire_get_time(r, &a->ctime);
	a->dv = wire_get_u64(r);
}

void wire_get_statfs(struct rbuf *r, struct cairn_statfs *s)
{
	s->blocks = wire_get_u64(r);
	s->bfree = wire_get_u64(r);
	s->bavail = wire_get_u64(r);
	s->files = wire_get_u64(r);
	s->ffree = wire_get_u64(r);
	s->bsize = wire_get_u32(r);
	s->namemax = wire_get_u32(r);
}

int wire_get_end(struct rbuf *r)
{
	if (!r->err && r->off != r->len)
		r->err = -EPROTO;
	return r->err;
}

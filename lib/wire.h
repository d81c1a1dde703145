/*
 * wire.h - bounds-checked little-endian encoding and decoding.
 *
 * A `struct wbuf` is a growable output buffer; a `struct rbuf` is a view on
 * received bytes. Both carry a sticky error: after the first failure
 * (allocation for wbuf, running past the end or a bad value for rbuf) every
 * further call is a no-op, so a handler decodes all its fields and checks
 * `r.err` once at the end.
 *
 * Types on the wire (see docs/PROTOCOL.md):
 *   u8 u16 u32 u64 i32 i64   little-endian integers
 *   str                      u16 length + bytes (no NUL)
 *   blob                     u32 length + bytes
 *   fid                      u32 vol, u64 vnode, u32 uniq
 *   time                     i64 sec, u32 nsec
 *   attr                     fid, u32 mode, nlink, uid, gid, rdev,
 *                            u64 size, blocks, time atime, mtime, ctime,
 *                            u64 dv
 */
#ifndef CAIRN_WIRE_H
#define CAIRN_WIRE_H

#include <stdint.h>
#include <stddef.h>
#include "proto.h"

struct wbuf {
	uint8_t *data;  /* owned; NULL until the first put */
	size_t len;
	size_t cap;
	int err;        /* 0 or -ENOMEM, sticky */
};

struct rbuf {
	const uint8_t *p; /* not owned; must outlive the rbuf */
	size_t len;
	size_t off;
	int err;          /* 0 or -EPROTO, sticky */
};

/* Frame header as decoded. */
struct wire_hdr {
	uint32_t len;
	uint16_t op;
	uint16_t flags;
	uint32_t id;
	int32_t status;
};

void wbuf_init(struct wbuf *w);
void wbuf_free(struct wbuf *w);
/* Reset to empty, keeping the allocation. */
void wbuf_reset(struct wbuf *w);
/* Reserve `n` bytes at the end and return a pointer to them (NULL and
 * w->err set on failure). The caller fills them. */
uint8_t *wbuf_reserve(struct wbuf *w, size_t n);

void wire_put_u8(struct wbuf *w, uint8_t v);
void wire_put_u16(struct wbuf *w, uint16_t v);
void wire_put_u32(struct wbuf *w, uint32_t v);
void wire_put_u64(struct wbuf *w, uint64_t v);
void wire_put_i32(struct wbuf *w, int32_t v);
void wire_put_i64(struct wbuf *w, int64_t v);
void wire_put_bytes(struct wbuf *w, const void *p, size_t n);
/* str: n must be <= 65535, else w->err = -ENAMETOOLONG. */
void wire_put_str(struct wbuf *w, const char *s, size_t n);
void wire_put_blob(struct wbuf *w, const void *p, size_t n);
void wire_put_fid(struct wbuf *w, const struct cairn_fid *f);
void wire_put_time(struct wbuf *w, const struct cairn_time *t);
void wire_put_attr(struct wbuf *w, const struct cairn_attr *a);
void wire_put_statfs(struct wbuf *w, const struct cairn_statfs *s);

/*
 * Frames. wire_frame_begin() appends a header with len 0; wire_frame_end()
 * patches len to the number of bytes appended since begin. One wbuf may hold
 * several frames back to back. Returns the offset of the header.
 */
size_t wire_frame_begin(struct wbuf *w, uint16_t op, uint16_t flags,
			uint32_t id, int32_t status);
void wire_frame_end(struct wbuf *w, size_t hdr_off);

/* Encode a 16-byte header (h->len is written as given). */
void wire_hdr_encode(uint8_t buf[WIRE_HDR_SIZE], const struct wire_hdr *h);
/* Decode a 16-byte header. Returns 0, or -EMSGSIZE if len exceeds
 * WIRE_MAX_PAYLOAD + WIRE_TAG_SIZE (a sealed frame: lib/seal.h). */
int wire_hdr_decode(const uint8_t buf[WIRE_HDR_SIZE], struct wire_hdr *h);

void rbuf_init(struct rbuf *r, const void *p, size_t len);
/* Bytes not yet consumed. */
static inline size_t rbuf_left(const struct rbuf *r) { return r->len - r->off; }

uint8_t  wire_get_u8(struct rbuf *r);
uint16_t wire_get_u16(struct rbuf *r);
uint32_t wire_get_u32(struct rbuf *r);
uint64_t wire_get_u64(struct rbuf *r);
int32_t  wire_get_i32(struct rbuf *r);
int64_t  wire_get_i64(struct rbuf *r);
/* Returns a pointer into the buffer (not copied) or NULL on error. */
const void *wire_get_bytes(struct rbuf *r, size_t n);
/*
 * str: returns a pointer to the bytes (NOT NUL-terminated) and stores the
 * length in *n. Fails (err = -EPROTO) if the length exceeds `max`.
 */
const char *wire_get_str(struct rbuf *r, size_t *n, size_t max);
/* Same as wire_get_str but copies into dst (size dstsz, NUL-terminated) and
 * fails if it does not fit or contains a NUL byte. Returns the length. */
size_t wire_get_cstr(struct rbuf *r, char *dst, size_t dstsz);
const void *wire_get_blob(struct rbuf *r, size_t *n, size_t max);
void wire_get_fid(struct rbuf *r, struct cairn_fid *f);
void wire_get_time(struct rbuf *r, struct cairn_time *t);
void wire_get_attr(struct rbuf *r, struct cairn_attr *a);
void wire_get_statfs(struct rbuf *r, struct cairn_statfs *s);
/* Succeeds only if every byte was consumed and no error occurred:
 * returns 0 or -EPROTO. Handlers call this after decoding a request. */
int wire_get_end(struct rbuf *r);

#endif

/*
 * msg.c - the codec of every Cairn message and the opcode descriptors.
 * See msg.h; docs/PROTOCOL.md is the normative layout, and
 * tests/unit/test_msg.c checks that the two agree.
 *
 * Each codec function takes the op's struct as void * so the descriptor
 * table can hold them all; the first line of each names the real type.
 * Decoders read every field and let the rbuf's sticky error speak once,
 * at the end (wire.h).
 */
#include <errno.h>
#include <string.h>
#include "debug.h"
#include "msg.h"

/* Largest str/blob the structural decoder accepts; receivers apply the
 * protocol's tighter limits as policy (msg_name_check, CAIRN_MAX_IO). */
#define STR_ANY  65535u
#define BLOB_ANY WIRE_MAX_PAYLOAD

static int dec_end(struct rbuf *r)
{
	return r->err ? -EPROTO : 0;
}

static void put_str(struct wbuf *w, const struct msg_str *s)
{
	wire_put_str(w, s->len ? s->p : "", s->len);
}

static void get_str(struct rbuf *r, struct msg_str *s)
{
	s->p = wire_get_str(r, &s->len, STR_ANY);
	if (!s->p)
		s->len = 0;
}

/* A u8 that is 0 or 1; anything else would be a second encoding of the
 * same reply. */
static uint8_t get_bool(struct rbuf *r)
{
	uint8_t v = wire_get_u8(r);

	if (v > 1)
		r->err = -EPROTO;
	return v;
}

static void put_bytes(struct wbuf *w, const struct msg_bytes *b)
{
	wire_put_blob(w, b->len ? b->p : "", b->len);
}

static void get_bytes(struct rbuf *r, struct msg_bytes *b)
{
	b->p = wire_get_blob(r, &b->len, BLOB_ANY);
	if (!b->p)
		b->len = 0;
}

/* --- shared shapes ---------------------------------------------------------- */

static void enc_empty(struct wbuf *w, const void *m)
{
	(void)w;
	(void)m;
}

static int dec_empty(struct rbuf *r, void *m)
{
	(void)m;
	return dec_end(r);
}

static void enc_fid(struct wbuf *w, const void *m)
{
	wire_put_fid(w, &((const struct msg_fid *)m)->fid);
}

static int dec_fid(struct rbuf *r, void *m)
{
	wire_get_fid(r, &((struct msg_fid *)m)->fid);
	return dec_end(r);
}

static void enc_attr(struct wbuf *w, const void *m)
{
	wire_put_attr(w, &((const struct msg_attr *)m)->attr);
}

static int dec_attr(struct rbuf *r, void *m)
{
	wire_get_attr(r, &((struct msg_attr *)m)->attr);
	return dec_end(r);
}

static void enc_attr2(struct wbuf *w, const void *m)
{
	const struct msg_attr2 *a = m;

	wire_put_attr(w, &a->a);
	wire_put_attr(w, &a->b);
}

static int dec_attr2(struct rbuf *r, void *m)
{
	struct msg_attr2 *a = m;

	wire_get_attr(r, &a->a);
	wire_get_attr(r, &a->b);
	return dec_end(r);
}

/* --- AUTH -------------------------------------------------------------------- */

static void get_fixed(struct rbuf *r, uint8_t *dst, size_t n)
{
	const void *p = wire_get_bytes(r, n);

	if (p)
		memcpy(dst, p, n);
}

static void enc_auth_req(struct wbuf *w, const void *m)
{
	const struct msg_auth_req *a = m;

	wire_put_u32(w, a->magic);
	wire_put_u32(w, a->version);
	wire_put_bytes(w, a->nonce, sizeof(a->nonce));
	wire_put_bytes(w, a->key_id, sizeof(a->key_id));
}

static int dec_auth_req(struct rbuf *r, void *m)
{
	struct msg_auth_req *a = m;

	a->magic = wire_get_u32(r);
	a->version = wire_get_u32(r);
	get_fixed(r, a->nonce, sizeof(a->nonce));
	get_fixed(r, a->key_id, sizeof(a->key_id));
	return dec_end(r);
}

static void enc_auth_rep(struct wbuf *w, const void *m)
{
	const struct msg_auth_rep *a = m;

	wire_put_bytes(w, a->nonce, sizeof(a->nonce));
	wire_put_bytes(w, a->proof, sizeof(a->proof));
}

static int dec_auth_rep(struct rbuf *r, void *m)
{
	struct msg_auth_rep *a = m;

	get_fixed(r, a->nonce, sizeof(a->nonce));
	get_fixed(r, a->proof, sizeof(a->proof));
	return dec_end(r);
}

/* --- HELLO ------------------------------------------------------------------- */

static void enc_hello_req(struct wbuf *w, const void *m)
{
	const struct msg_hello_req *h = m;

	wire_put_u32(w, h->magic);
	wire_put_u32(w, h->version);
	wire_put_bytes(w, h->client_id, sizeof(h->client_id));
	wire_put_u32(w, h->flags);
}

static int dec_hello_req(struct rbuf *r, void *m)
{
	struct msg_hello_req *h = m;
	const void *id;

	h->magic = wire_get_u32(r);
	h->version = wire_get_u32(r);
	id = wire_get_bytes(r, sizeof(h->client_id));
	if (id)
		memcpy(h->client_id, id, sizeof(h->client_id));
	h->flags = wire_get_u32(r);
	return dec_end(r);
}

static void enc_hello_rep(struct wbuf *w, const void *m)
{
	const struct msg_hello_rep *h = m;

	wire_put_u32(w, h->version);
	wire_put_bytes(w, h->server_id, sizeof(h->server_id));
	wire_put_u64(w, h->epoch);
	wire_put_attr(w, &h->root);
	wire_put_u32(w, h->flags);
}

static int dec_hello_rep(struct rbuf *r, void *m)
{
	struct msg_hello_rep *h = m;
	const void *id;

	h->version = wire_get_u32(r);
	id = wire_get_bytes(r, sizeof(h->server_id));
	if (id)
		memcpy(h->server_id, id, sizeof(h->server_id));
	h->epoch = wire_get_u64(r);
	wire_get_attr(r, &h->root);
	h->flags = wire_get_u32(r);
	return dec_end(r);
}

/* --- names ------------------------------------------------------------------- */

static void enc_lookup_req(struct wbuf *w, const void *m)
{
	const struct msg_lookup_req *q = m;

	wire_put_fid(w, &q->dir);
	put_str(w, &q->name);
}

static int dec_lookup_req(struct rbuf *r, void *m)
{
	struct msg_lookup_req *q = m;

	wire_get_fid(r, &q->dir);
	get_str(r, &q->name);
	return dec_end(r);
}

static void enc_setattr_req(struct wbuf *w, const void *m)
{
	const struct msg_setattr_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u32(w, q->valid);
	wire_put_u32(w, q->mode);
	wire_put_u32(w, q->uid);
	wire_put_u32(w, q->gid);
	wire_put_u64(w, q->size);
	wire_put_time(w, &q->atime);
	wire_put_time(w, &q->mtime);
	wire_put_time(w, &q->ctime);
}

static int dec_setattr_req(struct rbuf *r, void *m)
{
	struct msg_setattr_req *q = m;

	wire_get_fid(r, &q->fid);
	q->valid = wire_get_u32(r);
	q->mode = wire_get_u32(r);
	q->uid = wire_get_u32(r);
	q->gid = wire_get_u32(r);
	q->size = wire_get_u64(r);
	wire_get_time(r, &q->atime);
	wire_get_time(r, &q->mtime);
	wire_get_time(r, &q->ctime);
	return dec_end(r);
}

static void enc_create_req(struct wbuf *w, const void *m)
{
	const struct msg_create_req *q = m;

	wire_put_fid(w, &q->dir);
	put_str(w, &q->name);
	wire_put_u32(w, q->mode);
	wire_put_u32(w, q->uid);
	wire_put_u32(w, q->gid);
	wire_put_u32(w, q->rdev);
	wire_put_u32(w, q->flags);
	wire_put_fid(w, &q->fid);
	wire_put_time(w, &q->time);
	put_bytes(w, &q->data);
}

static int dec_create_req(struct rbuf *r, void *m)
{
	struct msg_create_req *q = m;

	wire_get_fid(r, &q->dir);
	get_str(r, &q->name);
	q->mode = wire_get_u32(r);
	q->uid = wire_get_u32(r);
	q->gid = wire_get_u32(r);
	q->rdev = wire_get_u32(r);
	q->flags = wire_get_u32(r);
	wire_get_fid(r, &q->fid);
	wire_get_time(r, &q->time);
	get_bytes(r, &q->data);
	return dec_end(r);
}

static void enc_fids_req(struct wbuf *w, const void *m)
{
	wire_put_u32(w, ((const struct msg_fids_req *)m)->count);
}

static int dec_fids_req(struct rbuf *r, void *m)
{
	((struct msg_fids_req *)m)->count = wire_get_u32(r);
	return dec_end(r);
}

static void enc_fids_rep(struct wbuf *w, const void *m)
{
	const struct msg_fids_rep *p = m;

	wire_put_fid(w, &p->first);
	wire_put_u32(w, p->count);
}

static int dec_fids_rep(struct rbuf *r, void *m)
{
	struct msg_fids_rep *p = m;

	wire_get_fid(r, &p->first);
	p->count = wire_get_u32(r);
	return dec_end(r);
}

static void enc_create_rep(struct wbuf *w, const void *m)
{
	const struct msg_create_rep *p = m;

	wire_put_u8(w, p->created & (CREATED | CREATED_TOKEN));
	wire_put_attr(w, &p->child);
	wire_put_attr(w, &p->dir);
}

static int dec_create_rep(struct rbuf *r, void *m)
{
	struct msg_create_rep *p = m;

	p->created = wire_get_u8(r);
	if (p->created > (CREATED | CREATED_TOKEN))
		r->err = -EPROTO;
	wire_get_attr(r, &p->child);
	wire_get_attr(r, &p->dir);
	return dec_end(r);
}

static void enc_symlink_req(struct wbuf *w, const void *m)
{
	const struct msg_symlink_req *q = m;

	wire_put_fid(w, &q->dir);
	put_str(w, &q->name);
	put_str(w, &q->target);
	wire_put_u32(w, q->uid);
	wire_put_u32(w, q->gid);
}

static int dec_symlink_req(struct rbuf *r, void *m)
{
	struct msg_symlink_req *q = m;

	wire_get_fid(r, &q->dir);
	get_str(r, &q->name);
	get_str(r, &q->target);
	q->uid = wire_get_u32(r);
	q->gid = wire_get_u32(r);
	return dec_end(r);
}

static void enc_readlink_rep(struct wbuf *w, const void *m)
{
	put_str(w, &((const struct msg_readlink_rep *)m)->target);
}

static int dec_readlink_rep(struct rbuf *r, void *m)
{
	get_str(r, &((struct msg_readlink_rep *)m)->target);
	return dec_end(r);
}

static void enc_link_req(struct wbuf *w, const void *m)
{
	const struct msg_link_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_fid(w, &q->dir);
	put_str(w, &q->name);
}

static int dec_link_req(struct rbuf *r, void *m)
{
	struct msg_link_req *q = m;

	wire_get_fid(r, &q->fid);
	wire_get_fid(r, &q->dir);
	get_str(r, &q->name);
	return dec_end(r);
}

static void enc_remove_req(struct wbuf *w, const void *m)
{
	const struct msg_remove_req *q = m;

	wire_put_fid(w, &q->dir);
	put_str(w, &q->name);
	wire_put_u32(w, q->flags);
	wire_put_fid(w, &q->victim);
}

static int dec_remove_req(struct rbuf *r, void *m)
{
	struct msg_remove_req *q = m;

	wire_get_fid(r, &q->dir);
	get_str(r, &q->name);
	q->flags = wire_get_u32(r);
	wire_get_fid(r, &q->victim);
	return dec_end(r);
}

static void enc_rename_req(struct wbuf *w, const void *m)
{
	const struct msg_rename_req *q = m;

	wire_put_fid(w, &q->sdir);
	put_str(w, &q->sname);
	wire_put_fid(w, &q->ddir);
	put_str(w, &q->dname);
	wire_put_u32(w, q->flags);
}

static int dec_rename_req(struct rbuf *r, void *m)
{
	struct msg_rename_req *q = m;

	wire_get_fid(r, &q->sdir);
	get_str(r, &q->sname);
	wire_get_fid(r, &q->ddir);
	get_str(r, &q->dname);
	q->flags = wire_get_u32(r);
	return dec_end(r);
}

/* --- READDIR ----------------------------------------------------------------- */

static void enc_readdir_req(struct wbuf *w, const void *m)
{
	const struct msg_readdir_req *q = m;

	wire_put_fid(w, &q->dir);
	wire_put_u64(w, q->cookie);
	wire_put_u32(w, q->max);
}

static int dec_readdir_req(struct rbuf *r, void *m)
{
	struct msg_readdir_req *q = m;

	wire_get_fid(r, &q->dir);
	q->cookie = wire_get_u64(r);
	q->max = wire_get_u32(r);
	return dec_end(r);
}

static void get_dirent(struct rbuf *r, struct msg_dirent *e)
{
	e->next_cookie = wire_get_u64(r);
	get_str(r, &e->name);
	wire_get_attr(r, &e->attr);
}

void msg_dirent_put(struct wbuf *w, const struct msg_dirent *e)
{
	wire_put_u64(w, e->next_cookie);
	put_str(w, &e->name);
	wire_put_attr(w, &e->attr);
}

/* Smallest encoded entry: cookie, empty name, attr. */
#define DIRENT_MIN (8u + 2u + WIRE_ATTR_SIZE)
/* Smallest CB_BREAK record: fid, an empty name and the flags. */
#define CBREC_MIN  (WIRE_FID_SIZE + 2u + 1u)

/*
 * count records of at least min bytes each, walked with next: check them
 * all now (so consumers never see a half-valid list) and remember where
 * they are.
 */
static void get_records(struct rbuf *r, uint32_t count, size_t min,
			void (*next)(struct rbuf *, void *), void *scratch,
			struct msg_bytes *out)
{
	size_t start = r->off;

	out->p = NULL;
	out->len = 0;
	if (r->err || count > rbuf_left(r) / min) {
		r->err = -EPROTO;
		return;
	}
	for (uint32_t i = 0; i < count && !r->err; i++)
		next(r, scratch);
	if (!r->err) {
		out->p = r->p + start;
		out->len = r->off - start;
	}
}

/* The next record of a decoded list (it: an rbuf over the list), read by
 * next: 1, or 0 at its end. Never fails on a list msg_decode accepted. */
static int next_record(struct rbuf *it, void (*next)(struct rbuf *, void *),
		       void *rec)
{
	if (rbuf_left(it) == 0 || it->err)
		return 0;
	next(it, rec);
	return it->err ? 0 : 1;
}

static void next_dirent(struct rbuf *r, void *scratch)
{
	get_dirent(r, scratch);
}

static void enc_readdir_rep(struct wbuf *w, const void *m)
{
	const struct msg_readdir_rep *p = m;

	wire_put_u32(w, p->count);
	wire_put_u8(w, p->eof ? 1 : 0);
	wire_put_bytes(w, p->ents.len ? p->ents.p : "", p->ents.len);
}

static int dec_readdir_rep(struct rbuf *r, void *m)
{
	struct msg_readdir_rep *p = m;
	struct msg_dirent e;

	p->count = wire_get_u32(r);
	p->eof = get_bool(r);
	get_records(r, p->count, DIRENT_MIN, next_dirent, &e, &p->ents);
	return dec_end(r);
}

size_t msg_readdir_rep_begin(struct wbuf *w)
{
	size_t at = w->len;

	wire_put_u32(w, 0);
	wire_put_u8(w, 0);
	return at;
}

/* Patch bytes reserved at `at` in place: the room is there, so the puts
 * cannot reallocate. */
#define PATCH(w, at, puts) do {			\
		size_t end_ = (w)->len;		\
		if ((w)->err)			\
			break;			\
		(w)->len = (at);		\
		puts;				\
		(w)->len = end_;		\
	} while (0)

void msg_readdir_rep_end(struct wbuf *w, size_t at, uint32_t count, int eof)
{
	PATCH(w, at, (wire_put_u32(w, count), wire_put_u8(w, eof ? 1 : 0)));
}

int msg_dirent_next(struct rbuf *it, struct msg_dirent *e)
{
	if (rbuf_left(it) == 0 || it->err)
		return 0;
	get_dirent(it, e);
	return it->err ? 0 : 1;
}

/* --- BULKSTAT ---------------------------------------------------------------- */

static void enc_bulkstat_req(struct wbuf *w, const void *m)
{
	const struct msg_bulkstat_req *q = m;

	wire_put_fid(w, &q->dir);
	wire_put_u64(w, q->cookie);
	wire_put_u32(w, q->max);
	wire_put_u32(w, q->flags);
}

static int dec_bulkstat_req(struct rbuf *r, void *m)
{
	struct msg_bulkstat_req *q = m;

	wire_get_fid(r, &q->dir);
	q->cookie = wire_get_u64(r);
	q->max = wire_get_u32(r);
	q->flags = wire_get_u32(r);
	return dec_end(r);
}

static void enc_bulkstat_rep(struct wbuf *w, const void *m)
{
	const struct msg_bulkstat_rep *p = m;

	wire_put_attr(w, &p->dir);
	wire_put_u64(w, p->new_cookie);
	wire_put_u32(w, p->count);
	wire_put_u8(w, p->eof ? 1 : 0);
	wire_put_bytes(w, p->ents.len ? p->ents.p : "", p->ents.len);
}

static int dec_bulkstat_rep(struct rbuf *r, void *m)
{
	struct msg_bulkstat_rep *p = m;
	struct msg_dirent e;

	wire_get_attr(r, &p->dir);
	p->new_cookie = wire_get_u64(r);
	p->count = wire_get_u32(r);
	p->eof = get_bool(r);
	get_records(r, p->count, DIRENT_MIN, next_dirent, &e, &p->ents);
	return dec_end(r);
}

size_t msg_bulkstat_rep_begin(struct wbuf *w)
{
	static const struct cairn_attr zero;
	size_t at = w->len;

	wire_put_attr(w, &zero);
	wire_put_u64(w, 0);
	wire_put_u32(w, 0);
	wire_put_u8(w, 0);
	return at;
}

void msg_bulkstat_rep_end(struct wbuf *w, size_t at,
			  const struct cairn_attr *dir, uint64_t new_cookie,
			  uint32_t count, int eof)
{
	PATCH(w, at, (wire_put_attr(w, dir), wire_put_u64(w, new_cookie),
		      wire_put_u32(w, count), wire_put_u8(w, eof ? 1 : 0)));
}

size_t msg_dirent_size(size_t namelen)
{
	return DIRENT_MIN + namelen;
}

/* --- data -------------------------------------------------------------------- */

static void enc_read_req(struct wbuf *w, const void *m)
{
	const struct msg_read_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u64(w, q->off);
	wire_put_u32(w, q->len);
}

static int dec_read_req(struct rbuf *r, void *m)
{
	struct msg_read_req *q = m;

	wire_get_fid(r, &q->fid);
	q->off = wire_get_u64(r);
	q->len = wire_get_u32(r);
	return dec_end(r);
}

static void enc_read_rep(struct wbuf *w, const void *m)
{
	const struct msg_read_rep *p = m;

	wire_put_attr(w, &p->attr);
	put_bytes(w, &p->data);
}

static int dec_read_rep(struct rbuf *r, void *m)
{
	struct msg_read_rep *p = m;

	wire_get_attr(r, &p->attr);
	get_bytes(r, &p->data);
	return dec_end(r);
}

uint8_t *msg_read_rep_reserve(struct wbuf *w, uint32_t len, size_t *at)
{
	uint8_t *p;

	*at = w->len;
	p = wbuf_reserve(w, WIRE_ATTR_SIZE + 4 + (size_t)len);
	return p ? p + WIRE_ATTR_SIZE + 4 : NULL;
}

void msg_read_rep_finish(struct wbuf *w, size_t at,
			 const struct cairn_attr *a, uint32_t n)
{
	if (w->err)
		return;
	/* n never exceeds what msg_read_rep_reserve set aside. */
	CAIRN_ASSERT(at + WIRE_ATTR_SIZE + 4 + (size_t)n <= w->len);
	w->len = at;
	wire_put_attr(w, a);
	wire_put_u32(w, n);
	w->len = at + WIRE_ATTR_SIZE + 4 + n;
}

static void enc_write_req(struct wbuf *w, const void *m)
{
	const struct msg_write_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u64(w, q->off);
	wire_put_u32(w, q->flags);
	put_bytes(w, &q->data);
}

static int dec_write_req(struct rbuf *r, void *m)
{
	struct msg_write_req *q = m;

	wire_get_fid(r, &q->fid);
	q->off = wire_get_u64(r);
	q->flags = wire_get_u32(r);
	get_bytes(r, &q->data);
	return dec_end(r);
}

static void enc_writeattr_req(struct wbuf *w, const void *m)
{
	const struct msg_writeattr_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u64(w, q->off);
	wire_put_u32(w, q->flags);
	wire_put_u32(w, q->valid);
	wire_put_u32(w, q->mode);
	wire_put_u32(w, q->uid);
	wire_put_u32(w, q->gid);
	wire_put_u32(w, q->steps);
	wire_put_time(w, &q->atime);
	wire_put_time(w, &q->mtime);
	wire_put_time(w, &q->ctime);
	put_bytes(w, &q->data);
}

static int dec_writeattr_req(struct rbuf *r, void *m)
{
	struct msg_writeattr_req *q = m;

	wire_get_fid(r, &q->fid);
	q->off = wire_get_u64(r);
	q->flags = wire_get_u32(r);
	q->valid = wire_get_u32(r);
	q->mode = wire_get_u32(r);
	q->uid = wire_get_u32(r);
	q->gid = wire_get_u32(r);
	q->steps = wire_get_u32(r);
	wire_get_time(r, &q->atime);
	wire_get_time(r, &q->mtime);
	wire_get_time(r, &q->ctime);
	get_bytes(r, &q->data);
	return dec_end(r);
}

static void enc_fsync_req(struct wbuf *w, const void *m)
{
	const struct msg_fsync_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u32(w, q->flags);
}

static int dec_fsync_req(struct rbuf *r, void *m)
{
	struct msg_fsync_req *q = m;

	wire_get_fid(r, &q->fid);
	q->flags = wire_get_u32(r);
	return dec_end(r);
}

static void enc_wtoken_req(struct wbuf *w, const void *m)
{
	const struct msg_wtoken_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u64(w, q->dv);
	wire_put_u32(w, q->flags);
}

static int dec_wtoken_req(struct rbuf *r, void *m)
{
	struct msg_wtoken_req *q = m;

	wire_get_fid(r, &q->fid);
	q->dv = wire_get_u64(r);
	q->flags = wire_get_u32(r);
	return dec_end(r);
}

static void enc_lock_req(struct wbuf *w, const void *m)
{
	const struct msg_lock_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u64(w, q->owner);
	wire_put_u64(w, q->start);
	wire_put_u64(w, q->end);
	wire_put_u32(w, q->pid);
	wire_put_u32(w, q->type);
	wire_put_u32(w, q->flags);
}

static int dec_lock_req(struct rbuf *r, void *m)
{
	struct msg_lock_req *q = m;

	wire_get_fid(r, &q->fid);
	q->owner = wire_get_u64(r);
	q->start = wire_get_u64(r);
	q->end = wire_get_u64(r);
	q->pid = wire_get_u32(r);
	q->type = wire_get_u32(r);
	q->flags = wire_get_u32(r);
	return dec_end(r);
}

static void enc_lockd_rep(struct wbuf *w, const void *m)
{
	const struct msg_lockd_rep *p = m;

	wire_put_attr(w, &p->attr);
	wire_put_u32(w, p->flags);
}

static int dec_lockd_rep(struct rbuf *r, void *m)
{
	struct msg_lockd_rep *p = m;

	wire_get_attr(r, &p->attr);
	p->flags = wire_get_u32(r);
	return dec_end(r);
}

static void enc_getlk_rep(struct wbuf *w, const void *m)
{
	const struct msg_getlk_rep *q = m;

	wire_put_u32(w, q->type);
	wire_put_u64(w, q->start);
	wire_put_u64(w, q->end);
	wire_put_u32(w, q->pid);
}

static int dec_getlk_rep(struct rbuf *r, void *m)
{
	struct msg_getlk_rep *q = m;

	q->type = wire_get_u32(r);
	q->start = wire_get_u64(r);
	q->end = wire_get_u64(r);
	q->pid = wire_get_u32(r);
	return dec_end(r);
}

static void enc_statfs_rep(struct wbuf *w, const void *m)
{
	wire_put_statfs(w, &((const struct msg_statfs_rep *)m)->sf);
}

static int dec_statfs_rep(struct rbuf *r, void *m)
{
	wire_get_statfs(r, &((struct msg_statfs_rep *)m)->sf);
	return dec_end(r);
}

static void enc_fallocate_req(struct wbuf *w, const void *m)
{
	const struct msg_fallocate_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u32(w, q->mode);
	wire_put_u64(w, q->off);
	wire_put_u64(w, q->len);
}

static int dec_fallocate_req(struct rbuf *r, void *m)
{
	struct msg_fallocate_req *q = m;

	wire_get_fid(r, &q->fid);
	q->mode = wire_get_u32(r);
	q->off = wire_get_u64(r);
	q->len = wire_get_u64(r);
	return dec_end(r);
}

/* --- extended attributes ---------------------------------------------------- */

static void enc_setxattr_req(struct wbuf *w, const void *m)
{
	const struct msg_setxattr_req *q = m;

	wire_put_fid(w, &q->fid);
	put_str(w, &q->name);
	wire_put_u32(w, q->flags);
	put_bytes(w, &q->value);
}

static int dec_setxattr_req(struct rbuf *r, void *m)
{
	struct msg_setxattr_req *q = m;

	wire_get_fid(r, &q->fid);
	get_str(r, &q->name);
	q->flags = wire_get_u32(r);
	get_bytes(r, &q->value);
	return dec_end(r);
}

static void enc_getxattr_req(struct wbuf *w, const void *m)
{
	const struct msg_getxattr_req *q = m;

	wire_put_fid(w, &q->fid);
	put_str(w, &q->name);
	wire_put_u32(w, q->size);
}

static int dec_getxattr_req(struct rbuf *r, void *m)
{
	struct msg_getxattr_req *q = m;

	wire_get_fid(r, &q->fid);
	get_str(r, &q->name);
	q->size = wire_get_u32(r);
	return dec_end(r);
}

static void enc_listxattr_req(struct wbuf *w, const void *m)
{
	const struct msg_listxattr_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u32(w, q->size);
}

static int dec_listxattr_req(struct rbuf *r, void *m)
{
	struct msg_listxattr_req *q = m;

	wire_get_fid(r, &q->fid);
	q->size = wire_get_u32(r);
	return dec_end(r);
}

static void enc_sized_rep(struct wbuf *w, const void *m)
{
	const struct msg_sized_rep *p = m;

	wire_put_u32(w, p->size);
	put_bytes(w, &p->value);
}

static int dec_sized_rep(struct rbuf *r, void *m)
{
	struct msg_sized_rep *p = m;

	p->size = wire_get_u32(r);
	get_bytes(r, &p->value);
	return dec_end(r);
}

uint8_t *msg_sized_rep_reserve(struct wbuf *w, uint32_t cap, size_t *at)
{
	uint8_t *p;

	*at = w->len;
	p = wbuf_reserve(w, 8 + (size_t)cap);
	return p ? p + 8 : NULL;
}

void msg_sized_rep_finish(struct wbuf *w, size_t at, uint32_t size,
			  uint32_t n)
{
	if (w->err)
		return;
	CAIRN_ASSERT(at + 8 + (size_t)n <= w->len);
	w->len = at;
	wire_put_u32(w, size);
	wire_put_u32(w, n);
	w->len = at + 8 + n;
}

static void enc_removexattr_req(struct wbuf *w, const void *m)
{
	const struct msg_removexattr_req *q = m;

	wire_put_fid(w, &q->fid);
	put_str(w, &q->name);
}

static int dec_removexattr_req(struct rbuf *r, void *m)
{
	struct msg_removexattr_req *q = m;

	wire_get_fid(r, &q->fid);
	get_str(r, &q->name);
	return dec_end(r);
}

static void enc_status_rep(struct wbuf *w, const void *m)
{
	put_bytes(w, &((const struct msg_status_rep *)m)->text);
}

static int dec_status_rep(struct rbuf *r, void *m)
{
	get_bytes(r, &((struct msg_status_rep *)m)->text);
	return dec_end(r);
}

/* A streamed list to encode: from its decoded bytes when the struct holds
 * no array (1: done), else 0 (the caller writes the array's items). */
static int put_list(struct wbuf *w, const void *array,
		    const struct msg_bytes *list)
{
	if (array)
		return 0;
	wire_put_bytes(w, list->len ? list->p : "", list->len);
	return 1;
}

/* --- LKRETURN --------------------------------------------------------------- */

#define LKENT_SIZE (8u + 8u + 8u + 4u + 4u + 4u)

static void get_lkent(struct rbuf *r, void *m)
{
	struct msg_lkent *e = m;

	e->owner = wire_get_u64(r);
	e->start = wire_get_u64(r);
	e->end = wire_get_u64(r);
	e->pid = wire_get_u32(r);
	e->type = wire_get_u32(r);
	e->flags = wire_get_u32(r);
}

static void enc_lkreturn_req(struct wbuf *w, const void *m)
{
	const struct msg_lkreturn_req *q = m;

	wire_put_fid(w, &q->fid);
	wire_put_u32(w, q->flags);
	wire_put_u32(w, q->count);
	if (put_list(w, q->ents, &q->list))
		return;
	for (uint32_t i = 0; i < q->count; i++) {
		const struct msg_lkent *e = &q->ents[i];

		wire_put_u64(w, e->owner);
		wire_put_u64(w, e->start);
		wire_put_u64(w, e->end);
		wire_put_u32(w, e->pid);
		wire_put_u32(w, e->type);
		wire_put_u32(w, e->flags);
	}
}

static int dec_lkreturn_req(struct rbuf *r, void *m)
{
	struct msg_lkreturn_req *q = m;
	struct msg_lkent e;

	wire_get_fid(r, &q->fid);
	q->flags = wire_get_u32(r);
	q->count = wire_get_u32(r);
	q->ents = NULL;
	get_records(r, q->count, LKENT_SIZE, get_lkent, &e, &q->list);
	return dec_end(r);
}

int msg_lkent_next(struct rbuf *it, struct msg_lkent *e)
{
	return next_record(it, get_lkent, e);
}

/* --- REMOVES ---------------------------------------------------------------- */

/* The smallest encoded entry: an empty name's length, flags, victim. */
#define RMENT_MIN (2u + 4u + WIRE_FID_SIZE)

static void get_rment(struct rbuf *r, void *m)
{
	struct msg_rment *e = m;

	get_str(r, &e->name);
	e->flags = wire_get_u32(r);
	wire_get_fid(r, &e->victim);
}

static void get_rment_at(struct rbuf *r, void *m)
{
	get_rment(r, m);
	wire_get_time(r, &((struct msg_rment *)m)->time);
}

static void put_removes(struct wbuf *w, const struct msg_removes_req *q,
			int at)
{
	wire_put_fid(w, &q->dir);
	wire_put_u32(w, q->count);
	if (put_list(w, q->ents, &q->list))
		return;
	for (uint32_t i = 0; i < q->count; i++) {
		put_str(w, &q->ents[i].name);
		wire_put_u32(w, q->ents[i].flags);
		wire_put_fid(w, &q->ents[i].victim);
		if (at)
			wire_put_time(w, &q->ents[i].time);
	}
}

static int get_removes(struct rbuf *r, struct msg_removes_req *q, int at)
{
	struct msg_rment e;

	wire_get_fid(r, &q->dir);
	q->count = wire_get_u32(r);
	q->ents = NULL;
	get_records(r, q->count, at ? RMENT_MIN + WIRE_TIME_SIZE : RMENT_MIN,
		    at ? get_rment_at : get_rment, &e, &q->list);
	return dec_end(r);
}

static void enc_removes_req(struct wbuf *w, const void *m)
{
	put_removes(w, m, 0);
}

static int dec_removes_req(struct rbuf *r, void *m)
{
	return get_removes(r, m, 0);
}

static void enc_removesat_req(struct wbuf *w, const void *m)
{
	put_removes(w, m, 1);
}

static int dec_removesat_req(struct rbuf *r, void *m)
{
	return get_removes(r, m, 1);
}

int msg_rment_next(struct rbuf *it, struct msg_rment *e)
{
	return next_record(it, get_rment, e);
}

int msg_rment_at_next(struct rbuf *it, struct msg_rment *e)
{
	return next_record(it, get_rment_at, e);
}

static void next_status(struct rbuf *r, void *scratch)
{
	*(uint32_t *)scratch = wire_get_u32(r);
}

static void enc_removes_rep(struct wbuf *w, const void *m)
{
	const struct msg_removes_rep *p = m;

	wire_put_attr(w, &p->dir);
	wire_put_u32(w, p->count);
	if (put_list(w, p->status, &p->list))
		return;
	for (uint32_t i = 0; i < p->count; i++)
		wire_put_u32(w, (uint32_t)p->status[i]);
}

static int dec_removes_rep(struct rbuf *r, void *m)
{
	struct msg_removes_rep *p = m;
	uint32_t v;

	wire_get_attr(r, &p->dir);
	p->count = wire_get_u32(r);
	p->status = NULL;
	get_records(r, p->count, 4, next_status, &v, &p->list);
	return dec_end(r);
}

int32_t msg_removes_status(const struct msg_removes_rep *p, uint32_t i)
{
	struct rbuf r;

	if (i >= p->count || p->list.len < ((size_t)i + 1) * 4)
		return -EPROTO;
	rbuf_init(&r, (const char *)p->list.p + (size_t)i * 4, 4);
	return (int32_t)wire_get_u32(&r);
}

/* --- CREATES ---------------------------------------------------------------- */

/* The smallest encoded entries: empty name and data. */
#define CENT_MIN (2u + 16u + WIRE_FID_SIZE + 12u + 4u)
#define CREP_MIN (4u + 1u + 8u)

/* An entry's fields before its data (CREATES; CREATEATTR's attribute
 * changes come between them and the data). */
static void get_cent_head(struct rbuf *r, struct msg_cent *e)
{
	get_str(r, &e->name);
	e->mode = wire_get_u32(r);
	e->uid = wire_get_u32(r);
	e->gid = wire_get_u32(r);
	e->flags = wire_get_u32(r);
	wire_get_fid(r, &e->fid);
	wire_get_time(r, &e->time);
}

static void put_cent_head(struct wbuf *w, const struct msg_cent *e)
{
	put_str(w, &e->name);
	wire_put_u32(w, e->mode);
	wire_put_u32(w, e->uid);
	wire_put_u32(w, e->gid);
	wire_put_u32(w, e->flags);
	wire_put_fid(w, &e->fid);
	wire_put_time(w, &e->time);
}

static void get_cent(struct rbuf *r, void *m)
{
	struct msg_cent *e = m;

	get_cent_head(r, e);
	get_bytes(r, &e->data);
}

static void enc_creates_req(struct wbuf *w, const void *m)
{
	const struct msg_creates_req *q = m;

	wire_put_fid(w, &q->dir);
	wire_put_u32(w, q->count);
	if (put_list(w, q->ents, &q->list))
		return;
	for (uint32_t i = 0; i < q->count; i++) {
		put_cent_head(w, &q->ents[i]);
		put_bytes(w, &q->ents[i].data);
	}
}

static int dec_creates_req(struct rbuf *r, void *m)
{
	struct msg_creates_req *q = m;
	struct msg_cent e;

	wire_get_fid(r, &q->dir);
	q->count = wire_get_u32(r);
	q->ents = NULL;
	get_records(r, q->count, CENT_MIN, get_cent, &e, &q->list);
	return dec_end(r);
}

int msg_cent_next(struct rbuf *it, struct msg_cent *e)
{
	return next_record(it, get_cent, e);
}

/* --- CREATEATTR ------------------------------------------------------------- */

/* CENT_MIN and the attribute changes: valid, mode, uid, gid, steps and
 * three times. */
#define CENTA_MIN (CENT_MIN + 20u + 36u)

static void get_centa(struct rbuf *r, void *m)
{
	struct msg_centa *e = m;

	get_cent_head(r, &e->c);
	e->valid = wire_get_u32(r);
	e->mode = wire_get_u32(r);
	e->uid = wire_get_u32(r);
	e->gid = wire_get_u32(r);
	e->steps = wire_get_u32(r);
	wire_get_time(r, &e->atime);
	wire_get_time(r, &e->mtime);
	wire_get_time(r, &e->ctime);
	get_bytes(r, &e->c.data);
}

static void enc_createattr_req(struct wbuf *w, const void *m)
{
	const struct msg_createattr_req *q = m;

	wire_put_fid(w, &q->dir);
	wire_put_u32(w, q->count);
	if (put_list(w, q->ents, &q->list))
		return;
	for (uint32_t i = 0; i < q->count; i++) {
		const struct msg_centa *e = &q->ents[i];

		put_cent_head(w, &e->c);
		wire_put_u32(w, e->valid);
		wire_put_u32(w, e->mode);
		wire_put_u32(w, e->uid);
		wire_put_u32(w, e->gid);
		wire_put_u32(w, e->steps);
		wire_put_time(w, &e->atime);
		wire_put_time(w, &e->mtime);
		wire_put_time(w, &e->ctime);
		put_bytes(w, &e->c.data);
	}
}

static int dec_createattr_req(struct rbuf *r, void *m)
{
	struct msg_createattr_req *q = m;
	struct msg_centa e;

	wire_get_fid(r, &q->dir);
	q->count = wire_get_u32(r);
	q->ents = NULL;
	get_records(r, q->count, CENTA_MIN, get_centa, &e, &q->list);
	return dec_end(r);
}

int msg_centa_next(struct rbuf *it, struct msg_centa *e)
{
	return next_record(it, get_centa, e);
}

/* status, created and the file (the server sends 0 and zeros with a
 * status that is not 0: nothing to promise). */
static void get_crep(struct rbuf *r, void *m)
{
	struct msg_crep *e = m;

	e->status = (int32_t)wire_get_u32(r);
	e->created = wire_get_u8(r);
	if (e->created > (CREATED | CREATED_TOKEN | CREATED_ATTRS))
		r->err = -EPROTO;
	wire_get_attr(r, &e->child);
}

static void enc_creates_rep(struct wbuf *w, const void *m)
{
	const struct msg_creates_rep *p = m;

	wire_put_attr(w, &p->dir);
	wire_put_u32(w, p->count);
	if (put_list(w, p->ents, &p->list))
		return;
	for (uint32_t i = 0; i < p->count; i++) {
		const struct msg_crep *e = &p->ents[i];

		wire_put_u32(w, (uint32_t)e->status);
		wire_put_u8(w, e->created &
				   (CREATED | CREATED_TOKEN | CREATED_ATTRS));
		wire_put_attr(w, &e->child);
	}
}

static int dec_creates_rep(struct rbuf *r, void *m)
{
	struct msg_creates_rep *p = m;
	struct msg_crep e;

	wire_get_attr(r, &p->dir);
	p->count = wire_get_u32(r);
	p->ents = NULL;
	get_records(r, p->count, CREP_MIN, get_crep, &e, &p->list);
	return dec_end(r);
}

int msg_crep_next(struct rbuf *it, struct msg_crep *e)
{
	return next_record(it, get_crep, e);
}

/* --- ORPHAN_DROP ------------------------------------------------------------- */

static void next_fid(struct rbuf *r, void *scratch)
{
	wire_get_fid(r, scratch);
}

static void enc_orphan_drop_req(struct wbuf *w, const void *m)
{
	const struct msg_orphan_drop_req *q = m;

	wire_put_u32(w, q->count);
	if (q->fids)
		for (uint32_t i = 0; i < q->count; i++)
			wire_put_fid(w, &q->fids[i]);
	else
		wire_put_bytes(w, q->list.len ? q->list.p : "", q->list.len);
}

static int dec_orphan_drop_req(struct rbuf *r, void *m)
{
	struct msg_orphan_drop_req *q = m;
	struct cairn_fid fid;

	q->count = wire_get_u32(r);
	q->fids = NULL;
	get_records(r, q->count, WIRE_FID_SIZE, next_fid, &fid, &q->list);
	return dec_end(r);
}

int msg_fid_next(struct rbuf *it, struct cairn_fid *fid)
{
	if (rbuf_left(it) == 0 || it->err)
		return 0;
	wire_get_fid(it, fid);
	return it->err ? 0 : 1;
}

/* --- CB_BREAK ---------------------------------------------------------------- */

static void get_cbrec(struct rbuf *r, struct msg_cbrec *rec)
{
	wire_get_fid(r, &rec->fid);
	get_str(r, &rec->name);
	rec->flags = wire_get_u8(r);
	/* Only defined bits: one encoding per record. */
	if (!r->err && (rec->flags & ~(uint8_t)(CB_ORPHANED | CB_ATTRS_ONLY)))
		r->err = -EPROTO;
}

static void next_cbrec(struct rbuf *r, void *scratch)
{
	get_cbrec(r, scratch);
}

void msg_cbrec_put(struct wbuf *w, const struct msg_cbrec *rec)
{
	wire_put_fid(w, &rec->fid);
	put_str(w, &rec->name);
	wire_put_u8(w, rec->flags);
}

static void enc_cb_break(struct wbuf *w, const void *m)
{
	const struct msg_cb_break *b = m;

	wire_put_u32(w, b->count);
	wire_put_bytes(w, b->recs.len ? b->recs.p : "", b->recs.len);
}

static int dec_cb_break(struct rbuf *r, void *m)
{
	struct msg_cb_break *b = m;
	struct msg_cbrec rec;

	b->count = wire_get_u32(r);
	get_records(r, b->count, CBREC_MIN, next_cbrec, &rec, &b->recs);
	return dec_end(r);
}

size_t msg_cb_break_begin(struct wbuf *w)
{
	size_t at = w->len;

	wire_put_u32(w, 0);
	return at;
}

void msg_cb_break_end(struct wbuf *w, size_t at, uint32_t count)
{
	PATCH(w, at, wire_put_u32(w, count));
}

int msg_cbrec_next(struct rbuf *it, struct msg_cbrec *rec)
{
	if (rbuf_left(it) == 0 || it->err)
		return 0;
	get_cbrec(it, rec);
	return it->err ? 0 : 1;
}

/* --- descriptors ------------------------------------------------------------- */

#define CODEC(rq, rp) \
	.req_enc = enc_##rq, .req_dec = dec_##rq, \
	.rep_enc = enc_##rp, .rep_dec = dec_##rp

static const struct msg_desc descs[] = {
	{ OP_HELLO, "HELLO", 0,
	  "u32 magic (`0x4e524143`), u32 version, 16 bytes client id, u32 flags",
	  "u32 version, 16 bytes server id, u64 server epoch, attr root, "
	  "u32 flags",
	  CODEC(hello_req, hello_rep) },
	{ OP_PING, "PING", MSG_INLINE, "–", "–", CODEC(empty, empty) },
	{ OP_GETATTR, "GETATTR", MSG_INLINE, "fid", "attr",
	  CODEC(fid, attr) },
	{ OP_LOOKUP, "LOOKUP", MSG_INLINE, "fid dir, str name", "attr child",
	  CODEC(lookup_req, attr) },
	{ OP_SETATTR, "SETATTR", MSG_CHANGES | MSG_DRC,
	  "fid, u32 valid, u32 mode, u32 uid, u32 gid, u64 size, time atime, "
	  "time mtime, time ctime", "attr", CODEC(setattr_req, attr) },
	{ OP_CREATE, "CREATE", MSG_CHANGES | MSG_DRC,
	  "fid dir, str name, u32 mode, u32 uid, u32 gid, u32 rdev, u32 flags, "
	  "fid new fid, time new time, blob data",
	  "u8 created, attr child, attr dir", CODEC(create_req, create_rep) },
	{ OP_SYMLINK, "SYMLINK", MSG_CHANGES | MSG_DRC,
	  "fid dir, str name, str target, u32 uid, u32 gid",
	  "attr child, attr dir", CODEC(symlink_req, attr2) },
	{ OP_READLINK, "READLINK", MSG_INLINE, "fid", "str target",
	  CODEC(fid, readlink_rep) },
	{ OP_LINK, "LINK", MSG_CHANGES | MSG_DRC,
	  "fid target, fid dir, str name", "attr target, attr dir",
	  CODEC(link_req, attr2) },
	{ OP_REMOVE, "REMOVE", MSG_CHANGES | MSG_DRC,
	  "fid dir, str name, u32 flags, fid victim", "attr dir",
	  CODEC(remove_req, attr) },
	{ OP_RENAME, "RENAME", MSG_CHANGES | MSG_DRC,
	  "fid src dir, str src name, fid dst dir, str dst name, u32 flags",
	  "attr src dir, attr dst dir", CODEC(rename_req, attr2) },
	{ OP_READDIR, "READDIR", 0, "fid dir, u64 cookie, u32 max entries",
	  "u32 count, u8 eof, then count × (u64 next cookie, str name, attr)",
	  CODEC(readdir_req, readdir_rep) },
	{ OP_READ, "READ", 0, "fid, u64 offset, u32 length", "attr, blob data",
	  CODEC(read_req, read_rep) },
	{ OP_WRITE, "WRITE", MSG_CHANGES | MSG_DRC,
	  "fid, u64 offset, u32 flags, blob data", "attr",
	  CODEC(write_req, attr) },
	{ OP_FSYNC, "FSYNC", 0, "fid, u32 flags", "–",
	  CODEC(fsync_req, empty) },
	{ OP_STATFS, "STATFS", 0, "–", "statfs", CODEC(empty, statfs_rep) },
	{ OP_SETXATTR, "SETXATTR", MSG_CHANGES | MSG_DRC,
	  "fid, str name, u32 flags, blob value", "–",
	  CODEC(setxattr_req, empty) },
	{ OP_GETXATTR, "GETXATTR", MSG_INLINE, "fid, str name, u32 size",
	  "u32 value size, blob value", CODEC(getxattr_req, sized_rep) },
	{ OP_LISTXATTR, "LISTXATTR", MSG_INLINE, "fid, u32 size",
	  "u32 list size, blob names (each NUL-terminated)",
	  CODEC(listxattr_req, sized_rep) },
	{ OP_REMOVEXATTR, "REMOVEXATTR", MSG_CHANGES | MSG_DRC,
	  "fid, str name", "–", CODEC(removexattr_req, empty) },
	{ OP_FALLOCATE, "FALLOCATE", MSG_CHANGES | MSG_DRC,
	  "fid, u32 mode, u64 offset, u64 length", "attr",
	  CODEC(fallocate_req, attr) },
	{ OP_STATUS, "STATUS", 0, "–", "blob text",
	  CODEC(empty, status_rep) },
	/* Not MSG_INLINE although it changes nothing a client sees: with
	 * BS_LIST at cookie 0 it may commit a relatime atime (a group commit
	 * and a sync), and a full page is about a millisecond of LMDB reads
	 * during which the reader would not read acknowledgements. The
	 * hand-off to a worker costs one wake-up per page of up to
	 * thousands of entries. */
	{ OP_BULKSTAT, "BULKSTAT", 0,
	  "fid dir, u64 cookie, u32 max bytes, u32 flags",
	  "attr dir, u64 new entry cookie, u32 count, u8 eof, then count × "
	  "(u64 next cookie, str name, attr)",
	  CODEC(bulkstat_req, bulkstat_rep) },
	/* A change (commits, so never on the reader thread) that needs no
	 * duplicate request cache: done twice it frees nothing more. It
	 * breaks no promise: nobody can name an orphan, and the promises
	 * on it were broken when it lost its last name. */
	{ OP_ORPHAN_DROP, "ORPHAN_DROP", MSG_CHANGES, "u32 count, count × (fid)",
	  "–", CODEC(orphan_drop_req, empty) },
	/* relatime for reads the server did not see (the client's disk
	 * cache answered them): a write, but like READ's atime no change
	 * that breaks a promise; done twice it moves nothing more. Its
	 * request is ORPHAN_DROP's: a list of FIDs. */
	{ OP_ATIME, "ATIME", 0, "u32 count, count × (fid)", "–",
	  CODEC(orphan_drop_req, empty) },
	/* Grants or returns a write token: state the server keeps per
	 * connection, no store change (nothing to sync, nothing a resend
	 * could do twice: a second grant or return is a no-op). Granting
	 * breaks the other clients' promises on the file. */
	{ OP_WTOKEN, "WTOKEN", 0, "fid, u64 dv, u32 flags", "attr",
	  CODEC(wtoken_req, attr) },
	/* Gives back many write tokens at once (those a client held idle):
	 * WT_RETURN for each, without their attributes. ORPHAN_DROP's
	 * list. */
	{ OP_WRETURN, "WRETURN", 0, "u32 count, count × (fid)", "–",
	  CODEC(orphan_drop_req, empty) },
	/* Lock state lives in the server's memory (server/lock.h): no store
	 * change, nothing to sync; a resend is harmless (a lock granted
	 * again to its owner, a release of nothing). A grant's reply
	 * carries the file's attributes, promised, so the client revalidates
	 * its cache with the lock. */
	{ OP_LOCK, "LOCK", 0,
	  "fid, u64 owner, u64 start, u64 end, u32 pid, u32 type, u32 flags",
	  "attr", CODEC(lock_req, attr) },
	{ OP_GETLK, "GETLK", 0,
	  "fid, u64 owner, u64 start, u64 end, u32 pid, u32 type, u32 flags",
	  "u32 type, u64 start, u64 end, u32 pid", CODEC(lock_req, getlk_rep) },
	{ OP_AUTH, "AUTH", 0,
	  "u32 magic (`0x4e524143`), u32 version, 32 bytes client nonce, "
	  "8 bytes key id",
	  "32 bytes server nonce, 32 bytes server proof",
	  CODEC(auth_req, auth_rep) },
	/* Reserves object numbers (a store change: the volume's next vnode
	 * moves) but needs no duplicate request cache: a resend reserves
	 * others, and those it never uses are simply never used. */
	{ OP_FIDS, "FIDS", MSG_CHANGES, "u32 count", "fid first, u32 count",
	  CODEC(fids_req, fids_rep) },
	/* REMOVE, several at once: the entries a client's journal holds for
	 * one directory, applied in order in one commit (each on its own:
	 * one that fails leaves the others done). Like REMOVE, kept in the
	 * duplicate request cache; each entry is RM_FID, so one done before
	 * answers -ENOENT when resent after a restart. */
	{ OP_REMOVES, "REMOVES", MSG_CHANGES | MSG_DRC,
	  "fid dir, u32 count, count × (str name, u32 flags, fid victim)",
	  "attr dir, u32 count, count × (i32 status)",
	  CODEC(removes_req, removes_rep) },
	/* CREATE, several at once: the files a client's journal made in one
	 * directory (CR_FID, so each is idempotent by its FID), applied in
	 * order, each on its own, in one commit when their first bytes fit
	 * inline. */
	{ OP_CREATES, "CREATES", MSG_CHANGES | MSG_DRC,
	  "fid dir, u32 count, count × (str name, u32 mode, u32 uid, u32 gid, "
	  "u32 flags, fid new fid, time new time, blob data)",
	  "attr dir, u32 count, count × (i32 status, u8 created, attr child)",
	  CODEC(creates_req, creates_rep) },
	/* A WRITE and the attribute changes journaled after it (the times
	 * the writer's kernel sends when it writes the inode back, cp -p's
	 * chmod, chown and utimens), in one commit. Kept in the duplicate
	 * request cache as WRITE is. */
	{ OP_WRITEATTR, "WRITEATTR", MSG_CHANGES | MSG_DRC,
	  "fid, u64 offset, u32 flags, u32 valid, u32 mode, u32 uid, u32 gid, "
	  "u32 steps, time atime, time mtime, time ctime, blob data", "attr",
	  CODEC(writeattr_req, attr) },
	/* CREATES with the attribute changes the client made to each file
	 * after creating it (cp -a's utimens and chmod, tar's, rsync's),
	 * applied in the creation's commit; CREATES' reply, each entry's
	 * created with CREATED_ATTRS when they were. */
	{ OP_CREATEATTR, "CREATEATTR", MSG_CHANGES | MSG_DRC,
	  "fid dir, u32 count, count × (str name, u32 mode, u32 uid, u32 gid, "
	  "u32 flags, fid new fid, time new time, u32 valid, u32 attr mode, "
	  "u32 attr uid, u32 attr gid, u32 steps, time atime, time mtime, "
	  "time ctime, blob data)",
	  "attr dir, u32 count, count × (i32 status, u8 created, attr child)",
	  CODEC(createattr_req, creates_rep) },
	/* LOCK, and the file's locks may be delegated: the requester then
	 * grants and releases them itself until the server recalls them
	 * (CB_LKRECALL). Lock state only, like LOCK: a resend is harmless. */
	{ OP_LOCKD, "LOCKD", 0,
	  "fid, u64 owner, u64 start, u64 end, u32 pid, u32 type, u32 flags",
	  "attr, u32 flags", CODEC(lock_req, lockd_rep) },
	/* Every lock the requester holds on the file, replacing what the
	 * server had of them, and the delegation's end. A resend installs
	 * the same set again. */
	{ OP_LKRETURN, "LKRETURN", 0,
	  "fid, u32 flags, u32 count, count × (u64 owner, u64 start, u64 end, "
	  "u32 pid, u32 type, u32 lock flags)",
	  "–", CODEC(lkreturn_req, empty) },
	/* REMOVES, each entry with the time the client removed it at (its
	 * directory's mtime and ctime, and the object's ctime). */
	{ OP_REMOVESAT, "REMOVESAT", MSG_CHANGES | MSG_DRC,
	  "fid dir, u32 count, count × (str name, u32 flags, fid victim, "
	  "time time)",
	  "attr dir, u32 count, count × (i32 status)",
	  CODEC(removesat_req, removes_rep) },
	{ OP_CB_BREAK, "CB_BREAK", MSG_PUSH, "u32 count, count × (fid, str name, u8 flags)",
	  "acknowledged: an empty `WF_REPLY` frame with the push's id "
	  "(see Callbacks)", CODEC(cb_break, empty) },
	/* Not acknowledged: the holder answers with WTOKEN WT_RETURN once
	 * it has sent what it kept. Its list is ORPHAN_DROP's. */
	{ OP_CB_RECALL, "CB_RECALL", MSG_PUSH, "u32 count, count × (fid)",
	  "not acknowledged: the holder answers with WTOKEN `WT_RETURN` "
	  "(see Write tokens)", CODEC(orphan_drop_req, empty) },
	/* Not acknowledged: the client asks again for the locks it waits
	 * for on these files. Its list is ORPHAN_DROP's. */
	{ OP_CB_LOCKWAKE, "CB_LOCKWAKE", MSG_PUSH, "u32 count, count × (fid)",
	  "not acknowledged: the waiting client sends its LOCK again (see "
	  "Locks)", CODEC(orphan_drop_req, empty) },
	/* Not acknowledged: the holder answers with LKRETURN. Its list is
	 * ORPHAN_DROP's. */
	{ OP_CB_LKRECALL, "CB_LKRECALL", MSG_PUSH, "u32 count, count × (fid)",
	  "not acknowledged: the holder answers with LKRETURN (see Delegated "
	  "locks)", CODEC(orphan_drop_req, empty) },
};

#define NDESC (sizeof(descs) / sizeof(descs[0]))

const struct msg_desc *msg_desc(unsigned op)
{
	/* Request opcodes are dense from 1: descs[op - 1]. */
	if (op >= 1 && op < OP__COUNT && descs[op - 1].op == op)
		return &descs[op - 1];
	for (size_t i = OP__COUNT - 1; i < NDESC; i++)
		if (descs[i].op == op)
			return &descs[i];
	return NULL;
}

const struct msg_desc *msg_descs(size_t *n)
{
	*n = NDESC;
	return descs;
}

const char *msg_name(unsigned op)
{
	const struct msg_desc *d = msg_desc(op);

	return d ? d->name : "unknown";
}

int msg_has(unsigned op, unsigned flag)
{
	const struct msg_desc *d = msg_desc(op);

	return d && (d->flags & flag) == flag;
}

int msg_decode(unsigned op, int reply, const void *p, size_t len, void *m,
	       const char **why)
{
	const struct msg_desc *d = msg_desc(op);
	struct rbuf r;
	int ret;

	if (!d) {
		if (why)
			*why = "unknown opcode";
		return -EPROTO;
	}
	rbuf_init(&r, p, len);
	ret = (reply ? d->rep_dec : d->req_dec)(&r, m);
	if (ret) {
		if (why)
			*why = "payload too short or a bad field";
		return -EPROTO;
	}
	if (wire_get_end(&r)) {
		if (why)
			*why = "trailing bytes";
		return -EPROTO;
	}
	return 0;
}

void msg_encode(unsigned op, int reply, struct wbuf *w, const void *m)
{
	const struct msg_desc *d = msg_desc(op);

	if (!d) {
		if (!w->err)
			w->err = -EINVAL;
		return;
	}
	(reply ? d->rep_enc : d->req_enc)(w, m);
}

/* --- acceptability ------------------------------------------------------------ */

int msg_name_check(const struct msg_str *s)
{
	if (s->len > CAIRN_NAME_MAX)
		return -ENAMETOOLONG;
	if (s->len == 0 || memchr(s->p, '/', s->len) ||
	    memchr(s->p, '\0', s->len))
		return -EINVAL;
	if ((s->len == 1 && s->p[0] == '.') ||
	    (s->len == 2 && s->p[0] == '.' && s->p[1] == '.'))
		return -EINVAL;
	return 0;
}

int msg_xattr_name_check(const struct msg_str *s)
{
	if (s->len == 0 || s->len > CAIRN_XATTR_NAME_MAX)
		return -ERANGE;
	if (memchr(s->p, '\0', s->len))
		return -EINVAL;
	if (s->len >= 7 && !memcmp(s->p, "system.", 7))
		return -EOPNOTSUPP;
	return 0;
}

char *msg_str_copy(char *dst, const struct msg_str *s)
{
	if (s->len)
		memcpy(dst, s->p, s->len);
	dst[s->len] = '\0';
	return dst;
}

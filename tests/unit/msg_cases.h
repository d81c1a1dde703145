/*
 * msg_cases.h - one filled struct of every Cairn message, for the tests of
 * lib/msg.h: test_msg.c (the codec) and test_msg_doc.c (docs/PROTOCOL.md
 * against the encoders).
 *
 * cases[] gives, per opcode, the struct of its request (push) and reply
 * (acknowledgement) as a shape: a fill function and a field-by-field
 * comparison. encode_case() fills one and encodes it.
 *
 * Fill variants: TAGGED, BIG and EXTREME (below). TAGGED values let a
 * reader of the bytes tell the fields apart: an integer field carries a
 * type tag in its top byte and a hash of its PROTOCOL.md field name below
 * it ("u32 uid" holds 0x34 | hash("uid") | counter; a u8 is a flag and
 * holds 1), a str or blob starts with its name and a '#'. test_msg_doc.c's layout interpreter recomputes
 * the tag from the name the layout gives at each position, so a layout
 * that swaps uid and gid, or calls a u64 a u32, fails even where the byte
 * count comes out right. The fill functions are therefore also the one
 * place that says which struct field a doc name means: a new message
 * needs a shape here, named as its PROTOCOL.md row names its fields.
 *
 * Include it once, after check.h, from the test's .c file: it defines
 * static functions and data.
 */
#ifndef CAIRN_TESTS_MSG_CASES_H
#define CAIRN_TESTS_MSG_CASES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/msg.h"
#include "../../lib/wire.h"

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

/* --- tagged values ----------------------------------------------------------- */

enum { K_U8, K_U16, K_U32, K_U64, K_I32, K_I64 };

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;    /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* The bits of an integer field named `name`; ctr makes equal names in one
 * message differ (atime.sec, mtime.sec). */
static uint64_t tag_value(int kind, const char *name, unsigned ctr)
{
	uint64_t h = name_hash(name);

	switch (kind) {
	/* Every u8 of the protocol is a flag (created, eof, a CB_BREAK
	 * record's flags) that lib/msg
	 * encodes as 0 or 1: no room for a name, so it holds 1. */
	case K_U8:  return 1;
	case K_U16: return 0xb200u | (h & 0xff);
	/* 0x34......: below 10^9, so a time's nsec can carry a tag too */
	case K_U32: return 0x34000000u | (h & 0xfff) << 12 | (ctr & 0xfff);
	case K_I32: return 0xc4000000u | (h & 0xfff) << 12 | (ctr & 0xfff);
	case K_U64: return 0xa8ull << 56 | (h & 0xffff) << 40 |
			   (ctr & 0xffffff);
	default:    return 0xc8ull << 56 | (h & 0xffff) << 40 |
			   (ctr & 0xffffff);
	}
}

/*
 * How one message struct gets filled. Variants: TAGGED (tagged values,
 * short strings: what the doc walk reads), BIG (tagged, every str 65535
 * bytes and every blob CAIRN_MAX_IO), EXTREME (every integer all ones or
 * INT64_MIN, a time's nsec 999999999, a flag 1, empty strings and blobs,
 * no records).
 */
enum { TAGGED, BIG, EXTREME, NVARIANT };
static const char *const variant_name[] = { "tagged", "big", "extreme" };

struct fill {
	int variant;
	unsigned op;         /* for op-specific doc names */
	unsigned ctr;
	void *keep[128];     /* what the filled struct points into */
	int nkeep;
};

static void *fill_keep(struct fill *f, void *p)
{
	if (f->nkeep == (int)(sizeof(f->keep) / sizeof(f->keep[0])))
		abort();
	f->keep[f->nkeep++] = p;
	return p;
}

static void fill_free(struct fill *f)
{
	while (f->nkeep)
		free(f->keep[--f->nkeep]);
}

static uint8_t v8(struct fill *f, const char *name)
{
	f->ctr++;
	return (uint8_t)tag_value(K_U8, name, f->ctr);
}

static uint32_t v32(struct fill *f, const char *name)
{
	f->ctr++;
	return f->variant == EXTREME ? UINT32_MAX :
	       (uint32_t)tag_value(K_U32, name, f->ctr);
}

static uint64_t v64(struct fill *f, const char *name)
{
	f->ctr++;
	return f->variant == EXTREME ? UINT64_MAX :
	       tag_value(K_U64, name, f->ctr);
}

static int64_t vi64(struct fill *f, const char *name)
{
	f->ctr++;
	return f->variant == EXTREME ? INT64_MIN :
	       (int64_t)tag_value(K_I64, name, f->ctr);
}

/* Content of a tagged str/blob: "name#ctr", then letters up to *len
 * (raised to fit "name#ctr"). */
static void *tagged_bytes(struct fill *f, const char *name, size_t *len)
{
	char head[80];
	size_t hn;
	char *p;

	f->ctr++;
	hn = snprintf(head, sizeof(head), "%s#%u", name, f->ctr);
	if (*len < hn)
		*len = hn;
	p = fill_keep(f, xmalloc(*len));
	memcpy(p, head, hn);
	for (size_t i = hn; i < *len; i++)
		p[i] = 'a' + i % 26;
	return p;
}

static void fill_str(struct fill *f, const char *name, struct msg_str *s,
		     size_t small)
{
	size_t len = f->variant == BIG ? 65535 : small;

	s->p = NULL;
	s->len = 0;
	if (f->variant != EXTREME) {
		s->p = tagged_bytes(f, name, &len);
		s->len = len;
	}
}

static void fill_blob(struct fill *f, const char *name, struct msg_bytes *b)
{
	size_t len = f->variant == BIG ? CAIRN_MAX_IO : 40;

	b->p = NULL;
	b->len = 0;
	if (f->variant != EXTREME) {
		b->p = tagged_bytes(f, name, &len);
		b->len = len;
	}
}

static void fill_fid(struct fill *f, struct cairn_fid *x)
{
	x->vol = v32(f, "vol");
	x->vnode = v64(f, "vnode");
	x->uniq = v32(f, "uniq");
}

static void fill_time(struct fill *f, struct cairn_time *t)
{
	t->sec = vi64(f, "sec");
	t->nsec = v32(f, "nsec");
	if (f->variant == EXTREME)
		t->nsec = 999999999;   /* the largest that decodes */
}

static void fill_attr(struct fill *f, struct cairn_attr *a)
{
	fill_fid(f, &a->fid);
	a->mode = v32(f, "mode");
	a->nlink = v32(f, "nlink");
	a->uid = v32(f, "uid");
	a->gid = v32(f, "gid");
	a->rdev = v32(f, "rdev");
	a->size = v64(f, "size");
	a->blocks = v64(f, "blocks");
	fill_time(f, &a->atime);
	fill_time(f, &a->mtime);
	fill_time(f, &a->ctime);
	a->dv = v64(f, "dv");
}

static void fill_statfs(struct fill *f, struct cairn_statfs *s)
{
	s->blocks = v64(f, "blocks");
	s->bfree = v64(f, "bfree");
	s->bavail = v64(f, "bavail");
	s->files = v64(f, "files");
	s->ffree = v64(f, "ffree");
	s->bsize = v32(f, "bsize");
	s->namemax = v32(f, "namemax");
}

/* n bytes named name (ids, the AUTH nonces and proof). */
static void fill_bytes(struct fill *f, const char *name, uint8_t *b, int n)
{
	uint32_t h = name_hash(name);

	for (int i = 0; i < n; i++)
		b[i] = f->variant == EXTREME ? 0xff : (uint8_t)(h + 7 * i);
}

static void fill_id(struct fill *f, const char *name, uint8_t id[16])
{
	fill_bytes(f, name, id, 16);
}

/* Records for READDIR, BULKSTAT and CB_BREAK: 3 (one with an empty name),
 * FIDs of ORPHAN_DROP: 3; none in EXTREME. */
static int nrecords(const struct fill *f)
{
	return f->variant == EXTREME ? 0 : 3;
}

/* --- comparisons --------------------------------------------------------------- */

static int fid_eq(const struct cairn_fid *a, const struct cairn_fid *b)
{
	return a->vol == b->vol && a->vnode == b->vnode && a->uniq == b->uniq;
}

static int time_eq(const struct cairn_time *a, const struct cairn_time *b)
{
	return a->sec == b->sec && a->nsec == b->nsec;
}

static int attr_eq(const struct cairn_attr *a, const struct cairn_attr *b)
{
	return fid_eq(&a->fid, &b->fid) && a->mode == b->mode &&
	       a->nlink == b->nlink && a->uid == b->uid && a->gid == b->gid &&
	       a->rdev == b->rdev && a->size == b->size &&
	       a->blocks == b->blocks && time_eq(&a->atime, &b->atime) &&
	       time_eq(&a->mtime, &b->mtime) && time_eq(&a->ctime, &b->ctime) &&
	       a->dv == b->dv;
}

static int str_eq(const struct msg_str *a, const struct msg_str *b)
{
	return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len));
}

static int bytes_eq(const struct msg_bytes *a, const struct msg_bytes *b)
{
	return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len));
}

static int dirent_eq(const struct msg_dirent *a, const struct msg_dirent *b)
{
	return a->next_cookie == b->next_cookie && str_eq(&a->name, &b->name) &&
	       attr_eq(&a->attr, &b->attr);
}

static int cbrec_eq(const struct msg_cbrec *a, const struct msg_cbrec *b)
{
	return fid_eq(&a->fid, &b->fid) && str_eq(&a->name, &b->name) &&
	       a->flags == b->flags;
}

/* --- one fill and one eq per message struct ------------------------------------- */

static void fill_empty(struct fill *f, void *m) { }
static int eq_empty(const void *a, const void *b) { return 1; }

static void fill_fidm(struct fill *f, void *m)
{
	fill_fid(f, &((struct msg_fid *)m)->fid);
}

static int eq_fidm(const void *a, const void *b)
{
	return fid_eq(&((const struct msg_fid *)a)->fid,
		      &((const struct msg_fid *)b)->fid);
}

static void fill_attrm(struct fill *f, void *m)
{
	fill_attr(f, &((struct msg_attr *)m)->attr);
}

static int eq_attrm(const void *a, const void *b)
{
	return attr_eq(&((const struct msg_attr *)a)->attr,
		       &((const struct msg_attr *)b)->attr);
}

static void fill_attr2(struct fill *f, void *m)
{
	struct msg_attr2 *p = m;

	fill_attr(f, &p->a);
	fill_attr(f, &p->b);
}

static int eq_attr2(const void *a, const void *b)
{
	const struct msg_attr2 *x = a, *y = b;

	return attr_eq(&x->a, &y->a) && attr_eq(&x->b, &y->b);
}

static void fill_hello_req(struct fill *f, void *m)
{
	struct msg_hello_req *h = m;

	h->magic = CAIRN_MAGIC;  /* the doc gives its value */
	h->version = v32(f, "version");
	fill_id(f, "client id", h->client_id);
	h->flags = v32(f, "flags");
}

static int eq_hello_req(const void *a, const void *b)
{
	const struct msg_hello_req *x = a, *y = b;

	return x->magic == y->magic && x->version == y->version &&
	       !memcmp(x->client_id, y->client_id, 16) && x->flags == y->flags;
}

static void fill_auth_req(struct fill *f, void *m)
{
	struct msg_auth_req *a = m;

	a->magic = CAIRN_MAGIC;  /* the doc gives its value */
	a->version = v32(f, "version");
	fill_bytes(f, "client nonce", a->nonce, 32);
	fill_bytes(f, "key id", a->key_id, 8);
}

static int eq_auth_req(const void *a, const void *b)
{
	const struct msg_auth_req *x = a, *y = b;

	return x->magic == y->magic && x->version == y->version &&
	       !memcmp(x->nonce, y->nonce, 32) &&
	       !memcmp(x->key_id, y->key_id, 8);
}

static void fill_auth_rep(struct fill *f, void *m)
{
	struct msg_auth_rep *a = m;

	fill_bytes(f, "server nonce", a->nonce, 32);
	fill_bytes(f, "server proof", a->proof, 32);
}

static int eq_auth_rep(const void *a, const void *b)
{
	const struct msg_auth_rep *x = a, *y = b;

	return !memcmp(x->nonce, y->nonce, 32) &&
	       !memcmp(x->proof, y->proof, 32);
}

static void fill_hello_rep(struct fill *f, void *m)
{
	struct msg_hello_rep *h = m;

	h->version = v32(f, "version");
	fill_id(f, "server id", h->server_id);
	h->epoch = v64(f, "server epoch");
	fill_attr(f, &h->root);
	h->flags = v32(f, "flags");
}

static int eq_hello_rep(const void *a, const void *b)
{
	const struct msg_hello_rep *x = a, *y = b;

	return x->version == y->version &&
	       !memcmp(x->server_id, y->server_id, 16) &&
	       x->epoch == y->epoch && attr_eq(&x->root, &y->root) &&
	       x->flags == y->flags;
}

static void fill_lookup_req(struct fill *f, void *m)
{
	struct msg_lookup_req *q = m;

	fill_fid(f, &q->dir);
	fill_str(f, "name", &q->name, 20);
}

static int eq_lookup_req(const void *a, const void *b)
{
	const struct msg_lookup_req *x = a, *y = b;

	return fid_eq(&x->dir, &y->dir) && str_eq(&x->name, &y->name);
}

static void fill_setattr_req(struct fill *f, void *m)
{
	struct msg_setattr_req *q = m;

	fill_fid(f, &q->fid);
	q->valid = v32(f, "valid");
	q->mode = v32(f, "mode");
	q->uid = v32(f, "uid");
	q->gid = v32(f, "gid");
	q->size = v64(f, "size");
	fill_time(f, &q->atime);
	fill_time(f, &q->mtime);
	fill_time(f, &q->ctime);
}

static int eq_setattr_req(const void *a, const void *b)
{
	const struct msg_setattr_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->valid == y->valid &&
	       x->mode == y->mode && x->uid == y->uid && x->gid == y->gid &&
	       x->size == y->size && time_eq(&x->atime, &y->atime) &&
	       time_eq(&x->mtime, &y->mtime) && time_eq(&x->ctime, &y->ctime);
}

static void fill_create_req(struct fill *f, void *m)
{
	struct msg_create_req *q = m;

	fill_fid(f, &q->dir);
	fill_str(f, "name", &q->name, 24);
	q->mode = v32(f, "mode");
	q->uid = v32(f, "uid");
	q->gid = v32(f, "gid");
	q->rdev = v32(f, "rdev");
	q->flags = v32(f, "flags");
	fill_fid(f, &q->fid);
	fill_time(f, &q->time);
	fill_blob(f, "data", &q->data);
}

static int eq_create_req(const void *a, const void *b)
{
	const struct msg_create_req *x = a, *y = b;

	return fid_eq(&x->dir, &y->dir) && str_eq(&x->name, &y->name) &&
	       x->mode == y->mode && x->uid == y->uid && x->gid == y->gid &&
	       x->rdev == y->rdev && x->flags == y->flags &&
	       fid_eq(&x->fid, &y->fid) && time_eq(&x->time, &y->time) &&
	       bytes_eq(&x->data, &y->data);
}

static void fill_create_rep(struct fill *f, void *m)
{
	struct msg_create_rep *p = m;

	p->created = v8(f, "created");
	fill_attr(f, &p->child);
	fill_attr(f, &p->dir);
}

static int eq_create_rep(const void *a, const void *b)
{
	const struct msg_create_rep *x = a, *y = b;

	return x->created == y->created && attr_eq(&x->child, &y->child) &&
	       attr_eq(&x->dir, &y->dir);
}

static void fill_symlink_req(struct fill *f, void *m)
{
	struct msg_symlink_req *q = m;

	fill_fid(f, &q->dir);
	fill_str(f, "name", &q->name, 16);
	fill_str(f, "target", &q->target, 33);
	q->uid = v32(f, "uid");
	q->gid = v32(f, "gid");
}

static int eq_symlink_req(const void *a, const void *b)
{
	const struct msg_symlink_req *x = a, *y = b;

	return fid_eq(&x->dir, &y->dir) && str_eq(&x->name, &y->name) &&
	       str_eq(&x->target, &y->target) && x->uid == y->uid &&
	       x->gid == y->gid;
}

static void fill_readlink_rep(struct fill *f, void *m)
{
	fill_str(f, "target", &((struct msg_readlink_rep *)m)->target, 30);
}

static int eq_readlink_rep(const void *a, const void *b)
{
	return str_eq(&((const struct msg_readlink_rep *)a)->target,
		      &((const struct msg_readlink_rep *)b)->target);
}

static void fill_link_req(struct fill *f, void *m)
{
	struct msg_link_req *q = m;

	fill_fid(f, &q->fid);
	fill_fid(f, &q->dir);
	fill_str(f, "name", &q->name, 17);
}

static int eq_link_req(const void *a, const void *b)
{
	const struct msg_link_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && fid_eq(&x->dir, &y->dir) &&
	       str_eq(&x->name, &y->name);
}

static void fill_remove_req(struct fill *f, void *m)
{
	struct msg_remove_req *q = m;

	fill_fid(f, &q->dir);
	fill_str(f, "name", &q->name, 18);
	q->flags = v32(f, "flags");
	fill_fid(f, &q->victim);
}

static int eq_remove_req(const void *a, const void *b)
{
	const struct msg_remove_req *x = a, *y = b;

	return fid_eq(&x->dir, &y->dir) && str_eq(&x->name, &y->name) &&
	       x->flags == y->flags && fid_eq(&x->victim, &y->victim);
}

static void fill_rename_req(struct fill *f, void *m)
{
	struct msg_rename_req *q = m;

	fill_fid(f, &q->sdir);
	fill_str(f, "src name", &q->sname, 19);
	fill_fid(f, &q->ddir);
	fill_str(f, "dst name", &q->dname, 21);
	q->flags = v32(f, "flags");
}

static int eq_rename_req(const void *a, const void *b)
{
	const struct msg_rename_req *x = a, *y = b;

	return fid_eq(&x->sdir, &y->sdir) && str_eq(&x->sname, &y->sname) &&
	       fid_eq(&x->ddir, &y->ddir) && str_eq(&x->dname, &y->dname) &&
	       x->flags == y->flags;
}

static void fill_readdir_req(struct fill *f, void *m)
{
	struct msg_readdir_req *q = m;

	fill_fid(f, &q->dir);
	q->cookie = v64(f, "cookie");
	q->max = v32(f, "max entries");
}

static int eq_readdir_req(const void *a, const void *b)
{
	const struct msg_readdir_req *x = a, *y = b;

	return fid_eq(&x->dir, &y->dir) && x->cookie == y->cookie &&
	       x->max == y->max;
}

static void fill_dirent(struct fill *f, struct msg_dirent *e, int i)
{
	e->next_cookie = v64(f, "next cookie");
	fill_str(f, "name", &e->name, 12 + 5 * i);
	if (i == 1)
		e->name.len = 0;   /* structurally fine; policy is elsewhere */
	fill_attr(f, &e->attr);
}

static void fill_readdir_rep(struct fill *f, void *m)
{
	struct msg_readdir_rep *p = m;
	struct msg_dirent e;
	struct wbuf w;

	wbuf_init(&w);
	p->count = nrecords(f);
	p->eof = v8(f, "eof");
	for (uint32_t i = 0; i < p->count; i++) {
		fill_dirent(f, &e, i);
		msg_dirent_put(&w, &e);
	}
	if (w.err)
		abort();
	p->ents.p = w.data ? fill_keep(f, w.data) : NULL;
	p->ents.len = w.len;
}

/* Two encoded record lists, walked with the iterators, hold equal
 * records. */
static int dirents_eq(const struct msg_bytes *x, const struct msg_bytes *y)
{
	struct rbuf ia, ib;
	struct msg_dirent ra, rb;
	int ga, gb;

	rbuf_init(&ia, x->p, x->len);
	rbuf_init(&ib, y->p, y->len);
	do {
		ga = msg_dirent_next(&ia, &ra);
		gb = msg_dirent_next(&ib, &rb);
		if (ga != gb || (ga && !dirent_eq(&ra, &rb)))
			return 0;
	} while (ga);
	return 1;
}

static int cbrecs_eq(const struct msg_bytes *x, const struct msg_bytes *y)
{
	struct rbuf ia, ib;
	struct msg_cbrec ra, rb;
	int ga, gb;

	rbuf_init(&ia, x->p, x->len);
	rbuf_init(&ib, y->p, y->len);
	do {
		ga = msg_cbrec_next(&ia, &ra);
		gb = msg_cbrec_next(&ib, &rb);
		if (ga != gb || (ga && !cbrec_eq(&ra, &rb)))
			return 0;
	} while (ga);
	return 1;
}

static int eq_readdir_rep(const void *a, const void *b)
{
	const struct msg_readdir_rep *x = a, *y = b;

	return x->count == y->count && x->eof == y->eof &&
	       bytes_eq(&x->ents, &y->ents) &&
	       dirents_eq(&x->ents, &y->ents);
}

static void fill_bulkstat_req(struct fill *f, void *m)
{
	struct msg_bulkstat_req *q = m;

	fill_fid(f, &q->dir);
	q->cookie = v64(f, "cookie");
	q->max = v32(f, "max bytes");
	q->flags = v32(f, "flags");
}

static int eq_bulkstat_req(const void *a, const void *b)
{
	const struct msg_bulkstat_req *x = a, *y = b;

	return fid_eq(&x->dir, &y->dir) && x->cookie == y->cookie &&
	       x->max == y->max && x->flags == y->flags;
}

static void fill_bulkstat_rep(struct fill *f, void *m)
{
	struct msg_bulkstat_rep *p = m;
	struct msg_dirent e;
	struct wbuf w;

	wbuf_init(&w);
	fill_attr(f, &p->dir);
	p->new_cookie = v64(f, "new entry cookie");
	p->count = nrecords(f);
	p->eof = v8(f, "eof");
	for (uint32_t i = 0; i < p->count; i++) {
		fill_dirent(f, &e, i);
		msg_dirent_put(&w, &e);
	}
	if (w.err)
		abort();
	p->ents.p = w.data ? fill_keep(f, w.data) : NULL;
	p->ents.len = w.len;
}

static int eq_bulkstat_rep(const void *a, const void *b)
{
	const struct msg_bulkstat_rep *x = a, *y = b;

	return attr_eq(&x->dir, &y->dir) && x->new_cookie == y->new_cookie &&
	       x->count == y->count && x->eof == y->eof &&
	       bytes_eq(&x->ents, &y->ents) &&
	       dirents_eq(&x->ents, &y->ents);
}

static void fill_read_req(struct fill *f, void *m)
{
	struct msg_read_req *q = m;

	fill_fid(f, &q->fid);
	q->off = v64(f, "offset");
	q->len = v32(f, "length");
}

static int eq_read_req(const void *a, const void *b)
{
	const struct msg_read_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->off == y->off &&
	       x->len == y->len;
}

static void fill_read_rep(struct fill *f, void *m)
{
	struct msg_read_rep *p = m;

	fill_attr(f, &p->attr);
	fill_blob(f, "data", &p->data);
}

static int eq_read_rep(const void *a, const void *b)
{
	const struct msg_read_rep *x = a, *y = b;

	return attr_eq(&x->attr, &y->attr) && bytes_eq(&x->data, &y->data);
}

static void fill_write_req(struct fill *f, void *m)
{
	struct msg_write_req *q = m;

	fill_fid(f, &q->fid);
	q->off = v64(f, "offset");
	q->flags = v32(f, "flags");
	fill_blob(f, "data", &q->data);
}

static int eq_write_req(const void *a, const void *b)
{
	const struct msg_write_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->off == y->off &&
	       x->flags == y->flags && bytes_eq(&x->data, &y->data);
}

static void fill_writeattr_req(struct fill *f, void *m)
{
	struct msg_writeattr_req *q = m;

	fill_fid(f, &q->fid);
	q->off = v64(f, "offset");
	q->flags = v32(f, "flags");
	q->valid = v32(f, "valid");
	q->mode = v32(f, "mode");
	q->uid = v32(f, "uid");
	q->gid = v32(f, "gid");
	q->steps = v32(f, "steps");
	fill_time(f, &q->atime);
	fill_time(f, &q->mtime);
	fill_time(f, &q->ctime);
	fill_blob(f, "data", &q->data);
}

static int eq_writeattr_req(const void *a, const void *b)
{
	const struct msg_writeattr_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->off == y->off &&
	       x->flags == y->flags && x->valid == y->valid &&
	       x->mode == y->mode && x->uid == y->uid && x->gid == y->gid &&
	       x->steps == y->steps && time_eq(&x->atime, &y->atime) &&
	       time_eq(&x->mtime, &y->mtime) &&
	       time_eq(&x->ctime, &y->ctime) && bytes_eq(&x->data, &y->data);
}

static void fill_fsync_req(struct fill *f, void *m)
{
	struct msg_fsync_req *q = m;

	fill_fid(f, &q->fid);
	q->flags = v32(f, "flags");
}

static int eq_fsync_req(const void *a, const void *b)
{
	const struct msg_fsync_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->flags == y->flags;
}

static void fill_wtoken_req(struct fill *f, void *m)
{
	struct msg_wtoken_req *q = m;

	fill_fid(f, &q->fid);
	q->dv = v64(f, "dv");
	q->flags = v32(f, "flags");
}

static int eq_wtoken_req(const void *a, const void *b)
{
	const struct msg_wtoken_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->dv == y->dv &&
	       x->flags == y->flags;
}

static void fill_fids_req(struct fill *f, void *m)
{
	((struct msg_fids_req *)m)->count = v32(f, "count");
}

static int eq_fids_req(const void *a, const void *b)
{
	return ((const struct msg_fids_req *)a)->count ==
	       ((const struct msg_fids_req *)b)->count;
}

static void fill_fids_rep(struct fill *f, void *m)
{
	struct msg_fids_rep *p = m;

	fill_fid(f, &p->first);
	p->count = v32(f, "count");
}

static int eq_fids_rep(const void *a, const void *b)
{
	const struct msg_fids_rep *x = a, *y = b;

	return fid_eq(&x->first, &y->first) && x->count == y->count;
}

static void fill_lock_req(struct fill *f, void *m)
{
	struct msg_lock_req *q = m;

	fill_fid(f, &q->fid);
	q->owner = v64(f, "owner");
	q->start = v64(f, "start");
	q->end = v64(f, "end");
	q->pid = v32(f, "pid");
	q->type = v32(f, "type");
	q->flags = v32(f, "flags");
}

static int eq_lock_req(const void *a, const void *b)
{
	const struct msg_lock_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->owner == y->owner &&
	       x->start == y->start && x->end == y->end && x->pid == y->pid &&
	       x->type == y->type && x->flags == y->flags;
}

static void fill_lockd_rep(struct fill *f, void *m)
{
	struct msg_lockd_rep *p = m;

	fill_attr(f, &p->attr);
	p->flags = v32(f, "flags");
}

static int eq_lockd_rep(const void *a, const void *b)
{
	const struct msg_lockd_rep *x = a, *y = b;

	return attr_eq(&x->attr, &y->attr) && x->flags == y->flags;
}

/* LKRETURN: entries filled as an array (ents), as a client sends them. */
static void fill_lkreturn_req(struct fill *f, void *m)
{
	struct msg_lkreturn_req *q = m;
	struct msg_lkent *e;

	fill_fid(f, &q->fid);
	q->flags = v32(f, "flags");
	q->count = nrecords(f);
	e = fill_keep(f, xmalloc((q->count ? q->count : 1) * sizeof(*e)));
	for (uint32_t i = 0; i < q->count; i++) {
		e[i].owner = v64(f, "owner");
		e[i].start = v64(f, "start");
		e[i].end = v64(f, "end");
		e[i].pid = v32(f, "pid");
		e[i].type = v32(f, "type");
		e[i].flags = v32(f, "lock flags");
	}
	q->ents = e;
}

/* Entry i of an LKRETURN in either form (array, or decoded list). */
static int lkreturn_ent(const struct msg_lkreturn_req *q, uint32_t i,
			struct msg_lkent *e)
{
	struct rbuf it;

	if (q->ents) {
		*e = q->ents[i];
		return 1;
	}
	rbuf_init(&it, q->list.p, q->list.len);
	for (uint32_t k = 0; k <= i; k++)
		if (!msg_lkent_next(&it, e))
			return 0;
	return 1;
}

static int eq_lkreturn_req(const void *a, const void *b)
{
	const struct msg_lkreturn_req *x = a, *y = b;
	struct msg_lkent ea, eb;

	if (!fid_eq(&x->fid, &y->fid) || x->flags != y->flags ||
	    x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (!lkreturn_ent(x, i, &ea) || !lkreturn_ent(y, i, &eb) ||
		    ea.owner != eb.owner || ea.start != eb.start ||
		    ea.end != eb.end || ea.pid != eb.pid ||
		    ea.type != eb.type || ea.flags != eb.flags)
			return 0;
	return 1;
}

static void fill_getlk_rep(struct fill *f, void *m)
{
	struct msg_getlk_rep *q = m;

	q->type = v32(f, "type");
	q->start = v64(f, "start");
	q->end = v64(f, "end");
	q->pid = v32(f, "pid");
}

static int eq_getlk_rep(const void *a, const void *b)
{
	const struct msg_getlk_rep *x = a, *y = b;

	return x->type == y->type && x->start == y->start &&
	       x->end == y->end && x->pid == y->pid;
}

static void fill_statfs_rep(struct fill *f, void *m)
{
	fill_statfs(f, &((struct msg_statfs_rep *)m)->sf);
}

static int eq_statfs_rep(const void *a, const void *b)
{
	const struct cairn_statfs *x = &((const struct msg_statfs_rep *)a)->sf;
	const struct cairn_statfs *y = &((const struct msg_statfs_rep *)b)->sf;

	return x->blocks == y->blocks && x->bfree == y->bfree &&
	       x->bavail == y->bavail && x->files == y->files &&
	       x->ffree == y->ffree && x->bsize == y->bsize &&
	       x->namemax == y->namemax;
}

static void fill_setxattr_req(struct fill *f, void *m)
{
	struct msg_setxattr_req *q = m;

	fill_fid(f, &q->fid);
	fill_str(f, "name", &q->name, 22);
	q->flags = v32(f, "flags");
	fill_blob(f, "value", &q->value);
}

static int eq_setxattr_req(const void *a, const void *b)
{
	const struct msg_setxattr_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && str_eq(&x->name, &y->name) &&
	       x->flags == y->flags && bytes_eq(&x->value, &y->value);
}

static void fill_getxattr_req(struct fill *f, void *m)
{
	struct msg_getxattr_req *q = m;

	fill_fid(f, &q->fid);
	fill_str(f, "name", &q->name, 23);
	q->size = v32(f, "size");
}

static int eq_getxattr_req(const void *a, const void *b)
{
	const struct msg_getxattr_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && str_eq(&x->name, &y->name) &&
	       x->size == y->size;
}

static void fill_listxattr_req(struct fill *f, void *m)
{
	struct msg_listxattr_req *q = m;

	fill_fid(f, &q->fid);
	q->size = v32(f, "size");
}

static int eq_listxattr_req(const void *a, const void *b)
{
	const struct msg_listxattr_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->size == y->size;
}

/* GETXATTR and LISTXATTR share the struct; the doc names differ. */
static void fill_sized_rep(struct fill *f, void *m)
{
	struct msg_sized_rep *p = m;
	int get = f->op == OP_GETXATTR;

	p->size = v32(f, get ? "value size" : "list size");
	fill_blob(f, get ? "value" : "names", &p->value);
}

static int eq_sized_rep(const void *a, const void *b)
{
	const struct msg_sized_rep *x = a, *y = b;

	return x->size == y->size && bytes_eq(&x->value, &y->value);
}

static void fill_removexattr_req(struct fill *f, void *m)
{
	struct msg_removexattr_req *q = m;

	fill_fid(f, &q->fid);
	fill_str(f, "name", &q->name, 25);
}

static int eq_removexattr_req(const void *a, const void *b)
{
	const struct msg_removexattr_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && str_eq(&x->name, &y->name);
}

static void fill_fallocate_req(struct fill *f, void *m)
{
	struct msg_fallocate_req *q = m;

	fill_fid(f, &q->fid);
	q->mode = v32(f, "mode");
	q->off = v64(f, "offset");
	q->len = v64(f, "length");
}

static int eq_fallocate_req(const void *a, const void *b)
{
	const struct msg_fallocate_req *x = a, *y = b;

	return fid_eq(&x->fid, &y->fid) && x->mode == y->mode &&
	       x->off == y->off && x->len == y->len;
}

static void fill_status_rep(struct fill *f, void *m)
{
	fill_blob(f, "text", &((struct msg_status_rep *)m)->text);
}

static int eq_status_rep(const void *a, const void *b)
{
	return bytes_eq(&((const struct msg_status_rep *)a)->text,
			&((const struct msg_status_rep *)b)->text);
}

static void fill_cbrec(struct fill *f, struct msg_cbrec *rec, int i)
{
	fill_fid(f, &rec->fid);
	fill_str(f, "name", &rec->name, 14 + 3 * i);
	rec->flags = v8(f, "flags");
	if (i == 0)
		rec->name.len = 0;   /* the object itself */
}

static void fill_cb_break(struct fill *f, void *m)
{
	struct msg_cb_break *p = m;
	struct msg_cbrec rec;
	struct wbuf w;

	wbuf_init(&w);
	p->count = nrecords(f);
	for (uint32_t i = 0; i < p->count; i++) {
		fill_cbrec(f, &rec, i);
		msg_cbrec_put(&w, &rec);
	}
	if (w.err)
		abort();
	p->recs.p = w.data ? fill_keep(f, w.data) : NULL;
	p->recs.len = w.len;
}

static int eq_cb_break(const void *a, const void *b)
{
	const struct msg_cb_break *x = a, *y = b;

	return x->count == y->count && bytes_eq(&x->recs, &y->recs) &&
	       cbrecs_eq(&x->recs, &y->recs);
}

/* ORPHAN_DROP: filled from an array (fids), as a client sends it. */
static void fill_orphan_drop_req(struct fill *f, void *m)
{
	struct msg_orphan_drop_req *q = m;
	struct cairn_fid *fids;

	q->count = nrecords(f);
	fids = fill_keep(f, xmalloc((q->count ? q->count : 1) *
				    sizeof(*fids)));
	for (uint32_t i = 0; i < q->count; i++)
		fill_fid(f, &fids[i]);
	q->fids = fids;
}

/* FID i of an ORPHAN_DROP in either form (array, or decoded list). */
static int orphan_drop_fid(const struct msg_orphan_drop_req *q, uint32_t i,
			   struct cairn_fid *fid)
{
	struct rbuf it;

	if (q->fids) {
		*fid = q->fids[i];
		return 1;
	}
	rbuf_init(&it, q->list.p, q->list.len);
	for (uint32_t k = 0; k <= i; k++)
		if (!msg_fid_next(&it, fid))
			return 0;
	return 1;
}

static int eq_orphan_drop_req(const void *a, const void *b)
{
	const struct msg_orphan_drop_req *x = a, *y = b;
	struct cairn_fid fa, fb;

	if (x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (!orphan_drop_fid(x, i, &fa) || !orphan_drop_fid(y, i, &fb) ||
		    !fid_eq(&fa, &fb))
			return 0;
	return 1;
}

/* REMOVES (REMOVESAT with at): entries filled as an array (ents), as a
 * client sends them. */
static void fill_rments(struct fill *f, struct msg_removes_req *q, int at)
{
	struct msg_rment *e;

	fill_fid(f, &q->dir);
	q->count = nrecords(f);
	e = fill_keep(f, xmalloc((q->count ? q->count : 1) * sizeof(*e)));
	for (uint32_t i = 0; i < q->count; i++) {
		fill_str(f, "name", &e[i].name, 18);
		e[i].flags = v32(f, "flags");
		fill_fid(f, &e[i].victim);
		e[i].time = (struct cairn_time){ 0, 0 };
		if (at)
			fill_time(f, &e[i].time);
	}
	q->ents = e;
}

static void fill_removes_req(struct fill *f, void *m)
{
	fill_rments(f, m, 0);
}

static void fill_removesat_req(struct fill *f, void *m)
{
	fill_rments(f, m, 1);
}

/* Entry i of a REMOVES (REMOVESAT) in either form (array, or decoded
 * list). */
static int removes_ent(const struct msg_removes_req *q, uint32_t i, int at,
		       struct msg_rment *e)
{
	struct rbuf it;

	if (q->ents) {
		*e = q->ents[i];
		return 1;
	}
	rbuf_init(&it, q->list.p, q->list.len);
	for (uint32_t k = 0; k <= i; k++)
		if (!(at ? msg_rment_at_next(&it, e) : msg_rment_next(&it, e)))
			return 0;
	return 1;
}

static int rments_eq(const struct msg_removes_req *x,
		     const struct msg_removes_req *y, int at)
{
	struct msg_rment ea, eb;

	if (!fid_eq(&x->dir, &y->dir) || x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (!removes_ent(x, i, at, &ea) ||
		    !removes_ent(y, i, at, &eb) ||
		    !str_eq(&ea.name, &eb.name) || ea.flags != eb.flags ||
		    !fid_eq(&ea.victim, &eb.victim) ||
		    (at && !time_eq(&ea.time, &eb.time)))
			return 0;
	return 1;
}

static int eq_removes_req(const void *a, const void *b)
{
	return rments_eq(a, b, 0);
}

static int eq_removesat_req(const void *a, const void *b)
{
	return rments_eq(a, b, 1);
}

static void fill_removes_rep(struct fill *f, void *m)
{
	struct msg_removes_rep *p = m;
	int32_t *st;

	fill_attr(f, &p->dir);
	p->count = nrecords(f);
	st = fill_keep(f, xmalloc((p->count ? p->count : 1) * sizeof(*st)));
	for (uint32_t i = 0; i < p->count; i++) {
		f->ctr++;
		st[i] = (int32_t)tag_value(K_I32, "status", f->ctr);
	}
	p->status = st;
}

static int32_t removes_st(const struct msg_removes_rep *p, uint32_t i)
{
	return p->status ? p->status[i] : msg_removes_status(p, i);
}

static int eq_removes_rep(const void *a, const void *b)
{
	const struct msg_removes_rep *x = a, *y = b;

	if (!attr_eq(&x->dir, &y->dir) || x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (removes_st(x, i) != removes_st(y, i))
			return 0;
	return 1;
}

/* CREATES: entries filled as an array (ents), as a client sends them. */
static void fill_creates_req(struct fill *f, void *m)
{
	struct msg_creates_req *q = m;
	struct msg_cent *e;

	fill_fid(f, &q->dir);
	q->count = nrecords(f);
	e = fill_keep(f, xmalloc((q->count ? q->count : 1) * sizeof(*e)));
	for (uint32_t i = 0; i < q->count; i++) {
		fill_str(f, "name", &e[i].name, 18);
		e[i].mode = v32(f, "mode");
		e[i].uid = v32(f, "uid");
		e[i].gid = v32(f, "gid");
		e[i].flags = v32(f, "flags");
		fill_fid(f, &e[i].fid);
		fill_time(f, &e[i].time);
		fill_blob(f, "data", &e[i].data);
	}
	q->ents = e;
}

static int creates_ent(const struct msg_creates_req *q, uint32_t i,
		       struct msg_cent *e)
{
	struct rbuf it;

	if (q->ents) {
		*e = q->ents[i];
		return 1;
	}
	rbuf_init(&it, q->list.p, q->list.len);
	for (uint32_t k = 0; k <= i; k++)
		if (!msg_cent_next(&it, e))
			return 0;
	return 1;
}

static int eq_creates_req(const void *a, const void *b)
{
	const struct msg_creates_req *x = a, *y = b;
	struct msg_cent ea, eb;

	if (!fid_eq(&x->dir, &y->dir) || x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (!creates_ent(x, i, &ea) || !creates_ent(y, i, &eb) ||
		    !str_eq(&ea.name, &eb.name) || ea.mode != eb.mode ||
		    ea.uid != eb.uid || ea.gid != eb.gid ||
		    ea.flags != eb.flags || !fid_eq(&ea.fid, &eb.fid) ||
		    !time_eq(&ea.time, &eb.time) ||
		    !bytes_eq(&ea.data, &eb.data))
			return 0;
	return 1;
}

static void fill_creates_rep(struct fill *f, void *m)
{
	struct msg_creates_rep *p = m;
	struct msg_crep *e;

	fill_attr(f, &p->dir);
	p->count = nrecords(f);
	e = fill_keep(f, xmalloc((p->count ? p->count : 1) * sizeof(*e)));
	for (uint32_t i = 0; i < p->count; i++) {
		f->ctr++;
		e[i].status = (int32_t)tag_value(K_I32, "status", f->ctr);
		e[i].created = v8(f, "created");
		fill_attr(f, &e[i].child);
	}
	p->ents = e;
}

static int creates_rep_ent(const struct msg_creates_rep *p, uint32_t i,
			   struct msg_crep *e)
{
	struct rbuf it;

	if (p->ents) {
		*e = p->ents[i];
		return 1;
	}
	rbuf_init(&it, p->list.p, p->list.len);
	for (uint32_t k = 0; k <= i; k++)
		if (!msg_crep_next(&it, e))
			return 0;
	return 1;
}

static int eq_creates_rep(const void *a, const void *b)
{
	const struct msg_creates_rep *x = a, *y = b;
	struct msg_crep ea, eb;

	if (!attr_eq(&x->dir, &y->dir) || x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (!creates_rep_ent(x, i, &ea) ||
		    !creates_rep_ent(y, i, &eb) || ea.status != eb.status ||
		    ea.created != eb.created || !attr_eq(&ea.child, &eb.child))
			return 0;
	return 1;
}

/* CREATEATTR: CREATES' entries with the attribute changes after each. */
static void fill_createattr_req(struct fill *f, void *m)
{
	struct msg_createattr_req *q = m;
	struct msg_centa *e;

	fill_fid(f, &q->dir);
	q->count = nrecords(f);
	e = fill_keep(f, xmalloc((q->count ? q->count : 1) * sizeof(*e)));
	for (uint32_t i = 0; i < q->count; i++) {
		fill_str(f, "name", &e[i].c.name, 18);
		e[i].c.mode = v32(f, "mode");
		e[i].c.uid = v32(f, "uid");
		e[i].c.gid = v32(f, "gid");
		e[i].c.flags = v32(f, "flags");
		fill_fid(f, &e[i].c.fid);
		fill_time(f, &e[i].c.time);
		e[i].valid = v32(f, "valid");
		e[i].mode = v32(f, "attr mode");
		e[i].uid = v32(f, "attr uid");
		e[i].gid = v32(f, "attr gid");
		e[i].steps = v32(f, "steps");
		fill_time(f, &e[i].atime);
		fill_time(f, &e[i].mtime);
		fill_time(f, &e[i].ctime);
		fill_blob(f, "data", &e[i].c.data);
	}
	q->ents = e;
}

static int createattr_ent(const struct msg_createattr_req *q, uint32_t i,
			  struct msg_centa *e)
{
	struct rbuf it;

	if (q->ents) {
		*e = q->ents[i];
		return 1;
	}
	rbuf_init(&it, q->list.p, q->list.len);
	for (uint32_t k = 0; k <= i; k++)
		if (!msg_centa_next(&it, e))
			return 0;
	return 1;
}

static int eq_createattr_req(const void *a, const void *b)
{
	const struct msg_createattr_req *x = a, *y = b;
	struct msg_centa ea, eb;

	if (!fid_eq(&x->dir, &y->dir) || x->count != y->count)
		return 0;
	for (uint32_t i = 0; i < x->count; i++)
		if (!createattr_ent(x, i, &ea) || !createattr_ent(y, i, &eb) ||
		    !str_eq(&ea.c.name, &eb.c.name) || ea.c.mode != eb.c.mode ||
		    ea.c.uid != eb.c.uid || ea.c.gid != eb.c.gid ||
		    ea.c.flags != eb.c.flags ||
		    !fid_eq(&ea.c.fid, &eb.c.fid) ||
		    !time_eq(&ea.c.time, &eb.c.time) ||
		    ea.valid != eb.valid || ea.mode != eb.mode ||
		    ea.uid != eb.uid || ea.gid != eb.gid ||
		    ea.steps != eb.steps || !time_eq(&ea.atime, &eb.atime) ||
		    !time_eq(&ea.mtime, &eb.mtime) ||
		    !time_eq(&ea.ctime, &eb.ctime) ||
		    !bytes_eq(&ea.c.data, &eb.c.data))
			return 0;
	return 1;
}

struct shape {
	const char *name;
	void (*fill)(struct fill *f, void *m);
	int (*eq)(const void *a, const void *b);
};

#define SHAPE(n) static const struct shape S_##n = { #n, fill_##n, eq_##n }
SHAPE(empty); SHAPE(fidm); SHAPE(attrm); SHAPE(attr2);
SHAPE(hello_req); SHAPE(hello_rep); SHAPE(lookup_req); SHAPE(setattr_req);
SHAPE(create_req); SHAPE(create_rep); SHAPE(symlink_req);
SHAPE(readlink_rep); SHAPE(link_req); SHAPE(remove_req); SHAPE(rename_req);
SHAPE(readdir_req); SHAPE(readdir_rep); SHAPE(read_req); SHAPE(read_rep);
SHAPE(write_req); SHAPE(fsync_req); SHAPE(statfs_rep); SHAPE(setxattr_req);
SHAPE(getxattr_req); SHAPE(listxattr_req); SHAPE(sized_rep);
SHAPE(removexattr_req); SHAPE(fallocate_req); SHAPE(status_rep);
SHAPE(cb_break); SHAPE(bulkstat_req); SHAPE(bulkstat_rep);
SHAPE(orphan_drop_req); SHAPE(wtoken_req); SHAPE(lock_req);
SHAPE(getlk_rep); SHAPE(auth_req); SHAPE(auth_rep); SHAPE(fids_req);
SHAPE(fids_rep); SHAPE(removes_req); SHAPE(removes_rep);
SHAPE(removesat_req);
SHAPE(creates_req); SHAPE(creates_rep); SHAPE(writeattr_req);
SHAPE(createattr_req); SHAPE(lockd_rep); SHAPE(lkreturn_req);

/* The struct of each opcode's request (push) and reply (ack). Every
 * descriptor must have a row here (test_case_table). */
static const struct tcase {
	unsigned op;
	const struct shape *sh[2];  /* [0] request, [1] reply */
} cases[] = {
	{ OP_HELLO,       { &S_hello_req,       &S_hello_rep } },
	{ OP_PING,        { &S_empty,           &S_empty } },
	{ OP_GETATTR,     { &S_fidm,            &S_attrm } },
	{ OP_LOOKUP,      { &S_lookup_req,      &S_attrm } },
	{ OP_SETATTR,     { &S_setattr_req,     &S_attrm } },
	{ OP_CREATE,      { &S_create_req,      &S_create_rep } },
	{ OP_SYMLINK,     { &S_symlink_req,     &S_attr2 } },
	{ OP_READLINK,    { &S_fidm,            &S_readlink_rep } },
	{ OP_LINK,        { &S_link_req,        &S_attr2 } },
	{ OP_REMOVE,      { &S_remove_req,      &S_attrm } },
	{ OP_RENAME,      { &S_rename_req,      &S_attr2 } },
	{ OP_READDIR,     { &S_readdir_req,     &S_readdir_rep } },
	{ OP_READ,        { &S_read_req,        &S_read_rep } },
	{ OP_WRITE,       { &S_write_req,       &S_attrm } },
	{ OP_FSYNC,       { &S_fsync_req,       &S_empty } },
	{ OP_STATFS,      { &S_empty,           &S_statfs_rep } },
	{ OP_SETXATTR,    { &S_setxattr_req,    &S_empty } },
	{ OP_GETXATTR,    { &S_getxattr_req,    &S_sized_rep } },
	{ OP_LISTXATTR,   { &S_listxattr_req,   &S_sized_rep } },
	{ OP_REMOVEXATTR, { &S_removexattr_req, &S_empty } },
	{ OP_FALLOCATE,   { &S_fallocate_req,   &S_attrm } },
	{ OP_STATUS,      { &S_empty,           &S_status_rep } },
	{ OP_BULKSTAT,    { &S_bulkstat_req,    &S_bulkstat_rep } },
	{ OP_ORPHAN_DROP, { &S_orphan_drop_req, &S_empty } },
	{ OP_ATIME,       { &S_orphan_drop_req, &S_empty } },
	{ OP_WTOKEN,      { &S_wtoken_req,      &S_attrm } },
	{ OP_WRETURN,     { &S_orphan_drop_req, &S_empty } },
	{ OP_LOCK,        { &S_lock_req,        &S_attrm } },
	{ OP_GETLK,       { &S_lock_req,        &S_getlk_rep } },
	{ OP_AUTH,        { &S_auth_req,        &S_auth_rep } },
	{ OP_FIDS,        { &S_fids_req,        &S_fids_rep } },
	{ OP_REMOVES,     { &S_removes_req,     &S_removes_rep } },
	{ OP_CREATES,     { &S_creates_req,     &S_creates_rep } },
	{ OP_WRITEATTR,   { &S_writeattr_req,   &S_attrm } },
	{ OP_CREATEATTR,  { &S_createattr_req,  &S_creates_rep } },
	{ OP_LOCKD,       { &S_lock_req,        &S_lockd_rep } },
	{ OP_LKRETURN,    { &S_lkreturn_req,    &S_empty } },
	{ OP_REMOVESAT,   { &S_removesat_req,   &S_removes_rep } },
	{ OP_CB_BREAK,    { &S_cb_break,        &S_empty } },
	{ OP_CB_RECALL,   { &S_orphan_drop_req, &S_empty } },
	{ OP_CB_LOCKWAKE, { &S_orphan_drop_req, &S_empty } },
	{ OP_CB_LKRECALL, { &S_orphan_drop_req, &S_empty } },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static const char *const dir_name[2] = { "request", "reply" };

/* Fill m for (op, dir) in variant v and encode it into w (initialised
 * here). Returns 0, or -1 after reporting an encoder error. */
static int encode_case(const struct tcase *c, int dir, int v,
		       struct fill *f, union msg_any *m, struct wbuf *w)
{
	memset(f, 0, sizeof(*f));
	f->variant = v;
	f->op = c->op;
	memset(m, 0, sizeof(*m));
	c->sh[dir]->fill(f, m);
	wbuf_init(w);
	msg_encode(c->op, dir, w, m);
	if (w->err) {
		fprintf(stderr, "  %s %s (%s): encoder error %d\n",
			msg_name(c->op), dir_name[dir], variant_name[v], w->err);
		failed_here++;
		return -1;
	}
	return 0;
}

#endif

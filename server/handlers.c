/*
 * handlers.c - request handlers. See handlers.h.
 *
 * A handler decodes its request from q->r, checks every field, calls the
 * store and appends the reply payload to q->w (the reply frame, header
 * already begun). It records, as it goes, the FIDs whose attributes the
 * reply carries and the things it changed, in q->out; deliver.c does the
 * rest (breaks, promises, the wait for acknowledgements, the reply).
 *
 * A payload that does not decode exactly is a protocol error: the
 * connection is failed. A field that decodes but is not acceptable (a bad
 * name, an oversized write) is answered with an errno, as Linux would;
 * when several are bad, the first in wire order wins.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "callback.h"
#include "drc.h"
#include "handlers.h"
#include "server.h"
#include "stats.h"
#include "store.h"

#define OPS_READDIR_MAX   8192u /* 8192 x 361-byte entries fit one frame */
#define OPS_STR_ANY       65535u

struct op_req {
	const struct srv_ctx *ctx;
	struct conn *c;
	struct rbuf r;
	struct wbuf *w;          /* reply frame, header already begun */
	struct handler_out *out;
	int verr;                /* first unacceptable field: the status */
	const char *bad;         /* payload did not decode: why */
	/* Decoded names, NUL-terminated for the store; raw: in the payload. */
	char name[2][CAIRN_NAME_MAX + 1];
	const char *raw[2];
	size_t namelen[2];
};

typedef int (*op_fn)(struct op_req *q);

/* --- request helpers ------------------------------------------------------ */

static void set_verr(struct op_req *q, int err)
{
	if (!q->verr)
		q->verr = err;
}

/* Finish decoding: -EPROTO (and q->bad) if the payload was not consumed
 * exactly, else the first field error or 0. */
static int req_end(struct op_req *q)
{
	int short_or_bad = q->r.err != 0;

	if (wire_get_end(&q->r)) {
		q->bad = short_or_bad ? "payload too short or a bad field"
				      : "trailing bytes";
		return -EPROTO;
	}
	return q->verr;
}

/* Name validation as a local Linux file system sees a path component. */
static int name_check(const char *p, size_t n)
{
	if (n > CAIRN_NAME_MAX)
		return -ENAMETOOLONG;
	if (n == 0 || memchr(p, '/', n) || memchr(p, '\0', n))
		return -EINVAL;
	if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
		return -EINVAL;
	return 0;
}

/* Decode a name into q->name[i]. */
static void get_name(struct op_req *q, int i)
{
	size_t n;
	const char *p = wire_get_str(&q->r, &n, OPS_STR_ANY);
	int err;

	q->name[i][0] = '\0';
	q->namelen[i] = 0;
	q->raw[i] = "";
	if (!p)
		return;
	err = name_check(p, n);
	if (err) {
		set_verr(q, err);
		return;
	}
	memcpy(q->name[i], p, n);
	q->name[i][n] = '\0';
	q->namelen[i] = n;
	q->raw[i] = p;
}

/* Extended attribute names: 1..255 bytes, no NUL; system.* unsupported. */
static void get_xattr_name(struct op_req *q, char dst[CAIRN_XATTR_NAME_MAX + 1])
{
	size_t n;
	const char *p = wire_get_str(&q->r, &n, OPS_STR_ANY);

	dst[0] = '\0';
	if (!p)
		return;
	if (n == 0 || n > CAIRN_XATTR_NAME_MAX) {
		set_verr(q, -ERANGE);
		return;
	}
	if (memchr(p, '\0', n)) {
		set_verr(q, -EINVAL);
		return;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
	if (!strncmp(dst, "system.", 7))
		set_verr(q, -EOPNOTSUPP);
}

static void promise_add(struct op_req *q, const struct cairn_fid *fid)
{
	struct handler_out *o = q->out;

	if (o->np == o->pcap) {
		int cap = o->pcap * 4;
		struct cairn_fid *n = malloc((size_t)cap * sizeof(*n));
		if (!n) {
			o->nomem = 1;
			return;
		}
		memcpy(n, o->pfid, (size_t)o->np * sizeof(*n));
		if (o->pfid != o->pfix)
			free(o->pfid);
		o->pfid = n;
		o->pcap = cap;
	}
	o->pfid[o->np++] = *fid;
}

/* Append attr a to the reply and promise it to the requester. */
static void put_attr(struct op_req *q, const struct cairn_attr *a)
{
	wire_put_attr(q->w, a);
	promise_add(q, &a->fid);
}

/* Record a change: fid itself (name NULL) or its entry `name`, which must
 * point into the request's payload (it is read during delivery). */
static void change(struct op_req *q, const struct cairn_fid *fid,
		   const char *name, size_t namelen, int all)
{
	struct handler_out *o = q->out;

	if (o->nch == HANDLER_MAX_CHANGES)
		return; /* cannot happen: no op records more */
	o->ch[o->nch++] = (struct cb_change){ *fid, name, namelen, all };
}

/* Objects the store reports as touched besides the reply's: everyone,
 * the changer included, must refetch them. */
static void change_all(struct op_req *q, const struct store_changed *sc)
{
	for (int i = 0; i < sc->n && i < 4; i++)
		change(q, &sc->fid[i], NULL, 0, 1);
}

/* --- handlers -------------------------------------------------------------- */

static int op_hello(struct op_req *q)
{
	uint32_t magic = wire_get_u32(&q->r);
	uint32_t version = wire_get_u32(&q->r);
	const uint8_t *id = wire_get_bytes(&q->r, 16);
	struct cairn_attr root;
	uint32_t flags;
	int ret;

	flags = wire_get_u32(&q->r); /* undefined bits are ignored */
	if ((ret = req_end(q)))
		return ret;
	if (conn_hello_done(q->c))
		return -EISCONN;
	if (magic != CAIRN_MAGIC) {
		q->bad = "bad HELLO magic";
		return -EPROTO;
	}
	if (version != CAIRN_PROTO_VERSION) {
		snprintf(q->out->close_after, sizeof(q->out->close_after),
			 "unsupported protocol version %u", version);
		return -EPROTONOSUPPORT;
	}
	ret = store_root(q->ctx->st, &root);
	if (ret)
		return ret;
	/* A client that resends with the same id gets the cache; without
	 * one (out of memory) it is served as one that does not. */
	if (flags & HELLO_REPLAY)
		conn_set_drc(q->c, drc_client_get(server_drc(q->ctx->srv),
						   id));
	conn_set_client_id(q->c, id);
	cb_client_set_acks(q->ctx->cb, conn_cb_client(q->c),
			   (flags & HELLO_CB_ACK) != 0);
	wire_put_u32(q->w, CAIRN_PROTO_VERSION);
	wire_put_bytes(q->w, q->ctx->server_id, 16);
	wire_put_u64(q->w, q->ctx->epoch);
	put_attr(q, &root);
	log_info("peer %s: hello, client %02x%02x%02x%02x%02x%02x%02x%02x%s%s",
		 conn_peer(q->c), id[0], id[1], id[2], id[3], id[4], id[5],
		 id[6], id[7],
		 flags & HELLO_CB_ACK ? ", acknowledges breaks" : "",
		 conn_drc(q->c) ? ", resends with the same id" : "");
	return 0;
}

static int op_ping(struct op_req *q)
{
	return req_end(q);
}

static int op_getattr(struct op_req *q)
{
	struct cairn_fid fid;
	struct cairn_attr a;
	int ret;

	wire_get_fid(&q->r, &fid);
	if ((ret = req_end(q)))
		return ret;
	ret = store_getattr(q->ctx->st, &fid, &a);
	if (!ret)
		put_attr(q, &a);
	return ret;
}

static int op_lookup(struct op_req *q)
{
	struct cairn_fid dir;
	struct cairn_attr a;
	int ret;

	wire_get_fid(&q->r, &dir);
	get_name(q, 0);
	if ((ret = req_end(q)))
		return ret;
	ret = store_lookup(q->ctx->st, &dir, q->name[0], &a);
	if (!ret)
		put_attr(q, &a);
	else if (ret == -ENOENT)
		/* A negative entry is cached too: the client needs the break
		 * when the name appears, which comes through the dir. */
		promise_add(q, &dir);
	return ret;
}

static int op_setattr(struct op_req *q)
{
	struct cairn_fid fid;
	struct store_setattr sa;
	struct cairn_attr a;
	int ret;

	wire_get_fid(&q->r, &fid);
	sa.valid = wire_get_u32(&q->r);
	sa.mode = wire_get_u32(&q->r);
	sa.uid = wire_get_u32(&q->r);
	sa.gid = wire_get_u32(&q->r);
	sa.size = wire_get_u64(&q->r);
	wire_get_time(&q->r, &sa.atime);
	wire_get_time(&q->r, &sa.mtime);
	wire_get_time(&q->r, &sa.ctime);
	if (sa.valid & ~0x1ffu)
		set_verr(q, -EINVAL);
	if ((sa.valid & SA_SIZE) && sa.size > (uint64_t)INT64_MAX)
		set_verr(q, -EFBIG);
	if ((ret = req_end(q)))
		return ret;
	ret = store_setattr(q->ctx->st, &fid, &sa, &a);
	if (ret)
		return ret;
	put_attr(q, &a);
	change(q, &fid, NULL, 0, 0);
	return 0;
}

static int op_create(struct op_req *q)
{
	struct cairn_fid dir;
	struct cairn_attr a, da;
	uint32_t mode, uid, gid, rdev, flags;
	int ret, created = 0;

	wire_get_fid(&q->r, &dir);
	get_name(q, 0);
	mode = wire_get_u32(&q->r);
	uid = wire_get_u32(&q->r);
	gid = wire_get_u32(&q->r);
	rdev = wire_get_u32(&q->r);
	flags = wire_get_u32(&q->r);
	if (flags & ~(uint32_t)CR_EXCL)
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	ret = store_create(q->ctx->st, &dir, q->name[0], mode, uid, gid, rdev,
			   flags, &created, &a, &da);
	if (ret)
		return ret;
	wire_put_u8(q->w, created ? 1 : 0);
	put_attr(q, &a);
	put_attr(q, &da);
	if (created)
		change(q, &dir, q->raw[0], q->namelen[0], 0);
	return 0;
}

static int op_symlink(struct op_req *q)
{
	struct cairn_fid dir;
	struct cairn_attr a, da;
	char target[CAIRN_SYMLINK_MAX + 1];
	const char *t;
	size_t tlen;
	uint32_t uid, gid;
	int ret;

	wire_get_fid(&q->r, &dir);
	get_name(q, 0);
	t = wire_get_str(&q->r, &tlen, OPS_STR_ANY);
	uid = wire_get_u32(&q->r);
	gid = wire_get_u32(&q->r);
	if (t && tlen == 0)
		set_verr(q, -ENOENT); /* symlink(2) with an empty target */
	else if (t && tlen > CAIRN_SYMLINK_MAX)
		set_verr(q, -ENAMETOOLONG);
	else if (t && memchr(t, '\0', tlen))
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	memcpy(target, t, tlen);
	target[tlen] = '\0';
	ret = store_symlink(q->ctx->st, &dir, q->name[0], target, uid, gid, &a,
			    &da);
	if (ret)
		return ret;
	put_attr(q, &a);
	put_attr(q, &da);
	change(q, &dir, q->raw[0], q->namelen[0], 0);
	return 0;
}

static int op_readlink(struct op_req *q)
{
	struct cairn_fid fid;
	char target[CAIRN_SYMLINK_MAX + 1];
	size_t len = 0;
	int ret;

	wire_get_fid(&q->r, &fid);
	if ((ret = req_end(q)))
		return ret;
	ret = store_readlink(q->ctx->st, &fid, target, &len);
	if (!ret)
		wire_put_str(q->w, target, len);
	return ret;
}

static int op_link(struct op_req *q)
{
	struct cairn_fid fid, dir;
	struct cairn_attr a, da;
	int ret;

	wire_get_fid(&q->r, &fid);
	wire_get_fid(&q->r, &dir);
	get_name(q, 0);
	if ((ret = req_end(q)))
		return ret;
	ret = store_link(q->ctx->st, &fid, &dir, q->name[0], &a, &da);
	if (ret)
		return ret;
	put_attr(q, &a);
	put_attr(q, &da);
	change(q, &fid, NULL, 0, 0);
	change(q, &dir, q->raw[0], q->namelen[0], 0);
	return 0;
}

static int op_remove(struct op_req *q)
{
	struct cairn_fid dir;
	struct cairn_attr da;
	struct store_changed sc = { 0 };
	uint32_t flags;
	int ret;

	wire_get_fid(&q->r, &dir);
	get_name(q, 0);
	flags = wire_get_u32(&q->r);
	if (flags & ~(uint32_t)RM_DIR)
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	ret = store_remove(q->ctx->st, &dir, q->name[0], flags, &da, &sc);
	if (ret)
		return ret;
	put_attr(q, &da);
	change(q, &dir, q->raw[0], q->namelen[0], 0);
	change_all(q, &sc);
	return 0;
}

static int op_rename(struct op_req *q)
{
	struct cairn_fid sdir, ddir;
	struct cairn_attr sa, da;
	struct store_changed sc = { 0 };
	uint32_t flags;
	int ret;

	wire_get_fid(&q->r, &sdir);
	get_name(q, 0);
	wire_get_fid(&q->r, &ddir);
	get_name(q, 1);
	flags = wire_get_u32(&q->r);
	if ((flags & ~(uint32_t)(RN_NOREPLACE | RN_EXCHANGE)) ||
	    flags == (RN_NOREPLACE | RN_EXCHANGE))
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	ret = store_rename(q->ctx->st, &sdir, q->name[0], &ddir, q->name[1],
			   flags, &sa, &da, &sc);
	if (ret)
		return ret;
	put_attr(q, &sa);
	put_attr(q, &da);
	change(q, &sdir, q->raw[0], q->namelen[0], 0);
	change(q, &ddir, q->raw[1], q->namelen[1], 0);
	change_all(q, &sc);
	return 0;
}

struct readdir_state {
	struct op_req *q;
	uint32_t count;
};

/* Called inside the store's read transaction: encode only. */
static int readdir_entry(void *arg, uint64_t next_cookie, const char *name,
			 size_t namelen, const struct cairn_attr *attr)
{
	struct readdir_state *rs = arg;

	wire_put_u64(rs->q->w, next_cookie);
	wire_put_str(rs->q->w, name, namelen);
	put_attr(rs->q, attr);
	rs->count++;
	return rs->q->w->err || rs->q->out->nomem;
}

static int op_readdir(struct op_req *q)
{
	struct cairn_fid dir;
	struct readdir_state rs = { q, 0 };
	uint64_t cookie;
	uint32_t max;
	size_t at;
	int ret, eof = 0;

	wire_get_fid(&q->r, &dir);
	cookie = wire_get_u64(&q->r);
	max = wire_get_u32(&q->r);
	if (max == 0)
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	if (max > OPS_READDIR_MAX)
		max = OPS_READDIR_MAX;
	at = q->w->len;
	wire_put_u32(q->w, 0); /* count, patched below */
	wire_put_u8(q->w, 0);  /* eof */
	ret = store_readdir(q->ctx->st, &dir, cookie, max, readdir_entry, &rs,
			    &eof);
	if (ret)
		return ret;
	if (q->w->err)
		return q->w->err;
	/* The listing is cached with the directory's promise. */
	promise_add(q, &dir);
	/* Patch count and eof in place: the bytes are reserved, so the puts
	 * cannot reallocate. */
	size_t end = q->w->len;
	q->w->len = at;
	wire_put_u32(q->w, rs.count);
	wire_put_u8(q->w, eof ? 1 : 0);
	q->w->len = end;
	return 0;
}

static int op_read(struct op_req *q)
{
	struct cairn_fid fid;
	struct cairn_attr a;
	uint64_t off;
	uint32_t len, n = 0;
	uint8_t *p;
	size_t at;
	int ret;

	wire_get_fid(&q->r, &fid);
	off = wire_get_u64(&q->r);
	len = wire_get_u32(&q->r);
	if (len > CAIRN_MAX_IO)
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	/* attr | u32 length | data: reserve once, read straight into it. */
	at = q->w->len;
	p = wbuf_reserve(q->w, WIRE_ATTR_SIZE + 4 + (size_t)len);
	if (!p)
		return -ENOMEM;
	ret = store_read(q->ctx->st, &fid, off, len, p + WIRE_ATTR_SIZE + 4, &n,
			 &a);
	if (ret)
		return ret;
	if (n > len)
		n = len; /* never trust a callee past its buffer */
	/* Fill the reserved header in place, then trim to the bytes read. */
	q->w->len = at;
	wire_put_attr(q->w, &a);
	wire_put_u32(q->w, n);
	q->w->len = at + WIRE_ATTR_SIZE + 4 + n;
	promise_add(q, &a.fid);
	return 0;
}

static int op_write(struct op_req *q)
{
	struct cairn_fid fid;
	struct cairn_attr a;
	const void *data;
	uint64_t off;
	uint32_t flags;
	size_t n;
	int ret;

	wire_get_fid(&q->r, &fid);
	off = wire_get_u64(&q->r);
	flags = wire_get_u32(&q->r);
	data = wire_get_blob(&q->r, &n, WIRE_MAX_PAYLOAD);
	if (flags & ~(uint32_t)WR_SYNC)
		set_verr(q, -EINVAL);
	if (n > CAIRN_MAX_IO)
		set_verr(q, -EINVAL);
	if (off > (uint64_t)INT64_MAX - n)
		set_verr(q, -EFBIG);
	if ((ret = req_end(q)))
		return ret;
	ret = store_write(q->ctx->st, &fid, off, data, (uint32_t)n, flags, &a);
	if (ret)
		return ret;
	put_attr(q, &a);
	change(q, &fid, NULL, 0, 0);
	return 0;
}

static int op_fsync(struct op_req *q)
{
	struct cairn_fid fid;
	uint32_t flags;
	int ret;

	wire_get_fid(&q->r, &fid);
	flags = wire_get_u32(&q->r);
	if (flags & ~(uint32_t)FS_DATASYNC)
		set_verr(q, -EINVAL);
	if ((ret = req_end(q)))
		return ret;
	return store_fsync(q->ctx->st, &fid, flags);
}

static int op_statfs(struct op_req *q)
{
	struct cairn_statfs s;
	int ret;

	if ((ret = req_end(q)))
		return ret;
	ret = store_statfs(q->ctx->st, &s);
	if (!ret)
		wire_put_statfs(q->w, &s);
	return ret;
}

static int op_setxattr(struct op_req *q)
{
	struct cairn_fid fid;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	const void *val;
	uint32_t flags;
	size_t n;
	int ret;

	wire_get_fid(&q->r, &fid);
	get_xattr_name(q, name);
	flags = wire_get_u32(&q->r);
	val = wire_get_blob(&q->r, &n, WIRE_MAX_PAYLOAD);
	if (flags & ~(uint32_t)(XA_CREATE | XA_REPLACE))
		set_verr(q, -EINVAL);
	if (n > CAIRN_XATTR_SIZE_MAX)
		set_verr(q, -E2BIG);
	if ((ret = req_end(q)))
		return ret;
	ret = store_setxattr(q->ctx->st, &fid, name, val, n, flags);
	if (!ret)
		change(q, &fid, NULL, 0, 0); /* ctime; cached xattrs */
	return ret;
}

/* Shared shape of GETXATTR and LISTXATTR replies: u32 full size, blob. */
static int put_sized(struct op_req *q, uint32_t size, int is_list,
		     const char *name, const struct cairn_fid *fid)
{
	uint32_t cap = size > CAIRN_XATTR_SIZE_MAX ? CAIRN_XATTR_SIZE_MAX
						   : size;
	size_t at = q->w->len, len = 0;
	uint8_t *p = wbuf_reserve(q->w, 8 + (size_t)cap);
	int ret;

	if (!p)
		return -ENOMEM;
	if (is_list)
		ret = store_listxattr(q->ctx->st, fid, (char *)p + 8, cap,
				      &len);
	else
		ret = store_getxattr(q->ctx->st, fid, name, p + 8, cap, &len);
	if (ret)
		return ret;
	if (cap && len > cap)
		return -ERANGE;
	if (len > UINT32_MAX)
		return -E2BIG;
	/* Fill the reserved sizes in place, then trim to the value. */
	q->w->len = at;
	wire_put_u32(q->w, (uint32_t)len);
	wire_put_u32(q->w, cap ? (uint32_t)len : 0);
	q->w->len = at + 8 + (cap ? len : 0);
	return 0;
}

static int op_getxattr(struct op_req *q)
{
	struct cairn_fid fid;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	uint32_t size;
	int ret;

	wire_get_fid(&q->r, &fid);
	get_xattr_name(q, name);
	size = wire_get_u32(&q->r);
	if ((ret = req_end(q)))
		return ret;
	return put_sized(q, size, 0, name, &fid);
}

static int op_listxattr(struct op_req *q)
{
	struct cairn_fid fid;
	uint32_t size;
	int ret;

	wire_get_fid(&q->r, &fid);
	size = wire_get_u32(&q->r);
	if ((ret = req_end(q)))
		return ret;
	return put_sized(q, size, 1, NULL, &fid);
}

static int op_removexattr(struct op_req *q)
{
	struct cairn_fid fid;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	int ret;

	wire_get_fid(&q->r, &fid);
	get_xattr_name(q, name);
	if ((ret = req_end(q)))
		return ret;
	ret = store_removexattr(q->ctx->st, &fid, name);
	if (!ret)
		change(q, &fid, NULL, 0, 0);
	return ret;
}

static int op_fallocate(struct op_req *q)
{
	struct cairn_fid fid;
	struct cairn_attr a;
	uint32_t mode;
	uint64_t off, len;
	int ret;

	wire_get_fid(&q->r, &fid);
	mode = wire_get_u32(&q->r);
	off = wire_get_u64(&q->r);
	len = wire_get_u64(&q->r);
	if (len == 0)
		set_verr(q, -EINVAL);
	else if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		set_verr(q, -EFBIG);
	if ((ret = req_end(q)))
		return ret;
	ret = store_fallocate(q->ctx->st, &fid, mode, off, len, &a);
	if (ret)
		return ret;
	put_attr(q, &a);
	change(q, &fid, NULL, 0, 0);
	return 0;
}

static int op_status(struct op_req *q)
{
	const struct srv_ctx *ctx = q->ctx;
	struct timespec now;
	char *text = NULL;
	size_t len = 0;
	long conns = 0, clients = 0, drc_clients = 0, drc_entries = 0;
	FILE *f;
	int ret;

	if ((ret = req_end(q)))
		return ret;
	f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	clock_gettime(CLOCK_MONOTONIC, &now);
	server_counts(ctx->srv, &conns, &clients);
	fprintf(f, "uptime_s %lld\n",
		(long long)(now.tv_sec - ctx->started.tv_sec));
	fprintf(f, "connections %ld\n", conns);
	fprintf(f, "clients %ld\n", clients);
	fprintf(f, "callbacks %zu\n", cb_count(ctx->cb));
	fprintf(f, "cb_ack_cycles %llu\n",
		(unsigned long long)cb_ack_cycles(ctx->cb));
	fprintf(f, "epoch %016llx\n", (unsigned long long)ctx->epoch);
	drc_counts(server_drc(ctx->srv), &drc_clients, &drc_entries);
	fprintf(f, "drc_hits %llu\n",
		(unsigned long long)drc_hits(server_drc(ctx->srv)));
	fprintf(f, "drc_clients %ld\n", drc_clients);
	fprintf(f, "drc_entries %ld\n", drc_entries);
	stats_print(ctx->stats, f);
	if (fclose(f)) {
		free(text);
		return -ENOMEM;
	}
	wire_put_blob(q->w, text, len);
	free(text);
	return 0;
}

static const struct {
	const char *name;
	op_fn fn;
} op_table[OP__COUNT] = {
	[OP_HELLO] = { "HELLO", op_hello },
	[OP_PING] = { "PING", op_ping },
	[OP_GETATTR] = { "GETATTR", op_getattr },
	[OP_LOOKUP] = { "LOOKUP", op_lookup },
	[OP_SETATTR] = { "SETATTR", op_setattr },
	[OP_CREATE] = { "CREATE", op_create },
	[OP_SYMLINK] = { "SYMLINK", op_symlink },
	[OP_READLINK] = { "READLINK", op_readlink },
	[OP_LINK] = { "LINK", op_link },
	[OP_REMOVE] = { "REMOVE", op_remove },
	[OP_RENAME] = { "RENAME", op_rename },
	[OP_READDIR] = { "READDIR", op_readdir },
	[OP_READ] = { "READ", op_read },
	[OP_WRITE] = { "WRITE", op_write },
	[OP_FSYNC] = { "FSYNC", op_fsync },
	[OP_STATFS] = { "STATFS", op_statfs },
	[OP_SETXATTR] = { "SETXATTR", op_setxattr },
	[OP_GETXATTR] = { "GETXATTR", op_getxattr },
	[OP_LISTXATTR] = { "LISTXATTR", op_listxattr },
	[OP_REMOVEXATTR] = { "REMOVEXATTR", op_removexattr },
	[OP_FALLOCATE] = { "FALLOCATE", op_fallocate },
	[OP_STATUS] = { "STATUS", op_status },
};

/* --- dispatch -------------------------------------------------------------- */

const char *handler_name(unsigned op)
{
	return op < OP__COUNT && op_table[op].fn ? op_table[op].name : NULL;
}

/* Replace whatever the reply holds by an error frame with no payload. */
static void reply_error(struct wbuf *w, const struct wire_hdr *h, int status)
{
	size_t hdr;

	wbuf_reset(w);
	hdr = wire_frame_begin(w, h->op, WF_REPLY, h->id, status);
	wire_frame_end(w, hdr);
}

int handler_run(const struct srv_ctx *ctx, struct conn *c,
		const struct wire_hdr *h, const uint8_t *payload,
		struct handler_out *out)
{
	struct op_req q = { .ctx = ctx, .c = c, .out = out };
	const char *name = handler_name(h->op);
	size_t hdr;
	int status;

	memset(out, 0, sizeof(*out));
	out->pfid = out->pfix;
	out->pcap = (int)(sizeof(out->pfix) / sizeof(out->pfix[0]));
	wbuf_init(&out->w);
	q.w = &out->w;
	rbuf_init(&q.r, payload, h->len);
	hdr = wire_frame_begin(q.w, h->op, WF_REPLY, h->id, 0);
	status = name ? op_table[h->op].fn(&q) : -ENOSYS;
	if (q.bad) {
		conn_fail(c, "malformed %s request (%u bytes): %s", name, h->len,
			  q.bad);
		handler_out_free(out);
		return -EPROTO;
	}
	if (!status && (q.w->err || out->nomem))
		status = q.w->err ? q.w->err : -ENOMEM;
	if (status) {
		/* Error replies carry no payload and promise nothing, except
		 * a negative lookup, which promised the directory. */
		if (!(h->op == OP_LOOKUP && status == -ENOENT))
			out->np = 0;
		out->nch = 0;
		wbuf_reset(q.w);
		hdr = wire_frame_begin(q.w, h->op, WF_REPLY, h->id, status);
	}
	wire_frame_end(q.w, hdr);
	if (q.w->err) {
		log_error("peer %s: cannot encode %s reply: %s", conn_peer(c),
			  name ? name : "?", strerror(-q.w->err));
		out->np = out->nch = 0;
		reply_error(q.w, h, -EIO);
	}
	log_debug("peer %s: %s id %u -> %d", conn_peer(c), name ? name : "?",
		  h->id, status);
	return 0;
}

void handler_out_free(struct handler_out *out)
{
	if (out->pfid != out->pfix)
		free(out->pfid);
	out->pfid = out->pfix;
	out->np = 0;
	wbuf_free(&out->w);
}

int handlers_check(const char **missing)
{
	for (unsigned op = 1; op < OP__COUNT; op++) {
		if (!op_table[op].fn) {
			*missing = "?";
			return -ENOSYS;
		}
	}
	return 0;
}

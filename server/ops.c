/*
 * ops.c - request handlers. See ops.h.
 *
 * A handler decodes its request from q->r, checks every field, calls the
 * store and appends the reply payload to q->w. It records, as it goes, the
 * FIDs whose attributes the reply carries (promises to register for the
 * requester) and the things it changed (callback breaks for the others).
 * ops_handle() does the rest in this order, which is what makes callbacks
 * safe against concurrent requests:
 *
 *   seq0 = cb_seq()            before the store is asked anything
 *   handler                    store call, reply encoded
 *   cb_break + send            other clients learn of the change...
 *   cb_register
 *   wait for the acks          ...and have invalidated their kernel's
 *                              copies before the changer's reply is sent
 *   send reply
 *   cb_recheck + send          re-break what a concurrent change made
 *                              stale, now ordered after the reply
 *
 * The wait does not hold the worker: when breaks are outstanding the
 * reply and everything after it are parked in a struct parked, and sent
 * by whichever thread settles the last acknowledgement (a connection
 * reader receiving it, the expiry thread timing it out, a reader whose
 * connection closes). See callback.h for why this cannot deadlock and
 * docs/LOCKING.md for the whole picture.
 *
 * Changes of clients that said HELLO_REPLAY go through the duplicate
 * request cache (drc.h) first: a resent change is answered from it, and
 * the reply of an original is recorded in reply_finish, when it is sent,
 * i.e. after its breaks were acknowledged; duplicates that arrived
 * meanwhile are answered then too (drc_replay).
 *
 * A payload that does not decode exactly is a protocol error: the
 * connection is failed. A field that decodes but is not acceptable (a bad
 * name, an oversized write) is answered with an errno, as Linux would.
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
#include "ops.h"
#include "server.h"
#include "stats.h"
#include "store.h"

#define OPS_MAX_CHANGES   12
#define OPS_READDIR_MAX   8192u /* 8192 x 361-byte entries fit one frame */
#define OPS_STR_ANY       65535u

struct op_req {
	const struct ops_ctx *ctx;
	struct conn *c;
	struct rbuf r;
	struct wbuf *w;          /* reply frame, header already begun */
	int verr;                /* first unacceptable field: the status */
	const char *bad;         /* payload did not decode: why */
	char close_after[64];    /* fail the connection after the reply */
	int nomem;
	/* FIDs of the attrs in the reply: promises for the requester. */
	struct cairn_fid pfix[4];
	struct cairn_fid *pfid;
	int np, pcap;
	/* What the request changed: breaks for the other clients. */
	struct cb_change ch[OPS_MAX_CHANGES];
	int nch;
	/* Decoded names, NUL-terminated for the store. */
	char name[2][CAIRN_NAME_MAX + 1];
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
	if (q->np == q->pcap) {
		int cap = q->pcap * 4;
		struct cairn_fid *n = malloc((size_t)cap * sizeof(*n));
		if (!n) {
			q->nomem = 1;
			return;
		}
		memcpy(n, q->pfid, (size_t)q->np * sizeof(*n));
		if (q->pfid != q->pfix)
			free(q->pfid);
		q->pfid = n;
		q->pcap = cap;
	}
	q->pfid[q->np++] = *fid;
}

/* Append attr a to the reply and promise it to the requester. */
static void put_attr(struct op_req *q, const struct cairn_attr *a)
{
	wire_put_attr(q->w, a);
	promise_add(q, &a->fid);
}

/* Record a change: fid itself (name NULL) or its entry `name`. */
static void change(struct op_req *q, const struct cairn_fid *fid,
		   const char *name, size_t namelen, int all)
{
	if (q->nch == OPS_MAX_CHANGES)
		return; /* cannot happen: no op records more */
	q->ch[q->nch++] = (struct cb_change){ *fid, name, namelen, all };
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
		snprintf(q->close_after, sizeof(q->close_after),
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
		change(q, &dir, q->name[0], q->namelen[0], 0);
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
	change(q, &dir, q->name[0], q->namelen[0], 0);
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
	change(q, &dir, q->name[0], q->namelen[0], 0);
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
	change(q, &dir, q->name[0], q->namelen[0], 0);
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
	change(q, &sdir, q->name[0], q->namelen[0], 0);
	change(q, &ddir, q->name[1], q->namelen[1], 0);
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
	return rs->q->w->err || rs->q->nomem;
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
	const struct ops_ctx *ctx = q->ctx;
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

/*
 * Deliver CB_BREAK batches; releases the references the table took. With
 * w, w waits for each frame's acknowledgement (cb_wait_add decides); a
 * frame that cannot be sent is settled at once (its client is closing).
 * A frame to the changer's own client on another connection (c is the
 * changer's connection; it reconnected while this change ran) is not
 * waited for: that client may be waiting for this very change through the
 * duplicate request cache, a cycle the table cannot see, and a client is
 * never waited for on its own behalf anyway.
 */
static void send_batches(const struct ops_ctx *ctx, struct conn *c,
			 struct cb_batch *list, struct cb_wait *w)
{
	struct drc_client *self = c ? conn_drc(c) : NULL;
	struct wbuf wb;

	wbuf_init(&wb);
	for (struct cb_batch *b = list; b; b = b->next) {
		struct conn *oc = b->owner;
		struct cb_wait *bw = self && conn_drc(oc) == self ? NULL : w;
		size_t n;

		b->id = cb_wait_add(ctx->cb, bw, b->cl);
		wbuf_reset(&wb);
		cb_batch_encode(b, &wb);
		n = wb.len;
		if (wb.err)
			conn_fail(oc, "cannot encode callback break: %s",
				  strerror(-wb.err));
		if (!wb.err && conn_send(oc, &wb) == 0)
			stats_cb_break(ctx->stats, b->count, n);
		else if (bw)
			cb_ack(ctx->cb, b->cl, b->id);
		conn_put(oc);
	}
	wbuf_free(&wb);
	cb_batch_free(list);
}

/* Everything that follows the breaks' acknowledgement. */
struct parked {
	const struct ops_ctx *ctx;
	struct conn *c;
	struct wbuf w;            /* the reply frame */
	uint64_t seq0;
	uint16_t op;
	size_t in_bytes;
	struct cb_batch *evicted;
	struct timespec t0;       /* when the wait began; 0 if none */
	struct drc_client *dc;    /* the cache entry to complete, if any */
	struct drc_entry *de;
	char close_after[64];
	int np;
	struct cairn_fid *fid;    /* the reply's promises: fids below when
				   * parked, else the request's own array */
	struct cairn_fid fids[];
};

/*
 * Answer a duplicate on c from the cache: the original's reply frame (its
 * id is the duplicate's), its promises registered for c, and re-broken at
 * once for whatever changed since the original began (cb_recheck from the
 * original's seq0, as for any reply computed before a concurrent change).
 */
static void drc_replay(const struct ops_ctx *ctx, struct conn *c,
		       const struct drc_reply *r)
{
	struct cb_batch *evicted = NULL, *again = NULL;
	struct cb_client *cl = conn_cb_client(c);
	struct wbuf w;

	if (r->nfid && cb_register(ctx->cb, cl, r->fid, r->nfid, &evicted) < 0)
		log_warn("peer %s: callback table out of memory", conn_peer(c));
	wbuf_init(&w);
	wire_put_bytes(&w, r->frame, r->len);
	if (w.err)
		conn_fail(c, "out of memory for a cached reply");
	else
		conn_send(c, &w);
	wbuf_free(&w);
	if (r->nfid && cb_recheck(ctx->cb, cl, r->seq0, r->fid, r->nfid,
				  &again) < 0)
		conn_fail(c, "cannot record a callback break: out of memory");
	send_batches(ctx, NULL, again, NULL);
	send_batches(ctx, NULL, evicted, NULL);
}

/* Release duplicates parked on a cache entry: answer each with r, or,
 * with r NULL, fail its connection (it sent the same malformed bytes). */
static void drc_release(const struct ops_ctx *ctx, struct drc_waiter *wl,
			const struct drc_reply *r)
{
	while (wl) {
		struct drc_waiter *n = wl->next;
		if (r)
			drc_replay(ctx, wl->c, r);
		else
			conn_fail(wl->c, "resent a malformed request");
		conn_unpark(wl->c);
		free(wl);
		wl = n;
	}
}

/* Send the reply, then re-break and evict. Returns -EPROTO if the
 * connection was closed on purpose after the reply. */
static int reply_finish(struct parked *p)
{
	const struct ops_ctx *ctx = p->ctx;
	struct cb_batch *again = NULL;
	size_t out_bytes = p->w.len;

	if (p->de) {
		/* Done now that every break was acknowledged: a duplicate
		 * may have its reply from here on. */
		struct drc_reply r = { .frame = p->w.data, .len = p->w.len,
				       .fid = p->fid, .nfid = p->np,
				       .seq0 = p->seq0 };
		drc_release(ctx, drc_finish(p->dc, p->de, &r), &r);
		p->de = NULL;
	}

	if (p->t0.tv_sec || p->t0.tv_nsec) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		stats_cb_ack_wait(ctx->stats,
				  (uint64_t)(now.tv_sec - p->t0.tv_sec) *
				  1000000u + (uint64_t)((now.tv_nsec -
				  p->t0.tv_nsec) / 1000));
	}
	conn_send(p->c, &p->w);
	if (p->np && cb_recheck(ctx->cb, conn_cb_client(p->c), p->seq0,
				p->fid, p->np, &again) < 0)
		conn_fail(p->c, "cannot record a callback break: out of memory");
	send_batches(ctx, NULL, again, NULL);
	send_batches(ctx, NULL, p->evicted, NULL);
	p->evicted = NULL;
	stats_op(ctx->stats, p->op, p->in_bytes, out_bytes);
	if (p->close_after[0]) {
		conn_fail(p->c, "%s", p->close_after);
		return -EPROTO;
	}
	return 0;
}

/* cb_wait done callback: the parked reply may go now. */
static void parked_done(void *arg)
{
	struct parked *p = arg;
	struct conn *c = p->c;

	reply_finish(p);
	wbuf_free(&p->w);
	free(p);
	conn_unpark(c);
}

int ops_handle(const struct ops_ctx *ctx, struct conn *c,
	       const struct wire_hdr *h, const uint8_t *payload)
{
	struct op_req q = { .ctx = ctx, .c = c };
	struct cb_batch *brk = NULL;
	struct cb_wait *wait = NULL;
	struct parked *p = NULL;
	uint64_t seq0 = cb_seq(ctx->cb);
	const char *name = h->op < OP__COUNT && op_table[h->op].fn
				   ? op_table[h->op].name : NULL;
	struct drc_client *dc = drc_op_cached(h->op) ? conn_drc(c) : NULL;
	struct drc_entry *de = NULL;
	struct wbuf w;
	size_t hdr;
	int status, ret = 0;

	wbuf_init(&w);
	if (dc) {
		struct drc_reply *rep = NULL;
		enum drc_verdict v = drc_begin(dc, c, h->id, h->op, &de, &rep);

		if (v == DRC_REPLAY) {
			log_debug("peer %s: %s id %u answered from the "
				  "duplicate request cache", conn_peer(c),
				  name, h->id);
			drc_replay(ctx, c, rep);
			drc_reply_free(rep);
			return 0;
		}
		if (v == DRC_WAITING)
			return 0; /* answered when the original is */
		if (v == DRC_NOMEM) {
			hdr = wire_frame_begin(&w, h->op, WF_REPLY, h->id,
					       -ENOMEM);
			wire_frame_end(&w, hdr);
			conn_send(c, &w);
			wbuf_free(&w);
			return 0;
		}
	}
	q.w = &w;
	q.pfid = q.pfix;
	q.pcap = (int)(sizeof(q.pfix) / sizeof(q.pfix[0]));
	rbuf_init(&q.r, payload, h->len);
	hdr = wire_frame_begin(&w, h->op, WF_REPLY, h->id, 0);
	status = name ? op_table[h->op].fn(&q) : -ENOSYS;
	if (q.bad) {
		conn_fail(c, "malformed %s request (%u bytes): %s", name, h->len,
			  q.bad);
		if (de)
			drc_release(ctx, drc_abort(dc, de), NULL);
		ret = -EPROTO;
		goto out;
	}
	if (!status && (w.err || q.nomem))
		status = w.err ? w.err : -ENOMEM;
	if (status) {
		/* Error replies carry no payload and promise nothing, except
		 * a negative lookup, which promised the directory. */
		if (!(h->op == OP_LOOKUP && status == -ENOENT))
			q.np = 0;
		q.nch = 0;
		wbuf_reset(&w);
		hdr = wire_frame_begin(&w, h->op, WF_REPLY, h->id, status);
	}
	wire_frame_end(&w, hdr);
	if (w.err) {
		log_error("peer %s: cannot encode %s reply: %s", conn_peer(c),
			  name ? name : "?", strerror(-w.err));
		q.np = q.nch = 0;
		wbuf_reset(&w);
		hdr = wire_frame_begin(&w, h->op, WF_REPLY, h->id, -EIO);
		wire_frame_end(&w, hdr);
	}
	log_debug("peer %s: %s id %u -> %d", conn_peer(c), name ? name : "?",
		  h->id, status);

	/* The reply and what follows it; moved to the heap (parked) only
	 * when breaks are to be waited for. */
	struct parked local = { .ctx = ctx, .c = c, .w = w, .seq0 = seq0,
				.op = h->op,
				.in_bytes = WIRE_HDR_SIZE + (size_t)h->len,
				.np = q.np, .fid = q.pfid,
				.dc = dc, .de = de };
	memcpy(local.close_after, q.close_after, sizeof(local.close_after));
	wbuf_init(&w); /* local owns the reply now */
	p = &local;

	if (q.nch) {
		if (cb_break(ctx->cb, conn_cb_client(c), q.ch, q.nch, &brk) < 0)
			log_error("callback break: out of memory");
		if (brk)
			p = malloc(sizeof(*p) +
				   (size_t)q.np * sizeof(p->fids[0]));
		if (p && p != &local) {
			*p = local;
			p->fid = p->fids;
			memcpy(p->fids, q.pfid,
			       (size_t)q.np * sizeof(p->fids[0]));
			wait = cb_wait_new(ctx->cb, conn_cb_client(c),
					   parked_done, p);
		}
		if (!wait) {
			/* Out of memory: break without waiting, as a
			 * client that never acknowledges would get. */
			if (p && p != &local)
				free(p);
			p = &local;
		} else {
			clock_gettime(CLOCK_MONOTONIC, &p->t0);
		}
		send_batches(ctx, c, brk, wait);
	}
	if (q.np && cb_register(ctx->cb, conn_cb_client(c), q.pfid, q.np,
				&p->evicted) < 0)
		log_warn("peer %s: callback table out of memory",
			 conn_peer(c));
	if (wait) {
		conn_park(c); /* before arming: done may run at once */
		if (!cb_wait_arm(ctx->cb, wait))
			goto out; /* parked_done finishes, on another thread */
		conn_unpark(c);
		p->t0 = (struct timespec){ 0 }; /* settled already: no wait */
	}
	ret = reply_finish(p);
	wbuf_free(&p->w);
	if (p != &local)
		free(p);
out:
	if (q.pfid != q.pfix)
		free(q.pfid);
	wbuf_free(&w);
	return ret;
}

/*
 * handlers.c - request handlers. See handlers.h.
 *
 * handler_run decodes the request into q->m with msg_decode (lib/msg.h)
 * before the handler runs: a payload that does not decode exactly is a
 * protocol error and the connection is failed. The handler then checks
 * that every field is acceptable, in wire order, answering the first bad
 * one with an errno as Linux would (a bad name, an unknown flag bit, an
 * oversized write), calls the store and encodes the reply after the frame
 * header handler_run began in q->w: with msg_encode, or in place with the
 * builders of msg.h for replies the store writes into (READDIR, BULKSTAT,
 * READ, GETXATTR, LISTXATTR). As it goes it records in q->out the FIDs whose
 * attributes the reply carries and the things it changed; deliver.c does
 * the rest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "perm.h"
#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "callback.h"
#include "drc.h"
#include "handlers.h"
#include "orphan.h"
#include "server.h"
#include "stats.h"
#include "store.h"
#include "lock.h"
#include "token.h"

#define HANDLER_READDIR_MAX 8192u /* 8192 x 361-byte entries fit one frame */

struct op_req {
	const struct srv_ctx *ctx;
	struct conn *c;
	unsigned op;
	uint32_t id;             /* the request's id */
	struct wbuf *w;          /* reply frame, header already begun */
	struct handler_out *out;
	const char *bad;         /* not acceptable as a protocol: why */
	struct cairn_cred cred;  /* the caller's (perm.h); present or not */
	union msg_any m;         /* the decoded request; strings point into
				  * the payload */
};

typedef int (*op_fn)(struct op_req *q);

/* --- request helpers ------------------------------------------------------ */

/* Append the reply payload rep (the op's reply struct). */
static void reply(struct op_req *q, const void *rep)
{
	msg_encode(q->op, 1, q->w, rep);
}

/* Promise fid's attributes (in the reply) to the requester. */
static void promise(struct op_req *q, const struct cairn_fid *fid)
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

/* Record a change: fid itself (name NULL) or its entry `name`, a string
 * of the decoded request (delivery reads it after the handler); flags
 * CB_ATTRS_ONLY when only attributes of fid changed, not its data, size
 * or times. */
static void change_f(struct op_req *q, const struct cairn_fid *fid,
		     const struct msg_str *name, int all, uint8_t flags)
{
	struct handler_out *o = q->out;

	CAIRN_ASSERT(o->nch < HANDLER_MAX_CHANGES); /* no op records more */
	if (o->nch == HANDLER_MAX_CHANGES)
		return;
	o->ch[o->nch++] = (struct cb_change){ *fid, name ? name->p : NULL,
					      name ? name->len : 0, all,
					      flags };
}

static void change(struct op_req *q, const struct cairn_fid *fid,
		   const struct msg_str *name, int all)
{
	change_f(q, fid, name, all, 0);
}

/* Objects the store reports as touched besides the reply's (links,
 * ctime): everyone, the changer included, must refetch them. */
static void change_all(struct op_req *q, const struct store_changed *sc)
{
	CAIRN_ASSERT(sc->n >= 0 && sc->n <= 4);
	for (int i = 0; i < sc->n && i < 4; i++)
		change_f(q, &sc->fid[i], NULL, CB_ALL, CB_ATTRS_ONLY);
}

/* The store made sc->orphan (if any) an orphan held by the requester. */
static void orphaned(struct op_req *q, const struct store_changed *sc)
{
	struct handler_out *o = q->out;

	CAIRN_ASSERT(o->norphan < (int)CAIRN_REMOVES_MAX);
	if (sc->orphan.vnode && o->norphan < (int)CAIRN_REMOVES_MAX)
		o->orphan[o->norphan++] = sc->orphan;
}

/*
 * Namespace changes run at most once per request id for a client that
 * resends with the same id (HELLO_REPLAY), also across a server restart:
 * tag() before the store call, untag() after it. A change the store
 * reports as applied before (-EALREADY) is answered with the current
 * attributes of the objects its reply names (applied(), which fetches f1
 * into a1 and, if f2, f2 into a2); nothing is changed or broken again.
 */
static void tag(struct op_req *q)
{
	if (conn_drc(q->c))
		store_tag_set(conn_client_id(q->c), q->id);
}

static void untag(void)
{
	store_tag_clear();
}

static int applied(struct op_req *q, const struct cairn_fid *f1,
		   struct cairn_attr *a1, const struct cairn_fid *f2,
		   struct cairn_attr *a2)
{
	int ret;

	log_info("peer %s: %s id %u was applied before (resent after a "
		 "restart, or after the duplicate cache forgot it): answered "
		 "from the current state", conn_peer(q->c), msg_name(q->op),
		 q->id);
	if ((ret = store_getattr(q->ctx->st, f1, a1)))
		return ret;
	return f2 ? store_getattr(q->ctx->st, f2, a2) : 0;
}

/*
 * Write tokens (token.h). A handler that changes a regular file, or
 * answers with the attributes of one it did not change, first asks
 * whether another client holds its token: if so it stops (returns
 * PARKED, having changed nothing) and the request waits for the token.
 * Requests that change nothing are checked after their handler instead,
 * on the attributes their reply carries (server.c, must_wait).
 */
#define PARKED 1

static int tok_busy(struct op_req *q, const struct cairn_fid *fid)
{
	if (!tok_other(q->ctx->tok, q->c, fid, msg_has(q->op, MSG_CHANGES)))
		return 0;
	q->out->park = 1;
	q->out->park_fid = *fid;
	return 1;
}

/* A change sent under a token (WR_TOKEN, SA_TOKEN) the requester no
 * longer holds: revoked, or dropped with an earlier connection. */
static int tok_lost(struct op_req *q, const struct cairn_fid *fid)
{
	if (tok_holds(q->ctx->tok, q->c, fid))
		return 0;
	log_info("peer %s: %s of vnode %llu under a write token it no longer "
		 "holds: refused", conn_peer(q->c), msg_name(q->op),
		 (unsigned long long)fid->vnode);
	return -ECANCELED;
}

/* Check a path component and copy it, NUL-terminated, for the store. */
static int name_get(const struct msg_str *s, char dst[CAIRN_NAME_MAX + 1])
{
	int ret = msg_name_check(s);

	if (!ret)
		msg_str_copy(dst, s);
	return ret;
}

/* Likewise for an extended attribute name. */
static int xattr_name_get(const struct msg_str *s,
			  char dst[CAIRN_XATTR_NAME_MAX + 1])
{
	int ret = msg_xattr_name_check(s);

	if (!ret)
		msg_str_copy(dst, s);
	return ret;
}

/* --- session ---------------------------------------------------------------- */

static int op_hello(struct op_req *q)
{
	const struct msg_hello_req *m = &q->m.hello_req;
	struct msg_hello_rep rep = { .version = CAIRN_PROTO_VERSION,
				     .epoch = q->ctx->epoch };
	const uint8_t *id = m->client_id;
	int ret;

	/* m->flags: undefined bits are ignored. */
	if (conn_hello_done(q->c))
		return -EISCONN;
	if (m->magic != CAIRN_MAGIC) {
		q->bad = "bad HELLO magic";
		return -EPROTO;
	}
	if (m->version != CAIRN_PROTO_VERSION) {
		snprintf(q->out->close_after, sizeof(q->out->close_after),
			 "unsupported protocol version %u", m->version);
		return -EPROTONOSUPPORT;
	}
	ret = store_root(q->ctx->st, &rep.root);
	if (ret)
		return ret;
	/* Counted until the connection is released (server.c), so its
	 * orphans are kept while it is connected (orphan.h). */
	if ((ret = orphan_client_up(q->ctx->orph, id)))
		return ret;
	/* A client that resends with the same id gets the cache; without
	 * one (out of memory) it is served as one that does not. */
	if (m->flags & HELLO_REPLAY)
		conn_set_drc(q->c, drc_client_get(server_drc(q->ctx->srv),
						   id));
	conn_set_client_id(q->c, id);
	cb_client_hello(q->ctx->cb, conn_cb_client(q->c), id, m->flags);
	memcpy(rep.server_id, q->ctx->server_id, sizeof(rep.server_id));
	if (conn_read_only(q->c))
		rep.flags |= HELLO_REP_RO;
	if (q->ctx->no_root_squash)
		rep.flags |= HELLO_REP_ROOT;
	rep.flags |= HELLO_REP_SA_SYNC | HELLO_REP_SA_STEPS |
		     HELLO_REP_CR_SYNC | HELLO_REP_CREATES_BIG;
	reply(q, &rep);
	promise(q, &rep.root.fid);
	log_info("peer %s: hello, client %02x%02x%02x%02x%02x%02x%02x%02x%s%s%s",
		 conn_peer(q->c), id[0], id[1], id[2], id[3], id[4], id[5],
		 id[6], id[7],
		 m->flags & HELLO_CB_ACK ? ", acknowledges breaks" : "",
		 conn_drc(q->c) ? ", resends with the same id" : "",
		 conn_read_only(q->c) ? ", read-only key" : "");
	return 0;
}

/* AUTH is answered by the connection's reader as the first frame
 * (server.c, serve_auth); once more is a protocol error. */
static int op_auth(struct op_req *q)
{
	return -EISCONN;
}

static int op_ping(struct op_req *q)
{
	return 0; /* empty reply */
}

static int op_status(struct op_req *q)
{
	const struct srv_ctx *ctx = q->ctx;
	struct msg_status_rep rep;
	struct timespec now;
	char *text = NULL;
	size_t len = 0;
	long conns = 0, clients = 0, drc_clients = 0, drc_entries = 0;
	uint64_t orphans = 0;
	struct tok_stats ts;
	struct lk_stats ls;
	FILE *f;

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
	fprintf(f, "store_syncs %llu\n",
		(unsigned long long)store_syncs(ctx->st));
	fprintf(f, "drc_hits %llu\n",
		(unsigned long long)drc_hits(server_drc(ctx->srv)));
	fprintf(f, "drc_clients %ld\n", drc_clients);
	fprintf(f, "drc_entries %ld\n", drc_entries);
	if (store_orphan_count(ctx->st, &orphans) == 0)
		fprintf(f, "orphans %llu\n", (unsigned long long)orphans);
	tok_get_stats(ctx->tok, &ts);
	fprintf(f, "tokens %llu\ntokens_granted %llu\ntokens_recalled %llu\n"
		"tokens_returned %llu\ntokens_revoked %llu\n"
		"tokens_parked %llu\n", (unsigned long long)ts.held,
		(unsigned long long)ts.granted, (unsigned long long)ts.recalls,
		(unsigned long long)ts.returned,
		(unsigned long long)ts.revoked, (unsigned long long)ts.parked);
	lk_get_stats(ctx->lk, &ls);
	fprintf(f, "locks %llu\nlock_waiters %llu\nlock_clients %llu\n"
		"locks_granted %llu\nlock_conflicts %llu\nlock_wakes %llu\n"
		"lock_reclaims %llu\nlock_expired %llu\nlock_deadlocks %llu\n"
		"lock_grace %d\nlock_delegations %llu\nlock_delegations_granted %llu\n"
		"lock_recalls %llu\nlock_delegations_returned %llu\n"
		"lock_delegations_revoked %llu\n", (unsigned long long)ls.locks,
		(unsigned long long)ls.waiters, (unsigned long long)ls.clients,
		(unsigned long long)ls.granted,
		(unsigned long long)ls.conflicts, (unsigned long long)ls.wakes,
		(unsigned long long)ls.reclaims, (unsigned long long)ls.expired,
		(unsigned long long)ls.deadlocks, ls.in_grace,
		(unsigned long long)ls.delegs,
		(unsigned long long)ls.delegs_granted,
		(unsigned long long)ls.recalls,
		(unsigned long long)ls.deleg_returned,
		(unsigned long long)ls.deleg_revoked);
	stats_print(ctx->stats, f);
	if (fclose(f)) {
		free(text);
		return -ENOMEM;
	}
	rep.text = (struct msg_bytes){ text, len };
	reply(q, &rep);
	free(text);
	return 0;
}

/* --- attributes and names ---------------------------------------------------- */

static int op_getattr(struct op_req *q)
{
	struct msg_attr rep;
	int ret;

	ret = store_getattr(q->ctx->st, &q->m.fid.fid, &rep.attr);
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	return 0;
}

/* --- permissions (perm.h) ------------------------------------------------- */

/* The requester has want (PERM_*) on fid; *a (if not NULL) gets its
 * attributes. A request without credentials is the client daemon's own:
 * not checked. */
static int may(struct op_req *q, const struct cairn_fid *fid, int want,
	       struct cairn_attr *a)
{
	struct cairn_attr tmp;
	int ret;

	if (!q->cred.present)
		return 0;
	if (!a)
		a = &tmp;
	if ((ret = store_getattr(q->ctx->st, fid, a)))
		return ret;
	return perm_check(&q->cred, a, want);
}

/* Removing (or renaming away) name from dir: write and search on dir,
 * and the sticky bit's rule for what the name points at. A name that is
 * not there is the store's to report. */
static int may_unlink(struct op_req *q, const struct cairn_fid *dir,
		      const char *name, struct cairn_attr *victim)
{
	struct cairn_attr d;
	int ret;

	if (!q->cred.present)
		return 0;
	if ((ret = may(q, dir, PERM_W | PERM_X, &d)))
		return ret;
	ret = store_lookup(q->ctx->st, dir, name, victim);
	if (ret)
		return ret == -ENOENT ? 1 : ret;
	return perm_sticky(&q->cred, &d, victim);
}

/*
 * A write or truncate by anyone but root clears set-user-ID, and the
 * set-group-ID of a group-executable file, as Linux does for a process
 * without CAP_FSETID: the client's kernel leaves it to us
 * (FUSE_HANDLE_KILLPRIV_V2, client/fuseio.h) and sends such a write
 * through, with the writer's credentials. Stores under a write token
 * carry none and clear nothing. A change of its own (the data version
 * moves once more), before the write.
 */
static int kill_suid(struct op_req *q, const struct cairn_fid *fid)
{
	struct store_setattr sa = { .valid = SA_MODE | SA_KEEPTIME };
	struct cairn_attr a;

	if (!q->cred.present || q->cred.uid == 0 ||
	    store_getattr(q->ctx->st, fid, &a) || !S_ISREG(a.mode) ||
	    !((a.mode & S_ISUID) ||
	      ((a.mode & S_ISGID) && (a.mode & S_IXGRP))))
		return 0;
	sa.mode = a.mode & 07777 & ~(uint32_t)S_ISUID;
	if (sa.mode & S_IXGRP)
		sa.mode &= ~(uint32_t)S_ISGID;
	return store_setattr(q->ctx->st, fid, &sa, &a);
}

/* The owner and group a new object gets: the caller's uid; the group
 * the client asked for if the caller may give it (one of its groups, or
 * a set-group-id directory's, inherited), else the caller's. */
static void new_owner(const struct op_req *q, const struct cairn_fid *dir,
		      uint32_t *uid, uint32_t *gid)
{
	struct cairn_attr d;

	if (!q->cred.present || q->cred.uid == 0)
		return;
	*uid = q->cred.uid;
	if (perm_in_group(&q->cred, *gid))
		return;
	if (store_getattr(q->ctx->st, dir, &d) == 0 && (d.mode & S_ISGID) &&
	    d.gid == *gid)
		return;
	*gid = q->cred.gid;
}

/*
 * SETATTR as a local file system allows it: mode and explicit times by
 * the owner (or clearing only set-id bits, which the kernel does after a
 * write), a new owner by root, a new group by the owner to one of its
 * groups, the size and "now" times with write permission (or as the
 * owner: a descriptor opened before a chmod).
 */
static int may_setattr(struct op_req *q, const struct msg_setattr_req *m)
{
	struct cairn_attr a;
	int ret;

	if (!q->cred.present)
		return 0;
	if ((ret = store_getattr(q->ctx->st, &m->fid, &a)))
		return ret;
	int owner = perm_owner(&q->cred, &a);
	if ((m->valid & SA_MODE) && !owner &&
	    (m->mode & 07777) != (a.mode & 07777 & ~(S_ISUID | S_ISGID)))
		return -EPERM;
	if ((m->valid & SA_UID) && m->uid != a.uid && q->cred.uid != 0)
		return -EPERM;
	if ((m->valid & SA_GID) && m->gid != a.gid && q->cred.uid != 0 &&
	    (!owner || !perm_in_group(&q->cred, m->gid)))
		return -EPERM;
	/* Explicit times with a ctime are a write's, which the kernel sends
	 * later (its write-back cache): whoever may write may. */
	int wr = owner || !perm_check(&q->cred, &a, PERM_W);
	if ((m->valid & (SA_ATIME | SA_MTIME)) && !owner &&
	    !((m->valid & SA_CTIME) && wr))
		return -EPERM;
	if ((m->valid & (SA_ATIME_NOW | SA_MTIME_NOW)) && !wr)
		return -EACCES;
	if ((m->valid & SA_SIZE) && !wr)
		return -EACCES;
	return 0;
}

static int op_lookup(struct op_req *q)
{
	const struct msg_lookup_req *m = &q->m.lookup_req;
	char name[CAIRN_NAME_MAX + 1];
	struct msg_attr rep;
	int ret;

	if ((ret = name_get(&m->name, name)))
		return ret;
	if (tok_busy(q, &m->dir))
		return PARKED;
	if ((ret = may(q, &m->dir, PERM_X, NULL)))
		return ret;
	ret = store_lookup(q->ctx->st, &m->dir, name, &rep.attr);
	if (ret == -ENOENT)
		/* A negative entry is cached too: the client needs the break
		 * when the name appears, which comes through the dir. */
		promise(q, &m->dir);
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	return 0;
}

static int op_setattr(struct op_req *q)
{
	const struct msg_setattr_req *m = &q->m.setattr_req;
	struct store_setattr sa = {
		.valid = m->valid, .mode = m->mode, .uid = m->uid,
		.gid = m->gid, .size = m->size, .atime = m->atime,
		.mtime = m->mtime, .ctime = m->ctime,
	};
	struct msg_attr rep;
	int ret;

	if (m->valid & ~0x1fffu)
		return -EINVAL;
	/* Merged changes (SA_STEPS) take the size field for their count. */
	if ((m->valid & SA_STEPS) &&
	    ((m->valid & SA_SIZE) || m->size == 0 || m->size > SA_STEPS_MAX))
		return -EINVAL;
	if (m->valid & SA_STEPS)
		sa.steps = (uint32_t)m->size; /* no SA_SIZE: size unused */
	if ((m->valid & SA_SIZE) && m->size > (uint64_t)INT64_MAX)
		return -EFBIG;
	if (tok_busy(q, &m->fid))
		return PARKED;
	if ((m->valid & SA_TOKEN) && (ret = tok_lost(q, &m->fid)))
		return ret;
	if ((ret = may_setattr(q, m)))
		return ret;
	if ((m->valid & SA_SIZE) && !(m->valid & SA_MODE) &&
	    (ret = kill_suid(q, &m->fid)))
		return ret;
	sa.valid &= ~(uint32_t)(SA_TOKEN | SA_SYNC | SA_STEPS);
	ret = store_setattr(q->ctx->st, &m->fid, &sa, &rep.attr);
	if (ret)
		return ret;
	change_f(q, &m->fid, NULL, 0,
		 (m->valid & (SA_SIZE | SA_MTIME | SA_MTIME_NOW))
			 ? 0 : CB_ATTRS_ONLY);
	/* The client's fsync in one round trip (its last change). Failed:
	 * the change stands all the same, and is broken for the others. */
	if ((m->valid & SA_SYNC) &&
	    (ret = store_fsync(q->ctx->st, &m->fid, 0))) {
		q->out->changed = 1;
		return ret;
	}
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	return 0;
}

/* CR_SYNC in flags: the object fid made durable before the reply, as
 * FSYNC makes it (0, or the sync's error). */
static int cr_sync(struct op_req *q, uint32_t flags,
		   const struct cairn_fid *fid)
{
	return (flags & CR_SYNC) ? store_fsync(q->ctx->st, fid, 0) : 0;
}

static int op_create(struct op_req *q)
{
	const struct msg_create_req *m = &q->m.create_req;
	char name[CAIRN_NAME_MAX + 1];
	struct msg_create_rep rep;
	uint32_t flags;
	int ret, created = 0;

	if ((ret = name_get(&m->name, name)))
		return ret;
	if (m->flags & ~(uint32_t)(CR_EXCL | CR_TOKEN | CR_FID | CR_SYNC))
		return -EINVAL;
	flags = m->flags & ~(uint32_t)CR_SYNC;
	if (m->data.len && (!(m->flags & CR_FID) || !S_ISREG(m->mode) ||
			    m->data.len > CAIRN_MAX_IO))
		return -EINVAL;
	if (tok_busy(q, &m->dir))
		return PARKED;
	if ((ret = may(q, &m->dir, PERM_W | PERM_X, NULL)))
		return ret;
	uint32_t uid = m->uid, gid = m->gid;
	new_owner(q, &m->dir, &uid, &gid);
	tag(q);
	/* With its first bytes (CR_FID): in the same commit, or once when
	 * an earlier copy of the request made the file but did not get to
	 * write them. */
	if (m->data.len)
		ret = store_create_data(q->ctx->st, &m->dir, name, m->mode,
					uid, gid, flags, &m->fid, m->time,
					m->data.p, (uint32_t)m->data.len, NULL,
					&created, &rep.child, &rep.dir);
	else
		ret = store_create_fid(q->ctx->st, &m->dir, name, m->mode,
				       uid, gid, m->rdev, flags,
				       m->flags & CR_FID ? &m->fid : NULL,
				       m->time, &created, &rep.child,
				       &rep.dir);
	untag();
	if (ret == 0 && created == 2) {
		/* CR_FID, made by an earlier copy of this request: done,
		 * nothing changed, and no token comes with it (the creator
		 * takes it again with WT_DV, as for any token lost). */
		if ((ret = cr_sync(q, m->flags, &rep.child.fid)))
			return ret;
		rep.created = 1;
		reply(q, &rep);
		promise(q, &rep.child.fid);
		promise(q, &rep.dir.fid);
		return 0;
	}
	if (ret == -EALREADY) {
		struct store_applied ap;

		store_applied_get(&ap);
		if ((ret = applied(q, &ap.fid, &rep.child, &m->dir, &rep.dir)))
			return ret;
		/* The first copy made the file (the duplicate request cache
		 * says so) but may not have written its first bytes. */
		if (m->data.len && rep.child.dv == 1 &&
		    (ret = store_write(q->ctx->st, &rep.child.fid, 0,
				       m->data.p, (uint32_t)m->data.len,
				       WR_KEEPTIME, &rep.child)))
			return ret;
		if ((ret = cr_sync(q, m->flags, &rep.child.fid)))
			return ret;
		rep.created = ap.created ? 1 : 0;
		reply(q, &rep);
		promise(q, &rep.child.fid);
		promise(q, &rep.dir.fid);
		return 0;
	}
	if (ret)
		return ret;
	/* O_CREAT of a file that exists changed nothing: it may wait. */
	if (!created && tok_busy(q, &rep.child.fid))
		return PARKED;
	rep.created = created ? 1 : 0;
	/* Nobody else can know the new file or directory yet: its token
	 * needs no break. A full table grants none: the reply says so
	 * (CREATED_TOKEN), and a writer learns it from -ECANCELED on its
	 * first WR_TOKEN write too (PROTOCOL.md, Write tokens). */
	if (created && (m->flags & CR_TOKEN) &&
	    (S_ISREG(rep.child.mode) || S_ISDIR(rep.child.mode))) {
		int fresh;

		if (tok_acquire(q->ctx->tok, q->c, &rep.child.fid,
				&fresh) == 0)
			rep.created |= CREATED_TOKEN;
	}
	if (created)
		change(q, &m->dir, &m->name, CB_OTHERS);
	/* The client's fsync of a file it made, in one round trip. Failed:
	 * the file stands all the same (broken for the others; a resend
	 * finds it made), and the error is the reply. */
	if ((ret = cr_sync(q, m->flags, &rep.child.fid))) {
		q->out->changed = 1;
		return ret;
	}
	reply(q, &rep);
	promise(q, &rep.child.fid);
	promise(q, &rep.dir.fid);
	return 0;
}

/*
 * CREATES: a client's journal sends the regular files it made in one
 * directory together, each a CREATE with CR_FID (idempotent by the FID)
 * and its first bytes. Checked and made in order, each on its own: those
 * whose bytes fit inline in one commit (store_creates), any other as
 * CREATE makes it. Tokens, promises and breaks as CREATE's. CREATEATTR
 * is the same with attribute changes for each (creates_attrs).
 */
struct creates {
	char names[CAIRN_CREATES_MAX][CAIRN_NAME_MAX + 1];
	struct store_cent e[CAIRN_CREATES_MAX];
	struct msg_str ns[CAIRN_CREATES_MAX];
	struct store_setattr sa[CAIRN_CREATES_MAX];
	uint32_t sync[CAIRN_CREATES_MAX]; /* the entry's CR_SYNC bit */
};

/* Entry i of a CREATES or CREATEATTR request, c, with first bytes of at
 * most max, into k (its attribute changes, if any, are the caller's). */
static int creates_entry(struct op_req *q, const struct cairn_fid *dir,
			 const struct msg_cent *c, size_t max,
			 struct creates *k, uint32_t i)
{
	int ret;

	if ((ret = name_get(&c->name, k->names[i])))
		return ret;
	if (!(c->flags & CR_FID) ||
	    ((c->mode & S_IFMT) && !S_ISREG(c->mode)) ||
	    (c->flags & ~(uint32_t)(CR_EXCL | CR_TOKEN | CR_FID | CR_SYNC)) ||
	    c->data.len > max)
		return -EINVAL;
	k->ns[i] = c->name;
	k->sync[i] = c->flags & CR_SYNC;
	k->e[i] = (struct store_cent){
		.name = k->names[i], .mode = c->mode, .uid = c->uid,
		.gid = c->gid, .flags = c->flags & ~(uint32_t)CR_SYNC,
		.fid = c->fid,
		.t = c->time, .data = c->data.p,
		.len = (uint32_t)c->data.len,
	};
	new_owner(q, dir, &k->e[i].uid, &k->e[i].gid);
	return 0;
}

/* Make k's count entries (checked) in dir and answer. */
static int creates_run(struct op_req *q, const struct cairn_fid *dir,
		       uint32_t count, struct creates *k)
{
	struct msg_crep out[CAIRN_CREATES_MAX];
	struct msg_creates_rep rep = { .count = count, .ents = out };
	struct store_cent *e = k->e;
	uint32_t i;
	int ret, alone = 0;

	if ((ret = store_creates(q->ctx->st, dir, e, (int)count, &rep.dir)))
		return ret;
	for (i = 0; i < count; i++) {
		struct cairn_attr d;

		/* First bytes past the inline room: a data file first. */
		if (e[i].rc == -E2BIG) {
			alone = 1;
			e[i].rc = store_create_data(q->ctx->st, dir,
						    k->names[i], e[i].mode,
						    e[i].uid, e[i].gid,
						    e[i].flags, &e[i].fid,
						    e[i].t, e[i].data, e[i].len,
						    e[i].then, &e[i].created,
						    &e[i].out, &d);
		}
		out[i] = (struct msg_crep){ .status = e[i].rc };
		if (e[i].rc)
			continue;
		out[i].child = e[i].out;
		out[i].created = CREATED;
		/* Made by an earlier copy: no token comes with it (as
		 * CREATE), nothing changed, and its attribute changes were
		 * not made here (they may have been then: the client asks). */
		if (e[i].created == 1 && e[i].then)
			out[i].created |= CREATED_ATTRS;
		if (e[i].created == 1 && (e[i].flags & CR_TOKEN)) {
			int fresh;

			if (tok_acquire(q->ctx->tok, q->c, &e[i].out.fid,
					&fresh) == 0)
				out[i].created |= CREATED_TOKEN;
		}
	}
	/* Those made alone moved the directory on. */
	if (alone && (ret = store_getattr(q->ctx->st, dir, &rep.dir)))
		return ret;
	/* CR_SYNC (as CREATE's): the entry's status is the sync's error,
	 * the file stands all the same (broken for the others below). */
	for (i = 0; i < count; i++)
		if (!e[i].rc && (ret = cr_sync(q, k->sync[i], &e[i].out.fid)))
			out[i] = (struct msg_crep){ .status = ret };
	reply(q, &rep);
	promise(q, &rep.dir.fid);
	for (i = 0; i < count; i++) {
		if (e[i].rc)
			continue;
		promise(q, &e[i].out.fid);
		if (e[i].created == 1)
			change(q, dir, &k->ns[i], CB_OTHERS);
	}
	return 0;
}

/* A CREATES' or CREATEATTR's checks before its entries: 0 and *k to fill
 * (free it), or what to answer. */
static int creates_begin(struct op_req *q, const struct cairn_fid *dir,
			 uint32_t count, struct creates **k)
{
	int ret;

	if (count < 1 || count > CAIRN_CREATES_MAX)
		return -EINVAL;
	if (tok_busy(q, dir))
		return PARKED;
	if ((ret = may(q, dir, PERM_W | PERM_X, NULL)))
		return ret;
	return (*k = malloc(sizeof(**k))) ? 0 : -ENOMEM;
}

/* What CREATEATTR takes in an entry's valid (WRITEATTR's set). */
#define CA_VALID (SA_MODE | SA_UID | SA_GID | SA_ATIME | SA_MTIME | \
		  SA_ATIME_NOW | SA_MTIME_NOW | SA_CTIME | SA_KEEPTIME)

/*
 * May the creator of a new file (its owner: new_owner) make attribute
 * change c to it? As SETATTR by the owner: mode and times yes; another
 * owner only as root; a group only one of the creator's (or as root).
 * Not allowed: the file is made without them, and the client sends them
 * as a SETATTR, which answers why.
 */
static int creates_attrs_ok(const struct op_req *q, const struct msg_centa *c,
			    const struct store_cent *e)
{
	if (!q->cred.present || q->cred.uid == 0)
		return 1;
	if ((c->valid & SA_UID) && c->uid != e->uid)
		return 0;
	return !(c->valid & SA_GID) || perm_in_group(&q->cred, c->gid);
}

/*
 * CREATES, or with attrs CREATEATTR: CREATES whose entries carry the
 * attribute changes the client made to the file after creating it,
 * merged (SA_STEPS' way), made in the creation's commit when this request
 * makes the file, which then is `steps` versions further (CREATED_ATTRS
 * in the reply). count entries in list, in dir.
 */
static int creates_op(struct op_req *q, const struct cairn_fid *dir,
		      uint32_t count, const struct msg_bytes *list, int attrs)
{
	/* Alone, as many first bytes as CREATE takes; else
	 * CAIRN_CREATES_BIG_MAX each (HELLO_REP_CREATES_BIG), CAIRN_MAX_IO in
	 * all. */
	size_t max = attrs && count == 1 ? CAIRN_MAX_IO : CAIRN_CREATES_BIG_MAX;
	size_t total = 0;
	struct creates *k;
	struct rbuf it;
	uint32_t i;
	int ret;

	if ((ret = creates_begin(q, dir, count, &k)))
		return ret;
	rbuf_init(&it, list->p, list->len);
	for (i = 0; i < count; i++) {
		struct msg_centa c = { .valid = 0 };

		if (!(attrs ? msg_centa_next(&it, &c) :
			      msg_cent_next(&it, &c.c))) {
			ret = -EPROTO;
			goto out;
		}
		if ((c.valid & ~(uint32_t)CA_VALID) ||
		    (c.valid && (c.steps < 1 || c.steps > SA_STEPS_MAX)) ||
		    (!c.valid && c.steps)) {
			ret = -EINVAL;
			goto out;
		}
		if ((total += c.c.data.len) > CAIRN_MAX_IO) {
			ret = -EINVAL;
			goto out;
		}
		if ((ret = creates_entry(q, dir, &c.c, max, k, i)))
			goto out;
		if (!c.valid || !creates_attrs_ok(q, &c, &k->e[i]))
			continue;
		k->sa[i] = (struct store_setattr){
			.valid = c.valid, .mode = c.mode, .uid = c.uid,
			.gid = c.gid, .atime = c.atime, .mtime = c.mtime,
			.ctime = c.ctime, .steps = c.steps,
		};
		k->e[i].then = &k->sa[i];
	}
	ret = creates_run(q, dir, count, k);
out:
	free(k);
	return ret;
}

static int op_creates(struct op_req *q)
{
	const struct msg_creates_req *m = &q->m.creates_req;

	return creates_op(q, &m->dir, m->count, &m->list, 0);
}

static int op_createattr(struct op_req *q)
{
	const struct msg_createattr_req *m = &q->m.createattr_req;

	return creates_op(q, &m->dir, m->count, &m->list, 1);
}

static int op_symlink(struct op_req *q)
{
	const struct msg_symlink_req *m = &q->m.symlink_req;
	char name[CAIRN_NAME_MAX + 1], target[CAIRN_SYMLINK_MAX + 1];
	struct msg_attr2 rep;
	int ret;

	if ((ret = name_get(&m->name, name)))
		return ret;
	if (m->target.len == 0)
		return -ENOENT; /* symlink(2) with an empty target */
	if (m->target.len > CAIRN_SYMLINK_MAX)
		return -ENAMETOOLONG;
	if (memchr(m->target.p, '\0', m->target.len))
		return -EINVAL;
	msg_str_copy(target, &m->target);
	if (tok_busy(q, &m->dir))
		return PARKED;
	if ((ret = may(q, &m->dir, PERM_W | PERM_X, NULL)))
		return ret;
	uint32_t uid = m->uid, gid = m->gid;
	new_owner(q, &m->dir, &uid, &gid);
	tag(q);
	ret = store_symlink(q->ctx->st, &m->dir, name, target, uid, gid,
			    &rep.a, &rep.b);
	untag();
	if (ret == -EALREADY) {
		struct store_applied ap;

		store_applied_get(&ap);
		ret = applied(q, &ap.fid, &rep.a, &m->dir, &rep.b);
	} else if (ret == 0) {
		change(q, &m->dir, &m->name, CB_OTHERS);
	}
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.a.fid);
	promise(q, &rep.b.fid);
	return 0;
}

static int op_readlink(struct op_req *q)
{
	char target[CAIRN_SYMLINK_MAX + 1];
	struct msg_readlink_rep rep;
	size_t len = 0;
	int ret;

	ret = store_readlink(q->ctx->st, &q->m.fid.fid, target, &len);
	if (ret)
		return ret;
	rep.target = (struct msg_str){ target, len };
	reply(q, &rep);
	return 0;
}

static int op_link(struct op_req *q)
{
	const struct msg_link_req *m = &q->m.link_req;
	char name[CAIRN_NAME_MAX + 1];
	struct msg_attr2 rep;
	int ret;

	if ((ret = name_get(&m->name, name)))
		return ret;
	if (tok_busy(q, &m->fid) || tok_busy(q, &m->dir))
		return PARKED;
	if ((ret = may(q, &m->dir, PERM_W | PERM_X, NULL)))
		return ret;
	tag(q);
	ret = store_link(q->ctx->st, &m->fid, &m->dir, name, &rep.a, &rep.b);
	untag();
	if (ret == -EALREADY) {
		ret = applied(q, &m->fid, &rep.a, &m->dir, &rep.b);
	} else if (ret == 0) {
		change_f(q, &m->fid, NULL, 0, CB_ATTRS_ONLY); /* nlink, ctime */
		change(q, &m->dir, &m->name, CB_OTHERS);
	}
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.a.fid);
	promise(q, &rep.b.fid);
	return 0;
}

static int op_remove(struct op_req *q)
{
	const struct msg_remove_req *m = &q->m.remove_req;
	char name[CAIRN_NAME_MAX + 1];
	struct store_changed sc = { 0 };
	struct msg_attr rep;
	int ret;

	if ((ret = name_get(&m->name, name)))
		return ret;
	if ((m->flags & ~(uint32_t)(RM_DIR | RM_KEEP | RM_SELF | RM_FID)) ||
	    (m->flags & (RM_DIR | RM_SELF)) == (RM_DIR | RM_SELF))
		return -EINVAL;
	if (tok_busy(q, &m->dir))
		return PARKED;
	if (m->flags & RM_FID) {
		struct cairn_attr cur;

		ret = store_lookup(q->ctx->st, &m->dir, name, &cur);
		if (ret == 0 && (cur.fid.vnode != m->victim.vnode ||
				 cur.fid.uniq != m->victim.uniq ||
				 cur.fid.vol != m->victim.vol))
			ret = -ENOENT; /* removed already, the name reused */
		if (ret)
			return ret;
	}
	struct cairn_attr victim;
	if ((ret = may_unlink(q, &m->dir, name, &victim)) < 0)
		return ret;
	/* RM_KEEP: an orphan is held by the requester (conn_client_id). */
	tag(q);
	ret = store_remove(q->ctx->st, &m->dir, name,
			   m->flags & ~(uint32_t)RM_FID, conn_client_id(q->c),
			   &rep.attr, &sc);
	untag();
	if (ret == -EALREADY) {
		if ((ret = applied(q, &m->dir, &rep.attr, NULL, NULL)))
			return ret;
		reply(q, &rep);
		promise(q, &rep.attr.fid);
		return 0;
	}
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	change(q, &m->dir, &m->name, CB_OTHERS);
	if (m->flags & RM_SELF)
		/* The requester marks the object stale itself. */
		change_f(q, &sc.fid[0], NULL,
			 (sc.gone & 1) ? CB_OTHERS_GONE : CB_OTHERS,
			 CB_ATTRS_ONLY);
	else
		change_all(q, &sc);
	orphaned(q, &sc);
	return 0;
}

/*
 * REMOVES: a client's journal sends the removals it answered in one
 * directory together. Each entry is a REMOVE with RM_FID (and its own
 * RM_DIR, RM_KEEP, RM_SELF): checked and applied on its own, in order,
 * all in one commit (store_removes). Breaks and orphans as REMOVE's, for
 * each name removed; at most CAIRN_REMOVES_MAX entries, so that their
 * changes fit one request's (HANDLER_MAX_CHANGES).
 */
static int op_removes(struct op_req *q)
{
	const struct msg_removes_req *m = &q->m.removes_req;
	int at = q->op == OP_REMOVESAT;
	struct cairn_time when[CAIRN_REMOVES_MAX];
	char names[CAIRN_REMOVES_MAX][CAIRN_NAME_MAX + 1];
	const char *np[CAIRN_REMOVES_MAX];
	struct msg_str ns[CAIRN_REMOVES_MAX];
	uint32_t flags[CAIRN_REMOVES_MAX];
	int32_t status[CAIRN_REMOVES_MAX];
	int rcs[CAIRN_REMOVES_MAX], idx[CAIRN_REMOVES_MAX];
	struct store_changed sc[CAIRN_REMOVES_MAX];
	struct msg_removes_rep rep = { .count = m->count, .status = status };
	struct msg_rment e;
	struct rbuf it;
	uint32_t i, n = 0;
	int ret;

	if (m->count < 1 || m->count > CAIRN_REMOVES_MAX)
		return -EINVAL;
	if (tok_busy(q, &m->dir))
		return PARKED;
	rbuf_init(&it, m->list.p, m->list.len);
	for (i = 0; i < m->count; i++) {
		if (!(at ? msg_rment_at_next(&it, &e)
			 : msg_rment_next(&it, &e)))
			return -EPROTO;
		if ((e.flags & ~(uint32_t)(RM_DIR | RM_KEEP | RM_SELF)) ||
		    (e.flags & (RM_DIR | RM_SELF)) == (RM_DIR | RM_SELF))
			return -EINVAL;
		if ((ret = name_get(&e.name, names[i])))
			return ret;
		ns[i] = e.name;
		flags[i] = e.flags;
		when[i] = e.time;
		status[i] = 0;
		/* Removed already (a resend), or the name reused since. */
		struct cairn_attr cur;
		ret = store_lookup(q->ctx->st, &m->dir, names[i], &cur);
		if (ret == 0 && (cur.fid.vnode != e.victim.vnode ||
				 cur.fid.uniq != e.victim.uniq ||
				 cur.fid.vol != e.victim.vol))
			ret = -ENOENT;
		if (ret == 0 && (ret = may_unlink(q, &m->dir, names[i],
						  &cur)) > 0)
			ret = -ENOENT;
		if (ret) {
			status[i] = ret;
			continue;
		}
		np[n] = names[i];
		idx[n++] = (int)i;
	}
	if (n == 0) {
		if ((ret = store_getattr(q->ctx->st, &m->dir, &rep.dir)))
			return ret;
	} else {
		uint32_t fl[CAIRN_REMOVES_MAX];
		struct cairn_time tm[CAIRN_REMOVES_MAX];

		for (i = 0; i < n; i++) {
			fl[i] = flags[idx[i]];
			tm[i] = when[idx[i]];
		}
		if ((ret = store_removes(q->ctx->st, &m->dir, (int)n, np, fl,
					 at ? tm : NULL, conn_client_id(q->c),
					 rcs, &rep.dir, sc)))
			return ret;
	}
	for (i = 0; i < n; i++)
		status[idx[i]] = rcs[i];
	reply(q, &rep);
	promise(q, &rep.dir.fid);
	for (i = 0; i < n; i++) {
		if (rcs[i])
			continue;
		change(q, &m->dir, &ns[idx[i]], CB_OTHERS);
		if (flags[idx[i]] & RM_SELF)
			/* The requester marks the object stale itself. */
			change_f(q, &sc[i].fid[0], NULL,
				 sc[i].gone ? CB_OTHERS_GONE : CB_OTHERS,
				 CB_ATTRS_ONLY);
		else
			change_all(q, &sc[i]);
		orphaned(q, &sc[i]);
	}
	return 0;
}

/* Rename: remove from the source, add to (and maybe replace in, or
 * exchange with) the target; a directory moved to another parent needs
 * write permission on itself (its ".." changes). */
static int may_rename(struct op_req *q, const struct msg_rename_req *m,
		      const char *sname, const char *dname)
{
	struct cairn_attr v, t;
	int ret, tret, dir_moves;

	if (!q->cred.present)
		return 0;
	if ((ret = may_unlink(q, &m->sdir, sname, &v)))
		return ret < 0 ? ret : 0; /* no source: the store says so */
	if ((tret = may_unlink(q, &m->ddir, dname, &t)) < 0)
		return tret;
	dir_moves = memcmp(&m->sdir, &m->ddir, sizeof(m->sdir)) != 0;
	if (dir_moves && S_ISDIR(v.mode) &&
	    (ret = perm_check(&q->cred, &v, PERM_W)))
		return ret;
	if (dir_moves && tret == 0 && (m->flags & RN_EXCHANGE) &&
	    S_ISDIR(t.mode) && (ret = perm_check(&q->cred, &t, PERM_W)))
		return ret;
	return 0;
}

static int op_rename(struct op_req *q)
{
	const struct msg_rename_req *m = &q->m.rename_req;
	char sname[CAIRN_NAME_MAX + 1], dname[CAIRN_NAME_MAX + 1];
	struct store_changed sc = { 0 };
	struct msg_attr2 rep;
	int ret;

	if ((ret = name_get(&m->sname, sname)) ||
	    (ret = name_get(&m->dname, dname)))
		return ret;
	if ((m->flags & ~(uint32_t)(RN_NOREPLACE | RN_EXCHANGE | RN_KEEP)) ||
	    (m->flags & (RN_NOREPLACE | RN_EXCHANGE)) ==
	    (RN_NOREPLACE | RN_EXCHANGE))
		return -EINVAL;
	if (tok_busy(q, &m->sdir) || tok_busy(q, &m->ddir))
		return PARKED;
	if ((ret = may_rename(q, m, sname, dname)))
		return ret;
	tag(q);
	ret = store_rename(q->ctx->st, &m->sdir, sname, &m->ddir, dname,
			   m->flags, conn_client_id(q->c), &rep.a, &rep.b,
			   &sc);
	untag();
	if (ret == -EALREADY) {
		if ((ret = applied(q, &m->sdir, &rep.a, &m->ddir, &rep.b)))
			return ret;
		reply(q, &rep);
		promise(q, &rep.a.fid);
		promise(q, &rep.b.fid);
		return 0;
	}
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.a.fid);
	promise(q, &rep.b.fid);
	change(q, &m->sdir, &m->sname, CB_OTHERS);
	change(q, &m->ddir, &m->dname, CB_OTHERS);
	change_all(q, &sc);
	orphaned(q, &sc);
	return 0;
}

/* --- directories and data ---------------------------------------------------- */

struct readdir_state {
	struct op_req *q;
	uint32_t count;
};

/* Called inside the store's read transaction: encode only. */
static int readdir_entry(void *arg, uint64_t next_cookie, const char *name,
			 size_t namelen, const struct cairn_attr *attr)
{
	struct readdir_state *rs = arg;
	struct msg_dirent e = { next_cookie, { name, namelen }, *attr };

	msg_dirent_put(rs->q->w, &e);
	promise(rs->q, &attr->fid);
	rs->count++;
	return rs->q->w->err || rs->q->out->nomem;
}

static int op_readdir(struct op_req *q)
{
	const struct msg_readdir_req *m = &q->m.readdir_req;
	struct readdir_state rs = { q, 0 };
	uint32_t max = m->max;
	size_t at;
	int ret, eof = 0;

	if (max == 0)
		return -EINVAL;
	if (max > HANDLER_READDIR_MAX)
		max = HANDLER_READDIR_MAX;
	if (tok_busy(q, &m->dir))
		return PARKED;
	if ((ret = may(q, &m->dir, PERM_R, NULL)))
		return ret;
	at = msg_readdir_rep_begin(q->w);
	ret = store_readdir(q->ctx->st, &m->dir, m->cookie, max, readdir_entry,
			    &rs, &eof);
	if (ret)
		return ret;
	if (q->w->err)
		return q->w->err;
	/* The listing is cached with the directory's promise. */
	promise(q, &m->dir);
	msg_readdir_rep_end(q->w, at, rs.count, eof);
	return 0;
}

struct bulkstat_state {
	struct op_req *q;
	uint32_t count;
	size_t used;             /* bytes of entries encoded */
	size_t cap;
};

/* Called inside the store's read transaction: encode only. An entry that
 * would pass the byte cap ends the page (it begins the next one). */
static int bulkstat_entry(void *arg, uint64_t next_cookie, const char *name,
			  size_t namelen, const struct cairn_attr *attr)
{
	struct bulkstat_state *bs = arg;
	struct msg_dirent e = { next_cookie, { name, namelen }, *attr };
	size_t need = msg_dirent_size(namelen);

	if (bs->used + need > bs->cap)
		return 1;
	msg_dirent_put(bs->q->w, &e);
	promise(bs->q, &attr->fid);
	bs->used += need;
	bs->count++;
	return bs->q->w->err || bs->q->out->nomem;
}

static int op_bulkstat(struct op_req *q)
{
	const struct msg_bulkstat_req *m = &q->m.bulkstat_req;
	struct bulkstat_state bs = { q, 0, 0, m->max };
	struct cairn_attr dir;
	uint64_t next_cookie = 0;
	size_t at;
	int ret, eof = 0;

	if (m->flags & ~(uint32_t)BS_LIST)
		return -EINVAL;
	if (bs.cap > CAIRN_BULKSTAT_MAX)
		bs.cap = CAIRN_BULKSTAT_MAX;
	if (tok_busy(q, &m->dir))
		return PARKED;
	/* The client lists with it (read) and answers lookups from it
	 * (search): either will do. */
	if ((ret = may(q, &m->dir, PERM_R, NULL)) == -EACCES)
		ret = may(q, &m->dir, PERM_X, NULL);
	if (ret)
		return ret;
	at = msg_bulkstat_rep_begin(q->w);
	ret = store_readdir_attr(q->ctx->st, &m->dir, m->cookie,
				 bs.cap ? UINT32_MAX : 0, m->flags & BS_LIST,
				 bulkstat_entry, &bs, &eof, &dir, &next_cookie);
	if (ret)
		return ret;
	if (q->w->err)
		return q->w->err;
	/* The listing is cached with the directory's promise, and each
	 * entry's status with its own. */
	promise(q, &m->dir);
	msg_bulkstat_rep_end(q->w, at, &dir, next_cookie, bs.count, eof);
	return 0;
}

/*
 * File data: read (or write) permission, or the owner's (a descriptor
 * opened before a chmod keeps working, as with NFS), and for reads
 * execute permission too (the kernel reads what it executes).
 */
static int may_data(struct op_req *q, const struct cairn_fid *fid, int want)
{
	struct cairn_attr a;
	int ret = may(q, fid, want, &a);

	if (ret != -EACCES)
		return ret;
	if (perm_owner(&q->cred, &a) ||
	    (want == PERM_R && !perm_check(&q->cred, &a, PERM_X)))
		return 0;
	return ret;
}

static int op_read(struct op_req *q)
{
	const struct msg_read_req *m = &q->m.read_req;
	struct cairn_attr a;
	uint32_t n = 0;
	uint8_t *data;
	size_t at;
	int ret;

	if (m->len > CAIRN_MAX_IO)
		return -EINVAL;
	if ((ret = may_data(q, &m->fid, PERM_R)))
		return ret;
	/* The store reads straight into the reply frame. */
	data = msg_read_rep_reserve(q->w, m->len, &at);
	if (!data)
		return -ENOMEM;
	ret = store_read(q->ctx->st, &m->fid, m->off, m->len, data, &n, &a);
	if (ret)
		return ret;
	if (n > m->len)
		n = m->len; /* never trust a callee past its buffer */
	msg_read_rep_finish(q->w, at, &a, n);
	promise(q, &a.fid);
	return 0;
}

/* WRITE, and with sa (WRITEATTR) the attribute changes after it, in one
 * commit; sa's size field holds their count (SA_STEPS). */
static int write_and(struct op_req *q, const struct msg_write_req *m,
		     const struct msg_setattr_req *sa)
{
	struct store_setattr then;
	struct msg_attr rep;
	int ret;

	if ((m->flags & ~(uint32_t)(WR_SYNC | WR_KEEPTIME | WR_TOKEN)) ||
	    m->data.len > CAIRN_MAX_IO)
		return -EINVAL;
	if (m->off > (uint64_t)INT64_MAX - m->data.len)
		return -EFBIG;
	if (tok_busy(q, &m->fid))
		return PARKED;
	if ((m->flags & WR_TOKEN) && (ret = tok_lost(q, &m->fid)))
		return ret;
	if ((ret = may_data(q, &m->fid, PERM_W)) ||
	    (sa && (ret = may_setattr(q, sa))) ||
	    (ret = kill_suid(q, &m->fid)))
		return ret;
	if (sa)
		then = (struct store_setattr){
			.valid = sa->valid, .mode = sa->mode, .uid = sa->uid,
			.gid = sa->gid, .atime = sa->atime,
			.mtime = sa->mtime, .ctime = sa->ctime,
			.steps = (uint32_t)sa->size,
		};
	ret = store_write_attr(q->ctx->st, &m->fid, m->off, m->data.p,
			       (uint32_t)m->data.len,
			       m->flags & ~(uint32_t)WR_TOKEN, sa ? &then : NULL,
			       &rep.attr);
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	change(q, &m->fid, NULL, CB_OTHERS);
	return 0;
}

static int op_write(struct op_req *q)
{
	return write_and(q, &q->m.write_req, NULL);
}

/* The attribute part takes what SETATTR takes, but not a size, nor the
 * bits the WRITE's flags say for both (WR_TOKEN, WR_SYNC), nor SA_STEPS
 * (its own field); nothing, or no bytes, is no WRITEATTR. */
static int op_writeattr(struct op_req *q)
{
	const struct msg_writeattr_req *m = &q->m.writeattr_req;
	const uint32_t ok = SA_MODE | SA_UID | SA_GID | SA_ATIME | SA_MTIME |
			    SA_ATIME_NOW | SA_MTIME_NOW | SA_CTIME |
			    SA_KEEPTIME;
	struct msg_write_req w = { m->fid, m->off, m->flags, m->data };
	struct msg_setattr_req sa = {
		.fid = m->fid, .valid = m->valid, .mode = m->mode,
		.uid = m->uid, .gid = m->gid, .size = m->steps,
		.atime = m->atime, .mtime = m->mtime, .ctime = m->ctime,
	};

	if ((m->valid & ~ok) || !(m->valid & ~(uint32_t)SA_KEEPTIME) ||
	    m->steps == 0 || m->steps > SA_STEPS_MAX || m->data.len == 0)
		return -EINVAL;
	return write_and(q, &w, &sa);
}

static int op_fsync(struct op_req *q)
{
	const struct msg_fsync_req *m = &q->m.fsync_req;

	if (m->flags & ~(uint32_t)FS_DATASYNC)
		return -EINVAL;
	return store_fsync(q->ctx->st, &m->fid, m->flags); /* empty reply */
}

static int op_fallocate(struct op_req *q)
{
	const struct msg_fallocate_req *m = &q->m.fallocate_req;
	struct msg_attr rep;
	int ret;

	if (m->len == 0)
		return -EINVAL;
	if (m->off > (uint64_t)INT64_MAX ||
	    m->len > (uint64_t)INT64_MAX - m->off)
		return -EFBIG;
	if (tok_busy(q, &m->fid))
		return PARKED;
	if ((ret = may_data(q, &m->fid, PERM_W)))
		return ret;
	ret = store_fallocate(q->ctx->st, &m->fid, m->mode, m->off, m->len,
			      &rep.attr);
	if (ret)
		return ret;
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	change(q, &m->fid, NULL, CB_OTHERS);
	return 0;
}

/*
 * WTOKEN: grant (another holder: wait for it, recalled) or return
 * (WT_RETURN) a regular file's or a directory's write token. A grant
 * breaks the other clients' promises on it: their next look at it
 * reaches the server, and waits for the token there.
 */
static int op_wtoken(struct op_req *q)
{
	const struct msg_wtoken_req *m = &q->m.wtoken_req;
	struct msg_attr rep;
	int ret, fresh = 0;

	if ((m->flags & ~(uint32_t)(WT_RETURN | WT_DV)) ||
	    (m->flags & WT_RETURN && m->flags & WT_DV))
		return -EINVAL;
	if (m->flags & WT_RETURN) {
		tok_return(q->ctx->tok, q->c, &m->fid);
		if ((ret = store_getattr(q->ctx->st, &m->fid, &rep.attr)))
			return ret;
		reply(q, &rep);
		promise(q, &rep.attr.fid);
		return 0;
	}
	/* The token authorizes the stores under it (which carry no
	 * credentials): it goes only to someone who may write the file, or
	 * change the directory's entries. */
	struct cairn_attr cur;
	if ((ret = store_getattr(q->ctx->st, &m->fid, &cur)))
		return ret;
	if (!S_ISREG(cur.mode) && !S_ISDIR(cur.mode))
		return -EINVAL;
	if ((ret = S_ISDIR(cur.mode)
			 ? may(q, &m->fid, PERM_W | PERM_X, NULL)
			 : may_data(q, &m->fid, PERM_W)))
		return ret;
	/* A directory's token only while nobody else looks at it: taking
	 * it would break their promises while they may be changing it
	 * themselves (each then waits for the other: an acknowledgement
	 * cycle), and creates there are better made by the server. */
	if (S_ISDIR(cur.mode) &&
	    cb_others_hold(q->ctx->cb, conn_cb_client(q->c), &m->fid))
		return -EBUSY;
	ret = tok_acquire(q->ctx->tok, q->c, &m->fid, &fresh);
	if (ret == 1) {
		q->out->park = 1;
		q->out->park_fid = m->fid;
		return PARKED;
	}
	if (ret)
		return ret;
	/* Read once we hold it: nobody else can change it now. */
	ret = store_getattr(q->ctx->st, &m->fid, &rep.attr);
	if (!ret && !S_ISREG(rep.attr.mode) && !S_ISDIR(rep.attr.mode))
		ret = -EINVAL;
	if (!ret && (m->flags & WT_DV) && rep.attr.dv != m->dv)
		ret = -ECANCELED; /* changed since the version it expects */
	if (ret) {
		if (fresh)
			tok_return(q->ctx->tok, q->c, &m->fid);
		return ret;
	}
	reply(q, &rep);
	promise(q, &rep.attr.fid);
	if (fresh)
		change(q, &m->fid, NULL, CB_OTHERS);
	return 0;
}

/*
 * Locks (lock.h). The request's fields become a lock table entry; bad
 * values are answered as fcntl would (EINVAL). A grant waits, like a
 * read, for another client's write token on the file (its holder sends
 * what it kept first), and its reply carries the file's attributes,
 * promised: what the client caches is current once it holds the lock.
 */
static int lock_entry(const struct msg_lock_req *m, struct lkent *e)
{
	if (m->start > m->end || m->end > LK_EOF || m->type > LK_WR ||
	    (m->flags & ~(uint32_t)(LK_FLOCK | LK_WAIT | LK_RECLAIM |
				    LK_CANCEL | LK_RETURN | LK_DELEG)) ||
	    ((m->flags & LK_RETURN) && m->type != LK_UN))
		return -EINVAL;
	*e = (struct lkent){ .owner = m->owner, .start = m->start,
			     .end = m->end, .pid = m->pid,
			     .type = (uint8_t)m->type,
			     .flock = (m->flags & LK_FLOCK) != 0 };
	return 0;
}

/* LOCK and LOCKD: LOCKD's grant may come with the file's delegation,
 * said in its reply's flags. */
static int op_lock(struct op_req *q)
{
	const struct msg_lock_req *m = &q->m.lock_req;
	struct lk_client *cl = conn_lk_client(q->c);
	int deleg = q->op == OP_LOCKD, got = 0;
	int take = m->type != LK_UN && !(m->flags & LK_CANCEL);
	union {
		struct msg_attr lock;
		struct msg_lockd_rep lockd;
	} rep;
	struct cairn_attr a;
	struct lkent e;
	int ret;

	if ((ret = lock_entry(m, &e)))
		return ret;
	if (!deleg && (m->flags & LK_DELEG))
		return -EINVAL; /* LOCKD's */
	if (!cl)
		return -ENOLCK;
	if (take && tok_busy(q, &m->fid))
		return PARKED;
	if ((ret = store_getattr(q->ctx->st, &m->fid, &a)))
		return ret;
	if ((ret = lk_lock(q->ctx->lk, q->c, cl, &m->fid, &e,
			   m->flags | (deleg ? LK_DELEG : 0), &got)))
		return ret;
	/* The releaser sent what it wrote first: whoever waits for its
	 * token (a reader, the next holder of the lock) may run now. */
	if (m->flags & LK_RETURN)
		tok_return(q->ctx->tok, q->c, &m->fid);
	if (deleg)
		rep.lockd = (struct msg_lockd_rep){ a, got ? LKD_DELEG : 0 };
	else
		rep.lock.attr = a;
	reply(q, &rep);
	if (take)
		promise(q, &a.fid);
	return 0;
}

/* LKRETURN (lock.h, lk_return). */
static int op_lkreturn(struct op_req *q)
{
	const struct msg_lkreturn_req *m = &q->m.lkreturn_req;
	struct lk_client *cl = conn_lk_client(q->c);
	struct lkent *ents = NULL;
	struct msg_lkent x;
	struct rbuf it;
	uint32_t n = 0;
	int ret = 0;

	if ((m->flags & ~(uint32_t)LKR_TOKEN) ||
	    m->count > CAIRN_LKRETURN_MAX)
		return -EINVAL;
	if (!cl)
		return -ENOLCK;
	if (m->count && !(ents = calloc(m->count, sizeof(*ents))))
		return -ENOMEM;
	rbuf_init(&it, m->list.p, m->list.len);
	while (n < m->count && msg_lkent_next(&it, &x)) {
		if (x.start > x.end || x.end > LK_EOF ||
		    (x.type != LK_RD && x.type != LK_WR) ||
		    (x.flags & ~(uint32_t)LK_FLOCK)) {
			ret = -EINVAL;
			break;
		}
		ents[n++] = (struct lkent){ .owner = x.owner, .start = x.start,
					    .end = x.end, .pid = x.pid,
					    .type = (uint8_t)x.type,
					    .flock = (x.flags & LK_FLOCK) != 0 };
	}
	if (!ret)
		ret = lk_return(q->ctx->lk, cl, &m->fid, ents, n);
	free(ents);
	if (ret)
		return ret;
	if (m->flags & LKR_TOKEN)
		tok_return(q->ctx->tok, q->c, &m->fid);
	reply(q, &(struct msg_empty){ 0 });
	return 0;
}

static int op_getlk(struct op_req *q)
{
	const struct msg_lock_req *m = &q->m.lock_req;
	struct lk_client *cl = conn_lk_client(q->c);
	struct msg_getlk_rep rep;
	struct cairn_attr a;
	struct lkent e, out;
	int ret;

	if ((ret = lock_entry(m, &e)))
		return ret;
	if (m->type == LK_UN || (m->flags & ~(uint32_t)(LK_FLOCK | LK_DELEG)))
		return -EINVAL; /* checked before lock_entry's wider mask */
	if (!cl)
		return -ENOLCK;
	if ((ret = store_getattr(q->ctx->st, &m->fid, &a)))
		return ret;
	if ((ret = lk_test(q->ctx->lk, q->c, cl, &m->fid, &e, m->flags,
			   &out)) < 0)
		return ret;
	rep = (struct msg_getlk_rep){ .type = out.type, .start = out.start,
				      .end = out.end, .pid = out.pid };
	reply(q, &rep);
	return 0;
}

/* FIDS: object numbers handed out for CR_FID creates (store_fids). */
static int op_fids(struct op_req *q)
{
	struct msg_fids_rep rep;
	int ret;

	ret = store_fids(q->ctx->st, q->m.fids_req.count, &rep.first);
	if (ret)
		return ret;
	rep.count = q->m.fids_req.count;
	reply(q, &rep);
	return 0;
}

static int op_statfs(struct op_req *q)
{
	struct msg_statfs_rep rep;
	int ret;

	ret = store_statfs(q->ctx->st, &rep.sf);
	if (ret)
		return ret;
	reply(q, &rep);
	return 0;
}

/* The FIDs of an ORPHAN_DROP or ATIME request (1..CAIRN_ORPHAN_DROP_MAX)
 * into fids: their count, or -EINVAL. */
static int fid_list(const struct msg_orphan_drop_req *m,
		    struct cairn_fid fids[CAIRN_ORPHAN_DROP_MAX])
{
	struct rbuf it;
	int n = 0;

	if (m->count == 0 || m->count > CAIRN_ORPHAN_DROP_MAX)
		return -EINVAL;
	rbuf_init(&it, m->list.p, m->list.len);
	while ((uint32_t)n < m->count && msg_fid_next(&it, &fids[n]))
		n++;
	return n;
}

/* Give back the listed write tokens the requester holds. */
static int op_wreturn(struct op_req *q)
{
	struct cairn_fid fids[CAIRN_ORPHAN_DROP_MAX];
	int ret = fid_list(&q->m.orphan_drop_req, fids);

	if (ret < 0)
		return ret;
	for (int i = 0; i < ret; i++)
		tok_return(q->ctx->tok, q->c, &fids[i]);
	return 0; /* empty reply */
}

/*
 * Free the listed orphans the requester holds; the rest is ignored. No
 * promise and no break: nobody can name an orphan, and the promises on
 * it were broken when its last name went (docs/PROTOCOL.md).
 */
static int op_orphan_drop(struct op_req *q)
{
	struct cairn_fid fids[CAIRN_ORPHAN_DROP_MAX];
	size_t n, freed = 0;
	int ret = fid_list(&q->m.orphan_drop_req, fids);

	if (ret < 0)
		return ret;
	n = (size_t)ret;
	ret = store_orphan_drop(q->ctx->st, conn_client_id(q->c), fids, n,
				&freed);
	if (ret)
		return ret;
	log_debug("peer %s: ORPHAN_DROP of %zu: %zu freed", conn_peer(q->c),
		  n, freed);
	return 0; /* empty reply */
}

/* Relatime for reads a client's disk cache answered (docs/PROTOCOL.md,
 * ATIME): no promise, no break, as for READ's atime. */
static int op_atime(struct op_req *q)
{
	struct cairn_fid fids[CAIRN_ORPHAN_DROP_MAX];
	size_t n, moved = 0;
	int ret = fid_list(&q->m.orphan_drop_req, fids);

	if (ret < 0)
		return ret;
	n = (size_t)ret;
	if ((ret = store_atime_many(q->ctx->st, fids, n, &moved)))
		return ret;
	log_debug("peer %s: ATIME of %zu: %zu moved", conn_peer(q->c), n,
		  moved);
	return 0; /* empty reply */
}

/* --- extended attributes -------------------------------------------------------- */

/*
 * Extended attributes as Linux allows them: user.* need read (to get) or
 * write (to set, remove) permission on the file; trusted.* and
 * security.* are set by root only, and trusted.* read by root only
 * (others see none, -ENODATA).
 */
static int may_xattr(struct op_req *q, const struct cairn_fid *fid,
		     const char *name, int write)
{
	if (!q->cred.present)
		return 0;
	if (!strncmp(name, "user.", 5))
		return may(q, fid, write ? PERM_W : PERM_R, NULL);
	if (q->cred.uid == 0)
		return 0;
	if (!strncmp(name, "trusted.", 8))
		return write ? -EPERM : -ENODATA;
	if (write && !strncmp(name, "security.", 9))
		return -EPERM;
	return 0;
}

static int op_setxattr(struct op_req *q)
{
	const struct msg_setxattr_req *m = &q->m.setxattr_req;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	int ret;

	if ((ret = xattr_name_get(&m->name, name)))
		return ret;
	if (m->flags & ~(uint32_t)(XA_CREATE | XA_REPLACE))
		return -EINVAL;
	if (m->value.len > CAIRN_XATTR_SIZE_MAX)
		return -E2BIG;
	if ((ret = may_xattr(q, &m->fid, name, 1)))
		return ret;
	ret = store_setxattr(q->ctx->st, &m->fid, name, m->value.p,
			     m->value.len, m->flags);
	if (ret)
		return ret;
	change_f(q, &m->fid, NULL, 0, CB_ATTRS_ONLY); /* ctime; cached xattrs */
	return 0; /* empty reply */
}

/*
 * GETXATTR (name) and LISTXATTR (name NULL) replies, built in place: the
 * store writes the value straight into the frame. size 0 asks for the
 * size only.
 */
static int sized_reply(struct op_req *q, const struct cairn_fid *fid,
		       const char *name, uint32_t size)
{
	uint32_t cap = size > CAIRN_XATTR_SIZE_MAX ? CAIRN_XATTR_SIZE_MAX
						   : size;
	size_t at, len = 0;
	uint8_t *p = msg_sized_rep_reserve(q->w, cap, &at);
	int ret;

	if (!p)
		return -ENOMEM;
	if (name)
		ret = store_getxattr(q->ctx->st, fid, name, p, cap, &len);
	else
		ret = store_listxattr(q->ctx->st, fid, (char *)p, cap, &len);
	if (ret)
		return ret;
	if (cap && len > cap)
		return -ERANGE;
	if (len > UINT32_MAX)
		return -E2BIG;
	msg_sized_rep_finish(q->w, at, (uint32_t)len, cap ? (uint32_t)len : 0);
	return 0;
}

static int op_getxattr(struct op_req *q)
{
	const struct msg_getxattr_req *m = &q->m.getxattr_req;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	int ret;

	if ((ret = xattr_name_get(&m->name, name)))
		return ret;
	if ((ret = may_xattr(q, &m->fid, name, 0)))
		return ret;
	return sized_reply(q, &m->fid, name, m->size);
}

static int op_listxattr(struct op_req *q)
{
	const struct msg_listxattr_req *m = &q->m.listxattr_req;

	return sized_reply(q, &m->fid, NULL, m->size);
}

static int op_removexattr(struct op_req *q)
{
	const struct msg_removexattr_req *m = &q->m.removexattr_req;
	char name[CAIRN_XATTR_NAME_MAX + 1];
	int ret;

	if ((ret = xattr_name_get(&m->name, name)))
		return ret;
	if ((ret = may_xattr(q, &m->fid, name, 1)))
		return ret;
	ret = store_removexattr(q->ctx->st, &m->fid, name);
	if (ret)
		return ret;
	change_f(q, &m->fid, NULL, 0, CB_ATTRS_ONLY);
	return 0; /* empty reply */
}

/* --- dispatch -------------------------------------------------------------- */

/* Names and flags of each opcode are in its msg descriptor. */
static const op_fn handlers[OP__COUNT] = {
	[OP_HELLO] = op_hello,
	[OP_AUTH] = op_auth,
	[OP_PING] = op_ping,
	[OP_GETATTR] = op_getattr,
	[OP_LOOKUP] = op_lookup,
	[OP_SETATTR] = op_setattr,
	[OP_CREATE] = op_create,
	[OP_SYMLINK] = op_symlink,
	[OP_READLINK] = op_readlink,
	[OP_LINK] = op_link,
	[OP_REMOVE] = op_remove,
	[OP_REMOVES] = op_removes,
	[OP_REMOVESAT] = op_removes,
	[OP_CREATES] = op_creates,
	[OP_CREATEATTR] = op_createattr,
	[OP_WRITEATTR] = op_writeattr,
	[OP_RENAME] = op_rename,
	[OP_READDIR] = op_readdir,
	[OP_READ] = op_read,
	[OP_WRITE] = op_write,
	[OP_FSYNC] = op_fsync,
	[OP_STATFS] = op_statfs,
	[OP_SETXATTR] = op_setxattr,
	[OP_GETXATTR] = op_getxattr,
	[OP_LISTXATTR] = op_listxattr,
	[OP_REMOVEXATTR] = op_removexattr,
	[OP_FALLOCATE] = op_fallocate,
	[OP_STATUS] = op_status,
	[OP_BULKSTAT] = op_bulkstat,
	[OP_ORPHAN_DROP] = op_orphan_drop,
	[OP_ATIME] = op_atime,
	[OP_WTOKEN] = op_wtoken,
	[OP_WRETURN] = op_wreturn,
	[OP_LOCK] = op_lock,
	[OP_GETLK] = op_getlk,
	[OP_LOCKD] = op_lock,
	[OP_LKRETURN] = op_lkreturn,
	[OP_FIDS] = op_fids,
};

/* Operations served as if they had no handler (handlers_refuse); set
 * before the first connection, read-only after. */
static uint8_t refused[OP__COUNT];

static op_fn handler_of(unsigned op)
{
	return op < OP__COUNT && !msg_has(op, MSG_PUSH) && !refused[op]
		       ? handlers[op] : NULL;
}

int handlers_refuse(const char *list, char *err, size_t errsz)
{
	size_t n, len;
	const struct msg_desc *d = msg_descs(&n);
	const char *p = list;

	while (*p) {
		size_t i;

		len = strcspn(p, ", ");
		for (i = 0; len && i < n; i++)
			if (!(d[i].flags & MSG_PUSH) &&
			    strlen(d[i].name) == len &&
			    strncasecmp(d[i].name, p, len) == 0)
				break;
		if (len && (i == n || d[i].op == OP_HELLO ||
			    d[i].op == OP_AUTH)) {
			snprintf(err, errsz, "%s: \"%.*s\" is not an "
				 "operation a server may lack (docs/PROTOCOL.md)",
				 HANDLERS_WITHOUT_ENV, (int)len, p);
			return -EINVAL;
		}
		if (len) {
			refused[d[i].op] = 1;
			log_warn("answering %s -ENOSYS, as a server from "
				 "before it would (%s)", d[i].name,
				 HANDLERS_WITHOUT_ENV);
		}
		p += len;
		p += strspn(p, ", ");
	}
	return 0;
}

/* Replace whatever w holds by an error frame with no payload. */
static void reply_error(struct wbuf *w, const struct wire_hdr *h, int status)
{
	size_t hdr;

	wbuf_reset(w);
	hdr = wire_frame_begin(w, h->op, WF_REPLY, h->id, status);
	wire_frame_end(w, hdr);
}

/*
 * What a read-only export refuses (-EROFS): every change of the volume,
 * taking a write token, and moving atimes. Giving a token back, dropping
 * orphans it held, locks and reads are fine.
 */
static int refused_read_only(const struct op_req *q)
{
	switch (q->op) {
	case OP_ORPHAN_DROP:
		return 0;
	case OP_WTOKEN:
		return !(q->m.wtoken_req.flags & WT_RETURN);
	case OP_ATIME:
		return 1;
	default:
		return msg_has(q->op, MSG_CHANGES);
	}
}

/* Decode the request (after its credentials, WF_CRED) into q->m and run
 * fn. Returns its status, or -EPROTO with q->bad set. */
static int run(struct op_req *q, op_fn fn, const struct wire_hdr *h,
	       const uint8_t *payload)
{
	const char *why = NULL;
	uint32_t len = h->len;

	if (h->flags & WF_CRED) {
		int n = cred_decode(payload, len, q->ctx->no_root_squash,
				    &q->cred);
		if (n < 0) {
			q->bad = "malformed credentials";
			return -EPROTO;
		}
		payload += n;
		len -= (uint32_t)n;
	}
	if (msg_decode(h->op, 0, payload, len, &q->m, &why)) {
		q->bad = why;
		return -EPROTO;
	}
	if (conn_read_only(q->c) && refused_read_only(q))
		return -EROFS;
	return fn(q);
}

int handler_run(const struct srv_ctx *ctx, struct conn *c,
		const struct wire_hdr *h, const uint8_t *payload,
		struct handler_out *out)
{
	struct op_req q = { .ctx = ctx, .c = c, .op = h->op, .id = h->id,
			    .out = out };
	op_fn fn = handler_of(h->op);
	const char *name = fn ? msg_name(h->op) : "?";
	size_t hdr;
	int status;

	memset(out, 0, sizeof(*out));
	out->pfid = out->pfix;
	out->pcap = (int)(sizeof(out->pfix) / sizeof(out->pfix[0]));
	wbuf_init(&out->w);
	q.w = &out->w;
	hdr = wire_frame_begin(q.w, h->op, WF_REPLY, h->id, 0);
	status = fn ? run(&q, fn, h, payload) : -ENOSYS;
	if (status == PARKED) {
		/* Nothing changed and nothing is sent (server.c parks it). */
		CAIRN_ASSERT(out->park && !out->nch);
		out->np = 0;
		wbuf_reset(q.w);
		return 0;
	}
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
		if (!out->changed)
			out->nch = 0;
		wbuf_reset(q.w);
		hdr = wire_frame_begin(q.w, h->op, WF_REPLY, h->id, status);
	}
	wire_frame_end(q.w, hdr);
	if (q.w->err) {
		log_error("peer %s: cannot encode %s reply: %s", conn_peer(c),
			  name, strerror(-q.w->err));
		out->np = out->nch = 0;
		reply_error(q.w, h, -EIO);
	}
	log_debug("peer %s: %s id %u -> %d", conn_peer(c), name, h->id,
		  status);
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
	size_t n;
	const struct msg_desc *d = msg_descs(&n);

	for (size_t i = 0; i < n; i++) {
		if (!(d[i].flags & MSG_PUSH) && !handler_of(d[i].op)) {
			*missing = d[i].name;
			return -ENOSYS;
		}
	}
	return 0;
}

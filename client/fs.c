/*
 * fs.c - FUSE low-level operations (see fs.h): the session, the operation
 * table, and what every handler shares (fs_int.h, which also says how a
 * handler is shaped and which file holds which).
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include "ccache.h"
#include "dircache.h"
#include "fs_int.h"
#include "fuseio.h"
#include "../lib/clock.h"
#include "inode.h"
#include "notify.h"
#include "wback.h"
#include "../lib/debug.h"
#include "../lib/log.h"

/* st_blksize reported to applications: stdio and cp size their buffers by
 * it, and every write is a round trip in v0. */
#define FS_BLKSIZE        (128u * 1024u)
/* The kernel's limit of background requests (readahead, releases) and
 * where it starts to throttle them; its defaults are 12 and 9. */
#define FS_MAX_BACKGROUND       64u
#define FS_CONGESTION_THRESHOLD 48u
/* statfs(2) answers from a value at most this old, refreshed after
 * replying so that the caller never waits for the network. */
#define FS_STATFS_MAX_AGE_MS 2000

/* --- requests ----------------------------------------------------------- */

/* Runs on the libfuse thread that read the kernel's INTERRUPT (or on the
 * handler's own thread, when it registers after the INTERRUPT came), with
 * libfuse's lock on req held: it takes only the rpc's mutex. */
static void on_interrupt(fuse_req_t req, void *data)
{
	(void)req;
	rpc_interrupt(data);
}

/* Send w and wait for the reply, interruptibly when there is a req
 * (docs/LOCKING.md, "Interrupts"). No lock of ours may be held: not
 * seq_lock (no reply section open on this thread; the reply needs the rpc
 * reader, which needs seq_lock for writing), not sf_lock. The inode
 * table's lock is held only inside inode.c. */
static __thread struct rpc_intr *call_intr;
static __thread int is_shipper;

void fs_set_call_intr(struct rpc_intr *ir)
{
	call_intr = ir;
}

void fs_set_shipper(void)
{
	is_shipper = 1;
}

/* call_fids reads these requests' first member as their FID. */
#define FIRST_FID(type, member) \
	_Static_assert(offsetof(struct type, member) == 0, \
		       #type " begins with its FID")
FIRST_FID(msg_fid, fid); FIRST_FID(msg_lookup_req, dir);
FIRST_FID(msg_setattr_req, fid); FIRST_FID(msg_create_req, dir);
FIRST_FID(msg_symlink_req, dir); FIRST_FID(msg_remove_req, dir);
FIRST_FID(msg_readdir_req, dir); FIRST_FID(msg_read_req, fid);
FIRST_FID(msg_write_req, fid); FIRST_FID(msg_fsync_req, fid);
FIRST_FID(msg_setxattr_req, fid); FIRST_FID(msg_getxattr_req, fid);
FIRST_FID(msg_listxattr_req, fid); FIRST_FID(msg_removexattr_req, fid);
FIRST_FID(msg_fallocate_req, fid); FIRST_FID(msg_bulkstat_req, dir);
FIRST_FID(msg_wtoken_req, fid); FIRST_FID(msg_lock_req, fid);
FIRST_FID(msg_writeattr_req, fid); FIRST_FID(msg_lkreturn_req, fid);

/*
 * What a request names, for wb_barrier: it must not reach the server
 * before the creates and removes the journal holds for those objects and
 * in those directories. Returns how many FIDs went to out (at most 2), 0
 * for a request that names none (or only gives back), or -1 for one that
 * may name anything (every change the journal holds goes first).
 */
static int call_fids(uint16_t op, const void *reqm,
		     const struct cairn_fid **out)
{
	switch (op) {
	case OP_PING: case OP_STATFS: case OP_STATUS: case OP_FIDS:
	case OP_WRETURN: case OP_HELLO:
		return 0;
	case OP_LINK:
		out[0] = &((const struct msg_link_req *)reqm)->fid;
		out[1] = &((const struct msg_link_req *)reqm)->dir;
		return 2;
	case OP_RENAME:
		out[0] = &((const struct msg_rename_req *)reqm)->sdir;
		out[1] = &((const struct msg_rename_req *)reqm)->ddir;
		return 2;
	case OP_GETATTR: case OP_LOOKUP: case OP_SETATTR: case OP_CREATE:
	case OP_SYMLINK: case OP_READLINK: case OP_REMOVE: case OP_READDIR:
	case OP_READ: case OP_WRITE: case OP_FSYNC: case OP_SETXATTR:
	case OP_GETXATTR: case OP_LISTXATTR: case OP_REMOVEXATTR:
	case OP_FALLOCATE: case OP_BULKSTAT: case OP_WTOKEN: case OP_LOCK:
	case OP_GETLK: case OP_REMOVES: case OP_WRITEATTR: case OP_LOCKD:
	case OP_LKRETURN: case OP_REMOVESAT:
		/* Each of these begins with the FID it is about (a
		 * directory for the namespace ones). */
		out[0] = (const struct cairn_fid *)reqm;
		return 1;
	default:
		return -1;
	}
}

/*
 * The credentials of the process a FUSE request is made for
 * (docs/PROTOCOL.md "Credentials"): uid and gid from the request, the
 * supplementary groups from /proc/PID/status, cached per process for a
 * second (a lookup storm costs one read). None (0) for requests no
 * process made: the kernel's own (pid 0: write-back of dirty pages) and
 * its threads' (the flusher's time updates); the server takes those as
 * the cache manager's own.
 */
#define CRED_CACHE 64
#define CRED_CACHE_MS 1000
static struct cred_slot {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int64_t at_ms;
	int kthread;
	uint32_t n;
	uint32_t g[CRED_MAX_GROUPS];
} cred_cache[CRED_CACHE];
static pthread_mutex_t cred_lock = PTHREAD_MUTEX_INITIALIZER;

/* Read pid's groups and kernel-thread flag into s. */
static void cred_read(struct cred_slot *s, pid_t pid)
{
	char path[64], line[4096];
	FILE *f;

	s->n = 0;
	s->kthread = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Kthread:", 8)) {
			s->kthread = atoi(line + 8) == 1;
		} else if (!strncmp(line, "Groups:", 7)) {
			char *p = line + 7, *end;

			for (;;) {
				unsigned long g = strtoul(p, &end, 10);
				if (end == p || s->n == CRED_MAX_GROUPS)
					break;
				s->g[s->n++] = (uint32_t)g;
				p = end;
			}
		}
	}
	fclose(f);
}

/* The credentials of req's process into *out: 1, or 0 when it has none
 * (see above). */
static int req_cred(fuse_req_t req, struct cred_slot *out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct cred_slot *s, copy;
	int64_t now = clock_mono_ms();

	if (!ctx || ctx->pid <= 0)
		return 0;
	s = &cred_cache[(unsigned)ctx->pid % CRED_CACHE];
	pthread_mutex_lock(&cred_lock);
	copy = *s;
	pthread_mutex_unlock(&cred_lock);
	if (copy.pid != ctx->pid || copy.uid != ctx->uid ||
	    copy.gid != ctx->gid || now - copy.at_ms > CRED_CACHE_MS) {
		/* Read without the lock: another thread may read it too. */
		copy.pid = ctx->pid;
		copy.uid = ctx->uid;
		copy.gid = ctx->gid;
		copy.at_ms = now;
		cred_read(&copy, ctx->pid);
		pthread_mutex_lock(&cred_lock);
		*s = copy;
		pthread_mutex_unlock(&cred_lock);
	}
	if (copy.kthread)
		return 0;
	*out = copy;
	return 1;
}

static void encode_cred(struct wbuf *w, const struct cred_slot *c)
{
	wire_put_u32(w, (uint32_t)c->uid);
	wire_put_u32(w, (uint32_t)c->gid);
	wire_put_u32(w, c->n);
	for (uint32_t i = 0; i < c->n; i++)
		wire_put_u32(w, c->g[i]);
}

static int put_cred(fuse_req_t req, struct wbuf *w)
{
	struct cred_slot c;

	if (!req_cred(req, &c))
		return 0;
	encode_cred(w, &c);
	return 1;
}

int fs_req_cred(fuse_req_t req, struct wbuf *w)
{
	return put_cred(req, w);
}

/*
 * Who opened a file for writing last (docs/PROTOCOL.md "Credentials"):
 * the write-back shippers take its write token with these credentials, so
 * the server grants it only to someone who may write, and the stores
 * under it need none. A direct-mapped table by vnode: a file whose slot
 * was taken since, or opened before the cache manager started, goes
 * without (the cache manager's own request).
 */
#define OPENERS 1024
static struct opener {
	uint64_t vnode;
	struct cred_slot c;
} openers[OPENERS];

void fs_note_opener(fuse_req_t req, uint64_t vnode)
{
	struct opener o = { .vnode = vnode };

	if (!req_cred(req, &o.c))
		return;
	pthread_mutex_lock(&cred_lock);
	openers[vnode % OPENERS] = o;
	pthread_mutex_unlock(&cred_lock);
}

/* The opener's credential block for vnode into w: 1, or 0 if unknown. */
static int opener_cred(uint64_t vnode, struct wbuf *w)
{
	struct opener o;

	pthread_mutex_lock(&cred_lock);
	o = openers[vnode % OPENERS];
	pthread_mutex_unlock(&cred_lock);
	if (o.vnode != vnode || !vnode)
		return 0;
	encode_cred(w, &o.c);
	return 1;
}

/* A call for req's process, or (req NULL) the cache manager's own, with
 * the credential block as (NULL: none). */
static int fs_call(fuse_req_t req, struct fs *fs, const struct wbuf *as,
		   uint16_t op, const struct wbuf *w, struct rpc_reply *rep)
{
	struct rpc_intr intr;
	struct wbuf cred;
	int rc;

	notify_assert_not_held(fs->ntf);
	LOCK_ASSERT_NOT_HELD(&fs->sf_lock);
	if (!req)
		return rpc_call_cred(fs->rpc, op, as, w, rep, call_intr);
	wbuf_init(&cred);
	rpc_intr_init(&intr, fs->rpc);
	/* Calls on_interrupt at once if req was interrupted already (also
	 * between two calls of one handler): the call then ends at once. */
	fuse_req_interrupt_func(req, on_interrupt, &intr);
	rc = rpc_call_cred(fs->rpc, op, put_cred(req, &cred) ? &cred : NULL,
			   w, rep, &intr);
	wbuf_free(&cred);
	/* Takes the same lock as the interrupt path: once this returns,
	 * on_interrupt is not running and will not run, so intr may go and
	 * req may be answered (which frees it). */
	fuse_req_interrupt_func(req, NULL, NULL);
	return rc;
}

/* The object a change names by FID, whose new status its reply may not
 * give back to every place that caches it (NULL: none such). */
static const struct cairn_fid *changed_fid(uint16_t op, const void *reqm)
{
	switch (op) {
	case OP_SETATTR:
		return &((const struct msg_setattr_req *)reqm)->fid;
	case OP_WRITE:
		return &((const struct msg_write_req *)reqm)->fid;
	case OP_WRITEATTR:
		return &((const struct msg_writeattr_req *)reqm)->fid;
	case OP_FALLOCATE:
		return &((const struct msg_fallocate_req *)reqm)->fid;
	case OP_SETXATTR:
		return &((const struct msg_setxattr_req *)reqm)->fid;
	case OP_REMOVEXATTR:
		return &((const struct msg_removexattr_req *)reqm)->fid;
	case OP_LINK:
		return &((const struct msg_link_req *)reqm)->fid;
	}
	return NULL;
}

/*
 * Whether a change that failed may still have happened on the server: an
 * interrupt or the connection failed (rpc.h) after it may have been
 * received. A status from the server means nothing changed (a store
 * transaction is all or nothing).
 */
static int outcome_unknown(int rc)
{
	return rc == -EINTR || rc == -EIO || rc == -ESHUTDOWN ||
	       rc == -ENOTCONN || rc == -ETIMEDOUT;
}

/* Forget what the caches hold of entry (dir, name) and of dir. */
static void forget_entry(struct fs *fs, const struct cairn_fid *dir,
			 const struct msg_str *name)
{
	int64_t ino = itab_entry(fs->itab, dir->vnode, name->p, name->len);

	if (ino > 0)
		itab_attr_stale(fs->itab, (uint64_t)ino);
	dcache_stale_name(fs->dc, dir->vnode, name->p, name->len);
	dcache_break(fs->dc, dir->vnode);
	itab_attr_stale(fs->itab, dir->vnode);
}

/* A change of directories by name whose outcome is unknown: their
 * listings and attributes, and the objects named, are no longer known. */
static void forget_dirs(struct fs *fs, uint16_t op, const void *reqm)
{
	switch (op) {
	case OP_CREATE: {
		const struct msg_create_req *q = reqm;

		forget_entry(fs, &q->dir, &q->name);
		break;
	}
	case OP_SYMLINK: {
		const struct msg_symlink_req *q = reqm;

		forget_entry(fs, &q->dir, &q->name);
		break;
	}
	case OP_LINK: {
		const struct msg_link_req *q = reqm;

		forget_entry(fs, &q->dir, &q->name);
		break;
	}
	case OP_REMOVE: {
		const struct msg_remove_req *q = reqm;

		forget_entry(fs, &q->dir, &q->name);
		break;
	}
	case OP_REMOVES:
	case OP_REMOVESAT: {
		const struct msg_removes_req *q = reqm;

		for (uint32_t i = 0; q->ents && i < q->count; i++)
			forget_entry(fs, &q->dir, &q->ents[i].name);
		break;
	}
	case OP_RENAME: {
		const struct msg_rename_req *q = reqm;

		forget_entry(fs, &q->sdir, &q->sname);
		forget_entry(fs, &q->ddir, &q->dname);
		break;
	}
	}
}

/*
 * Our change (rc its outcome) to an object: what the caches hold of its
 * status is old. On success the directory cache's entries become stale
 * (a handler that gets the new status follows them again, inside its
 * reply section), and the inode table's attributes too when the reply
 * does not carry them (xattrs change ctime). When the outcome is unknown
 * (interrupted, connection lost), nothing the change touched is known:
 * the object's attributes, and the listings and entries of the
 * directories it named.
 */
static void note_change(struct fs *fs, uint16_t op, const void *reqm, int rc)
{
	const struct cairn_fid *fid = changed_fid(op, reqm);
	int unknown = rc && outcome_unknown(rc);

	if (rc && !unknown)
		return;
	if (fid) {
		dcache_stale(fs->dc, fid->vnode);
		if (unknown || op == OP_SETXATTR || op == OP_REMOVEXATTR)
			itab_attr_stale(fs->itab, fid->vnode);
	}
	if (unknown)
		forget_dirs(fs, op, reqm);
}

static int fs_rpc_as(fuse_req_t req, struct fs *fs, const struct wbuf *as,
		     uint16_t op, const void *reqm, void *repm,
		     struct rpc_reply *keep)
{
	struct rpc_reply rep = { 0 };
	union msg_any unused;
	const char *why = "";
	struct wbuf w;
	int rc, moves;

	if (keep)
		*keep = rep;
	if (!is_shipper && fs->wbk) {
		const struct cairn_fid *fids[2];
		int n = call_fids(op, reqm, fids);

		if (op == OP_ORPHAN_DROP || op == OP_ATIME)
			wb_barrier_list(fs->wbk,
				((const struct msg_orphan_drop_req *)reqm)->fids,
				((const struct msg_orphan_drop_req *)reqm)->count);
		else if (n)
			wb_barrier(fs->wbk, n < 0 ? NULL : fids, n < 0 ? 0 : n);
	}
	wbuf_init(&w);
	msg_encode(op, 0, &w, reqm);
	/* A change of a file outside the journal moves the journal's
	 * numbering (rename, unlink: fs_name.c). */
	moves = !is_shipper && fs->wbk &&
		(op == OP_SETATTR || op == OP_WRITE || op == OP_WRITEATTR ||
		 op == OP_FALLOCATE ||
		 op == OP_SETXATTR || op == OP_REMOVEXATTR || op == OP_LINK) &&
		wb_move_begin(fs->wbk, (const struct cairn_fid *)reqm);
	rc = w.err ? w.err : fs_call(req, fs, as, op, &w, &rep);
	wbuf_free(&w);
	if (moves)
		wb_move_end(fs->wbk, (const struct cairn_fid *)reqm, 1,
			    rc == 0);
	if (rc && msg_has(op, MSG_CHANGES))
		note_change(fs, op, reqm, rc);
	if (rc)
		return rc;
	if (msg_decode(op, 1, rep.buf, rep.len, repm ? repm : &unused,
		       &why)) {
		log_warn("%s: malformed reply from server (%s)", msg_name(op),
			 why);
		rc = -EIO;
	}
	/* A malformed reply (-EIO) to a change: done or not, unknown. */
	if (msg_has(op, MSG_CHANGES))
		note_change(fs, op, reqm, rc);
	if (!rc && keep)
		*keep = rep;
	else
		rpc_reply_free(&rep);
	return rc;
}

int fs_rpc(fuse_req_t req, struct fs *fs, uint16_t op, const void *reqm,
	   void *repm, struct rpc_reply *keep)
{
	return fs_rpc_as(req, fs, NULL, op, reqm, repm, keep);
}

int fs_rpc_opener(struct fs *fs, uint64_t vnode, uint16_t op,
		  const void *reqm, void *repm)
{
	struct wbuf cred;
	int rc;

	wbuf_init(&cred);
	rc = fs_rpc_as(NULL, fs, opener_cred(vnode, &cred) ? &cred : NULL,
		       op, reqm, repm, NULL);
	wbuf_free(&cred);
	return rc;
}

int fs_rpc_cred(struct fs *fs, const void *cred, size_t credlen,
		uint16_t op, const void *reqm, void *repm,
		struct rpc_reply *keep)
{
	struct wbuf w;
	int rc;

	wbuf_init(&w);
	if (credlen)
		wire_put_bytes(&w, cred, credlen);
	if (keep)
		*keep = (struct rpc_reply){ 0 };
	rc = w.err ? w.err : fs_rpc_as(NULL, fs, credlen ? &w : NULL, op,
				       reqm, repm, keep);
	wbuf_free(&w);
	return rc;
}

int fs_bad_reply(uint16_t op)
{
	log_warn("%s: malformed reply from server", msg_name(op));
	return -EIO;
}

/* --- replies ------------------------------------------------------------ */

/* The mount's write-back journal, for attr_to_stat (one mount per
 * process; set once before the session, by fs_set_wback). */
static struct wb *patch_wb;

static void attr_to_stat(const struct cairn_attr *in, struct stat *st)
{
	struct cairn_attr pa;
	const struct cairn_attr *a = in;

	/* A file with changes still in the journal: what the kernel gets
	 * includes them (the kernel keeps its own size and times only for
	 * an inode it has in memory). So does a directory whose attribute
	 * change is journaled (wb_dir_setattr): a listing of its parent
	 * fetched meanwhile has the server's status of it, from before. */
	if ((S_ISREG(in->mode) || S_ISDIR(in->mode)) && wb_busy(patch_wb)) {
		pa = *in;
		wb_patch(patch_wb, &pa);
		a = &pa;
	}
	memset(st, 0, sizeof(*st));
	st->st_ino = a->fid.vnode;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_blksize = FS_BLKSIZE;
	st->st_atim.tv_sec = a->atime.sec;
	st->st_atim.tv_nsec = a->atime.nsec;
	st->st_mtim.tv_sec = a->mtime.sec;
	st->st_mtim.tv_nsec = a->mtime.nsec;
	st->st_ctim.tv_sec = a->ctime.sec;
	st->st_ctim.tv_nsec = a->ctime.nsec;
}

void fs_fill_entry(struct fuse_entry_param *e, uint64_t nodeid,
		   const struct cairn_attr *a, int fresh)
{
	memset(e, 0, sizeof(*e));
	e->ino = nodeid;
	e->generation = a->fid.uniq;
	attr_to_stat(a, &e->attr);
	e->attr_timeout = fresh ? FS_CACHE_TIMEOUT : 0;
	e->entry_timeout = fresh ? FS_CACHE_TIMEOUT : 0;
}

/* Answer with attributes a, inside a reply section. */
static void send_attr(fuse_req_t req, struct fs *fs,
		      const struct cairn_attr *a, int fresh)
{
	struct stat st;

	attr_to_stat(a, &st);
	fuse_reply_attr(req, &st, fresh ? FS_CACHE_TIMEOUT : 0);
}

static void reply_attr(fuse_req_t req, struct fs *fs, uint64_t seq,
		       const struct cairn_attr *a)
{
	int fresh = notify_reply_begin(fs->ntf, seq);

	fs_take_attr(fs, a, fresh);
	send_attr(req, fs, a, fresh);
	notify_reply_end(fs->ntf);
}

void fs_take_attr(struct fs *fs, const struct cairn_attr *a, int fresh)
{
	if (S_ISREG(a->mode))
		wb_attr_seen(fs->wbk, a);
	itab_update(fs->itab, a, fresh);
	dcache_follow(fs->dc, a, fresh);
}

void fs_take_dir_attr(struct fs *fs, const struct cairn_attr *a, int current,
		      int fresh)
{
	itab_update(fs->itab, a, current);
	dcache_follow(fs->dc, a, fresh);
}

void fs_note_attrs(struct fs *fs, uint64_t seq, const struct cairn_attr *a,
		   const struct cairn_attr *b)
{
	int fresh = notify_reply_begin(fs->ntf, seq);

	if (a)
		fs_take_attr(fs, a, fresh);
	if (b)
		fs_take_attr(fs, b, fresh);
	notify_reply_end(fs->ntf);
}

/* --- session ------------------------------------------------------------ */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	static const struct {
		unsigned cap;
		int on;
	} caps[] = {
		{ FUSE_CAP_ASYNC_READ, 1 },
		{ FUSE_CAP_PARALLEL_DIROPS, 1 },
		/* With no_open, O_TRUNC must come as a SETATTR (an atomic
		 * one would be lost with the OPEN that is never sent). */
		{ FUSE_CAP_ATOMIC_O_TRUNC, 0 },
		{ FUSE_CAP_READDIRPLUS, 1 },
		/* Always plus: the entries come with attributes and promises
		 * anyway, and they spare a LOOKUP per name. */
		{ FUSE_CAP_READDIRPLUS_AUTO, 0 },
		{ FUSE_CAP_EXPORT_SUPPORT, 0 },
		/* Writes fill the page cache; the kernel sends them in
		 * large WRITEs (if fs->want_wb: below). */
		{ FUSE_CAP_WRITEBACK_CACHE, 0 },
		/* Callbacks say when data changes; mtime guesses would drop
		 * the page cache after every write of our own. */
		{ FUSE_CAP_AUTO_INVAL_DATA, 0 },
		{ FUSE_CAP_EXPLICIT_INVAL_DATA, 1 },
		/* Symlinks never change: cache their targets. */
		{ FUSE_CAP_CACHE_SYMLINKS, 1 },
		/* The kernel clears set-user-ID bits and capabilities itself
		 * (the server clears them on chown too). */
		{ FUSE_CAP_HANDLE_KILLPRIV, 0 },
		{ FUSE_CAP_SPLICE_READ, 0 },
		{ FUSE_CAP_SPLICE_WRITE, 0 },
		{ FUSE_CAP_SPLICE_MOVE, 0 },
	};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (!caps[i].on)
			conn->want &= ~caps[i].cap;
		else if (conn->capable & caps[i].cap)
			conn->want |= caps[i].cap;
	}
	/* libfuse sized its buffer for FUSE_MAX_MAX_PAGES (1 MiB on 4 KiB
	 * pages) and derives max_pages from max_write; reads follow
	 * max_pages. Never ask for more than one WRITE/READ can carry. */
	if (conn->max_write > CAIRN_MAX_IO)
		conn->max_write = CAIRN_MAX_IO;
	/* The kernel's 12/9 throttle readahead and background releases
	 * (research/cold-paths.md, 7). */
	conn->max_background = FS_MAX_BACKGROUND;
	conn->congestion_threshold = FS_CONGESTION_THRESHOLD;

	struct fs *fs = userdata;
	if (fs->want_wb && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		fs->wb = 1;
		/* Its size and times are the kernel's now: a break must make
		 * it load a file's inode afresh (client/inode.h). */
		itab_set_evict_files(fs->itab, 1);
	}
	/* Directories hold no locks (the kernel keeps theirs itself) and
	 * no per-open state here: the first OPENDIR is answered ENOSYS and
	 * the kernel sends none again, nor RELEASEDIR, and keeps its cached
	 * listings across opens (fs_dir.c says when they go). */
	fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
	/*
	 * Locks across clients need the kernel's OPEN, FLUSH and RELEASE:
	 * a close releases the process's POSIX locks only through FLUSH,
	 * an open file's flock and OFD locks only through RELEASE, and the
	 * kernel sends RELEASE only for files it sent OPEN for. With
	 * --local-locks the kernel keeps locks itself, and opening and
	 * closing need not enter the daemon: the first OPEN and FLUSH are
	 * answered ENOSYS and the kernel sends none again. See fs_file.c.
	 */
	if (fs->global_locks) {
		fs->no_open = 0;
	} else {
		conn->want &= ~(unsigned)(FUSE_CAP_POSIX_LOCKS |
					  FUSE_CAP_FLOCK_LOCKS);
		fs->no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	}
	log_info("kernel FUSE protocol %u.%u, max_write %u, max_readahead %u, "
		 "max_background %u, opens %s, directory opens %s, writes %s, "
		 "locks %s, "
		 "set-user-ID cleared by %s",
		 conn->proto_major,
		 conn->proto_minor, conn->max_write, conn->max_readahead,
		 conn->max_background,
		 fs->no_open ? "not sent (no_open)" : "sent",
		 fs->no_opendir ? "not sent (no_opendir)" : "sent",
		 fs->wb ? "cached (writeback cache)" : "sent through",
		 !fs->global_locks ? "local to this client (--local-locks)" :
		 (conn->want & FUSE_CAP_POSIX_LOCKS) ? "across clients" :
		 "NOT across clients (the kernel does not offer it)",
		 fuseio_killpriv() ? "the server (no capability check "
				     "before each write)" : "the kernel");
	pthread_mutex_lock(&fs->init_lock);
	fs->inited = 1;
	pthread_cond_broadcast(&fs->init_cond);
	pthread_mutex_unlock(&fs->init_lock);
}

int fs_wait_init(struct fs *fs, int timeout_ms)
{
	struct timespec until;
	int rc = 0;

	clock_deadline(CLOCK_MONOTONIC, timeout_ms, &until);
	pthread_mutex_lock(&fs->init_lock);
	while (!fs->inited && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&fs->init_cond, &fs->init_lock,
					    &until);
	rc = fs->inited ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&fs->init_lock);
	return rc;
}

/* --- attributes --------------------------------------------------------- */

void fs_set_wback(struct fs *fs, struct wb *w)
{
	fs->wbk = w;
	patch_wb = w;
}

int fs_wb_settle(struct fs *fs, const struct cairn_fid *fid)
{
	return wb_drain(fs->wbk, fid);
}

int fs_getattr(fuse_req_t req, struct fs *fs, const struct cairn_fid *fid,
	       struct cairn_attr *a)
{
	struct msg_fid q = { .fid = *fid };
	struct msg_attr p;
	int rc = fs_rpc(req, fs, OP_GETATTR, &q, &p, NULL);

	if (!rc)
		*a = p.attr;
	return rc;
}

/* GETATTR: from the inode table while the promise stands and the
 * attributes it holds are current, else from the server. */
static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	int cur, rc;

	/* A file with changes in the journal: while we hold its write
	 * token nobody else changes it, so the current attributes the
	 * table holds with the journal's changes applied (attr_to_stat,
	 * wb_patch: size, times, blocks estimated) are the file's. Else
	 * the server gets the journal first. A directory's is never
	 * waited for: what we hold of one made here, or changed by creates
	 * and removes answered here, is whole (the kernel asks after each,
	 * and a path walk through a directory just made must not wait). */
	if (wb_busy(fs->wbk) && itab_fid(fs->itab, ino, &fid) == 0) {
		int known = itab_attr_last(fs->itab, ino, &a, &cur) == 0 &&
			    a.fid.uniq == fid.uniq;

		if (known && cur && S_ISREG(a.mode) &&
		    wb_holds(fs->wbk, &fid)) {
			/* Read before the reply section: cached by the
			 * kernel only if no break came since. */
			int fresh = notify_reply_begin(fs->ntf, seq);

			send_attr(req, fs, &a, fresh);
			notify_reply_end(fs->ntf);
			return;
		}
		if (!(known && S_ISDIR(a.mode)) &&
		    (rc = fs_wb_settle(fs, &fid))) {
			reply_error(req, rc);
			return;
		}
	}
	notify_reply_begin(fs->ntf, seq);
	rc = itab_getattr(fs->itab, ino, &a);
	if (rc == 0)
		send_attr(req, fs, &a, 1);
	notify_reply_end(fs->ntf);
	if (rc != -EAGAIN) {
		if (rc)
			reply_error(req, rc);
		return;
	}
	if ((rc = itab_fid(fs->itab, ino, &fid)) ||
	    (rc = fs_getattr(req, fs, &fid, &a)))
		reply_error(req, rc);
	else
		reply_attr(req, fs, seq, &a);
}

static const struct {
	int fuse;
	uint32_t sa;
} setattr_bits[] = {
	{ FUSE_SET_ATTR_MODE, SA_MODE },
	{ FUSE_SET_ATTR_UID, SA_UID },
	{ FUSE_SET_ATTR_GID, SA_GID },
	{ FUSE_SET_ATTR_SIZE, SA_SIZE },
	{ FUSE_SET_ATTR_ATIME, SA_ATIME },
	{ FUSE_SET_ATTR_MTIME, SA_MTIME },
	{ FUSE_SET_ATTR_ATIME_NOW, SA_ATIME_NOW },
	{ FUSE_SET_ATTR_MTIME_NOW, SA_MTIME_NOW },
	{ FUSE_SET_ATTR_CTIME, SA_CTIME },
};

static struct cairn_time cairn_time_of(const struct timespec *ts)
{
	return (struct cairn_time){ .sec = ts->tv_sec,
				    .nsec = (uint32_t)ts->tv_nsec };
}

/* SETATTR of `valid` fields from st (fields not in valid are ignored). */
static int setattr_rpc(fuse_req_t req, struct fs *fs,
		       const struct cairn_fid *fid,
		       uint32_t valid, const struct stat *st,
		       struct cairn_attr *a)
{
	struct msg_setattr_req q = {
		.fid = *fid,
		.valid = valid,
		.mode = st->st_mode & 07777,
		.uid = st->st_uid,
		.gid = st->st_gid,
		.size = (uint64_t)st->st_size,
		.atime = cairn_time_of(&st->st_atim),
		.mtime = cairn_time_of(&st->st_mtim),
		.ctime = cairn_time_of(&st->st_ctim),
	};
	struct msg_attr p;
	int rc = fs_rpc(req, fs, OP_SETATTR, &q, &p, NULL);

	if (!rc)
		*a = p.attr;
	return rc;
}

int fs_truncate(fuse_req_t req, struct fs *fs, const struct cairn_fid *fid,
		struct cairn_attr *a)
{
	struct stat st;
	int rc;

	if ((rc = fs_wb_settle(fs, fid)))
		return rc;
	memset(&st, 0, sizeof(st));
	return setattr_rpc(req, fs, fid, SA_SIZE, &st, a);
}

/* May a chmod or explicit atime of this caller be journaled (sent later
 * without the caller's credentials)? Not root's when the server squashes
 * root: it would be refused there. The kernel checked ownership. */
static int journal_owner_ok(fuse_req_t req, struct fs *fs)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return ctx->uid != 0 || rpc_root_ok(fs->rpc);
}

/* A SETATTR that gives no mtime or the one a has. */
static int mtime_kept(const struct stat *attr, uint32_t valid,
		      const struct cairn_attr *a)
{
	return !(valid & SA_MTIME) ||
	       (attr->st_mtim.tv_sec == a->mtime.sec &&
		(uint32_t)attr->st_mtim.tv_nsec == a->mtime.nsec);
}

/*
 * Is this SETATTR (valid) only the ctime the kernel moved when we removed
 * a name of the file? Then nobody can look the file up by that name and
 * this client's kernel keeps its own: 1 and what to answer in *a, no
 * server call. Either the name was its last (itab_set_gone: rm -rf, every
 * file), or our removal is still in the journal (the file was being sent
 * when it was removed, so the table did not know its last link then; the
 * server moves the ctime when it gets the removal).
 */
static int ctime_after_removal(struct fs *fs, fuse_ino_t ino,
			       const struct stat *attr, uint32_t valid,
			       struct cairn_attr *a)
{
	struct cairn_fid fid;
	int cur;

	if (!fs->wb || !(valid & SA_CTIME) ||
	    (valid & ~(uint32_t)(SA_MTIME | SA_CTIME | SA_KEEPTIME)))
		return 0;
	if (itab_gone(fs->itab, ino, a) == 0 && mtime_kept(attr, valid, a))
		goto kept;
	if (itab_fid(fs->itab, ino, &fid) ||
	    itab_attr_last(fs->itab, ino, a, &cur) ||
	    a->fid.uniq != fid.uniq || !S_ISREG(a->mode) ||
	    !wb_removal_last(fs->wbk, &fid, a) || !mtime_kept(attr, valid, a))
		return 0;
	a->nlink = a->nlink ? a->nlink - 1 : 0;
kept:
	a->ctime = cairn_time_of(&attr->st_ctim);
	return 1;
}

/* Apply SETATTR valid, with attr's size, permission bits and owner and
 * the times given, to a. */
static void attr_set(struct cairn_attr *a, uint32_t valid,
		     const struct stat *attr, const struct cairn_time *mt,
		     const struct cairn_time *ct, const struct cairn_time *at)
{
	if (valid & SA_SIZE)
		a->size = (uint64_t)attr->st_size;
	if (valid & SA_MTIME)
		a->mtime = *mt;
	if (valid & SA_CTIME)
		a->ctime = *ct;
	if (valid & SA_ATIME)
		a->atime = *at;
	if (valid & SA_MODE)
		a->mode = (a->mode & S_IFMT) | ((uint32_t)attr->st_mode & 07777);
	if (valid & SA_UID)
		a->uid = (uint32_t)attr->st_uid;
	if (valid & SA_GID)
		a->gid = (uint32_t)attr->st_gid;
}

/*
 * A directory's permission bits, owner and explicit times, set while we
 * hold its token (cp -a, tar and rsync set them once its entries are
 * made): journaled, and sent after the creates and removes in it answered
 * before (wb_dir_setattr), not waited for. Not set-id bits (nor a chown
 * of a directory that has one), and not for root squashed by the server:
 * the server decides those. 0 when req was answered; else the server
 * does it.
 */
static int dir_setattr_local(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			     const struct cairn_fid *fid,
			     const struct stat *attr, uint32_t valid,
			     uint64_t seq)
{
	struct cairn_time mt, ct, at;
	struct cairn_attr d;
	struct timespec now;
	int cur;

	valid &= ~(uint32_t)SA_KEEPTIME;
	if (!valid || (valid & ~(uint32_t)(SA_MODE | SA_UID | SA_GID |
					   SA_ATIME | SA_MTIME | SA_CTIME)) ||
	    itab_attr_last(fs->itab, ino, &d, &cur) || !cur ||
	    !S_ISDIR(d.mode) || d.fid.uniq != fid->uniq ||
	    !journal_owner_ok(req, fs) ||
	    ((valid & SA_MODE) && (attr->st_mode & (S_ISUID | S_ISGID))) ||
	    ((valid & (SA_UID | SA_GID)) && (d.mode & (S_ISUID | S_ISGID))))
		return -EAGAIN;
	/* The kernel sends no ctime for a directory: ours, as the server
	 * would stamp it. */
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	ct = (valid & SA_CTIME) ? cairn_time_of(&attr->st_ctim)
				: cairn_time_of(&now);
	mt = cairn_time_of(&attr->st_mtim);
	at = cairn_time_of(&attr->st_atim);
	if (wb_dir_setattr(fs->wbk, fid, &d.dv, valid | SA_CTIME, &mt, &ct,
			   &at, (uint32_t)attr->st_mode,
			   (valid & SA_UID) ? (uint32_t)attr->st_uid : d.uid,
			   (valid & SA_GID) ? (uint32_t)attr->st_gid : d.gid))
		return -EAGAIN;
	attr_set(&d, valid | SA_CTIME, attr, &mt, &ct, &at);
	/* One version on, and only by us: the listing stays. */
	dcache_touched(fs->dc, fid->vnode, &d);
	reply_attr(req, fs, seq, &d);
	return 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a, before;
	pthread_mutex_t *wl;
	uint32_t valid = 0;
	int rc, known, current;

	for (size_t i = 0; i < sizeof(setattr_bits) / sizeof(setattr_bits[0]);
	     i++)
		if (to_set & setattr_bits[i].fuse)
			valid |= setattr_bits[i].sa;
	/* The kernel sends ATIME with ATIME_NOW; "now" is the server's. */
	if (valid & SA_ATIME_NOW)
		valid &= ~(uint32_t)SA_ATIME;
	if (valid & SA_MTIME_NOW)
		valid &= ~(uint32_t)SA_MTIME;
	/* Size and times the kernel keeps per inode: another incarnation
	 * of the file would not follow. */
	if (valid & (SA_SIZE | SA_MTIME | SA_MTIME_NOW | SA_CTIME))
		notify_stale_others(fs->ntf, ino);
	/* With the writeback cache the kernel keeps a file's mtime and
	 * ctime, and sends them when they are to change. */
	if (fs->wb)
		valid |= SA_KEEPTIME;
	/* Reads pinned to a version see this client's own change. */
	if (valid & SA_SIZE)
		itab_wgen_bump(fs->itab, ino);
	if (ctime_after_removal(fs, ino, attr, valid, &a)) {
		struct stat st;

		attr_to_stat(&a, &st);
		fuse_reply_attr(req, &st, 0);
		return;
	}
	if ((rc = itab_fid(fs->itab, ino, &fid))) {
		reply_error(req, rc);
		return;
	}
	/* After the file's WRITEs in progress (fs_op_write), so that
	 * `before` is the version this change starts from. */
	wl = &fs->wlock[fid.vnode % FS_WLOCKS];
	pthread_mutex_lock(wl);
	/* Size, times, permission bits and owner of a regular file go to
	 * the write-back journal (the kernel's O_TRUNC, ftruncate, its times
	 * after writes; cp -a's, tar's and rsync's utimensat, chmod and
	 * chown), unless the kernel wants set-user-ID cleared by a truncate
	 * (fuseio.h: the server does it with the caller's credentials),
	 * set-id bits are set or, for a chown, already there (the server
	 * decides, and clears them: the kernel asks that of every chown, a
	 * no-op without them), or a chmod, chown or utimensat comes from
	 * root squashed by the server (which would refuse it):
	 * answered with what the table holds, the change applied
	 * (attr_to_stat); for a short while only if that is not known
	 * current (our own WRITE's reply may have crossed a break). */
	if (fs_wb_on(fs) &&
	    (!fuseio_req_kill() || !(valid & SA_SIZE)) &&
	    itab_attr_last(fs->itab, ino, &a, &current) == 0 &&
	    S_ISREG(a.mode) && a.fid.uniq == fid.uniq &&
	    (!(valid & (SA_MODE | SA_ATIME | SA_UID | SA_GID)) ||
	     journal_owner_ok(req, fs)) &&
	    (!(valid & SA_MODE) ||
	     !(attr->st_mode & (S_ISUID | S_ISGID))) &&
	    (!(valid & (SA_UID | SA_GID)) ||
	     !(a.mode & (S_ISUID | S_ISGID)))) {
		struct cairn_time mt = cairn_time_of(&attr->st_mtim);
		struct cairn_time ct = cairn_time_of(&attr->st_ctim);
		struct cairn_time at = cairn_time_of(&attr->st_atim);

		rc = wb_setattr(fs->wbk, &fid, valid, (uint64_t)attr->st_size,
				&mt, &ct, &at, (uint32_t)attr->st_mode,
				(uint32_t)attr->st_uid, (uint32_t)attr->st_gid,
				!fi && itab_wopen(fs->itab, ino, 0) > 0);
		if (rc == 0) {
			struct stat st;

			pthread_mutex_unlock(wl);
			/* The change itself, not only through wb_patch: a
			 * shipper may have sent it already, and the kernel
			 * takes a truncate's size from this reply. */
			attr_set(&a, valid, attr, &mt, &ct, &at);
			attr_to_stat(&a, &st);
			fuse_reply_attr(req, &st, current ? FS_CACHE_TIMEOUT : 0);
			return;
		}
		if (wb_gave_up(rc)) {
			pthread_mutex_unlock(wl);
			reply_error(req, rc);
			return;
		}
	}
	if (fs_wb_on(fs) &&
	    dir_setattr_local(req, fs, ino, &fid, attr, valid, seq) == 0) {
		pthread_mutex_unlock(wl);
		return;
	}
	/* Anything else waits for what the journal holds of the file (of
	 * a directory, what was made and removed in it goes first too: the
	 * SETATTR waits for it, wb_barrier). */
	if ((rc = fs_wb_settle(fs, &fid))) {
		pthread_mutex_unlock(wl);
		reply_error(req, rc);
		return;
	}
	known = fs->cc && itab_getattr(fs->itab, ino, &before) == 0 &&
		before.fid.uniq == fid.uniq;
	if ((rc = setattr_rpc(req, fs, &fid, valid, attr, &a))) {
		pthread_mutex_unlock(wl);
		reply_error(req, rc);
		return;
	}
	/* The data version moved but not the data (a chmod, chown, cp -p's
	 * utimens): the chunks we cached stay good. Before the reply, as in
	 * fs_op_write, so that the file's next change finds it. A size
	 * change is left to a fetch at the new version. */
	if (known && a.dv == before.dv + 1 && a.size == before.size)
		ccache_write(fs->cc, &fid, before.dv, a.dv, before.size,
			     a.size, a.size, NULL, 0);
	/* A directory's listing stays if this was its only change since. */
	if (S_ISDIR(a.mode))
		dcache_touched(fs->dc, fid.vnode, &a);
	pthread_mutex_unlock(wl);
	reply_attr(req, fs, seq, &a);
}

/* --- statfs ------------------------------------------------------------- */

static int statfs_rpc(fuse_req_t req, struct fs *fs,
		      struct cairn_statfs *sf)
{
	struct msg_empty q = { 0 };
	struct msg_statfs_rep p;
	int rc = fs_rpc(req, fs, OP_STATFS, &q, &p, NULL);

	if (!rc)
		*sf = p.sf;
	return rc;
}

static int64_t ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 +
	       (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* req: the statfs waiting for the answer, or NULL. */
static int refresh_statfs(fuse_req_t req, struct fs *fs)
{
	struct cairn_statfs sf;
	int rc = statfs_rpc(req, fs, &sf);

	pthread_mutex_lock(&fs->sf_lock);
	if (!rc) {
		fs->sf = sf;
		fs->sf_valid = 1;
		clock_gettime(CLOCK_MONOTONIC, &fs->sf_when);
	}
	fs->sf_refreshing = 0;
	pthread_mutex_unlock(&fs->sf_lock);
	return rc;
}

int fs_refresh_statfs(struct fs *fs)
{
	return refresh_statfs(NULL, fs);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	struct cairn_statfs sf;
	struct statvfs sv;
	int valid, refresh = 0, rc;

	pthread_mutex_lock(&fs->sf_lock);
	valid = fs->sf_valid;
	sf = fs->sf;
	if (valid && !fs->sf_refreshing &&
	    ms_since(&fs->sf_when) > FS_STATFS_MAX_AGE_MS) {
		fs->sf_refreshing = 1;
		refresh = 1;
	}
	pthread_mutex_unlock(&fs->sf_lock);
	if (!valid) {
		/* Only before the first answer ever. */
		if ((rc = refresh_statfs(req, fs))) {
			reply_error(req, rc);
			return;
		}
		pthread_mutex_lock(&fs->sf_lock);
		sf = fs->sf;
		pthread_mutex_unlock(&fs->sf_lock);
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sf.bsize;
	sv.f_frsize = sf.bsize;
	sv.f_blocks = sf.blocks;
	sv.f_bfree = sf.bfree;
	sv.f_bavail = sf.bavail;
	sv.f_files = sf.files;
	sv.f_ffree = sf.ffree;
	sv.f_favail = sf.ffree;
	sv.f_namemax = sf.namemax;
	fuse_reply_statfs(req, &sv);
	/* The caller has its answer; this worker refreshes for the next. */
	if (refresh)
		fs_refresh_statfs(fs);
}

/* --- table -------------------------------------------------------------- */

static const struct fuse_lowlevel_ops cairn_ops = {
	.init = op_init,
	.lookup = fs_op_lookup,
	.forget = fs_op_forget,
	.forget_multi = fs_op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = fs_op_readlink,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_rmdir,
	.symlink = fs_op_symlink,
	.rename = fs_op_rename,
	.link = fs_op_link,
	.open = fs_op_open,
	.read = fs_op_read,
	.write = fs_op_write,
	.release = fs_op_release,
	.fsync = fs_op_fsync,
	.opendir = fs_op_opendir,
	.readdir = fs_op_readdir,
	.readdirplus = fs_op_readdirplus,
	.releasedir = fs_op_releasedir,
	.fsyncdir = fs_op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = fs_op_setxattr,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.removexattr = fs_op_removexattr,
	.create = fs_op_create,
	.fallocate = fs_op_fallocate,
	.flush = fs_op_flush,
	.getlk = fs_op_getlk,
	.setlk = fs_op_setlk,
	.flock = fs_op_flock,
};

const struct fuse_lowlevel_ops *fs_ops(void)
{
	return &cairn_ops;
}

int fs_create(struct rpc *r, struct itab *t, struct notify *n,
	      struct fs **out)
{
	struct fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	if (dcache_create(&fs->dc)) {
		free(fs);
		return -ENOMEM;
	}
	fs->rpc = r;
	fs->itab = t;
	fs->ntf = n;
	notify_set_dircache(n, fs->dc);
	pthread_mutex_init(&fs->sf_lock, NULL);
	for (size_t i = 0; i < FS_WLOCKS; i++)
		pthread_mutex_init(&fs->wlock[i], NULL);
	pthread_mutex_init(&fs->init_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->init_cond, &ca);
	pthread_mutex_init(&fs->orph.lock, NULL);
	pthread_cond_init(&fs->orph.cond, &ca);
	pthread_mutex_init(&fs->ahead.lock, NULL);
	pthread_cond_init(&fs->ahead.cond, NULL);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&fs->pin_lock, NULL);
	pthread_mutex_init(&fs->fetching.lock, NULL);
	pthread_cond_init(&fs->fetching.done, NULL);
	if (getenv("CAIRN_TEST_LIST_PAUSE_US"))
		fs->test_list_pause_us =
			(unsigned)atoi(getenv("CAIRN_TEST_LIST_PAUSE_US"));
	/* After fs->orph is ready: pushes may arrive already. */
	notify_set_orphan_hook(n, fs_orphan_hook, fs);
	*out = fs;
	return 0;
}

void fs_print_dir_stats(struct fs *fs, FILE *f)
{
	struct dcache_stats ds;

	dcache_get_stats(fs->dc, &ds);
	fprintf(f, "dir.listings %zu\n", ds.listings);
	fprintf(f, "dir.entries %zu\n", ds.entries);
	fprintf(f, "dir.lookup_hits %llu\n", (unsigned long long)ds.hits);
	fprintf(f, "dir.lookup_neg_hits %llu\n",
		(unsigned long long)ds.neg_hits);
	fprintf(f, "dir.fetched %llu\n", (unsigned long long)ds.installs);
	fprintf(f, "dir.edited %llu\n", (unsigned long long)ds.edits);
	fprintf(f, "dir.dropped %llu\n", (unsigned long long)ds.drops);
}

void fs_destroy(struct fs *fs)
{
	struct dcache_stats ds;

	if (!fs)
		return;
	/* The kernel sends no FORGET after unmount: what is left is what it
	 * still held (test_dircache checks lookup counts with this). */
	if (fs->itab)
		log_info("inode table at exit: %zu inodes",
			 itab_count(fs->itab));
	dcache_get_stats(fs->dc, &ds);
	log_info("directory cache: %llu listings fetched, %llu edited, %llu "
		 "dropped; lookups answered %llu found, %llu not found",
		 (unsigned long long)ds.installs, (unsigned long long)ds.edits,
		 (unsigned long long)ds.drops, (unsigned long long)ds.hits,
		 (unsigned long long)ds.neg_hits);
	pthread_mutex_destroy(&fs->sf_lock);
	for (size_t i = 0; i < FS_WLOCKS; i++)
		pthread_mutex_destroy(&fs->wlock[i]);
	pthread_mutex_destroy(&fs->init_lock);
	pthread_cond_destroy(&fs->init_cond);
	pthread_mutex_destroy(&fs->orph.lock);
	pthread_cond_destroy(&fs->orph.cond);
	pthread_mutex_destroy(&fs->ahead.lock);
	pthread_cond_destroy(&fs->ahead.cond);
	fs_pins_free(fs);
	pthread_mutex_destroy(&fs->pin_lock);
	pthread_mutex_destroy(&fs->fetching.lock);
	pthread_cond_destroy(&fs->fetching.done);
	free(fs->orph.q);
	dcache_destroy(fs->dc);
	free(fs);
}

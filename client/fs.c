/*
 * fs.c - FUSE low-level operations (see fs.h).
 *
 * Shape of every handler: snapshot the break sequence (notify_seq), build
 * the request, rpc_call, decode, then reply to the kernel inside
 * notify_reply_begin/end. Inside that section `fresh` says whether the
 * promise carried by the reply still stands; only then does the kernel get
 * long timeouts (entries, attributes, negative entries) and does the inode
 * table record the promise. The kernel's lookup count changes only on
 * replies that carry an entry, so those also record it in the inode table,
 * and take it back if the reply did not reach the kernel.
 *
 * Errors from the server are negative errnos; they become FUSE errors only
 * here, through reply_error().
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include "fs.h"
#include "inode.h"
#include "notify.h"
#include "rpc.h"
#include "../lib/log.h"
#include "../lib/wire.h"

/* st_blksize reported to applications: stdio and cp size their buffers by
 * it, and every write is a round trip in v0. */
#define FS_BLKSIZE        (128u * 1024u)
/* statfs(2) answers from a value at most this old, refreshed after
 * replying so that the caller never waits for the network. */
#define FS_STATFS_MAX_AGE_MS 2000

struct fs {
	struct rpc *rpc;
	struct itab *itab;
	struct notify *ntf;

	pthread_mutex_t sf_lock;
	struct cairn_statfs sf;      /* guarded by sf_lock */
	struct timespec sf_when;     /* guarded by sf_lock; CLOCK_MONOTONIC */
	int sf_valid;                /* guarded by sf_lock */
	int sf_refreshing;           /* guarded by sf_lock */
};

static struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Answer with 0 or the errno of a negative return; anything odd is EIO. */
static void reply_error(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc == 0 ? 0 : (rc < 0 && rc > -4096) ? -rc : EIO);
}

static int check_name(const char *name, size_t *len)
{
	*len = strlen(name);
	return *len > CAIRN_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* --- requests ----------------------------------------------------------- */

/* Send w (freed here) and wait for the reply. */
static int fs_call(struct fs *fs, uint16_t op, struct wbuf *w,
		   struct rpc_reply *rep)
{
	int rc = w->err;

	if (!rc)
		rc = rpc_call(fs->rpc, op, w, rep);
	wbuf_free(w);
	return rc;
}

static int bad_reply(uint16_t op)
{
	log_warn("%s: malformed reply from server", proto_op_name(op));
	return -EIO;
}

/* A request whose reply is `n` attrs (n = 0..2) and nothing else. */
static int call_attrs(struct fs *fs, uint16_t op, struct wbuf *w, int n,
		      struct cairn_attr *a, struct cairn_attr *b)
{
	struct rpc_reply rep = { 0 };
	struct rbuf r;
	int rc = fs_call(fs, op, w, &rep);

	if (rc)
		return rc;
	rbuf_init(&r, rep.buf, rep.len);
	if (n >= 1)
		wire_get_attr(&r, a);
	if (n >= 2)
		wire_get_attr(&r, b);
	rc = wire_get_end(&r) ? bad_reply(op) : 0;
	rpc_reply_free(&rep);
	return rc;
}

static void put_fid_of(struct wbuf *w, const struct cairn_fid *fid)
{
	wbuf_init(w);
	wire_put_fid(w, fid);
}

/* --- open files and silly renames --------------------------------------- */

/* Drop one open of ino; the last one removes a pending silly name. */
static void release_open(struct fs *fs, uint64_t ino)
{
	char name[CAIRN_NAME_MAX + 1];
	struct cairn_fid dfid;
	uint64_t parent;
	struct wbuf w;
	int rc;

	if (!itab_open_dec(fs->itab, ino, &parent, name, sizeof(name)))
		return;
	if ((rc = itab_fid(fs->itab, parent, &dfid)) == 0) {
		put_fid_of(&w, &dfid);
		wire_put_str(&w, name, strlen(name));
		wire_put_u32(&w, 0);
		rc = fs_call(fs, OP_REMOVE, &w, NULL);
	}
	if (rc)
		log_warn("cannot remove %s (unlinked while open): %s", name,
			 strerror(-rc));
}

/* --- replies ------------------------------------------------------------ */

static void attr_to_stat(const struct cairn_attr *a, struct stat *st)
{
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

static void fill_entry(struct fuse_entry_param *e, const struct cairn_attr *a,
		       int fresh)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->fid.vnode;
	e->generation = a->fid.uniq;
	attr_to_stat(a, &e->attr);
	e->attr_timeout = fresh ? FS_CACHE_TIMEOUT : 0;
	e->entry_timeout = fresh ? FS_CACHE_TIMEOUT : 0;
}

/*
 * Hand the kernel entry `name` of `parent` for object `a` (with the
 * directory's new attributes `dir` when the request changed it). With fi,
 * this is a create reply and fi is answered too. Returns after replying.
 */
static void reply_entry(fuse_req_t req, struct fs *fs, uint64_t seq,
			fuse_ino_t parent, const char *name, size_t len,
			const struct cairn_attr *a, const struct cairn_attr *dir,
			struct fuse_file_info *fi, int created)
{
	struct fuse_entry_param e;
	int fresh = notify_reply_begin(fs->ntf, seq);
	int rc;

	if (dir)
		itab_update(fs->itab, dir, fresh);
	rc = itab_add_entry(fs->itab, parent, name, len, a, fresh);
	if (rc < 0) {
		notify_reply_end(fs->ntf);
		reply_error(req, rc);
		return;
	}
	fill_entry(&e, a, fresh);
	/* The name is only as current as the directory's promise. */
	if (!itab_promised(fs->itab, parent))
		e.entry_timeout = 0;
	if (fi) {
		/* A new file's page cache is empty, so it is valid at this
		 * version; an existing one opened through create is not. */
		if (fresh)
			itab_set_cached(fs->itab, e.ino, a->dv);
		fi->keep_cache = created && fresh;
		itab_open_inc(fs->itab, e.ino);
		rc = fuse_reply_create(req, &e, fi);
		if (rc < 0)
			release_open(fs, e.ino);
	} else {
		rc = fuse_reply_entry(req, &e);
	}
	/* The request was interrupted: the kernel took no reference. */
	if (rc < 0)
		itab_forget(fs->itab, e.ino, 1);
	notify_reply_end(fs->ntf);
}

/* LOOKUP said ENOENT: a negative entry, cached while the promise on the
 * directory stands (a create breaks it). */
static void reply_negative(fuse_req_t req, struct fs *fs, uint64_t seq,
			   fuse_ino_t parent, const char *name, size_t len)
{
	struct fuse_entry_param e;
	int fresh = notify_reply_begin(fs->ntf, seq);

	/* A negative LOOKUP promises the directory. */
	if (fresh)
		itab_set_promised(fs->itab, parent);
	if (fresh && itab_add_negative(fs->itab, parent, name, len) == 0) {
		memset(&e, 0, sizeof(e));
		e.ino = 0;
		e.entry_timeout = FS_CACHE_TIMEOUT;
		fuse_reply_entry(req, &e);
	} else {
		fuse_reply_err(req, ENOENT);
	}
	notify_reply_end(fs->ntf);
}

static void reply_attr(fuse_req_t req, struct fs *fs, uint64_t seq,
		       const struct cairn_attr *a)
{
	struct stat st;
	int fresh = notify_reply_begin(fs->ntf, seq);

	itab_update(fs->itab, a, fresh);
	attr_to_stat(a, &st);
	/* Unlinked while open here: the hidden name is not a link to show. */
	if (st.st_nlink > 0 && itab_silly(fs->itab, a->fid.vnode))
		st.st_nlink--;
	fuse_reply_attr(req, &st, fresh ? FS_CACHE_TIMEOUT : 0);
	notify_reply_end(fs->ntf);
}

/* Record attributes from a reply that answers the kernel with no attr. */
static void note_attrs(struct fs *fs, uint64_t seq, const struct cairn_attr *a,
		       const struct cairn_attr *b)
{
	int fresh = notify_reply_begin(fs->ntf, seq);

	if (a)
		itab_update(fs->itab, a, fresh);
	if (b)
		itab_update(fs->itab, b, fresh);
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
		{ FUSE_CAP_ATOMIC_O_TRUNC, 1 },
		{ FUSE_CAP_READDIRPLUS, 1 },
		/* Always plus: the entries come with attributes and promises
		 * anyway, and they spare a LOOKUP per name. */
		{ FUSE_CAP_READDIRPLUS_AUTO, 0 },
		{ FUSE_CAP_EXPORT_SUPPORT, 0 },
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
	log_info("kernel FUSE protocol %u.%u, max_write %u, max_readahead %u",
		 conn->proto_major, conn->proto_minor, conn->max_write,
		 conn->max_readahead);
}

/* --- names -------------------------------------------------------------- */

static int getattr_rpc(struct fs *fs, fuse_ino_t ino, struct cairn_attr *a);

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid dir;
	struct cairn_attr a;
	struct wbuf w;
	size_t len;
	int rc;

	if ((rc = check_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, parent, &dir)))
		goto out;
	/* The entry is covered by the promise on the directory, which a
	 * positive LOOKUP does not register: take it first if it is gone, so
	 * that a change between the two requests is broken to us. */
	if (!itab_promised(fs->itab, parent)) {
		struct cairn_attr da;

		if ((rc = getattr_rpc(fs, parent, &da)))
			goto out;
		note_attrs(fs, seq, &da, NULL);
	}
	put_fid_of(&w, &dir);
	wire_put_str(&w, name, len);
	rc = call_attrs(fs, OP_LOOKUP, &w, 1, &a, NULL);
	if (rc == -ENOENT) {
		reply_negative(req, fs, seq, parent, name, len);
		return;
	}
	if (rc)
		goto out;
	reply_entry(req, fs, seq, parent, name, len, &a, NULL, NULL, 0);
	return;
out:
	reply_error(req, rc);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	itab_forget(req_fs(req)->itab, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++)
		itab_forget(fs->itab, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* --- attributes --------------------------------------------------------- */

static int getattr_rpc(struct fs *fs, fuse_ino_t ino, struct cairn_attr *a)
{
	struct cairn_fid fid;
	struct wbuf w;
	int rc = itab_fid(fs->itab, ino, &fid);

	if (rc)
		return rc;
	put_fid_of(&w, &fid);
	return call_attrs(fs, OP_GETATTR, &w, 1, a, NULL);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr a;
	int rc = getattr_rpc(fs, ino, &a);

	if (rc)
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

static void put_timespec(struct wbuf *w, const struct timespec *ts)
{
	struct cairn_time t = { .sec = ts->tv_sec, .nsec = (uint32_t)ts->tv_nsec };

	wire_put_time(w, &t);
}

/* SETATTR of `valid` fields from st (fields not in valid are ignored). */
static int setattr_rpc(struct fs *fs, const struct cairn_fid *fid,
		       uint32_t valid, const struct stat *st,
		       struct cairn_attr *a)
{
	struct wbuf w;

	put_fid_of(&w, fid);
	wire_put_u32(&w, valid);
	wire_put_u32(&w, st->st_mode & 07777);
	wire_put_u32(&w, st->st_uid);
	wire_put_u32(&w, st->st_gid);
	wire_put_u64(&w, (uint64_t)st->st_size);
	put_timespec(&w, &st->st_atim);
	put_timespec(&w, &st->st_mtim);
	put_timespec(&w, &st->st_ctim);
	return call_attrs(fs, OP_SETATTR, &w, 1, a, NULL);
}

static int truncate_rpc(struct fs *fs, const struct cairn_fid *fid,
			struct cairn_attr *a)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	return setattr_rpc(fs, fid, SA_SIZE, &st, a);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	uint32_t valid = 0;
	int rc;

	for (size_t i = 0; i < sizeof(setattr_bits) / sizeof(setattr_bits[0]);
	     i++)
		if (to_set & setattr_bits[i].fuse)
			valid |= setattr_bits[i].sa;
	/* The kernel sends ATIME with ATIME_NOW; "now" is the server's. */
	if (valid & SA_ATIME_NOW)
		valid &= ~(uint32_t)SA_ATIME;
	if (valid & SA_MTIME_NOW)
		valid &= ~(uint32_t)SA_MTIME;
	if ((rc = itab_fid(fs->itab, ino, &fid)) ||
	    (rc = setattr_rpc(fs, &fid, valid, attr, &a))) {
		reply_error(req, rc);
		return;
	}
	reply_attr(req, fs, seq, &a);
}

/* --- creating and removing ---------------------------------------------- */

/* CREATE of any type; the caller owns the result. */
static int create_rpc(struct fs *fs, fuse_req_t req, fuse_ino_t parent,
		      const char *name, size_t len, uint32_t mode,
		      uint32_t rdev, uint32_t flags, int *created,
		      struct cairn_attr *child, struct cairn_attr *dir)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct rpc_reply rep = { 0 };
	struct cairn_fid dfid;
	struct wbuf w;
	struct rbuf r;
	int rc = itab_fid(fs->itab, parent, &dfid);

	if (rc)
		return rc;
	put_fid_of(&w, &dfid);
	wire_put_str(&w, name, len);
	wire_put_u32(&w, mode);
	wire_put_u32(&w, ctx->uid);
	wire_put_u32(&w, ctx->gid);
	wire_put_u32(&w, rdev);
	wire_put_u32(&w, flags);
	if ((rc = fs_call(fs, OP_CREATE, &w, &rep)))
		return rc;
	rbuf_init(&r, rep.buf, rep.len);
	*created = wire_get_u8(&r);
	wire_get_attr(&r, child);
	wire_get_attr(&r, dir);
	rc = wire_get_end(&r) ? bad_reply(OP_CREATE) : 0;
	rpc_reply_free(&rep);
	return rc;
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      uint32_t mode, uint32_t rdev)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr child, dir;
	size_t len;
	int created, rc;

	if ((rc = check_name(name, &len)) ||
	    (rc = create_rpc(fs, req, parent, name, len, mode, rdev, CR_EXCL,
			     &created, &child, &dir))) {
		reply_error(req, rc);
		return;
	}
	reply_entry(req, fs, seq, parent, name, len, &child, &dir, NULL, 1);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	if (!(mode & S_IFMT))
		mode |= S_IFREG;
	make_node(req, parent, name, mode, (uint32_t)rdev);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr child, dir;
	size_t len;
	int created, rc;

	if ((rc = check_name(name, &len)) ||
	    (rc = create_rpc(fs, req, parent, name, len,
			     S_IFREG | (mode & 07777), 0,
			     (fi->flags & O_EXCL) ? CR_EXCL : 0, &created,
			     &child, &dir)))
		goto out;
	if (!S_ISREG(child.mode)) {
		rc = -EEXIST;
		goto out;
	}
	if (!created && (fi->flags & O_TRUNC) && child.size != 0 &&
	    (rc = truncate_rpc(fs, &child.fid, &child)))
		goto out;
	fi->fh = 0;
	reply_entry(req, fs, seq, parent, name, len, &child, &dir, fi,
		    created);
	return;
out:
	reply_error(req, rc);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	struct fs *fs = req_fs(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr child, dir;
	struct cairn_fid dfid;
	size_t len, tlen = strlen(target);
	struct wbuf w;
	int rc;

	if (tlen > CAIRN_SYMLINK_MAX) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if ((rc = check_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, parent, &dfid)))
		goto out;
	put_fid_of(&w, &dfid);
	wire_put_str(&w, name, len);
	wire_put_str(&w, target, tlen);
	wire_put_u32(&w, ctx->uid);
	wire_put_u32(&w, ctx->gid);
	if ((rc = call_attrs(fs, OP_SYMLINK, &w, 2, &child, &dir)))
		goto out;
	reply_entry(req, fs, seq, parent, name, len, &child, &dir, NULL, 1);
	return;
out:
	reply_error(req, rc);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr target, dir;
	struct cairn_fid tfid, dfid;
	struct wbuf w;
	size_t len;
	int rc;

	if ((rc = check_name(newname, &len)) ||
	    (rc = itab_fid(fs->itab, ino, &tfid)) ||
	    (rc = itab_fid(fs->itab, newparent, &dfid)))
		goto out;
	put_fid_of(&w, &tfid);
	wire_put_fid(&w, &dfid);
	wire_put_str(&w, newname, len);
	if ((rc = call_attrs(fs, OP_LINK, &w, 2, &target, &dir)))
		goto out;
	reply_entry(req, fs, seq, newparent, newname, len, &target, &dir, NULL,
		    0);
	return;
out:
	reply_error(req, rc);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 uint32_t flags)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr dir;
	struct cairn_fid dfid;
	struct wbuf w;
	size_t len;
	int rc;

	if ((rc = check_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, parent, &dfid)))
		goto out;
	put_fid_of(&w, &dfid);
	wire_put_str(&w, name, len);
	wire_put_u32(&w, flags);
	if ((rc = call_attrs(fs, OP_REMOVE, &w, 1, &dir, NULL)))
		goto out;
	itab_remove_entry(fs->itab, parent, name, len);
	note_attrs(fs, seq, &dir, NULL);
out:
	reply_error(req, rc);
}

/*
 * unlink of a file open here: the server would delete it, so rename it to
 * a hidden name in the same directory and remove that at the last release
 * (as NFS clients do). Returns 1 if it handled (and answered) the request.
 */
static int silly_rename(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	static unsigned long counter;
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr sdir, ddir;
	size_t len = strlen(name), slen;
	struct cairn_fid dfid;
	char silly[64];
	int64_t ino;
	struct wbuf w;
	int rc;

	ino = itab_entry(fs->itab, parent, name, len);
	if (ino <= 0 || !itab_open_count(fs->itab, (uint64_t)ino) ||
	    itab_silly(fs->itab, (uint64_t)ino) ||
	    itab_fid(fs->itab, parent, &dfid))
		return 0;
	slen = (size_t)snprintf(silly, sizeof(silly), ".cairn-silly.%llx.%lx",
				(unsigned long long)ino,
				__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	put_fid_of(&w, &dfid);
	wire_put_str(&w, name, len);
	wire_put_fid(&w, &dfid);
	wire_put_str(&w, silly, slen);
	wire_put_u32(&w, RN_NOREPLACE);
	if ((rc = call_attrs(fs, OP_RENAME, &w, 2, &sdir, &ddir)))
		return 0; /* fall back to a plain unlink */
	itab_remove_entry(fs->itab, parent, name, len);
	if (itab_set_silly(fs->itab, (uint64_t)ino, parent, silly, slen))
		log_warn("lost track of %s (unlinked while open)", silly);
	note_attrs(fs, seq, &sdir, NULL);
	fuse_reply_err(req, 0);
	return 1;
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (strlen(name) <= CAIRN_NAME_MAX && silly_rename(req, parent, name))
		return;
	remove_entry(req, parent, name, 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, RM_DIR);
}

static const struct {
	unsigned int linux_flag;
	uint32_t rn;
} rename_bits[] = {
	{ RENAME_NOREPLACE, RN_NOREPLACE },
	{ RENAME_EXCHANGE, RN_EXCHANGE },
};

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr sdir, ddir;
	struct cairn_fid sfid, dfid;
	uint32_t rn = 0;
	size_t len, newlen;
	struct wbuf w;
	int rc;

	for (size_t i = 0; i < sizeof(rename_bits) / sizeof(rename_bits[0]);
	     i++) {
		if (flags & rename_bits[i].linux_flag) {
			rn |= rename_bits[i].rn;
			flags &= ~rename_bits[i].linux_flag;
		}
	}
	if (flags) {
		rc = -EINVAL; /* RENAME_WHITEOUT and future flags */
		goto out;
	}
	if ((rc = check_name(name, &len)) ||
	    (rc = check_name(newname, &newlen)) ||
	    (rc = itab_fid(fs->itab, parent, &sfid)) ||
	    (rc = itab_fid(fs->itab, newparent, &dfid)))
		goto out;
	put_fid_of(&w, &sfid);
	wire_put_str(&w, name, len);
	wire_put_fid(&w, &dfid);
	wire_put_str(&w, newname, newlen);
	wire_put_u32(&w, rn);
	if ((rc = call_attrs(fs, OP_RENAME, &w, 2, &sdir, &ddir)))
		goto out;
	itab_rename(fs->itab, parent, name, len, newparent, newname, newlen,
		    (rn & RN_EXCHANGE) != 0);
	note_attrs(fs, seq, &sdir, &ddir);
out:
	reply_error(req, rc);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	struct rpc_reply rep = { 0 };
	char target[CAIRN_SYMLINK_MAX + 1];
	struct cairn_fid fid;
	struct wbuf w;
	struct rbuf r;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	put_fid_of(&w, &fid);
	if ((rc = fs_call(fs, OP_READLINK, &w, &rep)))
		goto out;
	rbuf_init(&r, rep.buf, rep.len);
	wire_get_cstr(&r, target, sizeof(target));
	rc = wire_get_end(&r) ? bad_reply(OP_READLINK) : 0;
	rpc_reply_free(&rep);
	if (rc)
		goto out;
	fuse_reply_readlink(req, target);
	return;
out:
	reply_error(req, rc);
}

/* --- files -------------------------------------------------------------- */

/* Count an open file (not directories) so unlink can tell it is open. */
static void reply_open(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		       struct fuse_file_info *fi, int isdir)
{
	if (!isdir)
		itab_open_inc(fs->itab, ino);
	if (fuse_reply_open(req, fi) < 0 && !isdir)
		release_open(fs, ino); /* interrupted: no release will come */
}

/*
 * open/opendir. Close-to-open: unless the promise stands and the page cache
 * holds the current version, fetch fresh attributes first and let the
 * kernel drop its cached pages (keep_cache 0).
 */
static void open_common(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi, int isdir)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	int fresh, rc;

	fi->fh = 0;
	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (!isdir && (fi->flags & O_TRUNC)) {
		rc = truncate_rpc(fs, &fid, &a);
	} else if (itab_keep_cache(fs->itab, ino)) {
		fi->keep_cache = 1;
		reply_open(req, fs, ino, fi, isdir);
		return;
	} else {
		rc = getattr_rpc(fs, ino, &a);
	}
	if (rc)
		goto out;
	fresh = notify_reply_begin(fs->ntf, seq);
	itab_update(fs->itab, &a, fresh);
	if (fresh)
		itab_set_cached(fs->itab, ino, a.dv);
	fi->keep_cache = 0;
	reply_open(req, fs, ino, fi, isdir);
	notify_reply_end(fs->ntf);
	return;
out:
	reply_error(req, rc);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	open_common(req, ino, fi, 0);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	char *buf = NULL;
	size_t got = 0;
	int rc, have_attr = 0;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (size && !(buf = malloc(size))) {
		rc = -ENOMEM;
		goto out;
	}
	/* max_write/max_pages keep kernel reads within one READ; split
	 * anything larger anyway. */
	while (got < size) {
		uint32_t want = size - got > CAIRN_MAX_IO ? CAIRN_MAX_IO
							  : (uint32_t)(size - got);
		struct rpc_reply rep = { 0 };
		const void *data;
		size_t n = 0;
		struct wbuf w;
		struct rbuf r;

		put_fid_of(&w, &fid);
		wire_put_u64(&w, (uint64_t)off + got);
		wire_put_u32(&w, want);
		if ((rc = fs_call(fs, OP_READ, &w, &rep)))
			goto out;
		rbuf_init(&r, rep.buf, rep.len);
		wire_get_attr(&r, &a);
		data = wire_get_blob(&r, &n, want);
		if (wire_get_end(&r)) {
			rpc_reply_free(&rep);
			rc = bad_reply(OP_READ);
			goto out;
		}
		memcpy(buf + got, data, n);
		rpc_reply_free(&rep);
		have_attr = 1;
		got += n;
		if (n < want)
			break; /* end of file */
	}
	if (have_attr)
		note_attrs(fs, seq, &a, NULL);
	fuse_reply_buf(req, buf, got);
	free(buf);
	return;
out:
	free(buf);
	reply_error(req, rc);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	uint32_t flags = (fi->flags & (O_SYNC | O_DSYNC)) ? WR_SYNC : 0;
	struct cairn_fid fid;
	struct cairn_attr a;
	size_t done = 0;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	while (done < size) {
		size_t n = size - done > CAIRN_MAX_IO ? CAIRN_MAX_IO
						       : size - done;
		struct wbuf w;

		put_fid_of(&w, &fid);
		wire_put_u64(&w, (uint64_t)off + done);
		wire_put_u32(&w, flags);
		wire_put_blob(&w, buf + done, n);
		if ((rc = call_attrs(fs, OP_WRITE, &w, 1, &a, NULL)))
			break;
		done += n;
	}
	if (done) {
		note_attrs(fs, seq, &a, NULL);
		fuse_reply_write(req, done);
		return;
	}
out:
	reply_error(req, rc);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* Writes went through already. */
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);

	/* Reply first: close() does not wait for a silly name's removal
	 * (req is gone after the reply). */
	fuse_reply_err(req, 0);
	release_open(fs, ino);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct cairn_fid fid;
	struct wbuf w;
	int rc;

	if (!(rc = itab_fid(fs->itab, ino, &fid))) {
		put_fid_of(&w, &fid);
		wire_put_u32(&w, datasync ? FS_DATASYNC : 0);
		rc = fs_call(fs, OP_FSYNC, &w, NULL);
	}
	reply_error(req, rc);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			 off_t offset, off_t length, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	struct wbuf w;
	int rc;

	if (offset < 0 || length <= 0) {
		rc = -EINVAL;
		goto out;
	}
	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	put_fid_of(&w, &fid);
	wire_put_u32(&w, (uint32_t)mode);
	wire_put_u64(&w, (uint64_t)offset);
	wire_put_u64(&w, (uint64_t)length);
	if ((rc = call_attrs(fs, OP_FALLOCATE, &w, 1, &a, NULL)))
		goto out;
	note_attrs(fs, seq, &a, NULL);
out:
	reply_error(req, rc);
}

/* --- directories -------------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	open_common(req, ino, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	/* Directory operations are durable when the server replies. */
	fuse_reply_err(req, 0);
}

/* One READDIR reply, decoded lazily from its buffer. */
struct dirpage {
	struct rpc_reply rep;
	struct rbuf r;
	uint32_t count;
	uint8_t eof;
};

static int readdir_rpc(struct fs *fs, const struct cairn_fid *fid,
		       uint64_t cookie, uint32_t max, struct dirpage *pg)
{
	struct wbuf w;
	int rc;

	put_fid_of(&w, fid);
	wire_put_u64(&w, cookie);
	wire_put_u32(&w, max);
	if ((rc = fs_call(fs, OP_READDIR, &w, &pg->rep)))
		return rc;
	rbuf_init(&pg->r, pg->rep.buf, pg->rep.len);
	pg->count = wire_get_u32(&pg->r);
	pg->eof = wire_get_u8(&pg->r);
	if (pg->r.err || pg->count > max) {
		rpc_reply_free(&pg->rep);
		return bad_reply(OP_READDIR);
	}
	return 0;
}

/*
 * readdir and readdirplus. Offsets: 1 and 2 resume after the synthesised
 * "." and "..", anything >= 3 is a server cookie. With plus, every entry
 * but "." and ".." (ino 0: no lookup reference) is an entry handed to the
 * kernel; if the reply does not reach it, those references are taken back.
 */
static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, int plus)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct dirpage pg;
	uint64_t *counted = NULL;
	size_t ncounted = 0, used = 0;
	struct cairn_fid fid;
	uint64_t parent;
	char *buf = NULL;
	int fresh = 0, in_section = 0, rc;

	memset(&pg, 0, sizeof(pg));
	if ((rc = itab_fid(fs->itab, ino, &fid)) ||
	    (rc = itab_parent(fs->itab, ino, &parent)))
		goto out;
	if (!(buf = malloc(size))) {
		rc = -ENOMEM;
		goto out;
	}
	for (off_t dot = off; dot < 2; dot++) {
		struct fuse_entry_param e;
		const char *name = dot == 0 ? "." : "..";
		size_t need;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = dot == 0 ? ino : parent;
		e.attr.st_mode = S_IFDIR;
		need = plus ? fuse_add_direntry_plus(req, buf + used,
						     size - used, name, &e,
						     dot + 1)
			    : fuse_add_direntry(req, buf + used, size - used,
						name, &e.attr, dot + 1);
		if (need > size - used)
			goto reply;
		used += need;
	}
	/* Names average well under 32 bytes; a plus entry is ~150. */
	rc = readdir_rpc(fs, &fid, off < CAIRN_COOKIE_FIRST ? 0 : (uint64_t)off,
			 (uint32_t)(size / (plus ? 128 : 32) + 1), &pg);
	if (rc)
		goto out;
	if (plus && !(counted = malloc(pg.count * sizeof(*counted) + 1))) {
		rc = -ENOMEM;
		goto out;
	}
	fresh = notify_reply_begin(fs->ntf, seq);
	in_section = 1;
	/* READDIR promises the directory: its entries are covered. */
	if (fresh)
		itab_set_promised(fs->itab, ino);
	for (uint32_t i = 0; i < pg.count; i++) {
		struct fuse_entry_param e;
		struct cairn_attr a;
		char name[CAIRN_NAME_MAX + 1];
		uint64_t next = wire_get_u64(&pg.r);
		size_t len = wire_get_cstr(&pg.r, name, sizeof(name));
		size_t need;

		wire_get_attr(&pg.r, &a);
		if (pg.r.err || next < CAIRN_COOKIE_FIRST) {
			rc = bad_reply(OP_READDIR);
			goto out;
		}
		fill_entry(&e, &a, fresh);
		need = plus ? fuse_add_direntry_plus(req, buf + used,
						     size - used, name, &e,
						     (off_t)next)
			    : fuse_add_direntry(req, buf + used, size - used,
						name, &e.attr, (off_t)next);
		if (need > size - used)
			break;
		if (plus) {
			if ((rc = itab_add_entry(fs->itab, ino, name, len, &a,
						 fresh)))
				goto out;
			counted[ncounted++] = e.ino;
		} else {
			itab_update(fs->itab, &a, fresh);
		}
		used += need;
	}
reply:
	if (fuse_reply_buf(req, buf, used) < 0) {
		for (size_t i = 0; i < ncounted; i++)
			itab_forget(fs->itab, counted[i], 1);
	}
	rc = 0;
out:
	/* On error, entries already counted never reached the kernel. */
	if (rc) {
		for (size_t i = 0; i < ncounted; i++)
			itab_forget(fs->itab, counted[i], 1);
		reply_error(req, rc);
	}
	if (in_section)
		notify_reply_end(fs->ntf);
	rpc_reply_free(&pg.rep);
	free(counted);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 1);
}

/* --- statfs ------------------------------------------------------------- */

static int statfs_rpc(struct fs *fs, struct cairn_statfs *sf)
{
	struct rpc_reply rep = { 0 };
	struct rbuf r;
	int rc = rpc_call(fs->rpc, OP_STATFS, NULL, &rep);

	if (rc)
		return rc;
	rbuf_init(&r, rep.buf, rep.len);
	wire_get_statfs(&r, sf);
	rc = wire_get_end(&r) ? bad_reply(OP_STATFS) : 0;
	rpc_reply_free(&rep);
	return rc;
}

static int64_t ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 +
	       (now.tv_nsec - t->tv_nsec) / 1000000;
}

int fs_refresh_statfs(struct fs *fs)
{
	struct cairn_statfs sf;
	int rc = statfs_rpc(fs, &sf);

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
		if ((rc = fs_refresh_statfs(fs))) {
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

/* --- extended attributes ------------------------------------------------ */

static int xattr_name(const char *name, size_t *len)
{
	*len = strlen(name);
	if (*len == 0)
		return -EINVAL;
	return *len > CAIRN_XATTR_NAME_MAX ? -ERANGE : 0;
}

/* Names asked for constantly and almost never present; their absence is
 * cached per inode while the promise stands (bit = 1 << index). */
static const char *const xattr_hot[] = {
	"security.capability", /* the kernel, on every write */
	"security.selinux",    /* ls -l, on every file */
	"security.ima",
};

static unsigned xattr_hot_bit(const char *name)
{
	for (size_t i = 0; i < sizeof(xattr_hot) / sizeof(xattr_hot[0]); i++)
		if (!strcmp(name, xattr_hot[i]))
			return 1u << i;
	return 0;
}

/* The protocol refuses the system. namespace (POSIX ACLs): no need to ask. */
static int xattr_system(const char *name)
{
	return !strncmp(name, "system.", 7);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs *fs = req_fs(req);
	struct cairn_fid fid;
	struct wbuf w;
	size_t len;
	int rc;

	if (size > CAIRN_XATTR_SIZE_MAX) {
		rc = -E2BIG;
		goto out;
	}
	if ((rc = xattr_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (xattr_system(name)) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	itab_set_xattr_absent(fs->itab, ino, xattr_hot_bit(name), 0);
	put_fid_of(&w, &fid);
	wire_put_str(&w, name, len);
	wire_put_u32(&w, (uint32_t)flags & (XA_CREATE | XA_REPLACE));
	wire_put_blob(&w, value, size);
	rc = fs_call(fs, OP_SETXATTR, &w, NULL);
out:
	reply_error(req, rc);
}

/* GETXATTR and LISTXATTR share a reply: u32 full size, blob value. */
static void reply_xattr_value(fuse_req_t req, uint16_t op,
			      struct rpc_reply *rep, size_t size)
{
	const void *val;
	uint32_t full;
	size_t n = 0;
	struct rbuf r;

	rbuf_init(&r, rep->buf, rep->len);
	full = wire_get_u32(&r);
	val = wire_get_blob(&r, &n, size);
	if (wire_get_end(&r)) {
		reply_error(req, bad_reply(op));
		return;
	}
	if (size == 0)
		fuse_reply_xattr(req, full);
	else
		fuse_reply_buf(req, val, n);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct rpc_reply rep = { 0 };
	struct cairn_fid fid;
	struct wbuf w;
	unsigned bit;
	size_t len;
	int rc;

	if ((rc = xattr_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (xattr_system(name)) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	if ((bit = xattr_hot_bit(name)) && itab_xattr_absent(fs->itab, ino, bit)) {
		rc = -ENODATA;
		goto out;
	}
	if (size > CAIRN_XATTR_SIZE_MAX)
		size = CAIRN_XATTR_SIZE_MAX;
	put_fid_of(&w, &fid);
	wire_put_str(&w, name, len);
	wire_put_u32(&w, (uint32_t)size);
	rc = fs_call(fs, OP_GETXATTR, &w, &rep);
	if (rc == -ENODATA && bit) {
		/* Valid while the promise stands: a setxattr anywhere
		 * changes the object and breaks it. */
		if (notify_reply_begin(fs->ntf, seq))
			itab_set_xattr_absent(fs->itab, ino, bit, 1);
		notify_reply_end(fs->ntf);
	}
	if (rc)
		goto out;
	reply_xattr_value(req, OP_GETXATTR, &rep, size);
	rpc_reply_free(&rep);
	return;
out:
	reply_error(req, rc);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = req_fs(req);
	struct rpc_reply rep = { 0 };
	struct cairn_fid fid;
	struct wbuf w;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (size > CAIRN_XATTR_LIST_MAX)
		size = CAIRN_XATTR_LIST_MAX;
	put_fid_of(&w, &fid);
	wire_put_u32(&w, (uint32_t)size);
	if ((rc = fs_call(fs, OP_LISTXATTR, &w, &rep)))
		goto out;
	reply_xattr_value(req, OP_LISTXATTR, &rep, size);
	rpc_reply_free(&rep);
	return;
out:
	reply_error(req, rc);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = req_fs(req);
	struct cairn_fid fid;
	struct wbuf w;
	size_t len;
	int rc;

	if ((rc = xattr_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (xattr_system(name)) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	put_fid_of(&w, &fid);
	wire_put_str(&w, name, len);
	rc = fs_call(fs, OP_REMOVEXATTR, &w, NULL);
out:
	reply_error(req, rc);
}

/* --- table -------------------------------------------------------------- */

static const struct fuse_lowlevel_ops cairn_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
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
	fs->rpc = r;
	fs->itab = t;
	fs->ntf = n;
	pthread_mutex_init(&fs->sf_lock, NULL);
	*out = fs;
	return 0;
}

void fs_destroy(struct fs *fs)
{
	if (!fs)
		return;
	pthread_mutex_destroy(&fs->sf_lock);
	free(fs);
}

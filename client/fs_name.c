/*
 * fs_name.c - FUSE operations on names: lookup and forget, creating,
 * linking, removing and renaming entries, readlink (see fs_int.h). A file
 * unlinked (or renamed over) here may still be open, which the client
 * cannot know under no_open: the server keeps it as an orphan until the
 * kernel forgets it (fs_orphan.c).
 *
 * Lookups are answered from the directory cache (dircache.h) when it
 * holds the directory's listing; the first miss in a directory fetches
 * the listing (fs_dir_fetch). Our own changes to a directory edit its
 * cached listing in their reply sections, before the directory's new
 * attributes are taken (dcache_follow drops a listing of another
 * version).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "dircache.h"
#include "fs_int.h"
#include "inode.h"
#include "wback.h"
#include "notify.h"
#include "../lib/log.h"

static int check_name(const char *name, size_t *len)
{
	*len = strlen(name);
	return *len > CAIRN_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* The name of an entry request (len bytes, checked). */
static struct msg_str entry_name(const char *name, size_t len)
{
	return (struct msg_str){ name, len };
}

/* --- replies ------------------------------------------------------------ */

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
	int dir_promise, rc;
	uint64_t nodeid;

	if (dir) {
		/* The listing first: then the directory's version. */
		dcache_added(fs->dc, parent, name, len, a, dir, fresh);
		fs_take_attr(fs, dir, fresh);
	}
	dcache_follow(fs->dc, a, fresh);
	rc = itab_add_entry(fs->itab, parent, name, len, a, fresh,
			    &dir_promise, &nodeid);
	if (rc < 0) {
		notify_reply_end(fs->ntf);
		reply_error(req, rc);
		return;
	}
	fs_fill_entry(&e, nodeid, a, fresh);
	/* Made just now: no extended attributes (the kernel asks for
	 * security.capability before the first write). */
	if (created && fresh)
		itab_set_xattr_absent(fs->itab, nodeid, fs_xattr_hot_all(), 1);
	/* The name is only as current as the directory's promise. */
	if (!dir_promise)
		e.entry_timeout = 0;
	if (fi) {
		/* A new file's page cache is empty, so it may be kept; an
		 * existing one opened through create is dropped, and what
		 * the kernel reads next is of this version either way. */
		fi->keep_cache = created && fresh;
		itab_open_end(fs->itab, e.ino, a, fresh);
		if ((fi->flags & O_ACCMODE) != O_RDONLY)
			fs_note_opener(req, a->fid.vnode);
		rc = fs_reply_open(req, fs, e.ino, &e, fi);
	} else {
		rc = fuse_reply_entry(req, &e);
	}
	/* The request was interrupted: the kernel took no reference. */
	if (rc < 0)
		fs_forget(fs, e.ino, 1);
	notify_reply_end(fs->ntf);
}

/* Inside a reply section: (parent, name) does not exist. With fresh (the
 * directory's promise stands), a negative entry the kernel caches (ino
 * 0, long timeout; a plain ENOENT is asked again every time), recorded
 * so that a break on the directory invalidates it. */
static void send_negative(fuse_req_t req, struct fs *fs, int fresh,
			  fuse_ino_t parent, const char *name, size_t len)
{
	struct fuse_entry_param e;

	if (fresh && itab_add_negative(fs->itab, parent, name, len) == 0) {
		memset(&e, 0, sizeof(e));
		e.ino = 0;
		e.entry_timeout = FS_CACHE_TIMEOUT;
		fuse_reply_entry(req, &e);
	} else {
		fuse_reply_err(req, ENOENT);
	}
}

/* LOOKUP said ENOENT: a negative entry, cached while the promise on the
 * directory stands (a create breaks it). */
static void reply_negative(fuse_req_t req, struct fs *fs, uint64_t seq,
			   fuse_ino_t parent, const char *name, size_t len)
{
	/* A negative LOOKUP promises the directory, and the table records
	 * that with the entry. */
	int fresh = notify_reply_begin(fs->ntf, seq);

	send_negative(req, fs, fresh, parent, name, len);
	notify_reply_end(fs->ntf);
}

/*
 * LOOKUP answered from parent's cached listing. Returns 0 when answered;
 * -ENOENT when no listing is cached, -EAGAIN when the name is listed but
 * its status is stale (nothing answered: ask the server).
 */
static int lookup_cached(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			 const char *name, size_t len)
{
	struct fuse_entry_param e;
	struct cairn_attr a;
	int rc;

	/* No break is applied inside the section: what the cache says now
	 * reaches the kernel before any invalidation of it is queued. */
	notify_reply_begin(fs->ntf, 0);
	rc = dcache_lookup(fs->dc, parent, name, len, &a);
	if (rc == 1) {
		uint64_t nodeid;

		rc = itab_add_entry(fs->itab, parent, name, len, &a, 1, NULL,
				    &nodeid);
		if (rc) {
			reply_error(req, rc);
		} else {
			fs_fill_entry(&e, nodeid, &a, 1);
			if (fuse_reply_entry(req, &e) < 0)
				fs_forget(fs, e.ino, 1);
		}
		rc = 0;
	} else if (rc == 0) {
		send_negative(req, fs, 1, parent, name, len);
	}
	notify_reply_end(fs->ntf);
	return rc;
}

/* --- lookup and forget -------------------------------------------------- */

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_lookup_req q;
	struct msg_attr p;
	size_t len;
	int promise, rc;

	if ((rc = check_name(name, &len)))
		goto out;
	/* The directory cache, and the first miss in a directory whose
	 * listing it lacks fetches the listing: one round trip answers
	 * every later lookup in it, found or not. */
	rc = lookup_cached(req, fs, parent, name, len);
	if (rc == -ENOENT) {
		rc = fs_dir_fetch(req, fs, parent, 0);
		if (rc && !fs_dir_fetch_fallback(rc))
			goto out;
		if (rc == 0)
			rc = lookup_cached(req, fs, parent, name, len);
	}
	if (rc == 0) {
		fs_dir_ahead(fs, parent, AHEAD_LOOKUPS);
		return;
	}
	if ((rc = itab_fid_promise(fs->itab, parent, &q.dir, &promise)))
		goto out;
	q.name = entry_name(name, len);
	/* The entry is covered by the promise on the directory, which a
	 * positive LOOKUP does not register: take it first if it is gone, so
	 * that a change between the two requests is broken to us. */
	if (!promise) {
		struct cairn_attr da;

		if ((rc = fs_getattr(req, fs, &q.dir, &da)))
			goto out;
		fs_note_attrs(fs, seq, &da, NULL);
	}
	rc = fs_rpc(req, fs, OP_LOOKUP, &q, &p, NULL);
	if (rc == -ENOENT) {
		reply_negative(req, fs, seq, parent, name, len);
		return;
	}
	if (rc)
		goto out;
	reply_entry(req, fs, seq, parent, name, len, &p.attr, NULL, NULL, 0);
	return;
out:
	reply_error(req, rc);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_forget(req_fs(req), ino, nlookup);
	fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count,
			struct fuse_forget_data *forgets)
{
	struct fs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++)
		fs_forget(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* --- creating ----------------------------------------------------------- */

/* CREATE of any type; the caller owns the result. */
static int create_rpc(struct fs *fs, fuse_req_t req, fuse_ino_t parent,
		      const char *name, size_t len, uint32_t mode,
		      uint32_t rdev, uint32_t flags, int *created,
		      struct cairn_attr *child, struct cairn_attr *dir)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct msg_create_req q = {
		.name = entry_name(name, len),
		.mode = mode,
		.uid = ctx->uid,
		.gid = ctx->gid,
		.rdev = rdev,
		.flags = flags,
	};
	struct msg_create_rep p;
	int rc;

	if ((rc = itab_fid(fs->itab, parent, &q.dir)) ||
	    (rc = fs_rpc(req, fs, OP_CREATE, &q, &p, NULL)))
		return rc;
	*created = p.created;
	*child = p.child;
	*dir = p.dir;
	return 0;
}

/* The token of directory dir for req's process, whose credential block
 * goes to *cred (the caller frees it): 0, or an error (nothing to free):
 * the server does it then. */
static int dir_token(fuse_req_t req, struct fs *fs, const struct cairn_fid *dir,
		     struct wbuf *cred)
{
	int rc;

	wbuf_init(cred);
	if (!fs_req_cred(req, cred) || cred->err)
		rc = -EAGAIN;
	else
		rc = wb_dir_token(fs->wbk, dir, cred->data, cred->len);
	if (rc)
		wbuf_free(cred);
	return rc;
}

/*
 * A regular file (fi: create) or a directory (mkdir) made here, without
 * the server (docs/ARCHITECTURE.md, "Namespace changes without a round
 * trip each"): in a directory whose listing we have whole and whose
 * token we hold (taken now if need be), with a FID taken ahead and the
 * attributes the server will give it, journaled before the kernel hears
 * of it and sent later. A new directory's token is ours too, and its
 * listing known empty. 0 when req was answered; -EAGAIN (or another
 * error) when it was not: create on the server then.
 */
static int make_local(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
		      const char *name, size_t len, uint32_t mode,
		      struct fuse_file_info *fi, uint64_t seq)
{
	int isdir = S_ISDIR(mode);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct cairn_attr dir, child, tmp;
	struct timespec now;
	struct wbuf cred;
	int rc;

	/* Set-id bits and root squashed to nobody: the server decides
	 * those, so it is asked. */
	if (!fs->wbk || (mode & (S_ISUID | S_ISGID)) ||
	    (ctx->uid == 0 && !rpc_root_ok(fs->rpc)))
		return -EAGAIN;
	/* The directory's current attributes, and its listing without
	 * the name. */
	if (itab_getattr(fs->itab, parent, &dir) || !S_ISDIR(dir.mode) ||
	    (isdir && dir.nlink >= CAIRN_MAX_LINK) ||
	    dcache_lookup(fs->dc, parent, name, len, &tmp) != 0)
		return -EAGAIN;
	if ((rc = dir_token(req, fs, &dir.fid, &cred)))
		return rc;
	/* Again, now that nobody else can change it. */
	if (itab_getattr(fs->itab, parent, &dir) ||
	    dcache_lookup(fs->dc, parent, name, len, &tmp) != 0)
		rc = -EAGAIN;
	if (!rc)
		rc = wb_fid_take(fs->wbk, &child.fid);
	if (rc) {
		wbuf_free(&cred);
		return rc;
	}
	/* The kernel's clock for times (current_time): a write within the
	 * same tick then leaves mtime as it is, and sends no SETATTR. */
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	/* What the server's CREATE with CR_FID makes (store_create_fid). */
	child.mode = mode;
	child.nlink = isdir ? 2 : 1;
	child.uid = ctx->uid;
	child.gid = (dir.mode & S_ISGID) ? dir.gid : ctx->gid;
	if (isdir && (dir.mode & S_ISGID))
		child.mode |= S_ISGID;
	child.rdev = 0;
	child.size = 0;
	child.blocks = 0;
	child.atime.sec = now.tv_sec;
	child.atime.nsec = (uint32_t)now.tv_nsec;
	child.mtime = child.ctime = child.atime;
	child.dv = 1;
	rc = wb_create(fs->wbk, &dir.fid, &dir.dv, name, len, &child,
		       cred.data, cred.len);
	wbuf_free(&cred);
	if (rc)
		return rc;
	dir.mtime = dir.ctime = child.mtime;
	if (isdir) {
		dir.nlink++;
		fs_dir_made(fs, seq, &child);
	} else {
		fi->fh = fs_lock_next_fh(fs);
	}
	reply_entry(req, fs, seq, parent, name, len, &child, &dir, fi, 1);
	return 0;
}

/*
 * mknod, mkdir and create: CREATE, then hand the kernel the entry. With fi
 * (create), an existing regular file is opened unless O_EXCL, truncated
 * for O_TRUNC, and fi is answered too.
 */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      uint32_t mode, uint32_t rdev, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	uint32_t flags = fi && !(fi->flags & O_EXCL) ? 0 : CR_EXCL;
	struct cairn_attr child, dir;
	/* A new file's write token comes with it: its first writes need no
	 * server call (wback.h). */
	int tok = fs_wb_on(fs) && S_ISREG(mode);
	size_t len;
	int created, rc;

	if ((rc = check_name(name, &len)))
		goto out;
	if ((tok && fi) || (fs_wb_on(fs) && S_ISDIR(mode) && !fi)) {
		rc = make_local(req, fs, parent, name, len, mode, fi, seq);
		/* Not here; asking for the directory's token found the
		 * server gone: asking again to create it would wait as
		 * long once more. */
		if (!rc)
			return;
		if (wb_gave_up(rc))
			goto out;
	}
	if ((rc = create_rpc(fs, req, parent, name, len, mode, rdev,
			     flags | (tok ? CR_TOKEN : 0), &created, &child,
			     &dir)))
		goto out;
	if (tok && created && S_ISREG(child.mode))
		wb_created(fs->wbk, &child.fid, child.dv, child.size);
	if (created && S_ISDIR(child.mode) && !fi)
		fs_dir_made(fs, seq, &child);
	if (fi) {
		if (!S_ISREG(child.mode)) {
			rc = -EEXIST;
			goto out;
		}
		if (!created && (fi->flags & O_TRUNC) && child.size != 0 &&
		    (rc = fs_truncate(req, fs, &child.fid, &child)))
			goto out;
		fi->fh = fs_lock_next_fh(fs);
	}
	reply_entry(req, fs, seq, parent, name, len, &child, &dir, fi, created);
	return;
out:
	reply_error(req, rc);
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, dev_t rdev)
{
	if (!(mode & S_IFMT))
		mode |= S_IFREG;
	make_node(req, parent, name, mode, (uint32_t)rdev, NULL);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode, struct fuse_file_info *fi)
{
	make_node(req, parent, name, S_IFREG | (mode & 07777), 0, fi);
}

void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		   const char *name)
{
	struct fs *fs = req_fs(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_symlink_req q = {
		.target = { target, strlen(target) },
		.uid = ctx->uid,
		.gid = ctx->gid,
	};
	struct msg_attr2 p;
	size_t len;
	int rc;

	if (q.target.len > CAIRN_SYMLINK_MAX) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if ((rc = check_name(name, &len)) ||
	    (rc = itab_fid(fs->itab, parent, &q.dir)))
		goto out;
	q.name = entry_name(name, len);
	if ((rc = fs_rpc(req, fs, OP_SYMLINK, &q, &p, NULL)))
		goto out;
	/* The reply: the link, then the directory. */
	reply_entry(req, fs, seq, parent, name, len, &p.a, &p.b, NULL, 1);
	return;
out:
	reply_error(req, rc);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		const char *newname)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_link_req q;
	struct msg_attr2 p;
	size_t len;
	int rc;

	if ((rc = check_name(newname, &len)) ||
	    (rc = itab_fid(fs->itab, ino, &q.fid)) ||
	    (rc = itab_fid(fs->itab, newparent, &q.dir)))
		goto out;
	q.name = entry_name(newname, len);
	if ((rc = fs_rpc(req, fs, OP_LINK, &q, &p, NULL)))
		goto out;
	/* The reply: the target, then the directory. */
	reply_entry(req, fs, seq, newparent, newname, len, &p.a, &p.b, NULL,
		    0);
	return;
out:
	reply_error(req, rc);
}

/* --- removing ----------------------------------------------------------- */

/* REMOVE of (parent, name) with flags RM_*, for req (NULL: nobody waits);
 * the directory's new attributes go to dir (NULL: not wanted). */
static int remove_rpc(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
		      const char *name, size_t len, uint32_t flags,
		      struct cairn_attr *dir)
{
	struct msg_remove_req q = {
		.name = entry_name(name, len),
		.flags = flags,
	};
	struct msg_attr p;
	int rc;

	if ((rc = itab_fid(fs->itab, parent, &q.dir)) ||
	    (rc = fs_rpc(req, fs, OP_REMOVE, &q, &p, NULL)))
		return rc;
	if (dir)
		*dir = p.attr;
	return 0;
}

/*
 * What our removal of name from parent changes here, once the server
 * answered it (remove_entry) or the journal holds it (remove_local):
 * flags as sent, victim the object removed, vino its node id (0: the
 * kernel does not know it), last: its last link went (before: its
 * attributes), dir: the directory's new attributes.
 */
static void removed(struct fs *fs, uint64_t seq, fuse_ino_t parent,
		    const char *name, size_t len, uint32_t flags,
		    const struct cairn_fid *victim, uint64_t vino, int last,
		    struct cairn_attr *before, const struct cairn_attr *dir)
{
	/* The server breaks our promise on the victim (not in the reply):
	 * that leaves the directory's attributes current. */
	int afresh = notify_reply_begin_except(fs->ntf, seq, &victim->vnode, 1);
	int fresh = afresh == 2;
	int64_t ino;

	/* The object lost a link (nlink, ctime): not in the reply. */
	if (flags & RM_SELF)
		/* By vnode: every incarnation, even if a break dropped the
		 * node id we looked up. */
		itab_attr_stale(fs->itab, victim->vnode);
	else if ((ino = itab_entry(fs->itab, parent, name, len)) > 0)
		itab_attr_stale(fs->itab, (uint64_t)ino);
	if (flags & RM_KEEP)
		fs_orphan_release(fs, victim);
	if (last) {
		before->nlink = 0;
		itab_set_gone(fs->itab, vino, before);
	}
	dcache_removed(fs->dc, parent, name, len, dir, fresh);
	itab_remove_entry(fs->itab, parent, name, len);
	fs_take_dir_attr(fs, dir, afresh > 0, fresh);
	notify_reply_end(fs->ntf);
}

/*
 * In a sticky directory the server lets a user remove or replace only
 * what that user owns: an object whose chown (or other change) is still
 * in our journal must reach the server before a REMOVE or RENAME naming
 * it, or the server judges by its old owner and refuses (EPERM; test_posix
 * "sticky directory sees a chown just made", pjdfstest rename/10.t).
 * Elsewhere the server's checks do not look at the object.
 */
static void settle_sticky(struct fs *fs, fuse_ino_t dir,
			  const struct cairn_fid *fid)
{
	struct cairn_attr d;

	if (fs->wbk && itab_getattr(fs->itab, dir, &d) == 0 &&
	    (d.mode & S_ISVTX))
		(void)fs_wb_settle(fs, fid);
}

/*
 * unlink answered here, like a create (make_local): a regular file or
 * symlink named in a directory whose listing we have and whose token we
 * hold, not open for writing here. The REMOVE (RM_FID) is journaled as
 * the object's last change and sent later. rmdir (RM_DIR in flags) too,
 * of a directory whose listing we have, empty, and whose token we hold
 * already (rm -r emptied it here). 0 when req was answered; else it was
 * not (remove on the server then).
 */
static int remove_local(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			const char *name, size_t len, uint32_t flags,
			uint64_t seq)
{
	int isdir = !!(flags & RM_DIR);
	struct cairn_attr dir, a, again;
	struct timespec now;
	struct wbuf cred;
	int64_t ino;
	int rc, cur, lr;

	/* The entry's status may be stale (our own changes sent since):
	 * its FID and type are still right, only nlink is not known. */
	if (!fs->wbk || !fs_wb_on(fs) ||
	    itab_getattr(fs->itab, parent, &dir) || !S_ISDIR(dir.mode) ||
	    ((cur = dcache_lookup(fs->dc, parent, name, len, &a)) != 1 &&
	     cur != -EAGAIN) ||
	    (isdir ? !S_ISDIR(a.mode) || dcache_count(fs->dc, a.fid.vnode) ||
		     !wb_holds(fs->wbk, &a.fid)
		   : !S_ISREG(a.mode) && !S_ISLNK(a.mode)))
		return -EAGAIN;
	ino = itab_entry(fs->itab, parent, name, len);
	if (!isdir && ino > 0 && itab_wopen(fs->itab, (uint64_t)ino, 0))
		return -EAGAIN;
	if ((rc = dir_token(req, fs, &dir.fid, &cred)))
		return rc;
	/* Again, now that nobody else can change it. */
	if (itab_getattr(fs->itab, parent, &dir) ||
	    ((lr = dcache_lookup(fs->dc, parent, name, len, &again)) != 1 &&
	     lr != -EAGAIN) ||
	    again.fid.vnode != a.fid.vnode || again.fid.uniq != a.fid.uniq ||
	    itab_entry(fs->itab, parent, name, len) != ino ||
	    (isdir && dcache_count(fs->dc, a.fid.vnode)))
		rc = -EAGAIN;
	/* As remove_entry: a file the kernel knows may be open. */
	if (!isdir)
		flags = ino > 0 ? RM_KEEP | RM_SELF : 0;
	/* The directory's new mtime and ctime: ours, and the server's when
	 * the removal lands (REMOVESAT). */
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	dir.mtime.sec = now.tv_sec;
	dir.mtime.nsec = (uint32_t)now.tv_nsec;
	dir.ctime = dir.mtime;
	if (!rc)
		rc = wb_remove(fs->wbk, &dir.fid, &dir.dv, name, len, &a.fid,
			       flags, &dir.mtime, cred.data, cred.len);
	wbuf_free(&cred);
	if (rc)
		return rc;
	/* What the kernel has of the file: the latest status, with the
	 * journal's size and times (its GETATTRs were answered so), which
	 * it sends back with the ctime it moves (op_setattr, itab_gone). */
	if (!isdir) {
		a.size = again.size;
		a.mtime = again.mtime;
		a.ctime = again.ctime;
		wb_patch(fs->wbk, &a);
	}
	if (isdir)
		dir.nlink--;
	removed(fs, seq, parent, name, len, flags, &a.fid,
		ino > 0 ? (uint64_t)ino : 0,
		ino > 0 && cur == 1 && S_ISREG(a.mode) && a.nlink == 1, &a,
		&dir);
	reply_error(req, 0);
	return 0;
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 uint32_t flags)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_attr dir, before;
	struct cairn_fid victim;
	int64_t ino;
	uint64_t vino = 0;
	size_t len;
	int rc, last = 0, moving;

	if ((rc = check_name(name, &len)))
		goto out;
	if (remove_local(req, fs, parent, name, len, flags, seq) == 0)
		return;
	/* A file the kernel knows may be open (fs_orphan.c). Its FID now:
	 * a break may take the name from the table before the reply. */
	ino = itab_entry(fs->itab, parent, name, len);
	if (!(flags & RM_DIR) && ino > 0 &&
	    itab_fid(fs->itab, (uint64_t)ino, &victim) == 0) {
		/* RM_SELF: we mark its attributes stale below, so the server
		 * sends us no break, which would make this reply stale. */
		flags |= RM_KEEP | RM_SELF;
		/* Its last name (as far as current attributes say). */
		last = itab_getattr(fs->itab, (uint64_t)ino, &before) == 0 &&
		       S_ISREG(before.mode) && before.nlink == 1 &&
		       before.fid.vnode == victim.vnode &&
		       before.fid.uniq == victim.uniq;
		vino = (uint64_t)ino;
		settle_sticky(fs, parent, &victim);
	}
	/* A directory removed: the creates in it that are still in our
	 * journal reach the server first (the REMOVE names only its
	 * parent, which fs_rpc waits for). */
	if ((flags & RM_DIR) && fs->wbk && ino > 0 &&
	    itab_fid(fs->itab, (uint64_t)ino, &victim) == 0) {
		const struct cairn_fid *vf = &victim;

		wb_barrier(fs->wbk, &vf, 1);
	}
	/* The object moves a version (nlink, ctime). */
	moving = (flags & RM_SELF) && wb_move_begin(fs->wbk, &victim);
	rc = remove_rpc(req, fs, parent, name, len, flags, &dir);
	if (moving)
		wb_move_end(fs->wbk, &victim, 1, rc == 0);
	if (rc)
		goto out;
	removed(fs, seq, parent, name, len, flags, &victim, vino, last,
		&before, &dir);
out:
	reply_error(req, rc);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, 0);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, RM_DIR);
}

/* --- renaming ----------------------------------------------------------- */

static const struct {
	unsigned int linux_flag;
	uint32_t rn;
} rename_bits[] = {
	{ RENAME_NOREPLACE, RN_NOREPLACE },
	{ RENAME_EXCHANGE, RN_EXCHANGE },
};

/*
 * A rename within one directory of an object whose creation answered
 * here is still in the journal, to a name the directory's listing says is
 * free (rsync, editors and compilers write a temporary name and rename
 * it): the creation goes to the server under the new name and nothing
 * else is sent (wb_rename_created). 0 when req was answered; -EAGAIN when
 * it was not: send the rename.
 */
static int rename_local(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			const char *name, size_t len, const char *newname,
			size_t newlen, const struct cairn_fid *sfid,
			uint64_t seq)
{
	struct cairn_attr dir, tmp;
	struct timespec now;
	int fresh;

	if (!fs->wbk || itab_getattr(fs->itab, parent, &dir) ||
	    !S_ISDIR(dir.mode) ||
	    dcache_lookup(fs->dc, parent, name, len, &tmp) != 1 ||
	    tmp.fid.vnode != sfid->vnode || tmp.fid.uniq != sfid->uniq ||
	    tmp.fid.vol != sfid->vol ||
	    dcache_lookup(fs->dc, parent, newname, newlen, &tmp) != 0 ||
	    wb_rename_created(fs->wbk, &dir.fid, sfid, newname, newlen))
		return -EAGAIN;
	/* The kernel's clock, as for a create answered here. */
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	dir.mtime.sec = dir.ctime.sec = now.tv_sec;
	dir.mtime.nsec = dir.ctime.nsec = (uint32_t)now.tv_nsec;
	fresh = notify_reply_begin(fs->ntf, seq);
	dcache_renamed_here(fs->dc, parent, name, len, newname, newlen);
	itab_rename(fs->itab, parent, name, len, parent, newname, newlen, 0);
	fs_take_attr(fs, &dir, fresh);
	notify_reply_end(fs->ntf);
	fuse_reply_err(req, 0);
	return 0;
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname,
		  unsigned int flags)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_rename_req q;
	struct msg_attr2 p;
	uint32_t rn = 0;
	size_t len, newlen;
	struct cairn_fid vfid, sfid;
	int64_t ino, victim;
	int fresh, afresh, rc, have_s, have_v, same, smoving, vmoving, nv;
	int vlast;
	uint64_t vn[2];
	struct cairn_attr va;

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
	    (rc = check_name(newname, &newlen)))
		goto out;
	if ((rc = itab_fid(fs->itab, parent, &q.sdir)) ||
	    (rc = itab_fid(fs->itab, newparent, &q.ddir)))
		goto out;
	q.sname = entry_name(name, len);
	q.dname = entry_name(newname, newlen);
	/* A replaced file the kernel knows may be open (fs_orphan.c). Its
	 * FID now: a break may take the name from the table before the
	 * reply. */
	victim = itab_entry(fs->itab, newparent, newname, newlen);
	have_v = victim > 0 &&
		 itab_fid(fs->itab, (uint64_t)victim, &vfid) == 0;
	ino = itab_entry(fs->itab, parent, name, len);
	have_s = ino > 0 && itab_fid(fs->itab, (uint64_t)ino, &sfid) == 0;
	/* Made here and not sent yet: made under the new name instead. */
	if (have_s && !have_v && parent == newparent && !(rn & ~RN_NOREPLACE) &&
	    rename_local(req, fs, parent, name, len, newname, newlen, &sfid,
			 seq) == 0)
		return;
	/* renamed onto a link of itself: nothing changes */
	same = have_s && have_v && sfid.vnode == vfid.vnode;
	if (have_v && !same && !(rn & RN_EXCHANGE))
		rn |= RN_KEEP;
	q.flags = rn;
	/* A directory replaced: the creates in it still in our journal
	 * reach the server first, or it would look empty there (fs_rpc
	 * waits for those in the directories the request names only). */
	if (have_v && fs->wbk) {
		const struct cairn_fid *vf = &vfid;

		wb_barrier(fs->wbk, &vf, 1);
	}
	if (have_s)
		settle_sticky(fs, parent, &sfid);
	if (have_v)
		settle_sticky(fs, newparent, &vfid);
	/* A replaced file's last link, as the kernel knows it now: once
	 * gone, the kernel's write-back of its ctime needs no server call
	 * (itab_set_gone, as for an unlink). */
	vlast = have_v && !same && !(rn & RN_EXCHANGE) &&
		itab_getattr(fs->itab, (uint64_t)victim, &va) == 0 &&
		S_ISREG(va.mode) && va.nlink == 1 &&
		va.fid.uniq == vfid.uniq;
	/* Both objects move a version (ctime; a replaced one's nlink). */
	smoving = have_s && !same && wb_move_begin(fs->wbk, &sfid);
	vmoving = have_v && !same && wb_move_begin(fs->wbk, &vfid);
	rc = fs_rpc(req, fs, OP_RENAME, &q, &p, NULL);
	wb_move_end(fs->wbk, &sfid, smoving, rc == 0);
	wb_move_end(fs->wbk, &vfid, vmoving, rc == 0);
	if (rc)
		goto out;
	/* The server breaks our promise on the objects (not in the reply):
	 * those breaks leave the directories' attributes current. */
	nv = 0;
	if (have_s)
		vn[nv++] = sfid.vnode;
	if (have_v)
		vn[nv++] = vfid.vnode;
	afresh = notify_reply_begin_except(fs->ntf, seq, vn, nv);
	fresh = afresh == 2;
	/* The objects moved (ctime) and a replaced one (nlink): not in the
	 * reply. */
	if ((ino = itab_entry(fs->itab, parent, name, len)) > 0)
		itab_attr_stale(fs->itab, (uint64_t)ino);
	if ((victim = itab_entry(fs->itab, newparent, newname, newlen)) > 0)
		itab_attr_stale(fs->itab, (uint64_t)victim);
	if (rn & RN_KEEP)
		fs_orphan_release(fs, &vfid);
	if (vlast && victim > 0) {
		va.nlink = 0;
		itab_set_gone(fs->itab, (uint64_t)victim, &va);
	}
	/* The reply: the source directory, then the destination. */
	dcache_renamed(fs->dc, parent, name, len, newparent, newname, newlen,
		       (rn & RN_EXCHANGE) != 0, &p.a, &p.b, fresh);
	itab_rename(fs->itab, parent, name, len, newparent, newname, newlen,
		    (rn & RN_EXCHANGE) != 0);
	fs_take_dir_attr(fs, &p.a, afresh > 0, fresh);
	fs_take_dir_attr(fs, &p.b, afresh > 0, fresh);
	notify_reply_end(fs->ntf);
out:
	reply_error(req, rc);
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	struct rpc_reply rep;
	char target[CAIRN_SYMLINK_MAX + 1];
	struct msg_readlink_rep p;
	struct msg_fid q;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &q.fid)) ||
	    (rc = fs_rpc(req, fs, OP_READLINK, &q, &p, &rep)))
		goto out;
	/* The kernel takes a C string: no NUL inside, and no longer than
	 * a symlink may be. */
	if (p.target.len > CAIRN_SYMLINK_MAX ||
	    memchr(p.target.p, '\0', p.target.len))
		rc = fs_bad_reply(OP_READLINK);
	else
		msg_str_copy(target, &p.target);
	rpc_reply_free(&rep);
	if (rc)
		goto out;
	fuse_reply_readlink(req, target);
	return;
out:
	reply_error(req, rc);
}

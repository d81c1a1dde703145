/*
 * fs_dir.c - FUSE operations on directories: opendir, readdir and
 * readdirplus (see fs_int.h).
 *
 * Offsets: 1 and 2 resume after the synthesised "." and "..", anything >= 3
 * (CAIRN_COOKIE_FIRST) is a server cookie.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fs_int.h"
#include "inode.h"
#include "notify.h"
#include "../lib/log.h"

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_open(req, ino, fi, 1);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi)
{
	/* Directory operations are durable when the server replies. */
	fuse_reply_err(req, 0);
}

/* One READDIR reply: its entries point into rep's buffer. */
struct dirpage {
	struct rpc_reply rep;
	struct msg_readdir_rep m;
};

static int readdir_rpc(fuse_req_t req, struct fs *fs,
		       const struct cairn_fid *fid, uint64_t cookie,
		       uint32_t max, struct dirpage *pg)
{
	struct msg_readdir_req q = { .dir = *fid, .cookie = cookie,
				     .max = max };
	int rc = fs_rpc(req, fs, OP_READDIR, &q, &pg->m, &pg->rep);

	if (rc)
		return rc;
	if (pg->m.count > max) {
		rpc_reply_free(&pg->rep);
		return fs_bad_reply(OP_READDIR);
	}
	return 0;
}

/*
 * Why entry (name, vnode) of directory dir must not reach the kernel, or
 * NULL if it may. A server that sent any of these is broken or hostile:
 * "." and ".." are synthesised here, a '/' would make a path of a name,
 * and an entry that is its own directory (or the root) would make a
 * directory loop the kernel's dcache does not expect.
 */
static const char *bad_dirent(const char *name, size_t len, uint64_t vnode,
			      fuse_ino_t dir)
{
	if (len == 0)
		return "empty name";
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return "dot name";
	if (memchr(name, '/', len))
		return "name contains '/'";
	if (vnode == 0)
		return "vnode 0";
	if (vnode == dir)
		return "the directory itself";
	if (vnode == ITAB_ROOT_INO)
		return "the root";
	return NULL;
}

/* The reply buffer being filled. */
struct dirbuf {
	char *p;
	size_t size;
	size_t used;
	int plus;
};

/* Append entry `name` (e, with e->attr only for plain readdir) resuming at
 * `next`. Returns 1, or 0 when it does not fit (nothing appended). */
static int add_dirent(fuse_req_t req, struct dirbuf *b, const char *name,
		      const struct fuse_entry_param *e, off_t next)
{
	char *at = b->p + b->used;
	size_t room = b->size - b->used;
	size_t need = b->plus
		? fuse_add_direntry_plus(req, at, room, name, e, next)
		: fuse_add_direntry(req, at, room, name, &e->attr, next);

	if (need > room)
		return 0;
	b->used += need;
	return 1;
}

/* "." and ".." from offset off; returns 1 if both fit. */
static int add_dots(fuse_req_t req, struct dirbuf *b, off_t off,
		    fuse_ino_t ino, uint64_t parent)
{
	for (off_t dot = off; dot < 2; dot++) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = dot == 0 ? ino : parent;
		e.attr.st_mode = S_IFDIR;
		if (!add_dirent(req, b, dot == 0 ? "." : "..", &e, dot + 1))
			return 0;
	}
	return 1;
}

/*
 * readdir and readdirplus. With plus, every entry but "." and ".." (ino 0:
 * no lookup reference) is an entry handed to the kernel; if the reply does
 * not reach it, those references are taken back.
 */
static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, int plus)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct dirbuf b = { .size = size, .plus = plus };
	struct dirpage pg;
	struct rbuf ents;
	struct msg_dirent de;
	uint64_t *counted = NULL;
	size_t ncounted = 0;
	struct cairn_fid fid;
	uint64_t parent;
	int fresh = 0, in_section = 0, rc;

	memset(&pg, 0, sizeof(pg));
	if ((rc = itab_fid(fs->itab, ino, &fid)) ||
	    (rc = itab_parent(fs->itab, ino, &parent)))
		goto out;
	if (!(b.p = malloc(size))) {
		rc = -ENOMEM;
		goto out;
	}
	if (!add_dots(req, &b, off, ino, parent))
		goto reply;
	/* Names average well under 32 bytes; a plus entry is ~150. */
	rc = readdir_rpc(req, fs, &fid, off < CAIRN_COOKIE_FIRST ? 0 : (uint64_t)off,
			 (uint32_t)(size / (plus ? 128 : 32) + 1), &pg);
	if (rc)
		goto out;
	if (plus && !(counted = malloc(pg.m.count * sizeof(*counted) + 1))) {
		rc = -ENOMEM;
		goto out;
	}
	fresh = notify_reply_begin(fs->ntf, seq);
	in_section = 1;
	/* READDIR promises the directory: its entries are covered. */
	if (fresh)
		itab_set_promised(fs->itab, ino);
	rbuf_init(&ents, pg.m.ents.p, pg.m.ents.len);
	while (msg_dirent_next(&ents, &de)) {
		const struct cairn_attr *a = &de.attr;
		struct fuse_entry_param e;
		char name[CAIRN_NAME_MAX + 1];
		size_t len = de.name.len;
		const char *why;

		/* The kernel takes C strings, and no cookie resumes at "."
		 * or "..": a server that sent these is broken. */
		if (len > CAIRN_NAME_MAX || memchr(de.name.p, '\0', len) ||
		    de.next_cookie < CAIRN_COOKIE_FIRST) {
			rc = fs_bad_reply(OP_READDIR);
			goto out;
		}
		msg_str_copy(name, &de.name);
		/* Skipped, not fatal: the rest of the directory stays
		 * readable (the next entry's cookie resumes past it). */
		if ((why = bad_dirent(name, len, a->fid.vnode, ino))) {
			log_warn("READDIR of vnode %llu: skipped an entry from "
				 "the server (%s)", (unsigned long long)ino, why);
			continue;
		}
		fs_fill_entry(&e, a, fresh);
		if (!add_dirent(req, &b, name, &e, (off_t)de.next_cookie))
			break;
		if (plus) {
			if ((rc = itab_add_entry(fs->itab, ino, name, len, a,
						 fresh, NULL)))
				goto out;
			counted[ncounted++] = e.ino;
		} else {
			itab_update(fs->itab, a, fresh);
		}
	}
reply:
	/* Delivered: the kernel holds the references counted. */
	if (fuse_reply_buf(req, b.p, b.used) == 0)
		ncounted = 0;
	rc = 0;
out:
	/* Entries counted but not delivered (an error, or a reply that did
	 * not reach the kernel) take their lookup references back. */
	for (size_t i = 0; i < ncounted; i++)
		itab_forget(fs->itab, counted[i], 1);
	if (rc)
		reply_error(req, rc);
	if (in_section)
		notify_reply_end(fs->ntf);
	rpc_reply_free(&pg.rep);
	free(counted);
	free(b.p);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 0);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 1);
}

/*
 * fs_xattr.c - FUSE extended attribute operations (see fs_int.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/xattr.h>
#include "fs_int.h"
#include "inode.h"
#include "notify.h"

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

/*
 * Start request w with ino's FID and xattr `name`. Returns 0, -EINVAL
 * (empty name), -ERANGE (too long), -ESTALE, or -EOPNOTSUPP for the
 * system. namespace (POSIX ACLs): the protocol refuses it, no need to ask.
 * On error w is empty.
 */
static int xattr_begin(struct fs *fs, struct wbuf *w, fuse_ino_t ino,
		       const char *name)
{
	size_t len = strlen(name);
	struct cairn_fid fid;
	int rc;

	wbuf_init(w);
	if (len == 0)
		return -EINVAL;
	if (len > CAIRN_XATTR_NAME_MAX)
		return -ERANGE;
	if ((rc = itab_fid(fs->itab, ino, &fid)))
		return rc;
	if (!strncmp(name, "system.", 7))
		return -EOPNOTSUPP;
	wire_put_fid(w, &fid);
	wire_put_str(w, name, len);
	return 0;
}

/* GETXATTR and LISTXATTR share a reply: u32 full size, blob value.
 * Answers the kernel and frees rep. */
static void reply_xattr_value(fuse_req_t req, uint16_t op,
			      struct rpc_reply *rep, struct rbuf *r,
			      size_t size)
{
	const void *val;
	uint32_t full;
	size_t n = 0;

	full = wire_get_u32(r);
	val = wire_get_blob(r, &n, size);
	if (wire_get_end(r))
		reply_error(req, fs_bad_reply(op));
	else if (size == 0)
		fuse_reply_xattr(req, full);
	else
		fuse_reply_buf(req, val, n);
	rpc_reply_free(rep);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *value, size_t size, int flags)
{
	struct fs *fs = req_fs(req);
	struct wbuf w;
	int rc;

	if (size > CAIRN_XATTR_SIZE_MAX) {
		rc = -E2BIG;
		goto out;
	}
	if ((rc = xattr_begin(fs, &w, ino, name)))
		goto out;
	itab_set_xattr_absent(fs->itab, ino, xattr_hot_bit(name), 0);
	wire_put_u32(&w, (uint32_t)flags & (XA_CREATE | XA_REPLACE));
	wire_put_blob(&w, value, size);
	rc = fs_call(req, fs, OP_SETXATTR, &w, NULL);
out:
	reply_error(req, rc);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    size_t size)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct rpc_reply rep = { 0 };
	struct wbuf w;
	struct rbuf r;
	unsigned bit;
	int rc;

	/* Known absent. Checking this first changes no answer: a hot name
	 * is a valid one, and only a known inode has bits. */
	if ((bit = xattr_hot_bit(name)) && itab_xattr_absent(fs->itab, ino, bit)) {
		rc = -ENODATA;
		goto out;
	}
	if ((rc = xattr_begin(fs, &w, ino, name)))
		goto out;
	if (size > CAIRN_XATTR_SIZE_MAX)
		size = CAIRN_XATTR_SIZE_MAX;
	wire_put_u32(&w, (uint32_t)size);
	rc = fs_call_read(req, fs, OP_GETXATTR, &w, &rep, &r);
	if (rc == -ENODATA && bit) {
		/* Valid while the promise stands: a setxattr anywhere
		 * changes the object and breaks it. */
		if (notify_reply_begin(fs->ntf, seq))
			itab_set_xattr_absent(fs->itab, ino, bit, 1);
		notify_reply_end(fs->ntf);
	}
	if (rc)
		goto out;
	reply_xattr_value(req, OP_GETXATTR, &rep, &r, size);
	return;
out:
	reply_error(req, rc);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = req_fs(req);
	struct rpc_reply rep = { 0 };
	struct wbuf w;
	struct rbuf r;
	int rc;

	if ((rc = fs_begin(fs, &w, ino)))
		goto out;
	if (size > CAIRN_XATTR_LIST_MAX)
		size = CAIRN_XATTR_LIST_MAX;
	wire_put_u32(&w, (uint32_t)size);
	if ((rc = fs_call_read(req, fs, OP_LISTXATTR, &w, &rep, &r)))
		goto out;
	reply_xattr_value(req, OP_LISTXATTR, &rep, &r, size);
	return;
out:
	reply_error(req, rc);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = req_fs(req);
	struct wbuf w;
	int rc;

	if ((rc = xattr_begin(fs, &w, ino, name)))
		goto out;
	rc = fs_call(req, fs, OP_REMOVEXATTR, &w, NULL);
out:
	reply_error(req, rc);
}

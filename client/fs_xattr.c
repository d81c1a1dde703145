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

unsigned fs_xattr_hot_all(void)
{
	return (1u << (sizeof(xattr_hot) / sizeof(xattr_hot[0]))) - 1;
}

static unsigned xattr_hot_bit(const char *name)
{
	for (size_t i = 0; i < sizeof(xattr_hot) / sizeof(xattr_hot[0]); i++)
		if (!strcmp(name, xattr_hot[i]))
			return 1u << i;
	return 0;
}

/*
 * The FID of ino and xattr `name` for a request. Returns 0, -EINVAL
 * (empty name), -ERANGE (too long), -ESTALE, or -EOPNOTSUPP for the
 * system. namespace (POSIX ACLs): the protocol refuses it, no need to ask.
 */
static int xattr_target(struct fs *fs, fuse_ino_t ino, const char *name,
			struct cairn_fid *fid, struct msg_str *s)
{
	size_t len = strlen(name);
	int rc;

	if (len == 0)
		return -EINVAL;
	if (len > CAIRN_XATTR_NAME_MAX)
		return -ERANGE;
	if ((rc = itab_fid(fs->itab, ino, fid)))
		return rc;
	if (!strncmp(name, "system.", 7))
		return -EOPNOTSUPP;
	*s = (struct msg_str){ name, len };
	return 0;
}

/* GETXATTR and LISTXATTR share a reply (p, pointing into rep): answer the
 * kernel's request for size bytes, and free rep. */
static void reply_xattr_value(fuse_req_t req, uint16_t op,
			      const struct msg_sized_rep *p,
			      struct rpc_reply *rep, size_t size)
{
	if (p->value.len > size)
		reply_error(req, fs_bad_reply(op));
	else if (size == 0)
		fuse_reply_xattr(req, p->size);
	else
		fuse_reply_buf(req, p->value.p, p->value.len);
	rpc_reply_free(rep);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *value, size_t size, int flags)
{
	struct fs *fs = req_fs(req);
	struct msg_setxattr_req q = {
		.flags = (uint32_t)flags & (XA_CREATE | XA_REPLACE),
		.value = { value, size },
	};
	int rc;

	if (size > CAIRN_XATTR_SIZE_MAX) {
		rc = -E2BIG;
		goto out;
	}
	if ((rc = xattr_target(fs, ino, name, &q.fid, &q.name)))
		goto out;
	itab_set_xattr_absent(fs->itab, ino, xattr_hot_bit(name), 0);
	rc = fs_rpc(req, fs, OP_SETXATTR, &q, NULL, NULL);
out:
	reply_error(req, rc);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    size_t size)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_getxattr_req q;
	struct msg_sized_rep p;
	struct rpc_reply rep;
	unsigned bit;
	int rc;

	/* Known absent. Checking this first changes no answer: a hot name
	 * is a valid one, and only a known inode has bits. */
	if ((bit = xattr_hot_bit(name)) && itab_xattr_absent(fs->itab, ino, bit)) {
		rc = -ENODATA;
		goto out;
	}
	if ((rc = xattr_target(fs, ino, name, &q.fid, &q.name)))
		goto out;
	if (size > CAIRN_XATTR_SIZE_MAX)
		size = CAIRN_XATTR_SIZE_MAX;
	q.size = (uint32_t)size;
	rc = fs_rpc(req, fs, OP_GETXATTR, &q, &p, &rep);
	if (rc == -ENODATA && bit) {
		/* Valid while the promise stands: a setxattr anywhere
		 * changes the object and breaks it. */
		if (notify_reply_begin(fs->ntf, seq))
			itab_set_xattr_absent(fs->itab, ino, bit, 1);
		notify_reply_end(fs->ntf);
	}
	if (rc)
		goto out;
	reply_xattr_value(req, OP_GETXATTR, &p, &rep, size);
	return;
out:
	reply_error(req, rc);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = req_fs(req);
	struct msg_listxattr_req q;
	struct msg_sized_rep p;
	struct rpc_reply rep;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &q.fid)))
		goto out;
	if (size > CAIRN_XATTR_LIST_MAX)
		size = CAIRN_XATTR_LIST_MAX;
	q.size = (uint32_t)size;
	if ((rc = fs_rpc(req, fs, OP_LISTXATTR, &q, &p, &rep)))
		goto out;
	reply_xattr_value(req, OP_LISTXATTR, &p, &rep, size);
	return;
out:
	reply_error(req, rc);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = req_fs(req);
	struct msg_removexattr_req q;
	int rc;

	if ((rc = xattr_target(fs, ino, name, &q.fid, &q.name)))
		goto out;
	rc = fs_rpc(req, fs, OP_REMOVEXATTR, &q, NULL, NULL);
out:
	reply_error(req, rc);
}

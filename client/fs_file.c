/*
 * fs_file.c - FUSE operations on open files: open (close-to-open), read,
 * write, release, fsync, fallocate (see fs_int.h). There is no flush
 * handler: writes go through before write() returns, so close() has nothing
 * to wait for, and libfuse's ENOSYS makes the kernel stop sending FLUSH
 * (one round trip into the daemon less per close).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>
#include "fs_int.h"
#include "inode.h"
#include "notify.h"

/*
 * Answer an open the inode table has counted (files only, so that unlink
 * can tell a file is open). Returns 1 when the reply did not reach the
 * kernel (interrupted): no release will come, so the caller must
 * fs_release_open(), outside any notify_reply section (it may call the
 * server).
 */
static int reply_open(fuse_req_t req, struct fuse_file_info *fi, int isdir)
{
	return fuse_reply_open(req, fi) < 0 && !isdir;
}

/*
 * open/opendir. Close-to-open: unless the promise stands and the page cache
 * holds the current version, fetch fresh attributes first and let the
 * kernel drop its cached pages (keep_cache 0). When the cache may stay,
 * the inode table is looked at once and the server not at all.
 */
void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     int isdir)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	int trunc = !isdir && (fi->flags & O_TRUNC);
	struct cairn_fid fid;
	struct cairn_attr a;
	int fresh, lost, rc;

	fi->fh = 0;
	rc = itab_open_begin(fs->itab, ino, !trunc, !isdir, &fid);
	if (rc < 0)
		goto out;
	if (rc == 1) {
		fi->keep_cache = 1;
		if (reply_open(req, fi, isdir))
			fs_release_open(fs, ino);
		return;
	}
	rc = trunc ? fs_truncate(req, fs, &fid, &a)
		   : fs_getattr(req, fs, &fid, &a);
	if (rc)
		goto out;
	fresh = notify_reply_begin(fs->ntf, seq);
	itab_open_end(fs->itab, ino, &a, fresh, !isdir);
	fi->keep_cache = 0;
	lost = reply_open(req, fi, isdir);
	notify_reply_end(fs->ntf);
	/* Only now: it may call the server (docs/LOCKING.md). */
	if (lost)
		fs_release_open(fs, ino);
	return;
out:
	reply_error(req, rc);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_open(req, ino, fi, 0);
}

/*
 * One READ of up to `want` bytes at off. The data stays in the reply's
 * buffer, handed to *rep; *iov points at it.
 */
static int read_rpc(fuse_req_t req, struct fs *fs,
		    const struct cairn_fid *fid, uint64_t off, uint32_t want,
		    struct rpc_reply *rep, struct iovec *iov,
		    struct cairn_attr *a)
{
	struct msg_read_req q = { .fid = *fid, .off = off, .len = want };
	struct msg_read_rep p;
	int rc;

	if ((rc = fs_rpc(req, fs, OP_READ, &q, &p, rep)))
		return rc;
	if (p.data.len > want) {
		rpc_reply_free(rep);
		return fs_bad_reply(OP_READ);
	}
	iov->iov_base = (void *)p.data.p;
	iov->iov_len = p.data.len;
	*a = p.attr;
	return 0;
}

/*
 * The kernel gets the data straight from the reply buffers, without a copy.
 * max_write/max_pages keep kernel reads within one READ (the common case:
 * one buffer, nothing allocated here); anything larger is split, and its
 * pieces go to the kernel as one iovec.
 */
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	size_t nmax = size ? (size - 1) / CAIRN_MAX_IO + 1 : 0;
	struct rpc_reply rep1, *rep = &rep1, *reps = NULL;
	struct iovec iov1, *iov = &iov1, *iovs = NULL;
	struct cairn_fid fid;
	struct cairn_attr a;
	size_t n = 0, got = 0;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (nmax > 1) {
		reps = calloc(nmax, sizeof(*reps));
		iovs = calloc(nmax, sizeof(*iovs));
		if (!reps || !iovs) {
			rc = -ENOMEM;
			goto out;
		}
		rep = reps;
		iov = iovs;
	}
	while (got < size) {
		uint32_t want = size - got > CAIRN_MAX_IO ? CAIRN_MAX_IO
							  : (uint32_t)(size - got);

		if ((rc = read_rpc(req, fs, &fid, (uint64_t)off + got, want,
				   &rep[n], &iov[n], &a)))
			goto out;
		got += iov[n].iov_len;
		if (iov[n++].iov_len < want)
			break; /* end of file */
	}
	if (n)
		fs_note_attrs(fs, seq, &a, NULL);
	if (n <= 1)
		fuse_reply_buf(req, n ? iov[0].iov_base : NULL, got);
	else
		fuse_reply_iov(req, iov, (int)n);
out:
	if (rc)
		reply_error(req, rc);
	for (size_t i = 0; i < n; i++)
		rpc_reply_free(&rep[i]);
	free(reps);
	free(iovs);
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
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
		struct msg_write_req q = {
			.fid = fid,
			.off = (uint64_t)off + done,
			.flags = flags,
			.data = { buf + done, n },
		};
		struct msg_attr p;

		if ((rc = fs_rpc(req, fs, OP_WRITE, &q, &p, NULL)))
			break;
		a = p.attr;
		done += n;
	}
	if (done) {
		fs_note_attrs(fs, seq, &a, NULL);
		fuse_reply_write(req, done);
		return;
	}
out:
	reply_error(req, rc);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);

	/* Reply first: close() does not wait for a silly name's removal
	 * (req is gone after the reply). */
	fuse_reply_err(req, 0);
	fs_release_open(fs, ino);
}

void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct msg_fsync_req q = { .flags = datasync ? FS_DATASYNC : 0 };
	int rc;

	if (!(rc = itab_fid(fs->itab, ino, &q.fid)))
		rc = fs_rpc(req, fs, OP_FSYNC, &q, NULL, NULL);
	reply_error(req, rc);
}

void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		     off_t length, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_fallocate_req q = {
		.mode = (uint32_t)mode,
		.off = (uint64_t)offset,
		.len = (uint64_t)length,
	};
	struct msg_attr p;
	int rc;

	if (offset < 0 || length <= 0) {
		rc = -EINVAL;
		goto out;
	}
	if ((rc = itab_fid(fs->itab, ino, &q.fid)) ||
	    (rc = fs_rpc(req, fs, OP_FALLOCATE, &q, &p, NULL)))
		goto out;
	fs_note_attrs(fs, seq, &p.attr, NULL);
out:
	reply_error(req, rc);
}

/*
 * fs_file.c - FUSE operations on open files: open (close-to-open), read,
 * write, release, fsync, fallocate (see fs_int.h). There is no flush
 * handler: writes go through before write() returns, so close() has nothing
 * to wait for, and libfuse's ENOSYS makes the kernel stop sending FLUSH
 * (one round trip into the daemon less per close).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "fs_int.h"
#include "inode.h"
#include "notify.h"

/*
 * Count an open file (not directories) so unlink can tell it is open, and
 * answer. Returns 1 when the reply did not reach the kernel (interrupted):
 * no release will come, so the caller must fs_release_open(), outside any
 * notify_reply section (it may call the server).
 */
static int reply_open(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		      struct fuse_file_info *fi, int isdir)
{
	if (!isdir)
		itab_open_inc(fs->itab, ino);
	return fuse_reply_open(req, fi) < 0 && !isdir;
}

/*
 * open/opendir. Close-to-open: unless the promise stands and the page cache
 * holds the current version, fetch fresh attributes first and let the
 * kernel drop its cached pages (keep_cache 0).
 */
void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     int isdir)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	int fresh, lost, rc;

	fi->fh = 0;
	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (!isdir && (fi->flags & O_TRUNC)) {
		rc = fs_truncate(req, fs, &fid, &a);
	} else if (itab_keep_cache(fs->itab, ino)) {
		fi->keep_cache = 1;
		if (reply_open(req, fs, ino, fi, isdir))
			fs_release_open(fs, ino);
		return;
	} else {
		rc = fs_getattr(req, fs, &fid, &a);
	}
	if (rc)
		goto out;
	fresh = notify_reply_begin(fs->ntf, seq);
	itab_update(fs->itab, &a, fresh);
	if (fresh)
		itab_set_cached(fs->itab, ino, a.dv);
	fi->keep_cache = 0;
	lost = reply_open(req, fs, ino, fi, isdir);
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

/* One READ of up to `want` bytes at off into buf; *n gets the count. */
static int read_rpc(fuse_req_t req, struct fs *fs,
		    const struct cairn_fid *fid, uint64_t off, uint32_t want,
		    char *buf, size_t *n, struct cairn_attr *a)
{
	struct msg_read_req q = { .fid = *fid, .off = off, .len = want };
	struct msg_read_rep p;
	struct rpc_reply rep;
	int rc;

	if ((rc = fs_rpc(req, fs, OP_READ, &q, &p, &rep)))
		return rc;
	if (p.data.len > want) {
		rc = fs_bad_reply(OP_READ);
	} else {
		memcpy(buf, p.data.p, p.data.len);
		*n = p.data.len;
		*a = p.attr;
	}
	rpc_reply_free(&rep);
	return rc;
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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
		size_t n = 0;

		if ((rc = read_rpc(req, fs, &fid, (uint64_t)off + got, want,
				   buf + got, &n, &a)))
			goto out;
		have_attr = 1;
		got += n;
		if (n < want)
			break; /* end of file */
	}
	if (have_attr)
		fs_note_attrs(fs, seq, &a, NULL);
	fuse_reply_buf(req, buf, got);
	free(buf);
	return;
out:
	free(buf);
	reply_error(req, rc);
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

/*
 * fuseio.c - the session's reads and writes of /dev/fuse (fuseio.h).
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "fuseio.h"

/* The request this thread is handling asked for set-user-ID and
 * set-group-ID to go (set by io_read, which libfuse calls on the thread
 * that then runs the handler). */
static __thread int req_kill;

static uint64_t init_unique;   /* the INIT request's; 0 once answered */
static int kernel_offers;      /* its flags had FUSE_HANDLE_KILLPRIV_V2 */

/* The u32 at offset off of a request's argument (alen bytes), or 0 when
 * the argument is shorter. */
static uint32_t arg_u32(const char *arg, size_t alen, size_t off)
{
	uint32_t v = 0;

	if (off + sizeof(v) <= alen)
		memcpy(&v, arg + off, sizeof(v));
	return v;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *h = buf;
	const char *arg = (const char *)buf + sizeof(*h);
	size_t alen;

	(void)userdata;
	req_kill = 0;
	if (n < (ssize_t)sizeof(*h))
		return n;
	alen = (size_t)n - sizeof(*h);
	switch (h->opcode) {
	case FUSE_INIT:
		kernel_offers =
			arg_u32(arg, alen, offsetof(struct fuse_init_in,
						    major)) == 7 &&
			arg_u32(arg, alen, offsetof(struct fuse_init_in,
						    minor)) >= 33 &&
			(arg_u32(arg, alen, offsetof(struct fuse_init_in,
						     flags)) &
			 FUSE_HANDLE_KILLPRIV_V2);
		__atomic_store_n(&init_unique, h->unique, __ATOMIC_RELEASE);
		break;
	case FUSE_WRITE:
		req_kill = (arg_u32(arg, alen, offsetof(struct fuse_write_in,
							write_flags)) &
			    FUSE_WRITE_KILL_SUIDGID) != 0;
		break;
	case FUSE_SETATTR:
		req_kill = (arg_u32(arg, alen, offsetof(struct fuse_setattr_in,
							valid)) &
			    FATTR_KILL_SUIDGID) != 0;
		break;
	}
	return n;
}

/*
 * The INIT reply goes out with FUSE_HANDLE_KILLPRIV_V2 added when the
 * kernel offered it (libfuse 3.14 knows no such capability). Everything
 * else is written as it is.
 */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	uint64_t init = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out out;

	(void)userdata;
	if (init && count == 2 && iov[0].iov_len == sizeof(*oh) &&
	    oh->unique == init && oh->error == 0 &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4 &&
	    iov[1].iov_len <= sizeof(out)) {
		__atomic_store_n(&init_unique, 0, __ATOMIC_RELEASE);
		if (kernel_offers) {
			memcpy(&out, iov[1].iov_base, iov[1].iov_len);
			out.flags |= FUSE_HANDLE_KILLPRIV_V2;
			iov[1].iov_base = &out;
		}
	}
	return writev(fd, iov, count);
}

int fuseio_attach(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
	};

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

int fuseio_req_kill(void)
{
	return req_kill;
}

int fuseio_killpriv(void)
{
	return kernel_offers;
}

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
#include "../lib/log.h"
#include "fuseio.h"
#include "fusering.h"

/* The request this thread is handling asked for set-user-ID and
 * set-group-ID to go (set by io_read, which libfuse calls on the thread
 * that then runs the handler). */
static __thread int req_kill;

static uint64_t init_unique;   /* the INIT request's; 0 once answered */
static int kernel_offers;      /* its flags had FUSE_HANDLE_KILLPRIV_V2 */
static int ring_offered;       /* and FUSE_OVER_IO_URING (protocol 7.42) */
static int ring_wanted;        /* fuseio_attach's ring */
static struct fuse_session *session;

/* FUSE_OVER_IO_URING (1ULL << 41) as a bit of flags2. */
#define FR_FLAGS2_URING (1u << 9)

/* The u32 at offset off of a request's argument (alen bytes), or 0 when
 * the argument is shorter. */
static uint32_t arg_u32(const char *arg, size_t alen, size_t off)
{
	uint32_t v = 0;

	if (off + sizeof(v) <= alen)
		memcpy(&v, arg + off, sizeof(v));
	return v;
}

/* What the session must know of a request before its handler runs; on
 * the thread that then runs it (read from /dev/fuse or taken from the
 * ring, fusering.c). */
void fuseio_note(const void *buf, size_t n)
{
	const struct fuse_in_header *h = buf;
	const char *arg = (const char *)buf + sizeof(*h);
	size_t alen;
	uint32_t flags;

	req_kill = 0;
	if (n < sizeof(*h))
		return;
	alen = n - sizeof(*h);
	switch (h->opcode) {
	case FUSE_INIT:
		flags = arg_u32(arg, alen, offsetof(struct fuse_init_in, flags));
		kernel_offers =
			arg_u32(arg, alen, offsetof(struct fuse_init_in,
						    major)) == 7 &&
			arg_u32(arg, alen, offsetof(struct fuse_init_in,
						    minor)) >= 33 &&
			(flags & FUSE_HANDLE_KILLPRIV_V2);
		ring_offered = (flags & FUSE_INIT_EXT) &&
			(arg_u32(arg, alen, offsetof(struct fuse_init_in,
						     flags2)) & FR_FLAGS2_URING);
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
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	fuseio_note(buf, n < 0 ? 0 : (size_t)n);
	return n;
}

/* The payload a ring entry must hold for this INIT reply: the kernel's
 * largest request or reply (fs/fuse/dev_uring.c, fuse_uring_create). */
static size_t ring_payload(const struct fuse_init_out *out)
{
	size_t pages = (out->flags & FUSE_MAX_PAGES) && out->max_pages ?
		out->max_pages : 32;
	size_t w = out->max_write < 4096 ? 4096 : out->max_write;

	return w > pages * 4096 ? w : pages * 4096;
}

/*
 * The INIT reply goes out with FUSE_HANDLE_KILLPRIV_V2 added when the
 * kernel offered it (libfuse 3.14 knows no such capability), and with
 * FUSE_OVER_IO_URING when the kernel offered that and the ring's threads
 * could be made (fusering.h). A reply to a request taken from the ring
 * goes back through the ring. Everything else is written as it is.
 */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	uint64_t init = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out out;
	int ring = 0;
	ssize_t n;

	(void)userdata;
	if (init && count == 2 && iov[0].iov_len == sizeof(*oh) &&
	    oh->unique == init && oh->error == 0 &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4 &&
	    iov[1].iov_len <= sizeof(out)) {
		__atomic_store_n(&init_unique, 0, __ATOMIC_RELEASE);
		memset(&out, 0, sizeof(out));
		memcpy(&out, iov[1].iov_base, iov[1].iov_len);
		if (kernel_offers)
			out.flags |= FUSE_HANDLE_KILLPRIV_V2;
		if (ring_wanted && ring_offered &&
		    iov[1].iov_len == sizeof(out)) {
			int rc = fusering_prepare(session, fd,
						  ring_payload(&out));

			if (rc == 0) {
				out.flags |= FUSE_INIT_EXT;
				out.flags2 |= FR_FLAGS2_URING;
				ring = 1;
			} else {
				log_warn("the kernel offers FUSE over io_uring, "
					 "but its rings cannot be set up (%s): "
					 "requests go through /dev/fuse",
					 strerror(-rc));
			}
		}
		iov[1].iov_base = &out;
		n = writev(fd, iov, count);
		if (ring)
			fusering_go(n >= 0);
		return n;
	}
	if (oh->unique && (n = fusering_reply(iov, count)) >= 0)
		return n;
	return writev(fd, iov, count);
}

int fuseio_attach(struct fuse_session *se, int ring)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
	};

	session = se;
	ring_wanted = ring;
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

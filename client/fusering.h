/*
 * fusering.h - FUSE requests over io_uring (Linux 6.14+, protocol 7.42).
 *
 * Why: a request read from /dev/fuse wakes whichever daemon thread sleeps
 * in read(), usually on the other CPU, and the reply wakes the caller
 * back across CPUs; on this project's virtual machines each such wake-up
 * costs 20-60 us, most of an open(), a create or a cold lookup that the
 * daemon answers from its own caches. Over io_uring the kernel queues a
 * request on the queue of the CPU the caller runs on, so a daemon thread
 * pinned to that CPU takes it and the caller is woken where it slept.
 *
 * How: one queue per possible CPU; per queue, threads pinned to that CPU,
 * each with its own ring (IORING_SETUP_SQE128) and one registered entry
 * (a 288-byte header buffer and a payload buffer of the connection's
 * largest request). A thread takes a request (a completion of its
 * REGISTER or COMMIT_AND_FETCH), rebuilds the bytes read(2) would have
 * returned and runs libfuse's handler with fuse_session_process_buf; the
 * reply, on whatever thread the handler gives it (fuseio's writev hook
 * calls fusering_reply), is kept for the entry; the entry's thread then
 * commits it and fetches the next request in one submission. A queue
 * whose last idle thread takes a request starts another (up to
 * FR_THREADS_MAX), as libfuse's multi-threaded loop does, so a handler
 * that blocks (a lock wait, a server call) never stalls its CPU's queue.
 * A thread that takes a bulk request (a large READ or WRITE) floats to
 * any CPU until it takes a small one (fusering.c, bulk).
 *
 * FORGET, INTERRUPT and INIT still come through /dev/fuse (libfuse's loop
 * keeps reading it) and notifications are still written there. A reply
 * to a request that came from the ring must go back through the ring: the
 * kernel finds it nowhere else.
 *
 * The kernel routes requests to the ring only when every queue has an
 * entry, and once the INIT reply promised the ring it holds every request
 * until then; so everything that can fail here (memory, io_uring_setup)
 * is done before the INIT reply (fusering_prepare), and the promise is
 * made only when that succeeded. A REGISTER the kernel refuses turns the
 * ring off in the kernel, which then falls back to /dev/fuse.
 */
#ifndef CAIRN_CLIENT_FUSERING_H
#define CAIRN_CLIENT_FUSERING_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fuse_session;

/* The kernel's switch: 1 when /sys/module/fuse/parameters/enable_uring
 * is on (turning it on first when want and we may), 0 when not. */
int fusering_enable(int want);
/* Before the INIT reply: allocate the queues' first threads and rings for
 * payloads of up to payload bytes. 0 (the reply may promise the ring) or
 * a negative errno (it must not; nothing is left allocated). */
int fusering_prepare(struct fuse_session *se, int fd, size_t payload);
/* After the INIT reply was written: ok nonzero starts the threads'
 * REGISTERs, zero undoes fusering_prepare. */
void fusering_go(int ok);
/* A reply (iov[0] the fuse_out_header) to a request that came from the
 * ring: kept for its entry, and the bytes taken returned. -1 when the
 * request did not come from the ring (write it to /dev/fuse). */
ssize_t fusering_reply(const struct iovec *iov, int count);
/* After the unmount: wait for the threads (the kernel ended their
 * entries) and free the rings. */
void fusering_stop(void);
/* `cairn status MOUNTPOINT`: the fuse.* keys. */
void fusering_print_stats(void *unused, FILE *f);

#endif

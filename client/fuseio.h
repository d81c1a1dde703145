/*
 * fuseio.h - the session's reads and writes of /dev/fuse, through
 * libfuse's custom I/O hooks, for what libfuse 3.14 does not pass on.
 *
 * FUSE_HANDLE_KILLPRIV_V2: the kernel then marks a file system SB_NOSEC,
 * and an inode without set-user-ID, set-group-ID or file capabilities is
 * marked S_NOSEC after its first write; without it the kernel asks the
 * daemon for security.capability (a GETXATTR round trip into the daemon,
 * 20-50 us here) before every write(2). libfuse 3.14 has no capability
 * for it, so the INIT reply gets the flag here when the kernel offered
 * it. In exchange the file system clears set-user-ID and set-group-ID
 * itself where the kernel asks (FUSE_WRITE_KILL_SUIDGID on a WRITE,
 * FATTR_KILL_SUIDGID on a SETATTR): libfuse drops those flags too, so
 * the read hook notes them for the handler of that request
 * (fuseio_req_kill), which sends the change to the server with the
 * caller's credentials; the server clears the bits on a write or
 * truncate by anyone but root (server/handlers.c).
 *
 * FUSE_OVER_IO_URING likewise: when the kernel offers it and the mount
 * wants it, the INIT reply takes it once fusering.h's threads and rings
 * exist, and from then on every reply is offered to the ring first
 * (fusering_reply): one to a request taken from the ring goes back
 * through it, everything else to /dev/fuse.
 */
#ifndef CAIRN_CLIENT_FUSEIO_H
#define CAIRN_CLIENT_FUSEIO_H

#include <stddef.h>

struct fuse_session;

/* Use the hooks on se's /dev/fuse descriptor (after fuse_session_mount,
 * before the session loop); ring nonzero: take requests over io_uring
 * when the kernel offers it (fusering.h). 0 or a negative errno. */
int fuseio_attach(struct fuse_session *se, int ring);
/* Note what the session must know of the request in buf (n bytes, as
 * read(2) from /dev/fuse gives it) on the thread about to handle it. */
void fuseio_note(const void *buf, size_t n);
/* The request this thread handles asked for set-user-ID and set-group-ID
 * to go (a WRITE or SETATTR by a process without CAP_FSETID). */
int fuseio_req_kill(void);
/* The kernel offered FUSE_HANDLE_KILLPRIV_V2 and the INIT reply took it. */
int fuseio_killpriv(void);

#endif

/*
 * ctl.h - the mount daemon's control endpoint, behind `cairn status
 * MOUNTPOINT` (the modern `fs getcacheparms`).
 *
 * What it speaks: a unix stream socket. A client sends one request line
 * and gets text back, then end of file. The one request today is
 * "STATUS\n", answered with `key value` lines, the first being
 * "mount MOUNTPOINT" (so a client can tell it reached the right daemon).
 * Anything else is answered with one "error REASON" line. Keys are a
 * stable interface, listed in docs/cairn.1 (cairn status); new keys may
 * appear, none is renamed.
 *
 * Where: the path is the caller's (cairn mount uses mnt_ctl_path, next to
 * the pid file in the runtime directory). That directory must belong to
 * this user and be closed to others (mode 0700): then only this user and
 * root can reach the socket, which is made mode 0600 as well; a peer of
 * another uid (other than root) is refused all the same. A socket file
 * left by a daemon that was killed is replaced; at exit the file is
 * removed only while it is still this daemon's (a newer mount on the
 * same point may have replaced it).
 *
 * Threads and locks: one thread of its own accepts and serves connections
 * one at a time, so a status request never occupies a FUSE thread or the
 * rpc reader, and never waits for the server. What it prints comes from
 * relaxed atomic counters (rpc_get_stats, notify_get_stats) and from
 * leaf locks held for a moment (the rpc's mu, the notifier's q_lock, and
 * the inode table's lock for one walk of the table: itab_get_counts). It
 * holds no lock of its own while it calls them. A client that sends
 * nothing or does not read is dropped after CTL_IO_TIMEOUT_MS; ctl_destroy
 * wakes the thread at once, even in the middle of a connection.
 *
 * Sections: other modules add lines (the chunk cache its cache.* keys)
 * with ctl_add_section before ctl_start. A section runs on the ctl thread
 * and follows the same rules: no waiting on the network, no lock held
 * for long, keys prefixed with the module's name.
 *
 * Life cycle: ctl_create() (no thread, nothing on disk: safe before fork)
 * -> ctl_add_section()* -> ctl_start() -> ctl_destroy() (stops the thread
 * and removes the socket). ctl_destroy must come before the rpc, notifier,
 * inode table and section owners are destroyed.
 */
#ifndef CAIRN_CLIENT_CTL_H
#define CAIRN_CLIENT_CTL_H

#include <stdio.h>

struct ctl;
struct rpc;
struct notify;
struct itab;

/* How long one connection may take to send its request and read the
 * answer. `cairn status` waits as long for the answer. */
#define CTL_IO_TIMEOUT_MS 2000
/* Sections beyond the built-in ones. */
#define CTL_SECTIONS_MAX  8

struct ctl_info {
	const char *mnt;       /* absolute mount point (copied) */
	const char *server;    /* "HOST:PORT" (copied) */
	struct rpc *rpc;       /* borrowed; NULL leaves its keys out */
	struct notify *ntf;    /* borrowed; NULL leaves its keys out */
	struct itab *itab;     /* borrowed; NULL leaves its keys out */
};

/* Returns 0 and *out, or -ENOMEM. Uptime counts from here. */
int ctl_create(const struct ctl_info *ci, struct ctl **out);

/*
 * Add a section: fn(arg, f) writes `key value` lines to f for every STATUS
 * request, after the built-in keys, in the order added. arg is borrowed
 * and must stay valid until ctl_destroy. Returns 0, -EBUSY once started,
 * or -ENOSPC beyond CTL_SECTIONS_MAX.
 */
int ctl_add_section(struct ctl *c, void (*fn)(void *arg, FILE *f), void *arg);

/*
 * Create the socket at path and start serving. Returns 0, or a negative
 * errno: -ENAMETOOLONG (path does not fit a unix socket address), -EPERM
 * (its directory is not this user's or is open to others), -EEXIST
 * (something other than a socket is at path), or what socket(), bind(),
 * listen() or pthread_create() failed with.
 */
int ctl_start(struct ctl *c, const char *path);

/* Write the STATUS answer to f (what a client gets; tests use it). */
void ctl_print_status(struct ctl *c, FILE *f);

/* Stop the thread, remove the socket if it is still ours, free. NULL is
 * allowed. */
void ctl_destroy(struct ctl *c);

#endif

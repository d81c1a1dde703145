/*
 * ctl.c - the mount daemon's control endpoint (see ctl.h for the contract).
 *
 * States: created (no socket, no thread) -> started (listening, thread
 * running) -> destroyed. The section table is written only while created
 * and read only by the thread, so it needs no lock; `started` is read and
 * written only by the owner (cairn mount's main thread).
 *
 * The thread waits in poll() on the listening socket and on the read end
 * of a pipe that ctl_destroy writes to; every wait of a connection (its
 * request, our answer) polls that pipe too, so stopping never waits for a
 * client. Connections are non-blocking and served one at a time: a status
 * request is rare and answered in microseconds, so a queue of them costs
 * nothing, and one thread is all a stalled client can hold up.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "ctl.h"
#include "inode.h"
#include "notify.h"
#include "rpc.h"
#include "../lib/log.h"
#include "../lib/msg.h"

#define CTL_REQ_MAX 128   /* longest request line */

struct ctl_section {
	void (*fn)(void *arg, FILE *f);
	void *arg;
};

struct ctl {
	char *mnt;
	char *server;
	struct rpc *rpc;
	struct notify *ntf;
	struct itab *itab;
	struct timespec t0;            /* CLOCK_MONOTONIC at ctl_create */

	struct ctl_section sec[CTL_SECTIONS_MAX];
	unsigned nsec;

	int lfd;                       /* listening socket, -1 before start */
	int wake[2];                   /* ctl_destroy writes wake[1] */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;                     /* the socket file we bound */
	ino_t ino;
	pthread_t thread;
	int started;
};

int ctl_create(const struct ctl_info *ci, struct ctl **out)
{
	struct ctl *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->mnt = strdup(ci->mnt ? ci->mnt : "");
	c->server = strdup(ci->server ? ci->server : "");
	if (!c->mnt || !c->server) {
		free(c->mnt);
		free(c->server);
		free(c);
		return -ENOMEM;
	}
	c->rpc = ci->rpc;
	c->ntf = ci->ntf;
	c->itab = ci->itab;
	c->lfd = -1;
	c->wake[0] = c->wake[1] = -1;
	clock_gettime(CLOCK_MONOTONIC, &c->t0);
	*out = c;
	return 0;
}

int ctl_add_section(struct ctl *c, void (*fn)(void *arg, FILE *f), void *arg)
{
	if (c->started)
		return -EBUSY;
	if (c->nsec >= CTL_SECTIONS_MAX)
		return -ENOSPC;
	c->sec[c->nsec].fn = fn;
	c->sec[c->nsec].arg = arg;
	c->nsec++;
	return 0;
}

/* ----------------------------------------------------------- the answer */

static unsigned long long mean(uint64_t total, uint64_t n)
{
	return n ? (unsigned long long)(total / n) : 0;
}

static void print_rpc(struct rpc *r, FILE *f)
{
	struct rpc_stats st;

	rpc_get_stats(r, &st);
	fprintf(f, "rpc.connected %d\n", st.connected);
	fprintf(f, "rpc.reconnects %llu\n", (unsigned long long)st.reconnects);
	fprintf(f, "rpc.lapses %llu\n", (unsigned long long)st.lapses);
	fprintf(f, "rpc.calls %llu\n", (unsigned long long)st.calls);
	fprintf(f, "rpc.failed %llu\n", (unsigned long long)st.failed);
	fprintf(f, "rpc.waiting %u\n", st.waiting);
	fprintf(f, "rpc.us_mean %llu\n", mean(st.us_total, st.calls));
	fprintf(f, "rpc.us_max %llu\n", (unsigned long long)st.us_max);
	fprintf(f, "rpc.bytes_out %llu\n", (unsigned long long)st.bytes_out);
	fprintf(f, "rpc.bytes_in %llu\n", (unsigned long long)st.bytes_in);
	for (unsigned op = 1; op < OP__COUNT; op++) {
		const struct rpc_op_stats *o = &st.op[op];
		char name[32];
		size_t i;

		if (!msg_desc(op))
			continue;
		/* Lower case, as the server's STATUS: "rpc.getattr.calls". */
		for (i = 0; msg_name(op)[i] && i < sizeof(name) - 1; i++)
			name[i] = (char)tolower((unsigned char)msg_name(op)[i]);
		name[i] = '\0';
		fprintf(f, "rpc.%s.calls %llu\n", name,
			(unsigned long long)o->calls);
		fprintf(f, "rpc.%s.bytes_out %llu\n", name,
			(unsigned long long)o->bytes_out);
		fprintf(f, "rpc.%s.bytes_in %llu\n", name,
			(unsigned long long)o->bytes_in);
		fprintf(f, "rpc.%s.us_mean %llu\n", name,
			mean(o->us_total, o->calls));
		fprintf(f, "rpc.%s.us_max %llu\n", name,
			(unsigned long long)o->us_max);
	}
	fprintf(f, "data.fetched_bytes %llu\n",
		(unsigned long long)st.read_bytes);
}

static void print_itab(struct itab *t, FILE *f)
{
	struct itab_counts ic;

	itab_get_counts(t, &ic);
	fprintf(f, "inodes %zu\n", ic.inodes);
	fprintf(f, "entries %zu\n", ic.entries);
	fprintf(f, "negative_entries %zu\n", ic.negative);
	fprintf(f, "promises %zu\n", ic.promises);
	fprintf(f, "orphans %zu\n", ic.orphans);
}

static void print_notify(struct notify *n, FILE *f)
{
	struct notify_stats ns;

	notify_get_stats(n, &ns);
	fprintf(f, "cb_breaks %llu\n", (unsigned long long)ns.pushes);
	fprintf(f, "cb_break_records %llu\n", (unsigned long long)ns.breaks);
	fprintf(f, "cb_acks %llu\n", (unsigned long long)ns.acks);
	fprintf(f, "cb_ack_us_mean %llu\n", mean(ns.ack_us_total, ns.acks));
	fprintf(f, "cb_ack_us_max %llu\n", (unsigned long long)ns.ack_us_max);
	fprintf(f, "cb_invalidations %llu\n",
		(unsigned long long)ns.invals_sent);
	fprintf(f, "cb_invalidations_failed %llu\n",
		(unsigned long long)ns.invals_failed);
	fprintf(f, "cb_queued %llu\n", (unsigned long long)ns.queued);
	fprintf(f, "cb_reconnect_breaks %llu\n",
		(unsigned long long)ns.reconnects);
	fprintf(f, "cb_epochs %llu\n", (unsigned long long)ns.epochs);
	fprintf(f, "cb_epoch_rescues %llu\n",
		(unsigned long long)ns.rescues);
	fprintf(f, "cb_barriers %llu\n", (unsigned long long)ns.barriers);
	fprintf(f, "cb_stale_others %llu\n",
		(unsigned long long)ns.stale_others);
}

void ctl_print_status(struct ctl *c, FILE *f)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	fprintf(f, "mount %s\n", c->mnt);
	fprintf(f, "server %s\n", c->server);
	fprintf(f, "pid %d\n", (int)getpid());
	fprintf(f, "uptime_s %lld\n",
		(long long)((now.tv_sec - c->t0.tv_sec) * 1000L +
			    (now.tv_nsec - c->t0.tv_nsec) / 1000000L) / 1000);
	if (c->rpc)
		print_rpc(c->rpc, f);
	if (c->itab)
		print_itab(c->itab, f);
	if (c->ntf)
		print_notify(c->ntf, f);
	for (unsigned i = 0; i < c->nsec; i++)
		c->sec[i].fn(c->sec[i].arg, f);
}

/* ------------------------------------------------------ one connection */

static long ms_left(const struct timespec *dl)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (dl->tv_sec - now.tv_sec) * 1000L +
	       (dl->tv_nsec - now.tv_nsec) / 1000000L;
}

/*
 * Wait until fd is ready for `events`, the deadline passes or ctl_destroy
 * calls. Returns 0 when ready, -ETIMEDOUT, -ESHUTDOWN or a negative errno.
 */
static int io_wait(struct ctl *c, int fd, short events,
		   const struct timespec *dl)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = events },
				       { .fd = c->wake[0], .events = POLLIN } };
		long ms = ms_left(dl);
		int n;

		if (ms <= 0)
			return -ETIMEDOUT;
		n = poll(p, 2, (int)ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (p[1].revents)
			return -ESHUTDOWN;
		if (p[0].revents)
			return 0;
	}
}

/* Read the request line into buf (NUL-terminated, without "\r\n"). */
static int read_request(struct ctl *c, int fd, char *buf, size_t bufsz,
			const struct timespec *dl)
{
	size_t len = 0;

	for (;;) {
		ssize_t n;
		int ret;

		if ((ret = io_wait(c, fd, POLLIN, dl)))
			return ret;
		n = recv(fd, buf + len, bufsz - 1 - len, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		len += (size_t)n;
		buf[len] = '\0';
		if (memchr(buf, '\n', len)) {
			buf[strcspn(buf, "\r\n")] = '\0';
			return 0;
		}
		if (len == bufsz - 1)
			return -EMSGSIZE;
	}
}

static int write_all(struct ctl *c, int fd, const char *p, size_t len,
		     const struct timespec *dl)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		int ret;

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((ret = io_wait(c, fd, POLLOUT, dl)))
				return ret;
			continue;
		}
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 1 if the peer is root or this user. */
static int peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return 0;
	return cr.uid == 0 || cr.uid == geteuid();
}

static void serve_conn(struct ctl *c, int fd)
{
	char req[CTL_REQ_MAX], *text = NULL;
	size_t len = 0;
	struct timespec dl;
	FILE *f;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += CTL_IO_TIMEOUT_MS / 1000;
	if ((ret = read_request(c, fd, req, sizeof(req), &dl)) < 0) {
		if (ret != -ESHUTDOWN && ret != -EPIPE)
			log_debug("control request: %s", strerror(-ret));
		return;
	}
	/* Refused after the request is read: closing with it unread would
	 * reset the connection before the client reads why. */
	if (!peer_allowed(fd)) {
		static const char no[] = "error permission denied\n";

		write_all(c, fd, no, sizeof(no) - 1, &dl);
		return;
	}
	/* The answer is made whole in memory first, so the counters are
	 * read in one go and a slow reader holds up nothing but itself. */
	if (!(f = open_memstream(&text, &len))) {
		log_warn("control request: %s", strerror(errno));
		return;
	}
	if (!strcmp(req, "STATUS"))
		ctl_print_status(c, f);
	else
		fprintf(f, "error unknown request\n");
	if (fclose(f) == 0 && (ret = write_all(c, fd, text, len, &dl)) < 0 &&
	    ret != -ESHUTDOWN)
		log_debug("control answer: %s", strerror(-ret));
	free(text);
}

static void *ctl_main(void *arg)
{
	struct ctl *c = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = c->lfd, .events = POLLIN },
				       { .fd = c->wake[0], .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("control socket: poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			/* Out of descriptors: wait a little (or for stop)
			 * rather than spin on a listening socket that stays
			 * readable. */
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				poll(&p[1], 1, 100);
			continue;
		}
		serve_conn(c, fd);
		close(fd);
	}
	return NULL;
}

/* ------------------------------------------------------------- start/stop */

/* The directory of path must be ours and closed to group and others. */
static int dir_is_private(const char *path)
{
	char buf[PATH_MAX];
	struct stat st;

	snprintf(buf, sizeof(buf), "%s", path);
	if (lstat(dirname(buf), &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077))
		return -EPERM;
	return 0;
}

int ctl_start(struct ctl *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int ret;

	if (c->started)
		return -EBUSY;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if ((ret = dir_is_private(path)) < 0)
		return ret;
	/* What a daemon killed with SIGKILL left; never anything else. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->lfd < 0)
		return -errno;
	if (bind(c->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto fail;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	/* The directory already keeps others out; this is belt and
	 * braces (and peer_allowed is a third). */
	if (chmod(path, 0600) < 0 || listen(c->lfd, 8) < 0 ||
	    lstat(path, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	if (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		ret = -errno;
		goto fail;
	}
	if ((ret = pthread_create(&c->thread, NULL, ctl_main, c))) {
		ret = -ret;
		goto fail;
	}
	c->started = 1;
	return 0;
fail:
	if (c->path[0])
		unlink(c->path);
	c->path[0] = '\0';
	close(c->lfd);
	c->lfd = -1;
	for (int i = 0; i < 2; i++) {
		if (c->wake[i] >= 0)
			close(c->wake[i]);
		c->wake[i] = -1;
	}
	return ret;
}

void ctl_destroy(struct ctl *c)
{
	struct stat st;

	if (!c)
		return;
	if (c->started) {
		if (write(c->wake[1], "x", 1) != 1)
			log_warn("cannot stop the control thread: %s",
				 strerror(errno));
		pthread_join(c->thread, NULL);
	}
	/* A newer mount on the same point may have put its own socket
	 * here: remove only ours. */
	if (c->path[0] && lstat(c->path, &st) == 0 && st.st_dev == c->dev &&
	    st.st_ino == c->ino)
		unlink(c->path);
	if (c->lfd >= 0)
		close(c->lfd);
	for (int i = 0; i < 2; i++)
		if (c->wake[i] >= 0)
			close(c->wake[i]);
	free(c->mnt);
	free(c->server);
	free(c);
}

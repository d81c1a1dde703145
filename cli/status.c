/*
 * status.c - `cairn status`: print a server's or a mount's counters.
 *
 * A server: speaks the protocol directly (lib/auth.h, lib/msg.h): AUTH
 * with the cell key, HELLO, then STATUS, reading replies in order and
 * skipping any pushed frame. The HELLO reply is not decoded: a server that
 * refused it says so in the status, and STATUS's reply is what is shown.
 *
 * A mount: finds the mount that holds the path in the mount table (never
 * touching the mount itself, whose daemon may be gone) and asks its
 * daemon through the control socket (client/ctl.h; the path from
 * cli/mnt_util.h, in the runtime directory of the user who mounted).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../client/ctl.h"
#include "../lib/auth.h"
#include "../lib/net.h"
#include "../lib/msg.h"
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "cli.h"
#include "mnt_util.h"

#define STATUS_TIMEOUT_MS 5000
/* A mount's daemon answers from counters in memory, at once; longer means
 * it is stopped or stuck. */
#define STATUS_MOUNT_TIMEOUT_MS CTL_IO_TIMEOUT_MS
#define STATUS_MOUNT_MAX (1u << 20) /* longest answer taken */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cairn status [--key FILE] [HOST[:PORT] | MOUNTPOINT]\n"
		"\n"
		"Print counters, one `key value` pair per line: those of the "
		"server at\nHOST:PORT (default 127.0.0.1:%d), or those of "
		"the client of the Cairn\nmount that holds MOUNTPOINT (its "
		"calls to the server, promises held,\ncallback breaks, "
		"cache). An argument that names an existing file or\n"
		"directory, or that contains a slash, is a MOUNTPOINT.\n"
		"\n"
		"  --key FILE  the cell key for a server (default $CAIRN_KEY "
		"if set,\n              else %s)\n",
		CAIRN_DEFAULT_PORT, CELLKEY_DEFAULT);
}

/*
 * Send request op (the op's request struct m) with id and wait for its
 * reply. Returns the reply status, or a transport error (< -4095 never;
 * transport errors are reported through *terr as non-zero). On success
 * *payload is malloc'ed (NULL when empty).
 */
static int call(int fd, struct seal *tx, struct seal *rx, uint16_t op,
		uint32_t id, const void *m, uint8_t **payload, size_t *len,
		int *terr)
{
	struct wbuf w;
	struct wire_hdr h;
	int ret;

	*payload = NULL;
	*len = 0;
	*terr = 0;
	wbuf_init(&w);
	msg_encode(op, 0, &w, m);
	ret = w.err ? w.err : frame_send(fd, tx, op, 0, id, NULL, &w);
	wbuf_free(&w);
	if (ret)
		goto fail;
	for (;;) {
		uint8_t *p;

		ret = frame_read(fd, rx, &h, &p);
		if (ret)
			goto fail;
		if ((h.flags & WF_REPLY) && h.id == id && h.op == op) {
			*payload = p;
			*len = h.len;
			return h.status;
		}
		free(p); /* a push (callback break) or something else */
	}
fail:
	*terr = ret;
	return ret;
}

static int status_server(const char *addr, const char *keyfile)
{
	struct seal *tx = NULL, *rx = NULL;
	uint8_t key[CELLKEY_SIZE];
	char host[256], err[512];
	uint8_t client_id[16], *p = NULL;
	struct timeval tv = { .tv_sec = STATUS_TIMEOUT_MS / 1000 };
	struct msg_hello_req hello = { .magic = CAIRN_MAGIC,
				       .version = CAIRN_PROTO_VERSION };
	struct msg_empty none = { 0 };
	struct msg_status_rep st;
	const char *why = "";
	size_t len;
	int fd, port, ret, terr, rc = 1;

	if (net_parse_addr(addr, host, sizeof(host), &port,
			   CAIRN_DEFAULT_PORT)) {
		fprintf(stderr, "cairn status: bad address '%s'\n", addr);
		usage(stderr);
		return 2;
	}
	ret = cellkey_load(cellkey_path(keyfile), key, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cairn status: %s%s\n", err, ret == -ENOENT ?
			" (give --key FILE: the server's DATA/cell.key)" : "");
		return 1;
	}
	fd = net_connect(host, port, STATUS_TIMEOUT_MS, err, sizeof(err));
	if (fd < 0) {
		seal_wipe(key, sizeof(key));
		fprintf(stderr, "cairn status: %s\n", err);
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getrandom(client_id, sizeof(client_id), 0) != sizeof(client_id))
		memset(client_id, 0x5a, sizeof(client_id));
	memcpy(hello.client_id, client_id, sizeof(client_id));

	ret = auth_client(fd, key, &tx, &rx, err, sizeof(err));
	seal_wipe(key, sizeof(key));
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: %s\n", host, port, err);
		goto out;
	}
	ret = call(fd, tx, rx, OP_HELLO, 1, &hello, &p, &len, &terr);
	free(p);
	p = NULL;
	if (terr)
		goto transport;
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: server refused HELLO: "
			"%s\n", host, port, strerror(-ret));
		goto out;
	}
	ret = call(fd, tx, rx, OP_STATUS, 2, &none, &p, &len, &terr);
	if (terr)
		goto transport;
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: STATUS failed: %s\n",
			host, port, strerror(-ret));
		goto out;
	}
	if (msg_decode(OP_STATUS, 1, p, len, &st, &why)) {
		fprintf(stderr, "cairn status: %s:%d: malformed STATUS "
			"reply: %s\n", host, port, why);
		goto out;
	}
	fwrite(st.text.p, 1, st.text.len, stdout);
	rc = fflush(stdout) ? 1 : 0;
	goto out;
transport:
	fprintf(stderr, "cairn status: %s:%d: %s\n", host, port,
		terr == -EPIPE ? "connection closed by server"
		: terr == -EAGAIN ? "no reply within 5 s"
		: terr == -EBADMSG ? "a reply does not verify"
		: strerror(-terr));
out:
	free(p);
	seal_free(tx);
	seal_free(rx);
	close(fd);
	return rc;
}

/* ------------------------------------------------------------ a mount */

static long ms_left(const struct timespec *dl)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (dl->tv_sec - now.tv_sec) * 1000L +
	       (dl->tv_nsec - now.tv_nsec) / 1000000L;
}

/*
 * Connect to the control socket at path, send STATUS and read the answer
 * to its end into *text (malloc'ed, NUL-terminated), all within
 * STATUS_MOUNT_TIMEOUT_MS. Returns 0, -ETIMEDOUT, or the errno of the
 * failed call; *stage names it ("connect", "read").
 */
static int ctl_fetch(const char *path, char **text, const char **stage)
{
	static const char req[] = "STATUS\n";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = STATUS_MOUNT_TIMEOUT_MS / 1000 };
	struct timespec dl;
	size_t len = 0, cap = 4096;
	char *buf = NULL;
	int fd, ret = 0;

	*text = NULL;
	*stage = "connect";
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A unix connect waits for room in a full backlog: bounded by the
	 * send timeout. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += STATUS_MOUNT_TIMEOUT_MS / 1000;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT
							       : -errno;
		goto out;
	}
	*stage = "send";
	ret = net_write_full(fd, req, sizeof(req) - 1);
	if (ret == -EAGAIN) {
		ret = -ETIMEDOUT;
		goto out;
	}
	/* A daemon that closed at once may still have said why: read. */
	if (ret < 0 && ret != -EPIPE && ret != -ECONNRESET)
		goto out;
	ret = 0;
	*stage = "read";
	if (!(buf = malloc(cap))) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long ms = ms_left(&dl);
		ssize_t n;

		if (ms <= 0) {
			ret = -ETIMEDOUT;
			goto out;
		}
		n = poll(&p, 1, (int)ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			continue; /* the deadline, checked above */
		if (len + 1 >= cap) {
			char *nb = cap < STATUS_MOUNT_MAX ? realloc(buf, cap * 2)
							  : NULL;
			if (!nb) {
				ret = -EMSGSIZE;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		/* Closed with our request unread: what came is the answer. */
		if (n < 0 && errno == ECONNRESET && len)
			break;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*text = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return ret;
}

/* 1 if arg, its last component unresolved, is a mount point. */
static int is_mount_point(const char *arg, char *abs, size_t abssz)
{
	return mnt_resolve(arg, abs, abssz) == 0 &&
	       mnt_find(abs, NULL, 0, NULL, 0) > 0;
}

/*
 * The mount that holds arg, as the mount table says. A mount point is
 * never touched (its daemon may be stopped, stuck or dead: a stat would
 * wait for it or fail with ENOTCONN); a path inside a mount is resolved
 * through it. Returns 0 with mnt and *owner filled, or 1 after printing
 * why not.
 */
static int find_mount(const char *arg, char *mnt, size_t mntsz, uid_t *owner)
{
	char abs[PATH_MAX], fstype[64] = "";
	int rc;

	if (!is_mount_point(arg, abs, sizeof(abs)) && !realpath(arg, abs)) {
		fprintf(stderr, "cairn status: %s: %s\n", arg, strerror(errno));
		return 1;
	}
	rc = mnt_find_containing(abs, mnt, mntsz, fstype, sizeof(fstype),
				 owner);
	if (rc < 0) {
		fprintf(stderr, "cairn status: cannot read mount table: %s\n",
			strerror(-rc));
		return 1;
	}
	if (rc == 0) {
		fprintf(stderr, "cairn status: %s is not in a Cairn mount\n",
			abs);
		return 1;
	}
	if (strcmp(fstype, "fuse.cairn")) {
		if (!strcmp(mnt, abs))
			fprintf(stderr, "cairn status: %s is not a Cairn mount "
				"(file system type %s)\n", abs, fstype);
		else
			fprintf(stderr, "cairn status: %s is not in a Cairn "
				"mount (it is on %s, file system type %s)\n",
				abs, mnt, fstype);
		return 1;
	}
	if (*owner == (uid_t)-1)
		*owner = geteuid();
	return 0;
}

static int status_mount(const char *arg)
{
	char mnt[PATH_MAX], sock[PATH_MAX], *text = NULL, *nl;
	const char *stage;
	uid_t owner;
	size_t n;
	int ret, rc = 1;

	if (find_mount(arg, mnt, sizeof(mnt), &owner))
		return 1;
	mnt_ctl_path(mnt, owner, sock, sizeof(sock));
	ret = ctl_fetch(sock, &text, &stage);
	switch (ret) {
	case 0:
		break;
	case -ENOENT:
		fprintf(stderr, "cairn status: %s: no control socket %s (is "
			"its client running, and as uid %u?)\n", mnt, sock,
			(unsigned)owner);
		goto out;
	case -ECONNREFUSED:
		fprintf(stderr, "cairn status: %s: its client is not "
			"answering (nothing listens on %s: did it die?)\n",
			mnt, sock);
		goto out;
	case -EACCES:
	case -EPERM:
		fprintf(stderr, "cairn status: %s: permission denied on %s "
			"(mounted by uid %u: ask as that user or as root)\n",
			mnt, sock, (unsigned)owner);
		goto out;
	case -ETIMEDOUT:
		fprintf(stderr, "cairn status: %s: its client did not answer "
			"within %d s (stopped or stuck?)\n", mnt,
			STATUS_MOUNT_TIMEOUT_MS / 1000);
		goto out;
	default:
		fprintf(stderr, "cairn status: %s: %s %s: %s\n", mnt, stage,
			sock, strerror(-ret));
		goto out;
	}
	/* The daemon names its mount point first: a stale socket or a hash
	 * collision in mnt_ctl_path must not pass for this mount. */
	if (!text[0]) {
		fprintf(stderr, "cairn status: %s: its client closed the "
			"connection without answering\n", mnt);
		goto out;
	}
	nl = strchr(text, '\n');
	n = nl ? (size_t)(nl - text) : strlen(text);
	if (!strncmp(text, "error ", 6)) {
		fprintf(stderr, "cairn status: %s: its client refused: %.*s\n",
			mnt, (int)(n - 6), text + 6);
		goto out;
	}
	if (!nl || strncmp(text, "mount ", 6) || n - 6 != strlen(mnt) ||
	    strncmp(text + 6, mnt, n - 6)) {
		fprintf(stderr, "cairn status: %s: %s answered for another "
			"mount: %.*s\n", mnt, sock, (int)n, text);
		goto out;
	}
	fputs(text, stdout);
	rc = fflush(stdout) ? 1 : 0;
out:
	free(text);
	return rc;
}

/* A MOUNTPOINT has a slash, is a mount point or names something that
 * exists; anything else is HOST[:PORT]. */
static int is_path(const char *arg)
{
	char abs[PATH_MAX];
	struct stat st;

	return strchr(arg, '/') || is_mount_point(arg, abs, sizeof(abs)) ||
	       stat(arg, &st) == 0;
}

int cmd_status(int argc, char **argv)
{
	const char *key = NULL;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 2 && !strcmp(argv[1], "--key")) {
		key = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		usage(stderr);
		return 2;
	}
	if (argc == 2 && is_path(argv[1]))
		return status_mount(argv[1]);
	return status_server(argc == 2 ? argv[1] : "127.0.0.1", key);
}

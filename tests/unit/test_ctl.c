/*
 * test_ctl.c - unit tests for client/ctl.h, the control endpoint behind
 * `cairn status MOUNTPOINT`: the answer's first keys and the sections in
 * order, the socket protocol (STATUS, an unknown request, a client that
 * sends nothing does not keep others out), what ctl_start refuses (a
 * directory open to others, a file that is not a socket, a path too long),
 * a stale socket replaced, the socket removed at the end, and destroy with
 * a client connected. Also mnt_ctl_path's names (cli/mnt_util.h).
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../cli/mnt_util.h"
#include "../../client/ctl.h"
#include "../../client/inode.h"
#include "check.h"

static char dir[64]; /* a short mkdtemp path: socket addresses are short */

static void sec_a(void *arg, FILE *f)
{
	fprintf(f, "sec.a %d\n", *(int *)arg);
}

static void sec_b(void *arg, FILE *f)
{
	fprintf(f, "sec.b %s\n", (const char *)arg);
}

static struct ctl *new_ctl(struct itab *t)
{
	struct ctl_info ci = { .mnt = "/m/nt", .server = "host:7070",
			       .itab = t };
	struct ctl *c = NULL;

	if (ctl_create(&ci, &c)) {
		fprintf(stderr, "ctl_create failed\n");
		exit(1);
	}
	return c;
}

static char *status_text(struct ctl *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		exit(1);
	ctl_print_status(c, f);
	fclose(f);
	return text;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	return fd;
}

/* Send req (may be NULL: nothing), read to EOF. Returns malloc'ed text. */
static char *ask(const char *path, const char *req)
{
	static char buf[1 << 16];
	size_t len = 0;
	ssize_t n;
	int fd = connect_to(path);

	if (fd < 0)
		return NULL;
	if (req && write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(fd);
		return NULL;
	}
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return strdup(buf);
}

static void sock_path(char *out, size_t outsz, const char *name)
{
	snprintf(out, outsz, "%s/%s", dir, name);
}

static void t_text(void)
{
	struct cairn_attr root = {
		.fid = { .vol = 1, .vnode = ITAB_ROOT_INO, .uniq = 1 },
		.mode = 040755, .nlink = 2, .dv = 1,
	};
	struct itab *t = NULL;
	struct ctl *c;
	char *text, want[64];
	int a = 42;

	CHECK_EQ(itab_create(&root, &t), 0);
	c = new_ctl(t);
	CHECK_EQ(ctl_add_section(c, sec_a, &a), 0);
	CHECK_EQ(ctl_add_section(c, sec_b, "x"), 0);
	text = status_text(c);
	snprintf(want, sizeof(want), "mount /m/nt\nserver host:7070\npid %d\n",
		 (int)getpid());
	CHECK(!strncmp(text, want, strlen(want)));
	CHECK(strstr(text, "\nuptime_s 0\n") != NULL);
	/* The root is in the table, promised since HELLO. */
	CHECK(strstr(text, "\ninodes 1\n") != NULL);
	CHECK(strstr(text, "\npromises 1\n") != NULL);
	CHECK(strstr(text, "\nnegative_entries 0\n") != NULL);
	/* Sections last, in the order added. */
	CHECK(strstr(text, "\nsec.a 42\nsec.b x\n") != NULL);
	CHECK(text[strlen(text) - 1] == '\n');
	free(text);
	for (int i = 2; i < CTL_SECTIONS_MAX; i++)
		CHECK_EQ(ctl_add_section(c, sec_a, &a), 0);
	CHECK_EQ(ctl_add_section(c, sec_a, &a), -ENOSPC);
	ctl_destroy(c);
	itab_destroy(t);
}

static void t_socket(void)
{
	struct ctl *c = new_ctl(NULL);
	char path[128], *text;
	struct stat st;
	int a = 7, idle;

	sock_path(path, sizeof(path), "s.sock");
	CHECK_EQ(ctl_add_section(c, sec_a, &a), 0);
	CHECK_EQ(ctl_start(c, path), 0);
	CHECK_EQ(ctl_add_section(c, sec_a, &a), -EBUSY);
	CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	      (st.st_mode & 0777) == 0600);

	text = ask(path, "STATUS\n");
	CHECK(text && !strncmp(text, "mount /m/nt\n", 12));
	CHECK(text && strstr(text, "\nsec.a 7\n"));
	free(text);
	text = ask(path, "STATUS\r\n");
	CHECK(text && !strncmp(text, "mount /m/nt\n", 12));
	free(text);
	text = ask(path, "FLUSH\n");
	CHECK(text && !strcmp(text, "error unknown request\n"));
	free(text);

	/* A client that sends nothing is dropped after CTL_IO_TIMEOUT_MS;
	 * the next one is answered (after it), and the idle one sees EOF. */
	idle = connect_to(path);
	CHECK(idle >= 0);
	text = ask(path, "STATUS\n");
	CHECK(text && !strncmp(text, "mount /m/nt\n", 12));
	free(text);
	if (idle >= 0) {
		char b;

		CHECK_EQ(read(idle, &b, 1), 0);
		close(idle);
	}
	ctl_destroy(c);
	CHECK(lstat(path, &st) < 0 && errno == ENOENT);
}

static void t_refusals(void)
{
	char path[PATH_MAX + 64], sub[PATH_MAX];
	struct ctl *c = new_ctl(NULL);
	FILE *f;

	/* Something that is not a socket is never removed. */
	sock_path(path, sizeof(path), "file.sock");
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	CHECK_EQ(ctl_start(c, path), -EEXIST);
	CHECK(access(path, F_OK) == 0);
	unlink(path);

	/* A directory others may enter. */
	sock_path(sub, sizeof(sub), "open");
	CHECK(mkdir(sub, 0755) == 0);
	CHECK(chmod(sub, 0755) == 0);
	snprintf(path, sizeof(path), "%s/s.sock", sub);
	CHECK_EQ(ctl_start(c, path), -EPERM);
	rmdir(sub);

	/* Too long for a socket address. */
	memset(path, 'x', sizeof(path) - 1);
	path[0] = '/';
	path[200] = '\0';
	CHECK_EQ(ctl_start(c, path), -ENAMETOOLONG);
	ctl_destroy(c);
}

static void t_stale_and_destroy(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[128], *text;
	struct ctl *c = new_ctl(NULL);
	int fd, idle;

	/* A socket left behind by a daemon killed with SIGKILL. */
	sock_path(path, sizeof(path), "stale.sock");
	memcpy(sa.sun_path, path, strlen(path) + 1); /* dir is short */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	CHECK_EQ(connect_to(path), -ECONNREFUSED);
	CHECK_EQ(ctl_start(c, path), 0);
	text = ask(path, "STATUS\n");
	CHECK(text && !strncmp(text, "mount /m/nt\n", 12));
	free(text);

	/* Destroy with a client connected and silent: the thread is woken,
	 * not left waiting for it. */
	idle = connect_to(path);
	CHECK(idle >= 0);
	usleep(50 * 1000); /* let the thread take it */
	ctl_destroy(c);
	if (idle >= 0)
		close(idle);
	CHECK(access(path, F_OK) < 0);
}

static void t_replaced_socket_kept(void)
{
	char path[128];
	struct ctl *c1 = new_ctl(NULL), *c2 = new_ctl(NULL);

	/* A second mount on the same point replaces the socket; the first
	 * one's exit must not remove the second one's. */
	sock_path(path, sizeof(path), "twice.sock");
	CHECK_EQ(ctl_start(c1, path), 0);
	CHECK_EQ(ctl_start(c2, path), 0);
	ctl_destroy(c1);
	CHECK(access(path, F_OK) == 0);
	ctl_destroy(c2);
	CHECK(access(path, F_OK) < 0);
}

static void t_mnt_ctl_path(void)
{
	char buf[PATH_MAX], lng[300];
	const char *slash;

	mnt_ctl_path("/mnt/a%b", 0, buf, sizeof(buf));
	CHECK(!strcmp(buf, "/run/cairn/%2Fmnt%2Fa%25b.sock"));
	mnt_ctl_path("/mnt/a", 1000, buf, sizeof(buf));
	CHECK(!strcmp(buf, "/tmp/cairn-1000/%2Fmnt%2Fa.sock"));

	memset(lng, 'y', sizeof(lng) - 1);
	lng[0] = '/';
	lng[sizeof(lng) - 1] = '\0';
	mnt_ctl_path(lng, 0, buf, sizeof(buf));
	CHECK(strlen(buf) < MNT_CTL_PATH_MAX);
	slash = strrchr(buf, '/');
	CHECK(slash && strlen(slash) == strlen("/ctl-0123456789abcdef.sock") &&
	      !strncmp(slash, "/ctl-", 5));
	CHECK(!strncmp(buf, "/run/cairn/", 11));
	/* Another long path, another name; the same path, the same name. */
	{
		char again[PATH_MAX], other[PATH_MAX];

		mnt_ctl_path(lng, 0, again, sizeof(again));
		CHECK(!strcmp(buf, again));
		lng[100] = 'z';
		mnt_ctl_path(lng, 0, other, sizeof(other));
		CHECK(strcmp(buf, other) != 0);
	}
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_ctl.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	run("status text: first keys, table counts, sections in order", t_text);
	run("socket: STATUS, unknown request, an idle client is dropped",
	    t_socket);
	run("start refuses a file, an open directory, a long path",
	    t_refusals);
	run("a stale socket is replaced; destroy wakes a busy thread",
	    t_stale_and_destroy);
	run("a replaced socket is not removed by the old owner",
	    t_replaced_socket_kept);
	run("mnt_ctl_path: escaped names, hashed when too long",
	    t_mnt_ctl_path);
	rmdir(dir);
	return failed_total ? 1 : 0;
}

/*
 * umount.c - `cairn umount MOUNTPOINT`: unmount a Cairn mount and wait for
 * its client daemon to exit.
 *
 * The mount point is resolved without touching it (a mount whose daemon
 * died answers every stat with ENOTCONN): the parent directory is resolved
 * and the last component appended, then looked up in /proc/self/mountinfo.
 * The daemon is found through the pid file `cairn mount` writes in its
 * runtime directory (see mnt_util.h).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "mnt_util.h"

#define UMOUNT_WAIT_MS 10000
/* How long a busy mount is tried again: a path lookup in progress (a
 * stat, our own daemon's statfs just after mounting) holds the mount for
 * a moment; a process inside it or an open file does not go away. */
#define UMOUNT_BUSY_MS 1000

static void usage(FILE *f)
{
	fprintf(f,
"usage: cairn umount MOUNTPOINT\n"
"\n"
"Unmount the Cairn mount at MOUNTPOINT and wait (up to 10 s) for its client\n"
"to exit. Fails if MOUNTPOINT is not a Cairn mount, or is still busy (a\n"
"process inside it, a file open) after 1 s of trying.\n");
}

/* The daemon's pid if its pid file names a live `cairn` process, else 0. */
static pid_t daemon_pid(const char *mnt)
{
	char path[PATH_MAX];
	pid_t pid;

	mnt_pidfile_path(mnt, path, sizeof(path));
	pid = mnt_pidfile_read(path, mnt);
	return mnt_pid_is_cairn(pid) ? pid : 0;
}

/* 1 while pid exists and is not a zombie. */
static int alive(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	char *p;
	int live = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		live = p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return live;
}

/* fusermount3 -u MNT: for users who may not call umount2 themselves. */
static int fusermount_u(const char *mnt)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int cmd_umount(int argc, char **argv)
{
	char mnt[PATH_MAX], fstype[64] = "";
	pid_t pid;
	int rc;

	if (argc == 2 && (!strcmp(argv[1], "--help") ||
			  !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-') {
		usage(stderr);
		return 2;
	}
	if ((rc = mnt_resolve(argv[1], mnt, sizeof(mnt))) < 0) {
		fprintf(stderr, "cairn umount: %s: %s\n", argv[1],
			strerror(-rc));
		return 1;
	}
	rc = mnt_find(mnt, fstype, sizeof(fstype), NULL, 0);
	if (rc < 0) {
		fprintf(stderr, "cairn umount: cannot read mount table: %s\n",
			strerror(-rc));
		return 1;
	}
	if (rc == 0) {
		fprintf(stderr, "cairn umount: %s is not mounted\n", mnt);
		return 1;
	}
	if (strcmp(fstype, "fuse.cairn")) {
		fprintf(stderr, "cairn umount: %s is not a Cairn mount "
			"(file system type %s)\n", mnt, fstype);
		return 1;
	}
	pid = daemon_pid(mnt);
	for (int waited = 0;; waited += 50) {
		rc = umount2(mnt, 0) < 0 ? errno : 0;
		if (rc != EBUSY || waited >= UMOUNT_BUSY_MS)
			break;
		sleep_ms(50);
	}
	if (rc) {
		int e = rc;

		if (e == EBUSY) {
			fprintf(stderr, "cairn umount: %s is busy (files open "
				"or a process inside it)\n", mnt);
			return 1;
		}
		if (fusermount_u(mnt) < 0) {
			fprintf(stderr, "cairn umount: cannot unmount %s: %s\n",
				mnt, strerror(e));
			return 1;
		}
	}
	/* The daemon sees the session end and exits; wait for it so the next
	 * command can remount or remove its cache. */
	for (int waited = 0; waited < UMOUNT_WAIT_MS; waited += 50) {
		if (pid ? !alive(pid) : mnt_find(mnt, fstype,
						   sizeof(fstype), NULL, 0) == 0)
			return 0;
		sleep_ms(50);
	}
	if (pid)
		fprintf(stderr, "cairn umount: %s unmounted, but its client "
			"(pid %d) has not exited after %d s\n", mnt, (int)pid,
			UMOUNT_WAIT_MS / 1000);
	else
		fprintf(stderr, "cairn umount: %s is still mounted\n", mnt);
	return 1;
}

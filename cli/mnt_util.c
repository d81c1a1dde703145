/*
 * mnt_util.c - the pid file shared by `cairn mount` and `cairn umount`
 * (see mnt_util.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mnt_util.h"

static void rundir(char *buf, size_t bufsz)
{
	if (geteuid() == 0)
		snprintf(buf, bufsz, "/run/cairn");
	else
		snprintf(buf, bufsz, "/tmp/cairn-%u", (unsigned)geteuid());
}

int mnt_rundir_create(void)
{
	char dir[64];

	rundir(dir, sizeof(dir));
	return mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

void mnt_pidfile_path(const char *abs_mnt, char *buf, size_t bufsz)
{
	char dir[64];
	size_t o;

	rundir(dir, sizeof(dir));
	o = (size_t)snprintf(buf, bufsz, "%s/", dir);
	for (const char *s = abs_mnt; *s && o + 4 < bufsz; s++) {
		if (*s == '/' || *s == '%')
			o += (size_t)snprintf(buf + o, bufsz - o, "%%%02X",
					      (unsigned char)*s);
		else
			buf[o++] = *s;
	}
	snprintf(buf + o, bufsz - o, ".pid");
}

int mnt_pidfile_write(const char *path, const char *mnt)
{
	char tmp[PATH_MAX + 16];
	FILE *f;

	/* Written aside and renamed into place, so a concurrent
	 * mnt_rundir_prune never sees it half written. */
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	if (!(f = fopen(tmp, "w")))
		return -errno;
	fprintf(f, "%d\n%s\n", (int)getpid(), mnt);
	if (fclose(f) || rename(tmp, path)) {
		int ret = -errno;
		unlink(tmp);
		return ret;
	}
	return 0;
}

pid_t mnt_pidfile_read(const char *path, const char *mnt)
{
	char want[PATH_MAX] = "";
	FILE *f = fopen(path, "r");
	int pid = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%d\n", &pid) != 1 || !fgets(want, sizeof(want), f))
		pid = 0;
	fclose(f);
	want[strcspn(want, "\n")] = '\0';
	return pid > 0 && !strcmp(want, mnt) ? (pid_t)pid : 0;
}

int mnt_pid_is_cairn(pid_t pid)
{
	char path[64], comm[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (pid <= 0 || !(f = fopen(path, "re")))
		return 0;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	return strncmp(comm, "cairn", 5) == 0;
}

void mnt_rundir_prune(void)
{
	char dir[64], path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	rundir(dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		FILE *f;
		int pid = 0;

		if (n < 5 || strcmp(de->d_name + n - 4, ".pid"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		if (fscanf(f, "%d", &pid) != 1)
			pid = 0;
		fclose(f);
		if (!mnt_pid_is_cairn(pid))
			unlink(path);
	}
	closedir(d);
}

int mnt_set_readahead(const char *abs_mnt, unsigned kb)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[64] = "", path[128];
	int ret = -ENOENT;

	if (!f)
		return -errno;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE ...";
	 * the last match is the newest mount on that point. */
	while (fgets(line, sizeof(line), f)) {
		char majmin[64], point[4096];
		const char *sep = strstr(line, " - fuse.cairn ");
		if (sep && sscanf(line, "%*s %*s %63s %*s %4095s", majmin,
				  point) == 2 && !strcmp(point, abs_mnt))
			snprintf(dev, sizeof(dev), "%s", majmin);
	}
	fclose(f);
	if (!dev[0])
		return ret;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	ret = fprintf(f, "%u\n", kb) < 0 ? -EIO : 0;
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	return ret;
}

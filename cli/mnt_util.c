/*
 * mnt_util.c - the pid file shared by `cairn mount` and `cairn umount`
 * (see mnt_util.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Undo mountinfo's octal escapes (\040 for space etc.) in place. */
static void unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

/*
 * One mountinfo line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...]
 * - FSTYPE SOURCE SUPEROPTS". Fills the unescaped mount point, MAJ:MIN
 * and FSTYPE (pointers into line). Returns 0, or -EINVAL if malformed.
 */
static int mountinfo_parse(char *line, char **mp, char **majmin,
			   char **fstype)
{
	char *save = NULL, *tok;
	int field = 0, after_sep = 0;

	*mp = *majmin = *fstype = NULL;
	for (tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save), field++) {
		if (after_sep) {
			*fstype = tok;
			break;
		}
		if (field == 2)
			*majmin = tok;
		else if (field == 4)
			*mp = tok;
		else if (field > 5 && !strcmp(tok, "-"))
			after_sep = 1;
	}
	if (!*mp || !*majmin || !*fstype)
		return -EINVAL;
	unescape(*mp);
	return 0;
}

int mnt_find(const char *abs_mnt, char *fstype, size_t fstypesz,
	     char *majmin, size_t majminsz)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	/* The last match is the newest mount on that point. */
	while (getline(&line, &cap, f) > 0) {
		char *mp, *mm, *fs;

		if (mountinfo_parse(line, &mp, &mm, &fs) || strcmp(mp, abs_mnt))
			continue;
		found = 1;
		if (fstype)
			snprintf(fstype, fstypesz, "%s", fs);
		if (majmin)
			snprintf(majmin, majminsz, "%s", mm);
	}
	free(line);
	fclose(f);
	return found;
}

int mnt_set_readahead(const char *abs_mnt, unsigned kb)
{
	char fstype[64], dev[64], path[128];
	FILE *f;
	int ret = mnt_find(abs_mnt, fstype, sizeof(fstype), dev, sizeof(dev));

	if (ret <= 0)
		return ret ? ret : -ENOENT;
	if (strcmp(fstype, "fuse.cairn"))
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	ret = fprintf(f, "%u\n", kb) < 0 ? -EIO : 0;
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	return ret;
}

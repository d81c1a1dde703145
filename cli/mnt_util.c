/*
 * mnt_util.c - the pid file shared by `cairn mount` and `cairn umount`,
 * the control socket `cairn status` reaches a mount's daemon through,
 * and mount table lookups (see mnt_util.h).
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "mnt_util.h"

static void rundir_of(uid_t uid, char *buf, size_t bufsz)
{
	if (uid == 0)
		snprintf(buf, bufsz, "/run/cairn");
	else
		snprintf(buf, bufsz, "/tmp/cairn-%u", (unsigned)uid);
}

static void rundir(char *buf, size_t bufsz)
{
	rundir_of(geteuid(), buf, bufsz);
}

int mnt_rundir_create(void)
{
	char dir[64];

	rundir(dir, sizeof(dir));
	return mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* DIR/M.SUFFIX, M the escaped mount point (see mnt_util.h), cut short
 * if it does not fit bufsz. Returns the length it needed. */
static size_t escaped_path(const char *dir, const char *abs_mnt,
			   const char *suffix, char *buf, size_t bufsz)
{
	size_t o, need;

	o = need = (size_t)snprintf(buf, bufsz, "%s/", dir);
	for (const char *s = abs_mnt; *s; s++) {
		int esc = *s == '/' || *s == '%';

		need += esc ? 3 : 1;
		if (o + 4 >= bufsz)
			continue;
		if (esc)
			o += (size_t)snprintf(buf + o, bufsz - o, "%%%02X",
					      (unsigned char)*s);
		else
			buf[o++] = *s;
	}
	snprintf(buf + o, bufsz - o, "%s", suffix);
	return need + strlen(suffix);
}

void mnt_pidfile_path(const char *abs_mnt, char *buf, size_t bufsz)
{
	char dir[64];

	rundir(dir, sizeof(dir));
	escaped_path(dir, abs_mnt, ".pid", buf, bufsz);
}

void mnt_ctl_path(const char *abs_mnt, uid_t owner, char *buf, size_t bufsz)
{
	char dir[64], tmp[PATH_MAX];
	uint64_t h = 0xcbf29ce484222325ull;

	rundir_of(owner, dir, sizeof(dir));
	if (escaped_path(dir, abs_mnt, ".sock", tmp, sizeof(tmp)) <
	    MNT_CTL_PATH_MAX) {
		snprintf(buf, bufsz, "%s", tmp);
		return;
	}
	/* Too long for a socket address: a hash of the mount point (FNV-1a;
	 * the daemon's answer names its mount point, so a collision is
	 * caught by `cairn status`, not believed). */
	for (const char *s = abs_mnt; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	snprintf(buf, bufsz, "%s/ctl-%016llx.sock", dir, (unsigned long long)h);
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

/* 1 if nothing listens on the unix socket at path (its daemon is gone).
 * A live daemon sees a connection that closes at once and says nothing. */
static int sock_is_stale(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, stale;

	if (strlen(path) >= sizeof(sa.sun_path))
		return 0;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	stale = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
		errno == ECONNREFUSED;
	close(fd);
	return stale;
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

		if (n > 5 && !strcmp(de->d_name + n - 5, ".sock")) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (sock_is_stale(path))
				unlink(path);
			continue;
		}
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
 * - FSTYPE SOURCE SUPEROPTS". Fills the unescaped mount point, MAJ:MIN,
 * FSTYPE and SUPEROPTS ("" when missing) (pointers into line). Returns
 * 0, or -EINVAL if malformed.
 */
static int mountinfo_parse(char *line, char **mp, char **majmin,
			   char **fstype, char **superopts)
{
	char *save = NULL, *tok;
	int field = 0, after_sep = 0;

	*mp = *majmin = *fstype = NULL;
	*superopts = "";
	for (tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save), field++) {
		if (after_sep == 1) {
			*fstype = tok;
			after_sep++;
			continue;
		}
		if (after_sep == 2) { /* the source */
			after_sep++;
			continue;
		}
		if (after_sep == 3) {
			*superopts = tok;
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
		char *mp, *mm, *fs, *so;

		if (mountinfo_parse(line, &mp, &mm, &fs, &so) ||
		    strcmp(mp, abs_mnt))
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

/* The user_id=N option of a FUSE mount, or (uid_t)-1. */
static uid_t superopts_uid(const char *so)
{
	const char *p = so;

	while (p && *p) {
		if (!strncmp(p, "user_id=", 8))
			return (uid_t)strtoul(p + 8, NULL, 10);
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return (uid_t)-1;
}

/* 1 if mount point mp is path or one of its parent directories. */
static int holds(const char *mp, const char *path)
{
	size_t n = strlen(mp);

	if (!strcmp(mp, "/"))
		return 1;
	return !strncmp(mp, path, n) && (path[n] == '\0' || path[n] == '/');
}

int mnt_find_containing(const char *abs_path, char *mnt, size_t mntsz,
			char *fstype, size_t fstypesz, uid_t *owner)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0, best = 0;
	int found = 0;

	if (!f)
		return -errno;
	/* The longest mount point that holds the path; the last of equals
	 * is the newest mount there. */
	while (getline(&line, &cap, f) > 0) {
		char *mp, *mm, *fs, *so;

		if (mountinfo_parse(line, &mp, &mm, &fs, &so) ||
		    !holds(mp, abs_path) || (found && strlen(mp) < best))
			continue;
		found = 1;
		best = strlen(mp);
		snprintf(mnt, mntsz, "%s", mp);
		snprintf(fstype, fstypesz, "%s", fs);
		*owner = superopts_uid(so);
	}
	free(line);
	fclose(f);
	return found;
}

int mnt_resolve(const char *path, char *out, size_t outsz)
{
	char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
	const char *base;
	size_t len = strlen(path);
	int n;

	if (len == 0 || len >= sizeof(a))
		return -EINVAL;
	memcpy(a, path, len + 1);
	while (len > 1 && a[len - 1] == '/')
		a[--len] = '\0';
	memcpy(b, a, len + 1);
	if (!realpath(dirname(a), dir))
		return -errno;
	base = basename(b);
	if (!strcmp(base, "/"))
		n = snprintf(out, outsz, "/");
	else if (!strcmp(dir, "/"))
		n = snprintf(out, outsz, "/%s", base);
	else
		n = snprintf(out, outsz, "%s/%s", dir, base);
	return n < (int)outsz ? 0 : -ENAMETOOLONG;
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

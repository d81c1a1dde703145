/*
 * mnt_util.h - the files through which the cairn commands find the client
 * daemon of a mount point, and lookups in the mount table. Their names and
 * formats are defined here only.
 *
 * Both live in a runtime directory (/run/cairn for root, else
 * /tmp/cairn-UID, mode 0700) and are named after the absolute mount point
 * M with '/' and '%' percent-escaped:
 *   M.pid   two lines, the daemon's pid and the mount point; `cairn mount`
 *           writes it, `cairn umount` reads it;
 *   M.sock  the daemon's control socket (client/ctl.h), which `cairn
 *           status MOUNTPOINT` connects to. A unix socket address holds
 *           at most 107 bytes, so for a long mount point it is
 *           ctl-HASH.sock instead (see mnt_ctl_path).
 */
#ifndef CAIRN_CLI_MNT_UTIL_H
#define CAIRN_CLI_MNT_UTIL_H

#include <stddef.h>
#include <sys/types.h>

/* Create the runtime directory (mode 0700) if missing. Returns 0 or a
 * negative errno. */
int mnt_rundir_create(void);

/* The pid file's path for absolute mount point abs_mnt, into buf (always
 * NUL-terminated; a mount point too long for bufsz is cut short). */
void mnt_pidfile_path(const char *abs_mnt, char *buf, size_t bufsz);

/* Longest unix socket path plus its NUL (sizeof sockaddr_un.sun_path). */
#define MNT_CTL_PATH_MAX 108

/*
 * The control socket's path for absolute mount point abs_mnt, in the
 * runtime directory of user `owner` (the daemon's user: its own euid when
 * creating it; the mount's user_id when looking for it), into buf
 * (PATH_MAX bytes will do). The result is always shorter than
 * MNT_CTL_PATH_MAX: when DIR/M.sock would not be, it is DIR/ctl-H.sock,
 * H sixteen hex digits of a 64-bit FNV-1a hash of abs_mnt.
 */
void mnt_ctl_path(const char *abs_mnt, uid_t owner, char *buf, size_t bufsz);

/* Write this process's pid file for mount point mnt at path. Returns 0 or
 * a negative errno. */
int mnt_pidfile_write(const char *path, const char *mnt);

/* 1 if pid is a running process named cairn (a pid file's daemon), else 0. */
int mnt_pid_is_cairn(pid_t pid);

/* Remove the pid files and control sockets of daemons that are gone
 * (killed, crashed): they would otherwise pile up for mount points used
 * once. A socket is stale when connecting to it is refused. Best effort. */
void mnt_rundir_prune(void);

/* The pid recorded at path if the file names mount point mnt, else 0 (also
 * when it is missing or malformed). Says nothing about whether that
 * process still runs. */
pid_t mnt_pidfile_read(const char *path, const char *mnt);

/*
 * Find the newest mount on absolute mount point abs_mnt in
 * /proc/self/mountinfo (escaped characters such as spaces undone). Copies
 * its file system type ("fuse.cairn") into fstype and its device
 * ("0:52") into majmin; either may be NULL. Returns 1 if mounted, 0 if
 * not, or a negative errno when mountinfo is unreadable.
 */
int mnt_find(const char *abs_mnt, char *fstype, size_t fstypesz,
	     char *majmin, size_t majminsz);

/*
 * The mount that holds absolute, resolved path abs_path: the longest mount
 * point in /proc/self/mountinfo that is abs_path or one of its parent
 * directories (of equals, the newest). Copies the mount point into mnt,
 * its file system type into fstype, and into *owner the user of a FUSE
 * mount (its user_id option; (uid_t)-1 without one). Returns 1 if found,
 * 0 if not, or a negative errno when mountinfo is unreadable.
 */
int mnt_find_containing(const char *abs_path, char *mnt, size_t mntsz,
			char *fstype, size_t fstypesz, uid_t *owner);

/*
 * The absolute path of path with every component but the last resolved
 * (symbolic links, "..", the current directory), into out. For a mount
 * point whose daemon died, which answers every stat with ENOTCONN.
 * Returns 0 or a negative errno.
 */
int mnt_resolve(const char *path, char *out, size_t outsz);

/*
 * Set the kernel's readahead for the FUSE mount at absolute mount point
 * abs_mnt to kb KiB (its backing device's read_ahead_kb in sysfs; the FUSE
 * protocol itself can only lower the 128 KiB default). Finds the device in
 * /proc/self/mountinfo, so it never touches the mount itself (safe before
 * the daemon serves). Returns 0 or a negative errno.
 */
int mnt_set_readahead(const char *abs_mnt, unsigned kb);

#endif

/*
 * mnt_util.h - the pid file through which `cairn umount` finds the client
 * daemon of a mount point. `cairn mount` writes it, `cairn umount` reads
 * it; its name and format are defined here only.
 *
 * The file lives in a runtime directory (/run/cairn for root, else
 * /tmp/cairn-UID), is named after the absolute mount point with '/' and
 * '%' percent-escaped, and holds two lines: the daemon's pid and the mount
 * point.
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

/* Write this process's pid file for mount point mnt at path. Returns 0 or
 * a negative errno. */
int mnt_pidfile_write(const char *path, const char *mnt);

/* 1 if pid is a running process named cairn (a pid file's daemon), else 0. */
int mnt_pid_is_cairn(pid_t pid);

/* Remove the pid files of daemons that are gone (killed, crashed): they
 * would otherwise pile up for mount points used once. Best effort. */
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
 * Set the kernel's readahead for the FUSE mount at absolute mount point
 * abs_mnt to kb KiB (its backing device's read_ahead_kb in sysfs; the FUSE
 * protocol itself can only lower the 128 KiB default). Finds the device in
 * /proc/self/mountinfo, so it never touches the mount itself (safe before
 * the daemon serves). Returns 0 or a negative errno.
 */
int mnt_set_readahead(const char *abs_mnt, unsigned kb);

#endif

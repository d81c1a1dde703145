/*
 * store_os.h - the storage engine's seam to the operating system.
 *
 * Every system call the store makes on a data file goes through the
 * function pointers in `store_os`, so tests can replace one of them to
 * inject ENOSPC, EIO or short writes without touching core logic (the
 * idea of SQLite's aSyscall[]). Each pointer has the libc calling
 * convention: -1 with errno set on failure.
 *
 * The table is process-global. Tests override entries before exercising
 * the store and call store_os_reset() to restore the real calls; nothing
 * else writes it, so it needs no lock.
 */
#ifndef CAIRN_STORE_OS_H
#define CAIRN_STORE_OS_H

#include <sys/stat.h>
#include <sys/types.h>

struct store_os {
	int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	int (*fstat)(int fd, struct stat *sb);
	int (*fstatat)(int dirfd, const char *path, struct stat *sb, int flags);
	int (*unlinkat)(int dirfd, const char *path, int flags);
};

extern struct store_os store_os;

/* Put the real system calls back. */
void store_os_reset(void);

#endif

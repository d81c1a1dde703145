/*
 * flock.h - an exclusive flock() that waits a moment for its holder.
 */
#ifndef CAIRN_LIB_FLOCK_H
#define CAIRN_LIB_FLOCK_H

#include <errno.h>
#include <sys/file.h>
#include <time.h>
#include "clock.h"

/* How long a cache directory's lock is waited for: a daemon killed a
 * moment ago holds it until the last of its threads is gone, which is
 * after its process looks dead to `kill -0` and to /proc (a zombie
 * leader); a remount at once would find it held and go without the
 * journal or the chunk cache. */
#define FLOCK_WAIT_MS 2000

/* flock(fd, LOCK_EX | LOCK_NB), tried again every 20 ms for up to ms
 * milliseconds while another holds it. 0, or -1 with errno (EWOULDBLOCK:
 * still held). */
static inline int flock_wait(int fd, int ms)
{
	int64_t end = clock_mono_ms() + ms;
	struct timespec pause = { 0, 20 * 1000 * 1000 };

	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || clock_mono_ms() >= end)
			return -1;
		nanosleep(&pause, NULL);
	}
	return 0;
}

#endif

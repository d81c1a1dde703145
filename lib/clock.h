/*
 * clock.h - deadlines for pthread_cond_timedwait and friends.
 */
#ifndef CAIRN_LIB_CLOCK_H
#define CAIRN_LIB_CLOCK_H

#include <time.h>

/* *ts = now on clock clk plus ms milliseconds (ms >= 0). */
static inline void clock_deadline(clockid_t clk, int ms, struct timespec *ts)
{
	clock_gettime(clk, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

#endif

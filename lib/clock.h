/*
 * clock.h - the monotonic clock, and deadlines for pthread_cond_timedwait
 * and friends.
 */
#ifndef CAIRN_LIB_CLOCK_H
#define CAIRN_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds (leases, timeouts, ages). */
static inline int64_t clock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CLOCK_MONOTONIC in nanoseconds (latencies). */
static inline uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

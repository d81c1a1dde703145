/*
 * check.h - the assertions and the test runner every unit test shares.
 *
 * A test is a void function that calls CHECK/CHECK_EQ; a failed check
 * prints where and why to stderr and lets the test go on, so one run shows
 * every failure. run() prints one "ok - NAME" or "not ok - NAME" line per
 * test (tests/run.sh counts them); main returns failed_total ? 1 : 0.
 *
 * Include it once, from the test's .c file: it defines the counters.
 */
#ifndef CAIRN_TESTS_CHECK_H
#define CAIRN_TESTS_CHECK_H

#include <stdio.h>

static int failed_total; /* tests with at least one failed check */
static int failed_here;  /* failures inside the current test */

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "  %s:%d: CHECK failed: %s\n", \
			__FILE__, __LINE__, #cond); \
		failed_here++; \
	} \
} while (0)

/* Compare two integers and show both values when they differ. */
#define CHECK_EQ(got, want) do { \
	long long g_ = (long long)(got), w_ = (long long)(want); \
	if (g_ != w_) { \
		fprintf(stderr, "  %s:%d: %s: expected %lld, got %lld\n", \
			__FILE__, __LINE__, #got, w_, g_); \
		failed_here++; \
	} \
} while (0)

static void run(const char *name, void (*fn)(void))
{
	failed_here = 0;
	fn();
	printf("%s - %s\n", failed_here ? "not ok" : "ok", name);
	fflush(stdout);
	if (failed_here)
		failed_total++;
}

#endif

/*
 * debug.h - checked rules: invariants and "caller holds X" made executable.
 *
 * STYLE.md's three levels of failure: a broken invariant is a bug, not an
 * error to return, so it is asserted. These checks are compiled in when
 * CAIRN_DEBUG is defined (the sanitizer build, `make SAN=1`, which `make
 * check` runs every test under) and cost nothing otherwise.
 *
 *   CAIRN_ASSERT(cond)          an invariant written in a file's head or
 *                               a function's contract
 *   LOCK_ASSERT_HELD(&mutex)    this thread holds the pthread mutex
 *   LOCK_ASSERT_NOT_HELD(&mutex) ...and does not (before taking it, or
 *                               before a call that must not run under it)
 *   RWLOCK_ASSERT_WRHELD(&rw)   this thread holds the rwlock for writing
 *   RWLOCK_ASSERT_NOT_WRHELD(&rw) ...and does not (readers are not seen)
 *   RWLOCK_ASSERT_HELD(&rw)     someone holds it (for reading or writing):
 *                               glibc does not record which readers
 *
 * The lock checks read the owner glibc's NPTL records in every mutex
 * (__data.__owner, the owner's kernel thread id, kept for all mutex kinds)
 * and rwlock (__data.__cur_writer, __data.__readers). That is glibc's
 * layout, not POSIX: Cairn runs on Debian's glibc only, and the build
 * fails loudly if the layout ever goes away. The reads race with other
 * threads' lock operations, harmlessly: only the calling thread ever
 * writes its own id there, so "held by me" is always answered exactly.
 * Each lock check costs one
 * gettid() system call (about 0.3 us; not cached, so it stays right in a
 * forked child), in debug builds only: keep them off per-item loops of
 * hot paths. Without CAIRN_DEBUG nothing is evaluated, so a condition
 * must have no side effects. The lock order itself is stated once, in
 * docs/LOCKING.md; tests/unit/test_debug.c checks these macros.
 */
#ifndef CAIRN_DEBUG_H
#define CAIRN_DEBUG_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* In a sanitizer build a failed check is also written where sanitizer
 * reports go (ASAN_OPTIONS=log_path: the test harness collects them from
 * daemons, whose stderr is gone), with the stack that led to it. */
#if defined(__SANITIZE_ADDRESS__)
#define CAIRN_SAN_REPORT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CAIRN_SAN_REPORT 1
#endif
#endif
#ifdef CAIRN_SAN_REPORT
#include <sanitizer/common_interface_defs.h>
#endif

/* Report a failed check and abort. */
static inline __attribute__((noreturn, cold)) void
cairn_bug(const char *file, int line, const char *func, const char *what)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s:%d: %s: BUG: %s", file, line, func,
		 what);
	fprintf(stderr, "%s\n", msg);
#ifdef CAIRN_SAN_REPORT
	__sanitizer_report_error_summary(msg);
	__sanitizer_print_stack_trace();
#endif
	abort();
}

#define CAIRN_BUG(what) cairn_bug(__FILE__, __LINE__, __func__, what)

#ifdef CAIRN_DEBUG

#define CAIRN_ASSERT(cond) \
	((cond) ? (void)0 : CAIRN_BUG("assertion failed: " #cond))

#define LOCK_ASSERT_HELD(m)						\
	((m)->__data.__owner == gettid() ? (void)0			\
	 : CAIRN_BUG("lock " #m " not held by this thread"))
#define LOCK_ASSERT_NOT_HELD(m)						\
	((m)->__data.__owner != gettid() ? (void)0			\
	 : CAIRN_BUG("lock " #m " held by this thread"))
#define RWLOCK_ASSERT_WRHELD(rw)					\
	((rw)->__data.__cur_writer == gettid() ? (void)0		\
	 : CAIRN_BUG("rwlock " #rw " not held for writing by this thread"))
#define RWLOCK_ASSERT_NOT_WRHELD(rw)					\
	((rw)->__data.__cur_writer != gettid() ? (void)0		\
	 : CAIRN_BUG("rwlock " #rw " held for writing by this thread"))
/* glibc keeps the reader count in __readers >> 3. */
#define RWLOCK_ASSERT_HELD(rw)						\
	((rw)->__data.__cur_writer == gettid() ||			\
	 ((rw)->__data.__readers >> 3) != 0 ? (void)0			\
	 : CAIRN_BUG("rwlock " #rw " not held"))

#else

#define CAIRN_ASSERT(cond)        ((void)sizeof(!(cond)))
#define LOCK_ASSERT_HELD(m)       ((void)sizeof(m))
#define LOCK_ASSERT_NOT_HELD(m)   ((void)sizeof(m))
#define RWLOCK_ASSERT_WRHELD(rw)  ((void)sizeof(rw))
#define RWLOCK_ASSERT_NOT_WRHELD(rw) ((void)sizeof(rw))
#define RWLOCK_ASSERT_HELD(rw)    ((void)sizeof(rw))

#endif

#endif

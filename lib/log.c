/*
 * log.c - one-line diagnostics. See log.h.
 */
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include "log.h"

int log_verbose;
static const char *log_role = "cairn";
static int log_syslog;

void log_set_role(const char *role)
{
	log_role = role;
}

void log_use_syslog(void)
{
	openlog("cairn", LOG_PID, LOG_DAEMON);
	log_syslog = 1;
}

static void vlog(int prio, const char *level, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_syslog) {
		syslog(prio, "%s: %s", log_role, msg);
		return;
	}
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	/* One fprintf per line so concurrent threads do not interleave. */
	fprintf(stderr, "%s.%03ld cairn %s: %s%s\n", when, ts.tv_nsec / 1000000,
		log_role, level, msg);
}

#define LOG_FN(name, prio, level, cond)                                    \
	void name(const char *fmt, ...)                                    \
	{                                                                  \
		if (!(cond))                                               \
			return;                                            \
		va_list ap;                                                \
		va_start(ap, fmt);                                         \
		vlog(prio, level, fmt, ap);                                \
		va_end(ap);                                                \
	}

LOG_FN(log_info, LOG_INFO, "", 1)
LOG_FN(log_warn, LOG_WARNING, "warning: ", 1)
LOG_FN(log_error, LOG_ERR, "error: ", 1)
LOG_FN(log_debug, LOG_DEBUG, "debug: ", log_verbose)

/*
 * log.h - one-line diagnostics to stderr (or syslog once daemonized).
 *
 * Every line starts with a timestamp and the program role ("serve", "mount").
 * log_debug is printed only when log_verbose is set.
 */
#ifndef CAIRN_LOG_H
#define CAIRN_LOG_H

#include <stdarg.h>

extern int log_verbose;

/* Set the role prefix printed on every line ("serve", "mount"). */
void log_set_role(const char *role);
/* Send later lines to syslog(3) instead of stderr (daemon mode). */
void log_use_syslog(void);

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

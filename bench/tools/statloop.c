/*
 * statloop - time metadata loops for the benchmark (bench/bench.py).
 *
 * Python costs about a microsecond per call, more than a warm local stat(),
 * so every loop whose per-call cost is the figure being measured runs here.
 *
 * Every mode takes -C DIR: chdir there first, so relative paths measure
 * exactly the components named (not the walk down to a scratch dir).
 *
 *   statloop [-t THREADS] [-n COUNT] [-m stat|lstat|open] PATH
 *       COUNT calls on one path in each of THREADS threads; the clock runs
 *       from the moment all threads are released until the last finishes.
 *   statloop -l LIST [-m lstat|read]
 *       one call per path listed in the file LIST (one path a line).
 *   statloop -I NAMES [-n PASSES] DIR...
 *       include search: for each name in NAMES, stat() DIR0/name,
 *       DIR1/name, ... until one exists; PASSES times over the list.
 *
 * Output is one line of key=value pairs (ops, errors, ns, ns_per_op,
 * ops_per_s, and hits/misses or bytes where they apply), so the driver can
 * parse it without caring about the mode. Exit status 1 when any call
 * failed unexpectedly (the first failure is reported as err= and path=).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum mode { M_STAT, M_LSTAT, M_OPEN, M_READ };

static const struct {
	const char *name;
	enum mode mode;
} mode_table[] = {
	{ "stat", M_STAT },
	{ "lstat", M_LSTAT },
	{ "open", M_OPEN },
	{ "read", M_READ },
};

struct failure {
	int err;
	const char *path;
};

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static struct failure first_fail;
static uint64_t n_errors;

static void note_failure(int err, const char *path)
{
	pthread_mutex_lock(&fail_lock);
	if (n_errors++ == 0) {
		first_fail.err = err;
		first_fail.path = path;
	}
	pthread_mutex_unlock(&fail_lock);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *read_buf;	/* 1 MiB, for M_READ (single-threaded only) */

/* One call of the selected kind; returns bytes read (M_READ) or 0, or
 * -errno. */
static int64_t one_call(enum mode mode, const char *path)
{
	struct stat st;
	int64_t total = 0;
	ssize_t n;
	int fd;

	switch (mode) {
	case M_STAT:
		return stat(path, &st) < 0 ? -errno : 0;
	case M_LSTAT:
		return lstat(path, &st) < 0 ? -errno : 0;
	case M_OPEN:
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return -errno;
		return close(fd) < 0 ? -errno : 0;
	case M_READ:
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return -errno;
		while ((n = read(fd, read_buf, 1 << 20)) > 0)
			total += n;
		if (n < 0) {
			int err = errno;
			close(fd);
			return -err;
		}
		return close(fd) < 0 ? -errno : total;
	}
	return -EINVAL;
}

struct loop_arg {
	pthread_barrier_t *start;
	enum mode mode;
	const char *path;
	uint64_t count;
};

static void *loop_thread(void *p)
{
	struct loop_arg *a = p;
	uint64_t i;
	int64_t r;

	pthread_barrier_wait(a->start);
	for (i = 0; i < a->count; i++) {
		r = one_call(a->mode, a->path);
		if (r < 0)
			note_failure((int)-r, a->path);
	}
	return NULL;
}

/* Threads are started before the clock and released together through a
 * barrier, so thread creation is not part of the figure. */
static int run_loop(enum mode mode, const char *path, int threads,
		    uint64_t count, uint64_t *ns)
{
	pthread_barrier_t start;
	pthread_t tid[64];
	struct loop_arg arg = { &start, mode, path, count };
	uint64_t t0;
	int i, rc;

	if (threads < 1 || threads > 64)
		return -EINVAL;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (i = 0; i < threads; i++) {
		rc = pthread_create(&tid[i], NULL, loop_thread, &arg);
		if (rc) {
			fprintf(stderr, "statloop: pthread_create: %s\n", strerror(rc));
			exit(1);
		}
	}
	t0 = now_ns();
	pthread_barrier_wait(&start);
	for (i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	*ns = now_ns() - t0;
	pthread_barrier_destroy(&start);
	return 0;
}

/* Reads a file of one path per line into a NULL-terminated array. */
static char **read_lines(const char *file, size_t *count)
{
	FILE *f = fopen(file, "r");
	char **v = NULL, *line = NULL;
	size_t n = 0, cap = 0, len = 0;
	ssize_t got;

	if (!f) {
		fprintf(stderr, "statloop: %s: %s\n", file, strerror(errno));
		exit(1);
	}
	while ((got = getline(&line, &len, f)) >= 0) {
		if (got > 0 && line[got - 1] == '\n')
			line[--got] = '\0';
		if (got == 0)
			continue;
		if (n + 1 >= cap) {
			cap = cap ? cap * 2 : 1024;
			v = realloc(v, cap * sizeof(*v));
			if (!v) {
				fprintf(stderr, "statloop: out of memory\n");
				exit(1);
			}
		}
		v[n++] = strdup(line);
	}
	free(line);
	fclose(f);
	if (!v)
		v = calloc(1, sizeof(*v));
	v[n] = NULL;
	*count = n;
	return v;
}

static void report(uint64_t ops, uint64_t ns, const char *extra)
{
	printf("ops=%llu errors=%llu ns=%llu ns_per_op=%.1f ops_per_s=%.1f%s",
	       (unsigned long long)ops, (unsigned long long)n_errors,
	       (unsigned long long)ns, ops ? (double)ns / (double)ops : 0.0,
	       ns ? (double)ops * 1e9 / (double)ns : 0.0, extra);
	if (n_errors)
		printf(" err=%s path=%s", strerror(first_fail.err), first_fail.path);
	printf("\n");
	/* Flushed now: a sanitizer that reports at exit leaves by _exit(). */
	fflush(stdout);
}

static void free_lines(char **v)
{
	char **p;

	for (p = v; *p; p++)
		free(*p);
	free(v);
}

static int include_search(const char *names_file, char **dirs, int ndirs,
			  uint64_t passes)
{
	size_t nnames, i;
	char **names = read_lines(names_file, &nnames);
	char **paths;	/* ndirs x nnames candidate paths, built before timing */
	uint64_t hits = 0, misses = 0, t0, ns, p;
	struct stat st;
	char extra[128];
	int d;

	paths = calloc((size_t)ndirs * nnames + 1, sizeof(*paths));
	if (!paths)
		return 1;
	for (i = 0; i < nnames; i++)
		for (d = 0; d < ndirs; d++)
			if (asprintf(&paths[i * ndirs + d], "%s/%s", dirs[d], names[i]) < 0)
				return 1;
	t0 = now_ns();
	for (p = 0; p < passes; p++) {
		for (i = 0; i < nnames; i++) {
			for (d = 0; d < ndirs; d++) {
				if (stat(paths[i * ndirs + d], &st) == 0) {
					hits++;
					break;
				}
				if (errno != ENOENT)
					note_failure(errno, paths[i * ndirs + d]);
				misses++;
			}
		}
	}
	ns = now_ns() - t0;
	snprintf(extra, sizeof(extra), " hits=%llu misses=%llu",
		 (unsigned long long)hits, (unsigned long long)misses);
	report(hits + misses, ns, extra);
	free_lines(paths);
	free_lines(names);
	return n_errors ? 1 : 0;
}

static int list_loop(const char *list_file, enum mode mode)
{
	size_t n, i;
	char **paths = read_lines(list_file, &n);
	uint64_t bytes = 0, t0, ns;
	char extra[64];
	int64_t r;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		r = one_call(mode, paths[i]);
		if (r < 0)
			note_failure((int)-r, paths[i]);
		else
			bytes += (uint64_t)r;
	}
	ns = now_ns() - t0;
	snprintf(extra, sizeof(extra), " bytes=%llu", (unsigned long long)bytes);
	report(n, ns, extra);
	free_lines(paths);
	return n_errors ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: statloop [-C DIR] [-t THREADS] [-n COUNT] [-m stat|lstat|open] PATH\n"
		"       statloop [-C DIR] -l LIST [-m lstat|read]\n"
		"       statloop [-C DIR] -I NAMES [-n PASSES] DIR...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *list = NULL, *names = NULL;
	enum mode mode = M_STAT;
	uint64_t count = 100000, ns;
	int threads = 1, opt;
	size_t i;
	char extra[64];

	while ((opt = getopt(argc, argv, "C:t:n:m:l:I:")) != -1) {
		switch (opt) {
		case 'C':
			if (chdir(optarg) < 0) {
				fprintf(stderr, "statloop: %s: %s\n", optarg, strerror(errno));
				return 1;
			}
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'n':
			count = strtoull(optarg, NULL, 10);
			break;
		case 'm':
			for (i = 0; i < sizeof(mode_table) / sizeof(mode_table[0]); i++)
				if (!strcmp(optarg, mode_table[i].name))
					break;
			if (i == sizeof(mode_table) / sizeof(mode_table[0]))
				usage();
			mode = mode_table[i].mode;
			break;
		case 'l':
			list = optarg;
			break;
		case 'I':
			names = optarg;
			break;
		default:
			usage();
		}
	}
	read_buf = malloc(1 << 20);
	if (!read_buf)
		return 1;
	if (names) {
		if (optind >= argc)
			usage();
		return include_search(names, argv + optind, argc - optind, count);
	}
	if (list)
		return list_loop(list, mode);
	if (optind != argc - 1 || mode == M_READ)
		usage();
	if (run_loop(mode, argv[optind], threads, count, &ns) < 0)
		usage();
	snprintf(extra, sizeof(extra), " threads=%d", threads);
	report(count * (uint64_t)threads, ns, extra);
	return n_errors ? 1 : 0;
}

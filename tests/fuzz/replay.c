/*
 * replay - run a fuzz target's LLVMFuzzerTestOneInput once on every file
 * of its saved corpus, without libFuzzer (so any compiler builds it, and
 * make check needs no clang). Linked with one tests/fuzz/fuzz_*.c.
 *
 *   replay_fuzz_NAME NAME DIR|FILE...
 *
 * Prints "1..N" (N = arguments after NAME), then one "ok - NAME: DIR (K
 * inputs)" per argument, the tests/run.sh protocol. A directory with no
 * input at all is "not ok" (a corpus that vanished is a failure, not a
 * pass). A crash ends the process with the sanitizer's report (or the
 * signal); before that it names the input on stderr, so the report says
 * which file to look at.
 *
 * Each input is copied into a heap buffer of its exact size, as libFuzzer
 * does, so an over-read is seen by AddressSanitizer.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_SANITIZER 1
#endif
#endif
#ifdef HAVE_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char current[4096];

static void say_current(void)
{
	static const char pre[] = "replay: crashed on input ";
	size_t n = strlen(current);

	/* Async-signal-safe: write(2) only. */
	if (write(2, pre, sizeof(pre) - 1) < 0 || write(2, current, n) < 0 ||
	    write(2, "\n", 1) < 0)
		return;
}

static void on_signal(int sig)
{
	say_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Returns 0, or -errno if the file could not be read. */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	int ret = 0;

	if (!f)
		return -errno;
	if (fstat(fileno(f), &st)) {
		ret = -errno;
		goto out;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	if (st.st_size && fread(buf, 1, st.st_size, f) != (size_t)st.st_size) {
		free(buf);
		ret = -EIO;
		goto out;
	}
	snprintf(current, sizeof(current), "%s", path);
	LLVMFuzzerTestOneInput(buf, (size_t)st.st_size);
	free(buf);
out:
	fclose(f);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir (sorted, so runs are repeatable). Returns the
 * count, or -errno. */
static long run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	long done = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				abort();
			names = nn;
		}
		names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
		if (!names[n])
			abort();
		sprintf(names[n++], "%s/%s", dir, e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			int rc = run_file(names[i]);
			if (rc) {
				fprintf(stderr, "replay: %s: %s\n", names[i],
					strerror(-rc));
				done = rc;
				break;
			}
			done++;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return done;
}

int main(int argc, char **argv)
{
	int failed = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s NAME DIR|FILE...\n", argv[0]);
		return 2;
	}
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGABRT, on_signal);
#ifdef HAVE_SANITIZER
	__sanitizer_set_death_callback(say_current);
#endif
	printf("1..%d\n", argc - 2);
	fflush(stdout);
	for (int i = 2; i < argc; i++) {
		struct stat st;
		long n;

		if (stat(argv[i], &st)) {
			n = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			n = run_dir(argv[i]);
		} else {
			n = run_file(argv[i]);
			n = n ? n : 1;
		}
		if (n > 0) {
			printf("ok - %s: %s (%ld inputs)\n", argv[1], argv[i], n);
		} else {
			printf("not ok - %s: %s\n", argv[1], argv[i]);
			printf("# %s\n", n ? strerror((int)-n) : "no inputs");
			failed = 1;
		}
		fflush(stdout);
	}
	return failed;
}

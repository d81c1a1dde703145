/*
 * fsck.c - `cairn fsck`: offline check of a stopped server's data
 * directory.
 */
#include <getopt.h>
#include <stdio.h>

#include "../server/store.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cairn fsck --data DIR\n"
		"\n"
		"Check the data directory of a stopped server: directory\n"
		"entries, link counts, unreachable objects, orphans, data files.\n"
		"Prints one line per problem, then how many orphans there are.\n"
		"Exit status 0 when clean, 1 otherwise.\n");
}

int cmd_fsck(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data = NULL;
	char err[512] = "";
	unsigned long orphans = 0;
	int opt, n;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+d:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': data = optarg; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "cairn fsck: bad option '%s'\n",
				argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || !data || !*data) {
		usage(stderr);
		return 2;
	}
	n = store_fsck(data, stdout, &orphans, err, sizeof(err));
	fflush(stdout);
	if (n < 0) {
		fprintf(stderr, "cairn fsck: %s\n", err[0] ? err : data);
		return 1;
	}
	printf("fsck: %s: %lu orphan(s) (unlinked files kept for the "
	       "clients that may have them open)\n", data, orphans);
	if (n == 0) {
		printf("fsck: %s: clean\n", data);
		return 0;
	}
	printf("fsck: %s: %d problem(s)\n", data, n);
	return 1;
}

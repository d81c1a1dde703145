/*
 * main.c - `cairn SUBCOMMAND ...`: the command table.
 */
#include <stdio.h>
#include <string.h>
#include "cli.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "serve", cmd_serve, "run a file server on a data directory" },
	{ "mount", cmd_mount, "mount a server's volume through FUSE" },
	{ "umount", cmd_umount, "unmount a Cairn mount" },
	{ "status", cmd_status, "print a server's or a mount's counters" },
	{ "fsck", cmd_fsck, "check a stopped server's data directory" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: cairn COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(f, "\n'cairn COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "cairn: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

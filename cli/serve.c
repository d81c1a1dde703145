/*
 * serve.c - `cairn serve`: run a file server in the foreground.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/proto.h"
#include "../server/lock.h"
#include "../server/orphan.h"
#include "../server/perm.h"
#include "../server/server.h"
#include "../server/token.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cairn serve --data DIR [--listen HOST:PORT] "
		"[--orphan-grace SECS] [--recall-timeout MS] "
		"[--lock-lease MS] [--lock-grace MS] "
		"[--handshake-timeout SECS] [--key FILE] "
		"[--ro-key FILE]... [--no-root-squash] [-v]\n"
		"\n"
		"Serve the volume stored in DIR (created on first use) until\n"
		"SIGTERM or SIGINT. Logs one line per event to stderr.\n"
		"\n"
		"  --data DIR          data directory (one server at a time)\n"
		"  --listen HOST:PORT  address to listen on (default "
		"127.0.0.1:%d;\n"
		"                      port 0 picks a free port)\n"
		"  --orphan-grace SECS\n"
		"                      seconds a client may stay disconnected\n"
		"                      before the files it unlinked while it\n"
		"                      may have had them open are freed\n"
		"                      (default %d)\n"
		"  --recall-timeout MS\n"
		"                      milliseconds a client may stay silent\n"
		"                      (no change sent under a file's write\n"
		"                      token, and the token not given back)\n"
		"                      once another client needs the file;\n"
		"                      then the token is revoked (default %u)\n"
		"  --lock-lease MS     milliseconds a client whose connection\n"
		"                      ended keeps its locks (flock, fcntl)\n"
		"                      before they are dropped, and a client\n"
		"                      has to hand back a file's locks\n"
		"                      delegated to it once another client\n"
		"                      asks (default %u)\n"
		"  --lock-grace MS     milliseconds after the start in which\n"
		"                      clients reclaim the locks they held and\n"
		"                      no new lock is granted (a lock one holds\n"
		"                      may still be downgraded) (default %u)\n"
		"  --handshake-timeout SECS\n"
		"                      seconds a new connection has to\n"
		"                      authenticate and say HELLO before it\n"
		"                      is dropped (default %d)\n"
		"  --key FILE          the cell key, shared by the cell's\n"
		"                      servers and clients (default\n"
		"                      DIR/cell.key, created with a new key at\n"
		"                      the first start; mode 0600 required)\n"
		"  --ro-key FILE       a further key (repeatable, up to %d):\n"
		"                      clients holding it may read, and every\n"
		"                      change they ask for is refused (EROFS);\n"
		"                      they mount read-only\n"
		"  --no-root-squash    let root on a client act as root here\n"
		"                      (by default its requests run as nobody,\n"
		"                      uid and gid %u)\n"
		"  -v, --verbose       also log every request\n"
		"  -h, --help          show this help\n",
		CAIRN_DEFAULT_PORT, ORPHAN_GRACE_S, TOK_RECALL_TIMEOUT_MS,
		LK_LEASE_MS, LK_GRACE_MS, SRV_HANDSHAKE_TIMEOUT_S,
		SRV_MAX_RO_KEYS, CRED_NOBODY);
}

/* optarg as a whole number in [min, max] into *out; else a message and
 * the usage on stderr, and -1. */
static int number_opt(const char *opt, const char *unit, unsigned long min,
		      unsigned long max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(optarg, &end, 10);
	if (errno || end == optarg || *end || optarg[0] == '-' || v < min ||
	    v > max) {
		fprintf(stderr, "cairn serve: bad %s '%s' (%s, %lu to %lu)\n",
			opt, optarg, unit, min, max);
		usage(stderr);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/*
 * Every READ reply is a buffer of up to 1 MiB (and its sealed copy), on
 * whichever worker thread took the request. With glibc's defaults each
 * worker has its own arena, trimmed back to the system when a reply is
 * freed, so most replies were built in memory never touched before: 64
 * page faults per MiB (about 2 ms of the server's CPU per MiB read, in
 * `perf stat` on this machine). One arena that keeps up to 64 MiB of
 * freed memory, and buffers of up to 4 MiB taken from it rather than
 * mapped alone, serve them from warm memory: a 100 MiB first read by a
 * second client cost 6,411 page faults and 0.22 s of server CPU before,
 * 1,025 and 0.08-0.11 s after.
 */
static void tune_malloc(void)
{
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

int cmd_serve(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "orphan-grace", required_argument, NULL, 'g' },
		{ "recall-timeout", required_argument, NULL, 'r' },
		{ "lock-lease", required_argument, NULL, 'L' },
		{ "lock-grace", required_argument, NULL, 'G' },
		{ "handshake-timeout", required_argument, NULL, 'H' },
		{ "key", required_argument, NULL, 'k' },
		{ "ro-key", required_argument, NULL, 'R' },
		{ "no-root-squash", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data = NULL, *listen = "127.0.0.1";
	char host[256], err[512];
	struct server_opts o = { 0 };
	struct server *srv;
	sigset_t sigs;
	int opt, port, sig, ret;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+d:l:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': data = optarg; break;
		case 'l': listen = optarg; break;
		case 'g':
			if (number_opt("--orphan-grace", "seconds", 1,
				       365ul * 86400, &o.orphan_grace_s))
				return 2;
			break;
		case 'r':
			if (number_opt("--recall-timeout", "milliseconds", 10,
				       3600000ul, &o.recall_timeout_ms))
				return 2;
			break;
		case 'L':
			if (number_opt("--lock-lease", "milliseconds", 0,
				       86400000ul, &o.lock_lease_ms))
				return 2;
			o.lock_set |= SRV_LOCK_LEASE;
			break;
		case 'G':
			if (number_opt("--lock-grace", "milliseconds", 0,
				       86400000ul, &o.lock_grace_ms))
				return 2;
			o.lock_set |= SRV_LOCK_GRACE;
			break;
		case 'H':
			if (number_opt("--handshake-timeout", "seconds", 1,
				       3600, &o.handshake_timeout_s))
				return 2;
			break;
		case 'k': o.key_file = optarg; break;
		case 'S': o.no_root_squash = 1; break;
		case 'R':
			if (o.n_ro_keys == SRV_MAX_RO_KEYS) {
				fprintf(stderr, "cairn serve: at most %d "
					"--ro-key\n", SRV_MAX_RO_KEYS);
				return 2;
			}
			o.ro_key_files[o.n_ro_keys++] = optarg;
			break;
		case 'v': log_verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "cairn serve: bad option '%s'\n",
				argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cairn serve: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!data || !*data) {
		fprintf(stderr, "cairn serve: --data DIR is required\n");
		usage(stderr);
		return 2;
	}
	if (net_parse_addr(listen, host, sizeof(host), &port,
			   CAIRN_DEFAULT_PORT)) {
		fprintf(stderr, "cairn serve: bad listen address '%s'\n",
			listen);
		usage(stderr);
		return 2;
	}
	log_set_role("serve");

	/* Every thread inherits the blocked signals; this one waits for
	 * them, so shutdown runs in ordinary thread context. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	o.data_dir = data;
	o.host = host;
	o.port = port;
	tune_malloc();
	ret = server_start(&o, &srv, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cairn serve: %s\n", err);
		return 1;
	}
	fprintf(stderr, "cairn serve: listening on %s%s%s:%d (data %s)\n",
		strchr(host, ':') ? "[" : "", host,
		strchr(host, ':') ? "]" : "", server_port(srv), data);
	fflush(stderr);

	do {
		ret = sigwait(&sigs, &sig);
	} while (ret == EINTR);
	log_info("%s received, shutting down", sig == SIGINT ? "SIGINT"
							    : "SIGTERM");
	server_stop(srv);
	log_info("stopped");
	return 0;
}

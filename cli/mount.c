/*
 * mount.c - `cairn mount`: connect to a server and serve its volume
 * through FUSE.
 *
 * Order matters: the server is reached first (so a wrong address fails at
 * once with a clear message, before anything is mounted), then the FUSE
 * session is created and mounted, then the process daemonizes, and only
 * then are threads started (rpc reader, notifier, FUSE workers): fork()
 * keeps only the calling thread. The parent exits 0 only once the daemon
 * serves: the kernel's INIT answered and the readahead raised, so the
 * first read after `cairn mount` returns already goes in 1 MiB requests;
 * it exits 1 if the daemon dies before that.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <poll.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "cli.h"
#include "mnt_util.h"
#include "../client/ctl.h"
#include "../client/ccache.h"
#include "../client/fs.h"
#include "../client/fuseio.h"
#include "../client/fusering.h"
#include "../client/inode.h"
#include "../client/notify.h"
#include "../client/wback.h"
#include "../client/rpc.h"
#include "../lib/seal.h"
#include "../lib/log.h"
#include "../lib/net.h"

#define MOUNT_CONNECT_TIMEOUT_MS 5000 /* fail well within 10 s */
#define MOUNT_DOWN_TIMEOUT_S     60   /* default --timeout: a call waits this
				       * long for a lost server before
				       * failing with EIO */
#define MOUNT_DOWN_TIMEOUT_MAX_S 86400
#define MOUNT_DEFAULT_CACHE_ROOT "/var/cache/cairn"

struct mount_args {
	const char *addr;
	const char *mountpoint;
	const char *cache_dir;
	uint64_t cache_size;
	int cache_size_set;
	const char *extra_opts;
	int foreground;
	int verbose;
	int timeout_s;
	int write_through;
	int local_locks;
	int no_uring;
	int read_only;           /* the server said: a read-only export */
	const char *key;
	char host[256];
	int port;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: cairn mount [--key FILE] [--cache-dir DIR] [--cache-size SIZE] [--timeout SECS] [--write-through] [--local-locks] [--no-uring] [-f] [-v] [-o OPTS] HOST[:PORT] MOUNTPOINT\n"
"\n"
"Mount the volume of the Cairn server at HOST (port %d by default) on\n"
"MOUNTPOINT. The command returns once the mount exists; the client keeps\n"
"running in the background until `cairn umount MOUNTPOINT`.\n"
"\n"
"  --key FILE       the cell key: the server's DATA/cell.key, copied here\n"
"                   with mode 0600 (default $CAIRN_KEY if set, else\n"
"                   %s). Client and server prove to each other\n"
"                   that they hold it, and it seals every frame\n"
"  --cache-dir DIR  the client's state directory, created if missing\n"
"                   (default %s/HOST_PORT): its log (cairn.log),\n"
"                   pid file and file data cache (chunks/), which\n"
"                   survives remounts and restarts\n"
"  --cache-size SIZE  at most this much file data cached on disk, in\n"
"                   bytes or with a K, M, G or T suffix (powers of 1024);\n"
"                   0 turns the disk cache off (default: %u%% of the free\n"
"                   space in the cache directory at mount, at most 10G)\n"
"  --timeout SECS   how long an operation waits for an unreachable or\n"
"                   unresponsive server before failing with EIO\n"
"                   (default %d); a server silent for half of it (at\n"
"                   most 30) is treated as lost and reconnected to; one\n"
"                   out of reach that long makes operations fail at once\n"
"                   until it answers again. A signal to the waiting\n"
"                   program ends it at once (EINTR).\n"
"  --write-through  send every write() to the server as it happens, instead\n"
"                   of letting the kernel gather writes in its page cache\n"
"                   and send them in large pieces by close() or fsync()\n"
"                   (the default). Slower for small writes; use it when a\n"
"                   program here keeps a file open while another client\n"
"                   shrinks or rewrites it and must see the new size at\n"
"                   once (with the cache, that takes a reopen after the\n"
"                   last close here)\n"
"  --local-locks    keep flock and fcntl locks within this client, as a\n"
"                   local file system would, and let open() and close()\n"
"                   skip the client daemon. By default locks are granted\n"
"                   by the server and hold across every client of the\n"
"                   volume (SQLite, mail spools and make need that when\n"
"                   more than one machine uses the files)\n"
"  --no-uring       take the kernel's requests by reading /dev/fuse. By\n"
"                   default, where the kernel can (Linux 6.14 and later,\n"
"                   built with FUSE_IO_URING), they come over io_uring, one\n"
"                   queue per CPU, answered on the CPU that asked; as root\n"
"                   the mount turns the kernel's switch on\n"
"                   (/sys/module/fuse/parameters/enable_uring) if it is off\n"
"  -f, --foreground stay in the foreground and log to stderr\n"
"  -v, --verbose    log debugging detail\n"
"  -o OPTS          extra FUSE mount options, comma-separated\n"
"  -h, --help       print this help\n"
"\n"
"Run as root, the mount is open to every local user (allow_other) with\n"
"permissions checked by the kernel (default_permissions), and by the\n"
"server on the credentials each request carries.\n",
		CAIRN_DEFAULT_PORT, CELLKEY_DEFAULT, MOUNT_DEFAULT_CACHE_ROOT,
		CCACHE_DEFAULT_PERCENT, MOUNT_DOWN_TIMEOUT_S);
}

/* Returns 0, or 2 after printing usage (or -1 for --help, printed). */
static int parse_args(int argc, char **argv, struct mount_args *a)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "cache-dir", required_argument, NULL, 'c' },
		{ "cache-size", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "write-through", no_argument, NULL, 'W' },
		{ "local-locks", no_argument, NULL, 'L' },
		{ "no-uring", no_argument, NULL, 'U' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int c;

	memset(a, 0, sizeof(*a));
	a->timeout_s = MOUNT_DOWN_TIMEOUT_S;
	optind = 0; /* full reset: main may be reused, e.g. by tests */
	while ((c = getopt_long(argc, argv, "+fvo:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			a->key = optarg;
			break;
		case 'c':
			a->cache_dir = optarg;
			break;
		case 's':
			if (ccache_parse_size(optarg, &a->cache_size)) {
				fprintf(stderr, "cairn mount: --cache-size: "
					"expected bytes or a number with K, M, "
					"G or T, got '%s'\n", optarg);
				usage(stderr);
				return 2;
			}
			a->cache_size_set = 1;
			break;
		case 't':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 ||
			    v > MOUNT_DOWN_TIMEOUT_MAX_S) {
				fprintf(stderr, "cairn mount: --timeout: expected "
					"whole seconds from 1 to %d, got '%s'\n",
					MOUNT_DOWN_TIMEOUT_MAX_S, optarg);
				usage(stderr);
				return 2;
			}
			a->timeout_s = (int)v;
			break;
		case 'W':
			a->write_through = 1;
			break;
		case 'L':
			a->local_locks = 1;
			break;
		case 'U':
			a->no_uring = 1;
			break;
		case 'f':
			a->foreground = 1;
			break;
		case 'v':
			a->verbose = 1;
			break;
		case 'o':
			a->extra_opts = optarg;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "cairn mount: expected HOST[:PORT] and MOUNTPOINT\n");
		usage(stderr);
		return 2;
	}
	a->addr = argv[optind];
	a->mountpoint = argv[optind + 1];
	if (net_parse_addr(a->addr, a->host, sizeof(a->host), &a->port,
			   CAIRN_DEFAULT_PORT) < 0) {
		fprintf(stderr, "cairn mount: bad server address '%s'\n",
			a->addr);
		usage(stderr);
		return 2;
	}
	return 0;
}

/* mkdir -p; returns 0 or -errno. */
static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Daemon mode: log lines go to DIR/cairn.log (stderr redirected). */
static void log_to_file(const char *cache_dir)
{
	char path[PATH_MAX];
	int fd;

	if (snprintf(path, sizeof(path), "%s/cairn.log", cache_dir) >=
	    (int)sizeof(path)) {
		log_use_syslog();
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_use_syslog();
		log_warn("cannot open %s: %s; logging to syslog", path,
			 strerror(errno));
		return;
	}
	dup2(fd, STDERR_FILENO);
	close(fd);
}

static struct fuse_session *session_new(const struct mount_args *a,
					struct fs *fs)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	char opts[512];

	/* default_permissions always: the kernel answers what it has cached
	 * without asking us (the server checks what reaches it, perm.h).
	 * allow_other only where it is permitted. */
	snprintf(opts, sizeof(opts),
		 "fsname=cairn:%s:%d,subtype=cairn,default_permissions%s%s",
		 a->host, a->port, geteuid() == 0 ? ",allow_other" : "",
		 a->read_only ? ",ro" : "");
	if (fuse_opt_add_arg(&args, "cairn") ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, opts) ||
	    (a->extra_opts && (fuse_opt_add_arg(&args, "-o") ||
			       fuse_opt_add_arg(&args, a->extra_opts))))
		goto out;
	se = fuse_session_new(&args, fs_ops(), sizeof(struct fuse_lowlevel_ops),
			      fs);
out:
	fuse_opt_free_args(&args);
	return se;
}

struct mount_state {
	int ready_fd;     /* the waiting parent's pipe; -1 when none */
	struct notify *ntf;
	struct rpc *rpc;
	struct itab *itab;
	struct fs *fs;
	struct fuse_session *se;
	struct ccache *cc;   /* the disk cache; NULL when off */
	struct wb *wbk;      /* the write-back journal; NULL when off */
	struct ctl *ctl;  /* `cairn status MOUNTPOINT` (client/ctl.h) */
	int mounted;
	int signals;
	char pidfile[PATH_MAX];
	char runfile[PATH_MAX];
	char ctlpath[PATH_MAX];
	char mnt[PATH_MAX];
	char cache[PATH_MAX];
};

static void teardown(struct mount_state *m)
{
	/* It reads the rpc, notifier and table: gone before them. */
	ctl_destroy(m->ctl);
	if (m->signals)
		fuse_remove_signal_handlers(m->se);
	if (m->mounted)
		fuse_session_unmount(m->se);
	/* The kernel ended the ring's entries with the connection. */
	fusering_stop();
	/* The kernel is gone: release the unlinked files it held, while
	 * the rpc still runs. */
	if (m->fs) {
		fs_ahead_stop(m->fs);
		fs_orphans_stop(m->fs);
	}
	/* Everything the journal holds goes to the server before the
	 * connection does (or stays for the next mount, logged). */
	wb_stop(m->wbk);
	/* No lock call waits any more (the session is over). */
	if (m->fs)
		fs_locks_stop(m->fs);
	/* The notifier sends acknowledgements through the rpc, so it stops
	 * first; pushes still arriving until rpc_destroy are only queued. */
	notify_stop(m->ntf);
	if (m->rpc)
		rpc_destroy(m->rpc);
	notify_destroy(m->ntf);
	if (m->se)
		fuse_session_destroy(m->se);
	/* No handler runs any more. */
	wb_close(m->wbk);
	ccache_close(m->cc);
	fs_destroy(m->fs);
	itab_destroy(m->itab);
	if (m->pidfile[0])
		unlink(m->pidfile);
	if (m->runfile[0])
		unlink(m->runfile);
}

/* How long the parent waits for the daemon to serve. */
#define MOUNT_READY_TIMEOUT_MS 15000

/*
 * One READ per MiB instead of per 128 KiB for sequential reads. The
 * kernel lowers the mount's readahead to what the FUSE INIT reply allows
 * (at most its 128 KiB default) when it applies that reply, so raise it in
 * sysfs after: wait until INIT was answered, then make one system call on
 * the mount (the kernel holds it until INIT is applied), then raise. Then
 * tell the waiting parent. A failure (not root, no sysfs) only costs round
 * trips.
 */
static void *readahead_main(void *arg)
{
	struct mount_state *m = arg;
	struct statvfs sv;
	int rc;

	rc = fs_wait_init(m->fs, MOUNT_READY_TIMEOUT_MS);
	if (!rc && statvfs(m->mnt, &sv) < 0)
		rc = -errno;
	if (!rc)
		rc = mnt_set_readahead(m->mnt, CAIRN_MAX_IO / 1024);
	if (rc < 0)
		log_warn("cannot raise readahead on %s: %s", m->mnt,
			 strerror(-rc));
	if (m->ready_fd >= 0) {
		if (write(m->ready_fd, "R", 1) != 1)
			log_warn("cannot tell the parent we serve: %s",
				 strerror(errno));
		close(m->ready_fd);
		m->ready_fd = -1;
	}
	return NULL;
}

static void readahead_start(struct mount_state *m)
{
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, readahead_main, m) != 0)
		log_warn("cannot start the readahead thread");
	pthread_attr_destroy(&attr);
}

/*
 * Detach from the terminal like fuse_daemonize(), but the parent waits on
 * a pipe until the child writes one byte (it serves) or closes the pipe by
 * dying. Returns 0 in the child (*ready_fd is the pipe's end to write); the
 * parent never returns.
 */
static int daemonize(const char *cache, int *ready_fd)
{
	int p[2], nul;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid > 0) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		char c = 0;

		close(p[1]);
		if (poll(&pfd, 1, MOUNT_READY_TIMEOUT_MS) == 0) {
			fprintf(stderr, "cairn mount: the daemon has not "
				"started serving after %d s; leaving it "
				"running (log: %s/cairn.log)\n",
				MOUNT_READY_TIMEOUT_MS / 1000, cache);
			_exit(0);
		}
		if (read(p[0], &c, 1) == 1 && c == 'R')
			_exit(0);
		fprintf(stderr, "cairn mount: the daemon exited while "
			"starting; see %s/cairn.log\n", cache);
		_exit(1);
	}
	close(p[0]);
	if (setsid() < 0 || chdir("/") < 0) {
		close(p[1]);
		return -errno;
	}
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		if (nul > 2)
			close(nul);
	}
	*ready_fd = p[1];
	return 0;
}

/*
 * Open the disk cache (after daemonizing: LMDB must not cross a fork) and
 * hand it to the file system. A cache that cannot be opened (in use by
 * another mount of the same cache directory, a full disk) costs speed,
 * not the mount: it is logged and reads go to the server.
 */
static void cache_start(struct mount_state *m, const struct mount_args *a)
{
	uint64_t limit = a->cache_size_set ? a->cache_size
					   : ccache_default_limit(m->cache);
	int rc;

	if (limit == 0) {
		log_info("no disk cache (--cache-size 0)");
		return;
	}
	rc = ccache_open(m->cache, limit, &m->cc);
	if (rc < 0) {
		m->cc = NULL;
		log_warn("no disk cache in %s/chunks: %s", m->cache,
			 rc == -EBUSY ? "in use by another cairn mount"
				      : strerror(-rc));
		return;
	}
	fs_set_ccache(m->fs, m->cc);
}

/*
 * Open the write-back journal (in the cache directory, like the chunk
 * cache) and hand it to the file system. It is opened even with
 * --write-through, so that what an earlier mount left is sent. Without
 * it the mount writes through, logged.
 */
static void wback_start(struct mount_state *m)
{
	char err[512];
	int rc = wb_open(m->cache, m->fs, &m->wbk, err, sizeof(err));

	if (rc < 0) {
		m->wbk = NULL;
		log_warn("no write-back journal (%s): writes go to the server "
			 "before close() returns", err);
		return;
	}
	fs_set_wback(m->fs, m->wbk);
	notify_set_wback_hooks(m->ntf, wb_recall, wb_reconnected, wb_held,
			       m->wbk);
}

/* `cairn status MOUNTPOINT`: the cache.* keys (cache.enabled 0 when off). */
static void cache_section(void *arg, FILE *f)
{
	ccache_print_stats(arg, f);
}

/* `cairn status MOUNTPOINT`: the directory cache's dir.* keys. */
static void dir_section(void *arg, FILE *f)
{
	fs_print_dir_stats(arg, f);
}

/* After daemonizing: start the threads and serve until unmounted. */
static int serve_mount(struct mount_state *m, const struct mount_args *a,
		       const char *mnt)
{
	struct fuse_loop_config cfg = { .clone_fd = 0, .max_idle_threads = 16 };
	int rc;

	cache_start(m, a);
	wback_start(m);
	if ((rc = mnt_pidfile_write(m->pidfile, mnt)) < 0)
		log_warn("cannot write %s: %s", m->pidfile, strerror(-rc));
	if ((rc = mnt_pidfile_write(m->runfile, mnt)) < 0)
		log_warn("cannot write %s: %s", m->runfile, strerror(-rc));
	if ((rc = notify_start(m->ntf, m->se, m->itab, m->rpc)) < 0 ||
	    (rc = rpc_start(m->rpc)) < 0 ||
	    (rc = fs_orphans_start(m->fs)) < 0 ||
	    (rc = fs_ahead_start(m->fs)) < 0 ||
	    (m->wbk && (rc = wb_start(m->wbk)) < 0) ||
	    (!a->local_locks && (rc = fs_locks_start(m->fs)) < 0)) {
		log_error("cannot start threads: %s", strerror(-rc));
		return 1;
	}
	if ((rc = ctl_add_section(m->ctl, dir_section, m->fs)) < 0 ||
	    (rc = ctl_add_section(m->ctl, cache_section, m->cc)) < 0 ||
	    (rc = ctl_add_section(m->ctl, wb_print_stats, m->wbk)) < 0 ||
	    (rc = ctl_add_section(m->ctl, fs_lock_print_stats, m->fs)) < 0 ||
	    (rc = ctl_add_section(m->ctl, fusering_print_stats, NULL)) < 0)
		log_warn("cache counters not in cairn status: %s",
			 strerror(-rc));
	if ((rc = ctl_start(m->ctl, m->ctlpath)) < 0)
		log_warn("no control socket %s (cairn status MOUNTPOINT): %s",
			 m->ctlpath, strerror(-rc));
	if (fuse_set_signal_handlers(m->se) == 0)
		m->signals = 1;
	if ((rc = fs_refresh_statfs(m->fs)) < 0)
		log_warn("statfs: %s", strerror(-rc));
	log_info("serving %s:%d on %s%s", a->host, a->port, mnt,
		 a->read_only ? " (read-only: the key is a read-only export)"
			      : "");
	readahead_start(m);
	rc = fuse_session_loop_mt(m->se, &cfg);
	log_info("session ended (%d); unmounting %s", rc, mnt);
	return rc < 0 ? 1 : 0;
}

int cmd_mount(int argc, char **argv)
{
	struct mount_state m;
	struct mount_args a;
	struct rpc_opts o;
	struct ctl_info ci;
	struct cairn_attr root;
	char mnt[PATH_MAX], cache[PATH_MAX], tmp[PATH_MAX], err[256] = "";
	struct stat st;
	int rc, ring, status = 1;

	memset(&m, 0, sizeof(m));
	m.ready_fd = -1;
	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	log_set_role("mount");
	log_verbose = a.verbose;

	if (stat(a.mountpoint, &st) < 0 || !realpath(a.mountpoint, mnt)) {
		fprintf(stderr, "cairn mount: %s: %s\n", a.mountpoint,
			strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cairn mount: %s: not a directory\n",
			a.mountpoint);
		return 1;
	}
	if (a.cache_dir)
		snprintf(tmp, sizeof(tmp), "%s", a.cache_dir);
	else
		snprintf(tmp, sizeof(tmp), "%s/%s_%d",
			 MOUNT_DEFAULT_CACHE_ROOT, a.host, a.port);
	/* Where `cairn umount` will look for us; a directory that cannot be
	 * created shows when the pid file is written. */
	mnt_rundir_create();
	mnt_rundir_prune();
	mnt_pidfile_path(mnt, m.runfile, sizeof(m.runfile));

	memset(&o, 0, sizeof(o));
	o.host = a.host;
	o.port = a.port;
	o.connect_timeout_ms = MOUNT_CONNECT_TIMEOUT_MS;
	o.down_timeout_s = a.timeout_s;
	o.on_push = notify_on_push;
	/* The notifier acknowledges breaks, without waiting for the locks
	 * of our own requests where the kernel lets it. */
	o.hello_flags = HELLO_CB_ACK | notify_hello_flags();
	o.on_reconnect = notify_on_reconnect;
	o.on_lapse = notify_on_lapse;
	rc = cellkey_load(cellkey_path(a.key), o.key, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "cairn mount: %s%s\n", err, rc == -ENOENT ?
			" (copy the server's DATA/cell.key here, or give "
			"--key FILE)" : "");
		return 1;
	}
	if (getrandom(o.client_id, sizeof(o.client_id), 0) !=
	    (ssize_t)sizeof(o.client_id)) {
		fprintf(stderr, "cairn mount: getrandom: %s\n", strerror(errno));
		return 1;
	}
	if ((rc = notify_create(&m.ntf)) < 0)
		goto fail_errno;
	o.arg = m.ntf;
	rc = rpc_connect(&o, &m.rpc, &root, err, sizeof(err));
	seal_wipe(o.key, sizeof(o.key)); /* the rpc keeps its own copy */
	if (rc < 0) {
		if (err[0])
			fprintf(stderr, "cairn mount: %s\n", err);
		else
			fprintf(stderr, "cairn mount: cannot reach server "
				"%s:%d: %s\n", a.host, a.port, strerror(-rc));
		m.rpc = NULL;
		goto out;
	}
	/* A read-only export: the kernel refuses changes (EROFS) itself. */
	a.read_only = rpc_read_only(m.rpc);
	/* Only now: a mistyped server address leaves nothing behind. */
	if ((rc = mkdir_p(tmp)) < 0 || !realpath(tmp, cache)) {
		fprintf(stderr, "cairn mount: cannot create cache directory "
			"%s: %s\n", tmp, strerror(rc < 0 ? -rc : errno));
		goto out;
	}
	snprintf(m.cache, sizeof(m.cache), "%s", cache);
	if (snprintf(m.pidfile, sizeof(m.pidfile), "%s/pid", cache) >=
	    (int)sizeof(m.pidfile)) {
		fprintf(stderr, "cairn mount: %s: path too long\n", cache);
		goto out;
	}
	if ((rc = itab_create(&root, &m.itab)) < 0) {
		fprintf(stderr, "cairn mount: server's root is vnode %llu, "
			"not %u\n", (unsigned long long)root.fid.vnode,
			ITAB_ROOT_INO);
		goto out;
	}
	if ((rc = fs_create(m.rpc, m.itab, m.ntf, &m.fs)) < 0)
		goto fail_errno;
	fs_set_writeback(m.fs, !a.write_through);
	fs_set_global_locks(m.fs, !a.local_locks);
	snprintf(tmp, sizeof(tmp), strchr(a.host, ':') ? "[%s]:%d" : "%s:%d",
		 a.host, a.port);
	ci = (struct ctl_info){ .mnt = mnt, .server = tmp, .rpc = m.rpc,
				.ntf = m.ntf, .itab = m.itab };
	if ((rc = ctl_create(&ci, &m.ctl)) < 0)
		goto fail_errno;
	mnt_ctl_path(mnt, geteuid(), m.ctlpath, sizeof(m.ctlpath));
	if (!(m.se = session_new(&a, m.fs))) {
		fprintf(stderr, "cairn mount: cannot create FUSE session "
			"(bad -o option?)\n");
		goto out;
	}
	/* The kernel offers the ring in the INIT it sends at the mount. */
	ring = !a.no_uring && fusering_enable(1);
	if (fuse_session_mount(m.se, mnt) != 0) {
		fprintf(stderr, "cairn mount: cannot mount on %s\n", mnt);
		goto out;
	}
	m.mounted = 1;
	snprintf(m.mnt, sizeof(m.mnt), "%s", mnt);
	if ((rc = fuseio_attach(m.se, ring)) < 0) {
		fprintf(stderr, "cairn mount: cannot hook the FUSE device: "
			"%s\n", strerror(-rc));
		goto out;
	}
	if (!a.foreground) {
		/* The parent exits in here once the child serves. */
		if ((rc = daemonize(cache, &m.ready_fd)) < 0) {
			fprintf(stderr, "cairn mount: cannot daemonize: %s\n",
				strerror(-rc));
			goto out;
		}
		log_to_file(cache);
	}
	status = serve_mount(&m, &a, mnt);
	goto out;
fail_errno:
	fprintf(stderr, "cairn mount: %s\n", strerror(-rc));
out:
	teardown(&m);
	return status;
}

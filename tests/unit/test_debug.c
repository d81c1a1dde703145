/*
 * test_debug.c - lib/debug.h: the checks fire when a rule is broken and
 * stay silent when it holds.
 *
 * A check that fires aborts, so each breaking case runs in a forked child
 * and the parent expects SIGABRT and the "BUG:" line naming the check on
 * the child's stderr. In a build without CAIRN_DEBUG the checks compile
 * to nothing: those tests are reported as TAP skips, and one test checks
 * that a condition is then not even evaluated. The last tests break a
 * rule of the server's modules through their own API and expect the
 * module's check to fire, so the checks are known to be compiled in
 * where the rules are.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/debug.h"
#include "../../server/callback.h"
#include "../../server/drc.h"
#include "../../server/store.h"
#include "check.h"

#ifdef CAIRN_DEBUG

/*
 * Run fn(arg) in a child with stderr captured. Returns the child's wait
 * status; the first bytes of its stderr land in err (NUL-terminated).
 */
static int run_child(void (*fn)(void *), void *arg, char *err, size_t errsz)
{
	int pfd[2], status = 0;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	err[0] = 0;
	if (pipe(pfd) < 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		close(pfd[0]);
		dup2(pfd[1], 2);
		fn(arg);
		_exit(0);
	}
	close(pfd[1]);
	while (got + 1 < errsz &&
	       (n = read(pfd[0], err + got, errsz - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = 0;
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return status;
}

/* fn(arg) must abort, saying BUG and `what`. */
static void expect_abort(void (*fn)(void *), void *arg, const char *what)
{
	char err[4096];
	int st = run_child(fn, arg, err, sizeof(err));

	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(strstr(err, "BUG: ") != NULL);
	CHECK(strstr(err, what) != NULL);
	if (!strstr(err, what))
		fprintf(stderr, "  child's stderr: %s\n", err);
}

/* fn(arg) must return normally (also checked in a child, so a wrong
 * abort is reported as a failure instead of ending the test). */
static void expect_pass(void (*fn)(void *), void *arg)
{
	char err[4096];
	int st = run_child(fn, arg, err, sizeof(err));

	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!WIFEXITED(st))
		fprintf(stderr, "  child's stderr: %s\n", err);
}

/* --- mutexes ---------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void held_unheld(void *arg)
{
	LOCK_ASSERT_HELD(&mu);
}

static void held_held(void *arg)
{
	pthread_mutex_lock(&mu);
	LOCK_ASSERT_HELD(&mu);
	pthread_mutex_unlock(&mu);
}

static void held_after_unlock(void *arg)
{
	pthread_mutex_lock(&mu);
	pthread_mutex_unlock(&mu);
	LOCK_ASSERT_HELD(&mu);
}

static void not_held_unheld(void *arg)
{
	LOCK_ASSERT_NOT_HELD(&mu);
}

static void not_held_held(void *arg)
{
	pthread_mutex_lock(&mu);
	LOCK_ASSERT_NOT_HELD(&mu);
}

static void test_mutex(void)
{
	expect_abort(held_unheld, NULL, "lock &mu not held by this thread");
	expect_pass(held_held, NULL);
	expect_abort(held_after_unlock, NULL, "not held");
	expect_pass(not_held_unheld, NULL);
	expect_abort(not_held_held, NULL, "lock &mu held by this thread");
}

/* Held by another thread: "held by me" is false, "not held by me" true. */
static pthread_mutex_t other_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int other_has_it, other_may_go;

static void *other_main(void *arg)
{
	pthread_mutex_lock(&other_mu);
	pthread_mutex_lock(&gate);
	other_has_it = 1;
	pthread_cond_broadcast(&gate_cv);
	while (!other_may_go)
		pthread_cond_wait(&gate_cv, &gate);
	pthread_mutex_unlock(&gate);
	pthread_mutex_unlock(&other_mu);
	return NULL;
}

static void other_held_check(void *arg)
{
	LOCK_ASSERT_HELD(&other_mu);
}

static void other_not_held_check(void *arg)
{
	LOCK_ASSERT_NOT_HELD(&other_mu);
}

static void test_mutex_other_thread(void)
{
	pthread_t th;

	if (pthread_create(&th, NULL, other_main, NULL)) {
		CHECK(!"pthread_create");
		return;
	}
	pthread_mutex_lock(&gate);
	while (!other_has_it)
		pthread_cond_wait(&gate_cv, &gate);
	pthread_mutex_unlock(&gate);

	/* In this process, not only in a child: the owner is another live
	 * thread here. */
	LOCK_ASSERT_NOT_HELD(&other_mu);
	expect_abort(other_held_check, NULL, "not held by this thread");
	expect_pass(other_not_held_check, NULL);

	pthread_mutex_lock(&gate);
	other_may_go = 1;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate);
	pthread_join(th, NULL);
}

/* A condition wait gives the mutex up and takes it back: the owner must
 * be this thread again afterwards. Also other mutex kinds. */
static void held_after_cond_wait(void *arg)
{
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	struct timespec ts;

	pthread_mutex_lock(&mu);
	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_cond_timedwait(&cv, &mu, &ts); /* times out at once */
	LOCK_ASSERT_HELD(&mu);
	pthread_mutex_unlock(&mu);
	LOCK_ASSERT_NOT_HELD(&mu);
}

static void kind_check(void *arg)
{
	int kind = *(int *)arg;
	pthread_mutexattr_t a;
	pthread_mutex_t m;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, kind);
	pthread_mutex_init(&m, &a);
	LOCK_ASSERT_NOT_HELD(&m);
	pthread_mutex_lock(&m);
	LOCK_ASSERT_HELD(&m);
	pthread_mutex_unlock(&m);
	LOCK_ASSERT_HELD(&m); /* must abort */
}

static void test_mutex_kinds(void)
{
	int kinds[] = { PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_ERRORCHECK,
			PTHREAD_MUTEX_RECURSIVE };

	expect_pass(held_after_cond_wait, NULL);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		expect_abort(kind_check, &kinds[i], "lock &m not held");
}

/* --- rwlocks ---------------------------------------------------------------- */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static void wr_wrheld(void *arg)
{
	pthread_rwlock_wrlock(&rw);
	RWLOCK_ASSERT_WRHELD(&rw);
	RWLOCK_ASSERT_HELD(&rw);
	pthread_rwlock_unlock(&rw);
}

static void rd_held(void *arg)
{
	pthread_rwlock_rdlock(&rw);
	RWLOCK_ASSERT_HELD(&rw);
	RWLOCK_ASSERT_NOT_WRHELD(&rw);
	pthread_rwlock_unlock(&rw);
}

static void rd_wrheld(void *arg)
{
	pthread_rwlock_rdlock(&rw);
	RWLOCK_ASSERT_WRHELD(&rw);
}

static void none_held(void *arg)
{
	RWLOCK_ASSERT_HELD(&rw);
}

static void none_wrheld(void *arg)
{
	RWLOCK_ASSERT_WRHELD(&rw);
}

static void wr_not_wrheld(void *arg)
{
	pthread_rwlock_wrlock(&rw);
	RWLOCK_ASSERT_NOT_WRHELD(&rw);
}

static void after_unlock_held(void *arg)
{
	pthread_rwlock_wrlock(&rw);
	pthread_rwlock_unlock(&rw);
	pthread_rwlock_rdlock(&rw);
	pthread_rwlock_unlock(&rw);
	RWLOCK_ASSERT_HELD(&rw);
}

static void test_rwlock(void)
{
	expect_pass(wr_wrheld, NULL);
	expect_pass(rd_held, NULL);
	expect_abort(rd_wrheld, NULL, "rwlock &rw not held for writing");
	expect_abort(none_held, NULL, "rwlock &rw not held");
	expect_abort(none_wrheld, NULL, "not held for writing");
	expect_abort(wr_not_wrheld, NULL, "rwlock &rw held for writing");
	expect_abort(after_unlock_held, NULL, "rwlock &rw not held");
}

/* --- CAIRN_ASSERT ------------------------------------------------------------ */

static void assert_true(void *arg)
{
	int x = *(int *)arg;

	CAIRN_ASSERT(x == 7);
}

static void assert_false(void *arg)
{
	int x = *(int *)arg;

	CAIRN_ASSERT(x == 8);
}

static void test_assert(void)
{
	int seven = 7;

	expect_pass(assert_true, &seven);
	expect_abort(assert_false, &seven, "assertion failed: x == 8");
	/* The report names the place: file and function. */
	expect_abort(assert_false, &seven, "test_debug.c:");
	expect_abort(assert_false, &seven, "assert_false");
}

/* --- the server's rules ------------------------------------------------------ */

static char store_dir[64];

/* A readdir callback runs inside a read transaction: it must not call
 * the store (store_int.h). This one changes the directory's mode. */
static int readdir_calls_store(void *arg, uint64_t next_cookie,
			       const char *name, size_t namelen,
			       const struct cairn_attr *attr)
{
	struct store *st = arg;
	struct store_setattr sa = { .valid = SA_MODE, .mode = 0755 };
	struct cairn_attr root, out;

	store_root(st, &root);
	store_setattr(st, &root.fid, &sa, &out);
	return 1;
}

static void store_rule(void *arg)
{
	char err[256];
	struct cairn_attr root, a, d;
	struct store *st;
	int created, eof;

	if (store_open(store_dir, &st, err, sizeof(err)) ||
	    store_root(st, &root) ||
	    store_create(st, &root.fid, "f", S_IFREG | 0644, 0, 0, 0, 0,
			 &created, &a, &d))
		_exit(3);
	store_readdir(st, &root.fid, 0, 10, readdir_calls_store, st, &eof);
	_exit(4); /* not reached: the check fires */
}

/* An entry of the duplicate request cache is finished once. */
static void drc_rule(void *arg)
{
	static const uint8_t id[16] = { 1 };
	struct drc *d = drc_create(NULL);
	struct drc_client *dc = drc_client_get(d, id);
	struct drc_reply r = { .frame = (const uint8_t *)"x", .len = 1 };
	struct drc_entry *e;
	struct drc_reply *rep;

	if (drc_begin(dc, NULL, 7, OP_REMOVE, &e, &rep) != DRC_RUN)
		_exit(3);
	drc_finish(dc, e, &r);
	drc_finish(dc, e, &r);
	_exit(4);
}

/* The callback table is destroyed only after every client was dropped. */
static void callback_rule(void *arg)
{
	struct cb_table *t = cb_table_create(16, NULL);
	struct cairn_fid fid = { .vol = 1, .vnode = 2, .uniq = 3 };
	struct cb_batch *ev = NULL;
	struct cb_client cl;

	cb_client_init(t, &cl, NULL);
	cb_register(t, &cl, &fid, 1, &ev);
	cb_table_destroy(t);
	_exit(4);
}

static void test_server_rules(void)
{
	char cmd[96];

	snprintf(store_dir, sizeof(store_dir), "/tmp/cairn-test-debug.%d",
		 (int)getpid());
	expect_abort(store_rule, NULL, "rtxn_open == 0");
	expect_abort(drc_rule, NULL, "!e->done");
	expect_abort(callback_rule, NULL, "t->count == 0");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", store_dir);
	CHECK(system(cmd) == 0);
}

#endif /* CAIRN_DEBUG */

static int calls;

static int count_call(void)
{
	return ++calls;
}

/* In every build: a debug build evaluates the condition once, a plain
 * build not at all (so conditions must have no side effects). */
static void test_evaluation(void)
{
	int seen;

	calls = 0;
	CAIRN_ASSERT(count_call() > 0);
	seen = calls;
	count_call(); /* the counter itself counts */
	CHECK_EQ(calls, seen + 1);
#ifdef CAIRN_DEBUG
	CHECK_EQ(seen, 1);
#else
	CHECK_EQ(seen, 0);
#endif
}

#ifndef CAIRN_DEBUG
static void skip(const char *name)
{
	printf("ok - %s # skip not a debug build (CAIRN_DEBUG unset)\n", name);
	fflush(stdout);
}
#endif

int main(void)
{
	static const char *const names[] = {
		"debug LOCK_ASSERT_HELD/NOT_HELD on a mutex held, unheld, "
		"released",
		"debug mutex held by another thread is not held by this one",
		"debug mutex owner after a condition wait; normal, "
		"errorcheck and recursive mutexes",
		"debug RWLOCK_ASSERT_WRHELD/NOT_WRHELD/HELD",
		"debug CAIRN_ASSERT passes, and aborts naming the condition "
		"and place",
		"debug server rules fire: store called from a readdir "
		"callback, a cache entry finished twice, a table destroyed "
		"with promises",
	};
#ifdef CAIRN_DEBUG
	void (*const fns[])(void) = { test_mutex, test_mutex_other_thread,
				      test_mutex_kinds, test_rwlock,
				      test_assert, test_server_rules };

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		run(names[i], fns[i]);
#else
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		skip(names[i]);
#endif
	run("debug CAIRN_ASSERT evaluates its condition only in debug builds",
	    test_evaluation);
	return failed_total ? 1 : 0;
}

/*
 * fusering.c - FUSE requests over io_uring (fusering.h).
 *
 * The kernel's side is fs/fuse/dev_uring.c; its structures are those of
 * the FUSE protocol 7.42 (include/uapi/linux/fuse.h), declared here
 * because Debian 12's headers are 7.38.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "../lib/log.h"
#include "fuseio.h"
#include "fusering.h"

/* Protocol 7.42: the commands and the buffers a ring entry shares with
 * the kernel. */
enum { FR_CMD_REGISTER = 1, FR_CMD_COMMIT_AND_FETCH = 2 };

struct fr_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;     /* the request's unique */
	uint32_t payload_sz;    /* bytes in the payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct fr_header {
	char in_out[128];       /* fuse_in_header in, fuse_out_header out */
	char op_in[128];        /* the request's first argument */
	struct fr_ent_in_out ent;
};

struct fr_cmd_req {             /* in the SQE's command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct fr_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct fr_cmd_req) == 24, "fuse_uring_cmd_req");

#define FR_PARAM "/sys/module/fuse/parameters/enable_uring"
#define FR_HEAD_ROOM 256        /* >= in header (40) + first argument (128) */
#define FR_THREADS_START 2      /* per queue, made before the INIT reply */
#define FR_THREADS_MAX 32       /* per queue */
#define FR_QUEUES_MAX 1024
#define FR_UD_CMD 1             /* user_data: the entry's command */
#define FR_UD_STOP 2            /* user_data: the stop eventfd's poll */

/* One thread, its ring and its one entry. */
struct frt {
	struct io_uring ring;
	struct fr_header *hdr;
	char *base;             /* FR_HEAD_ROOM + payload bytes */
	char *payload;
	char *stage;            /* a reply kept apart (made when needed) */
	struct iovec iov[2];    /* what REGISTER gave the kernel */
	int qid;
	int initial;            /* made by fusering_prepare: waits for go */
	pthread_t tid;
	int running;            /* tid is a thread to join */
	pthread_mutex_t mu;     /* guards the reply fields below */
	pthread_cond_t cv;
	uint64_t unique;        /* the request in hand, 0 none (atomic) */
	int staged;             /* the reply goes to stage (the request has
				 * arguments in the payload that its handler
				 * may still read after replying) */
	int replied;
	int rerror;
	size_t rlen;
};

static struct {
	pthread_mutex_t mu;     /* guards everything below but the counters */
	pthread_cond_t cv;
	struct fuse_session *se;
	int fd;                 /* /dev/fuse */
	int stopfd;             /* eventfd: written once, at stop */
	size_t payload;
	int nq;
	int go;                 /* 0 not yet, 1 serving, -1 abandoned */
	int stopping;
	struct frt **t;         /* nq * FR_THREADS_MAX slots */
	int nt;
	int *count, *idle;      /* per queue */
	int spawn_failed;       /* logged once */
	int active;             /* replies may be ours (atomic) */
	uint64_t requests;      /* atomic */
	uint64_t bad;           /* atomic: malformed ring requests */
} g = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
	.fd = -1, .stopfd = -1 };

static __thread struct frt *cur;   /* the entry this thread handles */

int fusering_enable(int want)
{
	char c = 0;
	int fd = open(FR_PARAM, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;       /* no such kernel support */
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	if (c == 'Y' || c == '1')
		return 1;
	if (!want)
		return 0;
	fd = open(FR_PARAM, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		log_info("FUSE over io_uring is off in the kernel and cannot "
			 "be turned on (%s: %s): requests go through /dev/fuse",
			 FR_PARAM, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	close(fd);
	log_info("turned on FUSE over io_uring in the kernel (%s)", FR_PARAM);
	return 1;
}

/* The number of possible CPUs: the kernel makes one queue for each. */
static int possible_cpus(void)
{
	char buf[256];
	int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	int total = 0;
	char *p = buf, *end;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	while (*p && *p != '\n') {
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a)
				return -1;
			p = end;
		}
		total += (int)(b - a + 1);
		if (*p == ',')
			p++;
	}
	return total;
}

static void frt_free(struct frt *t)
{
	if (!t)
		return;
	if (t->ring.ring_fd > 0)
		io_uring_queue_exit(&t->ring);
	free(t->hdr);
	free(t->base);
	free(t->stage);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}

/* A thread's ring and buffers for queue qid; NULL with *err (a negative
 * errno) when they cannot be made. */
static struct frt *frt_new(int qid, int initial, int *err)
{
	struct frt *t = calloc(1, sizeof(*t));
	int rc;

	*err = -ENOMEM;
	if (!t)
		return NULL;
	t->qid = qid;
	t->initial = initial;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	t->ring.ring_fd = -1;
	if (posix_memalign((void **)&t->hdr, 4096, 4096) != 0) {
		t->hdr = NULL;
		goto fail;
	}
	if (posix_memalign((void **)&t->base, 4096,
			   FR_HEAD_ROOM + g.payload) != 0) {
		t->base = NULL;
		goto fail;
	}
	t->payload = t->base + FR_HEAD_ROOM;
	memset(t->hdr, 0, 4096);
	t->iov[0] = (struct iovec){ t->hdr, sizeof(*t->hdr) };
	t->iov[1] = (struct iovec){ t->payload, g.payload };
	if ((rc = io_uring_queue_init(4, &t->ring, IORING_SETUP_SQE128)) < 0) {
		t->ring.ring_fd = -1;
		*err = rc;
		goto fail;
	}
	*err = 0;
	return t;
fail:
	frt_free(t);
	return NULL;
}

/* Queue the entry's command: REGISTER (commit 0) or COMMIT_AND_FETCH.
 * 0, or -EBUSY when the ring has no free SQE (it always has: one command
 * and one poll at a time). */
static int prep_cmd(struct frt *t, uint64_t commit)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	struct fr_cmd_req cmd = { .commit_id = commit,
				  .qid = (uint16_t)t->qid };

	if (!sqe)
		return -EBUSY;
	/* An SQE is 128 bytes here (IORING_SETUP_SQE128). */
	memset((void *)(uintptr_t)sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = g.fd;
	sqe->cmd_op = commit ? FR_CMD_COMMIT_AND_FETCH : FR_CMD_REGISTER;
	sqe->addr = (uint64_t)(uintptr_t)t->iov;
	sqe->len = 2;
	sqe->user_data = FR_UD_CMD;
	memcpy((char *)(uintptr_t)sqe + offsetof(struct io_uring_sqe, cmd),
	       &cmd, sizeof(cmd));
	return 0;
}

/* The kernel's next completion for this thread's ring. */
static int next_cqe(struct frt *t, uint64_t *ud)
{
	struct io_uring_cqe *cqe;
	int rc, res;

	*ud = 0;
	for (;;) {
		rc = io_uring_submit_and_wait(&t->ring, 1);
		if (io_uring_peek_cqe(&t->ring, &cqe) == 0)
			break;
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
			return rc;
	}
	res = cqe->res;
	*ud = cqe->user_data;
	io_uring_cqe_seen(&t->ring, cqe);
	return res;
}

static void *frt_main(void *arg);

/* Another thread for queue q, because its last idle one took a request.
 * Under g.mu. */
static void spawn(int q)
{
	struct frt *t;
	int slot = g.nt, err;

	if (g.count[q] >= FR_THREADS_MAX || g.stopping ||
	    slot >= g.nq * FR_THREADS_MAX)
		return;
	t = frt_new(q, 0, &err);
	if (t && pthread_create(&t->tid, NULL, frt_main, t) == 0) {
		t->running = 1;
		g.t[slot] = t;
		__atomic_store_n(&g.nt, slot + 1, __ATOMIC_RELEASE);
		g.count[q]++;
		g.idle[q]++;    /* counted idle from its REGISTER on */
		return;
	}
	frt_free(t);
	if (!g.spawn_failed++)
		log_warn("FUSE ring queue %d: cannot start another thread; "
			 "its requests wait for the busy ones", q);
}

static void set_idle(int q, int delta)
{
	pthread_mutex_lock(&g.mu);
	g.idle[q] += delta;
	if (delta < 0 && g.idle[q] == 0)
		spawn(q);
	pthread_mutex_unlock(&g.mu);
}

/* Run the request the kernel put in t's entry; the reply is then in the
 * entry's buffers. Returns the id to commit it under. */
static uint64_t handle(struct frt *t)
{
	struct fuse_in_header in;
	uint64_t id = t->hdr->ent.commit_id;
	uint32_t psz = t->hdr->ent.payload_sz;
	struct fuse_out_header oh;
	size_t oplen;
	char *start;

	memcpy(&in, t->hdr->in_out, sizeof(in));
	if (in.len < sizeof(in) + (size_t)psz || psz > g.payload ||
	    in.len - sizeof(in) - psz > sizeof(t->hdr->op_in) ||
	    in.unique == 0 || id != in.unique) {
		if (__atomic_fetch_add(&g.bad, 1, __ATOMIC_RELAXED) == 0)
			log_warn("FUSE ring queue %d: malformed request (len %u, "
				 "payload %u, opcode %u): answered EIO", t->qid,
				 in.len, psz, in.opcode);
		t->rerror = -EIO;
		t->rlen = 0;
		id = id ? id : in.unique;
		goto commit;
	}
	/* The bytes read(2) would have given: header, first argument, the
	 * rest, laid out in front of the payload the kernel filled. */
	oplen = in.len - sizeof(in) - psz;
	start = t->payload - sizeof(in) - oplen;
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), t->hdr->op_in, oplen);
	pthread_mutex_lock(&t->mu);
	t->replied = 0;
	t->staged = psz != 0;
	__atomic_store_n(&t->unique, in.unique, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->mu);
	__atomic_fetch_add(&g.requests, 1, __ATOMIC_RELAXED);
	fuseio_note(start, in.len);
	cur = t;
	fuse_session_process_buf(g.se, &(struct fuse_buf){ .mem = start,
							  .size = in.len });
	cur = NULL;
	pthread_mutex_lock(&t->mu);
	while (!t->replied)
		pthread_cond_wait(&t->cv, &t->mu);
	__atomic_store_n(&t->unique, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->mu);
	if (t->staged && t->rlen)
		memcpy(t->payload, t->stage, t->rlen);
commit:
	oh = (struct fuse_out_header){ .len = (uint32_t)(sizeof(oh) + t->rlen),
				       .error = t->rerror, .unique = id };
	memcpy(t->hdr->in_out, &oh, sizeof(oh));
	t->hdr->ent.payload_sz = (uint32_t)t->rlen;
	return id;
}

/* Bind this thread to cpu, or let it run on any (-1). */
static void bind_cpu(int cpu)
{
	cpu_set_t cpus;
	int i;

	CPU_ZERO(&cpus);
	for (i = 0; i < g.nq && i < CPU_SETSIZE; i++)
		if (cpu < 0 || i == cpu)
			CPU_SET(i, &cpus);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
}

/*
 * The request in t's entry moves a lot of data: a WRITE or READ of at
 * least FR_BULK bytes (the kernel's write-back of a file, read-ahead).
 * These come many at once, all on the queue of the CPU that wrote or
 * read, often while the program goes on writing there, and each costs
 * far more than a wake-up. A thread bound to that CPU would handle them
 * behind the writer while the other CPU idles (100 MiB written and
 * closed: 0.115 s against 0.087 s reading /dev/fuse). So a thread that
 * takes one floats: bound to no CPU, woken where the scheduler finds
 * room, until it takes a request that is not bulk.
 */
#define FR_BULK (64u * 1024u)

static int bulk(const struct frt *t)
{
	struct fuse_in_header in;
	uint32_t psz = t->hdr->ent.payload_sz, size;
	size_t oplen;

	memcpy(&in, t->hdr->in_out, sizeof(in));
	if (in.opcode == FUSE_WRITE)
		return psz >= FR_BULK;
	if (in.opcode != FUSE_READ || in.len < sizeof(in) + (size_t)psz)
		return 0;
	oplen = in.len - sizeof(in) - psz;
	if (oplen < offsetof(struct fuse_read_in, size) + sizeof(size))
		return 0;
	memcpy(&size, t->hdr->op_in + offsetof(struct fuse_read_in, size),
	       sizeof(size));
	return size >= FR_BULK;
}

/*
 * The first REGISTER of one of the threads the INIT reply counted on
 * never reached the kernel (io_uring_enter failed). The kernel holds
 * every request of the mount until each queue has an entry, so the mount
 * would hang: end the daemon instead, which ends the connection (its
 * programs get ENOTCONN); the journal keeps what it holds for the next
 * mount.
 */
static void unregistered(struct frt *t, int res)
{
	log_error("FUSE ring queue %d: cannot register with the kernel (%s); "
		  "the kernel holds every request until it can, so the "
		  "client daemon ends here (remount, with --no-uring if "
		  "this repeats)", t->qid, strerror(-res));
	_exit(1);
}

/*
 * A ring thread. It stays SCHED_OTHER: waiting as SCHED_IDLE and handling
 * as SCHED_OTHER (so that the scheduler, counting a CPU that runs only
 * SCHED_IDLE threads as idle, keeps the woken program on this CPU) once
 * took an unpinned program's open()+close() from 34-55 us to 15 us; on
 * Linux 6.18 here it costs more than it saves, two sched_setscheduler
 * calls per request (11% of the daemon's time in cp -R): open()+close()
 * 56-59 us with it, 42-44 us without; a stat of a new name 26-27 us, 24-26.
 */
static void *frt_main(void *arg)
{
	struct frt *t = arg;
	struct io_uring_sqe *sqe;
	uint64_t ud, id = 0;
	int res, floating = 0;

	bind_cpu(t->qid);
	pthread_mutex_lock(&g.mu);
	while (t->initial && g.go == 0)
		pthread_cond_wait(&g.cv, &g.mu);
	res = g.go < 0 || g.stopping;
	pthread_mutex_unlock(&g.mu);
	if (res)
		return NULL;
	sqe = io_uring_get_sqe(&t->ring);
	if (sqe) {
		io_uring_prep_poll_add(sqe, g.stopfd, POLLIN);
		sqe->user_data = FR_UD_STOP;
	}
	if (prep_cmd(t, 0) < 0)
		goto out;
	for (;;) {
		res = next_cqe(t, &ud);
		if (ud == FR_UD_STOP)
			break;
		if (ud == 0 && id == 0 && t->initial)
			unregistered(t, res);
		if (res == -EINTR || res == -EAGAIN) {
			/* not taken: the same command again */
			if (prep_cmd(t, id) < 0)
				break;
			continue;
		}
		if (res < 0) {
			if (res != -ENOTCONN && res != -ECONNABORTED &&
			    res != -ECANCELED)
				log_warn("FUSE ring queue %d: %s: this thread "
					 "stops", t->qid, strerror(-res));
			break;
		}
		set_idle(t->qid, -1);
		if (bulk(t) != floating) {
			floating = !floating;
			bind_cpu(floating ? -1 : t->qid);
		}
		id = handle(t);
		set_idle(t->qid, +1);
		if (__atomic_load_n(&g.stopping, __ATOMIC_ACQUIRE) ||
		    prep_cmd(t, id) < 0)
			break;
	}
out:
	/* Gone: not idle, and no other thread is made for it. */
	pthread_mutex_lock(&g.mu);
	g.idle[t->qid]--;
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

/* This thread's reply buffer for a request whose handler may still read
 * its arguments (made at the first such reply). */
static char *stage(struct frt *t)
{
	if (!t->stage)
		t->stage = malloc(g.payload);
	return t->stage;
}

ssize_t fusering_reply(const struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct frt *t = cur;
	size_t len = 0, off = 0, total;
	char *dst;
	int i, n;

	if (!__atomic_load_n(&g.active, __ATOMIC_ACQUIRE) || count < 1 ||
	    iov[0].iov_len < sizeof(*oh) || oh->unique == 0)
		return -1;
	if (!t || __atomic_load_n(&t->unique, __ATOMIC_ACQUIRE) != oh->unique) {
		t = NULL;
		n = __atomic_load_n(&g.nt, __ATOMIC_ACQUIRE);
		for (i = 0; i < n && !t; i++)
			if (__atomic_load_n(&g.t[i]->unique,
					    __ATOMIC_ACQUIRE) == oh->unique)
				t = g.t[i];
		if (!t)
			return -1;
	}
	for (i = 1; i < count; i++)
		len += iov[i].iov_len;
	total = iov[0].iov_len + len;
	pthread_mutex_lock(&t->mu);
	if (t->unique != oh->unique || t->replied) {
		pthread_mutex_unlock(&t->mu);
		return -1;
	}
	t->rerror = oh->error;
	t->rlen = 0;
	if (oh->error == 0 && len) {
		dst = t->staged ? stage(t) : t->payload;
		if (len > g.payload || !dst) {
			log_warn("FUSE ring: a reply of %zu bytes does not fit "
				 "(%zu): answered EIO", len, g.payload);
			t->rerror = -EIO;
		} else {
			for (i = 1; i < count; i++) {
				memcpy(dst + off, iov[i].iov_base,
				       iov[i].iov_len);
				off += iov[i].iov_len;
			}
			t->rlen = len;
		}
	}
	t->replied = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	return (ssize_t)total;
}

/* How long fusering_stop waits for a thread still handling a request. */
#define FR_JOIN_MS 5000

/* A thread's ring and buffers, once it is joined; the struct stays for
 * fusering_reply's look-ups (a reply on another thread may be looking). */
static void frt_drop(struct frt *t)
{
	if (t->ring.ring_fd > 0)
		io_uring_queue_exit(&t->ring);
	t->ring.ring_fd = -1;
	free(t->base);
	free(t->stage);
	t->base = t->payload = t->stage = NULL;
}

/*
 * Join the threads; under nothing. all: free everything (the ring never
 * served, so nothing can look a thread up); else keep what a late look-up
 * reads. A thread still waiting for its handler's reply after FR_JOIN_MS
 * is left running with everything it uses, and logged.
 */
static void reap(int all)
{
	struct timespec until;
	int i, left = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += FR_JOIN_MS / 1000;
	for (i = 0; i < g.nt; i++) {
		if (g.t[i]->running &&
		    pthread_timedjoin_np(g.t[i]->tid, NULL, &until) != 0)
			left++;
		else
			g.t[i]->running = 0;
	}
	if (left) {
		log_warn("FUSE ring: %d threads still handling a request after "
			 "%d s; left behind", left, FR_JOIN_MS / 1000);
		return;
	}
	/* Every request taken from the ring was answered. */
	__atomic_store_n(&g.active, 0, __ATOMIC_RELEASE);
	for (i = 0; i < g.nt; i++) {
		if (all)
			frt_free(g.t[i]);
		else
			frt_drop(g.t[i]);
	}
	if (g.stopfd >= 0)
		close(g.stopfd);
	g.stopfd = -1;
	if (!all)
		return;
	g.nt = 0;
	free(g.t);
	free(g.count);
	free(g.idle);
	g.t = NULL;
	g.count = g.idle = NULL;
}

static void wake_stop(void)
{
	uint64_t one = 1;

	if (g.stopfd >= 0 && write(g.stopfd, &one, sizeof(one)) < 0)
		log_warn("FUSE ring: cannot signal the threads: %s",
			 strerror(errno));
}

int fusering_prepare(struct fuse_session *se, int fd, size_t payload)
{
	int q, k, err = -ENOMEM, nq = possible_cpus();

	if (nq <= 0 || nq > FR_QUEUES_MAX)
		return -EINVAL;
	payload = payload < 8192 ? 8192 : payload;
	payload = (payload + 4095) & ~(size_t)4095;
	g.se = se;
	g.fd = fd;
	g.payload = payload;
	g.nq = nq;
	g.go = 0;
	g.stopping = 0;
	g.t = calloc((size_t)nq * FR_THREADS_MAX, sizeof(*g.t));
	g.count = calloc((size_t)nq, sizeof(int));
	g.idle = calloc((size_t)nq, sizeof(int));
	g.stopfd = eventfd(0, EFD_CLOEXEC);
	if (!g.t || !g.count || !g.idle || g.stopfd < 0)
		goto fail;
	for (q = 0; q < nq; q++) {
		for (k = 0; k < FR_THREADS_START; k++) {
			struct frt *t = frt_new(q, 1, &err);

			if (!t)
				goto fail;
			g.t[g.nt++] = t;
			if ((err = -pthread_create(&t->tid, NULL, frt_main,
						   t)) != 0)
				goto fail;
			t->running = 1;
			g.count[q]++;
			g.idle[q]++;
		}
	}
	return 0;
fail:
	pthread_mutex_lock(&g.mu);
	g.go = -1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	reap(1);
	return err;
}

void fusering_go(int ok)
{
	/* Replies are looked for in the ring before any thread can take a
	 * request: one waiting for the INIT (the kernel holds it until the
	 * ring is ready) may be handled the moment a thread registers. */
	if (ok)
		__atomic_store_n(&g.active, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&g.mu);
	g.go = ok ? 1 : -1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	if (ok) {
		log_info("FUSE requests over io_uring: %d queues, %d threads "
			 "each to start, payload %zu bytes", g.nq,
			 FR_THREADS_START, g.payload);
	} else {
		reap(1);
	}
}

void fusering_stop(void)
{
	int again;

	pthread_mutex_lock(&g.mu);
	again = g.stopping || !g.t;
	g.stopping = 1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	if (again)
		return;
	wake_stop();
	/* No thread is made any more (stopping), so g.nt stands. */
	reap(0);
}

void fusering_print_stats(void *unused, FILE *f)
{
	int threads;

	(void)unused;
	pthread_mutex_lock(&g.mu);
	threads = g.go > 0 ? g.nt : 0;
	pthread_mutex_unlock(&g.mu);
	fprintf(f, "fuse.uring %d\n",
		__atomic_load_n(&g.active, __ATOMIC_ACQUIRE));
	fprintf(f, "fuse.ring_queues %d\n", g.go > 0 ? g.nq : 0);
	fprintf(f, "fuse.ring_threads %d\n", threads);
	fprintf(f, "fuse.ring_requests %llu\n", (unsigned long long)
		__atomic_load_n(&g.requests, __ATOMIC_RELAXED));
	fprintf(f, "fuse.ring_malformed %llu\n", (unsigned long long)
		__atomic_load_n(&g.bad, __ATOMIC_RELAXED));
}

/*
 * server.c - listener, connections and the worker pool. See server.h.
 *
 * Threads:
 *   accept   one; accepts, creates a conn, starts its reader
 *   reader   one per conn (detached); reads frames, enforces the framing
 *            rules, runs HELLO and pure reads inline, queues other
 *            requests to the pool
 *   writer   one per conn (joined by its reader); sends what a worker's
 *            non-blocking send left over, in order, with a send timeout
 *   worker   N; run queued requests (serve_request: delivery admits,
 *            the handler runs, delivery sends; handlers.h, deliver.h)
 *   expiry   one; times out callback break acknowledgements (cb_expire)
 *            and drops the clients that stayed silent; forgets idle
 *            clients of the duplicate request cache (drc_expire) and
 *            frees the orphans of clients gone for good (orphan_sweep)
 *
 * Connection states: OPEN -> CLOSING (conn_fail: sends refused, reader
 * woken by shutdown(SHUT_RD), writer flushes its queue then shuts the
 * socket) -> drained (reader saw in-flight requests reach 0, joined the
 * writer, dropped the callback promises, left the server's list) -> freed
 * by the last conn_put (close(fd)). References: the reader's own, one per
 * queued or running request, one per callback batch being delivered,
 * one per parked request (a reply waiting for acknowledgements, or a
 * resend waiting for its original in the duplicate request cache).
 * The reader also waits for parked requests before it releases the
 * connection, so a parked reply's promises are dropped with the rest.
 *
 * Acknowledgements of CB_BREAK are handled on the reader thread itself
 * (cb_ack), never queued: a reader keeps reading acks however busy the
 * workers are, and no worker ever waits for one. A reader whose
 * connection ends tells the table first (cb_client_gone), so nothing
 * waits for a client that can no longer answer.
 *
 * Locks (never held while blocking on a socket):
 *   s->lock     server's conn list, counts, stopping flag
 *   s->qlock    the request queue
 *   c->wlock    the conn's output queue, closing flag, in-flight count;
 *               the reader waits on icond under it for in-flight and
 *               parked requests (parked is an atomic, so conn_park takes
 *               no lock and can be the duplicate request cache's hook)
 *   s->elock    the expiry thread's stop flag
 * The order in which they, the callback table's, the duplicate request
 * cache's and the store's locks may be taken is stated once, in
 * docs/LOCKING.md; debug builds check the rules that apply here
 * (lib/debug.h).
 *
 * Replies are built as one contiguous frame (header and payload in one
 * wbuf), so one send() per frame does what writev would.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../lib/clock.h"
#include "../lib/seal.h"
#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"
#include "../lib/net.h"
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "lock.h"
#include "callback.h"
#include "deliver.h"
#include "drc.h"
#include "handlers.h"
#include "orphan.h"
#include "server.h"
#include "stats.h"
#include "token.h"
#include "store.h"

/* Enough workers that concurrent metadata commits share an fsync (the
 * store's group commit) while a few others block on data I/O. */
#define SERVER_WORKERS       16
#define CONN_MAX_INFLIGHT    64            /* requests queued or running */
/* Parked replies (waiting for acknowledgements) per connection before its
 * reader waits; each is small, and each ends within CB_ACK_TIMEOUT_MS. */
#define CONN_MAX_PARKED      4096
#define EXPIRY_TICK_MS       100
#define CONN_QUEUE_MAX       (64u << 20)   /* unsent bytes before we give up */
#define CONN_SEND_TIMEOUT_S  5
#define CB_MAX_PROMISES      (1u << 20)
/* Before HELLO a peer is a stranger: it gets SRV_HANDSHAKE_TIMEOUT_S (or
 * --handshake-timeout: server_opts.handshake_timeout_s) to say
 * AUTH and HELLO in frames of at most HELLO_MAX_LEN bytes, so an
 * unauthenticated peer can hold neither big buffers nor a thread for
 * long. A peer whose HELLO does not verify (no or a wrong cell key, or a
 * replayed handshake) is held AUTH_FAIL_DELAY_MS before the close, and
 * at most one such failure a second is logged. */
#define HELLO_MAX_LEN        256u
#define AUTH_FAIL_DELAY_MS   1000
#define SERVER_MAX_CONNS     1024

struct outbuf {
	struct outbuf *next;
	uint8_t *data; /* owned */
	size_t len, off;
	size_t queued; /* what this buffer added to qbytes */
};

struct conn {
	struct server *srv;
	int fd;
	char peer[64];
	int refs;                 /* atomic */
	struct conn *next, *prev; /* s->conns; guarded by s->lock */
	pthread_t writer;

	pthread_mutex_t wlock;
	pthread_cond_t wcond;     /* writer: data queued or closing */
	pthread_cond_t icond;     /* reader: inflight dropped */
	struct outbuf *qhead, *qtail; /* guarded by wlock */
	size_t qbytes;            /* guarded by wlock */
	int writing;              /* writer is sending qhead; guarded by wlock */
	int closing;              /* guarded by wlock */
	int inflight;             /* guarded by wlock */
	int parked;               /* atomic; changes broadcast icond */

	int auth_done;            /* reader only: AUTH answered */
	int ro;                   /* its key is a read-only export; set at
				   * AUTH, before any request runs */
	struct seal *rx;          /* reader only: opens frames after AUTH */
	struct seal *tx;          /* set once after AUTH (atomic); seals
				   * under wlock, in send order */
	int hello_done;           /* set by the reader thread only (HELLO inline) */
	struct timespec hs_deadline; /* reader only: HELLO due by (monotonic) */
	uint8_t client_id[16];    /* written once before hello_done */
	struct drc_client *drc;   /* as client_id; NULL: no HELLO_REPLAY */
	struct cb_client cb;      /* guarded by the callback table */
	struct lk_client *lk;     /* set once with client_id */
	int64_t last_rx_ms;       /* atomic: monotonic ms of its last frame */
};

struct job {
	struct job *next;
	struct conn *c;
	struct wire_hdr h;
	uint8_t *payload;
	struct tok_wait tw;       /* parked behind a write token */
	struct cb_blockent *block; /* and so holding up its client's
				   * acknowledgements (cb_block) */
	struct cairn_fid park_fid; /* what it was parked on */
	int admitted;             /* delivery admitted it already: d holds
				   * its duplicate cache entry */
	int stack;                /* on the reader's stack: never parked */
	struct delivery d;
};

struct server {
	struct srv_ctx ctx;
	int lfd;
	int port;
	pthread_t acceptor;
	int nworkers;
	pthread_t *workers;

	pthread_mutex_t lock;
	pthread_cond_t cond;     /* conn list emptied */
	struct conn *conns;      /* guarded by lock */
	long nconns;             /* guarded by lock */
	int stopping;            /* guarded by lock */

	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct job *qhead, *qtail; /* guarded by qlock */
	int qstop;                 /* guarded by qlock */

	pthread_t expiry;
	int expiry_started;
	pthread_mutex_t elock;
	pthread_cond_t econd;
	int estop;                 /* guarded by elock */

	struct drc *drc;           /* duplicate request cache (own lock) */
	int handshake_s;           /* a stranger's time to say HELLO */
	/* The keys a client may hold (lib/seal.h): [0] the cell key,
	 * then the read-only exports. */
	struct srv_key {
		uint8_t key[CELLKEY_SIZE];
		uint8_t id[CELLKEY_ID_SIZE];
		int ro;
	} keys[1 + SRV_MAX_RO_KEYS];
	int nkeys;
	int64_t authfail_ms;       /* atomic: last failure logged */
	unsigned authfail_quiet;   /* atomic: failures not logged since */
};

/* --- connections ----------------------------------------------------------- */

static int conn_parked(struct conn *c);

void conn_get(struct conn *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
}

static void outq_free(struct conn *c)
{
	while (c->qhead) {
		struct outbuf *o = c->qhead;
		c->qhead = o->next;
		free(o->data);
		free(o);
	}
	c->qtail = NULL;
	c->qbytes = 0;
}

void conn_put(struct conn *c)
{
	int left = __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);

	CAIRN_ASSERT(left >= 0);
	if (left)
		return;
	/* The last reference: nothing runs, waits or writes for c. */
	CAIRN_ASSERT(!c->inflight && !conn_parked(c) && !c->writing);
	outq_free(c);
	drc_client_put(c->drc);
	seal_free(c->rx);
	seal_free(c->tx);
	close(c->fd);
	pthread_mutex_destroy(&c->wlock);
	pthread_cond_destroy(&c->wcond);
	pthread_cond_destroy(&c->icond);
	free(c);
}

const char *conn_peer(const struct conn *c)
{
	return c->peer;
}

struct cb_client *conn_cb_client(struct conn *c)
{
	return &c->cb;
}

int conn_read_only(const struct conn *c)
{
	return c->ro;
}

int conn_hello_done(const struct conn *c)
{
	return c->hello_done;
}

void conn_set_client_id(struct conn *c, const uint8_t id[16])
{
	struct lk_client *lk = lk_attach(c->srv->ctx.lk, id);

	if (!lk)
		log_error("peer %s: out of memory for its lock record: its "
			  "lock requests fail", c->peer);
	pthread_mutex_lock(&c->srv->lock); /* server_counts reads it */
	c->lk = lk;
	memcpy(c->client_id, id, 16);
	c->hello_done = 1;
	pthread_mutex_unlock(&c->srv->lock);
}

const uint8_t *conn_client_id(const struct conn *c)
{
	return c->client_id;
}

struct lk_client *conn_lk_client(const struct conn *c)
{
	return c->lk;
}

/* Seconds of the monotonic clock (orphan.h's time). */
static int64_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec;
}

struct drc_client *conn_drc(struct conn *c)
{
	return c->drc;
}

void conn_set_drc(struct conn *c, struct drc_client *dc)
{
	c->drc = dc; /* before hello_done: no request reads it yet */
}

struct drc *server_drc(struct server *s)
{
	return s->drc;
}

/*
 * Lock-free, so the duplicate request cache can call it under its lock.
 * It is only ever called by a request of c that is in flight, so the
 * reader, which waits for in-flight requests before it looks at parked
 * ones, cannot miss the increment.
 */
void conn_park(struct conn *c)
{
	/* The request's own count: it cannot drop while the request runs
	 * (read without wlock, which may not be taken here). */
	CAIRN_ASSERT(__atomic_load_n(&c->inflight, __ATOMIC_RELAXED) > 0);
	conn_get(c);
	__atomic_add_fetch(&c->parked, 1, __ATOMIC_ACQ_REL);
}

void conn_unpark(struct conn *c)
{
	int left = __atomic_sub_fetch(&c->parked, 1, __ATOMIC_ACQ_REL);

	CAIRN_ASSERT(left >= 0);
	/* Under wlock, so a reader between its check and its wait cannot
	 * miss the wake-up. */
	pthread_mutex_lock(&c->wlock);
	pthread_cond_broadcast(&c->icond);
	pthread_mutex_unlock(&c->wlock);
	conn_put(c);
}

static int conn_parked(struct conn *c)
{
	return __atomic_load_n(&c->parked, __ATOMIC_ACQUIRE);
}

/* Mark closing; returns 1 for the call that did it. */
static int conn_mark_closing(struct conn *c, int drop_queue)
{
	int first;

	pthread_mutex_lock(&c->wlock);
	first = !c->closing;
	c->closing = 1;
	if (drop_queue && !c->writing)
		outq_free(c);
	pthread_cond_broadcast(&c->wcond);
	pthread_cond_broadcast(&c->icond);
	pthread_mutex_unlock(&c->wlock);
	/* Wakes the reader (read returns 0); the writer shuts down the rest
	 * once its queue is flushed. */
	shutdown(c->fd, drop_queue ? SHUT_RDWR : SHUT_RD);
	return first;
}

/* Close c for `fmt` (logged once, by whoever closes it first); drop:
 * also discard replies still queued for it. */
static void conn_vclose(struct conn *c, int drop, const char *fmt, va_list ap)
{
	char reason[256];

	vsnprintf(reason, sizeof(reason), fmt, ap);
	if (conn_mark_closing(c, drop))
		log_warn("peer %s: %s, closing connection", c->peer, reason);
}

void conn_fail(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_vclose(c, 0, fmt, ap);
	va_end(ap);
}

/* A send error: the peer is gone or stuck; nothing more can reach it. */
static void conn_abort(struct conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void conn_abort(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_vclose(c, 1, fmt, ap);
	va_end(ap);
}

/* Ids of pushes nobody acknowledges (CB_RECALL, CB_LOCKWAKE): unique
 * server-wide, never 0, for the peer's logs. */
static uint32_t push_seq;

int conn_push_fid(struct conn *c, uint16_t op, const struct cairn_fid *fid)
{
	struct msg_orphan_drop_req q = { .count = 1, .fids = fid };
	uint32_t id = __atomic_add_fetch(&push_seq, 1, __ATOMIC_RELAXED);
	struct wbuf w;
	size_t h;
	int rc;

	if (!id)
		id = __atomic_add_fetch(&push_seq, 1, __ATOMIC_RELAXED);

	wbuf_init(&w);
	h = wire_frame_begin(&w, op, WF_PUSH, id, 0);
	msg_encode(op, 0, &w, &q);
	wire_frame_end(&w, h);
	rc = w.err ? -ENOMEM : conn_send(c, &w);
	wbuf_free(&w);
	return rc;
}

/* Bytes w's frames take once sealed (each gains a tag), or 0 when w is
 * not a whole number of frames. */
static size_t sealed_size(const struct wbuf *w)
{
	size_t off = 0, n = 0;

	while (off + WIRE_HDR_SIZE <= w->len) {
		struct wire_hdr h;

		wire_hdr_decode(w->data + off, &h);
		off += WIRE_HDR_SIZE + h.len;
		n++;
	}
	return off == w->len ? w->len + n * SEAL_TAG_SIZE : 0;
}

/*
 * Seal the frames of w into out (sealed_size(w) bytes) and make it w's
 * buffer. Under wlock: frames are sealed in the order they are sent.
 */
static int seal_frames(struct conn *c, struct wbuf *w, uint8_t *out,
		       size_t outlen)
{
	size_t off = 0, o = 0;

	LOCK_ASSERT_HELD(&c->wlock);
	while (off < w->len) {
		struct wire_hdr h;

		wire_hdr_decode(w->data + off, &h);
		uint32_t n = h.len;
		h.len = n + SEAL_TAG_SIZE;
		wire_hdr_encode(out + o, &h);
		if (seal_frame(c->tx, out + o, w->data + off + WIRE_HDR_SIZE,
			       n, out + o + WIRE_HDR_SIZE,
			       out + o + WIRE_HDR_SIZE + n))
			return -EIO;
		off += WIRE_HDR_SIZE + n;
		o += WIRE_HDR_SIZE + n + SEAL_TAG_SIZE;
	}
	free(w->data);
	w->data = out;
	w->len = w->cap = outlen;
	return 0;
}

int conn_send(struct conn *c, struct wbuf *w)
{
	struct outbuf *o = NULL;
	struct seal *tx = __atomic_load_n(&c->tx, __ATOMIC_ACQUIRE);
	uint8_t *sealed = NULL;
	size_t slen = 0, off = 0;
	int err = 0;

	if (w->err)
		return w->err;
	if (!w->len)
		return 0;
	/* After AUTH every frame is sealed; the buffer is found before
	 * the lock, the sealing done under it (send order). */
	if (tx) {
		slen = sealed_size(w);
		if (!slen || !(sealed = malloc(slen))) {
			conn_abort(c, "cannot seal a reply (%s)",
				   slen ? "out of memory" : "not whole frames");
			return slen ? -ENOMEM : -EINVAL;
		}
	}
	LOCK_ASSERT_NOT_HELD(&c->wlock);
	pthread_mutex_lock(&c->wlock);
	if (c->closing) {
		pthread_mutex_unlock(&c->wlock);
		free(sealed);
		return -EPIPE;
	}
	if (sealed && seal_frames(c, w, sealed, slen)) {
		pthread_mutex_unlock(&c->wlock);
		free(sealed);
		conn_abort(c, "cannot seal a reply");
		return -EIO;
	}
	if (!c->qhead && !c->writing) {
		ssize_t n;
		do {
			n = send(c->fd, w->data, w->len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		} while (n < 0 && errno == EINTR);
		if (n == (ssize_t)w->len) {
			pthread_mutex_unlock(&c->wlock);
			return 0;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			err = -errno;
		else if (n > 0)
			off = (size_t)n;
	}
	/* Slow path only (the socket is full): queue the rest. Allocating
	 * under wlock is acceptable here; the fast path allocates nothing. */
	if (!err && !(o = malloc(sizeof(*o))))
		err = -ENOMEM;
	if (!err && c->qbytes + (w->len - off) > CONN_QUEUE_MAX)
		err = -ENOBUFS;
	if (!err) {
		o->next = NULL;
		o->data = w->data;
		o->len = w->len;
		o->off = off;
		o->queued = w->len - off;
		c->qbytes += o->queued;
		if (c->qtail)
			c->qtail->next = o;
		else
			c->qhead = o;
		c->qtail = o;
		o = NULL;
		wbuf_init(w); /* the queue owns the bytes now */
		pthread_cond_signal(&c->wcond);
	}
	pthread_mutex_unlock(&c->wlock);
	free(o);
	if (err == -ENOBUFS)
		conn_abort(c, "more than %u MiB of replies unsent (peer not "
			   "reading)", CONN_QUEUE_MAX >> 20);
	else if (err)
		conn_abort(c, "send: %s", strerror(-err));
	return err;
}

static void *conn_writer(void *arg)
{
	struct conn *c = arg;

	pthread_mutex_lock(&c->wlock);
	for (;;) {
		while (!c->qhead && !c->closing)
			pthread_cond_wait(&c->wcond, &c->wlock);
		if (!c->qhead)
			break;
		struct outbuf *o = c->qhead;
		c->writing = 1;
		pthread_mutex_unlock(&c->wlock);

		int err = 0;
		/* A blocking send must not hold up conn_send's callers. */
		LOCK_ASSERT_NOT_HELD(&c->wlock);
		while (o->off < o->len) {
			/* Blocking, bounded by SO_SNDTIMEO. */
			ssize_t n = send(c->fd, o->data + o->off,
					 o->len - o->off, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				err = errno;
				break;
			}
			o->off += (size_t)n;
		}

		pthread_mutex_lock(&c->wlock);
		c->writing = 0;
		if (err) {
			pthread_mutex_unlock(&c->wlock);
			if (err == EAGAIN || err == EWOULDBLOCK)
				conn_abort(c, "peer not reading for %d s",
					   CONN_SEND_TIMEOUT_S);
			else
				conn_abort(c, "send: %s", strerror(err));
			pthread_mutex_lock(&c->wlock);
			outq_free(c);
			break;
		}
		c->qbytes -= o->queued;
		c->qhead = o->next;
		if (!c->qhead)
			c->qtail = NULL;
		free(o->data);
		free(o);
	}
	pthread_mutex_unlock(&c->wlock);
	shutdown(c->fd, SHUT_RDWR);
	return NULL;
}

/* --- reader ---------------------------------------------------------------- */

/* The read side ended with rc (net_read_full). */
static void reader_ended(struct conn *c, int rc, int mid_frame)
{
	if (rc == -EPIPE && !mid_frame) {
		if (conn_mark_closing(c, 0))
			log_info("peer %s: disconnected", c->peer);
	} else if (rc == -EPIPE) {
		conn_fail(c, "connection closed mid-frame");
	} else if ((rc == -EAGAIN || rc == -EWOULDBLOCK) && !c->hello_done) {
		conn_fail(c, "no HELLO within %d s", c->srv->handshake_s);
	} else {
		conn_fail(c, "read: %s", strerror(-rc));
	}
}

static void queue_job(struct server *s, struct job *j)
{
	pthread_mutex_lock(&s->qlock);
	if (s->qtail)
		s->qtail->next = j;
	else
		s->qhead = j;
	s->qtail = j;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
}

/* Wait for room for one more in-flight request; 0, or -EPIPE if closing. */
static int inflight_enter(struct conn *c)
{
	int ret = 0;

	pthread_mutex_lock(&c->wlock);
	while ((c->inflight >= CONN_MAX_INFLIGHT ||
		conn_parked(c) >= CONN_MAX_PARKED) && !c->closing)
		pthread_cond_wait(&c->icond, &c->wlock);
	if (c->closing)
		ret = -EPIPE;
	else
		c->inflight++;
	pthread_mutex_unlock(&c->wlock);
	return ret;
}

static void inflight_leave(struct conn *c)
{
	pthread_mutex_lock(&c->wlock);
	CAIRN_ASSERT(c->inflight > 0);
	c->inflight--;
	pthread_cond_broadcast(&c->icond);
	pthread_mutex_unlock(&c->wlock);
}

/*
 * Read exactly n bytes (*got counts them). Before HELLO every read is
 * bounded by what is left of the peer's handshake deadline, so a stranger
 * trickling one byte at a time cannot hold the connection past it.
 * Returns 0, -EPIPE on EOF, -EAGAIN when the deadline passed, or -errno.
 */
static int conn_read_full(struct conn *c, void *buf, size_t n, size_t *got)
{
	while (*got < n) {
		if (!c->hello_done) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			long left = (c->hs_deadline.tv_sec - now.tv_sec) * 1000L +
				    (c->hs_deadline.tv_nsec - now.tv_nsec) /
					    1000000L;
			if (left <= 0)
				return -EAGAIN;
			struct timeval tv = { .tv_sec = left / 1000,
					      .tv_usec = (left % 1000) * 1000 };
			setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
				   sizeof(tv));
		}
		ssize_t r = read(c->fd, (uint8_t *)buf + *got, n - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EPIPE;
		*got += (size_t)r;
	}
	return 0;
}

/*
 * The peer's HELLO did not verify: it holds no cell key, a wrong one, or
 * replays a recorded handshake. Held a moment (a guesser gets one try a
 * second per connection), logged at most once a second.
 */
static void auth_failed(struct conn *c, const char *why)
{
	struct server *s = c->srv;
	int64_t now = clock_mono_ms();
	int64_t last = __atomic_load_n(&s->authfail_ms, __ATOMIC_RELAXED);

	if (now - last >= 1000 &&
	    __atomic_compare_exchange_n(&s->authfail_ms, &last, now, 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		unsigned quiet = __atomic_exchange_n(&s->authfail_quiet, 0,
						     __ATOMIC_RELAXED);
		if (quiet)
			log_warn("%u more failed handshakes not logged",
				 quiet);
		log_warn("peer %s: handshake failed: %s; closing", c->peer,
			 why);
	} else {
		__atomic_add_fetch(&s->authfail_quiet, 1, __ATOMIC_RELAXED);
	}
	struct timespec ts = { AUTH_FAIL_DELAY_MS / 1000,
			       (AUTH_FAIL_DELAY_MS % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	conn_mark_closing(c, 0);
}

/*
 * The first frame: AUTH (lib/seal.h). Answer with a fresh nonce and the
 * proof that we hold the cell key, then seal everything after. Nothing
 * about the volume goes out before the peer's HELLO verifies. Returns 0,
 * or -1 once the connection has been failed.
 */
static int serve_auth(struct server *s, struct conn *c,
		      const struct wire_hdr *h, const uint8_t *payload)
{
	struct msg_auth_req q;
	struct msg_auth_rep rep;
	const struct srv_key *k = NULL;
	const char *why = NULL;
	struct wbuf w;
	int status = 0;
	size_t at;

	if (msg_decode(OP_AUTH, 0, payload, h->len, &q, &why)) {
		conn_fail(c, "malformed AUTH (%s)", why ? why : "bad length");
		return -1;
	}
	if (q.magic != CAIRN_MAGIC) {
		conn_fail(c, "bad AUTH magic 0x%08x (not a Cairn client)",
			  q.magic);
		return -1;
	}
	for (int i = 0; i < s->nkeys && !k; i++)
		if (!memcmp(s->keys[i].id, q.key_id, CELLKEY_ID_SIZE))
			k = &s->keys[i];
	if (q.version != CAIRN_PROTO_VERSION)
		status = -EPROTONOSUPPORT;
	else if (!k)
		status = -EACCES;
	else if (seal_random(rep.nonce, sizeof(rep.nonce)))
		status = -EIO;
	wbuf_init(&w);
	at = wire_frame_begin(&w, OP_AUTH, WF_REPLY, h->id, status);
	if (!status) {
		seal_proof(k->key, q.nonce, rep.nonce, rep.proof);
		msg_encode(OP_AUTH, 1, &w, &rep);
	}
	wire_frame_end(&w, at);
	if (!status) {
		c->ro = k->ro;
		c->rx = seal_new(k->key, q.nonce, rep.nonce, SEAL_C2S, 0);
		struct seal *tx = seal_new(k->key, q.nonce, rep.nonce,
					   SEAL_S2C, 1);
		if (!c->rx || !tx) {
			seal_free(tx);
			wbuf_free(&w);
			conn_fail(c, "out of memory for the handshake");
			return -1;
		}
		/* The answer goes out in the clear, everything after it
		 * sealed: conn_send reads tx. */
		if (conn_send(c, &w)) {
			seal_free(tx);
			wbuf_free(&w);
			return -1;
		}
		__atomic_store_n(&c->tx, tx, __ATOMIC_RELEASE);
		c->auth_done = 1;
		wbuf_free(&w);
		return 0;
	}
	conn_send(c, &w);
	wbuf_free(&w);
	if (status == -EACCES)
		auth_failed(c, "it names a key this server does not hold "
			    "(another cell's key?)");
	else if (status == -EPROTONOSUPPORT)
		conn_fail(c, "unsupported protocol version %u (this server "
			  "speaks %u)", q.version, CAIRN_PROTO_VERSION);
	else
		conn_fail(c, "no random bytes for the handshake");
	return -1;
}

/* Read a frame header. Like net_read_full, but tells a close between
 * frames (*partial = 0) from one inside a header. */
static int read_header(struct conn *c, uint8_t hb[WIRE_HDR_SIZE],
		       int *partial)
{
	size_t got = 0;
	int rc = conn_read_full(c, hb, WIRE_HDR_SIZE, &got);

	*partial = got > 0;
	return rc;
}

/* Read and check one frame. Returns 0 with *payload (malloc'ed, NULL when
 * empty) or a negative errno once the connection has been failed. */
static int read_frame(struct conn *c, struct wire_hdr *h, uint8_t **payload)
{
	uint8_t hb[WIRE_HDR_SIZE];
	uint8_t *p = NULL;
	int rc, partial = 0;

	/* Blocks on the peer: no lock may be held. */
	LOCK_ASSERT_NOT_HELD(&c->wlock);
	LOCK_ASSERT_NOT_HELD(&c->srv->lock);
	*payload = NULL;
	rc = read_header(c, hb, &partial);
	if (rc) {
		reader_ended(c, rc, partial);
		return rc;
	}
	if (wire_hdr_decode(hb, h)) {
		conn_fail(c, "frame length %u exceeds the limit of %u", h->len,
			  WIRE_MAX_PAYLOAD + SEAL_TAG_SIZE);
		return -EMSGSIZE;
	}
	/* From here on h->len is the payload's length; a sealed frame
	 * carries its tag after it. */
	if (c->rx) {
		if (h->len < SEAL_TAG_SIZE) {
			conn_fail(c, "sealed frame of %u bytes, shorter than "
				  "its tag", h->len);
			return -EPROTO;
		}
		h->len -= SEAL_TAG_SIZE;
	}
	if (h->flags & ~(unsigned)(WF_REPLY | WF_PUSH | WF_CRED)) {
		conn_fail(c, "unknown flag bits 0x%x", h->flags);
		return -EPROTO;
	}
	if (!c->auth_done &&
	    (h->op != OP_AUTH || h->flags || h->len > HELLO_MAX_LEN)) {
		conn_fail(c, "first frame is not an AUTH (op %u%s, flags 0x%x, "
			  "length %u)", h->op,
			  h->op == OP_HELLO ? " = HELLO: a client older than "
			  "protocol 7, or not given the cell key?" : "",
			  h->flags, h->len);
		return -EPROTO;
	}
	if (c->auth_done && !c->hello_done &&
	    (h->op != OP_HELLO || h->flags || h->len > HELLO_MAX_LEN)) {
		conn_fail(c, "frame after AUTH is not a HELLO (op %u, flags "
			  "0x%x, length %u)", h->op, h->flags, h->len);
		return -EPROTO;
	}
	if (h->flags == WF_REPLY && h->op == OP_CB_BREAK) {
		/* The one reply a client sends: an acknowledgement. */
		if (h->len || h->status || !h->id) {
			conn_fail(c, "malformed CB_BREAK acknowledgement (len "
				  "%u, status %d, id %u)", h->len, h->status,
				  h->id);
			return -EPROTO;
		}
	} else if (h->flags & ~(unsigned)WF_CRED) {
		conn_fail(c, "a client sent a %s frame",
			  h->flags & WF_REPLY ? "reply" : "push");
		return -EPROTO;
	}
	size_t wlen = h->len + (c->rx ? SEAL_TAG_SIZE : 0);
	if (wlen) {
		p = malloc(wlen);
		if (!p) {
			conn_fail(c, "out of memory for a %zu-byte frame",
				  wlen);
			return -ENOMEM;
		}
		size_t got = 0;
		rc = conn_read_full(c, p, wlen, &got);
		if (rc) {
			free(p);
			reader_ended(c, rc, 1);
			return rc;
		}
	}
	if (c->rx && seal_open(c->rx, hb, p, wlen)) {
		free(p);
		if (!c->hello_done)
			auth_failed(c, "its HELLO does not verify (no cell "
				    "key, a different cell's key, or a replayed "
				    "handshake)");
		else
			conn_fail(c, "frame (op %u, id %u) does not verify: "
				  "altered, replayed or out of order", h->op,
				  h->id);
		return -EBADMSG;
	}
	if (!h->len) {
		free(p);
		p = NULL;
	}
	*payload = p;
	return 0;
}

/*
 * The fid whose write token, held by another client, the request must
 * wait for, or NULL: the handler said so (a change of the file), or the
 * reply of a request that changed nothing carries its attributes.
 */
static const struct cairn_fid *must_wait(struct server *s, struct conn *c,
					 const struct wire_hdr *h,
					 const struct handler_out *out)
{
	int i;

	if (out->park)
		return &out->park_fid;
	if (msg_has(h->op, MSG_CHANGES) || h->op == OP_WTOKEN)
		return NULL;
	i = tok_find_other(s->ctx.tok, c, out->pfid, out->np);
	return i < 0 ? NULL : &out->pfid[i];
}

/*
 * A request parked behind another client's token on fid may hold fid's
 * pages locked in its client's kernel: a READ or WRITE, or any request a
 * client sends while answering one (a GETATTR before a read). That
 * client needs those pages to acknowledge a break of fid, so the
 * holder's changes must not wait for that (callback.h, cb_block). Set
 * up before the request is parked, so that its resume, on any thread,
 * finds it.
 */
static struct cb_blockent *park_block(struct server *s, struct conn *c,
				      const struct cairn_fid *fid)
{
	struct cb_blockent *b;
	struct conn *holder;

	if (!(holder = tok_holder_get(s->ctx.tok, c, fid)))
		return NULL;
	b = cb_block(s->ctx.cb, conn_cb_client(c), conn_cb_client(holder), fid);
	conn_put(holder);
	return b;
}

/*
 * One request, one way: delivery admits it (the duplicate request cache
 * may answer it instead), its handler runs, delivery sends the outcome.
 * A request that must wait for another client's write token is parked
 * instead (token.h): its handler's outcome is dropped (it changed
 * nothing) and it runs again, from the start, once the token is back.
 * Returns 0, 1 when j was parked (j, its payload, its in-flight count and
 * conn reference now belong to the table), or -EPROTO once c has been
 * failed (stop reading from it).
 */
static int serve_request(struct server *s, struct job *j)
{
	struct conn *c = j->c;
	const struct wire_hdr *h = &j->h;
	const struct cairn_fid *wait;
	struct handler_out out;

	/* deliver.h: the request runs holding no lock (its store call may
	 * wait for a group commit, its delivery sends). */
	LOCK_ASSERT_NOT_HELD(&c->wlock);
	LOCK_ASSERT_NOT_HELD(&s->lock);
	LOCK_ASSERT_NOT_HELD(&s->qlock);
again:
	if (!j->admitted) {
		if (deliver_begin(&s->ctx, c, h, &j->d))
			return 0;
		j->admitted = 1;
	} else {
		/* Parked and resumed: what it reads is read now. */
		j->d.seq0 = cb_seq(s->ctx.cb);
	}
	if (handler_run(&s->ctx, c, h, j->payload, &out)) {
		deliver_abort(&s->ctx, &j->d);
		return -EPROTO;
	}
	/* A job on the stack began when no token was held: one granted
	 * since broke what it read (the grant's break reaches it through
	 * the recheck after its reply; deliver.h). */
	if (!j->stack && (wait = must_wait(s, c, h, &out))) {
		struct cairn_fid fid = *wait;

		handler_out_free(&out);
		j->block = park_block(s, c, &fid);
		j->park_fid = fid;
		if (!tok_park(s->ctx.tok, c, &fid, &j->tw)) {
			cb_unblock(s->ctx.cb, j->block);
			j->block = NULL;
			goto again; /* returned meanwhile */
		}
		return 1;
	}
	return deliver_reply(&s->ctx, c, h, &j->d, &out);
}

/*
 * A request run on the reader thread (MSG_INLINE, never a change): it is
 * parked only when a token is held, so only then does it need a job on
 * the heap. Returns as serve_request; 1: payload and the in-flight count
 * belong to the parked job.
 */
static int serve_inline(struct server *s, struct conn *c,
			const struct wire_hdr *h, uint8_t *payload)
{
	struct job *j;
	int rc;

	if (!tok_count(s->ctx.tok)) {
		struct job sj = { .c = c, .h = *h, .payload = payload,
				  .stack = 1 };

		return serve_request(s, &sj);
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		conn_fail(c, "out of memory");
		return -EPROTO;
	}
	*j = (struct job){ .c = c, .h = *h, .payload = payload };
	conn_get(c);
	rc = serve_request(s, j);
	if (rc != 1) {
		conn_put(c);
		free(j);
	}
	return rc;
}

/* tok_park's resume: run the parked request again on a worker. */
static void resume_job(void *arg, struct tok_wait *w)
{
	struct server *s = arg;
	struct job *j = (struct job *)((char *)w - offsetof(struct job, tw));

	cb_unblock(s->ctx.cb, j->block);
	j->block = NULL;
	j->next = NULL; /* still the successor it had when first queued */
	queue_job(s, j);
}

static void *conn_reader(void *arg)
{
	struct conn *c = arg;
	struct server *s = c->srv;

	for (;;) {
		struct wire_hdr h;
		uint8_t *payload;

		if (read_frame(c, &h, &payload))
			break;
		__atomic_store_n(&c->last_rx_ms, clock_mono_ms(), __ATOMIC_RELAXED);
		if (!c->auth_done) {
			int rc = serve_auth(s, c, &h, payload);
			free(payload);
			if (rc)
				break;
			continue;
		}
		if (!c->hello_done) {
			/* Handshake inline: nothing else runs before it
			 * (read_frame let through only a HELLO, which never
			 * waits for a token). */
			struct job hj = { .c = c, .h = h, .payload = payload,
					  .stack = 1 };
			int rc = serve_request(s, &hj);
			free(payload);
			if (rc)
				break;
			if (c->hello_done) {
				/* Known peer now: reads may block as long as
				 * it likes (keepalive notices a vanished one). */
				struct timeval tv = { 0 };
				setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
					   sizeof(tv));
			}
			continue;
		}
		if (h.flags & WF_REPLY) {
			/* Unknown ids are late (timed out) or were never
			 * waited for: nothing to do either way. */
			cb_ack(s->ctx.cb, &c->cb, h.id);
			continue;
		}
		/*
		 * Requests that only read LMDB and never wait (no group
		 * commit, no acknowledgements, no disk I/O; MSG_INLINE) run
		 * on the reader thread itself: a hand-off to a worker costs
		 * a thread wake-up (~25 us on a small VM), which is most of
		 * a lookup's cost. Everything else goes to the worker pool
		 * so a slow request never holds up the connection.
		 */
		if (msg_has(h.op, MSG_INLINE)) {
			if (inflight_enter(c)) {
				free(payload);
				break;
			}
			if (serve_inline(s, c, &h, payload) != 1) {
				free(payload);
				inflight_leave(c);
			}
			continue;
		}
		struct job *j = malloc(sizeof(*j));
		if (!j || inflight_enter(c)) {
			if (!j)
				conn_fail(c, "out of memory");
			free(j);
			free(payload);
			break;
		}
		conn_get(c);
		*j = (struct job){ .c = c, .h = h, .payload = payload };
		queue_job(s, j);
	}

	/* No more acknowledgements can come: stop waiting for them. */
	conn_mark_closing(c, 0);
	cb_client_gone(s->ctx.cb, &c->cb);
	/* Nor token returns: what is parked behind its tokens runs now. */
	tok_conn_gone(s->ctx.tok, c);
	/* Drain: no request of c still runs or waits, so none can register
	 * a promise after the drop below. */
	pthread_mutex_lock(&c->wlock);
	while (c->inflight || conn_parked(c))
		pthread_cond_wait(&c->icond, &c->wlock);
	pthread_mutex_unlock(&c->wlock);
	pthread_join(c->writer, NULL);
	/* A request of c that ran after the call above may have taken one. */
	tok_conn_gone(s->ctx.tok, c);
	cb_drop_client(s->ctx.cb, &c->cb);
	/* Its waits end; its locks stay for the lease if it has no other
	 * connection. */
	lk_detach(s->ctx.lk, c->lk, c);
	/* Its orphans' grace period starts when no request of it runs. */
	if (c->hello_done)
		orphan_client_down(s->ctx.orph, c->client_id, mono_s());

	pthread_mutex_lock(&s->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	stats_conn(s->ctx.stats, -1);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	log_debug("peer %s: connection released", c->peer);
	conn_put(c); /* must not touch s after the unlink above */
	return NULL;
}

/* --- workers ---------------------------------------------------------------- */

static void *worker_main(void *arg)
{
	struct server *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->qlock);
		while (!s->qhead && !s->qstop)
			pthread_cond_wait(&s->qcond, &s->qlock);
		struct job *j = s->qhead;
		if (j) {
			s->qhead = j->next;
			if (!s->qhead)
				s->qtail = NULL;
		}
		pthread_mutex_unlock(&s->qlock);
		if (!j)
			break;
		/* Read before it runs: parked again, j is the table's. */
		int gated = j->tw.gated;
		struct cairn_fid pf = j->park_fid;

		j->tw.gated = 0;
		int rc = serve_request(s, j);

		if (gated)
			tok_gate_done(s->ctx.tok, &pf);
		if (rc == 1)
			continue; /* parked: the token table has it */
		free(j->payload);
		inflight_leave(j->c);
		conn_put(j->c);
		free(j);
	}
	return NULL;
}

/* --- acknowledgement expiry ---------------------------------------------------- */

/* cb_expire: owner did not acknowledge a break in time. Its kernel may
 * still hold what was broken, so it loses every promise and its
 * connection; it reconnects by itself and revalidates everything. */
static void lost_client(void *arg, void *owner)
{
	struct server *s = arg;
	struct conn *c = owner;
	const uint8_t *id = c->client_id;

	stats_cb_ack_timeout(s->ctx.stats);
	cb_drop_client(s->ctx.cb, &c->cb);
	conn_abort(c, "client %02x%02x%02x%02x%02x%02x%02x%02x did not "
		   "acknowledge a callback break within %d ms; its callbacks "
		   "are dropped", id[0], id[1], id[2], id[3], id[4], id[5],
		   id[6], id[7], CB_ACK_TIMEOUT_MS);
	conn_put(c);
}

/*
 * A client that holds locks keeps its connection busy (it pings when it
 * has nothing else to say, fs_lock.c). One silent for longer than the
 * lock lease is hung or cut off: its connection is closed, so that its
 * locks go a lease later, not when TCP keepalive notices (minutes).
 */
static void silent_lock_holders(struct server *s)
{
	int64_t now = clock_mono_ms(), lease = lk_lease_ms(s->ctx.lk);
	struct conn *silent[16];
	struct lk_stats ls;
	int n = 0;

	lk_get_stats(s->ctx.lk, &ls);
	if (!ls.locks)
		return; /* the usual case: no walk of every connection */

	pthread_mutex_lock(&s->lock);
	for (struct conn *c = s->conns; c && n < 16; c = c->next) {
		int64_t rx = __atomic_load_n(&c->last_rx_ms, __ATOMIC_RELAXED);

		if (c->hello_done && c->lk && now - rx > lease &&
		    lk_client_locks(s->ctx.lk, c->lk)) {
			conn_get(c);
			silent[n++] = c;
		}
	}
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < n; i++) {
		conn_abort(silent[i], "silent for over %lld ms while its client "
			   "holds locks: its locks go in %lld ms unless it "
			   "reconnects", (long long)lease, (long long)lease);
		conn_put(silent[i]);
	}
}

static void *expiry_main(void *arg)
{
	struct server *s = arg;
	int64_t synced_at = mono_s(), expired_at = mono_s();

	pthread_mutex_lock(&s->elock);
	while (!s->estop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += EXPIRY_TICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->econd, &s->elock, &ts);
		if (s->estop)
			break;
		pthread_mutex_unlock(&s->elock);
		cb_expire(s->ctx.cb, lost_client, s);
		tok_expire(s->ctx.tok);
		lk_expire(s->ctx.lk);
		silent_lock_holders(s);
		drc_expire(s->drc); /* does work once a second at most */
		orphan_sweep(s->ctx.orph, mono_s()); /* likewise */
		if (mono_s() != synced_at) {
			/* Commits are durable within about a second, as on
			 * a local file system (store.c). */
			store_tick(s->ctx.st);
			synced_at = mono_s();
		}
		if (mono_s() - expired_at >= 60) {
			/* Resends come within seconds of a restart; the
			 * records of changes older than a forgotten client
			 * (drc.h) are not needed. */
			size_t n = 0;

			store_applied_expire(s->ctx.st,
					     (int64_t)time(NULL) - DRC_IDLE_S,
					     &n);
			expired_at = mono_s();
		}
		pthread_mutex_lock(&s->elock);
	}
	pthread_mutex_unlock(&s->elock);
	return NULL;
}

static void expiry_stop(struct server *s)
{
	if (!s->expiry_started)
		return;
	pthread_mutex_lock(&s->elock);
	s->estop = 1;
	pthread_cond_signal(&s->econd);
	pthread_mutex_unlock(&s->elock);
	pthread_join(s->expiry, NULL);
	s->expiry_started = 0;
}

/* --- accept ------------------------------------------------------------------ */

static void sock_setup(int fd)
{
	struct timeval tv = { .tv_sec = CONN_SEND_TIMEOUT_S };
	int one = 1, idle = 60, intvl = 10, cnt = 6;

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A client that vanished without a FIN is noticed in ~2 minutes. */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* Create a conn for fd and start its threads; consumes fd. Called with
 * s->lock held (so a concurrent stop sees the conn in the list). */
static int conn_start(struct server *s, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	pthread_attr_t attr;
	pthread_t reader;
	int ret;

	LOCK_ASSERT_HELD(&s->lock);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->srv = s;
	c->fd = fd;
	c->refs = 1; /* the reader's */
	clock_gettime(CLOCK_MONOTONIC, &c->hs_deadline);
	c->hs_deadline.tv_sec += s->handshake_s;
	net_peer_name(fd, c->peer, sizeof(c->peer));
	pthread_mutex_init(&c->wlock, NULL);
	pthread_cond_init(&c->wcond, NULL);
	pthread_cond_init(&c->icond, NULL);
	cb_client_init(s->ctx.cb, &c->cb, c);
	sock_setup(fd);
	ret = -pthread_create(&c->writer, NULL, conn_writer, c);
	if (ret) {
		conn_put(c);
		return ret;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	stats_conn(s->ctx.stats, 1);
	log_info("peer %s: connected", c->peer);
	ret = -pthread_create(&reader, &attr, conn_reader, c);
	pthread_attr_destroy(&attr);
	if (ret) {
		s->conns = c->next;
		if (c->next)
			c->next->prev = NULL;
		s->nconns--;
		stats_conn(s->ctx.stats, -1);
		conn_mark_closing(c, 1);
		pthread_join(c->writer, NULL);
		conn_put(c);
		return ret;
	}
	return 0;
}

static void *accept_main(void *arg)
{
	struct server *s = arg;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		int aerr = fd < 0 ? errno : 0, stopping;

		pthread_mutex_lock(&s->lock);
		stopping = s->stopping;
		if (fd >= 0 && !stopping && s->nconns >= SERVER_MAX_CONNS) {
			log_warn("refusing a connection: already %d "
				 "connections (the limit)", SERVER_MAX_CONNS);
		} else if (fd >= 0 && !stopping) {
			int ret = conn_start(s, fd);
			if (ret)
				log_error("cannot start a connection: %s",
					  strerror(-ret));
			fd = -1;
		}
		pthread_mutex_unlock(&s->lock);
		if (fd >= 0)
			close(fd);
		if (stopping)
			break;
		if (aerr && aerr != EINTR && aerr != ECONNABORTED &&
		    aerr != EAGAIN) {
			/* EMFILE and friends: back off instead of spinning. */
			log_error("accept: %s", strerror(aerr));
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

/* --- server ------------------------------------------------------------------ */

/* The callback table's hold hook: keeps a batch's connection alive. */
static void hold_conn(void *owner)
{
	conn_get(owner);
}

/* The duplicate request cache's park hook: a resend waits for its
 * original. */
static void park_conn(void *owner)
{
	conn_park(owner);
}

int server_port(const struct server *s)
{
	return s->port;
}

void server_counts(struct server *s, long *conns, long *clients)
{
	long n = 0;

	pthread_mutex_lock(&s->lock);
	*conns = s->nconns;
	for (struct conn *c = s->conns; c; c = c->next) {
		if (!c->hello_done)
			continue;
		struct conn *d = s->conns;
		for (; d != c; d = d->next)
			if (d->hello_done &&
			    !memcmp(d->client_id, c->client_id, 16))
				break;
		if (d == c)
			n++;
	}
	*clients = n;
	pthread_mutex_unlock(&s->lock);
}

static void server_free(struct server *s)
{
	orphan_table_destroy(s->ctx.orph);
	if (s->ctx.st)
		store_close(s->ctx.st);
	cb_table_destroy(s->ctx.cb);
	tok_table_destroy(s->ctx.tok);
	lk_table_destroy(s->ctx.lk);
	drc_destroy(s->drc);
	stats_destroy(s->ctx.stats);
	free(s->workers);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->qlock);
	pthread_cond_destroy(&s->qcond);
	pthread_mutex_destroy(&s->elock);
	pthread_cond_destroy(&s->econd);
	seal_wipe(s->keys, sizeof(s->keys));
	free(s);
}

static void workers_stop(struct server *s)
{
	pthread_mutex_lock(&s->qlock);
	s->qstop = 1;
	pthread_cond_broadcast(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	for (int i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	s->nworkers = 0;
}

/* The cell key: o->key_file, or DATA/cell.key (created at the first
 * start, and said so). */
static int load_key(struct server *s, const struct server_opts *o, char *err,
		    size_t errsz)
{
	char def[PATH_MAX];
	const char *path = o->key_file;
	int ret;

	if (!path) {
		if (snprintf(def, sizeof(def), "%s/cell.key", o->data_dir) >=
		    (int)sizeof(def)) {
			snprintf(err, errsz, "data directory path too long");
			return -ENAMETOOLONG;
		}
		path = def;
		ret = cellkey_create(def, err, errsz);
		if (ret == 0)
			log_info("created the cell key %s: every client needs "
				 "a copy (cairn mount --key FILE; default %s)",
				 def, CELLKEY_DEFAULT);
		else if (ret != -EEXIST)
			return ret;
	}
	if ((ret = cellkey_load(path, s->keys[0].key, err, errsz)))
		return ret;
	cellkey_id(s->keys[0].key, s->keys[0].id);
	s->nkeys = 1;
	for (int i = 0; i < o->n_ro_keys && i < SRV_MAX_RO_KEYS; i++) {
		struct srv_key *k = &s->keys[s->nkeys];

		if ((ret = cellkey_load(o->ro_key_files[i], k->key, err,
					errsz)))
			return ret;
		cellkey_id(k->key, k->id);
		for (int j = 0; j < s->nkeys; j++)
			if (!memcmp(s->keys[j].id, k->id, CELLKEY_ID_SIZE)) {
				snprintf(err, errsz, "read-only key %s is "
					 "already a key of this server",
					 o->ro_key_files[i]);
				return -EINVAL;
			}
		k->ro = 1;
		s->nkeys++;
		log_info("read-only export: clients holding %s may read, "
			 "every change is refused (EROFS)",
			 o->ro_key_files[i]);
	}
	return 0;
}

int server_start(const struct server_opts *o, struct server **out, char *err,
		 size_t errsz)
{
	struct server *s = calloc(1, sizeof(*s));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const char *missing = NULL;
	int ret, n = o->workers > 0 ? o->workers : SERVER_WORKERS;

	if (!s) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	s->lfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);
	pthread_mutex_init(&s->elock, NULL);
	pthread_cond_init(&s->econd, NULL);
	s->ctx.srv = s;
	s->handshake_s = o->handshake_timeout_s ? (int)o->handshake_timeout_s :
			 SRV_HANDSHAKE_TIMEOUT_S;
	s->ctx.stats = stats_create();
	s->ctx.cb = cb_table_create(CB_MAX_PROMISES, hold_conn);
	s->ctx.tok = tok_table_create(o->recall_timeout_ms ?
				      o->recall_timeout_ms :
				      TOK_RECALL_TIMEOUT_MS, resume_job, s);
	s->drc = drc_create(park_conn);
	s->workers = calloc((size_t)n, sizeof(*s->workers));
	if (!s->ctx.stats || !s->ctx.cb || !s->ctx.tok || !s->drc ||
	    !s->workers) {
		snprintf(err, errsz, "out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	ret = handlers_check(&missing);
	if (ret) {
		snprintf(err, errsz, "opcode %s has no handler", missing);
		goto fail;
	}
	if (getenv(HANDLERS_WITHOUT_ENV) &&
	    (ret = handlers_refuse(getenv(HANDLERS_WITHOUT_ENV), err, errsz)))
		goto fail;
	ret = store_open(o->data_dir, &s->ctx.st, err, errsz);
	if (ret)
		goto fail;
	s->ctx.lk = lk_table_create(o->data_dir,
				    o->lock_set & SRV_LOCK_LEASE ?
				    o->lock_lease_ms : LK_LEASE_MS,
				    o->lock_set & SRV_LOCK_GRACE ?
				    o->lock_grace_ms : LK_GRACE_MS);
	if (!s->ctx.lk) {
		snprintf(err, errsz, "out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	s->ctx.orph = orphan_table_create(s->ctx.st, o->orphan_grace_s ?
					  o->orphan_grace_s : ORPHAN_GRACE_S,
					  mono_s());
	if (!s->ctx.orph) {
		snprintf(err, errsz, "out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	if ((ret = load_key(s, o, err, errsz)))
		goto fail;
	ret = store_server_id(s->ctx.st, s->ctx.server_id);
	if (ret) {
		snprintf(err, errsz, "%s: cannot read the server id: %s",
			 o->data_dir, strerror(-ret));
		goto fail;
	}
	if (getrandom(&s->ctx.epoch, sizeof(s->ctx.epoch), 0) !=
	    sizeof(s->ctx.epoch))
		s->ctx.epoch = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	clock_gettime(CLOCK_MONOTONIC, &s->ctx.started);
	s->ctx.no_root_squash = o->no_root_squash;
	if (o->no_root_squash)
		log_info("no root squash: root on a client acts as root here");

	s->lfd = net_listen(o->host ? o->host : "", o->port, err, errsz);
	if (s->lfd < 0) {
		ret = s->lfd;
		goto fail;
	}
	if (getsockname(s->lfd, (struct sockaddr *)&ss, &sl) == 0)
		s->port = ntohs(ss.ss_family == AF_INET6
				? ((struct sockaddr_in6 *)&ss)->sin6_port
				: ((struct sockaddr_in *)&ss)->sin_port);
	for (; s->nworkers < n; s->nworkers++) {
		ret = -pthread_create(&s->workers[s->nworkers], NULL,
				      worker_main, s);
		if (ret) {
			snprintf(err, errsz, "cannot start threads: %s",
				 strerror(-ret));
			goto fail;
		}
	}
	ret = -pthread_create(&s->expiry, NULL, expiry_main, s);
	if (ret) {
		snprintf(err, errsz, "cannot start threads: %s",
			 strerror(-ret));
		goto fail;
	}
	s->expiry_started = 1;
	ret = -pthread_create(&s->acceptor, NULL, accept_main, s);
	if (ret) {
		snprintf(err, errsz, "cannot start threads: %s",
			 strerror(-ret));
		goto fail;
	}
	*out = s;
	return 0;
fail:
	expiry_stop(s);
	workers_stop(s);
	if (s->lfd >= 0)
		close(s->lfd);
	server_free(s);
	return ret;
}

void server_stop(struct server *s)
{
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_mutex_unlock(&s->lock);
	/* shutdown() wakes a thread blocked in accept(); close() alone
	 * would not. */
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->acceptor, NULL);
	close(s->lfd);

	pthread_mutex_lock(&s->lock);
	for (struct conn *c = s->conns; c; c = c->next)
		conn_mark_closing(c, 1);
	while (s->conns)
		pthread_cond_wait(&s->cond, &s->lock);
	CAIRN_ASSERT(s->nconns == 0);
	pthread_mutex_unlock(&s->lock);

	expiry_stop(s);
	workers_stop(s);
	lk_table_stopped(s->ctx.lk);
	server_free(s);
}

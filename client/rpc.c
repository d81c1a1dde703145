/*
 * rpc.c - the client's multiplexed, self-reconnecting server connection.
 *
 * States of the connection (r->state, guarded by r->mu):
 *
 *   UP        fd is a connected socket that has completed HELLO.
 *   DOWN      the connection was lost; the reader thread retries every
 *             RECONNECT_MS until a HELLO succeeds (-> UP).
 *   SHUTDOWN  rpc_destroy() was called; terminal.
 *
 * Every call is a `struct pending` on r->pending while it waits. The reader
 * thread completes it when the reply arrives. When the connection drops,
 * every pending call is completed with RETRY and goes back to waiting for
 * UP, then is sent again on the new connection, with the id it had: ids
 * are unique for the life of the rpc (a u32 counter, 0 reserved for PING),
 * which HELLO declares with HELLO_REPLAY, so the server answers a resent
 * change it already executed from its duplicate request cache instead of
 * executing it twice (docs/PROTOCOL.md, "Retransmission after a
 * reconnect").
 *
 * Invariants (under mu): UP has fd >= 0 and DOWN has fd == -1; a call is
 * on r->pending exactly while it waits for its reply (done == 0), and its
 * interrupt handle, if any, points back to it (intr->p) just as long; no
 * call has id PING_ID.
 *
 * Threads: the reader thread is the only one that reads the socket and
 * delivers replies, so it never makes a call and never sends an
 * acknowledgement (either could wait for itself); it alone touches the
 * heartbeat fields.
 *
 * Calls that change something are shown to the call hook (the callback
 * notifier's: while such a call is in progress its FUSE request may hold
 * kernel locks the notifier must not wait for) before the first send and
 * after the call returns. HELLO says r->hello_flags, which the owner may
 * change (rpc_update_hello_flags); said_flags is what the current
 * connection said.
 *
 * Every connection begins with AUTH (lib/seal.h): both sides prove they
 * hold the cell key and every later frame is sealed, r->tx sealing what
 * we send (under send_mu, in send order: it changes with fd), r->rx
 * opening what we read (the reader's alone).
 *
 * Locks (their order with each other and with the rest of the client:
 * docs/LOCKING.md): r->send_mu serialises writes to the socket and is held
 * whenever fd changes; r->mu guards everything else. Neither is held
 * across a blocking read; only send_mu is held across a write.
 *
 * Counters (r->st, rpc_get_stats): relaxed atomic adds where each event
 * happens, under whatever lock is already held there or none; they are
 * statistics and nothing decides on them, so no ordering is needed.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "rpc.h"
#include "../lib/clock.h"
#include "../lib/debug.h"
#include "../lib/log.h"
#include "../lib/msg.h"
#include "../lib/net.h"
#include "../lib/auth.h"
#include "../lib/seal.h"

#define RECONNECT_MS 500
/* Liveness: while calls wait, a server that sends nothing for a heartbeat
 * interval (at most HEARTBEAT_MS) is pinged; PING is answered on the
 * server's reader thread, however busy its workers are. One silent for
 * dead_ms (half of down_timeout_s, at most DEAD_MS) is treated as lost, so
 * a hung server turns into a reconnect, then -EIO: never a hang. */
#define HEARTBEAT_MS 5000
#define DEAD_MS      30000
/* Reserved request id for heartbeat PINGs (never given to a call). */
#define PING_ID      0u
#define RETRY        (-100000) /* internal status: send again */

enum rpc_state { RPC_UP, RPC_DOWN, RPC_SHUTDOWN };

struct pending {
	struct pending *next;
	uint32_t id;
	int done;
	int status;      /* server status, RETRY or a transport error */
	int64_t sent_ms; /* clock_mono_ms() just before its last send */
	int answered;    /* status came from the server's reply */
	uint8_t *buf;    /* reply payload, owned until handed to the caller */
	size_t len;
	pthread_cond_t cv;
	struct rpc_intr *intr; /* the caller's interrupt handle, or NULL */
};

struct rpc {
	struct rpc_opts o;
	char host[256];

	pthread_mutex_t send_mu;
	pthread_mutex_t mu;
	pthread_cond_t state_cv;   /* broadcast on every state change */
	enum rpc_state state;      /* mu */
	int fd;                    /* send_mu + mu to change; -1 when down */
	struct seal *tx;           /* fd's sealer; changes with fd */
	struct seal *rx;           /* fd's opener; the reader's only */
	uint64_t epoch;            /* server epoch seen at the last HELLO; mu */
	uint32_t next_id;          /* mu; next call id, 0 (PING_ID) skipped */
	struct pending *pending;   /* mu */
	struct timespec last_rx;   /* reader only: when a frame last came */
	int64_t down_ms;           /* mu; while DOWN: since when the server
				    * has been out of reach (clock_mono_ms) */
	int down_said;             /* mu; this outage's fast failure logged */
	int64_t ping_ms;           /* reader only: when the PING that is
				    * unanswered was sent; 0: none is */
	int64_t hello_ms;          /* reader only: when the connection's
				    * HELLO was sent */
	int64_t lease_ms;          /* reader only: when the latest-sent
				    * request that got its reply was sent;
				    * promises stand until CAIRN_CB_LEASE_MS
				    * later (lib/proto.h) */
	int lapsed;                /* reader only: on_lapse ran, and no
				    * answer renewed the lease since */

	uint32_t hello_flags;      /* mu; o.hello_flags as of now */
	uint32_t rep_flags;        /* atomic; HELLO_REP_* the server said */
	uint32_t said_flags;       /* mu; what the current connection said */
	void *(*call_begin)(void *arg, uint16_t op, const struct wbuf *req);
	void (*call_end)(void *arg, void *cookie);
	void *call_arg;            /* the hook: set once before rpc_start */

	pthread_t reader;
	int started;
	int dead_ms;               /* silence that makes the server lost */
	int beat_ms;               /* poll interval while calls wait */

	struct rpc_stats st;       /* atomics; st.connected is not kept */
};

#define ST_ADD(field, v) __atomic_add_fetch(&(field), (v), __ATOMIC_RELAXED)
#define ST_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static void st_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = __atomic_load_n(max, __ATOMIC_RELAXED);

	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, 0,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

/* The connection whose reader this thread is, if any. */
static __thread const struct rpc *reader_of;

static void set_rcv_timeout(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* send_frame, counting the frame's bytes once it is written. */
static int send_counted(struct rpc *r, int fd, struct seal *tx, uint16_t op,
			uint16_t flags, uint32_t id, const struct wbuf *pre,
			const struct wbuf *req)
{
	uint64_t bytes = WIRE_HDR_SIZE + (pre ? pre->len : 0) +
			 (req ? req->len : 0);
	int ret = frame_send(fd, tx, op, flags, id, pre, req);

	if (ret == 0) {
		ST_ADD(r->st.bytes_out, bytes);
		if (op < OP__COUNT && !(flags & WF_REPLY))
			ST_ADD(r->st.op[op].bytes_out, bytes);
	}
	return ret;
}

/* A frame was read: count it (a READ reply also by the data it carries). */
static void count_in(struct rpc *r, const struct wire_hdr *h,
		     const uint8_t *payload)
{
	uint64_t bytes = WIRE_HDR_SIZE + (uint64_t)h->len;
	struct msg_read_rep rd;

	ST_ADD(r->st.bytes_in, bytes);
	if (h->flags & WF_PUSH) {
		ST_ADD(r->st.pushes, 1);
		return;
	}
	if (h->op >= OP__COUNT)
		return;
	ST_ADD(r->st.op[h->op].bytes_in, bytes);
	/* The data bytes fetched: what a disk cache is meant to save. The
	 * decode reads the attributes and the blob's length, nothing more. */
	if (h->op == OP_READ && h->status == 0 &&
	    msg_decode(OP_READ, 1, payload, h->len, &rd, NULL) == 0)
		ST_ADD(r->st.read_bytes, rd.data.len);
}

/*
 * Connect, authenticate and complete HELLO, bounded by connect_timeout_ms.
 * Returns the fd with its sealer and opener, or a negative errno with err
 * filled in.
 */
static int dial(struct rpc *r, uint64_t *epoch, struct cairn_attr *root,
		uint32_t *said, struct seal **txp, struct seal **rxp,
		char *err, size_t errsz)
{
	struct msg_hello_req hq = {
		.magic = CAIRN_MAGIC,
		.version = CAIRN_PROTO_VERSION,
	};
	struct msg_hello_rep hp;
	struct seal *tx = NULL, *rx = NULL;
	char why[256];
	struct wbuf req;
	struct wire_hdr h;
	uint8_t *payload = NULL;
	int fd, ret;

	fd = net_connect(r->host, r->o.port, r->o.connect_timeout_ms, err,
			 errsz);
	if (fd < 0)
		return fd;
	set_rcv_timeout(fd, r->o.connect_timeout_ms);
	ret = auth_client(fd, r->o.key, &tx, &rx, why, sizeof(why));
	ST_ADD(r->st.op[OP_AUTH].calls, 1);
	if (ret) {
		snprintf(err, errsz, "server %s:%d: %s", r->host, r->o.port,
			 why);
		close(fd);
		return ret;
	}

	/* Every connection of this rpc gets HELLO_REPLAY: rpc_call_intr
	 * keeps a call's id across resends and never reuses one. */
	pthread_mutex_lock(&r->mu);
	hq.flags = r->hello_flags | HELLO_REPLAY;
	pthread_mutex_unlock(&r->mu);
	*said = hq.flags;
	memcpy(hq.client_id, r->o.client_id, sizeof(hq.client_id));
	wbuf_init(&req);
	msg_encode(OP_HELLO, 0, &req, &hq);
	r->hello_ms = clock_mono_ms();
	ret = req.err ? req.err : send_counted(r, fd, tx, OP_HELLO, 0, 0, NULL, &req);
	wbuf_free(&req);
	if (ret == 0)
		ret = frame_read(fd, rx, &h, &payload);
	if (ret == 0) {
		ST_ADD(r->st.op[OP_HELLO].calls, 1);
		count_in(r, &h, payload);
	}
	if (ret) {
		snprintf(err, errsz, "cannot reach server %s:%d: %s", r->host,
			 r->o.port,
			 ret == -EAGAIN ? "no answer to HELLO (timed out)" :
			 ret == -EPIPE ? "connection closed during HELLO" :
			 ret == -EMSGSIZE ? "the peer is not a Cairn server "
					    "(its answer to HELLO is not a "
					    "Cairn frame)" :
			 ret == -EBADMSG ? "its answer to HELLO does not "
					   "verify" :
					 strerror(-ret));
		goto fail;
	}
	if (h.op != OP_HELLO || !(h.flags & WF_REPLY) || h.id != 0) {
		ret = -EPROTO;
		snprintf(err, errsz, "server %s:%d: unexpected answer to HELLO "
			 "(not a Cairn server?)", r->host, r->o.port);
		goto fail;
	}
	if (h.status) {
		ret = h.status;
		snprintf(err, errsz, "server %s:%d refused HELLO: %s", r->host,
			 r->o.port, strerror(-h.status));
		goto fail;
	}

	/* The server id is not used yet. */
	if (msg_decode(OP_HELLO, 1, payload, h.len, &hp, NULL) ||
	    hp.version != CAIRN_PROTO_VERSION) {
		ret = -EPROTO;
		snprintf(err, errsz, "server %s:%d: malformed HELLO reply",
			 r->host, r->o.port);
		goto fail;
	}
	*epoch = hp.epoch;
	*root = hp.root;
	__atomic_store_n(&r->rep_flags, hp.flags, __ATOMIC_RELAXED);
	free(payload);
	/* Frames are read only once poll() says data is there; a server that
	 * stalls in the middle of one is lost after dead_ms. */
	set_rcv_timeout(fd, r->dead_ms);
	*txp = tx;
	*rxp = rx;
	return fd;
fail:
	free(payload);
	seal_free(tx);
	seal_free(rx);
	close(fd);
	return ret;
}

int rpc_connect(const struct rpc_opts *o, struct rpc **out,
		struct cairn_attr *root, char *err, size_t errsz)
{
	struct rpc *r = calloc(1, sizeof(*r));
	int fd;

	if (!r) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	r->o = *o;
	snprintf(r->host, sizeof(r->host), "%s", o->host);
	r->o.host = r->host;
	if (r->o.connect_timeout_ms <= 0)
		r->o.connect_timeout_ms = 5000;
	if (r->o.down_timeout_s <= 0)
		r->o.down_timeout_s = 60;
	/* Declare a silent server lost after half the time a call may wait,
	 * so the reconnect gets the other half. */
	r->dead_ms = r->o.down_timeout_s * 500;
	if (r->dead_ms > DEAD_MS)
		r->dead_ms = DEAD_MS;
	if (r->dead_ms < 2000)
		r->dead_ms = 2000;
	r->beat_ms = r->dead_ms / 3 < HEARTBEAT_MS ? r->dead_ms / 3 : HEARTBEAT_MS;
	pthread_mutex_init(&r->send_mu, NULL);
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->state_cv, NULL);
	r->next_id = 1;
	r->hello_flags = o->hello_flags;

	fd = dial(r, &r->epoch, root, &r->said_flags, &r->tx, &r->rx, err,
		  errsz);
	if (fd < 0) {
		seal_wipe(r->o.key, sizeof(r->o.key));
		pthread_cond_destroy(&r->state_cv);
		pthread_mutex_destroy(&r->mu);
		pthread_mutex_destroy(&r->send_mu);
		free(r);
		return fd;
	}
	r->fd = fd;
	r->state = RPC_UP;
	*out = r;
	return 0;
}

/* The state invariant of the file head. Caller holds r->mu. */
static void check_state(const struct rpc *r)
{
	LOCK_ASSERT_HELD(&r->mu);
	CAIRN_ASSERT(r->state != RPC_UP || r->fd >= 0);
	CAIRN_ASSERT(r->state != RPC_DOWN || r->fd == -1);
}

/* Complete every pending call with `status`. Caller holds r->mu. */
static void fail_pending(struct rpc *r, int status)
{
	struct pending *p;

	LOCK_ASSERT_HELD(&r->mu);
	while ((p = r->pending)) {
		CAIRN_ASSERT(!p->done && (!p->intr || p->intr->p == p));
		r->pending = p->next;
		if (p->intr)
			p->intr->p = NULL;
		p->status = status;
		p->done = 1;
		pthread_cond_signal(&p->cv);
	}
}

/* The connection broke: drop it and wake every waiter to resend later.
 * The server has been out of reach for silent_ms already (0: from now). */
static void conn_lost(struct rpc *r, const char *why, int silent_ms)
{
	pthread_mutex_lock(&r->send_mu);
	pthread_mutex_lock(&r->mu);
	if (r->state == RPC_UP) {
		log_warn("lost connection to server %s:%d: %s; reconnecting",
			 r->host, r->o.port, why);
		r->state = RPC_DOWN;
		r->down_ms = clock_mono_ms() - silent_ms;
		r->down_said = 0;
	}
	if (r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
	seal_free(r->tx); /* the reader drops rx at its next connection */
	r->tx = NULL;
	fail_pending(r, r->state == RPC_SHUTDOWN ? -ESHUTDOWN : RETRY);
	check_state(r);
	pthread_cond_broadcast(&r->state_cv);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_unlock(&r->send_mu);
}

/* Hand a reply to its caller. Returns when its request was sent (0 when
 * nobody waits for it any more). */
static int64_t complete(struct rpc *r, const struct wire_hdr *h,
			uint8_t *payload)
{
	struct pending **pp, *p;
	int64_t sent = 0;

	pthread_mutex_lock(&r->mu);
	for (pp = &r->pending; (p = *pp); pp = &p->next)
		if (p->id == h->id)
			break;
	if (p) {
		CAIRN_ASSERT(!p->done && (!p->intr || p->intr->p == p));
		*pp = p->next;
		if (p->intr)
			p->intr->p = NULL;
		p->status = h->status;
		p->answered = 1;
		p->buf = payload;
		p->len = h->len;
		p->done = 1;
		sent = p->sent_ms;
		pthread_cond_signal(&p->cv);
		payload = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	if (payload || !p)
		log_debug("reply to unknown request id %u", h->id);
	free(payload);
	return sent;
}

static long ms_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000L +
	       (now.tv_nsec - t->tv_nsec) / 1000000L;
}

/* Send a PING unless a sender holds send_mu (one stuck in send(): then
 * the server is not reading either, and silence will tell). */
static void send_ping(struct rpc *r, int fd, int64_t now)
{
	if (r->ping_ms || pthread_mutex_trylock(&r->send_mu))
		return;
	if (send_counted(r, fd, r->tx, OP_PING, 0, PING_ID, NULL, NULL) == 0) {
		r->ping_ms = now;
		ST_ADD(r->st.op[OP_PING].calls, 1);
	}
	pthread_mutex_unlock(&r->send_mu);
}

/*
 * The promises' lease (lib/proto.h). The server waits CAIRN_CB_ACK_MS for
 * a break's acknowledgement from the time it wrote the break: a break
 * written before the reply to one of our requests arrives before that
 * reply, one written after it waits from after we sent the request. So
 * while less than CAIRN_CB_LEASE_MS has passed since we sent the latest
 * request it answered, it has given up on no break of ours. Past that,
 * on_lapse drops every promise, as a reconnect does.
 */
static void lease_lapse(struct rpc *r, const char *why)
{
	if (!r->o.on_lapse || r->lapsed)
		return;
	r->lapsed = 1;
	ST_ADD(r->st.lapses, 1);
	r->o.on_lapse(r->o.arg, why);
}

/* A reply to a request sent at sent_ms came (now): the lease runs from
 * there, if that is later. */
static void lease_renew(struct rpc *r, int64_t sent_ms, int64_t now)
{
	if (sent_ms > r->lease_ms)
		r->lease_ms = sent_ms;
	if (r->lapsed && now - r->lease_ms < CAIRN_CB_LEASE_MS) {
		r->lapsed = 0;
		log_info("server %s:%d answers again: new promises are trusted",
			 r->host, r->o.port);
	}
}

/* Lapse once the lease is over; ask for a renewal once it is due.
 * Returns how long until either is due next (at most cap ms). */
static int lease_tick(struct rpc *r, int fd, int64_t now, int cap)
{
	int64_t quiet = now - r->lease_ms, next;

	if (!r->o.on_lapse)
		return cap;
	if (!r->lapsed && quiet >= CAIRN_CB_LEASE_MS) {
		char why[64];

		log_warn("server %s:%d has not answered for %lld ms: cached "
			 "status and data are no longer trusted until it does",
			 r->host, r->o.port, (long long)quiet);
		snprintf(why, sizeof(why), "no answer for %lld ms",
			 (long long)quiet);
		lease_lapse(r, why);
	}
	if (r->lapsed)
		return cap; /* nothing is promised: nothing to renew */
	if (quiet >= CAIRN_CB_RENEW_MS)
		send_ping(r, fd, now);
	next = r->ping_ms ? CAIRN_CB_LEASE_MS - quiet
			  : CAIRN_CB_RENEW_MS - quiet;
	if (next < 1)
		next = 1;
	return next < cap ? (int)next : cap;
}

/*
 * Wait until fd is readable, checking liveness every HEARTBEAT_MS.
 * Returns 0 when a frame can be read, or a negative errno (-ETIMEDOUT:
 * the server is silent while calls wait for it).
 */
static int wait_readable(struct rpc *r, int fd)
{
	/* The reader blocks here: callers waiting on mu or send_mu would
	 * wait for the server. */
	LOCK_ASSERT_NOT_HELD(&r->mu);
	LOCK_ASSERT_NOT_HELD(&r->send_mu);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int wait_ms = lease_tick(r, fd, clock_mono_ms(), r->beat_ms);
		int n = poll(&pfd, 1, wait_ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n < 0 || ms_since(&r->last_rx) < r->beat_ms)
			continue;

		pthread_mutex_lock(&r->mu);
		int waiting = r->pending != NULL;
		pthread_mutex_unlock(&r->mu);
		if (!waiting) {
			clock_gettime(CLOCK_MONOTONIC, &r->last_rx);
			continue;
		}
		if (ms_since(&r->last_rx) >= r->dead_ms)
			return -ETIMEDOUT;
		send_ping(r, fd, clock_mono_ms());
	}
}

/* Reader side while UP: returns when the connection is gone. */
static void read_loop(struct rpc *r, int fd)
{
	clock_gettime(CLOCK_MONOTONIC, &r->last_rx);
	r->ping_ms = 0;
	/* Every promise before this connection is gone (on_reconnect). */
	r->lease_ms = r->hello_ms;
	r->lapsed = 0;
	for (;;) {
		struct wire_hdr h;
		uint8_t *payload = NULL;
		int64_t now;
		int ret = wait_readable(r, fd);

		if (ret == -ETIMEDOUT) {
			char why[64];
			snprintf(why, sizeof(why), "no answer for %d s",
				 r->dead_ms / 1000);
			conn_lost(r, why, r->dead_ms);
			return;
		}
		if (ret == 0)
			ret = frame_read(fd, r->rx, &h, &payload);
		if (ret == 0 && (h.status > 0 || h.status < -4095)) {
			free(payload);
			conn_lost(r, "server sent an invalid status", 0);
			return;
		}
		clock_gettime(CLOCK_MONOTONIC, &r->last_rx);
		now = clock_mono_ms();
		/* A frame that came after the lease ended finds it lapsed:
		 * a reply is handed over only after that (on_lapse moves the
		 * break sequence its caller compares with). */
		lease_tick(r, fd, now, 0);

		if (ret == 0)
			count_in(r, &h, payload);
		if (ret) {
			conn_lost(r, ret == -EPIPE ? "connection closed" :
				     ret == -EMSGSIZE ? "oversized frame" :
				     ret == -EBADMSG ? "a frame from the server "
						       "does not verify (altered "
						       "on the way?)" :
							strerror(-ret), 0);
			return;
		}
		if (h.flags & WF_PUSH) {
			if (r->o.on_push)
				r->o.on_push(r->o.arg, h.op, h.id, payload,
					     h.len);
			free(payload);
		} else if ((h.flags & WF_REPLY) && h.id == PING_ID) {
			free(payload);
			if (r->ping_ms)
				lease_renew(r, r->ping_ms, now);
			r->ping_ms = 0;
		} else if (h.flags & WF_REPLY) {
			int64_t sent = complete(r, &h, payload);

			if (sent)
				lease_renew(r, sent, now);
		} else {
			free(payload);
			conn_lost(r, "server sent a frame that is neither "
				     "reply nor push", 0);
			return;
		}
	}
}

/* Reader side while DOWN: returns once UP again (or on shutdown). */
static void reconnect_loop(struct rpc *r)
{
	char err[256];
	struct cairn_attr root;
	uint64_t epoch;
	uint32_t said;
	int logged = 0;

	for (;;) {
		pthread_mutex_lock(&r->mu);
		if (r->state == RPC_SHUTDOWN) {
			pthread_mutex_unlock(&r->mu);
			return;
		}
		pthread_mutex_unlock(&r->mu);

		struct seal *tx, *rx;
		int fd = dial(r, &epoch, &root, &said, &tx, &rx, err,
			      sizeof(err));
		if (fd >= 0) {
			pthread_mutex_lock(&r->send_mu);
			pthread_mutex_lock(&r->mu);
			int changed = epoch != r->epoch;
			seal_free(r->rx);
			r->rx = rx;
			if (r->state == RPC_SHUTDOWN) {
				close(fd);
				seal_free(tx);
			} else {
				seal_free(r->tx);
				r->tx = tx;
				r->fd = fd;
				r->epoch = epoch;
				r->said_flags = said;
				r->state = RPC_UP;
			}
			check_state(r);
			pthread_cond_broadcast(&r->state_cv);
			pthread_mutex_unlock(&r->mu);
			pthread_mutex_unlock(&r->send_mu);
			ST_ADD(r->st.reconnects, 1);
			log_info("reconnected to server %s:%d%s", r->host,
				 r->o.port,
				 changed ? " (server restarted)" : "");
			if (r->o.on_reconnect)
				r->o.on_reconnect(r->o.arg, changed);
			return;
		}
		if (!logged++)
			log_warn("%s; retrying every %d ms", err, RECONNECT_MS);
		struct timespec ts;
		clock_deadline(CLOCK_REALTIME, RECONNECT_MS, &ts);
		pthread_mutex_lock(&r->mu);
		if (r->state != RPC_SHUTDOWN)
			pthread_cond_timedwait(&r->state_cv, &r->mu, &ts);
		pthread_mutex_unlock(&r->mu);
	}
}

static void *reader_main(void *arg)
{
	struct rpc *r = arg;

	reader_of = r;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		enum rpc_state st = r->state;
		int fd = r->fd;
		pthread_mutex_unlock(&r->mu);

		if (st == RPC_SHUTDOWN)
			return NULL;
		if (st == RPC_UP) {
			read_loop(r, fd);
			/* The server drops our promises with the connection
			 * (or did already): none stands until the next. (At
			 * shutdown nobody asks any more.) */
			pthread_mutex_lock(&r->mu);
			st = r->state;
			pthread_mutex_unlock(&r->mu);
			if (st != RPC_SHUTDOWN)
				lease_lapse(r, "connection lost");
		} else
			reconnect_loop(r);
	}
}

int rpc_start(struct rpc *r)
{
	int ret = pthread_create(&r->reader, NULL, reader_main, r);
	if (ret)
		return -ret;
	r->started = 1;
	return 0;
}

void rpc_destroy(struct rpc *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->send_mu);
	pthread_mutex_lock(&r->mu);
	r->state = RPC_SHUTDOWN;
	if (r->fd >= 0)
		shutdown(r->fd, SHUT_RDWR); /* wakes the reader */
	fail_pending(r, -ESHUTDOWN);
	pthread_cond_broadcast(&r->state_cv);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_unlock(&r->send_mu);
	if (r->started)
		pthread_join(r->reader, NULL);
	if (r->fd >= 0)
		close(r->fd);
	seal_free(r->tx);
	seal_free(r->rx);
	seal_wipe(r->o.key, sizeof(r->o.key));
	pthread_cond_destroy(&r->state_cv);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->send_mu);
	free(r);
}

/*
 * Wait (r->mu held) until the connection is UP, at most until `dl`
 * (CLOCK_REALTIME), and at most until the server has been out of reach
 * for --timeout: from then on a call fails at once instead of waiting the
 * whole timeout again (as AFS fails calls to a server it marked down), so
 * a close() that sends pages and then times, or a program that goes
 * through a tree, is not made to wait once for each call.
 * Returns 0, -EIO on timeout, -EINTR when interrupted or -ESHUTDOWN.
 */
static int wait_up(struct rpc *r, const struct timespec *dl,
		   const struct rpc_intr *ir)
{
	check_state(r);
	while (r->state == RPC_DOWN) {
		int64_t left = r->o.down_timeout_s * 1000LL -
			       (clock_mono_ms() - r->down_ms);
		struct timespec now, until = *dl;

		if (ir && ir->fired)
			return -EINTR;
		if (left <= 0) {
			if (!r->down_said++)
				log_warn("server %s:%d out of reach for %d s: "
					 "calls fail with EIO at once until "
					 "it answers again", r->host,
					 r->o.port, r->o.down_timeout_s);
			return -EIO;
		}
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > dl->tv_sec ||
		    (now.tv_sec == dl->tv_sec && now.tv_nsec >= dl->tv_nsec))
			return -EIO;
		if (left < (int64_t)(dl->tv_sec - now.tv_sec) * 1000)
			clock_deadline(CLOCK_REALTIME, (int)left, &until);
		pthread_cond_timedwait(&r->state_cv, &r->mu, &until);
	}
	return r->state == RPC_SHUTDOWN ? -ESHUTDOWN : 0;
}

int rpc_call(struct rpc *r, uint16_t op, const struct wbuf *req,
	     struct rpc_reply *rep)
{
	return rpc_call_intr(r, op, req, rep, NULL);
}

void rpc_intr_init(struct rpc_intr *ir, struct rpc *r)
{
	ir->r = r;
	ir->p = NULL;
	ir->fired = 0;
}

void rpc_interrupt(struct rpc_intr *ir)
{
	struct rpc *r = ir->r;
	struct pending **pp, *p;

	/* libfuse's lock on the request is held: take only mu. */
	LOCK_ASSERT_NOT_HELD(&r->mu);
	pthread_mutex_lock(&r->mu);
	ir->fired = 1;
	p = ir->p;
	if (p) {
		for (pp = &r->pending; *pp && *pp != p; pp = &(*pp)->next)
			;
		CAIRN_ASSERT(*pp && !p->done);
		if (*pp)
			*pp = p->next;
		ir->p = NULL;
		p->status = -EINTR;
		p->done = 1;
		pthread_cond_signal(&p->cv);
	}
	pthread_cond_broadcast(&r->state_cv); /* a call waiting for UP */
	pthread_mutex_unlock(&r->mu);
}

/* A call ended: count it as answered (with its round trip from `sent`)
 * or as failed. */
static void count_call(struct rpc *r, uint16_t op, const struct pending *p,
		       const struct timespec *sent)
{
	struct timespec now;
	uint64_t us;

	if (!p->answered) {
		ST_ADD(r->st.failed, 1);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (uint64_t)((now.tv_sec - sent->tv_sec) * 1000000L +
			(now.tv_nsec - sent->tv_nsec) / 1000L);
	ST_ADD(r->st.calls, 1);
	ST_ADD(r->st.us_total, us);
	st_max(&r->st.us_max, us);
	if (op < OP__COUNT) {
		ST_ADD(r->st.op[op].calls, 1);
		ST_ADD(r->st.op[op].us_total, us);
		st_max(&r->st.op[op].us_max, us);
	}
}

int rpc_call_intr(struct rpc *r, uint16_t op, const struct wbuf *req,
		  struct rpc_reply *rep, struct rpc_intr *ir)
{
	return rpc_call_cred(r, op, NULL, req, rep, ir);
}

int rpc_call_cred(struct rpc *r, uint16_t op, const struct wbuf *cred,
		  const struct wbuf *req, struct rpc_reply *rep,
		  struct rpc_intr *ir)
{
	struct pending p = { 0 };
	struct timespec dl, sent = { 0 };
	void *cookie = NULL;
	int hooked, ret;

	/* The reply comes through the reader thread, and mu and send_mu are
	 * taken below. The callers' own locks are checked by the callers
	 * (fs_call: no reply section is open on this thread). */
	CAIRN_ASSERT(reader_of != r);
	LOCK_ASSERT_NOT_HELD(&r->mu);
	LOCK_ASSERT_NOT_HELD(&r->send_mu);
	if (rep) {
		rep->buf = NULL;
		rep->len = 0;
	}
	if (req && req->err)
		return req->err;
	if (cred && cred->err)
		return cred->err;
	hooked = r->call_begin && msg_has(op, MSG_CHANGES);
	if (hooked)
		cookie = r->call_begin(r->call_arg, op, req);
	pthread_cond_init(&p.cv, NULL);
	clock_deadline(CLOCK_REALTIME, r->o.down_timeout_s * 1000, &dl);
	for (;;) {
		/* Wait for UP holding only mu (the reconnect needs send_mu),
		 * then take the locks in order and check again. */
		pthread_mutex_lock(&r->mu);
		ret = wait_up(r, &dl, ir);
		pthread_mutex_unlock(&r->mu);
		if (ret)
			break;
		pthread_mutex_lock(&r->send_mu);
		pthread_mutex_lock(&r->mu);
		if (r->state != RPC_UP) {
			pthread_mutex_unlock(&r->mu);
			pthread_mutex_unlock(&r->send_mu);
			continue;
		}
		check_state(r);
		if (p.id == 0) { /* first send; a resend keeps its id */
			p.id = r->next_id++;
			if (p.id == PING_ID)
				p.id = r->next_id++;
		}
		CAIRN_ASSERT(p.id != PING_ID);
		if (ir && ir->fired) {
			pthread_mutex_unlock(&r->mu);
			pthread_mutex_unlock(&r->send_mu);
			ret = -EINTR;
			break;
		}
		p.done = 0;
		p.answered = 0;
		p.intr = ir;
		if (ir)
			ir->p = &p;
		p.sent_ms = clock_mono_ms(); /* before it can be answered */
		p.next = r->pending;
		r->pending = &p;
		int fd = r->fd;
		pthread_mutex_unlock(&r->mu);
		clock_gettime(CLOCK_MONOTONIC, &sent);
		if (send_counted(r, fd, r->tx, op, cred ? WF_CRED : 0, p.id,
				 cred, req))
			shutdown(fd, SHUT_RDWR); /* the reader cleans up */
		pthread_mutex_unlock(&r->send_mu);

		pthread_mutex_lock(&r->mu);
		while (!p.done)
			pthread_cond_wait(&p.cv, &r->mu);
		pthread_mutex_unlock(&r->mu);
		if (p.status != RETRY) {
			ret = p.status;
			break;
		}
	}
	pthread_cond_destroy(&p.cv);
	if (hooked)
		r->call_end(r->call_arg, cookie);
	count_call(r, op, &p, &sent);
	if (ret == 0 && rep) {
		rep->buf = p.buf;
		rep->len = p.len;
	} else {
		free(p.buf);
	}
	return ret;
}

int rpc_hello_flag(struct rpc *r, uint32_t flag)
{
	return r && (__atomic_load_n(&r->rep_flags, __ATOMIC_RELAXED) & flag);
}

int rpc_read_only(struct rpc *r)
{
	return rpc_hello_flag(r, HELLO_REP_RO);
}

int rpc_root_ok(struct rpc *r)
{
	return rpc_hello_flag(r, HELLO_REP_ROOT);
}

int rpc_send_ack(struct rpc *r, uint16_t op, uint32_t id)
{
	int ret;

	/* send_mu may be held by a sender the server stopped reading from
	 * until we read its replies. */
	CAIRN_ASSERT(reader_of != r);
	LOCK_ASSERT_NOT_HELD(&r->send_mu);
	LOCK_ASSERT_NOT_HELD(&r->mu);
	pthread_mutex_lock(&r->send_mu);
	pthread_mutex_lock(&r->mu);
	int fd = r->state == RPC_UP ? r->fd : -1;
	ret = r->state == RPC_SHUTDOWN ? -ESHUTDOWN : fd < 0 ? -ENOTCONN : 0;
	pthread_mutex_unlock(&r->mu);
	if (!ret && send_counted(r, fd, r->tx, op, WF_REPLY, id, NULL, NULL)) {
		shutdown(fd, SHUT_RDWR); /* the reader cleans up */
		ret = -ENOTCONN;
	}
	pthread_mutex_unlock(&r->send_mu);
	return ret;
}

void rpc_set_call_hook(struct rpc *r,
		       void *(*begin)(void *arg, uint16_t op,
				      const struct wbuf *req),
		       void (*end)(void *arg, void *cookie), void *arg)
{
	CAIRN_ASSERT(!r->started);
	r->call_begin = begin;
	r->call_end = end;
	r->call_arg = arg;
}

int rpc_update_hello_flags(struct rpc *r, uint32_t mask, uint32_t value)
{
	int stale;

	CAIRN_ASSERT(reader_of != r);
	pthread_mutex_lock(&r->mu);
	r->hello_flags = (r->hello_flags & ~mask) | (value & mask);
	stale = r->state == RPC_UP &&
		((r->said_flags ^ r->hello_flags) & mask) != 0;
	pthread_mutex_unlock(&r->mu);
	if (stale)
		conn_lost(r, "HELLO flags changed", 0);
	return stale;
}

void rpc_reply_free(struct rpc_reply *rep)
{
	free(rep->buf);
	rep->buf = NULL;
	rep->len = 0;
}

void rpc_get_stats(struct rpc *r, struct rpc_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned op = 0; op < OP__COUNT; op++) {
		const struct rpc_op_stats *a = &r->st.op[op];
		struct rpc_op_stats *b = &out->op[op];

		b->calls = ST_GET(a->calls);
		b->bytes_out = ST_GET(a->bytes_out);
		b->bytes_in = ST_GET(a->bytes_in);
		b->us_total = ST_GET(a->us_total);
		b->us_max = ST_GET(a->us_max);
	}
	out->calls = ST_GET(r->st.calls);
	out->us_total = ST_GET(r->st.us_total);
	out->us_max = ST_GET(r->st.us_max);
	out->failed = ST_GET(r->st.failed);
	out->bytes_out = ST_GET(r->st.bytes_out);
	out->bytes_in = ST_GET(r->st.bytes_in);
	out->pushes = ST_GET(r->st.pushes);
	out->read_bytes = ST_GET(r->st.read_bytes);
	out->reconnects = ST_GET(r->st.reconnects);
	out->lapses = ST_GET(r->st.lapses);
	pthread_mutex_lock(&r->mu);
	out->connected = r->state == RPC_UP;
	for (const struct pending *p = r->pending; p; p = p->next)
		out->waiting++;
	pthread_mutex_unlock(&r->mu);
}

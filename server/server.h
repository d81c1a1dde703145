/*
 * server.h - the Cairn file server: listener, connections, worker pool.
 *
 * server_start() opens the store, listens and starts an accept thread and
 * a pool of worker threads. Each accepted connection gets a reader thread
 * (frames in, docs/PROTOCOL.md "Frames" rules enforced, requests queued to
 * the pool) and a writer thread (drains what could not be sent at once).
 * Workers run requests one way: delivery admits them (deliver.h), their
 * handler executes them (handlers.h), delivery sends the outcome; so
 * requests of one client run concurrently and their replies leave in any
 * order.
 *
 * A client's frames are requests, except CB_BREAK acknowledgements
 * (docs/PROTOCOL.md), which the reader hands to the callback table
 * itself: they are read even when every worker is busy. An expiry thread
 * times out acknowledgements (callback.h, cb_expire): a client that stays
 * silent loses its promises and its connection. It also frees the orphans
 * of clients gone for longer than the grace period (orphan.h).
 *
 * Connections (struct conn) are shared by the reader, the writer, every
 * in-flight request and every callback break being delivered to them, so
 * they are reference counted and torn down in two phases: conn_fail()
 * marks the connection closing (no more sends accepted, reader woken),
 * the reader drains in-flight requests, drops the connection's callback
 * promises and its own reference; the last conn_put() closes and frees.
 */
#ifndef CAIRN_SERVER_H
#define CAIRN_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/wire.h"

struct server;
struct conn;
struct cb_client;
struct drc;
struct drc_client;

struct server_opts {
	const char *data_dir; /* copied */
	const char *host;     /* "" or NULL = every address */
	int port;             /* 0 = any free port */
	int workers;          /* 0 = default (16) */
	/* Seconds an orphan's holder may stay disconnected before its
	 * orphans are freed; 0 = default (orphan.h, ORPHAN_GRACE_S). */
	unsigned orphan_grace_s;
	/* Milliseconds a write token's holder has to return it once
	 * recalled; 0 = default (token.h, TOK_RECALL_TIMEOUT_MS). */
	unsigned recall_timeout_ms;
	/* Milliseconds a client with no connection keeps its locks, and
	 * after the start only reclaims are granted (lock.h); used when
	 * lock_set has SRV_LOCK_LEASE / SRV_LOCK_GRACE, else the defaults
	 * (0 is a valid value). */
	unsigned lock_lease_ms, lock_grace_ms;
	unsigned lock_set;
	/* The cell key file (lib/seal.h); NULL = DATA/cell.key, created
	 * with a new key at the first start. */
	const char *key_file;
	/* Further keys, each a read-only export: a client holding one gets
	 * -EROFS for every change (at most SRV_MAX_RO_KEYS). */
	const char *ro_key_files[16];
	int n_ro_keys;
	/* Seconds a new connection has to authenticate and say HELLO;
	 * 0 = default (SRV_HANDSHAKE_TIMEOUT_S). */
	unsigned handshake_timeout_s;
	/* Keep uid 0 in requests' credentials root (default: squashed to
	 * nobody, perm.h). */
	int no_root_squash;
};
#define SRV_MAX_RO_KEYS 16
#define SRV_HANDSHAKE_TIMEOUT_S 10
enum { SRV_LOCK_LEASE = 1, SRV_LOCK_GRACE = 2 };

/*
 * Open the store, listen and start serving. Returns 0 with *out set, or a
 * negative errno with err filled ("data directory D is in use by another
 * cairn serve" for -EBUSY, "cannot listen on H:P: reason", ...).
 */
int server_start(const struct server_opts *o, struct server **out, char *err,
		 size_t errsz);
/* The port actually listened on. */
int server_port(const struct server *s);
/*
 * Stop: close the listener, close every connection, wait for in-flight
 * requests, stop the workers, close the store and free s.
 */
void server_stop(struct server *s);
/* Open connections and distinct client ids among them (for STATUS). */
void server_counts(struct server *s, long *conns, long *clients);

void conn_get(struct conn *c);
void conn_put(struct conn *c);

/*
 * Send the complete frame(s) in w. Never blocks on the peer: what the
 * socket does not take at once is queued for the connection's writer
 * thread; the queue takes ownership of w's buffer (w is then empty and
 * may be reused). Returns 0, -EPIPE if the connection is closing, or
 * another negative errno (the connection is then failed). Frames from
 * different threads never interleave.
 */
int conn_send(struct conn *c, struct wbuf *w);
/* Push op (CB_RECALL, CB_LOCKWAKE: a list of FIDs) naming one fid, with
 * a fresh push id: as conn_send. */
int conn_push_fid(struct conn *c, uint16_t op, const struct cairn_fid *fid);

/*
 * Close the connection because of `reason` (printf format): logs one line
 * "peer IP:PORT: <reason>, closing connection" (only for the first call on
 * a connection) and stops reading; replies already queued are still
 * flushed (bounded by the send timeout).
 */
void conn_fail(struct conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A request's reply is parked until its callback breaks are acknowledged,
 * and a resend until its original is answered (deliver.c): conn_park
 * keeps c alive and its promises in place (the reader does not release
 * the connection) until the matching conn_unpark. conn_park takes no
 * lock (it may run under the duplicate request cache's) and is called
 * only by a request of c in flight.
 */
void conn_park(struct conn *c);
void conn_unpark(struct conn *c);

/* "ip:port" of the peer; valid for the life of c. */
const char *conn_peer(const struct conn *c);
/* The connection's callback table entry (callback.h). */
struct cb_client *conn_cb_client(struct conn *c);
/* 1 once HELLO succeeded. */
int conn_hello_done(const struct conn *c);
/* 1 if the connection's key is a read-only export (set at AUTH). */
int conn_read_only(const struct conn *c);

/* The server's duplicate request cache (server/drc.h). */
struct drc *server_drc(struct server *s);
/* The connection's cache handle (NULL: the client did not say
 * HELLO_REPLAY). Set once, during HELLO; the conn owns the reference. */
struct drc_client *conn_drc(struct conn *c);
void conn_set_drc(struct conn *c, struct drc_client *dc);
/* Record the client id from HELLO and mark the handshake done. */
void conn_set_client_id(struct conn *c, const uint8_t id[16]);
/* The client id from HELLO (16 bytes, valid for the life of c); only
 * meaningful once conn_hello_done. */
const uint8_t *conn_client_id(const struct conn *c);
/* The connection's client in the lock table (lock.h); NULL before HELLO
 * or when the table was out of memory. */
struct lk_client *conn_lk_client(const struct conn *c);

#endif

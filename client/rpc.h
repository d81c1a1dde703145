/*
 * rpc.h - the client's multiplexed connection to one Cairn server.
 *
 * One TCP connection carries many requests at once; a reader thread
 * matches replies to waiting callers by id and hands server pushes
 * (callback breaks) to a callback. It keeps the promises' lease
 * (lib/proto.h): it PINGs a quiet server, and tells on_lapse when the
 * promises can no longer be trusted. When the connection drops, the rpc
 * reconnects by itself (retrying every 500 ms), redoes HELLO and tells the
 * owner through on_reconnect; calls made meanwhile wait for the new
 * connection and are then sent (again). A call that cannot be sent within
 * `down_timeout_s` fails with -EIO.
 *
 * Life cycle: rpc_connect() (synchronous, no threads: safe to fork after)
 * -> rpc_start() (starts the reader/reconnect thread) -> rpc_call()* ->
 * rpc_destroy().
 */
#ifndef CAIRN_RPC_H
#define CAIRN_RPC_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"
#include "../lib/wire.h"

struct rpc;

struct rpc_opts {
	const char *host;        /* copied */
	int port;
	int connect_timeout_ms;  /* for each connection attempt */
	int down_timeout_s;      /* how long a call waits for a lost server */
	uint8_t client_id[16];   /* stable for the life of the mount */
	uint8_t key[32];         /* the cell key (lib/seal.h); wiped by
				  * rpc_connect from its copy at destroy */
	uint32_t hello_flags;    /* HELLO_* (lib/proto.h); HELLO_CB_ACK
				  * promises an rpc_send_ack for every
				  * CB_BREAK push */
	/* Called on the reader thread for every WF_PUSH frame; id is the
	 * frame's id, which a CB_BREAK's acknowledgement must carry
	 * (rpc_send_ack). payload is valid only during the call. Must not
	 * call rpc_call() or rpc_send_ack(). */
	void (*on_push)(void *arg, uint16_t op, uint32_t id,
			const uint8_t *payload, size_t len);
	/* Called on the reader thread after a reconnect; epoch_changed is 1
	 * when the server restarted. Every callback promise is gone either
	 * way. Must not call rpc_call(). */
	void (*on_reconnect)(void *arg, int epoch_changed);
	/* Called on the reader thread when every callback promise has to be
	 * dropped: no answer renewed the lease (lib/proto.h,
	 * CAIRN_CB_LEASE_MS) or the connection was lost. Once per lapse; a
	 * reply that comes in time renews the lease, and promises it carries
	 * stand again. why says which ("no answer for 2003 ms", logged as
	 * a warning already, or "connection lost"). NULL: promises are not
	 * leased (no idle PINGs). Must not call rpc_call(). */
	void (*on_lapse)(void *arg, const char *why);
	void *arg;
};

/*
 * Connect and say HELLO. On success *out is a new rpc and *root the root
 * directory's attributes. On failure returns a negative errno and err names
 * the address and the reason ("cannot reach server 10.0.0.5:7070:
 * connection refused").
 */
int rpc_connect(const struct rpc_opts *o, struct rpc **out,
		struct cairn_attr *root, char *err, size_t errsz);
/* 1 if the server said our key is a read-only export (HELLO_REP_RO):
 * every change would be refused with -EROFS. */
int rpc_read_only(struct rpc *r);
/* The server lets root be root (HELLO_REP_ROOT, no root squash). */
int rpc_root_ok(struct rpc *r);
/* The server's HELLO reply had flag (HELLO_REP_*; SA_SYNC and SA_STEPS
 * in SETATTR are taken only by servers that say so). */
int rpc_hello_flag(struct rpc *r, uint32_t flag);
/* Start the reader thread. Returns 0 or a negative errno. */
int rpc_start(struct rpc *r);
/* Close the connection, fail waiting calls with -ESHUTDOWN, join threads,
 * free. */
void rpc_destroy(struct rpc *r);

struct rpc_reply {
	uint8_t *buf; /* payload, owned; free with rpc_reply_free */
	size_t len;
};

/*
 * Send request `op` with payload req (may be NULL for an empty payload)
 * and wait for its reply. Returns the server's status (0 or a negative
 * errno from the server) or a transport error (-EIO when the server stayed
 * unreachable for down_timeout_s, -ESHUTDOWN after rpc_destroy). On 0,
 * rep holds the reply payload; on error rep is empty. rep may be NULL when
 * the caller does not need the payload.
 */
int rpc_call(struct rpc *r, uint16_t op, const struct wbuf *req,
	     struct rpc_reply *rep);
void rpc_reply_free(struct rpc_reply *rep);

/*
 * Interruptible calls (FUSE INTERRUPT, i.e. a signal to the application).
 * The caller owns a struct rpc_intr that outlives the call, passes it to
 * rpc_call_intr(), and may call rpc_interrupt() on it from any thread, any
 * number of times, until the call has returned: the call then returns
 * -EINTR at once (a reply that comes later is dropped). A change the server
 * already received may still happen.
 */
struct rpc_intr {
	struct rpc *r;
	void *p;    /* the waiting call, guarded by the rpc's lock */
	int fired;  /* guarded by the rpc's lock */
};
void rpc_intr_init(struct rpc_intr *ir, struct rpc *r);
int rpc_call_intr(struct rpc *r, uint16_t op, const struct wbuf *req,
		  struct rpc_reply *rep, struct rpc_intr *ir);
/* rpc_call_intr on behalf of a user: cred is the credential block
 * (docs/PROTOCOL.md "Credentials") sent before req, with WF_CRED. */
int rpc_call_cred(struct rpc *r, uint16_t op, const struct wbuf *cred,
		  const struct wbuf *req, struct rpc_reply *rep,
		  struct rpc_intr *ir);
void rpc_interrupt(struct rpc_intr *ir);

/*
 * Answer push `id` of opcode op (a CB_BREAK acknowledgement,
 * docs/PROTOCOL.md): a 16-byte frame with WF_REPLY and an empty payload.
 * Does not wait for anything but the socket (it takes the send lock, so
 * it may wait behind a large request being written). When the connection
 * is down the ack is dropped: the server has dropped us and our promises
 * with it, and the reconnect invalidates everything anyway. Returns 0,
 * -ENOTCONN when dropped, or -ESHUTDOWN. Not for the reader thread.
 */
int rpc_send_ack(struct rpc *r, uint16_t op, uint32_t id);

/*
 * Calls that change server state (MSG_CHANGES) in progress, for the
 * callback notifier (notify.h): begin(arg, op, req) runs on the calling
 * thread before the request is first sent, and its result is handed to
 * end(arg, cookie) when the call returns, whatever its outcome (a resent
 * call stays in progress across the reconnect). Neither may call into the
 * rpc or wait for the server. Set once, before rpc_start.
 */
void rpc_set_call_hook(struct rpc *r,
		       void *(*begin)(void *arg, uint16_t op,
				      const struct wbuf *req),
		       void (*end)(void *arg, void *cookie), void *arg);

/*
 * Change the HELLO flags bits in `mask` to `value` for every HELLO from
 * now on. When the current connection said other flags, it is closed so
 * that the reader reconnects with the new ones (every promise is lost, as
 * after any reconnect). Not for the reader thread. Returns 1 when a
 * reconnect was started, else 0.
 */
int rpc_update_hello_flags(struct rpc *r, uint32_t mask, uint32_t value);

/*
 * Counters, for `cairn status MOUNTPOINT` (client/ctl.h). Each is updated
 * with a relaxed atomic add where the event happens, so reading them
 * takes no lock and never waits for the network; a copy is consistent
 * per counter, not across counters.
 *
 * Per request opcode: calls answered by the server (whatever the status;
 * a resent call counts once), request frame bytes written (headers and
 * resends included), reply frame bytes read, and the round trip of the
 * answered calls: from the last send of the request to its reply waking
 * the caller, in microseconds (total and longest). HELLO counts each
 * connection's handshake, PING each heartbeat and lease renewal (no
 * round trip is timed for either).
 */
struct rpc_op_stats {
	uint64_t calls;
	uint64_t bytes_out;
	uint64_t bytes_in;
	uint64_t us_total;
	uint64_t us_max;
};

struct rpc_stats {
	struct rpc_op_stats op[OP__COUNT]; /* by opcode; [0] unused */
	uint64_t calls;        /* sum of op[].calls without HELLO and PING */
	uint64_t us_total;     /* round trips of those calls */
	uint64_t us_max;
	uint64_t failed;       /* calls that got no answer: interrupted,
				* server lost past down_timeout_s, shutdown */
	uint64_t bytes_out;    /* every frame written (acks included) */
	uint64_t bytes_in;     /* every frame read (pushes included) */
	uint64_t pushes;       /* WF_PUSH frames read */
	uint64_t read_bytes;   /* file data in successful READ replies */
	uint64_t reconnects;   /* connections re-established */
	uint64_t lapses;       /* times on_lapse ran */
	int connected;         /* 1 while UP */
	unsigned waiting;      /* calls sent and waiting for their reply */
};

/* Copy the counters into *out. Takes mu for a moment (connected, and
 * waiting: one walk of the calls in flight); safe from any thread,
 * including while calls wait. */
void rpc_get_stats(struct rpc *r, struct rpc_stats *out);

#endif

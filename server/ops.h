/*
 * ops.h - the server's request handlers, one per opcode of
 * docs/PROTOCOL.md, dispatched through a table.
 *
 * ops_handle() decodes one request, runs it against the store, breaks the
 * callbacks of other clients for everything it changed, registers
 * promises for the attributes it returns, sends the reply, and counts it.
 * It is called by the connection's reader for HELLO (so nothing else runs
 * before the handshake) and by the worker pool for everything else.
 */
#ifndef CAIRN_OPS_H
#define CAIRN_OPS_H

#include <stdint.h>
#include <time.h>
#include "../lib/wire.h"

struct server;
struct store;
struct cb_table;
struct stats;
struct conn;

/* Server-wide state the handlers use; set up once by server.c, then
 * read-only. Every pointer outlives all calls to ops_handle. */
struct ops_ctx {
	struct server *srv;
	struct store *st;
	struct cb_table *cb;
	struct stats *stats;
	uint8_t server_id[16];
	uint64_t epoch;           /* changes every time the server starts */
	struct timespec started;  /* CLOCK_MONOTONIC */
};

/*
 * Execute the request frame (h, payload of h->len bytes) received on c.
 * Returns 0 when it was answered, or -EPROTO when it was malformed or
 * was a failed handshake: the connection has then been failed (reason
 * logged) and the caller must stop reading from it.
 */
int ops_handle(const struct ops_ctx *ctx, struct conn *c,
	       const struct wire_hdr *h, const uint8_t *payload);

#endif

/*
 * stats.h - the server's counters: per opcode calls and frame bytes in and
 * out, callback breaks, connections. Updates are lock-free atomics so the
 * hot path pays a few relaxed adds; readers see each counter consistent on
 * its own (not a snapshot across counters).
 */
#ifndef CAIRN_STATS_H
#define CAIRN_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct stats;

/* Returns NULL on allocation failure. */
struct stats *stats_create(void);
void stats_destroy(struct stats *s);

/*
 * One request of opcode op: bytes_in is the request frame (header
 * included), bytes_out the reply frame. Opcodes outside the request range
 * count only in the totals.
 */
void stats_op(struct stats *s, unsigned op, size_t bytes_in,
	      size_t bytes_out);
/* One CB_BREAK frame of `records` records and `bytes` bytes was pushed. */
void stats_cb_break(struct stats *s, unsigned records, size_t bytes);
/* A change waited `us` microseconds for its breaks' acknowledgements. */
void stats_cb_ack_wait(struct stats *s, uint64_t us);
/* A client did not acknowledge a break in time and was dropped. */
void stats_cb_ack_timeout(struct stats *s);
/* A connection was accepted (+1) or closed (-1); counts accepted ones for
 * connections_total (the open count is the server's own nconns). */
void stats_conn(struct stats *s, int delta);

/*
 * Print the counters as `key value` lines (docs/PROTOCOL.md, STATUS):
 * op.<name>.calls/bytes_in/bytes_out for every request opcode, rpc.*
 * totals, cb_breaks, cb_break_records, cb_ack_waits, cb_ack_wait_us
 * (total), cb_ack_wait_max_us, cb_ack_timeouts, connections_total.
 */
void stats_print(struct stats *s, FILE *f);

#endif

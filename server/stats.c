/*
 * stats.c - server counters. See stats.h.
 *
 * Every counter is a plain uint64_t updated with relaxed atomic adds: they
 * are statistics, never used to make decisions, so no ordering is needed.
 */
#include <stdlib.h>
#include <ctype.h>
#include "../lib/msg.h"
#include "stats.h"

struct op_counters {
	uint64_t calls, bytes_in, bytes_out;
};

struct stats {
	struct op_counters op[OP__COUNT];
	struct op_counters total;
	uint64_t cb_breaks, cb_break_records, cb_bytes;
	uint64_t cb_ack_waits, cb_ack_wait_us, cb_ack_wait_max_us;
	uint64_t cb_ack_timeouts;
	uint64_t conns_total;
};

#define ADD(field, v) __atomic_add_fetch(&(field), (v), __ATOMIC_RELAXED)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

struct stats *stats_create(void)
{
	return calloc(1, sizeof(struct stats));
}

void stats_destroy(struct stats *s)
{
	free(s);
}

void stats_op(struct stats *s, unsigned op, size_t bytes_in,
	      size_t bytes_out)
{
	if (op > 0 && op < OP__COUNT) {
		ADD(s->op[op].calls, 1);
		ADD(s->op[op].bytes_in, bytes_in);
		ADD(s->op[op].bytes_out, bytes_out);
	}
	ADD(s->total.calls, 1);
	ADD(s->total.bytes_in, bytes_in);
	ADD(s->total.bytes_out, bytes_out);
}

void stats_cb_break(struct stats *s, unsigned records, size_t bytes)
{
	ADD(s->cb_breaks, 1);
	ADD(s->cb_break_records, records);
	ADD(s->cb_bytes, bytes);
}

void stats_cb_ack_wait(struct stats *s, uint64_t us)
{
	uint64_t max = GET(s->cb_ack_wait_max_us);

	ADD(s->cb_ack_waits, 1);
	ADD(s->cb_ack_wait_us, us);
	while (us > max &&
	       !__atomic_compare_exchange_n(&s->cb_ack_wait_max_us, &max, us,
					    0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

void stats_cb_ack_timeout(struct stats *s)
{
	ADD(s->cb_ack_timeouts, 1);
}

void stats_conn(struct stats *s, int delta)
{
	if (delta > 0)
		ADD(s->conns_total, (uint64_t)delta);
}

void stats_print(struct stats *s, FILE *f)
{
	for (unsigned op = 1; op < OP__COUNT; op++) {
		char name[32];
		size_t i;

		/* STATUS keys are lower case: "op.getattr.calls". */
		for (i = 0; msg_name(op)[i] && i < sizeof(name) - 1; i++)
			name[i] = (char)tolower((unsigned char)msg_name(op)[i]);
		name[i] = '\0';
		fprintf(f, "op.%s.calls %llu\n", name,
			(unsigned long long)GET(s->op[op].calls));
		fprintf(f, "op.%s.bytes_in %llu\n", name,
			(unsigned long long)GET(s->op[op].bytes_in));
		fprintf(f, "op.%s.bytes_out %llu\n", name,
			(unsigned long long)GET(s->op[op].bytes_out));
	}
	fprintf(f, "rpc.calls %llu\n", (unsigned long long)GET(s->total.calls));
	fprintf(f, "rpc.bytes_in %llu\n",
		(unsigned long long)GET(s->total.bytes_in));
	fprintf(f, "rpc.bytes_out %llu\n",
		(unsigned long long)GET(s->total.bytes_out));
	fprintf(f, "cb_breaks %llu\n", (unsigned long long)GET(s->cb_breaks));
	fprintf(f, "cb_break_records %llu\n",
		(unsigned long long)GET(s->cb_break_records));
	fprintf(f, "cb_bytes_out %llu\n", (unsigned long long)GET(s->cb_bytes));
	fprintf(f, "cb_ack_waits %llu\n",
		(unsigned long long)GET(s->cb_ack_waits));
	fprintf(f, "cb_ack_wait_us %llu\n",
		(unsigned long long)GET(s->cb_ack_wait_us));
	fprintf(f, "cb_ack_wait_max_us %llu\n",
		(unsigned long long)GET(s->cb_ack_wait_max_us));
	fprintf(f, "cb_ack_timeouts %llu\n",
		(unsigned long long)GET(s->cb_ack_timeouts));
	fprintf(f, "connections_total %llu\n",
		(unsigned long long)GET(s->conns_total));
}

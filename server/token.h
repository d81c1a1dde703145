/*
 * token.h - write tokens: which client may keep changes to a regular file
 * that it has not sent yet (docs/PROTOCOL.md, "Write tokens").
 *
 * A client takes a file's token with WTOKEN. While it holds it, a request
 * of any other client that would read or change the file (its attributes
 * in a reply, its data, a change to it) does not run: it is parked on the
 * token, and the holder is sent CB_RECALL. The holder sends what it kept
 * and answers WTOKEN WT_RETURN; the parked requests then run, in the order
 * they arrived, and see everything the holder had. A holder that does not
 * answer within the recall timeout loses the token (revoked, logged), and
 * so does one whose connection ends; the parked requests then run against
 * what the server has. A WRITE or SETATTR sent under a token it no longer
 * holds is refused (-ECANCELED): the holder never overwrites silently what
 * another client wrote after the revocation.
 *
 * Parked requests hold no thread: the table keeps them (struct tok_wait,
 * embedded in the request) and hands them to the resume callback.
 *
 * Locking: one mutex, a leaf: the table calls nothing (no send, no
 * callback) while holding it (docs/LOCKING.md). Every function may be
 * called from any thread.
 */
#ifndef CAIRN_TOKEN_H
#define CAIRN_TOKEN_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

struct conn;
struct tok_table;

/* How long a recalled holder has to return a token, by default. */
#define TOK_RECALL_TIMEOUT_MS 5000u

/* Embedded in a parked request. */
struct tok_wait {
	struct tok_wait *next;
	/* Set when resumed: the request is one a gate counts; once it has
	 * run again (replied, or parked again), call tok_gate_done. */
	int gated;
};

/* Gates (tok_gate_done) kept at most, and how long one holds at most. */
#define TOK_GATES   64u
#define TOK_GATE_MS 500

/*
 * resume(arg, w): run parked request w again (it is no longer in the
 * table). Called without the table's lock, on the thread that returned,
 * revoked or dropped the token.
 */
struct tok_table *tok_table_create(unsigned recall_timeout_ms,
				   void (*resume)(void *arg,
						  struct tok_wait *w),
				   void *arg);
void tok_table_destroy(struct tok_table *t);

/* Tokens held now (cheap; 0 lets callers skip every other check). */
size_t tok_count(struct tok_table *t);

/*
 * Take fid's token for c. 0: c holds it now (granted, or held already;
 * *fresh says which); 1: another client holds it (park the request with
 * tok_park); -EAGAIN: the table is full (c holds TOK_MAX_PER_CONN, or
 * the server TOK_MAX): the client writes through instead.
 */
int tok_acquire(struct tok_table *t, struct conn *c,
		const struct cairn_fid *fid, int *fresh);
#define TOK_MAX_PER_CONN 65536u
#define TOK_MAX          (1u << 20)

/* 1 if a client other than c holds fid's token. Else 0, and with
 * change (c sends a change of fid) a recalled token c holds counts it:
 * it is revoked only once its holder was silent for the recall timeout.
 * One lookup. */
int tok_other(struct tok_table *t, struct conn *c,
	      const struct cairn_fid *fid, int change);

/* 1 if c holds fid's token. */
int tok_holds(struct tok_table *t, struct conn *c,
	      const struct cairn_fid *fid);

/* Index of the first of fids[0..n) whose token a client other than c
 * holds, or -1. */
int tok_find_other(struct tok_table *t, struct conn *c,
		   const struct cairn_fid *fids, int n);

/*
 * Park w behind fid's token, held by another client than c: returns 1
 * (w is resumed once the token is returned, revoked or dropped; the
 * holder is recalled if it was not yet), or 0 if no other client holds
 * it any more (run the request now).
 */
int tok_park(struct tok_table *t, struct conn *c,
	     const struct cairn_fid *fid, struct tok_wait *w);

/* The connection of a client other than c holding fid's token, with a
 * reference (conn_put it), or NULL. */
struct conn *tok_holder_get(struct tok_table *t, struct conn *c,
			    const struct cairn_fid *fid);

/*
 * A request resumed with w->gated set (parked on fid) has run again.
 * When a token is returned, revoked or dropped with requests parked
 * behind it, its last holder cannot take it again (tok_acquire answers
 * 1, tok_park parks the grant) until those requests have run again, or
 * for TOK_GATE_MS at most: a client rewriting a file in a loop would
 * otherwise starve another client's reader, whose request would park
 * again behind each new grant.
 */
void tok_gate_done(struct tok_table *t, const struct cairn_fid *fid);

/* c gives fid's token back (WT_RETURN, or a grant it cannot use). */
void tok_return(struct tok_table *t, struct conn *c,
		const struct cairn_fid *fid);

/* c's connection ends: it loses every token it holds. */
void tok_conn_gone(struct tok_table *t, struct conn *c);

/* Revoke the tokens whose recall has waited longer than the timeout.
 * Called by the server's expiry thread. */
void tok_expire(struct tok_table *t);

struct tok_stats {
	uint64_t held, granted, recalls, returned, revoked, parked;
};
void tok_get_stats(struct tok_table *t, struct tok_stats *out);

#endif

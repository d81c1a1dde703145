/*
 * orphan.h - orphans whose holder went away (docs/PROTOCOL.md,
 * ORPHAN_DROP).
 *
 * An orphan (server/store.h, "Orphans") is held by the client id of the
 * request that removed its last name and by the other clients that had
 * it cached then (store_orphan_hold), and normally each of them lets go
 * with ORPHAN_DROP; the last one frees it. This table decides when a
 * holder is gone for good: it counts each client id's connections and
 * remembers since when a client id has none. orphan_sweep, run now and
 * then, gives up every hold of a holder (freeing the orphans it was the
 * last holder of) that has had no connection for the grace period, counted
 * from its last disconnect, or from the table's creation (the server's
 * start) for a holder that has not connected since, such as one whose
 * orphans were in the store at start. A client that reconnects with the
 * same id in time keeps its orphans.
 *
 * Times are seconds of a monotonic clock, given by the caller (tests give
 * their own). Entries: one per client id with a connection, and one per
 * client id disconnected less than the grace period ago.
 *
 * Locking: one mutex per table. orphan_sweep holds it while it asks the
 * store to free a holder's orphans, so a client that says HELLO meanwhile
 * (orphan_client_up) waits for that to finish and never loses an orphan
 * after its HELLO succeeded. It is therefore taken before the store's
 * locks, and with no other lock held (docs/LOCKING.md).
 */
#ifndef CAIRN_ORPHAN_H
#define CAIRN_ORPHAN_H

#include <stdint.h>

/* Default grace period: as long as the duplicate request cache keeps a
 * client that has no connection (drc.h, DRC_IDLE_S). */
#define ORPHAN_GRACE_S     600
/* Orphans one sweep frees per holder at most (the rest at the next one),
 * so a sweep never holds up the expiry thread's other work for long. */
#define ORPHAN_SWEEP_MAX   1024

struct store;
struct orphan_table;

/* A table for the orphans of st, grace_s seconds of grace, created at
 * time now. NULL when out of memory. */
struct orphan_table *orphan_table_create(struct store *st, unsigned grace_s,
					 int64_t now);
void orphan_table_destroy(struct orphan_table *t);

/* Client id's HELLO succeeded on a connection: 0, or -ENOMEM (the HELLO
 * then fails). Pairs with one orphan_client_down. */
int orphan_client_up(struct orphan_table *t, const uint8_t id[16]);
/* A connection of client id that orphan_client_up counted is gone (no
 * request of it runs any more) at time now. */
void orphan_client_down(struct orphan_table *t, const uint8_t id[16],
			int64_t now);

/*
 * Give up the holds of holders gone for the grace period (at most
 * ORPHAN_SWEEP_MAX per holder; an orphan goes with its last holder),
 * logging one line per holder that lost some, and forget client ids
 * disconnected longer than that. Does work at most once per second of
 * now; call it as often as you like. Returns the number of holds given
 * up.
 */
uint64_t orphan_sweep(struct orphan_table *t, int64_t now);

#endif

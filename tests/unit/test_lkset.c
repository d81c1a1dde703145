/*
 * test_lkset.c - unit tests for lib/lkset.h: conflicts (types, owners,
 * flock beside POSIX), apply (insert, merge, split, unlock, upgrade,
 * downgrade, *freed, ranges reaching LK_EOF), covers, drop_client, clear,
 * and a randomized run of a few thousand operations checked against a
 * byte-array model after every step, with the set's invariant.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test (tests/run.sh
 * counts them); exit status 1 if any failed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/lkset.h"
#include "../../lib/proto.h"
#include "check.h"

/* Two stand-ins for the server's client records. */
static int client_a, client_b;
#define CA ((const void *)&client_a)
#define CB ((const void *)&client_b)

static struct lkent mk(const void *client, uint64_t owner, uint8_t flock,
		       uint8_t type, uint64_t start, uint64_t end)
{
	struct lkent e;

	memset(&e, 0, sizeof(e));
	e.client = client;
	e.owner = owner;
	e.flock = flock;
	e.type = type;
	e.start = start;
	e.end = end;
	e.pid = 1000 + (uint32_t)owner;
	e.fh = 77;
	return e;
}

static size_t list_len(const struct lkset *s)
{
	size_t n = 0;

	for (const struct lkent *e = s->head; e; e = e->next)
		n++;
	return n;
}

static int same_owner(const struct lkent *a, const struct lkent *b)
{
	return a->client == b->client && a->owner == b->owner &&
	       a->flock == b->flock;
}

/*
 * The documented invariant: s->n is the list's length; every entry is a
 * valid range of LK_RD or LK_WR; one owner's entries of one kind never
 * overlap, and two of the same type never touch. 1 if it holds; otherwise
 * prints why and returns 0.
 */
static int invariant_ok(const struct lkset *s)
{
	size_t len = list_len(s);

	if (len != s->n) {
		fprintf(stderr, "  invariant: n %zu, list length %zu\n",
			s->n, len);
		return 0;
	}
	for (const struct lkent *a = s->head; a; a = a->next) {
		if (a->start > a->end || a->end > (uint64_t)LK_EOF ||
		    (a->type != LK_RD && a->type != LK_WR)) {
			fprintf(stderr, "  invariant: bad entry [%llu, %llu] "
				"type %u\n", (unsigned long long)a->start,
				(unsigned long long)a->end, a->type);
			return 0;
		}
		for (const struct lkent *b = a->next; b; b = b->next) {
			if (!same_owner(a, b))
				continue;
			int ov = a->start <= b->end && b->start <= a->end;
			int to = (a->end < (uint64_t)LK_EOF &&
				  a->end + 1 == b->start) ||
				 (b->end < (uint64_t)LK_EOF &&
				  b->end + 1 == a->start);
			if (ov || (to && a->type == b->type)) {
				fprintf(stderr, "  invariant: owner %llu "
					"flock %u: [%llu, %llu] type %u and "
					"[%llu, %llu] type %u %s\n",
					(unsigned long long)a->owner, a->flock,
					(unsigned long long)a->start,
					(unsigned long long)a->end, a->type,
					(unsigned long long)b->start,
					(unsigned long long)b->end, b->type,
					ov ? "overlap" : "touch");
				return 0;
			}
		}
	}
	return 1;
}

/* The entry of (client, owner, flock) that is exactly [start, end] with
 * type, or NULL. */
static const struct lkent *find(const struct lkset *s, const void *client,
				uint64_t owner, uint8_t flock, uint8_t type,
				uint64_t start, uint64_t end)
{
	for (const struct lkent *e = s->head; e; e = e->next)
		if (e->client == client && e->owner == owner &&
		    e->flock == flock && e->type == type &&
		    e->start == start && e->end == end)
			return e;
	return NULL;
}

/* Apply and check the return value; returns *freed. */
static int apply(struct lkset *s, const void *client, uint64_t owner,
		 uint8_t flock, uint8_t type, uint64_t start, uint64_t end)
{
	struct lkent r = mk(client, owner, flock, type, start, end);
	int freed = 42;

	CHECK_EQ(lkset_apply(s, &r, &freed), 0);
	CHECK(freed == 0 || freed == 1);
	return freed;
}

/* ---- conflicts ---- */

static void test_conflict_types(void)
{
	struct lkset s = { 0 };
	struct lkent r;
	const struct lkent *c;

	apply(&s, CA, 1, 0, LK_RD, 10, 19);
	apply(&s, CA, 1, 0, LK_WR, 30, 39);

	/* RD against RD: compatible. */
	r = mk(CA, 2, 0, LK_RD, 0, 25);
	CHECK(lkset_conflict(&s, &r) == NULL);
	/* WR against RD: conflict, and the entry returned is the RD one. */
	r = mk(CA, 2, 0, LK_WR, 15, 15);
	c = lkset_conflict(&s, &r);
	CHECK(c != NULL);
	if (c) {
		CHECK_EQ(c->start, 10);
		CHECK_EQ(c->type, LK_RD);
	}
	/* RD against WR: conflict. */
	r = mk(CA, 2, 0, LK_RD, 39, 50);
	c = lkset_conflict(&s, &r);
	CHECK(c != NULL);
	if (c)
		CHECK_EQ(c->start, 30);
	/* WR against WR: conflict. */
	r = mk(CA, 2, 0, LK_WR, 25, 30);
	c = lkset_conflict(&s, &r);
	CHECK(c != NULL);
	if (c)
		CHECK_EQ(c->type, LK_WR);
	/* Touching but not overlapping: no conflict. */
	r = mk(CA, 2, 0, LK_WR, 20, 29);
	CHECK(lkset_conflict(&s, &r) == NULL);
	r = mk(CA, 2, 0, LK_WR, 0, 9);
	CHECK(lkset_conflict(&s, &r) == NULL);
	r = mk(CA, 2, 0, LK_WR, 40, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	/* Whole file WR: conflicts. */
	r = mk(CA, 2, 0, LK_WR, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) != NULL);
	/* Empty set: nothing conflicts. */
	lkset_clear(&s);
	CHECK(lkset_conflict(&s, &r) == NULL);
}

static void test_conflict_same_owner(void)
{
	struct lkset s = { 0 };
	struct lkent r;

	apply(&s, CA, 1, 0, LK_WR, 0, 99);
	apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF);
	r = mk(CA, 1, 0, LK_WR, 50, 150);
	CHECK(lkset_conflict(&s, &r) == NULL);
	r = mk(CA, 1, 0, LK_RD, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	r = mk(CA, 1, 1, LK_WR, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	/* The same client's other owner does conflict. */
	r = mk(CA, 2, 0, LK_RD, 99, 99);
	CHECK(lkset_conflict(&s, &r) != NULL);
	r = mk(CA, 2, 1, LK_RD, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) != NULL);
	lkset_clear(&s);
}

static void test_conflict_other_client_same_owner_id(void)
{
	struct lkset s = { 0 };
	struct lkent r;
	const struct lkent *c;

	apply(&s, CA, 7, 0, LK_WR, 0, 9);
	r = mk(CB, 7, 0, LK_WR, 5, 5);
	c = lkset_conflict(&s, &r);
	CHECK(c != NULL);
	if (c)
		CHECK(c->client == CA);
	r = mk(CB, 7, 0, LK_RD, 0, 0);
	CHECK(lkset_conflict(&s, &r) != NULL);
	/* NULL (the client's own copy) is a distinct client too. */
	r = mk(NULL, 7, 0, LK_RD, 9, 20);
	CHECK(lkset_conflict(&s, &r) != NULL);
	/* And the other way round. */
	lkset_clear(&s);
	apply(&s, NULL, 7, 0, LK_RD, 0, 9);
	r = mk(CA, 7, 0, LK_WR, 0, 9);
	CHECK(lkset_conflict(&s, &r) != NULL);
	r = mk(CA, 7, 0, LK_RD, 0, 9);
	CHECK(lkset_conflict(&s, &r) == NULL);
	lkset_clear(&s);
}

static void test_conflict_flock_vs_posix(void)
{
	struct lkset s = { 0 };
	struct lkent r;
	const struct lkent *c;

	/* A POSIX WR over everything does not block an flock. */
	apply(&s, CA, 1, 0, LK_WR, 0, LK_EOF);
	r = mk(CB, 2, 1, LK_WR, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	r = mk(CB, 2, 1, LK_RD, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	/* An flock WR does not block POSIX. */
	apply(&s, CB, 2, 1, LK_WR, 0, LK_EOF);
	r = mk(CB, 3, 0, LK_RD, 10, 20);
	c = lkset_conflict(&s, &r);
	CHECK(c != NULL); /* the POSIX WR of CA/1 does */
	if (c)
		CHECK_EQ(c->flock, 0);
	lkset_clear(&s);
	apply(&s, CB, 2, 1, LK_WR, 0, LK_EOF);
	r = mk(CA, 1, 0, LK_WR, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	/* flock against flock of another owner: conflict; RD/RD fine. */
	r = mk(CA, 1, 1, LK_RD, 0, LK_EOF);
	c = lkset_conflict(&s, &r);
	CHECK(c != NULL);
	if (c)
		CHECK_EQ(c->flock, 1);
	lkset_clear(&s);
	apply(&s, CB, 2, 1, LK_RD, 0, LK_EOF);
	r = mk(CA, 1, 1, LK_RD, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) == NULL);
	r = mk(CA, 1, 1, LK_WR, 0, LK_EOF);
	CHECK(lkset_conflict(&s, &r) != NULL);
	lkset_clear(&s);
}

/* ---- apply ---- */

static void test_apply_insert(void)
{
	struct lkset s = { 0 };
	struct lkent r = mk(CA, 5, 0, LK_RD, 100, 199);
	int freed = 42;

	r.pid = 4242;
	r.fh = 99;
	CHECK_EQ(lkset_apply(&s, &r, &freed), 0);
	CHECK_EQ(freed, 0);
	CHECK_EQ(s.n, 1);
	CHECK(s.head != NULL);
	if (s.head) {
		CHECK(s.head->client == CA);
		CHECK_EQ(s.head->owner, 5);
		CHECK_EQ(s.head->start, 100);
		CHECK_EQ(s.head->end, 199);
		CHECK_EQ(s.head->type, LK_RD);
		CHECK_EQ(s.head->flock, 0);
		CHECK_EQ(s.head->pid, 4242);
		CHECK_EQ(s.head->fh, 99);
		CHECK(s.head->next == NULL);
	}
	/* A disjoint second one; freed may be NULL. */
	r = mk(CA, 5, 0, LK_RD, 300, 399);
	CHECK_EQ(lkset_apply(&s, &r, NULL), 0);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CA, 5, 0, LK_RD, 100, 199) != NULL);
	CHECK(find(&s, CA, 5, 0, LK_RD, 300, 399) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
	CHECK_EQ(s.n, 0);
	CHECK(s.head == NULL);
}

static void test_apply_merge(void)
{
	struct lkset s = { 0 };

	/* Overlapping on the right. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 10, 19), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 15, 29), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 10, 29) != NULL);
	/* Overlapping on the left. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 5, 12), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 5, 29) != NULL);
	/* Touching on the right, then on the left. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 30, 39), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 5, 39) != NULL);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 0, 4), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 39) != NULL);
	/* Inside: nothing changes. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 10, 20), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 39) != NULL);
	/* Identical. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 0, 39), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 39) != NULL);
	/* Bridging: a gap filled exactly joins two entries into one. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 50, 59), 0);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 40, 49), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 59) != NULL);
	/* Swallowing several: one request covering three separate entries. */
	apply(&s, CA, 1, 0, LK_RD, 70, 79);
	apply(&s, CA, 1, 0, LK_RD, 90, 99);
	apply(&s, CA, 1, 0, LK_RD, 110, 119);
	CHECK_EQ(s.n, 4);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 75, 115), 0);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CA, 1, 0, LK_RD, 70, 119) != NULL);
	/* Overlapping one, touching the other. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 55, 69), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 119) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);

	/* Same for WR. */
	apply(&s, CB, 3, 0, LK_WR, 0, 9);
	apply(&s, CB, 3, 0, LK_WR, 20, 29);
	CHECK_EQ(apply(&s, CB, 3, 0, LK_WR, 10, 19), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CB, 3, 0, LK_WR, 0, 29) != NULL);
	/* And for flock. */
	apply(&s, CB, 3, 1, LK_RD, 0, LK_EOF);
	CHECK_EQ(apply(&s, CB, 3, 1, LK_RD, 0, LK_EOF), 0);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CB, 3, 1, LK_RD, 0, LK_EOF) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
}

static void test_apply_no_merge_across(void)
{
	struct lkset s = { 0 };

	/* Other owner id, same client: touching and overlapping stay apart. */
	apply(&s, CA, 1, 0, LK_RD, 0, 9);
	apply(&s, CA, 2, 0, LK_RD, 10, 19);
	apply(&s, CA, 2, 0, LK_RD, 5, 7);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 9) != NULL);
	CHECK(find(&s, CA, 2, 0, LK_RD, 10, 19) != NULL);
	CHECK(find(&s, CA, 2, 0, LK_RD, 5, 7) != NULL);
	lkset_clear(&s);
	/* Other client, same owner id. */
	apply(&s, CA, 1, 0, LK_RD, 0, 9);
	apply(&s, CB, 1, 0, LK_RD, 10, 19);
	apply(&s, NULL, 1, 0, LK_RD, 0, 19);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 9) != NULL);
	CHECK(find(&s, CB, 1, 0, LK_RD, 10, 19) != NULL);
	CHECK(find(&s, NULL, 1, 0, LK_RD, 0, 19) != NULL);
	lkset_clear(&s);
	/* Same owner, other type: touching entries stay apart. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 0, 9), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 10, 19), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 20, 29), 0);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 9) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, 10, 19) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 20, 29) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
	/* Same client and owner id, other kind (flock vs POSIX). */
	apply(&s, CA, 1, 0, LK_WR, 0, 9);
	apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, 9) != NULL);
	CHECK(find(&s, CA, 1, 1, LK_WR, 0, LK_EOF) != NULL);
	/* A POSIX unlock leaves the flock alone, and the other way round. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 0, LK_EOF), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 1, LK_WR, 0, LK_EOF) != NULL);
	apply(&s, CA, 1, 0, LK_RD, 0, 9);
	CHECK_EQ(apply(&s, CA, 1, 1, LK_UN, 0, LK_EOF), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 9) != NULL);
	/* A POSIX downgrade leaves the flock WR alone. */
	apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF);
	apply(&s, CA, 1, 0, LK_WR, 0, 9);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 0, 9), 1);
	CHECK(find(&s, CA, 1, 1, LK_WR, 0, LK_EOF) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 9) != NULL);
	CHECK_EQ(s.n, 2);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
}

static void test_unlock_split_middle(void)
{
	struct lkset s = { 0 };
	struct lkent r = mk(CA, 1, 0, LK_WR, 0, 99);
	const struct lkent *lo, *hi;

	r.pid = 555;
	r.fh = 66;
	CHECK_EQ(lkset_apply(&s, &r, NULL), 0);
	apply(&s, CB, 1, 0, LK_RD, 200, 299); /* a bystander */
	CHECK_EQ(s.n, 2);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 40, 59), 1);
	CHECK_EQ(s.n, 3);
	lo = find(&s, CA, 1, 0, LK_WR, 0, 39);
	hi = find(&s, CA, 1, 0, LK_WR, 60, 99);
	CHECK(lo != NULL);
	CHECK(hi != NULL);
	/* Both halves keep the original's pid and fh. */
	if (lo && hi) {
		CHECK_EQ(lo->pid, 555);
		CHECK_EQ(hi->pid, 555);
		CHECK_EQ(lo->fh, 66);
		CHECK_EQ(hi->fh, 66);
	}
	CHECK(find(&s, CB, 1, 0, LK_RD, 200, 299) != NULL);
	CHECK(invariant_ok(&s));
	/* A one-byte hole. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 70, 70), 1);
	CHECK_EQ(s.n, 4);
	CHECK(find(&s, CA, 1, 0, LK_WR, 60, 69) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, 71, 99) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
}

static void test_unlock_prefix_suffix(void)
{
	struct lkset s = { 0 };

	apply(&s, CA, 1, 0, LK_RD, 10, 99);
	/* Prefix, starting before the entry. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 0, 19), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 20, 99) != NULL);
	/* Prefix, starting exactly at the entry. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 20, 29), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 30, 99) != NULL);
	/* Suffix, ending exactly at the entry. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 90, 99), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 30, 89) != NULL);
	/* Suffix, to LK_EOF. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 80, LK_EOF), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 30, 79) != NULL);
	/* Nothing held there: freed stays 0, the set is unchanged. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 80, 200), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 0, 29), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 30, 79) != NULL);
	/* Another owner's unlock changes nothing. */
	CHECK_EQ(apply(&s, CA, 2, 0, LK_UN, 0, LK_EOF), 0);
	CHECK_EQ(apply(&s, CB, 1, 0, LK_UN, 0, LK_EOF), 0);
	CHECK_EQ(apply(&s, CA, 1, 1, LK_UN, 0, LK_EOF), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 30, 79) != NULL);
	/* Exactly the entry. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 30, 79), 1);
	CHECK_EQ(s.n, 0);
	CHECK(s.head == NULL);
	/* Unlocking an empty set. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 0, LK_EOF), 0);
	CHECK_EQ(s.n, 0);
	lkset_clear(&s);
}

static void test_unlock_several(void)
{
	struct lkset s = { 0 };

	apply(&s, CA, 1, 0, LK_RD, 0, 9);
	apply(&s, CA, 1, 0, LK_WR, 10, 19);
	apply(&s, CA, 1, 0, LK_RD, 30, 39);
	apply(&s, CA, 1, 0, LK_WR, 50, 59);
	apply(&s, CA, 1, 0, LK_RD, 70, 79);
	apply(&s, CA, 2, 0, LK_RD, 0, 100);   /* other owner */
	apply(&s, CA, 1, 1, LK_RD, 0, LK_EOF); /* same owner, flock */
	CHECK_EQ(s.n, 7);
	/* From the middle of the first to the middle of the last. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 5, 74), 1);
	CHECK_EQ(s.n, 4);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 4) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 75, 79) != NULL);
	CHECK(find(&s, CA, 2, 0, LK_RD, 0, 100) != NULL);
	CHECK(find(&s, CA, 1, 1, LK_RD, 0, LK_EOF) != NULL);
	CHECK(invariant_ok(&s));
	/* Everything of the owner. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 0, LK_EOF), 1);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CA, 2, 0, LK_RD, 0, 100) != NULL);
	CHECK(find(&s, CA, 1, 1, LK_RD, 0, LK_EOF) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
}

static void test_upgrade_middle(void)
{
	struct lkset s = { 0 };
	const struct lkent *w;
	struct lkent r;
	int freed = 42;

	apply(&s, CA, 1, 0, LK_RD, 0, 99);
	r = mk(CA, 1, 0, LK_WR, 40, 59);
	r.pid = 31337;
	CHECK_EQ(lkset_apply(&s, &r, &freed), 0);
	CHECK_EQ(freed, 0); /* an upgrade frees nothing */
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 39) != NULL);
	w = find(&s, CA, 1, 0, LK_WR, 40, 59);
	CHECK(w != NULL);
	if (w)
		CHECK_EQ(w->pid, 31337);
	CHECK(find(&s, CA, 1, 0, LK_RD, 60, 99) != NULL);
	CHECK(invariant_ok(&s));
	/* Growing the WR sideways into RD: still no freed. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 30, 45), 0);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 29) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, 30, 59) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 60, 99) != NULL);
	/* Upgrading the whole thing: one WR entry. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 0, 99), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, 99) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);

	/* Upgrade across several RD entries and the gaps between. */
	apply(&s, CA, 1, 0, LK_RD, 0, 9);
	apply(&s, CA, 1, 0, LK_RD, 20, 29);
	apply(&s, CA, 1, 0, LK_RD, 40, 49);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 5, 45), 0);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 4) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, 5, 45) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 46, 49) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);

	/* Upgrade a middle RD that sits between two WRs: all merge. */
	apply(&s, CA, 1, 0, LK_WR, 0, 9);
	apply(&s, CA, 1, 0, LK_RD, 10, 19);
	apply(&s, CA, 1, 0, LK_WR, 20, 29);
	CHECK_EQ(s.n, 3);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 10, 19), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, 29) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
}

static void test_downgrade(void)
{
	struct lkset s = { 0 };

	/* In the middle: three entries, and freed. */
	apply(&s, CA, 1, 0, LK_WR, 0, 99);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 40, 59), 1);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, 39) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 40, 59) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, 60, 99) != NULL);
	CHECK(invariant_ok(&s));
	/* Extending the RD into the WR on one side: freed, RD merged. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 55, 69), 1);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_RD, 40, 69) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, 70, 99) != NULL);
	/* Whole: one RD entry, freed. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 0, 99), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 99) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
	/* A downgraded flock. */
	apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF);
	CHECK_EQ(apply(&s, CA, 1, 1, LK_RD, 0, LK_EOF), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 1, LK_RD, 0, LK_EOF) != NULL);
	/* And flock upgraded back: not freed. */
	CHECK_EQ(apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 1, LK_WR, 0, LK_EOF) != NULL);
	lkset_clear(&s);
}

static void test_freed_flag(void)
{
	struct lkset s = { 0 };

	/* Pure same-type extensions do not set freed (and clear it). */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 10, 19), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 20, 29), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 0, 40), 0);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 5, 6), 0);
	CHECK_EQ(apply(&s, CA, 2, 0, LK_RD, 100, 110), 0);
	CHECK_EQ(apply(&s, CA, 2, 0, LK_RD, 90, 120), 0);
	/* RD next to one's own WR, not over it: nothing freed. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 41, 50), 0);
	/* RD over one's own WR: freed. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 40, 40), 1);
	/* RD over another owner's WR: not this owner's, nothing freed. */
	CHECK_EQ(apply(&s, CA, 3, 0, LK_RD, 0, 40), 0);
	/* Unlock: freed. */
	CHECK_EQ(apply(&s, CA, 2, 0, LK_UN, 100, 100), 1);
	/* Unlock of a gap between entries: not freed. */
	CHECK_EQ(apply(&s, CA, 2, 0, LK_UN, 100, 100), 0);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);
}

static void test_lk_eof(void)
{
	struct lkset s = { 0 };
	const uint64_t E = LK_EOF;

	/* A lock to EOF, then one touching it from below: merged. */
	apply(&s, CA, 1, 0, LK_RD, 100, E);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 50, 99), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_RD, 50, E) != NULL);
	/* An entry ending at LK_EOF does not "touch" one starting at 0. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 0, 10), 0);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CA, 1, 0, LK_RD, 0, 10) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 50, E) != NULL);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);

	/* The very last byte alone, and a range touching it. */
	apply(&s, CA, 1, 0, LK_WR, E, E);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, E - 10, E - 1), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, E - 10, E) != NULL);
	/* Same from the other side: [E, E] added to [E - 10, E - 1]. */
	lkset_clear(&s);
	apply(&s, CA, 1, 0, LK_WR, E - 10, E - 1);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, E, E), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, E - 10, E) != NULL);
	/* Not merged with a WR [0, 5] (no wrap-around touch). */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 0, 5), 0);
	CHECK_EQ(s.n, 2);
	CHECK(invariant_ok(&s));
	lkset_clear(&s);

	/* Whole file, unlock the last byte, then the first. */
	apply(&s, CA, 1, 0, LK_WR, 0, E);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, E, E), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, E - 1) != NULL);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, 0, 0), 1);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, 1, E - 1) != NULL);
	/* Relock the whole: one entry again. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 0, E), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, E) != NULL);
	/* Split near the top: [0, E-2], [E, E]. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_UN, E - 1, E - 1), 1);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, E - 2) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, E, E) != NULL);
	/* Downgrade the middle of a whole-file WR up to EOF - 1. */
	lkset_clear(&s);
	apply(&s, CA, 1, 0, LK_WR, 0, E);
	CHECK_EQ(apply(&s, CA, 1, 0, LK_RD, 1, E - 1), 1);
	CHECK_EQ(s.n, 3);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, 0) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_RD, 1, E - 1) != NULL);
	CHECK(find(&s, CA, 1, 0, LK_WR, E, E) != NULL);
	CHECK(invariant_ok(&s));
	/* Upgrade it back: all three merge into [0, E]. */
	CHECK_EQ(apply(&s, CA, 1, 0, LK_WR, 1, E - 1), 0);
	CHECK_EQ(s.n, 1);
	CHECK(find(&s, CA, 1, 0, LK_WR, 0, E) != NULL);
	/* Conflicts at the top. */
	{
		struct lkent r = mk(CB, 1, 0, LK_RD, E, E);

		CHECK(lkset_conflict(&s, &r) != NULL);
		lkset_clear(&s);
		apply(&s, CA, 1, 0, LK_WR, 0, E - 1);
		CHECK(lkset_conflict(&s, &r) == NULL);
	}
	/* Covers at the top. */
	{
		struct lkent r = mk(CA, 1, 0, LK_WR, E - 1, E - 1);

		CHECK(lkset_covers(&s, &r));
		r.end = E;
		CHECK(!lkset_covers(&s, &r));
	}
	lkset_clear(&s);
}

static void test_covers(void)
{
	struct lkset s = { 0 };
	struct lkent r;

	apply(&s, CA, 1, 0, LK_RD, 10, 19);
	apply(&s, CA, 1, 0, LK_WR, 20, 29);
	apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF);

	r = mk(CA, 1, 0, LK_RD, 10, 19);
	CHECK(lkset_covers(&s, &r));          /* exactly */
	r = mk(CA, 1, 0, LK_RD, 12, 15);
	CHECK(lkset_covers(&s, &r));          /* inside */
	r = mk(CA, 1, 0, LK_RD, 9, 15);
	CHECK(!lkset_covers(&s, &r));         /* sticks out */
	r = mk(CA, 1, 0, LK_RD, 15, 25);
	CHECK(!lkset_covers(&s, &r));         /* into the WR */
	r = mk(CA, 1, 0, LK_WR, 15, 25);
	CHECK(!lkset_covers(&s, &r));
	r = mk(CA, 1, 0, LK_WR, 10, 19);
	CHECK(!lkset_covers(&s, &r));         /* wrong type */
	r = mk(CA, 1, 0, LK_WR, 20, 29);
	CHECK(lkset_covers(&s, &r));
	r = mk(CA, 2, 0, LK_RD, 10, 19);
	CHECK(!lkset_covers(&s, &r));         /* other owner id */
	r = mk(CB, 1, 0, LK_RD, 10, 19);
	CHECK(!lkset_covers(&s, &r));         /* other client */
	r = mk(CA, 1, 1, LK_RD, 10, 19);
	CHECK(!lkset_covers(&s, &r));         /* flock is WR */
	r = mk(CA, 1, 1, LK_WR, 0, LK_EOF);
	CHECK(lkset_covers(&s, &r));          /* the flock */
	r = mk(CA, 1, 0, LK_WR, 0, LK_EOF);
	CHECK(!lkset_covers(&s, &r));         /* POSIX is not the flock */

	/* After merging, the union is covered by one entry. */
	apply(&s, CA, 1, 0, LK_RD, 30, 39);
	apply(&s, CA, 1, 0, LK_RD, 20, 29);   /* downgrade joins all three */
	CHECK_EQ(s.n, 2);
	r = mk(CA, 1, 0, LK_RD, 10, 39);
	CHECK(lkset_covers(&s, &r));
	/* After a split, a range over the hole is not. */
	apply(&s, CA, 1, 0, LK_UN, 25, 25);
	CHECK(!lkset_covers(&s, &r));
	r = mk(CA, 1, 0, LK_RD, 26, 39);
	CHECK(lkset_covers(&s, &r));
	r = mk(CA, 1, 0, LK_RD, 10, 24);
	CHECK(lkset_covers(&s, &r));
	lkset_clear(&s);
	r = mk(CA, 1, 0, LK_RD, 10, 24);
	CHECK(!lkset_covers(&s, &r));         /* empty set */
}

static void test_holds(void)
{
	struct lkset s = { 0 };
	struct lkent r;

	apply(&s, CA, 1, 0, LK_WR, 10, 19);
	apply(&s, CA, 1, 0, LK_RD, 20, 29);
	apply(&s, CA, 1, 0, LK_WR, 40, LK_EOF);
	apply(&s, CB, 1, 0, LK_RD, 30, 35);

	r = mk(CA, 1, 0, LK_RD, 10, 29);
	CHECK(lkset_holds(&s, &r));           /* WR then RD: a downgrade */
	r = mk(CA, 1, 0, LK_WR, 10, 29);
	CHECK(!lkset_holds(&s, &r));          /* an upgrade of 20..29 */
	r = mk(CA, 1, 0, LK_WR, 12, 15);
	CHECK(lkset_holds(&s, &r));           /* asked again */
	r = mk(CA, 1, 0, LK_RD, 25, 45);
	CHECK(!lkset_holds(&s, &r));          /* the hole 30..39 */
	r = mk(CA, 1, 0, LK_RD, 50, LK_EOF);
	CHECK(lkset_holds(&s, &r));           /* up to the end of the space */
	r = mk(CA, 1, 0, LK_RD, 9, 19);
	CHECK(!lkset_holds(&s, &r));          /* sticks out before */
	r = mk(CA, 2, 0, LK_RD, 10, 19);
	CHECK(!lkset_holds(&s, &r));          /* another owner id */
	r = mk(CB, 1, 0, LK_RD, 30, 35);
	CHECK(lkset_holds(&s, &r));           /* B's own */
	r = mk(CA, 1, 1, LK_RD, 10, 19);
	CHECK(!lkset_holds(&s, &r));          /* POSIX locks are not flocks */
	lkset_clear(&s);
}

static void test_drop_client(void)
{
	struct lkset s = { 0 };

	apply(&s, CA, 1, 0, LK_RD, 0, 9);
	apply(&s, CA, 1, 0, LK_WR, 20, 29);
	apply(&s, CA, 2, 0, LK_WR, 40, 49);
	apply(&s, CA, 1, 1, LK_WR, 0, LK_EOF);
	apply(&s, CB, 1, 0, LK_RD, 0, 9);
	apply(&s, CB, 2, 1, LK_RD, 0, LK_EOF);
	apply(&s, NULL, 1, 0, LK_RD, 0, 9);
	CHECK_EQ(s.n, 7);

	CHECK_EQ(lkset_drop_client(&s, CA), 4);
	CHECK_EQ(s.n, 3);
	CHECK(invariant_ok(&s));
	for (const struct lkent *e = s.head; e; e = e->next)
		CHECK(e->client != CA);
	CHECK(find(&s, CB, 1, 0, LK_RD, 0, 9) != NULL);
	CHECK(find(&s, CB, 2, 1, LK_RD, 0, LK_EOF) != NULL);
	CHECK(find(&s, NULL, 1, 0, LK_RD, 0, 9) != NULL);
	/* Again: nothing left of it. */
	CHECK_EQ(lkset_drop_client(&s, CA), 0);
	CHECK_EQ(s.n, 3);
	/* The NULL client. */
	CHECK_EQ(lkset_drop_client(&s, NULL), 1);
	CHECK_EQ(s.n, 2);
	CHECK(invariant_ok(&s));
	CHECK_EQ(lkset_drop_client(&s, CB), 2);
	CHECK_EQ(s.n, 0);
	CHECK(s.head == NULL);
	CHECK_EQ(lkset_drop_client(&s, CB), 0);

	/* Dropping the head, the tail and a middle one alternately. */
	apply(&s, CA, 1, 0, LK_RD, 0, 0);
	apply(&s, CB, 1, 0, LK_RD, 0, 0);
	apply(&s, CA, 2, 0, LK_RD, 0, 0);
	apply(&s, CB, 2, 0, LK_RD, 0, 0);
	apply(&s, CA, 3, 0, LK_RD, 0, 0);
	CHECK_EQ(lkset_drop_client(&s, CA), 3);
	CHECK_EQ(s.n, 2);
	CHECK(invariant_ok(&s));
	/* The set is still usable. */
	apply(&s, CB, 1, 0, LK_RD, 1, 5);
	CHECK_EQ(s.n, 2);
	CHECK(find(&s, CB, 1, 0, LK_RD, 0, 5) != NULL);
	lkset_clear(&s);
	CHECK_EQ(s.n, 0);
	CHECK(s.head == NULL);
	lkset_clear(&s); /* clearing an empty set */
	CHECK_EQ(s.n, 0);
}

/* ---- randomized run against a model ---- */

/*
 * The model: for each owner (client x owner id x kind), one byte per
 * offset 0..255 holding LK_UN, LK_RD or LK_WR. Offset i stands for
 * base + i; with base 0 the last one, 255, stands for [255, LK_EOF] (a
 * request's end is either <= 254 or LK_EOF); with base LK_EOF - 255 it is
 * the byte LK_EOF itself (ranges at the very top of the offset space).
 */
#define MB 256
#define NCLI 3
#define NOWN 2
#define NOWNERS (NCLI * NOWN * 2)

static const void *rnd_client(int c)
{
	return c == 0 ? CA : c == 1 ? CB : NULL;
}

static int owner_index(const void *client, uint64_t owner, uint8_t flock)
{
	int c = client == CA ? 0 : client == CB ? 1 : client == NULL ? 2 : -1;

	if (c < 0 || owner < 1 || owner > NOWN || flock > 1)
		return -1;
	return (c * NOWN + (int)(owner - 1)) * 2 + flock;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

struct rctx {
	uint64_t base;
	uint8_t model[NOWNERS][MB];
};

static uint64_t to_off(const struct rctx *x, int i, int is_end)
{
	if (x->base == 0 && is_end && i == MB - 1)
		return LK_EOF;
	return x->base + (uint64_t)i;
}

/* An offset of the set back to a model index; -1 if it cannot be one. */
static int to_idx(const struct rctx *x, uint64_t v, int is_end)
{
	if (x->base == 0) {
		if (is_end && v == (uint64_t)LK_EOF)
			return MB - 1;
		if (v >= (uint64_t)(is_end ? MB - 1 : MB))
			return -1;
		return (int)v;
	}
	if (v < x->base || v - x->base >= MB)
		return -1;
	return (int)(v - x->base);
}

/* Rebuild the model from the set and compare; 1 if equal. */
static int matches_model(const struct rctx *x, const struct lkset *s,
			 int step)
{
	static uint8_t got[NOWNERS][MB];

	memset(got, 0, sizeof(got));
	for (const struct lkent *e = s->head; e; e = e->next) {
		int o = owner_index(e->client, e->owner, e->flock);
		int a = to_idx(x, e->start, 0), b = to_idx(x, e->end, 1);

		if (o < 0 || a < 0 || b < 0 || a > b) {
			fprintf(stderr, "  step %d: stray entry [%llu, %llu]\n",
				step, (unsigned long long)e->start,
				(unsigned long long)e->end);
			return 0;
		}
		for (int i = a; i <= b; i++) {
			if (got[o][i]) {
				fprintf(stderr, "  step %d: owner %d offset %d "
					"held twice\n", step, o, i);
				return 0;
			}
			got[o][i] = e->type;
		}
	}
	for (int o = 0; o < NOWNERS; o++)
		for (int i = 0; i < MB; i++)
			if (got[o][i] != x->model[o][i]) {
				fprintf(stderr, "  step %d: owner %d offset "
					"%d: expected type %u, got %u\n", step,
					o, i, x->model[o][i], got[o][i]);
				return 0;
			}
	return 1;
}

static void random_run(uint64_t base, uint64_t seed, int steps)
{
	static struct rctx x;
	struct lkset s = { 0 };
	int bad = 0;

	memset(&x, 0, sizeof(x));
	x.base = base;
	rng_state = seed;
	for (int step = 0; step < steps && bad < 5; step++) {
		int c = (int)(rnd() % NCLI), ow = 1 + (int)(rnd() % NOWN);
		uint8_t fl = rnd() % 4 == 0;
		int o = owner_index(rnd_client(c), (uint64_t)ow, fl);
		uint64_t k = rnd() % 100;
		int a, b;
		uint8_t type;

		if (k < 2) {
			/* Drop a client. */
			size_t want = 0;

			for (const struct lkent *e = s.head; e; e = e->next)
				want += e->client == rnd_client(c);
			CHECK_EQ(lkset_drop_client(&s, rnd_client(c)), want);
			for (int oi = 0; oi < NOWNERS; oi++)
				if (oi / (NOWN * 2) == c)
					memset(x.model[oi], 0, MB);
		} else if (k < 3) {
			lkset_clear(&s);
			memset(x.model, 0, sizeof(x.model));
		} else {
			/* Mostly short ranges, some long, some to the end. */
			a = (int)(rnd() % MB);
			if (rnd() % 3 == 0)
				b = a + (int)(rnd() % (MB - a));
			else
				b = a + (int)(rnd() % 12);
			if (b >= MB || rnd() % 10 == 0)
				b = MB - 1;
			if (base == 0 && a == MB - 1)
				b = MB - 1; /* [255, 255] would not be a range */
			if (fl && rnd() % 2)
				a = 0, b = MB - 1;
			type = (uint8_t)(k < 35 ? LK_UN : k < 70 ? LK_RD : LK_WR);

			struct lkent r = mk(rnd_client(c), (uint64_t)ow, fl,
					    type, to_off(&x, a, 0),
					    to_off(&x, b, 1));
			/* The range as the set sees it: base 0 and an end
			 * short of 255 stays finite. */
			if (base == 0 && b == MB - 1)
				r.end = LK_EOF;

			/* Conflict against the model. */
			if (type != LK_UN) {
				int want = 0;
				const struct lkent *got;

				for (int oi = 0; oi < NOWNERS && !want; oi++) {
					if (oi == o || (oi & 1) != fl)
						continue;
					for (int i = a; i <= b; i++)
						if (x.model[oi][i] == LK_WR ||
						    (x.model[oi][i] &&
						     type == LK_WR)) {
							want = 1;
							break;
						}
				}
				got = lkset_conflict(&s, &r);
				CHECK_EQ(got != NULL, want);
				if (got) {
					CHECK(!same_owner(got, &r));
					CHECK(got->flock == fl);
					CHECK(got->start <= r.end &&
					      r.start <= got->end);
					CHECK(got->type == LK_WR ||
					      type == LK_WR);
				}
				/* Covers against the model. */
				int cov = 1;

				for (int i = a; i <= b; i++)
					cov &= x.model[o][i] == type;
				CHECK_EQ(lkset_covers(&s, &r), cov);
			}

			/* freed against the model. */
			int want_freed = 0, freed = 42;

			for (int i = a; i <= b; i++)
				if ((type == LK_UN && x.model[o][i]) ||
				    (type == LK_RD &&
				     x.model[o][i] == LK_WR))
					want_freed = 1;
			CHECK_EQ(lkset_apply(&s, &r, &freed), 0);
			if (freed != want_freed) {
				fprintf(stderr, "  step %d: apply type %u "
					"[%d, %d] owner %d: freed %d, "
					"expected %d\n", step, type, a, b, o,
					freed, want_freed);
				failed_here++;
			}
			memset(&x.model[o][a], type, (size_t)(b - a + 1));
		}
		if (!invariant_ok(&s) || !matches_model(&x, &s, step)) {
			fprintf(stderr, "  step %d (base %llu, seed %llu) "
				"failed\n", step, (unsigned long long)base,
				(unsigned long long)seed);
			failed_here++;
			bad++;
		}
	}
	lkset_clear(&s);
}

static void test_random_low(void)
{
	random_run(0, 0x9e3779b97f4a7c15ull, 5000);
	random_run(0, 12345, 5000);
}

static void test_random_top(void)
{
	random_run((uint64_t)LK_EOF - (MB - 1), 0xdeadbeefcafef00dull, 5000);
	random_run((uint64_t)LK_EOF - (MB - 1), 777, 5000);
}

int main(void)
{
	run("lkset conflict RD/RD, RD/WR, WR/WR", test_conflict_types);
	run("lkset same owner never conflicts", test_conflict_same_owner);
	run("lkset other client, same owner id conflicts",
	    test_conflict_other_client_same_owner_id);
	run("lkset flock and POSIX never conflict",
	    test_conflict_flock_vs_posix);
	run("lkset apply insert", test_apply_insert);
	run("lkset merge overlapping and touching", test_apply_merge);
	run("lkset no merge across owners, types, kinds",
	    test_apply_no_merge_across);
	run("lkset unlock splits an entry in the middle",
	    test_unlock_split_middle);
	run("lkset unlock prefix, suffix, nothing", test_unlock_prefix_suffix);
	run("lkset unlock over several entries", test_unlock_several);
	run("lkset upgrade RD->WR in the middle", test_upgrade_middle);
	run("lkset downgrade WR->RD sets freed", test_downgrade);
	run("lkset freed: unlock yes, same-type extension no",
	    test_freed_flag);
	run("lkset ranges at LK_EOF", test_lk_eof);
	run("lkset covers", test_covers);
	run("lkset holds: several entries, a write lock holds a read range",
	    test_holds);
	run("lkset drop_client and clear", test_drop_client);
	run("lkset random ops vs model (0..255, LK_EOF)", test_random_low);
	run("lkset random ops vs model (top of the offset space)",
	    test_random_top);
	return failed_total ? 1 : 0;
}

/*
 * lkset.c - one file's byte-range and flock locks (lkset.h).
 */
#include <errno.h>
#include <stdlib.h>
#include "lkset.h"
#include "proto.h"

static int same_owner(const struct lkent *a, const struct lkent *b)
{
	return a->client == b->client && a->owner == b->owner &&
	       a->flock == b->flock;
}

static int overlap(const struct lkent *a, const struct lkent *b)
{
	return a->start <= b->end && b->start <= a->end;
}

/* a ends right before b begins, or the other way round. */
static int touch(const struct lkent *a, const struct lkent *b)
{
	return (a->end < LK_EOF && a->end + 1 == b->start) ||
	       (b->end < LK_EOF && b->end + 1 == a->start);
}

const struct lkent *lkset_conflict(const struct lkset *s,
				   const struct lkent *req)
{
	const struct lkent *first = NULL;

	for (const struct lkent *e = s->head; e; e = e->next)
		if (e->flock == req->flock && !same_owner(e, req) &&
		    overlap(e, req) &&
		    (e->type == LK_WR || req->type == LK_WR) &&
		    (!first || e->start < first->start))
			first = e;
	return first;
}

int lkset_apply(struct lkset *s, const struct lkent *req, int *freed)
{
	struct lkent *add = NULL, *split = malloc(sizeof(*split));
	uint64_t start = req->start, end = req->end;
	int fr = 0;

	if (req->type != LK_UN && !(add = malloc(sizeof(*add)))) {
		free(split);
		return -ENOMEM;
	}
	if (!split) {
		free(add);
		return -ENOMEM;
	}
	for (struct lkent **pp = &s->head, *e; (e = *pp);) {
		if (!same_owner(e, req) ||
		    !(overlap(e, req) ||
		      (add && e->type == req->type && touch(e, req)))) {
			pp = &e->next;
			continue;
		}
		if (add && e->type == req->type) {
			/* Same type: absorbed by the new entry. */
			if (e->start < start)
				start = e->start;
			if (e->end > end)
				end = e->end;
		} else {
			/* Released, or its type changes over the overlap. */
			if (req->type == LK_UN || e->type == LK_WR)
				fr = 1;
			if (e->start < req->start && e->end > req->end) {
				*split = *e;
				split->start = req->end + 1;
				e->end = req->start - 1;
				split->next = e->next;
				e->next = split;
				split = NULL;
				s->n++;
				break; /* the owner's entries do not overlap:
					* nothing else is in the range */
			}
			if (e->start < req->start) {
				e->end = req->start - 1;
				pp = &e->next;
				continue;
			}
			if (e->end > req->end) {
				e->start = req->end + 1;
				pp = &e->next;
				continue;
			}
		}
		*pp = e->next;
		free(e);
		s->n--;
	}
	free(split);
	if (add) {
		*add = *req;
		add->start = start;
		add->end = end;
		add->next = s->head;
		s->head = add;
		s->n++;
	}
	if (freed)
		*freed = fr;
	return 0;
}

int lkset_covers(const struct lkset *s, const struct lkent *req)
{
	for (const struct lkent *e = s->head; e; e = e->next)
		if (same_owner(e, req) && e->type == req->type &&
		    e->start <= req->start && e->end >= req->end)
			return 1;
	return 0;
}

int lkset_holds(const struct lkset *s, const struct lkent *req)
{
	uint64_t at = req->start;

	/* The owner's entries do not overlap: find the one holding `at`,
	 * go past its end, until past req's. */
	for (;;) {
		const struct lkent *e;

		for (e = s->head; e; e = e->next)
			if (same_owner(e, req) && e->start <= at &&
			    e->end >= at &&
			    (e->type == req->type || e->type == LK_WR))
				break;
		if (!e)
			return 0;
		if (e->end >= req->end)
			return 1;
		at = e->end + 1;
	}
}

size_t lkset_drop_client(struct lkset *s, const void *client)
{
	size_t n = 0;

	for (struct lkent **pp = &s->head, *e; (e = *pp);) {
		if (e->client != client) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		free(e);
		n++;
	}
	s->n -= n;
	return n;
}

void lkset_clear(struct lkset *s)
{
	for (struct lkent *e = s->head, *next; e; e = next) {
		next = e->next;
		free(e);
	}
	s->head = NULL;
	s->n = 0;
}

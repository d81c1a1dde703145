/*
 * test_dircache.c - unit tests for client/dircache.h: fetching and
 * installing listings (one fetch per directory, a break during the fetch,
 * a fetch that raced other breaks or our own changes, too big, malformed
 * listings), lookups
 * found, absent and stale, paging READDIR by cookie, breaks on a
 * directory and on an entry's object (hard links in two directories),
 * replies that follow or spoil statuses, our own changes edited in place
 * (OpenAFS's afs_LocalHero: create, unlink, rename within and across
 * directories, exchange, replace) or dropped when the version is not one
 * above the listing's, room (least recently used listings go first), and
 * concurrent use.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/dircache.h"
#include "check.h"

static struct cairn_attr attr_of(uint64_t vnode, uint64_t dv)
{
	struct cairn_attr a;

	memset(&a, 0, sizeof(a));
	a.fid.vol = 1;
	a.fid.vnode = vnode;
	a.fid.uniq = (uint32_t)vnode * 7 + 1;
	a.mode = 0100644;
	a.nlink = 1;
	a.dv = dv;
	return a;
}

static struct dcache *new_cache(void)
{
	struct dcache *dc = NULL;

	if (dcache_create(&dc) != 0) {
		fprintf(stderr, "dcache_create failed\n");
		exit(1);
	}
	return dc;
}

/*
 * Fetch and install directory dir at version dv with n entries named
 * "e<i>" (vnode base + i, cookie 3 + 2i: gaps, as after removals); the
 * next new entry gets cookie 3 + 2n. Returns what dcache_fetch_end said.
 */
static int install_n(struct dcache *dc, uint64_t dir, uint64_t dv, int n,
		     uint64_t base, int fresh)
{
	struct dcache_listing *l;
	char name[32];

	if (dcache_fetch_begin(dc, dir) || dcache_listing_new(&l))
		return -1;
	for (int i = 0; i < n; i++) {
		struct cairn_attr a = attr_of(base + (uint64_t)i, 1);

		snprintf(name, sizeof(name), "e%d", i);
		if (dcache_listing_add(l, 3 + 2 * (uint64_t)i, name,
				       strlen(name), &a))
			return -1;
	}
	return dcache_fetch_end(dc, dir, l, dv, 3 + 2 * (uint64_t)n, fresh, 0);
}

static int lookup(struct dcache *dc, uint64_t dir, const char *name,
		  struct cairn_attr *a)
{
	struct cairn_attr tmp;

	return dcache_lookup(dc, dir, name, strlen(name), a ? a : &tmp);
}

/* Names of dir's listing in cookie order, comma separated, into buf. */
static const char *names(struct dcache *dc, uint64_t dir, char *buf,
			 size_t size)
{
	struct dcache_ent *e;
	size_t n, o = 0;
	int eof;

	buf[0] = '\0';
	if (dcache_read(dc, dir, 0, 1000, &e, &n, &eof))
		return "(none)";
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? "," : "",
				      e[i].name);
	free(e);
	return buf;
}

static void t_install_lookup(void)
{
	struct dcache *dc = new_cache();
	struct cairn_attr a;

	CHECK_EQ(lookup(dc, 10, "e0", &a), -ENOENT); /* no listing */
	CHECK_EQ(install_n(dc, 10, 5, 3, 100, 1), 1);
	CHECK_EQ(dcache_count(dc, 10), 3);
	CHECK_EQ(lookup(dc, 10, "e1", &a), 1);
	CHECK_EQ(a.fid.vnode, 101);
	CHECK_EQ(lookup(dc, 10, "nope", &a), 0);     /* does not exist */
	CHECK_EQ(lookup(dc, 10, "e", &a), 0);
	CHECK_EQ(lookup(dc, 11, "e1", &a), -ENOENT); /* another directory */

	struct dcache_stats st;
	dcache_get_stats(dc, &st);
	CHECK_EQ(st.listings, 1);
	CHECK_EQ(st.entries, 3);
	CHECK_EQ(st.hits, 1);
	CHECK_EQ(st.neg_hits, 2);
	CHECK_EQ(st.installs, 1);

	/* An empty directory is a listing too: every name is absent. */
	CHECK_EQ(install_n(dc, 12, 1, 0, 0, 1), 1);
	CHECK_EQ(lookup(dc, 12, "x", &a), 0);
	dcache_destroy(dc);
}

static void t_fetch_rules(void)
{
	struct dcache *dc = new_cache();
	struct dcache_listing *l;
	struct cairn_attr a = attr_of(50, 1);

	/* One fetch per directory at a time. */
	CHECK_EQ(dcache_fetch_begin(dc, 20), 0);
	CHECK_EQ(dcache_fetch_begin(dc, 20), -EBUSY);
	CHECK_EQ(dcache_fetch_begin(dc, 21), 0);
	CHECK_EQ(dcache_fetch_end(dc, 21, NULL, 0, 0, 1, 0), 0); /* failed */
	CHECK_EQ(dcache_fetch_begin(dc, 21), 0);                  /* again */
	CHECK_EQ(dcache_fetch_end(dc, 21, NULL, 0, 0, 1, 0), 0);

	/* A break on the directory during the fetch: not installed. */
	CHECK_EQ(dcache_listing_new(&l), 0);
	CHECK_EQ(dcache_listing_add(l, 3, "a", 1, &a), 0);
	dcache_break(dc, 20);
	CHECK_EQ(dcache_fetch_end(dc, 20, l, 1, 4, 1, 0), 0);
	CHECK_EQ(dcache_count(dc, 20), -ENOENT);
	/* ... and so is a reconnect's. */
	CHECK_EQ(dcache_fetch_begin(dc, 20), 0);
	CHECK_EQ(dcache_listing_new(&l), 0);
	dcache_clear(dc);
	CHECK_EQ(dcache_fetch_end(dc, 20, l, 1, 3, 1, 0), 0);

	/* A break of something else during the fetch: installed, but no
	 * entry's status is promised. */
	CHECK_EQ(install_n(dc, 22, 1, 2, 200, 0), 1);
	CHECK_EQ(lookup(dc, 22, "e0", NULL), -EAGAIN);
	CHECK_EQ(lookup(dc, 22, "zz", NULL), 0);

	/* A change of ours while a fetch runs: the statuses read may
	 * predate it (installed, stale); a change of ours to the directory
	 * itself: the listing may predate it (not installed). */
	CHECK_EQ(dcache_fetch_begin(dc, 24), 0);
	CHECK_EQ(dcache_listing_new(&l), 0);
	CHECK_EQ(dcache_listing_add(l, 3, "a", 1, &a), 0);
	dcache_stale(dc, 999);
	CHECK_EQ(dcache_fetch_end(dc, 24, l, 1, 4, 1, 0), 1);
	CHECK_EQ(lookup(dc, 24, "a", NULL), -EAGAIN);
	CHECK_EQ(dcache_fetch_begin(dc, 25), 0);
	CHECK_EQ(dcache_listing_new(&l), 0);
	struct cairn_attr d25 = attr_of(25, 2);
	dcache_added(dc, 25, "b", 1, &a, &d25, 1);
	CHECK_EQ(dcache_fetch_end(dc, 25, l, 1, 3, 1, 0), 0);
	CHECK_EQ(dcache_count(dc, 25), -ENOENT);

	/* Malformed: cookies not increasing, bad names, a name twice,
	 * cookies not below the next new entry's. */
	CHECK_EQ(dcache_listing_new(&l), 0);
	CHECK_EQ(dcache_listing_add(l, 5, "a", 1, &a), 0);
	CHECK_EQ(dcache_listing_add(l, 5, "b", 1, &a), -EINVAL);
	CHECK_EQ(dcache_listing_add(l, 4, "b", 1, &a), -EINVAL);
	CHECK_EQ(dcache_listing_add(l, 2, "b", 1, &a), -EINVAL);
	CHECK_EQ(dcache_listing_add(l, 9, "", 0, &a), -EINVAL);
	CHECK_EQ(dcache_listing_add(l, 9, "x", CAIRN_NAME_MAX + 1, &a),
		 -EINVAL);
	CHECK_EQ(dcache_listing_add(l, 7, "a", 1, &a), 0); /* "a" again */
	CHECK_EQ(dcache_listing_count(l), 2);
	CHECK_EQ(dcache_fetch_begin(dc, 23), 0);
	CHECK_EQ(dcache_fetch_end(dc, 23, l, 1, 8, 1, 0), 0);
	CHECK_EQ(dcache_listing_new(&l), 0);
	CHECK_EQ(dcache_listing_add(l, 5, "a", 1, &a), 0);
	CHECK_EQ(dcache_fetch_begin(dc, 23), 0);
	CHECK_EQ(dcache_fetch_end(dc, 23, l, 1, 5, 1, 0), 0);
	CHECK_EQ(dcache_count(dc, 23), -ENOENT);
	dcache_destroy(dc);
}

static void t_too_big(void)
{
	struct dcache *dc = new_cache();
	struct dcache_listing *l;
	struct cairn_attr a = attr_of(7, 1);
	char name[16];
	int rc = 0;

	CHECK_EQ(dcache_listing_new(&l), 0);
	for (uint32_t i = 0; i <= DCACHE_DIR_MAX && !rc; i++) {
		snprintf(name, sizeof(name), "%x", i);
		rc = dcache_listing_add(l, 3 + i, name, strlen(name), &a);
	}
	CHECK_EQ(rc, -EFBIG);
	CHECK_EQ(dcache_listing_count(l), DCACHE_DIR_MAX);
	dcache_listing_free(l);

	/* Refused until the directory's next break. */
	CHECK_EQ(dcache_fetch_begin(dc, 30), 0);
	CHECK_EQ(dcache_fetch_end(dc, 30, NULL, 1, 3, 1, 1), 0);
	CHECK_EQ(dcache_fetch_begin(dc, 30), -EBUSY);
	dcache_break(dc, 31);
	CHECK_EQ(dcache_fetch_begin(dc, 30), -EBUSY);
	dcache_break(dc, 30);
	CHECK_EQ(install_n(dc, 30, 2, 1, 300, 1), 1);
	dcache_destroy(dc);
}

static void t_read_pages(void)
{
	struct dcache *dc = new_cache();
	struct dcache_ent *e;
	size_t n;
	int eof;

	CHECK_EQ(install_n(dc, 40, 1, 10, 400, 1), 1);
	/* From the start, 4 at a time, resuming after each last cookie. */
	uint64_t cookie = 0;
	int seen = 0, pages = 0;
	do {
		CHECK_EQ(dcache_read(dc, 40, cookie, 4, &e, &n, &eof), 0);
		for (size_t i = 0; i < n; i++) {
			char want[16];

			snprintf(want, sizeof(want), "e%d", seen++);
			CHECK(!strcmp(e[i].name, want));
			CHECK_EQ(e[i].len, strlen(want));
			CHECK(e[i].cookie > cookie);
			CHECK(!e[i].stale);
		}
		if (n)
			cookie = e[n - 1].cookie;
		free(e);
		pages++;
	} while (!eof && pages < 10);
	CHECK_EQ(seen, 10);
	CHECK_EQ(pages, 3);
	/* A cookie between two entries resumes at the next one. */
	CHECK_EQ(dcache_read(dc, 40, 6, 100, &e, &n, &eof), 0);
	CHECK(n == 8 && eof && !strcmp(e[0].name, "e2"));
	free(e);
	/* Past the end: nothing, at the end. */
	CHECK_EQ(dcache_read(dc, 40, 1000, 100, &e, &n, &eof), 0);
	CHECK(n == 0 && eof);
	free(e);
	CHECK_EQ(dcache_read(dc, 41, 0, 100, &e, &n, &eof), -ENOENT);
	dcache_destroy(dc);
}

/* The vnodes a lapse keeps in t_breaks_and_replies. */
static int keep_some(void *arg, uint64_t vnode)
{
	(void)arg;
	return vnode == 53 || vnode == 54 || vnode == 530 || vnode == 540;
}

static void t_breaks_and_replies(void)
{
	struct dcache *dc = new_cache();
	struct dcache_listing *l;
	struct cairn_attr a, got, f = attr_of(77, 1);
	char buf[256];

	/* Object 77 is listed in two directories (hard links). */
	CHECK_EQ(install_n(dc, 50, 1, 2, 500, 1), 1);
	CHECK_EQ(dcache_fetch_begin(dc, 51), 0);
	CHECK_EQ(dcache_listing_new(&l), 0);
	CHECK_EQ(dcache_listing_add(l, 3, "x", 1, &f), 0);
	CHECK_EQ(dcache_fetch_end(dc, 51, l, 1, 4, 1, 0), 1);
	a = attr_of(50, 2);
	dcache_added(dc, 50, "y", 1, &f, &a, 1);
	CHECK_EQ(lookup(dc, 50, "y", &got), 1);

	/* A break on the object: stale in both, names still there. */
	dcache_break(dc, 77);
	CHECK_EQ(lookup(dc, 50, "y", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 77);
	CHECK_EQ(lookup(dc, 51, "x", NULL), -EAGAIN);
	/* A fresh reply about it: promised again, with its status. */
	a = f;
	a.dv = 9;
	a.size = 1234;
	dcache_follow(dc, &a, 1);
	CHECK_EQ(lookup(dc, 51, "x", &got), 1);
	CHECK_EQ(got.size, 1234);
	CHECK_EQ(lookup(dc, 50, "y", &got), 1);
	CHECK_EQ(got.dv, 9);
	/* An older reply handled later changes nothing. */
	struct cairn_attr older = a;
	older.dv = 8;
	older.size = 1;
	dcache_follow(dc, &older, 1);
	CHECK_EQ(lookup(dc, 51, "x", &got), 1);
	CHECK_EQ(got.size, 1234);
	/* A reply that raced a break: stale. */
	dcache_follow(dc, &a, 0);
	CHECK_EQ(lookup(dc, 51, "x", NULL), -EAGAIN);
	dcache_follow(dc, &a, 1);
	/* Our change came back without the status. */
	dcache_stale(dc, 77);
	CHECK_EQ(lookup(dc, 51, "x", NULL), -EAGAIN);
	dcache_follow(dc, &a, 1);
	dcache_stale_name(dc, 50, "y", 1);
	CHECK_EQ(lookup(dc, 51, "x", NULL), -EAGAIN);

	/* The directory's own attributes: the same version keeps the
	 * listing (also from a reply that raced something else), another
	 * drops it. */
	a = attr_of(50, 2);
	dcache_follow(dc, &a, 1);
	dcache_follow(dc, &a, 0);
	CHECK_EQ(dcache_count(dc, 50), 3);
	CHECK(!strcmp(names(dc, 50, buf, sizeof(buf)), "e0,e1,y"));
	a.dv = 3;
	dcache_follow(dc, &a, 1);
	CHECK_EQ(dcache_count(dc, 50), -ENOENT);

	/* A break on the directory drops its listing, not the other. */
	dcache_break(dc, 51);
	CHECK_EQ(dcache_count(dc, 51), -ENOENT);
	CHECK_EQ(install_n(dc, 52, 1, 1, 520, 1), 1);
	CHECK_EQ(install_n(dc, 53, 1, 1, 530, 1), 1);
	dcache_break(dc, 52);
	CHECK_EQ(dcache_count(dc, 52), -ENOENT);
	CHECK_EQ(dcache_count(dc, 53), 1);
	/* A lapse keeps the listings of directories whose tokens are held
	 * (keep_some): their names stand, the status of the entries not
	 * kept goes stale. */
	CHECK_EQ(install_n(dc, 54, 1, 2, 540, 1), 1);
	CHECK_EQ(install_n(dc, 55, 1, 1, 550, 1), 1);
	dcache_clear_except(dc, keep_some, NULL);
	CHECK_EQ(dcache_count(dc, 55), -ENOENT);
	CHECK_EQ(dcache_count(dc, 54), 2);
	CHECK_EQ(lookup(dc, 54, "e0", NULL), 1);
	CHECK_EQ(lookup(dc, 54, "e1", NULL), -EAGAIN);
	CHECK_EQ(lookup(dc, 54, "zz", NULL), 0);
	CHECK_EQ(dcache_count(dc, 53), 1);
	CHECK_EQ(lookup(dc, 53, "e0", NULL), 1);
	dcache_clear(dc);
	CHECK_EQ(dcache_count(dc, 53), -ENOENT);
	CHECK_EQ(dcache_count(dc, 54), -ENOENT);

	struct dcache_stats st;
	dcache_get_stats(dc, &st);
	CHECK_EQ(st.listings, 0);
	CHECK_EQ(st.entries, 0);
	dcache_destroy(dc);
}

static const struct cairn_attr *dirv(uint64_t dir, uint64_t dv)
{
	static struct cairn_attr a[4];
	static int i;

	a[i & 3] = attr_of(dir, dv);
	return &a[i++ & 3];
}

static void t_local_hero(void)
{
	struct dcache *dc = new_cache();
	struct dcache_ent *e;
	struct cairn_attr c = attr_of(900, 1), got;
	size_t n;
	int eof;
	char buf[256];

	/* Create: version one above: added with the next new cookie. */
	CHECK_EQ(install_n(dc, 60, 5, 2, 600, 1), 1);   /* cookies 3, 5 */
	dcache_added(dc, 60, "new", 3, &c, dirv(60, 6), 1);
	CHECK_EQ(lookup(dc, 60, "new", &got), 1);
	CHECK_EQ(got.fid.vnode, 900);
	CHECK_EQ(dcache_read(dc, 60, 5, 10, &e, &n, &eof), 0);
	CHECK(n == 1 && e[0].cookie == 7 && !strcmp(e[0].name, "new"));
	free(e);
	/* A create that found the file: same version, nothing changes. */
	dcache_added(dc, 60, "new", 3, &c, dirv(60, 6), 1);
	CHECK_EQ(dcache_count(dc, 60), 3);
	/* ... but such a reply for a name not listed drops it. */
	dcache_added(dc, 60, "zzz", 3, &c, dirv(60, 6), 1);
	CHECK_EQ(dcache_count(dc, 60), -ENOENT);

	/* Someone else's change came between (two above): dropped. */
	CHECK_EQ(install_n(dc, 61, 5, 2, 610, 1), 1);
	dcache_added(dc, 61, "new", 3, &c, dirv(61, 7), 1);
	CHECK_EQ(dcache_count(dc, 61), -ENOENT);
	/* A break of something else came while ours ran (not fresh): the
	 * listing is still edited (a break of the directory would have
	 * dropped it), the new entry's status is not promised. */
	CHECK_EQ(install_n(dc, 61, 5, 2, 610, 1), 1);
	dcache_added(dc, 61, "new", 3, &c, dirv(61, 6), 0);
	CHECK_EQ(dcache_count(dc, 61), 3);
	CHECK_EQ(lookup(dc, 61, "new", NULL), -EAGAIN);
	/* Removals and renames do not depend on it either. */
	dcache_removed(dc, 61, "e0", 2, dirv(61, 7), 0);
	CHECK_EQ(dcache_count(dc, 61), 2);

	/* Unlink: removed; another link of the object goes stale. */
	CHECK_EQ(install_n(dc, 62, 1, 3, 620, 1), 1);
	dcache_removed(dc, 62, "e1", 2, dirv(62, 2), 1);
	CHECK(!strcmp(names(dc, 62, buf, sizeof(buf)), "e0,e2"));
	CHECK_EQ(lookup(dc, 62, "e1", NULL), 0);
	dcache_removed(dc, 62, "e0", 2, dirv(62, 4), 1);   /* skipped one */
	CHECK_EQ(dcache_count(dc, 62), -ENOENT);

	/* Rename within a directory: a new cookie, status stale. */
	CHECK_EQ(install_n(dc, 63, 1, 3, 630, 1), 1);      /* next: 9 */
	dcache_renamed(dc, 63, "e0", 2, 63, "m", 1, 0, dirv(63, 2),
		       dirv(63, 2), 1);
	CHECK(!strcmp(names(dc, 63, buf, sizeof(buf)), "e1,e2,m"));
	CHECK_EQ(lookup(dc, 63, "m", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 630);
	/* Replacing an entry: it keeps its cookie and names the source. */
	dcache_renamed(dc, 63, "m", 1, 63, "e1", 2, 0, dirv(63, 3),
		       dirv(63, 3), 1);
	CHECK(!strcmp(names(dc, 63, buf, sizeof(buf)), "e1,e2"));
	CHECK_EQ(lookup(dc, 63, "e1", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 630);
	/* Exchange: the two names swap objects. */
	dcache_renamed(dc, 63, "e1", 2, 63, "e2", 2, 1, dirv(63, 4),
		       dirv(63, 4), 1);
	CHECK_EQ(lookup(dc, 63, "e1", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 632);
	CHECK_EQ(lookup(dc, 63, "e2", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 630);
	CHECK(!strcmp(names(dc, 63, buf, sizeof(buf)), "e1,e2"));
	/* A source that is not listed: not what we know. */
	dcache_renamed(dc, 63, "nope", 4, 63, "q", 1, 0, dirv(63, 5),
		       dirv(63, 5), 1);
	CHECK_EQ(dcache_count(dc, 63), -ENOENT);

	/* Across directories: both edited. */
	CHECK_EQ(install_n(dc, 64, 1, 2, 640, 1), 1);
	CHECK_EQ(install_n(dc, 65, 1, 1, 650, 1), 1);
	dcache_renamed(dc, 64, "e1", 2, 65, "in", 2, 0, dirv(64, 2),
		       dirv(65, 2), 1);
	CHECK(!strcmp(names(dc, 64, buf, sizeof(buf)), "e0"));
	CHECK(!strcmp(names(dc, 65, buf, sizeof(buf)), "e0,in"));
	CHECK_EQ(lookup(dc, 65, "in", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 641);
	/* Exchange across: swapped. */
	dcache_renamed(dc, 64, "e0", 2, 65, "in", 2, 1, dirv(64, 3),
		       dirv(65, 3), 1);
	CHECK_EQ(lookup(dc, 64, "e0", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 641);
	CHECK_EQ(lookup(dc, 65, "in", &got), -EAGAIN);
	CHECK_EQ(got.fid.vnode, 640);
	/* Into a listed directory from one that is not: the object is not
	 * known, so the destination goes; the source is just edited. */
	dcache_break(dc, 64);
	dcache_renamed(dc, 64, "e0", 2, 65, "z", 1, 0, dirv(64, 4),
		       dirv(65, 4), 1);
	CHECK_EQ(dcache_count(dc, 65), -ENOENT);
	CHECK_EQ(install_n(dc, 66, 1, 2, 660, 1), 1);
	dcache_renamed(dc, 66, "e0", 2, 67, "z", 1, 0, dirv(66, 2),
		       dirv(67, 9), 1);
	CHECK(!strcmp(names(dc, 66, buf, sizeof(buf)), "e1"));

	struct dcache_stats st;
	dcache_get_stats(dc, &st);
	CHECK(st.edits >= 9);
	dcache_destroy(dc);
}

/* Listings beyond DCACHE_ENTS_MAX in all: the least recently used go. */
static void t_room(void)
{
	struct dcache *dc = new_cache();
	int per = (int)(DCACHE_ENTS_MAX / 9) * 2, i; /* 4 fit, 5 do not */

	for (i = 0; i < 4; i++)
		CHECK_EQ(install_n(dc, 70 + (uint64_t)i, 1, per,
				   100000 + (uint64_t)i * 100000, 1), 1);
	CHECK_EQ(lookup(dc, 70, "e0", NULL), 1); /* 70 used: 71 is oldest */
	CHECK_EQ(install_n(dc, 74, 1, per, 900000, 1), 1);
	CHECK_EQ(dcache_count(dc, 71), -ENOENT);
	CHECK_EQ(dcache_count(dc, 70), per);
	CHECK_EQ(dcache_count(dc, 72), per);
	CHECK_EQ(dcache_count(dc, 74), per);

	struct dcache_stats st;
	dcache_get_stats(dc, &st);
	CHECK(st.entries <= DCACHE_ENTS_MAX);
	CHECK_EQ(st.listings, 4);
	dcache_destroy(dc);
}

struct worker {
	struct dcache *dc;
	int id;
	int bad;
};

/* Read-ahead: a listing gives its uncached subdirectories out once, after
 * enough lookups; with a fetch running (fetch_begin_absent) or a listing
 * cached, nothing is fetched twice. */
static void t_subdirs(void)
{
	struct dcache *dc = new_cache();
	struct dcache_listing *l;
	struct cairn_fid out[8];
	struct cairn_attr a;

	CHECK_EQ(dcache_fetch_begin(dc, 1), 0);
	CHECK_EQ(dcache_listing_new(&l), 0);
	a = attr_of(10, 1);
	a.mode = 040755;
	CHECK_EQ(dcache_listing_add(l, 3, "d1", 2, &a), 0);
	a = attr_of(11, 1);
	CHECK_EQ(dcache_listing_add(l, 5, "f", 1, &a), 0);
	a = attr_of(12, 1);
	a.mode = 040755;
	CHECK_EQ(dcache_listing_add(l, 7, "d2", 2, &a), 0);
	CHECK_EQ(dcache_fetch_end(dc, 1, l, 1, 9, 1, 0), 1);
	/* d2's listing is cached already: only d1 is wanted. */
	CHECK_EQ(install_n(dc, 12, 1, 1, 100, 1), 1);
	CHECK_EQ(dcache_take_subdirs(dc, 1, 2, out, 8), 0); /* 0 lookups */
	CHECK_EQ(lookup(dc, 1, "f", NULL), 1);
	CHECK_EQ(lookup(dc, 1, "nope", NULL), 0);
	CHECK_EQ(dcache_take_subdirs(dc, 1, 2, out, 8), 1);
	CHECK_EQ(out[0].vnode, 10);
	CHECK_EQ(dcache_take_subdirs(dc, 1, 0, out, 8), 0); /* once */
	CHECK_EQ(dcache_take_subdirs(dc, 99, 0, out, 8), 0); /* no listing */
	CHECK_EQ(dcache_cached(dc, 12), 1);
	CHECK_EQ(dcache_cached(dc, 10), 0);
	CHECK_EQ(dcache_fetch_begin_absent(dc, 12), -EEXIST);
	CHECK_EQ(dcache_fetch_begin_absent(dc, 10), 0);
	CHECK_EQ(dcache_fetch_begin(dc, 10), -EBUSY);
	CHECK_EQ(dcache_fetch_wait(dc, 10, 10), -ETIMEDOUT);
	CHECK_EQ(dcache_fetch_end(dc, 10, NULL, 1, 3, 1, 0), 0);
	CHECK_EQ(dcache_fetch_wait(dc, 10, 10), -ENOENT);
	CHECK_EQ(dcache_fetch_wait(dc, 12, 10), 0);
	dcache_destroy(dc);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 2000; i++) {
		uint64_t dir = 80 + (uint64_t)(i % 4);
		struct cairn_attr a;
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "e%d", i % 7);
		switch ((i + w->id) % 5) {
		case 0:
			install_n(w->dc, dir, 1, 7, dir * 100, 1);
			break;
		case 1:
			dcache_break(w->dc, dir);
			break;
		case 2:
			dcache_break(w->dc, dir * 100 + 3);
			break;
		default:
			rc = dcache_lookup(w->dc, dir, name, strlen(name), &a);
			if (rc == 1 && a.fid.vnode != dir * 100 + (uint64_t)(i % 7))
				w->bad++;
			break;
		}
	}
	return NULL;
}

static void t_concurrent(void)
{
	struct dcache *dc = new_cache();
	struct worker w[4];
	pthread_t th[4];

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ dc, i, 0 };
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].bad, 0);
	}
	dcache_clear(dc);
	struct dcache_stats st;
	dcache_get_stats(dc, &st);
	CHECK_EQ(st.entries, 0);
	dcache_destroy(dc);
}

int main(void)
{
	run("dircache install, lookup found and absent", t_install_lookup);
	run("dircache fetch: one at a time, breaks during it, malformed",
	    t_fetch_rules);
	run("dircache a directory too big is not cached until it changes",
	    t_too_big);
	run("dircache read pages by cookie", t_read_pages);
	run("dircache breaks and replies: stale, promised, dropped",
	    t_breaks_and_replies);
	run("dircache our own changes edited in place (LocalHero) or dropped",
	    t_local_hero);
	run("dircache room: least recently used listings go", t_room);
	run("dircache read-ahead: subdirectories given out once", t_subdirs);
	run("dircache concurrent installs, breaks and lookups",
	    t_concurrent);
	return failed_total ? 1 : 0;
}

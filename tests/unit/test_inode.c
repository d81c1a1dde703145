/*
 * test_inode.c - unit tests for client/inode.h: lookup counts and forget,
 * recorded names (hard links, rename, exchange, unlink, the per-inode cap),
 * negative entries and their caps, the callback and page-cache state, what
 * open and lookup see in their one look at the table, the reconnect walk,
 * and concurrent use from several threads. In a CAIRN_DEBUG build (make
 * SAN=1), also that the lock checks fire: a visitor that calls back into
 * the table aborts instead of deadlocking.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../client/inode.h"
#include "check.h"

static struct cairn_attr attr_of(uint64_t vnode, uint32_t uniq, uint64_t dv)
{
	struct cairn_attr a;

	memset(&a, 0, sizeof(a));
	a.fid.vol = 1;
	a.fid.vnode = vnode;
	a.fid.uniq = uniq;
	a.mode = 0100644;
	a.nlink = 1;
	a.dv = dv;
	return a;
}

static struct itab *new_table(void)
{
	struct cairn_attr root = attr_of(ITAB_ROOT_INO, 1, 1);
	struct itab *t = NULL;

	root.mode = 040755;
	if (itab_create(&root, &t) != 0) {
		fprintf(stderr, "itab_create failed\n");
		exit(1);
	}
	return t;
}

static int add(struct itab *t, uint64_t parent, const char *name,
	       uint64_t vnode, uint64_t dv, int promise)
{
	struct cairn_attr a = attr_of(vnode, (uint32_t)vnode * 7 + 1, dv);

	uint64_t nodeid;

	return itab_add_entry(t, parent, name, strlen(name), &a, promise, NULL,
			      &nodeid);
}

/* Would open keep ino's page cache? (1, 0, or -ESTALE; counts nothing.) */
static int keeps(struct itab *t, uint64_t ino)
{
	struct cairn_fid fid;

	return itab_open_begin(t, ino, 1, &fid);
}

/* Whether the promise on ino stands (0 for an unknown ino). */
static int promised(struct itab *t, uint64_t ino)
{
	struct cairn_fid fid;
	int promise = 0;

	return itab_fid_promise(t, ino, &fid, &promise) == 0 && promise;
}

static void t_root(void)
{
	struct itab *t = new_table();
	struct cairn_attr bad = attr_of(2, 1, 1);
	struct itab *t2 = NULL;
	struct itab_info info;
	struct cairn_fid fid;

	CHECK_EQ(itab_count(t), 1);
	CHECK_EQ(itab_fid(t, ITAB_ROOT_INO, &fid), 0);
	CHECK_EQ(fid.vnode, 1);
	CHECK_EQ(fid.uniq, 1);
	CHECK_EQ(itab_fid(t, 42, &fid), -ESTALE);
	/* The root is pinned: the kernel never forgets it. */
	itab_forget(t, ITAB_ROOT_INO, 1000, NULL);
	CHECK_EQ(itab_info(t, ITAB_ROOT_INO, &info), 0);
	CHECK_EQ(itab_create(&bad, &t2), -EINVAL);
	itab_destroy(t);
}

static void t_lookup_counts(void)
{
	struct itab *t = new_table();
	struct itab_info info;
	struct cairn_fid fid;

	CHECK_EQ(add(t, 1, "a", 5, 1, 1), 0);
	CHECK_EQ(add(t, 1, "a", 5, 1, 1), 0);
	CHECK_EQ(add(t, 1, "a", 5, 1, 1), 0);
	CHECK_EQ(itab_count(t), 2);
	CHECK_EQ(itab_info(t, 5, &info), 0);
	CHECK_EQ(info.nlookup, 3);
	CHECK_EQ(info.nnames, 1);
	CHECK_EQ(itab_fid(t, 5, &fid), 0);
	CHECK_EQ(fid.uniq, 5 * 7 + 1);
	itab_forget(t, 5, 2, NULL);
	CHECK_EQ(itab_info(t, 5, &info), 0);
	CHECK_EQ(info.nlookup, 1);
	itab_forget(t, 5, 1, NULL);
	CHECK_EQ(itab_info(t, 5, &info), -ENOENT);
	CHECK_EQ(itab_fid(t, 5, &fid), -ESTALE);
	CHECK_EQ(itab_count(t), 1);
	/* The name went with the inode. */
	CHECK_EQ(itab_entry(t, 1, "a", 1), -ENOENT);
	/* Forgetting more than was looked up, or an unknown inode. */
	CHECK_EQ(add(t, 1, "b", 6, 1, 1), 0);
	itab_forget(t, 6, 99, NULL);
	CHECK_EQ(itab_count(t), 1);
	itab_forget(t, 12345, 1, NULL);
	/* Bad input takes nothing. */
	CHECK_EQ(add(t, 1, "", 7, 1, 1), -EINVAL);
	CHECK_EQ(add(t, 1, "x", 0, 1, 1), -EINVAL);
	CHECK_EQ(itab_count(t), 1);
	itab_destroy(t);
}

static void t_names(void)
{
	struct itab *t = new_table();
	struct itab_info info;
	uint64_t parent;

	CHECK_EQ(add(t, 1, "d", 10, 1, 1), 0);      /* a directory */
	CHECK_EQ(add(t, 1, "f", 11, 1, 1), 0);
	CHECK_EQ(add(t, 10, "hardlink", 11, 1, 1), 0);
	CHECK_EQ(itab_info(t, 11, &info), 0);
	CHECK_EQ(info.nnames, 2);
	CHECK_EQ(info.nlookup, 2);
	CHECK_EQ(itab_entry(t, 1, "f", 1), 11);
	CHECK_EQ(itab_entry(t, 10, "hardlink", 8), 11);
	CHECK_EQ(itab_parent(t, 11, &parent), 0);
	CHECK_EQ(parent, 10); /* newest name first */
	CHECK_EQ(itab_parent(t, 1, &parent), 0);
	CHECK_EQ(parent, 1);

	/* unlink */
	itab_remove_entry(t, 10, "hardlink", 8);
	CHECK_EQ(itab_entry(t, 10, "hardlink", 8), -ENOENT);
	CHECK_EQ(itab_info(t, 11, &info), 0);
	CHECK_EQ(info.nnames, 1);
	CHECK_EQ(info.nlookup, 2); /* only forget drops references */

	/* rename f -> d/g, over an existing g */
	CHECK_EQ(add(t, 10, "g", 12, 1, 1), 0);
	itab_rename(t, 1, "f", 1, 10, "g", 1, 0);
	CHECK_EQ(itab_entry(t, 1, "f", 1), -ENOENT);
	CHECK_EQ(itab_entry(t, 10, "g", 1), 11);
	CHECK_EQ(itab_info(t, 12, &info), 0);
	CHECK_EQ(info.nnames, 0);

	/* exchange d/g (11) and d (10)'s sibling h (12) */
	CHECK_EQ(add(t, 1, "h", 12, 1, 1), 0);
	itab_rename(t, 10, "g", 1, 1, "h", 1, 1);
	CHECK_EQ(itab_entry(t, 10, "g", 1), 12);
	CHECK_EQ(itab_entry(t, 1, "h", 1), 11);

	/* A name handed out for another inode moves to it. */
	CHECK_EQ(add(t, 1, "h", 13, 1, 1), 0);
	CHECK_EQ(itab_entry(t, 1, "h", 1), 13);
	CHECK_EQ(itab_info(t, 11, &info), 0);
	CHECK_EQ(info.nnames, 0);

	/* At most ITAB_NAMES_MAX names per inode. */
	for (int i = 0; i < 40; i++) {
		char name[32];

		snprintf(name, sizeof(name), "link%d", i);
		CHECK_EQ(add(t, 10, name, 14, 1, 1), 0);
	}
	CHECK_EQ(itab_info(t, 14, &info), 0);
	CHECK_EQ(info.nnames, ITAB_NAMES_MAX);
	CHECK_EQ(info.nlookup, 40);
	CHECK_EQ(itab_entry(t, 10, "link39", 6), 14);
	CHECK_EQ(itab_entry(t, 10, "link0", 5), -ENOENT);
	itab_destroy(t);
}

static void t_negative(void)
{
	struct itab *t = new_table();
	struct cairn_attr root = attr_of(ITAB_ROOT_INO, 1, 1);
	struct itab_info info;
	int rc = 0, n;

	CHECK_EQ(itab_add_negative(t, 1, "missing", 7), 0);
	CHECK_EQ(itab_add_negative(t, 1, "missing", 7), 0);
	CHECK_EQ(itab_entry(t, 1, "missing", 7), 0);
	CHECK_EQ(itab_info(t, 1, &info), 0);
	CHECK_EQ(info.nnegs, 1);
	/* Created later: the negative entry becomes positive. */
	CHECK_EQ(add(t, 1, "missing", 20, 1, 1), 0);
	CHECK_EQ(itab_entry(t, 1, "missing", 7), 20);
	CHECK_EQ(itab_info(t, 1, &info), 0);
	CHECK_EQ(info.nnegs, 0);
	/* A break on the directory forgets its entries. */
	CHECK_EQ(itab_add_negative(t, 1, "gone", 4), 0);
	CHECK_EQ(itab_break(t, 1, 0, NULL, NULL), 0);
	CHECK_EQ(itab_entry(t, 1, "gone", 4), -ENOENT);
	CHECK_EQ(itab_entry(t, 1, "missing", 7), -ENOENT);
	/* A negative LOOKUP promises the directory again. */
	CHECK_EQ(promised(t, 1), 0);
	CHECK_EQ(itab_add_negative(t, 1, "gone", 4), 0);
	CHECK_EQ(promised(t, 1), 1);
	CHECK_EQ(itab_entry(t, 1, "gone", 4), 0);
	itab_remove_entry(t, 1, "gone", 4);
	CHECK_EQ(itab_break(t, 999, 0, NULL, NULL), -ENOENT);
	/* Unknown directory. */
	CHECK_EQ(itab_add_negative(t, 999, "x", 1), -ESTALE);
	/* Per-directory cap. */
	for (n = 0; n < (int)ITAB_NEGS_DIR_MAX + 10; n++) {
		char name[32];

		snprintf(name, sizeof(name), "n%d", n);
		rc = itab_add_negative(t, 1, name, strlen(name));
		if (rc)
			break;
	}
	CHECK_EQ(rc, -ENOSPC);
	CHECK_EQ(n, ITAB_NEGS_DIR_MAX);
	CHECK_EQ(itab_info(t, 1, &info), 0);
	CHECK_EQ(info.nnegs, ITAB_NEGS_DIR_MAX);
	/* The negative LOOKUP still promised the directory: a reply that
	 * took the promise away (keeping the entries), then one over the
	 * cap. */
	itab_update(t, &root, 0);
	CHECK_EQ(promised(t, 1), 0);
	CHECK_EQ(itab_add_negative(t, 1, "over", 4), -ENOSPC);
	CHECK_EQ(promised(t, 1), 1);
	/* A directory's negative entries go when it is forgotten. */
	CHECK_EQ(add(t, 1, "sub", 30, 1, 1), 0);
	CHECK_EQ(itab_add_negative(t, 30, "nothere", 7), 0);
	itab_forget(t, 30, 1, NULL);
	CHECK_EQ(itab_entry(t, 30, "nothere", 7), -ENOENT);
	itab_destroy(t);
}

static void t_callback_state(void)
{
	struct itab *t = new_table();
	struct cairn_attr a = attr_of(40, 40 * 7 + 1, 5);
	struct itab_info info;

	CHECK_EQ(add(t, 1, "f", 40, 5, 1), 0);
	/* Never opened: opened without the server (attributes current),
	 * the kernel's pages dropped. */
	CHECK_EQ(keeps(t, 40), 2);
	itab_open_end(t, 40, &a, 1); /* opened after a fresh GETATTR */
	CHECK_EQ(keeps(t, 40), 1);
	/* Our own write: the page cache follows the new version. */
	a.dv = 6;
	itab_update(t, &a, 1);
	CHECK_EQ(keeps(t, 40), 1);
	CHECK_EQ(itab_info(t, 40, &info), 0);
	CHECK_EQ(info.dv, 6);
	CHECK_EQ(info.cache_dv, 6);
	/* A break ends the promise and the cache. */
	CHECK_EQ(promised(t, 40), 1);
	CHECK_EQ(itab_break(t, 40, 0, NULL, NULL), 0);
	CHECK_EQ(keeps(t, 40), 0);
	CHECK_EQ(itab_info(t, 40, &info), 0);
	CHECK_EQ(info.promise, 0);
	CHECK_EQ(info.cache_valid, 0);
	CHECK_EQ(promised(t, 40), 0);
	CHECK_EQ(itab_break(t, 41, 0, NULL, NULL), -ENOENT);
	/* A promise registered without attributes (READDIR). */
	itab_set_promised(t, 40);
	CHECK_EQ(promised(t, 40), 1);
	itab_update(t, &a, 0);
	/* A fresh reply restores the promise but not the cache: the
	 * next open drops the kernel's pages, asking the server nothing. */
	a.dv = 9;
	itab_update(t, &a, 1);
	CHECK_EQ(keeps(t, 40), 2);
	/* An open whose GETATTR raced with a break: nothing is trusted
	 * (the cache only ever stands with the promise). */
	itab_open_end(t, 40, &a, 0);
	CHECK_EQ(keeps(t, 40), 0);
	CHECK_EQ(itab_info(t, 40, &info), 0);
	CHECK_EQ(info.promise, 0);
	CHECK_EQ(info.cache_valid, 0);
	itab_open_end(t, 40, &a, 1);
	CHECK_EQ(keeps(t, 40), 1);
	/* A reply that raced with a break. */
	itab_update(t, &a, 0);
	CHECK_EQ(keeps(t, 40), 0);
	CHECK_EQ(itab_info(t, 40, &info), 0);
	CHECK_EQ(info.cache_valid, 0);
	/* Absent xattrs follow the promise. */
	itab_update(t, &a, 1);
	itab_set_xattr_absent(t, 40, 1, 1);
	itab_set_xattr_absent(t, 40, 4, 1);
	CHECK_EQ(itab_xattr_absent(t, 40, 1), 1);
	CHECK_EQ(itab_xattr_absent(t, 40, 7), 5);
	itab_set_xattr_absent(t, 40, 1, 0);
	CHECK_EQ(itab_xattr_absent(t, 40, 7), 4);
	itab_break(t, 40, 0, NULL, NULL);
	CHECK_EQ(itab_xattr_absent(t, 40, 7), 0);
	itab_set_xattr_absent(t, 40, 1, 1); /* no promise: refused */
	CHECK_EQ(itab_xattr_absent(t, 40, 1), 0);
	itab_destroy(t);
}

struct visit_count {
	int inodes, names, negs;
};

static void count_visit(void *arg, uint64_t ino, uint64_t parent,
			const char *name, size_t len, int isdir)
{
	struct visit_count *c = arg;

	if (!name)
		c->inodes++;
	else if (ino)
		c->names++;
	else
		c->negs++;
	(void)parent;
	(void)len;
}

/* Names a and b in the root, c in 2 (naming b's inode again), and a
 * negative "no" in each directory. */
static void add_two_dirs(struct itab *t)
{
	CHECK_EQ(add(t, 1, "a", 2, 1, 1), 0);
	CHECK_EQ(add(t, 1, "b", 3, 1, 1), 0);
	CHECK_EQ(add(t, 2, "c", 3, 1, 1), 0);
	CHECK_EQ(itab_add_negative(t, 1, "no", 2), 0);
	CHECK_EQ(itab_add_negative(t, 2, "no", 2), 0);
}

static void t_break_all(void)
{
	struct itab *t = new_table();
	struct visit_count c = { 0, 0, 0 };
	struct cairn_attr a3 = attr_of(3, 3 * 7 + 1, 1);
	struct itab_info info;

	add_two_dirs(t);
	itab_open_end(t, 3, &a3, 1);
	CHECK_EQ(keeps(t, 3), 1);
	itab_break_all(t, count_visit, &c);
	CHECK_EQ(c.inodes, 3);
	CHECK_EQ(c.names, 3);
	CHECK_EQ(c.negs, 2);
	CHECK_EQ(keeps(t, 3), 0);
	CHECK_EQ(itab_info(t, 1, &info), 0);
	CHECK_EQ(info.promise, 0);
	CHECK_EQ(info.nnegs, 0);
	CHECK_EQ(itab_entry(t, 1, "no", 2), -ENOENT);
	/* Every dentry was invalidated, so none is recorded any more; the
	 * inodes stay (the kernel still references them). */
	CHECK_EQ(itab_entry(t, 2, "c", 1), -ENOENT);
	CHECK_EQ(itab_count(t), 3);
	itab_destroy(t);
}

static int keep_vnode2(void *arg, const struct cairn_fid *fid)
{
	(void)arg;
	return fid->vnode == 2;
}

/* A lapse (notify.c) spares what a write token covers: the spared
 * inode's promise, and every entry in it, positive or negative; all else
 * goes as in t_break_all, names of the spared inode elsewhere too. */
static void t_break_all_except(void)
{
	struct itab *t = new_table();
	struct visit_count c = { 0, 0, 0 };
	struct itab_info info;

	add_two_dirs(t);
	itab_break_all_except(t, keep_vnode2, NULL, count_visit, &c);
	CHECK_EQ(c.inodes, 2);   /* 1 and 3 */
	CHECK_EQ(c.names, 2);    /* a and b, in 1 */
	CHECK_EQ(c.negs, 1);     /* no, in 1 */
	CHECK_EQ(promised(t, 2), 1);
	CHECK_EQ(promised(t, 1), 0);
	CHECK_EQ(promised(t, 3), 0);
	CHECK_EQ(itab_entry(t, 2, "c", 1), 3);
	CHECK_EQ(itab_info(t, 2, &info), 0);
	CHECK_EQ(info.nnegs, 1);
	CHECK_EQ(itab_entry(t, 1, "a", 1), -ENOENT);
	CHECK_EQ(itab_entry(t, 1, "b", 1), -ENOENT);
	CHECK_EQ(itab_info(t, 1, &info), 0);
	CHECK_EQ(info.nnegs, 0);
	/* No spared inode: as itab_break_all. */
	c = (struct visit_count){ 0, 0, 0 };
	itab_break_all_except(t, NULL, NULL, count_visit, &c);
	CHECK_EQ(c.inodes, 3);
	CHECK_EQ(promised(t, 2), 0);
	CHECK_EQ(itab_entry(t, 2, "c", 1), -ENOENT);
	itab_destroy(t);
}

/* A break on a directory hands back every entry in it, positive and
 * negative, and forgets them; entries elsewhere stay. */
static void t_break_dir(void)
{
	struct itab *t = new_table();
	struct visit_count c = { 0, 0, 0 };
	struct itab_info info;

	CHECK_EQ(add(t, 1, "d", 2, 1, 1), 0);
	CHECK_EQ(add(t, 2, "a", 3, 1, 1), 0);
	CHECK_EQ(add(t, 2, "b", 4, 1, 1), 0);
	CHECK_EQ(itab_add_negative(t, 2, "no", 2), 0);
	CHECK_EQ(add(t, 1, "e", 5, 1, 1), 0);
	CHECK_EQ(itab_break(t, 2, 0, count_visit, &c), 0);
	CHECK_EQ(c.inodes, 0);
	CHECK_EQ(c.names, 2);
	CHECK_EQ(c.negs, 1);
	CHECK_EQ(itab_entry(t, 2, "a", 1), -ENOENT);
	CHECK_EQ(itab_entry(t, 2, "no", 2), -ENOENT);
	CHECK_EQ(itab_entry(t, 1, "d", 1), 2);
	CHECK_EQ(itab_entry(t, 1, "e", 1), 5);
	CHECK_EQ(itab_info(t, 3, &info), 0);
	CHECK_EQ(info.nnames, 0);
	CHECK_EQ(info.nlookup, 1);
	CHECK_EQ(promised(t, 2), 0);
	CHECK_EQ(promised(t, 3), 1);
	itab_destroy(t);
}

/* open in one look at the table: the FID and whether the page cache may
 * stay; and the end of an open that fetched attributes. */
static void t_open(void)
{
	struct itab *t = new_table();
	struct cairn_attr a = attr_of(50, 50 * 7 + 1, 3);
	struct cairn_attr reused = attr_of(50, 999, 8);
	struct cairn_attr other = attr_of(51, 51 * 7 + 1, 9);
	struct itab_info info;
	struct cairn_fid fid;

	CHECK_EQ(itab_open_begin(t, 50, 1, &fid), -ESTALE);
	CHECK_EQ(add(t, 1, "f", 50, 3, 1), 0);
	/* Never opened, but its attributes are current under the promise:
	 * opened here without the server, the kernel's pages dropped (2),
	 * and what it reads next is of this version. */
	memset(&fid, 0, sizeof(fid));
	CHECK_EQ(itab_open_begin(t, 50, 1, &fid), 2);
	CHECK_EQ(fid.vnode, 50);
	CHECK_EQ(fid.uniq, 50 * 7 + 1);
	CHECK_EQ(itab_info(t, 50, &info), 0);
	CHECK_EQ(info.cache_valid, 1);
	CHECK_EQ(info.cache_dv, 3);
	/* Known without a promise: the caller fetches attributes. */
	CHECK_EQ(add(t, 1, "g", 52, 5, 0), 0);
	CHECK_EQ(itab_open_begin(t, 52, 1, &fid), 0);
	itab_open_end(t, 50, &a, 1);
	CHECK_EQ(itab_info(t, 50, &info), 0);
	CHECK_EQ(info.cache_valid, 1);
	CHECK_EQ(info.cache_dv, 3);
	/* The fast path. */
	memset(&fid, 0, sizeof(fid));
	CHECK_EQ(itab_open_begin(t, 50, 1, &fid), 1);
	CHECK_EQ(fid.vnode, 50);
	/* O_TRUNC (keep 0) never keeps. */
	CHECK_EQ(itab_open_begin(t, 50, 0, &fid), 0);
	/* A break: the next open fetches attributes again. */
	CHECK_EQ(itab_break(t, 50, 0, NULL, NULL), 0);
	CHECK_EQ(itab_open_begin(t, 50, 1, &fid), 0);
	/* Its GETATTR raced with another break: attributes taken, neither
	 * promise nor cache. */
	a.dv = 4;
	itab_open_end(t, 50, &a, 0);
	CHECK_EQ(itab_info(t, 50, &info), 0);
	CHECK_EQ(info.dv, 4);
	CHECK_EQ(info.promise, 0);
	CHECK_EQ(info.cache_valid, 0);
	/* Attributes of another object (a broken server) are not taken. */
	itab_open_end(t, 50, &reused, 1);
	itab_open_end(t, 50, &other, 1);
	CHECK_EQ(itab_info(t, 50, &info), 0);
	CHECK_EQ(info.dv, 4);
	CHECK_EQ(info.promise, 0);
	CHECK_EQ(info.cache_valid, 0);
	CHECK_EQ(keeps(t, 50), 0);
	/* Unknown inodes: nothing happens. */
	itab_open_end(t, 77, &a, 1);
	CHECK_EQ(itab_info(t, 77, &info), -ENOENT);
	itab_destroy(t);
}

static void take_fid(void *arg, const struct cairn_fid *fid)
{
	struct cairn_fid *out = arg;

	*out = *fid;
}

/* Unlinked while maybe open: the FID comes back when the kernel forgets
 * the inode, once; or at unmount. */
static void t_orphan(void)
{
	struct itab *t = new_table();
	struct itab_counts c;
	struct cairn_fid fid;

	CHECK_EQ(itab_set_orphan(t, 60), -ENOENT);
	CHECK_EQ(add(t, 1, "f", 60, 3, 1), 0);
	CHECK_EQ(add(t, 1, "f", 60, 3, 1), 0); /* looked up twice */
	CHECK_EQ(add(t, 1, "g", 61, 3, 1), 0);
	CHECK_EQ(add(t, 1, "h", 62, 3, 1), 0);
	CHECK_EQ(itab_set_orphan(t, 60), 0);
	CHECK_EQ(itab_set_orphan(t, 62), 0);
	itab_get_counts(t, &c);
	CHECK_EQ(c.orphans, 2);
	memset(&fid, 0, sizeof(fid));
	CHECK_EQ(itab_forget(t, 60, 1, &fid), 0); /* still held */
	CHECK_EQ(itab_forget(t, 61, 1, &fid), 0); /* not marked */
	CHECK_EQ(fid.vnode, 0);
	CHECK_EQ(itab_forget(t, 60, 1, &fid), 1);
	CHECK_EQ(fid.vnode, 60);
	CHECK_EQ(fid.uniq, 60 * 7 + 1);
	CHECK_EQ(itab_forget(t, 60, 1, &fid), 0); /* gone */
	/* Unmount: what the kernel still held. */
	memset(&fid, 0, sizeof(fid));
	itab_take_orphans(t, take_fid, &fid);
	CHECK_EQ(fid.vnode, 62);
	itab_get_counts(t, &c);
	CHECK_EQ(c.orphans, 0);
	CHECK_EQ(itab_forget(t, 62, 1, NULL), 0);
	itab_destroy(t);
}

static void visit_nothing(void *arg, uint64_t ino, uint64_t parent,
			  const char *name, size_t len, int isdir)
{
}

/* GETATTR from the table: attributes a fresh reply gave, while the
 * promise stands and no change of ours came back without them. */
static void t_getattr(void)
{
	struct itab *t = new_table();
	struct cairn_attr a = attr_of(45, 45 * 7 + 1, 3), got;
	uint64_t nodeid;

	CHECK_EQ(itab_getattr(t, ITAB_ROOT_INO, &got), 0); /* from HELLO */
	CHECK_EQ(got.fid.vnode, ITAB_ROOT_INO);
	CHECK_EQ(itab_getattr(t, 45, &got), -ESTALE);
	a.size = 77;
	CHECK_EQ(itab_add_entry(t, 1, "g", 1, &a, 1, NULL, &nodeid), 0);
	CHECK_EQ(itab_getattr(t, 45, &got), 0);
	CHECK_EQ(got.size, 77);
	CHECK_EQ(got.dv, 3);
	/* Our write: the reply's attributes replace them. */
	a.size = 99;
	a.dv = 4;
	itab_update(t, &a, 1);
	CHECK_EQ(itab_getattr(t, 45, &got), 0);
	CHECK_EQ(got.size, 99);
	/* Our setxattr (no attributes in its reply): ask the server, and
	 * a reply computed before the change does not count. */
	itab_attr_stale(t, 45);
	CHECK_EQ(itab_getattr(t, 45, &got), -EAGAIN);
	CHECK_EQ(promised(t, 45), 1);
	itab_update(t, &a, 1);
	CHECK_EQ(itab_getattr(t, 45, &got), -EAGAIN);
	a.dv = 5;
	itab_update(t, &a, 1);
	CHECK_EQ(itab_getattr(t, 45, &got), 0);
	CHECK_EQ(got.dv, 5);
	/* Replies handled out of order: an older one changes nothing. */
	struct cairn_attr older = a;
	older.dv = 4;
	older.size = 1;
	itab_update(t, &older, 1);
	CHECK_EQ(itab_getattr(t, 45, &got), 0);
	CHECK_EQ(got.size, 99);
	CHECK_EQ(got.dv, 5);
	/* A reply that raced a break, a break, a promise without
	 * attributes: none of them makes the attributes current. */
	itab_update(t, &a, 0);
	CHECK_EQ(itab_getattr(t, 45, &got), -EAGAIN);
	itab_update(t, &a, 1);
	CHECK_EQ(itab_break(t, 45, 0, NULL, NULL), 0);
	CHECK_EQ(itab_getattr(t, 45, &got), -EAGAIN);
	itab_set_promised(t, 45);
	CHECK_EQ(itab_getattr(t, 45, &got), -EAGAIN);
	itab_open_end(t, 45, &a, 1);
	CHECK_EQ(itab_getattr(t, 45, &got), 0);
	itab_break_all(t, visit_nothing, NULL);
	CHECK_EQ(itab_getattr(t, 45, &got), -EAGAIN);
	CHECK_EQ(itab_getattr(t, ITAB_ROOT_INO, &got), -EAGAIN);
	itab_attr_stale(t, 12345); /* unknown: nothing */
	itab_destroy(t);
}

/* lookup's looks: the directory's FID with its promise before the call,
 * the entry with the promise that covers its name after it. */
static void t_lookup_promise(void)
{
	struct itab *t = new_table();
	struct cairn_attr d = attr_of(60, 60 * 7 + 1, 1);
	struct cairn_attr f = attr_of(61, 61 * 7 + 1, 1);
	struct cairn_fid fid;
	int promise = -1, dp = -1;
	uint64_t nodeid;

	CHECK_EQ(itab_fid_promise(t, 60, &fid, &promise), -ESTALE);
	CHECK_EQ(itab_add_entry(t, 1, "d", 1, &d, 1, &dp, &nodeid), 0);
	CHECK_EQ(dp, 1); /* the root is promised from the start */
	memset(&fid, 0, sizeof(fid));
	CHECK_EQ(itab_fid_promise(t, 60, &fid, &promise), 0);
	CHECK_EQ(fid.vnode, 60);
	CHECK_EQ(fid.uniq, 60 * 7 + 1);
	CHECK_EQ(promise, 1);
	CHECK_EQ(itab_add_entry(t, 60, "f", 1, &f, 1, &dp, &nodeid), 0);
	CHECK_EQ(dp, 1);
	/* A break on the directory: its names are not covered any more,
	 * while the objects keep their own promises. */
	CHECK_EQ(itab_break(t, 60, 0, NULL, NULL), 0);
	CHECK_EQ(itab_fid_promise(t, 60, &fid, &promise), 0);
	CHECK_EQ(promise, 0);
	CHECK_EQ(itab_add_entry(t, 60, "f", 1, &f, 1, &dp, &nodeid), 0);
	CHECK_EQ(dp, 0);
	CHECK_EQ(promised(t, 61), 1);
	/* A reply for the directory itself brings its promise back. */
	itab_update(t, &d, 1);
	CHECK_EQ(itab_add_entry(t, 60, "f", 1, &f, 1, &dp, &nodeid), 0);
	CHECK_EQ(dp, 1);
	/* A name in an unknown directory is covered by nothing. */
	CHECK_EQ(itab_add_entry(t, 999, "g", 1, &f, 1, &dp, &nodeid), 0);
	CHECK_EQ(dp, 0);
	/* Bad input: nothing taken, dp untouched. */
	dp = -1;
	CHECK_EQ(itab_add_entry(t, 60, "", 0, &f, 1, &dp, &nodeid), -EINVAL);
	CHECK_EQ(dp, -1);
	itab_destroy(t);
}

static void t_many(void)
{
	struct itab *t = new_table();
	enum { N = 20000 };
	char name[32];

	for (uint64_t i = 2; i < N; i++) {
		snprintf(name, sizeof(name), "f%llu", (unsigned long long)i);
		CHECK_EQ(add(t, 1, name, i, 1, 1), 0);
	}
	CHECK_EQ(itab_count(t), N - 1);
	for (uint64_t i = 2; i < N; i += 997) {
		snprintf(name, sizeof(name), "f%llu", (unsigned long long)i);
		CHECK_EQ(itab_entry(t, 1, name, strlen(name)), (int64_t)i);
	}
	for (uint64_t i = 2; i < N; i++)
		itab_forget(t, i, 1, NULL);
	CHECK_EQ(itab_count(t), 1);
	itab_destroy(t);
}

/* Threads looking up and forgetting an overlapping set of inodes, with a
 * breaker and a reconnect walker running alongside. */
struct worker {
	struct itab *t;
	int id;
	int errors;
};

enum { WORKERS = 4, ROUNDS = 20000, SHARED = 64 };

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned seed = (unsigned)w->id * 7919u + 1;

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t vnode = 2 + rand_r(&seed) % SHARED;
		char name[32];

		snprintf(name, sizeof(name), "n%llu.%d",
			 (unsigned long long)vnode, (int)(rand_r(&seed) % 3));
		if (add(w->t, 1, name, vnode, (uint64_t)i, i & 1))
			w->errors++;
		if (i % 3 == 0) {
			struct cairn_attr a = attr_of(vnode,
						      (uint32_t)vnode * 7 + 1,
						      (uint64_t)i);
			struct cairn_fid fid;
			int rc = itab_open_begin(w->t, vnode, 1, &fid);

			/* Referenced by this thread: always known. */
			if (rc < 0 || fid.vnode != vnode)
				w->errors++;
			if (rc == 0)
				itab_open_end(w->t, vnode, &a, i & 2);
			if (i % 11 == 0)
				itab_set_orphan(w->t, vnode);
		}
		if (i % 5 == 0)
			itab_add_negative(w->t, 1, "neg", 3);
		if (i % 7 == 0)
			itab_break(w->t, vnode, 0, NULL, NULL);
		itab_forget(w->t, vnode, 1, NULL);
	}
	return NULL;
}

static void *walker_main(void *arg)
{
	struct worker *w = arg;
	struct visit_count c;

	for (int i = 0; i < 200; i++) {
		memset(&c, 0, sizeof(c));
		itab_break_all(w->t, count_visit, &c);
		if (c.inodes < 1)
			w->errors++;
		itab_break(w->t, 1, 0, count_visit, &c);
	}
	return NULL;
}

static void t_concurrent(void)
{
	struct itab *t = new_table();
	struct worker w[WORKERS + 1];
	pthread_t th[WORKERS + 1];

	for (int i = 0; i <= WORKERS; i++) {
		w[i].t = t;
		w[i].id = i;
		w[i].errors = 0;
		pthread_create(&th[i], NULL,
			       i < WORKERS ? worker_main : walker_main, &w[i]);
	}
	for (int i = 0; i <= WORKERS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].errors, 0);
	}
	/* Every lookup was matched by a forget: only the root is left. */
	CHECK_EQ(itab_count(t), 1);
	itab_destroy(t);
}

#ifdef CAIRN_DEBUG
/* A visitor breaking its contract ("runs with the table's lock held: it
 * must only copy and queue"): it asks the table for a count. */
static void reentering_visit(void *arg, uint64_t ino, uint64_t parent,
			     const char *name, size_t len, int isdir)
{
	(void)itab_count(arg);
	(void)ino;
	(void)parent;
	(void)name;
	(void)len;
}

/*
 * Run itab_break with that visitor in a child. Without the checks the
 * child deadlocks on the table's (non-recursive) mutex, which the alarm
 * turns into SIGALRM; with them it aborts (SIGABRT), naming the lock.
 */
static void t_lock_check_fires(void)
{
	char out[4096], sink[512];
	size_t got = 0;
	int fds[2], status;
	ssize_t r;
	pid_t pid;

	if (pipe(fds)) {
		CHECK(!"pipe");
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		CHECK(!"fork");
		return;
	}
	if (pid == 0) {
		struct itab *t = new_table();

		dup2(fds[1], 2);
		close(fds[0]);
		alarm(5);
		add(t, 1, "d", 2, 1, 1);
		add(t, 2, "f", 3, 1, 1);
		itab_break(t, 2, 0, reentering_visit, t);
		_exit(0); /* the visitor returned: nothing was checked */
	}
	close(fds[1]);
	/* Read to the end (a sanitizer's stack trace may follow): a child
	 * writing to a closed pipe would die of SIGPIPE instead. */
	while (got < sizeof(out) - 1 &&
	       (r = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	while (read(fds[0], sink, sizeof(sink)) > 0)
		;
	close(fds[0]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	/* SIGABRT; or, when ASAN_OPTIONS has handle_abort=1, ASan's report
	 * and a failure exit. Never a clean exit nor the alarm. */
	CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) ||
	      (WIFEXITED(status) && WEXITSTATUS(status) != 0));
	CHECK(strstr(out, "BUG: lock &t->lock held by this thread") != NULL);
	if (failed_here)
		fprintf(stderr, "  child's stderr: %s\n", out);
}
#endif

/* A dentry or inode the break hands back, by node id. */
struct visit_log {
	uint64_t ino[8];
	int named[8];
	int n;
};

static void log_visit(void *arg, uint64_t ino, uint64_t parent,
		      const char *name, size_t len, int isdir)
{
	struct visit_log *v = arg;

	if (v->n < 8) {
		v->ino[v->n] = ino;
		v->named[v->n] = name != NULL;
		v->n++;
	}
	(void)parent;
	(void)len;
}

static uint64_t add_id(struct itab *t, uint64_t parent, const char *name,
		       const struct cairn_attr *a)
{
	uint64_t nodeid = 0;

	CHECK_EQ(itab_add_entry(t, parent, name, strlen(name), a, 1, NULL,
				&nodeid), 0);
	return nodeid;
}

/* A directory another client moved: a break on its parent only expires
 * its name in the kernel (the dentry stays, someone's working directory
 * with it), so the name stays recorded; looked up there again it keeps
 * its node id, found under another name it gets a new one (the kernel
 * would otherwise move the old dentry, which it refuses inside a
 * rename with ESTALE). */
static void t_dir_incarnations(void)
{
	struct itab *t = new_table();
	struct cairn_attr d0 = attr_of(20, 141, 1), d1 = attr_of(21, 148, 1);
	struct cairn_attr w = attr_of(30, 211, 1);
	struct visit_log v = { 0 };
	uint64_t inc1 = 30 | (1ull << ITAB_GEN_SHIFT);
	struct cairn_fid fid;

	d0.mode = d1.mode = w.mode = 040755;
	CHECK_EQ(add_id(t, 1, "d0", &d0), 20);
	CHECK_EQ(add_id(t, 1, "d1", &d1), 21);
	CHECK_EQ(add_id(t, 20, "w", &w), 30);

	/* A break on d0: w's name is visited (for the kernel) and kept. */
	CHECK_EQ(itab_break(t, 20, 0, log_visit, &v), 0);
	CHECK_EQ(v.n, 1);
	CHECK_EQ(v.ino[0], 30);
	CHECK_EQ(itab_entry(t, 20, "w", 1), 30);
	/* Looked up where it was: the same node id. */
	CHECK_EQ(add_id(t, 20, "w", &w), 30);

	/* Expired again, then found in d1 (moved there): a new one. */
	CHECK_EQ(itab_break(t, 20, 0, NULL, NULL), 0);
	CHECK_EQ(add_id(t, 21, "w", &w), inc1);
	CHECK_EQ(itab_fid(t, inc1, &fid), 0);
	CHECK_EQ(fid.vnode, 30);
	CHECK_EQ(itab_fid(t, 30, &fid), 0); /* the old one lives on */
	/* Where it was, the server now says nothing: that name goes. */
	CHECK_EQ(itab_add_negative(t, 20, "w", 1), 0);
	CHECK_EQ(itab_entry(t, 20, "w", 1), 0);
	/* Not expired anywhere now: handed out as it is. */
	CHECK_EQ(add_id(t, 21, "w", &w), inc1);

	/* A current (not expired) name elsewhere: the kernel moves its
	 * dentry itself, as before. */
	CHECK_EQ(add_id(t, 20, "w2", &w), inc1);

	/* A subdirectory the kernel holds under w's old node id, looked up
	 * under the new one: a new node id too (its old dentry stays under
	 * the old w). */
	struct cairn_attr sd = attr_of(31, 218, 1);

	sd.mode = 040755;
	CHECK_EQ(add_id(t, 30, "s", &sd), 31);
	CHECK_EQ(add_id(t, inc1, "s", &sd), 31 | (1ull << ITAB_GEN_SHIFT));
	/* Under the old one, still the old one. */
	CHECK_EQ(add_id(t, 30, "s", &sd), 31);
	itab_destroy(t);
}

static void t_incarnations(void)
{
	struct itab *t = new_table();
	struct cairn_attr f = attr_of(40, 281, 5), g = attr_of(41, 288, 2);
	struct cairn_attr got, dir = attr_of(50, 351, 1);
	struct cairn_fid fid, orphan;
	struct visit_log v = { 0 };
	uint64_t inc1 = 40 | (1ull << ITAB_GEN_SHIFT);

	/* Off (write-through): a break leaves the names and node ids. */
	CHECK_EQ(add_id(t, 1, "f", &f), 40);
	CHECK_EQ(itab_break(t, 40, 0, log_visit, &v), 0);
	CHECK_EQ(v.n, 0);
	CHECK_EQ(add_id(t, 1, "f", &f), 40);
	itab_set_evict_files(t, 1);

	/* A change of attributes only: the name goes (the kernel may drop
	 * the inode and its old ctime), but one it holds stays good. */
	CHECK_EQ(itab_break(t, 40, 1, log_visit, &v), 0);
	CHECK_EQ(v.n, 1);
	CHECK_EQ(v.named[0], 1);
	CHECK_EQ(itab_entry(t, 1, "f", 1), 40); /* kept */
	CHECK_EQ(add_id(t, 1, "f", &f), 40);
	v.n = 0;

	/* A change of data: its name goes, and the next entry for it is a
	 * new incarnation while the kernel still holds the old one. */
	CHECK_EQ(itab_break(t, 40, 0, log_visit, &v), 0);
	CHECK_EQ(v.n, 1);
	CHECK_EQ(v.ino[0], 40);
	CHECK_EQ(v.named[0], 1);
	CHECK_EQ(itab_entry(t, 1, "f", 1), -ENOENT);
	f.dv = 6;
	f.size = 99;
	CHECK_EQ(add_id(t, 1, "f", &f), inc1);
	CHECK_EQ(itab_entry(t, 1, "f", 1), (int64_t)inc1);
	CHECK_EQ(itab_fid(t, inc1, &fid), 0);
	CHECK_EQ(fid.vnode, 40);
	CHECK_EQ(fid.uniq, 281);
	CHECK_EQ(itab_fid(t, 40, &fid), 0); /* the old one lives on */
	CHECK_EQ(itab_count(t), 3);
	/* Not out of date itself: handed out again as it is. */
	CHECK_EQ(add_id(t, 1, "f", &f), inc1);

	/* Attributes from the server reach every incarnation. */
	CHECK_EQ(itab_getattr(t, 40, &got), 0);
	CHECK_EQ(got.size, 99);
	itab_attr_stale(t, 40);
	CHECK_EQ(itab_getattr(t, inc1, &got), -EAGAIN);
	CHECK_EQ(itab_getattr(t, 40, &got), -EAGAIN);

	/* A break reaches both: the other node id comes back as an inode
	 * to invalidate (the caller does node id 40 itself). */
	v.n = 0;
	CHECK_EQ(itab_break(t, 40, 0, log_visit, &v), 0);
	CHECK_EQ(v.n, 2);
	CHECK(v.ino[0] == inc1 || v.ino[1] == inc1);
	CHECK(!v.named[0] || !v.named[1]);
	CHECK_EQ(add_id(t, 1, "f", &f), 40 | (2ull << ITAB_GEN_SHIFT));

	/* An orphan is released once, when its last incarnation goes. */
	CHECK_EQ(itab_set_orphan(t, inc1), 0);
	memset(&orphan, 0, sizeof(orphan));
	CHECK_EQ(itab_forget(t, 40, 3, &orphan), 0);
	CHECK_EQ(itab_forget(t, inc1, 2, &orphan), 0);
	CHECK_EQ(itab_forget(t, 40 | (2ull << ITAB_GEN_SHIFT), 1, &orphan), 1);
	CHECK_EQ(orphan.vnode, 40);
	CHECK_EQ(itab_count(t), 1);
	/* Gone from the kernel altogether: node id 40 again. */
	f.dv = 7;
	CHECK_EQ(add_id(t, 1, "f", &f), 40);

	/* Directories never get a second incarnation. */
	dir.mode = 040755;
	CHECK_EQ(add_id(t, 1, "d", &dir), 50);
	CHECK_EQ(add_id(t, 50, "g", &g), 41);
	CHECK_EQ(itab_break(t, 50, 0, NULL, NULL), 0);
	CHECK_EQ(add_id(t, 1, "d", &dir), 50);
	/* Reconnect: every regular file is out of date. */
	itab_break_all(t, count_visit, &(struct visit_count){ 0 });
	CHECK_EQ(add_id(t, 50, "g", &g), 41 | (1ull << ITAB_GEN_SHIFT));
	CHECK_EQ(add_id(t, 1, "d", &dir), 50);
	itab_destroy(t);
}

static void t_gone(void)
{
	struct itab *t = new_table();
	struct cairn_attr f = attr_of(40, 281, 5), got;

	CHECK_EQ(add_id(t, 1, "f", &f), 40);
	CHECK_EQ(itab_gone(t, 40, &got), -ENOENT);
	f.nlink = 0;
	CHECK_EQ(itab_set_gone(t, 40, &f), 0);
	CHECK_EQ(itab_gone(t, 40, &got), 0);
	CHECK_EQ(got.nlink, 0);
	CHECK_EQ(got.dv, 5);
	CHECK_EQ(itab_set_gone(t, 99, &f), -ENOENT);
	/* Another FID under that node id is not marked. */
	f.fid.uniq = 7;
	CHECK_EQ(itab_set_gone(t, 40, &f), -ENOENT);
	CHECK_EQ(itab_gone(t, 40, &got), 0);
	CHECK_EQ(got.fid.uniq, 281);
	/* Linked again: a name handed out clears it. */
	f = attr_of(40, 281, 6);
	CHECK_EQ(add_id(t, 1, "g", &f), 40);
	CHECK_EQ(itab_gone(t, 40, &got), -ENOENT);
	itab_destroy(t);
}

int main(void)
{
	run("root is present and pinned", t_root);
	run("lookup counts and forget", t_lookup_counts);
	run("names: links, unlink, rename, exchange, cap", t_names);
	run("negative entries and their caps", t_negative);
	run("promise and page cache state", t_callback_state);
	run("open: one look decides and ends", t_open);
	run("orphans: FID back at the last forget or unmount", t_orphan);
	run("getattr from the table: current attributes only", t_getattr);
	run("lookup: directory promise before and after", t_lookup_promise);
	run("break all visits every inode, name and negative entry",
	    t_break_all);
	run("break all but what write tokens keep (a lapse)",
	    t_break_all_except);
	run("break on a directory uncovers its entries", t_break_dir);
	run("many inodes (table growth)", t_many);
	run("concurrent lookups, forgets and breaks", t_concurrent);
	run("incarnations: a new node id for a file the kernel holds stale",
	    t_incarnations);
	run("incarnations: a directory found under another name than the "
	    "one it was expired under", t_dir_incarnations);
	run("gone: a removed file's attributes until it is linked again",
	    t_gone);
#ifdef CAIRN_DEBUG
	run("debug build: a visitor calling back into the table aborts",
	    t_lock_check_fires);
#endif
	return failed_total ? 1 : 0;
}

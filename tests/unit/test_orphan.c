/*
 * test_orphan.c - unit tests for orphans: objects whose last name went
 * while a client may still have them open (server/store.h, "Orphans";
 * docs/PROTOCOL.md, REMOVE RM_KEEP, RENAME RN_KEEP, ORPHAN_DROP), against
 * a real data directory (a mkdtemp under /tmp, removed at the end).
 *
 *   - REMOVE with RM_KEEP and RENAME with RN_KEEP over a file keep it,
 *     with nlink 0, usable by FID (read, write, truncate, chmod, fsync,
 *     fallocate, xattrs), nameless (LOOKUP, READDIR, LINK -ENOENT), its
 *     directory removable; without KEEP, or with links left, nothing
 *     changes; directories are never kept;
 *   - ORPHAN_DROP by the holder frees it (ESTALE, data file gone), by
 *     another client id or for linked, unknown and stale FIDs it does
 *     nothing; store_orphan_release frees all of one holder's;
 *   - orphans survive closing and reopening the store;
 *   - the grace sweep (server/orphan.h) frees a holder's orphans once it
 *     has had no connection for the grace period, counted from its last
 *     disconnect or from the table's creation, never while it is
 *     connected (also through a reconnect or a second connection), at
 *     most ORPHAN_SWEEP_MAX per sweep, and does work once per second;
 *   - fsck accepts orphans, counts them, and reports an orphan record
 *     of a missing or linked inode and an nlink-0 inode without one;
 *   - several holders (store_orphan_hold, for the other clients that may
 *     have the file open): each drop or release gives up one hold, the
 *     last frees the orphan, also through the grace sweep; only true
 *     orphans take holders; holder lists survive a reopen, and fsck
 *     refuses one out of order.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/proto.h"
#include "../../server/orphan.h"
#include "../../server/store.h"
#include "check.h"

static char tmpdir[64];
static char datadir[128];
static struct store *st;
static struct cairn_fid root;

/* Two clients' ids. */
static const uint8_t A[STORE_HOLDER_SIZE] = { 0xa1, 0xa2, 0xa3, 0xa4 };
static const uint8_t B[STORE_HOLDER_SIZE] = { 0xb1, 0xb2, 0xb3, 0xb4 };

static int mk(const struct cairn_fid *dir, const char *name, uint32_t mode,
	      struct cairn_attr *out)
{
	struct cairn_attr a, d;
	int created;

	return store_create(st, dir, name, mode, 0, 0, 0, CR_EXCL, &created,
			    out ? out : &a, &d);
}

static int rm(const struct cairn_fid *dir, const char *name, uint32_t flags,
	      const uint8_t *holder)
{
	struct cairn_attr d;
	struct store_changed ch;

	return store_remove(st, dir, name, flags, holder, &d, &ch);
}

static int mv(const struct cairn_fid *sd, const char *sn,
	      const struct cairn_fid *dd, const char *dn, uint32_t flags,
	      const uint8_t *holder)
{
	struct cairn_attr a, b;
	struct store_changed ch;

	return store_rename(st, sd, sn, dd, dn, flags, holder, &a, &b, &ch);
}

static int wr(const struct cairn_fid *fid, uint64_t off, const char *s)
{
	struct cairn_attr a;

	return store_write(st, fid, off, s, (uint32_t)strlen(s), 0, &a);
}

/* The bytes at off as a string ("" on error). */
static const char *rd(const struct cairn_fid *fid, uint64_t off, uint32_t len)
{
	static char buf[256];
	struct cairn_attr a;
	uint32_t n = 0;

	if (len >= sizeof(buf) ||
	    store_read(st, fid, off, len, buf, &n, &a))
		n = 0;
	buf[n] = 0;
	return buf;
}

static int drop(const uint8_t *holder, const struct cairn_fid *fid,
		size_t n)
{
	size_t freed = 0;
	int rc = store_orphan_drop(st, holder, fid, n, &freed);

	return rc ? rc : (int)freed;
}

static uint64_t norphans(void)
{
	uint64_t n = UINT64_MAX;

	CHECK_EQ(store_orphan_count(st, &n), 0);
	return n;
}

static int data_exists(const struct cairn_fid *fid)
{
	char path[256];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/objects/%02x/%llx", datadir,
		 (unsigned)(fid->vnode & 0xff),
		 (unsigned long long)fid->vnode);
	return stat(path, &sb) == 0;
}

static void reopen(void)
{
	char err[256];

	store_close(st);
	st = NULL;
	store_set_inline_max(0); /* the tests look at data files */
	if (store_open(datadir, &st, err, sizeof(err))) {
		fprintf(stderr, "reopen: %s\n", err);
		exit(2);
	}
}

/* fsck of the closed store: its result, *orphans the count it saw. */
static int fsck(unsigned long *orphans)
{
	char err[256];
	int rc;

	store_close(st);
	st = NULL;
	rc = store_fsck(datadir, stderr, orphans, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "  fsck: %s\n", err);
	reopen();
	return rc;
}

static int nentries(const struct cairn_fid *dir)
{
	struct cairn_attr a;
	char name[8];
	int n = 0;

	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		n += store_lookup(st, dir, name, &a) == 0;
	}
	return n;
}

/* READDIR callback: count. */
static int count_ent(void *arg, uint64_t next_cookie, const char *name,
		     size_t namelen, const struct cairn_attr *attr)
{
	(*(int *)arg)++;
	return 0;
}

static int listed(const struct cairn_fid *dir)
{
	int n = 0, eof = 0;

	CHECK_EQ(store_readdir(st, dir, 0, 1000, count_ent, &n, &eof), 0);
	CHECK(eof);
	return n;
}

/* ---- tests ------------------------------------------------------------ */

static void t_remove_keep(void)
{
	struct cairn_attr d, f, a, l;
	struct store_setattr sa = { .valid = SA_MODE | SA_SIZE, .mode = 0600,
				    .size = 3 };
	char val[16];
	size_t len = 0;
	uint64_t before = norphans();

	CHECK_EQ(mk(&root, "rk", S_IFDIR | 0755, &d), 0);
	CHECK_EQ(mk(&d.fid, "n0", S_IFREG | 0644, &f), 0);
	CHECK_EQ(wr(&f.fid, 0, "hello world"), 0);
	CHECK_EQ(store_setxattr(st, &f.fid, "user.k", "v", 1, 0), 0);
	/* RM_KEEP needs a holder; undefined bits are refused. */
	CHECK_EQ(rm(&d.fid, "n0", RM_KEEP, NULL), -EINVAL);
	CHECK_EQ(rm(&d.fid, "n0", 8, A), -EINVAL);
	CHECK_EQ(rm(&d.fid, "n0", RM_KEEP, A), 0);
	CHECK_EQ(norphans(), before + 1);
	/* No name: lookup, readdir; the directory can go. */
	CHECK_EQ(store_lookup(st, &d.fid, "n0", &a), -ENOENT);
	CHECK_EQ(listed(&d.fid), 0);
	/* Usable by FID, nlink 0. */
	CHECK_EQ(store_getattr(st, &f.fid, &a), 0);
	CHECK_EQ(a.nlink, 0);
	CHECK_EQ(a.size, 11);
	CHECK(!strcmp(rd(&f.fid, 0, 11), "hello world"));
	CHECK_EQ(wr(&f.fid, 11, "!"), 0);
	CHECK(!strcmp(rd(&f.fid, 6, 20), "world!"));
	CHECK_EQ(store_setattr(st, &f.fid, &sa, &a), 0);
	CHECK_EQ(a.size, 3);
	CHECK_EQ(a.mode & 07777, 0600);
	CHECK_EQ(a.nlink, 0);
	CHECK_EQ(store_fsync(st, &f.fid, 0), 0);
	CHECK_EQ(store_fallocate(st, &f.fid, 0, 0, 8192, &a), 0);
	CHECK_EQ(a.size, 8192);
	CHECK_EQ(store_getxattr(st, &f.fid, "user.k", val, sizeof(val), &len),
		 0);
	CHECK_EQ(len, 1);
	CHECK_EQ(store_setxattr(st, &f.fid, "user.j", "w", 1, 0), 0);
	CHECK_EQ(store_removexattr(st, &f.fid, "user.j"), 0);
	/* No name again: link is ENOENT (linkat of an unlinked file). */
	CHECK_EQ(store_link(st, &f.fid, &root, "back", &a, &l), -ENOENT);
	CHECK_EQ(store_lookup(st, &root, "back", &a), -ENOENT);
	CHECK_EQ(rm(&root, "rk", RM_DIR, NULL), 0);
	CHECK_EQ(store_getattr(st, &f.fid, &a), 0);
	CHECK(data_exists(&f.fid));
	/* The holder drops it: freed. */
	CHECK_EQ(drop(A, &f.fid, 1), 1);
	CHECK_EQ(store_getattr(st, &f.fid, &a), -ESTALE);
	CHECK_EQ(store_getxattr(st, &f.fid, "user.k", val, sizeof(val), &len),
		 -ESTALE);
	CHECK(!data_exists(&f.fid));
	CHECK_EQ(norphans(), before);
	CHECK_EQ(drop(A, &f.fid, 1), 0); /* idempotent */
	CHECK_EQ(fsck(NULL), 0);
}

static void t_keep_only_last_link(void)
{
	struct cairn_attr f, a, dd;
	uint64_t before = norphans();

	/* Links left: RM_KEEP just removes the name. */
	CHECK_EQ(mk(&root, "two", S_IFREG | 0644, &f), 0);
	CHECK_EQ(store_link(st, &f.fid, &root, "two2", &a, &dd), 0);
	CHECK_EQ(rm(&root, "two", RM_KEEP, A), 0);
	CHECK_EQ(norphans(), before);
	CHECK_EQ(store_getattr(st, &f.fid, &a), 0);
	CHECK_EQ(a.nlink, 1);
	/* A drop of a linked file is ignored. */
	CHECK_EQ(drop(A, &f.fid, 1), 0);
	CHECK_EQ(store_getattr(st, &f.fid, &a), 0);
	/* Without RM_KEEP the last link frees it as before. */
	CHECK_EQ(rm(&root, "two2", 0, NULL), 0);
	CHECK_EQ(store_getattr(st, &f.fid, &a), -ESTALE);
	CHECK_EQ(norphans(), before);
	/* A directory is never kept; nor does RM_KEEP change unlink rules. */
	CHECK_EQ(mk(&root, "kd", S_IFDIR | 0755, &f), 0);
	CHECK_EQ(rm(&root, "kd", RM_KEEP, A), -EISDIR);
	CHECK_EQ(rm(&root, "kd", RM_DIR | RM_KEEP, A), 0);
	CHECK_EQ(store_getattr(st, &f.fid, &a), -ESTALE);
	CHECK_EQ(norphans(), before);
	/* Other types are kept too (a fifo may be open). */
	CHECK_EQ(mk(&root, "fifo", S_IFIFO | 0644, &f), 0);
	CHECK_EQ(rm(&root, "fifo", RM_KEEP, A), 0);
	CHECK_EQ(store_getattr(st, &f.fid, &a), 0);
	CHECK_EQ(a.nlink, 0);
	CHECK_EQ(drop(A, &f.fid, 1), 1);
	CHECK_EQ(store_getattr(st, &f.fid, &a), -ESTALE);
	CHECK_EQ(fsck(NULL), 0);
}

static void t_rename_keep(void)
{
	struct cairn_attr src, dst, dir, a;
	uint64_t before = norphans();

	CHECK_EQ(mk(&root, "rn", S_IFDIR | 0755, &dir), 0);
	CHECK_EQ(mk(&dir.fid, "src", S_IFREG | 0644, &src), 0);
	CHECK_EQ(mk(&dir.fid, "dst", S_IFREG | 0644, &dst), 0);
	CHECK_EQ(wr(&dst.fid, 0, "old target"), 0);
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst", RN_KEEP, NULL), -EINVAL);
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst", 0x200 | RN_KEEP, A),
		 -EINVAL);
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst",
		    RN_NOREPLACE | RN_EXCHANGE | RN_KEEP, A), -EINVAL);
	/* NOREPLACE still refuses; EXCHANGE replaces nothing. */
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst", RN_NOREPLACE | RN_KEEP,
		    A), -EEXIST);
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst", RN_EXCHANGE | RN_KEEP,
		    A), 0);
	CHECK_EQ(norphans(), before);
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst", RN_EXCHANGE, NULL), 0);
	/* Over the target: it stays, nameless, held by A. */
	CHECK_EQ(mv(&dir.fid, "src", &dir.fid, "dst", RN_KEEP, A), 0);
	CHECK_EQ(norphans(), before + 1);
	CHECK_EQ(store_lookup(st, &dir.fid, "dst", &a), 0);
	CHECK_EQ(a.fid.vnode, src.fid.vnode);
	CHECK_EQ(store_getattr(st, &dst.fid, &a), 0);
	CHECK_EQ(a.nlink, 0);
	CHECK(!strcmp(rd(&dst.fid, 0, 10), "old target"));
	CHECK_EQ(listed(&dir.fid), 1);
	/* B cannot drop it, nor A with a wrong uniq; A can. */
	CHECK_EQ(drop(B, &dst.fid, 1), 0);
	a.fid = dst.fid;
	a.fid.uniq ^= 0x5a5a;
	CHECK_EQ(drop(A, &a.fid, 1), 0);
	CHECK_EQ(store_getattr(st, &dst.fid, &a), 0);
	CHECK_EQ(drop(A, &dst.fid, 1), 1);
	CHECK_EQ(store_getattr(st, &dst.fid, &a), -ESTALE);
	/* A directory target is removed as before. */
	CHECK_EQ(mk(&dir.fid, "d1", S_IFDIR | 0755, &src), 0);
	CHECK_EQ(mk(&dir.fid, "d2", S_IFDIR | 0755, &dst), 0);
	CHECK_EQ(mv(&dir.fid, "d1", &dir.fid, "d2", RN_KEEP, A), 0);
	CHECK_EQ(store_getattr(st, &dst.fid, &a), -ESTALE);
	CHECK_EQ(norphans(), before);
	CHECK_EQ(fsck(NULL), 0);
}

static void t_drop_holder_only(void)
{
	struct cairn_attr f[4], a;
	struct cairn_fid fids[8];
	char name[8];
	uint64_t before = norphans();

	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		CHECK_EQ(mk(&root, name, S_IFREG | 0644, &f[i]), 0);
		CHECK_EQ(wr(&f[i].fid, 0, "data"), 0);
		CHECK_EQ(rm(&root, name, RM_KEEP, i < 2 ? A : B), 0);
	}
	CHECK_EQ(nentries(&root), 0);
	CHECK_EQ(norphans(), before + 4);
	/* One request: A's two, B's two, a linked file, unknown FIDs, a
	 * duplicate. Only A's go. */
	CHECK_EQ(mk(&root, "linked", S_IFREG | 0644, &a), 0);
	for (int i = 0; i < 4; i++)
		fids[i] = f[i].fid;
	fids[4] = a.fid;
	fids[5] = (struct cairn_fid){ 1, 1u << 30, 7 };
	fids[6] = (struct cairn_fid){ 2, f[0].fid.vnode, f[0].fid.uniq };
	fids[7] = f[1].fid;
	CHECK_EQ(drop(A, fids, 8), 2);
	CHECK_EQ(store_getattr(st, &f[0].fid, &a), -ESTALE);
	CHECK_EQ(store_getattr(st, &f[1].fid, &a), -ESTALE);
	CHECK_EQ(store_getattr(st, &f[2].fid, &a), 0);
	CHECK_EQ(store_getattr(st, &f[3].fid, &a), 0);
	CHECK(data_exists(&f[2].fid));
	CHECK_EQ(norphans(), before + 2);
	CHECK_EQ(store_lookup(st, &root, "linked", &a), 0);
	/* B's, and nothing else, through the release of B. */
	{
		struct store_holder *h;
		size_t n;
		uint64_t freed = 0;

		CHECK_EQ(store_orphan_holders(st, &h, &n), 0);
		CHECK_EQ(n, 1);
		for (size_t i = 0; i < n; i++)
			if (!memcmp(h[i].id, B, STORE_HOLDER_SIZE))
				CHECK_EQ(h[i].count, 2);
		free(h);
		CHECK_EQ(store_orphan_release(st, A, 0, &freed), 0);
		CHECK_EQ(freed, 0);
		CHECK_EQ(store_orphan_release(st, B, 0, &freed), 0);
		CHECK_EQ(freed, 2);
	}
	CHECK_EQ(store_getattr(st, &f[2].fid, &a), -ESTALE);
	CHECK(!data_exists(&f[2].fid));
	CHECK_EQ(norphans(), before);
	CHECK_EQ(store_orphan_drop(st, A, fids, 0, NULL), 0);
	CHECK_EQ(mk(&root, "n0", S_IFREG, NULL), 0); /* names are free */
	CHECK_EQ(rm(&root, "n0", 0, NULL), 0);
	CHECK_EQ(rm(&root, "linked", 0, NULL), 0);
}

/* Many orphans of one holder: released in several transactions. */
static void t_release_many(void)
{
	struct cairn_attr f;
	struct store_holder *h;
	size_t n;
	uint64_t freed = 0;
	char name[16];

	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		CHECK_EQ(mk(&root, name, S_IFREG | 0644, &f), 0);
		if (i % 100 == 0)
			CHECK_EQ(wr(&f.fid, 0, "x"), 0);
		CHECK_EQ(rm(&root, name, RM_KEEP, i % 3 ? A : B), 0);
	}
	CHECK_EQ(norphans(), 400);
	CHECK_EQ(store_orphan_holders(st, &h, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(h[0].count + h[1].count, 400);
	free(h);
	CHECK_EQ(store_orphan_release(st, A, 10, &freed), 0);
	CHECK_EQ(freed, 256); /* a transaction's worth, at least 10 */
	CHECK_EQ(store_orphan_release(st, A, 0, &freed), 0);
	CHECK_EQ(freed, 10); /* the rest */
	CHECK_EQ(norphans(), 134);
	CHECK_EQ(fsck(NULL), 0);
	CHECK_EQ(store_orphan_release(st, B, 0, &freed), 0);
	CHECK_EQ(freed, 134);
	CHECK_EQ(store_orphan_holders(st, &h, &n), 0);
	CHECK(h == NULL && n == 0);
	CHECK_EQ(fsck(NULL), 0);
}

static void t_survives_reopen(void)
{
	struct cairn_attr f, a;
	unsigned long seen = 99;

	CHECK_EQ(mk(&root, "kept", S_IFREG | 0644, &f), 0);
	CHECK_EQ(wr(&f.fid, 0, "still here"), 0);
	CHECK_EQ(store_setxattr(st, &f.fid, "user.x", "1", 1, 0), 0);
	CHECK_EQ(rm(&root, "kept", RM_KEEP, A), 0);
	reopen();
	CHECK_EQ(norphans(), 1);
	CHECK_EQ(store_getattr(st, &f.fid, &a), 0);
	CHECK_EQ(a.nlink, 0);
	CHECK(!strcmp(rd(&f.fid, 0, 10), "still here"));
	CHECK(data_exists(&f.fid)); /* not a stray data file */
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 1);
	CHECK_EQ(drop(B, &f.fid, 1), 0);
	CHECK_EQ(drop(A, &f.fid, 1), 1);
	reopen();
	CHECK_EQ(norphans(), 0);
	CHECK_EQ(store_getattr(st, &f.fid, &a), -ESTALE);
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 0);
}

/* Change the orphans table behind the store's back (store closed): value
 * len bytes at val, or delete the record (val NULL). */
static void orphans_edit_val(uint64_t vn, const void *val, size_t len)
{
	char path[256];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint8_t kb[8];
	MDB_val k = { 8, kb }, v = { len, (void *)val };
	const void *holder = val;

	for (int i = 0; i < 8; i++)
		kb[i] = (uint8_t)(vn >> (56 - 8 * i));
	snprintf(path, sizeof(path), "%s/meta", datadir);
	CHECK_EQ(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 8);
	mdb_env_set_mapsize(env, 64ull << 30);
	CHECK_EQ(mdb_env_open(env, path, 0, 0600), 0);
	CHECK_EQ(mdb_txn_begin(env, NULL, 0, &txn), 0);
	CHECK_EQ(mdb_dbi_open(txn, "orphans", 0, &dbi), 0);
	if (holder)
		CHECK_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
	else
		CHECK_EQ(mdb_del(txn, dbi, &k, NULL), 0);
	CHECK_EQ(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static void orphans_edit(uint64_t vn, const uint8_t *holder)
{
	orphans_edit_val(vn, holder, STORE_HOLDER_SIZE);
}

static void t_fsck(void)
{
	struct cairn_attr f, g, a;
	unsigned long seen = 0;

	CHECK_EQ(mk(&root, "o1", S_IFREG | 0644, &f), 0);
	CHECK_EQ(mk(&root, "o2", S_IFREG | 0644, &g), 0);
	CHECK_EQ(wr(&f.fid, 0, "x"), 0);
	CHECK_EQ(rm(&root, "o1", RM_KEEP, A), 0);
	CHECK_EQ(rm(&root, "o2", RM_KEEP, B), 0);
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 2);
	/* An nlink-0 inode without its record: unreachable, as before. */
	store_close(st);
	st = NULL;
	orphans_edit(f.fid.vnode, NULL);
	CHECK_EQ(fsck(&seen), 1);
	CHECK_EQ(seen, 1);
	/* A record of a missing inode, and of a linked one. */
	store_close(st);
	st = NULL;
	orphans_edit(f.fid.vnode, A);
	orphans_edit(1u << 30, A);
	orphans_edit(root.vnode, A);
	CHECK_EQ(fsck(&seen), 2); /* a missing vnode, a directory */
	store_close(st);
	st = NULL;
	orphans_edit(1u << 30, NULL);
	orphans_edit(root.vnode, NULL);
	reopen();
	CHECK_EQ(mk(&root, "linked", S_IFREG | 0644, &a), 0);
	store_close(st);
	st = NULL;
	orphans_edit(a.fid.vnode, B);
	CHECK_EQ(fsck(&seen), 1);
	/* Its release deletes the bad record and leaves the file. */
	CHECK_EQ(store_orphan_release(st, B, 0, NULL), 0);
	CHECK_EQ(store_lookup(st, &root, "linked", &a), 0);
	CHECK_EQ(store_getattr(st, &g.fid, &a), -ESTALE);
	CHECK_EQ(rm(&root, "linked", 0, NULL), 0);
	CHECK_EQ(drop(A, &f.fid, 1), 1);
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 0);
}

/* n orphans of holder, the first of them written to; returns the first's
 * FID. */
static struct cairn_fid make_orphans(const uint8_t *holder, int n)
{
	static int seq;
	struct cairn_attr f, first = { 0 };
	char name[32];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "s%d", seq++);
		CHECK_EQ(mk(&root, name, S_IFREG | 0644, &f), 0);
		if (i == 0) {
			CHECK_EQ(wr(&f.fid, 0, "x"), 0);
			first = f;
		}
		CHECK_EQ(rm(&root, name, RM_KEEP, holder), 0);
	}
	return first.fid;
}

static int alive(const struct cairn_fid *fid)
{
	struct cairn_attr a;

	return store_getattr(st, fid, &a) == 0;
}

static void t_sweep(void)
{
	static const uint8_t C[16] = { 0xc1 }, D[16] = { 0xd1 };
	struct orphan_table *t = orphan_table_create(st, 60, 1000);
	struct cairn_fid a, b, c, d;

	CHECK(t != NULL);
	if (!t)
		return;
	/* A connected; B's orphans were there at start. */
	CHECK_EQ(orphan_client_up(t, A), 0);
	a = make_orphans(A, 2);
	b = make_orphans(B, 3);
	CHECK_EQ(orphan_sweep(t, 1001), 0);
	orphan_client_down(t, A, 1010);
	CHECK_EQ(orphan_sweep(t, 1059), 0);
	CHECK(alive(&b));
	/* B: 60 s since the start. A: 50 s since its disconnect. */
	CHECK_EQ(orphan_sweep(t, 1060), 3);
	CHECK(!alive(&b) && alive(&a));
	CHECK_EQ(orphan_sweep(t, 1060), 0); /* once per second */
	CHECK_EQ(orphan_sweep(t, 1069), 0);
	CHECK_EQ(orphan_sweep(t, 1070), 2);
	CHECK(!alive(&a));
	CHECK(!data_exists(&a));
	CHECK_EQ(norphans(), 0);

	/* C reconnects within the grace period: kept while connected, its
	 * period starts again at its next disconnect. */
	CHECK_EQ(orphan_client_up(t, C), 0);
	c = make_orphans(C, 1);
	orphan_client_down(t, C, 1100);
	CHECK_EQ(orphan_sweep(t, 1150), 0);
	CHECK_EQ(orphan_client_up(t, C), 0);
	CHECK_EQ(orphan_sweep(t, 1300), 0);
	CHECK(alive(&c));
	orphan_client_down(t, C, 1310);
	CHECK_EQ(orphan_sweep(t, 1369), 0);
	CHECK_EQ(orphan_sweep(t, 1370), 1);
	CHECK(!alive(&c));

	/* Two connections of D: one going is not D going. */
	CHECK_EQ(orphan_client_up(t, D), 0);
	CHECK_EQ(orphan_client_up(t, D), 0);
	d = make_orphans(D, 1);
	orphan_client_down(t, D, 1400);
	CHECK_EQ(orphan_sweep(t, 1500), 0);
	CHECK(alive(&d));
	orphan_client_down(t, D, 1500);
	CHECK_EQ(orphan_sweep(t, 1559), 0);
	/* Dropped by D meanwhile: nothing left to free, nothing logged. */
	CHECK_EQ(drop(D, &d, 1), 1);
	CHECK_EQ(orphan_sweep(t, 1560), 0);

	/* Many: at most ORPHAN_SWEEP_MAX a sweep, the rest at the next. A
	 * was forgotten (gone past its grace): now gone since the start. */
	a = make_orphans(A, ORPHAN_SWEEP_MAX + 10);
	CHECK_EQ(norphans(), ORPHAN_SWEEP_MAX + 10);
	CHECK_EQ(orphan_sweep(t, 1600), ORPHAN_SWEEP_MAX);
	CHECK_EQ(orphan_sweep(t, 1601), 10);
	CHECK_EQ(norphans(), 0);
	orphan_table_destroy(t);
	CHECK_EQ(fsck(NULL), 0);
}

/* A third client. */
static const uint8_t C[STORE_HOLDER_SIZE] = { 0xc1, 0xc2, 0xc3, 0xc4 };

/* The holds of id (store_orphan_holders), 0 when it has none. */
static uint64_t holds(const uint8_t *id)
{
	struct store_holder *h;
	uint64_t c = 0;
	size_t n;

	CHECK_EQ(store_orphan_holders(st, &h, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (!memcmp(h[i].id, id, STORE_HOLDER_SIZE))
			c = h[i].count;
	free(h);
	return c;
}

/* Several holders (store_orphan_hold): the orphan lives until the last of
 * them drops it or is released; each drop or release gives up one hold
 * only; only a true orphan takes holders. */
static void t_multi_holder(void)
{
	struct cairn_attr f, g, l, a, d;
	struct store_changed ch;
	uint8_t ids[3][STORE_HOLDER_SIZE];
	unsigned long seen = 0;
	struct cairn_fid stale;
	uint64_t before = norphans(), freed = 0;

	memcpy(ids[0], C, STORE_HOLDER_SIZE);
	memcpy(ids[1], A, STORE_HOLDER_SIZE);   /* has it already */
	memcpy(ids[2], B, STORE_HOLDER_SIZE);
	CHECK_EQ(mk(&root, "mh", S_IFREG | 0644, &f), 0);
	CHECK_EQ(wr(&f.fid, 0, "shared"), 0);
	CHECK_EQ(store_remove(st, &root, "mh", RM_KEEP, A, &d, &ch), 0);
	CHECK(ch.orphan.vnode == f.fid.vnode && ch.orphan.uniq == f.fid.uniq);
	CHECK_EQ(store_orphan_hold(st, &f.fid, &ids[0][0], 3), 1);
	CHECK_EQ(store_orphan_hold(st, &f.fid, &ids[0][0], 3), 1); /* again */
	CHECK_EQ(norphans(), before + 1);            /* files, not holds */
	CHECK(holds(A) == 1 && holds(B) == 1 && holds(C) == 1);
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, before + 1);
	/* Not orphans: nothing recorded. */
	CHECK_EQ(mk(&root, "mh-linked", S_IFREG | 0644, &l), 0);
	CHECK_EQ(store_orphan_hold(st, &l.fid, &ids[0][0], 3), 0);
	stale = f.fid;
	stale.uniq++;
	CHECK_EQ(store_orphan_hold(st, &stale, &ids[0][0], 3), 0);
	stale = (struct cairn_fid){ 1, 1u << 30, 7 };
	CHECK_EQ(store_orphan_hold(st, &stale, &ids[0][0], 3), 0);
	CHECK_EQ(store_remove(st, &root, "mh-linked", 0, NULL, &d, &ch), 0);
	CHECK_EQ(ch.orphan.vnode, 0);   /* without RM_KEEP */
	/* The requester lets go first: the others keep it, data and all. */
	CHECK_EQ(drop(A, &f.fid, 1), 0);
	CHECK_EQ(drop(A, &f.fid, 1), 0);
	CHECK_EQ(holds(A), 0);
	CHECK_EQ(strcmp(rd(&f.fid, 0, 6), "shared"), 0);
	CHECK_EQ(wr(&f.fid, 0, "SHARED"), 0);
	/* C is released (gone for good): one hold. */
	CHECK_EQ(store_orphan_release(st, C, 0, &freed), 0);
	CHECK_EQ(freed, 1);
	CHECK(alive(&f.fid) && data_exists(&f.fid));
	/* It survives a restart with its holder list. */
	reopen();
	CHECK(holds(B) == 1 && holds(A) == 0 && holds(C) == 0);
	CHECK_EQ(strcmp(rd(&f.fid, 0, 6), "SHARED"), 0);
	/* The last holder's drop frees it. */
	CHECK_EQ(drop(B, &f.fid, 1), 1);
	CHECK_EQ(store_getattr(st, &f.fid, &a), -ESTALE);
	CHECK(!data_exists(&f.fid));
	CHECK_EQ(store_orphan_hold(st, &f.fid, &ids[0][0], 3), 0);
	CHECK_EQ(norphans(), before);
	/* Rename over: the replaced file is the orphan. */
	CHECK_EQ(mk(&root, "mh-a", S_IFREG | 0644, &f), 0);
	CHECK_EQ(mk(&root, "mh-b", S_IFREG | 0644, &g), 0);
	CHECK_EQ(store_rename(st, &root, "mh-a", &root, "mh-b", RN_KEEP, B,
			      &a, &d, &ch), 0);
	CHECK(ch.orphan.vnode == g.fid.vnode && ch.orphan.uniq == g.fid.uniq);
	CHECK_EQ(store_orphan_hold(st, &g.fid, A, 1), 1);
	CHECK_EQ(drop(B, &g.fid, 1), 0);
	CHECK_EQ(drop(A, &g.fid, 1), 1);
	CHECK_EQ(store_rename(st, &root, "mh-b", &root, "mh-c", RN_KEEP, B,
			      &a, &d, &ch), 0);
	CHECK_EQ(ch.orphan.vnode, 0);   /* nothing replaced */
	CHECK_EQ(rm(&root, "mh-c", 0, NULL), 0);
	CHECK_EQ(norphans(), before);
	CHECK_EQ(fsck(NULL), 0);
}

/* The grace sweep with several holders: a gone holder's hold goes, the
 * orphan stays while a connected one holds it, and goes with the last. */
static void t_sweep_multi(void)
{
	struct orphan_table *t;
	struct cairn_attr f;
	int64_t now = 5000;
	uint64_t before = norphans();

	CHECK_EQ(mk(&root, "sm", S_IFREG | 0644, &f), 0);
	CHECK_EQ(wr(&f.fid, 0, "x"), 0);
	CHECK_EQ(rm(&root, "sm", RM_KEEP, A), 0);
	CHECK_EQ(store_orphan_hold(st, &f.fid, B, 1), 1);
	t = orphan_table_create(st, 60, now);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ(orphan_client_up(t, A), 0);
	CHECK_EQ(orphan_client_up(t, B), 0);
	orphan_client_down(t, A, now + 1);
	CHECK_EQ(orphan_sweep(t, now + 30), 0);
	CHECK_EQ(orphan_sweep(t, now + 61), 1);   /* A's hold */
	CHECK(alive(&f.fid) && data_exists(&f.fid));
	CHECK_EQ(norphans(), before + 1);
	orphan_client_down(t, B, now + 62);
	CHECK_EQ(orphan_sweep(t, now + 100), 0);
	CHECK_EQ(orphan_sweep(t, now + 122), 1);  /* B's: the last */
	CHECK(!alive(&f.fid) && !data_exists(&f.fid));
	CHECK_EQ(norphans(), before);
	orphan_table_destroy(t);
	CHECK_EQ(fsck(NULL), 0);
}

/* fsck: a holder list out of order, or with a duplicate, is malformed;
 * one in order is fine. */
static void t_fsck_multi(void)
{
	struct cairn_attr f;
	uint8_t v[2 * STORE_HOLDER_SIZE];
	unsigned long seen = 0;

	CHECK_EQ(mk(&root, "fm", S_IFREG | 0644, &f), 0);
	CHECK_EQ(rm(&root, "fm", RM_KEEP, A), 0);
	CHECK_EQ(store_orphan_hold(st, &f.fid, B, 1), 1);
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 1);
	store_close(st);
	st = NULL;
	memcpy(v, B, STORE_HOLDER_SIZE);
	memcpy(v + STORE_HOLDER_SIZE, A, STORE_HOLDER_SIZE);
	orphans_edit_val(f.fid.vnode, v, sizeof(v));
	CHECK_EQ(fsck(&seen), 2); /* the record, and its unreachable inode */
	store_close(st);
	st = NULL;
	memcpy(v, A, STORE_HOLDER_SIZE);
	orphans_edit_val(f.fid.vnode, v, sizeof(v)); /* a duplicate */
	CHECK_EQ(fsck(&seen), 2);
	store_close(st);
	st = NULL;
	memcpy(v + STORE_HOLDER_SIZE, B, STORE_HOLDER_SIZE);
	orphans_edit_val(f.fid.vnode, v, sizeof(v));
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 1);
	CHECK(holds(A) == 1 && holds(B) == 1);
	CHECK_EQ(drop(A, &f.fid, 1), 0);
	CHECK_EQ(drop(B, &f.fid, 1), 1);
	CHECK_EQ(fsck(&seen), 0);
	CHECK_EQ(seen, 0);
}

int main(void)
{
	char err[256], cmd[256];
	struct cairn_attr r;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_orphan.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
	if (store_open(datadir, &st, err, sizeof(err)) ||
	    store_root(st, &r)) {
		fprintf(stderr, "store_open: %s\n", err);
		return 2;
	}
	root = r.fid;
	run("orphan remove_keep_usable_by_fid_then_dropped", t_remove_keep);
	run("orphan only_the_last_link_and_not_directories",
	    t_keep_only_last_link);
	run("orphan rename_over_with_keep", t_rename_keep);
	run("orphan drop_by_holder_only_others_ignored", t_drop_holder_only);
	run("orphan release_of_a_holder_in_batches", t_release_many);
	run("orphan survives_reopen", t_survives_reopen);
	run("orphan fsck_accepts_counts_and_reports", t_fsck);
	run("orphan grace_sweep_frees_gone_holders", t_sweep);
	run("orphan several_holders_last_one_frees", t_multi_holder);
	run("orphan grace_sweep_several_holders", t_sweep_multi);
	run("orphan fsck_holder_lists", t_fsck_multi);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return failed_total ? 1 : 0;
}

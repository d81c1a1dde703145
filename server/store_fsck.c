/*
 * store_fsck.c - offline consistency check of a data directory.
 *
 * Reads everything in one LMDB read transaction of a stopped store (it
 * holds DIR/LOCK, so no server can change it meanwhile) and checks the
 * invariants the rest of the store keeps:
 *   - every record decodes (store_rec.h); meta holds the format, the
 *     volume, the server id and a next_vnode above every vnode in use;
 *   - every dirent lies in an existing directory, names an existing inode
 *     of the recorded type, and has the matching dirseq record with a
 *     cookie below the directory's next_cookie; every dirseq record has
 *     its dirent;
 *   - a directory has one entry naming it (the root none), its parent
 *     pointer is that entry's directory and its nlink is 2 + subdirs;
 *     another object's nlink is its number of entries;
 *   - every inode is reachable from the root, except orphans: an orphans
 *     record names an existing non-directory with nlink 0 and no entry
 *     (store_orphan.c), and such an inode is fine; a record of a missing,
 *     linked or directory inode is a problem, and an nlink-0 inode
 *     without a record is unreachable as any other;
 *   - symlinks have their target; xattrs and symlink targets belong to
 *     existing inodes;
 *   - a regular file with size > 0 has a data file, or (inline) an inline
 *     record of exactly its size; every data file belongs to a regular
 *     file that is not inline (in the right XX directory), every inline
 *     record to an inline one;
 *   - no file is in the sticky error state of a failed data sync.
 * Each problem is one line on `report`; nothing is repaired.
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "store_int.h"

struct fino {
	uint64_t vn;
	struct sinode ino;
	uint32_t links;    /* entries naming it */
	uint32_t subdirs;  /* entries in it that name directories */
	uint64_t eparent;  /* for directories: the dir holding its entry */
	int reach;         /* 0 unknown, 1 reachable, -1 not */
	int orphan;        /* listed in orphans */
};

struct fsck {
	struct store st; /* only env and dbi handles are used */
	MDB_txn *txn;
	FILE *out;
	const char *dir;
	struct fino *v;
	size_t n, cap;
	int problems;
	unsigned long orphans; /* records of existing inodes */
};

static void problem(struct fsck *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void problem(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	fprintf(f->out, "%s: ", f->dir);
	va_start(ap, fmt);
	vfprintf(f->out, fmt, ap);
	va_end(ap);
	fputc('\n', f->out);
	f->problems++;
}

static struct fino *fino_find(struct fsck *f, uint64_t vn)
{
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->v[mid].vn == vn)
			return &f->v[mid];
		if (f->v[mid].vn < vn)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Calls fn for every record of dbi; stops on fn's error. */
static int scan(struct fsck *f, MDB_dbi dbi,
		int (*fn)(struct fsck *f, MDB_val *k, MDB_val *v))
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_open(f->txn, dbi, &cur)))
		return store_lmdb_err(rc);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
		if ((rc = fn(f, &k, &v)))
			break;
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc < 0 ? rc : store_lmdb_err(rc);
}

static int load_inode(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct fino *fi;
	uint64_t vn;

	if (k->mv_size != 8) {
		problem(f, "inode key of %zu bytes", k->mv_size);
		return 0;
	}
	vn = store_be64_get(k->mv_data);
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 1024;
		struct fino *nv = realloc(f->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		f->v = nv;
		f->cap = cap;
	}
	fi = &f->v[f->n];
	memset(fi, 0, sizeof(*fi));
	fi->vn = vn;
	if (store_rec_inode_decode(v->mv_data, v->mv_size, &fi->ino)) {
		problem(f, "vnode %" PRIu64 ": inode record does not decode",
			vn);
		return 0;
	}
	f->n++;
	return 0;
}

static int dirseq_name_is(struct fsck *f, uint64_t dir, uint64_t cookie,
			  const char *name, size_t len)
{
	uint8_t kb[16];
	MDB_val k = { 16, kb }, v;

	store_be64_put(kb, dir);
	store_be64_put(kb + 8, cookie);
	if (mdb_get(f->txn, f->st.db_dirseq, &k, &v))
		return 0;
	return v.mv_size == len && !memcmp(v.mv_data, name, len);
}

static int check_dirent(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct store_rec_dirent de;
	uint64_t dvn, child, cookie;
	uint32_t type;
	struct fino *d, *c;
	char name[CAIRN_NAME_MAX + 1];
	size_t len;
	int nlen;

	if (store_rec_dirent_key_decode(k->mv_data, k->mv_size, &dvn, name,
					&len)) {
		problem(f, "dirent with a malformed key (%zu bytes)",
			k->mv_size);
		return 0;
	}
	nlen = (int)len;
	if (store_rec_dirent_decode(v->mv_data, v->mv_size, &de)) {
		problem(f, "dir %" PRIu64 " entry '%.*s': value does not "
			"decode", dvn, nlen, name);
		return 0;
	}
	child = de.child;
	cookie = de.cookie;
	type = de.type;
	d = fino_find(f, dvn);
	c = fino_find(f, child);
	if (!d || !S_ISDIR(d->ino.mode))
		problem(f, "entry '%.*s' is in vnode %" PRIu64 ", which is "
			"not a directory", nlen, name, dvn);
	if (!c) {
		problem(f, "dir %" PRIu64 " entry '%.*s' names missing vnode %"
			PRIu64, dvn, nlen, name, child);
		return 0;
	}
	if ((c->ino.mode & S_IFMT) != type)
		problem(f, "dir %" PRIu64 " entry '%.*s': recorded type %o, "
			"vnode %" PRIu64 " has type %o", dvn, nlen, name, type,
			child, c->ino.mode & S_IFMT);
	if (!dirseq_name_is(f, dvn, cookie, name, (size_t)nlen))
		problem(f, "dir %" PRIu64 " entry '%.*s': no matching dirseq "
			"record for cookie %" PRIu64, dvn, nlen, name, cookie);
	if (d && (cookie < CAIRN_COOKIE_FIRST || cookie >= d->ino.next_cookie))
		problem(f, "dir %" PRIu64 " entry '%.*s': cookie %" PRIu64
			" outside [3, %" PRIu64 ")", dvn, nlen, name, cookie,
			d->ino.next_cookie);
	c->links++;
	if (S_ISDIR(c->ino.mode)) {
		if (d)
			d->subdirs++;
		if (c->links > 1)
			problem(f, "directory %" PRIu64 " has more than one "
				"entry", child);
		c->eparent = dvn;
	}
	return 0;
}

static int check_dirseq(struct fsck *f, MDB_val *k, MDB_val *v)
{
	char name[CAIRN_NAME_MAX + 1];
	uint8_t kb[8 + CAIRN_NAME_MAX];
	struct store_rec_dirent de;
	MDB_val dk, dv;
	uint64_t dvn, cookie;
	size_t len;

	if (store_rec_dirseq_key_decode(k->mv_data, k->mv_size, &dvn,
					&cookie) ||
	    store_rec_name_decode(v->mv_data, v->mv_size, name, &len)) {
		problem(f, "malformed dirseq record");
		return 0;
	}
	store_be64_put(kb, dvn);
	memcpy(kb + 8, name, len);
	dk.mv_size = 8 + len;
	dk.mv_data = kb;
	if (mdb_get(f->txn, f->st.db_dirents, &dk, &dv) ||
	    store_rec_dirent_decode(dv.mv_data, dv.mv_size, &de) ||
	    de.cookie != cookie)
		problem(f, "dir %" PRIu64 " cookie %" PRIu64 " ('%s') has no "
			"matching dirent", dvn, cookie, name);
	return 0;
}

/* Reachability of a directory through its entries' parent chain,
 * iterative (trees may be deep); a cycle counts as unreachable. */
static int dir_reach(struct fsck *f, struct fino *d)
{
	enum { ON_PATH = 2 };
	struct fino *p = d, *q;
	int r;

	if (d->vn == STORE_ROOT)
		return 1;
	for (;;) {
		if (p->vn == STORE_ROOT) {
			r = 1;
			break;
		}
		if (p->reach) {
			r = p->reach == ON_PATH ? -1 : p->reach;
			break;
		}
		p->reach = ON_PATH;
		q = p->links ? fino_find(f, p->eparent) : NULL;
		if (!q || !S_ISDIR(q->ino.mode)) {
			r = -1;
			break;
		}
		p = q;
	}
	for (p = d; p && p->reach == ON_PATH; p = fino_find(f, p->eparent))
		p->reach = r;
	return r;
}

static int mark_files(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct store_rec_dirent de;
	struct fino *d, *c;

	if (k->mv_size <= 8 ||
	    store_rec_dirent_decode(v->mv_data, v->mv_size, &de))
		return 0;
	d = fino_find(f, store_be64_get(k->mv_data));
	c = fino_find(f, de.child);
	if (d && c && !S_ISDIR(c->ino.mode) && S_ISDIR(d->ino.mode) &&
	    dir_reach(f, d) == 1)
		c->reach = 1;
	return 0;
}

static int check_xattr(struct fsck *f, MDB_val *k, MDB_val *v)
{
	char name[CAIRN_XATTR_NAME_MAX + 1];
	size_t len;
	uint64_t vn;

	if (store_rec_xattr_key_decode(k->mv_data, k->mv_size, &vn, name,
				       &len)) {
		problem(f, "malformed xattr key (%zu bytes)", k->mv_size);
		return 0;
	}
	if (!fino_find(f, vn))
		problem(f, "xattr of missing vnode %" PRIu64, vn);
	if (store_rec_xattr_val_decode(v->mv_data, v->mv_size, NULL, 0, &len))
		problem(f, "vnode %" PRIu64 ": xattr '%s' has a malformed "
			"value (%zu bytes)", vn, name, v->mv_size);
	return 0;
}

static int check_symlink(struct fsck *f, MDB_val *k, MDB_val *v)
{
	char target[CAIRN_SYMLINK_MAX + 1];
	struct fino *o;
	size_t len;
	uint64_t vn;

	if (k->mv_size != 8) {
		problem(f, "malformed symlink key (%zu bytes)", k->mv_size);
		return 0;
	}
	vn = store_be64_get(k->mv_data);
	o = fino_find(f, vn);
	if (!o)
		problem(f, "symlink target of missing vnode %" PRIu64, vn);
	else if (store_rec_symlink_decode(v->mv_data, v->mv_size, target,
					  &len))
		problem(f, "vnode %" PRIu64 ": malformed symlink target", vn);
	else if (!S_ISLNK(o->ino.mode) || len != o->ino.size)
		problem(f, "vnode %" PRIu64 ": symlink target does not match "
			"the inode", vn);
	return 0;
}

static int check_inline(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct fino *o;
	uint64_t vn;

	if (k->mv_size != 8) {
		problem(f, "malformed inline key (%zu bytes)", k->mv_size);
		return 0;
	}
	vn = store_be64_get(k->mv_data);
	o = fino_find(f, vn);
	if (!o || !S_ISREG(o->ino.mode) || !(o->ino.flags & SINODE_INLINE))
		problem(f, "inline record of vnode %" PRIu64 ", which is no "
			"inline file", vn);
	return 0;
}

static int check_orphan(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct fino *fi;
	uint64_t vn;
	size_t holders;

	if (store_rec_orphan_key_decode(k->mv_data, k->mv_size, &vn) ||
	    store_rec_orphan_decode(v->mv_data, v->mv_size, &holders)) {
		problem(f, "malformed orphan record (key %zu bytes, value "
			"%zu)", k->mv_size, v->mv_size);
		return 0;
	}
	fi = fino_find(f, vn);
	if (!fi) {
		problem(f, "orphan record of missing vnode %" PRIu64, vn);
		return 0;
	}
	f->orphans++;
	fi->orphan = 1;
	if (S_ISDIR(fi->ino.mode))
		problem(f, "directory %" PRIu64 " is recorded as an orphan",
			vn);
	return 0;
}

static void check_inode(struct fsck *f, struct fino *fi)
{
	char path[48];
	struct stat sb;
	uint8_t kb[8];
	MDB_val k = { 8, kb }, v;
	uint64_t vn = fi->vn;

	if (S_ISDIR(fi->ino.mode)) {
		if (fi->ino.nlink != 2 + fi->subdirs)
			problem(f, "directory %" PRIu64 ": nlink %u, expected "
				"%u", vn, fi->ino.nlink, 2 + fi->subdirs);
		if (vn == STORE_ROOT && fi->links)
			problem(f, "the root directory has an entry");
		if (vn != STORE_ROOT && fi->links == 1 &&
		    fi->ino.parent != fi->eparent)
			problem(f, "directory %" PRIu64 ": parent %" PRIu64
				", but its entry is in %" PRIu64, vn,
				fi->ino.parent, fi->eparent);
		if (vn != STORE_ROOT && dir_reach(f, fi) != 1)
			problem(f, "directory %" PRIu64 " is not reachable "
				"from the root", vn);
		return;
	}
	if (fi->ino.nlink != fi->links)
		problem(f, "vnode %" PRIu64 ": nlink %u, but %u entries name "
			"it", vn, fi->ino.nlink, fi->links);
	if (fi->ino.flags & SINODE_DATA_LOST)
		problem(f, "vnode %" PRIu64 ": a sync of its data failed; "
			"its data answers EIO until it is truncated to size 0 "
			"or removed", vn);
	if (fi->orphan && fi->ino.nlink != 0)
		problem(f, "vnode %" PRIu64 " is recorded as an orphan but "
			"has nlink %u", vn, fi->ino.nlink);
	else if (fi->orphan && fi->links != 0)
		problem(f, "vnode %" PRIu64 " is recorded as an orphan but "
			"%u entries name it", vn, fi->links);
	else if (!fi->orphan && fi->reach != 1)
		problem(f, "vnode %" PRIu64 " is not reachable from the root",
			vn);
	if (S_ISLNK(fi->ino.mode)) {
		store_be64_put(kb, vn);
		if (mdb_get(f->txn, f->st.db_symlinks, &k, &v))
			problem(f, "symlink %" PRIu64 " has no target", vn);
	}
	if (S_ISREG(fi->ino.mode) && (fi->ino.flags & SINODE_INLINE)) {
		store_be64_put(kb, vn);
		if (fi->ino.size > STORE_INLINE_MAX ||
		    (!f->st.db_inline ? fi->ino.size != 0
				      : mdb_get(f->txn, f->st.db_inline, &k,
						&v) ? fi->ino.size != 0
						    : v.mv_size != fi->ino.size))
			problem(f, "vnode %" PRIu64 ": inline, size %" PRIu64
				", but its inline record does not hold that "
				"many bytes", vn, fi->ino.size);
	} else if (S_ISREG(fi->ino.mode) && fi->ino.size > 0) {
		store_data_path(vn, path, sizeof(path));
		if (fstatat(f->st.dirfd, path, &sb, 0) < 0)
			problem(f, "vnode %" PRIu64 ": size %" PRIu64 " but no "
				"data file %s", vn, fi->ino.size, path);
	}
}

/* The meta value of key into v; 0 or -ENOENT. */
static int meta_val(struct fsck *f, const char *key, MDB_val *v)
{
	MDB_val k = { strlen(key), (void *)key };

	return mdb_get(f->txn, f->st.db_meta, &k, v) ? -ENOENT : 0;
}

static void check_meta(struct fsck *f)
{
	uint8_t id[STORE_REC_ID_SIZE];
	MDB_val v;
	uint64_t next = 0;
	uint32_t x;

	if (meta_val(f, "format", &v) ||
	    store_rec_meta_u32_decode(v.mv_data, v.mv_size, &x) ||
	    x < STORE_FORMAT_OLDEST || x > STORE_FORMAT)
		problem(f, "meta: missing or unknown format record");
	if (meta_val(f, "volume", &v) ||
	    store_rec_meta_u32_decode(v.mv_data, v.mv_size, &x) ||
	    x != STORE_VOL)
		problem(f, "meta: missing or unknown volume record");
	if (meta_val(f, "server_id", &v) ||
	    store_rec_meta_id_decode(v.mv_data, v.mv_size, id))
		problem(f, "meta: missing or malformed server id");
	if (meta_val(f, "next_vnode", &v) ||
	    store_rec_meta_u64_decode(v.mv_data, v.mv_size, &next)) {
		problem(f, "meta: missing next_vnode");
		return;
	}
	if (f->n && f->v[f->n - 1].vn >= next)
		problem(f, "meta: next_vnode %" PRIu64 " is not above vnode %"
			PRIu64, next, f->v[f->n - 1].vn);
	if (!fino_find(f, STORE_ROOT))
		problem(f, "the root directory (vnode 1) is missing");
}

static void check_objects(struct fsck *f)
{
	char path[48];
	struct dirent *de;
	struct fino *fi;
	DIR *d;
	char *end;
	uint64_t vn;
	int fd;

	for (unsigned xx = 0; xx < 256; xx++) {
		snprintf(path, sizeof(path), "objects/%02x", xx);
		fd = openat(f->st.dirfd, path, O_RDONLY | O_DIRECTORY);
		if (fd < 0 || !(d = fdopendir(fd))) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			vn = strtoull(de->d_name, &end, 16);
			fi = *end ? NULL : fino_find(f, vn);
			if (!fi || !S_ISREG(fi->ino.mode) || (vn & 0xff) != xx ||
			    (fi->ino.flags & SINODE_INLINE))
				problem(f, "data file objects/%02x/%s belongs "
					"to no regular file", xx, de->d_name);
		}
		closedir(d);
	}
}

static int fsck_run(struct fsck *f)
{
	int rc;

	if ((rc = scan(f, f->st.db_inodes, load_inode)))
		return rc;
	check_meta(f);
	if ((rc = scan(f, f->st.db_dirents, check_dirent)) ||
	    (rc = scan(f, f->st.db_dirseq, check_dirseq)) ||
	    (rc = scan(f, f->st.db_dirents, mark_files)) ||
	    (rc = scan(f, f->st.db_xattrs, check_xattr)) ||
	    (rc = scan(f, f->st.db_symlinks, check_symlink)))
		return rc;
	/* 0: a data directory from before inline files has none. */
	if (f->st.db_inline && (rc = scan(f, f->st.db_inline, check_inline)))
		return rc;
	/* 0: a data directory from before orphans has none. */
	if (f->st.db_orphans && (rc = scan(f, f->st.db_orphans, check_orphan)))
		return rc;
	for (size_t i = 0; i < f->n; i++)
		check_inode(f, &f->v[i]);
	check_objects(f);
	return 0;
}

int store_fsck(const char *dir, void *report, unsigned long *orphans,
	       char *err, size_t errsz)
{
	struct fsck f = { .out = report, .dir = dir };
	MDB_dbi dbi[STORE_NDBI];
	int lockfd = -1, rc;

	if (orphans)
		*orphans = 0;
	f.st.dirfd = -1;
	if ((rc = store_lock_take(dir, &lockfd, err, errsz)))
		return rc;
	f.st.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f.st.dirfd < 0) {
		rc = -errno;
		snprintf(err, errsz, "cannot open %s: %s", dir, strerror(-rc));
		goto out;
	}
	if ((rc = store_env_open(dir, MDB_RDONLY, &f.st.env, dbi, err,
				 errsz)))
		goto out;
	f.st.db_inodes = dbi[0];
	f.st.db_dirents = dbi[1];
	f.st.db_dirseq = dbi[2];
	f.st.db_xattrs = dbi[3];
	f.st.db_symlinks = dbi[4];
	f.st.db_meta = dbi[5];
	f.st.db_orphans = dbi[6];
	f.st.db_applied = dbi[7];
	f.st.db_inline = dbi[8];
	/* Not store_rtxn: f.st is no opened store (no transaction pool). */
	if ((rc = store_lmdb_err(mdb_txn_begin(f.st.env, NULL, MDB_RDONLY,
					       &f.txn)))) {
		snprintf(err, errsz, "cannot read %s/meta: %s", dir,
			 strerror(-rc));
		goto out;
	}
	rc = fsck_run(&f);
	mdb_txn_abort(f.txn);
	if (rc)
		snprintf(err, errsz, "cannot check %s/meta: %s", dir,
			 strerror(-rc));
	else
		rc = f.problems;
	if (orphans)
		*orphans = f.orphans;
out:
	free(f.v);
	if (f.st.env)
		mdb_env_close(f.st.env);
	if (f.st.dirfd >= 0)
		close(f.st.dirfd);
	if (lockfd >= 0)
		close(lockfd);
	return rc;
}

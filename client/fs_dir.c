/*
 * fs_dir.c - FUSE operations on directories: opendir, readdir and
 * readdirplus (see fs_int.h), and fetching whole listings into the
 * directory cache (dircache.h) with BULKSTAT.
 *
 * Offsets: 1 and 2 resume after the synthesised "." and "..", anything >= 3
 * (CAIRN_COOKIE_FIRST) is a server cookie. A listing served from the
 * cache uses the same cookies, so a listing begun from the cache may be
 * resumed from the server and the other way round.
 *
 * READDIR and READDIRPLUS are answered from the cached listing; without
 * one, the listing is fetched first (one BULKSTAT per 256 KiB of
 * entries), and only if that fails does READDIR go to the server page by
 * page. The kernel caches listings too (cache_readdir and keep_cache on
 * opendir): a break on the directory invalidates its pages (notify.c), and
 * an opendir without a standing promise drops them.
 *
 * atime: a listing from offset 0 reads the directory, and relatime may
 * owe it a new atime (docs/PROTOCOL.md, BULKSTAT). When the directory's
 * attributes say so, the listing is fetched again with BS_LIST rather
 * than served from the cache, which the server answers with the new
 * atime: as on a local disk, only the first listing after a change (or a
 * day) writes the atime.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>
#include "dircache.h"
#include "fs_int.h"
#include "inode.h"
#include "notify.h"
#include "../lib/clock.h"
#include "../lib/debug.h"
#include "../lib/log.h"

/*
 * No server call: a directory's listing is fetched when read. The kernel
 * keeps its cached listing only while our promise on the directory
 * stands: every break since it was filled has invalidated its pages, and
 * a listing served without a promise (readdir_server, a break raced it)
 * is invalidated once it reached the kernel. So opens need not drop it,
 * and with no_opendir (fs.c) the first OPENDIR is answered ENOSYS and the
 * kernel sends none again: it then opens every directory with keep_cache
 * and cache_readdir. Without it (a kernel older than 5.1), an open
 * without a standing promise drops the cached listing (keep_cache 0).
 */
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct cairn_fid fid;
	int promise, rc;

	if (fs->no_opendir) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if ((rc = itab_fid_promise(fs->itab, ino, &fid, &promise))) {
		reply_error(req, rc);
		return;
	}
	fi->fh = 0;
	fi->cache_readdir = 1;
	fi->keep_cache = promise ? 1 : 0;
	fuse_reply_open(req, fi);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi)
{
	/* The server's commits are durable within about a second; fsync of
	 * a directory makes every change so far durable now. */
	fs_op_fsync(req, ino, datasync, fi);
}

/* One READDIR reply: its entries point into rep's buffer. */
struct dirpage {
	struct rpc_reply rep;
	struct msg_readdir_rep m;
};

static int readdir_rpc(fuse_req_t req, struct fs *fs,
		       const struct cairn_fid *fid, uint64_t cookie,
		       uint32_t max, struct dirpage *pg)
{
	struct msg_readdir_req q = { .dir = *fid, .cookie = cookie,
				     .max = max };
	int rc = fs_rpc(req, fs, OP_READDIR, &q, &pg->m, &pg->rep);

	if (rc)
		return rc;
	if (pg->m.count > max) {
		rpc_reply_free(&pg->rep);
		return fs_bad_reply(OP_READDIR);
	}
	return 0;
}

/*
 * Why entry (name, vnode) of directory dir must not reach the kernel, or
 * NULL if it may. A server that sent any of these is broken or hostile:
 * "." and ".." are synthesised here, a '/' would make a path of a name,
 * and an entry that is its own directory (or the root) would make a
 * directory loop the kernel's dcache does not expect.
 */
static const char *bad_dirent(const char *name, size_t len, uint64_t vnode,
			      fuse_ino_t dir)
{
	if (len == 0)
		return "empty name";
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return "dot name";
	if (memchr(name, '/', len))
		return "name contains '/'";
	if (vnode == 0)
		return "vnode 0";
	if (vnode == (dir & ITAB_VNODE_MASK))
		return "the directory itself";
	if (vnode == ITAB_ROOT_INO)
		return "the root";
	return NULL;
}

/* --- fetching listings ---------------------------------------------------- */

/* Add one BULKSTAT page's entries to l; *cookie follows the last one.
 * Returns 0, -EFBIG (too big to cache), -ENOMEM or -EIO (a broken
 * reply). */
static int add_page(fuse_ino_t ino, struct dcache_listing *l,
		    const struct msg_bulkstat_rep *p, uint64_t *cookie)
{
	struct msg_dirent de;
	struct rbuf ents;
	int rc;

	rbuf_init(&ents, p->ents.p, p->ents.len);
	while (msg_dirent_next(&ents, &de)) {
		char name[CAIRN_NAME_MAX + 1];
		size_t len = de.name.len;
		const char *why;

		/* C strings for the kernel; cookies after the page's start
		 * and increasing (dcache_listing_add checks the order). */
		if (len > CAIRN_NAME_MAX || memchr(de.name.p, '\0', len) ||
		    de.next_cookie <= *cookie)
			return fs_bad_reply(OP_BULKSTAT);
		*cookie = de.next_cookie;
		msg_str_copy(name, &de.name);
		if ((why = bad_dirent(name, len, de.attr.fid.vnode, ino))) {
			log_warn("BULKSTAT of vnode %llu: skipped an entry from "
				 "the server (%s)", (unsigned long long)ino,
				 why);
			continue;
		}
		rc = dcache_listing_add(l, de.next_cookie, name, len,
					&de.attr);
		if (rc == -EINVAL)
			return fs_bad_reply(OP_BULKSTAT);
		if (rc)
			return rc;
	}
	return 0;
}

/* Fetch the listing of directory fid (vnode ino) into the cache: 0 when
 * installed (fs_dir_fetch). ahead: not when one is cached already. */
static int dir_fetch(fuse_req_t req, struct fs *fs, const struct cairn_fid *fid,
		     uint32_t flags, int ahead)
{
	uint64_t seq = notify_seq(fs->ntf), ino = fid->vnode;
	struct msg_bulkstat_req q = { .dir = *fid, .max = CAIRN_BULKSTAT_MAX };
	struct dcache_listing *l = NULL;
	struct msg_bulkstat_rep p;
	struct rpc_reply rep;
	struct cairn_attr dattr;
	uint64_t new_cookie = 0;
	int rc, fresh, installed, pages = 0;

	memset(&dattr, 0, sizeof(dattr));
	rc = ahead ? dcache_fetch_begin_absent(fs->dc, ino)
		   : dcache_fetch_begin(fs->dc, ino);
	if (rc)
		return rc;
	/* From here on, dcache_fetch_end whatever happens. */
	rc = dcache_listing_new(&l);
	while (!rc) {
		q.flags = pages ? 0 : flags; /* atime: from cookie 0 only */
		if ((rc = fs_rpc(req, fs, OP_BULKSTAT, &q, &p, &rep)))
			break;
		if (p.dir.fid.vnode != ino || (p.count == 0 && !p.eof))
			rc = fs_bad_reply(OP_BULKSTAT);
		else if (pages && p.dir.dv != dattr.dv)
			rc = -EAGAIN; /* changed between pages */
		else
			rc = add_page(ino, l, &p, &q.cookie);
		if (!rc || rc == -EFBIG) {
			dattr = p.dir;
			new_cookie = p.new_cookie;
		}
		rpc_reply_free(&rep);
		pages++;
		if (!rc && p.eof)
			break;
	}
	fresh = notify_reply_begin(fs->ntf, seq);
	installed = dcache_fetch_end(fs->dc, ino, rc ? NULL : l, dattr.dv,
				     new_cookie, fresh, rc == -EFBIG);
	if (rc)
		dcache_listing_free(l);
	/* Read with the listing: current if the directory was not broken
	 * since (installed), or if nothing was. */
	if (pages && (!rc || rc == -EFBIG))
		itab_update(fs->itab, &dattr, installed || fresh);
	notify_reply_end(fs->ntf);
	if (rc == -EFBIG)
		log_debug("directory %llu: over %u entries, not cached",
			  (unsigned long long)ino, DCACHE_DIR_MAX);
	return installed ? 0 : rc ? rc : -EAGAIN;
}

/* A directory we just made (its attributes a, from a reply read after
 * seq) is empty: its listing is known without asking, so that the first
 * lookup and create in it need no BULKSTAT. Not when any break came since
 * seq (someone may have made something in it already). */
void fs_dir_made(struct fs *fs, uint64_t seq, const struct cairn_attr *a)
{
	struct dcache_listing *l;
	uint64_t ino = a->fid.vnode;
	int fresh;

	if (dcache_fetch_begin_absent(fs->dc, ino))
		return;
	if (dcache_listing_new(&l)) {
		dcache_fetch_end(fs->dc, ino, NULL, 0, 0, 0, 0);
		return;
	}
	fresh = notify_reply_begin(fs->ntf, seq);
	if (fresh)
		dcache_fetch_end(fs->dc, ino, l, a->dv, CAIRN_COOKIE_FIRST, 1,
				 0);
	else
		dcache_fetch_end(fs->dc, ino, NULL, 0, 0, 0, 0);
	notify_reply_end(fs->ntf);
	if (!fresh)
		dcache_listing_free(l);
}

/* How long a request waits for another thread's fetch of its directory
 * before it asks the server itself. */
#define AHEAD_WAIT_MS 2000

int fs_dir_fetch(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		 uint32_t flags)
{
	struct cairn_fid fid;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		return rc;
	rc = dir_fetch(req, fs, &fid, flags, 0);
	/* Most likely a read-ahead of it is under way: its answer is as
	 * good as ours, and a second fetch would only be refused. Unless we
	 * owe the directory an atime (BS_LIST): a read-ahead does not list
	 * for the user, so then fetch again once it is done. */
	if (rc == -EBUSY) {
		rc = dcache_fetch_wait(fs->dc, ino, AHEAD_WAIT_MS) == 0
			? 0 : -EBUSY;
		if (!rc && (flags & BS_LIST))
			rc = dir_fetch(req, fs, &fid, flags, 0);
	}
	return rc;
}

/* --- read-ahead of tree walks ------------------------------------------- */

/*
 * A cold `find`, `ls -lR`, `make` or `rsync` walks a tree one directory
 * at a time, and each directory costs one BULKSTAT round trip. When a
 * directory is first listed from its start (READDIR at offset 0), or
 * AHEAD_LOOKUPS names were looked up in it (a walk by paths, not one
 * path through it), the listings of its
 * subdirectories (at most AHEAD_PER_DIR) are queued and fetched by
 * FS_AHEAD_THREADS threads, so the walk finds them cached. Only listings
 * that are listed expand further, so read-ahead stays one level ahead of
 * the walk. Fetched listings are
 * ordinary cache entries (same promises, same breaks); a full queue drops
 * the rest (counted). The threads' calls are interrupted at unmount.
 */
#define AHEAD_PER_DIR 64u

void fs_dir_ahead(struct fs *fs, fuse_ino_t ino, unsigned min_hits)
{
	struct fs_ahead *a = &fs->ahead;
	struct cairn_fid fids[AHEAD_PER_DIR];
	size_t n;

	if (!a->started)
		return;
	n = dcache_take_subdirs(fs->dc, ino, min_hits, fids, AHEAD_PER_DIR);
	if (!n)
		return;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < n; i++) {
		if (a->n == FS_AHEAD_QUEUE) {
			a->dropped += n - i;
			break;
		}
		a->q[(a->head + a->n++) % FS_AHEAD_QUEUE] =
			(struct fs_bg_item){ fids[i], FS_BG_LISTING };
	}
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

void fs_touch_atime(struct fs *fs, const struct cairn_fid *fid)
{
	struct fs_ahead *a = &fs->ahead;

	if (!a->started)
		return;
	pthread_mutex_lock(&a->lock);
	if (a->n < FS_AHEAD_QUEUE) {
		a->q[(a->head + a->n++) % FS_AHEAD_QUEUE] =
			(struct fs_bg_item){ *fid, FS_BG_ATIME };
		/* A thread collecting atimes takes this one when its wait
		 * ends: waking it for each (a `cat` of a tree reads a file
		 * every 100 us) cost two thread switches a file. */
		if (!a->gathering || a->n >= CAIRN_ORPHAN_DROP_MAX)
			pthread_cond_signal(&a->cond);
	} else {
		a->dropped++;
	}
	pthread_mutex_unlock(&a->lock);
}

/* One ATIME for n files: the server moves each atime where relatime
 * says so (docs/PROTOCOL.md). The table keeps our clock's reading
 * (itab_set_atime) until attributes come from the server again. */
static int touch_atimes(struct fs *fs, const struct cairn_fid *fids, size_t n)
{
	struct msg_orphan_drop_req q = { .count = (uint32_t)n, .fids = fids };

	/* A read-only export moves no atime (its server says EROFS). */
	if (rpc_read_only(fs->rpc))
		return 0;
	return fs_rpc(NULL, fs, OP_ATIME, &q, NULL, NULL);
}

/* How long an atime waits for others to share its ATIME call. */
#define ATIME_GATHER_MS 10

/*
 * An ATIME item was taken: collect the atimes queued right behind it into
 * batch (first included), waiting up to ATIME_GATHER_MS for more while
 * nothing else is queued (reads come faster than round trips). Called
 * and returns with a->lock held; returns the count.
 */
static size_t gather_atimes(struct fs_ahead *a, const struct cairn_fid *first,
			    struct cairn_fid *batch)
{
	struct timespec until;
	size_t n = 0;
	int over = 0;

	LOCK_ASSERT_HELD(&a->lock);
	batch[n++] = *first;
	clock_deadline(CLOCK_REALTIME, ATIME_GATHER_MS, &until);
	for (;;) {
		/* also what came while we waited (fs_touch_atime does not
		 * wake a gathering thread for each) */
		while (a->n && n < CAIRN_ORPHAN_DROP_MAX &&
		       a->q[a->head].kind == FS_BG_ATIME) {
			batch[n++] = a->q[a->head].fid;
			a->head = (a->head + 1) % FS_AHEAD_QUEUE;
			a->n--;
		}
		if (over || a->stopping || a->n || n == CAIRN_ORPHAN_DROP_MAX)
			return n;
		a->gathering++;
		over = pthread_cond_timedwait(&a->cond, &a->lock, &until) ==
		       ETIMEDOUT;
		a->gathering--;
	}
}

static void *ahead_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_ahead *a = &fs->ahead;
	struct cairn_fid *batch = malloc(CAIRN_ORPHAN_DROP_MAX *
					 sizeof(*batch));
	unsigned me;

	pthread_mutex_lock(&a->lock);
	me = a->nthreads++;
	rpc_intr_init(&a->intr[me], fs->rpc);
	fs_set_call_intr(&a->intr[me]);
	for (;;) {
		struct fs_bg_item it;
		int rc;

		while (!a->n && !a->stopping)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->stopping)
			break;
		it = a->q[a->head];
		a->head = (a->head + 1) % FS_AHEAD_QUEUE;
		a->n--;
		if (it.kind == FS_BG_ATIME) {
			/* With the atimes queued right behind it: one call
			 * for a whole `cat` of a tree. */
			size_t n = batch ? gather_atimes(a, &it.fid, batch)
					 : 0;

			pthread_mutex_unlock(&a->lock);
			if (n)
				touch_atimes(fs, batch, n);
			pthread_mutex_lock(&a->lock);
			continue;
		}
		pthread_mutex_unlock(&a->lock);
		rc = dir_fetch(NULL, fs, &it.fid, 0, 1);
		pthread_mutex_lock(&a->lock);
		if (rc == 0)
			a->fetched++;
	}
	pthread_mutex_unlock(&a->lock);
	free(batch);
	return NULL;
}

int fs_ahead_start(struct fs *fs)
{
	struct fs_ahead *a = &fs->ahead;

	for (unsigned i = 0; i < FS_AHEAD_THREADS; i++) {
		int rc = pthread_create(&a->th[i], NULL, ahead_main, fs);

		if (rc) {
			fs_ahead_stop(fs);
			return -rc;
		}
		a->started++;
	}
	return 0;
}

void fs_ahead_stop(struct fs *fs)
{
	struct fs_ahead *a = &fs->ahead;

	if (!a->started)
		return;
	pthread_mutex_lock(&a->lock);
	a->stopping = 1;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	/* A fetch in progress may wait for a server that is gone. */
	for (unsigned i = 0; i < a->started; i++) {
		pthread_mutex_lock(&a->lock);
		int have = i < a->nthreads;
		pthread_mutex_unlock(&a->lock);
		if (have)
			rpc_interrupt(&a->intr[i]);
	}
	for (unsigned i = 0; i < a->started; i++)
		pthread_join(a->th[i], NULL);
	a->started = 0;
	log_info("directory read-ahead: %llu listings fetched, %llu not "
		 "queued (queue full)", (unsigned long long)a->fetched,
		 (unsigned long long)a->dropped);
}

/* The reply buffer being filled. */
struct dirbuf {
	char *p;
	size_t size;
	size_t used;
	int plus;
};

/* Append entry `name` (e, with e->attr only for plain readdir) resuming at
 * `next`. Returns 1, or 0 when it does not fit (nothing appended). */
static int add_dirent(fuse_req_t req, struct dirbuf *b, const char *name,
		      const struct fuse_entry_param *e, off_t next)
{
	char *at = b->p + b->used;
	size_t room = b->size - b->used;
	size_t need = b->plus
		? fuse_add_direntry_plus(req, at, room, name, e, next)
		: fuse_add_direntry(req, at, room, name, &e->attr, next);

	if (need > room)
		return 0;
	b->used += need;
	return 1;
}

/* Whether entry `name` still fits (its size depends on the name only):
 * checked before the entry's lookup reference is taken. */
static int dirent_fits(fuse_req_t req, const struct dirbuf *b,
		       const char *name, const struct fuse_entry_param *e)
{
	size_t need = b->plus
		? fuse_add_direntry_plus(req, NULL, 0, name, e, 0)
		: fuse_add_direntry(req, NULL, 0, name, &e->attr, 0);

	return need <= b->size - b->used;
}

/* "." and ".." from offset off; returns 1 if both fit. */
static int add_dots(fuse_req_t req, struct dirbuf *b, off_t off,
		    fuse_ino_t ino, uint64_t parent)
{
	for (off_t dot = off; dot < 2; dot++) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = dot == 0 ? ino : parent;
		e.attr.st_mode = S_IFDIR;
		if (!add_dirent(req, b, dot == 0 ? "." : "..", &e, dot + 1))
			return 0;
	}
	return 1;
}

static int time_cmp(struct cairn_time a, struct cairn_time b)
{
	if (a.sec != b.sec)
		return a.sec < b.sec ? -1 : 1;
	return a.nsec < b.nsec ? -1 : a.nsec > b.nsec;
}

int fs_atime_due(struct fs *fs, fuse_ino_t ino, int unknown)
{
	struct cairn_attr a;

	if (itab_getattr(fs->itab, ino, &a))
		return unknown;
	return time_cmp(a.atime, a.mtime) <= 0 ||
	       time_cmp(a.atime, a.ctime) <= 0 ||
	       (int64_t)time(NULL) - a.atime.sec >= 24 * 3600;
}

void fs_touch_cached_atime(struct fs *fs, fuse_ino_t ino)
{
	struct cairn_fid fid;
	struct timespec now;

	if (itab_fid(fs->itab, ino, &fid))
		return;
	/* The kernel asks for attributes right after (it marks atime
	 * stale): the table answers with our clock until the server's
	 * value comes back. */
	clock_gettime(CLOCK_REALTIME, &now);
	itab_set_atime(fs->itab, ino, (struct cairn_time){
		(int64_t)now.tv_sec, (uint32_t)now.tv_nsec });
	fs_touch_atime(fs, &fid);
}

/* Entries of a reply that may fit size bytes (names average well under
 * 32 bytes; a plus entry is ~150). */
static size_t page_entries(size_t size, int plus)
{
	return size / (plus ? 128 : 32) + 1;
}

/*
 * readdir and readdirplus from the cached listing. Returns 0 when
 * answered (with entries or an error); -EAGAIN (nothing answered) when no
 * listing is cached. With check_atime, a listing from its start moves the
 * directory's atime where relatime owes one (fs_touch_cached_atime; a
 * fetch moves it itself, BS_LIST). With plus, every entry but "." and
 * ".." is handed to the kernel as readdir_server does.
 */
static int readdir_cached(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			  size_t size, off_t off, int plus, int check_atime)
{
	uint64_t cookie = off < CAIRN_COOKIE_FIRST ? 0 : (uint64_t)off;
	size_t max = page_entries(size, plus), n = 0, ncounted = 0;
	struct dirbuf b = { .size = size, .plus = plus };
	struct dcache_ent *ents = NULL;
	uint64_t *counted = NULL, parent;
	int eof, rc;

	if ((rc = itab_parent(fs->itab, ino, &parent)))
		goto out;
	b.p = malloc(size);
	counted = plus ? malloc(max * sizeof(*counted)) : NULL;
	if (!b.p || (plus && !counted)) {
		rc = -ENOMEM;
		goto out;
	}
	notify_reply_begin(fs->ntf, 0);
	if ((rc = dcache_read(fs->dc, ino, cookie, max, &ents, &n,
			      &eof)) == -ENOENT)
		rc = -EAGAIN;
	if (rc == -EAGAIN || rc) {
		notify_reply_end(fs->ntf);
		goto out;
	}
	if (fs->test_list_pause_us)
		usleep(fs->test_list_pause_us);
	if (add_dots(req, &b, off, ino, parent)) {
		for (size_t i = 0; i < n; i++) {
			const struct dcache_ent *d = &ents[i];
			struct fuse_entry_param e;

			uint64_t nodeid = d->attr.fid.vnode;

			fs_fill_entry(&e, nodeid, &d->attr, !d->stale);
			/* The name stands while the listing does. */
			e.entry_timeout = FS_CACHE_TIMEOUT;
			/* A status no longer promised must not reach the
			 * kernel, which would take it over newer attributes
			 * of its own: a plus entry with node id 0 is listed
			 * but not linked (nor counted). */
			if (plus && d->stale) {
				e.ino = 0;
				e.generation = 0;
			}
			if (!dirent_fits(req, &b, d->name, &e))
				break;
			if (plus && !d->stale) {
				if ((rc = itab_add_entry(fs->itab, ino, d->name,
							 d->len, &d->attr, 1,
							 NULL, &nodeid)))
					break;
				e.ino = nodeid;
				counted[ncounted++] = nodeid;
			}
			add_dirent(req, &b, d->name, &e, (off_t)d->cookie);
		}
	}
	/* Delivered: the kernel holds the references counted. */
	if (!rc && fuse_reply_buf(req, b.p, b.used) == 0)
		ncounted = 0;
	for (size_t i = 0; i < ncounted; i++)
		fs_forget(fs, counted[i], 1);
	notify_reply_end(fs->ntf);
	/* Listed without the server: relatime may owe the directory an
	 * atime, moved in the background as for a file read from the
	 * cache (fs_op_read), not by fetching the listing again. */
	if (!rc && check_atime && cookie == 0 && fs_atime_due(fs, ino, 1))
		fs_touch_cached_atime(fs, ino);
out:
	if (rc && rc != -EAGAIN)
		reply_error(req, rc);
	free(ents);
	free(counted);
	free(b.p);
	return rc == -EAGAIN ? rc : 0;
}

/*
 * readdir and readdirplus from the server, page by page (READDIR): when
 * the listing cannot be cached. With plus, every entry but "." and ".."
 * (ino 0: no lookup reference) is an entry handed to the kernel; if the
 * reply does not reach it, those references are taken back.
 */
static void readdir_server(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, int plus)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct dirbuf b = { .size = size, .plus = plus };
	struct dirpage pg;
	struct rbuf ents;
	struct msg_dirent de;
	uint64_t *counted = NULL;
	size_t ncounted = 0;
	struct cairn_fid fid;
	uint64_t parent;
	int fresh = 0, in_section = 0, rc;

	memset(&pg, 0, sizeof(pg));
	if ((rc = itab_fid(fs->itab, ino, &fid)) ||
	    (rc = itab_parent(fs->itab, ino, &parent)))
		goto out;
	if (!(b.p = malloc(size))) {
		rc = -ENOMEM;
		goto out;
	}
	if (!add_dots(req, &b, off, ino, parent))
		goto reply;
	rc = readdir_rpc(req, fs, &fid, off < CAIRN_COOKIE_FIRST ? 0 : (uint64_t)off,
			 (uint32_t)page_entries(size, plus), &pg);
	if (rc)
		goto out;
	if (plus && !(counted = malloc(pg.m.count * sizeof(*counted) + 1))) {
		rc = -ENOMEM;
		goto out;
	}
	fresh = notify_reply_begin(fs->ntf, seq);
	in_section = 1;
	/* READDIR promises the directory: its entries are covered. */
	if (fresh)
		itab_set_promised(fs->itab, ino);
	rbuf_init(&ents, pg.m.ents.p, pg.m.ents.len);
	while (msg_dirent_next(&ents, &de)) {
		const struct cairn_attr *a = &de.attr;
		struct fuse_entry_param e;
		char name[CAIRN_NAME_MAX + 1];
		size_t len = de.name.len;
		const char *why;

		/* The kernel takes C strings, and no cookie resumes at "."
		 * or "..": a server that sent these is broken. */
		if (len > CAIRN_NAME_MAX || memchr(de.name.p, '\0', len) ||
		    de.next_cookie < CAIRN_COOKIE_FIRST) {
			rc = fs_bad_reply(OP_READDIR);
			goto out;
		}
		msg_str_copy(name, &de.name);
		/* Skipped, not fatal: the rest of the directory stays
		 * readable (the next entry's cookie resumes past it). */
		if ((why = bad_dirent(name, len, a->fid.vnode, ino))) {
			log_warn("READDIR of vnode %llu: skipped an entry from "
				 "the server (%s)", (unsigned long long)ino, why);
			continue;
		}
		fs_fill_entry(&e, a->fid.vnode, a, fresh);
		if (!dirent_fits(req, &b, name, &e))
			break;
		if (plus) {
			uint64_t nodeid;

			if ((rc = itab_add_entry(fs->itab, ino, name, len, a,
						 fresh, NULL, &nodeid)))
				goto out;
			e.ino = nodeid;
			counted[ncounted++] = nodeid;
		} else {
			itab_update(fs->itab, a, fresh);
		}
		add_dirent(req, &b, name, &e, (off_t)de.next_cookie);
	}
reply:
	/* Delivered: the kernel holds the references counted. */
	if (fuse_reply_buf(req, b.p, b.used) == 0)
		ncounted = 0;
	rc = 0;
out:
	/* Entries counted but not delivered (an error, or a reply that did
	 * not reach the kernel) take their lookup references back. */
	for (size_t i = 0; i < ncounted; i++)
		fs_forget(fs, counted[i], 1);
	if (rc)
		reply_error(req, rc);
	/* A READDIR from 0 may have moved the atime the table holds. */
	if (in_section && off < CAIRN_COOKIE_FIRST)
		itab_attr_stale(fs->itab, ino);
	if (in_section)
		notify_reply_end(fs->ntf);
	/* A break raced the READDIR: its invalidation may have run before
	 * this page reached the kernel, which would keep it (fs_op_opendir). */
	if (in_section && !fresh)
		notify_inval_inode(fs->ntf, ino);
	rpc_reply_free(&pg.rep);
	free(counted);
	free(b.p);
}

/* From the cache; without a listing (or owing an atime), fetch it and
 * try again; the server page by page only when that fails. */
static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, int plus)
{
	struct fs *fs = req_fs(req);
	int rc;

	/* A listing from the start: a walk (find, ls -R, rsync, make) that
	 * will want the subdirectories' listings next. */
	if (off == 0)
		fs_dir_ahead(fs, ino, 0);
	if (readdir_cached(req, fs, ino, size, off, plus, 1) == 0)
		return;
	rc = fs_dir_fetch(req, fs, ino,
			  off < CAIRN_COOKIE_FIRST ? BS_LIST : 0);
	if (rc && !fs_dir_fetch_fallback(rc)) {
		reply_error(req, rc);
		return;
	}
	if (rc == 0) {
		if (off == 0)
			fs_dir_ahead(fs, ino, 0);
		if (readdir_cached(req, fs, ino, size, off, plus, 0) == 0)
			return;
	}
	readdir_server(req, ino, size, off, plus);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 0);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 1);
}

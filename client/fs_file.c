/*
 * fs_file.c - FUSE operations on open files: open, read, write, release,
 * fsync, fallocate (see fs_int.h).
 *
 * Opening a file asks the server nothing while the promise stands
 * (fs_open). The kernel's OPEN, FLUSH and RELEASE reach the daemon
 * because locks need them (fs_lock.c: a close's FLUSH releases the
 * process's POSIX locks, a RELEASE the open file's flock and OFD
 * locks); with --local-locks the first OPEN is answered ENOSYS and the
 * kernel opens with file handle 0, keeps its page cache and sends no
 * OPEN, FLUSH or RELEASE again (no_open). Close-to-open rests on
 * invalidation either way: the kernel may keep pages and attributes only
 * while the promise stands, and everything that ends a promise (a break,
 * a reconnect) invalidates them in the kernel; a READ whose data may
 * have raced a break invalidates the pages it filled (fs_op_read).
 * WRITEs go to the write-back journal while the file's write token is
 * held (wback.h), else to the server before they are answered. The
 * server learns nothing from opens: an unlinked file stays on it while
 * the kernel holds it (fs_orphan.c).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include "ccache.h"
#include "fs_int.h"
#include "fuseio.h"
#include "inode.h"
#include "notify.h"
#include "wback.h"

static void pin_open(struct fs *fs, fuse_ino_t ino,
		     const struct fuse_file_info *fi);

/*
 * open/opendir. Close-to-open: unless the promise stands and the page cache
 * holds the current version, fetch fresh attributes first and let the
 * kernel drop its cached pages (keep_cache 0). When the cache may stay,
 * the inode table is looked at once and the server not at all.
 */
void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     int isdir)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	struct cairn_attr a;
	int fresh, rc;

	fi->fh = isdir ? 0 : fs_lock_next_fh(fs);
	/* O_TRUNC changes nothing here: the kernel truncates (its pages
	 * too) with a SETATTR after this reply (atomic_o_trunc is off),
	 * which goes through the journal like any other. */
	rc = itab_open_begin(fs->itab, ino, 1, &fid);
	if (rc < 0)
		goto out;
	/* Whoever may write it takes its write token (fs_note_opener). */
	if (!isdir && ((fi->flags & O_ACCMODE) != O_RDONLY ||
		       (fi->flags & O_TRUNC)))
		fs_note_opener(req, fid.vnode);
	if (rc >= 1) {
		fi->keep_cache = rc == 1;
		if (rc == 1 && !isdir)
			pin_open(fs, ino, fi);
		fs_reply_open(req, fs, ino, NULL, fi);
		return;
	}
	if ((rc = fs_getattr(req, fs, &fid, &a)))
		goto out;
	fresh = notify_reply_begin(fs->ntf, seq);
	itab_open_end(fs->itab, ino, &a, fresh);
	fi->keep_cache = 0;
	fs_reply_open(req, fs, ino, NULL, fi);
	notify_reply_end(fs->ntf);
	return;
out:
	reply_error(req, rc);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* The kernel takes this as "opens need no daemon" and sends no
	 * OPEN (nor RELEASE) again on this connection. */
	if (req_fs(req)->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fs_open(req, ino, fi, 0);
}

/*
 * One READ of up to `want` bytes at off. The data stays in the reply's
 * buffer, handed to *rep; *iov points at it.
 */
static int read_rpc(fuse_req_t req, struct fs *fs,
		    const struct cairn_fid *fid, uint64_t off, uint32_t want,
		    struct rpc_reply *rep, struct iovec *iov,
		    struct cairn_attr *a)
{
	struct msg_read_req q = { .fid = *fid, .off = off, .len = want };
	struct msg_read_rep p;
	int rc;

	if ((rc = fs_rpc(req, fs, OP_READ, &q, &p, rep)))
		return rc;
	if (p.data.len > want) {
		rpc_reply_free(rep);
		return fs_bad_reply(OP_READ);
	}
	iov->iov_base = (void *)p.data.p;
	iov->iov_len = p.data.len;
	*a = p.attr;
	return 0;
}

/*
 * The kernel gets the data straight from the reply buffers, without a copy.
 * max_write/max_pages keep kernel reads within one READ (the common case:
 * one buffer, nothing allocated here); anything larger is split, and its
 * pieces go to the kernel as one iovec.
 */
static void read_direct(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			size_t size, off_t off)
{
	uint64_t seq = notify_seq(fs->ntf);
	size_t nmax = size ? (size - 1) / CAIRN_MAX_IO + 1 : 0;
	struct rpc_reply rep1, *rep = &rep1, *reps = NULL;
	struct iovec iov1, *iov = &iov1, *iovs = NULL;
	struct cairn_fid fid;
	struct cairn_attr a;
	size_t n = 0, got = 0;
	int rc;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	if (nmax > 1) {
		reps = calloc(nmax, sizeof(*reps));
		iovs = calloc(nmax, sizeof(*iovs));
		if (!reps || !iovs) {
			rc = -ENOMEM;
			goto out;
		}
		rep = reps;
		iov = iovs;
	}
	while (got < size) {
		uint32_t want = size - got > CAIRN_MAX_IO ? CAIRN_MAX_IO
							  : (uint32_t)(size - got);

		if ((rc = read_rpc(req, fs, &fid, (uint64_t)off + got, want,
				   &rep[n], &iov[n], &a)))
			goto out;
		got += iov[n].iov_len;
		if (iov[n++].iov_len < want)
			break; /* end of file */
	}
	ccache_count_fetch(fs->cc, got);
	if (n)
		fs_note_attrs(fs, seq, &a, NULL);
	if (n <= 1)
		fuse_reply_buf(req, n ? iov[0].iov_base : NULL, got);
	else
		fuse_reply_iov(req, iov, (int)n);
out:
	if (rc)
		reply_error(req, rc);
	for (size_t i = 0; i < n; i++)
		rpc_reply_free(&rep[i]);
	free(reps);
	free(iovs);
}

/*
 * Reads through the chunk cache (client/ccache.h).
 *
 * Which data version may be served: the one the inode table holds while
 * the promise stands, or else the one a GETATTR just returned with no
 * break since (that GETATTR also brings the promise back). Both are
 * checked against the break sequence snapshot taken first, and data read
 * from the cache reaches the kernel only inside a reply section that is
 * still fresh: a break that arrived meanwhile sends the request to the
 * server instead (read_direct). Our own changes do not break our
 * promise, but every one of them returns the new data version, which the
 * inode table takes before the change is answered.
 *
 * A chunk missing from the cache is fetched in a chunk-aligned READ: all
 * of it (CCACHE_CHUNK) when the kernel asked for at least
 * READ_WHOLE_MIN (readahead, sequential reads), else just what was asked
 * (random reads do not pull in a whole MiB each). What was fetched is
 * stored after the kernel has its answer, under the version it was
 * trusted at, and only when the reply carries that same version (a READ
 * that raced with a change may return bytes of another version than its
 * attributes say; this check refuses both cases) and holds the whole
 * chunk: all CCACHE_CHUNK bytes, or everything up to that version's end
 * of file.
 */
#define READ_WHOLE_MIN (128u * 1024u)

struct rpiece {
	struct rpc_reply rep;   /* a fetched chunk (or part), or empty */
	struct ccache_buf cb;   /* bytes from the cache, or empty */
	struct iovec iov;       /* what goes to the kernel */
	uint32_t store_len;     /* > 0: rep holds the whole chunk, this long */
	const void *store_p;
	uint32_t coff, cend;    /* the bytes of the chunk asked for */
	struct ccache_key k;
	int state;              /* PIECE_*; once fetched, iov points into rep */
	/* A fetch on a thread of its own (all but one of a READ's fetches
	 * run together). */
	struct fs *fs;
	int whole, rc;
	struct cairn_attr a;
	pthread_t th;
	int started;
};

enum {
	PIECE_CACHED,   /* iov points into cb */
	PIECE_FETCH,    /* to be fetched by this READ, unclaimed */
	PIECE_CLAIMED,  /* to be fetched by this READ, which claimed it */
	PIECE_BUSY,     /* claimed by another READ: wait, then look again */
};

/*
 * One fetch per chunk. The kernel's READs do not follow chunks (cat reads
 * 128 KiB at a time and the readahead windows start anywhere), so two
 * READs in flight often need one chunk, and each used to fetch it whole:
 * a cold sequential read moved every byte twice. A READ that is to fetch
 * chunks whole claims, in one step, each one no other READ has claimed,
 * and waits for the others' claims to end (chunk stored, or the fetch
 * failed) before it looks in the cache again. Since each READ claims all
 * it will claim at once and only then waits, no two can wait for each
 * other; a claim ends when its fetch does (the RPC has its own timeout).
 */
static int fetching_find(const struct fs_fetching *f,
			 const struct ccache_key *k)
{
	for (int i = 0; i < f->n; i++)
		if (f->k[i].idx == k->idx && f->k[i].dv == k->dv &&
		    cairn_fid_eq(&f->k[i].fid, &k->fid))
			return i;
	return -1;
}

/* Each PIECE_FETCH of ps becomes PIECE_CLAIMED or PIECE_BUSY (or stays
 * PIECE_FETCH when the table is full). */
static void fetch_claim(struct fs *fs, struct rpiece *ps, size_t n)
{
	struct fs_fetching *f = &fs->fetching;

	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < n; i++) {
		if (ps[i].state != PIECE_FETCH)
			continue;
		if (fetching_find(f, &ps[i].k) >= 0) {
			ps[i].state = PIECE_BUSY;
		} else if (f->n < FS_FETCHING_MAX) {
			f->k[f->n++] = ps[i].k;
			ps[i].state = PIECE_CLAIMED;
		}
	}
	pthread_mutex_unlock(&f->lock);
}

static void fetch_wait(struct fs *fs, const struct ccache_key *k)
{
	struct fs_fetching *f = &fs->fetching;

	pthread_mutex_lock(&f->lock);
	while (fetching_find(f, k) >= 0)
		pthread_cond_wait(&f->done, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static void fetch_done(struct fs *fs, const struct ccache_key *k)
{
	struct fs_fetching *f = &fs->fetching;
	int i;

	pthread_mutex_lock(&f->lock);
	if ((i = fetching_find(f, k)) >= 0)
		f->k[i] = f->k[--f->n];
	pthread_cond_broadcast(&f->done);
	pthread_mutex_unlock(&f->lock);
}

/* The cached bytes of piece p: 1 when found (PIECE_CACHED), 0 when not,
 * or a negative errno. */
static int piece_cached(struct fs *fs, struct rpiece *p, int *from_cache)
{
	int rc = ccache_get(fs->cc, &p->k, p->coff, p->cend - p->coff, &p->cb);

	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	p->iov.iov_base = (void *)p->cb.p;
	p->iov.iov_len = p->cb.len;
	p->state = PIECE_CACHED;
	*from_cache = 1;
	return 1;
}

/*
 * Fetch piece p from the server: the whole chunk when p->whole, else
 * just its bytes; p->a gets the reply's attributes; p->rc 0 or a
 * negative errno. req may be NULL (a thread of its own).
 */
static void piece_fetch(fuse_req_t req, struct rpiece *p)
{
	uint64_t base = (uint64_t)p->k.idx * CCACHE_CHUNK;
	uint32_t qoff = p->whole ? 0 : p->coff;
	uint32_t qlen = p->whole ? CCACHE_CHUNK : p->cend - p->coff;
	struct iovec got;

	if ((p->rc = read_rpc(req, p->fs, &p->k.fid, base + qoff, qlen,
			      &p->rep, &got, &p->a)))
		return;
	ccache_count_fetch(p->fs->cc, got.iov_len);
	/* The whole chunk: asked from its start, and either full or cut by
	 * the end of the file at the version the reply carries. */
	if (p->a.dv == p->k.dv && qoff == 0 && got.iov_len > 0 &&
	    (got.iov_len == CCACHE_CHUNK || got.iov_len < qlen ||
	     base + got.iov_len == p->a.size)) {
		p->store_p = got.iov_base;
		p->store_len = (uint32_t)got.iov_len;
	}
	if (got.iov_len > p->coff - qoff) {
		size_t end = p->cend - qoff < got.iov_len ? p->cend - qoff
							  : got.iov_len;

		p->iov.iov_base = (uint8_t *)got.iov_base + (p->coff - qoff);
		p->iov.iov_len = end - (p->coff - qoff);
	}
}

static void *piece_fetch_thread(void *arg)
{
	piece_fetch(NULL, arg);
	return NULL;
}

/* Fetch every piece of ps in state `which`, together: each but the first
 * on a thread of its own. */
static void fetch_together(fuse_req_t req, struct rpiece *ps, size_t n,
			   int which)
{
	struct rpiece *mine = NULL;

	for (size_t i = 0; i < n; i++) {
		if (ps[i].state != which)
			continue;
		if (!mine)
			mine = &ps[i];
		else if (pthread_create(&ps[i].th, NULL, piece_fetch_thread,
					&ps[i]) == 0)
			ps[i].started = 1;
	}
	if (mine)
		piece_fetch(req, mine);
	for (size_t i = 0; i < n; i++) {
		if (ps[i].state != which || &ps[i] == mine)
			continue;
		if (ps[i].started)
			pthread_join(ps[i].th, NULL);
		else
			piece_fetch(req, &ps[i]);
		ps[i].started = 0;
	}
}

/*
 * Returns 0 when req was answered, 1 when the caller must read straight
 * from the server (the version could not be trusted, or a break came).
 */
static int read_cached(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		       size_t size, off_t off)
{
	uint64_t seq = notify_seq(fs->ntf);
	uint64_t first = (uint64_t)off / CCACHE_CHUNK;
	uint64_t last = ((uint64_t)off + size - 1) / CCACHE_CHUNK;
	size_t np = (size_t)(last - first + 1), n = 0, got = 0;
	struct rpiece one[2], *ps = one;
	struct iovec iov1[2], *iov = iov1;
	struct itab_info info;
	struct cairn_attr a, last_a;
	int rc, fresh, from_cache = 0, have_a = 0, other_dv = 0;
	int whole = size >= READ_WHOLE_MIN, busy = 0;

	if (last > UINT32_MAX)
		return 1;
	if (itab_info(fs->itab, ino, &info)) {
		reply_error(req, -ESTALE);
		return 0;
	}
	if (!info.promise) {
		if ((rc = fs_getattr(req, fs, &info.fid, &a))) {
			reply_error(req, rc);
			return 0;
		}
		fs_note_attrs(fs, seq, &a, NULL);
		/* No break since seq now means none since the GETATTR. */
		fresh = notify_reply_begin(fs->ntf, seq);
		notify_reply_end(fs->ntf);
		if (!fresh)
			return 1;
		info.dv = a.dv;
	}
	if (np > 2) {
		ps = calloc(np, sizeof(*ps));
		iov = calloc(np, sizeof(*iov));
		if (!ps || !iov) {
			free(ps);
			free(iov);
			reply_error(req, -ENOMEM);
			return 0;
		}
	} else {
		memset(one, 0, sizeof(one));
	}
	/* What the cache has; the rest is fetched, together. */
	rc = 0;
	for (n = 0; n < np && rc >= 0; n++) {
		struct rpiece *p = &ps[n];

		p->k = (struct ccache_key){ info.fid, info.dv,
					    (uint32_t)(first + n) };
		p->coff = n == 0 ? (uint32_t)((uint64_t)off % CCACHE_CHUNK) : 0;
		p->cend = first + n == last
			? (uint32_t)(((uint64_t)off + size - 1) % CCACHE_CHUNK) + 1
			: CCACHE_CHUNK;
		p->fs = fs;
		p->whole = whole;
		p->state = PIECE_FETCH;
		rc = piece_cached(fs, p, &from_cache);
	}
	if (rc < 0)
		goto answer;
	if (whole)
		fetch_claim(fs, ps, n);
	for (size_t i = 0; i < n; i++)
		busy |= ps[i].state == PIECE_BUSY;
	/* Ours first (claimed, or unclaimed when the table was full), then
	 * what another READ was fetching: from the cache once it is done,
	 * else fetched here after all. */
	fetch_together(req, ps, n, PIECE_CLAIMED);
	fetch_together(req, ps, n, PIECE_FETCH);
	for (size_t i = 0; busy && i < n; i++) {
		if (ps[i].state != PIECE_BUSY)
			continue;
		fetch_wait(fs, &ps[i].k);
		if ((rc = piece_cached(fs, &ps[i], &from_cache)) < 0)
			goto answer;
		if (rc == 0) {
			ps[i].state = PIECE_FETCH;
			piece_fetch(req, &ps[i]);
		}
	}
	/* In chunk order; a piece shorter than asked is the end of file. */
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct rpiece *p = &ps[i];

		if (p->state != PIECE_CACHED) {
			if ((rc = p->rc) < 0)
				break;
			have_a = 1;
			last_a = p->a;
			other_dv |= p->a.dv != info.dv;
		}
		iov[i] = p->iov;
		got += p->iov.iov_len;
		if (p->iov.iov_len < p->cend - p->coff) {
			np = i + 1;
			break;
		}
	}
answer:
	if (rc < 0) {
		reply_error(req, rc);
		rc = 0; /* answered */
		goto out;
	}
	/* Cached bytes with bytes of another version would be a torn read. */
	if (from_cache && other_dv) {
		rc = 1;
		goto out;
	}
	if (have_a)
		fs_note_attrs(fs, seq, &last_a, NULL);
	/* Cached bytes reach the kernel only while no break came since seq
	 * (server bytes are the server's answer, as in read_direct). */
	fresh = !from_cache || notify_reply_begin(fs->ntf, seq);
	if (!fresh) {
		notify_reply_end(fs->ntf);
		rc = 1;
		goto out;
	}
	if (np <= 1)
		fuse_reply_buf(req, np ? iov[0].iov_base : NULL, got);
	else
		fuse_reply_iov(req, iov, (int)np);
	if (from_cache)
		notify_reply_end(fs->ntf);
	/* Read without the server: relatime may still owe an atime. The
	 * kernel asks for it right after the read (it marks atime stale),
	 * so the table answers with our clock until the server's comes. */
	if (from_cache && !have_a && fs_atime_due(fs, ino, 0))
		fs_touch_cached_atime(fs, ino);
	/* The kernel has its answer; now keep what was fetched. */
	for (size_t i = 0; i < n; i++)
		if (ps[i].store_len)
			ccache_put(fs->cc, &ps[i].k, ps[i].store_p,
				   ps[i].store_len);
out:
	for (size_t i = 0; i < n; i++) {
		if (ps[i].state == PIECE_CLAIMED)
			fetch_done(fs, &ps[i].k);
		rpc_reply_free(&ps[i].rep);
		ccache_buf_free(&ps[i].cb);
	}
	if (ps != one) {
		free(ps);
		free(iov);
	}
	return rc;
}

/*
 * Whole versions. A file of up to PIN_CHUNKS chunks is read, for the
 * whole of one open, at one data version: its first READ fetches every
 * chunk at once (a READ each, sent together, so that they all run
 * between two of another client's closes: a write token's return runs
 * the requests parked behind it before its holder may take it again,
 * server/token.h) and keeps trying until all come back at the same
 * version; that version is the open's (its "pin"), and every READ of the
 * open is answered from the chunk cache at it, also after a break: a
 * reader that opened before another client's close reads the whole
 * content it opened, never part of the next (AFS reads the file it
 * fetched at open in the same way). Its pages stay in the kernel only
 * while that version is the current one. An open of a file this client
 * writes (itab_wopen), a larger file, or one whose chunks cannot all be
 * had at one version (PIN_TRIES) reads as before (read_cached), and so
 * does an open whose pinned chunks were evicted since.
 */
#define PIN_CHUNKS 8u
#define PIN_TRIES  8

struct fs_pin {
	struct fs_pin *next;
	uint64_t fh;
	struct cairn_fid fid;
	uint64_t dv, size;
	uint32_t wgen;                /* itab_info's, when pinned */
	int none;                     /* read as before */
};

static struct fs_pin **pin_slot(struct fs *fs, uint64_t fh)
{
	struct fs_pin **p = &fs->pins[fh % FS_PIN_BUCKETS];

	while (*p && (*p)->fh != fh)
		p = &(*p)->next;
	return p;
}

static void pin_set(struct fs *fs, const struct fs_pin *v)
{
	struct fs_pin *p = malloc(sizeof(*p));

	if (!p)
		return; /* the next READ tries again */
	*p = *v;
	pthread_mutex_lock(&fs->pin_lock);
	p->next = fs->pins[v->fh % FS_PIN_BUCKETS];
	fs->pins[v->fh % FS_PIN_BUCKETS] = p;
	pthread_mutex_unlock(&fs->pin_lock);
}

static void pin_drop(struct fs *fs, uint64_t fh)
{
	struct fs_pin **p, *x = NULL;

	pthread_mutex_lock(&fs->pin_lock);
	if (*(p = pin_slot(fs, fh))) {
		x = *p;
		*p = x->next;
	}
	pthread_mutex_unlock(&fs->pin_lock);
	free(x);
}

void fs_pins_free(struct fs *fs)
{
	for (size_t i = 0; i < FS_PIN_BUCKETS; i++)
		while (fs->pins[i]) {
			struct fs_pin *p = fs->pins[i];

			fs->pins[i] = p->next;
			free(p);
		}
}

struct pin_fetch {
	struct fs *fs;
	struct cairn_fid fid;
	uint32_t idx;
	struct rpc_reply rep;
	struct iovec iov;
	struct cairn_attr a;
	int rc;
	pthread_t th;
	int started;
};

static void *pin_fetch_one(void *arg)
{
	struct pin_fetch *x = arg;

	x->rc = read_rpc(NULL, x->fs, &x->fid, (uint64_t)x->idx * CCACHE_CHUNK,
			 CCACHE_CHUNK, &x->rep, &x->iov, &x->a);
	return NULL;
}

/* Is chunk i of (fid, dv) cached? (A damaged one is found when read:
 * that READ reads as before.) */
static int pin_has(struct fs *fs, const struct cairn_fid *fid, uint64_t dv,
		   uint32_t i)
{
	struct ccache_key k = { *fid, dv, i };

	return ccache_has(fs->cc, &k);
}

/*
 * Make every chunk of fid at one version cached, starting from *a (fresh
 * attributes): the missing ones are fetched together; when they come
 * back at another version (or at several), every chunk is fetched again,
 * together, until one round brings them all at one version. 0 and *a
 * that version; 1 when the versions kept moving (PIN_TRIES); or a
 * negative errno.
 */
static int pin_fetch(fuse_req_t req, struct fs *fs, const struct cairn_fid *fid,
		     struct cairn_attr *a)
{
	struct pin_fetch x[PIN_CHUNKS];
	uint64_t seq = notify_seq(fs->ntf);
	int rc = 1;

	for (int t = 0; t < PIN_TRIES && rc == 1; t++) {
		uint32_t n = (uint32_t)((a->size + CCACHE_CHUNK - 1) /
					CCACHE_CHUNK), m = 0;

		if (a->size > (uint64_t)PIN_CHUNKS * CCACHE_CHUNK)
			return 1;
		/* First the chunks missing at the version the rest is
		 * cached at; after a round that came back torn, all of them
		 * (only one round's answers are of one moment). */
		for (uint32_t i = 0; i < n; i++)
			if (t > 0 || !pin_has(fs, fid, a->dv, i))
				x[m++] = (struct pin_fetch){
					.fs = fs, .fid = *fid, .idx = i };
		if (m == 0)
			return 0;
		for (uint32_t i = 1; i < m; i++)
			if (pthread_create(&x[i].th, NULL, pin_fetch_one,
					   &x[i]) == 0)
				x[i].started = 1;
		x[0].rc = read_rpc(req, fs, fid,
				   (uint64_t)x[0].idx * CCACHE_CHUNK,
				   CCACHE_CHUNK, &x[0].rep, &x[0].iov,
				   &x[0].a);
		for (uint32_t i = 1; i < m; i++) {
			if (x[i].started)
				pthread_join(x[i].th, NULL);
			else
				pin_fetch_one(&x[i]);
		}
		rc = 0;
		for (uint32_t i = 0; i < m && !rc; i++)
			rc = x[i].rc;
		for (uint32_t i = 0; i < m; i++)
			ccache_count_fetch(fs->cc, x[i].iov.iov_len);
		if (rc == 0) {
			const struct cairn_attr *hi = &x[0].a;
			int same = 1;

			for (uint32_t i = 1; i < m; i++) {
				same &= x[i].a.dv == x[0].a.dv;
				if (x[i].a.dv > hi->dv)
					hi = &x[i].a;
			}
			/* Keep the chunks of the newest version among them,
			 * each whole (or cut by that version's end). */
			for (uint32_t i = 0; i < m; i++) {
				uint64_t base = (uint64_t)x[i].idx * CCACHE_CHUNK;
				uint64_t want = hi->size > base ? hi->size - base
								: 0;
				struct ccache_key k = { *fid, hi->dv, x[i].idx };

				if (want > CCACHE_CHUNK)
					want = CCACHE_CHUNK;
				if (x[i].a.dv != hi->dv || want == 0 ||
				    x[i].iov.iov_len != want) {
					same = 0;
					continue;
				}
				ccache_put(fs->cc, &k, x[i].iov.iov_base,
					   (uint32_t)want);
			}
			fs_note_attrs(fs, seq, hi, NULL);
			/* Another version than the one the rest is cached
			 * at (only the first round fetched some): again. */
			if (!same || (hi->dv != a->dv && m < n))
				rc = 1;
			*a = *hi;
		}
		for (uint32_t i = 0; i < m; i++)
			rpc_reply_free(&x[i].rep);
	}
	return rc;
}

/*
 * An open that keeps the kernel's pages (the promise stands, the pages
 * are of the current version): that version is the open's. Whether the
 * chunk cache holds all of it is seen at the READs that reach us (most
 * never do); one it no longer holds reads as before.
 */
static void pin_open(struct fs *fs, fuse_ino_t ino,
		     const struct fuse_file_info *fi)
{
	struct fs_pin v = { .fh = fi->fh };
	struct itab_info info;
	struct cairn_attr a;
	int current = 0;

	/* Changes of ours still in the journal: the version the table
	 * holds is not what the kernel's pages hold. */
	if (!fs->cc || !fi->fh || (fi->flags & O_ACCMODE) != O_RDONLY ||
	    wb_busy(fs->wbk) ||
	    itab_attr_last(fs->itab, ino, &a, &current) || !current ||
	    !S_ISREG(a.mode) || a.size == 0 ||
	    a.size > (uint64_t)PIN_CHUNKS * CCACHE_CHUNK ||
	    itab_info(fs->itab, ino, &info) || info.dv != a.dv)
		return; /* not pinned: the first READ decides */
	v.wgen = info.wgen;
	v.fid = a.fid;
	v.dv = a.dv;
	v.size = a.size;
	pin_set(fs, &v);
}

/* The first READ of open fh: choose its version (see above). */
static void pin_take(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		     uint64_t fh, struct fs_pin *v)
{
	uint64_t seq = notify_seq(fs->ntf);
	struct itab_info info;
	struct cairn_attr a;
	int current = 0, rc;

	*v = (struct fs_pin){ .fh = fh, .none = 1 };
	if (itab_wopen(fs->itab, ino, 0) > 0 ||
	    itab_attr_last(fs->itab, ino, &a, &current) || !S_ISREG(a.mode))
		goto out;
	v->fid = a.fid;
	/* Fresh attributes: the version the server has now (and the
	 * promise back). */
	if (!current) {
		if (fs_getattr(req, fs, &v->fid, &a))
			goto out;
		fs_note_attrs(fs, seq, &a, NULL);
	}
	if (a.size == 0 || a.size > (uint64_t)PIN_CHUNKS * CCACHE_CHUNK)
		goto out;
	if ((rc = pin_fetch(req, fs, &v->fid, &a)))
		goto out;
	if (itab_info(fs->itab, ino, &info))
		goto out;
	v->wgen = info.wgen;
	v->dv = a.dv;
	v->size = a.size;
	v->none = 0;
out:
	pin_set(fs, v);
}

/*
 * Answer a READ of open fh from its version: 0 when answered, 1 when the
 * caller reads as before.
 */
static int pin_read(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		    uint64_t fh, size_t size, off_t off)
{
	struct ccache_buf b[2] = { { 0 } };
	struct iovec iov[2];
	struct itab_info info;
	struct fs_pin v, *p;
	uint64_t end, first;
	int n = 0, rc = 1, old, have;

	pthread_mutex_lock(&fs->pin_lock);
	if ((p = *pin_slot(fs, fh)))
		v = *p;
	pthread_mutex_unlock(&fs->pin_lock);
	if (!p)
		pin_take(req, fs, ino, fh, &v);
	/* A writer here: its writes are this client's to see at once. */
	if (v.none || size > CCACHE_CHUNK || itab_wopen(fs->itab, ino, 0) > 0)
		return 1;
	/* Written here since the pin (opened for writing, truncated): our
	 * own changes are this client's to see, as before. */
	have = itab_info(fs->itab, ino, &info) == 0;
	if (have && info.wgen != v.wgen) {
		pin_drop(fs, fh);
		return 1;
	}
	end = (uint64_t)off + size < v.size ? (uint64_t)off + size : v.size;
	first = (uint64_t)off / CCACHE_CHUNK;
	for (uint64_t o = (uint64_t)off; o < end; n++) {
		uint64_t idx = o / CCACHE_CHUNK;
		uint32_t coff = (uint32_t)(o % CCACHE_CHUNK);
		uint64_t cend = (idx + 1) * CCACHE_CHUNK < end
					? (idx + 1) * CCACHE_CHUNK : end;
		struct ccache_key k = { v.fid, v.dv, (uint32_t)idx };

		if (n == 2 || idx - first > 1 ||
		    ccache_get(fs->cc, &k, coff, (uint32_t)(cend - o), &b[n]) ||
		    b[n].len != cend - o)
			goto out; /* evicted since: read as before */
		iov[n].iov_base = (void *)b[n].p;
		iov[n].iov_len = b[n].len;
		o = cend;
	}
	/* An old version's pages must not outlive this read in the kernel:
	 * the next open drops them (marked before they land), and they go
	 * after the reply for the opens there are. */
	old = !have || !info.promise || info.dv != v.dv;
	if (old)
		itab_cache_stale(fs->itab, ino);
	fuse_reply_iov(req, iov, n);
	rc = 0;
	if (fs_atime_due(fs, ino, 0))
		fs_touch_cached_atime(fs, ino);
	if (old)
		notify_inval_inode(fs->ntf, ino);
out:
	for (int i = 0; i < 2; i++)
		ccache_buf_free(&b[i]);
	return rc;
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct cairn_fid fid;
	int rc;

	/* What the journal holds of the file reaches the server first: the
	 * kernel asks for pages it does not have, which may be ours. */
	if (wb_busy(fs->wbk) && itab_fid(fs->itab, ino, &fid) == 0 &&
	    (rc = fs_wb_settle(fs, &fid))) {
		reply_error(req, rc);
		return;
	}
	if (fs->cc && fi && fi->fh && size > 0 && off >= 0 &&
	    pin_read(req, fs, ino, fi->fh, size, off) == 0)
		return;
	seq = notify_seq(fs->ntf);
	if (!fs->cc || size == 0 || off < 0 ||
	    read_cached(req, fs, ino, size, off) != 0)
		read_direct(req, fs, ino, size, off);
	/* Server data reaches the kernel outside a reply section (cached
	 * data only inside a fresh one): when a break came meanwhile, its
	 * invalidation may have run before our pages landed. Without OPEN
	 * nothing else would drop them, so drop them again. */
	if (notify_seq(fs->ntf) != seq)
		notify_inval_inode(fs->ntf, ino);
}

void fs_set_writeback(struct fs *fs, int on)
{
	fs->want_wb = on;
}

void fs_set_global_locks(struct fs *fs, int on)
{
	fs->global_locks = on;
}

void fs_set_ccache(struct fs *fs, struct ccache *c)
{
	fs->cc = c;
}

/*
 * What one WRITE did, for the chunk cache: the file went from (dv, size)
 * before to after, with n bytes at off. Kept only when before is known to
 * be the version the WRITE applied to.
 */
struct wstep {
	uint64_t old_dv, old_size, new_dv, new_size, off;
	const char *data;
	uint32_t n;
};

/*
 * The chunk cache keeps what we write (ccache_write), so that reading it
 * back after drop_caches or a remount fetches nothing. A step qualifies
 * when the version before it is known (the attributes the inode table
 * holds while the promise stands, or the previous WRITE's reply) and the
 * reply's version is exactly one above: nothing else changed the file
 * between. The steps are recorded before the kernel has its answer, so
 * that the file's next change finds them (ccache_write only extends a
 * file's cached versions in order).
 */
#define WRITE_STEPS_MAX 4

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	/* With the writeback cache the kernel keeps mtime and ctime and
	 * sends them (SETATTR) when it writes the inode back. */
	uint32_t flags = ((fi->flags & (O_SYNC | O_DSYNC)) ? WR_SYNC : 0) |
			 (fs->wb ? WR_KEEPTIME : 0);
	struct wstep steps[WRITE_STEPS_MAX];
	struct cairn_fid fid;
	struct cairn_attr a, before;
	size_t done = 0, nsteps = 0;
	pthread_mutex_t *wl;
	int rc, known, kill;

	if ((rc = itab_fid(fs->itab, ino, &fid)))
		goto out;
	/* Another incarnation of the file (client/inode.h) would not see
	 * this write's size, nor drop its pages. */
	notify_stale_others(fs->ntf, ino);
	/* The kernel's writeback sends a file's WRITEs in parallel: one at a
	 * time per file, so that each learns the version it started from. */
	/* Write-back: into the journal, answered at once (wback.h); the
	 * kernel's WRITEs of one file go in parallel (different pages).
	 * O_SYNC writes, and files whose token cannot be had, go through,
	 * after what the journal holds of the file. */
	/* A write the kernel wants set-user-ID cleared for goes through
	 * with the writer's credentials: the server clears it. */
	kill = fuseio_req_kill();
	if (fs_wb_on(fs) && !(flags & WR_SYNC) && !kill) {
		rc = wb_write(fs->wbk, &fid, buf, size, (uint64_t)off);
		if (rc == 0) {
			fuse_reply_write(req, size);
			return;
		}
		if (wb_gave_up(rc))
			goto failed;
	}
	wl = &fs->wlock[fid.vnode % FS_WLOCKS];
	pthread_mutex_lock(wl);
	if ((rc = fs_wb_settle(fs, &fid))) {
		pthread_mutex_unlock(wl);
		goto failed;
	}
	seq = notify_seq(fs->ntf);
	known = fs->cc && itab_getattr(fs->itab, ino, &before) == 0 &&
		before.fid.uniq == fid.uniq;
	while (done < size) {
		size_t n = size - done > CAIRN_MAX_IO ? CAIRN_MAX_IO
						       : size - done;
		struct msg_write_req q = {
			.fid = fid,
			.off = (uint64_t)off + done,
			.flags = flags,
			.data = { buf + done, n },
		};
		struct msg_attr p;

		if ((rc = fs_rpc(req, fs, OP_WRITE, &q, &p, NULL)))
			break;
		a = p.attr;
		if (known && a.dv == before.dv + 1 && nsteps < WRITE_STEPS_MAX)
			steps[nsteps++] = (struct wstep){
				before.dv, before.size, a.dv, a.size,
				(uint64_t)off + done, buf + done, (uint32_t)n };
		else
			known = 0;
		before = a;
		done += n;
	}
	/* A failed WRITE (interrupted, connection lost) may still have
	 * changed the file without us learning its new data version, and
	 * our own change breaks no promise of ours: cached chunks of the
	 * file can no longer be trusted. */
	if (rc) {
		ccache_forget_fid(fs->cc, &fid);
		nsteps = 0;
	}
	if (done) {
		fs_note_attrs(fs, seq, &a, NULL);
		/* Before the reply: the file's next change (a write, cp -p's
		 * utimens) must find this version in the cache, or it would
		 * start the file's cached versions over. */
		for (size_t i = 0; i < nsteps; i++)
			ccache_write(fs->cc, &fid, steps[i].old_dv,
				     steps[i].new_dv, steps[i].old_size,
				     steps[i].new_size, steps[i].off,
				     steps[i].data, steps[i].n);
		pthread_mutex_unlock(wl);
		fuse_reply_write(req, done);
		/* The kernel still has the mode with set-user-ID. */
		if (kill)
			notify_inval_inode(fs->ntf, ino);
		return;
	}
	pthread_mutex_unlock(wl);
failed:
	/* Writeback cache: the kernel keeps the pages whose WRITE failed,
	 * clean now, with data the server never got (also when the journal
	 * could not get the file's token, wb_gave_up, or what it held of
	 * the file could not be sent first, fs_wb_settle). Drop them, so
	 * that what this client reads next is what the server has. The
	 * notifier may be busy with others a while: meanwhile the next open
	 * drops them (marked before the reply, as a read of an old version
	 * does). */
	if (fs->wb) {
		itab_cache_stale(fs->itab, ino);
		notify_inval_inode(fs->ntf, ino);
	}
out:
	reply_error(req, rc);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* Only for files opened by CREATE, or without no_open (global
	 * locks, or a kernel without it): the server keeps no open state,
	 * but the open file's flock and OFD locks go with it. The kernel
	 * does not wait for this reply. */
	struct fs *fs = req_fs(req);

	fuse_reply_err(req, 0);
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		itab_wopen(fs->itab, ino, -1);
	if (fi->fh)
		pin_drop(fs, fi->fh);
	fs_lock_release(NULL, fs, ino, fi);
}

int fs_reply_open(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		  const struct fuse_entry_param *e, struct fuse_file_info *fi)
{
	int w = (fi->flags & O_ACCMODE) != O_RDONLY, rc;

	if (w)
		itab_wopen(fs->itab, ino, 1);
	rc = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
	/* Interrupted: no RELEASE will come. */
	if (rc < 0 && w)
		itab_wopen(fs->itab, ino, -1);
	return rc;
}

void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct msg_fsync_req q = { .flags = datasync ? FS_DATASYNC : 0 };
	int rc;

	/* The journal's changes of the file first: fsync returns once the
	 * server has them on disk, which the last of them may have made so
	 * (wb_sync: then no FSYNC). */
	if (!(rc = itab_fid(fs->itab, ino, &q.fid)) &&
	    !(rc = wb_sync(fs->wbk, &q.fid)))
		rc = fs_rpc(req, fs, OP_FSYNC, &q, NULL, NULL);
	reply_error(req, rc < 0 ? rc : 0);
}

void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		     off_t length, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t seq = notify_seq(fs->ntf);
	struct msg_fallocate_req q = {
		.mode = (uint32_t)mode,
		.off = (uint64_t)offset,
		.len = (uint64_t)length,
	};
	struct msg_attr p;
	int rc;

	if (offset < 0 || length <= 0) {
		rc = -EINVAL;
		goto out;
	}
	notify_stale_others(fs->ntf, ino);
	if ((rc = itab_fid(fs->itab, ino, &q.fid)) ||
	    (rc = fs_wb_settle(fs, &q.fid)))
		goto out;
	if ((rc = fs_rpc(req, fs, OP_FALLOCATE, &q, &p, NULL))) {
		ccache_forget_fid(fs->cc, &q.fid); /* as in fs_op_write */
		goto out;
	}
	fs_note_attrs(fs, seq, &p.attr, NULL);
out:
	reply_error(req, rc);
}

/*
 * wback.c - write-back journal and shippers. See wback.h.
 *
 * Journal: CACHE/journal/<16 hex digits>, segments appended in order. A
 * record is a 112-byte header (struct jrec, host byte order: the journal
 * never leaves this machine) and, for a write, its data, padded to 8
 * bytes. The header carries a CRC of itself and one of the data, and its
 * own segment and offset (so a journal's bytes found inside file data, a
 * copy of a cache directory written to Cairn, never pass for records).
 * Kinds:
 *   JR_WRITE  len bytes at off
 *   JR_ATTR   SETATTR of valid (SA_SIZE, SA_MTIME, SA_CTIME) with size
 *             off and the times
 *   JR_ATTRX  a JR_ATTR that also sets the atime, permission bits or
 *             owner (struct attrx). With JR_VALID_DIR in valid, a
 *             directory's (wb_dir_setattr): sent without its token, after
 *             the creates and removes in it journaled before it, and
 *             before those journaled after it (ns_waits).
 *   JR_DONE   a change that reached the server (its header rewritten)
 *   JR_CREATE the file's creation, answered here (wb_create): mode in
 *             valid, time in msec/mnsec, data the parent's FID, owner,
 *             name and the creator's credentials (struct crec); tbase
 *             the file's first data version and tidx -1, so the changes
 *             after it count from 0. Always the file's first change.
 *   JR_REMOVE the removal of one of the file's names, answered here
 *             (wb_remove): REMOVE flags in valid, its time in msec/mnsec
 *             (0: none, from before), data as JR_CREATE's
 *             (owner unused); tbase and tidx as the change before it
 *             would continue, so it takes no version step of the file.
 *             Always the file's last change.
 * Each change also carries the data version the file had when its token
 * was granted (tbase) and its place among the changes made under that
 * token (tidx): the server applies each change as one version step, so
 * the first change still to send expects the file at tbase + tidx. That is
 * the version a token lost with changes left is taken again at (WT_DV),
 * also by the next mount after a crash.
 * Space is reserved under the lock and written outside it; a file's
 * records go in the order of its changes because the caller holds the
 * file's fs.wlock stripe. A reserved record that was never written (the
 * daemon died in between) reads as zeros or garbage: loading skips it by
 * looking for the next valid header, 8 bytes at a time. A segment none
 * of whose changes is still pending is deleted.
 *
 * Memory: a wfile per file with changes or a token, in a hash by vnode,
 * with its changes (wop) in order. Ready files wait in a FIFO for a
 * shipper; a shipper owns a file (busy) while it sends for it, so a
 * file's changes go one at a time and in order, and each reply tells the
 * data version the next starts from (for the chunk cache and WT_DV).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <isa-l/crc.h>

#include "ccache.h"
#include "dircache.h"
#include "fs_int.h"
#include "notify.h"
#include "wback.h"
#include "../lib/clock.h"
#include "../lib/flock.h"
#include "../lib/debug.h"
#include "../lib/log.h"

#define JR_MAGIC 0x4a425743u /* "CWBJ" read little-endian */
enum { JR_WRITE = 1, JR_ATTR = 2, JR_DONE = 3, JR_CREATE = 4,
       JR_REMOVE = 5, JR_ATTRX = 6 };

/* The data of a JR_ATTRX record: a JR_ATTR (in memory it is one) that
 * also sets the atime or the permission bits. A type of its own, so
 * that a daemon from before skips it as unreadable rather than applying
 * zeros. */
struct attrx {
	int64_t asec;
	uint32_t ansec;
	uint32_t mode;    /* permission bits (07777), with SA_MODE */
	/* Only with SA_UID or SA_GID: the record is then this long, else
	 * it ends before them (ATTRX_SHORT, as daemons from before wrote
	 * and read it). */
	uint32_t uid, gid;
};
#define ATTRX_SHORT offsetof(struct attrx, uid)
#define ATTRX_OWNER (SA_UID | SA_GID)
/* What wb_patch lays over the server's attributes, besides the size. */
#define PATCHED (SA_MTIME | SA_CTIME | SA_ATIME | SA_MODE | ATTRX_OWNER)

/* In a JR_ATTRX record's valid: a directory's attribute change. */
#define JR_VALID_DIR (1u << 31)

/* A namespace change answered here (sent in its directory's name). */
#define JR_NS(t) ((t) == JR_CREATE || (t) == JR_REMOVE)

/* A name whose removal a directory's journal holds: a creation of that
 * name journaled after it is not sent before it (ns_waits). */
struct rmname {
	struct rmname *next;
	uint64_t seq;             /* the removal's */
	uint32_t hash;            /* name_hash */
	uint16_t len;
	uint8_t blocks;           /* a creation waited for it (ns_waits) */
	char name[];
};

/* The data of a JR_CREATE record: this, the name, the credential block. */
struct crec {
	uint32_t pvol, puniq;
	uint64_t pvnode;
	uint32_t uid, gid;
	uint16_t namelen;
	uint16_t pad[3];
};
_Static_assert(sizeof(struct crec) == 32, "create record is 32 bytes");

struct jrec {
	uint32_t magic;
	uint32_t hcrc;    /* of bytes 8..112 */
	uint8_t type;
	uint8_t pad1;
	uint16_t pad2;
	uint32_t len;     /* data bytes (JR_WRITE) */
	uint64_t seq;
	uint64_t segid;   /* where the record was written */
	uint64_t at;
	uint32_t vol;
	uint32_t uniq;
	uint64_t vnode;
	uint64_t off;     /* write offset; JR_ATTR: the size */
	uint64_t tbase;
	uint64_t tidx;
	uint32_t valid;   /* JR_ATTR: SA_* */
	uint32_t dcrc;    /* of the data */
	int64_t msec;
	int64_t csec;
	uint32_t mnsec;
	uint32_t cnsec;
};
_Static_assert(sizeof(struct jrec) == 112, "journal header is 112 bytes");

#define PAD8(n) (((n) + 7) & ~(uint64_t)7)

struct jseg {
	struct jseg *next;
	uint64_t id;
	int fd;
	uint64_t size;            /* bytes reserved */
	uint64_t live;            /* changes in it not yet sent */
	int full;                 /* a write to it failed (a full disk):
				   * once nothing in it is live, the next
				   * change starts a new segment, so this
				   * one goes and its space with it */
};

struct wop {
	struct wop *next;
	uint8_t type;             /* JR_WRITE, JR_ATTR, JR_CREATE, JR_REMOVE */
	struct cairn_fid parent;  /* JR_NS: the directory */
	struct rmname *rm;        /* JR_REMOVE: its entry in the
				   * directory's rmnames, or NULL */
	uint32_t nhash;           /* JR_NS: name_hash of the name */
	uint32_t len;
	uint64_t tbase, tidx;
	uint64_t off;             /* write offset, or new size */
	uint32_t valid;
	struct cairn_time mtime, ctime;
	struct cairn_time atime;  /* JR_ATTR with SA_ATIME */
	uint32_t mode;            /* JR_ATTR with SA_MODE */
	uint32_t uid, gid;        /* JR_ATTR with SA_UID, SA_GID */
	struct jseg *seg;
	uint64_t at;              /* the record's offset in seg */
	uint64_t seq;
	int ready;                /* written to the journal */
	unsigned dirattr : 1;     /* a directory's attribute change
				   * (JR_VALID_DIR) */
	uint32_t nbefore;         /* dirattr: creates and removes in the
				   * directory journaled before it and not
				   * sent yet; it goes at 0 */
};

enum wtok {
	TK_NONE,                  /* not held */
	TK_HELD,
	TK_RECALLED,              /* held; send what is left, then return */
	TK_LOST,                  /* was held with changes left: take it
				   * again at known_dv (WT_DV) */
};

struct wfile {
	struct wfile *hnext;
	struct wfile *qnext;      /* ready queue */
	struct cairn_fid fid;
	enum wtok tok;
	unsigned queued : 1, busy : 1, must_return : 1;
	unsigned returning : 1;   /* in a WRETURN on its way */
	unsigned granting : 1;    /* in a WTOKEN on its way (hold) */
	unsigned recall_early : 1; /* recalled while granting */
	unsigned open_dirty : 1;  /* truncated since its last close (FLUSH) */
	int64_t recalled_ms;      /* when the recall came */
	unsigned known : 1;       /* known_dv/size hold */
	uint64_t known_dv, known_size;
	uint64_t tbase, tidx;     /* for the next change journaled */
	/* What the file looks like with its changes applied (wb_patch). */
	unsigned psz : 1;
	uint32_t pvalid;          /* which of the following (PATCHED) */
	uint64_t psize;
	struct cairn_time pmtime, pctime, patime;
	uint32_t pmode, puid, pgid;
	/* The server's attributes after the last change of ours it applied:
	 * an older copy (taken from the tables before that reply came, and
	 * patched after the change left the journal) is not handed on
	 * (patch). */
	unsigned sent_ok : 1;
	struct cairn_attr sent;
	struct wop *head, *tail;
	size_t nops;
	uint64_t bytes;
	int err;                  /* why the last send failed; 0 after one
				   * succeeded */
	unsigned fails;           /* sends failed so far (err set) */
	unsigned refusals;        /* refused_error()s in a row */
	uint64_t recalls;         /* CB_RECALLs seen */
	int64_t last_ms;          /* last change journaled or sent */
	int64_t retry_ms;         /* not before this, after an error */
	int64_t hold_end;         /* created here: when its first hold
				   * (WB_CREATE_HOLD_MS) ends */
	unsigned closed_hold : 1; /* created here and closed: held at most
				   * WB_CLOSED_HOLD_MS past its last change */
	int waiters;              /* wb_drain calls waiting */
	int sync_waiters;         /* of which wb_sync: the last change goes
				   * durable (WR_SYNC, SA_SYNC) */
	unsigned synced : 1;      /* the last change sent went so, and
				   * nothing was journaled after it */
	unsigned children;        /* a directory: creates and removes in it
				   * not sent */
	struct rmname *rmnames;   /* a directory: the names of those removes */
	uint64_t ldv;             /* a directory: its data version with
				   * the creates not sent (wb_create) */
	int64_t denied_ms;        /* a directory: its token refused then */
	unsigned ns_sending : 1;  /* a directory: a removal or creation in it
				   * is on its way (ship_batch); the next
				   * ones wait and go together */
	unsigned nb_solo : 1;     /* its next change goes on its own: a
				   * batch did not do it (ship_batch) */
	unsigned moving;          /* changes of ours outside the journal on
				   * their way (wb_move_begin) */
	uint64_t moved;           /* and those that took effect: each moved
				   * the numbering of the changes kept */
};

struct wb_stats {
	uint64_t journaled, journaled_bytes, sent, sent_bytes, grants,
		 returns, recalls, conflicts, dropped, errors, replayed,
		 creates, dir_grants, removes, remove_batches, batched,
		 create_batches, creates_batched, merged, renamed,
		 noop_modes;
};

struct wb {
	struct fs *fs;
	char dir[PATH_MAX];
	char conflicts[PATH_MAX];
	int lockfd;
	pthread_mutex_t lock;
	pthread_cond_t work;      /* shippers: something to do */
	pthread_cond_t done;      /* drain waiters, writers over the limit */
	int no_writeattr;         /* the server answered WRITEATTR -ENOSYS
				   * (__atomic) */
	int no_createattr;        /* likewise CREATEATTR (__atomic) */
	int64_t wake_ms;          /* the earliest a queued file held back
				   * may be sent (0: none); shippers wait
				   * no longer than that */
	struct wfile **buckets;   /* guarded by lock */
	size_t nbuckets, nfiles;
	struct wfile *qhead, *qtail;
	struct jseg *segs;        /* oldest first; the last one appends */
	uint64_t next_seg, seq;
	uint64_t pending_bytes;
	size_t pending_ops;
	size_t held;              /* tokens held (HELD or RECALLED) */
	size_t ncreates;          /* creates, removes and directory
				   * attribute changes not sent (what
				   * wb_barrier waits for) */
	/* FIDs handed out ahead (FIDS): pool.vnode .. + npool - 1. */
	struct cairn_fid pool;
	uint32_t npool;
	unsigned pool_want : 1, pool_busy : 1;
	int64_t pool_failed_ms;   /* FIDS failed then: not again for 1 s */
	int closes_seen;          /* FLUSH reaches us (wb_closed) */
	int no_removes;           /* the server has no REMOVES: one by one */
	int no_removesat;         /* nor REMOVESAT (atomic): removals go
				   * without their times */
	int no_creates;           /* nor CREATES */
	int stopping;
	unsigned started;
	int64_t recall_ms;        /* the last CB_RECALL came then (0: none) */
	uint64_t through;         /* changes written through since a journal
				   * write last failed (0: it works) */
	/* FIDs recalled while we did not hold their token (a grant still on
	 * its way to us: a CREATE's), newest last: wb_created must not take
	 * a token that went back already. */
	struct cairn_fid unheld[64];
	unsigned nunheld;
	struct rpc_intr intr[WB_THREADS];
	pthread_t th[WB_THREADS];
	unsigned nthreads;
	struct wb_stats st;
};

static uint32_t hdr_crc(const struct jrec *h)
{
	return crc32_gzip_refl(0, (const uint8_t *)h + 8, sizeof(*h) - 8);
}

/* --- files ------------------------------------------------------------ */

static struct wfile **fslot(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile **p = &w->buckets[(fid->vnode * 0x9e3779b97f4a7c15ull >>
					17) & (w->nbuckets - 1)];

	while (*p && ((*p)->fid.vnode != fid->vnode ||
		      (*p)->fid.uniq != fid->uniq || (*p)->fid.vol != fid->vol))
		p = &(*p)->hnext;
	return p;
}

static void grow(struct wb *w)
{
	size_t nb = w->nbuckets * 2;
	struct wfile **b = calloc(nb, sizeof(*b)), *f, *next;

	if (!b)
		return;
	for (size_t i = 0; i < w->nbuckets; i++)
		for (f = w->buckets[i]; f; f = next) {
			struct wfile **d = &b[(f->fid.vnode *
					       0x9e3779b97f4a7c15ull >> 17) &
					      (nb - 1)];

			next = f->hnext;
			f->hnext = *d;
			*d = f;
		}
	free(w->buckets);
	w->buckets = b;
	w->nbuckets = nb;
}

/* fid's wfile, created if need be (NULL: out of memory). Under lock. */
static struct wfile *file_get(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile **p = fslot(w, fid), *f = *p;

	if (f)
		return f;
	if (!(f = calloc(1, sizeof(*f))))
		return NULL;
	f->fid = *fid;
	*p = f;
	if (++w->nfiles > w->nbuckets * 2)
		grow(w);
	return f;
}

/* Free f if nothing refers to it any more. Under lock. */
static void file_maybe_free(struct wb *w, struct wfile *f)
{
	struct wfile **p;

	if (f->nops || f->busy || f->queued || f->waiters || f->must_return ||
	    f->returning || f->tok == TK_HELD || f->tok == TK_RECALLED ||
	    f->err || f->children || f->rmnames || f->moving)
		return;
	p = fslot(w, &f->fid);
	CAIRN_ASSERT(*p == f);
	*p = f->hnext;
	w->nfiles--;
	free(f);
}

static int64_t wake_at(const struct wb *w, const struct wfile *f);

/* Is f held back now (WB_CREATE_HOLD_MS, WB_WRITE_HOLD_MS, a retry
 * after an error)? Under lock. */
static int held_back(const struct wb *w, const struct wfile *f, int64_t now)
{
	return f->retry_ms > now && !f->must_return && !w->stopping;
}

/* A queued file held back may go at t: shippers wait no longer (wake_ms).
 * 1 when that is sooner than they knew. Under lock. */
static int note_wake(struct wb *w, int64_t t)
{
	if (w->wake_ms && w->wake_ms <= t)
		return 0;
	w->wake_ms = t;
	return 1;
}

static void enqueue(struct wb *w, struct wfile *f, int front)
{
	if (f->queued || f->busy)
		return;
	f->queued = 1;
	if (front) {
		f->qnext = w->qhead;
		w->qhead = f;
		if (!w->qtail)
			w->qtail = f;
	} else {
		f->qnext = NULL;
		if (w->qtail)
			w->qtail->qnext = f;
		else
			w->qhead = f;
		w->qtail = f;
	}
	/* Held back: no shipper could take it now; one wakes for it when
	 * its time comes (woken here only to wait less long), or when
	 * something hurries it. */
	if (f->retry_ms && held_back(w, f, clock_mono_ms()) &&
	    !note_wake(w, wake_at(w, f)))
		return;
	pthread_cond_signal(&w->work);
}

static void set_tok(struct wb *w, struct wfile *f, enum wtok t)
{
	int was = f->tok == TK_HELD || f->tok == TK_RECALLED;
	int is = t == TK_HELD || t == TK_RECALLED;

	f->tok = t;
	if (was && !is)
		w->held--;
	else if (is && !was)
		w->held++;
}

/* --- journal ------------------------------------------------------------- */

static int seg_open(struct wb *w, uint64_t id, int create, struct jseg **out)
{
	char path[PATH_MAX + 32];
	struct jseg *s = calloc(1, sizeof(*s));
	struct stat st;

	if (!s)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%016" PRIx64, w->dir, id);
	s->fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0),
		     0600);
	if (s->fd < 0 || fstat(s->fd, &st) < 0) {
		int rc = -errno;

		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return rc;
	}
	s->id = id;
	s->size = (uint64_t)st.st_size;
	*out = s;
	return 0;
}

static void seg_unlink(struct wb *w, struct jseg *s)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%016" PRIx64, w->dir, s->id);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("cannot remove journal segment %s: %s", path,
			 strerror(errno));
}

/* Delete s if nothing in it is pending and it is not the one appended
 * to. Under lock (unlink and close are quick local calls). */
static void seg_maybe_drop(struct wb *w, struct jseg *s)
{
	struct jseg **p;

	if (s->live || !s->next)
		return;
	for (p = &w->segs; *p != s; p = &(*p)->next)
		;
	*p = s->next;
	seg_unlink(w, s);
	close(s->fd);
	free(s);
}

/* Reserve room for a record of len data bytes: its segment and offset.
 * Under lock. */
static int reserve(struct wb *w, uint32_t len, struct jseg **seg,
		   uint64_t *at)
{
	struct jseg *s = w->segs, *n;
	uint64_t need = sizeof(struct jrec) + PAD8(len);
	int rc;

	while (s && s->next)
		s = s->next;
	if (!s || (s->full && !s->live) ||
	    (s->size && s->size + need > WB_SEGMENT_MAX)) {
		if ((rc = seg_open(w, w->next_seg, 1, &n)) < 0)
			return rc;
		w->next_seg++;
		if (s)
			s->next = n;
		else
			w->segs = n;
		/* The one appended to before may be all sent already. */
		if (s)
			seg_maybe_drop(w, s);
		s = n;
	}
	*seg = s;
	*at = s->size;
	s->size += need;
	return 0;
}

/* Write record h (and data) at at in seg. No lock held. */
static int rec_write(struct jseg *s, uint64_t at, struct jrec *h,
		     const void *data)
{
	static const uint8_t zeros[8];
	struct iovec iov[3] = {
		{ h, sizeof(*h) },
		{ (void *)data, h->len },
		{ (void *)zeros, PAD8(h->len) - h->len },
	};
	size_t want = sizeof(*h) + PAD8(h->len);
	ssize_t n;

	h->magic = JR_MAGIC;
	h->segid = s->id;
	h->at = at;
	h->dcrc = h->len ? crc32_gzip_refl(0, data, h->len) : 0;
	h->hcrc = hdr_crc(h);
	n = pwritev(s->fd, iov, 3, (off_t)at);
	if (n < 0)
		return -errno;
	return (size_t)n == want ? 0 : -EIO;
}

static void rec_fill(struct jrec *h, uint8_t type, uint64_t seq,
		     const struct cairn_fid *fid)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->seq = seq;
	h->vol = fid->vol;
	h->uniq = fid->uniq;
	h->vnode = fid->vnode;
}

/* Mark change o done: it reached the server (its header rewritten as
 * JR_DONE). A failure costs only a needless conflict after a crash. */
static void mark_done(struct wb *w, const struct wop *o)
{
	struct jrec h;

	if (pread(o->seg->fd, &h, sizeof(h), (off_t)o->at) == sizeof(h) &&
	    h.magic == JR_MAGIC && h.seq == o->seq) {
		h.type = JR_DONE;
		h.hcrc = hdr_crc(&h);
		if (pwrite(o->seg->fd, &h, sizeof(h), (off_t)o->at) ==
		    sizeof(h))
			return;
	}
	log_warn("write-back journal %s: cannot mark a change sent", w->dir);
}

/* A change recorded by header h at `at` in s, appended to f's list (not
 * yet ready), or NULL: out of memory. Under lock (or while loading). */
static struct wop *op_new(struct wfile *f, const struct jrec *h,
			  struct jseg *s, uint64_t at, const void *data)
{
	struct wop *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->type = h->type == JR_ATTRX ? JR_ATTR : h->type;
	if (h->type == JR_ATTRX) {
		struct attrx x = { 0 };

		memcpy(&x, data, h->len);
		o->atime = (struct cairn_time){ x.asec, x.ansec };
		o->mode = x.mode & 07777;
		o->uid = x.uid;
		o->gid = x.gid;
		/* The directory's creates and removes before it are the
		 * ones pending now (journal order, also when loading). */
		if (h->valid & JR_VALID_DIR) {
			o->dirattr = 1;
			o->nbefore = f->children;
		}
	}
	o->len = h->type == JR_WRITE || JR_NS(h->type) ? h->len : 0;
	o->off = h->off;
	o->valid = h->valid & ~JR_VALID_DIR;
	o->tbase = h->tbase;
	o->tidx = h->tidx;
	o->mtime = (struct cairn_time){ h->msec, h->mnsec };
	o->ctime = (struct cairn_time){ h->csec, h->cnsec };
	o->seg = s;
	o->at = at;
	o->seq = h->seq;
	s->live++;
	if (f->tail)
		f->tail->next = o;
	else
		f->head = o;
	f->tail = o;
	f->nops++;
	f->bytes += o->len;
	return o;
}

/*
 * A new change h of f, h->len bytes of journal room reserved and put at
 * the end of f's list (not ready: the caller writes it), numbered in
 * journal order and counted as pending. 0 and *out, or an error. Under
 * lock.
 */
static int op_append(struct wb *w, struct wfile *f, struct jrec *h,
		     const void *data, struct wop **out)
{
	struct jseg *s;
	uint64_t at;
	int rc;

	if ((rc = reserve(w, h->len, &s, &at)))
		return rc;
	h->seq = ++w->seq;
	if (!(*out = op_new(f, h, s, at, data)))
		return -ENOMEM;
	w->pending_ops++;
	w->pending_bytes += (*out)->len;
	if ((*out)->dirattr)
		w->ncreates++;
	f->synced = 0;
	return 0;
}

/* --- loading what a previous mount left ---------------------------------- */

/* The parent a JR_CREATE's data names: 0, or -EINVAL if malformed. */
static int crec_parent(const struct jrec *h, const uint8_t *data,
		       struct cairn_fid *parent)
{
	struct crec c;

	if (h->len < sizeof(c))
		return -EINVAL;
	memcpy(&c, data, sizeof(c));
	if (c.namelen == 0 || c.namelen > CAIRN_NAME_MAX ||
	    sizeof(c) + c.namelen > h->len)
		return -EINVAL;
	*parent = (struct cairn_fid){ .vol = c.pvol, .vnode = c.pvnode,
				      .uniq = c.puniq };
	return 0;
}

/* FNV-1a: two names that share it only make a create wait (ns_waits). */
static uint32_t name_hash(const char *name, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 16777619u;
	return h;
}

/* A create or remove not sent yet, in directory parent: counted there,
 * and a remove's name kept. Under lock (or while loading). */
static void ns_pending_add(struct wb *w, const struct cairn_fid *parent,
			   struct wop *o, const char *name, size_t len)
{
	struct wfile *d = file_get(w, parent);
	struct rmname *r;

	/* Its times move past a change of them still in the journal
	 * (wb_patch lays those over the directory's status). */
	if (d) {
		d->children++;
		d->pvalid &= ~(uint32_t)(SA_MTIME | SA_CTIME);
	}
	w->ncreates++;
	o->nhash = name_hash(name, len);
	if (d && o->type == JR_REMOVE &&
	    (r = malloc(sizeof(*r) + len + 1))) {
		r->seq = o->seq;
		r->blocks = 0;
		r->hash = o->nhash;
		r->len = (uint16_t)len;
		memcpy(r->name, name, len);
		r->name[len] = 0;
		r->next = d->rmnames;
		d->rmnames = r;
		o->rm = r;
	}
}

static void load_record(struct wb *w, struct jseg *s, uint64_t at,
			const struct jrec *h, const uint8_t *data)
{
	struct cairn_fid fid = { .vol = h->vol, .vnode = h->vnode,
				 .uniq = h->uniq }, parent;
	struct wfile *f;
	struct wop *o;

	if (h->seq > w->seq)
		w->seq = h->seq;
	if (h->type == JR_DONE)
		return;
	if (JR_NS(h->type) && crec_parent(h, data, &parent)) {
		log_warn("write-back journal segment %016" PRIx64 ": the "
			 "creation of vnode %" PRIu64 " is malformed; skipped",
			 s->id, h->vnode);
		return;
	}
	if (h->type == JR_ATTRX &&
	    h->len != ((h->valid & ATTRX_OWNER) ? sizeof(struct attrx)
						: ATTRX_SHORT)) {
		log_warn("write-back journal segment %016" PRIx64 ": an "
			 "attribute change of vnode %" PRIu64 " is malformed; "
			 "skipped", s->id, h->vnode);
		return;
	}
	if (!(f = file_get(w, &fid)))
		return;
	if (h->type == JR_CREATE && f->head) {
		/* A creation renamed before it was sent (wb_rename_created):
		 * journaled again, after the changes that followed it. */
		struct crec c;

		memcpy(&c, data, sizeof(c));
		if ((o = f->head)->type == JR_CREATE) {
			/* The daemon stopped before the first was marked
			 * done: this one replaces it. */
			f->bytes += (uint64_t)h->len - o->len;
			o->seg->live--;
			o->seg = s;
			o->at = at;
			o->seq = h->seq;
			o->len = h->len;
			s->live++;
			o->nhash = name_hash((const char *)data + sizeof(c),
					     c.namelen);
			return;
		}
		/* Always the file's first change; the numbering of those
		 * after it stands. */
		if (!(o = op_new(f, h, s, at, data)))
			return;
		for (struct wop *p = f->head; p; p = p->next)
			if (p->next == o) {
				p->next = NULL;
				f->tail = p;
			}
		o->next = f->head;
		f->head = o;
		o->ready = 1;
		o->parent = parent;
		ns_pending_add(w, &parent, o, (const char *)data + sizeof(c),
			       c.namelen);
		return;
	}
	if (!(o = op_new(f, h, s, at, data)))
		return;
	o->ready = 1;
	f->tbase = o->tbase;
	f->tidx = o->tidx + 1;
	if (o->dirattr)
		w->ncreates++;
	if (JR_NS(h->type)) {
		struct crec c;

		memcpy(&c, data, sizeof(c));
		o->parent = parent;
		ns_pending_add(w, &parent, o, (const char *)data + sizeof(c),
			       c.namelen);
	}
}

/* Read segment s's records. */
static void load_segment(struct wb *w, struct jseg *s)
{
	uint8_t *data = NULL;
	size_t skipped = 0;
	uint64_t at = 0;

	if (!(data = malloc(CAIRN_MAX_IO)))
		return;
	while (at + sizeof(struct jrec) <= s->size) {
		struct jrec h;

		if (pread(s->fd, &h, sizeof(h), (off_t)at) != sizeof(h))
			break;
		if (h.magic != JR_MAGIC || h.hcrc != hdr_crc(&h) ||
		    h.segid != s->id || h.at != at || h.len > CAIRN_MAX_IO ||
		    h.type < JR_WRITE || h.type > JR_ATTRX ||
		    at + sizeof(h) + h.len > s->size) {
			/* Never written, or torn: the next record starts
			 * at a multiple of 8 somewhere after. */
			at += 8;
			skipped++;
			continue;
		}
		/* A torn write's data (a crash of the machine, not just of
		 * the daemon) was never promised to anybody: skipped. */
		if ((h.type == JR_WRITE || h.type == JR_ATTRX ||
		     JR_NS(h.type)) &&
		    (pread(s->fd, data, h.len, (off_t)(at + sizeof(h))) !=
		     (ssize_t)h.len ||
		     crc32_gzip_refl(0, data, h.len) != h.dcrc))
			log_warn("write-back journal segment %016" PRIx64
				 ": a change of vnode %" PRIu64 " is torn; "
				 "skipped", s->id, h.vnode);
		else
			load_record(w, s, at, &h, data);
		at += sizeof(h) + PAD8(h.len);
	}
	if (skipped)
		log_info("write-back journal segment %016" PRIx64 ": skipped "
			 "%zu bytes that were never completely written (the "
			 "daemon stopped while writing them; those writes "
			 "had not been acknowledged)", s->id, skipped * 8);
	free(data);
}

static int seg_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int load(struct wb *w)
{
	DIR *d = opendir(w->dir);
	struct dirent *e;
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	struct jseg *tail = NULL;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char *end;
		uint64_t id;

		if (strlen(e->d_name) != 16)
			continue;
		id = strtoull(e->d_name, &end, 16);
		if (*end)
			continue;
		if (n == cap) {
			uint64_t *m = realloc(ids, (cap = cap ? cap * 2 : 16) *
						   sizeof(*ids));
			if (!m) {
				free(ids);
				closedir(d);
				return -ENOMEM;
			}
			ids = m;
		}
		ids[n++] = id;
	}
	closedir(d);
	if (n)
		qsort(ids, n, sizeof(*ids), seg_cmp);
	for (size_t i = 0; i < n; i++) {
		struct jseg *s;
		int rc = seg_open(w, ids[i], 0, &s);

		if (rc < 0) {
			log_warn("write-back journal segment %016" PRIx64
				 ": %s", ids[i], strerror(-rc));
			continue;
		}
		if (tail)
			tail->next = s;
		else
			w->segs = s;
		tail = s;
		load_segment(w, s);
		w->next_seg = ids[i] + 1;
	}
	free(ids);
	/* What is left is sent first, each file's token taken again at the
	 * version its first change expects. */
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct wfile *f = w->buckets[i]; f; f = f->hnext) {
			if (!f->nops)
				continue;
			f->tok = TK_LOST;
			w->pending_ops += f->nops;
			w->pending_bytes += f->bytes;
			w->st.replayed += f->nops;
		}
	if (w->pending_ops)
		log_info("write-back: %zu changes (%" PRIu64 " bytes) left by "
			 "the previous mount in %s: sending them", w->pending_ops,
			 w->pending_bytes, w->dir);
	/* Segments with nothing pending go (the last one stays: appended
	 * to next). */
	for (struct jseg *s = w->segs, *next; s; s = next) {
		next = s->next;
		seg_maybe_drop(w, s);
	}
	return 0;
}

int wb_open(const char *cache_dir, struct fs *fs, struct wb **out,
	    char *err, size_t errsz)
{
	struct wb *w = calloc(1, sizeof(*w));
	char path[PATH_MAX + 16];
	int rc;

	if (!w) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	w->fs = fs;
	w->lockfd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->done, NULL);
	w->nbuckets = 1024;
	w->buckets = calloc(w->nbuckets, sizeof(*w->buckets));
	if (!w->buckets) {
		rc = -ENOMEM;
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	if (snprintf(w->dir, sizeof(w->dir), "%s/journal", cache_dir) >=
	    (int)sizeof(w->dir) ||
	    snprintf(w->conflicts, sizeof(w->conflicts), "%s/conflicts",
		     cache_dir) >= (int)sizeof(w->conflicts)) {
		rc = -ENAMETOOLONG;
		snprintf(err, errsz, "%s: path too long", cache_dir);
		goto fail;
	}
	if (mkdir(w->dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errsz, "%s: %s", w->dir, strerror(errno));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/lock", w->dir);
	w->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (w->lockfd < 0 || flock_wait(w->lockfd, FLOCK_WAIT_MS) < 0) {
		rc = -errno;
		snprintf(err, errsz, "%s: %s", path,
			 errno == EWOULDBLOCK ? "in use by another cairn mount"
					      : strerror(errno));
		goto fail;
	}
	if ((rc = load(w)) < 0) {
		snprintf(err, errsz, "%s: %s", w->dir, strerror(-rc));
		goto fail;
	}
	*out = w;
	return 0;
fail:
	wb_close(w);
	return rc;
}

/* --- sending --------------------------------------------------------------- */

/* Take fid's token: 0 (held; known_dv/size set), -ECANCELED (WT_DV and
 * the file changed), or another error. dv: 0 for any version. No lock. */
static int grant(struct wb *w, const struct cairn_fid *fid, int with_dv,
		 uint64_t dv, struct cairn_attr *a)
{
	struct msg_wtoken_req q = { .fid = *fid, .dv = dv,
				    .flags = with_dv ? WT_DV : 0 };
	struct msg_attr p;
	uint64_t seq = notify_seq(w->fs->ntf);
	/* As the file's last writing opener: the server grants the token
	 * only to someone who may write, and takes the stores under it. */
	int rc = fs_rpc_opener(w->fs, fid->vnode, OP_WTOKEN, &q, &p);

	if (rc)
		return rc;
	*a = p.attr;
	fs_note_attrs(w->fs, seq, &p.attr, NULL);
	return 0;
}

static int give_back(struct wb *w, const struct cairn_fid *fid)
{
	struct msg_wtoken_req q = { .fid = *fid, .flags = WT_RETURN };
	struct msg_attr p;
	int rc = fs_rpc(NULL, w->fs, OP_WTOKEN, &q, &p, NULL);

	return rc == -ESTALE || rc == -ENOENT ? 0 : rc;
}

/* Apply f's changes, in order, to a new sparse file under conflicts/:
 * written under a dot name, synced (it is then the only copy: the
 * journal lets go of them) and renamed, so that a file under its own
 * name there is whole. Under no lock; f is busy (ours). */
static void save_conflict(struct wb *w, struct wfile *f, struct wop *ops)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 64];
	uint8_t *buf = malloc(CAIRN_MAX_IO);
	long long now = (long long)time(NULL);
	int fd = -1, rc = 0;

	if (mkdir(w->conflicts, 0700) < 0 && errno != EEXIST)
		rc = -errno;
	snprintf(path, sizeof(path), "%s/%" PRIu64 ".%u.%lld", w->conflicts,
		 f->fid.vnode, f->fid.uniq, now);
	snprintf(tmp, sizeof(tmp), "%s/.%" PRIu64 ".%u.%lld.tmp",
		 w->conflicts, f->fid.vnode, f->fid.uniq, now);
	if (!rc && (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0600)) < 0)
		rc = -errno;
	for (struct wop *o = ops; !rc && o; o = o->next) {
		if (o->type == JR_ATTR && (o->valid & SA_SIZE)) {
			if (ftruncate(fd, (off_t)o->off) < 0)
				rc = -errno;
		} else if (o->type == JR_WRITE) {
			if (!buf) {
				rc = -ENOMEM;
			} else if (pread(o->seg->fd, buf, o->len,
					 (off_t)(o->at + sizeof(struct jrec))) !=
				   (ssize_t)o->len ||
				   pwrite(fd, buf, o->len, (off_t)o->off) !=
				   (ssize_t)o->len) {
				rc = errno ? -errno : -EIO;
			}
		}
	}
	if (!rc && fdatasync(fd) < 0)
		rc = -errno;
	if (fd >= 0 && close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc && fd >= 0)
		unlink(tmp);
	free(buf);
	if (rc)
		log_error("write-back conflict on vnode %" PRIu64 ": another "
			  "client changed the file while our changes to it "
			  "could not be sent; they could not be saved to %s "
			  "either (%s) and are lost", f->fid.vnode, path,
			  strerror(-rc));
	else
		log_warn("write-back conflict on vnode %" PRIu64 ": another "
			 "client changed the file after this client lost its "
			 "token (it was unreachable or stopped); the server "
			 "keeps that version, ours is saved in %s",
			 f->fid.vnode, path);
}

/* The server applied our change (or changes) of f and answered with a:
 * the version the next one starts from. Under lock. */
static void sent_attr(struct wfile *f, const struct cairn_attr *a)
{
	f->known = 1;
	f->known_dv = a->dv;
	f->known_size = a->size;
	f->sent_ok = 1;
	f->sent = *a;
}

/* Take change o out of f's list (sent, given up, or never written).
 * Under lock. */
static void drop_op(struct wb *w, struct wfile *f, struct wop *o)
{
	struct wop **p = &f->head, *prev = NULL;

	while (*p != o) {
		prev = *p;
		p = &(*p)->next;
	}
	*p = o->next;
	if (f->tail == o)
		f->tail = prev;
	f->nops--;
	f->bytes -= o->len;
	w->pending_ops--;
	w->pending_bytes -= o->len;
	o->seg->live--;
	seg_maybe_drop(w, o->seg);
	if (JR_NS(o->type)) {
		struct wfile *d = *fslot(w, &o->parent);

		w->ncreates--;
		if (d && o->rm) {
			struct rmname **r = &d->rmnames;

			while (*r && *r != o->rm)
				r = &(*r)->next;
			if (*r)
				*r = o->rm->next;
			/* A creation of that name waits for it (ns_waits). */
			if (o->rm->blocks && w->qhead)
				pthread_cond_broadcast(&w->work);
			free(o->rm);
		}
		/* A change of the directory's attributes journaled after
		 * this one waits for one fewer (ns_waits). */
		for (struct wop *x = d ? d->head : NULL; x; x = x->next)
			if (x->dirattr && x->seq > o->seq && x->nbefore &&
			    !--x->nbefore && x == d->head)
				pthread_cond_broadcast(&w->work);
		/* The last create or remove in a directory: its own
		 * removal may go (next_ready), and a recalled one's token
		 * back. */
		if (d && d->children && !--d->children) {
			if (d->head && d->head->type == JR_REMOVE)
				pthread_cond_broadcast(&w->work);
			if (d->tok == TK_RECALLED || d->must_return) {
				d->retry_ms = 0;
				enqueue(w, d, 1);
			}
		}
		if (d && !d->busy)
			file_maybe_free(w, d);
	}
	/* Creates and removes in a directory may wait for this one. */
	if (o->dirattr) {
		w->ncreates--;
		if (f->children)
			pthread_cond_broadcast(&w->work);
	}
	free(o);
	if (!f->nops)
		f->pvalid = 0;
}

/* f's first change is done (or given up). Under lock. */
static void pop_op(struct wb *w, struct wfile *f)
{
	drop_op(w, f, f->head);
}

/* Give up every change of f (file gone, or a conflict saved). Under
 * lock. */
static void drop_all(struct wb *w, struct wfile *f)
{
	while (f->head)
		pop_op(w, f);
}

/* A file's chunks, unchanged, from version dv through n attribute
 * changes, one version at a time. */
static void ccache_steps(struct wb *w, const struct wfile *f, uint64_t dv,
			 unsigned n, uint64_t size)
{
	for (unsigned i = 0; i < n; i++)
		ccache_write(w->fs->cc, &f->fid, dv + i, dv + i + 1, size,
			     size, size, NULL, 0);
}

/* The chunk cache keeps a creation's first bytes, as send_op does for a
 * write (the file was empty at the version we knew), and steps through
 * the nattr attribute changes made with them. */
static void ccache_created(struct wb *w, const struct wfile *f,
			   const struct cairn_attr *a, const char *data,
			   uint32_t len, unsigned nattr)
{
	if (!f->known || a->dv != f->known_dv + 1 + nattr)
		return;
	ccache_write(w->fs->cc, &f->fid, f->known_dv, f->known_dv + 1, 0,
		     a->size, 0, data, len);
	ccache_steps(w, f, f->known_dv + 1, nattr, a->size);
}

/* A CREATEATTR entry: creation c and the nattr attribute changes after
 * it merged in ma (nattr 0: none, ma unread). */
static struct msg_centa centa(const struct msg_cent *c, const struct wop *ma,
			      unsigned nattr)
{
	struct msg_centa e = { .c = *c, .steps = nattr };

	if (nattr) {
		e.valid = ma->valid | SA_KEEPTIME;
		e.mode = ma->mode;
		e.uid = ma->uid;
		e.gid = ma->gid;
		e.atime = ma->atime;
		e.mtime = ma->mtime;
		e.ctime = ma->ctime;
	}
	return e;
}

/* The server answered CREATEATTR -ENOSYS (having done nothing): from now
 * on a file's creation and the attribute changes after it go as CREATE
 * (or CREATES) and SETATTR (create_attrs). */
static void no_createattr(struct wb *w)
{
	if (!__atomic_exchange_n(&w->no_createattr, 1, __ATOMIC_RELAXED))
		log_info("write-back: the server does not take CREATEATTR; "
			 "a file's creation and the attribute changes after "
			 "it go as two requests");
}

/* Send f's creation o and the nattr attribute changes after it merged in
 * ma (CREATEATTR, one entry) or none (CREATE). A server that does not
 * take CREATEATTR answers -ENOSYS, having done nothing; from then on
 * they go as CREATE and SETATTR (create_attrs). *a and *created as
 * CREATE's reply. No lock. */
static int send_createattr(struct wb *w, const struct msg_create_req *q,
			   const struct wop *ma, unsigned nattr,
			   const uint8_t *cred, size_t credlen,
			   struct cairn_attr *a, uint8_t *created)
{
	struct msg_cent c = { .name = q->name, .mode = q->mode,
			      .uid = q->uid, .gid = q->gid, .flags = q->flags,
			      .fid = q->fid, .time = q->time, .data = q->data };
	struct msg_centa e = centa(&c, ma, nattr);
	struct msg_createattr_req x = { .dir = q->dir, .count = 1,
					.ents = &e };
	struct msg_creates_rep p;
	struct rpc_reply rep = { NULL, 0 };
	struct msg_crep r;
	struct rbuf it;
	int rc;

	/* Merged before the server said no (another shipper's request):
	 * the caller sends them apart, with no trip to be refused again. */
	if (__atomic_load_n(&w->no_createattr, __ATOMIC_RELAXED))
		return -ENOSYS;
	rc = fs_rpc_cred(w->fs, cred, credlen, OP_CREATEATTR, &x, &p, &rep);
	if (rc == -ENOSYS)
		no_createattr(w);
	if (rc) {
		rpc_reply_free(&rep);
		return rc;
	}
	rbuf_init(&it, p.list.p, p.list.len);
	if (p.count != 1 || !msg_crep_next(&it, &r))
		rc = fs_bad_reply(OP_CREATEATTR);
	else if ((rc = r.status) == 0) {
		*a = r.child;
		*created = r.created;
	}
	rpc_reply_free(&rep);
	return rc;
}

/* Send f's creation o: CREATE with CR_FID (idempotent: a resend or a
 * replay of one the server applied is answered as done) and CR_TOKEN (the
 * file's token comes with it), with its creator's credentials; with
 * first, its first bytes; with nattr, the attribute changes after them
 * merged in ma (CREATEATTR). No lock; f busy. */
static int send_create(struct wb *w, struct wfile *f, const struct wop *o,
		       const struct wop *first, const struct wop *ma,
		       unsigned nattr, int sync, uint8_t *buf,
		       struct cairn_attr *a, uint8_t *created)
{
	struct crec c;
	struct msg_create_req q;
	struct msg_create_rep p;
	uint8_t *data = buf + PAD8(o->len);
	int rc;

	if (pread(o->seg->fd, buf, o->len,
		  (off_t)(o->at + sizeof(struct jrec))) != (ssize_t)o->len ||
	    (first && pread(first->seg->fd, data, first->len,
			    (off_t)(first->at + sizeof(struct jrec))) !=
	     (ssize_t)first->len)) {
		rc = errno ? -errno : -EIO;
		log_error("write-back journal: cannot read the creation of "
			  "vnode %" PRIu64 ": %s", f->fid.vnode,
			  strerror(-rc));
		return rc;
	}
	memcpy(&c, buf, sizeof(c));
	q = (struct msg_create_req){
		.dir = o->parent,
		.name = { (const char *)buf + sizeof(c), c.namelen },
		.mode = o->valid, .uid = c.uid, .gid = c.gid,
		.flags = CR_EXCL | CR_FID | CR_TOKEN | (sync ? CR_SYNC : 0),
		.fid = f->fid, .time = o->mtime,
		.data = { data, first ? first->len : 0 },
	};
	if (nattr) {
		rc = send_createattr(w, &q, ma, nattr, buf + sizeof(c) +
				     c.namelen, o->len - sizeof(c) - c.namelen,
				     a, created);
	} else {
		rc = fs_rpc_cred(w->fs, buf + sizeof(c) + c.namelen,
				 o->len - sizeof(c) - c.namelen, OP_CREATE, &q,
				 &p, NULL);
		if (rc == 0) {
			*a = p.child;
			*created = p.created;
		}
	}
	if (rc)
		return rc;
	if (first)
		ccache_created(w, f, a, (const char *)data, first->len,
			       (*created & CREATED_ATTRS) ? nattr : 0);
	return 0;
}

/* The write that may go with f's creation o (its first bytes, in one
 * CREATE): the next change, written, at offset 0, fitting in the buffer
 * beside the creation's record. Under lock. */
static const struct wop *first_bytes(const struct wop *o)
{
	const struct wop *n = o->next;

	return n && n->ready && n->type == JR_WRITE && n->off == 0 &&
	       n->len && PAD8(o->len) + n->len <= CAIRN_MAX_IO ? n : NULL;
}

/*
 * Removals q with their times (REMOVESAT), reply in *p (buffer in *rep;
 * freed by the caller, also on error): 0, an error, or -ENOSYS when the
 * server takes none (said once; from then on this answers -ENOSYS
 * without asking, and the caller sends them the older way). No lock.
 */
static int send_removesat(struct wb *w, const uint8_t *cred, size_t credlen,
			  const struct msg_removes_req *q,
			  struct msg_removes_rep *p, struct rpc_reply *rep)
{
	int rc;

	*rep = (struct rpc_reply){ 0 };
	if (__atomic_load_n(&w->no_removesat, __ATOMIC_RELAXED))
		return -ENOSYS;
	rc = fs_rpc_cred(w->fs, cred, credlen, OP_REMOVESAT, q, p, rep);
	if (rc == 0 && p->count != q->count)
		rc = fs_bad_reply(OP_REMOVESAT);
	if (rc == -ENOSYS &&
	    !__atomic_exchange_n(&w->no_removesat, 1, __ATOMIC_RELAXED))
		log_info("write-back: the server takes no REMOVESAT; a "
			 "directory's times after a removal answered here are "
			 "the server's when it lands");
	return rc;
}

/* Send the removal o of one of f's names: REMOVE with RM_FID (it removes
 * nothing if the name no longer names f) and the flags the client chose,
 * with the remover's credentials; as a REMOVESAT of one entry (the same,
 * with its time) when the server takes that. No lock; f busy. */
static int send_remove(struct wb *w, struct wfile *f, const struct wop *o,
		       uint8_t *buf)
{
	struct crec c;
	struct msg_remove_req q;
	struct msg_attr p;
	struct msg_rment e;
	struct msg_removes_req qa = { .dir = o->parent, .count = 1, .ents = &e };
	struct msg_removes_rep pa;
	struct rpc_reply rep;
	const uint8_t *cred;
	size_t credlen;
	int rc;

	if (pread(o->seg->fd, buf, o->len,
		  (off_t)(o->at + sizeof(struct jrec))) != (ssize_t)o->len)
		return errno ? -errno : -EIO;
	memcpy(&c, buf, sizeof(c));
	q = (struct msg_remove_req){
		.dir = o->parent,
		.name = { (const char *)buf + sizeof(c), c.namelen },
		.flags = o->valid | RM_FID,
		.victim = f->fid,
	};
	cred = buf + sizeof(c) + c.namelen;
	credlen = o->len - sizeof(c) - c.namelen;
	/* A record from before times were kept has 0: the server's clock. */
	e = (struct msg_rment){ .name = q.name, .flags = o->valid,
				.victim = f->fid, .time = o->mtime };
	rc = send_removesat(w, cred, credlen, &qa, &pa, &rep);
	if (rc == 0)
		rc = msg_removes_status(&pa, 0);
	rpc_reply_free(&rep);
	if (rc != -ENOSYS)
		return rc;
	return fs_rpc_cred(w->fs, cred, credlen, OP_REMOVE, &q, &p, NULL);
}

/*
 * Write q and the nattr attribute changes merged in ma in one request
 * (WRITEATTR). A server that does not take it answers -ENOSYS, having
 * done nothing; from then on writes go alone (attr_merge), the changes
 * after them as SETATTR (ship_file sends the same changes again).
 */
static int send_writeattr(struct wb *w, const struct msg_write_req *q,
			  const struct wop *ma, unsigned nattr,
			  struct msg_attr *p)
{
	struct msg_writeattr_req x = {
		.fid = q->fid, .off = q->off, .flags = q->flags,
		.valid = ma->valid | SA_KEEPTIME, .mode = ma->mode,
		.uid = ma->uid, .gid = ma->gid, .steps = nattr,
		.atime = ma->atime, .mtime = ma->mtime, .ctime = ma->ctime,
		.data = q->data,
	};
	int rc;

	/* Merged before the server said no (as in send_createattr). */
	if (__atomic_load_n(&w->no_writeattr, __ATOMIC_RELAXED))
		return -ENOSYS;
	rc = fs_rpc(NULL, w->fs, OP_WRITEATTR, &x, p, NULL);
	if (rc == -ENOSYS &&
	    !__atomic_exchange_n(&w->no_writeattr, 1, __ATOMIC_RELAXED))
		log_info("write-back: the server does not take WRITEATTR; "
			 "a write and the attribute changes after it go as "
			 "two requests");
	return rc;
}

/* Send change o of f (with a write, ma: the attribute changes merged
 * after it, or NULL). 0, or the server's error; a creation's reply
 * flags (CREATED_TOKEN) in *created. No lock; f busy. */
static int send_op(struct wb *w, struct wfile *f, const struct wop *o,
		   const struct wop *ma, unsigned steps, int sync, uint8_t *buf,
		   struct cairn_attr *a, uint8_t *created)
{
	uint64_t seq = notify_seq(w->fs->ntf);
	int rc;

	if (o->type == JR_REMOVE) {
		/* ENOENT: done already (RM_FID), by an earlier copy. */
		rc = send_remove(w, f, o, buf);
		return rc == -ENOENT ? 0 : rc;
	}
	if (o->type == JR_CREATE) {
		/* The directory's attributes in the reply are not noted:
		 * ours count the creates not sent yet too; nor those of a
		 * directory made here, for the same reason. */
		if ((rc = send_create(w, f, o, NULL, NULL, 0, 0, buf, a,
				      created)))
			return rc;
		if (!S_ISDIR(a->mode))
			fs_note_attrs(w->fs, seq, a, NULL);
		return 0;
	}
	if (o->type == JR_WRITE) {
		struct msg_write_req q = { .fid = f->fid, .off = o->off,
					   .flags = WR_TOKEN | WR_KEEPTIME |
						    (sync ? WR_SYNC : 0),
					   .data = { (char *)buf, o->len } };
		struct msg_attr p;

		if (pread(o->seg->fd, buf, o->len,
			  (off_t)(o->at + sizeof(struct jrec))) !=
		    (ssize_t)o->len) {
			rc = errno ? -errno : -EIO;
			log_error("write-back journal: cannot read a change "
				  "of vnode %" PRIu64 ": %s", f->fid.vnode,
				  strerror(-rc));
			return rc;
		}
		if (ma)
			rc = send_writeattr(w, &q, ma, steps - 1, &p);
		else
			rc = fs_rpc(NULL, w->fs, OP_WRITE, &q, &p, NULL);
		if (rc)
			return rc;
		*a = p.attr;
	} else {
		struct msg_setattr_req q = {
			.fid = f->fid,
			.valid = o->valid | (o->dirattr ? 0 : SA_TOKEN) |
				 SA_KEEPTIME | (sync ? SA_SYNC : 0),
			.size = o->off, .mtime = o->mtime, .ctime = o->ctime,
			.atime = o->atime, .mode = o->mode,
			.uid = o->uid, .gid = o->gid,
		};
		struct msg_attr p;

		if (steps > 1) {
			q.valid |= SA_STEPS;
			q.size = steps;
		}

		if ((rc = fs_rpc(NULL, w->fs, OP_SETATTR, &q, &p, NULL)))
			return rc;
		*a = p.attr;
	}
	fs_note_attrs(w->fs, seq, a, NULL);
	/* The chunk cache keeps what we wrote when this change is the only
	 * one since the version we knew (as fs_op_write does). */
	if (o->dirattr) {
		/* A directory: no chunks. */
	} else if (!f->known || a->dv != f->known_dv + steps ||
		   (o->type != JR_WRITE && a->size != f->known_size)) {
		ccache_forget_fid(w->fs->cc, &f->fid);
	} else {
		unsigned i = 0;

		if (o->type == JR_WRITE) {
			ccache_write(w->fs->cc, &f->fid, f->known_dv,
				     f->known_dv + 1, f->known_size, a->size,
				     o->off, (const char *)buf, o->len);
			i = 1;
		}
		/* Attributes only, one version at a time (merged ones moved
		 * it `steps`): the chunks stay. */
		ccache_steps(w, f, f->known_dv + i, steps - i, a->size);
	}
	return 0;
}

/*
 * The attribute changes from p on that go with the n changes in grp
 * already: written, none setting a size (SA_STEPS takes the size field; a
 * truncation and a size after it are not one change either), of the
 * same kind (a directory's or a file's) and, for a directory, none
 * waiting for a create or remove in it (journaled between them): those
 * attr_joins. Each field of *m from the last change that sets it.
 * Returns n with them.
 */
static int attr_joins(const struct wop *p, unsigned dirattr)
{
	return p && p->ready && p->type == JR_ATTR && !(p->valid & SA_SIZE) &&
	       p->dirattr == dirattr && !p->nbefore;
}

/* Attribute change p made after those merged in *m: into *m. */
static void attr_fold(struct wop *m, const struct wop *p)
{
	if (p->valid & SA_MTIME)
		m->mtime = p->mtime;
	if (p->valid & SA_CTIME)
		m->ctime = p->ctime;
	if (p->valid & SA_ATIME)
		m->atime = p->atime;
	if (p->valid & SA_MODE)
		m->mode = p->mode;
	if (p->valid & SA_UID)
		m->uid = p->uid;
	if (p->valid & SA_GID)
		m->gid = p->gid;
	m->valid |= p->valid;
}

static unsigned attr_run(const struct wop *p, unsigned n, unsigned dirattr,
			 struct wop *m, const struct wop **grp)
{
	for (; n < WB_ATTR_MERGE_MAX && attr_joins(p, dirattr); p = p->next) {
		attr_fold(m, p);
		grp[n++] = p;
	}
	return n;
}

/*
 * The changes at the head of f that go in one request: the first alone;
 * or, if it changes attributes and the server takes SA_STEPS, it and the
 * attribute changes right after it (attr_run), in *m; or, if it is a
 * write and the server takes WRITEATTR, it and the attribute changes
 * right after it, merged in *ma (ma->valid 0: none). grp gets the
 * changes themselves. Returns how many. Under lock; f busy.
 */
static unsigned attr_merge(struct wb *w, const struct wfile *f,
			   struct wop *m, struct wop *ma, const struct wop **grp)
{
	const struct wop *o = f->head, *p = o->next;

	*m = *o;
	grp[0] = o;
	ma->valid = 0;
	if (o->type == JR_WRITE && attr_joins(p, 0) &&
	    !__atomic_load_n(&w->no_writeattr, __ATOMIC_RELAXED)) {
		*ma = *p;
		grp[1] = p;
		return attr_run(p->next, 2, 0, ma, grp);
	}
	if (o->type != JR_ATTR || (o->valid & SA_SIZE) ||
	    !rpc_hello_flag(w->fs->rpc, HELLO_REP_SA_STEPS))
		return 1;
	return attr_run(o->next, 1, o->dirattr, m, grp);
}

/*
 * The attribute changes right after f's creation o (and its first bytes,
 * if those go with it) that may go in the same request (CREATEATTR: a
 * regular file's, when the server takes it), merged in *ma: how many.
 * Under lock; f busy.
 */
static unsigned create_attrs(struct wb *w, const struct wop *o,
			     const struct wop *first, struct wop *ma)
{
	const struct wop *p = (first ? first : o)->next;
	const struct wop *grp[WB_ATTR_MERGE_MAX];

	if (((o->valid & S_IFMT) && !S_ISREG(o->valid)) ||
	    !attr_joins(p, 0) ||
	    __atomic_load_n(&w->no_createattr, __ATOMIC_RELAXED))
		return 0;
	*ma = *p;
	return attr_run(p->next, 1, 0, ma, grp);
}

/* Does a hold what attribute change o (or several merged) makes? */
static int attrs_match(const struct cairn_attr *a, const struct wop *o)
{
	return (!(o->valid & SA_SIZE) || a->size == o->off) &&
	       (!(o->valid & SA_MTIME) ||
		(a->mtime.sec == o->mtime.sec &&
		 a->mtime.nsec == o->mtime.nsec)) &&
	       (!(o->valid & SA_ATIME) ||
		(a->atime.sec == o->atime.sec &&
		 a->atime.nsec == o->atime.nsec)) &&
	       (!(o->valid & SA_MODE) ||
		(a->mode & 07777) == (o->mode & 07777)) &&
	       (!(o->valid & SA_UID) || a->uid == o->uid) &&
	       (!(o->valid & SA_GID) || a->gid == o->gid);
}

/*
 * Were the first of the `steps` changes grp (merged by attr_merge), which
 * expect f at version dv, applied already? A copy sent before the
 * connection was lost (or the previous mount stopped) may have reached
 * the server, and may have merged fewer of them than now: the file must
 * be k versions further for some k <= steps and hold what the first k
 * make of it: a write's bytes, the size, times and mode of the attribute
 * changes. Returns k, or 0: not applied. No lock; f busy.
 */
static unsigned applied_already(struct wb *w, struct wfile *f,
				const struct wop *const *grp, unsigned steps,
				uint64_t dv, uint8_t *buf)
{
	const struct wop *o = grp[0];
	struct msg_read_req q = { .fid = f->fid, .off = o->off,
				  .len = o->len };
	struct msg_read_rep p;
	struct rpc_reply rep;
	struct cairn_attr a;
	struct wop m;
	unsigned k, i;
	int ok;

	if (fs_getattr(NULL, w->fs, &f->fid, &a) || a.dv <= dv ||
	    a.dv - dv > steps)
		return 0;
	k = (unsigned)(a.dv - dv);
	/* The attribute changes among the first k, merged: all of them
	 * after an attribute change, those after the write after one. */
	i = o->type == JR_ATTR ? 0 : 1;
	if (i < k) {
		m = *grp[i];
		while (++i < k)
			attr_fold(&m, grp[i]);
		if (!attrs_match(&a, &m))
			return 0;
	}
	if (o->type == JR_ATTR)
		return k;
	if (pread(o->seg->fd, buf, o->len,
		  (off_t)(o->at + sizeof(struct jrec))) != (ssize_t)o->len ||
	    fs_rpc(NULL, w->fs, OP_READ, &q, &p, &rep))
		return 0;
	ok = p.attr.dv == a.dv && p.data.len == o->len &&
	     !memcmp(p.data.p, buf, o->len);
	rpc_reply_free(&rep);
	if (ok)
		log_info("write-back: a change of vnode %" PRIu64 " sent just "
			 "before the connection was lost had reached the "
			 "server", f->fid.vnode);
	return ok ? k : 0;
}

/* What the server answers to a creation it will never make: the name
 * taken, no permission (any more), a directory gone bad for it. */
static int create_refused(int err)
{
	return err == -EEXIST || err == -EACCES || err == -EPERM ||
	       err == -EINVAL || err == -ENAMETOOLONG || err == -EMLINK ||
	       err == -ENOTDIR;
}

/* What the server answers when it will not take a change however often
 * it is sent (until someone frees space or changes the export). */
static int refused_error(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EROFS ||
	       err == -EFBIG;
}

/*
 * A recalled file in the middle of a rewrite (truncated since its last
 * FLUSH): until that close, or WB_CLOSE_WAIT_MS after the recall, its
 * changes are still journaled and the token is kept, so that the other
 * client gets the whole close. Under lock.
 */
static int close_pending(const struct wb *w, const struct wfile *f)
{
	return f->tok == TK_RECALLED && !f->must_return && f->open_dirty &&
	       w->closes_seen && !w->stopping &&
	       clock_mono_ms() - f->recalled_ms < WB_CLOSE_WAIT_MS;
}

/*
 * Give f's token back (WT_RETURN), the lock dropped meanwhile. Until the
 * reply f is `returning`: a writer's grant (hold) waits, or it could
 * reach the server first and be undone by this return. Under lock.
 */
static int return_token(struct wb *w, struct wfile *f)
{
	int rc;

	f->returning = 1;
	pthread_mutex_unlock(&w->lock);
	rc = give_back(w, &f->fid);
	pthread_mutex_lock(&w->lock);
	f->returning = 0;
	if (rc == 0)
		w->st.returns++;
	return rc;
}

/* f's changes can never be sent: kept as a conflict copy, dropped from
 * the journal. Under lock (dropped while saving); f busy (ours). */
static void conflict(struct wb *w, struct wfile *f)
{
	struct wop *ops = f->head;

	w->st.conflicts++;
	pthread_mutex_unlock(&w->lock);
	save_conflict(w, f, ops);
	pthread_mutex_lock(&w->lock);
	drop_all(w, f);
	set_tok(w, f, TK_NONE);
	f->known = 0;
	f->err = 0;
}

/* Must f's next change wait: for the creation of the directory made
 * here that it names, (a directory's removal) for the creates and removes
 * in it, or (a creation) for the removal of what had its name before?
 * Under lock. */
static int ns_waits(struct wb *w, const struct wfile *f)
{
	const struct wop *o = f->head;
	const struct wfile *d;

	if (o && o->dirattr)
		return o->nbefore != 0;
	if (!o || !JR_NS(o->type))
		return 0;
	if (o->type == JR_REMOVE && f->children)
		return 1;
	if (!(d = *fslot(w, &o->parent)))
		return 0;
	if (d->head && d->head->type == JR_CREATE)
		return 1;
	/* The directory's attribute changes journaled before it. */
	for (const struct wop *p = d->head; p; p = p->next)
		if (p->dirattr && p->seq < o->seq)
			return 1;
	if (o->type == JR_CREATE)
		for (struct rmname *r = d->rmnames; r; r = r->next)
			if (r->hash == o->nhash && r->seq < o->seq) {
				r->blocks = 1; /* drop_op wakes a shipper */
				return 1;
			}
	return 0;
}

/*
 * f's creation o, a regular file's, reached the server with first (its
 * first bytes, or NULL) and the nattr attribute changes after them, and
 * made a: all are done. The file's token came with it (CR_TOKEN; one made
 * by an earlier copy of the request comes without: the next change learns
 * that from -ECANCELED). Under lock (dropped while marking the records);
 * f busy.
 */
static void create_sent(struct wb *w, struct wfile *f, const struct wop *o,
			const struct wop *first, unsigned nattr,
			const struct cairn_attr *a)
{
	const struct wop *at[WB_ATTR_MERGE_MAX];
	const struct wop *p = (first ? first : o)->next;

	CAIRN_ASSERT(nattr <= WB_ATTR_MERGE_MAX);
	for (unsigned i = 0; i < nattr; i++, p = p->next)
		at[i] = p;
	pthread_mutex_unlock(&w->lock);
	mark_done(w, o);
	if (first)
		mark_done(w, first);
	for (unsigned i = 0; i < nattr; i++)
		mark_done(w, at[i]);
	pthread_mutex_lock(&w->lock);
	if (first) {
		w->st.sent++;
		w->st.sent_bytes += first->len;
	}
	pop_op(w, f);           /* o, the creation */
	if (first)
		pop_op(w, f);   /* first, its write (o and first freed) */
	for (unsigned i = 0; i < nattr; i++)
		pop_op(w, f);   /* the attribute changes made with it */
	w->st.sent += 1 + nattr;
	w->st.merged += nattr;
	sent_attr(f, a);
	if (f->tok != TK_HELD && f->tok != TK_RECALLED)
		set_tok(w, f, TK_HELD);
	f->err = 0;
	f->refusals = 0;
	f->last_ms = clock_mono_ms();
	pthread_cond_broadcast(&w->done);
}

/*
 * Send what f holds, take its token again first if it was lost, give it
 * back when recalled (or idle, with nothing left). Called by a shipper
 * owning f (busy), with the lock held; returns with it held.
 */
static void ship_file(struct wb *w, struct wfile *f, uint8_t *buf)
{
	f->nb_solo = 0;
	for (;;) {
		struct wop *o = f->head, m, ma;
		const struct wop *mp;
		const struct wop *first, *grp[WB_ATTR_MERGE_MAX];
		struct wop ca;
		struct cairn_attr a;
		uint8_t created = CREATED | CREATED_TOKEN;
		unsigned steps, nca = 0;
		int rc, sync, csync;

		if (w->stopping > 1)
			return;
		if (!o || !o->ready)
			break;
		/* Its turn comes again (the shipper queues f). */
		if (ns_waits(w, f))
			break;
		steps = attr_merge(w, f, &m, &ma, grp);
		mp = ma.valid ? &ma : NULL;
		/* A directory's attribute change goes without its token
		 * (as its creates and removes do): nothing is numbered. */
		if (!JR_NS(o->type) && !o->dirattr && f->tok != TK_HELD &&
		    f->tok != TK_RECALLED) {
			uint64_t dv = o->tbase + o->tidx, recalls = f->recalls;
			uint64_t moved = f->moved;
			unsigned skip = 0;

			pthread_mutex_unlock(&w->lock);
			rc = grant(w, &f->fid, 1, dv, &a);
			/* As many versions further as some of the changes
			 * that go first, with what they make there: they were
			 * in flight when we lost the token (the daemon died,
			 * the connection broke) and reached the server. Done. */
			if (rc == -ECANCELED &&
			    (skip = applied_already(w, f, grp, steps, dv,
						    buf)) &&
			    (rc = grant(w, &f->fid, 1, dv + skip, &a)) == 0) {
				for (unsigned i = 0; i < skip; i++)
					mark_done(w, grp[i]);
			} else {
				skip = 0;
			}
			pthread_mutex_lock(&w->lock);
			if (skip) {
				for (unsigned i = 0; i < skip; i++) {
					w->st.sent++;
					w->st.sent_bytes += f->head->len;
					pop_op(w, f);
				}
				pthread_cond_broadcast(&w->done);
			}
			if (rc == -ECANCELED && f->moved != moved)
				continue; /* renumbered meanwhile: again */
			if (rc == -ECANCELED && f->moving) {
				/* A change of ours outside the journal is on
				 * its way (a rename sent again after the
				 * reconnect): the version it made counts once
				 * its reply is in (wb_move_end). */
				f->retry_ms = clock_mono_ms() +
					      WB_MOVING_RETRY_MS;
				break;
			}
			if (rc == -ECANCELED) {
				conflict(w, f);
				break;
			}
			if (rc == -ESTALE || rc == -ENOENT) {
				log_info("write-back: vnode %" PRIu64 " is gone "
					 "from the server; %zu changes to it "
					 "dropped", f->fid.vnode, f->nops);
				w->st.dropped += f->nops;
				drop_all(w, f);
				f->err = 0;
				break;
			}
			if (rc) {
				goto failed;
			}
			w->st.grants++;
			if (f->recalls != recalls) {
				/* Recalled while the grant was in flight:
				 * given back already (must_return). */
				continue;
			}
			set_tok(w, f, TK_HELD);
			f->known = 1;
			f->known_dv = a.dv;
			f->known_size = a.size;
			continue;
		}
		first = o->type == JR_CREATE ? first_bytes(o) : NULL;
		if (o->type == JR_CREATE)
			nca = create_attrs(w, o, first, &ca);
		/* An fsync waits: its last change goes durable, and the
		 * FSYNC after it is not needed (wb_sync). */
		sync = f->sync_waiters && grp[steps - 1] == f->tail &&
		       (o->type == JR_WRITE ||
			(o->type == JR_ATTR &&
			 rpc_hello_flag(w->fs->rpc, HELLO_REP_SA_SYNC)));
		/* A creation that takes everything the file holds: it goes
		 * durable, as its first bytes and attributes with it. */
		csync = (first || nca) && f->sync_waiters &&
			f->nops == 1 + (first != NULL) + nca &&
			rpc_hello_flag(w->fs->rpc, HELLO_REP_CR_SYNC);
		pthread_mutex_unlock(&w->lock);
		if (first || nca) {
			uint64_t seq = notify_seq(w->fs->ntf);

			rc = send_create(w, f, o, first, &ca, nca, csync, buf,
					 &a, &created);
			if (rc == 0)
				fs_note_attrs(w->fs, seq, &a, NULL);
		} else {
			rc = send_op(w, f, &m, mp, steps, sync, buf, &a,
				     &created);
		}
		pthread_mutex_lock(&w->lock);
		/* An older server: the write, or the creation, alone now. */
		if (rc == -ENOSYS && (mp || nca))
			continue;
		if (rc == 0 && (first || nca)) {
			create_sent(w, f, o, first,
				    (created & CREATED_ATTRS) ? nca : 0, &a);
			f->synced = csync && !f->nops;
			continue;
		}
		if (rc == 0) {
			pthread_mutex_unlock(&w->lock);
			for (unsigned i = 0; i < steps; i++)
				mark_done(w, grp[i]);
			pthread_mutex_lock(&w->lock);
			/* CR_TOKEN gave us the new file's token (one made by an
			 * earlier copy of the request comes without: the next
			 * change learns that from -ECANCELED). A directory's
			 * we know from the reply; what waits for it to exist
			 * (next_ready) may go now. */
			if (o->type == JR_CREATE && S_ISDIR(o->valid)) {
				if (!(created & CREATED_TOKEN)) {
					if (f->tok == TK_HELD)
						set_tok(w, f, TK_NONE);
				} else if (f->tok != TK_HELD &&
					   f->tok != TK_RECALLED) {
					set_tok(w, f, TK_HELD);
				}
				pthread_cond_broadcast(&w->work);
			} else if (o->type == JR_CREATE && f->tok != TK_HELD &&
				   f->tok != TK_RECALLED) {
				set_tok(w, f, TK_HELD);
			}
			w->st.sent += steps;
			w->st.sent_bytes += JR_NS(o->type) ? 0 : o->len;
			w->st.merged += steps - 1;
			if (o->type != JR_REMOVE)
				sent_attr(f, &a);
			f->err = 0;
			f->refusals = 0;
			f->last_ms = clock_mono_ms();
			for (unsigned i = 0; i < steps; i++)
				pop_op(w, f);
			f->synced = sync && !f->nops;
			pthread_cond_broadcast(&w->done);
			continue;
		}
		if (rc == -ECANCELED) {
			/* Not ours any more (revoked, or the connection
			 * was lost): take it again at known_dv. */
			if (f->tok == TK_RECALLED)
				f->must_return = 0;
			set_tok(w, f, TK_LOST);
			continue;
		}
		if (o->type == JR_REMOVE &&
		    (create_refused(rc) || rc == -ENOTEMPTY)) {
			log_error("write-back: the removal of a name of vnode %"
				  PRIu64 " answered here was refused by the "
				  "server: %s; the name is back", f->fid.vnode,
				  strerror(-rc));
			dcache_break(w->fs->dc, o->parent.vnode);
			w->st.errors++;
			pop_op(w, f);
			pthread_cond_broadcast(&w->done);
			continue;
		}
		if (o->type == JR_CREATE &&
		    (create_refused(rc) || rc == -ESTALE || rc == -ENOENT)) {
			/* EEXIST only after a crash (the directory's token
			 * was lost): someone else made the name meanwhile.
			 * ESTALE, ENOENT: its directory is gone (removed by
			 * another client then, or one made here that could
			 * not be made). The others: the server will never
			 * take it. A directory's files follow it here. */
			const char *why = rc == -EEXIST
				? "another client made its name meanwhile"
				: rc == -ESTALE || rc == -ENOENT
				? "its directory is gone" : strerror(-rc);

			if (S_ISDIR(o->valid)) {
				uint64_t pvn = o->parent.vnode;

				log_error("write-back: the directory this client "
					  "made as vnode %" PRIu64 " could not be "
					  "made on the server: %s; what was "
					  "written to files made in it is kept "
					  "in %s", f->fid.vnode, why,
					  w->conflicts);
				w->st.conflicts++;
				drop_all(w, f);
				set_tok(w, f, TK_NONE);
				f->err = 0;
				dcache_break(w->fs->dc, pvn);
				dcache_break(w->fs->dc, f->fid.vnode);
				pthread_cond_broadcast(&w->work);
				break;
			}
			log_error("write-back: the file this client created as "
				  "vnode %" PRIu64 " could not be made on the "
				  "server: %s; what was written to it is kept "
				  "in %s", f->fid.vnode, why, w->conflicts);
			conflict(w, f);
			break;
		}
		if (rc == -ESTALE || rc == -ENOENT) {
			log_info("write-back: vnode %" PRIu64 " is gone from the "
				 "server; %zu changes to it dropped",
				 f->fid.vnode, f->nops);
			w->st.dropped += f->nops;
			drop_all(w, f);
			f->err = 0;
			break;
		}
		if (rc == -EINTR && w->stopping)
			return;
failed:
		if (f->err != rc)
			log_warn("write-back: cannot send %zu changes of vnode "
				 "%" PRIu64 " to the server: %s; kept, retrying",
				 f->nops, f->fid.vnode, strerror(-rc));
		f->err = rc;
		f->fails++;
		w->st.errors++;
		if (!refused_error(rc)) {
			f->refusals = 0;
			f->retry_ms = clock_mono_ms() + 1000;
			pthread_cond_broadcast(&w->done);
			return;
		}
		/* Refused, and removed here since: the removal goes on its
		 * own (what it removes needs no more bytes; a file never
		 * made needs no removal either). */
		if (f->tail && f->tail->type == JR_REMOVE &&
		    o->type != JR_REMOVE) {
			log_warn("write-back: vnode %" PRIu64 " was removed "
				 "here while the server refused its changes "
				 "(%s); those are dropped", f->fid.vnode,
				 strerror(-rc));
			w->st.dropped += f->nops - 1;
			if (f->head->type == JR_CREATE) {
				drop_all(w, f);
				break;
			}
			while (f->head != f->tail)
				pop_op(w, f);
			f->err = 0;
			f->refusals = 0;
			continue;
		}
		/* The server's answer (out of space), not a passing
		 * trouble: try again less and less often (a close or fsync
		 * tries at once), and give a recalled token back now
		 * rather than hold the other client's request for the
		 * whole recall timeout. The changes stay in the journal;
		 * the next grant asks for the version they start from. */
		f->refusals += f->refusals < 5;
		f->retry_ms = clock_mono_ms() + (1000 << (f->refusals - 1));
		if (f->tok == TK_RECALLED) {
			set_tok(w, f, TK_NONE);
			f->open_dirty = 0;
			return_token(w, f);
		}
		pthread_cond_broadcast(&w->done);
		return;
	}
	/* Nothing left: give the token back when asked, or when idle. */
	if (f->head)
		goto out; /* a change still being written */
	if (f->children)
		goto out; /* a directory: its last create queues it again */
	if (close_pending(w, f)) {
		/* In the middle of a rewrite whose pages the kernel has not
		 * given us yet: the other client gets it whole at the
		 * close (wb_closed), or as it is after WB_CLOSE_WAIT_MS. */
		f->retry_ms = clock_mono_ms() + 50;
		goto out;
	}
	if (f->must_return || f->tok == TK_RECALLED) {
		int rc;

		f->must_return = 0;
		f->open_dirty = 0;
		if (f->tok == TK_HELD || f->tok == TK_RECALLED)
			set_tok(w, f, TK_NONE);
		if ((rc = return_token(w, f)))
			log_debug("write-back: returning the token of vnode %"
				  PRIu64 ": %s", f->fid.vnode, strerror(-rc));
	}
out:
	pthread_cond_broadcast(&w->done);
}

/* What batch f's next change may go in (ship_batch): a removal (its last
 * change) in a REMOVES, a regular file's creation with first bytes of at
 * most CAIRN_CREATES_DATA_MAX (CAIRN_CREATES_BIG_MAX where the server
 * takes that: HELLO_REP_CREATES_BIG) in a CREATES; written, and not
 * failing. Under lock. */
enum { NB_NONE, NB_REMOVE, NB_CREATE };

/* The first bytes a creation o carries, in bytes. Under lock. */
static size_t first_len(const struct wop *o)
{
	const struct wop *first = first_bytes(o);

	return first ? first->len : 0;
}

static int nb_kind(const struct wb *w, const struct wfile *f)
{
	const struct wop *o = f->head;

	if (!o || !o->ready || f->err || f->nb_solo)
		return NB_NONE;
	if (o->type == JR_REMOVE && o == f->tail && !w->no_removes)
		return NB_REMOVE;
	if (o->type == JR_CREATE && S_ISREG(o->valid) && !w->no_creates &&
	    first_len(o) <= (rpc_hello_flag(w->fs->rpc, HELLO_REP_CREATES_BIG)
			     ? CAIRN_CREATES_BIG_MAX : CAIRN_CREATES_DATA_MAX))
		return NB_CREATE;
	return NB_NONE;
}

/* Must f's change wait for the batch on its way in its directory, to go
 * with the others that gather meanwhile? Under lock. */
static int nb_waits(struct wb *w, const struct wfile *f)
{
	const struct wfile *d;

	if (w->stopping || nb_kind(w, f) == NB_NONE)
		return 0;
	d = *fslot(w, &f->head->parent);
	return d && d->ns_sending;
}

/* Does f, whose hold ended (WB_CREATE_HOLD_MS, WB_CLOSED_HOLD_MS), wait
 * WB_GATHER_MS more for the creations after it in its directory, to go in
 * one CREATES with them? Not once hurried (retry_ms 0: someone needs it)
 * or waited for. Under lock. */
static int gathering(const struct wb *w, const struct wfile *f, int64_t now)
{
	return f->retry_ms && now < f->retry_ms + WB_GATHER_MS &&
	       !f->waiters && !f->must_return && !w->stopping &&
	       nb_kind(w, f) == NB_CREATE;
}

/* When a shipper has to look at f, held back, again: when its hold ends,
 * or, when it will gather then, when its gathering ends (or a full batch
 * of others is ready: next_ready) -- not woken for in between, which
 * would be a wake-up a file while cp -R makes them. Under lock. */
static int64_t wake_at(const struct wb *w, const struct wfile *f)
{
	return f->retry_ms + (gathering(w, f, f->retry_ms) ? WB_GATHER_MS : 0);
}

static struct wfile *unqueue(struct wb *w, struct wfile **p,
			     struct wfile *prev)
{
	struct wfile *f = *p;

	*p = f->qnext;
	if (w->qtail == f)
		w->qtail = prev;
	f->queued = 0;
	f->qnext = NULL;
	return f;
}

/* The next file a shipper should serve, or NULL: one whose retry time
 * came, and whose next change does not wait for others (ns_waits; what
 * it waits for is sent first, and wakes the shippers). A creation that
 * gathers others (gathering) goes once a whole batch of them is ready in
 * its directory, or when its time is up. Under lock. */
static struct wfile *next_ready(struct wb *w)
{
	int64_t now = clock_mono_ms();
	struct wfile **gp = NULL, *gprev = NULL;
	unsigned gn = 0;

	w->wake_ms = 0;
	for (struct wfile **p = &w->qhead, *prev = NULL; *p;
	     prev = *p, p = &(*p)->qnext) {
		struct wfile *f = *p;

		/* busy: being journaled (ns_journal writes a removal of a
		 * file queued to send) or sent; it is taken after that. A
		 * change not written yet (not ready) stops ship_file. */
		if (held_back(w, f, now)) {
			note_wake(w, wake_at(w, f));
			continue;
		}
		if (f->busy || ns_waits(w, f) || nb_waits(w, f))
			continue;
		if (gathering(w, f, now)) {
			note_wake(w, wake_at(w, f));
			if (!gp) {
				gp = p;
				gprev = prev;
			}
			if (!memcmp(&f->head->parent, &(*gp)->head->parent,
				    sizeof(f->head->parent)) &&
			    ++gn >= CAIRN_REMOVES_MAX)
				return unqueue(w, gp, gprev);
			continue;
		}
		return unqueue(w, p, prev);
	}
	return NULL;
}

/* Queue held tokens idle long enough to go back, and files whose retry
 * time came. Under lock. */
static void sweep(struct wb *w)
{
	int64_t now = clock_mono_ms();

	if (!w->held && !w->pending_ops)
		return;
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct wfile *f = w->buckets[i]; f; f = f->hnext) {
			if (f->busy || f->queued)
				continue;
			if (f->head && !f->head->ready)
				continue;
			if ((f->nops && f->retry_ms <= now) ||
			    ((f->must_return || f->tok == TK_RECALLED) &&
			     !f->children))
				enqueue(w, f, 0);
		}
}

/*
 * Give back, in one WRETURN per CAIRN_ORPHAN_DROP_MAX, the tokens held
 * idle for WB_IDLE_RETURN_MS with nothing to send (all of them when
 * stopping). Until the reply, those files are `returning`: a writer waits
 * for it before it asks for the token again, so its grant cannot reach
 * the server before the return that would undo it. Called by a shipper
 * with the lock held; drops it while it calls.
 */
static void return_idle(struct wb *w)
{
	struct cairn_fid fids[CAIRN_ORPHAN_DROP_MAX];
	int64_t now = clock_mono_ms();
	size_t n = 0;
	int rc;

	if (!w->held)
		return;
	for (size_t i = 0; i < w->nbuckets && n < CAIRN_ORPHAN_DROP_MAX; i++)
		for (struct wfile *f = w->buckets[i];
		     f && n < CAIRN_ORPHAN_DROP_MAX; f = f->hnext) {
			if (f->tok != TK_HELD || f->nops || f->busy ||
			    f->queued || f->waiters || f->returning ||
			    f->children ||
			    (!w->stopping &&
			     now - f->last_ms < WB_IDLE_RETURN_MS))
				continue;
			set_tok(w, f, TK_NONE);
			f->returning = 1;
			fids[n++] = f->fid;
		}
	if (!n)
		return;
	pthread_mutex_unlock(&w->lock);
	{
		struct msg_orphan_drop_req q = { .count = (uint32_t)n,
						 .fids = fids };

		rc = fs_rpc(NULL, w->fs, OP_WRETURN, &q, NULL, NULL);
	}
	pthread_mutex_lock(&w->lock);
	if (rc)
		log_debug("write-back: returning %zu idle tokens: %s", n,
			  strerror(-rc));
	else
		w->st.returns += n;
	for (size_t i = 0; i < n; i++) {
		struct wfile *f = *fslot(w, &fids[i]);

		if (f) {
			f->returning = 0;
			file_maybe_free(w, f);
		}
	}
	pthread_cond_broadcast(&w->done);
}

/* Take more FIDs ahead (FIDS) once the pool runs low. Under lock; drops
 * it while it calls. */
static void pool_fill(struct wb *w)
{
	struct msg_fids_req q = { .count = WB_FIDS_AHEAD };
	struct msg_fids_rep p;
	int rc;

	w->pool_busy = 1;
	w->pool_want = 0;
	pthread_mutex_unlock(&w->lock);
	rc = fs_rpc(NULL, w->fs, OP_FIDS, &q, &p, NULL);
	pthread_mutex_lock(&w->lock);
	w->pool_busy = 0;
	if (rc) {
		/* An older server, a read-only export, a server away:
		 * creates go to the server (asked again after a while). */
		log_debug("write-back: no FIDs ahead: %s", strerror(-rc));
		w->pool_failed_ms = clock_mono_ms();
		return;
	}
	if (p.count == 0 || p.count > WB_FIDS_AHEAD ||
	    p.first.vnode > UINT64_MAX - p.count) {
		fs_bad_reply(OP_FIDS);
		return;
	}
	w->pool = p.first;
	w->npool = p.count;
}

/* A shipper is done with f (busy, ours): let it go, queue it again if it
 * has more to send, free it if nothing refers to it. Under lock. */
static void after_ship(struct wb *w, struct wfile *f)
{
	f->busy = 0;
	/* A change still being written queues f when it is done; a
	 * recall that came while we were at it needs another turn. */
	if (f->head && !f->head->ready)
		; /* journal() queues f when that one is written */
	else if ((f->head && !f->err) ||
		 ((f->must_return || f->tok == TK_RECALLED) && !f->children))
		enqueue(w, f, 0);
	file_maybe_free(w, f);
}

/* A batch being sent (ship_batch): its files (busy, ours), their changes
 * (o: the removal or creation, first: a creation's first bytes, nattr
 * attribute changes after them merged in ma), and what became of each. */
struct nbatch {
	int kind;                   /* NB_REMOVE, NB_CREATE */
	int attrs;                  /* some creation has nattr: CREATEATTR */
	unsigned n, sent;
	struct wfile *g[CAIRN_REMOVES_MAX];
	const struct wop *o[CAIRN_REMOVES_MAX];
	const struct wop *first[CAIRN_REMOVES_MAX];
	struct wop ma[CAIRN_CREATES_MAX];
	unsigned nattr[CAIRN_CREATES_MAX];
	int ent[CAIRN_REMOVES_MAX];     /* its entry in the request, or -1 */
	int done[CAIRN_REMOVES_MAX];    /* the server did it */
	uint8_t created[CAIRN_CREATES_MAX]; /* its reply's flags */
	struct cairn_attr a[CAIRN_REMOVES_MAX]; /* a creation's file */
	union {
		struct msg_rment rm[CAIRN_REMOVES_MAX];
		struct msg_cent cr[CAIRN_CREATES_MAX];
		struct msg_centa ca[CAIRN_CREATES_MAX];
	} e;
};
_Static_assert(CAIRN_CREATES_MAX == CAIRN_REMOVES_MAX,
	       "one batch size for both kinds");

/* Creation i of b as a CREATES entry: its record c with name, and its
 * first bytes at data. */
static struct msg_cent create_entry(const struct nbatch *b, unsigned i,
				    const struct msg_str *name,
				    const struct crec *c, const uint8_t *data)
{
	const struct wop *o = b->o[i], *fb = b->first[i];

	return (struct msg_cent){
		.name = *name, .mode = o->valid, .uid = c->uid,
		.gid = c->gid, .flags = CR_EXCL | CR_FID | CR_TOKEN,
		.fid = b->g[i]->fid, .time = o->mtime,
		.data = { data, fb ? fb->len : 0 },
	};
}

/*
 * Read b's records into buf and make the request's entries: those made
 * with the same credentials as the first (*cred, *credlen) and fitting in
 * buf; the others stay out (sent on their own). No lock.
 */
static void batch_entries(struct nbatch *b, uint8_t *buf, const uint8_t **cred,
			  size_t *credlen)
{
	size_t used = 0;

	*cred = NULL;
	*credlen = 0;
	for (unsigned i = 0; i < b->n; i++) {
		const struct wop *o = b->o[i], *fb = b->first[i];
		size_t need = PAD8(o->len) + (fb ? PAD8(fb->len) : 0);
		uint8_t *r = buf + used, *data = r + PAD8(o->len);
		struct crec c;

		b->ent[i] = -1;
		if (used + need > CAIRN_MAX_IO || o->len < sizeof(c) ||
		    pread(o->seg->fd, r, o->len,
			  (off_t)(o->at + sizeof(struct jrec))) !=
		    (ssize_t)o->len ||
		    (fb && pread(fb->seg->fd, data, fb->len,
				 (off_t)(fb->at + sizeof(struct jrec))) !=
		     (ssize_t)fb->len))
			continue;
		memcpy(&c, r, sizeof(c));
		if (sizeof(c) + c.namelen > o->len)
			continue;
		const uint8_t *rcred = r + sizeof(c) + c.namelen;
		size_t rlen = o->len - sizeof(c) - c.namelen;

		if (!*cred) {
			*cred = rcred;
			*credlen = rlen;
		} else if (rlen != *credlen || memcmp(rcred, *cred, rlen)) {
			continue;
		}
		used += need;
		struct msg_str name = { (const char *)r + sizeof(c),
					c.namelen };
		if (b->kind == NB_REMOVE) {
			b->e.rm[b->sent] = (struct msg_rment){
				.name = name, .flags = o->valid,
				.victim = b->g[i]->fid, .time = o->mtime,
			};
		} else {
			struct msg_cent ce = create_entry(b, i, &name, &c, data);

			if (b->attrs)
				b->e.ca[b->sent] = centa(&ce, &b->ma[i],
							 b->nattr[i]);
			else
				b->e.cr[b->sent] = ce;
		}
		b->ent[i] = (int)b->sent++;
	}
}

/* Send b (more than one entry) and note what the server did. No lock. */
static int batch_send(struct wb *w, struct nbatch *b, const uint8_t *cred,
		      size_t credlen)
{
	uint64_t seq = notify_seq(w->fs->ntf);
	const struct cairn_fid *dir = &b->o[0]->parent;
	struct rpc_reply rep;
	int rc;

	if (b->kind == NB_REMOVE) {
		struct msg_removes_req q = { .dir = *dir, .count = b->sent,
					     .ents = b->e.rm };
		struct msg_removes_rep p;

		/* With their times, unless the server takes none. */
		rc = send_removesat(w, cred, credlen, &q, &p, &rep);
		if (rc == -ENOSYS) {
			rpc_reply_free(&rep);
			rc = fs_rpc_cred(w->fs, cred, credlen, OP_REMOVES, &q,
					 &p, &rep);
			if (rc == 0 && p.count != b->sent)
				rc = fs_bad_reply(OP_REMOVES);
		}
		for (unsigned i = 0; !rc && i < b->n; i++) {
			int32_t st = b->ent[i] < 0 ? 1 :
				     msg_removes_status(&p, (uint32_t)b->ent[i]);

			/* -ENOENT: done before (RM_FID). */
			b->done[i] = st == 0 || st == -ENOENT;
		}
		rpc_reply_free(&rep);
		return rc;
	}
	struct msg_creates_req q = { .dir = *dir, .count = b->sent,
				     .ents = b->e.cr };
	struct msg_createattr_req qa = { .dir = *dir, .count = b->sent,
					 .ents = b->e.ca };
	uint16_t op = b->attrs ? OP_CREATEATTR : OP_CREATES;
	struct msg_creates_rep p;
	struct msg_crep e;
	struct rbuf it;
	unsigned k = 0;

	/* (built before the server said no to CREATEATTR: as there) */
	if (b->attrs && __atomic_load_n(&w->no_createattr, __ATOMIC_RELAXED))
		return -ENOSYS;
	if (b->attrs)
		rc = fs_rpc_cred(w->fs, cred, credlen, op, &qa, &p, &rep);
	else
		rc = fs_rpc_cred(w->fs, cred, credlen, op, &q, &p, &rep);
	if (rc == 0 && p.count != b->sent)
		rc = fs_bad_reply(op);
	if (rc) {
		rpc_reply_free(&rep);
		return rc;
	}
	rbuf_init(&it, p.list.p, p.list.len);
	while (k < b->sent && msg_crep_next(&it, &e)) {
		for (unsigned i = 0; i < b->n; i++) {
			const struct wop *fb = b->first[i];
			struct wfile *f = b->g[i];

			if (b->ent[i] != (int)k || e.status)
				continue;
			b->done[i] = 1;
			b->a[i] = e.child;
			b->created[i] = e.created;
			fs_note_attrs(w->fs, seq, &e.child, NULL);
			/* The chunk cache keeps the first bytes (as
			 * send_create). */
			if (fb)
				ccache_created(w, f, &e.child, b->attrs ?
					       b->e.ca[k].c.data.p :
					       b->e.cr[k].data.p, fb->len,
					       (e.created & CREATED_ATTRS) ?
					       b->nattr[i] : 0);
		}
		k++;
	}
	rpc_reply_free(&rep);
	return 0;
}

/* First bytes one batch of creations carries at most: the rest of the
 * request buffer (CAIRN_MAX_IO) is room for the entries' records. */
#define NB_BYTES_MAX (CAIRN_MAX_IO - CAIRN_CREATES_MAX * 8192u)

/*
 * f (busy, ours) is to send a removal or a regular file's creation
 * (nb_kind): take other files queued with one of the same kind in the same
 * directory (busy, ours too) and send all of them in one REMOVES or
 * CREATES, with the credentials of f's (only those made with the same ones
 * go with it). While it is on its way the directory's next ones wait
 * (nb_waits) and gather for the next batch. Each one the server did is
 * done here; every other, and all of them when the call fails, is sent
 * again on its own (nb_solo: by ship_file, with its error handling), and
 * what follows each goes on as any file's. Returns 0 when f's next change
 * is of no such kind (the caller ships f), 1 when f was dealt with here
 * (shipped alone when no other was queued). Under lock; returns with it
 * held; the files taken are done with (after_ship), f is the caller's
 * (queued again by its after_ship).
 */

static int ship_batch(struct wb *w, struct wfile *f, uint8_t *buf)
{
	size_t bytes;
	struct nbatch *b;
	struct cairn_fid parent;
	struct wfile *d;
	const uint8_t *cred;
	size_t credlen;
	int64_t now = clock_mono_ms();
	unsigned scanned = 0;
	int kind = nb_kind(w, f), rc = 0;

	if (kind == NB_NONE)
		return 0;
	parent = f->head->parent;
	if ((d = *fslot(w, &parent)))
		d->ns_sending = 1;
	if (!(b = calloc(1, sizeof(*b)))) {
		ship_file(w, f, buf);
		goto out;
	}
	b->kind = kind;
	b->g[0] = f;
	b->o[0] = f->head;
	b->n = 1;
	bytes = kind == NB_CREATE ? first_len(f->head) : 0;
	for (struct wfile **p = &w->qhead, *prev = NULL;
	     *p && b->n < CAIRN_REMOVES_MAX &&
	     scanned < 4 * CAIRN_REMOVES_MAX;
	     scanned++) {
		struct wfile *h = *p;
		size_t hb = 0;

		if (h->busy || (h->retry_ms > now && !w->stopping) ||
		    nb_kind(w, h) != kind || ns_waits(w, h) ||
		    memcmp(&h->head->parent, &parent, sizeof(parent)) ||
		    (kind == NB_CREATE &&
		     bytes + (hb = first_len(h->head)) > NB_BYTES_MAX)) {
			prev = h;
			p = &h->qnext;
			continue;
		}
		bytes += hb;
		*p = h->qnext;
		if (w->qtail == h)
			w->qtail = prev;
		h->queued = 0;
		h->qnext = NULL;
		h->busy = 1;
		b->g[b->n] = h;
		b->o[b->n++] = h->head;
	}
	if (b->n == 1) {
		ship_file(w, f, buf);
		goto out;
	}
	for (unsigned i = 0; kind == NB_CREATE && i < b->n; i++) {
		b->first[i] = first_bytes(b->o[i]);
		b->nattr[i] = create_attrs(w, b->o[i], b->first[i], &b->ma[i]);
		b->attrs |= b->nattr[i] != 0;
	}
	pthread_mutex_unlock(&w->lock);
	batch_entries(b, buf, &cred, &credlen);
	if (b->sent > 1)
		rc = batch_send(w, b, cred, credlen);
	for (unsigned i = 0; kind == NB_REMOVE && i < b->n; i++)
		if (b->done[i])
			mark_done(w, b->o[i]);
	pthread_mutex_lock(&w->lock);
	if (rc == -ENOSYS && b->attrs) {
		/* Sent again, alone (nb_solo) and as CREATE from now on;
		 * the next batches are CREATES. */
		no_createattr(w);
	} else if (rc == -ENOSYS) {
		log_info("write-back: the server takes no %s; they go one by "
			 "one", kind == NB_REMOVE ? "REMOVES" : "CREATES");
		if (kind == NB_REMOVE)
			w->no_removes = 1;
		else
			w->no_creates = 1;
	}
	if (b->sent > 1 && !rc) {
		if (kind == NB_REMOVE) {
			w->st.remove_batches++;
			w->st.batched += b->sent;
		} else {
			w->st.create_batches++;
			w->st.creates_batched += b->sent;
		}
	}
	for (unsigned i = 0; i < b->n; i++) {
		struct wfile *g = b->g[i];

		if (b->done[i]) {
			CAIRN_ASSERT(g->head == b->o[i]);
			if (kind == NB_CREATE) {
				create_sent(w, g, b->o[i], b->first[i],
					    (b->created[i] & CREATED_ATTRS) ?
					    b->nattr[i] : 0, &b->a[i]);
			} else {
				w->st.sent++;
				g->err = 0;
				g->refusals = 0;
				g->last_ms = clock_mono_ms();
				pop_op(w, g);
			}
		} else {
			/* Its error is for ship_file to handle, alone. */
			g->nb_solo = 1;
		}
		/* What is left (a creation's later changes, the token to give
		 * back; a change the batch did not do) goes to whichever
		 * shipper is free, as any file's: queued again (f by our
		 * caller). */
		if (i > 0)
			after_ship(w, g);
	}
out:
	free(b);
	/* The directory may have been freed and made again meanwhile. */
	if ((d = *fslot(w, &parent)))
		d->ns_sending = 0;
	/* The directory's next ones (nb_waits) go as one batch: one
	 * shipper for them, not all (each woken one takes the lock). */
	if (w->qhead)
		pthread_cond_signal(&w->work);
	pthread_cond_broadcast(&w->done);
	return 1;
}

static void *shipper(void *arg)
{
	struct wb *w = arg;
	uint8_t *buf = malloc(CAIRN_MAX_IO);
	unsigned me;
	int64_t swept = 0;

	pthread_mutex_lock(&w->lock);
	me = w->nthreads++;
	fs_set_call_intr(&w->intr[me]);
	fs_set_shipper();
	while (buf) {
		struct wfile *f;

		if (w->pool_want && !w->pool_busy && !w->stopping)
			pool_fill(w);
		if (clock_mono_ms() - swept >= 200 || w->stopping) {
			sweep(w);
			return_idle(w);
			swept = clock_mono_ms();
		}
		f = next_ready(w);
		if (!f) {
			struct timespec until;

			/* Unmounting: done once nothing is left, or once
			 * wb_stop gave up (stopping 2: a server that does not
			 * take what is left, or tokens it does not take back,
			 * must not hold the unmount up). */
			if (w->stopping > 1 ||
			    (w->stopping && !w->pending_ops && !w->held))
				break;
			/* At the latest when the first file held back may
			 * go (next_ready found it), else a sweep's time. */
			int64_t wait = 200, left = w->wake_ms - clock_mono_ms();

			if (w->wake_ms && left < wait)
				wait = left;
			clock_deadline(CLOCK_REALTIME, wait > 1 ? wait : 1,
				       &until);
			pthread_cond_timedwait(&w->work, &w->lock, &until);
			continue;
		}
		f->busy = 1;
		if (!ship_batch(w, f, buf))
			ship_file(w, f, buf);
		after_ship(w, f);
		if (w->stopping > 1)
			break;
	}
	fs_set_call_intr(NULL);
	pthread_mutex_unlock(&w->lock);
	if (!buf)
		log_error("write-back shipper: out of memory");
	free(buf);
	return NULL;
}

int wb_start(struct wb *w)
{
	int rc;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct wfile *f = w->buckets[i]; f; f = f->hnext)
			if (f->nops)
				enqueue(w, f, 0);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < WB_THREADS; i++) {
		rpc_intr_init(&w->intr[i], w->fs->rpc);
		if ((rc = pthread_create(&w->th[i], NULL, shipper, w))) {
			log_error("cannot start write-back shipper: %s",
				  strerror(rc));
			return -rc;
		}
		w->started++;
	}
	return 0;
}

void wb_stop(struct wb *w)
{
	int64_t t0 = clock_mono_ms(), said = t0, failing_since = 0;
	int64_t tokens_since = 0;
	uint64_t sent = 0;
	size_t held = 0;

	if (!w || !w->started)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = 1;
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct wfile *f = w->buckets[i]; f; f = f->hnext)
			if (f->nops || f->tok == TK_HELD)
				enqueue(w, f, 0);
	pthread_cond_broadcast(&w->work);
	while (w->pending_ops || w->held) {
		struct timespec until;
		int64_t now = clock_mono_ms();
		int failing = 0, refused = 1;

		/* Files the server will not take. ENOSPC and the like are
		 * its answer, not a passing trouble: two seconds of them
		 * without progress are enough. */
		for (size_t i = 0; i < w->nbuckets; i++)
			for (struct wfile *f = w->buckets[i]; f; f = f->hnext)
				if (f->err) {
					failing = 1;
					refused &= refused_error(f->err);
				}
		if (!failing || w->st.sent != sent)
			failing_since = 0;
		else if (!failing_since)
			failing_since = now;
		sent = w->st.sent;
		if (failing_since && now - failing_since >=
		    (refused ? 2000 : WB_STOP_PATIENCE_S * 1000)) {
			log_warn("write-back: the server does not take %zu "
				 "changes (%" PRIu64 " bytes): left in %s for "
				 "the next mount of this cache directory",
				 w->pending_ops, w->pending_bytes, w->dir);
			break;
		}
		/* Nothing left to send, only tokens to give back: a server
		 * that does not take them back drops them itself once this
		 * client's connection ends, and nothing is lost. */
		if (w->pending_ops || w->held != held)
			tokens_since = 0;
		else if (!tokens_since)
			tokens_since = now;
		held = w->held;
		if (tokens_since &&
		    now - tokens_since >= WB_STOP_PATIENCE_S * 1000) {
			log_warn("write-back: everything sent, but %zu write "
				 "tokens could not be given back (the server "
				 "does not answer); it drops them when this "
				 "client's connection ends", w->held);
			break;
		}
		if (now - said >= 5000) {
			log_info("write-back: unmounting; %zu changes (%" PRIu64
				 " bytes) still to send, %zu write tokens to "
				 "give back", w->pending_ops, w->pending_bytes,
				 w->held);
			said = now;
		}
		clock_deadline(CLOCK_REALTIME, 100, &until);
		pthread_cond_timedwait(&w->done, &w->lock, &until);
	}
	if (!w->pending_ops && clock_mono_ms() - t0 > 1000)
		log_info("write-back: everything sent (%.1f s)",
			 (clock_mono_ms() - t0) / 1000.0);
	w->stopping = 2;
	pthread_cond_broadcast(&w->work);
	for (unsigned i = 0; i < w->nthreads; i++)
		rpc_interrupt(&w->intr[i]);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->started; i++)
		pthread_join(w->th[i], NULL);
	w->started = 0;
}

void wb_close(struct wb *w)
{
	if (!w)
		return;
	wb_stop(w);
	if (w->buckets)
		for (size_t i = 0; i < w->nbuckets; i++)
			for (struct wfile *f = w->buckets[i], *n; f; f = n) {
				n = f->hnext;
				for (struct wop *o = f->head, *on; o; o = on) {
					on = o->next;
					free(o);
				}
				for (struct rmname *r = f->rmnames, *rn; r;
				     r = rn) {
					rn = r->next;
					free(r);
				}
				free(f);
			}
	for (struct jseg *s = w->segs, *n; s; s = n) {
		n = s->next;
		close(s->fd);
		/* Nothing pending in it: gone (the last one too). */
		if (!s->live && s->size)
			seg_unlink(w, s);
		else if (!s->size)
			seg_unlink(w, s);
		free(s);
	}
	if (w->lockfd >= 0)
		close(w->lockfd);
	free(w->buckets);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->done);
	free(w);
}

/* --- the FUSE side ------------------------------------------------------- */

/*
 * Make sure we hold fid's token with nothing of an earlier token left
 * (those go first), taking it if need be. Under lock; may drop it.
 * Returns f (token held), or NULL with *rc: -ENOSYS write through.
 */
static struct wfile *hold(struct wb *w, const struct cairn_fid *fid,
			  int *rc)
{
	struct wfile *f;

	for (;;) {
		struct cairn_attr a;
		int r;

		if (!(f = file_get(w, fid))) {
			*rc = -ENOSYS;
			return NULL;
		}
		/* A name of it removed here and not sent yet: nothing may
		 * follow that in the journal (the change would go through,
		 * after it; fs.c's barrier sees to the order). */
		if (f->tail && f->tail->type == JR_REMOVE) {
			*rc = -ENOSYS;
			return NULL;
		}
		if (f->tok == TK_HELD || close_pending(w, f))
			break;
		/* Recalled, or lost with changes left, or being given
		 * back: the shippers sort that out first; wait for them. */
		if (f->tok == TK_RECALLED || f->nops || f->must_return ||
		    f->returning) {
			f->waiters++;
			if (!f->returning)
				enqueue(w, f, 1);
			while ((f->tok == TK_RECALLED || f->nops ||
				f->must_return || f->returning) && !f->err &&
			       !w->stopping)
				pthread_cond_wait(&w->done, &w->lock);
			f->waiters--;
			if (f->err || w->stopping) {
				*rc = -ENOSYS;
				file_maybe_free(w, f);
				return NULL;
			}
			continue;
		}
		/* One grant at a time (another writer of the file asked
		 * already): a recall meanwhile is for that one. */
		if (f->granting) {
			f->waiters++;
			while (f->granting && !w->stopping)
				pthread_cond_wait(&w->done, &w->lock);
			f->waiters--;
			continue;
		}
		f->waiters++;
		f->granting = 1;
		f->recall_early = 0;
		pthread_mutex_unlock(&w->lock);
		r = grant(w, fid, 0, 0, &a);
		pthread_mutex_lock(&w->lock);
		f->waiters--;
		f->granting = 0;
		pthread_cond_broadcast(&w->done);
		if (f->recall_early && r) {
			/* A recall of a token we did not get: answer it as
			 * wb_recall would have. */
			f->must_return = 1;
			f->retry_ms = 0;
			enqueue(w, f, 1);
		}
		if (r) {
			if (r != -EAGAIN && r != -EINVAL)
				log_debug("write-back: no token for vnode %"
					  PRIu64 ": %s", fid->vnode,
					  strerror(-r));
			*rc = wb_gave_up(r) ? r : -ENOSYS;
			file_maybe_free(w, f);
			return NULL;
		}
		w->st.grants++;
		if (!f->recall_early) {
			set_tok(w, f, TK_HELD);
		} else {
			/* Recalled in flight: another client is waiting for
			 * the file. Giving the token back now would make this
			 * change go through on its own, and a rewrite (O_TRUNC,
			 * writes, close) reach that client in pieces. Keep it
			 * as recalled instead: this change is journaled and
			 * sent at once, a rewrite goes on to its close
			 * (close_pending), and then the token goes back. */
			set_tok(w, f, TK_RECALLED);
			f->recalled_ms = clock_mono_ms();
			f->retry_ms = 0;
			enqueue(w, f, 1);
		}
		f->known = 1;
		f->known_dv = a.dv;
		f->known_size = a.size;
		f->tbase = a.dv;
		f->tidx = 0;
		f->psz = 1;
		f->psize = a.size;
		break;
	}
	return f;
}

/* Journal change h (with data) for f. Under lock, f held; drops the lock
 * while writing. */
static int journal(struct wb *w, struct wfile *f, struct jrec *h,
		   const void *data)
{
	struct wop *o;
	struct jseg *s;
	int rc;

	/* In the file's list at once, in the order of the reservations
	 * (the order of tidx), but sent only once written (ready). The
	 * kernel writes different pages of a file at the same time; their
	 * order does not matter, only that the list, the journal and tidx
	 * agree. (Room reserved and never written reads as a gap.) */
	h->tbase = f->tbase;
	h->tidx = f->tidx++;
	if ((rc = op_append(w, f, h, data, &o))) {
		f->tidx--;
		return rc;
	}
	s = o->seg;
	pthread_mutex_unlock(&w->lock);
	rc = rec_write(s, o->at, h, data);
	pthread_mutex_lock(&w->lock);
	if (rc) {
		/* Out of the list; the changes after it move up one. */
		for (struct wop *x = o->next; x; x = x->next)
			if (x->tbase == o->tbase)
				x->tidx--;
		f->tidx--;
		s->full = 1;      /* (drop_op may free s) */
		drop_op(w, f, o);
		pthread_cond_broadcast(&w->done);
		/* Once, not once a write: a full disk fails them all. */
		if (w->through++ == 0)
			log_warn("write-back journal %s: %s; writing through "
				 "to the server until it can be written again",
				 w->dir, strerror(-rc));
		return rc;
	}
	if (w->through) {
		log_info("write-back journal %s: written again (%" PRIu64
			 " changes went through to the server meanwhile)",
			 w->dir, w->through);
		w->through = 0;
	}
	o->ready = 1;
	f->last_ms = clock_mono_ms();
	if (o->type == JR_WRITE && f->psz && o->off + o->len > f->psize)
		f->psize = o->off + o->len;
	if (o->type == JR_ATTR) {
		if (o->valid & SA_SIZE) {
			f->psz = 1;
			f->psize = o->off;
		}
		f->pvalid |= o->valid & PATCHED;
		if (o->valid & SA_MTIME)
			f->pmtime = o->mtime;
		if (o->valid & SA_CTIME)
			f->pctime = o->ctime;
		if (o->valid & SA_ATIME)
			f->patime = o->atime;
		if (o->valid & SA_MODE)
			f->pmode = o->mode;
		if (o->valid & SA_UID)
			f->puid = o->uid;
		if (o->valid & SA_GID)
			f->pgid = o->gid;
	}
	w->st.journaled++;
	w->st.journaled_bytes += o->len;
	enqueue(w, f, 0);
	return 0;
}

/*
 * An attribute change of f, created here, closed and still held back:
 * held WB_CLOSED_HOLD_MS more, within its first hold. rsync sets times,
 * then the mode, then renames, one request after another: on a loaded
 * machine these can be more than WB_CLOSED_HOLD_MS after the close, and
 * the creation would leave before the rename (which then goes to the
 * server too) although each came right after the one before. Not once
 * someone waits for it (hurried: retry_ms 0). Under lock.
 */
static void hold_past_close(struct wb *w, struct wfile *f)
{
	int64_t now = clock_mono_ms(), t = now + WB_CLOSED_HOLD_MS;

	if (!f->closed_hold || f->busy || f->waiters || f->err ||
	    !f->head || f->head->type != JR_CREATE || f->retry_ms <= now)
		return;
	if (t > f->hold_end)
		t = f->hold_end;
	if (t > f->retry_ms)
		f->retry_ms = t;
}

/* Wait while too much is not sent yet. Under lock. */
static void throttle(struct wb *w)
{
	while (w->pending_bytes > WB_PENDING_MAX && !w->stopping)
		pthread_cond_wait(&w->done, &w->lock);
}

int wb_write(struct wb *w, const struct cairn_fid *fid, const char *buf,
	     size_t n, uint64_t off)
{
	struct wfile *f;
	size_t done = 0;
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	throttle(w);
	if (!(f = hold(w, fid, &rc)))
		goto out;
	/* The first change of f to send: held back a moment for the
	 * changes that follow it (WB_WRITE_HOLD_MS), unless someone waits
	 * for f already or it is held back for another reason. */
	if (!f->nops && !f->waiters && !f->retry_ms && f->tok == TK_HELD)
		f->retry_ms = clock_mono_ms() + WB_WRITE_HOLD_MS;
	while (done < n) {
		uint32_t len = n - done > CAIRN_MAX_IO ? CAIRN_MAX_IO
						       : (uint32_t)(n - done);
		struct jrec h;

		rec_fill(&h, JR_WRITE, 0, fid);
		h.len = len;
		h.off = off + done;
		if ((rc = journal(w, f, &h, buf + done)))
			break;
		done += len;
	}
	if (rc && done) {
		/* Part of it is journaled: the rest must follow it, so it
		 * waits for the journal to be sent (wb_drain) first. */
		rc = -ENOSYS;
	} else if (rc) {
		rc = -ENOSYS;
	}
	file_maybe_free(w, f);
out:
	pthread_mutex_unlock(&w->lock);
	if (rc == -ENOSYS && done) {
		/* The caller writes all of it through after the journal:
		 * the journaled part goes twice, the same bytes. */
		wb_drain(w, fid);
	}
	return rc;
}

int wb_setattr(struct wb *w, const struct cairn_fid *fid, uint32_t valid,
	       uint64_t size, const struct cairn_time *mtime,
	       const struct cairn_time *ctime, const struct cairn_time *atime,
	       uint32_t mode, uint32_t uid, uint32_t gid, int rewrite)
{
	struct attrx x = { 0 };
	struct wfile *f;
	struct jrec h;
	int rc = 0;

	valid &= ~(uint32_t)SA_KEEPTIME;
	if (!valid || (valid & ~(uint32_t)(SA_SIZE | SA_MTIME | SA_CTIME |
					   SA_ATIME | SA_MODE | ATTRX_OWNER)))
		return -ENOSYS;
	pthread_mutex_lock(&w->lock);
	/* mtime and ctime alone need no token: unless changes are kept,
	 * they go through (the kernel sends them after its writes). A
	 * size, an atime, permission bits or an owner take it (cp -a, tar,
	 * rsync -a). */
	f = *fslot(w, fid);
	/* A chmod to the bits a file was created with (rsync's fchmod right
	 * after its O_CREAT), while that creation is all the journal holds
	 * of it and is not on its way: nothing to send. The server makes
	 * the file with those bits, later than this change, so its ctime is
	 * no older. Journaled, the change would come between the creation
	 * and its first bytes and keep those out of the CREATE: two
	 * requests a file instead of one. */
	if ((valid & ~(uint32_t)SA_CTIME) == SA_MODE && f && !f->busy &&
	    f->nops == 1 && f->head->type == JR_CREATE &&
	    (f->head->valid & 07777) == (mode & 07777)) {
		w->st.noop_modes++;
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (!(valid & (SA_SIZE | SA_ATIME | SA_MODE | ATTRX_OWNER)) &&
	    !(f && (f->tok == TK_HELD || f->nops))) {
		pthread_mutex_unlock(&w->lock);
		return -ENOSYS;
	}
	throttle(w);
	if (!(f = hold(w, fid, &rc)))
		goto out;
	rec_fill(&h, JR_ATTR, 0, fid);
	h.off = size;
	h.valid = valid;
	if (mtime) {
		h.msec = mtime->sec;
		h.mnsec = mtime->nsec;
	}
	if (ctime) {
		h.csec = ctime->sec;
		h.cnsec = ctime->nsec;
	}
	if (valid & (SA_ATIME | SA_MODE | ATTRX_OWNER)) {
		h.type = JR_ATTRX;
		h.len = (valid & ATTRX_OWNER) ? sizeof(x) : ATTRX_SHORT;
		if (atime) {
			x.asec = atime->sec;
			x.ansec = atime->nsec;
		}
		x.mode = mode & 07777;
		x.uid = uid;
		x.gid = gid;
	}
	rc = journal(w, f, &h, h.len ? &x : NULL) ? -ENOSYS : 0;
	if (rc == 0)
		hold_past_close(w, f);
	/* O_TRUNC begins a rewrite: until its close, a recall waits for
	 * the rest of it (close_pending). truncate(2) has no close to wait
	 * for; changes in place (ftruncate of a database, a log kept open)
	 * do not wait for a close that may never come either: programs that
	 * update in place use locks. */
	if (rc == 0 && (valid & SA_SIZE) && rewrite)
		f->open_dirty = 1;
	file_maybe_free(w, f);
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int wb_dir_setattr(struct wb *w, const struct cairn_fid *dir,
		   uint64_t *dir_dv, uint32_t valid,
		   const struct cairn_time *mtime,
		   const struct cairn_time *ctime,
		   const struct cairn_time *atime, uint32_t mode, uint32_t uid,
		   uint32_t gid)
{
	struct attrx x = { .asec = atime->sec, .ansec = atime->nsec,
			   .mode = mode & 07777, .uid = uid, .gid = gid };
	struct wfile *d;
	struct jrec h;
	int rc;

	valid &= ~(uint32_t)SA_KEEPTIME;
	if (!w || !(valid & SA_CTIME) ||
	    (valid & ~(uint32_t)(SA_MTIME | SA_CTIME | SA_ATIME | SA_MODE |
				 ATTRX_OWNER)))
		return -ENOSYS;
	pthread_mutex_lock(&w->lock);
	throttle(w);
	d = *fslot(w, dir);
	/* Only while its token is ours, and not after its removal. */
	if (!d || d->tok != TK_HELD || w->stopping ||
	    (d->tail && d->tail->type == JR_REMOVE)) {
		pthread_mutex_unlock(&w->lock);
		return -EAGAIN;
	}
	rec_fill(&h, JR_ATTRX, 0, dir);
	h.valid = valid | JR_VALID_DIR;
	h.len = (valid & ATTRX_OWNER) ? sizeof(x) : ATTRX_SHORT;
	h.msec = mtime->sec;
	h.mnsec = mtime->nsec;
	h.csec = ctime->sec;
	h.cnsec = ctime->nsec;
	/* d stays: the change is in its list before the lock is dropped
	 * to write it. */
	rc = journal(w, d, &h, &x);
	if (rc == 0) {
		/* One version step of the directory, as ns_journal counts
		 * its creates and removes. */
		if ((!d->children && d->nops == 1) || d->ldv < *dir_dv)
			d->ldv = *dir_dv;
		*dir_dv = ++d->ldv;
		d->last_ms = clock_mono_ms();
	}
	file_maybe_free(w, d);
	pthread_mutex_unlock(&w->lock);
	return rc ? -EAGAIN : 0;
}

/* wb_drain; with sync, also 1 when the last change went durable
 * (wb_sync). */
static int drain(struct wb *w, const struct cairn_fid *fid, int sync)
{
	struct wfile *f;
	unsigned fails;
	int rc = 0;

	if (!w || !__atomic_load_n(&w->pending_ops, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, fid);
	if (!f || !f->nops) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	f->waiters++;
	f->sync_waiters += sync;
	f->retry_ms = 0;
	enqueue(w, f, 1);
	pthread_cond_signal(&w->work); /* queued already: wake a shipper */
	/* An error from before we came (the server was away a moment ago)
	 * says nothing yet: we asked for a new try; its outcome counts. */
	fails = f->fails;
	while (f->nops && !w->stopping) {
		if (f->err && !f->busy && f->fails != fails) {
			rc = f->err;
			break;
		}
		pthread_cond_wait(&w->done, &w->lock);
	}
	if (f->nops && !rc)
		rc = -EIO;
	if (!rc && sync)
		rc = f->synced;
	f->waiters--;
	f->sync_waiters -= sync;
	file_maybe_free(w, f);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int wb_drain(struct wb *w, const struct cairn_fid *fid)
{
	return drain(w, fid, 0);
}

int wb_sync(struct wb *w, const struct cairn_fid *fid)
{
	return drain(w, fid, 1);
}

void wb_created(struct wb *w, const struct cairn_fid *fid, uint64_t dv,
		uint64_t size)
{
	struct wfile *f;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	/* A recall that came before this reply was answered already
	 * (must_return; the wfile may be gone since): not ours. */
	for (unsigned i = 0; i < w->nunheld && i < 64; i++)
		if (w->unheld[i].vnode == fid->vnode &&
		    w->unheld[i].uniq == fid->uniq &&
		    w->unheld[i].vol == fid->vol) {
			pthread_mutex_unlock(&w->lock);
			return;
		}
	f = file_get(w, fid);
	if (f && !f->recalls && f->tok == TK_NONE && !f->nops) {
		set_tok(w, f, TK_HELD);
		f->known = 1;
		f->known_dv = dv;
		f->known_size = size;
		f->tbase = dv;
		f->tidx = 0;
		f->psz = 1;
		f->psize = size;
		f->last_ms = clock_mono_ms();
		w->st.grants++;
	}
	pthread_mutex_unlock(&w->lock);
}

/* Creates and writes held back (WB_CREATE_HOLD_MS, WB_WRITE_HOLD_MS)
 * that a waiting request needs: send them now. Under lock. */
static void hurry_one(struct wb *w, struct wfile *f)
{
	if (f && f->retry_ms && f->head && !f->err &&
	    (f->head->type == JR_CREATE || f->head->type == JR_WRITE)) {
		f->retry_ms = 0;
		pthread_cond_signal(&w->work);
	}
}

/* f, held back, goes at most ms from now. Under lock. */
static void hold_at_most(struct wb *w, struct wfile *f, int ms)
{
	int64_t t = clock_mono_ms() + ms;

	if (f->retry_ms > t && !f->err) {
		f->retry_ms = t;
		if (f->queued && note_wake(w, wake_at(w, f)))
			pthread_cond_signal(&w->work);
	}
}

/* A directory's held creates. Under lock. */
static void hurry_dir(struct wb *w, const struct wfile *d)
{
	if (!d || !d->children)
		return;
	for (size_t b = 0; b < w->nbuckets; b++)
		for (struct wfile *g = w->buckets[b]; g; g = g->hnext)
			if (g->head && g->head->type == JR_CREATE &&
			    g->head->parent.vnode == d->fid.vnode)
				hurry_one(w, g);
}

void wb_recall(void *arg, const struct cairn_fid *fid)
{
	struct wb *w = arg;
	struct wfile *f;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->st.recalls++;
	w->recall_ms = clock_mono_ms();
	if ((f = file_get(w, fid))) {
		f->recalls++;
		if (f->tok == TK_HELD) {
			set_tok(w, f, TK_RECALLED);
			f->recalled_ms = clock_mono_ms();
			hurry_dir(w, f); /* its return waits for them */
		} else if (f->granting) {
			/* For the token on its way to hold(), which keeps it
			 * as recalled (or answers this if it gets none). */
			f->recall_early = 1;
			pthread_mutex_unlock(&w->lock);
			return;
		} else if (f->tok != TK_RECALLED) {
			f->must_return = 1;
			w->unheld[w->nunheld++ % 64] = *fid;
		}
		f->retry_ms = 0;
		enqueue(w, f, 1);
	} else {
		log_error("write-back: out of memory for the recall of vnode %"
			  PRIu64 "; the server revokes it", fid->vnode);
	}
	pthread_mutex_unlock(&w->lock);
}

static void hurry(struct wb *w, const struct cairn_fid *const *fids,
		  const struct cairn_fid *list, size_t n)
{
	if (!fids && !list) {
		for (size_t i = 0; i < w->nbuckets; i++)
			for (struct wfile *f = w->buckets[i]; f; f = f->hnext)
				hurry_one(w, f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct wfile *f = *fslot(w, fids ? fids[i] : &list[i]);

		hurry_one(w, f);
		hurry_dir(w, f);
	}
}

void wb_closed(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile *f;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->closes_seen = 1;
	/* Its writes held back for the times after them go now. A file
	 * created here stays held a little longer (WB_CLOSED_HOLD_MS):
	 * what programs do right after the close (rsync's and cp -a's
	 * times and modes, a rename to the final name) goes with its
	 * creation, or instead of a request of its own. But not while
	 * another client works with what we hold (a recall lately): it
	 * is likely to look at the file next, and would wait for it. */
	if ((f = *fslot(w, fid)) && f->head) {
		if (f->head->type != JR_CREATE ||
		    (w->recall_ms &&
		     clock_mono_ms() - w->recall_ms < WB_SHARED_MS))
			hurry_one(w, f);
		else {
			hold_at_most(w, f, WB_CLOSED_HOLD_MS);
			f->closed_hold = 1;
		}
	}
	if (f && f->open_dirty) {
		f->open_dirty = 0;
		if (f->tok == TK_RECALLED) {
			f->retry_ms = 0;
			enqueue(w, f, 1);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

int wb_return_begin(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile *f;
	int ret = 0;

	if (!w || !__atomic_load_n(&w->held, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, fid);
	if (f && f->tok == TK_HELD && !f->nops && !f->busy && !f->queued &&
	    !f->waiters && !f->returning && !f->must_return) {
		set_tok(w, f, TK_NONE);
		f->returning = 1;
		f->open_dirty = 0;
		ret = 1;
	}
	pthread_mutex_unlock(&w->lock);
	return ret;
}

void wb_return_end(struct wb *w, const struct cairn_fid *fid, int ok)
{
	struct wfile *f;

	pthread_mutex_lock(&w->lock);
	if ((f = *fslot(w, fid))) {
		f->returning = 0;
		if (ok)
			w->st.returns++;
		file_maybe_free(w, f);
	}
	pthread_cond_broadcast(&w->done);
	pthread_mutex_unlock(&w->lock);
}

int wb_busy(struct wb *w)
{
	return w && (__atomic_load_n(&w->pending_ops, __ATOMIC_RELAXED) ||
		     __atomic_load_n(&w->held, __ATOMIC_RELAXED));
}

/* wb_patch of a with f's changes (f may be NULL). Under lock. */
static void patch(const struct wfile *f, struct cairn_attr *a)
{
	int reg = S_ISREG(a->mode);

	/* A copy older than our last change's reply: the tables had it
	 * before that reply, and the change has left the journal since. */
	if (reg && f && f->sent_ok && f->sent.fid.uniq == a->fid.uniq &&
	    a->dv < f->sent.dv)
		*a = f->sent;
	if (f && f->nops) {
		uint64_t est = a->blocks + (f->bytes + 511) / 512;
		uint64_t whole = ((f->psz ? f->psize : a->size) + 511) / 512;

		/* Blocks: the server's and the bytes not sent yet, as if
		 * none overwrote another, but no more than the size holds
		 * (a sparse file written here stays sparse for du). */
		if (reg)
			a->blocks = est < whole ? est
				    : whole > a->blocks ? whole : a->blocks;
		if (reg && f->psz)
			a->size = f->psize;
		if (f->pvalid & SA_MTIME)
			a->mtime = f->pmtime;
		if (f->pvalid & SA_CTIME)
			a->ctime = f->pctime;
		if (f->pvalid & SA_ATIME)
			a->atime = f->patime;
		if (f->pvalid & SA_MODE)
			a->mode = (a->mode & S_IFMT) | f->pmode;
		if (f->pvalid & SA_UID)
			a->uid = f->puid;
		if (f->pvalid & SA_GID)
			a->gid = f->pgid;
	}
}

void wb_patch(struct wb *w, struct cairn_attr *a)
{
	if (!wb_busy(w))
		return;
	pthread_mutex_lock(&w->lock);
	patch(*fslot(w, &a->fid), a);
	pthread_mutex_unlock(&w->lock);
}

void wb_attr_seen(struct wb *w, const struct cairn_attr *a)
{
	struct wfile *f;

	if (!w || !__atomic_load_n(&w->held, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, &a->fid);
	/* Nothing of ours in flight: the server's version is where the
	 * next change starts (our own chmod or xattr moved it too). */
	if (f && f->tok == TK_HELD && !f->nops && !f->busy &&
	    a->dv > f->tbase + f->tidx) {
		f->tbase = a->dv;
		f->tidx = 0;
	}
	pthread_mutex_unlock(&w->lock);
}

/*
 * Without this, a token lost with changes left (a server restart, a
 * broken connection) would be taken again at a version the server has
 * passed by our own hand, and the changes kept as a conflict copy
 * instead of sent: rsync's chmod of a file it had just renamed into
 * place was lost that way. The numbering moves in memory only: a journal
 * that the next mount replays after a crash still counts from before,
 * which can make it keep a conflict copy it did not need, never lose
 * one. A change begun while fid had nothing here (no change kept, no
 * token) is not counted: a token taken while it is on its way starts
 * from a version that may or may not include it, so the numbering may
 * then be one short, which costs a needless conflict copy only if that
 * token is lost with changes left.
 */
int wb_move_begin(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile *f;
	int begun = 0;

	if (!w || (!__atomic_load_n(&w->held, __ATOMIC_RELAXED) &&
		   !__atomic_load_n(&w->pending_ops, __ATOMIC_RELAXED)))
		return 0;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, fid);
	if (f && (f->nops || f->tok == TK_HELD || f->tok == TK_RECALLED)) {
		f->moving++;
		begun = 1;
	}
	pthread_mutex_unlock(&w->lock);
	return begun;
}

void wb_move_end(struct wb *w, const struct cairn_fid *fid, int begun,
		 int applied)
{
	struct wfile *f;

	if (!begun)
		return;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, fid);
	CAIRN_ASSERT(f && f->moving);
	f->moving--;
	if (applied) {
		for (struct wop *o = f->head; o; o = o->next)
			o->tbase++;
		f->tbase++;
		f->moved++;
	}
	/* A retake put off for the move may go now (not a retry put off
	 * after an error: f->err). */
	if (!f->moving && f->retry_ms && f->nops && !f->err) {
		f->retry_ms = 0;
		pthread_cond_signal(&w->work);
	}
	file_maybe_free(w, f);
	pthread_mutex_unlock(&w->lock);
}

void wb_reconnected(void *arg)
{
	struct wb *w = arg;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->nbuckets; i++)
		for (struct wfile *f = w->buckets[i]; f; f = f->hnext) {
			if (f->tok != TK_HELD && f->tok != TK_RECALLED)
				continue;
			set_tok(w, f, f->nops ? TK_LOST : TK_NONE);
			f->must_return = 0;
			if (f->nops)
				enqueue(w, f, 1);
		}
	pthread_mutex_unlock(&w->lock);
}

int wb_fid_take(struct wb *w, struct cairn_fid *out)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&w->lock);
	if (w->npool) {
		*out = w->pool;
		w->pool.vnode++;
		w->npool--;
		rc = 0;
	}
	if (w->npool < WB_FIDS_AHEAD / 4 && !w->pool_busy && !w->pool_want &&
	    clock_mono_ms() - w->pool_failed_ms >= 1000) {
		w->pool_want = 1;
		pthread_cond_signal(&w->work);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* Does anything the journal holds for fid have to reach the server
 * before a request naming it: its creation, or creates in it (a
 * directory)? Under lock. */
static int ns_pending(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile *f = *fslot(w, fid);

	if (!f)
		return 0;
	if (f->children || (f->head && f->head->type == JR_CREATE) ||
	    (f->tail && f->tail->type == JR_REMOVE))
		return 1;
	/* A directory's attributes changed here: a change in it the server
	 * makes now would come before them. */
	for (const struct wop *o = f->head; o; o = o->next)
		if (o->dirattr)
			return 1;
	return 0;
}

/* fids[0..n) by pointer, or list[0..n) (fids NULL), or everything
 * (both NULL). */
static int barrier_holds(struct wb *w, const struct cairn_fid *const *fids,
			 const struct cairn_fid *list, size_t n)
{
	if (!fids && !list)
		return w->ncreates != 0;
	for (size_t i = 0; i < n; i++)
		if (ns_pending(w, fids ? fids[i] : &list[i]))
			return 1;
	return 0;
}

static void barrier(struct wb *w, const struct cairn_fid *const *fids,
		    const struct cairn_fid *list, size_t n)
{
	struct timespec until;
	int64_t t0;

	pthread_mutex_lock(&w->lock);
	if (!w->ncreates || !w->started ||
	    !barrier_holds(w, fids, list, n)) {
		pthread_mutex_unlock(&w->lock);
		return;
	}
	t0 = clock_mono_ms();
	hurry(w, fids, list, n);
	clock_deadline(CLOCK_REALTIME, WB_BARRIER_MS, &until);
	while (barrier_holds(w, fids, list, n) && !w->stopping &&
	       pthread_cond_timedwait(&w->done, &w->lock, &until) !=
	       ETIMEDOUT)
		;
	if (barrier_holds(w, fids, list, n) && !w->stopping)
		log_warn("write-back: %zu creates and removes answered here "
			 "are not on the server after %lld ms; a request that "
			 "may depend on one goes ahead", w->ncreates,
			 (long long)(clock_mono_ms() - t0));
	pthread_mutex_unlock(&w->lock);
}

void wb_barrier(struct wb *w, const struct cairn_fid *const *fids, int n)
{
	barrier(w, fids, NULL, fids ? (size_t)n : 0);
}

void wb_barrier_list(struct wb *w, const struct cairn_fid *fids, size_t n)
{
	barrier(w, NULL, fids, n);
}

int wb_removal_last(struct wb *w, const struct cairn_fid *fid,
		    struct cairn_attr *a)
{
	struct wfile *f;
	int rc;

	if (!w || !__atomic_load_n(&w->pending_ops, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, fid);
	rc = f && f->tail && f->tail->type == JR_REMOVE;
	if (rc)
		patch(f, a);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int wb_holds(struct wb *w, const struct cairn_fid *fid)
{
	struct wfile *f;
	int rc;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	f = *fslot(w, fid);
	rc = f && f->tok == TK_HELD;
	pthread_mutex_unlock(&w->lock);
	return rc;
}

size_t wb_held(void *arg, struct cairn_fid **out)
{
	struct wb *w = arg;
	struct cairn_fid *v;
	size_t n = 0;

	*out = NULL;
	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	v = malloc((w->nfiles ? w->nfiles : 1) * sizeof(*v));
	for (size_t i = 0; v && i < w->nbuckets; i++)
		for (struct wfile *f = w->buckets[i]; f; f = f->hnext)
			if (f->tok == TK_HELD)
				v[n++] = f->fid;
	pthread_mutex_unlock(&w->lock);
	*out = v;
	return v ? n : 0;
}

int wb_dir_token(struct wb *w, const struct cairn_fid *dir,
		 const void *cred, size_t credlen)
{
	struct msg_wtoken_req q = { .fid = *dir };
	struct msg_attr p;
	struct wfile *d;
	uint64_t recalls;
	int rc;

	pthread_mutex_lock(&w->lock);
	if (!(d = file_get(w, dir))) {
		pthread_mutex_unlock(&w->lock);
		return -ENOMEM;
	}
	if (d->tok == TK_HELD) {
		d->last_ms = clock_mono_ms();
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (d->tok != TK_NONE || d->must_return || d->returning || d->busy ||
	    d->queued || d->waiters || w->stopping ||
	    clock_mono_ms() - d->denied_ms < WB_DIR_RETRY_MS) {
		rc = -EAGAIN;
		goto out;
	}
	recalls = d->recalls;
	d->waiters++;
	pthread_mutex_unlock(&w->lock);
	rc = fs_rpc_cred(w->fs, cred, credlen, OP_WTOKEN, &q, &p, NULL);
	pthread_mutex_lock(&w->lock);
	d->waiters--;
	if (rc) {
		d->denied_ms = clock_mono_ms();
		goto out;
	}
	w->st.dir_grants++;
	if (d->recalls != recalls) {
		/* Recalled in flight: wb_recall queued its return. */
		rc = -EAGAIN;
		goto out;
	}
	set_tok(w, d, TK_HELD);
	d->last_ms = clock_mono_ms();
out:
	file_maybe_free(w, d);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/*
 * Start a JR_CREATE or JR_REMOVE record h for fid in directory dir: its
 * data (struct crec, the name, the credential block) malloc'd into *data.
 */
static int ns_record(struct jrec *h, uint8_t type, const struct cairn_fid *fid,
		     const struct cairn_fid *dir, const char *name, size_t len,
		     uint32_t uid, uint32_t gid, const void *cred,
		     size_t credlen, uint8_t **data)
{
	struct crec c = {
		.pvol = dir->vol, .puniq = dir->uniq, .pvnode = dir->vnode,
		.uid = uid, .gid = gid, .namelen = (uint16_t)len,
	};
	size_t dlen = sizeof(c) + len + credlen;

	if (len == 0 || len > CAIRN_NAME_MAX || credlen > 4096)
		return -EINVAL;
	if (!(*data = malloc(dlen)))
		return -ENOMEM;
	memcpy(*data, &c, sizeof(c));
	memcpy(*data + sizeof(c), name, len);
	if (credlen)
		memcpy(*data + sizeof(c) + len, cred, credlen);
	rec_fill(h, type, 0, fid);
	h->len = (uint32_t)dlen;
	return 0;
}

/*
 * Journal namespace change h (ns_record) as f's last change, in
 * directory d whose token we hold: written, queued, and counted as one
 * version step of d (*dir_dv: the directory's version as known, then
 * with this change; in journal order, so that concurrent changes get
 * different versions; with none outstanding the caller's is the
 * server's). Under lock; dropped while writing. On failure nothing of it
 * is left.
 */
static int ns_journal(struct wb *w, struct wfile *d, struct wfile *f,
		      struct jrec *h, const uint8_t *data, const char *name,
		      size_t len, uint64_t *dir_dv)
{
	struct wop *o;
	int mine, rc;

	if ((rc = op_append(w, f, h, data, &o)))
		return rc;
	o->parent = d->fid;
	ns_pending_add(w, &d->fid, o, name, len);
	/* Nobody sends it before it is written: it is not ready, and the
	 * file is busy unless a shipper is sending an earlier change of it
	 * now (a removal of a file just written), which then stops at it. */
	mine = !f->busy;
	if (mine)
		f->busy = 1;
	pthread_mutex_unlock(&w->lock);
	rc = rec_write(o->seg, o->at, h, data);
	pthread_mutex_lock(&w->lock);
	if (mine)
		f->busy = 0;
	if (rc) {
		log_warn("write-back journal %s: %s; sent to the server "
			 "instead", w->dir, strerror(-rc));
		drop_op(w, f, o);
		pthread_cond_broadcast(&w->done);
		/* Not the write's error: a short write is -EIO, which the
		 * caller would take for a server out of reach (wb_gave_up)
		 * and fail the create with (a full cache disk failed
		 * open(O_CREAT) with EIO). */
		return -EAGAIN;
	}
	o->ready = 1;
	f->last_ms = d->last_ms = clock_mono_ms();
	if (d->children == 1 || d->ldv < *dir_dv)
		d->ldv = *dir_dv;
	*dir_dv = ++d->ldv;
	w->st.journaled++;
	/* Queued already (a shipper skipped it while it was busy): wake
	 * one for it. */
	if (f->queued)
		pthread_cond_signal(&w->work);
	enqueue(w, f, 0);
	return 0;
}

int wb_create(struct wb *w, const struct cairn_fid *dir, uint64_t *dir_dv,
	      const char *name, size_t len, const struct cairn_attr *a,
	      const void *cred, size_t credlen)
{
	struct wfile *d, *f;
	uint8_t *data;
	struct jrec h;
	int rc;

	if ((rc = ns_record(&h, JR_CREATE, &a->fid, dir, name, len, a->uid,
			    a->gid, cred, credlen, &data)))
		return rc;
	h.valid = a->mode;
	h.msec = a->mtime.sec;
	h.mnsec = a->mtime.nsec;
	h.tbase = a->dv;
	h.tidx = UINT64_MAX;
	pthread_mutex_lock(&w->lock);
	d = *fslot(w, dir);
	/* Only while the directory's token is ours, and for a FID nobody
	 * has used here. */
	if (!d || d->tok != TK_HELD || w->stopping || *fslot(w, &a->fid)) {
		rc = -EAGAIN;
	} else if (!(f = file_get(w, &a->fid))) {
		rc = -ENOMEM;
	} else {
		/* Held back before it is queued (no shipper woken for it):
		 * a file's creation is sent after WB_CREATE_HOLD_MS, with
		 * its first bytes and the attribute changes after them in
		 * the same CREATEATTR, or once a request needs it
		 * (wb_barrier). A directory's at once: what is made in it
		 * waits for it (next_ready). */
		f->retry_ms = S_ISDIR(a->mode) ? 0
			      : clock_mono_ms() + WB_CREATE_HOLD_MS;
		f->hold_end = f->retry_ms;
		if ((rc = ns_journal(w, d, f, &h, data, name, len, dir_dv))) {
			file_maybe_free(w, f);
		} else {
			/* The file's token is ours from the start: nobody
			 * else can know it before its creation reaches the
			 * server. */
			set_tok(w, f, TK_HELD);
			f->known = 1;
			f->known_dv = a->dv;
			f->known_size = 0;
			f->tbase = a->dv;
			f->tidx = 0;
			f->psz = 1;
			f->psize = 0;
			w->st.creates++;
		}
	}
	pthread_mutex_unlock(&w->lock);
	free(data);
	return rc;
}

int wb_remove(struct wb *w, const struct cairn_fid *dir, uint64_t *dir_dv,
	      const char *name, size_t len, const struct cairn_fid *victim,
	      uint32_t flags, const struct cairn_time *when, const void *cred,
	      size_t credlen)
{
	struct wfile *d, *f = NULL;
	uint8_t *data;
	struct jrec h;
	int rc;

	if (flags & ~(uint32_t)(RM_KEEP | RM_SELF | RM_DIR))
		return -EINVAL;
	if ((rc = ns_record(&h, JR_REMOVE, victim, dir, name, len, 0, 0, cred,
			    credlen, &data)))
		return rc;
	h.valid = flags;
	h.msec = when->sec;
	h.mnsec = when->nsec;
	pthread_mutex_lock(&w->lock);
	/* A file being sent now (what dbench and rm do to a file just
	 * written) takes its removal behind the change on its way. */
	f = file_get(w, victim);
	d = *fslot(w, dir);
	/* Only while the directory's token is ours. Nothing after a
	 * removal in a file's journal: one pending is enough (its other
	 * names go to the server). */
	if (!d || d->tok != TK_HELD || w->stopping || !f || f->err ||
	    (f->tail && f->tail->type == JR_REMOVE) ||
	    ((flags & RM_DIR) && f->tok != TK_HELD)) {
		rc = -EAGAIN;
	} else {
		/* No version step of the file: load_record continues from
		 * here. */
		h.tbase = f->tbase;
		h.tidx = f->tidx - 1;
		if (!(rc = ns_journal(w, d, f, &h, data, name, len, dir_dv)))
			w->st.removes++;
	}
	if (rc && f)
		file_maybe_free(w, f);
	pthread_mutex_unlock(&w->lock);
	free(data);
	return rc;
}

int wb_rename_created(struct wb *w, const struct cairn_fid *dir,
		      const struct cairn_fid *fid, const char *name,
		      size_t len)
{
	struct wfile *d, *f;
	struct wop *o;
	struct jseg *s, *old;
	struct jrec h;
	struct crec c;
	uint8_t *odata = NULL, *data = NULL;
	uint32_t olen, hash = name_hash(name, len);
	uint64_t at;
	int rc = -EAGAIN;

	if (len == 0 || len > CAIRN_NAME_MAX)
		return -EINVAL;
	pthread_mutex_lock(&w->lock);
	d = *fslot(w, dir);
	f = *fslot(w, fid);
	/* Not while anything could see the old name on the server: a send
	 * of the file tried (it may have arrived), or on its way; nor with
	 * an attribute change of the directory or a removal of the name
	 * pending, which are ordered by journal position (ns_waits). */
	if (!d || d->tok != TK_HELD || w->stopping || !f ||
	    f->busy || f->err || f->fails || !(o = f->head) ||
	    o->type != JR_CREATE || !o->ready ||
	    memcmp(&o->parent, dir, sizeof(*dir)))
		goto out;
	for (struct wop *p = d->head; p; p = p->next)
		if (p->dirattr)
			goto out;
	for (struct rmname *r = d->rmnames; r; r = r->next)
		if (r->hash == hash)
			goto out;
	/* The record as written, with the name replaced. */
	olen = o->len;
	if (olen < sizeof(c) || !(odata = malloc(olen)) ||
	    pread(o->seg->fd, &h, sizeof(h), (off_t)o->at) != sizeof(h) ||
	    h.magic != JR_MAGIC || h.seq != o->seq || h.type != JR_CREATE ||
	    h.len != olen ||
	    pread(o->seg->fd, odata, olen, (off_t)(o->at + sizeof(h))) !=
		    (ssize_t)olen)
		goto out;
	memcpy(&c, odata, sizeof(c));
	if (c.namelen > olen - sizeof(c) ||
	    !(data = malloc(olen - c.namelen + len)))
		goto out;
	memcpy(data + sizeof(c) + len, odata + sizeof(c) + c.namelen,
	       olen - sizeof(c) - c.namelen);
	h.len = (uint32_t)(olen - c.namelen + len);
	c.namelen = (uint16_t)len;
	memcpy(data, &c, sizeof(c));
	memcpy(data + sizeof(c), name, len);
	if ((rc = reserve(w, h.len, &s, &at)))
		goto out;
	h.seq = ++w->seq;
	/* Keep shippers off f while the new record is written. */
	f->busy = 1;
	s->live++;
	pthread_mutex_unlock(&w->lock);
	rc = rec_write(s, at, &h, data);
	pthread_mutex_lock(&w->lock);
	f->busy = 0;
	if (rc) {
		/* Room reserved and never written reads as a gap. */
		s->live--;
		seg_maybe_drop(w, s);
		if (f->queued)
			pthread_cond_signal(&w->work);
		goto out;
	}
	/* The new record first, then the old one done: a daemon stopped
	 * between the two leaves both, and loading takes the later
	 * (load_record). */
	mark_done(w, o);
	old = o->seg;
	o->seg = s;
	o->at = at;
	o->seq = h.seq;
	o->len = h.len;
	o->nhash = hash;
	f->bytes += (uint64_t)h.len - olen;
	w->pending_bytes += (uint64_t)h.len - olen;
	old->live--;
	seg_maybe_drop(w, old);
	f->last_ms = d->last_ms = clock_mono_ms();
	w->st.renamed++;
	if (f->queued)
		pthread_cond_signal(&w->work);
out:
	pthread_mutex_unlock(&w->lock);
	free(odata);
	free(data);
	return rc;
}

void wb_print_stats(void *arg, FILE *f)
{
	struct wb *w = arg;
	struct wb_stats s;
	size_t ops, held, files;
	uint64_t bytes;

	if (!w) {
		fprintf(f, "wb.enabled 0\n");
		return;
	}
	pthread_mutex_lock(&w->lock);
	s = w->st;
	ops = w->pending_ops;
	bytes = w->pending_bytes;
	held = w->held;
	files = w->nfiles;
	pthread_mutex_unlock(&w->lock);
	fprintf(f, "wb.enabled 1\nwb.journal %s\nwb.pending_changes %zu\n"
		"wb.pending_bytes %" PRIu64 "\nwb.files %zu\nwb.tokens %zu\n"
		"wb.journaled %" PRIu64 "\nwb.journaled_bytes %" PRIu64 "\n"
		"wb.sent %" PRIu64 "\nwb.sent_bytes %" PRIu64 "\n"
		"wb.grants %" PRIu64 "\nwb.returns %" PRIu64 "\n"
		"wb.recalls %" PRIu64 "\nwb.conflicts %" PRIu64 "\n"
		"wb.dropped %" PRIu64 "\nwb.errors %" PRIu64 "\n"
		"wb.replayed %" PRIu64 "\nwb.creates %" PRIu64 "\n"
		"wb.dir_grants %" PRIu64 "\nwb.removes %" PRIu64 "\n"
		"wb.remove_batches %" PRIu64 "\nwb.removes_batched %" PRIu64
		"\nwb.create_batches %" PRIu64 "\nwb.creates_batched %" PRIu64
		"\nwb.attrs_merged %" PRIu64 "\nwb.renamed_here %" PRIu64
		"\nwb.noop_modes %" PRIu64 "\n", w->dir,
		ops, bytes, files, held, s.journaled, s.journaled_bytes,
		s.sent, s.sent_bytes, s.grants, s.returns, s.recalls,
		s.conflicts, s.dropped, s.errors, s.replayed, s.creates,
		s.dir_grants, s.removes, s.remove_batches, s.batched,
		s.create_batches, s.creates_batched, s.merged, s.renamed,
		s.noop_modes);
}

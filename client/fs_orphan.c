/*
 * fs_orphan.c - telling the server when an unlinked file is no longer
 * used here (see fs_int.h).
 *
 * With no_open the kernel sends neither OPEN nor RELEASE, so an unlink
 * cannot know whether the file is open. Every unlink (and rename over a
 * name) of a file the kernel knows therefore asks the server to keep the
 * file as an orphan held by this client (RM_KEEP, RN_KEEP) and marks the
 * inode (itab_set_orphan). The kernel forgets an unlinked inode after its
 * last close; fs_forget then queues its FID here, and one thread sends
 * them in batches (ORPHAN_DROP, up to CAIRN_ORPHAN_DROP_MAX FIDs, after waiting
 * ORPHAN_GATHER_MS for more: an `rm -rf` of a tree costs a few messages,
 * not one per file). Nobody waits for it: the unlink has returned long
 * before. A FID that still has links, or was never made an orphan, is
 * ignored by the server, so marking too much costs nothing.
 *
 * Another client's unlink of a file we held a promise on makes us one of
 * its holders too (CB_BREAK record flag CB_ORPHANED, notify.c calls
 * fs_orphan_hook): the inode is marked the same way if the kernel knows
 * it (it may have it open), else its FID is queued at once.
 *
 * A batch that cannot be sent (connection down) is kept and tried again
 * every ORPHAN_RETRY_MS. At unmount every marked inode the kernel still
 * held is dropped too (nothing is open any more). What never reaches the
 * server is freed by its grace sweep once we are gone (docs/PROTOCOL.md,
 * ORPHAN_DROP).
 *
 * Locking: o->lock is taken before itab.lock (itab_take_orphans) and
 * before the rpc's lock (rpc_interrupt), never after any lock; no server
 * call is made with it held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fs_int.h"
#include "wback.h"
#include "inode.h"
#include "../lib/clock.h"
#include "../lib/debug.h"
#include "../lib/log.h"

#define ORPHAN_GATHER_MS  20
#define ORPHAN_RETRY_MS   1000
/* How long unmount waits for the last batch. */
#define ORPHAN_STOP_MS    3000

/* Append fid to the queue (lock held). */
static int push(struct fs_orphans *o, const struct cairn_fid *fid)
{
	LOCK_ASSERT_HELD(&o->lock);
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		struct cairn_fid *q = realloc(o->q, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		o->q = q;
		o->cap = cap;
	}
	o->q[o->n++] = *fid;
	return 0;
}

/* One ORPHAN_DROP of fids[0..n), unless unmount gave up waiting
 * (abandon). Returns 0 or a negative errno. */
static int send_drop(struct fs *fs, const struct cairn_fid *fids, size_t n)
{
	struct fs_orphans *o = &fs->orph;
	struct msg_orphan_drop_req q = { .count = (uint32_t)n, .fids = fids };
	union msg_any unused;
	struct rpc_reply rep = { 0 };
	const char *why = "";
	struct wbuf w;
	int rc = 0;

	/* A removal answered here (wb_remove) makes the orphan only when
	 * it reaches the server: the drop must come after it. */
	if (fs->wbk)
		wb_barrier_list(fs->wbk, fids, n);
	wbuf_init(&w);
	msg_encode(OP_ORPHAN_DROP, 0, &w, &q);
	pthread_mutex_lock(&o->lock);
	if (o->abandon)
		rc = -EINTR;
	rpc_intr_init(&o->intr, fs->rpc);
	o->calling = !rc;
	pthread_mutex_unlock(&o->lock);
	if (!rc)
		rc = w.err ? w.err : rpc_call_intr(fs->rpc, OP_ORPHAN_DROP, &w,
						   &rep, &o->intr);
	pthread_mutex_lock(&o->lock);
	o->calling = 0;
	pthread_mutex_unlock(&o->lock);
	wbuf_free(&w);
	if (!rc && msg_decode(OP_ORPHAN_DROP, 1, rep.buf, rep.len, &unused,
			      &why)) {
		log_warn("ORPHAN_DROP: malformed reply from server (%s)", why);
		rc = -EIO;
	}
	rpc_reply_free(&rep);
	return rc;
}

/* A failure worth another try: the message may not have arrived, or the
 * server's disk was full (freeing gives space back to whoever fills it,
 * so keep asking). */
static int transient(int rc)
{
	return rc == -EIO || rc == -ENOTCONN || rc == -ETIMEDOUT ||
	       rc == -ECONNRESET || rc == -EPIPE || rc == -EINTR ||
	       rc == -ENOMEM || rc == -ENOSPC;
}

/* Visitor of itab_take_orphans: queue (lock held by the caller). */
static void take_one(void *arg, const struct cairn_fid *fid)
{
	struct fs_orphans *o = arg;

	if (push(o, fid))
		o->lost++;
}

static void *orphan_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_orphans *o = &fs->orph;
	struct cairn_fid *batch = malloc(CAIRN_ORPHAN_DROP_MAX * sizeof(*batch));
	struct timespec ts;
	int retry = 0;

	if (!batch) {
		log_error("out of memory: unlinked files are freed by the "
			  "server's grace sweep only");
		return NULL;
	}
	pthread_mutex_lock(&o->lock);
	for (;;) {
		size_t n;
		int rc;

		while (!o->stopping && (!o->n || retry)) {
			if (retry) {
				clock_deadline(CLOCK_MONOTONIC, ORPHAN_RETRY_MS, &ts);
				pthread_cond_timedwait(&o->cond, &o->lock, &ts);
				retry = 0;
				continue;
			}
			pthread_cond_wait(&o->cond, &o->lock);
		}
		if (o->stopping)
			break;
		/* Let an rm -rf gather a batch. */
		if (o->n < CAIRN_ORPHAN_DROP_MAX) {
			clock_deadline(CLOCK_MONOTONIC, ORPHAN_GATHER_MS, &ts);
			while (!o->stopping && o->n < CAIRN_ORPHAN_DROP_MAX &&
			       pthread_cond_timedwait(&o->cond, &o->lock,
						      &ts) != ETIMEDOUT)
				;
			if (o->stopping)
				break;
		}
		n = o->n < CAIRN_ORPHAN_DROP_MAX ? o->n : CAIRN_ORPHAN_DROP_MAX;
		memcpy(batch, o->q + (o->n - n), n * sizeof(*batch));
		o->n -= n;
		pthread_mutex_unlock(&o->lock);
		rc = send_drop(fs, batch, n);
		pthread_mutex_lock(&o->lock);
		if (rc == 0) {
			o->sent += n;
		} else if (transient(rc)) {
			for (size_t i = 0; i < n; i++)
				if (push(o, &batch[i]))
					o->lost++;
			retry = 1;
		} else {
			o->lost += n;
			log_warn("server refused to drop %zu unlinked files "
				 "(%s); it frees them after its grace period",
				 n, strerror(-rc));
		}
	}
	/* Unmount: the kernel is gone, so nothing it held is open any
	 * more; fs_orphans_stop bounds how long this may take. */
	itab_take_orphans(fs->itab, take_one, o);
	while (o->n && !o->abandon) {
		size_t n = o->n < CAIRN_ORPHAN_DROP_MAX ? o->n : CAIRN_ORPHAN_DROP_MAX;
		int rc;

		memcpy(batch, o->q + (o->n - n), n * sizeof(*batch));
		pthread_mutex_unlock(&o->lock);
		rc = send_drop(fs, batch, n);
		pthread_mutex_lock(&o->lock);
		if (rc) {
			log_warn("could not tell the server that %zu unlinked "
				 "files are no longer open here (%s); it frees "
				 "them after its grace period", o->n,
				 strerror(-rc));
			break;
		}
		o->n -= n;
		o->sent += n;
	}
	o->lost += o->n;
	o->n = 0;
	o->done = 1;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	free(batch);
	return NULL;
}

int fs_orphans_start(struct fs *fs)
{
	struct fs_orphans *o = &fs->orph;
	int rc = pthread_create(&o->thread, NULL, orphan_main, fs);

	if (rc)
		return -rc;
	o->started = 1;
	return 0;
}

/* Queue fid for ORPHAN_DROP (the thread sends it). */
static void queue(struct fs_orphans *o, const struct cairn_fid *fid)
{
	pthread_mutex_lock(&o->lock);
	if (push(o, fid))
		o->lost++;
	else if (o->n == 1 || o->n == CAIRN_ORPHAN_DROP_MAX)
		pthread_cond_signal(&o->cond);
	pthread_mutex_unlock(&o->lock);
}

void fs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup)
{
	struct fs_orphans *o = &fs->orph;
	struct cairn_fid fid;

	if (!itab_forget(fs->itab, ino, nlookup, &fid))
		return;
	queue(o, &fid);
}

void fs_orphan_release(struct fs *fs, const struct cairn_fid *fid)
{
	/* The kernel has the inode: released when it forgets it (fs_forget);
	 * else nothing here can have it open. */
	if (itab_set_orphan_fid(fs->itab, fid) == -ENOENT)
		queue(&fs->orph, fid);
}

void fs_orphan_hook(void *arg, const struct cairn_fid *fid)
{
	fs_orphan_release(arg, fid);
}

void fs_orphans_stop(struct fs *fs)
{
	struct fs_orphans *o = &fs->orph;
	struct timespec ts;

	if (!o->started)
		return;
	pthread_mutex_lock(&o->lock);
	o->stopping = 1;
	pthread_cond_broadcast(&o->cond);
	/* The last batches may wait for a server that is gone. */
	clock_deadline(CLOCK_MONOTONIC, ORPHAN_STOP_MS, &ts);
	while (!o->done &&
	       pthread_cond_timedwait(&o->cond, &o->lock, &ts) != ETIMEDOUT)
		;
	if (!o->done) {
		o->abandon = 1;
		if (o->calling)
			rpc_interrupt(&o->intr);
	}
	pthread_mutex_unlock(&o->lock);
	pthread_join(o->thread, NULL);
	o->started = 0;
	if (o->sent || o->lost)
		log_info("unlinked files released to the server: %llu sent, "
			 "%llu not sent", (unsigned long long)o->sent,
			 (unsigned long long)o->lost);
}

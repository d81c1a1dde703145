/*
 * dircache.h - directories cached whole: each directory's listing with
 * every entry's status, as one BULKSTAT fetch (docs/PROTOCOL.md) gave it,
 * kept while the server's promise on the directory stands.
 *
 * While a directory's listing is here, a LOOKUP in it is answered without
 * the server, found or not (a name that is not in the listing does not
 * exist), and so are READDIR and READDIRPLUS. Entries keep the status
 * (attributes) the fetch returned, with the server's promise on each:
 * an entry's status is "promised" until a break on that object, or a
 * change of ours to it whose reply did not carry its new attributes, and
 * then "stale" (the name still stands; ask the server for the status).
 *
 * What drops a listing: a break on the directory (dcache_break), every
 * promise going at once (dcache_clear), attributes of the directory with
 * another data version than the listing's (dcache_follow: the directory
 * changed and we do not know how), our own change to it that does not
 * leave the data version exactly one above the listing's (dcache_added,
 * dcache_removed, dcache_renamed edit the listing in place when it does,
 * as OpenAFS's afs_LocalHero), and room: at most DCACHE_DIR_MAX entries
 * in one listing and DCACHE_ENTS_MAX in all, the least recently used
 * listings going first.
 *
 * Fetching (fs_dir.c): dcache_fetch_begin marks the directory as being
 * fetched (one fetch per directory at a time: others ask the server
 * name by name meanwhile); breaks on it while the fetch runs are
 * remembered, and dcache_fetch_end installs the listing only if none
 * came. Entries' statuses are taken as promised only if no break at all
 * came meanwhile (the caller's notify_reply_begin); otherwise they are
 * stale from the start.
 *
 * Consistency with breaks: every call that reads or changes listings on
 * behalf of a reply or a break is made with notify's seq_lock held (a
 * reply section, or the rpc reader applying a push), so no break is
 * applied between reading the cache and answering the kernel.
 *
 * Locking: one mutex inside, a leaf: no function calls out or blocks
 * while holding it (docs/LOCKING.md). Nothing here talks to the kernel
 * or the server. Directories are keyed by vnode number: a node id the
 * functions take may be a later incarnation's (inode.h), which means the
 * same directory. The module does not depend on libfuse.
 */
#ifndef CAIRN_CLIENT_DIRCACHE_H
#define CAIRN_CLIENT_DIRCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

/* Entries in one cached listing; a larger directory is not cached (its
 * lookups go to the server name by name) until it changes. */
#define DCACHE_DIR_MAX  65536u
/* Entries in all cached listings together (about 160 bytes each). */
#define DCACHE_ENTS_MAX 262144u

struct dcache;
/* A listing being fetched, not yet in the cache. */
struct dcache_listing;

/* Returns 0 and *out, or -ENOMEM. */
int dcache_create(struct dcache **out);
void dcache_destroy(struct dcache *dc);

/*
 * Building a listing from BULKSTAT pages: entries in cookie order. add
 * returns 0, -ENOMEM, -EFBIG past DCACHE_DIR_MAX entries, or -EINVAL for
 * an entry the server must not send (a cookie not above the previous
 * one or below CAIRN_COOKIE_FIRST, a name of 0 or over CAIRN_NAME_MAX
 * bytes); a name given twice makes dcache_fetch_end refuse the listing.
 */
int dcache_listing_new(struct dcache_listing **out);
int dcache_listing_add(struct dcache_listing *l, uint64_t cookie,
		       const char *name, size_t len, const struct cairn_attr *a);
size_t dcache_listing_count(const struct dcache_listing *l);
void dcache_listing_free(struct dcache_listing *l);

/*
 * Begin fetching dir's listing. Returns 0 (go ahead; end with
 * dcache_fetch_end whatever happens), -EBUSY when another fetch of dir
 * is running or dir was too big to cache since its last break, or
 * -ENOMEM.
 */
int dcache_fetch_begin(struct dcache *dc, uint64_t dir);
/* The same, but -EEXIST when a listing of dir is cached (read-ahead). */
int dcache_fetch_begin_absent(struct dcache *dc, uint64_t dir);
/*
 * Wait (at most timeout_ms) while another thread fetches dir. Returns 0
 * when a listing of dir is cached after that, -ENOENT when not (the fetch
 * failed, or none was running), -ETIMEDOUT when the fetch still runs.
 */
int dcache_fetch_wait(struct dcache *dc, uint64_t dir, int timeout_ms);
/*
 * End the fetch of dir. l (taken; NULL when the fetch failed) is the
 * listing at data version dv, whose next new entry gets new_cookie. It
 * is installed (replacing any listing of dir) unless dir was broken
 * since dcache_fetch_begin; fresh = 0 (some break came meanwhile) makes
 * every entry stale. toobig: the fetch stopped at DCACHE_DIR_MAX
 * (fetches of dir are refused until its next break). Returns 1 when
 * installed, else 0 (l freed).
 */
int dcache_fetch_end(struct dcache *dc, uint64_t dir,
		     struct dcache_listing *l, uint64_t dv,
		     uint64_t new_cookie, int fresh, int toobig);

/*
 * LOOKUP of name (len bytes) in dir from its listing. Returns 1: found,
 * *a gets its status, promised; 0: not in the listing, so it does not
 * exist; -EAGAIN: found, but its status is stale (a->fid is still
 * right); -ENOENT: no listing of dir cached.
 */
int dcache_lookup(struct dcache *dc, uint64_t dir, const char *name,
		  size_t len, struct cairn_attr *a);

/*
 * Read-ahead of a tree walk (fs_dir.c): the first time this is called for
 * dir's cached listing once at least min_hits lookups were answered from
 * it, up to max FIDs of its subdirectories whose own listings are not
 * cached (with a promised status) go to out; the count is returned. Every
 * later call for the same listing returns 0.
 */
size_t dcache_take_subdirs(struct dcache *dc, uint64_t dir,
			   unsigned min_hits, struct cairn_fid *out,
			   size_t max);
/* Whether a listing of dir is cached. */
int dcache_cached(struct dcache *dc, uint64_t dir);

/* One entry copied out of a listing (name NUL-terminated). */
struct dcache_ent {
	uint64_t cookie;
	struct cairn_attr attr;
	int stale;
	size_t len;
	const char *name;
};
/*
 * Up to max entries of dir's listing after `cookie` (0: from the first),
 * in cookie order: *out gets one malloc'ed block (free() it; the names
 * are inside it), *n the count, *eof whether they reach the end.
 * Returns 0, -ENOENT when no listing of dir is cached, or -ENOMEM.
 */
int dcache_read(struct dcache *dc, uint64_t dir, uint64_t cookie, size_t max,
		struct dcache_ent **out, size_t *n, int *eof);

/* A break on object vnode: the listing of it (a directory) is dropped,
 * any fetch of it fails, and its status in every listing is stale. */
void dcache_break(struct dcache *dc, uint64_t vnode);
/* Every promise is gone (reconnect): drop every listing, fail every
 * fetch. */
void dcache_clear(struct dcache *dc);
/* The same, except the listings of the directories keep(arg, vnode) says
 * stand anyway (their write tokens are held: a lapse, notify.c); in those,
 * the status of every entry not kept is marked stale. keep runs under the
 * cache's lock: it must take none. */
void dcache_clear_except(struct dcache *dc,
			 int (*keep)(void *arg, uint64_t vnode), void *arg);

/*
 * A reply carried attributes a. fresh (no break since the request was
 * sent): every entry naming a's object takes them, promised; else its
 * status is stale. A listing of a's object (a directory) with another
 * data version is dropped.
 */
void dcache_follow(struct dcache *dc, const struct cairn_attr *a, int fresh);
/* Our own change to object vnode came back without its new attributes
 * (SETXATTR; the object an unlink or rename touched): stale everywhere. */
void dcache_stale(struct dcache *dc, uint64_t vnode);
/* dcache_stale of the object entry (dir, name) names, if listed. */
void dcache_stale_name(struct dcache *dc, uint64_t dir, const char *name,
		       size_t len);

/*
 * Our own changes to a directory, with its attributes from the reply
 * (dattr; for a rename within one directory, sattr and dattr are the
 * same one). When the data version is exactly one above the listing's,
 * the change is the only one since the listing was read (any break on
 * the directory would have dropped it), and the listing is edited in
 * place: added (create, mkdir, mknod, symlink, link: child is the new
 * entry's status, promised when fresh, i.e. no break at all came since
 * the request was sent; a create that found the file leaves the version
 * alone and changes nothing), removed, renamed (the moved entry keeps
 * the destination's cookie when it replaced one, else takes the
 * directory's next new entry cookie; exchange swaps the two entries'
 * objects). Any other version drops the listing. Objects whose status
 * the change altered without a reply (the removed or moved object, a
 * replaced target) become stale.
 */
void dcache_added(struct dcache *dc, uint64_t dir, const char *name,
		  size_t len, const struct cairn_attr *child,
		  const struct cairn_attr *dattr, int fresh);
void dcache_removed(struct dcache *dc, uint64_t dir, const char *name,
		    size_t len, const struct cairn_attr *dattr, int fresh);
/* Our own change of dir's attributes only (a chmod, chown or utimensat),
 * which left it at dattr->dv: the listing stays, at that version, if it
 * is one above the listing's. */
void dcache_touched(struct dcache *dc, uint64_t dir,
		    const struct cairn_attr *dattr);
void dcache_renamed(struct dcache *dc, uint64_t sdir, const char *sname,
		    size_t slen, uint64_t ddir, const char *dname,
		    size_t dlen, int exchange, const struct cairn_attr *sattr,
		    const struct cairn_attr *dattr, int fresh);

/*
 * A rename within dir answered here (fs_name.c, wb_rename_created): the
 * server will see the entry made under dname, so the listing keeps its
 * version, and the moved entry its status. 0 when edited; -1 when dir's
 * listing is not cached or could not be edited (then it is dropped).
 */
int dcache_renamed_here(struct dcache *dc, uint64_t dir, const char *sname,
			size_t slen, const char *dname, size_t dlen);

/* State, for diagnostics and tests. */
struct dcache_stats {
	size_t listings;        /* directories cached */
	size_t entries;         /* entries in them */
	uint64_t hits;          /* lookups answered: found */
	uint64_t neg_hits;      /* lookups answered: not found */
	uint64_t installs;      /* listings installed */
	uint64_t edits;         /* listings edited by our own changes */
	uint64_t drops;         /* listings dropped (breaks, versions, room) */
};
void dcache_get_stats(struct dcache *dc, struct dcache_stats *out);
/* Entries in dir's listing, or -ENOENT when none is cached. */
long dcache_count(struct dcache *dc, uint64_t dir);

#endif

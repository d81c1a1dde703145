/*
 * ccache_open.c - the persistent chunk cache's life cycle (ccache.h):
 * open, recovery after a crash (the orphan scan, the rebuild of a lost
 * index from the chunk files' headers), close, statistics and options.
 * The index and the chunk files are handled as ccache.c does, through
 * ccache_int.h, and under the same rules (the head of ccache.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "ccache_int.h"
#include "../lib/log.h"
#include "../lib/flock.h"

/* Virtual size of the index map; the file grows only as used (about 150
 * bytes per chunk, so this bounds the cache at millions of chunks). */
/* Address space, not disk: small chunks live in the index too, so it
 * may grow as large as the cache. */
#define CCACHE_MAP_SIZE   (64ull << 30)
#define CCACHE_MAX_READERS 512u
#define CCACHE_FORMAT     2u   /* 2: keys (fid, idx, dv), lineage db */

/* The "format" record of the meta db. */
static const uint8_t format[4] = { CCACHE_FORMAT, 0, 0, 0 };

static int boot_id(char id[37])
{
	char buf[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	uint8_t rec[CCACHE_REC_BOOT_LEN];

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 36)
		return -EIO;
	buf[36] = '\0';
	if (ccache_rec_boot_encode(buf, rec))
		return -EIO;
	memcpy(id, buf, 37);
	return 0;
}

enum shutdown { SHUT_CLEAN, SHUT_PROCESS, SHUT_MACHINE };

/* How the last user of the cache went away (the dirty marker). */
static enum shutdown last_shutdown(struct ccache *c, const char *now)
{
	uint8_t buf[CCACHE_REC_BOOT_LEN + 1];
	char then[37];
	int fd = openat(c->dfd, "dirty", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? SHUT_CLEAN : SHUT_MACHINE;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || ccache_rec_boot_decode(buf, (size_t)n, then) ||
	    !now[0] || strcmp(then, now))
		return SHUT_MACHINE;
	return SHUT_PROCESS;
}

/* Write the dirty marker durably (before the index changes). An unknown
 * boot id writes one no decoder accepts: the next open rebuilds. */
static int mark_dirty(struct ccache *c, const char *now)
{
	uint8_t rec[CCACHE_REC_BOOT_LEN];
	const char *body = "unknown\n";
	size_t n = strlen(body);
	int fd, rc = 0;

	if (now[0] && !ccache_rec_boot_encode(now, rec)) {
		body = (const char *)rec;
		n = sizeof(rec);
	}
	fd = openat(c->dfd, "dirty.tmp", O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	errno = 0;
	if (write(fd, body, n) != (ssize_t)n || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	close(fd);
	if (!rc && renameat(c->dfd, "dirty.tmp", c->dfd, "dirty") < 0)
		rc = -errno;
	if (!rc && fsync(c->dfd) < 0)
		rc = -errno;
	return rc;
}

/* Remove every file in directory `name` of c->dfd. */
static void clear_dir(struct ccache *c, const char *name)
{
	int fd = openat(c->dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void env_close(struct ccache *c)
{
	if (c->env)
		mdb_env_close(c->env);
	c->env = NULL;
}

/*
 * Open the index. Returns 0 (*fresh: it holds no format record, i.e. was
 * just created or lost its contents), or a negative errno / -EUCLEAN when
 * it cannot be trusted (torn, truncated, another format).
 */
static int env_open(struct ccache *c, int *fresh)
{
	char path[PATH_MAX + 16];
	MDB_envinfo info;
	MDB_stat ms;
	MDB_txn *txn;
	MDB_val key = { 6, "format" }, val;
	struct stat st;
	int rc;

	*fresh = 0;
	snprintf(path, sizeof(path), "%s/index", c->dir);
	if ((rc = mdb_env_create(&c->env))) {
		c->env = NULL;
		return -ENOMEM;
	}
	if ((rc = mdb_env_set_maxdbs(c->env, 5)) ||
	    (rc = mdb_env_set_mapsize(c->env, CCACHE_MAP_SIZE)) ||
	    (rc = mdb_env_set_maxreaders(c->env, CCACHE_MAX_READERS)) ||
	    (rc = mdb_env_open(c->env, path, MDB_NOSYNC | MDB_NOTLS, 0600)))
		goto bad;
	/* A truncated file would fault when LMDB touches its missing pages:
	 * every page up to the last one in use must be in the file. */
	snprintf(path, sizeof(path), "%s/index/data.mdb", c->dir);
	if ((rc = mdb_env_info(c->env, &info)) ||
	    (rc = mdb_env_stat(c->env, &ms)))
		goto bad;
	if (stat(path, &st) < 0 ||
	    (uint64_t)st.st_size < ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize) {
		rc = MDB_CORRUPTED;
		goto bad;
	}
	if ((rc = mdb_txn_begin(c->env, NULL, 0, &txn)))
		goto bad;
	if ((rc = mdb_dbi_open(txn, "chunks", MDB_CREATE, &c->db_chunks)) ||
	    (rc = mdb_dbi_open(txn, "lru", MDB_CREATE, &c->db_lru)) ||
	    (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &c->db_meta)) ||
	    (rc = mdb_dbi_open(txn, "lineage", MDB_CREATE, &c->db_lin)) ||
	    (rc = mdb_dbi_open(txn, "small", MDB_CREATE, &c->db_small))) {
		mdb_txn_abort(txn);
		goto bad;
	}
	rc = mdb_get(txn, c->db_meta, &key, &val);
	if (rc == MDB_NOTFOUND) {
		*fresh = 1;
		rc = 0;
	} else if (!rc && (val.mv_size != 4 ||
			   memcmp(val.mv_data, format, 4))) {
		rc = MDB_VERSION_MISMATCH;
	}
	if (rc) {
		mdb_txn_abort(txn);
		goto bad;
	}
	if ((rc = mdb_txn_commit(txn)))
		goto bad;
	return 0;
bad:
	log_warn("cache %s: index unusable: %s", c->dir, mdb_strerror(rc));
	env_close(c);
	return -EUCLEAN;
}

static int put_format(struct ccache *c, struct wtx *w)
{
	MDB_val key = { 6, "format" }, val = { 4, (void *)format };

	return cc_lmdb_err(c, mdb_put(w->txn, c->db_meta, &key, &val, 0), "put");
}

/* A chunk file found by the rebuild: 0 and *len if its header is sound
 * and names key k. */
static int adopt_check(int dirfd, const char *name, const struct ccache_key *k,
		       uint32_t *len)
{
	uint8_t buf[CCACHE_REC_HDR_MAX];
	struct ccache_hdr h;
	struct stat st;
	size_t hsz;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC), rc = -EUCLEAN;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 ||
	    cc_read_full(fd, buf, CCACHE_REC_HDR_FIXED, 0) ||
	    ccache_rec_hdr_size(buf, CCACHE_REC_HDR_FIXED, &hsz) ||
	    cc_read_full(fd, buf, hsz, 0) ||
	    ccache_rec_hdr_decode(buf, hsz, &h) ||
	    h.hcrc != cc_crc(buf, hsz - 4) || !ccache_rec_key_eq(&h.key, k) ||
	    (uint64_t)st.st_size != hsz + h.len)
		goto out;
	*len = h.len;
	rc = 0;
out:
	close(fd);
	return rc;
}

/*
 * Record chunk k (len bytes), found by a rebuild, keeping one chunk per
 * (fid, idx): of two, the newer version stays. Returns 0 when k was
 * recorded, 1 when it lost (the caller removes its file), or an error.
 */
static int adopt(struct ccache *c, struct wtx *w, const struct ccache_key *k,
		 uint32_t len)
{
	struct ccache_key at = { .fid = k->fid, .dv = 0, .idx = k->idx }, o;
	struct ccache_val v;
	MDB_cursor *cur;
	MDB_val key, val;
	int rc;

	if ((rc = mdb_cursor_open(w->txn, c->db_chunks, &cur)))
		return cc_lmdb_err(c, rc, "cursor");
	rc = cc_seek_chunk(c, cur, &at, MDB_SET_RANGE, &o, &key, &val);
	if (!rc && o.idx == k->idx &&
	    !ccache_rec_val_decode(val.mv_data, val.mv_size, &v)) {
		mdb_cursor_close(cur);
		if (o.dv > k->dv)
			return 1;
		if ((rc = cc_rec_del(c, w, &o, &v)))
			return rc;
		cc_unlink_key(c, &o);
	} else {
		mdb_cursor_close(cur);
		if (rc && rc != -ENOENT)
			return rc;
	}
	return cc_rec_put(c, w, k, len);
}

/*
 * After an unclean shutdown: walk every chunk file. Files with a name that
 * is not a chunk's (or in the wrong directory) go. With rebuild (the index
 * was lost), a file whose header is sound is recorded again; otherwise a
 * file without a record is an orphan of a store cut short, and goes.
 * quiet: a new cache; say nothing unless files were found.
 */
static int scan(struct ccache *c, struct wtx *w, int rebuild, int quiet)
{
	unsigned long kept = 0, adopted = 0, removed = 0;

	for (unsigned i = 0; i < CCACHE_NDIRS; i++) {
		char dname[3];
		struct dirent *e;
		DIR *d;
		int fd;

		snprintf(dname, sizeof(dname), "%02x", i);
		fd = openat(c->dfd, dname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!(d = fdopendir(fd))) {
			close(fd);
			continue;
		}
		while ((e = readdir(d))) {
			struct ccache_key k;
			struct ccache_val v;
			uint32_t len = 0;
			int rc;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (ccache_rec_name_decode(e->d_name, strlen(e->d_name),
						   &k) || cc_key_dir(&k) != i) {
				unlinkat(dirfd(d), e->d_name, 0);
				removed++;
				continue;
			}
			if (!rebuild) {
				if (!cc_rec_get(c, w->txn, &k, &v)) {
					kept++;
					continue;
				}
			} else if (!adopt_check(dirfd(d), e->d_name, &k, &len)) {
				if ((rc = adopt(c, w, &k, len)) < 0) {
					closedir(d);
					return rc;
				}
				if (rc == 0) {
					adopted++;
					continue;
				}
			}
			unlinkat(dirfd(d), e->d_name, 0);
			removed++;
		}
		closedir(d);
	}
	if (rebuild && (adopted || removed || !quiet))
		log_info("cache %s: index rebuilt from the chunk files: %lu "
			 "adopted, %lu removed", c->dir, adopted, removed);
	else if (!rebuild)
		log_info("cache %s: after an unclean shutdown: %lu chunks "
			 "kept, %lu orphan files removed", c->dir, kept,
			 removed);
	return 0;
}

/* Lineage records the decoders refuse are dropped (their files then
 * hit at exact versions only); so are those of files without chunks.
 * Returns MDB_NOTFOUND at the end, or an LMDB error. */
static int load_lineage(struct ccache *c, struct wtx *w, unsigned long *dropped)
{
	MDB_cursor *cur;
	MDB_val key, val;
	int mrc, op = MDB_FIRST;

	if ((mrc = mdb_cursor_open(w->txn, c->db_lin, &cur)))
		return mrc;
	while (!(mrc = mdb_cursor_get(cur, &key, &val, op))) {
		struct cairn_fid fid;
		struct ccache_lin l;
		int bad;

		op = MDB_NEXT;
		bad = ccache_rec_fid_decode(key.mv_data, key.mv_size, &fid) ||
		      ccache_rec_lin_decode(val.mv_data, val.mv_size, &l);
		if (!bad && !cc_fid_empty(c, w->txn, &fid))
			continue;
		if ((mrc = mdb_cursor_del(cur, 0)))
			break;
		*dropped += bad;
	}
	mdb_cursor_close(cur);
	return mrc;
}

/* Totals from the index, and every chunk record checked: a record the
 * decoders refuse, or without its lru record, is repaired or dropped. */
static int load(struct ccache *c, struct wtx *w)
{
	MDB_cursor *cur;
	MDB_val key, val;
	int mrc, op = MDB_FIRST;
	unsigned long dropped = 0;

	c->used = c->nchunks = 0;
	c->tick = 0;
	if ((mrc = mdb_cursor_open(w->txn, c->db_lru, &cur)))
		return cc_lmdb_err(c, mrc, "cursor");
	if (!mdb_cursor_get(cur, &key, &val, MDB_LAST) &&
	    ccache_rec_tick_decode(key.mv_data, key.mv_size, &c->tick))
		c->tick = 0;
	mdb_cursor_close(cur);
	if ((mrc = mdb_cursor_open(w->txn, c->db_chunks, &cur)))
		return cc_lmdb_err(c, mrc, "cursor");
	while (!(mrc = mdb_cursor_get(cur, &key, &val, op))) {
		struct ccache_key k, lk;
		struct ccache_val v;
		uint8_t tb[CCACHE_REC_TICK_SIZE];
		MDB_val tkey = { sizeof(tb), tb }, lval;

		op = MDB_NEXT;
		if (ccache_rec_key_decode(key.mv_data, key.mv_size, &k) ||
		    ccache_rec_val_decode(val.mv_data, val.mv_size, &v)) {
			if ((mrc = mdb_cursor_del(cur, 0)))
				break;
			dropped++;
			continue;
		}
		c->used += chunk_bytes(v.len);
		c->nchunks++;
		if (v.tick > c->tick)
			c->tick = v.tick;
		ccache_rec_tick_encode(v.tick, tb);
		if (mdb_get(w->txn, c->db_lru, &tkey, &lval) ||
		    ccache_rec_key_decode(lval.mv_data, lval.mv_size, &lk) ||
		    !ccache_rec_key_eq(&k, &lk)) {
			if ((mrc = mdb_put(w->txn, c->db_lru, &tkey, &key, 0)))
				break;
			dropped++;
		}
	}
	mdb_cursor_close(cur);
	if (mrc == MDB_NOTFOUND)
		mrc = load_lineage(c, w, &dropped);
	if (dropped)
		log_warn("cache %s: %lu bad index records repaired or dropped",
			 c->dir, dropped);
	return mrc == MDB_NOTFOUND ? 0 : cc_lmdb_err(c, mrc, "load");
}

/* With c->dfd open: the lock, the marker, the index, the recovery. */
static int open_locked(struct ccache *c)
{
	char now[37] = "", path[PATH_MAX + 32];
	enum shutdown how;
	struct wtx w;
	int fresh = 0, rebuild, damaged = 0, rc;

	c->lockfd = openat(c->dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->lockfd < 0)
		return -errno;
	if (flock_wait(c->lockfd, FLOCK_WAIT_MS) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	if ((mkdirat(c->dfd, "tmp", 0700) < 0 && errno != EEXIST) ||
	    (mkdirat(c->dfd, "index", 0700) < 0 && errno != EEXIST))
		return -errno;
	clear_dir(c, "tmp");
	boot_id(now);
	how = last_shutdown(c, now);
	rebuild = how == SHUT_MACHINE;
	if (rebuild)
		log_warn("cache %s: the machine went down with the cache open "
			 "(or its marker is damaged): rebuilding the index",
			 c->dir);
	if (rebuild || (damaged = env_open(c, &fresh) != 0)) {
		env_close(c);
		snprintf(path, sizeof(path), "%s/index/data.mdb", c->dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/index/lock.mdb", c->dir);
		unlink(path);
		if ((rc = env_open(c, &fresh)))
			return rc;
		rebuild = 1;
	}
	rebuild |= fresh;
	if ((rc = mark_dirty(c, now)))
		return rc;
	pthread_mutex_lock(&c->lock);
	if (!(rc = cc_wtx_begin(c, &w))) {
		/* A rebuild starts from nothing: the files are the truth
		 * (small chunks, kept only in the index, go with it). */
		/* No lineage survives it: only exact versions hit until
		 * the next fetch or write of a file starts one. */
		if (rebuild &&
		    ((rc = mdb_drop(w.txn, c->db_chunks, 0)) ||
		     (rc = mdb_drop(w.txn, c->db_lru, 0)) ||
		     (rc = mdb_drop(w.txn, c->db_lin, 0)) ||
		     (rc = mdb_drop(w.txn, c->db_small, 0))))
			rc = cc_lmdb_err(c, rc, "drop");
		if (!rc)
			rc = load(c, &w);
		if (!rc && (rebuild || how != SHUT_CLEAN))
			rc = scan(c, &w, rebuild,
				  how == SHUT_CLEAN && !damaged);
		if (!rc && rebuild)
			rc = put_format(c, &w);
		if (!rc)
			rc = cc_evict(c, &w, 0);
		rc = cc_wtx_end(c, &w, rc);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ccache_open(const char *dir, uint64_t limit, struct ccache **out)
{
	struct ccache *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->dfd = c->lockfd = -1;
	c->limit = limit;
	pthread_mutex_init(&c->lock, NULL);
	if (snprintf(c->dir, sizeof(c->dir), "%s/chunks", dir) >=
	    (int)sizeof(c->dir) - 96) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	if (mkdir(c->dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	c->dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dfd < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = open_locked(c)))
		goto fail;
	log_info("cache %s: %" PRIu64 " chunks, %" PRIu64 " of %" PRIu64
		 " bytes used", c->dir, c->nchunks, c->used, c->limit);
	*out = c;
	return 0;
fail:
	env_close(c);
	if (c->lockfd >= 0)
		close(c->lockfd);
	if (c->dfd >= 0)
		close(c->dfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return rc;
}

void ccache_close(struct ccache *c)
{
	struct ccache_stats s;
	int rc;

	if (!c)
		return;
	ccache_get_stats(c, &s);
	log_info("cache %s: closing: %" PRIu64 " hits (%" PRIu64 " bytes), %"
		 PRIu64 " misses, %" PRIu64 " bytes fetched, %" PRIu64
		 " chunks stored, %" PRIu64 " written, %" PRIu64 " evicted, %"
		 PRIu64 " discarded; %" PRIu64 " chunks, %" PRIu64 " bytes",
		 c->dir, s.hits, s.hit_bytes, s.misses, s.fetched_bytes,
		 s.stored, s.written, s.evicted, s.discarded, s.chunks, s.used);
	if (!c->broken && c->ntouch) {
		struct wtx w;

		pthread_mutex_lock(&c->lock);
		if (!cc_wtx_begin(c, &w))
			cc_wtx_end(c, &w, cc_touch_apply(c, &w));
		pthread_mutex_unlock(&c->lock);
	}
	rc = c->broken ? -EIO : cc_lmdb_err(c, mdb_env_sync(c->env, 1), "sync");
	env_close(c);
	if (!rc) {
		unlinkat(c->dfd, "dirty", 0);
	} else {
		/* Leave a marker no open accepts: the next one rebuilds. */
		int fd = openat(c->dfd, "dirty", O_WRONLY | O_TRUNC | O_CLOEXEC);

		if (fd >= 0) {
			if (write(fd, "broken\n", 7) != 7)
				log_warn("cache %s: cannot mark the index "
					 "for a rebuild", c->dir);
			close(fd);
		}
	}
	close(c->lockfd);
	close(c->dfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- stats, options ------------------------------------------------------- */

void ccache_get_stats(struct ccache *c, struct ccache_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	s->used = c->used;
	s->chunks = c->nchunks;
	pthread_mutex_unlock(&c->lock);
	s->limit = c->limit;
	s->hits = GET(c->hits);
	s->misses = GET(c->misses);
	s->hit_bytes = GET(c->hit_bytes);
	s->fetched_bytes = GET(c->fetched);
	s->stored = GET(c->stored);
	s->stored_bytes = GET(c->stored_bytes);
	s->written = GET(c->written);
	s->written_bytes = GET(c->written_bytes);
	s->evicted = GET(c->evicted);
	s->discarded = GET(c->discarded);
	s->errors = GET(c->errors);
}

void ccache_print_stats(struct ccache *c, FILE *f)
{
	struct ccache_stats s;

	if (!c) {
		fprintf(f, "cache.enabled 0\n");
		return;
	}
	ccache_get_stats(c, &s);
	fprintf(f, "cache.enabled 1\n");
	fprintf(f, "cache.dir %s\n", c->dir);
	fprintf(f, "cache.chunk_size %u\n", CCACHE_CHUNK);
	fprintf(f, "cache.limit_bytes %" PRIu64 "\n", s.limit);
	fprintf(f, "cache.used_bytes %" PRIu64 "\n", s.used);
	fprintf(f, "cache.chunks %" PRIu64 "\n", s.chunks);
	fprintf(f, "cache.hits %" PRIu64 "\n", s.hits);
	fprintf(f, "cache.misses %" PRIu64 "\n", s.misses);
	fprintf(f, "cache.hit_bytes %" PRIu64 "\n", s.hit_bytes);
	fprintf(f, "cache.fetched_bytes %" PRIu64 "\n", s.fetched_bytes);
	fprintf(f, "cache.stored_chunks %" PRIu64 "\n", s.stored);
	fprintf(f, "cache.stored_bytes %" PRIu64 "\n", s.stored_bytes);
	fprintf(f, "cache.written_chunks %" PRIu64 "\n", s.written);
	fprintf(f, "cache.written_bytes %" PRIu64 "\n", s.written_bytes);
	fprintf(f, "cache.evictions %" PRIu64 "\n", s.evicted);
	fprintf(f, "cache.discarded %" PRIu64 "\n", s.discarded);
	fprintf(f, "cache.errors %" PRIu64 "\n", s.errors);
}

int ccache_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	uint64_t v = 0;
	const char *p = s;
	int shift = 0;

	if (!*p)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return -EINVAL;
	if (*p) {
		const char *u = strchr(units, *p | 0x20);

		if (!u || !*u || p[1])
			return -EINVAL;
		shift = 10 * (int)(u - units + 1);
	}
	if (shift && v > UINT64_MAX >> shift)
		return -EINVAL;
	*out = v << shift;
	return 0;
}

uint64_t ccache_default_limit(const char *dir)
{
	struct statvfs sv;
	uint64_t v;

	if (statvfs(dir, &sv) < 0)
		return 0;
	v = (uint64_t)sv.f_bavail * sv.f_frsize / 100 * CCACHE_DEFAULT_PERCENT;
	return v > CCACHE_DEFAULT_MAX ? CCACHE_DEFAULT_MAX : v;
}

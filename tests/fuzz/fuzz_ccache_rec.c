/*
 * fuzz_ccache_rec - every decoder of the chunk cache's on-disk records
 * (client/ccache_rec.h): what a cache directory damaged by a crash, a disk
 * or a person can hand the client at mount or on a read.
 *
 * Input: one byte naming the record kind (enum below), then the record's
 * bytes. The saved corpus (tests/fuzz/corpus/fuzz_ccache_rec/) holds
 * records written by a real cache, in this form.
 *
 * Properties, each an abort() when violated:
 *   - a decoder returns 0 or -EUCLEAN, reads only the record (its end is
 *     the fuzzer buffer's end) and writes only its output (allocated at
 *     exactly its size here, so ASan sees more);
 *   - an accepted record encodes back to the same bytes (one record, one
 *     encoding: a name, key or header the cache accepts is one it writes);
 *   - accepted values are in the ranges the header promises: len
 *     1..CCACHE_CHUNK with nblk blocks, vnode and tick non-zero, a header
 *     size at most CCACHE_REC_HDR_MAX, a lineage's base at most its cur;
 *   - a lineage key is the start of the keys of its file's chunks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../client/ccache_rec.h"

enum rec_kind {
	REC_KEY,       /* index key (chunks db), lru value */
	REC_VAL,       /* index value */
	REC_TICK,      /* lru key */
	REC_HDR_SIZE,  /* the fixed start of a chunk file */
	REC_HDR,       /* a chunk file's whole header */
	REC_NAME,      /* a chunk file's name */
	REC_BOOT,      /* the dirty marker */
	REC_FID,       /* lineage key (lineage db) */
	REC_LIN,       /* lineage value */
	REC__COUNT
};

static const char *const kind_name[REC__COUNT] = {
	"key", "val", "tick", "hdr_size", "hdr", "name", "boot", "fid", "lin",
};

static unsigned long tried[REC__COUNT], accepted[REC__COUNT];

static void print_stats(void)
{
	fprintf(stderr, "fuzz_ccache_rec: %-10s %12s %12s\n", "record",
		"tried", "accepted");
	for (int k = 0; k < REC__COUNT; k++)
		fprintf(stderr, "fuzz_ccache_rec: %-10s %12lu %12lu\n",
			kind_name[k], tried[k], accepted[k]);
}

static void fail(int kind, const char *what, size_t n)
{
	fprintf(stderr, "fuzz_ccache_rec: %s record of %zu bytes: %s\n",
		kind_name[kind], n, what);
	abort();
}

static void check_same(int kind, const void *enc, size_t elen,
		       const uint8_t *p, size_t n)
{
	if (elen != n || memcmp(enc, p, n))
		fail(kind, "does not encode back to the same bytes", n);
}

static int one(int kind, const uint8_t *p, size_t n)
{
	int rc = -EUCLEAN;

	switch (kind) {
	case REC_KEY: {
		struct ccache_key *k = malloc(sizeof(*k));
		uint8_t enc[CCACHE_REC_KEY_SIZE];

		rc = ccache_rec_key_decode(p, n, k);
		if (!rc) {
			if (k->fid.vnode == 0)
				fail(kind, "accepted vnode 0", n);
			ccache_rec_key_encode(k, enc);
			check_same(kind, enc, sizeof(enc), p, n);
		}
		free(k);
		break;
	}
	case REC_VAL: {
		struct ccache_val *v = malloc(sizeof(*v));
		uint8_t enc[CCACHE_REC_VAL_SIZE];

		rc = ccache_rec_val_decode(p, n, v);
		if (!rc) {
			if (v->len == 0 || v->len > CCACHE_CHUNK ||
			    v->tick == 0)
				fail(kind, "accepted a value out of range", n);
			ccache_rec_val_encode(v, enc);
			check_same(kind, enc, sizeof(enc), p, n);
		}
		free(v);
		break;
	}
	case REC_TICK: {
		uint64_t t;
		uint8_t enc[CCACHE_REC_TICK_SIZE];

		rc = ccache_rec_tick_decode(p, n, &t);
		if (!rc) {
			if (t == 0)
				fail(kind, "accepted tick 0", n);
			ccache_rec_tick_encode(t, enc);
			check_same(kind, enc, sizeof(enc), p, n);
		}
		break;
	}
	case REC_HDR_SIZE: {
		size_t size = 0;

		rc = ccache_rec_hdr_size(p, n, &size);
		if (!rc && (n != CCACHE_REC_HDR_FIXED ||
			    size < CCACHE_REC_HDR_FIXED + 8 ||
			    size > CCACHE_REC_HDR_MAX))
			fail(kind, "header size out of range", n);
		break;
	}
	case REC_HDR: {
		struct ccache_hdr *h = malloc(sizeof(*h));
		uint8_t *enc = malloc(CCACHE_REC_HDR_MAX);
		size_t size = 0;

		rc = ccache_rec_hdr_decode(p, n, h);
		if (!rc) {
			if (h->len == 0 || h->len > CCACHE_CHUNK ||
			    h->nblk != ccache_rec_nblk(h->len) ||
			    h->nblk > CCACHE_MAX_BLOCKS ||
			    h->key.fid.vnode == 0)
				fail(kind, "accepted a header out of range", n);
			/* Its fixed part announces the same size. */
			if (ccache_rec_hdr_size(p, CCACHE_REC_HDR_FIXED, &size) ||
			    size != n)
				fail(kind, "size of the fixed part disagrees", n);
			check_same(kind, enc, ccache_rec_hdr_encode(h, enc), p,
				   n);
		}
		free(enc);
		free(h);
		break;
	}
	case REC_NAME: {
		struct ccache_key *k = malloc(sizeof(*k));
		char enc[CCACHE_REC_NAME_LEN + 1];

		rc = ccache_rec_name_decode((const char *)p, n, k);
		if (!rc) {
			ccache_rec_name_encode(k, enc);
			check_same(kind, enc, strlen(enc), p, n);
		}
		free(k);
		break;
	}
	case REC_FID: {
		struct cairn_fid *f = malloc(sizeof(*f));
		struct ccache_key k = { .dv = 0, .idx = 0 };
		uint8_t enc[CCACHE_REC_FID_SIZE], kenc[CCACHE_REC_KEY_SIZE];

		rc = ccache_rec_fid_decode(p, n, f);
		if (!rc) {
			if (f->vnode == 0)
				fail(kind, "accepted vnode 0", n);
			ccache_rec_fid_encode(f, enc);
			check_same(kind, enc, sizeof(enc), p, n);
			k.fid = *f;
			ccache_rec_key_encode(&k, kenc);
			if (memcmp(kenc, enc, sizeof(enc)))
				fail(kind, "not the start of its chunks' keys",
				     n);
		}
		free(f);
		break;
	}
	case REC_LIN: {
		struct ccache_lin *l = malloc(sizeof(*l));
		uint8_t enc[CCACHE_REC_LIN_SIZE];

		rc = ccache_rec_lin_decode(p, n, l);
		if (!rc) {
			if (l->base > l->cur)
				fail(kind, "accepted base above cur", n);
			ccache_rec_lin_encode(l, enc);
			check_same(kind, enc, sizeof(enc), p, n);
		}
		free(l);
		break;
	}
	case REC_BOOT: {
		char *id = malloc(37);
		uint8_t enc[CCACHE_REC_BOOT_LEN];

		rc = ccache_rec_boot_decode(p, n, id);
		if (!rc) {
			if (strlen(id) != 36 || ccache_rec_boot_encode(id, enc))
				fail(kind, "accepted id not re-encodable", n);
			check_same(kind, enc, sizeof(enc), p, n);
		}
		free(id);
		break;
	}
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int registered;
	int kind, rc;
	size_t n;

	if (!registered) {
		registered = 1;
		atexit(print_stats);
	}
	if (size < 1 || data[0] >= REC__COUNT)
		return 0;
	kind = data[0];
	n = size - 1;
	tried[kind]++;
	rc = one(kind, n ? data + 1 : NULL, n);
	if (rc != 0 && rc != -EUCLEAN)
		fail(kind, "error other than -EUCLEAN", n);
	if (!rc)
		accepted[kind]++;
	return 0;
}

/*
 * ccache_rec.h - the byte layout of every record the chunk cache
 * (ccache.h) keeps on disk, as pure functions: no LMDB, no I/O, no
 * allocation, no checksum computation, no global state (the fuzz target
 * tests/fuzz/fuzz_ccache_rec.c links this file alone).
 *
 * Decoders, one per record kind:
 *   ccache_rec_hdr_size     first bytes of a chunk file -> its header size
 *   ccache_rec_hdr_decode   chunk file header           -> struct ccache_hdr
 *   ccache_rec_key_decode   index key (chunks db), lru value -> key
 *   ccache_rec_val_decode   index value (chunks db)     -> struct ccache_val
 *   ccache_rec_tick_decode  lru key                     -> tick
 *   ccache_rec_fid_decode   lineage key (lineage db)    -> fid
 *   ccache_rec_lin_decode   lineage value               -> struct ccache_lin
 *   ccache_rec_name_decode  chunk file name             -> key
 *   ccache_rec_boot_decode  the "dirty" marker file     -> boot id
 * and an encoder for each, with decode(encode(x)) == x and one encoding
 * per record.
 *
 * Contract shared by every decoder (as server/store_rec.h): it reads exactly
 * the n bytes at p (p may be NULL when n is 0), writes only its output, and
 * returns 0 or -EUCLEAN for bytes that are not exactly what the encoder
 * writes: wrong length, bad magic or version, reserved bits set, values out
 * of range. Outputs are undefined on error. Checksums are *carried* here
 * and computed by ccache.c (CRC-32 as gzip's, with ISA-L), so a decoder accepting a header
 * says nothing yet about whether its checksums match.
 *
 * Layouts (little-endian inside values and the header, big-endian in
 * LMDB keys so that a cursor walks one file's chunks in order, and the
 * chunks of one (file, index) together: the one cursor seek at
 * (fid, idx, 0) finds them):
 *   key      BE4 vol, BE8 vnode, BE4 uniq, BE4 idx, BE8 dv      (28 bytes)
 *   value    u32 len (1..CCACHE_CHUNK), u32 zero, u64 tick >= 1  (16 bytes)
 *   lru key  BE8 tick >= 1; its value is the chunk's key
 *   lineage key    BE4 vol, BE8 vnode, BE4 uniq                 (16 bytes)
 *   lineage value  u64 base_dv, u64 cur_dv, base_dv <= cur_dv   (16 bytes)
 *   header   8 magic "CairnCk" + version byte 1,
 *            u32 vol, u32 uniq, u64 vnode, u64 dv, u32 idx, u32 len,
 *            u32 nblk (= len in CCACHE_BLOCK blocks, rounded up),
 *            nblk x u32 crc32 of each block, u32 crc32 of all the header's
 *            bytes before it                        (48 + 4 * nblk bytes)
 *   chunk file   header, then the len data bytes; nothing after
 *   file name    "%08x-%016x-%08x-%016x-%08x" of vol, vnode, uniq, dv, idx
 *                (lower-case hex, CCACHE_REC_NAME_LEN characters)
 *   dirty marker the 36-character boot id of the kernel that wrote it
 *                (/proc/sys/kernel/random/boot_id) and a newline
 */
#ifndef CAIRN_CLIENT_CCACHE_REC_H
#define CAIRN_CLIENT_CCACHE_REC_H

#include <stddef.h>
#include <stdint.h>
#include "../lib/proto.h"

/* Chunk size: one READ of CAIRN_MAX_IO fills one chunk. */
#define CCACHE_CHUNK           CAIRN_MAX_IO
/* Checksum granularity: a read from the cache checks only the blocks it
 * returns. */
#define CCACHE_BLOCK           (32u * 1024u)
#define CCACHE_MAX_BLOCKS      (CCACHE_CHUNK / CCACHE_BLOCK)

#define CCACHE_REC_KEY_SIZE    28u
#define CCACHE_REC_VAL_SIZE    16u
#define CCACHE_REC_TICK_SIZE   8u
#define CCACHE_REC_FID_SIZE    16u
#define CCACHE_REC_LIN_SIZE    16u
#define CCACHE_REC_HDR_FIXED   44u   /* up to and including nblk */
#define CCACHE_REC_HDR_MAX     (CCACHE_REC_HDR_FIXED + 4u * CCACHE_MAX_BLOCKS + 4u)
#define CCACHE_REC_NAME_LEN    60u
#define CCACHE_REC_BOOT_LEN    37u   /* 36 characters and '\n' */
#define CCACHE_REC_VERSION     1u

/* A chunk: bytes [idx * CCACHE_CHUNK, +CCACHE_CHUNK) of version dv of fid. */
struct ccache_key {
	struct cairn_fid fid;
	uint64_t dv;
	uint32_t idx;
};

struct ccache_val {
	uint32_t len;   /* data bytes in the chunk; fewer than CCACHE_CHUNK
			 * only where that version of the file ends */
	uint64_t tick;  /* last use, for LRU; unique, >= 1 */
};

/* A file's lineage (ccache.h): every chunk of the file whose version is
 * in [base, cur] holds that chunk's bytes at version cur. */
struct ccache_lin {
	uint64_t base, cur;
};

struct ccache_hdr {
	struct ccache_key key;
	uint32_t len;
	uint32_t nblk;
	uint32_t crc[CCACHE_MAX_BLOCKS];
	uint32_t hcrc;  /* crc32 of the encoded header before this field */
};

/* Blocks of a chunk of len bytes, and the size of its header. */
uint32_t ccache_rec_nblk(uint32_t len);
size_t ccache_rec_hdr_bytes(uint32_t len);

/* Two keys name the same chunk. */
int ccache_rec_key_eq(const struct ccache_key *a, const struct ccache_key *b);

void ccache_rec_key_encode(const struct ccache_key *k,
			   uint8_t out[CCACHE_REC_KEY_SIZE]);
/* vnode != 0. */
int ccache_rec_key_decode(const void *p, size_t n, struct ccache_key *out);

void ccache_rec_val_encode(const struct ccache_val *v,
			   uint8_t out[CCACHE_REC_VAL_SIZE]);
int ccache_rec_val_decode(const void *p, size_t n, struct ccache_val *out);

void ccache_rec_tick_encode(uint64_t tick, uint8_t out[CCACHE_REC_TICK_SIZE]);
int ccache_rec_tick_decode(const void *p, size_t n, uint64_t *tick);

/* The lineage key: a fid, laid out as the start of a chunk key. vnode != 0. */
void ccache_rec_fid_encode(const struct cairn_fid *f,
			   uint8_t out[CCACHE_REC_FID_SIZE]);
int ccache_rec_fid_decode(const void *p, size_t n, struct cairn_fid *out);

/* base <= cur. */
void ccache_rec_lin_encode(const struct ccache_lin *l,
			   uint8_t out[CCACHE_REC_LIN_SIZE]);
int ccache_rec_lin_decode(const void *p, size_t n, struct ccache_lin *out);

/*
 * The header of a chunk of h->len bytes (1..CCACHE_CHUNK; h->nblk and
 * h->crc[0..nblk) must match it). Returns the bytes written,
 * ccache_rec_hdr_bytes(h->len), at most CCACHE_REC_HDR_MAX.
 */
size_t ccache_rec_hdr_encode(const struct ccache_hdr *h, uint8_t *out);
/*
 * From the first CCACHE_REC_HDR_FIXED bytes of a chunk file (n must be
 * exactly that): the size of the whole header they announce, once magic,
 * version, len and nblk were checked. For reading a header whose length
 * is not known yet (the rebuild of a lost index).
 */
int ccache_rec_hdr_size(const void *p, size_t n, size_t *size);
/* A whole header: n must be exactly its size. */
int ccache_rec_hdr_decode(const void *p, size_t n, struct ccache_hdr *out);

/* The file name of a chunk; out gets CCACHE_REC_NAME_LEN characters and
 * a NUL. */
void ccache_rec_name_encode(const struct ccache_key *k,
			    char out[CCACHE_REC_NAME_LEN + 1]);
/* n bytes of a name (no NUL needed). */
int ccache_rec_name_decode(const char *s, size_t n, struct ccache_key *out);

/* The dirty marker of boot id `id` (36 characters, as the kernel prints
 * it: 8-4-4-4-12 lower-case hex digits). */
int ccache_rec_boot_encode(const char *id, uint8_t out[CCACHE_REC_BOOT_LEN]);
/* id gets the 36 characters and a NUL. */
int ccache_rec_boot_decode(const void *p, size_t n, char id[37]);

#endif

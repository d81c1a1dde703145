/*
 * test_ccache_rec.c - unit tests for client/ccache_rec.h, the pure
 * encoders and decoders of the chunk cache's on-disk records: every
 * record's encoding (the index key's order: fid, idx, dv; the lineage key
 * and value), and the refusal of malformed bytes (fuzz_ccache_rec covers
 * the rest). No cache directory is needed.
 *
 * Output: one "ok - NAME" or "not ok - NAME" line per test; exit status 1
 * if any failed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../../client/ccache_rec.h"
#include "check.h"

static struct ccache_key key(uint64_t vnode, uint64_t dv, uint32_t idx)
{
	struct ccache_key k = { { 7, vnode, 0xabcd0000u + (uint32_t)vnode },
				dv, idx };
	return k;
}

static void t_rec_roundtrip(void)
{
	struct ccache_key k = key(42, 0x0102030405060708ull, 17), k2;
	struct ccache_val v = { 12345, 99 }, v2;
	struct ccache_hdr h = { .key = k, .len = 100000 }, h2;
	struct ccache_lin l = { 5, 9 }, l2;
	struct cairn_fid f2;
	uint8_t kb[CCACHE_REC_KEY_SIZE], vb[CCACHE_REC_VAL_SIZE],
		tb[CCACHE_REC_TICK_SIZE], hb[CCACHE_REC_HDR_MAX],
		bb[CCACHE_REC_BOOT_LEN], fb[CCACHE_REC_FID_SIZE],
		lb[CCACHE_REC_LIN_SIZE];
	char name[CCACHE_REC_NAME_LEN + 1], id[37];
	uint64_t t;
	size_t hsz, hs2;

	ccache_rec_key_encode(&k, kb);
	CHECK_EQ(ccache_rec_key_decode(kb, sizeof(kb), &k2), 0);
	CHECK(ccache_rec_key_eq(&k, &k2));
	CHECK_EQ(kb[0], 0); /* big-endian: vol 7 is in byte 3 */
	CHECK_EQ(kb[3], 7);
	ccache_rec_val_encode(&v, vb);
	CHECK_EQ(ccache_rec_val_decode(vb, sizeof(vb), &v2), 0);
	CHECK_EQ(v2.len, v.len);
	CHECK_EQ(v2.tick, v.tick);
	ccache_rec_tick_encode(77, tb);
	CHECK_EQ(ccache_rec_tick_decode(tb, sizeof(tb), &t), 0);
	CHECK_EQ(t, 77);
	/* (fid, idx, dv): one file's chunks of one index sort together */
	CHECK_EQ(kb[19], 17);
	CHECK_EQ(kb[20], 1);
	CHECK_EQ(kb[27], 8);
	ccache_rec_fid_encode(&k.fid, fb);
	CHECK(!memcmp(fb, kb, sizeof(fb))); /* a key starts with its fid */
	CHECK_EQ(ccache_rec_fid_decode(fb, sizeof(fb), &f2), 0);
	CHECK(f2.vol == k.fid.vol && f2.vnode == k.fid.vnode &&
	      f2.uniq == k.fid.uniq);
	ccache_rec_lin_encode(&l, lb);
	CHECK_EQ(ccache_rec_lin_decode(lb, sizeof(lb), &l2), 0);
	CHECK(l2.base == l.base && l2.cur == l.cur);
	CHECK_EQ(lb[0], 5); /* little-endian */

	h.nblk = ccache_rec_nblk(h.len);
	CHECK_EQ(h.nblk, 4); /* 100000 bytes in 32 KiB blocks */
	for (uint32_t i = 0; i < h.nblk; i++)
		h.crc[i] = 0x11111111u * (i + 1);
	h.hcrc = 0xdeadbeef;
	hsz = ccache_rec_hdr_encode(&h, hb);
	CHECK_EQ(hsz, ccache_rec_hdr_bytes(h.len));
	CHECK_EQ(hsz, 48 + 4 * 4);
	CHECK_EQ(ccache_rec_hdr_size(hb, CCACHE_REC_HDR_FIXED, &hs2), 0);
	CHECK_EQ(hs2, hsz);
	CHECK_EQ(ccache_rec_hdr_decode(hb, hsz, &h2), 0);
	CHECK(ccache_rec_key_eq(&h2.key, &k));
	CHECK_EQ(h2.len, h.len);
	CHECK_EQ(h2.crc[3], h.crc[3]);
	CHECK_EQ(h2.hcrc, h.hcrc);
	CHECK_EQ(ccache_rec_hdr_bytes(CCACHE_CHUNK), CCACHE_REC_HDR_MAX);

	ccache_rec_name_encode(&k, name);
	CHECK_EQ(strlen(name), CCACHE_REC_NAME_LEN);
	CHECK(!strcmp(name, "00000007-000000000000002a-abcd002a-"
			    "0102030405060708-00000011"));
	CHECK_EQ(ccache_rec_name_decode(name, strlen(name), &k2), 0);
	CHECK(ccache_rec_key_eq(&k, &k2));

	CHECK_EQ(ccache_rec_boot_encode("0123abcd-0000-4000-8000-00000000beef",
					bb), 0);
	CHECK_EQ(ccache_rec_boot_decode(bb, sizeof(bb), id), 0);
	CHECK(!strcmp(id, "0123abcd-0000-4000-8000-00000000beef"));
}

static void t_rec_malformed(void)
{
	struct ccache_key k = key(42, 5, 1), k2;
	struct ccache_val v = { 100, 1 }, v2;
	struct ccache_hdr h = { .key = k, .len = 40000 }, h2;
	struct ccache_lin l = { 3, 3 }, l2;
	struct cairn_fid f2;
	uint8_t kb[CCACHE_REC_KEY_SIZE], vb[CCACHE_REC_VAL_SIZE],
		tb[CCACHE_REC_TICK_SIZE] = { 0 }, hb[CCACHE_REC_HDR_MAX],
		bad[CCACHE_REC_HDR_MAX], bb[CCACHE_REC_BOOT_LEN],
		fb[CCACHE_REC_FID_SIZE], lb[CCACHE_REC_LIN_SIZE];
	char name[CCACHE_REC_NAME_LEN + 1], id[37];
	uint64_t t;
	size_t hsz, s;

	ccache_rec_key_encode(&k, kb);
	CHECK_EQ(ccache_rec_key_decode(kb, sizeof(kb) - 1, &k2), -EUCLEAN);
	memset(kb + 4, 0, 8); /* vnode 0 */
	CHECK_EQ(ccache_rec_key_decode(kb, sizeof(kb), &k2), -EUCLEAN);
	CHECK_EQ(ccache_rec_key_decode(NULL, 0, &k2), -EUCLEAN);

	ccache_rec_val_encode(&v, vb);
	vb[5] = 1; /* reserved */
	CHECK_EQ(ccache_rec_val_decode(vb, sizeof(vb), &v2), -EUCLEAN);
	v.len = 0;
	ccache_rec_val_encode(&v, vb);
	CHECK_EQ(ccache_rec_val_decode(vb, sizeof(vb), &v2), -EUCLEAN);
	v.len = CCACHE_CHUNK + 1;
	ccache_rec_val_encode(&v, vb);
	CHECK_EQ(ccache_rec_val_decode(vb, sizeof(vb), &v2), -EUCLEAN);
	v = (struct ccache_val){ 5, 0 }; /* tick 0 */
	ccache_rec_val_encode(&v, vb);
	CHECK_EQ(ccache_rec_val_decode(vb, sizeof(vb), &v2), -EUCLEAN);
	CHECK_EQ(ccache_rec_tick_decode(tb, sizeof(tb), &t), -EUCLEAN);

	ccache_rec_fid_encode(&k.fid, fb);
	CHECK_EQ(ccache_rec_fid_decode(fb, sizeof(fb) - 1, &f2), -EUCLEAN);
	memset(fb + 4, 0, 8); /* vnode 0 */
	CHECK_EQ(ccache_rec_fid_decode(fb, sizeof(fb), &f2), -EUCLEAN);
	ccache_rec_lin_encode(&l, lb);
	CHECK_EQ(ccache_rec_lin_decode(lb, sizeof(lb) + 0, &l2), 0);
	CHECK_EQ(ccache_rec_lin_decode(lb, sizeof(lb) - 1, &l2), -EUCLEAN);
	l = (struct ccache_lin){ 8, 7 }; /* base above cur */
	ccache_rec_lin_encode(&l, lb);
	CHECK_EQ(ccache_rec_lin_decode(lb, sizeof(lb), &l2), -EUCLEAN);

	h.nblk = ccache_rec_nblk(h.len);
	hsz = ccache_rec_hdr_encode(&h, hb);
	CHECK_EQ(ccache_rec_hdr_decode(hb, hsz - 1, &h2), -EUCLEAN);
	CHECK_EQ(ccache_rec_hdr_decode(hb, hsz + 0, &h2), 0);
	memcpy(bad, hb, hsz);
	bad[7] = 2; /* version */
	CHECK_EQ(ccache_rec_hdr_decode(bad, hsz, &h2), -EUCLEAN);
	CHECK_EQ(ccache_rec_hdr_size(bad, CCACHE_REC_HDR_FIXED, &s), -EUCLEAN);
	memcpy(bad, hb, hsz);
	bad[40] = 9; /* nblk no longer matches len */
	CHECK_EQ(ccache_rec_hdr_decode(bad, hsz, &h2), -EUCLEAN);
	memcpy(bad, hb, hsz);
	memset(bad + 36, 0, 4); /* len 0 */
	CHECK_EQ(ccache_rec_hdr_decode(bad, hsz, &h2), -EUCLEAN);
	CHECK_EQ(ccache_rec_hdr_size(hb, CCACHE_REC_HDR_FIXED - 1, &s),
		 -EUCLEAN);

	ccache_rec_name_encode(&k, name);
	name[3] = 'A'; /* upper case: a second spelling of one key */
	CHECK_EQ(ccache_rec_name_decode(name, strlen(name), &k2), -EUCLEAN);
	ccache_rec_name_encode(&k, name);
	name[8] = '_';
	CHECK_EQ(ccache_rec_name_decode(name, strlen(name), &k2), -EUCLEAN);
	ccache_rec_name_encode(&k, name);
	CHECK_EQ(ccache_rec_name_decode(name, strlen(name) - 1, &k2),
		 -EUCLEAN);
	CHECK_EQ(ccache_rec_name_decode("tmp", 3, &k2), -EUCLEAN);

	CHECK_EQ(ccache_rec_boot_decode("broken\n", 7, id), -EUCLEAN);
	CHECK_EQ(ccache_rec_boot_decode("0123abcd-0000-4000-8000-00000000beefX",
					37, id), -EUCLEAN);
	CHECK_EQ(ccache_rec_boot_encode("short", bb), -EINVAL);
}

int main(void)
{
	printf("1..2\n");
	run("records_roundtrip", t_rec_roundtrip);
	run("records_malformed_refused", t_rec_malformed);
	return failed_total ? 1 : 0;
}

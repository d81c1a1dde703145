/*
 * test_seal.c - the cell key file, the handshake's proof and sealed frames
 * (lib/seal.h): what seals opens, and nothing else does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/seal.h"
#include "../../lib/wire.h"
#include "check.h"

static char dir[] = "/tmp/cairn-test-seal.XXXXXX";

static void put_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
	chmod(path, mode);
}

static void test_key_files(void)
{
	char p[256], err[256];
	uint8_t k[CELLKEY_SIZE], k2[CELLKEY_SIZE];
	struct stat st;

	snprintf(p, sizeof(p), "%s/new.key", dir);
	CHECK_EQ(cellkey_create(p, err, sizeof(err)), 0);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK_EQ(cellkey_create(p, err, sizeof(err)), -EEXIST);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), 0);
	CHECK_EQ(cellkey_load(p, k2, err, sizeof(err)), 0);
	CHECK(!memcmp(k, k2, sizeof(k)));

	/* Group-readable: refused, and said so. */
	chmod(p, 0640);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), -EPERM);
	CHECK(strstr(err, "group or others") != NULL);

	/* Upper case and no newline are fine; anything else is not a key. */
	snprintf(p, sizeof(p), "%s/k.key", dir);
	put_file(p, "00112233445566778899AABBCCDDEEFF"
		    "00112233445566778899aabbccddeeff", 0600);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), 0);
	CHECK(k[0] == 0x00 && k[5] == 0x55 && k[10] == 0xaa && k[31] == 0xff);
	put_file(p, "0011", 0600);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "is not a key") != NULL);
	put_file(p, "zz112233445566778899aabbccddeeff"
		    "00112233445566778899aabbccddeeff\n", 0600);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), -EINVAL);
	put_file(p, "00112233445566778899aabbccddeeff"
		    "00112233445566778899aabbccddeeff00\n", 0600);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), -EINVAL);
	snprintf(p, sizeof(p), "%s/missing.key", dir);
	CHECK_EQ(cellkey_load(p, k, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "cannot read the cell key") != NULL);
	CHECK_EQ(cellkey_load(dir, k, err, sizeof(err)) < 0, 1);

	/* The client's path: option, then $CAIRN_KEY, then the default. */
	unsetenv("CAIRN_KEY");
	CHECK(!strcmp(cellkey_path(NULL), CELLKEY_DEFAULT));
	setenv("CAIRN_KEY", "/x/env.key", 1);
	CHECK(!strcmp(cellkey_path(NULL), "/x/env.key"));
	CHECK(!strcmp(cellkey_path("/x/opt.key"), "/x/opt.key"));
	unsetenv("CAIRN_KEY");
}

static void test_proof(void)
{
	uint8_t k[CELLKEY_SIZE] = { 1 }, k2[CELLKEY_SIZE] = { 2 };
	uint8_t nc[SEAL_NONCE_SIZE] = { 3 }, ns[SEAL_NONCE_SIZE] = { 4 };
	uint8_t a[SEAL_PROOF_SIZE], b[SEAL_PROOF_SIZE];

	seal_proof(k, nc, ns, a);
	seal_proof(k, nc, ns, b);
	CHECK(seal_proof_ok(a, b));
	seal_proof(k2, nc, ns, b);            /* another key */
	CHECK(!seal_proof_ok(a, b));
	ns[31] ^= 1;                          /* another server nonce */
	seal_proof(k, nc, ns, b);
	CHECK(!seal_proof_ok(a, b));
}

/* Seal frame i ("payload i", id i) with s into out; returns its length. */
static size_t seal_one(struct seal *s, int i, uint8_t *out)
{
	char text[32];
	size_t n = (size_t)snprintf(text, sizeof(text), "payload %d", i);
	struct wire_hdr h = { .len = (uint32_t)(n + SEAL_TAG_SIZE), .op = 3,
			      .id = (uint32_t)i };

	wire_hdr_encode(out, &h);
	CHECK_EQ(seal_frame(s, out, (const uint8_t *)text, n,
			    out + WIRE_HDR_SIZE, out + WIRE_HDR_SIZE + n), 0);
	CHECK(memcmp(out + WIRE_HDR_SIZE, text, n) != 0); /* encrypted */
	return WIRE_HDR_SIZE + n + SEAL_TAG_SIZE;
}

static int open_one(struct seal *s, uint8_t *f, size_t len)
{
	return seal_open(s, f, f + WIRE_HDR_SIZE, len - WIRE_HDR_SIZE);
}

/* Open a copy of frame f (len bytes) with a new opener: its result. */
static int open_fresh(const uint8_t *k, const uint8_t *nc, const uint8_t *ns,
		      int way, const uint8_t *f, size_t len)
{
	struct seal *rx = seal_new(k, nc, ns, way, 0);
	uint8_t g[64];
	int rc;

	memcpy(g, f, len);
	rc = open_one(rx, g, len);
	seal_free(rx);
	return rc;
}

static void test_frames(void)
{
	uint8_t k[CELLKEY_SIZE], nc[SEAL_NONCE_SIZE], ns[SEAL_NONCE_SIZE];
	uint8_t f[3][64], g[64];
	size_t n[3];

	CHECK_EQ(seal_random(k, sizeof(k)), 0);
	CHECK_EQ(seal_random(nc, sizeof(nc)), 0);
	CHECK_EQ(seal_random(ns, sizeof(ns)), 0);

	/* In order: each opens to what was sealed. */
	struct seal *tx = seal_new(k, nc, ns, SEAL_C2S, 1);
	struct seal *rx = seal_new(k, nc, ns, SEAL_C2S, 0);
	for (int i = 0; i < 3; i++)
		n[i] = seal_one(tx, i, f[i]);
	memcpy(g, f[0], n[0]);
	CHECK_EQ(open_one(rx, g, n[0]), 0);
	CHECK(!memcmp(g + WIRE_HDR_SIZE, "payload 0", 9));
	/* Frame 0 again (a replay): fails, and the opener stays broken. */
	memcpy(g, f[0], n[0]);
	CHECK_EQ(open_one(rx, g, n[0]), -EBADMSG);
	memcpy(g, f[1], n[1]);
	CHECK_EQ(open_one(rx, g, n[1]), -EBADMSG);
	seal_free(rx);

	/* Out of order (frame 1 first): fails. */
	rx = seal_new(k, nc, ns, SEAL_C2S, 0);
	memcpy(g, f[1], n[1]);
	CHECK_EQ(open_one(rx, g, n[1]), -EBADMSG);
	seal_free(rx);

	/* One bit of the payload, the tag or the header (authenticated,
	 * not encrypted) altered: fails. */
	size_t where[3] = { WIRE_HDR_SIZE + 1, n[0] - 1, 9 /* the id */ };
	for (int w = 0; w < 3; w++) {
		memcpy(g, f[0], n[0]);
		g[where[w]] ^= 0x10;
		CHECK_EQ(open_fresh(k, nc, ns, SEAL_C2S, g, n[0]), -EBADMSG);
	}

	/* The other direction's key, another nonce, another cell key: fails. */
	CHECK_EQ(open_fresh(k, nc, ns, SEAL_S2C, f[0], n[0]), -EBADMSG);
	ns[0] ^= 1;
	CHECK_EQ(open_fresh(k, nc, ns, SEAL_C2S, f[0], n[0]), -EBADMSG);
	ns[0] ^= 1;
	k[0] ^= 1;
	CHECK_EQ(open_fresh(k, nc, ns, SEAL_C2S, f[0], n[0]), -EBADMSG);
	k[0] ^= 1;
	/* ... and a frame shorter than its tag. */
	rx = seal_new(k, nc, ns, SEAL_C2S, 0);
	CHECK_EQ(seal_open(rx, f[0], f[0] + WIRE_HDR_SIZE, SEAL_TAG_SIZE - 1),
		 -EBADMSG);
	seal_free(rx);
	seal_free(tx);

	/* An empty payload seals to just a tag, and opens. */
	tx = seal_new(k, nc, ns, SEAL_S2C, 1);
	rx = seal_new(k, nc, ns, SEAL_S2C, 0);
	struct wire_hdr h = { .len = SEAL_TAG_SIZE, .op = 2, .id = 9 };
	wire_hdr_encode(g, &h);
	CHECK_EQ(seal_frame(tx, g, NULL, 0, g + WIRE_HDR_SIZE,
			    g + WIRE_HDR_SIZE), 0);
	CHECK_EQ(seal_open(rx, g, g + WIRE_HDR_SIZE, SEAL_TAG_SIZE), 0);
	seal_free(tx);
	seal_free(rx);
}

int main(void)
{
	char cmd[128];

	if (!mkdtemp(dir))
		return 1;
	run("seal key files: created 0600, loaded, refused when loose or "
	    "malformed", test_key_files);
	run("seal server proof depends on key and both nonces", test_proof);
	run("seal frames open in order only, unaltered, with the right key",
	    test_frames);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return failed_total ? 1 : 0;
}

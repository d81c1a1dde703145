/*
 * The cell key, the handshake's proofs and sealed frames: see seal.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "seal.h"

#define GCM_IV_SIZE 12

struct seal {
	EVP_CIPHER_CTX *ctx;
	uint64_t seq;    /* frames sealed or opened so far */
	int enc;
	int broken;      /* a frame failed: nothing more opens */
};

/* --- the key file ------------------------------------------------------------ */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int cellkey_load(const char *path, uint8_t key[CELLKEY_SIZE], char *err,
		 size_t errsz)
{
	char buf[2 * CELLKEY_SIZE + 2];
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errsz, "cannot read the cell key %s: %s", path,
			 strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errsz, "cell key %s is not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	if (st.st_mode & 077) {
		snprintf(err, errsz, "cell key %s is accessible to group or "
			 "others (mode %04o): refused; chmod 600 it", path,
			 (unsigned)(st.st_mode & 07777));
		close(fd);
		return -EPERM;
	}
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		rc = -errno;
	close(fd);
	if (rc) {
		snprintf(err, errsz, "cannot read the cell key %s: %s", path,
			 strerror(-rc));
		return rc;
	}
	if (n == (ssize_t)sizeof(buf) && buf[sizeof(buf) - 1] != '\n')
		n = -1;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n != 2 * CELLKEY_SIZE)
		rc = -EINVAL;
	for (size_t i = 0; !rc && i < CELLKEY_SIZE; i++) {
		int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
		if (hi < 0 || lo < 0)
			rc = -EINVAL;
		else
			key[i] = (uint8_t)(hi << 4 | lo);
	}
	seal_wipe(buf, sizeof(buf));
	if (rc) {
		seal_wipe(key, CELLKEY_SIZE);
		snprintf(err, errsz, "cell key %s is not a key: expected %u hex "
			 "digits on one line", path, 2 * CELLKEY_SIZE);
	}
	return rc;
}

int cellkey_create(const char *path, char *err, size_t errsz)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t key[CELLKEY_SIZE];
	char buf[2 * CELLKEY_SIZE + 1];
	int fd, rc = 0;

	if (seal_random(key, sizeof(key))) {
		snprintf(err, errsz, "no random bytes for a cell key");
		return -EIO;
	}
	for (size_t i = 0; i < CELLKEY_SIZE; i++) {
		buf[2 * i] = hex[key[i] >> 4];
		buf[2 * i + 1] = hex[key[i] & 15];
	}
	buf[2 * CELLKEY_SIZE] = '\n';
	seal_wipe(key, sizeof(key));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
	} else {
		/* A umask cannot widen 0600, but a default ACL could. */
		if (fchmod(fd, 0600) < 0 ||
		    write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    fsync(fd) < 0)
			rc = errno ? -errno : -EIO;
		if (close(fd) < 0 && !rc)
			rc = -errno;
		if (rc)
			unlink(path);
	}
	seal_wipe(buf, sizeof(buf));
	if (rc)
		snprintf(err, errsz, "cannot create the cell key %s: %s", path,
			 strerror(-rc));
	return rc;
}

const char *cellkey_path(const char *opt)
{
	const char *env = getenv("CAIRN_KEY");

	if (opt && *opt)
		return opt;
	return env && *env ? env : CELLKEY_DEFAULT;
}

/* --- proofs and keys --------------------------------------------------------- */

int seal_random(void *buf, size_t n)
{
	return RAND_bytes(buf, (int)n) == 1 ? 0 : -EIO;
}

void seal_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}

/* HMAC-SHA256(key, label | nc | ns). */
static void derive(const uint8_t key[CELLKEY_SIZE], const char *label,
		   const uint8_t nc[SEAL_NONCE_SIZE],
		   const uint8_t ns[SEAL_NONCE_SIZE], uint8_t out[32])
{
	uint8_t msg[64 + 2 * SEAL_NONCE_SIZE];
	size_t ll = strlen(label);
	unsigned int olen = 32;

	memcpy(msg, label, ll);
	memcpy(msg + ll, nc, SEAL_NONCE_SIZE);
	memcpy(msg + ll + SEAL_NONCE_SIZE, ns, SEAL_NONCE_SIZE);
	if (!HMAC(EVP_sha256(), key, CELLKEY_SIZE, msg,
		  ll + 2 * SEAL_NONCE_SIZE, out, &olen))
		memset(out, 0, 32); /* never matches a real proof */
}

void cellkey_id(const uint8_t key[CELLKEY_SIZE], uint8_t id[CELLKEY_ID_SIZE])
{
	uint8_t none[SEAL_NONCE_SIZE] = { 0 }, out[32];

	derive(key, "cairn key id", none, none, out);
	memcpy(id, out, CELLKEY_ID_SIZE);
}

void seal_proof(const uint8_t key[CELLKEY_SIZE],
		const uint8_t nc[SEAL_NONCE_SIZE],
		const uint8_t ns[SEAL_NONCE_SIZE], uint8_t out[SEAL_PROOF_SIZE])
{
	derive(key, "cairn server proof", nc, ns, out);
}

int seal_proof_ok(const uint8_t a[SEAL_PROOF_SIZE],
		  const uint8_t b[SEAL_PROOF_SIZE])
{
	return CRYPTO_memcmp(a, b, SEAL_PROOF_SIZE) == 0;
}

struct seal *seal_new(const uint8_t key[CELLKEY_SIZE],
		      const uint8_t nc[SEAL_NONCE_SIZE],
		      const uint8_t ns[SEAL_NONCE_SIZE], int dir, int enc)
{
	struct seal *s = calloc(1, sizeof(*s));
	uint8_t k[32];
	int ok;

	if (!s)
		return NULL;
	derive(key, dir == SEAL_C2S ? "cairn client to server key"
				    : "cairn server to client key", nc, ns, k);
	s->enc = enc;
	s->ctx = EVP_CIPHER_CTX_new();
	ok = s->ctx && (enc ? EVP_EncryptInit_ex(s->ctx, EVP_aes_256_gcm(),
						 NULL, k, NULL)
			    : EVP_DecryptInit_ex(s->ctx, EVP_aes_256_gcm(),
						 NULL, k, NULL));
	seal_wipe(k, sizeof(k));
	if (!ok) {
		seal_free(s);
		return NULL;
	}
	return s;
}

void seal_free(struct seal *s)
{
	if (!s)
		return;
	EVP_CIPHER_CTX_free(s->ctx); /* erases the key schedule */
	free(s);
}

/* The nonce of the next frame: 4 zero bytes, the count little-endian. */
static void next_iv(struct seal *s, uint8_t iv[GCM_IV_SIZE])
{
	uint64_t q = s->seq++;

	memset(iv, 0, 4);
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(q >> (8 * i));
}

int seal_frame(struct seal *s, const uint8_t *hdr, const uint8_t *in,
	       size_t n, uint8_t *out, uint8_t tag[SEAL_TAG_SIZE])
{
	return seal_frame2(s, hdr, NULL, 0, in, n, out, tag);
}

int seal_frame2(struct seal *s, const uint8_t *hdr, const uint8_t *pre,
		size_t npre, const uint8_t *in, size_t n, uint8_t *out,
		uint8_t tag[SEAL_TAG_SIZE])
{
	uint8_t iv[GCM_IV_SIZE];
	int l;

	next_iv(s, iv);
	if (!EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, iv) ||
	    !EVP_EncryptUpdate(s->ctx, NULL, &l, hdr, 16) ||
	    (npre && !EVP_EncryptUpdate(s->ctx, out, &l, pre, (int)npre)) ||
	    (n && !EVP_EncryptUpdate(s->ctx, out + npre, &l, in, (int)n)) ||
	    !EVP_EncryptFinal_ex(s->ctx, out + npre + n, &l) ||
	    !EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_SIZE,
				 tag))
		return -EIO;
	return 0;
}

int seal_open(struct seal *s, const uint8_t *hdr, uint8_t *p, size_t len)
{
	uint8_t iv[GCM_IV_SIZE];
	size_t n;
	int l;

	if (s->broken || len < SEAL_TAG_SIZE)
		return -EBADMSG;
	n = len - SEAL_TAG_SIZE;
	next_iv(s, iv);
	if (!EVP_DecryptInit_ex(s->ctx, NULL, NULL, NULL, iv) ||
	    !EVP_DecryptUpdate(s->ctx, NULL, &l, hdr, 16) ||
	    (n && !EVP_DecryptUpdate(s->ctx, p, &l, p, (int)n)) ||
	    !EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_SIZE,
				 p + n) ||
	    EVP_DecryptFinal_ex(s->ctx, p + n, &l) <= 0) {
		s->broken = 1;
		return -EBADMSG;
	}
	return 0;
}

/*
 * The cell key, the handshake's proofs and sealed frames (docs/SECURITY.md,
 * docs/PROTOCOL.md "Handshake").
 *
 * Every server and client of a cell holds one 256-bit secret, the cell
 * key, in a file of 64 hex digits readable by its owner only. A connection
 * begins with AUTH: the client sends a fresh 32-byte nonce Nc, the server
 * answers with its own nonce Ns and a proof HMAC-SHA256(K, "cairn server
 * proof" | Nc | Ns). From Nc and Ns both sides derive one AES-256-GCM key
 * per direction; every later frame is sealed: its payload encrypted, the
 * 16-byte header authenticated as it is, a 16-byte tag appended, and the
 * nonce the count of frames sent before it in that direction. The client
 * proves it holds K with its first sealed frame (HELLO): a server that
 * cannot open it closes the connection. Fresh nonces on both sides make
 * a recorded handshake useless on a new connection; the implicit counter
 * makes a replayed, dropped or reordered frame fail to open.
 *
 * All cryptography is OpenSSL's (libcrypto).
 */
#ifndef CAIRN_SEAL_H
#define CAIRN_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define CELLKEY_SIZE   32u
#define SEAL_NONCE_SIZE 32u
#define SEAL_PROOF_SIZE 32u
#define SEAL_TAG_SIZE  WIRE_TAG_SIZE
/* Where clients look for the key unless told (--key, $CAIRN_KEY). */
#define CELLKEY_DEFAULT "/etc/cairn/cell.key"

/*
 * Read a key file into key. Refuses a file that is not a regular file,
 * is readable or writable by group or others, or does not hold exactly
 * 64 hex digits (and an optional newline). On failure returns a negative
 * errno and a sentence naming the problem in err.
 */
int cellkey_load(const char *path, uint8_t key[CELLKEY_SIZE], char *err,
		 size_t errsz);

/* Create path (mode 0600, must not exist) holding a new random key.
 * Returns 0, or a negative errno with err filled in. */
int cellkey_create(const char *path, char *err, size_t errsz);

/* The client key path: `opt` if given, else $CAIRN_KEY, else the default. */
const char *cellkey_path(const char *opt);

/* Fill buf with n random bytes (a nonce); 0 or -EIO. */
int seal_random(void *buf, size_t n);

#define CELLKEY_ID_SIZE 8u
/* A key's public name in AUTH: the first 8 bytes of HMAC-SHA256(key,
 * "cairn key id"). Says which key, reveals nothing of it. */
void cellkey_id(const uint8_t key[CELLKEY_SIZE], uint8_t id[CELLKEY_ID_SIZE]);

/* HMAC-SHA256(key, "cairn server proof" | nc | ns). */
void seal_proof(const uint8_t key[CELLKEY_SIZE],
		const uint8_t nc[SEAL_NONCE_SIZE],
		const uint8_t ns[SEAL_NONCE_SIZE], uint8_t out[SEAL_PROOF_SIZE]);

/* Constant-time comparison of two proofs: 1 if equal. */
int seal_proof_ok(const uint8_t a[SEAL_PROOF_SIZE],
		  const uint8_t b[SEAL_PROOF_SIZE]);

/* Erase a secret (not optimised away). */
void seal_wipe(void *p, size_t n);

/* One direction of a connection: its key and the count of frames. */
struct seal;

enum { SEAL_C2S = 0, SEAL_S2C = 1 };

/* A sealer (enc) or opener (!enc) for direction dir (SEAL_C2S/S2C),
 * keyed from the cell key and the two nonces. NULL when out of memory. */
struct seal *seal_new(const uint8_t key[CELLKEY_SIZE],
		      const uint8_t nc[SEAL_NONCE_SIZE],
		      const uint8_t ns[SEAL_NONCE_SIZE], int dir, int enc);
void seal_free(struct seal *s);

/*
 * Seal one frame. hdr is its 16-byte header, whose len already counts the
 * tag (payload length + SEAL_TAG_SIZE); in (n bytes) is encrypted into out
 * (may be in) and the tag written to tag. 0 or -EIO. Frames must be sealed
 * in the order they are sent.
 */
int seal_frame(struct seal *s, const uint8_t *hdr, const uint8_t *in,
	       size_t n, uint8_t *out, uint8_t tag[SEAL_TAG_SIZE]);
/* The same for a payload in two pieces, pre (npre bytes) then in (n):
 * out gets npre + n bytes (may not overlap either piece). */
int seal_frame2(struct seal *s, const uint8_t *hdr, const uint8_t *pre,
		size_t npre, const uint8_t *in, size_t n, uint8_t *out,
		uint8_t tag[SEAL_TAG_SIZE]);

/*
 * Open one frame in place: p holds len bytes, the ciphertext followed by
 * the tag (len >= SEAL_TAG_SIZE). On success the first len - 16 bytes are
 * the plaintext. -EBADMSG when the frame does not verify (wrong key,
 * tampered, replayed or out of order); the opener is then useless.
 */
int seal_open(struct seal *s, const uint8_t *hdr, uint8_t *p, size_t len);

#endif

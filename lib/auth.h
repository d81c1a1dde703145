/*
 * Frames on a blocking socket, sealed once the connection is
 * authenticated, and the client's side of the AUTH handshake (lib/seal.h,
 * docs/PROTOCOL.md "Handshake"). Used by the cache manager's connection
 * (client/rpc.c) and by `cairn status HOST`.
 */
#ifndef CAIRN_AUTH_H
#define CAIRN_AUTH_H

#include <stdint.h>

#include "seal.h"
#include "wire.h"

/*
 * Read one frame, opened with rx when not NULL; h->len is then the
 * payload's length without the tag. *payload is malloc'ed (NULL when
 * empty). Returns 0, -EBADMSG when a sealed frame does not verify,
 * -EMSGSIZE for an oversized one, or net_read_full's errors.
 */
int frame_read(int fd, struct seal *rx, struct wire_hdr *h,
	       uint8_t **payload);

/* Send one frame whose payload is pre then req (either NULL: none),
 * sealed with tx when not NULL (frames must then be sent in the order
 * sealed). */
int frame_send(int fd, struct seal *tx, uint16_t op, uint16_t flags,
	       uint32_t id, const struct wbuf *pre, const struct wbuf *req);

/*
 * AUTH on a new connection: send a fresh nonce, check the server's proof
 * that it holds the cell key, and make the connection's sealer and opener.
 * Returns 0, or a negative errno with err saying why (-EACCES: the server
 * does not hold this key).
 */
int auth_client(int fd, const uint8_t key[CELLKEY_SIZE], struct seal **tx,
		struct seal **rx, char *err, size_t errsz);

#endif

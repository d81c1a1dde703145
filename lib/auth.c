/*
 * Sealed frames on a blocking socket and the client's AUTH: see auth.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "auth.h"
#include "msg.h"
#include "net.h"
#include "proto.h"

int frame_read(int fd, struct seal *rx, struct wire_hdr *h,
		      uint8_t **payload)
{
	uint8_t hb[WIRE_HDR_SIZE];
	size_t wlen;
	int ret;

	*payload = NULL;
	ret = net_read_full(fd, hb, sizeof(hb));
	if (ret)
		return ret;
	ret = wire_hdr_decode(hb, h);
	if (ret)
		return ret;
	wlen = h->len;
	if (rx) {
		if (h->len < SEAL_TAG_SIZE)
			return -EBADMSG;
		h->len -= SEAL_TAG_SIZE;
	}
	if (wlen == 0)
		return 0;
	*payload = malloc(wlen);
	if (!*payload)
		return -ENOMEM;
	ret = net_read_full(fd, *payload, wlen);
	if (!ret && rx)
		ret = seal_open(rx, hb, *payload, wlen);
	if (ret || !h->len) {
		free(*payload);
		*payload = NULL;
	}
	return ret;
}

int frame_send(int fd, struct seal *tx, uint16_t op, uint16_t flags,
	       uint32_t id, const struct wbuf *pre, const struct wbuf *req)
{
	size_t npre = pre ? pre->len : 0, nreq = req ? req->len : 0;
	size_t len = npre + nreq;
	uint8_t hb[WIRE_HDR_SIZE], *sealed = NULL;
	struct iovec iov[3], *v = iov;
	int n = 1, ret = 0;

	if (len > WIRE_MAX_PAYLOAD)
		return -EMSGSIZE;
	struct wire_hdr h = { .len = (uint32_t)len, .op = op, .flags = flags,
			      .id = id };
	if (tx)
		h.len += SEAL_TAG_SIZE;
	wire_hdr_encode(hb, &h);

	iov[0].iov_base = hb;
	iov[0].iov_len = WIRE_HDR_SIZE;
	if (tx) {
		if (!(sealed = malloc(len + SEAL_TAG_SIZE)))
			return -ENOMEM;
		if (seal_frame2(tx, hb, npre ? pre->data : NULL, npre,
				nreq ? req->data : NULL, nreq, sealed,
				sealed + len)) {
			free(sealed);
			return -EIO;
		}
		iov[n].iov_base = sealed;
		iov[n++].iov_len = len + SEAL_TAG_SIZE;
	} else {
		if (npre) {
			iov[n].iov_base = pre->data;
			iov[n++].iov_len = npre;
		}
		if (nreq) {
			iov[n].iov_base = req->data;
			iov[n++].iov_len = nreq;
		}
	}
	while (n > 0) {
		struct msghdr mh = { .msg_iov = v, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		while (n > 0 && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			n--;
		}
		if (n > 0) {
			v->iov_base = (uint8_t *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	free(sealed);
	return ret;
}

int auth_client(int fd, const uint8_t key[CELLKEY_SIZE], struct seal **tx,
		struct seal **rx, char *err, size_t errsz)
{
	struct msg_auth_req q = { .magic = CAIRN_MAGIC,
				  .version = CAIRN_PROTO_VERSION };
	struct msg_auth_rep rep;
	uint8_t proof[SEAL_PROOF_SIZE], *payload = NULL;
	struct wire_hdr h;
	struct wbuf w;
	int ret;

	*tx = *rx = NULL;
	cellkey_id(key, q.key_id);
	if (seal_random(q.nonce, sizeof(q.nonce))) {
		snprintf(err, errsz, "no random bytes for the handshake");
		return -EIO;
	}
	wbuf_init(&w);
	msg_encode(OP_AUTH, 0, &w, &q);
	ret = w.err ? w.err : frame_send(fd, NULL, OP_AUTH, 0, 0, NULL, &w);
	wbuf_free(&w);
	if (ret == 0)
		ret = frame_read(fd, NULL, &h, &payload);
	if (ret) {
		snprintf(err, errsz, "%s",
			 ret == -EAGAIN ? "no answer to AUTH (timed out)" :
			 ret == -EPIPE ? "connection closed during the "
					 "handshake (a server older than "
					 "protocol 7?)" :
			 ret == -EMSGSIZE ? "the peer is not a Cairn server "
					    "(its answer is not a Cairn frame)" :
					 strerror(-ret));
		free(payload);
		return ret;
	}
	if (h.op != OP_AUTH || !(h.flags & WF_REPLY) || h.id != 0) {
		free(payload);
		snprintf(err, errsz, "unexpected answer to AUTH (not a Cairn "
			 "server?)");
		return -EPROTO;
	}
	if (h.status) {
		free(payload);
		snprintf(err, errsz, "the server refused the handshake: %s",
			 h.status == -EPROTONOSUPPORT ?
			 "it speaks another protocol version" :
			 h.status == -EACCES ?
			 "it does not know this key (not its cell key, nor a "
			 "key it exports)" :
			 strerror(-h.status));
		return h.status;
	}
	ret = msg_decode(OP_AUTH, 1, payload, h.len, &rep, NULL);
	free(payload);
	if (ret) {
		snprintf(err, errsz, "malformed AUTH reply");
		return -EPROTO;
	}
	seal_proof(key, q.nonce, rep.nonce, proof);
	if (!seal_proof_ok(proof, rep.proof)) {
		snprintf(err, errsz, "the server does not prove it holds this "
			 "cell's key: the key given is not its cell key "
			 "(DATA/cell.key on the server), or this is not the "
			 "server meant");
		return -EACCES;
	}
	*tx = seal_new(key, q.nonce, rep.nonce, SEAL_C2S, 1);
	*rx = seal_new(key, q.nonce, rep.nonce, SEAL_S2C, 0);
	if (!*tx || !*rx) {
		seal_free(*tx);
		seal_free(*rx);
		*tx = *rx = NULL;
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

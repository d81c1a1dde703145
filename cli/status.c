/*
 * status.c - `cairn status`: print a server's counters.
 *
 * Speaks the protocol directly (lib/wire.h, lib/net.h): HELLO, then
 * STATUS, reading replies in order and skipping any pushed frame.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../lib/net.h"
#include "../lib/proto.h"
#include "../lib/wire.h"
#include "cli.h"

#define STATUS_TIMEOUT_MS 5000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cairn status [HOST[:PORT]]\n"
		"\n"
		"Print the counters of the server at HOST:PORT (default "
		"127.0.0.1:%d),\none `key value` pair per line.\n",
		CAIRN_DEFAULT_PORT);
}

/*
 * Send request op (payload req, may be empty) with id and wait for its
 * reply. Returns the reply status, or a transport error (< -4095 never;
 * transport errors are reported through *terr as non-zero). On success
 * *payload is malloc'ed (NULL when empty).
 */
static int call(int fd, uint16_t op, uint32_t id, const struct wbuf *req,
		uint8_t **payload, size_t *len, int *terr)
{
	struct wbuf w;
	struct wire_hdr h;
	uint8_t hb[WIRE_HDR_SIZE];
	size_t at;
	int ret;

	*payload = NULL;
	*len = 0;
	*terr = 0;
	wbuf_init(&w);
	at = wire_frame_begin(&w, op, 0, id, 0);
	if (req && req->len)
		wire_put_bytes(&w, req->data, req->len);
	wire_frame_end(&w, at);
	ret = w.err ? w.err : net_write_full(fd, w.data, w.len);
	wbuf_free(&w);
	if (ret)
		goto fail;
	for (;;) {
		ret = net_read_full(fd, hb, sizeof(hb));
		if (ret)
			goto fail;
		ret = wire_hdr_decode(hb, &h);
		if (ret)
			goto fail;
		uint8_t *p = h.len ? malloc(h.len) : NULL;
		if (h.len && !p) {
			ret = -ENOMEM;
			goto fail;
		}
		ret = net_read_full(fd, p, h.len);
		if (ret) {
			free(p);
			goto fail;
		}
		if ((h.flags & WF_REPLY) && h.id == id && h.op == op) {
			*payload = p;
			*len = h.len;
			return h.status;
		}
		free(p); /* a push (callback break) or something else */
	}
fail:
	*terr = ret;
	return ret;
}

int cmd_status(int argc, char **argv)
{
	char host[256], err[512];
	const char *addr = "127.0.0.1";
	uint8_t client_id[16], *p = NULL;
	struct timeval tv = { .tv_sec = STATUS_TIMEOUT_MS / 1000 };
	struct wbuf req;
	struct rbuf r;
	size_t len, tlen;
	const char *text;
	int fd, port, ret, terr, rc = 1;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		usage(stderr);
		return 2;
	}
	if (argc == 2)
		addr = argv[1];
	if (net_parse_addr(addr, host, sizeof(host), &port,
			   CAIRN_DEFAULT_PORT)) {
		fprintf(stderr, "cairn status: bad address '%s'\n", addr);
		usage(stderr);
		return 2;
	}
	fd = net_connect(host, port, STATUS_TIMEOUT_MS, err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "cairn status: %s\n", err);
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getrandom(client_id, sizeof(client_id), 0) != sizeof(client_id))
		memset(client_id, 0x5a, sizeof(client_id));

	wbuf_init(&req);
	wire_put_u32(&req, CAIRN_MAGIC);
	wire_put_u32(&req, CAIRN_PROTO_VERSION);
	wire_put_bytes(&req, client_id, sizeof(client_id));
	wire_put_u32(&req, 0);
	ret = call(fd, OP_HELLO, 1, &req, &p, &len, &terr);
	wbuf_free(&req);
	free(p);
	p = NULL;
	if (terr)
		goto transport;
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: server refused HELLO: "
			"%s\n", host, port, strerror(-ret));
		goto out;
	}
	ret = call(fd, OP_STATUS, 2, NULL, &p, &len, &terr);
	if (terr)
		goto transport;
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: STATUS failed: %s\n",
			host, port, strerror(-ret));
		goto out;
	}
	rbuf_init(&r, p, len);
	text = wire_get_blob(&r, &tlen, WIRE_MAX_PAYLOAD);
	if (wire_get_end(&r)) {
		fprintf(stderr, "cairn status: %s:%d: malformed STATUS "
			"reply\n", host, port);
		goto out;
	}
	fwrite(text, 1, tlen, stdout);
	rc = fflush(stdout) ? 1 : 0;
	goto out;
transport:
	fprintf(stderr, "cairn status: %s:%d: %s\n", host, port,
		terr == -EPIPE ? "connection closed by server"
		: terr == -EAGAIN ? "no reply within 5 s"
		: strerror(-terr));
out:
	free(p);
	close(fd);
	return rc;
}

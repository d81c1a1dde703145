/*
 * status.c - `cairn status`: print a server's counters.
 *
 * Speaks the protocol directly (lib/msg.h, lib/net.h): HELLO, then
 * STATUS, reading replies in order and skipping any pushed frame. The
 * HELLO reply is not decoded: a server that refused it says so in the
 * status, and STATUS's reply is what is shown.
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
#include "../lib/msg.h"
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
 * Send request op (the op's request struct m) with id and wait for its
 * reply. Returns the reply status, or a transport error (< -4095 never;
 * transport errors are reported through *terr as non-zero). On success
 * *payload is malloc'ed (NULL when empty).
 */
static int call(int fd, uint16_t op, uint32_t id, const void *m,
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
	msg_encode(op, 0, &w, m);
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
	struct msg_hello_req hello = { .magic = CAIRN_MAGIC,
				       .version = CAIRN_PROTO_VERSION };
	struct msg_empty none = { 0 };
	struct msg_status_rep st;
	const char *why = "";
	size_t len;
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
	memcpy(hello.client_id, client_id, sizeof(client_id));

	ret = call(fd, OP_HELLO, 1, &hello, &p, &len, &terr);
	free(p);
	p = NULL;
	if (terr)
		goto transport;
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: server refused HELLO: "
			"%s\n", host, port, strerror(-ret));
		goto out;
	}
	ret = call(fd, OP_STATUS, 2, &none, &p, &len, &terr);
	if (terr)
		goto transport;
	if (ret) {
		fprintf(stderr, "cairn status: %s:%d: STATUS failed: %s\n",
			host, port, strerror(-ret));
		goto out;
	}
	if (msg_decode(OP_STATUS, 1, p, len, &st, &why)) {
		fprintf(stderr, "cairn status: %s:%d: malformed STATUS "
			"reply: %s\n", host, port, why);
		goto out;
	}
	fwrite(st.text.p, 1, st.text.len, stdout);
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

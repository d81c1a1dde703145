/*
 * fuzz_frame - the frame layer: wire_hdr_decode on a byte stream as a
 * socket delivers it, and a walk over the payloads it announces.
 *
 * Input: bytes as read from a Cairn connection, any number of frames back
 * to back (tests/fuzz/record.py saves single frames and the first bytes of
 * whole connections). The walk does what a reader does: decode 16 bytes of
 * header, stop on a refused header or a frame cut short, take len payload
 * bytes, repeat. For every header:
 *   - wire_hdr_decode refuses exactly the lengths past WIRE_MAX_PAYLOAD;
 *   - wire_hdr_encode gives back the 16 bytes read;
 *   - wire_frame_begin + the payload + wire_frame_end give back the frame.
 * Each payload is copied into a buffer of its own exact size (so ASan sees
 * an over-read into the next frame) and, for a known opcode and status 0,
 * decoded with msg_decode in the direction the flags say; an accepted one
 * must encode back to the same bytes (fuzz_msg checks much more of that).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../lib/msg.h"

static void fail(const char *what, size_t off)
{
	fprintf(stderr, "fuzz_frame: frame at byte %zu: %s\n", off, what);
	abort();
}

static void check_payload(const struct wire_hdr *h, const uint8_t *src,
			  size_t off)
{
	uint8_t *p = malloc(h->len ? h->len : 1);
	union msg_any *m = malloc(sizeof(*m));
	int reply = !!(h->flags & WF_REPLY);
	struct wbuf w;

	if (!p || !m)
		abort();
	memcpy(p, src, h->len);
	if (h->status == 0 &&
	    msg_decode(h->op, reply, p, h->len, m, NULL) == 0) {
		wbuf_init(&w);
		msg_encode(h->op, reply, &w, m);
		if (w.err || w.len != h->len ||
		    (h->len && memcmp(w.data, p, h->len)))
			fail("decoded payload does not encode back", off);
		wbuf_free(&w);
	}
	free(m);
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (size - off >= WIRE_HDR_SIZE) {
		uint8_t hb[WIRE_HDR_SIZE], again[WIRE_HDR_SIZE];
		struct wire_hdr h;
		struct wbuf w;
		size_t at;
		int rc;

		/* Its own copy, so reading past 16 bytes is seen. */
		memcpy(hb, data + off, WIRE_HDR_SIZE);
		rc = wire_hdr_decode(hb, &h);
		wire_hdr_encode(again, &h);
		if (memcmp(hb, again, WIRE_HDR_SIZE))
			fail("wire_hdr_encode does not give the header back",
			     off);
		if ((rc != 0) != (h.len > WIRE_MAX_PAYLOAD))
			fail("wire_hdr_decode refuses a length it should take "
			     "or takes one it should refuse", off);
		if (rc) {
			if (rc != -EMSGSIZE)
				fail("wire_hdr_decode error is not -EMSGSIZE",
				     off);
			break;
		}
		if (h.len > size - off - WIRE_HDR_SIZE)
			break; /* cut short: a reader would wait for more */

		wbuf_init(&w);
		at = wire_frame_begin(&w, h.op, h.flags, h.id, h.status);
		wire_put_bytes(&w, data + off + WIRE_HDR_SIZE, h.len);
		wire_frame_end(&w, at);
		if (w.err || at != 0 || w.len != WIRE_HDR_SIZE + h.len ||
		    memcmp(w.data, data + off, w.len))
			fail("wire_frame_begin/end do not give the frame back",
			     off);
		wbuf_free(&w);

		check_payload(&h, data + off + WIRE_HDR_SIZE, off);
		off += WIRE_HDR_SIZE + h.len;
	}
	return 0;
}

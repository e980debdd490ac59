/* Fuzz the Felix binary payload decoders (publish batch, publish ack,
 * event batches). Input: u16 frame flags, one byte choosing the limits,
 * then the payload, copied to an exact-size buffer. Every decoder is tried
 * (the wrong layouts must refuse); what one accepts must lie inside the
 * payload and re-encode to exactly the same frame, since each binary layout
 * has one encoding per value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/felix_binary.h"
#include "wire/felix_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok) {
		abort();
	}
}

static void check_view(struct felix_view v, const uint8_t *p, size_t len)
{
	check(v.len == 0 || (v.data >= p && v.data + v.len <= p + len));
}

/* The records as an array of views (malloc'd), each inside p[0..len). */
static struct felix_view *gather(const struct felix_records *r,
                                 const uint8_t *p, size_t len)
{
	struct felix_records_iter it;
	struct felix_view *v = malloc((r->count + 1) * sizeof *v);
	uint32_t n = 0;
	check(v != NULL);
	felix_records_iter_init(&it, r);
	while (felix_records_next(&it, &v[n])) {
		check_view(v[n], p, len);
		n++;
	}
	check(n == r->count);
	return v;
}

static void check_same_frame(const struct wbuf *b, uint16_t flags,
                             const uint8_t *p, size_t len)
{
	uint8_t h[FELIX_FRAME_HEADER_LEN];
	felix_frame_header_encode(flags, (uint32_t)len, h);
	check(b->len == FELIX_FRAME_HEADER_LEN + len);
	check(memcmp(b->data, h, sizeof h) == 0);
	check(memcmp(b->data + FELIX_FRAME_HEADER_LEN, p, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct felix_binary_limits lim;
	const struct felix_binary_limits *limp = &lim;
	struct felix_publish_batch pb;
	struct felix_publish_ack a;
	struct felix_event_batch e;
	enum felix_frame_kind kind;
	struct wbuf b;
	uint16_t flags;
	uint8_t *p;
	size_t len;
	char err[256];
	int ok_pb, ok_a, ok_e, valid;

	if (size < 3) {
		return 0;
	}
	flags = (uint16_t)(data[0] << 8 | data[1]);
	if (data[2] == 0xff) {
		limp = NULL;
	} else {
		lim.max_records = data[2] & 15;
		lim.max_record_len = (uint32_t)(data[2] >> 4) * 8;
	}
	len = size - 3;
	p = malloc(len ? len : 1);
	check(p != NULL);
	memcpy(p, data + 3, len);
	valid = felix_frame_flags_check(flags, &kind, NULL, 0) == 0;

	ok_pb = felix_publish_batch_decode(flags, p, len, limp, &pb, err,
	                                   sizeof err) == 0;
	ok_a =
	    felix_publish_ack_decode(flags, p, len, &a, err, sizeof err) == 0;
	ok_e = felix_event_batch_decode(flags, p, len, limp, &e, err,
	                                sizeof err) == 0;
	check(ok_pb + ok_a + ok_e <= 1);
	check(!ok_pb || (valid && kind == FELIX_FRAME_PUBLISH_BATCH));
	check(!ok_a || (valid && kind == FELIX_FRAME_PUBLISH_ACK));
	check(!ok_e || (valid && (kind == FELIX_FRAME_EVENT_BATCH ||
	                          kind == FELIX_FRAME_EVENT_BATCH_SHARED)));

	wbuf_init(&b);
	if (ok_pb) {
		struct felix_view *v = gather(&pb.records, p, len);
		uint64_t rid;
		check_view(pb.key, p, len);
		check_view(pb.tenant_id, p, len);
		check_view(pb.namespace, p, len);
		check_view(pb.stream, p, len);
		check(felix_publish_batch_peek_request_id(
		          flags, p, len, &rid) == (pb.acked ? 0 : -1));
		check(!pb.acked || rid == pb.request_id);
		check(felix_publish_batch_encode(&b, &pb, v,
		                                 pb.records.count) == 0);
		check_same_frame(&b, flags, p, len);
		free(v);
	}
	if (ok_a) {
		check_view(a.message, p, len);
		check_view(a.owner_node_id, p, len);
		check_view(a.owner_addr, p, len);
		check(felix_publish_ack_encode(&b, &a) == 0);
		check_same_frame(&b, flags, p, len);
	}
	if (ok_e) {
		struct felix_view *v = gather(&e.records, p, len);
		check(felix_event_batch_encode(&b, &e, v, e.records.count) ==
		      0);
		check_same_frame(&b, flags, p, len);
		free(v);
	}
	wbuf_free(&b);
	free(p);
	return 0;
}

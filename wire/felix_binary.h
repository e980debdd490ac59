/* Felix v1 binary payloads: publish batch (0x0001, with the acked 0x0008 and
 * keyed 0x0040 prefixes), publish ack (0x0010, with the owner 0x0080
 * suffix), and event batches, legacy per-subscriber (0x0002) and shared
 * (0x0004), each with or without a base offset (0x0020).
 *
 * Decoders never copy or allocate: every string, key and record they return
 * is a view into the payload buffer they were given, valid as long as it
 * is. They check every length against the payload, the record count and
 * sizes against a limits struct, names as UTF-8, and refuse trailing bytes.
 * Encoders append a whole frame (header included) to a wbuf. */
#ifndef WIRE_FELIX_BINARY_H
#define WIRE_FELIX_BINARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"

/* A borrowed byte range. */
struct felix_view {
	const uint8_t *data;
	size_t len;
};

/* Decoding limits. A NULL limits pointer means the defaults. */
struct felix_binary_limits {
	uint32_t max_records;    /* records in one batch */
	uint32_t max_record_len; /* bytes in one record */
};
#define FELIX_BINARY_DEFAULT_MAX_RECORDS 65536u
#define FELIX_BINARY_DEFAULT_MAX_RECORD_LEN (4u * 1024 * 1024)

/* How a publish asks to be acknowledged. On the binary path only the acked
 * prefix carries a mode (1 or 2); JSON publishes spell all three. */
enum felix_ack_mode {
	FELIX_ACK_NONE = 0,
	FELIX_ACK_PER_MESSAGE = 1,
	FELIX_ACK_PER_BATCH = 2,
};

/* The records of a batch: `count` entries of u32 length + bytes, already
 * bounds-checked by the decoder. Walk them with felix_records_next(). */
struct felix_records {
	const uint8_t *data;
	size_t len;
	uint32_t count;
};

struct felix_records_iter {
	const uint8_t *p;
	const uint8_t *end;
	uint32_t left;
};

void felix_records_iter_init(struct felix_records_iter *it,
                             const struct felix_records *r);
/* The next record as a view; false when there are no more. */
bool felix_records_next(struct felix_records_iter *it, struct felix_view *out);

/* Binary publish batch. */
struct felix_publish_batch {
	bool acked; /* 0x0008: request_id and ack_mode present */
	uint64_t request_id;
	enum felix_ack_mode ack_mode; /* PER_MESSAGE or PER_BATCH if acked */
	bool keyed;                   /* 0x0040: key present (may be empty) */
	struct felix_view key;
	struct felix_view tenant_id; /* UTF-8 */
	struct felix_view namespace; /* UTF-8 */
	struct felix_view stream;    /* UTF-8 */
	struct felix_records records;
};

/* Decode a publish batch payload; `flags` are the frame's (0x0001 with any
 * of 0x0008, 0x0040). 0, or -1 with a message in err. */
int felix_publish_batch_decode(uint16_t flags, const uint8_t *payload,
                               size_t len,
                               const struct felix_binary_limits *limits,
                               struct felix_publish_batch *out, char *err,
                               size_t errlen);

/* Read the request_id of an acked publish without parsing the rest, so a
 * malformed body can still be answered with an ack the client correlates.
 * 0 when flags carry 0x0008 and the payload holds the id, -1 otherwise. */
int felix_publish_batch_peek_request_id(uint16_t flags, const uint8_t *payload,
                                        size_t len, uint64_t *request_id);

/* Append a publish batch frame: flags follow b->acked and b->keyed, the
 * records are payloads[0..count) (b->records is not read). -1 if a name
 * or key exceeds its u16 length, a record or the frame exceeds u32, the
 * ack mode is not 1 or 2 on an acked batch, or memory ran out. */
int felix_publish_batch_encode(struct wbuf *out,
                               const struct felix_publish_batch *b,
                               const struct felix_view *payloads,
                               uint32_t count);

/* Binary publish ack. */
#define FELIX_ACK_STATUS_OK 0
#define FELIX_ACK_STATUS_ERROR 1

struct felix_publish_ack {
	uint8_t status; /* FELIX_ACK_STATUS_* */
	uint64_t request_id;
	struct felix_view message; /* UTF-8, empty on success */
	bool has_owner;            /* 0x0080: the batch was forwarded */
	struct felix_view owner_node_id;
	bool has_owner_addr; /* an empty address on the wire is absent */
	struct felix_view owner_addr;
	uint64_t owner_generation;
};

int felix_publish_ack_decode(uint16_t flags, const uint8_t *payload, size_t len,
                             struct felix_publish_ack *out, char *err,
                             size_t errlen);
/* Append an ack frame (0x0010, plus 0x0080 when a->has_owner). */
int felix_publish_ack_encode(struct wbuf *out,
                             const struct felix_publish_ack *a);

/* Binary event batch. */
struct felix_event_batch {
	bool shared;              /* 0x0004; else legacy 0x0002 */
	uint64_t subscription_id; /* legacy form only */
	bool has_base_offset;     /* 0x0020 */
	uint64_t base_offset;     /* offset of record 0; record i is +i */
	struct felix_records records;
};

int felix_event_batch_decode(uint16_t flags, const uint8_t *payload, size_t len,
                             const struct felix_binary_limits *limits,
                             struct felix_event_batch *out, char *err,
                             size_t errlen);
/* Append an event batch frame; flags follow e->shared and
 * e->has_base_offset, records are payloads[0..count). */
int felix_event_batch_encode(struct wbuf *out,
                             const struct felix_event_batch *e,
                             const struct felix_view *payloads, uint32_t count);

#endif /* WIRE_FELIX_BINARY_H */

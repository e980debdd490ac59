/* FerricFlow routing (reference/flow.md section 3): which partition a flow
 * lives in, that partition's hash tag, and the FSNP slot and shard of the
 * tag. Pure functions, shared by flow/ and the client library.
 *
 *   no partition key          partition "__flow_auto__:<crc32(id) % 256>",
 *                             tag "fa:<n>"
 *   partition key pk          partition pk, tag "f:" +
 *                             base64url-nopad(SHA-256(pk))
 *   pk "__flow_auto__:<n>"    (n 0..255, no leading zeros) as auto bucket n
 *
 * The slot is fsnp_slot_of("{" tag "}"), i.e. crc32(tag) & 1023; the shard
 * owning it follows wire/fsnp_slot.h. Known answers: id "order-1" -> tag
 * "fa:239" -> slot 794; pk "tenant-a" -> tag
 * "f:gKcHr33HfuEij5EnGA85ZINeW-tMSrDYEvD-dZNXmzo" -> slot 914. */
#ifndef WIRE_FLOW_ROUTE_H
#define WIRE_FLOW_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLOW_AUTO_PREFIX "__flow_auto__:"
/* Longest tag ("f:" + 43 characters) and partition of an auto bucket,
 * with a NUL. */
#define FLOW_TAG_MAX 48
#define FLOW_AUTO_PARTITION_MAX 20

/* The auto bucket of a flow id. */
unsigned flow_route_bucket(const uint8_t *id, size_t len);

/* Whether pk is a literal auto partition; *bucket gets its number. */
bool flow_route_is_auto(const uint8_t *pk, size_t len, unsigned *bucket);

/* "__flow_auto__:<bucket>" into out (FLOW_AUTO_PARTITION_MAX bytes, NUL
 * terminated); returns the length. */
size_t flow_route_auto_partition(unsigned bucket, char *out);

/* The hash tag of a partition (explicit pk, or an auto partition) into
 * out (FLOW_TAG_MAX bytes, NUL terminated); returns the length. */
size_t flow_route_tag(const uint8_t *partition, size_t len, char *out);

/* The partition of a flow: pk when given (pk != NULL), else the id's auto
 * partition; written to *part (pointing either at pk or at `buf`, which
 * holds FLOW_AUTO_PARTITION_MAX bytes). */
void flow_route_partition(const uint8_t *id, size_t idlen, const uint8_t *pk,
                          size_t pklen, char *buf, const uint8_t **part,
                          size_t *partlen);

/* The FSNP slot (0..1023) of a partition and the shard owning it among
 * shard_count shards. */
unsigned flow_route_slot(const uint8_t *partition, size_t len);
unsigned flow_route_shard(const uint8_t *partition, size_t len,
                          unsigned shard_count);

#endif

/* FerricFlow routing (flow_route.h). */
/* SHA256_Init/Update/Final hash directly; OpenSSL 3's one-shot SHA256()
 * fetches the digest by name on every call, ~4k instructions more than
 * the hash itself, paid by every Flow request's routing. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "wire/flow_route.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "wire/fsnp_slot.h"

unsigned flow_route_bucket(const uint8_t *id, size_t len)
{
	return fsnp_slot_crc32(id, len) % 256u;
}

bool flow_route_is_auto(const uint8_t *pk, size_t len, unsigned *bucket)
{
	size_t pl = sizeof FLOW_AUTO_PREFIX - 1;
	unsigned n = 0;

	if (len <= pl || len > pl + 3 ||
	    memcmp(pk, FLOW_AUTO_PREFIX, pl) != 0) {
		return false;
	}
	if (pk[pl] == '0' && len > pl + 1) {
		return false; /* leading zero */
	}
	for (size_t i = pl; i < len; i++) {
		if (pk[i] < '0' || pk[i] > '9') {
			return false;
		}
		n = n * 10 + (unsigned)(pk[i] - '0');
	}
	if (n > 255) {
		return false;
	}
	*bucket = n;
	return true;
}

size_t flow_route_auto_partition(unsigned bucket, char *out)
{
	return (size_t)snprintf(out, FLOW_AUTO_PARTITION_MAX,
	                        FLOW_AUTO_PREFIX "%u", bucket % 256u);
}

static size_t b64url(const uint8_t *p, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrst"
	                        "uvwxyz0123456789-_";
	size_t o = 0, i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
	}
	out[o] = '\0';
	return o;
}

size_t flow_route_tag(const uint8_t *partition, size_t len, char *out)
{
	unsigned bucket;
	uint8_t md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;

	if (flow_route_is_auto(partition, len, &bucket)) {
		return fsnp_slot_flow_bucket_key(bucket, out);
	}
	(void)SHA256_Init(&ctx);
	(void)SHA256_Update(&ctx, partition, len);
	(void)SHA256_Final(md, &ctx);
	out[0] = 'f';
	out[1] = ':';
	return 2 + b64url(md, sizeof md, out + 2);
}

void flow_route_partition(const uint8_t *id, size_t idlen, const uint8_t *pk,
                          size_t pklen, char *buf, const uint8_t **part,
                          size_t *partlen)
{
	if (pk != NULL) {
		*part = pk;
		*partlen = pklen;
		return;
	}
	*partlen = flow_route_auto_partition(flow_route_bucket(id, idlen), buf);
	*part = (const uint8_t *)buf;
}

unsigned flow_route_slot(const uint8_t *partition, size_t len)
{
	char tag[FLOW_TAG_MAX];
	size_t n = flow_route_tag(partition, len, tag);

	return fsnp_slot_crc32(tag, n) & (FSNP_SLOTS - 1);
}

unsigned flow_route_shard(const uint8_t *partition, size_t len,
                          unsigned shard_count)
{
	return fsnp_slot_shard(flow_route_slot(partition, len), shard_count);
}

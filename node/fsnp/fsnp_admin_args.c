/* The pure half of FSNP cluster administration: the `args` lists of admin
 * bodies, node names (ID@HOST:PORT) and numbers. No I/O, no state. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "node/fsnp/fsnp_admin.h"

int fsnp_admin_args_from_list(const struct fsnp_val *list,
                              struct fsnp_admin_args *out, char *err,
                              size_t errlen)
{
	struct fsnp_iter it;
	struct fsnp_val v;
	out->n = 0;
	if (list->tag != FSNP_ARRAY) {
		snprintf(err, errlen, "ERR native field args must be a list");
		return -1;
	}
	if (list->as.count > FSNP_ADMIN_ARGS_MAX) {
		snprintf(err, errlen,
		         "ERR native field args has %" PRIu32
		         " elements, at most %d",
		         list->as.count, FSNP_ADMIN_ARGS_MAX);
		return -1;
	}
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &v)) {
		uint32_t i = out->n;
		if (v.tag == FSNP_BIN) {
			out->v[i] = v.as.bin;
		} else if (v.tag == FSNP_I64 || v.tag == FSNP_U64) {
			if (v.tag == FSNP_I64) {
				snprintf(out->num[i], sizeof out->num[i],
				         "%" PRId64, v.as.i);
			} else {
				snprintf(out->num[i], sizeof out->num[i],
				         "%" PRIu64, v.as.u);
			}
			out->v[i].ptr = (const uint8_t *)out->num[i];
			out->v[i].len = strlen(out->num[i]);
		} else {
			snprintf(err, errlen,
			         "ERR native field args[%" PRIu32
			         "] must be binary",
			         i);
			return -1;
		}
		out->n++;
	}
	return 0;
}

int fsnp_admin_args_from_body(const struct fsnp_val *body,
                              struct fsnp_admin_args *out, char *err,
                              size_t errlen)
{
	struct fsnp_val list;
	out->n = 0;
	if (body->tag != FSNP_MAP) {
		snprintf(err, errlen, "ERR native body must be a map");
		return -1;
	}
	if (fsnp_map_get(body, "args", &list) != 0 || fsnp_val_is_nil(&list)) {
		return 0;
	}
	return fsnp_admin_args_from_list(&list, out, err, errlen);
}

int fsnp_admin_parse_u64(const void *p, size_t len, uint64_t *out)
{
	const uint8_t *s = p;
	uint64_t v = 0;
	if (len == 0 || len > 20) {
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return -1;
		}
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10) {
			return -1;
		}
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int fsnp_admin_parse_node(const void *p, size_t len,
                          struct fsnp_admin_node *out, char *err, size_t errlen)
{
	const char *s = p;
	const char *at = memchr(s, '@', len);
	const char *h, *end = s + len, *colon;
	size_t hlen;
	uint64_t port;
	if (at == NULL) {
		snprintf(err, errlen, "ERR node must be ID@HOST:PORT (no '@')");
		return -1;
	}
	if (fsnp_admin_parse_u64(s, (size_t)(at - s), &out->id) != 0 ||
	    out->id == 0) {
		snprintf(err, errlen,
		         "ERR node: the ID before '@' must be a positive "
		         "integer");
		return -1;
	}
	h = at + 1;
	if (h < end && *h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));
		if (rb == NULL || rb + 1 >= end || rb[1] != ':') {
			snprintf(
			    err, errlen,
			    "ERR node: '[V6]' must be followed by ':PORT'");
			return -1;
		}
		h++;
		hlen = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = NULL;
		for (const char *q = end; q > h; q--) {
			if (q[-1] == ':') {
				colon = q - 1;
				break;
			}
		}
		if (colon == NULL) {
			snprintf(err, errlen,
			         "ERR node: the address must be HOST:PORT");
			return -1;
		}
		hlen = (size_t)(colon - h);
		if (memchr(h, ':', hlen) != NULL) {
			snprintf(err, errlen,
			         "ERR node: an IPv6 host must be in brackets");
			return -1;
		}
	}
	if (hlen == 0 || hlen >= sizeof out->host ||
	    memchr(h, '\0', hlen) != NULL || memchr(h, '@', hlen) != NULL) {
		snprintf(err, errlen, "ERR node: bad HOST");
		return -1;
	}
	if (fsnp_admin_parse_u64(colon + 1, (size_t)(end - colon - 1), &port) !=
	        0 ||
	    port == 0 || port > 65535) {
		snprintf(err, errlen, "ERR node: PORT must be 1..65535");
		return -1;
	}
	memcpy(out->host, h, hlen);
	out->host[hlen] = '\0';
	out->port = (uint16_t)port;
	return 0;
}

int fsnp_admin_word_eq(struct fsnp_bytes b, const char *word)
{
	size_t n = strlen(word);
	return b.len == n && strncasecmp((const char *)b.ptr, word, n) == 0;
}

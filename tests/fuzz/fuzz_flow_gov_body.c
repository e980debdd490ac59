/* Fuzz target: the governance body decoder (flow/flow_gov_body.h), the
 * governance routing and the merge of fanned-out listings
 * (flow/flow_gov.h).
 *
 * Input: a byte choosing the governance opcode, then a body. Whatever the
 * body, decoding ends in success (every positional field present, texts
 * non-empty, integers within 0..2^53-1) or an error with status 1 or 6 and
 * an "ERR" message, and the shared Flow decoder agrees on success or
 * failure; routing never reads out of bounds; a body that is a list is
 * merged as per-group replies without reading out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_gov.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool err_ok(const struct flow_err *e)
{
	return (e->status == FLOW_STATUS_ERROR ||
	        e->status == FLOW_STATUS_BAD_REQUEST) &&
	       strncmp(e->msg, "ERR ", 4) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned n_ops =
	    FSNP_OP_FLOW_BUDGET_RELEASE - FSNP_OP_FLOW_EFFECT_RESERVE + 1;
	struct gov_req q;
	struct flow_req req;
	struct flow_err err, err2;
	struct fsnp_val body;
	uint8_t *copy;
	size_t n;
	uint16_t op;
	int rv;

	if (size < 1) {
		return 0;
	}
	op = (uint16_t)(FSNP_OP_FLOW_EFFECT_RESERVE + data[0] % n_ops);
	CHECK(flow_gov_opcode(op));
	n = size - 1;
	copy = malloc(n ? n : 1);
	CHECK(copy != NULL);
	memcpy(copy, data + 1, n);
	if (fsnp_value_decode_body(copy, n, NULL, &body) != 0) {
		CHECK(flow_body_decode_bytes(op, copy, n, &req, &err) != 0);
		CHECK(err_ok(&err));
		free(copy);
		return 0;
	}
	rv = flow_gov_body_decode(op, &body, &q, &err);
	if (rv != 0) {
		CHECK(err_ok(&err));
		/* The shared decoder refuses it too (maybe earlier). */
		CHECK(flow_body_decode(op, &body, &req, &err2) != 0);
		CHECK(err_ok(&err2));
	} else {
		for (unsigned f = 0; f < GF_COUNT; f++) {
			if (q.f[f].set && q.f[f].v.tag == FSNP_I64) {
				CHECK(q.f[f].i >= 0 && q.f[f].i <= FLOW_MAXI);
			}
		}
		if (flow_body_decode(op, &body, &req, &err2) == 0) {
			char buf[FLOW_AUTO_PARTITION_MAX];
			const uint8_t *part;
			size_t plen;
			flow_cmd_partition(&req, 7, buf, &part, &plen);
			if (plen > 0) {
				CHECK(part != NULL);
				(void)flow_route_slot(part, plen);
			}
		} else {
			CHECK(err_ok(&err2));
		}
	}
	if (body.tag == FSNP_ARRAY && body.as.count <= 64) {
		struct fsnp_val vals[64];
		struct fsnp_iter it;
		struct wbuf b;
		struct fsnp_writer w;
		size_t k = 0;
		static const uint16_t lists[] = {
		    FSNP_OP_FLOW_APPROVAL_LIST,
		    FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, FSNP_OP_FLOW_BUDGET_LIST,
		    FSNP_OP_FLOW_LIMIT_LIST};
		uint16_t lop = lists[data[0] % 4];
		struct fsnp_val empty = {.tag = FSNP_NIL};
		fsnp_iter_init(&it, &body);
		while (k < 64 && fsnp_iter_next(&it, NULL, &vals[k])) {
			k++;
		}
		CHECK(flow_gov_body_decode(lop, &empty, &q, &err) == 0);
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		if (flow_gov_merge(lop, &q, vals, k, &w) == 0) {
			CHECK(fsnp_w_finish(&w) == 0 || b.oom);
		}
		wbuf_free(&b);
	}
	free(copy);
	return 0;
}

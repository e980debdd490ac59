/* Fuzz target: the Flow body decoders (flow/flow_body.h) and the command
 * envelope (flow/flow.h).
 *
 * Input: a byte choosing the opcode (among the supported ones), then a
 * body. Whatever the body, decoding ends in success or in an error with
 * status 1 or 6 and an "ERR" message; a decoded body encodes into a
 * command that decodes back to the same opcode and body, whose truncations
 * are refused; batch items decode or fail the same way; the routing of the
 * request never reads out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_schedule.h"
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
	uint16_t ops[64];
	unsigned nops = 0;
	struct flow_req req;
	struct flow_err err;
	struct flow_cmd_meta meta = {FLOW_CLOCK_SKEW_DEFAULT_MS, 42};
	uint8_t *body, *cmd = NULL;
	size_t n, clen;
	uint16_t op;

	for (unsigned o = 0x0200; o <= 0x0258 && nops < 64; o++) {
		/* Schedules have their own target (fuzz_flow_schedule), and
		 * so have FLOW.QUERY bodies (fuzz_fql_parse): the FQL1 binder
		 * checks them, not the Flow body decoder. */
		if (flow_opcode_supported((uint16_t)o) &&
		    !flow_sched_opcode((uint16_t)o) &&
		    o != FSNP_OP_FLOW_QUERY) {
			ops[nops++] = (uint16_t)o;
		}
	}
	if (size < 1) {
		return 0;
	}
	op = ops[data[0] % nops];
	n = size - 1;
	body = malloc(n ? n : 1);
	CHECK(body != NULL);
	memcpy(body, data + 1, n);
	if (flow_body_decode_bytes(op, body, n, &req, &err) != 0) {
		CHECK(err_ok(&err));
		CHECK(flow_cmd_encode(op, body, n, &meta, &cmd, &clen, &err) !=
		      0);
		CHECK(err_ok(&err));
		free(body);
		return 0;
	}
	CHECK(req.opcode == op);
	{
		char buf[FLOW_AUTO_PARTITION_MAX];
		const uint8_t *part;
		size_t plen;
		flow_cmd_partition(&req, 7, buf, &part, &plen);
		if (plen > 0) {
			CHECK(part != NULL);
			CHECK(flow_route_slot(part, plen) < 1024);
		}
	}
	if (req.f[FF_ITEMS].set && req.f[FF_ITEMS].v.tag == FSNP_ARRAY) {
		struct fsnp_iter it;
		struct fsnp_val e;
		struct flow_req item;
		fsnp_iter_init(&it, &req.f[FF_ITEMS].v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (flow_body_decode_item(&req, &e, &item, &err) != 0) {
				CHECK(err_ok(&err));
			}
		}
	}
	CHECK(flow_cmd_encode(op, body, n, &meta, &cmd, &clen, &err) == 0);
	{
		struct flow_cmd c;
		const char *msg;
		CHECK(flow_cmd_decode(cmd, clen, &c, &msg) == 0);
		CHECK(c.opcode == op && c.seed == 42);
		CHECK(c.max_clock_skew_ms == FLOW_CLOCK_SKEW_DEFAULT_MS);
		if (n > 0) {
			CHECK(c.body_len == n && memcmp(c.body, body, n) == 0);
		}
		CHECK(flow_cmd_decode(cmd, clen - 1, &c, &msg) != 0);
	}
	free(cmd);
	free(body);
	return 0;
}

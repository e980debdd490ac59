/* Fuzz target: the FSNP command layer (node/fsnp/fsnp_cmd.c). The first two
 * bytes pick an opcode (or, with the high bit of the first, a COMMAND_EXEC
 * name from the table); the rest is the request body, decoded as a typed
 * value and, for MGET/MSET, as a compact body; GET bodies also through the
 * raw fast path, which must plan exactly as the general path. Whatever
 * parses must give a plan whose parts decode as store commands on a valid
 * group. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/fsnp/fsnp_cmd.h"
#include "store/command.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_plan(const struct fsnp_plan *p, unsigned groups)
{
	uint32_t items = 0;
	for (uint32_t i = 0; i < p->n_parts; i++) {
		struct store_cmd c;
		const char *err = NULL;
		CHECK(p->parts[i].group >= 1 && p->parts[i].group <= groups);
		CHECK(store_cmd_decode(p->parts[i].cmd, p->parts[i].len, &c,
		                       &err) == 0);
		CHECK(c.op == p->op);
		for (uint32_t k = 0; k < p->parts[i].n; k++) {
			CHECK(p->parts[i].pos[k] < p->n_items);
		}
		items += p->parts[i].n;
	}
	if (p->merge == FSNP_MERGE_ORDER) {
		CHECK(items == p->n_items);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsnp_cmd_ctx ctx = {8, 4096, "fuzz-token", NULL};
	struct fsnp_limits lim = {4096, 32};
	struct fsnp_plan plan;
	struct fsnp_cmd_err err;
	struct fsnp_val body;
	if (size < 2) {
		return 0;
	}
	ctx.data_groups = 1 + data[1] % 16;
	if (data[0] & 0x80) {
		const struct fsnp_cmd_info *info =
		    fsnp_cmd_at((size_t)(data[1] % fsnp_cmd_count()));
		if (fsnp_value_decode_body(data + 2, size - 2, &lim, &body) ==
		        0 &&
		    info->kind == FSNP_CMD_KV) {
			if (fsnp_cmd_parse_args(info, &body, &ctx, &plan,
			                        &err) == 0) {
				check_plan(&plan, ctx.data_groups);
				fsnp_plan_free(&plan);
			} else {
				CHECK(err.status >= 1 && err.status <= 6);
			}
		}
		return 0;
	}
	uint16_t opcode = (uint16_t)(0x0100 | (data[0] & 0x7F));
	if (fsnp_value_decode_body(data + 2, size - 2, &lim, &body) == 0) {
		if (fsnp_cmd_parse_body(opcode, &body, &ctx, &plan, &err) ==
		    0) {
			check_plan(&plan, ctx.data_groups);
			fsnp_plan_free(&plan);
		} else {
			CHECK(err.status >= 1 && err.status <= 6);
		}
		uint64_t dl;
		(void)fsnp_cmd_deadline(&body, &dl, &err);
	}
	/* GET's and SET's raw-body fast paths: what they plan must be
	 * exactly what the general path plans from the decoded body. */
	if (opcode == FSNP_OP_GET || opcode == FSNP_OP_SET) {
		struct fsnp_plan fast, slow;
		int rv = opcode == FSNP_OP_GET
		             ? fsnp_cmd_parse_get_fast(data + 2, size - 2, &ctx,
		                                       &fast, &err)
		             : fsnp_cmd_parse_set_fast(data + 2, size - 2, &ctx,
		                                       &fast, &err);
		if (rv == 0) {
			check_plan(&fast, ctx.data_groups);
			CHECK(fsnp_value_decode_body(data + 2, size - 2, &lim,
			                             &body) == 0);
			CHECK(fsnp_cmd_parse_body(opcode, &body, &ctx, &slow,
			                          &err) == 0);
			CHECK(fast.n_parts == slow.n_parts &&
			      fast.op == slow.op);
			for (uint32_t i = 0; i < fast.n_parts; i++) {
				CHECK(fast.parts[i].group ==
				      slow.parts[i].group);
				CHECK(fast.parts[i].len == slow.parts[i].len);
				CHECK(memcmp(fast.parts[i].cmd,
				             slow.parts[i].cmd,
				             fast.parts[i].len) == 0);
			}
			fsnp_plan_free(&fast);
			fsnp_plan_free(&slow);
		} else if (rv < 0) {
			CHECK(err.status >= 1 && err.status <= 6);
		}
	}
	struct fsnp_compact_req cr;
	if ((opcode == FSNP_OP_MGET || opcode == FSNP_OP_MSET) &&
	    fsnp_compact_req_decode(opcode, data + 2, size - 2, 4096, &cr) ==
	        0) {
		if (fsnp_cmd_parse_compact(&cr, &ctx, &plan, &err) == 0) {
			check_plan(&plan, ctx.data_groups);
			fsnp_plan_free(&plan);
		}
	}
	return 0;
}

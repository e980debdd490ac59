/* Fuzz target for the Flow state machine through store apply: the first
 * input byte picks the opcode (among the supported ones), the second
 * advances the entry time, the rest is the body. A body the encoder takes
 * is applied as a command (twice in one entry) and, for reads, served;
 * apply must succeed whatever the body (errors are results with status 1
 * or 6 and an "ERR" message, or governance denial maps), every result must
 * be well formed, and replaying the entry must answer nothing. State
 * accumulates over the run in one database (in $TMPDIR, removed at exit), so
 * later inputs meet the flows earlier ones created. A first byte of 0xF0 or
 * more instead feeds the rest to the leader's own commands (flow_sweep.h,
 * flow_wait.h and the claim peek): a raw max_active_ms sweep applied (and the
 * leader's scan and sweep at that time), a raw scan, a raw next-due read, or
 * a claim body peeked; with 0xF4 or 0xFC, the operations overview read
 * (flow_overview.h), raw and well formed. All must answer well-formed
 * results. */
#include <rocksdb/c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow/flow.h"
#include "flow/flow_gov.h"
#include "flow/flow_overview.h"
#include "flow/flow_schedule.h"
#include "flow/flow_sweep.h"
#include "flow/flow_wait.h"
#include "store/command.h"
#include "wire/fsnp_opcode.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_store_db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_db {
	struct fuzz_store_db base;
	uint64_t index;
	uint64_t now;
};

/* libFuzzer calls the entry point without context: the database is
 * process state. */
static struct fuzz_db *fdb;

static void fuzz_db_close(void)
{
	fuzz_store_db_close(&fdb->base);
	free(fdb);
}

static void fuzz_db_open(void)
{
	fdb = calloc(1, sizeof *fdb);
	if (fdb == NULL) {
		abort();
	}
	fuzz_store_db_open(&fdb->base, "fuzz-flow");
	if (flow_register(fdb->base.s) != 0) {
		abort();
	}
	fdb->now = 1000;
	atexit(fuzz_db_close);
}

static void check_result(const struct fsm_result *r)
{
	struct store_result res;
	struct store_value v;

	if (store_result_open(r->data, r->len, &res) != 0) {
		abort();
	}
	if (res.status == STORE_ERR && store_result_next(&res, &v) &&
	    v.tag == STORE_T_MAP) {
		/* A governance denial: {code: "GOVERNANCE_...", ...}. */
		bool code = false;
		for (uint32_t i = 0; i < v.n; i++) {
			struct store_value k, x;
			if (!store_result_next_key(&res, &k) ||
			    !store_result_next(&res, &x)) {
				abort();
			}
			if (k.len == 4 && memcmp(k.p, "code", 4) == 0) {
				code = x.tag == STORE_T_BYTES && x.len > 11 &&
				       memcmp(x.p, "GOVERNANCE_", 11) == 0;
			}
			store_result_skip(&res, &x);
		}
		if (!code) {
			abort();
		}
		return;
	}
	if (store_result_open(r->data, r->len, &res) != 0) {
		abort();
	}
	if (res.status != STORE_OK) {
		if ((res.status != STORE_ERR &&
		     res.status != STORE_BAD_COMMAND) ||
		    !store_result_next(&res, &v) || v.tag != STORE_T_BYTES ||
		    v.len < 4 || memcmp(v.p, "ERR ", 4) != 0) {
			abort();
		}
	}
}

/* Applies one raw command at the current time; checks its result. */
static void apply_raw(const uint8_t *cmd, size_t len)
{
	struct fsm_cmd c = {cmd, len};
	struct fsm_result res = {NULL, 0};
	struct fsm_entry e = {.group = 1,
	                      .index = ++fdb->index,
	                      .term = 1,
	                      .now_ms = fdb->now,
	                      .n_cmds = 1,
	                      .cmds = &c};
	if (store_apply(fdb->base.s, &e, &res) != 0) {
		abort();
	}
	check_result(&res);
	free(res.data);
}

static void read_raw(const uint8_t *cmd, size_t len)
{
	struct fsm_result res = {NULL, 0};
	if (store_read(fdb->base.s, 1, fdb->now, cmd, len, &res) != 0) {
		abort();
	}
	check_result(&res);
	free(res.data);
}

/* The leader's commands, from the fuzzed bytes p[0..n). */
static void leader(uint8_t kind, const uint8_t *p, size_t n)
{
	uint8_t *buf = malloc(n + 3), *cmd;
	size_t len;
	uint64_t at;
	struct flow_cmd_meta meta = {FLOW_CLOCK_SKEW_DEFAULT_MS, 1};
	struct flow_err err;
	if (buf == NULL) {
		abort();
	}
	buf[0] = STORE_CMD_VERSION;
	buf[2] = FLOW_CMD_VERSION;
	if (n > 0) {
		memcpy(buf + 3, p, n);
	}
	if ((kind & 7) == 4) {
		struct sbuf ov;
		buf[1] = FLOW_STORE_OP_OVERVIEW;
		read_raw(buf, n + 3);
		sbuf_init(&ov);
		flow_overview_encode(1 + (n > 0 ? p[0] % FLOW_OVERVIEW_MAX : 0),
		                     &ov);
		read_raw(ov.p, ov.len);
		sbuf_free(&ov);
		free(buf);
		return;
	}
	switch (kind & 3) {
	case 0:
		buf[1] = FLOW_STORE_OP_SWEEP;
		apply_raw(buf, n + 3);
		if (flow_sweep_cmd(fdb->base.s, 1, fdb->now, FLOW_SWEEP_MAX,
		                   &cmd, &len) != 0) {
			abort();
		}
		if (cmd != NULL) {
			apply_raw(cmd, len);
			free(cmd);
		}
		break;
	case 1:
		buf[1] = FLOW_STORE_OP_SWEEP_SCAN;
		read_raw(buf, n + 3);
		break;
	case 2:
		buf[1] = FLOW_STORE_OP_NEXT_DUE;
		read_raw(buf, n + 3);
		(void)flow_next_due(fdb->base.s, 1, FSNP_OP_FLOW_CLAIM_DUE, p,
		                    n, fdb->now, &at);
		break;
	default:
		if (flow_cmd_encode_peek(FSNP_OP_FLOW_CLAIM_DUE, p, n, &meta,
		                         &cmd, &len, &err) == 0) {
			read_raw(cmd, len);
			free(cmd);
		}
		break;
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint16_t ops[68];
	unsigned nops = 0;
	struct flow_cmd_meta meta = {FLOW_CLOCK_SKEW_DEFAULT_MS, 0};
	struct flow_err err;
	struct fsm_cmd cmds[2];
	struct fsm_result res[2];
	struct fsm_entry e;
	uint8_t *cmd;
	size_t len;
	uint16_t op;

	if (size < 2) {
		return 0;
	}
	if (fdb == NULL) {
		fuzz_db_open();
	}
	for (unsigned o = 0x0200; o <= 0x0258 && nops < 64; o++) {
		/* Schedules have their own target (fuzz_flow_schedule). */
		if (flow_opcode_supported((uint16_t)o) &&
		    !flow_sched_opcode((uint16_t)o)) {
			ops[nops++] = (uint16_t)o;
		}
	}
	/* the internal governance commands the FSNP layer proposes */
	ops[nops++] = FLOW_GOV_OP_CIRCUIT_COUNT;
	ops[nops++] = FLOW_GOV_OP_LIMIT_CLAIM;
	ops[nops++] = FLOW_GOV_OP_LIMIT_RETURN;
	ops[nops++] = FLOW_GOV_OP_LIMIT_RENEW;
	fdb->now += data[1];
	if (data[0] >= 0xF0) {
		leader(data[0], data + 2, size - 2);
		return 0;
	}
	op = ops[data[0] % nops];
	meta.seed = fdb->now * 31 + size;
	if (flow_cmd_encode(op, data + 2, size - 2, &meta, &cmd, &len, &err) !=
	    0) {
		return 0;
	}
	if (flow_opcode_is_read(op)) {
		if (store_read(fdb->base.s, 1, fdb->now, cmd, len, &res[0]) !=
		    0) {
			abort();
		}
		check_result(&res[0]);
		free(res[0].data);
		free(cmd);
		return 0;
	}
	cmds[0].data = cmd;
	cmds[0].len = len;
	cmds[1] = cmds[0];
	e.group = 1;
	e.index = ++fdb->index;
	e.term = 1;
	e.now_ms = fdb->now;
	e.n_cmds = 2;
	e.cmds = cmds;
	memset(res, 0, sizeof res);
	if (store_apply(fdb->base.s, &e, res) != 0) {
		abort();
	}
	for (int i = 0; i < 2; i++) {
		check_result(&res[i]);
		free(res[i].data);
	}
	memset(res, 0, sizeof res);
	if (store_apply(fdb->base.s, &e, res) != 0 || res[0].data != NULL ||
	    res[1].data != NULL) {
		abort();
	}
	free(cmd);
	return 0;
}

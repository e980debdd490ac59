/* Fuzz target: FerricFlow schedules. The first byte picks what the rest
 * feeds:
 *   0  a cron expression: parsed, and when valid its next occurrences in
 *      an in-memory zone whose POSIX rule has daylight saving time;
 *   1  a TZif file: parsed, and when valid its offsets and local times;
 *   2  a FLOW.SCHEDULE.* request body (the second byte picks the opcode):
 *      decoded, checked into a definition, its first run planned;
 *   3  a schedule record: decoded, planned (automatic and manual), the
 *      plan written as a fire item;
 *   4  a schedule store command (the second byte picks its kind) applied
 *      to a store, twice in one entry, or read.
 * Errors must be "ERR ..." texts with status 1 or 6; nothing may crash or
 * read out of bounds. */
#include <rocksdb/c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/cron.h"
#include "flow/flow.h"
#include "flow/flow_sched_def.h"
#include "flow/flow_schedule.h"
#include "flow/tz.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_store_db.h"
#include "wire/fsnp_opcode.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* TZif v2 with no transitions, one type (UTC) and a POSIX rule. */
static void rule_zone(struct tz *z)
{
	static const char footer[] = "\nEST5EDT,M3.2.0,M11.1.0\n";
	uint8_t f[200];
	size_t n = 0;
	char err[100];
	for (int h = 0; h < 2; h++) {
		memset(f + n, 0, 44);
		memcpy(f + n, "TZif2", 5);
		f[n + 39] = 1; /* typecnt */
		f[n + 43] = 4; /* charcnt */
		n += 44;
		memset(f + n, 0, 6);
		n += 6;
		memcpy(f + n, "UTC", 4);
		n += 4;
	}
	memcpy(f + n, footer, sizeof footer - 1);
	n += sizeof footer - 1;
	CHECK(tz_parse(z, f, n, err, sizeof err) == 0);
}

static void fuzz_cron(const uint8_t *p, size_t n)
{
	struct cron c;
	struct tz z;
	char err[200];
	int64_t t = INT64_C(1772884800000), out;
	if (cron_parse(&c, (const char *)p, n, err, sizeof err) != 0) {
		CHECK(strncmp(err, "ERR ", 4) == 0);
		return;
	}
	rule_zone(&z);
	for (int i = 0; i < 3; i++) {
		if (cron_next(&c, &z, t, &out, err, sizeof err) != 0) {
			CHECK(strncmp(err, "ERR ", 4) == 0);
			break;
		}
		CHECK(out > t);
		t = out;
	}
	tz_free(&z);
}

static void fuzz_tz(const uint8_t *p, size_t n)
{
	struct tz z;
	char err[200];
	int64_t out[2];
	if (tz_parse(&z, p, n, err, sizeof err) != 0) {
		return;
	}
	for (int64_t t = -4000000000; t < 5000000000; t += 700000001) {
		int k = tz_local_to_utc(&z, t, out);
		CHECK(k >= 0 && k <= 2);
		(void)tz_offset_at(&z, t);
	}
	tz_free(&z);
}

static bool err_ok(const struct flow_err *e)
{
	return (e->status == FLOW_STATUS_ERROR ||
	        e->status == FLOW_STATUS_BAD_REQUEST) &&
	       strncmp(e->msg, "ERR ", 4) == 0;
}

static void fuzz_body(uint8_t sel, const uint8_t *p, size_t n)
{
	uint16_t op = (uint16_t)(FSNP_OP_FLOW_SCHEDULE_CREATE + sel % 8);
	struct sched_req q;
	struct sched_def d;
	struct flow_err err;
	uint8_t *cmd = NULL;
	size_t clen;
	int64_t first;
	if (sched_req_decode(op, p, n, &q, &err) != 0) {
		CHECK(err_ok(&err));
		return;
	}
	if (op == FSNP_OP_FLOW_SCHEDULE_CREATE) {
		if (sched_def_check(&q, n, &d, &err) != 0) {
			CHECK(err_ok(&err));
			return;
		}
		if (d.kind != SK_CRON &&
		    sched_def_first_run(&d, 1000, NULL, &first, &err) != 0) {
			CHECK(err_ok(&err));
		}
		if (d.kind == SK_CRON) {
			return; /* its first run reads the zone files */
		}
	}
	if (flow_sched_cmd_encode(op, p, n, FLOW_CLOCK_SKEW_DEFAULT_MS, 1000,
	                          "/nonexistent", &cmd, &clen, &err) != 0) {
		CHECK(err_ok(&err) || err.status == FLOW_STATUS_BUSY);
		return;
	}
	free(cmd);
}

static void fuzz_plan(const uint8_t *p, size_t n)
{
	struct fsnp_val v;
	struct flow_sched_rec r;
	struct flow_sched_plan *plan = malloc(sizeof *plan);
	CHECK(plan != NULL);
	if (fsnp_value_decode(p, n, NULL, &v, NULL) == 0 &&
	    flow_sched_rec_decode(&v, &r) == 0) {
		for (int manual = 0; manual < 2; manual++) {
			struct wbuf b;
			struct fsnp_writer w;
			flow_sched_plan(&r, 5000, manual, 4000, manual,
			                "/nonexistent", plan);
			CHECK(strlen(plan->target_id) < sizeof plan->target_id);
			wbuf_init(&b);
			fsnp_w_init(&w, &b);
			flow_sched_plan_write(&w, &r, plan);
			flow_sched_rec_write(&w, &r, true);
			wbuf_free(&b);
		}
	}
	free(plan);
}

static struct fuzz_store_db *fdb;
static uint64_t fdb_index, fdb_now = 1000;

static void fdb_close(void)
{
	fuzz_store_db_close(fdb);
	free(fdb);
}

static void check_result(const struct fsm_result *r)
{
	struct store_result res;
	struct store_value v;
	CHECK(store_result_open(r->data, r->len, &res) == 0);
	if (res.status != STORE_OK) {
		CHECK((res.status == STORE_ERR ||
		       res.status == STORE_BAD_COMMAND) &&
		      store_result_next(&res, &v) && v.tag == STORE_T_BYTES &&
		      v.len >= 4 && memcmp(v.p, "ERR ", 4) == 0);
	}
}

static void fuzz_apply(uint8_t sel, const uint8_t *p, size_t n)
{
	static const uint16_t kinds[] = {
	    FSNP_OP_FLOW_SCHEDULE_CREATE, FSNP_OP_FLOW_SCHEDULE_GET,
	    FSNP_OP_FLOW_SCHEDULE_DELETE, FSNP_OP_FLOW_SCHEDULE_LIST,
	    FSNP_OP_FLOW_SCHEDULE_PAUSE,  FSNP_OP_FLOW_SCHEDULE_RESUME,
	    FLOW_SCHED_KIND_SCAN,         FLOW_SCHED_KIND_RECORD,
	    FLOW_SCHED_KIND_OUTBOX_DONE};
	uint16_t kind = kinds[sel % (sizeof kinds / sizeof kinds[0])];
	struct fsm_result res[2];
	uint8_t *cmd;
	size_t len;
	if (fdb == NULL) {
		fdb = calloc(1, sizeof *fdb);
		CHECK(fdb != NULL);
		fuzz_store_db_open(fdb, "fuzz-sched");
		CHECK(flow_register(fdb->s) == 0);
		atexit(fdb_close);
	}
	fdb_now += sel;
	CHECK(flow_sched_cmd_wrap(kind, FLOW_CLOCK_SKEW_DEFAULT_MS, p, n, &cmd,
	                          &len) == 0);
	if (flow_sched_kind_is_read(kind)) {
		CHECK(store_read(fdb->s, 1, fdb_now, cmd, len, &res[0]) == 0);
		check_result(&res[0]);
		free(res[0].data);
	} else {
		struct fsm_cmd cmds[2] = {{cmd, len}, {cmd, len}};
		struct fsm_entry e = {.group = 1,
		                      .index = ++fdb_index,
		                      .term = 1,
		                      .now_ms = fdb_now,
		                      .n_cmds = 2,
		                      .cmds = cmds};
		memset(res, 0, sizeof res);
		CHECK(store_apply(fdb->s, &e, res) == 0);
		for (int i = 0; i < 2; i++) {
			check_result(&res[i]);
			free(res[i].data);
		}
	}
	free(cmd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2) {
		return 0;
	}
	switch (data[0] % 5) {
	case 0:
		fuzz_cron(data + 1, size - 1);
		break;
	case 1:
		fuzz_tz(data + 1, size - 1);
		break;
	case 2:
		fuzz_body(data[1], data + 2, size - 2);
		break;
	case 3:
		fuzz_plan(data + 1, size - 1);
		break;
	default:
		fuzz_apply(data[1], data + 2, size - 2);
		break;
	}
	return 0;
}

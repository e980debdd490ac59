/* Integration: FerricFlow governance over FSNP on three real nodes (two
 * shards), with the bodies exactly as reference/flow.md 6.4 lists them:
 *  - a budget is never overspent: 50 reservers over six connections on
 *    every node, the scope's leader stopped and killed with half of them
 *    in flight, unanswered ones retried with the same reservation id;
 *    exactly floor(limit / amount) reservations hold, `used` equals
 *    their sum and no reservation id is counted twice;
 *  - a flow waiting on an approval is woken by the decision;
 *  - the budget's ledger lists every reservation decision in order;
 *  - an effect confirmed twice is applied once (one ledger event);
 *  - a stale fencing token (the flow was reclaimed) cannot confirm;
 *  - an open circuit refuses reservations naming it, in the flow's shard
 *    and (two-step protocol) in the other one;
 *  - claim admission through a limit: credits spent and returned (by
 *    COMPLETE and by COMPLETE_MANY, once), a refused claim with nothing
 *    due answers [] (or waits with block_ms), a governed EXTEND_LEASE
 *    renews the credit's lease;
 *  - the other group of a two-step command unreachable (two nodes
 *    stopped): GOVERNANCE_UNAVAILABLE and nothing of the second step;
 *  - limits, approvals (listed across shards), circuits and the
 *    overview; denial maps; bad bodies answered status 6;
 *  - `lodectl flow governance` against the cluster. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define NODES 3

static struct harness_cluster cl;
static char prefix[32];
static bool killed[NODES];

static struct ftc_msg call(struct ftc *c, uint16_t op, const char *fmt, ...)
{
	struct wbuf b;
	struct ftc_msg m;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	assert_int_equal(ftc_call(c, 1, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static void ok(const struct ftc_msg *m)
{
	if (m->status != 0) {
		char msg[512];
		ftc_error_text(m, msg, sizeof msg);
		fail_msg("status %u: %s", m->status, msg);
	}
}

static void err_is(struct ftc_msg m, unsigned status, const char *text)
{
	char msg[512];
	ftc_error_text(&m, msg, sizeof msg);
	if (m.status != status || strcmp(msg, text) != 0) {
		fail_msg("got %u '%s', want %u '%s'", m.status, msg, status,
		         text);
	}
	ftc_msg_free(&m);
}

/* A denial: status 1 and a map with one "code" and this reason. */
static void denial(const struct ftc_msg *m, const char *code,
                   const char *reason)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;
	int codes = 0;
	assert_int_equal(m->status, 1);
	assert_int_equal(m->value.tag, FSNP_MAP);
	assert_true(ftc_map_str(&m->value, "code", code));
	assert_true(ftc_map_str(&m->value, "reason", reason));
	fsnp_iter_init(&it, &m->value);
	while (fsnp_iter_next(&it, &k, &v)) {
		codes += fsnp_bytes_eq(k, "code");
	}
	assert_int_equal(codes, 1);
}

static void name(char *out, size_t cap, const char *what)
{
	snprintf(out, cap, "%s-%s", prefix, what);
}

/* Index of the node leading the group of partition `part` (-1 after
 * 20 s). */
static int leader_of(const char *part)
{
	char tag[FLOW_TAG_MAX], key[FLOW_TAG_MAX + 3];
	flow_route_tag((const uint8_t *)part, strlen(part), tag);
	snprintf(key, sizeof key, "{%s}", tag);
	for (int tries = 0; tries < 200; tries++) {
		struct ftc c;
		struct ftc_msg m;
		int found = -1;
		unsigned via = 0;
		while (killed[via]) {
			via++;
		}
		assert_int_equal(ftc_connect(&c, cl.nodes[via].fsnp), 0);
		m = call(&c, FSNP_OP_ROUTE, "key=s", key);
		if (m.status == 0 &&
		    !ftc_map_str(&m.value, "hint", "local_fallback")) {
			int64_t p = ftc_map_int(&m.value, "native_port");
			for (unsigned k = 0; k < NODES; k++) {
				if (cl.nodes[k].fsnp == p) {
					found = (int)k;
				}
			}
		}
		ftc_msg_free(&m);
		ftc_close(&c);
		if (found >= 0 && !killed[found]) {
			return found;
		}
		harness_nap(100);
	}
	return -1;
}

/* One reserver's outcome: 1 reserved, 0 denied, -1 not known yet. */
static int outcome(const struct ftc_msg *m)
{
	if (m->status == 0) {
		return 1;
	}
	if (m->status == 1 && m->value.tag == FSNP_MAP &&
	    ftc_map_str(&m->value, "code", "GOVERNANCE_BUDGET_EXHAUSTED")) {
		return 0;
	}
	return -1;
}

#define RESERVERS 50
#define AMOUNT 3
#define LIMIT 100

static void reserve_body(struct wbuf *b, const char *scope, int i)
{
	char rid[32];
	snprintf(rid, sizeof rid, "res-%d", i);
	ftc_body(b, "scope=s amount=i limit=i window_ms=i reservation_id=s",
	         scope, (int64_t)AMOUNT, (int64_t)LIMIT, (int64_t)3600000, rid);
}

/* Sends reservers [from, to) pipelined over the live connections and
 * records their outcomes. */
static void reserve_wave(struct ftc *conns, unsigned nconn, const char *scope,
                         int from, int to, int *out)
{
	uint64_t rids[RESERVERS];
	int conn_of[RESERVERS];
	unsigned live[2 * NODES], nlive = 0;
	for (unsigned k = 0; k < nconn; k++) {
		if (!killed[k % NODES]) {
			live[nlive++] = k;
		}
	}
	for (int i = from; i < to; i++) {
		struct wbuf b;
		conn_of[i] = (int)live[(unsigned)i % nlive];
		reserve_body(&b, scope, i);
		rids[i] = ftc_send(&conns[conn_of[i]], 1,
		                   FSNP_OP_FLOW_BUDGET_RESERVE, 0, &b);
		wbuf_free(&b);
	}
	for (int i = from; i < to; i++) {
		struct ftc_msg m;
		out[i] = -1;
		if (ftc_recv(&conns[conn_of[i]], &m, 15000) != 0) {
			continue;
		}
		/* Replies of one connection come back in request order. */
		assert_int_equal(m.h.request_id, rids[i]);
		out[i] = outcome(&m);
		ftc_msg_free(&m);
	}
}

static void test_budget_never_overspent(void **state)
{
	struct ftc conns[2 * NODES], c;
	int out[RESERVERS];
	char scope[64];
	int leader, reserved = 0, denied = 0, live, retried = 0, replays = 0;
	int64_t retry_at;
	uint64_t rids[RESERVERS];
	int conn_of[RESERVERS];
	uint64_t t0 = harness_mono_ms();
	uint64_t until;
	struct ftc_msg m;
	(void)state;
	name(scope, sizeof scope, "budget");
	leader = leader_of(scope);
	assert_true(leader >= 0);
	for (unsigned k = 0; k < 2 * NODES; k++) {
		assert_int_equal(
		    ftc_connect(&conns[k], cl.nodes[k % NODES].fsnp), 0);
	}
	reserve_wave(conns, 2 * NODES, scope, 0, RESERVERS / 2, out);
	/* The rest are outstanding when the scope's leader dies: it is
	 * stopped, every connection (its own included) gets requests, and
	 * it is killed with them in flight. Those sent to it are never
	 * answered, so the retry path below runs; those forwarded to it by
	 * the others may be answered by the next leader. Before that, two
	 * lose their replies: sent through a follower whose connection is
	 * closed at once, they commit (or not) unseen, and their retries
	 * must replay, not count them again. */
	{
		unsigned x = (unsigned)(leader + 1) % NODES;
		for (int i = RESERVERS / 2; i < RESERVERS / 2 + 2; i++) {
			struct wbuf b;
			conn_of[i] = -1;
			reserve_body(&b, scope, i);
			ftc_send(&conns[x], 1, FSNP_OP_FLOW_BUDGET_RESERVE, 0,
			         &b);
			wbuf_free(&b);
		}
		ftc_close(&conns[x]);
		assert_int_equal(ftc_connect(&conns[x], cl.nodes[x].fsnp), 0);
		harness_nap(200);
	}
	assert_int_equal(
	    harness_node_signal(&cl, (unsigned)leader, SIGSTOP, NULL), 0);
	for (int i = RESERVERS / 2 + 2; i < RESERVERS; i++) {
		struct wbuf b;
		conn_of[i] = i % (2 * NODES);
		reserve_body(&b, scope, i);
		rids[i] = ftc_send(&conns[conn_of[i]], 1,
		                   FSNP_OP_FLOW_BUDGET_RESERVE, 0, &b);
		wbuf_free(&b);
	}
	harness_nap(300);
	assert_int_equal(
	    harness_node_signal(&cl, (unsigned)leader, SIGKILL, NULL), 0);
	killed[leader] = true;
	for (int i = RESERVERS / 2; i < RESERVERS; i++) {
		struct ftc_msg r;
		out[i] = -1;
		if (conn_of[i] < 0 || conn_of[i] % NODES == leader ||
		    ftc_recv(&conns[conn_of[i]], &r, 15000) != 0) {
			continue;
		}
		assert_int_equal(r.h.request_id, rids[i]);
		out[i] = outcome(&r);
		ftc_msg_free(&r);
	}
	for (unsigned k = 0; k < 2 * NODES; k++) {
		if (k % NODES == (unsigned)leader) {
			ftc_close(&conns[k]);
		}
	}
	/* Unknown outcomes are retried with the same reservation id. */
	live = (leader + 1) % NODES;
	assert_int_equal(ftc_connect(&c, cl.nodes[live].fsnp), 0);
	until = harness_mono_ms() + 25000;
	{
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		retry_at = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	for (int i = 0; i < RESERVERS; i++) {
		retried += out[i] < 0;
		while (out[i] < 0 && harness_mono_ms() < until) {
			struct wbuf b;
			reserve_body(&b, scope, i);
			assert_int_equal(ftc_call(&c, 1,
			                          FSNP_OP_FLOW_BUDGET_RESERVE,
			                          0, &b, &m),
			                 0);
			wbuf_free(&b);
			out[i] = outcome(&m);
			/* reserved before the retry: a replay */
			replays +=
			    out[i] == 1 &&
			    ftc_map_int(&m.value, "reserved_at_ms") < retry_at;
			ftc_msg_free(&m);
			if (out[i] < 0) {
				harness_nap(100);
			}
		}
		assert_true(out[i] >= 0);
		reserved += out[i] == 1;
		denied += out[i] == 0;
	}
	/* Another node leads the scope's group now. */
	assert_int_not_equal(leader_of(scope), leader);
	assert_int_not_equal(leader_of(scope), -1);
	print_message("budget: %d reserved, %d denied, %d retried after the "
	              "leader kill (%d of them replays of a reservation made "
	              "before), %llu ms\n",
	              reserved, denied, retried, replays,
	              (unsigned long long)(harness_mono_ms() - t0));
	/* The retry path ran (the killed leader's requests at least). */
	assert_true(retried >= 1);
	assert_int_equal(reserved, LIMIT / AMOUNT);
	assert_int_equal(denied, RESERVERS - LIMIT / AMOUNT);
	m = call(&c, FSNP_OP_FLOW_BUDGET_GET, "scope=s", scope);
	ok(&m);
	assert_int_equal(ftc_map_int(&m.value, "used"), reserved * AMOUNT);
	assert_true(ftc_map_int(&m.value, "used") <= LIMIT);
	assert_int_equal(ftc_map_int(&m.value, "reservations_count"), reserved);
	ftc_msg_free(&m);
	/* A denial is the reference's map. */
	{
		struct wbuf b;
		reserve_body(&b, scope, 1000);
		assert_int_equal(
		    ftc_call(&c, 1, FSNP_OP_FLOW_BUDGET_RESERVE, 0, &b, &m), 0);
		wbuf_free(&b);
		denial(&m, "GOVERNANCE_BUDGET_EXHAUSTED", "budget_exhausted");
		assert_true(ftc_map_str(&m.value, "scope", scope));
		assert_int_equal(ftc_map_int(&m.value, "requested"), AMOUNT);
		assert_int_equal(ftc_map_int(&m.value, "used"), 99);
		assert_int_equal(ftc_map_int(&m.value, "limit"), LIMIT);
		assert_int_equal(ftc_map_int(&m.value, "window_ms"), 3600000);
		assert_true(ftc_map_int(&m.value, "retry_after_ms") > 0);
		ftc_msg_free(&m);
	}
	/* The ledger: one budget_reserved per reservation, in order. */
	m = call(&c, FSNP_OP_FLOW_GOVERNANCE_LEDGER,
	         "id=s partition_key=s limit=i", scope, scope, (int64_t)1000);
	ok(&m);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	{
		struct fsnp_iter it;
		struct fsnp_val e;
		int n_res = 0, n_den = 0;
		int64_t last_at = 0;
		bool seen[RESERVERS] = {false};
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &e)) {
			int64_t at = ftc_map_int(&e, "at_ms");
			assert_true(at >= last_at);
			last_at = at;
			n_den += ftc_map_str(&e, "kind", "budget_exhausted");
			if (ftc_map_str(&e, "kind", "budget_reserved")) {
				/* no reservation id counted twice */
				struct fsnp_bytes sub;
				char num[16];
				int k;
				n_res++;
				assert_int_equal(
				    fsnp_map_bin(&e, "subject", &sub), 0);
				assert_true(sub.len > 4 && sub.len < 16 &&
				            memcmp(sub.ptr, "res-", 4) == 0);
				memcpy(num, sub.ptr + 4, sub.len - 4);
				num[sub.len - 4] = '\0';
				k = atoi(num);
				assert_true(k >= 0 && k < RESERVERS);
				assert_false(seen[k]);
				seen[k] = true;
			}
		}
		assert_int_equal(n_res, reserved);
		assert_true(n_den >= denied);
	}
	ftc_msg_free(&m);
	ftc_close(&c);
	for (unsigned k = 0; k < 2 * NODES; k++) {
		if (k % NODES != (unsigned)leader) {
			ftc_close(&conns[k]);
		}
	}
}

/* A claimed flow on a live node: lease token and fencing token. */
static void claim(struct ftc *c, const char *type, int64_t lease_ms,
                  bool reclaim, char *token, int64_t *fencing)
{
	struct ftc_msg m;
	struct fsnp_iter it;
	struct fsnp_val j;
	struct fsnp_bytes b;
	uint64_t until = harness_mono_ms() + 10000;
	for (;;) {
		m = reclaim ? call(c, FSNP_OP_FLOW_RECLAIM,
		                   "type=s worker=s lease_ms=i "
		                   "reclaim_expired=b",
		                   type, "w2", lease_ms, 1)
		            : call(c, FSNP_OP_FLOW_CLAIM_DUE,
		                   "type=s worker=s lease_ms=i", type, "w1",
		                   lease_ms);
		ok(&m);
		if (m.value.tag == FSNP_ARRAY && m.value.as.count == 1) {
			break;
		}
		ftc_msg_free(&m);
		assert_true(harness_mono_ms() < until);
		harness_nap(100);
	}
	fsnp_iter_init(&it, &m.value);
	assert_true(fsnp_iter_next(&it, NULL, &j));
	assert_int_equal(fsnp_map_bin(&j, "lease_token", &b), 0);
	memcpy(token, b.ptr, b.len);
	token[b.len] = '\0';
	*fencing = ftc_map_int(&j, "fencing_token");
	ftc_msg_free(&m);
}

static int live_node(void)
{
	for (int i = 0; i < NODES; i++) {
		if (!killed[i]) {
			return i;
		}
	}
	return 0;
}

static void test_effects(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	char id[64], type[64], tok[128], tok2[128];
	int64_t fen, fen2;
	(void)state;
	name(id, sizeof id, "pay");
	name(type, sizeof type, "paytype");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", id, type);
	ok(&m);
	ftc_msg_free(&m);
	claim(&c, type, 400, false, tok, &fen);
	m = call(&c, FSNP_OP_FLOW_EFFECT_RESERVE,
	         "id=s effect_key=s effect_type=s lease_token=s "
	         "fencing_token=i operation_digest=s idempotency_key=s",
	         id, "charge-1", "charge", tok, fen, "sha256:aa", "idem-1");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "reserved"));
	ftc_msg_free(&m);
	/* Confirmed twice with the same key: applied once. */
	m = call(&c, FSNP_OP_FLOW_EFFECT_CONFIRM,
	         "id=s effect_key=s lease_token=s fencing_token=i "
	         "external_id=s latency_ms=i",
	         id, "charge-1", tok, fen, "ext-9", (int64_t)12);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "confirmed"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_EFFECT_CONFIRM,
	         "id=s effect_key=s lease_token=s fencing_token=i", id,
	         "charge-1", tok, fen);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "already_applied"));
	assert_true(ftc_map_str(&m.value, "external_id", "ext-9"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_EFFECT_FAIL,
	         "id=s effect_key=s lease_token=s fencing_token=i", id,
	         "charge-1", tok, fen);
	denial(&m, "GOVERNANCE_CONFLICT", "governance_conflict");
	ftc_msg_free(&m);
	/* A stale fencing token: the flow is reclaimed by another worker. */
	m = call(&c, FSNP_OP_FLOW_EFFECT_RESERVE,
	         "id=s effect_key=s effect_type=s lease_token=s "
	         "fencing_token=i operation_digest=s",
	         id, "charge-2", "charge", tok, fen, "sha256:bb");
	ok(&m);
	ftc_msg_free(&m);
	harness_nap(500);
	claim(&c, type, 30000, true, tok2, &fen2);
	assert_true(fen2 > fen);
	err_is(call(&c, FSNP_OP_FLOW_EFFECT_CONFIRM,
	            "id=s effect_key=s lease_token=s fencing_token=i", id,
	            "charge-2", tok, fen),
	       1, "ERR flow fencing token mismatch");
	m = call(&c, FSNP_OP_FLOW_EFFECT_COMPENSATE,
	         "id=s effect_key=s lease_token=s fencing_token=i reason=s", id,
	         "charge-2", tok2, fen2, "refund");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "compensated"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_EFFECT_GET, "id=s effect_key=s", id,
	         "charge-1");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "confirmed"));
	ftc_msg_free(&m);
	/* The flow's ledger: every decision once, in order. */
	m = call(&c, FSNP_OP_FLOW_GOVERNANCE_LEDGER, "id=s", id);
	ok(&m);
	{
		static const char *const kinds[] = {
		    "effect_reserved", "effect_confirmed", "effect_reserved",
		    "effect_compensated"};
		struct fsnp_iter it;
		struct fsnp_val e;
		unsigned i = 0;
		assert_int_equal(m.value.as.count, 4);
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &e)) {
			assert_true(ftc_map_str(&e, "kind", kinds[i++]));
		}
	}
	ftc_msg_free(&m);
	ftc_close(&c);
}

/* The shard of a flow id (pk NULL) or of a partition. */
static int64_t shard_of(struct ftc *c, const char *id, const char *pk)
{
	struct ftc_msg m =
	    pk != NULL
	        ? call(c, FSNP_OP_ROUTE, "flow_id=s partition_key=s", id, pk)
	        : call(c, FSNP_OP_ROUTE, "flow_id=s", id);
	int64_t s;
	ok(&m);
	s = ftc_map_int(&m.value, "shard");
	ftc_msg_free(&m);
	return s;
}

static struct ftc_msg reserve_effect(struct ftc *c, const char *id,
                                     const char *key, const char *tok,
                                     int64_t fen, const char *scope)
{
	return call(c, FSNP_OP_FLOW_EFFECT_RESERVE,
	            "id=s effect_key=s effect_type=s lease_token=s "
	            "fencing_token=i operation_digest=s governance_scope=s",
	            id, key, "charge", tok, fen, "d", scope);
}

/* Opens `scope` for 200 ms and waits (bounded) until it reads
 * half-open. */
static void half_open(struct ftc *c, const char *scope)
{
	struct ftc_msg m = call(c, FSNP_OP_FLOW_CIRCUIT_OPEN,
	                        "scope=s open_ms=i half_open_max_probes=i "
	                        "half_open_success_threshold=i",
	                        scope, (int64_t)200, (int64_t)1, (int64_t)1);
	uint64_t until = harness_mono_ms() + 10000;
	ok(&m);
	ftc_msg_free(&m);
	for (;;) {
		bool ho;
		m = call(c, FSNP_OP_FLOW_CIRCUIT_GET, "scope=s", scope);
		ok(&m);
		ho = ftc_map_str(&m.value, "status", "half_open");
		ftc_msg_free(&m);
		if (ho) {
			return;
		}
		assert_true(harness_mono_ms() < until);
		harness_nap(50);
	}
}

static void circuit_is(struct ftc *c, const char *scope, const char *status,
                       int64_t in_flight)
{
	struct ftc_msg m = call(c, FSNP_OP_FLOW_CIRCUIT_GET, "scope=s", scope);
	ok(&m);
	if (!ftc_map_str(&m.value, "status", status)) {
		fail_msg("circuit %s is not %s", scope, status);
	}
	if (in_flight >= 0) {
		assert_int_equal(ftc_map_int(&m.value, "half_open_in_flight"),
		                 in_flight);
	}
	ftc_msg_free(&m);
}

/* A half-open circuit in another shard than the flow: its probe limit
 * holds (step 1 counts the probe), a replayed reservation gives its probe
 * back, and settled outcomes reach it (a confirmed probe closes it, a
 * failed one opens it again). */
static void half_open_across_shards(struct ftc *c, const char *id,
                                    const char *tok, int64_t fen,
                                    const char *other)
{
	struct ftc_msg m;
	half_open(c, other);
	m = reserve_effect(c, id, "p1", tok, fen, other);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "reserved"));
	assert_true(ftc_map_str(&m.value, "governance_scope", other));
	ftc_msg_free(&m);
	circuit_is(c, other, "half_open", 1);
	m = reserve_effect(c, id, "p2", tok, fen, other);
	denial(&m, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	ftc_msg_free(&m);
	m = call(c, FSNP_OP_FLOW_EFFECT_GET, "id=s effect_key=s", id, "p2");
	ok(&m);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);
	/* A replay of p1 takes no second probe. */
	m = reserve_effect(c, id, "p1", tok, fen, other);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "already_reserved"));
	ftc_msg_free(&m);
	circuit_is(c, other, "half_open", 1);
	/* The probe succeeds: the circuit closes. */
	m = call(c, FSNP_OP_FLOW_EFFECT_CONFIRM,
	         "id=s effect_key=s lease_token=s fencing_token=i", id, "p1",
	         tok, fen);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "confirmed"));
	ftc_msg_free(&m);
	circuit_is(c, other, "closed", -1);
	/* Half-open again; a failed probe opens it. */
	half_open(c, other);
	m = reserve_effect(c, id, "p3", tok, fen, other);
	ok(&m);
	ftc_msg_free(&m);
	m = call(c, FSNP_OP_FLOW_EFFECT_FAIL,
	         "id=s effect_key=s lease_token=s fencing_token=i error=s", id,
	         "p3", tok, fen, "timeout");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "failed"));
	ftc_msg_free(&m);
	circuit_is(c, other, "open", -1);
}

/* A circuit in the flow's shard is checked in the reservation's apply
 * (and the denial ledgered); one in the other shard by the two-step
 * protocol (read first, nothing written on a denial). */
static void test_circuit_across_shards(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	char id[64], type[64], tok[128], same[64] = "", other[64] = "";
	int64_t fen, fshard;
	(void)state;
	name(id, sizeof id, "cflow");
	name(type, sizeof type, "ctype");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	fshard = shard_of(&c, id, NULL);
	for (int i = 0; i < 64 && (same[0] == 0 || other[0] == 0); i++) {
		char s[64], what[16];
		snprintf(what, sizeof what, "cb%d", i);
		name(s, sizeof s, what);
		if (shard_of(&c, "x", s) == fshard) {
			strcpy(same, s);
		} else {
			strcpy(other, s);
		}
	}
	assert_true(same[0] != 0 && other[0] != 0);
	m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", id, type);
	ok(&m);
	ftc_msg_free(&m);
	claim(&c, type, 30000, false, tok, &fen);
	for (int k = 0; k < 2; k++) {
		m = call(&c, FSNP_OP_FLOW_CIRCUIT_OPEN, "scope=s open_ms=i",
		         k ? other : same, (int64_t)600000);
		ok(&m);
		ftc_msg_free(&m);
	}
	m = reserve_effect(&c, id, "e1", tok, fen, same);
	denial(&m, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	ftc_msg_free(&m);
	m = reserve_effect(&c, id, "e1", tok, fen, other);
	denial(&m, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	assert_true(ftc_map_str(&m.value, "scope", other));
	assert_true(ftc_map_int(&m.value, "retry_after_ms") > 0);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_EFFECT_GET, "id=s effect_key=s", id, "e1");
	ok(&m);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);
	/* Closed: the reservation goes through (step 2). */
	m = call(&c, FSNP_OP_FLOW_CIRCUIT_CLOSE, "scope=s", other);
	ok(&m);
	ftc_msg_free(&m);
	m = reserve_effect(&c, id, "e1", tok, fen, other);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decision", "reserved"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_GOVERNANCE_LEDGER, "id=s", id);
	ok(&m);
	assert_int_equal(m.value.as.count, 2);
	ftc_msg_free(&m);
	half_open_across_shards(&c, id, tok, fen, other);
	ftc_close(&c);
}

/* Claims one flow of `type` in `st`; whether one was claimed. */
static bool claim_in(struct ftc *c, const char *type, const char *st)
{
	struct ftc_msg m = call(c, FSNP_OP_FLOW_CLAIM_DUE,
	                        "type=s worker=s lease_ms=i state=s", type,
	                        "w9", (int64_t)30000, st);
	bool got;
	ok(&m);
	got = m.value.tag == FSNP_ARRAY && m.value.as.count == 1;
	ftc_msg_free(&m);
	return got;
}

static void state_is(struct ftc *c, const char *id, const char *st)
{
	struct ftc_msg m = call(c, FSNP_OP_FLOW_GET, "id=s", id);
	ok(&m);
	if (!ftc_map_str(&m.value, "state", st)) {
		fail_msg("flow %s is not in state %s", id, st);
	}
	ftc_msg_free(&m);
}

/* A claimed flow parks in awaiting_approval (not due for an hour), then
 * asks for approval `aid`: parked first, so that no decision can come
 * before the flow waits. */
static void park(struct ftc *c, const char *id, const char *type,
                 const char *aid, bool reject_target)
{
	char tok[128];
	int64_t fen, now = (int64_t)time(NULL) * 1000;
	struct ftc_msg m =
	    call(c, FSNP_OP_FLOW_CREATE, "id=s type=s", id, type);
	ok(&m);
	ftc_msg_free(&m);
	claim(c, type, 30000, false, tok, &fen);
	m = call(c, FSNP_OP_FLOW_TRANSITION,
	         "id=s from_state=s to_state=s lease_token=s fencing_token=i "
	         "run_at_ms=i",
	         id, "running", "awaiting_approval", tok, fen, now + 3600000);
	ok(&m);
	ftc_msg_free(&m);
	m = reject_target
	        ? call(c, FSNP_OP_FLOW_APPROVAL_REQUEST,
	               "id=s flow_id=s scope=s timeout_ms=i wait_state=s "
	               "transition_to=s exhaust_to=s",
	               aid, id, "refunds", (int64_t)3600000,
	               "awaiting_approval", "approved", "rejected")
	        : call(c, FSNP_OP_FLOW_APPROVAL_REQUEST,
	               "id=s flow_id=s scope=s timeout_ms=i wait_state=s "
	               "transition_to=s",
	               aid, id, "refunds", (int64_t)3600000,
	               "awaiting_approval", "approved");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "pending"));
	assert_true(ftc_map_str(&m.value, "wait_state", "awaiting_approval"));
	ftc_msg_free(&m);
}

/* A flow waiting on an approval becomes due only by the decision: APPROVE
 * moves it to transition_to, REJECT to exhaust_to (or, without one,
 * leaves it waiting as the reference does); the approval and the flow
 * in different shards (the two-step wake) and in the same one. */
static void test_approval_wakes_flow(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	char type[64], f1[64], f2[64], f3[64], a1[64], a2[64], a3[64];
	int64_t s1;
	(void)state;
	name(type, sizeof type, "atype");
	name(f1, sizeof f1, "af1");
	name(f2, sizeof f2, "af2");
	name(f3, sizeof f3, "af3");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	/* a1 in another shard than f1, a2 in the same as f2 */
	s1 = shard_of(&c, f1, NULL);
	a1[0] = a2[0] = 0;
	for (int i = 0; i < 64 && (a1[0] == 0 || a2[0] == 0); i++) {
		char s[64], what[16];
		snprintf(what, sizeof what, "ap%d", i);
		name(s, sizeof s, what);
		if (shard_of(&c, s, NULL) != s1 && a1[0] == 0) {
			strcpy(a1, s);
		} else if (shard_of(&c, s, NULL) == shard_of(&c, f2, NULL) &&
		           a2[0] == 0) {
			strcpy(a2, s);
		}
	}
	assert_true(a1[0] != 0 && a2[0] != 0);
	name(a3, sizeof a3, "ap-none");
	/* Bad wake keys. */
	err_is(call(&c, FSNP_OP_FLOW_APPROVAL_REQUEST,
	            "id=s flow_id=s scope=s transition_to=s", a3, f3, "x",
	            "approved"),
	       1,
	       "ERR flow approval transition_to and exhaust_to require "
	       "wait_state");
	err_is(call(&c, FSNP_OP_FLOW_APPROVAL_REQUEST,
	            "id=s flow_id=s scope=s wait_state=s", a3, f3, "x", "w"),
	       1, "ERR flow approval wait_state requires transition_to");
	err_is(call(&c, FSNP_OP_FLOW_APPROVAL_REQUEST,
	            "id=s flow_id=s scope=s wait_state=s transition_to=s", a3,
	            f3, "x", "w", "completed"),
	       1,
	       "ERR flow approval transition_to cannot be running or a "
	       "terminal state");

	park(&c, f1, type, a1, true);
	assert_false(claim_in(&c, type, "awaiting_approval"));
	assert_false(claim_in(&c, type, "approved"));
	m = call(&c, FSNP_OP_FLOW_APPROVAL_APPROVE, "id=s approver=s", a1,
	         "ann");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "approved"));
	ftc_msg_free(&m);
	/* The reply came after the wake: due now. */
	state_is(&c, f1, "approved");
	assert_true(claim_in(&c, type, "approved"));
	/* A repeated decision is the reference's conflict; the wake it
	 * repeats finds the flow moved on and changes nothing. */
	m = call(&c, FSNP_OP_FLOW_APPROVAL_APPROVE, "id=s approver=s", a1,
	         "ann");
	denial(&m, "GOVERNANCE_CONFLICT", "governance_conflict");
	assert_true(ftc_map_str(&m.value, "status", "approved"));
	ftc_msg_free(&m);
	state_is(&c, f1, "running");

	/* REJECT moves the flow to exhaust_to (same shard: same steps). */
	park(&c, f2, type, a2, true);
	assert_false(claim_in(&c, type, "awaiting_approval"));
	m = call(&c, FSNP_OP_FLOW_APPROVAL_REJECT, "id=s approver=s reason=s",
	         a2, "bob", "too large");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "rejected"));
	ftc_msg_free(&m);
	state_is(&c, f2, "rejected");
	assert_false(claim_in(&c, type, "approved"));
	assert_true(claim_in(&c, type, "rejected"));

	/* Without exhaust_to, REJECT leaves the flow waiting. */
	park(&c, f3, type, a3, false);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_REJECT, "id=s approver=s", a3,
	         "bob");
	ok(&m);
	ftc_msg_free(&m);
	state_is(&c, f3, "awaiting_approval");
	assert_false(claim_in(&c, type, "awaiting_approval"));
	assert_false(claim_in(&c, type, "rejected"));
	/* An approval requested as the reference does has no wake keys. */
	name(a3, sizeof a3, "ap-plain");
	m = call(&c, FSNP_OP_FLOW_APPROVAL_REQUEST, "id=s flow_id=s scope=s",
	         a3, f3, "refunds");
	ok(&m);
	{
		struct fsnp_val v;
		assert_int_not_equal(fsnp_map_get(&m.value, "wait_state", &v),
		                     0);
		assert_int_not_equal(
		    fsnp_map_get(&m.value, "partition_key", &v), 0);
	}
	ftc_msg_free(&m);
	ftc_close(&c);
}

/* The limit's lease on shard 0: available and in use. */
static void lease_is(struct ftc *c, const char *scope, int64_t avail,
                     int64_t in_use)
{
	struct fsnp_val ls, l0;
	struct ftc_msg m = call(c, FSNP_OP_FLOW_LIMIT_GET, "scope=s", scope);
	ok(&m);
	assert_int_equal(fsnp_map_get(&m.value, "leases", &ls), 0);
	assert_int_equal(fsnp_map_get(&ls, "0", &l0), 0);
	if (ftc_map_int(&l0, "available") != avail ||
	    ftc_map_int(&l0, "in_use") != in_use) {
		fail_msg("lease: available %lld in use %lld, want %lld %lld",
		         (long long)ftc_map_int(&l0, "available"),
		         (long long)ftc_map_int(&l0, "in_use"),
		         (long long)avail, (long long)in_use);
	}
	ftc_msg_free(&m);
}

/* A governed claim: one flow, its lease token and fencing token (false
 * when the claim was refused or found nothing; the reply in *out). */
static bool gclaim(struct ftc *c, const char *type, const char *scope, char *id,
                   char *tok, int64_t *fen, struct ftc_msg *out)
{
	struct fsnp_iter it;
	struct fsnp_val j;
	struct fsnp_bytes b;
	*out = call(c, FSNP_OP_FLOW_CLAIM_DUE,
	            "type=s worker=s lease_ms=i governance_limit_scope=s "
	            "governance_shard_id=i",
	            type, "gw", (int64_t)60000, scope, (int64_t)0);
	if (out->status != 0 || out->value.tag != FSNP_ARRAY ||
	    out->value.as.count != 1) {
		return false;
	}
	fsnp_iter_init(&it, &out->value);
	assert_true(fsnp_iter_next(&it, NULL, &j));
	assert_int_equal(fsnp_map_bin(&j, "id", &b), 0);
	memcpy(id, b.ptr, b.len);
	id[b.len] = '\0';
	assert_int_equal(fsnp_map_bin(&j, "lease_token", &b), 0);
	memcpy(tok, b.ptr, b.len);
	tok[b.len] = '\0';
	*fen = ftc_map_int(&j, "fencing_token");
	return true;
}

static void gcomplete(struct ftc *c, const char *id, const char *tok,
                      int64_t fen, const char *scope)
{
	struct ftc_msg m =
	    call(c, FSNP_OP_FLOW_COMPLETE,
	         "id=s lease_token=s fencing_token=i governance_limit_scope=s "
	         "governance_shard_id=i",
	         id, tok, fen, scope, (int64_t)0);
	ok(&m);
	ftc_msg_free(&m);
}

/* CLAIM_DUE admission through a limit: each claim spends a credit of the
 * shard's lease (refused when none is left), an empty claim gives its
 * credit back, and COMPLETE with the same options returns the flow's
 * credit once. */
static void test_claim_admission(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	char type[64], scope[64], ids[3][64], toks[3][128], fid[64];
	int64_t fens[3];
	(void)state;
	name(type, sizeof type, "admtype");
	name(scope, sizeof scope, "admlimit");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	err_is(call(&c, FSNP_OP_FLOW_CLAIM_DUE,
	            "type=s worker=s governance_limit_scope=s", type, "gw",
	            scope),
	       1,
	       "ERR flow governance_limit_scope and governance_shard_id must "
	       "be provided together");
	/* No lease and nothing due: [] (the reference checks for due work
	 * before answering a refused spend). */
	m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
	         "type=s worker=s governance_limit_scope=s "
	         "governance_shard_id=i",
	         type, "gw", scope, (int64_t)0);
	ok(&m);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	assert_int_equal(m.value.as.count, 0);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_LIMIT_LEASE,
	         "scope=s shard_id=i amount=i ttl_ms=i limit=i", scope,
	         (int64_t)0, (int64_t)2, (int64_t)600000, (int64_t)2);
	ok(&m);
	ftc_msg_free(&m);
	for (int i = 0; i < 3; i++) {
		char what[16];
		snprintf(what, sizeof what, "adm%d", i);
		name(fid, sizeof fid, what);
		m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", fid, type);
		ok(&m);
		ftc_msg_free(&m);
	}
	for (int i = 0; i < 2; i++) {
		assert_true(
		    gclaim(&c, type, scope, ids[i], toks[i], &fens[i], &m));
		ftc_msg_free(&m);
		lease_is(&c, scope, 1 - i, i + 1);
	}
	/* Both credits in use: the third flow waits. */
	assert_false(gclaim(&c, type, scope, ids[2], toks[2], &fens[2], &m));
	denial(&m, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	ftc_msg_free(&m);
	gcomplete(&c, ids[0], toks[0], fens[0], scope);
	lease_is(&c, scope, 1, 1);
	gcomplete(&c, ids[0], toks[0], fens[0], scope); /* once only */
	lease_is(&c, scope, 1, 1);
	assert_true(gclaim(&c, type, scope, ids[2], toks[2], &fens[2], &m));
	ftc_msg_free(&m);
	lease_is(&c, scope, 0, 2);
	gcomplete(&c, ids[1], toks[1], fens[1], scope);
	lease_is(&c, scope, 1, 1);
	/* Nothing due: the credit spent for the claim comes back. */
	assert_false(gclaim(&c, type, scope, fid, toks[0], &fens[0], &m));
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, 0);
	ftc_msg_free(&m);
	lease_is(&c, scope, 1, 1);
	gcomplete(&c, ids[2], toks[2], fens[2], scope);
	lease_is(&c, scope, 2, 0);
	/* A compact reply (flow_claim_jobs_v1) stays compact after the
	 * credits are recorded. */
	{
		struct ftc cc;
		name(fid, sizeof fid, "adm-compact");
		m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", fid, type);
		ok(&m);
		ftc_msg_free(&m);
		assert_int_equal(ftc_connect(&cc, cl.nodes[live_node()].fsnp),
		                 0);
		m = call(&cc, FSNP_OP_STARTUP, "compact_flow_responses=b", 1);
		ok(&m);
		ftc_msg_free(&m);
		m = call(&cc, FSNP_OP_FLOW_CLAIM_DUE,
		         "type=s worker=s lease_ms=i return=s "
		         "governance_limit_scope=s governance_shard_id=i",
		         type, "gw", (int64_t)60000, "jobs_compact", scope,
		         (int64_t)0);
		assert_int_equal(m.status, 0);
		assert_true(m.flags & FSNP_FLAG_CUSTOM);
		assert_int_equal(m.body[2], 0x80);
		assert_int_equal(m.body[6], 1); /* one job */
		ftc_msg_free(&m);
		ftc_close(&cc);
		lease_is(&c, scope, 1, 1);
	}
	ftc_close(&c);
}

/* Whether the scope's ledger has an event of this kind. */
static bool ledger_has(struct ftc *c, const char *scope, const char *kind)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	bool found = false;
	struct ftc_msg m = call(c, FSNP_OP_FLOW_GOVERNANCE_LEDGER,
	                        "id=s partition_key=s", scope, scope);
	ok(&m);
	fsnp_iter_init(&it, &m.value);
	while (fsnp_iter_next(&it, NULL, &e)) {
		found = found || ftc_map_str(&e, "kind", kind);
	}
	ftc_msg_free(&m);
	return found;
}

/* A claim refused for want of credits answers [] when nothing is due and
 * the refusal when something is; with block_ms and nothing due it waits
 * without credits (refused, or having given back what it spent) and
 * spends when work arrives. */
static void test_admission_nothing_due(void **state)
{
	struct ftc c, a;
	struct ftc_msg m;
	struct wbuf b;
	char type[64], type2[64], scope[64], fid[64];
	uint64_t rid, t0, until;
	(void)state;
	name(type, sizeof type, "ndtype");
	name(type2, sizeof type2, "ndtype2");
	name(scope, sizeof scope, "ndlimit");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	assert_int_equal(ftc_connect(&a, cl.nodes[live_node()].fsnp), 0);
	/* Blocking, nothing due, no credits: waits block_ms, then []. */
	t0 = harness_mono_ms();
	m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
	         "type=s worker=s block_ms=i governance_limit_scope=s "
	         "governance_shard_id=i",
	         type, "gw", (int64_t)300, scope, (int64_t)0);
	ok(&m);
	assert_int_equal(m.value.as.count, 0);
	ftc_msg_free(&m);
	assert_true(harness_mono_ms() - t0 >= 250);
	/* Something due, no credits: the refusal. */
	name(fid, sizeof fid, "nd1");
	m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", fid, type);
	ok(&m);
	ftc_msg_free(&m);
	err_is(call(&c, FSNP_OP_FLOW_CLAIM_DUE,
	            "type=s worker=s governance_limit_scope=s "
	            "governance_shard_id=i",
	            type, "gw", scope, (int64_t)0),
	       1, "ERR flow limit not found");
	/* A parked claim holds no credit: it spends once a flow is due. */
	ftc_body(&b,
	         "type=s worker=s lease_ms=i block_ms=i "
	         "governance_limit_scope=s governance_shard_id=i",
	         type2, "gw", (int64_t)60000, (int64_t)15000, scope,
	         (int64_t)0);
	rid = ftc_send(&a, 1, FSNP_OP_FLOW_CLAIM_DUE, 0, &b);
	wbuf_free(&b);
	assert_true(rid > 0);
	harness_nap(300);
	m = call(&c, FSNP_OP_FLOW_LIMIT_LEASE,
	         "scope=s shard_id=i amount=i ttl_ms=i limit=i", scope,
	         (int64_t)0, (int64_t)1, (int64_t)600000, (int64_t)1);
	ok(&m);
	ftc_msg_free(&m);
	/* Polled, it spends, finds nothing and gives the credit back
	 * before it waits again (the scope's ledger shows the release). */
	until = harness_mono_ms() + 20000;
	while (!ledger_has(&c, scope, "limit_released")) {
		assert_true(harness_mono_ms() < until);
		harness_nap(100);
	}
	name(fid, sizeof fid, "nd2");
	m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", fid, type2);
	ok(&m);
	ftc_msg_free(&m);
	assert_int_equal(ftc_recv(&a, &m, 20000), 0);
	ok(&m);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	assert_int_equal(m.value.as.count, 1);
	ftc_msg_free(&m);
	lease_is(&c, scope, 0, 1);
	ftc_close(&a);
	ftc_close(&c);
}

/* The lease of the limit's shard 0: expires_at_ms. */
static int64_t lease_expiry(struct ftc *c, const char *scope)
{
	struct fsnp_val ls, l0;
	int64_t at;
	struct ftc_msg m = call(c, FSNP_OP_FLOW_LIMIT_GET, "scope=s", scope);
	ok(&m);
	assert_int_equal(fsnp_map_get(&m.value, "leases", &ls), 0);
	assert_int_equal(fsnp_map_get(&ls, "0", &l0), 0);
	at = ftc_map_int(&l0, "expires_at_ms");
	ftc_msg_free(&m);
	return at;
}

/* EXTEND_LEASE with the admission options renews the lease of the flow's
 * credit (only for the claim holding it); COMPLETE_MANY with them returns
 * the credit of each completed item, once, and not of a refused item. */
static void test_admission_extend_and_batch(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct fsnp_writer w;
	struct fsnp_iter it;
	struct fsnp_val e;
	struct wbuf items;
	char type[64], scope[64], ids[3][64], toks[3][128], fid[64];
	int64_t fens[3], at0, at1;
	(void)state;
	name(type, sizeof type, "xbtype");
	name(scope, sizeof scope, "xblimit");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	m = call(&c, FSNP_OP_FLOW_LIMIT_LEASE,
	         "scope=s shard_id=i amount=i ttl_ms=i limit=i", scope,
	         (int64_t)0, (int64_t)3, (int64_t)600000, (int64_t)3);
	ok(&m);
	ftc_msg_free(&m);
	for (int i = 0; i < 3; i++) {
		char what[16];
		snprintf(what, sizeof what, "xb%d", i);
		name(fid, sizeof fid, what);
		m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", fid, type);
		ok(&m);
		ftc_msg_free(&m);
	}
	for (int i = 0; i < 3; i++) {
		assert_true(
		    gclaim(&c, type, scope, ids[i], toks[i], &fens[i], &m));
		ftc_msg_free(&m);
	}
	lease_is(&c, scope, 0, 3);
	at0 = lease_expiry(&c, scope);
	/* A stale fencing token renews nothing and extends nothing. */
	m = call(&c, FSNP_OP_FLOW_EXTEND_LEASE,
	         "id=s lease_token=s fencing_token=i lease_ms=i "
	         "governance_limit_scope=s governance_shard_id=i",
	         ids[0], toks[0], fens[0] + 5, (int64_t)1200000, scope,
	         (int64_t)0);
	assert_int_equal(m.status, 1);
	ftc_msg_free(&m);
	assert_int_equal(lease_expiry(&c, scope), at0);
	/* The holder's extension renews the credit's lease first. */
	m = call(&c, FSNP_OP_FLOW_EXTEND_LEASE,
	         "id=s lease_token=s fencing_token=i lease_ms=i "
	         "governance_limit_scope=s governance_shard_id=i",
	         ids[0], toks[0], fens[0], (int64_t)1200000, scope, (int64_t)0);
	ok(&m);
	ftc_msg_free(&m);
	at1 = lease_expiry(&c, scope);
	assert_true(at1 >= at0 + 600000 - 60000);
	/* A batch: two completed, one refused (stale token). */
	for (int round = 0; round < 2; round++) {
		wbuf_init(&items);
		fsnp_w_init(&w, &items);
		fsnp_w_array_begin(&w);
		for (int i = 0; i < 3; i++) {
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "id");
			fsnp_w_str(&w, ids[i]);
			fsnp_w_key(&w, "lease_token");
			fsnp_w_str(&w, toks[i]);
			fsnp_w_key(&w, "fencing_token");
			fsnp_w_i64(&w, i == 2 ? fens[i] + 5 : fens[i]);
			fsnp_w_map_end(&w);
		}
		fsnp_w_array_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		m = call(&c, FSNP_OP_FLOW_COMPLETE_MANY,
		         "items=m independent=b governance_limit_scope=s "
		         "governance_shard_id=i",
		         items.data, items.len, 1, scope, (int64_t)0);
		wbuf_free(&items);
		ok(&m);
		assert_int_equal(m.value.tag, FSNP_ARRAY);
		fsnp_iter_init(&it, &m.value);
		for (int i = 0; i < 3 && round == 0; i++) {
			assert_true(fsnp_iter_next(&it, NULL, &e));
			assert_int_equal(e.tag, i == 2 ? FSNP_ARRAY : FSNP_BIN);
		}
		ftc_msg_free(&m);
		/* the third flow keeps its credit; none returned twice */
		lease_is(&c, scope, 2, 1);
	}
	gcomplete(&c, ids[2], toks[2], fens[2], scope);
	lease_is(&c, scope, 3, 0);
	ftc_close(&c);
}

/* The flow's lease deadline and fencing token. */
static void flow_lease(struct ftc *c, const char *id, int64_t *deadline,
                       int64_t *fen)
{
	struct ftc_msg m = call(c, FSNP_OP_FLOW_GET, "id=s", id);
	ok(&m);
	*deadline = ftc_map_int(&m.value, "lease_deadline_ms");
	*fen = ftc_map_int(&m.value, "fencing_token");
	ftc_msg_free(&m);
}

/* Sends a request and waits (bounded) for its answer. */
static struct ftc_msg call_slow(struct ftc *c, uint16_t op, const char *fmt,
                                ...)
{
	struct wbuf b;
	struct ftc_msg m;
	uint64_t rid;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	rid = ftc_send(c, 1, op, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(c, &m, 60000), 0);
	assert_int_equal(m.h.request_id, rid);
	return m;
}

/* The other group of a two-step command cannot answer: node 0 alone runs
 * (the two others stopped, so no group has a quorum). EFFECT.RESERVE
 * naming a circuit of the other group and a governed EXTEND_LEASE answer
 * GOVERNANCE_UNAVAILABLE, and once the nodes are back nothing of the
 * second step was written: no effect, the flow's lease as it was. */
static void test_other_group_unavailable(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	char id[64], type[64], scope[64], other[64] = "", tok[128];
	int64_t fen, fshard, dl0, fen0, dl1, fen1;
	uint64_t until;
	(void)state;
	name(type, sizeof type, "utype");
	name(scope, sizeof scope, "ulimit");
	assert_int_equal(ftc_connect(&c, cl.nodes[0].fsnp), 0);
	m = call(&c, FSNP_OP_FLOW_LIMIT_LEASE,
	         "scope=s shard_id=i amount=i ttl_ms=i limit=i", scope,
	         (int64_t)0, (int64_t)1, (int64_t)600000, (int64_t)1);
	ok(&m);
	ftc_msg_free(&m);
	name(id, sizeof id, "uflow");
	m = call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s", id, type);
	ok(&m);
	ftc_msg_free(&m);
	assert_true(gclaim(&c, type, scope, id, tok, &fen, &m));
	ftc_msg_free(&m);
	fshard = shard_of(&c, id, NULL);
	for (int i = 0; i < 64 && other[0] == 0; i++) {
		char sc[64], what[16];
		snprintf(what, sizeof what, "uc%d", i);
		name(sc, sizeof sc, what);
		if (shard_of(&c, "x", sc) != fshard) {
			strcpy(other, sc);
		}
	}
	assert_true(other[0] != 0);
	m = call(&c, FSNP_OP_FLOW_CIRCUIT_CLOSE, "scope=s", other);
	ok(&m);
	ftc_msg_free(&m);
	flow_lease(&c, id, &dl0, &fen0);
	assert_int_equal(fen0, fen);

	for (unsigned k = 1; k < NODES; k++) {
		assert_int_equal(harness_node_signal(&cl, k, SIGSTOP, NULL), 0);
	}
	m = call_slow(&c, FSNP_OP_FLOW_EFFECT_RESERVE,
	              "id=s effect_key=s effect_type=s lease_token=s "
	              "fencing_token=i operation_digest=s governance_scope=s",
	              id, "u1", "charge", tok, fen, "d", other);
	denial(&m, "GOVERNANCE_UNAVAILABLE", "governance_unavailable");
	ftc_msg_free(&m);
	m = call_slow(&c, FSNP_OP_FLOW_EXTEND_LEASE,
	              "id=s lease_token=s fencing_token=i lease_ms=i "
	              "governance_limit_scope=s governance_shard_id=i",
	              id, tok, fen, (int64_t)1200000, scope, (int64_t)0);
	denial(&m, "GOVERNANCE_UNAVAILABLE", "governance_unavailable");
	ftc_msg_free(&m);
	for (unsigned k = 1; k < NODES; k++) {
		assert_int_equal(harness_node_signal(&cl, k, SIGCONT, NULL), 0);
	}

	/* Back: neither second step ran. */
	until = harness_mono_ms() + 30000;
	for (;;) {
		m = call(&c, FSNP_OP_FLOW_EFFECT_GET, "id=s effect_key=s", id,
		         "u1");
		if (m.status == 0) {
			break;
		}
		ftc_msg_free(&m);
		assert_true(harness_mono_ms() < until);
		harness_nap(200);
	}
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);
	flow_lease(&c, id, &dl1, &fen1);
	assert_int_equal(dl1, dl0);
	assert_int_equal(fen1, fen0);
	m = call(&c, FSNP_OP_FLOW_GOVERNANCE_LEDGER, "id=s", id);
	ok(&m);
	assert_int_equal(m.value.as.count, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
}

/* The FSNP port of the node leading the group of flow `id` (or of the
 * approval `id`'s auto partition, the same routing) in cluster `c2`. */
static int64_t flow_port(struct ftc *c, const char *id)
{
	uint64_t until = harness_mono_ms() + 20000;
	for (;;) {
		struct ftc_msg m = call(c, FSNP_OP_ROUTE, "flow_id=s", id);
		int64_t p = -1;
		if (m.status == 0 &&
		    !ftc_map_str(&m.value, "hint", "local_fallback")) {
			p = ftc_map_int(&m.value, "native_port");
		}
		ftc_msg_free(&m);
		if (p > 0) {
			return p;
		}
		assert_true(harness_mono_ms() < until);
		harness_nap(100);
	}
}

/* The step that cannot reach its group is the second one: one replica
 * per shard, the waiting flow's node stopped after the approval and the
 * flow are set up. APPROVE commits the decision (its own group is up) and
 * answers GOVERNANCE_UNAVAILABLE; once the node is back the flow still
 * waits (nothing was written in its group), and repeating the decision
 * answers the reference's conflict and wakes it. */
static void test_wake_unavailable(void **state)
{
	struct harness_cluster c2;
	const char *extra[] = {"--shards", "2", "--replicas", "1", NULL};
	struct ftc c;
	struct ftc_msg m;
	char type[64], f[64] = "", a[64] = "";
	int64_t fport = -1, aport = -1;
	unsigned fnode = 0, anode = 0;
	uint64_t until;
	(void)state;
	assert_int_equal(harness_cluster_start(&c2, NODES, extra, true), 0);
	for (unsigned i = 0; i < NODES; i++) {
		assert_int_equal(ftc_wait_ready(c2.nodes[i].fsnp, 30000), 0);
	}
	assert_int_equal(ftc_connect(&c, c2.nodes[0].fsnp), 0);
	name(type, sizeof type, "wutype");
	name(f, sizeof f, "wuflow");
	fport = flow_port(&c, f);
	for (int i = 0; i < 64 && a[0] == 0; i++) {
		char s[64], what[16];
		snprintf(what, sizeof what, "wua%d", i);
		name(s, sizeof s, what);
		aport = flow_port(&c, s);
		if (aport != fport) {
			strcpy(a, s);
		}
	}
	assert_true(a[0] != 0);
	for (unsigned k = 0; k < NODES; k++) {
		if (c2.nodes[k].fsnp == fport) {
			fnode = k;
		}
		if (c2.nodes[k].fsnp == aport) {
			anode = k;
		}
	}
	assert_int_not_equal(fnode, anode);
	ftc_close(&c);
	assert_int_equal(ftc_connect(&c, c2.nodes[anode].fsnp), 0);
	park(&c, f, type, a, false);

	assert_int_equal(harness_node_signal(&c2, fnode, SIGSTOP, NULL), 0);
	m = call_slow(&c, FSNP_OP_FLOW_APPROVAL_APPROVE, "id=s approver=s", a,
	              "ann");
	denial(&m, "GOVERNANCE_UNAVAILABLE", "governance_unavailable");
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_GET, "id=s", a);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "approved"));
	ftc_msg_free(&m);
	assert_int_equal(harness_node_signal(&c2, fnode, SIGCONT, NULL), 0);

	until = harness_mono_ms() + 30000;
	for (;;) {
		m = call(&c, FSNP_OP_FLOW_GET, "id=s", f);
		if (m.status == 0) {
			break;
		}
		ftc_msg_free(&m);
		assert_true(harness_mono_ms() < until);
		harness_nap(200);
	}
	assert_true(ftc_map_str(&m.value, "state", "awaiting_approval"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_APPROVE, "id=s approver=s", a,
	         "ann");
	denial(&m, "GOVERNANCE_CONFLICT", "governance_conflict");
	ftc_msg_free(&m);
	state_is(&c, f, "approved");
	ftc_close(&c);
	harness_cluster_stop(&c2);
}

/* Runs `lodectl --fsnp 127.0.0.1:PORT flow governance ARGS...` against a
 * live node; its exit status, output in out. */
static int lodectl(char *out, size_t cap, const char *const *args)
{
	char bin[1024], addr[64];
	const char *argv[16];
	size_t n = 0;
	char *slash;
	snprintf(bin, sizeof bin, "%s", harness_binary());
	slash = strrchr(bin, '/');
	assert_non_null(slash);
	snprintf(slash + 1, sizeof bin - (size_t)(slash + 1 - bin), "lodectl");
	snprintf(addr, sizeof addr, "127.0.0.1:%u", cl.nodes[live_node()].fsnp);
	argv[n++] = bin;
	argv[n++] = "--fsnp";
	argv[n++] = addr;
	argv[n++] = "flow";
	argv[n++] = "governance";
	while (*args != NULL && n < 15) {
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	return harness_run(argv, out, cap);
}

static void test_lodectl(void **state)
{
	char out[65536], scope[64], id[64];
	(void)state;
	name(scope, sizeof scope, "ctl-budget");
	name(id, sizeof id, "ctl-approval");
	{
		const char *a[] = {"budget",      "reserve", scope,
		                   "7",           "--limit", "10",
		                   "--window-ms", "60000",   "--reservation-id",
		                   "r1",          NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
	}
	{
		const char *a[] = {"budget", "get", scope, NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "used"));
		assert_non_null(strstr(out, "7"));
	}
	{
		const char *a[] = {"budget", "reserve", scope, "7", NULL};
		assert_int_not_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "GOVERNANCE_BUDGET_EXHAUSTED"));
	}
	{
		const char *a[] = {"budget", "list", "--scope", scope, NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, scope));
	}
	{
		const char *a[] = {"approval", "request", id,
		                   "f1",       scope,     NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
	}
	{
		const char *a[] = {"approval", "approve", id, "ann", NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "approved"));
	}
	{
		const char *a[] = {"approval", "reject", id, "ann", NULL};
		assert_int_not_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "GOVERNANCE_CONFLICT"));
	}
	{
		const char *a[] = {"approval", "list", "--scope", scope, NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, id));
	}
	{
		/* wake keys; the flow does not exist, so the decision has
		 * nothing to wake and is answered as usual */
		char id2[80];
		snprintf(id2, sizeof id2, "%s-w", id);
		const char *a[] = {"approval", "request",
		                   id2,        "no-such-flow",
		                   scope,      "--wait-state",
		                   "waiting",  "--transition-to",
		                   "go",       NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "wait_state"));
		const char *b[] = {"approval", "approve", id2, "ann", NULL};
		assert_int_equal(lodectl(out, sizeof out, b), 0);
		assert_non_null(strstr(out, "approved"));
	}
	{
		const char *a[] = {"circuit",   "open", scope,
		                   "--open-ms", "1000", NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
	}
	{
		const char *a[] = {"circuit", "get", scope, NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "open"));
	}
	{
		const char *a[] = {"limit", "lease",   scope, "0", "2",
		                   "60000", "--limit", "5",   NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
	}
	{
		const char *a[] = {"limit", "get", scope, NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "free"));
	}
	{
		const char *a[] = {"limit", "list", NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
	}
	{
		const char *a[] = {"ledger", scope, "--pk", scope, NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "budget_reserved"));
	}
	{
		const char *a[] = {"overview", NULL};
		assert_int_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "counts"));
	}
	{
		const char *a[] = {"budget", "get", "no-such-scope", NULL};
		assert_int_not_equal(lodectl(out, sizeof out, a), 0);
		assert_non_null(strstr(out, "(not found)"));
	}
}

static void test_objects_raw(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	char scope[64], ids[4][64], cscope[64];
	const char *rel[1];
	struct fsnp_val e;
	struct fsnp_iter it;
	static char held[64];
	(void)state;
	name(scope, sizeof scope, "limit");
	name(cscope, sizeof cscope, "circuit");
	assert_int_equal(ftc_connect(&c, cl.nodes[live_node()].fsnp), 0);
	/* Bad bodies. */
	err_is(call(&c, FSNP_OP_FLOW_BUDGET_RESERVE, "amount=i", (int64_t)1), 6,
	       "ERR native field scope must be binary");
	err_is(call(&c, FSNP_OP_FLOW_LIMIT_LEASE, "scope=s bogus=i", scope,
	            (int64_t)1),
	       6, "ERR native unknown flow option bogus");
	/* Limits. */
	m = call(&c, FSNP_OP_FLOW_LIMIT_LEASE,
	         "scope=s shard_id=i amount=i ttl_ms=i limit=i", scope,
	         (int64_t)0, (int64_t)2, (int64_t)60000, (int64_t)2);
	ok(&m);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_LIMIT_LEASE,
	         "scope=s shard_id=i amount=i ttl_ms=i", scope, (int64_t)1,
	         (int64_t)1, (int64_t)60000);
	denial(&m, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	assert_true(ftc_map_str(&m.value, "policy", "limit"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_LIMIT_SPEND, "scope=s shard_id=i amount=i",
	         scope, (int64_t)0, (int64_t)1);
	ok(&m);
	assert_int_equal(fsnp_map_get(&m.value, "reservation_ids", &e), 0);
	fsnp_iter_init(&it, &e);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	snprintf(held, sizeof held, "%.*s", (int)e.as.bin.len,
	         (const char *)e.as.bin.ptr);
	ftc_msg_free(&m);
	rel[0] = held;
	m = call(&c, FSNP_OP_FLOW_LIMIT_RELEASE,
	         "scope=s shard_id=i reservation_ids=a", scope, (int64_t)0, rel,
	         1);
	ok(&m);
	/* the credit goes back to its lease (reference) */
	assert_int_equal(ftc_map_int(&m.value, "free"), 0);
	{
		struct fsnp_val ls, l0;
		assert_int_equal(fsnp_map_get(&m.value, "leases", &ls), 0);
		assert_int_equal(fsnp_map_get(&ls, "0", &l0), 0);
		assert_int_equal(ftc_map_int(&l0, "available"), 2);
		assert_int_equal(ftc_map_int(&l0, "in_use"), 0);
	}
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_LIMIT_GET, "scope=s", scope);
	ok(&m);
	assert_int_equal(ftc_map_int(&m.value, "limit"), 2);
	ftc_msg_free(&m);
	/* Approvals spread over the shards, listed from every one. */
	for (int i = 0; i < 4; i++) {
		char what[16];
		const char *as[2] = {"ann", "bob"};
		snprintf(what, sizeof what, "appr-%d", i);
		name(ids[i], sizeof ids[i], what);
		m = call(&c, FSNP_OP_FLOW_APPROVAL_REQUEST,
		         "id=s flow_id=s scope=s reason=s requested_by=s "
		         "assignees=a timeout_ms=i",
		         ids[i], "some-flow", prefix, "big refund", "bot", as,
		         2, (int64_t)600000);
		ok(&m);
		assert_true(ftc_map_str(&m.value, "status", "pending"));
		ftc_msg_free(&m);
	}
	m = call(&c, FSNP_OP_FLOW_APPROVAL_REQUEST, "id=s flow_id=s scope=s",
	         ids[0], "some-flow", prefix);
	denial(&m, "GOVERNANCE_CONFLICT", "governance_conflict");
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_APPROVE, "id=s approver=s reason=s",
	         ids[0], "ann", "fine");
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "approved"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_REJECT, "id=s approver=s", ids[1],
	         "bob");
	ok(&m);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_REJECT, "id=s approver=s", ids[1],
	         "bob");
	denial(&m, "GOVERNANCE_CONFLICT", "governance_conflict");
	ftc_msg_free(&m);
	err_is(call(&c, FSNP_OP_FLOW_APPROVAL_APPROVE, "id=s approver=s",
	            "no-such-approval", "ann"),
	       1, "ERR flow approval not found");
	m = call(&c, FSNP_OP_FLOW_APPROVAL_LIST, "scope=s", prefix);
	ok(&m);
	assert_int_equal(m.value.as.count, 4);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_LIST, "scope=s status=s", prefix,
	         "pending");
	ok(&m);
	assert_int_equal(m.value.as.count, 2);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_APPROVAL_GET, "id=s", ids[0]);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "decided_by", "ann"));
	ftc_msg_free(&m);
	/* Circuits. */
	m = call(&c, FSNP_OP_FLOW_CIRCUIT_OPEN,
	         "scope=s open_ms=i failure_threshold=i", cscope,
	         (int64_t)60000, (int64_t)3);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "open"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, "scope=s", prefix);
	ok(&m);
	{
		struct fsnp_val counts;
		assert_int_equal(fsnp_map_get(&m.value, "counts", &counts), 0);
		assert_int_equal(ftc_map_int(&counts, "pending_approvals"), 2);
		assert_true(ftc_map_int(&counts, "open_circuits") >= 0);
	}
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_CIRCUIT_CLOSE, "scope=s", cscope);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "status", "closed"));
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_FLOW_CIRCUIT_GET, "scope=s", cscope);
	ok(&m);
	assert_int_equal(ftc_map_int(&m.value, "failure_threshold"), 3);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static int setup(void **state)
{
	const char *extra[] = {"--shards", "2", NULL};
	(void)state;
	snprintf(prefix, sizeof prefix, "g-%ld", (long)getpid());
	if (harness_cluster_start(&cl, NODES, extra, true) != 0) {
		return -1;
	}
	for (unsigned i = 0; i < NODES; i++) {
		if (ftc_wait_ready(cl.nodes[i].fsnp, 30000) != 0) {
			return -1;
		}
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cl);
	return 0;
}

int main(void)
{
	/* The leader kill comes last: the others run on a full cluster. */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_objects_raw),
	    cmocka_unit_test(test_effects),
	    cmocka_unit_test(test_circuit_across_shards),
	    cmocka_unit_test(test_approval_wakes_flow),
	    cmocka_unit_test(test_claim_admission),
	    cmocka_unit_test(test_admission_nothing_due),
	    cmocka_unit_test(test_admission_extend_and_batch),
	    cmocka_unit_test(test_other_group_unavailable),
	    cmocka_unit_test(test_wake_unavailable),
	    cmocka_unit_test(test_lodectl),
	    cmocka_unit_test(test_budget_never_overspent),
	};
	return cmocka_run_group_tests_name("flow governance, 3 nodes", tests,
	                                   setup, teardown);
}

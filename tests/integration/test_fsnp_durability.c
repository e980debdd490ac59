/* Integration: durability of acknowledged FSNP writes across SIGKILL.
 *
 * 20 000 RPUSHes of unique values go to 8 lists, one on each data shard,
 * pipelined (a window of requests in flight) over real store commands,
 * while the node is SIGKILLed at 5 random points (seeded) and restarted
 * on the same data. Nothing is retried. Afterwards every acknowledged
 * value is present exactly once, and no value is present twice.
 *
 * Then the same with SETs rewriting 300 keys under a snapshot every 16
 * entries: KV rows reach RocksDB only by checkpoints (docs/storage.md "KV
 * rows: write-back") while the log behind each snapshot is dropped, so a
 * flush that missed them would lose acknowledged writes. Every key ends
 * at a value written to it, no older than its last acknowledged one. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

#define N_VALUES 20000
#define N_KILLS 5
#define WINDOW 256
#define SHARDS 8

static uint64_t prng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
	prng ^= prng << 13;
	prng ^= prng >> 7;
	prng ^= prng << 17;
	return prng;
}

static char keys[SHARDS][32];
static uint8_t acked[N_VALUES];
static uint8_t count[N_VALUES];
static uint32_t rid_value[N_VALUES + 64]; /* request id -> value + 1 */

/* One key per shard (group). */
static void pick_keys(void)
{
	bool have[SHARDS] = {false};
	int found = 0;
	for (int i = 0; found < SHARDS; i++) {
		char k[32];
		snprintf(k, sizeof k, "dur:%d", i);
		unsigned s = fsnp_slot_shard(
		    fsnp_slot_of((const uint8_t *)k, strlen(k)), SHARDS);
		if (!have[s]) {
			have[s] = true;
			memcpy(keys[s], k, sizeof k);
			found++;
		}
	}
}

static uint64_t send_push(struct ftc *c, uint32_t v)
{
	char val[16];
	const char *vals[] = {val};
	struct wbuf b;
	snprintf(val, sizeof val, "v%u", v);
	ftc_body(&b, "key=s values=a", keys[v % SHARDS], vals, 1);
	uint64_t rid = ftc_send(c, 1 + v % SHARDS, FSNP_OP_RPUSH, 0, &b);
	wbuf_free(&b);
	return rid;
}

/* Reads one reply; records an acknowledgement. -1 when the node is gone. */
static int recv_one(struct ftc *c, int timeout_ms)
{
	struct ftc_msg m;
	if (ftc_recv(c, &m, timeout_ms) != 0) {
		return -1;
	}
	if (m.h.request_id < sizeof rid_value / sizeof rid_value[0] &&
	    rid_value[m.h.request_id] != 0 && m.status == FSNP_STATUS_OK) {
		acked[rid_value[m.h.request_id] - 1] = 1;
	}
	ftc_msg_free(&m);
	return 0;
}

typedef void (*send_fn)(struct ftc *c, uint32_t v);
typedef int (*recv_fn)(struct ftc *c, int timeout_ms);

/* Sends values 0..total-1 with WINDOW requests in flight, SIGKILLing the
 * node (and restarting it on the same data) when the next value to send
 * is kill_at[k]; `send` records each request id, `recv` each answer. */
static void drive_with_kills(struct harness_cluster *cl, struct ftc *c,
                             uint16_t port, uint32_t total,
                             const uint32_t kill_at[N_KILLS], send_fn send,
                             recv_fn recv)
{
	unsigned inflight = 0;
	int kills = 0;
	uint32_t next = 0;

	while (next < total) {
		/* Keep WINDOW requests in flight. */
		while (inflight < WINDOW && next < total &&
		       !(kills < N_KILLS && next == kill_at[kills])) {
			send(c, next++);
			inflight++;
		}
		if (kills < N_KILLS && next == kill_at[kills]) {
			/* Kill with a random share of the window unanswered. */
			unsigned wait = (unsigned)(rnd() % (inflight + 1));
			while (wait-- > 0 && recv(c, 10000) == 0) {
				inflight--;
			}
			assert_int_equal(
			    harness_node_signal(cl, 0, SIGKILL, NULL), 0);
			/* Replies already in our buffer still count. */
			while (recv(c, 200) == 0) {
			}
			/* Request ids keep counting: never reused. */
			uint64_t rid_next = c->next_rid;
			ftc_close(c);
			inflight = 0;
			kills++;
			assert_int_equal(harness_node_start(cl, 0), 0);
			assert_int_equal(ftc_wait_ready(port, 30000), 0);
			assert_int_equal(ftc_connect(c, port), 0);
			c->next_rid = rid_next;
			continue;
		}
		if (inflight > 0) {
			assert_int_equal(recv(c, 20000), 0);
			inflight--;
		}
	}
	while (inflight > 0) {
		assert_int_equal(recv(c, 20000), 0);
		inflight--;
	}
	assert_int_equal(kills, N_KILLS);
}

static void push_one(struct ftc *c, uint32_t v)
{
	uint64_t rid = send_push(c, v);
	assert_true(rid != 0);
	rid_value[rid] = v + 1;
}

static void test_kill_restart_rpush(void **state)
{
	struct harness_cluster cl;
	struct ftc c;
	uint32_t kill_at[N_KILLS];
	(void)state;
	pick_keys();
	for (int i = 0; i < N_KILLS; i++) {
		/* Spread over the run, in increasing order. */
		kill_at[i] = (uint32_t)((i + 1) * (N_VALUES / (N_KILLS + 1)) +
		                        rnd() % (N_VALUES / (N_KILLS + 1) / 2));
	}
	uint16_t port;
	assert_int_equal(ftc_start(&cl, 1, NULL, &port), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	drive_with_kills(&cl, &c, port, N_VALUES, kill_at, push_one, recv_one);

	/* Every list, whole. */
	for (int s = 0; s < SHARDS; s++) {
		struct wbuf b;
		struct ftc_msg m;
		struct fsnp_iter it;
		struct fsnp_val e;
		ftc_body(&b, "key=s start=i stop=i", keys[s], (int64_t)0,
		         (int64_t)-1);
		assert_int_equal(ftc_call(&c, 1, FSNP_OP_LRANGE, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &e)) {
			char tmp[16];
			snprintf(tmp, sizeof tmp, "%.*s", (int)e.as.bin.len,
			         (const char *)e.as.bin.ptr);
			unsigned v = (unsigned)atoi(tmp + 1);
			assert_true(v < N_VALUES);
			assert_int_equal((int)(v % SHARDS), s);
			count[v]++;
		}
		ftc_msg_free(&m);
	}
	unsigned n_acked = 0, n_present = 0;
	for (unsigned v = 0; v < N_VALUES; v++) {
		if (count[v] > 1) {
			fail_msg("value v%u present %u times", v, count[v]);
		}
		if (acked[v] && count[v] != 1) {
			fail_msg("acknowledged value v%u is missing", v);
		}
		n_acked += acked[v];
		n_present += count[v];
	}
	print_message("%u of %u values acknowledged, %u present, %d kills\n",
	              n_acked, N_VALUES, n_present, N_KILLS);
	assert_true(n_acked > N_VALUES / 2);
	ftc_close(&c);
	harness_cluster_stop(&cl);
}

#define SET_KEYS 300
#define SET_WRITES 30000

static uint32_t set_acked[SET_KEYS];      /* highest acknowledged value + 1 */
static uint32_t set_rid[SET_WRITES + 64]; /* request id -> value + 1 */

static void set_key_name(char *k, size_t cap, uint32_t i)
{
	snprintf(k, cap, "wb:%u", i);
}

static uint64_t send_set(struct ftc *c, uint32_t v)
{
	char k[32], val[16];
	struct wbuf b;
	uint32_t key = v % SET_KEYS;
	uint64_t rid;

	set_key_name(k, sizeof k, key);
	snprintf(val, sizeof val, "%u", v);
	ftc_body(&b, "key=s value=s", k, val);
	/* One lane per key: a key's writes apply in the order sent. */
	rid = ftc_send(c, 1 + key % 16, FSNP_OP_SET, 0, &b);
	wbuf_free(&b);
	return rid;
}

static void set_one(struct ftc *c, uint32_t v)
{
	uint64_t rid = send_set(c, v);
	assert_true(rid != 0 && rid < sizeof set_rid / sizeof set_rid[0]);
	set_rid[rid] = v + 1;
}

static int recv_set(struct ftc *c, int timeout_ms)
{
	struct ftc_msg m;
	if (ftc_recv(c, &m, timeout_ms) != 0) {
		return -1;
	}
	if (m.h.request_id < sizeof set_rid / sizeof set_rid[0] &&
	    set_rid[m.h.request_id] != 0 && m.status == FSNP_STATUS_OK) {
		uint32_t v = set_rid[m.h.request_id] - 1;
		if (v + 1 > set_acked[v % SET_KEYS]) {
			set_acked[v % SET_KEYS] = v + 1;
		}
	}
	ftc_msg_free(&m);
	return 0;
}

static void test_kill_restart_set(void **state)
{
	const char *extra[] = {"--snapshot-threshold", "16", NULL};
	struct harness_cluster cl;
	struct ftc c;
	uint32_t kill_at[N_KILLS];
	unsigned inflight = 0;
	(void)state;
	for (int i = 0; i < N_KILLS; i++) {
		kill_at[i] = (uint32_t)(i + 1) * (SET_WRITES / 6);
	}
	uint16_t port;
	assert_int_equal(ftc_start(&cl, 1, extra, &port), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	drive_with_kills(&cl, &c, port, SET_WRITES, kill_at, set_one, recv_set);

	/* Other keys next, so that snapshots (each a checkpoint and a flush)
	 * come after every key's last write: its row is then on disk only
	 * if a checkpoint put it there, not replayed from the log. */
	for (uint32_t i = 0; i < 4000; i++) {
		char k[32];
		struct wbuf b;
		snprintf(k, sizeof k, "filler:%u", i % 997);
		ftc_body(&b, "key=s value=s", k, "x");
		assert_true(ftc_send(&c, 1 + i % 16, FSNP_OP_SET, 0, &b) != 0);
		wbuf_free(&b);
		if (++inflight == WINDOW) {
			for (; inflight > 0; inflight--) {
				assert_int_equal(recv_set(&c, 20000), 0);
			}
		}
	}
	for (; inflight > 0; inflight--) {
		assert_int_equal(recv_set(&c, 20000), 0);
	}

	/* Once more after a last kill, with nothing in flight. */
	assert_int_equal(harness_node_signal(&cl, 0, SIGKILL, NULL), 0);
	ftc_close(&c);
	assert_int_equal(harness_node_start(&cl, 0), 0);
	assert_int_equal(ftc_wait_ready(port, 30000), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	unsigned n_acked = 0, n_found = 0;
	for (uint32_t key = 0; key < SET_KEYS; key++) {
		char k[32], tmp[16];
		struct wbuf b;
		struct ftc_msg m;
		uint32_t v;

		set_key_name(k, sizeof k, key);
		ftc_body(&b, "key=s", k);
		assert_int_equal(ftc_call(&c, 1, FSNP_OP_GET, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		if (m.value.tag != FSNP_BIN) {
			if (set_acked[key] != 0) {
				fail_msg("key %s: acknowledged write %u lost",
				         k, set_acked[key] - 1);
			}
			ftc_msg_free(&m);
			continue;
		}
		snprintf(tmp, sizeof tmp, "%.*s", (int)m.value.as.bin.len,
		         (const char *)m.value.as.bin.ptr);
		v = (uint32_t)strtoul(tmp, NULL, 10);
		n_found++;
		n_acked += set_acked[key] != 0;
		ftc_msg_free(&m);
		if (v % SET_KEYS != key || v >= SET_WRITES) {
			fail_msg("key %s holds %u, never written to it", k, v);
		}
		if (v + 1 < set_acked[key]) {
			fail_msg("key %s holds %u, older than acknowledged %u",
			         k, v, set_acked[key] - 1);
		}
	}
	print_message("%u keys, %u acknowledged, %u found, %d kills\n",
	              SET_KEYS, n_acked, n_found, N_KILLS + 1);
	assert_int_equal(n_found, SET_KEYS);
	ftc_close(&c);
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kill_restart_rpush),
	    cmocka_unit_test(test_kill_restart_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

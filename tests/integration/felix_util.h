/* Synchronous helpers over client/felix_client.h for the Felix integration
 * tests: each call runs the loop until its answer arrives or a bound
 * passes (a test fails on the bound, never passes because of one). The
 * cluster helpers at the end fail the running cmocka test themselves. */
#ifndef LS_TESTS_FELIX_UTIL_H
#define LS_TESTS_FELIX_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client/felix_client.h"
#include "tests/integration/harness.h"

#define FX_WAIT_MS 15000
#define FX_MAX_EVENTS 20000

struct fx {
	uv_loop_t *loop;
	struct felix_client *c;
	bool ready;
	int status;
	char message[512];
	char ca[600];
};

/* Connects to node i of the cluster as tenant/token. 0 or the status. */
int fx_connect(struct fx *f, uv_loop_t *loop, struct harness_cluster *cl,
               unsigned i, const char *tenant, const char *token,
               unsigned request_streams);
/* The same as tenant t1 with one request stream, offering the given
 * client_flags and client_features in auth. */
int fx_connect_with(struct fx *f, uv_loop_t *loop, struct harness_cluster *cl,
                    unsigned i, uint16_t client_flags,
                    uint32_t client_features);
void fx_close(struct fx *f);

/* A publish of `n` payloads (NUL-terminated strings); the key may be
 * NULL. Returns the ack status; the message is in f->message. */
int fx_publish(struct fx *f, const char *ns, const char *stream,
               const char *key, const char *const *payloads, uint32_t n);
int fx_publish_json(struct fx *f, const char *ns, const char *stream,
                    const char *key, const char *const *payloads, uint32_t n);

/* Repeats a publish until the shard's leader is elected (start-up). */
int fx_publish_ready(struct fx *f, const char *ns, const char *stream);

/* The answer of a request: the reply is copied into *out (caller frees
 * with felix_msg_free) on success. */
int fx_cache_put(struct fx *f, const char *cache, const char *key,
                 const char *value, bool has_ttl, uint64_t ttl_ms);
/* Value into buf (NUL-terminated); *found false on a miss. */
int fx_cache_get(struct fx *f, const char *cache, const char *key, char *buf,
                 size_t cap, bool *found);
int fx_cache_delete(struct fx *f, const char *cache, const char *key, char *buf,
                    size_t cap, bool *found);
int fx_counter_add(struct fx *f, const char *cache, const char *key,
                   int64_t delta, int64_t *sum);
int fx_counter_get(struct fx *f, const char *cache, const char *key,
                   int64_t *value, bool *found);
int fx_stream_shards(struct fx *f, const char *ns, const char *stream,
                     uint32_t *shards);

/* A subscription that records what it receives. */
struct fx_sub {
	struct fx *f;
	struct felix_sub *h;
	bool started, refused, ended;
	int status;
	enum felix_msg_type answer; /* subscribed, cursor error, error */
	struct felix_msg_subscribe_cursor_error cursor;
	char message[512];
	uint64_t batches;
	uint64_t n;
	bool has_offsets;
	uint64_t offsets[FX_MAX_EVENTS];
	char *payloads[FX_MAX_EVENTS]; /* owned */
};

/* Subscribes and waits until it is established or refused. `start` NULL
 * means latest. 0 when established. */
int fx_subscribe(struct fx *f, struct fx_sub *s, const char *ns,
                 const char *stream, uint32_t shard,
                 const struct felix_start *start);
/* Waits until at least `n` events arrived (0) or the bound passed. */
int fx_sub_wait(struct fx_sub *s, uint64_t n);
void fx_sub_close(struct fx_sub *s);
void fx_sub_free(struct fx_sub *s);

/* ---- consumer groups ---- */

struct fx_rec {
	uint64_t offset;
	uint32_t attempts;
	char payload[64]; /* NUL-terminated, cut to 63 bytes */
};

/* A poll: up to `cap` records into out, *n of them. */
int fx_group_poll(struct fx *f, const char *ns, const char *stream,
                  uint32_t shard, const char *group, uint32_t max,
                  uint64_t wait_ms, struct fx_rec *out, size_t cap, size_t *n);
/* ack / nack / discard / redrive by type; the message is in f->message. */
int fx_group_settle(struct fx *f, enum felix_msg_type type, const char *ns,
                    const char *stream, uint32_t shard, const char *group,
                    uint64_t offset);
int fx_group_dead(struct fx *f, const char *ns, const char *stream,
                  uint32_t shard, const char *group, uint64_t *out, size_t cap,
                  size_t *n);

/* An asynchronous poll, for long polls a test does not wait on: zeroed,
 * then passed with fx_apoll_cb to felix_client_group_poll. */
#define FX_APOLL_MAX 8
struct fx_apoll {
	bool done;
	int status;
	size_t n;
	struct fx_rec rec[FX_APOLL_MAX];
};

void fx_apoll_cb(void *data, int status, const struct felix_msg *reply,
                 const char *message);

/* ---- idempotent producers ---- */

int fx_producer_init(struct fx *f, uint64_t *id);
/* 0 on publish_ok; FELIX_CLIENT_EREFUSED with *refused true and the
 * reason in *why (node_id/addr cut into why_node/why_addr) on
 * publish_refused, or *refused false on publish_error / error. */
struct fx_refusal {
	bool refused;
	enum felix_refusal_kind kind;
	uint64_t expected;
	char node_id[64];
	char addr[128];
};
int fx_publish_idem(struct fx *f, const char *ns, const char *stream,
                    const char *key, const char *const *payloads, uint32_t n,
                    uint64_t producer, uint64_t sequence,
                    struct fx_refusal *why);

/* ---- cache watches ---- */

struct fx_watch {
	struct fx *f;
	struct felix_sub *h;
	bool started, refused, ended, lagged;
	int status;
	enum felix_msg_type answer;
	struct felix_msg_subscribe_cursor_error cursor;
	struct felix_msg_cache_watch_started info;
	uint64_t resume_from; /* lagged */
	char message[512];
	uint64_t n;
	uint64_t offsets[FX_MAX_EVENTS];
	char *keys[FX_MAX_EVENTS];       /* owned */
	char *values[FX_MAX_EVENTS];     /* owned; NULL for a delete; cut */
	size_t value_len[FX_MAX_EVENTS]; /* the whole length */
};

/* Starts a watch and waits until it is established (0) or refused. */
int fx_watch(struct fx *f, struct fx_watch *w, const char *cache,
             const struct felix_watch_request *req);
/* Waits until at least n changes arrived, or the watch ended. */
int fx_watch_wait(struct fx_watch *w, uint64_t n);
void fx_watch_free(struct fx_watch *w);

/* Runs the loop for `ms` (lets things happen without waiting on one). */
void fx_spin(struct fx *f, unsigned ms);

/* The value of a Prometheus series (first line starting with `series`
 * followed by a space) on node i's /metrics, or -1. */
int64_t fx_metric(struct harness_cluster *cl, unsigned i, const char *series);

/* VmRSS of a process in KiB, or 0. */
uint64_t fx_rss_kib(int pid);

/* POSTs /v1/KIND/t1/default/NAME (`body`) to node i's admin port until it
 * answers 201, then waits until GET shows the scope: 0, or -1 (said on
 * stderr) when it does not within about 30 s. */
int fx_create_scope(struct harness_cluster *cl, unsigned i, const char *kind,
                    const char *name, const char *body);

/* The leader node id (1-based) of shard 0 of t1/default/NAME as node i
 * sees it, or 0. */
unsigned fx_scope_leader(struct harness_cluster *cl, unsigned i,
                         const char *kind, const char *name);
/* The same for tenant/default/NAME. */
unsigned fx_tenant_scope_leader(struct harness_cluster *cl, unsigned i,
                                const char *tenant, const char *kind,
                                const char *name);
/* Waits up to 30 s until node i names a leader for shard 0 other than
 * `not`: the leader, or 0. */
unsigned fx_wait_scope_leader(struct harness_cluster *cl, unsigned i,
                              const char *kind, const char *name,
                              unsigned not );

/* ---- tests ---- */

/* What a test's main does before it runs its tests: ignores SIGPIPE and,
 * given an argument, runs only the tests whose names match it (a cmocka
 * pattern: '*lagged*'). */
void fx_test_args(int argc, char **argv);

/* ---- clusters ---- */

/* fx_connect to node i as tenant t1 (token "any", 2 request streams); on
 * failure prints why and node i's log, and fails the test. */
void fx_connect_ok(struct fx *f, uv_loop_t *loop, struct harness_cluster *cl,
                   unsigned i);

/* A write through f until the cluster answers it (start-up); fails the
 * test when it does not within about 30 s. */
void fx_wait_ready(struct fx *f);

/* Starts n nodes with `args` (harness_cluster_start), initialises `loop`,
 * connects f[i] to node i (fx_connect_ok) and waits until each answers
 * (fx_wait_ready). */
void fx_start_cluster(struct harness_cluster *cl, unsigned n,
                      const char *const *args, uv_loop_t *loop, struct fx *f);

/* Waits until node i sees every group led by its preferred replica (the
 * first voter): the cluster moves leaderships there after a start, and a
 * test that picks a leader before that could see it move. Fails the test
 * after 40 s. */
void fx_wait_settled(struct harness_cluster *cl, unsigned i);

#endif

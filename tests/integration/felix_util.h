/* Synchronous helpers over client/felix_client.h for the Felix integration
 * tests: each call runs the loop until its answer arrives or a bound
 * passes (a test fails on the bound, never passes because of one). */
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

/* Runs the loop for `ms` (lets things happen without waiting on one). */
void fx_spin(struct fx *f, unsigned ms);

/* The value of a Prometheus series (first line starting with `series`
 * followed by a space) on node i's /metrics, or -1. */
int64_t fx_metric(struct harness_cluster *cl, unsigned i, const char *series);

/* VmRSS of a process in KiB, or 0. */
uint64_t fx_rss_kib(int pid);

#endif

/* Felix idempotent producers: producer_init and publish_idempotent.
 *
 * producer_init answers 64 random bits from the kernel CSPRNG (getrandom);
 * nothing is written, because the request names no stream: the store
 * registers an id on a stream shard with its first batch (sequence 0).
 *
 * publish_idempotent goes to the shard its key hashes to (unkeyed: shard
 * 0) and is taken only by that shard's leader; elsewhere it is refused
 * with not_leader naming the leader and its client address, never
 * forwarded. The leader proposes STREAM_APPEND_IDEM: the producer's next
 * sequence and the outcomes of its last 64 batches are part of the
 * replicated shard state (store/producer.c), so a duplicate is answered
 * publish_ok without appending by whichever node leads the shard now,
 * also after a failover or a restart. The store's refusals map to
 * publish_refused (sequence_gap with the expected sequence,
 * sequence_expired, unknown_producer); everything else (unknown stream,
 * no leader, storage failure) is publish_error, after which the producer
 * re-sends under the same sequence. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "node/felix/felix_internal.h"
#include "node/felix/scopes.h"
#include "node/shards.h"
#include "store/store.h"
#include "wire/felix_hash.h"

static void reply_ok(struct freq *r)
{
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_PUBLISH_OK);
	m.u.publish_ok.request_id = r->request_id;
	freq_reply_msg(r, &m);
}

static void reply_fail(struct freq *r, const char *message)
{
	struct felix_msg m;
	metric_add(r->srv->m.publish_errors, 1);
	felix_msg_init(&m, FELIX_MSG_PUBLISH_ERROR);
	m.u.publish_error.request_id = r->request_id;
	m.u.publish_error.message = (char *)message;
	freq_reply_msg(r, &m);
}

static void reply_refused(struct freq *r, const struct felix_refusal *why,
                          const char *message)
{
	struct felix_msg m;
	metric_add(r->srv->m.idem_refused, 1);
	felix_msg_init(&m, FELIX_MSG_PUBLISH_REFUSED);
	m.u.publish_refused.request_id = r->request_id;
	m.u.publish_refused.reason = *why;
	m.u.publish_refused.message = (char *)message;
	freq_reply_msg(r, &m);
}

/* not_leader naming the group's leader, or publish_error when no leader
 * is known (nothing to name: the producer re-sends). */
static void reply_not_leader(struct freq *r)
{
	struct shards_route rt;
	struct felix_refusal why;
	char id[32], msg[256];
	if (shards_route(r->srv->shards, r->group, &rt) != SHARDS_OK ||
	    rt.leader_id == 0 || rt.is_self) {
		reply_fail(r, "shard unavailable: no leader known; re-send "
		              "under the same sequence");
		return;
	}
	snprintf(id, sizeof id, "%" PRIu64, rt.leader_id);
	memset(&why, 0, sizeof why);
	why.kind = FELIX_REFUSAL_NOT_LEADER;
	why.node_id = id;
	why.addr = rt.felix[0] != '\0' ? rt.felix : NULL;
	snprintf(msg, sizeof msg,
	         "not leader: shard %u of %s is led by node %s%s%s; send it "
	         "there",
	         (unsigned)r->shard, r->scope, id, why.addr ? " at " : "",
	         why.addr ? why.addr : "");
	reply_refused(r, &why, msg);
}

static void on_appended(void *data, int status, const uint8_t *res, size_t len)
{
	struct freq *r = data;
	struct felix_server *s = r->srv;
	struct store_result sr;
	struct store_value v;
	struct felix_refusal why;
	char msg[256];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status == SHARDS_ENOTLEADER) {
		reply_not_leader(r);
		return;
	}
	if (status != SHARDS_OK) {
		reply_fail(r, felix_shards_message(status));
		return;
	}
	if (store_result_open(res, len, &sr) != 0) {
		reply_fail(r, "malformed store answer");
		return;
	}
	memset(&why, 0, sizeof why);
	switch (sr.status) {
	case STORE_OK: {
		/* [base_offset, count, duplicate] */
		struct store_value base, count, dup;
		if (!store_result_next(&sr, &v) || v.tag != STORE_T_ARRAY ||
		    v.n != 3 || !store_result_next(&sr, &base) ||
		    !store_result_next(&sr, &count) ||
		    !store_result_next(&sr, &dup)) {
			reply_fail(r, "malformed store answer");
			return;
		}
		if (dup.tag == STORE_T_TRUE) {
			metric_add(s->m.idem_duplicates, 1);
		} else {
			metric_add(s->m.publish_records, r->records);
		}
		reply_ok(r);
		return;
	}
	case STORE_SEQ_GAP:
		if (!store_result_next(&sr, &v) || v.tag != STORE_T_U64) {
			reply_fail(r, "malformed store answer");
			return;
		}
		why.kind = FELIX_REFUSAL_SEQUENCE_GAP;
		why.expected = v.u;
		snprintf(msg, sizeof msg,
		         "sequence gap: expected sequence %" PRIu64
		         " on this shard",
		         v.u);
		reply_refused(r, &why, msg);
		return;
	case STORE_SEQ_EXPIRED:
		why.kind = FELIX_REFUSAL_SEQUENCE_EXPIRED;
		reply_refused(
		    r, &why,
		    "sequence expired: older than the last 64 "
		    "batches; whether it was appended cannot be told");
		return;
	case STORE_UNKNOWN_PRODUCER:
		why.kind = FELIX_REFUSAL_UNKNOWN_PRODUCER;
		reply_refused(r, &why,
		              "unknown producer: start again under a new id "
		              "(producer_init)");
		return;
	default:
		felix_result_message(&sr, msg, sizeof msg, "publish refused");
		reply_fail(r, msg);
		return;
	}
}

static void producer_init(struct fstream *st, const struct felix_msg *m)
{
	struct felix_msg a;
	uint64_t id = 0;
	/* 64 random bits; 0 is avoided so an id is never "none". */
	while (id == 0) {
		if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) {
			fstream_reply_error(st, "producer_init: no randomness "
			                        "available");
			return;
		}
	}
	felix_msg_init(&a, FELIX_MSG_PRODUCER_INIT_OK);
	a.u.producer_init_ok.request_id = m->u.producer_init.request_id;
	a.u.producer_init_ok.producer_id = id;
	fstream_reply_msg(st, &a);
}

bool produce_handle(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	struct felix_msg_publish_idempotent *p = &m->u.publish_idempotent;
	struct scope_info info;
	char err[512];
	if (m->type == FELIX_MSG_PRODUCER_INIT) {
		producer_init(st, m);
		return true;
	}
	struct freq *r = NULL;
	int res = RES_FAILED;
	if (fstream_tenant_ok(st, p->tenant_id, err, sizeof err)) {
		res = fstream_resolve(st, STORE_SCOPE_STREAM, p->tenant_id,
		                      p->namespace, p->stream, &info, err,
		                      sizeof err);
		if (res == RES_BLOCKED) {
			return false;
		}
	}
	r = freq_new(st, REQ_IDEMPOTENT);
	if (r == NULL) {
		return true;
	}
	r->request_id = p->request_id;
	r->records = (uint32_t)p->payloads.count;
	freq_enqueue(st, r);
	metric_add(s->m.publish_frames, 1);
	if (res != RES_FOUND) {
		reply_fail(r, err);
		return true;
	}
	if (freq_set_scope(r, &info) != 0) {
		reply_fail(r, "out of memory");
		return true;
	}
	r->shard =
	    felix_hash_shard(info.shards, p->has_key, p->key.data, p->key.len);
	r->group = shards_group_of_scope(s->shards, info.full, info.full_len,
	                                 r->shard);
	bool self = false;
	shards_leader(s->shards, r->group, &self);
	if (!self) {
		/* Not forwarded: one batch reaching the leader through two
		 * ingress brokers is what the sequence must not see. */
		reply_not_leader(r);
		return true;
	}
	size_t n = p->payloads.count;
	struct store_slice *items = calloc(n ? n : 1, sizeof *items);
	if (items == NULL) {
		reply_fail(r, "out of memory");
		return true;
	}
	for (size_t i = 0; i < n; i++) {
		items[i].p = p->payloads.items[i].data;
		items[i].len = p->payloads.items[i].len;
	}
	struct store_cmd c;
	size_t clen;
	const char *e;
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_STREAM_APPEND_IDEM;
	c.scope.p = (const uint8_t *)r->scope;
	c.scope.len = r->scope_len;
	c.shard = r->shard;
	c.producer = p->producer_id;
	c.seq = p->sequence;
	c.items.n = (uint32_t)n;
	c.items.v = items;
	int rv = store_cmd_size(&c, &clen, &e);
	if (rv != 0) {
		free(items);
		reply_fail(r, e);
		return true;
	}
	rv = shards_propose_cmd(s->shards, r->group, &c, clen, on_appended, r);
	free(items);
	if (rv == SHARDS_ENOTLEADER) {
		reply_not_leader(r);
	} else if (rv != SHARDS_OK) {
		reply_fail(r, felix_shards_message(rv));
	}
	return true;
}

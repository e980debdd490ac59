/* The Felix broker: connections, sessions (one per client-opened bidi
 * stream), frame decoding and the requests; see felix_server.h.
 *
 * A session's bytes are decoded frame by frame, in order. Each request
 * takes a slot in the stream's reply queue when it is read, so replies
 * leave in request order whatever order the Raft groups answer in. A
 * request that needs a scope the cache does not hold blocks the stream
 * until the meta group answered (so publishes are proposed in the order
 * they arrived) and is then decoded again. Receive flow control is manual:
 * bytes are consumed as they are read unless the stream is blocked or has
 * too much in flight, which holds the client back at its stream window. */
#include "node/felix/felix_server.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/felix/felix_internal.h"
#include "node/felix/scopes.h"
#include "node/shards.h"
#include "store/result.h"
#include "store/store.h"
#include "wire/felix_binary.h"
#include "wire/felix_frame.h"
#include "wire/felix_hash.h"
#include "wire/felix_msg.h"

/* Reply bytes queued on a stream before it stops reading requests. */
#define STREAM_OUT_MAX (4u << 20)
/* Members a topology_view lists at most (the node transport's limit). */
#define FELIX_TOPOLOGY_MAX 64

static void stream_process(struct fstream *st);
static void stream_flush(struct fstream *st);

/* ---- requests and replies ---------------------------------------------- */

struct freq *freq_new(struct fstream *st, enum req_kind kind)
{
	struct freq *r = calloc(1, sizeof *r);
	if (r == NULL) {
		return NULL;
	}
	r->st = st;
	r->srv = st->conn->srv;
	r->kind = kind;
	if (kind != REQ_LOOKUP) {
		r->t0_ns = uv_hrtime();
		r->srv->m.kind_requests[kind]++;
	}
	return r;
}

void freq_free(struct freq *r)
{
	free(r->out);
	free(r->scope);
	felix_msg_free(&r->msg);
	free(r);
}

/* Appends a request to the stream's reply queue. */
void freq_enqueue(struct fstream *st, struct freq *r)
{
	r->next = NULL;
	if (st->tail != NULL) {
		st->tail->next = r;
	} else {
		st->head = r;
	}
	st->tail = r;
	st->inflight++;
}

/* The request's answer is `w` (taken; may be NULL for none). */
void freq_complete(struct freq *r, struct wbuf *w)
{
	struct fstream *st = r->st;
	if (r->kind != REQ_LOOKUP && r->t0_ns != 0) {
		metric_hist_observe(&r->srv->m.kind_latency[r->kind],
		                    uv_hrtime() - r->t0_ns);
		r->t0_ns = 0; /* once, whatever completes it again */
	}
	if (w != NULL && w->len > 0 && !w->oom) {
		r->out = w->data;
		r->out_len = w->len;
		wbuf_init(w);
	} else if (w != NULL) {
		wbuf_free(w);
	}
	if (st == NULL) {
		freq_free(r);
		return;
	}
	r->done = true;
	st->out_bytes += r->out_len;
	stream_flush(st);
}

void freq_reply_msg(struct freq *r, const struct felix_msg *m)
{
	struct wbuf w;
	wbuf_init(&w);
	felix_msg_encode_frame(m, &w);
	freq_complete(r, &w);
}

int freq_set_scope(struct freq *r, const struct scope_info *info)
{
	char *scope = malloc(info->full_len + 1);
	if (scope == NULL) {
		return -1;
	}
	memcpy(scope, info->full, info->full_len + 1);
	free(r->scope);
	r->scope = scope;
	r->scope_len = info->full_len;
	return 0;
}

/* Queues an answer that needs nothing more. */
static void reply_now(struct fstream *st, struct wbuf *w)
{
	struct freq *r = freq_new(st, REQ_REPLY);
	if (r == NULL) {
		wbuf_free(w);
		return;
	}
	freq_enqueue(st, r);
	freq_complete(r, w);
}

void fstream_reply_frames(struct fstream *st, struct wbuf *w)
{
	reply_now(st, w);
}

void fstream_reply_msg(struct fstream *st, const struct felix_msg *m)
{
	struct wbuf w;
	wbuf_init(&w);
	if (felix_msg_encode_frame(m, &w) != 0) {
		wbuf_free(&w);
		return;
	}
	reply_now(st, &w);
}

static void encode_error(struct wbuf *w, const char *message)
{
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_ERROR);
	m.u.error.message = (char *)message;
	felix_msg_encode_frame(&m, w);
}

void fstream_reply_error(struct fstream *st, const char *message)
{
	struct wbuf w;
	wbuf_init(&w);
	encode_error(&w, message);
	reply_now(st, &w);
}

/* Ends the session after an error the byte stream cannot recover from:
 * the error, then FIN; further bytes are discarded. */
static void stream_kill(struct fstream *st, const char *message)
{
	struct felix_server *s = st->conn->srv;
	metric_add(s->m.protocol_errors, 1);
	log_debug(s->log, "felix", "stream %" PRId64 ": %s", st->id, message);
	fstream_reply_error(st, message);
	st->dead = true;
	st->peer_fin = true; /* nothing more will be read */
	st->rx.len = st->rx_off = 0;
	stream_flush(st);
}

static void conn_kill(struct fconn *fc, uint64_t code, const char *reason)
{
	struct felix_server *s = fc->srv;
	if (fc->closing) {
		return;
	}
	metric_add(s->m.protocol_errors, 1);
	log_debug(s->log, "felix", "closing a connection: %s", reason);
	fc->closing = true;
	quic_conn_close(fc->qc, code, reason);
}

/* FIN once the client finished its side and everything is answered: the
 * transport needs both sides ended to release the stream's credit. */
static void maybe_fin(struct fstream *st)
{
	if (st->peer_fin && !st->fin_sent && st->head == NULL &&
	    st->rx_off == st->rx.len && !st->blocked) {
		/* Once, whatever the outcome: a failure means the stream
		 * is already going away. */
		st->fin_sent = true;
		quic_conn_stream_shutdown(st->conn->qc, st->id);
	}
}

/* Writes the finished replies at the head of the queue, then FIN once the
 * client finished its side and everything is answered. */
static void stream_flush(struct fstream *st)
{
	struct quic_conn *qc = st->conn->qc;
	while (st->head != NULL && st->head->done) {
		struct freq *r = st->head;
		if (r->out_len > 0 && !st->fin_sent) {
			int rv = quic_conn_stream_write(qc, st->id, r->out,
			                                r->out_len, false);
			if (rv == QUIC_EAGAIN) {
				return; /* on_stream_writable resumes */
			}
			/* Other errors: the stream is going away; the
			 * answers have nowhere to go. */
		}
		st->head = r->next;
		if (st->head == NULL) {
			st->tail = NULL;
		}
		st->inflight--;
		st->out_bytes -= r->out_len;
		freq_free(r);
	}
	maybe_fin(st);
	/* Answers left: reading may have been held back by them. */
	if (!st->in_process && !st->dead &&
	    (st->rx_off < st->rx.len || st->unconsumed > 0)) {
		stream_process(st);
	}
}

/* ---- results ------------------------------------------------------------ */

/* The message of an error result ("ERR " stripped) or a fallback. */
void felix_result_message(const struct store_result *r0, char *msg, size_t len,
                          const char *fallback)
{
	struct store_result r = *r0;
	struct store_value v;
	if (store_result_next(&r, &v) && v.tag == STORE_T_BYTES) {
		size_t skip = v.len > 4 && memcmp(v.p, "ERR ", 4) == 0 ? 4 : 0;
		snprintf(msg, len, "%.*s", (int)(v.len - skip),
		         (const char *)v.p + skip);
	} else {
		snprintf(msg, len, "%s", fallback);
	}
}

/* Text for a shard failure, as a client should read it. */
const char *felix_shards_message(int status)
{
	switch (status) {
	case SHARDS_ENOTLEADER:
		return "not leader: this node does not lead the shard";
	case SHARDS_EUNAVAILABLE:
		return "shard unavailable: no leader (the write may or may "
		       "not have happened)";
	default:
		return shards_strerror(status);
	}
}

/* ---- publish ------------------------------------------------------------ */

static void publish_reply(struct freq *r, bool ok, const char *message)
{
	struct felix_server *s = r->srv;
	struct wbuf w;
	wbuf_init(&w);
	if (!ok) {
		metric_add(s->m.publish_errors, 1);
	}
	if (r->binary) {
		struct felix_publish_ack a;
		struct shards_route rt;
		char id[32];
		memset(&a, 0, sizeof a);
		a.status = ok ? FELIX_ACK_STATUS_OK : FELIX_ACK_STATUS_ERROR;
		a.request_id = r->request_id;
		if (!ok) {
			a.message.data = (const uint8_t *)message;
			a.message.len = strlen(message);
		}
		/* A publish another node leads was forwarded there: name the
		 * owner to a client that takes the suffix, so it can publish
		 * there directly. */
		if (r->forwarded && r->st != NULL &&
		    (r->st->send_flags & FELIX_FLAG_PUBLISH_ACK_OWNER) &&
		    shards_route(s->shards, r->group, &rt) == SHARDS_OK &&
		    rt.leader_id != 0 && !rt.is_self) {
			snprintf(id, sizeof id, "%" PRIu64, rt.leader_id);
			a.has_owner = true;
			a.owner_node_id.data = (const uint8_t *)id;
			a.owner_node_id.len = strlen(id);
			a.has_owner_addr = rt.felix[0] != '\0';
			a.owner_addr.data = (const uint8_t *)rt.felix;
			a.owner_addr.len = strlen(rt.felix);
			a.owner_generation = rt.group_generation;
			metric_add(s->m.owner_acks, 1);
		}
		felix_publish_ack_encode(&w, &a);
	} else if (r->ack != FELIX_ACK_NONE) {
		struct felix_msg m;
		if (r->has_request_id) {
			felix_msg_init(&m, ok ? FELIX_MSG_PUBLISH_OK
			                      : FELIX_MSG_PUBLISH_ERROR);
			if (ok) {
				m.u.publish_ok.request_id = r->request_id;
			} else {
				m.u.publish_error.request_id = r->request_id;
				m.u.publish_error.message = (char *)message;
			}
		} else if (ok) {
			felix_msg_init(&m, FELIX_MSG_OK);
		} else {
			felix_msg_init(&m, FELIX_MSG_ERROR);
			m.u.error.message = (char *)message;
		}
		felix_msg_encode_frame(&m, &w);
	}
	freq_complete(r, &w);
}

static void on_appended(void *data, int status, const uint8_t *res, size_t len)
{
	struct freq *r = data;
	struct store_result sr;
	char msg[256];
	if (status != SHARDS_OK) {
		publish_reply(r, false, felix_shards_message(status));
		return;
	}
	if (store_result_open(res, len, &sr) != 0) {
		publish_reply(r, false, "malformed store answer");
		return;
	}
	if (sr.status != STORE_OK) {
		felix_result_message(&sr, msg, sizeof msg, "publish refused");
		publish_reply(r, false, msg);
		return;
	}
	metric_add(r->srv->m.publish_records, r->records);
	publish_reply(r, true, NULL);
}

static void on_lookup(void *data, int status)
{
	struct freq *r = data;
	struct fstream *st = r->st;
	freq_free(r);
	if (st == NULL) {
		return;
	}
	st->lookup = NULL;
	st->blocked = false;
	if (status != SCOPES_OK) {
		st->lookup_failed = status;
	}
	stream_process(st);
}

int fstream_resolve(struct fstream *st, uint8_t kind, const char *t,
                    const char *ns, const char *name, struct scope_info *info,
                    char *msg, size_t msglen)
{
	struct felix_server *s = st->conn->srv;
	if (st->lookup_failed != 0) {
		int f = st->lookup_failed;
		st->lookup_failed = 0;
		if (f == SCOPES_ENOTFOUND) {
			snprintf(msg, msglen, "%s not found",
			         kind == STORE_SCOPE_STREAM ? "stream"
			                                    : "cache");
			return RES_ABSENT;
		}
		snprintf(msg, msglen,
		         f == SCOPES_EINVAL
		             ? "invalid scope name"
		             : "scope registry unavailable (no meta leader)");
		return RES_FAILED;
	}
	if (scopes_check_names(t, ns, name, msg, msglen) != 0) {
		return RES_FAILED;
	}
	int found = scopes_find(s->scopes, kind, t, ns, name, info);
	if (found == SCOPES_FOUND) {
		return RES_FOUND;
	}
	if (found == SCOPES_ABSENT && !scopes_auto_create(s->scopes)) {
		snprintf(msg, msglen, "%s not found",
		         kind == STORE_SCOPE_STREAM ? "stream" : "cache");
		return RES_ABSENT;
	}
	struct freq *r = freq_new(st, REQ_LOOKUP);
	if (r == NULL) {
		snprintf(msg, msglen, "out of memory");
		return RES_FAILED;
	}
	int rv =
	    scopes_lookup(s->scopes, kind, t, ns, name, true, on_lookup, r);
	if (rv != SCOPES_OK) {
		freq_free(r);
		snprintf(msg, msglen, "%s",
		         rv == SCOPES_EINVAL
		             ? "invalid scope name"
		             : "scope registry unavailable (no meta leader)");
		return RES_FAILED;
	}
	st->lookup = r;
	st->blocked = true;
	return RES_BLOCKED;
}

static bool tenant_ok(struct fstream *st, const char *t, size_t len)
{
	return strlen(st->tenant) == len && memcmp(st->tenant, t, len) == 0;
}

bool fstream_tenant_ok(struct fstream *st, const char *t, char *msg,
                       size_t msglen)
{
	if (tenant_ok(st, t, strlen(t))) {
		return true;
	}
	snprintf(msg, msglen,
	         "unauthorized: tenant '%.100s' is not the authenticated "
	         "tenant",
	         t);
	return false;
}

int felix_leader_check(struct felix_server *s, uint32_t group, const char *what,
                       char *msg, size_t msglen)
{
	struct shards_route rt;
	if (shards_route(s->shards, group, &rt) != SHARDS_OK) {
		snprintf(msg, msglen, "not leader: %s has no group", what);
		return -1;
	}
	if (rt.is_self) {
		return 0;
	}
	if (rt.leader_id == 0) {
		snprintf(msg, msglen,
		         "not leader: %s has no leader yet (retry shortly)",
		         what);
	} else if (rt.felix[0] != '\0') {
		snprintf(msg, msglen,
		         "not leader: %s is led by node %" PRIu64 " at %s",
		         what, rt.leader_id, rt.felix);
	} else {
		snprintf(msg, msglen, "not leader: %s is led by node %" PRIu64,
		         what, rt.leader_id);
	}
	return -1;
}

int felix_leader_answer(struct fstream *st, uint32_t group, const char *what,
                        struct wbuf *w)
{
	struct felix_server *s = st->conn->srv;
	struct shards_route rt;
	char msg[SCOPES_FULL_MAX + 512];
	bool known = shards_route(s->shards, group, &rt) == SHARDS_OK;
	if (known && rt.is_self) {
		return 0;
	}
	if (known && rt.leader_id != 0 &&
	    (st->client_features & FELIX_FEATURE_REDIRECT) != 0) {
		struct felix_msg m;
		char id[32];
		snprintf(id, sizeof id, "%" PRIu64, rt.leader_id);
		felix_msg_init(&m, FELIX_MSG_NOT_LEADER);
		m.u.not_leader.node_id = id;
		m.u.not_leader.addr = rt.felix[0] != '\0' ? rt.felix : NULL;
		m.u.not_leader.generation = rt.group_generation;
		felix_msg_encode_frame(&m, w);
		metric_add(s->m.redirects, 1);
		return -1;
	}
	if (felix_leader_check(s, group, what, msg, sizeof msg) == 0) {
		/* The replica refused though the route names this node: it
		 * is between terms. */
		snprintf(msg, sizeof msg, "%s",
		         felix_shards_message(SHARDS_ENOTLEADER));
	}
	encode_error(w, msg);
	return -1;
}

bool felix_is_cluster(struct felix_server *s)
{
	struct shards_node n[2];
	return shards_nodes(s->shards, n, 2) > 1;
}

/* Proposes an append of `items` for a publish request `r` (enqueued when
 * it owes a reply). */
static void propose_append(struct fstream *st, struct freq *r,
                           const struct scope_info *info, bool keyed,
                           const uint8_t *key, size_t klen,
                           const struct store_list *items)
{
	struct felix_server *s = st->conn->srv;
	uint32_t shard = felix_hash_shard(info->shards, keyed, key, klen);
	uint32_t group =
	    shards_group_of_scope(s->shards, info->full, info->full_len, shard);
	struct store_cmd c;
	size_t clen;
	const char *e;
	bool self;
	metric_add(s->m.publish_frames, 1);
	r->records = items->n;
	r->group = group;
	/* Led elsewhere (or by nobody known yet): forwarded. */
	r->forwarded = shards_leader(s->shards, group, &self) != 0 && !self;
	if (items->n == 0) {
		publish_reply(r, true, NULL);
		return;
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_STREAM_APPEND;
	c.scope.p = (const uint8_t *)info->full;
	c.scope.len = info->full_len;
	c.shard = shard;
	c.items = *items;
	if (store_cmd_size(&c, &clen, &e) != 0) {
		publish_reply(r, false, e);
		return;
	}
	/* On the leader the records are encoded straight into the Raft
	 * entry: their one copy between the stream's buffer and the log. */
	int rv = shards_propose_cmd(s->shards, group, &c, clen, on_appended, r);
	if (rv != SHARDS_OK) {
		publish_reply(r, false, felix_shards_message(rv));
	}
}

/* Returns false when the stream is blocked on a lookup (frame kept). */
static bool handle_binary_publish(struct fstream *st,
                                  const struct felix_frame *fr)
{
	struct felix_server *s = st->conn->srv;
	struct felix_publish_batch b;
	char err[256], t[256], ns[256], name[SCOPES_NAME_MAX + 1];
	struct felix_binary_limits lim = {FELIX_BINARY_DEFAULT_MAX_RECORDS,
	                                  s->cfg.max_frame};
	uint64_t rid;
	bool acked =
	    felix_publish_batch_peek_request_id(fr->header.flags, fr->payload,
	                                        fr->header.length, &rid) == 0;
	if (felix_publish_batch_decode(fr->header.flags, fr->payload,
	                               fr->header.length, &lim, &b, err,
	                               sizeof err) != 0) {
		metric_add(s->m.protocol_errors, 1);
		if (acked) {
			struct freq *r = freq_new(st, REQ_PUBLISH);
			if (r != NULL) {
				r->binary = true;
				r->request_id = rid;
				freq_enqueue(st, r);
				publish_reply(r, false, err);
			}
		} else {
			fstream_reply_error(st, err);
		}
		return true;
	}
	if (b.tenant_id.len >= sizeof t || b.namespace.len >= sizeof ns ||
	    b.stream.len >= sizeof name) {
		snprintf(err, sizeof err, "stream name too long");
		goto refuse;
	}
	memcpy(t, b.tenant_id.data, b.tenant_id.len);
	t[b.tenant_id.len] = '\0';
	memcpy(ns, b.namespace.data, b.namespace.len);
	ns[b.namespace.len] = '\0';
	memcpy(name, b.stream.data, b.stream.len);
	name[b.stream.len] = '\0';
	if (!tenant_ok(st, t, b.tenant_id.len)) {
		snprintf(err, sizeof err,
		         "unauthorized: tenant '%.100s' is not the "
		         "authenticated tenant",
		         t);
		goto refuse;
	}
	if (felix_auth_publish(st->grants, ns, name, err, sizeof err) != 0) {
		goto refuse;
	}
	struct scope_info info;
	int res = fstream_resolve(st, STORE_SCOPE_STREAM, t, ns, name, &info,
	                          err, sizeof err);
	if (res == RES_BLOCKED) {
		return false;
	}
	if (res != RES_FOUND) {
		goto refuse;
	}
	/* The batch's records are u32 length + bytes each, the store
	 * command's list encoding: the command takes them in one copy. */
	struct store_list items;
	memset(&items, 0, sizeof items);
	items.n = b.records.count;
	items.enc = b.records.data;
	items.enc_len = b.records.len;
	struct freq *r = freq_new(st, REQ_PUBLISH);
	if (r == NULL) {
		return true;
	}
	r->binary = b.acked;
	r->request_id = b.request_id;
	r->ack = b.acked ? b.ack_mode : FELIX_ACK_NONE;
	if (b.acked) {
		freq_enqueue(st, r);
	} else {
		r->st = NULL; /* nobody waits: the callback frees it */
	}
	propose_append(st, r, &info, b.keyed, b.key.data, b.key.len, &items);
	return true;
refuse:
	if (b.acked) {
		struct freq *e = freq_new(st, REQ_PUBLISH);
		if (e != NULL) {
			e->binary = true;
			e->request_id = b.request_id;
			freq_enqueue(st, e);
			publish_reply(e, false, err);
		}
	} else {
		s->m.kind_requests[REQ_PUBLISH]++; /* no request made */
		metric_add(s->m.publish_errors, 1);
	}
	return true;
}

/* JSON publish / publish_batch (compatibility path). */
static bool handle_json_publish(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	bool batch = m->type == FELIX_MSG_PUBLISH_BATCH;
	const char *t =
	    batch ? m->u.publish_batch.tenant_id : m->u.publish.tenant_id;
	const char *ns =
	    batch ? m->u.publish_batch.namespace : m->u.publish.namespace;
	const char *name =
	    batch ? m->u.publish_batch.stream : m->u.publish.stream;
	bool has_ack =
	    batch ? m->u.publish_batch.has_ack : m->u.publish.has_ack;
	bool has_rid = batch ? m->u.publish_batch.has_request_id
	                     : m->u.publish.has_request_id;
	uint64_t rid =
	    batch ? m->u.publish_batch.request_id : m->u.publish.request_id;
	enum felix_ack_mode ack =
	    has_ack ? (batch ? m->u.publish_batch.ack : m->u.publish.ack)
	            : (has_rid ? FELIX_ACK_PER_MESSAGE : FELIX_ACK_NONE);
	char err[256];
	struct scope_info info;
	int res = RES_FAILED;
	if (!tenant_ok(st, t, strlen(t))) {
		snprintf(err, sizeof err,
		         "unauthorized: tenant '%.100s' is not the "
		         "authenticated tenant",
		         t);
	} else {
		res = fstream_resolve(st, STORE_SCOPE_STREAM, t, ns, name,
		                      &info, err, sizeof err);
		if (res == RES_BLOCKED) {
			return false;
		}
	}
	metric_add(batch ? s->m.json_publish_batch : s->m.json_publish, 1);
	struct freq *r = freq_new(st, REQ_PUBLISH);
	if (r == NULL) {
		return true;
	}
	r->ack = ack;
	r->has_request_id = has_rid;
	r->request_id = rid;
	if (ack != FELIX_ACK_NONE) {
		freq_enqueue(st, r);
	} else {
		r->st = NULL;
	}
	if (res != RES_FOUND) {
		publish_reply(r, false, err);
		return true;
	}
	bool keyed = batch ? m->u.publish_batch.has_key : m->u.publish.has_key;
	const struct felix_bytes *key =
	    batch ? &m->u.publish_batch.key : &m->u.publish.key;
	if (!batch) {
		struct store_slice one = {m->u.publish.payload.data,
		                          m->u.publish.payload.len};
		struct store_list l1 = {1, &one, NULL, 0};
		propose_append(st, r, &info, keyed, key->data, key->len, &l1);
		return true;
	}
	size_t n = m->u.publish_batch.payloads.count;
	struct store_slice *items = calloc(n ? n : 1, sizeof *items);
	if (items == NULL) {
		publish_reply(r, false, "out of memory");
		return true;
	}
	for (size_t i = 0; i < n; i++) {
		items[i].p = m->u.publish_batch.payloads.items[i].data;
		items[i].len = m->u.publish_batch.payloads.items[i].len;
	}
	struct store_list l = {(uint32_t)n, items, NULL, 0};
	propose_append(st, r, &info, keyed, key->data, key->len, &l);
	free(items);
	return true;
}

/* ---- caches and counters ------------------------------------------------ */

/* The cache_value answer of a get or delete. */
static void reply_cache_value(struct freq *r, const uint8_t *value, size_t len,
                              bool found)
{
	struct felix_msg m;
	struct wbuf w;
	const char *t, *ns, *cache, *key;
	bool has_rid;
	uint64_t rid;
	if (r->msg.type == FELIX_MSG_CACHE_GET) {
		t = r->msg.u.cache_get.tenant_id;
		ns = r->msg.u.cache_get.namespace;
		cache = r->msg.u.cache_get.cache;
		key = r->msg.u.cache_get.key;
		has_rid = r->msg.u.cache_get.has_request_id;
		rid = r->msg.u.cache_get.request_id;
	} else {
		t = r->msg.u.cache_delete.tenant_id;
		ns = r->msg.u.cache_delete.namespace;
		cache = r->msg.u.cache_delete.cache;
		key = r->msg.u.cache_delete.key;
		has_rid = r->msg.u.cache_delete.has_request_id;
		rid = r->msg.u.cache_delete.request_id;
	}
	felix_msg_init(&m, FELIX_MSG_CACHE_VALUE);
	/* The official client needs every scope field. */
	m.u.cache_value.tenant_id = (char *)(t ? t : r->st->tenant);
	m.u.cache_value.namespace = (char *)(ns ? ns : "default");
	m.u.cache_value.cache = (char *)(cache ? cache : "default");
	m.u.cache_value.key = (char *)key;
	m.u.cache_value.has_value = found;
	m.u.cache_value.value.data = (uint8_t *)value;
	m.u.cache_value.value.len = len;
	m.u.cache_value.has_request_id = has_rid;
	m.u.cache_value.request_id = rid;
	wbuf_init(&w);
	felix_msg_encode_frame(&m, &w);
	freq_complete(r, &w);
}

void freq_error(struct freq *r, const char *message)
{
	struct wbuf w;
	wbuf_init(&w);
	encode_error(&w, message);
	freq_complete(r, &w);
}

static void reply_counter(struct freq *r, bool found, int64_t value)
{
	struct felix_msg m;
	struct wbuf w;
	felix_msg_init(&m, FELIX_MSG_COUNTER_VALUE);
	m.u.counter_value.has_value = found;
	m.u.counter_value.value = value;
	m.u.counter_value.request_id = r->msg.type == FELIX_MSG_COUNTER_ADD
	                                   ? r->msg.u.counter_add.request_id
	                                   : r->msg.u.counter_get.request_id;
	wbuf_init(&w);
	felix_msg_encode_frame(&m, &w);
	freq_complete(r, &w);
}

static void on_cache_written(void *data, int status, const uint8_t *res,
                             size_t len)
{
	struct freq *r = data;
	struct store_result sr;
	struct store_value v;
	char msg[256];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status != SHARDS_OK) {
		freq_error(r, felix_shards_message(status));
		return;
	}
	if (store_result_open(res, len, &sr) != 0) {
		freq_error(r, "malformed store answer");
		return;
	}
	if (sr.status != STORE_OK) {
		felix_result_message(&sr, msg, sizeof msg, "refused");
		freq_error(r, msg);
		return;
	}
	switch (r->kind) {
	case REQ_CACHE_PUT: {
		struct felix_msg m;
		struct wbuf w;
		if (r->msg.u.cache_put.has_request_id) {
			felix_msg_init(&m, FELIX_MSG_CACHE_OK);
			m.u.cache_ok.request_id = r->msg.u.cache_put.request_id;
		} else {
			felix_msg_init(&m, FELIX_MSG_OK);
		}
		wbuf_init(&w);
		felix_msg_encode_frame(&m, &w);
		freq_complete(r, &w);
		return;
	}
	case REQ_CACHE_DELETE:
		/* [removed value | nil, offset | nil] */
		if (store_result_next(&sr, &v) && v.tag == STORE_T_ARRAY &&
		    store_result_next(&sr, &v)) {
			if (v.tag == STORE_T_BYTES) {
				reply_cache_value(r, v.p, v.len, true);
			} else {
				reply_cache_value(r, NULL, 0, false);
			}
			return;
		}
		freq_error(r, "malformed store answer");
		return;
	default: /* REQ_COUNTER_ADD: i64 sum */
		if (store_result_next(&sr, &v) && v.tag == STORE_T_I64) {
			reply_counter(r, true, v.i);
			return;
		}
		freq_error(r, "malformed store answer");
		return;
	}
}

/* The answer of a CACHE_GET ([value, expires_at, offset] or nil) or a
 * COUNTER_GET (i64 or nil) read, served by the leader wherever it is. */
static void on_cache_read(void *data, int status, const uint8_t *res,
                          size_t len)
{
	struct freq *r = data;
	struct store_result sr;
	struct store_value v;
	char msg[256];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status != SHARDS_OK) {
		freq_error(r, felix_shards_message(status));
		return;
	}
	if (store_result_open(res, len, &sr) != 0 ||
	    !store_result_next(&sr, &v)) {
		freq_error(r, "malformed store answer");
		return;
	}
	if (sr.status != STORE_OK) {
		felix_result_message(&sr, msg, sizeof msg, "refused");
		freq_error(r, msg);
		return;
	}
	if (r->kind == REQ_CACHE_GET) {
		struct store_value val;
		if (v.tag == STORE_T_NIL) {
			reply_cache_value(r, NULL, 0, false);
		} else if (v.tag == STORE_T_ARRAY && v.n == 3 &&
		           store_result_next(&sr, &val) &&
		           val.tag == STORE_T_BYTES) {
			reply_cache_value(r, val.p, val.len, true);
		} else {
			freq_error(r, "malformed store answer");
		}
		return;
	}
	if (v.tag == STORE_T_NIL) {
		reply_counter(r, false, 0);
	} else if (v.tag == STORE_T_I64) {
		reply_counter(r, true, v.i);
	} else {
		freq_error(r, "malformed store answer");
	}
}

/* cache_put, cache_get, cache_delete, counter_add, counter_get. The
 * message is taken into the request on success. */
static bool handle_cache(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	const char *t, *ns, *cache, *key;
	enum req_kind kind;
	switch (m->type) {
	case FELIX_MSG_CACHE_PUT:
		t = m->u.cache_put.tenant_id;
		ns = m->u.cache_put.namespace;
		cache = m->u.cache_put.cache;
		key = m->u.cache_put.key;
		kind = REQ_CACHE_PUT;
		break;
	case FELIX_MSG_CACHE_GET:
		t = m->u.cache_get.tenant_id;
		ns = m->u.cache_get.namespace;
		cache = m->u.cache_get.cache;
		key = m->u.cache_get.key;
		kind = REQ_CACHE_GET;
		break;
	case FELIX_MSG_CACHE_DELETE:
		t = m->u.cache_delete.tenant_id;
		ns = m->u.cache_delete.namespace;
		cache = m->u.cache_delete.cache;
		key = m->u.cache_delete.key;
		kind = REQ_CACHE_DELETE;
		break;
	case FELIX_MSG_COUNTER_ADD:
		t = m->u.counter_add.tenant_id;
		ns = m->u.counter_add.namespace;
		cache = m->u.counter_add.cache;
		key = m->u.counter_add.key;
		kind = REQ_COUNTER_ADD;
		break;
	default:
		t = m->u.counter_get.tenant_id;
		ns = m->u.counter_get.namespace;
		cache = m->u.counter_get.cache;
		key = m->u.counter_get.key;
		kind = REQ_COUNTER_GET;
		break;
	}
	/* The seed's short forms name no scope: the tenant's default
	 * cache. */
	if (t == NULL) {
		t = st->tenant;
	}
	if (ns == NULL) {
		ns = "default";
	}
	if (cache == NULL) {
		cache = "default";
	}
	char err[256];
	if (!tenant_ok(st, t, strlen(t))) {
		snprintf(err, sizeof err,
		         "unauthorized: tenant '%.100s' is not the "
		         "authenticated tenant",
		         t);
		fstream_reply_error(st, err);
		return true;
	}
	struct scope_info info;
	int res = fstream_resolve(st, STORE_SCOPE_CACHE, t, ns, cache, &info,
	                          err, sizeof err);
	if (res == RES_BLOCKED) {
		return false;
	}
	if (res != RES_FOUND) {
		fstream_reply_error(st, err);
		return true;
	}
	struct freq *r = freq_new(st, kind);
	if (r == NULL || freq_set_scope(r, &info) != 0) {
		free(r);
		fstream_reply_error(st, "out of memory");
		return true;
	}
	r->msg = *m;
	felix_msg_init(m, FELIX_MSG_NONE); /* taken */
	r->shard = felix_hash_shard(info.shards, true, (const uint8_t *)key,
	                            strlen(key));
	r->group = shards_group_of_scope(s->shards, info.full, info.full_len,
	                                 r->shard);
	freq_enqueue(st, r);
	metric_add(s->m.requests, 1);
	struct store_cmd c;
	uint8_t *cmd = NULL;
	size_t clen;
	const char *e;
	memset(&c, 0, sizeof c);
	c.scope.p = (const uint8_t *)r->scope;
	c.scope.len = r->scope_len;
	c.shard = r->shard;
	c.key.p = (const uint8_t *)key;
	c.key.len = strlen(key);
	if (kind == REQ_CACHE_GET) {
		c.op = STORE_OP_CACHE_GET;
	} else if (kind == REQ_COUNTER_GET) {
		c.op = STORE_OP_COUNTER_GET;
	} else if (kind == REQ_CACHE_PUT) {
		c.op = STORE_OP_CACHE_PUT;
		c.value.p = r->msg.u.cache_put.value.data;
		c.value.len = r->msg.u.cache_put.value.len;
		c.ttl_ms = r->msg.u.cache_put.has_ttl_ms
		               ? r->msg.u.cache_put.ttl_ms
		               : 0;
	} else if (kind == REQ_CACHE_DELETE) {
		c.op = STORE_OP_CACHE_DELETE;
	} else {
		c.op = STORE_OP_COUNTER_ADD;
		c.delta = r->msg.u.counter_add.delta;
	}
	/* Reads and writes run on the shard's leader, wherever it is
	 * (forwarded from any other node); on the leader a write is
	 * encoded straight into the Raft entry. */
	int rv;
	if (kind == REQ_CACHE_GET || kind == REQ_COUNTER_GET) {
		if (store_cmd_encode(&c, &cmd, &clen, &e) != 0) {
			freq_error(r, e);
			return true;
		}
		rv = shards_read_cmd(s->shards, r->group, cmd, clen,
		                     on_cache_read, r);
		free(cmd);
	} else {
		if (store_cmd_size(&c, &clen, &e) != 0) {
			freq_error(r, e);
			return true;
		}
		rv = shards_propose_cmd(s->shards, r->group, &c, clen,
		                        on_cache_written, r);
	}
	if (rv != SHARDS_OK) {
		freq_error(r, felix_shards_message(rv));
	}
	return true;
}

/* ---- subscribe and stream_shards ---------------------------------------- */

static void on_subscribe_read(void *data, int status)
{
	struct freq *r = data;
	struct felix_server *s = r->srv;
	struct store_stream_info info;
	struct felix_msg m;
	struct wbuf w;
	char err[SCOPES_FULL_MAX + 256];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status == SHARDS_ENOTLEADER) {
		/* Name the leader, so the client knows where to go. */
		char what[SCOPES_FULL_MAX + 64];
		snprintf(what, sizeof what, "shard %u of stream %s",
		         (unsigned)r->shard, r->scope);
		wbuf_init(&w);
		if (felix_leader_answer(r->st, r->group, what, &w) == 0) {
			wbuf_free(&w);
			freq_error(r, felix_shards_message(status));
			return;
		}
		freq_complete(r, &w);
		return;
	}
	if (status != SHARDS_OK) {
		freq_error(r, felix_shards_message(status));
		return;
	}
	struct store_slice scope = {(const uint8_t *)r->scope, r->scope_len};
	if (store_stream_info(shards_store(s->shards), r->group, scope,
	                      r->shard, &info) != 0) {
		freq_error(r, "storage failure on this node");
		return;
	}
	const struct felix_msg_subscribe *sm = &r->msg.u.subscribe;
	uint64_t next = info.tail;
	if (sm->has_start && sm->start.kind == FELIX_START_EARLIEST) {
		next = info.head;
	} else if (sm->has_start && sm->start.kind == FELIX_START_OFFSET) {
		uint64_t want = sm->start.offset;
		if (want < info.head || want > info.tail) {
			felix_msg_init(&m, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
			m.u.cursor_error.reason = want < info.head
			                              ? FELIX_CURSOR_TOO_OLD
			                              : FELIX_CURSOR_IN_FUTURE;
			m.u.cursor_error.requested = want;
			m.u.cursor_error.available =
			    want < info.head ? info.head : info.tail;
			wbuf_init(&w);
			felix_msg_encode_frame(&m, &w);
			freq_complete(r, &w);
			return;
		}
		next = want;
	}
	uint64_t id;
	if (pubsub_subscribe(s, r->st->conn, r->group, r->scope, r->scope_len,
	                     r->shard, next, info.tail, r->offsets, &id, err,
	                     sizeof err) != 0) {
		freq_error(r, err);
		return;
	}
	felix_msg_init(&m, FELIX_MSG_SUBSCRIBED);
	m.u.subscribed.subscription_id = id;
	wbuf_init(&w);
	felix_msg_encode_frame(&m, &w);
	freq_complete(r, &w);
}

static bool handle_subscribe(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	struct felix_msg_subscribe *sm = &m->u.subscribe;
	char err[256];
	if (!tenant_ok(st, sm->tenant_id, strlen(sm->tenant_id))) {
		snprintf(err, sizeof err,
		         "unauthorized: tenant '%.100s' is not the "
		         "authenticated tenant",
		         sm->tenant_id);
		fstream_reply_error(st, err);
		return true;
	}
	struct scope_info info;
	int res =
	    fstream_resolve(st, STORE_SCOPE_STREAM, sm->tenant_id,
	                    sm->namespace, sm->stream, &info, err, sizeof err);
	if (res == RES_BLOCKED) {
		return false;
	}
	if (res != RES_FOUND) {
		fstream_reply_error(st, err);
		return true;
	}
	uint32_t shard = sm->has_shard ? sm->shard : 0;
	if (shard >= info.shards) {
		snprintf(err, sizeof err,
		         "shard %u out of range: the stream has %u shards",
		         (unsigned)shard, (unsigned)info.shards);
		fstream_reply_error(st, err);
		return true;
	}
	struct freq *r = freq_new(st, REQ_SUBSCRIBE);
	char *scope = malloc(info.full_len + 1);
	if (r == NULL || scope == NULL) {
		free(r);
		free(scope);
		fstream_reply_error(st, "out of memory");
		return true;
	}
	memcpy(scope, info.full, info.full_len + 1);
	r->scope = scope;
	r->scope_len = info.full_len;
	r->shard = shard;
	r->group =
	    shards_group_of_scope(s->shards, info.full, info.full_len, shard);
	r->offsets = (st->send_flags & FELIX_FLAG_EVENT_BATCH_OFFSETS) != 0;
	r->msg = *m;
	felix_msg_init(m, FELIX_MSG_NONE);
	freq_enqueue(st, r);
	metric_add(s->m.requests, 1);
	int rv = shards_read(s->shards, r->group, on_subscribe_read, r);
	if (rv != SHARDS_OK) {
		on_subscribe_read(r, rv);
	}
	return true;
}

static bool handle_stream_shards(struct fstream *st, struct felix_msg *m)
{
	struct felix_msg_stream_shards *q = &m->u.stream_shards;
	struct felix_msg a;
	char err[256];
	uint32_t shards = 0;
	if (tenant_ok(st, q->tenant_id, strlen(q->tenant_id))) {
		struct scope_info info;
		int res = fstream_resolve(st, STORE_SCOPE_STREAM, q->tenant_id,
		                          q->namespace, q->stream, &info, err,
		                          sizeof err);
		if (res == RES_BLOCKED) {
			return false;
		}
		if (res == RES_FOUND) {
			shards = info.shards;
		} else if (res == RES_FAILED) {
			fstream_reply_error(st, err);
			return true;
		}
	}
	/* Scoped to the client's tenant: another tenant's stream is
	 * unknown (0) here. */
	felix_msg_init(&a, FELIX_MSG_STREAM_SHARDS_VIEW);
	a.u.stream_shards_view.shards = shards;
	a.u.stream_shards_view.request_id = q->request_id;
	fstream_reply_msg(st, &a);
	return true;
}

/* topology → topology_view: this node and every member it reaches over
 * the node transport (the cluster's view of who can serve), each with the
 * Felix address it published; members that published none are left out.
 * A standalone node does not advertise the request: a client must not send
 * it, and gets an error rather than a guess. */
static void handle_topology(struct fstream *st)
{
	struct felix_server *s = st->conn->srv;
	struct shards_node nodes[FELIX_TOPOLOGY_MAX];
	struct felix_broker_endpoint eps[FELIX_TOPOLOGY_MAX];
	char ids[FELIX_TOPOLOGY_MAX][24];
	struct felix_msg m;
	size_t n, k = 0;
	if (!felix_is_cluster(s)) {
		fstream_reply_error(st, "topology is not served by this broker "
		                        "(a standalone node)");
		return;
	}
	n = shards_nodes(s->shards, nodes, FELIX_TOPOLOGY_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!nodes[i].connected || nodes[i].felix[0] == '\0') {
			continue;
		}
		snprintf(ids[k], sizeof ids[k], "%" PRIu64, nodes[i].id);
		eps[k].node_id = ids[k];
		eps[k].addr = nodes[i].felix;
		k++;
	}
	felix_msg_init(&m, FELIX_MSG_TOPOLOGY_VIEW);
	m.u.topology_view.brokers.items = k > 0 ? eps : NULL;
	m.u.topology_view.brokers.count = k;
	metric_add(s->m.requests, 1);
	fstream_reply_msg(st, &m);
}

/* ---- sessions ----------------------------------------------------------- */

/* A refused auth ends its stream; the connection's `auth_max_failures`th
 * ends the connection too, so guessing tokens costs a QUIC handshake every
 * few tries rather than one stream each. */
static void auth_refused(struct fstream *st, const char *msg)
{
	struct fconn *fc = st->conn;
	struct felix_server *s = fc->srv;
	unsigned max = s->cfg.auth_max_failures;
	metric_add(s->m.auth_failures, 1);
	stream_kill(st, msg);
	if (max > 0 && ++fc->auth_failures >= max) {
		log_info(s->log, "felix",
		         "closing a connection after %u refused auths",
		         fc->auth_failures);
		conn_kill(fc, FELIX_APP_AUTH_FAILURES,
		          "unauthorized: too many failed auth attempts on this "
		          "connection");
	}
}

static void handle_auth(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	struct felix_msg_auth *a = &m->u.auth;
	char msg[300];
	if (strlen(a->tenant_id) >= sizeof st->tenant ||
	    a->tenant_id[0] == '\0') {
		auth_refused(st, "unauthorized: tenant_id must be 1 to 255 "
		                 "bytes");
		return;
	}
	if (felix_auth_check(&s->auth, a->tenant_id, a->token, &st->grants, msg,
	                     sizeof msg) != 0) {
		log_info(s->log, "felix", "auth refused for tenant '%.100s'",
		         a->tenant_id);
		auth_refused(st, msg);
		return;
	}
	strcpy(st->tenant, a->tenant_id);
	st->authed = true;
	struct felix_msg r;
	if (a->has_client_flags) {
		/* Topology, redirects and owner acks describe a cluster: a
		 * standalone node advertises none of them. */
		bool cluster = felix_is_cluster(s);
		uint16_t flags =
		    cluster ? FELIX_SERVER_CLUSTER_FLAGS : FELIX_SERVER_FLAGS;
		st->send_flags = a->client_flags & flags;
		st->client_features =
		    a->has_client_features ? a->client_features : 0;
		felix_msg_init(&r, FELIX_MSG_AUTH_OK);
		r.u.auth_ok.server_flags = flags;
		r.u.auth_ok.has_server_features = true;
		r.u.auth_ok.server_features =
		    cluster ? FELIX_SERVER_CLUSTER_FEATURES
		            : FELIX_SERVER_FEATURES;
	} else {
		/* A legacy client: the frozen original set, and a plain ok
		 * (never auth_ok, which it cannot parse). */
		st->send_flags = FELIX_FLAGS_ORIGINAL_V1;
		felix_msg_init(&r, FELIX_MSG_OK);
	}
	fstream_reply_msg(st, &r);
}

/* Handles one JSON frame; false when blocked (frame kept). */
static bool handle_json(struct fstream *st, const struct felix_frame *fr)
{
	struct felix_server *s = st->conn->srv;
	struct felix_msg m;
	char err[256];
	int rv = felix_msg_decode(fr->payload, fr->header.length, &m, err,
	                          sizeof err);
	if (rv == FELIX_MSG_EUNKNOWN_TYPE) {
		/* The seed: an unrecognised type ends the control loop. */
		conn_kill(st->conn, FELIX_APP_PROTOCOL_ERROR,
		          "unknown message type");
		return true;
	}
	if (rv != 0) {
		metric_add(s->m.protocol_errors, 1);
		if (!st->authed) {
			stream_kill(st, err);
		} else {
			fstream_reply_error(st, err);
		}
		return true;
	}
	bool consumed = true;
	if (!st->authed) {
		if (m.type == FELIX_MSG_AUTH) {
			handle_auth(st, &m);
		} else {
			stream_kill(st, "unauthorized: the first frame on a "
			                "stream must be auth");
		}
		felix_msg_free(&m);
		return true;
	}
	/* Every request is checked before it runs. */
	if (felix_auth_request(st->grants, &m, err, sizeof err) != 0) {
		struct wbuf w;
		wbuf_init(&w);
		felix_auth_refusal(&m, err, &w);
		if (w.len > 0) {
			reply_now(st, &w);
		} else {
			wbuf_free(&w);
		}
		felix_msg_free(&m);
		return true;
	}
	switch (m.type) {
	case FELIX_MSG_AUTH:
		fstream_reply_error(st, "already authenticated on this stream");
		break;
	case FELIX_MSG_PUBLISH:
	case FELIX_MSG_PUBLISH_BATCH:
		consumed = handle_json_publish(st, &m);
		break;
	case FELIX_MSG_SUBSCRIBE:
		consumed = handle_subscribe(st, &m);
		break;
	case FELIX_MSG_CACHE_PUT:
	case FELIX_MSG_CACHE_GET:
	case FELIX_MSG_CACHE_DELETE:
	case FELIX_MSG_COUNTER_ADD:
	case FELIX_MSG_COUNTER_GET:
		consumed = handle_cache(st, &m);
		break;
	case FELIX_MSG_STREAM_SHARDS:
		consumed = handle_stream_shards(st, &m);
		break;
	case FELIX_MSG_PRODUCER_INIT:
	case FELIX_MSG_PUBLISH_IDEMPOTENT:
		consumed = produce_handle(st, &m);
		break;
	case FELIX_MSG_CACHE_WATCH:
		consumed = pubsub_handle_watch(st, &m);
		break;
	case FELIX_MSG_GROUP_POLL:
	case FELIX_MSG_GROUP_ACK:
	case FELIX_MSG_GROUP_NACK:
	case FELIX_MSG_GROUP_DEAD_LETTERS:
	case FELIX_MSG_GROUP_DISCARD:
	case FELIX_MSG_GROUP_REDRIVE:
		consumed = group_handle(st, &m);
		break;
	case FELIX_MSG_TOPOLOGY:
		handle_topology(st);
		break;
	default:
		snprintf(err, sizeof err, "unexpected message %s from a client",
		         felix_msg_type_name(m.type));
		metric_add(s->m.protocol_errors, 1);
		fstream_reply_error(st, err);
		break;
	}
	felix_msg_free(&m);
	return consumed;
}

/* Handles one frame; false when blocked (frame kept for later). */
static bool handle_frame(struct fstream *st, const struct felix_frame *fr)
{
	if (fr->kind == FELIX_FRAME_JSON) {
		return handle_json(st, fr);
	}
	if (!st->authed) {
		stream_kill(st, "unauthorized: the first frame on a stream "
		                "must be auth");
		return true;
	}
	if (fr->kind == FELIX_FRAME_PUBLISH_BATCH) {
		return handle_binary_publish(st, fr);
	}
	struct felix_server *s = st->conn->srv;
	metric_add(s->m.protocol_errors, 1);
	fstream_reply_error(st,
	                    "unexpected frame from a client: event batches and "
	                    "publish acks travel broker to client");
	return true;
}

static void stream_process(struct fstream *st)
{
	struct felix_server *s = st->conn->srv;
	if (st->in_process) {
		return;
	}
	st->in_process = true;
	while (!st->dead && !st->blocked && !st->conn->closing &&
	       st->inflight < FELIX_STREAM_INFLIGHT_MAX &&
	       st->out_bytes < STREAM_OUT_MAX) {
		struct felix_frame fr;
		char err[256];
		size_t need;
		uint32_t max = st->authed ? s->cfg.max_frame
		                          : FELIX_FRAME_PREAUTH_MAX_PAYLOAD;
		enum felix_frame_result fres = felix_frame_decode(
		    st->rx.data + st->rx_off, st->rx.len - st->rx_off, max, &fr,
		    &need, err, sizeof err);
		if (fres == FELIX_FRAME_NEED_MORE) {
			if (st->peer_fin && st->rx_off < st->rx.len) {
				stream_kill(st, "stream ended inside a frame");
			}
			break;
		}
		if (fres == FELIX_FRAME_ERROR) {
			stream_kill(st, err);
			break;
		}
		if (!handle_frame(st, &fr)) {
			break; /* blocked: read the frame again later */
		}
		if (st->dead || st->conn->closing) {
			break;
		}
		st->rx_off += fr.frame_len;
	}
	/* Compact what was read. */
	if (st->rx_off == st->rx.len) {
		wbuf_reset(&st->rx);
		st->rx_off = 0;
		if (st->rx.cap > (1u << 20)) {
			wbuf_free(&st->rx);
		}
	} else if (st->rx_off > (64u << 10)) {
		memmove(st->rx.data, st->rx.data + st->rx_off,
		        st->rx.len - st->rx_off);
		st->rx.len -= st->rx_off;
		st->rx_off = 0;
	}
	/* Open the window again unless holding the client back. */
	bool holding = st->blocked ||
	               st->inflight >= FELIX_STREAM_INFLIGHT_MAX ||
	               st->out_bytes >= STREAM_OUT_MAX;
	if (st->unconsumed > 0 && (!holding || st->dead)) {
		quic_conn_stream_consume(st->conn->qc, st->id, st->unconsumed);
		st->unconsumed = 0;
	}
	st->in_process = false;
	maybe_fin(st);
}

/* ---- QUIC callbacks ------------------------------------------------------ */

static void on_conn_open(struct quic_conn *c)
{
	struct felix_server *s = quic_conn_owner(c);
	struct fconn *fc = calloc(1, sizeof *fc);
	if (fc == NULL) {
		quic_conn_close(c, FELIX_APP_SHUTDOWN, "out of memory");
		return;
	}
	fc->srv = s;
	fc->qc = c;
	fc->next = s->conns;
	if (s->conns != NULL) {
		s->conns->prev = fc;
	}
	s->conns = fc;
	s->n_conns++;
	metric_set(s->m.connections, (int64_t)s->n_conns);
	quic_conn_set_data(c, fc);
	if (s->closing) {
		conn_kill(fc, FELIX_APP_SHUTDOWN, "node draining");
	}
}

static void on_stream_open(struct quic_conn *c, int64_t sid, bool bidi)
{
	struct fconn *fc = quic_conn_get_data(c);
	if (fc == NULL || !bidi) {
		return; /* client uni streams carry nothing in Felix v1 */
	}
	struct fstream *st = calloc(1, sizeof *st);
	if (st == NULL) {
		quic_conn_stream_reset(c, sid, FELIX_APP_SHUTDOWN);
		return;
	}
	st->conn = fc;
	st->id = sid;
	st->opened_ms = uv_now(fc->srv->loop);
	st->send_flags = FELIX_FLAGS_ORIGINAL_V1;
	wbuf_init(&st->rx);
	st->next = fc->streams;
	if (fc->streams != NULL) {
		fc->streams->prev = st;
	}
	fc->streams = st;
	quic_conn_stream_set_data(c, sid, st);
	quic_conn_stream_set_manual_consume(c, sid, true);
	metric_add(fc->srv->m.streams, 1);
}

static void on_stream_data(struct quic_conn *c, int64_t sid,
                           const uint8_t *data, size_t len, bool fin)
{
	struct fconn *fc = quic_conn_get_data(c);
	struct fstream *st;
	if (fc == NULL || (sid & 0x2) != 0) {
		return; /* uni streams: auto-consumed by the transport */
	}
	st = quic_conn_stream_get_data(c, sid);
	if (st == NULL) {
		quic_conn_stream_consume(c, sid, len);
		return;
	}
	if (st->dead) {
		quic_conn_stream_consume(c, sid, len);
		return;
	}
	if (len > 0 && wbuf_append(&st->rx, data, len) != 0) {
		quic_conn_stream_consume(c, sid, len);
		conn_kill(fc, FELIX_APP_SHUTDOWN, "out of memory");
		return;
	}
	st->unconsumed += len;
	if (fin) {
		st->peer_fin = true;
	}
	stream_process(st);
}

static void on_stream_writable(struct quic_conn *c, int64_t sid)
{
	struct fconn *fc = quic_conn_get_data(c);
	if (fc == NULL) {
		return;
	}
	if (pubsub_stream_writable(fc->srv, fc, sid)) {
		return;
	}
	struct fstream *st = quic_conn_stream_get_data(c, sid);
	if (st != NULL && (sid & 0x3) == 0) {
		stream_flush(st);
	}
}

static void on_stream_reset(struct quic_conn *c, int64_t sid,
                            uint64_t app_error)
{
	(void)app_error;
	struct fconn *fc = quic_conn_get_data(c);
	if (fc == NULL || (sid & 0x3) != 0) {
		return;
	}
	struct fstream *st = quic_conn_stream_get_data(c, sid);
	if (st != NULL) {
		/* The client abandoned its side: answer what was asked. */
		st->dead = true;
		st->peer_fin = true;
		st->rx.len = st->rx_off = 0;
		stream_flush(st);
	}
}

static void stream_free(struct fconn *fc, struct fstream *st)
{
	struct freq *r = st->head;
	while (r != NULL) {
		struct freq *next = r->next;
		if (r->done) {
			freq_free(r);
		} else if (r->abandon != NULL) {
			r->st = NULL;
			r->abandon(
			    r); /* frees it, or leaves it to a callback */
		} else {
			r->st = NULL; /* its callback frees it */
		}
		r = next;
	}
	if (st->lookup != NULL) {
		st->lookup->st = NULL;
	}
	if (st->unconsumed > 0) {
		quic_conn_stream_consume(fc->qc, st->id, st->unconsumed);
	}
	if (st->prev != NULL) {
		st->prev->next = st->next;
	} else {
		fc->streams = st->next;
	}
	if (st->next != NULL) {
		st->next->prev = st->prev;
	}
	wbuf_free(&st->rx);
	felix_grants_free(st->grants);
	metric_add(fc->srv->m.streams, -1);
	free(st);
}

static void on_stream_close(struct quic_conn *c, int64_t sid,
                            uint64_t app_error)
{
	(void)app_error;
	struct fconn *fc = quic_conn_get_data(c);
	if (fc == NULL) {
		return;
	}
	if (pubsub_stream_close(fc->srv, fc, sid)) {
		return;
	}
	if ((sid & 0x3) != 0) {
		return;
	}
	struct fstream *st = quic_conn_stream_get_data(c, sid);
	if (st != NULL) {
		quic_conn_stream_set_data(c, sid, NULL);
		stream_free(fc, st);
	}
}

static void on_conn_close(struct quic_conn *c,
                          const struct quic_close_info *info)
{
	struct fconn *fc = quic_conn_get_data(c);
	if (fc == NULL) {
		return;
	}
	struct felix_server *s = fc->srv;
	log_debug(s->log, "felix", "connection closed: %s", info->message);
	pubsub_conn_closed(s, fc);
	while (fc->streams != NULL) {
		stream_free(fc, fc->streams);
	}
	if (fc->prev != NULL) {
		fc->prev->next = fc->next;
	} else {
		s->conns = fc->next;
	}
	if (fc->next != NULL) {
		fc->next->prev = fc->prev;
	}
	s->n_conns--;
	metric_set(s->m.connections, (int64_t)s->n_conns);
	quic_conn_set_data(c, NULL);
	free(fc);
}

/* Sessions that did not authenticate in time are ended. */
static void on_sweep(uv_timer_t *t)
{
	struct felix_server *s = t->data;
	uint64_t now = uv_now(s->loop);
	for (struct fconn *fc = s->conns; fc != NULL; fc = fc->next) {
		struct fstream *st = fc->streams;
		while (st != NULL) {
			struct fstream *next = st->next;
			if (!st->authed && !st->dead &&
			    now - st->opened_ms >= FELIX_AUTH_DEADLINE_MS) {
				metric_add(s->m.auth_failures, 1);
				stream_kill(st, "unauthorized: no auth within "
				                "10 s");
			}
			st = next;
		}
	}
}

/* ---- lifecycle ----------------------------------------------------------- */

/* The store observer: appends feed subscriptions and wake long polls;
 * cache changes feed watches. */
static void on_store_append(void *data, uint32_t group,
                            struct store_slice scope, uint32_t shard,
                            uint64_t base, const struct store_list *records)
{
	struct felix_server *s = data;
	(void)group;
	pubsub_on_append(s, scope, shard, base, records);
	group_on_append(s, scope, shard);
}

static void on_store_cache_change(void *data, uint32_t group,
                                  struct store_slice scope, uint32_t shard,
                                  uint64_t offset, struct store_slice key,
                                  const struct store_slice *value,
                                  uint64_t expires_at)
{
	struct felix_server *s = data;
	(void)group;
	pubsub_on_cache_change(s, scope, shard, offset, key, value, expires_at);
}

static void on_store_imported(void *data, uint32_t group)
{
	pubsub_on_imported(data, group);
}

#define FELIX_ERRORS_HELP                                                      \
	"Felix errors by kind: malformed frames and protocol violations, "     \
	"refused or timed-out auths, publishes answered with an error, "       \
	"publish_idempotent answered publish_refused"

/* Label values of the per-kind families (enum req_kind). */
static const char *const kind_names[REQ_KIND_COUNT] = {
    [REQ_REPLY] = "other",
    [REQ_LOOKUP] = "lookup",
    [REQ_PUBLISH] = "publish",
    [REQ_CACHE_PUT] = "cache_put",
    [REQ_CACHE_GET] = "cache_get",
    [REQ_CACHE_DELETE] = "cache_delete",
    [REQ_COUNTER_ADD] = "counter_add",
    [REQ_COUNTER_GET] = "counter_get",
    [REQ_SUBSCRIBE] = "subscribe",
    [REQ_WATCH] = "cache_watch",
    [REQ_GROUP_POLL] = "group_poll",
    [REQ_GROUP_SETTLE] = "group_settle",
    [REQ_GROUP_DEAD] = "group_dead_letters",
    [REQ_IDEMPOTENT] = "publish_idempotent",
};

/* The per-kind tables at scrape time: only kinds that were used. */
static void metrics_collect(void *data, struct metrics_out *o)
{
	const struct felix_metrics *x = &((struct felix_server *)data)->m;
	char labels[64];

	metrics_out_family(o, "lodestone_felix_opcode_requests_total",
	                   METRIC_COUNTER,
	                   "Felix requests received, by request type");
	for (unsigned k = 0; k < REQ_KIND_COUNT; k++) {
		if (k != REQ_LOOKUP && x->kind_requests[k] > 0) {
			snprintf(labels, sizeof labels, "opcode=\"%s\"",
			         kind_names[k]);
			metrics_out_uint(
			    o, "lodestone_felix_opcode_requests_total", labels,
			    x->kind_requests[k]);
		}
	}
	metrics_out_family(o, "lodestone_felix_request_duration_seconds",
	                   METRIC_HISTOGRAM,
	                   "Felix request latency from arrival to the reply "
	                   "handed to the stream (publishes: after commit), "
	                   "by request type");
	for (unsigned k = 0; k < REQ_KIND_COUNT; k++) {
		const struct metric_hist *h = &x->kind_latency[k];
		if (k != REQ_LOOKUP && h->count > 0) {
			snprintf(labels, sizeof labels, "opcode=\"%s\"",
			         kind_names[k]);
			metrics_out_hist(
			    o, "lodestone_felix_request_duration_seconds",
			    labels, metric_hist_bounds_ns, h->bucket,
			    METRIC_HIST_BOUNDS, h->count, h->sum_ns);
		}
	}
}

static void metrics_register(struct felix_server *s, struct metrics *m)
{
	struct felix_metrics *x = &s->m;
	x->json_publish =
	    metrics_counter(m, "lodestone_felix_json_publishes_total",
	                    "JSON publish frames received (compatibility path)",
	                    "frame=\"publish\"");
	x->json_publish_batch =
	    metrics_counter(m, "lodestone_felix_json_publishes_total",
	                    "JSON publish frames received (compatibility path)",
	                    "frame=\"publish_batch\"");
	x->connections = metrics_gauge(m, "lodestone_felix_connections",
	                               "Open Felix QUIC connections", NULL);
	x->streams = metrics_gauge(m, "lodestone_felix_sessions",
	                           "Open client bidirectional streams", NULL);
	x->subscriptions = metrics_gauge(m, "lodestone_felix_subscriptions",
	                                 "Active subscriptions", NULL);
	x->publish_frames =
	    metrics_counter(m, "lodestone_felix_publish_frames_total",
	                    "Publish frames (binary and JSON) proposed", NULL);
	x->publish_records =
	    metrics_counter(m, "lodestone_felix_publish_records_total",
	                    "Records appended by publishes", NULL);
	x->publish_errors =
	    metrics_counter(m, "lodestone_felix_errors_total",
	                    FELIX_ERRORS_HELP, "kind=\"publish\"");
	x->auth_failures = metrics_counter(m, "lodestone_felix_errors_total",
	                                   FELIX_ERRORS_HELP, "kind=\"auth\"");
	x->protocol_errors =
	    metrics_counter(m, "lodestone_felix_errors_total",
	                    FELIX_ERRORS_HELP, "kind=\"protocol\"");
	x->idem_refused =
	    metrics_counter(m, "lodestone_felix_errors_total",
	                    FELIX_ERRORS_HELP, "kind=\"publish_refused\"");
	x->events_sent = metrics_counter(m, "lodestone_felix_events_sent_total",
	                                 "Events written to subscribers", NULL);
	x->events_dropped = metrics_counter(
	    m, "lodestone_felix_events_dropped_total",
	    "Events dropped by full subscriber queues (DropNew)", NULL);
	x->queue_bytes = metrics_gauge(
	    m, "lodestone_felix_subscriber_queue_bytes",
	    "Bytes waiting in subscriber queues (not yet in QUIC)", NULL);
	x->requests = metrics_counter(
	    m, "lodestone_felix_requests_total",
	    "Cache, counter, subscribe, watch and group requests", NULL);
	x->watches = metrics_gauge(m, "lodestone_felix_cache_watches",
	                           "Active cache watches", NULL);
	x->watch_events =
	    metrics_counter(m, "lodestone_felix_cache_events_sent_total",
	                    "cache_event frames written", NULL);
	x->watch_lagged =
	    metrics_counter(m, "lodestone_felix_cache_watch_lagged_total",
	                    "Watches ended with cache_watch_lagged", NULL);
	x->group_polls = metrics_counter(m, "lodestone_felix_group_polls_total",
	                                 "Consumer group polls proposed", NULL);
	x->group_records =
	    metrics_counter(m, "lodestone_felix_group_records_total",
	                    "Records handed out by consumer group polls", NULL);
	x->group_parked = metrics_gauge(m, "lodestone_felix_group_parked_polls",
	                                "Long polls waiting for records", NULL);
	x->idem_duplicates = metrics_counter(
	    m, "lodestone_felix_idempotent_duplicates_total",
	    "publish_idempotent batches answered as duplicates", NULL);
	x->redirects = metrics_counter(
	    m, "lodestone_felix_redirects_total",
	    "Requests for a shard led elsewhere answered not_leader", NULL);
	x->owner_acks = metrics_counter(
	    m, "lodestone_felix_owner_acks_total",
	    "Binary acks of forwarded publishes naming the owner", NULL);
}

int felix_server_start(struct felix_server **out, uv_loop_t *loop,
                       struct shards *shards, struct scopes *scopes,
                       struct metrics *metrics, const struct log *log,
                       const struct felix_server_config *cfg, char *err,
                       size_t errlen)
{
	struct felix_server *s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->loop = loop;
	s->shards = shards;
	s->scopes = scopes;
	s->log = log;
	s->cfg = *cfg;
	snprintf(s->host, sizeof s->host, "%s", cfg->host);
	snprintf(s->cert, sizeof s->cert, "%s", cfg->cert_file);
	snprintf(s->key, sizeof s->key, "%s", cfg->key_file);
	s->cfg.host = s->host;
	s->cfg.cert_file = s->cert;
	s->cfg.key_file = s->key;
	s->cfg.tokens_file = NULL;
	if (s->cfg.sub_queue_bytes == 0) {
		s->cfg.sub_queue_bytes = FELIX_SUB_QUEUE_DEFAULT;
	}
	if (s->cfg.max_frame == 0) {
		s->cfg.max_frame = FELIX_FRAME_DEFAULT_MAX_PAYLOAD;
	}
	if (s->cfg.group_max_wait_ms == 0) {
		s->cfg.group_max_wait_ms = FELIX_GROUP_MAX_WAIT_DEFAULT;
	}
	if (s->cfg.group_visibility_ms == 0) {
		s->cfg.group_visibility_ms = FELIX_GROUP_VISIBILITY_DEFAULT;
	}
	if (s->cfg.group_max_attempts == 0) {
		s->cfg.group_max_attempts = FELIX_GROUP_MAX_ATTEMPTS_DEFAULT;
	}
	struct felix_auth_config acfg = {
	    .tokens_file = cfg->tokens_file,
	    .dev = cfg->dev,
	    .jwks_dir = cfg->jwks_dir,
	    .issuer = cfg->jwt_issuer,
	    .audience = cfg->jwt_audience,
	    .skew_s = cfg->jwt_skew_s,
	};
	s->cfg.jwks_dir = s->cfg.jwt_issuer = s->cfg.jwt_audience = NULL;
	if (felix_auth_load(&s->auth, &acfg, err, errlen) != 0) {
		free(s);
		return -1;
	}
	metrics_register(s, metrics);
	pubsub_init(s);

	struct quic_server_config qc;
	quic_server_config_init(&qc);
	qc.host = s->host;
	qc.port = cfg->port;
	qc.cert_file = s->cert;
	qc.key_file = s->key;
	qc.alpn = "felix/1";
	/* Windows for throughput: a 4 MiB frame must fit the stream window
	 * (reading is manual: a frame is consumed as it arrives). */
	qc.limits.initial_max_data = 16u << 20;
	qc.limits.initial_max_stream_data = 2u << 20;
	qc.limits.max_window = 64u << 20;
	qc.limits.max_stream_window = 8u << 20;
	qc.limits.max_streams_bidi = 128;
	qc.limits.max_streams_uni = 8;
	qc.limits.idle_timeout_ms = 30000;
	qc.limits.keepalive_ms = 10000;
	qc.limits.stream_send_buf_max = 1u << 20;
	qc.limits.conn_send_buf_max = 16u << 20;
	qc.callbacks.on_conn_open = on_conn_open;
	qc.callbacks.on_stream_open = on_stream_open;
	qc.callbacks.on_stream_data = on_stream_data;
	qc.callbacks.on_stream_writable = on_stream_writable;
	qc.callbacks.on_stream_reset = on_stream_reset;
	qc.callbacks.on_stream_close = on_stream_close;
	qc.callbacks.on_conn_close = on_conn_close;
	qc.owner = s;
	char qerr[512];
	if (quic_server_start(&s->qs, loop, &qc, log, qerr, sizeof qerr) != 0) {
		snprintf(err, errlen, "Felix QUIC listener: %s", qerr);
		pubsub_free(s);
		felix_auth_free(&s->auth);
		free(s);
		return -1;
	}
	s->qs_started = true;
	s->metrics = metrics;
	metrics_add_collector(metrics, metrics_collect, s);
	uv_timer_init(loop, &s->sweep);
	uv_idle_init(loop, &s->pump);
	uv_timer_init(loop, &s->gwake);
	s->sweep.data = s;
	s->pump.data = s;
	s->gwake.data = s;
	s->open_handles = 3;
	if (felix_auth_watch(&s->auth, loop, log)) {
		s->auth.sighup.data = s;
		s->open_handles++;
	}
	uv_timer_start(&s->sweep, on_sweep, 1000, 1000);

	struct store_observer obs = {on_store_append, on_store_cache_change, s,
	                             on_store_imported};
	store_set_observer(shards_store(shards), &obs);
	scopes_set_auth(scopes, &s->auth);
	log_info(log, "felix", "Felix QUIC on %s:%u (auth: %s)", s->host,
	         (unsigned)quic_server_port(&s->qs),
	         felix_auth_mode_name(s->auth.mode));
	*out = s;
	return 0;
}

uint16_t felix_server_port(const struct felix_server *s)
{
	return quic_server_port(&s->qs);
}

const char *felix_server_auth_mode(const struct felix_server *s)
{
	return felix_auth_mode_name(s->auth.mode);
}

static void maybe_closed(struct felix_server *s)
{
	if (s->open_handles == 0 && !s->qs_started && s->hreads == 0 &&
	    s->close_cb != NULL) {
		felix_server_close_cb cb = s->close_cb;
		s->close_cb = NULL;
		cb(s->close_data);
	}
}

void felix_server_maybe_closed(struct felix_server *s)
{
	if (s->closing) {
		maybe_closed(s);
	}
}

static void on_handle_closed(uv_handle_t *h)
{
	struct felix_server *s = h->data;
	s->open_handles--;
	maybe_closed(s);
}

static void on_qs_closed(struct quic_server *qs)
{
	struct felix_server *s = qs->data;
	s->qs_started = false;
	maybe_closed(s);
}

void felix_server_close(struct felix_server *s, felix_server_close_cb cb,
                        void *data)
{
	if (s->closing) {
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	store_set_observer(shards_store(s->shards), NULL);
	uv_close((uv_handle_t *)&s->sweep, on_handle_closed);
	uv_close((uv_handle_t *)&s->pump, on_handle_closed);
	uv_close((uv_handle_t *)&s->gwake, on_handle_closed);
	if (s->auth.watching) {
		uv_close((uv_handle_t *)&s->auth.sighup, on_handle_closed);
	}
	s->qs.data = s;
	quic_server_close(&s->qs, FELIX_APP_SHUTDOWN, "node draining",
	                  on_qs_closed);
}

void felix_server_free(struct felix_server *s)
{
	if (s == NULL) {
		return;
	}
	scopes_set_auth(s->scopes, NULL);
	if (s->metrics != NULL) {
		metrics_remove_collector(s->metrics, metrics_collect, s);
	}
	group_free(s);
	pubsub_free(s);
	felix_auth_free(&s->auth);
	free(s);
}

/* FerricFlow calls of liblodestone; see flow_client.h. */
#include "client/flow_client.h"

#include <string.h>

#include "wire/fsnp_opcode.h"

void flow_args_init(struct flow_args *a)
{
	memset(a, 0, sizeof *a);
	a->fencing_token = FLOW_UNSET;
	a->lease_ms = FLOW_UNSET;
	a->limit = FLOW_UNSET;
	a->block_ms = FLOW_UNSET;
	a->run_at_ms = FLOW_UNSET;
	a->now_ms = FLOW_UNSET;
	a->priority = FLOW_UNSET;
	a->count = FLOW_UNSET;
}

size_t flow_client_route_key(const char *id, const char *pk, char *out)
{
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *part;
	size_t plen, n;

	flow_route_partition((const uint8_t *)id, strlen(id),
	                     (const uint8_t *)pk, pk ? strlen(pk) : 0, buf,
	                     &part, &plen);
	out[0] = '{';
	n = flow_route_tag(part, plen, out + 1);
	out[n + 1] = '}';
	out[n + 2] = '\0';
	return n + 2;
}

static void put_str(struct fsnp_writer *w, const char *k, const char *v)
{
	if (v != NULL) {
		fsnp_w_key(w, k);
		fsnp_w_str(w, v);
	}
}

static void put_int(struct fsnp_writer *w, const char *k, int64_t v)
{
	if (v != FLOW_UNSET) {
		fsnp_w_key(w, k);
		fsnp_w_i64(w, v);
	}
}

static void put_data(struct fsnp_writer *w, const char *k,
                     const struct flow_args *a)
{
	if (a->data != NULL) {
		fsnp_w_key(w, k);
		fsnp_w_bin(w, a->data, a->data_len);
	}
}

/* id, partition_key, lease_token, fencing_token, now_ms: the lease
 * mutations' common part. */
static int put_lease(struct fsnp_writer *w, const struct flow_args *a,
                     bool need_token)
{
	if (a->id == NULL || a->fencing_token == FLOW_UNSET ||
	    (need_token && a->lease_token == NULL)) {
		return FLOW_CLIENT_EINVAL;
	}
	put_str(w, "id", a->id);
	put_str(w, "partition_key", a->partition_key);
	put_str(w, "lease_token", a->lease_token);
	put_int(w, "fencing_token", a->fencing_token);
	put_int(w, "now_ms", a->now_ms);
	return 0;
}

static int encode_fields(uint16_t opcode, const struct flow_args *a,
                         struct fsnp_writer *w)
{
	switch (opcode) {
	case FSNP_OP_FLOW_CREATE:
		if (a->id == NULL || a->type == NULL) {
			return FLOW_CLIENT_EINVAL;
		}
		put_str(w, "id", a->id);
		put_str(w, "type", a->type);
		put_str(w, "state", a->state);
		put_str(w, "partition_key", a->partition_key);
		put_data(w, "payload", a);
		put_int(w, "run_at_ms", a->run_at_ms);
		put_int(w, "now_ms", a->now_ms);
		put_int(w, "priority", a->priority);
		if (a->idempotent) {
			fsnp_w_key(w, "idempotent");
			fsnp_w_bool(w, true);
		}
		return 0;
	case FSNP_OP_FLOW_GET:
		if (a->id == NULL) {
			return FLOW_CLIENT_EINVAL;
		}
		put_str(w, "id", a->id);
		put_str(w, "partition_key", a->partition_key);
		if (a->payload) {
			fsnp_w_key(w, "payload");
			fsnp_w_bool(w, true);
		}
		return 0;
	case FSNP_OP_FLOW_CLAIM_DUE:
		if (a->type == NULL || a->worker == NULL) {
			return FLOW_CLIENT_EINVAL;
		}
		put_str(w, "type", a->type);
		put_str(w, "worker", a->worker);
		put_str(w, "state", a->state);
		put_str(w, "partition_key", a->partition_key);
		put_int(w, "lease_ms", a->lease_ms);
		put_int(w, "limit", a->limit);
		put_int(w, "block_ms", a->block_ms);
		put_int(w, "priority", a->priority);
		put_int(w, "now_ms", a->now_ms);
		put_str(w, "return", a->ret);
		if (!a->payload) {
			fsnp_w_key(w, "payload");
			fsnp_w_bool(w, false);
		}
		return 0;
	case FSNP_OP_FLOW_COMPLETE:
		put_data(w, "result", a);
		return put_lease(w, a, true);
	case FSNP_OP_FLOW_FAIL:
	case FSNP_OP_FLOW_RETRY:
		put_data(w, "error", a);
		put_int(w, "run_at_ms", a->run_at_ms);
		return put_lease(w, a, true);
	case FSNP_OP_FLOW_EXTEND_LEASE:
		put_int(w, "lease_ms", a->lease_ms);
		return put_lease(w, a, true);
	case FSNP_OP_FLOW_TRANSITION:
		if (a->from_state == NULL || a->to_state == NULL) {
			return FLOW_CLIENT_EINVAL;
		}
		put_str(w, "from_state", a->from_state);
		put_str(w, "to_state", a->to_state);
		put_int(w, "run_at_ms", a->run_at_ms);
		put_int(w, "priority", a->priority);
		return put_lease(w, a, false);
	case FSNP_OP_FLOW_CANCEL:
		put_data(w, "reason", a);
		return put_lease(w, a, false);
	case FSNP_OP_FLOW_HISTORY:
		if (a->id == NULL) {
			return FLOW_CLIENT_EINVAL;
		}
		put_str(w, "id", a->id);
		put_str(w, "partition_key", a->partition_key);
		put_int(w, "count", a->count);
		if (a->rev) {
			fsnp_w_key(w, "rev");
			fsnp_w_bool(w, true);
		}
		return 0;
	default:
		return FLOW_CLIENT_EINVAL;
	}
}

int flow_client_encode(uint16_t opcode, const struct flow_args *a,
                       struct wbuf *body, char *key, size_t *klen)
{
	struct fsnp_writer w;
	size_t start = body->len;
	int rv;

	fsnp_w_init(&w, body);
	fsnp_w_map_begin(&w);
	rv = encode_fields(opcode, a, &w);
	if (rv != 0) {
		goto err_undo;
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0) {
		rv = FLOW_CLIENT_ENOMEM;
		goto err_undo;
	}
	*klen = 0;
	key[0] = '\0';
	if (a->id != NULL && opcode != FSNP_OP_FLOW_CLAIM_DUE) {
		*klen = flow_client_route_key(a->id, a->partition_key, key);
	} else if (opcode == FSNP_OP_FLOW_CLAIM_DUE &&
	           a->partition_key != NULL) {
		char buf[FLOW_TAG_MAX];
		size_t n = flow_route_tag((const uint8_t *)a->partition_key,
		                          strlen(a->partition_key), buf);
		key[0] = '{';
		memcpy(key + 1, buf, n);
		key[n + 1] = '}';
		key[n + 2] = '\0';
		*klen = n + 2;
	}
	return 0;

err_undo:
	body->len = start;
	return rv;
}

unsigned flow_client_flags(uint16_t opcode, const struct flow_args *a)
{
	switch (opcode) {
	case FSNP_OP_FLOW_GET:
	case FSNP_OP_FLOW_HISTORY:
	case FSNP_OP_FLOW_COMPLETE:
	case FSNP_OP_FLOW_FAIL:
	case FSNP_OP_FLOW_RETRY:
	case FSNP_OP_FLOW_EXTEND_LEASE:
	case FSNP_OP_FLOW_TRANSITION:
		return FSNP_REQ_IDEMPOTENT;
	case FSNP_OP_FLOW_CREATE:
		return a->idempotent ? FSNP_REQ_IDEMPOTENT : 0;
	default:
		return 0;
	}
}

int flow_client_call(struct fsnp_client *c, uint16_t opcode,
                     const struct flow_args *a, unsigned flags,
                     fsnp_reply_cb cb, void *data)
{
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen;
	struct wbuf body;
	int rv;

	wbuf_init(&body);
	rv = flow_client_encode(opcode, a, &body, key, &klen);
	if (rv == 0) {
		rv = fsnp_client_send(
		    c, opcode, klen ? key : NULL, klen, body.data, body.len,
		    flow_client_flags(opcode, a) | flags, cb, data);
	}
	wbuf_free(&body);
	return rv;
}

int flow_client_create(struct fsnp_client *c, const struct flow_args *a,
                       fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_CREATE, a, 0, cb, data);
}

int flow_client_get(struct fsnp_client *c, const struct flow_args *a,
                    fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_GET, a, 0, cb, data);
}

int flow_client_claim_due(struct fsnp_client *c, const struct flow_args *a,
                          fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_CLAIM_DUE, a, 0, cb, data);
}

int flow_client_complete(struct fsnp_client *c, const struct flow_args *a,
                         fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_COMPLETE, a, 0, cb, data);
}

int flow_client_fail(struct fsnp_client *c, const struct flow_args *a,
                     fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_FAIL, a, 0, cb, data);
}

int flow_client_retry(struct fsnp_client *c, const struct flow_args *a,
                      fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_RETRY, a, 0, cb, data);
}

int flow_client_transition(struct fsnp_client *c, const struct flow_args *a,
                           fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_TRANSITION, a, 0, cb, data);
}

int flow_client_cancel(struct fsnp_client *c, const struct flow_args *a,
                       fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_CANCEL, a, 0, cb, data);
}

int flow_client_extend_lease(struct fsnp_client *c, const struct flow_args *a,
                             fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_EXTEND_LEASE, a, 0, cb, data);
}

int flow_client_history(struct fsnp_client *c, const struct flow_args *a,
                        fsnp_reply_cb cb, void *data)
{
	return flow_client_call(c, FSNP_OP_FLOW_HISTORY, a, 0, cb, data);
}

int flow_client_sync(struct fsnp_sync *s, uint16_t opcode,
                     const struct flow_args *a, uint16_t *status,
                     struct wbuf *out)
{
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen;
	struct wbuf body;
	int rv;

	wbuf_init(&body);
	rv = flow_client_encode(opcode, a, &body, key, &klen);
	if (rv == 0) {
		rv = fsnp_sync_call(s, opcode, klen ? key : NULL, klen,
		                    body.data, body.len,
		                    flow_client_flags(opcode, a), status, out);
	}
	wbuf_free(&body);
	return rv;
}

/* --- Replies ----------------------------------------------------------------
 */

static void get_bin(const struct fsnp_val *m, const char *k,
                    struct fsnp_bytes *out)
{
	if (fsnp_map_bin(m, k, out) != 0) {
		out->ptr = NULL;
		out->len = 0;
	}
}

static bool get_int(const struct fsnp_val *m, const char *k, int64_t *out)
{
	if (fsnp_map_i64(m, k, out) != 0) {
		*out = 0;
		return false;
	}
	return true;
}

int flow_client_parse_record(const struct fsnp_val *v, struct flow_record *out)
{
	memset(out, 0, sizeof *out);
	if (fsnp_val_is_nil(v)) {
		return FLOW_CLIENT_ENOTFOUND;
	}
	if (v->tag != FSNP_MAP) {
		return FLOW_CLIENT_EPROTO;
	}
	get_bin(v, "id", &out->id);
	if (out->id.len == 0) {
		return FLOW_CLIENT_EPROTO;
	}
	get_bin(v, "type", &out->type);
	get_bin(v, "state", &out->state);
	get_bin(v, "run_state", &out->run_state);
	get_bin(v, "partition_key", &out->partition_key);
	get_bin(v, "lease_owner", &out->lease_owner);
	get_bin(v, "lease_token", &out->lease_token);
	get_int(v, "version", &out->version);
	get_int(v, "attempts", &out->attempts);
	get_int(v, "fencing_token", &out->fencing_token);
	get_int(v, "priority", &out->priority);
	get_int(v, "created_at_ms", &out->created_at_ms);
	get_int(v, "updated_at_ms", &out->updated_at_ms);
	out->has_next_run_at_ms =
	    get_int(v, "next_run_at_ms", &out->next_run_at_ms);
	out->has_lease_deadline_ms =
	    get_int(v, "lease_deadline_ms", &out->lease_deadline_ms);
	out->has_payload = fsnp_map_get(v, "payload", &out->payload) == 0;
	return 0;
}

int flow_client_parse_claims(const struct fsnp_val *v, struct flow_record *out,
                             size_t cap, size_t *n)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	size_t i = 0;

	*n = 0;
	if (v->tag != FSNP_ARRAY) {
		return FLOW_CLIENT_EPROTO;
	}
	if (v->as.count > cap) {
		return FLOW_CLIENT_EPROTO;
	}
	fsnp_iter_init(&it, v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (flow_client_parse_record(&e, &out[i]) != 0 ||
		    out[i].lease_token.len == 0) {
			return FLOW_CLIENT_EPROTO;
		}
		i++;
	}
	*n = i;
	return 0;
}

int flow_client_parse_event(const struct fsnp_val *list, size_t i,
                            struct flow_event *out, size_t *n)
{
	struct fsnp_iter it, fit;
	struct fsnp_val e, id, fields, k, val;
	size_t j = 0;

	memset(out, 0, sizeof *out);
	if (list->tag != FSNP_ARRAY) {
		return FLOW_CLIENT_EPROTO;
	}
	if (n != NULL) {
		*n = list->as.count;
	}
	if (i >= list->as.count) {
		return FLOW_CLIENT_ENOTFOUND;
	}
	fsnp_iter_init(&it, list);
	do {
		if (!fsnp_iter_next(&it, NULL, &e)) {
			return FLOW_CLIENT_EPROTO;
		}
	} while (j++ < i);
	if (e.tag != FSNP_ARRAY || e.as.count != 2) {
		return FLOW_CLIENT_EPROTO;
	}
	fsnp_iter_init(&it, &e);
	if (!fsnp_iter_next(&it, NULL, &id) ||
	    !fsnp_iter_next(&it, NULL, &fields) ||
	    fsnp_val_bin(&id, &out->event_id) != 0 ||
	    fields.tag != FSNP_ARRAY || fields.as.count % 2 != 0) {
		return FLOW_CLIENT_EPROTO;
	}
	fsnp_iter_init(&fit, &fields);
	while (fsnp_iter_next(&fit, NULL, &k) &&
	       fsnp_iter_next(&fit, NULL, &val)) {
		struct fsnp_bytes name;
		if (fsnp_val_bin(&k, &name) != 0) {
			return FLOW_CLIENT_EPROTO;
		}
		if (fsnp_bytes_eq(name, "event")) {
			(void)fsnp_val_bin(&val, &out->event);
		} else if (fsnp_bytes_eq(name, "state")) {
			(void)fsnp_val_bin(&val, &out->state);
		} else if (fsnp_bytes_eq(name, "lease_owner")) {
			(void)fsnp_val_bin(&val, &out->lease_owner);
		} else if (fsnp_bytes_eq(name, "version")) {
			(void)fsnp_val_i64(&val, &out->version);
		} else if (fsnp_bytes_eq(name, "attempts")) {
			(void)fsnp_val_i64(&val, &out->attempts);
		} else if (fsnp_bytes_eq(name, "fencing_token")) {
			(void)fsnp_val_i64(&val, &out->fencing_token);
		} else if (fsnp_bytes_eq(name, "at")) {
			(void)fsnp_val_i64(&val, &out->at);
		}
	}
	return 0;
}

bool flow_client_is_ok(const struct fsnp_val *v)
{
	struct fsnp_bytes b;
	return fsnp_val_bin(v, &b) == 0 && fsnp_bytes_eq(b, "OK");
}

int flow_client_decode(const uint8_t *p, size_t len, struct fsnp_val *v)
{
	size_t used = 0;
	if (fsnp_value_decode(p, len, NULL, v, &used) != 0 || used != len) {
		return FLOW_CLIENT_EPROTO;
	}
	return 0;
}

/* The Flow state machine (flow_ops.h): creates, claims, leases and their
 * fencing, retries, transitions, signals, history and values, per
 * reference/flow.md. Every operation checks everything before it writes,
 * so a failed one leaves the store as it was. */
#include "flow/flow_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_children.h"
#include "flow/flow_index.h"
#include "flow/flow_stats.h"
#include "flow/flow_gov.h"
#include "wire/flow_route.h"
#include "store/keys.h"
#include "wire/fsnp_opcode.h"

#define RESERVED_ID "__ferricstore_schedule__:"
#define RESERVED_TYPE "__ferricstore_schedule"
#define DEFAULT_RETENTION_MS INT64_C(604800000)
#define DEFAULT_HISTORY_MAX 100000
#define DEFAULT_LEASE_MS 30000
#define MAX_ACTIVE_MAX INT64_C(31536000000)
#define REF_MAX 4096
#define PAYLOAD_MAX_BYTES 65536
#define CLAIM_MAX 1000
#define HISTORY_COUNT_MAX 10000

#define E1(...) flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__)

static const struct flow_opt *F(const struct flow_req *q, enum flow_field f)
{
	return q->f[f].set ? &q->f[f] : NULL;
}

/* The request's lease_ms into *lease_ms when it has one (a positive
 * integer, else the error and -1); *lease_ms is left as it is otherwise. */
static int opt_lease_ms(const struct flow_req *q, int64_t *lease_ms,
                        struct flow_err *err)
{
	const struct flow_opt *o = F(q, FF_LEASE_MS);
	if (o == NULL) {
		return 0;
	}
	if (o->i <= 0) {
		E1("ERR flow lease_ms must be a positive integer");
		return -1;
	}
	*lease_ms = o->i;
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x += UINT64_C(0x9E3779B97F4A7C15);
	x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
	return x ^ (x >> 31);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	}
	return h;
}

/* The command's time: the entry's, or the client's now_ms within the
 * allowed skew of it. */
static void set_now(struct fctx *c, const struct flow_req *q)
{
	const struct flow_opt *o = F(q, FF_NOW_MS);
	uint64_t lo, hi, v;

	c->now = c->entry_now;
	if (o == NULL) {
		return;
	}
	v = (uint64_t)o->i;
	lo = c->entry_now > c->skew ? c->entry_now - c->skew : 0;
	hi = c->entry_now + c->skew;
	c->now = v < lo ? lo : v > hi ? hi : v;
}

static int64_t cap_maxi(uint64_t v)
{
	return v > (uint64_t)FLOW_MAXI ? FLOW_MAXI : (int64_t)v;
}

static int nonempty(const struct flow_req *q, enum flow_field f,
                    struct flow_err *err)
{
	const struct flow_opt *o = F(q, f);

	if (o == NULL) {
		return E1("ERR flow %s is required", flow_field_name(f));
	}
	if (o->t.len == 0) {
		return E1("ERR flow %s must be a non-empty string",
		          flow_field_name(f));
	}
	return 0;
}

static int check_id(const struct flow_req *q, struct flow_err *err)
{
	const struct flow_opt *o = F(q, FF_ID);

	if (o == NULL || o->t.len == 0) {
		return E1("ERR flow id must be a non-empty string");
	}
	if (o->t.len >= sizeof RESERVED_ID - 1 &&
	    memcmp(o->t.ptr, RESERVED_ID, sizeof RESERVED_ID - 1) == 0) {
		return E1("ERR flow id is reserved for internal use");
	}
	return 0;
}

/* The partition of the request's flow (id and partition_key). */
static int req_partition(struct fctx *c, const struct flow_req *q,
                         struct fsnp_bytes id, struct fsnp_bytes *part,
                         struct flow_err *err)
{
	const struct flow_opt *pk = F(q, FF_PARTITION_KEY);
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *p;
	size_t n;

	if (pk != NULL && pk->t.len == 0) {
		return E1("ERR flow partition_key must be a non-empty string "
		          "or :global");
	}
	flow_route_partition(id.ptr, id.len, pk ? pk->t.ptr : NULL,
	                     pk ? pk->t.len : 0, buf, &p, &n);
	part->ptr = pk ? p : fctx_dup(c, p, n);
	part->len = n;
	return 0;
}

/* Loads the request's flow: 1 found, 0 not found (err set), -1 I/O. */
static int load(struct fctx *c, const struct flow_req *q, struct frec *r,
                struct flow_err *err)
{
	struct fsnp_bytes part;
	int rv;

	if (check_id(q, err) != 0 ||
	    req_partition(c, q, q->f[FF_ID].t, &part, err) != 0) {
		return 0;
	}
	rv = frec_load(c, part, q->f[FF_ID].t, r);
	if (rv == 0) {
		E1("ERR flow not found");
	}
	return rv;
}

static void bump(struct fctx *c, struct frec *r)
{
	frec_set_int(r, RI_VERSION, r->i[RI_VERSION] + 1);
	frec_set_int(r, RI_UPDATED_AT_MS, (int64_t)c->now);
}

static void clear_lease(struct frec *r)
{
	frec_clear_str(r, RS_LEASE_OWNER);
	frec_clear_str(r, RS_LEASE_TOKEN);
	frec_set_int(r, RI_LEASE_DEADLINE_MS, 0);
}

static void stamp_retention(struct fctx *c, struct frec *r, int64_t ttl)
{
	uint64_t base = c->now > c->entry_now ? c->now : c->entry_now;

	frec_set_int(r, RI_TERMINAL_RETENTION_UNTIL_MS,
	             cap_maxi(base + (uint64_t)ttl));
}

static bool leased(const struct frec *r)
{
	return r->s_set[RS_LEASE_TOKEN];
}

/* --- Attributes and state metadata ---------------------------------------- */

static int check_attr_value(const struct fsnp_val *v, bool nested)
{
	struct fsnp_iter it;
	struct fsnp_val e;

	if (v->enc_len > 256 + 5) {
		return -1;
	}
	switch (v->tag) {
	case FSNP_BIN:
		return v->as.bin.len <= 256 ? 0 : -1;
	case FSNP_I64:
	case FSNP_F64:
		return 0;
	case FSNP_ARRAY:
		if (nested || v->as.count > 16) {
			return -1;
		}
		fsnp_iter_init(&it, v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (check_attr_value(&e, true) != 0) {
				return -1;
			}
		}
		return 0;
	default:
		return -1;
	}
}

static int check_attrs(const struct fsnp_val *m, struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	if (m->as.count > 16) {
		return E1("ERR flow attributes supports at most 16 entries");
	}
	if (m->enc_len > 2048 + 5) {
		return E1("ERR flow attributes too large (max 2048 bytes)");
	}
	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (k.len == 0 || k.len > 64 ||
		    (k.len >= 2 && k.ptr[0] == '_' && k.ptr[1] == '_')) {
			return E1("ERR flow attribute name is invalid");
		}
		if (check_attr_value(&v, false) != 0) {
			return E1("ERR flow attribute value is invalid");
		}
	}
	return 0;
}

static int check_state_meta(const struct fsnp_val *m, struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	if (m->as.count > 16 || m->enc_len > 16384) {
		return E1("ERR flow state_meta too large");
	}
	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (k.len == 0 || k.len > 64 || v.enc_len > 256 + 5) {
			return E1("ERR flow state_meta entry is invalid");
		}
	}
	return 0;
}

static int bytes_cmp(struct fsnp_bytes a, struct fsnp_bytes b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int r = n ? memcmp(a.ptr, b.ptr, n) : 0;

	return r ? r : a.len < b.len ? -1 : a.len > b.len;
}

static bool in_list(const struct fsnp_val *list, struct fsnp_bytes k)
{
	struct fsnp_iter it;
	struct fsnp_val e;

	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (e.tag == FSNP_BIN && e.as.bin.len == k.len &&
		    memcmp(e.as.bin.ptr, k.ptr, k.len) == 0) {
			return true;
		}
	}
	return false;
}

/* A map value owned by the context, built from `old` (may be unset)
 * without the keys in `drop` (a list, may be NULL) and `add`'s keys,
 * then with `add`'s entries (or one entry key -> add when `key` is
 * given). */
static struct fsnp_val map_merge(struct fctx *c, const struct fsnp_val *old,
                                 bool old_set, const struct fsnp_val *drop,
                                 const struct fsnp_val *add,
                                 const struct fsnp_bytes *key)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v, tmp, out;
	const uint8_t *p;
	size_t n;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	if (old_set && old->tag == FSNP_MAP) {
		fsnp_iter_init(&it, old);
		while (fsnp_iter_next(&it, &k, &v)) {
			if (drop != NULL && in_list(drop, k)) {
				continue;
			}
			if (key != NULL) {
				if (k.len == key->len &&
				    memcmp(k.ptr, key->ptr, k.len) == 0) {
					continue;
				}
			} else if (add != NULL &&
			           fsnp_map_get_n(add, k.ptr, k.len, &tmp) ==
			               0) {
				continue;
			}
			fsnp_w_key_bin(&w, k.ptr, k.len);
			fsnp_w_val(&w, &v);
		}
	}
	if (key != NULL && add != NULL) {
		fsnp_w_key_bin(&w, key->ptr, key->len);
		fsnp_w_val(&w, add);
	} else if (add != NULL) {
		fsnp_iter_init(&it, add);
		while (fsnp_iter_next(&it, &k, &v)) {
			if (fsnp_map_get_n(add, k.ptr, k.len, &tmp) == 0 &&
			    tmp.enc != v.enc) {
				continue; /* a later duplicate wins */
			}
			fsnp_w_key_bin(&w, k.ptr, k.len);
			fsnp_w_val(&w, &v);
		}
	}
	fsnp_w_map_end(&w);
	(void)fsnp_w_finish(&w);
	n = b.len;
	p = fctx_keep(c, &b);
	(void)fsnp_value_decode(p, n, NULL, &out, NULL);
	return out;
}

/* The updates most mutations accept: payload, attributes_merge and
 * _delete, state_meta (stored under `state`), priority. Checks first
 * (when `apply` is false), then applies. */
static int updates(struct fctx *c, const struct flow_req *q, struct frec *r,
                   struct fsnp_bytes state, bool apply, struct flow_err *err)
{
	const struct flow_opt *am = F(q, FF_ATTRIBUTES_MERGE);
	const struct flow_opt *ad = F(q, FF_ATTRIBUTES_DELETE);
	const struct flow_opt *sm = F(q, FF_STATE_META);
	const struct flow_opt *pr = F(q, FF_PRIORITY);
	struct fsnp_val v;

	if (!apply) {
		if (am != NULL && check_attrs(&am->v, err) != 0) {
			return -1;
		}
		if (sm != NULL && check_state_meta(&sm->v, err) != 0) {
			return -1;
		}
		if (pr != NULL && pr->i > 2) {
			return E1("ERR flow priority must be between 0 and 2");
		}
		return 0;
	}
	if (F(q, FF_PAYLOAD) != NULL) {
		frec_set_val(r, RV_PAYLOAD, &q->f[FF_PAYLOAD].v);
	}
	if (am != NULL || ad != NULL) {
		v = map_merge(c, &r->v[RV_ATTRIBUTES], r->v_set[RV_ATTRIBUTES],
		              ad ? &ad->v : NULL, am ? &am->v : NULL, NULL);
		frec_set_val(r, RV_ATTRIBUTES, &v);
	}
	if (sm != NULL) {
		v = map_merge(c, &r->v[RV_STATE_META], r->v_set[RV_STATE_META],
		              NULL, &sm->v, &state);
		frec_set_val(r, RV_STATE_META, &v);
	}
	if (pr != NULL) {
		frec_set_int(r, RI_PRIORITY, pr->i);
	}
	return 0;
}

static void reply_ok(struct fsnp_writer *w)
{
	fsnp_w_str(w, "OK");
}

static void put_value(struct fctx *c, struct fsnp_bytes ref, uint64_t expires,
                      const struct fsnp_val *v);
static int get_value(struct fctx *c, struct fsnp_bytes ref, struct fsnp_val *v);
static struct fsnp_val text_val(struct fctx *c, struct fsnp_bytes b);

/* The ref of named value `name` of flow `owner` in partition `part`:
 * f:{<tag>}:v:n:<owner>:<name>. */
static struct fsnp_bytes named_ref(struct fctx *c, struct fsnp_bytes part,
                                   struct fsnp_bytes owner,
                                   struct fsnp_bytes name)
{
	char tag[FLOW_TAG_MAX];
	struct sbuf rb;
	struct fsnp_bytes ref;

	sbuf_init(&rb);
	flow_route_tag(part.ptr, part.len, tag);
	sbuf_add(&rb, "f:{", 3);
	sbuf_add(&rb, tag, strlen(tag));
	sbuf_add(&rb, "}:v:n:", 6);
	sbuf_add(&rb, owner.ptr, owner.len);
	sbuf_add(&rb, ":", 1);
	sbuf_add(&rb, name.ptr, name.len);
	ref.ptr = fctx_dup(c, rb.p, rb.len);
	ref.len = rb.len;
	sbuf_free(&rb);
	return ref;
}

/* Checks a create's `values` map: names 1..256 bytes. */
static int check_values(const struct fsnp_val *m, struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	if (m->tag != FSNP_MAP) {
		return E1("ERR flow values must be a map");
	}
	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (k.len == 0 || k.len > 256) {
			return E1("ERR invalid flow value");
		}
	}
	return 0;
}

/* Stores a create's named values and lists them in the record. */
static void store_values(struct fctx *c, struct frec *r,
                         const struct fsnp_val *m)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v, refv, refs;

	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		struct fsnp_bytes ref =
		    named_ref(c, r->s[RS_PARTITION_KEY], r->s[RS_ID], k);
		put_value(c, ref, 0, &v);
		refv = text_val(c, ref);
		refs = map_merge(c, &r->v[RV_VALUE_REFS],
		                 r->v_set[RV_VALUE_REFS], NULL, &refv, &k);
		frec_set_val(r, RV_VALUE_REFS, &refs);
	}
}

/* --- CREATE and START_AND_CLAIM ------------------------------------------- */

static uint64_t create_digest(const struct flow_req *q)
{
	static const enum flow_field fs[] = {
	    FF_ID,
	    FF_TYPE,
	    FF_STATE,
	    FF_PARTITION_KEY,
	    FF_PAYLOAD,
	    FF_ATTRIBUTES,
	    FF_STATE_META,
	    FF_PARENT_FLOW_ID,
	    FF_ROOT_FLOW_ID,
	    FF_CORRELATION_ID,
	    FF_PRIORITY,
	    FF_MAX_ACTIVE_MS,
	    FF_RETENTION_TTL_MS,
	};
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		const struct flow_opt *o = F(q, fs[i]);
		uint8_t tag = o ? 1 : 0;
		h = fnv(h, &tag, 1);
		if (o != NULL) {
			h = fnv(h, o->v.enc, o->v.enc_len);
		}
	}
	return h & (uint64_t)INT64_MAX;
}

static int check_create(const struct flow_req *q, struct flow_err *err)
{
	const struct flow_opt *o;
	static const enum flow_field refs[] = {
	    FF_PARENT_FLOW_ID, FF_ROOT_FLOW_ID, FF_CORRELATION_ID};

	if (check_id(q, err) != 0 || nonempty(q, FF_TYPE, err) != 0) {
		return -1;
	}
	if (fsnp_bytes_eq(q->f[FF_TYPE].t, RESERVED_TYPE)) {
		return E1("ERR flow type is reserved for internal use");
	}
	if (F(q, FF_STATE) != NULL && nonempty(q, FF_STATE, err) != 0) {
		return -1;
	}
	if (F(q, FF_TTL_MS) != NULL) {
		return E1("ERR flow ttl_ms was renamed to retention_ttl_ms");
	}
	if ((o = F(q, FF_RETENTION_TTL_MS)) != NULL && o->i <= 0) {
		return E1("ERR flow retention_ttl_ms must be a positive "
		          "integer");
	}
	if ((o = F(q, FF_MAX_ACTIVE_MS)) != NULL && !o->inf &&
	    (o->i < 1 || o->i > MAX_ACTIVE_MAX)) {
		return E1("ERR flow max_active_ms must be between 1 and "
		          "31536000000 or infinity");
	}
	if ((o = F(q, FF_HISTORY_HOT_MAX_EVENTS)) != NULL && o->i > 10000) {
		return E1("ERR flow history_hot_max_events must be between 0 "
		          "and 10000");
	}
	if ((o = F(q, FF_HISTORY_MAX_EVENTS)) != NULL &&
	    (o->i < 1 || o->i > 1000000)) {
		return E1("ERR flow history_max_events must be between 1 and "
		          "1000000");
	}
	if (F(q, FF_HISTORY_MAX_EVENTS) != NULL &&
	    F(q, FF_HISTORY_HOT_MAX_EVENTS) != NULL &&
	    q->f[FF_HISTORY_MAX_EVENTS].i < q->f[FF_HISTORY_HOT_MAX_EVENTS].i) {
		return E1("ERR flow history_max_events must be greater than "
		          "or equal to history_hot_max_events");
	}
	for (size_t i = 0; i < 3; i++) {
		if ((o = F(q, refs[i])) == NULL) {
			continue;
		}
		if (o->t.len == 0) {
			return E1("ERR flow %s must be a non-empty string",
			          flow_field_name(refs[i]));
		}
		if (o->t.len > REF_MAX) {
			return E1("ERR flow %s too large (max 4096 bytes)",
			          flow_field_name(refs[i]));
		}
	}
	if ((o = F(q, FF_ATTRIBUTES)) != NULL && check_attrs(&o->v, err) != 0) {
		return -1;
	}
	if ((o = F(q, FF_STATE_META)) != NULL &&
	    check_state_meta(&o->v, err) != 0) {
		return -1;
	}
	if ((o = F(q, FF_PRIORITY)) != NULL && o->i > 2) {
		return E1("ERR flow priority must be between 0 and 2");
	}
	if ((o = F(q, FF_VALUES)) != NULL && check_values(&o->v, err) != 0) {
		return -1;
	}
	return 0;
}

/* A new record from a create request (state given by the caller). */
static void new_record(struct fctx *c, const struct flow_req *q,
                       struct fsnp_bytes part, struct fsnp_bytes state,
                       struct frec *r)
{
	const struct flow_opt *o;
	struct fsnp_val v;

	memset(r, 0, sizeof *r);
	frec_set_str(r, RS_ID, q->f[FF_ID].t);
	frec_set_str(r, RS_TYPE, q->f[FF_TYPE].t);
	frec_set_str(r, RS_STATE, state);
	frec_set_str(r, RS_PARTITION_KEY, part);
	frec_set_str(r, RS_ROOT_FLOW_ID, q->f[FF_ID].t);
	if ((o = F(q, FF_ROOT_FLOW_ID)) != NULL) {
		frec_set_str(r, RS_ROOT_FLOW_ID, o->t);
	}
	if ((o = F(q, FF_PARENT_FLOW_ID)) != NULL) {
		frec_set_str(r, RS_PARENT_FLOW_ID, o->t);
	}
	if ((o = F(q, FF_CORRELATION_ID)) != NULL) {
		frec_set_str(r, RS_CORRELATION_ID, o->t);
	}
	frec_set_int(r, RI_VERSION, 1);
	frec_set_int(r, RI_ATTEMPTS, 0);
	frec_set_int(r, RI_FENCING_TOKEN, 0);
	frec_set_int(r, RI_CREATED_AT_MS, (int64_t)c->now);
	frec_set_int(r, RI_UPDATED_AT_MS, (int64_t)c->now);
	o = F(q, FF_RUN_AT_MS);
	frec_set_int(r, RI_NEXT_RUN_AT_MS, o ? o->i : (int64_t)c->now);
	frec_set_int(r, RI_LEASE_DEADLINE_MS, 0);
	o = F(q, FF_PRIORITY);
	frec_set_int(r, RI_PRIORITY, o ? o->i : 0);
	o = F(q, FF_RETENTION_TTL_MS);
	frec_set_int(r, RI_RETENTION_TTL_MS, o ? o->i : DEFAULT_RETENTION_MS);
	o = F(q, FF_HISTORY_HOT_MAX_EVENTS);
	frec_set_int(r, RI_HISTORY_HOT_MAX_EVENTS, o ? o->i : 0);
	o = F(q, FF_HISTORY_MAX_EVENTS);
	frec_set_int(r, RI_HISTORY_MAX_EVENTS, o ? o->i : DEFAULT_HISTORY_MAX);
	o = F(q, FF_MAX_ACTIVE_MS);
	if (o != NULL && !o->inf) {
		frec_set_int(r, RI_MAX_ACTIVE_MS, o->i);
	}
	frec_set_int(r, RI_RETRY_FENCING, -1);
	frec_set_int(r, RI_CREATE_DIGEST, (int64_t)create_digest(q));
	if ((o = F(q, FF_PAYLOAD)) != NULL) {
		frec_set_val(r, RV_PAYLOAD, &o->v);
	}
	if ((o = F(q, FF_ATTRIBUTES)) != NULL) {
		v = map_merge(c, NULL, false, NULL, &o->v, NULL);
		frec_set_val(r, RV_ATTRIBUTES, &v);
	}
	if ((o = F(q, FF_STATE_META)) != NULL) {
		v = map_merge(c, NULL, false, NULL, &o->v, &state);
		frec_set_val(r, RV_STATE_META, &v);
	}
	if ((o = F(q, FF_VALUES)) != NULL) {
		store_values(c, r, &o->v);
	}
}

static int op_create(struct fctx *c, const struct flow_req *q,
                     struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_bytes part, state = fb("queued");
	struct frec old, r;
	int rv;

	if (check_create(q, err) != 0 ||
	    req_partition(c, q, q->f[FF_ID].t, &part, err) != 0) {
		return 1;
	}
	if (F(q, FF_STATE) != NULL) {
		state = q->f[FF_STATE].t;
	}
	if (fsnp_bytes_eq(state, "running")) {
		E1("ERR flow running state is only entered by FLOW.CLAIM_DUE");
		return 1;
	}
	if ((rv = frec_load(c, part, q->f[FF_ID].t, &old)) < 0) {
		return -1;
	}
	if (rv == 1) {
		if (F(q, FF_IDEMPOTENT) == NULL || !q->f[FF_IDEMPOTENT].b) {
			E1("ERR flow already exists");
			return 1;
		}
		if (old.i[RI_CREATE_DIGEST] != (int64_t)create_digest(q)) {
			E1("ERR flow idempotency conflict");
			return 1;
		}
		reply_ok(w);
		return 0;
	}
	new_record(c, q, part, state, &r);
	if (frec_terminal_state(state)) {
		frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
		stamp_retention(c, &r, r.i[RI_RETENTION_TTL_MS]);
	}
	frec_history(c, &r, "created", NULL, 0);
	frec_save(c, NULL, &r);
	reply_ok(w);
	return 0;
}

static void lease_token(struct fctx *c, struct frec *r,
                        struct fsnp_bytes worker)
{
	char tail[64];
	int n = snprintf(tail, sizeof tail, ":%llu:%lld",
	                 (unsigned long long)c->now,
	                 (long long)r->i[RI_FENCING_TOKEN]);
	size_t len = worker.len + (size_t)n;
	/* worker then tail, put together before the context keeps a copy:
	 * the copy is of len bytes, more than the worker view holds. */
	uint8_t *buf = store_xmalloc(len);
	struct fsnp_bytes t;

	memcpy(buf, worker.ptr, worker.len);
	memcpy(buf + worker.len, tail, (size_t)n);
	t.ptr = fctx_dup(c, buf, len);
	t.len = len;
	free(buf);
	frec_set_str(r, RS_LEASE_TOKEN, t);
	frec_set_str(r, RS_LEASE_OWNER, worker);
}

static void write_job(struct fsnp_writer *w, const struct frec *r, int mode);

static int op_start_and_claim(struct fctx *c, const struct flow_req *q,
                              struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_bytes part, init;
	struct frec old, r;
	const struct flow_opt *o;
	int64_t lease_ms = DEFAULT_LEASE_MS;
	int rv, jobs = 0;

	if (F(q, FF_IDEMPOTENT) != NULL) {
		E1("ERR flow idempotent start_and_claim is not supported");
		return 1;
	}
	if (F(q, FF_RUN_AT_MS) != NULL) {
		E1("ERR flow run_at_ms is not supported by start_and_claim");
		return 1;
	}
	if (check_create(q, err) != 0 ||
	    nonempty(q, FF_INITIAL_STATE, err) != 0 ||
	    nonempty(q, FF_WORKER, err) != 0 ||
	    req_partition(c, q, q->f[FF_ID].t, &part, err) != 0) {
		return 1;
	}
	init = q->f[FF_INITIAL_STATE].t;
	if (fsnp_bytes_eq(init, "running") || frec_terminal_state(init)) {
		E1("ERR flow initial_state cannot be running or terminal");
		return 1;
	}
	if (opt_lease_ms(q, &lease_ms, err) != 0) {
		return 1;
	}
	if ((o = F(q, FF_RETURN)) != NULL) {
		if (fsnp_bytes_eq(o->t, "jobs_compact") ||
		    fsnp_bytes_eq(o->t, "JOBS_COMPACT")) {
			jobs = 1;
		} else if (!fsnp_bytes_eq(o->t, "record")) {
			E1("ERR flow start_and_claim return must be record or "
			   "jobs_compact");
			return 1;
		}
	}
	if ((rv = frec_load(c, part, q->f[FF_ID].t, &old)) < 0) {
		return -1;
	}
	if (rv == 1) {
		E1("ERR flow already exists");
		return 1;
	}
	new_record(c, q, part, fb("running"), &r);
	frec_set_str(&r, RS_RUN_STATE, init);
	frec_set_int(&r, RI_ATTEMPTS, 1);
	frec_set_int(&r, RI_FENCING_TOKEN, 1);
	frec_set_int(&r, RI_LEASE_DEADLINE_MS,
	             cap_maxi(c->now + (uint64_t)lease_ms));
	frec_set_int(&r, RI_NEXT_RUN_AT_MS, r.i[RI_LEASE_DEADLINE_MS]);
	lease_token(c, &r, q->f[FF_WORKER].t);
	frec_history(c, &r, "created", NULL, 0);
	frec_save(c, NULL, &r);
	if (jobs) {
		write_job(w, &r, 2);
	} else {
		frec_write_public(w, &r, false, 0, NULL);
	}
	return 0;
}

/* --- GET ------------------------------------------------------------------ */

static int op_get(struct fctx *c, const struct flow_req *q,
                  struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o;
	const struct fsnp_val *want = NULL;
	struct fsnp_val values;
	bool payload = false;
	uint64_t max = 0;
	struct frec r;
	int rv;

	if ((o = F(q, FF_PAYLOAD)) != NULL) {
		if (fsnp_val_bool(&o->v, &payload) != 0) {
			E1("ERR flow payload must be a boolean");
			return 1;
		}
	}
	if ((o = F(q, FF_FULL)) != NULL && o->b) {
		payload = true;
	}
	if ((o = F(q, FF_PAYLOAD_MAX_BYTES)) != NULL) {
		if (o->i > PAYLOAD_MAX_BYTES) {
			E1("ERR flow payload_max_bytes exceeds maximum %d",
			   PAYLOAD_MAX_BYTES);
			return 1;
		}
		max = (uint64_t)o->i;
	}
	if ((o = F(q, FF_RETURN)) != NULL && !fsnp_bytes_eq(o->t, "meta")) {
		E1("ERR flow return option is not supported");
		return 1;
	}
	if ((o = F(q, FF_VALUES)) != NULL) {
		struct fsnp_iter it;
		struct fsnp_val e;
		bool ok = o->v.tag == FSNP_TRUE || o->v.tag == FSNP_FALSE ||
		          (o->v.tag == FSNP_BIN && o->v.as.bin.len > 0) ||
		          o->v.tag == FSNP_ARRAY;
		fsnp_iter_init(&it, &o->v);
		while (ok && o->v.tag == FSNP_ARRAY &&
		       fsnp_iter_next(&it, NULL, &e)) {
			ok = e.tag == FSNP_BIN && e.as.bin.len > 0;
		}
		if (!ok) {
			E1("ERR flow values must be true, false, a name, or a "
			   "name list");
			return 1;
		}
		want = o->v.tag == FSNP_FALSE ? NULL : &o->v;
	}
	rv = load(c, q, &r, err);
	if (rv < 0) {
		return -1;
	}
	if (rv == 0) {
		if (strcmp(err->msg, "ERR flow not found") != 0) {
			return 1;
		}
		fsnp_w_nil(w);
		return 0;
	}
	if (want != NULL) {
		struct wbuf vb;
		struct fsnp_writer vw;
		struct fsnp_iter it;
		struct fsnp_bytes name;
		struct fsnp_val ref, v;
		const uint8_t *p;
		size_t n;

		wbuf_init(&vb);
		fsnp_w_init(&vw, &vb);
		fsnp_w_map_begin(&vw);
		fsnp_iter_init(&it, &r.v[RV_VALUE_REFS]);
		while (r.v_set[RV_VALUE_REFS] &&
		       fsnp_iter_next(&it, &name, &ref)) {
			if (ref.tag != FSNP_BIN ||
			    (want->tag == FSNP_BIN &&
			     bytes_cmp(want->as.bin, name) != 0) ||
			    (want->tag == FSNP_ARRAY && !in_list(want, name))) {
				continue;
			}
			rv = get_value(c, ref.as.bin, &v);
			if (rv < 0) {
				wbuf_free(&vb);
				return -1;
			}
			fsnp_w_key_bin(&vw, name.ptr, name.len);
			if (rv == 1) {
				fsnp_w_val(&vw, &v);
			} else {
				fsnp_w_nil(&vw);
			}
		}
		fsnp_w_map_end(&vw);
		(void)fsnp_w_finish(&vw);
		n = vb.len;
		p = fctx_keep(c, &vb);
		(void)fsnp_value_decode(p, n, NULL, &values, NULL);
	}
	frec_write_public(w, &r, payload, max, want ? &values : NULL);
	return 0;
}

/* --- Claims --------------------------------------------------------------- */

struct cand {
	uint8_t prio_inv; /* 255 - priority */
	uint64_t next;
	struct fsnp_bytes part;
	struct fsnp_bytes id;
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

static void cands_add(struct fctx *c, struct cands *cs, uint8_t prio_inv,
                      uint64_t next, struct fsnp_bytes part,
                      struct fsnp_bytes id)
{
	struct cand *x;

	if (cs->n == cs->cap) {
		cs->cap = cs->cap ? cs->cap * 2 : 32;
		cs->v = store_xrealloc(cs->v, cs->cap * sizeof *cs->v);
	}
	x = &cs->v[cs->n++];
	x->prio_inv = prio_inv;
	x->next = next;
	x->part.ptr = fctx_dup(c, part.ptr, part.len);
	x->part.len = part.len;
	x->id.ptr = fctx_dup(c, id.ptr, id.len);
	x->id.len = id.len;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	int r;

	if (a->prio_inv != b->prio_inv) {
		return a->prio_inv < b->prio_inv ? -1 : 1;
	}
	if (a->next != b->next) {
		return a->next < b->next ? -1 : 1;
	}
	if ((r = bytes_cmp(a->part, b->part)) != 0) {
		return r;
	}
	return bytes_cmp(a->id, b->id);
}

/* What a claim scan takes: states (NULL = every state but running, or
 * only running with `running`), priority filter (-1 = any). */
struct scan {
	const struct fsnp_val *states; /* list */
	struct fsnp_bytes one_state;   /* when set: only this state */
	bool has_one;
	bool running; /* true: running flows (expired leases) only */
	int priority;
	size_t per_group; /* candidates per (state, priority) at most */
};

static bool scan_state_ok(const struct scan *s, struct fsnp_bytes st)
{
	bool run = fsnp_bytes_eq(st, "running");

	if (s->running) {
		return run;
	}
	if (run) {
		return false;
	}
	if (s->has_one) {
		return bytes_cmp(st, s->one_state) == 0;
	}
	if (s->states != NULL) {
		return in_list(s->states, st);
	}
	return true;
}

/* Collects due entries of the keys under `prefix` whose rest is (state,
 * prio, next, id), or with `any_part` (part, type, state, ...) filtered
 * to `type`. */

struct claim_args {
	struct fsnp_bytes type;
	struct fsnp_bytes worker;
	int64_t lease_ms;
	size_t limit;
	int priority;
	bool reclaim;
	int64_t ratio;
	bool only_reclaim;
	const struct fsnp_val *states;
	struct fsnp_bytes one_state;
	bool has_one;
	int ret; /* 0 records, 1 jobs, 2 jobs_compact, 3 _state, 4 _attrs,
	          * 5 _state_attrs */
	bool payload;
	uint64_t max_bytes;
	/* partitions: mode 0 auto buckets, 1 any, 2 list (or one) */
	int pmode;
	const struct fsnp_val *plist;
	struct fsnp_bytes pone;
};

/* A due group to scan: its due key prefix (up to the priority byte) and
 * its floor. */
struct dgroup {
	struct fsnp_bytes prefix;
	uint64_t floor;
};

struct dgroups {
	struct dgroup *v;
	size_t n, cap;
};

/* Whether a claim looks at partition `part`. */
static bool part_ok(const struct claim_args *a, struct fsnp_bytes part)
{
	unsigned b;

	switch (a->pmode) {
	case 0:
		return flow_route_is_auto(part.ptr, part.len, &b);
	case 1:
		return true;
	default:
		return a->plist != NULL ? in_list(a->plist, part)
		                        : bytes_cmp(part, a->pone) == 0;
	}
}

/* The earliest summary floor (K_FLOW_AUTOFLOOR) of the claim's type, per
 * priority (at[2 - p]; UINT64_MAX none), over the states the scans take.
 * *known: the type's summary exists (else only a full walk can tell). */
static int agg_read(struct fctx *c, const struct claim_args *a,
                    const struct scan *const *ss, size_t n, uint64_t at[3],
                    bool *known)
{
	struct store_tx_iter *it;
	struct sbuf pfx;
	bool valid;

	at[0] = at[1] = at[2] = UINT64_MAX;
	*known = false;
	sbuf_init(&pfx);
	sbuf_u32(&pfx, c->group);
	sbuf_u8(&pfx, K_FLOW_AUTOFLOOR);
	sbuf_lbytes(&pfx, a->type.ptr, a->type.len);
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = pfx.len;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes st;
		int prio;

		if (!fkey_part(k, kl, &off, &st) || off + 1 != kl || vl != 8) {
			continue;
		}
		prio = 255 - k[off];
		if (st.len == 0) {
			*known = true; /* the marker */
			continue;
		}
		if (prio < 0 || prio > 2) {
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			if (scan_state_ok(ss[i], st) &&
			    (ss[i]->priority < 0 || ss[i]->priority == prio) &&
			    be_get64(v) < at[2 - prio]) {
				at[2 - prio] = be_get64(v);
			}
		}
	}
	sbuf_free(&pfx);
	return store_tx_iter_close(it);
}

/* Whether the type's floors were summed up (the marker is there). */
static bool agg_marked(struct fctx *c, const struct claim_args *a)
{
	struct sbuf v;
	int rv;
	sbuf_init(&v);
	fkey_autofloor(&c->key, c->group, a->type, fb(""), 0);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
	sbuf_free(&v);
	return rv == 1;
}

/* Sums the type's auto-partition floors up again (after a claim that
 * came short: its floors went up or away; or the first time): one summary
 * floor per (state, priority), the minimum of its partitions' floors, and
 * the marker. */
static int agg_refresh(struct fctx *c, const struct claim_args *a)
{
	struct store_tx_iter *it;
	struct sbuf pfx, k2;
	struct sum {
		struct fsnp_bytes state;
		int prio;
		uint64_t at;
	} *sums = NULL;
	size_t nsums = 0;
	struct fsnp_bytes *old = NULL;
	size_t nold = 0;
	bool valid;
	int rv;

	sbuf_init(&pfx);
	sbuf_init(&k2);
	sbuf_u32(&pfx, c->group);
	sbuf_u8(&pfx, K_FLOW_FLOOR);
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = 5, i;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes part, ty, st;
		unsigned bucket;

		if (!fkey_part(k, kl, &off, &part) ||
		    !fkey_part(k, kl, &off, &ty) ||
		    !fkey_part(k, kl, &off, &st) || off + 1 != kl || vl != 8 ||
		    bytes_cmp(ty, a->type) != 0 ||
		    !flow_route_is_auto(part.ptr, part.len, &bucket)) {
			continue;
		}
		for (i = 0; i < nsums; i++) {
			if (sums[i].prio == 255 - k[off] &&
			    bytes_cmp(sums[i].state, st) == 0) {
				break;
			}
		}
		if (i == nsums) {
			sums = store_xrealloc(sums, (nsums + 1) * sizeof *sums);
			sums[i].state.ptr = fctx_dup(c, st.ptr, st.len);
			sums[i].state.len = st.len;
			sums[i].prio = 255 - k[off];
			sums[i].at = UINT64_MAX;
			nsums++;
		}
		if (be_get64(v) < sums[i].at) {
			sums[i].at = be_get64(v);
		}
	}
	rv = store_tx_iter_close(it);
	/* The summary keys there are now, to replace. */
	sbuf_reset(&pfx);
	sbuf_u32(&pfx, c->group);
	sbuf_u8(&pfx, K_FLOW_AUTOFLOOR);
	sbuf_lbytes(&pfx, a->type.ptr, a->type.len);
	if (rv == 0) {
		it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
		valid = store_tx_iter_seek(it, NULL, 0);
		for (; valid;
		     store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
			size_t kl;
			const uint8_t *k = store_tx_iter_key(it, &kl);
			old = store_xrealloc(old, (nold + 1) * sizeof *old);
			old[nold].ptr = fctx_dup(c, k, kl);
			old[nold].len = kl;
			nold++;
		}
		rv = store_tx_iter_close(it);
	}
	if (rv == 0) {
		uint8_t b[8];
		for (size_t i = 0; i < nold; i++) {
			store_tx_del(c->tx, old[i].ptr, old[i].len);
		}
		for (size_t i = 0; i < nsums; i++) {
			fkey_autofloor(&k2, c->group, a->type, sums[i].state,
			               sums[i].prio);
			be_put64(b, sums[i].at);
			store_tx_put(c->tx, k2.p, k2.len, b, 8);
		}
		fkey_autofloor(&k2, c->group, a->type, fb(""), 0);
		be_put64(b, UINT64_MAX);
		store_tx_put(c->tx, k2.p, k2.len, b, 8);
	}
	free(sums);
	free(old);
	sbuf_free(&pfx);
	sbuf_free(&k2);
	return rv;
}

/* The due groups each of the `n` scans of a claim looks at (into out[i]
 * for ss[i]), from the floors (every group with a due entry has one), in
 * one walk. */
static int find_groups(struct fctx *c, const struct claim_args *a,
                       const struct scan *const *ss, struct dgroups *out,
                       size_t n)
{
	struct store_tx_iter *it;
	struct sbuf pfx;
	bool valid;

	if (a->pmode == 0) {
		/* Auto partitions: the type's summary floors tell whether
		 * any of them can have due work before the walk of every
		 * partition's floors. */
		uint64_t at[3];
		bool known;
		if (agg_read(c, a, ss, n, at, &known) != 0) {
			return -1;
		}
		if (known && at[0] > c->now && at[1] > c->now &&
		    at[2] > c->now) {
			return 0;
		}
	}
	sbuf_init(&pfx);
	if (a->pmode == 2 && a->plist == NULL) {
		/* One partition: only its floors of the type can match, and
		 * they sort together; the others (and their deleted versions)
		 * are not walked. */
		fkey_due_prefix(&pfx, c->group, a->pone, a->type);
		pfx.p[4] = K_FLOW_FLOOR;
	} else {
		sbuf_u32(&pfx, c->group);
		sbuf_u8(&pfx, K_FLOW_FLOOR);
	}
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = 5;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes part, ty, st;
		uint8_t *p;

		if (!fkey_part(k, kl, &off, &part) ||
		    !fkey_part(k, kl, &off, &ty) ||
		    !fkey_part(k, kl, &off, &st) || off + 1 != kl || vl != 8) {
			continue;
		}
		if (bytes_cmp(ty, a->type) != 0 || !part_ok(a, part) ||
		    be_get64(v) > c->now) {
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			const struct scan *s = ss[i];
			struct dgroups *o = &out[i];

			if (!scan_state_ok(s, st) ||
			    (s->priority >= 0 && k[off] != 255 - s->priority)) {
				continue;
			}
			if (o->n == o->cap) {
				o->cap = o->cap ? o->cap * 2 : 16;
				o->v =
				    store_xrealloc(o->v, o->cap * sizeof *o->v);
			}
			p = (uint8_t *)fctx_dup(c, k, kl);
			p[4] = K_FLOW_DUE;
			o->v[o->n].prefix.ptr = p;
			o->v[o->n].prefix.len = kl;
			o->v[o->n].floor = be_get64(v);
			o->n++;
		}
	}
	sbuf_free(&pfx);
	return store_tx_iter_close(it);
}

/* Collects the due entries of the groups (at most s->per_group each),
 * from each group's floor, and then raises the floors to the first entry
 * found (or drops those of empty groups): the tombstones of claimed
 * entries ahead of them are not walked again. */
static int scan_groups(struct fctx *c, const struct dgroups *gs,
                       const struct scan *s, struct cands *out)
{
	struct store_tx_iter *it;
	struct sbuf pfx, seek;
	uint64_t *first;
	bool *empty;
	int rv;

	if (gs->n == 0) {
		return 0; /* no iterator to open (no expired lease, most often)
		           */
	}
	first = calloc(gs->n, sizeof *first);
	empty = calloc(gs->n, sizeof *empty);
	sbuf_init(&pfx);
	sbuf_init(&seek);
	sbuf_u32(&pfx, c->group);
	sbuf_u8(&pfx, K_FLOW_DUE);
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	for (size_t g = 0; g < gs->n; g++) {
		const struct dgroup *d = &gs->v[g];
		size_t taken = 0;
		bool valid;

		sbuf_reset(&seek);
		sbuf_add(&seek, d->prefix.ptr, d->prefix.len);
		sbuf_u64(&seek, d->floor);
		/* The walk stops at the group's end, not past the deleted
		 * due rows of the groups after it. */
		store_tx_iter_narrow(it, d->prefix.ptr, d->prefix.len);
		valid = store_tx_iter_seek(it, seek.p, seek.len);
		empty[g] = true;
		for (; valid;
		     store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
			size_t kl, off = d->prefix.len;
			const uint8_t *k = store_tx_iter_key(it, &kl);
			struct fsnp_bytes part, id;
			size_t o2 = 5;
			uint64_t next;

			if (kl < off + 8 ||
			    memcmp(k, d->prefix.ptr, d->prefix.len) != 0) {
				break;
			}
			next = be_get64(k + off);
			off += 8;
			if (empty[g]) {
				empty[g] = false;
				first[g] = next;
			}
			if (next > c->now || taken >= s->per_group ||
			    !fkey_part(k, kl, &off, &id) ||
			    !fkey_part(k, kl, &o2, &part)) {
				break;
			}
			cands_add(c, out, k[d->prefix.len - 1], next, part, id);
			/* A full group stops here: stepping on would walk the
			 * deleted due rows after it (the running group's, most
			 * often) only to stop at the limit. */
			if (++taken >= s->per_group) {
				break;
			}
		}
	}
	rv = store_tx_iter_close(it);
	for (size_t g = 0; rv == 0 && c->write && g < gs->n; g++) {
		const struct dgroup *d = &gs->v[g];
		uint8_t b[8];

		sbuf_reset(&seek);
		sbuf_add(&seek, d->prefix.ptr, d->prefix.len);
		seek.p[4] = K_FLOW_FLOOR;
		if (empty[g]) {
			store_tx_del(c->tx, seek.p, seek.len);
		} else if (first[g] > d->floor) {
			be_put64(b, first[g]);
			store_tx_put(c->tx, seek.p, seek.len, b, 8);
		}
	}
	free(first);
	free(empty);
	sbuf_free(&pfx);
	sbuf_free(&seek);
	return rv;
}

/* The candidates of scan `s` in groups `gs`, in claim order. */
static int collect(struct fctx *c, const struct dgroups *gs,
                   const struct scan *s, struct cands *out)
{
	int rv = scan_groups(c, gs, s, out);

	if (rv == 0 && out->n > 1) {
		qsort(out->v, out->n, sizeof *out->v, cand_cmp);
	}
	return rv;
}

static void write_job(struct fsnp_writer *w, const struct frec *r, int mode)
{
	if (mode == 1) {
		fsnp_w_map_begin(w);
		static const enum rec_str ks[] = {
		    RS_ID,        RS_TYPE,          RS_STATE,
		    RS_RUN_STATE, RS_PARTITION_KEY, RS_LEASE_TOKEN};
		static const char *const kn[] = {
		    "id",        "type",          "state",
		    "run_state", "partition_key", "lease_token"};
		for (size_t i = 0; i < 6; i++) {
			fsnp_w_key(w, kn[i]);
			fsnp_w_bin(w, r->s[ks[i]].ptr, r->s[ks[i]].len);
		}
		fsnp_w_key(w, "fencing_token");
		fsnp_w_i64(w, r->i[RI_FENCING_TOKEN]);
		fsnp_w_map_end(w);
		return;
	}
	fsnp_w_array_begin(w);
	fsnp_w_bin(w, r->s[RS_ID].ptr, r->s[RS_ID].len);
	fsnp_w_bin(w, r->s[RS_PARTITION_KEY].ptr, r->s[RS_PARTITION_KEY].len);
	fsnp_w_bin(w, r->s[RS_LEASE_TOKEN].ptr, r->s[RS_LEASE_TOKEN].len);
	fsnp_w_i64(w, r->i[RI_FENCING_TOKEN]);
	if (mode == 3 || mode == 5) {
		fsnp_w_bin(w, r->s[RS_RUN_STATE].ptr, r->s[RS_RUN_STATE].len);
	}
	if (mode == 4 || mode == 5) {
		if (r->v_set[RV_ATTRIBUTES]) {
			fsnp_w_val(w, &r->v[RV_ATTRIBUTES]);
		} else {
			fsnp_w_map_begin(w);
			fsnp_w_map_end(w);
		}
	}
	fsnp_w_array_end(w);
}

/* Claims candidate `x` if it is still what the index says. 1 claimed, 0
 * skipped, -1 failure. */
static int claim_one(struct fctx *c, const struct claim_args *a,
                     const struct cand *x, bool reclaim, struct fsnp_writer *w)
{
	struct frec old, r;
	int rv = frec_load(c, x->part, x->id, &old);

	if (rv <= 0) {
		return rv;
	}
	r = old;
	if (!frec_eq(&r, RS_TYPE, a->type) || frec_is_terminal(&r) ||
	    !r.i_set[RI_NEXT_RUN_AT_MS] ||
	    r.i[RI_NEXT_RUN_AT_MS] > (int64_t)c->now) {
		return 0;
	}
	if (reclaim) {
		if (!frec_is(&r, RS_STATE, "running")) {
			return 0;
		}
		if (!r.s_set[RS_RUN_STATE]) {
			frec_set_cstr(&r, RS_RUN_STATE, "queued");
		}
		if ((a->has_one && !frec_eq(&r, RS_RUN_STATE, a->one_state)) ||
		    (a->states != NULL &&
		     !in_list(a->states, r.s[RS_RUN_STATE]))) {
			return 0;
		}
	} else {
		if (frec_is(&r, RS_STATE, "running")) {
			return 0;
		}
		frec_set_str(&r, RS_RUN_STATE, r.s[RS_STATE]);
	}
	if (c->peek) {
		/* What it would claim: [priority, next_run_at_ms]. */
		fsnp_w_array_begin(w);
		fsnp_w_i64(w, r.i_set[RI_PRIORITY] ? r.i[RI_PRIORITY] : 0);
		fsnp_w_i64(w, r.i[RI_NEXT_RUN_AT_MS]);
		fsnp_w_array_end(w);
		return 1;
	}
	frec_set_cstr(&r, RS_STATE, "running");
	frec_set_int(&r, RI_FENCING_TOKEN, r.i[RI_FENCING_TOKEN] + 1);
	bump(c, &r);
	frec_set_int(&r, RI_LEASE_DEADLINE_MS,
	             cap_maxi(c->now + (uint64_t)a->lease_ms));
	frec_set_int(&r, RI_NEXT_RUN_AT_MS, r.i[RI_LEASE_DEADLINE_MS]);
	lease_token(c, &r, a->worker);
	frec_history(c, &r, "claimed", NULL, 0);
	frec_save(c, &old, &r);
	if (a->ret == 0) {
		frec_write_public(w, &r, a->payload, a->max_bytes, NULL);
	} else {
		write_job(w, &r, a->ret == 1 ? 1 : a->ret);
	}
	return 1;
}

static int parse_claim(struct fctx *c, const struct flow_req *q,
                       struct claim_args *a, struct flow_err *err)
{
	const struct flow_opt *o;
	static const char *const rets[] = {"records",
	                                   "jobs",
	                                   "jobs_compact",
	                                   "jobs_compact_state",
	                                   "jobs_compact_attrs",
	                                   "jobs_compact_state_attrs"};

	(void)c;
	memset(a, 0, sizeof *a);
	if (nonempty(q, FF_TYPE, err) != 0 || nonempty(q, FF_WORKER, err)) {
		return -1;
	}
	a->type = q->f[FF_TYPE].t;
	a->worker = q->f[FF_WORKER].t;
	a->lease_ms = DEFAULT_LEASE_MS;
	a->limit = 1;
	a->priority = -1;
	a->reclaim = true;
	a->ratio = 25;
	a->payload = true;
	if ((o = F(q, FF_LEASE_MS)) != NULL) {
		if (o->i <= 0) {
			return E1("ERR flow lease_ms must be a positive "
			          "integer");
		}
		a->lease_ms = o->i;
	}
	if ((o = F(q, FF_LIMIT)) != NULL) {
		if (o->i > CLAIM_MAX) {
			return E1("ERR flow limit exceeds maximum 1000");
		}
		if (o->i < 1) {
			return E1("ERR flow limit must be a positive integer");
		}
		a->limit = (size_t)o->i;
	}
	if ((o = F(q, FF_PRIORITY)) != NULL) {
		if (o->i > 2) {
			return E1("ERR flow priority must be between 0 and 2");
		}
		a->priority = (int)o->i;
	}
	if ((o = F(q, FF_RECLAIM_EXPIRED)) != NULL) {
		a->reclaim = o->b;
	}
	if ((o = F(q, FF_RECLAIM_RATIO)) != NULL) {
		if (o->i > 100) {
			return E1("ERR flow reclaim_ratio must be an integer "
			          "between 0 and 100");
		}
		a->ratio = o->i;
	}
	if ((o = F(q, FF_BLOCK_MS)) != NULL && o->i > 4294967295LL) {
		return E1("ERR flow block_ms exceeds maximum 4294967295");
	}
	if (F(q, FF_STATE) != NULL && F(q, FF_STATES) != NULL) {
		return E1("ERR flow state and states are mutually exclusive");
	}
	if ((o = F(q, FF_STATE)) != NULL) {
		if (o->t.len == 0) {
			return E1("ERR flow state must be a non-empty string");
		}
		if (!fsnp_bytes_eq(o->t, "any") &&
		    !fsnp_bytes_eq(o->t, "ANY")) {
			a->one_state = o->t;
			a->has_one = true;
		}
	}
	if ((o = F(q, FF_STATES)) != NULL) {
		struct fsnp_iter it;
		struct fsnp_val e;
		bool any = false, other = false;
		if (o->v.as.count == 0) {
			return E1("ERR flow states must be a non-empty list");
		}
		fsnp_iter_init(&it, &o->v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (e.tag != FSNP_BIN || e.as.bin.len == 0) {
				return E1("ERR flow states must be a non-empty "
				          "list");
			}
			if (fsnp_bytes_eq(e.as.bin, "any") ||
			    fsnp_bytes_eq(e.as.bin, "ANY")) {
				any = true;
			} else {
				other = true;
			}
		}
		if (any && other) {
			return E1("ERR flow STATE ANY cannot be mixed with "
			          "explicit states");
		}
		if (!any) {
			a->states = &o->v;
		}
	}
	if (F(q, FF_PARTITION_KEY) != NULL && F(q, FF_PARTITION_KEYS) != NULL) {
		return E1("ERR flow partition_key and partition_keys are "
		          "mutually exclusive");
	}
	if ((o = F(q, FF_PARTITION_KEY)) != NULL) {
		if (o->t.len == 0) {
			return E1("ERR flow partition_key must be a non-empty "
			          "string or :global");
		}
		if (fsnp_bytes_eq(o->t, "ANY") || fsnp_bytes_eq(o->t, "any")) {
			a->pmode = 1;
		} else if (fsnp_bytes_eq(o->t, "AUTO") ||
		           fsnp_bytes_eq(o->t, "auto")) {
			a->pmode = 0;
		} else {
			a->pmode = 2;
			a->pone = o->t;
		}
	}
	if ((o = F(q, FF_PARTITION_KEYS)) != NULL) {
		struct fsnp_iter it;
		struct fsnp_val e;
		if (o->v.as.count == 0) {
			return E1("ERR flow partition_keys must be a non-empty "
			          "list");
		}
		fsnp_iter_init(&it, &o->v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (e.tag != FSNP_BIN || e.as.bin.len == 0) {
				return E1("ERR flow partition_keys must be a "
				          "non-empty list");
			}
		}
		a->pmode = 2;
		a->plist = &o->v;
	}
	if ((o = F(q, FF_RETURN)) != NULL) {
		size_t i;
		for (i = 0; i < 6; i++) {
			size_t n = strlen(rets[i]);
			if (o->t.len != n) {
				continue;
			}
			size_t j;
			for (j = 0; j < n; j++) {
				char ch = (char)o->t.ptr[j];
				if (ch >= 'A' && ch <= 'Z') {
					ch = (char)(ch - 'A' + 'a');
				}
				if (ch != rets[i][j]) {
					break;
				}
			}
			if (j == n) {
				break;
			}
		}
		if (i == 6) {
			return E1("ERR flow claim return must be records, "
			          "jobs, jobs_compact, jobs_compact_state, "
			          "jobs_compact_attrs, or "
			          "jobs_compact_state_attrs");
		}
		a->ret = (int)i;
	}
	if ((o = F(q, FF_PAYLOAD)) != NULL) {
		if (fsnp_val_bool(&o->v, &a->payload) != 0) {
			return E1("ERR flow payload must be a boolean");
		}
	}
	if ((o = F(q, FF_PAYLOAD_MAX_BYTES)) != NULL) {
		if (o->i > PAYLOAD_MAX_BYTES) {
			return E1("ERR flow payload_max_bytes exceeds maximum "
			          "%d",
			          PAYLOAD_MAX_BYTES);
		}
		a->max_bytes = (uint64_t)o->i;
	}
	if (q->opcode == FSNP_OP_FLOW_RECLAIM) {
		a->only_reclaim = true;
		a->reclaim = false;
	}
	return 0;
}

static int take(struct fctx *c, const struct claim_args *a,
                const struct cands *cs, size_t *pos, size_t want, bool reclaim,
                size_t *got, struct fsnp_writer *w)
{
	size_t n = 0;

	while (n < want && *pos < cs->n) {
		int rv = claim_one(c, a, &cs->v[(*pos)++], reclaim, w);
		if (rv < 0) {
			return -1;
		}
		n += (size_t)rv;
	}
	*got += n;
	return 0;
}

static int op_claim(struct fctx *c, const struct flow_req *q,
                    struct fsnp_writer *w, struct flow_err *err)
{
	struct claim_args a;
	struct cands norm = {0}, rec = {0};
	struct scan sn, sr;
	const struct scan *ss[2];
	struct dgroups gs[2] = {{0}, {0}};
	size_t got = 0, pn = 0, pr = 0, quota = 0, ns = 0, in = 0, ir = 0;
	int rv = -1;

	if (parse_claim(c, q, &a, err) != 0) {
		return 1;
	}
	memset(&sn, 0, sizeof sn);
	sn.priority = a.priority;
	sn.per_group = a.limit;
	sn.states = a.states;
	sn.one_state = a.one_state;
	sn.has_one = a.has_one;
	memset(&sr, 0, sizeof sr);
	sr.priority = a.priority;
	sr.running = true;
	/* Reclaims are filtered by run state when claimed: allow a few more
	 * than the limit in the scan. */
	sr.per_group = a.limit * 2;
	if (!a.only_reclaim) {
		in = ns;
		ss[ns++] = &sn;
	}
	if (a.reclaim || a.only_reclaim) {
		ir = ns;
		ss[ns++] = &sr;
	}
	if (c->peek && a.pmode == 0 && ns > 0) {
		/* A peek over the auto partitions answers from the summary
		 * floors when they are known: [priority, floor, -1] for each
		 * priority with work due, as many as the group has. */
		uint64_t at[3];
		bool known;
		if (agg_read(c, &a, ss, ns, at, &known) != 0) {
			goto out;
		}
		if (known) {
			fsnp_w_array_begin(w);
			for (int p = 2; p >= 0; p--) {
				if (at[2 - p] <= c->now) {
					fsnp_w_array_begin(w);
					fsnp_w_i64(w, p);
					fsnp_w_i64(w, (int64_t)at[2 - p]);
					fsnp_w_i64(w, -1);
					fsnp_w_array_end(w);
				}
			}
			fsnp_w_array_end(w);
			rv = 0;
			goto out;
		}
	}
	/* The scans' groups differ (running or not), so those found before
	 * the first scan raises its floors are those it would leave. */
	if (ns > 0 && find_groups(c, &a, ss, gs, ns) != 0) {
		goto out;
	}
	if (!a.only_reclaim && collect(c, &gs[in], &sn, &norm) != 0) {
		goto out;
	}
	if ((a.reclaim || a.only_reclaim) &&
	    collect(c, &gs[ir], &sr, &rec) != 0) {
		goto out;
	}
	if (a.reclaim && a.limit > 1) {
		quota = (a.limit * (size_t)a.ratio + 99) / 100;
	}
	fsnp_w_array_begin(w);
	if (take(c, &a, &rec, &pr, a.only_reclaim ? a.limit : quota, true, &got,
	         w) != 0 ||
	    take(c, &a, &norm, &pn, a.limit - got, false, &got, w) != 0 ||
	    take(c, &a, &rec, &pr, a.limit - got, true, &got, w) != 0) {
		goto out;
	}
	if (a.pmode == 0 && c->write && (got < a.limit || !agg_marked(c, &a)) &&
	    agg_refresh(c, &a) != 0) {
		goto out;
	}
	fsnp_w_array_end(w);
	rv = 0;
out:
	free(gs[0].v);
	free(gs[1].v);
	free(norm.v);
	free(rec.v);
	return rv;
}

int flow_op_next_due(struct fctx *c, const struct flow_req *q, uint64_t *at)
{
	struct claim_args a;
	struct flow_err err;
	struct scan sn, sr;
	struct store_tx_iter *it;
	struct sbuf pfx;
	bool valid;

	*at = UINT64_MAX;
	if (parse_claim(c, q, &a, &err) != 0) {
		return 0; /* the claim itself answers the error */
	}
	memset(&sn, 0, sizeof sn);
	sn.priority = a.priority;
	sn.states = a.states;
	sn.one_state = a.one_state;
	sn.has_one = a.has_one;
	memset(&sr, 0, sizeof sr);
	sr.priority = a.priority;
	sr.running = true;
	if (a.pmode == 0) {
		/* Auto partitions: the type's summary floors, once known. */
		const struct scan *ss[2];
		size_t n = 0;
		uint64_t agg[3];
		bool known;
		if (!a.only_reclaim) {
			ss[n++] = &sn;
		}
		if (a.reclaim || a.only_reclaim) {
			ss[n++] = &sr;
		}
		if (agg_read(c, &a, ss, n, agg, &known) != 0) {
			return -1;
		}
		if (known) {
			for (int i = 0; i < 3; i++) {
				*at = agg[i] < *at ? agg[i] : *at;
			}
			return 0;
		}
	}
	sbuf_init(&pfx);
	if (a.pmode == 2 && a.plist == NULL) {
		fkey_due_prefix(&pfx, c->group, a.pone, a.type);
		pfx.p[4] = K_FLOW_FLOOR;
	} else {
		sbuf_u32(&pfx, c->group);
		sbuf_u8(&pfx, K_FLOW_FLOOR);
	}
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = 5;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes part, ty, st;
		bool want;

		if (!fkey_part(k, kl, &off, &part) ||
		    !fkey_part(k, kl, &off, &ty) ||
		    !fkey_part(k, kl, &off, &st) || off + 1 != kl || vl != 8 ||
		    bytes_cmp(ty, a.type) != 0 || !part_ok(&a, part) ||
		    (a.priority >= 0 && k[off] != 255 - a.priority)) {
			continue;
		}
		want =
		    (!a.only_reclaim && scan_state_ok(&sn, st)) ||
		    ((a.reclaim || a.only_reclaim) && scan_state_ok(&sr, st));
		if (want && be_get64(v) < *at) {
			*at = be_get64(v);
		}
	}
	sbuf_free(&pfx);
	return store_tx_iter_close(it);
}

/* --- Lease-holding mutations ---------------------------------------------- */

#ifdef LS_FAULT_HOOKS
/* ---- Fault hook (lodestone-faulty only; never in the normal build) ----
 *
 * jepsen/'s proof that the flow checker catches a broken guarantee. With
 * LODESTONE_FAULT=flow-no-fencing the lease-holding mutations (complete,
 * fail, retry, extend, ...) skip the lease and fencing token check: any
 * running flow takes them, whoever holds its lease. */
static bool fault_no_fencing(void)
{
	static int mode = -1;

	if (mode < 0) {
		const char *v = getenv("LODESTONE_FAULT");
		mode = v != NULL && strcmp(v, "flow-no-fencing") == 0;
		if (mode) {
			fprintf(stderr, "lodestone: FAULT HOOK flow-no-fencing "
			                "ACTIVE: this node breaks its "
			                "guarantees on purpose\n");
		}
	}
	return mode == 1;
}

void flow_op_fault_init(void)
{
	(void)fault_no_fencing();
}
#endif /* LS_FAULT_HOOKS */

/* running, same lease token and same fencing token */
static bool lease_ok(const struct frec *r, const struct flow_req *q)
{
	const struct flow_opt *lt = F(q, FF_LEASE_TOKEN);

#ifdef LS_FAULT_HOOKS
	if (fault_no_fencing()) {
		return frec_is(r, RS_STATE, "running");
	}
#endif
	return frec_is(r, RS_STATE, "running") && lt != NULL &&
	       frec_eq(r, RS_LEASE_TOKEN, lt->t) &&
	       F(q, FF_FENCING_TOKEN) != NULL &&
	       r->i[RI_FENCING_TOKEN] == q->f[FF_FENCING_TOKEN].i;
}

static int check_result_refs(const struct flow_req *q, struct flow_err *err)
{
	if (F(q, FF_RESULT_REF) != NULL) {
		return E1("ERR flow result_ref input is not supported; use "
		          "result");
	}
	if (F(q, FF_ERROR_REF) != NULL) {
		return E1("ERR flow error_ref input is not supported; use "
		          "error");
	}
	return 0;
}

/* Whether the non-terminal flow `r` is past its max_active_ms at the
 * command's time. */
static bool active_expired(const struct fctx *c, const struct frec *r)
{
	int64_t deadline = frec_active_deadline(r);
	return deadline >= 0 && (int64_t)c->now > deadline;
}

/* Fails `old` for having run past max_active_ms, as the reference does:
 * state failed, lease and next run cleared, retention stamped, history
 * `failed` with reason max_active_ms. */
static void fail_active(struct fctx *c, const struct frec *old)
{
	struct hmeta meta[1];
	struct frec r = *old;
	frec_set_cstr(&r, RS_STATE, "failed");
	bump(c, &r);
	clear_lease(&r);
	frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
	stamp_retention(c, &r, r.i[RI_RETENTION_TTL_MS]);
	meta[0].name = "reason";
	meta[0].v = text_val(c, fb("max_active_ms"));
	frec_history(c, &r, "failed", meta, 1);
	frec_save(c, old, &r);
}

int flow_op_active_timeout(struct fctx *c, struct fsnp_bytes part,
                           struct fsnp_bytes id, bool *failed)
{
	struct frec old;
	int rv;

	*failed = false;
	if ((rv = frec_load(c, part, id, &old)) <= 0) {
		return rv; /* gone since the scan: nothing to do */
	}
	if (!active_expired(c, &old)) {
		return 0; /* ended, rewound or not yet due: a stale sweep */
	}
	fail_active(c, &old);
	*failed = true;
	return 0;
}

static int op_finish(struct fctx *c, const struct flow_req *q,
                     struct fsnp_writer *w, struct flow_err *err, bool complete)
{
	const char *to = complete ? "completed" : "failed";
	const struct flow_opt *o;
	struct frec old, r;
	int64_t ttl;
	int rv;

	if (check_result_refs(q, err) != 0) {
		return 1;
	}
	if ((o = F(q, FF_TTL_MS)) != NULL && o->i <= 0) {
		E1("ERR flow ttl_ms must be a positive integer");
		return 1;
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (frec_is(&old, RS_STATE, to) &&
	    old.i[RI_FENCING_TOKEN] == q->f[FF_FENCING_TOKEN].i) {
		reply_ok(w);
		return 0;
	}
	if (!lease_ok(&old, q)) {
		E1("ERR stale flow lease");
		return 1;
	}
	if (complete && active_expired(c, &old)) {
		fail_active(c, &old);
		E1("ERR flow max_active_ms exceeded");
		return FLOW_OP_ERROR_KEEP;
	}
	if (updates(c, q, &old, fb(to), false, err) != 0) {
		return 1;
	}
	r = old;
	frec_set_cstr(&r, RS_STATE, to);
	bump(c, &r);
	clear_lease(&r);
	frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
	if ((o = F(q, complete ? FF_RESULT : FF_ERROR)) != NULL) {
		frec_set_val(&r, complete ? RV_RESULT : RV_ERROR, &o->v);
	}
	(void)updates(c, q, &r, fb(to), true, err);
	o = F(q, FF_TTL_MS);
	ttl = o ? o->i : r.i[RI_RETENTION_TTL_MS];
	if (o != NULL) {
		frec_set_int(&r, RI_TTL_MS, o->i);
	}
	stamp_retention(c, &r, ttl);
	frec_history(c, &r, to, NULL, 0);
	frec_save(c, &old, &r);
	reply_ok(w);
	return 0;
}

static int op_extend(struct fctx *c, const struct flow_req *q,
                     struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o;
	struct frec old, r;
	int64_t lease_ms = DEFAULT_LEASE_MS;
	bool ok_reply = false;
	int rv;

	if (opt_lease_ms(q, &lease_ms, err) != 0) {
		return 1;
	}
	if ((o = F(q, FF_RETURN)) != NULL) {
		if (fsnp_bytes_eq(o->t, "ok_on_success") ||
		    fsnp_bytes_eq(o->t, "OK_ON_SUCCESS")) {
			ok_reply = true;
		} else if (!fsnp_bytes_eq(o->t, "record")) {
			E1("ERR flow extend_lease return must be record or "
			   "ok_on_success");
			return 1;
		}
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (!lease_ok(&old, q)) {
		E1("ERR stale flow lease");
		return 1;
	}
	if (c->now + (uint64_t)lease_ms > (uint64_t)FLOW_MAXI) {
		E1("ERR flow lease_ms deadline exceeds maximum "
		   "9007199254740991");
		return 1;
	}
	r = old;
	bump(c, &r);
	frec_set_int(&r, RI_LEASE_DEADLINE_MS, (int64_t)c->now + lease_ms);
	frec_set_int(&r, RI_NEXT_RUN_AT_MS, r.i[RI_LEASE_DEADLINE_MS]);
	frec_history(c, &r, "lease_extended", NULL, 0);
	frec_save(c, &old, &r);
	if (ok_reply) {
		reply_ok(w);
	} else {
		frec_write_public(w, &r, false, 0, NULL);
	}
	return 0;
}

/* --- TRANSITION, CANCEL, SIGNAL ------------------------------------------- */

static int check_target(struct fsnp_bytes to, struct flow_err *err)
{
	if (fsnp_bytes_eq(to, "running")) {
		return E1("ERR flow running state is only entered by "
		          "FLOW.CLAIM_DUE");
	}
	if (frec_terminal_state(to)) {
		return E1("ERR terminal flow state requires FLOW.COMPLETE, "
		          "FLOW.FAIL, or FLOW.CANCEL");
	}
	return 0;
}

static int op_transition(struct fctx *c, const struct flow_req *q,
                         struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *lt = F(q, FF_LEASE_TOKEN), *o;
	struct fsnp_bytes from, to;
	struct frec old, r;
	int rv;

	if (nonempty(q, FF_FROM_STATE, err) != 0 ||
	    nonempty(q, FF_TO_STATE, err) != 0) {
		return 1;
	}
	from = q->f[FF_FROM_STATE].t;
	to = q->f[FF_TO_STATE].t;
	if (check_target(to, err) != 0 ||
	    updates(c, q, NULL, to, false, err) != 0) {
		return 1;
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (frec_eq(&old, RS_STATE, to) && !leased(&old) &&
	    old.i[RI_FENCING_TOKEN] == q->f[FF_FENCING_TOKEN].i) {
		reply_ok(w);
		return 0;
	}
	if (!frec_eq(&old, RS_STATE, from)) {
		E1("ERR flow wrong state");
		return 1;
	}
	if (frec_is_terminal(&old)) {
		E1("ERR flow is terminal; use FLOW.REWIND");
		return 1;
	}
	if (old.i[RI_FENCING_TOKEN] != q->f[FF_FENCING_TOKEN].i ||
	    (leased(&old) ? lt == NULL || !frec_eq(&old, RS_LEASE_TOKEN, lt->t)
	                  : lt != NULL)) {
		E1("ERR stale flow lease");
		return 1;
	}
	r = old;
	frec_set_str(&r, RS_STATE, to);
	bump(c, &r);
	clear_lease(&r);
	o = F(q, FF_RUN_AT_MS);
	frec_set_int(&r, RI_NEXT_RUN_AT_MS, o ? o->i : (int64_t)c->now);
	(void)updates(c, q, &r, to, true, err);
	frec_history(c, &r, "transitioned", NULL, 0);
	frec_save(c, &old, &r);
	reply_ok(w);
	return 0;
}

static int op_cancel(struct fctx *c, const struct flow_req *q,
                     struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *lt = F(q, FF_LEASE_TOKEN), *o;
	struct frec old, r;
	int64_t ttl;
	int rv;

	if (F(q, FF_REASON) != NULL && F(q, FF_REASON_REF) != NULL) {
		E1("ERR flow reason and reason_ref are mutually exclusive");
		return 1;
	}
	if (F(q, FF_REASON_REF) != NULL) {
		E1("ERR flow reason_ref input is not supported; use reason");
		return 1;
	}
	if ((o = F(q, FF_TTL_MS)) != NULL && o->i <= 0) {
		E1("ERR flow ttl_ms must be a positive integer");
		return 1;
	}
	if (updates(c, q, NULL, fb("cancelled"), false, err) != 0) {
		return 1;
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (old.i[RI_FENCING_TOKEN] != q->f[FF_FENCING_TOKEN].i) {
		E1("ERR stale flow lease");
		return 1;
	}
	if (frec_is_terminal(&old)) {
		E1("ERR flow is terminal; use FLOW.REWIND");
		return 1;
	}
	if (leased(&old) ? lt == NULL || !frec_eq(&old, RS_LEASE_TOKEN, lt->t)
	                 : lt != NULL) {
		E1("ERR stale flow lease");
		return 1;
	}
	r = old;
	frec_set_cstr(&r, RS_STATE, "cancelled");
	bump(c, &r);
	clear_lease(&r);
	frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
	if ((o = F(q, FF_REASON)) != NULL) {
		frec_set_val(&r, RV_ERROR, &o->v);
	}
	(void)updates(c, q, &r, fb("cancelled"), true, err);
	o = F(q, FF_TTL_MS);
	ttl = o ? o->i : r.i[RI_RETENTION_TTL_MS];
	stamp_retention(c, &r, ttl);
	frec_history(c, &r, "cancelled", NULL, 0);
	frec_save(c, &old, &r);
	reply_ok(w);
	return 0;
}

static struct fsnp_val text_val(struct fctx *c, struct fsnp_bytes b)
{
	struct wbuf wb;
	struct fsnp_writer w;
	struct fsnp_val v;
	const uint8_t *p;
	size_t n;

	wbuf_init(&wb);
	fsnp_w_init(&w, &wb);
	fsnp_w_bin(&w, b.ptr, b.len);
	(void)fsnp_w_finish(&w);
	n = wb.len;
	p = fctx_keep(c, &wb);
	(void)fsnp_value_decode(p, n, NULL, &v, NULL);
	return v;
}

static struct fsnp_val int_val(struct fctx *c, int64_t i)
{
	uint8_t b[9];
	struct fsnp_val v;
	const uint8_t *p;

	b[0] = FSNP_I64;
	be_put64(b + 1, (uint64_t)i);
	p = fctx_dup(c, b, 9);
	(void)fsnp_value_decode(p, 9, NULL, &v, NULL);
	return v;
}

static bool state_in(const struct flow_opt *o, struct fsnp_bytes st)
{
	if (o->v.tag == FSNP_BIN) {
		return bytes_cmp(o->t, st) == 0;
	}
	return in_list(&o->v, st);
}

static int op_signal(struct fctx *c, const struct flow_req *q,
                     struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *to = F(q, FF_TRANSITION_TO);
	const struct flow_opt *ik = F(q, FF_IDEMPOTENCY_KEY), *o;
	struct frec old, r;
	struct sbuf dv;
	struct hmeta meta[1];
	uint8_t dig[8];
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	int rv;

	if (nonempty(q, FF_SIGNAL, err) != 0) {
		return 1;
	}
	if (ik != NULL && ik->t.len > REF_MAX) {
		E1("ERR flow idempotency_key too large (max 4096 bytes)");
		return 1;
	}
	if (to != NULL && (nonempty(q, FF_TRANSITION_TO, err) != 0 ||
	                   check_target(to->t, err) != 0)) {
		return 1;
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (to != NULL) {
		if (frec_is_terminal(&old)) {
			E1("ERR flow is terminal; use FLOW.REWIND");
			return 1;
		}
		if ((o = F(q, FF_IF_STATE)) == NULL) {
			E1("ERR flow signal transition requires if_state");
			return 1;
		}
		if (!state_in(o, old.s[RS_STATE])) {
			E1("ERR flow state mismatch");
			return 1;
		}
	}
	if (ik != NULL) {
		static const enum flow_field fs[] = {
		    FF_SIGNAL, FF_IF_STATE, FF_TRANSITION_TO, FF_RUN_AT_MS};
		for (size_t i = 0; i < 4; i++) {
			const struct flow_opt *x = F(q, fs[i]);
			uint8_t t = x ? 1 : 0;
			h = fnv(h, &t, 1);
			if (x != NULL) {
				h = fnv(h, x->v.enc, x->v.enc_len);
			}
		}
		be_put64(dig, h);
		sbuf_init(&dv);
		fkey_signal(&c->key, c->group, old.s[RS_PARTITION_KEY],
		            old.s[RS_ID], ik->t);
		rv = store_tx_get(c->tx, c->key.p, c->key.len, &dv);
		if (rv == 1 && (dv.len != 8 || memcmp(dv.p, dig, 8) != 0)) {
			sbuf_free(&dv);
			E1("ERR flow signal idempotency conflict");
			return 1;
		}
		sbuf_free(&dv);
		if (rv < 0) {
			return -1;
		}
		store_tx_put(c->tx, c->key.p, c->key.len, dig, 8);
	}
	r = old;
	bump(c, &r);
	if (to != NULL) {
		frec_set_str(&r, RS_STATE, to->t);
		o = F(q, FF_RUN_AT_MS);
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, o ? o->i : (int64_t)c->now);
		clear_lease(&r);
	}
	meta[0].name = "signal";
	meta[0].v = text_val(c, q->f[FF_SIGNAL].t);
	frec_history(c, &r, "signaled", meta, 1);
	frec_save(c, &old, &r);
	reply_ok(w);
	return 0;
}

/* --- RETRY ---------------------------------------------------------------- */

struct retry_policy {
	int64_t max_retries;
	int kind; /* 0 none, 1 fixed, 2 linear, 3 exponential */
	int64_t base_ms, max_ms, jitter_pct;
	struct fsnp_bytes exhausted_to;
};

static int parse_retry(const struct fsnp_val *m, struct retry_policy *p,
                       struct flow_err *err)
{
	struct fsnp_val v, b;
	int64_t i;

	if (fsnp_map_get(m, "max_attempts", &v) == 0) {
		return E1("ERR flow retry max_attempts was renamed to "
		          "max_retries");
	}
	if (fsnp_map_get(m, "max_retries", &v) == 0) {
		if (fsnp_val_i64(&v, &i) != 0 || i < 0 || i > 1000) {
			return E1("ERR flow retry max_retries must be between "
			          "0 and 1000");
		}
		p->max_retries = i;
	}
	if (fsnp_map_get(m, "exhausted_to", &v) == 0) {
		if (v.tag != FSNP_BIN || v.as.bin.len == 0) {
			return E1("ERR flow retry exhausted_to must be a "
			          "non-empty string");
		}
		if (fsnp_bytes_eq(v.as.bin, "running")) {
			return E1("ERR flow retry exhausted_to cannot be "
			          "running");
		}
		p->exhausted_to = v.as.bin;
	}
	if (fsnp_map_get(m, "backoff", &b) != 0) {
		return 0;
	}
	if (b.tag == FSNP_BIN) {
		v = b;
	} else if (b.tag != FSNP_MAP || fsnp_map_get(&b, "kind", &v) != 0) {
		v.tag = FSNP_NIL;
	}
	if (v.tag == FSNP_BIN) {
		static const char *const kinds[] = {"none", "fixed", "linear",
		                                    "exponential"};
		int k = -1;
		for (int j = 0; j < 4; j++) {
			if (fsnp_bytes_eq(v.as.bin, kinds[j])) {
				k = j;
			}
		}
		if (k < 0) {
			return E1("ERR flow retry backoff kind must be none, "
			          "fixed, linear, or exponential");
		}
		p->kind = k;
	}
	if (b.tag != FSNP_MAP) {
		return 0;
	}
	static const char *const nums[] = {"base_ms", "max_ms", "jitter_pct"};
	int64_t *dst[] = {&p->base_ms, &p->max_ms, &p->jitter_pct};
	for (int j = 0; j < 3; j++) {
		int64_t lim = j == 2 ? 100 : INT64_C(2592000000);
		if (fsnp_map_get(&b, nums[j], &v) != 0) {
			continue;
		}
		if (fsnp_val_i64(&v, &i) != 0 || i < 0 || i > lim) {
			return E1("ERR flow retry %s must be between 0 and "
			          "%lld",
			          nums[j], (long long)lim);
		}
		*dst[j] = i;
	}
	return 0;
}

/* The type's stored policy, if any, as a typed map in *m. 1, 0, -1. */
static int load_policy(struct fctx *c, struct fsnp_bytes type,
                       struct fsnp_val *m)
{
	struct sbuf v;
	int rv;

	sbuf_init(&v);
	fkey_policy(&c->key, c->group, type);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
	if (rv != 1) {
		sbuf_free(&v);
		return rv;
	}
	{
		struct wbuf wb = {v.p, v.len, v.cap, false};
		const uint8_t *p = fctx_keep(c, &wb);
		if (fsnp_value_decode_body(p, v.len, NULL, m) != 0 ||
		    m->tag != FSNP_MAP) {
			return 0;
		}
	}
	return 1;
}

static uint64_t backoff(const struct fctx *c, const struct retry_policy *p,
                        const struct frec *r, int64_t attempt)
{
	uint64_t d, j, base = (uint64_t)p->base_ms, max = (uint64_t)p->max_ms;

	switch (p->kind) {
	case 0:
		return 0;
	case 1:
		d = base;
		break;
	case 2:
		d = base * (uint64_t)attempt;
		break;
	default:
		d = attempt - 1 >= 40 ? max : base << (unsigned)(attempt - 1);
		if (base != 0 && attempt - 1 < 40 &&
		    d >> (unsigned)(attempt - 1) != base) {
			d = max;
		}
		break;
	}
	if (d > max) {
		d = max;
	}
	j = d * (uint64_t)p->jitter_pct / 100;
	if (j > 0) {
		uint64_t h = mix64(c->seed ^
		                   fnv(UINT64_C(0xcbf29ce484222325),
		                       r->s[RS_ID].ptr, r->s[RS_ID].len) ^
		                   (uint64_t)attempt);
		d = d - j + h % (2 * j + 1);
		if (d > max) {
			d = max;
		}
	}
	return d;
}

static int op_retry(struct fctx *c, const struct flow_req *q,
                    struct fsnp_writer *w, struct flow_err *err)
{
	struct retry_policy p = {3, 3, 1000, 30000, 20, {NULL, 0}};
	const struct flow_opt *o;
	struct fsnp_val pm, sub;
	struct frec old, r;
	struct hmeta meta[4];
	struct fsnp_bytes to;
	bool scheduled;
	int64_t attempts;
	int rv;

	p.exhausted_to = fb("failed");
	if (F(q, FF_ERROR_REF) != NULL) {
		E1("ERR flow error_ref input is not supported; use error");
		return 1;
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (!frec_is(&old, RS_STATE, "running") &&
	    old.i[RI_FENCING_TOKEN] == q->f[FF_FENCING_TOKEN].i &&
	    old.i[RI_RETRY_FENCING] == q->f[FF_FENCING_TOKEN].i) {
		reply_ok(w);
		return 0;
	}
	if (!lease_ok(&old, q)) {
		E1("ERR stale flow lease");
		return 1;
	}
	/* Per-call override, then the type policy, then its state. */
	if ((o = F(q, FF_RETRY)) != NULL && parse_retry(&o->v, &p, err) != 0) {
		return 1;
	}
	if ((rv = load_policy(c, old.s[RS_TYPE], &pm)) < 0) {
		return -1;
	}
	if (rv == 1) {
		struct fsnp_val st, ss;
		if (fsnp_map_get(&pm, "retry", &sub) == 0 &&
		    sub.tag == FSNP_MAP && parse_retry(&sub, &p, err) != 0) {
			return 1;
		}
		if (old.s_set[RS_RUN_STATE] &&
		    fsnp_map_get(&pm, "states", &st) == 0 &&
		    st.tag == FSNP_MAP &&
		    fsnp_map_get_n(&st, old.s[RS_RUN_STATE].ptr,
		                   old.s[RS_RUN_STATE].len, &ss) == 0 &&
		    ss.tag == FSNP_MAP &&
		    fsnp_map_get(&ss, "retry", &sub) == 0 &&
		    sub.tag == FSNP_MAP && parse_retry(&sub, &p, err) != 0) {
			return 1;
		}
	}
	if (updates(c, q, &old, old.s[RS_RUN_STATE], false, err) != 0) {
		return 1;
	}
	r = old;
	attempts = r.i[RI_ATTEMPTS] + 1;
	frec_set_int(&r, RI_ATTEMPTS, attempts);
	scheduled = attempts <= p.max_retries;
	to = r.s_set[RS_RUN_STATE] ? r.s[RS_RUN_STATE] : fb("queued");
	if (!scheduled) {
		to = p.exhausted_to;
	}
	(void)updates(c, q, &r, to, true, err);
	frec_set_str(&r, RS_STATE, to);
	bump(c, &r);
	clear_lease(&r);
	frec_clear_str(&r, RS_RUN_STATE);
	frec_set_int(&r, RI_RETRY_FENCING, r.i[RI_FENCING_TOKEN]);
	if ((o = F(q, FF_ERROR)) != NULL) {
		frec_set_val(&r, RV_ERROR, &o->v);
	}
	if (scheduled) {
		o = F(q, FF_RUN_AT_MS);
		frec_set_int(
		    &r, RI_NEXT_RUN_AT_MS,
		    o ? o->i : cap_maxi(c->now + backoff(c, &p, &r, attempts)));
	} else if (frec_terminal_state(to)) {
		frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
		stamp_retention(c, &r, r.i[RI_RETENTION_TTL_MS]);
	} else {
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, (int64_t)c->now);
	}
	meta[0].name = "retry_decision";
	meta[0].v = text_val(c, fb(scheduled ? "scheduled" : "exhausted"));
	meta[1].name = "retry_max_retries";
	meta[1].v = int_val(c, p.max_retries);
	meta[2].name = "retry_exhausted_to";
	meta[2].v = text_val(c, p.exhausted_to);
	meta[3].name = "retry_next_run_at_ms";
	meta[3].v = r.i_set[RI_NEXT_RUN_AT_MS]
	                ? int_val(c, r.i[RI_NEXT_RUN_AT_MS])
	                : int_val(c, 0);
	frec_history(c, &r, "retry", meta, 4);
	frec_save(c, &old, &r);
	reply_ok(w);
	return 0;
}

/* --- HISTORY -------------------------------------------------------------- */

static bool parse_event_id(struct fsnp_bytes b, int64_t *ms, int64_t *ver)
{
	int64_t *dst = ms;
	bool digit = false;

	*ms = *ver = 0;
	for (size_t i = 0; i < b.len; i++) {
		if (b.ptr[i] == '-' && dst == ms && digit) {
			dst = ver;
			digit = false;
			continue;
		}
		if (b.ptr[i] < '0' || b.ptr[i] > '9' || *dst > FLOW_MAXI) {
			return false;
		}
		*dst = *dst * 10 + (b.ptr[i] - '0');
		digit = true;
	}
	return dst == ver && digit;
}

/* The event's fields list: finds `name`'s value. */
static bool event_field(const struct fsnp_val *ev, const char *name,
                        struct fsnp_val *out)
{
	struct fsnp_iter it;
	struct fsnp_val e, fields;

	fsnp_iter_init(&it, ev);
	if (!fsnp_iter_next(&it, NULL, &e) ||
	    !fsnp_iter_next(&it, NULL, &fields)) {
		return false;
	}
	fsnp_iter_init(&it, &fields);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct fsnp_val v;
		if (!fsnp_iter_next(&it, NULL, &v)) {
			return false;
		}
		if (e.tag == FSNP_BIN && fsnp_bytes_eq(e.as.bin, name)) {
			*out = v;
			return true;
		}
	}
	return false;
}

static int op_history(struct fctx *c, const struct flow_req *q,
                      struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o;
	int64_t count = HISTORY_COUNT_MAX, fv = 0, tv = INT64_MAX;
	int64_t fms = 0, tms = INT64_MAX, ms, ver;
	bool rev = false;
	struct fsnp_bytes part;
	struct store_tx_iter *it;
	struct sbuf pfx;
	struct fsnp_val *evs = NULL;
	size_t nev = 0, cap = 0;
	bool valid;

	if ((o = F(q, FF_COUNT)) != NULL) {
		if (o->i > HISTORY_COUNT_MAX) {
			E1("ERR flow count exceeds maximum 10000");
			return 1;
		}
		if (o->i < 1) {
			E1("ERR flow count must be a positive integer");
			return 1;
		}
		count = o->i;
	}
	if ((o = F(q, FF_REV)) != NULL) {
		rev = o->b;
	}
	if ((o = F(q, FF_FROM_VERSION)) != NULL) {
		fv = o->i;
	}
	if ((o = F(q, FF_TO_VERSION)) != NULL) {
		tv = o->i;
	}
	if ((o = F(q, FF_FROM_MS)) != NULL) {
		fms = o->i;
	}
	if ((o = F(q, FF_TO_MS)) != NULL) {
		tms = o->i;
	}
	if ((o = F(q, FF_FROM_EVENT)) != NULL) {
		if (!parse_event_id(o->t, &ms, &ver)) {
			E1("ERR flow from_event must be a history event id");
			return 1;
		}
		fv = ver > fv ? ver : fv;
	}
	if ((o = F(q, FF_TO_EVENT)) != NULL) {
		if (!parse_event_id(o->t, &ms, &ver)) {
			E1("ERR flow to_event must be a history event id");
			return 1;
		}
		tv = ver < tv ? ver : tv;
	}
	if (fv > tv || fms > tms) {
		E1("ERR flow history range is empty or inverted");
		return 1;
	}
	/* Unlike GET, FerricStore's HISTORY takes the reserved schedule ids
	 * (and finds nothing there). */
	if (F(q, FF_ID) == NULL || q->f[FF_ID].t.len == 0) {
		E1("ERR flow id must be a non-empty string");
		return 1;
	}
	if (req_partition(c, q, q->f[FF_ID].t, &part, err) != 0) {
		return 1;
	}
	sbuf_init(&pfx);
	fkey_hist_prefix(&pfx, c->group, part, q->f[FF_ID].t);
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_val ev, f;
		int64_t at = 0;

		if (kl != pfx.len + 8) {
			continue;
		}
		ver = (int64_t)be_get64(k + pfx.len);
		if (ver < fv || ver > tv) {
			continue;
		}
		if (fsnp_value_decode_body(fctx_dup(c, v, vl), vl, NULL, &ev) !=
		    0) {
			continue;
		}
		if (event_field(&ev, "at", &f)) {
			(void)fsnp_val_i64(&f, &at);
		}
		if (at < fms || at > tms) {
			continue;
		}
		if ((o = F(q, FF_EVENT)) != NULL &&
		    (!event_field(&ev, "event", &f) || f.tag != FSNP_BIN ||
		     bytes_cmp(f.as.bin, o->t) != 0)) {
			continue;
		}
		if ((o = F(q, FF_WORKER)) != NULL &&
		    (!event_field(&ev, "lease_owner", &f) ||
		     f.tag != FSNP_BIN || bytes_cmp(f.as.bin, o->t) != 0)) {
			continue;
		}
		if (nev == cap) {
			cap = cap ? cap * 2 : 64;
			evs = store_xrealloc(evs, cap * sizeof *evs);
		}
		evs[nev++] = ev;
		if (!rev && (int64_t)nev >= count) {
			break;
		}
	}
	sbuf_free(&pfx);
	if (store_tx_iter_close(it) != 0) {
		free(evs);
		return -1;
	}
	fsnp_w_array_begin(w);
	if (rev) {
		for (size_t i = 0; i < nev && (int64_t)i < count; i++) {
			fsnp_w_val(w, &evs[nev - 1 - i]);
		}
	} else {
		for (size_t i = 0; i < nev; i++) {
			fsnp_w_val(w, &evs[i]);
		}
	}
	fsnp_w_array_end(w);
	free(evs);
	return 0;
}

/* --- Values --------------------------------------------------------------- */

static void put_value(struct fctx *c, struct fsnp_bytes ref, uint64_t expires,
                      const struct fsnp_val *v)
{
	struct sbuf b;

	sbuf_init(&b);
	sbuf_u64(&b, expires);
	sbuf_add(&b, v->enc, v->enc_len);
	fkey_value(&c->key, c->group, ref);
	store_tx_put(c->tx, c->key.p, c->key.len, b.p, b.len);
	sbuf_free(&b);
}

/* 1 with the value (a view owned by the context), 0 absent or expired,
 * -1 failure. */
static int get_value(struct fctx *c, struct fsnp_bytes ref, struct fsnp_val *v)
{
	struct sbuf b;
	const uint8_t *p;
	uint64_t exp;
	int rv;

	sbuf_init(&b);
	fkey_value(&c->key, c->group, ref);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &b);
	if (rv != 1 || b.len < 8) {
		sbuf_free(&b);
		return rv < 0 ? -1 : 0;
	}
	exp = be_get64(b.p);
	p = fctx_dup(c, b.p + 8, b.len - 8);
	rv = (exp != 0 && exp <= c->now) ||
	             fsnp_value_decode_body(p, b.len - 8, NULL, v) != 0
	         ? 0
	         : 1;
	sbuf_free(&b);
	return rv;
}

static int op_value_put(struct fctx *c, const struct flow_req *q,
                        struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *pk = F(q, FF_PARTITION_KEY);
	const struct flow_opt *ttl = F(q, FF_TTL_MS), *o;
	const struct flow_opt *owner = F(q, FF_OWNER_FLOW_ID);
	const struct flow_opt *name = F(q, FF_NAME);
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrst"
	                        "uvwxyz0123456789-_";
	char tag[FLOW_TAG_MAX], part_buf[FLOW_AUTO_PARTITION_MAX];
	struct fsnp_bytes part, ref;
	bool ok_reply = false;
	struct sbuf rb;

	if (pk != NULL && pk->t.len == 0) {
		E1("ERR flow partition_key must be a non-empty string or "
		   ":global");
		return 1;
	}
	if (ttl != NULL && ttl->i <= 0) {
		E1("ERR flow ttl_ms must be a positive integer");
		return 1;
	}
	if ((o = F(q, FF_RETURN)) != NULL) {
		if (!fsnp_bytes_eq(o->t, "ok_on_success") &&
		    !fsnp_bytes_eq(o->t, "OK_ON_SUCCESS")) {
			E1("ERR flow value put return must be ok_on_success");
			return 1;
		}
		ok_reply = true;
	}
	if ((owner != NULL) != (name != NULL)) {
		E1("ERR flow named value put requires owner_flow_id and name");
		return 1;
	}
	sbuf_init(&rb);
	if (owner != NULL) {
		struct frec old, r;
		struct fsnp_val cur, refv, refs;
		bool created, stored = true;
		int rv;

		if (ttl != NULL) {
			E1("ERR flow ttl_ms is not supported for named values");
			return 1;
		}
		if (owner->t.len == 0 || name->t.len == 0 ||
		    owner->t.len > REF_MAX || name->t.len > 256) {
			E1("ERR invalid flow value");
			return 1;
		}
		if (req_partition(c, q, owner->t, &part, err) != 0) {
			return 1;
		}
		if ((rv = frec_load(c, part, owner->t, &old)) <= 0) {
			if (rv == 0) {
				E1("ERR flow not found");
			}
			return rv < 0 ? -1 : 1;
		}
		created = !old.v_set[RV_VALUE_REFS] ||
		          fsnp_map_get_n(&old.v[RV_VALUE_REFS], name->t.ptr,
		                         name->t.len, &refv) != 0;
		ref = named_ref(c, part, owner->t, name->t);
		if (!created) {
			rv = get_value(c, ref, &cur);
			if (rv < 0) {
				return -1;
			}
			if (rv == 1 &&
			    cur.enc_len == q->f[FF_VALUE].v.enc_len &&
			    memcmp(cur.enc, q->f[FF_VALUE].v.enc,
			           cur.enc_len) == 0) {
				stored = false;
			} else if (F(q, FF_OVERRIDE) == NULL ||
			           !q->f[FF_OVERRIDE].b) {
				E1("ERR flow value %.*s already exists with "
				   "different digest; use OVERRIDE true",
				   (int)name->t.len, (const char *)name->t.ptr);
				return 1;
			}
		}
		r = old;
		if (stored) {
			put_value(c, ref, 0, &q->f[FF_VALUE].v);
			refv = text_val(c, ref);
			refs = map_merge(c, &old.v[RV_VALUE_REFS],
			                 old.v_set[RV_VALUE_REFS], NULL, &refv,
			                 &name->t);
			frec_set_val(&r, RV_VALUE_REFS, &refs);
			bump(c, &r);
			frec_history(c, &r, "value_put", NULL, 0);
			frec_save(c, &old, &r);
		}
		if (ok_reply) {
			reply_ok(w);
			return 0;
		}
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "ref");
		fsnp_w_bin(w, ref.ptr, ref.len);
		fsnp_w_key(w, "partition_key");
		if (pk != NULL) {
			fsnp_w_bin(w, pk->t.ptr, pk->t.len);
		} else {
			fsnp_w_nil(w);
		}
		fsnp_w_key(w, "owner_flow_id");
		fsnp_w_bin(w, owner->t.ptr, owner->t.len);
		fsnp_w_key(w, "name");
		fsnp_w_bin(w, name->t.ptr, name->t.len);
		fsnp_w_key(w, "version");
		fsnp_w_i64(w, r.i[RI_VERSION]);
		fsnp_w_key(w, "created");
		fsnp_w_bool(w, created);
		fsnp_w_key(w, "stored");
		fsnp_w_bool(w, stored);
		fsnp_w_map_end(w);
		return 0;
	}
	if (pk != NULL) {
		part = pk->t;
	} else {
		part.len = flow_route_auto_partition((unsigned)(c->seed % 256u),
		                                     part_buf);
		part.ptr = (const uint8_t *)part_buf;
	}
	flow_route_tag(part.ptr, part.len, tag);
	sbuf_add(&rb, "f:{", 3);
	sbuf_add(&rb, tag, strlen(tag));
	sbuf_add(&rb, "}:v:s:", 6);
	{
		uint64_t s = c->seed;
		char ch[24];
		for (int i = 0; i < 24; i++) {
			s = mix64(s + (uint64_t)i);
			ch[i] = a[s & 63];
		}
		sbuf_add(&rb, ch, 24);
	}
	sbuf_add(&rb, ":1", 2);
	ref.ptr = fctx_dup(c, rb.p, rb.len);
	ref.len = rb.len;
	sbuf_free(&rb);
	put_value(c, ref,
	          ttl ? (uint64_t)cap_maxi(c->now + (uint64_t)ttl->i) : 0,
	          &q->f[FF_VALUE].v);
	if (ok_reply) {
		reply_ok(w);
		return 0;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "ref");
	fsnp_w_bin(w, ref.ptr, ref.len);
	fsnp_w_key(w, "partition_key");
	if (pk != NULL) {
		fsnp_w_bin(w, pk->t.ptr, pk->t.len);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_map_end(w);
	return 0;
}

static int op_value_mget(struct fctx *c, const struct flow_req *q,
                         struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o = F(q, FF_MAX_BYTES);
	struct fsnp_iter it;
	struct fsnp_val e, v;
	uint64_t max = 0;

	if (o == NULL) {
		o = F(q, FF_VALUE_MAX_BYTES);
	}
	if (o == NULL) {
		o = F(q, FF_PAYLOAD_MAX_BYTES);
	}
	if (o != NULL) {
		max = (uint64_t)o->i;
	}
	fsnp_iter_init(&it, &q->f[FF_REFS].v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (e.tag != FSNP_BIN) {
			flow_fail(err, FLOW_STATUS_BAD_REQUEST,
			          "ERR native field refs must be a binary "
			          "list");
			return 1;
		}
	}
	fsnp_w_array_begin(w);
	fsnp_iter_init(&it, &q->f[FF_REFS].v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		int rv = get_value(c, e.as.bin, &v);
		if (rv < 0) {
			return -1;
		}
		if (rv == 0) {
			fsnp_w_nil(w);
		} else if (o != NULL && v.enc_len > max) {
			fsnp_w_map_begin(w);
			fsnp_w_key(w, "ref");
			fsnp_w_bin(w, e.as.bin.ptr, e.as.bin.len);
			fsnp_w_key(w, "value_omitted");
			fsnp_w_bool(w, true);
			fsnp_w_key(w, "value_size");
			fsnp_w_i64(w, (int64_t)v.enc_len);
			fsnp_w_map_end(w);
		} else {
			fsnp_w_val(w, &v);
		}
	}
	fsnp_w_array_end(w);
	return 0;
}

/* --- INFO and policies ---------------------------------------------------- */

static int op_info(struct fctx *c, const struct flow_req *q,
                   struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *pk = F(q, FF_PARTITION_KEY);
	int64_t n[5] = {0};
	static const char *const names[5] = {"queued", "running", "completed",
	                                     "failed", "cancelled"};
	struct store_tx_iter *it;
	struct sbuf pfx;
	bool valid;

	if (nonempty(q, FF_TYPE, err) != 0) {
		return 1;
	}
	sbuf_init(&pfx);
	sbuf_u32(&pfx, c->group);
	sbuf_u8(&pfx, K_FLOW);
	if (pk != NULL) {
		sbuf_lbytes(&pfx, pk->t.ptr, pk->t.len);
	}
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = 5;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_val m, f;
		struct fsnp_bytes part;
		unsigned b;

		if (pk == NULL &&
		    (!fkey_part(k, kl, &off, &part) ||
		     !flow_route_is_auto(part.ptr, part.len, &b))) {
			continue;
		}
		if (fsnp_value_decode_body(v, vl, NULL, &m) != 0 ||
		    fsnp_map_get(&m, "type", &f) != 0 || f.tag != FSNP_BIN ||
		    bytes_cmp(f.as.bin, q->f[FF_TYPE].t) != 0 ||
		    fsnp_map_get(&m, "state", &f) != 0 || f.tag != FSNP_BIN) {
			continue;
		}
		if (fsnp_bytes_eq(f.as.bin, "running")) {
			n[1]++;
		} else if (fsnp_bytes_eq(f.as.bin, "completed")) {
			n[2]++;
		} else if (fsnp_bytes_eq(f.as.bin, "failed")) {
			n[3]++;
		} else if (fsnp_bytes_eq(f.as.bin, "cancelled")) {
			n[4]++;
		} else {
			n[0]++;
		}
	}
	sbuf_free(&pfx);
	if (store_tx_iter_close(it) != 0) {
		return -1;
	}
	fsnp_w_map_begin(w);
	for (int i = 0; i < 5; i++) {
		fsnp_w_key(w, names[i]);
		fsnp_w_i64(w, n[i]);
	}
	fsnp_w_key(w, "inflight");
	fsnp_w_i64(w, n[1]);
	fsnp_w_key(w, "type");
	fsnp_w_bin(w, q->f[FF_TYPE].t.ptr, q->f[FF_TYPE].t.len);
	fsnp_w_key(w, "partition_key");
	if (pk != NULL) {
		fsnp_w_bin(w, pk->t.ptr, pk->t.len);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_map_end(w);
	return 0;
}

/* A policy reply from the stored map (or defaults): {type, generation,
 * version, max_active_ms, retry, retention, indexed_attributes,
 * indexed_state_meta, governance, states}. */
static void write_policy(struct fsnp_writer *w, struct fsnp_bytes type,
                         const struct fsnp_val *pm, bool have)
{
	struct fsnp_val v, b;
	struct retry_policy p = {3, 3, 1000, 30000, 20, {NULL, 0}};
	struct flow_err e;
	static const char *const kinds[] = {"none", "fixed", "linear",
	                                    "exponential"};
	int64_t gen = 0;

	p.exhausted_to = fb("failed");
	if (have && fsnp_map_get(pm, "retry", &b) == 0 && b.tag == FSNP_MAP) {
		(void)parse_retry(&b, &p, &e);
	}
	if (have && fsnp_map_get(pm, "generation", &v) == 0) {
		(void)fsnp_val_i64(&v, &gen);
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "type");
	fsnp_w_bin(w, type.ptr, type.len);
	fsnp_w_key(w, "generation");
	fsnp_w_i64(w, gen);
	fsnp_w_key(w, "version");
	fsnp_w_i64(w, gen);
	fsnp_w_key(w, "max_active_ms");
	if (have && fsnp_map_get(pm, "max_active_ms", &v) == 0) {
		fsnp_w_val(w, &v);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "retry");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "max_retries");
	fsnp_w_i64(w, p.max_retries);
	fsnp_w_key(w, "backoff");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "kind");
	fsnp_w_str(w, kinds[p.kind]);
	fsnp_w_key(w, "base_ms");
	fsnp_w_i64(w, p.base_ms);
	fsnp_w_key(w, "max_ms");
	fsnp_w_i64(w, p.max_ms);
	fsnp_w_key(w, "jitter_pct");
	fsnp_w_i64(w, p.jitter_pct);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "exhausted_to");
	fsnp_w_bin(w, p.exhausted_to.ptr, p.exhausted_to.len);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "retention");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "ttl_ms");
	fsnp_w_i64(w, DEFAULT_RETENTION_MS);
	fsnp_w_key(w, "history_max_events");
	fsnp_w_i64(w, DEFAULT_HISTORY_MAX);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "indexed_attributes");
	if (have && fsnp_map_get(pm, "indexed_attributes", &v) == 0) {
		fsnp_w_val(w, &v);
	} else {
		fsnp_w_array_begin(w);
		fsnp_w_array_end(w);
	}
	fsnp_w_key(w, "indexed_state_meta");
	if (have && fsnp_map_get(pm, "indexed_state_meta", &v) == 0) {
		fsnp_w_val(w, &v);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "governance");
	fsnp_w_nil(w);
	fsnp_w_key(w, "states");
	if (have && fsnp_map_get(pm, "states", &v) == 0) {
		fsnp_w_val(w, &v);
	} else {
		fsnp_w_map_begin(w);
		fsnp_w_map_end(w);
	}
	fsnp_w_map_end(w);
}

static int op_policy_get(struct fctx *c, const struct flow_req *q,
                         struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_val pm;
	int rv;

	if (nonempty(q, FF_TYPE, err) != 0) {
		return 1;
	}
	if ((rv = load_policy(c, q->f[FF_TYPE].t, &pm)) < 0) {
		return -1;
	}
	write_policy(w, q->f[FF_TYPE].t, &pm, rv == 1);
	return 0;
}

static int op_policy_set(struct fctx *c, const struct flow_req *q,
                         struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o;
	struct fsnp_val pm, v;
	struct retry_policy p = {3, 3, 1000, 30000, 20, {NULL, 0}};
	struct wbuf b;
	struct fsnp_writer pw;
	int64_t gen = 0;
	bool replace = F(q, FF_REPLACE) != NULL && q->f[FF_REPLACE].b;
	int rv;
	static const char *const keep[] = {"retry", "max_active_ms",
	                                   "indexed_attributes",
	                                   "indexed_state_meta", "states"};
	static const enum flow_field from[] = {
	    FF_RETRY, FF_MAX_ACTIVE_MS, FF_INDEXED_ATTRIBUTES,
	    FF_INDEXED_STATE_META, FF_STATES};

	if (nonempty(q, FF_TYPE, err) != 0) {
		return 1;
	}
	if ((o = F(q, FF_RETRY)) != NULL && parse_retry(&o->v, &p, err) != 0) {
		return 1;
	}
	if ((o = F(q, FF_MAX_ACTIVE_MS)) != NULL && !o->inf &&
	    (o->i < 1 || o->i > MAX_ACTIVE_MAX)) {
		E1("ERR flow max_active_ms must be between 1 and 31536000000 "
		   "or infinity");
		return 1;
	}
	if ((o = F(q, FF_INDEXED_ATTRIBUTES)) != NULL &&
	    flow_index_check_names(&o->v, err) != 0) {
		return 1;
	}
	if ((rv = load_policy(c, q->f[FF_TYPE].t, &pm)) < 0) {
		return -1;
	}
	if (rv == 1 && fsnp_map_get(&pm, "generation", &v) == 0) {
		(void)fsnp_val_i64(&v, &gen);
	}
	if ((o = F(q, FF_EXPECTED_GENERATION)) != NULL && o->i != gen) {
		E1("ERR stale flow policy generation");
		return 1;
	}
	wbuf_init(&b);
	fsnp_w_init(&pw, &b);
	fsnp_w_map_begin(&pw);
	fsnp_w_key(&pw, "generation");
	fsnp_w_i64(&pw, gen + 1);
	for (int i = 0; i < 5; i++) {
		if (from[i] != FF_COUNT_FIELDS && F(q, from[i]) != NULL) {
			fsnp_w_key(&pw, keep[i]);
			fsnp_w_val(&pw, &q->f[from[i]].v);
		} else if (!replace && rv == 1 &&
		           fsnp_map_get(&pm, keep[i], &v) == 0) {
			fsnp_w_key(&pw, keep[i]);
			fsnp_w_val(&pw, &v);
		}
	}
	fsnp_w_map_end(&pw);
	(void)fsnp_w_finish(&pw);
	fkey_policy(&c->key, c->group, q->f[FF_TYPE].t);
	store_tx_put(c->tx, c->key.p, c->key.len, b.data, b.len);
	{
		size_t n = b.len;
		const uint8_t *p2 = fctx_keep(c, &b);
		(void)fsnp_value_decode_body(p2, n, NULL, &pm);
	}
	write_policy(w, q->f[FF_TYPE].t, &pm, true);
	return 0;
}

/* --- STEP_CONTINUE, REWIND, RUN_STEPS_MANY, RETENTION_CLEANUP ------------ */

static int op_step_continue(struct fctx *c, const struct flow_req *q,
                            struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o, *wk = F(q, FF_WORKER);
	struct fsnp_bytes to;
	struct frec old, r;
	int64_t lease_ms = DEFAULT_LEASE_MS;
	bool jobs = false;
	int rv;

	if (nonempty(q, FF_FROM_STATE, err) != 0 ||
	    nonempty(q, FF_TO_STATE, err) != 0) {
		return 1;
	}
	to = q->f[FF_TO_STATE].t;
	if (check_target(to, err) != 0 ||
	    updates(c, q, NULL, to, false, err) != 0) {
		return 1;
	}
	if (opt_lease_ms(q, &lease_ms, err) != 0) {
		return 1;
	}
	if ((o = F(q, FF_RETURN)) != NULL) {
		if (fsnp_bytes_eq(o->t, "jobs_compact") ||
		    fsnp_bytes_eq(o->t, "JOBS_COMPACT")) {
			jobs = true;
		} else if (!fsnp_bytes_eq(o->t, "record")) {
			E1("ERR flow step_continue return must be record or "
			   "jobs_compact");
			return 1;
		}
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (!lease_ok(&old, q) ||
	    (wk != NULL && !frec_eq(&old, RS_LEASE_OWNER, wk->t))) {
		E1("ERR stale flow lease");
		return 1;
	}
	if (!frec_eq(&old, RS_RUN_STATE, q->f[FF_FROM_STATE].t)) {
		E1("ERR flow wrong state");
		return 1;
	}
	r = old;
	frec_set_str(&r, RS_RUN_STATE, to);
	frec_set_int(&r, RI_FENCING_TOKEN, r.i[RI_FENCING_TOKEN] + 1);
	bump(c, &r);
	frec_set_int(&r, RI_LEASE_DEADLINE_MS,
	             cap_maxi(c->now + (uint64_t)lease_ms));
	frec_set_int(&r, RI_NEXT_RUN_AT_MS, r.i[RI_LEASE_DEADLINE_MS]);
	lease_token(c, &r, old.s[RS_LEASE_OWNER]);
	(void)updates(c, q, &r, to, true, err);
	frec_history(c, &r, "step_continued", NULL, 0);
	frec_save(c, &old, &r);
	if (jobs) {
		write_job(w, &r, 2);
	} else {
		frec_write_public(w, &r, false, 0, NULL);
	}
	return 0;
}

/* The history event `version` of (part, id): 1 with its typed value, 0
 * absent, -1 failure. */
static int load_event(struct fctx *c, struct fsnp_bytes part,
                      struct fsnp_bytes id, int64_t version,
                      struct fsnp_val *ev)
{
	struct sbuf v;
	const uint8_t *p;
	int rv;

	sbuf_init(&v);
	fkey_hist_prefix(&c->key, c->group, part, id);
	sbuf_u64(&c->key, (uint64_t)version);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
	if (rv != 1) {
		sbuf_free(&v);
		return rv;
	}
	p = fctx_dup(c, v.p, v.len);
	rv = fsnp_value_decode_body(p, v.len, NULL, ev) == 0 ? 1 : 0;
	sbuf_free(&v);
	return rv;
}

static int op_rewind(struct fctx *c, const struct flow_req *q,
                     struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o;
	struct frec old, r;
	struct fsnp_val ev, f, eid;
	struct fsnp_iter it;
	struct hmeta meta[1];
	int64_t ms, ver, i;
	int rv;

	if (F(q, FF_REASON_REF) != NULL) {
		E1("ERR flow reason_ref input is not supported; use reason");
		return 1;
	}
	if (!parse_event_id(q->f[FF_TO_EVENT].t, &ms, &ver)) {
		E1("ERR flow to_event must be a history event id");
		return 1;
	}
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	if (leased(&old)) {
		E1("ERR flow cannot rewind leased flow");
		return 1;
	}
	if (old.s_set[RS_PARENT_FLOW_ID] || old.v_set[RV_CHILD_GROUPS]) {
		E1("ERR flow cannot rewind parent or child flow");
		return 1;
	}
	if ((o = F(q, FF_EXPECT_STATE)) != NULL &&
	    !frec_eq(&old, RS_STATE, o->t)) {
		E1("ERR flow wrong state");
		return 1;
	}
	rv = load_event(c, old.s[RS_PARTITION_KEY], old.s[RS_ID], ver, &ev);
	if (rv < 0) {
		return -1;
	}
	fsnp_iter_init(&it, &ev);
	if (rv == 0 || !fsnp_iter_next(&it, NULL, &eid) ||
	    eid.tag != FSNP_BIN ||
	    bytes_cmp(eid.as.bin, q->f[FF_TO_EVENT].t) != 0) {
		E1("ERR flow rewind target event not found");
		return 1;
	}
	r = old;
	if (event_field(&ev, "state", &f) && f.tag == FSNP_BIN) {
		frec_set_str(&r, RS_STATE, f.as.bin);
	}
	if (event_field(&ev, "priority", &f) && fsnp_val_i64(&f, &i) == 0) {
		frec_set_int(&r, RI_PRIORITY, i);
	}
	if (event_field(&ev, "attempts", &f) && fsnp_val_i64(&f, &i) == 0) {
		frec_set_int(&r, RI_ATTEMPTS, i);
	}
	if (event_field(&ev, "created_at_ms", &f) &&
	    fsnp_val_i64(&f, &i) == 0) {
		frec_set_int(&r, RI_CREATED_AT_MS, i);
	}
	if (frec_is(&r, RS_STATE, "running")) {
		/* A claimed point: back to the state it was claimed from. */
		frec_set_str(&r, RS_STATE,
		             r.s_set[RS_RUN_STATE] ? r.s[RS_RUN_STATE]
		                                   : fb("queued"));
	}
	frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
	frec_clear_int(&r, RI_TERMINAL_RETENTION_UNTIL_MS);
	if ((o = F(q, FF_RUN_AT_MS)) != NULL) {
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, o->i);
	} else if (event_field(&ev, "next_run_at_ms", &f) &&
	           fsnp_val_i64(&f, &i) == 0) {
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, i);
	} else if (!frec_is_terminal(&r)) {
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, (int64_t)c->now);
	}
	if (frec_is_terminal(&r)) {
		frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
		stamp_retention(c, &r, r.i[RI_RETENTION_TTL_MS]);
	}
	clear_lease(&r);
	frec_set_int(&r, RI_FENCING_TOKEN, r.i[RI_FENCING_TOKEN] + 1);
	bump(c, &r);
	meta[0].name = "rewound_to_event_id";
	meta[0].v = eid;
	frec_history(c, &r, "rewound", meta, 1);
	frec_save(c, &old, &r);
	reply_ok(w);
	return 0;
}

static int op_run_steps(struct fctx *c, const struct flow_req *q,
                        struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *st = F(q, FF_STATES), *o;
	struct fsnp_iter it;
	struct fsnp_val e, sv;
	int64_t nsteps = 1, lease_ms = DEFAULT_LEASE_MS;
	char name[32];

	if (nonempty(q, FF_TYPE, err) != 0 || nonempty(q, FF_WORKER, err)) {
		return 1;
	}
	if (st != NULL) {
		nsteps = st->v.as.count;
		if (nsteps == 0) {
			E1("ERR flow states must be a non-empty list");
			return 1;
		}
		fsnp_iter_init(&it, &st->v);
		while (fsnp_iter_next(&it, NULL, &sv)) {
			if (sv.tag != FSNP_BIN || sv.as.bin.len == 0 ||
			    fsnp_bytes_eq(sv.as.bin, "running") ||
			    frec_terminal_state(sv.as.bin)) {
				E1("ERR flow states must be a non-empty list");
				return 1;
			}
		}
	} else if ((o = F(q, FF_STEPS)) != NULL) {
		if (o->i < 1) {
			E1("ERR flow steps must be a positive integer");
			return 1;
		}
		nsteps = o->i;
	}
	if ((o = F(q, FF_LEASE_MS)) != NULL && o->i > 0) {
		lease_ms = o->i;
	}
	if (q->f[FF_ITEMS].v.as.count == 0) {
		E1("ERR flow items must be a non-empty list");
		return 1;
	}
	if ((int64_t)q->f[FF_ITEMS].v.as.count * nsteps > 1000) {
		E1("ERR flow run step operation count exceeds maximum 1000");
		return 1;
	}
	fsnp_iter_init(&it, &q->f[FF_ITEMS].v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req item = *q;
		struct fsnp_bytes part, state;
		struct fsnp_iter si;
		struct frec old, r;
		int rv;

		item.f[FF_ID].set = false;
		if (e.tag == FSNP_BIN) {
			item.f[FF_ID].set = true;
			item.f[FF_ID].t = e.as.bin;
		} else if (e.tag == FSNP_MAP) {
			struct fsnp_val v;
			if (fsnp_map_get(&e, "id", &v) == 0 &&
			    v.tag == FSNP_BIN) {
				item.f[FF_ID].set = true;
				item.f[FF_ID].t = v.as.bin;
			}
			if (fsnp_map_get(&e, "partition_key", &v) == 0 &&
			    v.tag == FSNP_BIN) {
				item.f[FF_PARTITION_KEY].set = true;
				item.f[FF_PARTITION_KEY].t = v.as.bin;
			}
		}
		if (!item.f[FF_ID].set) {
			flow_fail(err, FLOW_STATUS_BAD_REQUEST,
			          "ERR native flow item is invalid");
			return 1;
		}
		if (check_id(&item, err) != 0 ||
		    req_partition(c, &item, item.f[FF_ID].t, &part, err) != 0) {
			return 1;
		}
		if ((rv = frec_load(c, part, item.f[FF_ID].t, &old)) < 0) {
			return -1;
		}
		if (rv == 1) {
			E1("ERR flow already exists");
			return 1;
		}
		if (st != NULL) {
			fsnp_iter_init(&si, &st->v);
			(void)fsnp_iter_next(&si, NULL, &sv);
			state = sv.as.bin;
		} else {
			snprintf(name, sizeof name, "step_1");
			state = fb(name);
			state.ptr = fctx_dup(c, name, state.len);
		}
		new_record(c, &item, part, fb("running"), &r);
		frec_set_str(&r, RS_RUN_STATE, state);
		frec_set_int(&r, RI_ATTEMPTS, 1);
		frec_set_int(&r, RI_FENCING_TOKEN, 1);
		frec_set_int(&r, RI_LEASE_DEADLINE_MS,
		             cap_maxi(c->now + (uint64_t)lease_ms));
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, r.i[RI_LEASE_DEADLINE_MS]);
		lease_token(c, &r, q->f[FF_WORKER].t);
		frec_history(c, &r, "created", NULL, 0);
		for (int64_t k = 2; k <= nsteps; k++) {
			if (st != NULL) {
				(void)fsnp_iter_next(&si, NULL, &sv);
				state = sv.as.bin;
			} else {
				snprintf(name, sizeof name, "step_%lld",
				         (long long)k);
				state = fb(name);
				state.ptr = fctx_dup(c, name, state.len);
			}
			frec_set_str(&r, RS_RUN_STATE, state);
			frec_set_int(&r, RI_FENCING_TOKEN, k);
			bump(c, &r);
			lease_token(c, &r, q->f[FF_WORKER].t);
			frec_history(c, &r, "step_continued", NULL, 0);
		}
		frec_set_cstr(&r, RS_STATE, "completed");
		bump(c, &r);
		clear_lease(&r);
		frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
		if ((o = F(q, FF_RESULT)) != NULL) {
			frec_set_val(&r, RV_RESULT, &o->v);
		}
		stamp_retention(c, &r, r.i[RI_RETENTION_TTL_MS]);
		frec_history(c, &r, "completed", NULL, 0);
		frec_save(c, NULL, &r);
	}
	reply_ok(w);
	return 0;
}

/* Deletes every key under `prefix`; adds the count to *n. */
static int del_prefix(struct fctx *c, const struct sbuf *prefix, int64_t *n)
{
	struct store_tx_iter *it =
	    store_tx_iter_open(c->tx, prefix->p, prefix->len);
	struct sbuf keys;
	size_t count = 0, off = 0;
	bool valid = store_tx_iter_seek(it, NULL, 0);
	int rv;

	sbuf_init(&keys);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		sbuf_lbytes(&keys, k, kl);
		count++;
	}
	rv = store_tx_iter_close(it);
	for (size_t i = 0; rv == 0 && i < count; i++) {
		uint32_t kl = be_get32(keys.p + off);
		store_tx_del(c->tx, keys.p + off + 4, kl);
		off += 4 + kl;
	}
	sbuf_free(&keys);
	*n += (int64_t)count;
	return rv;
}

static int op_retention(struct fctx *c, const struct flow_req *q,
                        struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *o = F(q, FF_LIMIT);
	int64_t limit = 100, flows = 0, hist = 0, values = 0, gov = 0;
	struct store_tx_iter *it;
	struct sbuf pfx, found;
	size_t nfound = 0, off = 0;
	bool valid, more = false;
	int rv;

	if (o != NULL) {
		if (o->i < 1) {
			E1("ERR flow limit must be a positive integer");
			return 1;
		}
		limit = o->i;
	}
	/* Terminal flows past their retention, oldest deadline first. */
	sbuf_init(&pfx);
	sbuf_init(&found);
	sbuf_u32(&pfx, c->group);
	sbuf_u8(&pfx, K_FLOW_RETAIN);
	it = store_tx_iter_open(c->tx, pfx.p, pfx.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		if (kl < 13 || be_get64(k + 5) > c->now) {
			break;
		}
		if ((int64_t)nfound == limit) {
			more = true;
			break;
		}
		sbuf_lbytes(&found, k, kl);
		nfound++;
	}
	rv = store_tx_iter_close(it);
	for (size_t i = 0; rv == 0 && i < nfound; i++) {
		uint32_t kl = be_get32(found.p + off);
		const uint8_t *k = found.p + off + 4;
		size_t ko = 13;
		struct fsnp_bytes part, id;
		struct frec r;
		off += 4 + kl;
		store_tx_del(c->tx, k, kl);
		if (!fkey_part(k, kl, &ko, &part) ||
		    !fkey_part(k, kl, &ko, &id)) {
			continue;
		}
		rv = frec_load(c, part, id, &r);
		if (rv < 0) {
			break;
		}
		if (rv == 1) {
			flow_index_update(c, &r, NULL);
		}
		rv = 0;
		fkey_hist_prefix(&pfx, c->group, part, id);
		if ((rv = del_prefix(c, &pfx, &hist)) != 0) {
			break;
		}
		fkey_signal(&pfx, c->group, part, id, fb(""));
		if ((rv = del_prefix(c, &pfx, &hist)) != 0) {
			break;
		}
		/* its governance effects and ledger go with it */
		for (unsigned g = 0;
		     rv == 0 &&
		     flow_gov_flow_prefix(&pfx, c->group, g, part, id);
		     g++) {
			rv = del_prefix(c, &pfx, &gov);
		}
		if (rv != 0) {
			break;
		}
		if (r.v_set[RV_VALUE_REFS]) {
			struct fsnp_iter vi;
			struct fsnp_bytes name;
			struct fsnp_val ref;
			fsnp_iter_init(&vi, &r.v[RV_VALUE_REFS]);
			while (fsnp_iter_next(&vi, &name, &ref)) {
				if (ref.tag == FSNP_BIN) {
					fkey_value(&c->key, c->group,
					           ref.as.bin);
					store_tx_del(c->tx, c->key.p,
					             c->key.len);
					values++;
				}
			}
		}
		fkey_rec(&c->key, c->group, part, id);
		store_tx_del(c->tx, c->key.p, c->key.len);
		flows++;
	}
	sbuf_free(&pfx);
	sbuf_free(&found);
	if (rv != 0) {
		return -1;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "flows");
	fsnp_w_i64(w, flows);
	fsnp_w_key(w, "history");
	fsnp_w_i64(w, hist);
	fsnp_w_key(w, "values");
	fsnp_w_i64(w, values);
	fsnp_w_key(w, "active_timeouts");
	fsnp_w_i64(w, 0);
	fsnp_w_key(w, "continuation");
	fsnp_w_nil(w);
	fsnp_w_key(w, "more?");
	fsnp_w_bool(w, more);
	fsnp_w_map_end(w);
	return 0;
}

/* --- SPAWN_CHILDREN ------------------------------------------------------- */

static bool one_of(struct fsnp_bytes v, const char *a, const char *b,
                   const char *c3)
{
	return fsnp_bytes_eq(v, a) || fsnp_bytes_eq(v, b) ||
	       (c3 != NULL && fsnp_bytes_eq(v, c3));
}

static int op_spawn(struct fctx *c, const struct flow_req *q,
                    struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *lt = F(q, FF_LEASE_TOKEN), *o;
	const struct fsnp_val *kids = &q->f[FF_CHILDREN].v;
	struct fsnp_bytes gid = q->f[FF_GROUP_ID].t, part, target;
	struct flow_req *reqs = NULL;
	struct cgroup g, had;
	struct frec old, r;
	struct fsnp_iter it;
	struct fsnp_val e;
	uint64_t digest = UINT64_C(0xcbf29ce484222325);
	uint32_t n = 0;
	int rv, res = 1;

	memset(&g, 0, sizeof g);
	g.wait = fb("all");
	g.on_child_failed = fb("fail_parent");
	g.on_parent_closed = fb("cancel_children");
	if (gid.len == 0) {
		E1("ERR flow group_id must be a non-empty string");
		return 1;
	}
	if (gid.len >= 2 && gid.ptr[0] == '_' && gid.ptr[1] == '_') {
		E1("ERR flow group_id is reserved");
		return 1;
	}
	if (q->f[FF_PARTITION_KEY].t.len == 0) {
		E1("ERR flow partition_key is required");
		return 1;
	}
	if ((o = F(q, FF_WAIT)) != NULL) {
		if (!one_of(o->t, "all", "any", "none")) {
			E1("ERR flow wait has unsupported value");
			return 1;
		}
		g.wait = o->t;
	}
	if ((o = F(q, FF_ON_CHILD_FAILED)) != NULL) {
		if (!one_of(o->t, "fail_parent", "ignore", NULL)) {
			E1("ERR flow on_child_failed has unsupported value");
			return 1;
		}
		g.on_child_failed = o->t;
	}
	if ((o = F(q, FF_ON_PARENT_CLOSED)) != NULL) {
		if (!one_of(o->t, "cancel_children", "abandon_children",
		            NULL)) {
			E1("ERR flow on_parent_closed has unsupported value");
			return 1;
		}
		g.on_parent_closed = o->t;
	}
	if (F(q, FF_SUCCESS) == NULL || F(q, FF_FAILURE) == NULL ||
	    q->f[FF_SUCCESS].t.len == 0 || q->f[FF_FAILURE].t.len == 0) {
		E1("ERR flow exhaust_to must include success and failure "
		   "states");
		return 1;
	}
	g.success = q->f[FF_SUCCESS].t;
	g.failure = q->f[FF_FAILURE].t;
	if (fsnp_bytes_eq(g.success, "running") ||
	    fsnp_bytes_eq(g.failure, "running")) {
		E1("ERR flow running state is only entered by FLOW.CLAIM_DUE");
		return 1;
	}
	if (!fsnp_bytes_eq(g.wait, "none")) {
		if ((o = F(q, FF_WAIT_STATE)) == NULL || o->t.len == 0) {
			E1("ERR flow wait_state is required when waiting for "
			   "children");
			return 1;
		}
		if (check_target(o->t, err) != 0) {
			return 1;
		}
		g.wait_state = o->t;
	}
	if (kids->as.count == 0) {
		E1("ERR flow children must be a non-empty list");
		return 1;
	}
	if (kids->as.count > 1000) {
		E1("ERR flow batch item count exceeds maximum 1000");
		return 1;
	}
	digest = fnv(digest, kids->enc, kids->enc_len);
	for (enum flow_field f = FF_WAIT; f <= FF_ON_PARENT_CLOSED; f++) {
		if (F(q, f) != NULL) {
			digest = fnv(digest, q->f[f].v.enc, q->f[f].v.enc_len);
		}
	}
	g.digest = (int64_t)(digest & (uint64_t)INT64_MAX);
	if ((rv = load(c, q, &old, err)) <= 0) {
		return rv < 0 ? -1 : 1;
	}
	part = old.s[RS_PARTITION_KEY];
	if (flow_cgroup_get(&old, gid, &had) == 1) {
		if (had.digest != g.digest) {
			E1("ERR flow child group idempotency conflict");
			return 1;
		}
		reply_ok(w);
		return 0;
	}
	if ((o = F(q, FF_FROM_STATE)) != NULL &&
	    !frec_eq(&old, RS_STATE, o->t)) {
		E1("ERR flow wrong state");
		return 1;
	}
	if (frec_is_terminal(&old)) {
		E1("ERR flow parent is terminal");
		return 1;
	}
	if (old.i[RI_FENCING_TOKEN] != q->f[FF_FENCING_TOKEN].i ||
	    (leased(&old) ? lt == NULL || !frec_eq(&old, RS_LEASE_TOKEN, lt->t)
	                  : lt != NULL)) {
		E1("ERR stale flow lease");
		return 1;
	}
	/* Every child is checked before anything is written. */
	reqs = calloc(kids->as.count, sizeof *reqs);
	if (reqs == NULL) {
		abort();
	}
	fsnp_iter_init(&it, kids);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req *cq = &reqs[n];
		struct frec ex;
		struct flow_err sub;
		if (e.tag != FSNP_MAP ||
		    flow_body_decode(FSNP_OP_FLOW_CREATE, &e, cq, &sub) != 0) {
			if (e.tag == FSNP_MAP &&
			    sub.status == FLOW_STATUS_ERROR) {
				*err = sub;
			} else {
				flow_fail(err, FLOW_STATUS_BAD_REQUEST,
				          "ERR native flow item is invalid");
			}
			goto out;
		}
		if (F(cq, FF_PARTITION_KEY) != NULL &&
		    bytes_cmp(cq->f[FF_PARTITION_KEY].t, part) != 0) {
			E1("ERR flow parent partition mismatch");
			goto out;
		}
		cq->f[FF_PARTITION_KEY].set = true;
		cq->f[FF_PARTITION_KEY].t = part;
		if (F(cq, FF_NOW_MS) == NULL && F(q, FF_NOW_MS) != NULL) {
			cq->f[FF_NOW_MS] = q->f[FF_NOW_MS];
		}
		if (check_create(cq, err) != 0) {
			goto out;
		}
		if (bytes_cmp(cq->f[FF_ID].t, old.s[RS_ID]) == 0) {
			E1("ERR flow child id must differ from parent id");
			goto out;
		}
		for (uint32_t j = 0; j < n; j++) {
			if (bytes_cmp(reqs[j].f[FF_ID].t, cq->f[FF_ID].t) ==
			    0) {
				E1("ERR flow duplicate id in batch");
				goto out;
			}
		}
		if ((rv = frec_load(c, part, cq->f[FF_ID].t, &ex)) != 0) {
			if (rv < 0) {
				res = -1;
				goto out;
			}
			E1("ERR flow already exists");
			goto out;
		}
		n++;
	}
	/* The parent waits (or goes on at once with wait none). */
	r = old;
	g.total = n;
	g.resolved = fsnp_bytes_eq(g.wait, "none");
	{
		struct wbuf ib;
		struct fsnp_writer iw;
		const uint8_t *p;
		size_t len;
		wbuf_init(&ib);
		fsnp_w_init(&iw, &ib);
		fsnp_w_array_begin(&iw);
		for (uint32_t j = 0; j < n; j++) {
			fsnp_w_bin(&iw, reqs[j].f[FF_ID].t.ptr,
			           reqs[j].f[FF_ID].t.len);
		}
		fsnp_w_array_end(&iw);
		(void)fsnp_w_finish(&iw);
		len = ib.len;
		p = fctx_keep(c, &ib);
		(void)fsnp_value_decode(p, len, NULL, &g.children, NULL);
	}
	flow_cgroup_put(c, &r, gid, &g);
	target = g.resolved ? g.success : g.wait_state;
	frec_set_str(&r, RS_STATE, target);
	bump(c, &r);
	clear_lease(&r);
	if (g.resolved && !frec_terminal_state(target)) {
		frec_set_int(&r, RI_NEXT_RUN_AT_MS, (int64_t)c->now);
	} else {
		frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
	}
	if (frec_terminal_state(target)) {
		stamp_retention(c, &r, r.i[RI_RETENTION_TTL_MS]);
	}
	{
		struct hmeta meta[1];
		meta[0].name = "group_id";
		meta[0].v = text_val(c, gid);
		frec_history(c, &r, "children_spawned", meta, 1);
	}
	/* The parent first: a child created terminal counts at once. */
	frec_save(c, &old, &r);
	for (uint32_t j = 0; j < n; j++) {
		struct fsnp_bytes st = F(&reqs[j], FF_STATE) != NULL
		                           ? reqs[j].f[FF_STATE].t
		                           : fb("queued");
		struct frec cr;
		new_record(c, &reqs[j], part, st, &cr);
		frec_set_str(&cr, RS_PARENT_FLOW_ID, old.s[RS_ID]);
		frec_set_str(&cr, RS_PARENT_PARTITION_KEY, part);
		frec_set_str(&cr, RS_CHILD_GROUP, gid);
		frec_set_str(&cr, RS_ROOT_FLOW_ID,
		             old.s_set[RS_ROOT_FLOW_ID] ? old.s[RS_ROOT_FLOW_ID]
		                                        : old.s[RS_ID]);
		if (frec_terminal_state(st)) {
			frec_clear_int(&cr, RI_NEXT_RUN_AT_MS);
			stamp_retention(c, &cr, cr.i[RI_RETENTION_TTL_MS]);
		}
		frec_history(c, &cr, "created", NULL, 0);
		frec_save(c, NULL, &cr);
	}
	reply_ok(w);
	res = 0;
out:
	free(reqs);
	return res;
}

/* --- Batches -------------------------------------------------------------- */

static int run_single(struct fctx *c, const struct flow_req *q,
                      struct fsnp_writer *w, struct flow_err *err);

static int op_many(struct fctx *c, const struct flow_req *q,
                   struct fsnp_writer *w, struct flow_err *err)
{
	const struct fsnp_val *items = &q->f[FF_ITEMS].v;
	bool independent = F(q, FF_INDEPENDENT) && q->f[FF_INDEPENDENT].b;
	bool ok_reply = false, all_ok = true;
	const struct flow_opt *pk = F(q, FF_PARTITION_KEY), *o;
	struct fsnp_iter it, it2;
	struct fsnp_val e, e2;
	struct wbuf lb;
	struct fsnp_writer lw;
	size_t i = 0;

	if ((o = F(q, FF_RETURN)) != NULL) {
		if (fsnp_bytes_eq(o->t, "ok_on_success") ||
		    fsnp_bytes_eq(o->t, "OK_ON_SUCCESS")) {
			ok_reply = true;
		} else if (!fsnp_bytes_eq(o->t, "items")) {
			E1("ERR flow return option is not supported");
			return 1;
		}
	}
	if (items->as.count == 0) {
		E1("ERR flow items must be a non-empty list");
		return 1;
	}
	if (items->as.count > 1000) {
		E1("ERR flow batch item count exceeds maximum 1000");
		return 1;
	}
	/* Validate every item (and duplicates) first. */
	fsnp_iter_init(&it, items);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req a, b;
		size_t j = 0;
		if (flow_body_decode_item(q, &e, &a, err) != 0) {
			return 1;
		}
		if (pk != NULL && F(&a, FF_PARTITION_KEY) != NULL &&
		    bytes_cmp(a.f[FF_PARTITION_KEY].t, pk->t) != 0) {
			E1("ERR flow partition_key mismatch in batch");
			return 1;
		}
		if (independent) {
			i++;
			continue;
		}
		fsnp_iter_init(&it2, items);
		while (j < i && fsnp_iter_next(&it2, NULL, &e2)) {
			struct flow_err e3;
			if (flow_body_decode_item(q, &e2, &b, &e3) == 0 &&
			    F(&a, FF_ID) && F(&b, FF_ID) &&
			    bytes_cmp(a.f[FF_ID].t, b.f[FF_ID].t) == 0) {
				E1("ERR flow duplicate id in batch");
				return 1;
			}
			j++;
		}
		i++;
	}
	wbuf_init(&lb);
	fsnp_w_init(&lw, &lb);
	fsnp_w_array_begin(&lw);
	fsnp_iter_init(&it, items);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req a;
		struct flow_err ie;
		struct wbuf ib;
		struct fsnp_writer iw;
		int rv;

		(void)flow_body_decode_item(q, &e, &a, &ie);
		wbuf_init(&ib);
		fsnp_w_init(&iw, &ib);
		rv = run_single(c, &a, &iw, &ie);
		wbuf_free(&ib);
		if (rv < 0) {
			wbuf_free(&lb);
			return -1;
		}
		if (rv != 0) {
			if (!independent) {
				wbuf_free(&lb);
				*err = ie;
				return 1;
			}
			all_ok = false;
			fsnp_w_array_begin(&lw);
			fsnp_w_str(&lw, "error");
			fsnp_w_str(&lw, ie.msg);
			fsnp_w_array_end(&lw);
		} else {
			fsnp_w_str(&lw, "OK");
		}
	}
	fsnp_w_array_end(&lw);
	(void)fsnp_w_finish(&lw);
	if (!independent || (ok_reply && all_ok)) {
		reply_ok(w);
	} else {
		struct fsnp_val lv;
		size_t n = lb.len;
		const uint8_t *p = fctx_keep(c, &lb);
		(void)fsnp_value_decode(p, n, NULL, &lv, NULL);
		fsnp_w_val(w, &lv);
	}
	wbuf_free(&lb);
	return 0;
}

static int run_single(struct fctx *c, const struct flow_req *q,
                      struct fsnp_writer *w, struct flow_err *err)
{
	set_now(c, q);
	switch (q->opcode) {
	case FSNP_OP_FLOW_CREATE:
		return op_create(c, q, w, err);
	case FSNP_OP_FLOW_GET:
		return op_get(c, q, w, err);
	case FSNP_OP_FLOW_CLAIM_DUE:
	case FSNP_OP_FLOW_RECLAIM:
		return op_claim(c, q, w, err);
	case FSNP_OP_FLOW_COMPLETE:
		return op_finish(c, q, w, err, true);
	case FSNP_OP_FLOW_FAIL:
		return op_finish(c, q, w, err, false);
	case FSNP_OP_FLOW_TRANSITION:
		return op_transition(c, q, w, err);
	case FSNP_OP_FLOW_RETRY:
		return op_retry(c, q, w, err);
	case FSNP_OP_FLOW_CANCEL:
		return op_cancel(c, q, w, err);
	case FSNP_OP_FLOW_EXTEND_LEASE:
		return op_extend(c, q, w, err);
	case FSNP_OP_FLOW_HISTORY:
		return op_history(c, q, w, err);
	case FSNP_OP_FLOW_VALUE_PUT:
		return op_value_put(c, q, w, err);
	case FSNP_OP_FLOW_VALUE_MGET:
		return op_value_mget(c, q, w, err);
	case FSNP_OP_FLOW_SIGNAL:
		return op_signal(c, q, w, err);
	case FSNP_OP_FLOW_INFO:
		return op_info(c, q, w, err);
	case FSNP_OP_FLOW_POLICY_GET:
		return op_policy_get(c, q, w, err);
	case FSNP_OP_FLOW_POLICY_SET:
		return op_policy_set(c, q, w, err);
	case FSNP_OP_FLOW_START_AND_CLAIM:
		return op_start_and_claim(c, q, w, err);
	case FSNP_OP_FLOW_STEP_CONTINUE:
		return op_step_continue(c, q, w, err);
	case FSNP_OP_FLOW_REWIND:
		return op_rewind(c, q, w, err);
	case FSNP_OP_FLOW_RUN_STEPS_MANY:
		return op_run_steps(c, q, w, err);
	case FSNP_OP_FLOW_RETENTION_CLEANUP:
		return op_retention(c, q, w, err);
	case FSNP_OP_FLOW_SPAWN_CHILDREN:
		return op_spawn(c, q, w, err);
	case FSNP_OP_FLOW_STATS:
	case FSNP_OP_FLOW_ATTRIBUTES:
	case FSNP_OP_FLOW_ATTRIBUTE_VALUES:
		return flow_stats_run(c, q, w, err);
	default:
		flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		          "ERR native unsupported flow opcode 0x%04x",
		          q->opcode);
		return 1;
	}
}

int flow_op_run(struct fctx *c, const struct flow_req *q, struct fsnp_writer *w,
                struct flow_err *err)
{
	switch (q->opcode) {
	case FSNP_OP_FLOW_CREATE_MANY:
	case FSNP_OP_FLOW_COMPLETE_MANY:
	case FSNP_OP_FLOW_FAIL_MANY:
	case FSNP_OP_FLOW_RETRY_MANY:
	case FSNP_OP_FLOW_CANCEL_MANY:
	case FSNP_OP_FLOW_TRANSITION_MANY:
		return op_many(c, q, w, err);
	default:
		return run_single(c, q, w, err);
	}
}

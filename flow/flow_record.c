/* Flow records, keys, indexes and history (flow_record.h). */
#include "flow/flow_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_children.h"
#include "flow/flow_index.h"
#include "store/keys.h"
#include "wire/flow_route.h"

static const char *const str_names[RS_N] = {
    "id",
    "type",
    "state",
    "partition_key",
    "run_state",
    "lease_owner",
    "lease_token",
    "parent_flow_id",
    "root_flow_id",
    "correlation_id",
    "parent_partition_key",
    "_child_group",
};

static const char *const int_names[RI_N] = {
    "version",
    "attempts",
    "fencing_token",
    "created_at_ms",
    "updated_at_ms",
    "next_run_at_ms",
    "lease_deadline_ms",
    "priority",
    "ttl_ms",
    "retention_ttl_ms",
    "max_active_ms",
    "terminal_retention_until_ms",
    "history_hot_max_events",
    "history_max_events",
    "_hist_lo",
    "_hist_ms",
    "_retry_fencing",
    "_create_digest",
};

static const char *const val_names[RV_N] = {
    "payload",    "result",     "error",        "attributes",
    "state_meta", "value_refs", "child_groups",
};

void fctx_init(struct fctx *c, struct tx *tx, uint64_t skew, uint64_t seed)
{
	memset(c, 0, sizeof *c);
	c->tx = tx;
	c->group = store_tx_group(tx);
	c->entry_now = store_tx_now_ms(tx);
	c->now = c->entry_now;
	c->skew = skew;
	c->seed = seed;
	c->write = store_tx_writable(tx);
	sbuf_init(&c->key);
}

void fctx_fini(struct fctx *c)
{
	free(c->chg);
	for (size_t i = 0; i < c->nkeep; i++) {
		free(c->keep[i]);
	}
	free(c->keep);
	sbuf_free(&c->key);
}

static void keep_ptr(struct fctx *c, void *p)
{
	if (c->nkeep == c->capkeep) {
		c->capkeep = c->capkeep ? c->capkeep * 2 : 16;
		c->keep = store_xrealloc(c->keep, c->capkeep * sizeof(void *));
	}
	c->keep[c->nkeep++] = p;
}

const uint8_t *fctx_keep(struct fctx *c, struct wbuf *b)
{
	uint8_t *p = b->data;

	if (p == NULL) {
		p = store_xmalloc(1);
	}
	keep_ptr(c, p);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

const uint8_t *fctx_dup(struct fctx *c, const void *p, size_t len)
{
	uint8_t *d = store_xmalloc(len ? len : 1);

	if (len) {
		memcpy(d, p, len);
	}
	keep_ptr(c, d);
	return d;
}

bool frec_terminal_state(struct fsnp_bytes s)
{
	return fsnp_bytes_eq(s, "completed") || fsnp_bytes_eq(s, "failed") ||
	       fsnp_bytes_eq(s, "cancelled");
}

bool frec_is_terminal(const struct frec *r)
{
	return frec_terminal_state(r->s[RS_STATE]);
}

bool frec_is(const struct frec *r, enum rec_str f, const char *s)
{
	return r->s_set[f] && fsnp_bytes_eq(r->s[f], s);
}

bool frec_eq(const struct frec *r, enum rec_str f, struct fsnp_bytes b)
{
	return r->s_set[f] && r->s[f].len == b.len &&
	       (b.len == 0 || memcmp(r->s[f].ptr, b.ptr, b.len) == 0);
}

void frec_set_str(struct frec *r, enum rec_str f, struct fsnp_bytes b)
{
	r->s[f] = b;
	r->s_set[f] = true;
}

void frec_set_cstr(struct frec *r, enum rec_str f, const char *s)
{
	frec_set_str(r, f, fb(s));
}

void frec_clear_str(struct frec *r, enum rec_str f)
{
	r->s_set[f] = false;
	r->s[f].ptr = NULL;
	r->s[f].len = 0;
}

void frec_set_int(struct frec *r, enum rec_int f, int64_t v)
{
	r->i[f] = v;
	r->i_set[f] = true;
}

void frec_clear_int(struct frec *r, enum rec_int f)
{
	r->i[f] = 0;
	r->i_set[f] = false;
}

void frec_set_val(struct frec *r, enum rec_val f, const struct fsnp_val *v)
{
	if (v == NULL) {
		r->v_set[f] = false;
		return;
	}
	r->v[f] = *v;
	r->v_set[f] = true;
}

/* --- Keys ----------------------------------------------------------------- */

static void kstart(struct sbuf *k, uint32_t group, uint8_t type)
{
	sbuf_reset(k);
	sbuf_u32(k, group);
	sbuf_u8(k, type);
}

static void kpart(struct sbuf *k, struct fsnp_bytes b)
{
	sbuf_lbytes(k, b.ptr, b.len);
}

void fkey_rec(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
              struct fsnp_bytes id)
{
	kstart(k, group, K_FLOW);
	kpart(k, part);
	kpart(k, id);
}

void fkey_due_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                     struct fsnp_bytes type)
{
	kstart(k, group, K_FLOW_DUE);
	kpart(k, part);
	kpart(k, type);
}

/* The due group of a record (its due key up to the priority byte), under
 * key type `type` (K_FLOW_DUE, or K_FLOW_FLOOR for the group's floor). */
static void fkey_group(struct sbuf *k, uint32_t group, uint8_t type,
                       const struct frec *r)
{
	kstart(k, group, type);
	kpart(k, r->s[RS_PARTITION_KEY]);
	kpart(k, r->s[RS_TYPE]);
	kpart(k, r->s[RS_STATE]);
	sbuf_u8(k, (uint8_t)(255 - r->i[RI_PRIORITY]));
}

static void fkey_due(struct sbuf *k, uint32_t group, const struct frec *r)
{
	fkey_group(k, group, K_FLOW_DUE, r);
	sbuf_u64(k, (uint64_t)r->i[RI_NEXT_RUN_AT_MS]);
	kpart(k, r->s[RS_ID]);
}

void fkey_autofloor(struct sbuf *k, uint32_t group, struct fsnp_bytes type,
                    struct fsnp_bytes state, int priority);

/* Keeps the group's floor (and, in an auto partition, the type's summary
 * floor) at or below a due entry being added. */
static void floor_lower(struct fctx *c, const struct frec *r)
{
	uint64_t next = (uint64_t)r->i[RI_NEXT_RUN_AT_MS];
	struct sbuf v;
	uint8_t b[8];
	int rv;

	sbuf_init(&v);
	fkey_group(&c->key, c->group, K_FLOW_FLOOR, r);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
	if (rv == 0 || (rv == 1 && (v.len != 8 || be_get64(v.p) > next))) {
		be_put64(b, next);
		store_tx_put(c->tx, c->key.p, c->key.len, b, 8);
		/* An auto partition's floor went down: so may the type's
		 * summary over the auto partitions. */
		unsigned bucket;
		if (flow_route_is_auto(r->s[RS_PARTITION_KEY].ptr,
		                       r->s[RS_PARTITION_KEY].len, &bucket)) {
			fkey_autofloor(&c->key, c->group, r->s[RS_TYPE],
			               r->s[RS_STATE], (int)r->i[RI_PRIORITY]);
			rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
			if (rv == 0 ||
			    (rv == 1 && (v.len != 8 || be_get64(v.p) > next))) {
				store_tx_put(c->tx, c->key.p, c->key.len, b, 8);
			}
		}
	}
	sbuf_free(&v);
}

void fkey_autofloor(struct sbuf *k, uint32_t group, struct fsnp_bytes type,
                    struct fsnp_bytes state, int priority)
{
	kstart(k, group, K_FLOW_AUTOFLOOR);
	kpart(k, type);
	kpart(k, state);
	sbuf_u8(k, (uint8_t)(255 - priority));
}

void fkey_hist_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                      struct fsnp_bytes id)
{
	kstart(k, group, K_FLOW_HIST);
	kpart(k, part);
	kpart(k, id);
}

void fkey_value(struct sbuf *k, uint32_t group, struct fsnp_bytes ref)
{
	kstart(k, group, K_FLOW_VALUE);
	sbuf_add(k, ref.ptr, ref.len);
}

void fkey_policy(struct sbuf *k, uint32_t group, struct fsnp_bytes type)
{
	kstart(k, group, K_FLOW_POLICY);
	sbuf_add(k, type.ptr, type.len);
}

void fkey_signal(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                 struct fsnp_bytes id, struct fsnp_bytes key)
{
	kstart(k, group, K_FLOW_SIGNAL);
	kpart(k, part);
	kpart(k, id);
	sbuf_add(k, key.ptr, key.len);
}

static void fkey_retain(struct sbuf *k, uint32_t group, const struct frec *r)
{
	kstart(k, group, K_FLOW_RETAIN);
	sbuf_u64(k, (uint64_t)r->i[RI_TERMINAL_RETENTION_UNTIL_MS]);
	kpart(k, r->s[RS_PARTITION_KEY]);
	kpart(k, r->s[RS_ID]);
}

static void fkey_active(struct sbuf *k, uint32_t group, const struct frec *r)
{
	kstart(k, group, K_FLOW_ACTIVE);
	sbuf_u64(k, (uint64_t)frec_active_deadline(r));
	kpart(k, r->s[RS_PARTITION_KEY]);
	kpart(k, r->s[RS_ID]);
}

void fkey_active_prefix(struct sbuf *k, uint32_t group)
{
	kstart(k, group, K_FLOW_ACTIVE);
}

int64_t frec_active_deadline(const struct frec *r)
{
	if (r == NULL || frec_is_terminal(r) || !r->i_set[RI_MAX_ACTIVE_MS] ||
	    !r->i_set[RI_CREATED_AT_MS] || r->i[RI_MAX_ACTIVE_MS] <= 0 ||
	    r->i[RI_CREATED_AT_MS] < 0) {
		return -1;
	}
	return r->i[RI_CREATED_AT_MS] + r->i[RI_MAX_ACTIVE_MS];
}

bool fkey_part(const uint8_t *k, size_t len, size_t *off,
               struct fsnp_bytes *out)
{
	uint32_t n;

	if (*off + 4 > len) {
		return false;
	}
	n = be_get32(k + *off);
	if (n > len - *off - 4) {
		return false;
	}
	out->ptr = k + *off + 4;
	out->len = n;
	*off += 4 + n;
	return true;
}

/* --- Load and save -------------------------------------------------------- */

static bool name_is(struct fsnp_bytes k, const char *name)
{
	size_t i = 0;

	for (; i < k.len; i++) {
		if (name[i] == '\0' || (uint8_t)name[i] != k.ptr[i]) {
			return false;
		}
	}
	return name[i] == '\0';
}

enum { REC_FIELDS = RS_N + RI_N + RV_N };

/* Field g of the record, counting the string, integer and value fields
 * one after the other. */
static const char *rec_name(int g)
{
	return g < RS_N          ? str_names[g]
	       : g < RS_N + RI_N ? int_names[g - RS_N]
	                         : val_names[g - RS_N - RI_N];
}

/* The field called `k` (as counted by rec_name), or -1. The search starts
 * at *from, where the field after the last one found is (records are
 * written in field order), and wraps; the names are distinct. */
static int rec_field(struct fsnp_bytes k, int *from)
{
	for (int n = 0, g = *from; n < REC_FIELDS; n++, g++) {
		if (g == REC_FIELDS) {
			g = 0;
		}
		if (name_is(k, rec_name(g))) {
			*from = g + 1 == REC_FIELDS ? 0 : g + 1;
			return g;
		}
	}
	return -1;
}

/* One pass over the record's map: each field takes the value of the last
 * entry of its name, as a lookup per field would. */
int frec_decode(const uint8_t *p, size_t len, struct frec *r)
{
	struct fsnp_val m, v, sv[RS_N], iv[RI_N], vv[RV_N];
	bool sf[RS_N] = {false}, inf[RI_N] = {false}, vf[RV_N] = {false};
	struct fsnp_iter it;
	struct fsnp_bytes k;
	int f, from = 0;

	memset(r, 0, sizeof *r);
	if (fsnp_value_decode_body(p, len, NULL, &m) != 0 ||
	    m.tag != FSNP_MAP) {
		return -1;
	}
	fsnp_iter_init(&it, &m);
	while (fsnp_iter_next(&it, &k, &v)) {
		if ((f = rec_field(k, &from)) < 0) {
			continue;
		}
		if (f < RS_N) {
			sv[f] = v;
			sf[f] = true;
		} else if (f < RS_N + RI_N) {
			iv[f - RS_N] = v;
			inf[f - RS_N] = true;
		} else {
			vv[f - RS_N - RI_N] = v;
			vf[f - RS_N - RI_N] = true;
		}
	}
	for (f = 0; f < RS_N; f++) {
		if (sf[f] && sv[f].tag == FSNP_BIN) {
			frec_set_str(r, f, sv[f].as.bin);
		}
	}
	for (f = 0; f < RI_N; f++) {
		int64_t i;
		if (inf[f] && fsnp_val_i64(&iv[f], &i) == 0) {
			frec_set_int(r, f, i);
		}
	}
	for (f = 0; f < RV_N; f++) {
		if (vf[f]) {
			frec_set_val(r, f, &vv[f]);
		}
	}
	return r->s_set[RS_ID] && r->s_set[RS_TYPE] && r->s_set[RS_STATE] &&
	               r->s_set[RS_PARTITION_KEY]
	           ? 0
	           : -1;
}

int frec_load(struct fctx *c, struct fsnp_bytes part, struct fsnp_bytes id,
              struct frec *r)
{
	struct sbuf v;
	int rv;

	sbuf_init(&v);
	fkey_rec(&c->key, c->group, part, id);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
	if (rv != 1) {
		sbuf_free(&v);
		return rv;
	}
	keep_ptr(c, v.p);
	if (frec_decode(v.p, v.len, r) != 0) {
		return 0; /* unreadable: treated as absent */
	}
	return 1;
}

static void encode_rec(struct fsnp_writer *w, const struct frec *r)
{
	fsnp_w_map_begin(w);
	for (int f = 0; f < RS_N; f++) {
		if (r->s_set[f]) {
			fsnp_w_key(w, str_names[f]);
			fsnp_w_bin(w, r->s[f].ptr, r->s[f].len);
		}
	}
	for (int f = 0; f < RI_N; f++) {
		if (r->i_set[f]) {
			fsnp_w_key(w, int_names[f]);
			fsnp_w_i64(w, r->i[f]);
		}
	}
	for (int f = 0; f < RV_N; f++) {
		if (r->v_set[f]) {
			fsnp_w_key(w, val_names[f]);
			fsnp_w_val(w, &r->v[f]);
		}
	}
	fsnp_w_map_end(w);
}

static bool has_due(const struct frec *r)
{
	return r != NULL && !frec_is_terminal(r) && r->i_set[RI_NEXT_RUN_AT_MS];
}

static bool has_retain(const struct frec *r)
{
	return r != NULL && r->i_set[RI_TERMINAL_RETENTION_UNTIL_MS];
}

/* Keeps what the changes hook needs of `r` (copies owned by c). */
static void track_change(struct fctx *c, const struct frec *r)
{
	struct flow_change *ch;
	const enum rec_str f[4] = {RS_ID, RS_TYPE, RS_STATE, RS_PARTITION_KEY};
	struct fsnp_bytes *to[4];

	if (c->nchg == c->capchg) {
		size_t cap = c->capchg ? c->capchg * 2 : 8;
		struct flow_change *n = realloc(c->chg, cap * sizeof *n);
		if (n == NULL) {
			return; /* the waiters' safety net covers it */
		}
		c->chg = n;
		c->capchg = cap;
	}
	ch = &c->chg[c->nchg++];
	memset(ch, 0, sizeof *ch);
	to[0] = &ch->id;
	to[1] = &ch->type;
	to[2] = &ch->state;
	to[3] = &ch->partition_key;
	for (int i = 0; i < 4; i++) {
		if (r->s_set[f[i]]) {
			to[i]->ptr =
			    fctx_dup(c, r->s[f[i]].ptr, r->s[f[i]].len);
			to[i]->len = r->s[f[i]].len;
		}
	}
	ch->priority = r->i_set[RI_PRIORITY] ? r->i[RI_PRIORITY] : 0;
	ch->next_run_at_ms = has_due(r) ? r->i[RI_NEXT_RUN_AT_MS] : -1;
}

void frec_save(struct fctx *c, const struct frec *old, const struct frec *r)
{
	struct wbuf b;
	struct fsnp_writer w;

	if (has_due(old)) {
		fkey_due(&c->key, c->group, old);
		store_tx_del(c->tx, c->key.p, c->key.len);
	}
	/* The due, retention and active-time rows name the flow: the only
	 * row of each the flow can have is the old record's, deleted just
	 * before (a put of the same key then keeps it a rewrite). */
	if (has_due(r)) {
		fkey_due(&c->key, c->group, r);
		store_tx_put_new(c->tx, c->key.p, c->key.len, "", 0);
		floor_lower(c, r);
	}
	if (has_retain(old)) {
		fkey_retain(&c->key, c->group, old);
		store_tx_del(c->tx, c->key.p, c->key.len);
	}
	if (has_retain(r)) {
		fkey_retain(&c->key, c->group, r);
		store_tx_put_new(c->tx, c->key.p, c->key.len, "", 0);
	}
	if (frec_active_deadline(old) >= 0 &&
	    frec_active_deadline(old) != frec_active_deadline(r)) {
		fkey_active(&c->key, c->group, old);
		store_tx_del(c->tx, c->key.p, c->key.len);
	}
	if (frec_active_deadline(r) >= 0 &&
	    frec_active_deadline(old) != frec_active_deadline(r)) {
		fkey_active(&c->key, c->group, r);
		store_tx_put_new(c->tx, c->key.p, c->key.len, "", 0);
	}
	wbuf_init(&b);
	(void)wbuf_reserve(&b, 1024); /* a record or event: no regrowth */
	fsnp_w_init(&w, &b);
	encode_rec(&w, r);
	(void)fsnp_w_finish(&w);
	fkey_rec(&c->key, c->group, r->s[RS_PARTITION_KEY], r->s[RS_ID]);
	store_tx_put(c->tx, c->key.p, c->key.len, b.data, b.len);
	wbuf_free(&b);
	flow_index_update(c, old, r);
	if (c->track) {
		track_change(c, r);
	}
	flow_children_saved(c, old, r);
}

/* --- History -------------------------------------------------------------- */

static void w_str_or_nil(struct fsnp_writer *w, const struct frec *r,
                         enum rec_str f)
{
	if (r->s_set[f]) {
		fsnp_w_bin(w, r->s[f].ptr, r->s[f].len);
	} else {
		fsnp_w_nil(w);
	}
}

static void w_int_or_nil(struct fsnp_writer *w, const struct frec *r,
                         enum rec_int f)
{
	if (r->i_set[f]) {
		fsnp_w_i64(w, r->i[f]);
	} else {
		fsnp_w_nil(w);
	}
}

void frec_history(struct fctx *c, struct frec *r, const char *event,
                  const struct hmeta *meta, size_t nmeta)
{
	struct wbuf b;
	struct fsnp_writer w;
	char eid[48];
	int64_t version = r->i[RI_VERSION];
	int64_t ms = (int64_t)c->now;
	int64_t max = r->i_set[RI_HISTORY_MAX_EVENTS]
	                  ? r->i[RI_HISTORY_MAX_EVENTS]
	                  : 100000;
	size_t plen;

	if (r->i_set[RI_HIST_MS] && r->i[RI_HIST_MS] > ms) {
		ms = r->i[RI_HIST_MS];
	}
	frec_set_int(r, RI_HIST_MS, ms);
	if (!r->i_set[RI_HIST_LO]) {
		frec_set_int(r, RI_HIST_LO, version);
	}
	snprintf(eid, sizeof eid, "%lld-%lld", (long long)ms,
	         (long long)version);
	wbuf_init(&b);
	(void)wbuf_reserve(&b, 1024); /* a record or event: no regrowth */
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, eid);
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, "event");
	fsnp_w_str(&w, event);
	fsnp_w_str(&w, "version");
	fsnp_w_i64(&w, version);
	fsnp_w_str(&w, "at");
	fsnp_w_i64(&w, (int64_t)c->now);
	for (int f = RS_ID; f <= RS_STATE; f++) {
		fsnp_w_str(&w, str_names[f]);
		w_str_or_nil(&w, r, f);
	}
	fsnp_w_str(&w, "priority");
	w_int_or_nil(&w, r, RI_PRIORITY);
	fsnp_w_str(&w, "attempts");
	w_int_or_nil(&w, r, RI_ATTEMPTS);
	fsnp_w_str(&w, "fencing_token");
	w_int_or_nil(&w, r, RI_FENCING_TOKEN);
	fsnp_w_str(&w, "created_at_ms");
	w_int_or_nil(&w, r, RI_CREATED_AT_MS);
	fsnp_w_str(&w, "updated_at_ms");
	w_int_or_nil(&w, r, RI_UPDATED_AT_MS);
	fsnp_w_str(&w, "next_run_at_ms");
	w_int_or_nil(&w, r, RI_NEXT_RUN_AT_MS);
	fsnp_w_str(&w, "lease_deadline_ms");
	w_int_or_nil(&w, r, RI_LEASE_DEADLINE_MS);
	fsnp_w_str(&w, "lease_owner");
	w_str_or_nil(&w, r, RS_LEASE_OWNER);
	fsnp_w_str(&w, "parent_flow_id");
	w_str_or_nil(&w, r, RS_PARENT_FLOW_ID);
	fsnp_w_str(&w, "root_flow_id");
	w_str_or_nil(&w, r, RS_ROOT_FLOW_ID);
	fsnp_w_str(&w, "correlation_id");
	w_str_or_nil(&w, r, RS_CORRELATION_ID);
	for (size_t i = 0; i < nmeta; i++) {
		fsnp_w_str(&w, meta[i].name);
		fsnp_w_val(&w, &meta[i].v);
	}
	fsnp_w_array_end(&w);
	fsnp_w_array_end(&w);
	(void)fsnp_w_finish(&w);
	fkey_hist_prefix(&c->key, c->group, r->s[RS_PARTITION_KEY],
	                 r->s[RS_ID]);
	plen = c->key.len;
	sbuf_u64(&c->key, (uint64_t)version);
	store_tx_put(c->tx, c->key.p, c->key.len, b.data, b.len);
	wbuf_free(&b);
	while (version - r->i[RI_HIST_LO] + 1 > max) {
		c->key.len = plen;
		sbuf_u64(&c->key, (uint64_t)r->i[RI_HIST_LO]);
		store_tx_del(c->tx, c->key.p, c->key.len);
		r->i[RI_HIST_LO]++;
	}
}

/* --- The public record ---------------------------------------------------- */

static void w_payload(struct fsnp_writer *w, const struct frec *r,
                      enum rec_val f, uint64_t max_bytes)
{
	char key[32];
	const char *name = val_names[f];

	if (!r->v_set[f]) {
		fsnp_w_key(w, name);
		fsnp_w_nil(w);
		return;
	}
	if (max_bytes > 0 && r->v[f].enc_len > max_bytes) {
		snprintf(key, sizeof key, "%s_omitted", name);
		fsnp_w_key(w, key);
		fsnp_w_bool(w, true);
		snprintf(key, sizeof key, "%s_size", name);
		fsnp_w_key(w, key);
		fsnp_w_i64(w, (int64_t)r->v[f].enc_len);
		return;
	}
	fsnp_w_key(w, name);
	fsnp_w_val(w, &r->v[f]);
}

static void w_key_str(struct fsnp_writer *w, const char *k,
                      const struct frec *r, enum rec_str f)
{
	fsnp_w_key(w, k);
	w_str_or_nil(w, r, f);
}

static void w_key_int(struct fsnp_writer *w, const char *k,
                      const struct frec *r, enum rec_int f)
{
	fsnp_w_key(w, k);
	w_int_or_nil(w, r, f);
}

static void w_key_map(struct fsnp_writer *w, const char *k,
                      const struct frec *r, enum rec_val f)
{
	fsnp_w_key(w, k);
	if (r->v_set[f]) {
		fsnp_w_val(w, &r->v[f]);
	} else {
		fsnp_w_map_begin(w);
		fsnp_w_map_end(w);
	}
}

void frec_write_public(struct fsnp_writer *w, const struct frec *r,
                       bool payload, uint64_t max_bytes,
                       const struct fsnp_val *values)
{
	fsnp_w_map_begin(w);
	w_key_str(w, "id", r, RS_ID);
	w_key_str(w, "type", r, RS_TYPE);
	w_key_str(w, "state", r, RS_STATE);
	w_key_int(w, "version", r, RI_VERSION);
	w_key_int(w, "priority", r, RI_PRIORITY);
	w_key_str(w, "partition_key", r, RS_PARTITION_KEY);
	fsnp_w_key(w, "payload_ref");
	fsnp_w_nil(w);
	fsnp_w_key(w, "result_ref");
	fsnp_w_nil(w);
	fsnp_w_key(w, "error_ref");
	fsnp_w_nil(w);
	w_key_int(w, "created_at_ms", r, RI_CREATED_AT_MS);
	w_key_int(w, "updated_at_ms", r, RI_UPDATED_AT_MS);
	w_key_int(w, "next_run_at_ms", r, RI_NEXT_RUN_AT_MS);
	w_key_int(w, "lease_deadline_ms", r, RI_LEASE_DEADLINE_MS);
	w_key_str(w, "lease_owner", r, RS_LEASE_OWNER);
	w_key_str(w, "lease_token", r, RS_LEASE_TOKEN);
	w_key_int(w, "fencing_token", r, RI_FENCING_TOKEN);
	w_key_int(w, "attempts", r, RI_ATTEMPTS);
	w_key_int(w, "history_max_events", r, RI_HISTORY_MAX_EVENTS);
	w_key_int(w, "history_hot_max_events", r, RI_HISTORY_HOT_MAX_EVENTS);
	w_key_map(w, "child_groups", r, RV_CHILD_GROUPS);
	w_key_str(w, "parent_flow_id", r, RS_PARENT_FLOW_ID);
	w_key_str(w, "parent_partition_key", r, RS_PARENT_PARTITION_KEY);
	w_key_str(w, "root_flow_id", r, RS_ROOT_FLOW_ID);
	w_key_str(w, "correlation_id", r, RS_CORRELATION_ID);
	w_key_int(w, "terminal_retention_until_ms", r,
	          RI_TERMINAL_RETENTION_UNTIL_MS);
	w_key_int(w, "ttl_ms", r, RI_TTL_MS);
	w_key_int(w, "retention_ttl_ms", r, RI_RETENTION_TTL_MS);
	w_key_str(w, "run_state", r, RS_RUN_STATE);
	w_key_map(w, "value_refs", r, RV_VALUE_REFS);
	w_key_int(w, "max_active_ms", r, RI_MAX_ACTIVE_MS);
	w_key_map(w, "attributes", r, RV_ATTRIBUTES);
	w_key_map(w, "state_meta", r, RV_STATE_META);
	if (payload) {
		w_payload(w, r, RV_PAYLOAD, max_bytes);
		w_payload(w, r, RV_RESULT, max_bytes);
		w_payload(w, r, RV_ERROR, max_bytes);
	}
	if (values != NULL) {
		fsnp_w_key(w, "values");
		fsnp_w_val(w, values);
	}
	fsnp_w_map_end(w);
}

/* Child groups (flow_children.h). */
#include "flow/flow_children.h"

#include <string.h>

static const char *const texts[] = {
    "wait",    "wait_state",      "success",
    "failure", "on_child_failed", "on_parent_closed",
};
static const char *const ints[] = {"total", "done", "failed", "digest"};

int flow_cgroup_get(const struct frec *r, struct fsnp_bytes gid,
                    struct cgroup *g)
{
	struct fsnp_bytes *t[6] = {
	    &g->wait,    &g->wait_state,      &g->success,
	    &g->failure, &g->on_child_failed, &g->on_parent_closed};
	int64_t *n[4] = {&g->total, &g->done, &g->failed, &g->digest};
	struct fsnp_val e, v;

	memset(g, 0, sizeof *g);
	if (!r->v_set[RV_CHILD_GROUPS] ||
	    fsnp_map_get_n(&r->v[RV_CHILD_GROUPS], gid.ptr, gid.len, &e) != 0 ||
	    e.tag != FSNP_MAP) {
		return 0;
	}
	for (int i = 0; i < 6; i++) {
		if (fsnp_map_get(&e, texts[i], &v) == 0 && v.tag == FSNP_BIN) {
			*t[i] = v.as.bin;
		}
	}
	for (int i = 0; i < 4; i++) {
		if (fsnp_map_get(&e, ints[i], &v) == 0) {
			(void)fsnp_val_i64(&v, n[i]);
		}
	}
	if (fsnp_map_get(&e, "children", &v) == 0 && v.tag == FSNP_ARRAY) {
		g->children = v;
	} else {
		g->children.tag = FSNP_NIL;
	}
	g->resolved =
	    fsnp_map_get(&e, "resolved", &v) == 0 && v.tag == FSNP_TRUE;
	return 1;
}

void flow_cgroup_put(struct fctx *c, struct frec *r, struct fsnp_bytes gid,
                     const struct cgroup *g)
{
	const struct fsnp_bytes *t[6] = {
	    &g->wait,    &g->wait_state,      &g->success,
	    &g->failure, &g->on_child_failed, &g->on_parent_closed};
	const int64_t *n[4] = {&g->total, &g->done, &g->failed, &g->digest};
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;
	const uint8_t *p;
	size_t len;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	if (r->v_set[RV_CHILD_GROUPS]) {
		fsnp_iter_init(&it, &r->v[RV_CHILD_GROUPS]);
		while (fsnp_iter_next(&it, &k, &v)) {
			if (k.len == gid.len &&
			    memcmp(k.ptr, gid.ptr, k.len) == 0) {
				continue;
			}
			fsnp_w_key_bin(&w, k.ptr, k.len);
			fsnp_w_val(&w, &v);
		}
	}
	fsnp_w_key_bin(&w, gid.ptr, gid.len);
	fsnp_w_map_begin(&w);
	for (int i = 0; i < 6; i++) {
		fsnp_w_key(&w, texts[i]);
		if (t[i]->ptr != NULL) {
			fsnp_w_bin(&w, t[i]->ptr, t[i]->len);
		} else {
			fsnp_w_nil(&w);
		}
	}
	for (int i = 0; i < 4; i++) {
		fsnp_w_key(&w, ints[i]);
		fsnp_w_i64(&w, *n[i]);
	}
	fsnp_w_key(&w, "children");
	if (g->children.tag == FSNP_ARRAY) {
		fsnp_w_val(&w, &g->children);
	} else {
		fsnp_w_array_begin(&w);
		fsnp_w_array_end(&w);
	}
	fsnp_w_key(&w, "resolved");
	fsnp_w_bool(&w, g->resolved);
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	(void)fsnp_w_finish(&w);
	len = b.len;
	p = fctx_keep(c, &b);
	if (fsnp_value_decode(p, len, NULL, &v, NULL) == 0) {
		frec_set_val(r, RV_CHILD_GROUPS, &v);
	}
}

/* Moves a waiting parent to `to` (its group decided). */
static void resolve(struct fctx *c, struct frec *p, struct fsnp_bytes to)
{
	frec_set_str(p, RS_STATE, to);
	frec_set_int(p, RI_VERSION, p->i[RI_VERSION] + 1);
	frec_set_int(p, RI_UPDATED_AT_MS, (int64_t)c->now);
	frec_clear_str(p, RS_LEASE_OWNER);
	frec_clear_str(p, RS_LEASE_TOKEN);
	frec_set_int(p, RI_LEASE_DEADLINE_MS, 0);
	if (frec_terminal_state(to)) {
		uint64_t base = c->now > c->entry_now ? c->now : c->entry_now;
		uint64_t until = base + (uint64_t)p->i[RI_RETENTION_TTL_MS];
		frec_clear_int(p, RI_NEXT_RUN_AT_MS);
		frec_set_int(p, RI_TERMINAL_RETENTION_UNTIL_MS,
		             until > 9007199254740991ULL ? 9007199254740991LL
		                                         : (int64_t)until);
	} else {
		frec_set_int(p, RI_NEXT_RUN_AT_MS, (int64_t)c->now);
	}
	frec_history(c, p, "transitioned", NULL, 0);
}

static void child_ended(struct fctx *c, const struct frec *child)
{
	struct fsnp_bytes gid = child->s[RS_CHILD_GROUP];
	struct frec old, p;
	struct cgroup g;
	bool ok = frec_is(child, RS_STATE, "completed");
	struct fsnp_bytes to = {NULL, 0};

	if (frec_load(c, child->s[RS_PARENT_PARTITION_KEY],
	              child->s[RS_PARENT_FLOW_ID], &old) != 1 ||
	    frec_is_terminal(&old) || flow_cgroup_get(&old, gid, &g) != 1 ||
	    g.resolved) {
		return;
	}
	p = old;
	g.done++;
	if (!ok) {
		g.failed++;
	}
	if (!ok && fsnp_bytes_eq(g.on_child_failed, "fail_parent")) {
		to = g.failure;
	} else if (fsnp_bytes_eq(g.wait, "any")) {
		if (ok) {
			to = g.success;
		} else if (g.done >= g.total) {
			to = g.failure;
		}
	} else if (g.done >= g.total) {
		to = g.success;
	}
	if (to.ptr != NULL) {
		g.resolved = true;
	}
	flow_cgroup_put(c, &p, gid, &g);
	if (to.ptr != NULL) {
		resolve(c, &p, to);
	}
	frec_save(c, &old, &p);
}

static void parent_closed(struct fctx *c, const struct frec *parent)
{
	struct fsnp_iter it, ci;
	struct fsnp_bytes gid;
	struct fsnp_val e, id;

	fsnp_iter_init(&it, &parent->v[RV_CHILD_GROUPS]);
	while (fsnp_iter_next(&it, &gid, &e)) {
		struct cgroup g;
		if (flow_cgroup_get(parent, gid, &g) != 1 ||
		    !fsnp_bytes_eq(g.on_parent_closed, "cancel_children") ||
		    g.children.tag != FSNP_ARRAY) {
			continue;
		}
		fsnp_iter_init(&ci, &g.children);
		while (fsnp_iter_next(&ci, NULL, &id)) {
			struct frec old, r;
			struct hmeta meta[1];
			uint8_t reason[5 + 13] = {FSNP_BIN, 0, 0, 0, 13};
			if (id.tag != FSNP_BIN ||
			    frec_load(c, parent->s[RS_PARTITION_KEY], id.as.bin,
			              &old) != 1 ||
			    frec_is_terminal(&old)) {
				continue;
			}
			r = old;
			frec_set_cstr(&r, RS_STATE, "cancelled");
			frec_set_int(&r, RI_VERSION, r.i[RI_VERSION] + 1);
			frec_set_int(&r, RI_UPDATED_AT_MS, (int64_t)c->now);
			frec_clear_str(&r, RS_LEASE_OWNER);
			frec_clear_str(&r, RS_LEASE_TOKEN);
			frec_set_int(&r, RI_LEASE_DEADLINE_MS, 0);
			frec_clear_int(&r, RI_NEXT_RUN_AT_MS);
			{
				uint64_t until =
				    c->now + (uint64_t)r.i[RI_RETENTION_TTL_MS];
				frec_set_int(&r, RI_TERMINAL_RETENTION_UNTIL_MS,
				             (int64_t)until);
			}
			memcpy(reason + 5, "parent_closed", 13);
			meta[0].name = "reason";
			(void)fsnp_value_decode(fctx_dup(c, reason, 18), 18,
			                        NULL, &meta[0].v, NULL);
			frec_history(c, &r, "cancelled", meta, 1);
			frec_save(c, &old, &r);
		}
	}
}

void flow_children_saved(struct fctx *c, const struct frec *old,
                         const struct frec *r)
{
	if (!frec_is_terminal(r) || (old != NULL && frec_is_terminal(old))) {
		return;
	}
	if (r->s_set[RS_PARENT_FLOW_ID] && r->s_set[RS_CHILD_GROUP] &&
	    r->s_set[RS_PARENT_PARTITION_KEY]) {
		child_ended(c, r);
	}
	if (r->v_set[RV_CHILD_GROUPS]) {
		parent_closed(c, r);
	}
}

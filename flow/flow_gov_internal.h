/* Shared by the governance modules (flow_gov.c: apply, helpers, ledger,
 * overview; flow_gov_effect.c; flow_gov_approval.c; flow_gov_budget.c;
 * flow_gov_limit.c): the apply context, record keys, typed-map records and the
 * ledger. */
#ifndef LS_FLOW_FLOW_GOV_INTERNAL_H
#define LS_FLOW_FLOW_GOV_INTERNAL_H

#include "flow/flow_gov.h"
#include "flow/flow_record.h"

/* Record kinds under the K_FLOW_GOV key type (docs/storage.md). */
enum {
	GK_EFFECT = 'e',      /* part + flow id + effect key */
	GK_LEDGER = 'g',      /* part + id + u64 at_ms + u64 seq */
	GK_LEDGER_META = 'G', /* part + id: u64 next seq, u64 count */
	GK_APPROVAL = 'a',    /* approval id */
	GK_CIRCUIT = 'c',     /* scope */
	GK_BUDGET = 'b',      /* scope */
	GK_BUDGET_RES = 'r',  /* scope + reservation id */
	/* scope + u64 settle seq: the reservation id (settle order) */
	GK_BUDGET_SETTLED = 's',
	GK_LIMIT = 'l',     /* scope */
	GK_LIMIT_RES = 'k', /* scope + reservation id: u64 shard, epoch */
	/* scope + flow partition + flow id: u64 shard, the credit's id */
	GK_LIMIT_FLOW = 'f',
};

#define GOV_LEDGER_MAX 1000
#define GOV_LIST_DEFAULT 100
#define GOV_LIST_MAX 1000

struct gctx {
	struct fctx *c;
	const struct gov_req *q;
	struct fsnp_writer *w; /* the reply */
	struct wbuf deny;      /* a denial map, when denied */
	struct fsnp_writer dw;
	bool denied;
	uint32_t seq; /* ledger events of this apply */
};

#define GO(g, x) ((g)->q->f[x].set ? &(g)->q->f[x] : NULL)

/* Error returns of the object functions. */
#define GOV_ERR 1  /* err set, nothing written */
#define GOV_KEEP 2 /* err or denial, writes stand */

/* Key of a record: kind + the given parts (u32-length-prefixed). */
void gov_key(struct gctx *g, uint8_t kind, const struct fsnp_bytes *parts,
             size_t n);
/* Loads the typed map under c->key: 1 found (*m a view kept by the
 * context), 0 absent, -1 failure. */
int gov_load(struct gctx *g, struct fsnp_val *m);
/* Stores the finished writer's bytes under c->key. */
void gov_store(struct gctx *g, struct wbuf *b);

/* Map field readers (absent: the default / an empty view). */
int64_t gov_mi(const struct fsnp_val *m, const char *k, int64_t dflt);
bool gov_mhas(const struct fsnp_val *m, const char *k);
struct fsnp_bytes gov_mt(const struct fsnp_val *m, const char *k);
bool gov_mv(const struct fsnp_val *m, const char *k, struct fsnp_val *v);

/* Writes key k with text (nil when empty) / integer / value (nil when
 * absent). */
void gov_wt(struct fsnp_writer *w, const char *k, struct fsnp_bytes t);
void gov_wi(struct fsnp_writer *w, const char *k, int64_t v);
void gov_wv(struct fsnp_writer *w, const char *k, const struct fsnp_val *v);

/* Starts a denial map {code, message, reason, retryable, safe_to_retry}
 * and returns its writer for the context keys; gov_deny_end closes it. */
struct fsnp_writer *gov_deny(struct gctx *g, const char *code,
                             const char *reason, const char *message);
void gov_deny_end(struct gctx *g);

/* Appends one ledger event for (part, id). */
struct gov_event {
	const char *kind;
	struct fsnp_bytes flow_id, effect_key, effect_type, status, code,
	    message, policy, subject;
	int64_t amount;
	bool has_amount;
};
int gov_ledger(struct gctx *g, struct fsnp_bytes part, struct fsnp_bytes id,
               const struct gov_event *e);

/* A deterministic id from the command's seed (22 characters of
 * [0-9A-Za-z], as the reference's random ids): n differs per id. */
void gov_gen_id(struct gctx *g, uint64_t n, char out[23]);

/* The `limit` of a listing request (default 100, at most 1000). */
int64_t gov_list_limit(const struct gov_req *q);

/* gov_wi with nil when !set. */
void gov_wi_opt(struct fsnp_writer *w, const char *k, bool set, int64_t v);

/* The partition of flow `id` (the request's partition_key, or the id's
 * auto bucket), and the auto partition of an id; views kept by the
 * context. */
struct fsnp_bytes gov_flow_part(struct gctx *g, struct fsnp_bytes id);
struct fsnp_bytes gov_auto_part(struct gctx *g, struct fsnp_bytes id);

/* A per-group listing: up to `limit` written, `total` matched, `extra`
 * counts of the kind (pending approvals; open circuits in the low 32
 * bits, half-open ones above). */
struct gov_lister {
	struct gctx *g;
	int64_t limit, n, total, extra;
};
typedef void (*gov_item_fn)(struct gov_lister *l, const struct fsnp_val *m,
                            struct fsnp_writer *w);
/* Calls fn for every record of `kind` in the group (w may be NULL). */
int gov_walk(struct gctx *g, uint8_t kind, gov_item_fn fn, struct gov_lister *l,
             struct fsnp_writer *w);

/* The command's time for a record last updated at `updated` (*now): a
 * client now_ms older than that is refused (`ERR flow <what> now_ms cannot
 * precede <field>`, GOV_ERR); the leader's clock is raised to it. */
int gov_time(struct gctx *g, int64_t updated, const char *what,
             const char *field, uint64_t *now, struct flow_err *err);

/* Scans the records of `kind` in the group: fn per record (true: it
 * wrote one), until `limit` were written. 0, or -1. */
typedef bool (*gov_scan_fn)(struct gctx *g, const struct fsnp_val *m,
                            struct fsnp_writer *w);
int gov_scan(struct gctx *g, uint8_t kind, gov_scan_fn fn,
             struct fsnp_writer *w, int64_t limit);

/* Whether `scope` passes a listing's `scope` and `partition_key` filters
 * (the key itself, or "partition:<pk>"). */
bool gov_scope_match(const struct gov_req *q, struct fsnp_bytes scope);

/* Objects. */
int gov_effect_reserve(struct gctx *g, struct flow_err *err);
/* `to`: "confirmed", "failed" or "compensated". */
int gov_effect_settle(struct gctx *g, const char *to, struct flow_err *err);
int gov_effect_get(struct gctx *g, struct flow_err *err);
int gov_circuit_set(struct gctx *g, bool open, struct flow_err *err);
int gov_circuit_get(struct gctx *g, struct flow_err *err);
int gov_circuit_count(struct gctx *g, struct flow_err *err);
int gov_limit_claim(struct gctx *g, struct flow_err *err);
int gov_limit_return(struct gctx *g, struct flow_err *err);
int gov_limit_renew(struct gctx *g, struct flow_err *err);
void gov_circuit_item(struct gov_lister *l, const struct fsnp_val *m,
                      struct fsnp_writer *w);
int gov_approval_request(struct gctx *g, struct flow_err *err);
int gov_approval_decide(struct gctx *g, bool approve, struct flow_err *err);
int gov_approval_get(struct gctx *g, struct flow_err *err);
int gov_approval_list(struct gctx *g, struct flow_err *err);
void gov_approval_item(struct gov_lister *l, const struct fsnp_val *m,
                       struct fsnp_writer *w);
/* The listing's `status` filter is one of the four statuses. */
int gov_check_status(struct gctx *g, struct flow_err *err);
int gov_budget_reserve(struct gctx *g, struct flow_err *err);
int gov_budget_settle(struct gctx *g, bool commit, struct flow_err *err);
int gov_budget_get(struct gctx *g, struct flow_err *err);
int gov_budget_list(struct gctx *g, struct fsnp_writer *w, int64_t limit,
                    struct flow_err *err);
int gov_limit_lease(struct gctx *g, struct flow_err *err);
int gov_limit_spend(struct gctx *g, struct flow_err *err);
int gov_limit_release(struct gctx *g, struct flow_err *err);
int gov_limit_get(struct gctx *g, struct flow_err *err);
int gov_limit_list(struct gctx *g, struct fsnp_writer *w, int64_t limit,
                   struct flow_err *err);

#endif

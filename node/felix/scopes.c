/* Registered scopes, their cache, retention and admin API; see scopes.h. */
#include "node/felix/scopes.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/felix/felix_auth.h"
#include "node/felix/hmap.h"
#include "node/shards.h"
#include "store/command.h"
#include "store/result.h"
#include "store/store.h"

#define NEGATIVE_TTL_MS 1000
#define NEGATIVE_MAX 10000
#define LIST_PAGE 1000
#define TRIM_BATCH 10000
#define DROP_BATCH 10000
#define FILE_SCOPES_MAX 4096

/* One cached scope, or a negative entry. Key: kind byte + full name. */
struct sentry {
	struct scope_info info;
	bool absent;           /* negative entry */
	uint64_t absent_until; /* loop ms */
	uint64_t epoch;        /* refresh that last saw it (or local set) */
	unsigned trims;        /* STREAM_TRIM proposals in flight */
	char error[200];       /* last admin operation's failure, or "" */
	bool pending;          /* an admin operation is in flight */
};

struct waiter {
	struct waiter *next;
	scopes_lookup_cb cb;
	void *data;
};

/* A meta read (and maybe auto-create) for one name, shared by waiters. */
struct lookup {
	struct scopes *s;
	uint8_t kind;
	bool create;
	char tenant[SCOPES_TENANT_MAX + 1];
	char ns[SCOPES_NS_MAX + 1];
	char name[SCOPES_NAME_MAX + 1];
	uint8_t key[SCOPES_FULL_MAX + 1];
	size_t klen;
	struct waiter *waiters;
};

/* A declared scope from the scopes file. */
struct declared {
	uint8_t kind;
	char tenant[SCOPES_TENANT_MAX + 1];
	char ns[SCOPES_NS_MAX + 1];
	char name[SCOPES_NAME_MAX + 1];
	uint32_t shards;
	uint64_t retention_bytes, retention_ms;
	bool done;
};

struct scopes {
	const struct felix_auth *auth; /* NULL: none */
	uv_loop_t *loop;
	struct shards *shards;
	const struct log *log;
	struct scopes_config cfg;
	struct hmap cache;   /* key -> struct sentry */
	struct hmap lookups; /* key -> struct lookup */
	size_t negatives;
	uv_timer_t refresh; /* refresh.data = this */
	uv_timer_t retain;  /* retain.data = this */
	int open_handles;
	uint64_t epoch;
	bool listing;      /* a full listing is running */
	bool listed;       /* one full listing completed */
	uint8_t list_kind; /* kind being listed */
	struct declared *declared;
	size_t n_declared;
	bool closing;
	scopes_close_cb close_cb;
	void *close_data;
};

/* ---- names and keys ---------------------------------------------------- */

static int check_part(const char *what, const char *v, size_t max, bool slash,
                      char *err, size_t errlen)
{
	size_t n = strlen(v);
	if (n == 0 || n > max) {
		snprintf(err, errlen, "%s must be 1 to %zu bytes", what, max);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)v[i];
		if (ch < 0x20 || ch == 0x7F) {
			snprintf(err, errlen,
			         "%s must not contain control characters",
			         what);
			return -1;
		}
		if (!slash && ch == '/') {
			snprintf(err, errlen, "%s must not contain '/'", what);
			return -1;
		}
	}
	return 0;
}

int scopes_check_names(const char *tenant, const char *ns, const char *name,
                       char *err, size_t errlen)
{
	if (check_part("tenant", tenant, SCOPES_TENANT_MAX, false, err,
	               errlen) != 0 ||
	    check_part("namespace", ns, SCOPES_NS_MAX, false, err, errlen) !=
	        0 ||
	    check_part("name", name, SCOPES_NAME_MAX, true, err, errlen) != 0) {
		return -1;
	}
	return 0;
}

static size_t make_key(uint8_t *key, uint8_t kind, const char *tenant,
                       const char *ns, const char *name)
{
	int n = snprintf((char *)key + 1, SCOPES_FULL_MAX, "%s/%s/%s", tenant,
	                 ns, name);
	key[0] = kind;
	return 1 + (size_t)n;
}

static const char *kind_name(uint8_t kind)
{
	return kind == STORE_SCOPE_STREAM ? "stream" : "cache";
}

/* ---- cache ------------------------------------------------------------- */

static void drop_negatives(struct scopes *s)
{
	struct hmap_iter it;
	struct hmap_entry *e;
	hmap_iter_init(&s->cache, &it);
	while ((e = hmap_iter_next(&s->cache, &it)) != NULL) {
		struct sentry *se = e->value;
		if (se->absent) {
			hmap_del(&s->cache, e->key, e->klen);
			free(se);
		}
	}
	s->negatives = 0;
}

static struct sentry *entry_get(struct scopes *s, const uint8_t *key,
                                size_t klen, bool make)
{
	struct sentry *se = hmap_get(&s->cache, key, klen);
	if (se != NULL || !make) {
		return se;
	}
	se = calloc(1, sizeof *se);
	if (se == NULL) {
		return NULL;
	}
	if (hmap_put(&s->cache, key, klen, se) != 0) {
		free(se);
		return NULL;
	}
	se->info.kind = key[0];
	memcpy(se->info.full, key + 1, klen - 1);
	se->info.full[klen - 1] = '\0';
	se->info.full_len = klen - 1;
	return se;
}

static void entry_set(struct scopes *s, const uint8_t *key, size_t klen,
                      uint32_t shards, uint64_t rb, uint64_t rm, uint8_t dur,
                      uint64_t created)
{
	struct sentry *se = entry_get(s, key, klen, true);
	if (se == NULL) {
		return;
	}
	if (se->absent) {
		se->absent = false;
		s->negatives--;
	}
	se->info.shards = shards;
	se->info.retention_bytes = rb;
	se->info.retention_ms = rm;
	se->info.durability = dur;
	if (created != 0) {
		se->info.created_ms = created;
	}
	se->epoch = s->epoch;
}

static void entry_absent(struct scopes *s, const uint8_t *key, size_t klen)
{
	struct sentry *se = hmap_get(&s->cache, key, klen);
	if (se != NULL && !se->absent) {
		if (se->trims > 0 || se->pending) {
			return; /* still referenced: keep until done */
		}
		hmap_del(&s->cache, key, klen);
		free(se);
		se = NULL;
	}
	if (s->negatives >= NEGATIVE_MAX) {
		drop_negatives(s);
	}
	se = entry_get(s, key, klen, true);
	if (se == NULL) {
		return;
	}
	if (!se->absent) {
		se->absent = true;
		s->negatives++;
	}
	se->absent_until = uv_now(s->loop) + NEGATIVE_TTL_MS;
}

int scopes_find(struct scopes *s, uint8_t kind, const char *tenant,
                const char *ns, const char *name, struct scope_info *out)
{
	uint8_t key[SCOPES_FULL_MAX + 1];
	size_t klen = make_key(key, kind, tenant, ns, name);
	struct sentry *se = hmap_get(&s->cache, key, klen);
	if (se == NULL) {
		return SCOPES_UNKNOWN;
	}
	if (se->absent) {
		if (uv_now(s->loop) >= se->absent_until) {
			return SCOPES_UNKNOWN;
		}
		return SCOPES_ABSENT;
	}
	if (se->info.shards == 0) {
		return SCOPES_UNKNOWN; /* created by an operation in flight */
	}
	if (out != NULL) {
		*out = se->info;
	}
	return SCOPES_FOUND;
}

bool scopes_auto_create(const struct scopes *s)
{
	return s->cfg.auto_create;
}

/* ---- commands ---------------------------------------------------------- */

static struct store_slice sl(const char *p)
{
	struct store_slice x = {(const uint8_t *)p, strlen(p)};
	return x;
}

static int encode(const struct store_cmd *c, uint8_t **out, size_t *len)
{
	const char *e;
	return store_cmd_encode(c, out, len, &e);
}

/* Opens an OK result whose value is an array; returns its count or -1. */
static int open_array(const uint8_t *res, size_t len, struct store_result *r,
                      uint8_t *status)
{
	struct store_value v;
	if (store_result_open(res, len, r) != 0) {
		return -1;
	}
	*status = r->status;
	if (r->status != STORE_OK || !store_result_next(r, &v) ||
	    v.tag != STORE_T_ARRAY) {
		return -1;
	}
	return (int)v.n;
}

static uint64_t next_u64(struct store_result *r, bool *ok)
{
	struct store_value v;
	if (!store_result_next(r, &v)) {
		*ok = false;
		return 0;
	}
	if (v.tag == STORE_T_U64) {
		return v.u;
	}
	if (v.tag == STORE_T_I64 && v.i >= 0) {
		return (uint64_t)v.i;
	}
	*ok = false;
	return 0;
}

/* ---- lookups ----------------------------------------------------------- */

static void lookup_finish(struct lookup *l, int status)
{
	struct scopes *s = l->s;
	struct waiter *w = l->waiters;
	hmap_del(&s->lookups, l->key, l->klen);
	free(l);
	while (w != NULL) {
		struct waiter *next = w->next;
		w->cb(w->data, status);
		free(w);
		w = next;
	}
}

static int lookup_describe(struct lookup *l);

static void on_created(void *data, int status, const uint8_t *res, size_t len)
{
	struct lookup *l = data;
	struct store_result r;
	if (status != SHARDS_OK || store_result_open(res, len, &r) != 0) {
		lookup_finish(l, SCOPES_EUNAVAILABLE);
		return;
	}
	if (r.status != STORE_OK && r.status != STORE_EXISTS) {
		lookup_finish(l, SCOPES_EINVAL);
		return;
	}
	/* Read it back: a racing creation may have chosen other values. */
	l->create = false;
	if (lookup_describe(l) != 0) {
		lookup_finish(l, SCOPES_EUNAVAILABLE);
	}
}

static void on_described(void *data, int status, const uint8_t *res, size_t len)
{
	struct lookup *l = data;
	struct scopes *s = l->s;
	struct store_result r;
	uint8_t st = STORE_ERR;
	if (status != SHARDS_OK) {
		lookup_finish(l, SCOPES_EUNAVAILABLE);
		return;
	}
	int n = open_array(res, len, &r, &st);
	if (n >= 5) {
		bool ok = true;
		uint64_t shards = next_u64(&r, &ok);
		uint64_t rb = next_u64(&r, &ok);
		uint64_t rm = next_u64(&r, &ok);
		uint64_t dur = next_u64(&r, &ok);
		uint64_t created = next_u64(&r, &ok);
		if (!ok || shards == 0 || shards > UINT32_MAX) {
			lookup_finish(l, SCOPES_EUNAVAILABLE);
			return;
		}
		entry_set(s, l->key, l->klen, (uint32_t)shards, rb, rm,
		          (uint8_t)dur, created);
		lookup_finish(l, SCOPES_OK);
		return;
	}
	if (st != STORE_NOT_FOUND) {
		lookup_finish(l, SCOPES_EUNAVAILABLE);
		return;
	}
	if (!l->create || s->closing) {
		entry_absent(s, l->key, l->klen);
		lookup_finish(l, SCOPES_ENOTFOUND);
		return;
	}
	struct store_cmd c = {0};
	uint8_t *cmd;
	size_t clen;
	c.op = STORE_OP_SCOPE_REGISTER;
	c.kind = l->kind;
	c.tenant = sl(l->tenant);
	c.ns = sl(l->ns);
	c.name = sl(l->name);
	c.shards = s->cfg.auto_create_shards;
	if (encode(&c, &cmd, &clen) != 0) {
		lookup_finish(l, SCOPES_EINVAL);
		return;
	}
	int rv = shards_propose(s->shards, 0, cmd, clen, on_created, l);
	free(cmd);
	if (rv != SHARDS_OK) {
		lookup_finish(l, SCOPES_EUNAVAILABLE);
		return;
	}
	log_info(s->log, "scopes", "auto-creating %s %s with %u shards",
	         kind_name(l->kind), (const char *)l->key + 1,
	         s->cfg.auto_create_shards);
}

static int lookup_describe(struct lookup *l)
{
	struct store_cmd c = {0};
	uint8_t *cmd;
	size_t clen;
	c.op = STORE_OP_SCOPE_DESCRIBE;
	c.kind = l->kind;
	c.tenant = sl(l->tenant);
	c.ns = sl(l->ns);
	c.name = sl(l->name);
	if (encode(&c, &cmd, &clen) != 0) {
		return -1;
	}
	int rv = shards_read_cmd(l->s->shards, 0, cmd, clen, on_described, l);
	free(cmd);
	return rv == SHARDS_OK ? 0 : -1;
}

int scopes_lookup(struct scopes *s, uint8_t kind, const char *tenant,
                  const char *ns, const char *name, bool create,
                  scopes_lookup_cb cb, void *data)
{
	char why[128];
	uint8_t key[SCOPES_FULL_MAX + 1];
	if (scopes_check_names(tenant, ns, name, why, sizeof why) != 0) {
		return SCOPES_EINVAL;
	}
	if (s->closing) {
		return SCOPES_EUNAVAILABLE;
	}
	size_t klen = make_key(key, kind, tenant, ns, name);
	struct waiter *w = malloc(sizeof *w);
	if (w == NULL) {
		return SCOPES_EUNAVAILABLE;
	}
	w->cb = cb;
	w->data = data;
	struct lookup *l = hmap_get(&s->lookups, key, klen);
	if (l != NULL) {
		/* Joined: a creating lookup serves non-creating waiters
		 * too (they would have found the scope a moment later). */
		w->next = l->waiters;
		l->waiters = w;
		return SCOPES_OK;
	}
	l = calloc(1, sizeof *l);
	if (l == NULL || hmap_put(&s->lookups, key, klen, l) != 0) {
		free(l);
		free(w);
		return SCOPES_EUNAVAILABLE;
	}
	l->s = s;
	l->kind = kind;
	l->create = create && s->cfg.auto_create;
	snprintf(l->tenant, sizeof l->tenant, "%s", tenant);
	snprintf(l->ns, sizeof l->ns, "%s", ns);
	snprintf(l->name, sizeof l->name, "%s", name);
	memcpy(l->key, key, klen);
	l->klen = klen;
	w->next = NULL;
	l->waiters = w;
	if (lookup_describe(l) != 0) {
		hmap_del(&s->lookups, key, klen);
		free(l);
		free(w);
		return SCOPES_EUNAVAILABLE;
	}
	return SCOPES_OK;
}

/* ---- full listing ------------------------------------------------------ */

struct listing {
	struct scopes *s;
	uint8_t kind;
	uint64_t started; /* loop ms */
	uint8_t cursor[1024 * 8];
	size_t cursor_len;
};

static int list_page(struct listing *ls);

static void sweep(struct scopes *s, uint64_t epoch)
{
	struct hmap_iter it;
	struct hmap_entry *e;
	hmap_iter_init(&s->cache, &it);
	while ((e = hmap_iter_next(&s->cache, &it)) != NULL) {
		struct sentry *se = e->value;
		if (!se->absent && se->epoch < epoch && se->trims == 0 &&
		    !se->pending) {
			hmap_del(&s->cache, e->key, e->klen);
			free(se);
		}
	}
}

static void list_done(struct listing *ls, bool ok)
{
	struct scopes *s = ls->s;
	if (ok && ls->kind == STORE_SCOPE_STREAM) {
		ls->kind = STORE_SCOPE_CACHE;
		ls->cursor_len = 0;
		if (list_page(ls) == 0) {
			return;
		}
		ok = false;
	}
	if (ok) {
		/* Entries neither listed nor set since the listing began
		 * were deleted elsewhere. */
		sweep(s, s->epoch);
		s->listed = true;
	}
	s->listing = false;
	free(ls);
}

static void on_listed(void *data, int status, const uint8_t *res, size_t len)
{
	struct listing *ls = data;
	struct scopes *s = ls->s;
	struct store_result r;
	struct store_value v, a;
	uint8_t st;
	if (status != SHARDS_OK || open_array(res, len, &r, &st) != 2 ||
	    !store_result_next(&r, &a) || a.tag != STORE_T_ARRAY) {
		list_done(ls, false);
		return;
	}
	for (uint32_t i = 0; i < a.n; i++) {
		struct store_value t, ns, name;
		bool ok = true;
		if (!store_result_next(&r, &v) || v.tag != STORE_T_ARRAY ||
		    v.n < 7 || !store_result_next(&r, &t) ||
		    !store_result_next(&r, &ns) ||
		    !store_result_next(&r, &name) || t.tag != STORE_T_BYTES ||
		    ns.tag != STORE_T_BYTES || name.tag != STORE_T_BYTES) {
			list_done(ls, false);
			return;
		}
		uint64_t shards = next_u64(&r, &ok);
		uint64_t rb = next_u64(&r, &ok);
		uint64_t rm = next_u64(&r, &ok);
		uint64_t dur = next_u64(&r, &ok);
		for (uint32_t k = 7; k < v.n; k++) {
			struct store_value x;
			if (store_result_next(&r, &x)) {
				store_result_skip(&r, &x);
			}
		}
		if (!ok || t.len + ns.len + name.len + 3 > SCOPES_FULL_MAX ||
		    shards == 0 || shards > UINT32_MAX) {
			continue;
		}
		uint8_t key[SCOPES_FULL_MAX + 1];
		key[0] = ls->kind;
		size_t klen =
		    1 + (size_t)snprintf((char *)key + 1, SCOPES_FULL_MAX,
		                         "%.*s/%.*s/%.*s", (int)t.len,
		                         (const char *)t.p, (int)ns.len,
		                         (const char *)ns.p, (int)name.len,
		                         (const char *)name.p);
		entry_set(s, key, klen, (uint32_t)shards, rb, rm, (uint8_t)dur,
		          0);
	}
	if (!store_result_next(&r, &v)) {
		list_done(ls, false);
		return;
	}
	if (v.tag == STORE_T_BYTES && v.len <= sizeof ls->cursor) {
		memcpy(ls->cursor, v.p, v.len);
		ls->cursor_len = v.len;
		if (list_page(ls) != 0) {
			list_done(ls, false);
		}
		return;
	}
	list_done(ls, true);
}

static int list_page(struct listing *ls)
{
	struct store_cmd c = {0};
	uint8_t *cmd;
	size_t clen;
	c.op = STORE_OP_SCOPE_LIST;
	c.kind = ls->kind;
	c.arg.p = ls->cursor;
	c.arg.len = ls->cursor_len;
	c.max = LIST_PAGE;
	if (encode(&c, &cmd, &clen) != 0) {
		return -1;
	}
	int rv = shards_read_cmd(ls->s->shards, 0, cmd, clen, on_listed, ls);
	free(cmd);
	return rv == SHARDS_OK ? 0 : -1;
}

static void start_listing(struct scopes *s)
{
	if (s->listing || s->closing) {
		return;
	}
	struct listing *ls = calloc(1, sizeof *ls);
	if (ls == NULL) {
		return;
	}
	ls->s = s;
	ls->kind = STORE_SCOPE_STREAM;
	ls->started = uv_now(s->loop);
	s->epoch++;
	s->listing = true;
	if (list_page(ls) != 0) {
		s->listing = false;
		free(ls);
	}
}

/* ---- declared scopes (scopes file) ------------------------------------- */

struct declare_op {
	struct scopes *s;
	size_t i;
};

static void on_declared(void *data, int status, const uint8_t *res, size_t len)
{
	struct declare_op *op = data;
	struct scopes *s = op->s;
	struct declared *d = &s->declared[op->i];
	struct store_result r;
	free(op);
	if (status != SHARDS_OK || store_result_open(res, len, &r) != 0) {
		return; /* retried on the next refresh */
	}
	d->done = true;
	if (r.status != STORE_OK) {
		struct store_value v;
		char msg[160] = "";
		if (store_result_next(&r, &v) && v.tag == STORE_T_BYTES) {
			snprintf(msg, sizeof msg, "%.*s", (int)v.len,
			         (const char *)v.p);
		}
		log_error(s->log, "scopes",
		          "scopes file: %s %s/%s/%s not registered: %s",
		          kind_name(d->kind), d->tenant, d->ns, d->name, msg);
		return;
	}
	uint8_t key[SCOPES_FULL_MAX + 1];
	size_t klen = make_key(key, d->kind, d->tenant, d->ns, d->name);
	entry_set(s, key, klen, d->shards, d->retention_bytes, d->retention_ms,
	          0, 0);
}

static void register_declared(struct scopes *s)
{
	for (size_t i = 0; i < s->n_declared; i++) {
		struct declared *d = &s->declared[i];
		struct store_cmd c = {0};
		uint8_t *cmd;
		size_t clen;
		if (d->done) {
			continue;
		}
		c.op = STORE_OP_SCOPE_REGISTER;
		c.kind = d->kind;
		c.tenant = sl(d->tenant);
		c.ns = sl(d->ns);
		c.name = sl(d->name);
		c.shards = d->shards;
		c.retention_bytes = d->retention_bytes;
		c.retention_ms = d->retention_ms;
		struct declare_op *op = malloc(sizeof *op);
		if (op == NULL || encode(&c, &cmd, &clen) != 0) {
			free(op);
			return;
		}
		op->s = s;
		op->i = i;
		int rv =
		    shards_propose(s->shards, 0, cmd, clen, on_declared, op);
		free(cmd);
		if (rv != SHARDS_OK) {
			free(op);
			return; /* no leader yet: next refresh */
		}
	}
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	if (*v == '\0' || *v == '-') {
		return -1;
	}
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0') {
		return -1;
	}
	*out = x;
	return 0;
}

/* Splits "TENANT/NS/NAME" (the name may hold '/'). */
static int split_full(const char *full, char *t, char *ns, char *name)
{
	const char *a = strchr(full, '/');
	const char *b = a ? strchr(a + 1, '/') : NULL;
	if (a == NULL || b == NULL || (size_t)(a - full) > SCOPES_TENANT_MAX ||
	    (size_t)(b - a - 1) > SCOPES_NS_MAX ||
	    strlen(b + 1) > SCOPES_NAME_MAX) {
		return -1;
	}
	memcpy(t, full, (size_t)(a - full));
	t[a - full] = '\0';
	memcpy(ns, a + 1, (size_t)(b - a - 1));
	ns[b - a - 1] = '\0';
	strcpy(name, b + 1);
	return 0;
}

/* Scopes file: one scope per line,
 *   stream TENANT/NS/NAME [shards=K] [retention-bytes=B] [retention-ms=T]
 *   cache  TENANT/NS/NAME [shards=K]
 * with '#' comments and blank lines. */
static int load_file(struct scopes *s, const char *path, char *err,
                     size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	unsigned lineno = 0;
	if (f == NULL) {
		snprintf(err, errlen, "cannot read scopes-file '%s': %s", path,
		         strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		char *save = NULL, *tok;
		struct declared d;
		char why[160];
		lineno++;
		char *hash = strchr(line, '#');
		if (hash != NULL) {
			*hash = '\0';
		}
		tok = strtok_r(line, " \t\r\n", &save);
		if (tok == NULL) {
			continue;
		}
		memset(&d, 0, sizeof d);
		d.shards = 1;
		if (strcmp(tok, "stream") == 0) {
			d.kind = STORE_SCOPE_STREAM;
		} else if (strcmp(tok, "cache") == 0) {
			d.kind = STORE_SCOPE_CACHE;
		} else {
			snprintf(why, sizeof why,
			         "expected 'stream' or 'cache', got '%s'", tok);
			goto bad;
		}
		tok = strtok_r(NULL, " \t\r\n", &save);
		if (tok == NULL ||
		    split_full(tok, d.tenant, d.ns, d.name) != 0) {
			snprintf(why, sizeof why,
			         "expected TENANT/NAMESPACE/NAME after '%s'",
			         kind_name(d.kind));
			goto bad;
		}
		if (scopes_check_names(d.tenant, d.ns, d.name, why,
		                       sizeof why) != 0) {
			goto bad;
		}
		while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
			char *eq = strchr(tok, '=');
			uint64_t v;
			if (eq == NULL || parse_u64(eq + 1, &v) != 0) {
				snprintf(why, sizeof why,
				         "expected KEY=NUMBER, got '%s'", tok);
				goto bad;
			}
			*eq = '\0';
			if (strcmp(tok, "shards") == 0 && v >= 1 &&
			    v <= 65536) {
				d.shards = (uint32_t)v;
			} else if (strcmp(tok, "retention-bytes") == 0 &&
			           d.kind == STORE_SCOPE_STREAM) {
				d.retention_bytes = v;
			} else if (strcmp(tok, "retention-ms") == 0 &&
			           d.kind == STORE_SCOPE_STREAM) {
				d.retention_ms = v;
			} else {
				snprintf(why, sizeof why,
				         "unknown or out-of-range setting '%s'",
				         tok);
				goto bad;
			}
		}
		if (s->n_declared == FILE_SCOPES_MAX) {
			snprintf(why, sizeof why, "more than %d scopes",
			         FILE_SCOPES_MAX);
			goto bad;
		}
		struct declared *nd = realloc(
		    s->declared, (s->n_declared + 1) * sizeof *s->declared);
		if (nd == NULL) {
			snprintf(why, sizeof why, "out of memory");
			goto bad;
		}
		s->declared = nd;
		s->declared[s->n_declared++] = d;
		continue;
	bad:
		snprintf(err, errlen, "scopes-file %s:%u: %s", path, lineno,
		         why);
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

/* ---- retention --------------------------------------------------------- */

/* A STREAM_TRIM, or with `compact` a CACHE_COMPACT below `upto`. */
struct trim_op {
	struct scopes *s;
	uint8_t key[SCOPES_FULL_MAX + 1];
	size_t klen;
	uint32_t shard;
	uint32_t group;
	uint64_t rb, rm;
	bool compact;
	uint64_t upto;
};

static int propose_trim(struct trim_op *op);

static void on_trimmed(void *data, int status, const uint8_t *res, size_t len)
{
	struct trim_op *op = data;
	struct scopes *s = op->s;
	struct store_result r;
	uint8_t st;
	bool more = false;
	if (status == SHARDS_OK && open_array(res, len, &r, &st) == 3) {
		struct store_value v;
		bool ok = true;
		next_u64(&r, &ok);
		uint64_t trimmed = next_u64(&r, &ok);
		if (store_result_next(&r, &v) && v.tag == STORE_T_TRUE) {
			more = true;
		}
		if (ok && trimmed > 0) {
			log_debug(s->log, "scopes",
			          "%s %" PRIu64 " records of %s/%u",
			          op->compact ? "compaction removed"
			                      : "retention trimmed",
			          trimmed, (const char *)op->key + 1,
			          (unsigned)op->shard);
		}
	}
	if (more && !s->closing && propose_trim(op) == 0) {
		return;
	}
	struct sentry *se = hmap_get(&s->cache, op->key, op->klen);
	if (se != NULL && se->trims > 0) {
		se->trims--;
	}
	free(op);
}

static int propose_trim(struct trim_op *op)
{
	struct store_cmd c = {0};
	uint8_t *cmd;
	size_t clen;
	c.op = op->compact ? STORE_OP_CACHE_COMPACT : STORE_OP_STREAM_TRIM;
	c.scope.p = op->key + 1;
	c.scope.len = op->klen - 1;
	c.shard = op->shard;
	c.retention_bytes = op->rb;
	c.retention_ms = op->rm;
	c.offset = op->compact ? op->upto : 0;
	c.max = TRIM_BATCH;
	if (encode(&c, &cmd, &clen) != 0) {
		return -1;
	}
	int rv =
	    shards_propose(op->s->shards, op->group, cmd, clen, on_trimmed, op);
	free(cmd);
	return rv == SHARDS_OK ? 0 : -1;
}

static int first_ts(void *arg, uint64_t offset, uint64_t ts, const uint8_t *p,
                    size_t len)
{
	(void)offset;
	(void)p;
	(void)len;
	*(uint64_t *)arg = ts;
	return 1;
}

/* Whether shard j of the stream holds more than its retention, from the
 * local state (this node leads the group, so it is current). */
static bool needs_trim(struct scopes *s, uint32_t group,
                       const struct scope_info *in, uint32_t shard,
                       uint64_t now)
{
	struct store *st = shards_store(s->shards);
	struct store_slice scope = {(const uint8_t *)in->full, in->full_len};
	struct store_stream_info info;
	if (store_stream_info(st, group, scope, shard, &info) != 0 ||
	    info.head == info.tail) {
		return false;
	}
	if (in->retention_bytes > 0 && info.bytes > in->retention_bytes) {
		return true;
	}
	if (in->retention_ms > 0) {
		uint64_t ts = 0;
		int rv = store_stream_read(st, group, scope, shard, info.head,
		                           1, 0, first_ts, &ts, NULL);
		if (rv == 1 && ts + in->retention_ms <= now) {
			return true;
		}
	}
	return false;
}

/* Cache compaction: the leader of each cache shard keeps the last
 * `cache_history` changes replayable (a watch resuming further back gets
 * a snapshot) and proposes CACHE_COMPACT below them once they are
 * exceeded by an eighth, so it does not propose for every change. */
static void compact_caches(struct scopes *s, struct hmap_entry *e)
{
	struct sentry *se = e->value;
	const struct scope_info *in = &se->info;
	uint64_t keep = s->cfg.cache_history;
	uint64_t step = keep / 8 > 0 ? keep / 8 : 1;
	struct store *st = shards_store(s->shards);
	struct store_slice scope = {(const uint8_t *)in->full, in->full_len};
	for (uint32_t j = 0; j < in->shards; j++) {
		struct store_cache_info info;
		bool self = false;
		uint32_t g =
		    shards_group_of_scope(s->shards, in->full, in->full_len, j);
		shards_leader(s->shards, g, &self);
		if (!self || store_cache_info(st, g, scope, j, &info) != 0 ||
		    info.tail < keep ||
		    info.tail - keep < info.compacted_below + step) {
			continue;
		}
		struct trim_op *op = calloc(1, sizeof *op);
		if (op == NULL) {
			return;
		}
		op->s = s;
		memcpy(op->key, e->key, e->klen);
		op->klen = e->klen;
		op->shard = j;
		op->group = g;
		op->compact = true;
		op->upto = info.tail - keep;
		if (propose_trim(op) != 0) {
			free(op);
			continue;
		}
		se->trims++;
	}
}

static void on_retain(uv_timer_t *t)
{
	struct scopes *s = t->data;
	uint64_t now = shards_now_ms(s->shards);
	struct hmap_iter it;
	struct hmap_entry *e;
	hmap_iter_init(&s->cache, &it);
	while ((e = hmap_iter_next(&s->cache, &it)) != NULL) {
		struct sentry *se = e->value;
		const struct scope_info *in = &se->info;
		if (!se->absent && in->kind == STORE_SCOPE_CACHE &&
		    se->trims == 0 && s->cfg.cache_history > 0) {
			compact_caches(s, e);
			continue;
		}
		if (se->absent || in->kind != STORE_SCOPE_STREAM ||
		    se->trims > 0 ||
		    (in->retention_bytes == 0 && in->retention_ms == 0)) {
			continue;
		}
		for (uint32_t j = 0; j < in->shards; j++) {
			bool self = false;
			uint32_t g = shards_group_of_scope(s->shards, in->full,
			                                   in->full_len, j);
			shards_leader(s->shards, g, &self);
			if (!self || !needs_trim(s, g, in, j, now)) {
				continue;
			}
			struct trim_op *op = calloc(1, sizeof *op);
			if (op == NULL) {
				return;
			}
			op->s = s;
			memcpy(op->key, e->key, e->klen);
			op->klen = e->klen;
			op->shard = j;
			op->group = g;
			op->rb = in->retention_bytes;
			op->rm = in->retention_ms;
			if (propose_trim(op) != 0) {
				free(op);
				continue;
			}
			se->trims++;
		}
	}
}

static void on_refresh(uv_timer_t *t)
{
	struct scopes *s = t->data;
	register_declared(s);
	start_listing(s);
}

/* ---- admin API --------------------------------------------------------- */

static int reply_error(struct admin_reply *reply, unsigned status,
                       const char *msg)
{
	json_t *o = json_pack("{s:s}", "error", msg);
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (body == NULL) {
		return -1;
	}
	reply->status = status;
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = strlen(body);
	return 0;
}

static int reply_json(struct admin_reply *reply, unsigned status, json_t *o)
{
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (body == NULL) {
		return -1;
	}
	reply->status = status;
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = strlen(body);
	return 0;
}

static json_t *scope_json(struct scopes *s, const struct scope_info *in,
                          bool detail)
{
	char t[SCOPES_TENANT_MAX + 1], ns[SCOPES_NS_MAX + 1],
	    name[SCOPES_NAME_MAX + 1];
	if (split_full(in->full, t, ns, name) != 0) {
		return NULL;
	}
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "kind",
	                      kind_name(in->kind), "tenant", t, "namespace", ns,
	                      "name", name, "shards", (json_int_t)in->shards);
	if (o == NULL) {
		return NULL;
	}
	if (in->kind == STORE_SCOPE_STREAM) {
		json_object_set_new(
		    o, "retention_bytes",
		    json_integer((json_int_t)in->retention_bytes));
		json_object_set_new(o, "retention_ms",
		                    json_integer((json_int_t)in->retention_ms));
	}
	if (in->created_ms != 0) {
		json_object_set_new(o, "created_ms",
		                    json_integer((json_int_t)in->created_ms));
	}
	if (!detail) {
		return o;
	}
	/* Per-shard state where this node leads the group (read locally:
	 * current on the leader, absent elsewhere). */
	json_t *arr = json_array();
	struct store *st = shards_store(s->shards);
	struct store_slice scope = {(const uint8_t *)in->full, in->full_len};
	for (uint32_t j = 0; j < in->shards && j < 4096; j++) {
		bool self = false;
		uint32_t g =
		    shards_group_of_scope(s->shards, in->full, in->full_len, j);
		uint64_t leader = shards_leader(s->shards, g, &self);
		json_t *sh = json_pack("{s:I, s:I}", "shard", (json_int_t)j,
		                       "group", (json_int_t)g);
		if (leader != 0) {
			json_object_set_new(sh, "leader",
			                    json_integer((json_int_t)leader));
		}
		if (self && in->kind == STORE_SCOPE_STREAM) {
			struct store_stream_info info;
			if (store_stream_info(st, g, scope, j, &info) == 0) {
				json_object_set_new(
				    sh, "head",
				    json_integer((json_int_t)info.head));
				json_object_set_new(
				    sh, "tail",
				    json_integer((json_int_t)info.tail));
				json_object_set_new(
				    sh, "bytes",
				    json_integer((json_int_t)info.bytes));
			}
		} else if (self) {
			struct store_cache_info info;
			if (store_cache_info(st, g, scope, j, &info) == 0) {
				json_object_set_new(
				    sh, "tail",
				    json_integer((json_int_t)info.tail));
				json_object_set_new(
				    sh, "live_keys",
				    json_integer((json_int_t)info.live));
			}
		}
		json_array_append_new(arr, sh);
	}
	json_object_set_new(o, "shard_state", arr);
	return o;
}

/* An admin write in flight. */
struct admin_op {
	struct scopes *s;
	uint8_t key[SCOPES_FULL_MAX + 1];
	size_t klen;
	bool del;
	uint32_t shards;
	uint64_t rb, rm;
	uint32_t next_shard; /* drop progress after a delete */
	struct admin_deferred
	    *http; /* the admin request awaiting the outcome */
};

/* Answers the admin request waiting for `op`, if any. */
static void admin_op_answer(struct admin_op *op, unsigned status, json_t *o)
{
	struct admin_reply reply = {0};
	if (op->http == NULL) {
		json_decref(o);
		return;
	}
	if (reply_json(&reply, status, o) != 0) {
		admin_reply_json(&reply, 500,
		                 "{\"error\":\"out of memory answering\"}");
	}
	admin_http_finish(op->http, &reply);
	op->http = NULL;
}

/* `status`: the HTTP status for the waiting request (409 when the meta
 * group refused, 503 when it could not be reached). */
static void admin_op_fail(struct admin_op *op, unsigned status, const char *msg)
{
	struct sentry *se = hmap_get(&op->s->cache, op->key, op->klen);
	if (se != NULL) {
		se->pending = false;
		snprintf(se->error, sizeof se->error, "%s", msg);
		if (se->info.shards == 0 && !se->absent) {
			/* Placeholder of a failed creation: keep only its
			 * error for GET, as a negative entry. */
			se->absent = true;
			se->absent_until = uv_now(op->s->loop) + 60000;
			op->s->negatives++;
		}
	}
	log_warn(op->s->log, "scopes", "admin: %s %s: %s",
	         op->del ? "delete" : "create", (const char *)op->key + 1, msg);
	admin_op_answer(op, status, json_pack("{s:s}", "error", msg));
	free(op);
}

static void drop_next(struct admin_op *op);

static void on_dropped(void *data, int status, const uint8_t *res, size_t len)
{
	struct admin_op *op = data;
	struct store_result r;
	uint8_t st;
	bool more = false;
	if (status == SHARDS_OK && open_array(res, len, &r, &st) == 2) {
		struct store_value v;
		bool ok = true;
		next_u64(&r, &ok);
		more = store_result_next(&r, &v) && v.tag == STORE_T_TRUE;
	}
	if (!more) {
		op->next_shard++;
	}
	drop_next(op);
}

/* Removes the deleted scope's data, shard by shard, bounded batches. */
static void drop_next(struct admin_op *op)
{
	struct scopes *s = op->s;
	while (op->next_shard < op->shards && !s->closing) {
		struct store_cmd c = {0};
		uint8_t *cmd;
		size_t clen;
		c.op = op->key[0] == STORE_SCOPE_STREAM ? STORE_OP_STREAM_DROP
		                                        : STORE_OP_CACHE_DROP;
		c.scope.p = op->key + 1;
		c.scope.len = op->klen - 1;
		c.shard = op->next_shard;
		c.max = DROP_BATCH;
		uint32_t g =
		    shards_group_of_scope(s->shards, (const char *)op->key + 1,
		                          op->klen - 1, op->next_shard);
		if (encode(&c, &cmd, &clen) != 0) {
			break;
		}
		int rv =
		    shards_propose(s->shards, g, cmd, clen, on_dropped, op);
		free(cmd);
		if (rv == SHARDS_OK) {
			return;
		}
		log_warn(s->log, "scopes",
		         "delete %s: data of shard %u not dropped: %s",
		         (const char *)op->key + 1, (unsigned)op->next_shard,
		         shards_strerror(rv));
		op->next_shard++;
	}
	struct sentry *se = hmap_get(&s->cache, op->key, op->klen);
	if (se != NULL) {
		se->pending = false;
	}
	entry_absent(s, op->key, op->klen);
	free(op);
}

static void on_admin_done(void *data, int status, const uint8_t *res,
                          size_t len)
{
	struct admin_op *op = data;
	struct scopes *s = op->s;
	struct store_result r;
	if (status != SHARDS_OK) {
		admin_op_fail(op, 503, shards_strerror(status));
		return;
	}
	if (store_result_open(res, len, &r) != 0) {
		admin_op_fail(op, 500, "malformed answer from the meta group");
		return;
	}
	if (r.status != STORE_OK) {
		struct store_value v;
		char msg[160] = "refused";
		if (store_result_next(&r, &v) && v.tag == STORE_T_BYTES) {
			/* Store messages start with "ERR ". */
			size_t skip =
			    v.len > 4 && memcmp(v.p, "ERR ", 4) == 0 ? 4 : 0;
			snprintf(msg, sizeof msg, "%.*s", (int)(v.len - skip),
			         (const char *)v.p + skip);
		}
		admin_op_fail(op, 409, msg);
		return;
	}
	struct sentry *se = hmap_get(&s->cache, op->key, op->klen);
	if (op->del) {
		struct store_value v;
		bool existed = store_result_next(&r, &v) &&
		               v.tag == STORE_T_I64 && v.i == 1;
		if (existed) {
			log_info(s->log, "scopes", "deleted %s %s",
			         kind_name(op->key[0]),
			         (const char *)op->key + 1);
		}
		if (se != NULL) {
			op->shards = se->info.shards;
		}
		/* Answered once the registry forgot the scope; its data is
		 * dropped in the background (GET says "pending" meanwhile). */
		if (existed) {
			admin_op_answer(op, 200,
			                json_pack("{s:s, s:s}", "status",
			                          "deleted", "scope",
			                          (const char *)op->key + 1));
		} else {
			char why[SCOPES_FULL_MAX + 64];
			snprintf(why, sizeof why, "%s not found: %s",
			         kind_name(op->key[0]),
			         (const char *)op->key + 1);
			admin_op_answer(op, 404,
			                json_pack("{s:s}", "error", why));
		}
		drop_next(op);
		return;
	}
	log_info(s->log, "scopes", "registered %s %s (%u shards)",
	         kind_name(op->key[0]), (const char *)op->key + 1,
	         (unsigned)op->shards);
	entry_set(s, op->key, op->klen, op->shards, op->rb, op->rm, 0, 0);
	se = hmap_get(&s->cache, op->key, op->klen);
	if (se != NULL) {
		se->pending = false;
		se->error[0] = '\0';
		if (se->info.created_ms == 0) {
			se->info.created_ms = shards_now_ms(s->shards);
		}
	}
	json_t *o = se != NULL ? scope_json(s, &se->info, true) : NULL;
	if (o != NULL) {
		json_object_set_new(o, "status", json_string("created"));
	} else {
		o = json_pack("{s:s, s:s}", "status", "created", "scope",
		              (const char *)op->key + 1);
	}
	admin_op_answer(op, 201, o);
	free(op);
}

/* Path "/v1/streams/T/NS/NAME" -> kind and names; `rest` false when the
 * path is the collection itself. */
static int parse_path(const char *path, uint8_t *kind, bool *rest, char *t,
                      char *ns, char *name)
{
	const char *p;
	if (strncmp(path, "/v1/streams", 11) == 0) {
		*kind = STORE_SCOPE_STREAM;
		p = path + 11;
	} else if (strncmp(path, "/v1/caches", 10) == 0) {
		*kind = STORE_SCOPE_CACHE;
		p = path + 10;
	} else {
		return -1;
	}
	if (*p == '\0' || strcmp(p, "/") == 0) {
		*rest = false;
		return 0;
	}
	if (*p != '/') {
		return -1;
	}
	*rest = true;
	return split_full(p + 1, t, ns, name);
}

static int admin_create(struct scopes *s, uint8_t kind, const char *t,
                        const char *ns, const char *name, json_t *body,
                        const struct admin_request *req,
                        struct admin_reply *reply)
{
	char why[160];
	json_int_t shards = 1, rb = 0, rm = 0;
	json_t *v;
	if (scopes_check_names(t, ns, name, why, sizeof why) != 0) {
		return reply_error(reply, 400, why);
	}
	if ((v = json_object_get(body, "shards")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 65536) {
			return reply_error(reply, 400,
			                   "shards must be an integer in "
			                   "1..65536");
		}
		shards = json_integer_value(v);
	}
	if ((v = json_object_get(body, "retention_bytes")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			return reply_error(reply, 400,
			                   "retention_bytes must be a "
			                   "non-negative integer");
		}
		rb = json_integer_value(v);
	}
	if ((v = json_object_get(body, "retention_ms")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			return reply_error(
			    reply, 400,
			    "retention_ms must be a non-negative "
			    "integer");
		}
		rm = json_integer_value(v);
	}
	if (kind == STORE_SCOPE_CACHE && (rb != 0 || rm != 0)) {
		return reply_error(reply, 400,
		                   "caches have no retention settings");
	}
	struct scope_info cur;
	if (scopes_find(s, kind, t, ns, name, &cur) == SCOPES_FOUND &&
	    cur.shards != (uint32_t)shards) {
		snprintf(why, sizeof why,
		         "%s exists with %u shards; the shard count cannot "
		         "change",
		         kind_name(kind), (unsigned)cur.shards);
		return reply_error(reply, 409, why);
	}
	struct admin_op *op = calloc(1, sizeof *op);
	if (op == NULL) {
		return -1;
	}
	op->s = s;
	op->klen = make_key(op->key, kind, t, ns, name);
	op->shards = (uint32_t)shards;
	op->rb = (uint64_t)rb;
	op->rm = (uint64_t)rm;
	struct store_cmd c = {0};
	uint8_t *cmd;
	size_t clen;
	c.op = STORE_OP_SCOPE_REGISTER;
	c.kind = kind;
	c.tenant = sl(t);
	c.ns = sl(ns);
	c.name = sl(name);
	c.shards = op->shards;
	c.retention_bytes = op->rb;
	c.retention_ms = op->rm;
	if (encode(&c, &cmd, &clen) != 0) {
		free(op);
		return -1;
	}
	int rv = shards_propose(s->shards, 0, cmd, clen, on_admin_done, op);
	free(cmd);
	if (rv != SHARDS_OK) {
		free(op);
		return reply_error(reply, 503, shards_strerror(rv));
	}
	struct sentry *se = entry_get(s, op->key, op->klen, true);
	if (se != NULL) {
		if (se->absent) {
			se->absent = false;
			s->negatives--;
		}
		se->pending = true;
		se->error[0] = '\0';
	}
	/* Answered with the outcome once the meta group decided; only
	 * when the request cannot wait (out of memory, shutting down) is
	 * it answered "accepted" now. */
	op->http = admin_http_defer(req);
	if (op->http != NULL) {
		return 0;
	}
	return reply_json(reply, 202,
	                  json_pack("{s:s, s:s, s:I}", "status", "accepted",
	                            "scope", (const char *)op->key + 1,
	                            "shards", (json_int_t)shards));
}

static int admin_delete(struct scopes *s, uint8_t kind, const char *t,
                        const char *ns, const char *name,
                        const struct admin_request *req,
                        struct admin_reply *reply)
{
	char why[160];
	if (scopes_check_names(t, ns, name, why, sizeof why) != 0) {
		return reply_error(reply, 400, why);
	}
	struct admin_op *op = calloc(1, sizeof *op);
	if (op == NULL) {
		return -1;
	}
	op->s = s;
	op->del = true;
	op->klen = make_key(op->key, kind, t, ns, name);
	struct store_cmd c = {0};
	uint8_t *cmd;
	size_t clen;
	c.op = STORE_OP_SCOPE_DELETE;
	c.kind = kind;
	c.tenant = sl(t);
	c.ns = sl(ns);
	c.name = sl(name);
	if (encode(&c, &cmd, &clen) != 0) {
		free(op);
		return -1;
	}
	int rv = shards_propose(s->shards, 0, cmd, clen, on_admin_done, op);
	free(cmd);
	if (rv != SHARDS_OK) {
		free(op);
		return reply_error(reply, 503, shards_strerror(rv));
	}
	struct sentry *se = hmap_get(&s->cache, op->key, op->klen);
	if (se != NULL && !se->absent) {
		se->pending = true;
	}
	op->http = admin_http_defer(req);
	if (op->http != NULL) {
		return 0;
	}
	return reply_json(reply, 202,
	                  json_pack("{s:s, s:s}", "status", "accepted", "scope",
	                            (const char *)op->key + 1));
}

static int cmp_full(const void *a, const void *b)
{
	const struct scope_info *x = *(const struct scope_info *const *)a;
	const struct scope_info *y = *(const struct scope_info *const *)b;
	return strcmp(x->full, y->full);
}

static int admin_list(struct scopes *s, uint8_t kind,
                      const struct admin_request *req,
                      struct admin_reply *reply)
{
	const char *tenant = admin_request_arg(req, "tenant");
	const char *ns = admin_request_arg(req, "namespace");
	size_t n = 0;
	const struct scope_info **v = malloc((s->cache.count + 1) * sizeof *v);
	struct hmap_iter it;
	struct hmap_entry *e;
	if (v == NULL) {
		return -1;
	}
	hmap_iter_init(&s->cache, &it);
	while ((e = hmap_iter_next(&s->cache, &it)) != NULL) {
		struct sentry *se = e->value;
		char t[SCOPES_TENANT_MAX + 1], n2[SCOPES_NS_MAX + 1],
		    name[SCOPES_NAME_MAX + 1];
		if (se->absent || se->info.kind != kind ||
		    se->info.shards == 0 ||
		    split_full(se->info.full, t, n2, name) != 0) {
			continue;
		}
		if ((tenant != NULL && strcmp(tenant, t) != 0) ||
		    (ns != NULL && strcmp(ns, n2) != 0)) {
			continue;
		}
		v[n++] = &se->info;
	}
	qsort(v, n, sizeof *v, cmp_full);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, scope_json(s, v[i], false));
	}
	free(v);
	return reply_json(
	    reply, 200,
	    json_pack("{s:o, s:b}",
	              kind == STORE_SCOPE_STREAM ? "streams" : "caches", arr,
	              "complete", s->listed));
}

/* 1 when a scope change of tenant t in namespace ns may run; else 0 with
 * the refusal in `reply`, or -1 when it could not be written. */
static int admin_allowed(struct scopes *s, const struct admin_request *req,
                         struct admin_reply *reply, const char *t,
                         const char *ns)
{
	char msg[512];
	if (req->operator) {
		/* Holds the admin API's own token. */
		return 1;
	}
	unsigned status = felix_auth_admin(
	    s->auth, admin_request_header(req, "Authorization"), t, ns, msg,
	    sizeof msg);
	if (status == 0) {
		return 1;
	}
	return reply_error(reply, status, msg) == 0 ? 0 : -1;
}

static int on_admin(void *data, const struct admin_request *req,
                    struct admin_reply *reply)
{
	struct scopes *s = data;
	char t[SCOPES_TENANT_MAX + 1] = "", ns[SCOPES_NS_MAX + 1] = "",
	                           name[SCOPES_NAME_MAX + 1] = "";
	uint8_t kind;
	bool rest;
	if (parse_path(req->path, &kind, &rest, t, ns, name) != 0) {
		return reply_error(reply, 404,
		                   "expected /v1/streams[/TENANT/NAMESPACE/"
		                   "NAME] or /v1/caches[/...]");
	}
	if (strcmp(req->method, "GET") == 0) {
		if (!rest) {
			return admin_list(s, kind, req, reply);
		}
		uint8_t key[SCOPES_FULL_MAX + 1];
		size_t klen = make_key(key, kind, t, ns, name);
		struct sentry *se = hmap_get(&s->cache, key, klen);
		if (se != NULL && se->pending) {
			return reply_json(reply, 202,
			                  json_pack("{s:s, s:s}", "status",
			                            "pending", "scope",
			                            (const char *)key + 1));
		}
		if (se != NULL && se->error[0] != '\0' &&
		    (se->absent || se->info.shards == 0)) {
			return reply_error(reply, 409, se->error);
		}
		struct scope_info in;
		if (scopes_find(s, kind, t, ns, name, &in) != SCOPES_FOUND) {
			char why[SCOPES_FULL_MAX + 64];
			snprintf(why, sizeof why, "%s not found: %s",
			         kind_name(kind), (const char *)key + 1);
			return reply_error(reply, 404, why);
		}
		json_t *o = scope_json(s, &in, true);
		if (o != NULL && se != NULL && se->error[0] != '\0') {
			json_object_set_new(o, "last_error",
			                    json_string(se->error));
		}
		return reply_json(reply, 200, o);
	}
	if (strcmp(req->method, "DELETE") == 0) {
		if (!rest) {
			return reply_error(
			    reply, 405, "DELETE needs /TENANT/NAMESPACE/NAME");
		}
		int ok = admin_allowed(s, req, reply, t, ns);
		if (ok != 1) {
			return ok;
		}
		return admin_delete(s, kind, t, ns, name, req, reply);
	}
	/* POST: the names come from the path or the body. */
	json_error_t jerr;
	json_t *body = req->body_len > 0
	                   ? json_loadb(req->body, req->body_len, 0, &jerr)
	                   : json_object();
	if (body == NULL || !json_is_object(body)) {
		json_decref(body);
		return reply_error(reply, 400, "body must be a JSON object");
	}
	if (!rest) {
		const char *bt =
		    json_string_value(json_object_get(body, "tenant"));
		const char *bn =
		    json_string_value(json_object_get(body, "namespace"));
		const char *bm =
		    json_string_value(json_object_get(body, "name"));
		if (bt == NULL || bn == NULL || bm == NULL ||
		    strlen(bt) > SCOPES_TENANT_MAX ||
		    strlen(bn) > SCOPES_NS_MAX ||
		    strlen(bm) > SCOPES_NAME_MAX) {
			json_decref(body);
			return reply_error(reply, 400,
			                   "body needs tenant, namespace and "
			                   "name strings");
		}
		strcpy(t, bt);
		strcpy(ns, bn);
		strcpy(name, bm);
	}
	int rv = admin_allowed(s, req, reply, t, ns);
	if (rv == 1) {
		rv = admin_create(s, kind, t, ns, name, body, req, reply);
	}
	json_decref(body);
	return rv;
}

void scopes_set_auth(struct scopes *s, const struct felix_auth *auth)
{
	s->auth = auth;
}

void scopes_register_admin(struct scopes *s, struct admin_http *a)
{
	static const char *methods[] = {"GET", "POST", "DELETE"};
	for (int i = 0; i < 3; i++) {
		admin_http_route(a, methods[i], "/v1/streams", true, on_admin,
		                 s);
		admin_http_route(a, methods[i], "/v1/caches", true, on_admin,
		                 s);
	}
}

/* ---- lifecycle --------------------------------------------------------- */

int scopes_open(struct scopes **out, uv_loop_t *loop, struct shards *shards,
                const struct log *log, const struct scopes_config *cfg,
                char *err, size_t errlen)
{
	struct scopes *s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->loop = loop;
	s->shards = shards;
	s->log = log;
	s->cfg = *cfg;
	s->cfg.scopes_file = NULL;
	if (s->cfg.refresh_ms == 0) {
		s->cfg.refresh_ms = 5000;
	}
	if (s->cfg.retention_ms == 0) {
		s->cfg.retention_ms = 1000;
	}
	if (s->cfg.auto_create_shards == 0) {
		s->cfg.auto_create_shards = 1;
	}
	hmap_init(&s->cache);
	hmap_init(&s->lookups);
	if (cfg->scopes_file != NULL &&
	    load_file(s, cfg->scopes_file, err, errlen) != 0) {
		free(s->declared);
		free(s);
		return -1;
	}
	uv_timer_init(loop, &s->refresh);
	uv_timer_init(loop, &s->retain);
	s->refresh.data = s;
	s->retain.data = s;
	s->open_handles = 2;
	/* The first refresh runs soon: groups elect within a second or so,
	 * and a refresh without a leader just retries next period. */
	uv_timer_start(&s->refresh, on_refresh, 200, s->cfg.refresh_ms);
	uv_timer_start(&s->retain, on_retain, s->cfg.retention_ms,
	               s->cfg.retention_ms);
	*out = s;
	return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
	struct scopes *s = h->data;
	if (--s->open_handles == 0 && s->close_cb != NULL) {
		s->close_cb(s->close_data);
	}
}

void scopes_close(struct scopes *s, scopes_close_cb cb, void *data)
{
	if (s->closing) {
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	uv_close((uv_handle_t *)&s->refresh, on_handle_closed);
	uv_close((uv_handle_t *)&s->retain, on_handle_closed);
}

void scopes_free(struct scopes *s)
{
	struct hmap_iter it;
	struct hmap_entry *e;
	if (s == NULL) {
		return;
	}
	hmap_iter_init(&s->cache, &it);
	while ((e = hmap_iter_next(&s->cache, &it)) != NULL) {
		free(e->value);
	}
	hmap_free(&s->cache);
	/* Lookups were all answered by the groups closing. */
	hmap_free(&s->lookups);
	free(s->declared);
	free(s);
}

/* The cluster's membership as this node runs it; see membership.h. */
#include "node/membership.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "flow/flow_cursor.h"
#include "node/shards_internal.h"
#include "raft/forward.h"
#include "raft/group.h"
#include "raft/io.h"
#include "raft/join.h"
#include "raft/placement.h"
#include "raft/rebalance.h"
#include "raft/transport.h"
#include "store/store.h"

#define JOIN_RETRY_MS 2000  /* between join requests until admitted */
#define ORPHAN_MS 5000      /* a replica removed this long is deleted */
#define EMPTY_MS 30000      /* a group started but never configured */
#define LOST_LEADER_MS 3000 /* no leader heard this long: cut off */
#define OP_RETRY_MS 120000  /* an operation's meta group writes retried */

/* ---- node records in the meta group ---- */

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(v >> (56 - 8 * i));
	}
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

static const char *state_name(int state)
{
	switch (state) {
	case STORE_NODE_JOINING:
		return "joining";
	case STORE_NODE_ACTIVE:
		return "active";
	case STORE_NODE_DRAINING:
		return "draining";
	default:
		return "removed";
	}
}

/* "HOST:PORT" or "[V6]:PORT" into host and port. */
int membership_split_hostport(const char *a, char *host, size_t cap,
                              uint16_t *port)
{
	const char *colon;
	size_t hl;
	unsigned long p;
	char *end;

	if (a[0] == '[') {
		const char *close = strchr(a, ']');
		if (close == NULL || close[1] != ':') {
			return -1;
		}
		hl = (size_t)(close - a - 1);
		colon = close + 1;
		a++;
	} else {
		colon = strrchr(a, ':');
		if (colon == NULL) {
			return -1;
		}
		hl = (size_t)(colon - a);
	}
	p = strtoul(colon + 1, &end, 10);
	if (hl == 0 || hl >= cap || *end != '\0' || p == 0 || p > 65535) {
		return -1;
	}
	memcpy(host, a, hl);
	host[hl] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static size_t held_bytes(const struct shards *s)
{
	return (s->cfg.data_groups + 1 + 7) / 8;
}

static bool held_has(const struct member *m, uint32_t g)
{
	return m->held != NULL && (m->held[g / 8] >> (g % 8)) & 1;
}

/* A member from its internal address; the existing one when known. The
 * transport dials it from now on. */
static struct member *member_add(struct shards *s, uint64_t id,
                                 const char *internal)
{
	struct member *m = member(s, id);
	char host[256];
	uint16_t port;
	size_t i;

	if (m != NULL) {
		return m;
	}
	if (id == 0 || s->n_members >= MAX_NODES ||
	    membership_split_hostport(internal, host, sizeof host, &port) !=
	        0) {
		return NULL;
	}
	for (i = s->n_members; i > 0 && s->members[i - 1].id > id; i--) {
		s->members[i] = s->members[i - 1];
	}
	m = &s->members[i];
	memset(m, 0, sizeof *m);
	m->id = id;
	snprintf(m->host, sizeof m->host, "%s", host);
	m->port = port;
	snprintf(m->internal, sizeof m->internal,
	         strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u", host,
	         (unsigned)port);
	m->state = STORE_NODE_ACTIVE;
	m->slot = id;
	s->n_members++;
	for (i = 0; i < s->n_members; i++) {
		s->ids[i] = s->members[i].id;
	}
	if (s->t != NULL && id != s->cfg.node_id) {
		transport_add_peer(s->t, id, host, port);
	}
	s->save_gen++;
	log_info(s->log, "shards", "node %" PRIu64 " (%s) is a member", id,
	         internal);
	return member(s, id);
}

unsigned membership_replicas(const struct shards *s)
{
	if (s->replicas_meta != 0) {
		return s->replicas_meta;
	}
	return s->cfg.replicas != 0 ? s->cfg.replicas : 3;
}

static bool holds_replicas(const struct member *m)
{
	return m->state == STORE_NODE_JOINING || m->state == STORE_NODE_ACTIVE;
}

/* The nodes placement ranks (joining and active, one per slot); only
 * those that may vote when `voters`. */
static size_t holders(const struct shards *s, bool voters, uint64_t *slots,
                      uint64_t *ids)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n_members; i++) {
		const struct member *m = &s->members[i];
		bool dup = false;
		if (!holds_replicas(m) || (voters && m->nonvoter)) {
			continue;
		}
		for (size_t j = 0; j < n; j++) {
			dup = dup || slots[j] == m->slot;
		}
		if (!dup) {
			slots[n] = m->slot;
			ids[n] = m->id;
			n++;
		}
	}
	return n;
}

/* Placement of group g over the holders (the voting ones when
 * `voters`), as node ids in preference order. */
static size_t place(const struct shards *s, uint32_t g, bool voters,
                    uint64_t *out)
{
	uint64_t slots[MAX_NODES], ids[MAX_NODES], res[MAX_NODES];
	size_t n = holders(s, voters, slots, ids);
	size_t k = placement_replicas(slots, n, g, membership_replicas(s), res);

	for (size_t i = 0; i < k; i++) {
		for (size_t j = 0; j < n; j++) {
			if (slots[j] == res[i]) {
				out[i] = ids[j];
			}
		}
	}
	return k;
}

/* The target voters of group g in preference order: placement over the
 * nodes that may vote. */
static size_t target_of(const struct shards *s, uint32_t g, uint64_t *out)
{
	return place(s, g, true, out);
}

/* The target standbys of group g: the demoted nodes that placement over
 * every holder would give the group. A demotion thus keeps a replica
 * exactly where the node would vote, and a promotion finds it there. */
static size_t standbys_of(const struct shards *s, uint32_t g, uint64_t *out)
{
	uint64_t all[MAX_NODES];
	size_t k = place(s, g, false, all), n = 0;

	for (size_t i = 0; i < k; i++) {
		const struct member *m = member((struct shards *)s, all[i]);
		if (m != NULL && m->nonvoter) {
			out[n++] = all[i];
		}
	}
	return n;
}

bool membership_has(const uint64_t *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == id) {
			return true;
		}
	}
	return false;
}

/* What placement reads of the membership: each member's id, slot,
 * whether it holds replicas and whether it votes, and the replica count.
 * The same inputs give the same targets. Returns the count of values. */
static size_t placement_inputs(const struct shards *s, uint64_t *v)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n_members && i < MAX_NODES; i++) {
		const struct member *m = &s->members[i];
		v[n++] = m->id;
		v[n++] = m->slot;
		v[n++] = holds_replicas(m);
		v[n++] = m->nonvoter;
	}
	v[n++] = membership_replicas(s);
	v[n++] = s->n_members;
	return n;
}

/* Every group's target from the membership; a group whose target
 * changed gets a new generation. The node list is read every second:
 * with thousands of groups the placement of each is the costly part of
 * an idle node, so it runs only when what it reads changed. */
void membership_recompute(struct shards *s)
{
	uint64_t in[PLACEMENT_INPUTS];
	size_t n = placement_inputs(s, in);
	if (n == s->placement_n &&
	    memcmp(in, s->placement_in, n * sizeof in[0]) == 0) {
		return;
	}
	memcpy(s->placement_in, in, n * sizeof in[0]);
	s->placement_n = n;
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		uint64_t out[MAX_NODES];
		size_t k = target_of(s, g, out);
		if (k > MAX_REPLICAS) {
			k = MAX_REPLICAS;
		}
		if (k != r->n_replicas ||
		    memcmp(out, r->replicas, k * sizeof out[0]) != 0) {
			memcpy(r->replicas, out, k * sizeof out[0]);
			r->n_replicas = (unsigned)k;
			s->generation++;
		}
		k = standbys_of(s, g, out);
		if (k > MAX_REPLICAS) {
			k = MAX_REPLICAS;
		}
		if (k != r->n_standbys ||
		    memcmp(out, r->standbys, k * sizeof out[0]) != 0) {
			memcpy(r->standbys, out, k * sizeof out[0]);
			r->n_standbys = (unsigned)k;
		}
	}
}

/* Whether this node votes in its replica of group g. */
static bool local_voter(struct shards *s, uint32_t g)
{
	struct route *r = &s->routes[g];
	return r->local && !r->deleting && r->voter;
}

/* " groups=0-3,5": the groups this node votes in, as ranges. */
static size_t format_held(struct shards *s, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, " groups=");
	uint32_t g = 0, last = s->cfg.data_groups;
	bool first = true;

	while (g <= last && n < cap) {
		uint32_t e;
		if (!local_voter(s, g)) {
			g++;
			continue;
		}
		e = g;
		while (e + 1 <= last && local_voter(s, e + 1)) {
			e++;
		}
		n += (size_t)snprintf(out + n, cap - n,
		                      e == g ? "%s%" PRIu32
		                             : "%s%" PRIu32 "-%" PRIu32,
		                      first ? "" : ",", g, e);
		first = false;
		g = e + 1;
	}
	return n < cap ? n : cap - 1;
}

static void parse_held(struct shards *s, struct member *m, const char *list)
{
	const char *p = list;

	if (m->held == NULL) {
		m->held = calloc(1, held_bytes(s));
		if (m->held == NULL) {
			return;
		}
	}
	memset(m->held, 0, held_bytes(s));
	m->n_held = 0;
	while (*p != '\0') {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;
		if (end == p) {
			break;
		}
		p = end;
		if (*p == '-') {
			b = strtoul(p + 1, &end, 10);
			p = end;
		}
		for (unsigned long g = a; g <= b && g <= s->cfg.data_groups;
		     g++) {
			if (!held_has(m, (uint32_t)g)) {
				m->held[g / 8] |= (uint8_t)(1u << (g % 8));
				m->n_held++;
			}
		}
		if (*p == ',') {
			p++;
		}
	}
}

/* "internal=H:P felix=H:P fsnp=H:P fsnp_tls=H:P admin=H:P resp=H:P
 * groups=..."
 * (a listener absent: not served). */
void membership_make_record(struct shards *s)
{
	const char *h = s->advertise;
	bool v6 = strchr(h, ':') != NULL;
	size_t n = 0;
	const struct {
		const char *name;
		uint16_t port;
	} l[] = {{"felix", s->cfg.felix_port},
	         {"fsnp", s->cfg.fsnp_port},
	         {"fsnp_tls", s->cfg.fsnp_tls_port},
	         {"admin", s->cfg.admin_port},
	         {"resp", s->cfg.resp_port}};

	n += (size_t)snprintf(s->record + n, sizeof s->record - n,
	                      "internal=%s", s->address);
	for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) {
		if (l[i].port != 0 && n < sizeof s->record) {
			n += (size_t)snprintf(
			    s->record + n, sizeof s->record - n,
			    v6 ? " %s=[%s]:%u" : " %s=%s:%u", l[i].name, h,
			    (unsigned)l[i].port);
		}
	}
	if (s->groups != NULL && n < sizeof s->record) {
		format_held(s, s->record + n, sizeof s->record - n);
	}
}

void shards_record_field(const char *rec, size_t len, const char *key,
                         char *out, size_t cap)
{
	size_t kl = strlen(key), i = 0;
	out[0] = '\0';
	while (i < len) {
		size_t j = i;
		while (j < len && rec[j] != ' ') {
			j++;
		}
		if (j - i > kl && memcmp(rec + i, key, kl) == 0 &&
		    rec[i + kl] == '=') {
			size_t vl = j - i - kl - 1;
			if (vl >= cap) {
				vl = cap - 1;
			}
			memcpy(out, rec + i + kl + 1, vl);
			out[vl] = '\0';
			return;
		}
		i = j + 1;
	}
}

/* One node record read from the meta group. Returns whether placement
 * changed (state or slot). */
static bool apply_record(struct shards *s, uint64_t id, const uint8_t *p,
                         size_t len, bool *mine)
{
	char felix[SHARDS_ADDR_MAX], fsnp[SHARDS_ADDR_MAX],
	    fsnp_tls[SHARDS_ADDR_MAX], admin[SHARDS_ADDR_MAX],
	    internal[SHARDS_ADDR_MAX], resp[SHARDS_ADDR_MAX];
	char held[RECORD_MAX];
	int state = STORE_NODE_ACTIVE;
	uint64_t slot = id;
	uint8_t flags = 0;
	struct member *m;
	bool placement = false;
	const char *rec;

	if (len >= 11 && p[0] == STORE_NODE_RECORD_VERSION_FLAGS) {
		state = p[1];
		slot = get_be64(p + 2);
		flags = p[10];
		p += 11;
		len -= 11;
	} else if (len >= 10 && p[0] == STORE_NODE_RECORD_VERSION) {
		state = p[1];
		slot = get_be64(p + 2);
		p += 10;
		len -= 10;
	}
	rec = (const char *)p;
	shards_record_field(rec, len, "internal", internal, sizeof internal);
	m = member(s, id);
	if (m == NULL && (state == STORE_NODE_REMOVED || internal[0] == '\0' ||
	                  (m = member_add(s, id, internal)) == NULL)) {
		return false;
	}
	if (m->id == s->cfg.node_id) {
		size_t mine_len = strlen(s->record);
		*mine = len == mine_len && memcmp(p, s->record, len) == 0;
	}
	shards_record_field(rec, len, "felix", felix, sizeof felix);
	shards_record_field(rec, len, "fsnp", fsnp, sizeof fsnp);
	shards_record_field(rec, len, "fsnp_tls", fsnp_tls, sizeof fsnp_tls);
	shards_record_field(rec, len, "admin", admin, sizeof admin);
	shards_record_field(rec, len, "resp", resp, sizeof resp);
	shards_record_field(rec, len, "groups", held, sizeof held);
	parse_held(s, m, held);
	if (!m->has_record || strcmp(felix, m->felix) != 0 ||
	    strcmp(fsnp, m->fsnp) != 0 || strcmp(admin, m->admin) != 0 ||
	    strcmp(fsnp_tls, m->fsnp_tls) != 0 || strcmp(resp, m->resp) != 0) {
		memcpy(m->felix, felix, sizeof felix);
		memcpy(m->resp, resp, sizeof resp);
		memcpy(m->fsnp, fsnp, sizeof fsnp);
		memcpy(m->fsnp_tls, fsnp_tls, sizeof fsnp_tls);
		memcpy(m->admin, admin, sizeof admin);
		s->generation++;
	}
	m->has_record = true;
	if (m->nonvoter != ((flags & STORE_NODE_F_NONVOTER) != 0)) {
		m->nonvoter = (flags & STORE_NODE_F_NONVOTER) != 0;
		log_info(s->log, "shards", "node %" PRIu64 " %s", m->id,
		         m->nonvoter ? "was demoted: it holds standbys only"
		                     : "may vote");
		placement = true;
		s->generation++;
	}
	if (m->state != state || m->slot != slot) {
		if (m->state != state) {
			log_info(s->log, "shards", "node %" PRIu64 " is %s",
			         m->id, state_name(state));
		}
		m->state = state;
		m->slot = slot;
		placement = true;
		s->save_gen++;
	}
	return placement;
}

static void apply_node_list(struct shards *s, const uint8_t *buf, size_t len)
{
	struct store_result r;
	struct store_value v;
	bool mine = false;
	uint32_t n;

	if (store_result_open(buf, len, &r) != 0 || r.status != STORE_OK ||
	    !store_result_next(&r, &v) || v.tag != STORE_T_ARRAY) {
		return;
	}
	n = v.n;
	for (uint32_t i = 0; i < n; i++) {
		struct store_value k, val, arr;
		if (!store_result_next(&r, &arr) || arr.tag != STORE_T_ARRAY ||
		    arr.n != 2 || !store_result_next(&r, &k) ||
		    k.tag != STORE_T_BYTES || k.len != 8 ||
		    !store_result_next(&r, &val) || val.tag != STORE_T_BYTES) {
			return;
		}
		apply_record(s, get_be64(k.p), val.p, val.len, &mine);
	}
	if (!mine) {
		s->published = false; /* lost or stale: publish again */
	}
	{
		struct member *me = member(s, s->cfg.node_id);
		if (s->joining && me != NULL && me->has_record) {
			s->joining = false;
			log_info(s->log, "shards",
			         "admitted to the cluster as node %" PRIu64,
			         me->id);
		}
		if (me != NULL && me->has_record &&
		    me->state == STORE_NODE_REMOVED && !s->removed) {
			s->removed = true;
			log_warn(s->log, "shards",
			         "node %" PRIu64 " was removed from the "
			         "cluster: stopping",
			         me->id);
		}
	}
	s->members_known = true;
	membership_recompute(s);
}

static void on_published(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct shards *s = data;
	struct store_result r;

	s->publishing = false;
	if (s->closing) {
		return;
	}
	if (status == REPLICA_OK && store_result_open(result, len, &r) == 0 &&
	    r.status == STORE_OK) {
		s->published = true;
		s->meta_ms = 0; /* list again at once */
		log_debug(s->log, "shards", "node record published: %s",
		          s->record);
	}
}

static void on_listed(void *data, int status, const uint8_t *result, size_t len)
{
	struct shards *s = data;
	s->listing = false;
	if (!s->closing && status == REPLICA_OK) {
		apply_node_list(s, result, len);
	}
}

static void apply_conf(struct shards *s, const uint8_t *buf, size_t len)
{
	struct store_result r;
	struct store_value v;
	char num[16];

	if (store_result_open(buf, len, &r) != 0 || r.status != STORE_OK ||
	    !store_result_next(&r, &v) || v.tag != STORE_T_BYTES ||
	    v.len == 0 || v.len >= sizeof num) {
		return;
	}
	memcpy(num, v.p, v.len);
	num[v.len] = '\0';
	if ((unsigned)atoi(num) != s->replicas_meta && atoi(num) > 0) {
		s->replicas_meta = (unsigned)atoi(num);
		log_info(s->log, "shards", "%u replicas per shard",
		         s->replicas_meta);
		membership_recompute(s);
	}
}

static void on_conf_read(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct shards *s = data;
	s->conf_busy = false;
	if (!s->closing && status == REPLICA_OK) {
		apply_conf(s, result, len);
	}
}

static void on_conf_init(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct shards *s = data;
	(void)status;
	(void)result;
	(void)len;
	s->conf_busy = false;
	s->meta_ms = 0;
}

/* Proposes (or reads, `read`) a meta group command; `cb` gets the
 * answer. */
static int meta_submit(struct shards *s, const struct store_cmd *c, bool read,
                       forward_cb cb, void *data)
{
	uint8_t *cmd = NULL;
	size_t len = 0;
	const char *err;
	int rv;

	if (store_cmd_encode(c, &cmd, &len, &err) != 0) {
		return -1;
	}
	rv = forward_submit(s->f, 0, read ? FORWARD_READ : FORWARD_PROPOSE, cmd,
	                    len, 0, cb, data);
	free(cmd);
	return rv == REPLICA_OK ? 0 : -1;
}

/* Reads the meta group: from our own replica (possibly a little stale,
 * which routing and placement tolerate), else on its leader. */
static void meta_read(struct shards *s, const struct store_cmd *c,
                      void (*apply)(struct shards *, const uint8_t *, size_t),
                      forward_cb cb, bool *busy)
{
	uint8_t *cmd = NULL;
	size_t len = 0;
	const char *err;

	if (*busy) {
		return;
	}
	if (s->routes[0].local && !s->routes[0].deleting) {
		struct fsm_result res = {0};
		if (store_cmd_encode(c, &cmd, &len, &err) == 0 &&
		    store_read(s->store, 0, shards_now_ms(s), cmd, len, &res) ==
		        0) {
			apply(s, res.data, res.len);
		}
		free(res.data);
		free(cmd);
		return;
	}
	if (meta_submit(s, c, true, cb, s) == 0) {
		*busy = true;
	}
}

#define CURSOR_KEY_SETTING "flow_cursor_key"

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	                              : -1;
}

static void apply_cursor_key(struct shards *s, const uint8_t *buf, size_t len)
{
	struct store_result r;
	struct store_value v;

	if (store_result_open(buf, len, &r) != 0 || r.status != STORE_OK ||
	    !store_result_next(&r, &v)) {
		return;
	}
	if (v.tag != STORE_T_BYTES) {
		s->cursor_key_absent = true; /* nil: not created yet */
		return;
	}
	if (v.len != 64) {
		return;
	}
	for (size_t i = 0; i < 32; i++) {
		int hi = hexval((char)v.p[2 * i]),
		    lo = hexval((char)v.p[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			return;
		}
		s->cursor_key[i] = (uint8_t)(hi << 4 | lo);
	}
	s->cursor_key_known = true;
	s->cursor_key_absent = false;
}

static void on_cursor_read(void *data, int status, const uint8_t *result,
                           size_t len)
{
	struct shards *s = data;
	s->cursor_busy = false;
	if (!s->closing && status == REPLICA_OK) {
		apply_cursor_key(s, result, len);
	}
}

static void on_cursor_init(void *data, int status, const uint8_t *result,
                           size_t len)
{
	struct shards *s = data;
	(void)status;
	(void)result;
	(void)len;
	s->cursor_busy = false;
	s->cursor_key_absent = false; /* read again: the first one set wins */
	s->meta_ms = 0;
}

/* The cursor key: read it from the meta group; when it is unset, propose
 * a random one (set-if-absent, so every node ends up with the first). */
static void cursor_key_step(struct shards *s)
{
	static const char hex[] = "0123456789abcdef";
	struct store_cmd c;
	uint8_t raw[32];
	char text[64];

	if (s->cursor_key_known || s->cursor_busy || s->joining) {
		return;
	}
	memset(&c, 0, sizeof c);
	c.key.p = (const uint8_t *)CURSOR_KEY_SETTING;
	c.key.len = strlen(CURSOR_KEY_SETTING);
	if (!s->cursor_key_absent) {
		c.op = STORE_OP_CONF_GET;
		meta_read(s, &c, apply_cursor_key, on_cursor_read,
		          &s->cursor_busy);
		return;
	}
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
		log_warn(s->log, "shards",
		         "no randomness for the Flow query cursor key: %s",
		         strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof raw; i++) {
		text[2 * i] = hex[raw[i] >> 4];
		text[2 * i + 1] = hex[raw[i] & 15];
	}
	c.op = STORE_OP_CONF_INIT;
	c.value.p = (const uint8_t *)text;
	c.value.len = sizeof text;
	if (meta_submit(s, &c, false, on_cursor_init, s) == 0) {
		s->cursor_busy = true;
	}
	memset(raw, 0, sizeof raw);
}

int shards_flow_cursor_key(const struct shards *s, uint8_t key[32])
{
	if (!s->cursor_key_known) {
		return -1;
	}
	memcpy(key, s->cursor_key, 32);
	return 0;
}

void membership_refresh(struct shards *s)
{
	struct store_cmd c;
	uint8_t key[8];

	membership_make_record(s);
	cursor_key_step(s);
	/* A joining node publishes once admitted (its record exists). */
	if (!s->published && !s->publishing && !s->joining) {
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_NODE_SET;
		put_be64(key, s->cfg.node_id);
		c.key.p = key;
		c.key.len = 8;
		c.value.p = (const uint8_t *)s->record;
		c.value.len = strlen(s->record);
		if (meta_submit(s, &c, false, on_published, s) == 0) {
			s->publishing = true;
		}
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_LIST;
	meta_read(s, &c, apply_node_list, on_listed, &s->listing);
	memset(&c, 0, sizeof c);
	c.key.p = (const uint8_t *)"replicas";
	c.key.len = strlen("replicas");
	if (s->replicas_meta == 0 && s->cfg.join == NULL && !s->conf_busy &&
	    s->members_known) {
		/* Bootstrap: the first node to get there records R. */
		char num[16];
		snprintf(num, sizeof num, "%u", membership_replicas(s));
		c.op = STORE_OP_CONF_INIT;
		c.value.p = (const uint8_t *)num;
		c.value.len = strlen(num);
		if (meta_submit(s, &c, false, on_conf_init, s) == 0) {
			s->conf_busy = true;
		}
		return;
	}
	c.op = STORE_OP_CONF_GET;
	meta_read(s, &c, apply_conf, on_conf_read, &s->conf_busy);
}

/* ---- joining ---- */

static void on_join_answer(void *data, int status, const char *text)
{
	struct shards *s = data;
	const char *p = text;

	s->join = NULL;
	s->join_sent = false;
	if (status == JOIN_ECANCELED || s->closing) {
		return;
	}
	if (status != MSG_HS_OK) {
		log_warn(s->log, "shards", "join through %s: %s", s->cfg.join,
		         text);
		return;
	}
	/* "ID=HOST:PORT,...": the members to dial. */
	while (*p != '\0') {
		char item[SHARDS_ADDR_MAX + 32], *eq;
		size_t l = strcspn(p, ",");
		if (l < sizeof item) {
			memcpy(item, p, l);
			item[l] = '\0';
			eq = strchr(item, '=');
			if (eq != NULL) {
				*eq = '\0';
				member_add(s, strtoull(item, NULL, 10), eq + 1);
			}
		}
		p += l;
		if (*p == ',') {
			p++;
		}
	}
	s->meta_ms = 0;
}

static void join_step(struct shards *s)
{
	struct msg_join req = {0};
	uint64_t now = now_ms(s);

	if (!s->joining || s->join_sent ||
	    (s->join_ms != 0 && now - s->join_ms < JOIN_RETRY_MS)) {
		return;
	}
	membership_make_record(s);
	req.version = MSG_VERSION;
	req.from = s->cfg.node_id;
	req.cluster = s->cluster_id;
	req.cluster_len = strlen(s->cluster_id);
	req.record = s->record;
	req.record_len = strlen(s->record);
	s->join_ms = now;
	if (join_start(&s->join, s->loop, (struct sockaddr *)&s->join_addr,
	               &req, s->tls_client, 3000, on_join_answer, s) == 0) {
		s->join_sent = true;
	}
}

static void on_node_joined(void *data, int status, const uint8_t *result,
                           size_t len)
{
	struct shards *s = data;
	struct store_result r;
	if (s->closing) {
		return;
	}
	if (status != REPLICA_OK || store_result_open(result, len, &r) != 0 ||
	    r.status != STORE_OK) {
		log_warn(s->log, "shards", "recording a joining node failed");
	}
	s->meta_ms = 0;
}

/* A node asks to join through us (transport_join_fn). */
int membership_on_join(void *data, uint64_t id, const char *record, size_t len,
                       char *reply, size_t cap)
{
	struct shards *s = data;
	struct member *m = member(s, id);
	char internal[SHARDS_ADDR_MAX];
	struct store_cmd c;
	uint8_t key[8];
	size_t n = 0;

	if (s->closing) {
		snprintf(reply, cap, "node %" PRIu64 " is stopping",
		         s->cfg.node_id);
		return MSG_HS_STRANGER;
	}
	if (m != NULL && m->state == STORE_NODE_REMOVED) {
		snprintf(reply, cap,
		         "node %" PRIu64 " was removed from the cluster; join "
		         "with a new --node-id and an empty data directory",
		         id);
		return MSG_HS_STRANGER;
	}
	shards_record_field(record, len, "internal", internal, sizeof internal);
	{
		char host[256];
		uint16_t port;
		if (len >= RECORD_MAX ||
		    membership_split_hostport(internal, host, sizeof host,
		                              &port) != 0) {
			snprintf(reply, cap,
			         "the record needs internal=HOST:PORT and at "
			         "most %d bytes",
			         RECORD_MAX - 1);
			return MSG_HS_STRANGER;
		}
	}
	if (m != NULL && m->has_record && strcmp(m->internal, internal) != 0) {
		snprintf(reply, cap, "node id %" PRIu64 " is taken by %s", id,
		         m->internal);
		return MSG_HS_STRANGER;
	}
	if (m == NULL || !m->has_record) {
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_NODE_JOIN;
		put_be64(key, id);
		c.key.p = key;
		c.key.len = 8;
		c.value.p = (const uint8_t *)record;
		c.value.len = len;
		c.kind = STORE_NODE_JOINING;
		if (meta_submit(s, &c, false, on_node_joined, s) != 0) {
			snprintf(reply, cap, "the meta group is unavailable");
			return MSG_HS_STRANGER;
		}
		if (m == NULL && (m = member_add(s, id, internal)) != NULL) {
			m->state = STORE_NODE_JOINING;
		}
		log_info(s->log, "shards", "node %" PRIu64 " (%s) joins", id,
		         internal);
	}
	reply[0] = '\0';
	for (size_t i = 0; i < s->n_members && n < cap; i++) {
		const struct member *x = &s->members[i];
		if (x->state == STORE_NODE_REMOVED) {
			continue;
		}
		n += (size_t)snprintf(reply + n, cap - n, "%s%" PRIu64 "=%s",
		                      n == 0 ? "" : ",", x->id, x->internal);
	}
	return MSG_HS_OK;
}

/* ---- local replicas ---- */

void membership_on_unknown(void *data, uint64_t peer, uint32_t group, int type)
{
	struct shards *s = data;
	(void)peer;
	/* A leader replicating to us: it added us to the group. Started at
	 * the next tick (not inside the transport's delivery). */
	if ((type == RAFT_IO_APPEND_ENTRIES ||
	     type == RAFT_IO_INSTALL_SNAPSHOT) &&
	    valid_group(s, group) && !s->routes[group].local &&
	    !s->routes[group].deleting && !s->removed && !s->closing) {
		s->routes[group].start_wanted = true;
	}
}

/* Creates and starts group g, bootstrapped with `boot` when given. */
int membership_start_group(struct shards *s, uint32_t g, const uint64_t *boot,
                           size_t n_boot, char *err, size_t errlen)
{
	struct group_member mem[MAX_REPLICAS];
	int rv;

	for (size_t i = 0; i < n_boot && i < MAX_REPLICAS; i++) {
		mem[i].id = boot[i];
		mem[i].address = member(s, boot[i])->internal;
	}
	rv = group_create(s->groups, g, &s->fsm, NULL);
	if (rv == REPLICA_OK && n_boot > 0) {
		rv = group_bootstrap(s->groups, g, mem, (unsigned)n_boot);
		if (rv == REPLICA_EEXIST) {
			rv = REPLICA_OK; /* restart: state exists */
		}
	}
	if (rv == REPLICA_OK) {
		rv = group_start(s->groups, g);
	}
	if (rv != REPLICA_OK) {
		/* The state machine says why it failed, if it did. */
		const char *why = store_last_error(s->store);
		snprintf(err, errlen, "raft group %" PRIu32 ": %s%s%s", g,
		         group_mgr_errmsg(s->groups), *why ? ": " : "", why);
		return -1;
	}
	s->routes[g].local = true;
	s->routes[g].orphan_ms = 0;
	s->save_gen++;
	return 0;
}

/* Whether replica g here has been removed from its group: it is not in
 * the group's configuration any more, or it is cut off (no leader heard,
 * or candidate) while another node announces that it leads the group. */
static bool looks_removed(struct shards *s, uint32_t g, bool *empty)
{
	struct route *r = &s->routes[g];
	struct group_server sv[GROUP_MAX_VOTERS];
	struct group_brief st;
	unsigned n = 0;
	bool changing, in = false;

	*empty = false;
	if (group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n, &changing) !=
	        REPLICA_OK ||
	    group_brief(s->groups, g, &st) != REPLICA_OK) {
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		in = in || sv[i].id == s->cfg.node_id;
	}
	if (n == 0) {
		*empty = true;
		return true;
	}
	if (!in) {
		return true;
	}
	return st.role != GROUP_ROLE_LEADER && r->ann_leader != 0 &&
	       r->ann_leader != s->cfg.node_id &&
	       now_ms(s) - r->ann_ms < ANNOUNCE_TTL_MS &&
	       (st.role == GROUP_ROLE_CANDIDATE ||
	        st.last_contact_ms > LOST_LEADER_MS);
}

/* Starts the groups a leader added us to; deletes the replicas removed
 * from their group (their log and state), once they have been out for a
 * while and placement no longer names this node. */
static void groups_step(struct shards *s)
{
	uint64_t now = now_ms(s);
	char err[512];

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_status st;
		bool empty;

		if (r->deleting) {
			char msg[RAFT_ERRMSG_BUF_SIZE];
			if (group_status(s->groups, g, &st) !=
			    REPLICA_ENOGROUP) {
				continue; /* still closing */
			}
			if (rio_store_erase(s->rio, g, msg) != 0 ||
			    store_drop(s->store, g) != 0) {
				log_error(s->log, "shards",
				          "group %" PRIu32
				          ": deleting the replica: %s",
				          g, msg);
			}
			r->deleting = false;
			r->local = false;
			r->role = GROUP_ROLE_UNAVAILABLE;
			r->leader = 0;
			r->ready = false;
			s->save_gen++;
			s->published = false;
			log_info(s->log, "shards",
			         "group %" PRIu32 ": replica deleted", g);
			continue;
		}
		if (r->start_wanted) {
			r->start_wanted = false;
			if (!r->local) {
				if (membership_start_group(s, g, NULL, 0, err,
				                           sizeof err) != 0) {
					log_error(s->log, "shards", "%s", err);
				} else {
					log_info(s->log, "shards",
					         "group %" PRIu32
					         ": replica started (added "
					         "by its leader)",
					         g);
				}
			}
			continue;
		}
		if (!r->local || !s->members_known ||
		    membership_has(r->replicas, r->n_replicas,
		                   s->cfg.node_id) ||
		    membership_has(r->standbys, r->n_standbys,
		                   s->cfg.node_id) ||
		    !looks_removed(s, g, &empty)) {
			r->orphan_ms = 0;
			continue;
		}
		if (r->orphan_ms == 0) {
			r->orphan_ms = now;
		}
		if (now - r->orphan_ms < (empty ? EMPTY_MS : ORPHAN_MS)) {
			continue;
		}
		log_info(s->log, "shards",
		         "group %" PRIu32 ": this node's replica was removed; "
		         "deleting it",
		         g);
		if (group_stop(s->groups, g) == REPLICA_OK) {
			r->deleting = true;
		}
	}
}

/* ---- moving replicas (on each group's leader) ---- */

static void on_changed(void *data, uint32_t g, int status)
{
	struct shards *s = data;
	struct route *r;
	if (!valid_group(s, g)) {
		return;
	}
	r = &s->routes[g];
	r->change_pending = false;
	s->generation++;
	if (status != 0 && !s->closing) {
		log_warn(s->log, "shards",
		         "group %" PRIu32 ": configuration change failed: %s",
		         g, replica_strerror(status));
	}
}

static bool alive(struct shards *s, uint64_t id)
{
	return id == s->cfg.node_id ||
	       (s->t != NULL && transport_connected(s->t, id));
}

/* Each group this node leads moves one step towards its target. */
static void reconcile(struct shards *s)
{
	unsigned limit = s->cfg.rebalance_concurrency != 0
	                     ? s->cfg.rebalance_concurrency
	                     : 2;
	unsigned moving = 0;
	uint64_t now = now_ms(s);
	uint64_t al[MAX_NODES];
	size_t n_alive = 0;

	for (size_t i = 0; i < s->n_members; i++) {
		if (alive(s, s->members[i].id)) {
			al[n_alive++] = s->members[i].id;
		}
	}
	/* Moves under way: groups we lead with a replica on its way in. */
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_server sv[GROUP_MAX_VOTERS];
		unsigned n = 0;
		bool changing;
		if (!r->local || r->deleting || r->role != GROUP_ROLE_LEADER ||
		    group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n,
		                 &changing) != REPLICA_OK) {
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			/* A demoted node's standby counts while it is being
			 * built (a spare, or behind), not once it follows. */
			if (sv[i].role != GROUP_VOTER &&
			    (!membership_has(r->standbys, r->n_standbys,
			                     sv[i].id) ||
			     sv[i].role != GROUP_STANDBY || !sv[i].caught_up)) {
				moving++;
				break;
			}
		}
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_server sv[GROUP_MAX_VOTERS];
		struct rebalance_server rs[GROUP_MAX_VOTERS];
		struct rebalance_group rg;
		struct rebalance_move mv;
		struct member *m;
		unsigned n = 0;
		bool changing;
		int rv = -1;

		if (!r->local || r->deleting || r->role != GROUP_ROLE_LEADER ||
		    !r->ready || r->change_pending ||
		    group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n,
		                 &changing) != REPLICA_OK ||
		    changing) {
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			rs[i].id = sv[i].id;
			rs[i].role = sv[i].role == GROUP_VOTER ? REBALANCE_VOTER
			             : sv[i].role == GROUP_STANDBY
			                 ? REBALANCE_STANDBY_ROLE
			                 : REBALANCE_SPARE;
			rs[i].caught_up = sv[i].caught_up;
		}
		rg.servers = rs;
		rg.n_servers = n;
		rg.leader = s->cfg.node_id;
		rg.target = r->replicas;
		rg.n_target = r->n_replicas;
		rg.alive = al;
		rg.n_alive = n_alive;
		rg.standby = r->standbys;
		rg.n_standby = r->n_standbys;
		rebalance_next(&rg, &mv);
		switch (mv.kind) {
		case REBALANCE_ADD:
			m = member(s, mv.node);
			if (moving >= limit || m == NULL) {
				continue;
			}
			rv = group_change(s->groups, g, GROUP_CHANGE_ADD,
			                  mv.node, m->internal, 0, on_changed,
			                  s);
			moving += rv == 0;
			break;
		case REBALANCE_STANDBY:
		case REBALANCE_PROMOTE:
		case REBALANCE_DEMOTE:
			rv = group_change(
			    s->groups, g, GROUP_CHANGE_ASSIGN, mv.node, NULL,
			    mv.kind == REBALANCE_PROMOTE ? GROUP_VOTER
			                                 : GROUP_STANDBY,
			    on_changed, s);
			break;
		case REBALANCE_REMOVE:
			rv = group_change(s->groups, g, GROUP_CHANGE_REMOVE,
			                  mv.node, NULL, 0, on_changed, s);
			break;
		case REBALANCE_TRANSFER:
			if (r->transfer_ms != 0 &&
			    now - r->transfer_ms < 3000) {
				continue;
			}
			r->transfer_ms = now;
			if (group_transfer(s->groups, g, mv.node) == 0) {
				log_info(s->log, "shards",
				         "group %" PRIu32
				         ": handing leadership to node %" PRIu64
				         " (placement moves off this node)",
				         g, mv.node);
			}
			continue;
		default:
			continue;
		}
		if (rv == 0) {
			r->change_pending = true;
			log_info(s->log, "shards",
			         "group %" PRIu32 ": %s node %" PRIu64, g,
			         rebalance_name(mv.kind), mv.node);
		} else {
			log_debug(s->log, "shards", "group %" PRIu32 ": %s: %s",
			          g, rebalance_name(mv.kind),
			          group_mgr_errmsg(s->groups));
		}
	}
}

/* A joining node becomes active once it votes in every group placement
 * gives it. */
static void on_state_changed(void *data, int status, const uint8_t *result,
                             size_t len)
{
	struct shards *s = data;
	(void)status;
	(void)result;
	(void)len;
	s->state_busy = false;
	s->meta_ms = 0;
}

static void self_state_step(struct shards *s)
{
	struct member *me = member(s, s->cfg.node_id);
	struct store_cmd c;
	uint8_t key[8];

	if (!s->members_known || s->state_busy || me == NULL ||
	    !me->has_record || me->state != STORE_NODE_JOINING) {
		return;
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (membership_has(r->replicas, r->n_replicas, me->id) &&
		    !local_voter(s, g)) {
			return;
		}
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	put_be64(key, me->id);
	c.key.p = key;
	c.key.len = 8;
	c.kind = STORE_NODE_ACTIVE;
	c.max = 1u << STORE_NODE_JOINING;
	if (meta_submit(s, &c, false, on_state_changed, s) == 0) {
		s->state_busy = true;
	}
}

/* ---- DATA/cluster (members and local groups) ---- */

/* "lodestone-cluster 1", then "member ID INTERNAL STATE SLOT" and
 * "group G" lines: what this node knew at its last change, so that a
 * restart finds its peers and its replicas without --peers or --join. */
static void save_cluster(struct shards *s)
{
	char path[1100], tmp[1110];
	FILE *f;
	int fd;

	if (!s->cluster || s->save_gen == s->saved_gen) {
		return;
	}
	snprintf(path, sizeof path, "%s/cluster", s->data_dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f == NULL) {
		log_warn(s->log, "shards", "cannot write %s: %s", tmp,
		         strerror(errno));
		return;
	}
	fprintf(f, "lodestone-cluster 1\n");
	for (size_t i = 0; i < s->n_members; i++) {
		const struct member *m = &s->members[i];
		fprintf(f, "member %" PRIu64 " %s %d %" PRIu64 "\n", m->id,
		        m->internal, m->state, m->slot);
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		if (s->routes[g].local && !s->routes[g].deleting) {
			fprintf(f, "group %" PRIu32 "\n", g);
		}
	}
	fflush(f);
	fd = fileno(f);
	if (fsync(fd) != 0 || ferror(f)) {
		fclose(f);
		unlink(tmp);
		return;
	}
	fclose(f);
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return;
	}
	s->saved_gen = s->save_gen;
}

/* Reads DATA/cluster: members into s->members, groups into `groups`
 * (true = local). Returns 1 when read, 0 when absent, -1 when bad. */
int membership_load(struct shards *s, bool *groups)
{
	char path[1100], line[512];
	FILE *f;
	int rv = 1;

	snprintf(path, sizeof path, "%s/cluster", s->data_dir);
	f = fopen(path, "r");
	if (f == NULL) {
		return errno == ENOENT ? 0 : -1;
	}
	if (fgets(line, sizeof line, f) == NULL ||
	    strcmp(line, "lodestone-cluster 1\n") != 0) {
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		unsigned long long id, slot;
		unsigned g;
		int state;
		char addr[SHARDS_ADDR_MAX];
		if (sscanf(line, "member %llu %299s %d %llu", &id, addr, &state,
		           &slot) == 4) {
			struct member *m = member_add(s, id, addr);
			if (m != NULL) {
				m->state = state;
				m->slot = slot;
			}
		} else if (sscanf(line, "group %u", &g) == 1) {
			if (g <= s->cfg.data_groups) {
				groups[g] = true;
			}
		} else {
			rv = -1;
		}
	}
	fclose(f);
	return rv;
}

/* ---- cluster operations ---- */

static const char *op_kind_name(int kind)
{
	switch (kind) {
	case MEMBERSHIP_OP_DRAIN:
		return "drain";
	case MEMBERSHIP_OP_REMOVE:
		return "remove";
	case MEMBERSHIP_OP_REPLACE:
		return "replace";
	case MEMBERSHIP_OP_PROMOTE:
		return "promote";
	case MEMBERSHIP_OP_DEMOTE:
		return "demote";
	default:
		return "transfer-leader";
	}
}

static void op_fail(struct op *o, const char *msg)
{
	o->state = 2;
	snprintf(o->error, sizeof o->error, "%s", msg);
	log_warn(o->s->log, "shards", "%s %" PRIu64 " failed: %s",
	         op_kind_name(o->kind), o->node, msg);
}

static void on_op_proposed(void *data, int status, const uint8_t *result,
                           size_t len)
{
	struct op *o = data;
	struct store_result r;
	struct store_value v;

	o->waiting = false;
	if (o->s->closing || o->state != 0) {
		return;
	}
	if (status != REPLICA_OK) {
		/* No answer from the meta group (leadership moved, no leader
		 * in time): the state changes are idempotent, so the step is
		 * tried again at the next tick, for a while. */
		if (now_ms(o->s) - o->started_ms > OP_RETRY_MS) {
			op_fail(o, replica_strerror(status));
		}
		return;
	}
	if (store_result_open(result, len, &r) != 0) {
		op_fail(o, "malformed answer from the meta group");
		return;
	}
	if (r.status != STORE_OK) {
		char msg[200] = "refused by the meta group";
		if (store_result_next(&r, &v) && v.tag == STORE_T_BYTES) {
			snprintf(msg, sizeof msg, "%.*s", (int)v.len,
			         (const char *)v.p);
		}
		op_fail(o, msg);
		return;
	}
	o->step++;
	o->s->meta_ms = 0; /* see the change at once */
}

static void op_set_state(struct op *o, uint64_t node, int state, unsigned mask,
                         uint64_t slot)
{
	struct shards *s = o->s;
	struct store_cmd c;
	uint8_t key[8];

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	put_be64(key, node);
	c.key.p = key;
	c.key.len = 8;
	c.kind = (uint8_t)state;
	c.max = mask;
	c.offset = slot;
	if (meta_submit(s, &c, false, on_op_proposed, o) == 0) {
		o->waiting = true;
	} else {
		op_fail(o, "the meta group is unavailable");
	}
}

static void op_set_voter(struct op *o, uint64_t node, bool voter)
{
	struct store_cmd c;
	uint8_t key[8];

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_VOTER;
	put_be64(key, node);
	c.key.p = key;
	c.key.len = 8;
	c.kind = voter ? 1 : 0;
	if (meta_submit(o->s, &c, false, on_op_proposed, o) == 0) {
		o->waiting = true;
	} else {
		op_fail(o, "the meta group is unavailable");
	}
}

/* Promote / demote progress from the node's published record: the groups
 * it votes in. A promotion is done when it votes in every group placement
 * gives it, a demotion when it votes in none. */
static void op_voting(struct shards *s, struct op *o, const struct member *m)
{
	if (o->kind == MEMBERSHIP_OP_DEMOTE) {
		if (m->n_held > o->total) {
			o->total = m->n_held;
		}
		o->done = o->total - m->n_held;
		if (m->nonvoter && m->n_held == 0) {
			o->state = 1;
		}
		return;
	}
	o->total = 0;
	o->done = 0;
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		const struct route *r = &s->routes[g];
		if (membership_has(r->replicas, r->n_replicas, m->id)) {
			o->total++;
			o->done += held_has(m, g);
		}
	}
	if (!m->nonvoter && o->done == o->total) {
		o->state = 1;
	}
}

bool membership_group_rebuilt(const uint64_t *target, size_t k, size_t have,
                              uint64_t with, bool with_holds)
{
	if (have < k) {
		return false;
	}
	return with == 0 || with_holds || !membership_has(target, k, with);
}

/* Groups `gone` held whose new replicas are in: every other holder set
 * reaches the target again (and holds `with` where the target names
 * it). */
static void op_moved(struct shards *s, struct op *o, const struct member *gone,
                     const struct member *with)
{
	unsigned total = 0, done = 0;

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		uint64_t t[MAX_NODES];
		size_t k, have = 0;
		if (!held_has(gone, g)) {
			continue;
		}
		total++;
		k = target_of(s, g, t);
		for (size_t i = 0; i < s->n_members; i++) {
			const struct member *m = &s->members[i];
			if (m != gone && holds_replicas(m) && held_has(m, g)) {
				have++;
			}
		}
		if (membership_group_rebuilt(
		        t, k, have, with != NULL ? with->id : 0,
		        with != NULL && held_has(with, g))) {
			done++;
		}
	}
	o->total = total;
	o->done = done;
}

static void op_step(struct shards *s, struct op *o)
{
	struct member *m = member(s, o->node);
	struct member *w = o->with != 0 ? member(s, o->with) : NULL;
	const unsigned live = (1u << STORE_NODE_JOINING) |
	                      (1u << STORE_NODE_ACTIVE) |
	                      (1u << STORE_NODE_DRAINING);

	if (o->state != 0 || o->waiting) {
		return;
	}
	if (o->kind == MEMBERSHIP_OP_TRANSFER) {
		bool self;
		uint64_t l = shards_leader(s, (uint32_t)o->node, &self);
		if (l != 0 &&
		    (o->with != 0 ? l == o->with : l != o->old_leader)) {
			o->state = 1;
			o->done = o->total = 1;
		} else if (now_ms(s) - o->started_ms > 15000) {
			op_fail(o, "leadership did not move in 15 s");
		}
		return;
	}
	if (m == NULL) {
		op_fail(o, "the node is no longer known");
		return;
	}
	/* Steps: drain 0 draining, 1 wait until it holds nothing; remove (of
	 * a live node) the same, then 5 removed, 6 done; remove of
	 * a dead node 2 removed, 3 wait until its groups are rebuilt;
	 * replace 0 removed, 1 the new node takes its slot, 2 wait; promote
	 * and demote 0 the node's voter flag, 1 wait for its votes. A step
	 * whose write got no answer runs again. */
	switch (o->kind * 10 + o->step) {
	case MEMBERSHIP_OP_DRAIN * 10 + 0:
	case MEMBERSHIP_OP_REMOVE * 10 + 0:
		if (o->kind == MEMBERSHIP_OP_REMOVE && !o->drain_first) {
			o->step = 2;
			op_step(s, o);
			return;
		}
		op_set_state(
		    o, o->node, STORE_NODE_DRAINING,
		    (1u << STORE_NODE_JOINING) | (1u << STORE_NODE_ACTIVE), 0);
		return;
	case MEMBERSHIP_OP_DRAIN * 10 + 1:
	case MEMBERSHIP_OP_REMOVE * 10 + 1:
		/* Drained once its own record lists no group. */
		if (m->n_held > o->total) {
			o->total = m->n_held;
		}
		o->done = o->total - m->n_held;
		if (m->state != STORE_NODE_DRAINING || m->n_held > 0) {
			return;
		}
		if (o->kind == MEMBERSHIP_OP_DRAIN) {
			o->state = 1;
			return;
		}
		o->step = 5;
		op_step(s, o);
		return;
	case MEMBERSHIP_OP_REMOVE * 10 + 5:
		op_set_state(o, o->node, STORE_NODE_REMOVED,
		             1u << STORE_NODE_DRAINING, 0);
		return;
	case MEMBERSHIP_OP_REMOVE * 10 + 6:
		o->state = 1;
		o->done = o->total;
		return;
	case MEMBERSHIP_OP_REMOVE * 10 + 2:
		op_moved(s, o, m, NULL);
		op_set_state(o, o->node, STORE_NODE_REMOVED, live, 0);
		return;
	case MEMBERSHIP_OP_REMOVE * 10 + 3:
	case MEMBERSHIP_OP_REPLACE * 10 + 2:
		op_moved(s, o, m, w);
		if (o->done == o->total) {
			o->state = 1;
		}
		return;
	case MEMBERSHIP_OP_PROMOTE * 10 + 0:
	case MEMBERSHIP_OP_DEMOTE * 10 + 0:
		op_set_voter(o, o->node, o->kind == MEMBERSHIP_OP_PROMOTE);
		return;
	case MEMBERSHIP_OP_PROMOTE * 10 + 1:
	case MEMBERSHIP_OP_DEMOTE * 10 + 1:
		op_voting(s, o, m);
		return;
	case MEMBERSHIP_OP_REPLACE * 10 + 0:
		op_moved(s, o, m, w);
		op_set_state(o, o->node, STORE_NODE_REMOVED, live, 0);
		return;
	case MEMBERSHIP_OP_REPLACE * 10 + 1:
		if (w == NULL) {
			o->step = 2;
			return;
		}
		/* The new node takes the dead one's placement slot: exactly
		 * its groups move there. */
		op_set_state(o, o->with, w->state, live, m->slot);
		return;
	default:
		return;
	}
}

static void ops_step(struct shards *s)
{
	for (size_t i = 0; i < MAX_OPS; i++) {
		if (s->ops[i].id != 0) {
			op_step(s, &s->ops[i]);
		}
	}
}

/* A quorum of the R voters a group wants. */
static unsigned voter_quorum(const struct shards *s)
{
	return membership_replicas(s) / 2 + 1;
}

int membership_op_start(struct shards *s, int kind, uint64_t node,
                        uint64_t with, uint64_t *op, char *err, size_t errlen)
{
	struct member *m = NULL, *w = NULL;
	struct op *o = NULL;
	uint64_t slots[MAX_NODES], ids[MAX_NODES];
	size_t nh;

	if (!s->cluster) {
		snprintf(err, errlen, "a single node: nothing to move");
		return 409;
	}
	if (kind == MEMBERSHIP_OP_TRANSFER) {
		bool self;
		uint64_t l;
		if (node > s->cfg.data_groups) {
			snprintf(err, errlen, "no group %" PRIu64, node);
			return 404;
		}
		l = shards_leader(s, (uint32_t)node, &self);
		if (!self) {
			snprintf(err, errlen,
			         "node %" PRIu64 " does not lead group %" PRIu64
			         "; ask its leader (node %" PRIu64 ")",
			         s->cfg.node_id, node, l);
			return 421;
		}
		if (with != 0 && with != s->cfg.node_id &&
		    group_transfer(s->groups, (uint32_t)node, with) != 0) {
			snprintf(err, errlen, "%s",
			         group_mgr_errmsg(s->groups));
			return 409;
		}
		if (with == 0 &&
		    group_transfer(s->groups, (uint32_t)node, 0) != 0) {
			snprintf(err, errlen, "%s",
			         group_mgr_errmsg(s->groups));
			return 409;
		}
	} else {
		m = member(s, node);
		if (m == NULL || !m->has_record) {
			snprintf(err, errlen, "no node %" PRIu64, node);
			return 404;
		}
		if (m->state == STORE_NODE_REMOVED) {
			snprintf(err, errlen, "node %" PRIu64 " was removed",
			         node);
			return 409;
		}
		nh = holders(s, false, slots, ids);
		/* A node's votes move only while it is up (its standbys and
		 * its catching up need it); a dead one is replaced instead. */
		if ((kind == MEMBERSHIP_OP_DEMOTE ||
		     kind == MEMBERSHIP_OP_PROMOTE) &&
		    !alive(s, node)) {
			snprintf(err, errlen,
			         "node %" PRIu64 " is not connected: start it "
			         "first, or replace it if it is lost",
			         node);
			return 409;
		}
		/* A demotion, a drain or a removal of a voting node keeps a
		 * voter quorum of R on the others. */
		if ((kind == MEMBERSHIP_OP_DEMOTE ||
		     kind == MEMBERSHIP_OP_DRAIN ||
		     kind == MEMBERSHIP_OP_REMOVE) &&
		    !m->nonvoter && holds_replicas(m) &&
		    holders(s, true, slots, ids) - 1 < voter_quorum(s)) {
			snprintf(err, errlen,
			         "%s node %" PRIu64 " would leave %zu voting "
			         "nodes, fewer than a quorum (%u) of the %u "
			         "voters per shard: %s",
			         kind == MEMBERSHIP_OP_DEMOTE ? "demoting"
			                                      : "removing",
			         node, holders(s, true, slots, ids) - 1,
			         voter_quorum(s), membership_replicas(s),
			         kind == MEMBERSHIP_OP_DEMOTE
			             ? "promote or add a node first"
			             : "promote a node first");
			return 409;
		}
		if (kind == MEMBERSHIP_OP_REPLACE) {
			if (alive(s, node)) {
				snprintf(err, errlen,
				         "node %" PRIu64 " is alive: drain or "
				         "remove it instead",
				         node);
				return 409;
			}
			if (with != 0) {
				w = member(s, with);
				if (w == NULL || !w->has_record ||
				    !holds_replicas(w) || with == node) {
					snprintf(err, errlen,
					         "node %" PRIu64
					         " is not a joining or active "
					         "member (start it with --join "
					         "first)",
					         with);
					return 409;
				}
				if (w->slot != w->id) {
					snprintf(err, errlen,
					         "node %" PRIu64
					         " already replaces another",
					         with);
					return 409;
				}
			}
		}
		if ((kind == MEMBERSHIP_OP_DRAIN ||
		     kind == MEMBERSHIP_OP_REMOVE ||
		     (kind == MEMBERSHIP_OP_REPLACE && with == 0)) &&
		    holds_replicas(m) && nh - 1 < membership_replicas(s)) {
			snprintf(err, errlen,
			         "without node %" PRIu64 " %zu nodes would "
			         "remain for %u replicas per shard: add a "
			         "node first, or replace it --with a new one",
			         node, nh - 1, membership_replicas(s));
			return 409;
		}
		for (size_t i = 0; i < MAX_OPS; i++) {
			struct op *x = &s->ops[i];
			if (x->id != 0 && x->state == 0 &&
			    x->kind != MEMBERSHIP_OP_TRANSFER &&
			    (x->node == node || x->node == with)) {
				snprintf(err, errlen,
				         "operation %" PRIu64
				         " on node %" PRIu64 " is running",
				         x->id, x->node);
				return 409;
			}
		}
	}
	/* A free slot, else the oldest finished one. */
	for (size_t i = 0; i < MAX_OPS; i++) {
		struct op *x = &s->ops[i];
		if (x->id == 0) {
			o = x;
			break;
		}
		if (x->state != 0 && (o == NULL || x->id < o->id)) {
			o = x;
		}
	}
	if (o == NULL) {
		snprintf(err, errlen, "too many operations running");
		return 429;
	}
	memset(o, 0, sizeof *o);
	o->id = ++s->next_op;
	o->kind = kind;
	o->node = node;
	o->with = with;
	o->s = s;
	o->started_ms = now_ms(s);
	if (kind == MEMBERSHIP_OP_TRANSFER) {
		bool self;
		o->old_leader = shards_leader(s, (uint32_t)node, &self);
		o->total = 1;
	} else if (kind == MEMBERSHIP_OP_REMOVE) {
		o->drain_first = alive(s, node);
	}
	log_info(s->log, "shards", "operation %" PRIu64 ": %s %" PRIu64, o->id,
	         op_kind_name(kind), node);
	op_step(s, o);
	*op = o->id;
	return 0;
}

static json_t *op_json(const struct op *o)
{
	static const char *states[] = {"running", "done", "failed"};
	json_t *j =
	    json_pack("{s:I, s:s, s:I, s:s, s:I, s:I}", "id", (json_int_t)o->id,
	              "kind", op_kind_name(o->kind),
	              o->kind == MEMBERSHIP_OP_TRANSFER ? "group" : "node",
	              (json_int_t)o->node, "state", states[o->state], "done",
	              (json_int_t)o->done, "total", (json_int_t)o->total);
	if (j == NULL) {
		return NULL;
	}
	if (o->kind == MEMBERSHIP_OP_REPLACE ||
	    o->kind == MEMBERSHIP_OP_TRANSFER) {
		json_object_set_new(
		    j, o->kind == MEMBERSHIP_OP_REPLACE ? "with" : "to",
		    o->with != 0 ? json_integer((json_int_t)o->with)
		                 : json_null());
	}
	json_object_set_new(j, "error",
	                    o->error[0] != '\0' ? json_string(o->error)
	                                        : json_null());
	return j;
}

int membership_op_json(struct shards *s, uint64_t op, char **out, size_t *len)
{
	for (size_t i = 0; i < MAX_OPS; i++) {
		if (s->ops[i].id == op && op != 0) {
			json_t *j = op_json(&s->ops[i]);
			*out = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
			json_decref(j);
			if (*out == NULL) {
				return -1;
			}
			*len = strlen(*out);
			return 0;
		}
	}
	return -1;
}

void membership_tick(struct shards *s)
{
	join_step(s);
	groups_step(s);
	if (s->members_known && !s->removed) {
		reconcile(s);
		self_state_step(s);
	}
	ops_step(s);
	save_cluster(s);
}

void membership_status_json(struct shards *s, json_t *root)
{
	/* Whether this node holds the shared FLOW.QUERY cursor key (never the
	 * key itself). */
	json_object_set_new(
	    root, "flow_cursor_key",
	    json_string(s->cursor_key_known ? "ready" : "pending"));
	if (s->cursor_key_known) {
		char id[17];
		flow_cursor_key_id(s->cursor_key, id);
		json_object_set_new(root, "flow_cursor_key_id",
		                    json_string(id));
	}
	json_t *nodes = json_array(), *ops = json_array();
	for (size_t i = 0; i < s->n_members; i++) {
		const struct member *m = &s->members[i];
		json_t *o = json_pack(
		    "{s:I, s:s, s:I, s:s, s:b, s:b, s:I}", "id",
		    (json_int_t)m->id, "state", state_name(m->state), "slot",
		    (json_int_t)m->slot, "internal", m->internal, "self",
		    m->id == s->cfg.node_id, "connected", alive(s, m->id),
		    "groups", (json_int_t)m->n_held);
		if (o == NULL) {
			continue;
		}
		json_object_set_new(o, "voter", json_boolean(!m->nonvoter));
		json_object_set_new(o, "felix", json_string(m->felix));
		json_object_set_new(o, "fsnp", json_string(m->fsnp));
		json_object_set_new(o, "fsnp_tls", json_string(m->fsnp_tls));
		json_object_set_new(o, "admin", json_string(m->admin));
		json_array_append_new(nodes, o);
	}
	for (size_t i = 0; i < MAX_OPS; i++) {
		if (s->ops[i].id != 0) {
			json_t *o = op_json(&s->ops[i]);
			if (o != NULL) {
				json_array_append_new(ops, o);
			}
		}
	}
	json_object_set_new(root, "nodes", nodes);
	json_object_set_new(root, "ops", ops);
	json_object_set_new(root, "members_known",
	                    json_boolean(s->members_known));
}

/* --join HOST:PORT resolved once at start. */
int membership_resolve_join(struct shards *s, char *err, size_t errlen)
{
	char host[256], port[8];
	uint16_t p;
	struct addrinfo hints, *res = NULL;

	if (membership_split_hostport(s->cfg.join, host, sizeof host, &p) !=
	    0) {
		snprintf(err, errlen, "join: '%s' is not HOST:PORT",
		         s->cfg.join);
		return -1;
	}
	snprintf(port, sizeof port, "%u", (unsigned)p);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL) {
		snprintf(err, errlen, "join: cannot resolve '%s'", host);
		return -1;
	}
	memcpy(&s->join_addr, res->ai_addr,
	       res->ai_addrlen < sizeof s->join_addr ? res->ai_addrlen
	                                             : sizeof s->join_addr);
	freeaddrinfo(res);
	return 0;
}

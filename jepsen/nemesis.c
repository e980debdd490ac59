/* Nemeses and schedules; see nemesis.h. */
#include "jepsen/nemesis.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#define IPT_TIMEOUT_MS 15000
#define POLL_SLICE_NS 200000000 /* how often waits look for dead nodes */

__attribute__((format(printf, 3, 4))) static void fmt_err(char *err, size_t cap,
                                                          const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || cap == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------------
 * Randomness */

void nemesis_rng_seed(struct nemesis_rng *r, uint64_t seed)
{
	r->state = seed;
}

uint64_t nemesis_rng_next(struct nemesis_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t nemesis_rng_below(struct nemesis_rng *r, uint64_t n)
{
	/* Rejection keeps it unbiased. */
	uint64_t lim = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do {
		x = nemesis_rng_next(r);
	} while (x >= lim);
	return x % n;
}

static int64_t rng_range(struct nemesis_rng *r, int64_t lo, int64_t hi)
{
	return lo + (int64_t)nemesis_rng_below(r, (uint64_t)(hi - lo) + 1);
}

/* order[0..n-1] = a random permutation of node ids 1..n. */
static void shuffle_nodes(struct nemesis_rng *r, unsigned n, unsigned *order)
{
	for (unsigned i = 0; i < n; i++) {
		order[i] = i + 1;
	}
	for (unsigned i = n; i > 1; i--) {
		unsigned j = (unsigned)nemesis_rng_below(r, i);
		unsigned t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
}

/* ---------------------------------------------------------------------
 * Grudges */

void nemesis_grudge_none(struct nemesis_grudge *g, unsigned n)
{
	memset(g, 0, sizeof *g);
	g->n = n;
	snprintf(g->desc, sizeof g->desc, "none");
}

static void cut(struct nemesis_grudge *g, unsigned a, unsigned b)
{
	if (a != b) {
		g->cut[a][b] = true;
		g->cut[b][a] = true;
	}
}

bool nemesis_grudge_sees(const struct nemesis_grudge *g, unsigned a, unsigned b)
{
	return !g->cut[a][b];
}

static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
	size_t l = strlen(buf);
	va_list ap;
	if (l + 1 >= cap) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(buf + l, cap - l, fmt, ap);
	va_end(ap);
}

static const char *side_name(enum nemesis_client_side side)
{
	switch (side) {
	case NEMESIS_CLIENT_MAJORITY:
		return "majority";
	case NEMESIS_CLIENT_MINORITY:
		return "minority";
	default:
		return "all";
	}
}

/* Two sides: in_minor[id] marks the smaller one. Describes it as
 * "minority|majority" with sorted ids. */
static void two_sides(struct nemesis_grudge *g, unsigned n,
                      const bool *in_minor, enum nemesis_client_side side)
{
	nemesis_grudge_none(g, n);
	g->desc[0] = '\0';
	for (unsigned a = 1; a <= n; a++) {
		for (unsigned b = 1; b <= n; b++) {
			if (in_minor[a] != in_minor[b]) {
				cut(g, a, b);
			}
		}
		if ((side == NEMESIS_CLIENT_MAJORITY && in_minor[a]) ||
		    (side == NEMESIS_CLIENT_MINORITY && !in_minor[a])) {
			cut(g, NEMESIS_CLIENT, a);
		}
	}
	for (int pass = 0; pass < 2; pass++) {
		bool first = true;
		for (unsigned a = 1; a <= n; a++) {
			if (in_minor[a] == (pass == 0)) {
				append(g->desc, sizeof g->desc, "%s%u",
				       first ? "" : ",", a);
				first = false;
			}
		}
		if (pass == 0) {
			append(g->desc, sizeof g->desc, "|");
		}
	}
	append(g->desc, sizeof g->desc, " client=%s", side_name(side));
}

int nemesis_grudge_halves(struct nemesis_grudge *g, unsigned n,
                          struct nemesis_rng *rng,
                          enum nemesis_client_side side)
{
	unsigned order[HOSTS_MAX_NODES];
	bool minor[HOSTS_MAX_NODES + 1] = {false};
	if (n < 2 || n > HOSTS_MAX_NODES) {
		return -EINVAL;
	}
	shuffle_nodes(rng, n, order);
	for (unsigned i = 0; i < n / 2; i++) {
		minor[order[i]] = true;
	}
	two_sides(g, n, minor, side);
	return 0;
}

int nemesis_grudge_isolate(struct nemesis_grudge *g, unsigned n, unsigned node,
                           enum nemesis_client_side side)
{
	bool minor[HOSTS_MAX_NODES + 1] = {false};
	if (n < 2 || n > HOSTS_MAX_NODES || node < 1 || node > n) {
		return -EINVAL;
	}
	minor[node] = true;
	two_sides(g, n, minor, side);
	return 0;
}

int nemesis_grudge_ring(struct nemesis_grudge *g, unsigned n,
                        struct nemesis_rng *rng)
{
	unsigned order[HOSTS_MAX_NODES], pos[HOSTS_MAX_NODES + 1];
	if (n < 4 || n > HOSTS_MAX_NODES) {
		return -EINVAL;
	}
	unsigned d = (n / 2 + 1) / 2;
	shuffle_nodes(rng, n, order);
	for (unsigned i = 0; i < n; i++) {
		pos[order[i]] = i;
	}
	nemesis_grudge_none(g, n);
	for (unsigned a = 1; a <= n; a++) {
		for (unsigned b = 1; b <= n; b++) {
			unsigned k = (pos[a] + n - pos[b]) % n;
			unsigned dist = k < n - k ? k : n - k;
			if (dist > d) {
				cut(g, a, b);
			}
		}
	}
	snprintf(g->desc, sizeof g->desc, "ring ");
	for (unsigned i = 0; i < n; i++) {
		append(g->desc, sizeof g->desc, "%s%u", i > 0 ? "-" : "",
		       order[i]);
	}
	append(g->desc, sizeof g->desc, " d=%u", d);
	return 0;
}

int nemesis_grudge_rules(const struct nemesis_grudge *g, unsigned node,
                         const char *const addrs[], char op, char *buf,
                         size_t cap, unsigned *rules)
{
	unsigned count = 0;
	size_t len = 0;
	int w;
	if (node < 1 || node > g->n || (op != 'A' && op != 'D')) {
		return -EINVAL;
	}
	w = snprintf(buf, cap, "*filter\n");
	if (w < 0 || (size_t)w >= cap) {
		return -ENOSPC;
	}
	len = (size_t)w;
	for (unsigned p = 0; p <= g->n; p++) {
		if (p == node || !g->cut[node][p]) {
			continue;
		}
		w = snprintf(buf + len, cap - len,
		             "-%c INPUT -s %s/32 -j DROP\n"
		             "-%c OUTPUT -d %s/32 -j DROP\n",
		             op, addrs[p], op, addrs[p]);
		if (w < 0 || (size_t)w >= cap - len) {
			return -ENOSPC;
		}
		len += (size_t)w;
		count += 2;
	}
	w = snprintf(buf + len, cap - len, "COMMIT\n");
	if (w < 0 || (size_t)w >= cap - len) {
		return -ENOSPC;
	}
	*rules = count;
	return 0;
}

/* ---------------------------------------------------------------------
 * Schedules */

static const char *const fault_names[NEMESIS_N_FAULTS] = {
    [NEMESIS_PARTITION_HALVES] = "partition-halves",
    [NEMESIS_PARTITION_ISOLATE] = "partition-isolate",
    [NEMESIS_PARTITION_LEADER] = "partition-leader",
    [NEMESIS_PARTITION_RING] = "partition-ring",
    [NEMESIS_KILL] = "kill",
    [NEMESIS_PAUSE] = "pause",
    [NEMESIS_SKEW] = "skew",
    [NEMESIS_MEMBERSHIP] = "membership",
};

static const char *const member_op_names[NEMESIS_MEMBER_N_OPS] = {
    [NEMESIS_MEMBER_ADD] = "add",
    [NEMESIS_MEMBER_REMOVE] = "drain-remove",
    [NEMESIS_MEMBER_REPLACE] = "replace",
};

static const char *const outcome_names[NEMESIS_MEMBER_N_OUTCOMES] = {
    [NEMESIS_MEMBER_DONE] = "done",       [NEMESIS_MEMBER_REFUSED] = "refused",
    [NEMESIS_MEMBER_FAILED] = "failed",   [NEMESIS_MEMBER_TIMEOUT] = "timeout",
    [NEMESIS_MEMBER_SKIPPED] = "skipped", [NEMESIS_MEMBER_ERROR] = "error",
};

const char *nemesis_member_op_name(enum nemesis_member_op op)
{
	return (unsigned)op < NEMESIS_MEMBER_N_OPS ? member_op_names[op] : "?";
}

const char *nemesis_member_outcome_name(enum nemesis_member_outcome o)
{
	return (unsigned)o < NEMESIS_MEMBER_N_OUTCOMES ? outcome_names[o] : "?";
}

const char *nemesis_fault_name(enum nemesis_fault f)
{
	return (unsigned)f < NEMESIS_N_FAULTS ? fault_names[f] : "?";
}

static int parse_one_mask(const char *name, size_t len, unsigned parts,
                          unsigned *mask)
{
#define IS(word) (len == sizeof(word) - 1 && memcmp(name, word, len) == 0)
	if (IS("partition")) {
		*mask = parts;
	} else if (IS("kill")) {
		*mask = NEMESIS_BIT(NEMESIS_KILL);
	} else if (IS("pause")) {
		*mask = NEMESIS_BIT(NEMESIS_PAUSE);
	} else if (IS("skew")) {
		*mask = NEMESIS_BIT(NEMESIS_SKEW);
	} else if (IS("membership")) {
		*mask = NEMESIS_BIT(NEMESIS_MEMBERSHIP);
	} else if (IS("mixed")) {
		*mask = parts | NEMESIS_BIT(NEMESIS_KILL) |
		        NEMESIS_BIT(NEMESIS_PAUSE) | NEMESIS_BIT(NEMESIS_SKEW);
	} else if (IS("none")) {
		*mask = 0;
	} else {
		return -EINVAL;
	}
#undef IS
	return 0;
}

int nemesis_parse_mask(const char *name, unsigned nodes, bool leader,
                       unsigned *mask)
{
	unsigned parts = NEMESIS_PARTITIONS, all = 0, one;
	const char *p = name;
	if (nodes < 4) {
		parts &= ~NEMESIS_BIT(NEMESIS_PARTITION_RING);
	}
	if (leader) {
		parts |= NEMESIS_BIT(NEMESIS_PARTITION_LEADER);
	}
	/* A list of classes, e.g. "kill,pause": the union. */
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (parse_one_mask(p, len, parts, &one) != 0) {
			return -EINVAL;
		}
		all |= one;
		if (comma == NULL) {
			break;
		}
		p = comma + 1;
	}
	*mask = all;
	return 0;
}

void nemesis_plan_defaults(struct nemesis_plan *p, unsigned nodes,
                           uint64_t seed, unsigned faults, int64_t total_ms)
{
	memset(p, 0, sizeof *p);
	p->nodes = nodes;
	p->seed = seed;
	p->faults = faults;
	p->total_ms = total_ms;
	p->final_ms = total_ms / 5 > 3000 ? total_ms / 5 : 3000;
	if (p->final_ms > total_ms) {
		p->final_ms = total_ms;
	}
	p->quiet_min_ms = 1000;
	p->quiet_max_ms = 4000;
	p->fault_min_ms = 2000;
	p->fault_max_ms = 8000;
	p->max_skew_ms = 60000;
	p->shards = 8;
	p->client = NEMESIS_CLIENT_ALL;
	p->member_min_ms = 12000;
	p->member_max_ms = 20000;
}

/* A random set of k nodes as a bit mask. */
static unsigned pick_nodes(struct nemesis_rng *r, unsigned n, unsigned k)
{
	unsigned order[HOSTS_MAX_NODES], mask = 0;
	shuffle_nodes(r, n, order);
	for (unsigned i = 0; i < k && i < n; i++) {
		mask |= 1u << order[i];
	}
	return mask;
}

/* How many nodes a process fault hits: one, a minority, a majority or
 * all, with weights out of 100 (all = what the rest leaves). */
static unsigned pick_count(struct nemesis_rng *r, unsigned n, unsigned w_one,
                           unsigned w_minority, unsigned w_majority)
{
	unsigned x = (unsigned)nemesis_rng_below(r, 100);
	unsigned minority_max = (n - 1) / 2, majority_min = n / 2 + 1;
	if (x < w_one) {
		return 1;
	}
	if (x < w_one + w_minority) {
		return 1 + (unsigned)nemesis_rng_below(r, minority_max);
	}
	if (x < w_one + w_minority + w_majority) {
		return majority_min +
		       (unsigned)nemesis_rng_below(r, n - majority_min);
	}
	return n;
}

static int check_plan(const struct nemesis_plan *p, char *err, size_t cap)
{
	if (p->nodes < HOSTS_MIN_NODES || p->nodes > HOSTS_MAX_NODES) {
		fmt_err(err, cap, "%u nodes: a schedule needs %d to %d",
		        p->nodes, HOSTS_MIN_NODES, HOSTS_MAX_NODES);
		return -EINVAL;
	}
	if (p->total_ms <= 0 || p->final_ms < 0 || p->final_ms > p->total_ms) {
		fmt_err(err, cap, "bad duration: total %lld ms, final %lld ms",
		        (long long)p->total_ms, (long long)p->final_ms);
		return -EINVAL;
	}
	if (p->faults >= NEMESIS_BIT(NEMESIS_N_FAULTS)) {
		fmt_err(err, cap, "unknown fault in mask 0x%x", p->faults);
		return -EINVAL;
	}
	if (p->faults != 0 &&
	    (p->quiet_min_ms < 0 || p->quiet_max_ms < p->quiet_min_ms ||
	     p->fault_min_ms <= 0 || p->fault_max_ms < p->fault_min_ms)) {
		fmt_err(err, cap, "bad quiet or fault duration range");
		return -EINVAL;
	}
	if ((p->faults & NEMESIS_BIT(NEMESIS_PARTITION_RING)) && p->nodes < 4) {
		fmt_err(err, cap,
		        "a majorities ring needs at least 4 nodes (with %u "
		        "every node sees every majority)",
		        p->nodes);
		return -EINVAL;
	}
	if ((p->faults & NEMESIS_BIT(NEMESIS_PARTITION_LEADER)) &&
	    p->shards == 0) {
		fmt_err(err, cap, "a leader partition needs shards > 0");
		return -EINVAL;
	}
	if ((p->faults & NEMESIS_BIT(NEMESIS_MEMBERSHIP)) &&
	    (p->member_min_ms <= 0 || p->member_max_ms < p->member_min_ms)) {
		fmt_err(err, cap, "bad membership step duration range");
		return -EINVAL;
	}
	if ((p->faults & NEMESIS_BIT(NEMESIS_SKEW)) && p->max_skew_ms <= 0) {
		fmt_err(err, cap, "skew needs max_skew_ms > 0");
		return -EINVAL;
	}
	return 0;
}

/* The next membership operation, given how many members and spares
 * there would be if every earlier one succeeded: back to the bootstrap
 * size first (a node leaves only when one was added, so a removal never
 * goes below the size the cluster started with, where R may forbid it),
 * else an add or a replace while spares last. */
static void plan_member(struct nemesis_step *st, const struct nemesis_plan *p,
                        struct nemesis_rng *r, unsigned *members,
                        unsigned *spares)
{
	st->pick = (unsigned)nemesis_rng_below(r, 1u << 16);
	if (*members > p->nodes) {
		st->member_op = NEMESIS_MEMBER_REMOVE;
	} else if (*members < p->nodes || nemesis_rng_below(r, 2) == 0) {
		st->member_op = NEMESIS_MEMBER_ADD;
	} else {
		st->member_op = NEMESIS_MEMBER_REPLACE;
	}
	if (st->member_op != NEMESIS_MEMBER_REMOVE && *spares == 0) {
		/* No spare left: the step will be skipped. */
		return;
	}
	switch (st->member_op) {
	case NEMESIS_MEMBER_ADD:
		(*members)++;
		(*spares)--;
		break;
	case NEMESIS_MEMBER_REMOVE:
		(*members)--;
		break;
	default:
		(*spares)--;
		break;
	}
}

static void make_step(struct nemesis_step *st, const struct nemesis_plan *p,
                      struct nemesis_rng *r)
{
	enum nemesis_fault kinds[NEMESIS_N_FAULTS];
	unsigned nk = 0, n = p->nodes;
	unsigned parts = p->faults & (NEMESIS_PARTITIONS |
	                              NEMESIS_BIT(NEMESIS_PARTITION_LEADER));
	/* A class first (partition, kill, pause, skew), so the partition
	 * shapes do not crowd out the others; then a shape. */
	if (parts != 0) {
		kinds[nk++] = NEMESIS_PARTITION_HALVES;
	}
	for (unsigned f = NEMESIS_KILL; f < NEMESIS_N_FAULTS; f++) {
		if (p->faults & NEMESIS_BIT(f)) {
			kinds[nk++] = (enum nemesis_fault)f;
		}
	}
	st->fault = kinds[nemesis_rng_below(r, nk)];
	if (st->fault == NEMESIS_PARTITION_HALVES) {
		enum nemesis_fault shapes[NEMESIS_N_FAULTS];
		unsigned ns = 0;
		for (unsigned f = 0; f < NEMESIS_KILL; f++) {
			if (parts & NEMESIS_BIT(f)) {
				shapes[ns++] = (enum nemesis_fault)f;
			}
		}
		st->fault = shapes[nemesis_rng_below(r, ns)];
	}
	nemesis_grudge_none(&st->grudge, n);
	switch (st->fault) {
	case NEMESIS_PARTITION_HALVES:
		nemesis_grudge_halves(&st->grudge, n, r, p->client);
		break;
	case NEMESIS_PARTITION_ISOLATE: {
		unsigned node = 1 + (unsigned)nemesis_rng_below(r, n);
		st->targets = 1u << node;
		nemesis_grudge_isolate(&st->grudge, n, node, p->client);
		break;
	}
	case NEMESIS_PARTITION_LEADER:
		st->shard = (unsigned)nemesis_rng_below(r, p->shards);
		break;
	case NEMESIS_PARTITION_RING:
		nemesis_grudge_ring(&st->grudge, n, r);
		break;
	case NEMESIS_KILL:
		st->targets = pick_nodes(r, n, pick_count(r, n, 50, 25, 15));
		break;
	case NEMESIS_PAUSE:
		st->targets = pick_nodes(r, n, pick_count(r, n, 60, 30, 10));
		break;
	case NEMESIS_SKEW:
		st->targets = pick_nodes(r, n, pick_count(r, n, 50, 30, 20));
		for (unsigned id = 1; id <= n; id++) {
			if (!(st->targets & (1u << id))) {
				continue;
			}
			/* At least a tenth of the bound, either way. */
			int64_t lo =
			    p->max_skew_ms / 10 > 0 ? p->max_skew_ms / 10 : 1;
			int64_t mag = rng_range(r, lo, p->max_skew_ms);
			st->skew_ms[id] = nemesis_rng_below(r, 2) ? mag : -mag;
		}
		break;
	default:
		break;
	}
}

int nemesis_schedule_make(struct nemesis_schedule *s,
                          const struct nemesis_plan *p, char *err, size_t cap)
{
	struct nemesis_rng r;
	size_t room = 0;
	memset(s, 0, sizeof *s);
	int rc = check_plan(p, err, cap);
	if (rc != 0) {
		return rc;
	}
	s->seed = p->seed;
	s->total_ms = p->total_ms;
	s->final_ms = p->total_ms - p->final_ms;
	if (p->faults == 0) {
		return 0;
	}
	nemesis_rng_seed(&r, p->seed);
	unsigned members = p->nodes, spares = p->spares;
	for (int64_t t = 0;;) {
		int64_t start =
		    t + rng_range(&r, p->quiet_min_ms, p->quiet_max_ms);
		int64_t heal =
		    start + rng_range(&r, p->fault_min_ms, p->fault_max_ms);
		if (heal > s->final_ms) {
			break;
		}
		struct nemesis_step next;
		memset(&next, 0, sizeof next);
		make_step(&next, p, &r);
		if (next.fault == NEMESIS_MEMBERSHIP) {
			heal = start + rng_range(&r, p->member_min_ms,
			                         p->member_max_ms);
			if (heal > s->final_ms) {
				break;
			}
			plan_member(&next, p, &r, &members, &spares);
		}
		if (s->n == room) {
			size_t nr = room == 0 ? 16 : room * 2;
			struct nemesis_step *ns =
			    realloc(s->steps, nr * sizeof *ns);
			if (ns == NULL) {
				nemesis_schedule_free(s);
				fmt_err(err, cap, "out of memory");
				return -ENOMEM;
			}
			s->steps = ns;
			room = nr;
		}
		struct nemesis_step *st = &s->steps[s->n++];
		*st = next;
		st->start_ms = start;
		st->heal_ms = heal;
		t = heal;
	}
	return 0;
}

void nemesis_schedule_free(struct nemesis_schedule *s)
{
	free(s->steps);
	s->steps = NULL;
	s->n = 0;
}

static void targets_text(unsigned targets, char *buf, size_t cap)
{
	buf[0] = '\0';
	for (unsigned id = 1; id <= HOSTS_MAX_NODES; id++) {
		if (targets & (1u << id)) {
			append(buf, cap, "%sn%u", buf[0] != '\0' ? "," : "",
			       id);
		}
	}
	if (buf[0] == '\0') {
		snprintf(buf, cap, "-");
	}
}

/* "n1,n3" (or "1,3") into a target mask of nodes 1..n. */
static int parse_targets(const char *t, unsigned n, unsigned *mask)
{
	*mask = 0;
	while (*t != '\0') {
		char *end;
		unsigned long id;
		if (*t == 'n') {
			t++;
		}
		id = strtoul(t, &end, 10);
		if (end == t || id < 1 || id > n) {
			return -EINVAL;
		}
		*mask |= 1u << id;
		t = end;
		if (*t == ',') {
			t++;
		} else if (*t != '\0') {
			return -EINVAL;
		}
	}
	return *mask != 0 ? 0 : -EINVAL;
}

/* One line of a written schedule into st. */
static int parse_step(char *line, unsigned n, struct nemesis_step *st,
                      char *err, size_t cap)
{
	char *save = NULL, *tok[3 + HOSTS_MAX_NODES + 1];
	size_t k = 0;
	long long a, b;

	memset(st, 0, sizeof *st);
	for (char *w = strtok_r(line, " \t", &save);
	     w != NULL && k < sizeof tok / sizeof tok[0];
	     w = strtok_r(NULL, " \t", &save)) {
		tok[k++] = w;
	}
	if (k < 4 || sscanf(tok[0], "%lld", &a) != 1 ||
	    sscanf(tok[1], "%lld", &b) != 1 || a < 0 || b <= a) {
		fmt_err(err, cap, "expected START_MS HEAL_MS FAULT TARGETS");
		return -EINVAL;
	}
	st->start_ms = a;
	st->heal_ms = b;
	if (strcmp(tok[2], "kill") == 0 || strcmp(tok[2], "pause") == 0 ||
	    strcmp(tok[2], "skew") == 0) {
		st->fault = strcmp(tok[2], "kill") == 0    ? NEMESIS_KILL
		            : strcmp(tok[2], "pause") == 0 ? NEMESIS_PAUSE
		                                           : NEMESIS_SKEW;
		if (parse_targets(tok[3], n, &st->targets) != 0) {
			fmt_err(err, cap, "bad targets '%s'", tok[3]);
			return -EINVAL;
		}
	} else if (strcmp(tok[2], "partition-isolate") == 0) {
		unsigned mask;
		char one[16];
		snprintf(one, sizeof one, "%s", tok[3]);
		one[strcspn(one, "|")] = '\0';
		if (parse_targets(one, n, &mask) != 0 ||
		    (mask & (mask - 1)) != 0) {
			fmt_err(err, cap, "bad isolated node '%s'", tok[3]);
			return -EINVAL;
		}
		st->fault = NEMESIS_PARTITION_ISOLATE;
		st->targets = mask;
		nemesis_grudge_isolate(&st->grudge, n,
		                       (unsigned)__builtin_ctz(mask),
		                       NEMESIS_CLIENT_ALL);
	} else if (strcmp(tok[2], "membership") == 0) {
		st->fault = NEMESIS_MEMBERSHIP;
		st->member_op = NEMESIS_MEMBER_N_OPS;
		for (unsigned o = 0; o < NEMESIS_MEMBER_N_OPS; o++) {
			if (strcmp(tok[3], member_op_names[o]) == 0) {
				st->member_op = (enum nemesis_member_op)o;
			}
		}
		if (st->member_op == NEMESIS_MEMBER_N_OPS ||
		    (k > 4 && sscanf(tok[4], "pick=%u", &st->pick) != 1)) {
			fmt_err(err, cap,
			        "membership '%s': add, drain-remove or "
			        "replace [pick=N]",
			        tok[3]);
			return -EINVAL;
		}
	} else {
		fmt_err(err, cap,
		        "fault '%s': kill, pause, skew, partition-isolate or "
		        "membership",
		        tok[2]);
		return -EINVAL;
	}
	if (st->fault == NEMESIS_SKEW) {
		for (size_t i = 4; i < k; i++) {
			unsigned id;
			long long ms;
			if (sscanf(tok[i], "n%u=%lldms", &id, &ms) != 2 ||
			    id < 1 || id > n || !(st->targets & (1u << id))) {
				fmt_err(err, cap, "bad skew '%s'", tok[i]);
				return -EINVAL;
			}
			st->skew_ms[id] = ms;
		}
	}
	return 0;
}

int nemesis_schedule_parse(struct nemesis_schedule *s, const char *text,
                           unsigned nodes, int64_t total_ms, int64_t final_ms,
                           char *err, size_t cap)
{
	char *copy = strdup(text), *save = NULL;
	size_t room = 0;
	int64_t last = 0;
	unsigned lineno = 0;

	memset(s, 0, sizeof *s);
	if (copy == NULL) {
		return -ENOMEM;
	}
	/* With membership steps, node numbers are positions among the
	 * members of the moment, which may outnumber the nodes. */
	unsigned limit =
	    strstr(text, "membership") != NULL ? HOSTS_MAX_NODES : nodes;
	s->total_ms = total_ms;
	s->final_ms = total_ms - final_ms;
	for (char *line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		struct nemesis_step st;
		char why[128];
		lineno++;
		line += strspn(line, " \t");
		if (*line == '#' || *line == '\0') {
			continue;
		}
		if (parse_step(line, limit, &st, why, sizeof why) != 0 ||
		    (st.start_ms < last &&
		     snprintf(why, sizeof why,
		              "steps overlap or are out of order") > 0) ||
		    (st.heal_ms > s->final_ms &&
		     snprintf(why, sizeof why,
		              "heals after the final phase (%lld ms)",
		              (long long)s->final_ms) > 0)) {
			fmt_err(err, cap, "schedule line %u: %s", lineno, why);
			goto err;
		}
		if (s->n == room) {
			size_t nr = room == 0 ? 16 : room * 2;
			struct nemesis_step *ns =
			    realloc(s->steps, nr * sizeof *ns);
			if (ns == NULL) {
				fmt_err(err, cap, "out of memory");
				goto err;
			}
			s->steps = ns;
			room = nr;
		}
		s->steps[s->n++] = st;
		last = st.heal_ms;
	}
	free(copy);
	return 0;

err:
	free(copy);
	nemesis_schedule_free(s);
	return -EINVAL;
}

void nemesis_step_describe(const struct nemesis_step *st, char *buf, size_t cap)
{
	char t[64];
	snprintf(buf, cap, "%lld %lld %s ", (long long)st->start_ms,
	         (long long)st->heal_ms, nemesis_fault_name(st->fault));
	switch (st->fault) {
	case NEMESIS_PARTITION_HALVES:
	case NEMESIS_PARTITION_ISOLATE:
	case NEMESIS_PARTITION_RING:
		append(buf, cap, "%s", st->grudge.desc);
		break;
	case NEMESIS_PARTITION_LEADER:
		append(buf, cap, "shard=%u", st->shard);
		break;
	case NEMESIS_MEMBERSHIP:
		append(buf, cap, "%s pick=%u",
		       nemesis_member_op_name(st->member_op), st->pick);
		break;
	case NEMESIS_SKEW:
		targets_text(st->targets, t, sizeof t);
		append(buf, cap, "%s", t);
		for (unsigned id = 1; id <= HOSTS_MAX_NODES; id++) {
			if (st->targets & (1u << id)) {
				append(buf, cap, " n%u=%+lldms", id,
				       (long long)st->skew_ms[id]);
			}
		}
		break;
	default:
		targets_text(st->targets, t, sizeof t);
		append(buf, cap, "%s", t);
		break;
	}
}

/* ---------------------------------------------------------------------
 * Acting on hosts */

int nemesis_open(struct nemesis *nem, struct hosts *h,
                 const char *timeline_path)
{
	memset(nem, 0, sizeof *nem);
	nem->hosts = h;
	sigemptyset(&nem->stop_signals);
	nemesis_grudge_none(&nem->active, h->n);
	nem->timeline = fopen(timeline_path, "we");
	if (nem->timeline == NULL) {
		int rc = -errno;
		fmt_err(nem->err, sizeof nem->err, "create %s: %s",
		        timeline_path, strerror(-rc));
		return rc;
	}
	fprintf(nem->timeline,
	        "# lodestone nemesis timeline of run %s: time_ns event fault "
	        "targets [detail]\n",
	        h->tag);
	fflush(nem->timeline);
	for (unsigned id = 1; id <= h->n; id++) {
		nem->exits_seen[id] = h->nodes[id - 1].unexpected_exits;
	}
	return 0;
}

void nemesis_log(struct nemesis *nem, const char *event, const char *fault,
                 const char *targets, const char *fmt, ...)
{
	if (nem->timeline == NULL) {
		return;
	}
	fprintf(nem->timeline, "%lld %s %s %s",
	        (long long)hosts_now_ns(nem->hosts), event, fault,
	        targets != NULL && targets[0] != '\0' ? targets : "-");
	if (fmt != NULL && fmt[0] != '\0') {
		va_list ap;
		fputc(' ', nem->timeline);
		va_start(ap, fmt);
		vfprintf(nem->timeline, fmt, ap);
		va_end(ap);
	}
	fputc('\n', nem->timeline);
	fflush(nem->timeline);
}

/* Logs a failed fault or heal and keeps its message in nem->err. */
static int fail(struct nemesis *nem, int rc, const char *fault,
                const char *targets, const char *msg)
{
	nem->errors++;
	fmt_err(nem->err, sizeof nem->err, "%s %s: %s", fault, targets, msg);
	nemesis_log(nem, "error", fault, targets, "%s", msg);
	return rc;
}

/* Logs the unexpected exits hosts_reap found since the last look. */
static void note_exits(struct nemesis *nem)
{
	struct hosts *h = nem->hosts;
	hosts_reap(h);
	for (unsigned id = 1; id <= h->n; id++) {
		struct hosts_node *nd = &h->nodes[id - 1];
		if (nd->unexpected_exits == nem->exits_seen[id]) {
			continue;
		}
		nem->exits_seen[id] = nd->unexpected_exits;
		char t[8];
		snprintf(t, sizeof t, "n%u", id);
		int st = nd->last_status;
		if (WIFSIGNALED(st)) {
			nemesis_log(nem, "exit", "node", t, "signal=%d",
			            WTERMSIG(st));
		} else {
			nemesis_log(nem, "exit", "node", t, "status=%d",
			            WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		}
	}
}

/* Applies (op 'A') or removes (op 'D') g's rules in every node. On an add
 * failure the nodes done so far are rolled back. */
static int apply_rules(struct nemesis *nem, const struct nemesis_grudge *g,
                       char op, char *msg, size_t cap)
{
	struct hosts *h = nem->hosts;
	const char *addrs[HOSTS_MAX_NODES + 1];
	char text[4096], out[1024];
	int rc = 0;
	addrs[NEMESIS_CLIENT] = h->client_addr;
	for (unsigned id = 1; id <= h->n; id++) {
		addrs[id] = h->nodes[id - 1].addr;
	}
	for (unsigned id = 1; id <= h->n; id++) {
		unsigned rules;
		int r = nemesis_grudge_rules(g, id, addrs, op, text,
		                             sizeof text, &rules);
		if (r == 0 && rules == 0) {
			continue;
		}
		int st = 0;
		const char *argv[] = {h->iptables_restore, "-w", "5",
		                      "--noflush", NULL};
		if (r == 0) {
			r = hosts_run(h->nodes[id - 1].ns, argv, NULL, text,
			              out, sizeof out, IPT_TIMEOUT_MS, &st);
		}
		if (r == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			continue;
		}
		out[strcspn(out, "\n")] = '\0';
		fmt_err(msg, cap, "%s in %s: %s", h->iptables_restore,
		        h->nodes[id - 1].ns, r != 0 ? strerror(-r) : out);
		rc = r != 0 ? r : -EIO;
		if (op == 'A') {
			for (unsigned back = 1; back < id; back++) {
				if (nemesis_grudge_rules(g, back, addrs, 'D',
				                         text, sizeof text,
				                         &rules) == 0 &&
				    rules > 0) {
					hosts_run(h->nodes[back - 1].ns, argv,
					          NULL, text, out, sizeof out,
					          IPT_TIMEOUT_MS, &st);
				}
			}
			return rc;
		}
	}
	return rc;
}

int nemesis_heal_partition(struct nemesis *nem)
{
	char msg[HOSTS_ERR_LEN];
	if (!nem->partitioned) {
		return 0;
	}
	int rc = apply_rules(nem, &nem->active, 'D', msg, sizeof msg);
	nem->partitioned = false;
	if (rc != 0) {
		return fail(nem, rc, nem->active_fault, nem->active.desc, msg);
	}
	nem->faults_healed++;
	nemesis_log(nem, "heal", nem->active_fault, nem->active.desc, NULL);
	return 0;
}

int nemesis_partition(struct nemesis *nem, const struct nemesis_grudge *g,
                      const char *fault)
{
	char msg[HOSTS_ERR_LEN];
	int rc = nemesis_heal_partition(nem);
	if (rc != 0) {
		return rc;
	}
	if (g->n != nem->hosts->n) {
		return fail(nem, -EINVAL, fault, g->desc,
		            "grudge is for another number of nodes");
	}
	rc = apply_rules(nem, g, 'A', msg, sizeof msg);
	if (rc != 0) {
		return fail(nem, rc, fault, g->desc, msg);
	}
	nem->active = *g;
	nem->partitioned = true;
	snprintf(nem->active_fault, sizeof nem->active_fault, "%s", fault);
	nem->faults_started++;
	nemesis_log(nem, "start", fault, g->desc, NULL);
	return 0;
}

static unsigned members_now(const struct hosts *h, unsigned *mem);
static void map_grudge(const struct nemesis_grudge *lg, const unsigned *mem,
                       unsigned c, unsigned n, struct nemesis_grudge *out);

int nemesis_partition_leader(struct nemesis *nem, unsigned shard,
                             enum nemesis_client_side side)
{
	const char *f = nemesis_fault_name(NEMESIS_PARTITION_LEADER);
	char t[32];
	unsigned leader = 0;
	snprintf(t, sizeof t, "shard=%u", shard);
	if (nem->leader == NULL) {
		nem->faults_skipped++;
		nemesis_log(nem, "skip", f, t, "no leader oracle");
		return 0;
	}
	int rc = nem->leader(nem->leader_arg, shard, &leader);
	if (rc != 0 || leader < 1 || leader > nem->hosts->n) {
		nem->faults_skipped++;
		nemesis_log(nem, "skip", f, t, "leader unknown (rc %d)", rc);
		return 0;
	}
	struct nemesis_grudge g;
	unsigned mem[HOSTS_MAX_NODES], c = members_now(nem->hosts, mem);
	unsigned pos = 0;
	for (unsigned i = 0; i < c; i++) {
		pos = mem[i] == leader ? i + 1 : pos;
	}
	if (nem->hosts->n != nem->hosts->bootstrap && pos != 0 && c >= 2) {
		/* Cut from the members only (spares and removed nodes do
		 * not run). */
		struct nemesis_grudge lg;
		nemesis_grudge_isolate(&lg, c, pos, side);
		map_grudge(&lg, mem, c, nem->hosts->n, &g);
	} else {
		nemesis_grudge_isolate(&g, nem->hosts->n, leader, side);
	}
	snprintf(g.desc + strlen(g.desc), sizeof g.desc - strlen(g.desc),
	         " shard=%u", shard);
	return nemesis_partition(nem, &g, f);
}

static bool node_ok(struct nemesis *nem, unsigned node, const char *fault,
                    char *t, size_t cap)
{
	snprintf(t, cap, "n%u", node);
	if (node < 1 || node > nem->hosts->n) {
		fail(nem, -EINVAL, fault, t, "no such node");
		return false;
	}
	return true;
}

int nemesis_kill(struct nemesis *nem, unsigned node)
{
	char t[16];
	if (!node_ok(nem, node, "kill", t, sizeof t)) {
		return -EINVAL;
	}
	note_exits(nem);
	struct hosts_node *nd = hosts_node(nem->hosts, node);
	if (nd->pid <= 0) {
		nem->faults_skipped++;
		nemesis_log(nem, "skip", "kill", t, "not running");
		return 0;
	}
	pid_t pid = nd->pid;
	int rc = hosts_node_signal(nem->hosts, node, SIGKILL);
	if (rc != 0) {
		return fail(nem, rc, "kill", t, hosts_error(nem->hosts));
	}
	nem->killed[node] = true;
	nem->faults_started++;
	nemesis_log(nem, "start", "kill", t, "pid=%d", (int)pid);
	return 0;
}

int nemesis_restart(struct nemesis *nem, unsigned node)
{
	char t[16];
	if (!node_ok(nem, node, "kill", t, sizeof t)) {
		return -EINVAL;
	}
	int rc = hosts_node_start(nem->hosts, node);
	if (rc != 0) {
		return fail(nem, rc, "kill", t, hosts_error(nem->hosts));
	}
	nem->killed[node] = false;
	nem->faults_healed++;
	nemesis_log(nem, "heal", "kill", t, "pid=%d",
	            (int)hosts_node(nem->hosts, node)->pid);
	return 0;
}

int nemesis_pause(struct nemesis *nem, unsigned node)
{
	char t[16];
	if (!node_ok(nem, node, "pause", t, sizeof t)) {
		return -EINVAL;
	}
	note_exits(nem);
	struct hosts_node *nd = hosts_node(nem->hosts, node);
	if (nd->pid <= 0 || nd->paused) {
		nem->faults_skipped++;
		nemesis_log(nem, "skip", "pause", t,
		            nd->paused ? "already paused" : "not running");
		return 0;
	}
	int rc = hosts_node_signal(nem->hosts, node, SIGSTOP);
	if (rc != 0) {
		return fail(nem, rc, "pause", t, hosts_error(nem->hosts));
	}
	nem->faults_started++;
	nemesis_log(nem, "start", "pause", t, "pid=%d", (int)nd->pid);
	return 0;
}

int nemesis_resume(struct nemesis *nem, unsigned node)
{
	char t[16];
	if (!node_ok(nem, node, "pause", t, sizeof t)) {
		return -EINVAL;
	}
	struct hosts_node *nd = hosts_node(nem->hosts, node);
	if (!nd->paused) {
		return 0;
	}
	int rc = hosts_node_signal(nem->hosts, node, SIGCONT);
	if (rc != 0) {
		return fail(nem, rc, "pause", t, hosts_error(nem->hosts));
	}
	nem->faults_healed++;
	nemesis_log(nem, "heal", "pause", t, "pid=%d", (int)nd->pid);
	return 0;
}

int nemesis_skew(struct nemesis *nem, unsigned node, int64_t skew_ms)
{
	char t[16];
	if (!node_ok(nem, node, "skew", t, sizeof t)) {
		return -EINVAL;
	}
	if (!nem->hosts->faketime) {
		return fail(nem, -ENOTSUP, "skew", t,
		            "clock skew needs the nodes started under "
		            "libfaketime (hosts created with faketime)");
	}
	bool heal = skew_ms == 0;
	if (heal && nem->skew_ms[node] == 0) {
		return 0;
	}
	int rc = hosts_node_set_skew(nem->hosts, node, skew_ms);
	if (rc != 0) {
		return fail(nem, rc, "skew", t, hosts_error(nem->hosts));
	}
	nem->skew_ms[node] = skew_ms;
	if (heal) {
		nem->faults_healed++;
	} else {
		nem->faults_started++;
	}
	nemesis_log(nem, heal ? "heal" : "start", "skew", t, "offset=%+lldms",
	            (long long)skew_ms);
	return 0;
}

int nemesis_heal_all(struct nemesis *nem)
{
	struct hosts *h = nem->hosts;
	int rc = 0, r;
	note_exits(nem);
	r = nemesis_heal_partition(nem);
	rc = rc != 0 ? rc : r;
	for (unsigned id = 1; id <= h->n; id++) {
		if (h->nodes[id - 1].paused) {
			r = nemesis_resume(nem, id);
			rc = rc != 0 ? rc : r;
		}
		if (nem->killed[id]) {
			r = nemesis_restart(nem, id);
			rc = rc != 0 ? rc : r;
		}
		if (nem->skew_ms[id] != 0) {
			r = nemesis_skew(nem, id, 0);
			rc = rc != 0 ? rc : r;
		}
	}
	return rc;
}

void nemesis_close(struct nemesis *nem)
{
	if (nem->hosts != NULL && nem->timeline != NULL) {
		nemesis_heal_all(nem);
	}
	if (nem->timeline != NULL) {
		fclose(nem->timeline);
		nem->timeline = NULL;
	}
}

/* Waits until hosts time t_ns, looking for dead nodes meanwhile; -EINTR
 * when a stop signal arrives. */
static int wait_until(struct nemesis *nem, int64_t t_ns)
{
	for (;;) {
		note_exits(nem);
		int64_t left = t_ns - hosts_now_ns(nem->hosts);
		if (left <= 0) {
			return 0;
		}
		if (left > POLL_SLICE_NS) {
			left = POLL_SLICE_NS;
		}
		struct timespec ts = {left / 1000000000, left % 1000000000};
		if (sigisemptyset(&nem->stop_signals)) {
			nanosleep(&ts, NULL);
			continue;
		}
		int sig = sigtimedwait(&nem->stop_signals, NULL, &ts);
		if (sig > 0) {
			nem->stopped_by = sig;
			return -EINTR;
		}
	}
}

int nemesis_membership(struct nemesis *nem, enum nemesis_member_op op,
                       unsigned pick, int64_t deadline_ns)
{
	const char *f = nemesis_fault_name(NEMESIS_MEMBERSHIP);
	const char *opn = nemesis_member_op_name(op);
	struct nemesis_member_result res;
	char t[32];

	note_exits(nem);
	if (nem->member == NULL || (unsigned)op >= NEMESIS_MEMBER_N_OPS) {
		nem->faults_skipped++;
		nemesis_log(nem, "skip", f, "-", "op=%s no membership callback",
		            opn);
		return 0;
	}
	memset(&res, 0, sizeof res);
	nem->faults_started++;
	nemesis_log(
	    nem, "start", f, "-", "op=%s pick=%u within=%lldms", opn, pick,
	    (long long)((deadline_ns - hosts_now_ns(nem->hosts)) / 1000000));
	nem->member(nem->member_arg, op, pick, deadline_ns, &res);
	note_exits(nem);
	if ((unsigned)res.outcome >= NEMESIS_MEMBER_N_OUTCOMES) {
		res.outcome = NEMESIS_MEMBER_ERROR;
	}
	nem->member_counts[op][res.outcome]++;
	if (res.node != 0 && res.with != 0) {
		snprintf(t, sizeof t, "n%u,n%u", res.node, res.with);
	} else if (res.node != 0) {
		snprintf(t, sizeof t, "n%u", res.node);
	} else {
		snprintf(t, sizeof t, "-");
	}
	switch (res.outcome) {
	case NEMESIS_MEMBER_ERROR:
		nem->faults_started--;
		return fail(nem, -EIO, f, t, res.detail);
	case NEMESIS_MEMBER_SKIPPED:
		nem->faults_started--;
		nem->faults_skipped++;
		nemesis_log(nem, "skip", f, t, "op=%s %s", opn, res.detail);
		return 0;
	default:
		/* Refused, failed and timed-out operations are outcomes the
		 * cluster may give: recorded, not errors. */
		nem->faults_healed++;
		nemesis_log(nem, nemesis_member_outcome_name(res.outcome), f, t,
		            "op=%s %s", opn, res.detail);
		return 0;
	}
}

/* The members now, ids in order; how many. */
static unsigned members_now(const struct hosts *h, unsigned *mem)
{
	unsigned c = 0;
	for (unsigned id = 1; id <= h->n; id++) {
		if (h->nodes[id - 1].member == HOSTS_MEMBER) {
			mem[c++] = id;
		}
	}
	return c;
}

/* lg, a grudge over positions 1..c (0: the client), as a grudge over the
 * n hosts: position i is node mem[i - 1]. Node numbers in the
 * description are mapped too. */
static void map_grudge(const struct nemesis_grudge *lg, const unsigned *mem,
                       unsigned c, unsigned n, struct nemesis_grudge *out)
{
	nemesis_grudge_none(out, n);
	for (unsigned a = 0; a <= c; a++) {
		for (unsigned b = 0; b <= c; b++) {
			if (lg->cut[a][b]) {
				out->cut[a == 0 ? 0 : mem[a - 1]]
				        [b == 0 ? 0 : mem[b - 1]] = true;
			}
		}
	}
	/* Words without '=' other than "ring" list positions. */
	out->desc[0] = '\0';
	const char *p = lg->desc;
	while (*p != '\0') {
		size_t wl = strcspn(p, " ");
		bool nodes = memchr(p, '=', wl) == NULL &&
		             !(wl == 4 && strncmp(p, "ring", 4) == 0);
		for (size_t i = 0; i < wl;) {
			if (nodes && p[i] >= '0' && p[i] <= '9') {
				char *end;
				unsigned long pos = strtoul(p + i, &end, 10);
				append(out->desc, sizeof out->desc, "%u",
				       pos >= 1 && pos <= c ? mem[pos - 1]
				                            : (unsigned)pos);
				i = (size_t)(end - p);
			} else {
				append(out->desc, sizeof out->desc, "%c", p[i]);
				i++;
			}
		}
		p += wl;
		if (*p == ' ') {
			append(out->desc, sizeof out->desc, " ");
			p++;
		}
	}
}

/* Where the client stood in step st's two-sided partition. */
static enum nemesis_client_side nem_client_side(const struct nemesis_step *st)
{
	if (strstr(st->grudge.desc, "client=majority") != NULL) {
		return NEMESIS_CLIENT_MAJORITY;
	}
	if (strstr(st->grudge.desc, "client=minority") != NULL) {
		return NEMESIS_CLIENT_MINORITY;
	}
	return NEMESIS_CLIENT_ALL;
}

/* Step st over the members of now, when the hosts have spares: the
 * schedule's node numbers are positions among the members (the k-th
 * member in id order). A partition shape planned for as many nodes as
 * there are members is mapped as it is; otherwise it is drawn again over
 * the members, as are the nodes of a kill, pause or skew that names a
 * position beyond them (as many nodes as the planned step, seeded by the
 * schedule's seed and the step's index). */
static void apply_step_members(struct nemesis *nem,
                               const struct nemesis_step *st, size_t idx)
{
	struct hosts *h = nem->hosts;
	unsigned mem[HOSTS_MAX_NODES];
	unsigned c = members_now(h, mem);
	struct nemesis_rng r;
	struct nemesis_grudge lg, g;

	nemesis_rng_seed(&r, nem->seed ^ (0x9e3779b97f4a7c15ULL * (idx + 1)));
	switch (st->fault) {
	case NEMESIS_PARTITION_HALVES:
	case NEMESIS_PARTITION_ISOLATE:
	case NEMESIS_PARTITION_RING:
		if (c < 2) {
			nem->faults_skipped++;
			nemesis_log(nem, "skip", nemesis_fault_name(st->fault),
			            "-", "%u member(s): nothing to cut", c);
			return;
		}
		if (st->grudge.n == c) {
			lg = st->grudge;
		} else if (st->fault == NEMESIS_PARTITION_ISOLATE) {
			unsigned pos =
			    st->targets != 0
			        ? (unsigned)__builtin_ctz(st->targets)
			        : 1;
			nemesis_grudge_isolate(&lg, c, (pos - 1) % c + 1,
			                       nem_client_side(st));
		} else if (st->fault == NEMESIS_PARTITION_RING && c >= 4) {
			nemesis_grudge_ring(&lg, c, &r);
		} else {
			nemesis_grudge_halves(&lg, c, &r, nem_client_side(st));
		}
		map_grudge(&lg, mem, c, h->n, &g);
		nemesis_partition(nem, &g, nemesis_fault_name(st->fault));
		return;
	case NEMESIS_PARTITION_LEADER:
		nemesis_partition_leader(nem, st->shard, NEMESIS_CLIENT_ALL);
		return;
	default:
		break;
	}
	unsigned pos = st->targets, k = (unsigned)__builtin_popcount(pos);
	/* offs[i]: the skew for position i. */
	int64_t offs[HOSTS_MAX_NODES + 1] = {0};
	if (c == 0) {
		return;
	}
	if (pos < 1u << (c + 1)) {
		for (unsigned i = 1; i <= c; i++) {
			offs[i] = st->skew_ms[i];
		}
	} else {
		/* A position beyond the members: as many of them, drawn;
		 * the planned offsets in order. */
		int64_t planned[HOSTS_MAX_NODES + 1];
		unsigned np = 0, nd = 0;
		for (unsigned i = 1; i <= HOSTS_MAX_NODES; i++) {
			if (pos & (1u << i)) {
				planned[np++] = st->skew_ms[i];
			}
		}
		pos = pick_nodes(&r, c, k < c ? k : c);
		for (unsigned i = 1; i <= c; i++) {
			if (pos & (1u << i)) {
				offs[i] = planned[nd++];
			}
		}
	}
	for (unsigned i = 1; i <= c; i++) {
		if (!(pos & (1u << i))) {
			continue;
		}
		unsigned id = mem[i - 1];
		if (st->fault == NEMESIS_KILL) {
			nemesis_kill(nem, id);
		} else if (st->fault == NEMESIS_PAUSE) {
			nemesis_pause(nem, id);
		} else if (st->fault == NEMESIS_SKEW) {
			nemesis_skew(nem, id, offs[i]);
		}
	}
}

static void apply_step(struct nemesis *nem, const struct nemesis_step *st,
                       size_t idx, int64_t heal_ns)
{
	unsigned n = nem->hosts->n;
	if (st->fault == NEMESIS_MEMBERSHIP) {
		nemesis_membership(nem, st->member_op, st->pick, heal_ns);
		return;
	}
	if (nem->hosts->n != nem->hosts->bootstrap) {
		apply_step_members(nem, st, idx);
		return;
	}
	switch (st->fault) {
	case NEMESIS_PARTITION_HALVES:
	case NEMESIS_PARTITION_ISOLATE:
	case NEMESIS_PARTITION_RING:
		nemesis_partition(nem, &st->grudge,
		                  nemesis_fault_name(st->fault));
		break;
	case NEMESIS_PARTITION_LEADER:
		nemesis_partition_leader(nem, st->shard, NEMESIS_CLIENT_ALL);
		break;
	default:
		for (unsigned id = 1; id <= n; id++) {
			if (!(st->targets & (1u << id))) {
				continue;
			}
			if (st->fault == NEMESIS_KILL) {
				nemesis_kill(nem, id);
			} else if (st->fault == NEMESIS_PAUSE) {
				nemesis_pause(nem, id);
			} else if (st->fault == NEMESIS_SKEW) {
				nemesis_skew(nem, id, st->skew_ms[id]);
			}
		}
		break;
	}
}

int nemesis_run(struct nemesis *nem, const struct nemesis_schedule *s)
{
	int64_t base = hosts_now_ns(nem->hosts);
	int rc = 0;
	nem->seed = s->seed;
	nemesis_log(nem, "phase", "schedule", "-",
	            "seed=%llu steps=%zu total_ms=%lld final_ms=%lld",
	            (unsigned long long)s->seed, s->n, (long long)s->total_ms,
	            (long long)s->final_ms);
	for (size_t i = 0; i < s->n && rc == 0; i++) {
		const struct nemesis_step *st = &s->steps[i];
		rc = wait_until(nem, base + st->start_ms * 1000000);
		if (rc != 0) {
			break;
		}
		apply_step(nem, st, i, base + st->heal_ms * 1000000);
		rc = wait_until(nem, base + st->heal_ms * 1000000);
		/* Heal even when stopped: nothing stays broken. */
		nemesis_heal_all(nem);
	}
	if (rc == 0) {
		rc = wait_until(nem, base + s->final_ms * 1000000);
	}
	nemesis_heal_all(nem);
	if (rc != 0) {
		nemesis_log(nem, "phase", "stopped", "-", "signal=%d",
		            nem->stopped_by);
		return rc;
	}
	nemesis_log(nem, "phase", "final", "-", NULL);
	rc = wait_until(nem, base + s->total_ms * 1000000);
	if (rc != 0) {
		nemesis_log(nem, "phase", "stopped", "-", "signal=%d",
		            nem->stopped_by);
		return rc;
	}
	nemesis_log(nem, "phase", "end", "-", NULL);
	return 0;
}

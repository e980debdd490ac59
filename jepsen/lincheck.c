/* WGL linearizability search with state caching; see lincheck.h. */
#include "jepsen/lincheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Step counts between two looks at the clock. */
#define CLOCK_EVERY 4096

/* Unknown reasons. */
enum {
	STOP_MEMORY = 1,
	STOP_STEPS,
	STOP_TIME,
	STOP_BUDGET, /* this round's share of steps: try again with more */
};

/* One operation as the search sees it. */
struct lin_op {
	uint32_t hop;  /* index in history.ops */
	uint8_t kind;  /* enum jepsen_f */
	uint8_t known; /* 1: completed ok (finite return); 0: indeterminate */
	uint32_t a;    /* value, observed value, or cas expected value */
	uint32_t b;    /* cas new value */
};

/* Search state for one key. Every array is owned here and freed by
 * search_reset(). */
struct search {
	const struct jepsen_history *h;
	struct jepsen_lin_result *res;
	size_t max_memory;
	uint64_t max_steps;
	uint64_t deadline_ns; /* 0: none */
	int unknown_reason;   /* STOP_* */

	uint32_t empty_id; /* id of "" in the history, or JEPSEN_NONE */
	uint32_t base;     /* first id of a derived (appended) value */
	struct jepsen_intern derived;
	char *buf; /* scratch for concatenation */
	size_t buf_cap;
	uint64_t *memo_keys; /* (state << 32 | suffix) + 1; 0 = empty */
	uint32_t *memo_vals;
	size_t memo_cap;
	size_t memo_used;

	/* Cache of visited (linearized set, state): variable-length
	 * records in an arena and an open-addressing index. */
	uint64_t *arena;
	size_t arena_len; /* words used */
	size_t arena_cap; /* words */
	size_t entries;
	uint32_t *table; /* record offset + 1; 0 = empty */
	size_t table_cap;

	size_t fixed_memory; /* lists, stack, bitset */
};

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	if (err != NULL && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

const char *jepsen_lincheck_verdict_name(enum jepsen_lin_verdict v)
{
	switch (v) {
	case JEPSEN_LIN_LINEARIZABLE:
		return "linearizable";
	case JEPSEN_LIN_NOT_LINEARIZABLE:
		return "not-linearizable";
	default:
		return "unknown";
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static size_t search_memory(const struct search *s)
{
	return s->fixed_memory + s->arena_cap * sizeof(uint64_t) +
	       s->table_cap * sizeof(uint32_t) +
	       s->memo_cap * (sizeof(uint64_t) + sizeof(uint32_t)) +
	       jepsen_intern_memory(&s->derived) + s->buf_cap;
}

/* Would `extra` more bytes pass the limit? Records the reason if so. */
static int over_budget(struct search *s, size_t extra)
{
	size_t now = search_memory(s);
	if (now > s->res->peak_memory) {
		s->res->peak_memory = now;
	}
	if (now + extra > s->max_memory) {
		s->unknown_reason = STOP_MEMORY;
		return 1;
	}
	return 0;
}

static void search_reset(struct search *s)
{
	jepsen_intern_free(&s->derived);
	free(s->buf);
	free(s->memo_keys);
	free(s->memo_vals);
	free(s->arena);
	free(s->table);
	s->buf = NULL;
	s->buf_cap = 0;
	s->memo_keys = NULL;
	s->memo_vals = NULL;
	s->memo_cap = s->memo_used = 0;
	s->arena = NULL;
	s->arena_len = s->arena_cap = s->entries = 0;
	s->table = NULL;
	s->table_cap = 0;
	s->fixed_memory = 0;
}

/* ---- values ------------------------------------------------------------ */

static const char *value_str(const struct search *s, uint32_t id, size_t *len)
{
	if (id >= s->base) {
		return jepsen_intern_str(&s->derived, id - s->base + 1, len);
	}
	return jepsen_intern_str(&s->h->strings, id, len);
}

/* Sets *out to the id of value(state) ++ value(suffix). Returns 0, or -1
 * when the memory budget does not allow it (or allocation fails). */
static int concat(struct search *s, uint32_t state, uint32_t suffix,
                  uint32_t *out)
{
	if (suffix == JEPSEN_NIL) {
		*out = state;
		return 0;
	}
	if (state == JEPSEN_NIL || state == s->empty_id) {
		*out = suffix;
		return 0;
	}
	uint64_t key = (((uint64_t)state << 32) | suffix) + 1;
	if (s->memo_cap > 0) {
		size_t i = (size_t)mix64(key) & (s->memo_cap - 1);
		while (s->memo_keys[i] != 0) {
			if (s->memo_keys[i] == key) {
				*out = s->memo_vals[i];
				return 0;
			}
			i = (i + 1) & (s->memo_cap - 1);
		}
	}
	size_t la, lb;
	const char *a = value_str(s, state, &la);
	const char *b = value_str(s, suffix, &lb);
	if (la + lb > JEPSEN_INTERN_MAX_LEN) {
		s->unknown_reason = STOP_MEMORY;
		return -1;
	}
	if (la + lb > s->buf_cap) {
		size_t cap = s->buf_cap ? s->buf_cap : 256;
		while (cap < la + lb) {
			cap *= 2;
		}
		if (over_budget(s, cap)) {
			return -1;
		}
		char *nb = realloc(s->buf, cap);
		if (nb == NULL) {
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		s->buf = nb;
		s->buf_cap = cap;
		a = value_str(s, state, &la);
		b = value_str(s, suffix, &lb);
	}
	memcpy(s->buf, a, la);
	memcpy(s->buf + la, b, lb);
	uint32_t id;
	if (!jepsen_intern_find(&s->h->strings, s->buf, la + lb, &id)) {
		if (over_budget(s, 2 * (la + lb) + 64) ||
		    jepsen_intern_put(&s->derived, s->buf, la + lb, &id) != 0 ||
		    id >= UINT32_MAX - s->base) {
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		id = s->base + id - 1;
	}
	if ((s->memo_used + 1) * 2 > s->memo_cap) {
		size_t cap = s->memo_cap ? s->memo_cap * 2 : 256;
		if (over_budget(s,
		                cap * (sizeof(uint64_t) + sizeof(uint32_t)))) {
			return -1;
		}
		uint64_t *nk = calloc(cap, sizeof *nk);
		uint32_t *nv = calloc(cap, sizeof *nv);
		if (nk == NULL || nv == NULL) {
			free(nk);
			free(nv);
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		for (size_t j = 0; j < s->memo_cap; j++) {
			if (s->memo_keys[j] != 0) {
				size_t i =
				    (size_t)mix64(s->memo_keys[j]) & (cap - 1);
				while (nk[i] != 0) {
					i = (i + 1) & (cap - 1);
				}
				nk[i] = s->memo_keys[j];
				nv[i] = s->memo_vals[j];
			}
		}
		free(s->memo_keys);
		free(s->memo_vals);
		s->memo_keys = nk;
		s->memo_vals = nv;
		s->memo_cap = cap;
	}
	size_t i = (size_t)mix64(key) & (s->memo_cap - 1);
	while (s->memo_keys[i] != 0) {
		i = (i + 1) & (s->memo_cap - 1);
	}
	s->memo_keys[i] = key;
	s->memo_vals[i] = id;
	s->memo_used++;
	*out = id;
	return 0;
}

/* The register model. Returns 1 and the next state if `op` may take
 * effect in `state`, 0 if not, -1 if a limit stops the search. */
static int model_step(struct search *s, uint32_t state, const struct lin_op *op,
                      uint32_t *next)
{
	*next = state;
	switch (op->kind) {
	case JEPSEN_F_READ:
		return op->a == state;
	case JEPSEN_F_GET:
		if (op->a == state) {
			return 1;
		}
		/* An absent key reads as "". */
		return (state == JEPSEN_NIL && op->a == s->empty_id) ||
		       (op->a == JEPSEN_NIL && state == s->empty_id);
	case JEPSEN_F_WRITE:
		*next = op->a;
		return 1;
	case JEPSEN_F_CAS:
		/* An indeterminate cas whose comparison would fail is a
		 * no-op wherever it lands, so it is left for the end. */
		if (op->a != state) {
			return 0;
		}
		*next = op->b;
		return 1;
	case JEPSEN_F_APPEND:
		return concat(s, state, op->a, next) == 0 ? 1 : -1;
	default:
		return 0;
	}
}

/* ---- the visited cache -------------------------------------------------- */

/* The set of linearized operations, numbered in invocation order. Every
 * operation below word `lo` is linearized and none at or above word `hi`
 * is, so a configuration is cached as (lo, bits[lo..hi), state): a few
 * words however long the history. */
struct lset {
	uint64_t *bits;
	size_t words;
	size_t lo; /* first word with an unlinearized op */
	size_t hi; /* one past the last word with a linearized op */
};

static void lset_add(struct lset *b, size_t i)
{
	size_t w = i / 64;
	b->bits[w] |= (uint64_t)1 << (i % 64);
	if (w + 1 > b->hi) {
		b->hi = w + 1;
	}
	while (b->lo < b->words && b->bits[b->lo] == UINT64_MAX) {
		b->lo++;
	}
}

static void lset_del(struct lset *b, size_t i)
{
	size_t w = i / 64;
	b->bits[w] &= ~((uint64_t)1 << (i % 64));
	if (w < b->lo) {
		b->lo = w;
	}
	while (b->hi > 0 && b->bits[b->hi - 1] == 0) {
		b->hi--;
	}
}

/* Records in the arena: hash, state | lo << 32, word count, words. */
#define REC_HEADER 3

static size_t rec_len(const uint64_t *rec)
{
	return REC_HEADER + (size_t)rec[2];
}

/* Adds (set, state) unless present. Returns 1 if added, 0 if it was
 * there, -1 when the memory budget is exhausted. */
static int cache_add(struct search *s, const struct lset *set, uint64_t hash,
                     uint32_t state)
{
	size_t n = set->hi > set->lo ? set->hi - set->lo : 0;
	const uint64_t *words = set->bits + set->lo;
	uint64_t key = (uint64_t)state | ((uint64_t)set->lo << 32);
	if ((s->entries + 1) * 2 > s->table_cap) {
		size_t cap = s->table_cap ? s->table_cap * 2 : 1024;
		if (cap > ((size_t)1 << 31) ||
		    over_budget(s, cap * sizeof(uint32_t))) {
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		uint32_t *t = calloc(cap, sizeof *t);
		if (t == NULL) {
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		for (size_t off = 0; off < s->arena_len;
		     off += rec_len(s->arena + off)) {
			size_t i = (size_t)s->arena[off] & (cap - 1);
			while (t[i] != 0) {
				i = (i + 1) & (cap - 1);
			}
			t[i] = (uint32_t)(off + 1);
		}
		free(s->table);
		s->table = t;
		s->table_cap = cap;
	}
	size_t mask = s->table_cap - 1;
	size_t i = (size_t)hash & mask;
	while (s->table[i] != 0) {
		const uint64_t *rec = s->arena + (s->table[i] - 1);
		if (rec[0] == hash && rec[1] == key && rec[2] == n &&
		    memcmp(rec + REC_HEADER, words, n * sizeof(uint64_t)) ==
		        0) {
			return 0;
		}
		i = (i + 1) & mask;
	}
	if (s->arena_len + REC_HEADER + n > s->arena_cap) {
		size_t cap = s->arena_cap ? s->arena_cap : 4096;
		while (cap < s->arena_len + REC_HEADER + n) {
			cap *= 2;
		}
		/* Offsets are stored as uint32 + 1. */
		if (cap >= UINT32_MAX ||
		    over_budget(s, (cap - s->arena_cap) * sizeof(uint64_t))) {
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		uint64_t *na = realloc(s->arena, cap * sizeof(uint64_t));
		if (na == NULL) {
			s->unknown_reason = STOP_MEMORY;
			return -1;
		}
		s->arena = na;
		s->arena_cap = cap;
	}
	uint64_t *rec = s->arena + s->arena_len;
	rec[0] = hash;
	rec[1] = key;
	rec[2] = n;
	if (n > 0) {
		memcpy(rec + REC_HEADER, words, n * sizeof(uint64_t));
	}
	s->table[i] = (uint32_t)(s->arena_len + 1);
	s->arena_len += REC_HEADER + n;
	s->entries++;
	return 1;
}

static uint64_t state_hash(uint64_t zob, uint32_t state)
{
	return zob ^ mix64(((uint64_t)state << 1) | 1);
}

/* ---- the search --------------------------------------------------------- */

struct pos_entry {
	uint32_t pos;   /* event index: real-time order */
	uint32_t entry; /* list entry */
};

static int cmp_pos(const void *a, const void *b)
{
	const struct pos_entry *x = a, *y = b;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* One key's calls and returns as a doubly-linked list in real-time order.
 * Entry 0 is the head; op i's call is entry i+1 and its return, if it has
 * one, entry m+1+i. Next of the last entry is 0. */
struct entries {
	size_t m;
	int32_t *next;
	int32_t *prev;
	uint32_t *match; /* call entry -> return entry; 0: returns never */
};

static int is_read(uint8_t kind)
{
	return kind == JEPSEN_F_READ || kind == JEPSEN_F_GET;
}

/* Is value `p` a prefix of value `v`? nil counts as "". */
static int value_is_prefix(const struct search *s, uint32_t p, uint32_t v)
{
	size_t lp, lv;
	if (p == v || p == JEPSEN_NIL) {
		return 1;
	}
	const char *sp = value_str(s, p, &lp);
	const char *sv = value_str(s, v, &lv);
	return lp <= lv && memcmp(sp, sv, lp) == 0;
}

/* Appends only grow the register, so after an append leaves it holding
 * `held`, every later read up to the next write or cas sees an extension
 * of `held`. Returns 1 if the earliest-returning read still pending does
 * not, with no write or cas able to come first: the append cannot go here.
 * This prunes the many orders of concurrent appends that Porcupine's kv
 * histories are made of. */
static int append_pruned(const struct search *s, const struct entries *l,
                         const struct lin_op *ops, int32_t self, uint32_t held)
{
	for (int32_t c = l->next[0]; c != 0; c = l->next[c]) {
		if ((size_t)c <= l->m) {
			uint8_t kind = ops[c - 1].kind;
			if (c != self &&
			    (kind == JEPSEN_F_WRITE || kind == JEPSEN_F_CAS)) {
				return 0;
			}
			continue;
		}
		const struct lin_op *r = &ops[(size_t)c - l->m - 1];
		if (is_read(r->kind)) {
			return !value_is_prefix(s, held, r->a);
		}
	}
	return 0;
}

/* Fills res->explanation for a violation found on `key`. */
static void explain_violation(struct search *s, uint32_t key, size_t m,
                              size_t depth, const struct lin_op *op,
                              uint32_t state)
{
	char desc[384];
	size_t len;
	const char *v = state == JEPSEN_NIL ? "nil" : value_str(s, state, &len);
	jepsen_history_describe(s->h, &s->h->ops[op->hop], desc, sizeof desc);
	snprintf(s->res->explanation, sizeof s->res->explanation,
	         "key %.80s: its %zu operations have no linearization; the "
	         "search got furthest with %zu of them linearized, when this "
	         "one could not take effect before it returned: %s (the "
	         "register held %.120s)",
	         key == JEPSEN_NIL ? "(none)" : jepsen_history_str(s->h, key),
	         m, depth, desc, v);
}

/* Searches one key's operations for at most `budget` steps. Sets
 * *verdict; returns 0 or -ENOMEM. */
static int search_key(struct search *s, uint32_t key, const struct lin_op *ops,
                      size_t m, uint64_t budget,
                      enum jepsen_lin_verdict *verdict)
{
	struct entries l = {.m = m};
	size_t n_entries = 1, known = 0;
	uint64_t stop_at = budget > UINT64_MAX - s->res->steps
	                       ? UINT64_MAX
	                       : s->res->steps + budget;
	int rc = 0;
	for (size_t i = 0; i < m; i++) {
		known += ops[i].known;
	}
	*verdict = JEPSEN_LIN_LINEARIZABLE;
	if (known == 0) {
		return 0;
	}
	/* Entries are int32 list indices; the fixed arrays count against
	 * the memory limit too. */
	size_t cap = 2 * m + 1;
	if (m > INT32_MAX / 2 - 1 || cap * 32 + m * 16 > s->max_memory) {
		s->unknown_reason = STOP_MEMORY;
		*verdict = JEPSEN_LIN_UNKNOWN;
		return 0;
	}
	l.next = calloc(cap, sizeof *l.next);
	l.prev = calloc(cap, sizeof *l.prev);
	l.match = calloc(cap, sizeof *l.match);
	struct pos_entry *order = calloc(cap, sizeof *order);
	uint32_t *stack_entry = calloc(m, sizeof *stack_entry);
	uint32_t *stack_state = calloc(m, sizeof *stack_state);
	uint8_t *stack_forced = calloc(m, sizeof *stack_forced);
	struct lset set = {.words = (m + 63) / 64};
	set.bits = calloc(set.words, sizeof *set.bits);
	s->fixed_memory = cap * (2 * sizeof(int32_t) + sizeof(uint32_t) +
	                         sizeof(struct pos_entry)) +
	                  m * (2 * sizeof(uint32_t) + 1) + set.words * 8;
	if (l.next == NULL || l.prev == NULL || l.match == NULL ||
	    order == NULL || stack_entry == NULL || stack_state == NULL ||
	    stack_forced == NULL || set.bits == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m; i++) {
		const struct jepsen_op *hop = &s->h->ops[ops[i].hop];
		order[n_entries++] =
		    (struct pos_entry){hop->invoke, (uint32_t)(i + 1)};
		if (ops[i].known) {
			order[n_entries++] = (struct pos_entry){
			    hop->complete, (uint32_t)(m + 1 + i)};
			l.match[i + 1] = (uint32_t)(m + 1 + i);
		}
	}
	qsort(order + 1, n_entries - 1, sizeof *order, cmp_pos);
	int32_t last = 0;
	for (size_t i = 1; i < n_entries; i++) {
		int32_t e = (int32_t)order[i].entry;
		l.next[last] = e;
		l.prev[e] = last;
		last = e;
	}
	l.next[last] = 0;

	size_t depth = 0, remaining = known, best_depth = 0, best_op = 0;
	uint32_t state = JEPSEN_NIL, best_state = JEPSEN_NIL;
	uint64_t zob = 0;
	int32_t e = l.next[0];
	int fresh = 1;
	for (;;) {
		if (remaining == 0) {
			break; /* every completed operation is linearized */
		}
		if (fresh) {
			/* A read that may take effect now may as well take
			 * effect first: it changes nothing, and nothing still
			 * pending has to precede it (it lies before the first
			 * return). So try it first, and if the search fails
			 * after it, it fails here too (the "forced" mark). */
			fresh = 0;
			for (int32_t c = l.next[0]; c != 0 && (size_t)c <= m;
			     c = l.next[c]) {
				uint32_t ns;
				if (is_read(ops[c - 1].kind) &&
				    model_step(s, state, &ops[c - 1], &ns) ==
				        1) {
					e = c;
					break;
				}
			}
		}
		s->res->steps++;
		if (s->max_steps != 0 && s->res->steps > s->max_steps) {
			s->unknown_reason = STOP_STEPS;
			*verdict = JEPSEN_LIN_UNKNOWN;
			break;
		}
		if (s->res->steps > stop_at) {
			s->unknown_reason = STOP_BUDGET;
			*verdict = JEPSEN_LIN_UNKNOWN;
			break;
		}
		if (s->deadline_ns != 0 && s->res->steps % CLOCK_EVERY == 0 &&
		    now_ns() > s->deadline_ns) {
			s->unknown_reason = STOP_TIME;
			*verdict = JEPSEN_LIN_UNKNOWN;
			break;
		}
		if (e != 0 && (size_t)e <= m) {
			/* A call: try to linearize it here. */
			size_t i = (size_t)e - 1;
			uint32_t ns;
			int ok = model_step(s, state, &ops[i], &ns);
			if (ok < 0) {
				*verdict = JEPSEN_LIN_UNKNOWN;
				break;
			}
			if (ok && ops[i].kind == JEPSEN_F_APPEND &&
			    append_pruned(s, &l, ops, e, ns)) {
				ok = 0;
			}
			if (!ok) {
				e = l.next[e];
				continue;
			}
			uint64_t z = mix64(i);
			int forced = is_read(ops[i].kind);
			lset_add(&set, i);
			int added =
			    cache_add(s, &set, state_hash(zob ^ z, ns), ns);
			if (added < 0) {
				*verdict = JEPSEN_LIN_UNKNOWN;
				break;
			}
			if (!added) {
				/* Seen before, and it led nowhere. */
				lset_del(&set, i);
				if (!forced) {
					e = l.next[e];
					continue;
				}
				e = 0;
				goto backtrack;
			}
			zob ^= z;
			stack_entry[depth] = (uint32_t)e;
			stack_state[depth] = state;
			stack_forced[depth] = (uint8_t)forced;
			depth++;
			state = ns;
			/* Lift the call and its return out of the list. */
			l.next[l.prev[e]] = l.next[e];
			if (l.next[e] != 0) {
				l.prev[l.next[e]] = l.prev[e];
			}
			int32_t r = (int32_t)l.match[e];
			if (r != 0) {
				l.next[l.prev[r]] = l.next[r];
				if (l.next[r] != 0) {
					l.prev[l.next[r]] = l.prev[r];
				}
				remaining--;
			}
			e = l.next[0];
			fresh = 1;
			continue;
		}
	backtrack:
		/* At a return whose call is not linearized (or below a
		 * forced read): undo the last linearization. */
		if (e != 0 && depth >= best_depth) {
			best_depth = depth;
			best_op = (size_t)e - m - 1;
			best_state = state;
		}
		if (depth == 0) {
			*verdict = JEPSEN_LIN_NOT_LINEARIZABLE;
			explain_violation(s, key, m, best_depth, &ops[best_op],
			                  best_state);
			break;
		}
		depth--;
		int32_t c = (int32_t)stack_entry[depth];
		size_t i = (size_t)c - 1;
		state = stack_state[depth];
		lset_del(&set, i);
		zob ^= mix64(i);
		int32_t r = (int32_t)l.match[c];
		if (r != 0) {
			l.next[l.prev[r]] = r;
			if (l.next[r] != 0) {
				l.prev[l.next[r]] = r;
			}
			remaining++;
		}
		l.next[l.prev[c]] = c;
		if (l.next[c] != 0) {
			l.prev[l.next[c]] = c;
		}
		e = l.next[c];
		if (stack_forced[depth]) {
			e = 0;
			goto backtrack;
		}
	}
	over_budget(s, 0); /* records the peak */
out:
	free(l.next);
	free(l.prev);
	free(l.match);
	free(order);
	free(stack_entry);
	free(stack_state);
	free(stack_forced);
	free(set.bits);
	return rc;
}

/* Turns history op `hop` into a search op; *keep is 0 for operations that
 * cannot matter (failed ones, reads with unknown results). */
static int make_op(const struct jepsen_history *h, uint32_t hop,
                   struct lin_op *out, int *keep, char *err, size_t errlen)
{
	const struct jepsen_op *op = &h->ops[hop];
	size_t n;
	const uint32_t *v;
	char desc[256];
	*keep = 0;
	if (op->f != JEPSEN_F_READ && op->f != JEPSEN_F_GET &&
	    op->f != JEPSEN_F_WRITE && op->f != JEPSEN_F_CAS &&
	    op->f != JEPSEN_F_APPEND) {
		jepsen_history_describe(h, op, desc, sizeof desc);
		return set_err(err, errlen, -EINVAL,
		               "not a register operation: %s", desc);
	}
	if (op->type == JEPSEN_FAIL) {
		return 0;
	}
	if (op->type != JEPSEN_OK && is_read(op->f)) {
		return 0;
	}
	v = jepsen_history_op_values(h, op, &n);
	size_t want = op->f == JEPSEN_F_CAS ? 2 : 1;
	if (n != want) {
		jepsen_history_describe(h, op, desc, sizeof desc);
		return set_err(err, errlen, -EINVAL,
		               "%s needs %zu value%s, has %zu: %s",
		               jepsen_history_f_name(op->f), want,
		               want == 1 ? "" : "s", n, desc);
	}
	out->hop = hop;
	out->kind = op->f;
	out->known = op->type == JEPSEN_OK;
	out->a = v[0];
	out->b = want == 2 ? v[1] : JEPSEN_NIL;
	*keep = 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One key's share of the search ops. */
struct part {
	uint32_t key;
	size_t first; /* in the ops array */
	size_t m;
	int done;
};

/* Steps each undecided key gets in the first round; every round grants
 * four times more. Interleaving keys like this finds a violation in an
 * easy key before an exponential search of a hard one eats the budget. */
#define FIRST_ROUND_STEPS 20000

/* Collects the search ops of every key into ops[] and parts[]. */
static int partition(const struct jepsen_history *h, struct lin_op *ops,
                     struct part *parts, size_t *n_parts, uint64_t *by_key,
                     char *err, size_t errlen)
{
	size_t n = 0, used = 0;
	int rc;
	for (size_t i = 0; i < h->n_ops; i++) {
		by_key[i] = ((uint64_t)h->ops[i].key << 32) | i;
	}
	qsort(by_key, h->n_ops, sizeof *by_key, cmp_u64);
	for (size_t start = 0; start < h->n_ops;) {
		uint32_t key = (uint32_t)(by_key[start] >> 32);
		size_t end = start, first = used;
		uint32_t last_return = 0;
		while (end < h->n_ops && (uint32_t)(by_key[end] >> 32) == key) {
			int keep;
			rc = make_op(h, (uint32_t)by_key[end], &ops[used],
			             &keep, err, errlen);
			if (rc != 0) {
				return rc;
			}
			if (keep && ops[used].known &&
			    h->ops[ops[used].hop].complete > last_return) {
				last_return = h->ops[ops[used].hop].complete;
			}
			used += (size_t)keep;
			end++;
		}
		/* An indeterminate op invoked after the last return can
		 * always be placed at the very end, where it matters not. */
		size_t kept = first;
		for (size_t i = first; i < used; i++) {
			if (ops[i].known ||
			    h->ops[ops[i].hop].invoke < last_return) {
				ops[kept++] = ops[i];
			}
		}
		used = kept;
		parts[n++] = (struct part){key, first, used - first, 0};
		start = end;
	}
	*n_parts = n;
	return 0;
}

int jepsen_lincheck_run(const struct jepsen_history *h,
                        const struct jepsen_lin_limits *limits,
                        struct jepsen_lin_result *out, char *err, size_t errlen)
{
	struct search s;
	uint64_t *by_key = NULL;
	struct lin_op *ops = NULL;
	struct part *parts = NULL;
	size_t n_parts = 0;
	int rc = 0, any_unknown = 0;
	memset(out, 0, sizeof *out);
	memset(&s, 0, sizeof s);
	s.h = h;
	s.res = out;
	s.max_memory = limits != NULL && limits->max_memory != 0
	                   ? limits->max_memory
	                   : JEPSEN_LIN_DEFAULT_MAX_MEMORY;
	s.max_steps = limits != NULL ? limits->max_steps : 0;
	if (limits != NULL && limits->max_ms != 0) {
		s.deadline_ns = now_ns() + limits->max_ms * 1000000ull;
	}
	if (!jepsen_intern_find(&h->strings, "", 0, &s.empty_id)) {
		s.empty_id = JEPSEN_NONE;
	}
	s.base = h->strings.count > 0 ? (uint32_t)h->strings.count : 1;
	jepsen_intern_init(&s.derived);
	out->verdict = JEPSEN_LIN_LINEARIZABLE;
	if (h->n_ops == 0) {
		return 0;
	}
	by_key = malloc(h->n_ops * sizeof *by_key);
	ops = malloc(h->n_ops * sizeof *ops);
	parts = malloc(h->n_ops * sizeof *parts);
	if (by_key == NULL || ops == NULL || parts == NULL) {
		rc = set_err(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	rc = partition(h, ops, parts, &n_parts, by_key, err, errlen);
	if (rc != 0) {
		goto out;
	}
	out->partitions = n_parts;
	for (size_t p = 0; p < n_parts; p++) {
		out->ops += parts[p].m;
	}
	size_t undecided = n_parts;
	for (uint64_t budget = FIRST_ROUND_STEPS;; budget *= 4) {
		/* The last undecided key needs no share: it gets all. */
		uint64_t share = undecided == 1 ? UINT64_MAX : budget;
		undecided = 0;
		for (size_t p = 0; p < n_parts; p++) {
			struct part *pt = &parts[p];
			enum jepsen_lin_verdict v;
			if (pt->done) {
				continue;
			}
			s.unknown_reason = 0;
			rc = search_key(&s, pt->key, ops + pt->first, pt->m,
			                share, &v);
			search_reset(&s);
			if (rc != 0) {
				set_err(err, errlen, rc, "out of memory");
				goto out;
			}
			if (v == JEPSEN_LIN_NOT_LINEARIZABLE) {
				out->verdict = v;
				out->bad_key = pt->key;
				goto out;
			}
			if (v == JEPSEN_LIN_UNKNOWN &&
			    s.unknown_reason == STOP_BUDGET) {
				undecided++;
				continue;
			}
			pt->done = 1;
			if (v == JEPSEN_LIN_UNKNOWN && !any_unknown) {
				static const char *const why[] = {
				    "", "the memory limit", "the step limit",
				    "the time limit", ""};
				any_unknown = 1;
				snprintf(
				    out->explanation, sizeof out->explanation,
				    "key %.80s: the search of its %zu "
				    "operations stopped at %s after %" PRIu64
				    " steps in all",
				    pt->key == JEPSEN_NIL
				        ? "(none)"
				        : jepsen_history_str(h, pt->key),
				    pt->m, why[s.unknown_reason], out->steps);
			}
			if (v == JEPSEN_LIN_UNKNOWN &&
			    s.unknown_reason != STOP_MEMORY) {
				/* Steps and time are global: stop. */
				goto out;
			}
		}
		if (undecided == 0 || budget > UINT64_MAX / 8) {
			break;
		}
	}
out:
	if (any_unknown && out->verdict != JEPSEN_LIN_NOT_LINEARIZABLE) {
		out->verdict = JEPSEN_LIN_UNKNOWN;
	}
	search_reset(&s);
	free(by_key);
	free(ops);
	free(parts);
	return rc;
}

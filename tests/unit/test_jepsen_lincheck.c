/* Unit tests for jepsen/lincheck: every verdict of
 * vectors/linearizability/expected.tsv, hand-made histories (including
 * ones that must fail), the limits, and a cross-check against a brute
 * force search on thousands of random small histories. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cmocka.h>

#include "jepsen/history.h"
#include "jepsen/lincheck.h"

static const char *shared_dir(void)
{
	const char *dir = getenv("LS_SHARED_DIR");
	return dir != NULL && dir[0] != '\0' ? dir : LS_SHARED_DIR;
}

/* Parses `text` and checks it; returns the verdict, or -1 on an error. */
static int verdict_of(enum jepsen_format fmt, const char *text,
                      const struct jepsen_lin_limits *limits)
{
	struct jepsen_history h;
	struct jepsen_lin_result res;
	char err[512];
	int rc;
	jepsen_history_init(&h);
	rc = jepsen_history_parse(&h, fmt, text, strlen(text), err, sizeof err);
	if (rc != 0) {
		print_error("parse: %s\n", err);
		jepsen_history_free(&h);
		return -1;
	}
	rc = jepsen_lincheck_run(&h, limits, &res, err, sizeof err);
	jepsen_history_free(&h);
	if (rc != 0) {
		return -1;
	}
	return (int)res.verdict;
}

static int lines(const char *text)
{
	return verdict_of(JEPSEN_FORMAT_LINES, text, NULL);
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void test_vectors(void **state)
{
	char path[4096], line[1024];
	const char *dir = shared_dir();
	struct timespec t0;
	double total = 0, slowest = 0;
	char slowest_name[256] = "";
	int n = 0;
	(void)state;
	snprintf(path, sizeof path, "%s/vectors/linearizability/expected.tsv",
	         dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f) != NULL) {
		char *tab = strchr(line, '\t');
		if (tab == NULL || strncasecmp(line, "history\t", 8) == 0) {
			continue;
		}
		*tab = '\0';
		char *want = tab + 1;
		want[strcspn(want, "\r\n")] = '\0';
		enum jepsen_format fmt = strncmp(line, "etcd/", 5) == 0
		                             ? JEPSEN_FORMAT_ETCD_LOG
		                             : JEPSEN_FORMAT_KV_EDN;
		struct jepsen_history h;
		struct jepsen_lin_result res;
		char err[512];
		snprintf(path, sizeof path, "%s/vectors/linearizability/%s",
		         dir, line);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		jepsen_history_init(&h);
		int rc = jepsen_history_load(&h, fmt, path, err, sizeof err);
		if (rc != 0) {
			print_error("%s: %s\n", line, err);
		}
		assert_int_equal(rc, 0);
		/* Bounded like a test run should be; none comes close. */
		struct jepsen_lin_limits lim = {.max_memory = 256u << 20};
		assert_int_equal(
		    jepsen_lincheck_run(&h, &lim, &res, err, sizeof err), 0);
		double ms = ms_since(&t0);
		total += ms;
		if (ms > slowest) {
			slowest = ms;
			snprintf(slowest_name, sizeof slowest_name, "%s", line);
		}
		const char *got = jepsen_lincheck_verdict_name(res.verdict);
		if (strcmp(got, want) != 0) {
			print_error("%s: got %s, want %s (%s)\n", line, got,
			            want, res.explanation);
		}
		assert_string_equal(got, want);
		jepsen_history_free(&h);
		n++;
	}
	fclose(f);
	assert_true(n >= 100);
	printf("linearizability vectors: %d histories in %.1f ms, slowest %s "
	       "%.1f ms\n",
	       n, total, slowest_name, slowest);
}

static void test_register_basics(void **state)
{
	(void)state;
	/* Empty history. */
	assert_int_equal(lines(""), JEPSEN_LIN_LINEARIZABLE);
	/* Sequential write then read. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 ok write x 1\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x 1\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* A stale read after the write completed. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 ok write x 1\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x nil\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* The same read concurrent with the write is fine. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 2 invoke read x\n"
	                       "2 1 ok write x 1\n"
	                       "3 2 ok read x nil\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* Reading a value nobody wrote. */
	assert_int_equal(lines("0 1 invoke read x\n"
	                       "1 1 ok read x 7\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* New-then-old across two readers: the classic violation. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 2 invoke read x\n"
	                       "2 2 ok read x 1\n"
	                       "3 3 invoke read x\n"
	                       "4 3 ok read x nil\n"
	                       "5 1 ok write x 1\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* cas succeeds only on the expected value. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 ok write x 1\n"
	                       "2 1 invoke cas x 1 2\n"
	                       "3 1 ok cas x 1 2\n"
	                       "4 1 invoke read x\n"
	                       "5 1 ok read x 2\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	assert_int_equal(lines("0 1 invoke write x 3\n"
	                       "1 1 ok write x 3\n"
	                       "2 1 invoke cas x 1 2\n"
	                       "3 1 ok cas x 1 2\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
}

static void test_indeterminate_and_failed(void **state)
{
	(void)state;
	/* A failed write never happened: reading its value is wrong. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 fail write x 1\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x 1\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* An indeterminate write may take effect later, even much later. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 info write x 1\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x nil\n"
	                       "4 2 invoke read x\n"
	                       "5 2 ok read x 1\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* ... or never. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 info write x 1\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x nil\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* ... but only once: it cannot explain 1, then 2, then 1 again. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 1 info write x 1\n"
	                       "2 3 invoke write x 2\n"
	                       "3 3 ok write x 2\n"
	                       "4 2 invoke read x\n"
	                       "5 2 ok read x 1\n"
	                       "6 2 invoke read x\n"
	                       "7 2 ok read x 2\n"
	                       "8 2 invoke read x\n"
	                       "9 2 ok read x 1\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* Never before its invocation. */
	assert_int_equal(lines("0 2 invoke read x\n"
	                       "1 2 ok read x 1\n"
	                       "2 1 invoke write x 1\n"
	                       "3 1 info write x 1\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* An invocation that never completes counts as indeterminate. */
	assert_int_equal(lines("0 1 invoke write x 1\n"
	                       "1 2 invoke read x\n"
	                       "2 2 ok read x 1\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* Indeterminate cas whose comparison fails: a no-op. */
	assert_int_equal(lines("0 1 invoke cas x 5 6\n"
	                       "1 1 info cas x 5 6\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x nil\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	assert_int_equal(lines("0 1 invoke cas x 5 6\n"
	                       "1 1 info cas x 5 6\n"
	                       "2 2 invoke read x\n"
	                       "3 2 ok read x 6\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* An etcd write that "failed" by timing out may still happen. */
	assert_int_equal(
	    verdict_of(JEPSEN_FORMAT_ETCD_LOG,
	               "INFO  jepsen.util - 0\t:invoke\t:write\t1\n"
	               "INFO  jepsen.util - 0\t:fail\t:write\t:timed-out\n"
	               "INFO  jepsen.util - 1\t:invoke\t:read\tnil\n"
	               "INFO  jepsen.util - 1\t:ok\t:read\t1\n",
	               NULL),
	    JEPSEN_LIN_LINEARIZABLE);
	/* A read whose result is unknown constrains nothing. */
	assert_int_equal(lines("0 2 invoke read x\n"
	                       "1 2 info read x\n"
	                       "2 1 invoke read x\n"
	                       "3 1 ok read x nil\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
}

static void test_keys_are_independent(void **state)
{
	(void)state;
	/* Each key alone is linearizable. */
	assert_int_equal(lines("0 1 invoke write a 1\n"
	                       "1 1 ok write a 1\n"
	                       "2 2 invoke write b 1\n"
	                       "3 2 ok write b 1\n"
	                       "4 1 invoke read b\n"
	                       "5 1 ok read b 1\n"
	                       "6 2 invoke read a\n"
	                       "7 2 ok read a 1\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* A violation on one key of three. */
	assert_int_equal(lines("0 1 invoke write a 1\n"
	                       "1 1 ok write a 1\n"
	                       "2 2 invoke write b 1\n"
	                       "3 2 ok write b 1\n"
	                       "4 1 invoke read c\n"
	                       "5 1 ok read c 1\n"
	                       "6 2 invoke read a\n"
	                       "7 2 ok read a 1\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
}

static void test_kv_append(void **state)
{
	(void)state;
	/* Porcupine-style kv: an absent key reads as "". */
	assert_int_equal(
	    verdict_of(JEPSEN_FORMAT_KV_EDN,
	               "{:process 0, :type :invoke, :f :get, :key \"k\", "
	               ":value nil}\n"
	               "{:process 0, :type :ok, :f :get, :key \"k\", "
	               ":value \"\"}\n"
	               "{:process 0, :type :invoke, :f :append, :key \"k\", "
	               ":value \"a\"}\n"
	               "{:process 1, :type :invoke, :f :append, :key \"k\", "
	               ":value \"b\"}\n"
	               "{:process 0, :type :ok, :f :append, :key \"k\", "
	               ":value \"a\"}\n"
	               "{:process 1, :type :ok, :f :append, :key \"k\", "
	               ":value \"b\"}\n"
	               "{:process 0, :type :invoke, :f :get, :key \"k\", "
	               ":value nil}\n"
	               "{:process 0, :type :ok, :f :get, :key \"k\", "
	               ":value \"ba\"}\n",
	               NULL),
	    JEPSEN_LIN_LINEARIZABLE);
	/* "ab" and "ba" cannot both be true. */
	assert_int_equal(lines("0 0 invoke append k a\n"
	                       "1 1 invoke append k b\n"
	                       "2 0 ok append k a\n"
	                       "3 1 ok append k b\n"
	                       "4 0 invoke get k\n"
	                       "5 0 ok get k ab\n"
	                       "6 1 invoke get k\n"
	                       "7 1 ok get k ba\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	/* A put resets the value. */
	assert_int_equal(lines("0 0 invoke append k a\n"
	                       "1 0 ok append k a\n"
	                       "2 1 invoke put k z\n"
	                       "3 1 ok put k z\n"
	                       "4 0 invoke append k b\n"
	                       "5 0 ok append k b\n"
	                       "6 0 invoke get k\n"
	                       "7 0 ok get k zb\n"),
	                 JEPSEN_LIN_LINEARIZABLE);
	/* A register read (not a kv get) of nil is not "". */
	assert_int_equal(lines("0 0 invoke write k x\n"
	                       "1 0 ok write k x\n"
	                       "2 0 invoke read k\n"
	                       "3 0 ok read k nil\n"),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
}

static void test_bad_ops(void **state)
{
	(void)state;
	assert_int_equal(lines("0 1 invoke cas x 1\n"
	                       "1 1 ok cas x 1\n"),
	                 -1);
	assert_int_equal(lines("0 1 invoke add x 1\n"
	                       "1 1 ok add x 1\n"),
	                 -1);
	assert_int_equal(lines("0 1 invoke read x\n"
	                       "1 1 ok read x\n"),
	                 -1);
}

/* Many concurrent writes and reads of one register: an exponential
 * search without the cache. */
static char *hard_history(int writers, int rounds, int corrupt)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	int t = 0;
	assert_non_null(buf);
	for (int r = 0; r < rounds; r++) {
		for (int w = 0; w < writers; w++) {
			len += (size_t)snprintf(buf + len, cap - len,
			                        "%d %d invoke write x %d\n",
			                        t++, w, r * writers + w);
		}
		for (int w = 0; w < writers; w++) {
			len += (size_t)snprintf(buf + len, cap - len,
			                        "%d %d ok write x %d\n", t++, w,
			                        r * writers + w);
		}
		len += (size_t)snprintf(
		    buf + len, cap - len,
		    "%d 99 invoke read x\n%d 99 ok read x "
		    "%d\n",
		    t, t + 1, corrupt && r == rounds - 1 ? -1 : r * writers);
		t += 2;
	}
	return buf;
}

static void test_limits(void **state)
{
	(void)state;
	char *hist = hard_history(12, 6, 1);
	struct jepsen_lin_limits lim = {.max_steps = 1000};
	/* Too few steps: unknown, never a guess. */
	assert_int_equal(verdict_of(JEPSEN_FORMAT_LINES, hist, &lim),
	                 JEPSEN_LIN_UNKNOWN);
	lim = (struct jepsen_lin_limits){.max_memory = 64 * 1024};
	assert_int_equal(verdict_of(JEPSEN_FORMAT_LINES, hist, &lim),
	                 JEPSEN_LIN_UNKNOWN);
	lim = (struct jepsen_lin_limits){.max_ms = 1, .max_steps = 0};
	int v = verdict_of(JEPSEN_FORMAT_LINES, hist, &lim);
	assert_true(v == JEPSEN_LIN_UNKNOWN ||
	            v == JEPSEN_LIN_NOT_LINEARIZABLE);
	/* With room, the right answer. */
	assert_int_equal(verdict_of(JEPSEN_FORMAT_LINES, hist, NULL),
	                 JEPSEN_LIN_NOT_LINEARIZABLE);
	free(hist);
	hist = hard_history(12, 6, 0);
	assert_int_equal(verdict_of(JEPSEN_FORMAT_LINES, hist, NULL),
	                 JEPSEN_LIN_LINEARIZABLE);
	free(hist);
}

static void test_explanation(void **state)
{
	struct jepsen_history h;
	struct jepsen_lin_result res;
	char err[256];
	const char *text = "0 1 invoke write x 1\n"
	                   "1 1 ok write x 1\n"
	                   "2 2 invoke read x\n"
	                   "3 2 ok read x 2\n";
	(void)state;
	jepsen_history_init(&h);
	assert_int_equal(jepsen_history_parse(&h, JEPSEN_FORMAT_LINES, text,
	                                      strlen(text), err, sizeof err),
	                 0);
	assert_int_equal(jepsen_lincheck_run(&h, NULL, &res, err, sizeof err),
	                 0);
	assert_int_equal(res.verdict, JEPSEN_LIN_NOT_LINEARIZABLE);
	assert_non_null(strstr(res.explanation, "key x"));
	assert_non_null(strstr(res.explanation, "process 2 read key x 2"));
	assert_non_null(strstr(res.explanation, "lines 3-4"));
	jepsen_history_free(&h);
}

/* ---- brute force cross-check ------------------------------------------ */

#define BF_MAX_OPS 10
#define BF_MAX_VAL 64

struct bf_op {
	int kind; /* enum jepsen_f */
	int known;
	uint32_t inv, ret;
	int key;
	char a[BF_MAX_VAL], b[BF_MAX_VAL];
	int a_nil;
};

struct bf {
	struct bf_op ops[BF_MAX_OPS];
	int n;
};

struct bf_state {
	char v[2][BF_MAX_VAL * BF_MAX_OPS];
	int nil[2];
};

static int bf_search(const struct bf *b, unsigned done,
                     const struct bf_state *st)
{
	int all = 1;
	for (int i = 0; i < b->n; i++) {
		if (b->ops[i].known && !(done & (1u << i))) {
			all = 0;
		}
	}
	if (all) {
		return 1;
	}
	for (int i = 0; i < b->n; i++) {
		const struct bf_op *o = &b->ops[i];
		if (done & (1u << i)) {
			continue;
		}
		/* May go next only if no pending op returned before it was
		 * invoked. */
		int minimal = 1;
		for (int j = 0; j < b->n; j++) {
			if (j != i && !(done & (1u << j)) && b->ops[j].known &&
			    b->ops[j].ret < o->inv) {
				minimal = 0;
			}
		}
		if (!minimal) {
			continue;
		}
		struct bf_state ns = *st;
		int k = o->key;
		int ok = 1;
		switch (o->kind) {
		case JEPSEN_F_READ:
			ok = o->a_nil
			         ? st->nil[k]
			         : !st->nil[k] && strcmp(st->v[k], o->a) == 0;
			break;
		case JEPSEN_F_GET: {
			const char *cur = st->nil[k] ? "" : st->v[k];
			ok = strcmp(cur, o->a_nil ? "" : o->a) == 0;
			break;
		}
		case JEPSEN_F_WRITE:
			ns.nil[k] = o->a_nil;
			strcpy(ns.v[k], o->a_nil ? "" : o->a);
			break;
		case JEPSEN_F_CAS:
			ok = !st->nil[k] && strcmp(st->v[k], o->a) == 0;
			ns.nil[k] = 0;
			strcpy(ns.v[k], o->b);
			break;
		case JEPSEN_F_APPEND:
			if (st->nil[k]) {
				ns.v[k][0] = '\0';
			}
			ns.nil[k] = 0;
			strcat(ns.v[k], o->a);
			break;
		}
		if (ok && bf_search(b, done | (1u << i), &ns)) {
			return 1;
		}
	}
	return 0;
}

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int rnd(uint64_t *s, int n)
{
	return (int)(rng_next(s) % (uint64_t)n);
}

/* Simulates processes on a real store (so most histories are
 * linearizable), then sometimes corrupts a result. Writes the history in
 * the line format into buf. `kv` selects get/put/append over
 * read/write/cas. */
static void random_history(uint64_t *seed, int kv, char *buf, size_t cap)
{
	static const char *const vals[] = {"1", "2", "3"};
	int nproc = 2 + rnd(seed, 3), nops = 3 + rnd(seed, BF_MAX_OPS - 2);
	int nkeys = 1 + rnd(seed, 2);
	char store[2][BF_MAX_VAL * BF_MAX_OPS] = {"", ""};
	int nil[2] = {1, 1};
	struct {
		int phase; /* 0 idle, 1 invoked, 2 applied */
		int kind, key, outcome, applied;
		char a[BF_MAX_VAL], b[BF_MAX_VAL], res[BF_MAX_VAL * BF_MAX_OPS];
		int res_nil, a_nil;
	} p[4];
	size_t len = 0;
	int t = 0, started = 0, corrupt = rnd(seed, 2) == 0;
	memset(p, 0, sizeof p);
	buf[0] = '\0';
	for (;;) {
		int busy = 0;
		for (int i = 0; i < nproc; i++) {
			busy |= p[i].phase != 0;
		}
		if (!busy && started >= nops) {
			break;
		}
		int i = rnd(seed, nproc);
		if (p[i].phase == 0) {
			if (started >= nops) {
				continue;
			}
			started++;
			p[i].kind = kv ? (int[]){JEPSEN_F_GET, JEPSEN_F_WRITE,
			                         JEPSEN_F_APPEND}[rnd(seed, 3)]
			               : (int[]){JEPSEN_F_READ, JEPSEN_F_WRITE,
			                         JEPSEN_F_CAS}[rnd(seed, 3)];
			p[i].key = rnd(seed, nkeys);
			p[i].a_nil = 0;
			snprintf(
			    p[i].a, sizeof p[i].a, "%s",
			    kv && p[i].kind == JEPSEN_F_APPEND
			        ? (const char *[]){"a", "b", "c"}[rnd(seed, 3)]
			        : vals[rnd(seed, 3)]);
			snprintf(p[i].b, sizeof p[i].b, "%s",
			         vals[rnd(seed, 3)]);
			/* 0 ok, 1 info (applied or not), 2 fail */
			int r = rnd(seed, 10);
			p[i].outcome = r < 7 ? 0 : r < 9 ? 1 : 2;
			p[i].applied = 0;
			const char *f = jepsen_history_f_name(p[i].kind);
			if (p[i].kind == JEPSEN_F_READ ||
			    p[i].kind == JEPSEN_F_GET) {
				len += (size_t)snprintf(buf + len, cap - len,
				                        "%d %d invoke %s k%d\n",
				                        t++, i, f, p[i].key);
			} else if (p[i].kind == JEPSEN_F_CAS) {
				len += (size_t)snprintf(
				    buf + len, cap - len,
				    "%d %d invoke %s k%d %s %s\n", t++, i, f,
				    p[i].key, p[i].a, p[i].b);
			} else {
				len += (size_t)snprintf(
				    buf + len, cap - len,
				    "%d %d invoke %s k%d %s\n", t++, i, f,
				    p[i].key, p[i].a);
			}
			p[i].phase = 1;
			continue;
		}
		if (p[i].phase == 1) {
			/* Take effect (maybe not, for failed / info ops). */
			int k = p[i].key;
			int apply = p[i].outcome == 0 ||
			            (p[i].outcome == 1 && rnd(seed, 2));
			if (p[i].kind == JEPSEN_F_CAS && !nil[k] &&
			    strcmp(store[k], p[i].a) != 0 &&
			    p[i].outcome == 0) {
				p[i].outcome = 2; /* compare failed */
			}
			if (p[i].kind == JEPSEN_F_CAS && nil[k] &&
			    p[i].outcome == 0) {
				p[i].outcome = 2;
			}
			if (p[i].outcome == 2) {
				apply = 0;
			}
			if (apply) {
				switch (p[i].kind) {
				case JEPSEN_F_READ:
				case JEPSEN_F_GET:
					p[i].res_nil = nil[k];
					strcpy(p[i].res, store[k]);
					break;
				case JEPSEN_F_WRITE:
					strcpy(store[k], p[i].a);
					nil[k] = 0;
					break;
				case JEPSEN_F_CAS:
					if (!nil[k] &&
					    strcmp(store[k], p[i].a) == 0) {
						strcpy(store[k], p[i].b);
					}
					break;
				case JEPSEN_F_APPEND:
					if (nil[k]) {
						store[k][0] = '\0';
					}
					nil[k] = 0;
					strcat(store[k], p[i].a);
					break;
				}
			}
			p[i].phase = 2;
			continue;
		}
		/* Complete. */
		const char *f = jepsen_history_f_name(p[i].kind);
		const char *type = p[i].outcome == 0   ? "ok"
		                   : p[i].outcome == 1 ? "info"
		                                       : "fail";
		if ((p[i].kind == JEPSEN_F_READ || p[i].kind == JEPSEN_F_GET) &&
		    p[i].outcome == 0) {
			const char *res =
			    p[i].res_nil
			        ? (p[i].kind == JEPSEN_F_GET ? "" : "nil")
			        : p[i].res;
			if (corrupt && rnd(seed, 2) == 0) {
				res = vals[rnd(seed, 3)];
				corrupt = 0;
			}
			len += (size_t)snprintf(
			    buf + len, cap - len, "%d %d ok %s k%d %s\n", t++,
			    i, f, p[i].key, res[0] == '\0' ? "\"\"" : res);
		} else if (p[i].kind == JEPSEN_F_READ ||
		           p[i].kind == JEPSEN_F_GET) {
			len += (size_t)snprintf(buf + len, cap - len,
			                        "%d %d %s %s k%d\n", t++, i,
			                        type, f, p[i].key);
		} else if (p[i].kind == JEPSEN_F_CAS) {
			len += (size_t)snprintf(
			    buf + len, cap - len, "%d %d %s %s k%d %s %s\n",
			    t++, i, type, f, p[i].key, p[i].a, p[i].b);
		} else {
			len += (size_t)snprintf(buf + len, cap - len,
			                        "%d %d %s %s k%d %s\n", t++, i,
			                        type, f, p[i].key, p[i].a);
		}
		p[i].phase = 0;
	}
}

/* The line format has no empty token, so the generator writes "" for an
 * empty read; turn it into the empty string in the parsed history. */
static int load_bf(const struct jepsen_history *h, struct bf *b)
{
	b->n = 0;
	for (size_t i = 0; i < h->n_ops; i++) {
		const struct jepsen_op *op = &h->ops[i];
		size_t n;
		const uint32_t *v = jepsen_history_op_values(h, op, &n);
		if (op->type == JEPSEN_FAIL ||
		    ((op->f == JEPSEN_F_READ || op->f == JEPSEN_F_GET) &&
		     op->type != JEPSEN_OK)) {
			continue;
		}
		struct bf_op *o = &b->ops[b->n++];
		memset(o, 0, sizeof *o);
		o->kind = op->f;
		o->known = op->type == JEPSEN_OK;
		o->inv = op->invoke;
		o->ret = op->complete;
		o->key = jepsen_history_str(h, op->key)[1] - '0';
		o->a_nil = v[0] == JEPSEN_NIL;
		const char *a = jepsen_history_str(h, v[0]);
		snprintf(o->a, sizeof o->a, "%s",
		         o->a_nil || strcmp(a, "\"\"") == 0 ? "" : a);
		if (n > 1) {
			snprintf(o->b, sizeof o->b, "%s",
			         jepsen_history_str(h, v[1]));
		}
	}
	return 0;
}

static void cross_check(int kv, int count, uint64_t seed)
{
	size_t cap = 1 << 14;
	char *buf = malloc(cap);
	int verdicts[3] = {0, 0, 0};
	assert_non_null(buf);
	for (int iter = 0; iter < count; iter++) {
		struct jepsen_history h;
		struct jepsen_lin_result res;
		struct bf b;
		struct bf_state st;
		char err[512];
		random_history(&seed, kv, buf, cap);
		jepsen_history_init(&h);
		if (jepsen_history_parse(&h, JEPSEN_FORMAT_LINES, buf,
		                         strlen(buf), err, sizeof err) != 0) {
			print_error("%s\n%s", err, buf);
			fail();
		}
		/* The generator's "" token stands for the empty string. */
		uint32_t quoted, empty;
		if (jepsen_intern_find(&h.strings, "\"\"", 2, &quoted)) {
			assert_int_equal(
			    jepsen_intern_put(&h.strings, "", 0, &empty), 0);
			for (size_t i = 0; i < h.n_values; i++) {
				if (h.values[i] == quoted) {
					h.values[i] = empty;
				}
			}
		}
		load_bf(&h, &b);
		memset(&st, 0, sizeof st);
		st.nil[0] = st.nil[1] = 1;
		int want = bf_search(&b, 0, &st) ? JEPSEN_LIN_LINEARIZABLE
		                                 : JEPSEN_LIN_NOT_LINEARIZABLE;
		assert_int_equal(
		    jepsen_lincheck_run(&h, NULL, &res, err, sizeof err), 0);
		if ((int)res.verdict != want) {
			print_error("iteration %d: brute force says %d, "
			            "lincheck %d (%s)\n%s",
			            iter, want, res.verdict, res.explanation,
			            buf);
		}
		assert_int_equal(res.verdict, want);
		verdicts[res.verdict]++;
		jepsen_history_free(&h);
	}
	free(buf);
	printf("cross-check (%s): %d linearizable, %d not\n",
	       kv ? "kv" : "register", verdicts[0], verdicts[1]);
	/* The generator must exercise both verdicts. */
	assert_true(verdicts[0] > count / 10);
	assert_true(verdicts[1] > count / 10);
}

static void test_cross_check_register(void **state)
{
	(void)state;
	cross_check(0, 20000, 42);
}

static void test_cross_check_kv(void **state)
{
	(void)state;
	cross_check(1, 20000, 4242);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test(test_register_basics),
	    cmocka_unit_test(test_indeterminate_and_failed),
	    cmocka_unit_test(test_keys_are_independent),
	    cmocka_unit_test(test_kv_append),
	    cmocka_unit_test(test_bad_ops),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_explanation),
	    cmocka_unit_test(test_cross_check_register),
	    cmocka_unit_test(test_cross_check_kv),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

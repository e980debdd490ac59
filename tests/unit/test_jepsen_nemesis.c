/* Unit tests of the pure parts of the fault harness: partition shapes
 * (halves, isolate, majorities ring), their iptables rules, seeded
 * schedules (the same for a seed, well-formed for many), fault names,
 * run-tag parsing and ASan detection. No root needed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "jepsen/hosts.h"
#include "jepsen/nemesis.h"

static void check_symmetric(const struct nemesis_grudge *g)
{
	for (unsigned a = 0; a <= g->n; a++) {
		assert_false(g->cut[a][a]);
		for (unsigned b = 0; b <= g->n; b++) {
			assert_int_equal(g->cut[a][b], g->cut[b][a]);
		}
	}
}

static void test_rng(void **state)
{
	struct nemesis_rng a, b;
	(void)state;
	nemesis_rng_seed(&a, 99);
	nemesis_rng_seed(&b, 99);
	for (int i = 0; i < 1000; i++) {
		assert_true(nemesis_rng_next(&a) == nemesis_rng_next(&b));
	}
	unsigned hits[7] = {0};
	for (int i = 0; i < 7000; i++) {
		uint64_t x = nemesis_rng_below(&a, 7);
		assert_true(x < 7);
		hits[x]++;
	}
	for (int i = 0; i < 7; i++) {
		assert_true(hits[i] > 800 && hits[i] < 1200);
	}
	/* splitmix64's published first output for seed 0. */
	nemesis_rng_seed(&a, 0);
	assert_true(nemesis_rng_next(&a) == 0xe220a8397b1dcdafULL);
}

static void test_halves(void **state)
{
	(void)state;
	for (unsigned n = 3; n <= HOSTS_MAX_NODES; n++) {
		for (uint64_t seed = 0; seed < 200; seed++) {
			struct nemesis_rng r;
			struct nemesis_grudge g;
			nemesis_rng_seed(&r, seed);
			enum nemesis_client_side side =
			    (enum nemesis_client_side)(seed % 3);
			assert_int_equal(nemesis_grudge_halves(&g, n, &r, side),
			                 0);
			check_symmetric(&g);
			/* Node 1's side and the other; sizes n/2 and the
			 * rest; cut exactly across. */
			unsigned side1 = 0, cuts_client = 0;
			for (unsigned b = 1; b <= n; b++) {
				side1 += !g.cut[1][b];
			}
			assert_true(side1 == n / 2 || side1 == n - n / 2);
			for (unsigned a = 1; a <= n; a++) {
				for (unsigned b = 1; b <= n; b++) {
					bool same =
					    !g.cut[1][a] == !g.cut[1][b];
					assert_int_equal(g.cut[a][b], !same);
				}
				cuts_client += g.cut[0][a];
			}
			if (side == NEMESIS_CLIENT_ALL) {
				assert_int_equal(cuts_client, 0);
			} else if (side == NEMESIS_CLIENT_MAJORITY) {
				assert_int_equal(cuts_client, n / 2);
			} else {
				assert_int_equal(cuts_client, n - n / 2);
			}
			assert_non_null(strchr(g.desc, '|'));
		}
	}
	/* The same seed, the same halves. */
	struct nemesis_rng r1, r2;
	struct nemesis_grudge g1, g2;
	nemesis_rng_seed(&r1, 5);
	nemesis_rng_seed(&r2, 5);
	nemesis_grudge_halves(&g1, 5, &r1, NEMESIS_CLIENT_ALL);
	nemesis_grudge_halves(&g2, 5, &r2, NEMESIS_CLIENT_ALL);
	assert_memory_equal(&g1, &g2, sizeof g1);
}

static void test_isolate(void **state)
{
	struct nemesis_grudge g;
	(void)state;
	assert_int_equal(
	    nemesis_grudge_isolate(&g, 3, 1, NEMESIS_CLIENT_MAJORITY), 0);
	check_symmetric(&g);
	assert_string_equal(g.desc, "1|2,3 client=majority");
	assert_true(g.cut[1][2] && g.cut[1][3] && g.cut[0][1]);
	assert_false(g.cut[2][3] || g.cut[0][2] || g.cut[0][3]);
	assert_true(nemesis_grudge_sees(&g, 2, 3));
	assert_false(nemesis_grudge_sees(&g, 0, 1));

	assert_int_equal(nemesis_grudge_isolate(&g, 5, 4, NEMESIS_CLIENT_ALL),
	                 0);
	assert_string_equal(g.desc, "4|1,2,3,5 client=all");
	for (unsigned a = 0; a <= 5; a++) {
		assert_int_equal(g.cut[4][a], a != 4 && a != 0);
	}
	assert_int_equal(
	    nemesis_grudge_isolate(&g, 3, 1, NEMESIS_CLIENT_MINORITY), 0);
	assert_false(g.cut[0][1]);
	assert_true(g.cut[0][2] && g.cut[0][3]);
	assert_int_equal(nemesis_grudge_isolate(&g, 3, 0, NEMESIS_CLIENT_ALL),
	                 -EINVAL);
	assert_int_equal(nemesis_grudge_isolate(&g, 3, 4, NEMESIS_CLIENT_ALL),
	                 -EINVAL);
}

static void test_ring(void **state)
{
	struct nemesis_rng r;
	struct nemesis_grudge g;
	(void)state;
	nemesis_rng_seed(&r, 1);
	assert_int_equal(nemesis_grudge_ring(&g, 3, &r), -EINVAL);
	for (unsigned n = 4; n <= HOSTS_MAX_NODES; n++) {
		for (uint64_t seed = 0; seed < 100; seed++) {
			nemesis_rng_seed(&r, seed);
			assert_int_equal(nemesis_grudge_ring(&g, n, &r), 0);
			check_symmetric(&g);
			unsigned cuts = 0;
			for (unsigned a = 1; a <= n; a++) {
				unsigned sees = 0;
				for (unsigned b = 1; b <= n; b++) {
					sees += !g.cut[a][b];
					cuts += g.cut[a][b];
				}
				/* A majority, itself included. */
				assert_true(sees >= n / 2 + 1);
				assert_false(g.cut[0][a]);
				/* No two nodes see the same set. */
				for (unsigned c = a + 1; c <= n; c++) {
					bool same = true;
					for (unsigned b = 1; b <= n; b++) {
						same = same && g.cut[a][b] ==
						                   g.cut[c][b];
					}
					assert_false(same);
				}
			}
			assert_true(cuts > 0);
			assert_memory_equal(g.desc, "ring ", 5);
		}
	}
	/* 5 nodes: each sees exactly its two ring neighbours. */
	nemesis_rng_seed(&r, 3);
	nemesis_grudge_ring(&g, 5, &r);
	for (unsigned a = 1; a <= 5; a++) {
		unsigned sees = 0;
		for (unsigned b = 1; b <= 5; b++) {
			sees += !g.cut[a][b];
		}
		assert_int_equal(sees, 3);
	}
}

static void test_rules(void **state)
{
	struct nemesis_grudge g;
	const char *addrs[] = {"10.77.9.100", "10.77.9.1", "10.77.9.2",
	                       "10.77.9.3"};
	char buf[1024];
	unsigned n;
	(void)state;
	nemesis_grudge_isolate(&g, 3, 1, NEMESIS_CLIENT_MAJORITY);
	assert_int_equal(
	    nemesis_grudge_rules(&g, 1, addrs, 'A', buf, sizeof buf, &n), 0);
	assert_int_equal(n, 6);
	assert_string_equal(buf, "*filter\n"
	                         "-A INPUT -s 10.77.9.100/32 -j DROP\n"
	                         "-A OUTPUT -d 10.77.9.100/32 -j DROP\n"
	                         "-A INPUT -s 10.77.9.2/32 -j DROP\n"
	                         "-A OUTPUT -d 10.77.9.2/32 -j DROP\n"
	                         "-A INPUT -s 10.77.9.3/32 -j DROP\n"
	                         "-A OUTPUT -d 10.77.9.3/32 -j DROP\n"
	                         "COMMIT\n");
	assert_int_equal(
	    nemesis_grudge_rules(&g, 2, addrs, 'D', buf, sizeof buf, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(buf, "*filter\n"
	                         "-D INPUT -s 10.77.9.1/32 -j DROP\n"
	                         "-D OUTPUT -d 10.77.9.1/32 -j DROP\n"
	                         "COMMIT\n");
	nemesis_grudge_none(&g, 3);
	assert_int_equal(
	    nemesis_grudge_rules(&g, 3, addrs, 'A', buf, sizeof buf, &n), 0);
	assert_int_equal(n, 0);
	nemesis_grudge_isolate(&g, 3, 1, NEMESIS_CLIENT_MAJORITY);
	assert_int_equal(nemesis_grudge_rules(&g, 1, addrs, 'A', buf, 40, &n),
	                 -ENOSPC);
	assert_int_equal(
	    nemesis_grudge_rules(&g, 1, addrs, 'X', buf, sizeof buf, &n),
	    -EINVAL);
	assert_int_equal(
	    nemesis_grudge_rules(&g, 4, addrs, 'A', buf, sizeof buf, &n),
	    -EINVAL);
}

static void test_parse_mask(void **state)
{
	unsigned m;
	(void)state;
	assert_int_equal(nemesis_parse_mask("partition", 5, false, &m), 0);
	assert_int_equal(m, NEMESIS_PARTITIONS);
	assert_int_equal(nemesis_parse_mask("partition", 3, false, &m), 0);
	assert_int_equal(m, NEMESIS_PARTITIONS &
	                        ~NEMESIS_BIT(NEMESIS_PARTITION_RING));
	assert_int_equal(nemesis_parse_mask("partition", 5, true, &m), 0);
	assert_true(m & NEMESIS_BIT(NEMESIS_PARTITION_LEADER));
	assert_int_equal(nemesis_parse_mask("kill", 5, false, &m), 0);
	assert_int_equal(m, NEMESIS_BIT(NEMESIS_KILL));
	assert_int_equal(nemesis_parse_mask("pause", 5, false, &m), 0);
	assert_int_equal(m, NEMESIS_BIT(NEMESIS_PAUSE));
	assert_int_equal(nemesis_parse_mask("skew", 5, false, &m), 0);
	assert_int_equal(m, NEMESIS_BIT(NEMESIS_SKEW));
	assert_int_equal(nemesis_parse_mask("mixed", 5, false, &m), 0);
	assert_int_equal(m, NEMESIS_PARTITIONS | NEMESIS_BIT(NEMESIS_KILL) |
	                        NEMESIS_BIT(NEMESIS_PAUSE) |
	                        NEMESIS_BIT(NEMESIS_SKEW));
	assert_int_equal(nemesis_parse_mask("none", 5, false, &m), 0);
	assert_int_equal(m, 0);
	assert_int_equal(nemesis_parse_mask("chaos", 5, false, &m), -EINVAL);
	/* Lists: the union. */
	assert_int_equal(nemesis_parse_mask("kill,pause", 5, false, &m), 0);
	assert_int_equal(m, NEMESIS_BIT(NEMESIS_KILL) |
	                        NEMESIS_BIT(NEMESIS_PAUSE));
	assert_int_equal(
	    nemesis_parse_mask("partition,kill,pause", 3, false, &m), 0);
	assert_int_equal(
	    m, (NEMESIS_PARTITIONS & ~NEMESIS_BIT(NEMESIS_PARTITION_RING)) |
	           NEMESIS_BIT(NEMESIS_KILL) | NEMESIS_BIT(NEMESIS_PAUSE));
	assert_int_equal(nemesis_parse_mask("kill,", 5, false, &m), -EINVAL);
	assert_int_equal(nemesis_parse_mask("kill,chaos", 5, false, &m),
	                 -EINVAL);
	assert_string_equal(nemesis_fault_name(NEMESIS_PARTITION_RING),
	                    "partition-ring");
	assert_string_equal(nemesis_fault_name(NEMESIS_SKEW), "skew");
}

static void describe_all(const struct nemesis_schedule *s, char *out,
                         size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		char line[512];
		nemesis_step_describe(&s->steps[i], line, sizeof line);
		size_t l = strlen(out);
		snprintf(out + l, cap - l, "%s\n", line);
	}
}

/* A written schedule (jepsen/run --schedule) reads back as --dry-run
 * prints it; bad ones are refused with the line. */
static void test_schedule_parse(void **state)
{
	static const char text[] =
	    "# the fault run of the SIGSEGV finding\n"
	    "2420 5919 partition-isolate 1|2,3 client=all\n"
	    "8305 12720 skew n2,n3 n2=-40378ms n3=+33696ms\n"
	    "\n"
	    "26297 29801 kill n1,n2\n"
	    "32325 35508 pause n3\n";
	static const char want[] = "2420 5919 partition-isolate 1|2,3 "
	                           "client=all\n"
	                           "8305 12720 skew n2,n3 n2=-40378ms "
	                           "n3=+33696ms\n"
	                           "26297 29801 kill n1,n2\n"
	                           "32325 35508 pause n3\n";
	struct nemesis_schedule s;
	char out[2048], err[256];
	(void)state;

	assert_int_equal(
	    nemesis_schedule_parse(&s, text, 3, 60000, 12000, err, sizeof err),
	    0);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.total_ms, 60000);
	assert_int_equal(s.final_ms, 48000);
	assert_int_equal(s.steps[3].targets, 1u << 3);
	assert_true(nemesis_grudge_sees(&s.steps[0].grudge, 2, 3));
	assert_false(nemesis_grudge_sees(&s.steps[0].grudge, 1, 2));
	describe_all(&s, out, sizeof out);
	assert_string_equal(out, want);
	nemesis_schedule_free(&s);

	assert_int_equal(nemesis_schedule_parse(&s, "5 9 kill n4\n", 3, 60000,
	                                        12000, err, sizeof err),
	                 -EINVAL);
	assert_non_null(strstr(err, "line 1"));
	assert_int_equal(nemesis_schedule_parse(&s,
	                                        "5 90 kill n1\n"
	                                        "50 60 pause n2\n",
	                                        3, 60000, 12000, err,
	                                        sizeof err),
	                 -EINVAL);
	assert_non_null(strstr(err, "overlap"));
	assert_int_equal(nemesis_schedule_parse(&s, "47000 49000 pause n2\n", 3,
	                                        60000, 12000, err, sizeof err),
	                 -EINVAL);
	assert_non_null(strstr(err, "final phase"));
	assert_int_equal(nemesis_schedule_parse(&s, "1 2 flood n1\n", 3, 60000,
	                                        12000, err, sizeof err),
	                 -EINVAL);
	assert_int_equal(nemesis_schedule_parse(&s, "1 2 skew n1 n2=+5ms\n", 3,
	                                        60000, 12000, err, sizeof err),
	                 -EINVAL);
}

static void test_schedule_deterministic(void **state)
{
	struct nemesis_plan p;
	struct nemesis_schedule a, b, c;
	char da[16384], db[16384], dc[16384], err[256];
	unsigned mask;
	(void)state;
	nemesis_parse_mask("mixed", 5, true, &mask);
	nemesis_plan_defaults(&p, 5, 1234, mask, 120000);
	assert_int_equal(nemesis_schedule_make(&a, &p, err, sizeof err), 0);
	assert_int_equal(nemesis_schedule_make(&b, &p, err, sizeof err), 0);
	p.seed = 1235;
	assert_int_equal(nemesis_schedule_make(&c, &p, err, sizeof err), 0);
	assert_true(a.n > 5);
	assert_int_equal(a.n, b.n);
	describe_all(&a, da, sizeof da);
	describe_all(&b, db, sizeof db);
	describe_all(&c, dc, sizeof dc);
	assert_string_equal(da, db);
	assert_string_not_equal(da, dc);
	for (size_t i = 0; i < a.n; i++) {
		assert_memory_equal(&a.steps[i], &b.steps[i],
		                    sizeof a.steps[i]);
	}
	/* Pinned: a seed means the same schedule on every build. */
	char first[512];
	nemesis_step_describe(&a.steps[0], first, sizeof first);
	assert_string_equal(first, "2670 9446 pause n1,n2");
	nemesis_schedule_free(&a);
	nemesis_schedule_free(&b);
	nemesis_schedule_free(&c);
}

static void test_schedule_well_formed(void **state)
{
	char err[256];
	unsigned mixed;
	(void)state;
	nemesis_parse_mask("mixed", 5, true, &mixed);
	for (uint64_t seed = 0; seed < 300; seed++) {
		unsigned n = 3 + (unsigned)(seed % 7);
		unsigned mask = mixed;
		if (n < 4) {
			mask &= ~NEMESIS_BIT(NEMESIS_PARTITION_RING);
		}
		struct nemesis_plan p;
		struct nemesis_schedule s;
		nemesis_plan_defaults(&p, n, seed, mask,
		                      10000 + (int64_t)seed * 997);
		assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err),
		                 0);
		assert_int_equal(s.final_ms, p.total_ms - p.final_ms);
		int64_t prev = 0;
		unsigned all = ((1u << (n + 1)) - 1) & ~1u;
		for (size_t i = 0; i < s.n; i++) {
			const struct nemesis_step *st = &s.steps[i];
			assert_true(st->start_ms - prev >= p.quiet_min_ms);
			assert_true(st->start_ms - prev <= p.quiet_max_ms);
			assert_true(st->heal_ms - st->start_ms >=
			            p.fault_min_ms);
			assert_true(st->heal_ms - st->start_ms <=
			            p.fault_max_ms);
			assert_true(st->heal_ms <= s.final_ms);
			assert_true(mask & NEMESIS_BIT(st->fault));
			assert_int_equal(st->targets & ~all, 0);
			switch (st->fault) {
			case NEMESIS_KILL:
			case NEMESIS_PAUSE:
				assert_true(st->targets != 0);
				break;
			case NEMESIS_SKEW:
				assert_true(st->targets != 0);
				for (unsigned id = 1; id <= n; id++) {
					int64_t k = st->skew_ms[id];
					int64_t m = k < 0 ? -k : k;
					if (st->targets & (1u << id)) {
						assert_true(m >= 6000 &&
						            m <= 60000);
					} else {
						assert_true(k == 0);
					}
				}
				break;
			case NEMESIS_PARTITION_LEADER:
				assert_true(st->shard < p.shards);
				break;
			default:
				assert_int_equal(st->grudge.n, n);
				check_symmetric(&st->grudge);
				break;
			}
			prev = st->heal_ms;
		}
		nemesis_schedule_free(&s);
	}
}

/* Membership steps: opt-in (not in mixed), planned so that a node is
 * removed only after one was added (never below the bootstrap size),
 * adds and replaces only while spares last, each step within its own
 * duration range; written membership steps read back. */
static void test_schedule_membership(void **state)
{
	char err[256], line[256];
	unsigned mask, mixed;
	(void)state;
	assert_int_equal(nemesis_parse_mask("membership", 3, true, &mask), 0);
	assert_int_equal(mask, NEMESIS_BIT(NEMESIS_MEMBERSHIP));
	assert_int_equal(nemesis_parse_mask("mixed", 5, true, &mixed), 0);
	assert_int_equal(mixed & NEMESIS_BIT(NEMESIS_MEMBERSHIP), 0);
	assert_int_equal(nemesis_parse_mask("membership,kill", 3, true, &mask),
	                 0);
	assert_int_equal(mask, NEMESIS_BIT(NEMESIS_MEMBERSHIP) |
	                           NEMESIS_BIT(NEMESIS_KILL));
	unsigned seen[NEMESIS_MEMBER_N_OPS] = {0};
	for (uint64_t seed = 0; seed < 300; seed++) {
		unsigned n = 3 + (unsigned)(seed % 5);
		struct nemesis_plan p;
		struct nemesis_schedule s;
		nemesis_plan_defaults(&p, n, seed, mask,
		                      20000 + (int64_t)seed * 499);
		p.spares = (unsigned)(seed % 4);
		assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err),
		                 0);
		unsigned members = n, spares = p.spares;
		int64_t prev = 0;
		for (size_t i = 0; i < s.n; i++) {
			const struct nemesis_step *st = &s.steps[i];
			assert_true(st->start_ms >= prev);
			assert_true(st->heal_ms <= s.final_ms);
			prev = st->heal_ms;
			if (st->fault != NEMESIS_MEMBERSHIP) {
				continue;
			}
			assert_true(st->heal_ms - st->start_ms >=
			            p.member_min_ms);
			assert_true(st->heal_ms - st->start_ms <=
			            p.member_max_ms);
			seen[st->member_op]++;
			switch (st->member_op) {
			case NEMESIS_MEMBER_REMOVE:
				assert_true(members > n);
				members--;
				break;
			case NEMESIS_MEMBER_ADD:
				if (spares > 0) {
					assert_true(members <= n);
					members++;
					spares--;
				}
				break;
			default:
				assert_int_equal(members, n);
				if (spares > 0) {
					spares--;
				}
				break;
			}
			/* Reads back as written. */
			struct nemesis_schedule back;
			nemesis_step_describe(st, line, sizeof line);
			assert_int_equal(
			    nemesis_schedule_parse(&back, line, n, s.total_ms,
			                           s.total_ms - s.final_ms, err,
			                           sizeof err),
			    0);
			assert_int_equal(back.n, 1);
			assert_int_equal(back.steps[0].member_op,
			                 st->member_op);
			assert_int_equal(back.steps[0].pick, st->pick);
			nemesis_schedule_free(&back);
		}
		nemesis_schedule_free(&s);
	}
	for (unsigned op = 0; op < NEMESIS_MEMBER_N_OPS; op++) {
		assert_true(seen[op] > 0);
	}
	struct nemesis_schedule w;
	assert_int_equal(nemesis_schedule_parse(
	                     &w,
	                     "1000 12000 membership add\n"
	                     "13000 14000 kill n1\n"
	                     "15000 30000 membership drain-remove pick=7\n"
	                     "31000 40000 membership replace\n",
	                     3, 60000, 12000, err, sizeof err),
	                 0);
	assert_int_equal(w.n, 4);
	assert_int_equal(w.steps[0].fault, NEMESIS_MEMBERSHIP);
	assert_int_equal(w.steps[0].member_op, NEMESIS_MEMBER_ADD);
	assert_int_equal(w.steps[2].member_op, NEMESIS_MEMBER_REMOVE);
	assert_int_equal(w.steps[2].pick, 7);
	assert_int_equal(w.steps[3].member_op, NEMESIS_MEMBER_REPLACE);
	nemesis_schedule_free(&w);
	assert_int_equal(nemesis_schedule_parse(&w, "1 2 membership grow\n", 3,
	                                        60000, 12000, err, sizeof err),
	                 -EINVAL);
	assert_non_null(strstr(err, "drain-remove"));
}

static void test_schedule_errors(void **state)
{
	struct nemesis_plan p;
	struct nemesis_schedule s;
	char err[256];
	(void)state;
	nemesis_plan_defaults(&p, 3, 1, NEMESIS_BIT(NEMESIS_PARTITION_RING),
	                      60000);
	assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err),
	                 -EINVAL);
	assert_non_null(strstr(err, "at least 4 nodes"));
	nemesis_plan_defaults(&p, 2, 1, NEMESIS_BIT(NEMESIS_KILL), 60000);
	assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err),
	                 -EINVAL);
	nemesis_plan_defaults(&p, 5, 1, NEMESIS_BIT(NEMESIS_KILL), 0);
	assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err),
	                 -EINVAL);
	/* No faults, or too short for one: an empty schedule. */
	nemesis_plan_defaults(&p, 5, 1, 0, 60000);
	assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err), 0);
	assert_int_equal(s.n, 0);
	nemesis_schedule_free(&s);
	nemesis_plan_defaults(&p, 5, 1, NEMESIS_BIT(NEMESIS_KILL), 4000);
	assert_int_equal(nemesis_schedule_make(&s, &p, err, sizeof err), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(s.final_ms, 1000);
	nemesis_schedule_free(&s);
}

static void test_parse_tag(void **state)
{
	unsigned id = 0;
	(void)state;
	assert_int_equal(hosts_parse_tag("lsj12-n3", &id), 0);
	assert_int_equal(id, 12);
	assert_int_equal(hosts_parse_tag("lsj254-br0", &id), 0);
	assert_int_equal(id, 254);
	assert_int_equal(hosts_parse_tag("lsj7", &id), 0);
	assert_int_equal(id, 7);
	assert_int_equal(hosts_parse_tag("lsj0-c", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("lsj012-c", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("lsj255-c", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("lsj12x", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("lsj-1", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("lsjtest-a", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("eth0", &id), -EINVAL);
	assert_int_equal(hosts_parse_tag("lsj12345-n1", &id), -EINVAL);
}

static void write_file(const char *path, const char *head, size_t pad,
                       const char *tail)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fputs(head, f);
	for (size_t i = 0; i < pad; i++) {
		fputc('x', f);
	}
	fputs(tail, f);
	fclose(f);
}

static void test_asan_detect(void **state)
{
	char path[] = "/tmp/lsj-unit-XXXXXX";
	bool asan = true;
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path,
	           "\x7f"
	           "ELF plain binary",
	           100000, "main");
	assert_int_equal(hosts_binary_is_asan(path, &asan), 0);
	assert_false(asan);
	/* The symbol straddles the 64 KiB read boundary. */
	write_file(path, "", 65536 - 5, "__asan_init rest");
	assert_int_equal(hosts_binary_is_asan(path, &asan), 0);
	assert_true(asan);
	write_file(path, "short __asan_init", 0, "");
	assert_int_equal(hosts_binary_is_asan(path, &asan), 0);
	assert_true(asan);
	char err[512];
	assert_int_equal(hosts_check_faketime(path, NULL, err, sizeof err),
	                 -ENOTSUP);
	assert_non_null(strstr(err, "AddressSanitizer"));
	write_file(path, "plain", 0, "");
	assert_int_equal(hosts_check_faketime(path,
	                                      "/nonexistent/libfaketime.so.1",
	                                      err, sizeof err),
	                 -ENOENT);
	assert_non_null(strstr(err, "libfaketime"));
	unlink(path);
	assert_int_equal(hosts_binary_is_asan(path, &asan), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rng),
	    cmocka_unit_test(test_halves),
	    cmocka_unit_test(test_isolate),
	    cmocka_unit_test(test_ring),
	    cmocka_unit_test(test_rules),
	    cmocka_unit_test(test_parse_mask),
	    cmocka_unit_test(test_schedule_parse),
	    cmocka_unit_test(test_schedule_deterministic),
	    cmocka_unit_test(test_schedule_well_formed),
	    cmocka_unit_test(test_schedule_membership),
	    cmocka_unit_test(test_schedule_errors),
	    cmocka_unit_test(test_parse_tag),
	    cmocka_unit_test(test_asan_detect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

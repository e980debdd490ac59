/* Static placement of groups on nodes; see placement.h. */
#include "raft/placement.h"

#include <stdlib.h>
#include <string.h>

#define STACK_NODES 64

static uint64_t mix(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

size_t placement_meta_voters(size_t n)
{
	if (n >= PLACEMENT_META_VOTERS) {
		return PLACEMENT_META_VOTERS;
	}
	return n >= 3 ? 3 : n;
}

uint64_t placement_score(uint64_t node, uint32_t group)
{
	return mix(mix(node) ^ ((uint64_t)group * 0xD6E8FEB86659FD93ull));
}

struct ranked {
	uint64_t id;
	uint64_t score;
};

static int by_score(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->score != y->score) {
		return x->score > y->score ? -1 : 1;
	}
	return x->id < y->id ? -1 : x->id > y->id;
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

size_t placement_replicas(const uint64_t *nodes, size_t n, uint32_t group,
                          unsigned r, uint64_t *out)
{
	struct ranked stack[STACK_NODES];
	struct ranked *v = stack;
	size_t i, k;

	if (n == 0) {
		return 0;
	}
	if (group == 0) {
		memcpy(out, nodes, n * sizeof *out);
		qsort(out, n, sizeof *out, by_id);
		return placement_meta_voters(n);
	}
	if (n > STACK_NODES) {
		v = malloc(n * sizeof *v);
		if (v == NULL) {
			return 0;
		}
	}
	for (i = 0; i < n; i++) {
		v[i].id = nodes[i];
		v[i].score = placement_score(nodes[i], group);
	}
	qsort(v, n, sizeof *v, by_score);
	k = r < n ? r : n;
	/* The winners by id, rotated by the group: where groups share their
	 * replicas (R = nodes, the usual 3-node case) preferred leaderships
	 * go round-robin, evenly even for a handful of groups, which the
	 * scores' order alone spreads evenly only on average (8 groups on 3
	 * nodes came out 5/2/1). */
	for (i = 0; i < k; i++) {
		out[i] = v[i].id;
	}
	qsort(out, k, sizeof *out, by_id);
	for (i = 0; i < k; i++) {
		v[i].id = out[(i + group) % k];
	}
	for (i = 0; i < k; i++) {
		out[i] = v[i].id;
	}
	if (v != stack) {
		free(v);
	}
	return k;
}

bool placement_has(const uint64_t *nodes, size_t n, uint32_t group, unsigned r,
                   uint64_t node)
{
	uint64_t stack[STACK_NODES];
	uint64_t *out = stack;
	size_t i, k;
	bool found = false;

	if (n > STACK_NODES) {
		out = malloc(n * sizeof *out);
		if (out == NULL) {
			return false;
		}
	}
	k = placement_replicas(nodes, n, group, r, out);
	for (i = 0; i < k; i++) {
		found = found || out[i] == node;
	}
	if (out != stack) {
		free(out);
	}
	return found;
}

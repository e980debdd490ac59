/* Placement of Raft groups on nodes: pure and deterministic, so that every
 * node computes the same answer from the same member list (the nodes that
 * hold replicas: the bootstrap list, later the joining and active nodes of
 * the meta group's membership).
 *
 *  - The meta group (group 0) has 3 voters with 3 or 4 nodes, 5 with 5 or
 *    more (every node below 3): the lowest node ids.
 *  - Data group g (g >= 1) lives on R nodes chosen by rendezvous hashing:
 *    every node gets the score mix(node id, g) and the R highest scores
 *    win. The winners sorted by id and rotated left by g are the group's
 *    preference order for leadership: the first live one should lead.
 *
 * Rendezvous hashing moves only the groups of a node that joins or leaves,
 * and spreads groups evenly; the rotation spreads preferred leaderships
 * round-robin over groups that share their replicas. */
#ifndef LS_RAFT_PLACEMENT_H
#define LS_RAFT_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLACEMENT_META_VOTERS 5

/* The meta group's voter count for `n` nodes. */
size_t placement_meta_voters(size_t n);

/* The score of `node` for `group` (higher ranks first). */
uint64_t placement_score(uint64_t node, uint32_t group);

/* Writes the replicas of `group` among the `n` distinct node ids `nodes`
 * into out[0 .. k-1] in preference order and returns k: min(r, n) for a
 * data group, placement_meta_voters(n) lowest ids (ascending) for the
 * meta group. `out` must hold n ids. */
size_t placement_replicas(const uint64_t *nodes, size_t n, uint32_t group,
                          unsigned r, uint64_t *out);

/* Whether `node` is among the replicas of `group`. */
bool placement_has(const uint64_t *nodes, size_t n, uint32_t group, unsigned r,
                   uint64_t node);

#endif

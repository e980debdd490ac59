/* Child groups (FLOW.SPAWN_CHILDREN): the parent's record keeps one entry
 * per group in `child_groups` (a typed map by group id); a child keeps its
 * parent's id, partition and group. When a flow ends (enters a terminal
 * state), its parent's group counts it and, once the group's wait is
 * decided, moves the parent to the group's success or failure state; when
 * a parent ends, the children of its cancel_children groups are
 * cancelled. */
#ifndef LS_FLOW_FLOW_CHILDREN_H
#define LS_FLOW_FLOW_CHILDREN_H

#include <stdbool.h>
#include <stdint.h>

#include "flow/flow_record.h"

struct cgroup {
	struct fsnp_bytes wait; /* all, any, none */
	struct fsnp_bytes wait_state;
	struct fsnp_bytes success;
	struct fsnp_bytes failure;
	struct fsnp_bytes on_child_failed;  /* fail_parent, ignore */
	struct fsnp_bytes on_parent_closed; /* cancel_children, abandon_... */
	struct fsnp_val children;           /* list of child ids */
	int64_t total, done, failed, digest;
	bool resolved;
};

/* The group `gid` of parent `r`: 1 found (views into the record), 0. */
int flow_cgroup_get(const struct frec *r, struct fsnp_bytes gid,
                    struct cgroup *g);
/* Sets (adds or replaces) the group in r's child_groups. */
void flow_cgroup_put(struct fctx *c, struct frec *r, struct fsnp_bytes gid,
                     const struct cgroup *g);

/* Called by frec_save after it wrote `r` (old: before, or NULL). */
void flow_children_saved(struct fctx *c, const struct frec *old,
                         const struct frec *r);

#endif

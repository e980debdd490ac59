/* FSNP cluster administration (CLUSTER.* and FERRICSTORE.* opcodes,
 * docs/fsnp.md "Cluster administration"): the pure argument layer
 * (fsnp_admin_args.c: `args` lists, ID@HOST:PORT, numbers) and the
 * handlers (fsnp_admin.c), which answer from the membership, the routing
 * snapshot and the node's state. */
#ifndef LS_NODE_FSNP_ADMIN_H
#define LS_NODE_FSNP_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "wire/fsnp_value.h"

#define FSNP_ADMIN_HOST_MAX 256
#define FSNP_ADMIN_ARGS_MAX 8
#define FSNP_ADMIN_ERR_MAX 200

/* A node named as ID@INTERNAL_HOST:PORT (host may be "[V6]"). */
struct fsnp_admin_node {
	uint64_t id;
	char host[FSNP_ADMIN_HOST_MAX]; /* without brackets */
	uint16_t port;
};

/* The `args` of an admin body, each a binary (or an integer, rendered in
 * decimal): at most FSNP_ADMIN_ARGS_MAX, views into the body except for
 * integers (kept in `num`). */
struct fsnp_admin_args {
	uint32_t n;
	struct fsnp_bytes v[FSNP_ADMIN_ARGS_MAX];
	char num[FSNP_ADMIN_ARGS_MAX][24];
};

/* `body`'s "args" (absent = none) into `out`. Non-zero with the field
 * named in `err` when it is not a list of binaries or integers, or too
 * long. */
int fsnp_admin_args_from_body(const struct fsnp_val *body,
                              struct fsnp_admin_args *out, char *err,
                              size_t errlen);
/* The same from a list value (COMMAND_EXEC's arguments). */
int fsnp_admin_args_from_list(const struct fsnp_val *list,
                              struct fsnp_admin_args *out, char *err,
                              size_t errlen);

/* "ID@HOST:PORT": non-zero with the reason in `err`. */
int fsnp_admin_parse_node(const void *p, size_t len,
                          struct fsnp_admin_node *out, char *err,
                          size_t errlen);

/* A decimal u64 (no sign, no spaces): 0 or -1. */
int fsnp_admin_parse_u64(const void *p, size_t len, uint64_t *out);

/* Case-insensitive comparison of an argument with a word. */
int fsnp_admin_word_eq(struct fsnp_bytes b, const char *word);

#endif

/* FSNP commands: the command table (opcodes and COMMAND_EXEC names) and the
 * translation of a request into store commands (store/command.h), with no
 * I/O: a typed body, COMMAND_EXEC arguments or a compact body become a
 * `struct fsnp_plan`, one encoded store command per Raft group it touches.
 *
 * Routing: every key goes to group 1 + fsnp_slot_shard(slot, S) (as
 * shards_group_of_slot). DEL and MGET fan out per group; MSET must stay in
 * one slot (CROSSSLOT, before anything is proposed).
 *
 * Errors carry the FSNP status and the reference server's message; a field
 * validation failure is status 6 (bad_request), except GET's key (1) as in
 * the reference. Ownership: a plan owns its parts and their encodings; the
 * request it was parsed from may be freed right after parsing. */
#ifndef LS_NODE_FSNP_CMD_H
#define LS_NODE_FSNP_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/command.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_value.h"

/* What a command is, for dispatch. */
enum fsnp_cmd_kind {
	FSNP_CMD_KV,      /* a store command (this module plans it) */
	FSNP_CMD_CONTROL, /* answered by the connection (PING, CLIENT ...) */
	FSNP_CMD_FLOW,    /* FerricFlow: not in this build */
	FSNP_CMD_ADMIN,   /* cluster administration (fsnp_admin.c) */
};

struct fsnp_cmd_info {
	const char *name; /* COMMAND_EXEC name, upper case */
	uint16_t opcode;  /* its opcode; 0 when it has none (HDEL, ECHO) */
	enum fsnp_cmd_kind kind;
	uint8_t store_op; /* FSNP_CMD_KV: enum store_op */
};

/* By COMMAND_EXEC name (ASCII case-insensitive; "CLIENT.INFO" and the
 * opcode table's names included), or NULL. */
const struct fsnp_cmd_info *fsnp_cmd_by_name(const void *name, size_t len);
/* By opcode, or NULL for opcodes that are not commands (EVENT, GOAWAY,
 * unknown ones). */
const struct fsnp_cmd_info *fsnp_cmd_by_opcode(uint16_t opcode);
/* Every command, for listings. */
size_t fsnp_cmd_count(void);
const struct fsnp_cmd_info *fsnp_cmd_at(size_t index);

#define FSNP_CMD_MSG_MAX 256

struct fsnp_cmd_err {
	uint16_t status;  /* enum fsnp_status */
	const char *code; /* static: "bad_request", "error", ... */
	char message[FSNP_CMD_MSG_MAX];
};

/* How the results of a plan's parts become one reply. */
enum fsnp_merge {
	FSNP_MERGE_ONE,    /* one part: its result is the reply */
	FSNP_MERGE_SUM,    /* DEL: the sum of the parts' integers */
	FSNP_MERGE_ORDER,  /* MGET: the parts' lists, back in request order */
	FSNP_MERGE_CONCAT, /* KEYS: the parts' lists one after another */
};

/* A single-part plan's encoded command up to this size lives in the plan
 * itself (a GET or SET with key and value of up to ~150 bytes). */
#define FSNP_PLAN_INLINE_CMD 192

struct fsnp_part {
	uint32_t group;
	bool read;    /* shards_read_cmd, else shards_propose */
	uint8_t *cmd; /* encoded store command (owned, or the plan's
	                 one_cmd) */
	size_t len;
	uint32_t *pos; /* FSNP_MERGE_ORDER: request position of each item
	                  (owned) */
	uint32_t n;
};

struct fsnp_plan {
	uint16_t opcode; /* the FSNP opcode the reply answers for */
	uint8_t op;      /* enum store_op */
	enum fsnp_merge merge;
	uint32_t n_items;        /* FSNP_MERGE_ORDER: reply list length */
	unsigned slot;           /* slot of the (first) key */
	struct fsnp_part *parts; /* owned, or &one */
	uint32_t n_parts;
	/* A single-part plan's part (most requests): no allocation. The
	 * plan must not be copied while parts points here. */
	struct fsnp_part one;
	/* A one-key command's key (GET, SET ...; NULL otherwise), borrowed
	 * from the request being parsed: valid only while its message is,
	 * for the caller to act on right after parsing (prefetching). */
	const uint8_t *key;
	size_t key_len;
	/* The command's name when several share its store op (INCR and
	 * DECRBY are INCRBY; static), for the ACL check; NULL otherwise. */
	const char *name;
	/* COMMAND_EXEC ACL: the subcommand and user name (fsnp_acl.c). */
	uint8_t acl_sub;
	char acl_name[65];
	/* `one`'s encoded command when it fits: no allocation either (the
	 * same rule: no copy while one.cmd points here). Last, so that
	 * resetting a plan leaves these bytes alone. */
	uint8_t one_cmd[FSNP_PLAN_INLINE_CMD];
};

struct scan_cursors;

struct fsnp_cmd_ctx {
	unsigned data_groups;  /* S */
	uint32_t max_items;    /* keys/values in one command */
	const char *foc_token; /* FETCH_OR_COMPUTE lease token (NUL-ended) */
	/* The node's SCAN resume keys (node/scan_cursors.h), or NULL: SCAN
	 * then answers plain cursors only. A reference cursor's key is
	 * looked up while planning; the caller gives the page's result to
	 * scan_cursors_result before answering. */
	struct scan_cursors *scan_cursors;
};

void fsnp_plan_free(struct fsnp_plan *p);

/* A KV opcode's typed body (a map; anything else counts as {}). */
int fsnp_cmd_parse_body(uint16_t opcode, const struct fsnp_val *body,
                        const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                        struct fsnp_cmd_err *err);

/* COMMAND_EXEC of a KV command: `info` from fsnp_cmd_by_name, `args` the
 * array of arguments after the name (binaries; integers and floats stand
 * for their decimal text). */
int fsnp_cmd_parse_args(const struct fsnp_cmd_info *info,
                        const struct fsnp_val *args,
                        const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                        struct fsnp_cmd_err *err);

/* GET's common body, exactly {"key": <binary>} as raw bytes, planned
 * without decoding it as a value: 0 (planned, as fsnp_cmd_parse_body would
 * plan it), 1 (any other body: not handled, `out` untouched; use the
 * general path), -1 (error in `err`). */
int fsnp_cmd_parse_get_fast(const uint8_t *body, size_t len,
                            const struct fsnp_cmd_ctx *ctx,
                            struct fsnp_plan *out, struct fsnp_cmd_err *err);

/* The same for SET's common body, exactly {"key": <binary>, "value":
 * <binary>} in that order (no options). */
int fsnp_cmd_parse_set_fast(const uint8_t *body, size_t len,
                            const struct fsnp_cmd_ctx *ctx,
                            struct fsnp_plan *out, struct fsnp_cmd_err *err);

/* COMMAND_EXEC SET key value and GET key with their arguments as byte
 * strings (`args`, n of them, after the name): planned as
 * fsnp_cmd_parse_args plans them, without an argument array to build and
 * decode (the RESP listener's most frequent commands). 0 (planned), 1 (any
 * other command or shape: not handled, `out` untouched; use
 * fsnp_cmd_parse_args), -1 (error in `err`). */
int fsnp_cmd_parse_args_fast(const struct fsnp_cmd_info *info,
                             const struct fsnp_bytes *args, uint32_t n,
                             const struct fsnp_cmd_ctx *ctx,
                             struct fsnp_plan *out, struct fsnp_cmd_err *err);

/* A compact MGET or MSET body (flag 0x02). */
int fsnp_cmd_parse_compact(const struct fsnp_compact_req *req,
                           const struct fsnp_cmd_ctx *ctx,
                           struct fsnp_plan *out, struct fsnp_cmd_err *err);

/* Plans an already filled store command (its op, key and items); used
 * for the items of a compact PIPELINE. */
int fsnp_cmd_plan_store(uint16_t opcode, const struct store_cmd *c,
                        const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                        struct fsnp_cmd_err *err);

/* deadline_ms of a body: 0 when absent or 0; -1 (with `err`, status 6
 * invalid_deadline) when it is not a non-negative integer. */
int fsnp_cmd_deadline(const struct fsnp_val *body, uint64_t *deadline_ms,
                      struct fsnp_cmd_err *err);

/* Fills `err`. */
void fsnp_cmd_err_set(struct fsnp_cmd_err *err, uint16_t status,
                      const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif

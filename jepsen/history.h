/* Operation histories for the checkers: parsers for the three input
 * formats and the in-memory form every checker reads.
 *
 * A history is a sequence of events in real-time order (file order is
 * authoritative). Each event is an invocation or a completion (ok, fail,
 * info) of one operation by one process; a completion belongs to the
 * pending invocation of the same process. After parsing, every invocation
 * is paired into a struct jepsen_op; an invocation that never completes is
 * treated as info (indeterminate).
 *
 * Formats (grammar in jepsen/README.md):
 *   JEPSEN_FORMAT_ETCD_LOG  Jepsen/Knossos etcd test logs
 *                           ("INFO  jepsen.util - 3  :ok  :cas  [1 2]").
 *   JEPSEN_FORMAT_KV_EDN    one EDN map per operation event
 *                           ({:process 0, :type :ok, :f :get, ...}).
 *   JEPSEN_FORMAT_LINES     Lodestone's line format written by our
 *                           workload clients ("<time> <process> <type> <f>
 *                           <key> <value>...").
 *
 * Keys and values are interned strings (jepsen/intern.h); JEPSEN_NIL is
 * nil / absent. Integers are stored in canonical decimal form. The history
 * owns all its memory. */
#ifndef JEPSEN_HISTORY_H
#define JEPSEN_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "jepsen/intern.h"

enum jepsen_format {
	JEPSEN_FORMAT_ETCD_LOG,
	JEPSEN_FORMAT_KV_EDN,
	JEPSEN_FORMAT_LINES,
};

enum jepsen_type {
	JEPSEN_INVOKE,
	JEPSEN_OK,
	JEPSEN_FAIL, /* the operation certainly did not take effect */
	JEPSEN_INFO, /* indeterminate: it may take effect later, or never */
};

enum jepsen_f {
	JEPSEN_F_READ,    /* register read; nil = absent */
	JEPSEN_F_GET,     /* kv read that reports an absent key as "" */
	JEPSEN_F_WRITE,   /* also kv "put" */
	JEPSEN_F_CAS,     /* [expected new] */
	JEPSEN_F_APPEND,  /* kv string append, or stream append */
	JEPSEN_F_ADD,     /* set add, counter add */
	JEPSEN_F_PUBLISH, /* queue publish */
	JEPSEN_F_CONSUME, /* queue receive */
	JEPSEN_F_ACK,
	JEPSEN_F_NACK,
	JEPSEN_F_SEND,     /* exactly-once send */
	JEPSEN_F_RECV,     /* exactly-once receive */
	JEPSEN_F_CREATE,   /* flow create */
	JEPSEN_F_CLAIM,    /* flow claimed, with its fencing token */
	JEPSEN_F_COMPLETE, /* flow complete, retry, extend lease */
	JEPSEN_F_RETRY,
	JEPSEN_F_EXTEND,
	JEPSEN_F_SCHEDULE, /* final read of a flow schedule */
	JEPSEN_F_TARGET,   /* a schedule's target flow, found at the end */
	JEPSEN_F_COUNT_,
};

#define JEPSEN_NONE UINT32_MAX

struct jepsen_event {
	int64_t time; /* as given (lines, EDN :time) or the position */
	int64_t process;
	uint32_t line;   /* 1-based line in the input */
	uint32_t key;    /* interned; JEPSEN_NIL when the format has none */
	uint32_t values; /* index of the first value in history.values */
	uint32_t nvalues;
	uint8_t type; /* enum jepsen_type */
	uint8_t f;    /* enum jepsen_f */
};

/* One invocation and its completion. */
struct jepsen_op {
	int64_t process;
	uint32_t key;
	uint32_t invoke;   /* event index */
	uint32_t complete; /* event index, or JEPSEN_NONE if never completed */
	uint8_t type;      /* outcome: JEPSEN_OK, JEPSEN_FAIL or JEPSEN_INFO */
	uint8_t f;
};

struct jepsen_history {
	struct jepsen_event *events; /* file order */
	size_t n_events;
	size_t events_cap;
	uint32_t *values; /* interned value ids, referenced by events */
	size_t n_values;
	size_t values_cap;
	struct jepsen_op *ops; /* ordered by invocation */
	size_t n_ops;
	uint32_t *event_op; /* event index -> op index */
	struct jepsen_intern strings;
};

/* Longest token (string, keyword, value) a parser accepts. */
#define JEPSEN_HISTORY_MAX_TOKEN 65536

void jepsen_history_init(struct jepsen_history *h);
void jepsen_history_free(struct jepsen_history *h);

/* Parses `len` bytes in format `fmt` into the empty history `h` and pairs
 * the operations. Returns 0; -EINVAL for malformed input (with a message
 * naming the line in `err`); -ENOMEM or -E2BIG. On error `h` may hold a
 * partial history: free it. */
int jepsen_history_parse(struct jepsen_history *h, enum jepsen_format fmt,
                         const char *buf, size_t len, char *err, size_t errlen);

/* Reads the file at `path` and parses it as above. Returns -errno (with a
 * message) when the file cannot be read. */
int jepsen_history_load(struct jepsen_history *h, enum jepsen_format fmt,
                        const char *path, char *err, size_t errlen);

/* Format names as the CLI spells them: "etcd-log", "kv-edn", "lines".
 * Returns 0 and sets *fmt, or -EINVAL. */
int jepsen_history_format_parse(const char *name, enum jepsen_format *fmt);

const char *jepsen_history_type_name(enum jepsen_type t);
const char *jepsen_history_f_name(enum jepsen_f f);

/* The values an operation is judged by: the completion's values for an ok
 * operation (they carry the result), else the invocation's. */
const uint32_t *jepsen_history_op_values(const struct jepsen_history *h,
                                         const struct jepsen_op *op, size_t *n);

/* The text of an interned id ("nil" for JEPSEN_NIL). */
const char *jepsen_history_str(const struct jepsen_history *h, uint32_t id);

/* Line numbers of an op's invocation and completion (0 if none). */
uint32_t jepsen_history_invoke_line(const struct jepsen_history *h,
                                    const struct jepsen_op *op);
uint32_t jepsen_history_complete_line(const struct jepsen_history *h,
                                      const struct jepsen_op *op);

/* Sets *order to a new array (caller frees) of every op index sorted by
 * key, then by invocation. Returns 0 or -ENOMEM. */
int jepsen_history_ops_by_key(const struct jepsen_history *h, uint32_t **order);

/* Writes a one-line description of an op ("process 3 cas [1 2] ok,
 * lines 10-14") into buf. */
void jepsen_history_describe(const struct jepsen_history *h,
                             const struct jepsen_op *op, char *buf,
                             size_t buflen);

#endif

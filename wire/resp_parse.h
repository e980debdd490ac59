/* RESP requests (Redis serialization protocol, RESP2 and RESP3 alike):
 * the pure parser of one command at the head of a connection's query
 * buffer, either a multibulk array of bulk strings (`*N\r\n$L\r\n...`) or
 * an inline command (one line split on spaces, with Redis's double and
 * single quote rules). No I/O and no allocation: the caller owns the
 * argument array and the scratch space inline arguments are unquoted into.
 *
 * Bounds: the inline line and a multibulk count or bulk length line are at
 * most `max_inline` bytes; a command has at most `max_args` arguments and
 * each bulk at most `max_bulk` bytes. What breaks them is a protocol error
 * with Redis's text; Redis closes the connection after answering it. */
#ifndef LS_WIRE_RESP_PARSE_H
#define LS_WIRE_RESP_PARSE_H

#include <stddef.h>
#include <stdint.h>

struct resp_limits {
	size_t max_inline; /* inline line, count and length lines */
	uint32_t max_args;
	uint64_t max_bulk;
};

struct resp_arg {
	const uint8_t *p; /* into the buffer, or into the scratch space */
	size_t len;
};

struct resp_cmd {
	struct resp_arg *argv; /* caller's, argv_cap entries */
	uint32_t argv_cap;
	uint8_t *scratch;   /* caller's, scratch_cap bytes (inline) */
	size_t scratch_cap; /* at least max_inline */
	uint32_t argc;      /* out */
	uint32_t need_args; /* out, RESP_PARSE_GROW: argv entries needed */
	size_t consumed;    /* out, RESP_PARSE_OK: bytes of the command */
	int inline_cmd;     /* out: 1 when it was an inline command */
};

enum {
	RESP_PARSE_OK = 0,   /* one command (argc may be 0: skip it) */
	RESP_PARSE_MORE = 1, /* incomplete: read more */
	RESP_PARSE_GROW = 2, /* argv too small: need_args entries */
	RESP_PARSE_ERR = -1, /* protocol error, text in err */
};

#define RESP_ERR_MAX 128

/* Parses the command at the head of buf[0 .. len-1]. */
int resp_parse(const uint8_t *buf, size_t len, const struct resp_limits *lim,
               struct resp_cmd *cmd, char *err, size_t errlen);

#endif

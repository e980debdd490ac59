/* Fuzz target: the RESP request parser (wire/resp_parse.h), inline and
 * multibulk.
 *
 * Input: a control byte (the limits: inline bound, argument and bulk
 * bounds), then a byte stream. The stream is parsed command after command
 * from an exactly-sized copy of the unconsumed bytes (a read past the end
 * is an ASan report), growing the argument array as asked; every command
 * must consume bytes, its arguments must lie inside the input or the
 * scratch space, and every shorter prefix of a multibulk command must ask
 * for more bytes (never yield another command). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/resp_parse.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool inside(const uint8_t *p, size_t n, const uint8_t *base, size_t len)
{
	return p >= base && p + n <= base + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct resp_limits lim;
	struct resp_arg *argv = NULL;
	uint32_t cap = 1;
	uint8_t *scratch;
	char err[RESP_ERR_MAX];
	size_t off = 0;
	unsigned cmds = 0;

	if (size < 1) {
		return 0;
	}
	lim.max_inline = 16 + (size_t)(data[0] & 0x0f) * 64;
	lim.max_args = 1 + (uint32_t)((data[0] >> 4) & 0x03) * 50;
	lim.max_bulk = (data[0] & 0x40) ? 8 : 4096;
	data++;
	size--;
	scratch = malloc(lim.max_inline);
	argv = malloc(cap * sizeof *argv);
	CHECK(scratch != NULL && argv != NULL);
	while (off < size && cmds < 10000) {
		size_t left = size - off;
		uint8_t *copy = malloc(left);
		struct resp_cmd c = {.argv = argv,
		                     .argv_cap = cap,
		                     .scratch = scratch,
		                     .scratch_cap = lim.max_inline};
		int rc;
		CHECK(copy != NULL);
		memcpy(copy, data + off, left);
		rc = resp_parse(copy, left, &lim, &c, err, sizeof err);
		if (rc == RESP_PARSE_GROW) {
			CHECK(c.need_args > cap && c.need_args <= lim.max_args);
			cap = c.need_args;
			argv = realloc(argv, cap * sizeof *argv);
			CHECK(argv != NULL);
			free(copy);
			continue;
		}
		if (rc != RESP_PARSE_OK) {
			CHECK(rc == RESP_PARSE_MORE || rc == RESP_PARSE_ERR);
			CHECK(rc != RESP_PARSE_ERR || err[0] == 'E');
			free(copy);
			break;
		}
		CHECK(c.consumed > 0 && c.consumed <= left);
		CHECK(c.argc <= lim.max_args);
		for (uint32_t i = 0; i < c.argc; i++) {
			CHECK(inside(c.argv[i].p, c.argv[i].len, copy,
			             c.consumed) ||
			      inside(c.argv[i].p, c.argv[i].len, scratch,
			             lim.max_inline));
			CHECK(c.inline_cmd || c.argv[i].len <= lim.max_bulk);
		}
		if (!c.inline_cmd && c.consumed <= 4096) {
			/* A shorter prefix is never a whole command. */
			for (size_t n = 1; n < c.consumed; n += 1 + n / 8) {
				struct resp_cmd p = {.argv = argv,
				                     .argv_cap = cap,
				                     .scratch = scratch,
				                     .scratch_cap =
				                         lim.max_inline};
				int r2 = resp_parse(copy, n, &lim, &p, err,
				                    sizeof err);
				CHECK(r2 != RESP_PARSE_OK || p.consumed <= n);
			}
		}
		free(copy);
		off += c.consumed;
		cmds++;
	}
	free(argv);
	free(scratch);
	return 0;
}

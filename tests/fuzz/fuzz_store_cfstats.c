/* Fuzz target for the RocksDB statistics text parser (store/cfstats.c):
 * whatever the input, parsing must not crash or read past it, and must
 * give the same counts twice. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/cfstats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_cfstats a, b;
	/* A copy of its exact size, so reading past it is caught. */
	char *copy = malloc(size > 0 ? size : 1);
	if (copy == NULL) {
		return 0;
	}
	memcpy(copy, data, size);
	store_cfstats_parse(copy, size, &a);
	store_cfstats_parse(copy, size, &b);
	if (memcmp(&a, &b, sizeof a) != 0) {
		abort();
	}
	free(copy);
	return 0;
}

/* Fuzz target for the store command and result decoders: whatever the
 * input, decoding must not crash; a decoded command must re-encode to the
 * same bytes (the encoding is canonical) and its list must walk to its
 * count; an accepted result must walk to its end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/command.h"
#include "store/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_cmd c;
	struct store_result r;
	struct store_value v;
	const char *err;

	if (store_cmd_decode(data, size, &c, &err) == 0) {
		struct store_list_iter it;
		struct store_slice s;
		uint32_t n = 0;
		uint8_t *enc;
		size_t len;

		if (store_cmd_encode(&c, &enc, &len, &err) != 0) {
			abort();
		}
		if (len != size || memcmp(enc, data, size) != 0) {
			abort();
		}
		free(enc);
		store_list_iter_init(&it, &c.items);
		while (store_list_next(&it, &s)) {
			if (s.p < data || s.p + s.len > data + size) {
				abort();
			}
			n++;
		}
		if (n != c.items.n) {
			abort();
		}
		(void)store_op_is_read(c.op);
		(void)store_op_name(c.op);
	}
	if (store_result_open(data, size, &r) == 0) {
		if (!store_result_next(&r, &v)) {
			abort();
		}
		store_result_skip(&r, &v);
		if (r.off != size) {
			abort();
		}
	}
	return 0;
}

/* Fuzz the Felix JSON message decoder. Whatever decodes must re-encode,
 * and decoding that encoding must give an equal message that encodes to the
 * same bytes: decode -> encode -> decode is stable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/felix_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct felix_msg m, m2;
	struct wbuf b1, b2;
	char err[256];
	int rc;

	rc = felix_msg_decode(data, size, &m, err, sizeof err);
	if (rc != 0) {
		check(rc == FELIX_MSG_EINVAL || rc == FELIX_MSG_EUNKNOWN_TYPE);
		check(m.type == FELIX_MSG_NONE);
		check(strlen(err) > 0);
		return 0;
	}
	check(felix_msg_type_name(m.type) != NULL);
	wbuf_init(&b1);
	wbuf_init(&b2);
	check(felix_msg_encode(&m, &b1) == 0);
	rc = felix_msg_decode(b1.data, b1.len, &m2, err, sizeof err);
	check(rc == 0);
	check(felix_msg_equal(&m, &m2));
	check(felix_msg_encode(&m2, &b2) == 0);
	check(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
	wbuf_reset(&b2);
	check(felix_msg_encode_frame(&m2, &b2) == 0);
	check(b2.len == b1.len + 12 &&
	      memcmp(b2.data + 12, b1.data, b1.len) == 0);
	felix_msg_free(&m2);
	felix_msg_free(&m);
	wbuf_free(&b1);
	wbuf_free(&b2);
	return 0;
}

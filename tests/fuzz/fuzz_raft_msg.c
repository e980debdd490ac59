/* Fuzz target: every decoder of the node transport (raft/msg_codec.h).
 * The first byte picks the message kind, the rest is its payload. A raft
 * message that decodes must re-encode to the same bytes; every other
 * message that decodes must re-encode to the same bytes too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "raft/msg_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	if (alen != blen || (alen > 0 && memcmp(a, b, alen) != 0)) {
		abort();
	}
}

static void raft_msg(const uint8_t *p, size_t len)
{
	struct raft_message m;
	uint32_t group;
	uint8_t *again;
	size_t n;

	if (msg_raft_decode(p, len, &group, &m) != 0) {
		return;
	}
	n = msg_raft_size(&m);
	again = malloc(n > 0 ? n : 1);
	if (again != NULL) {
		msg_raft_write(again, group, &m);
		same(p, len, again, n);
		free(again);
	}
	msg_raft_free(&m);
}

/* The in-place decoder: the same message as msg_raft_decode, the owner
 * block freed exactly once whichever of the two frees it. */
static void raft_msg_take(const uint8_t *p, size_t len)
{
	struct raft_message m;
	uint32_t group;
	uint8_t *owner = raft_malloc(len > 0 ? len : 1), *again;
	bool taken;
	size_t n;

	if (owner == NULL) {
		return;
	}
	memcpy(owner, p, len);
	if (msg_raft_decode_take(owner, owner, len, &group, &m, &taken) != 0) {
		if (taken) {
			abort();
		}
		raft_free(owner);
		return;
	}
	n = msg_raft_size(&m);
	again = malloc(n > 0 ? n : 1);
	if (again != NULL) {
		msg_raft_write(again, group, &m);
		same(p, len, again, n);
		free(again);
	}
	msg_raft_free(&m);
	if (!taken) {
		raft_free(owner);
	}
}

static void xfer_meta(const uint8_t *p, size_t len)
{
	struct msg_xfer_meta m;
	struct msg_xfer_file *files;
	size_t off = 0;
	uint8_t *again;
	uint32_t i;

	if (msg_xfer_meta_decode(p, len, &m) != 0) {
		return;
	}
	files = calloc(m.n_files > 0 ? m.n_files : 1, sizeof *files);
	if (files == NULL) {
		return;
	}
	for (i = 0; i < m.n_files; i++) {
		msg_xfer_meta_file(&m, &off, &files[i]);
	}
	if (off != m.files_len) {
		abort();
	}
	m.files = files;
	again = malloc(msg_xfer_meta_size(&m));
	if (again != NULL) {
		msg_xfer_meta_write(again, &m);
		same(p, len, again, msg_xfer_meta_size(&m));
		free(again);
	}
	free(files);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t len = size > 0 ? size - 1 : 0;
	uint8_t buf[MSG_FRAME_HEADER];
	uint8_t *again = NULL;

	if (size == 0) {
		return 0;
	}
	switch (data[0] % 15) {
	case 0: {
		struct msg_hello h;
		if (msg_hello_decode(p, len, &h) == 0) {
			again = malloc(msg_hello_size(&h));
			msg_hello_write(again, &h);
			same(p, len, again, msg_hello_size(&h));
		}
		break;
	}
	case 13: {
		struct msg_join j;
		if (msg_join_decode(p, len, &j) == 0) {
			again = malloc(msg_join_size(&j));
			msg_join_write(again, &j);
			same(p, len, again, msg_join_size(&j));
		}
		break;
	}
	case 14: {
		struct msg_join_resp j;
		if (msg_join_resp_decode(p, len, &j) == 0) {
			again = malloc(msg_join_resp_size(&j));
			msg_join_resp_write(again, &j);
			same(p, len, again, msg_join_resp_size(&j));
		}
		break;
	}
	case 1: {
		struct msg_welcome w;
		if (msg_welcome_decode(p, len, &w) == 0) {
			again = malloc(msg_welcome_size(&w));
			msg_welcome_write(again, &w);
			same(p, len, again, msg_welcome_size(&w));
		}
		break;
	}
	case 2:
		raft_msg(p, len);
		raft_msg_take(p, len);
		break;
	case 3: {
		uint32_t n;
		if (msg_routes_decode(p, len, &n) == 0) {
			for (uint32_t i = 0; i < n; i++) {
				struct msg_route r;
				msg_routes_get(p, i, &r);
			}
		}
		break;
	}
	case 4: {
		struct msg_fwd_req r;
		if (msg_fwd_req_decode(p, len, &r) == 0) {
			again = malloc(msg_fwd_req_size(&r));
			msg_fwd_req_write(again, &r);
			same(p, len, again, msg_fwd_req_size(&r));
		}
		break;
	}
	case 5: {
		struct msg_fwd_resp r;
		if (msg_fwd_resp_decode(p, len, &r) == 0) {
			again = malloc(msg_fwd_resp_size(&r));
			msg_fwd_resp_write(again, &r);
			same(p, len, again, msg_fwd_resp_size(&r));
		}
		break;
	}
	case 6: {
		struct msg_xfer_req r;
		if (msg_xfer_req_decode(p, len, &r) == 0) {
			again = malloc(msg_xfer_req_size());
			msg_xfer_req_write(again, &r);
			same(p, len, again, msg_xfer_req_size());
		}
		break;
	}
	case 7:
		xfer_meta(p, len);
		break;
	case 8: {
		struct msg_xfer_get g;
		msg_xfer_get_decode(p, len, &g);
		break;
	}
	case 9: {
		struct msg_xfer_data d;
		msg_xfer_data_decode(p, len, &d);
		break;
	}
	case 10: {
		uint64_t id;
		msg_xfer_end_decode(p, len, &id);
		break;
	}
	case 12: {
		/* READ_CHECK and QUIESCE share a size: both decoders. */
		struct msg_read_check c;
		struct msg_quiesce q;
		if (msg_read_check_decode(p, len, &c) == 0) {
			again = malloc(msg_read_check_size());
			msg_read_check_write(again, &c);
			same(p, len, again, msg_read_check_size());
			free(again);
			again = NULL;
		}
		if (msg_quiesce_decode(p, len, &q) == 0) {
			again = malloc(msg_quiesce_size());
			msg_quiesce_write(again, &q);
			same(p, len, again, msg_quiesce_size());
		}
		break;
	}
	default: {
		uint8_t kind;
		uint32_t plen;
		if (len >= MSG_FRAME_HEADER) {
			memcpy(buf, p, MSG_FRAME_HEADER);
			msg_frame_parse(buf, MSG_MAX_PAYLOAD, &kind, &plen);
		}
		break;
	}
	}
	free(again);
	return 0;
}

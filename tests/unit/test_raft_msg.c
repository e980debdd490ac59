/* The node transport's wire encoding (raft/msg_codec.h): round trips of
 * every libraft message type and every other message, truncation and
 * corruption refused, plus the placement rules (raft/placement.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/msg_codec.h"
#include "raft/placement.h"

static uint8_t *encode(uint32_t group, const struct raft_message *m,
                       size_t *len)
{
	uint8_t *b;
	*len = msg_raft_size(m);
	assert_true(*len > 0);
	b = malloc(*len);
	msg_raft_write(b, group, m);
	return b;
}

/* Decodes `b`, checks every shorter prefix fails, re-encodes and checks
 * the bytes are identical. Returns the decoded message (caller frees). */
static void round_trip(const uint8_t *b, size_t len, uint32_t group,
                       struct raft_message *out)
{
	uint32_t g = 0;
	size_t k;
	uint8_t *again;
	size_t alen;

	for (k = 0; k < len; k++) {
		struct raft_message m;
		uint32_t gg;
		assert_int_not_equal(msg_raft_decode(b, k, &gg, &m), 0);
	}
	assert_int_equal(msg_raft_decode(b, len, &g, out), 0);
	assert_int_equal(g, group);
	assert_int_equal(out->server_id, 0);
	assert_null(out->server_address);
	again = encode(group, out, &alen);
	assert_int_equal(alen, len);
	assert_memory_equal(again, b, len);
	free(again);
}

static void test_request_vote(void **state)
{
	struct raft_message m, d;
	uint8_t *b;
	size_t len;
	(void)state;

	memset(&m, 0, sizeof m);
	m.type = RAFT_IO_REQUEST_VOTE;
	m.server_id = 9;
	m.request_vote.term = 7;
	m.request_vote.candidate_id = 3;
	m.request_vote.last_log_index = 1ull << 40;
	m.request_vote.last_log_term = 6;
	m.request_vote.disrupt_leader = true;
	m.request_vote.pre_vote = true;
	b = encode(4242, &m, &len);
	round_trip(b, len, 4242, &d);
	assert_int_equal(d.type, RAFT_IO_REQUEST_VOTE);
	assert_int_equal(d.request_vote.term, 7);
	assert_int_equal(d.request_vote.candidate_id, 3);
	assert_int_equal(d.request_vote.last_log_index, 1ull << 40);
	assert_int_equal(d.request_vote.last_log_term, 6);
	assert_true(d.request_vote.disrupt_leader);
	assert_true(d.request_vote.pre_vote);
	/* Unknown flag bits are refused. */
	b[len - 1] |= 0x80;
	{
		uint32_t g;
		assert_int_equal(msg_raft_decode(b, len, &g, &d),
		                 MSG_EMALFORMED);
	}
	free(b);
}

static void test_request_vote_result(void **state)
{
	struct raft_message m, d;
	uint8_t *b;
	size_t len;
	raft_tribool v[] = {raft_tribool_unknown, raft_tribool_true,
	                    raft_tribool_false};
	(void)state;

	for (int i = 0; i < 3; i++) {
		memset(&m, 0, sizeof m);
		m.type = RAFT_IO_REQUEST_VOTE_RESULT;
		m.request_vote_result.term = 11 + (uint64_t)i;
		m.request_vote_result.vote_granted = i == 1;
		m.request_vote_result.pre_vote = v[i];
		b = encode(0, &m, &len);
		round_trip(b, len, 0, &d);
		assert_int_equal(d.request_vote_result.term, 11 + i);
		assert_int_equal(d.request_vote_result.vote_granted, i == 1);
		assert_int_equal(d.request_vote_result.pre_vote, v[i]);
		b[len - 1] = 3; /* not a tribool */
		{
			uint32_t g;
			assert_int_not_equal(msg_raft_decode(b, len, &g, &d),
			                     0);
		}
		free(b);
	}
}

static void test_append_entries(void **state)
{
	struct raft_message m, d;
	struct raft_entry e[3];
	uint8_t p1[5] = {1, 2, 3, 4, 5}, p3[300];
	uint8_t *b;
	size_t len;
	(void)state;

	memset(p3, 0xAB, sizeof p3);
	memset(e, 0, sizeof e);
	e[0].term = 2;
	e[0].type = RAFT_COMMAND;
	e[0].buf.base = p1;
	e[0].buf.len = sizeof p1;
	e[1].term = 3;
	e[1].type = RAFT_BARRIER;
	e[1].buf.base = NULL;
	e[1].buf.len = 0;
	e[2].term = 3;
	e[2].type = RAFT_CHANGE;
	e[2].buf.base = p3;
	e[2].buf.len = sizeof p3;
	memset(&m, 0, sizeof m);
	m.type = RAFT_IO_APPEND_ENTRIES;
	m.append_entries.term = 3;
	m.append_entries.prev_log_index = 10;
	m.append_entries.prev_log_term = 2;
	m.append_entries.leader_commit = 9;
	m.append_entries.entries = e;
	m.append_entries.n_entries = 3;
	b = encode(UINT32_MAX, &m, &len);
	round_trip(b, len, UINT32_MAX, &d);
	assert_int_equal(d.append_entries.term, 3);
	assert_int_equal(d.append_entries.prev_log_index, 10);
	assert_int_equal(d.append_entries.prev_log_term, 2);
	assert_int_equal(d.append_entries.leader_commit, 9);
	assert_int_equal(d.append_entries.n_entries, 3);
	for (int i = 0; i < 3; i++) {
		struct raft_entry *x = &d.append_entries.entries[i];
		assert_int_equal(x->term, e[i].term);
		assert_int_equal(x->type, e[i].type);
		assert_int_equal(x->buf.len, e[i].buf.len);
		if (x->buf.len > 0) {
			assert_memory_equal(x->buf.base, e[i].buf.base,
			                    x->buf.len);
		}
		/* One batch block, as rio_store_deliver wants. */
		assert_ptr_equal(x->batch, d.append_entries.entries[0].batch);
	}
	msg_raft_free(&d);
	/* Decoded in place: the entries point into the owner's block, which
	 * is their batch (msg_raft_free, like libraft, frees it). */
	{
		uint8_t *owner = raft_malloc(8 + len);
		uint32_t g;
		bool taken = false;
		assert_non_null(owner);
		memcpy(owner + 8, b, len);
		assert_int_equal(
		    msg_raft_decode_take(owner, owner + 8, len, &g, &d, &taken),
		    0);
		assert_true(taken);
		assert_int_equal(g, UINT32_MAX);
		assert_int_equal(d.append_entries.n_entries, 3);
		for (int i = 0; i < 3; i++) {
			struct raft_entry *x = &d.append_entries.entries[i];
			assert_ptr_equal(x->batch, owner);
			assert_true((uint8_t *)x->buf.base >= owner + 8 &&
			            (uint8_t *)x->buf.base + x->buf.len <=
			                owner + 8 + len);
			assert_int_equal(x->buf.len, e[i].buf.len);
			if (x->buf.len > 0) {
				assert_memory_equal(x->buf.base, e[i].buf.base,
				                    x->buf.len);
			}
		}
		msg_raft_free(&d);
		/* Refused input leaves the owner with the caller. */
		owner = raft_malloc(len);
		assert_non_null(owner);
		memcpy(owner, b, len - 1);
		assert_int_equal(
		    msg_raft_decode_take(owner, owner, len - 1, &g, &d, &taken),
		    MSG_EMALFORMED);
		assert_false(taken);
		raft_free(owner);
	}
	/* A bad entry type is refused. */
	b[4 + 1 + 32 + 4 + 8] = 9;
	{
		uint32_t g;
		assert_int_equal(msg_raft_decode(b, len, &g, &d),
		                 MSG_EMALFORMED);
	}
	free(b);

	/* A heartbeat: no entries. */
	m.append_entries.n_entries = 0;
	m.append_entries.entries = NULL;
	b = encode(1, &m, &len);
	round_trip(b, len, 1, &d);
	assert_int_equal(d.append_entries.n_entries, 0);
	assert_null(d.append_entries.entries);
	msg_raft_free(&d);
	/* Nothing to take in place: the owner stays the caller's. */
	{
		uint8_t *owner = raft_malloc(len);
		uint32_t g;
		bool taken = true;
		assert_non_null(owner);
		memcpy(owner, b, len);
		assert_int_equal(
		    msg_raft_decode_take(owner, owner, len, &g, &d, &taken), 0);
		assert_false(taken);
		msg_raft_free(&d);
		raft_free(owner);
	}
	/* Trailing garbage is refused. */
	{
		uint8_t *x = malloc(len + 1);
		uint32_t g;
		memcpy(x, b, len);
		x[len] = 0;
		assert_int_equal(msg_raft_decode(x, len + 1, &g, &d),
		                 MSG_EMALFORMED);
		free(x);
	}
	free(b);
}

static void test_append_entries_result(void **state)
{
	struct raft_message m, d;
	uint8_t *b;
	size_t len;
	(void)state;

	memset(&m, 0, sizeof m);
	m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
	m.append_entries_result.term = 5;
	m.append_entries_result.rejected = 17;
	m.append_entries_result.last_log_index = 16;
	b = encode(2, &m, &len);
	round_trip(b, len, 2, &d);
	assert_int_equal(d.append_entries_result.term, 5);
	assert_int_equal(d.append_entries_result.rejected, 17);
	assert_int_equal(d.append_entries_result.last_log_index, 16);
	free(b);
}

static void test_install_snapshot(void **state)
{
	struct raft_message m, d;
	uint8_t data[32];
	uint8_t *b;
	size_t len;
	(void)state;

	for (int i = 0; i < 32; i++) {
		data[i] = (uint8_t)i;
	}
	memset(&m, 0, sizeof m);
	m.type = RAFT_IO_INSTALL_SNAPSHOT;
	m.install_snapshot.term = 4;
	m.install_snapshot.last_index = 1000;
	m.install_snapshot.last_term = 3;
	m.install_snapshot.conf_index = 1;
	raft_configuration_init(&m.install_snapshot.conf);
	assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 1,
	                                        "127.0.0.1:7001", RAFT_VOTER),
	                 0);
	assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 2,
	                                        "[::1]:7002", RAFT_STANDBY),
	                 0);
	assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 3,
	                                        "host3:7003", RAFT_SPARE),
	                 0);
	m.install_snapshot.data.base = data;
	m.install_snapshot.data.len = sizeof data;
	b = encode(77, &m, &len);
	round_trip(b, len, 77, &d);
	assert_int_equal(d.install_snapshot.term, 4);
	assert_int_equal(d.install_snapshot.last_index, 1000);
	assert_int_equal(d.install_snapshot.last_term, 3);
	assert_int_equal(d.install_snapshot.conf_index, 1);
	assert_int_equal(d.install_snapshot.conf.n, 3);
	assert_int_equal(d.install_snapshot.conf.servers[1].id, 2);
	assert_string_equal(d.install_snapshot.conf.servers[1].address,
	                    "[::1]:7002");
	assert_int_equal(d.install_snapshot.conf.servers[1].role, RAFT_STANDBY);
	assert_int_equal(d.install_snapshot.conf.servers[2].role, RAFT_SPARE);
	assert_int_equal(d.install_snapshot.data.len, sizeof data);
	assert_memory_equal(d.install_snapshot.data.base, data, sizeof data);
	msg_raft_free(&d);
	raft_configuration_close(&m.install_snapshot.conf);
	free(b);

	/* Duplicate server ids in the configuration are refused. */
	raft_configuration_init(&m.install_snapshot.conf);
	raft_configuration_add(&m.install_snapshot.conf, 1, "a:1", RAFT_VOTER);
	raft_configuration_add(&m.install_snapshot.conf, 2, "b:1", RAFT_VOTER);
	b = encode(77, &m, &len);
	raft_configuration_close(&m.install_snapshot.conf);
	/* server 2's id sits after: group(4) type(1) 4 x u64 (32) n(4)
	 * server 1: id(8) role(1) alen(2) "a:1"(3) */
	b[4 + 1 + 32 + 4 + 14 + 7] = 1;
	{
		uint32_t g;
		assert_int_not_equal(msg_raft_decode(b, len, &g, &d), 0);
	}
	free(b);
}

static void test_timeout_now(void **state)
{
	struct raft_message m, d;
	uint8_t *b;
	size_t len;
	uint32_t g;
	(void)state;

	memset(&m, 0, sizeof m);
	m.type = RAFT_IO_TIMEOUT_NOW;
	m.timeout_now.term = 8;
	m.timeout_now.last_log_index = 80;
	m.timeout_now.last_log_term = 7;
	b = encode(3, &m, &len);
	round_trip(b, len, 3, &d);
	assert_int_equal(d.timeout_now.term, 8);
	assert_int_equal(d.timeout_now.last_log_index, 80);
	assert_int_equal(d.timeout_now.last_log_term, 7);
	b[4] = 99; /* unknown type */
	assert_int_equal(msg_raft_decode(b, len, &g, &d), MSG_EMALFORMED);
	free(b);
}

static void test_handshake(void **state)
{
	struct msg_hello h = {0}, hd;
	struct msg_welcome w = {0}, wd;
	uint8_t b[600];
	size_t len;
	(void)state;

	h.version = MSG_VERSION;
	h.from = 3;
	h.to = 1;
	h.cluster = "prod-eu";
	h.cluster_len = 7;
	len = msg_hello_size(&h);
	msg_hello_write(b, &h);
	assert_int_equal(msg_hello_decode(b, len, &hd), 0);
	assert_int_equal(hd.from, 3);
	assert_int_equal(hd.to, 1);
	assert_int_equal(hd.cluster_len, 7);
	assert_memory_equal(hd.cluster, "prod-eu", 7);
	for (size_t k = 0; k < len; k++) {
		assert_int_not_equal(msg_hello_decode(b, k, &hd), 0);
	}
	/* Another version is recognised as such, with the sender. */
	h.version = 2;
	msg_hello_write(b, &h);
	assert_int_equal(msg_hello_decode(b, len, &hd), MSG_EVERSION);
	assert_int_equal(hd.version, 2);
	assert_int_equal(hd.from, 3);
	/* Not our magic. */
	h.version = MSG_VERSION;
	msg_hello_write(b, &h);
	b[0] = 'X';
	assert_int_equal(msg_hello_decode(b, len, &hd), MSG_EMALFORMED);

	w.version = MSG_VERSION;
	w.status = MSG_HS_CLUSTER;
	w.from = 1;
	w.reason = "no";
	w.reason_len = 2;
	len = msg_welcome_size(&w);
	msg_welcome_write(b, &w);
	assert_int_equal(msg_welcome_decode(b, len, &wd), 0);
	assert_int_equal(wd.status, MSG_HS_CLUSTER);
	assert_int_equal(wd.from, 1);
	assert_memory_equal(wd.reason, "no", 2);
	assert_string_equal(msg_hs_strerror(MSG_HS_CLUSTER),
	                    "cluster id mismatch");
	b[6] = MSG_HS_MAX + 1;
	assert_int_equal(msg_welcome_decode(b, len, &wd), MSG_EMALFORMED);

	/* Frame headers. */
	{
		uint8_t kind;
		uint32_t plen;
		msg_frame_header(b, MSG_RAFT, 1234);
		assert_int_equal(msg_frame_parse(b, 2000, &kind, &plen), 0);
		assert_int_equal(kind, MSG_RAFT);
		assert_int_equal(plen, 1234);
		assert_int_not_equal(msg_frame_parse(b, 1000, &kind, &plen), 0);
		msg_frame_header(b, 0, 1);
		assert_int_not_equal(msg_frame_parse(b, 2000, &kind, &plen), 0);
		msg_frame_header(b, MSG_KIND_MAX + 1, 1);
		assert_int_not_equal(msg_frame_parse(b, 2000, &kind, &plen), 0);
	}
}

static void test_rpc_messages(void **state)
{
	uint8_t b[1024];
	size_t len;
	(void)state;

	/* Routes. */
	{
		struct msg_route r[3] = {{1, 5}, {2, 6}, {1000, 1ull << 50}};
		struct msg_route x;
		uint32_t n;
		len = msg_routes_size(3);
		msg_routes_write(b, r, 3);
		assert_int_equal(msg_routes_decode(b, len, &n), 0);
		assert_int_equal(n, 3);
		msg_routes_get(b, 2, &x);
		assert_int_equal(x.group, 1000);
		assert_int_equal(x.term, 1ull << 50);
		assert_int_not_equal(msg_routes_decode(b, len - 1, &n), 0);
		assert_int_not_equal(msg_routes_decode(b, 3, &n), 0);
	}
	/* Forwarding. */
	{
		struct msg_fwd_req r = {
		    77, 5, MSG_FWD_PROPOSE, 4000, (const uint8_t *)"cmd", 3};
		struct msg_fwd_req rd;
		struct msg_fwd_resp s = {77, 1, 2, (const uint8_t *)"res", 3};
		struct msg_fwd_resp sd;
		len = msg_fwd_req_size(&r);
		msg_fwd_req_write(b, &r);
		assert_int_equal(msg_fwd_req_decode(b, len, &rd), 0);
		assert_int_equal(rd.id, 77);
		assert_int_equal(rd.group, 5);
		assert_int_equal(rd.op, MSG_FWD_PROPOSE);
		assert_int_equal(rd.timeout_ms, 4000);
		assert_int_equal(rd.len, 3);
		assert_memory_equal(rd.cmd, "cmd", 3);
		b[12] = 3; /* unknown op */
		assert_int_not_equal(msg_fwd_req_decode(b, len, &rd), 0);
		len = msg_fwd_resp_size(&s);
		msg_fwd_resp_write(b, &s);
		assert_int_equal(msg_fwd_resp_decode(b, len, &sd), 0);
		assert_int_equal(sd.status, 1);
		assert_int_equal(sd.leader, 2);
		assert_memory_equal(sd.result, "res", 3);
		assert_int_not_equal(msg_fwd_resp_decode(b, 16, &sd), 0);
	}
	/* State transfer. */
	{
		struct msg_xfer_req r = {9, 4, 500}, rd;
		struct msg_xfer_file files[2] = {{"group-4-000000.sst", 18, 10},
		                                 {"group-4-000001.sst", 18, 0}};
		struct msg_xfer_meta m, md;
		struct msg_xfer_file f;
		struct msg_xfer_get g = {9, 1, 1ull << 33, 65536}, gd;
		struct msg_xfer_data d = {9, 1, 12, MSG_XFER_OK, NULL, 0}, dd;
		uint64_t id;
		size_t off = 0;

		len = msg_xfer_req_size();
		msg_xfer_req_write(b, &r);
		assert_int_equal(msg_xfer_req_decode(b, len, &rd), 0);
		assert_int_equal(rd.id, 9);
		assert_int_equal(rd.group, 4);
		assert_int_equal(rd.index, 500);

		memset(&m, 0, sizeof m);
		m.id = 9;
		m.applied = 512;
		m.n_files = 2;
		m.files = files;
		m.message = "";
		len = msg_xfer_meta_size(&m);
		msg_xfer_meta_write(b, &m);
		assert_int_equal(msg_xfer_meta_decode(b, len, &md), 0);
		assert_int_equal(md.applied, 512);
		assert_int_equal(md.n_files, 2);
		msg_xfer_meta_file(&md, &off, &f);
		assert_int_equal(f.size, 10);
		assert_memory_equal(f.name, "group-4-000000.sst", 18);
		msg_xfer_meta_file(&md, &off, &f);
		assert_int_equal(f.size, 0);
		assert_memory_equal(f.name, "group-4-000001.sst", 18);
		/* A name with a slash (path escape) is refused. */
		b[8 + 1 + 8 + 4 + 2] = '/';
		assert_int_not_equal(msg_xfer_meta_decode(b, len, &md), 0);
		files[0].name = "..";
		files[0].name_len = 2;
		len = msg_xfer_meta_size(&m);
		msg_xfer_meta_write(b, &m);
		assert_int_not_equal(msg_xfer_meta_decode(b, len, &md), 0);

		len = msg_xfer_get_size();
		msg_xfer_get_write(b, &g);
		assert_int_equal(msg_xfer_get_decode(b, len, &gd), 0);
		assert_int_equal(gd.offset, 1ull << 33);
		assert_int_equal(gd.len, 65536);

		len = msg_xfer_data_header_size();
		msg_xfer_data_write_header(b, &d);
		memcpy(b + len, "chunk", 5);
		assert_int_equal(msg_xfer_data_decode(b, len + 5, &dd), 0);
		assert_int_equal(dd.file, 1);
		assert_int_equal(dd.offset, 12);
		assert_int_equal(dd.len, 5);
		assert_memory_equal(dd.data, "chunk", 5);

		msg_xfer_end_write(b, 9);
		assert_int_equal(msg_xfer_end_decode(b, 8, &id), 0);
		assert_int_equal(id, 9);
		assert_int_not_equal(msg_xfer_end_decode(b, 7, &id), 0);
	}
	{
		struct msg_read_check c = {.answer = true,
		                           .ok = true,
		                           .group = 7,
		                           .term = 42,
		                           .round = 1ull << 40},
		                      cc;
		size_t clen = msg_read_check_size();
		msg_read_check_write(b, &c);
		assert_int_equal(msg_read_check_decode(b, clen, &cc), 0);
		assert_true(cc.answer && cc.ok);
		assert_int_equal(cc.group, 7);
		assert_int_equal(cc.term, 42);
		assert_int_equal(cc.round, 1ull << 40);
		c.answer = c.ok = false;
		msg_read_check_write(b, &c);
		assert_int_equal(msg_read_check_decode(b, clen, &cc), 0);
		assert_false(cc.answer || cc.ok);
		/* Short, long and unknown flags are refused. */
		assert_int_not_equal(msg_read_check_decode(b, clen - 1, &cc),
		                     0);
		assert_int_not_equal(msg_read_check_decode(b, clen + 1, &cc),
		                     0);
		b[0] = 4;
		assert_int_not_equal(msg_read_check_decode(b, clen, &cc), 0);
	}
	{
		struct msg_quiesce q = {.wake = false,
		                        .group = 9999,
		                        .term = 7,
		                        .index = 1ull << 33},
		                   qq;
		size_t qlen = msg_quiesce_size();
		msg_quiesce_write(b, &q);
		assert_int_equal(msg_quiesce_decode(b, qlen, &qq), 0);
		assert_false(qq.wake);
		assert_int_equal(qq.group, 9999);
		assert_int_equal(qq.term, 7);
		assert_int_equal(qq.index, 1ull << 33);
		q.wake = true;
		q.index = 0;
		msg_quiesce_write(b, &q);
		assert_int_equal(msg_quiesce_decode(b, qlen, &qq), 0);
		assert_true(qq.wake);
		assert_int_equal(qq.index, 0);
		/* Short, long and unknown flags are refused. */
		assert_int_not_equal(msg_quiesce_decode(b, qlen - 1, &qq), 0);
		assert_int_not_equal(msg_quiesce_decode(b, qlen + 1, &qq), 0);
		b[0] = 2;
		assert_int_not_equal(msg_quiesce_decode(b, qlen, &qq), 0);
	}
}

/* A joining node's request and the answer: round trips, every prefix
 * refused, another version recognised, bad fields refused. */
static void test_node_cn(void **state)
{
	uint64_t id = 0;
	(void)state;
	assert_int_equal(msg_node_cn_parse("node-1", &id), 0);
	assert_int_equal(id, 1);
	assert_int_equal(msg_node_cn_parse("node-18446744", &id), 0);
	assert_int_equal(id, 18446744u);
	assert_int_equal(msg_node_cn_parse("node-0", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("node-01", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("node-", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("node-2x", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("node-+2", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("Node-2", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("node-2 ", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("", &id), MSG_EMALFORMED);
	assert_int_equal(msg_node_cn_parse("node-99999999999999999999999", &id),
	                 MSG_EMALFORMED);
	assert_int_equal(id, 18446744u);
}

static void test_join(void **state)
{
	struct msg_join j = {0}, jd;
	struct msg_join_resp r = {0}, rd;
	uint8_t b[600];
	size_t len;
	(void)state;

	j.version = MSG_VERSION;
	j.from = 4;
	j.cluster = "prod";
	j.cluster_len = 4;
	j.record = "internal=10.0.0.4:7000 fsnp=10.0.0.4:6388";
	j.record_len = strlen(j.record);
	len = msg_join_size(&j);
	assert_true(len <= sizeof b);
	msg_join_write(b, &j);
	assert_int_equal(msg_join_decode(b, len, &jd), 0);
	assert_int_equal(jd.from, 4);
	assert_memory_equal(jd.cluster, "prod", 4);
	assert_int_equal(jd.record_len, j.record_len);
	assert_memory_equal(jd.record, j.record, j.record_len);
	for (size_t k = 0; k < len; k++) {
		assert_int_not_equal(msg_join_decode(b, k, &jd), 0);
	}
	assert_int_not_equal(msg_join_decode(b, len + 1, &jd), 0);
	j.version = 2;
	msg_join_write(b, &j);
	assert_int_equal(msg_join_decode(b, len, &jd), MSG_EVERSION);
	j.version = MSG_VERSION;
	j.from = 0; /* no node 0 */
	msg_join_write(b, &j);
	assert_int_equal(msg_join_decode(b, len, &jd), MSG_EMALFORMED);

	r.status = MSG_HS_OK;
	r.text = "1=10.0.0.1:7000,2=10.0.0.2:7000";
	r.text_len = strlen(r.text);
	len = msg_join_resp_size(&r);
	msg_join_resp_write(b, &r);
	assert_int_equal(msg_join_resp_decode(b, len, &rd), 0);
	assert_int_equal(rd.status, MSG_HS_OK);
	assert_int_equal(rd.text_len, r.text_len);
	assert_memory_equal(rd.text, r.text, r.text_len);
	for (size_t k = 0; k < len; k++) {
		assert_int_not_equal(msg_join_resp_decode(b, k, &rd), 0);
	}
	r.status = MSG_HS_MAX + 1;
	msg_join_resp_write(b, &r);
	assert_int_not_equal(msg_join_resp_decode(b, len, &rd), 0);
}

static void test_placement(void **state)
{
	uint64_t nodes[5] = {5, 1, 4, 2, 3}, out[5], again[5];
	unsigned first[6] = {0}, held[6] = {0};
	size_t k;
	(void)state;

	/* Meta: the lowest ids, ascending, at most 5. */
	k = placement_replicas(nodes, 3, 0, 3, out);
	assert_int_equal(k, 3);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 4);
	assert_int_equal(out[2], 5);
	{
		uint64_t seven[7] = {7, 6, 5, 4, 3, 2, 1};
		uint64_t o7[7];
		k = placement_replicas(seven, 7, 0, 3, o7);
		assert_int_equal(k, PLACEMENT_META_VOTERS);
		assert_int_equal(o7[0], 1);
		assert_int_equal(o7[4], 5);
	}
	/* Data groups: R distinct members, the same whatever the input
	 * order, and spread evenly over 1000 groups. */
	for (uint32_t g = 1; g <= 1000; g++) {
		uint64_t shuffled[5] = {3, 5, 1, 2, 4};
		k = placement_replicas(nodes, 5, g, 3, out);
		assert_int_equal(k, 3);
		assert_int_equal(placement_replicas(shuffled, 5, g, 3, again),
		                 3);
		assert_memory_equal(out, again, sizeof out[0] * 3);
		assert_true(out[0] != out[1] && out[1] != out[2] &&
		            out[0] != out[2]);
		first[out[0]]++;
		for (int i = 0; i < 3; i++) {
			held[out[i]]++;
			assert_true(placement_has(nodes, 5, g, 3, out[i]));
		}
	}
	for (int n = 1; n <= 5; n++) {
		/* Expect 200 preferred leaderships and 600 replicas each. */
		assert_true(first[n] > 140 && first[n] < 260);
		assert_true(held[n] > 520 && held[n] < 680);
	}
	/* R above the node count takes every node. */
	assert_int_equal(placement_replicas(nodes, 2, 9, 3, out), 2);
	/* Groups on the same replicas: preferred leaderships round-robin
	 * (3 nodes, 8 groups: 3/3/2), whatever the scores say. */
	{
		uint64_t three[3] = {3, 1, 2};
		unsigned led[4] = {0};
		for (uint32_t g = 1; g <= 8; g++) {
			assert_int_equal(
			    placement_replicas(three, 3, g, 3, out), 3);
			led[out[0]]++;
		}
		for (int n = 1; n <= 3; n++) {
			assert_true(led[n] == 2 || led[n] == 3);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_vote),
	    cmocka_unit_test(test_request_vote_result),
	    cmocka_unit_test(test_append_entries),
	    cmocka_unit_test(test_append_entries_result),
	    cmocka_unit_test(test_install_snapshot),
	    cmocka_unit_test(test_timeout_now),
	    cmocka_unit_test(test_handshake),
	    cmocka_unit_test(test_rpc_messages),
	    cmocka_unit_test(test_join),
	    cmocka_unit_test(test_node_cn),
	    cmocka_unit_test(test_placement),
	};
	return cmocka_run_group_tests_name("raft_msg", tests, NULL, NULL);
}

/* Integration: bad input over live Felix connections. Every frame of the
 * wire fuzz corpora (tests/fuzz/corpus/fuzz_felix_*) is sent on an
 * authenticated stream of a fresh connection; the broker must answer with
 * a protocol error, an ack or nothing, end the stream where the byte stream
 * cannot be trusted, close the connection only for an unknown message type,
 * and keep serving other clients. Also: auth with a token file, the
 * pre-auth frame cap, and frames before auth. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <unistd.h>

#include "tests/integration/felix_util.h"
#include "wire/felix_frame.h"
#include "wire/felix_msg.h"

#define NODES 1

struct raw_run {
	bool ended;
	bool auth_ok;
	char why[256];
	unsigned frames;
	unsigned errors;
	unsigned acks;
	bool got_error;
	char first_error[512];
};

static void on_frame(void *data, struct felix_raw *raw, uint16_t flags,
                     const uint8_t *payload, uint32_t len)
{
	struct raw_run *r = data;
	(void)raw;
	r->frames++;
	if (flags == FELIX_FLAG_PUBLISH_ACK) {
		r->acks++;
		return;
	}
	if (flags != 0) {
		fail_msg("broker sent frame flags 0x%x to a client", flags);
	}
	struct felix_msg m;
	char err[256];
	/* Every answer must be a well-formed message. */
	assert_int_equal(felix_msg_decode(payload, len, &m, err, sizeof err),
	                 0);
	if (m.type == FELIX_MSG_AUTH_OK) {
		r->auth_ok = true;
	} else if (m.type == FELIX_MSG_ERROR) {
		r->got_error = true;
		if (r->errors++ == 0) {
			snprintf(r->first_error, sizeof r->first_error, "%s",
			         m.u.error.message);
		}
	}
	felix_msg_free(&m);
}

static void on_end(void *data, struct felix_raw *raw, const char *why)
{
	struct raw_run *r = data;
	(void)raw;
	r->ended = true;
	snprintf(r->why, sizeof r->why, "%s", why);
}

/* Sends `bytes` (then FIN) on an authenticated raw stream of a new
 * connection; returns whether the connection was closed by the broker. */
static bool run_raw(struct harness_cluster *cl, uv_loop_t *loop,
                    const uint8_t *bytes, size_t len, struct raw_run *r)
{
	struct fx f;
	memset(r, 0, sizeof *r);
	assert_int_equal(fx_connect(&f, loop, cl, 0, "t1", "x", 1), 0);
	struct felix_raw *raw;
	assert_int_equal(
	    felix_client_raw_open(f.c, true, on_frame, on_end, r, &raw), 0);
	assert_int_equal(felix_raw_send(raw, bytes, len, true), 0);
	assert_int_equal(felix_client_run(loop, &r->ended, FX_WAIT_MS), 0);
	bool closed = !felix_client_is_open(f.c);
	fx_close(&f);
	return closed;
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	size_t n = fread(buf, 1, cap, fp);
	fclose(fp);
	return n;
}

/* Whether a JSON payload names a type this version does not know. */
static bool unknown_type(const uint8_t *p, size_t len)
{
	struct felix_msg m;
	char err[64];
	int rv = felix_msg_decode(p, len, &m, err, sizeof err);
	if (rv == 0) {
		felix_msg_free(&m);
	}
	return rv == FELIX_MSG_EUNKNOWN_TYPE;
}

static void run_corpus(struct harness_cluster *cl, uv_loop_t *loop,
                       const char *target)
{
	const char *root = getenv("LS_FUZZ_CORPUS");
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/%s",
	         root ? root : LS_ABS_SRCDIR "/tests/fuzz/corpus", target);
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *de;
	static uint8_t in[1 << 20], frame[(1 << 20) + 64];
	unsigned files = 0;
	while ((de = readdir(d)) != NULL) {
		char path[2048];
		if (de->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		size_t n = read_file(path, in, sizeof in);
		size_t flen;
		bool may_close = false;
		if (strcmp(target, "fuzz_felix_frame") == 0) {
			/* two control bytes, then a raw byte stream */
			if (n < 2) {
				continue;
			}
			flen = n - 2;
			memcpy(frame, in + 2, flen);
			/* a JSON frame of an unknown type inside closes */
			may_close = true;
		} else if (strcmp(target, "fuzz_felix_binary") == 0) {
			/* u16 flags, a limits byte, the payload */
			if (n < 3) {
				continue;
			}
			uint16_t flags = (uint16_t)(in[0] << 8 | in[1]);
			felix_frame_header_encode(flags, (uint32_t)(n - 3),
			                          frame);
			memcpy(frame + FELIX_FRAME_HEADER_LEN, in + 3, n - 3);
			flen = FELIX_FRAME_HEADER_LEN + n - 3;
		} else {
			felix_frame_header_encode(0, (uint32_t)n, frame);
			memcpy(frame + FELIX_FRAME_HEADER_LEN, in, n);
			flen = FELIX_FRAME_HEADER_LEN + n;
			may_close = unknown_type(in, n);
		}
		struct raw_run r;
		bool closed = run_raw(cl, loop, frame, flen, &r);
		if (closed && !may_close) {
			fail_msg("%s/%s: connection closed (%s)", target,
			         de->d_name, r.why);
		}
		if (!closed) {
			/* The stream was answered and finished. */
			assert_true(r.auth_ok);
		}
		if (strcmp(target, "fuzz_felix_json") == 0 && !closed) {
			/* Every JSON message answers something: an error
			 * for server-to-client types, else a reply. */
			assert_true(r.frames >= 2);
		}
		files++;
	}
	closedir(d);
	assert_true(files >= 10);
}

static void healthy(struct harness_cluster *cl, uv_loop_t *loop)
{
	struct fx f;
	char buf[64];
	bool found;
	assert_int_equal(fx_connect(&f, loop, cl, 0, "t1", "x", 1), 0);
	assert_int_equal(fx_cache_put(&f, "c", "k", "v", false, 0), 0);
	assert_int_equal(fx_cache_get(&f, "c", "k", buf, sizeof buf, &found),
	                 0);
	assert_true(found);
	fx_close(&f);
}

static void test_corpora(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "2", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	(void)state;
	assert_int_equal(harness_cluster_start(&cl, NODES, args, true), 0);
	uv_loop_init(&loop);
	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "t1", "x", 1), 0);
	assert_int_equal(fx_publish_ready(&f, "default", "s1"), 0);
	fx_close(&f);
	run_corpus(&cl, &loop, "fuzz_felix_frame");
	healthy(&cl, &loop);
	run_corpus(&cl, &loop, "fuzz_felix_binary");
	healthy(&cl, &loop);
	run_corpus(&cl, &loop, "fuzz_felix_json");
	healthy(&cl, &loop);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

static void send_frame(uint8_t *buf, size_t *len, uint16_t flags,
                       const char *json)
{
	size_t n = strlen(json);
	felix_frame_header_encode(flags, (uint32_t)n, buf + *len);
	memcpy(buf + *len + FELIX_FRAME_HEADER_LEN, json, n);
	*len += FELIX_FRAME_HEADER_LEN + n;
}

/* Specific classes and their exact answers. */
static void test_classes(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "2", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct raw_run r;
	static uint8_t buf[200000];
	size_t len;
	(void)state;
	assert_int_equal(harness_cluster_start(&cl, NODES, args, true), 0);
	uv_loop_init(&loop);

	/* Unknown message type: the connection is closed. */
	len = 0;
	send_frame(buf, &len, 0, "{\"type\":\"no_such_thing\"}");
	assert_true(run_raw(&cl, &loop, buf, len, &r));

	/* A bad magic ends the stream with an error naming it. */
	memcpy(buf, "XXXX\x00\x01\x00\x00\x00\x00\x00\x02{}", 14);
	assert_false(run_raw(&cl, &loop, buf, 14, &r));
	assert_int_equal(r.errors, 1);
	assert_non_null(strstr(r.first_error, "magic"));

	/* An unknown flag bit is refused, not masked. */
	len = 0;
	send_frame(buf, &len, 0x0100, "{}");
	assert_false(run_raw(&cl, &loop, buf, len, &r));
	assert_int_equal(r.errors, 1);

	/* Malformed JSON: an error, and the stream goes on. */
	len = 0;
	send_frame(buf, &len, 0, "{\"type\":\"cache_get\"");
	send_frame(buf, &len, 0,
	           "{\"type\":\"stream_shards\",\"tenant_id\":\"t1\","
	           "\"namespace\":\"default\",\"stream\":\"s\","
	           "\"request_id\":4}");
	assert_false(run_raw(&cl, &loop, buf, len, &r));
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.frames, 3); /* auth_ok, error, shards view */

	/* An event batch from a client: refused, stream goes on. */
	len = 0;
	felix_frame_header_encode(0x0004, 4, buf);
	memset(buf + 12, 0, 4);
	len = 16;
	assert_false(run_raw(&cl, &loop, buf, len, &r));
	assert_non_null(strstr(r.first_error, "unexpected frame"));

	/* A malformed acked publish is answered with an error ack. */
	felix_frame_header_encode(0x0009, 11, buf);
	memset(buf + 12, 0, 11);
	buf[12 + 7] = 9; /* request_id 9 */
	buf[12 + 8] = 1; /* per_message */
	assert_false(run_raw(&cl, &loop, buf, 23, &r));
	assert_int_equal(r.acks, 1);

	/* A stream that ends inside a frame. */
	felix_frame_header_encode(0, 100, buf);
	assert_false(run_raw(&cl, &loop, buf, 20, &r));
	assert_int_equal(r.errors, 1);

	/* Tenant mismatch on a publish: an error ack, not an append. */
	len = 0;
	send_frame(buf, &len, 0,
	           "{\"type\":\"publish\",\"tenant_id\":\"other\","
	           "\"namespace\":\"default\",\"stream\":\"s\","
	           "\"payload\":\"YQ==\",\"request_id\":1,\"ack\":"
	           "\"per_message\"}");
	assert_false(run_raw(&cl, &loop, buf, len, &r));
	assert_int_equal(r.frames, 2); /* auth_ok, publish_error */

	healthy(&cl, &loop);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Token file auth, frames before auth, and the pre-auth frame cap. */
static void test_auth(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	char tokens[600];
	(void)state;
	snprintf(tokens, sizeof tokens, "/tmp/felix-tokens-%d", (int)getpid());
	FILE *fp = fopen(tokens, "w");
	assert_non_null(fp);
	fprintf(fp, "# tenant token\nt1 s3cret\nt2 other\n");
	fclose(fp);
	const char *args[] = {"--dev",          "--shards", "2",
	                      "--felix-tokens", tokens,     NULL};
	assert_int_equal(harness_cluster_start(&cl, NODES, args, true), 0);
	uv_loop_init(&loop);

	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "t1", "wrong", 1),
	                 FELIX_CLIENT_EREFUSED);
	assert_non_null(strstr(f.message, "unauthorized"));
	assert_null(strstr(f.message, "wrong"));
	fx_close(&f);
	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "t2", "s3cret", 1),
	                 FELIX_CLIENT_EREFUSED);
	fx_close(&f);
	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "t1", "s3cret", 1), 0);
	fx_close(&f);

	/* A request before auth ends the stream with an error. */
	static uint8_t buf[70000];
	size_t len = 0;
	send_frame(buf, &len, 0, "{\"type\":\"topology\"}");
	struct raw_run r;
	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "t1", "s3cret", 1), 0);
	struct felix_raw *raw;
	memset(&r, 0, sizeof r);
	assert_int_equal(
	    felix_client_raw_open(f.c, false, on_frame, on_end, &r, &raw), 0);
	assert_int_equal(felix_raw_send(raw, buf, len, false), 0);
	assert_int_equal(felix_client_run(&loop, &r.got_error, FX_WAIT_MS), 0);
	assert_non_null(strstr(r.first_error, "must be auth"));

	/* A first frame over the 64 KiB pre-auth cap is refused as soon as
	 * its header arrives. */
	memset(&r, 0, sizeof r);
	felix_frame_header_encode(0, 65 * 1024, buf);
	assert_int_equal(
	    felix_client_raw_open(f.c, false, on_frame, on_end, &r, &raw), 0);
	assert_int_equal(felix_raw_send(raw, buf, 12, false), 0);
	assert_int_equal(felix_client_run(&loop, &r.got_error, FX_WAIT_MS), 0);
	assert_int_equal(r.errors, 1);
	fx_close(&f);
	unlink(tokens);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_classes),
	    cmocka_unit_test(test_auth),
	    cmocka_unit_test(test_corpora),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Helpers for the flow/ unit tests (see flow_test_util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "tests/unit/flow_test_util.h"

void fb_begin(struct fbody *f)
{
	wbuf_init(&f->b);
	fsnp_w_init(&f->w, &f->b);
	fsnp_w_map_begin(&f->w);
}

void fb_key(struct fbody *f, const char *k)
{
	fsnp_w_key(&f->w, k);
}

void fb_str(struct fbody *f, const char *k, const char *v)
{
	fsnp_w_key(&f->w, k);
	fsnp_w_str(&f->w, v);
}

void fb_int(struct fbody *f, const char *k, int64_t v)
{
	fsnp_w_key(&f->w, k);
	fsnp_w_i64(&f->w, v);
}

void fb_bool(struct fbody *f, const char *k, bool v)
{
	fsnp_w_key(&f->w, k);
	fsnp_w_bool(&f->w, v);
}

void fb_strs(struct fbody *f, const char *k, const char *const *v, size_t n)
{
	fsnp_w_key(&f->w, k);
	fsnp_w_array_begin(&f->w);
	for (size_t i = 0; i < n; i++) {
		fsnp_w_str(&f->w, v[i]);
	}
	fsnp_w_array_end(&f->w);
}

void fb_end(struct fbody *f)
{
	fsnp_w_map_end(&f->w);
	assert_int_equal(fsnp_w_finish(&f->w), 0);
}

void fb_free(struct fbody *f)
{
	wbuf_free(&f->b);
}

void ftdb_open(struct tdb *t)
{
	tdb_open(t);
	assert_int_equal(flow_register(t->s), 0);
}

static void text_of(struct freply *r)
{
	struct fsnp_bytes b;

	r->text[0] = '\0';
	if (fsnp_val_bin(&r->v, &b) == 0) {
		size_t n =
		    b.len < sizeof r->text - 1 ? b.len : sizeof r->text - 1;
		memcpy(r->text, b.ptr, n);
		r->text[n] = '\0';
	}
}

void fl_run(struct tdb *t, uint32_t group, uint64_t now, uint16_t opcode,
            const struct fbody *body, uint64_t seed, struct freply *r)
{
	struct flow_cmd_meta meta = {FLOW_CLOCK_SKEW_DEFAULT_MS, seed};
	struct flow_err err;
	uint8_t *cmd;
	size_t clen;

	memset(r, 0, sizeof *r);
	if (flow_cmd_encode(opcode, body ? body->b.data : NULL,
	                    body ? body->b.len : 0, &meta, &cmd, &clen,
	                    &err) != 0) {
		/* A text value with the message, as the node would send. */
		size_t n = strlen(err.msg);
		r->buf = malloc(5 + n);
		r->buf[0] = FSNP_BIN;
		r->buf[1] = (uint8_t)(n >> 24);
		r->buf[2] = (uint8_t)(n >> 16);
		r->buf[3] = (uint8_t)(n >> 8);
		r->buf[4] = (uint8_t)n;
		memcpy(r->buf + 5, err.msg, n);
		r->len = 5 + n;
		r->status = err.status;
		assert_int_equal(
		    fsnp_value_decode(r->buf, r->len, NULL, &r->v, NULL), 0);
		text_of(r);
		return;
	}
	if (flow_opcode_is_read(opcode)) {
		struct fsm_result out;
		assert_int_equal(store_read(t->s, group, now, cmd, clen, &out),
		                 0);
		r->buf = out.data;
		r->len = out.len;
	} else {
		struct fsm_cmd fc = {cmd, clen};
		struct fsm_result res = {NULL, 0};
		struct fsm_entry e;
		e.group = group;
		e.index = t->next_index[group]++;
		e.term = 1;
		e.now_ms = now;
		e.n_cmds = 1;
		e.cmds = &fc;
		assert_int_equal(store_apply(t->s, &e, &res), 0);
		r->buf = res.data;
		r->len = res.len;
	}
	free(cmd);
	assert_true(r->len >= 3);
	assert_int_equal(r->buf[0], STORE_RESULT_VERSION);
	r->status = flow_reply_status(r->buf[1]);
	assert_int_equal(
	    fsnp_value_decode_body(r->buf + 2, r->len - 2, NULL, &r->v), 0);
	text_of(r);
}

void freply_free(struct freply *r)
{
	free(r->buf);
	r->buf = NULL;
}

void fr_ok(const struct freply *r)
{
	if (r->status != 0 || strcmp(r->text, "OK") != 0) {
		fprintf(stderr, "expected OK, got status %d: %s\n", r->status,
		        r->text);
	}
	assert_int_equal(r->status, 0);
	assert_string_equal(r->text, "OK");
}

void fr_err(const struct freply *r, int status, const char *msg)
{
	if (r->status != status || strcmp(r->text, msg) != 0) {
		fprintf(stderr, "expected %d %s, got status %d: %s\n", status,
		        msg, r->status, r->text);
	}
	assert_int_equal(r->status, status);
	assert_string_equal(r->text, msg);
}

struct fsnp_val fr_get(const struct fsnp_val *m, const char *k)
{
	struct fsnp_val v;

	if (fsnp_map_get(m, k, &v) != 0) {
		fprintf(stderr, "no field %s\n", k);
	}
	assert_int_equal(fsnp_map_get(m, k, &v), 0);
	return v;
}

int64_t fr_int(const struct fsnp_val *m, const char *k)
{
	struct fsnp_val v = fr_get(m, k);
	int64_t i;

	assert_int_equal(fsnp_val_i64(&v, &i), 0);
	return i;
}

const char *fr_str(const struct fsnp_val *m, const char *k, char *buf)
{
	struct fsnp_val v = fr_get(m, k);
	struct fsnp_bytes b;

	assert_int_equal(fsnp_val_bin(&v, &b), 0);
	assert_true(b.len < 256);
	memcpy(buf, b.ptr, b.len);
	buf[b.len] = '\0';
	return buf;
}

bool fr_is_nil(const struct fsnp_val *m, const char *k)
{
	struct fsnp_val v = fr_get(m, k);

	return v.tag == FSNP_NIL;
}

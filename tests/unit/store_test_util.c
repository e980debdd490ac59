/* Helpers for the store/ unit tests (see store_test_util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/store_test_util.h"

struct store_slice S(const char *s) {
	struct store_slice x = {(const uint8_t *)s, strlen(s)};
	return x;
}

/* Opens RocksDB in t->dir with the node's column families, and the store
 * over it. */
static void
open_dir(struct tdb *t)
{
	const char *names[4] = {"default", "raft_log", "raft_state", "data"};
	const rocksdb_options_t *cfo[4];
	char *err = NULL;

	for (int i = 0; i < 4; i++) {
		cfo[i] = t->opts;
	}
	t->db = rocksdb_open_column_families(t->opts, t->dir, 4, names, cfo,
	                                     t->cf, &err);
	if (err != NULL) {
		fprintf(stderr, "rocksdb open: %s\n", err);
	}
	assert_null(err);
	assert_int_equal(store_open(t->db, t->cf[3], &t->s), 0);
}

/* Closes the store and RocksDB; the directory stays. */
static void close_dir(struct tdb *t)
{
	store_close(t->s);
	t->s = NULL;
	for (int i = 0; i < 4; i++) {
		rocksdb_column_family_handle_destroy(t->cf[i]);
	}
	rocksdb_close(t->db);
	t->db = NULL;
}

void tdb_open(struct tdb *t)
{
	const char *base = getenv("TMPDIR");

	memset(t, 0, sizeof *t);
	snprintf(t->dir, sizeof t->dir, "%s/ls-store-XXXXXX",
	         base ? base : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	t->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(t->opts, 1);
	rocksdb_options_set_create_missing_column_families(t->opts, 1);
	open_dir(t);
	for (int i = 0; i < TDB_GROUPS; i++) {
		t->next_index[i] = 1;
	}
}

void tdb_reopen(struct tdb *t)
{
	close_dir(t);
	open_dir(t);
}

void tdb_close(struct tdb *t)
{
	char cmd[600];

	close_dir(t);
	rocksdb_options_destroy(t->opts);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
	assert_int_equal(system(cmd), 0);
}

uint8_t *tcmd_encode(const struct store_cmd *c, size_t *len)
{
	uint8_t *p = NULL;
	const char *err = NULL;
	assert_int_equal(store_cmd_encode(c, &p, len, &err), 0);
	return p;
}

struct fsm_result *tdb_apply_entry(struct tdb *t, uint32_t group,
                                   uint64_t now_ms,
                                   const struct store_cmd *cmds, unsigned n)
{
	struct fsm_cmd *fc = calloc(n ? n : 1, sizeof *fc);
	struct fsm_result *res = calloc(n ? n : 1, sizeof *res);
	struct fsm_entry e;

	assert_true(group < TDB_GROUPS);
	for (unsigned i = 0; i < n; i++) {
		size_t len;
		fc[i].data = tcmd_encode(&cmds[i], &len);
		fc[i].len = len;
	}
	e.group = group;
	e.index = t->next_index[group]++;
	e.term = 1;
	e.now_ms = now_ms;
	e.n_cmds = n;
	e.cmds = fc;
	assert_int_equal(store_apply(t->s, &e, res), 0);
	for (unsigned i = 0; i < n; i++) {
		free((void *)fc[i].data);
	}
	free(fc);
	return res;
}

uint8_t *tdb_apply(struct tdb *t, uint32_t group, uint64_t now_ms,
                   const struct store_cmd *c, size_t *len)
{
	struct fsm_result *r = tdb_apply_entry(t, group, now_ms, c, 1);
	uint8_t *p = r[0].data;
	*len = r[0].len;
	free(r);
	return p;
}

uint8_t *tdb_read(struct tdb *t, uint32_t group, uint64_t now_ms,
                  const struct store_cmd *c, size_t *len)
{
	struct fsm_result out;
	size_t clen;
	uint8_t *cmd = tcmd_encode(c, &clen);
	assert_int_equal(store_read(t->s, group, now_ms, cmd, clen, &out), 0);
	free(cmd);
	*len = out.len;
	return out.data;
}

uint64_t tdb_hash_group(struct tdb *t, uint32_t group)
{
	return tdb_hash_group_x(t, group, false);
}

uint64_t tdb_hash_group_x(struct tdb *t, uint32_t group, bool skip_state)
{
	uint8_t begin[5], end[5];
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int i = 0; i < 4; i++) {
		begin[i] = end[i] = (uint8_t)(group >> (24 - 8 * i));
	}
	begin[4] = 0;
	end[4] = 0xFF;
	assert_int_equal(store_drain(t->s), 0);
	it = rocksdb_create_iterator_cf(t->db, ro, t->cf[3]);
	for (rocksdb_iter_seek(it, (const char *)begin, 5);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const char *v = rocksdb_iter_value(it, &vl);
		if (kl < 4 || memcmp(k, begin, 4) != 0) {
			break;
		}
		if (skip_state && kl == 5 && k[4] == 0x01) {
			continue;
		}
		for (size_t i = 0; i < kl; i++) {
			h = (h ^ (uint8_t)k[i]) * 0x100000001b3ULL;
		}
		h = (h ^ 0xFE) * 0x100000001b3ULL;
		for (size_t i = 0; i < vl; i++) {
			h = (h ^ (uint8_t)v[i]) * 0x100000001b3ULL;
		}
		h = (h ^ 0xFD) * 0x100000001b3ULL;
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return h;
}

void tres_init(struct tres *x, uint8_t *buf, size_t len)
{
	x->buf = buf;
	x->len = len;
	x->scratch = NULL;
	if (store_result_open(buf, len, &x->r) != 0) {
		fprintf(stderr, "malformed result (%zu bytes):", len);
		for (size_t i = 0; i < len && i < 64; i++) {
			fprintf(stderr, " %02x", buf[i]);
		}
		fprintf(stderr, "\n");
		fail();
	}
}

void tres_free(struct tres *x)
{
	free(x->buf);
	x->buf = NULL;
	free(x->scratch);
	x->scratch = NULL;
}

uint8_t tres_status(const struct tres *x)
{
	return x->r.status;
}

static void next_tag(struct tres *x, struct store_value *v, uint8_t tag)
{
	assert_true(store_result_next(&x->r, v));
	if (v->tag != tag) {
		fprintf(stderr, "expected tag %u, got %u\n", tag, v->tag);
	}
	assert_int_equal(v->tag, tag);
}

uint64_t tres_u64(struct tres *x)
{
	struct store_value v;
	next_tag(x, &v, STORE_T_U64);
	return v.u;
}

int64_t tres_i64(struct tres *x)
{
	struct store_value v;
	next_tag(x, &v, STORE_T_I64);
	return v.i;
}

uint32_t tres_array(struct tres *x)
{
	struct store_value v;
	next_tag(x, &v, STORE_T_ARRAY);
	return v.n;
}

uint32_t tres_map(struct tres *x)
{
	struct store_value v;
	next_tag(x, &v, STORE_T_MAP);
	return v.n;
}

static const char *copy_out(struct tres *x, const struct store_value *v,
                            size_t *len)
{
	free(x->scratch);
	x->scratch = malloc(v->len + 1);
	assert_non_null(x->scratch);
	if (v->len > 0) {
		memcpy(x->scratch, v->p, v->len);
	}
	x->scratch[v->len] = 0;
	if (len != NULL) {
		*len = v->len;
	}
	return x->scratch;
}

const char *tres_bytes(struct tres *x, size_t *len)
{
	struct store_value v;
	next_tag(x, &v, STORE_T_BYTES);
	return copy_out(x, &v, len);
}

const char *tres_map_key(struct tres *x)
{
	struct store_value v;
	assert_true(store_result_next_key(&x->r, &v));
	return copy_out(x, &v, NULL);
}

bool tres_bool(struct tres *x)
{
	struct store_value v;
	assert_true(store_result_next(&x->r, &v));
	assert_true(v.tag == STORE_T_TRUE || v.tag == STORE_T_FALSE);
	return v.tag == STORE_T_TRUE;
}

bool tres_is_nil(struct tres *x)
{
	struct store_result save = x->r;
	struct store_value v;
	assert_true(store_result_next(&x->r, &v));
	if (v.tag == STORE_T_NIL) {
		return true;
	}
	x->r = save;
	return false;
}

void tapply(struct tres *x, struct tdb *t, uint32_t group, uint64_t now,
            const struct store_cmd *c)
{
	size_t len;
	uint8_t *p = tdb_apply(t, group, now, c, &len);
	tres_init(x, p, len);
}

void tread(struct tres *x, struct tdb *t, uint32_t group, uint64_t now,
           const struct store_cmd *c)
{
	size_t len;
	uint8_t *p = tdb_read(t, group, now, c, &len);
	tres_init(x, p, len);
}

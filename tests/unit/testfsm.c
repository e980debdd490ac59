/* Test state machine on RocksDB; see testfsm.h. */
#include "tests/unit/testfsm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX 9 /* ns u32 | group u32 | kind */

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;
	for (i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

static size_t make_key(uint8_t *k, uint32_t ns, uint32_t group, char kind,
                       const void *key, size_t klen)
{
	put32(k, ns);
	put32(k + 4, group);
	k[8] = (uint8_t)kind;
	if (klen > 0) {
		memcpy(k + PREFIX, key, klen);
	}
	return PREFIX + klen;
}

static struct testfsm_group *grp(struct testfsm *t, uint32_t group)
{
	if (group >= TESTFSM_MAX_GROUPS) {
		fprintf(stderr, "testfsm: group %u out of range\n", group);
		abort();
	}
	return &t->g[group];
}

uint64_t testfsm_stored_applied(struct testfsm *t, uint32_t group)
{
	uint8_t k[PREFIX];
	char *err = NULL;
	size_t len;
	char *v;
	uint64_t applied = 0;

	make_key(k, t->ns, group, 'a', NULL, 0);
	v = rocksdb_get_cf(t->db, t->ro, t->cf, (const char *)k, sizeof k, &len,
	                   &err);
	if (err != NULL) {
		fprintf(stderr, "testfsm: %s\n", err);
		abort();
	}
	if (v != NULL && len == 8) {
		applied = get64((const uint8_t *)v);
	}
	free(v);
	return applied;
}

static struct testfsm_group *load(struct testfsm *t, uint32_t group)
{
	struct testfsm_group *g = grp(t, group);
	if (!g->loaded) {
		g->applied = testfsm_stored_applied(t, group);
		g->loaded = true;
	}
	return g;
}

static uint64_t read_counter(struct testfsm *t, uint32_t group,
                             const uint8_t *key, size_t klen)
{
	uint8_t k[PREFIX + 256];
	char *err = NULL;
	size_t len, n;
	char *v;
	uint64_t x = 0;

	n = make_key(k, t->ns, group, 'k', key, klen);
	v = rocksdb_get_cf(t->db, t->ro, t->cf, (const char *)k, n, &len, &err);
	if (err != NULL) {
		free(err);
		return 0;
	}
	if (v != NULL && len == 8) {
		x = get64((const uint8_t *)v);
	}
	free(v);
	return x;
}

struct overlay {
	const uint8_t *key;
	size_t klen;
	uint64_t value;
};

static int tf_apply(struct fsm *fsm, const struct fsm_entry *e,
                    struct fsm_result *results)
{
	struct testfsm *t = fsm->data;
	struct testfsm_group *g = load(t, e->group);
	rocksdb_writebatch_t *wb;
	struct overlay *ov;
	size_t n_ov = 0;
	uint8_t k[PREFIX + 256], v[8];
	char *err = NULL;
	unsigned i;

	t->apply_calls++;
	g->apply_calls++;
	if (t->fail_apply_at > 0 && e->index == (uint64_t)t->fail_apply_at) {
		return -1;
	}
	if (e->index <= g->applied) {
		t->skipped++;
		return 0;
	}
	if (e->now_ms < g->last_now_ms) {
		t->violations++;
	}
	g->last_now_ms = e->now_ms;
	ov = calloc(e->n_cmds, sizeof *ov);
	wb = rocksdb_writebatch_create();
	for (i = 0; i < e->n_cmds; i++) {
		const uint8_t *c = e->cmds[i].data;
		size_t len = e->cmds[i].len;
		size_t klen, kn;
		if (len >= 2 && (c[0] == 'A' || c[0] == 'P') &&
		    (size_t)c[1] + 2 <= len &&
		    (c[0] != 'A' || (size_t)c[1] + 10 == len)) {
			klen = c[1];
			kn = make_key(k, t->ns, e->group, 'k', c + 2, klen);
			if (c[0] == 'A') {
				uint64_t cur;
				size_t j;
				struct overlay *o = NULL;
				for (j = 0; j < n_ov; j++) {
					if (ov[j].klen == klen &&
					    memcmp(ov[j].key, c + 2, klen) ==
					        0) {
						o = &ov[j];
					}
				}
				if (o == NULL) {
					o = &ov[n_ov++];
					o->key = c + 2;
					o->klen = klen;
					o->value = read_counter(t, e->group,
					                        c + 2, klen);
				}
				cur = o->value + get64(c + 2 + klen);
				o->value = cur;
				put64(v, cur);
				rocksdb_writebatch_put_cf(wb, t->cf,
				                          (const char *)k, kn,
				                          (const char *)v, 8);
				results[i].data = malloc(16);
				put64(results[i].data, cur);
				put64(results[i].data + 8, e->index);
				results[i].len = 16;
			} else {
				rocksdb_writebatch_put_cf(
				    wb, t->cf, (const char *)k, kn,
				    (const char *)c + 2 + klen, len - 2 - klen);
				results[i].data = malloc(8);
				put64(results[i].data, e->index);
				results[i].len = 8;
			}
		} else if (len >= 1 && c[0] == 'N') {
			/* no-op */
		} else {
			results[i].data = malloc(3);
			memcpy(results[i].data, "ERR", 3);
			results[i].len = 3;
		}
		g->cmds++;
	}
	{
		size_t kn = make_key(k, t->ns, e->group, 'a', NULL, 0);
		put64(v, e->index);
		rocksdb_writebatch_put_cf(wb, t->cf, (const char *)k, kn,
		                          (const char *)v, 8);
	}
	rocksdb_write(t->db, t->wo, wb, &err);
	rocksdb_writebatch_destroy(wb);
	free(ov);
	if (err != NULL) {
		fprintf(stderr, "testfsm: write: %s\n", err);
		free(err);
		return -1;
	}
	g->applied = e->index;
	return 0;
}

static int tf_applied_index(struct fsm *fsm, uint32_t group, uint64_t *index)
{
	struct testfsm *t = fsm->data;
	*index = load(t, group)->applied;
	return 0;
}

static int tf_sync(struct fsm *fsm, uint32_t group)
{
	struct testfsm *t = fsm->data;
	char *err = NULL;
	(void)group;
	rocksdb_flush_wal(t->db, 1, &err);
	if (err != NULL) {
		free(err);
		return -1;
	}
	atomic_fetch_add(&t->syncs, 1);
	return 0;
}

/* State file: records of { u32 klen | key | u32 vlen | value } for the
 * group's keys (without the namespace/group prefix, kind included). */
static int tf_export(struct fsm *fsm, uint32_t group, const char *dir,
                     uint64_t *applied_index)
{
	struct testfsm *t = fsm->data;
	uint8_t lo[PREFIX], hi[PREFIX];
	rocksdb_iterator_t *it;
	char path[4352];
	FILE *f;

	snprintf(path, sizeof path, "%s/state", dir);
	f = fopen(path, "wb");
	if (f == NULL) {
		return -1;
	}
	make_key(lo, t->ns, group, 0, NULL, 0);
	make_key(hi, t->ns, group + 1, 0, NULL, 0);
	it = rocksdb_create_iterator_cf(t->db, t->ro, t->cf);
	for (rocksdb_iter_seek(it, (const char *)lo, sizeof lo);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t klen, vlen;
		const char *key = rocksdb_iter_key(it, &klen);
		const char *val = rocksdb_iter_value(it, &vlen);
		uint8_t n[4];
		if (klen < PREFIX || memcmp(key, lo, 8) != 0) {
			break;
		}
		put32(n, (uint32_t)(klen - 8));
		fwrite(n, 4, 1, f);
		fwrite(key + 8, klen - 8, 1, f);
		put32(n, (uint32_t)vlen);
		fwrite(n, 4, 1, f);
		fwrite(val, vlen, 1, f);
	}
	rocksdb_iter_destroy(it);
	fclose(f);
	*applied_index = load(t, group)->applied;
	t->exports++;
	return 0;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int tf_import(struct fsm *fsm, uint32_t group, const char *dir,
                     uint64_t *applied_index)
{
	struct testfsm *t = fsm->data;
	rocksdb_writebatch_t *wb;
	uint8_t lo[PREFIX], hi[PREFIX];
	char path[4352];
	uint8_t n[4];
	char *err = NULL;
	FILE *f;

	snprintf(path, sizeof path, "%s/state", dir);
	f = fopen(path, "rb");
	if (f == NULL) {
		return -1;
	}
	wb = rocksdb_writebatch_create();
	make_key(lo, t->ns, group, 0, NULL, 0);
	make_key(hi, t->ns, group + 1, 0, NULL, 0);
	rocksdb_writebatch_delete_range_cf(wb, t->cf, (const char *)lo, 8,
	                                   (const char *)hi, 8);
	while (fread(n, 4, 1, f) == 1) {
		uint32_t klen = get32(n), vlen;
		uint8_t *k = malloc(8 + klen), *v;
		memcpy(k, lo, 8);
		if (fread(k + 8, 1, klen, f) != klen ||
		    fread(n, 4, 1, f) != 1) {
			free(k);
			break;
		}
		vlen = get32(n);
		v = malloc(vlen > 0 ? vlen : 1);
		if (fread(v, 1, vlen, f) != vlen) {
			free(k);
			free(v);
			break;
		}
		rocksdb_writebatch_put_cf(wb, t->cf, (const char *)k, 8 + klen,
		                          (const char *)v, vlen);
		free(k);
		free(v);
	}
	fclose(f);
	rocksdb_write(t->db, t->wo, wb, &err);
	rocksdb_writebatch_destroy(wb);
	if (err != NULL) {
		free(err);
		return -1;
	}
	grp(t, group)->loaded = false;
	*applied_index = load(t, group)->applied;
	t->imports++;
	return 0;
}

static void tf_leader(struct fsm *fsm, uint32_t group, bool leader,
                      uint64_t term)
{
	struct testfsm *t = fsm->data;
	struct testfsm_group *g = grp(t, group);
	if (leader) {
		g->leader_up++;
		if (g->leader) {
			t->violations++; /* up twice without down */
		}
	} else {
		g->leader_down++;
		if (!g->leader) {
			t->violations++;
		}
	}
	g->leader = leader;
	g->leader_term = term;
}

void testfsm_init(struct testfsm *t, rocksdb_t *db,
                  rocksdb_column_family_handle_t *cf, uint32_t ns)
{
	memset(t, 0, sizeof *t);
	t->db = db;
	t->cf = cf;
	t->ns = ns;
	t->wo = rocksdb_writeoptions_create();
	t->ro = rocksdb_readoptions_create();
	atomic_init(&t->syncs, 0);
	t->fsm.data = t;
	t->fsm.apply = tf_apply;
	t->fsm.applied_index = tf_applied_index;
	t->fsm.sync = tf_sync;
	t->fsm.export_state = tf_export;
	t->fsm.import_state = tf_import;
	t->fsm.leader_changed = tf_leader;
}

void testfsm_reset(struct testfsm *t, rocksdb_t *db,
                   rocksdb_column_family_handle_t *cf)
{
	size_t i;
	t->db = db;
	t->cf = cf;
	for (i = 0; i < TESTFSM_MAX_GROUPS; i++) {
		t->g[i].loaded = false;
		t->g[i].leader = false;
	}
}

void testfsm_close(struct testfsm *t)
{
	rocksdb_writeoptions_destroy(t->wo);
	rocksdb_readoptions_destroy(t->ro);
}

size_t testfsm_cmd_add(uint8_t *buf, const char *key, uint64_t delta)
{
	size_t klen = strlen(key);
	buf[0] = 'A';
	buf[1] = (uint8_t)klen;
	memcpy(buf + 2, key, klen);
	put64(buf + 2 + klen, delta);
	return 2 + klen + 8;
}

size_t testfsm_cmd_put(uint8_t *buf, const char *key, const void *value,
                       size_t vlen)
{
	size_t klen = strlen(key);
	buf[0] = 'P';
	buf[1] = (uint8_t)klen;
	memcpy(buf + 2, key, klen);
	memcpy(buf + 2 + klen, value, vlen);
	return 2 + klen + vlen;
}

uint64_t testfsm_counter(struct testfsm *t, uint32_t group, const char *key)
{
	return read_counter(t, group, (const uint8_t *)key, strlen(key));
}

char *testfsm_value(struct testfsm *t, uint32_t group, const char *key,
                    size_t *len)
{
	uint8_t k[PREFIX + 256];
	char *err = NULL;
	size_t n = make_key(k, t->ns, group, 'k', key, strlen(key));
	char *v =
	    rocksdb_get_cf(t->db, t->ro, t->cf, (const char *)k, n, len, &err);
	free(err);
	return v;
}

/* The raft benchmarks' state machine; see bench_fsm.h. */
#include "bench/bench_fsm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int b_apply(struct fsm *fsm, const struct fsm_entry *e,
                   struct fsm_result *results)
{
	struct bench_fsm *b = fsm->data;
	rocksdb_writebatch_t *wb;
	uint8_t k[17], v[8];
	char *err = NULL;

	(void)results;
	if (e->index <= b->applied[e->group]) {
		return 0;
	}
	if (b->null) {
		b->applied[e->group] = e->index;
		return 0;
	}
	wb = rocksdb_writebatch_create();
	for (unsigned i = 0; i < e->n_cmds; i++) {
		put32(k, e->group);
		k[4] = 'r';
		put64(k + 5, e->index);
		put32(k + 13, i);
		rocksdb_writebatch_put_cf(wb, b->cf, (const char *)k, sizeof k,
		                          (const char *)e->cmds[i].data,
		                          e->cmds[i].len);
	}
	put32(k, e->group);
	k[4] = 'a';
	put64(v, e->index);
	rocksdb_writebatch_put_cf(wb, b->cf, (const char *)k, 5,
	                          (const char *)v, 8);
	rocksdb_write(b->db, b->wo, wb, &err);
	rocksdb_writebatch_destroy(wb);
	if (err != NULL) {
		fprintf(stderr, "%s: apply: %s\n", b->name, err);
		free(err);
		return -1;
	}
	b->applied[e->group] = e->index;
	return 0;
}

static int b_applied(struct fsm *fsm, uint32_t group, uint64_t *index)
{
	struct bench_fsm *b = fsm->data;
	*index = b->applied[group];
	return 0;
}

/* Applied state skips the WAL: it reaches the disk by a flush. */
static int b_sync(struct fsm *fsm, uint32_t group)
{
	struct bench_fsm *b = fsm->data;
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	char *err = NULL;
	int rv = 0;

	(void)group;
	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_flush_cf(b->db, fo, b->cf, &err);
	rocksdb_flushoptions_destroy(fo);
	if (err != NULL) {
		fprintf(stderr, "%s: flush: %s\n", b->name, err);
		free(err);
		rv = -1;
	}
	return rv;
}

int bench_fsm_init(struct bench_fsm *b, rocksdb_t *db,
                   rocksdb_column_family_handle_t *cf, unsigned groups,
                   bool null, const char *name)
{
	memset(b, 0, sizeof *b);
	b->db = db;
	b->cf = cf;
	b->null = null;
	b->name = name;
	b->applied = calloc((size_t)groups + 1, sizeof *b->applied);
	b->wo = rocksdb_writeoptions_create();
	if (b->applied == NULL || b->wo == NULL) {
		bench_fsm_close(b);
		return -1;
	}
	rocksdb_writeoptions_disable_WAL(b->wo, 1);
	b->fsm.data = b;
	b->fsm.apply = b_apply;
	b->fsm.applied_index = b_applied;
	b->fsm.sync = b_sync;
	return 0;
}

void bench_fsm_close(struct bench_fsm *b)
{
	if (b->wo != NULL) {
		rocksdb_writeoptions_destroy(b->wo);
	}
	free(b->applied);
	b->wo = NULL;
	b->applied = NULL;
}

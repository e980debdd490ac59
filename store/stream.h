/* Stream shard records as store/ modules read them (stream.c owns the
 * layout): a run is the records one append command wrote, stored under one
 * key named by its last offset; a reader looks records up by offset. */
#ifndef LS_STORE_STREAM_H
#define LS_STORE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/internal.h"

/* A run's value stops growing at this size (a bigger record is a run of
 * its own): reads that start inside a run (history pages, group polls)
 * load at most about this much beyond what they return. */
#define STREAM_RUN_MAX_BYTES (256u * 1024)

/* One run being walked; its pointers borrow the key and value it was
 * opened on. */
struct stream_run {
	uint64_t ts;    /* entry time of every record in the run */
	uint64_t first; /* offset of the first record */
	uint64_t last;  /* offset of the last record (the key's offset) */
	uint64_t next;  /* offset stream_run_next returns next */
	const uint8_t *p;
	const uint8_t *end;
};

/* Opens a run from its record key and value: 0, or -1 when malformed. */
int stream_run_open(const uint8_t *kp, size_t kl, const uint8_t *vp, size_t vl,
                    struct stream_run *run);
/* The next record: 1 (offset, payload borrowed from the value), 0 at the
 * end of the run, -1 when malformed. */
int stream_run_next(struct stream_run *run, uint64_t *offset,
                    const uint8_t **payload, size_t *len);

/* Point lookups of records of one shard, cheapest in increasing offset
 * order (a run is read once for all its records). */
struct stream_reader {
	struct tx *tx;
	struct store_slice scope; /* borrowed */
	uint32_t shard;
	struct titer it;
	struct sbuf k;
	bool open;   /* `it` is open */
	bool in_run; /* `run` is the run at the iterator */
	struct stream_run run;
	struct stream_run start; /* `run` as opened, to walk back */
};

void stream_reader_init(struct stream_reader *r, struct tx *tx,
                        struct store_slice scope, uint32_t shard);
/* The record at `offset`: 1 (payload borrowed until the next call or the
 * close), 0 when there is none, -1 on failure (the tx failed). */
int stream_reader_get(struct stream_reader *r, uint64_t offset, uint64_t *ts,
                      const uint8_t **payload, size_t *len);
/* Returns -1 (and fails the tx) on an iterator error. */
int stream_reader_close(struct stream_reader *r);

#endif

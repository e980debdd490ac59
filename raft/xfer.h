/* State transfer for snapshots, over the node transport.
 *
 * libraft sends an InstallSnapshot as one in-memory buffer, which for us is
 * only a manifest ("the state as of applied index i"). The state itself is
 * the group's key range, moved beside it: the follower (xfer_fetch) asks a
 * replica for the group's state as of at least i; that replica exports it
 * (fsm->export_state: SST files from a RocksDB snapshot, on a worker
 * thread) into a directory and lists the files; the follower pulls them in
 * chunks with a bounded window, writes them into its own directory and
 * hands the directory to the group (group.c imports it, then lets libraft
 * store the snapshot). Exports nobody pulls for `export_ttl_ms` are
 * removed.
 *
 * A failed attempt (source behind, busy, gone, silent for `timeout_ms`)
 * is retried after `retry_ms` from the next source: the sender of the
 * snapshot first, then the sources callback (the leader, other replicas).
 *
 * Everything runs on the loop thread except the export itself. */
#ifndef LS_RAFT_XFER_H
#define LS_RAFT_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "raft/group.h"
#include "raft/transport.h"

struct xfer;

typedef void (*xfer_close_cb)(struct xfer *x, void *data);

struct xfer_options {
	uint64_t node_id;
	const char *dir;        /* work directory: created, emptied at start */
	unsigned chunk_bytes;   /* 0 = 1 MiB */
	unsigned window;        /* chunks in flight; 0 = 4 */
	unsigned timeout_ms;    /* without progress; 0 = 10000 */
	unsigned retry_ms;      /* 0 = 1000 */
	unsigned max_exports;   /* exports kept at once; 0 = 4 */
	unsigned export_ttl_ms; /* 0 = 60000 */
	/* Worker thread: writes the state of `group` into `dir`. */
	int (*export_state)(void *data, uint32_t group, const char *dir,
	                    uint64_t *applied);
	/* Loop thread: the group's current applied index here. */
	int (*applied_index)(void *data, uint32_t group, uint64_t *index);
	/* Other nodes that hold the group (the leader first). */
	size_t (*sources)(void *data, uint32_t group, uint64_t *out,
	                  size_t max);
	transport_log_fn log;
	void *data;
};

struct xfer_stats {
	uint64_t fetches;  /* completed */
	uint64_t attempts; /* started, including retries */
	uint64_t bytes_in;
	uint64_t exports; /* completed exports served */
	uint64_t bytes_out;
	uint64_t running; /* fetches under way */
};

int xfer_init(struct xfer **out, uv_loop_t *loop, struct transport *t,
              const struct xfer_options *o, char *err, size_t errlen);

/* A group_fetch_fn (data = the xfer). */
int xfer_fetch(void *data, uint32_t group, uint64_t from, uint64_t index,
               group_fetch_done_fn done, void *done_data);

/* Transport frames of the MSG_XFER_* kinds and connection changes. */
void xfer_on_frame(struct xfer *x, uint64_t peer, uint8_t kind,
                   const uint8_t *p, size_t len);
void xfer_on_peer(struct xfer *x, uint64_t peer, bool up, uint64_t gen);

void xfer_stats(const struct xfer *x, struct xfer_stats *st);

/* Gives up every fetch (its done callback runs with a non-zero status),
 * drops the exports, waits for running export threads, then calls `cb`. */
void xfer_close(struct xfer *x, xfer_close_cb cb, void *data);
void xfer_free(struct xfer *x);

#endif

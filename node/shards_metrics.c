/* The replicated core's metrics, read at scrape time: per-group Raft state
 * (up to a limit of groups, aggregates always), the Raft log writer,
 * RocksDB's properties, the row cache, the data writer, forwarding, the
 * node transport's peers and snapshot transfers. Everything here is read
 * from state the modules keep anyway; nothing is counted on a hot path. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/admin/admin.h"
#include "node/shards_internal.h"
#include "raft/forward.h"
#include "raft/group.h"
#include "raft/io.h"
#include "raft/transport.h"
#include "raft/xfer.h"
#include "store/cfstats.h"
#include "store/db.h"
#include "store/dwrite.h"
#include "store/rowcache.h"
#include "store/store.h"

/* What the per-group families need of one group's status. */
struct gsample {
	uint32_t group;
	int role;
	uint64_t term;
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t last_index;
	uint64_t elections;
	uint64_t leaderships;
	uint64_t snapshots_sent;
	uint64_t snapshots_installed;
	unsigned n_progress;
	uint64_t follower[GROUP_MAX_VOTERS];
	uint64_t lag[GROUP_MAX_VOTERS];
};

enum gfield {
	GF_TERM,
	GF_ROLE,
	GF_COMMIT,
	GF_APPLIED,
	GF_LAST,
	GF_ELECTIONS,
	GF_LEADERSHIPS,
	GF_SNAP_SENT,
	GF_SNAP_INSTALLED,
	GF_COUNT
};

static const struct {
	const char *name;
	enum metric_type type;
	const char *help;
} gfamily[GF_COUNT] = {
    [GF_TERM] = {"lodestone_raft_group_term", METRIC_GAUGE,
                 "Current Raft term of the group's replica here"},
    [GF_ROLE] = {"lodestone_raft_group_role", METRIC_GAUGE,
                 "Role of the group's replica here: 0 unavailable, "
                 "1 follower, 2 candidate, 3 leader"},
    [GF_COMMIT] = {"lodestone_raft_group_commit_index", METRIC_GAUGE,
                   "Highest log index known committed"},
    [GF_APPLIED] = {"lodestone_raft_group_applied_index", METRIC_GAUGE,
                    "Highest log index applied to the state machine"},
    [GF_LAST] = {"lodestone_raft_group_last_index", METRIC_GAUGE,
                 "Highest log index in the replica's log"},
    [GF_ELECTIONS] = {"lodestone_raft_group_elections_total", METRIC_COUNTER,
                      "Elections the replica ran (terms it was candidate "
                      "or leader in) since the process started"},
    [GF_LEADERSHIPS] = {"lodestone_raft_group_leaderships_total",
                        METRIC_COUNTER,
                        "Terms the replica led since the process started"},
    [GF_SNAP_SENT] = {"lodestone_raft_group_snapshots_sent_total",
                      METRIC_COUNTER,
                      "InstallSnapshot messages sent to lagging followers"},
    [GF_SNAP_INSTALLED] = {"lodestone_raft_group_snapshots_installed_total",
                           METRIC_COUNTER,
                           "Snapshots received from the leader and "
                           "installed"},
};

static uint64_t gvalue(const struct gsample *g, enum gfield f)
{
	switch (f) {
	case GF_TERM:
		return g->term;
	case GF_ROLE:
		return (uint64_t)g->role;
	case GF_COMMIT:
		return g->commit_index;
	case GF_APPLIED:
		return g->applied_index;
	case GF_LAST:
		return g->last_index;
	case GF_ELECTIONS:
		return g->elections;
	case GF_LEADERSHIPS:
		return g->leaderships;
	case GF_SNAP_SENT:
		return g->snapshots_sent;
	case GF_SNAP_INSTALLED:
		return g->snapshots_installed;
	default:
		return 0;
	}
}

static void one_family(struct metrics_out *o, const char *name,
                       enum metric_type type, const char *help, uint64_t v)
{
	metrics_out_family(o, name, type, help);
	metrics_out_uint(o, name, NULL, v);
}

static void raft_groups(struct shards *s, struct metrics_out *o,
                        unsigned max_groups)
{
	struct gsample *gs = NULL;
	size_t n = 0, n_local = 0;
	uint64_t by_role[4] = {0};
	uint64_t max_lag = 0, max_apply_lag = 0;
	bool per_group;
	char labels[96];

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		n_local += s->routes[g].local ? 1 : 0;
	}
	per_group = n_local <= max_groups;
	if (per_group && n_local > 0) {
		gs = calloc(n_local, sizeof *gs);
		per_group = gs != NULL;
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct group_status st;
		if (!s->routes[g].local ||
		    group_status(s->groups, g, &st) != REPLICA_OK) {
			continue;
		}
		by_role[st.role >= 0 && st.role < 4 ? st.role : 0]++;
		if (st.commit_index > st.applied_index &&
		    st.commit_index - st.applied_index > max_apply_lag) {
			max_apply_lag = st.commit_index - st.applied_index;
		}
		struct gsample tmp,
		    *x = per_group && n < n_local ? &gs[n++] : &tmp;
		memset(x, 0, sizeof *x);
		x->group = g;
		x->role = st.role;
		x->term = st.term;
		x->commit_index = st.commit_index;
		x->applied_index = st.applied_index;
		x->last_index = st.last_index;
		x->elections = st.elections;
		x->leaderships = st.leaderships;
		x->snapshots_sent = st.snapshots_sent;
		x->snapshots_installed = st.snapshots_installed;
		for (unsigned i = 0; i < st.n_progress; i++) {
			uint64_t m = st.progress[i].match_index;
			uint64_t lag =
			    st.last_index > m ? st.last_index - m : 0;
			x->follower[i] = st.progress[i].id;
			x->lag[i] = lag;
			max_lag = lag > max_lag ? lag : max_lag;
		}
		x->n_progress = st.n_progress;
	}

	metrics_out_family(o, "lodestone_raft_groups", METRIC_GAUGE,
	                   "Raft groups replicated on this node, by role");
	static const char *const roles[4] = {"unavailable", "follower",
	                                     "candidate", "leader"};
	for (unsigned r = 0; r < 4; r++) {
		snprintf(labels, sizeof labels, "role=\"%s\"", roles[r]);
		metrics_out_uint(o, "lodestone_raft_groups", labels,
		                 by_role[r]);
	}
	one_family(o, "lodestone_raft_groups_quiescent", METRIC_GAUGE,
	           "Local Raft replicas quiescent now: idle, not ticking, "
	           "no heartbeats (docs/cluster.md \"Quiescence\")",
	           group_mgr_quiet(s->groups));
	one_family(o, "lodestone_metrics_group_series", METRIC_GAUGE,
	           "1 when the lodestone_raft_group_* families list every "
	           "local group; 0 when the node has more groups than "
	           "--metrics-max-groups and only aggregates are shown",
	           per_group ? 1 : 0);
	one_family(o, "lodestone_raft_follower_lag_max_entries", METRIC_GAUGE,
	           "Largest lag (leader's last index minus match index) of a "
	           "follower of any group led here",
	           max_lag);
	one_family(o, "lodestone_raft_apply_lag_max_entries", METRIC_GAUGE,
	           "Largest commit index minus applied index of any local "
	           "group",
	           max_apply_lag);
	{
		uint64_t el, le;
		group_mgr_counts(s->groups, &el, &le);
		one_family(o, "lodestone_raft_elections_total", METRIC_COUNTER,
		           "Elections run by this node's replicas", el);
		one_family(o, "lodestone_raft_leaderships_total",
		           METRIC_COUNTER, "Terms led by this node's replicas",
		           le);
	}
	if (!per_group) {
		free(gs);
		return;
	}
	for (unsigned f = 0; f < GF_COUNT; f++) {
		metrics_out_family(o, gfamily[f].name, gfamily[f].type,
		                   gfamily[f].help);
		for (size_t i = 0; i < n; i++) {
			snprintf(labels, sizeof labels, "group=\"%" PRIu32 "\"",
			         gs[i].group);
			metrics_out_uint(o, gfamily[f].name, labels,
			                 gvalue(&gs[i], (enum gfield)f));
		}
	}
	metrics_out_family(o, "lodestone_raft_group_follower_lag_entries",
	                   METRIC_GAUGE,
	                   "On the leader: the leader's last index minus the "
	                   "follower's match index");
	for (size_t i = 0; i < n; i++) {
		for (unsigned k = 0; k < gs[i].n_progress; k++) {
			snprintf(labels, sizeof labels,
			         "group=\"%" PRIu32 "\",follower=\"%" PRIu64
			         "\"",
			         gs[i].group, gs[i].follower[k]);
			metrics_out_uint(
			    o, "lodestone_raft_group_follower_lag_entries",
			    labels, gs[i].lag[k]);
		}
	}
	free(gs);
}

static void raft_log(struct shards *s, struct metrics_out *o)
{
	struct rio_stats rs;

	rio_store_stats(s->rio, &rs);
	one_family(o, "lodestone_raft_log_batches_total", METRIC_COUNTER,
	           "Batches the Raft log writer wrote (every group's appends "
	           "of a loop turn in one)",
	           rs.batches);
	one_family(o, "lodestone_raft_log_entries_total", METRIC_COUNTER,
	           "Raft log entries written", rs.entries);
	one_family(o, "lodestone_raft_log_bytes_total", METRIC_COUNTER,
	           "Raft log entry payload bytes written", rs.bytes);
	one_family(o, "lodestone_raft_log_write_errors_total", METRIC_COUNTER,
	           "Raft log batches whose write or sync failed",
	           rs.write_errors);
	one_family(o, "lodestone_raft_log_wal_segments", METRIC_GAUGE,
	           "Segment files of the Raft log's write-ahead log on disk",
	           rs.wal_segments);
	metrics_out_family(o, "lodestone_raft_log_fsync_duration_seconds",
	                   METRIC_HISTOGRAM,
	                   "Duration of the Raft log writer's fdatasync calls "
	                   "(group commit: one per set of batches)");
	metrics_out_hist(o, "lodestone_raft_log_fsync_duration_seconds", NULL,
	                 rio_sync_bounds_ns, rs.sync_hist, RIO_SYNC_BUCKETS,
	                 rs.syncs, rs.sync_ns);
	one_family(o, "lodestone_raft_snapshots_sent_total", METRIC_COUNTER,
	           "InstallSnapshot messages sent, every group",
	           rs.snapshots_sent);
	one_family(o, "lodestone_raft_snapshots_installed_total",
	           METRIC_COUNTER, "Leaders' snapshots installed, every group",
	           rs.snapshots_installed);
}

static void rocksdb(struct shards *s, struct metrics_out *o)
{
	static const struct {
		const char *prop;
		const char *name;
		const char *help;
	} cfprops[] = {
	    {"rocksdb.cur-size-all-mem-tables",
	     "lodestone_rocksdb_memtable_bytes",
	     "Bytes in the column family's memtables (active and immutable)"},
	    {"rocksdb.num-immutable-mem-table",
	     "lodestone_rocksdb_immutable_memtables",
	     "Immutable memtables not yet flushed"},
	    {"rocksdb.live-sst-files-size", "lodestone_rocksdb_live_sst_bytes",
	     "Bytes of the SST files of the current version"},
	    {"rocksdb.total-sst-files-size", "lodestone_rocksdb_sst_bytes",
	     "Bytes of every SST file, obsolete ones not yet deleted included"},
	    {"rocksdb.live-blob-file-size", "lodestone_rocksdb_live_blob_bytes",
	     "Bytes of the blob files of the current version"},
	    {"rocksdb.estimate-pending-compaction-bytes",
	     "lodestone_rocksdb_pending_compaction_bytes",
	     "Estimated bytes compaction must rewrite to settle the levels"},
	    {"rocksdb.compaction-pending",
	     "lodestone_rocksdb_compaction_pending",
	     "1 when at least one compaction is pending"},
	};
	const struct {
		const char *name;
		rocksdb_column_family_handle_t *cf;
	} cfs[] = {{"raft_log", s->db->raft_log},
	           {"raft_state", s->db->raft_state},
	           {"data", s->db->data}};
	const size_t n_cfs = sizeof cfs / sizeof cfs[0];
	char labels[64];
	uint64_t v;

	for (size_t p = 0; p < sizeof cfprops / sizeof cfprops[0]; p++) {
		metrics_out_family(o, cfprops[p].name, METRIC_GAUGE,
		                   cfprops[p].help);
		for (size_t c = 0; c < n_cfs; c++) {
			if (cfs[c].cf == NULL ||
			    rocksdb_property_int_cf(s->db->db, cfs[c].cf,
			                            cfprops[p].prop, &v) != 0) {
				continue;
			}
			snprintf(labels, sizeof labels, "cf=\"%s\"",
			         cfs[c].name);
			metrics_out_uint(o, cfprops[p].name, labels, v);
		}
	}
	{
		uint64_t comp[3] = {0}, stall[3] = {0};
		for (size_t c = 0; c < n_cfs; c++) {
			char *text =
			    cfs[c].cf == NULL
			        ? NULL
			        : rocksdb_property_value_cf(
			              s->db->db, cfs[c].cf,
			              "rocksdb.cfstats-no-file-histogram");
			if (text != NULL) {
				struct store_cfstats cs;
				store_cfstats_parse(text, strlen(text), &cs);
				comp[c] = cs.compactions;
				stall[c] = cs.stalls;
				rocksdb_free(text);
			}
		}
		metrics_out_family(o, "lodestone_rocksdb_compactions_total",
		                   METRIC_COUNTER,
		                   "Compactions run since the database opened");
		for (size_t c = 0; c < n_cfs; c++) {
			snprintf(labels, sizeof labels, "cf=\"%s\"",
			         cfs[c].name);
			metrics_out_uint(o,
			                 "lodestone_rocksdb_compactions_total",
			                 labels, comp[c]);
		}
		metrics_out_family(o, "lodestone_rocksdb_write_stalls_total",
		                   METRIC_COUNTER,
		                   "Writes slowed down or stopped by RocksDB's "
		                   "write stall conditions (every cause)");
		for (size_t c = 0; c < n_cfs; c++) {
			snprintf(labels, sizeof labels, "cf=\"%s\"",
			         cfs[c].name);
			metrics_out_uint(o,
			                 "lodestone_rocksdb_write_stalls_total",
			                 labels, stall[c]);
		}
	}
	static const struct {
		const char *prop;
		const char *name;
		const char *help;
	} dbprops[] = {
	    {"rocksdb.num-running-compactions",
	     "lodestone_rocksdb_running_compactions", "Compactions running"},
	    {"rocksdb.num-running-flushes", "lodestone_rocksdb_running_flushes",
	     "Memtable flushes running"},
	    {"rocksdb.is-write-stopped", "lodestone_rocksdb_write_stopped",
	     "1 while RocksDB stops writes (a write stall)"},
	    {"rocksdb.actual-delayed-write-rate",
	     "lodestone_rocksdb_delayed_write_rate_bytes_per_second",
	     "Write rate RocksDB slows writers down to (0: not delayed)"},
	    {"rocksdb.block-cache-usage", "lodestone_rocksdb_block_cache_bytes",
	     "Bytes held in the block cache"},
	};
	for (size_t p = 0; p < sizeof dbprops / sizeof dbprops[0]; p++) {
		if (rocksdb_property_int(s->db->db, dbprops[p].prop, &v) != 0) {
			continue;
		}
		one_family(o, dbprops[p].name, METRIC_GAUGE, dbprops[p].help,
		           v);
	}
}

static void store_caches(struct shards *s, struct metrics_out *o)
{
	struct rowcache_stats rc;
	struct dwrite_stats ws;

	store_row_cache_stats(s->store, &rc);
	one_family(o, "lodestone_row_cache_hits_total", METRIC_COUNTER,
	           "Row cache lookups that found the row", rc.hits);
	one_family(o, "lodestone_row_cache_misses_total", METRIC_COUNTER,
	           "Row cache lookups that went to RocksDB", rc.misses);
	one_family(o, "lodestone_row_cache_evictions_total", METRIC_COUNTER,
	           "Rows evicted from the row cache", rc.evictions);
	one_family(o, "lodestone_row_cache_rows", METRIC_GAUGE,
	           "Rows held in the row cache", rc.rows);
	one_family(o, "lodestone_row_cache_bytes", METRIC_GAUGE,
	           "Bytes held in the row cache", rc.bytes);
	one_family(o, "lodestone_row_cache_max_bytes", METRIC_GAUGE,
	           "The row cache's bound", rc.max_bytes);
	store_writer_stats(s->store, &ws);
	one_family(o, "lodestone_data_writer_batches_total", METRIC_COUNTER,
	           "Applied entries' batches the data writer wrote",
	           ws.batches);
	one_family(o, "lodestone_data_writer_full_waits_total", METRIC_COUNTER,
	           "Submits that waited for room in the data writer's queue",
	           ws.waits);
	one_family(o, "lodestone_data_writer_drains_total", METRIC_COUNTER,
	           "Reads that waited for the data writer's queue to drain",
	           ws.drains);
	one_family(o, "lodestone_data_writer_checkpoints_total", METRIC_COUNTER,
	           "KV write-back checkpoints written", ws.checkpoints);
}

static void forwarding(struct shards *s, struct metrics_out *o)
{
	struct forward_stats fs;
	struct xfer_stats xs = {0};
	char labels[64];

	forward_stats(s->f, &fs);
	fs.local += s->direct; /* served here too, without the forward call */
	metrics_out_family(o, "lodestone_forward_requests_total",
	                   METRIC_COUNTER,
	                   "Proposals and reads by where they ran: local (this "
	                   "node led the group), sent (forwarded to the "
	                   "leader elsewhere), served (forwarded here by a "
	                   "peer)");
	metrics_out_uint(o, "lodestone_forward_requests_total",
	                 "kind=\"local\"", fs.local);
	metrics_out_uint(o, "lodestone_forward_requests_total", "kind=\"sent\"",
	                 fs.sent);
	metrics_out_uint(o, "lodestone_forward_requests_total",
	                 "kind=\"served\"", fs.served);
	one_family(o, "lodestone_forward_retries_total", METRIC_COUNTER,
	           "Forwarded attempts repeated after not leader or a wait",
	           fs.retries);
	metrics_out_family(o, "lodestone_forward_errors_total", METRIC_COUNTER,
	                   "Forwarding failures by kind: refused (answered "
	                   "not leader here), timeout (no leader in time), "
	                   "unknown (a write's outcome unknown)");
	metrics_out_uint(o, "lodestone_forward_errors_total",
	                 "kind=\"refused\"", fs.refused);
	metrics_out_uint(o, "lodestone_forward_errors_total",
	                 "kind=\"timeout\"", fs.timeouts);
	metrics_out_uint(o, "lodestone_forward_errors_total",
	                 "kind=\"unknown\"", fs.unknown);
	one_family(o, "lodestone_forward_in_flight", METRIC_GAUGE,
	           "Forwarded requests not answered yet", fs.in_flight);
	if (s->x != NULL) {
		xfer_stats(s->x, &xs);
	}
	metrics_out_family(o, "lodestone_snapshot_transfer_bytes_total",
	                   METRIC_COUNTER,
	                   "Snapshot state transfer bytes, by direction");
	snprintf(labels, sizeof labels, "direction=\"in\"");
	metrics_out_uint(o, "lodestone_snapshot_transfer_bytes_total", labels,
	                 xs.bytes_in);
	snprintf(labels, sizeof labels, "direction=\"out\"");
	metrics_out_uint(o, "lodestone_snapshot_transfer_bytes_total", labels,
	                 xs.bytes_out);
	one_family(o, "lodestone_snapshot_transfers_running", METRIC_GAUGE,
	           "Snapshot state fetches under way", xs.running);
}

static void peers(struct shards *s, struct metrics_out *o)
{
	struct transport_peer_info *pi;
	size_t n;
	static const struct {
		const char *name;
		enum metric_type type;
		const char *help;
	} fam[] = {
	    {"lodestone_peer_connected", METRIC_GAUGE,
	     "1 while the node transport's connection to the peer is up"},
	    {"lodestone_peer_queue_bytes", METRIC_GAUGE,
	     "Bytes queued to the peer and not yet written"},
	    {"lodestone_peer_frames_dropped_total", METRIC_COUNTER,
	     "Frames to the peer dropped: no connection or its queue full"},
	    {"lodestone_peer_sent_bytes_total", METRIC_COUNTER,
	     "Bytes written to the peer"},
	    {"lodestone_peer_received_bytes_total", METRIC_COUNTER,
	     "Bytes read from the peer"},
	    {"lodestone_peer_connects_total", METRIC_COUNTER,
	     "Handshakes completed with the peer"},
	};

	if (s->t == NULL) {
		return;
	}
	pi = calloc(MAX_NODES, sizeof *pi);
	if (pi == NULL) {
		return;
	}
	n = transport_peers(s->t, pi, MAX_NODES);
	n = n < MAX_NODES ? n : MAX_NODES;
	for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
		metrics_out_family(o, fam[f].name, fam[f].type, fam[f].help);
		for (size_t i = 0; i < n; i++) {
			char labels[48];
			uint64_t v = 0;
			snprintf(labels, sizeof labels, "peer=\"%" PRIu64 "\"",
			         pi[i].id);
			switch (f) {
			case 0:
				v = pi[i].connected ? 1 : 0;
				break;
			case 1:
				v = pi[i].queued;
				break;
			case 2:
				v = pi[i].dropped;
				break;
			case 3:
				v = pi[i].bytes_sent;
				break;
			case 4:
				v = pi[i].bytes_received;
				break;
			default:
				v = pi[i].connects;
				break;
			}
			metrics_out_uint(o, fam[f].name, labels, v);
		}
	}
	free(pi);
}

void shards_metrics(struct shards *s, struct metrics_out *o,
                    unsigned max_groups)
{
	raft_groups(s, o, max_groups);
	raft_log(s, o);
	rocksdb(s, o);
	store_caches(s, o);
	forwarding(s, o);
	peers(s, o);
}

/* FSNP control opcodes (lane 0): STARTUP/HELLO, OPTIONS and the capability
 * manifest, AUTH, PING, CLIENT.*, ROUTE/ROUTE_BATCH/SHARDS, BACKPRESSURE,
 * WINDOW_UPDATE, (UN)SUBSCRIBE_EVENTS, QUIT; and their COMMAND_EXEC
 * forms. Every handler runs synchronously and fills r->reply. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "flow/flow_index.h"
#include "node/fsnp/fsnp_internal.h"
#include "wire/flow_route.h"
#include "wire/fsnp_fqr.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

#define NAME_MAX_LEN 128

static const char *const events[] = {"GOAWAY", "TOPOLOGY_CHANGED",
                                     "BACKPRESSURE_CHANGED", "AUTH_INVALIDATED",
                                     "FLOW_WAKE"};
static const uint32_t event_bits[] = {
    FSNP_EV_GOAWAY, FSNP_EV_TOPOLOGY, FSNP_EV_BACKPRESSURE,
    FSNP_EV_AUTH_INVALIDATED, FSNP_EV_FLOW_WAKE};
#define N_EVENTS (sizeof events / sizeof events[0])

static const char *const codecs[] = {"kv_get_v1", "kv_mget_v1", "ok_list_v1",
                                     FSNP_FQR_CODEC};
static const uint32_t codec_bits[] = {FSNP_CODEC_KV_GET, FSNP_CODEC_KV_MGET,
                                      FSNP_CODEC_OK_LIST,
                                      FSNP_CODEC_FLOW_QUERY};
#define N_CODECS (sizeof codecs / sizeof codecs[0])

/* --- Small writers ----------------------------------------------------------
 */

static void w_strs(struct fsnp_writer *w, const char *const *v, size_t n)
{
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		fsnp_w_str(w, v[i]);
	}
	fsnp_w_array_end(w);
}

static void w_kv_u64(struct fsnp_writer *w, const char *k, uint64_t v)
{
	fsnp_w_key(w, k);
	fsnp_w_u64(w, v);
}

static void w_kv_str(struct fsnp_writer *w, const char *k, const char *v)
{
	fsnp_w_key(w, k);
	fsnp_w_str(w, v);
}

static void w_kv_bool(struct fsnp_writer *w, const char *k, bool v)
{
	fsnp_w_key(w, k);
	fsnp_w_bool(w, v);
}

static void reply_begin(struct fsnp_req *r, struct fsnp_writer *w)
{
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(w, &r->reply);
	fsnp_w_status(w, FSNP_STATUS_OK);
}

static void reply_end(struct fsnp_req *r, struct fsnp_writer *w)
{
	if (fsnp_w_finish(w) != 0) {
		fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy",
		                 "BUSY out of memory", true,
		                 FSNP_RETRY_AFTER_MS);
	}
}

static void reply_str(struct fsnp_req *r, const char *s)
{
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_str(&w, s);
	reply_end(r, &w);
}

static void reply_val(struct fsnp_req *r, const struct fsnp_val *v)
{
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_val(&w, v);
	reply_end(r, &w);
}

static void bad(struct fsnp_req *r, const char *msg)
{
	fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request", msg, false,
	                 0);
}

static void node_name(const struct fsnp_server *s, char *out, size_t cap)
{
	snprintf(out, cap, "%" PRIu64, s->node_id);
}

/* --- Manifest ----------------------------------------------------------------
 */

static void w_limits(struct fsnp_conn *c, struct fsnp_writer *w)
{
	const struct config_native *l = &c->srv->lim;
	fsnp_w_map_begin(w);
	w_kv_u64(w, "max_frame_bytes", l->max_frame_bytes);
	w_kv_u64(w, "unauthenticated_max_frame_bytes",
	         l->unauth_max_frame_bytes);
	w_kv_u64(w, "max_response_bytes", l->max_response_bytes);
	w_kv_u64(w, "max_lane_queue", l->lane_max_queue);
	w_kv_u64(w, "max_lanes_per_connection", l->max_lanes_per_connection);
	w_kv_u64(w, "max_pipeline_commands", l->max_pipeline_commands);
	w_kv_u64(w, "max_value_items", l->max_value_items);
	w_kv_u64(w, "max_value_depth", l->max_value_depth);
	fsnp_w_map_end(w);
}

static void w_flow_control(struct fsnp_conn *c, struct fsnp_writer *w)
{
	fsnp_w_map_begin(w);
	w_kv_u64(w, "max_inflight_per_connection", c->max_inflight_conn);
	w_kv_u64(w, "max_inflight_per_lane", c->max_inflight_lane);
	w_kv_bool(w, "enforced", true);
	w_kv_bool(w, "window_update", true);
	fsnp_w_map_end(w);
}

static void w_multiplexing(struct fsnp_conn *c, struct fsnp_writer *w)
{
	fsnp_w_map_begin(w);
	w_kv_bool(w, "lane_id", true);
	w_kv_bool(w, "request_id", true);
	w_kv_bool(w, "ordered_per_lane", true);
	w_kv_bool(w, "concurrent_lanes", true);
	w_kv_u64(w, "max_lanes_per_connection",
	         c->srv->lim.max_lanes_per_connection);
	fsnp_w_map_end(w);
}

/* The Flow/FQL manifest the official SDK refuses to connect without. The
 * shapes are those flow/'s indexes serve (flow_index_shapes), and
 * `indexes` is their catalog (FLOW.QUERY.INDEXES answers the
 * ferric.flow.query.indexes/v1 status).
 * FLOW.QUERY is served (node/fsnp/fsnp_flow_query.c). */
static void w_flow_query(struct fsnp_writer *w)
{
	static const char *const caps[] = {
	    "flow_query_v1",           "flow_query_result_projection_v1",
	    "flow_explain_v1",         "flow_explain_analyze_v1",
	    "flow_composite_index_v1", "flow_query_index_status_v1"};
	static const char *const langs[] = {"FQL1"};
	size_t n_shapes;
	const char *const *shapes = flow_index_shapes(&n_shapes);
	fsnp_w_map_begin(w);
	w_kv_str(w, "request_contract", "ferric.flow.query.request/v1");
	w_kv_str(w, "result_contract", FSNP_FQR_CONTRACT);
	w_kv_str(w, "explain_contract", "ferric.flow.explain/v1");
	w_kv_str(w, "index_status_contract", "ferric.flow.query.indexes/v1");
	fsnp_w_key(w, "capabilities");
	w_strs(w, caps, sizeof caps / sizeof caps[0]);
	fsnp_w_key(w, "language_versions");
	w_strs(w, langs, 1);
	fsnp_w_key(w, "shapes");
	w_strs(w, shapes, n_shapes);
	fsnp_w_key(w, "indexes");
	flow_index_catalog_write(w);
	w_kv_bool(w, "available", true);
	fsnp_w_map_end(w);
}

struct schema {
	const char *name;
	const char *required; /* comma-separated */
	const char *fields;
};

static const struct schema schemas[] = {
    {"GET", "key", "key,deadline_ms"},
    {"MGET", "keys", "keys,deadline_ms"},
    {"SET", "key,value",
     "key,value,ttl,exat,pxat,nx,xx,get,keepttl,deadline_ms"},
    {"DEL", "keys", "keys,deadline_ms"},
    {"MSET", "pairs", "pairs,deadline_ms"},
    {"CAS", "key,expected,value", "key,expected,value,ttl,deadline_ms"},
    {"LOCK", "key,owner,ttl_ms", "key,owner,ttl_ms,deadline_ms"},
    {"UNLOCK", "key,owner", "key,owner,deadline_ms"},
    {"EXTEND", "key,owner,ttl_ms", "key,owner,ttl_ms,deadline_ms"},
    {"RATELIMIT.ADD", "key,window_ms,max",
     "key,window_ms,max,count,deadline_ms"},
    {"FETCH_OR_COMPUTE", "key,ttl_ms", "key,ttl_ms,hint,deadline_ms"},
    {"FETCH_OR_COMPUTE_RESULT", "key,token,value,ttl_ms",
     "key,token,value,ttl_ms,deadline_ms"},
    {"FETCH_OR_COMPUTE_ERROR", "key,token,message",
     "key,token,message,deadline_ms"},
    {"HSET", "key,fields", "key,fields,deadline_ms"},
    {"HGET", "key,field", "key,field,deadline_ms"},
    {"HMGET", "key,fields", "key,fields,deadline_ms"},
    {"HGETALL", "key", "key,deadline_ms"},
    {"LPUSH", "key,values", "key,values,deadline_ms"},
    {"RPUSH", "key,values", "key,values,deadline_ms"},
    {"LPOP", "key", "key,count,deadline_ms"},
    {"RPOP", "key", "key,count,deadline_ms"},
    {"LRANGE", "key,start,stop", "key,start,stop,deadline_ms"},
    {"SADD", "key,members", "key,members,deadline_ms"},
    {"SREM", "key,members", "key,members,deadline_ms"},
    {"SMEMBERS", "key", "key,deadline_ms"},
    {"SISMEMBER", "key,member", "key,member,deadline_ms"},
    {"ZADD", "key,items", "key,items,deadline_ms"},
    {"ZREM", "key,members", "key,members,deadline_ms"},
    {"ZRANGE", "key,start,stop", "key,start,stop,withscores,deadline_ms"},
    {"ZSCORE", "key,member", "key,member,deadline_ms"},
    {"COMMAND_EXEC", "command", "command,args,deadline_ms"},
    {"PIPELINE", "commands", "commands,atomicity,return,deadline_ms"},
    {"FLOW.QUERY", "version,query", "version,query,params,deadline_ms"},
    {"FLOW.SCHEDULE.CREATE", "id,target",
     "id,kind,at_ms,start_at_ms,delay_ms,every_ms,cron,timezone,"
     "catchup_policy,overlap_policy,overlap_retry_ms,max_fires,end_at_ms,"
     "target,overwrite,now_ms,deadline_ms"},
    {"FLOW.SCHEDULE.GET", "id", "id,now_ms,deadline_ms"},
    {"FLOW.SCHEDULE.DELETE", "id", "id,now_ms,deadline_ms"},
    {"FLOW.SCHEDULE.FIRE_DUE", "",
     "worker,limit,lease_ms,block_ms,now_ms,deadline_ms"},
    {"FLOW.SCHEDULE.LIST", "",
     "state,kind,target_type,timezone,from_ms,to_ms,count,rev,now_ms,"
     "deadline_ms"},
    {"FLOW.SCHEDULE.FIRE", "id", "id,fire_at_ms,now_ms,deadline_ms"},
    {"FLOW.SCHEDULE.PAUSE", "id", "id,now_ms,deadline_ms"},
    {"FLOW.SCHEDULE.RESUME", "id", "id,now_ms,deadline_ms"},
};

static void w_csv(struct fsnp_writer *w, const char *csv)
{
	fsnp_w_array_begin(w);
	while (*csv != '\0') {
		const char *end = strchr(csv, ',');
		size_t n = end != NULL ? (size_t)(end - csv) : strlen(csv);
		fsnp_w_bin(w, csv, n);
		csv += n;
		if (*csv == ',') {
			csv++;
		}
	}
	fsnp_w_array_end(w);
}

static void w_schemas(struct fsnp_writer *w)
{
	fsnp_w_map_begin(w);
	for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
		fsnp_w_key(w, schemas[i].name);
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "required");
		w_csv(w, schemas[i].required);
		fsnp_w_key(w, "fields");
		w_csv(w, schemas[i].fields);
		fsnp_w_map_end(w);
	}
	fsnp_w_map_end(w);
}

/* Every FERRICSTORE_NATIVE_* setting of the seed, as it is in effect. */
void fsnp_control_settings(struct fsnp_server *s, struct fsnp_writer *w)
{
	const struct config_native *l = &s->lim;
	fsnp_w_map_begin(w);
	w_kv_bool(w, "FERRICSTORE_NATIVE_ENABLED", l->enabled);
	w_kv_u64(w, "FERRICSTORE_NATIVE_PORT", s->port);
	w_kv_str(w, "FERRICSTORE_NATIVE_ADVERTISE_HOST", s->advertise_host);
	w_kv_u64(w, "FERRICSTORE_NATIVE_TLS_PORT", s->tls_port);
	w_kv_u64(w, "FERRICSTORE_NATIVE_ADVERTISE_TLS_PORT",
	         s->advertise_tls_port);
	w_kv_str(w, "FERRICSTORE_NATIVE_TLS_CERT_FILE", s->tls_cert);
	w_kv_str(w, "FERRICSTORE_NATIVE_TLS_KEY_FILE", s->tls_key);
	w_kv_str(w, "FERRICSTORE_NATIVE_TLS_CA_CERT_FILE", l->tls_ca);
	w_kv_bool(w, "FERRICSTORE_REQUIRE_TLS", l->require_tls);
	w_kv_bool(w, "FERRICSTORE_NATIVE_TRACE", l->trace);
	w_kv_str(w, "FERRICSTORE_NATIVE_TRUSTED_REQUEST_CONTEXT_USERS",
	         l->trusted_request_context_users);
	w_kv_bool(w, "FERRICSTORE_NATIVE_REQUEST_COMPRESSION_ENABLED",
	          l->compression);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_FRAME_BYTES", l->max_frame_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_UNAUTHENTICATED_MAX_FRAME_BYTES",
	         l->unauth_max_frame_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_FRAME_ASSEMBLY_TIMEOUT_MS",
	         l->frame_assembly_timeout_ms);
	w_kv_u64(w, "FERRICSTORE_NATIVE_SEND_TIMEOUT_MS", l->send_timeout_ms);
	w_kv_u64(w, "FERRICSTORE_NATIVE_IDLE_TIMEOUT_MS", l->idle_timeout_ms);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_VALUE_ITEMS", l->max_value_items);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_VALUE_DEPTH", l->max_value_depth);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_LANES_PER_CONNECTION",
	         l->max_lanes_per_connection);
	w_kv_u64(w, "FERRICSTORE_NATIVE_LANE_MAX_QUEUE", l->lane_max_queue);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_PIPELINE_COMMANDS",
	         l->max_pipeline_commands);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_INFLIGHT_PER_CONNECTION",
	         l->max_inflight_per_connection);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_INFLIGHT_PER_LANE",
	         l->max_inflight_per_lane);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_RESPONSE_BYTES",
	         l->max_response_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_RESPONSE_CHUNK_BYTES",
	         l->response_chunk_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_OUTBOUND_BYTES_PER_CONNECTION",
	         l->max_outbound_bytes_per_connection);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_PENDING_CHUNKS",
	         l->max_pending_chunks);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_PENDING_CHUNK_BYTES",
	         l->max_pending_chunk_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_GLOBAL_EXECUTIONS",
	         l->max_global_executions);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_GLOBAL_LANES", l->max_global_lanes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_GLOBAL_BLOCKING_REQUESTS",
	         l->max_global_blocking_requests);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_GLOBAL_INBOUND_BUFFER_BYTES",
	         l->max_global_inbound_buffer_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_GLOBAL_SESSION_BYTES",
	         l->max_global_session_bytes);
	w_kv_u64(w, "FERRICSTORE_NATIVE_MAX_GLOBAL_OUTBOUND_BYTES",
	         l->max_global_outbound_bytes);
	w_kv_u64(w, "maxclients", l->maxclients);
	fsnp_w_map_end(w);
}

void fsnp_control_capabilities(struct fsnp_conn *c, struct fsnp_writer *w)
{
	struct fsnp_server *s = c->srv;
	static const char *const atomicity[] = {"none", "per_shard",
	                                        "same_shard"};
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "protocol_versions");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, 1);
	fsnp_w_array_end(w);
	w_kv_bool(w, "direction_bit", true);
	fsnp_w_key(w, "multiplexing");
	w_multiplexing(c, w);
	fsnp_w_key(w, "limits");
	w_limits(c, w);
	fsnp_w_key(w, "flow_control");
	w_flow_control(c, w);
	fsnp_w_key(w, "chunking");
	fsnp_w_map_begin(w);
	w_kv_bool(w, "request_reassembly", true);
	w_kv_bool(w, "response_chunks", true);
	w_kv_u64(w, "response_chunk_bytes", s->lim.response_chunk_bytes);
	w_kv_u64(w, "max_pending_chunks", s->lim.max_pending_chunks);
	w_kv_u64(w, "max_pending_chunk_bytes", s->lim.max_pending_chunk_bytes);
	w_kv_u64(w, "frame_assembly_timeout_ms",
	         s->lim.frame_assembly_timeout_ms);
	fsnp_w_map_end(w);

	fsnp_w_key(w, "response_codecs");
	fsnp_w_map_begin(w);
	w_kv_bool(w, "typed_value", true);
	w_kv_bool(w, "compact_flow_responses", c->compact_flow_responses);
	fsnp_w_key(w, "selected_compact");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < N_CODECS; i++) {
		if (c->codecs & codec_bits[i]) {
			fsnp_w_str(w, codecs[i]);
		}
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "compact_response_opcodes");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "kv_get_v1");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_GET);
	fsnp_w_array_end(w);
	fsnp_w_key(w, "kv_mget_v1");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_MGET);
	fsnp_w_array_end(w);
	fsnp_w_key(w, "ok_list_v1");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_SET);
	fsnp_w_i64(w, FSNP_OP_MSET);
	fsnp_w_array_end(w);
	/* Sent to connections with compact_flow_responses (COMMAND_EXEC
	 * for the SDK's FLOW.GET and FLOW.CLAIM_DUE ... RETURN RECORDS). */
	fsnp_w_key(w, "flow_claim_jobs_v1");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_FLOW_CLAIM_DUE);
	fsnp_w_array_end(w);
	fsnp_w_key(w, "flow_record_v1");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_COMMAND_EXEC);
	fsnp_w_i64(w, FSNP_OP_FLOW_GET);
	fsnp_w_array_end(w);
	fsnp_w_key(w, "flow_record_list_v1");
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_COMMAND_EXEC);
	fsnp_w_i64(w, FSNP_OP_FLOW_CLAIM_DUE);
	fsnp_w_i64(w, FSNP_OP_FLOW_RECLAIM);
	fsnp_w_array_end(w);
	/* Sent to connections that listed flow_query_result_v1. */
	fsnp_w_key(w, FSNP_FQR_CODEC);
	fsnp_w_array_begin(w);
	fsnp_w_i64(w, FSNP_OP_COMMAND_EXEC);
	fsnp_w_i64(w, FSNP_OP_FLOW_QUERY);
	fsnp_w_array_end(w);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "supported");
	w_strs(w,
	       (const char *const[]){"typed_value", "kv_get_v1", "kv_mget_v1",
	                             "ok_list_v1", "flow_claim_jobs_v1",
	                             "flow_record_v1", "flow_record_list_v1",
	                             FSNP_FQR_CODEC},
	       8);
	fsnp_w_map_end(w);

	fsnp_w_key(w, "pipeline");
	fsnp_w_map_begin(w);
	w_kv_str(w, "compact_request", "pipeline_v1");
	w_kv_u64(w, "values_only_mode_bit", 0x80);
	fsnp_w_key(w, "modes");
	fsnp_w_map_begin(w);
	w_kv_u64(w, "set", 1);
	w_kv_u64(w, "get", 2);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "return");
	w_strs(w, (const char *const[]){"maps", "pairs"}, 2);
	fsnp_w_map_end(w);

	fsnp_w_key(w, "compression");
	if (s->lim.compression) {
		w_strs(w, (const char *const[]){"none", "zlib"}, 2);
	} else {
		w_strs(w, (const char *const[]){"none"}, 1);
	}
	fsnp_w_key(w, "auth");
	if (fsnp_acl_has_password(s)) {
		w_strs(w, (const char *const[]){"password"}, 1);
	} else {
		w_strs(w, NULL, 0);
	}
	fsnp_w_key(w, "atomicity");
	w_strs(w, atomicity, 3);
	fsnp_w_key(w, "deadlines");
	fsnp_w_map_begin(w);
	w_kv_str(w, "field", "deadline_ms");
	w_kv_str(w, "clock", "server_unix_ms");
	fsnp_w_map_end(w);
	fsnp_w_key(w, "flow_query");
	w_flow_query(w);
	fsnp_w_key(w, "schemas");
	w_schemas(w);
	fsnp_w_key(w, "events");
	w_strs(w, events, N_EVENTS);

	fsnp_w_key(w, "opcodes");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < fsnp_opcode_count(); i++) {
		const struct fsnp_opcode_info *o = fsnp_opcode_at(i);
		if (o->group != FSNP_OPG_CONTROL && o->group != FSNP_OPG_KV) {
			continue;
		}
		fsnp_w_map_begin(w);
		w_kv_u64(w, "opcode", o->code);
		w_kv_str(w, "name", o->name);
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "commands");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < fsnp_cmd_count(); i++) {
		fsnp_w_str(w, fsnp_cmd_at(i)->name);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "features");
	fsnp_w_map_begin(w);
	w_kv_bool(w, "kv", true);
	w_kv_bool(w, "flow", true);
	w_kv_bool(w, "admin", false);
	w_kv_bool(w, "tls", s->tls_port != 0);
	w_kv_bool(w, "trace", s->lim.trace);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "settings");
	fsnp_control_settings(s, w);
	fsnp_w_map_end(w);
}

/* --- Routing ------------------------------------------------------------- */

static void w_endpoint_fields(struct fsnp_server *s, struct fsnp_writer *w)
{
	w_kv_str(w, "host", s->advertise_host);
	w_kv_str(w, "native_host", s->advertise_host);
	w_kv_u64(w, "native_port", s->advertise_port);
	if (s->advertise_tls_port != 0) {
		w_kv_u64(w, "native_tls_port", s->advertise_tls_port);
	}
}

static void w_endpoint(struct fsnp_server *s, struct fsnp_writer *w)
{
	fsnp_w_map_begin(w);
	w_endpoint_fields(s, w);
	fsnp_w_map_end(w);
}

/* Target of a shard: its leader's advertised FSNP endpoint, from the
 * routing snapshot. When the leader or its address is not known yet, this
 * node answers for it ("local_fallback": it forwards to the leader). */
static void w_target(struct fsnp_server *s, uint32_t group,
                     struct fsnp_writer *w)
{
	struct shards_route rt;
	char node[32], host[SHARDS_ADDR_MAX];
	const char *colon = NULL;
	unsigned long port = 0;
	if (shards_route(s->shards, group, &rt) == SHARDS_OK &&
	    rt.leader_id != 0 && rt.fsnp[0] != '\0') {
		colon = strrchr(rt.fsnp, ':');
		if (colon != NULL) {
			port = strtoul(colon + 1, NULL, 10);
		}
	}
	if (colon == NULL || port == 0 || port > 65535 || rt.is_self) {
		node_name(s, node, sizeof node);
		w_kv_str(w, "node", node);
		w_kv_str(w, "owner_node", node);
		w_kv_str(w, "leader_node", node);
		w_endpoint_fields(s, w);
		fsnp_w_key(w, "endpoint");
		w_endpoint(s, w);
		w_kv_str(w, "hint",
		         colon != NULL && rt.is_self ? "leader"
		                                     : "local_fallback");
		return;
	}
	snprintf(host, sizeof host, "%.*s", (int)(colon - rt.fsnp), rt.fsnp);
	snprintf(node, sizeof node, "%" PRIu64, rt.leader_id);
	w_kv_str(w, "node", node);
	w_kv_str(w, "owner_node", node);
	w_kv_str(w, "leader_node", node);
	w_kv_str(w, "host", host);
	w_kv_str(w, "native_host", host);
	w_kv_u64(w, "native_port", port);
	fsnp_w_key(w, "endpoint");
	fsnp_w_map_begin(w);
	w_kv_str(w, "host", host);
	w_kv_str(w, "native_host", host);
	w_kv_u64(w, "native_port", port);
	fsnp_w_map_end(w);
	w_kv_str(w, "hint", "remote_leader");
}

/* The lane a client should use for a shard: one per shard while they fit a
 * connection's lane limit beside the control lane 0, wrapped beyond it (so
 * 1,024 or more groups never need more lanes than a connection may open). */
static uint64_t shard_lane(const struct fsnp_server *s, unsigned shard)
{
	uint64_t n = s->lim.max_lanes_per_connection;
	return n > 1 ? shard % (n - 1) + 1 : 1;
}

void fsnp_control_shards(struct fsnp_server *s, struct fsnp_writer *w)
{
	unsigned n = s->data_groups;
	fsnp_w_map_begin(w);
	w_kv_u64(w, "slots", FSNP_SLOTS);
	w_kv_u64(w, "shard_count", n);
	w_kv_u64(w, "route_epoch", fsnp_server_route_epoch(s));
	fsnp_w_key(w, "ranges");
	fsnp_w_array_begin(w);
	for (unsigned i = 0; i < n && i < FSNP_SLOTS; i++) {
		unsigned first, last;
		if (fsnp_slot_range(i, n, &first, &last) != 0) {
			continue;
		}
		fsnp_w_map_begin(w);
		w_kv_u64(w, "first_slot", first);
		w_kv_u64(w, "last_slot", last);
		w_kv_u64(w, "shard", i);
		w_kv_u64(w, "lane_id", shard_lane(s, i));
		w_target(s, i + 1, w);
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_map_end(w);
}

void fsnp_control_route(struct fsnp_server *s, const uint8_t *key, size_t len,
                        struct fsnp_writer *w)
{
	unsigned slot = fsnp_slot_of(key, len);
	unsigned shard = fsnp_slot_shard(slot, s->data_groups);
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "key");
	fsnp_w_bin(w, key, len);
	w_kv_u64(w, "slot", slot);
	w_kv_u64(w, "shard", shard);
	w_kv_u64(w, "lane_id", shard_lane(s, shard));
	w_kv_u64(w, "route_epoch", fsnp_server_route_epoch(s));
	w_target(s, shard + 1, w);
	fsnp_w_map_end(w);
}

/* ROUTE {flow_id, [partition_key]} or {partition_key}: the flow's
 * partition (flow/flow_route.h) answered as the key "{<hash tag>}", whose
 * slot is the partition's. */
static void route_flow(struct fsnp_req *r, const struct fsnp_val *b)
{
	struct fsnp_bytes id = {NULL, 0}, pk = {NULL, 0};
	bool has_id = fsnp_map_bin(b, "flow_id", &id) == 0;
	bool has_pk = fsnp_map_bin(b, "partition_key", &pk) == 0;
	char buf[FLOW_AUTO_PARTITION_MAX], tag[FLOW_TAG_MAX + 2];
	const uint8_t *part;
	size_t plen, tlen;
	struct fsnp_writer w;
	if (!has_pk && !has_id) {
		bad(r, "ERR native flow_id and partition_key must be binary");
		return;
	}
	flow_route_partition(id.ptr, id.len, has_pk ? pk.ptr : NULL, pk.len,
	                     buf, &part, &plen);
	tag[0] = '{';
	tlen = flow_route_tag(part, plen, tag + 1);
	tag[tlen + 1] = '}';
	reply_begin(r, &w);
	fsnp_control_route(r->srv, (const uint8_t *)tag, tlen + 2, &w);
	reply_end(r, &w);
}

void fsnp_control_backpressure(struct fsnp_server *s, struct fsnp_writer *w)
{
	bool p = fsnp_server_pressure(s);
	fsnp_w_map_begin(w);
	w_kv_bool(w, "reject_writes", p);
	w_kv_bool(w, "keydir_full", false);
	w_kv_u64(w, "retry_after_ms", p ? FSNP_RETRY_AFTER_MS : 0);
	w_kv_u64(w, "executions", s->executions);
	w_kv_u64(w, "max_global_executions", s->lim.max_global_executions);
	w_kv_u64(w, "outbound_bytes", s->outbound_bytes);
	w_kv_u64(w, "max_global_outbound_bytes",
	         s->lim.max_global_outbound_bytes);
	w_kv_u64(w, "session_bytes", s->session_bytes);
	w_kv_u64(w, "blocking_requests", s->blocking);
	w_kv_u64(w, "connections", s->n_conns);
	fsnp_w_map_end(w);
}

/* --- Session ------------------------------------------------------------- */

static void w_hello(struct fsnp_req *r, struct fsnp_writer *w)
{
	struct fsnp_conn *c = r->conn;
	struct fsnp_server *s = c->srv;
	char node[32];
	node_name(s, node, sizeof node);
	fsnp_w_map_begin(w);
	w_kv_str(w, "protocol", "ferricstore-native");
	w_kv_u64(w, "version", FSNP_VERSION);
	w_kv_str(w, "compression", c->zlib ? "zlib" : "none");
	w_kv_u64(w, "client_id", c->id);
	w_kv_u64(w, "route_epoch", fsnp_server_route_epoch(s));
	fsnp_w_key(w, "capabilities");
	fsnp_control_capabilities(c, w);
	fsnp_w_key(w, "server");
	fsnp_w_map_begin(w);
	w_kv_str(w, "node", node);
	w_kv_str(w, "product", "lodestone");
	w_kv_str(w, "version", PACKAGE_VERSION);
	w_kv_bool(w, "native_enabled", true);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "route");
	fsnp_w_map_begin(w);
	w_kv_u64(w, "slots", FSNP_SLOTS);
	w_kv_u64(w, "shard_count", s->data_groups);
	if (c->authenticated) {
		w_kv_str(w, "node", node);
		w_endpoint_fields(s, w);
		fsnp_w_key(w, "endpoint");
		w_endpoint(s, w);
	}
	fsnp_w_map_end(w);
	w_kv_bool(w, "auth_required", !c->authenticated);
	fsnp_w_key(w, "backpressure");
	fsnp_control_backpressure(s, w);
	/* The official SDK reads limits only outside `capabilities`. */
	fsnp_w_key(w, "limits");
	w_limits(c, w);
	fsnp_w_key(w, "flow_control");
	w_flow_control(c, w);
	fsnp_w_key(w, "multiplexing");
	w_multiplexing(c, w);
	fsnp_w_map_end(w);
}

static int event_bit(struct fsnp_bytes name, uint32_t *bit)
{
	for (size_t i = 0; i < N_EVENTS; i++) {
		if (name.len == strlen(events[i]) &&
		    strncasecmp((const char *)name.ptr, events[i], name.len) ==
		        0) {
			*bit = event_bits[i];
			return 0;
		}
	}
	return -1;
}

/* events: a list of known names; *mask gets their bits. */
static int parse_events(struct fsnp_req *r, const struct fsnp_val *list,
                        uint32_t *mask)
{
	struct fsnp_iter it;
	struct fsnp_val v;
	*mask = 0;
	if (list->tag != FSNP_ARRAY) {
		bad(r, "ERR native field events must be a list");
		return -1;
	}
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &v)) {
		uint32_t bit;
		if (v.tag != FSNP_BIN || event_bit(v.as.bin, &bit) != 0) {
			bad(r, "ERR native events must be known event names");
			return -1;
		}
		*mask |= bit;
	}
	return 0;
}

static void w_subscription(struct fsnp_req *r)
{
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "subscribed");
	fsnp_w_array_begin(&w);
	for (size_t i = 0; i < N_EVENTS; i++) {
		if (r->conn->events & event_bits[i]) {
			fsnp_w_str(&w, events[i]);
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_key(&w, "supported");
	w_strs(&w, events, N_EVENTS);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

static int opt_name(struct fsnp_req *r, const struct fsnp_val *b,
                    const char *key, struct fsnp_bytes *out, bool *present)
{
	struct fsnp_val v;
	*present = false;
	if (fsnp_map_get(b, key, &v) != 0 || fsnp_val_is_nil(&v)) {
		return 0;
	}
	if (v.tag != FSNP_BIN || v.as.bin.len > NAME_MAX_LEN) {
		char msg[96];
		snprintf(msg, sizeof msg,
		         "ERR native %s must be binary of at most %d bytes",
		         key, NAME_MAX_LEN);
		bad(r, msg);
		return -1;
	}
	*out = v.as.bin;
	*present = true;
	return 0;
}

static void set_name(struct fsnp_conn *c, struct fsnp_bytes n)
{
	memcpy(c->name, n.ptr, n.len);
	c->name[n.len] = '\0';
}

static void startup(struct fsnp_req *r, const struct fsnp_val *b)
{
	struct fsnp_conn *c = r->conn;
	struct fsnp_bytes client, driver, comp;
	bool has_client, has_driver, has_comp, zlib = false, flow = false;
	struct fsnp_val v;
	uint32_t codec_mask = 0, ev_mask = 0;
	struct fsnp_writer w;

	if (opt_name(r, b, "client_name", &client, &has_client) != 0 ||
	    opt_name(r, b, "driver_name", &driver, &has_driver) != 0 ||
	    opt_name(r, b, "compression", &comp, &has_comp) != 0) {
		return;
	}
	if (has_comp) {
		if (fsnp_bytes_eq(comp, "zlib")) {
			if (!c->srv->lim.compression) {
				bad(r, "ERR native compression zlib is not "
				       "enabled on this server");
				return;
			}
			zlib = true;
		} else if (!fsnp_bytes_eq(comp, "none")) {
			bad(r, "ERR native unsupported compression");
			return;
		}
	}
	if (fsnp_map_get(b, "compact_response_codecs", &v) == 0 &&
	    !fsnp_val_is_nil(&v)) {
		struct fsnp_iter it;
		struct fsnp_val e;
		if (v.tag != FSNP_ARRAY) {
			bad(r, "ERR native compact_response_codecs must be a "
			       "list");
			return;
		}
		fsnp_iter_init(&it, &v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			size_t i;
			for (i = 0; i < N_CODECS; i++) {
				if (e.tag == FSNP_BIN &&
				    fsnp_bytes_eq(e.as.bin, codecs[i])) {
					break;
				}
			}
			if (i == N_CODECS) {
				bad(r,
				    "ERR native unsupported compact response "
				    "codec");
				return;
			}
			if (codec_mask & codec_bits[i]) {
				bad(r, "ERR native duplicate compact response "
				       "codec");
				return;
			}
			codec_mask |= codec_bits[i];
		}
	}
	if (fsnp_map_get(b, "compact_flow_responses", &v) == 0 &&
	    !fsnp_val_is_nil(&v) && fsnp_val_bool(&v, &flow) != 0) {
		bad(r, "ERR native compact_flow_responses must be boolean");
		return;
	}
	if (fsnp_map_get(b, "events", &v) == 0 && !fsnp_val_is_nil(&v)) {
		if (parse_events(r, &v, &ev_mask) != 0) {
			return;
		}
		if (ev_mask != 0 && !c->authenticated) {
			fsnp_reply_error(
			    r, FSNP_STATUS_AUTH, "auth",
			    "NOAUTH Authentication required before "
			    "event subscription.",
			    false, 0);
			return;
		}
	}
	if (has_client) {
		set_name(c, client);
	} else if (has_driver) {
		set_name(c, driver);
	}
	c->zlib = zlib;
	c->codecs = codec_mask;
	c->compact_flow_responses = flow;
	c->events |= ev_mask;
	reply_begin(r, &w);
	w_hello(r, &w);
	reply_end(r, &w);
}

static void auth(struct fsnp_req *r, struct fsnp_bytes user,
                 struct fsnp_bytes pass)
{
	struct fsnp_conn *c = r->conn;
	unsigned max = c->srv->lim.auth_max_failures;
	if (!fsnp_acl_auth(c, user, pass)) {
		fsnp_reply_error(r, FSNP_STATUS_AUTH, "auth",
		                 "WRONGPASS invalid username-password pair or "
		                 "user is disabled.",
		                 false, 0);
		/* Guessing costs a connection every `max` tries: the last
		 * answer is written, then the connection closes. Counted
		 * whatever happens in between, so a good AUTH on an account
		 * of its own does not buy a guesser more tries. */
		if (max > 0 && ++c->auth_failures >= max) {
			uint64_t now = fsnp_now_ms(c->srv);
			r->close_after = true;
			/* At most one line a second: guessers may be many. */
			if (now >= c->srv->auth_closed_logged_ms + 1000) {
				c->srv->auth_closed_logged_ms = now;
				log_info(
				    c->srv->log, "fsnp",
				    "closing the connection from %s after %u "
				    "failed AUTH attempts",
				    c->peer, c->auth_failures);
			}
		}
		return;
	}
	c->authenticated = true;
	c->max_frame = (uint32_t)c->srv->lim.max_frame_bytes;
	c->chunks.lim.max_message_bytes = c->max_frame;
	reply_str(r, "OK");
}

static void auth_body(struct fsnp_req *r, const struct fsnp_val *b)
{
	struct fsnp_bytes user = {(const uint8_t *)"default", 7}, pass;
	struct fsnp_val v;
	if (fsnp_map_get(b, "username", &v) == 0 && !fsnp_val_is_nil(&v)) {
		if (v.tag != FSNP_BIN) {
			goto bad_args;
		}
		user = v.as.bin;
	}
	if (fsnp_map_bin(b, "password", &pass) != 0) {
		goto bad_args;
	}
	auth(r, user, pass);
	return;
bad_args:
	fsnp_reply_error(r, FSNP_STATUS_AUTH, "auth",
	                 "ERR native AUTH requires username/password "
	                 "binaries",
	                 false, 0);
}

static void client_info(struct fsnp_req *r)
{
	struct fsnp_conn *c = r->conn;
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_u64(&w, "client_id", c->id);
	fsnp_w_key(&w, "client_name");
	if (c->name[0] != '\0') {
		fsnp_w_str(&w, c->name);
	} else {
		fsnp_w_nil(&w);
	}
	w_kv_str(&w, "username", c->user[0] ? c->user : "default");
	w_kv_bool(&w, "authenticated", c->authenticated);
	w_kv_str(&w, "peer", c->peer);
	w_kv_u64(&w, "created_at_ms", c->created_ms);
	w_kv_str(&w, "flags", "N");
	w_kv_str(&w, "protocol", "native");
	w_kv_str(&w, "compression", c->zlib ? "zlib" : "none");
	w_kv_u64(&w, "lanes", c->n_lanes);
	w_kv_u64(&w, "inflight", c->inflight);
	w_kv_u64(&w, "queued", c->queued);
	fsnp_w_key(&w, "events");
	fsnp_w_array_begin(&w);
	for (size_t i = 0; i < N_EVENTS; i++) {
		if (c->events & event_bits[i]) {
			fsnp_w_str(&w, events[i]);
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

static int window_value(struct fsnp_req *r, const struct fsnp_val *b,
                        const char *key, uint64_t max, uint64_t *out)
{
	struct fsnp_val v;
	int64_t x;
	if (fsnp_map_get(b, key, &v) != 0 || fsnp_val_is_nil(&v)) {
		return 0;
	}
	if (fsnp_val_i64(&v, &x) != 0 || x < 1) {
		char msg[96];
		snprintf(msg, sizeof msg,
		         "ERR native %s must be a positive integer", key);
		bad(r, msg);
		return -1;
	}
	/* Clamped to the configured maximum. */
	*out = (uint64_t)x < max ? (uint64_t)x : max;
	return 0;
}

static void window_update(struct fsnp_req *r, const struct fsnp_val *b)
{
	struct fsnp_conn *c = r->conn;
	uint64_t conn = c->max_inflight_conn, lane = c->max_inflight_lane;
	struct fsnp_writer w;
	struct fsnp_val v;
	if (window_value(r, b, "max_inflight_per_connection",
	                 c->srv->lim.max_inflight_per_connection, &conn) != 0 ||
	    window_value(r, b, "max_inflight_per_lane",
	                 c->srv->lim.max_inflight_per_lane, &lane) != 0) {
		return;
	}
	c->max_inflight_conn = conn;
	c->max_inflight_lane = lane;
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_bool(&w, "accepted", true);
	fsnp_w_key(&w, "lane_id");
	if (fsnp_map_get(b, "lane_id", &v) == 0) {
		fsnp_w_val(&w, &v);
	} else {
		fsnp_w_nil(&w);
	}
	fsnp_w_key(&w, "credits");
	if (fsnp_map_get(b, "credits", &v) == 0) {
		fsnp_w_val(&w, &v);
	} else {
		fsnp_w_nil(&w);
	}
	fsnp_w_key(&w, "limits");
	w_flow_control(c, &w);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

static void route_batch(struct fsnp_req *r, const struct fsnp_val *keys)
{
	struct fsnp_writer w;
	struct fsnp_iter it;
	struct fsnp_val k;
	if (keys->tag != FSNP_ARRAY) {
		bad(r, "ERR native keys must be a list of binaries");
		return;
	}
	fsnp_iter_init(&it, keys);
	while (fsnp_iter_next(&it, NULL, &k)) {
		if (k.tag != FSNP_BIN) {
			bad(r, "ERR native keys must be a list of binaries");
			return;
		}
	}
	reply_begin(r, &w);
	fsnp_w_array_begin(&w);
	fsnp_iter_init(&it, keys);
	while (fsnp_iter_next(&it, NULL, &k)) {
		fsnp_control_route(r->srv, k.as.bin.ptr, k.as.bin.len, &w);
	}
	fsnp_w_array_end(&w);
	reply_end(r, &w);
}

void fsnp_control(struct fsnp_req *r, const struct fsnp_val *b)
{
	struct fsnp_conn *c = r->conn;
	struct fsnp_writer w;
	struct fsnp_bytes name;
	struct fsnp_val v;
	bool present;
	uint32_t mask;

	switch (r->opcode) {
	case FSNP_OP_HELLO:
	case FSNP_OP_STARTUP:
		startup(r, b);
		return;
	case FSNP_OP_OPTIONS:
		reply_begin(r, &w);
		fsnp_control_capabilities(c, &w);
		reply_end(r, &w);
		return;
	case FSNP_OP_AUTH:
		auth_body(r, b);
		return;
	case FSNP_OP_PING:
		if (fsnp_map_get(b, "message", &v) == 0) {
			reply_val(r, &v);
		} else {
			reply_str(r, "PONG");
		}
		return;
	case FSNP_OP_CLIENT_SETNAME:
		if (opt_name(r, b, "name", &name, &present) != 0) {
			return;
		}
		if (!present) {
			bad(r, "ERR native name must be binary");
			return;
		}
		set_name(c, name);
		reply_str(r, "OK");
		return;
	case FSNP_OP_CLIENT_INFO:
		client_info(r);
		return;
	case FSNP_OP_ROUTE:
		if (fsnp_map_get(b, "key", &v) != 0 &&
		    (fsnp_map_get(b, "flow_id", &v) == 0 ||
		     fsnp_map_get(b, "partition_key", &v) == 0)) {
			route_flow(r, b);
			return;
		}
		if (fsnp_map_bin(b, "key", &name) != 0) {
			bad(r, "ERR native key must be binary");
			return;
		}
		reply_begin(r, &w);
		fsnp_control_route(r->srv, name.ptr, name.len, &w);
		reply_end(r, &w);
		return;
	case FSNP_OP_ROUTE_BATCH:
		if (fsnp_map_get(b, "keys", &v) != 0) {
			bad(r, "ERR native keys must be a list of binaries");
			return;
		}
		route_batch(r, &v);
		return;
	case FSNP_OP_SHARDS:
		reply_begin(r, &w);
		fsnp_control_shards(r->srv, &w);
		reply_end(r, &w);
		return;
	case FSNP_OP_BACKPRESSURE:
		reply_begin(r, &w);
		fsnp_control_backpressure(r->srv, &w);
		reply_end(r, &w);
		return;
	case FSNP_OP_QUIT:
		reply_str(r, "OK");
		r->close_after = true;
		return;
	case FSNP_OP_WINDOW_UPDATE:
		window_update(r, b);
		return;
	case FSNP_OP_SUBSCRIBE_EVENTS:
	case FSNP_OP_UNSUBSCRIBE_EVENTS:
		if (fsnp_map_get(b, "events", &v) != 0) {
			bad(r, "ERR native field events must be a list");
			return;
		}
		if (parse_events(r, &v, &mask) != 0) {
			return;
		}
		if (r->opcode == FSNP_OP_SUBSCRIBE_EVENTS) {
			c->events |= mask;
		} else {
			c->events &= ~mask;
		}
		w_subscription(r);
		return;
	default:
		bad(r, "ERR native unknown opcode");
		return;
	}
}

/* --- COMMAND_EXEC forms -----------------------------------------------------
 */

static bool arg_at(const struct fsnp_val *args, uint32_t i,
                   struct fsnp_val *out)
{
	struct fsnp_iter it;
	uint32_t k = 0;
	fsnp_iter_init(&it, args);
	while (fsnp_iter_next(&it, NULL, out)) {
		if (k++ == i) {
			return true;
		}
	}
	return false;
}

static void wrong_args(struct fsnp_req *r, const char *name)
{
	char msg[128];
	snprintf(msg, sizeof msg,
	         "ERR wrong number of arguments for '%s' command", name);
	fsnp_reply_error(r, FSNP_STATUS_ERROR, "error", msg, false, 0);
}

void fsnp_control_exec(struct fsnp_req *r, const struct fsnp_cmd_info *info,
                       const struct fsnp_val *args)
{
	struct fsnp_conn *c = r->conn;
	uint32_t n = args->as.count;
	struct fsnp_val a0, a1;
	struct fsnp_writer w;
	const char *name = info->name;

	if (strcmp(name, "PING") == 0) {
		if (n > 1) {
			wrong_args(r, "ping");
		} else if (n == 1 && arg_at(args, 0, &a0)) {
			reply_val(r, &a0);
		} else {
			reply_str(r, "PONG");
		}
	} else if (strcmp(name, "ECHO") == 0) {
		if (n != 1 || !arg_at(args, 0, &a0)) {
			wrong_args(r, "echo");
		} else {
			reply_val(r, &a0);
		}
	} else if (strcmp(name, "CLIENT") == 0 ||
	           strcmp(name, "CLIENT.INFO") == 0 ||
	           strcmp(name, "CLIENT.SETNAME") == 0) {
		struct fsnp_bytes sub = {(const uint8_t *)name + 7,
		                         strlen(name) > 7 ? strlen(name) - 7
		                                          : 0};
		uint32_t first = 0;
		if (strcmp(name, "CLIENT") == 0) {
			if (n == 0 || !arg_at(args, 0, &a0) ||
			    a0.tag != FSNP_BIN) {
				wrong_args(r, "client");
				return;
			}
			sub = a0.as.bin;
			first = 1;
		}
		if (sub.len == 4 &&
		    strncasecmp((const char *)sub.ptr, "INFO", 4) == 0) {
			client_info(r);
		} else if (sub.len == 2 &&
		           strncasecmp((const char *)sub.ptr, "ID", 2) == 0) {
			reply_begin(r, &w);
			fsnp_w_u64(&w, c->id);
			reply_end(r, &w);
		} else if (sub.len == 7 && strncasecmp((const char *)sub.ptr,
		                                       "GETNAME", 7) == 0) {
			reply_begin(r, &w);
			if (c->name[0] != '\0') {
				fsnp_w_str(&w, c->name);
			} else {
				fsnp_w_nil(&w);
			}
			reply_end(r, &w);
		} else if (sub.len == 7 && strncasecmp((const char *)sub.ptr,
		                                       "SETNAME", 7) == 0) {
			if (n != first + 1 || !arg_at(args, first, &a1) ||
			    a1.tag != FSNP_BIN ||
			    a1.as.bin.len > NAME_MAX_LEN) {
				wrong_args(r, "client|setname");
				return;
			}
			set_name(c, a1.as.bin);
			reply_str(r, "OK");
		} else {
			fsnp_reply_error(r, FSNP_STATUS_ERROR, "error",
			                 "ERR unknown CLIENT subcommand", false,
			                 0);
		}
	} else if (strcmp(name, "OPTIONS") == 0) {
		reply_begin(r, &w);
		fsnp_control_capabilities(c, &w);
		reply_end(r, &w);
	} else if (strcmp(name, "SHARDS") == 0) {
		reply_begin(r, &w);
		fsnp_control_shards(r->srv, &w);
		reply_end(r, &w);
	} else if (strcmp(name, "BACKPRESSURE") == 0) {
		reply_begin(r, &w);
		fsnp_control_backpressure(r->srv, &w);
		reply_end(r, &w);
	} else if (strcmp(name, "ROUTE") == 0) {
		if (n != 1 || !arg_at(args, 0, &a0) || a0.tag != FSNP_BIN) {
			wrong_args(r, "route");
			return;
		}
		reply_begin(r, &w);
		fsnp_control_route(r->srv, a0.as.bin.ptr, a0.as.bin.len, &w);
		reply_end(r, &w);
	} else if (strcmp(name, "ROUTE_BATCH") == 0) {
		route_batch(r, args);
	} else if (strcmp(name, "AUTH") == 0) {
		struct fsnp_bytes user = {(const uint8_t *)"default", 7};
		if (n < 1 || n > 2 || !arg_at(args, n - 1, &a1) ||
		    a1.tag != FSNP_BIN) {
			wrong_args(r, "auth");
			return;
		}
		if (n == 2) {
			if (!arg_at(args, 0, &a0) || a0.tag != FSNP_BIN) {
				wrong_args(r, "auth");
				return;
			}
			user = a0.as.bin;
		}
		auth(r, user, a1.as.bin);
	} else if (strcmp(name, "QUIT") == 0) {
		reply_str(r, "OK");
		r->close_after = true;
	} else {
		char msg[160];
		snprintf(msg, sizeof msg,
		         "ERR native COMMAND_EXEC cannot run %s; send its "
		         "opcode",
		         name);
		bad(r, msg);
	}
}

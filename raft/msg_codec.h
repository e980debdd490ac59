/* Wire encoding of the node transport (format version 1): framing, the
 * handshake, every libraft message tagged with its group, and the
 * messages of the forwarding RPC and of snapshot state transfer.
 *
 * Pure: no I/O, no globals; every decoder checks every length against the
 * input and never reads past it. All integers are big endian.
 *
 * Frame: u32 payload length | u8 kind | payload. The first frame of a
 * connection is MSG_HELLO (dialer) answered by MSG_WELCOME (acceptor);
 * everything else flows only after an accepting welcome.
 *
 *   HELLO    "LSNT" | u16 version | u64 from id | u64 to id (0 = any)
 *            | u16 length + cluster id
 *   WELCOME  "LSNT" | u16 version | u8 status (MSG_HS_*) | u64 from id
 *            | u16 length + reason (empty when accepted)
 *   RAFT     u32 group | u8 type (RAFT_IO_*) | fields of the type:
 *     REQUEST_VOTE          u64 term, candidate, last index, last term
 *                           | u8 flags (1 disrupt leader, 2 pre-vote)
 *     REQUEST_VOTE_RESULT   u64 term | u8 granted | u8 pre-vote tribool
 *     APPEND_ENTRIES        u64 term, prev index, prev term, commit
 *                           | u32 n | n x (u64 term | u8 type | u32 len)
 *                           | the payloads, back to back
 *     APPEND_ENTRIES_RESULT u64 term, rejected, last log index
 *     INSTALL_SNAPSHOT      u64 term, last index, last term, conf index
 *                           | configuration | u32 length + data
 *     TIMEOUT_NOW           u64 term, last log index, last log term
 *     configuration:        u32 n | n x (u64 id | u8 role
 *                           | u16 length + address)
 *   PING     empty
 *   ROUTES   u32 n | n x (u32 group | u64 term): the groups the sender
 *            leads (its whole list; replaces the previous one)
 *   FWD_REQ  u64 id | u32 group | u8 op (MSG_FWD_*) | u32 timeout ms
 *            | command (rest)
 *   FWD_RESP u64 id | u8 status (REPLICA_*) | u64 leader hint
 *            | result (rest)
 *   XFER_REQ  u64 id | u32 group | u64 min applied index
 *   XFER_META u64 id | u8 status (MSG_XFER_*) | u64 applied index
 *            | u32 n | n x (u16 length + name | u64 size)
 *            | u16 length + message
 *   XFER_GET  u64 id | u32 file | u64 offset | u32 length
 *   XFER_DATA u64 id | u32 file | u64 offset | u8 status | bytes (rest)
 *   XFER_END  u64 id
 *   READ_CHECK u8 flags (1 answer, 2 yes) | u32 group | u64 term | u64 round:
 *            read confirmation question or answer (raft/replica.c)
 *   QUIESCE  u8 flags (1 wake) | u32 group | u64 term | u64 index: a
 *            leader's "stop ticking, my log ends at index in term", or a
 *            replica's request to wake (raft/quiesce.h)
 *
 * Decoded raft messages own their memory as rio_store_deliver() expects
 * (raft_malloc'd entries array and one batch block, snapshot data and
 * configuration); msg_raft_free() releases it when it is not delivered.
 * Other decoders borrow from the input. */
#ifndef LS_RAFT_MSG_CODEC_H
#define LS_RAFT_MSG_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#define MSG_MAGIC "LSNT"
#define MSG_VERSION 1
#define MSG_FRAME_HEADER 5
#define MSG_MAX_PAYLOAD (1u << 30) /* largest frame payload accepted */
#define MSG_HELLO_MAX 512          /* largest handshake payload */
#define MSG_CLUSTER_MAX 255
#define MSG_REASON_MAX 255
#define MSG_NAME_MAX 255 /* transferred file name */

enum msg_kind {
	MSG_HELLO = 1,
	MSG_WELCOME = 2,
	MSG_RAFT = 3,
	MSG_PING = 4,
	MSG_ROUTES = 5,
	MSG_FWD_REQ = 6,
	MSG_FWD_RESP = 7,
	MSG_XFER_REQ = 8,
	MSG_XFER_META = 9,
	MSG_XFER_GET = 10,
	MSG_XFER_DATA = 11,
	MSG_XFER_END = 12,
	MSG_READ_CHECK = 13,
	MSG_JOIN = 14,      /* a node asks to join, instead of HELLO */
	MSG_JOIN_RESP = 15, /* the answer; the connection then closes */
	MSG_QUIESCE = 16,
	MSG_KIND_MAX = 16
};

/* Handshake outcome. */
enum {
	MSG_HS_OK = 0,
	MSG_HS_CLUSTER = 1,   /* another cluster id */
	MSG_HS_STRANGER = 2,  /* the node id is not a member */
	MSG_HS_VERSION = 3,   /* unsupported protocol version */
	MSG_HS_WRONG_ID = 4,  /* the dialer expected another node id */
	MSG_HS_DUPLICATE = 5, /* a preferred connection already exists */
	MSG_HS_IDENTITY = 6,  /* the TLS certificate names another node */
	MSG_HS_MAX = 6
};

/* Forwarded operations. */
enum { MSG_FWD_PROPOSE = 1, MSG_FWD_READ = 2 };

/* Transfer status. */
enum {
	MSG_XFER_OK = 0,
	MSG_XFER_NOGROUP = 1, /* the group has no replica here */
	MSG_XFER_BEHIND = 2,  /* the state here is older than asked */
	MSG_XFER_BUSY = 3,    /* too many transfers running */
	MSG_XFER_FAILED = 4,  /* export or read failed; see the message */
	MSG_XFER_UNKNOWN = 5  /* no such transfer (expired) */
};

enum {
	MSG_EMALFORMED = 1, /* decoders: the bytes are not a valid message */
	MSG_ENOMEM,
	MSG_EVERSION /* handshake of an unsupported version */
};

struct msg_hello {
	uint16_t version;
	uint64_t from;
	uint64_t to;
	const char *cluster; /* not NUL-terminated when decoded */
	size_t cluster_len;
};

struct msg_welcome {
	uint16_t version;
	uint8_t status;
	uint64_t from;
	const char *reason; /* not NUL-terminated when decoded */
	size_t reason_len;
};

/* A node asking to join the cluster: its id and its record (its internal
 * and client addresses, "internal=H:P felix=H:P ..."). The answer's status
 * is a MSG_HS_* code; its text the members "ID=HOST:PORT,..." when
 * accepted, else the reason. */
#define MSG_JOIN_TEXT_MAX 16384
struct msg_join {
	uint16_t version;
	uint64_t from;
	const char *cluster; /* not NUL-terminated when decoded */
	size_t cluster_len;
	const char *record;
	size_t record_len;
};

struct msg_join_resp {
	uint8_t status;
	const char *text; /* not NUL-terminated when decoded */
	size_t text_len;
};

struct msg_route {
	uint32_t group;
	uint64_t term;
};

struct msg_fwd_req {
	uint64_t id;
	uint32_t group;
	uint8_t op;
	uint32_t timeout_ms;
	const uint8_t *cmd;
	size_t len;
};

struct msg_fwd_resp {
	uint64_t id;
	uint8_t status;
	uint64_t leader;
	const uint8_t *result;
	size_t len;
};

/* Read confirmation (raft/replica.c): a leader's question "do you still
 * follow me in `term`?", or the answer. */
struct msg_read_check {
	bool answer;
	bool ok; /* answers: yes */
	uint32_t group;
	uint64_t term;
	uint64_t round;
};

/* Quiescence (raft/quiesce.h): QUIESCE or a wake request. */
struct msg_quiesce {
	bool wake;
	uint32_t group;
	uint64_t term;
	uint64_t index; /* QUIESCE: the leader's last index; wake: 0 */
};

struct msg_xfer_req {
	uint64_t id;
	uint32_t group;
	uint64_t index;
};

struct msg_xfer_file {
	const char *name; /* not NUL-terminated when decoded */
	size_t name_len;
	uint64_t size;
};

struct msg_xfer_meta {
	uint64_t id;
	uint8_t status;
	uint64_t applied;
	uint32_t n_files;
	const struct msg_xfer_file *files; /* encoding only */
	const uint8_t *files_enc;          /* decoding: walk with
	                                      msg_xfer_meta_file() */
	size_t files_len;
	const char *message;
	size_t message_len;
};

struct msg_xfer_get {
	uint64_t id;
	uint32_t file;
	uint64_t offset;
	uint32_t len;
};

struct msg_xfer_data {
	uint64_t id;
	uint32_t file;
	uint64_t offset;
	uint8_t status;
	const uint8_t *data;
	size_t len;
};

/* ---- framing ---- */

void msg_frame_header(uint8_t *p, uint8_t kind, uint32_t payload_len);

/* Reads a frame header: 0, or MSG_EMALFORMED for an unknown kind or a
 * payload above `max`. */
int msg_frame_parse(const uint8_t *p, uint32_t max, uint8_t *kind,
                    uint32_t *payload_len);

/* ---- node certificates ---- */

/* The node id a certificate's common name gives: "node-<id>", the id in
 * decimal without leading zeros, above 0. Returns 0 with *id, or
 * MSG_EMALFORMED. */
int msg_node_cn_parse(const char *cn, uint64_t *id);

/* ---- every message: size, then write exactly that many bytes ---- */

size_t msg_hello_size(const struct msg_hello *h);
void msg_hello_write(uint8_t *p, const struct msg_hello *h);
/* MSG_EVERSION (with h->version and h->from set) for another version. */
int msg_hello_decode(const uint8_t *p, size_t len, struct msg_hello *h);

size_t msg_join_size(const struct msg_join *j);
void msg_join_write(uint8_t *p, const struct msg_join *j);
int msg_join_decode(const uint8_t *p, size_t len, struct msg_join *j);
size_t msg_join_resp_size(const struct msg_join_resp *j);
void msg_join_resp_write(uint8_t *p, const struct msg_join_resp *j);
int msg_join_resp_decode(const uint8_t *p, size_t len, struct msg_join_resp *j);

size_t msg_welcome_size(const struct msg_welcome *w);
void msg_welcome_write(uint8_t *p, const struct msg_welcome *w);
int msg_welcome_decode(const uint8_t *p, size_t len, struct msg_welcome *w);

/* Raft messages: MSG_EMALFORMED for an unknown type, RAFT_* values out
 * of range or lengths that do not add up. `m->server_id` and
 * `server_address` are not carried (the connection says who sent it):
 * decoding leaves them 0 and NULL. */
size_t msg_raft_size(const struct raft_message *m);
void msg_raft_write(uint8_t *p, uint32_t group, const struct raft_message *m);
/* msg_raft_write without an AppendEntries' payloads, which follow the
 * returned number of bytes, in entry order, for a writer that sends them
 * from where they are; other messages whole. */
size_t msg_raft_write_head(uint8_t *p, uint32_t group,
                           const struct raft_message *m);
int msg_raft_decode(const uint8_t *p, size_t len, uint32_t *group,
                    struct raft_message *m);
void msg_raft_free(struct raft_message *m);
/* msg_raft_decode without copying entries: `owner` is a raft_malloc'd
 * block that holds `p`. When the message is an AppendEntries with
 * entries, they point into `p`, `owner` is their batch (libraft, or
 * msg_raft_free, frees it with them) and *taken is true; otherwise the
 * message owns its memory as with msg_raft_decode and `owner` stays the
 * caller's. */
int msg_raft_decode_take(void *owner, const uint8_t *p, size_t len,
                         uint32_t *group, struct raft_message *m, bool *taken);

size_t msg_routes_size(uint32_t n);
void msg_routes_write(uint8_t *p, const struct msg_route *r, uint32_t n);
/* Checks the list; *n is its length. Read entries with msg_routes_get. */
int msg_routes_decode(const uint8_t *p, size_t len, uint32_t *n);
void msg_routes_get(const uint8_t *p, uint32_t i, struct msg_route *r);

size_t msg_fwd_req_size(const struct msg_fwd_req *r);
void msg_fwd_req_write(uint8_t *p, const struct msg_fwd_req *r);
int msg_fwd_req_decode(const uint8_t *p, size_t len, struct msg_fwd_req *r);

size_t msg_fwd_resp_size(const struct msg_fwd_resp *r);
void msg_fwd_resp_write(uint8_t *p, const struct msg_fwd_resp *r);
int msg_fwd_resp_decode(const uint8_t *p, size_t len, struct msg_fwd_resp *r);

size_t msg_quiesce_size(void);
void msg_quiesce_write(uint8_t *p, const struct msg_quiesce *q);
int msg_quiesce_decode(const uint8_t *p, size_t len, struct msg_quiesce *q);

size_t msg_read_check_size(void);
void msg_read_check_write(uint8_t *p, const struct msg_read_check *c);
int msg_read_check_decode(const uint8_t *p, size_t len,
                          struct msg_read_check *c);

size_t msg_xfer_req_size(void);
void msg_xfer_req_write(uint8_t *p, const struct msg_xfer_req *r);
int msg_xfer_req_decode(const uint8_t *p, size_t len, struct msg_xfer_req *r);

size_t msg_xfer_meta_size(const struct msg_xfer_meta *m);
void msg_xfer_meta_write(uint8_t *p, const struct msg_xfer_meta *m);
int msg_xfer_meta_decode(const uint8_t *p, size_t len, struct msg_xfer_meta *m);
/* The next file of a decoded list; `*off` starts at 0. */
void msg_xfer_meta_file(const struct msg_xfer_meta *m, size_t *off,
                        struct msg_xfer_file *f);

size_t msg_xfer_get_size(void);
void msg_xfer_get_write(uint8_t *p, const struct msg_xfer_get *g);
int msg_xfer_get_decode(const uint8_t *p, size_t len, struct msg_xfer_get *g);

/* Header only: the data follows it in the frame. */
size_t msg_xfer_data_header_size(void);
void msg_xfer_data_write_header(uint8_t *p, const struct msg_xfer_data *d);
int msg_xfer_data_decode(const uint8_t *p, size_t len, struct msg_xfer_data *d);

size_t msg_xfer_end_size(void);
void msg_xfer_end_write(uint8_t *p, uint64_t id);
int msg_xfer_end_decode(const uint8_t *p, size_t len, uint64_t *id);

const char *msg_hs_strerror(uint8_t status);

#endif

/* Wire encoding of the node transport; see msg_codec.h. */
#include "raft/msg_codec.h"

#include <stdlib.h>
#include <string.h>

#define VOTE_DISRUPT 0x01
#define VOTE_PRE 0x02
#define ENTRY_HEADER 13 /* u64 term | u8 type | u32 len */
#define SERVER_HEADER 11

/* ---- writing ---- */

static uint8_t *w8(uint8_t *p, uint8_t v)
{
	*p = v;
	return p + 1;
}

static uint8_t *w16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static uint8_t *w32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static uint8_t *w64(uint8_t *p, uint64_t v)
{
	p = w32(p, (uint32_t)(v >> 32));
	return w32(p, (uint32_t)v);
}

static uint8_t *wbytes(uint8_t *p, const void *b, size_t n)
{
	if (n > 0) {
		memcpy(p, b, n);
	}
	return p + n;
}

/* ---- reading ---- */

struct rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	bool bad;
};

static void rd_init(struct rd *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->bad = false;
}

static const uint8_t *take(struct rd *r, size_t n)
{
	const uint8_t *q;
	if (r->bad || r->len - r->off < n) {
		r->bad = true;
		return NULL;
	}
	q = r->p + r->off;
	r->off += n;
	return q;
}

static uint8_t r8(struct rd *r)
{
	const uint8_t *q = take(r, 1);
	return q ? q[0] : 0;
}

static uint16_t r16(struct rd *r)
{
	const uint8_t *q = take(r, 2);
	return q ? (uint16_t)(q[0] << 8 | q[1]) : 0;
}

static uint32_t r32(struct rd *r)
{
	const uint8_t *q = take(r, 4);
	return q ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 |
	               (uint32_t)q[2] << 8 | q[3]
	         : 0;
}

static uint64_t r64(struct rd *r)
{
	uint64_t hi = r32(r);
	return hi << 32 | r32(r);
}

static size_t rest(const struct rd *r)
{
	return r->bad ? 0 : r->len - r->off;
}

static bool done(const struct rd *r)
{
	return !r->bad && r->off == r->len;
}

/* ---- framing ---- */

void msg_frame_header(uint8_t *p, uint8_t kind, uint32_t payload_len)
{
	w32(p, payload_len);
	p[4] = kind;
}

int msg_frame_parse(const uint8_t *p, uint32_t max, uint8_t *kind,
                    uint32_t *payload_len)
{
	struct rd r;
	rd_init(&r, p, MSG_FRAME_HEADER);
	*payload_len = r32(&r);
	*kind = r8(&r);
	if (*kind == 0 || *kind > MSG_KIND_MAX || *payload_len > max) {
		return MSG_EMALFORMED;
	}
	return 0;
}

/* ---- handshake ---- */

size_t msg_hello_size(const struct msg_hello *h)
{
	return 4 + 2 + 8 + 8 + 2 + h->cluster_len;
}

void msg_hello_write(uint8_t *p, const struct msg_hello *h)
{
	p = wbytes(p, MSG_MAGIC, 4);
	p = w16(p, h->version);
	p = w64(p, h->from);
	p = w64(p, h->to);
	p = w16(p, (uint16_t)h->cluster_len);
	wbytes(p, h->cluster, h->cluster_len);
}

int msg_hello_decode(const uint8_t *p, size_t len, struct msg_hello *h)
{
	struct rd r;
	const uint8_t *magic;

	memset(h, 0, sizeof *h);
	rd_init(&r, p, len);
	magic = take(&r, 4);
	if (magic == NULL || memcmp(magic, MSG_MAGIC, 4) != 0) {
		return MSG_EMALFORMED;
	}
	h->version = r16(&r);
	h->from = r64(&r);
	if (r.bad) {
		return MSG_EMALFORMED;
	}
	if (h->version != MSG_VERSION) {
		return MSG_EVERSION;
	}
	h->to = r64(&r);
	h->cluster_len = r16(&r);
	h->cluster = (const char *)take(&r, h->cluster_len);
	if (!done(&r) || h->cluster_len > MSG_CLUSTER_MAX || h->from == 0) {
		return MSG_EMALFORMED;
	}
	return 0;
}

size_t msg_join_size(const struct msg_join *j)
{
	return 4 + 2 + 8 + 2 + j->cluster_len + 4 + j->record_len;
}

void msg_join_write(uint8_t *p, const struct msg_join *j)
{
	p = wbytes(p, MSG_MAGIC, 4);
	p = w16(p, j->version);
	p = w64(p, j->from);
	p = w16(p, (uint16_t)j->cluster_len);
	p = wbytes(p, j->cluster, j->cluster_len);
	p = w32(p, (uint32_t)j->record_len);
	wbytes(p, j->record, j->record_len);
}

int msg_join_decode(const uint8_t *p, size_t len, struct msg_join *j)
{
	struct rd r;
	const uint8_t *magic;

	memset(j, 0, sizeof *j);
	rd_init(&r, p, len);
	magic = take(&r, 4);
	if (magic == NULL || memcmp(magic, MSG_MAGIC, 4) != 0) {
		return MSG_EMALFORMED;
	}
	j->version = r16(&r);
	j->from = r64(&r);
	if (r.bad) {
		return MSG_EMALFORMED;
	}
	if (j->version != MSG_VERSION) {
		return MSG_EVERSION;
	}
	j->cluster_len = r16(&r);
	j->cluster = (const char *)take(&r, j->cluster_len);
	j->record_len = r32(&r);
	j->record = (const char *)take(&r, j->record_len);
	if (!done(&r) || j->cluster_len > MSG_CLUSTER_MAX ||
	    j->record_len > MSG_JOIN_TEXT_MAX || j->from == 0) {
		return MSG_EMALFORMED;
	}
	return 0;
}

size_t msg_join_resp_size(const struct msg_join_resp *j)
{
	return 4 + 1 + 4 + j->text_len;
}

void msg_join_resp_write(uint8_t *p, const struct msg_join_resp *j)
{
	p = wbytes(p, MSG_MAGIC, 4);
	p = w8(p, j->status);
	p = w32(p, (uint32_t)j->text_len);
	wbytes(p, j->text, j->text_len);
}

int msg_join_resp_decode(const uint8_t *p, size_t len, struct msg_join_resp *j)
{
	struct rd r;
	const uint8_t *magic;

	memset(j, 0, sizeof *j);
	rd_init(&r, p, len);
	magic = take(&r, 4);
	if (magic == NULL || memcmp(magic, MSG_MAGIC, 4) != 0) {
		return MSG_EMALFORMED;
	}
	j->status = r8(&r);
	j->text_len = r32(&r);
	j->text = (const char *)take(&r, j->text_len);
	if (!done(&r) || j->status > MSG_HS_MAX ||
	    j->text_len > MSG_JOIN_TEXT_MAX) {
		return MSG_EMALFORMED;
	}
	return 0;
}

size_t msg_welcome_size(const struct msg_welcome *w)
{
	return 4 + 2 + 1 + 8 + 2 + w->reason_len;
}

void msg_welcome_write(uint8_t *p, const struct msg_welcome *w)
{
	p = wbytes(p, MSG_MAGIC, 4);
	p = w16(p, w->version);
	p = w8(p, w->status);
	p = w64(p, w->from);
	p = w16(p, (uint16_t)w->reason_len);
	wbytes(p, w->reason, w->reason_len);
}

int msg_welcome_decode(const uint8_t *p, size_t len, struct msg_welcome *w)
{
	struct rd r;
	const uint8_t *magic;

	memset(w, 0, sizeof *w);
	rd_init(&r, p, len);
	magic = take(&r, 4);
	if (magic == NULL || memcmp(magic, MSG_MAGIC, 4) != 0) {
		return MSG_EMALFORMED;
	}
	w->version = r16(&r);
	w->status = r8(&r);
	w->from = r64(&r);
	w->reason_len = r16(&r);
	w->reason = (const char *)take(&r, w->reason_len);
	if (!done(&r) || w->status > MSG_HS_MAX ||
	    w->reason_len > MSG_REASON_MAX) {
		return MSG_EMALFORMED;
	}
	return 0;
}

const char *msg_hs_strerror(uint8_t status)
{
	switch (status) {
	case MSG_HS_OK:
		return "accepted";
	case MSG_HS_CLUSTER:
		return "cluster id mismatch";
	case MSG_HS_STRANGER:
		return "not a member of the cluster";
	case MSG_HS_VERSION:
		return "unsupported protocol version";
	case MSG_HS_WRONG_ID:
		return "node id differs from the configured one";
	case MSG_HS_DUPLICATE:
		return "duplicate connection";
	default:
		return "unknown handshake status";
	}
}

/* ---- raft messages ---- */

static size_t conf_size(const struct raft_configuration *c)
{
	size_t n = 4;
	unsigned i;
	for (i = 0; i < c->n; i++) {
		n += SERVER_HEADER + strlen(c->servers[i].address);
	}
	return n;
}

static uint8_t *conf_write(uint8_t *p, const struct raft_configuration *c)
{
	unsigned i;
	p = w32(p, c->n);
	for (i = 0; i < c->n; i++) {
		size_t alen = strlen(c->servers[i].address);
		p = w64(p, c->servers[i].id);
		p = w8(p, (uint8_t)c->servers[i].role);
		p = w16(p, (uint16_t)alen);
		p = wbytes(p, c->servers[i].address, alen);
	}
	return p;
}

static int conf_read(struct rd *r, struct raft_configuration *c)
{
	uint32_t n = r32(r), i;
	char addr[UINT16_MAX + 1];

	raft_configuration_init(c);
	if (r->bad || n > rest(r) / SERVER_HEADER) {
		return MSG_EMALFORMED;
	}
	for (i = 0; i < n; i++) {
		uint64_t id = r64(r);
		uint8_t role = r8(r);
		uint16_t alen = r16(r);
		const uint8_t *a = take(r, alen);
		int rv;
		if (a == NULL || id == 0 ||
		    (role != RAFT_VOTER && role != RAFT_STANDBY &&
		     role != RAFT_SPARE) ||
		    memchr(a, '\0', alen) != NULL) {
			raft_configuration_close(c);
			return MSG_EMALFORMED;
		}
		memcpy(addr, a, alen);
		addr[alen] = '\0';
		rv = raft_configuration_add(c, id, addr, role);
		if (rv != 0) {
			raft_configuration_close(c);
			return rv == RAFT_NOMEM ? MSG_ENOMEM : MSG_EMALFORMED;
		}
	}
	return 0;
}

size_t msg_raft_size(const struct raft_message *m)
{
	size_t n = 4 + 1;
	unsigned i;

	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE:
		return n + 4 * 8 + 1;
	case RAFT_IO_REQUEST_VOTE_RESULT:
		return n + 8 + 1 + 1;
	case RAFT_IO_APPEND_ENTRIES:
		n += 4 * 8 + 4;
		for (i = 0; i < m->append_entries.n_entries; i++) {
			n +=
			    ENTRY_HEADER + m->append_entries.entries[i].buf.len;
		}
		return n;
	case RAFT_IO_APPEND_ENTRIES_RESULT:
		return n + 3 * 8;
	case RAFT_IO_INSTALL_SNAPSHOT:
		return n + 4 * 8 + conf_size(&m->install_snapshot.conf) + 4 +
		       m->install_snapshot.data.len;
	case RAFT_IO_TIMEOUT_NOW:
		return n + 3 * 8;
	default:
		return 0;
	}
}

size_t msg_raft_write_head(uint8_t *p, uint32_t group,
                           const struct raft_message *m)
{
	const struct raft_append_entries *a = &m->append_entries;
	uint8_t *q = p;
	unsigned i;

	if (m->type != RAFT_IO_APPEND_ENTRIES) {
		msg_raft_write(p, group, m);
		return msg_raft_size(m);
	}
	q = w32(q, group);
	q = w8(q, (uint8_t)m->type);
	q = w64(q, a->term);
	q = w64(q, a->prev_log_index);
	q = w64(q, a->prev_log_term);
	q = w64(q, a->leader_commit);
	q = w32(q, a->n_entries);
	for (i = 0; i < a->n_entries; i++) {
		q = w64(q, a->entries[i].term);
		q = w8(q, (uint8_t)a->entries[i].type);
		q = w32(q, (uint32_t)a->entries[i].buf.len);
	}
	return (size_t)(q - p);
}

void msg_raft_write(uint8_t *p, uint32_t group, const struct raft_message *m)
{
	unsigned i;

	if (m->type == RAFT_IO_APPEND_ENTRIES) {
		const struct raft_append_entries *a = &m->append_entries;
		p += msg_raft_write_head(p, group, m);
		for (i = 0; i < a->n_entries; i++) {
			p = wbytes(p, a->entries[i].buf.base,
			           a->entries[i].buf.len);
		}
		return;
	}
	p = w32(p, group);
	p = w8(p, (uint8_t)m->type);
	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE: {
		const struct raft_request_vote *a = &m->request_vote;
		uint8_t flags = (a->disrupt_leader ? VOTE_DISRUPT : 0) |
		                (a->pre_vote ? VOTE_PRE : 0);
		p = w64(p, a->term);
		p = w64(p, a->candidate_id);
		p = w64(p, a->last_log_index);
		p = w64(p, a->last_log_term);
		w8(p, flags);
		break;
	}
	case RAFT_IO_REQUEST_VOTE_RESULT: {
		const struct raft_request_vote_result *a =
		    &m->request_vote_result;
		p = w64(p, a->term);
		p = w8(p, a->vote_granted ? 1 : 0);
		w8(p, (uint8_t)a->pre_vote);
		break;
	}
	case RAFT_IO_APPEND_ENTRIES_RESULT: {
		const struct raft_append_entries_result *a =
		    &m->append_entries_result;
		p = w64(p, a->term);
		p = w64(p, a->rejected);
		w64(p, a->last_log_index);
		break;
	}
	case RAFT_IO_INSTALL_SNAPSHOT: {
		const struct raft_install_snapshot *a = &m->install_snapshot;
		p = w64(p, a->term);
		p = w64(p, a->last_index);
		p = w64(p, a->last_term);
		p = w64(p, a->conf_index);
		p = conf_write(p, &a->conf);
		p = w32(p, (uint32_t)a->data.len);
		wbytes(p, a->data.base, a->data.len);
		break;
	}
	case RAFT_IO_TIMEOUT_NOW: {
		const struct raft_timeout_now *a = &m->timeout_now;
		p = w64(p, a->term);
		p = w64(p, a->last_log_index);
		w64(p, a->last_log_term);
		break;
	}
	default:
		break;
	}
}

/* With `owner` (raft_malloc'd, holding the input), the entries point into
 * the input and their batch is `owner`; else they are copied into a batch
 * of their own. */
static int decode_append(struct rd *r, struct raft_append_entries *a,
                         void *owner)
{
	const uint8_t *hdr;
	uint8_t *batch;
	size_t total = 0, off = 0;
	uint32_t n, i;

	a->entries = NULL;
	a->n_entries = 0;
	a->term = r64(r);
	a->prev_log_index = r64(r);
	a->prev_log_term = r64(r);
	a->leader_commit = r64(r);
	n = r32(r);
	if (r->bad || n > rest(r) / ENTRY_HEADER) {
		return MSG_EMALFORMED;
	}
	hdr = take(r, (size_t)n * ENTRY_HEADER);
	for (i = 0; i < n; i++) {
		const uint8_t *h = hdr + (size_t)i * ENTRY_HEADER;
		uint8_t type = h[8];
		uint32_t len = (uint32_t)h[9] << 24 | (uint32_t)h[10] << 16 |
		               (uint32_t)h[11] << 8 | h[12];
		if (type != RAFT_COMMAND && type != RAFT_BARRIER &&
		    type != RAFT_CHANGE) {
			return MSG_EMALFORMED;
		}
		total += len;
	}
	if (total != rest(r)) {
		return MSG_EMALFORMED;
	}
	if (n == 0) {
		return 0;
	}
	a->entries = raft_malloc(n * sizeof *a->entries);
	if (a->entries == NULL) {
		return MSG_ENOMEM;
	}
	if (owner != NULL) {
		batch = (uint8_t *)take(r, total);
	} else {
		batch = raft_malloc(total > 0 ? total : 1);
		if (batch == NULL) {
			raft_free(a->entries);
			a->entries = NULL;
			return MSG_ENOMEM;
		}
		memcpy(batch, take(r, total), total);
	}
	for (i = 0; i < n; i++) {
		const uint8_t *h = hdr + (size_t)i * ENTRY_HEADER;
		struct raft_entry *e = &a->entries[i];
		struct rd hr;
		rd_init(&hr, h, ENTRY_HEADER);
		e->term = r64(&hr);
		e->type = r8(&hr);
		e->buf.len = r32(&hr);
		e->buf.base = batch + off;
		e->batch = owner != NULL ? owner : batch;
		off += e->buf.len;
	}
	a->n_entries = n;
	return 0;
}

static int decode_snapshot(struct rd *r, struct raft_install_snapshot *a)
{
	uint32_t dlen;
	int rv;

	a->data.base = NULL;
	a->data.len = 0;
	a->term = r64(r);
	a->last_index = r64(r);
	a->last_term = r64(r);
	a->conf_index = r64(r);
	if (r->bad) {
		raft_configuration_init(&a->conf);
		return MSG_EMALFORMED;
	}
	rv = conf_read(r, &a->conf);
	if (rv != 0) {
		return rv;
	}
	dlen = r32(r);
	if (r->bad || rest(r) != dlen) {
		raft_configuration_close(&a->conf);
		return MSG_EMALFORMED;
	}
	a->data.base = raft_malloc(dlen > 0 ? dlen : 1);
	if (a->data.base == NULL) {
		raft_configuration_close(&a->conf);
		return MSG_ENOMEM;
	}
	memcpy(a->data.base, take(r, dlen), dlen);
	a->data.len = dlen;
	return 0;
}

static int decode_raft(void *owner, const uint8_t *p, size_t len,
                       uint32_t *group, struct raft_message *m, bool *taken)
{
	struct rd r;
	int rv = 0;

	*taken = false;

	memset(m, 0, sizeof *m);
	rd_init(&r, p, len);
	*group = r32(&r);
	m->type = r8(&r);
	if (r.bad) {
		return MSG_EMALFORMED;
	}
	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE: {
		struct raft_request_vote *a = &m->request_vote;
		uint8_t flags;
		a->term = r64(&r);
		a->candidate_id = r64(&r);
		a->last_log_index = r64(&r);
		a->last_log_term = r64(&r);
		flags = r8(&r);
		if (flags & ~(VOTE_DISRUPT | VOTE_PRE)) {
			return MSG_EMALFORMED;
		}
		a->disrupt_leader = (flags & VOTE_DISRUPT) != 0;
		a->pre_vote = (flags & VOTE_PRE) != 0;
		break;
	}
	case RAFT_IO_REQUEST_VOTE_RESULT: {
		struct raft_request_vote_result *a = &m->request_vote_result;
		uint8_t granted, pre;
		a->term = r64(&r);
		granted = r8(&r);
		pre = r8(&r);
		if (granted > 1 || pre > raft_tribool_false) {
			return MSG_EMALFORMED;
		}
		a->vote_granted = granted == 1;
		a->pre_vote = (raft_tribool)pre;
		break;
	}
	case RAFT_IO_APPEND_ENTRIES:
		rv = decode_append(&r, &m->append_entries, owner);
		if (rv != 0) {
			return rv;
		}
		*taken = owner != NULL && m->append_entries.n_entries > 0;
		break;
	case RAFT_IO_APPEND_ENTRIES_RESULT: {
		struct raft_append_entries_result *a =
		    &m->append_entries_result;
		a->term = r64(&r);
		a->rejected = r64(&r);
		a->last_log_index = r64(&r);
		break;
	}
	case RAFT_IO_INSTALL_SNAPSHOT:
		rv = decode_snapshot(&r, &m->install_snapshot);
		if (rv != 0) {
			return rv;
		}
		break;
	case RAFT_IO_TIMEOUT_NOW: {
		struct raft_timeout_now *a = &m->timeout_now;
		a->term = r64(&r);
		a->last_log_index = r64(&r);
		a->last_log_term = r64(&r);
		break;
	}
	default:
		return MSG_EMALFORMED;
	}
	if (!done(&r)) {
		if (*taken) {
			/* The owner stays the caller's. */
			m->append_entries.n_entries = 0;
			*taken = false;
		}
		msg_raft_free(m);
		return MSG_EMALFORMED;
	}
	return 0;
}

int msg_raft_decode(const uint8_t *p, size_t len, uint32_t *group,
                    struct raft_message *m)
{
	bool taken;
	return decode_raft(NULL, p, len, group, m, &taken);
}

int msg_raft_decode_take(void *owner, const uint8_t *p, size_t len,
                         uint32_t *group, struct raft_message *m, bool *taken)
{
	return decode_raft(owner, p, len, group, m, taken);
}

void msg_raft_free(struct raft_message *m)
{
	switch (m->type) {
	case RAFT_IO_APPEND_ENTRIES:
		if (m->append_entries.n_entries > 0) {
			raft_free(m->append_entries.entries[0].batch);
		}
		raft_free(m->append_entries.entries);
		m->append_entries.entries = NULL;
		m->append_entries.n_entries = 0;
		break;
	case RAFT_IO_INSTALL_SNAPSHOT:
		raft_configuration_close(&m->install_snapshot.conf);
		raft_free(m->install_snapshot.data.base);
		m->install_snapshot.data.base = NULL;
		break;
	default:
		break;
	}
}

/* ---- routes ---- */

size_t msg_routes_size(uint32_t n)
{
	return 4 + (size_t)n * 12;
}

void msg_routes_write(uint8_t *p, const struct msg_route *r, uint32_t n)
{
	uint32_t i;
	p = w32(p, n);
	for (i = 0; i < n; i++) {
		p = w32(p, r[i].group);
		p = w64(p, r[i].term);
	}
}

int msg_routes_decode(const uint8_t *p, size_t len, uint32_t *n)
{
	struct rd r;
	rd_init(&r, p, len);
	*n = r32(&r);
	if (r.bad || (size_t)*n > rest(&r) / 12 || rest(&r) != *n * 12ull) {
		return MSG_EMALFORMED;
	}
	return 0;
}

void msg_routes_get(const uint8_t *p, uint32_t i, struct msg_route *out)
{
	struct rd r;
	rd_init(&r, p + 4 + (size_t)i * 12, 12);
	out->group = r32(&r);
	out->term = r64(&r);
}

/* ---- forwarding ---- */

size_t msg_fwd_req_size(const struct msg_fwd_req *r)
{
	return 8 + 4 + 1 + 4 + r->len;
}

void msg_fwd_req_write(uint8_t *p, const struct msg_fwd_req *r)
{
	p = w64(p, r->id);
	p = w32(p, r->group);
	p = w8(p, r->op);
	p = w32(p, r->timeout_ms);
	wbytes(p, r->cmd, r->len);
}

int msg_fwd_req_decode(const uint8_t *p, size_t len, struct msg_fwd_req *r)
{
	struct rd d;
	rd_init(&d, p, len);
	r->id = r64(&d);
	r->group = r32(&d);
	r->op = r8(&d);
	r->timeout_ms = r32(&d);
	r->len = rest(&d);
	r->cmd = take(&d, r->len);
	if (!done(&d) || (r->op != MSG_FWD_PROPOSE && r->op != MSG_FWD_READ)) {
		return MSG_EMALFORMED;
	}
	return 0;
}

size_t msg_fwd_resp_size(const struct msg_fwd_resp *r)
{
	return 8 + 1 + 8 + r->len;
}

void msg_fwd_resp_write(uint8_t *p, const struct msg_fwd_resp *r)
{
	p = w64(p, r->id);
	p = w8(p, r->status);
	p = w64(p, r->leader);
	wbytes(p, r->result, r->len);
}

int msg_fwd_resp_decode(const uint8_t *p, size_t len, struct msg_fwd_resp *r)
{
	struct rd d;
	rd_init(&d, p, len);
	r->id = r64(&d);
	r->status = r8(&d);
	r->leader = r64(&d);
	r->len = rest(&d);
	r->result = take(&d, r->len);
	return done(&d) ? 0 : MSG_EMALFORMED;
}

/* ---- read confirmation ----
 * u8 flags (1 answer, 2 ok) | u32 group | u64 term | u64 round */

size_t msg_read_check_size(void)
{
	return 1 + 4 + 8 + 8;
}

void msg_read_check_write(uint8_t *p, const struct msg_read_check *c)
{
	p = w8(p, (uint8_t)((c->answer ? 1 : 0) | (c->ok ? 2 : 0)));
	p = w32(p, c->group);
	p = w64(p, c->term);
	w64(p, c->round);
}

int msg_read_check_decode(const uint8_t *p, size_t len,
                          struct msg_read_check *c)
{
	struct rd d;
	uint8_t flags;
	rd_init(&d, p, len);
	flags = r8(&d);
	c->answer = (flags & 1) != 0;
	c->ok = (flags & 2) != 0;
	c->group = r32(&d);
	c->term = r64(&d);
	c->round = r64(&d);
	return done(&d) && (flags & ~3u) == 0 ? 0 : MSG_EMALFORMED;
}

/* ---- quiescence ----
 * u8 flags (1 wake) | u32 group | u64 term | u64 index */

size_t msg_quiesce_size(void)
{
	return 1 + 4 + 8 + 8;
}

void msg_quiesce_write(uint8_t *p, const struct msg_quiesce *q)
{
	p = w8(p, q->wake ? 1 : 0);
	p = w32(p, q->group);
	p = w64(p, q->term);
	w64(p, q->index);
}

int msg_quiesce_decode(const uint8_t *p, size_t len, struct msg_quiesce *q)
{
	struct rd d;
	uint8_t flags;
	rd_init(&d, p, len);
	flags = r8(&d);
	q->wake = (flags & 1) != 0;
	q->group = r32(&d);
	q->term = r64(&d);
	q->index = r64(&d);
	return done(&d) && (flags & ~1u) == 0 ? 0 : MSG_EMALFORMED;
}

/* ---- state transfer ---- */

size_t msg_xfer_req_size(void)
{
	return 8 + 4 + 8;
}

void msg_xfer_req_write(uint8_t *p, const struct msg_xfer_req *r)
{
	p = w64(p, r->id);
	p = w32(p, r->group);
	w64(p, r->index);
}

int msg_xfer_req_decode(const uint8_t *p, size_t len, struct msg_xfer_req *r)
{
	struct rd d;
	rd_init(&d, p, len);
	r->id = r64(&d);
	r->group = r32(&d);
	r->index = r64(&d);
	return done(&d) ? 0 : MSG_EMALFORMED;
}

size_t msg_xfer_meta_size(const struct msg_xfer_meta *m)
{
	size_t n = 8 + 1 + 8 + 4 + 2 + m->message_len;
	uint32_t i;
	for (i = 0; i < m->n_files; i++) {
		n += 2 + m->files[i].name_len + 8;
	}
	return n;
}

void msg_xfer_meta_write(uint8_t *p, const struct msg_xfer_meta *m)
{
	uint32_t i;
	p = w64(p, m->id);
	p = w8(p, m->status);
	p = w64(p, m->applied);
	p = w32(p, m->n_files);
	for (i = 0; i < m->n_files; i++) {
		p = w16(p, (uint16_t)m->files[i].name_len);
		p = wbytes(p, m->files[i].name, m->files[i].name_len);
		p = w64(p, m->files[i].size);
	}
	p = w16(p, (uint16_t)m->message_len);
	wbytes(p, m->message, m->message_len);
}

int msg_xfer_meta_decode(const uint8_t *p, size_t len, struct msg_xfer_meta *m)
{
	struct rd d;
	uint32_t i;
	size_t start;

	memset(m, 0, sizeof *m);
	rd_init(&d, p, len);
	m->id = r64(&d);
	m->status = r8(&d);
	m->applied = r64(&d);
	m->n_files = r32(&d);
	if (d.bad || m->n_files > rest(&d) / 10) {
		return MSG_EMALFORMED;
	}
	start = d.off;
	for (i = 0; i < m->n_files; i++) {
		uint16_t nl = r16(&d);
		const uint8_t *name = take(&d, nl);
		if (name == NULL || nl == 0 || nl > MSG_NAME_MAX ||
		    memchr(name, '/', nl) != NULL ||
		    memchr(name, '\0', nl) != NULL ||
		    (name[0] == '.' &&
		     (nl == 1 || (nl == 2 && name[1] == '.')))) {
			return MSG_EMALFORMED;
		}
		r64(&d);
	}
	if (d.bad) {
		return MSG_EMALFORMED;
	}
	m->files_enc = p + start;
	m->files_len = d.off - start;
	m->message_len = r16(&d);
	m->message = (const char *)take(&d, m->message_len);
	if (!done(&d) || m->status > MSG_XFER_UNKNOWN) {
		return MSG_EMALFORMED;
	}
	return 0;
}

void msg_xfer_meta_file(const struct msg_xfer_meta *m, size_t *off,
                        struct msg_xfer_file *f)
{
	struct rd d;
	rd_init(&d, m->files_enc + *off, m->files_len - *off);
	f->name_len = r16(&d);
	f->name = (const char *)take(&d, f->name_len);
	f->size = r64(&d);
	*off += d.off;
}

size_t msg_xfer_get_size(void)
{
	return 8 + 4 + 8 + 4;
}

void msg_xfer_get_write(uint8_t *p, const struct msg_xfer_get *g)
{
	p = w64(p, g->id);
	p = w32(p, g->file);
	p = w64(p, g->offset);
	w32(p, g->len);
}

int msg_xfer_get_decode(const uint8_t *p, size_t len, struct msg_xfer_get *g)
{
	struct rd d;
	rd_init(&d, p, len);
	g->id = r64(&d);
	g->file = r32(&d);
	g->offset = r64(&d);
	g->len = r32(&d);
	return done(&d) ? 0 : MSG_EMALFORMED;
}

size_t msg_xfer_data_header_size(void)
{
	return 8 + 4 + 8 + 1;
}

void msg_xfer_data_write_header(uint8_t *p, const struct msg_xfer_data *x)
{
	p = w64(p, x->id);
	p = w32(p, x->file);
	p = w64(p, x->offset);
	w8(p, x->status);
}

int msg_xfer_data_decode(const uint8_t *p, size_t len, struct msg_xfer_data *x)
{
	struct rd d;
	rd_init(&d, p, len);
	x->id = r64(&d);
	x->file = r32(&d);
	x->offset = r64(&d);
	x->status = r8(&d);
	x->len = rest(&d);
	x->data = take(&d, x->len);
	if (!done(&d) || x->status > MSG_XFER_UNKNOWN) {
		return MSG_EMALFORMED;
	}
	return 0;
}

size_t msg_xfer_end_size(void)
{
	return 8;
}

void msg_xfer_end_write(uint8_t *p, uint64_t id)
{
	w64(p, id);
}

int msg_xfer_end_decode(const uint8_t *p, size_t len, uint64_t *id)
{
	struct rd d;
	rd_init(&d, p, len);
	*id = r64(&d);
	return done(&d) ? 0 : MSG_EMALFORMED;
}

int msg_node_cn_parse(const char *cn, uint64_t *id)
{
	static const char prefix[] = "node-";
	const char *d = cn + sizeof prefix - 1;
	uint64_t v = 0;

	if (strncmp(cn, prefix, sizeof prefix - 1) != 0 || *d < '1' ||
	    *d > '9') {
		return MSG_EMALFORMED;
	}
	for (; *d != '\0'; d++) {
		if (*d < '0' || *d > '9' || v > (UINT64_MAX - 9) / 10) {
			return MSG_EMALFORMED;
		}
		v = v * 10 + (uint64_t)(*d - '0');
	}
	*id = v;
	return 0;
}

/* State transfer for snapshots; see xfer.h. */
#include "raft/xfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raft/msg_codec.h"

#define DEFAULT_CHUNK (1u << 20)
#define MAX_CHUNK (4u << 20)
#define DEFAULT_WINDOW 4
#define DEFAULT_TIMEOUT 10000
#define DEFAULT_RETRY 1000
#define DEFAULT_EXPORTS 4
#define DEFAULT_TTL 60000
#define TICK_MS 250
#define MAX_SOURCES 16
#define PATH_LEN 1100

enum { F_IDLE = 1, F_META, F_PULL };
enum { E_RUNNING = 1, E_READY };

struct xfile {
	char name[MSG_NAME_MAX + 1];
	uint64_t size;
	uint64_t requested;
	uint64_t received;
	int fd;
};

/* One state transfer this node asked for. */
struct fetch {
	struct xfer *x;
	struct fetch *prev;
	struct fetch *next;
	uint64_t id; /* of the current attempt */
	uint32_t group;
	uint64_t index;
	uint64_t from;
	group_fetch_done_fn done;
	void *done_data;
	int state;
	unsigned attempt;
	uint64_t source;
	char dir[PATH_LEN];
	struct xfile *files;
	uint32_t n_files;
	uint32_t cur;
	unsigned inflight;
	uint64_t last_progress_ms;
	uint64_t retry_at_ms;
};

/* One export this node serves. */
struct export
{
	struct xfer *x;
	struct export *prev;
	struct export *next;
	uint64_t peer;
	uint64_t id;
	uint32_t group;
	uint64_t index;
	int state;
	bool dropped; /* nobody wants it any more (worker still running) */
	uv_work_t work;
	int rv;
	uint64_t applied;
	char dir[PATH_LEN];
	struct xfile *files;
	uint32_t n_files;
	uint64_t last_used_ms;
};

struct xfer {
	uv_loop_t *loop;
	struct transport *t;
	struct xfer_options o;
	char dir[PATH_LEN];
	uv_timer_t timer; /* timer.data = this */
	struct fetch *fetches;
	struct export *exports;
	unsigned n_exports;
	unsigned running; /* export workers under way */
	uint64_t next_id;
	uint8_t *scratch; /* one chunk */
	bool closing;
	bool timer_closed;
	xfer_close_cb close_cb;
	void *close_data;
	struct xfer_stats st;
};

static void logf_(struct xfer *x, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(struct xfer *x, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (x->o.log == NULL) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	x->o.log(x->o.data, level, msg);
}

static uint64_t now_ms(const struct xfer *x)
{
	return uv_now(x->loop);
}

/* Removes a directory of plain files. */
static void rm_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char p[PATH_LEN + MSG_NAME_MAX + 2];

	if (d == NULL) {
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0) {
			continue;
		}
		snprintf(p, sizeof p, "%s/%s", path, e->d_name);
		if (unlink(p) != 0 && errno == EISDIR) {
			rm_dir(p);
		}
	}
	closedir(d);
	rmdir(path);
}

static void close_files(struct xfile *f, uint32_t n)
{
	uint32_t i;
	for (i = 0; i < n; i++) {
		if (f[i].fd >= 0) {
			close(f[i].fd);
			f[i].fd = -1;
		}
	}
}

/* ---- fetching ---- */

static void fetch_unlink(struct fetch *f)
{
	struct xfer *x = f->x;
	if (f->prev != NULL) {
		f->prev->next = f->next;
	} else {
		x->fetches = f->next;
	}
	if (f->next != NULL) {
		f->next->prev = f->prev;
	}
	x->st.running--;
}

static void fetch_reset(struct fetch *f)
{
	close_files(f->files, f->n_files);
	free(f->files);
	f->files = NULL;
	f->n_files = 0;
	f->cur = 0;
	f->inflight = 0;
	if (f->dir[0] != '\0') {
		rm_dir(f->dir);
		f->dir[0] = '\0';
	}
}

static void send_end(struct xfer *x, uint64_t peer, uint64_t id)
{
	int st;
	uint8_t *p = transport_reserve(x->t, peer, MSG_XFER_END,
	                               msg_xfer_end_size(), &st);
	if (p != NULL) {
		msg_xfer_end_write(p, id);
	}
}

static void fail_attempt(struct fetch *f, const char *why)
{
	struct xfer *x = f->x;

	logf_(x, TRANSPORT_INFO,
	      "state transfer of group %u (index %llu) from node %llu: %s; "
	      "retrying",
	      f->group, (unsigned long long)f->index,
	      (unsigned long long)f->source, why);
	if (f->state != F_IDLE && f->source != 0) {
		send_end(x, f->source, f->id);
	}
	fetch_reset(f);
	f->state = F_IDLE;
	f->attempt++;
	f->retry_at_ms = now_ms(x) + x->o.retry_ms;
}

static void fetch_complete(struct fetch *f)
{
	struct xfer *x = f->x;
	uint32_t i;

	for (i = 0; i < f->n_files; i++) {
		if (f->files[i].fd >= 0 && fsync(f->files[i].fd) != 0) {
			fail_attempt(f, "cannot sync a received file");
			return;
		}
	}
	close_files(f->files, f->n_files);
	send_end(x, f->source, f->id);
	fetch_unlink(f);
	x->st.fetches++;
	logf_(x, TRANSPORT_INFO,
	      "state of group %u (index >= %llu) received from node %llu "
	      "(%u files)",
	      f->group, (unsigned long long)f->index,
	      (unsigned long long)f->source, f->n_files);
	f->done(f->done_data, 0, f->dir);
	fetch_reset(f);
	free(f);
}

static uint64_t pick_source(struct fetch *f)
{
	struct xfer *x = f->x;
	uint64_t ids[MAX_SOURCES + 1];
	size_t n = 0, i;

	ids[n++] = f->from;
	if (x->o.sources != NULL) {
		n += x->o.sources(x->o.data, f->group, ids + 1, MAX_SOURCES);
	}
	for (i = 0; i < n; i++) {
		uint64_t id = ids[(f->attempt + i) % n];
		if (id != 0 && id != x->o.node_id &&
		    transport_connected(x->t, id)) {
			return id;
		}
	}
	return 0;
}

static void start_attempt(struct fetch *f)
{
	struct xfer *x = f->x;
	struct msg_xfer_req r;
	uint64_t src = pick_source(f);
	uint8_t *p;
	int st;

	if (src == 0) {
		f->attempt++;
		f->retry_at_ms = now_ms(x) + x->o.retry_ms;
		return;
	}
	f->id = ++x->next_id;
	f->source = src;
	snprintf(f->dir, sizeof f->dir, "%s/in-g%u-%llu", x->dir, f->group,
	         (unsigned long long)f->id);
	if (mkdir(f->dir, 0755) != 0) {
		logf_(x, TRANSPORT_ERROR,
		      "state transfer: cannot create %s: %s", f->dir,
		      strerror(errno));
		f->dir[0] = '\0';
		f->attempt++;
		f->retry_at_ms = now_ms(x) + x->o.retry_ms;
		return;
	}
	r.id = f->id;
	r.group = f->group;
	r.index = f->index;
	p = transport_reserve(x->t, src, MSG_XFER_REQ, msg_xfer_req_size(),
	                      &st);
	if (p == NULL) {
		fetch_reset(f);
		f->attempt++;
		f->retry_at_ms = now_ms(x) + x->o.retry_ms;
		return;
	}
	msg_xfer_req_write(p, &r);
	x->st.attempts++;
	f->state = F_META;
	f->last_progress_ms = now_ms(x);
}

int xfer_fetch(void *data, uint32_t group, uint64_t from, uint64_t index,
               group_fetch_done_fn done, void *done_data)
{
	struct xfer *x = data;
	struct fetch *f;

	if (x->closing) {
		return -1;
	}
	f = calloc(1, sizeof *f);
	if (f == NULL) {
		return -1;
	}
	f->x = x;
	f->group = group;
	f->index = index;
	f->from = from;
	f->done = done;
	f->done_data = done_data;
	f->state = F_IDLE;
	f->next = x->fetches;
	if (x->fetches != NULL) {
		x->fetches->prev = f;
	}
	x->fetches = f;
	x->st.running++;
	logf_(x, TRANSPORT_INFO,
	      "group %u needs its state as of index %llu (snapshot from node "
	      "%llu)",
	      group, (unsigned long long)index, (unsigned long long)from);
	start_attempt(f);
	return 0;
}

static void pump(struct fetch *f)
{
	struct xfer *x = f->x;

	while (f->inflight < x->o.window && f->cur < f->n_files) {
		struct xfile *xf = &f->files[f->cur];
		struct msg_xfer_get g;
		uint64_t left = xf->size - xf->requested;
		uint8_t *p;
		int st;

		if (left == 0) {
			f->cur++;
			continue;
		}
		g.id = f->id;
		g.file = f->cur;
		g.offset = xf->requested;
		g.len =
		    left < x->o.chunk_bytes ? (uint32_t)left : x->o.chunk_bytes;
		p = transport_reserve(x->t, f->source, MSG_XFER_GET,
		                      msg_xfer_get_size(), &st);
		if (p == NULL) {
			fail_attempt(f, "cannot ask for the next chunk");
			return;
		}
		msg_xfer_get_write(p, &g);
		xf->requested += g.len;
		f->inflight++;
	}
	if (f->inflight == 0 && f->cur == f->n_files) {
		fetch_complete(f);
	}
}

static struct fetch *find_fetch(struct xfer *x, uint64_t peer, uint64_t id)
{
	struct fetch *f;
	for (f = x->fetches; f != NULL; f = f->next) {
		if (f->id == id && f->source == peer && f->state != F_IDLE) {
			return f;
		}
	}
	return NULL;
}

static const char *xfer_status_name(uint8_t status)
{
	switch (status) {
	case MSG_XFER_NOGROUP:
		return "the group has no replica there";
	case MSG_XFER_BEHIND:
		return "its state is older than needed";
	case MSG_XFER_BUSY:
		return "it is busy with other transfers";
	case MSG_XFER_UNKNOWN:
		return "it dropped the export";
	default:
		return "export failed";
	}
}

static void on_meta(struct xfer *x, uint64_t peer, const uint8_t *p, size_t len)
{
	struct msg_xfer_meta m;
	struct fetch *f;
	size_t off = 0;
	uint32_t i;
	char why[300];

	if (msg_xfer_meta_decode(p, len, &m) != 0) {
		return;
	}
	f = find_fetch(x, peer, m.id);
	if (f == NULL || f->state != F_META) {
		return;
	}
	if (m.status != MSG_XFER_OK) {
		snprintf(why, sizeof why, "%s%s%.*s",
		         xfer_status_name(m.status),
		         m.message_len > 0 ? ": " : "", (int)m.message_len,
		         m.message);
		fail_attempt(f, why);
		return;
	}
	if (m.applied < f->index) {
		fail_attempt(f, "its export is older than needed");
		return;
	}
	f->files = calloc(m.n_files > 0 ? m.n_files : 1, sizeof *f->files);
	if (f->files == NULL) {
		fail_attempt(f, "out of memory");
		return;
	}
	f->n_files = m.n_files;
	for (i = 0; i < m.n_files; i++) {
		f->files[i].fd = -1;
	}
	for (i = 0; i < m.n_files; i++) {
		struct msg_xfer_file mf;
		char path[PATH_LEN + MSG_NAME_MAX + 2];
		msg_xfer_meta_file(&m, &off, &mf);
		memcpy(f->files[i].name, mf.name, mf.name_len);
		f->files[i].name[mf.name_len] = '\0';
		f->files[i].size = mf.size;
		snprintf(path, sizeof path, "%s/%s", f->dir, f->files[i].name);
		f->files[i].fd =
		    open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (f->files[i].fd < 0) {
			snprintf(why, sizeof why, "cannot create %s: %s", path,
			         strerror(errno));
			fail_attempt(f, why);
			return;
		}
	}
	f->state = F_PULL;
	f->last_progress_ms = now_ms(x);
	pump(f);
}

static void on_data(struct xfer *x, uint64_t peer, const uint8_t *p, size_t len)
{
	struct msg_xfer_data d;
	struct fetch *f;
	struct xfile *xf;
	size_t done = 0;

	if (msg_xfer_data_decode(p, len, &d) != 0) {
		return;
	}
	f = find_fetch(x, peer, d.id);
	if (f == NULL || f->state != F_PULL) {
		return;
	}
	if (d.status != MSG_XFER_OK) {
		fail_attempt(f, xfer_status_name(d.status));
		return;
	}
	if (d.file >= f->n_files) {
		fail_attempt(f, "sent a chunk of an unknown file");
		return;
	}
	xf = &f->files[d.file];
	if (d.offset != xf->received || d.len == 0 ||
	    d.len > xf->size - xf->received) {
		fail_attempt(f, "sent a chunk out of order");
		return;
	}
	while (done < d.len) {
		ssize_t w = pwrite(xf->fd, d.data + done, d.len - done,
		                   (off_t)(d.offset + done));
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			fail_attempt(f, "cannot write a received chunk");
			return;
		}
		done += (size_t)w;
	}
	xf->received += d.len;
	x->st.bytes_in += d.len;
	f->inflight--;
	f->last_progress_ms = now_ms(x);
	pump(f);
}

/* ---- exporting ---- */

static void export_free(struct export *e)
{
	struct xfer *x = e->x;
	if (e->prev != NULL) {
		e->prev->next = e->next;
	} else if (x->exports == e) {
		x->exports = e->next;
	}
	if (e->next != NULL) {
		e->next->prev = e->prev;
	}
	x->n_exports--;
	close_files(e->files, e->n_files);
	free(e->files);
	rm_dir(e->dir);
	free(e);
}

static void reply_meta(struct xfer *x, uint64_t peer, uint64_t id,
                       uint8_t status, uint64_t applied, const struct export *e,
                       const char *msg)
{
	struct msg_xfer_meta m;
	struct msg_xfer_file *files = NULL;
	uint32_t i;
	uint8_t *p;
	int st;

	memset(&m, 0, sizeof m);
	m.id = id;
	m.status = status;
	m.applied = applied;
	m.message = msg;
	m.message_len = strlen(msg);
	if (m.message_len > MSG_REASON_MAX) {
		m.message_len = MSG_REASON_MAX;
	}
	if (e != NULL && e->n_files > 0) {
		files = calloc(e->n_files, sizeof *files);
		if (files == NULL) {
			return;
		}
		for (i = 0; i < e->n_files; i++) {
			files[i].name = e->files[i].name;
			files[i].name_len = strlen(e->files[i].name);
			files[i].size = e->files[i].size;
		}
		m.files = files;
		m.n_files = e->n_files;
	}
	p = transport_reserve(x->t, peer, MSG_XFER_META, msg_xfer_meta_size(&m),
	                      &st);
	if (p != NULL) {
		msg_xfer_meta_write(p, &m);
	}
	free(files);
}

static void export_work(uv_work_t *w)
{
	struct export *e = w->data;
	struct xfer *x = e->x;
	e->rv = x->o.export_state(x->o.data, e->group, e->dir, &e->applied);
}

static int list_files(struct export *e)
{
	DIR *d = opendir(e->dir);
	struct dirent *de;
	uint32_t n = 0, cap = 0;

	if (d == NULL) {
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		char path[PATH_LEN + MSG_NAME_MAX + 2];
		struct stat sb;
		size_t nl = strlen(de->d_name);
		if (de->d_name[0] == '.' || nl > MSG_NAME_MAX) {
			continue;
		}
		snprintf(path, sizeof path, "%s/%s", e->dir, de->d_name);
		if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			continue;
		}
		if (n == cap) {
			uint32_t nc = cap == 0 ? 8 : cap * 2;
			struct xfile *v = realloc(e->files, nc * sizeof *v);
			if (v == NULL) {
				closedir(d);
				return -1;
			}
			e->files = v;
			cap = nc;
		}
		memcpy(e->files[n].name, de->d_name, nl + 1);
		e->files[n].size = (uint64_t)sb.st_size;
		e->files[n].fd = -1;
		e->n_files = ++n;
	}
	closedir(d);
	return 0;
}

static void maybe_closed(struct xfer *x);

static void export_done(uv_work_t *w, int status)
{
	struct export *e = w->data;
	struct xfer *x = e->x;
	char msg[128];

	x->running--;
	if (e->dropped || x->closing) {
		export_free(e);
		maybe_closed(x);
		return;
	}
	if (status != 0 || e->rv != 0) {
		logf_(x, TRANSPORT_WARN,
		      "export of group %u for node %llu failed", e->group,
		      (unsigned long long)e->peer);
		reply_meta(x, e->peer, e->id, MSG_XFER_FAILED, 0, NULL,
		           "export failed");
		export_free(e);
		return;
	}
	if (e->applied < e->index) {
		snprintf(msg, sizeof msg, "state at %llu, %llu asked",
		         (unsigned long long)e->applied,
		         (unsigned long long)e->index);
		reply_meta(x, e->peer, e->id, MSG_XFER_BEHIND, e->applied, NULL,
		           msg);
		export_free(e);
		return;
	}
	if (list_files(e) != 0) {
		reply_meta(x, e->peer, e->id, MSG_XFER_FAILED, 0, NULL,
		           "cannot list the export");
		export_free(e);
		return;
	}
	e->state = E_READY;
	e->last_used_ms = now_ms(x);
	reply_meta(x, e->peer, e->id, MSG_XFER_OK, e->applied, e, "");
}

static void on_request(struct xfer *x, uint64_t peer, const uint8_t *p,
                       size_t len)
{
	struct msg_xfer_req r;
	struct export *e;
	uint64_t applied = 0;
	char msg[128];

	if (msg_xfer_req_decode(p, len, &r) != 0) {
		return;
	}
	if (x->closing || x->n_exports >= x->o.max_exports) {
		reply_meta(x, peer, r.id, MSG_XFER_BUSY, 0, NULL, "");
		return;
	}
	if (x->o.applied_index(x->o.data, r.group, &applied) != 0) {
		reply_meta(x, peer, r.id, MSG_XFER_NOGROUP, 0, NULL, "");
		return;
	}
	if (applied < r.index) {
		snprintf(msg, sizeof msg, "state at %llu, %llu asked",
		         (unsigned long long)applied,
		         (unsigned long long)r.index);
		reply_meta(x, peer, r.id, MSG_XFER_BEHIND, applied, NULL, msg);
		return;
	}
	e = calloc(1, sizeof *e);
	if (e == NULL) {
		reply_meta(x, peer, r.id, MSG_XFER_FAILED, 0, NULL,
		           "out of memory");
		return;
	}
	e->x = x;
	e->peer = peer;
	e->id = r.id;
	e->group = r.group;
	e->index = r.index;
	e->state = E_RUNNING;
	snprintf(e->dir, sizeof e->dir, "%s/out-g%u-n%llu-%llu", x->dir,
	         r.group, (unsigned long long)peer, (unsigned long long)r.id);
	rm_dir(e->dir);
	if (mkdir(e->dir, 0755) != 0) {
		free(e);
		reply_meta(x, peer, r.id, MSG_XFER_FAILED, 0, NULL,
		           "cannot create the export directory");
		return;
	}
	e->work.data = e;
	if (uv_queue_work(x->loop, &e->work, export_work, export_done) != 0) {
		rmdir(e->dir);
		free(e);
		reply_meta(x, peer, r.id, MSG_XFER_FAILED, 0, NULL,
		           "cannot start the export");
		return;
	}
	e->next = x->exports;
	if (x->exports != NULL) {
		x->exports->prev = e;
	}
	x->exports = e;
	x->n_exports++;
	x->running++;
	logf_(x, TRANSPORT_INFO,
	      "exporting group %u (index >= %llu) for node %llu", r.group,
	      (unsigned long long)r.index, (unsigned long long)peer);
}

static struct export *find_export(struct xfer *x, uint64_t peer, uint64_t id)
{
	struct export *e;
	for (e = x->exports; e != NULL; e = e->next) {
		if (e->peer == peer && e->id == id && !e->dropped) {
			return e;
		}
	}
	return NULL;
}

static void send_data(struct xfer *x, uint64_t peer,
                      const struct msg_xfer_get *g, uint8_t status,
                      const uint8_t *data, size_t len)
{
	struct msg_xfer_data d;
	size_t h = msg_xfer_data_header_size();
	uint8_t *p;
	int st;

	d.id = g->id;
	d.file = g->file;
	d.offset = g->offset;
	d.status = status;
	p = transport_reserve(x->t, peer, MSG_XFER_DATA, h + len, &st);
	if (p == NULL) {
		return; /* the fetcher times out and retries */
	}
	msg_xfer_data_write_header(p, &d);
	if (len > 0) {
		memcpy(p + h, data, len);
	}
	x->st.bytes_out += len;
}

static void on_get(struct xfer *x, uint64_t peer, const uint8_t *p, size_t len)
{
	struct msg_xfer_get g;
	struct export *e;
	struct xfile *xf;
	size_t want, got = 0;

	if (msg_xfer_get_decode(p, len, &g) != 0) {
		return;
	}
	e = find_export(x, peer, g.id);
	if (e == NULL || e->state != E_READY) {
		send_data(x, peer, &g, MSG_XFER_UNKNOWN, NULL, 0);
		return;
	}
	if (g.file >= e->n_files || g.offset > e->files[g.file].size) {
		send_data(x, peer, &g, MSG_XFER_FAILED, NULL, 0);
		return;
	}
	xf = &e->files[g.file];
	e->last_used_ms = now_ms(x);
	want = g.len < MAX_CHUNK ? g.len : MAX_CHUNK;
	if (want > xf->size - g.offset) {
		want = (size_t)(xf->size - g.offset);
	}
	if (xf->fd < 0) {
		char path[PATH_LEN + MSG_NAME_MAX + 2];
		snprintf(path, sizeof path, "%s/%s", e->dir, xf->name);
		xf->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (xf->fd < 0) {
			send_data(x, peer, &g, MSG_XFER_FAILED, NULL, 0);
			return;
		}
	}
	while (got < want) {
		ssize_t r = pread(xf->fd, x->scratch + got, want - got,
		                  (off_t)(g.offset + got));
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			send_data(x, peer, &g, MSG_XFER_FAILED, NULL, 0);
			return;
		}
		got += (size_t)r;
	}
	send_data(x, peer, &g, MSG_XFER_OK, x->scratch, got);
}

static void on_end(struct xfer *x, uint64_t peer, const uint8_t *p, size_t len)
{
	uint64_t id;
	struct export *e;

	if (msg_xfer_end_decode(p, len, &id) != 0) {
		return;
	}
	e = find_export(x, peer, id);
	if (e == NULL) {
		return;
	}
	if (e->state == E_RUNNING) {
		e->dropped = true;
		return;
	}
	x->st.exports++;
	export_free(e);
}

void xfer_on_frame(struct xfer *x, uint64_t peer, uint8_t kind,
                   const uint8_t *p, size_t len)
{
	switch (kind) {
	case MSG_XFER_REQ:
		on_request(x, peer, p, len);
		break;
	case MSG_XFER_META:
		on_meta(x, peer, p, len);
		break;
	case MSG_XFER_GET:
		on_get(x, peer, p, len);
		break;
	case MSG_XFER_DATA:
		on_data(x, peer, p, len);
		break;
	case MSG_XFER_END:
		on_end(x, peer, p, len);
		break;
	default:
		break;
	}
}

void xfer_on_peer(struct xfer *x, uint64_t peer, bool up, uint64_t gen)
{
	struct fetch *f;
	struct export *e, *next;

	(void)gen;
	if (up) {
		return;
	}
	for (f = x->fetches; f != NULL; f = f->next) {
		if (f->source == peer && f->state != F_IDLE) {
			f->source = 0; /* nothing to tell it */
			fail_attempt(f, "the connection went down");
		}
	}
	for (e = x->exports; e != NULL; e = next) {
		next = e->next;
		if (e->peer != peer) {
			continue;
		}
		if (e->state == E_RUNNING) {
			e->dropped = true;
		} else {
			export_free(e);
		}
	}
}

static void timer_cb(uv_timer_t *h)
{
	struct xfer *x = h->data;
	uint64_t now = now_ms(x);
	struct fetch *f, *fnext;
	struct export *e, *enext;

	for (f = x->fetches; f != NULL; f = fnext) {
		fnext = f->next;
		if (f->state == F_IDLE) {
			if (now >= f->retry_at_ms) {
				start_attempt(f);
			}
		} else if (now - f->last_progress_ms >= x->o.timeout_ms) {
			fail_attempt(f, "no progress");
		}
	}
	for (e = x->exports; e != NULL; e = enext) {
		enext = e->next;
		if (e->state == E_READY &&
		    now - e->last_used_ms >= x->o.export_ttl_ms) {
			export_free(e);
		}
	}
}

void xfer_stats(const struct xfer *x, struct xfer_stats *st)
{
	*st = x->st;
}

static int mkdirs(const char *path)
{
	char p[PATH_LEN];
	size_t i, n = strlen(path);
	if (n >= sizeof p) {
		return -1;
	}
	memcpy(p, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (p[i] == '/' || p[i] == '\0') {
			char c = p[i];
			p[i] = '\0';
			if (mkdir(p, 0755) != 0 && errno != EEXIST) {
				return -1;
			}
			p[i] = c;
		}
	}
	return 0;
}

int xfer_init(struct xfer **out, uv_loop_t *loop, struct transport *t,
              const struct xfer_options *o, char *err, size_t errlen)
{
	struct xfer *x;

	*out = NULL;
	if (o->export_state == NULL || o->applied_index == NULL ||
	    o->dir == NULL || strlen(o->dir) + 64 >= PATH_LEN) {
		snprintf(err, errlen, "state transfer: bad options");
		return -1;
	}
	x = calloc(1, sizeof *x);
	if (x == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	x->loop = loop;
	x->t = t;
	x->o = *o;
	snprintf(x->dir, sizeof x->dir, "%s", o->dir);
	x->o.dir = x->dir;
	if (x->o.chunk_bytes == 0 || x->o.chunk_bytes > MAX_CHUNK) {
		x->o.chunk_bytes = DEFAULT_CHUNK;
	}
	if (x->o.window == 0) {
		x->o.window = DEFAULT_WINDOW;
	}
	if (x->o.timeout_ms == 0) {
		x->o.timeout_ms = DEFAULT_TIMEOUT;
	}
	if (x->o.retry_ms == 0) {
		x->o.retry_ms = DEFAULT_RETRY;
	}
	if (x->o.max_exports == 0) {
		x->o.max_exports = DEFAULT_EXPORTS;
	}
	if (x->o.export_ttl_ms == 0) {
		x->o.export_ttl_ms = DEFAULT_TTL;
	}
	/* Leftovers of an earlier run are worthless. */
	rm_dir(x->dir);
	if (mkdirs(x->dir) != 0) {
		snprintf(err, errlen, "state transfer: cannot create %s: %s",
		         x->dir, strerror(errno));
		free(x);
		return -1;
	}
	x->scratch = malloc(MAX_CHUNK);
	if (x->scratch == NULL) {
		snprintf(err, errlen, "out of memory");
		free(x);
		return -1;
	}
	uv_timer_init(loop, &x->timer);
	x->timer.data = x;
	uv_timer_start(&x->timer, timer_cb, TICK_MS, TICK_MS);
	uv_unref((uv_handle_t *)&x->timer);
	*out = x;
	return 0;
}

static void maybe_closed(struct xfer *x)
{
	if (x->closing && x->running == 0 && x->timer_closed &&
	    x->close_cb != NULL) {
		xfer_close_cb cb = x->close_cb;
		x->close_cb = NULL;
		cb(x, x->close_data);
	}
}

static void timer_closed(uv_handle_t *h)
{
	struct xfer *x = h->data;
	x->timer_closed = true;
	maybe_closed(x);
}

void xfer_close(struct xfer *x, xfer_close_cb cb, void *data)
{
	struct export *e, *next;

	if (x->closing) {
		return;
	}
	x->closing = true;
	x->close_cb = cb;
	x->close_data = data;
	while (x->fetches != NULL) {
		struct fetch *f = x->fetches;
		fetch_reset(f);
		fetch_unlink(f);
		f->done(f->done_data, REPLICA_ESHUTDOWN, NULL);
		free(f);
	}
	for (e = x->exports; e != NULL; e = next) {
		next = e->next;
		if (e->state == E_RUNNING) {
			e->dropped = true;
		} else {
			export_free(e);
		}
	}
	uv_close((uv_handle_t *)&x->timer, timer_closed);
}

void xfer_free(struct xfer *x)
{
	if (x == NULL) {
		return;
	}
	free(x->scratch);
	free(x);
}

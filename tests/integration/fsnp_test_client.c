/* Blocking FSNP test client; see fsnp_test_client.h. */
#include "tests/integration/fsnp_test_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "wire/fsnp_compress.h"
#include "wire/fsnp_opcode.h"

int ftc_connect(struct ftc *c, uint16_t port)
{
	return ftc_connect_ip(c, "127.0.0.1", port);
}

int ftc_connect_ip(struct ftc *c, const char *ipv4, uint16_t port)
{
	struct sockaddr_in a;
	uint64_t deadline = harness_mono_ms() + 10000;
	memset(c, 0, sizeof *c);
	c->next_rid = 1;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	if (inet_pton(AF_INET, ipv4, &a.sin_addr) != 1) {
		return -1;
	}
	for (;;) {
		c->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (c->fd < 0) {
			return -1;
		}
		if (connect(c->fd, (struct sockaddr *)&a, sizeof a) == 0) {
			break;
		}
		close(c->fd);
		if (harness_mono_ms() > deadline) {
			c->fd = -1;
			return -1;
		}
		usleep(20000);
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct fsnp_chunk_limits lim = {128u << 20, 4096, 1u << 30, 0};
	fsnp_chunk_init(&c->chunks, &lim);
	return 0;
}

void ftc_close(struct ftc *c)
{
	if (c->ssl != NULL) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);
	}
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
	fsnp_chunk_close(&c->chunks);
}

static void ssl_err(struct ftc *c, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[200] = "";
	if (e != 0) {
		ERR_error_string_n(e, buf, sizeof buf);
	}
	snprintf(c->tls_err, sizeof c->tls_err, "%s: %s", what, buf);
	ERR_clear_error();
}

int ftc_connect_tls(struct ftc *c, uint16_t port, const char *ca_file,
                    const char *cert_file, const char *key_file)
{
	SSL_CTX *ctx;
	SSL *ssl;
	/* SSL_write has no MSG_NOSIGNAL: a server that refuses the session
	 * must fail the write, not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	if (ftc_connect(c, port) != 0) {
		snprintf(c->tls_err, sizeof c->tls_err, "cannot connect");
		return -1;
	}
	/* Blocking reads must not hang a test on a half-open handshake. */
	struct timeval tv = {10, 0};
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL) {
		ssl_err(c, "SSL_CTX_new");
		goto err;
	}
	if (ca_file != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
			ssl_err(c, "CA file");
			SSL_CTX_free(ctx);
			goto err;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	if (cert_file != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1 ||
	     SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) !=
	         1)) {
		ssl_err(c, "client certificate");
		SSL_CTX_free(ctx);
		goto err;
	}
	ssl = SSL_new(ctx);
	SSL_CTX_free(ctx); /* the SSL keeps a reference */
	if (ssl == NULL) {
		ssl_err(c, "SSL_new");
		goto err;
	}
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	SSL_set_fd(ssl, c->fd);
	c->ssl = ssl;
	if (SSL_connect(ssl) != 1) {
		ssl_err(c, "handshake");
		goto err;
	}
	return 0;
err : {
	char keep[sizeof c->tls_err];
	memcpy(keep, c->tls_err, sizeof keep);
	ftc_close(c);
	memcpy(c->tls_err, keep, sizeof keep);
}
	return -1;
}

int ftc_send_raw(struct ftc *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	if (c->ssl != NULL) {
		while (n > 0) {
			size_t w = 0;
			if (SSL_write_ex(c->ssl, b, n, &w) != 1) {
				ERR_clear_error();
				return -1;
			}
			b += w;
			n -= w;
		}
		return 0;
	}
	while (n > 0) {
		ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR) {
				continue;
			}
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int ftc_send_frame(struct ftc *c, uint32_t lane, uint16_t opcode, uint8_t flags,
                   uint64_t rid, const void *body, size_t len)
{
	struct fsnp_header h = {FSNP_DIR_REQUEST, flags, lane,
	                        opcode,           rid,   (uint32_t)len};
	uint8_t hdr[FSNP_HEADER_SIZE];
	fsnp_frame_encode_header(&h, hdr);
	if (ftc_send_raw(c, hdr, sizeof hdr) != 0) {
		return -1;
	}
	return len > 0 ? ftc_send_raw(c, body, len) : 0;
}

uint64_t ftc_send(struct ftc *c, uint32_t lane, uint16_t opcode, uint8_t flags,
                  const struct wbuf *body)
{
	uint64_t rid = c->next_rid++;
	if (opcode < FSNP_OP_COMMAND_EXEC && opcode != FSNP_OP_PIPELINE) {
		lane = 0;
	}
	if (ftc_send_frame(c, lane, opcode, flags, rid,
	                   body ? body->data : NULL,
	                   body ? body->len : 0) != 0) {
		return 0;
	}
	return rid;
}

/* Reads more bytes; -1 on timeout or EOF. */
static int fill(struct ftc *c, int timeout_ms)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	if (c->cap - c->len < 65536) {
		size_t cap = c->cap ? c->cap * 2 : 131072;
		uint8_t *nb = realloc(c->buf, cap);
		if (nb == NULL) {
			return -1;
		}
		c->buf = nb;
		c->cap = cap;
	}
	if ((c->ssl == NULL || SSL_pending(c->ssl) == 0) &&
	    poll(&p, 1, timeout_ms) <= 0) {
		return -1;
	}
	if (c->ssl != NULL) {
		size_t got = 0;
		if (SSL_read_ex(c->ssl, c->buf + c->len, c->cap - c->len,
		                &got) != 1) {
			ERR_clear_error();
			return -1;
		}
		c->len += got;
		return 0;
	}
	ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (r <= 0) {
		return -1;
	}
	c->len += (size_t)r;
	return 0;
}

int ftc_recv(struct ftc *c, struct ftc_msg *m, int timeout_ms)
{
	uint64_t deadline = harness_mono_ms() + (uint64_t)timeout_ms;
	unsigned frames = 0;
	uint32_t maxb = 0;
	memset(m, 0, sizeof *m);
	for (;;) {
		struct fsnp_frame f;
		size_t flen = 0;
		if (fsnp_frame_decode(c->buf, c->len, FSNP_DIR_RESPONSE,
		                      FSNP_MAX_FRAME_BYTES_LIMIT, &f,
		                      &flen) != 0) {
			return -1;
		}
		if (flen == 0) {
			uint64_t now = harness_mono_ms();
			if (now >= deadline ||
			    fill(c, (int)(deadline - now)) != 0) {
				return -1;
			}
			continue;
		}
		struct fsnp_message msg;
		bool ready = false;
		frames++;
		if (f.h.body_len > maxb) {
			maxb = f.h.body_len;
		}
		if (fsnp_chunk_feed(&c->chunks, &f, 0, &msg, &ready) != 0) {
			return -1;
		}
		if (ready) {
			if (fsnp_compress_inflate_message(&msg, 128u << 20) !=
			    0) {
				return -1;
			}
			m->h = msg.h;
			m->flags = f.h.flags | msg.h.flags;
			m->len = msg.len;
			m->body = malloc(msg.len ? msg.len : 1);
			if (m->body == NULL) {
				return -1;
			}
			memcpy(m->body, msg.body, msg.len);
			fsnp_message_free(&msg);
		}
		memmove(c->buf, c->buf + flen, c->len - flen);
		c->len -= flen;
		if (!ready) {
			continue;
		}
		m->frames = frames;
		m->max_frame_body = maxb;
		if (m->len >= 2) {
			m->status = wire_load_u16(m->body);
		}
		if (!(m->h.flags & FSNP_FLAG_CUSTOM) &&
		    fsnp_value_decode_response(m->body, m->len, NULL,
		                               &m->status, &m->value) == 0) {
			m->has_value = true;
		}
		return 0;
	}
}

void ftc_msg_free(struct ftc_msg *m)
{
	free(m->body);
	m->body = NULL;
}

bool ftc_wait_closed(struct ftc *c, int timeout_ms)
{
	uint64_t deadline = harness_mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		struct pollfd p = {c->fd, POLLIN, 0};
		uint64_t now = harness_mono_ms();
		uint8_t tmp[65536];
		if (now >= deadline) {
			return false;
		}
		if ((c->ssl == NULL || SSL_pending(c->ssl) == 0) &&
		    poll(&p, 1, (int)(deadline - now)) <= 0) {
			return false;
		}
		ssize_t r;
		if (c->ssl != NULL) {
			size_t got = 0;
			r = SSL_read_ex(c->ssl, tmp, sizeof tmp, &got) == 1
			        ? (ssize_t)got
			        : -1;
			ERR_clear_error();
		} else {
			r = recv(c->fd, tmp, sizeof tmp, 0);
		}
		if (r <= 0) {
			return true;
		}
	}
}

int ftc_call(struct ftc *c, uint32_t lane, uint16_t opcode, uint8_t flags,
             const struct wbuf *body, struct ftc_msg *m)
{
	uint64_t rid = ftc_send(c, lane, opcode, flags, body);
	if (rid == 0) {
		return -1;
	}
	for (;;) {
		if (ftc_recv(c, m, 10000) != 0) {
			return -1;
		}
		if (m->h.request_id == rid) {
			return 0;
		}
		ftc_msg_free(m);
	}
}

void ftc_body(struct wbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(b, fmt, ap);
	va_end(ap);
}

void ftc_vbody(struct wbuf *b, const char *fmt, va_list ap)
{
	struct fsnp_writer w;
	char key[64];
	wbuf_init(b);
	fsnp_w_init(&w, b);
	fsnp_w_map_begin(&w);
	while (*fmt != '\0') {
		const char *eq = strchr(fmt, '=');
		size_t n;
		if (eq == NULL) {
			break;
		}
		n = (size_t)(eq - fmt) < sizeof key - 1 ? (size_t)(eq - fmt)
		                                        : sizeof key - 1;
		memcpy(key, fmt, n);
		key[n] = '\0';
		fsnp_w_key(&w, key);
		switch (eq[1]) {
		case 's':
			fsnp_w_str(&w, va_arg(ap, const char *));
			break;
		case 'b':
			fsnp_w_bool(&w, va_arg(ap, int) != 0);
			break;
		case 'i':
			fsnp_w_i64(&w, va_arg(ap, int64_t));
			break;
		case 'n':
			fsnp_w_nil(&w);
			break;
		case 'a': {
			const char **v = va_arg(ap, const char **);
			int cnt = va_arg(ap, int);
			fsnp_w_array_begin(&w);
			for (int i = 0; i < cnt; i++) {
				fsnp_w_str(&w, v[i]);
			}
			fsnp_w_array_end(&w);
			break;
		}
		case 'm': {
			const uint8_t *p = va_arg(ap, const uint8_t *);
			size_t len = va_arg(ap, size_t);
			struct fsnp_val v;
			if (fsnp_value_decode(p, len, NULL, &v, NULL) == 0) {
				fsnp_w_val(&w, &v);
			} else {
				fsnp_w_nil(&w);
			}
			break;
		}
		default:
			fsnp_w_nil(&w);
			break;
		}
		fmt = eq + 2;
		while (*fmt == ' ') {
			fmt++;
		}
	}
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
}

bool ftc_str_eq(const struct fsnp_val *v, const char *s)
{
	return v->tag == FSNP_BIN && fsnp_bytes_eq(v->as.bin, s);
}

bool ftc_map_str(const struct fsnp_val *m, const char *key, const char *s)
{
	struct fsnp_val v;
	return fsnp_map_get(m, key, &v) == 0 && ftc_str_eq(&v, s);
}

int64_t ftc_map_int(const struct fsnp_val *m, const char *key)
{
	int64_t x = -1;
	if (fsnp_map_i64(m, key, &x) != 0) {
		return -1;
	}
	return x;
}

void ftc_error_text(const struct ftc_msg *m, char *out, size_t cap)
{
	struct fsnp_bytes b = {NULL, 0};
	out[0] = '\0';
	if (!m->has_value) {
		return;
	}
	if (m->value.tag == FSNP_BIN) {
		b = m->value.as.bin;
	} else if (fsnp_map_bin(&m->value, "message", &b) != 0) {
		return;
	}
	snprintf(out, cap, "%.*s", (int)b.len, (const char *)b.ptr);
}

int ftc_wait_ready(uint16_t port, int timeout_ms)
{
	uint64_t deadline = harness_mono_ms() + (uint64_t)timeout_ms;
	struct ftc c;
	if (ftc_connect(&c, port) != 0) {
		return -1;
	}
	/* A DEL of keys on every shard answers once each has a leader (the
	 * server itself waits up to 5 s per request for one). */
	for (;;) {
		const char *keys[64];
		char names[64][16];
		struct wbuf b;
		struct ftc_msg m;
		int rv;
		for (int i = 0; i < 64; i++) {
			snprintf(names[i], sizeof names[i], "ready:%d", i);
			keys[i] = names[i];
		}
		ftc_body(&b, "keys=a", keys, 64);
		rv = ftc_call(&c, 1, FSNP_OP_DEL, 0, &b, &m);
		wbuf_free(&b);
		if (rv == 0 && m.status == FSNP_STATUS_OK) {
			ftc_msg_free(&m);
			ftc_close(&c);
			return 0;
		}
		if (rv == 0) {
			ftc_msg_free(&m);
		}
		if (harness_mono_ms() > deadline) {
			ftc_close(&c);
			return -1;
		}
		usleep(50000);
	}
}

unsigned ftc_env_nodes(void)
{
	const char *n = getenv("LS_FSNP_NODES");
	return n ? (unsigned)atoi(n) : 1;
}

int ftc_start(struct harness_cluster *c, unsigned n, const char *const extra[],
              uint16_t *port)
{
	if (harness_cluster_start(c, n, extra, true) != 0) {
		return -1;
	}
	*port = c->nodes[0].fsnp;
	return ftc_wait_ready(*port, 20000);
}

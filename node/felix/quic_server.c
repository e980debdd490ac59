/* Felix QUIC listener; see quic_server.h. The connection engine is
 * net/quic.c: this module adds the server's TLS sessions and everything
 * answered without a connection. */
#include "node/felix/quic_server.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "net/quic_engine.h"

/* TLS 1.3 only, the AEADs QUIC allows, no middlebox compatibility mode. */
#define TLS_PRIORITY                                                           \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:" \
	"+CHACHA20-POLY1305:%DISABLE_TLS13_COMPAT_MODE"
#define RETRY_TOKEN_TTL (10 * NGTCP2_SECONDS)
/* Stateless resets answer unknown connection IDs; cap them so the server
 * cannot be used to reflect traffic. */
#define RESETS_PER_SECOND 100
/* The smallest datagram answered with a (smaller) stateless reset. */
#define RESET_MIN_TRIGGER 43
#define TLS_EXT_ALPN 16

static void server_log(void *arg, enum quic_log_level level, const char *msg)
{
	struct quic_server *s = arg;
	static const enum log_level map[] = {LOG_DEBUG, LOG_INFO, LOG_WARN,
	                                     LOG_ERROR};
	if (s->log != NULL) {
		log_emit(s->log, map[level], "quic", "%s", msg);
	}
}

void quic_server_config_init(struct quic_server_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->host = "127.0.0.1";
	cfg->port = 5000;
	cfg->alpn = "felix/1";
	cfg->max_connections = 10000;
	quic_limits_server_default(&cfg->limits);
}

/* ---- TLS ---- */

static int find_alpn_ext(void *ctx, unsigned tls_id, const unsigned char *data,
                         unsigned size)
{
	if (tls_id == TLS_EXT_ALPN) {
		*(bool *)ctx = true;
	}
	return 0;
}

/* After the ClientHello is processed: no protocol selected is fine when the
 * client offered none (Felix 0.5.0), and refused when it offered others. */
static int client_hello_hook(gnutls_session_t tls, unsigned htype,
                             unsigned when, unsigned incoming,
                             const gnutls_datum_t *msg)
{
	gnutls_datum_t sel;
	bool offered = false;
	if (htype != GNUTLS_HANDSHAKE_CLIENT_HELLO ||
	    when != GNUTLS_HOOK_POST || !incoming) {
		return 0;
	}
	if (gnutls_alpn_get_selected_protocol(tls, &sel) == 0) {
		return 0;
	}
	if (gnutls_ext_raw_parse(&offered, find_alpn_ext, msg,
	                         GNUTLS_EXT_RAW_FLAG_TLS_CLIENT_HELLO) < 0) {
		return GNUTLS_E_UNEXPECTED_PACKET;
	}
	return offered ? GNUTLS_E_NO_APPLICATION_PROTOCOL : 0;
}

static gnutls_session_t server_tls(struct quic_server *s)
{
	gnutls_session_t tls;
	gnutls_datum_t alpn = {(unsigned char *)s->alpn,
	                       (unsigned)strlen(s->alpn)};
	if (gnutls_init(&tls, GNUTLS_SERVER | GNUTLS_NO_END_OF_EARLY_DATA) !=
	    0) {
		return NULL;
	}
	if (gnutls_priority_set(tls, s->prio) != 0 ||
	    ngtcp2_crypto_gnutls_configure_server_session(tls) != 0 ||
	    gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, s->cred) != 0 ||
	    gnutls_alpn_set_protocols(tls, &alpn, 1,
	                              GNUTLS_ALPN_SERVER_PRECEDENCE) != 0) {
		gnutls_deinit(tls);
		return NULL;
	}
	gnutls_handshake_set_hook_function(tls, GNUTLS_HANDSHAKE_CLIENT_HELLO,
	                                   GNUTLS_HOOK_POST, client_hello_hook);
	return tls;
}

/* ---- answers without a connection ---- */

static void send_version_negotiation(struct quic_server *s,
                                     const ngtcp2_version_cid *vc,
                                     const struct sockaddr *from,
                                     socklen_t fromlen)
{
	uint8_t buf[600];
	uint32_t sv[2];
	uint8_t r;
	ngtcp2_ssize n;
	gnutls_rnd(GNUTLS_RND_NONCE, &sv[0], sizeof sv[0]);
	gnutls_rnd(GNUTLS_RND_NONCE, &r, 1);
	/* A reserved version first, so clients keep handling unknown ones
	 * (RFC 9000 section 15). */
	sv[0] = (sv[0] & 0xf0f0f0f0u) | 0x0a0a0a0au;
	sv[1] = NGTCP2_PROTO_VER_V1;
	n = ngtcp2_pkt_write_version_negotiation(buf, sizeof buf, r, vc->scid,
	                                         vc->scidlen, vc->dcid,
	                                         vc->dcidlen, sv, 2);
	if (n > 0) {
		quic_endpoint_send_raw(s->ep, from, fromlen, buf, (size_t)n);
		s->stats.version_negotiations++;
	}
}

static void send_retry(struct quic_server *s, const ngtcp2_pkt_hd *hd,
                       const struct sockaddr *from, socklen_t fromlen)
{
	uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	ngtcp2_cid scid;
	ngtcp2_ssize tl, n;
	scid.datalen = QUIC_SCID_LEN;
	gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
	tl = ngtcp2_crypto_generate_retry_token(
	    token, quic_endpoint_secret(s->ep), QUIC_SECRET_LEN, hd->version,
	    from, fromlen, &scid, &hd->dcid, uv_hrtime());
	if (tl < 0) {
		return;
	}
	n = ngtcp2_crypto_write_retry(buf, sizeof buf, hd->version, &hd->scid,
	                              &scid, &hd->dcid, token, (size_t)tl);
	if (n > 0) {
		quic_endpoint_send_raw(s->ep, from, fromlen, buf, (size_t)n);
		s->stats.retries_sent++;
	}
}

static void send_stateless_close(struct quic_server *s, const ngtcp2_pkt_hd *hd,
                                 const struct sockaddr *from, socklen_t fromlen,
                                 uint64_t code, const char *reason)
{
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(
	    buf, sizeof buf, hd->version, &hd->scid, &hd->dcid, code,
	    (const uint8_t *)reason, strlen(reason));
	if (n > 0) {
		quic_endpoint_send_raw(s->ep, from, fromlen, buf, (size_t)n);
	}
}

/* A short-header packet for a connection we do not know: tell the peer it
 * is gone, with a reset smaller than what it sent (no loops, no
 * amplification) and at most RESETS_PER_SECOND per second. */
static void send_stateless_reset(struct quic_server *s, size_t len,
                                 const ngtcp2_version_cid *vc,
                                 const struct sockaddr *from, socklen_t fromlen)
{
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	uint8_t rnd[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
	uint64_t sec = uv_hrtime() / 1000000000u;
	ngtcp2_cid cid;
	size_t randlen;
	ngtcp2_ssize n;

	if (len < RESET_MIN_TRIGGER) {
		return;
	}
	if (sec != s->resets_epoch) {
		s->resets_epoch = sec;
		s->resets_budget = RESETS_PER_SECOND;
	}
	if (s->resets_budget == 0) {
		return;
	}
	s->resets_budget--;
	ngtcp2_cid_init(&cid, vc->dcid, vc->dcidlen);
	if (ngtcp2_crypto_generate_stateless_reset_token(
	        token, quic_endpoint_secret(s->ep), QUIC_SECRET_LEN, &cid) !=
	    0) {
		return;
	}
	randlen = len - 1 - NGTCP2_STATELESS_RESET_TOKENLEN - 1;
	if (randlen > sizeof rnd - NGTCP2_STATELESS_RESET_TOKENLEN - 1) {
		randlen = sizeof rnd - NGTCP2_STATELESS_RESET_TOKENLEN - 1;
	}
	gnutls_rnd(GNUTLS_RND_NONCE, rnd, randlen);
	n = ngtcp2_pkt_write_stateless_reset(buf, sizeof buf, token, rnd,
	                                     randlen);
	if (n > 0) {
		quic_endpoint_send_raw(s->ep, from, fromlen, buf, (size_t)n);
		s->stats.stateless_resets++;
	}
}

/* A datagram for no known connection: maybe a new one. */
static void server_on_unknown(struct quic_endpoint *ep, void *arg,
                              const uint8_t *pkt, size_t len,
                              const ngtcp2_version_cid *vc, int vc_rv,
                              const struct sockaddr *from, socklen_t fromlen)
{
	struct quic_server *s = arg;
	ngtcp2_pkt_hd hd;
	ngtcp2_cid ocid;
	ngtcp2_cid *pocid = NULL;
	gnutls_session_t tls;
	int rv;

	if (vc_rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
		send_version_negotiation(s, vc, from, fromlen);
		return;
	}
	if (!(pkt[0] & 0x80)) {
		send_stateless_reset(s, len, vc, from, fromlen);
		return;
	}
	if (vc->version == 0) {
		return; /* a Version Negotiation packet: not for a server */
	}
	if (ngtcp2_accept(&hd, pkt, len) != 0) {
		return; /* not an acceptable first Initial (or 0-RTT) */
	}
	if (hd.version != NGTCP2_PROTO_VER_V1) {
		send_version_negotiation(s, vc, from, fromlen);
		return;
	}
	if (quic_endpoint_conn_count(ep) >= s->max_connections) {
		uint64_t sec = uv_hrtime() / 1000000000u;
		s->stats.conns_refused++;
		send_stateless_close(s, &hd, from, fromlen,
		                     NGTCP2_CONNECTION_REFUSED,
		                     "too many connections");
		if (sec != s->refusal_logged) {
			/* At most one line a second under a flood. */
			s->refusal_logged = sec;
			quic_endpoint_log(
			    ep, QUIC_LOG_WARN,
			    "connection refused: %zu connections "
			    "(max_connections); %llu refused so "
			    "far",
			    s->max_connections,
			    (unsigned long long)s->stats.conns_refused);
		}
		return;
	}
	if (hd.token.len > 0 &&
	    hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
		if (ngtcp2_crypto_verify_retry_token(
		        &ocid, hd.token.base, hd.token.len,
		        quic_endpoint_secret(ep), QUIC_SECRET_LEN, hd.version,
		        from, fromlen, &hd.dcid, RETRY_TOKEN_TTL,
		        uv_hrtime()) != 0) {
			send_stateless_close(s, &hd, from, fromlen,
			                     NGTCP2_INVALID_TOKEN,
			                     "invalid retry token");
			return;
		}
		pocid = &ocid;
	} else {
		/* We issue no NEW_TOKEN, so any other token is stale. */
		hd.token.base = NULL;
		hd.token.len = 0;
		if (s->retry) {
			send_retry(s, &hd, from, fromlen);
			return;
		}
	}
	tls = server_tls(s);
	if (tls == NULL) {
		quic_endpoint_log(ep, QUIC_LOG_WARN,
		                  "cannot set up a TLS session");
		return;
	}
	rv = quic_conn_accept(ep, &hd, pocid, from, fromlen, tls, pkt, len);
	if (rv == 1 && pocid == NULL) {
		send_retry(s, &hd, from, fromlen);
	} else if (rv == 0) {
		s->stats.conns_accepted++;
	}
}

/* ---- lifecycle ---- */

int quic_server_start(struct quic_server *s, uv_loop_t *loop,
                      const struct quic_server_config *cfg,
                      const struct log *log, char *err, size_t errlen)
{
	struct quic_endpoint_config ecfg;
	struct sockaddr_storage addr;
	void *data = s->data;
	const char *host = cfg->host ? cfg->host : "127.0.0.1";
	const char *alpn = cfg->alpn ? cfg->alpn : "felix/1";
	int rv;

	memset(s, 0, sizeof *s);
	s->data = data;
	s->log = log;
	s->retry = cfg->retry;
	s->max_connections = cfg->max_connections;
	if (strlen(alpn) == 0 || strlen(alpn) >= sizeof s->alpn) {
		snprintf(err, errlen, "invalid ALPN protocol \"%s\"", alpn);
		return -1;
	}
	strcpy(s->alpn, alpn);
	if (cfg->cert_file == NULL || cfg->key_file == NULL) {
		snprintf(err, errlen, "QUIC needs a TLS certificate and key");
		return -1;
	}
	if (uv_ip4_addr(host, cfg->port, (struct sockaddr_in *)&addr) != 0 &&
	    uv_ip6_addr(host, cfg->port, (struct sockaddr_in6 *)&addr) != 0) {
		snprintf(err, errlen,
		         "invalid QUIC bind address \"%s\" (numeric IPv4 "
		         "or IPv6 expected)",
		         host);
		return -1;
	}
	rv = gnutls_certificate_allocate_credentials(&s->cred);
	if (rv != 0) {
		snprintf(err, errlen, "TLS credentials: %s",
		         gnutls_strerror(rv));
		return -1;
	}
	rv = gnutls_certificate_set_x509_key_file(
	    s->cred, cfg->cert_file, cfg->key_file, GNUTLS_X509_FMT_PEM);
	if (rv < 0) {
		snprintf(err, errlen,
		         "cannot load TLS certificate %s with key %s: %s",
		         cfg->cert_file, cfg->key_file, gnutls_strerror(rv));
		goto err_cred;
	}
	rv = gnutls_priority_init(&s->prio, TLS_PRIORITY, NULL);
	if (rv != 0) {
		snprintf(err, errlen, "TLS priorities: %s",
		         gnutls_strerror(rv));
		goto err_cred;
	}
	memset(&ecfg, 0, sizeof ecfg);
	ecfg.server = true;
	ecfg.limits = cfg->limits;
	ecfg.callbacks = cfg->callbacks;
	ecfg.owner = cfg->owner;
	ecfg.log = server_log;
	ecfg.log_arg = s;
	ecfg.on_unknown = server_on_unknown;
	ecfg.unknown_arg = s;
	ecfg.secret = cfg->secret;
	if (quic_endpoint_open(loop, &ecfg, (struct sockaddr *)&addr, &s->ep,
	                       err, errlen) != 0) {
		goto err_prio;
	}
	return 0;

err_prio:
	gnutls_priority_deinit(s->prio);
err_cred:
	gnutls_certificate_free_credentials(s->cred);
	return -1;
}

uint16_t quic_server_port(const struct quic_server *s)
{
	const struct sockaddr *sa = quic_endpoint_local_addr(s->ep);
	if (sa->sa_family == AF_INET6) {
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	}
	return ntohs(((const struct sockaddr_in *)sa)->sin_port);
}

size_t quic_server_conn_count(const struct quic_server *s)
{
	return quic_endpoint_conn_count(s->ep);
}

void quic_server_get_stats(const struct quic_server *s,
                           struct quic_server_stats *out)
{
	struct quic_endpoint_stats es;
	*out = s->stats;
	if (s->ep == NULL) {
		return;
	}
	quic_endpoint_get_stats(s->ep, &es);
	out->handshakes_done = es.handshakes_done;
	out->handshakes_failed = es.handshakes_failed;
	out->datagrams_in = es.datagrams_in;
	out->datagrams_out = es.datagrams_out;
	out->send_blocked = es.send_blocked;
}

static void on_endpoint_closed(void *arg)
{
	struct quic_server *s = arg;
	s->ep = NULL;
	gnutls_priority_deinit(s->prio);
	gnutls_certificate_free_credentials(s->cred);
	if (s->close_cb != NULL) {
		s->close_cb(s);
	}
}

void quic_server_close(struct quic_server *s, uint64_t app_error,
                       const char *reason, quic_server_close_cb cb)
{
	if (s->closing) {
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	quic_endpoint_close(s->ep, app_error, reason, on_endpoint_closed, s);
}

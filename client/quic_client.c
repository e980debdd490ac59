/* QUIC client; see quic_client.h. The connection engine is quic.c: this
 * module adds client TLS sessions (trust, SNI, name check, ALPN). */
#include "client/quic_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "net/quic_engine.h"

#define TLS_PRIORITY                                                           \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:" \
	"+CHACHA20-POLY1305:%DISABLE_TLS13_COMPAT_MODE"

static const char *const default_alpn[] = {"felix/1"};

void quic_client_config_init(struct quic_client_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->bind_host = "0.0.0.0";
	cfg->alpn = default_alpn;
	cfg->alpn_count = 1;
	quic_limits_client_default(&cfg->limits);
}

static bool is_ip_literal(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, s, buf) == 1 ||
	       inet_pton(AF_INET6, s, buf) == 1;
}

int quic_client_init(struct quic_client *cl, uv_loop_t *loop,
                     const struct quic_client_config *cfg, char *err,
                     size_t errlen)
{
	struct quic_endpoint_config ecfg;
	struct sockaddr_storage addr;
	void *data = cl->data;
	const char *bind_host = cfg->bind_host ? cfg->bind_host : "0.0.0.0";
	int rv;

	memset(cl, 0, sizeof *cl);
	cl->data = data;
	if (cfg->alpn_count > QUIC_CLIENT_MAX_ALPN) {
		snprintf(err, errlen, "at most %d ALPN protocols",
		         QUIC_CLIENT_MAX_ALPN);
		return -1;
	}
	for (size_t i = 0; i < cfg->alpn_count; i++) {
		size_t n = strlen(cfg->alpn[i]);
		if (n == 0 || n >= sizeof cl->alpn_buf[i]) {
			snprintf(err, errlen, "invalid ALPN protocol \"%s\"",
			         cfg->alpn[i]);
			return -1;
		}
		memcpy(cl->alpn_buf[i], cfg->alpn[i], n);
		cl->alpn[i].data = (unsigned char *)cl->alpn_buf[i];
		cl->alpn[i].size = (unsigned)n;
	}
	cl->alpn_count = cfg->alpn_count;
	if (cfg->server_name != NULL) {
		if (strlen(cfg->server_name) >= sizeof cl->server_name) {
			snprintf(err, errlen, "server name too long");
			return -1;
		}
		strcpy(cl->server_name, cfg->server_name);
	}
	if (uv_ip4_addr(bind_host, 0, (struct sockaddr_in *)&addr) != 0 &&
	    uv_ip6_addr(bind_host, 0, (struct sockaddr_in6 *)&addr) != 0) {
		snprintf(err, errlen, "invalid bind address \"%s\"", bind_host);
		return -1;
	}
	cl->family = addr.ss_family;
	rv = gnutls_certificate_allocate_credentials(&cl->cred);
	if (rv != 0) {
		snprintf(err, errlen, "TLS credentials: %s",
		         gnutls_strerror(rv));
		return -1;
	}
	if (cfg->ca_file != NULL) {
		rv = gnutls_certificate_set_x509_trust_file(
		    cl->cred, cfg->ca_file, GNUTLS_X509_FMT_PEM);
		if (rv <= 0) {
			snprintf(err, errlen, "cannot load CA file %s: %s",
			         cfg->ca_file,
			         rv == 0 ? "no certificate in it"
			                 : gnutls_strerror(rv));
			goto err_cred;
		}
	} else {
		rv = gnutls_certificate_set_x509_system_trust(cl->cred);
		if (rv < 0) {
			snprintf(err, errlen, "cannot load system trust: %s",
			         gnutls_strerror(rv));
			goto err_cred;
		}
	}
	rv = gnutls_priority_init(&cl->prio, TLS_PRIORITY, NULL);
	if (rv != 0) {
		snprintf(err, errlen, "TLS priorities: %s",
		         gnutls_strerror(rv));
		goto err_cred;
	}
	memset(&ecfg, 0, sizeof ecfg);
	ecfg.server = false;
	ecfg.limits = cfg->limits;
	ecfg.callbacks = cfg->callbacks;
	ecfg.owner = cfg->owner;
	if (quic_endpoint_open(loop, &ecfg, (struct sockaddr *)&addr, &cl->ep,
	                       err, errlen) != 0) {
		goto err_prio;
	}
	return 0;

err_prio:
	gnutls_priority_deinit(cl->prio);
err_cred:
	gnutls_certificate_free_credentials(cl->cred);
	return -1;
}

static gnutls_session_t client_tls(struct quic_client *cl, const char *name,
                                   char *err, size_t errlen)
{
	gnutls_session_t tls;
	int rv = gnutls_init(&tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA);
	if (rv != 0) {
		snprintf(err, errlen, "TLS session: %s", gnutls_strerror(rv));
		return NULL;
	}
	if (gnutls_priority_set(tls, cl->prio) != 0 ||
	    ngtcp2_crypto_gnutls_configure_client_session(tls) != 0 ||
	    gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, cl->cred) !=
	        0) {
		snprintf(err, errlen, "TLS session setup failed");
		goto err;
	}
	if (cl->alpn_count > 0 &&
	    gnutls_alpn_set_protocols(tls, cl->alpn, (unsigned)cl->alpn_count,
	                              0) != 0) {
		snprintf(err, errlen, "TLS ALPN setup failed");
		goto err;
	}
	/* SNI carries DNS names only; an IP literal is checked against the
	 * certificate's IP SANs instead. */
	if (!is_ip_literal(name) &&
	    gnutls_server_name_set(tls, GNUTLS_NAME_DNS, name, strlen(name)) !=
	        0) {
		snprintf(err, errlen, "invalid server name \"%s\"", name);
		goto err;
	}
	gnutls_session_set_verify_cert(tls, name, 0);
	return tls;
err:
	gnutls_deinit(tls);
	return NULL;
}

int quic_client_connect(struct quic_client *cl, const char *host, uint16_t port,
                        struct quic_conn **out, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL;
	char portstr[8];
	const char *name = cl->server_name[0] ? cl->server_name : host;
	gnutls_session_t tls;
	int rv;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = cl->family;
	hints.ai_socktype = SOCK_DGRAM;
	snprintf(portstr, sizeof portstr, "%u", (unsigned)port);
	rv = getaddrinfo(host, portstr, &hints, &res);
	if (rv != 0 || res == NULL) {
		snprintf(err, errlen, "cannot resolve %s: %s", host,
		         rv != 0 ? gai_strerror(rv) : "no address");
		return -1;
	}
	tls = client_tls(cl, name, err, errlen);
	if (tls == NULL) {
		freeaddrinfo(res);
		return -1;
	}
	rv = quic_conn_connect(cl->ep, res->ai_addr, res->ai_addrlen, tls, out);
	freeaddrinfo(res);
	if (rv != 0) {
		snprintf(err, errlen, "cannot start a connection to %s: %s",
		         host, quic_strerror(rv));
		return -1;
	}
	return 0;
}

uint16_t quic_client_port(const struct quic_client *cl)
{
	const struct sockaddr *sa = quic_endpoint_local_addr(cl->ep);
	if (sa->sa_family == AF_INET6) {
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	}
	return ntohs(((const struct sockaddr_in *)sa)->sin_port);
}

static void on_endpoint_closed(void *arg)
{
	struct quic_client *cl = arg;
	cl->ep = NULL;
	gnutls_priority_deinit(cl->prio);
	gnutls_certificate_free_credentials(cl->cred);
	if (cl->close_cb != NULL) {
		cl->close_cb(cl);
	}
}

void quic_client_close(struct quic_client *cl, quic_client_close_cb cb)
{
	if (cl->closing) {
		return;
	}
	cl->closing = true;
	cl->close_cb = cb;
	quic_endpoint_close(cl->ep, 0, "", on_endpoint_closed, cl);
}

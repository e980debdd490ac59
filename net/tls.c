/* TLS sessions on OpenSSL memory BIOs, server and client side; see
 * tls.h. */
#include "net/tls.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

struct tls_ctx {
	SSL_CTX *ctx;
	bool verify_clients;
	uint8_t rbuf[TLS_READ_BUF];
};

struct tls_session {
	SSL *ssl;  /* owns both BIOs */
	BIO *rbio; /* ciphertext from the peer */
	BIO *wbio; /* ciphertext to the peer */
	bool client;
	bool established;
	bool shutdown;
};

/* The oldest queued OpenSSL error as text (the queue is cleared). */
static void ssl_reason(const char *what, char *err, size_t errlen)
{
	unsigned long e = ERR_get_error();
	char buf[256];
	if (e == 0) {
		snprintf(err, errlen, "%s", what);
	} else {
		ERR_error_string_n(e, buf, sizeof buf);
		snprintf(err, errlen, "%s: %s", what, buf);
	}
	ERR_clear_error();
}

/* A context for `method` with what both sides share; NULL with the
 * reason in `err`. */
static struct tls_ctx *ctx_alloc(const SSL_METHOD *method, char *err,
                                 size_t errlen)
{
	struct tls_ctx *x = calloc(1, sizeof *x);
	if (x == NULL) {
		snprintf(err, errlen, "TLS: out of memory");
		return NULL;
	}
	ERR_clear_error();
	x->ctx = SSL_CTX_new(method);
	if (x->ctx == NULL) {
		ssl_reason("TLS: cannot create a context", err, errlen);
		free(x);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(x->ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(x->ctx, SSL_MODE_RELEASE_BUFFERS);
	return x;
}

/* Loads a PEM certificate chain and its key (`key_file` NULL: the same
 * file). 0, or -1 with the reason in `err`. */
static int use_cert_key(SSL_CTX *ctx, const char *cert_file,
                        const char *key_file, char *err, size_t errlen)
{
	char what[1200];

	if (key_file == NULL) {
		key_file = cert_file;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
		snprintf(what, sizeof what,
		         "TLS: cannot load the certificate '%s'", cert_file);
		ssl_reason(what, err, errlen);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		snprintf(what, sizeof what, "TLS: cannot load the key '%s'",
		         key_file);
		ssl_reason(what, err, errlen);
		return -1;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_reason("TLS: the key does not match the certificate", err,
		           errlen);
		return -1;
	}
	return 0;
}

/* Trusts the CAs in `ca_file`. 0, or -1 with the reason in `err`. */
static int load_ca(SSL_CTX *ctx, const char *ca_file, char *err, size_t errlen)
{
	if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
		char what[1200];
		snprintf(what, sizeof what, "TLS: cannot load the CA file '%s'",
		         ca_file);
		ssl_reason(what, err, errlen);
		return -1;
	}
	return 0;
}

int tls_ctx_new(struct tls_ctx **out, const char *cert_file,
                const char *key_file, const char *ca_file, char *err,
                size_t errlen)
{
	static const unsigned char sid_ctx[] = "lodestone-fsnp";
	struct tls_ctx *x = ctx_alloc(TLS_server_method(), err, errlen);

	if (x == NULL) {
		return -1;
	}
	/* No renegotiation: a client could otherwise make the server redo
	 * handshakes on an established connection. */
	SSL_CTX_set_options(x->ctx, SSL_OP_NO_RENEGOTIATION |
	                                SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_id_context(x->ctx, sid_ctx, sizeof sid_ctx - 1);
	if (use_cert_key(x->ctx, cert_file, key_file, err, errlen) != 0) {
		goto err_ctx;
	}
	if (ca_file != NULL && ca_file[0] != '\0') {
		if (load_ca(x->ctx, ca_file, err, errlen) != 0) {
			goto err_ctx;
		}
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);
		if (names != NULL) {
			SSL_CTX_set_client_CA_list(x->ctx, names);
		}
		SSL_CTX_set_verify(
		    x->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
		    NULL);
		x->verify_clients = true;
	}
	*out = x;
	return 0;

err_ctx:
	SSL_CTX_free(x->ctx);
	free(x);
	return -1;
}

void tls_ctx_free(struct tls_ctx *x)
{
	if (x == NULL) {
		return;
	}
	SSL_CTX_free(x->ctx);
	free(x);
}

void tls_ctx_replace(struct tls_ctx *into, struct tls_ctx *from)
{
	SSL_CTX *old = into->ctx;

	into->ctx = from->ctx;
	into->verify_clients = from->verify_clients;
	from->ctx = old; /* freed below; live sessions hold their own ref */
	tls_ctx_free(from);
}

void tls_ctx_require_tls13(struct tls_ctx *x)
{
	SSL_CTX_set_min_proto_version(x->ctx, TLS1_3_VERSION);
}

bool tls_ctx_verifies_clients(const struct tls_ctx *x)
{
	return x->verify_clients;
}

uint8_t *tls_ctx_read_buf(struct tls_ctx *x)
{
	return x->rbuf;
}

int tls_ctx_new_client(struct tls_ctx **out, const char *ca_file,
                       const char *cert_file, const char *key_file, char *err,
                       size_t errlen)
{
	struct tls_ctx *x = ctx_alloc(TLS_client_method(), err, errlen);

	if (x == NULL) {
		return -1;
	}
	SSL_CTX_set_verify(x->ctx, SSL_VERIFY_PEER, NULL);
	if (ca_file != NULL && ca_file[0] != '\0') {
		if (load_ca(x->ctx, ca_file, err, errlen) != 0) {
			goto err_ctx;
		}
	} else if (SSL_CTX_set_default_verify_paths(x->ctx) != 1) {
		ssl_reason("TLS: cannot load the system's CA certificates", err,
		           errlen);
		goto err_ctx;
	}
	if (cert_file != NULL && cert_file[0] != '\0' &&
	    use_cert_key(x->ctx, cert_file, key_file, err, errlen) != 0) {
		goto err_ctx;
	}
	*out = x;
	return 0;

err_ctx:
	SSL_CTX_free(x->ctx);
	free(x);
	return -1;
}

static struct tls_session *session_new(struct tls_ctx *x)
{
	struct tls_session *t = calloc(1, sizeof *t);
	if (t == NULL) {
		return NULL;
	}
	t->ssl = SSL_new(x->ctx);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	/* An empty memory BIO reads as "retry", not EOF. */
	BIO_set_mem_eof_return(t->rbio, -1);
	SSL_set_bio(t->ssl, t->rbio, t->wbio); /* ssl owns both now */
	return t;
}

struct tls_session *tls_session_new(struct tls_ctx *x)
{
	struct tls_session *t = session_new(x);
	if (t != NULL) {
		SSL_set_accept_state(t->ssl);
	}
	return t;
}

struct tls_session *tls_session_new_client(struct tls_ctx *x, const char *host)
{
	struct tls_session *t = session_new(x);
	unsigned char ip[16];
	bool is_ip;
	int ok;

	if (t == NULL) {
		return NULL;
	}
	t->client = true;
	if (host == NULL) {
		SSL_set_connect_state(t->ssl);
		return t;
	}
	is_ip = inet_pton(AF_INET, host, ip) == 1 ||
	        inet_pton(AF_INET6, host, ip) == 1;
	/* The certificate must name the host we dialled (a SAN, DNS or IP);
	 * SNI only for names. */
	if (is_ip) {
		ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl),
		                                   host) == 1;
	} else {
		ok = SSL_set_tlsext_host_name(t->ssl, host) == 1 &&
		     SSL_set1_host(t->ssl, host) == 1;
	}
	if (!ok) {
		ERR_clear_error();
		tls_session_free(t);
		return NULL;
	}
	SSL_set_connect_state(t->ssl);
	return t;
}

void tls_session_free(struct tls_session *t)
{
	if (t == NULL) {
		return;
	}
	SSL_free(t->ssl);
	free(t);
}

/* Classifies a failed SSL call: 0 when it only needs more input. */
static int ssl_failed(struct tls_session *t, int rv, const char *what,
                      char *err, size_t errlen)
{
	int e = SSL_get_error(t->ssl, rv);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		ERR_clear_error();
		return 0;
	}
	if (e == SSL_ERROR_SSL && SSL_get_verify_result(t->ssl) != X509_V_OK) {
		snprintf(err, errlen, "%s: %s certificate not verified: %s",
		         what, t->client ? "server" : "client",
		         X509_verify_cert_error_string(
		             SSL_get_verify_result(t->ssl)));
		ERR_clear_error();
		return -1;
	}
	ssl_reason(what, err, errlen);
	return -1;
}

int tls_feed(struct tls_session *t, const uint8_t *p, size_t n, char *err,
             size_t errlen)
{
	while (n > 0) {
		size_t w = 0;
		if (BIO_write_ex(t->rbio, p, n, &w) != 1 || w == 0) {
			snprintf(err, errlen, "TLS: out of memory");
			return -1;
		}
		p += w;
		n -= w;
	}
	if (!t->established) {
		int rv = SSL_do_handshake(t->ssl);
		if (rv == 1) {
			t->established = true;
		} else if (ssl_failed(t, rv, "TLS handshake failed", err,
		                      errlen) != 0) {
			return -1;
		}
	}
	return 0;
}

bool tls_established(const struct tls_session *t)
{
	return t->established;
}

int tls_read(struct tls_session *t, uint8_t *dst, size_t cap, size_t *got,
             char *err, size_t errlen)
{
	*got = 0;
	if (!t->established || cap == 0) {
		return 0;
	}
	int rv = SSL_read_ex(t->ssl, dst, cap, got);
	if (rv == 1) {
		return 0;
	}
	*got = 0;
	if (SSL_get_error(t->ssl, rv) == SSL_ERROR_ZERO_RETURN) {
		ERR_clear_error();
		return 1;
	}
	return ssl_failed(t, rv, "TLS read failed", err, errlen);
}

int tls_write(struct tls_session *t, const uint8_t *p, size_t n)
{
	if (!t->established || t->shutdown) {
		return -1;
	}
	while (n > 0) {
		size_t w = 0;
		/* A memory BIO takes everything: one call encrypts it all. */
		if (SSL_write_ex(t->ssl, p, n, &w) != 1) {
			ERR_clear_error();
			return -1;
		}
		p += w;
		n -= w;
	}
	return 0;
}

void tls_shutdown(struct tls_session *t)
{
	if (t->shutdown || !t->established) {
		return;
	}
	t->shutdown = true;
	if (SSL_shutdown(t->ssl) < 0) {
		ERR_clear_error();
	}
}

size_t tls_pending(const struct tls_session *t)
{
	return BIO_ctrl_pending(t->wbio);
}

int tls_take(struct tls_session *t, uint8_t **out, size_t *len)
{
	size_t n = BIO_ctrl_pending(t->wbio);
	size_t got = 0;
	*out = NULL;
	*len = 0;
	if (n == 0) {
		return 0;
	}
	uint8_t *p = malloc(n);
	if (p == NULL) {
		return -1;
	}
	if (BIO_read_ex(t->wbio, p, n, &got) != 1 || got != n) {
		free(p);
		ERR_clear_error();
		return -1;
	}
	*out = p;
	*len = n;
	return 0;
}

int tls_drain(struct tls_session *t, uint8_t *dst, size_t cap, size_t *got)
{
	*got = 0;
	if (cap == 0 || BIO_ctrl_pending(t->wbio) == 0) {
		return 0;
	}
	if (BIO_read_ex(t->wbio, dst, cap, got) != 1) {
		ERR_clear_error();
		return -1;
	}
	return 0;
}

int tls_peer_cn(const struct tls_session *t, char *out, size_t cap)
{
	X509 *cert = SSL_get1_peer_certificate(t->ssl);
	X509_NAME *name;
	ASN1_STRING *data;
	int i, rv = -1;

	if (cert == NULL) {
		return -1;
	}
	name = X509_get_subject_name(cert);
	i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
	if (i >= 0) {
		data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
		int n = ASN1_STRING_length(data);
		const unsigned char *d = ASN1_STRING_get0_data(data);
		if (n >= 0 && (size_t)n < cap &&
		    memchr(d, 0, (size_t)n) == NULL &&
		    SSL_get_verify_result(t->ssl) == X509_V_OK) {
			memcpy(out, d, (size_t)n);
			out[n] = '\0';
			rv = 0;
		}
	}
	X509_free(cert);
	return rv;
}

const char *tls_version(const struct tls_session *t)
{
	return SSL_get_version(t->ssl);
}

const char *tls_cipher(const struct tls_session *t)
{
	const char *c = SSL_get_cipher_name(t->ssl);
	return c != NULL ? c : "none";
}

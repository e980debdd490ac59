/* Dev certificate generation with OpenSSL; see devcert.h. */
#include "node/devcert.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static int add_ext(X509 *cert, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ext == NULL) {
		return -1;
	}
	int rc = X509_add_ext(cert, ext, -1) == 1 ? 0 : -1;
	X509_EXTENSION_free(ext);
	return rc;
}

static int write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	              key ? 0600 : 0644);
	if (fd < 0) {
		return -1;
	}
	FILE *f = fdopen(fd, "w");
	if (f == NULL) {
		close(fd);
		return -1;
	}
	int ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
	             : PEM_write_X509(f, cert);
	if (fclose(f) != 0) {
		ok = 0;
	}
	return ok == 1 ? 0 : -1;
}

int devcert_ensure(const char *cert_path, const char *key_path, char *err,
                   size_t errlen)
{
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	int rc = -1;

	if (access(cert_path, R_OK) == 0 && access(key_path, R_OK) == 0) {
		return 0;
	}
	key = EVP_EC_gen("P-256");
	if (key == NULL) {
		snprintf(err, errlen, "dev certificate: key generation failed");
		goto err_out;
	}
	cert = X509_new();
	if (cert == NULL || RAND_bytes(serial, sizeof serial) != 1) {
		snprintf(err, errlen, "dev certificate: out of memory");
		goto err_out;
	}
	serial[0] &= 0x7f; /* positive serial */
	bn = BN_bin2bn(serial, sizeof serial, NULL);
	X509_set_version(cert, 2);
	BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
	X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
	X509_gmtime_adj(X509_getm_notAfter(cert), 3650L * 24 * 3600);
	X509_set_pubkey(cert, key);
	X509_NAME *name = X509_get_subject_name(cert);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                           (const unsigned char *)"localhost", -1, -1,
	                           0);
	X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	                           (const unsigned char *)"Lodestone dev", -1,
	                           -1, 0);
	X509_set_issuer_name(cert, name);
	if (add_ext(cert, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
	    add_ext(cert, NID_key_usage,
	            "critical,digitalSignature,keyEncipherment") != 0 ||
	    add_ext(cert, NID_ext_key_usage, "serverAuth,clientAuth") != 0 ||
	    add_ext(cert, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1") !=
	        0 ||
	    add_ext(cert, NID_subject_key_identifier, "hash") != 0) {
		snprintf(err, errlen, "dev certificate: cannot add extensions");
		goto err_out;
	}
	if (X509_sign(cert, key, EVP_sha256()) == 0) {
		snprintf(err, errlen, "dev certificate: signing failed");
		goto err_out;
	}
	if (write_pem(key_path, key, NULL) != 0) {
		snprintf(err, errlen, "dev certificate: cannot write '%s'",
		         key_path);
		goto err_out;
	}
	if (write_pem(cert_path, NULL, cert) != 0) {
		snprintf(err, errlen, "dev certificate: cannot write '%s'",
		         cert_path);
		goto err_out;
	}
	rc = 0;
err_out:
	BN_free(bn);
	X509_free(cert);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return rc;
}

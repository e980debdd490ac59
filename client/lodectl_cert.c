/* `lodectl cert`: the certificates of internal mutual TLS
 * (docs/operations.md "Internal TLS"), offline with OpenSSL.
 *
 *     lodectl cert ca --out-dir D [--days N]
 *         D/ca.key (EC P-256, 0600) and D/ca.crt, a self-signed CA
 *     lodectl cert node ID --ca-dir D --out-dir D2 [--host H ...] [--days N]
 *         D2/node-ID.key and D2/node-ID.crt, CN=node-ID, signed by D's CA,
 *         with a DNS or IP subject alternative name per --host
 *
 * Existing files are never overwritten. Keys are written with mode 0600
 * and never printed. */
#include "client/lodectl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define MAX_HOSTS 32
#define DEFAULT_DAYS 825

static void cert_usage(FILE *f)
{
	fprintf(f, "usage: lodectl cert ca --out-dir DIR [--days N]\n"
	           "       lodectl cert node ID --ca-dir DIR --out-dir DIR "
	           "[--host H ...] [--days N]\n");
}

int lodectl_cert_san(const char *const *hosts, size_t n, char *out, size_t cap)
{
	size_t len = 0;
	unsigned char ip[16];

	if (cap == 0) {
		return -1;
	}
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const char *h = hosts[i];
		bool is_ip = inet_pton(AF_INET, h, ip) == 1 ||
		             inet_pton(AF_INET6, h, ip) == 1;
		int w;
		if (h[0] == '\0' || strpbrk(h, ", \t\r\n") != NULL) {
			return -1;
		}
		if (!is_ip && strspn(h, "abcdefghijklmnopqrstuvwxyz"
		                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                        "0123456789.-*") != strlen(h)) {
			return -1;
		}
		w = snprintf(out + len, cap - len, "%s%s:%s", i == 0 ? "" : ",",
		             is_ip ? "IP" : "DNS", h);
		if (w < 0 || (size_t)w >= cap - len) {
			return -1;
		}
		len += (size_t)w;
	}
	return 0;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int rc;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ext == NULL) {
		return -1;
	}
	rc = X509_add_ext(cert, ext, -1) == 1 ? 0 : -1;
	X509_EXTENSION_free(ext);
	return rc;
}

/* Writes a key (0600) or a certificate (0644) to a new file. */
static int write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	              key != NULL ? 0600 : 0644);
	FILE *f;
	int ok;

	if (fd < 0) {
		fprintf(stderr, "lodectl: cannot create '%s': %s\n", path,
		        strerror(errno));
		return -1;
	}
	f = fdopen(fd, "w");
	if (f == NULL) {
		close(fd);
		return -1;
	}
	ok = key != NULL
	         ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
	         : PEM_write_X509(f, cert);
	if (fclose(f) != 0) {
		ok = 0;
	}
	if (ok != 1) {
		fprintf(stderr, "lodectl: cannot write '%s'\n", path);
		unlink(path);
		return -1;
	}
	return 0;
}

/* A new certificate for `key` named CN=`cn`, valid `days` days, with a
 * random serial; issuer and signature are the caller's. */
static X509 *new_cert(EVP_PKEY *key, const char *cn, long days)
{
	unsigned char serial[16];
	X509 *cert = X509_new();
	BIGNUM *bn = NULL;
	X509_NAME *name;

	if (cert == NULL || RAND_bytes(serial, sizeof serial) != 1) {
		goto err_cert;
	}
	serial[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(serial, sizeof serial, NULL);
	if (bn == NULL || X509_set_version(cert, 2) != 1 ||
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) == NULL ||
	    X509_gmtime_adj(X509_getm_notBefore(cert), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(cert), days * 24 * 3600) ==
	        NULL ||
	    X509_set_pubkey(cert, key) != 1) {
		goto err_cert;
	}
	name = X509_get_subject_name(cert);
	if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	                               (const unsigned char *)"Lodestone", -1,
	                               -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                               (const unsigned char *)cn, -1, -1,
	                               0) != 1) {
		goto err_cert;
	}
	BN_free(bn);
	return cert;

err_cert:
	BN_free(bn);
	X509_free(cert);
	return NULL;
}

static int parse_days(const char *s, long *days)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > 36500) {
		fprintf(stderr, "lodectl: --days must be 1..36500\n");
		return -1;
	}
	*days = v;
	return 0;
}

static int cert_ca(int argc, char **argv)
{
	const char *dir = NULL;
	char kpath[4096], cpath[4096];
	long days = 3650;
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	int rc = LODECTL_EXIT_REFUSED;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--out-dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--days") == 0 && i + 1 < argc) {
			if (parse_days(argv[++i], &days) != 0) {
				return LODECTL_EXIT_USAGE;
			}
		} else {
			cert_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
	}
	if (dir == NULL) {
		cert_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	snprintf(kpath, sizeof kpath, "%s/ca.key", dir);
	snprintf(cpath, sizeof cpath, "%s/ca.crt", dir);
	key = EVP_EC_gen("P-256");
	cert = key != NULL ? new_cert(key, "Lodestone cluster CA", days) : NULL;
	if (cert == NULL ||
	    X509_set_issuer_name(cert, X509_get_subject_name(cert)) != 1 ||
	    add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE") !=
	        0 ||
	    add_ext(cert, cert, NID_key_usage,
	            "critical,keyCertSign,cRLSign") != 0 ||
	    add_ext(cert, cert, NID_subject_key_identifier, "hash") != 0 ||
	    X509_sign(cert, key, EVP_sha256()) == 0) {
		fprintf(stderr, "lodectl: cannot make the CA certificate\n");
		goto err_out;
	}
	if (write_pem(kpath, key, NULL) != 0) {
		goto err_out;
	}
	if (write_pem(cpath, NULL, cert) != 0) {
		unlink(kpath);
		goto err_out;
	}
	printf("%s\n%s\n", cpath, kpath);
	rc = LODECTL_EXIT_OK;
err_out:
	X509_free(cert);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return rc;
}

/* Reads the CA's certificate and key from `dir`. 0 or -1. */
static int load_ca(const char *dir, X509 **cert, EVP_PKEY **key)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/ca.crt", dir);
	f = fopen(path, "r");
	*cert = f != NULL ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f != NULL) {
		fclose(f);
	}
	if (*cert == NULL) {
		fprintf(stderr,
		        "lodectl: cannot read the CA certificate '%s'\n", path);
		return -1;
	}
	snprintf(path, sizeof path, "%s/ca.key", dir);
	f = fopen(path, "r");
	*key = f != NULL ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f != NULL) {
		fclose(f);
	}
	if (*key == NULL || X509_check_private_key(*cert, *key) != 1) {
		fprintf(stderr,
		        "lodectl: cannot read the CA key '%s' (or it "
		        "does not match ca.crt)\n",
		        path);
		X509_free(*cert);
		EVP_PKEY_free(*key);
		*cert = NULL;
		*key = NULL;
		return -1;
	}
	return 0;
}

static int cert_node(int argc, char **argv)
{
	const char *hosts[MAX_HOSTS];
	const char *ca_dir = NULL, *dir = NULL;
	size_t n_hosts = 0;
	char cn[64], san[4096], kpath[4096], cpath[4096];
	long days = DEFAULT_DAYS;
	uint64_t id;
	char *end;
	EVP_PKEY *key = NULL, *ca_key = NULL;
	X509 *cert = NULL, *ca = NULL;
	int rc = LODECTL_EXIT_REFUSED;

	if (argc < 3) {
		cert_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	errno = 0;
	id = strtoull(argv[2], &end, 10);
	if (errno != 0 || *end != '\0' || id == 0 || id > UINT32_MAX ||
	    argv[2][0] < '1' || argv[2][0] > '9') {
		fprintf(stderr, "lodectl: the node id must be 1..%u\n",
		        UINT32_MAX);
		return LODECTL_EXIT_USAGE;
	}
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--ca-dir") == 0 && i + 1 < argc) {
			ca_dir = argv[++i];
		} else if (strcmp(argv[i], "--out-dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc &&
		           n_hosts < MAX_HOSTS) {
			hosts[n_hosts++] = argv[++i];
		} else if (strcmp(argv[i], "--days") == 0 && i + 1 < argc) {
			if (parse_days(argv[++i], &days) != 0) {
				return LODECTL_EXIT_USAGE;
			}
		} else {
			cert_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
	}
	if (ca_dir == NULL || dir == NULL) {
		cert_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	if (lodectl_cert_san(hosts, n_hosts, san, sizeof san) != 0) {
		fprintf(stderr, "lodectl: --host takes a DNS name or an IP "
		                "address\n");
		return LODECTL_EXIT_USAGE;
	}
	if (load_ca(ca_dir, &ca, &ca_key) != 0) {
		return LODECTL_EXIT_REFUSED;
	}
	snprintf(cn, sizeof cn, "node-%" PRIu64, id);
	snprintf(kpath, sizeof kpath, "%s/%s.key", dir, cn);
	snprintf(cpath, sizeof cpath, "%s/%s.crt", dir, cn);
	key = EVP_EC_gen("P-256");
	cert = key != NULL ? new_cert(key, cn, days) : NULL;
	if (cert == NULL ||
	    X509_set_issuer_name(cert, X509_get_subject_name(ca)) != 1 ||
	    add_ext(cert, ca, NID_basic_constraints, "critical,CA:FALSE") !=
	        0 ||
	    add_ext(cert, ca, NID_key_usage, "critical,digitalSignature") !=
	        0 ||
	    add_ext(cert, ca, NID_ext_key_usage, "serverAuth,clientAuth") !=
	        0 ||
	    add_ext(cert, ca, NID_subject_key_identifier, "hash") != 0 ||
	    add_ext(cert, ca, NID_authority_key_identifier, "keyid:always") !=
	        0 ||
	    (san[0] != '\0' &&
	     add_ext(cert, ca, NID_subject_alt_name, san) != 0) ||
	    X509_sign(cert, ca_key, EVP_sha256()) == 0) {
		fprintf(stderr, "lodectl: cannot make the node certificate\n");
		goto err_out;
	}
	if (write_pem(kpath, key, NULL) != 0) {
		goto err_out;
	}
	if (write_pem(cpath, NULL, cert) != 0) {
		unlink(kpath);
		goto err_out;
	}
	printf("%s\n%s\n", cpath, kpath);
	rc = LODECTL_EXIT_OK;
err_out:
	X509_free(cert);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
	ERR_clear_error();
	return rc;
}

int lodectl_cert_main(const struct lodectl_global *g, int argc, char **argv)
{
	(void)g;
	if (argc < 2 || strcmp(argv[1], "help") == 0) {
		cert_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	if (strcmp(argv[1], "ca") == 0) {
		return cert_ca(argc, argv);
	}
	if (strcmp(argv[1], "node") == 0) {
		return cert_node(argc, argv);
	}
	cert_usage(stderr);
	return LODECTL_EXIT_USAGE;
}

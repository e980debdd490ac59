/* lodectl: global options, the family dispatch table and shared output
 * helpers; see lodectl.h. */
#include "client/lodectl.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct lodectl_family {
	const char *name;
	lodectl_family_fn run;
	const char *summary; /* one line for --help */
};

/* One line per family. */
static const struct lodectl_family families[] = {
    {"kv", lodectl_kv_main, "KV data types over FSNP (get, set, hset, ...)"},
    {"ping", lodectl_ping_main, "PING the FSNP listener"},
    {"flow", lodectl_flow_main,
     "FerricFlow over FSNP (create, claim, complete, history, ...)"},
    {"felix", lodectl_felix_main,
     "Felix publish, subscribe, caches and counters over QUIC"},
    {"acl", lodectl_acl_main,
     "FSNP ACL users: setuser, deluser, getuser, list, users, whoami"},
    {"stream", lodectl_stream_main,
     "register, list, describe and delete Felix streams"},
    {"cache", lodectl_cache_main,
     "register, list, describe and delete Felix caches"},
    {"cluster", lodectl_cluster_main,
     "membership: status, drain, remove, replace, promote, demote, "
     "transfer-leader"},
    {"cert", lodectl_cert_main,
     "internal mutual TLS: a cluster CA and node certificates (offline)"},
};

#define N_FAMILIES (sizeof families / sizeof families[0])

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: lodectl [OPTIONS] FAMILY SUBCOMMAND [ARGS...]\n\n"
	        "options:\n"
	        "  --admin HOST:PORT    admin HTTP listener (default "
	        "127.0.0.1:8080)\n"
	        "  --fsnp HOST:PORT     FSNP listener (default "
	        "127.0.0.1:6388)\n"
	        "  --user NAME          FSNP user (default: default)\n"
	        "  --password PASSWORD  FSNP password (or "
	        "$LODESTONE_PASSWORD)\n"
	        "  --timeout-ms MS      per-request timeout (default 10000)\n"
	        "  --topology           route keys by the server's SHARDS "
	        "table\n"
	        "  --fsnp-tls           TLS to --fsnp (the listener's "
	        "--fsnp-tls port)\n"
	        "  --tls-ca FILE        CA certificates the server's must "
	        "verify against\n"
	        "                       (default: the system's)\n"
	        "  --tls-cert FILE      client certificate (PEM), with "
	        "--tls-key FILE\n"
	        "  --admin-token-file FILE  bearer token for the admin API "
	        "(or\n"
	        "                       $LODESTONE_ADMIN_TOKEN)\n"
	        "  --json               machine-readable output\n\n"
	        "families:\n");
	for (size_t i = 0; i < N_FAMILIES; i++) {
		fprintf(f, "  %-8s %s\n", families[i].name,
		        families[i].summary);
	}
	fprintf(f, "\n`lodectl FAMILY help` lists a family's subcommands.\n");
}

static int split_addr(const char *s, char *host, size_t cap, uint16_t *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	unsigned long p;
	if (colon == NULL || (size_t)(colon - s) >= cap) {
		return -1;
	}
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || p == 0 || p > 65535) {
		return -1;
	}
	if (colon == s) {
		snprintf(host, cap, "127.0.0.1");
	} else if (s[0] == '[' && colon[-1] == ']') {
		snprintf(host, cap, "%.*s", (int)(colon - s - 2), s + 1);
	} else {
		snprintf(host, cap, "%.*s", (int)(colon - s), s);
	}
	*port = (uint16_t)p;
	return 0;
}

/* --admin-token-file: its first line becomes LODESTONE_ADMIN_TOKEN, the
 * bearer token lodectl_http sends. */
static int read_token_file(const char *path)
{
	char tok[8200];
	size_t n;
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "lodectl: --admin-token-file %s: %s\n", path,
		        strerror(errno));
		return -1;
	}
	if (fgets(tok, sizeof tok, f) == NULL) {
		tok[0] = '\0';
	}
	fclose(f);
	n = strlen(tok);
	while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' ||
	                 tok[n - 1] == ' ' || tok[n - 1] == '\t')) {
		tok[--n] = '\0';
	}
	if (n == 0 || n > 8192) {
		fprintf(stderr,
		        "lodectl: --admin-token-file %s: no token on its first "
		        "line\n",
		        path);
		return -1;
	}
	setenv("LODESTONE_ADMIN_TOKEN", tok, 1);
	explicit_bzero(tok, sizeof tok);
	return 0;
}

int lodectl_http(const char *admin, const char *method, const char *path,
                 const char *body, int *status, char *out, size_t cap)
{
	char host[256], port[8], req[2048 + 8192], auth[8300] = "";
	uint16_t p;
	struct addrinfo hints, *res = NULL;
	int fd = -1, n;
	size_t len = 0, blen = body ? strlen(body) : 0;
	char *buf = NULL;
	size_t bcap = 1 << 16;

	out[0] = '\0';
	if (split_addr(admin, host, sizeof host, &p) != 0) {
		snprintf(out, cap, "--admin '%s' is not HOST:PORT", admin);
		return -1;
	}
	snprintf(port, sizeof port, "%u", p);
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL) {
		snprintf(out, cap, "cannot resolve %s", host);
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
		snprintf(out, cap, "cannot reach the admin API at %s: %s",
		         admin, strerror(errno));
		goto err;
	}
	/* A Felix token for the admin API's scope changes under JWT auth
	 * (docs/security.md). */
	const char *token = getenv("LODESTONE_ADMIN_TOKEN");
	if (token != NULL && token[0] != '\0' && strlen(token) <= 8192) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n",
		         token);
	}
	n = snprintf(req, sizeof req,
	             "%s %s HTTP/1.0\r\nHost: %s\r\n%sContent-Type: "
	             "application/json\r\nContent-Length: %zu\r\n\r\n",
	             method, path, host, auth, blen);
	if (n < 0 || (size_t)n >= sizeof req ||
	    write(fd, req, (size_t)n) != n ||
	    (blen > 0 && write(fd, body, blen) != (ssize_t)blen)) {
		snprintf(out, cap, "cannot send the request");
		goto err;
	}
	buf = malloc(bcap + 1);
	if (buf == NULL) {
		snprintf(out, cap, "out of memory");
		goto err;
	}
	for (;;) {
		if (len == bcap) {
			char *b = realloc(buf, bcap * 2 + 1);
			if (b == NULL) {
				break;
			}
			buf = b;
			bcap *= 2;
		}
		ssize_t r = read(fd, buf + len, bcap - len);
		if (r <= 0) {
			break;
		}
		len += (size_t)r;
	}
	buf[len] = '\0';
	if (sscanf(buf, "HTTP/%*d.%*d %d", status) != 1) {
		snprintf(out, cap, "malformed HTTP reply from %s", admin);
		goto err;
	}
	const char *b = strstr(buf, "\r\n\r\n");
	snprintf(out, cap, "%s", b != NULL ? b + 4 : "");
	free(buf);
	close(fd);
	freeaddrinfo(res);
	return 0;
err:
	free(buf);
	if (fd >= 0) {
		close(fd);
	}
	freeaddrinfo(res);
	return -1;
}

int lodectl_fsnp_connect(const struct lodectl_global *o, struct fsnp_sync **out)
{
	struct fsnp_client_options co;
	char err[256];
	memset(&co, 0, sizeof co);
	co.host = o->fsnp_host;
	co.port = o->fsnp_port;
	co.username = o->username;
	co.password = o->password;
	co.client_name = "lodectl";
	co.timeout_ms = o->timeout_ms;
	co.topology = o->topology;
	co.tls = o->fsnp_tls;
	co.tls_ca_file = o->tls_ca;
	co.tls_cert_file = o->tls_cert;
	co.tls_key_file = o->tls_key;
	if (fsnp_sync_open(out, &co, err, sizeof err) != 0) {
		fprintf(stderr, "lodectl: cannot use FSNP at %s:%u: %s\n",
		        o->fsnp_host, o->fsnp_port, err);
		return -1;
	}
	return 0;
}

static bool printable(struct fsnp_bytes b)
{
	for (size_t i = 0; i < b.len; i++) {
		if (!isprint(b.ptr[i]) && b.ptr[i] != '\t' &&
		    b.ptr[i] != '\n') {
			return false;
		}
	}
	return true;
}

static void print_json_string(FILE *f, struct fsnp_bytes b)
{
	fputc('"', f);
	for (size_t i = 0; i < b.len; i++) {
		unsigned char c = b.ptr[i];
		if (c == '"' || c == '\\') {
			fprintf(f, "\\%c", c);
		} else if (c < 0x20 || c >= 0x7f) {
			fprintf(f, "\\u%04x", c);
		} else {
			fputc(c, f);
		}
	}
	fputc('"', f);
}

static void print_json(FILE *f, const struct fsnp_val *v)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val e;
	bool first = true;
	switch (v->tag) {
	case FSNP_NIL:
		fputs("null", f);
		break;
	case FSNP_TRUE:
	case FSNP_FALSE:
		fputs(v->tag == FSNP_TRUE ? "true" : "false", f);
		break;
	case FSNP_I64:
		fprintf(f, "%" PRId64, v->as.i);
		break;
	case FSNP_U64:
		fprintf(f, "%" PRIu64, v->as.u);
		break;
	case FSNP_F64:
		fprintf(f, "%.17g", v->as.f);
		break;
	case FSNP_BIN:
		print_json_string(f, v->as.bin);
		break;
	case FSNP_ARRAY:
	case FSNP_MAP:
		fputc(v->tag == FSNP_ARRAY ? '[' : '{', f);
		fsnp_iter_init(&it, v);
		while (fsnp_iter_next(&it, &k, &e)) {
			if (!first) {
				fputc(',', f);
			}
			first = false;
			if (v->tag == FSNP_MAP) {
				print_json_string(f, k);
				fputc(':', f);
			}
			print_json(f, &e);
		}
		fputc(v->tag == FSNP_ARRAY ? ']' : '}', f);
		break;
	}
}

static void print_text(FILE *f, const struct fsnp_val *v, int indent)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val e;
	unsigned n = 0;
	switch (v->tag) {
	case FSNP_NIL:
		fputs("(nil)\n", f);
		break;
	case FSNP_TRUE:
	case FSNP_FALSE:
		fputs(v->tag == FSNP_TRUE ? "true\n" : "false\n", f);
		break;
	case FSNP_I64:
		fprintf(f, "(integer) %" PRId64 "\n", v->as.i);
		break;
	case FSNP_U64:
		fprintf(f, "(integer) %" PRIu64 "\n", v->as.u);
		break;
	case FSNP_F64:
		fprintf(f, "(float) %.17g\n", v->as.f);
		break;
	case FSNP_BIN:
		if (printable(v->as.bin)) {
			fprintf(f, "%.*s\n", (int)v->as.bin.len,
			        (const char *)v->as.bin.ptr);
		} else {
			fputs("0x", f);
			for (size_t i = 0; i < v->as.bin.len; i++) {
				fprintf(f, "%02x", v->as.bin.ptr[i]);
			}
			fputc('\n', f);
		}
		break;
	case FSNP_ARRAY:
	case FSNP_MAP:
		if (v->as.count == 0) {
			fputs(v->tag == FSNP_ARRAY ? "(empty list)\n"
			                           : "(empty map)\n",
			      f);
			break;
		}
		fsnp_iter_init(&it, v);
		while (fsnp_iter_next(&it, &k, &e)) {
			fprintf(f, "%*s", indent, "");
			if (v->tag == FSNP_ARRAY) {
				fprintf(f, "%u) ", ++n);
			} else {
				fprintf(f, "%.*s: ", (int)k.len,
				        (const char *)k.ptr);
			}
			if (e.tag == FSNP_ARRAY || e.tag == FSNP_MAP) {
				fputc('\n', f);
				print_text(f, &e, indent + 3);
			} else {
				print_text(f, &e, indent + 3);
			}
		}
		break;
	}
}

void lodectl_print_value(const struct lodectl_global *o, FILE *f,
                         const struct fsnp_val *v)
{
	if (o->json) {
		print_json(f, v);
		fputc('\n', f);
	} else {
		print_text(f, v, 0);
	}
}

int lodectl_print_reply(const struct lodectl_global *o, uint16_t status,
                        const struct wbuf *payload)
{
	struct fsnp_val v;
	if (fsnp_value_decode(payload->data, payload->len, NULL, &v, NULL) !=
	    0) {
		fprintf(stderr, "lodectl: malformed reply\n");
		return LODECTL_EXIT_REFUSED;
	}
	if (status == FSNP_STATUS_OK) {
		lodectl_print_value(o, stdout, &v);
		return LODECTL_EXIT_OK;
	}
	struct fsnp_bytes msg = {NULL, 0};
	if (v.tag == FSNP_BIN) {
		msg = v.as.bin;
	} else {
		fsnp_map_bin(&v, "message", &msg);
	}
	if (o->json) {
		fprintf(stderr, "{\"status\":%u,\"error\":", status);
		print_json(stderr, &v);
		fputs("}\n", stderr);
	} else {
		fprintf(stderr, "(error %s) %.*s\n", fsnp_status_name(status),
		        (int)msg.len, msg.ptr ? (const char *)msg.ptr : "");
	}
	return LODECTL_EXIT_REFUSED;
}

int main(int argc, char **argv)
{
	struct lodectl_global o;
	int i;
	memset(&o, 0, sizeof o);
	snprintf(o.fsnp_host, sizeof o.fsnp_host, "127.0.0.1");
	o.fsnp_port = 6388;
	snprintf(o.admin, sizeof o.admin, "127.0.0.1:8080");
	o.timeout_ms = 10000;
	o.password = getenv("LODESTONE_PASSWORD");

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0) {
			usage(stdout);
			return LODECTL_EXIT_OK;
		} else if (strcmp(a, "--json") == 0) {
			o.json = true;
		} else if (strcmp(a, "--topology") == 0) {
			o.topology = true;
		} else if (strcmp(a, "--fsnp-tls") == 0) {
			o.fsnp_tls = true;
		} else if (val == NULL) {
			fprintf(stderr, "lodectl: %s needs a value\n", a);
			return LODECTL_EXIT_USAGE;
		} else if (strcmp(a, "--fsnp") == 0) {
			if (split_addr(val, o.fsnp_host, sizeof o.fsnp_host,
			               &o.fsnp_port) != 0) {
				fprintf(
				    stderr,
				    "lodectl: --fsnp '%s' is not HOST:PORT\n",
				    val);
				return LODECTL_EXIT_USAGE;
			}
			i++;
		} else if (strcmp(a, "--admin") == 0) {
			snprintf(o.admin, sizeof o.admin, "%s", val);
			i++;
		} else if (strcmp(a, "--admin-token-file") == 0) {
			if (read_token_file(val) != 0) {
				return LODECTL_EXIT_USAGE;
			}
			i++;
		} else if (strcmp(a, "--password") == 0) {
			o.password = val;
			i++;
		} else if (strcmp(a, "--user") == 0) {
			o.username = val;
			i++;
		} else if (strcmp(a, "--tls-ca") == 0) {
			o.tls_ca = val;
			i++;
		} else if (strcmp(a, "--tls-cert") == 0) {
			o.tls_cert = val;
			i++;
		} else if (strcmp(a, "--tls-key") == 0) {
			o.tls_key = val;
			i++;
		} else if (strcmp(a, "--timeout-ms") == 0) {
			char *end;
			o.timeout_ms = strtoull(val, &end, 10);
			if (*end != '\0' || o.timeout_ms == 0) {
				fprintf(stderr,
				        "lodectl: --timeout-ms '%s' is not a "
				        "positive integer\n",
				        val);
				return LODECTL_EXIT_USAGE;
			}
			i++;
		} else {
			fprintf(stderr,
			        "lodectl: unknown option %s (see --help)\n", a);
			return LODECTL_EXIT_USAGE;
		}
	}
	if (o.fsnp_tls && o.topology) {
		fprintf(stderr,
		        "lodectl: --fsnp-tls and --topology cannot be "
		        "combined (SHARDS lists plaintext endpoints)\n");
		return LODECTL_EXIT_USAGE;
	}
	if (i >= argc) {
		usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	for (size_t f = 0; f < N_FAMILIES; f++) {
		if (strcmp(argv[i], families[f].name) == 0) {
			return families[f].run(&o, argc - i, argv + i);
		}
	}
	fprintf(stderr, "lodectl: unknown command '%s' (see --help)\n",
	        argv[i]);
	return LODECTL_EXIT_USAGE;
}

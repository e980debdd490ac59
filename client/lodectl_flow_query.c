/* lodectl flow query: one FLOW.QUERY (opcode 0x0231) with an FQL1 text
 * and named parameters. Records print as a table (a column per field, in
 * the order the records first name them), then the page (has_more and
 * the cursor to pass back with --cursor) and what the query read; a
 * count prints as one number; EXPLAIN and --json print the reply value
 * (JSON with --json). docs/flow-query.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/flow_client.h"
#include "client/lodectl.h"
#include "wire/fsnp_opcode.h"

#define MAX_COLS 40
#define MAX_PARAMS 64

void lodectl_flow_query_usage(FILE *f)
{
	fprintf(f,
	        "usage: lodectl [--fsnp HOST:PORT] [--json] flow query "
	        "'FQL1 QUERY' [OPTIONS]\n\n"
	        "  --param NAME=VALUE   a text parameter (@NAME in the "
	        "query)\n"
	        "  --int NAME=N         an integer parameter\n"
	        "  --cursor TOKEN       resume a page: binds @cursor (write "
	        "CURSOR @cursor\n"
	        "                       in the query)\n\n"
	        "example: lodectl flow query \"FROM runs WHERE partition_key = "
	        "@pk AND type = 'email'\n"
	        "         AND state = 'failed' ORDER BY updated_at_ms DESC "
	        "LIMIT 50 RETURN RECORDS\"\n"
	        "         --param pk=tenant-a\n");
}

struct param {
	const char *name;
	size_t nlen;
	const char *value;
	bool integer;
};

/* A cell: scalars as text, maps and lists in brief JSON-like form. */
static void cell(const struct fsnp_val *v, char *out, size_t cap)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val e;
	size_t n = 0;
	out[0] = '\0';
	switch (v->tag) {
	case FSNP_BIN:
		snprintf(out, cap, "%.*s", (int)v->as.bin.len,
		         (const char *)v->as.bin.ptr);
		return;
	case FSNP_I64:
		snprintf(out, cap, "%" PRId64, v->as.i);
		return;
	case FSNP_U64:
		snprintf(out, cap, "%" PRIu64, v->as.u);
		return;
	case FSNP_F64:
		snprintf(out, cap, "%g", v->as.f);
		return;
	case FSNP_TRUE:
	case FSNP_FALSE:
		snprintf(out, cap, "%s",
		         v->tag == FSNP_TRUE ? "true" : "false");
		return;
	case FSNP_NIL:
		snprintf(out, cap, "nil");
		return;
	case FSNP_MAP:
	case FSNP_ARRAY:
		n += (size_t)snprintf(out, cap, "%c",
		                      v->tag == FSNP_MAP ? '{' : '[');
		fsnp_iter_init(&it, v);
		while (
		    n + 1 < cap &&
		    fsnp_iter_next(&it, v->tag == FSNP_MAP ? &k : NULL, &e)) {
			char sub[256];
			cell(&e, sub, sizeof sub);
			if (v->tag == FSNP_MAP) {
				n += (size_t)snprintf(
				    out + n, cap - n, "%s%.*s=%s",
				    out[n - 1] == '{' ? "" : ",", (int)k.len,
				    (const char *)k.ptr, sub);
			} else {
				n += (size_t)snprintf(
				    out + n, cap - n, "%s%s",
				    out[n - 1] == '[' ? "" : ",", sub);
			}
		}
		if (n + 1 < cap) {
			snprintf(out + n, cap - n, "%c",
			         v->tag == FSNP_MAP ? '}' : ']');
		}
		return;
	default:
		snprintf(out, cap, "?");
		return;
	}
}

static void print_table(const struct fsnp_val *recs)
{
	struct fsnp_bytes cols[MAX_COLS], k;
	size_t ncols = 0, width[MAX_COLS];
	struct fsnp_iter it, jt;
	struct fsnp_val rec, v;
	char buf[1024];

	fsnp_iter_init(&it, recs);
	while (fsnp_iter_next(&it, NULL, &rec)) {
		fsnp_iter_init(&jt, &rec);
		while (fsnp_iter_next(&jt, &k, &v)) {
			size_t c;
			for (c = 0; c < ncols; c++) {
				if (cols[c].len == k.len &&
				    memcmp(cols[c].ptr, k.ptr, k.len) == 0) {
					break;
				}
			}
			if (c == ncols && ncols < MAX_COLS) {
				cols[ncols] = k;
				width[ncols++] = k.len;
			}
			if (c < ncols) {
				cell(&v, buf, sizeof buf);
				if (strlen(buf) > width[c]) {
					width[c] = strlen(buf);
				}
			}
		}
	}
	for (size_t c = 0; c < ncols; c++) {
		printf("%s%-*.*s", c ? "  " : "", (int)width[c],
		       (int)cols[c].len, (const char *)cols[c].ptr);
	}
	printf("\n");
	fsnp_iter_init(&it, recs);
	while (fsnp_iter_next(&it, NULL, &rec)) {
		for (size_t c = 0; c < ncols; c++) {
			buf[0] = '\0';
			if (fsnp_map_get_n(&rec, cols[c].ptr, cols[c].len,
			                   &v) == 0) {
				cell(&v, buf, sizeof buf);
			}
			printf("%s%-*s", c ? "  " : "", (int)width[c], buf);
		}
		printf("\n");
	}
}

static void print_result(const struct fsnp_val *v)
{
	struct fsnp_val recs, page, usage, res, cur;
	int64_t n = 0;
	if (fsnp_map_get(v, "result", &res) == 0) {
		fsnp_map_i64(&res, "value", &n);
		printf("%" PRId64 "\n", n);
	} else if (fsnp_map_get(v, "records", &recs) == 0) {
		print_table(&recs);
		printf("(%u record%s", recs.as.count,
		       recs.as.count == 1 ? "" : "s");
		if (fsnp_map_get(v, "page", &page) == 0 &&
		    fsnp_map_get(&page, "cursor", &cur) == 0 &&
		    cur.tag == FSNP_BIN) {
			printf("; more: --cursor %.*s", (int)cur.as.bin.len,
			       (const char *)cur.as.bin.ptr);
		}
		printf(")\n");
	}
	if (fsnp_map_get(v, "usage", &usage) == 0) {
		int64_t e = 0, h = 0, s = 0, t = 0;
		fsnp_map_i64(&usage, "scanned_entries", &e);
		fsnp_map_i64(&usage, "hydrated_records", &h);
		fsnp_map_i64(&usage, "range_seeks", &s);
		fsnp_map_i64(&usage, "wall_time_us", &t);
		printf("read %" PRId64 " index entries in %" PRId64
		       " seeks, %" PRId64 " records hydrated, %" PRId64 " us\n",
		       e, s, h, t);
	}
}

int lodectl_flow_query_main(const struct lodectl_global *g, int argc,
                            char **argv)
{
	struct param ps[MAX_PARAMS];
	size_t np = 0;
	const char *text = NULL, *cursor = NULL;
	struct fsnp_sync *s;
	struct fsnp_writer w;
	struct fsnp_val v;
	struct wbuf body, out;
	uint16_t status = 0;
	int rv;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "--param") == 0 || strcmp(a, "--int") == 0) &&
		    i + 1 < argc) {
			const char *eq = strchr(argv[i + 1], '=');
			if (eq == NULL || eq == argv[i + 1] ||
			    np == MAX_PARAMS) {
				fprintf(stderr,
				        "lodectl: %s needs NAME=VALUE\n", a);
				return LODECTL_EXIT_USAGE;
			}
			ps[np].name = argv[i + 1];
			ps[np].nlen = (size_t)(eq - argv[i + 1]);
			ps[np].value = eq + 1;
			ps[np].integer = strcmp(a, "--int") == 0;
			if (ps[np].integer) {
				char *end;
				(void)strtoll(ps[np].value, &end, 10);
				if (ps[np].value[0] == '\0' || *end != '\0') {
					fprintf(stderr,
					        "lodectl: --int %s is not an "
					        "integer\n",
					        argv[i + 1]);
					return LODECTL_EXIT_USAGE;
				}
			}
			np++;
			i++;
		} else if (strcmp(a, "--cursor") == 0 && i + 1 < argc) {
			cursor = argv[++i];
		} else if (a[0] == '-' && a[1] == '-') {
			fprintf(stderr, "lodectl: unknown option '%s'\n", a);
			lodectl_flow_query_usage(stderr);
			return LODECTL_EXIT_USAGE;
		} else if (text == NULL) {
			text = a;
		} else {
			lodectl_flow_query_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
	}
	if (text == NULL) {
		lodectl_flow_query_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	wbuf_init(&body);
	fsnp_w_init(&w, &body);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "version");
	fsnp_w_str(&w, "FQL1");
	fsnp_w_key(&w, "query");
	fsnp_w_str(&w, text);
	if (np > 0 || cursor != NULL) {
		fsnp_w_key(&w, "params");
		fsnp_w_map_begin(&w);
		for (size_t k = 0; k < np; k++) {
			fsnp_w_key_bin(&w, ps[k].name, ps[k].nlen);
			if (ps[k].integer) {
				fsnp_w_i64(&w, strtoll(ps[k].value, NULL, 10));
			} else {
				fsnp_w_str(&w, ps[k].value);
			}
		}
		if (cursor != NULL) {
			fsnp_w_key(&w, "cursor");
			fsnp_w_str(&w, cursor);
		}
		fsnp_w_map_end(&w);
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || body.oom) {
		wbuf_free(&body);
		fprintf(stderr, "lodectl: out of memory\n");
		return LODECTL_EXIT_REFUSED;
	}
	if (lodectl_fsnp_connect(g, &s) != 0) {
		wbuf_free(&body);
		return LODECTL_EXIT_UNREACHABLE;
	}
	wbuf_init(&out);
	rv = fsnp_sync_call(s, FSNP_OP_FLOW_QUERY, NULL, 0, body.data, body.len,
	                    0, &status, &out);
	if (rv != 0) {
		fprintf(stderr, "lodectl: %s\n", fsnp_client_strerror(rv));
		rv = rv == FSNP_CLIENT_ELOST || rv == FSNP_CLIENT_ETIMEDOUT
		         ? LODECTL_EXIT_UNREACHABLE
		         : LODECTL_EXIT_REFUSED;
	} else if (status != FSNP_STATUS_OK || g->json) {
		rv = lodectl_print_reply(g, status, &out);
	} else if (flow_client_decode(out.data, out.len, &v) != 0) {
		fprintf(stderr, "lodectl: malformed reply\n");
		rv = LODECTL_EXIT_REFUSED;
	} else {
		struct fsnp_val ver;
		if (fsnp_map_get(&v, "version", &ver) == 0 &&
		    ver.tag == FSNP_BIN &&
		    fsnp_bytes_eq(ver.as.bin, "ferric.flow.explain/v1")) {
			lodectl_print_value(g, stdout, &v);
		} else {
			print_result(&v);
		}
		rv = LODECTL_EXIT_OK;
	}
	wbuf_free(&out);
	wbuf_free(&body);
	fsnp_sync_close(s);
	return rv;
}

/* Fuzz target: FQL1 query text. Whatever parses must print to canonical
 * text that parses back to the same query, print redacted,
 * summarize and classify its shape, and bind against no parameters and against
 * a map naming every parameter, and plan (flow/fql_plan.h) what binds;
 * whatever fails must carry a known code and, for
 * parse errors, a position inside the text (or just past its end). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flow/fql_parse.h"
#include "flow/fql_plan.h"
#include "flow/fql_print.h"
#include "flow/fql_shape.h"
#include "wire/fsnp_value.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fql_query q1, q2;

static void check_diag(const struct fql_diag *d, size_t len, bool positioned)
{
	CHECK(fql_code_name(d->code) != NULL);
	if (positioned) {
		CHECK(d->has_position);
	}
	if (d->has_position) {
		CHECK(d->byte >= 1 && d->byte <= len + 1);
		CHECK(d->line >= 1 && d->column >= 1 && d->column <= d->byte);
	}
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fql_diag_write(d, &w);
	CHECK(fsnp_w_finish(&w) == 0);
	struct fsnp_val v;
	CHECK(fsnp_value_decode_body(b.data, b.len, NULL, &v) == 0);
	wbuf_free(&b);
}

/* A bound query plans to one bounded access path or to a value-free
 * refusal, and its EXPLAIN plan map encodes. */
static void check_plan(const struct fql_query *q)
{
	struct fql_plan p;
	struct fql_diag d;
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
	fql_plan(q, &p);
	CHECK(p.index != NULL && p.source != NULL);
	if (p.access == FQL_ACCESS_NONE) {
		fql_plan_diag(&p, &d);
		CHECK(d.code == FQL_QUERY_NO_BOUNDED_PLAN);
	} else if (p.access == FQL_ACCESS_RANGE) {
		CHECK(q->kind == FQL_K_COLLECTION && q->has_limit);
		CHECK(p.multi == NULL || p.multi->nvals <= FQL_PLAN_MAX_RANGES);
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fql_plan_write(q, &p, &w);
	CHECK(fsnp_w_finish(&w) == 0);
	CHECK(fsnp_value_decode_body(b.data, b.len, NULL, &v) == 0);
	wbuf_free(&b);
}

/* A params map giving every parameter of q the same value. */
static void params_for(const struct fql_query *q, struct wbuf *b, bool text)
{
	struct fsnp_writer w;
	fsnp_w_init(&w, b);
	fsnp_w_map_begin(&w);
	const struct fql_value
	    *seen[FQL_MAX_PREDICATES * FQL_MAX_IN_VALUES + 1];
	size_t n = 0;
	for (uint32_t i = 0; i <= q->npreds; i++) {
		uint32_t nv = i < q->npreds ? q->preds[i].nvals : 1;
		for (uint32_t k = 0; k < nv; k++) {
			const struct fql_value *v =
			    i < q->npreds ? &q->preds[i].v[k] : &q->cursor;
			if (v->kind != FQL_V_PARAM ||
			    (i == q->npreds && !q->has_cursor)) {
				continue;
			}
			bool dup = false;
			for (size_t j = 0; j < n; j++) {
				dup |= seen[j]->len == v->len &&
				       memcmp(seen[j]->s, v->s, v->len) == 0;
			}
			if (dup) {
				continue;
			}
			seen[n++] = v;
			fsnp_w_key_bin(&w, v->s, v->len);
			if (text) {
				fsnp_w_str(&w, "fqc1_0123456789abcdef");
			} else {
				fsnp_w_i64(&w, (int64_t)n);
			}
		}
	}
	fsnp_w_map_end(&w);
	CHECK(fsnp_w_finish(&w) == 0);
	CHECK(n == q->nparams);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fql_diag d;
	if (fql_parse((const char *)data, size, &q1, &d) != 0) {
		check_diag(&d, size, true);
		return 0;
	}
	struct wbuf text, red;
	wbuf_init(&text);
	wbuf_init(&red);
	CHECK(fql_print(&q1, &text) == 0);
	CHECK(fql_print_redacted(&q1, &red) == 0);
	if (text.len <= FQL_MAX_TEXT) {
		int rv = fql_parse((const char *)text.data, text.len, &q2, &d);
		CHECK(rv == 0);
		CHECK(fql_query_equal(&q1, &q2));
		/* canonical text is a fixed point */
		struct wbuf again;
		wbuf_init(&again);
		CHECK(fql_print(&q2, &again) == 0);
		CHECK(again.len == text.len &&
		      memcmp(again.data, text.data, text.len) == 0);
		wbuf_free(&again);
	}
	struct fql_shape s;
	fql_shape(&q1, &s);
	CHECK(s.kind == q1.kind && s.norder == q1.norder);
	CHECK(s.neq + s.nranges + s.nnull + (s.partition != NULL) +
	          (s.run_id != NULL) ==
	      q1.npreds);

	if (fql_bind(&q1, NULL, &d) != 0) {
		check_diag(&d, size, false);
		CHECK(q1.nparams > 0);
	} else {
		CHECK(fql_shape_name(fql_shape_classify(&q1)) != NULL);
		check_plan(&q1);
	}
	for (int text_params = 0; text_params < 2; text_params++) {
		struct wbuf pb;
		struct fsnp_val pv;
		wbuf_init(&pb);
		params_for(&q1, &pb, text_params);
		CHECK(fsnp_value_decode_body(pb.data, pb.len, NULL, &pv) == 0);
		if (fql_bind(&q1, &pv, &d) != 0) {
			check_diag(&d, size, false);
			CHECK(d.code != FQL_MISSING_PARAMETER &&
			      d.code != FQL_UNEXPECTED_PARAMETER);
		} else {
			CHECK(fql_shape_name(fql_shape_classify(&q1)) != NULL);
			check_plan(&q1);
		}
		wbuf_free(&pb);
	}
	wbuf_free(&text);
	wbuf_free(&red);
	return 0;
}

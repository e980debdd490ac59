/* FQL1 canonical and redacted printer (flow/fql_print.h). */
#include "flow/fql_print.h"

#include <inttypes.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

static void quoted(struct wbuf *out, const char *s, size_t len)
{
	wbuf_put_u8(out, '\'');
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\'') {
			wbuf_put_u8(out, '\'');
		}
		wbuf_put_u8(out, (uint8_t)s[i]);
	}
	wbuf_put_u8(out, '\'');
}

static void bracket(struct wbuf *out, const char *s, size_t len)
{
	wbuf_put_u8(out, '[');
	quoted(out, s, len);
	wbuf_put_u8(out, ']');
}

int fql_print_field(const struct fql_field *f, struct wbuf *out)
{
	switch (f->id) {
	case FQL_F_ATTRIBUTE:
	case FQL_F_FIELD:
		wbuf_append_str(out, f->id == FQL_F_ATTRIBUTE ? "attribute"
		                                              : "fields");
		if (fql_name_is_plain(f->a, f->alen)) {
			wbuf_put_u8(out, '.');
			wbuf_append(out, f->a, f->alen);
		} else {
			bracket(out, f->a, f->alen);
		}
		break;
	case FQL_F_STATE_META_KEY:
		wbuf_append_str(out, "state_meta");
		if (fql_name_is_plain(f->a, f->alen) &&
		    fql_name_is_plain(f->b, f->blen)) {
			wbuf_put_u8(out, '.');
			wbuf_append(out, f->a, f->alen);
			wbuf_put_u8(out, '.');
			wbuf_append(out, f->b, f->blen);
		} else {
			bracket(out, f->a, f->alen);
			bracket(out, f->b, f->blen);
		}
		break;
	default:
		wbuf_append_str(out, fql_field_name(f->id));
		break;
	}
	return out->oom ? -1 : 0;
}

static void value(struct wbuf *out, const struct fql_value *v, bool redact)
{
	char num[32];
	if (redact) {
		wbuf_put_u8(out, '?');
		return;
	}
	switch (v->kind) {
	case FQL_V_STR:
		quoted(out, v->s, v->len);
		break;
	case FQL_V_INT:
		snprintf(num, sizeof num, "%" PRId64, v->i);
		wbuf_append_str(out, num);
		break;
	case FQL_V_PARAM:
		wbuf_put_u8(out, '@');
		wbuf_append(out, v->s, v->len);
		break;
	}
}

static int print(const struct fql_query *q, bool redact, struct wbuf *out)
{
	char num[16];
	if (q->mode == FQL_EXPLAIN) {
		wbuf_append_str(out, "EXPLAIN ");
	} else if (q->mode == FQL_EXPLAIN_ANALYZE) {
		wbuf_append_str(out, "EXPLAIN ANALYZE ");
	}
	wbuf_append_str(out, q->source == FQL_EVENTS ? "FROM events WHERE "
	                                             : "FROM runs WHERE ");
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (i > 0) {
			wbuf_append_str(out, " AND ");
		}
		fql_print_field(&pr->field, out);
		switch (pr->op) {
		case FQL_OP_EQ:
			wbuf_append_str(out, " = ");
			value(out, &pr->v[0], redact);
			break;
		case FQL_OP_IN:
			wbuf_append_str(out, " IN (");
			for (uint32_t k = 0; k < pr->nvals; k++) {
				if (k > 0) {
					wbuf_append_str(out, ", ");
				}
				value(out, &pr->v[k], redact);
			}
			wbuf_put_u8(out, ')');
			break;
		case FQL_OP_BETWEEN:
		case FQL_OP_WINDOW:
			wbuf_append_str(out, pr->op == FQL_OP_BETWEEN
			                         ? " BETWEEN "
			                         : " FROM ");
			value(out, &pr->v[0], redact);
			wbuf_append_str(out, pr->op == FQL_OP_BETWEEN ? " AND "
			                                              : " TO ");
			value(out, &pr->v[1], redact);
			break;
		case FQL_OP_IS_NULL:
			wbuf_append_str(out, " IS NULL");
			break;
		case FQL_OP_IS_MISSING:
			wbuf_append_str(out, " IS MISSING");
			break;
		}
	}
	for (uint32_t i = 0; i < q->norder; i++) {
		wbuf_append_str(out, i == 0 ? " ORDER BY " : ", ");
		fql_print_field(&q->order[i].field, out);
		wbuf_append_str(out, q->order[i].desc ? " DESC" : " ASC");
	}
	if (q->has_limit) {
		snprintf(num, sizeof num, " LIMIT %u", (unsigned)q->limit);
		wbuf_append_str(out, num);
	}
	if (q->has_cursor) {
		wbuf_append_str(out, " CURSOR ");
		value(out, &q->cursor, redact);
	}
	wbuf_append_str(out, q->ret == FQL_RET_COUNT    ? " RETURN COUNT"
	                     : q->ret == FQL_RET_RECORD ? " RETURN RECORD"
	                                                : " RETURN RECORDS");
	if (q->has_projection) {
		for (uint32_t i = 0; i < q->nproj; i++) {
			wbuf_append_str(out, i == 0 ? " (" : ", ");
			fql_print_field(&q->proj[i], out);
		}
		wbuf_put_u8(out, ')');
	}
	return out->oom ? -1 : 0;
}

int fql_print(const struct fql_query *q, struct wbuf *out)
{
	return print(q, false, out);
}

int fql_print_redacted(const struct fql_query *q, struct wbuf *out)
{
	return print(q, true, out);
}

int fql_print_fingerprint(const struct fql_query *q, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	struct wbuf b;
	uint8_t md[SHA256_DIGEST_LENGTH];
	wbuf_init(&b);
	if (print(q, true, &b) != 0) {
		wbuf_free(&b);
		return -1;
	}
	SHA256(b.data, b.len, md);
	wbuf_free(&b);
	for (size_t i = 0; i < sizeof md; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
	return 0;
}

/* Time zones from TZif files (tz.h). */
#include "flow/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TZ_FILE_MAX (1u << 20)

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* --- calendar ------------------------------------------------------------ */

int64_t tz_days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	const int64_t era = (y >= 0 ? y : y - 399) / 400;
	const int64_t yoe = y - era * 400;
	const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void tz_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	const int64_t doe = z - era * 146097;
	const int64_t yoe =
	    (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	const int64_t mp = (5 * doy + 2) / 153;
	*d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

unsigned tz_weekday(int64_t days)
{
	return (unsigned)(days >= -4 ? (days + 4) % 7 : (days + 5) % 7 + 6);
}

static bool is_leap(int64_t y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

unsigned tz_days_in_month(int64_t y, unsigned m)
{
	static const unsigned dim[12] = {31, 28, 31, 30, 31, 30,
	                                 31, 31, 30, 31, 30, 31};
	if (m == 2 && is_leap(y)) {
		return 29;
	}
	return dim[(m - 1) % 12];
}

/* --- names and files ----------------------------------------------------- */

int tz_name_valid(const char *name, size_t len)
{
	size_t part = 0;
	bool dots = true;
	if (len == 0 || len >= TZ_NAME_MAX || name[0] == '/') {
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];
		if (ch == '/') {
			if (part == 0 || dots) {
				return 0;
			}
			part = 0;
			dots = true;
			continue;
		}
		bool ok = (ch >= 'A' && ch <= 'Z') ||
		          (ch >= 'a' && ch <= 'z') ||
		          (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
		          ch == '+' || ch == '.';
		if (!ok) {
			return 0;
		}
		if (ch != '.') {
			dots = false;
		}
		part++;
	}
	return part > 0 && !dots;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64s(const uint8_t *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* --- the POSIX TZ footer ------------------------------------------------- */

static bool parse_num(const char **s, int lo, int hi, int *out)
{
	int v = 0, n = 0;
	while (**s >= '0' && **s <= '9' && n < 6) {
		v = v * 10 + (**s - '0');
		(*s)++;
		n++;
	}
	if (n == 0 || v < lo || v > hi) {
		return false;
	}
	*out = v;
	return true;
}

/* [+-]hh[:mm[:ss]] into seconds (hours up to `maxh`). */
static bool parse_hms(const char **s, int maxh, int32_t *out)
{
	int sign = 1, h, m = 0, sec = 0;
	if (**s == '+' || **s == '-') {
		sign = **s == '-' ? -1 : 1;
		(*s)++;
	}
	if (!parse_num(s, 0, maxh, &h)) {
		return false;
	}
	if (**s == ':') {
		(*s)++;
		if (!parse_num(s, 0, 59, &m)) {
			return false;
		}
		if (**s == ':') {
			(*s)++;
			if (!parse_num(s, 0, 59, &sec)) {
				return false;
			}
		}
	}
	*out = sign * (h * 3600 + m * 60 + sec);
	return true;
}

static bool parse_name(const char **s)
{
	int n = 0;
	if (**s == '<') {
		(*s)++;
		while (**s != '\0' && **s != '>') {
			(*s)++;
			n++;
		}
		if (**s != '>') {
			return false;
		}
		(*s)++;
		return n >= 3;
	}
	while ((**s >= 'A' && **s <= 'Z') || (**s >= 'a' && **s <= 'z')) {
		(*s)++;
		n++;
	}
	return n >= 3;
}

static bool parse_rule_date(const char **s, struct tz_rule_date *r)
{
	memset(r, 0, sizeof *r);
	r->secs = 7200;
	if (**s == 'M') {
		(*s)++;
		r->kind = 'M';
		if (!parse_num(s, 1, 12, &r->m) || *(*s)++ != '.' ||
		    !parse_num(s, 1, 5, &r->w) || *(*s)++ != '.' ||
		    !parse_num(s, 0, 6, &r->d)) {
			return false;
		}
	} else if (**s == 'J') {
		(*s)++;
		r->kind = 'J';
		if (!parse_num(s, 1, 365, &r->n)) {
			return false;
		}
	} else {
		r->kind = 'D';
		if (!parse_num(s, 0, 365, &r->n)) {
			return false;
		}
	}
	if (**s == '/') {
		(*s)++;
		if (!parse_hms(s, 167, &r->secs)) {
			return false;
		}
	}
	return true;
}

static int parse_footer(struct tz_footer *f, const char *s)
{
	int32_t off;
	memset(f, 0, sizeof *f);
	if (*s == '\0') {
		return 0; /* no rule: the table's last type stays */
	}
	if (!parse_name(&s) || !parse_hms(&s, 24, &off)) {
		return -1;
	}
	f->std_off = -off;
	f->present = 1;
	if (*s == '\0') {
		return 0;
	}
	if (!parse_name(&s)) {
		return -1;
	}
	f->has_dst = 1;
	f->dst_off = f->std_off + 3600;
	if (*s != ',' && *s != '\0') {
		if (!parse_hms(&s, 24, &off)) {
			return -1;
		}
		f->dst_off = -off;
	}
	if (*s == '\0') {
		const char *dflt = "M3.2.0,M11.1.0";
		if (!parse_rule_date(&dflt, &f->start) || *dflt++ != ',' ||
		    !parse_rule_date(&dflt, &f->end)) {
			return -1;
		}
		return 0;
	}
	if (*s++ != ',' || !parse_rule_date(&s, &f->start) || *s++ != ',' ||
	    !parse_rule_date(&s, &f->end) || *s != '\0') {
		return -1;
	}
	return 0;
}

/* The UTC second at which rule date `r` of year `y` happens, local time
 * being UTC + `off`. */
static int64_t rule_utc(const struct tz_rule_date *r, int64_t y, int32_t off)
{
	int64_t days;
	if (r->kind == 'J') {
		days = tz_days_from_civil(y, 1, 1) + r->n - 1 +
		       (is_leap(y) && r->n >= 60 ? 1 : 0);
	} else if (r->kind == 'D') {
		days = tz_days_from_civil(y, 1, 1) + r->n;
	} else {
		int64_t first = tz_days_from_civil(y, (unsigned)r->m, 1);
		unsigned wd = tz_weekday(first);
		unsigned dim = tz_days_in_month(y, (unsigned)r->m);
		unsigned day = 1 + ((unsigned)r->d + 7 - wd) % 7 +
		               7 * (unsigned)(r->w - 1);
		while (day > dim) {
			day -= 7;
		}
		days = first + day - 1;
	}
	return days * 86400 + r->secs - off;
}

static int32_t footer_offset(const struct tz_footer *f, int64_t t)
{
	int64_t y;
	unsigned m, d;
	if (!f->has_dst) {
		return f->std_off;
	}
	tz_civil_from_days((t + f->std_off) / 86400 -
	                       ((t + f->std_off) % 86400 < 0 ? 1 : 0),
	                   &y, &m, &d);
	int64_t start = rule_utc(&f->start, y, f->std_off);
	int64_t end = rule_utc(&f->end, y, f->dst_off);
	bool dst =
	    start < end ? (t >= start && t < end) : !(t >= end && t < start);
	return dst ? f->dst_off : f->std_off;
}

/* --- TZif ---------------------------------------------------------------- */

void tz_free(struct tz *z)
{
	free(z->trans);
	free(z->idx);
	free(z->offs);
	z->trans = NULL;
	z->idx = NULL;
	z->offs = NULL;
	z->n_trans = z->n_types = 0;
}

struct tzif_counts {
	uint32_t isut, isstd, leap, time, type, chr;
};

static size_t block_len(const struct tzif_counts *c, size_t tsize)
{
	return (size_t)c->time * tsize + c->time + (size_t)c->type * 6 +
	       c->chr + (size_t)c->leap * (tsize + 4) + c->isstd + c->isut;
}

static int read_header(const uint8_t *p, size_t len, struct tzif_counts *c)
{
	if (len < 44 || memcmp(p, "TZif", 4) != 0) {
		return -1;
	}
	c->isut = be32(p + 20);
	c->isstd = be32(p + 24);
	c->leap = be32(p + 28);
	c->time = be32(p + 32);
	c->type = be32(p + 36);
	c->chr = be32(p + 40);
	if (c->type == 0 || c->type > 256 || c->time > 100000 ||
	    c->chr > 65536 || c->leap > 100000 ||
	    (c->isut != 0 && c->isut != c->type) ||
	    (c->isstd != 0 && c->isstd != c->type)) {
		return -1;
	}
	return 0;
}

int tz_parse(struct tz *z, const uint8_t *p, size_t len, char *err,
             size_t errlen)
{
	struct tzif_counts c;
	size_t tsize = 4, off = 44;
	uint8_t version;
	char footer[256];

	memset(z, 0, sizeof *z);
	if (read_header(p, len, &c) != 0) {
		return fail(err, errlen, "not a TZif file");
	}
	version = p[4];
	if (version != 0 && version >= '2') {
		size_t v1 = block_len(&c, 4);
		if (len - 44 < v1 ||
		    read_header(p + 44 + v1, len - 44 - v1, &c) != 0) {
			return fail(err, errlen, "TZif file truncated");
		}
		off = 44 + v1 + 44;
		tsize = 8;
	}
	if (len - off < block_len(&c, tsize)) {
		return fail(err, errlen, "TZif file truncated");
	}
	z->trans = calloc(c.time + 1, sizeof *z->trans);
	z->idx = calloc(c.time + 1, 1);
	z->offs = calloc(c.type, sizeof *z->offs);
	if (z->trans == NULL || z->idx == NULL || z->offs == NULL) {
		tz_free(z);
		return fail(err, errlen, "out of memory");
	}
	z->n_trans = c.time;
	z->n_types = c.type;
	for (uint32_t i = 0; i < c.time; i++) {
		const uint8_t *q = p + off + (size_t)i * tsize;
		z->trans[i] = tsize == 8 ? be64s(q) : (int32_t)be32(q);
		if (i > 0 && z->trans[i] <= z->trans[i - 1]) {
			tz_free(z);
			return fail(err, errlen, "TZif transitions not sorted");
		}
	}
	off += (size_t)c.time * tsize;
	for (uint32_t i = 0; i < c.time; i++) {
		z->idx[i] = p[off + i];
		if (z->idx[i] >= c.type) {
			tz_free(z);
			return fail(err, errlen,
			            "TZif type index out of range");
		}
	}
	off += c.time;
	for (uint32_t i = 0; i < c.type; i++) {
		int32_t o = (int32_t)be32(p + off + (size_t)i * 6);
		if (o < -89999 || o > 93599) {
			tz_free(z);
			return fail(err, errlen, "TZif offset out of range");
		}
		z->offs[i] = o;
	}
	off += block_len(&c, tsize) - (size_t)c.time * (tsize + 1);
	if (tsize == 8) {
		size_t n = 0;
		if (off >= len || p[off] != '\n') {
			tz_free(z);
			return fail(err, errlen, "TZif footer missing");
		}
		off++;
		while (off + n < len && p[off + n] != '\n' &&
		       n < sizeof footer - 1) {
			footer[n] = (char)p[off + n];
			if (footer[n] == '\0') {
				break;
			}
			n++;
		}
		if (off + n >= len || p[off + n] != '\n') {
			tz_free(z);
			return fail(err, errlen, "TZif footer malformed");
		}
		footer[n] = '\0';
		if (parse_footer(&z->footer, footer) != 0) {
			tz_free(z);
			return fail(err, errlen, "TZif footer rule malformed");
		}
	}
	return 0;
}

int tz_load(struct tz *z, const char *dir, const char *name, size_t len,
            char *err, size_t errlen)
{
	char path[512];
	uint8_t *buf = NULL;
	size_t n = 0;
	int fd, rv;

	memset(z, 0, sizeof *z);
	if (len == 3 && memcmp(name, "UTC", 3) == 0) {
		name = "Etc/UTC";
		len = 7;
	}
	if (!tz_name_valid(name, len)) {
		return fail(err, errlen, "invalid time zone name");
	}
	snprintf(path, sizeof path, "%s/%.*s",
	         dir != NULL ? dir : TZ_DEFAULT_DIR, (int)len, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return fail(err, errlen, "unknown time zone %.*s", (int)len,
		            name);
	}
	buf = malloc(TZ_FILE_MAX);
	if (buf == NULL) {
		close(fd);
		return fail(err, errlen, "out of memory");
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, TZ_FILE_MAX - n);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r < 0) {
			close(fd);
			free(buf);
			return fail(err, errlen,
			            "time zone %.*s unreadable: %s", (int)len,
			            name, strerror(errno));
		}
		if (r == 0 || (n += (size_t)r) == TZ_FILE_MAX) {
			break;
		}
	}
	close(fd);
	rv = tz_parse(z, buf, n, err, errlen);
	free(buf);
	if (rv == 0) {
		memcpy(z->name, name, len);
		z->name[len] = '\0';
	}
	return rv;
}

int32_t tz_offset_at(const struct tz *z, int64_t t)
{
	size_t lo, hi;
	if (z->n_trans == 0 || t >= z->trans[z->n_trans - 1]) {
		if (z->footer.present) {
			return footer_offset(&z->footer, t);
		}
		if (z->n_trans == 0) {
			return z->n_types > 0 ? z->offs[0] : 0;
		}
		return z->offs[z->idx[z->n_trans - 1]];
	}
	if (t < z->trans[0]) {
		return z->offs[0];
	}
	lo = 0;
	hi = z->n_trans - 1; /* trans[lo] <= t < trans[hi] */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->trans[mid] <= t) {
			lo = mid;
		} else {
			hi = mid;
		}
	}
	return z->offs[z->idx[lo]];
}

int tz_local_to_utc(const struct tz *z, int64_t local, int64_t out[2])
{
	/* Offsets in force around the wall time; transitions are never
	 * closer than 12 hours apart. */
	static const int64_t probe[] = {-86400, -43200, 0, 43200, 86400};
	int32_t offs[5];
	int n = 0, k = 0;
	for (size_t i = 0; i < 5; i++) {
		int32_t o = tz_offset_at(z, local + probe[i]);
		bool seen = false;
		for (int j = 0; j < n; j++) {
			seen |= offs[j] == o;
		}
		if (!seen) {
			offs[n++] = o;
		}
	}
	for (int i = 0; i < n && k < 2; i++) {
		int64_t u = local - offs[i];
		if (tz_offset_at(z, u) == offs[i]) {
			bool dup = false;
			for (int j = 0; j < k; j++) {
				dup |= out[j] == u;
			}
			if (!dup) {
				out[k++] = u;
			}
		}
	}
	if (k == 2 && out[0] > out[1]) {
		int64_t t = out[0];
		out[0] = out[1];
		out[1] = t;
	}
	return k;
}

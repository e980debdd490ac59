/* Cron expressions and their next occurrence (cron.h). */
#include "flow/cron.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define E_FIELDS "ERR flow schedule cron must have 5 fields"
#define E_FIELD "ERR flow schedule cron field is invalid"
#define E_STEP "ERR flow schedule cron step must be positive"
#define E_RANGE_VAL "ERR flow schedule cron value out of range"
#define E_RANGE "ERR flow schedule cron range is invalid"
#define E_MONTHS                                                               \
	"ERR flow schedule cron day cannot occur in the selected months"
#define E_NO_MATCH                                                             \
	"ERR flow schedule cron has no matching time in search window"
#define E_CALENDAR                                                             \
	"ERR flow schedule timestamp is outside supported calendar range"

static int fail(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0) {
		snprintf(err, errlen, "%s", msg);
	}
	return -1;
}

struct span {
	const char *p;
	size_t n;
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR",
                                          "MAY", "JUN", "JUL", "AUG",
                                          "SEP", "OCT", "NOV", "DEC"};
static const char *const weekday_names[] = {"SUN", "MON", "TUE", "WED",
                                            "THU", "FRI", "SAT"};

enum field_kind { F_MIN, F_HOUR, F_DAY, F_MONTH, F_WEEKDAY };

static bool span_is(struct span s, const char *lit)
{
	return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* A number or (month, weekday fields) a name. */
static int value(struct span s, enum field_kind k, int64_t *out)
{
	int64_t v = 0;
	if (s.n == 3 && (k == F_MONTH || k == F_WEEKDAY)) {
		const char *const *names =
		    k == F_MONTH ? month_names : weekday_names;
		size_t nn = k == F_MONTH ? 12 : 7;
		for (size_t i = 0; i < nn; i++) {
			if (toupper((unsigned char)s.p[0]) == names[i][0] &&
			    toupper((unsigned char)s.p[1]) == names[i][1] &&
			    toupper((unsigned char)s.p[2]) == names[i][2]) {
				*out =
				    k == F_MONTH ? (int64_t)i + 1 : (int64_t)i;
				return 0;
			}
		}
	}
	if (s.n == 0 || s.n > 18) {
		return -1;
	}
	for (size_t i = 0; i < s.n; i++) {
		if (s.p[i] < '0' || s.p[i] > '9') {
			return -1;
		}
		v = v * 10 + (s.p[i] - '0');
	}
	*out = v;
	return 0;
}

static int part(struct span s, enum field_kind k, int lo, int hi,
                uint64_t *bits, char *err, size_t errlen)
{
	struct span range = s, step = {NULL, 0};
	int64_t st = 1, first, last;
	const char *slash = memchr(s.p, '/', s.n);
	if (slash != NULL) {
		range.n = (size_t)(slash - s.p);
		step.p = slash + 1;
		step.n = s.n - range.n - 1;
		if (value(step, F_MIN, &st) != 0 || st <= 0) {
			return fail(err, errlen, E_STEP);
		}
	}
	if (span_is(range, "*") || span_is(range, "?")) {
		first = lo;
		last = hi;
	} else {
		const char *dash = memchr(range.p, '-', range.n);
		if (dash == NULL) {
			if (value(range, k, &first) != 0) {
				return fail(err, errlen, E_FIELD);
			}
			if (first < lo || first > hi) {
				return fail(err, errlen, E_RANGE_VAL);
			}
			last = first;
		} else {
			struct span a = {range.p, (size_t)(dash - range.p)};
			struct span b = {dash + 1, range.n - a.n - 1};
			if (value(a, k, &first) != 0 ||
			    value(b, k, &last) != 0) {
				return fail(err, errlen, E_FIELD);
			}
			if (first < lo || first > hi || last < lo ||
			    last > hi) {
				return fail(err, errlen, E_RANGE_VAL);
			}
			if (first > last) {
				return fail(err, errlen, E_RANGE);
			}
		}
	}
	for (int64_t v = first; v <= last; v += st) {
		*bits |= UINT64_C(1) << v;
		if (st > hi) {
			break;
		}
	}
	return 0;
}

static int field(struct span s, enum field_kind k, int lo, int hi,
                 uint64_t *bits, bool *any, char *err, size_t errlen)
{
	*bits = 0;
	*any = span_is(s, "*") || span_is(s, "?");
	size_t i = 0;
	while (i <= s.n) {
		size_t j = i;
		while (j < s.n && s.p[j] != ',') {
			j++;
		}
		struct span p = {s.p + i, j - i};
		if (p.n == 0) {
			return fail(err, errlen, E_FIELD);
		}
		if (part(p, k, lo, hi, bits, err, errlen) != 0) {
			return -1;
		}
		i = j + 1;
	}
	return 0;
}

int cron_parse(struct cron *c, const char *expr, size_t len, char *err,
               size_t errlen)
{
	struct span f[5];
	size_t n = 0, i = 0;
	uint64_t bits;
	bool any;

	memset(c, 0, sizeof *c);
	if (len > CRON_EXPR_MAX) {
		return fail(err, errlen, E_FIELD);
	}
	while (i < len) {
		while (i < len && isspace((unsigned char)expr[i])) {
			i++;
		}
		if (i == len) {
			break;
		}
		size_t j = i;
		while (j < len && !isspace((unsigned char)expr[j])) {
			j++;
		}
		if (n == 5) {
			return fail(err, errlen, E_FIELDS);
		}
		f[n].p = expr + i;
		f[n].n = j - i;
		n++;
		i = j;
	}
	if (n != 5) {
		return fail(err, errlen, E_FIELDS);
	}
	if (field(f[0], F_MIN, 0, 59, &bits, &any, err, errlen) != 0) {
		return -1;
	}
	c->minutes = bits;
	if (field(f[1], F_HOUR, 0, 23, &bits, &any, err, errlen) != 0) {
		return -1;
	}
	c->hours = (uint32_t)bits;
	if (field(f[2], F_DAY, 1, 31, &bits, &c->day_any, err, errlen) != 0) {
		return -1;
	}
	c->days = (uint32_t)bits;
	if (field(f[3], F_MONTH, 1, 12, &bits, &any, err, errlen) != 0) {
		return -1;
	}
	c->months = (uint16_t)bits;
	if (field(f[4], F_WEEKDAY, 0, 7, &bits, &c->weekday_any, err, errlen) !=
	    0) {
		return -1;
	}
	if (bits & (1u << 7)) {
		bits |= 1u;
	}
	c->weekdays = (uint8_t)(bits & 0x7f);
	if (!c->day_any && c->weekday_any) {
		/* Some selected month must have a selected day (Feb: 29). */
		bool possible = false;
		for (unsigned m = 1; m <= 12; m++) {
			unsigned dim = tz_days_in_month(2000, m);
			uint32_t upto =
			    (uint32_t)((UINT64_C(1) << (dim + 1)) - 1);
			if ((c->months & (1u << m)) && (c->days & upto)) {
				possible = true;
			}
		}
		if (!possible) {
			return fail(err, errlen, E_MONTHS);
		}
	}
	return 0;
}

static bool day_matches(const struct cron *c, unsigned day, unsigned wd)
{
	bool dm = (c->days >> day) & 1u;
	bool wm = (c->weekdays >> wd) & 1u;
	if (c->day_any && c->weekday_any) {
		return true;
	}
	if (c->day_any) {
		return wm;
	}
	if (c->weekday_any) {
		return dm;
	}
	return dm || wm;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

int cron_next(const struct cron *c, const struct tz *z, int64_t after_ms,
              int64_t *out_ms, char *err, size_t errlen)
{
	const int64_t max_ms = tz_days_from_civil(10000, 1, 1) * 86400000;
	int64_t after_s, start_day;

	if (after_ms < -1 || after_ms >= max_ms) {
		return fail(err, errlen, E_CALENDAR);
	}
	after_s = floor_div(after_ms, 1000);
	start_day = floor_div(after_s + tz_offset_at(z, after_s), 86400) - 1;
	for (int64_t day = start_day; day <= start_day + CRON_SEARCH_DAYS + 2;
	     day++) {
		int64_t y;
		unsigned m, d;
		int64_t best = -1;
		tz_civil_from_days(day, &y, &m, &d);
		if (y > 9999) {
			return fail(err, errlen, E_CALENDAR);
		}
		if (!((c->months >> m) & 1u) ||
		    !day_matches(c, d, tz_weekday(day))) {
			continue;
		}
		for (unsigned h = 0; h < 24; h++) {
			if (!((c->hours >> h) & 1u)) {
				continue;
			}
			for (unsigned mi = 0; mi < 60; mi++) {
				int64_t inst[2];
				int k;
				if (!((c->minutes >> mi) & 1u)) {
					continue;
				}
				k = tz_local_to_utc(
				    z, day * 86400 + h * 3600 + mi * 60, inst);
				for (int i = 0; i < k; i++) {
					int64_t ms = inst[i] * 1000;
					if (ms <= after_ms) {
						continue;
					}
					if (i == 0 && best < 0) {
						*out_ms = ms;
						return 0;
					}
					if (best < 0 || ms < best) {
						best = ms;
					}
					break;
				}
			}
		}
		if (best >= 0) {
			*out_ms = best;
			return 0;
		}
	}
	return fail(err, errlen, E_NO_MATCH);
}

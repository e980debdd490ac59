/* IANA time zones read from the system's tz database (TZif files, RFC
 * 8536, e.g. Debian's tzdata under /usr/share/zoneinfo), for cron
 * schedules. A loaded zone is an immutable value owned by its caller: no
 * process-wide state, no TZ environment, no locks, so any thread may load
 * and use zones.
 *
 * A zone answers its UTC offset at an instant: from the file's transition
 * table, and past its last transition from the footer's POSIX TZ rule
 * (e.g. "EST5EDT,M3.2.0,M11.1.0"). Local wall times map back to 0
 * instants (a spring-forward gap), 1, or 2 (a fall-back repeat). */
#ifndef LS_FLOW_TZ_H
#define LS_FLOW_TZ_H

#include <stddef.h>
#include <stdint.h>

#define TZ_NAME_MAX 128
#define TZ_DEFAULT_DIR "/usr/share/zoneinfo"

/* A POSIX TZ rule date: Jn (julian, no Feb 29), n (zero-based day), or
 * Mm.w.d; `secs` is the local time of day it takes effect. */
struct tz_rule_date {
	char kind; /* 'J', 'D' (zero-based day) or 'M' */
	int m, w, d, n;
	int32_t secs;
};

struct tz_footer {
	int present;
	int32_t std_off; /* seconds east of UTC */
	int has_dst;
	int32_t dst_off;
	struct tz_rule_date start, end;
};

struct tz {
	char name[TZ_NAME_MAX];
	size_t n_trans;
	int64_t *trans; /* UTC seconds, ascending */
	uint8_t *idx;   /* type of each transition */
	size_t n_types;
	int32_t *offs; /* UTC offset of each type */
	struct tz_footer footer;
};

/* Whether `name` is a well-formed zone name (letters, digits, "_+-",
 * "/"-separated parts, no "." parts, not absolute). */
int tz_name_valid(const char *name, size_t len);

/* Loads zone `name` (len bytes) from `dir` (NULL: TZ_DEFAULT_DIR). "UTC"
 * is "Etc/UTC". Returns 0, or -1 with a message in err (an unknown or
 * unreadable zone). */
int tz_load(struct tz *z, const char *dir, const char *name, size_t len,
            char *err, size_t errlen);
/* Parses TZif bytes (exposed for the fuzz target and tests). */
int tz_parse(struct tz *z, const uint8_t *p, size_t len, char *err,
             size_t errlen);
void tz_free(struct tz *z);

/* The UTC offset (seconds east) at UTC second `t`. */
int32_t tz_offset_at(const struct tz *z, int64_t t);

/* The UTC seconds whose local wall time is `local` (seconds since the
 * epoch as if local time were UTC): up to 2, ascending. Returns how many
 * (0 in a gap). */
int tz_local_to_utc(const struct tz *z, int64_t local, int64_t out[2]);

/* Civil calendar helpers (proleptic Gregorian). */
int64_t tz_days_from_civil(int64_t y, unsigned m, unsigned d);
void tz_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);
/* 0 = Sunday. */
unsigned tz_weekday(int64_t days);
unsigned tz_days_in_month(int64_t y, unsigned m);

#endif

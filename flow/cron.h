/* Five-field cron expressions (minute hour day-of-month month day-of-week)
 * and their next occurrence in a time zone (flow/tz.h).
 *
 * Fields take `*` or `?`, numbers, `a-b` ranges, `/n` steps (`*` + step
 * from the field's minimum, `a-b/n`; a single value with a step is that
 * value), comma lists, month names JAN..DEC and weekday names SUN..SAT
 * (weekday 7 is Sunday too). When both day-of-month and day-of-week are
 * restricted a day matches either (classic cron).
 *
 * An occurrence is every UTC minute whose local wall time in the zone
 * matches: a wall time that a spring-forward gap skips does not occur, and
 * one that a fall-back repeat shows twice occurs twice. The search looks
 * at most CRON_SEARCH_DAYS ahead (eight years: the longest gap between
 * two Feb 29ths, across a non-leap century), visiting only matching days.
 * Errors are the reference server's texts. */
#ifndef LS_FLOW_CRON_H
#define LS_FLOW_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/tz.h"

#define CRON_SEARCH_DAYS (8 * 366)
#define CRON_EXPR_MAX 256

struct cron {
	uint64_t minutes; /* bit n: minute n */
	uint32_t hours;
	uint32_t days;    /* bits 1..31 */
	uint16_t months;  /* bits 1..12 */
	uint8_t weekdays; /* bits 0..6 */
	bool day_any;
	bool weekday_any;
};

/* Parses `expr` (len bytes). 0, or -1 with the error text in err. */
int cron_parse(struct cron *c, const char *expr, size_t len, char *err,
               size_t errlen);

/* The first occurrence strictly after `after_ms` (Unix ms) in zone `z`
 * into *out_ms. 0, or -1 with the error text (no match in the search
 * window, or past year 9999). */
int cron_next(const struct cron *c, const struct tz *z, int64_t after_ms,
              int64_t *out_ms, char *err, size_t errlen);

#endif

/* A workload's history while it is being recorded: events in the `lines`
 * format of jepsen/README.md ("TIME PROCESS TYPE F KEY [VALUE...]"), kept
 * in memory in the order they happened and written to a file at the end.
 *
 * TIME is CLOCK_MONOTONIC nanoseconds since the run's origin (the
 * nemesis timeline's time base), never decreasing from one event to the
 * next. Lines stay editable until written: the stream workload fills in
 * the offsets of acknowledged appends only once reads have seen them
 * (Felix acks carry no offset).
 *
 * One thread records (the workload's loop thread). The history owns every
 * line. */
#ifndef LS_JEPSEN_WORKLOAD_HIST_H
#define LS_JEPSEN_WORKLOAD_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wl_type { WL_INVOKE, WL_OK, WL_FAIL, WL_INFO, WL_N_TYPES };

struct wl_hist {
	char **lines; /* owned, each malloc'd; NULL once a line is dropped */
	size_t n;
	size_t cap;
	int64_t t0_ns;   /* CLOCK_MONOTONIC origin */
	int64_t last_ns; /* time of the last event */
	bool oom;        /* an event could not be stored */
	bool frozen;     /* written: later events are dropped */
	uint64_t counts[WL_N_TYPES];
};

void wl_hist_init(struct wl_hist *h, int64_t t0_ns);
void wl_hist_free(struct wl_hist *h);

/* Nanoseconds since the origin, never less than the last event's. */
int64_t wl_hist_now(struct wl_hist *h);

/* Records an event now; `vals` (may be NULL or "") are the value tokens,
 * space-separated. Returns the line's index (for wl_hist_replace). */
size_t wl_hist_event(struct wl_hist *h, unsigned process, enum wl_type type,
                     const char *f, const char *key, const char *vals);

/* Like wl_hist_event with printf-formatted values. */
size_t wl_hist_eventf(struct wl_hist *h, unsigned process, enum wl_type type,
                      const char *f, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A comment line ("# ..."). */
void wl_hist_comment(struct wl_hist *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Replaces line i (takes ownership of `line`, a malloc'd string without
 * the newline). */
void wl_hist_replace(struct wl_hist *h, size_t i, char *line);

/* Writes every line to `path` (created or truncated). 0 or -errno. */
int wl_hist_write(const struct wl_hist *h, const char *path);

const char *wl_type_name(enum wl_type t);

/* Whether `s` can stand as one value token as it is (non-empty, at most
 * 64 KiB, no whitespace, no '#' first, not "nil" unless meant). */
bool wl_token_ok(const char *s, size_t len);

/* Bytes as a history token: themselves when they are a plain token (and
 * not "nil"), else x<hex>. */
void wl_token_of(const uint8_t *p, size_t len, char *out, size_t cap);

#endif

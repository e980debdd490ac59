/* Structured, levelled log lines (text or JSON) to stderr.
 *
 * A `struct log` is owned by the node and handed to every module that logs;
 * there is no global logger. Lines are written whole with one write(2) so
 * concurrent threads never interleave inside a line. Secrets must never be
 * passed as fields. */
#ifndef LS_NODE_LOG_H
#define LS_NODE_LOG_H

#include <stdarg.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };

struct log {
	enum log_level level;
	enum log_format format;
	int fd; /* where lines go; 2 by default */
};

void log_init(struct log *log, enum log_level level, enum log_format format);

/* Parses "debug", "info", "warn", "error"; returns 0 or -1. */
int log_level_parse(const char *s, enum log_level *out);
int log_format_parse(const char *s, enum log_format *out);

/* Emits one line: `module` names the subsystem, `fmt` the message. Extra
 * structured fields can be given as "key=value" pairs at the end of the
 * message in text mode; JSON mode escapes the whole message. */
void log_emit(const struct log *log, enum log_level level, const char *module,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void log_vemit(const struct log *log, enum log_level level, const char *module,
               const char *fmt, va_list ap);

#define log_debug(l, m, ...) log_emit((l), LOG_DEBUG, (m), __VA_ARGS__)
#define log_info(l, m, ...) log_emit((l), LOG_INFO, (m), __VA_ARGS__)
#define log_warn(l, m, ...) log_emit((l), LOG_WARN, (m), __VA_ARGS__)
#define log_error(l, m, ...) log_emit((l), LOG_ERROR, (m), __VA_ARGS__)

#endif

/* Structured log lines; see log.h. */
#include "node/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *level_names[] = {"debug", "info", "warn", "error"};

void log_init(struct log *log, enum log_level level, enum log_format format)
{
	log->level = level;
	log->format = format;
	log->fd = 2;
}

int log_level_parse(const char *s, enum log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcmp(s, "warning") == 0) {
		*out = LOG_WARN;
		return 0;
	}
	return -1;
}

int log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0) {
		*out = LOG_FORMAT_TEXT;
	} else if (strcmp(s, "json") == 0) {
		*out = LOG_FORMAT_JSON;
	} else {
		return -1;
	}
	return 0;
}

/* Appends `s` JSON-escaped to buf at *n, never past cap. */
static void json_escape(char *buf, size_t cap, size_t *n, const char *s)
{
	for (; *s && *n + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[(*n)++] = '\\';
			buf[(*n)++] = (char)c;
		} else if (c < 0x20) {
			*n +=
			    (size_t)snprintf(buf + *n, cap - *n, "\\u%04x", c);
		} else {
			buf[(*n)++] = (char)c;
		}
	}
}

void log_vemit(const struct log *log, enum log_level level, const char *module,
               const char *fmt, va_list ap)
{
	char msg[2048];
	char line[4608];
	struct timespec ts;
	struct tm tm;
	char when[96];
	size_t n = 0;

	if (level < log->level) {
		return;
	}
	vsnprintf(msg, sizeof msg, fmt, ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);

	if (log->format == LOG_FORMAT_JSON) {
		n = (size_t)snprintf(
		    line, sizeof line,
		    "{\"ts\":\"%s\",\"level\":\"%s\",\"module\":\"", when,
		    level_names[level]);
		json_escape(line, sizeof line, &n, module);
		memcpy(line + n, "\",\"msg\":\"", 9);
		n += 9;
		json_escape(line, sizeof line, &n, msg);
		memcpy(line + n, "\"}\n", 3);
		n += 3;
	} else {
		int w = snprintf(line, sizeof line, "%s %-5s %s: %s\n", when,
		                 level_names[level], module, msg);
		n = w < 0 ? 0 : (size_t)w;
		if (n >= sizeof line) {
			n = sizeof line - 1;
			line[n - 1] = '\n';
		}
	}
	/* One write per line: lines from several threads never interleave. */
	ssize_t rc = write(log->fd, line, n);
	(void)rc;
}

void log_emit(const struct log *log, enum log_level level, const char *module,
              const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vemit(log, level, module, fmt, ap);
	va_end(ap);
}

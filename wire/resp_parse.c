/* RESP request parser; see resp_parse.h. The rules (what ends a line, how
 * numbers are read, the error texts) follow Redis's own reader so that a
 * client sees the same answers from both. */
#include "wire/resp_parse.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Redis's string2ll: an optional '-', digits without leading zeros (but
 * "0"), nothing else, within int64. */
static bool str_to_ll(const uint8_t *p, size_t n, int64_t *out)
{
	bool neg = false;
	uint64_t v = 0;
	size_t i = 0;

	if (n == 0 || n > 20) {
		return false;
	}
	if (n == 1 && p[0] == '0') {
		*out = 0;
		return true;
	}
	if (p[0] == '-') {
		neg = true;
		i = 1;
		if (n == 1) {
			return false;
		}
	}
	if (p[i] < '1' || p[i] > '9') {
		return false;
	}
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9') {
			return false;
		}
		if (v > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10) {
			return false;
		}
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1) {
			return false;
		}
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	} else {
		if (v > (uint64_t)INT64_MAX) {
			return false;
		}
		*out = (int64_t)v;
	}
	return true;
}

static bool is_space(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

static int hex_val(uint8_t c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

/* One line split as Redis's sdssplitargs splits it (a NUL ends the line as
 * it ends Redis's C string). Unquoted bytes go to the scratch space, which
 * is at least as long as the line. Returns 0, 1 (argv too small, count in
 * *need), or -1 (unbalanced quotes). */
static int split_line(const uint8_t *p, size_t n, struct resp_cmd *cmd,
                      uint32_t *need)
{
	size_t i = 0;
	size_t w = 0;
	uint32_t argc = 0;

	for (;;) {
		while (i < n && p[i] != 0 && is_space(p[i])) {
			i++;
		}
		if (i >= n || p[i] == 0) {
			break;
		}
		bool inq = false, insq = false, done = false;
		size_t start = w;
		while (!done) {
			uint8_t c = i < n ? p[i] : 0;
			uint8_t c1 = i + 1 < n ? p[i + 1] : 0;
			if (inq) {
				if (c == '\\' && c1 == 'x' && i + 3 < n &&
				    hex_val(p[i + 2]) >= 0 &&
				    hex_val(p[i + 3]) >= 0) {
					cmd->scratch[w++] =
					    (uint8_t)(hex_val(p[i + 2]) * 16 +
					              hex_val(p[i + 3]));
					i += 3;
				} else if (c == '\\' && c1 != 0) {
					i++;
					switch (c1) {
					case 'n':
						c1 = '\n';
						break;
					case 'r':
						c1 = '\r';
						break;
					case 't':
						c1 = '\t';
						break;
					case 'b':
						c1 = '\b';
						break;
					case 'a':
						c1 = '\a';
						break;
					default:
						break;
					}
					cmd->scratch[w++] = c1;
				} else if (c == '"') {
					/* The closing quote must be followed
					 * by a space or nothing at all. */
					if (c1 != 0 && !is_space(c1)) {
						return -1;
					}
					done = true;
				} else if (c == 0) {
					return -1;
				} else {
					cmd->scratch[w++] = c;
				}
			} else if (insq) {
				if (c == '\\' && c1 == '\'') {
					i++;
					cmd->scratch[w++] = '\'';
				} else if (c == '\'') {
					if (c1 != 0 && !is_space(c1)) {
						return -1;
					}
					done = true;
				} else if (c == 0) {
					return -1;
				} else {
					cmd->scratch[w++] = c;
				}
			} else {
				switch (c) {
				case ' ':
				case '\n':
				case '\r':
				case '\t':
				case 0:
					done = true;
					break;
				case '"':
					inq = true;
					break;
				case '\'':
					insq = true;
					break;
				default:
					cmd->scratch[w++] = c;
					break;
				}
			}
			if (i < n && p[i] != 0) {
				i++;
			}
		}
		if (argc < cmd->argv_cap) {
			cmd->argv[argc].p = cmd->scratch + start;
			cmd->argv[argc].len = w - start;
		}
		argc++;
	}
	if (argc > cmd->argv_cap) {
		*need = argc;
		return 1;
	}
	cmd->argc = argc;
	return 0;
}

static int fail(char *err, size_t errlen, const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	return RESP_PARSE_ERR;
}

static int parse_inline(const uint8_t *buf, size_t len,
                        const struct resp_limits *lim, struct resp_cmd *cmd,
                        char *err, size_t errlen)
{
	const uint8_t *nl = memchr(buf, '\n', len);
	size_t line;
	uint32_t need = 0;
	int rc;

	if (nl == NULL) {
		if (len > lim->max_inline) {
			return fail(
			    err, errlen,
			    "ERR Protocol error: too big inline request");
		}
		return RESP_PARSE_MORE;
	}
	line = (size_t)(nl - buf);
	if (line > lim->max_inline || line > cmd->scratch_cap) {
		return fail(err, errlen,
		            "ERR Protocol error: too big inline request");
	}
	cmd->consumed = line + 1;
	if (line > 0 && buf[line - 1] == '\r') {
		line--;
	}
	rc = split_line(buf, line, cmd, &need);
	if (rc < 0) {
		return fail(err, errlen,
		            "ERR Protocol error: unbalanced quotes in request");
	}
	if (rc > 0) {
		if (need > lim->max_args) {
			return fail(err, errlen,
			            "ERR Protocol error: invalid multibulk "
			            "length");
		}
		cmd->need_args = need;
		return RESP_PARSE_GROW;
	}
	cmd->inline_cmd = 1;
	return RESP_PARSE_OK;
}

/* The line at buf[pos ..] up to "\r\n": its end in *cr. 0, 1 (more), or
 * -1 (too long). */
static int find_line(const uint8_t *buf, size_t len, size_t pos, size_t max,
                     size_t *cr)
{
	const uint8_t *r = memchr(buf + pos, '\r', len - pos);
	if (r == NULL) {
		return len - pos > max ? -1 : 1;
	}
	/* The buffer must hold the '\n' too. */
	if ((size_t)(r - buf) + 1 >= len) {
		return 1;
	}
	*cr = (size_t)(r - buf);
	return 0;
}

static int parse_multibulk(const uint8_t *buf, size_t len,
                           const struct resp_limits *lim, struct resp_cmd *cmd,
                           char *err, size_t errlen)
{
	size_t pos = 0, cr;
	int64_t n;
	int rc;

	rc = find_line(buf, len, pos, lim->max_inline, &cr);
	if (rc < 0) {
		return fail(err, errlen,
		            "ERR Protocol error: too big mbulk count string");
	}
	if (rc > 0) {
		return RESP_PARSE_MORE;
	}
	if (!str_to_ll(buf + 1, cr - 1, &n) || n > INT32_MAX ||
	    (n > 0 && (uint64_t)n > lim->max_args)) {
		return fail(err, errlen,
		            "ERR Protocol error: invalid multibulk length");
	}
	pos = cr + 2;
	if (n <= 0) {
		cmd->argc = 0;
		cmd->consumed = pos;
		return RESP_PARSE_OK;
	}
	if ((uint64_t)n > cmd->argv_cap) {
		cmd->need_args = (uint32_t)n;
		return RESP_PARSE_GROW;
	}
	for (uint32_t i = 0; i < (uint32_t)n; i++) {
		int64_t blen;
		if (pos >= len) {
			return RESP_PARSE_MORE;
		}
		rc = find_line(buf, len, pos, lim->max_inline, &cr);
		if (rc < 0) {
			return fail(err, errlen,
			            "ERR Protocol error: too big bulk count "
			            "string");
		}
		if (rc > 0) {
			return RESP_PARSE_MORE;
		}
		if (buf[pos] != '$') {
			snprintf(err, errlen,
			         "ERR Protocol error: expected '$', got '%c'",
			         buf[pos]);
			return RESP_PARSE_ERR;
		}
		if (!str_to_ll(buf + pos + 1, cr - pos - 1, &blen) ||
		    blen < 0 || (uint64_t)blen > lim->max_bulk) {
			return fail(err, errlen,
			            "ERR Protocol error: invalid bulk length");
		}
		pos = cr + 2;
		if (len - pos < (uint64_t)blen + 2) {
			return RESP_PARSE_MORE;
		}
		cmd->argv[i].p = buf + pos;
		cmd->argv[i].len = (size_t)blen;
		/* As Redis: the two bytes after the data are skipped. */
		pos += (size_t)blen + 2;
	}
	cmd->argc = (uint32_t)n;
	cmd->consumed = pos;
	return RESP_PARSE_OK;
}

int resp_parse(const uint8_t *buf, size_t len, const struct resp_limits *lim,
               struct resp_cmd *cmd, char *err, size_t errlen)
{
	cmd->argc = 0;
	cmd->need_args = 0;
	cmd->consumed = 0;
	cmd->inline_cmd = 0;
	if (len == 0) {
		return RESP_PARSE_MORE;
	}
	if (buf[0] == '*') {
		return parse_multibulk(buf, len, lim, cmd, err, errlen);
	}
	return parse_inline(buf, len, lim, cmd, err, errlen);
}

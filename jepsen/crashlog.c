/* Crash reports in node logs; see crashlog.h. */
#include "jepsen/crashlog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jepsen/hosts.h"

#define PREFIX "lodestone: crash: "
#define MAX_LOG (64u << 20) /* read at most the log's last 64 MiB */
/* The line jepsen/hosts.c writes to a node's log before each start. */
#define START_MARK "=== lsj: start "

static void copy_name(char *dst, const char *src, size_t len)
{
	if (len >= CRASHLOG_NAME_LEN) {
		len = CRASHLOG_NAME_LEN - 1;
	}
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* One line of a report (without the prefix and the newline, NUL-ended). */
static void parse_line(struct crashlog_report *r, const char *l)
{
	char name[CRASHLOG_NAME_LEN];
	unsigned long long a, b;
	unsigned idx;
	int sig, n = 0;
	long pid;

	if (sscanf(l, "signal %d (%15[^)]) addr %llx pid %ld", &sig, r->signame,
	           &a, &pid) == 4) {
		r->signal = sig;
		r->fault_addr = a;
		r->pid = pid;
	} else if (sscanf(l, "object %llx %n", &a, &n) == 1 && n > 0) {
		r->base = a;
		copy_name(r->binary, l + n, strlen(l + n));
	} else if (sscanf(l, "frame %u %llx %n", &idx, &a, &n) == 2 && n > 0) {
		struct crashlog_frame *f;
		const char *obj = l + n, *plus = strrchr(obj, '+');
		if (r->n_frames == CRASHLOG_MAX_FRAMES) {
			return;
		}
		f = &r->frames[r->n_frames++];
		memset(f, 0, sizeof *f);
		f->addr = a;
		if (plus != NULL && sscanf(plus + 1, "%llx", &b) == 1) {
			copy_name(name, obj, (size_t)(plus - obj));
			memcpy(f->object, name, sizeof name);
			f->offset = b;
		}
	} else if (strcmp(l, "end") == 0) {
		r->complete = true;
	}
}

size_t crashlog_parse(const char *text, size_t len, struct crashlog_report *out,
                      size_t max)
{
	const char *p = text, *end = text + len;
	size_t n = 0;
	struct crashlog_report *cur = NULL;
	char line[1024];

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		const size_t plen = sizeof PREFIX - 1;
		if (l > plen && l - plen < sizeof line &&
		    memcmp(p, PREFIX, plen) == 0) {
			memcpy(line, p + plen, l - plen);
			line[l - plen] = '\0';
			if (strncmp(line, "signal ", 7) == 0) {
				/* A new report; past max, the last slot
				 * takes the newest. */
				cur = n < max   ? &out[n]
				      : max > 0 ? &out[max - 1]
				                : NULL;
				n++;
				if (cur != NULL) {
					memset(cur, 0, sizeof *cur);
				}
			}
			if (cur != NULL) {
				parse_line(cur, line);
			}
		}
		p = nl != NULL ? nl + 1 : end;
	}
	return n;
}

/* Names the frames of one object with addr2line: names[i] for each frame
 * i whose object is `obj`. */
static void symbolize_object(const struct crashlog_report *r, unsigned n,
                             const char *obj, char names[][160])
{
	char input[CRASHLOG_MAX_FRAMES * 24];
	char out[16384];
	size_t il = 0;
	unsigned idx[CRASHLOG_MAX_FRAMES], k = 0;
	int st = 0;
	const char *argv[] = {"addr2line", "-f", "-e", obj, NULL};

	for (unsigned i = 0; i < n; i++) {
		const struct crashlog_frame *f = &r->frames[i];
		if (strcmp(f->object, obj) != 0) {
			continue;
		}
		/* A return address: the call is the instruction before. */
		uint64_t off =
		    i > 0 && f->offset > 0 ? f->offset - 1 : f->offset;
		il += (size_t)snprintf(input + il, sizeof input - il,
		                       "0x%" PRIx64 "\n", off);
		idx[k++] = i;
	}
	if (k == 0 || access(obj, R_OK) != 0 ||
	    hosts_run(NULL, argv, NULL, input, out, sizeof out, 10000, &st) !=
	        0 ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		return;
	}
	/* Two lines per address: the function, then file:line. */
	char *save = NULL, *fn, *loc;
	for (unsigned j = 0; j < k; j++) {
		fn = strtok_r(j == 0 ? out : NULL, "\n", &save);
		loc = strtok_r(NULL, "\n", &save);
		if (fn == NULL || loc == NULL) {
			break;
		}
		if (strcmp(fn, "??") == 0) {
			continue;
		}
		const char *slash = strrchr(loc, '/');
		const char *file = slash != NULL ? slash + 1 : loc;
		if (strncmp(file, "??", 2) == 0) {
			/* No debug information: the name is only the nearest
			 * exported symbol before the address, which a static
			 * function does not have. */
			const char *o = strrchr(obj, '/');
			snprintf(names[idx[j]], 160, "%s+0x%" PRIx64 " (%s?)",
			         o != NULL ? o + 1 : obj,
			         r->frames[idx[j]].offset, fn);
		} else {
			snprintf(names[idx[j]], 160, "%s (%s)", fn, file);
		}
	}
}

void crashlog_describe(const struct crashlog_report *r, unsigned max_frames,
                       char *out, size_t cap)
{
	char names[CRASHLOG_MAX_FRAMES][160];
	unsigned n = r->n_frames < max_frames ? r->n_frames : max_frames;
	size_t l;

	memset(names, 0, sizeof names);
	for (unsigned i = 0; i < n; i++) {
		bool seen = false;
		if (r->frames[i].object[0] == '\0') {
			continue;
		}
		for (unsigned j = 0; j < i; j++) {
			seen |= strcmp(r->frames[j].object,
			               r->frames[i].object) == 0;
		}
		if (!seen) {
			symbolize_object(r, n, r->frames[i].object, names);
		}
	}
	l = (size_t)snprintf(out, cap, "signal %d (%s) at 0x%" PRIx64 ":",
	                     r->signal, r->signame, r->fault_addr);
	for (unsigned i = 0; i < n && l < cap; i++) {
		const struct crashlog_frame *f = &r->frames[i];
		const char *sep = i == 0 ? " " : " < ";
		if (names[i][0] != '\0') {
			l += (size_t)snprintf(out + l, cap - l, "%s%s", sep,
			                      names[i]);
		} else if (f->object[0] != '\0') {
			const char *slash = strrchr(f->object, '/');
			l += (size_t)snprintf(
			    out + l, cap - l, "%s%s+0x%" PRIx64, sep,
			    slash != NULL ? slash + 1 : f->object, f->offset);
		} else {
			l += (size_t)snprintf(out + l, cap - l, "%s0x%" PRIx64,
			                      sep, f->addr);
		}
	}
	if (n == 0 && l < cap) {
		snprintf(out + l, cap - l, " (no frames)");
	}
}

/* A sanitizer build reports on its own: its first report's headline and
 * top frames ("    #0 0x... in fn file.c:12"), symbolized already. */
static bool sanitizer_report(const char *text, size_t len, unsigned max_frames,
                             char *out, size_t cap)
{
	static const char *const marks[] = {"ERROR: AddressSanitizer",
	                                    "ERROR: LeakSanitizer",
	                                    ": runtime error: "};
	const char *hit = NULL, *end = text + len, *p;
	size_t l = 0;
	unsigned n = 0;

	for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
		const char *m = memmem(text, len, marks[i], strlen(marks[i]));
		if (m != NULL && (hit == NULL || m < hit)) {
			hit = m;
		}
	}
	if (hit == NULL || cap == 0) {
		return false;
	}
	while (hit > text && hit[-1] != '\n') {
		hit--;
	}
	p = memchr(hit, '\n', (size_t)(end - hit));
	l = (size_t)snprintf(out, cap, "%.*s",
	                     (int)((p != NULL ? p : end) - hit), hit);
	while (p != NULL && p < end && n < max_frames && l < cap) {
		const char *line = p + 1, *eol, *in;
		p = memchr(line, '\n', (size_t)(end - line));
		eol = p != NULL ? p : end;
		while (line < eol && *line == ' ') {
			line++;
		}
		if (line >= eol || *line != '#') {
			if (n > 0) {
				break; /* the end of the first stack */
			}
			continue;
		}
		in = memmem(line, (size_t)(eol - line), " in ", 4);
		if (in == NULL) {
			continue;
		}
		in += 4;
		l += (size_t)snprintf(out + l, cap - l, "%s%.*s",
		                      n == 0 ? ": " : " < ", (int)(eol - in),
		                      in);
		n++;
	}
	return true;
}

/* The last MAX_LOG bytes of the file at path, NUL-terminated, in *out
 * (malloc'd) and *len; -errno. */
static int read_tail(const char *path, char **out, size_t *len_out)
{
	struct stat sb;
	size_t len, got = 0;
	off_t from = 0;
	char *text;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	if (fstat(fd, &sb) != 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	len = (size_t)sb.st_size;
	if (len > MAX_LOG) {
		from = (off_t)(len - MAX_LOG);
		len = MAX_LOG;
	}
	text = malloc(len + 1);
	if (text == NULL) {
		close(fd);
		return -ENOMEM;
	}
	while (got < len) {
		ssize_t k = pread(fd, text + got, len - got, from + (off_t)got);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			break;
		}
		got += (size_t)k;
	}
	close(fd);
	text[got] = '\0';
	*out = text;
	*len_out = got;
	return 0;
}

int crashlog_describe_file(const char *path, unsigned max_frames, char *out,
                           size_t cap)
{
	struct crashlog_report *r;
	char *text = NULL;
	size_t got = 0;
	int rc;

	if (cap > 0) {
		out[0] = '\0';
	}
	rc = read_tail(path, &text, &got);
	if (rc != 0) {
		return rc;
	}
	r = malloc(sizeof *r);
	if (r == NULL) {
		free(text);
		return -ENOMEM;
	}
	if (crashlog_parse(text, got, r, 1) > 0) {
		crashlog_describe(r, max_frames, out, cap);
		rc = 1;
	} else if (sanitizer_report(text, got, max_frames, out, cap)) {
		rc = 1;
	}
	free(r);
	free(text);
	return rc;
}

int crashlog_removed_exit_text(const char *text, size_t len, unsigned node_id)
{
	char said[96];
	const char *start = text, *end = text + len, *p;
	struct crashlog_report *r;
	char why[8];

	/* Only the node's last run counts: from the harness's last start
	 * mark on. */
	for (p = text; (p = memmem(p, (size_t)(end - p), START_MARK,
	                           strlen(START_MARK))) != NULL;
	     p += strlen(START_MARK)) {
		start = p;
	}
	snprintf(said, sizeof said,
	         "node %u was removed from the cluster: stopping", node_id);
	if (memmem(start, (size_t)(end - start), said, strlen(said)) == NULL) {
		return 0;
	}
	r = malloc(sizeof *r);
	if (r == NULL) {
		return -ENOMEM;
	}
	int crashed =
	    crashlog_parse(start, (size_t)(end - start), r, 1) > 0 ||
	    sanitizer_report(start, (size_t)(end - start), 1, why, sizeof why);
	free(r);
	return crashed ? 0 : 1;
}

int crashlog_removed_exit(const char *path, unsigned node_id)
{
	char *text = NULL;
	size_t len = 0;
	int rc = read_tail(path, &text, &len);
	if (rc != 0) {
		return rc;
	}
	rc = crashlog_removed_exit_text(text, len, node_id);
	free(text);
	return rc;
}

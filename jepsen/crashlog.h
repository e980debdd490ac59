/* A node's death explained: the crash reports node/crash.c writes to a
 * node's log (signal, fault address, frames as object + offset) parsed
 * and symbolized with addr2line, for the run's summary. */
#ifndef LS_JEPSEN_CRASHLOG_H
#define LS_JEPSEN_CRASHLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRASHLOG_MAX_FRAMES 32
#define CRASHLOG_NAME_LEN 256

struct crashlog_frame {
	uint64_t addr;                  /* runtime address */
	uint64_t offset;                /* from its object's load base */
	char object[CRASHLOG_NAME_LEN]; /* empty: unknown object */
};

struct crashlog_report {
	int signal;
	char signame[16];
	uint64_t fault_addr;
	long pid;
	uint64_t base; /* load base of the executable */
	char binary[CRASHLOG_NAME_LEN];
	unsigned n_frames;
	struct crashlog_frame frames[CRASHLOG_MAX_FRAMES];
	bool complete; /* its "end" line was seen */
};

/* Parses the crash reports in a log's text (len bytes, need not be
 * NUL-terminated), oldest first; fills up to max of them and returns how
 * many there are. Lines that are not part of a report are skipped. */
size_t crashlog_parse(const char *text, size_t len, struct crashlog_report *out,
                      size_t max);

/* Symbolizes up to max_frames frames of r with `addr2line -f -e OBJECT`
 * (one run per object; frames after the first are return addresses, so
 * the address before is asked) into out, NUL-terminated:
 *   "signal 11 (SIGSEGV) at 0x10: fn (file.c:12) < caller (file.c:40) ..."
 * A frame addr2line cannot name is shown as OBJECT+0xOFFSET. */
void crashlog_describe(const struct crashlog_report *r, unsigned max_frames,
                       char *out, size_t cap);

/* Reads the log at path and describes its last report (crashlog_describe)
 * into out, or else the first AddressSanitizer / UndefinedBehaviorSanitizer
 * report's headline and top frames. Returns 1 when there was one, 0 when
 * there was none (out is then empty), -errno when the log could not be
 * read. */
int crashlog_describe_file(const char *path, unsigned max_frames, char *out,
                           size_t cap);

/* Whether a node's exit was its clean leave of the cluster: its last run
 * (the text after the harness's last "=== lsj: start" line) logged
 * "node N was removed from the cluster: stopping" and holds no crash or
 * sanitizer report. 1 yes, 0 no, -errno when the log cannot be read. The
 * caller also wants exit status 0. */
int crashlog_removed_exit(const char *path, unsigned node_id);
/* The same on a log's text (len bytes). */
int crashlog_removed_exit_text(const char *text, size_t len, unsigned node_id);

#endif

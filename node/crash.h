/* Fatal-signal reports: a plain build writes, on SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL or SIGABRT, the signal and the raw frame addresses to stderr
 * (the node's log), then dies of the same signal (so the exit status and
 * a core dump are what they would have been without the handler).
 *
 * The report, one write(2) a line, every number in hex:
 *
 *   lodestone: crash: signal 11 (SIGSEGV) addr 0x10 pid 4242
 *   lodestone: crash: object 0x55d4c0000000 /path/to/lodestone
 *   lodestone: crash: pc 0x55d4c0012345
 *   lodestone: crash: frame 0 0x55d4c0012345 /path/to/lodestone+0x12345
 *   lodestone: crash: frame 1 0x7f0012345678 /lib/.../libraft.so.0+0x9678
 *   ... backtrace_symbols_fd's lines ...
 *   lodestone: crash: end
 *
 * `object` is the load base of the executable (PIE); each frame names the
 * object it falls in and its offset from that object's base, which is
 * what `addr2line -f -e OBJECT OFFSET` takes (for frames after the first,
 * a return address: subtract 1 for the call's line). The frames start at
 * the interrupted instruction (the handler's own frames are left out when
 * it is found). The objects are recorded at install time: nothing in the
 * handler allocates or locks except backtrace_symbols_fd, which glibc
 * documents as async-signal-safe.
 *
 * Sanitizer builds install nothing: ASan and UBSan report on their own. */
#ifndef LS_NODE_CRASH_H
#define LS_NODE_CRASH_H

#include <stdbool.h>

/* Installs the handlers (once; later calls do nothing). Core dumps stay
 * as RLIMIT_CORE and the core pattern say. Returns false, doing nothing,
 * in a sanitizer build. */
bool crash_install(void);

/* Whether this is a sanitizer build (no handler). */
bool crash_sanitized(void);

#endif

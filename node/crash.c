/* Fatal-signal reports; see crash.h. */
#include "node/crash.h"

#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(LS_SANITIZERS) || defined(__SANITIZE_ADDRESS__)
#define CRASH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) ||                                        \
    __has_feature(undefined_behavior_sanitizer)
#define CRASH_SANITIZED 1
#endif
#endif
#ifndef CRASH_SANITIZED
#define CRASH_SANITIZED 0
#endif

#define CRASH_MAX_OBJECTS 64
#define CRASH_NAME_MAX 256
#define CRASH_MAX_FRAMES 64
#define CRASH_ALTSTACK (64 * 1024)

struct crash_object {
	uintptr_t base;  /* load bias: file address + base = runtime address */
	uintptr_t start; /* lowest and highest mapped address of PT_LOADs */
	uintptr_t end;
	char name[CRASH_NAME_MAX];
};

static struct crash_object objects[CRASH_MAX_OBJECTS];
static unsigned n_objects;
static bool installed;
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

bool crash_sanitized(void)
{
	return CRASH_SANITIZED != 0;
}

/* ---- async-signal-safe output ---- */

struct line {
	char b[512];
	size_t n;
};

static void put_str(struct line *l, const char *s)
{
	while (*s != '\0' && l->n < sizeof l->b - 1) {
		l->b[l->n++] = *s++;
	}
}

static void put_hex(struct line *l, uintptr_t v)
{
	char tmp[2 + 2 * sizeof v];
	size_t k = 0;
	put_str(l, "0x");
	do {
		tmp[k++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v != 0);
	while (k > 0 && l->n < sizeof l->b - 1) {
		l->b[l->n++] = tmp[--k];
	}
}

static void put_dec(struct line *l, unsigned long v)
{
	char tmp[24];
	size_t k = 0;
	do {
		tmp[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (k > 0 && l->n < sizeof l->b - 1) {
		l->b[l->n++] = tmp[--k];
	}
}

static void emit(struct line *l)
{
	size_t off = 0;
	l->b[l->n++] = '\n';
	while (off < l->n) {
		ssize_t w = write(STDERR_FILENO, l->b + off, l->n - off);
		if (w <= 0) {
			break;
		}
		off += (size_t)w;
	}
	l->n = 0;
}

static void begin(struct line *l)
{
	l->n = 0;
	put_str(l, "lodestone: crash: ");
}

static const char *signal_name(int sig)
{
	switch (sig) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGBUS:
		return "SIGBUS";
	case SIGFPE:
		return "SIGFPE";
	case SIGILL:
		return "SIGILL";
	case SIGABRT:
		return "SIGABRT";
	default:
		return "?";
	}
}

static const struct crash_object *object_of(uintptr_t addr)
{
	for (unsigned i = 0; i < n_objects; i++) {
		if (addr >= objects[i].start && addr < objects[i].end) {
			return &objects[i];
		}
	}
	return NULL;
}

static uintptr_t context_pc(void *uc)
{
	const ucontext_t *u = uc;
	if (u == NULL) {
		return 0;
	}
#if defined(__x86_64__)
	return (uintptr_t)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uintptr_t)u->uc_mcontext.pc;
#else
	return 0;
#endif
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	void *frames[CRASH_MAX_FRAMES];
	struct line l;
	uintptr_t pc = context_pc(uc);
	int n, first = 0;

	begin(&l);
	put_str(&l, "signal ");
	put_dec(&l, (unsigned long)sig);
	put_str(&l, " (");
	put_str(&l, signal_name(sig));
	put_str(&l, ") addr ");
	put_hex(&l, si != NULL ? (uintptr_t)si->si_addr : 0);
	put_str(&l, " pid ");
	put_dec(&l, (unsigned long)getpid());
	emit(&l);
	if (n_objects > 0) {
		begin(&l);
		put_str(&l, "object ");
		put_hex(&l, objects[0].base);
		put_str(&l, " ");
		put_str(&l, objects[0].name);
		emit(&l);
	}
	if (pc != 0) {
		begin(&l);
		put_str(&l, "pc ");
		put_hex(&l, pc);
		emit(&l);
	}
	n = backtrace(frames, CRASH_MAX_FRAMES);
	/* The handler and the signal trampoline come first; start at the
	 * interrupted instruction when the unwinder went through it. */
	for (int i = 0; pc != 0 && i < n; i++) {
		if ((uintptr_t)frames[i] == pc) {
			first = i;
			break;
		}
	}
	for (int i = first; i < n; i++) {
		uintptr_t a = (uintptr_t)frames[i];
		const struct crash_object *o = object_of(a);
		begin(&l);
		put_str(&l, "frame ");
		put_dec(&l, (unsigned long)(i - first));
		put_str(&l, " ");
		put_hex(&l, a);
		put_str(&l, " ");
		if (o != NULL) {
			put_str(&l, o->name);
			put_str(&l, "+");
			put_hex(&l, a - o->base);
		} else {
			put_str(&l, "?");
		}
		emit(&l);
	}
	if (n > first) {
		backtrace_symbols_fd(frames + first, n - first, STDERR_FILENO);
	}
	begin(&l);
	put_str(&l, "end");
	emit(&l);
	/* SA_RESETHAND restored the default action: raised again, the
	 * signal kills the process (and dumps core) once we return. */
	raise(sig);
}

static int record_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct crash_object *o;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	(void)size;
	(void)data;
	if (n_objects == CRASH_MAX_OBJECTS) {
		return 1;
	}
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD) {
			continue;
		}
		if (a < lo) {
			lo = a;
		}
		if (a + ph->p_memsz > hi) {
			hi = a + ph->p_memsz;
		}
	}
	if (hi == 0) {
		return 0;
	}
	o = &objects[n_objects];
	o->base = (uintptr_t)info->dlpi_addr;
	o->start = lo;
	o->end = hi;
	if (n_objects == 0 || info->dlpi_name == NULL ||
	    info->dlpi_name[0] == '\0') {
		/* The executable has no name here. */
		ssize_t k =
		    readlink("/proc/self/exe", o->name, sizeof o->name - 1);
		o->name[k > 0 ? k : 0] = '\0';
		if (k <= 0) {
			snprintf(o->name, sizeof o->name, "?");
		}
	} else {
		snprintf(o->name, sizeof o->name, "%s", info->dlpi_name);
	}
	n_objects++;
	return 0;
}

bool crash_install(void)
{
	static char altstack[CRASH_ALTSTACK];
	void *warm[4];
	stack_t ss;
	struct sigaction sa;

	if (CRASH_SANITIZED || installed) {
		return false;
	}
	installed = true;
	/* backtrace() loads libgcc_s on its first call, which allocates:
	 * do it now, not in the handler. */
	(void)backtrace(warm, 4);
	n_objects = 0;
	dl_iterate_phdr(record_object, NULL);
	/* A stack overflow must still be reported. */
	memset(&ss, 0, sizeof ss);
	ss.ss_sp = altstack;
	ss.ss_size = sizeof altstack;
	sigaltstack(&ss, NULL);
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0];
	     i++) {
		sigaction(crash_signals[i], &sa, NULL);
	}
	return true;
}

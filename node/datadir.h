/* The node's data directory: created on start and locked so that a second
 * process on the same directory refuses to run. The lock is an flock(2) on
 * DIR/LOCK, released by the kernel when the process dies, so a crash never
 * leaves a stale lock behind. */
#ifndef LS_NODE_DATADIR_H
#define LS_NODE_DATADIR_H

#include <stddef.h>

struct datadir {
	char path[1024];
	int lock_fd; /* -1 when not held */
};

/* Creates `path` (and parents) if missing and takes the lock. On failure
 * returns -1 with the reason in `err` (e.g. held by another process, with
 * its pid). */
int datadir_open(struct datadir *d, const char *path, char *err, size_t errlen);
void datadir_close(struct datadir *d);

/* Creates a directory and its parents (mode 0700 for new ones). */
int datadir_mkdirs(const char *path);

#endif

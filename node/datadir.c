/* Data directory creation and locking; see datadir.h. */
#include "node/datadir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int datadir_mkdirs(const char *path)
{
	char buf[1024];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] == '/' || buf[i] == '\0') {
			char c = buf[i];
			buf[i] = '\0';
			if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
				return -1;
			}
			buf[i] = c;
		}
	}
	struct stat st;
	if (stat(path, &st) != 0) {
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

int datadir_open(struct datadir *d, const char *path, char *err, size_t errlen)
{
	char lock[1100];
	char pid[32];
	d->lock_fd = -1;
	if (strlen(path) >= sizeof d->path) {
		snprintf(err, errlen, "data directory path too long");
		return -1;
	}
	strcpy(d->path, path);
	if (datadir_mkdirs(path) != 0) {
		snprintf(err, errlen, "cannot create data directory '%s': %s",
		         path, strerror(errno));
		return -1;
	}
	snprintf(lock, sizeof lock, "%s/LOCK", path);
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open lock file '%s': %s", lock,
		         strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
		pid[r > 0 ? r : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (e == EWOULDBLOCK) {
			snprintf(err, errlen,
			         "data directory '%s' is in use by another "
			         "lodestone process (pid %s)",
			         path, pid[0] ? pid : "unknown");
		} else {
			snprintf(err, errlen, "cannot lock '%s': %s", lock,
			         strerror(e));
		}
		close(fd);
		return -1;
	}
	int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		snprintf(err, errlen, "cannot write lock file '%s': %s", lock,
		         strerror(errno));
		close(fd);
		return -1;
	}
	d->lock_fd = fd;
	return 0;
}

void datadir_close(struct datadir *d)
{
	if (d->lock_fd >= 0) {
		close(d->lock_fd); /* releases the flock */
		d->lock_fd = -1;
	}
}

/* Tests for raft/crc32c.c and raft/wal.c: checksums, replay, rotation,
 * release, torn tails and corruption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raft/crc32c.h"
#include "raft/wal.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(seed >> 56);
	}
}

/* ---- crc32c ---- */

static void test_crc_vectors(void **state)
{
	uint8_t zeros[32] = {0}, ones[32];
	(void)state;
	memset(ones, 0xff, sizeof ones);
	/* RFC 3720 B.4 and the usual check value. */
	assert_int_equal(crc32c_extend(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c_extend(0, zeros, 32), 0x8a9136aa);
	assert_int_equal(crc32c_extend(0, ones, 32), 0x62a8ab43);
	assert_int_equal(crc32c_extend_portable(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c_extend(0, NULL, 0), 0);
}

/* The hardware path (three chains joined by shifts) agrees with the table
 * for every length class around its block sizes, any alignment, and when
 * a checksum is continued piece by piece. */
static void test_crc_agrees(void **state)
{
	size_t max = 3 * 8192 * 2 + 100;
	uint8_t *buf = malloc(max + 16);
	size_t lens[] = {0,     1,     7,     8,     9,     63,           64,
	                 4095,  8192,  24575, 24576, 24577, 3 * 8192 + 8, 49151,
	                 49152, 49153, max};
	(void)state;
	fill(buf, max + 16, 7);
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		for (size_t off = 0; off < 9; off++) {
			uint32_t a = crc32c_extend(0x1234, buf + off, lens[i]);
			uint32_t b =
			    crc32c_extend_portable(0x1234, buf + off, lens[i]);
			assert_int_equal(a, b);
		}
	}
	for (int k = 0; k < 50; k++) {
		size_t n = (size_t)(next_rand() % max), cut;
		cut = n ? (size_t)(next_rand() % n) : 0;
		uint32_t whole = crc32c_extend(0, buf, n);
		uint32_t part = crc32c_extend(crc32c_extend(0, buf, cut),
		                              buf + cut, n - cut);
		assert_int_equal(whole, part);
		assert_int_equal(whole, crc32c_extend_portable(0, buf, n));
	}
	free(buf);
}

/* ---- wal ---- */

struct fx {
	char dir[256];
	struct wal *w;
	/* replayed records, concatenated with their lengths */
	size_t n;
	size_t lens[4096];
	uint64_t seeds[4096];
	bool fail_at_3;
};

static int collect(void *data, const void *rec, size_t len, char *err,
                   size_t errlen)
{
	struct fx *f = data;
	uint64_t seed;
	uint8_t *want;

	if (f->fail_at_3 && f->n == 3) {
		snprintf(err, errlen, "refused by the test");
		return -1;
	}
	assert_true(len >= 8);
	memcpy(&seed, rec, 8);
	want = malloc(len);
	memcpy(want, &seed, 8);
	fill(want + 8, len - 8, seed);
	assert_memory_equal(rec, want, len);
	free(want);
	assert_true(f->n < 4096);
	f->lens[f->n] = len;
	f->seeds[f->n] = seed;
	f->n++;
	return 0;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/lodestone-wal-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[300];
	wal_close(f->w);
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void open_wal(struct fx *f, uint64_t seg_bytes)
{
	char err[256];
	f->n = 0;
	if (wal_open(&f->w, f->dir, seg_bytes, collect, f, err, sizeof err) !=
	    0) {
		fail_msg("wal_open: %s", err);
	}
}

static void reopen(struct fx *f, uint64_t seg_bytes)
{
	wal_close(f->w);
	f->w = NULL;
	open_wal(f, seg_bytes);
}

/* Appends a record of `len` bytes whose content follows from `seed`. */
static void append(struct fx *f, size_t len, uint64_t seed)
{
	char err[256];
	uint8_t *p = malloc(len);
	assert_true(len >= 8);
	memcpy(p, &seed, 8);
	fill(p + 8, len - 8, seed);
	assert_int_equal(wal_append(f->w, p, len, err, sizeof err), 0);
	free(p);
}

static unsigned count_segments(struct fx *f)
{
	DIR *d = opendir(f->dir);
	struct dirent *de;
	unsigned n = 0;
	while ((de = readdir(d)) != NULL) {
		n += strstr(de->d_name, ".seg") != NULL;
	}
	closedir(d);
	return n;
}

static void seg_path(struct fx *f, uint64_t seq, char *out, size_t n)
{
	snprintf(out, n, "%s/%020llu.seg", f->dir, (unsigned long long)seq);
}

static off_t file_size(const char *path)
{
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	return sb.st_size;
}

static void test_replay_in_order(void **state)
{
	struct fx *f = *state;
	char err[256];

	open_wal(f, 0);
	assert_int_equal(f->n, 0);
	assert_int_equal(wal_current(f->w), 1);
	for (uint64_t i = 0; i < 100; i++) {
		append(f, 8 + (size_t)(next_rand() % 3000), 1000 + i);
	}
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	reopen(f, 0);
	assert_int_equal(f->n, 100);
	for (uint64_t i = 0; i < 100; i++) {
		assert_int_equal(f->seeds[i], 1000 + i);
	}
	/* The reopen started segment 2 and kept 1 for the owner to drop. */
	assert_int_equal(wal_current(f->w), 2);
	assert_int_equal(count_segments(f), 2);
	assert_int_equal(wal_release_before(f->w, 2, err, sizeof err), 0);
	assert_int_equal(count_segments(f), 1);
	reopen(f, 0);
	assert_int_equal(f->n, 0);
}

static void test_rotation_and_release(void **state)
{
	struct fx *f = *state;
	struct wal_stats st;
	char err[256];

	open_wal(f, 16 << 10);
	for (uint64_t i = 0; i < 200; i++) {
		append(f, 1000, i);
	}
	wal_stats(f->w, &st);
	assert_true(st.rotations >= 10);
	assert_int_equal(st.segments, st.rotations + 1);
	assert_int_equal(st.appends, 200);
	/* Each segment stays under its limit but for one record. */
	char path[300];
	seg_path(f, 1, path, sizeof path);
	assert_true(file_size(path) <= (16 << 10) + 1008);
	assert_int_equal(
	    wal_release_before(f->w, wal_current(f->w) - 2, err, sizeof err),
	    0);
	wal_stats(f->w, &st);
	assert_int_equal(st.segments, 3);
	assert_int_equal(count_segments(f), 3);
	/* Releasing beyond the current segment keeps the current one. */
	assert_int_equal(wal_release_before(f->w, 1000, err, sizeof err), 0);
	assert_int_equal(count_segments(f), 1);
	/* Only what the released segments held is gone. */
	for (uint64_t i = 200; i < 205; i++) {
		append(f, 100, i);
	}
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	reopen(f, 16 << 10);
	assert_true(f->n >= 5);
	assert_int_equal(f->seeds[f->n - 1], 204);
}

/* A crash leaves part of the last record: the intact ones replay, the tail
 * is cut (durably), and appends go on in a new segment. */
static void test_torn_tail(void **state)
{
	struct fx *f = *state;
	struct wal_stats st;
	char err[256], path[300];
	off_t size;

	open_wal(f, 0);
	for (uint64_t i = 0; i < 10; i++) {
		append(f, 500, i);
	}
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	seg_path(f, 1, path, sizeof path);
	size = file_size(path);
	assert_int_equal(truncate(path, size - 100), 0);
	reopen(f, 0);
	assert_int_equal(f->n, 9);
	wal_stats(f->w, &st);
	assert_int_equal(st.torn_bytes, 500 + 8 - 100);
	assert_int_equal(file_size(path), size - 508);
	append(f, 64, 77);
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	reopen(f, 0);
	assert_int_equal(f->n, 10);
	assert_int_equal(f->seeds[9], 77);
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	uint8_t b;
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

/* A record failing its checksum in the newest segment is a torn tail: it
 * and everything after it go. */
static void test_bad_crc_at_tail(void **state)
{
	struct fx *f = *state;
	char err[256], path[300];

	open_wal(f, 0);
	for (uint64_t i = 0; i < 5; i++) {
		append(f, 200, i);
	}
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	seg_path(f, 1, path, sizeof path);
	flip_byte(path, 8 + 3 * 208 + 50); /* inside record 3 */
	reopen(f, 0);
	assert_int_equal(f->n, 3);
	assert_int_equal(file_size(path), 8 + 3 * 208);
}

/* The same damage in an older segment is corruption: refused. */
static void test_corrupt_older_segment(void **state)
{
	struct fx *f = *state;
	char err[256], path[300];

	open_wal(f, 0);
	append(f, 200, 1);
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	reopen(f, 0); /* segment 1 is now an older one */
	append(f, 200, 2);
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	wal_close(f->w);
	f->w = NULL;
	seg_path(f, 1, path, sizeof path);
	flip_byte(path, 8 + 8 + 10);
	f->n = 0;
	assert_int_not_equal(
	    wal_open(&f->w, f->dir, 0, collect, f, err, sizeof err), 0);
	assert_null(f->w);
	assert_non_null(strstr(err, "corrupt"));
	assert_non_null(strstr(err, "00000000000000000001.seg"));
}

/* Segment 1 holding one synced 100-byte record, the WAL closed. */
static void one_record_closed(struct fx *f)
{
	char err[256];

	open_wal(f, 0);
	append(f, 100, 5);
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	wal_close(f->w);
	f->w = NULL;
}

/* Zeros after the records of the newest segment (space the file system
 * allocated but the crash left unwritten) are a torn tail. */
static void test_zero_tail(void **state)
{
	struct fx *f = *state;
	char path[300];
	uint8_t zeros[64] = {0};
	int fd;

	one_record_closed(f);
	seg_path(f, 1, path, sizeof path);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, zeros, sizeof zeros), (ssize_t)sizeof zeros);
	close(fd);
	open_wal(f, 0);
	assert_int_equal(f->n, 1);
	assert_int_equal(file_size(path), 8 + 108);
}

/* A segment created by a crash before its header reached the disk is
 * dropped; the older one before it replays. */
static void test_headerless_newest(void **state)
{
	struct fx *f = *state;
	char path[300];
	int fd;

	one_record_closed(f);
	seg_path(f, 2, path, sizeof path);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_int_equal(write(fd, "LSW", 3), 3);
	close(fd);
	open_wal(f, 0);
	assert_int_equal(f->n, 1);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(wal_current(f->w), 3);
}

/* Once a segment holds a quarter of its size (up to 1 MiB) in small syncs,
 * a spare of zeros is written ahead and the next append moves into it early
 * (the first segment after an open); the finished segment is cut to its
 * records, and the spare's unwritten zeros are cut at the next open
 * without counting as a torn tail. */
static void test_spare(void **state)
{
	struct fx *f = *state;
	struct wal_stats st;
	char err[256], path[300];
	uint64_t seed = 0;
	off_t first_size;
	unsigned spins = 0;

	open_wal(f, 256 << 10);
	do {
		/* Small syncs: what a spare is for. */
		append(f, 1000, seed++);
		assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
		wal_stats(f->w, &st);
		if (st.spares_used == 0) {
			usleep(1000);
		}
		assert_true(++spins < 20000);
	} while (st.spares_used == 0);
	assert_int_equal(st.spare_errors, 0);
	assert_int_equal(wal_current(f->w), 2);
	/* Cut to its records: only the newest segment ends in zeros. */
	seg_path(f, 1, path, sizeof path);
	first_size = file_size(path);
	assert_int_equal(first_size, 8 + (off_t)(seed - 1) * 1008);
	seg_path(f, 2, path, sizeof path);
	assert_int_equal(file_size(path), 256 << 10);
	for (int i = 0; i < 20; i++) {
		append(f, 1000, seed++);
	}
	assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	reopen(f, 256 << 10);
	assert_int_equal(f->n, seed);
	for (uint64_t i = 0; i < seed; i++) {
		assert_int_equal(f->seeds[i], i);
	}
	wal_stats(f->w, &st);
	assert_int_equal(st.torn_bytes, 0);
	assert_int_equal(file_size(path), 8 + 21 * 1008);
	/* No spare survives a close. */
	snprintf(path, sizeof path, "%s/spare.tmp", f->dir);
	assert_int_equal(access(path, F_OK), -1);
}

/* Syncs of more than 32 KiB on average get no spare: their zeros would
 * double the disk's writes for little. */
static void test_no_spare_for_big_syncs(void **state)
{
	struct fx *f = *state;
	struct wal_stats st;
	char err[256];

	open_wal(f, 1 << 20);
	for (uint64_t i = 0; i < 40; i++) {
		append(f, 40000, i);
		assert_int_equal(wal_sync(f->w, err, sizeof err), 0);
	}
	wal_stats(f->w, &st);
	assert_true(st.rotations >= 1);
	assert_int_equal(st.spares_used, 0);
	reopen(f, 1 << 20);
	assert_int_equal(f->n, 40);
}

/* After a failed write (here: the file size limit cuts a record in two)
 * nothing more is appended or synced: a record behind the damage would be
 * taken for part of a torn tail and cut. */
static void test_failure_is_sticky(void **state)
{
	struct fx *f = *state;
	struct rlimit old, lim;
	char err[256];
	uint8_t rec[1000];
	int k, rv = 0;

	open_wal(f, 0);
	memset(rec, 0, sizeof rec);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = 4500;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	for (k = 0; k < 10 && rv == 0; k++) {
		uint64_t seed = (uint64_t)k;
		memcpy(rec, &seed, 8);
		fill(rec + 8, sizeof rec - 8, seed);
		rv = wal_append(f->w, rec, sizeof rec, err, sizeof err);
	}
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_not_equal(rv, 0);
	assert_int_equal(k, 5); /* 8 + 4 x 1008 fit, the fifth is cut */
	assert_non_null(strstr(err, "raft WAL write"));
	assert_int_not_equal(wal_append(f->w, rec, 100, err, sizeof err), 0);
	assert_non_null(strstr(err, "unusable"));
	assert_int_not_equal(wal_sync(f->w, err, sizeof err), 0);
	assert_non_null(strstr(err, "unusable"));
	reopen(f, 0);
	assert_int_equal(f->n, 4);
}

static void test_replay_refused(void **state)
{
	struct fx *f = *state;
	char err[256];

	open_wal(f, 0);
	for (uint64_t i = 0; i < 5; i++) {
		append(f, 40, i);
	}
	wal_close(f->w);
	f->w = NULL;
	f->fail_at_3 = true;
	f->n = 0;
	assert_int_not_equal(
	    wal_open(&f->w, f->dir, 0, collect, f, err, sizeof err), 0);
	assert_string_equal(err, "refused by the test");
}

static void test_oversized_record(void **state)
{
	struct fx *f = *state;
	char err[256];
	uint8_t b = 0;

	open_wal(f, 0);
	assert_int_not_equal(
	    wal_append(f->w, &b, (size_t)2 << 30, err, sizeof err), 0);
	assert_non_null(strstr(err, "too big"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crc_vectors),
	    cmocka_unit_test(test_crc_agrees),
	    cmocka_unit_test_setup_teardown(test_replay_in_order, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_rotation_and_release, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_torn_tail, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_crc_at_tail, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_older_segment, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_zero_tail, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spare, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_spare_for_big_syncs, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_headerless_newest, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_failure_is_sticky, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_replay_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_oversized_record, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

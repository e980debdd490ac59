/* The Raft log's write-ahead log: a directory of append-only segment files
 * holding opaque records (raft/io.c writes each RocksDB WriteBatch of the
 * raft_log and raft_state column families here, and writes the batch to
 * RocksDB with RocksDB's own WAL off). Records carry a CRC-32C computed with
 * the CPU's crc32 instruction: Debian's librocksdb computes its WAL
 * checksums in software, ~16 % of a node's CPU under publish load.
 *
 * Segment file: "LSWAL001" then records { u32 length | u32 crc | bytes },
 * big endian; the CRC covers the length field and the bytes. Segments are
 * named by a sequence number ("%020" PRIu64 ".seg") and only the newest one
 * is appended to. The owner deletes the older ones (wal_release_before)
 * once what their records wrote is durable elsewhere (flushed memtables).
 *
 * Segments are written ahead: once the current one holds 1 MiB in syncs of
 * 32 KiB or less on average (where an fdatasync's metadata commit is a
 * large share of its cost), a thread
 * of the WAL's own writes a segment-sized file of zeros ("spare.tmp"),
 * which the next rotation renames into place (the first segment after an
 * open moves into it early). Appends into it overwrite written blocks, so
 * each fdatasync commits data only, not the file's size and extents. A
 * finished segment is cut to its records, so only the newest one may end
 * in zeros, which the open cuts like a torn tail.
 *
 * Not thread-safe, except that wal_current() and wal_release_before() may
 * run on another thread than the appends. */
#ifndef LS_RAFT_WAL_H
#define LS_RAFT_WAL_H

#include <stddef.h>
#include <stdint.h>

struct wal;

/* Called for each intact record in order while opening; non-zero stops the
 * open, which fails with the message the callback put in `err`. */
typedef int (*wal_replay_fn)(void *data, const void *rec, size_t len, char *err,
                             size_t errlen);

struct wal_stats {
	uint64_t appends;      /* records appended since open */
	uint64_t bytes;        /* record bytes appended since open */
	uint64_t syncs;        /* fdatasyncs */
	uint64_t rotations;    /* segments started since open */
	uint64_t segments;     /* segment files on disk */
	uint64_t replayed;     /* records replayed by the open */
	uint64_t torn_bytes;   /* bytes of a torn tail cut by the open (not
	                          counting a spare's unwritten zeros) */
	uint64_t spares_used;  /* rotations into a prepared spare */
	uint64_t spare_errors; /* spares that could not be prepared */
};

/* Opens `dir` (created if missing), hands every intact record of every
 * segment to `fn` in order, cuts a torn tail off the newest segment (a
 * record cut short or failing its CRC there is one the crash interrupted:
 * it was never synced, so never acknowledged), and starts a new segment.
 * A bad record in any older segment is corruption: the open fails.
 * `segment_bytes` (0 = 64 MiB) is the size at which appends move to a new
 * segment. */
int wal_open(struct wal **out, const char *dir, uint64_t segment_bytes,
             wal_replay_fn fn, void *data, char *err, size_t errlen);

/* Appends one record (not synced). When the current segment is full, it is
 * synced and closed first and a new one started. */
int wal_append(struct wal *w, const void *rec, size_t len, char *err,
               size_t errlen);

/* Makes every record appended so far durable. */
int wal_sync(struct wal *w, char *err, size_t errlen);

/* The current segment's sequence number: records appended before it moved
 * there are all in older segments. */
uint64_t wal_current(const struct wal *w);

/* Deletes the segments numbered below `seq` (at most the current one). */
int wal_release_before(struct wal *w, uint64_t seq, char *err, size_t errlen);

/* The directory's mark: a random non-zero number its owner (raft/io.c)
 * also keeps in the database the records go into, so that a WAL and a
 * database that do not belong together are noticed. Kept in the file
 * "owner" (16 hex digits). wal_mark_read sets `*mark` to 0 when the
 * directory or the file does not exist; wal_mark_write creates the
 * directory if needed and writes the file durably (renamed into place). */
int wal_mark_read(const char *dir, uint64_t *mark, char *err, size_t errlen);
int wal_mark_write(const char *dir, uint64_t mark, char *err, size_t errlen);

void wal_stats(const struct wal *w, struct wal_stats *st);

/* Parses one segment's bytes (what wal_open does with each file), handing
 * each intact record to `fn`. Sets `*good` to the length of the intact
 * prefix and `*why` to what is wrong after it (NULL: nothing, *good ==
 * len). Returns non-zero only when `fn` does. */
int wal_scan(const uint8_t *buf, size_t len, wal_replay_fn fn, void *data,
             size_t *good, const char **why, char *err, size_t errlen);

/* Closes the current segment (without a sync) and frees `w`. */
void wal_close(struct wal *w);

#endif

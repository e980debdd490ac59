/* CRC-32C (Castagnoli), the checksum of the Raft write-ahead log's records
 * (raft/wal.c). Uses the SSE4.2 crc32 instruction, three streams at a time,
 * when the CPU has it, else a table; both give the same values. */
#ifndef LS_RAFT_CRC32C_H
#define LS_RAFT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues `crc` (the CRC-32C of what came before; 0 for nothing) over
 * `n` bytes at `p`: crc32c_extend(0, "123456789", 9) == 0xe3069283. */
uint32_t crc32c_extend(uint32_t crc, const void *p, size_t n);

/* The table implementation alone, for tests comparing the two. */
uint32_t crc32c_extend_portable(uint32_t crc, const void *p, size_t n);

#endif

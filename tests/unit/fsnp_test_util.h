/* Helpers shared by the FSNP unit tests and fuzz targets: hex, files and
 * vector paths, a seeded PRNG, random typed values, and a structural
 * re-encoder (walks a decoded value with the iterators and rebuilds it with
 * the builder, so a round trip exercises both). No cmocka in here. */
#ifndef TESTS_FSNP_TEST_UTIL_H
#define TESTS_FSNP_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "wire/fsnp_value.h"

/* Decode hex (whitespace ignored) into a malloc'd buffer; NULL on bad hex.
 * *len gets the byte count. The caller frees. */
uint8_t *fsnp_test_unhex(const char *hex, size_t *len);

/* Read a whole file into a malloc'd, NUL-terminated buffer; NULL if it
 * cannot be read. */
char *fsnp_test_read_file(const char *path, size_t *len);

/* $LS_SHARED_DIR, else the configured shared directory. */
const char *fsnp_test_shared_dir(void);

/* The frame called `name` in tests/vectors/fsnp/sdk_frames.txt, decoded
 * into a malloc'd buffer (the caller frees); NULL when absent. */
uint8_t *fsnp_test_sdk_frame(const char *name, size_t *len);

/* xorshift64* with a fixed seed: deterministic tests. */
struct fsnp_rng {
	uint64_t s;
};

void fsnp_rng_seed(struct fsnp_rng *r, uint64_t seed);
uint64_t fsnp_rng_next(struct fsnp_rng *r);
/* Uniform in [0, n) (n > 0). */
uint64_t fsnp_rng_below(struct fsnp_rng *r, uint64_t n);

/* Write one random value of at most `depth` nesting levels. */
void fsnp_test_random_value(struct fsnp_rng *r, struct fsnp_writer *w,
                            unsigned depth);

/* Rebuild `v` element by element with the builder. */
void fsnp_test_reencode(struct fsnp_writer *w, const struct fsnp_val *v);

#endif /* TESTS_FSNP_TEST_UTIL_H */

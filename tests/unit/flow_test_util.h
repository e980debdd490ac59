/* Helpers for the flow/ unit tests: FSNP bodies, Flow commands applied to
 * a temporary store (tests/unit/store_test_util.h) and their replies. */
#ifndef LS_TESTS_FLOW_TEST_UTIL_H
#define LS_TESTS_FLOW_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/unit/store_test_util.h"
#include "wire/fsnp_value.h"

/* A body: a map built key by key. */
struct fbody {
	struct wbuf b;
	struct fsnp_writer w;
};

void fb_begin(struct fbody *f);
void fb_str(struct fbody *f, const char *k, const char *v);
void fb_int(struct fbody *f, const char *k, int64_t v);
void fb_bool(struct fbody *f, const char *k, bool v);
void fb_strs(struct fbody *f, const char *k, const char *const *v, size_t n);
/* A key whose value the caller writes with f->w. */
void fb_key(struct fbody *f, const char *k);
/* Closes the map; the bytes stay in f->b (fb_free them). */
void fb_end(struct fbody *f);
void fb_free(struct fbody *f);

/* A reply: FSNP status and value (a view into buf). */
struct freply {
	uint8_t *buf;
	size_t len;
	int status;
	struct fsnp_val v;
	char text[512]; /* the value when it is text */
};

/* A store with flow/ registered. */
void ftdb_open(struct tdb *t);

/* Encodes and runs one Flow request at entry time `now`: reads through
 * store_read, the rest as a one-command entry. A request the encoder
 * refuses gives its error as the reply (buf NULL). */
void fl_run(struct tdb *t, uint32_t group, uint64_t now, uint16_t opcode,
            const struct fbody *body, uint64_t seed, struct freply *r);
void freply_free(struct freply *r);

/* Assertions on replies. */
void fr_ok(const struct freply *r); /* status 0, "OK" */
void fr_err(const struct freply *r, int status, const char *msg);
/* A map field of the reply (asserts it is there). */
struct fsnp_val fr_get(const struct fsnp_val *m, const char *k);
int64_t fr_int(const struct fsnp_val *m, const char *k);
/* NUL-terminated copy of a text field into buf (size 256). */
const char *fr_str(const struct fsnp_val *m, const char *k, char *buf);
bool fr_is_nil(const struct fsnp_val *m, const char *k);

#endif

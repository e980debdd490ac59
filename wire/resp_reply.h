/* RESP replies: the encoders of RESP2 and RESP3 reply types into a
 * `struct wbuf` (wire/buf.h). Where RESP3 has a type RESP2 lacks (null,
 * map, set, double, boolean) the encoder takes the protocol version and
 * writes what Redis writes to a RESP2 client. */
#ifndef LS_WIRE_RESP_REPLY_H
#define LS_WIRE_RESP_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"

void resp_w_simple(struct wbuf *b, const char *s);
/* An error line; `msg` starts with its code ("ERR ...", "WRONGTYPE ...");
 * CR and LF in it become spaces, as Redis does. */
void resp_w_error(struct wbuf *b, const char *msg);
void resp_w_errorf(struct wbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void resp_w_int(struct wbuf *b, int64_t v);
void resp_w_bulk(struct wbuf *b, const void *p, size_t n);
void resp_w_bulk_str(struct wbuf *b, const char *s);
/* RESP3 `_`, RESP2 `$-1`. */
void resp_w_null(struct wbuf *b, int proto);
/* RESP3 `_`, RESP2 `*-1`. */
void resp_w_null_array(struct wbuf *b, int proto);
void resp_w_array(struct wbuf *b, size_t n);
/* n pairs: RESP3 `%n`, RESP2 an array of 2n. */
void resp_w_map(struct wbuf *b, size_t n, int proto);
/* RESP3 `~n`, RESP2 an array. */
void resp_w_set(struct wbuf *b, size_t n, int proto);
/* RESP3 `,`; RESP2 a bulk string of the same text. */
void resp_w_double(struct wbuf *b, double d, int proto);
/* RESP3 verbatim text `=n\r\ntxt:...`; RESP2 a bulk string. */
void resp_w_verbatim(struct wbuf *b, const char *s, size_t n, int proto);

#endif

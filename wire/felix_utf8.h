/* Strict UTF-8 validation (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), for the names binary frames carry and the strings
 * the JSON encoder writes. */
#ifndef WIRE_FELIX_UTF8_H
#define WIRE_FELIX_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool felix_utf8_valid(const uint8_t *p, size_t len);

#endif /* WIRE_FELIX_UTF8_H */

/* Dev-mode TLS material: a self-signed EC P-256 leaf with CA:FALSE and SANs
 * DNS:localhost and IP:127.0.0.1, written once into the data directory.
 * The official Felix client (rustls/webpki) refuses a certificate marked
 * CA:TRUE as an end entity, and accepts this leaf given as its caFile. */
#ifndef LS_NODE_DEVCERT_H
#define LS_NODE_DEVCERT_H

#include <stddef.h>

/* Ensures `cert_path` and `key_path` exist, generating them if either is
 * missing. Returns 0, or -1 with the reason in `err`. */
int devcert_ensure(const char *cert_path, const char *key_path, char *err,
                   size_t errlen);

#endif

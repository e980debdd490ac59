/* The Felix room's public face: what the daemon core and the other rooms
 * may use of the Felix broker. The broker (felix_server.h: the QUIC
 * listener, sessions, publishes, subscriptions, caches, counters, groups,
 * producers) and the registry of streams and caches it serves
 * (scopes.h). Everything else under node/felix/ is the room's own
 * (felix_internal.h). */
#ifndef LS_NODE_FELIX_FELIX_H
#define LS_NODE_FELIX_FELIX_H

#include "node/felix/felix_server.h"
#include "node/felix/scopes.h"

#endif

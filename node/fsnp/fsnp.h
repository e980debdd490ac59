/* The FSNP room's public face: what the daemon core may use of the FSNP
 * server (fsnp_server.h: the TCP and TLS listeners, their start, drain
 * and close). Connections, lanes, execution and the command layer are the
 * room's own (fsnp_internal.h, fsnp_cmd.h). */
#ifndef LS_NODE_FSNP_FSNP_H
#define LS_NODE_FSNP_FSNP_H

#include "node/fsnp/fsnp_server.h"

#endif

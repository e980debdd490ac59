/* The admin room's public face: the admin HTTP listener and its route
 * table (admin_http.h), the Prometheus metrics every other room counts
 * into (metrics.h), and the cluster dashboard (dashboard.h) with the
 * history it charts (history.h). */
#ifndef LS_NODE_ADMIN_ADMIN_H
#define LS_NODE_ADMIN_ADMIN_H

#include "node/admin/admin_http.h"
#include "node/admin/metrics.h"
#include "node/admin/history.h"
#include "node/admin/dashboard.h"

#endif

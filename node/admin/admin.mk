# node/admin: the admin and observability room: the admin HTTP listener on
# libmicrohttpd (admin_http) and the Prometheus metrics (metrics). Its public
# header is node/admin/admin.h.
node_libnode_a_SOURCES += node/admin/admin.h \
	node/admin/admin_http.c node/admin/admin_http.h \
	node/admin/metrics.c node/admin/metrics.h

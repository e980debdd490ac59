# node/admin: the admin and observability room: the admin HTTP listener on
# libmicrohttpd (admin_http), the Prometheus metrics (metrics), and the
# cluster dashboard (dashboard: the page at GET / and /v1/dashboard; history:
# the series it charts). Its public header is node/admin/admin.h.
node_libnode_a_SOURCES += node/admin/admin.h \
	node/admin/admin_http.c node/admin/admin_http.h \
	node/admin/metrics.c node/admin/metrics.h \
	node/admin/history.c node/admin/history.h \
	node/admin/dashboard.c node/admin/dashboard.h
nodist_node_libnode_a_SOURCES = node/admin/dashboard_page.c

# The page stays an editable file: it is compiled in as a byte array.
EXTRA_DIST += node/admin/dashboard.html tests/interop/dashboard.mjs
CLEANFILES += node/admin/dashboard_page.c
node/admin/dashboard_page.c: $(srcdir)/node/admin/dashboard.html
	@$(MKDIR_P) node/admin
	$(AM_V_GEN){ echo '/* Generated from node/admin/dashboard.html. */'; \
	  echo '#include "node/admin/dashboard.h"'; \
	  echo 'const unsigned char dashboard_page[] = {'; \
	  od -An -v -tx1 $(srcdir)/node/admin/dashboard.html | \
	    sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '};'; \
	  echo 'const unsigned long dashboard_page_len = sizeof dashboard_page;'; \
	} > $@.tmp && mv $@.tmp $@

# Unit: the history's ring and rate arithmetic.
UNIT_TESTS += tests/unit/test_admin_history
tests_unit_test_admin_history_SOURCES = tests/unit/test_admin_history.c
tests_unit_test_admin_history_LDADD = node/libnode.a $(NODE_LIBS) $(DEP_LIBS) \
	$(CMOCKA_LIBS)

# Integration: GET /, /v1/dashboard and the Flow views on a real node.
INTEGRATION_TESTS += tests/integration/test_dashboard
tests_integration_test_dashboard_SOURCES = tests/integration/test_dashboard.c \
	tests/integration/fsnp_test_client.c tests/integration/fsnp_test_client.h
tests_integration_test_dashboard_LDADD = tests/integration/libharness.a \
	$(CLIENT_LIBS) wire/libwire.la $(CMOCKA_LIBS) $(DEP_LIBS)

# Integration: /metrics after FSNP and Felix traffic on one node and on
# three, checked by promtool; --metrics-max-groups.
INTEGRATION_TESTS += tests/integration/test_metrics
tests_integration_test_metrics_SOURCES = tests/integration/test_metrics.c \
	tests/integration/fsnp_test_client.c tests/integration/fsnp_test_client.h
tests_integration_test_metrics_LDADD = tests/integration/libfelixutil.a \
	tests/integration/libharness.a $(CLIENT_LIBS) wire/libwire.la \
	$(CMOCKA_LIBS) $(DEP_LIBS)

# Unit: the metrics registry's exposition text.
UNIT_TESTS += tests/unit/test_admin_metrics
tests_unit_test_admin_metrics_SOURCES = tests/unit/test_admin_metrics.c \
	node/admin/metrics.c node/admin/metrics.h
tests_unit_test_admin_metrics_LDADD = $(CMOCKA_LIBS)

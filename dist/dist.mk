# dist/: what `make install` adds beside the programs: the systemd units,
# the man pages (man/), the headers and pkg-config file of liblodestone
# (client/client.mk); and the checks of all of it.

# systemd units, with this build's paths.
if SYSTEMD_UNITS
systemdsystemunit_DATA = dist/lodestone.service dist/lodestone@.service
endif
CLEANFILES += dist/lodestone.service dist/lodestone@.service
EXTRA_DIST += dist/lodestone.service.in dist/lodestone@.service.in \
	dist/lodestone.conf dist/lodestone.pc.in
ls_edit_paths = sed -e 's|@bindir[@]|$(bindir)|g' \
	-e 's|@sysconfdir[@]|$(sysconfdir)|g' \
	-e 's|@localstatedir[@]|$(localstatedir)|g'
dist/lodestone.service: $(srcdir)/dist/lodestone.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) dist && $(ls_edit_paths) $(srcdir)/dist/lodestone.service.in > $@
dist/lodestone@.service: $(srcdir)/dist/lodestone@.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) dist && $(ls_edit_paths) '$(srcdir)/dist/lodestone@.service.in' > '$@'
all-local: dist/lodestone.service dist/lodestone@.service

# The sample configuration goes to $(docdir); packages install it as
# $(sysconfdir)/lodestone/lodestone.conf.
dist_doc_DATA = dist/lodestone.conf docs/lodestone.conf.example

# Man pages (mdoc).
dist_man_MANS = man/lodestone.8 man/lodestone.conf.5 man/lodectl.1 \
	man/lodebench.1

install-data-local:
	$(MKDIR_P) '$(DESTDIR)$(includedir)/lodestone/wire'
	@set -e; for h in $(LIBLODESTONE_H) $(LIBLODESTONE_WIRE_H); do \
	  case $$h in wire/*) d=lodestone/wire ;; *) d=lodestone ;; esac; \
	  echo " INSTALL  $(includedir)/$$d/`basename $$h`"; \
	  sed 's|^#include "wire/|#include "lodestone/wire/|' '$(srcdir)/'$$h \
	    > '$(DESTDIR)$(includedir)/'$$d/`basename $$h`; \
	  chmod 644 '$(DESTDIR)$(includedir)/'$$d/`basename $$h`; \
	done
uninstall-local:
	rm -f $(LIBLODESTONE_H:client/%='$(DESTDIR)$(includedir)/lodestone/%') \
	  $(LIBLODESTONE_WIRE_H:wire/%='$(DESTDIR)$(includedir)/lodestone/wire/%')
	-rmdir '$(DESTDIR)$(includedir)/lodestone/wire' '$(DESTDIR)$(includedir)/lodestone'

# make check: every option of `lodestone --help` is in lodestone(8) and
# back; liblodestone installs into a staging prefix and a program builds
# and links against it through pkg-config, seeing only the public API.
DIST_TESTS = tests/layout/manpage.sh tests/dist/libinstall.sh
EXTRA_DIST += tests/layout/manpage.sh tests/dist/libinstall.sh \
	tests/dist/deb-install.sh

# /readyz and the sd_notify protocol on real processes.
INTEGRATION_TESTS += tests/integration/test_ops
tests_integration_test_ops_SOURCES = tests/integration/test_ops.c
tests_integration_test_ops_LDADD = tests/integration/libharness.a \
	$(CMOCKA_LIBS) $(DEP_LIBS)

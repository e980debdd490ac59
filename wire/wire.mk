# wire/: pure protocol codecs (no I/O, no globals). The Felix half lives in
# wire/felix.mk, the FSNP half in wire/fsnp.mk; both append to
# wire_libwire_a_SOURCES, UNIT_TESTS and FUZZ_TARGETS.
noinst_LTLIBRARIES += wire/libwire.la
NODE_LIBS += wire/libwire.la
wire_libwire_la_SOURCES = wire/base64url.c wire/base64url.h
include wire/felix.mk
include wire/fsnp.mk

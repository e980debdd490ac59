# wire/: pure protocol codecs (no I/O, no globals). The Felix half lives in
# wire/felix.mk, the FSNP half in wire/fsnp.mk; both append to
# wire_libwire_a_SOURCES, UNIT_TESTS and FUZZ_TARGETS.
noinst_LIBRARIES += wire/libwire.a
NODE_LIBS += wire/libwire.a
wire_libwire_a_SOURCES =
include wire/felix.mk
include wire/fsnp.mk

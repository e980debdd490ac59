# wire/: pure protocol codecs. Appends to noinst_LIBRARIES, NODE_LIBS,
# UNIT_TESTS and FUZZ_TARGETS (see Makefile.am).

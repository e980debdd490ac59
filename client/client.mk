# client/: see docs/architecture.md. Appends to noinst_LIBRARIES, NODE_LIBS,
# UNIT_TESTS and FUZZ_TARGETS (see Makefile.am).

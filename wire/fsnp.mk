# FSNP codecs (see wire/wire.mk): frames, typed values, chunking,
# compression, compact bodies, the 0xA0 flow query result, opcodes, slots.
wire_libwire_la_SOURCES += \
	wire/fsnp_error.c wire/fsnp_error.h \
	wire/fsnp_value.c wire/fsnp_value.h \
	wire/fsnp_frame.c wire/fsnp_frame.h \
	wire/fsnp_chunk.c wire/fsnp_chunk.h \
	wire/fsnp_compress.c wire/fsnp_compress.h \
	wire/fsnp_compact.c wire/fsnp_compact.h \
	wire/fsnp_fqr.c wire/fsnp_fqr.h \
	wire/fsnp_opcode.c wire/fsnp_opcode.h \
	wire/fsnp_slot.c wire/fsnp_slot.h \
	wire/flow_route.c wire/flow_route.h \
	wire/resp_parse.c wire/resp_parse.h \
	wire/resp_reply.c wire/resp_reply.h

# Unit tests share a few helpers (hex, vector paths, a seeded PRNG).
FSNP_TEST_HELPERS = tests/unit/fsnp_test_util.c tests/unit/fsnp_test_util.h

UNIT_TESTS += tests/unit/test_fsnp_value
tests_unit_test_fsnp_value_SOURCES = tests/unit/test_fsnp_value.c \
	$(FSNP_TEST_HELPERS)
tests_unit_test_fsnp_value_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_fsnp_frame
tests_unit_test_fsnp_frame_SOURCES = tests/unit/test_fsnp_frame.c \
	$(FSNP_TEST_HELPERS)
tests_unit_test_fsnp_frame_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_fsnp_chunk
tests_unit_test_fsnp_chunk_SOURCES = tests/unit/test_fsnp_chunk.c \
	$(FSNP_TEST_HELPERS)
tests_unit_test_fsnp_chunk_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_fsnp_compact
tests_unit_test_fsnp_compact_SOURCES = tests/unit/test_fsnp_compact.c \
	$(FSNP_TEST_HELPERS)
tests_unit_test_fsnp_compact_LDADD = wire/libwire.la $(DEP_LIBS) \
	$(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_fsnp_opcode
tests_unit_test_fsnp_opcode_SOURCES = tests/unit/test_fsnp_opcode.c \
	$(FSNP_TEST_HELPERS)
tests_unit_test_fsnp_opcode_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_fsnp_slot
tests_unit_test_fsnp_slot_SOURCES = tests/unit/test_fsnp_slot.c \
	$(FSNP_TEST_HELPERS)
tests_unit_test_fsnp_slot_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_fsnp_frame
tests_fuzz_fuzz_fsnp_frame_SOURCES = tests/fuzz/fuzz_fsnp_frame.c
tests_fuzz_fuzz_fsnp_frame_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_fsnp_frame_LDFLAGS = $(FUZZER_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_fsnp_value
tests_fuzz_fuzz_fsnp_value_SOURCES = tests/fuzz/fuzz_fsnp_value.c \
	$(FSNP_TEST_HELPERS)
tests_fuzz_fuzz_fsnp_value_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_fsnp_value_LDFLAGS = $(FUZZER_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_fsnp_chunk
tests_fuzz_fuzz_fsnp_chunk_SOURCES = tests/fuzz/fuzz_fsnp_chunk.c
tests_fuzz_fuzz_fsnp_chunk_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_fsnp_chunk_LDFLAGS = $(FUZZER_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_fsnp_compress
tests_fuzz_fuzz_fsnp_compress_SOURCES = tests/fuzz/fuzz_fsnp_compress.c
tests_fuzz_fuzz_fsnp_compress_LDADD = wire/libwire.la $(FUZZ_DRIVER) \
	$(DEP_LIBS)
tests_fuzz_fuzz_fsnp_compress_LDFLAGS = $(FUZZER_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_fsnp_compact
tests_fuzz_fuzz_fsnp_compact_SOURCES = tests/fuzz/fuzz_fsnp_compact.c
tests_fuzz_fuzz_fsnp_compact_LDADD = wire/libwire.la $(FUZZ_DRIVER) \
	$(DEP_LIBS)
tests_fuzz_fuzz_fsnp_compact_LDFLAGS = $(FUZZER_LINKFLAGS)

EXTRA_DIST += \
	tests/fuzz/corpus/fuzz_fsnp_frame \
	tests/fuzz/corpus/fuzz_fsnp_value \
	tests/fuzz/corpus/fuzz_fsnp_chunk \
	tests/fuzz/corpus/fuzz_fsnp_compress \
	tests/fuzz/corpus/fuzz_fsnp_compact \
	tests/vectors/fsnp

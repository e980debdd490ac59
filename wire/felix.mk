# Felix v1 codecs (see wire/wire.mk): frame envelope, JSON messages, binary
# payloads, routing hash, and their helpers. wire/buf.{c,h} (struct wbuf, a
# growable byte buffer) is generic and listed here once for both halves.
wire_libwire_la_SOURCES += wire/felix_features.h \
	wire/buf.c wire/buf.h \
	wire/felix_base64.c wire/felix_base64.h \
	wire/felix_binary.c wire/felix_binary.h \
	wire/felix_frame.c wire/felix_frame.h \
	wire/felix_hash.c wire/felix_hash.h \
	wire/felix_msg.c wire/felix_msg.h \
	wire/felix_utf8.c wire/felix_utf8.h

FELIX_TEST_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)
# Header-only helpers (files, hex, vector paths, a seeded PRNG).
FELIX_TEST_UTIL = tests/unit/felix_test_util.h

# Every vector in $(LS_SHARED_DIR)/vectors/felix and tests/vectors/felix.
UNIT_TESTS += tests/unit/test_felix_vectors
tests_unit_test_felix_vectors_SOURCES = tests/unit/test_felix_vectors.c \
	$(FELIX_TEST_UTIL)
tests_unit_test_felix_vectors_LDADD = $(FELIX_TEST_LDADD)

UNIT_TESTS += tests/unit/test_felix_frame
tests_unit_test_felix_frame_SOURCES = tests/unit/test_felix_frame.c
tests_unit_test_felix_frame_LDADD = $(FELIX_TEST_LDADD)

UNIT_TESTS += tests/unit/test_felix_hash
tests_unit_test_felix_hash_SOURCES = tests/unit/test_felix_hash.c
tests_unit_test_felix_hash_LDADD = $(FELIX_TEST_LDADD)

UNIT_TESTS += tests/unit/test_felix_binary
tests_unit_test_felix_binary_SOURCES = tests/unit/test_felix_binary.c \
	$(FELIX_TEST_UTIL)
tests_unit_test_felix_binary_LDADD = $(FELIX_TEST_LDADD)

UNIT_TESTS += tests/unit/test_felix_msg
tests_unit_test_felix_msg_SOURCES = tests/unit/test_felix_msg.c \
	$(FELIX_TEST_UTIL)
tests_unit_test_felix_msg_LDADD = $(FELIX_TEST_LDADD)

FUZZ_TARGETS += tests/fuzz/fuzz_felix_frame
tests_fuzz_fuzz_felix_frame_SOURCES = tests/fuzz/fuzz_felix_frame.c
tests_fuzz_fuzz_felix_frame_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_felix_frame_LDFLAGS = $(FUZZER_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_felix_json
tests_fuzz_fuzz_felix_json_SOURCES = tests/fuzz/fuzz_felix_json.c
tests_fuzz_fuzz_felix_json_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_felix_json_LDFLAGS = $(FUZZER_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_felix_binary
tests_fuzz_fuzz_felix_binary_SOURCES = tests/fuzz/fuzz_felix_binary.c
tests_fuzz_fuzz_felix_binary_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_felix_binary_LDFLAGS = $(FUZZER_LINKFLAGS)

EXTRA_DIST += \
	tests/vectors/felix \
	tests/fuzz/corpus/fuzz_felix_frame \
	tests/fuzz/corpus/fuzz_felix_json \
	tests/fuzz/corpus/fuzz_felix_binary

# node/resp: the RESP (Redis protocol) listener (docs/resp.md): listeners,
# connections and ordered replies, and the commands, KV ones planned by
# the FSNP command layer. The pure parser and reply encoders are in wire/.
node_libnode_a_SOURCES += node/resp/resp.h node/resp/resp_internal.h \
	node/resp/resp_server.c node/resp/resp_cmd.c \
	node/resp/resp_multi.c

EXTRA_DIST += docs/resp.md

# Unit: the RESP parser and reply encoders.
UNIT_TESTS += tests/unit/test_resp_parse
tests_unit_test_resp_parse_SOURCES = tests/unit/test_resp_parse.c
tests_unit_test_resp_parse_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

# Unit: KEYS/SCAN globs and the SCAN cursor.
UNIT_TESTS += tests/unit/test_resp_keys
tests_unit_test_resp_keys_SOURCES = tests/unit/test_resp_keys.c \
	store/kvscan.c store/kvscan.h
tests_unit_test_resp_keys_LDADD = $(CMOCKA_LIBS)

# Fuzz: KEYS/SCAN patterns and cursors from the user.
FUZZ_TARGETS += tests/fuzz/fuzz_resp_glob
tests_fuzz_fuzz_resp_glob_SOURCES = tests/fuzz/fuzz_resp_glob.c \
	store/kvscan.c store/kvscan.h
tests_fuzz_fuzz_resp_glob_LDADD = $(FUZZ_DRIVER)
tests_fuzz_fuzz_resp_glob_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_resp_glob

# Fuzz: the parser on arbitrary input, inline and multibulk, in pieces.
FUZZ_TARGETS += tests/fuzz/fuzz_resp_parse
tests_fuzz_fuzz_resp_parse_SOURCES = tests/fuzz/fuzz_resp_parse.c
tests_fuzz_fuzz_resp_parse_LDADD = wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_resp_parse_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_resp_parse tests/interop/resp_redis_cli.mjs \
	tests/interop/resp_ioredis.mjs

# Integration: a real lodestone over RESP (a small client in the test),
# and the same session against redis-server, compared byte for byte.
INTEGRATION_TESTS += tests/integration/test_resp
tests_integration_test_resp_SOURCES = tests/integration/test_resp.c
tests_integration_test_resp_LDADD = tests/integration/libharness.a \
	wire/libwire.la $(CMOCKA_LIBS) $(DEP_LIBS)

/* Unit tests for wire/fsnp_opcode: the table against every opcode line of
 * the FSNP specification (read from the shared seeds at run time). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/fsnp_test_util.h"
#include "wire/fsnp_error.h"
#include "wire/fsnp_opcode.h"

#define SEED "seeds/002_bbd1d35c3a4325c3.txt"

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	return -1;
}

/* A specification line "0xNNNN NAME ..." gives code and name. */
static bool parse_line(const char *line, uint16_t *code, char *name, size_t cap)
{
	unsigned v = 0;
	if (strncmp(line, "0x", 2) != 0) {
		return false;
	}
	for (int i = 2; i < 6; i++) {
		int d = hexdigit(line[i]);
		if (d < 0) {
			return false;
		}
		v = v * 16 + (unsigned)d;
	}
	if (line[6] != ' ') {
		return false;
	}
	size_t n = 0;
	const char *p = line + 7;
	while (p[n] != '\0' && p[n] != ' ' && p[n] != '\n' && n + 1 < cap) {
		n++;
	}
	if (n == 0) {
		return false;
	}
	memcpy(name, p, n);
	name[n] = '\0';
	*code = (uint16_t)v;
	return true;
}

static void test_table_matches_seed(void **state)
{
	char path[1024];
	size_t seen = 0;
	bool command_exec_in_seed = false;
	(void)state;
	snprintf(path, sizeof path, "%s/%s", fsnp_test_shared_dir(), SEED);
	char *text = fsnp_test_read_file(path, NULL);
	if (text == NULL) {
		fail_msg("cannot read %s", path);
	}
	for (char *line = text; line != NULL && *line != '\0';) {
		char *next = strchr(line, '\n');
		uint16_t code;
		char name[64];
		if (next != NULL) {
			*next++ = '\0';
		}
		if (parse_line(line, &code, name, sizeof name)) {
			const char *got = fsnp_opcode_name(code);
			uint16_t back = 0;
			if (got == NULL || strcmp(got, name) != 0) {
				fail_msg("0x%04X: want %s, table has %s", code,
				         name, got ? got : "nothing");
			}
			assert_int_equal(
			    fsnp_opcode_by_name(name, strlen(name), &back), 0);
			assert_int_equal(back, code);
			command_exec_in_seed |= code == FSNP_OP_COMMAND_EXEC;
			seen++;
		}
		line = next;
	}
	free(text);
	assert_int_equal(seen, 130);
	assert_false(command_exec_in_seed);
	/* The table is the seed's opcodes plus COMMAND_EXEC. */
	assert_int_equal(fsnp_opcode_count(), seen + 1);
	assert_string_equal(fsnp_opcode_name(0x0100), "COMMAND_EXEC");
}

static void test_table_order(void **state)
{
	(void)state;
	for (size_t i = 0; i < fsnp_opcode_count(); i++) {
		const struct fsnp_opcode_info *e = fsnp_opcode_at(i);
		assert_non_null(e);
		assert_ptr_equal(fsnp_opcode_info(e->code), e);
		if (i > 0) {
			assert_true(fsnp_opcode_at(i - 1)->code < e->code);
		}
	}
	assert_null(fsnp_opcode_at(fsnp_opcode_count()));
}

static void test_lookups(void **state)
{
	uint16_t code = 0;
	(void)state;
	assert_int_equal(FSNP_OP_FLOW_QUERY, 0x0231);
	assert_int_equal(FSNP_OP_FLOW_VALUE_MGET, 0x020C);
	assert_int_equal(FSNP_OP_FERRICSTORE_BLOBGC, 0x0310);
	assert_int_equal(fsnp_opcode_by_name("flow.claim_due", 14, &code), 0);
	assert_int_equal(code, FSNP_OP_FLOW_CLAIM_DUE);
	assert_int_equal(fsnp_opcode_by_name("GETX", 3, &code), 0);
	assert_int_equal(code, FSNP_OP_GET);
	assert_int_equal(fsnp_opcode_by_name("GE", 2, &code),
	                 FSNP_ERR_UNKNOWN_OPCODE);
	assert_int_equal(fsnp_opcode_by_name("", 0, &code),
	                 FSNP_ERR_UNKNOWN_OPCODE);
	/* The removed record-collection commands are gone. */
	assert_int_equal(fsnp_opcode_by_name("FLOW.LIST", 9, &code),
	                 FSNP_ERR_UNKNOWN_OPCODE);
	assert_int_equal(fsnp_opcode_by_name("FLOW.SEARCH", 11, &code),
	                 FSNP_ERR_UNKNOWN_OPCODE);
	const uint16_t unknown[] = {0x0000, 0x0013, 0x00FF, 0x010E, 0x020E,
	                            0x0217, 0x0230, 0x0259, 0x0311, 0xFFFF};
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
		assert_null(fsnp_opcode_name(unknown[i]));
		assert_false(fsnp_opcode_is_control(unknown[i]));
	}
}

static void test_groups(void **state)
{
	(void)state;
	assert_true(fsnp_opcode_is_control(FSNP_OP_HELLO));
	assert_true(fsnp_opcode_is_control(FSNP_OP_STARTUP));
	assert_true(fsnp_opcode_is_control(FSNP_OP_EVENT));
	assert_true(fsnp_opcode_is_control(FSNP_OP_UNSUBSCRIBE_EVENTS));
	/* PIPELINE is numbered with control but travels on data lanes. */
	assert_false(fsnp_opcode_is_control(FSNP_OP_PIPELINE));
	assert_false(fsnp_opcode_is_control(FSNP_OP_COMMAND_EXEC));
	assert_false(fsnp_opcode_is_control(FSNP_OP_GET));
	assert_false(fsnp_opcode_is_control(FSNP_OP_FLOW_QUERY));
	assert_false(fsnp_opcode_is_control(FSNP_OP_CLUSTER_HEALTH));
	assert_int_equal(fsnp_opcode_info(FSNP_OP_FLOW_QUERY)->group,
	                 FSNP_OPG_FLOW);
	assert_int_equal(fsnp_opcode_info(FSNP_OP_CLUSTER_SLOTS)->group,
	                 FSNP_OPG_ADMIN);
	assert_int_equal(fsnp_opcode_info(FSNP_OP_ZSCORE)->group, FSNP_OPG_KV);
	/* Lanes: data opcodes never on lane 0; control ones anywhere. */
	assert_int_equal(fsnp_opcode_check_lane(FSNP_OP_GET, 1), 0);
	assert_int_equal(fsnp_opcode_check_lane(FSNP_OP_GET, 0),
	                 FSNP_ERR_CONTROL_LANE);
	assert_int_equal(fsnp_opcode_check_lane(FSNP_OP_PIPELINE, 0),
	                 FSNP_ERR_CONTROL_LANE);
	assert_int_equal(fsnp_opcode_check_lane(FSNP_OP_STARTUP, 0), 0);
	assert_int_equal(fsnp_opcode_check_lane(FSNP_OP_PING, 3), 0);
	assert_int_equal(fsnp_opcode_check_lane(0x0230, 1),
	                 FSNP_ERR_UNKNOWN_OPCODE);
	assert_string_equal(fsnp_strerror(FSNP_ERR_UNKNOWN_OPCODE),
	                    "ERR native unsupported opcode");
	assert_true(fsnp_opcode_is_server_initiated(FSNP_OP_GOAWAY));
	assert_true(fsnp_opcode_is_server_initiated(FSNP_OP_EVENT));
	assert_false(fsnp_opcode_is_server_initiated(FSNP_OP_PING));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_matches_seed),
	    cmocka_unit_test(test_table_order),
	    cmocka_unit_test(test_lookups),
	    cmocka_unit_test(test_groups),
	};
	return cmocka_run_group_tests_name("fsnp_opcode", tests, NULL, NULL);
}

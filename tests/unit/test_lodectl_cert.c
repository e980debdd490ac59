/* lodectl cert's pure part: the subjectAltName built from --host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client/lodectl.h"

static void test_san(void **state)
{
	const char *hosts[] = {"localhost", "127.0.0.1", "::1", "n1.example"};
	const char *bad[] = {"a,b"};
	const char *bad2[] = {"a b"};
	const char *bad3[] = {""};
	const char *bad4[] = {"DNS:x"};
	char out[128];
	(void)state;

	assert_int_equal(lodectl_cert_san(hosts, 0, out, sizeof out), 0);
	assert_string_equal(out, "");
	assert_int_equal(lodectl_cert_san(hosts, 4, out, sizeof out), 0);
	assert_string_equal(out,
	                    "DNS:localhost,IP:127.0.0.1,IP:::1,DNS:n1.example");
	assert_int_equal(lodectl_cert_san(bad, 1, out, sizeof out), -1);
	assert_int_equal(lodectl_cert_san(bad2, 1, out, sizeof out), -1);
	assert_int_equal(lodectl_cert_san(bad3, 1, out, sizeof out), -1);
	assert_int_equal(lodectl_cert_san(bad4, 1, out, sizeof out), -1);
	assert_int_equal(lodectl_cert_san(hosts, 4, out, 20), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_san),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

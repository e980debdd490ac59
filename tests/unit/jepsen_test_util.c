/* Checker test helpers; see jepsen_test_util.h. */
#include "tests/unit/jepsen_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

int jepsen_test_check(jepsen_test_check_fn fn, const char *text,
                      const char *kind, const char *what)
{
	struct jepsen_history h;
	struct jepsen_anomalies a;
	char err[512];
	int n;
	jepsen_history_init(&h);
	jepsen_anomalies_init(&a);
	if (jepsen_history_parse(&h, JEPSEN_FORMAT_LINES, text, strlen(text),
	                         err, sizeof err) != 0) {
		print_error("parse: %s\n", err);
		fail();
	}
	if (fn(&h, &a, err, sizeof err) != 0) {
		n = -1;
	} else {
		n = (int)jepsen_anomalies_count(&a);
	}
	if (kind != NULL) {
		int found = 0;
		for (size_t i = 0; i < a.n; i++) {
			if (strcmp(a.items[i].kind, kind) == 0 &&
			    strstr(a.items[i].msg, what) != NULL) {
				found = 1;
			}
		}
		if (!found) {
			print_error("no %s anomaly mentioning '%s'; got:\n",
			            kind, what);
			for (size_t i = 0; i < a.n; i++) {
				print_error("  %s line %u: %s\n",
				            a.items[i].kind, a.items[i].line,
				            a.items[i].msg);
			}
		}
		assert_true(found);
	}
	jepsen_anomalies_free(&a);
	jepsen_history_free(&h);
	return n;
}

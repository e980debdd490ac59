/* The progress of a remove or replace operation (node/membership.c
 * membership_group_rebuilt): when a group the departed node held counts
 * as rebuilt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "node/membership.h"

/* A remove (no new node): rebuilt once the other holders reach the
 * target. */
static void test_remove(void **state)
{
	const uint64_t t[] = {1, 2, 4};
	(void)state;
	assert_false(membership_group_rebuilt(t, 3, 2, 0, false));
	assert_true(membership_group_rebuilt(t, 3, 3, 0, false));
	assert_true(membership_group_rebuilt(t, 3, 4, 0, false));
}

/* A replace whose target gives the new node the group: it must hold it. */
static void test_replace_due(void **state)
{
	const uint64_t t[] = {2, 5, 4}; /* node 5 took the dead node's slot */
	(void)state;
	assert_false(membership_group_rebuilt(t, 3, 3, 5, false));
	assert_false(membership_group_rebuilt(t, 3, 2, 5, true));
	assert_true(membership_group_rebuilt(t, 3, 3, 5, true));
}

/* The dead node's last published groups listed one it had already left
 * (placement moved it off when another node joined, and it was killed
 * before it published again): the new node, in its slot, is not due
 * there, and the group is rebuilt without it. Before, such a replace
 * stayed "running" for ever (seen under jepsen/run's membership nemesis:
 * 8 of 9 groups). */
static void test_replace_stale_group(void **state)
{
	const uint64_t t[] = {1, 2, 4}; /* no slot of the dead node 3 */
	(void)state;
	assert_true(membership_group_rebuilt(t, 3, 3, 5, false));
	assert_false(membership_group_rebuilt(t, 3, 2, 5, false));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_remove),
	    cmocka_unit_test(test_replace_due),
	    cmocka_unit_test(test_replace_stale_group),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

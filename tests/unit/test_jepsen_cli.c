/* Tests of the jepsen/check program: verdict words on stdout and exit
 * codes (0 valid, 1 invalid, 2 bad input or usage, 3 unknown). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define CHECK_BIN LS_ABS_BUILDDIR "/jepsen/check"

static const char *shared_dir(void)
{
	const char *dir = getenv("LS_SHARED_DIR");
	return dir != NULL && dir[0] != '\0' ? dir : LS_SHARED_DIR;
}

struct tmpdir {
	char path[256];
};

static int setup(void **state)
{
	struct tmpdir *t = calloc(1, sizeof *t);
	const char *base = getenv("TMPDIR");
	snprintf(t->path, sizeof t->path, "%s/jepsen-cli-XXXXXX",
	         base != NULL ? base : "/tmp");
	if (mkdtemp(t->path) == NULL) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tmpdir *t = *state;
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->path);
	int rc = system(cmd);
	free(t);
	return rc == 0 ? 0 : -1;
}

static const char *write_file(struct tmpdir *t, const char *name,
                              const char *text)
{
	static char path[512];
	snprintf(path, sizeof path, "%s/%s", t->path, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Runs check with `args`; returns the exit code and the first stdout
 * line in out. */
static int run(const char *args, char *out, size_t outlen)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", CHECK_BIN, args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	out[0] = '\0';
	if (fgets(out, (int)outlen, p) != NULL) {
		out[strcspn(out, "\n")] = '\0';
	}
	char rest[256];
	while (fgets(rest, sizeof rest, p) != NULL) {
	}
	int status = pclose(p);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_vectors(void **state)
{
	char args[1024], out[256];
	(void)state;
	snprintf(args, sizeof args,
	         "linearizable --format etcd-log "
	         "%s/vectors/linearizability/etcd/etcd_002.log",
	         shared_dir());
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_string_equal(out, "linearizable");
	snprintf(args, sizeof args,
	         "linearizable --format etcd-log "
	         "%s/vectors/linearizability/etcd/etcd_000.log",
	         shared_dir());
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_string_equal(out, "not-linearizable");
	snprintf(args, sizeof args,
	         "linearizable --format kv-edn --max-mb 64 --max-ms 60000 "
	         "%s/vectors/linearizability/kv/c50-bad.txt",
	         shared_dir());
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_string_equal(out, "not-linearizable");
	snprintf(args, sizeof args,
	         "linearizable --stats --format kv-edn "
	         "%s/vectors/linearizability/kv/c50-ok.txt",
	         shared_dir());
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_string_equal(out, "linearizable");
}

static void test_bad_input(void **state)
{
	struct tmpdir *t = *state;
	char args[1024], out[256];
	assert_int_equal(run("", out, sizeof out), 2);
	assert_int_equal(run("frobnicate x", out, sizeof out), 2);
	assert_int_equal(run("linearizable --format json x", out, sizeof out),
	                 2);
	assert_int_equal(run("linearizable /nonexistent/file", out, sizeof out),
	                 2);
	assert_int_equal(run("linearizable", out, sizeof out), 2);
	assert_int_equal(run("linearizable --max-ms", out, sizeof out), 2);
	const char *garbage = write_file(t, "garbage", "hello\nworld\n");
	snprintf(args, sizeof args, "linearizable --format etcd-log %s",
	         garbage);
	assert_int_equal(run(args, out, sizeof out), 2);
	snprintf(args, sizeof args, "linearizable --format kv-edn %s", garbage);
	assert_int_equal(run(args, out, sizeof out), 2);
	snprintf(args, sizeof args, "set %s", garbage);
	assert_int_equal(run(args, out, sizeof out), 2);
	/* Workload checkers read only the line format. */
	snprintf(args, sizeof args, "set --format etcd-log %s", garbage);
	assert_int_equal(run(args, out, sizeof out), 2);
	/* Wrong vocabulary for the checker. */
	const char *reg = write_file(t, "reg",
	                             "0 1 invoke write x 1\n"
	                             "1 1 ok write x 1\n");
	snprintf(args, sizeof args, "counter %s", reg);
	assert_int_equal(run(args, out, sizeof out), 2);
	assert_int_equal(run("--help", out, sizeof out), 0);
}

static void test_linearizable_lines(void **state)
{
	struct tmpdir *t = *state;
	char args[1024], out[256];
	const char *ok = write_file(t, "ok",
	                            "0 1 invoke write x 1\n"
	                            "1 1 ok write x 1\n"
	                            "2 2 invoke read x\n"
	                            "3 2 ok read x 1\n");
	snprintf(args, sizeof args, "linearizable %s", ok);
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_string_equal(out, "linearizable");
	const char *bad = write_file(t, "bad",
	                             "0 1 invoke write x 1\n"
	                             "1 1 ok write x 1\n"
	                             "2 2 invoke read x\n"
	                             "3 2 ok read x 2\n");
	snprintf(args, sizeof args, "linearizable --format lines %s", bad);
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_string_equal(out, "not-linearizable");
	/* A history that needs more than one step, with a one-step cap. */
	const char *hard = write_file(t, "hard",
	                              "0 1 invoke write x 1\n"
	                              "1 2 invoke write x 2\n"
	                              "2 1 ok write x 1\n"
	                              "3 2 ok write x 2\n"
	                              "4 3 invoke read x\n"
	                              "5 3 ok read x 3\n");
	snprintf(args, sizeof args, "linearizable --max-steps 1 %s", hard);
	assert_int_equal(run(args, out, sizeof out), 3);
	assert_string_equal(out, "unknown");
}

static void test_workloads(void **state)
{
	struct tmpdir *t = *state;
	char args[1024], out[256];
	static const struct {
		const char *checker, *good, *bad;
	} cases[] = {
	    {"set",
	     "0 1 invoke add s a\n1 1 ok add s a\n"
	     "2 1 invoke read s\n3 1 ok read s a\n",
	     "0 1 invoke add s a\n1 1 ok add s a\n"
	     "2 1 invoke read s\n3 1 ok read s\n"},
	    {"stream",
	     "0 1 invoke append p a\n1 1 ok append p a 0\n"
	     "2 1 invoke read p\n3 1 ok read p 0:a\n",
	     "0 1 invoke append p a\n1 1 ok append p a 0\n"
	     "2 1 invoke read p\n3 1 ok read p 1:a\n"},
	    {"counter",
	     "0 1 invoke add c 2\n1 1 ok add c 2\n"
	     "2 1 invoke read c\n3 1 ok read c 2\n",
	     "0 1 invoke add c 2\n1 1 ok add c 2\n"
	     "2 1 invoke read c\n3 1 ok read c 1\n"},
	    {"queue",
	     "0 1 invoke publish q a\n1 1 ok publish q a\n"
	     "2 2 invoke consume q\n3 2 ok consume q a\n"
	     "4 2 invoke ack q a\n5 2 ok ack q a\n",
	     "0 1 invoke publish q a\n1 1 ok publish q a\n"},
	    {"exactly-once",
	     "0 1 invoke send t a\n1 1 ok send t a\n"
	     "2 2 invoke recv t\n3 2 ok recv t a\n",
	     "0 1 invoke send t a\n1 1 ok send t a\n"
	     "2 2 invoke recv t\n3 2 ok recv t a a\n"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *good = write_file(t, "good", cases[i].good);
		snprintf(args, sizeof args, "%s %s", cases[i].checker, good);
		assert_int_equal(run(args, out, sizeof out), 0);
		assert_string_equal(out, "valid");
		const char *bad = write_file(t, "bad", cases[i].bad);
		snprintf(args, sizeof args, "%s --stats %s", cases[i].checker,
		         bad);
		assert_int_equal(run(args, out, sizeof out), 1);
		assert_string_equal(out, "invalid");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_linearizable_lines, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_workloads, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

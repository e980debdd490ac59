/* lodestone: parse the configuration, start the node, run until drained. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/config.h"
#include "node/crash.h"
#include "node/node.h"

extern char **environ;

int main(int argc, char *argv[])
{
	static struct node node; /* large; lives for the whole process */
	struct node_config cfg;
	enum config_action action;
	char err[1024];

	/* A peer that vanishes mid-write must cost an EPIPE on that socket,
	 * not the process: libuv writes to TCP streams without MSG_NOSIGNAL.
	 * (Found by jepsen-quick: a partitioned node died of SIGPIPE.) */
	signal(SIGPIPE, SIG_IGN);
	/* A node that dies of a fault says where (node/crash.h). */
	crash_install();
	if (config_load(&cfg, argc, argv, environ, &action, err, sizeof err) !=
	    0) {
		fprintf(stderr, "lodestone: %s\n", err);
		return 2;
	}
	if (action == CONFIG_HELP) {
		config_usage(1);
		return 0;
	}
	if (action == CONFIG_VERSION) {
		printf("lodestone %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (node_start(&node, &cfg, err, sizeof err) != 0) {
		fprintf(stderr, "lodestone: %s\n", err);
		return 1;
	}
	node_print_endpoints(&node, 1);
	return node_run(&node);
}

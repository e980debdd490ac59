/* lodebench: the family dispatch table; see lodebench.h. */
#include "client/lodebench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct family {
	const char *name;
	lodebench_family_fn run;
	const char *help;
};

/* One line per benchmark family. */
static const struct family families[] = {
    {"felix", lodebench_felix_main,
     "Felix publish throughput, latency and fan-out over QUIC"},
    {"flow", lodebench_flow_main,
     "FerricFlow create/claim/complete cycles per second, claim latency"},
    {"flow-query", lodebench_flow_query_main,
     "FLOW.QUERY point reads and LIMIT 50 pages: queries/s, latency, cost"},
    {"kv", lodebench_kv_main,
     "FSNP GET/SET ops/s and latency (redis-benchmark style)"},
};

#define N_FAMILIES (sizeof families / sizeof families[0])

int lodebench_split_hostport(const char *v, char *host, size_t cap,
                             uint16_t *port)
{
	const char *colon = strrchr(v, ':');
	char *end;
	unsigned long p;
	if (colon == NULL || (size_t)(colon - v) >= cap) {
		return -1;
	}
	p = strtoul(colon + 1, &end, 10);
	if (end == colon + 1 || *end != '\0' || p == 0 || p > 65535) {
		return -1;
	}
	memcpy(host, v, (size_t)(colon - v));
	host[colon - v] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: lodebench FAMILY [OPTIONS]\n\nFamilies:\n");
	for (size_t i = 0; i < N_FAMILIES; i++) {
		fprintf(out, "  %-8s %s\n", families[i].name, families[i].help);
	}
	fprintf(out, "\n'lodebench FAMILY --help' for its options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < N_FAMILIES; i++) {
		if (strcmp(argv[1], families[i].name) == 0) {
			return families[i].run(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "lodebench: unknown family '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

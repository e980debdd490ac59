/* The daemon's configuration: every option is a command-line flag
 * (`--node-id 3`), a config-file key (`node-id = 3`, `#` comments) and an
 * environment variable (`LODESTONE_NODE_ID=3`); precedence is
 * flag > environment > file > default.
 *
 * config_load() owns nothing outside the struct: all strings are copied into
 * fixed buffers, so a `struct node_config` can be copied and freed freely. */
#ifndef LS_NODE_CONFIG_H
#define LS_NODE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/log.h"

#define CONFIG_HOST_MAX 256
#define CONFIG_PATH_MAX 1024
#define CONFIG_PEERS_MAX 64

struct config_addr {
	char host[CONFIG_HOST_MAX];
	uint16_t port;
};

struct config_peer {
	uint64_t id;
	struct config_addr addr;
};

struct node_config {
	char config_file[CONFIG_PATH_MAX];
	char data_dir[CONFIG_PATH_MAX];
	uint64_t node_id;
	char cluster_id[128];
	struct config_addr internal;
	struct config_addr felix;
	struct config_addr fsnp;
	struct config_addr fsnp_tls;
	struct config_addr admin;
	char advertise_host[CONFIG_HOST_MAX];
	struct config_peer peers[CONFIG_PEERS_MAX];
	unsigned n_peers;
	unsigned shards;
	unsigned replicas;
	unsigned auto_create_shards;
	bool dev;
	char tls_cert[CONFIG_PATH_MAX];
	char tls_key[CONFIG_PATH_MAX];
	enum log_level log_level;
	enum log_format log_format;
	/* Which options were given explicitly (by any source), by table index.
	 */
	uint64_t set_mask;
};

enum config_action {
	CONFIG_RUN = 0,
	CONFIG_HELP,
	CONFIG_VERSION,
};

/* Fills `c` from defaults, the config file (from --config or
 * LODESTONE_CONFIG), `envp` (NULL-terminated "K=V" strings) and argv, then
 * derives what depends on others (data dir, replicas, advertise host) and
 * validates. On error returns -1 with a message naming the option, where it
 * came from and why in `err`. */
int config_load(struct node_config *c, int argc, char *const argv[],
                char *const envp[], enum config_action *action, char *err,
                size_t errlen);

/* Parses "HOST:PORT" or "[V6]:PORT". */
int config_parse_addr(const char *s, struct config_addr *out);

/* Number of distinct nodes in the cluster: this node plus its peers. */
unsigned config_node_count(const struct node_config *c);

/* Writes the --help text. */
void config_usage(int fd);

#endif

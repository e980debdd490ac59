# client/fsnp: the FSNP half of liblodestone (client/fsnp_client.c),
# lodectl (a subcommand table: client/lodectl.c; KV commands in
# client/lodectl_kv.c) and lodebench (modes: client/lodebench.c; kv mode in
# client/lodebench_kv.c).
client_liblodestone_la_SOURCES += client/fsnp_client.c client/fsnp_client.h

lodectl_SOURCES += client/lodectl_kv.c
lodebench_SOURCES += client/lodebench_kv.c

# `lodectl cluster` (membership through the admin API, docs/operations.md).
lodectl_SOURCES += client/lodectl_cluster.c

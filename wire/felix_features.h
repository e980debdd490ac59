/* Felix v1 feature bits (seed "Feature negotiation"): which requests a peer
 * serves, advertised in auth / auth_ok. A separate numbering from the frame
 * flag bits of wire/felix_frame.h; a feature never appears on a frame. */
#ifndef LS_WIRE_FELIX_FEATURES_H
#define LS_WIRE_FELIX_FEATURES_H

#define FELIX_FEATURE_TOPOLOGY 0x0001u
#define FELIX_FEATURE_REDIRECT 0x0002u
#define FELIX_FEATURE_CACHE_DELETE 0x0004u
#define FELIX_FEATURE_CONSUMER_GROUP 0x0008u
#define FELIX_FEATURE_GROUP_DEAD_LETTERS 0x0010u
#define FELIX_FEATURE_STREAM_SHARDS 0x0020u
#define FELIX_FEATURE_CACHE_WATCH 0x0040u
#define FELIX_FEATURE_CACHE_WATCH_RETAINED 0x0080u
#define FELIX_FEATURE_COUNTERS 0x0100u
#define FELIX_FEATURE_IDEMPOTENT_PRODUCER 0x0200u
#define FELIX_FEATURES_ALL 0x03FFu

#endif

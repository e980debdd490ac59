# client/: liblodestone, the C client library. The QUIC engine (quic.c) is
# shared with the node's Felix listener (see node/quic.mk).
noinst_LIBRARIES += client/liblodestone.a
client_liblodestone_a_SOURCES = \
	client/quic.c client/quic.h client/quic_engine.h \
	client/quic_client.c client/quic_client.h

# net/: the transport layer the node and the client library share: the QUIC
# engine on ngtcp2 + GnuTLS (connections, streams, GSO/GRO sockets) and TLS
# over libuv streams on OpenSSL memory BIOs, server and client side. It
# depends on the system libraries only; see docs/architecture.md.
noinst_LTLIBRARIES += net/libnet.la
NODE_LIBS += net/libnet.la
net_libnet_la_SOURCES = \
	net/quic.c net/quic.h net/quic_engine.h \
	net/tls.c net/tls.h

# client/: liblodestone, the C client library (both protocols), on the
# transport layer in net/. CLIENT_LIBS is what a program using it links.
noinst_LTLIBRARIES += client/liblodestone.la
client_liblodestone_la_SOURCES = client/quic_client.c client/quic_client.h
CLIENT_LIBS = client/liblodestone.la net/libnet.la wire/libwire.la

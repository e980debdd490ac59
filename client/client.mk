# client/: liblodestone, the C client library (both protocols), on the
# transport layer in net/. CLIENT_LIBS is what a program using it links.
noinst_LTLIBRARIES += client/liblodestone.la
client_liblodestone_la_SOURCES = client/quic_client.c client/quic_client.h
CLIENT_LIBS = client/liblodestone.la net/libnet.la wire/libwire.la

# liblodestone as an installed shared library: the objects of the
# convenience libraries above (client/, net/, wire/) linked with a soname,
# exporting only what the installed headers declare (LIBLODESTONE_EXPORTS).
# In-tree programs keep linking CLIENT_LIBS statically.
lib_LTLIBRARIES = liblodestone.la
liblodestone_la_SOURCES =
liblodestone_la_LIBADD = $(CLIENT_LIBS) $(UV_LIBS) $(NGTCP2_CRYPTO_LIBS) \
	$(NGTCP2_LIBS) $(GNUTLS_LIBS) $(OPENSSL_LIBS) $(JANSSON_LIBS) $(ZLIB_LIBS) \
	-lpthread -lm
liblodestone_la_LDFLAGS = -version-info $(LIBLODESTONE_VERSION_INFO) \
	-no-undefined -Wl,--no-undefined -Wl,--as-needed \
	-export-symbols-regex '$(LIBLODESTONE_EXPORTS)'
# The installed headers: client/*.h under $(includedir)/lodestone, and the
# wire/ headers they include under $(includedir)/lodestone/wire, with their
# "wire/..." includes rewritten to "lodestone/wire/...".
LIBLODESTONE_H = client/fsnp_client.h client/felix_client.h
LIBLODESTONE_WIRE_H = wire/buf.h wire/fsnp_value.h wire/fsnp_error.h \
	wire/felix_features.h wire/felix_binary.h wire/felix_frame.h \
	wire/felix_msg.h
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = dist/lodestone.pc
# The functions those headers declare, by family: the client API, the FSNP
# value builder/reader and the Felix frame and message codecs.
LIBLODESTONE_EXPORTS = ^(fsnp_client_|fsnp_sync_|felix_client_|felix_sub_|felix_raw_|wbuf_|fsnp_w_|fsnp_val_|fsnp_value_decode|fsnp_iter_|fsnp_map_|fsnp_bytes_eq$$|fsnp_err_is_fatal$$|fsnp_status_name$$|fsnp_strerror$$|felix_event_batch_|felix_frame_|felix_msg_|felix_publish_|felix_records_)

#!/bin/sh
# liblodestone as a user gets it: `make install` into a staging prefix, then
# a small program that includes <lodestone/fsnp_client.h> and
# <lodestone/felix_client.h> builds and links through pkg-config alone, and
# runs; the library exports only what the installed headers declare.
set -eu
top=${LS_ABS_BUILDDIR:-$(pwd)}
stage=$(mktemp -d "${TMPDIR:-/tmp}/libinstall.XXXXXX")
trap 'rm -rf "$stage"' EXIT
make -C "$top" -s install DESTDIR="$stage" >"$stage/install.log" 2>&1 || {
	cat "$stage/install.log" >&2
	exit 1
}
pc=$(find "$stage" -name lodestone.pc)
[ -n "$pc" ] || { echo "libinstall.sh: lodestone.pc not installed" >&2; exit 1; }
export PKG_CONFIG_PATH=${pc%/*}
prefix_cfg=$(pkg-config --variable=prefix lodestone)
prefix=$stage$prefix_cfg
libdir=$stage$(pkg-config --variable=libdir lodestone)
includedir=$stage$(pkg-config --variable=includedir lodestone)
for f in "$libdir/liblodestone.so.0" "$includedir/lodestone/fsnp_client.h" \
	"$includedir/lodestone/felix_client.h" "$includedir/lodestone/wire/buf.h" \
	"$prefix/bin/lodestone" "$prefix/bin/lodectl" "$prefix/bin/lodebench" \
	"$prefix/share/man/man8/lodestone.8" "$prefix/share/man/man5/lodestone.conf.5" \
	"$prefix/share/man/man1/lodectl.1" "$prefix/share/man/man1/lodebench.1"; do
	[ -e "$f" ] || { echo "libinstall.sh: ${f#$stage} not installed" >&2; exit 1; }
done
unit=$(find "$stage" -name lodestone.service)
[ -n "$unit" ] && [ -e "${unit%/*}/lodestone@.service" ] ||
	{ echo "libinstall.sh: systemd units not installed" >&2; exit 1; }
grep -q '^ExecStart=/.*/bin/lodestone --config /.*/lodestone/lodestone.conf$' "$unit" || {
	echo "libinstall.sh: lodestone.service has no ExecStart with absolute paths" >&2
	exit 1
}
# systemd's own check of both units, run on copies that start the staged
# binary (the man pages they name are not on this host's MANPATH yet).
if command -v systemd-analyze >/dev/null 2>&1; then
	mkdir "$stage/units"
	for u in lodestone.service lodestone@.service; do
		sed "s|^ExecStart=$prefix_cfg/bin/lodestone|ExecStart=$prefix/bin/lodestone|" \
			"${unit%/*}/$u" > "$stage/units/$u"
	done
	systemd-analyze verify --man=no "$stage/units/lodestone.service" \
		"$stage/units/lodestone@.service" || {
		echo "libinstall.sh: systemd-analyze verify failed" >&2
		exit 1
	}
fi
if grep -rn '#include "wire/' "$includedir/lodestone"; then
	echo "libinstall.sh: installed headers include the source tree's paths" >&2
	exit 1
fi
export PKG_CONFIG_SYSROOT_DIR=$stage

cat > "$stage/use.c" <<'C'
#include <lodestone/felix_client.h>
#include <lodestone/fsnp_client.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	struct felix_client_config cfg;
	struct wbuf b;
	struct fsnp_writer w;
	felix_client_config_init(&cfg);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_str(&w, "hello");
	if (fsnp_w_finish(&w) != 0) {
		return 1;
	}
	printf("%s %zu\n", fsnp_client_strerror(0), b.len);
	wbuf_free(&b);
	return strlen(fsnp_client_strerror(0)) > 0 ? 0 : 1;
}
C
# A sanitizer build's library needs its program built the same way.
san=
if readelf -d "$libdir/liblodestone.so.0" | grep -q 'libasan'; then
	san=-fsanitize=address,undefined
fi
# Each header compiles on its own (libuv's uv.h needs POSIX: gnu11, not c11).
for h in fsnp_client.h felix_client.h wire/buf.h wire/fsnp_value.h \
	wire/felix_msg.h wire/felix_frame.h wire/felix_binary.h; do
	printf '#include <lodestone/%s>\n' "$h" > "$stage/one.c"
	${CC:-cc} -std=gnu11 -Wall -Wextra -Werror $(pkg-config --cflags lodestone) \
		-c -o "$stage/one.o" "$stage/one.c"
done
${CC:-cc} -std=gnu11 -Wall -Wextra -Werror $san $(pkg-config --cflags lodestone) \
	-o "$stage/use" "$stage/use.c" $(pkg-config --libs lodestone)
LD_LIBRARY_PATH=$libdir "$stage/use"

# Exported functions: each one declared in an installed header.
nm -D --defined-only "$libdir/liblodestone.so.0" | awk '$2 == "T" {print $3}' |
	sort > "$stage/exported"
n=0
while read -r s; do
	grep -qr "\\b$s(" "$includedir/lodestone" || {
		echo "libinstall.sh: $s exported but not in an installed header" >&2
		exit 1
	}
	n=$((n + 1))
done < "$stage/exported"
[ "$n" -gt 50 ] || { echo "libinstall.sh: only $n symbols exported" >&2; exit 1; }
if nm -D --defined-only "$libdir/liblodestone.so.0" | grep -E ' (quic_|tls_)'; then
	echo "libinstall.sh: internal symbols exported" >&2
	exit 1
fi
echo "libinstall.sh: liblodestone.so.0 exports $n functions, a program links through pkg-config"

#!/bin/sh
# The Debian packages as an administrator gets them: install the four .deb
# files with dpkg -i (the service is not started: no systemd runs here, and
# a policy-rc.d forbids it anyway), check the user, the directories, the
# conffile and the units (systemd-analyze verify), build a program against
# liblodestone-dev, then purge and check that nothing is left.
# Usage: tests/dist/deb-install.sh [DIR with the .deb files, default build/deb]
# Needs root; run after ./dev deb.
set -eu
dir=${1:-build/deb}
say() { printf '==> %s\n' "$*"; }
fail() { echo "deb-install.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root"
debs=$(ls "$dir"/lodestone_*.deb "$dir"/lodestone-tools_*.deb \
	"$dir"/liblodestone0_*.deb "$dir"/liblodestone-dev_*.deb 2>/dev/null) ||
	fail "no .deb files in $dir (run ./dev deb)"
for p in lodestone lodestone-tools liblodestone0 liblodestone-dev; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		fail "$p is already installed; purge it first"
	fi
done
getent passwd lodestone >/dev/null && fail "a lodestone user exists already"

tmp=$(mktemp -d)
policy=/usr/sbin/policy-rc.d
cleanup() {
	rm -rf "$tmp"
	if [ -f "$policy.lodestone-test" ]; then rm -f "$policy"; fi
	rm -f "$policy.lodestone-test"
}
trap cleanup EXIT
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod 755 "$policy"
	: > "$policy.lodestone-test"
fi

say "dpkg -i $(echo $debs | tr '\n' ' ')"
# shellcheck disable=SC2086
dpkg -i $debs

say "installed files"
getent passwd lodestone >/dev/null || fail "no lodestone user"
[ "$(stat -c %U:%G:%a /var/lib/lodestone)" = lodestone:lodestone:750 ] ||
	fail "/var/lib/lodestone is $(stat -c %U:%G:%a /var/lib/lodestone)"
[ "$(stat -c %U:%G:%a /etc/lodestone/lodestone.conf)" = root:lodestone:640 ] ||
	fail "/etc/lodestone/lodestone.conf is $(stat -c %U:%G:%a /etc/lodestone/lodestone.conf)"
dpkg-query -W -f='${Conffiles}\n' lodestone | grep -q '/etc/lodestone/lodestone.conf' ||
	fail "/etc/lodestone/lodestone.conf is not a conffile"
grep -q '^data = /var/lib/lodestone$' /etc/lodestone/lodestone.conf ||
	fail "the packaged config does not keep data in /var/lib/lodestone"
lodestone --version
lodectl --help >/dev/null
lodebench --help >/dev/null 2>&1 || true
man -w lodestone lodectl lodebench lodestone.conf >/dev/null 2>&1 ||
	[ -e /usr/share/man/man8/lodestone.8.gz ] || fail "man pages missing"
[ -e /lib/systemd/system/lodestone.service ] || fail "no lodestone.service"
[ -e /lib/systemd/system/lodestone@.service ] || fail "no lodestone@.service"

say "systemd-analyze verify"
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify /lib/systemd/system/lodestone.service
	systemd-analyze verify lodestone@n2.service
else
	echo "deb-install.sh: systemd-analyze not installed (apt-get install systemd); skipped"
fi

say "the packaged config starts a node as the lodestone user"
# Its own ports and a scratch data dir, so nothing on this host is touched.
data=$tmp/data
chmod 755 "$tmp"
install -d -o lodestone -g lodestone "$data"
base=$(shuf -i 20000-60000 -n 1)
admin=$base
LODESTONE_DATA=$data LODESTONE_ADMIN=127.0.0.1:$admin LODESTONE_FSNP=127.0.0.1:$((base + 1)) \
	LODESTONE_INTERNAL=127.0.0.1:$((base + 2)) LODESTONE_FELIX=127.0.0.1:$((base + 3)) \
	setpriv --reuid=lodestone --regid=lodestone --init-groups \
	lodestone --config /etc/lodestone/lodestone.conf > "$tmp/node.log" 2>&1 &
pid=$!
ready=0
for _ in $(seq 1 100); do
	if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz")" = 200 ]; then
		ready=1
		break
	fi
	sleep 0.2
done
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || { cat "$tmp/node.log"; fail "the node did not exit 0 on SIGTERM"; }
[ $ready -eq 1 ] || { cat "$tmp/node.log"; fail "/readyz never answered 200"; }

say "a program against liblodestone-dev"
cat > "$tmp/use.c" <<'C'
#include <lodestone/felix_client.h>
#include <lodestone/fsnp_client.h>
#include <stdio.h>

int main(void)
{
	struct felix_client_config cfg;
	felix_client_config_init(&cfg);
	printf("liblodestone: %s\n", fsnp_client_strerror(0));
	return 0;
}
C
cc -Wall -Wextra -Werror $(pkg-config --cflags lodestone) -o "$tmp/use" "$tmp/use.c" \
	$(pkg-config --libs lodestone)
"$tmp/use"

say "dpkg --purge"
dpkg --purge liblodestone-dev lodestone-tools lodestone liblodestone0
for p in /etc/lodestone /var/lib/lodestone /usr/bin/lodestone /usr/bin/lodectl \
	/lib/systemd/system/lodestone.service /usr/include/lodestone; do
	[ ! -e "$p" ] || fail "$p left after purge"
done
! getent passwd lodestone >/dev/null || fail "lodestone user left after purge"
ls /usr/lib/*/liblodestone* >/dev/null 2>&1 && fail "liblodestone left after purge"
echo "deb-install.sh: installed, checked and purged cleanly"

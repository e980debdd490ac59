#!/bin/sh
# make check-interop: runs every tests/interop/*.mjs against real lodestone
# processes with the official clients installed from npm into
# tests/interop/node_modules (pinned in tests/interop/package.json).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
node=${NODE:-node}
if ! command -v "$node" >/dev/null 2>&1; then
  echo "check-interop: Node.js not found; install the Debian package nodejs" >&2
  exit 1
fi
major=$("$node" -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "check-interop: Node.js $major is too old for the official clients (need >= 18)" >&2
  exit 1
fi
set -- "$here"/*.mjs
if [ ! -e "$1" ]; then
  echo "check-interop: no interop tests yet: they arrive with the Felix and FSNP servers"
  exit 0
fi
# (again when the lock file changed since: a client added or moved on)
if [ -f "$here/package.json" ] && { [ ! -d "$here/node_modules" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; }; then
  (cd "$here" && npm install --no-audit --no-fund --silent)
fi
fail=0
# A test exiting 77 was skipped (it says why on stderr).
for t in "$@"; do
  rc=0
  "$node" "$t" || rc=$?
  case $rc in
    0) echo "PASS: interop/$(basename "$t")" ;;
    77) echo "SKIP: interop/$(basename "$t")" ;;
    *) echo "FAIL: interop/$(basename "$t")"; fail=1 ;;
  esac
done
exit $fail

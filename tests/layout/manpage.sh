#!/bin/sh
# Every option `lodestone --help` prints has an entry (.It Fl -NAME) in
# man/lodestone.8, and the page documents no option the binary lacks.
set -eu
srcdir=${srcdir:-.}
bin=${LS_LODESTONE:-./lodestone}
page=$srcdir/man/lodestone.8
tmp=${TMPDIR:-/tmp}/manpage.$$
trap 'rm -f "$tmp".help "$tmp".page' EXIT

"$bin" --help | sed -n 's/^  --\([a-z0-9-]*\).*/\1/p' | sort -u > "$tmp".help
sed -n 's/^\.It Fl -\([a-z0-9-]*\).*/\1/p' "$page" | sort -u > "$tmp".page
if [ ! -s "$tmp".help ]; then
	echo "manpage.sh: no options from $bin --help" >&2
	exit 1
fi
rc=0
for o in $(comm -23 "$tmp".help "$tmp".page); do
	echo "man/lodestone.8: --$o is in lodestone --help but not in the page" >&2
	rc=1
done
for o in $(comm -13 "$tmp".help "$tmp".page); do
	echo "man/lodestone.8: --$o is in the page but not in lodestone --help" >&2
	rc=1
done
[ $rc -eq 0 ] && echo "manpage.sh: $(wc -l < "$tmp".help) options match"
exit $rc

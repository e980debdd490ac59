#!/bin/sh
# Checks every quoted #include of the tree's C files against the table of
# allowed includes in docs/architecture.md ("Layers and what they may
# include"): a lower layer never includes a higher one's headers, and the
# daemon core reaches a room of node/ only through its public header.
# Patterns: `*` is any run of characters but "/", `**` any run at all; the
# first row whose files pattern matches a file applies to it.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
doc="$top/docs/architecture.md"
[ -f "$doc" ] || { echo "includes.sh: $doc not found" >&2; exit 99; }
cd "$top"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files '*.c' '*.h')
else
	files=$(find . -name '*.[ch]' ! -path './build*' | sed 's|^\./||')
fi
[ -n "$files" ] || { echo "includes.sh: no C files found under $top" >&2; exit 99; }

# One line per file ("F path") and per quoted include ("I path include"),
# the table after them.
{
	for f in $files; do
		echo "F $f"
		sed -n "s|^[[:space:]]*#[[:space:]]*include[[:space:]]*\"\([^\"]*/[^\"]*\)\".*|I $f \1|p" "$f"
	done
} | awk -v doc="$doc" '
	function re(p) {
		gsub(/\./, "\\.", p); gsub(/\*\*/, "\001", p)
		gsub(/\*/, "[^/]*", p); gsub(/\001/, ".*", p)
		return "^" p "$"
	}
	BEGIN {
		while ((getline line < doc) > 0) {
			if (line ~ /<!-- layers: begin -->/) { on = 1; continue }
			if (line ~ /<!-- layers: end -->/) on = 0
			if (!on || line !~ /^\|/) continue
			split(line, col, "|")
			if (col[2] !~ /`/) continue
			files = col[2]; gsub(/[` ]/, "", files)
			allowed = col[3]; gsub(/`/, " ", allowed)
			gsub(/^ +| +$/, "", allowed); gsub(/ +/, " ", allowed)
			n++; rowre[n] = re(files); rowtxt[n] = allowed
			m = split(allowed, a, " ")
			for (j = 1; j <= m; j++) allowre[n, j] = re(a[j])
			nallow[n] = m
		}
		if (n == 0) { print "includes.sh: no layer table in " doc > "/dev/stderr"; exit 99 }
	}
	function row(f,   i) {
		if (f in rowof) return rowof[f]
		for (i = 1; i <= n; i++) if (f ~ rowre[i]) return rowof[f] = i
		return rowof[f] = 0
	}
	$1 == "F" && row($2) == 0 {
		print $2 ": no row of the layer table covers this file" > "/dev/stderr"; bad = 1
	}
	$1 == "I" {
		r = row($2); if (r == 0) next
		ok = 0
		for (j = 1; j <= nallow[r]; j++) if ($3 ~ allowre[r, j]) { ok = 1; break }
		if (!ok) {
			print $2 " includes " $3 ", which its layer may not (allowed: " rowtxt[r] ")" > "/dev/stderr"
			bad = 1
		}
	}
	END {
		if (n == 0) exit 99
		if (bad) exit 1
		print "includes.sh: every include is allowed by the layer table"
	}'

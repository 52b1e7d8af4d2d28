#!/usr/bin/env bash
# Installs the pinned analysis tools that `make lint` runs, once, into the stack's folder:
# staticcheck, govulncheck and an offline copy of the Go vulnerability database built from
# the golang.org/x/vulndb module (its OSV files, indexed by the module's own indexdb). All of
# it comes from the Go module proxy; nothing is rebuilt while the pinned versions stay.
#
#   tools.sh install   install what is missing
#   tools.sh env       export lines: PATH with the tools, and GOVULNDB (unless already set)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STACK="${HERALD_STACK_DIR:-$REPO/.stack}"
mkdir -p "$STACK"
STACK="$(cd "$STACK" && pwd)"

STATICCHECK_VERSION=v0.8.2
GOVULNCHECK_VERSION=v1.9.0
# The vulnerability database as of this pseudo-version's date; bump it to see newer reports.
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018

TOOLS="$STACK/tools"
BIN="$TOOLS/bin"
VULNDB="$TOOLS/vulndb-$VULNDB_VERSION"

say() { echo "tools: $*" >&2; }

# go_install NAME PACKAGE VERSION: installs PACKAGE@VERSION as $BIN/NAME-VERSION, linked as NAME.
go_install() {
	local name="$1" pkg="$2" version="$3"
	if [ ! -x "$BIN/$name-$version" ]; then
		say "go install $pkg@$version"
		local tmp
		tmp="$(mktemp -d)"
		GOBIN="$tmp" GOFLAGS=-mod=mod go install "$pkg@$version"
		mkdir -p "$BIN"
		mv "$tmp/$name" "$BIN/$name-$version"
		rm -rf "$tmp"
	fi
	ln -sfn "$name-$version" "$BIN/$name"
}

install_vulndb() {
	[ -f "$VULNDB/index/db.json" ] && return 0
	go_install indexdb golang.org/x/vulndb/cmd/indexdb "$VULNDB_VERSION"
	say "building the vulnerability database from golang.org/x/vulndb@$VULNDB_VERSION"
	local dir
	dir="$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[ -d "$dir/data/osv" ] || { echo "tools: no data/osv in $dir" >&2; exit 1; }
	rm -rf "$VULNDB.tmp"
	"$BIN/indexdb" -vulns "$dir/data/osv" -out "$VULNDB.tmp"
	mv "$VULNDB.tmp" "$VULNDB"
}

case "${1:-}" in
install)
	go_install staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION"
	go_install govulncheck golang.org/x/vuln/cmd/govulncheck "$GOVULNCHECK_VERSION"
	install_vulndb
	;;
env)
	echo "export PATH='$BIN':\"\$PATH\""
	echo "export GOVULNDB=\"\${GOVULNDB:-file://$VULNDB}\""
	;;
*)
	echo "usage: tools.sh install|env" >&2
	exit 2
	;;
esac

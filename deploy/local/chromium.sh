#!/usr/bin/env bash
# Installs Debian's chromium, which the operator console's browser tests drive headless
# (console/browser_test.go, through chromedp). `make test` runs it; a machine without the
# browser fails those tests rather than skipping them. See docs/local-stack.md.
#
#   chromium.sh install   install chromium unless /usr/bin/chromium exists
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/lib.sh
source "$HERE/lib.sh"

CHROMIUM=/usr/bin/chromium

case "${1:-install}" in
install)
	if [ -x "$CHROMIUM" ]; then
		exit 0
	fi
	apt_install chromium
	[ -x "$CHROMIUM" ] || die "chromium installed but $CHROMIUM is missing"
	;;
*)
	echo "usage: $0 install" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# Installs what builds and runs herald's container image on this kind of machine: Debian's
# buildah, podman and runc, and the one containers.conf setting podman needs here. `make image`
# and `make test` run it; docs/deploy.md ("The image") says why each piece is there.
#
#   containers.sh install   install the packages unless present, write containers.conf
#
# Why runc and not podman's default crun: these machines have hybrid cgroups, which crun
# refuses; runc with the cgroupfs manager runs. Why default_ulimits = []: the kernel here
# refuses the rlimits podman sets by default, so the container would not start.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/lib.sh
source "$HERE/lib.sh"

CONTAINERS_CONF=/etc/containers/containers.conf

# write_containers_conf: [containers] default_ulimits = [] in containers.conf. A file that
# already says so is left alone; any other content is kept and the setting added (or set).
write_containers_conf() {
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	if [ -f "$CONTAINERS_CONF" ] && grep -Eq '^[[:space:]]*default_ulimits[[:space:]]*=[[:space:]]*\[[[:space:]]*\]' "$CONTAINERS_CONF"; then
		return 0
	fi
	$sudo mkdir -p "$(dirname "$CONTAINERS_CONF")"
	if [ ! -s "$CONTAINERS_CONF" ]; then
		printf '[containers]\ndefault_ulimits = []\n' | $sudo tee "$CONTAINERS_CONF" >/dev/null
	elif grep -Eq '^[[:space:]]*default_ulimits[[:space:]]*=' "$CONTAINERS_CONF"; then
		$sudo sed -i -E 's/^[[:space:]]*default_ulimits[[:space:]]*=.*/default_ulimits = []/' "$CONTAINERS_CONF"
	elif grep -Eq '^\[containers\]' "$CONTAINERS_CONF"; then
		$sudo sed -i -E '0,/^\[containers\]/s//[containers]\ndefault_ulimits = []/' "$CONTAINERS_CONF"
	else
		printf '\n[containers]\ndefault_ulimits = []\n' | $sudo tee -a "$CONTAINERS_CONF" >/dev/null
	fi
	say "wrote default_ulimits = [] to $CONTAINERS_CONF"
}

case "${1:-install}" in
install)
	missing=()
	for tool in buildah podman runc; do
		command -v "$tool" >/dev/null || missing+=("$tool")
	done
	# The image carries the build machine's CA roots (Debian's bundle).
	[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
	if [ "${#missing[@]}" -gt 0 ]; then
		apt_install "${missing[@]}"
	fi
	write_containers_conf
	;;
*)
	echo "usage: $0 install" >&2
	exit 2
	;;
esac

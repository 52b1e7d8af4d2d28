# shellcheck shell=bash
# Helpers shared by the service files of deploy/local/stack.sh (sourced, not run).

say() { echo "stack: $*" >&2; }

die() {
	echo "stack: error: $*" >&2
	exit 1
}

# fail SERVICE LOG MESSAGE: a clear message, the tail of the service's log, exit 1.
fail() {
	local service="$1" log="$2"
	shift 2
	echo "stack: error: $service: $*" >&2
	if [ -f "$log" ]; then
		echo "---- last 40 lines of $log ----" >&2
		tail -n 40 "$log" >&2
		echo "---- end of $log ----" >&2
	fi
	exit 1
}

# lock_stack serialises up/down of one stack dir (concurrent `make test` runs). Daemons
# are started with `9>&-` so that they do not inherit the lock.
lock_stack() {
	exec 9>"$STACK/.stack.lock"
	if ! flock -w 600 9; then
		die "another stack.sh holds $STACK/.stack.lock for more than 10 minutes"
	fi
}

APT_UPDATED=""
# apt_install PACKAGE...: installs Debian packages (as root, or through sudo).
apt_install() {
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || die "need root (or sudo) to install: $*"
		sudo="sudo"
	fi
	if [ -z "$APT_UPDATED" ]; then
		say "apt-get update"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
		APT_UPDATED=1
	fi
	say "apt-get install $*"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
		die "apt-get install $* failed"
}

# reserve_ports PORT...: the kernel no longer gives PORTs out as the local end of outgoing
# connections (net.ipv4.ip_local_reserved_ports), where that can be set (root). The stack's
# ports lie in the ephemeral range (32768-60999), and a service that connects to one of its
# own ports before it binds the others (Kafka's broker to its controller, Jaeger's pipelines)
# can be handed one of them as its connection's local port: the kernel picks it from a hash
# of the addresses and a key drawn at boot, so on such a boot the broker failed with "Address
# already in use" on every start. Every service reserves its ports before it starts. Without
# root the ports stay as they are.
reserve_ports() {
	local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur p add=""
	[ -w "$f" ] || return 0
	cur="$(cat "$f")"
	for p in "$@"; do
		[ -n "$p" ] || continue
		case ",$cur," in *",$p,"*) continue ;; esac
		add+="${add:+,}$p"
	done
	[ -z "$add" ] || echo "${cur:+$cur,}$add" 2>/dev/null >"$f" || true
}

# port_in_use PORT: something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pid_matches PIDFILE PATTERN: the pid in PIDFILE is alive and its command line contains PATTERN
# (so a recycled pid of an unrelated process does not count).
pid_matches() {
	local pidfile="$1" pattern="$2" pid
	[ -f "$pidfile" ] || return 1
	pid="$(head -n 1 "$pidfile" 2>/dev/null)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern"
}

# await_exec PIDFILE PATTERN: right after `cmd &`, wait (up to 30 s) until the child has
# exec'd the command, so that pid_matches sees it. Between fork and exec the child's command
# line is still this shell's; on a loaded machine that window lasts long enough for a
# start-up check to take a live service for a dead one. Returns as soon as the process exits.
await_exec() {
	local pidfile="$1" pattern="$2" pid i
	pid="$(head -n 1 "$pidfile")"
	for ((i = 0; i < 300; i++)); do
		pid_matches "$pidfile" "$pattern" && return 0
		[ -d "/proc/$pid" ] || return 0
		grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && return 0
		sleep 0.1
	done
}

# stop_pid NAME PIDFILE: SIGTERM, wait up to $STOP_TIMEOUT seconds, then SIGKILL.
stop_pid() {
	local name="$1" pidfile="$2" pid i
	pid="$(head -n 1 "$pidfile")"
	say "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < STOP_TIMEOUT * 5; i++)); do
		[ -d "/proc/$pid" ] || break
		# A zombie child of this shell is gone for our purposes.
		grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && break
		sleep 0.2
	done
	if [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
		say "$name did not stop within ${STOP_TIMEOUT}s: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			[ -d "/proc/$pid" ] || break
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
}

# ensure_go: the go command, for building small helpers.
ensure_go() {
	command -v go >/dev/null || die "the go command is needed (Go 1.26, see go.mod)"
}

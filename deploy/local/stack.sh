#!/usr/bin/env bash
# herald's local stack: PostgreSQL 15 (logical replication), Redis, Apache Kafka 4 (KRaft,
# single node) and, on request, mailpit, Jaeger and Prometheus. No Docker: Debian packages,
# Maven Central jars and the Go module proxy. All state lives under $HERALD_STACK_DIR
# (default <repo>/.stack); every service listens on 127.0.0.1 on a non-default port. See
# docs/local-stack.md.
#
#   stack.sh up [service...]     start what is not running (default: postgres redis kafka)
#   stack.sh install SERVICE...  install or build without starting (mailpit, jaeger, prometheus)
#   stack.sh down [service...]   stop (default: everything that runs)
#   stack.sh status              one line per service; exit 3 when a default service is down
#   stack.sh env                 export lines for tests and for `herald serve`
#   stack.sh logs SERVICE [-f]   the tail of a service's log (-f follows it)
#   stack.sh is-up SERVICE       exit 0 when SERVICE runs in this stack dir
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STACK="${HERALD_STACK_DIR:-$REPO/.stack}"
mkdir -p "$STACK"
STACK="$(cd "$STACK" && pwd)"

PG_PORT="${HERALD_PG_PORT:-55432}"
REDIS_PORT="${HERALD_REDIS_PORT:-56379}"
KAFKA_PORT="${HERALD_KAFKA_PORT:-59092}"
KAFKA_CONTROLLER_PORT="${HERALD_KAFKA_CONTROLLER_PORT:-59093}"
KAFKA_HEAP="${HERALD_KAFKA_HEAP:-1g}"
KAFKA_VERSION="${HERALD_KAFKA_VERSION:-4.1.1}"
KAFKA_CLUSTER_ID="${HERALD_KAFKA_CLUSTER_ID:-aGVyYWxkLWxvY2FsLWthZg}"
KAFKA_READY_TIMEOUT="${HERALD_KAFKA_READY_TIMEOUT:-90}"
STOP_TIMEOUT="${HERALD_STOP_TIMEOUT:-60}"
# A private stack of a test may also open secured listeners (see docs/local-stack.md): TLS
# files in PEM, and one user with a password. Unset for the shared stack.
TLS_CERT_FILE="${HERALD_STACK_TLS_CERT_FILE:-}"
TLS_KEY_FILE="${HERALD_STACK_TLS_KEY_FILE:-}"
TLS_CA_FILE="${HERALD_STACK_TLS_CA_FILE:-}"
STACK_USER="${HERALD_STACK_USER:-}"
STACK_PASSWORD="${HERALD_STACK_PASSWORD:-}"
KAFKA_SECURE_PORT="${HERALD_KAFKA_SECURE_PORT:-}"
REDIS_TLS_PORT="${HERALD_REDIS_TLS_PORT:-}"
MAILPIT_VERSION="${HERALD_MAILPIT_VERSION:-v1.33.1}"
MAILPIT_SMTP_PORT="${HERALD_MAILPIT_SMTP_PORT:-51025}"
MAILPIT_UI_PORT="${HERALD_MAILPIT_UI_PORT:-58025}"
JAEGER_OTLP_GRPC_PORT="${HERALD_JAEGER_OTLP_GRPC_PORT:-54317}"
JAEGER_OTLP_HTTP_PORT="${HERALD_JAEGER_OTLP_HTTP_PORT:-54318}"
JAEGER_UI_PORT="${HERALD_JAEGER_UI_PORT:-56686}"
JAEGER_QUERY_GRPC_PORT="${HERALD_JAEGER_QUERY_GRPC_PORT:-56685}"
JAEGER_HEALTH_PORT="${HERALD_JAEGER_HEALTH_PORT:-53133}"
JAEGER_MAX_TRACES="${HERALD_JAEGER_MAX_TRACES:-100000}"
PROMETHEUS_PORT="${HERALD_PROMETHEUS_PORT:-59090}"
# host:port of the listener that serves herald's /metrics (the API listener of `make run`).
PROMETHEUS_TARGET="${HERALD_PROMETHEUS_TARGET:-127.0.0.1:9090}"

PG_BIN=/usr/lib/postgresql/15/bin
DEFAULT_SERVICES=(postgres redis kafka)
ALL_SERVICES=(postgres redis kafka mailpit jaeger prometheus)

# shellcheck source=deploy/local/lib.sh
source "$HERE/lib.sh"
# shellcheck source=deploy/local/postgres.sh
source "$HERE/postgres.sh"
# shellcheck source=deploy/local/redis.sh
source "$HERE/redis.sh"
# shellcheck source=deploy/local/kafka.sh
source "$HERE/kafka.sh"
# shellcheck source=deploy/local/mailpit.sh
source "$HERE/mailpit.sh"
# shellcheck source=deploy/local/jaeger.sh
source "$HERE/jaeger.sh"
# shellcheck source=deploy/local/prometheus.sh
source "$HERE/prometheus.sh"

check_service() {
	case "$1" in
	postgres | redis | kafka | mailpit | jaeger | prometheus) ;;
	*) die "unknown service '$1' (known: ${ALL_SERVICES[*]})" ;;
	esac
}

cmd_up() {
	local services=("$@")
	[ ${#services[@]} -gt 0 ] || services=("${DEFAULT_SERVICES[@]}")
	local s
	for s in "${services[@]}"; do check_service "$s"; done
	lock_stack
	for s in "${services[@]}"; do "${s}_up"; done
}

cmd_install() {
	[ $# -gt 0 ] || die "usage: stack.sh install SERVICE... (mailpit, jaeger, prometheus)"
	local s
	for s in "$@"; do
		case "$s" in
		mailpit | jaeger | prometheus) ;;
		*) die "nothing to install for '$s' (installable: mailpit jaeger prometheus)" ;;
		esac
	done
	lock_stack
	for s in "$@"; do "${s}_install"; done
}

cmd_down() {
	local services=("$@")
	[ ${#services[@]} -gt 0 ] || services=(prometheus jaeger mailpit kafka redis postgres)
	local s
	for s in "${services[@]}"; do check_service "$s"; done
	lock_stack
	for s in "${services[@]}"; do "${s}_down"; done
}

cmd_status() {
	local s rc=0
	echo "stack dir: $STACK"
	for s in "${ALL_SERVICES[@]}"; do
		if "${s}_running"; then
			printf '  %-10s up    %s\n' "$s" "$("${s}_describe")"
		else
			printf '  %-10s down\n' "$s"
			case " ${DEFAULT_SERVICES[*]} " in *" $s "*) rc=3 ;; esac
		fi
	done
	return $rc
}

cmd_env() {
	cat <<EOF
export HERALD_TEST_POSTGRES_URL='postgres://postgres@127.0.0.1:${PG_PORT}/postgres?sslmode=disable'
export HERALD_TEST_KAFKA_BROKERS='127.0.0.1:${KAFKA_PORT}'
export HERALD_TEST_REDIS_ADDR='127.0.0.1:${REDIS_PORT}'
export HERALD_DATABASE_URL='postgres://postgres@127.0.0.1:${PG_PORT}/herald?sslmode=disable'
export HERALD_KAFKA_BROKERS='127.0.0.1:${KAFKA_PORT}'
export HERALD_REDIS_ADDR='127.0.0.1:${REDIS_PORT}'
EOF
	if mailpit_running; then
		echo "export HERALD_SMTP_ADDR='127.0.0.1:${MAILPIT_SMTP_PORT}'"
	fi
	# Where Jaeger is, whether or not it runs now (the trace test starts it with `up jaeger`).
	cat <<EOF
export HERALD_TEST_JAEGER_OTLP_ENDPOINT='http://127.0.0.1:${JAEGER_OTLP_HTTP_PORT}'
export HERALD_TEST_JAEGER_QUERY_URL='http://127.0.0.1:${JAEGER_UI_PORT}'
EOF
}

cmd_logs() {
	[ $# -ge 1 ] || die "usage: stack.sh logs SERVICE [-f]"
	check_service "$1"
	local log
	log="$("${1}_log")"
	[ -f "$log" ] || die "$1 has no log yet ($log)"
	if [ "${2:-}" = "-f" ]; then
		exec tail -n 100 -F "$log"
	fi
	tail -n "${HERALD_LOG_LINES:-100}" "$log"
}

usage() {
	sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

main() {
	local cmd="${1:-}"
	[ $# -gt 0 ] && shift
	case "$cmd" in
	up) cmd_up "$@" ;;
	install) cmd_install "$@" ;;
	down) cmd_down "$@" ;;
	status) cmd_status ;;
	env) cmd_env ;;
	logs) cmd_logs "$@" ;;
	is-up)
		[ $# -eq 1 ] || die "usage: stack.sh is-up SERVICE"
		check_service "$1"
		"${1}_running"
		;;
	-h | --help | help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"

# shellcheck shell=bash
# Redis from Debian, a private non-persistent instance (sourced by stack.sh).

REDIS_DIR="$STACK/redis"
REDIS_PID="$REDIS_DIR/redis.pid"
REDIS_LOG="$REDIS_DIR/redis.log"

redis_log() { echo "$REDIS_LOG"; }

redis_running() {
	# Not tied to the port: a redis of this dir started on another port still counts (and then
	# fails the PING below with a clear message instead of being orphaned).
	pid_matches "$REDIS_PID" "redis-server 127.0.0.1:"
}

redis_describe() {
	echo "127.0.0.1:$REDIS_PORT  pid $(head -n 1 "$REDIS_PID")"
}

redis_ping() {
	if [ -n "$STACK_USER" ]; then
		[ "$(REDISCLI_AUTH="$STACK_PASSWORD" redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --user "$STACK_USER" ping 2>/dev/null)" = "PONG" ]
		return
	fi
	[ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
}

# redis_secure_args: the options of a private Redis with HERALD_STACK_USER (an ACL user with
# every right; the default user is off) and HERALD_REDIS_TLS_PORT (TLS with the PEM files,
# client certificates required when a CA file is given). Empty for the shared stack.
redis_secure_args() {
	if [ -n "$STACK_USER" ]; then
		(umask 077 && printf 'user default off\nuser %s on >%s ~* &* +@all\n' "$STACK_USER" "$STACK_PASSWORD" >"$REDIS_DIR/users.acl")
		printf '%s\n' --aclfile "$REDIS_DIR/users.acl"
	fi
	if [ -n "$REDIS_TLS_PORT" ]; then
		[ -n "$TLS_CERT_FILE" ] && [ -n "$TLS_KEY_FILE" ] ||
			die "redis: HERALD_REDIS_TLS_PORT needs HERALD_STACK_TLS_CERT_FILE and HERALD_STACK_TLS_KEY_FILE"
		printf '%s\n' --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$TLS_CERT_FILE" --tls-key-file "$TLS_KEY_FILE"
		if [ -n "$TLS_CA_FILE" ]; then
			printf '%s\n' --tls-ca-cert-file "$TLS_CA_FILE" --tls-auth-clients yes
		else
			printf '%s\n' --tls-auth-clients no
		fi
	fi
}

# redis_ready: a PING answered with PONG within 30 s.
redis_ready() {
	local i
	for ((i = 0; i < 150; i++)); do
		redis_ping && return 0
		sleep 0.2
	done
	return 1
}

redis_up() {
	if redis_running; then
		redis_ready || fail redis "$REDIS_LOG" "running but not answering PING on 127.0.0.1:$REDIS_PORT (started with another HERALD_REDIS_PORT? \`down redis\` first)"
		say "redis already running on 127.0.0.1:$REDIS_PORT"
		return 0
	fi
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		apt_install redis-server redis-tools
	fi
	reserve_ports "$REDIS_PORT"
	if port_in_use "$REDIS_PORT"; then
		die "redis: port 127.0.0.1:$REDIS_PORT is taken by another process; set HERALD_REDIS_PORT"
	fi
	mkdir -p "$REDIS_DIR"
	rm -f "$REDIS_PID"
	[ -f "$REDIS_LOG" ] && mv -f "$REDIS_LOG" "$REDIS_LOG.1"
	say "starting redis on 127.0.0.1:$REDIS_PORT${REDIS_TLS_PORT:+ (TLS on :$REDIS_TLS_PORT)}"
	local secure
	mapfile -t secure < <(redis_secure_args)
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
		--daemonize yes --dir "$REDIS_DIR" --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" \
		"${secure[@]}" >"$REDIS_DIR/start.log" 2>&1 9>&- || fail redis "$REDIS_DIR/start.log" "redis-server did not start"
	redis_ready || fail redis "$REDIS_LOG" "did not answer PING on 127.0.0.1:$REDIS_PORT"
	local i
	for ((i = 0; i < 50; i++)); do
		redis_running && break
		sleep 0.1
	done
	redis_running || fail redis "$REDIS_LOG" "answers PING but wrote no pid file $REDIS_PID"
	say "redis ready on 127.0.0.1:$REDIS_PORT"
}

redis_down() {
	if ! redis_running; then
		say "redis is not running"
		return 0
	fi
	stop_pid redis "$REDIS_PID"
}

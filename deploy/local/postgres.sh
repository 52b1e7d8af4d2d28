# shellcheck shell=bash
# PostgreSQL 15 from Debian, one project-local cluster with wal_level=logical (sourced by
# stack.sh). initdb and postgres refuse to run as root: as root the cluster belongs to the
# `postgres` system user, otherwise to the calling user.

PG_DIR="$STACK/postgres"
PG_DATA="$PG_DIR/data"
PG_LOG="$PG_DIR/postgres.log"

postgres_log() { echo "$PG_LOG"; }

# as_pg CMD...: runs CMD as the owner of the cluster.
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

postgres_running() {
	[ -f "$PG_DATA/postmaster.pid" ] || return 1
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

postgres_describe() {
	# Replication slots pin WAL (up to max_slot_wal_keep_size each): show what they hold.
	local slots
	slots="$(postgres_psql -c "SELECT count(*) || ' slots (' || count(*) FILTER (WHERE NOT active)
		|| ' inactive), WAL held ' || coalesce(pg_size_pretty(max(pg_wal_lsn_diff(pg_current_wal_lsn(),
		restart_lsn))), '0 bytes') FROM pg_replication_slots" 2>/dev/null || echo "slots unknown")"
	echo "127.0.0.1:$PG_PORT  pid $(head -n 1 "$PG_DATA/postmaster.pid")  $slots  data $PG_DATA"
}

postgres_install() {
	if [ ! -x "$PG_BIN/postgres" ]; then
		apt_install postgresql
	fi
	[ -x "$PG_BIN/postgres" ] || die "PostgreSQL 15 is not at $PG_BIN after installing"
}

# postgres_make_traversable: the postgres user must reach $PG_DIR through every parent
# directory of the checkout (a checkout under /root is not, by default).
postgres_make_traversable() {
	[ "$(id -u)" -eq 0 ] || return 0
	local d="$PG_DIR"
	while [ "$d" != "/" ]; do
		d="$(dirname "$d")"
		if ! runuser -u postgres -- test -x "$d"; then
			say "chmod o+x $d so that the postgres user can reach $PG_DIR"
			chmod o+x "$d"
		fi
	done
}

postgres_init() {
	mkdir -p "$PG_DIR"
	if [ "$(id -u)" -eq 0 ]; then
		chown postgres:postgres "$PG_DIR"
		postgres_make_traversable
	fi
	chmod 700 "$PG_DIR"
	if [ ! -f "$PG_DATA/PG_VERSION" ]; then
		say "initdb $PG_DATA"
		rm -rf "$PG_DATA"
		as_pg "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U postgres -E UTF8 --no-locale >"$PG_DIR/initdb.log" 2>&1 9>&- ||
			fail postgres "$PG_DIR/initdb.log" "initdb failed"
	fi
}

postgres_up() {
	if postgres_running; then
		postgres_ready || fail postgres "$PG_LOG" "running but not answering on 127.0.0.1:$PG_PORT"
		say "postgres already running on 127.0.0.1:$PG_PORT"
		postgres_create_db
		return 0
	fi
	postgres_install
	postgres_init
	reserve_ports "$PG_PORT"
	if port_in_use "$PG_PORT"; then
		die "postgres: port 127.0.0.1:$PG_PORT is taken by another process; set HERALD_PG_PORT"
	fi
	say "starting postgres on 127.0.0.1:$PG_PORT"
	local opts
	opts="-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories='$PG_DIR'"
	opts+=" -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=64"
	opts+=" -c max_slot_wal_keep_size=4GB -c max_connections=300"
	opts+=" -c shared_buffers=256MB -c max_wal_size=2GB"
	opts+=" -c log_line_prefix='%m [%p] '"
	opts+="$(postgres_tls_opts)"
	if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 90 -o "$opts" start >/dev/null 2>&1 9>&-; then
		fail postgres "$PG_LOG" "did not start"
	fi
	postgres_ready || fail postgres "$PG_LOG" "started but not answering on 127.0.0.1:$PG_PORT"
	postgres_create_db
	say "postgres ready on 127.0.0.1:$PG_PORT"
}

# postgres_tls_opts: ssl=on with HERALD_STACK_TLS_CERT_FILE and _KEY_FILE (a private stack of
# a test), copied next to the cluster because PostgreSQL wants its key owned by the cluster's
# user and readable by no one else. Empty for the shared stack.
postgres_tls_opts() {
	[ -n "$TLS_CERT_FILE" ] || return 0
	[ -n "$TLS_KEY_FILE" ] || die "postgres: HERALD_STACK_TLS_CERT_FILE needs HERALD_STACK_TLS_KEY_FILE"
	local owner=()
	[ "$(id -u)" -ne 0 ] || owner=(-o postgres -g postgres)
	install -m 600 "${owner[@]}" "$TLS_CERT_FILE" "$PG_DIR/server.crt"
	install -m 600 "${owner[@]}" "$TLS_KEY_FILE" "$PG_DIR/server.key"
	echo " -c ssl=on -c ssl_cert_file='$PG_DIR/server.crt' -c ssl_key_file='$PG_DIR/server.key'"
}

postgres_psql() {
	"$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -At "$@"
}

# postgres_ready: a real round trip (SELECT 1) and logical decoding on, within 30 s.
postgres_ready() {
	local i wal=""
	for ((i = 0; i < 150; i++)); do
		if "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres &&
			[ "$(postgres_psql -c 'SELECT 1' 2>/dev/null)" = "1" ]; then
			wal="$(postgres_psql -c 'SHOW wal_level')"
			[ "$wal" = "logical" ] || fail postgres "$PG_LOG" "wal_level is '$wal', want 'logical'"
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# postgres_create_db: the database `herald` that `herald serve` uses (tests make their own).
postgres_create_db() {
	if [ "$(postgres_psql -c "SELECT 1 FROM pg_database WHERE datname = 'herald'")" != "1" ]; then
		postgres_psql -c 'CREATE DATABASE herald' >/dev/null 2>&1 ||
			[ "$(postgres_psql -c "SELECT 1 FROM pg_database WHERE datname = 'herald'")" = "1" ] ||
			fail postgres "$PG_LOG" "could not create database herald"
		say "postgres: created database herald"
	fi
}

postgres_down() {
	if ! postgres_running; then
		say "postgres is not running"
		return 0
	fi
	say "stopping postgres"
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t "$STOP_TIMEOUT" stop >/dev/null 2>&1 ||
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 ||
		fail postgres "$PG_LOG" "did not stop"
}

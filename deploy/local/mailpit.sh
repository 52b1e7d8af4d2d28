# shellcheck shell=bash
# mailpit: a local SMTP server with a web UI and a REST API for received mail (sourced by
# stack.sh). Only started on request (`stack.sh up mailpit`, `make run`). Built once with
# `go install` into $STACK/bin.

MAILPIT_DIR="$STACK/mailpit"
MAILPIT_PID="$MAILPIT_DIR/mailpit.pid"
MAILPIT_LOG="$MAILPIT_DIR/mailpit.log"
MAILPIT_BIN="$STACK/bin/mailpit"

mailpit_log() { echo "$MAILPIT_LOG"; }

mailpit_running() {
	pid_matches "$MAILPIT_PID" "$MAILPIT_BIN"
}

mailpit_describe() {
	echo "smtp 127.0.0.1:$MAILPIT_SMTP_PORT  ui http://127.0.0.1:$MAILPIT_UI_PORT  pid $(head -n 1 "$MAILPIT_PID")"
}

# mailpit_smtp_ok: a real SMTP greeting ("220 ...") on the SMTP port.
mailpit_smtp_ok() {
	local line=""
	{ exec 8<>"/dev/tcp/127.0.0.1/$MAILPIT_SMTP_PORT"; } 2>/dev/null || return 1
	read -r -t 2 line <&8 || true
	printf 'QUIT\r\n' >&8 2>/dev/null || true
	exec 8<&- 8>&-
	[[ "$line" == 220* ]]
}

mailpit_install() {
	if [ -x "$MAILPIT_BIN" ] && [ "$(cat "$STACK/bin/.mailpit-version" 2>/dev/null)" = "$MAILPIT_VERSION" ]; then
		return 0
	fi
	ensure_go
	mkdir -p "$STACK/bin" "$MAILPIT_DIR"
	say "building mailpit $MAILPIT_VERSION (go install, once; takes a few minutes)"
	if ! (cd "$STACK" && GOBIN="$STACK/bin" GOFLAGS='' go install "github.com/axllent/mailpit@$MAILPIT_VERSION") \
		>"$MAILPIT_DIR/install.log" 2>&1 9>&-; then
		fail mailpit "$MAILPIT_DIR/install.log" "go install github.com/axllent/mailpit@$MAILPIT_VERSION failed"
	fi
	echo "$MAILPIT_VERSION" >"$STACK/bin/.mailpit-version"
}

mailpit_up() {
	if mailpit_running; then
		say "mailpit already running (smtp 127.0.0.1:$MAILPIT_SMTP_PORT, ui http://127.0.0.1:$MAILPIT_UI_PORT)"
		return 0
	fi
	local p
	reserve_ports "$MAILPIT_SMTP_PORT" "$MAILPIT_UI_PORT"
	for p in "$MAILPIT_SMTP_PORT" "$MAILPIT_UI_PORT"; do
		if port_in_use "$p"; then
			die "mailpit: port 127.0.0.1:$p is taken by another process; set HERALD_MAILPIT_SMTP_PORT / HERALD_MAILPIT_UI_PORT"
		fi
	done
	mailpit_install
	mkdir -p "$MAILPIT_DIR"
	[ -f "$MAILPIT_LOG" ] && mv -f "$MAILPIT_LOG" "$MAILPIT_LOG.1"
	say "starting mailpit (smtp 127.0.0.1:$MAILPIT_SMTP_PORT, ui http://127.0.0.1:$MAILPIT_UI_PORT)"
	setsid "$MAILPIT_BIN" --smtp "127.0.0.1:$MAILPIT_SMTP_PORT" --listen "127.0.0.1:$MAILPIT_UI_PORT" \
		--database "$MAILPIT_DIR/mailpit.db" --smtp-auth-accept-any --smtp-auth-allow-insecure \
		</dev/null >"$MAILPIT_LOG" 2>&1 9>&- &
	echo $! >"$MAILPIT_PID"
	await_exec "$MAILPIT_PID" "$MAILPIT_BIN"
	local i
	for ((i = 0; i < 150; i++)); do
		mailpit_running || fail mailpit "$MAILPIT_LOG" "mailpit exited during start-up"
		if mailpit_smtp_ok; then
			say "mailpit ready (smtp 127.0.0.1:$MAILPIT_SMTP_PORT, ui http://127.0.0.1:$MAILPIT_UI_PORT)"
			return 0
		fi
		sleep 0.2
	done
	fail mailpit "$MAILPIT_LOG" "no SMTP greeting on 127.0.0.1:$MAILPIT_SMTP_PORT within 30s"
}

mailpit_down() {
	if ! mailpit_running; then
		rm -f "$MAILPIT_PID"
		return 0
	fi
	stop_pid mailpit "$MAILPIT_PID"
}

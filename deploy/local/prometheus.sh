# shellcheck shell=bash
# prometheus: a metrics server for local runs (sourced by stack.sh). Only started on request
# (`stack.sh up prometheus`, `make run`). Debian's `prometheus` package (which also ships
# promtool) is installed when missing, but its system service is not used: the server runs
# from the stack with its own config and data dir, scrapes herald's /metrics and evaluates
# the recording and alert rules of deploy/prometheus/.

PROMETHEUS_DIR="$STACK/prometheus"
PROMETHEUS_PID="$PROMETHEUS_DIR/prometheus.pid"
PROMETHEUS_LOG="$PROMETHEUS_DIR/prometheus.log"
PROMETHEUS_CONFIG="$PROMETHEUS_DIR/prometheus.yml"
PROMETHEUS_BIN=/usr/bin/prometheus
PROMETHEUS_RULES_DIR="$REPO/deploy/prometheus"

prometheus_log() { echo "$PROMETHEUS_LOG"; }

prometheus_running() {
	pid_matches "$PROMETHEUS_PID" "$PROMETHEUS_CONFIG"
}

prometheus_describe() {
	echo "http://127.0.0.1:$PROMETHEUS_PORT  scrapes $PROMETHEUS_TARGET  pid $(head -n 1 "$PROMETHEUS_PID")"
}

# prometheus_install: Debian's package, for the server and promtool.
prometheus_install() {
	if [ -x "$PROMETHEUS_BIN" ] && command -v promtool >/dev/null; then
		return 0
	fi
	apt_install prometheus
}

# prometheus_write_config: one job, herald, at $PROMETHEUS_TARGET (host:port of the listener
# that serves /metrics), scraped every 5 s; the rules of deploy/prometheus/.
prometheus_write_config() {
	cat >"$PROMETHEUS_CONFIG" <<YAML
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $PROMETHEUS_RULES_DIR/*.rules.yml
scrape_configs:
  - job_name: herald
    metrics_path: /metrics
    static_configs:
      - targets: ['$PROMETHEUS_TARGET']
YAML
}

prometheus_ready() {
	curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" 2>/dev/null
}

prometheus_up() {
	if prometheus_running; then
		# The target may have changed (HERALD_PROMETHEUS_TARGET): write the config again and
		# let the server reload it.
		prometheus_write_config
		kill -HUP "$(head -n 1 "$PROMETHEUS_PID")"
		say "prometheus already running (http://127.0.0.1:$PROMETHEUS_PORT, scrapes $PROMETHEUS_TARGET)"
		return 0
	fi
	reserve_ports "$PROMETHEUS_PORT"
	if port_in_use "$PROMETHEUS_PORT"; then
		die "prometheus: port 127.0.0.1:$PROMETHEUS_PORT is taken by another process; set HERALD_PROMETHEUS_PORT"
	fi
	prometheus_install
	mkdir -p "$PROMETHEUS_DIR/data"
	prometheus_write_config
	[ -f "$PROMETHEUS_LOG" ] && mv -f "$PROMETHEUS_LOG" "$PROMETHEUS_LOG.1"
	say "starting prometheus (http://127.0.0.1:$PROMETHEUS_PORT, scrapes $PROMETHEUS_TARGET)"
	setsid "$PROMETHEUS_BIN" --config.file="$PROMETHEUS_CONFIG" --storage.tsdb.path="$PROMETHEUS_DIR/data" \
		--storage.tsdb.retention.time=2d --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" \
		</dev/null >"$PROMETHEUS_LOG" 2>&1 9>&- &
	echo $! >"$PROMETHEUS_PID"
	await_exec "$PROMETHEUS_PID" "$PROMETHEUS_CONFIG"
	local i
	for ((i = 0; i < 300; i++)); do
		prometheus_running || fail prometheus "$PROMETHEUS_LOG" "prometheus exited during start-up"
		if prometheus_ready; then
			say "prometheus ready (http://127.0.0.1:$PROMETHEUS_PORT)"
			return 0
		fi
		sleep 0.2
	done
	fail prometheus "$PROMETHEUS_LOG" "http://127.0.0.1:$PROMETHEUS_PORT/-/ready did not answer within 60s"
}

prometheus_down() {
	if ! prometheus_running; then
		rm -f "$PROMETHEUS_PID"
		return 0
	fi
	stop_pid prometheus "$PROMETHEUS_PID"
}

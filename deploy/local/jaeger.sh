# shellcheck shell=bash
# jaeger: a tracing backend for local runs and the end-to-end trace test (sourced by stack.sh).
# Only started on request (`stack.sh up jaeger`, `make run`, `make test`). The binary is the
# Jaeger v2 all-in-one (`cmd/jaeger` of github.com/jaegertracing/jaeger, pinned as a Go tool
# in deploy/local/jaeger/go.mod), built once into $STACK/bin: the build is long (about 7.5
# minutes and 2 GB of memory on 2 cores), so it is never repeated while the pinned version
# stays. In-memory storage: a restart forgets every trace.

JAEGER_DIR="$STACK/jaeger"
JAEGER_PID="$JAEGER_DIR/jaeger.pid"
JAEGER_LOG="$JAEGER_DIR/jaeger.log"
JAEGER_CONFIG="$JAEGER_DIR/config.yaml"
JAEGER_BIN="$STACK/bin/jaeger"
JAEGER_MODULE_DIR="$HERE/jaeger"

jaeger_log() { echo "$JAEGER_LOG"; }

jaeger_running() {
	pid_matches "$JAEGER_PID" "$JAEGER_BIN"
}

jaeger_describe() {
	echo "otlp grpc 127.0.0.1:$JAEGER_OTLP_GRPC_PORT  otlp http 127.0.0.1:$JAEGER_OTLP_HTTP_PORT  ui http://127.0.0.1:$JAEGER_UI_PORT  pid $(head -n 1 "$JAEGER_PID")"
}

# jaeger_version: the pinned version, read from the tools module's go.mod.
jaeger_version() {
	sed -n 's/^[[:space:]]*github.com\/jaegertracing\/jaeger \(v[^ ]*\).*/\1/p' "$JAEGER_MODULE_DIR/go.mod" | head -n 1
}

jaeger_install() {
	local version
	version="$(jaeger_version)"
	[ -n "$version" ] || die "jaeger: no version of github.com/jaegertracing/jaeger in $JAEGER_MODULE_DIR/go.mod"
	if [ -x "$JAEGER_BIN" ] && [ "$(cat "$STACK/bin/.jaeger-version" 2>/dev/null)" = "$version" ]; then
		return 0
	fi
	ensure_go
	mkdir -p "$STACK/bin" "$JAEGER_DIR"
	say "building jaeger $version (go build, once; about 7.5 minutes and 2 GB of memory on 2 cores; log: $JAEGER_DIR/build.log)"
	if ! (cd "$JAEGER_MODULE_DIR" && GOFLAGS='' go build -o "$JAEGER_BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger) \
		>"$JAEGER_DIR/build.log" 2>&1 9>&-; then
		fail jaeger "$JAEGER_DIR/build.log" "go build github.com/jaegertracing/jaeger/cmd/jaeger@$version failed"
	fi
	mv -f "$JAEGER_BIN.tmp" "$JAEGER_BIN"
	echo "$version" >"$STACK/bin/.jaeger-version"
}

# jaeger_write_config: all-in-one with in-memory storage; only the OTLP receivers, the
# query API/UI and the health check, each on 127.0.0.1; no internal metrics endpoint.
jaeger_write_config() {
	cat >"$JAEGER_CONFIG" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$JAEGER_HEALTH_PORT
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$JAEGER_UI_PORT
    grpc:
      endpoint: 127.0.0.1:$JAEGER_QUERY_GRPC_PORT
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: $JAEGER_MAX_TRACES
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$JAEGER_OTLP_GRPC_PORT
      http:
        endpoint: 127.0.0.1:$JAEGER_OTLP_HTTP_PORT
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
}

# jaeger_ready: the query API answers (it lists the services it has traces of).
jaeger_ready() {
	curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$JAEGER_UI_PORT/api/services" 2>/dev/null &&
		curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$JAEGER_HEALTH_PORT/status" 2>/dev/null
}

jaeger_up() {
	if jaeger_running; then
		say "jaeger already running (ui http://127.0.0.1:$JAEGER_UI_PORT)"
		return 0
	fi
	local p
	reserve_ports "$JAEGER_OTLP_GRPC_PORT" "$JAEGER_OTLP_HTTP_PORT" "$JAEGER_UI_PORT" "$JAEGER_QUERY_GRPC_PORT" "$JAEGER_HEALTH_PORT"
	for p in "$JAEGER_OTLP_GRPC_PORT" "$JAEGER_OTLP_HTTP_PORT" "$JAEGER_UI_PORT" "$JAEGER_QUERY_GRPC_PORT" "$JAEGER_HEALTH_PORT"; do
		if port_in_use "$p"; then
			die "jaeger: port 127.0.0.1:$p is taken by another process; set the HERALD_JAEGER_*_PORT variables"
		fi
	done
	jaeger_install
	mkdir -p "$JAEGER_DIR"
	jaeger_write_config
	[ -f "$JAEGER_LOG" ] && mv -f "$JAEGER_LOG" "$JAEGER_LOG.1"
	say "starting jaeger (otlp grpc 127.0.0.1:$JAEGER_OTLP_GRPC_PORT, http 127.0.0.1:$JAEGER_OTLP_HTTP_PORT; ui http://127.0.0.1:$JAEGER_UI_PORT)"
	setsid "$JAEGER_BIN" --config "file:$JAEGER_CONFIG" </dev/null >"$JAEGER_LOG" 2>&1 9>&- &
	echo $! >"$JAEGER_PID"
	await_exec "$JAEGER_PID" "$JAEGER_BIN"
	local i
	for ((i = 0; i < 300; i++)); do
		jaeger_running || fail jaeger "$JAEGER_LOG" "jaeger exited during start-up"
		if jaeger_ready; then
			say "jaeger ready (ui http://127.0.0.1:$JAEGER_UI_PORT)"
			return 0
		fi
		sleep 0.2
	done
	fail jaeger "$JAEGER_LOG" "the query API on 127.0.0.1:$JAEGER_UI_PORT did not answer within 60s"
}

jaeger_down() {
	if ! jaeger_running; then
		rm -f "$JAEGER_PID"
		return 0
	fi
	stop_pid jaeger "$JAEGER_PID"
}

# shellcheck shell=bash
# Apache Kafka 4 (KRaft, one combined broker+controller node) from Maven Central jars
# (sourced by stack.sh). The jars come once, through deploy/local/kafka/pom.xml, into
# $STACK/kafka/libs; extra Maven arguments (e.g. -Dmaven.repo.local=...) go in HERALD_MAVEN_ARGS.

KAFKA_DIR="$STACK/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
KAFKA_DATA="$KAFKA_DIR/data"
KAFKA_CONF="$KAFKA_DIR/server.properties"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_LOG="$KAFKA_DIR/kafka.log"
KAFKA_READY_BIN="$STACK/bin/kafkaready"
# The broker's scheduling priority (HERALD_KAFKA_NICE, a nice value; 0 leaves it alone).
# Everything of the stack shares two cores here, where a production broker has machines of
# its own: at normal priority, the relay's produce requests waited for the CPU between the
# broker's network and request threads (34–169 ms at p50 at 1,000 rows/s, while the broker
# itself used under a quarter of a core); at -10 they took 1–3 ms. See docs/local-stack.md and
# docs/benchmarks.md, "The relay's tail is the broker's share of the CPU".
KAFKA_NICE="${HERALD_KAFKA_NICE:--10}"
KAFKA_GC="${HERALD_KAFKA_GC:-g1}"

kafka_log() { echo "$KAFKA_LOG"; }

kafka_running() {
	pid_matches "$KAFKA_PID" "kafka.Kafka $KAFKA_CONF"
}

kafka_describe() {
	echo "127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT)  pid $(head -n 1 "$KAFKA_PID")  heap $KAFKA_HEAP  v$(cat "$KAFKA_LIBS/.version" 2>/dev/null)"
}

kafka_java() {
	if ! command -v java >/dev/null; then
		apt_install openjdk-17-jre-headless
	fi
	local major
	major="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p')"
	if [ -z "$major" ] || [ "$major" -lt 17 ]; then
		die "kafka: needs Java 17 or newer, found '${major:-unknown}' ($(command -v java))"
	fi
}

# kafka_libs: the broker's jars, fetched by Maven unless this version is already there.
kafka_libs() {
	if [ -f "$KAFKA_LIBS/.version" ] && [ "$(cat "$KAFKA_LIBS/.version")" = "$KAFKA_VERSION" ]; then
		return 0
	fi
	local tmp="$KAFKA_DIR/libs.tmp" mlog="$KAFKA_DIR/maven.log" shared="$REPO/.stack/kafka/libs"
	rm -rf "$tmp"
	# A private stack dir (a test's own broker) takes the jars of the default stack dir.
	if [ "$shared" != "$KAFKA_LIBS" ] && [ "$(cat "$shared/.version" 2>/dev/null)" = "$KAFKA_VERSION" ]; then
		cp -a "$shared" "$tmp"
		rm -rf "$KAFKA_LIBS"
		mv "$tmp" "$KAFKA_LIBS"
		return 0
	fi
	if ! command -v mvn >/dev/null; then
		apt_install maven
	fi
	say "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central (once)"
	# shellcheck disable=SC2086 # HERALD_MAVEN_ARGS is a list of arguments
	if ! mvn -B -ntp -f "$HERE/kafka/pom.xml" ${HERALD_MAVEN_ARGS:-} \
		-Dkafka.version="$KAFKA_VERSION" -Dkafka.libs="$tmp" \
		dependency:copy-dependencies >"$mlog" 2>&1 9>&-; then
		fail kafka "$mlog" "Maven could not fetch the Kafka jars"
	fi
	ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || fail kafka "$mlog" "no kafka_2.13 jar in $tmp"
	echo "$KAFKA_VERSION" >"$tmp/.version"
	rm -rf "$KAFKA_LIBS"
	mv "$tmp" "$KAFKA_LIBS"
}

# kafka_ready_bin: builds the Go readiness probe (deploy/local/kafkaready) when missing or stale.
kafka_ready_bin() {
	local src="$HERE/kafkaready/main.go"
	if [ -x "$KAFKA_READY_BIN" ] && [ "$KAFKA_READY_BIN" -nt "$src" ]; then
		return 0
	fi
	ensure_go
	mkdir -p "$STACK/bin"
	say "building the Kafka readiness probe"
	(cd "$REPO" && go build -o "$KAFKA_READY_BIN" ./deploy/local/kafkaready) 9>&- ||
		die "kafka: could not build deploy/local/kafkaready"
}

kafka_write_conf() {
	local listeners="PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT"
	local advertised="PLAINTEXT://127.0.0.1:$KAFKA_PORT"
	local protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	if [ -n "$KAFKA_SECURE_PORT" ]; then
		listeners+=",SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT"
		advertised+=",SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT"
		protocols+=",SASL_SSL:SASL_SSL"
	fi
	cat >"$KAFKA_CONF" <<EOF
# Written by deploy/local/stack.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$KAFKA_DATA

# One node: every internal topic has one replica and accepts writes with it.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=4
min.insync.replicas=1
default.replication.factor=1
num.partitions=1

# herald creates its topics at start-up; tests create and delete their own.
auto.create.topics.enable=false
delete.topic.enable=true
group.initial.rebalance.delay.ms=0

log.retention.hours=24
num.network.threads=2
num.io.threads=4
EOF
	[ -z "$KAFKA_SECURE_PORT" ] || kafka_write_secure_conf
}

# kafka_write_secure_conf: the SASL_SSL listener of a private broker: TLS with PEM files
# (Kafka reads a key and its chain from one PEM file), SCRAM users created at format time,
# the same user for PLAIN, and client certificates required when a CA file is given.
kafka_write_secure_conf() {
	[ -n "$TLS_CERT_FILE" ] && [ -n "$TLS_KEY_FILE" ] ||
		die "kafka: HERALD_KAFKA_SECURE_PORT needs HERALD_STACK_TLS_CERT_FILE and HERALD_STACK_TLS_KEY_FILE"
	[ -n "$STACK_USER" ] && [ -n "$STACK_PASSWORD" ] ||
		die "kafka: HERALD_KAFKA_SECURE_PORT needs HERALD_STACK_USER and HERALD_STACK_PASSWORD"
	(umask 077 && cat "$TLS_KEY_FILE" "$TLS_CERT_FILE" >"$KAFKA_DIR/keystore.pem")
	chmod 600 "$KAFKA_CONF" # it holds the PLAIN password
	cat >>"$KAFKA_CONF" <<EOF

# The secured listener (HERALD_KAFKA_SECURE_PORT): TLS + SCRAM (users in the metadata log)
# or PLAIN (the one user below).
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$STACK_USER="$STACK_PASSWORD";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$KAFKA_DIR/keystore.pem
EOF
	if [ -n "$TLS_CA_FILE" ]; then
		cat >>"$KAFKA_CONF" <<EOF
listener.name.sasl_ssl.ssl.truststore.type=PEM
listener.name.sasl_ssl.ssl.truststore.location=$TLS_CA_FILE
listener.name.sasl_ssl.ssl.client.auth=required
EOF
	fi
}

kafka_format() {
	[ -f "$KAFKA_DATA/meta.properties" ] && return 0
	say "formatting Kafka storage in $KAFKA_DATA (cluster id $KAFKA_CLUSTER_ID)"
	mkdir -p "$KAFKA_DATA"
	local scram=()
	if [ -n "$KAFKA_SECURE_PORT" ]; then
		scram=(--add-scram "SCRAM-SHA-256=[name=$STACK_USER,password=$STACK_PASSWORD]"
			--add-scram "SCRAM-SHA-512=[name=$STACK_USER,password=$STACK_PASSWORD]")
	fi
	java -Dlog4j2.configurationFile="$HERE/kafka/log4j2.properties" -cp "$KAFKA_LIBS/*" \
		kafka.tools.StorageTool format -t "$KAFKA_CLUSTER_ID" -c "$KAFKA_CONF" --ignore-formatted \
		"${scram[@]}" >"$KAFKA_DIR/format.log" 2>&1 9>&- || fail kafka "$KAFKA_DIR/format.log" "storage format failed"
}

kafka_start() {
	[ -f "$KAFKA_LOG" ] && mv -f "$KAFKA_LOG" "$KAFKA_LOG.1"
	say "starting kafka on 127.0.0.1:$KAFKA_PORT (heap $KAFKA_HEAP)"
	# setsid: the broker outlives the shell (and a Ctrl-C of `make run`); stop it with `down`.
	# The collector (HERALD_KAFKA_GC): G1 by default, with NewRatio=3 fixing the young
	# generation at a quarter of the heap (left to its pause target on two busy cores it shrank
	# to its 5 % floor and paused every few seconds: 8 pauses, 558 ms in all, in 79 s of the
	# relay scenario). zgc has no pause above a millisecond, but costs concurrent cycles on the
	# same cores; interleaved with G1 it did not lower the relay's tail (docs/benchmarks.md,
	# "The broker's collector, interleaved"). Every collection is in $KAFKA_DIR/gc.log.
	local gc
	case "$KAFKA_GC" in
	g1) gc=(-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:NewRatio=3 -XX:InitiatingHeapOccupancyPercent=35) ;;
	zgc) gc=(-XX:+UseZGC) ;;
	*) die "kafka: HERALD_KAFKA_GC is '$KAFKA_GC', expected zgc or g1" ;;
	esac
	# shellcheck disable=SC2086 # HERALD_KAFKA_OPTS is a list of JVM options
	setsid java -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" "${gc[@]}" -XX:+ExplicitGCInvokesConcurrent \
		-Xlog:gc:file="$KAFKA_DIR/gc.log":time,uptime:filecount=2,filesize=10m \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$HERE/kafka/log4j2.properties" -Dkafka.logs.dir="$KAFKA_DIR" \
		${HERALD_KAFKA_OPTS:-} -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_CONF" \
		</dev/null >"$KAFKA_LOG" 2>&1 9>&- &
	echo $! >"$KAFKA_PID"
	await_exec "$KAFKA_PID" "kafka.Kafka $KAFKA_CONF"
}

# kafka_priority: the broker's session (setsid: its own scheduling autogroup, which is what the
# kernel weighs against the other sessions) and every thread of it at $KAFKA_NICE, once it is
# ready (its threads are there). A negative
# value needs root (CAP_SYS_NICE); without it the broker runs at normal priority, and says so.
kafka_priority() {
	[ "$KAFKA_NICE" = 0 ] && return 0
	local pid ok=""
	pid="$(head -n 1 "$KAFKA_PID")"
	if [ -w "/proc/$pid/autogroup" ] && echo "$KAFKA_NICE" 2>/dev/null >"/proc/$pid/autogroup"; then
		ok=1
	fi
	# shellcheck disable=SC2046 # one argument per thread id
	if renice -n "$KAFKA_NICE" -p $(ls "/proc/$pid/task") >/dev/null 2>&1; then
		ok=1
	fi
	if [ -z "$ok" ]; then
		say "kafka: could not set its priority to nice $KAFKA_NICE (needs root); it runs at normal priority"
	fi
}

# kafka_wait_ready: process alive, "Kafka Server started" in the log, and a client round trip
# (kafkaready lists the brokers), within $KAFKA_READY_TIMEOUT seconds.
kafka_wait_ready() {
	local deadline=$((SECONDS + KAFKA_READY_TIMEOUT)) started=""
	while ((SECONDS < deadline)); do
		kafka_running || fail kafka "$KAFKA_LOG" "the broker process exited during start-up"
		if [ -z "$started" ] && grep -q 'Kafka Server started' "$KAFKA_LOG"; then
			started=1
		fi
		if [ -n "$started" ] && "$KAFKA_READY_BIN" -brokers "127.0.0.1:$KAFKA_PORT" -timeout 3s >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	if [ -z "$started" ]; then
		fail kafka "$KAFKA_LOG" "no 'Kafka Server started' in the log within ${KAFKA_READY_TIMEOUT}s (HERALD_KAFKA_READY_TIMEOUT); it is still running: \`up\` again waits for it, \`down kafka\` stops it"
	fi
	"$KAFKA_READY_BIN" -brokers "127.0.0.1:$KAFKA_PORT" -timeout 3s >"$KAFKA_DIR/ready.log" 2>&1 || true
	cat "$KAFKA_DIR/ready.log" >>"$KAFKA_LOG"
	fail kafka "$KAFKA_LOG" "started but no client round trip to 127.0.0.1:$KAFKA_PORT within ${KAFKA_READY_TIMEOUT}s; it is still running: \`up\` again waits for it, \`down kafka\` stops it"
}

kafka_up() {
	if kafka_running; then
		kafka_ready_bin
		if "$KAFKA_READY_BIN" -brokers "127.0.0.1:$KAFKA_PORT" -timeout 10s >/dev/null 2>&1; then
			kafka_priority
			say "kafka already running on 127.0.0.1:$KAFKA_PORT"
			return 0
		fi
		say "kafka is running but not answering yet; waiting"
		kafka_wait_ready
		kafka_priority
		say "kafka ready on 127.0.0.1:$KAFKA_PORT"
		return 0
	fi
	local p
	for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
		if port_in_use "$p"; then
			die "kafka: port 127.0.0.1:$p is taken by another process; set HERALD_KAFKA_PORT / HERALD_KAFKA_CONTROLLER_PORT"
		fi
	done
	reserve_ports "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SECURE_PORT"
	kafka_java
	mkdir -p "$KAFKA_DIR"
	kafka_libs
	kafka_write_conf
	kafka_format
	kafka_start
	# The probe builds while the JVM starts.
	kafka_ready_bin
	kafka_wait_ready
	kafka_priority
	say "kafka ready on 127.0.0.1:$KAFKA_PORT"
}

kafka_down() {
	if ! kafka_running; then
		say "kafka is not running"
		rm -f "$KAFKA_PID"
		return 0
	fi
	stop_pid kafka "$KAFKA_PID"
}

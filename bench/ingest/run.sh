#!/usr/bin/env bash
# Measures herald's ingest against pgbench of the same SQL, in one run, on the local stack:
#
#   1. a scratch database, migrated by `herald migrate`, an API key from `herald apikey create`,
#      the fixture of ingest/testdata/pgbench_accept.sql (its client, template otp, 1000 users
#      with stored contacts);
#   2. `herald serve --roles ingest` in the background;
#   3. pgbench of ingest/testdata/pgbench_accept.sql (tx/s) and the load generator
#      (bench/ingest) closed loop (POST/s), BENCH_SECONDS each, alternating in BENCH_ROUNDS
#      slices;
#   4. the load generator open loop at half that rate for BENCH_SECONDS: latency;
#
# then prints one summary block, stops herald and drops the database (also on failure or ^C).
#
#   deploy/local/stack.sh up            # PostgreSQL is all this needs
#   bench/ingest/run.sh                 # about 4 x BENCH_SECONDS + build time
#
# Settings (environment):
#   BENCH_SECONDS=10          length of each phase (pgbench, closed loop, open loop)
#   BENCH_ROUNDS=5            pgbench and the closed loop alternate in this many slices
#   BENCH_PG_CLIENTS=16       pgbench clients (-c), one connection each
#   BENCH_POOL=16             herald's --database-max-conns
#   BENCH_CONCURRENCY=32      load generator connections, closed loop
#   BENCH_OPEN_CONCURRENCY=64 load generator connections (most requests in flight), open loop
#   BENCH_HERALD_ENV=         extra environment of herald serve, e.g. "GOGC=200 GOMAXPROCS=1"
#   BENCH_HERALD_BIN=path     a prebuilt herald binary to measure (default: build ./cmd/herald)
#   BENCH_KEEP=1              keep the scratch directory (herald log) for inspection
set -euo pipefail

cd "$(dirname "$0")/../.."
SECONDS_PER_PHASE=${BENCH_SECONDS:-10}
PG_CLIENTS=${BENCH_PG_CLIENTS:-16}
POOL=${BENCH_POOL:-16}
CONCURRENCY=${BENCH_CONCURRENCY:-32}
OPEN_CONCURRENCY=${BENCH_OPEN_CONCURRENCY:-64}
ROUNDS=${BENCH_ROUNDS:-5}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

eval "$(deploy/local/stack.sh env)"
ADMIN_URL=$HERALD_TEST_POSTGRES_URL
if ! psql "$ADMIN_URL" -qAtc 'SELECT 1' >/dev/null 2>&1; then
	echo "run.sh: PostgreSQL at $ADMIN_URL does not answer; start it with deploy/local/stack.sh up" >&2
	exit 1
fi

DB=herald_bench_ingest_$$
DB_URL=$(printf '%s' "$ADMIN_URL" | sed -E "s#/[^/?]*(\?|\$)#/$DB\1#")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/herald-bench-ingest.XXXXXX")
HERALD_PID=
DB_CREATED=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $HERALD_PID ]] && kill -0 "$HERALD_PID" 2>/dev/null; then
		kill -TERM "$HERALD_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$HERALD_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$HERALD_PID" 2>/dev/null || true
		wait "$HERALD_PID" 2>/dev/null || true
	fi
	if [[ -n $DB_CREATED ]]; then
		psql "$ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 ||
			echo "run.sh: could not drop database $DB" >&2
	fi
	if [[ $rc -ne 0 && -s $TMP/herald.log ]]; then
		echo "--- herald log (last 20 lines)" >&2
		tail -n 20 "$TMP/herald.log" >&2
	fi
	if [[ -n ${BENCH_KEEP:-} ]]; then
		echo "run.sh: kept $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# cpu_ticks PID prints the user+system CPU time of PID in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

step() { printf '== %s\n' "$*" >&2; }

# field NAME FILE prints the value of NAME=value from the RESULT line of FILE.
field() { grep '^RESULT ' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

step "build"
if [[ -n ${BENCH_HERALD_BIN:-} ]]; then
	cp "$BENCH_HERALD_BIN" "$TMP/herald"
else
	go build -o "$TMP/herald" ./cmd/herald
fi
go build -o "$TMP/loadgen" ./bench/ingest

step "scratch database $DB"
DB_CREATED=1 # before CREATE: the cleanup drops it IF EXISTS
psql "$ADMIN_URL" -qc "CREATE DATABASE $DB" >/dev/null
"$TMP/herald" migrate --database-url "$DB_URL" --log-level warn >&2
KEY=$("$TMP/herald" apikey create --name bench --scopes operator --database-url "$DB_URL" --log-level warn | sed -n 's/^api key: *//p')
[[ -n $KEY ]] || { echo "run.sh: herald apikey create printed no key" >&2; exit 1; }
# The fixture pgbench_accept.sql assumes: its client id, template otp, users 1..1000 with contacts.
psql "$DB_URL" -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
INSERT INTO api_client (id, name, key_prefix, key_hash)
VALUES ('01a229cf-0000-7000-8000-000000000001', 'pgbench', 'hk_x', '\x00');
INSERT INTO template (name, category, channels, content) VALUES ('otp', 'security', '{SMS,EMAIL}',
  '{"SMS":{"default":{"text":"Your code is {{.code}}"}},"EMAIL":{"default":{"subject":"Your code","text":"Your code is {{.code}}"}}}');
INSERT INTO user_contact (user_id, email, phone)
SELECT i, 'u' || i || '@example.com', '+1555' || lpad(i::text, 7, '0') FROM generate_series(1, 1000) AS i;
VACUUM ANALYZE;
SQL

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
step "herald serve --roles ingest on 127.0.0.1:$PORT, pool $POOL"
# shellcheck disable=SC2086 # BENCH_HERALD_ENV is a list of NAME=value words
env ${BENCH_HERALD_ENV:-} "$TMP/herald" serve --roles ingest --http-addr "127.0.0.1:$PORT" --admin-addr '' \
	--database-url "$DB_URL" --database-max-conns "$POOL" --log-level warn >"$TMP/herald.log" 2>&1 &
HERALD_PID=$!
for i in $(seq 300); do
	if curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then break; fi
	kill -0 "$HERALD_PID" 2>/dev/null || { echo "run.sh: herald exited" >&2; exit 1; }
	[[ $i -lt 300 ]] || { echo "run.sh: herald not ready after 30s" >&2; exit 1; }
	sleep 0.1
done

LOAD=("$TMP/loadgen" --url "http://127.0.0.1:$PORT" --key "$KEY" --template otp --create-template=false
	--users 1000 --to=false)
# A second of warm-up (connections, statement caches), not measured.
"${LOAD[@]}" --concurrency "$CONCURRENCY" --duration 1s >"$TMP/warmup.out" 2>&1 || { cat "$TMP/warmup.out" >&2; exit 1; }

# pgbench and the closed loop alternate in ROUNDS slices, so that a change in the machine's
# other load during the run hits both alike. Each rate is the total count over the total time.
SLICE=$((SECONDS_PER_PHASE / ROUNDS))
((SLICE >= 1)) || { echo "run.sh: BENCH_SECONDS must be at least BENCH_ROUNDS" >&2; exit 1; }
PG_TX=0 PG_SECONDS=0 POSTED=0 POST_SECONDS=0 TICKS=0
for r in $(seq "$ROUNDS"); do
	step "round $r/$ROUNDS: pgbench, $PG_CLIENTS clients, ${SLICE}s"
	pgbench -n -M prepared -c "$PG_CLIENTS" -j 2 -T "$SLICE" \
		-f ingest/testdata/pgbench_accept.sql "$DB_URL" >"$TMP/pgbench.out" 2>&1 ||
		{ cat "$TMP/pgbench.out" >&2; exit 1; }
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$TMP/pgbench.out")
	[[ -n $n ]] || { cat "$TMP/pgbench.out" >&2; exit 1; }
	cat "$TMP/pgbench.out" >>"$TMP/pgbench.all"
	PG_TX=$((PG_TX + n)) PG_SECONDS=$((PG_SECONDS + SLICE))

	step "round $r/$ROUNDS: load generator closed loop, $CONCURRENCY connections, ${SLICE}s"
	t0=$(cpu_ticks "$HERALD_PID")
	"${LOAD[@]}" --concurrency "$CONCURRENCY" --duration "${SLICE}s" >"$TMP/closed.out" 2>&1 ||
		{ cat "$TMP/closed.out" >&2; exit 1; }
	t1=$(cpu_ticks "$HERALD_PID")
	cat "$TMP/closed.out" >>"$TMP/closed.all"
	TICKS=$((TICKS + t1 - t0)) POSTED=$((POSTED + $(field accepted "$TMP/closed.out")))
	POST_SECONDS=$(awk -v a="$POST_SECONDS" -v n="$(field accepted "$TMP/closed.out")" -v r="$(field post_s "$TMP/closed.out")" \
		'BEGIN { printf "%.3f", a + n / r }')
done
TPS=$(awk -v n="$PG_TX" -v s="$PG_SECONDS" 'BEGIN { printf "%.0f", n / s }')
POSTS=$(awk -v n="$POSTED" -v s="$POST_SECONDS" 'BEGIN { printf "%.0f", n / s }')
# herald's CPU per accepted POST (user + system), from the ticks it spent in the closed loops.
HERALD_CPU=$(awk -v t="$TICKS" -v hz="$(getconf CLK_TCK)" -v n="$POSTED" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }')
HALF=$((POSTS / 2))

step "load generator open loop at $HALF/s, ${SECONDS_PER_PHASE}s"
t0=$(cpu_ticks "$HERALD_PID")
"${LOAD[@]}" --rate "$HALF" --concurrency "$OPEN_CONCURRENCY" --duration "${SECONDS_PER_PHASE}s" >"$TMP/open.out" 2>&1 ||
	{ cat "$TMP/open.out" >&2; exit 1; }
t1=$(cpu_ticks "$HERALD_PID")
OPEN_CPU=$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$(field accepted "$TMP/open.out")" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }')

RATIO=$(awk -v p="$POSTS" -v t="$TPS" 'BEGIN { printf "%.2f", p / t }')
cat <<EOF
ingest benchmark ($(date -u +%FT%TZ), $(nproc) cores, load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg))
  pgbench (pgbench_accept.sql, $PG_CLIENTS clients)   $(printf '%8s' "$TPS") tx/s    ($ROUNDS x ${SLICE}s)
  herald closed loop ($CONCURRENCY conns, pool $POOL)     $(printf '%8s' "$POSTS") POST/s  ($ROUNDS x ${SLICE}s, alternating with pgbench)
  CPU per POST (closed loop)                 herald $HERALD_CPU us, load generator $(field cpu_us "$TMP/closed.out") us
  ratio POST/s / pgbench tx/s                 $(printf '%8s' "$RATIO")   (target >= 0.60)
  open loop at $HALF/s (${SECONDS_PER_PHASE}s)      $(field post_s "$TMP/open.out") POST/s  herald CPU $OPEN_CPU us per POST
  latency at $HALF/s                         p50 $(field p50_ms "$TMP/open.out") ms  p90 $(field p90_ms "$TMP/open.out") ms  p99 $(field p99_ms "$TMP/open.out") ms  max $(field max_ms "$TMP/open.out") ms   (target p99 <= 25 ms)
EOF

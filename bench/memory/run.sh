#!/usr/bin/env bash
# Measures herald's resident memory while it carries a large backlog, on the local stack:
#
#   1. a scratch database, migrated by `herald migrate`;
#   2. `herald serve --roles relay,dispatch` (log senders, SMS limited to BENCH_LIMIT/s) with
#      its own slot, topics and consumer groups, started before the backlog so the relay
#      streams it;
#   3. BENCH_ROWS LOW SMS deliveries written in transactions of 10,000, as a campaign would;
#   4. herald's RSS sampled every second (/proc/PID/status) until the relay has published the
#      whole backlog and BENCH_HOLD seconds more have passed;
#
# then prints the peak and last RSS, stops herald and drops the database and its slot (the
# run's Kafka topics stay; they are small and named bench-mem-<pid>.*).
#
#   deploy/local/stack.sh up
#   bench/memory/run.sh                 # BENCH_ROWS=1000000: a few minutes
set -euo pipefail

cd "$(dirname "$0")/../.."
ROWS=${BENCH_ROWS:-1000000}
LIMIT=${BENCH_LIMIT:-500}
HOLD=${BENCH_HOLD:-30}

eval "$(deploy/local/stack.sh env)"
ADMIN_URL=$HERALD_TEST_POSTGRES_URL
RUN=bench_mem_$$
DB_URL=$(printf '%s' "$ADMIN_URL" | sed -E "s#/[^/?]*(\?|\$)#/$RUN\1#")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/herald-bench-memory.XXXXXX")
HERALD_PID=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $HERALD_PID ]] && kill -0 "$HERALD_PID" 2>/dev/null; then
		kill -TERM "$HERALD_PID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$HERALD_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$HERALD_PID" 2>/dev/null || true
		wait "$HERALD_PID" 2>/dev/null || true
	fi
	psql "$ADMIN_URL" -qAtc "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$RUN'" >/dev/null 2>&1 || true
	psql "$ADMIN_URL" -qAtc "DROP DATABASE IF EXISTS $RUN WITH (FORCE)" >/dev/null 2>&1 || true
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$TMP/herald" ./cmd/herald
psql "$ADMIN_URL" -qAtc "CREATE DATABASE $RUN"
"$TMP/herald" migrate --database-url "$DB_URL" >/dev/null

"$TMP/herald" serve --roles relay,dispatch --database-url "$DB_URL" --http-addr 127.0.0.1:0 --admin-addr '' \
	--relay-slot "$RUN" --relay-publication "$RUN" \
	--topic-high "bench-mem-$$.high" --topic-normal "bench-mem-$$.normal" --topic-low "bench-mem-$$.low" \
	--dispatch-group-high "$RUN-high" --dispatch-group-normal "$RUN-normal" --dispatch-group-low "$RUN-low" \
	--redis-prefix "$RUN:" --rate-limits "log:SMS=$LIMIT" --log-level warn >"$TMP/herald.log" 2>&1 &
HERALD_PID=$!

until psql "$DB_URL" -qAtc "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$RUN' AND active" | grep -q 1; do
	kill -0 "$HERALD_PID" 2>/dev/null || { echo "run.sh: herald exited:" >&2; tail -20 "$TMP/herald.log" >&2; exit 1; }
	sleep 0.2
done

psql "$DB_URL" -qAtc "INSERT INTO api_client (id, name, key_prefix, key_hash) VALUES (gen_random_uuid(), 'bench', 'hk_bench', '\\x00')"
start=$(date +%s)
for ((from = 1; from <= ROWS; from += 10000)); do
	to=$((from + 9999 < ROWS ? from + 9999 : ROWS))
	psql "$DB_URL" -qAt >/dev/null <<SQL
WITH n AS (
	INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category, recipient, priority, response)
	SELECT gen_random_uuid(), (SELECT id FROM api_client LIMIT 1), 'campaign-' || g, '\\x00', g, 'promo', 'marketing',
	       '{"phone":"+15550000000"}', 'LOW', '{}'
	FROM generate_series($from, $to) g
	RETURNING id)
INSERT INTO delivery (id, notification_id, channel, priority) SELECT gen_random_uuid(), id, 'SMS', 'LOW' FROM n;
SQL
done
inserted=$(($(date +%s) - start))

rss() { awk '/^VmRSS/ {print $2}' "/proc/$HERALD_PID/status"; }
peak=0
published_at=
while :; do
	kill -0 "$HERALD_PID" 2>/dev/null || { echo "run.sh: herald exited:" >&2; tail -20 "$TMP/herald.log" >&2; exit 1; }
	r=$(rss)
	((r > peak)) && peak=$r
	if [[ -z $published_at ]]; then
		left=$(psql "$DB_URL" -qAtc "SELECT count(*) FROM delivery WHERE status = 'PENDING' AND attempts = 0 AND next_attempt_at = created_at")
		[[ $left == 0 ]] && published_at=$(date +%s)
	elif (($(date +%s) - published_at >= HOLD)); then
		break
	fi
	sleep 1
done
sent=$(psql "$DB_URL" -qAtc "SELECT count(*) FROM delivery WHERE status = 'SENT'")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$HERALD_PID/status")

printf '\nherald memory with a backlog of %d LOW deliveries (relay + dispatch, limit %d/s)\n' "$ROWS" "$LIMIT"
printf '  backlog inserted in %ds, published to Kafka %ds after the first insert\n' "$inserted" "$((published_at - start))"
printf '  RSS: peak %d MB (VmHWM %d MB), last %d MB; %d deliveries sent meanwhile\n' \
	"$((peak / 1024))" "$((hwm / 1024))" "$(($(rss) / 1024))" "$sent"

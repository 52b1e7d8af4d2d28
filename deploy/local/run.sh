#!/usr/bin/env bash
# `make run`: the local stack (with mailpit when it can be had, Jaeger for traces and Prometheus
# for metrics and alert rules), the herald binary, migrations,
# a fresh development API key, the provider simulator (`herald sim`, in the background) and
# curl examples, then `herald serve` in the foreground with every role and real senders aimed
# at the simulator (SMS, push, webhook) and at mailpit (e-mail; the simulator's SMTP sink when
# mailpit is not available). Ctrl-C stops herald and the simulator; the stack keeps running
# (`make stack-down` stops it).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STACK_SH="$HERE/stack.sh"
HERALD="$REPO/bin/herald"
cd "$REPO"

"$STACK_SH" up postgres redis kafka
if ! "$STACK_SH" up mailpit; then
	echo "run: mailpit is not available; e-mail has no local SMTP server" >&2
fi
export HERALD_HTTP_ADDR="${HERALD_HTTP_ADDR:-127.0.0.1:8080}"
export HERALD_ADMIN_ADDR="${HERALD_ADMIN_ADDR:-127.0.0.1:9090}"
# Where the providers (here the simulator) post their delivery receipts: herald's API
# listener. The simulator signs them with the secrets it writes to herald.env.
export HERALD_PUBLIC_URL="${HERALD_PUBLIC_URL:-http://$HERALD_HTTP_ADDR}"
# Jaeger and Prometheus are a help, not a requirement: herald runs without them.
"$STACK_SH" up jaeger || echo "run: jaeger is not available; traces are not exported" >&2
# Prometheus scrapes the listener that serves /metrics: the admin listener unless
# HERALD_PROMETHEUS_TARGET says otherwise.
export HERALD_PROMETHEUS_TARGET="${HERALD_PROMETHEUS_TARGET:-$HERALD_ADMIN_ADDR}"
"$STACK_SH" up prometheus || echo "run: prometheus is not available" >&2
eval "$("$STACK_SH" env)"
jaeger_ui=""
if "$STACK_SH" is-up jaeger; then
	# Every span of herald goes to Jaeger over OTLP/HTTP (standard OTEL_* variables).
	export OTEL_EXPORTER_OTLP_ENDPOINT="${OTEL_EXPORTER_OTLP_ENDPOINT:-$HERALD_TEST_JAEGER_OTLP_ENDPOINT}"
	export OTEL_EXPORTER_OTLP_PROTOCOL="${OTEL_EXPORTER_OTLP_PROTOCOL:-http/protobuf}"
	jaeger_ui="$HERALD_TEST_JAEGER_QUERY_URL"
	# The console's timelines link the trace, and its trace view reads it from the query API.
	export HERALD_JAEGER_URL="${HERALD_JAEGER_URL:-$jaeger_ui}"
fi
prometheus_ui=""
if "$STACK_SH" is-up prometheus; then
	prometheus_ui="http://127.0.0.1:${HERALD_PROMETHEUS_PORT:-59090}"
fi
mailpit_smtp="${HERALD_SMTP_ADDR:-}"

echo "run: building bin/herald" >&2
go build -o "$HERALD" ./cmd/herald

"$HERALD" migrate

# A fresh dev key with every scope (operator). Its webhook signing secret goes to the
# simulator, whose webhook receiver then checks the signature of every webhook herald sends
# for this key (a webhook of another key answers 401 there).
created="$("$HERALD" apikey create --name "dev-$(date -u +%Y%m%dT%H%M%SZ)" --scopes operator)"
key="$(sed -n 's/^api key: *//p' <<<"$created" | head -n 1)"
webhook_secret="$(sed -n 's/^webhook secret: *//p' <<<"$created" | head -n 1)"
if [ -z "$key" ]; then
	# Whatever the output looks like, show it: it holds the key.
	echo "$created"
	key='<the key printed above>'
fi

# The provider simulator writes the settings that point herald's senders at it to
# $SIM_DIR/herald.env (and removes the file when it stops).
SIM_DIR="${HERALD_SIM_DIR:-${HERALD_STACK_DIR:-$REPO/.stack}/sim}"
mkdir -p "$SIM_DIR"
rm -f "$SIM_DIR/herald.env"
HERALD_SIM_WEBHOOK_SECRET="$webhook_secret" "$HERALD" sim --sim-dir "$SIM_DIR" >"$SIM_DIR/sim.log" 2>&1 &
sim_pid=$!
trap 'kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	[ -f "$SIM_DIR/herald.env" ] && break
	kill -0 "$sim_pid" 2>/dev/null || { cat "$SIM_DIR/sim.log" >&2; echo "run: herald sim exited" >&2; exit 1; }
	sleep 0.1
done
[ -f "$SIM_DIR/herald.env" ] || { cat "$SIM_DIR/sim.log" >&2; echo "run: herald sim wrote no env file" >&2; exit 1; }
set -a
# shellcheck disable=SC1091
. "$SIM_DIR/herald.env"
set +a
if [ -n "$mailpit_smtp" ]; then
	# E-mail goes to mailpit (plain SMTP, no AUTH needed) so that it shows in its web UI.
	export HERALD_SMTP_ADDR="$mailpit_smtp" HERALD_SMTP_TLS_POLICY=none
	unset HERALD_SMTP_USERNAME HERALD_SMTP_PASSWORD
fi


base="http://$HERALD_HTTP_ADDR"
cat <<EOF

==============================================================================
herald on $base  (Ctrl-C stops herald and the simulator; the stack keeps running)
dev API key: $key  (scope operator: every route)
webhook signing secret of this key: $webhook_secret  (Standard Webhooks; the simulator checks it)
provider simulator: $HERALD_SIM_URL  (log: $SIM_DIR/sim.log)
receipts: the simulator posts signed delivery receipts to $HERALD_PUBLIC_URL/providers/…, so an SMS or
  e-mail goes SENT → DELIVERED (or UNDELIVERED) a moment after it is sent (docs/receipts.md)
SMS: ${HERALD_SMS_PROVIDERS:-twilio, vonage as standby}; EMAIL: ${HERALD_EMAIL_PROVIDERS:-smtp, sendgrid as standby}
  (HERALD_SMS_PROVIDERS=vonage HERALD_EMAIL_PROVIDERS=sendgrid make run sends through the simulated Vonage and SendGrid)
metrics and pprof (admin listener, no key): http://$HERALD_ADMIN_ADDR/metrics  http://$HERALD_ADMIN_ADDR/debug/pprof/

# templates otp and order_shipped are seeded from deploy/local/templates/ (--templates-dir);
# GET $base/api/templates/otp shows one. Once: a user with every contact
curl -sS -X PUT $base/api/users/42 \\
  -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \\
  -d '{"email": "ada@example.com", "phone": "+447700900123", "webhookUrl": "${HERALD_SIM_WEBHOOK_URL}ada",
       "pushTokens": [{"token": "fcm-dev-token", "platform": "FCM"},
                      {"token": "$(printf '%064d' 42)", "platform": "APNS"}]}'

# an OTP on each channel, one notification per channel:
for CHANNEL in SMS EMAIL PUSH WEBHOOK; do
  curl -sS -X POST $base/api/notifications \\
    -H "Authorization: Bearer $key" -H "Idempotency-Key: otp-\$CHANNEL-\$(date +%s%N)" \\
    -H 'Content-Type: application/json' \\
    -d '{"userId": 42, "template": "otp", "channels": ["'\$CHANNEL'"], "priority": "HIGH",
         "payload": {"code": "123456"}}'; echo
done

curl -sS $base/api/notifications/<id> -H "Authorization: Bearer $key"
curl -sS $HERALD_SIM_URL/records    # what the simulated providers received
curl -sS $HERALD_SIM_URL/stats      # per provider: requests, outcomes, duplicates
EOF
if [ -n "$jaeger_ui" ]; then
	echo "traces (Jaeger): $jaeger_ui  (service herald; a delivery's trace id is in its traceparent)"
	echo "  the Jaeger UI is a placeholder page in this build (go build has no UI assets); its query API works,"
	echo "  the console's trace view shows a trace: $base/console/traces/<trace id> (log in at $base/console/"
	echo "  with the dev key; each notification's page links its trace view)"
else
	echo "jaeger is not running: traces are not exported"
fi
if [ -n "$prometheus_ui" ]; then
	echo "metrics and alerts (Prometheus): $prometheus_ui  (scrapes $HERALD_PROMETHEUS_TARGET/metrics; rules: deploy/prometheus/)"
fi
if [ -n "$mailpit_smtp" ]; then
	echo "mail sent by herald: http://127.0.0.1:${HERALD_MAILPIT_UI_PORT:-58025}"
else
	echo "mailpit is not running: e-mail goes to the simulator's SMTP sink ($HERALD_SMTP_ADDR)"
fi
echo "=============================================================================="
echo

# Not exec: the EXIT trap stops the simulator once herald has stopped.
"$HERALD" serve --templates-dir deploy/local/templates

#!/usr/bin/env bash
# `make run`: the local stack (with mailpit when it can be had), the herald binary, migrations,
# a fresh development API key and a curl example, then `herald serve` in the foreground with
# every role. Ctrl-C stops herald; the stack keeps running (`make stack-down` stops it).
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
eval "$("$STACK_SH" env)"
export HERALD_HTTP_ADDR="${HERALD_HTTP_ADDR:-127.0.0.1:8080}"

echo "run: building bin/herald" >&2
go build -o "$HERALD" ./cmd/herald

"$HERALD" migrate

created="$("$HERALD" apikey create --name "dev-$(date -u +%Y%m%dT%H%M%SZ)")"
key="$(sed -n 's/^api key: *//p' <<<"$created" | head -n 1)"
if [ -z "$key" ]; then
	# Whatever the output looks like, show it: it holds the key.
	echo "$created"
	key='<the key printed above>'
fi

base="http://$HERALD_HTTP_ADDR"
cat <<EOF

==============================================================================
herald on $base  (Ctrl-C stops herald; the stack keeps running)
dev API key: $key

# a template (once), a notification, its status:
curl -sS -X PUT $base/api/templates/welcome \\
  -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \\
  -d '{"category": "account", "channels": ["EMAIL", "SMS"], "content": {"locales": {"default": {
        "email": {"subject": "Welcome, {{.name}}", "text": "Hello {{.name}}!"},
        "sms": {"text": "Hello {{.name}}!"}}}}}'

curl -sS -X POST $base/api/notifications \\
  -H "Authorization: Bearer $key" -H "Idempotency-Key: \$(date +%s%N)" \\
  -H 'Content-Type: application/json' \\
  -d '{"userId": 42, "template": "welcome", "channels": ["EMAIL"],
       "to": {"email": "dev@example.com"}, "payload": {"name": "Ada"}}'

curl -sS $base/api/notifications/<id> -H "Authorization: Bearer $key"
EOF
if [ -n "${HERALD_SMTP_ADDR:-}" ]; then
	echo "mail sent by herald: http://127.0.0.1:${HERALD_MAILPIT_UI_PORT:-58025}"
fi
echo "=============================================================================="
echo

exec "$HERALD" serve

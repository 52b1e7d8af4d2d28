-- The accepting statements of POST /api/notifications (two deliveries, no HTTP, no Go) as a
-- pgbench script: the reference that BenchmarkPostNotification is read against (the ingest
-- target is >= 0.6 x pgbench of the same SQL in the same run). Like herald, it sends the read
-- and the insert as two statements, with no transaction block (ingest/accept_tx.go).
--
-- The bench suite's ingest scenario (bench/ingest, BenchmarkScenarioIngest) does all of the
-- following in one run, against herald serve over HTTP (see docs/benchmarks.md). The read is
-- ingest's loadAcceptContext and the insert internal/delivery's insertSQL, with literals: keep
-- them alike. Herald makes its UUIDv7 ids in Go; here SQL builds them from the clock (the
-- notification and delivery tables are partitioned by day on the id's time). By hand:
--
-- Setup, on the local stack (database ingest_pgbench, migrated, one client, template, 1000 users):
--   P="psql -h 127.0.0.1 -p 55432 -U postgres -v ON_ERROR_STOP=1 -q"
--   $P -d postgres -c "CREATE DATABASE ingest_pgbench"
--   for f in sql/migrations/*.sql; do sed '/-- +goose Down/,$d' $f | grep -v '^-- +goose'; done | $P -d ingest_pgbench
--   $P -d ingest_pgbench -c "INSERT INTO api_client (id,name,key_prefix,key_hash) VALUES ('01a229cf-0000-7000-8000-000000000001','b','hk_x','\x00');
--     INSERT INTO template (name,category,channels,content) VALUES ('otp','security','{SMS,EMAIL}','{"SMS":{"default":{"text":"Your code is {{.code}}"}},"EMAIL":{"default":{"subject":"Your code","text":"Your code is {{.code}}"}}}');
--     INSERT INTO user_contact (user_id,email,phone) SELECT i, 'u'||i||'@example.com', '+1555'||lpad(i::text,7,'0') FROM generate_series(1,1000) i;"
-- Run, next to `go test -run '^$' -bench BenchmarkPostNotification -benchtime 10s ./ingest`:
--   pgbench -h 127.0.0.1 -p 55432 -U postgres -n -M prepared -c 16 -j 2 -T 10 -f ingest/testdata/pgbench_accept.sql ingest_pgbench
\set uid random(1, 1000)
SELECT now(), k.request_hash, ex.response, t.category, t.channels, t.content, coalesce(c.locale, ''), c.email IS NOT NULL, c.phone IS NOT NULL, c.webhook_url IS NOT NULL, EXISTS (SELECT 1 FROM push_token pt WHERE pt.user_id = c.user_id), coalesce(c.time_zone, 'UTC'), p.opt_outs, p.quiet_start, p.quiet_end FROM (SELECT 1) AS one LEFT JOIN idempotency_key k ON k.client_id = '01a229cf-0000-7000-8000-000000000001' AND k.idempotency_key = 'k-' || :client_id || '-' || :uid LEFT JOIN notification ex ON ex.id = k.notification_id LEFT JOIN template t ON t.name = 'otp' LEFT JOIN user_contact c ON c.user_id = :uid LEFT JOIN user_preference p ON p.user_id = :uid;
WITH k AS (INSERT INTO idempotency_key (client_id, idempotency_key, notification_id, request_hash) VALUES ('01a229cf-0000-7000-8000-000000000001', gen_random_uuid()::text, (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid, '\x0102030405060708091011121314151617181920212223242526272829303132') ON CONFLICT (client_id, idempotency_key) DO NOTHING RETURNING notification_id, idempotency_key, request_hash), n AS (INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category, payload, recipient, priority, traceparent, send_at, expires_at, response) SELECT k.notification_id, '01a229cf-0000-7000-8000-000000000001', k.idempotency_key, k.request_hash, :uid, 'otp', 'security', '{"code":"123456"}', NULL, 'NORMAL', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', NULL, NULL, '{"id":"01a229cf-44c9-7dc8-910f-23f85bba1e50","deliveries":[{"id":"01a229cf-44c9-7dc8-910f-23f85bba1e51","channel":"SMS","status":"PENDING"},{"id":"01a229cf-44c9-7dc8-910f-23f85bba1e52","channel":"EMAIL","status":"PENDING"}],"suppressed":[]}' FROM k RETURNING id, priority, expires_at, traceparent), d AS (INSERT INTO delivery (id, notification_id, channel, priority, expires_at, traceparent, next_attempt_at) SELECT (substr(replace(n.id::text, '-', ''), 1, 12) || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid, n.id, u.channel, n.priority, n.expires_at, n.traceparent, now() FROM n CROSS JOIN unnest(ARRAY['SMS','EMAIL']) AS u (channel)) SELECT count(*) FROM n;

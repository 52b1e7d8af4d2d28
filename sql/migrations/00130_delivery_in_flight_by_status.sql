-- +goose Up

-- The reaper returns QUEUED rows of one priority past their lane's watermark or lease, and
-- SENDING rows past their lease (internal/delivery's ReapQueued and ReapSending). Both
-- walked delivery_in_flight, one index over QUEUED and SENDING by updated_at, and filtered
-- status and priority row by row: a pass for the HIGH lane read every QUEUED NORMAL and LOW
-- row older than HIGH's watermark, which is "now" on an idle lane, so that a 100,000-row
-- NORMAL drain cost each reaper pass up to the whole drain in index entries (226–290 per
-- delivery in the throughput benchmark, docs/benchmarks.md "Rows read per delivery"). One
-- index per status, QUEUED by (priority, updated_at), makes each pass a range scan of its
-- own rows. A row enters each index once, as it entered delivery_in_flight once per status,
-- so the writes per delivery are the same.
--
-- The SENDING index also says attempts > 0, which every SENDING row has (a claim counts its
-- attempt) and only the reaper's query states: the outcome's UPDATE (RecordBatch, status =
-- 'SENDING' and its ids) cannot use it. On a young partition's statistics PostgreSQL read the
-- whole partial index in a bitmap for every outcome batch rather than look up the ids in the
-- primary key — every entry of a row once SENDING that vacuum had not removed: 806 rows per
-- delivery in a 100,000-delivery run.
--
-- The table is locked first, in the mode DROP INDEX needs: building the indexes first would
-- hold a SHARE lock and then ask for ACCESS EXCLUSIVE, and a running herald's statements,
-- queued between the two, deadlock with that upgrade. Nothing writes deliveries while the
-- indexes build (CONCURRENTLY is not available on a partitioned table).
LOCK TABLE delivery IN ACCESS EXCLUSIVE MODE;
CREATE INDEX delivery_queued_by_priority ON delivery (priority, updated_at) WHERE status = 'QUEUED';
CREATE INDEX delivery_sending ON delivery (updated_at) WHERE status = 'SENDING' AND attempts > 0;
DROP INDEX delivery_in_flight;

-- +goose Down
LOCK TABLE delivery IN ACCESS EXCLUSIVE MODE;
CREATE INDEX delivery_in_flight ON delivery (updated_at) WHERE status IN ('QUEUED', 'SENDING');
DROP INDEX delivery_sending;
DROP INDEX delivery_queued_by_priority;

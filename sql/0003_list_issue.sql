-- list-issue: what a batch was planned against (definition hash, cost, stock/budget fit), who
-- approved it and the fingerprint of the batch they approved, and the reason code of a rejected item.
ALTER TABLE list_batch ADD COLUMN file_name TEXT NOT NULL DEFAULT '';
ALTER TABLE list_batch ADD COLUMN definition_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE list_batch ADD COLUMN cost_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE list_batch ADD COLUMN rejected BIGINT NOT NULL DEFAULT 0;
ALTER TABLE list_batch ADD COLUMN duplicates BIGINT NOT NULL DEFAULT 0;
ALTER TABLE list_batch ADD COLUMN fits INTEGER NOT NULL DEFAULT 0;
ALTER TABLE list_batch ADD COLUMN approved_by TEXT;
ALTER TABLE list_batch ADD COLUMN approved_at BIGINT;
ALTER TABLE list_batch ADD COLUMN approved_fingerprint TEXT;
ALTER TABLE list_batch ADD COLUMN last_error TEXT;
ALTER TABLE list_item ADD COLUMN reason TEXT;
CREATE INDEX list_batch_activity ON list_batch (activity_id, id);

-- rewardctl schema v2: the job runner (who holds a lease, what each run did) and the indexes that
-- make the jobs' scans follow the due rows rather than the table (expire, resend, resend list).

-- the lease holder, named to a second run that exits 75 (the lease itself is a PostgreSQL advisory
-- lock or a lock file beside the SQLite database; this row only says who took it)
ALTER TABLE job_lock ADD COLUMN job TEXT;
ALTER TABLE job_lock ADD COLUMN host TEXT;
ALTER TABLE job_lock ADD COLUMN pid BIGINT;
ALTER TABLE job_lock ADD COLUMN run_id BIGINT;

ALTER TABLE job_run ADD COLUMN host TEXT;
ALTER TABLE job_run ADD COLUMN pid BIGINT;
ALTER TABLE job_run ADD COLUMN exit_code INTEGER;
ALTER TABLE job_run ADD COLUMN stopped TEXT;  -- why a run ended early: limit, max_runtime, signal

-- expire: due rows only
CREATE INDEX grants_pending_expiry ON grants (expires_at, id) WHERE state = 'pending';
CREATE INDEX qualification_unused_expiry ON qualification (expires_at, id) WHERE status = 'unused' AND expires_at IS NOT NULL;

-- resend: a grant's bill (delivery), an operator's BILL argument
CREATE INDEX resend_bill_grant ON resend_bill (grant_id);
CREATE INDEX resend_bill_bill_no ON resend_bill (bill_no);

-- rewardctl schema v1. Money is BIGINT cents (or units for points); time is BIGINT milliseconds
-- since the Unix epoch, UTC. Unique keys carry correctness; indexes match the jobs' scans.

CREATE TABLE activity (
  id                 {{pk}},
  code               TEXT NOT NULL UNIQUE,
  name               TEXT NOT NULL,
  kind               TEXT NOT NULL CHECK (kind IN ('direct', 'lottery', 'redpack')),
  state              TEXT NOT NULL,
  version            INTEGER NOT NULL DEFAULT 1,
  definition         TEXT NOT NULL,
  definition_hash    TEXT NOT NULL,
  timezone           TEXT NOT NULL,
  start_at           BIGINT NOT NULL,
  end_at             BIGINT NOT NULL,
  whitelist_required INTEGER NOT NULL DEFAULT 0,
  user_limit         BIGINT,
  user_limit_period  TEXT,
  created_by         TEXT NOT NULL,
  created_at         BIGINT NOT NULL,
  updated_at         BIGINT NOT NULL,
  CHECK (end_at > start_at)
);
CREATE INDEX activity_state_end ON activity (state, end_at);

-- one row per review decision; voided when the definition changes
CREATE TABLE activity_review (
  id              {{pk}},
  activity_id     BIGINT NOT NULL REFERENCES activity (id),
  role            TEXT NOT NULL CHECK (role IN ('product', 'tech')),
  decision        TEXT NOT NULL CHECK (decision IN ('approve', 'reject')),
  operator        TEXT NOT NULL,
  definition_hash TEXT NOT NULL,
  comment         TEXT,
  voided          INTEGER NOT NULL DEFAULT 0,
  created_at      BIGINT NOT NULL
);
CREATE INDEX activity_review_activity ON activity_review (activity_id, id);

-- gray list and blacklist of an activity
CREATE TABLE activity_user_list (
  activity_id BIGINT NOT NULL REFERENCES activity (id),
  list        TEXT NOT NULL CHECK (list IN ('gray', 'black')),
  user_id     TEXT NOT NULL,
  PRIMARY KEY (activity_id, list, user_id)
);

CREATE TABLE item (
  id              {{pk}},
  activity_id     BIGINT NOT NULL REFERENCES activity (id),
  code            TEXT NOT NULL,
  kind            TEXT NOT NULL CHECK (kind IN ('cash', 'coupon', 'points', 'virtual', 'physical')),
  unit_cost_cents BIGINT NOT NULL CHECK (unit_cost_cents >= 0),
  channel         TEXT NOT NULL,
  UNIQUE (activity_id, code)
);

CREATE TABLE prize (
  id                {{pk}},
  activity_id       BIGINT NOT NULL REFERENCES activity (id),
  code              TEXT NOT NULL,
  item_id           BIGINT NOT NULL REFERENCES item (id),
  amount            BIGINT NOT NULL CHECK (amount >= 0),
  amount_max        BIGINT,
  stock_total       BIGINT NOT NULL CHECK (stock_total >= 0),
  buckets           INTEGER NOT NULL DEFAULT 1 CHECK (buckets >= 1),
  user_limit        BIGINT,
  user_limit_period TEXT,
  weight            BIGINT NOT NULL DEFAULT 0 CHECK (weight >= 0),
  consolation       INTEGER NOT NULL DEFAULT 0,
  validity_days     INTEGER,
  pool_version      INTEGER NOT NULL DEFAULT 1,
  blocked           INTEGER NOT NULL DEFAULT 0,
  UNIQUE (activity_id, code)
);

-- stock lives apart from configuration; N buckets per prize spread hot-row contention
CREATE TABLE stock (
  prize_id BIGINT NOT NULL REFERENCES prize (id),
  bucket   INTEGER NOT NULL,
  total    BIGINT NOT NULL,
  remain   BIGINT NOT NULL CHECK (remain >= 0),
  PRIMARY KEY (prize_id, bucket)
);

CREATE TABLE budget (
  activity_id      BIGINT PRIMARY KEY REFERENCES activity (id),
  authorised_cents BIGINT NOT NULL CHECK (authorised_cents >= 0),
  consumed_cents   BIGINT NOT NULL DEFAULT 0,
  CHECK (consumed_cents >= 0 AND consumed_cents <= authorised_cents)
);

CREATE TABLE qualification (
  id          {{pk}},
  activity_id BIGINT NOT NULL REFERENCES activity (id),
  user_id     TEXT NOT NULL,
  status      TEXT NOT NULL DEFAULT 'unused' CHECK (status IN ('unused', 'used', 'revoked', 'expired')),
  source      TEXT,
  import_id   TEXT,
  import_line BIGINT,  -- physical line of the import file that created the row
  ext         TEXT,
  expires_at  BIGINT,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL,
  UNIQUE (activity_id, user_id)
);
CREATE INDEX qualification_status_expiry ON qualification (status, expires_at);

-- the prize record: written before any delivery, never deleted
CREATE TABLE grants (
  id            {{pk}},
  record_code   TEXT NOT NULL UNIQUE,
  biz_id        TEXT NOT NULL UNIQUE,
  activity_id   BIGINT NOT NULL REFERENCES activity (id),
  prize_id      BIGINT REFERENCES prize (id),
  user_id       TEXT NOT NULL,
  amount        BIGINT NOT NULL CHECK (amount >= 0),
  cost_cents    BIGINT NOT NULL CHECK (cost_cents >= 0),
  state         TEXT NOT NULL,
  bucket        INTEGER,
  draw_value    BIGINT,
  pool_version  INTEGER,
  degraded_from BIGINT,
  bill_no       TEXT,
  channel       TEXT,
  source        TEXT,
  list_item_id  BIGINT,
  expires_at    BIGINT,
  reason        TEXT,
  created_at    BIGINT NOT NULL,
  updated_at    BIGINT NOT NULL
);
CREATE INDEX grants_state_updated ON grants (state, updated_at);
CREATE INDEX grants_activity_created ON grants (activity_id, created_at);
CREATE INDEX grants_user_activity ON grants (user_id, activity_id);

-- one row per state change of anything; the audit trail that reconcile checks for continuity
CREATE TABLE status_log (
  id         {{pk}},
  entity     TEXT NOT NULL,
  entity_id  BIGINT NOT NULL,
  from_state TEXT,
  to_state   TEXT NOT NULL,
  actor      TEXT NOT NULL,
  reason     TEXT,
  request_id TEXT,
  created_at BIGINT NOT NULL
);
CREATE INDEX status_log_entity ON status_log (entity, entity_id, id);
CREATE UNIQUE INDEX status_log_request ON status_log (entity, entity_id, request_id) WHERE request_id IS NOT NULL;

CREATE TABLE limit_counter (
  scope      TEXT NOT NULL,
  user_id    TEXT NOT NULL,
  period_key TEXT NOT NULL,
  used       BIGINT NOT NULL CHECK (used >= 0),
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (scope, user_id, period_key)
);

CREATE TABLE delivery_bill (
  id           {{pk}},
  bill_no      TEXT NOT NULL UNIQUE,
  grant_id     BIGINT NOT NULL REFERENCES grants (id),
  channel      TEXT NOT NULL,
  amount       BIGINT NOT NULL,
  state        TEXT NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  last_code    TEXT,
  last_message TEXT,
  created_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL
);
CREATE INDEX delivery_bill_grant ON delivery_bill (grant_id);

CREATE TABLE ledger_account (
  user_id    TEXT NOT NULL,
  asset      TEXT NOT NULL,
  balance    BIGINT NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (user_id, asset)
);

CREATE TABLE ledger_entry (
  id         {{pk}},
  bill_no    TEXT NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('credit', 'reverse')),
  user_id    TEXT NOT NULL,
  asset      TEXT NOT NULL,
  amount     BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  UNIQUE (bill_no, kind)
);
CREATE INDEX ledger_entry_user ON ledger_entry (user_id, id);

CREATE TABLE outbox (
  id         {{pk}},
  bill_no    TEXT NOT NULL UNIQUE,
  channel    TEXT NOT NULL,
  payload    TEXT NOT NULL,
  state      TEXT NOT NULL DEFAULT 'pending',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX outbox_state_created ON outbox (state, created_at);

CREATE TABLE resend_bill (
  id              {{pk}},
  user_id         TEXT NOT NULL,
  grant_id        BIGINT NOT NULL REFERENCES grants (id),
  bill_no         TEXT NOT NULL,
  state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'manual')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at BIGINT NOT NULL,
  expires_at      BIGINT NOT NULL,
  last_error      TEXT,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  UNIQUE (user_id, grant_id)
);
CREATE INDEX resend_bill_due ON resend_bill (state, next_attempt_at);

CREATE TABLE fuse_rule (
  id               {{pk}},
  activity_id      BIGINT NOT NULL REFERENCES activity (id),
  prize_id         BIGINT REFERENCES prize (id),
  name             TEXT NOT NULL,
  window_seconds   INTEGER NOT NULL CHECK (window_seconds > 0),
  max_count        BIGINT,
  max_amount_cents BIGINT,
  pop_percent      INTEGER,
  dod_percent      INTEGER,
  min_count        BIGINT NOT NULL DEFAULT 0,
  enabled          INTEGER NOT NULL DEFAULT 1,
  UNIQUE (activity_id, name)
);

CREATE TABLE fuse_event (
  id              {{pk}},
  batch_no        TEXT NOT NULL UNIQUE,
  rule_id         BIGINT NOT NULL REFERENCES fuse_rule (id),
  activity_id     BIGINT NOT NULL REFERENCES activity (id),
  prize_id        BIGINT,
  state           TEXT NOT NULL CHECK (state IN ('tripped', 'released')),
  observed_count  BIGINT NOT NULL,
  observed_amount BIGINT NOT NULL,
  reason          TEXT NOT NULL,
  created_at      BIGINT NOT NULL,
  released_at     BIGINT,
  released_by     TEXT
);
CREATE INDEX fuse_event_state ON fuse_event (state, activity_id);

CREATE TABLE list_batch (
  id          {{pk}},
  batch_no    TEXT NOT NULL UNIQUE,
  activity_id BIGINT NOT NULL REFERENCES activity (id),
  prize_id    BIGINT NOT NULL REFERENCES prize (id),
  file_sha256 TEXT NOT NULL,
  state       TEXT NOT NULL,
  total       BIGINT NOT NULL DEFAULT 0,
  created_by  TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);

CREATE TABLE list_item (
  id          {{pk}},
  batch_id    BIGINT NOT NULL REFERENCES list_batch (id),
  user_id     TEXT NOT NULL,
  line        BIGINT,
  state       TEXT NOT NULL DEFAULT 'pending',
  record_code TEXT,
  error       TEXT,
  updated_at  BIGINT NOT NULL,
  UNIQUE (batch_id, user_id)
);
CREATE INDEX list_item_batch_state ON list_item (batch_id, state, id);

CREATE TABLE reconcile_run (
  id          {{pk}},
  checks      TEXT NOT NULL,
  state       TEXT NOT NULL,
  diff_count  BIGINT NOT NULL DEFAULT 0,
  operator    TEXT NOT NULL,
  started_at  BIGINT NOT NULL,
  finished_at BIGINT
);

CREATE TABLE reconcile_diff (
  id         {{pk}},
  run_id     BIGINT NOT NULL REFERENCES reconcile_run (id),
  check_name TEXT NOT NULL,
  entity     TEXT NOT NULL,
  entity_key TEXT NOT NULL,
  expected   TEXT,
  actual     TEXT,
  detail     TEXT,
  created_at BIGINT NOT NULL
);
CREATE INDEX reconcile_diff_run ON reconcile_diff (run_id, id);

-- a lease: stops two runs of the same job from overlapping
CREATE TABLE job_lock (
  name        TEXT PRIMARY KEY,
  holder      TEXT NOT NULL,
  acquired_at BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL
);

CREATE TABLE job_run (
  id          {{pk}},
  job         TEXT NOT NULL,
  holder      TEXT NOT NULL,
  state       TEXT NOT NULL,
  counts      TEXT,
  error       TEXT,
  started_at  BIGINT NOT NULL,
  finished_at BIGINT
);
CREATE INDEX job_run_job_started ON job_run (job, started_at);

-- who did what: every mutating operator action
CREATE TABLE audit (
  id         {{pk}},
  operator   TEXT NOT NULL,
  action     TEXT NOT NULL,
  entity     TEXT NOT NULL,
  entity_key TEXT NOT NULL,
  detail     TEXT,
  created_at BIGINT NOT NULL
);
CREATE INDEX audit_entity ON audit (entity, entity_key, id);

-- batched imports commit under an import id so that a rerun resumes where it stopped
CREATE TABLE import_run (
  id             {{pk}},
  import_id      TEXT NOT NULL UNIQUE,
  activity_id    BIGINT NOT NULL REFERENCES activity (id),
  file_sha256    TEXT NOT NULL,
  source         TEXT,
  rows_committed BIGINT NOT NULL DEFAULT 0,  -- data records of the file read and committed: the resume point
  inserted       BIGINT NOT NULL DEFAULT 0,
  existing       BIGINT NOT NULL DEFAULT 0,
  rejected       BIGINT NOT NULL DEFAULT 0,
  rejects_bytes  BIGINT NOT NULL DEFAULT 0,  -- length of the rejects file at rows_committed
  operator       TEXT NOT NULL,
  state          TEXT NOT NULL CHECK (state IN ('running', 'done')),
  created_at     BIGINT NOT NULL,
  updated_at     BIGINT NOT NULL
);
CREATE INDEX import_run_resume ON import_run (activity_id, file_sha256, state);

-- users of a running import that were already qualified before it: a later repeat of one of them in
-- the file is a duplicate, not a second "existing" (rows are deleted when the import completes)
CREATE TABLE import_seen (
  import_id TEXT NOT NULL,
  user_id   TEXT NOT NULL,
  line      BIGINT NOT NULL,
  PRIMARY KEY (import_id, user_id)
);

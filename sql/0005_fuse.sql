-- rewardctl schema v5: the fuse. An event keeps the figures that tripped it (the rule kind, the
-- comparison window's figures, the window and the threshold) and the operator's decision; a manual
-- block (fuse block) is an event without a rule; a rule has at most one open (tripped) event.
--@postgres ALTER TABLE fuse_event ALTER COLUMN rule_id DROP NOT NULL;
--@postgres ALTER TABLE fuse_event ADD COLUMN kind TEXT;
--@postgres ALTER TABLE fuse_event ADD COLUMN compare_count BIGINT;
--@postgres ALTER TABLE fuse_event ADD COLUMN compare_amount BIGINT;
--@postgres ALTER TABLE fuse_event ADD COLUMN window_from BIGINT;
--@postgres ALTER TABLE fuse_event ADD COLUMN window_to BIGINT;
--@postgres ALTER TABLE fuse_event ADD COLUMN threshold BIGINT;
--@postgres ALTER TABLE fuse_event ADD COLUMN decision TEXT;
--@postgres ALTER TABLE fuse_event ADD COLUMN decision_reason TEXT;
--@sqlite CREATE TABLE fuse_event_v3 (
--@sqlite   id              INTEGER PRIMARY KEY,
--@sqlite   batch_no        TEXT NOT NULL UNIQUE,
--@sqlite   rule_id         BIGINT REFERENCES fuse_rule (id),
--@sqlite   activity_id     BIGINT NOT NULL REFERENCES activity (id),
--@sqlite   prize_id        BIGINT,
--@sqlite   state           TEXT NOT NULL CHECK (state IN ('tripped', 'released')),
--@sqlite   observed_count  BIGINT NOT NULL,
--@sqlite   observed_amount BIGINT NOT NULL,
--@sqlite   reason          TEXT NOT NULL,
--@sqlite   created_at      BIGINT NOT NULL,
--@sqlite   released_at     BIGINT,
--@sqlite   released_by     TEXT,
--@sqlite   kind            TEXT,
--@sqlite   compare_count   BIGINT,
--@sqlite   compare_amount  BIGINT,
--@sqlite   window_from     BIGINT,
--@sqlite   window_to       BIGINT,
--@sqlite   threshold       BIGINT,
--@sqlite   decision        TEXT,
--@sqlite   decision_reason TEXT
--@sqlite );
--@sqlite INSERT INTO fuse_event_v3 (id, batch_no, rule_id, activity_id, prize_id, state, observed_count, observed_amount, reason, created_at, released_at, released_by) SELECT id, batch_no, rule_id, activity_id, prize_id, state, observed_count, observed_amount, reason, created_at, released_at, released_by FROM fuse_event;
--@sqlite DROP TABLE fuse_event;
--@sqlite ALTER TABLE fuse_event_v3 RENAME TO fuse_event;
--@sqlite CREATE INDEX fuse_event_state ON fuse_event (state, activity_id);

-- one open event per rule: two scans racing cannot both trip it
CREATE UNIQUE INDEX fuse_event_open_rule ON fuse_event (rule_id) WHERE state = 'tripped' AND rule_id IS NOT NULL;
CREATE INDEX fuse_event_prize_open ON fuse_event (prize_id) WHERE state = 'tripped';

-- held requests: while a fuse blocks a prize or an activity, a claim becomes a pending grant that
-- names the event holding it (taking no stock, budget or limit count); `fuse release` sends each
-- through the common flow again, `fuse confirm` cancels them
ALTER TABLE grants ADD COLUMN fuse_event_id BIGINT;
CREATE INDEX grants_held_event ON grants (fuse_event_id, id) WHERE state = 'pending';

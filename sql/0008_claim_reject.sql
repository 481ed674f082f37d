-- rewardctl schema v8: rejected claims, counted. A rejected claim writes no grant; what `report`
-- draws as "rejected by reason" comes from this table: one row per activity, minute (UTC millis,
-- floored) and reason, its count raised by one upsert after the claim's transaction rolled back.
CREATE TABLE claim_reject (
  activity_id BIGINT NOT NULL REFERENCES activity (id),
  minute_at   BIGINT NOT NULL,
  reason      TEXT NOT NULL,
  n           BIGINT NOT NULL CHECK (n > 0),
  PRIMARY KEY (activity_id, minute_at, reason)
);

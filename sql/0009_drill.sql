-- rewardctl schema v9: drill runs. `rewardctl drill` rehearses a definition in a scratch database
-- and records here, in the live one, what it found for that definition's hash: with
-- review.drill_required = true, `activity publish` needs a passing run of the current hash.
CREATE TABLE drill_run (
  id              {{pk}},
  activity_code   TEXT NOT NULL,
  definition_hash TEXT NOT NULL,
  passed          INTEGER NOT NULL,
  checks          TEXT NOT NULL,  -- JSON: one object per check (name, result, detail, figures)
  scratch         TEXT NOT NULL,  -- where it ran: "sqlite (temporary)" or the scratch database, without secrets
  operator        TEXT NOT NULL,
  started_at      BIGINT NOT NULL,
  finished_at     BIGINT NOT NULL
);
CREATE INDEX drill_run_hash ON drill_run (activity_code, definition_hash, passed);

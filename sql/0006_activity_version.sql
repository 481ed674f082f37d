-- rewardctl schema v6: definition versions. Every definition an activity has had is a row: the one
-- it runs now ('current'), older ones ('superseded'), and a new version of a running activity while
-- it is reviewed ('pending_review', 'product_approved'; then 'current' at the switch, or 'rejected').
-- A claim reads the activity's version once and follows that version's rules; grants.pool_version
-- records it for every grant.
CREATE TABLE activity_version (
  id              {{pk}},
  activity_id     BIGINT NOT NULL REFERENCES activity (id),
  version         BIGINT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('current', 'superseded', 'pending_review', 'product_approved',
                                                 'rejected')),
  definition      TEXT NOT NULL,
  definition_hash TEXT NOT NULL,
  proposed_by     TEXT NOT NULL,
  reason          TEXT,
  decided_by      TEXT,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  switched_at     BIGINT,
  UNIQUE (activity_id, version)
);
-- one version runs, and at most one is in review: two concurrent updates cannot both propose
CREATE UNIQUE INDEX activity_version_current ON activity_version (activity_id) WHERE state = 'current';
CREATE UNIQUE INDEX activity_version_open ON activity_version (activity_id)
  WHERE state IN ('pending_review', 'product_approved');

-- the version each existing activity has now, with its creation in the status log
INSERT INTO activity_version (activity_id, version, state, definition, definition_hash, proposed_by, created_at,
                              updated_at)
  SELECT id, version, 'current', definition, definition_hash, created_by, updated_at, updated_at FROM activity;
INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at)
  SELECT 'activity_version', id, NULL, 'current', 'migration', 'schema v6: the version the activity had', created_at
  FROM activity_version;

-- a review decision names the version it was made on (NULL: before schema v6)
ALTER TABLE activity_review ADD COLUMN version BIGINT;

-- a prize that the current version no longer has: its row and stock stay (reconcile still balances
-- them, a reversal still returns a unit), but no claim draws it
ALTER TABLE prize ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;
-- the prize's place in its version's definition: a direct claim's default is the first prize of the
-- running version, whatever order the rows were added in (0 before schema v6: by id)
ALTER TABLE prize ADD COLUMN position INTEGER NOT NULL DEFAULT 0;

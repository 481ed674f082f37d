-- rewardctl schema v11: alerts that survive a crash. An alert (a budget ladder step going up, a
-- fuse trip) is queued here in the transaction that made the change it reports, so that a process
-- killed between that commit and the HTTP post loses nothing: the process posts it right after its
-- commit, and `fuse-scan` (run every minute from cron) posts whatever is still pending after a
-- grace. state: pending -> sent (the [alerts] webhook answered 2xx) | skipped (fuse-scan has no
-- [alerts] webhook either) | failed (refused 20 times); each move is one conditional update plus
-- one status-log row (entity 'alert'). A failed post stays pending, with attempts and last_error.
CREATE TABLE alert_outbox (
  id          {{pk}},
  kind        TEXT NOT NULL,   -- budget_ladder | fuse_tripped
  activity_id BIGINT,
  body        TEXT NOT NULL,   -- the JSON object posted (without its signature)
  state       TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'skipped', 'failed')),
  attempts    INTEGER NOT NULL DEFAULT 0,
  last_error  TEXT,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);
CREATE INDEX alert_outbox_pending ON alert_outbox (created_at) WHERE state = 'pending';

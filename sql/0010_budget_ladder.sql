-- rewardctl schema v10: the budget ladder (seed 002 §9.1: normal -> warn -> degrade -> stop).
-- The ratios come from the definition's [budget] table, in millionths (0.8 = 800000); NULL: no
-- such step. The thresholds in cents are derived from them and the authorised budget (the consumed
-- amount from which a step is reached, ceil(authorised x ratio)), rewritten whenever the authorised
-- budget changes, so that a claim decides with plain comparisons on the row it already updates.
-- ladder_step is the step last logged: moved by one conditional update plus one status-log row
-- (entity 'budget', entity id = the activity) when consumed or authorised crosses a threshold.
ALTER TABLE budget ADD COLUMN warn_ppm BIGINT;
ALTER TABLE budget ADD COLUMN degrade_ppm BIGINT;
ALTER TABLE budget ADD COLUMN stop_ppm BIGINT;
ALTER TABLE budget ADD COLUMN warn_cents BIGINT;
ALTER TABLE budget ADD COLUMN degrade_cents BIGINT;
ALTER TABLE budget ADD COLUMN stop_cents BIGINT;
ALTER TABLE budget ADD COLUMN ladder_step TEXT NOT NULL DEFAULT 'normal'
  CHECK (ladder_step IN ('normal', 'warn', 'degrade', 'stop'));

-- a prize that the degrade step switches off (a lottery draw of it falls to the consolation prize)
ALTER TABLE prize ADD COLUMN high_value INTEGER NOT NULL DEFAULT 0;

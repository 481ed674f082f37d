-- Live changes to stock and budget (activity stock / budget / change): every change is a request,
-- applied at once or proposed for a second operator; before/after record what it did.
CREATE TABLE change_request (
  id              {{pk}},
  activity_id     BIGINT NOT NULL REFERENCES activity (id),
  kind            TEXT NOT NULL CHECK (kind IN ('stock_add', 'stock_remove', 'budget_raise', 'budget_set')),
  prize_code      TEXT,
  amount          BIGINT NOT NULL CHECK (amount >= 0),
  state           TEXT NOT NULL CHECK (state IN ('proposed', 'applied', 'rejected')),
  reason          TEXT NOT NULL,
  requested_by    TEXT NOT NULL,
  decided_by      TEXT,
  decision_reason TEXT,
  before_value    BIGINT,
  after_value     BIGINT,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  decided_at      BIGINT
);
CREATE INDEX change_request_activity ON change_request (activity_id, id);
CREATE INDEX change_request_state ON change_request (state, id);

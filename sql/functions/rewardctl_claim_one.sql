-- rewardctl_claim_one: the common claim as one statement on PostgreSQL (docs/design.md §4, "One
-- round trip"; the contract is on Engine::claim_in_one, src/core/engine/claim_one.hpp). A repeatable
-- source: `db migrate` runs this file again whenever its checksum differs from the one recorded in
-- schema_functions, so a change to the function is a change of the lines that change. CREATE OR
-- REPLACE keeps the grants made on the function; a change of its parameters is not a replace: it
-- needs a migration that drops the old signature first (as 0014 did).
CREATE OR REPLACE FUNCTION rewardctl_claim_one(p_activity BIGINT, p_code TEXT, p_version BIGINT, p_now BIGINT,
    p_user TEXT, p_biz TEXT, p_record TEXT, p_prize BIGINT, p_amount BIGINT, p_cost BIGINT, p_bucket BIGINT,
    p_channel TEXT, p_source TEXT, p_expires BIGINT, p_actor TEXT, p_why TEXT,
    p_a_scope TEXT, p_a_period TEXT, p_a_limit BIGINT, p_p_scope TEXT, p_p_period TEXT, p_p_limit BIGINT,
    p_budget BOOLEAN, p_bill TEXT, p_asset TEXT, p_message TEXT, p_draw BIGINT DEFAULT NULL)
RETURNS BIGINT LANGUAGE plpgsql AS $fn$
DECLARE
  g_id BIGINT;
BEGIN
  -- 2 the activity's claim lock, shared, to the commit (a version switch waits for this claim);
  -- every statement below takes a fresh snapshot, so it sees any switch committed before the lock
  PERFORM pg_advisory_xact_lock_shared(7261750, hashtext(current_schema() || '/' || p_code));
  -- 1, 2, 4 the gate, stricter than the C++ one: live (not gray, not paused), inside the window,
  -- still the version the caller computed with, no blacklist, no tripped fuse, no blocked prize
  -- anywhere in the activity, no grant under this biz_id yet
  PERFORM 1 FROM activity a WHERE a.id = p_activity AND a.code = p_code AND a.version = p_version
    AND a.state = 'live' AND a.start_at <= p_now AND p_now <= a.end_at
    AND NOT EXISTS (SELECT 1 FROM activity_user_list l WHERE l.activity_id = a.id AND l.list = 'black'
                    AND l.user_id = p_user)
    AND NOT EXISTS (SELECT 1 FROM fuse_event f WHERE f.activity_id = a.id AND f.state = 'tripped'
                    AND f.prize_id IS NULL)
    AND NOT EXISTS (SELECT 1 FROM prize p WHERE p.activity_id = a.id AND p.blocked = 1)
    AND NOT EXISTS (SELECT 1 FROM grants g WHERE g.biz_id = p_biz);
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- the writes, in the full flow's order; any refusal undoes all of them (the block's subtransaction)
  BEGIN
    -- 5 the per-user limits; a counter already at its limit refuses without the row's lock
    -- (docs/design.md §4.3, "A user at the limit waits for nobody")
    IF p_a_scope IS NOT NULL THEN
      INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at)
        SELECT p_a_scope, p_user, p_a_period, 1, p_now WHERE NOT EXISTS (SELECT 1 FROM limit_counter c
          WHERE c.scope = p_a_scope AND c.user_id = p_user AND c.period_key = p_a_period AND c.used >= p_a_limit)
        ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1,
        updated_at = excluded.updated_at WHERE limit_counter.used < p_a_limit;
      IF NOT FOUND THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    IF p_p_scope IS NOT NULL THEN
      INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at)
        SELECT p_p_scope, p_user, p_p_period, 1, p_now WHERE NOT EXISTS (SELECT 1 FROM limit_counter c
          WHERE c.scope = p_p_scope AND c.user_id = p_user AND c.period_key = p_p_period AND c.used >= p_p_limit)
        ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1,
        updated_at = excluded.updated_at WHERE limit_counter.used < p_p_limit;
      IF NOT FOUND THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    -- 7 the grant: without a bill number, in init with its status-log row (the caller delivers after
    -- the commit, or never); with one, + 9: written once in its delivered state, with both rows
    INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, bucket,
        draw_value, pool_version, bill_no, channel, source, expires_at, created_at, updated_at)
      VALUES (p_record, p_biz, p_activity, p_prize, p_user, p_amount, p_cost,
        CASE WHEN p_bill IS NULL THEN 'init' ELSE 'success' END, p_bucket,
        p_draw, p_version, p_bill, p_channel, p_source, p_expires, p_now, p_now)
      ON CONFLICT (biz_id) DO NOTHING RETURNING id INTO g_id;
    IF g_id IS NULL THEN
      RAISE SQLSTATE 'RCD01';
    END IF;
    INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, request_id, created_at)
      VALUES ('grant', g_id, NULL, 'init', p_actor, p_why, NULL, p_now);
    IF p_bill IS NOT NULL THEN
      INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, request_id, created_at)
        VALUES ('grant', g_id, 'init', 'success', p_actor, 'ledger credited', NULL, p_now);
      -- 9 the ledger: the bill (closed), the credit, the balance (never past 2^63-1)
      INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, last_code, last_message,
          created_at, updated_at)
        VALUES (p_bill, g_id, p_channel, p_amount, 'success', 1, '0', p_message, p_now, p_now);
      INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at)
        VALUES (p_bill, 'credit', p_user, p_asset, p_amount, p_now);
      INSERT INTO ledger_account (user_id, asset, balance, updated_at) VALUES (p_user, p_asset, p_amount, p_now)
        ON CONFLICT (user_id, asset) DO UPDATE SET balance = ledger_account.balance + excluded.balance,
        updated_at = excluded.updated_at WHERE ledger_account.balance <= 9223372036854775807 - excluded.balance;
      IF NOT FOUND THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    -- 8 budget, then stock (the preferred bucket only): the hot rows, last
    IF p_budget THEN
      UPDATE budget SET consumed_cents = consumed_cents + p_cost WHERE activity_id = p_activity
        AND consumed_cents <= authorised_cents - p_cost;
      IF NOT FOUND THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    UPDATE stock SET remain = remain - 1 WHERE prize_id = p_prize AND bucket = p_bucket AND remain > 0;
    IF NOT FOUND THEN
      RAISE SQLSTATE 'RCD01';
    END IF;
  EXCEPTION WHEN SQLSTATE 'RCD01' THEN
    RETURN NULL;
  END;
  RETURN g_id;
END
$fn$;

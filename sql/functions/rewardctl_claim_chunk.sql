-- rewardctl_claim_chunk: a chunk of direct claims in one statement on PostgreSQL (docs/design.md §4,
-- "One round trip"; the contract is in sql/0013_claim_chunk.sql and on Engine::claim_chunk_in_one).
-- A repeatable source, like rewardctl_claim_one.sql: re-run by `db migrate` when its checksum changes.
CREATE OR REPLACE FUNCTION rewardctl_claim_chunk(p_activity BIGINT, p_code TEXT, p_version BIGINT, p_now BIGINT,
    p_prize BIGINT, p_amount BIGINT, p_cost BIGINT, p_channel TEXT, p_expires BIGINT, p_actor TEXT,
    p_why TEXT, p_a_scope TEXT, p_a_period TEXT, p_a_limit BIGINT, p_p_scope TEXT, p_p_period TEXT,
    p_p_limit BIGINT, p_budget_cents BIGINT, p_asset TEXT, p_message TEXT, p_items JSONB)
RETURNS BIGINT[] LANGUAGE plpgsql AS $fn$
DECLARE
  n BIGINT := jsonb_array_length(p_items);
  done BIGINT;
  ids BIGINT[];
  bk RECORD;
BEGIN
  -- 2 the activity's claim lock, shared, to the commit (a version switch waits for the chunk)
  PERFORM pg_advisory_xact_lock_shared(7261750, hashtext(current_schema() || '/' || p_code));
  -- 1, 2, 4 the gate of rewardctl_claim_one, for every item
  PERFORM 1 FROM activity a WHERE a.id = p_activity AND a.code = p_code AND a.version = p_version
    AND a.state = 'live' AND a.start_at <= p_now AND p_now <= a.end_at
    AND NOT EXISTS (SELECT 1 FROM activity_user_list l JOIN jsonb_to_recordset(p_items) x(u TEXT)
                    ON l.user_id = x.u WHERE l.activity_id = a.id AND l.list = 'black')
    AND NOT EXISTS (SELECT 1 FROM fuse_event f WHERE f.activity_id = a.id AND f.state = 'tripped'
                    AND f.prize_id IS NULL)
    AND NOT EXISTS (SELECT 1 FROM prize p WHERE p.activity_id = a.id AND p.blocked = 1)
    AND NOT EXISTS (SELECT 1 FROM grants g JOIN jsonb_to_recordset(p_items) x(b TEXT) ON g.biz_id = x.b);
  IF NOT FOUND OR n < 1 THEN
    RETURN NULL;
  END IF;
  -- the writes, in the full flow's order; any refusal undoes all of them (the block's subtransaction)
  BEGIN
    -- 5 the per-user limits: one counter row per user, every one of them below its limit
    IF p_a_scope IS NOT NULL THEN
      INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at)
        SELECT p_a_scope, x.u, p_a_period, 1, p_now FROM jsonb_to_recordset(p_items) x(u TEXT) ORDER BY x.u COLLATE "C"
        ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1,
        updated_at = excluded.updated_at WHERE limit_counter.used < p_a_limit;
      GET DIAGNOSTICS done = ROW_COUNT;
      IF done <> n THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    IF p_p_scope IS NOT NULL THEN
      INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at)
        SELECT p_p_scope, x.u, p_p_period, 1, p_now FROM jsonb_to_recordset(p_items) x(u TEXT) ORDER BY x.u COLLATE "C"
        ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1,
        updated_at = excluded.updated_at WHERE limit_counter.used < p_p_limit;
      GET DIAGNOSTICS done = ROW_COUNT;
      IF done <> n THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    -- 7 the grants, in request order (in init, or + 9 in success with their bill numbers), and their ids
    WITH ins AS (
      INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state,
          bucket, pool_version, bill_no, channel, source, list_item_id, expires_at, created_at, updated_at)
        SELECT x.r, x.b, p_activity, p_prize, x.u, p_amount, p_cost,
          CASE WHEN x.bill IS NULL THEN 'init' ELSE 'success' END, x.k, p_version, x.bill, p_channel, x.src,
          x.item, p_expires, p_now, p_now
        FROM jsonb_to_recordset(p_items) x(i BIGINT, u TEXT, b TEXT, r TEXT, bill TEXT, src TEXT, item BIGINT,
          k BIGINT) ORDER BY x.i
        ON CONFLICT (biz_id) DO NOTHING RETURNING id, biz_id)
    SELECT array_agg(ins.id ORDER BY x.i) INTO ids
      FROM ins JOIN jsonb_to_recordset(p_items) x(i BIGINT, b TEXT) ON x.b = ins.biz_id;
    IF coalesce(cardinality(ids), 0) <> n THEN
      RAISE SQLSTATE 'RCD01';
    END IF;
    INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, request_id, created_at)
      SELECT 'grant', g.id, NULL, 'init', p_actor, p_why, NULL, p_now
      FROM unnest(ids) WITH ORDINALITY g(id, i) ORDER BY g.i;
    IF p_asset IS NOT NULL THEN
      INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, request_id, created_at)
        SELECT 'grant', g.id, 'init', 'success', p_actor, 'ledger credited', NULL, p_now
        FROM unnest(ids) WITH ORDINALITY g(id, i) ORDER BY g.i;
      -- 9 the ledger: the bills (closed), the credits, the balances (never past 2^63-1)
      INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, last_code, last_message,
          created_at, updated_at)
        SELECT x.bill, ids[x.i], p_channel, p_amount, 'success', 1, '0', p_message, p_now, p_now
        FROM jsonb_to_recordset(p_items) x(i BIGINT, bill TEXT) ORDER BY x.i;
      INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at)
        SELECT x.bill, 'credit', x.u, p_asset, p_amount, p_now
        FROM jsonb_to_recordset(p_items) x(i BIGINT, u TEXT, bill TEXT) ORDER BY x.i;
      INSERT INTO ledger_account (user_id, asset, balance, updated_at)
        SELECT x.u, p_asset, p_amount, p_now FROM jsonb_to_recordset(p_items) x(u TEXT) ORDER BY x.u COLLATE "C"
        ON CONFLICT (user_id, asset) DO UPDATE SET balance = ledger_account.balance + excluded.balance,
        updated_at = excluded.updated_at WHERE ledger_account.balance <= 9223372036854775807 - excluded.balance;
      GET DIAGNOSTICS done = ROW_COUNT;
      IF done <> n THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    -- 8 budget (the chunk's sum), then stock (each user's preferred bucket, by bucket number): the hot rows, last
    IF p_budget_cents IS NOT NULL THEN
      UPDATE budget SET consumed_cents = consumed_cents + p_budget_cents WHERE activity_id = p_activity
        AND consumed_cents <= authorised_cents - p_budget_cents;
      IF NOT FOUND THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END IF;
    FOR bk IN SELECT x.k, count(*) AS units FROM jsonb_to_recordset(p_items) x(k BIGINT) GROUP BY x.k ORDER BY x.k LOOP
      UPDATE stock SET remain = remain - bk.units WHERE prize_id = p_prize AND bucket = bk.k AND remain >= bk.units;
      IF NOT FOUND THEN
        RAISE SQLSTATE 'RCD01';
      END IF;
    END LOOP;
  EXCEPTION WHEN SQLSTATE 'RCD01' OR unique_violation THEN
    RETURN NULL;
  END;
  RETURN ids;
END
$fn$;

// The reconcile checks: one set-based query each, the same text on SQLite and PostgreSQL except where
// a dialect has a much cheaper form of the same question (status_log: a window per kind of record
// on PostgreSQL, index seeks on SQLite; limits: a full join on PostgreSQL, a union grouped once on
// SQLite; ledger: one pass of full joins on PostgreSQL, lookups per row on SQLite; each pair returns
// the same rows).
//
// Every query returns rows of (entity, key, expected, actual, detail, at): one row per difference,
// nothing when the books agree. Named parameters (bound, numbered per query by bind_named):
//   :activity  the activity code, or NULL for all activities
//   :stuck     cut-off: grants in issuing/init/awaiting_external last changed before it, and resend
//              bills due before it, are stuck
//   :held      cut-off: requests held by a fuse since before it are stuck
//   :ledger    the ledger-type channels, as "name1,name2" (a channel name holds no comma: letters,
//              digits, '_' and '-'); a grant's channel is one of them when it is a whole item of the
//              list (PostgreSQL = ANY (string_to_array(...)), SQLite instr of ",name,"), never a
//              pattern: '_' is a channel name's character, not LIKE's wildcard
// Differences of totals are found as a FULL JOIN of two keyed sets (one pass over each side), except
// where SQLite plans that badly (limits: there a union of both sides, grouped once).
#include "jobs/reconcile/checks.hpp"

namespace rc::jobs::reconcile {

// Held grants (pending, held_by_fuse) take nothing; reversed grants gave it back, and so did failed
// ones (core/engine/release.hpp: a grant that ends failed releases what it took, once).
const char* const kHoldingStates = "('init', 'issuing', 'success', 'delayed_resend', 'awaiting_external')";

namespace {

const std::string H = kHoldingStates;
// The activity filter on an `activity a` in scope.
const std::string kAct = "(CAST(:activity AS TEXT) IS NULL OR a.code = :activity)";
// The ids of the activities in scope, for filtering big tables by activity_id.
const std::string kActIds = "(SELECT a.id FROM activity a WHERE " + kAct + ")";

// The terms each grant was made under, from the definition of its version (reconcile.cpp builds
// them from activity_version, the only place an older version's rules are kept; grants made
// before schema v6 carry no version and are read as version 0, the current one):
//   :terms  JSON array of {p: prize id, v: version, lo, hi: the amount's range (equal unless a
//           random red packet), u: unit cost in cents, ch: the item's channel, pp: the prize
//           limit's period or null}
//   :aterms JSON array of {a: activity id, v: version, ap: the activity limit's period or null}
// As a common table (t for prizes, at for activities) in each dialect's JSON reader.
std::string terms_cte(bool pg) {
  if (pg)
    return "t AS (SELECT * FROM json_to_recordset(CAST(:terms AS json)) AS j(p BIGINT, v BIGINT, lo BIGINT, "
           "hi BIGINT, u BIGINT, ch TEXT, pp TEXT)), at AS (SELECT * FROM json_to_recordset(CAST(:aterms AS json)) "
           "AS j(a BIGINT, v BIGINT, ap TEXT))";
  // (MATERIALIZED: read once into a table of its own, which the joins look up, rather than the
  // JSON parsed again for every grant)
  return "t AS MATERIALIZED (SELECT json_extract(j.value, '$.p') AS p, json_extract(j.value, '$.v') AS v, json_extract(j.value, "
         "'$.lo') AS lo, json_extract(j.value, '$.hi') AS hi, json_extract(j.value, '$.u') AS u, json_extract(j.value, "
         "'$.ch') AS ch, json_extract(j.value, '$.pp') AS pp FROM json_each(:terms) j), at AS MATERIALIZED (SELECT "
         "json_extract(j.value, '$.a') AS a, json_extract(j.value, '$.v') AS v, json_extract(j.value, '$.ap') AS ap "
         "FROM json_each(:aterms) j)";
}
// The key of the period (of kind k: total, day, week, month) that holds the instant `ms` in `zone`,
// as the engine's period_key (core/clock.hpp) spells it: PostgreSQL from its own time zone database
// (the system's, as the engine's), SQLite through the function the store registers with the
// engine's own code (rc_period_key).
std::string period_of(bool pg, const std::string& k, const std::string& ms, const std::string& zone) {
  if (!pg) return "CASE " + k + " WHEN 'total' THEN 'total' ELSE rc_period_key(" + k + ", " + ms + ", " + zone + ") END";
  const std::string local = "(to_timestamp(" + ms + " / 1000.0) AT TIME ZONE " + zone + ")";
  // (a zone the server does not know gives no period, reported as a difference, rather than an
  // error that would stop the whole run: the list is read once, a hashed subplan)
  return "CASE WHEN " + k + " = 'total' THEN 'total' WHEN " + zone + " NOT IN (SELECT z.name FROM pg_timezone_names z) "
         "THEN NULL ELSE CASE " + k + " WHEN 'total' THEN 'total' WHEN 'day' THEN to_char(" + local + ", 'YYYY-MM-DD') "
         "WHEN 'week' THEN to_char(" + local + ", 'IYYY-\"W\"IW') WHEN 'month' THEN to_char(" + local +
         ", 'YYYY-MM') END END";
}
// Whether `col` is one name of the comma-separated list parameter `param` (a channel name holds no
// comma; never a pattern: '_' is a channel name's character).
std::string member_of(bool pg, const std::string& col, const std::string& param) {
  if (pg) return "(" + col + " = ANY (string_to_array(CAST(" + param + " AS TEXT), ',')))";
  return "(instr(',' || CAST(" + param + " AS TEXT) || ',', ',' || " + col + " || ',') > 0 AND instr(" + col +
         ", ',') = 0)";
}


// stock: for every prize, the bucket totals equal remaining stock plus the grants that hold a unit,
// and the bucket totals equal the prize's configured stock.
const std::string kStock =
    "WITH live AS (SELECT g.prize_id, count(*) AS n FROM grants g WHERE g.state IN " + H +
    " AND g.activity_id IN " + kActIds +
    " GROUP BY g.prize_id), "
    "st AS (SELECT s.prize_id, sum(s.total) AS total, sum(s.remain) AS remain, count(*) AS buckets FROM stock s "
    "GROUP BY s.prize_id) "
    "SELECT 'prize', a.code || '/' || p.code, CAST(st.total AS TEXT), CAST(st.remain + coalesce(live.n, 0) AS TEXT), "
    "'remaining ' || st.remain || ' + ' || coalesce(live.n, 0) || ' grant(s) holding a unit, over ' || st.buckets || "
    "' bucket(s)', NULL "
    "FROM prize p JOIN activity a ON a.id = p.activity_id JOIN st ON st.prize_id = p.id "
    "LEFT JOIN live ON live.prize_id = p.id WHERE " + kAct + " AND st.total <> st.remain + coalesce(live.n, 0) "
    "UNION ALL "
    "SELECT 'prize', a.code || '/' || p.code, CAST(p.stock_total AS TEXT), CAST(coalesce(st.total, 0) AS TEXT), "
    "'bucket totals against the prize''s configured stock', NULL "
    "FROM prize p JOIN activity a ON a.id = p.activity_id LEFT JOIN st ON st.prize_id = p.id "
    "WHERE " + kAct + " AND coalesce(st.total, 0) <> p.stock_total";

// budget: consumed equals the cost of the grants that hold budget, and never exceeds authorised.
const std::string kBudget =
    "WITH spent AS (SELECT g.activity_id, sum(g.cost_cents) AS cents, count(*) AS n FROM grants g "
    "WHERE g.state IN " + H + " AND g.activity_id IN " + kActIds +
    " GROUP BY g.activity_id) "
    "SELECT 'activity', a.code, CAST(coalesce(s.cents, 0) AS TEXT), CAST(b.consumed_cents AS TEXT), "
    "'consumed counter against the cost of ' || coalesce(s.n, 0) || ' grant(s) holding budget', NULL "
    "FROM budget b JOIN activity a ON a.id = b.activity_id LEFT JOIN spent s ON s.activity_id = b.activity_id "
    "WHERE " + kAct + " AND b.consumed_cents <> coalesce(s.cents, 0) "
    "UNION ALL "
    "SELECT 'activity', a.code, '<= ' || b.authorised_cents, CAST(b.consumed_cents AS TEXT), "
    "'consumed over authorised', NULL FROM budget b JOIN activity a ON a.id = b.activity_id "
    "WHERE " + kAct + " AND b.consumed_cents > b.authorised_cents";

// ledger: a successful ledger grant has exactly one credit of its amount under its bill number (a
// reversed one also its one reversal, netting to zero; any other state none); every entry belongs
// to the grant that carries its bill number; every balance is the sum of its entries.
// Balances: each account against its entries summed per (user, asset): one full join of two keyed
// sets (an account without entries, entries without an account, both unequal).
const std::string kBalances =
    "SELECT 'ledger_account', coalesce(e.user_id, la.user_id) || '/' || coalesce(e.asset, la.asset), "
    "CAST(coalesce(e.entries, 0) AS TEXT), CAST(coalesce(la.balance, 0) AS TEXT), "
    "'balance against the sum of ' || coalesce(e.n, 0) || ' entr(ies)', NULL FROM ("
    "SELECT le.user_id, le.asset, sum(le.amount) AS entries, count(*) AS n FROM ledger_entry le "
    "GROUP BY le.user_id, le.asset) e FULL JOIN ledger_account la ON la.user_id = e.user_id AND la.asset = e.asset "
    "WHERE coalesce(e.entries, 0) <> coalesce(la.balance, 0) AND (CAST(:activity AS TEXT) IS NULL OR "
    "coalesce(e.user_id, la.user_id) IN (SELECT g.user_id FROM grants g WHERE g.activity_id IN " + kActIds + "))";

// SQLite: (bill_no, kind) is unique, so the grants' credits and reversals are two lookups per grant,
// and an entry's owner one lookup of its delivery bill and one of that bill's grant.
const std::string kLedgerSqlite =
    "SELECT 'grant', g.record_code, "
    "CASE WHEN NOT " + member_of(false, "coalesce(g.channel, '')", ":ledger") + " THEN 'no entry: channel ' || "
    "coalesce(g.channel, '(none)') || ' is no ledger' WHEN g.state = 'success' THEN 'one credit of ' || g.amount "
    "WHEN g.state = 'reversed' THEN 'one credit of ' || g.amount || ' and its reversal' ELSE 'no entry' END, "
    "CASE WHEN c.id IS NULL THEN 'no credit' ELSE 'a credit of ' || c.amount END || "
    "CASE WHEN r.id IS NULL THEN '' ELSE ', a reversal of ' || r.amount END, "
    "'state ' || g.state || ', bill ' || coalesce(g.bill_no, '(none)'), NULL "
    "FROM grants g LEFT JOIN ledger_entry c ON c.bill_no = g.bill_no AND c.kind = 'credit' "
    "LEFT JOIN ledger_entry r ON r.bill_no = g.bill_no AND r.kind = 'reverse' "
    "WHERE g.activity_id IN " + kActIds +
    // (a channel text holding a comma is no name of the list, as for PostgreSQL's = ANY)
    " AND ((instr(',' || CAST(:ledger AS TEXT) || ',', ',' || g.channel || ',') > 0 AND instr(g.channel, ',') = 0) "
    "OR c.id IS NOT NULL OR "
    "r.id IS NOT NULL) "
    "AND NOT ((" + member_of(false, "coalesce(g.channel, '')", ":ledger") + " AND ((g.state = 'success' AND c.id IS NOT NULL AND "
    "c.amount = g.amount AND r.id IS NULL) OR (g.state = 'reversed' AND c.id IS NOT NULL AND r.id IS NOT NULL AND "
    "c.amount = g.amount AND r.amount = -c.amount))) OR (g.state NOT IN ('success', 'reversed') AND c.id IS NULL AND "
    "r.id IS NULL)) "
    "UNION ALL "
    "SELECT 'ledger_entry', le.bill_no || '/' || le.kind, 'a grant with bill ' || le.bill_no || ' for ' || le.user_id, "
    "CASE WHEN g.id IS NULL OR g.bill_no IS NULL OR g.bill_no <> le.bill_no THEN 'no such grant' "
    "ELSE 'grant ' || g.record_code || ' of ' || g.user_id END, "
    "le.amount || ' ' || le.asset || ' to ' || le.user_id, le.created_at "
    // (the grant is found by its id alone, an integer key to hash; one carrying another bill number
    // is no owner either)
    "FROM ledger_entry le LEFT JOIN delivery_bill d ON d.bill_no = le.bill_no "
    "LEFT JOIN grants g ON g.id = d.grant_id "
    "WHERE CAST(:activity AS TEXT) IS NULL AND (g.id IS NULL OR g.bill_no IS NULL OR g.bill_no <> le.bill_no "
    "OR g.user_id <> le.user_id)";

// PostgreSQL: the grants, their credits and reversals and their delivery bills in ONE pass (each
// table read once, two hashes of a million keys instead of four): a grant joined to the entries
// under its bill number says whether it has what its state requires; an entry joined to the grants
// carrying its bill number is owned when one of them is the grant its delivery bill names (the
// bill joined on grant id AND bill number) and is the entry's user's. The pass carries only what
// decides (ids, states, amounts, users): the few rows that fail are expanded (LATERAL, each looked
// up by its id) into the same rows as SQLite's form, so the hash tables hold narrow rows: at 1M
// grants a new connection's first run of the query touched 11% fewer pages of memory, and each
// first touch is a page fault, dear on a virtual machine.
// An entry that fails here is looked up the way SQLite's form does (its delivery bill, that bill's
// grant), which decides, and DISTINCT reports an entry once when several grants carry its bill
// number.
const std::string kIsLedgerPg = member_of(true, "coalesce(g.channel, '')", ":ledger");
const std::string kLedger =
    "SELECT DISTINCT z.entity, z.k, z.expected, z.actual, z.detail, z.at FROM (SELECT g.id AS gid, g.state, "
    "g.amount, g.channel, c.id AS cid, c.amount AS camount, r.id AS rid, r.amount AS ramount, "
    "(g.id IS NOT NULL AND g.activity_id IN " + kActIds + " AND (" + kIsLedgerPg + " OR c.id IS NOT NULL OR "
    "r.id IS NOT NULL) AND NOT ((" + kIsLedgerPg + " AND ((g.state = 'success' AND c.id IS NOT NULL "
    "AND c.amount = g.amount AND r.id IS NULL) OR (g.state = 'reversed' AND c.id IS NOT NULL AND r.id IS NOT NULL "
    "AND c.amount = g.amount AND r.amount = -c.amount))) OR (g.state NOT IN ('success', 'reversed') AND c.id IS NULL "
    "AND r.id IS NULL))) AS bad_g, "
    "(c.id IS NOT NULL AND CAST(:activity AS TEXT) IS NULL AND (d.id IS NULL OR g.user_id <> c.user_id)) AS bad_c, "
    "(r.id IS NOT NULL AND CAST(:activity AS TEXT) IS NULL AND (d.id IS NULL OR g.user_id <> r.user_id)) AS bad_r "
    "FROM grants g "
    "FULL JOIN (SELECT le.id, le.bill_no, le.user_id, le.amount FROM ledger_entry le WHERE le.kind = 'credit') c "
    "ON c.bill_no = g.bill_no "
    "FULL JOIN (SELECT le.id, le.bill_no, le.user_id, le.amount FROM ledger_entry le WHERE le.kind = 'reverse') r "
    "ON r.bill_no = g.bill_no "
    "LEFT JOIN delivery_bill d ON d.grant_id = g.id AND d.bill_no = g.bill_no) y CROSS JOIN LATERAL ("
    "SELECT 'grant' AS entity, gg.record_code AS k, CASE WHEN NOT " +
    member_of(true, "coalesce(y.channel, '')", ":ledger") + " THEN 'no entry: channel ' || coalesce(y.channel, "
    "'(none)') || ' is no ledger' WHEN y.state = 'success' THEN 'one credit of ' || y.amount "
    "WHEN y.state = 'reversed' THEN 'one credit of ' || y.amount || ' and its reversal' ELSE 'no entry' END AS expected, "
    "CASE WHEN y.cid IS NULL THEN 'no credit' ELSE 'a credit of ' || y.camount END || "
    "CASE WHEN y.rid IS NULL THEN '' ELSE ', a reversal of ' || y.ramount END AS actual, "
    "'state ' || y.state || ', bill ' || coalesce(gg.bill_no, '(none)') AS detail, CAST(NULL AS BIGINT) AS at "
    "FROM grants gg WHERE y.bad_g AND gg.id = y.gid "
    "UNION ALL "
    "SELECT 'ledger_entry', e.bill_no || '/' || e.kind, 'a grant with bill ' || e.bill_no || ' for ' || e.user_id, "
    "CASE WHEN o.id IS NULL OR o.bill_no IS NULL OR o.bill_no <> e.bill_no THEN 'no such grant' "
    "ELSE 'grant ' || o.record_code || ' of ' || o.user_id END, "
    "e.amount || ' ' || e.asset || ' to ' || e.user_id, e.created_at FROM ("
    "SELECT le.bill_no, le.kind, le.user_id, le.asset, le.amount, le.created_at FROM ledger_entry le "
    "WHERE y.bad_c AND le.id = y.cid UNION ALL "
    "SELECT le.bill_no, le.kind, le.user_id, le.asset, le.amount, le.created_at FROM ledger_entry le "
    "WHERE y.bad_r AND le.id = y.rid) e "
    "LEFT JOIN LATERAL (SELECT g2.id, g2.bill_no, g2.record_code, g2.user_id FROM delivery_bill d2 "
    "JOIN grants g2 ON g2.id = d2.grant_id WHERE d2.bill_no = e.bill_no) o ON true "
    "WHERE o.id IS NULL OR o.bill_no IS NULL OR o.bill_no <> e.bill_no OR o.user_id <> e.user_id) z "
    "WHERE y.bad_g OR y.bad_c OR y.bad_r";

// qualifications: per activity and user, the used qualifications equal the grants on whitelist
// activities that took one (a claim marks its qualification used in the same transaction; nothing
// gives it back). A request held by a fuse (pending) has taken none yet; one confirmed by the fuse
// (cancelled), refused when released (invalid) or expired while held never took one (docs/design.md §6.4).
const std::string kQualifications =
    "SELECT 'qualification', a.code || '/' || x.user_id, CAST(sum(x.grants) AS TEXT), CAST(sum(x.used) AS TEXT), "
    "'grants of the user that took a qualification against used qualifications', NULL FROM ("
    "SELECT g.activity_id, g.user_id, count(*) AS grants, 0 AS used FROM grants g "
    "WHERE g.activity_id IN (SELECT a.id FROM activity a WHERE a.whitelist_required = 1 AND " + kAct + ") "
    "AND g.state NOT IN ('pending', 'cancelled', 'invalid', 'expired') GROUP BY g.activity_id, g.user_id "
    "UNION ALL SELECT q.activity_id, q.user_id, 0, 1 FROM qualification q WHERE q.status = 'used' "
    "AND q.activity_id IN " + kActIds +
    ") x JOIN activity a ON a.id = x.activity_id GROUP BY a.code, x.user_id HAVING sum(x.grants) <> sum(x.used)";

// limits: per scope and user, the counters summed over their periods equal the grants they count,
// and no counter is over its limit. Keys: "a:ACTIVITY/USER" (activity limit), "p:ACTIVITY/PRIZE/USER".
// Counters over their limits, per period.
const std::string kOverLimit =
    "SELECT 'limit_counter', 'a:' || a.code || '/' || lc.user_id, '<= ' || a.user_limit, CAST(lc.used AS TEXT), "
    "'over the activity limit in period ' || lc.period_key, NULL FROM activity a JOIN limit_counter lc "
    "ON lc.scope = 'a:' || a.id WHERE " + kAct + " AND lc.used > a.user_limit "
    "UNION ALL "
    "SELECT 'limit_counter', 'p:' || a.code || '/' || p.code || '/' || lc.user_id, '<= ' || p.user_limit, "
    "CAST(lc.used AS TEXT), 'over the prize limit in period ' || lc.period_key, NULL FROM activity a "
    "JOIN prize p ON p.activity_id = a.id JOIN limit_counter lc ON lc.scope = 'p:' || p.id "
    "WHERE " + kAct + " AND lc.used > p.user_limit";
// The grants counted per (scope, user, period) and the counters per (scope, user, period), as rows
// (k: the scope's operator key, scope, user_id, period, grants, counted), for both scope kinds:
// each holding grant under a version whose terms have a limit counts in the period that holds its
// creation in the activity's zone, by that version's period kind.
std::string limit_sides(bool pg) {
  return "SELECT 'a:' || a.code AS k, 'a:' || a.id AS scope, g.user_id, " +
         period_of(pg, "at.ap", "g.created_at", "a.timezone") + " AS pk, 1 AS e, 0 AS c FROM grants g "
         "JOIN at ON at.a = g.activity_id AND at.v = coalesce(g.pool_version, 0) JOIN activity a ON a.id = "
         "g.activity_id WHERE at.ap IS NOT NULL AND g.state IN " + H + " AND " + kAct +
         " UNION ALL SELECT 'p:' || a.code || '/' || p.code, 'p:' || p.id, g.user_id, " +
         period_of(pg, "t.pp", "g.created_at", "a.timezone") + ", 1, 0 FROM grants g JOIN t ON t.p = g.prize_id "
         "AND t.v = coalesce(g.pool_version, 0) JOIN prize p ON p.id = g.prize_id JOIN activity a ON a.id = "
         "g.activity_id WHERE t.pp IS NOT NULL AND g.state IN " + H + " AND " + kAct +
         " UNION ALL SELECT 'a:' || a.code, lc.scope, lc.user_id, lc.period_key, 0, lc.used FROM activity a "
         "JOIN limit_counter lc ON lc.scope = 'a:' || a.id WHERE " + kAct +
         " UNION ALL SELECT 'p:' || a.code || '/' || p.code, lc.scope, lc.user_id, lc.period_key, 0, lc.used FROM "
         "activity a JOIN prize p ON p.activity_id = a.id JOIN limit_counter lc ON lc.scope = 'p:' || p.id WHERE " +
         kAct;
}
// limits: each counter equals the grants of its scope, user and period, the period recomputed from
// each grant's creation (a counter moved to another period, or a grant counted in the wrong one, is
// found: summed over the periods they would agree); none is over its limit. One union of both
// sides, grouped once by (scope, user, period) (docs/design.md §6.4).
std::string limits_sql(bool pg) {
  return "WITH " + terms_cte(pg) + " SELECT 'limit_counter', x.k || '/' || x.user_id, CAST(sum(x.e) AS TEXT), "
         "CAST(sum(x.c) AS TEXT), 'period ' || x.pk || ': the counter against the grants made in it', NULL FROM (" +
         limit_sides(pg) + ") x GROUP BY x.k, x.user_id, x.pk HAVING sum(x.e) <> sum(x.c) UNION ALL " + kOverLimit;
}

// amounts: every grant that was made (not a held request, nor one refused, cancelled or expired while
// held) carries the
// terms of its prize under the version it was made under: an amount in the prize's range, a cost of
// amount x the item's unit cost, the item's channel; its delivery bill the grant's amount and
// channel. (The budget check then ties the costs to the budget's consumed.)
std::string amounts_sql(bool pg) {
  const std::string cost = pg ? "CAST(g.amount AS NUMERIC) * t.u" : "g.amount * t.u";
  return "WITH " + terms_cte(pg) + " SELECT 'grant', g.record_code, CASE WHEN t.p IS NULL THEN 'terms of prize ' "
         "|| p.code || ' in version ' || coalesce(g.pool_version, 0) WHEN g.amount < t.lo OR g.amount > t.hi THEN "
         "CASE WHEN t.lo = t.hi THEN 'amount ' || t.lo ELSE 'amount in [' || t.lo || ', ' || t.hi || ']' END "
         "WHEN g.cost_cents <> " + cost + " THEN 'cost ' || (" + cost + ") || ' cents (' || g.amount || ' x ' || "
         "t.u || ')' ELSE 'channel ' || t.ch END, CASE WHEN t.p IS NULL THEN 'none' WHEN g.amount < t.lo OR "
         "g.amount > t.hi THEN 'amount ' || g.amount WHEN g.cost_cents <> " + cost + " THEN 'cost ' || g.cost_cents "
         "|| ' cents' ELSE 'channel ' || coalesce(g.channel, '(none)') END, 'prize ' || p.code || ' under version ' "
         "|| coalesce(g.pool_version, 0) || ', state ' || g.state, NULL FROM grants g JOIN prize p ON p.id = "
         "g.prize_id LEFT JOIN t ON t.p = g.prize_id AND t.v = coalesce(g.pool_version, 0) WHERE g.activity_id IN " +
         kActIds + " AND g.state NOT IN ('pending', 'invalid', 'cancelled', 'expired') AND (t.p IS NULL OR g.amount < t.lo OR "
         "g.amount > t.hi OR g.cost_cents <> " + cost + " OR coalesce(g.channel, '') <> t.ch)";
}

// delivery: each delivery bill carries its grant's amount and channel, and is delivered (success)
// exactly when its grant was (success, or reversed after it); a grant that reached its channel
// (success, reversed, awaiting_external) has its bill; a grant of an outbox channel with a bill has
// its outbox row, and every outbox row belongs to the bill of a grant of that outbox channel.
//   :outbox  the outbox-type channels, as :ledger
std::string delivery_sql(bool pg) {
  const std::string ob = member_of(pg, "g.channel", ":outbox");
  return "SELECT 'delivery_bill', d.bill_no, CASE WHEN d.amount <> g.amount OR d.channel <> coalesce(g.channel, '') "
         "THEN 'amount ' || g.amount || ' by ' || coalesce(g.channel, '(none)') WHEN g.state IN ('success', "
         "'reversed') THEN 'success' ELSE 'not success' END, CASE WHEN d.amount <> g.amount OR d.channel <> "
         "coalesce(g.channel, '') THEN 'amount ' || d.amount || ' by ' || d.channel ELSE d.state END, 'grant ' || "
         "g.record_code || ' ' || g.state, d.updated_at FROM delivery_bill d JOIN grants g ON g.id = d.grant_id "
         "WHERE g.activity_id IN " + kActIds + " AND (d.amount <> g.amount OR d.channel <> coalesce(g.channel, '') "
         "OR (CASE WHEN g.state IN ('success', 'reversed') THEN 1 ELSE 0 END) <> (CASE WHEN d.state = 'success' "
         "THEN 1 ELSE 0 END)) "
         "UNION ALL SELECT 'grant', g.record_code, 'a delivery bill', CASE WHEN g.bill_no IS NULL THEN 'no bill "
         "number' ELSE 'no delivery bill ' || g.bill_no END, 'state ' || g.state || ', channel ' || "
         "coalesce(g.channel, '(none)'), g.updated_at FROM grants g WHERE g.activity_id IN " + kActIds +
         " AND g.state IN ('success', 'reversed', 'awaiting_external') AND NOT EXISTS (SELECT 1 FROM delivery_bill "
         "d WHERE d.bill_no = g.bill_no AND d.grant_id = g.id) "
         "UNION ALL SELECT 'grant', g.record_code, 'an outbox row under bill ' || g.bill_no, 'none', 'state ' || "
         "g.state || ', channel ' || g.channel, g.updated_at FROM grants g WHERE g.activity_id IN " + kActIds +
         " AND g.bill_no IS NOT NULL AND " + ob + " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.bill_no = "
         "g.bill_no) "
         "UNION ALL SELECT 'outbox', o.bill_no, 'the bill of a grant of outbox channel ' || o.channel, CASE WHEN "
         "g.id IS NULL THEN 'no such grant' ELSE 'grant ' || g.record_code || ' of channel ' || coalesce(g.channel, "
         "'(none)') END, 'outbox row ' || o.state, o.created_at FROM outbox o LEFT JOIN delivery_bill d ON "
         "d.bill_no = o.bill_no LEFT JOIN grants g ON g.id = d.grant_id AND g.bill_no = o.bill_no WHERE "
         "(CAST(:activity AS TEXT) IS NULL OR g.activity_id IN " + kActIds + ") AND (g.id IS NULL OR "
         "coalesce(g.channel, '') <> o.channel OR NOT " + ob + ")";
}

// stuck: deliveries without an outcome, resend bills nobody resent, requests held too long.
const std::string kStuck =
    "SELECT 'grant', g.record_code, 'an outcome', g.state, 'no change since', g.updated_at FROM grants g "
    "WHERE g.state IN ('issuing', 'init', 'awaiting_external') AND g.updated_at < :stuck AND g.activity_id IN " + kActIds +
    " UNION ALL "
    "SELECT 'grant', g.record_code, 'released or confirmed', 'pending (held_by_fuse)', 'held since', g.created_at "
    "FROM grants g WHERE g.state = 'pending' AND g.reason = 'held_by_fuse' AND g.created_at < :held "
    "AND g.activity_id IN " + kActIds +
    " UNION ALL "
    "SELECT 'resend_bill', r.bill_no, 'resent', 'pending after ' || r.attempts || ' attempt(s)', 'due since', "
    "r.next_attempt_at FROM resend_bill r JOIN grants g ON g.id = r.grant_id "
    "WHERE r.state = 'pending' AND r.next_attempt_at < :stuck AND g.activity_id IN " + kActIds;

// status_log: each record's current state is the to-state of its last log row, each row's
// from-state is the previous row's to-state (the first row's is empty: the creation), and every
// logged record exists. Qualifications are created by imports without a log row: for them the
// chain starts at its first row, and a qualification without rows is fine.
// One ordered pass over the log (the covering index status_log_chain of migration 0007 gives the
// order and every column, so no sort and no table lookups): each row with its predecessor's
// to-state and whether it is the last of its record. Only last rows and broken links go on, to
// meet their records in one join per kind of record, which also finds records without any row
// and rows whose record is gone. A broken last row is reported as broken only. The two dialects
// get the pass in their cheapest form (status_log_postgres, kChainSqlite below).
const std::string kLoggedEntities =
    "('grant', 'activity', 'qualification', 'resend_bill', 'import_run', 'fuse_event', 'budget', 'alert', "
    "'list_batch', 'list_item', 'change_request', 'activity_version')";
// The key of a logged record that is in scope (NULL when it is missing or outside --activity).
const std::string kKeyOf =
    "CASE x.entity "
    "WHEN 'grant' THEN (SELECT g.record_code FROM grants g WHERE g.id = x.entity_id AND g.activity_id IN " + kActIds + ") "
    "WHEN 'activity' THEN (SELECT a.code FROM activity a WHERE a.id = x.entity_id AND " + kAct + ") "
    "WHEN 'qualification' THEN (SELECT a.code || '/' || q.user_id FROM qualification q JOIN activity a "
    "ON a.id = q.activity_id WHERE q.id = x.entity_id AND " + kAct + ") "
    "WHEN 'resend_bill' THEN (SELECT r.bill_no FROM resend_bill r JOIN grants g ON g.id = r.grant_id "
    "WHERE r.id = x.entity_id AND g.activity_id IN " + kActIds + ") "
    "WHEN 'import_run' THEN (SELECT i.import_id FROM import_run i WHERE i.id = x.entity_id AND i.activity_id IN " +
    kActIds + ") "
    "WHEN 'fuse_event' THEN (SELECT f.batch_no FROM fuse_event f WHERE f.id = x.entity_id AND f.activity_id IN " +
    kActIds + ") "
    "WHEN 'budget' THEN (SELECT a.code FROM activity a WHERE a.id = x.entity_id AND " + kAct + ") "
    "WHEN 'alert' THEN (SELECT 'alert ' || o.id FROM alert_outbox o WHERE o.id = x.entity_id AND "
    "(CAST(:activity AS TEXT) IS NULL OR o.activity_id IN " + kActIds + ")) "
    "WHEN 'list_batch' THEN (SELECT b.batch_no FROM list_batch b WHERE b.id = x.entity_id AND b.activity_id IN " +
    kActIds + ") "
    "WHEN 'list_item' THEN (SELECT b.batch_no || '/' || li.user_id FROM list_item li JOIN list_batch b ON b.id = "
    "li.batch_id WHERE li.id = x.entity_id AND b.activity_id IN " + kActIds + ") "
    "WHEN 'change_request' THEN (SELECT a.code || '#' || c.id FROM change_request c JOIN activity a ON a.id = "
    "c.activity_id WHERE c.id = x.entity_id AND " + kAct + ") "
    "WHEN 'activity_version' THEN (SELECT a.code || '@v' || v.version FROM activity_version v JOIN activity a ON "
    "a.id = v.activity_id WHERE v.id = x.entity_id AND " + kAct + ") END";

// A kind of logged record for the last-row join: its table (aliased t), its key, its state, whether
// a record in --activity's scope (given that t exists), and whether it must have a log row.
// `rowless`: a state in which a record of a kind that needs rows may have none yet (list items are
// created pending in bulk, and logged from their first move, which starts at it).
struct LoggedKind {
  std::string entity, from, key, state, in_scope;
  bool needs_rows;
  std::string rowless = "";
};
// The condition "a record without any row is a difference" (l: the last row, t: the record).
std::string rowless_diff(const LoggedKind& k, const std::string& l) {
  if (k.rowless.empty()) return l + ".id IS NULL";
  return "(" + l + ".id IS NULL AND " + k.state + " <> '" + k.rowless + "')";
}
std::string last_rows_against(const LoggedKind& k) {
  // l: the last row of each logged record of this kind (NULL: the record has no row);
  // t: the record (NULL: the rows' record is gone, reported only without --activity).
  return " UNION ALL SELECT '" + k.entity + "', coalesce(" + k.key + ", '#' || l.entity_id), "
         "CASE WHEN l.id IS NULL THEN 'a log row' WHEN t.id IS NULL THEN 'the record' ELSE l.to_state END, "
         "CASE WHEN t.id IS NULL THEN 'missing' ELSE " + k.state + " END, "
         "CASE WHEN l.id IS NULL THEN 'no status-log row at all' "
         "WHEN t.id IS NULL THEN l.n || ' log row(s), the last to ' || l.to_state "
         "ELSE 'current state against the last log row ' || l.id END, NULL "
         "FROM (SELECT x.entity_id, x.id, x.to_state, x.n, x.broken FROM x WHERE x.entity = '" + k.entity +
         "' AND x.last = 1) l " + (k.needs_rows ? "FULL" : "LEFT") + " JOIN " + k.from + " ON t.id = l.entity_id "
         "WHERE (" + rowless_diff(k, "l") + " OR (l.id IS NOT NULL AND l.broken = 0 AND (t.id IS NULL OR "
         "l.to_state <> " + k.state + "))) "
         "AND CASE WHEN t.id IS NULL THEN CAST(:activity AS TEXT) IS NULL ELSE " + k.in_scope + " END";
}
const std::vector<LoggedKind> kLoggedKinds = {
    {"grant", "grants t", "t.record_code", "t.state", "t.activity_id IN " + kActIds, true},
    {"activity", "activity t", "t.code", "t.state", "(CAST(:activity AS TEXT) IS NULL OR t.code = :activity)", true},
    {"qualification", "qualification t",
     "(SELECT a.code FROM activity a WHERE a.id = t.activity_id) || '/' || t.user_id", "t.status",
     "t.activity_id IN " + kActIds, false},
    {"resend_bill", "resend_bill t", "t.bill_no", "t.state",
     "EXISTS (SELECT 1 FROM grants g WHERE g.id = t.grant_id AND g.activity_id IN " + kActIds + ")", true},
    {"import_run", "import_run t", "t.import_id", "t.state", "t.activity_id IN " + kActIds, true},
    {"fuse_event", "fuse_event t", "t.batch_no", "t.state", "t.activity_id IN " + kActIds, true},
    // the budget ladder's step (entity id = the activity): a budget that never moved has no row, and
    // its first move starts at normal (checked as a qualification's first row is: not at all)
    {"budget", "(SELECT b.activity_id AS id, b.ladder_step FROM budget b) t",
     "(SELECT a.code FROM activity a WHERE a.id = t.id)", "t.ladder_step", "t.id IN " + kActIds, false},
    {"alert", "alert_outbox t", "'alert ' || t.id", "t.state",
     "(CAST(:activity AS TEXT) IS NULL OR t.activity_id IN " + kActIds + ")", true},
    {"list_batch", "list_batch t", "t.batch_no", "t.state", "t.activity_id IN " + kActIds, true},
    {"list_item", "list_item t", "(SELECT b.batch_no FROM list_batch b WHERE b.id = t.batch_id) || '/' || t.user_id",
     "t.state", "EXISTS (SELECT 1 FROM list_batch b WHERE b.id = t.batch_id AND b.activity_id IN " + kActIds + ")",
     true, "pending"},
    {"change_request", "change_request t",
     "(SELECT a.code FROM activity a WHERE a.id = t.activity_id) || '#' || t.id", "t.state",
     "t.activity_id IN " + kActIds, true},
    {"activity_version", "activity_version t",
     "(SELECT a.code FROM activity a WHERE a.id = t.activity_id) || '@v' || t.version", "t.state",
     "t.activity_id IN " + kActIds, true},
};
// The last rows and broken links, as x (entity, entity_id, id, from_state, to_state, prev_to, n: the
// record's row count on a last row, last, broken), for SQLite (below). PostgreSQL reads the chain
// per kind of record instead (status_log_postgres).
// SQLite, whose window functions copy every partition aside: each row's predecessor is one seek
// back in the covering index (b: the broken rows, few), and the last row of each record comes
// from a grouping that streams the same index (SQLite documents that the bare column of a max()
// aggregate is taken from the row holding the maximum).
const std::string kChainSqlite =
    // (the predecessor is named once in the filter: SQLite would seek again for each mention; a
    // first row has none, and then must be the creation, except for a qualification's)
    "WITH b AS MATERIALIZED (SELECT l.entity, l.entity_id, l.id, l.from_state, l.to_state, (SELECT p.to_state "
    "FROM status_log p WHERE p.entity = l.entity AND p.entity_id = l.entity_id AND p.id < l.id ORDER BY p.id DESC "
    "LIMIT 1) AS prev_to FROM status_log l WHERE l.entity IN " + kLoggedEntities + " AND coalesce(l.from_state, '') <> "
    "coalesce((SELECT p.to_state FROM status_log p WHERE p.entity = l.entity AND p.entity_id = l.entity_id AND "
    "p.id < l.id ORDER BY p.id DESC LIMIT 1), CASE WHEN l.entity IN ('qualification', 'budget') THEN coalesce(l.from_state, '') "
    "WHEN l.entity = 'list_item' THEN 'pending' ELSE '' END)), "
    "m AS (SELECT l.entity, l.entity_id, max(l.id) AS id, l.to_state, count(*) AS n FROM status_log l "
    "WHERE l.entity IN " + kLoggedEntities + " GROUP BY l.entity, l.entity_id), "
    "x AS MATERIALIZED (SELECT m.entity, m.entity_id, m.id, b.from_state, m.to_state, b.prev_to, m.n, 1 AS last, "
    "CASE WHEN b.id IS NULL THEN 0 ELSE 1 END AS broken FROM m LEFT JOIN b ON b.id = m.id "
    "UNION ALL SELECT b.entity, b.entity_id, b.id, b.from_state, b.to_state, b.prev_to, 0, 0, 1 FROM b "
    "WHERE EXISTS (SELECT 1 FROM status_log s WHERE s.entity = b.entity AND s.entity_id = b.entity_id AND s.id > b.id)) ";
// Broken links (rare: each looks its key up alone), then the last rows against their records.
const std::string kStatusLogTail = [] {
  std::string q =
      "SELECT x.entity, coalesce(" + kKeyOf + ", '#' || x.entity_id), coalesce(x.prev_to, '(created)'), "
      "coalesce(x.from_state, '(created)'), 'log row ' || x.id || ' (to ' || x.to_state || ') does not start where "
      "the previous row ended', NULL FROM x WHERE x.broken = 1 AND (CAST(:activity AS TEXT) IS NULL OR " + kKeyOf +
      " IS NOT NULL)";
  for (auto& k : kLoggedKinds) q += last_rows_against(k);
  return q;
}();


// PostgreSQL: per kind of record, one window pass over its range of the covering index (lag: the
// predecessor's to-state; lead: is this the last row), keeping only last rows and broken links,
// and ONE full join of those with the records (the plan streams the window into the join; nothing
// is materialised, no key is looked up row by row). One row out of the join says everything: a
// broken link (reported as such, even on a last row), a last row against its record's state, a
// record without rows (t without lg), rows without a record (lg without t). A qualification's
// first row may start anywhere (lag is NULL on a first row only: to_state is NOT NULL). The rows
// come out in the order of the SQLite form: broken links by (entity, record, row), then each kind's
// last rows by record.
// `grants_too`: false leaves the grants' rows out (the kinds the status_log fingerprints below do
// not sum up).
std::string status_log_postgres(bool grants_too = true) {
  std::string q = "SELECT s.entity, s.k, s.expected, s.actual, s.detail, s.at FROM (";
  bool first = true;
  for (size_t i = 0; i < kLoggedKinds.size(); ++i) {
    auto& k = kLoggedKinds[i];
    if (!grants_too && k.entity == "grant") continue;
    const std::string e = "'" + k.entity + "'";
    const std::string broken = "coalesce(c.from_state, '') <> coalesce(c.prev_to, '" + k.rowless + "')" +
                               std::string(k.needs_rows ? "" : " AND c.prev_to IS NOT NULL");
    q += (first ? "" : " UNION ALL ") +
         std::string("SELECT ") + e + " AS entity, coalesce(" + k.key + ", '#' || coalesce(lg.entity_id, t.id)) AS k, "
         "CASE WHEN lg.broken THEN coalesce(lg.prev_to, '(created)') WHEN lg.id IS NULL THEN 'a log row' "
         "WHEN t.id IS NULL THEN 'the record' ELSE lg.to_state END AS expected, "
         "CASE WHEN lg.broken THEN coalesce(lg.from_state, '(created)') WHEN t.id IS NULL THEN 'missing' ELSE " +
         k.state + " END AS actual, "
         "CASE WHEN lg.broken THEN 'log row ' || lg.id || ' (to ' || lg.to_state || ') does not start where the "
         "previous row ended' WHEN lg.id IS NULL THEN 'no status-log row at all' "
         "WHEN t.id IS NULL THEN (SELECT count(*) FROM status_log n WHERE n.entity = " + e +
         " AND n.entity_id = lg.entity_id) || ' log row(s), the last to ' || lg.to_state "
         "ELSE 'current state against the last log row ' || lg.id END AS detail, CAST(NULL AS BIGINT) AS at, "
         "CASE WHEN lg.broken THEN 0 ELSE 1 END AS phase, " + std::to_string(i) + " AS kind, "
         "coalesce(lg.entity_id, t.id) AS eid, lg.id AS lid "
         "FROM (SELECT c.entity_id, c.id, c.from_state, c.to_state, c.prev_to, " + broken + " AS broken FROM ("
         "SELECT l.entity_id, l.id, l.from_state, l.to_state, lag(l.to_state) OVER w AS prev_to, "
         "lead(l.id) OVER w AS next_id FROM status_log l WHERE l.entity = " + e +
         " WINDOW w AS (PARTITION BY l.entity_id ORDER BY l.id)) c WHERE c.next_id IS NULL OR (" + broken + ")) lg " +
         (k.needs_rows ? "FULL" : "LEFT") + " JOIN " + k.from + " ON t.id = lg.entity_id "
         "WHERE (" + rowless_diff(k, "lg") + " OR lg.broken OR t.id IS NULL OR lg.to_state <> " + k.state + ") "
         "AND CASE WHEN t.id IS NULL THEN CAST(:activity AS TEXT) IS NULL ELSE " + k.in_scope + " END";
    first = false;
  }
  return q + ") s ORDER BY s.phase, CASE WHEN s.phase = 0 THEN s.entity END, s.kind, s.eid, s.lid";
}


// ---- Fingerprints (PostgreSQL, a run over all activities; reconcile.hpp, Check::pg_fingerprints) ----
// Each query sums a 64-bit hash of every row (or of every key's total) on both sides of an
// invariant (exact: sum(bigint) is an int128 or numeric sum), in one pass over each table and
// without a join: the sums agree when the two multisets agree, and any difference changes a sum
// unless the hashes of the difference cancel, about one chance in 2^64 for damage that is not
// searched for (a forger who can write the database could search; design §6.4). Every part is written so that agreeing
// sums imply that the check's own queries would find nothing (the argument is given per part);
// where a part's sums could agree on damaged books they would not be sound, so the parts are
// stricter than the queries, never looser. Sums that disagree on sound books only cost time: the
// check's own queries then run and decide.
// (a tuple (a, b, n) is hashed as hashtextextended(a, hashtextextended(b, n)): the seed chain makes
// the hash one of the whole tuple, so swapping values between rows changes the sums)

// ledger, entries: the entries the ledger grants require (a success: its credit; a reversed one:
// its credit and its reversal, of the grant's amount, under its bill number, for its user) against
// every entry there is, and no such grant without a bill number. With the bills part below (bill
// numbers unique among the grants), agreeing sums mean: each entry is one that exactly one grant
// requires, that grant carries the entry's bill number and user and has its delivery bill, and
// every grant in another state (or of another channel) has no entry: nothing for the ledger query
// to report.
const std::string kLedgerEntriesFp =
    "SELECT 'entries the ledger grants require', e.n || ' ' || coalesce(e.s, 0) || ' ' || e.unbilled, "
    "a.n || ' ' || coalesce(a.s, 0) || ' 0' FROM (SELECT count(*) + count(*) FILTER (WHERE g.state = 'reversed') AS n, "
    "count(*) - count(g.bill_no) AS unbilled, sum(hashtextextended(g.bill_no, hashtextextended(g.user_id, g.amount))) + "
    "coalesce(sum(hashtextextended(g.bill_no, hashtextextended(g.user_id, -g.amount) # 1)) FILTER (WHERE g.state = "
    "'reversed'), 0) AS s FROM grants g WHERE g.state IN ('success', 'reversed') AND "
    "g.channel = ANY (string_to_array(CAST(:ledger AS TEXT), ','))) e, "
    "(SELECT count(*) AS n, sum(hashtextextended(le.bill_no, hashtextextended(le.user_id, le.amount) # "
    "CASE WHEN le.kind = 'credit' THEN 0 ELSE 1 END)) AS s FROM ledger_entry le) a";
// ledger, bills: every grant with a bill number against the delivery bills (grant, bill number).
// A grant gets its bill number in the transaction that opens its delivery bill, so the two sides
// are one to one; as delivery bill numbers are unique, agreeing sums also mean that no two grants
// carry one bill number.
const std::string kLedgerBillsFp =
    "SELECT 'delivery bills of the grants', g.n || ' ' || coalesce(g.s, 0), d.n || ' ' || coalesce(d.s, 0) FROM "
    "(SELECT count(*) AS n, sum(hashtextextended(g.bill_no, g.id)) AS s FROM grants g WHERE g.bill_no IS NOT NULL) g, "
    "(SELECT count(*) AS n, sum(hashtextextended(d.bill_no, d.grant_id)) AS s FROM delivery_bill d) d";
// ledger, balances: each (user, asset) with its entries summed against each account, as tuples
// (user, asset, amount) hashed whole, zeros left out on both sides (the balances query reads a
// missing side as 0). Each side has one tuple per key, so agreeing sums mean the same keys with
// the same amounts. (Not a sum weighted by each key's hash: a difference of h(k2) at k1 and of
// -h(k1) at k2 would cancel in it.)
const std::string kBalancesFp =
    "SELECT 'balances against their entries', e.n || ' ' || coalesce(e.s, 0), a.n || ' ' || coalesce(a.s, 0) FROM "
    "(SELECT count(*) AS n, sum(hashtextextended(CAST(x.amount AS TEXT), hashtextextended(x.user_id, "
    "hashtextextended(x.asset, 0)))) AS s FROM (SELECT le.user_id, le.asset, sum(le.amount) AS amount FROM "
    "ledger_entry le GROUP BY le.user_id, le.asset HAVING sum(le.amount) <> 0) x) e, "
    "(SELECT count(*) AS n, sum(hashtextextended(CAST(la.balance AS TEXT), hashtextextended(la.user_id, "
    "hashtextextended(la.asset, 0)))) AS s FROM ledger_account la WHERE la.balance <> 0) a";
// limits: per (scope, user, period), the holding grants counted (under the versions whose terms have
// a limit; the period recomputed as the limits query does) against each counter, as tuples (scope,
// user, period, count) hashed whole, zeros left out (the limits query reads a missing side as 0);
// and the over-limit query counted. Each side has one tuple per key (the counters' primary key is
// (scope, user, period)), so agreeing sums mean the same keys with the same counts.
const std::string kLimitsFp =
    "WITH " + terms_cte(true) + ", x AS (" + limit_sides(true) + ") SELECT 'counters per period against grants', "
    "h.n || ' ' || coalesce(h.s, 0), c.n || ' ' || coalesce(c.s, 0) FROM (SELECT count(*) AS n, "
    "sum(hashtextextended(CAST(y.n AS TEXT), hashtextextended(y.user_id, hashtextextended(y.pk, "
    "hashtextextended(y.scope, 0))))) AS s FROM (SELECT x.scope, x.user_id, x.pk, sum(x.e) AS n FROM x WHERE x.e = 1 "
    "GROUP BY x.scope, x.user_id, x.pk) y) h, (SELECT count(*) AS n, sum(hashtextextended(CAST(y.n AS TEXT), "
    "hashtextextended(y.user_id, hashtextextended(y.pk, hashtextextended(y.scope, 0))))) AS s FROM (SELECT x.scope, "
    "x.user_id, x.pk, sum(x.c) AS n FROM x WHERE x.e = 0 GROUP BY x.scope, x.user_id, x.pk HAVING sum(x.c) <> 0) y) c "
    "UNION ALL SELECT 'counters over their limits', '0', CAST(count(*) AS TEXT) FROM (" + kOverLimit + ") o";
// status_log, the grants' chains, in two halves of the grants' ids (for two connections): the chain
// pass of status_log_postgres counts the broken links, and sums its last rows as (grant, to-state);
// the grants are summed as (id, state). No broken link and agreeing sums mean every grant has a
// last row ending at its state and every last row has its grant: nothing for the grants' part of
// the status_log query. The halves split at the middle of the ids (0 with no grant), every log row
// in one of them.
std::string status_log_grants_fp(bool upper) {
  const std::string in = upper ? " > " : " <= ";
  // (each halved first: the sum of two ids near 2^63 would not fit a bigint)
  const std::string mid = "(SELECT coalesce(min(m.id) / 2 + max(m.id) / 2, 0) FROM grants m)";
  return "SELECT 'grant chains, " + std::string(upper ? "upper" : "lower") + " half', r.n || ' ' || "
         "coalesce(r.s, 0) || ' 0', c.n || ' ' || coalesce(c.s, 0) || ' ' || c.broken FROM "
         "(SELECT count(*) AS n, sum(hashtextextended(t.state, t.id)) AS s FROM grants t WHERE t.id" + in + mid + ") r, "
         "(SELECT count(*) FILTER (WHERE c.next_id IS NULL) AS n, sum(hashtextextended(c.to_state, c.entity_id)) "
         "FILTER (WHERE c.next_id IS NULL) AS s, count(*) FILTER (WHERE coalesce(c.from_state, '') <> "
         "coalesce(c.prev_to, '')) AS broken FROM (SELECT l.entity_id, l.from_state, l.to_state, lag(l.to_state) "
         "OVER w AS prev_to, lead(l.id) OVER w AS next_id FROM status_log l WHERE l.entity = 'grant' AND "
         "l.entity_id" + in + mid + " WINDOW w AS (PARTITION BY l.entity_id ORDER BY l.id)) c) c";
}
// status_log, every other kind of record: its part of the status_log query, counted (these tables
// are small next to the grants').
const std::string kStatusLogOthersFp =
    "SELECT 'other records'' chains', '0', CAST(count(*) AS TEXT) FROM (" + status_log_postgres(false) + ") o";

// list_items: each list-issue item agrees with the grant of its biz_id ("<batch>:<user>"): the run,
// the fuse's decisions and a cancel move both in one transaction. A pending item has no grant; a
// held one waits on its pending grant; an issued or failed one has a grant that was issued; a
// rejected or cancelled one has none, or one that was rejected or cancelled with it.
const std::string kListItems =
    "SELECT 'list_item', b.batch_no || '/' || li.user_id, "
    "CASE li.state WHEN 'pending' THEN 'no grant' WHEN 'held' THEN 'grant ' || coalesce(li.record_code, '?') || "
    "' pending' WHEN 'issued' THEN 'grant ' || coalesce(li.record_code, '?') || ' issued' WHEN 'failed' THEN 'grant ' || "
    "coalesce(li.record_code, '?') || ' issued' WHEN 'rejected' THEN 'no grant, or an invalid one' "
    "WHEN 'cancelled' THEN 'no grant, or a cancelled one' ELSE 'a known item state' END, "
    "CASE WHEN g.id IS NULL THEN 'no grant' ELSE 'grant ' || g.record_code || ' ' || g.state END, "
    "'item ' || li.state || ' (line ' || coalesce(li.line, 0) || ')', li.updated_at "
    "FROM list_item li JOIN list_batch b ON b.id = li.batch_id JOIN activity a ON a.id = b.activity_id "
    "LEFT JOIN grants g ON g.biz_id = b.batch_no || ':' || li.user_id AND g.user_id = li.user_id "
    "WHERE " + kAct + " AND NOT ("
    "(li.state = 'pending' AND g.id IS NULL) OR "
    "(li.state = 'held' AND g.state = 'pending' AND g.record_code = li.record_code) OR "
    "(li.state IN ('issued', 'failed') AND g.record_code = li.record_code AND g.state NOT IN ('pending', 'invalid', "
    "'cancelled')) OR "
    "(li.state = 'rejected' AND (g.id IS NULL OR (g.state = 'invalid' AND g.record_code = li.record_code))) OR "
    "(li.state = 'cancelled' AND (g.id IS NULL OR (g.state = 'cancelled' AND g.record_code = li.record_code))))";

// identifiers: every stored user id and biz id obeys the identifier text rules that the edges now
// enforce (core/identifier.hpp: valid UTF-8, no control or invisible character, NFC): a row stored
// before them, or written by hand, is reported, never rewritten. PostgreSQL: IS NFC NORMALIZED and a
// character class of the refused code points (:refused, built from the same table the edges use);
// SQLite: rc_identifier_clean, the edges' own function.
std::string identifiers_sql(bool pg) {
  auto bad = [pg](const std::string& col) {
    return pg ? "(NOT (" + col + " IS NFC NORMALIZED) OR " + col + " ~ CAST(:refused AS TEXT))"
              : "rc_identifier_clean(" + col + ") = 0";
  };
  auto line = [&](const std::string& entity, const std::string& key, const std::string& col, const std::string& what,
                  const std::string& from, const std::string& scope) {
    const std::string hex = pg ? "upper(encode(convert_to(" + col + ", 'UTF8'), 'hex'))" : "hex(" + col + ")";
    return "SELECT '" + entity + "', " + key + ", 'a " + what + " in NFC without control or invisible characters', "
           "'bytes ' || " + hex + ", 'the stored " + what + ", never rewritten: fix the caller, then the row by hand', "
           "NULL FROM " + from + " WHERE " + scope + " AND " + bad(col);
  };
  return line("grant", "g.record_code", "g.user_id", "user id", "grants g", "g.activity_id IN " + kActIds) +
         " UNION ALL " +
         line("grant", "g.record_code", "g.biz_id", "biz id", "grants g", "g.activity_id IN " + kActIds) +
         " UNION ALL " +
         line("qualification", "a.code || '/#' || q.id", "q.user_id", "user id",
              "qualification q JOIN activity a ON a.id = q.activity_id", kAct) +
         " UNION ALL " +
         line("activity_user_list", "a.code || '/' || l.list", "l.user_id", "user id",
              "activity_user_list l JOIN activity a ON a.id = l.activity_id", kAct) +
         " UNION ALL " +
         line("list_item", "b.batch_no || '/#' || li.id", "li.user_id", "user id",
              "list_item li JOIN list_batch b ON b.id = li.batch_id JOIN activity a ON a.id = b.activity_id", kAct);
}

const std::vector<Check> kChecks = {
    {{"stock", "per prize: bucket totals = remaining + grants holding a unit = configured stock"}, kStock},
    {{"budget", "per activity: consumed = cost of grants holding budget <= authorised"}, kBudget},
    {{"ledger", "one credit per successful ledger grant, every entry owned by its grant, balances = sum of entries"},
     kLedger, kLedgerSqlite, {kBalances}, 3, {}, {{kLedgerEntriesFp, 2}, {kLedgerBillsFp, 1}, {kBalancesFp, 1}}},
    {{"amounts", "per grant: amount, cost and channel by its prize's terms under its version"},
     amounts_sql(true), amounts_sql(false), {}, 1},
    {{"delivery", "per delivery bill: the grant's amount and channel, delivered exactly when its grant was; "
                  "outbox rows for outbox grants only"},
     delivery_sql(true), delivery_sql(false)},
    {{"qualifications", "per activity and user: used qualifications = grants on whitelist activities that took one"},
     kQualifications},
    {{"limits", "per scope, user and period: counter = grants made in the period, none over its limit"},
     limits_sql(true), limits_sql(false), {}, 1, {}, {{kLimitsFp, 1}}},
    {{"stuck", "deliveries without outcome, overdue resend bills, requests held too long"}, kStuck},
    {{"status_log", "current state = last log row, each row starts where the previous ended"},
     status_log_postgres(), kChainSqlite + kStatusLogTail, {}, 3, {{"enable_hashjoin", "off"}},
     {{status_log_grants_fp(false), 3}, {status_log_grants_fp(true), 3}, {kStatusLogOthersFp, 0}}},
    {{"list_items", "each list-issue item agrees with its grant (pending, held, issued, rejected, cancelled)"},
     kListItems},
    {{"identifiers", "stored user ids and biz ids obey the identifier rules (UTF-8, NFC, no invisible character)"},
     identifiers_sql(true), identifiers_sql(false), {}, 1},
};

}  // namespace

const std::vector<Check>& check_table() { return kChecks; }

const std::vector<CheckInfo>& checks() {
  static const std::vector<CheckInfo> infos = [] {
    std::vector<CheckInfo> v;
    for (auto& c : kChecks) {
      v.push_back(c.info);
      v.back().fingerprints = !c.pg_fingerprints.empty();
    }
    return v;
  }();
  return infos;
}

}  // namespace rc::jobs::reconcile

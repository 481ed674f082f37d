// Definition versions: the rows, a new version's proposal and its two-role review (contract in
// versions.hpp). The switch itself is in version_switch.cpp.
#include "core/activity/versions.hpp"

#include <nlohmann/json.hpp>

#include "core/audit.hpp"
#include "base/error.hpp"
#include "util/hash.hpp"

namespace rc::activity {

using store::Session;
using nlohmann::json;

bool is_running(ActivityState s) {
  return s == ActivityState::gray || s == ActivityState::live || s == ActivityState::paused;
}

namespace {

const char* kCols =
    "SELECT id, activity_id, version, state, definition, definition_hash, proposed_by, reason, decided_by, "
    "created_at, updated_at, switched_at FROM activity_version ";

VersionRow to_version(const store::Row& r) {
  VersionRow v;
  v.id = r.i64(0);
  v.activity_id = r.i64(1);
  v.version = r.i64(2);
  v.state = state_from_db<VersionState>(r.str(3));
  v.definition = r.str(4);
  v.definition_hash = r.str(5);
  v.proposed_by = r.str(6);
  v.reason = r.opt_str(7);
  v.decided_by = r.opt_str(8);
  v.created_at = r.i64(9);
  v.updated_at = r.i64(10);
  v.switched_at = r.opt_i64(11);
  return v;
}

std::string name_of(const ActivityRow& a, int64_t version) {
  return "version " + std::to_string(version) + " of '" + a.code + "'";
}

TransitionResult unchanged(const ActivityRow& a, const std::optional<VersionRow>& v, const std::string& why) {
  TransitionResult r;
  r.code = a.code;
  r.from = r.to = v ? name(v->state) : name(a.state);
  if (v) r.version = v->version;
  r.message = why + "; nothing changed";
  return r;
}

// The review rows of version v (a creation's reviews before schema v6 name no version: by hash).
std::optional<std::string> approver(Session& s, const ActivityRow& a, const VersionRow& v, const char* role) {
  auto r = s.query(
      "SELECT operator FROM activity_review WHERE activity_id = $1 AND role = $2 AND decision = 'approve' AND voided = 0 "
      "AND definition_hash = $3 AND (version = $4 OR version IS NULL) ORDER BY id DESC LIMIT 1",
      {a.id, std::string(role), v.definition_hash, v.version});
  if (r.empty()) return std::nullopt;
  return r[0].str(0);
}

}  // namespace

std::vector<VersionRow> versions_of(Session& s, int64_t activity_id) {
  std::vector<VersionRow> out;
  for (auto& r : s.query(std::string(kCols) + "WHERE activity_id = $1 ORDER BY version", {activity_id}).rows)
    out.push_back(to_version(r));
  return out;
}

std::optional<VersionRow> find_version(Session& s, int64_t activity_id, int64_t version) {
  auto r = s.query(std::string(kCols) + "WHERE activity_id = $1 AND version = $2", {activity_id, version});
  if (r.empty()) return std::nullopt;
  return to_version(r[0]);
}

std::optional<VersionRow> open_version(Session& s, int64_t activity_id) {
  auto r = s.query(std::string(kCols) + "WHERE activity_id = $1 AND state IN ('pending_review', 'product_approved')",
                   {activity_id});
  if (r.empty()) return std::nullopt;
  return to_version(r[0]);
}

void record_current(Session& s, int64_t activity_id, int64_t version, const std::string& text, const std::string& hash,
                    const std::string& who, const std::string& reason, Millis now) {
  auto cur = s.query("SELECT id FROM activity_version WHERE activity_id = $1 AND state = 'current'", {activity_id});
  if (!cur.empty() &&
      !transition(s, cur[0].i64(0), VersionState::current, VersionState::superseded, who, reason, now))
    throw store::Retryable("the current version changed concurrently");
  auto id = s.query(
                 "INSERT INTO activity_version (activity_id, version, state, definition, definition_hash, proposed_by, "
                 "reason, created_at, updated_at, switched_at) VALUES ($1, $2, 'current', $3, $4, $5, $6, $7, $7, $7) "
                 "RETURNING id",
                 {activity_id, version, text, hash, who, reason, now})[0]
                .i64(0);
  log_created(s, id, VersionState::current, who, reason, now);
}

CreateResult propose(store::Store& st, const Definition& d, const std::string& text, const ProposeOptions& opts,
                     const Actor& who, Millis now) {
  if (opts.publish && opts.review_required)
    throw Error(Errc::not_permitted,
                "update --publish skips the two-role review of a new version: allowed only with review.required = false");
  CreateResult res;
  res.code = d.code;
  res.hash = sha256_hex(text);
  res.dry_run = who.dry_run;
  try {
    st.transact(store::TxMode::write, [&](store::Tx& tx) {
      res.log.clear();
      auto a = get(tx, d.code);
      res.id = a.id;
      res.state = name(a.state);
      if (!is_running(a.state))
        throw Error(Errc::refused, "activity '" + d.code + "' is " + res.state + " (it changed meanwhile): run activity update again");
      if (a.definition_hash == res.hash) {
        res.log.push_back("definition unchanged (same SHA-256 as the running version " + std::to_string(a.version) +
                          "): nothing to do");
        tx.rollback_only();
        return;
      }
      if (d.kind != a.kind)
        throw Error(Errc::conflict, "activity '" + d.code + "' is a " + name(a.kind) + " activity; a new version cannot make it " +
                                        kind_name(d.kind) + " (create a new activity): nothing was written");
      const bool has_budget = !tx.query("SELECT 1 FROM budget WHERE activity_id = $1", {a.id}).empty();
      if (has_budget && !d.budget_cents)
        throw Error(Errc::conflict, "activity '" + d.code +
                                        "' has a budget; the new version has no budget_cents: a running activity's budget "
                                        "cannot be removed (activity budget --set changes it): nothing was written");
      if (auto open = open_version(tx, a.id))
        throw Error(Errc::refused, name_of(a, open->version) + " is already in review (" + name(open->state) + ", proposed by " +
                                       open->proposed_by + "): approve or reject it first (activity approve|reject " +
                                       d.code + "); nothing was written");
      const int64_t next =
          std::max(a.version, tx.query("SELECT COALESCE(MAX(version), 0) FROM activity_version WHERE activity_id = $1",
                                       {a.id})[0]
                                  .i64(0)) + 1;
      const int64_t vid =
          tx.query("INSERT INTO activity_version (activity_id, version, state, definition, definition_hash, proposed_by, "
                   "created_at, updated_at) VALUES ($1, $2, 'pending_review', $3, $4, $5, $6, $6) RETURNING id",
                   {a.id, next, text, res.hash, who.name, now})[0]
              .i64(0);
      log_created(tx, vid, VersionState::pending_review, who.name, "proposed", now);
      audit(tx, who.name, "activity.version.propose", "activity", d.code,
            json{{"version", next}, {"hash", res.hash}, {"running_version", a.version}, {"running_hash", a.definition_hash}}
                .dump(),
            now);
      res.version = next;
      res.version_state = name(VersionState::pending_review);
      res.log.push_back("stored " + name_of(a, next) + " in review (pending_review); version " +
                        std::to_string(a.version) + " keeps running until a product and a tech approval switch to it");
      if (opts.publish) {
        const std::string waived = "review waived: review.required = false";
        auto v = *find_version(tx, a.id, next);
        if (!transition(tx, vid, VersionState::pending_review, VersionState::product_approved, who.name, waived, now))
          throw store::Retryable("the new version changed concurrently");
        v.state = VersionState::product_approved;
        for (auto& l : switch_to(tx, a, v, d, who.name, now)) res.log.push_back(l);
        audit(tx, who.name, "activity.review_waived", "activity", d.code,
              json{{"reason", waived}, {"version", next}, {"hash", res.hash}}.dump(), now);
        res.version_state = name(VersionState::current);
      }
      if (who.dry_run) tx.rollback_only();
    });
  } catch (const store::UniqueViolation&) {
    // a concurrent update proposed a version first (one version in review at a time)
    throw Error(Errc::refused, "another version of '" + d.code +
                                   "' was proposed at the same time and is in review: approve or reject it first; "
                                   "nothing was written");
  }
  return res;
}

TransitionResult approve_version(store::Tx& tx, const ActivityRow& a, Role role,
                                 const std::optional<std::string>& comment, const ReviewPolicy& pol, const Actor& who,
                                 Millis now) {
  const VersionState expected = role == Role::product ? VersionState::pending_review : VersionState::product_approved;
  const VersionState to = role == Role::product ? VersionState::product_approved : VersionState::current;
  auto v = open_version(tx, a.id);
  if (!v || v->state != expected) {
    tx.rollback_only();
    return unchanged(a, v,
                     v ? name_of(a, v->version) + " is " + name(v->state) + ": cannot approve as " + role_name(role) +
                             " (allowed from " + name(expected) + (role == Role::tech ? "; product approves first" : "") + ")"
                       : "activity '" + a.code + "' is " + name(a.state) + " and no new version is in review: cannot approve "
                         "(activity update -f FILE proposes one)");
  }
  if (who.name == v->proposed_by)
    throw Error(Errc::not_permitted, "rule creator_may_not_approve: " + who.name + " proposed " + name_of(a, v->version) +
                                         " and may not approve it");
  if (pol.distinct_approvers && role == Role::tech && approver(tx, a, *v, "product") == who.name)
    throw Error(Errc::not_permitted, "rule distinct_approvers: " + who.name + " already approved " + name_of(a, v->version) +
                                         " as product; the tech approver must be someone else (config review.distinct_approvers)");
  TransitionResult res;
  res.code = a.code;
  res.from = name(v->state);
  res.to = name(to);
  res.version = v->version;
  res.dry_run = who.dry_run;
  res.changed = !who.dry_run;
  std::vector<std::string> did;
  if (role == Role::product) {
    if (!transition(tx, v->id, expected, to, who.name, "approved as product", now))
      throw store::Retryable("the version in review changed concurrently");
  } else {
    auto parsed = parse_definition(v->definition, a.code);
    if (!parsed.def) throw Error(Errc::internal, name_of(a, v->version) + " no longer parses: reject it");
    did = switch_to(tx, a, *v, *parsed.def, who.name, now);
  }
  tx.exec(
      "INSERT INTO activity_review (activity_id, role, decision, operator, definition_hash, comment, created_at, version) "
      "VALUES ($1, $2, 'approve', $3, $4, $5, $6, $7)",
      {a.id, std::string(role_name(role)), who.name, v->definition_hash, store::opt(comment), now, v->version});
  audit(tx, who.name, "activity.version.approve", "activity", a.code,
        json{{"role", role_name(role)}, {"version", v->version}, {"hash", v->definition_hash},
             {"comment", comment.value_or("")}}
            .dump(),
        now);
  res.message = std::string(who.dry_run ? "would approve " : "approved ") + name_of(a, v->version) + " as " +
                role_name(role) + ": " + res.from + " -> " + res.to;
  for (auto& l : did) res.message += "; " + l;
  if (who.dry_run) tx.rollback_only();
  return res;
}

TransitionResult reject_version(store::Tx& tx, const ActivityRow& a, Role role, const std::string& reason,
                                const Actor& who, Millis now) {
  auto v = open_version(tx, a.id);
  if (!v) {
    tx.rollback_only();
    return unchanged(a, v, "activity '" + a.code + "' is " + name(a.state) + " and no new version is in review: cannot reject");
  }
  TransitionResult res;
  res.code = a.code;
  res.from = name(v->state);
  res.to = name(VersionState::rejected);
  res.version = v->version;
  res.dry_run = who.dry_run;
  res.changed = !who.dry_run;
  if (!transition(tx, v->id, v->state, VersionState::rejected, who.name, reason, now,
                  ", decided_by = $5, reason = $6", {who.name, reason}))
    throw store::Retryable("the version in review changed concurrently");
  tx.exec(
      "INSERT INTO activity_review (activity_id, role, decision, operator, definition_hash, comment, created_at, version) "
      "VALUES ($1, $2, 'reject', $3, $4, $5, $6, $7)",
      {a.id, std::string(role_name(role)), who.name, v->definition_hash, reason, now, v->version});
  audit(tx, who.name, "activity.version.reject", "activity", a.code,
        json{{"role", role_name(role)}, {"version", v->version}, {"reason", reason}}.dump(), now);
  res.message = std::string(who.dry_run ? "would reject " : "rejected ") + name_of(a, v->version) + " (" + res.from +
                "); version " + std::to_string(a.version) + " keeps running";
  if (who.dry_run) tx.rollback_only();
  return res;
}

}  // namespace rc::activity

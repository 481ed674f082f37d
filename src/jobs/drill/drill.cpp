// drill: the scratch database, the copies of the definition, the run and its record (drill.hpp).
#include <spdlog/spdlog.h>
#include <signal.h>
#include <stdlib.h>
#include <toml++/toml.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <filesystem>

#include "core/activity/activity.hpp"
#include "core/engine/lottery.hpp"
#include "core/interrupt.hpp"
#include "core/store/migrate.hpp"
#include "jobs/drill/internal.hpp"
#include "jobs/runtime/job_table.hpp"
#include "jobs/runtime/lease.hpp"
#include "util/hash.hpp"

namespace rc::jobs::drill {
namespace {

// Temporary scratch directories of drills whose process is gone (kill -9): /tmp/rewardctl-drill-PID-*.
void remove_stale_tmpdirs() {
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/tmp", ec)) {
    const std::string n = e.path().filename().string();
    const std::string pre = "rewardctl-drill-";
    if (n.rfind(pre, 0) != 0) continue;
    const long pid = std::strtol(n.c_str() + pre.size(), nullptr, 10);
    if (pid <= 0 || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH)) std::filesystem::remove_all(e.path(), ec);
  }
}

// On PostgreSQL, true when the two connections reach the same server, database and schema: the
// live session's backend (pid and start time) is visible from the other connection.
bool same_pg_place(store::Store& a, store::Store& b) {
  auto me = a.query("SELECT pg_backend_pid(), CAST(backend_start AS TEXT), current_database(), current_schema() "
                    "FROM pg_stat_activity WHERE pid = pg_backend_pid()");
  if (me.empty()) return false;
  auto seen = b.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND CAST(backend_start AS TEXT) = $2 "
                      "AND current_database() = $3 AND current_schema() = $4",
                      {me[0].i64(0), me[0].str(1), me[0].str(2), me[0].str(3)});
  return seen[0].i64(0) > 0;
}

std::string random_tag() {
  return "d" + std::to_string(100000 + engine::random_below(900000));
}

// A scratch database: created and migrated, or checked to be empty or a drill's own.
void open_scratch(Scratch& sc, const Options& o) {
  store::StoreOptions so;
  so.create_if_missing = true;
  if (o.scratch_url.empty()) {
    remove_stale_tmpdirs();
    std::string tmpl = "/tmp/rewardctl-drill-" + std::to_string(::getpid()) + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw Error(Errc::output_failed, "cannot create a temporary directory for the drill's database");
    sc.tmpdir = tmpl;
    sc.dsn = store::Dsn{store::Dialect::sqlite, sc.tmpdir + "/drill.db"};
    sc.describe = "sqlite (temporary, removed afterwards)";
  } else {
    if (!o.live_url.empty() && o.scratch_url == o.live_url)
      throw Error(Errc::bad_input, "--scratch-db is the live database: a drill never runs in it");
    sc.dsn = store::parse_dsn(o.scratch_url, "--scratch-db");
    sc.describe = sc.dsn.dialect == store::Dialect::sqlite ? "sqlite " + sc.dsn.target
                                                           : std::string("postgres (--scratch-db)");
  }
  so.pooled = o.pooled && sc.dsn.dialect == store::Dialect::postgres;
  sc.st = store::open_store(sc.dsn, so);
  auto& st = *sc.st;
  const bool pg = st.dialect() == store::Dialect::postgres;
  if (pg && o.live && o.live->dialect() == store::Dialect::postgres && same_pg_place(*o.live, st))
    throw Error(Errc::bad_input, "--scratch-db is the live database (same server, database and schema): a drill never runs in it");
  if (pg) {
    auto w = st.query("SELECT current_database(), current_schema(), coalesce(CAST(inet_server_port() AS TEXT), 'socket')");
    const std::string database = w[0].str(0), schema = w[0].str_or(1, "?"), port = w[0].str(2);
    sc.describe = "postgres database " + database + ", schema " + schema + " (port " + port + ")";
  }
  // one drill at a time in a scratch database: a second one would meet the first one's moved clock
  // (behind a pooler the lease is a job_lock row, taken below once the tables exist)
  const bool rows = row_leases(sc.dsn, so);
  const std::string busy = "another drill is running in this scratch database: try again when it ends";
  if (!rows) {
    sc.lease = try_lease(sc.dsn, so, "drill");
    if (!sc.lease) throw Error(Errc::busy, busy);
  }
  const int64_t tables =
      st.query(pg ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
                  : "SELECT count(*) FROM sqlite_master WHERE type = 'table'")[0]
          .i64(0);
  const int64_t marked =
      st.query(pg ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
                    "AND table_name = 'drill_scratch'"
                  : "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'drill_scratch'")[0]
          .i64(0);
  if (tables > 0 && marked == 0)
    throw Error(Errc::conflict, "--scratch-db holds tables and was not made by a drill: a drill runs only in an empty "
                                "database or one an earlier drill made (nothing was changed)");
  if (!marked) st.exec("CREATE TABLE IF NOT EXISTS drill_scratch (created_at BIGINT NOT NULL)");
  store::migrate(st, SystemClock().now_ms());
  if (rows) {
    sc.lease = try_row_lease(st, sc.dsn, so, "drill",
                             "drill pid " + std::to_string(::getpid()) + " on " + host_name() + " " + random_tag(),
                             30000);
    if (!sc.lease) throw Error(Errc::busy, busy);
  }
}

}  // namespace

Scratch::~Scratch() {
  lease.reset();  // first: a row lease deletes its row through st
  st.reset();
  if (!tmpdir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
  }
}

bool Report::passed() const {
  for (auto& c : checks)
    if (c.result == "fail") return false;
  return true;
}

activity::Definition Drill::copy(const std::string& check) const {
  activity::Definition d = def;
  d.code = tag + "_" + check;
  d.start_at = t0 - 10 * kDay;
  d.end_at = t0 + 60 * kDay;
  d.fuses.clear();
  d.gray_users.clear();
  d.blacklist.clear();
  d.whitelist_required = false;
  return d;
}

namespace {
// The definition's text without [[lottery.guarantees]]: a copy whose users draw once each would
// otherwise get the guaranteed prize on every draw of a guarantee nth = 1.
std::string without_guarantees(const std::string& text) {
  toml::table root = toml::parse(std::string_view(text));
  if (auto* lot = root["lottery"].as_table()) lot->erase("guarantees");
  std::ostringstream os;
  os << root;
  return os.str();
}
}  // namespace

std::string Drill::create(const activity::Definition& d, bool keep_guarantees) {
  activity::CreateOptions co;
  co.publish = true;
  co.review_required = false;
  const std::string text = keep_guarantees || d.guarantees.empty() ? o.text : without_guarantees(o.text);
  activity::create(*sc.st, d, text, co, activity::Actor{o.operator_name, false}, clock.now_ms());
  return d.code;
}

engine::EngineOptions Drill::engine_options() const {
  engine::EngineOptions e;
  e.actor = o.operator_name;
  e.sold_out_memory_ms = 0;  // every sold-out answer comes from the database: the counts are exact
  return e;
}

Counts Drill::run_job(const std::string& name, const std::function<void(JobRun&)>& fn) {
  RunOptions ro;
  ro.operator_name = o.operator_name;
  ro.store_options.pooled = o.pooled && sc.dsn.dialect == store::Dialect::postgres;
  auto rep = jobs::run_job(job_decl(name), fn, *sc.st, sc.dsn, clock, ro);
  if (!rep.error.empty()) throw Error(Errc::internal, name + " in the scratch database: " + rep.error);
  return rep.counts;
}

std::map<std::string, int64_t> Drill::issue(const std::string& code, int64_t n, const std::string& user_prefix,
                                            const std::optional<std::string>& prize) {
  engine::Engine e(*sc.st, clock, engine_options());
  std::map<std::string, int64_t> out;
  for (int64_t done = 0; done < n;) {
    check_interrupted();  // between transactions: a signal stops a long series of draws
    const int64_t k = std::min<int64_t>(500, n - done);
    std::vector<engine::ClaimRequest> rs(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      auto& r = rs[size_t(i)];
      r.activity = code;
      r.user = user_prefix + std::to_string(done + i);
      r.biz_id = code + ":" + r.user;
      r.prize = prize;
      r.deliver = false;
    }
    std::vector<engine::ClaimOutcome> outs;
    sc.st->transact(store::TxMode::write, [&](store::Tx& tx) { outs = e.claim_many(tx, rs); });
    for (auto& c : outs) ++out[c.status == engine::Status::rejected ? std::string("rejected:") + name(c.reason) : engine::status_name(c.status)];
    done += k;
  }
  return out;
}

WorkersRun Drill::processes(int workers, WorkerTask task) {
  task.dsn = sc.dsn;
  task.pooled = o.pooled;
  task.now = clock.now_ms();
  task.operator_name = o.operator_name;
  return run_workers(std::vector<WorkerTask>(size_t(workers), task));
}

int64_t Drill::count(const std::string& sql, const store::Params& p) { return sc.st->query(sql, p)[0].i64(0); }

void lift_stock(activity::Definition& d, int64_t stock) {
  for (auto& p : d.prizes) {
    p.stock = stock;
    p.stock_buckets = std::min<int64_t>(p.stock_buckets, std::max<int64_t>(1, stock));
  }
}

void lift_budget(activity::Definition& d) {
  if (d.budget_cents) d.budget_cents = 1'000'000'000'000'000LL;
}

void drop_limits(activity::Definition& d) {
  d.limit.reset();
  for (auto& p : d.prizes) p.limit.reset();
}

namespace {
Report run_checks(const activity::Definition& d, const Options& o, Millis now);
}

Report run(const activity::Definition& d, const Options& o, Millis now) {
  // An interrupt is honoured wherever it lands - opening the scratch database, inside a check or
  // between two - and always with the same answer: nothing of this run is recorded.
  try {
    return run_checks(d, o, now);
  } catch (const Error& e) {
    if (e.kind() != Errc::interrupted) throw;
    const std::string what = e.what();
    if (what.find("nothing recorded") != std::string::npos) throw;
    throw Error(Errc::interrupted, "drill interrupted, nothing recorded: " + what);
  }
}

namespace {

Report run_checks(const activity::Definition& d, const Options& o, Millis now) {
  Report rep;
  rep.code = d.code;
  rep.hash = sha256_hex(o.text);
  rep.started_at = now;
  Scratch sc;
  open_scratch(sc, o);
  rep.scratch = sc.describe;
  Drill x{d, o, sc, DrillClock(now), random_tag(), now};
  spdlog::info("drill {}: definition {} in {} (codes {}_*), {} worker(s)", d.code, rep.hash.substr(0, 12), sc.describe,
               x.tag, o.workers);
  using Fn = Check (*)(Drill&);
  const std::vector<std::pair<const char*, Fn>> checks{
      {"oversell", check_oversell}, {"idempotency", check_idempotency}, {"limits", check_limits},
      {"budget", check_budget},     {"lottery", check_lottery},         {"fuse", check_fuse},
      {"expiry", check_expiry},     {"peak", check_peak},               {"reconcile", check_reconcile}};
  for (auto& [name, fn] : checks) {
    x.clock.set(now);
    Check c;
    try {
      c = fn(x);
    } catch (const Error& e) {
      // the environment failed, not the definition: stop, record nothing
      switch (e.kind()) {
        case Errc::interrupted:
        case Errc::unavailable:
        case Errc::busy:
        case Errc::not_permitted:
        case Errc::config:
        case Errc::output_failed:
          throw Error(e.kind(), std::string("drill stopped in its ") + name + " check, nothing recorded: " + e.what());
        default:
          c.result = "fail";
          c.detail = std::string("the check could not run: ") + e.what();
      }
    }
    check_interrupted();
    c.name = name;
    rep.checks.push_back(c);
    if (o.on_check) o.on_check(rep.checks.back());
  }
  return rep;
}

}  // namespace

int64_t store_run(store::Store& live, const Report& r, const std::string& operator_name) {
  nlohmann::json checks = nlohmann::json::array();
  for (auto& c : r.checks)
    checks.push_back({{"check", c.name}, {"result", c.result}, {"detail", c.detail}, {"figures", c.figures}});
  return live
      .query("INSERT INTO drill_run (activity_code, definition_hash, passed, checks, scratch, operator, started_at, "
             "finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
             {r.code, r.hash, int64_t(r.passed() ? 1 : 0), checks.dump(), r.scratch, operator_name, r.started_at,
              r.finished_at})[0]
      .i64(0);
}

std::optional<int64_t> passing_run(store::Session& s, const std::string& code, const std::string& hash) {
  auto r = s.query("SELECT id, passed FROM drill_run WHERE activity_code = $1 AND definition_hash = $2 "
                   "ORDER BY id DESC LIMIT 1",
                   {code, hash});
  if (r.empty()) return std::nullopt;
  const int64_t id = r[0].i64(0);
  const bool passed = r[0].i64(1) == 1;
  if (!passed) return std::nullopt;
  return id;
}

}  // namespace rc::jobs::drill

// run_job: pause switch, lease, job_run rows, chunks, stop reasons, summary and metrics. The order
// matters: the lease is taken before anything is written (a loser writes nothing), and the run's
// end is recorded before the lease is released (the next holder sees a finished run).
#include "jobs/runtime/runner.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "core/interrupt.hpp"
#include "jobs/runtime/batch.hpp"
#include "jobs/runtime/job_log.hpp"
#include "jobs/runtime/lease.hpp"
#include "jobs/runtime/metrics.hpp"

namespace rc::jobs {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "job expire run 12 on host h (pid 123, by op@h) since 2025-11-30T15:59:59Z", from job_lock. The
// winner writes its row just after it took the lease, and a row may be left by a holder that died:
// so a row that is missing, or names a process of this host that no longer exists, is read again
// for a moment before giving up on naming the holder.
std::string describe_holder(store::Store& st, const std::string& key, const std::string& this_host) {
  for (int attempt = 0; attempt < 40; ++attempt) {
    auto x = job_lock(st, key);
    if (x && x->host) {
      const bool dead_here = *x->host == this_host && x->pid && ::kill(pid_t(*x->pid), 0) != 0 && errno == ESRCH;
      auto or_q = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("?"); };
      if (!dead_here)
        return "job " + x->job.value_or(key) + " run " + or_q(x->run_id) + " on host " + *x->host + " (pid " +
               or_q(x->pid) + ", by " + x->holder + ") since " + format_utc(x->acquired_at);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "another process (not yet recorded in job_lock)";
}

}  // namespace

bool JobRun::more() {
  if (!stopped_.empty()) return false;
  if (interrupted()) stopped_ = "signal";
  else if (o_.limit && items_ >= *o_.limit) stopped_ = "limit";
  else if (o_.max_runtime_ms && since(t0_) * 1000 >= double(*o_.max_runtime_ms)) stopped_ = "max_runtime";
  return stopped_.empty();
}

int64_t JobRun::allowance(int64_t want) const {
  if (!o_.limit) return want;
  return std::max<int64_t>(0, std::min(want, *o_.limit - items_));
}

int64_t JobRun::chunk(const std::function<int64_t(store::Tx&, Counts&)>& fn) {
  Counts c;
  int64_t items = 0;
  transact_batch(st_, [&] { c.clear(); }, [&](store::Tx& tx) {
    items = fn(tx, c);
    if (o_.dry_run) tx.rollback_only();
  });
  for (auto& [k, v] : c) counts_[k] += v;
  items_ += items;
  return items;
}

void JobRun::add(const std::string& outcome, int64_t n, int64_t items) {
  counts_[outcome] += n;
  items_ += items;
}

bool JobRun::sleep_ms(int64_t ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (interrupted()) return false;
    std::this_thread::sleep_for(std::min(std::chrono::milliseconds(50),
                                         std::chrono::duration_cast<std::chrono::milliseconds>(
                                             end - std::chrono::steady_clock::now()) + std::chrono::milliseconds(1)));
  }
  return !interrupted();
}

std::string pause_reason(const RunOptions& o) {
  if (o.paused) return o.paused_by;
  struct stat sb;
  if (!o.stop_file.empty() && ::stat(o.stop_file.c_str(), &sb) == 0) return "the stop file " + o.stop_file + " exists";
  return "";
}

class Runner {
 public:
  static JobReport run(const JobDecl& decl, const JobFn& fn, store::Store& st, const store::Dsn& dsn,
                       const Clock& clock, const RunOptions& o) {
    JobReport rep;
    rep.job = decl.name;
    rep.dry_run = o.dry_run;
    if (auto why = pause_reason(o); !why.empty()) {
      rep.state = "paused";
      rep.error = why;
      spdlog::info("job {} paused ({}): nothing done", decl.name, why);
      return rep;
    }

    // 1. the lease, before any write
    std::vector<std::string> keys;
    std::vector<std::unique_ptr<Lease>> leases;
    const bool rows = row_leases(dsn, o.store_options);
    auto held_by = [&](const std::string& k) {
      return Error(Errc::busy, "job " + decl.name + " cannot start: the lease '" + k + "' is held by " +
                                   describe_holder(st, k, host_name()) + "; nothing was done");
    };
    if (decl.lock == LockKind::exclusive && !o.dry_run) {
      keys.push_back(o.lease_key.value_or(decl.name));
      for (auto& c : decl.conflicts) keys.push_back(c);
      for (auto& k : keys) {
        if (rows) continue;  // the job_lock rows below are the claim
        auto l = try_lease(dsn, o.store_options, k);
        if (!l) throw held_by(k);
        leases.push_back(std::move(l));
      }
    }

    JobRun run(decl, st, clock, o);
    const Millis started = clock.now_ms();
    const std::string host = host_name();
    const int64_t pid = int64_t(::getpid());
    const std::string holder = o.operator_name.empty() ? host : o.operator_name + "@" + host;
    std::string taken;  // row leases: the key another run holds ("" = all taken)
    if (!o.dry_run) {
      run.run_id_ = transact(st, store::TxMode::write, [&](store::Tx& tx) {
        taken.clear();
        int64_t id = tx.query("INSERT INTO job_run (job, holder, state, started_at, host, pid) "
                              "VALUES ($1, $2, 'running', $3, $4, $5) RETURNING id",
                              {decl.name, holder, started, host, pid})[0]
                         .i64(0);
        std::vector<int64_t> gone;  // the runs whose lease this run takes over
        for (auto& k : keys) {
          auto prior = tx.query("SELECT run_id FROM job_lock WHERE name = $1 AND run_id IS NOT NULL", {k});
          // the claim is held (advisory lock, lock file): a row left by a run that died goes. Row
          // leases: the row is the claim, taken only when it has expired.
          // Row leases expire by the database's clock (lease.hpp), whatever this host's says.
          if (rows) {
            if (!clear_row_lease(tx, k)) {
              taken = k;
              tx.rollback_only();
              return int64_t(0);
            }
          } else {
            tx.exec("DELETE FROM job_lock WHERE name = $1", {k});
          }
          if (!prior.empty()) gone.push_back(prior[0].i64(0));
          const std::string expires = rows ? std::string(kDbNowMs) + " + $4" : "$4";
          const int64_t span = rows ? o.lease_ttl_ms : started + o.max_runtime_ms.value_or(24LL * 3600 * 1000);
          if (tx.exec("INSERT INTO job_lock (name, holder, acquired_at, expires_at, job, host, pid, run_id) "
                      "VALUES ($1, $2, $3, " + expires + ", $5, $6, $7, $8) ON CONFLICT (name) DO NOTHING",
                      {k, holder, started, span, decl.name, host, pid, id}) == 0) {
            taken = k;
            tx.rollback_only();  // nothing is written: not even this run's job_run row
            return int64_t(0);
          }
        }
        if (int64_t n = mark_abandoned(tx, gone, decl.name, holder + " (run " + std::to_string(id) + ")", started))
          spdlog::warn("job {}: {} earlier run(s) recorded running were gone: marked abandoned", decl.name, n);
        return id;
      });
      if (!taken.empty()) throw held_by(taken);
    }
    rep.run_id = run.run_id_;
    // The fence: from here on every write transaction of the run proves it still holds its lease.
    // Row leases beat on a connection of their own as well, between (and during long) transactions.
    std::unique_ptr<Heartbeat> beat;
    if (!keys.empty() && !o.dry_run) {
      st.set_fence(lease_fence(run.run_id_, keys, rows ? o.lease_ttl_ms : 0));
      if (rows) beat = std::make_unique<Heartbeat>(dsn, o.store_options, run.run_id_, o.lease_ttl_ms);
    }

    // 2. the work
    std::optional<Error> failure;
    try {
      fn(run);
    } catch (const Error& e) {
      if (e.kind() == Errc::interrupted) run.stopped_ = "signal";
      else failure = e;
    } catch (const std::exception& e) {
      failure = Error(Errc::internal, e.what());
    }
    if (!failure && run.stopped_.empty() && interrupted()) run.stopped_ = "signal";
    rep.counts = run.counts_;
    rep.stopped = run.stopped_;
    rep.seconds = since(run.t0_);
    if (failure) {
      rep.state = "failed";
      rep.error = failure->what();
      rep.exit = exit_code(failure->kind());
    } else if (run.stopped_ == "signal") {
      rep.state = "interrupted";
      rep.exit = Exit::interrupted;
    } else {
      rep.state = o.dry_run ? "dry_run" : "done";
      rep.exit = run.exit_;
    }

    // 3. the record, then the lease goes (with `leases`). A signal no longer cancels statements: a
    // cancel request sent for the work's last statement and arriving late would cancel the record
    // and leave the run 'running' with its lease rows behind.
    store::SignalsSpare spare(st);
    st.set_fence(nullptr);  // (the record is written even when the lease was lost)
    beat.reset();
    if (!o.dry_run) {
      try {
        st.transact(store::TxMode::write, [&](store::Tx& tx) {
          tx.exec("UPDATE job_run SET state = $2, counts = $3, error = $4, finished_at = $5, exit_code = $6, "
                  "stopped = $7 WHERE id = $1",
                  {rep.run_id, rep.state, nlohmann::json(rep.counts).dump(), rep.error.empty() ? store::kNull : store::Value(rep.error.substr(0, 2000)),
                   clock.now_ms(), int64_t(exit_int(rep.exit)), rep.stopped.empty() ? store::kNull : store::Value(rep.stopped)});
          for (auto& k : keys) tx.exec("DELETE FROM job_lock WHERE name = $1 AND run_id = $2", {k, rep.run_id});
        });
      } catch (const Error& e) {
        spdlog::warn("job {} run {}: its end could not be recorded: {}", decl.name, rep.run_id, e.what());
        if (!failure) failure = e, rep.state = "failed", rep.error = e.what(), rep.exit = exit_code(e.kind());
      }
    }
    std::string counts;
    for (auto& [k, v] : rep.counts) counts += " " + k + "=" + std::to_string(v);
    auto level = rep.state == "failed" ? spdlog::level::err : spdlog::level::info;
    spdlog::log(level, "job {} run={} state={}{}{}{} seconds={:.3f}{}", decl.name, rep.run_id, rep.state,
                o.dry_run ? " dry_run=1" : "", counts, rep.stopped.empty() ? "" : " stopped=" + rep.stopped,
                rep.seconds, rep.error.empty() ? "" : " error=\"" + rep.error + "\"");
    if (!o.metrics_textfile.empty() && !o.dry_run) {
      try {
        write_metrics(o.metrics_textfile, rep, clock.now_ms());
      } catch (const Error& e) {
        spdlog::warn("job {}: metrics not written: {}", decl.name, e.what());
      }
    }
    if (failure) throw *failure;
    return rep;
  }
};

JobReport run_job(const JobDecl& decl, const JobFn& fn, store::Store& st, const store::Dsn& dsn, const Clock& clock,
                  const RunOptions& o) {
  return Runner::run(decl, fn, st, dsn, clock, o);
}

int64_t parse_duration_ms(const std::string& s, const std::string& flag) {
  auto bad = [&]() -> Error {
    return Error(Errc::usage, flag + " must be a duration such as 90s, 10m, 1h30m or 500ms, not '" + s + "'");
  };
  if (s.empty()) throw bad();
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j == i || j - i > 12) throw bad();
    int64_t n = std::stoll(s.substr(i, j - i));
    size_t k = j;
    while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
    std::string unit = s.substr(j, k - j);
    int64_t mul = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : unit == "h" ? 3'600'000
                                                                                : unit == "d" ? 86'400'000 : 0;
    if (mul == 0) throw bad();
    total += n * mul;
    i = k;
  }
  if (total <= 0) throw bad();
  return total;
}

}  // namespace rc::jobs

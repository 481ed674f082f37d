// apply: the kubectl-apply habit for CI seeding. The same step can run on every pipeline run:
// absent -> create, same definition hash -> nothing, not yet live -> update, live -> refuse. A
// running activity's rules are what users were promised; they are never changed behind them.
#include "core/activity/activity.hpp"
#include "core/activity/versions.hpp"
#include "util/hash.hpp"

namespace rc::activity {

ApplyResult apply(store::Store& st, const Definition& d, const std::string& text, const CreateOptions& opts,
                  const Actor& who, Millis now) {
  ApplyResult res;
  const std::string hash = sha256_hex(text);
  for (int attempt = 0;; ++attempt) {
    std::optional<ActivityRow> row;
    st.transact(store::TxMode::read, [&](store::Tx& tx) { row = find(tx, d.code); });
    if (!row) {
      try {
        res.result = create(st, d, text, opts, who, now);
        res.action = "created";
        return res;
      } catch (const Error& e) {
        // a concurrent apply created it first: compare with what it stored
        if (attempt > 0 || e.kind() != Errc::conflict) throw;
        continue;
      }
    }
    res.previous_hash = row->definition_hash;
    res.result.id = row->id;
    res.result.code = d.code;
    res.result.hash = hash;
    res.result.state = name(row->state);
    res.result.dry_run = who.dry_run;
    if (row->definition_hash == hash) {
      res.action = "unchanged";
      res.result.log.push_back("activity '" + d.code + "' is " + res.result.state + " with the same definition (sha256 " +
                               hash + "): unchanged");
      return res;
    }
    if (is_running(row->state) || row->state == ActivityState::ended || row->state == ActivityState::offline)
      throw Error(Errc::conflict, "activity '" + d.code + "' is " + res.result.state + " with definition sha256 " +
                                      row->definition_hash + "; the file has sha256 " + hash +
                                      ": apply never changes the definition of an activity that has been published "
                                      "(a running one takes a reviewed new version: activity update -f FILE)");
    res.result = update(st, d, text, who, now);
    res.action = "updated";
    return res;
  }
}

}  // namespace rc::activity

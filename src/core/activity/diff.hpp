#pragma once
// activity diff: what changes between two definition versions of an activity, field by field:
// header and window, limits, budget, items, prizes (added, removed, weight, amount, stock, limits),
// the lottery's consolation and guarantees, fuse rules, listed users. Notes say what a switch does
// with a figure the file cannot change on a running activity (stock and budget carry over).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/activity/definition.hpp"
#include "core/store/store.hpp"

namespace rc::activity {

struct DiffEntry {
  std::string section;  // activity, limit, budget, item, prize, lottery, fuse, gray, blacklist
  std::string key;      // the item, prize or rule code ("" for the activity)
  std::string change;   // added, removed, changed
  std::string field;    // for changed: the field
  std::string from, to; // values as text ("" when absent)
  std::string note;     // what the switch does with it, when that is not simply "to"
};

struct VersionSide {
  int64_t version = 0;
  std::string state, hash;
};

struct VersionDiff {
  std::string code;
  VersionSide from, to;
  std::vector<DiffEntry> changes;
};

// The changes from definition `a` to definition `b`.
std::vector<DiffEntry> diff_definitions(const Definition& a, const Definition& b);

// Versions `from` -> `to` of activity `code`. Defaults: to = the version in review; from = the
// running version, or (when `to` is not above it) the latest version before `to`.
// Error(not_found) for an unknown activity or version, or no version in review when `to` is not
// given; Error(usage) when from > to.
VersionDiff diff_versions(store::Store& st, const std::string& code, std::optional<int64_t> from,
                          std::optional<int64_t> to);

}  // namespace rc::activity

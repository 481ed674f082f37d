// activity diff (contract in diff.hpp).
#include "core/activity/diff.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/activity/activity.hpp"
#include "core/activity/versions.hpp"
#include "base/error.hpp"

namespace rc::activity {

namespace {

std::string num(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; }
std::string limit_text(const std::optional<LimitSpec>& l) {
  return l ? std::to_string(l->count) + "/" + period_name(l->period) : "";
}

// Appends one `changed` entry per field whose text differs.
struct Fields {
  std::vector<DiffEntry>& out;
  std::string section, key;
  void operator()(const std::string& field, const std::string& a, const std::string& b, const std::string& note = "") {
    if (a != b) out.push_back({section, key, "changed", field, a, b, note});
  }
};

// Entries keyed by code in both lists: added, removed, and changed through `fields`.
template <class T, class Describe, class Compare>
void by_code(std::vector<DiffEntry>& out, const std::string& section, const std::vector<T>& a, const std::vector<T>& b,
             std::function<std::string(const T&)> code, Describe describe, Compare compare, const std::string& removed_note) {
  std::map<std::string, const T*> am, bm;
  for (auto& x : a) am[code(x)] = &x;
  for (auto& x : b) bm[code(x)] = &x;
  for (auto& [k, x] : am)
    if (!bm.count(k)) out.push_back({section, k, "removed", "", describe(*x), "", removed_note});
  for (auto& x : b) {
    auto it = am.find(code(x));
    if (it == am.end()) out.push_back({section, code(x), "added", "", "", describe(x), ""});
    else compare(Fields{out, section, code(x)}, *it->second, x);
  }
}

void users(std::vector<DiffEntry>& out, const std::string& list, const std::vector<std::string>& a,
           const std::vector<std::string>& b) {
  std::set<std::string> as(a.begin(), a.end()), bs(b.begin(), b.end());
  for (auto& u : bs)
    if (!as.count(u)) out.push_back({list, u, "added", "", "", u, ""});
  for (auto& u : as)
    if (!bs.count(u))
      out.push_back({list, u, "removed", "", u, "", "a switch never removes a listed user: activity " + list + " remove does"});
}

}  // namespace

std::vector<DiffEntry> diff_definitions(const Definition& a, const Definition& b) {
  std::vector<DiffEntry> out;
  Fields act{out, "activity", ""};
  act("name", a.name, b.name);
  act("kind", kind_name(a.kind), kind_name(b.kind));
  act("timezone", a.timezone, b.timezone);
  act("start", format_utc(a.start_at), format_utc(b.start_at));
  act("end", format_utc(a.end_at), format_utc(b.end_at));
  act("whitelist_required", a.whitelist_required ? "true" : "false", b.whitelist_required ? "true" : "false");
  Fields{out, "limit", ""}("per_user", limit_text(a.limit), limit_text(b.limit));
  Fields{out, "budget", ""}("budget_cents", num(a.budget_cents), num(b.budget_cents),
                            a.budget_cents ? "the running budget carries over: activity budget changes it"
                                           : "the budget starts with what grants already hold");

  by_code<ItemDef>(
      out, "item", a.items, b.items, [](const ItemDef& i) { return i.code; },
      [](const ItemDef& i) { return i.kind + ", " + std::to_string(i.unit_cost_cents) + " cents, channel " + i.channel; },
      [](Fields f, const ItemDef& x, const ItemDef& y) {
        f("kind", x.kind, y.kind);
        f("unit_cost_cents", std::to_string(x.unit_cost_cents), std::to_string(y.unit_cost_cents));
        f("channel", x.channel, y.channel);
        f("max_amount", num(x.max_amount), num(y.max_amount));
      },
      "kept for the prizes and grants that name it");
  by_code<PrizeDef>(
      out, "prize", a.prizes, b.prizes, [](const PrizeDef& p) { return p.code; },
      [](const PrizeDef& p) {
        return "item " + p.item + ", amount " + std::to_string(p.amount) + (p.amount_max ? ".." + num(p.amount_max) : "") +
               ", stock " + std::to_string(p.stock) + ", weight " + std::to_string(p.weight);
      },
      [](Fields f, const PrizeDef& x, const PrizeDef& y) {
        f("item", x.item, y.item);
        f("amount", std::to_string(x.amount), std::to_string(y.amount));
        f("amount_max", num(x.amount_max), num(y.amount_max));
        f("weight", std::to_string(x.weight), std::to_string(y.weight));
        f("stock", std::to_string(x.stock), std::to_string(y.stock),
          "the running stock carries over: activity stock changes it");
        f("stock_buckets", std::to_string(x.stock_buckets), std::to_string(y.stock_buckets),
          "the running buckets carry over");
        f("limit", limit_text(x.limit), limit_text(y.limit));
        f("validity_days", num(x.validity_days), num(y.validity_days));
      },
      "retired: no longer drawn; its stock stays accounted");
  Fields lot{out, "lottery", ""};
  lot("consolation", a.consolation.value_or(""), b.consolation.value_or(""));
  auto guarantees = [](const Definition& d) {
    std::string s;
    for (auto& g : d.guarantees) s += (s.empty() ? "" : ", ") + std::to_string(g.nth) + ":" + g.prize;
    return s;
  };
  lot("guarantees", guarantees(a), guarantees(b));
  by_code<FuseDef>(
      out, "fuse", a.fuses, b.fuses, [](const FuseDef& f) { return f.name; },
      [](const FuseDef& f) {
        return (f.prize ? "prize " + *f.prize : std::string("activity")) + ", window " +
               std::to_string(f.window_seconds) + " s";
      },
      [](Fields f, const FuseDef& x, const FuseDef& y) {
        f("prize", x.prize.value_or(""), y.prize.value_or(""));
        f("window_seconds", std::to_string(x.window_seconds), std::to_string(y.window_seconds));
        f("max_count", num(x.max_count), num(y.max_count));
        f("max_amount_cents", num(x.max_amount_cents), num(y.max_amount_cents));
        f("pop_percent", num(x.pop_percent), num(y.pop_percent));
        f("dod_percent", num(x.dod_percent), num(y.dod_percent));
        f("min_count", std::to_string(x.min_count), std::to_string(y.min_count));
      },
      "disabled");
  users(out, "gray", a.gray_users, b.gray_users);
  users(out, "blacklist", a.blacklist, b.blacklist);
  return out;
}

VersionDiff diff_versions(store::Store& st, const std::string& code, std::optional<int64_t> from,
                          std::optional<int64_t> to) {
  VersionDiff d;
  d.code = code;
  std::optional<VersionRow> va, vb;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    auto a = get(tx, code);
    auto all = versions_of(tx, a.id);
    auto known = [&](int64_t v) {
      auto it = std::find_if(all.begin(), all.end(), [&](const VersionRow& r) { return r.version == v; });
      if (it == all.end())
        throw Error(Errc::not_found, "activity '" + code + "' has no version " + std::to_string(v) +
                                         " (activity history " + code + " lists its versions)");
      return *it;
    };
    if (to) {
      vb = known(*to);
    } else {
      vb = open_version(tx, a.id);
      if (!vb)
        throw Error(Errc::not_found, "no new version of '" + code + "' is in review: give --to N (activity history " +
                                         code + " lists its versions)");
    }
    if (from) {
      va = known(*from);
    } else if (a.version < vb->version) {
      va = known(a.version);
    } else {
      for (auto& r : all)
        if (r.version < vb->version) va = r;
      if (!va) va = vb;  // the first version: nothing before it
    }
  });
  if (va->version > vb->version)
    throw Error(Errc::usage, "--from " + std::to_string(va->version) + " is after --to " + std::to_string(vb->version) +
                                 ": give the older version as --from");
  d.from = {va->version, name(va->state), va->definition_hash};
  d.to = {vb->version, name(vb->state), vb->definition_hash};
  auto pa = parse_definition(va->definition, code + " version " + std::to_string(va->version));
  auto pb = parse_definition(vb->definition, code + " version " + std::to_string(vb->version));
  if (!pa.def || !pb.def) throw Error(Errc::internal, "a stored version of '" + code + "' no longer parses");
  d.changes = diff_definitions(*pa.def, *pb.def);
  return d;
}

}  // namespace rc::activity

#pragma once
// The reader of definition files (parse_definition's half that knows TOML): each field read with
// its type, range and text rules checked, every problem a Finding with the field's path and the
// line and column toml++ recorded, and an unknown key told where it belongs. Internal to
// definition.cpp and definition_reader.cpp.
#include <toml++/toml.h>

#include <optional>
#include <string>
#include <vector>

#include "core/activity/definition.hpp"

namespace rc::activity::reader {

// The keys each table of the file may hold (definition.md of the man page, ACTIVITY DEFINITION FILE).
extern const std::vector<std::string> kTopKeys, kLimitKeys, kUsersKeys, kItemKeys, kPrizeKeys, kBudgetKeys,
    kLotteryKeys, kGuaranteeKeys, kFuseKeys;
// The item kinds.
extern const std::vector<std::string> kItemKinds;

// "prizes[0]" + "code" -> "prizes[0].code" (a top-level key has no prefix).
std::string join(const std::string& prefix, const std::string& key);
// "prizes", 2 -> "prizes[2]".
std::string index(const std::string& prefix, size_t i);
// "a string", "an integer", ... for "must be X, not Y" messages.
const char* type_desc(const toml::node& n);
// A message on one line: newlines and carriage returns become spaces.
std::string one_line(std::string s);

// How an integer field is checked.
enum class Num {
  amount,    // cents/units/stock/budget: >= 0, a float is the "not floats" mistake
  weight,    // lottery weight: >= 0 here (lint wants > 0), integers only
  positive,  // counts, days, seconds, caps: >= 1
  any,       // checked by lint (guarantee nth)
};

// Reads fields and collects the findings; a read that fails returns nothing (or the type's empty
// value) after adding its finding, so that parsing goes on and reports every problem in one pass.
class Parser {
 public:
  std::vector<Finding> findings;
  void add(const std::string& code, const std::string& path, const std::string& msg, const toml::source_region& r);
  // Every key of t must be in `known`; `where` names the table in messages ("[[prizes]]").
  void keys(const toml::table& t, const std::string& path, const std::vector<std::string>& known,
            const std::string& where);
  // A missing key is reported at its table's header; a missing top-level key has no line (0).
  void missing(const toml::node& parent, const std::string& path, const std::string& what);
  std::optional<std::string> str(const toml::table& t, const char* key, const std::string& path, bool required,
                                 const std::string& what = "");
  // Text fields end up in terminals, tables and logs: a C0 control character (an ANSI escape, a
  // newline, a tab) or DEL there could repaint a screen or forge a line, so it is refused.
  bool no_control_chars(const std::string& v, const std::string& path, const toml::source_region& where);
  std::optional<bool> boolean(const toml::table& t, const char* key, const std::string& path);
  std::optional<int64_t> integer(const toml::table& t, const char* key, const std::string& path, bool required,
                                 Num kind, const std::string& what = "");
  // A ratio of the budget ([budget] warn_at ...): a number above 0 and at most 1, kept in millionths.
  // An integer is accepted (stop_at = 1); nan, inf and anything out of range are refused here.
  std::optional<int64_t> ratio(const toml::table& t, const char* key, const std::string& path);
  // A code field: [a-z0-9_-]{1,64}.
  std::string code(const toml::table& t, const char* key, const std::string& path, const std::string& what);
  void bad_code(const std::string& path, const std::string& s, const std::string& what, const toml::source_region& r);
  const toml::table* table(const toml::table& t, const char* key, const std::string& path, const std::string& how);
  // An array of tables ([[prizes]]); each element is passed to fn(table, path).
  template <class Fn>
  bool each_table(const toml::table& t, const char* key, const std::string& path, const std::string& how, Fn fn) {
    const toml::node* n = t.get(key);
    if (!n) return false;
    const toml::array* a = n->as_array();
    if (!a) {
      add("wrong_type", path, "'" + path + "' must be an array of tables (" + how + "), not " + type_desc(*n),
          n->source());
      return true;
    }
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& el = *a->get(i);
      if (!el.is_table()) {
        add("wrong_type", index(path, i), "'" + index(path, i) + "' must be a table (" + how + "), not " + type_desc(el),
            el.source());
        continue;
      }
      fn(*el.as_table(), index(path, i));
    }
    return true;
  }
  std::optional<LimitSpec> limit(const toml::table& parent, const std::string& path);
  std::vector<std::string> users(const toml::table& parent, const char* key);
  // start/end: a TOML offset date-time or an RFC 3339 string with an offset. A time without an offset
  // is ambiguous (whose midnight?), so it is refused with the offset the activity's zone would give.
  std::optional<Millis> time(const toml::table& t, const char* key, const std::string& zone);
  static std::string no_offset_message(const std::string& path, const std::string& local, const std::string& zone);
};

}  // namespace rc::activity::reader

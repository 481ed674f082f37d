#pragma once
// Results go to stdout: an aligned table for people, or one JSON object per line ("v":1) for
// scripts. Logs, progress and prompts go to stderr.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rc::cli {

using json = nlohmann::json;

struct Column {
  std::string key;     // field of each row object
  std::string header;  // table heading
};

class Output {
 public:
  explicit Output(bool json_mode = false) : json_(json_mode) {}
  bool json_mode() const { return json_; }
  void set_json(bool j) { json_ = j; }

  // One result object. table: "key  value" lines; json: the object with "v":1 on one line.
  void record(const json& obj);
  // Rows of one kind. table: a table with the given columns; json: one object per row, each with "v":1
  // and `kind` as "type" when not empty.
  void rows(const std::vector<Column>& cols, const std::vector<json>& rows, const std::string& kind = "");
  // Free text for people (table mode only).
  void text(const std::string& s);

 private:
  bool json_;
};

// A json value as table text: strings bare, null empty, others dumped; always printable().
std::string cell_text(const json& v);
// Text safe to put on a terminal: control characters (C0, DEL, C1), line separators and bidi
// overrides become visible escapes (\n, \x1b, \u009b), bytes that are not UTF-8 become \xNN. A
// name holding an ANSI escape or a newline can then neither repaint the screen nor forge a row.
std::string printable(const std::string& s);
// Columns UTF-8 text takes on a terminal, from the C library's wcwidth (needs a UTF-8 LC_CTYPE):
// combining marks count 0, East Asian wide characters 2.
size_t display_width(const std::string& s);
std::string dump_json(const json& j);

}  // namespace rc::cli

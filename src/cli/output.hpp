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

// A json value as table text: strings bare, null empty, others dumped.
std::string cell_text(const json& v);
// Display width of UTF-8 text (East Asian wide characters count 2).
size_t display_width(const std::string& s);
std::string dump_json(const json& j);

}  // namespace rc::cli

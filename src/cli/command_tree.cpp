#include "cli/command_tree.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "base/error.hpp"
#include "util/text_distance.hpp"

namespace rc::cli {
namespace {

std::vector<CLI::App*> named_children(const CLI::App& app) {
  std::vector<CLI::App*> out;
  for (auto* s : const_cast<CLI::App&>(app).get_subcommands([](CLI::App* a) { return !a->get_name().empty(); }))
    out.push_back(s);
  return out;
}

// The options of an app, including those of its nameless option groups ("Global options").
std::vector<const CLI::Option*> all_options(const CLI::App& app) {
  auto opts = app.get_options();
  for (auto* g : const_cast<CLI::App&>(app).get_subcommands([](CLI::App* a) { return a->get_name().empty(); })) {
    auto more = all_options(*g);
    opts.insert(opts.end(), more.begin(), more.end());
  }
  return opts;
}

const CLI::Option* find_option(CLI::App* app, const std::string& name) {
  for (; app; app = app->get_parent())
    if (auto* o = app->get_option_no_throw(name)) return o;
  return nullptr;
}

void walk(const CLI::App& app, std::vector<std::string> path, std::vector<CommandNode>& out) {
  CommandNode n;
  n.path = path;
  n.summary = app.get_description();
  for (auto* o : all_options(app)) {
    if (o->get_positional() && !o->nonpositional()) {
      n.positionals.push_back(o->get_name(true));
      continue;
    }
    auto& dst = o->get_expected_max() == 0 ? n.flags : n.valued;
    for (auto& l : o->get_lnames()) dst.push_back("--" + l);
    for (auto& s : o->get_snames()) dst.push_back("-" + s);
  }
  auto kids = named_children(app);
  for (auto* k : kids) n.children.push_back(k->get_name());
  out.push_back(n);
  for (auto* k : kids) {
    auto p = path;
    p.push_back(k->get_name());
    walk(*k, p, out);
  }
}

std::string pad_column(const std::string& s, size_t w) { return s.size() >= w ? s + "  " : s + std::string(w - s.size(), ' '); }

}  // namespace

std::vector<CommandNode> command_nodes(const CLI::App& app) {
  std::vector<CommandNode> out;
  walk(app, {}, out);
  return out;
}

std::string short_usage(const CLI::App& app) {
  std::string s = "usage: " + app.get_name() + " [OPTIONS] COMMAND ...\n\nCommands:\n";
  for (auto* k : named_children(app)) s += "  " + pad_column(k->get_name(), 24) + k->get_description() + "\n";
  s += "\nRun '" + app.get_name() + " COMMAND --help' for a command, '" + app.get_name() +
       " --help' for the global options,\n'" + app.get_name() + " help exit-codes' for exit codes, 'man " +
       app.get_name() + "' for the manual.\n";
  return s;
}

void check_command_words(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path;  // the command words matched so far
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      if (a == "-h" || a == "--help" || a == "--help-all" || a == "-V" || a == "--version") return;
      std::string name = a.rfind("--", 0) == 0 ? a.substr(0, a.find('=')) : a.substr(0, 2);
      bool inline_value = a.rfind("--", 0) == 0 ? a.find('=') != std::string::npos : a.size() > 2;
      auto* o = find_option(cur, name);
      if (o && o->get_expected_max() > 0 && !inline_value) ++i;  // its value is the next word
      continue;
    }
    auto kids = named_children(*cur);
    if (kids.empty()) return;  // a leaf command: the rest are its arguments
    auto hit = std::find_if(kids.begin(), kids.end(), [&](CLI::App* k) { return k->check_name(a); });
    if (hit != kids.end()) {
      cur = *hit;
      path += (path.empty() ? "" : " ") + a;
      continue;
    }
    std::vector<std::string> names;
    for (auto* k : kids) names.push_back(k->get_name());
    std::string guess = util::did_you_mean(a, names);
    std::string prefix = path.empty() ? "" : path + " ";
    throw Error(Errc::usage, "unknown command '" + prefix + a + "'" +
                                 (guess.empty() ? "" : " (did you mean '" + prefix + guess + "'?)") + ": see " +
                                 app.get_name() + " " + prefix + "--help");
  }
  if (cur != &app && cur->get_require_subcommand_min() > 0) {
    std::string names;
    for (auto* k : named_children(*cur)) names += (names.empty() ? "" : ", ") + k->get_name();
    throw Error(Errc::usage, "'" + path + "' needs a command: " + names + " (see " + app.get_name() + " " + path +
                                 " --help)");
  }
}

void show_global_options_everywhere(CLI::App& app) {
  std::string text = "Global options (before or after the command):\n";
  for (auto* o : all_options(app)) {
    if (o == app.get_help_ptr() || o->get_positional()) continue;
    std::string name = o->get_name(false, true);
    if (o->get_expected_max() > 0) name += " " + (o->get_option_text().empty() ? o->get_type_name() : o->get_option_text());
    if (o->get_lnames().size() && o->get_lnames()[0] == "help") continue;
    text += "  " + pad_column(name, 30) + o->get_description() + "\n";
  }
  std::vector<CLI::App*> todo = named_children(app);
  while (!todo.empty()) {
    auto* a = todo.back();
    todo.pop_back();
    a->footer(text);
    auto k = named_children(*a);
    todo.insert(todo.end(), k.begin(), k.end());
  }
}

}  // namespace rc::cli

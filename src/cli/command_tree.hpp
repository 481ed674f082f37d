#pragma once
// The command tree as data for people and shells: the short usage printed when no command is
// given, the unknown-command check with its "did you mean", the global options shown under every
// command's --help, and the walk that the completion scripts are generated from (so they cannot
// drift from what the parser accepts).
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace rc::cli {

// One command of the tree (a group such as "activity" or a leaf such as "activity show").
struct CommandNode {
  std::vector<std::string> path;      // {"activity", "show"}; empty for the program itself
  std::string summary;
  std::vector<std::string> children;  // subcommand names
  std::vector<std::string> flags;     // long and short option names taking no value
  std::vector<std::string> valued;    // long and short option names taking a value
  std::vector<std::string> positionals;  // CODE, ACTIVITY, FILE, USER, ...
};

// Every command, parents before children, global options on the root node.
std::vector<CommandNode> command_nodes(const CLI::App& app);

// "usage: rewardctl [OPTIONS] COMMAND ..." and the command groups with their summaries.
std::string short_usage(const CLI::App& app);

// Looks at the command words of argv before CLI11 does: a word that is not a command where one is
// expected throws Error(usage) "unknown command 'activty' (did you mean 'activity'?)". A group given
// without its subcommand throws Error(usage) naming the group's commands.
void check_command_words(CLI::App& app, int argc, char** argv);

// Adds the global options (the option group of `app`) to the --help of every subcommand.
void show_global_options_everywhere(CLI::App& app);

}  // namespace rc::cli

// The config file as cron sees it (issue 13, point 9): a relative sqlite: path is relative to the
// file, every section refuses unknown keys with file:line:column, and a password in the DSN is
// found by libpq's own parser.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include "support/harness.hpp"

namespace {

bool exists(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0;
}

rt::Run with_config(const std::string& dir, const std::string& toml, std::vector<std::string> args,
                    const std::string& cwd) {
  std::string cfg = rt::write_file(dir, "rewardctl.toml", toml);
  args.insert(args.begin(), {"--config", cfg});
  return rt::run(args, {}, "", cwd);
}

}  // namespace

TEST_CASE("config: a relative sqlite: path resolves against the config file's directory") {
  std::string etc = rt::make_temp_dir(), cwd = rt::make_temp_dir();
  auto r = with_config(etc, "[db]\nurl = \"sqlite:data/r.db\"\n", {"db", "migrate", "-o", "json"}, cwd);
  // the directory data/ does not exist next to the config yet: the error names the resolved path
  CHECK(r.rc == 69);
  CHECK(r.err.find(etc + "/data") != std::string::npos);
  REQUIRE(mkdir((etc + "/data").c_str(), 0755) == 0);
  r = with_config(etc, "[db]\nurl = \"sqlite:data/r.db\"\n", {"db", "migrate", "-o", "json"}, cwd);
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(exists(etc + "/data/r.db"));
  CHECK_FALSE(exists(cwd + "/data"));
  // an absolute path, and --db on the command line, are taken as given (relative to the working directory)
  r = rt::run({"--config", etc + "/rewardctl.toml", "--db", "sqlite:here.db", "db", "migrate"}, {}, "", cwd);
  CHECK(r.rc == 0);
  CHECK(exists(cwd + "/here.db"));
  std::string rm = "rm -rf '" + etc + "' '" + cwd + "'";
  (void)!system(rm.c_str());
}

TEST_CASE("config: unknown keys are refused in every section, with file:line:column") {
  std::string dir = rt::make_temp_dir();
  for (auto [toml, key] : std::vector<std::pair<std::string, std::string>>{
           {"[jobs]\npaused = false\nsurprise = 1\n", "jobs.surprise"},
           {"[import]\nbatch = 10\n", "import.batch"},
           {"[log]\nlevel = \"info\"\nfromat = \"json\"\n", "log.fromat"},
           {"[output]\ncolour = \"never\"\n", "output.colour"},
           {"[dbs]\nurl = \"x\"\n", "dbs"},
       }) {
    auto r = with_config(dir, toml, {"help", "exit-codes"}, dir);
    CAPTURE(toml);
    CHECK(r.rc == 78);
    CHECK(r.err.find("unknown setting '" + key + "'") != std::string::npos);
    CHECK(r.err.find("rewardctl.toml:") != std::string::npos);
  }
  auto ok = with_config(dir, "[jobs]\npaused = false\nstop_file = \"/run/stop\"\n[log]\nformat = \"json\"\n"
                             "[output]\ncolor = \"never\"\n",
                        {"help", "exit-codes"}, dir);
  CHECK(ok.rc == 0);
  auto line = with_config(dir, "[review]\nrequired = true\n\n[jobs]\nnope = 1\n", {"help", "exit-codes"}, dir);
  CHECK(line.err.find("rewardctl.toml:5:1: unknown setting 'jobs.nope'") != std::string::npos);
  std::string rm = "rm -rf '" + dir + "'";
  (void)!system(rm.c_str());
}

TEST_CASE("config: a password in db.url is found by libpq's parser, however it is written") {
  std::string dir = rt::make_temp_dir();
  for (auto url : {"host=h dbname=d password=x", "host=h dbname=d password = x", "host=h password  =  'a b'",
                   "postgresql://u:secret@h/d", "postgresql://u@h/d?password=x"}) {
    CAPTURE(url);
    auto r = with_config(dir, std::string("[db]\nurl = \"") + url + "\"\n", {"help", "exit-codes"}, dir);
    CHECK(r.rc == 78);
    CHECK(r.err.find("db.url holds a password") != std::string::npos);
  }
  for (auto url : {"host=h dbname=d", "postgresql://u@h/d", "host=h dbname=passwordless",
                   "postgresql://h/d?application_name=password"}) {
    CAPTURE(url);
    auto r = with_config(dir, std::string("[db]\nurl = \"") + url + "\"\n", {"help", "exit-codes"}, dir);
    CHECK(r.rc == 0);
  }
  std::string rm = "rm -rf '" + dir + "'";
  (void)!system(rm.c_str());
}

// config.cpp: layering flags > environment > file > defaults, and its error messages.
#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "core/config.hpp"
#include "base/error.hpp"

using namespace rc;

namespace {
struct Env {
  std::map<std::string, std::string> vars;
  GetEnv fn() {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string temp_file(const std::string& content) {
  char p[] = "/tmp/rccfgXXXXXX";
  int fd = mkstemp(p);
  close(fd);
  std::ofstream(p) << content;
  return p;
}
}  // namespace

TEST_CASE("settings: precedence is flags > environment > file > defaults") {
  std::string path = temp_file("[db]\nurl = \"sqlite:file.db\"\n[output]\nformat = \"json\"\n[log]\nlevel = \"warn\"\n");
  Env env;
  Overrides flags;

  SUBCASE("defaults without a file") {
    flags.config.reset();
    env.vars["USER"] = "alice";
    char dir[] = "/tmp/rcemptyXXXXXX";
    REQUIRE(mkdtemp(dir));
    char old[4096];
    REQUIRE(getcwd(old, sizeof old));
    REQUIRE(chdir(dir) == 0);
    auto s = load_settings(flags, env.fn());
    REQUIRE(chdir(old) == 0);
    CHECK(s.db_url == "sqlite:rewardctl.db");
    CHECK(s.db_url_source == "default");
    CHECK(s.output == "table");
    CHECK(s.log_level == "info");
    CHECK(s.operator_name == "alice");
    CHECK(s.review_required);
  }
  SUBCASE("file over defaults") {
    flags.config = path;
    auto s = load_settings(flags, env.fn());
    CHECK(s.db_url == "sqlite:/tmp/file.db");  // relative to the config file's directory
    CHECK(s.output == "json");
    CHECK(s.log_level == "warn");
    CHECK(s.db_url_source.find(path + ":2:") == 0);
  }
  SUBCASE("environment over file") {
    flags.config = path;
    env.vars["REWARDCTL_DB"] = "sqlite:env.db";
    env.vars["REWARDCTL_OUTPUT"] = "table";
    auto s = load_settings(flags, env.fn());
    CHECK(s.db_url == "sqlite:env.db");
    CHECK(s.db_url_source == "REWARDCTL_DB");
    CHECK(s.output == "table");
    CHECK(s.log_level == "warn");
  }
  SUBCASE("flags over environment") {
    flags.config = path;
    env.vars["REWARDCTL_DB"] = "sqlite:env.db";
    env.vars["REWARDCTL_OPERATOR"] = "envop";
    flags.db = "sqlite:flag.db";
    flags.operator_name = "flagop";
    auto s = load_settings(flags, env.fn());
    CHECK(s.db_url == "sqlite:flag.db");
    CHECK(s.db_url_source == "--db");
    CHECK(s.operator_name == "flagop");
  }
  SUBCASE("REWARDCTL_CONFIG names the file") {
    env.vars["REWARDCTL_CONFIG"] = path;
    auto s = load_settings(flags, env.fn());
    CHECK(s.config_path == path);
    CHECK(s.db_url == "sqlite:/tmp/file.db");  // relative to the config file's directory
  }
  unlink(path.c_str());
}

TEST_CASE("settings: bad files name file:line:column and exit 78") {
  Env env;
  Overrides flags;
  auto expect = [&](const std::string& content, const std::string& fragment) {
    std::string p = temp_file(content);
    flags.config = p;
    try {
      (void)load_settings(flags, env.fn());
      FAIL("no error for: " << content);
    } catch (const Error& e) {
      CHECK(e.kind() == Errc::config);
      std::string m = e.what();
      CHECK_MESSAGE(m.find(p + ":") == 0, m);
      CHECK_MESSAGE(m.find(fragment) != std::string::npos, m);
    }
    unlink(p.c_str());
  };
  SUBCASE("malformed TOML") { expect("[db\nurl = 1\n", ":1:"); }
  SUBCASE("unknown key") { expect("[db]\nulr = \"sqlite:x\"\n", ":2:1: unknown setting 'db.ulr'"); }
  SUBCASE("wrong type") { expect("[review]\nrequired = \"no\"\n", "review.required"); }
  SUBCASE("literal password") { expect("[db]\nurl = \"postgresql://u:secret@h/d\"\n", "password"); }
  SUBCASE("missing explicit file") {
    flags.config = "/nonexistent/rewardctl.toml";
    CHECK_THROWS_WITH_AS(load_settings(flags, env.fn()), doctest::Contains("cannot be read"), Error);
  }
}

TEST_CASE("settings: secrets are references") {
  Env env;
  env.vars["HOOK_SECRET"] = "s3cr3t";
  CHECK(resolve_secret("env:HOOK_SECRET", "channels.h.secret", env.fn()) == "s3cr3t");
  CHECK_THROWS_AS(resolve_secret("env:MISSING", "x", env.fn()), Error);
  CHECK_THROWS_WITH_AS(resolve_secret("plain", "channels.h.secret", env.fn()),
                       doctest::Contains("must be a reference"), Error);
}

TEST_CASE("settings: db.url may itself be an env: reference") {
  Env env;
  env.vars["PG_URL"] = "postgresql://app@db/rewards";
  std::string p = temp_file("[db]\nurl = \"env:PG_URL\"\n");
  Overrides flags;
  flags.config = p;
  CHECK(load_settings(flags, env.fn()).db_url == "postgresql://app@db/rewards");
  unlink(p.c_str());
}

#pragma once
// Support for the serve suites: a real `rewardctl serve` process on a free loopback port of its
// own (its stdout and stderr in the test's directory), and a real HTTP client to talk to it.
#include <httplib.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/types.h>
#include <vector>

#include "support/harness.hpp"

namespace rt {

inline const char* kServeToken = "test-token-0123456789abcdef";
// [serve] keys for a test that sends many requests at once to count what they grant: a request may
// wait a minute for a free worker instead of the 2 s default, so a loaded 2-core machine does not
// turn a count of grants into a test of the overload answer (which has its own test).
inline const char* kPatientQueue = "queue_timeout_ms = 60000";

struct ServeProc {
  // Starts `rewardctl --db URL serve --listen 127.0.0.1:0 -o json ARGS` with a config giving the
  // token kServeToken (name "shop") plus `serve_toml` (more [serve] keys), and waits until it
  // listens. Fails the test when it does not start within 20 s. db_url, when given, is the --db it
  // is started with instead of db.url() (the same database reached another way: through a proxy).
  ServeProc(const TestDb& db, const std::vector<std::string>& args = {}, const std::string& serve_toml = "",
            const std::map<std::string, std::string>& env = {}, const std::string& db_url = "");
  ~ServeProc();  // SIGKILL if still running
  int port = 0;
  pid_t pid = -1;
  std::string dir, tag;  // the files: DIR/serve-TAG.out, .err
  // A client to this server (keep-alive; 10 s read timeout), with the bearer token unless !auth.
  std::unique_ptr<httplib::Client> client(bool auth = true) const;
  // POST path with a JSON body; the status and the body (parsed; null when not JSON).
  struct Answer {
    int http = 0;
    nlohmann::json body;
    std::string raw;
    std::map<std::string, std::string> headers;
  };
  Answer post(const std::string& path, const std::string& body, const httplib::Headers& extra = {}, bool auth = true) const;
  Answer get(const std::string& path, bool auth = true) const;
  // SIGTERM, then wait for the exit; returns the exit code (or 128+signal), -1 after `seconds`.
  int stop(int sig = 15, int seconds = 30);
  std::string err_log() const;  // everything it logged so far
};

}  // namespace rt

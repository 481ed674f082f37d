#include "support/serve.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/jobs.hpp"

namespace rt {

namespace {
int g_next = 0;
}

ServeProc::ServeProc(const TestDb& db, const std::vector<std::string>& args, const std::string& serve_toml,
                     const std::map<std::string, std::string>& env, const std::string& db_url) {
  dir = db.dir();
  tag = std::to_string(::getpid()) + "-" + std::to_string(++g_next);
  std::string cfg = write_file(dir, "serve-" + tag + ".toml",
                               "[serve]\n" + serve_toml + "\n[serve.tokens]\nshop = \"env:RT_SERVE_TOKEN\"\n");
  std::vector<std::string> argv_s{REWARDCTL_BIN, "--db", db_url.empty() ? db.url() : db_url, "--config", cfg, "-o",
                                  "json", "serve", "--listen", "127.0.0.1:0"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::string out = dir + "/serve-" + tag + ".out", err = dir + "/serve-" + tag + ".err";
  std::map<std::string, std::string> all_env{{"RT_SERVE_TOKEN", kServeToken}};
  if (is_pooled()) all_env["REWARDCTL_DB_POOLER"] = "transaction";
  for (auto& [k, v] : env) all_env[k] = v;
  pid = spawn_program(argv_s, dir, out, err, true, all_env);
  bool up = eventually(
      [&] {
        std::ifstream f(out);
        std::string line;
        if (!std::getline(f, line)) return false;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("listening")) return false;
        std::string a = j["listening"];
        port = std::stoi(a.substr(a.rfind(':') + 1));
        return true;
      },
      20);
  REQUIRE_MESSAGE(up, "serve did not start: " << err_log());
}

ServeProc::~ServeProc() {
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

std::unique_ptr<httplib::Client> ServeProc::client(bool auth) const {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_read_timeout(10, 0);
  c->set_connection_timeout(5, 0);
  if (auth) c->set_bearer_token_auth(kServeToken);
  return c;
}

namespace {
ServeProc::Answer to_answer(const httplib::Result& r) {
  ServeProc::Answer a;
  if (!r) return a;  // http 0: no answer (connection refused, reset, timeout)
  a.http = r->status;
  a.raw = r->body;
  a.body = nlohmann::json::parse(r->body, nullptr, false);
  if (a.body.is_discarded()) a.body = nullptr;
  for (auto& [k, v] : r->headers) a.headers[k] = v;
  return a;
}
}  // namespace

ServeProc::Answer ServeProc::post(const std::string& path, const std::string& body, const httplib::Headers& extra,
                                  bool auth) const {
  auto c = client(auth);
  return to_answer(c->Post(path.c_str(), extra, body, "application/json"));
}

ServeProc::Answer ServeProc::get(const std::string& path, bool auth) const {
  auto c = client(auth);
  return to_answer(c->Get(path.c_str()));
}

int ServeProc::stop(int sig, int seconds) {
  if (pid <= 0) return -1;
  kill(pid, sig);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int st = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      pid = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string ServeProc::err_log() const { return read_file(dir + "/serve-" + tag + ".err"); }

}  // namespace rt

#pragma once
// A local delivery endpoint for the webhook channel (cpp-httplib): it verifies the signature,
// records every bill number it is sent, and answers as told: ok, retry (a retryable ret), final (a
// final ret) or timeout (answers after 1.5 s, past the channel's timeout).
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/delivery/channel.hpp"
#include "core/engine/engine.hpp"
#include "util/hash.hpp"
#include "support/harness.hpp"

namespace rt {

inline const char* kHookSecret = "test-secret-123";

struct Endpoint {
  httplib::Server srv;
  std::thread th;
  int port = 0;
  std::mutex mu;
  std::string mode = "ok";  // ok | retry | final | timeout
  int ok_delay_ms = 0;      // latency of an ok answer
  std::vector<std::string> bills;
  std::atomic<int> bad_signatures{0};

  Endpoint() {
    srv.Post("/deliver", [this](const httplib::Request& req, httplib::Response& res) {
      std::string want = "sha256=" + rc::hmac_sha256_hex(kHookSecret, req.body);
      if (!rc::digest_equal(want, req.get_header_value("X-Rewardctl-Signature"))) {
        ++bad_signatures;
        res.set_content(R"({"ret":401,"errmsg":"bad signature"})", "application/json");
        return;
      }
      std::string m;
      int delay = 0;
      {
        std::lock_guard<std::mutex> l(mu);
        bills.push_back(nlohmann::json::parse(req.body)["bill_no"]);
        m = mode;
        delay = ok_delay_ms;
      }
      if (m == "timeout") std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      if (m == "ok" && delay) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      if (m == "retry") res.set_content(R"({"ret":1001,"errmsg":"busy"})", "application/json");
      else if (m == "final") res.set_content(R"({"ret":2001,"errmsg":"user frozen"})", "application/json");
      else res.set_content(R"({"ret":0,"errmsg":""})", "application/json");
    });
    port = srv.bind_to_any_port("127.0.0.1");
    th = std::thread([this] { srv.listen_after_bind(); });
  }
  ~Endpoint() {
    srv.stop();
    th.join();
  }
  void set(const std::string& m) {
    std::lock_guard<std::mutex> l(mu);
    mode = m;
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> l(mu);
    return bills;
  }
};

// A config file with channel `wallet` pointing at the endpoint (timeout 500 ms, ret 1001 retryable).
inline std::string webhook_config(const TestDb& db, int port, const std::string& extra = "") {
  return write_file(db.dir(), "rewardctl.toml",
                    "[channels.wallet]\ntype = \"webhook\"\nurl = \"http://127.0.0.1:" + std::to_string(port) +
                        "/deliver\"\nsecret = \"env:HOOK_SECRET\"\ntimeout_ms = 500\nconnect_timeout_ms = 200\n"
                        "retryable_rets = [1001]\n" + extra);
}

// Engine options as a host with this config file and the secret in its environment has them.
inline rc::engine::EngineOptions webhook_engine_options(const std::string& cfg) {
  rc::engine::EngineOptions o;
  rc::Settings st;
  st.file = toml::parse(read_file(cfg), cfg);
  st.config_path = cfg;
  o.channels = rc::delivery::parse_channels(st);
  o.getenv = [](const char* n) -> const char* { return std::string(n) == "HOOK_SECRET" ? kHookSecret : nullptr; };
  return o;
}

}  // namespace rt

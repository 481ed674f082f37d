#pragma once
// A local [alerts] webhook for tests (cpp-httplib): verifies each POST's signature under
// "alert-secret" and keeps every body. env(db) writes a config that points rewardctl at it.
#include <httplib.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/harness.hpp"
#include "util/hash.hpp"

namespace rt {

struct AlertSink {
  httplib::Server srv;
  std::thread th;
  int port = 0;
  std::mutex mu;
  std::vector<nlohmann::json> bodies;
  int bad_signatures = 0;

  AlertSink() {
    srv.Post("/alert", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      if (!rc::digest_equal("sha256=" + rc::hmac_sha256_hex("alert-secret", req.body),
                            req.get_header_value("X-Rewardctl-Signature")))
        ++bad_signatures;
      bodies.push_back(nlohmann::json::parse(req.body));
      res.set_content("{}", "application/json");
    });
    port = srv.bind_to_any_port("127.0.0.1");
    th = std::thread([this] { srv.listen_after_bind(); });
  }
  ~AlertSink() {
    srv.stop();
    th.join();
  }
  // REWARDCTL_CONFIG with an [alerts] table pointing here, and the secret's variable.
  std::map<std::string, std::string> env(const TestDb& db) const {
    std::string cfg = write_file(db.dir(), "alerts.toml",
                                 "[alerts]\nwebhook = \"http://127.0.0.1:" + std::to_string(port) +
                                     "/alert\"\nsecret = \"env:ALERT_SECRET\"\n");
    return {{"REWARDCTL_CONFIG", cfg}, {"ALERT_SECRET", "alert-secret"}};
  }
  std::vector<nlohmann::json> seen() {
    std::lock_guard<std::mutex> l(mu);
    return bodies;
  }
};

}  // namespace rt

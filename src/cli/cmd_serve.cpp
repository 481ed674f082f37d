// serve: the online claim path over HTTP (serve/server.hpp, docs/serve.md). This file reads the
// [serve] table and the flags; the server does the rest.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "cli/context.hpp"
#include "cli/engine_setup.hpp"
#include "serve/server.hpp"

namespace rc::cli {

namespace {

struct {
  std::string listen;
  int threads = 0, connections = 0;
  bool no_auth = false;
} serve_opt;

// "config.toml:12:3: serve.threads must be ..." (the node's place in the file).
[[noreturn]] void bad_setting(const Ctx& ctx, const toml::node& n, const std::string& why) {
  const auto& b = n.source().begin;
  throw Error(Errc::config, ctx.settings.config_path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                                ": " + why);
}

int64_t int_setting(const Ctx& ctx, const toml::table& t, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  auto* n = t.get(key);
  if (!n) return dflt;
  auto v = n->value<int64_t>();
  if (!n->is_integer() || !v || *v < lo || *v > hi)
    bad_setting(ctx, *n, std::string("serve.") + key + " must be an integer between " + std::to_string(lo) + " and " +
                             std::to_string(hi));
  return *v;
}

double rate_setting(const Ctx& ctx, const toml::table& t, const char* key) {
  auto* n = t.get(key);
  if (!n) return 0;
  auto v = n->value<double>();  // an integer or a float
  if (!v || *v < 0 || *v > 1e6) bad_setting(ctx, *n, std::string("serve.") + key + " must be a number from 0 to 1000000");
  return *v;
}

// "HOST:PORT", "[::1]:PORT" -> host, port. Error(usage) naming `what`.
std::pair<std::string, int> parse_listen(const std::string& s, const std::string& what) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    throw Error(Errc::usage, what + " must be HOST:PORT (127.0.0.1:8080, [::1]:8080), not '" + s + "'");
  std::string host = s.substr(0, colon), port = s.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (*end || p < 0 || p > 65535 || port.empty())
    throw Error(Errc::usage, what + ": port must be 0 to 65535, not '" + port + "'");
  return {host, int(p)};
}

serve::ServeOptions serve_options(Ctx& ctx) {
  serve::ServeOptions o;
  // A caller waits seconds, not the minute a batch job may wait for a lock: serve's sessions wait
  // for a lock at most db_busy_timeout_ms per attempt and retry db_retries times ([serve]).
  int db_busy = 1000, db_retries = 2;
  std::string listen = "127.0.0.1:8080", listen_what = "--listen";
  if (auto* t = ctx.settings.file["serve"].as_table()) {
    auto getenv = [](const char* n) { return std::getenv(n); };
    if (auto* n = t->get("listen")) {
      if (!n->is_string()) bad_setting(ctx, *n, "serve.listen must be a string HOST:PORT");
      listen = *n->value<std::string>();
      listen_what = ctx.settings.config_path + ": serve.listen";
    }
    o.threads = int(int_setting(ctx, *t, "threads", o.threads, 1, 1024));
    o.connections = int(int_setting(ctx, *t, "connections", o.connections, 1, 65536));
    o.user_rate = rate_setting(ctx, *t, "user_rate");
    o.user_burst = rate_setting(ctx, *t, "user_burst");
    o.max_body_bytes = size_t(int_setting(ctx, *t, "max_body_bytes", int64_t(o.max_body_bytes), 256, 16 << 20));
    o.read_timeout_ms = int(int_setting(ctx, *t, "read_timeout_ms", o.read_timeout_ms, 100, 600000));
    o.write_timeout_ms = int(int_setting(ctx, *t, "write_timeout_ms", o.write_timeout_ms, 100, 600000));
    o.keep_alive_timeout_ms = int(int_setting(ctx, *t, "keep_alive_timeout_ms", o.keep_alive_timeout_ms, 1000, 600000));
    o.keep_alive_max_requests = int(int_setting(ctx, *t, "keep_alive_max_requests", o.keep_alive_max_requests, 1, 1000000));
    o.drain_timeout_ms = int(int_setting(ctx, *t, "drain_timeout_ms", o.drain_timeout_ms, 100, 600000));
    o.queue_timeout_ms = int(int_setting(ctx, *t, "queue_timeout_ms", o.queue_timeout_ms, 1, 600000));
    o.request_timeout_ms = int(int_setting(ctx, *t, "request_timeout_ms", o.request_timeout_ms, 100, 600000));
    db_busy = int(int_setting(ctx, *t, "db_busy_timeout_ms", db_busy, 1, 600000));
    db_retries = int(int_setting(ctx, *t, "db_retries", db_retries, 0, 100));
    if (auto* n = t->get("locale")) {
      auto l = n->is_string() ? serve::parse_locale(*n->value<std::string>()) : std::nullopt;
      if (!l) bad_setting(ctx, *n, "serve.locale must be \"en\" or \"zh\"");
      o.locale = *l;
    }
    if (auto* n = t->get("tokens")) {
      auto* tt = n->as_table();
      if (!tt) bad_setting(ctx, *n, "serve.tokens must be a table: NAME = \"env:VAR\" or \"file:PATH\"");
      for (auto& [k, v] : *tt) {
        std::string name(k.str());
        if (!v.is_string()) bad_setting(ctx, v, "serve.tokens." + name + " must be a string env:VAR or file:PATH");
        std::string secret = resolve_secret(*v.value<std::string>(), "serve.tokens." + name, getenv);
        if (secret.size() < 16) bad_setting(ctx, v, "serve.tokens." + name + " is shorter than 16 bytes: use a random token");
        o.tokens.push_back({name, secret});
      }
    }
  }
  if (!serve_opt.listen.empty()) {
    listen = serve_opt.listen;
    listen_what = "--listen";
  }
  std::tie(o.host, o.port) = parse_listen(listen, listen_what);
  if (serve_opt.threads != 0) {
    if (serve_opt.threads < 1 || serve_opt.threads > 1024) throw Error(Errc::usage, "--threads must be 1 to 1024");
    o.threads = serve_opt.threads;
  }
  if (serve_opt.connections != 0) {
    if (serve_opt.connections < 1 || serve_opt.connections > 65536)
      throw Error(Errc::usage, "--connections must be 1 to 65536");
    o.connections = serve_opt.connections;
  }
  o.auth = !serve_opt.no_auth;
  // (a shorter [db] setting stays: serve never waits longer than the operator asked)
  ctx.settings.db_busy_timeout_ms = std::min(ctx.settings.db_busy_timeout_ms, db_busy);
  ctx.settings.db_retries = std::min(ctx.settings.db_retries, db_retries);
  return o;
}

Exit run_serve(Ctx& ctx) {
  auto o = serve_options(ctx);
  // a PostgreSQL server that does not answer a connection attempt: libpq gives up after 5 s (unless
  // the environment or the conninfo says otherwise)
  ::setenv("PGCONNECT_TIMEOUT", "5", 0);
  // a broken database or [channels] table is found now, not on the first request
  { auto probe = ctx.open_store(); }
  auto eopts = engine_options(ctx);
  eopts.post_alert = alert_poster_or_none(ctx, kClaimAlertTimeoutMs);
  eopts.claim_log_level = spdlog::level::debug;  // the request line names the claim
  serve::ServeDeps d;
  d.open_store = [&ctx] { return ctx.open_store(/*cancel_on_signal=*/false); };
  d.engine_options = [eopts] { return eopts; };
  d.clock = ctx.clock.get();
  d.on_listening = [&ctx, &o](const std::string& address) {
    ctx.out.record({{"listening", address}, {"threads", o.threads}, {"connections", o.connections}, {"auth", o.auth}});
    std::cout.flush();
  };
  return serve::run_server(o, d);
}

}  // namespace

void register_serve(CLI::App& app, Ctx& ctx) {
  auto* c = app.add_subcommand(
      "serve", "Serve claims over HTTP: /api/receive, /api/v1/redpack/claim, /api/lottery/draw, /v1 (docs/serve.md)");
  c->add_option("--listen", serve_opt.listen, "HOST:PORT to listen on (default [serve] listen, then 127.0.0.1:8080; port 0: any)")
      ->option_text("HOST:PORT");
  c->add_option("--threads", serve_opt.threads, "Workers, each with its own database session (default 16)")
      ->option_text("N");
  c->add_option("--connections", serve_opt.connections,
                "Connections served at once, one thread each (default 256); more wait to be accepted")
      ->option_text("N");
  c->add_flag("--no-auth", serve_opt.no_auth, "Accept requests without a bearer token (only on a loopback address)");
  c->callback([&ctx] { ctx.action = [&ctx] { return run_serve(ctx); }; });
}

}  // namespace rc::cli

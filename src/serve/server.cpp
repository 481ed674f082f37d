#include "serve/server.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "core/engine/grant_json.hpp"
#include "core/interrupt.hpp"
#include "serve/metrics.hpp"
#include "serve/rate.hpp"
#include "serve/workers.hpp"

namespace rc::serve {

using nlohmann::json;

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

std::string match_token(const std::vector<Token>& tokens, const std::string& authorization) {
  static const std::string kPrefix = "Bearer ";
  if (authorization.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  std::string given = authorization.substr(kPrefix.size());
  if (given.empty()) return "";
  unsigned char g[SHA256_DIGEST_LENGTH], t[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(given.data()), given.size(), g);
  std::string found;
  for (auto& tok : tokens) {  // every token is compared: which one matched decides nothing about time
    SHA256(reinterpret_cast<const unsigned char*>(tok.secret.data()), tok.secret.size(), t);
    if (CRYPTO_memcmp(g, t, sizeof g) == 0 && found.empty()) found = tok.name;
  }
  return found;
}

namespace {


// What the one log line of a request names, filled in as the request goes (pre-routing, the
// handler, the error handler) and written by the logger, all on the request's worker thread.
struct RequestInfo {
  Endpoint endpoint = Endpoint::other;
  std::string activity, user, biz_id, token;
  int code = -1;
  std::string word;
  int64_t start_us = 0;
};
thread_local RequestInfo t_req;


class Server {
 public:
  Server(const ServeOptions& o, const ServeDeps& d)
      : o_(o), d_(d), rate_(o.user_rate, o.user_burst),
        pool_(o.threads, o.queue_timeout_ms, d.open_store, d.engine_options, *d.clock) {}

  Exit run();

 private:
  using Lease = WorkerPool::Lease;
  using Overloaded = WorkerPool::Overloaded;
  void open(Worker& w) { pool_.open(w); }
  // Leases a worker into `lease`; false, with res answered 503, when none is free in time.
  bool take_worker(std::optional<Lease>& lease, httplib::Response& res) {
    try {
      lease.emplace(pool_);
      return true;
    } catch (const Overloaded&) {
      fail(res, Failure::unavailable, "every worker is busy");
      return false;
    }
  }
  static void reset(Worker& w) { WorkerPool::reset(w); }
  // Every 50 ms: a session whose request is past its deadline is severed (Store::sever), so that
  // its statement fails now as unavailable (503) and the worker is free again.
  void reap() {
    if (int n = pool_.reap(steady_us()))
      spdlog::warn("{} request(s) ran past request_timeout_ms ({} ms): their database sessions are ended", n,
                   o_.request_timeout_ms);
  }

  void reply(httplib::Response& res, const json& body, int http, const Code& c) {
    res.status = http;
    res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    if (http == 503) res.set_header("Retry-After", "1");
    t_req.code = c.code;
    t_req.word = c.word;
  }
  void fail(httplib::Response& res, Failure f, const std::string& detail = "") {
    const Code& c = code_of(f);
    reply(res, failure(f, o_.locale, detail), c.http, c);
  }

  void on_claim(Endpoint e, const httplib::Request& req, httplib::Response& res);
  // The answer of a decided claim (the lottery's consolation flag read on w's session).
  void answer_claim(Endpoint e, const engine::ClaimRequest& r, Worker& w, const engine::ClaimOutcome& out,
                    httplib::Response& res);
  void on_grant(const httplib::Request& req, httplib::Response& res);
  void on_ready(httplib::Response& res);
  bool consolation(Worker& w, const engine::GrantView& g);
  void log_line(const httplib::Request& req, const httplib::Response& res);

  const ServeOptions& o_;
  const ServeDeps& d_;
  UserRate rate_;
  Metrics metrics_;
  WorkerPool pool_;
  std::timed_mutex sqlite_writer_;  // SQLite: one claim at a time in this process
  std::atomic<bool> stopping_{false};
};

Endpoint endpoint_of(const std::string& path) {
  if (path == "/api/receive") return Endpoint::receive;
  if (path == "/api/v1/redpack/claim") return Endpoint::redpack;
  if (path == "/api/lottery/draw") return Endpoint::lottery;
  if (path == "/v1/claims") return Endpoint::claims;
  if (path.rfind("/v1/grants/", 0) == 0) return Endpoint::grant_read;
  if (path == "/healthz") return Endpoint::healthz;
  if (path == "/readyz") return Endpoint::readyz;
  if (path == "/metrics") return Endpoint::metrics;
  return Endpoint::other;
}

bool needs_auth(Endpoint e) {
  return e == Endpoint::receive || e == Endpoint::redpack || e == Endpoint::lottery || e == Endpoint::claims ||
         e == Endpoint::grant_read;
}

void Server::on_claim(Endpoint e, const httplib::Request& req, httplib::Response& res) {
  ++metrics_.in_flight;
  struct Down {
    std::atomic<int64_t>& n;
    ~Down() { --n; }
  } down{metrics_.in_flight};
  engine::ClaimRequest r;
  try {
    r = parse_claim(e, req.body, req.get_header_value("X-User-Id"));
  } catch (const BadRequest& b) {
    return fail(res, Failure::bad_request, b.message());
  }
  t_req.activity = r.activity;
  t_req.user = r.user;
  t_req.biz_id = r.biz_id;
  if (!rate_.allow(r.user, steady_us())) return fail(res, Failure::rate_limited);
  std::optional<Lease> lease;
  if (!take_worker(lease, res)) return;
  Worker& w = lease->get();
  const int64_t deadline = t_req.start_us + int64_t(o_.request_timeout_ms) * 1000;
  for (int attempt = 0;; ++attempt) {
    const bool fresh = !w.eng;
    try {
      open(w);
      w.deadline_us = deadline;
      engine::ClaimOutcome out;
      if (w.st->dialect() == store::Dialect::sqlite) {
        // SQLite has one writer at a time: the workers of this process take turns here, woken as
        // the previous one finishes, instead of each polling the file's lock in its busy handler
        // (bench/SERVE.md: polling made p99 250 ms at 16 connections)
        std::unique_lock<std::timed_mutex> l(sqlite_writer_, std::defer_lock);
        if (!l.try_lock_for(std::chrono::microseconds(std::max<int64_t>(0, deadline - steady_us()))))
          throw Error(Errc::unavailable, "waited past request_timeout_ms for this process's SQLite writer");
        out = w.eng->claim(r);
      } else {
        out = w.eng->claim(r);
      }
      w.deadline_us = 0;
      if (w.st->severed()) reset(w);  // severed just as it finished: the session is not to be used again
      answer_claim(e, r, w, out, res);
      return;
    } catch (const Error& err) {
      const bool severed = w.st && w.st->severed(), lost = w.st && w.st->connection_lost();
      reset(w);  // the session may be broken: the next request on this worker opens a new one
      // A session kept from before an outage fails its first statement after it: one more try on
      // a new session, which is safe because the claim is idempotent by its biz id.
      if (err.kind() == Errc::unavailable && lost && !fresh && !severed && attempt == 0 && steady_us() < deadline)
        continue;
      metrics_.db_error();
      if (err.kind() == Errc::usage || err.kind() == Errc::bad_input)
        return fail(res, Failure::bad_request, err.what());
      bool transient = err.kind() == Errc::unavailable || err.kind() == Errc::busy || err.kind() == Errc::config ||
                       err.kind() == Errc::interrupted;
      spdlog::error("{} {}: {} (biz id {})", req.method, req.path, err.what(), r.biz_id);
      return fail(res, transient ? Failure::unavailable : Failure::internal);
    } catch (const std::exception& ex) {
      reset(w);
      metrics_.db_error();
      spdlog::error("{} {}: internal error: {} (biz id {})", req.method, req.path, ex.what(), r.biz_id);
      return fail(res, Failure::internal);
    }
  }
}

void Server::answer_claim(Endpoint e, const engine::ClaimRequest& r, Worker& w, const engine::ClaimOutcome& out,
                          httplib::Response& res) {
  {
    AnswerExtra extra;
    if (e == Endpoint::lottery && out.grant &&
        (out.status == engine::Status::granted || out.status == engine::Status::replayed))
      extra.consolation = consolation(w, *out.grant);
    if (out.grant) metrics_.grant(r.activity, engine::status_name(out.status), name(out.grant->state));
    const bool made = out.status == engine::Status::granted || out.status == engine::Status::replayed;
    reply(res, answer(e, out, r, extra, o_.locale), 200, made ? ok_code() : code_of(out.reason));
  }
}

bool Server::consolation(Worker& w, const engine::GrantView& g) {
  auto rows = w.st->autocommit().query(
      "SELECT p.consolation FROM prize p JOIN activity a ON a.id = p.activity_id WHERE a.code = $1 AND p.code = $2",
      {g.activity, g.prize});
  return !rows.empty() && rows[0].i64(0) != 0;
}

void Server::on_grant(const httplib::Request& req, httplib::Response& res) {
  std::string biz;
  try {
    biz = parse_biz_id(req.matches.size() > 1 ? std::string(req.matches[1]) : "");
  } catch (const BadRequest& b) {
    return fail(res, Failure::bad_request, b.message());
  }
  t_req.biz_id = biz;
  std::optional<Lease> lease;
  if (!take_worker(lease, res)) return;
  Worker& w = lease->get();
  try {
    open(w);
    w.deadline_us = t_req.start_us + int64_t(o_.request_timeout_ms) * 1000;
    auto g = engine::find_grant_by_biz(w.st->autocommit(), biz);
    w.deadline_us = 0;
    if (!g) return fail(res, Failure::grant_not_found);
    t_req.activity = g->activity;
    t_req.user = g->user;
    reply(res, json{{"code", 0}, {"message", message(ok_code(), o_.locale)}, {"data", engine::grant_json(*g)}}, 200,
          ok_code());
  } catch (const std::exception& ex) {
    metrics_.db_error();
    reset(w);
    spdlog::error("{} {}: {}", req.method, req.path, ex.what());
    fail(res, Failure::unavailable);
  }
}

void Server::on_ready(httplib::Response& res) {
  try {
    auto st = pool_.open_probe();  // reachable, and the schema is this binary's
    st->autocommit().query("SELECT 1");
    reply(res, json{{"code", 0}, {"message", "ready"}, {"data", {{"database", st->describe()}}}}, 200, ok_code());
  } catch (const std::exception& ex) {
    metrics_.db_error();
    fail(res, Failure::unavailable, ex.what());
  }
}

void Server::log_line(const httplib::Request& req, const httplib::Response& res) {
  const int64_t us = steady_us() - t_req.start_us;
  metrics_.request(endpoint_name(t_req.endpoint), t_req.code, res.status, us);
  if (t_req.endpoint == Endpoint::healthz || t_req.endpoint == Endpoint::readyz || t_req.endpoint == Endpoint::metrics)
    return;  // probes every few seconds: counted, not logged
  nlohmann::ordered_json j{{"event", "request"}, {"method", req.method}, {"path", req.path}, {"http", res.status},
                           {"code", t_req.code}, {"result", t_req.word}, {"ms", double(us / 10) / 100.0}};
  if (!t_req.activity.empty()) j["activity"] = t_req.activity;
  if (!t_req.user.empty()) j["user"] = t_req.user;
  if (!t_req.biz_id.empty()) j["biz_id"] = t_req.biz_id;
  if (!t_req.token.empty()) j["token"] = t_req.token;
  if (!req.remote_addr.empty()) j["remote"] = req.remote_addr;
  spdlog::info("{}", j.dump(-1, ' ', false, json::error_handler_t::replace));
}

Exit Server::run() {
  httplib::Server svr;
  const int threads = o_.threads, connections = std::max(o_.connections, o_.threads);
  svr.new_task_queue = [connections] { return new httplib::ThreadPool(size_t(connections)); };
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(o_.max_body_bytes);
  svr.set_read_timeout(o_.read_timeout_ms / 1000, (o_.read_timeout_ms % 1000) * 1000);
  svr.set_write_timeout(o_.write_timeout_ms / 1000, (o_.write_timeout_ms % 1000) * 1000);
  svr.set_keep_alive_timeout(std::max(1, (o_.keep_alive_timeout_ms + 999) / 1000));
  svr.set_keep_alive_max_count(size_t(std::max(1, o_.keep_alive_max_requests)));

  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_req = RequestInfo{};
    t_req.start_us = steady_us();
    t_req.endpoint = endpoint_of(req.path);
    if (stopping_) {
      res.set_header("Connection", "close");
      fail(res, Failure::shutting_down);
      return httplib::Server::HandlerResponse::Handled;
    }
    // A body must say its length: httplib bounds a body by max_body_bytes only through
    // Content-Length, and would read a chunked one into memory whatever its size.
    if (req.method == "POST" && (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length"))) {
      res.set_header("Connection", "close");
      fail(res, Failure::length_required);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (needs_auth(t_req.endpoint) && o_.auth) {
      t_req.token = match_token(o_.tokens, req.get_header_value("Authorization"));
      if (t_req.token.empty()) {
        res.set_header("WWW-Authenticate", "Bearer");
        fail(res, Failure::unauthorized);
        return httplib::Server::HandlerResponse::Handled;  // before the body is read
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  for (auto [path, e] : {std::pair{"/api/receive", Endpoint::receive}, std::pair{"/api/v1/redpack/claim", Endpoint::redpack},
                         std::pair{"/api/lottery/draw", Endpoint::lottery}, std::pair{"/v1/claims", Endpoint::claims}}) {
    Endpoint ep = e;
    svr.Post(path, [this, ep](const httplib::Request& req, httplib::Response& res) { on_claim(ep, req, res); });
  }
  svr.Get(R"(/v1/grants/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) { on_grant(req, res); });
  svr.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, json{{"code", 0}, {"message", "ok"}, {"data", nullptr}}, 200, ok_code());
  });
  svr.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) { on_ready(res); });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(), "text/plain; version=0.0.4");
    t_req.code = 0;
    t_req.word = "ok";
  });
  // Whatever has no answer of ours yet (an unknown path, a body over the limit, a request line
  // httplib refused) gets the same {code, message, data} shape.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Handled;
    Failure f = Failure::bad_request;
    if (res.status == 404) f = endpoint_of(req.path) == Endpoint::other ? Failure::no_such_path : Failure::method_not_allowed;
    else if (res.status == 413) f = Failure::too_large;
    else if (res.status >= 500) f = Failure::internal;
    int http = code_of(f).http;
    fail(res, f);
    res.status = http;
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      spdlog::error("{} {}: internal error: {}", req.method, req.path, ex.what());
    } catch (...) {
      spdlog::error("{} {}: internal error", req.method, req.path);
    }
    fail(res, Failure::internal);
  });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log_line(req, res); });

  // The listening socket, as httplib creates it (the same options as its default): its accept
  // backlog is raised once bound, since the library's build fixes it at 5, which a burst of
  // connects overflows (the kernel then drops SYNs: a caller waits a second or more to connect).
  std::atomic<int> listen_fd{-1};
  svr.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = int(sock);
  });
  int port = o_.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o_.host);
    if (port <= 0) throw Error(Errc::config, "cannot listen on " + o_.host + " (any port): " + std::strerror(errno));
  } else if (!svr.bind_to_port(o_.host, port)) {
    throw Error(Errc::config, "cannot listen on " + o_.host + ":" + std::to_string(port) + ": " + std::strerror(errno));
  }
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);  // (listen again: Linux takes the new backlog)
  const std::string address = (o_.host.find(':') != std::string::npos ? "[" + o_.host + "]" : o_.host) + ":" +
                              std::to_string(port);

  // signals: the first stops accepting and drains, a second ends the process at once
  std::mutex wd_mu;
  std::condition_variable wd_cv;
  bool done = false;
  std::atomic<int> signals{0};
  int action = add_interrupt_action([&] {
    if (signals.fetch_add(1) == 0) {
      spdlog::info("stopping: no new connections; answering the requests in progress (at most {} ms)", o_.drain_timeout_ms);
      stopping_ = true;
      svr.stop();
      std::lock_guard<std::mutex> l(wd_mu);
      wd_cv.notify_all();
    } else {
      spdlog::warn("second signal: exiting now");
      std::_Exit(exit_int(Exit::interrupted));
    }
  });
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> l(wd_mu);
    wd_cv.wait(l, [&] { return done || stopping_.load(); });
    if (done) return;
    if (!wd_cv.wait_for(l, std::chrono::milliseconds(o_.drain_timeout_ms), [&] { return done; })) {
      if (metrics_.in_flight.load() == 0) {  // only idle keep-alive connections keep the workers: done
        spdlog::info("stopped (idle connections left open after {} ms)", o_.drain_timeout_ms);
        std::_Exit(exit_int(Exit::ok));
      }
      spdlog::error("requests still in progress after {} ms: exiting", o_.drain_timeout_ms);
      std::_Exit(exit_int(Exit::interrupted));
    }
  });

  std::thread reaper([&] {
    std::unique_lock<std::mutex> l(wd_mu);
    while (!wd_cv.wait_for(l, std::chrono::milliseconds(50), [&] { return done; })) {
      l.unlock();
      reap();
      l.lock();
    }
  });

  spdlog::info("serving on http://{}: {} workers (database sessions), up to {} connections ({})", address, threads,
               connections,
               o_.auth ? std::to_string(o_.tokens.size()) + " token(s)" : "no authentication");
  if (d_.on_listening) d_.on_listening(address);
  if (!stopping_) svr.listen_after_bind();  // returns once stopped and every worker is done
  remove_interrupt_action(action);
  {
    std::lock_guard<std::mutex> l(wd_mu);
    done = true;
    wd_cv.notify_all();
  }
  watchdog.join();
  reaper.join();
  pool_.reset_all();
  spdlog::info("stopped");
  return Exit::ok;
}

}  // namespace

Exit run_server(const ServeOptions& o, const ServeDeps& d) {
  if (!o.auth && !is_loopback(o.host))
    throw Error(Errc::usage, "--no-auth listens only on a loopback address (127.0.0.1, ::1), not " + o.host);
  if (o.auth && o.tokens.empty())
    throw Error(Errc::config, "serve needs [serve] tokens (bearer tokens, env:NAME or file:PATH) or --no-auth on a loopback address");
  if (o.threads < 1) throw Error(Errc::usage, "--threads must be at least 1");
  if (o.connections < 1) throw Error(Errc::usage, "--connections must be at least 1");
  Server s(o, d);
  return s.run();
}

}  // namespace rc::serve

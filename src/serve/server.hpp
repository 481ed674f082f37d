#pragma once
// `rewardctl serve`: the engine behind HTTP/1.1 (cpp-httplib), the contracts of api.hpp on a
// socket (docs/serve.md). Each open connection has a thread of its own (cpp-httplib's model: a
// keep-alive connection holds its thread while it waits for the next request), up to
// `connections`; a request then takes one of `threads` workers for its database work. Each worker
// owns one database session (a SQLite connection to the WAL file, or a PostgreSQL connection, where claims
// keep the one-statement path) and its own Engine, opened on its first request and opened again
// after the database went away. Nothing a request decides lives only in memory: every answer a
// caller saw is committed first, and a request the caller did not see answered is safe to send
// again (idempotent by its biz id).
//
// Stopping: the first SIGINT/SIGTERM stops accepting, lets every request in progress finish and
// be answered, and returns 0 once the workers are done (at most drain_timeout_ms; past that, 130);
// a second signal exits 130 at once.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "core/store/store.hpp"
#include "serve/api.hpp"

namespace rc::serve {

struct Token {
  std::string name, secret;  // the name is logged with each request; the secret never is
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port (the listening callback names it)
  int threads = 16;         // workers = database sessions: requests on the database at once
  int connections = 256;    // connections served at once (one thread each); more wait to be accepted
  bool auth = true;         // false (--no-auth): no bearer token needed; REQUIRES a loopback host
  std::vector<Token> tokens;
  double user_rate = 0;     // claims per user per second (0: no limit), rate.hpp
  double user_burst = 0;    // bucket size (0: max(1, user_rate))
  Locale locale = Locale::en;
  size_t max_body_bytes = 16 * 1024;
  int read_timeout_ms = 5000, write_timeout_ms = 5000;
  int keep_alive_timeout_ms = 5000;
  int keep_alive_max_requests = 1000;
  int drain_timeout_ms = 15000;
  int queue_timeout_ms = 2000;  // a request that finds no free worker this long is answered 503
  // A request's database work past this is ended (Store::sever) and answered 503: a database
  // that stopped answering or a lock held long never holds a caller or a worker longer.
  int request_timeout_ms = 5000;
};

struct ServeDeps {
  // A new session to the configured database, schema checked, opened with
  // StoreOptions::cancel_on_signal off: a first signal lets the requests in progress finish, so no
  // statement of a worker's session may be cancelled by it, not even one of its opening (a session
  // opened as the signal arrived once answered a request 503). Called from the workers, one at a
  // time (the server serialises the calls). Throws rc::Error.
  std::function<std::unique_ptr<store::Store>()> open_store;
  // The options of each worker's Engine.
  std::function<engine::EngineOptions()> engine_options;
  const Clock* clock = nullptr;
  // Called once the socket is bound: "127.0.0.1:8080" (the port chosen when 0 was asked).
  std::function<void(const std::string& address)> on_listening;
};

// True for 127.0.0.0/8, ::1 and "localhost": the addresses --no-auth may listen on.
bool is_loopback(const std::string& host);

// The name of the token that `authorization` ("Bearer SECRET") carries, or "" when none matches.
// Compares against every token in constant time (its length and content decide nothing but the
// answer).
std::string match_token(const std::vector<Token>& tokens, const std::string& authorization);

// Serves until a signal stops it. Returns Exit::ok after a clean drain. Throws Error(config) when
// the address cannot be bound (named), Error(usage) for --no-auth on a non-loopback address.
Exit run_server(const ServeOptions& o, const ServeDeps& d);

}  // namespace rc::serve

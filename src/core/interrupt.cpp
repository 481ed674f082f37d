#include "core/interrupt.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <map>
#include <mutex>
#include <thread>

#include "base/error.hpp"

namespace rc {
namespace {
volatile std::sig_atomic_t g_flag = 0;
int g_pipe[2] = {-1, -1};  // the handler writes a byte; the watcher thread wakes on it

extern "C" void on_signal(int) {
  g_flag = 1;
  int saved = errno;
  if (g_pipe[1] >= 0) (void)!write(g_pipe[1], "!", 1);  // async-signal-safe
  errno = saved;
}

struct Actions {
  std::mutex mu;
  std::map<int, std::function<void()>> fns;
  int next = 1;
  std::once_flag started;
};
Actions& actions() {
  static Actions* a = new Actions;  // never destroyed: the watcher may outlive static destruction
  return *a;
}

void watch() {
  char buf[16];
  for (;;) {
    ssize_t n = read(g_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    // once per signal: two that arrived before this thread woke are two runs (serve counts them)
    std::lock_guard<std::mutex> l(actions().mu);
    for (ssize_t i = 0; i < n; ++i)
      for (auto& [id, fn] : actions().fns) {
        try {
          fn();
        } catch (...) {
          // best effort: the flag is set and the work stops at its next check anyway
        }
      }
  }
}

void start_watcher() {
  std::call_once(actions().started, [] {
    if (pipe2(g_pipe, O_CLOEXEC) != 0) return;
    fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);
    std::thread(watch).detach();
  });
}

}  // namespace

void install_interrupt_handlers() {
  start_watcher();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_flag != 0; }

void check_interrupted() {
  if (g_flag) throw Error(Errc::interrupted, "interrupted: stopped after the last committed chunk; rerun to continue");
}

int add_interrupt_action(std::function<void()> fn) {
  start_watcher();
  std::lock_guard<std::mutex> l(actions().mu);
  int id = actions().next++;
  actions().fns.emplace(id, std::move(fn));
  return id;
}

void remove_interrupt_action(int handle) {
  std::lock_guard<std::mutex> l(actions().mu);
  actions().fns.erase(handle);
}

}  // namespace rc

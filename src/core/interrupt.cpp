#include "core/interrupt.hpp"

#include <csignal>

#include "core/error.hpp"

namespace rc {
namespace {
volatile std::sig_atomic_t g_flag = 0;
extern "C" void on_signal(int) { g_flag = 1; }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_flag != 0; }

void check_interrupted() {
  if (g_flag) throw Error(Exit::interrupted, "interrupted: stopped after the last committed chunk; rerun to continue");
}

}  // namespace rc

#pragma once
// SIGINT/SIGTERM set a flag that long work checks between chunks; it then stops at a clean
// boundary (a committed chunk) and exits with 130. A statement that is running when the signal
// arrives is not waited for: the stores register an interrupt action that cancels it (PostgreSQL:
// libpq's cancel request; SQLite: sqlite3_interrupt), so its transaction rolls
// back and the command exits 130 within moments, whatever the statement's length.
#include <functional>

namespace rc {
void install_interrupt_handlers();
bool interrupted();
// Throws Error(interrupted) when a signal arrived.
void check_interrupted();

// Registers fn to run once per SIGINT/SIGTERM on a watcher thread (never in the signal handler),
// after the flag is set. fn must be thread-safe with respect to the thread doing the work. Returns
// a handle for remove_interrupt_action.
int add_interrupt_action(std::function<void()> fn);
// After it returns, the action is not running and will not run again.
void remove_interrupt_action(int handle);
}  // namespace rc

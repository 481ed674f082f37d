#pragma once
// SIGINT/SIGTERM set a flag that long work checks between chunks; it then stops at a clean
// boundary (a committed chunk) and exits with 130.
namespace rc {
void install_interrupt_handlers();
bool interrupted();
// Throws Error(interrupted) when a signal arrived.
void check_interrupted();
}  // namespace rc

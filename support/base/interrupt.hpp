#pragma once
// Cooperative cancellation on SIGINT/SIGTERM: long loops poll interrupted() and unwind, so RAII
// removes temporary files and nothing half-written is published. A second signal kills at once.
#include "support/base/result.hpp"

namespace lockstep {

/// Installs the SIGINT/SIGTERM handlers (idempotent), without SA_RESTART: a blocking system call
/// fails with EINTR, which errno_error() reports as `interrupted`.
void install_interrupt_handlers();
/// True once SIGINT or SIGTERM arrived.
bool interrupted();
/// Returns an `interrupted` Error when a signal arrived.
Result<void> check_interrupted();
/// Throws Failure(interrupted) when a signal arrived (for pipeline code).
void throw_if_interrupted();

} // namespace lockstep

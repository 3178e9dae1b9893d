#pragma once
// Error and Result<T>: how every lockstep library function reports failure.
//
// An Error carries the exit code the CLI will use and a message that already says what was being
// done, to what, and why ("can't open /x: No such file or directory"). The CLI prints it once as
// "lockstep: error: MESSAGE" (spec diagnostics are printed verbatim) and exits with the code.
#include <fmt/format.h>

#include <array>
#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lockstep {

/// Exit codes shared by the CLI, the docs (README "Exit codes") and the tests.
enum class ExitCode : int {
  ok = 0,
  check_failed = 1,  ///< the checked thing is not as required (drift, stale lock, mismatch)
  invalid_input = 2, ///< bad usage, invalid spec, or a malformed image/archive/lock given as input
  external = 3,      ///< a needed external facility is missing or failed (tool, network, registry)
  io = 4,            ///< a local file operation failed (permission denied, disk full)
  internal = 70,     ///< a bug in lockstep
  interrupted = 130, ///< stopped by SIGINT/SIGTERM; nothing half-written is left behind
};

/// The exit-code table: every ExitCode and what it means, in order. `lockstep --help` prints it.
struct ExitCodeMeaning {
  ExitCode code;
  std::string_view meaning;
};
inline constexpr std::array<ExitCodeMeaning, 7> k_exit_codes = {{
    {ExitCode::ok, "success"},
    {ExitCode::check_failed, "the checked thing is not as required (drift, stale lock, mismatch)"},
    {ExitCode::invalid_input, "bad usage, invalid spec, or malformed input (image, archive, lock)"},
    {ExitCode::external, "a needed external facility is missing or failed"},
    {ExitCode::io, "a local file operation failed (permission denied, disk full)"},
    {ExitCode::internal, "a bug in lockstep (please report it)"},
    {ExitCode::interrupted, "interrupted"},
}};

/// A failure with its exit code and a message for the user.
struct Error {
  ExitCode code = ExitCode::internal;
  std::string message;
  /// True when `message` is a complete rendered diagnostic block (spec errors) that the CLI must
  /// print verbatim instead of prefixing it with "lockstep: error: ".
  bool rendered = false;
  /// The exit status (0-255) of the program or rank this error reports (a command not found in the
  /// container is 127, a failed rank's own status...), passed through as lockstep's own exit status
  /// and never cast into an ExitCode; -1 when `code` decides.
  int exit_status = -1;

  /// The process exit status this error ends lockstep with.
  [[nodiscard]] int process_exit() const { return exit_status >= 0 ? exit_status : static_cast<int>(code); }

  /// Returns a copy whose message is prefixed with "CONTEXT: ".
  [[nodiscard]] Error with_context(const std::string& context) const {
    if (rendered) {
      return *this;
    }
    return Error{code, context + ": " + message, rendered, exit_status};
  }
};

/// Shorthands that format the message with fmt.
template <typename... Args> Error invalid_input(fmt::format_string<Args...> f, Args&&... args) {
  return Error{ExitCode::invalid_input, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args> Error io_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{ExitCode::io, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args> Error external_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{ExitCode::external, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args> Error internal_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{ExitCode::internal, fmt::format(f, std::forward<Args>(args)...)};
}

/// "what PATH: strerror(errno)" for a failed system call, as an I/O error; EINTR (a blocking call
/// ended by SIGINT/SIGTERM) is an `interrupted` error instead.
Error errno_error(const std::string& what, int err);

/// The failures of a batch of independent tasks (one slot per task, in input order): none, the one
/// failure as it is, or "N of M THINGS failed:" followed by each message indented, with the first
/// failure's code.
std::optional<Error> combine_errors(const std::vector<std::optional<Error>>& errors, std::string_view things);

/// Either a value or an Error (a small tl::expected).
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : m_v(std::in_place_index<0>, std::move(value)) {} // NOLINT(google-explicit-constructor)
  Result(Error error)
      : m_v(std::in_place_index<1>, std::move(error)) {} // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(m_v);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(m_v);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(m_v));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  [[nodiscard]] const Error& error() const& {
    assert(!ok());
    return std::get<1>(m_v);
  }
  [[nodiscard]] Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(m_v));
  }

private:
  std::variant<T, Error> m_v;
};

/// Result without a value.
template <> class [[nodiscard]] Result<void> {
public:
  Result() = default;
  Result(Error error) : m_error(std::move(error)), m_failed(true) {} // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return !m_failed; }
  explicit operator bool() const { return ok(); }
  [[nodiscard]] const Error& error() const& { return m_error; }
  [[nodiscard]] Error&& error() && { return std::move(m_error); }

private:
  Error m_error;
  bool m_failed = false;
};

/// Thrown inside multi-threaded pipelines where threading Result through every call is awkward;
/// always caught and turned back into a Result at the function that started the pipeline.
class Failure : public std::exception {
public:
  explicit Failure(Error error) : m_error(std::move(error)) {}
  [[nodiscard]] const char* what() const noexcept override { return m_error.message.c_str(); }
  [[nodiscard]] const Error& error() const { return m_error; }

private:
  Error m_error;
};

/// Unwraps a Result inside a function that may throw Failure.
template <typename T> T unwrap(Result<T> r) {
  if (!r) {
    throw Failure(std::move(r).error());
  }
  if constexpr (!std::is_void_v<T>) {
    return std::move(r).value();
  }
}

} // namespace lockstep

#define LS_CONCAT_INNER(a, b) a##b
#define LS_CONCAT(a, b) LS_CONCAT_INNER(a, b)

// NOLINTBEGIN(bugprone-macro-parentheses): `tmp` and `decl` are a name and a declaration, not expressions
/// Evaluates a Result<void>-like expression and returns its error from the enclosing function.
#define LS_TRY(expr) LS_TRY_IMPL(LS_CONCAT(ls_try_result_, __COUNTER__), expr)
#define LS_TRY_IMPL(tmp, expr)                                                                               \
  do {                                                                                                       \
    auto tmp = (expr);                                                                                       \
    if (!tmp) {                                                                                              \
      return std::move(tmp).error();                                                                         \
    }                                                                                                        \
  } while (false)

/// Declares `decl` from the value of a Result, or returns its error from the enclosing function.
/// Usage: LS_TRY_ASSIGN(auto text, read_file(path));
#define LS_TRY_ASSIGN(decl, expr) LS_TRY_ASSIGN_IMPL(LS_CONCAT(ls_try_r_, __COUNTER__), decl, expr)
#define LS_TRY_ASSIGN_IMPL(tmp, decl, expr)                                                                  \
  auto tmp = (expr);                                                                                         \
  if (!tmp) {                                                                                                \
    return std::move(tmp).error();                                                                           \
  }                                                                                                          \
  decl = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

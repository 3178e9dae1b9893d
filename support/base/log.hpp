#pragma once
// Diagnostics on stderr: levels, and a progress line shown only on an interactive terminal.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace lockstep::log {

enum class Level { quiet = 0, normal = 1, debug = 2 };

/// Sets the global level (CLI: --quiet, --debug).
void set_level(Level level);
Level level();
/// Disables progress lines (--json, --no-progress).
void disable_progress();

void write_line(const std::string& line);

template <typename... Args> void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::debug) {
    write_line("lockstep: debug: " + fmt::format(f, std::forward<Args>(args)...));
  }
}
template <typename... Args> void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::normal) {
    write_line(fmt::format(f, std::forward<Args>(args)...));
  }
}
template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... args) {
  write_line("lockstep: warning: " + fmt::format(f, std::forward<Args>(args)...));
}

/// A progress line for one long task ("layer 1/2  112 MiB / 245 MiB  46%"), redrawn at most ten
/// times a second on a terminal and silent otherwise. Thread-safe: advance() may be called from
/// any thread.
class Progress {
public:
  /// `total` may be 0 when unknown.
  Progress(std::string label, std::uint64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t n);
  /// On a terminal, prints `line` above the progress line (one finished part of the task); silent
  /// where the progress line is.
  void note(const std::string& line);
  /// Clears the line.
  void done();

private:
  void draw(bool force);
  std::string m_label;
  std::uint64_t m_total;
  std::atomic<std::uint64_t> m_done{0};
  std::mutex m_mutex;
  std::chrono::steady_clock::time_point m_last_draw{};
  bool m_enabled;
  bool m_drawn = false;
};

/// Enables phase timers (--timings).
void enable_timings();

/// Measures one phase; prints "lockstep: timing: NAME 12.3 ms" on stderr when it ends, if enabled.
class Timer {
public:
  explicit Timer(std::string name);
  ~Timer() { stop(); }
  /// Ends the phase now (prints once).
  void stop();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

private:
  std::string m_name;
  std::chrono::steady_clock::time_point m_start;
  bool m_stopped = false;
};

/// "245.0 MiB".
std::string human_size(std::uint64_t bytes);

} // namespace lockstep::log

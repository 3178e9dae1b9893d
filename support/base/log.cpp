#include "support/base/log.hpp"

#include "support/base/text.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace lockstep::log {

namespace {

std::atomic<Level> g_level{Level::normal};
std::atomic<bool> g_progress_disabled{false};
std::mutex g_write_mutex;
std::atomic<bool> g_timings{false};

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0' && std::string(ci) != "false";
}

} // namespace

void set_level(Level level) {
  g_level = level;
}
Level level() {
  return g_level;
}

namespace {

// True when progress lines may be drawn: stderr is a terminal, not --json, not quiet, not CI.
bool progress_enabled() {
  static const bool tty = ::isatty(STDERR_FILENO) == 1 && !in_ci();
  return tty && !g_progress_disabled && g_level != Level::quiet;
}

} // namespace

void disable_progress() {
  g_progress_disabled = true;
}

void write_line(const std::string& line) {
  const std::string shown = diagnostic_text(line);
  std::lock_guard lock(g_write_mutex);
  std::fputs(shown.c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void enable_timings() {
  g_timings = true;
}

Timer::Timer(std::string name) : m_name(std::move(name)), m_start(std::chrono::steady_clock::now()) {
}

void Timer::stop() {
  if (!m_stopped && g_timings) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_start).count();
    write_line(fmt::format("lockstep: timing: {} {:.1f} ms", m_name, ms));
  }
  m_stopped = true;
}

std::string human_size(std::uint64_t bytes) {
  static constexpr const char* k_units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(k_units)) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, k_units[u]);
}

Progress::Progress(std::string label, std::uint64_t total)
    : m_label(std::move(label)), m_total(total), m_enabled(progress_enabled()) {
}

Progress::~Progress() {
  done();
}

void Progress::advance(std::uint64_t n) {
  m_done += n;
  if (m_enabled) {
    draw(false);
  }
}

void Progress::draw(bool force) {
  std::lock_guard lock(m_mutex);
  auto now = std::chrono::steady_clock::now();
  if (!force && now - m_last_draw < std::chrono::milliseconds(100)) {
    return;
  }
  m_last_draw = now;
  std::uint64_t done = m_done;
  std::string line = m_label + "  " + human_size(done);
  if (m_total > 0) {
    line += " / " + human_size(m_total) + fmt::format("  {:3d}%", static_cast<int>(done * 100 / m_total));
  }
  std::lock_guard wlock(g_write_mutex);
  std::fprintf(stderr, "\r\033[K%s", diagnostic_text(line).c_str());
  std::fflush(stderr);
  m_drawn = true;
}

void Progress::note(const std::string& line) {
  if (!m_enabled) {
    return;
  }
  {
    std::lock_guard lock(m_mutex);
    std::lock_guard wlock(g_write_mutex);
    std::fprintf(stderr, "\r\033[K%s\n", diagnostic_text(line).c_str());
    std::fflush(stderr);
    m_drawn = false;
  }
  draw(true);
}

void Progress::done() {
  std::lock_guard lock(m_mutex);
  if (m_drawn) {
    std::lock_guard wlock(g_write_mutex);
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    m_drawn = false;
  }
  m_enabled = false;
}

} // namespace lockstep::log

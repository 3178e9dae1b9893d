#include "envspec/spec/host_paths.hpp"

#include "support/base/text.hpp"
#include "support/net/http.hpp"
#include "support/system/confine.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <set>
#include <system_error>

namespace lockstep::envspec {

namespace fs = std::filesystem;

namespace {

// More repositories than this behind one git source (through commondir and alternates) is refused.
constexpr std::size_t k_max_git_dirs = 16;
// Entries of one git directory walked for symlinks that lead outside (refs, packs, loose objects).
constexpr std::size_t k_max_git_entries = 1000000;
// The files that redirect git are a line or a few; anything larger is not read.
constexpr std::uint64_t k_max_redirect_file = 64 << 10;

// The lines of a small file inside the confined repository, without comments and blank lines; empty
// when the file is not a regular file. `file` has been confined before this reads it.
std::vector<std::string> redirect_lines(const fs::path& file) {
  std::error_code ec;
  std::vector<std::string> out;
  if (!fs::is_regular_file(file, ec)) {
    return out;
  }
  Result<std::string> text = read_file(file, k_max_redirect_file);
  if (!text) {
    return out;
  }
  for (std::string_view view : text_lines(*text)) {
    std::string line(view);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    if (!line.empty() && line.front() != '#') {
      out.push_back(std::move(line));
    }
  }
  return out;
}

// Follows everything a local repository makes git read, refusing the first place outside `dir`.
class GitRedirects {
public:
  GitRedirects(std::string_view text, const fs::path& dir) : m_text(text), m_dir(dir) {}

  std::optional<std::string> check(const fs::path& repo) {
    std::error_code ec;
    const fs::path dot_git = repo / ".git";
    if (fs::is_regular_file(dot_git, ec)) {
      if (auto p = inside(dot_git, "its .git file")) {
        return p;
      }
      for (const std::string& line : redirect_lines(dot_git)) {
        if (line.rfind("gitdir:", 0) == 0) {
          std::string target = line.substr(7);
          target.erase(0, target.find_first_not_of(" \t"));
          return git_dir(resolve(repo, target), "its .git file");
        }
      }
      return std::nullopt;
    }
    return git_dir(fs::is_directory(dot_git, ec) ? dot_git : repo, "the repository");
  }

private:
  static fs::path resolve(const fs::path& base, const std::string& target) {
    const fs::path t(target);
    return (t.is_absolute() ? t : base / t).lexically_normal();
  }

  // Why `path` (reached through `what`) may not be read, or nullopt.
  std::optional<std::string> inside(const fs::path& path, std::string_view what) {
    Result<Confinement> c = confine_path(path, {m_dir});
    if (!c) {
      return fmt::format("{}: {}", m_text, c.error().message);
    }
    if (c->inside()) {
      return std::nullopt;
    }
    return fmt::format("{}: {} makes git read {}, outside {}; use --allow-outside to allow it", m_text, what,
                       c->real.string(), m_dir.string());
  }

  // Where a walk of `dir` ends before it starts: nullopt to walk it; else what to return (nothing
  // when it was walked already, or the problem: one directory too many, or one outside).
  std::optional<std::optional<std::string>> enter(const fs::path& dir, std::string_view what) {
    if (!m_seen.insert(dir).second) {
      return std::optional<std::string>();
    }
    if (m_seen.size() > k_max_git_dirs) {
      return fmt::format("{}: more than {} repositories behind it (commondir, alternates)", m_text,
                         k_max_git_dirs);
    }
    if (auto p = inside(dir, what)) {
      return p;
    }
    return std::nullopt;
  }

  std::optional<std::string> git_dir(const fs::path& dir, std::string_view what) {
    if (auto done = enter(dir, what)) {
      return *done;
    }
    if (auto p = symlinks_inside(dir)) {
      return p;
    }
    const fs::path commondir = dir / "commondir";
    if (auto p = inside(commondir, "its commondir")) {
      return p;
    }
    for (const std::string& line : redirect_lines(commondir)) {
      if (auto p = git_dir(resolve(dir, line), "its commondir")) {
        return p;
      }
    }
    return objects(dir / "objects", what, false);
  }

  // An object directory; `walk`: one an alternates file names, outside the git directory already
  // walked for symlinks, so walked here.
  std::optional<std::string> objects(const fs::path& dir, std::string_view what, bool walk) {
    if (auto done = enter(dir, what)) {
      return *done;
    }
    if (walk) {
      if (auto p = symlinks_inside(dir)) {
        return p;
      }
    }
    const fs::path alternates = dir / "info" / "alternates";
    if (auto p = inside(alternates, "its objects/info/alternates")) {
      return p;
    }
    for (const std::string& line : redirect_lines(alternates)) {
      if (auto p = objects(resolve(dir, line), "its objects/info/alternates", true)) {
        return p;
      }
    }
    return std::nullopt;
  }

  // Git stores symlinks, so a commit can ship a bare repository whose objects/pack, refs or
  // packed-refs are symlinks into another repository: every symlink in the git directory `dir` must
  // lead inside too. The walk does not follow them, and is bounded.
  std::optional<std::string> symlinks_inside(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return std::nullopt; // not there (a vendored source, say): nothing git could read through it
    }
    // What git itself can't read (permission denied) it can't be led through either.
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    std::size_t entries = 0;
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (++entries > k_max_git_entries) {
        return fmt::format("{}: more than {} files in the git directory {}", m_text, k_max_git_entries,
                           dir.string());
      }
      if (it->is_symlink(ec)) {
        const std::string what = "its " + it->path().lexically_relative(dir).string() + " (a symlink)";
        if (auto p = inside(it->path(), what)) {
          return p;
        }
      }
    }
    if (ec) {
      return fmt::format("{}: can't read the git directory {}: {}", m_text, dir.string(), ec.message());
    }
    return std::nullopt;
  }

  std::string_view m_text;
  fs::path m_dir;
  std::set<fs::path> m_seen;
};

} // namespace

std::optional<std::string> outside_problem(const fs::path& path, std::string_view text, const fs::path& dir,
                                           const ExtraRoots& extra) {
  std::vector<fs::path> roots{dir};
  roots.insert(roots.end(), extra.dirs.begin(), extra.dirs.end());
  Result<Confinement> c = confine_path(path, roots);
  if (!c) {
    return c.error().message;
  }
  if (c->inside()) {
    return std::nullopt;
  }
  const std::string also = extra.dirs.empty() ? std::string() : fmt::format(" or {}", extra.described);
  if (c->through_symlink) {
    return fmt::format("{} leads outside {}{} through a symlink (to {}); use --allow-outside to allow it",
                       text, dir.string(), also, c->real.string());
  }
  return fmt::format(
      "{} is outside the spec's directory {}{} (resolved to {}); use --allow-outside to allow it", text,
      dir.string(), also, path.lexically_normal().string());
}

std::optional<std::string> git_outside_problem(const fs::path& repo, std::string_view text,
                                               const fs::path& dir) {
  if (auto p = outside_problem(repo, text, dir)) {
    return p;
  }
  return GitRedirects(text, dir).check(repo);
}

const ExtraRoots& system_keyring_roots() {
  static const ExtraRoots roots{{"/usr/share/keyrings", "/etc/apt/keyrings", "/etc/apt/trusted.gpg.d"},
                                "the system keyring directories"};
  return roots;
}

std::vector<fs::path> local_roots(const Spec& spec) {
  std::vector<fs::path> out{spec.dir};
  for (const Repo& r : spec.repos) {
    if (r.kind == Repo::Kind::wheels) {
      out.push_back(r.dir);
    } else if (Result<std::optional<fs::path>> local = local_url_path(r.url); local && *local) {
      out.push_back(**local);
    }
  }
  return out;
}

} // namespace lockstep::envspec

#include "support/conda/activation.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string_view>

namespace lockstep::conda {

namespace {

constexpr std::string_view k_env_vars_dir = "etc/conda/env_vars.d/";
constexpr std::string_view k_activate_dir = "etc/conda/activate.d/";
constexpr std::size_t k_max_statements = 4096;
constexpr std::size_t k_max_value = 64 << 10;

bool is_name(std::string_view s) {
  if (s.empty() || (std::isdigit(static_cast<unsigned char>(s[0])) != 0)) {
    return false;
  }
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

std::string_view trim(std::string_view s) {
  const std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) {
    return {};
  }
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The first word of a statement ("if" of "if [ -n x ]; then").
std::string_view first_word(std::string_view s) {
  return s.substr(0, s.find_first_of(" \t;(){"));
}

class Evaluator {
public:
  explicit Evaluator(const std::string& prefix) { m_known["CONDA_PREFIX"] = prefix; }

  Activation take() { return std::move(m_out); }

  void env_vars_file(const std::string& path, const std::string& text) {
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      m_out.partly_evaluated.push_back(path);
      return;
    }
    bool whole = true;
    for (const auto& [name, value] : doc.items()) {
      if (value.is_string() && is_name(name) && value.get_ref<const std::string&>().size() <= k_max_value) {
        set(name, value.get<std::string>());
      } else {
        whole = false;
      }
    }
    if (!whole) {
      m_out.partly_evaluated.push_back(path);
    }
  }

  void script(const std::string& path, const std::string& text) {
    bool whole = true;
    int depth = 0;
    std::size_t statements = 0;
    std::string_view rest = text;
    while (!rest.empty()) {
      const std::size_t nl = rest.find('\n');
      std::string_view line = trim(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      if (line.empty() || line[0] == '#') {
        continue;
      }
      if (++statements > k_max_statements) {
        whole = false;
        break;
      }
      const std::string_view word = first_word(line);
      if (word == "if" || word == "case" || word == "for" || word == "while" || word == "until" ||
          line.ends_with("{")) {
        ++depth;
        whole = false;
        if (line.ends_with(" fi") || line.ends_with(";fi") || line.ends_with(" done") ||
            line.ends_with("}")) {
          --depth; // a block on one line
        }
        continue;
      }
      if (word == "fi" || word == "esac" || word == "done" || word == "}") {
        depth = std::max(0, depth - 1);
        continue;
      }
      if (depth > 0 || !statement(line)) {
        whole = false;
      }
    }
    if (!whole) {
      m_out.partly_evaluated.push_back(path);
    }
  }

private:
  // One top-level statement; false when it isn't one lockstep evaluates.
  bool statement(std::string_view line) {
    if (line.starts_with("unset ")) {
      const std::string_view name = trim(line.substr(6));
      if (!is_name(name)) {
        return false;
      }
      unset(std::string(name));
      return true;
    }
    if (!line.starts_with("export ")) {
      return false;
    }
    line = trim(line.substr(7));
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || !is_name(line.substr(0, eq))) {
      return false;
    }
    std::optional<std::string> value = expand(line.substr(eq + 1));
    if (!value) {
      return false;
    }
    set(std::string(line.substr(0, eq)), std::move(*value));
    return true;
  }

  // A shell word's value: literal characters, '...', "...", and $NAME / ${NAME} of known names.
  std::optional<std::string> expand(std::string_view word) const {
    std::string out;
    char quote = 0;
    for (std::size_t i = 0; i < word.size(); ++i) {
      const char c = word[i];
      if (quote == '\'') {
        if (c == '\'') {
          quote = 0;
        } else {
          out += c;
        }
      } else if (c == '\'' && quote == 0) {
        quote = '\'';
      } else if (c == '"') {
        quote = quote == '"' ? 0 : '"';
      } else if (c == '$') {
        std::string_view name;
        if (i + 1 < word.size() && word[i + 1] == '{') {
          const std::size_t close = word.find('}', i + 2);
          if (close == std::string_view::npos) {
            return std::nullopt;
          }
          name = word.substr(i + 2, close - i - 2);
          i = close;
        } else {
          std::size_t end = i + 1;
          while (end < word.size() &&
                 (std::isalnum(static_cast<unsigned char>(word[end])) != 0 || word[end] == '_')) {
            ++end;
          }
          name = word.substr(i + 1, end - i - 1);
          i = end - 1;
        }
        const auto known = m_known.find(std::string(name));
        if (!is_name(name) || known == m_known.end()) {
          return std::nullopt; // another variable, a default (${X:-y}), $(...), $1 ...
        }
        out += known->second;
      } else if (c == '`' || c == '\\' ||
                 (quote == 0 && (c == ' ' || c == '\t' || c == ';' || c == '&' || c == '|' || c == '<' ||
                                 c == '>' || c == '#'))) {
        return std::nullopt; // command substitution, escapes, a second word or command
      } else {
        out += c;
      }
      if (out.size() > k_max_value) {
        return std::nullopt;
      }
    }
    if (quote != 0) {
      return std::nullopt;
    }
    return out;
  }

  void set(const std::string& name, std::string value) {
    if (name.starts_with("_CONDA_") || name == "CONDA_PREFIX") {
      return;
    }
    m_known[name] = value;
    const auto it =
        std::find_if(m_out.env.begin(), m_out.env.end(), [&](const auto& p) { return p.first == name; });
    if (it != m_out.env.end()) {
      it->second = std::move(value);
    } else {
      m_out.env.emplace_back(name, std::move(value));
    }
  }

  void unset(const std::string& name) {
    if (name == "CONDA_PREFIX") {
      return;
    }
    m_known.erase(name);
    std::erase_if(m_out.env, [&](const auto& p) { return p.first == name; });
  }

  std::map<std::string, std::string> m_known;
  Activation m_out;
};

} // namespace

bool is_activation_path(const std::string& path) {
  const auto in = [&path](std::string_view dir, std::string_view ext) {
    return path.size() > dir.size() + ext.size() && path.starts_with(dir) && path.ends_with(ext) &&
           path.find('/', dir.size()) == std::string::npos;
  };
  return in(k_env_vars_dir, ".json") || in(k_activate_dir, ".sh");
}

Activation evaluate_activation(const std::map<std::string, std::string>& files, const std::string& prefix) {
  Evaluator e(prefix);
  // env_vars.d first, in file-name order, then the scripts in theirs (the map's order is the
  // paths', and within one directory that is the file names').
  for (const auto& [path, text] : files) {
    if (path.starts_with(k_env_vars_dir)) {
      e.env_vars_file(path, text);
    }
  }
  for (const auto& [path, text] : files) {
    if (path.starts_with(k_activate_dir)) {
      e.script(path, text);
    }
  }
  return e.take();
}

} // namespace lockstep::conda

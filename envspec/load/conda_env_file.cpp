// Reading an environment.yml for `lockstep init`. See conda_env_file.hpp.
#include "envspec/load/conda_env_file.hpp"

#include "envspec/yaml/diagnostics.hpp"
#include "envspec/yaml/node.hpp"
#include "support/base/json.hpp"
#include "support/base/text.hpp"
#include "support/conda/match_spec.hpp"
#include "support/conda/parse_error.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>

namespace lockstep::envspec {

namespace {

// "3.11" when `spec` pins one of `names` to X.Y or X.Y.Z ("python=3.11", "python==3.11.9",
// "python 3.11.*").
std::string pinned_x_y(const conda::MatchSpec& spec, std::initializer_list<std::string_view> names) {
  if (std::find(names.begin(), names.end(), spec.name().str()) == names.end() || !spec.version()) {
    return {};
  }
  std::string v = spec.version()->str();
  while (!v.empty() && (v.front() == '=' || v.front() == ' ')) {
    v.erase(0, 1);
  }
  const std::size_t dot = v.find('.');
  if (dot == std::string::npos || dot == 0) {
    return {};
  }
  const std::size_t end = v.find_first_not_of("0123456789", dot + 1);
  const std::string x_y = v.substr(0, end == std::string::npos ? v.size() : end);
  return x_y.size() > dot + 1 && all_digits(x_y.substr(0, dot)) ? x_y : std::string();
}

} // namespace

Result<CondaPrefix> read_conda_prefix(const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path meta = fs::path(prefix) / "conda-meta";
  std::error_code ec;
  std::vector<fs::path> records;
  for (fs::directory_iterator it(meta, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json" && it->is_regular_file(ec)) {
      records.push_back(it->path());
    }
  }
  if (ec) {
    return io_error("init: can't list {}: {}", meta.string(), ec.message());
  }
  std::sort(records.begin(), records.end());
  CondaPrefix out;
  for (const fs::path& file : records) {
    LS_TRY_ASSIGN(const std::string text, read_file(file, 64ULL << 20));
    LS_TRY_ASSIGN(const nlohmann::json j, parse_json(text, file.string(), 16));
    CondaPrefixPackage p{json_string(j, "name"),   json_string(j, "version"), json_string(j, "build"), "",
                         json_string(j, "sha256"), json_string(j, "md5")};
    if (p.name.empty() || p.version.empty() || p.build.empty() ||
        has_controls(p.name + p.version + p.build)) {
      return invalid_input("{}: a conda-meta record names its package's name, version and build",
                           file.string());
    }
    const std::string url = json_string(j, "url");
    const std::size_t file_slash = url.rfind('/');
    const std::size_t subdir_slash = file_slash == std::string::npos || file_slash == 0
                                         ? std::string::npos
                                         : url.rfind('/', file_slash - 1);
    if (url.find("://") == std::string::npos || subdir_slash == std::string::npos ||
        url.starts_with("file:") || has_controls(url)) {
      out.unpinnable.push_back(fmt::format("{} {} {}: installed from {}, not a channel", p.name, p.version,
                                           p.build,
                                           url.empty() ? "a local file" : printable_ascii(url, 200)));
      continue;
    }
    p.channel = url.substr(0, subdir_slash);
    out.packages.push_back(std::move(p));
  }
  std::sort(out.packages.begin(), out.packages.end(),
            [](const CondaPrefixPackage& a, const CondaPrefixPackage& b) { return a.name < b.name; });
  return out;
}

std::string exact_match_spec(const CondaPrefixPackage& p) {
  std::string hash = !p.sha256.empty() ? "[sha256=" + p.sha256 + "]"
                     : !p.md5.empty()  ? "[md5=" + p.md5 + "]"
                                       : "";
  return fmt::format("{}::{}=={}={}{}", conda::canonical_channel(p.channel), p.name, p.version, p.build,
                     hash);
}

Result<Node> environment_root(std::string_view text, const std::string& what) {
  Diagnostics diags;
  std::optional<Node> root = parse_yaml(text, what, diags);
  if (!diags.empty()) {
    return diags.to_error();
  }
  if (!root || !root->is_map()) {
    return invalid_input("{}: expected a map with 'dependencies:' (a conda environment file)", what);
  }
  const MapEntry* deps = root->find("dependencies");
  if (deps == nullptr || !deps->value.is_sequence()) {
    return invalid_input("{}: no 'dependencies:' list (a conda environment file)", what);
  }
  return std::move(*root);
}

Result<CondaEnvFile> read_conda_env_file(std::string_view text, const std::string& what) {
  LS_TRY_ASSIGN(const Node root_node, environment_root(text, what));
  const Node* root = &root_node;
  CondaEnvFile out;
  const auto where = [&what](const Node& n) { return fmt::format("{}:{}", what, n.location.line); };
  if (const MapEntry* name = root->find("name"); name != nullptr && name->value.is_scalar()) {
    out.name = name->value.scalar;
  }
  if (const MapEntry* channels = root->find("channels"); channels != nullptr) {
    if (!channels->value.is_sequence()) {
      return invalid_input("{}: channels: expected a list of channels", where(channels->value));
    }
    for (const Node& c : channels->value.items) {
      if (!c.is_scalar() || trim(c.scalar).empty() || has_controls(c.scalar)) {
        return invalid_input("{}: expected a channel name or URL", where(c));
      }
      if (c.scalar == "nodefaults") {
        out.nodefaults = true;
      } else {
        out.channels.emplace_back(trim(c.scalar));
      }
    }
  }
  if (root->find("variables") != nullptr) {
    out.notes.emplace_back("its variables: are not set in the image (add them to env:)");
  }
  for (const Node& item : root->find("dependencies")->value.items) {
    if (item.is_map()) {
      const MapEntry* pip = item.find("pip");
      if (pip == nullptr || item.entries.size() != 1 || !pip->value.is_sequence()) {
        return invalid_input("{}: expected a conda package or {{pip: [...]}} (CEP 24: another subsection is "
                             "an error)",
                             where(item));
      }
      for (const Node& r : pip->value.items) {
        if (!r.is_scalar() || has_controls(r.scalar)) {
          return invalid_input("{}: expected a pip requirement", where(r));
        }
        out.pip.push_back(r.scalar);
      }
      continue;
    }
    if (!item.is_scalar() || trim(item.scalar).empty()) {
      return invalid_input("{}: expected a conda package (NAME, NAME=VERSION, a MatchSpec)", where(item));
    }
    const std::string spec_text(trim(item.scalar));
    auto spec = conda::MatchSpec::parse(spec_text, conda::SpecMode::lenient);
    if (!spec) {
      return invalid_input("{}: '{}' is not a conda MatchSpec: {}\n{}", where(item), spec_text,
                           spec.error().message, conda::render_caret(spec_text, spec.error()));
    }
    if (const std::string x_y = pinned_x_y(*spec, {"python"}); !x_y.empty()) {
      out.python = x_y;
      out.python_line = item.location.line;
    }
    if (const std::string x_y = pinned_x_y(*spec, {"pytorch-cuda", "cuda-version", "cudatoolkit"});
        !x_y.empty()) {
      out.cuda = x_y;
    }
    out.specs.push_back(spec_text);
  }
  return out;
}

} // namespace lockstep::envspec

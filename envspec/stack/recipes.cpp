// The stack recipes (envspec/stack/recipes.hpp): the version grammar, the loader that reads every
// recipes/**/*.yaml into a RecipeSet with all problems reported together, and where the files come
// from (embedded in the binary, LOCKSTEP_RECIPES_DIR, or a team's recipes checkout).
#include "envspec/stack/recipes.hpp"

#include "envspec/yaml/node.hpp"
#include "envspec/yaml/recipe_reader.hpp"
#include "support/base/text.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <utility>

namespace lockstep::envspec {

/// Defined in build/generated/embedded_recipes.cpp (CMakeLists.txt, "Recipes embedded in the
/// binary"): the bytes of recipes/<relative_path>, or nullopt when there is no such file.
std::optional<std::string_view> embedded_recipe(std::string_view relative_path);

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_max_recipe_size = 1 << 20; // the largest recipe file is a few tens of KiB
constexpr std::size_t k_max_version = 64;
constexpr std::size_t k_max_version_parts = 8;
constexpr std::size_t k_max_constraint = 256;
constexpr std::size_t k_max_clauses = 8;
constexpr std::size_t k_max_text = 4096; // a rule, a note, a source description
constexpr std::string_view k_embedded_prefix = "recipes";

// ---------------------------------------------------------------------------------------------
// Versions

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// A parsed dotted version: numeric parts, and an optional pre-release (a, b or rc, with a number)
/// on the last part.
struct DottedVersion {
  std::vector<std::uint64_t> parts;
  int pre_rank = 3; // 0 a, 1 b, 2 rc, 3 none (a release sorts after its pre-releases)
  std::uint64_t pre_number = 0;
  [[nodiscard]] bool has_pre() const { return pre_rank < 3; }
};

std::uint64_t to_number(std::string_view digits) {
  std::uint64_t n = 0;
  for (char c : digits) {
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

/// "12.1", "530.30.02", "2.1.0rc1": dot-separated runs of 1 to 9 digits; the last may carry a
/// pre-release "a", "b" or "rc" with an optional number.
std::optional<DottedVersion> parse_dotted(std::string_view s) {
  if (s.empty() || s.size() > k_max_version) {
    return std::nullopt;
  }
  DottedVersion v;
  while (true) {
    const std::size_t dot = s.find('.');
    std::string_view part = s.substr(0, dot);
    const bool last = dot == std::string_view::npos;
    std::size_t digits = 0;
    while (digits < part.size() && is_digit(part[digits])) {
      ++digits;
    }
    if (digits == 0 || digits > 9 || v.parts.size() == k_max_version_parts) {
      return std::nullopt;
    }
    v.parts.push_back(to_number(part.substr(0, digits)));
    if (digits < part.size()) {
      if (!last) {
        return std::nullopt; // a pre-release only on the last part
      }
      std::string_view pre = part.substr(digits);
      std::size_t letters = 0;
      while (letters < pre.size() && pre[letters] >= 'a' && pre[letters] <= 'z') {
        ++letters;
      }
      const std::string_view tag = pre.substr(0, letters);
      const std::string_view number = pre.substr(letters);
      if (tag == "a") {
        v.pre_rank = 0;
      } else if (tag == "b") {
        v.pre_rank = 1;
      } else if (tag == "rc") {
        v.pre_rank = 2;
      } else {
        return std::nullopt;
      }
      if (!number.empty() && (!all_digits(number) || number.size() > 9)) {
        return std::nullopt;
      }
      v.pre_number = to_number(number);
    }
    if (last) {
      return v;
    }
    s.remove_prefix(dot + 1);
  }
}

int compare_parsed(const DottedVersion& a, const DottedVersion& b) {
  const std::size_t n = std::max(a.parts.size(), b.parts.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t x = i < a.parts.size() ? a.parts[i] : 0;
    const std::uint64_t y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) {
      return x < y ? -1 : 1;
    }
  }
  if (a.pre_rank != b.pre_rank) {
    return a.pre_rank < b.pre_rank ? -1 : 1;
  }
  if (a.pre_number != b.pre_number) {
    return a.pre_number < b.pre_number ? -1 : 1;
  }
  return 0;
}

constexpr std::array<std::string_view, 6> k_operators = {">=", "<=", ">", "<", "==", "!="};

// ---------------------------------------------------------------------------------------------
// Recipe files

/// The frameworks, in RecipeSet::frameworks order, with their display names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> k_frameworks = {{
    {"pytorch", "PyTorch"},
    {"tensorflow", "TensorFlow"},
    {"jax", "JAX"},
}};

/// One recipe file to parse: its text and the name messages use for it.
struct RecipeText {
  std::string text;
  fs::path origin;
};

/// Placeholders an AptPattern (and a pip name pattern) may use.
constexpr std::array<std::string_view, 6> k_apt_placeholders = {"version", "major",      "minor",
                                                                "cuda",    "cuda_major", "cuda_minor"};

/// Checks `{...}` placeholders in `text` against `allowed`; returns the problem, or "".
template <std::size_t N>
std::string placeholder_problem(std::string_view text, const std::array<std::string_view, N>& allowed) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '}') {
      return "a '}' without its '{'";
    }
    if (text[i] != '{') {
      continue;
    }
    const std::size_t close = text.find('}', i);
    if (close == std::string_view::npos) {
      return "a '{' without its '}'";
    }
    const std::string_view name = text.substr(i + 1, close - i - 1);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string list;
      for (std::size_t k = 0; k < N; ++k) {
        list += fmt::format("{}{{{}}}", k == 0 ? "" : (k + 1 == N ? " or " : ", "), allowed[k]);
      }
      return fmt::format("unknown placeholder '{{{}}}'; expected {}", name, list);
    }
    i = close;
  }
  return {};
}

/// `text` with every `{...}` placeholder removed (for checking the characters around them).
std::string without_placeholders(std::string_view text) {
  std::string out;
  bool inside = false;
  for (char c : text) {
    if (c == '{') {
      inside = true;
    } else if (c == '}') {
      inside = false;
    } else if (!inside) {
      out += c;
    }
  }
  return out;
}

bool chars_in(std::string_view s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || extra.find(c) != std::string_view::npos;
  });
}

bool is_upper_or_lower_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/// A PyPI project name, optionally with extras: "nvidia-nccl-cu12", "cuda-toolkit[cublas,cudart]".
bool valid_wheel_name(std::string_view s) {
  if (s.empty() || s.size() > 200) {
    return false;
  }
  const std::size_t bracket = s.find('[');
  const std::string_view name = s.substr(0, bracket);
  auto name_char = [](char c) { return is_upper_or_lower_alnum(c) || c == '.' || c == '_' || c == '-'; };
  if (name.empty() || !is_upper_or_lower_alnum(name.front()) || !is_upper_or_lower_alnum(name.back()) ||
      !std::all_of(name.begin(), name.end(), name_char)) {
    return false;
  }
  if (bracket == std::string_view::npos) {
    return true;
  }
  const std::string_view extras = s.substr(bracket);
  if (extras.size() < 3 || extras.back() != ']') {
    return false;
  }
  const std::string_view inner = extras.substr(1, extras.size() - 2);
  return !inner.empty() && inner.front() != ',' && inner.back() != ',' &&
         std::all_of(inner.begin(), inner.end(), [&](char c) { return name_char(c) || c == ','; });
}

/// What a version field holds.
enum class VersionKind {
  release,            ///< any dotted version ("2.18.1", "8.9.2.26", "2.1.0rc1")
  minor,              ///< exactly X.Y ("12.1")
  major,              ///< one number ("12")
  driver,             ///< a driver version, 1 to 4 numeric parts ("530.30.02", "525")
  compute_capability, ///< X.Y ("8.6")
};

bool version_is(std::string_view s, VersionKind kind) {
  const std::optional<DottedVersion> v = parse_dotted(s);
  if (!v) {
    return false;
  }
  switch (kind) {
  case VersionKind::release:
    return true;
  case VersionKind::minor:
  case VersionKind::compute_capability:
    return v->parts.size() == 2 && !v->has_pre();
  case VersionKind::major:
    return v->parts.size() == 1 && !v->has_pre();
  case VersionKind::driver:
    return v->parts.size() <= 4 && !v->has_pre();
  }
  return false;
}

std::string version_expectation(VersionKind kind) {
  switch (kind) {
  case VersionKind::release:
    return "a dotted version such as 2.18.1";
  case VersionKind::minor:
    return "a version X.Y such as 12.1";
  case VersionKind::major:
    return "a major version such as 12";
  case VersionKind::driver:
    return "a driver version such as 530.30.02";
  case VersionKind::compute_capability:
    return "a compute capability X.Y such as 8.6";
  }
  return {};
}

/// The major part of a dotted version ("12" of "12.1").
std::string major_of(std::string_view version) {
  return std::string(version.substr(0, version.find('.')));
}

/// The first two parts ("12.1" of "12.1.105").
std::string major_minor_of(std::string_view version) {
  const std::size_t first = version.find('.');
  if (first == std::string_view::npos) {
    return std::string(version);
  }
  return std::string(version.substr(0, version.find('.', first + 1)));
}

/// Which way a list of versions runs.
enum class Order { newest_first, oldest_first };

/// One versioned row of a list, for the order and duplicate checks.
struct VersionedRow {
  std::string version;
  const Node* item = nullptr;
  std::string path;
  std::string_view key;
};

/// Reads one recipe file's rows into the model, reporting every problem into one Diagnostics.
class RecipeLoader : public RecipeReader {
public:
  explicit RecipeLoader(Diagnostics& diags) : RecipeReader(diags) {}

  void read_cuda(const Node& root, CudaRecipe& out);
  void read_cudnn(const Node& root, CudnnRecipe& out);
  void read_nccl(const Node& root, NcclRecipe& out);
  void read_mpi(const Node& root, std::string_view impl, MpiRecipe& out);
  void read_library(const Node& root, std::string_view name, LibraryRecipe& out);
  void read_python(const Node& root, PythonRecipe& out);
  void read_framework(const Node& root, std::string_view name, FrameworkRecipe& out);

private:
  void check_kind(const Node& root, std::string_view kind);
  std::vector<RecipeSourceRef> read_sources(const Node& root);
  /// The map items of the list under `key`, with their key paths; non-maps are reported.
  std::vector<std::pair<const Node*, std::string>> rows(const Node& map, const std::string& path,
                                                        std::string_view key, bool required);
  Provenance provenance(const Node& item, const std::string& path);
  std::optional<std::string> version(const Node& item, const std::string& path, std::string_view key,
                                     VersionKind kind, bool required = true);
  std::string constraint(const Node& item, const std::string& path, std::string_view key);
  std::vector<RecipeFact> facts(const Node& map, const std::string& path, std::string_view key);
  std::vector<AptPattern> apt_list(const Node& map, const std::string& path, std::string_view key);
  std::string pip_pattern(const Node& map, const std::string& path, std::string_view key);
  std::string text(const Node& map, const std::string& path, std::string_view key, bool required);
  void check_order(const std::vector<VersionedRow>& rows, std::string_view what, Order order);
  /// Reports `message` at the value of `key` in `item`, or at `item` itself when `key` is empty.
  void report(const Node& item, const std::string& path, std::string_view key, const std::string& message);
  FrameworkVariant read_variant(const Node& item, const std::string& path);
  std::vector<std::string> compute_capabilities(const Node& item, const std::string& path, const char* key);

  std::set<std::string, std::less<>> m_sources; // the current file's `sources:` keys
};

void RecipeLoader::check_kind(const Node& root, std::string_view kind) {
  if (auto found = scalar(root, "", "recipe")) {
    expect(*found == kind, root, "", "recipe", fmt::format("expected '{}', found '{}'", kind, *found));
  }
}

std::vector<RecipeSourceRef> RecipeLoader::read_sources(const Node& root) {
  m_sources = source_names(root, false);
  std::vector<RecipeSourceRef> out;
  const MapEntry* s = root.find("sources");
  if (s == nullptr || !s->value.is_map()) {
    return out;
  }
  for (const MapEntry& e : s->value.entries) {
    std::optional<std::string> description = entry_string(e, "sources");
    if (description && (description->empty() || description->size() > k_max_text)) {
      m_diags.error(e.value.location, child_path("sources", e.key),
                    "expected a one-line description: what the source is and where (URL, repository path)");
    }
    out.push_back(RecipeSourceRef{e.key, description.value_or("")});
  }
  return out;
}

std::vector<std::pair<const Node*, std::string>> RecipeLoader::rows(const Node& map, const std::string& path,
                                                                    std::string_view key, bool required) {
  std::vector<std::pair<const Node*, std::string>> out;
  const std::vector<Node>* items = list(map, path, key);
  if (items == nullptr) {
    if (required && map.find(key) == nullptr) {
      m_diags.error(map.location, path.empty() ? std::string(key) : path,
                    fmt::format("missing key '{}'", key));
    }
    return out;
  }
  for (std::size_t i = 0; i < items->size(); ++i) {
    const Node& item = (*items)[i];
    std::string item_key = item_path(child_path(path, key), i);
    if (!expect_map(item, item_key)) {
      continue;
    }
    out.emplace_back(&item, std::move(item_key));
  }
  return out;
}

Provenance RecipeLoader::provenance(const Node& item, const std::string& path) {
  Provenance why;
  check_source(item, path, m_sources);
  if (const MapEntry* e = item.find("source")) {
    if (e->value.is_scalar()) {
      why.sources.push_back(e->value.scalar);
    } else if (e->value.is_sequence()) {
      for (const Node& n : e->value.items) {
        if (n.is_scalar()) {
          why.sources.push_back(n.scalar);
        }
      }
    }
  }
  if (auto confidence = scalar(item, path, "confidence", false)) {
    if (*confidence == "primary") {
      why.confidence = Confidence::primary;
    } else if (*confidence == "secondary") {
      why.confidence = Confidence::secondary;
    } else if (*confidence == "observed") {
      why.confidence = Confidence::observed;
    } else if (*confidence == "unverified") {
      why.confidence = Confidence::unverified;
    } else {
      expect(false, item, path, "confidence",
             fmt::format("unknown confidence '{}'; expected primary, secondary, observed or unverified",
                         *confidence));
    }
  }
  (void)text(item, path, "note", false);
  why.where = fmt::format("{}:{}", item.location.file.string(), item.location.line);
  return why;
}

std::optional<std::string> RecipeLoader::version(const Node& item, const std::string& path,
                                                 std::string_view key, VersionKind kind, bool required) {
  std::optional<std::string> v = scalar(item, path, key, required);
  if (!v) {
    return std::nullopt;
  }
  if (!version_is(*v, kind)) {
    expect(false, item, path, key, fmt::format("expected {}, found '{}'", version_expectation(kind), *v));
    return std::nullopt;
  }
  return v;
}

std::string RecipeLoader::constraint(const Node& item, const std::string& path, std::string_view key) {
  std::optional<std::string> v = scalar(item, path, key, false);
  if (!v || v->empty()) {
    return {};
  }
  auto parsed = VersionConstraint::parse(*v);
  if (!parsed) {
    expect(false, item, path, key, parsed.error().message);
    return {};
  }
  return *v;
}

std::string RecipeLoader::text(const Node& map, const std::string& path, std::string_view key,
                               bool required) {
  std::optional<std::string> v = scalar(map, path, key, required);
  if (v && (v->empty() || v->size() > k_max_text)) {
    expect(false, map, path, key, fmt::format("expected a text of 1 to {} characters", k_max_text));
  }
  return v.value_or("");
}

std::vector<RecipeFact> RecipeLoader::facts(const Node& map, const std::string& path, std::string_view key) {
  std::vector<RecipeFact> out;
  for (const auto& [item, item_key] : rows(map, path, key, false)) {
    check_keys(*item, item_key, {"text", "source", "confidence", "note"});
    RecipeFact fact;
    fact.text = text(*item, item_key, "text", true);
    fact.why = provenance(*item, item_key);
    out.push_back(std::move(fact));
  }
  return out;
}

std::vector<AptPattern> RecipeLoader::apt_list(const Node& map, const std::string& path,
                                               std::string_view key) {
  std::vector<AptPattern> out;
  const auto items = rows(map, path, key, true);
  const MapEntry* e = map.find(key);
  if (e != nullptr && e->value.is_sequence() && e->value.items.empty()) {
    m_diags.error(e->value.location, child_path(path, key), "expected at least one package");
  }
  for (const auto& [item, item_key] : items) {
    check_keys(*item, item_key, {"name", "version", "source", "confidence", "note"});
    AptPattern p;
    if (auto name = scalar(*item, item_key, "name")) {
      p.name = *name;
      std::string problem = placeholder_problem(p.name, k_apt_placeholders);
      const std::string bare = without_placeholders(p.name);
      if (problem.empty() && (p.name.empty() || p.name.size() > 200 || !chars_in(bare, ".+-") ||
                              (p.name.front() != '{' && !is_upper_or_lower_alnum(p.name.front())))) {
        problem = fmt::format("'{}' is not a Debian package name (lowercase letters, digits, '.', '+', "
                              "'-', and placeholders)",
                              p.name);
      }
      expect(problem.empty(), *item, item_key, "name", problem);
    }
    if (auto version = scalar(*item, item_key, "version", false)) {
      p.version = *version;
      std::string problem = placeholder_problem(p.version, k_apt_placeholders);
      if (problem.empty() &&
          (p.version.size() > 200 || !std::all_of(p.version.begin(), p.version.end(), [](char c) {
             return is_upper_or_lower_alnum(c) ||
                    std::string_view(".+~:-*{}_").find(c) != std::string_view::npos;
           }))) {
        problem = fmt::format("'{}' is not a Debian version pattern (version characters, '*' globs and "
                              "placeholders)",
                              p.version);
      }
      expect(problem.empty(), *item, item_key, "version", problem);
    }
    if (item->find("source") != nullptr || item->find("confidence") != nullptr) {
      (void)provenance(*item, item_key);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string RecipeLoader::pip_pattern(const Node& map, const std::string& path, std::string_view key) {
  std::optional<std::string> v = scalar(map, path, key);
  if (!v) {
    return {};
  }
  std::string problem = placeholder_problem(*v, k_apt_placeholders);
  if (problem.empty() && !valid_wheel_name(without_placeholders(*v))) {
    problem = fmt::format("'{}' is not a PyPI project name", *v);
  }
  expect(problem.empty(), map, path, key, problem);
  return *v;
}

void RecipeLoader::report(const Node& item, const std::string& path, std::string_view key,
                          const std::string& message) {
  if (key.empty()) {
    m_diags.error(item.location, path, message);
  } else {
    expect(false, item, path, key, message);
  }
}

void RecipeLoader::check_order(const std::vector<VersionedRow>& rows, std::string_view what, Order order) {
  struct ByVersion {
    bool operator()(const std::string& a, const std::string& b) const { return compare_dotted(a, b) < 0; }
  };
  std::map<std::string, int, ByVersion> seen; // version -> line of its first row
  const VersionedRow* previous = nullptr;
  for (const VersionedRow& row : rows) {
    auto [it, inserted] = seen.emplace(row.version, row.item->location.line);
    if (!inserted) {
      report(*row.item, row.path, row.key,
             fmt::format("{} {} is listed twice (first on line {})", what, row.version, it->second));
      continue;
    }
    if (previous != nullptr) {
      const int c = compare_dotted(previous->version, row.version);
      if (order == Order::newest_first && c < 0) {
        report(*row.item, row.path, row.key,
               fmt::format("{} {} comes after {}, but this list is newest first", what, row.version,
                           previous->version));
      } else if (order == Order::oldest_first && c > 0) {
        report(*row.item, row.path, row.key,
               fmt::format("{} {} comes after {}, but this list is oldest first", what, row.version,
                           previous->version));
      }
    }
    previous = &row;
  }
}

// ---- recipes/cuda/cuda.yaml ------------------------------------------------------------------

void RecipeLoader::read_cuda(const Node& root, CudaRecipe& out) {
  check_keys(root, "", {"recipe", "sources", "lines", "mvc", "compute", "apt"});
  check_kind(root, "cuda");
  out.sources = read_sources(root);

  std::vector<VersionedRow> order;
  for (const auto& [item, path] : rows(root, "", "lines", true)) {
    check_keys(*item, path, {"cuda", "driver_branch", "source", "confidence", "note"});
    CudaLine line;
    if (auto v = version(*item, path, "cuda", VersionKind::minor)) {
      line.version = *v;
      order.push_back({*v, item, path, "cuda"});
    }
    if (auto branch = scalar(*item, path, "driver_branch", false)) {
      line.driver_branch = *branch;
      expect(branch->size() >= 2 && branch->size() <= 8 && branch->front() == 'R' &&
                 all_digits(std::string_view(*branch).substr(1)),
             *item, path, "driver_branch",
             fmt::format("expected a driver branch such as R615, found '{}'", *branch));
    }
    line.why = provenance(*item, path);
    out.lines.push_back(std::move(line));
  }
  check_order(order, "CUDA", Order::newest_first);

  order.clear();
  for (const auto& [item, path] : rows(root, "", "mvc", true)) {
    check_keys(*item, path, {"major", "linux_min", "linux_below", "source", "confidence", "note"});
    CudaMvcRule rule;
    if (auto v = version(*item, path, "major", VersionKind::major)) {
      rule.major = *v;
      order.push_back({*v, item, path, "major"});
    }
    rule.linux_min = version(*item, path, "linux_min", VersionKind::driver).value_or("");
    rule.linux_below = version(*item, path, "linux_below", VersionKind::driver, false).value_or("");
    if (!rule.linux_min.empty() && !rule.linux_below.empty()) {
      expect(compare_dotted(rule.linux_min, rule.linux_below) < 0, *item, path, "linux_below",
             fmt::format("linux_below {} is not above linux_min {}", rule.linux_below, rule.linux_min));
    }
    rule.why = provenance(*item, path);
    out.mvc.push_back(std::move(rule));
  }
  check_order(order, "CUDA major", Order::newest_first);

  order.clear();
  for (const auto& [item, path] : rows(root, "", "compute", true)) {
    check_keys(*item, path, {"cuda", "min_cc", "added", "source", "confidence", "note"});
    CudaComputeRow row;
    if (auto v = version(*item, path, "cuda", VersionKind::minor)) {
      row.cuda = *v;
      order.push_back({*v, item, path, "cuda"});
    }
    row.min_cc = version(*item, path, "min_cc", VersionKind::compute_capability, false).value_or("");
    if (auto added = string_list(*item, path, "added")) {
      for (std::size_t i = 0; i < added->size(); ++i) {
        const std::string& cc = (*added)[i];
        if (!version_is(cc, VersionKind::compute_capability)) {
          m_diags.error(item->find("added")->value.items[i].location, item_path(child_path(path, "added"), i),
                        fmt::format("expected {}, found '{}'",
                                    version_expectation(VersionKind::compute_capability), cc));
          continue;
        }
        row.added.push_back(cc);
      }
    }
    if (item->find("min_cc") == nullptr && item->find("added") == nullptr) {
      report(*item, path, "", "expected 'min_cc' or 'added' (what this CUDA release changed)");
    }
    row.why = provenance(*item, path);
    out.compute.push_back(std::move(row));
  }
  check_order(order, "CUDA", Order::oldest_first);

  const MapEntry* apt = root.find("apt");
  if (apt == nullptr || !apt->value.is_map()) {
    m_diags.error(apt != nullptr ? apt->value.location : root.location, "apt",
                  "expected a map with 'repo', 'flavors' and 'source'");
    return;
  }
  const Node& a = apt->value;
  check_keys(a, "apt", {"repo", "flavors", "source", "confidence", "note"});
  if (auto repo = scalar(a, "apt", "repo")) {
    out.apt_repo = *repo;
    static constexpr std::array<std::string_view, 2> k_repo_placeholders = {"distro", "arch"};
    std::string problem = placeholder_problem(*repo, k_repo_placeholders);
    if (problem.empty() && (!repo->starts_with("https://") || repo->size() > 512 ||
                            repo->find_first_of(" \t\n") != std::string::npos)) {
      problem = fmt::format("expected an https:// URL, found '{}'", *repo);
    }
    expect(problem.empty(), a, "apt", "repo", problem);
  }
  const MapEntry* flavors = a.find("flavors");
  if (flavors == nullptr || !flavors->value.is_map()) {
    m_diags.error(flavors != nullptr ? flavors->value.location : a.location, "apt.flavors",
                  "expected a map with the packages of 'base', 'runtime' and 'devel'");
  } else {
    check_keys(flavors->value, "apt.flavors", {"base", "runtime", "devel"});
    for (std::string_view flavor : {"base", "runtime", "devel"}) {
      out.apt[std::string(flavor)] = apt_list(flavors->value, "apt.flavors", flavor);
    }
  }
  (void)provenance(a, "apt");
}

// ---- recipes/cudnn/cudnn.yaml ----------------------------------------------------------------

void RecipeLoader::read_cudnn(const Node& root, CudnnRecipe& out) {
  check_keys(root, "", {"recipe", "sources", "series", "apt", "pip", "rules"});
  check_kind(root, "cudnn");
  out.sources = read_sources(root);

  std::vector<VersionedRow> order;
  for (const auto& [item, path] : rows(root, "", "series", true)) {
    check_keys(*item, path, {"series", "cuda", "min_cc", "source", "confidence", "note"});
    CudnnSeries s;
    if (auto v = version(*item, path, "series", VersionKind::release)) {
      s.series = *v;
      order.push_back({*v, item, path, "series"});
    }
    const std::vector<MapEntry>* cuda = entries(*item, path, "cuda");
    if ((cuda == nullptr && item->find("cuda") == nullptr) || (cuda != nullptr && cuda->empty())) {
      expect(false, *item, path, "cuda",
             "expected a map from CUDA majors to ranges such as {\"12\": \"12.0-12.2\"}");
    } else if (cuda != nullptr) {
      const std::string cuda_path = child_path(path, "cuda");
      for (const MapEntry& e : *cuda) {
        if (!version_is(e.key, VersionKind::major)) {
          m_diags.error(e.key_location, child_path(cuda_path, e.key),
                        fmt::format("expected a CUDA major such as 12, found '{}'", e.key));
          continue;
        }
        std::optional<std::string> range = entry_string(e, cuda_path);
        if (!range) {
          continue;
        }
        const std::size_t dash = range->find('-');
        const std::string low = range->substr(0, dash);
        const std::string high = dash == std::string::npos ? low : range->substr(dash + 1);
        const bool ok = version_is(low, VersionKind::minor) && version_is(high, VersionKind::minor) &&
                        major_of(low) == e.key && major_of(high) == e.key && compare_dotted(low, high) <= 0;
        if (!ok) {
          m_diags.error(e.value.location, child_path(cuda_path, e.key),
                        fmt::format("expected a range of CUDA {0} versions such as {0}.0-{0}.2, found '{1}'",
                                    e.key, *range));
          continue;
        }
        s.cuda[e.key] = *range;
      }
    }
    s.min_cc = version(*item, path, "min_cc", VersionKind::compute_capability, false).value_or("");
    s.why = provenance(*item, path);
    out.series.push_back(std::move(s));
  }
  check_order(order, "cuDNN", Order::newest_first);

  if (const std::vector<MapEntry>* apt = entries(root, "", "apt")) {
    for (const MapEntry& e : *apt) {
      if (!version_is(e.key, VersionKind::major)) {
        m_diags.error(e.key_location, child_path("apt", e.key),
                      fmt::format("expected a cuDNN major such as 9, found '{}'", e.key));
        continue;
      }
      out.apt[e.key] = apt_list(root.find("apt")->value, "apt", e.key);
    }
  } else if (root.find("apt") == nullptr) {
    m_diags.error(root.location, "apt", "missing key 'apt'");
  }
  out.pip = pip_pattern(root, "", "pip");
  out.rules = facts(root, "", "rules");
}

// ---- recipes/nccl/nccl.yaml ------------------------------------------------------------------

void RecipeLoader::read_nccl(const Node& root, NcclRecipe& out) {
  check_keys(root, "", {"recipe", "sources", "releases", "apt", "pip", "rules"});
  check_kind(root, "nccl");
  out.sources = read_sources(root);

  std::vector<VersionedRow> order;
  for (const auto& [item, path] : rows(root, "", "releases", true)) {
    check_keys(*item, path, {"nccl", "cuda", "source", "confidence", "note"});
    NcclRelease r;
    if (auto v = version(*item, path, "nccl", VersionKind::release)) {
      r.version = *v;
      order.push_back({*v, item, path, "nccl"});
    }
    if (auto builds = string_list(*item, path, "cuda")) {
      std::set<std::string> seen;
      for (std::size_t i = 0; i < builds->size(); ++i) {
        const std::string& b = (*builds)[i];
        const SourceLocation& at = item->find("cuda")->value.items[i].location;
        const std::string at_path = item_path(child_path(path, "cuda"), i);
        if (!version_is(b, VersionKind::minor) && !version_is(b, VersionKind::major)) {
          m_diags.error(
              at, at_path,
              fmt::format("expected a CUDA X.Y (an apt build) or a major (a wheel), found '{}'", b));
        } else if (!seen.insert(b).second) {
          m_diags.error(at, at_path, fmt::format("CUDA {} is listed twice", b));
        } else {
          r.cuda_builds.push_back(b);
        }
      }
      expect(!builds->empty(), *item, path, "cuda", "expected at least one CUDA build");
    } else if (item->find("cuda") == nullptr) {
      m_diags.error(item->location, path, "missing key 'cuda'");
    }
    r.why = provenance(*item, path);
    out.releases.push_back(std::move(r));
  }
  check_order(order, "NCCL", Order::newest_first);
  out.apt = apt_list(root, "", "apt");
  out.pip = pip_pattern(root, "", "pip");
  out.rules = facts(root, "", "rules");
}

// ---- recipes/openmpi/openmpi.yaml, recipes/mpich/mpich.yaml -------------------------------------

void RecipeLoader::read_mpi(const Node& root, std::string_view impl, MpiRecipe& out) {
  check_keys(root, "", {"recipe", "sources", "series", "apt", "rules"});
  check_kind(root, impl);
  out.impl = std::string(impl);
  out.sources = read_sources(root);

  std::vector<VersionedRow> order;
  for (const auto& [item, path] : rows(root, "", "series", true)) {
    check_keys(*item, path, {"series", "pmix", "soname", "notes", "source", "confidence", "note"});
    MpiSeries s;
    if (auto v = version(*item, path, "series", VersionKind::release)) {
      s.series = *v;
      order.push_back({*v, item, path, "series"});
    }
    s.pmix = constraint(*item, path, "pmix");
    if (auto soname = scalar(*item, path, "soname", false)) {
      s.soname = *soname;
      const std::size_t so = soname->find(".so");
      const std::string_view suffix = so == std::string::npos ? "" : std::string_view(*soname).substr(so + 3);
      const bool ok =
          soname->starts_with("lib") && so != std::string::npos && so > 3 &&
          chars_in(soname->substr(0, so), "_+-") &&
          (suffix.empty() || (suffix.front() == '.' && version_is(suffix.substr(1), VersionKind::driver)));
      expect(ok, *item, path, "soname",
             fmt::format("expected a library soname such as libmpi.so.40, found '{}'", *soname));
    }
    s.notes = facts(*item, path, "notes");
    s.why = provenance(*item, path);
    out.series.push_back(std::move(s));
  }
  check_order(order, impl == "openmpi" ? "Open MPI" : "MPICH", Order::newest_first);
  out.apt = apt_list(root, "", "apt");
  out.rules = facts(root, "", "rules");
}

// ---- recipes/ucx/ucx.yaml, recipes/pmix/pmix.yaml ----------------------------------------------

void RecipeLoader::read_library(const Node& root, std::string_view name, LibraryRecipe& out) {
  check_keys(root, "", {"recipe", "sources", "apt", "facts"});
  check_kind(root, name);
  out.name = std::string(name);
  out.sources = read_sources(root);
  out.apt = apt_list(root, "", "apt");
  out.facts = facts(root, "", "facts");
}

// ---- recipes/python/python.yaml --------------------------------------------------------------

void RecipeLoader::read_python(const Node& root, PythonRecipe& out) {
  check_keys(root, "", {"recipe", "sources", "versions", "apt"});
  check_kind(root, "python");
  out.sources = read_sources(root);
  std::vector<VersionedRow> order;
  for (const auto& [item, path] : rows(root, "", "versions", true)) {
    check_keys(*item, path, {"python", "debian", "source", "confidence", "note"});
    PythonVersion v;
    if (auto found = version(*item, path, "python", VersionKind::minor)) {
      v.version = *found;
      order.push_back({*found, item, path, "python"});
    }
    if (auto suites = string_list(*item, path, "debian")) {
      for (std::size_t i = 0; i < suites->size(); ++i) {
        const std::string& suite = (*suites)[i];
        if (suite.empty() || suite.size() > 64 || !chars_in(suite, ".-")) {
          m_diags.error(
              item->find("debian")->value.items[i].location, item_path(child_path(path, "debian"), i),
              fmt::format("expected a Debian suite or codename such as bookworm, found '{}'", suite));
          continue;
        }
        v.debian.push_back(suite);
      }
    }
    v.why = provenance(*item, path);
    out.versions.push_back(std::move(v));
  }
  check_order(order, "Python", Order::newest_first);
  out.apt = apt_list(root, "", "apt");
}

// ---- recipes/{pytorch,tensorflow,jax}/*.yaml ---------------------------------------------------

// `archs:`-like lists: compute capabilities, "9.0a"/"10.0f" the architecture-specific and family
// targets of sm_90a, sm_100f.
std::vector<std::string> RecipeLoader::compute_capabilities(const Node& item, const std::string& path,
                                                            const char* key) {
  std::vector<std::string> out;
  if (auto archs = string_list(item, path, key)) {
    for (std::size_t i = 0; i < archs->size(); ++i) {
      const std::string& arch = (*archs)[i];
      const std::string cc =
          (arch.ends_with('a') || arch.ends_with('f')) ? arch.substr(0, arch.size() - 1) : arch;
      if (!version_is(cc, VersionKind::compute_capability)) {
        m_diags.error(item.find(key)->value.items[i].location, item_path(child_path(path, key), i),
                      fmt::format("expected a compute capability such as 8.6 or 9.0a, found '{}'", arch));
        continue;
      }
      out.push_back(arch);
    }
  }
  return out;
}

FrameworkVariant RecipeLoader::read_variant(const Node& item, const std::string& path) {
  check_keys(item, path,
             {"tag", "cuda", "cudnn", "nccl", "driver_min", "min_cc", "archs", "platforms", "arm64_archs",
              "pypi_default", "status", "index", "wheels", "pins", "system", "source", "confidence", "note"});
  FrameworkVariant v;
  if (auto tag = scalar(item, path, "tag")) {
    v.tag = *tag;
    expect(
        !tag->empty() && tag->size() <= 32 && chars_in(*tag, "._-"), item, path, "tag",
        fmt::format("expected a variant tag such as cu121 (lowercase letters, digits, '.', '_', '-'), found "
                    "'{}'",
                    *tag));
  }
  v.cuda = constraint(item, path, "cuda");
  v.cudnn = constraint(item, path, "cudnn");
  v.nccl = constraint(item, path, "nccl");
  if (auto driver = scalar(item, path, "driver_min", false); driver && !driver->empty()) {
    v.driver_min = version(item, path, "driver_min", VersionKind::driver).value_or("");
  }
  if (auto cc = scalar(item, path, "min_cc", false); cc && !cc->empty()) {
    v.min_cc = version(item, path, "min_cc", VersionKind::compute_capability).value_or("");
  }
  v.archs = compute_capabilities(item, path, "archs");
  v.arm64_archs = compute_capabilities(item, path, "arm64_archs");
  if (auto platforms = string_list(item, path, "platforms")) {
    v.platforms.clear();
    for (std::size_t i = 0; i < platforms->size(); ++i) {
      const std::string& platform = (*platforms)[i];
      if (platform != "linux/amd64" && platform != "linux/arm64") {
        m_diags.error(item.find("platforms")->value.items[i].location,
                      item_path(child_path(path, "platforms"), i),
                      fmt::format("expected linux/amd64 or linux/arm64, found '{}'", platform));
        continue;
      }
      v.platforms.push_back(platform);
    }
    expect(!v.platforms.empty(), item, path, "platforms", "expected at least one platform");
  }
  expect(v.arm64_archs.empty() ||
             std::find(v.platforms.begin(), v.platforms.end(), "linux/arm64") != v.platforms.end(),
         item, path, "arm64_archs", "arm64_archs is for a variant whose platforms include linux/arm64");
  v.pypi_default = boolean(item, path, "pypi_default").value_or(false);
  if (auto status = scalar(item, path, "status")) {
    v.status = *status;
    expect(*status == "stable" || *status == "experimental", item, path, "status",
           fmt::format("expected stable or experimental, found '{}'", *status));
  }
  if (auto index = scalar(item, path, "index", false); index && !index->empty()) {
    v.index = *index;
    expect(index->starts_with("https://") && index->size() <= 512 &&
               index->find_first_of(" \t\n{}") == std::string::npos,
           item, path, "index", fmt::format("expected an https:// wheel index URL, found '{}'", *index));
  }
  if (auto wheels = string_list(item, path, "wheels")) {
    for (std::size_t i = 0; i < wheels->size(); ++i) {
      const std::string& w = (*wheels)[i];
      static constexpr std::array<std::string_view, 1> k_wheel_placeholders = {"version"};
      std::string problem = placeholder_problem(w, k_wheel_placeholders);
      const std::string bare = without_placeholders(w);
      const std::size_t op = bare.find_first_of("=<>!~");
      if (problem.empty() && (w.size() > 200 || !valid_wheel_name(bare.substr(0, op)) ||
                              !std::all_of(bare.begin(), bare.end(), [](char c) {
                                return is_upper_or_lower_alnum(c) ||
                                       std::string_view("._-[],=<>!~*+").find(c) != std::string_view::npos;
                              }))) {
        problem = fmt::format("expected a requirement such as torch=={{version}}, found '{}'", w);
      }
      if (!problem.empty()) {
        m_diags.error(item.find("wheels")->value.items[i].location, item_path(child_path(path, "wheels"), i),
                      problem);
        continue;
      }
      v.wheels.push_back(w);
    }
    expect(!wheels->empty(), item, path, "wheels", "expected at least one wheel to request");
  } else if (item.find("wheels") == nullptr) {
    m_diags.error(item.location, path, "missing key 'wheels'");
  }
  if (const std::vector<MapEntry>* pins = entries(item, path, "pins")) {
    const std::string pins_path = child_path(path, "pins");
    for (const MapEntry& e : *pins) {
      if (!valid_wheel_name(e.key)) {
        m_diags.error(e.key_location, child_path(pins_path, e.key),
                      fmt::format("'{}' is not a PyPI project name", e.key));
        continue;
      }
      std::optional<std::string> pinned = entry_string(e, pins_path);
      if (!pinned) {
        continue;
      }
      if (!version_is(*pinned, VersionKind::release)) {
        m_diags.error(
            e.value.location, child_path(pins_path, e.key),
            fmt::format("expected {}, found '{}'", version_expectation(VersionKind::release), *pinned));
        continue;
      }
      v.pins.push_back(WheelPin{e.key, *pinned});
    }
  }
  if (auto system = string_list(item, path, "system")) {
    for (std::size_t i = 0; i < system->size(); ++i) {
      const std::string& component = (*system)[i];
      const SourceLocation& at = item.find("system")->value.items[i].location;
      const std::string at_path = item_path(child_path(path, "system"), i);
      if (component != "cuda" && component != "cudnn" && component != "nccl") {
        m_diags.error(at, at_path, fmt::format("expected cuda, cudnn or nccl, found '{}'", component));
      } else if (std::find(v.system.begin(), v.system.end(), component) != v.system.end()) {
        m_diags.error(at, at_path, fmt::format("'{}' is listed twice", component));
      } else {
        v.system.push_back(component);
      }
    }
  }
  v.why = provenance(item, path);
  return v;
}

void RecipeLoader::read_framework(const Node& root, std::string_view name, FrameworkRecipe& out) {
  check_keys(root, "", {"recipe", "name", "package", "sources", "rules", "releases"});
  check_kind(root, "framework");
  std::string_view display = name;
  for (const auto& [id, shown] : k_frameworks) {
    if (id == name) {
      display = shown;
    }
  }
  if (auto found = scalar(root, "", "name")) {
    out.name = *found;
    expect(*found == name, root, "", "name",
           fmt::format("expected '{}' (the name of the file's directory), found '{}'", name, *found));
  }
  if (auto package = scalar(root, "", "package")) {
    out.package = *package;
    expect(valid_wheel_name(*package) && package->find('[') == std::string::npos, root, "", "package",
           fmt::format("'{}' is not a PyPI project name", *package));
  }
  out.sources = read_sources(root);
  out.rules = facts(root, "", "rules");

  std::vector<VersionedRow> order;
  bool any_series_seen = false;
  for (const auto& [item, path] : rows(root, "", "releases", true)) {
    check_keys(*item, path, {"series", "versions", "python", "variants", "source", "confidence", "note"});
    FrameworkRelease r;
    if (auto series = scalar(*item, path, "series")) {
      if (*series == "*") {
        r.series = "*";
        expect(!any_series_seen, *item, path, "series", fmt::format("{} series * is listed twice", display));
        any_series_seen = true;
      } else if (version_is(*series, VersionKind::release)) {
        r.series = *series;
        order.push_back({*series, item, path, "series"});
      } else {
        expect(
            false, *item, path, "series",
            fmt::format("expected a release series such as 2.1, or * for any version, found '{}'", *series));
      }
    }
    if (auto versions = string_list(*item, path, "versions")) {
      std::vector<VersionedRow> version_order;
      const Node& list_node = item->find("versions")->value;
      for (std::size_t i = 0; i < versions->size(); ++i) {
        const std::string& v = (*versions)[i];
        const Node& at = list_node.items[i];
        const std::string at_path = item_path(child_path(path, "versions"), i);
        if (!version_is(v, VersionKind::release)) {
          m_diags.error(at.location, at_path,
                        fmt::format("expected {}, found '{}'", version_expectation(VersionKind::release), v));
          continue;
        }
        if (!r.series.empty() && r.series != "*" && !dotted_prefix(r.series, v)) {
          m_diags.error(at.location, at_path, fmt::format("{} {} is not in series {}", display, v, r.series));
          continue;
        }
        r.versions.push_back(v);
        version_order.push_back({v, &at, at_path, ""});
      }
      check_order(version_order, display, Order::newest_first);
    }
    r.python = constraint(*item, path, "python");

    std::set<std::string, std::less<>> tags;
    std::optional<std::string> pypi_default; // the tag of the release's PyPI default variant
    for (const auto& [variant_item, variant_path] : rows(*item, path, "variants", true)) {
      FrameworkVariant v = read_variant(*variant_item, variant_path);
      if (!v.tag.empty() && !tags.insert(v.tag).second) {
        expect(false, *variant_item, variant_path, "tag",
               fmt::format("variant '{}' is listed twice in this release", v.tag));
      }
      if (v.pypi_default && pypi_default) {
        expect(false, *variant_item, variant_path, "pypi_default",
               fmt::format("variants '{}' and '{}' are both pypi_default; PyPI has one plain wheel",
                           *pypi_default, v.tag));
      } else if (v.pypi_default) {
        pypi_default = v.tag;
      }
      r.variants.push_back(std::move(v));
    }
    const MapEntry* variants = item->find("variants");
    if (variants != nullptr && variants->value.is_sequence() && variants->value.items.empty()) {
      m_diags.error(variants->value.location, child_path(path, "variants"), "expected at least one variant");
    }
    r.why = provenance(*item, path);
    out.releases.push_back(std::move(r));
  }
  check_order(order, display, Order::newest_first);
}

// ---------------------------------------------------------------------------------------------

/// sha256 over, for each file of recipe_files() in order, "PATH\0SIZE\0BYTES" (SIZE in decimal).
Digest recipes_digest(const std::map<std::string, RecipeText>& files) {
  Sha256 h;
  for (const std::string& rel : recipe_files()) {
    auto it = files.find(rel);
    const std::string_view bytes = it == files.end() ? std::string_view() : it->second.text;
    h.update(rel);
    h.update(std::string_view("\0", 1));
    h.update(std::to_string(bytes.size()));
    h.update(std::string_view("\0", 1));
    h.update(bytes);
  }
  return h.finish();
}

/// Parses a whole set: every file of recipe_files() must be in `files`.
Result<RecipeSet> parse_recipe_texts(const std::map<std::string, RecipeText>& files,
                                     const fs::path& missing_prefix, RecipeOrigin origin) {
  Diagnostics diags;
  RecipeSet set;
  std::vector<fs::path> order;
  std::string driver_errors; // cuda/drivers.yaml is parsed by parse_cuda_driver_table (image_facts.hpp)
  std::map<std::string, Node> roots; // relative path -> the file's top-level map
  for (const std::string& rel : recipe_files()) {
    auto it = files.find(rel);
    if (it == files.end()) {
      diags.error(SourceLocation{missing_prefix / rel}, "",
                  "missing recipe file; docs/recipes.md lists every file");
      order.push_back(missing_prefix / rel);
      continue;
    }
    const RecipeText& file = it->second;
    order.push_back(file.origin);
    if (file.text.size() > k_max_recipe_size) {
      diags.error(SourceLocation{file.origin}, "",
                  fmt::format("the file is larger than {} bytes", k_max_recipe_size));
      continue;
    }
    if (rel == "cuda/drivers.yaml") {
      auto table = parse_cuda_driver_table(file.text, file.origin);
      if (table) {
        set.cuda.drivers = std::move(*table);
      } else {
        driver_errors = table.error().message;
      }
      continue;
    }
    diags.set_source(file.origin, file.text);
    std::optional<Node> root = parse_yaml(file.text, file.origin, diags);
    if (!root) {
      continue;
    }
    if (!root->is_map()) {
      diags.error(root->location, "",
                  fmt::format("expected a map with 'recipe:' and 'sources:', found {}", describe(*root)));
      continue;
    }
    roots.emplace(rel, std::move(*root));
  }

  RecipeLoader loader(diags);
  auto read = [&](const std::string& rel, auto&& reader) {
    if (auto it = roots.find(rel); it != roots.end()) {
      reader(it->second);
    }
  };
  read("cuda/cuda.yaml", [&](const Node& root) { loader.read_cuda(root, set.cuda); });
  read("cudnn/cudnn.yaml", [&](const Node& root) { loader.read_cudnn(root, set.cudnn); });
  read("nccl/nccl.yaml", [&](const Node& root) { loader.read_nccl(root, set.nccl); });
  read("openmpi/openmpi.yaml", [&](const Node& root) { loader.read_mpi(root, "openmpi", set.openmpi); });
  read("mpich/mpich.yaml", [&](const Node& root) { loader.read_mpi(root, "mpich", set.mpich); });
  read("ucx/ucx.yaml", [&](const Node& root) { loader.read_library(root, "ucx", set.ucx); });
  read("pmix/pmix.yaml", [&](const Node& root) { loader.read_library(root, "pmix", set.pmix); });
  read("python/python.yaml", [&](const Node& root) { loader.read_python(root, set.python); });
  for (const auto& entry : k_frameworks) { // RecipeSet::frameworks order, not path order
    const auto& name = entry.first; // a plain reference: lambdas can't capture a structured binding (clang)
    read(fmt::format("{0}/{0}.yaml", name), [&](const Node& root) {
      FrameworkRecipe framework;
      loader.read_framework(root, name, framework);
      set.frameworks.push_back(std::move(framework));
    });
  }

  if (!diags.empty() || !driver_errors.empty()) {
    diags.sort_by_location(order);
    // Until parse_cuda_driver_table reports into a shared Diagnostics, its rendered block follows.
    std::string message = diags.empty() ? std::string() : diags.render();
    message += driver_errors;
    return Error{ExitCode::invalid_input, message, true};
  }
  origin.digest = recipes_digest(files);
  set.origin = std::move(origin);
  return set;
}

/// LOCKSTEP_RECIPES_DIR, or nullopt when it is unset or empty.
std::optional<fs::path> recipes_dir_override() {
  const char* dir = std::getenv("LOCKSTEP_RECIPES_DIR");
  if (dir == nullptr || *dir == '\0') {
    return std::nullopt;
  }
  return fs::path(dir);
}

/// A relative path inside recipes/: no absolute path, no "..", no empty or "." component.
bool valid_relative_path(std::string_view rel) {
  if (rel.empty() || rel.size() > 256 || rel.front() == '/') {
    return false;
  }
  std::size_t start = 0;
  while (start <= rel.size()) {
    std::size_t slash = rel.find('/', start);
    if (slash == std::string_view::npos) {
      slash = rel.size();
    }
    const std::string_view part = rel.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    start = slash + 1;
  }
  return true;
}

Result<RecipeSet> load_builtin() {
  RecipeOrigin origin;
  if (auto dir = recipes_dir_override()) {
    origin.kind = "dir";
    origin.url = dir->string();
  } else {
    origin.kind = "builtin";
  }
  std::map<std::string, RecipeText> files;
  for (const std::string& rel : recipe_files()) {
    RecipeText file;
    LS_TRY_ASSIGN(file.text, read_builtin_recipe(rel, file.origin));
    files.emplace(rel, std::move(file));
  }
  return parse_recipe_texts(files, k_embedded_prefix, std::move(origin));
}

} // namespace

// ---------------------------------------------------------------------------------------------

std::string_view to_string(Confidence c) {
  switch (c) {
  case Confidence::primary:
    return "primary";
  case Confidence::secondary:
    return "secondary";
  case Confidence::observed:
    return "observed";
  case Confidence::unverified:
    return "unverified";
  }
  return "unverified";
}

Result<VersionConstraint> VersionConstraint::parse(std::string_view text) {
  if (text.size() > k_max_constraint) {
    return invalid_input("version constraint is longer than {} characters", k_max_constraint);
  }
  if (trim(text).empty()) {
    return invalid_input("empty version constraint; write a version such as \"12.1\" or clauses such as "
                         "\">=9.8,<10\"");
  }
  VersionConstraint c;
  c.text = std::string(text);
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view clause = trim(rest.substr(0, comma));
    if (clause.empty()) {
      return invalid_input("version constraint \"{}\": empty clause; clauses are separated by single commas",
                           text);
    }
    std::size_t op_end = 0;
    while (op_end < clause.size() &&
           std::string_view("<>=!~^").find(clause[op_end]) != std::string_view::npos) {
      ++op_end;
    }
    const std::string_view op = clause.substr(0, op_end);
    if (!op.empty() && std::find(k_operators.begin(), k_operators.end(), op) == k_operators.end()) {
      return invalid_input(
          "version constraint \"{}\": unknown operator '{}'; expected >=, <=, >, <, ==, != or a "
          "bare version",
          text, op);
    }
    const std::string_view version = trim(clause.substr(op_end));
    if (version.empty()) {
      return invalid_input("version constraint \"{}\": '{}' needs a version after it", text, op);
    }
    if (!parse_dotted(version)) {
      return invalid_input("version constraint \"{}\": '{}' is not a dotted version such as 12.1 or 2.1.0rc1",
                           text, version);
    }
    if (c.clauses.size() == k_max_clauses) {
      return invalid_input("version constraint \"{}\": more than {} clauses", text, k_max_clauses);
    }
    c.clauses.push_back(Clause{std::string(op), std::string(version)});
    if (comma == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(comma + 1);
  }
  return c;
}

bool VersionConstraint::matches(std::string_view version) const {
  if (clauses.empty() || !parse_dotted(version)) {
    return false;
  }
  return std::all_of(clauses.begin(), clauses.end(), [&](const Clause& clause) {
    if (clause.op.empty()) {
      return dotted_prefix(clause.version, version);
    }
    const int c = compare_dotted(version, clause.version);
    if (clause.op == ">=") {
      return c >= 0;
    }
    if (clause.op == "<=") {
      return c <= 0;
    }
    if (clause.op == ">") {
      return c > 0;
    }
    if (clause.op == "<") {
      return c < 0;
    }
    if (clause.op == "==") {
      return c == 0;
    }
    return c != 0; // "!="
  });
}

int compare_dotted(std::string_view a, std::string_view b) {
  const std::optional<DottedVersion> x = parse_dotted(a);
  const std::optional<DottedVersion> y = parse_dotted(b);
  if (x && y) {
    return compare_parsed(*x, *y);
  }
  // Malformed versions sort after every well-formed one, among themselves by their text.
  if (x || y) {
    return x ? -1 : 1;
  }
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

bool dotted_prefix(std::string_view prefix, std::string_view version) {
  const std::optional<DottedVersion> p = parse_dotted(prefix);
  const std::optional<DottedVersion> v = parse_dotted(version);
  if (!p || !v) {
    return prefix == version;
  }
  if (p->has_pre()) {
    // A pre-release prefix ("2.1.0rc1") matches only that pre-release.
    return compare_parsed(*p, *v) == 0 && v->parts.size() <= p->parts.size();
  }
  for (std::size_t i = 0; i < p->parts.size(); ++i) {
    const std::uint64_t part = i < v->parts.size() ? v->parts[i] : 0;
    if (part != p->parts[i]) {
      return false;
    }
  }
  // A version shorter than the prefix matches as its zero-padded form ("12.1.0" matches "12.1"),
  // unless it is a pre-release ("12.1.0" does not match "12.1rc1").
  return v->parts.size() >= p->parts.size() || !v->has_pre();
}

std::string CudaRecipe::min_cc_for(std::string_view version) const {
  std::string found;
  for (const CudaComputeRow& row : compute) {
    if (!row.why.usable() || row.min_cc.empty()) {
      continue;
    }
    if (compare_dotted(row.cuda, version) <= 0) {
      found = row.min_cc;
    }
  }
  return found;
}

std::string CudaRecipe::driver_floor_for(std::string_view version) const {
  const std::string major_minor = major_minor_of(version);
  if (std::string ga = drivers.floor_for(major_minor); !ga.empty()) {
    return ga;
  }
  const std::string major = major_of(version);
  for (const CudaMvcRule& rule : mvc) {
    if (rule.why.usable() && rule.major == major) {
      return rule.linux_min;
    }
  }
  return {};
}

const FrameworkRecipe* RecipeSet::framework(std::string_view name) const {
  for (const FrameworkRecipe& f : frameworks) {
    if (f.name == name) {
      return &f;
    }
  }
  return nullptr;
}

const MpiRecipe* RecipeSet::mpi(std::string_view impl) const {
  if (impl == "openmpi") {
    return &openmpi;
  }
  if (impl == "mpich") {
    return &mpich;
  }
  return nullptr;
}

const std::vector<std::string>& recipe_files() {
  // Sorted by path: the load order, the digest order and the order diagnostics are reported in.
  static const std::vector<std::string> files = {
      "cuda/cuda.yaml",     "cuda/drivers.yaml",    "cudnn/cudnn.yaml",           "jax/jax.yaml",
      "mpich/mpich.yaml",   "nccl/nccl.yaml",       "openmpi/openmpi.yaml",       "pmix/pmix.yaml",
      "python/python.yaml", "pytorch/pytorch.yaml", "tensorflow/tensorflow.yaml", "ucx/ucx.yaml",
  };
  return files;
}

Result<std::string> read_builtin_recipe(std::string_view relative_path, std::filesystem::path& origin) {
  if (!valid_relative_path(relative_path)) {
    return internal_error("'{}' is not a path inside recipes/", relative_path);
  }
  if (auto dir = recipes_dir_override()) {
    origin = *dir / relative_path;
    return read_file(origin, k_max_recipe_size);
  }
  origin = fs::path(k_embedded_prefix) / relative_path;
  const std::optional<std::string_view> text = embedded_recipe(relative_path);
  if (!text) {
    return internal_error(
        "recipes/{} is not embedded in this build; CMakeLists.txt embeds every "
        "recipes/**/*.yaml (set LOCKSTEP_RECIPES_DIR to a recipes/ directory to work around it)",
        relative_path);
  }
  return std::string(*text);
}

Result<const RecipeSet*> builtin_recipes() {
  // Function-local static: initialised once, thread-safe; LOCKSTEP_RECIPES_DIR is read that once.
  static const Result<RecipeSet> loaded = load_builtin();
  if (!loaded) {
    return loaded.error();
  }
  return &*loaded;
}

Result<RecipeSet> load_recipes_dir(const std::filesystem::path& dir, RecipeOrigin origin) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return io_error("can't read the recipes directory {}: {}", dir.string(),
                    ec ? ec.message() : std::string("not a directory"));
  }
  std::map<std::string, RecipeText> files;
  for (const std::string& rel : recipe_files()) {
    RecipeText file;
    file.origin = dir / rel;
    // A recipes checkout is untrusted: neither the file nor its directory may be a symbolic link
    // (one could point anywhere on this machine, and its text would end up in messages).
    bool present = true;
    fs::path walk = dir;
    for (const fs::path& part : fs::path(rel)) {
      walk /= part;
      const fs::file_status st = fs::symlink_status(walk, ec);
      if (ec || !fs::exists(st)) {
        present = false;
        break;
      }
      if (fs::is_symlink(st)) {
        return invalid_input("{} is a symbolic link; a recipes directory must hold plain files",
                             walk.string());
      }
    }
    if (present) {
      if (!fs::is_regular_file(fs::symlink_status(file.origin, ec))) {
        return invalid_input("{} is not a regular file", file.origin.string());
      }
      LS_TRY_ASSIGN(file.text, read_file(file.origin, k_max_recipe_size));
    } else {
      LS_TRY_ASSIGN(file.text, read_builtin_recipe(rel, file.origin));
    }
    files.emplace(rel, std::move(file));
  }
  return parse_recipe_texts(files, dir, std::move(origin));
}

Result<RecipeSet> parse_recipes(const std::map<std::string, std::string>& files,
                                const std::filesystem::path& origin_prefix, RecipeOrigin origin) {
  std::map<std::string, RecipeText> texts;
  for (const auto& [rel, text] : files) {
    texts.emplace(rel, RecipeText{text, origin_prefix / rel});
  }
  return parse_recipe_texts(texts, origin_prefix, std::move(origin));
}

} // namespace lockstep::envspec

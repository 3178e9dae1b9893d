#include "envspec/load/load.hpp"

#include "envspec/load/canonical.hpp"
#include "envspec/load/merge.hpp"
#include "envspec/load/schema.hpp"
#include "support/system/fs.hpp"

#include <cstdint>
#include <exception>
#include <system_error>

namespace lockstep::envspec {

namespace fs = std::filesystem;

namespace {

// Spec files larger than this are refused (a spec is a page of YAML, not a data file).
constexpr std::uint64_t k_max_spec_size = 1ULL << 20;

// The passes of load_spec: read and merge `extends`, validate, canonicalise, hash.
Result<Spec> load(const std::string& text, const fs::path& file, const LoadOptions& options) {
  std::error_code ec;
  const fs::path abs = fs::absolute(file, ec).lexically_normal();
  if (ec) {
    return invalid_input("can't make {} absolute: {}", file.string(), ec.message());
  }
  Spec spec;
  spec.file = abs;
  spec.dir = abs.parent_path();

  Diagnostics diags;
  MergedTree tree = load_merged_tree(abs, text, options, diags);
  spec.files = tree.files;
  if (tree.complete) {
    validate_spec(tree.root, abs, options, spec, diags);
  }
  if (!diags.empty()) {
    diags.sort_by_location(tree.files);
    return diags.to_error();
  }

  spec.canonical = canonical_form(spec);
  try {
    spec.digest = sha256_of(spec.canonical.dump());
  } catch (const nlohmann::json::exception&) {
    // YAML escapes such as "\ud800" can produce text that is not UTF-8 even in a UTF-8 file.
    return invalid_input("{}: a string in the spec is not valid UTF-8 after unescaping", abs.string());
  }
  return spec;
}

} // namespace

Result<Spec> load_spec(const fs::path& file, const LoadOptions& options) {
  Result<std::string> text = read_file(file, k_max_spec_size);
  if (!text) {
    Error e = text.error();
    e.code = ExitCode::invalid_input; // the spec the user named is unusable: bad input, not an I/O fault
    return e;
  }
  return load_spec_from_string(*text, file, options);
}

Result<Spec> load_spec_from_string(const std::string& text, const fs::path& file,
                                   const LoadOptions& options) {
  try {
    return load(text, file, options);
  } catch (const std::exception& e) {
    return internal_error("loading spec {}: {}", file.string(), e.what());
  }
}

} // namespace lockstep::envspec

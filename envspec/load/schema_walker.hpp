#pragma once
// The walker behind validate_spec (envspec/load/schema.hpp): one class that reads the merged spec
// tree key by key into a Spec and reports every problem with its location. Its member functions
// are defined per section of the spec (docs/spec.md "Keys"), one file each: schema.cpp (the walk,
// `name`, `platform`, the rules that span keys), schema_base.cpp, schema_repos.cpp (with
// `mirrors`), schema_packages.cpp, schema_conda.cpp, schema_stack.cpp, schema_copy.cpp, schema_config.cpp
// (`env`, `labels`, `entrypoint`, `cmd`, `workdir`, `user`), schema_run.cpp and schema_outputs.cpp. Not part
// of envspec's public API.
#include "envspec/load/options.hpp"
#include "envspec/load/python_inputs.hpp"
#include "envspec/load/spec_shape.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/spec/spec.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "envspec/yaml/node.hpp"
#include "envspec/yaml/yaml_reader.hpp"

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::envspec::detail {

namespace fs = std::filesystem;

// Validates a merged spec tree into a Spec, reporting every problem.
class SchemaWalker : public YamlReader {
public:
  SchemaWalker(const fs::path& spec_file, const LoadOptions& options, Diagnostics& diags)
      : YamlReader(diags, Dialect::spec), m_spec_file(spec_file), m_options(options) {}

  // Reads `root` (the merged tree of the spec) into `spec`; every problem goes to the diagnostics.
  void walk(const Node& root, Spec& spec);

private:
  // ---------------------------------------------------------------------------------------------
  // The walk, the rules that span keys, and what every section uses (schema.cpp)
  using YamlReader::unknown_key;
  void cross_checks(const Node& root, const Spec& spec);
  void check_cuda_repos(const Spec& spec);
  void unknown_key(const MapEntry& e, const std::string& path, const shape::Shape& map);
  static SourceLocation sub_location(const Node& v, std::size_t offset, std::size_t len);
  static fs::path resolve_host_path(const Node& v);
  bool confined(const Node& v, const std::string& key_path, const fs::path& path, std::string_view text,
                const ExtraRoots& extra = {});
  std::optional<std::string> image_path(const Node& v, const std::string& path);
  void name(const Node& v, std::string& out);
  void platform(const Node& v, oci::Platform& out);
  void platforms(const Node& root, const MapEntry& e, Spec& spec);

  // ---------------------------------------------------------------------------------------------
  // `base:` (schema_base.cpp)
  void base(const Node& v, BaseImage& out);
  void image_base(const Node& v, BaseImage& out);
  void debian_base(const Node& v, BaseImage& out);
  void base_path(const Node& v, BaseImage& out);
  void base_image_ref(const Node& v, BaseImage& out);
  void base_tag(const Node& v, BaseImage& out);
  void base_python(const Node& v, BaseImage& out);

  // ---------------------------------------------------------------------------------------------
  // `repos:` and `mirrors:` (schema_repos.cpp)
  void repos(const Node& v, std::vector<Repo>& out);
  bool repo_url(const Node& v, const std::string& path, Repo& repo);
  bool local_url_confined(const Node& v, const std::string& path, const std::string& text);
  bool apt_repo(const Node& item, const std::string& path, Repo& repo);
  bool apt_repo_key(const MapEntry& e, const std::string& path, Repo& repo);
  bool conda_repo(const MapEntry& channel, const Node& item, const std::string& path, Repo& repo);
  bool conda_subdirs(const Node& item, const std::string& path, Repo& repo);
  const std::string* apt_suite(const Node& v, const std::string& path);
  void mirrors(const Node& v, std::vector<std::string>& out);

  // ---------------------------------------------------------------------------------------------
  // `packages:` and the project files it names (schema_packages.cpp)
  void packages(const Node& v, Packages& out);
  void pip_file(const Node& item, const std::string& path, Packages& out);
  void conda_package(const Node& item, const std::string& path, Packages& out);

  // `conda:` (schema_conda.cpp)
  void conda(const Node& v, CondaSettings& out);
  std::optional<std::pair<std::string, std::string>>
  pip_file_text(const MapEntry& file, const std::string& key_path, std::string_view what);
  static PackageRequest pip_request(const ImportedRequirement& r, const SourceLocation& where);
  void pyproject_file(const Node& item, const std::string& path, std::vector<PackageRequest>& out);
  void conda_env_file(const Node& item, const std::string& path, Packages& out);
  void requirements_file(const Node& item, const std::string& path, std::vector<PackageRequest>& out);

  // ---------------------------------------------------------------------------------------------
  // `stack:` (schema_stack.cpp)
  void stack(const Node& v, StackRequest& out);
  void stack_recipes(const Node& v, StackRequest& out);
  void apply_conda_stack(Spec& spec);

  // ---------------------------------------------------------------------------------------------
  // `copy:` (schema_copy.cpp)
  void copy(const Node& v, std::vector<CopyItem>& out);
  std::optional<CopyItem> copy_item(const Node& v, const std::string& path);
  bool copy_git(const Node& v, const std::string& path, CopyItem& item);
  bool git_confined(const Node& v, const std::string& key_path, const fs::path& repo, std::string_view text);
  bool copy_from(const Node& v, const std::string& path, CopyItem& item);
  bool copy_to(const Node& v, const std::string& path, CopyItem& item);
  bool copy_mode(const Node& v, const std::string& path, CopyItem& item);
  bool copy_owner(const Node& v, const std::string& path, CopyItem& item);

  // ---------------------------------------------------------------------------------------------
  // The image config: `env:`, `labels:`, `entrypoint:`, `cmd:`, `workdir:`, `user:` (schema_config.cpp)
  const std::string* map_value(const Node& v, const std::string& path);
  void env(const Node& v, std::vector<std::pair<std::string, std::string>>& out);
  void labels(const Node& v, std::map<std::string, std::string>& out);
  void argv(const Node& v, const std::string& path, std::optional<std::vector<std::string>>& out);
  void workdir(const Node& v, std::optional<std::string>& out);
  void user(const Node& v, std::optional<std::string>& out);

  // ---------------------------------------------------------------------------------------------
  // `run:` (schema_run.cpp)
  void run(const Node& v, std::vector<RunStep>& out);

  // ---------------------------------------------------------------------------------------------
  // `outputs:` (schema_outputs.cpp)
  void outputs(const Node& v, Outputs& out);
  void sbom_paths(const Node& v, const std::string& path, std::vector<fs::path>& out);
  void output_path(const Node& v, const std::string& path, std::optional<fs::path>& out);

  fs::path m_spec_file;
  const LoadOptions& m_options;
  /// What environment files said about `stack:` (apply_conda_stack).
  struct PendingStack {
    CondaEnv env;
    SourceLocation location;
    std::string key_path;
  };
  std::vector<PendingStack> m_conda_stack;
  const shape::Shapes& m_shapes = shape::shapes();
};

} // namespace lockstep::envspec::detail

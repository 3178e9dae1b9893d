#include "builder/lock/recipes_source.hpp"

#include "builder/lock/git_source.hpp"
#include "support/base/log.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <system_error>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// A recipes repository is small data: anything bigger is refused rather than read.
constexpr std::uint64_t k_max_recipe_file = 1 << 20;
constexpr std::uint64_t k_max_recipes_total = 16 << 20;

class StringSink final : public ByteSink {
public:
  explicit StringSink(std::string& out) : m_out(out) {}
  void write(const void* data, std::size_t size) override {
    if (m_out.size() + size > k_max_recipes_total * 4) {
      throw Failure(
          invalid_input("the recipes repository is larger than {} MiB; it should hold only recipe files",
                        k_max_recipes_total * 4 >> 20));
    }
    m_out.append(static_cast<const char*>(data), size);
  }

private:
  std::string& m_out;
};

// The recipe files (*.yaml) of `commit`: under recipes/ when the tree has that directory, else
// from its root; keyed by their path below that directory.
Result<std::map<std::string, std::string>>
read_commit_recipes(const fs::path& store_root, const std::string& url, const std::string& commit) {
  std::string tar_bytes;
  {
    StringSink sink(tar_bytes);
    TarWriter tar(sink);
    log::Progress progress("reading recipes", 0);
    std::set<std::string> seen;
    GitExportOptions opt;
    opt.to = "/t";
    try {
      LS_TRY(export_git_tree(tar, progress, store_root, url, commit, opt, seen));
      tar.finish();
    } catch (const Failure& f) {
      return f.error();
    }
  }
  LS_TRY_ASSIGN(TempDir tmp, TempDir::create(store_root, "recipes-"));
  const fs::path file = tmp.path() / "tree.tar";
  LS_TRY(write_file_atomic(file, tar_bytes));
  LS_TRY_ASSIGN(TarReader reader,
                TarReader::open(file, fmt::format("recipes repository {} at {}", url, commit)));
  std::map<std::string, std::string> all;
  bool has_recipes_dir = false;
  std::uint64_t total = 0;
  while (true) {
    LS_TRY_ASSIGN(std::optional<TarMember> m, reader.next());
    if (!m) {
      break;
    }
    std::string name = m->name;
    if (name.rfind("t/", 0) != 0) {
      continue;
    }
    name = name.substr(2);
    if (m->type == TarMember::Type::directory && name == "recipes") {
      has_recipes_dir = true;
    }
    if (name.size() < 5 || name.substr(name.size() - 5) != ".yaml") {
      continue;
    }
    if (m->type != TarMember::Type::file) {
      // A link could point anywhere on the machine that reads the recipes.
      return invalid_input(
          "recipes repository {} at {}: {} is not a plain file; recipe files must be regular files", url,
          commit, name);
    }
    const auto size = static_cast<std::uint64_t>(m->size);
    if (size > k_max_recipe_file || (total += size) > k_max_recipes_total) {
      return invalid_input("recipes repository {} at {}: {} is too large for a recipe file", url, commit,
                           name);
    }
    std::string text(m->size, '\0');
    std::size_t got = 0;
    while (got < text.size()) {
      LS_TRY_ASSIGN(std::size_t n, reader.read(text.data() + got, text.size() - got));
      if (n == 0) {
        break;
      }
      got += n;
    }
    text.resize(got);
    all.emplace(std::move(name), std::move(text));
  }
  std::map<std::string, std::string> out;
  for (auto& [name, text] : all) {
    if (has_recipes_dir) {
      if (name.rfind("recipes/", 0) == 0) {
        out.emplace(name.substr(8), std::move(text));
      }
    } else {
      out.emplace(name, std::move(text));
    }
  }
  return out;
}

Result<envspec::RecipeSet> load_commit(const envspec::StackRequest& st, const fs::path& store_root,
                                       const std::string& commit) {
  using Files = std::map<std::string, std::string>;
  LS_TRY_ASSIGN(Files files, read_commit_recipes(store_root, st.recipes_git, commit));
  // Files the repository doesn't have come from the built-in set.
  for (const std::string& path : envspec::recipe_files()) {
    if (files.count(path) == 0) {
      fs::path origin;
      LS_TRY_ASSIGN(std::string text, envspec::read_builtin_recipe(path, origin));
      files.emplace(path, std::move(text));
    }
  }
  envspec::RecipeOrigin origin;
  origin.kind = "git";
  origin.url = st.recipes_git_text;
  origin.commit = commit;
  return envspec::parse_recipes(files, fs::path(st.recipes_git_text + "@" + commit.substr(0, 12)), origin);
}

} // namespace

Result<envspec::RecipeSet> recipes_for_spec(const envspec::Spec& spec, const fs::path& store_root) {
  if (!spec.stack || spec.stack->recipes_git.empty()) {
    LS_TRY_ASSIGN(const envspec::RecipeSet* builtin, envspec::builtin_recipes());
    return *builtin;
  }
  const envspec::StackRequest& st = *spec.stack;
  Result<std::string> commit = resolve_git_rev(store_root, st.recipes_git, st.recipes_rev);
  if (!commit) {
    return commit.error().with_context(
        fmt::format("stack.recipes: {} at {}", st.recipes_git_text, st.recipes_rev));
  }
  log::info("recipes: {} at {} ({})", st.recipes_git_text, st.recipes_rev, commit->substr(0, 12));
  return load_commit(st, store_root, *commit);
}

Result<envspec::RecipeSet> recipes_for_spec_offline(const envspec::Spec& spec, const fs::path& store_root,
                                                    const std::optional<envspec::Lock>& previous) {
  if (!spec.stack || spec.stack->recipes_git.empty()) {
    LS_TRY_ASSIGN(const envspec::RecipeSet* builtin, envspec::builtin_recipes());
    return *builtin;
  }
  const envspec::StackRequest& st = *spec.stack;
  std::string commit;
  if (is_full_commit_id(st.recipes_rev)) {
    commit = st.recipes_rev;
  } else if (const envspec::LockedStack* locked = previous ? envspec::lock_recipes_stack(*previous) : nullptr;
             locked != nullptr && !locked->recipes_commit.empty() &&
             locked->recipes == "git " + st.recipes_git_text) {
    commit = locked->recipes_commit;
  }
  std::error_code ec;
  if (commit.empty() || !fs::exists(git_cache_dir(store_root, st.recipes_git), ec)) {
    return Error{
        ExitCode::external,
        fmt::format("stack.recipes: {} at {} is not in the cache yet, so the stack can't be checked "
                    "offline; run `lockstep lock` once (it fetches the recipes and records their commit)",
                    st.recipes_git_text, st.recipes_rev)};
  }
  LS_TRY(ensure_git_commit(store_root, st.recipes_git, commit, st.recipes_rev));
  return load_commit(st, store_root, commit);
}

} // namespace lockstep::builder

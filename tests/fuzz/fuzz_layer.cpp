// Fuzz target for the layer model (support/oci/layer_model): every member of arbitrary tar bytes is
// classified, and the members are applied to an in-memory tree. Whatever the input:
//  - a classified name is normalised (relative, no empty, "." or ".." component, components of at
//    most 255 bytes, at most 4095 bytes), a whiteout names a real entry, a hard link names another
//    member, only the root member has the empty name;
//  - after every member the tree is a tree: each path's parent is a directory in it.
// A violation aborts (libFuzzer then saves the input). Built like fuzz_unpack (tests/CMakeLists.txt);
// ctest replays the seed corpus in tests/fuzz/corpus/layer/.
#include "support/oci/layer_model.hpp"
#include "tests/fuzz/tar_checksums.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

using lockstep::layer::Entry;
using lockstep::layer::Member;

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_layer: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void check_name(std::string_view path, const char* what) {
  if (path.size() > lockstep::layer::k_max_path ||
      (!path.empty() && (path.front() == '/' || path.back() == '/'))) {
    violation(std::string(what) + " not normalised: " + std::string(path));
  }
  std::size_t i = 0;
  while (!path.empty() && i <= path.size()) {
    std::size_t j = path.find('/', i);
    j = j == std::string_view::npos ? path.size() : j;
    std::string_view comp = path.substr(i, j - i);
    if (comp.empty() || comp == "." || comp == ".." || comp.size() > lockstep::layer::k_max_name) {
      violation(std::string(what) + " has a bad component: " + std::string(path));
    }
    i = j + 1;
  }
}

void check_member(const Member& m) {
  check_name(m.path, "path");
  check_name(m.parent, "parent");
  if ((m.path.empty()) !=
      (m.kind == Member::Kind::root || (m.kind == Member::Kind::opaque && m.parent.empty()))) {
    violation("only the root member (or a top-level opaque marker) has the empty name: " + m.raw);
  }
  if (m.kind == Member::Kind::whiteout &&
      (m.base.empty() || m.base == "." || m.base == ".." || m.base.find('/') != std::string::npos)) {
    violation("a whiteout without a name: " + m.raw);
  }
  if (m.kind == Member::Kind::hardlink) {
    check_name(m.link, "hard link target");
    if (m.link.empty() || m.link == m.path) {
      violation("a hard link to the root or itself: " + m.raw);
    }
  }
  if (m.kind == Member::Kind::symlink && (m.link.empty() || m.link.size() > lockstep::layer::k_max_path)) {
    violation("a symbolic link target out of bounds: " + m.raw);
  }
}

// The simplest tree: path -> entry.
class MapTree final : public lockstep::layer::Tree {
public:
  [[nodiscard]] Entry lookup(const std::string& path) const override {
    auto it = m_entries.find(path);
    return it == m_entries.end() ? Entry{} : it->second;
  }
  [[nodiscard]] std::vector<std::string> children(const std::string& path) const override {
    std::vector<std::string> out;
    const std::string prefix = path.empty() ? std::string() : path + "/";
    for (auto it = m_entries.lower_bound(prefix);
         it != m_entries.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      if (it->first.find('/', prefix.size()) == std::string::npos) {
        out.push_back(it->first.substr(prefix.size()));
      }
    }
    return out;
  }
  void remove(const std::string& path) override {
    const std::string prefix = path + "/";
    for (auto it = m_entries.lower_bound(prefix);
         it != m_entries.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
      it = m_entries.erase(it);
    }
    m_entries.erase(path);
  }
  lockstep::Result<void> make_implied_directory(const std::string& path, const Member& /*m*/) override {
    return put_entry(path, Entry{Entry::Type::directory, {}});
  }
  lockstep::Result<void> put(const std::string& path, const Member& m) override {
    if (path.empty()) {
      return {};
    }
    Entry e;
    e.type = m.kind == Member::Kind::directory ? Entry::Type::directory
             : m.kind == Member::Kind::symlink ? Entry::Type::symlink
                                               : Entry::Type::other;
    e.link_target = m.link;
    return put_entry(path, e);
  }
  lockstep::Result<void> link(const std::string& path, const std::string& target,
                              const Member& /*m*/) override {
    auto it = m_entries.find(target);
    if (it == m_entries.end() || it->second.type == Entry::Type::directory) {
      violation("a hard link to a missing entry or a directory reached the tree: " + target);
    }
    return put_entry(path, it->second);
  }

  void check() const {
    for (const auto& [path, e] : m_entries) {
      check_name(path, "tree path");
      const std::size_t slash = path.rfind('/');
      if (slash != std::string::npos) {
        auto parent = m_entries.find(path.substr(0, slash));
        if (parent == m_entries.end() || parent->second.type != Entry::Type::directory) {
          violation("a path whose parent is not a directory: " + path);
        }
      }
    }
  }

private:
  lockstep::Result<void> put_entry(const std::string& path, const Entry& e) {
    const std::size_t slash = path.rfind('/');
    if (slash != std::string::npos) {
      auto parent = m_entries.find(path.substr(0, slash));
      if (parent == m_entries.end() || parent->second.type != Entry::Type::directory) {
        violation("the model wrote below a non-directory: " + path);
      }
    }
    auto it = m_entries.find(path);
    if (it != m_entries.end() &&
        !(it->second.type == Entry::Type::directory && e.type == Entry::Type::directory)) {
      violation("the model wrote over an entry without removing it: " + path);
    }
    m_entries[path] = e;
    return {};
  }
  std::map<std::string, Entry> m_entries;
};

void run(std::string_view input) {
  const std::string tar = lockstep::fuzz::with_valid_checksums(input);
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  if (archive_read_open_memory(a, tar.data(), tar.size()) != ARCHIVE_OK) {
    archive_read_free(a);
    return;
  }
  MapTree tree;
  lockstep::layer::LayerApplier applier(tree, "layer");
  for (int n = 0; n < 10000; ++n) {
    struct archive_entry* entry = nullptr;
    int rc = archive_read_next_header(a, &entry);
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      break;
    }
    auto m = lockstep::layer::classify_member(entry, "layer");
    if (!m) {
      if (m.error().message.rfind("layer: member '", 0) != 0) {
        violation("a refusal that does not name the member: " + m.error().message);
      }
      break;
    }
    check_member(*m);
    if (!applier.apply(*m)) {
      break;
    }
    tree.check();
  }
  archive_read_free(a);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

// The spec's shape (envspec/load/spec_shape.hpp) against everything that reads it or must agree with it:
// the schema walker, the canonical form, docs/spec.md and the JSON Schema it generates.
#include "envspec/load/merge.hpp"
#include "envspec/load/schema.hpp"
#include "envspec/load/spec_shape.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::envspec;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// One step from the top of a spec down to a key: into a map (with the keys that form needs) or
/// into the first item of a list.
struct Step {
  const shape::Shape* map = nullptr; ///< nullptr: a list item
  std::string key;
};

/// A key of the shape and how to reach it.
struct KeyAt {
  std::vector<Step> steps; ///< the last step is the key itself
  const shape::Key* key = nullptr;
  std::string path; ///< as diagnostics spell it: "copy[0].rev"
};

// Every key of every map form reachable from `s`, depth first.
void collect(const shape::Shape& s, std::vector<Step> steps, const std::string& path,
             std::vector<KeyAt>& out) {
  switch (s.kind) {
  case shape::Kind::scalar:
  case shape::Kind::dict:
    return;
  case shape::Kind::list:
    steps.push_back(Step{});
    collect(*s.items, steps, path + "[0]", out);
    return;
  case shape::Kind::one_of:
    for (const shape::Shape* form : s.forms) {
      collect(*form, steps, path, out);
    }
    return;
  case shape::Kind::map:
    for (const shape::Key& k : s.keys) {
      std::vector<Step> here = steps;
      here.push_back(Step{&s, std::string(k.name)});
      const std::string key_path = path.empty() ? std::string(k.name) : path + "." + std::string(k.name);
      out.push_back(KeyAt{here, &k, key_path});
      if (k.shape != nullptr) {
        collect(*k.shape, here, key_path, out);
      }
    }
    return;
  }
}

std::vector<KeyAt> all_keys() {
  std::vector<KeyAt> out;
  collect(shape::spec(), {}, "", out);
  return out;
}

// A spec that holds `value` at the end of `steps`; every map on the way has its required keys
// (null), and the top level has lockstep and name.
json spec_with(const std::vector<Step>& steps, json value) {
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->map == nullptr) {
      value = json::array({std::move(value)});
      continue;
    }
    json m = json::object();
    for (const shape::Key& k : it->map->keys) {
      if (k.presence == shape::Presence::required) {
        m[std::string(k.name)] = nullptr;
      }
    }
    m[it->key] = std::move(value);
    value = std::move(m);
  }
  if (!value.contains("lockstep") || value["lockstep"].is_null()) {
    value["lockstep"] = 1;
  }
  if (!value.contains("name") || value["name"].is_null()) {
    value["name"] = "shape";
  }
  return value;
}

// The diagnostics of a spec (JSON is YAML) written at `file`: extends merged, then validated.
std::vector<Diagnostic> diagnostics_of(const json& spec, const fs::path& file) {
  Diagnostics diags;
  const std::string text = spec.dump();
  MergedTree tree = load_merged_tree(file, text, {}, diags);
  if (tree.complete) {
    Spec out;
    validate_spec(tree.root, file, {}, out, diags);
  }
  return diags.items();
}

// The diagnostics at exactly `path`.
std::vector<std::string> at(const std::vector<Diagnostic>& diags, const std::string& path) {
  std::vector<std::string> out;
  for (const Diagnostic& d : diags) {
    if (d.key_path == path) {
      out.push_back(d.message);
    }
  }
  return out;
}

bool accepts_maps(const shape::Shape& s) {
  if (s.kind == shape::Kind::one_of) {
    return std::any_of(s.forms.begin(), s.forms.end(),
                       [](const shape::Shape* f) { return accepts_maps(*f); });
  }
  return s.kind == shape::Kind::map || s.kind == shape::Kind::dict;
}

// The values a key's shape lists (of a one_of: its scalar forms'), typed as an editor reads them.
std::vector<json> listed_values(const shape::Shape& s) {
  std::vector<json> out;
  if (s.kind == shape::Kind::one_of) {
    for (const shape::Shape* f : s.forms) {
      for (json& v : listed_values(*f)) {
        out.push_back(std::move(v));
      }
    }
  } else if (s.kind == shape::Kind::scalar) {
    for (std::string_view v : s.values) {
      if (!s.types.string && s.types.boolean) {
        out.emplace_back(v == "true");
      } else if (!s.types.string && s.types.integer) {
        out.emplace_back(std::stoi(std::string(v)));
      } else {
        out.emplace_back(std::string(v));
      }
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) {
    out += l + "\n";
  }
  return out;
}

class ShapeFixture : public test::SpecFixture {
public:
  [[nodiscard]] fs::path spec_file() const { return dir() / "lockstep.yaml"; }
};

} // namespace

TEST_CASE_METHOD(ShapeFixture, "The schema walker reads every key the spec's shape lists, in every map",
                 "[spec_shape]") {
  const std::vector<KeyAt> keys = all_keys();
  REQUIRE(keys.size() > 50);
  for (const KeyAt& k : keys) {
    INFO(k.path);
    const std::vector<Diagnostic> diags = diagnostics_of(spec_with(k.steps, nullptr), spec_file());
    const std::string messages = joined(at(diags, k.path));
    if (k.key->presence == shape::Presence::later) {
      CHECK(messages == "not supported by this lockstep version yet\n");
    } else {
      CHECK(messages.find("unknown key") == std::string::npos);
      CHECK(messages.find("not supported") == std::string::npos);
    }
  }
}

TEST_CASE_METHOD(ShapeFixture, "A key the spec's shape does not list is an unknown key in every map",
                 "[spec_shape]") {
  std::set<std::string> maps_seen;
  for (const KeyAt& k : all_keys()) {
    std::vector<Step> steps = k.steps;
    steps.back().key = "zz_not_a_key";
    const std::string parent = k.path.substr(0, k.path.size() - k.key->name.size());
    const std::string path = parent + "zz_not_a_key";
    if (!maps_seen.insert(fmt::format("{}{}", parent, static_cast<const void*>(steps.back().map))).second) {
      continue;
    }
    INFO(path);
    const std::vector<std::string> messages =
        at(diagnostics_of(spec_with(steps, nullptr), spec_file()), path);
    REQUIRE(messages.size() == 1);
    CHECK(messages[0].starts_with("unknown key; "));
  }
  CHECK(maps_seen.size() >= 14);
}

TEST_CASE_METHOD(ShapeFixture, "Every value the spec's shape lists for a key is accepted there",
                 "[spec_shape]") {
  int checked = 0;
  for (const KeyAt& k : all_keys()) {
    if (k.key->shape == nullptr) {
      continue;
    }
    for (const json& value : listed_values(*k.key->shape)) {
      INFO(k.path << ": " << value.dump());
      CHECK(joined(at(diagnostics_of(spec_with(k.steps, value), spec_file()), k.path)).empty());
      ++checked;
    }
  }
  CHECK(checked == 19);
}

TEST_CASE_METHOD(ShapeFixture, "A value of the wrong kind is an error at its key", "[spec_shape]") {
  for (const KeyAt& k : all_keys()) {
    if (k.key->shape == nullptr) {
      continue;
    }
    const json wrong = accepts_maps(*k.key->shape) ? json::array({"x"}) : json::object({{"x", "y"}});
    INFO(k.path << ": " << wrong.dump());
    CHECK_FALSE(at(diagnostics_of(spec_with(k.steps, wrong), spec_file()), k.path).empty());
  }
}

TEST_CASE("The walker's 'did you mean' and key lists come from the spec's shape", "[spec_shape]") {
  CHECK(shape::key_names(shape::shapes().copy_item) ==
        std::vector<std::string_view>{"from", "to", "mode", "owner", "git", "rev"});
  CHECK(shape::later_key_names(shape::shapes().copy_item) == std::vector<std::string_view>{"keep_git"});
  CHECK(shape::key_names(shape::shapes().repo_apt) ==
        std::vector<std::string_view>{"apt", "suite", "components", "keyring", "snapshot", "snapshot_url",
                                      "priority", "flat", "suites"});
  CHECK(shape::later_key_names(shape::spec()) == std::vector<std::string_view>{"launch"});
  CHECK(is_top_level_key("stack"));
  CHECK(is_top_level_key("launch"));
  CHECK_FALSE(is_top_level_key("image"));
}

TEST_CASE("extends replaces exactly the lists the spec's shape marks as replaced", "[spec_shape]") {
  for (const shape::Key& k : shape::spec().keys) {
    INFO(k.name);
    CHECK(is_atomic_list(k.name) == (k.merge == shape::Merge::replace));
  }
  CHECK(is_atomic_list("cmd"));
  CHECK_FALSE(is_atomic_list("copy"));
}

TEST_CASE_METHOD(ShapeFixture, "The canonical form holds only keys of the spec's shape that enter the digest",
                 "[spec_shape]") {
  write("files/app.py", "print('hi')\n");
  write("keys/repo.gpg", "not really a keyring\n");
  write("wheels/README", "wheels go here\n");
  make_oci_layout("base");
  const std::string full =
      "lockstep: 1\n"
      "name: team/full\n"
      "platform: linux/amd64/v3\n"
      "base: {oci: ./base@sha256:" +
      std::string(64, '0') +
      ", tag: v1}\n"
      "repos:\n"
      "  - {apt: https://deb.example.org/debian, suite: bookworm, components: [main], "
      "keyring: keys/repo.gpg}\n"
      "  - {apt: https://cuda.example.org/, flat: true, keyring: keys/repo.gpg}\n"
      "  - {pypi: https://pypi.example.org/simple}\n"
      "  - {wheels: ./wheels}\n"
      "  - {conda: conda-forge, subdirs: [linux-aarch64, noarch]}\n"
      "packages: {apt: [openmpi-bin], pip: [\"numpy==1.26.4\"], conda: [\"python=3.11\"]}\n"
      "conda: {prefix: /opt/env, channel_priority: flexible, virtual_packages: {cuda: \"12.4\"}}\n"
      "stack: {cuda: \"12.1\", cudnn: \"8.9\", nccl: \"2.18\", mpi: openmpi@4.1, "
      "python: \"3.11\", framework: pytorch@2.1, cuda_flavor: devel, "
      "recipes: {git: https://git.example.org/recipes, rev: v3}}\n"
      "copy:\n"
      "  - {from: files, to: /opt/app/, mode: 0755, owner: 1000:1000}\n"
      "  - {git: https://git.example.org/tools, rev: v1, to: /opt/tools, mode: preserve}\n"
      "run: [\"true\", {sh: make, network: true}]\n"
      "env: {A: \"1\"}\n"
      "labels: {team: ml}\n"
      "entrypoint: [python]\n"
      "cmd: [app.py]\n"
      "workdir: /opt/app\n"
      "user: 1000:1000\n"
      "outputs: {oci: out, oci_archive: out.tar, docker_archive: out.docker.tar, sif: out.sif, "
      "compression: zstd, sif_compression: lz4}\n";
  const Spec spec = load_ok(full);

  // Walks the canonical JSON beside the shape; `pin` is the canonical form's own (base.oci's @digest).
  std::function<void(const json&, const shape::Shape&, const std::string&)> check =
      [&](const json& j, const shape::Shape& s, const std::string& path) {
        if (s.kind == shape::Kind::dict || s.kind == shape::Kind::scalar) {
          return;
        }
        if (j.is_array()) {
          const shape::Shape* items = s.kind == shape::Kind::list ? s.items : nullptr;
          REQUIRE(items != nullptr);
          for (const json& item : j) {
            check(item, *items, path + "[]");
          }
          return;
        }
        if (!j.is_object()) {
          return;
        }
        for (const auto& [key, value] : j.items()) {
          INFO(path << "." << key);
          if (path == ".base" && key == "pin") {
            continue;
          }
          const shape::Key* k = shape::find_key(s, key);
          REQUIRE(k != nullptr);
          CHECK(k->in_digest);
          REQUIRE(k->shape != nullptr);
          check(value, *k->shape, path + "." + key);
        }
      };
  check(spec.canonical, shape::spec(), "");
  // Every top-level key that enters the digest is there when the spec sets it.
  for (const shape::Key& k : shape::spec().keys) {
    INFO(k.name);
    if (k.name == "platforms") {
      continue; // instead of `platform`, which this spec sets (test_lockfile.cpp has its form)
    }
    CHECK(spec.canonical.contains(std::string(k.name)) ==
          (k.in_digest && k.presence != shape::Presence::later));
  }
}

TEST_CASE("docs/spec.md mentions every key of the spec's shape, in the key's own section", "[spec_shape]") {
  const std::vector<std::string> lines = test::lines_of(test::slurp(test::source_dir() / "docs/spec.md"));
  // The text of the section whose heading names `key` in backticks, up to the next heading of its level.
  const auto section = [&lines](std::string_view key) {
    const std::string mark = fmt::format("`{}`", key);
    std::string text;
    std::size_t level = 0;
    bool fenced = false;
    for (const std::string& line : lines) {
      if (line.starts_with("```")) {
        fenced = !fenced;
      }
      const std::size_t hashes = fenced ? 0 : line.find_first_not_of('#');
      const bool heading = hashes > 0 && hashes != std::string::npos && line[hashes] == ' ';
      if (level > 0 && heading && hashes <= level) {
        break;
      }
      if (level == 0 && heading && line.find(mark) != std::string::npos) {
        level = hashes;
      }
      if (level > 0) {
        text += line + "\n";
      }
    }
    return text;
  };
  const auto mentions = [](const std::string& text, std::string_view key) {
    return std::regex_search(text, std::regex(fmt::format("[`{{ \\[,]{}[`:]", key)));
  };
  const std::string all = joined(lines);
  for (const shape::Key& top : shape::spec().keys) {
    INFO(top.name);
    if (top.presence == shape::Presence::later) {
      CHECK(all.find(fmt::format("`{}`", top.name)) != std::string::npos);
      continue;
    }
    CHECK(all.find(fmt::format("| `{}` |", top.name)) != std::string::npos); // the table of keys
    const std::string text = section(top.name);
    REQUIRE_FALSE(text.empty());
    std::vector<KeyAt> nested;
    collect(*top.shape, {}, std::string(top.name), nested);
    for (const KeyAt& k : nested) {
      INFO(k.path);
      if (k.key->presence == shape::Presence::later) {
        std::string written = std::regex_replace(k.path, std::regex("\\[0\\]"), "[]");
        CHECK(all.find(fmt::format("`{}`", written)) != std::string::npos);
      } else {
        CHECK(mentions(text, k.key->name));
      }
    }
  }
}

TEST_CASE("The JSON Schema is made from the spec's shape, every reference resolved", "[spec_shape]") {
  const nlohmann::ordered_json schema = shape::json_schema();
  CHECK(schema.at("$schema") == "https://json-schema.org/draft/2020-12/schema");
  CHECK(schema.at("required") == nlohmann::ordered_json::array({"lockstep", "name"}));
  CHECK(schema.at("additionalProperties") == false);
  for (const shape::Key& k : shape::spec().keys) {
    INFO(k.name);
    CHECK(schema.at("properties").contains(std::string(k.name)) == (k.presence != shape::Presence::later));
  }
  CHECK(schema.at("properties").at("lockstep").at("const") == 1);
  CHECK(schema.at("properties").at("cmd").at("items").at("$ref") == "#/$defs/scalar");
  CHECK(schema.at("$defs").at("repoAptFlat").at("properties").at("flat").at("const") == true);
  CHECK(schema.at("$defs").at("copyHost").at("required") == nlohmann::ordered_json::array({"from", "to"}));

  const std::string text = schema.dump();
  std::smatch m;
  for (auto it = text.cbegin();
       std::regex_search(it, text.cend(), m, std::regex("\"#/\\$defs/([A-Za-z]+)\"")); it = m[0].second) {
    INFO(m[1].str());
    CHECK(schema.at("$defs").contains(m[1].str()));
  }
  CHECK(shape::json_schema().dump(2) == schema.dump(2)); // the same bytes every time
}

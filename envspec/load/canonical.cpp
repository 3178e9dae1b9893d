#include "envspec/load/canonical.hpp"

#include "envspec/load/spec_shape.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace lockstep::envspec {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string canonical_path(const fs::path& resolved, const std::string& written, const fs::path& spec_dir) {
  if (fs::path(written).is_absolute()) {
    return resolved.generic_string();
  }
  fs::path rel = resolved.lexically_relative(spec_dir);
  return rel.empty() ? resolved.generic_string() : rel.generic_string();
}

namespace {

using Rule = std::optional<json> (*)(const Spec&);

json base_form(const Spec& spec) {
  if (spec.base.kind == BaseImage::Kind::scratch) {
    return "scratch";
  }
  if (spec.base.kind == BaseImage::Kind::debian) {
    static constexpr const char* variants[] = {"essential", "apt", "required"};
    return json{{"debian", spec.base.suite}, {"variant", variants[static_cast<int>(spec.base.variant)]}};
  }
  if (spec.base.kind == BaseImage::Kind::registry) { // normalised: debian:bookworm is docker.io/library/...
    json base{{"image", "docker://" + spec.base.remote.str()}};
    if (!spec.base.python.empty()) {
      base["python"] = spec.base.python;
    }
    return base;
  }
  json base = json::object();
  base["oci"] = canonical_path(spec.base.path, spec.base.path_text, spec.dir);
  if (spec.base.pin) {
    base["pin"] = spec.base.pin->str();
  }
  if (!spec.base.tag.empty()) {
    base["tag"] = spec.base.tag;
  }
  if (!spec.base.python.empty()) {
    base["python"] = spec.base.python;
  }
  return base;
}

// Repositories and packages are absent when there are none, so older specs keep their digests.
// A keyring is where trust comes from, not what the image holds: it stays out, like output paths.
std::optional<json> repos_form(const Spec& spec) {
  if (spec.repos.empty()) {
    return std::nullopt;
  }
  json repos = json::array();
  for (const Repo& r : spec.repos) {
    switch (r.kind) {
    case Repo::Kind::apt:
      // One suite keeps the form locks made before `suites:` existed have.
      repos.push_back(r.flat ? json{{"apt", r.url}, {"flat", true}}
                      : r.suites.size() > 1
                          ? json{{"apt", r.url}, {"suites", r.suites}, {"components", r.components}}
                          : json{{"apt", r.url}, {"suite", r.suite}, {"components", r.components}});
      if (r.priority != 500) { // apt's default stays out, so specs without the key keep their digests
        repos.back()["priority"] = r.priority;
      }
      break;
    case Repo::Kind::pypi:
      repos.push_back(json{{"pypi", r.url}});
      break;
    case Repo::Kind::wheels:
      repos.push_back(json{{"wheels", canonical_path(r.dir, r.dir_text, spec.dir)}});
      break;
    case Repo::Kind::conda:
      repos.push_back(r.subdirs.empty() ? json{{"conda", r.url}}
                                        : json{{"conda", r.url}, {"subdirs", r.subdirs}});
      break;
    }
  }
  return repos;
}

// conda packages appear only when there are some, so specs without them keep their digests.
std::optional<json> packages_form(const Spec& spec) {
  if (spec.packages.apt.empty() && spec.packages.pip.empty() && spec.packages.conda.empty()) {
    return std::nullopt;
  }
  json packages = json::object();
  for (const auto* list : {&spec.packages.apt, &spec.packages.pip}) {
    json names = json::array();
    for (const PackageRequest& p : *list) {
      std::string text = p.text;
      for (const std::string& h : p.hashes) { // requirements-file hashes: part of what is asked for
        text += " --hash=sha256:" + h;
      }
      names.push_back(std::move(text));
    }
    packages[list == &spec.packages.apt ? "apt" : "pip"] = std::move(names);
  }
  if (!spec.packages.conda.empty()) {
    json specs = json::array();
    for (const PackageRequest& p : spec.packages.conda) {
      specs.push_back(p.text);
    }
    packages["conda"] = std::move(specs);
  }
  return packages;
}

// Absent while every setting is its default.
std::optional<json> conda_form(const Spec& spec) {
  const CondaSettings& c = spec.conda;
  json out = json::object();
  if (c.prefix != CondaSettings{}.prefix) {
    out["prefix"] = c.prefix;
  }
  if (c.channel_priority != CondaSettings{}.channel_priority) {
    out["channel_priority"] = c.channel_priority;
  }
  if (!c.virtual_packages.empty()) {
    out["virtual_packages"] = c.virtual_packages;
  }
  return out.empty() ? std::nullopt : std::optional<json>(std::move(out));
}

std::optional<json> stack_form(const Spec& spec) {
  if (!spec.stack) {
    return std::nullopt;
  }
  const StackRequest& st = *spec.stack;
  json stack = json::object();
  const auto item = [&stack](const char* key, const StackRequest::Item& i) {
    if (i.given()) {
      stack[key] = i.text;
    }
  };
  item("cuda", st.cuda);
  item("cudnn", st.cudnn);
  item("nccl", st.nccl);
  item("python", st.python);
  if (!st.mpi.empty()) {
    stack["mpi"] = st.mpi_version.given() ? st.mpi + "@" + st.mpi_version.text : st.mpi;
  }
  if (!st.framework.empty()) {
    stack["framework"] =
        st.framework_version.given() ? st.framework + "@" + st.framework_version.text : st.framework;
  }
  if (st.cuda_flavor != "base") {
    stack["cuda_flavor"] = st.cuda_flavor;
  }
  if (!st.recipes_git.empty()) {
    stack["recipes"] =
        json{{"git", st.recipes_git_text.find("://") != std::string::npos
                         ? st.recipes_git
                         : canonical_path(fs::path(st.recipes_git), st.recipes_git_text, spec.dir)},
             {"rev", st.recipes_rev}};
  }
  return stack;
}

json copy_form(const Spec& spec) {
  json copy = json::array();
  for (const CopyItem& item : spec.copy) {
    json c = json::object();
    if (!item.git.empty()) {
      c["git"] = item.git_text.find("://") != std::string::npos
                     ? item.git
                     : canonical_path(fs::path(item.git), item.git_text, spec.dir);
      c["rev"] = item.rev;
    } else {
      c["from"] = canonical_path(item.from, item.from_text, spec.dir);
    }
    c["to"] = item.to_is_dir && item.to != "/" ? item.to + "/" : item.to;
    switch (item.mode_policy) {
    case ModePolicy::normalize:
      c["mode"] = "normalize";
      break;
    case ModePolicy::preserve:
      c["mode"] = "preserve";
      break;
    case ModePolicy::fixed:
      c["mode"] = fmt::format("{:04o}", item.mode);
      break;
    }
    c["owner"] = item.owner_policy == OwnerPolicy::preserve ? std::string("preserve")
                                                            : fmt::format("{}:{}", item.uid, item.gid);
    copy.push_back(std::move(c));
  }
  return copy;
}

// Absent when empty, so specs without steps keep their digests.
std::optional<json> run_form(const Spec& spec) {
  if (spec.run.empty()) {
    return std::nullopt;
  }
  json run = json::array();
  for (const RunStep& step : spec.run) {
    run.push_back(json{{"sh", step.sh}, {"network", step.network}});
  }
  return run;
}

json env_form(const Spec& spec) {
  json env = json::object();
  for (const auto& [name, value] : spec.env) {
    env[name] = value;
  }
  return env;
}

json labels_form(const Spec& spec) {
  json labels = json::object();
  for (const auto& [key, value] : spec.labels) {
    labels[key] = value;
  }
  return labels;
}

// Output paths say where to write the image, not what it is: they stay out of the digest, so
// moving an output never makes the image (or a lock) differ. Compression changes the bytes.
json outputs_form(const Spec& spec) {
  json out = json::object();
  out["compression"] = spec.outputs.compression == Codec::zstd ? "zstd" : "gzip";
  if (spec.outputs.sif_compression != SquashfsCompressor::gzip) { // the default is left out
    out["sif_compression"] = std::string(squashfs_compressor_name(spec.outputs.sif_compression));
  }
  return out;
}

template <typename T> std::optional<json> if_set(const std::optional<T>& value) {
  return value ? std::optional<json>(*value) : std::nullopt;
}

// `platforms:` with more than one (a single one is `platform`, so its digest stays as before).
std::optional<json> platforms_form(const Spec& s) {
  if (s.platforms.size() < 2) {
    return std::nullopt;
  }
  json list = json::array();
  for (const oci::Platform& p : s.platforms) {
    list.push_back(p.str());
  }
  return list;
}

// The canonical value of each top-level key of the spec's shape that enters the digest; a rule
// that gives nothing leaves its key out.
const std::map<std::string_view, Rule>& rules() {
  static const std::map<std::string_view, Rule> table = {
      {"lockstep", [](const Spec& s) -> std::optional<json> { return s.schema; }},
      {"name", [](const Spec& s) -> std::optional<json> { return s.name; }},
      {"platform",
       [](const Spec& s) -> std::optional<json> {
         return s.platforms.size() > 1 ? std::nullopt : std::optional<json>(s.platform.str());
       }},
      {"platforms", platforms_form},
      {"base", [](const Spec& s) -> std::optional<json> { return base_form(s); }},
      {"repos", repos_form},
      {"packages", packages_form},
      {"conda", conda_form},
      {"stack", stack_form},
      {"copy", [](const Spec& s) -> std::optional<json> { return copy_form(s); }},
      {"run", run_form},
      {"env", [](const Spec& s) -> std::optional<json> { return env_form(s); }},
      {"labels", [](const Spec& s) -> std::optional<json> { return labels_form(s); }},
      {"entrypoint", [](const Spec& s) { return if_set(s.entrypoint); }},
      {"cmd", [](const Spec& s) { return if_set(s.cmd); }},
      {"workdir", [](const Spec& s) { return if_set(s.workdir); }},
      {"user", [](const Spec& s) { return if_set(s.user); }},
      {"outputs", [](const Spec& s) -> std::optional<json> { return outputs_form(s); }},
  };
  return table;
}

} // namespace

json canonical_form(const Spec& spec) {
  json j = json::object();
  for (const shape::Key& key : shape::spec().keys) {
    if (!key.in_digest || key.presence == shape::Presence::later) {
      continue;
    }
    const auto rule = rules().find(key.name);
    if (rule == rules().end()) {
      throw std::logic_error(fmt::format("the canonical form has no rule for the spec key '{}'", key.name));
    }
    if (std::optional<json> value = rule->second(spec)) {
      j[std::string(key.name)] = std::move(*value);
    }
  }
  return j;
}

} // namespace lockstep::envspec

#include "envspec/canonical.hpp"

#include <fmt/format.h>

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

json canonical_form(const Spec& spec) {
  json j = json::object();
  j["lockstep"] = spec.schema;
  j["name"] = spec.name;
  j["platform"] = spec.platform.str();

  if (spec.base.kind == BaseImage::Kind::scratch) {
    j["base"] = "scratch";
  } else if (spec.base.kind == BaseImage::Kind::debian) {
    static constexpr const char* variants[] = {"essential", "apt", "required"};
    j["base"] = json{{"debian", spec.base.suite}, {"variant", variants[static_cast<int>(spec.base.variant)]}};
  } else {
    json base = json::object();
    base["oci"] = canonical_path(spec.base.path, spec.base.path_text, spec.dir);
    if (spec.base.pin) {
      base["pin"] = spec.base.pin->str();
    }
    if (!spec.base.tag.empty()) {
      base["tag"] = spec.base.tag;
    }
    j["base"] = std::move(base);
  }

  // Repositories and packages are absent when there are none, so older specs keep their digests.
  // A keyring is where trust comes from, not what the image holds: it stays out, like output paths.
  if (!spec.repos.empty()) {
    json repos = json::array();
    for (const Repo& r : spec.repos) {
      switch (r.kind) {
      case Repo::Kind::apt:
        repos.push_back(r.flat ? json{{"apt", r.url}, {"flat", true}}
                               : json{{"apt", r.url}, {"suite", r.suite}, {"components", r.components}});
        break;
      case Repo::Kind::pypi:
        repos.push_back(json{{"pypi", r.url}});
        break;
      case Repo::Kind::wheels:
        repos.push_back(json{{"wheels", canonical_path(r.dir, r.dir_text, spec.dir)}});
        break;
      }
    }
    j["repos"] = std::move(repos);
  }
  if (!spec.packages.apt.empty() || !spec.packages.pip.empty()) {
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
    j["packages"] = std::move(packages);
  }

  if (spec.stack) {
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
    j["stack"] = std::move(stack);
  }

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
  j["copy"] = std::move(copy);
  if (!spec.run.empty()) { // absent when empty, so specs without steps keep their digests
    json run = json::array();
    for (const RunStep& step : spec.run) {
      run.push_back(json{{"sh", step.sh}, {"network", step.network}});
    }
    j["run"] = std::move(run);
  }

  json env = json::object();
  for (const auto& [name, value] : spec.env) {
    env[name] = value;
  }
  j["env"] = std::move(env);
  json labels = json::object();
  for (const auto& [key, value] : spec.labels) {
    labels[key] = value;
  }
  j["labels"] = std::move(labels);

  if (spec.entrypoint) {
    j["entrypoint"] = *spec.entrypoint;
  }
  if (spec.cmd) {
    j["cmd"] = *spec.cmd;
  }
  if (spec.workdir) {
    j["workdir"] = *spec.workdir;
  }
  if (spec.user) {
    j["user"] = *spec.user;
  }

  // Output paths say where to write the image, not what it is: they stay out of the digest, so
  // moving an output never makes the image (or a lock) differ. Compression changes the bytes.
  json out = json::object();
  out["compression"] = spec.outputs.compression == Codec::zstd ? "zstd" : "gzip";
  if (spec.outputs.sif_compression != SquashfsCompressor::gzip) { // the default is left out
    out["sif_compression"] = std::string(squashfs_compressor_name(spec.outputs.sif_compression));
  }
  j["outputs"] = std::move(out);
  return j;
}

} // namespace lockstep::envspec

// SLSA v1 provenance statements: see provenance.hpp.
#include "envspec/documents/provenance.hpp"

#include "support/base/json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace lockstep::envspec {

namespace {

using json = nlohmann::json;

struct Dependency {
  std::string name;
  std::string uri;
  std::string sha256;
};

std::vector<Dependency> dependencies(const Lock& lock) {
  std::vector<Dependency> out;
  if (lock.base) {
    out.push_back({"base:" + lock.base->image, lock.base->image, lock.base->manifest.hex()});
  }
  for (const LockedArtifact& a : lock.artifacts) {
    std::string uri = a.url;
    if (a.kind == "git") {
      uri = fmt::format("git+{}@{}", a.name, a.version);
    }
    std::string name = a.kind == "git" ? fmt::format("git:{}@{}", a.name, a.version)
                                       : fmt::format("{}:{}={}{}{}", a.kind, a.name, a.version,
                                                     a.arch.empty() || a.kind != "deb" ? "" : ":",
                                                     a.kind == "deb" ? a.arch : "");
    out.push_back({std::move(name), std::move(uri), a.sha256.hex()});
  }
  if (lock.stack) {
    out.push_back({"recipes:" + lock.stack->recipes,
                   lock.stack->recipes_commit.empty()
                       ? lock.stack->recipes
                       : lock.stack->recipes + "@" + lock.stack->recipes_commit,
                   lock.stack->recipes_digest.hex()});
  }
  std::sort(out.begin(), out.end(), [](const Dependency& x, const Dependency& y) { return x.name < y.name; });
  return out;
}

} // namespace

std::map<std::string, std::string> lock_dependencies(const Lock& lock) {
  std::map<std::string, std::string> out;
  for (const Dependency& d : dependencies(lock)) {
    out[d.sha256] = d.uri;
  }
  return out;
}

std::string render_provenance(const Lock* lock, const ProvenanceInputs& in) {
  json external = {{"spec", {{"name", in.name}, {"digest", {{"sha256", in.spec_digest.hex()}}}}},
                   {"platform", in.platform}};
  if (in.lock) {
    external["lock"] = {{"digest", {{"sha256", in.lock->hex()}}}};
  }
  json resolved = json::array();
  if (lock != nullptr) {
    for (const Dependency& d : dependencies(*lock)) {
      resolved.push_back({{"name", d.name}, {"uri", d.uri}, {"digest", {{"sha256", d.sha256}}}});
    }
  }
  const std::string builder =
      in.builder_id.empty() ? fmt::format("pkg:generic/lockstep@{}", in.version) : in.builder_id;
  json builder_json = {{"id", builder}, {"version", {{"lockstep", in.version}}}};
  if (!in.builder_dependencies.empty()) {
    json deps = json::array();
    for (const ProvenanceInputs::Dependency& d : in.builder_dependencies) {
      deps.push_back({{"name", d.name}, {"uri", d.uri}, {"digest", {{"sha256", d.sha256.hex()}}}});
    }
    builder_json["builderDependencies"] = std::move(deps);
  }
  const json statement = {
      {"_type", "https://in-toto.io/Statement/v1"},
      {"subject", {{{"name", in.name}, {"digest", {{"sha256", in.subject.hex()}}}}}},
      {"predicateType", "https://slsa.dev/provenance/v1"},
      {"predicate",
       {{"buildDefinition",
         {{"buildType", k_slsa_build_type},
          {"externalParameters", external},
          {"internalParameters", {{"compression", in.compression}, {"epoch", in.epoch}}},
          {"resolvedDependencies", resolved}}},
        {"runDetails", {{"builder", builder_json}, {"metadata", {{"invocationId", in.subject.str()}}}}}}}};
  return statement.dump() + "\n";
}

Result<ProvenanceFacts> read_provenance(std::string_view statement, std::string_view what_view) {
  const std::string what(what_view);
  LS_TRY_ASSIGN(json j, parse_json(statement, what));
  const auto str_at = [&](const json& o, const char* ptr) -> std::string {
    const json::json_pointer p(ptr);
    return o.contains(p) && o.at(p).is_string() ? o.at(p).get<std::string>() : std::string();
  };
  if (!j.is_object() || str_at(j, "/_type") != "https://in-toto.io/Statement/v1" ||
      str_at(j, "/predicateType") != "https://slsa.dev/provenance/v1") {
    return invalid_input("{}: not an in-toto Statement v1 with a SLSA v1 provenance predicate", what);
  }
  const auto digest_of = [&](const std::string& hex, const char* field) -> Result<Digest> {
    auto d = Digest::parse("sha256:" + hex);
    if (!d) {
      return invalid_input("{}: {} is not a sha256 digest", what, field);
    }
    return *d;
  };
  ProvenanceFacts out;
  if (!j.contains("subject") || !j["subject"].is_array() || j["subject"].size() != 1) {
    return invalid_input("{}: expected exactly one subject", what);
  }
  LS_TRY_ASSIGN(out.subject, digest_of(str_at(j["subject"][0], "/digest/sha256"), "subject.digest.sha256"));
  const std::string lock_hex = str_at(j, "/predicate/buildDefinition/externalParameters/lock/digest/sha256");
  if (!lock_hex.empty()) {
    LS_TRY_ASSIGN(out.lock, digest_of(lock_hex, "the lock's digest"));
  }
  const std::string spec_hex = str_at(j, "/predicate/buildDefinition/externalParameters/spec/digest/sha256");
  if (!spec_hex.empty()) {
    LS_TRY_ASSIGN(out.spec, digest_of(spec_hex, "the spec's digest"));
  }
  out.builder_id = str_at(j, "/predicate/runDetails/builder/id");
  const json::json_pointer deps_ptr("/predicate/buildDefinition/resolvedDependencies");
  if (j.contains(deps_ptr)) {
    const json& deps = j.at(deps_ptr);
    if (!deps.is_array()) {
      return invalid_input("{}: resolvedDependencies is not a list", what);
    }
    for (const json& d : deps) {
      LS_TRY_ASSIGN(Digest dd, digest_of(str_at(d, "/digest/sha256"), "a resolvedDependency's digest"));
      out.dependencies[dd.hex()] = str_at(d, "/uri");
    }
  }
  return out;
}

} // namespace lockstep::envspec

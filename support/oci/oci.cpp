#include "support/oci/oci.hpp"

#include <sys/utsname.h>

#include <array>
#include <ctime>
#include <limits>
#include <regex>

namespace lockstep::oci {

namespace {

constexpr std::array k_known_os = {"linux", "windows", "darwin", "freebsd"};
constexpr std::array k_known_arch = {"amd64",   "arm64",    "arm",    "386",    "ppc64le", "ppc64",  "s390x",
                                     "riscv64", "mips64le", "mips64", "mipsle", "mips",    "loong64"};

template <typename Array> bool contains(const Array& a, std::string_view v) {
  for (const auto& x : a) {
    if (v == x) {
      return true;
    }
  }
  return false;
}

Result<std::string> get_string(const json& j, const char* key, const std::string& where, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) {
      return invalid_input("{}: missing '{}'", where, key);
    }
    return std::string();
  }
  if (!it->is_string()) {
    return invalid_input("{}: '{}' must be a string", where, key);
  }
  return it->get<std::string>();
}

Result<std::map<std::string, std::string>> get_annotations(const json& j, const std::string& where) {
  std::map<std::string, std::string> out;
  auto it = j.find("annotations");
  if (it == j.end() || it->is_null()) {
    return out;
  }
  if (!it->is_object()) {
    return invalid_input("{}: 'annotations' must be an object", where);
  }
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return invalid_input("{}: annotation '{}' must be a string", where, k);
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

// Splits "NAME[:TAG]" into name and tag (the ':' must follow the last '/').
std::pair<std::string_view, std::string_view> split_name_tag(std::string_view ref) {
  std::size_t slash = ref.rfind('/');
  std::size_t colon = ref.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    return {ref.substr(0, colon), ref.substr(colon + 1)};
  }
  return {ref, {}};
}

} // namespace

Result<Compression> layer_compression(std::string_view media_type) {
  if (media_type == k_media_layer_tar || media_type == k_docker_layer_tar ||
      media_type == "application/vnd.oci.image.layer.nondistributable.v1.tar") {
    return Compression::none;
  }
  if (media_type == k_media_layer_gzip || media_type == k_docker_layer_gzip ||
      media_type == "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip" ||
      media_type == "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip") {
    return Compression::gzip;
  }
  if (media_type == k_media_layer_zstd) {
    return Compression::zstd;
  }
  return invalid_input("unsupported layer media type '{}'", media_type);
}

bool is_manifest_type(std::string_view media_type) {
  return media_type == k_media_manifest || media_type == k_docker_manifest;
}

bool is_index_type(std::string_view media_type) {
  return media_type == k_media_index || media_type == k_docker_manifest_list;
}

Result<Platform> Platform::parse(std::string_view text) {
  Platform p;
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (true) {
    std::size_t j = text.find('/', i);
    parts.emplace_back(text.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) {
      break;
    }
    i = j + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    return invalid_input("invalid platform '{}': expected OS/ARCH[/VARIANT], e.g. linux/amd64", text);
  }
  p.os = parts[0];
  p.architecture = parts[1];
  if (parts.size() == 3) {
    p.variant = parts[2];
  }
  if (!contains(k_known_os, p.os)) {
    return invalid_input("invalid platform '{}': unknown OS '{}' (expected linux)", text, p.os);
  }
  if (!contains(k_known_arch, p.architecture)) {
    return invalid_input("invalid platform '{}': unknown architecture '{}' (e.g. amd64, arm64, ppc64le)",
                         text, p.architecture);
  }
  if (parts.size() == 3 && (p.variant.empty() || p.variant.size() > 8)) {
    return invalid_input("invalid platform '{}': bad variant '{}'", text, p.variant);
  }
  return p;
}

std::string Platform::str() const {
  return variant.empty() ? os + "/" + architecture : os + "/" + architecture + "/" + variant;
}

json Descriptor::to_json() const {
  json j = json::object();
  j["mediaType"] = media_type;
  j["digest"] = digest.str();
  j["size"] = size;
  if (!annotations.empty()) {
    j["annotations"] = annotations;
  }
  if (!urls.empty()) {
    j["urls"] = urls;
  }
  if (!artifact_type.empty()) {
    j["artifactType"] = artifact_type;
  }
  if (platform) {
    json p = json::object();
    p["os"] = platform->os;
    p["architecture"] = platform->architecture;
    if (!platform->variant.empty()) {
      p["variant"] = platform->variant;
    }
    j["platform"] = p;
  }
  return j;
}

Result<Descriptor> Descriptor::from_json(const json& j, const std::string& where) {
  if (!j.is_object()) {
    return invalid_input("{}: descriptor must be an object", where);
  }
  Descriptor d;
  LS_TRY_ASSIGN(d.media_type, get_string(j, "mediaType", where, true));
  LS_TRY_ASSIGN(std::string digest, get_string(j, "digest", where, true));
  auto parsed = Digest::parse(digest);
  if (!parsed) {
    return invalid_input("{}: {}", where, parsed.error().message);
  }
  d.digest = *parsed;
  auto size = j.find("size");
  constexpr auto k_max_size = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (size != j.end() && size->is_number_unsigned() && size->get<std::uint64_t>() > k_max_size) {
    return invalid_input("{}: 'size' {} is too large (the limit is {})", where, size->get<std::uint64_t>(),
                         k_max_size);
  }
  if (size == j.end() || !size->is_number_integer() || size->get<std::int64_t>() < 0) {
    return invalid_input("{}: 'size' must be a non-negative integer", where);
  }
  d.size = size->get<std::int64_t>();
  LS_TRY_ASSIGN(d.annotations, get_annotations(j, where));
  LS_TRY_ASSIGN(d.artifact_type, get_string(j, "artifactType", where, false));
  if (auto u = j.find("urls"); u != j.end() && !u->is_null()) {
    if (!u->is_array()) {
      return invalid_input("{}: 'urls' must be an array", where);
    }
    for (const auto& s : *u) {
      if (!s.is_string()) {
        return invalid_input("{}: 'urls' must hold strings", where);
      }
      d.urls.push_back(s.get<std::string>());
    }
  }
  if (auto p = j.find("platform"); p != j.end() && !p->is_null()) {
    if (!p->is_object()) {
      return invalid_input("{}: 'platform' must be an object", where);
    }
    Platform pl;
    LS_TRY_ASSIGN(pl.os, get_string(*p, "os", where + ".platform", true));
    LS_TRY_ASSIGN(pl.architecture, get_string(*p, "architecture", where + ".platform", true));
    LS_TRY_ASSIGN(pl.variant, get_string(*p, "variant", where + ".platform", false));
    d.platform = pl;
  }
  return d;
}

std::string Manifest::serialize() const {
  json j = json::object();
  j["schemaVersion"] = 2;
  if (!media_type.empty()) {
    j["mediaType"] = media_type;
  }
  if (!artifact_type.empty()) {
    j["artifactType"] = artifact_type;
  }
  j["config"] = config.to_json();
  j["layers"] = json::array();
  for (const auto& l : layers) {
    j["layers"].push_back(l.to_json());
  }
  if (subject) {
    j["subject"] = subject->to_json();
  }
  if (!annotations.empty()) {
    j["annotations"] = annotations;
  }
  return j.dump();
}

Result<Manifest> Manifest::parse(std::string_view bytes, const std::string& where) {
  LS_TRY_ASSIGN(json j, parse_json(bytes, where));
  if (!j.is_object()) {
    return invalid_input("{}: manifest must be a JSON object", where);
  }
  auto sv = j.find("schemaVersion");
  if (sv == j.end() || !sv->is_number_integer() || sv->get<int>() != 2) {
    return invalid_input("{}: manifest 'schemaVersion' must be 2", where);
  }
  Manifest m;
  LS_TRY_ASSIGN(m.media_type, get_string(j, "mediaType", where, false));
  if (!m.media_type.empty() && !is_manifest_type(m.media_type)) {
    return invalid_input("{}: '{}' is not an image manifest media type", where, m.media_type);
  }
  auto cfg = j.find("config");
  if (cfg == j.end()) {
    return invalid_input("{}: manifest has no 'config'", where);
  }
  LS_TRY_ASSIGN(m.config, Descriptor::from_json(*cfg, where + ".config"));
  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array()) {
    return invalid_input("{}: manifest 'layers' must be an array", where);
  }
  if (layers->size() > k_max_layers) {
    return invalid_input("{}: the manifest lists {} layers, more than the {} an image may have", where,
                         layers->size(), k_max_layers);
  }
  for (std::size_t i = 0; i < layers->size(); ++i) {
    LS_TRY_ASSIGN(Descriptor d, Descriptor::from_json((*layers)[i], fmt::format("{}.layers[{}]", where, i)));
    m.layers.push_back(std::move(d));
  }
  LS_TRY_ASSIGN(m.artifact_type, get_string(j, "artifactType", where, false));
  if (auto s = j.find("subject"); s != j.end() && !s->is_null()) {
    LS_TRY_ASSIGN(m.subject, Descriptor::from_json(*s, where + ".subject"));
  }
  LS_TRY_ASSIGN(m.annotations, get_annotations(j, where));
  return m;
}

std::string Index::serialize() const {
  json j = json::object();
  j["schemaVersion"] = 2;
  if (!media_type.empty()) {
    j["mediaType"] = media_type;
  }
  j["manifests"] = json::array();
  for (const auto& d : manifests) {
    j["manifests"].push_back(d.to_json());
  }
  if (!annotations.empty()) {
    j["annotations"] = annotations;
  }
  return j.dump();
}

Result<Index> Index::parse(std::string_view bytes, const std::string& where) {
  LS_TRY_ASSIGN(json j, parse_json(bytes, where));
  if (!j.is_object()) {
    return invalid_input("{}: index must be a JSON object", where);
  }
  auto sv = j.find("schemaVersion");
  if (sv == j.end() || !sv->is_number_integer() || sv->get<int>() != 2) {
    return invalid_input("{}: index 'schemaVersion' must be 2", where);
  }
  Index idx;
  LS_TRY_ASSIGN(idx.media_type, get_string(j, "mediaType", where, false));
  if (!idx.media_type.empty() && !is_index_type(idx.media_type)) {
    return invalid_input("{}: '{}' is not an image index media type", where, idx.media_type);
  }
  auto ms = j.find("manifests");
  if (ms == j.end() || !ms->is_array()) {
    return invalid_input("{}: index 'manifests' must be an array", where);
  }
  for (std::size_t i = 0; i < ms->size(); ++i) {
    LS_TRY_ASSIGN(Descriptor d, Descriptor::from_json((*ms)[i], fmt::format("{}.manifests[{}]", where, i)));
    idx.manifests.push_back(std::move(d));
  }
  LS_TRY_ASSIGN(idx.annotations, get_annotations(j, where));
  return idx;
}

Result<std::vector<Digest>> config_diff_ids(const json& config, const std::string& where) {
  if (!config.is_object()) {
    return invalid_input("{}: image config must be a JSON object", where);
  }
  auto rootfs = config.find("rootfs");
  if (rootfs == config.end() || !rootfs->is_object()) {
    return invalid_input("{}: image config has no 'rootfs'", where);
  }
  auto type = rootfs->find("type");
  if (type == rootfs->end() || *type != "layers") {
    return invalid_input("{}: image config 'rootfs.type' must be \"layers\"", where);
  }
  auto ids = rootfs->find("diff_ids");
  if (ids == rootfs->end() || !ids->is_array()) {
    return invalid_input("{}: image config 'rootfs.diff_ids' must be an array", where);
  }
  if (ids->size() > k_max_layers) {
    return invalid_input("{}: image config lists {} diff_ids, more than the {} layers an image may have",
                         where, ids->size(), k_max_layers);
  }
  std::vector<Digest> out;
  for (const auto& id : *ids) {
    if (!id.is_string()) {
      return invalid_input("{}: 'rootfs.diff_ids' must hold strings", where);
    }
    auto d = Digest::parse(id.get<std::string>());
    if (!d) {
      return invalid_input("{}: rootfs.diff_ids: {}", where, d.error().message);
    }
    out.push_back(*d);
  }
  return out;
}

Result<std::map<std::string, std::string>> config_labels(const json& runtime, const std::string& where) {
  std::map<std::string, std::string> labels;
  if (!runtime.is_object()) {
    return labels;
  }
  auto it = runtime.find("Labels");
  if (it == runtime.end() || it->is_null()) {
    return labels;
  }
  if (!it->is_object()) {
    return invalid_input("{}: the image config's Labels is not an object", where);
  }
  for (const auto& [key, value] : it->items()) {
    if (!value.is_string()) {
      const std::string found = value.is_null() ? std::string("null")
                                                : (value.is_array() || value.is_object() ? "an " : "a ") +
                                                      std::string(value.type_name());
      return invalid_input("{}: the image config's label '{}' is {}, not a string (the OCI image spec "
                           "allows only strings)",
                           where, key, found);
    }
    labels.emplace(key, value.get<std::string>());
  }
  return labels;
}

std::string rfc3339(std::int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::size_t registry_host_length(std::string_view ref) {
  std::size_t slash = ref.find('/');
  if (slash == std::string_view::npos) {
    return 0;
  }
  std::string_view first = ref.substr(0, slash);
  bool host = first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
              first == "localhost";
  return host ? slash : 0;
}

Platform Platform::host() {
  struct utsname u {};
  std::string_view machine = ::uname(&u) == 0 ? u.machine : "x86_64";
  static constexpr std::pair<std::string_view, std::string_view> k_names[] = {
      {"x86_64", "amd64"},    {"aarch64", "arm64"}, {"ppc64le", "ppc64le"}, {"s390x", "s390x"},
      {"riscv64", "riscv64"}, {"i686", "386"},      {"armv7l", "arm"}};
  for (const auto& [uname_name, oci_name] : k_names) {
    if (machine == uname_name) {
      return Platform{"linux", std::string(oci_name), oci_name == "arm" ? "v7" : ""};
    }
  }
  return Platform{"linux", "amd64", ""};
}

bool valid_registry_host(std::string_view host) {
  std::size_t colon = host.find(':');
  std::string_view name = host.substr(0, colon);
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!ok) {
      return false;
    }
  }
  if (colon != std::string_view::npos) {
    std::string_view port = host.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
  }
  return true;
}

bool looks_like_host(std::string_view first_component) {
  return first_component.find('.') != std::string_view::npos ||
         first_component.find(':') != std::string_view::npos || first_component == "localhost";
}

bool valid_repository_name(std::string_view s) {
  static const std::regex re("[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*)*");
  return s.size() <= 255 && std::regex_match(s.begin(), s.end(), re);
}

bool valid_tag(std::string_view s) {
  static const std::regex re("[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}");
  return std::regex_match(s.begin(), s.end(), re);
}

std::string normalize_docker_ref(std::string_view ref) {
  auto [name_view, tag_view] = split_name_tag(ref);
  std::string name(name_view);
  std::string tag = tag_view.empty() ? std::string("latest") : std::string(tag_view);
  std::size_t slash = name.find('/');
  if (slash == std::string::npos || !looks_like_host(std::string_view(name).substr(0, slash))) {
    name = "docker.io/" + name;
  } else if (name.substr(0, slash) == "index.docker.io") {
    name = "docker.io" + name.substr(slash);
  }
  if (name.rfind("docker.io/", 0) == 0 && name.find('/', 10) == std::string::npos) {
    name = "docker.io/library/" + name.substr(10);
  }
  return name + ":" + tag;
}

bool valid_docker_ref(std::string_view ref) {
  if (ref.empty() || ref.find('@') != std::string_view::npos) {
    return false;
  }
  auto [name, tag] = split_name_tag(ref);
  if (ref.size() != name.size() && !valid_tag(tag)) {
    return false;
  }
  std::size_t slash = name.find('/');
  if (slash != std::string_view::npos && looks_like_host(name.substr(0, slash))) {
    return valid_registry_host(name.substr(0, slash)) && valid_repository_name(name.substr(slash + 1));
  }
  return valid_repository_name(name);
}

} // namespace lockstep::oci

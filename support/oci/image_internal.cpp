// The image readers' shared internals (image_internal.hpp): picking one image inside an OCI layout
// (by tag, digest pin and platform, through nested indexes), reading and checking its manifest and
// config, and the messages and checks every reader uses.
#include "support/oci/image_internal.hpp"

#include <algorithm>
#include <set>

namespace lockstep::oci {

namespace {

constexpr std::string_view k_annotation_containerd_name = "io.containerd.image.name";
constexpr int k_max_index_depth = 4;
constexpr int k_max_nested_reads = 64;

std::string annotation(const Descriptor& d, std::string_view key) {
  auto it = d.annotations.find(std::string(key));
  return it == d.annotations.end() ? std::string() : it->second;
}

// The name an index entry is known by: a Docker image name where present (docker-archives),
// else the OCI ref.name; empty for an untagged entry.
std::string entry_name(const Descriptor& d, detail::TagMatch match) {
  if (match == detail::TagMatch::docker) {
    if (auto n = annotation(d, k_annotation_containerd_name); !n.empty()) {
      return n;
    }
  }
  return annotation(d, k_annotation_ref_name);
}

// How well index entry `d` matches `tag`: 2 for a Docker image name (docker-archives), 1 for the
// OCI ref.name, 0 not at all. A full image name is more specific than a bare ref.name.
int tag_match_rank(const Descriptor& d, const std::string& tag, detail::TagMatch match) {
  if (match == detail::TagMatch::docker) {
    auto n = annotation(d, k_annotation_containerd_name);
    if (!n.empty() && valid_docker_ref(n) && valid_docker_ref(tag) &&
        normalize_docker_ref(n) == normalize_docker_ref(tag)) {
      return 2;
    }
  }
  return annotation(d, k_annotation_ref_name) == tag ? 1 : 0;
}

std::string entry_label(const Descriptor& d, detail::TagMatch match) {
  auto n = entry_name(d, match);
  return n.empty() ? d.digest.str() + " (untagged)" : n;
}

bool platform_matches(const Platform& have, const Platform& want, bool exact_variant) {
  if (have.os != want.os || have.architecture != want.architecture) {
    return false;
  }
  return !exact_variant || have.variant == want.variant;
}

// The entry of `entries` for `want`: an exact match first, then (when no variant was asked for)
// the first entry with the same OS and architecture. Entries without a platform never match.
std::optional<std::size_t> pick_platform(const std::vector<Descriptor>& entries, const Platform& want) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].platform && platform_matches(*entries[i].platform, want, true)) {
      return i;
    }
  }
  if (want.variant.empty()) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].platform && platform_matches(*entries[i].platform, want, false)) {
        return i;
      }
    }
  }
  return std::nullopt;
}

std::string available_platforms(const std::vector<Descriptor>& entries) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& e : entries) {
    if (e.platform && e.platform->os != "unknown" && seen.insert(e.platform->str()).second) {
      out.push_back(e.platform->str());
    }
  }
  return detail::join_list(out);
}

Platform wanted_platform(const SelectOptions& options) {
  return options.platform ? *options.platform : Platform::host();
}

// A manifest descriptor found by digest, possibly inside nested indexes.
struct Found {
  Descriptor desc;
  std::string name;
};

// Looks for `digest` among `entries`, then inside their nested indexes (at most
// k_max_nested_reads of them in all, so that a hostile index graph stays cheap). Fills `seen` with
// the labels of everything looked at (for the error message).
Result<std::optional<Found>> find_by_digest(ImageSource& source, const std::vector<Descriptor>& entries,
                                            const Digest& digest, const detail::SourceNames& names,
                                            detail::TagMatch match, int depth, std::vector<std::string>& seen,
                                            int& reads_left) {
  for (const auto& e : entries) {
    if (e.digest == digest) {
      return std::optional<Found>(Found{e, entry_name(e, match)});
    }
    seen.push_back(depth == 0 ? e.digest.str() +
                                    (entry_name(e, match).empty() ? "" : " (" + entry_name(e, match) + ")")
                              : e.digest.str() + (e.platform ? " (" + e.platform->str() + ")" : ""));
  }
  if (depth >= k_max_index_depth) {
    return std::optional<Found>();
  }
  for (const auto& e : entries) {
    if (!is_index_type(e.media_type)) {
      continue;
    }
    if (reads_left-- <= 0) {
      return invalid_input("{}: more than {} nested image indexes; refusing to search them all", names.ref,
                           k_max_nested_reads);
    }
    LS_TRY_ASSIGN(std::string bytes, source.read_blob(e, detail::k_max_json_size));
    LS_TRY_ASSIGN(Index nested, Index::parse(bytes, names.location + ": index " + e.digest.str()));
    LS_TRY_ASSIGN(auto found, find_by_digest(source, nested.manifests, digest, names, match, depth + 1, seen,
                                             reads_left));
    if (found) {
      if (found->name.empty()) {
        found->name = entry_name(e, match);
      }
      return found;
    }
  }
  return std::optional<Found>();
}

// One of several entries carrying the same tag: the one the digest pin names, else the one for
// the wanted platform; entries that are all the same manifest are one. Otherwise ambiguous.
Result<Found> pick_among_tagged(const std::vector<Descriptor>& matching, const std::string& tag,
                                const SelectOptions& options, const detail::SourceNames& names,
                                detail::TagMatch match) {
  bool all_same = std::all_of(matching.begin(), matching.end(),
                              [&](const Descriptor& e) { return e.digest == matching.front().digest; });
  // The name it was selected by, in full where the entry has one (docker.io/library/NAME:TAG).
  auto found = [&](const Descriptor& e) {
    auto n = entry_name(e, match);
    return Found{e, n.empty() ? tag : n};
  };
  if (all_same) {
    return found(matching.front());
  }
  if (options.digest) {
    for (const auto& e : matching) {
      if (e.digest == *options.digest) {
        return found(e);
      }
    }
  }
  if (auto i = pick_platform(matching, wanted_platform(options))) {
    return found(matching[*i]);
  }
  std::vector<std::string> labels;
  for (const auto& e : matching) {
    auto n = entry_name(e, match);
    labels.push_back(e.digest.str() + (n.empty() || n == tag ? "" : " (" + n + ")"));
  }
  return invalid_input("{}: '{}' names {} different images ({}); pin one by digest", names.ref, tag,
                       matching.size(), detail::join_list(labels));
}

// The top-level entry chosen by tag, digest, or as the only one (see SelectOptions).
Result<Found> select_entry(ImageSource& source, const Index& index, const SelectOptions& options,
                           const detail::SourceNames& names, detail::TagMatch match) {
  const std::string& tag = options.tag.empty() ? names.ref_tag : options.tag;
  const auto& entries = index.manifests;
  if (!tag.empty()) {
    std::vector<Descriptor> matching;
    int best = 1;
    for (const auto& e : entries) {
      int rank = tag_match_rank(e, tag, match);
      if (rank > best) {
        matching.clear();
        best = rank;
      }
      if (rank == best) {
        matching.push_back(e);
      }
    }
    if (matching.empty()) {
      std::vector<std::string> names_there;
      for (const auto& e : entries) {
        if (auto n = entry_name(e, match); !n.empty()) {
          names_there.push_back(n);
        }
      }
      return invalid_input("{}: no image tagged '{}' (available: {})", names.ref, tag,
                           detail::join_list(names_there));
    }
    return pick_among_tagged(matching, tag, options, names, match);
  }
  if (options.digest) {
    std::vector<std::string> seen;
    int reads_left = k_max_nested_reads;
    LS_TRY_ASSIGN(auto found,
                  find_by_digest(source, entries, *options.digest, names, match, 0, seen, reads_left));
    if (!found) {
      return invalid_input("{}: no manifest {} (available: {})", names.ref, options.digest->str(),
                           detail::join_list(seen));
    }
    return std::move(*found);
  }
  if (entries.empty()) {
    return invalid_input("{} holds no images (index.json lists none)", names.ref);
  }
  if (entries.size() == 1) {
    return Found{entries[0], entry_name(entries[0], match)};
  }
  // Several untagged entries that all name a platform: the top level is itself a platform index.
  bool platform_list = std::all_of(entries.begin(), entries.end(), [&](const Descriptor& e) {
    return e.platform.has_value() && entry_name(e, match).empty();
  });
  if (platform_list) {
    Platform want = wanted_platform(options);
    if (auto i = pick_platform(entries, want)) {
      return Found{entries[*i], ""};
    }
    return invalid_input("{}: no image for platform {} (available: {})", names.ref, want.str(),
                         available_platforms(entries));
  }
  std::vector<std::string> labels;
  labels.reserve(entries.size());
  for (const auto& e : entries) {
    labels.push_back(entry_label(e, match));
  }
  return invalid_input("{} holds {} images; choose one with {} (available: {})", names.ref, entries.size(),
                       names.tag_hint, detail::join_list(labels));
}

} // namespace

namespace detail {

std::string join_list(const std::vector<std::string>& items) {
  constexpr std::size_t k_max_listed = 20; // a hostile index may list thousands
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < k_max_listed; ++i) {
    out += (i == 0 ? "" : ", ") + items[i];
  }
  if (items.size() > k_max_listed) {
    out += fmt::format(" and {} more", items.size() - k_max_listed);
  }
  return out.empty() ? std::string("none") : out;
}

Error blob_digest_mismatch(const Digest& expected, const Digest& got, const std::string& location,
                           std::string_view kind) {
  return invalid_input("blob {} in {} has digest {}, expected {}; the {} is corrupt", expected.str(),
                       location, got.str(), expected.str(), kind);
}

Result<void> check_readable_blob(const Descriptor& desc, std::uint64_t max_size,
                                 const std::string& location) {
  if (desc.digest.algorithm() != "sha256") {
    return invalid_input("blob {} in {}: only sha256 digests can be verified", desc.digest.str(), location);
  }
  if (static_cast<std::uint64_t>(desc.size) > max_size) {
    return invalid_input("blob {} in {} is {} bytes, more than the limit of {} bytes", desc.digest.str(),
                         location, desc.size, max_size);
  }
  return {};
}

Result<OpenedImage> resolve_in_layout(ImageSource& source, const Index& index, const SelectOptions& options,
                                      const SourceNames& names, TagMatch match) {
  LS_TRY_ASSIGN(Found found, select_entry(source, index, options, names, match));
  // Descend through nested indexes (multi-platform images) to one manifest.
  Descriptor current = found.desc;
  std::vector<Digest> chain;
  for (int depth = 0; is_index_type(current.media_type); ++depth) {
    if (depth >= k_max_index_depth) {
      return invalid_input("{}: image indexes nested more than {} deep", names.ref, k_max_index_depth);
    }
    chain.push_back(current.digest);
    LS_TRY_ASSIGN(std::string bytes, source.read_blob(current, k_max_json_size));
    LS_TRY_ASSIGN(Index nested, Index::parse(bytes, names.location + ": index " + current.digest.str()));
    Platform want = wanted_platform(options);
    auto pick = pick_platform(nested.manifests, want);
    if (!pick) {
      return invalid_input("{}: no image for platform {} in index {} (available: {})", names.ref, want.str(),
                           current.digest.str(), available_platforms(nested.manifests));
    }
    current = nested.manifests[*pick];
  }
  if (!is_manifest_type(current.media_type)) {
    return invalid_input("{}: {} has media type '{}', which is not an image manifest or index", names.ref,
                         current.digest.str(), current.media_type);
  }
  // A pin may name the manifest or an index it was reached through.
  SelectOptions checked = options;
  if (options.digest && std::find(chain.begin(), chain.end(), *options.digest) != chain.end()) {
    checked.digest.reset();
  }
  OpenedImage image;
  image.manifest_digest = current.digest;
  image.ref_name = found.name;
  if (found.desc.digest != current.digest) {
    image.index = found.desc; // the top index, descended by platform
  }
  LS_TRY_ASSIGN(image.manifest_bytes, source.read_blob(current, k_max_json_size));
  LS_TRY_ASSIGN(image.manifest,
                Manifest::parse(image.manifest_bytes, names.location + ": manifest " + current.digest.str()));
  image.manifest_media_type =
      image.manifest.media_type.empty() ? current.media_type : image.manifest.media_type;
  LS_TRY(finish_image(source, image, checked, names));
  return image;
}

Result<void> finish_image(ImageSource& source, OpenedImage& image, const SelectOptions& options,
                          const SourceNames& names) {
  if (options.digest && *options.digest != image.manifest_digest) {
    return invalid_input("{}: manifest digest is {}, but the spec pins {}", names.ref,
                         image.manifest_digest.str(), options.digest->str());
  }
  const Descriptor& cfg = image.manifest.config;
  if (cfg.media_type != k_media_config && cfg.media_type != k_docker_config) {
    return invalid_input("{}: manifest {} is not a container image (config media type '{}')", names.ref,
                         image.manifest_digest.str(), cfg.media_type);
  }
  std::string where = names.location + ": config " + cfg.digest.str();
  LS_TRY_ASSIGN(image.config_bytes, source.read_blob(cfg, k_max_json_size));
  LS_TRY_ASSIGN(image.config, parse_json(image.config_bytes, where));
  LS_TRY_ASSIGN(image.diff_ids, config_diff_ids(image.config, where));
  if (auto runtime = image.config.find("config"); runtime != image.config.end()) {
    LS_TRY(config_labels(*runtime, where)); // strings only, so every reader can rely on it
  }
  if (image.diff_ids.size() != image.manifest.layers.size()) {
    return invalid_input("{}: config {} lists {} diff_ids, but manifest {} has {} layers", names.ref,
                         cfg.digest.str(), image.diff_ids.size(), image.manifest_digest.str(),
                         image.manifest.layers.size());
  }
  auto text_field = [&](const char* key, bool required) -> Result<std::string> {
    auto it = image.config.find(key);
    if (it == image.config.end() || it->is_null()) {
      if (required) {
        return invalid_input("{}: image config has no '{}'", where, key);
      }
      return std::string();
    }
    if (!it->is_string()) {
      return invalid_input("{}: image config '{}' must be a string", where, key);
    }
    return it->get<std::string>();
  };
  LS_TRY_ASSIGN(image.platform.os, text_field("os", true));
  LS_TRY_ASSIGN(image.platform.architecture, text_field("architecture", true));
  LS_TRY_ASSIGN(image.platform.variant, text_field("variant", false));
  // Configs often leave the variant out (arm64 means v8): only a stated, different variant conflicts.
  const auto& want = options.platform;
  if (want && (image.platform.os != want->os || image.platform.architecture != want->architecture ||
               (!want->variant.empty() && !image.platform.variant.empty() &&
                image.platform.variant != want->variant))) {
    return invalid_input("{}: the image is for {}, not {}", names.ref, image.platform.str(),
                         options.platform->str());
  }
  return {};
}

} // namespace detail

} // namespace lockstep::oci

// Reading image archives: an OCI archive (a tar of an OCI layout, maybe compressed) and a
// docker-archive (`docker save`: manifest.json, with or without an OCI layout beside it).
//
// The archive is hostile. Member names are normalised and an absolute name or a ".." component
// refuses the whole archive (support/oci/tar_reader.hpp); a name that occurs twice refuses it too, as
// the two readers of an ambiguous archive could see different images. Nothing is extracted, so
// links are never followed on the filesystem: link members are recorded, and where a path that
// index.json or manifest.json names is a link (old `docker save` links repeated layers as
// `../<id>/layer.tar`), it is resolved lexically inside the archive's own member list; a target
// that is absolute or climbs out of the archive is refused. Devices, FIFOs and sockets are ignored.
//
// Pass 1 reads oci-layout, index.json and every member of at most 8 MiB into memory (256 MiB in
// all) and records the names and sizes of the rest. Images resolve from memory; fetch_blob() and
// reads of bigger members re-read the archive and stream just the wanted member, verifying its
// digest and size before anything is published.
#include "support/base/interrupt.hpp"
#include "support/oci/image_internal.hpp"
#include "support/oci/tar_reader.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace lockstep::oci::detail {

namespace {

constexpr std::uint64_t k_max_member_in_memory = 8ULL << 20;
constexpr std::uint64_t k_max_total_in_memory = 256ULL << 20;
constexpr std::size_t k_max_members = 100000;
constexpr int k_max_link_hops = 8;
constexpr std::size_t k_head_size = 8;
constexpr std::size_t k_chunk = 1 << 20;

/// What pass 1 learnt about one member.
struct Member {
  TarMember::Type type = TarMember::Type::other;
  std::int64_t size = 0;
  std::string link_target;
  std::optional<std::string> data; ///< the bytes, for small members
  std::string head;                ///< the first bytes (compression magic)
  std::optional<Digest> digest;    ///< sha256 of the bytes, once computed
};

/// One image of a docker-archive's manifest.json.
struct DockerItem {
  std::string config;
  std::vector<std::string> layers;
  std::vector<std::string> repo_tags;
};

using DataSink = std::function<Result<void>(const char*, std::size_t)>;

// Reads the rest of the current member into `sink`.
Result<void> drain_member(TarReader& reader, const DataSink& sink) {
  std::vector<char> buf(k_chunk);
  while (true) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::size_t n, reader.read(buf.data(), buf.size()));
    if (n == 0) {
      return {};
    }
    LS_TRY(sink(buf.data(), n));
  }
}

// The member a relative symlink at `link` points to, lexically; nullopt if it leaves the archive.
std::optional<std::string> symlink_destination(const std::string& link, const std::string& target) {
  if (target.empty() || target.front() == '/') {
    return std::nullopt;
  }
  std::vector<std::string> parts;
  std::size_t i = 0;
  std::string path = link.substr(0, link.rfind('/') == std::string::npos ? 0 : link.rfind('/'));
  path += "/" + target;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) {
      j = path.size();
    }
    std::string comp = path.substr(i, j - i);
    if (comp == "..") {
      if (parts.empty()) {
        return std::nullopt;
      }
      parts.pop_back();
    } else if (!comp.empty() && comp != ".") {
      parts.push_back(std::move(comp));
    }
    i = j + 1;
  }
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : "/") + p;
  }
  return out;
}

class ArchiveSource final : public ImageSource {
public:
  ArchiveSource(ImageRef ref, SourceNames names) : m_ref(std::move(ref)), m_names(std::move(names)) {}

  // Pass 1, then the structure checks for the transport.
  Result<void> load() {
    LS_TRY(read_members());
    bool has_layout = m_members.count("oci-layout") != 0;
    bool has_index = m_members.count("index.json") != 0;
    bool has_docker_manifest = m_members.count("manifest.json") != 0;
    if (m_ref.transport == ImageRef::Transport::oci_archive) {
      if (!has_layout) {
        return invalid_input(
            "{} is not an OCI archive (no oci-layout member){}", m_ref.path.string(),
            has_docker_manifest
                ? fmt::format("; for `docker save` output use docker-archive:{}", m_ref.path.string())
                : std::string());
      }
    } else if (!(has_layout && has_index) && !has_docker_manifest) {
      return invalid_input("{} is not a docker-archive (no manifest.json member)", m_ref.path.string());
    }
    if (has_layout && (has_index || m_ref.transport == ImageRef::Transport::oci_archive)) {
      LS_TRY_ASSIGN(std::string marker, member_bytes("oci-layout", std::uint64_t{64} * 1024, "oci-layout"));
      LS_TRY(check_layout_marker(marker, m_names.location + ": oci-layout"));
      LS_TRY_ASSIGN(std::string index_bytes, member_bytes("index.json", k_max_json_size, "index.json"));
      LS_TRY_ASSIGN(Index index, Index::parse(index_bytes, m_names.location + ": index.json"));
      m_index = std::move(index);
    }
    return {};
  }

  Result<OpenedImage> resolve(const SelectOptions& options) override {
    if (m_index) {
      TagMatch match =
          m_ref.transport == ImageRef::Transport::docker_archive ? TagMatch::docker : TagMatch::ref_name;
      return resolve_in_layout(*this, *m_index, options, m_names, match);
    }
    return synthesize(options);
  }

  Result<std::string> read_blob(const Descriptor& desc, std::uint64_t max_size) override {
    LS_TRY(check_readable_blob(desc, max_size, m_names.location));
    LS_TRY_ASSIGN(std::string name, blob_member(desc));
    LS_TRY_ASSIGN(std::string data, member_bytes(name, max_size, "blob " + desc.digest.str()));
    Digest actual = sha256_of(data);
    if (actual != desc.digest) {
      return blob_digest_mismatch(desc.digest, actual, m_names.location, "archive");
    }
    return data;
  }

  Result<void> fetch_blob(const Descriptor& desc, const BlobStore& store) override {
    if (store.has(desc.digest, desc.size)) {
      return {};
    }
    LS_TRY(check_readable_blob(desc, UINT64_MAX, m_names.location));
    LS_TRY_ASSIGN(std::string name, blob_member(desc));
    LS_TRY_ASSIGN(BlobStore::Writer writer, store.begin_write());
    const Member& m = m_members.at(name);
    if (m.data) {
      LS_TRY(writer.write(*m.data));
    } else {
      LS_TRY(scan({name}, [&](const std::string&, TarReader& reader) {
        return drain_member(reader, [&](const char* p, std::size_t n) { return writer.write(p, n); });
      }));
    }
    auto info = writer.commit(desc.digest, desc.size);
    if (!info) {
      return std::move(info).error().with_context(
          fmt::format("blob {} in {} (the archive is corrupt)", desc.digest.str(), m_names.location));
    }
    return {};
  }

  Result<std::unique_ptr<BlobReader>> open_blob(const Descriptor& desc) override {
    LS_TRY(check_readable_blob(desc, UINT64_MAX, m_names.location));
    LS_TRY_ASSIGN(std::string name, blob_member(desc));
    const Member& m = m_members.at(name);
    if (m.data) {
      return memory_blob_reader(*m.data); // m_members outlives the source's readers
    }
    LS_TRY_ASSIGN(TarReader reader, TarReader::open(m_ref.path, m_names.location));
    for (;;) {
      LS_TRY(check_interrupted());
      LS_TRY_ASSIGN(auto tm, reader.next());
      if (!tm) {
        return invalid_input("{}: archive member '{}' is gone (did the file change while lockstep read it?)",
                             m_names.location, name);
      }
      if (tm->type == TarMember::Type::file && tm->name == name) {
        return std::unique_ptr<BlobReader>(std::make_unique<MemberBlob>(std::move(reader)));
      }
    }
  }

private:
  // The archive positioned at the member.
  class MemberBlob final : public BlobReader {
  public:
    explicit MemberBlob(TarReader reader) : m_reader(std::move(reader)) {}
    Result<std::size_t> read(void* data, std::size_t size) override { return m_reader.read(data, size); }

  private:
    TarReader m_reader;
  };

  Result<void> read_members() {
    LS_TRY_ASSIGN(TarReader reader, TarReader::open(m_ref.path, m_names.location));
    std::uint64_t in_memory = 0;
    while (true) {
      LS_TRY(check_interrupted());
      LS_TRY_ASSIGN(auto tm, reader.next());
      if (!tm) {
        return {};
      }
      if (m_members.size() >= k_max_members) {
        return invalid_input("{}: more than {} archive members; this is not an image archive",
                             m_names.location, k_max_members);
      }
      if (tm->name.empty()) {
        if (tm->type != TarMember::Type::directory) {
          return invalid_input("{}: archive member '.' is not a directory; refusing the archive",
                               m_names.location);
        }
        continue;
      }
      auto [it, inserted] = m_members.try_emplace(tm->name);
      if (!inserted) {
        if (it->second.type == TarMember::Type::directory && tm->type == TarMember::Type::directory) {
          continue;
        }
        return invalid_input("{}: archive member '{}' occurs more than once; refusing an ambiguous archive",
                             m_names.location, tm->name);
      }
      Member& m = it->second;
      m.type = tm->type;
      m.size = tm->size;
      m.link_target = std::move(tm->link_target);
      if (m.type != TarMember::Type::file) {
        continue;
      }
      auto size = static_cast<std::uint64_t>(m.size);
      std::string data;
      bool keep = size <= k_max_member_in_memory && in_memory + size <= k_max_total_in_memory;
      data.reserve(keep ? size : k_head_size);
      std::vector<char> buf(keep ? k_chunk : k_head_size);
      while (keep || data.size() < k_head_size) {
        LS_TRY_ASSIGN(std::size_t n, reader.read(buf.data(), buf.size()));
        if (n == 0) {
          break;
        }
        data.append(buf.data(), keep ? n : std::min(n, k_head_size - data.size()));
        if (data.size() > size) {
          return invalid_input("{}: archive member '{}' is longer than its header says", m_names.location,
                               tm->name);
        }
      }
      if (keep && data.size() != size) {
        return invalid_input("{}: archive member '{}' is truncated", m_names.location, tm->name);
      }
      m.head = data.substr(0, k_head_size);
      if (keep) {
        in_memory += size;
        m.data = std::move(data);
      }
    }
  }

  // Streams each member named in `wanted` (regular files, normalised names) to `on_member`.
  Result<void> scan(const std::set<std::string>& wanted,
                    const std::function<Result<void>(const std::string&, TarReader&)>& on_member) {
    LS_TRY_ASSIGN(TarReader reader, TarReader::open(m_ref.path, m_names.location));
    std::set<std::string> left = wanted;
    while (!left.empty()) {
      LS_TRY(check_interrupted());
      LS_TRY_ASSIGN(auto tm, reader.next());
      if (!tm) {
        break;
      }
      if (tm->type == TarMember::Type::file && left.erase(tm->name) == 1) {
        LS_TRY(on_member(tm->name, reader));
      }
    }
    if (!left.empty()) {
      return invalid_input("{}: archive member '{}' is gone (did the file change while lockstep read it?)",
                           m_names.location, *left.begin());
    }
    return {};
  }

  // Follows hard and symbolic links inside the archive to a regular file member.
  Result<std::string> resolve_links(std::string name, const std::string& what) {
    for (int hop = 0; hop <= k_max_link_hops; ++hop) {
      auto it = m_members.find(name);
      if (it == m_members.end()) {
        return invalid_input("{}: {}: no archive member '{}'", m_names.location, what, name);
      }
      const Member& m = it->second;
      switch (m.type) {
      case TarMember::Type::file:
        return name;
      case TarMember::Type::hardlink:
        name = m.link_target;
        break;
      case TarMember::Type::symlink: {
        auto dest = symlink_destination(name, m.link_target);
        if (!dest) {
          return invalid_input("{}: {}: archive member '{}' is a symbolic link to '{}', outside the archive; "
                               "refusing it",
                               m_names.location, what, name, m.link_target);
        }
        name = std::move(*dest);
        break;
      }
      default:
        return invalid_input("{}: {}: archive member '{}' is not a regular file", m_names.location, what,
                             name);
      }
    }
    return invalid_input("{}: {}: more than {} links in a row at archive member '{}'", m_names.location, what,
                         k_max_link_hops, name);
  }

  // A path that manifest.json names, as a regular file member.
  Result<std::string> member_path(const std::string& raw, const std::string& what) {
    auto name = normalize_member_name(raw);
    if (!name) {
      return invalid_input("{}: {}: {}; refusing the archive", m_names.location, what, name.error().message);
    }
    return resolve_links(*name, what);
  }

  // The member holding a blob (size checked against the descriptor).
  Result<std::string> blob_member(const Descriptor& desc) {
    std::string name;
    if (auto it = m_synth.find(desc.digest); it != m_synth.end()) {
      name = it->second;
    } else {
      name = "blobs/" + desc.digest.algorithm() + "/" + desc.digest.hex();
      if (m_members.count(name) == 0) {
        return invalid_input("blob {} is missing from {} (no archive member '{}')", desc.digest.str(),
                             m_names.location, name);
      }
    }
    LS_TRY_ASSIGN(name, resolve_links(name, "blob " + desc.digest.str()));
    const Member& m = m_members.at(name);
    if (m.size != desc.size) {
      return invalid_input("blob {} in {} has {} bytes, expected {}; the archive is corrupt",
                           desc.digest.str(), m_names.location, m.size, desc.size);
    }
    return name;
  }

  // The bytes of a member (after links), from memory or by streaming it.
  Result<std::string> member_bytes(const std::string& raw_name, std::uint64_t max_size,
                                   const std::string& what) {
    LS_TRY_ASSIGN(std::string name, resolve_links(raw_name, what));
    const Member& m = m_members.at(name);
    if (static_cast<std::uint64_t>(m.size) > max_size) {
      return invalid_input("{}: {} is {} bytes, more than the limit of {} bytes", m_names.location, what,
                           m.size, max_size);
    }
    if (m.data) {
      return *m.data;
    }
    std::string out;
    LS_TRY(scan({name}, [&](const std::string&, TarReader& reader) {
      return drain_member(reader, [&](const char* p, std::size_t n) -> Result<void> {
        if (out.size() + n > static_cast<std::uint64_t>(m.size)) {
          return invalid_input("{}: archive member '{}' is longer than its header says", m_names.location,
                               name);
        }
        out.append(p, n);
        return {};
      });
    }));
    return out;
  }

  Result<std::vector<DockerItem>> read_docker_manifest() {
    std::string where = m_names.location + ": manifest.json";
    LS_TRY_ASSIGN(std::string bytes, member_bytes("manifest.json", k_max_json_size, "manifest.json"));
    LS_TRY_ASSIGN(json j, parse_json(bytes, where));
    if (!j.is_array() || j.empty()) {
      return invalid_input("{}: expected a non-empty JSON array of images", where);
    }
    std::vector<DockerItem> items;
    for (std::size_t i = 0; i < j.size(); ++i) {
      const json& e = j[i];
      std::string at = fmt::format("{}: image [{}]", where, i);
      if (!e.is_object()) {
        return invalid_input("{}: must be an object", at);
      }
      DockerItem item;
      auto cfg = e.find("Config");
      if (cfg == e.end() || !cfg->is_string()) {
        return invalid_input("{}: 'Config' must be a string", at);
      }
      item.config = cfg->get<std::string>();
      auto layers = e.find("Layers");
      if (layers == e.end() || !layers->is_array()) {
        return invalid_input("{}: 'Layers' must be an array", at);
      }
      for (const auto& l : *layers) {
        if (!l.is_string()) {
          return invalid_input("{}: 'Layers' must hold strings", at);
        }
        item.layers.push_back(l.get<std::string>());
      }
      if (auto tags = e.find("RepoTags"); tags != e.end() && !tags->is_null()) {
        if (!tags->is_array()) {
          return invalid_input("{}: 'RepoTags' must be an array", at);
        }
        for (const auto& t : *tags) {
          if (!t.is_string()) {
            return invalid_input("{}: 'RepoTags' must hold strings", at);
          }
          item.repo_tags.push_back(t.get<std::string>());
        }
      }
      items.push_back(std::move(item));
    }
    return items;
  }

  // The media type of a legacy docker-archive layer, from its first bytes.
  Result<std::string> layer_media_type(const std::string& head, const std::string& what) {
    auto starts = [&](std::string_view magic) { return head.compare(0, magic.size(), magic) == 0; };
    if (starts("\x1f\x8b")) {
      return std::string(k_docker_layer_gzip);
    }
    if (starts("\x28\xb5\x2f\xfd")) {
      return std::string(k_media_layer_zstd);
    }
    if (starts("BZh") || starts(std::string_view("\xfd"
                                                 "7zXZ\0",
                                                 6))) {
      return invalid_input(
          "{}: {} is bzip2- or xz-compressed; lockstep reads uncompressed, gzip and zstd layers",
          m_names.location, what);
    }
    return std::string(k_docker_layer_tar);
  }

  // A legacy docker-archive (manifest.json only): builds an OCI manifest for the chosen image.
  Result<OpenedImage> synthesize(const SelectOptions& options) {
    LS_TRY_ASSIGN(std::vector<DockerItem> items, read_docker_manifest());
    const std::string& tag = options.tag.empty() ? m_names.ref_tag : options.tag;
    const DockerItem* item = nullptr;
    std::string ref_name;
    std::vector<std::string> available;
    for (std::size_t i = 0; i < items.size(); ++i) {
      for (const auto& t : items[i].repo_tags) {
        available.push_back(t);
      }
      if (items[i].repo_tags.empty()) {
        available.push_back(fmt::format("image [{}] (untagged)", i));
      }
    }
    if (!tag.empty()) {
      if (!valid_docker_ref(tag)) {
        return invalid_input("{}: '{}' is not an image name (NAME[:TAG])", m_names.ref, tag);
      }
      std::string want = normalize_docker_ref(tag);
      for (const auto& it : items) {
        for (const auto& t : it.repo_tags) {
          if (item == nullptr && valid_docker_ref(t) && normalize_docker_ref(t) == want) {
            item = &it;
            ref_name = t;
          }
        }
      }
      if (item == nullptr) {
        return invalid_input("{}: no image tagged '{}' in manifest.json (available: {})", m_names.ref, tag,
                             join_list(available));
      }
    } else if (items.size() == 1) {
      item = &items[0];
      ref_name = item->repo_tags.empty() ? std::string() : item->repo_tags.front();
    } else {
      return invalid_input("{} holds {} images; choose one with {} (available: {})", m_names.ref,
                           items.size(), m_names.tag_hint, join_list(available));
    }

    OpenedImage image;
    image.synthesized_manifest = true;
    image.ref_name = ref_name;
    Manifest& manifest = image.manifest;
    manifest.media_type = std::string(k_media_manifest);
    image.manifest_media_type = manifest.media_type;

    LS_TRY_ASSIGN(std::string config_name, member_path(item->config, "manifest.json Config"));
    LS_TRY_ASSIGN(std::string config_bytes,
                  member_bytes(config_name, k_max_json_size, "config '" + config_name + "'"));
    manifest.config.media_type = std::string(k_media_config);
    manifest.config.digest = sha256_of(config_bytes);
    manifest.config.size = static_cast<std::int64_t>(config_bytes.size());

    std::vector<std::string> layer_names;
    std::set<std::string> to_hash;
    for (std::size_t i = 0; i < item->layers.size(); ++i) {
      LS_TRY_ASSIGN(std::string name,
                    member_path(item->layers[i], fmt::format("manifest.json Layers[{}]", i)));
      Member& m = m_members.at(name);
      if (!m.digest && m.data) {
        m.digest = sha256_of(*m.data);
      } else if (!m.digest) {
        to_hash.insert(name);
      }
      layer_names.push_back(std::move(name));
    }
    if (!to_hash.empty()) {
      auto hash_member = [&](const std::string& name, TarReader& reader) -> Result<void> {
        Sha256 hash;
        LS_TRY(drain_member(reader, [&](const char* p, std::size_t n) -> Result<void> {
          hash.update(p, n);
          return {};
        }));
        m_members.at(name).digest = hash.finish();
        return {};
      };
      LS_TRY(scan(to_hash, hash_member));
    }
    for (std::size_t i = 0; i < layer_names.size(); ++i) {
      const Member& m = m_members.at(layer_names[i]);
      Descriptor d;
      LS_TRY_ASSIGN(d.media_type, layer_media_type(m.head, fmt::format("layer '{}'", layer_names[i])));
      d.digest = *m.digest;
      d.size = m.size;
      m_synth[d.digest] = layer_names[i];
      manifest.layers.push_back(std::move(d));
    }
    m_synth[manifest.config.digest] = config_name;
    image.manifest_bytes = manifest.serialize();
    image.manifest_digest = sha256_of(image.manifest_bytes);
    LS_TRY(finish_image(*this, image, options, m_names));
    return image;
  }

  ImageRef m_ref;
  SourceNames m_names;
  std::map<std::string, Member> m_members;
  std::map<Digest, std::string> m_synth; ///< blobs of a synthesised manifest -> member names
  std::optional<Index> m_index;          ///< index.json, when the archive holds an OCI layout
};

} // namespace

Result<std::unique_ptr<ImageSource>> open_archive(const ImageRef& ref) {
  SourceNames names;
  bool docker = ref.transport == ImageRef::Transport::docker_archive;
  names.location = (docker ? "docker-archive:" : "oci-archive:") + ref.path.string();
  names.ref = ref.str();
  names.tag_hint = names.location + (docker ? ":NAME:TAG" : ":TAG");
  names.ref_tag = ref.tag;
  std::error_code ec;
  auto status = std::filesystem::status(ref.path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    return invalid_input("{}: {} does not exist", names.ref, ref.path.string());
  }
  if (status.type() == std::filesystem::file_type::directory) {
    return invalid_input("{}: {} is a directory (for an OCI layout directory, use oci:{})", names.ref,
                         ref.path.string(), ref.path.string());
  }
  auto source = std::make_unique<ArchiveSource>(ref, std::move(names));
  LS_TRY(source->load());
  return std::unique_ptr<ImageSource>(std::move(source));
}

} // namespace lockstep::oci::detail

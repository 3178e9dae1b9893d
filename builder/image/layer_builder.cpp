#include "builder/image/layer_builder.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace lockstep::builder {

namespace {

constexpr const char* k_cache_ns = "layers";

std::string_view media_type_for(Codec codec) {
  return codec == Codec::gzip ? oci::k_media_layer_gzip : oci::k_media_layer_zstd;
}

// The compressed stream goes into the store writer (which hashes it).
class StoreSink final : public ByteSink {
public:
  explicit StoreSink(BlobStore::Writer& w) : m_writer(w) {}
  void write(const void* data, std::size_t size) override { unwrap(m_writer.write(data, size)); }

private:
  BlobStore::Writer& m_writer;
};

} // namespace

std::optional<BuiltLayer> find_cached_layer(const Digest& fingerprint, const BlobStore& store, Codec codec) {
  auto record = store.get_record(k_cache_ns, fingerprint.hex());
  if (!record) {
    return std::nullopt;
  }
  auto j = oci::parse_json(*record, "layer cache record");
  if (!j || !j->is_object()) {
    return std::nullopt;
  }
  auto desc = oci::Descriptor::from_json((*j)["descriptor"], "layer cache record");
  auto diff = (*j)["diff_id"].is_string() ? Digest::parse((*j)["diff_id"].get<std::string>())
                                          : Result<Digest>(invalid_input("no diff_id"));
  if (!desc || !diff || desc->media_type != media_type_for(codec) || !store.has(desc->digest, desc->size)) {
    return std::nullopt;
  }
  return BuiltLayer{*desc, *diff, true};
}

namespace {

void copy_file_into(TarWriter& tar, const PlannedEntry& e, std::vector<char>& buf, log::Progress& progress) {
  int fd = ::open(e.source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    throw Failure(errno_error("can't read " + e.source, errno));
  }
  UniqueFd guard(fd);
  auto left = static_cast<std::uint64_t>(e.tar.size);
  while (left > 0) {
    std::size_t n = unwrap(read_some(fd, buf.data(), std::min<std::uint64_t>(left, buf.size()), e.source));
    if (n == 0) {
      break;
    }
    tar.write_data(buf.data(), n);
    progress.advance(n);
    left -= n;
  }
  char extra = 0;
  if (left != 0 || unwrap(read_some(fd, &extra, 1, e.source)) != 0) {
    throw Failure(
        io_error("{} changed size while it was being read; run the build again when it is stable", e.source));
  }
}

} // namespace

std::string layer_settings(Codec codec) {
  return codec == Codec::gzip ? fmt::format("gzip level {} chunk {} ({})", k_gzip_level, k_gzip_chunk_size,
                                            codec_library_versions())
                              : fmt::format("zstd level {} ({})", k_zstd_level, codec_library_versions());
}

Result<BuiltLayer> build_generated_layer(const Digest& fingerprint, bool cacheable, const BlobStore& store,
                                         Codec codec, const std::string& label, std::uint64_t content_bytes,
                                         const LayerContentWriter& write) {
  if (auto hit = find_cached_layer(fingerprint, store, codec)) {
    log::debug("{}: layer cache hit {} -> {}", label, fingerprint.hex(), hit->descriptor.digest.str());
    return *hit;
  }
  LS_TRY_ASSIGN(BlobStore::Writer writer, store.begin_write());
  BuiltLayer layer;
  try {
    StoreSink store_sink(writer);
    Sha256 diff_hash;
    ParallelCompressor compressor(
        codec, store_sink, default_thread_count(),
        [&diff_hash](const void* data, std::size_t size) { diff_hash.update(data, size); });
    TarWriter tar(compressor); // the compressor also feeds the diff_id hash, on its own thread
    log::Progress progress(label, content_bytes);
    unwrap(write(tar, progress));
    tar.finish();
    compressor.finish();
    layer.diff_id = diff_hash.finish();
    progress.done();
  } catch (const Failure& f) {
    return f.error();
  }
  LS_TRY_ASSIGN(BlobInfo info, writer.commit());
  layer.descriptor.media_type = std::string(media_type_for(codec));
  layer.descriptor.digest = info.digest;
  layer.descriptor.size = info.size;
  if (cacheable) {
    nlohmann::json record;
    record["descriptor"] = layer.descriptor.to_json();
    record["diff_id"] = layer.diff_id.str();
    // A failed cache write only costs a rebuild next time.
    if (auto r = store.put_record(k_cache_ns, fingerprint.hex(), record.dump()); !r) {
      log::debug("can't record layer cache entry: {}", r.error().message);
    }
  } else {
    log::debug("{}: sources changed within the last 2 s; not recording a layer cache entry", label);
  }
  return layer;
}

Result<BuiltLayer> build_layer(const LayerPlan& plan, const BlobStore& store, Codec codec,
                               const std::string& label) {
  return build_generated_layer(plan.fingerprint, plan.cacheable, store, codec, label, plan.content_bytes,
                               [&plan](TarWriter& tar, log::Progress& progress) -> Result<void> {
                                 std::vector<char> buf(1 << 20);
                                 for (const auto& planned : plan.entries) {
                                   throw_if_interrupted();
                                   PlannedEntry e = planned;
                                   unwrap(complete_entry(e));
                                   tar.add(e.tar);
                                   if (e.tar.type == TarEntry::Type::file && e.tar.size > 0) {
                                     copy_file_into(tar, e, buf, progress);
                                   }
                                 }
                                 return {};
                               });
}

} // namespace lockstep::builder

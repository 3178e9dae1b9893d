// Staging an image into the nodes' stores (stage.hpp, docs/launch.md "Staging").
#include "runner/launch/stage.hpp"

#include "envspec/settings/settings.hpp"
#include "runner/launch/job.hpp"
#include "runner/runtime/sif_mount.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/oras.hpp"
#include "support/registry/pull.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <future>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_chunk = 1U << 20;
constexpr std::size_t k_max_header_line = 4096;
constexpr std::size_t k_max_blobs = 100000;
constexpr std::size_t k_max_result_line = std::size_t{16} * 1024;
constexpr std::string_view k_magic = "lockstep-stage 1";
constexpr std::string_view k_sif_media_type = "application/vnd.sylabs.sif.layer.v1.sif";

std::string host_name() {
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  return host.data();
}

Result<void> write_all_fd(int fd, const char* data, std::size_t size, const std::string& what) {
  std::size_t off = 0;
  while (off < size) {
    const ssize_t n = ::write(fd, data + off, size - off);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return errno_error("can't write to " + what, errno);
    }
    off += static_cast<std::size_t>(n);
  }
  return {};
}

// Ignores SIGPIPE while alive: a node that stops reading is a failed node, not a dead lockstep.
class IgnoreSigpipe {
public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &m_old);
  }
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &m_old, nullptr); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

private:
  struct sigaction m_old {};
};

// ---- the tree ---------------------------------------------------------------------------------------

// One node this process streams the bundle to, with its subtree: `agent HOST 'lockstep
// stage-receive --forward ...'`, its stdin the stream, its stdout the result lines of the subtree.
struct Child {
  std::string host;
  std::vector<std::string> subtree;
  pid_t pid = -1;
  UniqueFd in;
  UniqueFd out;
  std::string error; ///< why it stopped taking the stream ("" while it takes it)
  std::future<std::string> output;
};

std::vector<std::string> receive_argv(const StageFanout& how, const std::vector<std::string>& subtree) {
  std::vector<std::string> argv = {how.lockstep, "stage-receive", "--lockstep",
                                   how.lockstep, "--width",       std::to_string(how.width)};
  for (const std::string& w : how.agent) {
    argv.insert(argv.end(), {"--agent", w});
  }
  for (const std::string& h : subtree) {
    argv.insert(argv.end(), {"--forward", h});
  }
  return argv;
}

// Starts `agent host 'lockstep stage-receive ...'` with pipes on its stdin and stdout (stderr passes).
Result<void> start_child(Child& c, const StageFanout& how, std::vector<std::vector<std::string>>& commands) {
  std::vector<std::string> argv = how.agent;
  argv.insert(argv.end(), {c.host, shell_join(receive_argv(how, c.subtree))});
  commands.push_back(argv);
  std::array<int, 2> in{-1, -1};
  std::array<int, 2> out{-1, -1};
  if (::pipe2(in.data(), O_CLOEXEC) != 0 || ::pipe2(out.data(), O_CLOEXEC) != 0) {
    return errno_error("can't create a pipe", errno);
  }
  std::vector<char*> cargv = c_strings(argv);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::dup2(in[0], STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0) {
      _exit(127);
    }
    ::execvp(cargv[0], cargv.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  c.in = UniqueFd(in[1]);
  c.out = UniqueFd(out[0]);
  if (pid < 0) {
    return errno_error("can't start the rsh agent for " + c.host, errno);
  }
  c.pid = pid;
  // Its result lines, read while the stream flows (a subtree's lines can't fill the pipe then).
  c.output = std::async(std::launch::async, [fd = c.out.get()] {
    std::string text;
    std::array<char, 4096> buf{};
    for (;;) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0 || text.size() > (64U << 20)) {
        return text;
      }
      text.append(buf.data(), static_cast<std::size_t>(n));
    }
  });
  return {};
}

// The stream to every child of a tree (or none).
class Forwarder {
public:
  Forwarder(const std::vector<std::string>& hosts, const StageFanout& how,
            std::vector<std::vector<std::string>>& commands) {
    for (auto& [host, subtree] : tree_children(hosts, how.width)) {
      m_children.emplace_back();
      Child& c = m_children.back();
      c.host = host;
      c.subtree = subtree;
      if (Result<void> r = start_child(c, how, commands); !r) {
        c.error = r.error().message;
      }
    }
  }

  // Sends the next bytes to every child still taking them.
  void send(const char* data, std::size_t size) {
    for (Child& c : m_children) {
      if (c.error.empty()) {
        if (Result<void> r = write_all_fd(c.in.get(), data, size, c.host); !r) {
          c.error = r.error().message;
          c.in.reset();
        }
      }
    }
  }

  // Closes the streams and gathers the subtrees' results: one per host, a failed one for each host
  // that did not report.
  std::vector<StagedNode> finish() {
    std::vector<StagedNode> out;
    for (Child& c : m_children) {
      c.in.reset();
      std::string text = c.output.valid() ? c.output.get() : std::string();
      const int status = c.pid > 0 ? wait_exit_code(c.pid) : 127;
      std::vector<std::string> hosts = {c.host};
      hosts.insert(hosts.end(), c.subtree.begin(), c.subtree.end());
      std::vector<StagedNode> got;
      for (const std::string_view line : text_lines(text)) {
        if (!line.starts_with("{")) {
          continue;
        }
        if (Result<StagedNode> n = staged_node_from_json(line)) {
          got.push_back(std::move(*n));
        }
      }
      for (const std::string& h : hosts) {
        auto it = std::find_if(got.begin(), got.end(), [&h](const StagedNode& n) { return n.node == h; });
        if (it != got.end()) {
          out.push_back(*it);
        } else {
          const std::string why = !c.error.empty() ? c.error : fmt::format("no answer (exit {})", status);
          out.push_back(
              {h, false, "", h == c.host ? why : fmt::format("not reached through {}: {}", c.host, why)});
        }
      }
    }
    return out;
  }

private:
  std::vector<Child> m_children;
};

// ---- the bundle reader ------------------------------------------------------------------------------

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    std::size_t j = std::min(line.find(' ', i), line.size());
    out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

Result<std::int64_t> parse_size(std::string_view s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
    return invalid_input("'{}' is not a size", s);
  }
  return v;
}

std::string clean(std::string_view s, std::size_t limit) {
  std::string out;
  for (char c : s.substr(0, limit)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out;
}

// The OCI image whose manifest blob is `manifest` in `store`.
Result<StageImage> oci_from_store(const BlobStore& store, const oci::Descriptor& manifest) {
  LS_TRY_ASSIGN(std::string bytes, store.read(manifest.digest));
  LS_TRY_ASSIGN(oci::Manifest m, oci::Manifest::parse(bytes, "manifest " + manifest.digest.str()));
  StageImage image;
  image.kind = StageImage::Kind::oci;
  image.oci.manifest = manifest;
  image.oci.manifest.size = static_cast<std::int64_t>(bytes.size());
  image.oci.blobs.push_back(m.config);
  image.oci.blobs.insert(image.oci.blobs.end(), m.layers.begin(), m.layers.end());
  return image;
}

// Moves a received SIF file into the store once its digest is right.
Result<void> adopt_sif(const BlobStore& store, const fs::path& file, const Digest& expected) {
  LS_TRY_ASSIGN(Digest actual, sha256_of_file(file));
  if (actual != expected) {
    return invalid_input("the SIF copy {} has digest {}, {} expected: damaged on the way", file.string(),
                         actual.str(), expected.str());
  }
  const fs::path dest = store.blob_path(expected);
  if (::chmod(file.c_str(), 0444) != 0) {
    return errno_error("can't chmod " + file.string(), errno);
  }
  if (::rename(file.c_str(), dest.c_str()) != 0) {
    // Another file system: copy through a writer, which checks the digest again.
    LS_TRY_ASSIGN(UniqueFd in, open_file(file, O_RDONLY));
    LS_TRY_ASSIGN(BlobStore::Writer w, store.begin_write());
    std::vector<char> buf(k_chunk);
    for (;;) {
      LS_TRY_ASSIGN(std::size_t n, read_some(in.get(), buf.data(), buf.size(), file.string()));
      if (n == 0) {
        break;
      }
      LS_TRY(w.write(buf.data(), n));
    }
    LS_TRY(w.commit(expected));
    (void)::unlink(file.c_str());
    return {};
  }
  return fsync_dir(dest.parent_path());
}

} // namespace

std::vector<oci::Descriptor> StageImage::blobs() const {
  if (kind == Kind::sif) {
    oci::Descriptor d;
    d.media_type = std::string(k_sif_media_type);
    d.digest = sif_digest;
    d.size = sif_size;
    return {d};
  }
  std::vector<oci::Descriptor> out = {oci.manifest};
  out.insert(out.end(), oci.blobs.begin(), oci.blobs.end());
  return out;
}

Result<StageImage> stage_image_of(const ImageArg& arg, const BlobStore& store) {
  StageImage image;
  switch (arg.kind) {
  case ImageArg::Kind::directory:
    return invalid_input(
        "{} is a directory: it has no digest, so it can't be staged onto the nodes; put it on a "
        "file system every node sees",
        arg.path.string());
  case ImageArg::Kind::sif: {
    if (arg.ref.is_remote() && arg.path.empty()) { // oras://: pulled into the store first
      ImageArg pulled = arg;
      LS_TRY_ASSIGN(pulled.path,
                    registry::pull_sif(arg.ref.remote, store, registry::default_client_options()));
      return stage_image_of(pulled, store);
    }
    LS_TRY_ASSIGN(std::string hex, sif_content_key(arg.path, store.root()));
    LS_TRY_ASSIGN(image.sif_digest, Digest::parse("sha256:" + hex));
    struct stat st {};
    if (::stat(arg.path.c_str(), &st) != 0) {
      return errno_error("can't stat " + arg.path.string(), errno);
    }
    image.kind = StageImage::Kind::sif;
    image.sif_size = st.st_size;
    if (!store.has(image.sif_digest, image.sif_size)) {
      LS_TRY_ASSIGN(UniqueFd in, open_file(arg.path, O_RDONLY));
      LS_TRY_ASSIGN(BlobStore::Writer w, store.begin_write());
      std::vector<char> buf(k_chunk);
      for (;;) {
        LS_TRY_ASSIGN(std::size_t n, read_some(in.get(), buf.data(), buf.size(), arg.path.string()));
        if (n == 0) {
          break;
        }
        LS_TRY(w.write(buf.data(), n));
      }
      LS_TRY(w.commit(image.sif_digest, image.sif_size));
    }
    image.sif = store.blob_path(image.sif_digest);
    return image;
  }
  case ImageArg::Kind::oci:
    break;
  }
  oci::OpenedImage opened;
  if (arg.ref.transport == oci::ImageRef::Transport::docker) {
    // docker://: one pull (blobs in parallel, those the store has skipped), manifest included.
    LS_TRY_ASSIGN(auto pulled, registry::pull(arg.ref.remote, store, oci::SelectOptions{},
                                              registry::default_client_options()));
    opened = std::move(pulled.first);
    LS_TRY(store.put(opened.manifest_bytes));
  } else {
    LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source, oci::ImageSource::open(arg.ref));
    LS_TRY_ASSIGN(opened, source->resolve(oci::SelectOptions{}));
    LS_TRY_ASSIGN(BlobInfo manifest, store.put(opened.manifest_bytes));
    if (manifest.digest != opened.manifest_digest) {
      return internal_error("the manifest of {} changed its digest", arg.ref.str());
    }
    LS_TRY(source->fetch_blob(opened.manifest.config, store));
    for (const oci::Descriptor& layer : opened.manifest.layers) {
      LS_TRY(source->fetch_blob(layer, store));
    }
  }
  image.kind = StageImage::Kind::oci;
  image.oci.manifest.media_type = opened.manifest_media_type;
  image.oci.manifest.digest = opened.manifest_digest;
  image.oci.manifest.size = static_cast<std::int64_t>(opened.manifest_bytes.size());
  image.oci.blobs.push_back(opened.manifest.config);
  image.oci.blobs.insert(image.oci.blobs.end(), opened.manifest.layers.begin(), opened.manifest.layers.end());
  return image;
}

Result<StageImage> stage_image_in_store(const BlobStore& store, const oci::StoredImage& stored) {
  StageImage image;
  image.kind = StageImage::Kind::oci;
  image.oci = stored;
  for (const oci::Descriptor& d : image.blobs()) {
    if (!store.has(d.digest, d.size)) {
      return invalid_input("blob {} ({} bytes) of image {} is not in the store {}", d.digest.str(), d.size,
                           stored.manifest.digest.str(), store.root().string());
    }
  }
  return image;
}

Result<std::string> place_staged(const BlobStore& store, const StageImage& image) {
  if (image.kind == StageImage::Kind::sif) {
    if (!store.has(image.sif_digest, image.sif_size)) {
      return invalid_input("SIF {} is not in the store {}", image.sif_digest.str(), store.root().string());
    }
    return "sif:" + store.blob_path(image.sif_digest).string();
  }
  const fs::path dir = store.root() / "images" / ("sha256-" + image.oci.manifest.digest.hex());
  oci::StoredImage layout = image.oci;
  layout.ref_name.clear();
  LS_TRY(oci::write_oci_layout(store, layout, dir));
  return "oci:" + dir.string();
}

Result<void> write_bundle(const BlobStore& store, const StageImage& image, const ByteSink& sink) {
  const std::vector<oci::Descriptor> blobs = image.blobs();
  std::string head = fmt::format("{}\nimage {} {}\n", k_magic,
                                 image.kind == StageImage::Kind::oci ? "oci" : "sif", image.digest().str());
  if (image.kind == StageImage::Kind::oci && !image.oci.manifest.media_type.empty()) {
    head += fmt::format("media-type {}\n", image.oci.manifest.media_type);
  }
  LS_TRY(sink(head.data(), head.size()));
  std::vector<char> buf(k_chunk);
  for (const oci::Descriptor& d : blobs) {
    const std::string line = fmt::format("blob {} {}\n", d.digest.str(), d.size);
    LS_TRY(sink(line.data(), line.size()));
    LS_TRY_ASSIGN(UniqueFd in, open_file(store.blob_path(d.digest), O_RDONLY));
    std::int64_t left = d.size;
    while (left > 0) {
      LS_TRY_ASSIGN(std::size_t n, read_some(in.get(), buf.data(), std::min<std::size_t>(buf.size(), left),
                                             "blob " + d.digest.str()));
      if (n == 0) {
        return io_error("blob {} in the store is shorter than {} bytes", d.digest.str(), d.size);
      }
      LS_TRY(sink(buf.data(), n));
      left -= static_cast<std::int64_t>(n);
    }
  }
  return sink("end\n", 4);
}

Result<void> BundleReader::header_line(std::string_view line) {
  if (!m_started) {
    if (line != k_magic) {
      return invalid_input("not a lockstep staging bundle (it starts with '{}')", clean(line, 80));
    }
    m_started = true;
    return {};
  }
  const std::vector<std::string_view> w = split_words(line);
  if (w.size() == 3 && w[0] == "image" && !m_have_image && (w[1] == "oci" || w[1] == "sif")) {
    LS_TRY_ASSIGN(Digest d, Digest::parse(w[2]));
    m_image.kind = w[1] == "oci" ? StageImage::Kind::oci : StageImage::Kind::sif;
    (m_image.kind == StageImage::Kind::oci ? m_image.oci.manifest.digest : m_image.sif_digest) = d;
    m_have_image = true;
    return {};
  }
  if (w.size() == 2 && w[0] == "media-type" && m_have_image && m_blobs.empty()) {
    m_image.oci.manifest.media_type = std::string(w[1]);
    return {};
  }
  if (w.size() == 3 && w[0] == "blob" && m_have_image) {
    if (m_blobs.size() >= k_max_blobs) {
      return invalid_input("the bundle has more than {} blobs", k_max_blobs);
    }
    m_current = oci::Descriptor{};
    LS_TRY_ASSIGN(m_current.digest, Digest::parse(w[1]));
    LS_TRY_ASSIGN(m_current.size, parse_size(w[2]));
    if (m_store.has(m_current.digest)) {
      // A blob this store has is rehashed: a damaged one is removed (verify), so the copy replaces it.
      (void)m_store.verify(m_current.digest);
    }
    LS_TRY_ASSIGN(BlobStore::Writer writer, m_store.begin_write());
    m_writer.emplace(std::move(writer));
    m_left = m_current.size;
    return {};
  }
  if (line == "end" && m_have_image) {
    m_ended = true;
    return {};
  }
  return invalid_input("unexpected line in the staging bundle: '{}'", clean(line, 80));
}

// The current blob, fully received: published only when its digest and size are right.
Result<void> BundleReader::commit_current() {
  Result<BlobInfo> info = m_writer->commit(m_current.digest, m_current.size);
  m_writer.reset();
  if (!info) {
    return info.error().with_context(
        fmt::format("blob {}: the copy was damaged on the way, refused", m_current.digest.str()));
  }
  m_blobs.push_back(m_current);
  return {};
}

Result<void> BundleReader::feed(const char* data, std::size_t size) {
  while (size > 0) {
    if (m_ended) {
      return invalid_input("bytes after the end of the staging bundle");
    }
    if (m_writer) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::int64_t>(m_left, static_cast<std::int64_t>(size)));
      LS_TRY(m_writer->write(data, n));
      data += n;
      size -= n;
      m_left -= static_cast<std::int64_t>(n);
      if (m_left == 0) {
        LS_TRY(commit_current());
      }
      continue;
    }
    const char* nl = static_cast<const char*>(std::memchr(data, '\n', size));
    const std::size_t take = nl == nullptr ? size : static_cast<std::size_t>(nl - data);
    m_line.append(data, take);
    if (m_line.size() > k_max_header_line) {
      return invalid_input("a line of the staging bundle is longer than {} bytes", k_max_header_line);
    }
    if (nl == nullptr) {
      return {};
    }
    data += take + 1;
    size -= take + 1;
    std::string line = std::move(m_line);
    m_line.clear();
    LS_TRY(header_line(line));
    if (m_writer && m_left == 0) { // an empty blob
      LS_TRY(commit_current());
    }
  }
  return {};
}

Result<StageImage> BundleReader::finish() {
  if (!m_ended) {
    return invalid_input("the staging bundle ended early ({} blob(s) received)", m_blobs.size());
  }
  const Digest& want = m_image.digest();
  auto it = std::find_if(m_blobs.begin(), m_blobs.end(),
                         [&want](const oci::Descriptor& d) { return d.digest == want; });
  if (it == m_blobs.end()) {
    return invalid_input("the staging bundle lacks the image {} itself", want.str());
  }
  if (m_image.kind == StageImage::Kind::sif) {
    m_image.sif_size = it->size;
    m_image.sif = m_store.blob_path(want);
    return m_image;
  }
  oci::Descriptor manifest = *it;
  manifest.media_type = m_image.oci.manifest.media_type;
  LS_TRY_ASSIGN(StageImage image, oci_from_store(m_store, manifest));
  for (const oci::Descriptor& d : image.oci.blobs) {
    if (!m_store.has(d.digest, d.size)) {
      return invalid_input("the staging bundle lacks blob {} of image {}", d.digest.str(), want.str());
    }
  }
  return image;
}

Result<StageImage> staged_from_blobs(const BlobStore& store, const StageImage& received) {
  if (received.kind == StageImage::Kind::sif) {
    return received;
  }
  return oci_from_store(store, received.oci.manifest);
}

std::string to_json_line(const StagedNode& n) {
  nlohmann::ordered_json j;
  j["stage"] = 1;
  j["node"] = n.node;
  j["ok"] = n.ok;
  j["image"] = n.image;
  j["detail"] = n.detail;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<StagedNode> staged_node_from_json(std::string_view line) {
  if (line.size() > k_max_result_line) {
    return invalid_input("a staging result longer than {} bytes", k_max_result_line);
  }
  LS_TRY_ASSIGN(nlohmann::json j, parse_json(line, "a staging result"));
  if (!j.is_object() || j.size() != 5 || !j.contains("stage") || j["stage"] != 1) {
    return invalid_input("not a staging result: {}", clean(line, 120));
  }
  StagedNode n;
  for (const char* key : {"node", "image", "detail"}) {
    if (!j.contains(key) || !j[key].is_string() || j[key].get_ref<const std::string&>().size() > 4096) {
      return invalid_input("a staging result without a string '{}'", key);
    }
  }
  if (!j.contains("ok") || !j["ok"].is_boolean()) {
    return invalid_input("a staging result without 'ok'");
  }
  n.node = clean(j["node"].get<std::string>(), 255);
  n.ok = j["ok"].get<bool>();
  n.image = j["image"].get<std::string>();
  n.detail = clean(j["detail"].get<std::string>(), 1024);
  if (n.node.empty()) {
    return invalid_input("a staging result without a node name");
  }
  return n;
}

std::vector<std::pair<std::string, std::vector<std::string>>>
tree_children(const std::vector<std::string>& hosts, int width) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  const std::size_t w = static_cast<std::size_t>(std::max(1, width));
  const std::size_t groups = std::min(w, hosts.size());
  std::size_t start = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t size = hosts.size() / groups + (g < hosts.size() % groups ? 1 : 0);
    out.emplace_back(hosts[start],
                     std::vector<std::string>(hosts.begin() + static_cast<std::ptrdiff_t>(start + 1),
                                              hosts.begin() + static_cast<std::ptrdiff_t>(start + size)));
    start += size;
  }
  return out;
}

namespace {

// Staging under Slurm: the file (a SIF, or the bundle written into the store's tmp/) goes to every
// node of the allocation with sbcast, into the same path under the store's tmp/ there; one srun step
// then puts it into each node's store.
Result<std::vector<StagedNode>> stage_with_sbcast(const LaunchPlan& plan, const BlobStore& store,
                                                  const StageImage& image, const StageFanout& how,
                                                  std::vector<std::vector<std::string>>& commands) {
  std::optional<TempDir> bundle; // removed once sent
  fs::path source = image.sif;
  if (image.kind == StageImage::Kind::oci) {
    LS_TRY_ASSIGN(TempDir dir, TempDir::create(store.root() / "tmp", "stage-bundle-"));
    source = dir.path() / "bundle";
    bundle.emplace(std::move(dir));
    LS_TRY_ASSIGN(UniqueFd f, open_file(source, O_WRONLY | O_CREAT | O_EXCL, 0600));
    LS_TRY(write_bundle(store, image, [&f, &source](const char* data, std::size_t size) {
      return write_all_fd(f.get(), data, size, source.string());
    }));
  }
  const fs::path dest = store.root() / "tmp" /
                        fmt::format("lockstep-stage-{}-{}", image.digest().hex().substr(0, 16), ::getpid());
  std::vector<std::string> sbcast = {"sbcast", "--force", source.string(), dest.string()};
  commands.push_back(sbcast);
  const CaptureOptions capture{std::nullopt, how.timeout, 1U << 20};
  LS_TRY_ASSIGN(CaptureResult sent, run_capture(sbcast, capture));
  bundle.reset();
  if (sent.status != 0 || sent.timed_out) {
    return external_error("sbcast {} failed (exit {}): {}", source.string(), sent.status,
                          sent.err.substr(0, 300));
  }
  std::vector<std::string> srun = {"srun", "--ntasks-per-node=1", "--mpi=none", "--kill-on-bad-exit=0"};
  if (plan.nodes > 0) {
    srun.insert(srun.end(), {fmt::format("--nodes={}", plan.nodes), fmt::format("--ntasks={}", plan.nodes)});
  }
  srun.insert(srun.end(), {how.lockstep, "stage-receive"});
  if (image.kind == StageImage::Kind::sif) {
    srun.insert(srun.end(), {"--sif-file", dest.string(), "--sif-digest", image.sif_digest.str()});
  } else {
    srun.insert(srun.end(), {"--file", dest.string()});
  }
  commands.push_back(srun);
  LS_TRY_ASSIGN(CaptureResult out, run_capture(srun, capture));
  std::vector<StagedNode> nodes;
  for (const std::string_view line : text_lines(out.out)) {
    if (line.starts_with("{")) {
      if (Result<StagedNode> n = staged_node_from_json(line)) {
        nodes.push_back(std::move(*n));
      }
    }
  }
  if (nodes.empty()) {
    return external_error("staging through srun gave no results (exit {}): {}", out.status,
                          out.err.substr(0, 300));
  }
  return nodes;
}

} // namespace

Result<std::vector<StagedNode>> stage_to_nodes(const LaunchPlan& plan, const BlobStore& store,
                                               const StageImage& image, const std::vector<std::string>& nodes,
                                               const StageFanout& how,
                                               std::vector<std::vector<std::string>>& commands) {
  IgnoreSigpipe sigpipe;
  if (plan.launcher == Launcher::slurm) {
    return stage_with_sbcast(plan, store, image, how, commands);
  }
  Forwarder tree(nodes, how, commands);
  Result<void> sent = write_bundle(store, image, [&tree](const char* data, std::size_t size) -> Result<void> {
    tree.send(data, size);
    return {};
  });
  std::vector<StagedNode> out = tree.finish();
  if (!sent) {
    return sent.error().with_context("can't send the image to the nodes");
  }
  return out;
}

std::vector<StagedNode> receive_stage(const ReceiveOptions& o) {
  IgnoreSigpipe sigpipe;
  StagedNode self;
  self.node = host_name();
  std::vector<std::vector<std::string>> commands;
  Forwarder tree(o.forward, o.how, commands);
  auto outcome = [&]() -> Result<std::string> {
    LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
    StageImage image;
    if (!o.sif_file.empty()) {
      LS_TRY_ASSIGN(image.sif_digest, Digest::parse(o.sif_digest));
      image.kind = StageImage::Kind::sif;
      Result<void> adopted = adopt_sif(store, o.sif_file, image.sif_digest);
      (void)::unlink(o.sif_file.c_str());
      LS_TRY(adopted);
      struct stat st {};
      ::stat(store.blob_path(image.sif_digest).c_str(), &st);
      image.sif_size = st.st_size;
    } else {
      UniqueFd file;
      int in = o.in_fd;
      if (!o.file.empty()) {
        LS_TRY_ASSIGN(file, open_file(o.file, O_RDONLY));
        (void)::unlink(o.file.c_str());
        in = file.get();
      }
      BundleReader reader(store);
      std::vector<char> buf(k_chunk);
      Result<void> fed;
      for (;;) {
        Result<std::size_t> n = read_some(in, buf.data(), buf.size(), "the staging stream");
        if (!n) {
          fed = n.error();
          break;
        }
        if (*n == 0) {
          break;
        }
        tree.send(buf.data(), *n); // forwarded as it comes, before this node checks it
        if (fed) {
          fed = reader.feed(buf.data(), *n);
        }
      }
      LS_TRY(fed);
      LS_TRY_ASSIGN(image, reader.finish());
    }
    LS_TRY_ASSIGN(std::string arg, place_staged(store, image));
    self.image = arg;
    std::int64_t bytes = 0;
    for (const oci::Descriptor& d : image.blobs()) {
      bytes += d.size;
    }
    return fmt::format("{} staged: {} blob(s), {}", image.digest().str(), image.blobs().size(),
                       log::human_size(static_cast<std::uint64_t>(bytes)));
  };
  Result<std::string> r = outcome();
  self.ok = r.ok();
  self.detail = r ? *r : r.error().message;
  if (!self.ok) {
    self.image.clear();
  }
  std::vector<StagedNode> out = {self};
  std::vector<StagedNode> rest = tree.finish();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

bool only_image_missing(const std::vector<NodeReport>& reports) {
  bool image = false;
  for (const NodeReport& r : reports) {
    for (const Check& c : r.checks) {
      if (c.status == Check::Status::fail) {
        if (c.name != "image") {
          return false;
        }
        image = true;
      }
    }
  }
  return image;
}

Result<StageOutcome> stage_for_launch(const LaunchPlan& plan, const PreflightRequest& request,
                                      const PreflightFanout& fanout, const BlobStore& store,
                                      const StageImage& image,
                                      std::vector<std::vector<std::string>>& commands) {
  StageOutcome out;
  LS_TRY_ASSIGN(out.image, place_staged(store, image));
  PreflightRequest staged = request;
  staged.image = out.image;
  staged.image_digest = image.digest().str();
  staged.prepare_store = true;
  staged.hold_exec.clear(); // the ranks of a staged image start their holders themselves
  log::Timer timer("stage the image");
  LS_TRY_ASSIGN(std::vector<NodeReport> seen, preflight_nodes(plan, staged, fanout, commands));
  if (std::all_of(seen.begin(), seen.end(), [](const NodeReport& r) { return r.ok(); })) {
    out.how = "already there"; // every node sees this node's copy (a shared store), or has one
    out.reports = std::move(seen);
    return out;
  }
  if (!only_image_missing(seen)) {
    out.how = "not staged"; // a node failed what a copy can't mend: the caller reports it
    out.reports = std::move(seen);
    return out;
  }
  // The nodes to copy to, by the names the launcher reaches them by (the plan's hosts, in the
  // preflight's order; under Slurm the allocation's nodes all get the file).
  std::vector<std::string> need;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i].ok()) {
      need.push_back(i < plan.hosts.size() ? plan.hosts[i].host : seen[i].node);
    }
  }
  StageFanout how;
  how.lockstep = fanout.lockstep;
  how.agent = rsh_agent(fanout.launcher_args, fanout.env_agent);
  how.timeout = std::max(fanout.timeout, std::chrono::seconds(600));
  out.how = plan.launcher == Launcher::slurm ? "sbcast" : "rsh agent tree";
  LS_TRY_ASSIGN(out.copied, stage_to_nodes(plan, store, image, need, how, commands));
  for (const StagedNode& n : out.copied) {
    if (!n.ok) {
      log::warn("staging {} on {} failed: {}", image.digest().str(), n.node, n.detail);
    } else if (n.image != out.image) {
      log::warn("{} staged the image as {}, not {}: its store is elsewhere (set LOCKSTEP_CACHE alike on "
                "every node)",
                n.node, n.image, out.image);
    }
  }
  staged.prepare_store = false;
  LS_TRY_ASSIGN(out.reports, preflight_nodes(plan, staged, fanout, commands));
  return out;
}

} // namespace lockstep::runner

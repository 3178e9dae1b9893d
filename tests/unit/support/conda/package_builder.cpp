#include "tests/unit/support/conda/package_builder.hpp"

#include "support/codec/digest.hpp"
#include "tests/unit/test_support.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

namespace fs = std::filesystem;
using nlohmann::json;

namespace lockstep::test {

namespace {

void write_bytes(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

void put16(std::string& s, unsigned v) {
  s += static_cast<char>(v & 0xFFU);
  s += static_cast<char>((v >> 8U) & 0xFFU);
}

void put32(std::string& s, std::uint32_t v) {
  put16(s, v & 0xFFFFU);
  put16(s, v >> 16U);
}

std::string raw_deflate(const std::string& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

la_ssize_t append_to_string(struct archive* /*a*/, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

} // namespace

bool have_cph() {
  if (have_tool("cph")) {
    return true;
  }
  WARN("skipped: cph (Debian's conda-package-handling) is not installed");
  return false;
}

CondaTree::CondaTree(fs::path root, std::string name, std::string version, std::string build,
                     json index_extra)
    : m_root(std::move(root)), m_stem(name + "-" + version + "-" + build), m_paths(json::array()) {
  fs::create_directories(m_root / "info");
  m_index = json{{"name", name},      {"version", version},       {"build", build},
                 {"build_number", 0}, {"depends", json::array()}, {"subdir", "linux-64"}};
  for (auto& [k, v] : index_extra.items()) {
    m_index[k] = v;
  }
}

void CondaTree::file(const std::string& path, const std::string& data, unsigned mode,
                     const std::string& placeholder, const std::string& file_mode, bool no_link) {
  write_bytes(m_root / path, data);
  fs::permissions(m_root / path, static_cast<fs::perms>(mode));
  json e{{"_path", path},
         {"path_type", "hardlink"},
         {"sha256", sha256_of(data).hex()},
         {"size_in_bytes", data.size()}};
  if (!placeholder.empty()) {
    e["prefix_placeholder"] = placeholder;
    e["file_mode"] = file_mode;
  }
  if (no_link) {
    e["no_link"] = true;
  }
  m_paths.push_back(std::move(e));
}

void CondaTree::symlink(const std::string& path, const std::string& target) {
  fs::create_directories((m_root / path).parent_path());
  fs::create_symlink(target, m_root / path);
  m_paths.push_back(json{{"_path", path}, {"path_type", "softlink"}, {"size_in_bytes", 0}});
}

void CondaTree::directory(const std::string& path) {
  fs::create_directories(m_root / path);
  m_paths.push_back(json{{"_path", path}, {"path_type", "directory"}});
}

void CondaTree::set_mtime(const std::string& path, std::int64_t mtime) {
  run_command(fmt::format("touch -h -d @{} '{}'", mtime, (m_root / path).string()));
}

void CondaTree::link_json(const std::string& type, const std::vector<std::string>& entry_points) {
  info_file("link.json", json{{"package_metadata_version", 1},
                              {"noarch", {{"type", type}, {"entry_points", entry_points}}}}
                             .dump());
}

void CondaTree::info_file(const std::string& name, const std::string& data) {
  write_bytes(m_root / "info" / name, data);
}

fs::path CondaTree::pack(const fs::path& out_dir, const std::string& ext) {
  info_file("index.json", m_index.dump());
  if (m_write_paths) {
    json sorted = m_paths;
    std::sort(sorted.begin(), sorted.end(),
              [](const json& a, const json& b) { return a["_path"] < b["_path"]; });
    info_file("paths.json", json{{"paths_version", 1}, {"paths", sorted}}.dump());
  }
  fs::create_directories(out_dir);
  run_command(fmt::format("cph create '{}' '{}' --out-folder '{}' >&2", m_root.string(), filename(ext),
                          out_dir.string()));
  return out_dir / filename(ext);
}

TarMember tar_file(std::string name, std::string data, unsigned mode) {
  TarMember m;
  m.name = std::move(name);
  m.data = std::move(data);
  m.mode = mode;
  return m;
}

TarMember tar_symlink(std::string name, std::string target) {
  TarMember m;
  m.name = std::move(name);
  m.type = TarMember::Type::symlink;
  m.target = std::move(target);
  return m;
}

TarMember tar_other(std::string name, TarMember::Type type, std::string target) {
  TarMember m;
  m.name = std::move(name);
  m.type = type;
  m.target = std::move(target);
  return m;
}

std::string tar_bytes(const std::vector<TarMember>& members, const std::string& filter) {
  std::string out;
  std::unique_ptr<struct archive, int (*)(struct archive*)> a(archive_write_new(), archive_write_free);
  archive_write_set_format_pax_restricted(a.get());
  REQUIRE((filter == "zstd" ? archive_write_add_filter_zstd(a.get())
                            : archive_write_add_filter_bzip2(a.get())) == ARCHIVE_OK);
  archive_write_set_bytes_in_last_block(a.get(), 1); // no zero padding after the compressed stream
  REQUIRE(archive_write_open(a.get(), &out, nullptr, append_to_string, nullptr) == ARCHIVE_OK);
  for (const TarMember& m : members) {
    std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)> e(archive_entry_new(),
                                                                             archive_entry_free);
    archive_entry_set_pathname(e.get(), m.name.c_str());
    archive_entry_set_perm(e.get(), m.mode);
    archive_entry_set_mtime(e.get(), 1'700'000'000, 0);
    switch (m.type) {
    case TarMember::Type::file:
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_size(e.get(), static_cast<la_int64_t>(m.data.size()));
      break;
    case TarMember::Type::dir:
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      break;
    case TarMember::Type::symlink:
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_symlink(e.get(), m.target.c_str());
      break;
    case TarMember::Type::hardlink:
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_hardlink(e.get(), m.target.c_str());
      break;
    case TarMember::Type::fifo:
      archive_entry_set_filetype(e.get(), AE_IFIFO);
      break;
    case TarMember::Type::chardev:
      archive_entry_set_filetype(e.get(), AE_IFCHR);
      archive_entry_set_rdev(e.get(), makedev(1, 3));
      break;
    }
    REQUIRE(archive_write_header(a.get(), e.get()) >=
            ARCHIVE_WARN); // WARN: a name not in the locale's charset
    if (m.type == TarMember::Type::file && !m.data.empty()) {
      REQUIRE(archive_write_data(a.get(), m.data.data(), m.data.size()) ==
              static_cast<la_ssize_t>(m.data.size()));
    }
  }
  REQUIRE(archive_write_close(a.get()) == ARCHIVE_OK);
  return out;
}

void put64(std::string& s, std::uint64_t v) {
  put32(s, static_cast<std::uint32_t>(v & 0xFFFFFFFFU));
  put32(s, static_cast<std::uint32_t>(v >> 32U));
}

std::string zip_bytes(const std::vector<ZipEntry>& entries, bool zip64) {
  constexpr std::uint32_t k_overflow = 0xFFFFFFFF;
  std::string out;
  std::string central;
  for (const ZipEntry& e : entries) {
    const std::string data = e.method == 8 ? raw_deflate(e.data) : e.data;
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(e.data.data()), static_cast<uInt>(e.data.size())));
    const std::uint64_t offset = out.size();
    auto common = [&](std::size_t extra_len) {
      std::string c;
      put16(c, zip64 ? 45 : 20); // version needed
      put16(c, 0);               // flags
      put16(c, e.method);        // method
      put16(c, 0);               // time
      put16(c, 0x21);            // date: 1980-01-01
      put32(c, crc);
      put32(c, zip64 ? k_overflow : static_cast<std::uint32_t>(data.size()));
      put32(c, zip64 ? k_overflow : static_cast<std::uint32_t>(e.data.size()));
      put16(c, static_cast<unsigned>(e.name.size()));
      put16(c, static_cast<unsigned>(extra_len));
      return c;
    };
    std::string local_extra;
    std::string central_extra;
    if (zip64) {
      put16(local_extra, 1);
      put16(local_extra, 16);
      put64(local_extra, e.data.size());
      put64(local_extra, data.size());
      put16(central_extra, 1);
      put16(central_extra, 24);
      put64(central_extra, e.data.size());
      put64(central_extra, data.size());
      put64(central_extra, offset);
    }
    put32(out, 0x04034b50);
    out += common(local_extra.size()) + e.name + local_extra + data;
    put32(central, 0x02014b50);
    put16(central, 0x031e); // made by: unix, 3.0
    central += common(central_extra.size());
    put16(central, 0); // comment
    put16(central, 0); // disk
    put16(central, 0); // internal attributes
    put32(central, 0); // external attributes
    put32(central, zip64 ? k_overflow : static_cast<std::uint32_t>(offset));
    central += e.name + central_extra;
  }
  const std::uint64_t cd_offset = out.size();
  out += central;
  if (zip64) {
    const std::uint64_t record = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, entries.size());
    put64(out, entries.size());
    put64(out, central.size());
    put64(out, cd_offset);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, record);
    put32(out, 1);
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, zip64 ? 0xFFFFU : static_cast<unsigned>(entries.size()));
  put16(out, zip64 ? 0xFFFFU : static_cast<unsigned>(entries.size()));
  put32(out, zip64 ? k_overflow : static_cast<std::uint32_t>(central.size()));
  put32(out, zip64 ? k_overflow : static_cast<std::uint32_t>(cd_offset));
  put16(out, 0);
  return out;
}

std::string conda_bytes(const std::string& stem, const std::vector<TarMember>& members) {
  std::vector<TarMember> info;
  std::vector<TarMember> pkg;
  for (const TarMember& m : members) {
    (m.name.starts_with("info/") ? info : pkg).push_back(m);
  }
  return zip_bytes({{"metadata.json", R"({"conda_pkg_format_version": 2})"},
                    {"pkg-" + stem + ".tar.zst", tar_bytes(pkg, "zstd")},
                    {"info-" + stem + ".tar.zst", tar_bytes(info, "zstd")}});
}

std::string index_json_text(const std::string& name, const std::string& version, const std::string& build,
                            const json& extra) {
  json j{{"name", name}, {"version", version}, {"build", build}, {"build_number", 0}, {"subdir", "linux-64"}};
  for (auto& [k, v] : extra.items()) {
    j[k] = v;
  }
  return j.dump();
}

} // namespace lockstep::test

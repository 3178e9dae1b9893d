#include "support/oci/image_arg.hpp"

#include "support/oci/tar_reader.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

namespace lockstep {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_sif_magic = "SIF_MAGIC";
constexpr int k_max_archive_members = 100000; // looked at to tell an archive's kind

// True when the file starts with SIF's header (the magic sits after the 32-byte launch script).
bool has_sif_magic(const fs::path& file) {
  Result<UniqueFd> fd = open_input_file(file);
  std::array<char, 48> head{};
  return fd && ::pread(fd->get(), head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()) &&
         std::string_view(head.data() + 32, k_sif_magic.size()) == k_sif_magic;
}

// "oci-archive:" or "docker-archive:" for a tar file that is one (it holds oci-layout, or
// manifest.json), "" otherwise.
std::string archive_transport(const fs::path& file, std::string_view text) {
  std::array<char, 512> head{};
  Result<UniqueFd> fd = open_input_file(file);
  if (!fd || ::pread(fd->get(), head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()) ||
      std::string_view(head.data() + 257, 5) != "ustar") {
    return {};
  }
  auto reader = TarReader::open(file, std::string(text));
  bool docker = false;
  for (int i = 0; reader && i < k_max_archive_members; ++i) {
    auto m = reader->next();
    if (!m || !*m) {
      break;
    }
    if ((*m)->name == "oci-layout") {
      return "oci-archive:";
    }
    docker = docker || (*m)->name == "manifest.json";
  }
  return docker ? "docker-archive:" : "";
}

Result<ImageArg> parse_file_arg(std::string_view text, ImageArg::Kind kind) {
  ImageArg arg;
  arg.kind = kind;
  arg.path = std::string(text.substr(4));
  if (arg.path.empty()) {
    return invalid_input("'{}' names no path", text);
  }
  struct stat st {};
  if (::stat(arg.path.c_str(), &st) != 0) {
    return invalid_input("no image at '{}' ({})", text, std::strerror(errno));
  }
  if (kind == ImageArg::Kind::directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return invalid_input("'{}' is not a {}", text,
                         kind == ImageArg::Kind::directory ? "directory" : "regular file");
  }
  return arg;
}

} // namespace

Result<ImageArg> parse_image_arg(std::string_view text) {
  if (text.empty()) {
    return invalid_input("no IMAGE given: use {}", k_image_forms);
  }
  if (text.starts_with("oras://")) {
    ImageArg arg;
    arg.kind = ImageArg::Kind::sif;
    LS_TRY_ASSIGN(arg.ref, oci::ImageRef::parse(text));
    return arg;
  }
  if (text.starts_with("oci:") || text.starts_with("oci-archive:") || text.starts_with("docker-archive:") ||
      text.starts_with("docker://")) {
    ImageArg arg;
    LS_TRY_ASSIGN(arg.ref, oci::ImageRef::parse(text));
    return arg;
  }
  if (text.starts_with("sif:")) {
    return parse_file_arg(text, ImageArg::Kind::sif);
  }
  if (text.starts_with("dir:")) {
    return parse_file_arg(text, ImageArg::Kind::directory);
  }
  // A bare path: what it holds decides.
  const fs::path path{std::string(text)};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return invalid_input("no image at '{}' ({}); IMAGE is {}", text, std::strerror(errno), k_image_forms);
  }
  if (S_ISDIR(st.st_mode)) {
    struct stat marker {};
    if (::stat((path / "oci-layout").c_str(), &marker) == 0) {
      return parse_image_arg("oci:" + std::string(text));
    }
    ImageArg arg;
    arg.kind = ImageArg::Kind::directory;
    arg.path = path;
    return arg;
  }
  if (S_ISREG(st.st_mode)) {
    if (path.extension() == ".sif" || has_sif_magic(path)) {
      ImageArg arg;
      arg.kind = ImageArg::Kind::sif;
      arg.path = path;
      return arg;
    }
    if (std::string transport = archive_transport(path, text); !transport.empty()) {
      return parse_image_arg(transport + std::string(text));
    }
  }
  return invalid_input(
      "'{}' is not an image (neither an OCI layout, an archive, a SIF file nor a directory); "
      "IMAGE is {}",
      text, k_image_forms);
}

} // namespace lockstep

// `base:` (docs/spec.md): scratch, an image by reference, an OCI layout or archive, or a Debian
// suite bootstrapped from the apt repositories.
#include "envspec/load/schema_walker.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/registry_ref.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <system_error>

namespace lockstep::envspec::detail {

void SchemaWalker::base(const Node& v, BaseImage& out) {
  out.location = v.location;
  if (v.is_scalar() && v.scalar == "scratch") {
    out.kind = BaseImage::Kind::scratch;
    return;
  }
  constexpr std::string_view expected = "'scratch' or a map {image: REF}, {oci: PATH} or {debian: SUITE}";
  if (v.is_scalar()) {
    std::string hint;
    if (oci::RegistryRef::parse(v.scalar)) {
      hint = fmt::format(" (an image in a registry is {{image: docker://{}}})", v.scalar);
    }
    error(v.location, "base", fmt::format("expected {}, found '{}'{}", expected, v.scalar, hint));
    return;
  }
  if (!expect_map(v, "base", expected)) {
    return;
  }
  if (v.find("debian") != nullptr) {
    debian_base(v, out);
    return;
  }
  const MapEntry* oci = v.find("oci");
  if (oci == nullptr && v.find("image") != nullptr) {
    image_base(v, out);
    return;
  }
  if (oci == nullptr) {
    error(v.location, "base",
          "missing 'image' or 'oci' (e.g. {image: docker://debian:bookworm} or {oci: ./base}, an OCI "
          "layout directory or OCI archive)");
  }
  if (oci != nullptr) {
    out.location = oci->value.location; // later errors about the base image point at its path
  }
  for (const MapEntry& e : v.entries) {
    if (e.key == "oci") {
      base_path(e.value, out);
    } else if (e.key == "tag") {
      base_tag(e.value, out);
    } else if (e.key == "python") {
      base_python(e.value, out);
    } else if (e.key == "variant") {
      error(e.key_location, "base.variant",
            "'variant' goes with 'debian' (e.g. {debian: bookworm, variant: apt})");
    } else if (e.key == "image") {
      error(e.key_location, "base.image", "a base is either {image: REF} or {oci: PATH}, not both");
    } else {
      unknown_key(e, "base", m_shapes.base);
    }
  }
}

// `base: {image: REF}`: an image named by reference (base_image_ref).
void SchemaWalker::image_base(const Node& v, BaseImage& out) {
  out.key = "base.image";
  for (const MapEntry& e : v.entries) {
    if (e.key == "image") {
      base_image_ref(e.value, out);
    } else if (e.key == "python") {
      base_python(e.value, out);
    } else if (e.key == "tag") {
      error(e.key_location, "base.tag",
            "with 'image' the tag is part of the reference (e.g. {image: docker://debian:bookworm})");
    } else if (e.key == "variant") {
      error(e.key_location, "base.variant",
            "'variant' goes with 'debian' (e.g. {debian: bookworm, variant: apt})");
    } else {
      unknown_key(e, "base", m_shapes.base);
    }
  }
}

// `base: {debian: SUITE, variant: essential|apt|required}`: bootstrapped from the apt repositories.
void SchemaWalker::debian_base(const Node& v, BaseImage& out) {
  out.kind = BaseImage::Kind::debian;
  for (const MapEntry& e : v.entries) {
    const std::string path = child_path("base", e.key);
    if (e.key == "debian") {
      if (const std::string* s = nonempty_string(e.value, path, "a Debian suite or codename")) {
        static const std::regex suite_re("[a-z0-9][a-z0-9.+-]*");
        if (!std::regex_match(*s, suite_re)) {
          error(
              e.value.location, path,
              fmt::format("invalid suite '{}': expected a codename or suite such as bookworm or stable", *s));
        }
        out.suite = *s;
        out.location = e.value.location;
      }
    } else if (e.key == "variant") {
      const std::string* s = string(e.value, path);
      if (s != nullptr && *s == "essential") {
        out.variant = DebianVariant::essential;
      } else if (s != nullptr && *s == "apt") {
        out.variant = DebianVariant::apt;
      } else if (s != nullptr && *s == "required") {
        out.variant = DebianVariant::required;
      } else if (s != nullptr) {
        error(e.value.location, path,
              fmt::format("expected 'essential', 'apt' or 'required', found '{}'", *s));
      }
    } else if (e.key == "oci" || e.key == "tag" || e.key == "image") {
      error(e.key_location, path, "a base is either {debian: SUITE} or {oci: PATH}, not both");
    } else if (e.key == "python") {
      error(e.key_location, path,
            "a Debian base's Python is its python3 package: add python3 to packages.apt ('python' "
            "names the interpreter of an image base whose Python is not a Debian package)");
    } else {
      unknown_key(e, "base", m_shapes.base);
    }
  }
}

// `base.oci: PATH[@sha256:HEX]`.
void SchemaWalker::base_path(const Node& v, BaseImage& out) {
  const std::string* s = nonempty_string(v, "base.oci", "a path");
  if (s == nullptr) {
    return;
  }
  std::string path_text = *s;
  const std::size_t at = s->rfind('@');
  if (at != std::string::npos && s->find(':', at) != std::string::npos) {
    path_text = s->substr(0, at);
    const std::string pin_text = s->substr(at + 1);
    Result<Digest> pin = Digest::parse(pin_text);
    if (!pin) {
      error(sub_location(v, at + 1, pin_text.size()), "base.oci", pin.error().message);
    } else {
      out.pin = *pin;
    }
  }
  if (path_text.empty()) {
    error(v.location, "base.oci", "expected a path before '@'");
    return;
  }
  Node path_node = v;
  path_node.scalar = path_text;
  const fs::path resolved = resolve_host_path(path_node);
  const SourceLocation path_location = sub_location(v, 0, path_text.size());
  std::error_code ec;
  const fs::file_status st = fs::status(resolved, ec);
  if (!fs::exists(st)) {
    error(path_location, "base.oci",
          fmt::format("no such file or directory: {} (resolved to {})", path_text, resolved.string()));
  } else if (fs::is_directory(st)) {
    if (!fs::is_regular_file(resolved / "oci-layout", ec)) {
      error(path_location, "base.oci",
            fmt::format("{} is not an OCI layout (it has no oci-layout file)", resolved.string()));
    }
  } else if (!fs::is_regular_file(st)) {
    error(path_location, "base.oci",
          fmt::format("{} is neither an OCI layout directory nor an OCI archive file", resolved.string()));
  }
  out.kind = BaseImage::Kind::oci;
  out.path = resolved;
  out.path_text = path_text;
}

// `base.image`: docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX] (normalised as Docker does; nothing
// is fetched here, `check` stays offline), or oci:DIR[:TAG] / oci-archive:FILE[:TAG], read as the
// same base as {oci: PATH, tag: TAG}.
void SchemaWalker::base_image_ref(const Node& v, BaseImage& out) {
  constexpr std::string_view forms =
      "docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX], oci:DIR[:TAG] or oci-archive:FILE[:TAG]";
  const std::string* s = nonempty_string(v, "base.image", "an image reference");
  if (s == nullptr) {
    return;
  }
  out.location = v.location;
  const bool known = s->starts_with("docker://") || s->starts_with("oci:") || s->starts_with("oci-archive:");
  if (!known) {
    // A transport lockstep reads elsewhere (docker-archive:, oras://, sif:, dir:) or none at all.
    const std::size_t scheme = s->find("://");
    const std::size_t colon = s->find(':');
    static const std::vector<std::string_view> others = {"docker-archive", "sif", "dir", "docker-daemon",
                                                         "containers-storage"};
    std::string transport;
    if (scheme != std::string::npos) {
      transport = s->substr(0, scheme + 3);
    } else if (colon != std::string::npos &&
               std::find(others.begin(), others.end(), s->substr(0, colon)) != others.end()) {
      transport = s->substr(0, colon + 1);
    }
    if (!transport.empty()) {
      error(v.location, "base.image",
            fmt::format("'{}' images can't be a base; expected {}", transport, forms));
    } else {
      error(v.location, "base.image",
            fmt::format("'{}' names no transport; expected {}{}", *s, forms,
                        oci::RegistryRef::parse(*s) ? fmt::format(" (e.g. docker://{})", *s) : ""));
    }
    return;
  }
  Result<oci::ImageRef> ref = oci::ImageRef::parse(*s);
  if (!ref) {
    error(v.location, "base.image", ref.error().message);
    return;
  }
  if (ref->transport == oci::ImageRef::Transport::docker) {
    out.kind = BaseImage::Kind::registry;
    out.remote = ref->remote;
    out.pin = ref->remote.digest;
    return;
  }
  // oci:DIR[:TAG] or oci-archive:FILE[:TAG]: the path checked as `base.oci` is, and of the kind named.
  const bool dir = ref->transport == oci::ImageRef::Transport::oci_dir;
  const std::size_t prefix = s->find(':') + 1;
  const std::string path_text = ref->path.string();
  Node path_node = v;
  path_node.scalar = path_text;
  const fs::path resolved = resolve_host_path(path_node);
  const SourceLocation path_location = sub_location(v, prefix, path_text.size());
  std::error_code ec;
  const fs::file_status st = fs::status(resolved, ec);
  if (!fs::exists(st)) {
    error(path_location, "base.image",
          fmt::format("no such file or directory: {} (resolved to {})", path_text, resolved.string()));
  } else if (dir && !fs::is_regular_file(resolved / "oci-layout", ec)) {
    error(path_location, "base.image",
          fmt::format("{} is not an OCI layout directory (it has no oci-layout file){}", resolved.string(),
                      fs::is_regular_file(st) ? "; an OCI archive is oci-archive:FILE" : ""));
  } else if (!dir && !fs::is_regular_file(st)) {
    error(path_location, "base.image",
          fmt::format("{} is not an OCI archive file{}", resolved.string(),
                      fs::is_directory(st) ? "; an OCI layout directory is oci:DIR" : ""));
  }
  out.kind = BaseImage::Kind::oci;
  out.path = resolved;
  out.path_text = path_text;
  out.tag = ref->tag;
}

// `base.tag`: selects a manifest by its org.opencontainers.image.ref.name annotation.
void SchemaWalker::base_tag(const Node& v, BaseImage& out) {
  const std::string* s = nonempty_string(v, "base.tag", "a tag");
  if (s == nullptr) {
    return;
  }
  // image-spec annotations.md, ref.name grammar.
  static const std::regex ref(
      "[A-Za-z0-9]+(([-._:@+]|--)[A-Za-z0-9]+)*(/[A-Za-z0-9]+(([-._:@+]|--)[A-Za-z0-9]+)*)*");
  if (!std::regex_match(*s, ref)) {
    error(v.location, "base.tag",
          fmt::format("invalid tag '{}': letters and digits separated by '-', '.', '_', ':', '@', '+' or '/'",
                      *s));
    return;
  }
  out.tag = *s;
}

// `python: /usr/local/bin/python3.11`: an absolute path in the image, normalised.
void SchemaWalker::base_python(const Node& v, BaseImage& out) {
  const std::string* s = nonempty_string(v, "base.python", "the interpreter's absolute path in the image");
  if (s == nullptr) {
    return;
  }
  std::string normal;
  bool ok = s->front() == '/' && s->find('\0') == std::string::npos;
  for (std::size_t i = 1; ok && i <= s->size();) {
    std::size_t j = s->find('/', i);
    j = j == std::string::npos ? s->size() : j;
    const std::string part = s->substr(i, j - i);
    ok = part != "..";
    if (!part.empty() && part != ".") {
      normal += "/" + part;
    }
    i = j + 1;
  }
  if (!ok || normal.empty() || std::any_of(normal.begin(), normal.end(), [](char c) {
        return std::isspace(static_cast<unsigned char>(c));
      })) {
    error(v.location, "base.python",
          fmt::format("invalid interpreter path '{}': expected an absolute path in the image without '..' "
                      "or spaces, e.g. /usr/local/bin/python3.11",
                      *s));
    return;
  }
  out.python = normal;
  out.python_location = v.location;
}

} // namespace lockstep::envspec::detail

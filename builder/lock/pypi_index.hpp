#pragma once
// Python package indexes as data: a project's page of the simple repository API, in its JSON form
// (PEP 691, application/vnd.pypi.simple.v1+json) or its HTML form (PEP 503, with the data-*
// attributes of PEP 592, 658, 714), reduced to the list of files a lock can choose from; a local
// wheelhouse directory as the same list; and RFC 3986 reference resolution for the relative links
// pages contain. No network code: callers fetch the page and pass its bytes and URL.
//
// Everything here is hostile input: page size and file count are capped, file names must be plain
// names, URLs must resolve to http(s) (or file: for a file: page), hashes must be well formed. An
// anchor without a sha256 is still listed, with an empty `sha256`, so that the lock can refuse it
// by name.
#include "support/base/result.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::builder {

/// The media type of PEP 691's JSON project pages (what to send in Accept, first).
inline constexpr std::string_view k_simple_json_type = "application/vnd.pypi.simple.v1+json";
/// The media type of PEP 691's HTML project pages (PEP 503 HTML also comes as text/html).
inline constexpr std::string_view k_simple_html_type = "application/vnd.pypi.simple.v1+html";

/// One downloadable file of a project.
struct IndexFile {
  std::string filename;        ///< a plain file name ("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl")
  std::string url;             ///< absolute, without the fragment
  std::string sha256;          ///< 64 lowercase hex digits; empty when the index gave none
  std::string requires_python; ///< the Requires-Python specifier text (HTML-unescaped); empty if none
  bool yanked = false;         ///< PEP 592
  std::string yanked_reason;
  bool has_metadata = false;         ///< PEP 658/714: the core metadata is served at url + ".metadata"
  std::string metadata_sha256;       ///< its sha256 if the index gave one, else empty
  std::optional<std::uint64_t> size; ///< PEP 700 (JSON API 1.1), when given
  friend bool operator==(const IndexFile&, const IndexFile&) = default;
};

/// Resolves `reference` against the absolute URL `base` (RFC 3986 section 5.2, with
/// remove_dot_segments). A base without a scheme, or any ASCII control character or space in
/// either, is invalid_input.
Result<std::string> resolve_url(std::string_view base, std::string_view reference);

/// Parses a PEP 691 JSON project page fetched from `page_url` (api-version 1.x; at most 64 MiB
/// and 100,000 files).
Result<std::vector<IndexFile>> parse_simple_json(std::string_view body, std::string_view page_url);

/// Parses a PEP 503 HTML project page fetched from `page_url`: every <a href> (resolved against
/// <base href> when present), `#sha256=` fragments, data-requires-python, data-yanked,
/// data-core-metadata / data-dist-info-metadata. The file name is the last path segment of the
/// URL, percent-decoded (as pip takes it).
Result<std::vector<IndexFile>> parse_simple_html(std::string_view body, std::string_view page_url);

/// Parses a project page by its Content-Type: JSON for application/vnd.pypi.simple.v1+json, HTML
/// for text/html and application/vnd.pypi.simple.v1+html; anything else is external.
Result<std::vector<IndexFile>> parse_project_page(std::string_view body, std::string_view content_type,
                                                  std::string_view page_url);

/// The *.whl files directly in `dir` (regular files, or symlinks to them), sorted by name, each
/// with a file: URL and its sha256 computed here. A wheel that leads (through a symlink) outside
/// every directory of `roots` is refused before it is read (support/system/confine.hpp).
Result<std::vector<IndexFile>> scan_wheelhouse(const std::filesystem::path& dir,
                                               const std::vector<std::filesystem::path>& roots);

} // namespace lockstep::builder

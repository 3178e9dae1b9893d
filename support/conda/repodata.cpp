// repodata.json, read as a stream of SAX events (see repodata.hpp).
#include "support/conda/repodata.hpp"

#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <unordered_map>

namespace lockstep::conda {

namespace {

// Where the reader is in the index: the value being read belongs to...
enum class At : std::uint8_t {
  top,      // the top-level object
  info,     // `info`
  packages, // `packages` or `packages.conda`: filename -> record
  record,   // one record
  list,     // a record's list of strings (depends, constrains, track_features)
  removed,  // `removed`
  skip,     // a value nobody reads (any shape)
};

// The record fields lockstep keeps; Field::other is skipped.
enum class Field : std::uint8_t {
  other,
  name,
  version,
  build,
  build_number,
  depends,
  constrains,
  track_features,
  noarch,
  subdir,
  timestamp,
  md5,
  sha256,
  size,
  license,
  python_site_packages_path,
};

Field field_of(std::string_view key) {
  static constexpr std::pair<std::string_view, Field> k_fields[] = {
      {"name", Field::name},
      {"version", Field::version},
      {"build", Field::build},
      {"build_number", Field::build_number},
      {"depends", Field::depends},
      {"constrains", Field::constrains},
      {"track_features", Field::track_features},
      {"noarch", Field::noarch},
      {"subdir", Field::subdir},
      {"timestamp", Field::timestamp},
      {"md5", Field::md5},
      {"sha256", Field::sha256},
      {"size", Field::size},
      {"license", Field::license},
      {"python_site_packages_path", Field::python_site_packages_path},
  };
  for (const auto& [name, field] : k_fields) {
    if (name == key) {
      return field;
    }
  }
  return Field::other;
}

// Timestamps before year 10000 in seconds are seconds (conda's rule); larger values are ms.
constexpr std::uint64_t k_max_seconds = 253'402'300'799ULL;

class Handler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
public:
  Handler(const RepoDataLimits& limits, RepoData& out, std::string& document)
      : m_limits(limits), m_out(out), m_document(document) {}

  // The error that stopped the parse (the handler returned false), empty when the parser's own.
  std::string error;
  std::uint64_t repodata_version = 1;

  bool StartObject() {
    if (!push()) {
      return false;
    }
    switch (m_at) {
    case At::top:
      if (m_depth == 1) {
        return true; // the index itself
      }
      return enter(top_section());
    case At::info:
      return enter(At::skip);
    case At::packages:
      m_record = Record{};
      m_record.filename = m_key;
      m_record_bad.clear();
      return enter(At::record);
    case At::record:
    case At::list:
    case At::removed:
      return field_wrong_type("an object") && enter(At::skip);
    case At::skip:
      return true;
    }
    return true;
  }

  bool EndObject(rapidjson::SizeType /*members*/) {
    if (m_at == At::record && m_depth == m_enter_depth.back()) {
      finish_record();
    }
    return pop() && error.empty();
  }

  bool StartArray() {
    if (!push()) {
      return false;
    }
    switch (m_at) {
    case At::top:
      if (m_depth == 1) {
        error = "not a repodata index (the top level is an array, not an object)";
        return false;
      }
      if (m_key == "removed") {
        return enter(At::removed);
      }
      return enter(At::skip);
    case At::record:
      if (m_field == Field::depends || m_field == Field::constrains || m_field == Field::track_features) {
        list_of(m_field).clear();
        return enter(At::list);
      }
      return enter(At::skip);
    case At::packages:
      skip_record(m_key, "not an object");
      return enter(At::skip);
    case At::list:
      bad(fmt::format("\"{}\" has a list in it", field_name()));
      return enter(At::skip);
    case At::info:
    case At::removed:
      return enter(At::skip);
    case At::skip:
      return true;
    }
    return true;
  }

  bool EndArray(rapidjson::SizeType /*elements*/) { return pop(); }

  bool Key(const char* s, rapidjson::SizeType len, bool /*copy*/) {
    if (!bounded(len)) {
      return false;
    }
    const std::string_view key(s, len);
    switch (m_at) {
    case At::top:
    case At::info:
    case At::packages: // the key is the record's filename
      m_key = key;     // a view into the document (decoded in place)
      break;
    case At::record:
      m_field = m_depth == m_enter_depth.back() ? field_of(key) : Field::other;
      break;
    default:
      break;
    }
    return true;
  }

  bool String(const char* s, rapidjson::SizeType len, bool /*copy*/) {
    if (!bounded(len) || !inside_root()) {
      return false;
    }
    const std::string_view v(s, len);
    switch (m_at) {
    case At::top:
      if (m_depth == 1 && m_key == "repodata_version") {
        return wrong_top("repodata_version", "a number");
      }
      return true;
    case At::info:
      if (m_depth == m_enter_depth.back()) {
        if (m_key == "subdir") {
          m_out.subdir.assign(v);
          m_subdir = v;
        } else if (m_key == "base_url") {
          m_out.base_url.assign(v);
        }
      }
      return true;
    case At::packages:
      return record_not_object();
    case At::record:
      return m_depth == m_enter_depth.back() ? record_string(v) : true;
    case At::list:
      return list_entry(v);
    case At::removed:
      m_out.removed.emplace_back(v);
      return true;
    case At::skip:
      return true;
    }
    return true;
  }

  bool Uint64(std::uint64_t n) { return number(n); }
  bool Uint(unsigned n) { return number(n); }
  bool Int(int n) { return n < 0 ? other_value("a negative number") : number(static_cast<std::uint64_t>(n)); }
  bool Int64(std::int64_t n) {
    return n < 0 ? other_value("a negative number") : number(static_cast<std::uint64_t>(n));
  }
  bool Double(double /*d*/) { return other_value("a fraction"); }
  bool Null() {
    return !inside_root()                                   ? false
           : m_at == At::record && m_field == Field::noarch ? true
                                                            : other_value("null");
  }
  bool Bool(bool b) {
    if (!inside_root()) {
      return false;
    }
    if (m_at == At::record && m_field == Field::noarch && m_depth == m_enter_depth.back()) {
      m_record.noarch = b ? NoArch::generic : NoArch::none; // legacy `noarch: true` is generic
      return true;
    }
    return other_value("a boolean");
  }

private:
  const RepoDataLimits& m_limits;
  RepoData& m_out;
  std::string& m_document; // parsed in place: every string the handler sees lies inside it
  At m_at = At::top;
  std::size_t m_depth = 0;
  // The context of each level entered, and the depth at which it was entered.
  std::vector<At> m_context;
  std::vector<std::size_t> m_enter_depth{0};
  std::string_view m_key;
  Field m_field = Field::other;
  Record m_record;
  std::string m_record_bad; // why the record being read is malformed; empty while it is fine
  std::vector<Record> m_tar_bz2;
  std::string_view m_subdir;

  // A scalar outside any object is a document that is not an index.
  bool inside_root() {
    if (m_depth == 0) {
      error = "not a repodata index (the top level is not an object)";
      return false;
    }
    return true;
  }
  bool push() {
    if (++m_depth > m_limits.max_depth) {
      error = fmt::format("nested deeper than {} levels", m_limits.max_depth);
      return false;
    }
    return true;
  }
  bool enter(At at) {
    if (m_at == At::skip) {
      return true; // inside a skipped value, every level is skipped
    }
    m_context.push_back(m_at);
    m_enter_depth.push_back(m_depth);
    m_at = at;
    return true;
  }
  bool pop() {
    if (m_depth == m_enter_depth.back() && m_enter_depth.size() > 1) {
      m_at = m_context.back();
      m_context.pop_back();
      m_enter_depth.pop_back();
    }
    --m_depth;
    return true;
  }
  At top_section() const {
    if (m_depth != 2) {
      return At::skip;
    }
    if (m_key == "info") {
      return At::info;
    }
    if (m_key == "packages" || m_key == "packages.conda") {
      return At::packages;
    }
    return At::skip;
  }
  bool bounded(std::size_t len) {
    if (len > m_limits.max_string) {
      error = fmt::format("a string of {} bytes (at most {})", len, m_limits.max_string);
      return false;
    }
    return true;
  }
  bool wrong_top(std::string_view key, std::string_view expected) {
    error = fmt::format("\"{}\" is not {}", key, expected);
    return false;
  }
  bool record_not_object() {
    // A package entry that isn't an object: the entry is left out, like a malformed record.
    skip_record(m_key, "not an object");
    return true;
  }
  bool field_wrong_type(std::string_view what) {
    if (m_at == At::record && m_field != Field::other && m_depth - 1 == m_enter_depth.back()) {
      bad(fmt::format("\"{}\" is {}", field_name(), what));
    }
    return true;
  }
  bool other_value(std::string_view what) {
    if (!inside_root()) {
      return false;
    }
    if (m_at == At::top && m_depth == 1 && m_key == "repodata_version") {
      return wrong_top("repodata_version", "a whole number");
    }
    if (m_at == At::record && m_depth == m_enter_depth.back() && m_field != Field::other) {
      bad(fmt::format("\"{}\" is {}", field_name(), what));
    } else if (m_at == At::list) {
      bad(fmt::format("\"{}\" has {}", field_name(), what));
    } else if (m_at == At::packages) {
      skip_record(m_key, "not an object");
    }
    return true;
  }
  bool number(std::uint64_t n) {
    if (!inside_root()) {
      return false;
    }
    if (m_at == At::top && m_depth == 1 && m_key == "repodata_version") {
      repodata_version = n;
      return true;
    }
    if (m_at == At::info && m_depth == m_enter_depth.back() && m_key == "repodata_version") {
      repodata_version = n;
      return true;
    }
    if (m_at == At::packages) {
      skip_record(m_key, "not an object");
      return true;
    }
    if (m_at != At::record || m_depth != m_enter_depth.back()) {
      return m_at == At::list ? (bad(fmt::format("\"{}\" has a number", field_name())), true) : true;
    }
    switch (m_field) {
    case Field::build_number:
      m_record.build_number = n;
      break;
    case Field::size:
      m_record.size = n;
      break;
    case Field::timestamp:
      m_record.timestamp_ms = n <= k_max_seconds ? n * 1000 : n;
      break;
    case Field::other:
      break;
    default:
      bad(fmt::format("\"{}\" is a number", field_name()));
    }
    return true;
  }
  std::vector<std::string_view>& list_of(Field f) {
    return f == Field::depends ? m_record.depends
                               : (f == Field::constrains ? m_record.constrains : m_record.track_features);
  }
  bool list_entry(std::string_view v) {
    std::vector<std::string_view>& list = list_of(m_field);
    if (list.size() >= m_limits.max_list) {
      bad(fmt::format("\"{}\" has more than {} entries", field_name(), m_limits.max_list));
      return true;
    }
    list.emplace_back(v);
    return true;
  }
  bool record_string(std::string_view v) {
    switch (m_field) {
    case Field::name:
      m_record.name = v;
      break;
    case Field::version:
      m_record.version = v;
      break;
    case Field::build:
      m_record.build = v;
      break;
    case Field::subdir:
      m_record.subdir = v;
      break;
    case Field::md5:
      m_record.md5 = lowered(v);
      break;
    case Field::sha256:
      m_record.sha256 = lowered(v);
      break;
    case Field::license:
      m_record.license = v;
      break;
    case Field::python_site_packages_path:
      m_record.python_site_packages_path = v;
      break;
    case Field::noarch:
      if (auto n = noarch_from_name(v)) {
        m_record.noarch = *n;
      } else {
        bad(fmt::format("\"noarch\" is \"{}\" (python or generic)", v));
      }
      break;
    case Field::track_features:
      // The string form: features separated by spaces or commas ("" is none).
      m_record.track_features.clear();
      for (std::string_view rest = v; !rest.empty();) {
        const std::size_t end = rest.find_first_of(" ,");
        const std::string_view feature = rest.substr(0, end);
        if (!feature.empty()) {
          m_record.track_features.emplace_back(feature);
        }
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      }
      break;
    case Field::build_number:
    case Field::size:
    case Field::timestamp:
    case Field::depends:
    case Field::constrains:
      bad(fmt::format("\"{}\" is a string", field_name()));
      break;
    case Field::other:
      break;
    }
    return true;
  }
  std::string_view field_name() const {
    switch (m_field) {
    case Field::name:
      return "name";
    case Field::version:
      return "version";
    case Field::build:
      return "build";
    case Field::build_number:
      return "build_number";
    case Field::depends:
      return "depends";
    case Field::constrains:
      return "constrains";
    case Field::track_features:
      return "track_features";
    case Field::noarch:
      return "noarch";
    case Field::subdir:
      return "subdir";
    case Field::timestamp:
      return "timestamp";
    case Field::md5:
      return "md5";
    case Field::sha256:
      return "sha256";
    case Field::size:
      return "size";
    case Field::license:
      return "license";
    case Field::python_site_packages_path:
      return "python_site_packages_path";
    case Field::other:
      return "?";
    }
    return "?";
  }
  void bad(std::string why) {
    if (m_record_bad.empty()) {
      m_record_bad = std::move(why);
    }
  }
  // `v` (a string of the document) in lowercase, changed in place when it has capitals.
  std::string_view lowered(std::string_view v) {
    if (std::any_of(v.begin(), v.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      const auto at = static_cast<std::size_t>(v.data() - m_document.data());
      for (std::size_t i = at; i < at + v.size(); ++i) {
        m_document[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(m_document[i])));
      }
    }
    return v;
  }
  void skip_record(std::string_view filename, std::string_view why) {
    if (m_out.skipped++ == 0) {
      m_out.first_skipped = fmt::format("{}: {}", filename, why);
    }
  }
  void finish_record();

public:
  // The .tar.bz2 records, merged into m_out once the index is read (see parse_repodata).
  std::vector<Record>& tar_bz2() { return m_tar_bz2; }
  // `info.subdir` as a view of the document.
  [[nodiscard]] std::string_view subdir() const { return m_subdir; }
};

bool is_lower_hex(std::string_view s, std::size_t len) {
  return s.size() == len && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A package name as conda's CEP 26 allows it: lowercase letters, digits, '.', '-', '_', at most 64.
bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
  });
}

void Handler::finish_record() {
  Record& r = m_record;
  if (m_record_bad.empty()) {
    const std::optional<ArtifactName> parts = split_artifact_filename(r.filename);
    if (!parts) {
      bad("not NAME-VERSION-BUILD.conda or .tar.bz2");
    } else if (!valid_name(r.name)) {
      bad(fmt::format("the name \"{}\" is not a conda package name", r.name));
    } else if (r.version.empty() || r.build.empty()) {
      bad("no version or build");
    } else if (parts->name != r.name || parts->version != r.version || parts->build != r.build) {
      bad(fmt::format("the record says {}-{}-{}", r.name, r.version, r.build));
    } else if (!r.sha256.empty() && !is_lower_hex(r.sha256, 64)) {
      bad("sha256 is not 64 hex digits");
    } else if (!r.md5.empty() && !is_lower_hex(r.md5, 32)) {
      bad("md5 is not 32 hex digits");
    } else if (r.sha256.empty() && r.md5.empty()) {
      bad("neither sha256 nor md5");
    } else if (!r.subdir.empty() && !m_out.subdir.empty() && r.subdir != m_out.subdir &&
               r.subdir != "noarch") {
      bad(fmt::format("its subdir {} is not the index's {}", r.subdir, m_out.subdir));
    }
  }
  if (!m_record_bad.empty()) {
    skip_record(r.filename, m_record_bad);
    return;
  }
  if (m_out.records.size() + m_tar_bz2.size() >= m_limits.max_records) {
    error = fmt::format("more than {} package records", m_limits.max_records);
    return;
  }
  (r.is_conda_format() ? m_out.records : m_tar_bz2).push_back(std::move(r));
}

std::string_view stem_of(std::string_view filename) {
  return filename.substr(0, filename.size() - (filename.ends_with(".conda") ? 6 : 8));
}

// One candidate per stem, the .conda one where both exist (conda's rule): the .tar.bz2 twin's md5
// and size become legacy_bz2_*; the other .tar.bz2 records follow the .conda ones, in the index's
// order. Records are large, so they are never sorted here.
void merge_twins(std::vector<Record>& records, std::vector<Record>& tar_bz2) {
  std::unordered_map<std::string_view, std::size_t> conda_by_stem;
  conda_by_stem.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    conda_by_stem.emplace(stem_of(records[i].filename), i);
  }
  records.reserve(records.size() + tar_bz2.size());
  const std::size_t conda_count = records.size();
  for (Record& old : tar_bz2) {
    const auto it = conda_by_stem.find(stem_of(old.filename));
    if (it != conda_by_stem.end() && it->second < conda_count) {
      Record& twin = records[it->second];
      twin.legacy_bz2_md5 = old.md5;
      twin.legacy_bz2_size = old.size;
    } else {
      records.push_back(std::move(old));
    }
  }
}

} // namespace

std::string_view noarch_name(NoArch n) {
  return n == NoArch::python ? "python" : n == NoArch::generic ? "generic" : "";
}

std::optional<NoArch> noarch_from_name(std::string_view name) {
  for (NoArch n : {NoArch::none, NoArch::generic, NoArch::python}) {
    if (noarch_name(n) == name) {
      return n;
    }
  }
  return std::nullopt;
}

Result<RepoData> parse_repodata(std::string json, std::string_view origin, const RepoDataLimits& limits) {
  RepoData out;
  if (json.find_first_not_of(" \t\r\n") == std::string::npos) {
    return out; // CEP 26: an empty index is valid and equals {}
  }
  // conda-forge's records take 600-900 bytes of JSON each: one allocation for most indexes.
  out.records.reserve(std::min(json.size() / 600, limits.max_records));
  auto document = std::make_shared<std::string>(std::move(json));
  Handler handler(limits, out, *document);
  handler.tar_bz2().reserve(out.records.capacity()); // reserved, not touched: no copy as it grows
  rapidjson::Reader reader;
  // In place: each string is decoded where it lies (the document's bytes are the records' text).
  // The parser recurses once per level, and the handler refuses a level past max_depth before the
  // parser goes down into it, so a deep document can't exhaust the stack. (rapidjson 1.1's
  // iterative mode is not used: its first push does pointer arithmetic on a null stack, which
  // UBSan reports.)
  rapidjson::InsituStringStream stream(document->data());
  const rapidjson::ParseResult parsed =
      reader.Parse<rapidjson::kParseInsituFlag | rapidjson::kParseValidateEncodingFlag>(stream, handler);
  if (!parsed) {
    if (!handler.error.empty()) {
      return invalid_input("{}: {} (near byte {})", origin, handler.error, parsed.Offset());
    }
    return invalid_input("{}: not a JSON document: {} (byte {})", origin,
                         rapidjson::GetParseError_En(parsed.Code()), parsed.Offset());
  }
  if (handler.repodata_version > 2) {
    return invalid_input("{}: repodata_version {}, which lockstep can't read (it reads 1 and 2)", origin,
                         handler.repodata_version);
  }
  merge_twins(out.records, handler.tar_bz2());
  // A record without a subdir of its own is in the index's (a view of the document's info.subdir).
  if (!handler.subdir().empty()) {
    for (Record& r : out.records) {
      if (r.subdir.empty()) {
        r.subdir = handler.subdir();
      }
    }
  }
  out.text = std::move(document);
  return out;
}

std::optional<ArtifactName> split_artifact_filename(std::string_view filename) {
  std::string_view stem;
  if (filename.ends_with(".conda")) {
    stem = filename.substr(0, filename.size() - 6);
  } else if (filename.ends_with(".tar.bz2")) {
    stem = filename.substr(0, filename.size() - 8);
  } else {
    return std::nullopt;
  }
  const std::size_t b = stem.rfind('-');
  if (b == std::string_view::npos || b == 0) {
    return std::nullopt;
  }
  const std::size_t v = stem.rfind('-', b - 1);
  if (v == std::string_view::npos || v == 0 || v + 1 == b || b + 1 == stem.size()) {
    return std::nullopt;
  }
  if (filename.find_first_of("/\\") != std::string_view::npos) {
    return std::nullopt;
  }
  return ArtifactName{stem.substr(0, v), stem.substr(v + 1, b - v - 1), stem.substr(b + 1)};
}

} // namespace lockstep::conda

// OpenPGP signature checks with gpgv or sqv (see openpgp.hpp for the policy).
#include "support/debian/openpgp.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/system/fs.hpp"

#include <openssl/evp.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace lockstep {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_max_keyring = 32ULL << 20;
constexpr std::uint64_t k_max_status = 1ULL << 20;
constexpr std::size_t k_max_stderr_shown = 2048;
constexpr auto k_verifier_timeout = std::chrono::seconds(120);

constexpr std::string_view k_begin_message = "-----BEGIN PGP SIGNED MESSAGE-----";
constexpr std::string_view k_begin_signature = "-----BEGIN PGP SIGNATURE-----";
constexpr std::string_view k_end_signature = "-----END PGP SIGNATURE-----";
constexpr std::string_view k_begin_key = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
constexpr std::string_view k_end_key = "-----END PGP PUBLIC KEY BLOCK-----";

// ---- small text helpers --------------------------------------------------------------------------

bool is_blank(std::string_view s) {
  return trim(s).empty();
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  while (true) {
    s = trim(s);
    if (s.empty()) {
      return out;
    }
    auto end = s.find_first_of(" \t");
    out.push_back(s.substr(0, end));
    s.remove_prefix(end == std::string_view::npos ? s.size() : end);
  }
}

// ---- keyrings ------------------------------------------------------------------------------------

Result<std::string> base64_decode(std::string_view b64, std::string_view what) {
  std::string out((b64.size() / 4 + 1) * 3, '\0');
  std::unique_ptr<EVP_ENCODE_CTX, void (*)(EVP_ENCODE_CTX*)> ctx(EVP_ENCODE_CTX_new(), EVP_ENCODE_CTX_free);
  if (!ctx) {
    return internal_error("EVP_ENCODE_CTX_new failed");
  }
  EVP_DecodeInit(ctx.get());
  int n = 0;
  int tail = 0;
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  if (EVP_DecodeUpdate(ctx.get(), dst, &n, reinterpret_cast<const unsigned char*>(b64.data()),
                       static_cast<int>(b64.size())) < 0 ||
      EVP_DecodeFinal(ctx.get(), dst + n, &tail) < 0) {
    return invalid_input("{}: the ASCII armor holds invalid base64", what);
  }
  out.resize(static_cast<std::size_t>(n) + static_cast<std::size_t>(tail));
  return out;
}

} // namespace

Result<std::string> dearmor_keyring(std::string_view armored, std::string_view what) {
  enum class State { outside, headers, body };
  State state = State::outside;
  std::string b64;
  std::string binary;
  int blocks = 0;
  for (std::string_view raw : lines_of(armored)) {
    std::string_view line = trim(raw);
    switch (state) {
    case State::outside:
      if (line == k_begin_key) {
        state = State::headers;
        b64.clear();
      } else if (line.substr(0, 5) == "-----") {
        return invalid_input("{}: expected an OpenPGP public key block, found '{}'", what, line);
      }
      break; // text around the blocks is ignored, as gpg does
    case State::headers:
      if (line.empty()) {
        state = State::body;
        break;
      }
      if (line.find(": ") != std::string_view::npos) {
        break; // "Comment: ...", "Version: ..."
      }
      state = State::body; // no headers and no blank line: tolerated
      [[fallthrough]];
    case State::body:
      if (line == k_end_key) {
        LS_TRY_ASSIGN(std::string packets, base64_decode(b64, what));
        if (packets.empty()) {
          return invalid_input("{}: an empty OpenPGP public key block", what);
        }
        binary += packets;
        ++blocks;
        state = State::outside;
      } else if (!line.empty() && line.front() == '=') {
        // The CRC-24 line: RFC 9580 says not to rely on it (the signature check covers the keys).
      } else if (line.substr(0, 5) == "-----") {
        return invalid_input("{}: unexpected '{}' inside an OpenPGP public key block", what, line);
      } else {
        b64 += line;
      }
      break;
    }
  }
  if (state != State::outside) {
    return invalid_input("{}: the OpenPGP public key block has no '{}' line", what, k_end_key);
  }
  if (blocks == 0) {
    return invalid_input("{}: no '{}' found", what, k_begin_key);
  }
  return binary;
}

namespace {

// Reads `keyring` and returns binary OpenPGP packets (or a GnuPG keybox) that gpgv can read.
Result<std::string> load_keyring(const fs::path& keyring, std::string_view what) {
  auto data = read_file(keyring, k_max_keyring);
  if (!data) {
    return std::move(data).error().with_context(fmt::format("can't read the keyring to verify {}", what));
  }
  const std::string name = "keyring " + keyring.string();
  std::string_view text = *data;
  auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) {
    return invalid_input("{} is empty: it holds no key to verify {} with", name, what);
  }
  if (text.substr(start, k_begin_key.size()) == k_begin_key) {
    return dearmor_keyring(text, name);
  }
  const auto first = static_cast<unsigned char>(text[0]);
  const bool openpgp_packet = (first & 0x80) != 0;
  const bool keybox = text.size() >= 12 && text.substr(8, 4) == "KBXf";
  if (!openpgp_packet && !keybox) {
    return invalid_input("{} is not an OpenPGP keyring (neither binary nor ASCII-armored keys)", name);
  }
  return std::move(*data);
}

// ---- the verifier process ------------------------------------------------------------------------

std::string find_program(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + std::string(name);
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    if (colon == std::string_view::npos) {
      return {};
    }
    dirs.remove_prefix(colon + 1);
  }
}

Result<void> write_private(const fs::path& path, std::string_view data) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600));
  return write_all(fd.get(), data.data(), data.size(), path.string());
}

// The first `max` bytes of a file the verifier wrote (it may be missing).
Result<std::string> read_head(const fs::path& path, std::uint64_t max, bool* truncated) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return errno_error("can't read " + path.string(), errno);
  }
  UniqueFd file(fd);
  std::string out(max + 1, '\0');
  LS_TRY_ASSIGN(std::size_t n, read_full(file.get(), out.data(), out.size(), path.string()));
  *truncated = n > max;
  out.resize(std::min<std::size_t>(n, max));
  return out;
}

struct ProcessOutput {
  int exit_code = -1; // -1: killed by a signal
  std::string out;
  std::string err;
  std::string status;
  bool out_truncated = false;
};

// Runs `argv` (argv[0] an absolute path) in `dir` with stdin from /dev/null, stdout, stderr and fd
// 3 to files in `dir`, a private GNUPGHOME and the C locale; waits at most k_verifier_timeout.
Result<ProcessOutput> run_verifier(const std::vector<std::string>& argv, const fs::path& dir,
                                   std::uint64_t max_out) {
  const fs::path home = dir / "home";
  if (::mkdir(home.c_str(), 0700) != 0) {
    return errno_error("can't create " + home.string(), errno);
  }
  const std::string out_path = (dir / "stdout").string();
  const std::string err_path = (dir / "stderr").string();
  const std::string status_path = (dir / "status").string();

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  struct ActionsGuard {
    posix_spawn_file_actions_t* a;
    ~ActionsGuard() { posix_spawn_file_actions_destroy(a); }
  } guard{&actions};
  const int create = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), create, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), create, 0600);
  posix_spawn_file_actions_addopen(&actions, 3, status_path.c_str(), create, 0600);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
#endif

  std::vector<std::string> env = {"GNUPGHOME=" + home.string(), "LC_ALL=C", "LANG=C", "TZ=UTC"};
  const char* path = std::getenv("PATH");
  env.push_back(std::string("PATH=") + (path != nullptr ? path : "/usr/bin:/bin"));
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (std::string& e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  argp.reserve(args.size() + 1);
  for (std::string& a : args) {
    argp.push_back(a.data());
  }
  argp.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t all_default;
  sigemptyset(&all_default);
  sigaddset(&all_default, SIGINT);
  sigaddset(&all_default, SIGTERM);
  sigaddset(&all_default, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all_default);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0].c_str(), &actions, &attr, argp.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return external_error("can't run {}: {}", args[0], std::strerror(rc));
  }

  // Poll for the exit so a hung verifier, or an interrupt, does not block for ever.
  const auto deadline = std::chrono::steady_clock::now() + k_verifier_timeout;
  auto nap = std::chrono::microseconds(200);
  int wstatus = 0;
  while (true) {
    pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) {
      break;
    }
    if (r < 0 && errno != EINTR) {
      return errno_error("waitpid for " + args[0], errno);
    }
    const bool timed_out = std::chrono::steady_clock::now() > deadline;
    if (timed_out || interrupted()) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      if (timed_out) {
        return external_error("{} did not finish within {} s", args[0], k_verifier_timeout.count());
      }
      return Error{ExitCode::interrupted, "interrupted; nothing was published"};
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(20000));
  }

  ProcessOutput result;
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  bool truncated = false;
  LS_TRY_ASSIGN(result.out, read_head(out_path, max_out, &result.out_truncated));
  LS_TRY_ASSIGN(result.err, read_head(err_path, k_max_stderr_shown, &truncated));
  LS_TRY_ASSIGN(result.status, read_head(status_path, k_max_status, &truncated));
  return result;
}

// The verifier's own words, shortened, for an error message.
std::string stderr_excerpt(const ProcessOutput& p) {
  std::string s(trim(p.err));
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.empty() ? "no message" : s;
}

// ---- what gpgv said ------------------------------------------------------------------------------

// The digest algorithms apt does not trust (RFC 9580 ids): MD5, SHA-1, RIPEMD-160 (and 0).
const char* untrusted_digest(int id) {
  switch (id) {
  case -1:
    return "an unreadable digest algorithm";
  case 0:
    return "an invalid digest";
  case 1:
    return "MD5";
  case 2:
    return "SHA-1";
  case 3:
    return "RIPEMD-160";
  default:
    return nullptr;
  }
}

// Does a VALIDSIG fingerprint belong to a GOODSIG key id (a long key id or a fingerprint)?
bool same_key(std::string_view fingerprint, std::string_view keyid) {
  if (keyid.size() > fingerprint.size()) {
    return false;
  }
  return fingerprint.substr(fingerprint.size() - keyid.size()) == keyid;
}

struct GpgvStatus {
  std::vector<std::string> good_keyids;        // GOODSIG
  std::vector<std::string> valid_fingerprints; // VALIDSIG with a trusted digest
  std::vector<std::string> weak;               // VALIDSIG with an untrusted digest
  std::vector<std::string> bad;                // BADSIG keyid uid
  std::vector<std::string> no_pubkey;          // NO_PUBKEY keyid
  std::vector<std::string> worthless;          // EXPKEYSIG, REVKEYSIG, EXPSIG lines
  std::vector<std::string> errsig;             // ERRSIG other than a missing key
  std::vector<std::string> errors;             // ERROR
  int newsig = 0;
  int plaintext = 0;
  bool nodata = false;
};

GpgvStatus parse_status(std::string_view status) {
  GpgvStatus s;
  constexpr std::string_view k_prefix = "[GNUPG:] ";
  for (std::string_view line : lines_of(status)) {
    if (line.substr(0, k_prefix.size()) != k_prefix) {
      continue;
    }
    line.remove_prefix(k_prefix.size());
    line = trim(line);
    auto w = words(line);
    if (w.empty()) {
      continue;
    }
    const std::string_view key = w[0];
    std::string rest(trim(line.substr(key.size())));
    if (key == "NEWSIG") {
      ++s.newsig;
    } else if (key == "PLAINTEXT") {
      ++s.plaintext;
    } else if (key == "NODATA") {
      s.nodata = true;
    } else if (key == "GOODSIG" && w.size() >= 2) {
      s.good_keyids.emplace_back(w[1]);
    } else if (key == "VALIDSIG" && w.size() >= 9) {
      int algo = -1;
      std::from_chars(w[8].data(), w[8].data() + w[8].size(), algo);
      if (const char* weak = untrusted_digest(algo)) {
        s.weak.push_back(std::string(w[1]) + " uses " + weak);
      } else {
        s.valid_fingerprints.emplace_back(w[1]);
      }
    } else if (key == "BADSIG") {
      s.bad.push_back("BADSIG " + rest);
    } else if (key == "NO_PUBKEY" && w.size() >= 2) {
      s.no_pubkey.emplace_back(w[1]);
    } else if (key == "EXPKEYSIG" || key == "REVKEYSIG" || key == "EXPSIG") {
      s.worthless.push_back(std::string(key) + " " + rest);
    } else if (key == "ERRSIG") {
      // "ERRSIG keyid pkalgo hashalgo class time rc [fpr]"; rc 9 is a missing key (NO_PUBKEY follows).
      if (w.size() < 7 || w[6] != "9") {
        s.errsig.push_back("ERRSIG " + rest);
      }
    } else if (key == "ERROR") {
      s.errors.push_back("ERROR " + rest);
    }
  }
  return s;
}

// Applies the policy of openpgp.hpp to gpgv's status lines.
Result<void> judge_gpgv(const ProcessOutput& p, std::string_view what, const fs::path& keyring,
                        int expected_plaintexts) {
  GpgvStatus s = parse_status(p.status);
  if (!s.bad.empty()) {
    return invalid_input("bad signature on {} ({}): the content is not what the key signed; it was changed "
                         "after signing or in transit",
                         what, fmt::join(s.bad, ", "));
  }
  if (!s.errors.empty()) {
    return invalid_input("gpgv could not verify {} ({}): {}", what, fmt::join(s.errors, ", "),
                         stderr_excerpt(p));
  }
  if (s.nodata) {
    return invalid_input("{} holds no OpenPGP data (NODATA; did a proxy or captive portal answer instead of "
                         "the repository?)",
                         what);
  }
  if (s.newsig == 0) {
    return invalid_input("gpgv found no signature it can check in {}: {}", what, stderr_excerpt(p));
  }
  if (s.plaintext != expected_plaintexts) {
    return invalid_input("{} is not a single {}: gpgv found {} signed texts", what,
                         expected_plaintexts == 1 ? "clearsigned message" : "detached signature",
                         s.plaintext);
  }
  std::vector<std::string> good;
  for (const std::string& fpr : s.valid_fingerprints) {
    bool matched = std::any_of(s.good_keyids.begin(), s.good_keyids.end(),
                               [&](const std::string& id) { return same_key(fpr, id); });
    if (matched) {
      good.push_back(fpr);
    }
  }
  if (!good.empty()) {
    log::debug("{}: good signature by {}{}", what, fmt::join(good, ", "),
               s.no_pubkey.empty() ? ""
                                   : " (ignored, keys not in the keyring: " +
                                         fmt::format("{}", fmt::join(s.no_pubkey, ", ")) + ")");
    return {};
  }
  if (!s.worthless.empty()) {
    return invalid_input("{} is signed only by expired or revoked keys or with expired signatures ({}): the "
                         "repository's key or the keyring {} must be renewed",
                         what, fmt::join(s.worthless, ", "), keyring.string());
  }
  if (!s.weak.empty()) {
    return invalid_input("{} is signed only with untrusted digest algorithms ({})", what,
                         fmt::join(s.weak, ", "));
  }
  if (!s.no_pubkey.empty()) {
    std::vector<std::string> ids;
    for (const std::string& id : s.no_pubkey) {
      ids.push_back("NO_PUBKEY " + id);
    }
    return invalid_input("{} is signed by a key not in {} ({}): check that this is the repository's keyring",
                         what, keyring.string(), fmt::join(ids, ", "));
  }
  if (!s.errsig.empty()) {
    return invalid_input("gpgv can't check the signature of {} ({}): {}", what, fmt::join(s.errsig, ", "),
                         stderr_excerpt(p));
  }
  return invalid_input("gpgv did not accept the signature of {} (exit status {}): {}", what, p.exit_code,
                       stderr_excerpt(p));
}

// sqv prints nothing machine-readable about failures; its exit status and message are all there is.
Result<void> judge_sqv(const ProcessOutput& p, std::string_view what, const fs::path& keyring) {
  if (p.exit_code == 0) {
    return {};
  }
  if (p.exit_code == 2) {
    return external_error(
        "sqv could not be used to verify {} (usage error; lockstep needs sqv 1.3 or later, or "
        "gpgv): {}",
        what, stderr_excerpt(p));
  }
  return invalid_input("sqv did not accept the signature of {} with the keys in {}: {}", what,
                       keyring.string(), stderr_excerpt(p));
}

struct Verifier {
  enum class Kind { gpgv, sqv } kind = Kind::gpgv;
  std::string path;
};

Result<Verifier> find_verifier() {
  if (std::string gpgv = find_program("gpgv"); !gpgv.empty()) {
    return Verifier{Verifier::Kind::gpgv, gpgv};
  }
  if (std::string sqv = find_program("sqv"); !sqv.empty()) {
    return Verifier{Verifier::Kind::sqv, sqv};
  }
  return external_error("neither gpgv nor sqv is installed, and one is needed to check the signatures of apt "
                        "repositories: install gpgv (Debian, Ubuntu: apt-get install gpgv)");
}

// A private directory for the verifier's files, removed afterwards.
Result<TempDir> verifier_dir() {
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) {
    tmp = "/tmp";
  }
  return TempDir::create(tmp, "lockstep-gpgv-");
}

// Checks that `text` is one clearsigned message and nothing else (whitespace aside). gpgv accepts
// text around the message and more than one message, and would print the text of each.
Result<void> check_clearsigned_shape(std::string_view text, std::string_view what) {
  auto lines = lines_of(text);
  std::size_t i = 0;
  while (i < lines.size() && is_blank(lines[i])) {
    ++i;
  }
  if (i == lines.size() || trim(lines[i]) != k_begin_message) {
    return invalid_input("{} is not a clearsigned OpenPGP message (it must start with '{}')", what,
                         k_begin_message);
  }
  int begin_message = 0;
  int begin_signature = 0;
  int end_signature = 0;
  std::size_t last_end = 0;
  for (std::size_t k = i; k < lines.size(); ++k) {
    std::string_view l = trim(lines[k]);
    begin_message += l == k_begin_message ? 1 : 0;
    begin_signature += l == k_begin_signature ? 1 : 0;
    if (l == k_end_signature) {
      ++end_signature;
      last_end = k;
    }
  }
  if (begin_message != 1 || begin_signature != 1 || end_signature != 1) {
    return invalid_input("{} is not a single clearsigned OpenPGP message ({} signed messages, {} signature "
                         "blocks)",
                         what, begin_message, std::max(begin_signature, end_signature));
  }
  for (std::size_t k = last_end + 1; k < lines.size(); ++k) {
    if (!is_blank(lines[k])) {
      return invalid_input("{} has text after its signature, which no signature covers", what);
    }
  }
  return {};
}

} // namespace

Result<std::string> verify_clearsigned(std::string_view inrelease, const fs::path& keyring,
                                       std::string_view what) {
  LS_TRY(check_clearsigned_shape(inrelease, what));
  LS_TRY_ASSIGN(std::string keys, load_keyring(keyring, what));
  LS_TRY_ASSIGN(Verifier verifier, find_verifier());
  LS_TRY_ASSIGN(TempDir dir, verifier_dir());
  const fs::path keys_path = dir.path() / "keyring.gpg";
  const fs::path input_path = dir.path() / "InRelease";
  LS_TRY(write_private(keys_path, keys));
  LS_TRY(write_private(input_path, inrelease));
  // The signed text is never longer than the message holding it.
  const std::uint64_t max_out = inrelease.size() + 4096;
  if (verifier.kind == Verifier::Kind::gpgv) {
    LS_TRY_ASSIGN(ProcessOutput p, run_verifier({verifier.path, "--homedir", (dir.path() / "home").string(),
                                                 "--status-fd", "3", "--output", "-", "--keyring",
                                                 keys_path.string(), "--", input_path.string()},
                                                dir.path(), max_out));
    LS_TRY(judge_gpgv(p, what, keyring, 1));
    if (p.out_truncated) {
      return invalid_input("gpgv printed more text for {} than the file holds", what);
    }
    return std::move(p.out);
  }
  const fs::path output_path = dir.path() / "verified";
  LS_TRY_ASSIGN(ProcessOutput p, run_verifier({verifier.path, "--keyring", keys_path.string(), "--cleartext",
                                               "--output", output_path.string(), input_path.string()},
                                              dir.path(), 4096));
  LS_TRY(judge_sqv(p, what, keyring));
  bool truncated = false;
  LS_TRY_ASSIGN(std::string text, read_head(output_path, max_out, &truncated));
  if (truncated) {
    return invalid_input("sqv printed more text for {} than the file holds", what);
  }
  return text;
}

Result<void> verify_detached(std::string_view data, std::string_view signature, const fs::path& keyring,
                             std::string_view what) {
  LS_TRY_ASSIGN(std::string keys, load_keyring(keyring, what));
  LS_TRY_ASSIGN(Verifier verifier, find_verifier());
  LS_TRY_ASSIGN(TempDir dir, verifier_dir());
  const fs::path keys_path = dir.path() / "keyring.gpg";
  const fs::path data_path = dir.path() / "Release";
  const fs::path signature_path = dir.path() / "Release.gpg";
  LS_TRY(write_private(keys_path, keys));
  LS_TRY(write_private(data_path, data));
  LS_TRY(write_private(signature_path, signature));
  if (verifier.kind == Verifier::Kind::gpgv) {
    LS_TRY_ASSIGN(ProcessOutput p, run_verifier({verifier.path, "--homedir", (dir.path() / "home").string(),
                                                 "--status-fd", "3", "--keyring", keys_path.string(), "--",
                                                 signature_path.string(), data_path.string()},
                                                dir.path(), 4096));
    return judge_gpgv(p, what, keyring, 0);
  }
  LS_TRY_ASSIGN(ProcessOutput p, run_verifier({verifier.path, "--keyring", keys_path.string(),
                                               signature_path.string(), data_path.string()},
                                              dir.path(), 4096));
  return judge_sqv(p, what, keyring);
}

} // namespace lockstep

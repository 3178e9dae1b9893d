// Signature checks against real gpg keys made for each test (gpg signs, gpgv verifies).
#include "support/codec/digest.hpp"
#include "support/debian/apt_release.hpp"
#include "support/debian/openpgp.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <glob.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>

using namespace lockstep;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

// A throwaway ed25519 signing key in its own GNUPGHOME; the gpg-agent it starts is stopped at the end.
class GpgKey {
public:
  /// `created_days_ago` and `expires` ("never", "1d") make an already expired key possible.
  GpgKey(const fs::path& dir, const std::string& name, int created_days_ago = 0,
         const std::string& expires = "never")
      : m_home(dir / ("gnupg-" + name)) {
    fs::create_directories(m_home);
    fs::permissions(m_home, fs::perms::owner_all, fs::perm_options::replace);
    if (created_days_ago > 0) {
      m_faked_time = " --faked-system-time " +
                     std::to_string(std::time(nullptr) - static_cast<std::time_t>(created_days_ago) * 86400) +
                     "!";
    }
    gpg("--passphrase '' --quick-gen-key '" + name + " <" + name + "@example.invalid>' ed25519 sign " +
        expires);
    std::string listing = gpg("--with-colons --list-keys");
    auto fpr = listing.find("\nfpr:");
    REQUIRE(fpr != std::string::npos);
    auto start = listing.find_first_not_of(':', fpr + 5);
    fingerprint = listing.substr(start, listing.find(':', start) - start);
    REQUIRE(fingerprint.size() == 40);
  }
  ~GpgKey() { (void)std::system(("gpgconf --homedir '" + m_home.string() + "' --kill gpg-agent").c_str()); }
  GpgKey(const GpgKey&) = delete;
  GpgKey& operator=(const GpgKey&) = delete;

  /// Runs gpg with this key's home; returns stdout.
  std::string gpg(const std::string& args) const {
    return test::run_command("gpg --batch --quiet --homedir '" + m_home.string() + "'" + m_faked_time + " " +
                             args + " 2>/dev/null");
  }
  /// The public key, binary (`armor` false) or ASCII-armored, written to `path`.
  fs::path export_key(const fs::path& path, bool armor) const {
    gpg(std::string(armor ? "--armor " : "") + "--output '" + path.string() + "' --export");
    return path;
  }
  /// `text` clearsigned (`extra` may add "-u OTHER" or "--digest-algo SHA1").
  std::string clearsign(const fs::path& dir, const std::string& text, const std::string& extra = "") const {
    fs::path in = dir / "to-sign";
    fs::path out = dir / "signed.asc";
    fs::remove(out);
    write_file(in, text);
    gpg(extra + " --clearsign --output '" + out.string() + "' '" + in.string() + "'");
    return test::slurp(out);
  }
  /// A detached signature of `text`, ASCII-armored (like Release.gpg) or binary.
  std::string detach_sign(const fs::path& dir, const std::string& text, bool armor = true) const {
    fs::path in = dir / "to-sign";
    fs::path out = dir / "signature";
    fs::remove(out);
    write_file(in, text);
    gpg(std::string(armor ? "--armor " : "") + "--detach-sign --output '" + out.string() + "' '" +
        in.string() + "'");
    return test::slurp(out);
  }
  /// An inline-signed (not detached, not clearsigned) message.
  std::string sign_inline(const fs::path& dir, const std::string& text) const {
    fs::path in = dir / "to-sign";
    fs::path out = dir / "inline.gpg";
    fs::remove(out);
    write_file(in, text);
    gpg("--sign --output '" + out.string() + "' '" + in.string() + "'");
    return test::slurp(out);
  }
  [[nodiscard]] std::string long_keyid() const { return fingerprint.substr(fingerprint.size() - 16); }

  std::string fingerprint;

private:
  fs::path m_home;
  std::string m_faked_time;
};

const std::string k_release = "Origin: lockstep\nSuite: lstest\n-leading dash\nFrom the start\n";

} // namespace

TEST_CASE("a clearsigned message by a key in the keyring verifies and yields the signed text", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  fs::path keyring = key.export_key(tmp.dir() / "repo.gpg", false);
  std::string signed_text = key.clearsign(tmp.dir(), k_release);
  REQUIRE(signed_text.find("- -leading dash") != std::string::npos); // dash-escaped in the message

  auto text = verify_clearsigned(signed_text, keyring, "InRelease");
  REQUIRE(text);
  CHECK(*text == k_release);
}

TEST_CASE("an ASCII-armored keyring works and dearmors to the binary keys", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  fs::path binary = key.export_key(tmp.dir() / "repo.gpg", false);
  fs::path armored = key.export_key(tmp.dir() / "repo.asc", true);
  REQUIRE(test::slurp(armored).rfind("-----BEGIN PGP PUBLIC KEY BLOCK-----", 0) == 0);

  auto keys = dearmor_keyring(test::slurp(armored), "repo.asc");
  REQUIRE(keys);
  CHECK(*keys == test::slurp(binary));

  auto text = verify_clearsigned(key.clearsign(tmp.dir(), k_release), armored, "InRelease");
  REQUIRE(text);
  CHECK(*text == k_release);
}

TEST_CASE("dearmor_keyring skips headers and the checksum, joins blocks and rejects broken armor",
          "[openpgp]") {
  const std::string block =
      "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: test\n\naGVsbG8g\nd29ybGQ=\n=abcd\n"
      "-----END PGP PUBLIC KEY BLOCK-----\n";
  CHECK(*dearmor_keyring("some words first\n" + block, "k") == "hello world");
  CHECK(*dearmor_keyring(block + block, "k") == "hello worldhello world");
  auto unterminated = dearmor_keyring("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\naGVsbG8g\n", "k.asc");
  REQUIRE_FALSE(unterminated);
  CHECK(unterminated.error().code == ExitCode::invalid_input);
  CHECK(unterminated.error().message ==
        "k.asc: the OpenPGP public key block has no '-----END PGP PUBLIC KEY BLOCK-----' line");
  CHECK(dearmor_keyring("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n@@@@\n-----END PGP PUBLIC KEY BLOCK-----\n",
                        "k")
            .error()
            .message == "k: the ASCII armor holds invalid base64");
  CHECK(dearmor_keyring("-----BEGIN PGP PRIVATE KEY BLOCK-----\n", "k").error().message ==
        "k: expected an OpenPGP public key block, found '-----BEGIN PGP PRIVATE KEY BLOCK-----'");
}

TEST_CASE("a tampered message is a bad signature", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  fs::path keyring = key.export_key(tmp.dir() / "repo.gpg", false);
  std::string signed_text = key.clearsign(tmp.dir(), k_release);
  signed_text.replace(signed_text.find("Suite: lstest"), 13, "Suite: evilst");

  auto r = verify_clearsigned(signed_text, keyring, "http://repo/dists/lstest/InRelease");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "bad signature on http://repo/dists/lstest/InRelease (BADSIG " +
                                 key.long_keyid() +
                                 " repo <repo@example.invalid>): the content is not what the key signed; it "
                                 "was changed after signing or in transit");
}

TEST_CASE("a message signed by a key outside the keyring names the missing key", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey repo(tmp.dir(), "repo");
  GpgKey other(tmp.dir(), "other");
  fs::path keyring = repo.export_key(tmp.dir() / "repo.gpg", false);

  auto r = verify_clearsigned(other.clearsign(tmp.dir(), k_release), keyring, "InRelease");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "InRelease is signed by a key not in " + keyring.string() + " (NO_PUBKEY " +
                                 other.long_keyid() + "): check that this is the repository's keyring");
}

TEST_CASE("one good signature among several is enough, as for apt", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey repo(tmp.dir(), "repo");
  GpgKey other(tmp.dir(), "other");
  fs::path keyring = repo.export_key(tmp.dir() / "repo.gpg", false);
  // Both keys sign (in one home: import the other secret key).
  fs::path secret = tmp.dir() / "other.sec";
  other.gpg("--pinentry-mode loopback --passphrase '' --output '" + secret.string() +
            "' --export-secret-keys");
  repo.gpg("--import '" + secret.string() + "'");
  std::string twice = repo.clearsign(
      tmp.dir(), k_release, "--local-user " + repo.fingerprint + " --local-user " + other.fingerprint);

  auto text = verify_clearsigned(twice, keyring, "InRelease");
  REQUIRE(text);
  CHECK(*text == k_release);
}

TEST_CASE("an expired signing key is refused although gpgv calls the signature good", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey old(tmp.dir(), "old", 10, "1d"); // made 10 days ago, valid for one day; signs "then"
  fs::path keyring = old.export_key(tmp.dir() / "old.gpg", false);
  auto r = verify_clearsigned(old.clearsign(tmp.dir(), k_release), keyring, "InRelease");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "InRelease is signed only by expired or revoked keys or with expired signatures "
                             "(EXPKEYSIG " +
                                 old.long_keyid() +
                                 " old <old@example.invalid>): the repository's key or the keyring " +
                                 keyring.string() + " must be renewed");
}

TEST_CASE("a signature over a SHA-1 digest is not trusted", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  fs::path keyring = key.export_key(tmp.dir() / "repo.gpg", false);
  auto r =
      verify_clearsigned(key.clearsign(tmp.dir(), k_release, "--digest-algo SHA1"), keyring, "InRelease");
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "InRelease is signed only with untrusted digest algorithms (" + key.fingerprint + " uses SHA-1)");
}

TEST_CASE("text outside the one clearsigned message is refused", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  fs::path keyring = key.export_key(tmp.dir() / "repo.gpg", false);
  std::string signed_text = key.clearsign(tmp.dir(), k_release);
  std::string evil = key.clearsign(tmp.dir(), "Suite: evil\n");

  CHECK(verify_clearsigned("\n\n" + signed_text + "\n", keyring, "InRelease")); // blank lines are fine
  CHECK(verify_clearsigned("Suite: evil\n" + signed_text, keyring, "InRelease").error().message ==
        "InRelease is not a clearsigned OpenPGP message (it must start with '-----BEGIN PGP SIGNED "
        "MESSAGE-----')");
  CHECK(verify_clearsigned(signed_text + "Suite: evil\n", keyring, "InRelease").error().message ==
        "InRelease has text after its signature, which no signature covers");
  auto two = verify_clearsigned(evil + signed_text, keyring, "InRelease");
  REQUIRE_FALSE(two);
  CHECK(two.error().code == ExitCode::invalid_input);
  CHECK(two.error().message == "InRelease is not a single clearsigned OpenPGP message (2 signed messages, 2 "
                               "signature blocks)");
  CHECK(verify_clearsigned(k_release, keyring, "InRelease").error().code == ExitCode::invalid_input);
}

TEST_CASE("a detached signature verifies its data, and only a detached signature does", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  GpgKey other(tmp.dir(), "other");
  fs::path keyring = key.export_key(tmp.dir() / "repo.asc", true);

  CHECK(verify_detached(k_release, key.detach_sign(tmp.dir(), k_release), keyring, "Release"));
  CHECK(verify_detached(k_release, key.detach_sign(tmp.dir(), k_release, false), keyring, "Release"));

  auto tampered = verify_detached(k_release + "X", key.detach_sign(tmp.dir(), k_release), keyring, "Release");
  REQUIRE_FALSE(tampered);
  CHECK_THAT(tampered.error().message, Catch::StartsWith("bad signature on Release (BADSIG "));

  auto foreign = verify_detached(k_release, other.detach_sign(tmp.dir(), k_release), keyring, "Release");
  REQUIRE_FALSE(foreign);
  CHECK_THAT(foreign.error().message, Catch::Contains("(NO_PUBKEY " + other.long_keyid() + ")"));

  // A signed message of other content passed off as Release.gpg must not vouch for Release.
  for (const std::string& not_detached :
       {key.sign_inline(tmp.dir(), "Suite: evil\n"), key.clearsign(tmp.dir(), "Suite: evil\n")}) {
    auto r = verify_detached(k_release, not_detached, keyring, "Release");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::StartsWith("gpgv found no signature it can check in Release: ") &&
                                      Catch::Contains("not a detached signature"));
  }
  auto garbage = verify_detached(k_release, "not a signature", keyring, "Release");
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().code == ExitCode::invalid_input);
}

TEST_CASE("a missing, empty or foreign keyring is a clear error", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  std::string signed_text = key.clearsign(tmp.dir(), k_release);

  auto missing = verify_clearsigned(signed_text, tmp.dir() / "nope.gpg", "InRelease");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::io);
  CHECK_THAT(missing.error().message, Catch::StartsWith("can't read the keyring to verify InRelease: ") &&
                                          Catch::Contains((tmp.dir() / "nope.gpg").string()));

  fs::path empty = tmp.write("empty.gpg", "");
  CHECK(verify_clearsigned(signed_text, empty, "InRelease").error().message ==
        "keyring " + empty.string() + " is empty: it holds no key to verify InRelease with");

  fs::path text = tmp.write("notes.txt", "my keys are elsewhere\n");
  CHECK(verify_clearsigned(signed_text, text, "InRelease").error().message ==
        "keyring " + text.string() + " is not an OpenPGP keyring (neither binary nor ASCII-armored keys)");
}

TEST_CASE("without gpgv or sqv the error says what to install", "[openpgp]") {
  test::TempDirFixture tmp;
  GpgKey key(tmp.dir(), "repo");
  fs::path keyring = key.export_key(tmp.dir() / "repo.gpg", false);
  std::string signed_text = key.clearsign(tmp.dir(), k_release);
  const char* path = std::getenv("PATH");
  std::string saved = path != nullptr ? path : "/usr/bin:/bin";
  ::setenv("PATH", tmp.dir().c_str(), 1);
  auto r = verify_clearsigned(signed_text, keyring, "InRelease");
  ::setenv("PATH", saved.c_str(), 1);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message ==
        "neither gpgv nor sqv is installed, and one is needed to check the signatures of "
        "apt repositories: install gpgv (Debian, Ubuntu: apt-get install gpgv)");
}

TEST_CASE("Debian's own InRelease verifies against debian-archive-keyring", "[openpgp]") {
  const fs::path keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
  glob_t g{};
  const bool found = ::glob("/var/lib/apt/lists/*_debian_dists_bookworm_InRelease", 0, nullptr, &g) == 0;
  std::optional<fs::path> inrelease;
  if (found && g.gl_pathc > 0) {
    inrelease = g.gl_pathv[0];
  }
  ::globfree(&g);
  if (!inrelease || !fs::exists(keyring)) {
    WARN("no bookworm InRelease in /var/lib/apt/lists or no debian-archive-keyring: skipped");
    return;
  }
  auto text = verify_clearsigned(test::slurp(*inrelease), keyring, inrelease->string());
  REQUIRE(text);
  CHECK(text->find("Codename: bookworm\n") != std::string::npos);
  CHECK(text->find("-----BEGIN PGP") == std::string::npos);
}

TEST_CASE("the test apt repository fixture is signed and indexed consistently", "[openpgp][fixture]") {
  test::TempDirFixture tmp;
  const fs::path repo = tmp.dir() / "repo";
  test::run_command("bash '" + (test::source_dir() / "tests/fixtures/apt/make-repo.sh").string() + "' '" +
                    repo.string() + "' >/dev/null");
  const fs::path dist = repo / "dists" / "lstest";
  for (const char* keyring : {"keyring.gpg", "keyring.asc"}) {
    auto text = verify_clearsigned(test::slurp(dist / "InRelease"), repo / keyring, "lstest InRelease");
    REQUIRE(text);
    CHECK(*text == test::slurp(dist / "Release"));
    CHECK(verify_detached(test::slurp(dist / "Release"), test::slurp(dist / "Release.gpg"), repo / keyring,
                          "lstest Release"));
    CHECK(verify_detached(test::slurp(repo / "flat" / "Release"), test::slurp(repo / "flat" / "Release.gpg"),
                          repo / keyring, "flat Release"));
  }
  auto release = AptRelease::parse(test::slurp(dist / "Release"), "lstest Release");
  REQUIRE(release);
  CHECK(release->suite == "lstest");
  CHECK(release->codename == "lstest");
  for (const char* index : {"main/binary-amd64/Packages", "main/binary-amd64/Packages.xz"}) {
    auto entry = release->index(index);
    REQUIRE(entry);
    const std::string bytes = test::slurp(dist / index);
    CHECK(entry->sha256 == sha256_of(bytes));
    CHECK(entry->size == bytes.size());
  }
}

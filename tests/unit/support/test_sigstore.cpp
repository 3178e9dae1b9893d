// cosign-format keys, signatures and simple-signing payloads (support/supplychain/sigstore.hpp).
#include "support/supplychain/sigstore.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace lockstep;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep-sigstore-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

Result<std::string> fixed(std::string s) {
  return s;
}

} // namespace

TEST_CASE("a generated key round-trips through cosign's encrypted format", "[sigstore]") {
  auto key = SigningKey::generate();
  REQUIRE(key);
  auto pem = key->encrypted_private_pem("s3cret");
  REQUIRE(pem);
  CHECK(pem->starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"));
  const fs::path priv = temp_file("k.key", *pem);
  const fs::path pub = temp_file("k.pub", key->public_pem());
  auto loaded = SigningKey::load_private(priv, [] { return fixed("s3cret"); });
  REQUIRE(loaded);
  CHECK(loaded->key_id() == key->key_id());
  auto sig = loaded->sign("payload");
  REQUIRE(sig);
  auto public_key = SigningKey::load_public(pub);
  REQUIRE(public_key);
  CHECK(public_key->verify("payload", *sig));
  CHECK_FALSE(public_key->verify("payload!", *sig));
  CHECK_FALSE(public_key->sign("x")); // no private half

  auto wrong = SigningKey::load_private(priv, [] { return fixed("wrong"); });
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message.find("passphrase does not open this key") != std::string::npos);
}

TEST_CASE("key files that are not P-256 keys are refused", "[sigstore]") {
  const auto never = []() -> Result<std::string> { return invalid_input("no passphrase expected"); };
  CHECK_FALSE(SigningKey::load_private(temp_file("junk.key", "hello"), never));
  CHECK_FALSE(SigningKey::load_public(
      temp_file("junk.pub", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")));
  // an encrypted key without scrypt parameters, as a hostile file might be
  const std::string b64 = "eyJrZGYiOnsibmFtZSI6InNjcnlwdCJ9fQ=="; // {"kdf":{"name":"scrypt"}}
  auto r =
      SigningKey::load_private(temp_file("bad.key", "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n" + b64 +
                                                        "\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"),
                               [] { return fixed("x"); });
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  // scrypt parameters asking for a terabyte are refused before any work is done
  auto huge = SigningKey::load_private(
      temp_file("huge.key", "-----BEGIN ENCRYPTED SIGSTORE PRIVATE "
                            "KEY-----"
                            "\neyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjoxMDk5NTExNjI3Nzc2LCJyIjo4LC"
                            "JwIjoxfSwic2FsdCI6IkFBPT0ifSwiY2lwaGVyIjp7Im5hbWUiOiJuYWNsL3NlY3JldGJveCIsIm5vbm"
                            "NlIjoiQUE9PSJ9LCJjaXBoZXJ0ZXh0IjoiQUE9PSJ9\n"
                            "-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"),
      [] { return fixed("x"); });
  REQUIRE_FALSE(huge);
  CHECK(huge.error().message.find("scrypt parameters") != std::string::npos);
}

TEST_CASE("simple-signing payloads are written and read strictly", "[sigstore]") {
  const Digest d = sha256_of("manifest");
  const std::string payload = simple_signing_payload("reg.lab/team/app:v1", d, "lockstep 0.1.0");
  CHECK(
      payload ==
      R"({"critical":{"identity":{"docker-reference":"reg.lab/team/app:v1"},"image":{"docker-manifest-digest":")" +
          d.str() +
          R"("},"type":"cosign container image signature"},"optional":{"creator":"lockstep 0.1.0"}})");
  auto read = parse_simple_signing(payload, "p");
  REQUIRE(read);
  CHECK(read->reference == "reg.lab/team/app:v1");
  CHECK(read->digest == d);
  CHECK(parse_simple_signing(
      R"({"critical":{"identity":{"docker-reference":"a"},"image":{"docker-manifest-digest":")" + d.str() +
          R"("},"type":"cosign container image signature"},"optional":null})",
      "p"));
  CHECK_FALSE(parse_simple_signing(R"({"critical":{}})", "p"));
  CHECK_FALSE(parse_simple_signing(
      R"({"critical":{"identity":{"docker-reference":"a"},"image":{"docker-manifest-digest":")" + d.str() +
          R"("},"type":"something else"},"optional":null})",
      "p"));
  CHECK_FALSE(parse_simple_signing(
      R"({"critical":{"identity":{"docker-reference":"a"},"image":{"docker-manifest-digest":")" + d.str() +
          R"("},"type":"cosign container image signature","extra":1},"optional":null})",
      "p"));
}

TEST_CASE("DSSE envelopes sign the pre-authentication encoding", "[sigstore][dsse]") {
  CHECK(dsse_pae("application/vnd.in-toto+json", "{}") == "DSSEv1 28 application/vnd.in-toto+json 2 {}");
  auto key = SigningKey::generate();
  REQUIRE(key);
  auto env = dsse_sign(*key, "application/vnd.in-toto+json", "{\"a\":1}");
  REQUIRE(env);
  auto read = parse_dsse(*env, "e");
  REQUIRE(read);
  CHECK(read->payload == "{\"a\":1}");
  CHECK(read->payload_type == "application/vnd.in-toto+json");
  REQUIRE(read->signatures.size() == 1);
  CHECK(key->verify(dsse_pae(read->payload_type, read->payload), read->signatures[0]));
  CHECK_FALSE(key->verify(read->payload, read->signatures[0])); // not the bare payload
  CHECK_FALSE(parse_dsse(R"({"payload":"!!","payloadType":"x","signatures":[]})", "e"));
  CHECK_FALSE(parse_dsse(R"({"payloadType":"x"})", "e"));
}

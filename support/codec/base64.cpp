#include "support/codec/base64.hpp"

#include <openssl/evp.h>

namespace lockstep {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Result<std::string> base64_decode(std::string_view text, std::string_view what) {
  std::string padded(text);
  while (padded.size() % 4 != 0) {
    padded += '=';
  }
  std::size_t pad = 0;
  for (std::size_t i = padded.size(); i > 0 && padded[i - 1] == '=' && pad < 2; --i) {
    ++pad;
  }
  std::string out(3 * padded.size() / 4, '\0');
  int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(padded.data()), static_cast<int>(padded.size()));
  if (n < 0 || (padded.size() % 4) != 0) {
    return invalid_input("{} is not valid base64", what);
  }
  // EVP_DecodeBlock counts the padding as zero bytes.
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

} // namespace lockstep

#include "support/conda/parse_error.hpp"

#include <fmt/format.h>

namespace lockstep::conda {

Error ParseError::to_error(std::string_view what, std::string_view text) const {
  return invalid_input("{} '{}': {} (at byte {})", what, text, message, offset);
}

std::string render_caret(std::string_view text, const ParseError& error, std::string_view indent) {
  std::string shown(indent);
  std::string pad(indent);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool control = c < 0x20 && c != '\t';
    shown += control || c == 0x7f ? '?' : text[i];
    const bool continuation = (c & 0xc0) == 0x80;
    if (i < error.offset && !continuation) {
      pad += c == '\t' ? '\t' : ' ';
    }
  }
  return shown + "\n" + pad + "^ " + error.message;
}

} // namespace lockstep::conda

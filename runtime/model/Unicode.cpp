//===- Unicode.cpp - UTF-8 decoding and character classes -----------------===//

#include "Unicode.h"

#include <algorithm>
#include <array>

namespace condensate::model::unicode {

namespace {

struct CodepointRange {
  uint32_t first;
  uint32_t last;
};

#include "UnicodeTables.inc"

template <size_t N>
bool inRanges(const CodepointRange (&ranges)[N], uint32_t cp) {
  const CodepointRange *it = std::upper_bound(
      ranges, ranges + N, cp,
      [](uint32_t value, const CodepointRange &r) { return value < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

CharClass classifySlow(uint32_t cp) {
  if (cp == kInvalid)
    return CharClass::Other;
  if (inRanges(kLetterRanges, cp))
    return CharClass::Letter;
  if (inRanges(kNumberRanges, cp))
    return CharClass::Number;
  if (inRanges(kWhitespaceRanges, cp))
    return CharClass::Whitespace;
  return CharClass::Other;
}

/// Classes of the first 256 code points, filled once from the tables.
const std::array<CharClass, 256> &latin1Classes() {
  static const std::array<CharClass, 256> table = [] {
    std::array<CharClass, 256> t{};
    for (uint32_t cp = 0; cp < 256; ++cp)
      t[cp] = classifySlow(cp);
    return t;
  }();
  return table;
}

} // namespace

size_t decodeUtf8(std::string_view text, size_t pos, uint32_t &cp) {
  const auto byte = [&](size_t i) { return uint8_t(text[pos + i]); };
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t length;
  uint32_t value, minimum;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, value = b0 & 0x1F, minimum = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, value = b0 & 0x0F, minimum = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, value = b0 & 0x07, minimum = 0x10000;
  } else {
    cp = kInvalid;
    return 1;
  }
  if (text.size() - pos < length) {
    cp = kInvalid;
    return 1;
  }
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) {
      cp = kInvalid;
      return 1;
    }
    value = (value << 6) | (byte(i) & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    cp = kInvalid;
    return 1;
  }
  cp = value;
  return length;
}

CharClass classify(uint32_t cp) {
  if (cp < 256)
    return latin1Classes()[cp];
  return classifySlow(cp);
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

} // namespace condensate::model::unicode

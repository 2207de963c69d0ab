//===- Unicode.h - UTF-8 decoding and character classes for tokenisation --===//
//
// Internal to CondensateModel. Classes follow Hugging Face tokenizers' regex
// engine (see gen_unicode_tables.py for how the tables are made).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_MODEL_UNICODE_H
#define CONDENSATE_MODEL_UNICODE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace condensate::model::unicode {

/// Marks a byte that does not start a valid shortest-form UTF-8 sequence.
constexpr uint32_t kInvalid = 0xFFFFFFFFu;

enum class CharClass : uint8_t { Letter, Number, Whitespace, Other };

/// Decodes the UTF-8 sequence starting at `text[pos]` (pos < size) into `cp`
/// and returns its length. An invalid, overlong, surrogate or truncated
/// sequence yields length 1 and kInvalid, so every byte is consumed once.
size_t decodeUtf8(std::string_view text, size_t pos, uint32_t &cp);

/// \p{L}, \p{N}, \s or anything else; kInvalid is Other.
CharClass classify(uint32_t cp);

/// Appends the UTF-8 encoding of `cp` (cp <= 0x10FFFF).
void appendUtf8(std::string &out, uint32_t cp);

} // namespace condensate::model::unicode

#endif // CONDENSATE_MODEL_UNICODE_H

//===- Tokenizer.cpp - Byte-level and SentencePiece BPE encode and decode -===//

#include "condensate/Model/Tokenizer.h"

#include "Unicode.h"
#include "condensate/Model/GGUF.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <queue>
#include <stdexcept>

namespace condensate::model {

namespace {

using unicode::CharClass;

/// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves,
/// the other 68 bytes to U+0100.. in byte order.
std::array<uint32_t, 256> byteToCodepoint() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) ||
                           (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? b : next++;
  }
  return map;
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

/// SentencePiece's escaped space, U+2581.
constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";

/// SentencePiece's byte token text, "<0xXX>" in upper-case hex.
std::string byteTokenText(uint8_t byte) {
  static const char hex[] = "0123456789ABCDEF";
  return std::string("<0x") + hex[byte >> 4] + hex[byte & 15] + ">";
}

/// The bytes a SentencePiece token stands for: a byte token's byte, else
/// its text with "▁" as ' '.
std::string sentencePieceBytes(const std::string &text, TokenType type) {
  const auto hexDigit = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  if (type == TokenType::Byte && text.size() == 6 &&
      text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
      hexDigit(text[3]) >= 0 && hexDigit(text[4]) >= 0)
    return std::string(1, char(hexDigit(text[3]) * 16 + hexDigit(text[4])));
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
      out += ' ';
      pos += kSpaceSymbol.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

/// Token types SentencePiece's BPE may merge into (its `pieces_`: normal,
/// user-defined and unused; other codes are read as normal). Control,
/// unknown and byte tokens are only ever whole.
bool isMergeable(TokenType type) {
  return type != TokenType::Control && type != TokenType::Unknown &&
         type != TokenType::Byte;
}

/// One decoded character of the text being pre-tokenised.
struct Char {
  uint32_t offset;
  uint32_t cp;
  CharClass cls;
};

/// Length in characters of the GPT-2 regex match at chars[i] within
/// chars[i, end). Alternatives are tried in the regex's order; the first
/// that matches wins (leftmost-first, like Oniguruma).
size_t matchGpt2(const std::vector<Char> &chars, size_t i, size_t end) {
  const auto cpAt = [&](size_t k) { return k < end ? chars[k].cp : 0u; };
  // 's|'t|'re|'ve|'m|'ll|'d
  if (chars[i].cp == '\'') {
    const uint32_t c1 = cpAt(i + 1), c2 = cpAt(i + 2);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
      return 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
        (c1 == 'l' && c2 == 'l'))
      return 3;
  }
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
  for (CharClass cls :
       {CharClass::Letter, CharClass::Number, CharClass::Other}) {
    size_t k = i;
    if (chars[k].cp == ' ' && k + 1 < end && chars[k + 1].cls == cls)
      ++k;
    if (chars[k].cls != cls)
      continue;
    while (k < end && chars[k].cls == cls)
      ++k;
    return k - i;
  }
  // '\s+(?!\S)|\s+': a whitespace run, less its last character when a
  // non-space follows and the run is longer than one.
  size_t k = i;
  while (k < end && chars[k].cls == CharClass::Whitespace)
    ++k;
  if (k < end && k - i > 1)
    --k;
  return k - i;
}

/// Length in characters of the Llama 3 regex match at chars[i] within
/// chars[i, end) (llama.cpp's LLAMA3 and QWEN2 pre-tokenizers; QWEN2 is the
/// same with `maxDigits` 1):
///   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
///   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
/// tried in order, leftmost-first.
size_t matchLlama3(const std::vector<Char> &chars, size_t i, size_t end,
                   size_t maxDigits) {
  const auto cpAt = [&](size_t k) { return k < end ? chars[k].cp : 0u; };
  const auto lower = [](uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
  };
  const auto isNewline = [&](size_t k) {
    return k < end && (chars[k].cp == '\r' || chars[k].cp == '\n');
  };
  const auto is = [&](size_t k, CharClass cls) {
    return k < end && chars[k].cls == cls;
  };
  if (chars[i].cp == '\'') {
    const uint32_t c1 = lower(cpAt(i + 1)), c2 = lower(cpAt(i + 2));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
      return 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
        (c1 == 'l' && c2 == 'l'))
      return 3;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    size_t k = i;
    if (!is(k, CharClass::Letter) && !is(k, CharClass::Number) &&
        !isNewline(k))
      ++k;
    if (is(k, CharClass::Letter)) {
      while (is(k, CharClass::Letter))
        ++k;
      return k - i;
    }
  }
  // \p{N}{1,maxDigits}
  if (is(i, CharClass::Number)) {
    size_t k = i;
    while (is(k, CharClass::Number) && k - i < maxDigits)
      ++k;
    return k - i;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  {
    size_t k = i;
    if (chars[k].cp == ' ')
      ++k;
    if (is(k, CharClass::Other)) {
      while (is(k, CharClass::Other))
        ++k;
      while (isNewline(k))
        ++k;
      return k - i;
    }
  }
  // \s*[\r\n]+ : the whitespace run up to its last line break.
  size_t j = i;
  while (is(j, CharClass::Whitespace))
    ++j;
  for (size_t k = j; k > i; --k)
    if (isNewline(k - 1))
      return k - i;
  // \s+(?!\S)|\s+
  if (j == i)
    return 1; // not reached: every character is in one class
  if (j < end && j - i > 1)
    --j;
  return j - i;
}

} // namespace

//===----------------------------------------------------------------------===//
// Construction
//===----------------------------------------------------------------------===//

Result<Tokenizer> Tokenizer::create(TokenizerConfig config) {
  try {
    Tokenizer t;
    const size_t n = config.tokens.size();
    if (n == 0)
      return Status::error("tokenizer: empty vocabulary");
    if (n > size_t(std::numeric_limits<int32_t>::max()))
      return Status::error("tokenizer: vocabulary of " + std::to_string(n) +
                           " tokens is too large");
    if (!config.tokenTypes.empty() && config.tokenTypes.size() != n)
      return Status::error("tokenizer: " +
                           std::to_string(config.tokenTypes.size()) +
                           " token types for " + std::to_string(n) +
                           " tokens");
    const bool spm = config.model == TokenizerModel::SentencePiece;
    const std::string &pre = config.preTokenizer;
    if (spm) {
      if (config.scores.size() != n)
        return Status::error("tokenizer: " +
                             std::to_string(config.scores.size()) +
                             " scores for " + std::to_string(n) + " tokens");
      for (size_t id = 0; id < n; ++id)
        if (std::isnan(config.scores[id]))
          return Status::error("tokenizer: the score of token #" +
                               std::to_string(id) + " is NaN");
      if (!config.merges.empty())
        return Status::error("tokenizer: " +
                             std::to_string(config.merges.size()) +
                             " merges given to a SentencePiece vocabulary, "
                             "which merges by score");
    } else if (pre == "smollm") {
      t.splitDigits_ = true;
    } else if (pre == "gpt-2" || pre == "gpt2") {
      t.splitDigits_ = false;
    } else if (pre == "qwen2" || pre == "llama-bpe" || pre == "llama3") {
      t.splitDigits_ = false;
      t.llama3Regex_ = true;
      t.maxDigits_ = pre == "qwen2" ? 1 : 3;
    } else {
      return Status::error("tokenizer: unsupported pre-tokenizer " +
                           quoted(pre) +
                           ", expected 'smollm', 'gpt-2', 'qwen2' or "
                           "'llama-bpe'");
    }

    const std::array<uint32_t, 256> byteMap = byteToCodepoint();
    std::unordered_map<uint32_t, uint8_t> codepointToByte;
    for (uint32_t b = 0; b < 256; ++b)
      codepointToByte.emplace(byteMap[b], uint8_t(b));

    t.model_ = config.model;
    t.tokens_ = std::move(config.tokens);
    t.types_.resize(n, TokenType::Normal);
    t.pieces_.resize(n);
    t.vocab_.reserve(n);
    t.specialIds_.push_back({-1, -1}); // The trie's root.
    for (size_t id = 0; id < n; ++id) {
      const std::string &text = t.tokens_[id];
      if (!config.tokenTypes.empty())
        t.types_[id] = static_cast<TokenType>(config.tokenTypes[id]);
      // Later duplicates win, as in tokenizers' vocabulary map (and
      // llama.cpp's token_to_id).
      t.vocab_[text] = int32_t(id);
      const TokenType type = t.types_[id];
      if (type == TokenType::Control || type == TokenType::UserDefined) {
        t.pieces_[id] = text;
        if (text.empty())
          continue;
        int32_t node = 0;
        for (char c : text) {
          auto [edge, added] = t.specialEdges_.emplace(
              (uint64_t(node) << 8) | uint8_t(c),
              int32_t(t.specialIds_.size()));
          if (added)
            t.specialIds_.push_back({-1, -1});
          node = edge->second;
        }
        std::array<int32_t, 2> &ids = t.specialIds_[size_t(node)];
        if (ids[0] < 0)
          ids[0] = int32_t(id);
        if (type == TokenType::UserDefined && ids[1] < 0)
          ids[1] = int32_t(id);
        t.specialStart_[uint8_t(text[0])] = true;
        if (spm && type == TokenType::UserDefined)
          t.maxPieceBytes_ = std::max(t.maxPieceBytes_, text.size());
        continue;
      }
      if (spm) {
        t.pieces_[id] = sentencePieceBytes(text, type);
        if (isMergeable(type))
          t.maxPieceBytes_ = std::max(t.maxPieceBytes_, text.size());
        continue;
      }
      // Byte-level text back to bytes; characters outside the byte map
      // (never produced by the encoder) are kept as their UTF-8.
      std::string &piece = t.pieces_[id];
      for (size_t pos = 0; pos < text.size();) {
        uint32_t cp;
        const size_t len = unicode::decodeUtf8(text, pos, cp);
        auto it = codepointToByte.find(cp);
        if (it != codepointToByte.end())
          piece += char(it->second);
        else
          piece.append(text, pos, len);
        pos += len;
      }
    }

    // Real vocabularies may lack some bytes (SmolLM2 has no token for 21 of
    // them); like tokenizers without an unk token, encoding drops those.
    for (uint32_t b = 0; b < 256; ++b) {
      std::string text;
      if (spm)
        text = byteTokenText(uint8_t(b));
      else
        unicode::appendUtf8(text, byteMap[b]);
      auto it = t.vocab_.find(text);
      t.byteTokens_[b] = it == t.vocab_.end() ? -1 : it->second;
    }
    if (spm) {
      t.scores_ = std::move(config.scores);
      t.addSpacePrefix_ = config.addSpacePrefix;
    }

    if (config.merges.size() > size_t(std::numeric_limits<int32_t>::max()))
      return Status::error("tokenizer: too many merges");
    t.merges_.reserve(config.merges.size());
    for (size_t rank = 0; rank < config.merges.size(); ++rank) {
      const std::string &merge = config.merges[rank];
      const std::string where =
          "tokenizer: merge #" + std::to_string(rank) + " " + quoted(merge);
      const size_t space = merge.size() > 1 ? merge.find(' ', 1)
                                            : std::string::npos;
      if (space == std::string::npos)
        return Status::error(where + " is not two tokens separated by a space");
      const std::string left = merge.substr(0, space);
      const std::string right = merge.substr(space + 1);
      auto l = t.vocab_.find(left), r = t.vocab_.find(right),
           m = t.vocab_.find(left + right);
      if (l == t.vocab_.end() || r == t.vocab_.end() || m == t.vocab_.end())
        return Status::error(
            where + ": " +
            quoted(l == t.vocab_.end()   ? left
                   : r == t.vocab_.end() ? right
                                         : left + right) +
            " is not in the vocabulary");
      const uint64_t key = (uint64_t(uint32_t(l->second)) << 32) |
                           uint32_t(r->second);
      // Later duplicates win, as in tokenizers (and GPT-2's bpe_ranks dict).
      t.merges_[key] = Merge{int32_t(rank), m->second};
    }

    const auto checkId = [&](int32_t id, const char *what) -> Status {
      if (id < -1 || id >= int32_t(n))
        return Status::error(std::string("tokenizer: ") + what + " id " +
                             std::to_string(id) + " is outside the " +
                             std::to_string(n) + "-token vocabulary");
      return Status::success();
    };
    CONDENSATE_RETURN_IF_ERROR(checkId(config.bosId, "BOS"));
    CONDENSATE_RETURN_IF_ERROR(checkId(config.eosId, "EOS"));
    CONDENSATE_RETURN_IF_ERROR(checkId(config.unkId, "UNK"));
    CONDENSATE_RETURN_IF_ERROR(checkId(config.padId, "PAD"));
    if (config.addBosToken && config.bosId < 0)
      return Status::error("tokenizer: add_bos_token is set but there is no "
                           "BOS token");
    if (config.addEosToken && config.eosId < 0)
      return Status::error("tokenizer: add_eos_token is set but there is no "
                           "EOS token");
    t.bosId_ = config.bosId;
    t.eosId_ = config.eosId;
    t.unkId_ = config.unkId;
    t.padId_ = config.padId;
    t.addBos_ = config.addBosToken;
    t.addEos_ = config.addEosToken;
    return t;
  } catch (const std::bad_alloc &) {
    return Status::error("tokenizer: out of memory");
  } catch (const std::length_error &) {
    return Status::error("tokenizer: out of memory");
  }
}

Result<Tokenizer> Tokenizer::fromGGUF(const GGUFFile &file) {
  const std::string where = file.name() + ": ";
  Result<std::string> model = file.getString("tokenizer.ggml.model");
  if (!model)
    return model.status();
  TokenizerConfig config;
  if (*model == "gpt2")
    config.model = TokenizerModel::ByteLevelBPE;
  else if (*model == "llama")
    config.model = TokenizerModel::SentencePiece;
  else
    return Status::error(where + "tokenizer.ggml.model is " + quoted(*model) +
                         ", expected 'gpt2' (byte-level BPE) or 'llama' "
                         "(SentencePiece)");

  Result<std::vector<std::string>> tokens =
      file.getStringArray("tokenizer.ggml.tokens");
  if (!tokens)
    return tokens.status();
  config.tokens = tokens.take();
  if (file.has("tokenizer.ggml.token_type")) {
    Result<std::vector<int32_t>> types =
        file.getI32Array("tokenizer.ggml.token_type");
    if (!types)
      return types.status();
    config.tokenTypes = types.take();
  }
  if (config.model == TokenizerModel::ByteLevelBPE) {
    Result<std::string> pre = file.getString("tokenizer.ggml.pre");
    if (!pre)
      return pre.status();
    config.preTokenizer = *pre;
    Result<std::vector<std::string>> merges =
        file.getStringArray("tokenizer.ggml.merges");
    if (!merges)
      return merges.status();
    config.merges = merges.take();
  } else {
    // llama.cpp's SPM reads no merges and ignores tokenizer.ggml.pre.
    Result<std::vector<float>> scores =
        file.getF32Array("tokenizer.ggml.scores");
    if (!scores)
      return scores.status();
    if (scores->size() != config.tokens.size())
      return Status::error(where + "key 'tokenizer.ggml.scores' has " +
                           std::to_string(scores->size()) + " values for " +
                           std::to_string(config.tokens.size()) + " tokens");
    config.scores = scores.take();
  }

  // Optional ids; -1 (or 0xFFFFFFFF as uint32) means "none".
  const auto readId = [&](const char *key, int32_t &out) -> Status {
    if (!file.has(key))
      return Status::success();
    Result<int64_t> id = file.getI64(key);
    if (!id)
      return id.status();
    if (*id == -1 || *id == 0xFFFFFFFFll)
      return Status::success();
    if (*id < 0 || *id >= int64_t(config.tokens.size()))
      return Status::error(where + "key " + quoted(key) + " is " +
                           std::to_string(*id) + ", outside the " +
                           std::to_string(config.tokens.size()) +
                           "-token vocabulary");
    out = int32_t(*id);
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(readId("tokenizer.ggml.bos_token_id", config.bosId));
  CONDENSATE_RETURN_IF_ERROR(readId("tokenizer.ggml.eos_token_id", config.eosId));
  CONDENSATE_RETURN_IF_ERROR(
      readId("tokenizer.ggml.unknown_token_id", config.unkId));
  CONDENSATE_RETURN_IF_ERROR(
      readId("tokenizer.ggml.padding_token_id", config.padId));
  const auto readFlag = [&](const char *key, bool &out) -> Status {
    if (!file.has(key))
      return Status::success();
    Result<bool> flag = file.getBool(key);
    if (!flag)
      return flag.status();
    out = *flag;
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(
      readFlag("tokenizer.ggml.add_bos_token", config.addBosToken));
  CONDENSATE_RETURN_IF_ERROR(
      readFlag("tokenizer.ggml.add_eos_token", config.addEosToken));
  CONDENSATE_RETURN_IF_ERROR(
      readFlag("tokenizer.ggml.add_space_prefix", config.addSpacePrefix));

  Result<Tokenizer> tokenizer = create(std::move(config));
  if (!tokenizer)
    return tokenizer.status().withContext(file.name());
  return tokenizer;
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

std::vector<std::string_view>
Tokenizer::preTokenize(std::string_view text) const {
  if (model_ == TokenizerModel::SentencePiece)
    return text.empty() ? std::vector<std::string_view>()
                        : std::vector<std::string_view>{text};
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const size_t len = unicode::decodeUtf8(text, pos, cp);
    chars.push_back(Char{uint32_t(pos), cp, unicode::classify(cp)});
    pos += len;
  }
  std::vector<std::string_view> pieces;
  const auto offsetOf = [&](size_t k) {
    return k < chars.size() ? size_t(chars[k].offset) : text.size();
  };
  const auto emit = [&](size_t from, size_t to) {
    pieces.push_back(text.substr(offsetOf(from), offsetOf(to) - offsetOf(from)));
  };
  // Regex pieces of chars[from, to), where the regex sees `to` as the end.
  const auto split = [&](size_t from, size_t to) {
    for (size_t i = from; i < to;) {
      const size_t length = llama3Regex_
                                ? matchLlama3(chars, i, to, maxDigits_)
                                : matchGpt2(chars, i, to);
      emit(i, i + length);
      i += length;
    }
  };
  size_t segment = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    if (splitDigits_ && chars[i].cls == CharClass::Number) {
      split(segment, i);
      emit(i, i + 1);
      segment = i + 1;
    }
  }
  split(segment, chars.size());
  return pieces;
}

void Tokenizer::encodeWord(std::string_view word,
                           std::vector<int32_t> &out) const {
  if (word.size() == 1) {
    if (int32_t id = byteTokens_[uint8_t(word[0])]; id >= 0)
      out.push_back(id);
    return;
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t leftId;
    int32_t rightId;
    // Min-heap on (rank, left position), as tokenizers does.
    bool operator<(const Candidate &o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  // Bytes without a token are dropped before merging, so their neighbours
  // become adjacent (tokenizers' BPE without unk token does the same).
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (char c : word)
    if (int32_t id = byteTokens_[uint8_t(c)]; id >= 0)
      symbols.push_back(Symbol{id, int32_t(symbols.size()) - 1, -1});
  if (symbols.empty())
    return;
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    symbols[i].next = int32_t(i + 1);
  std::priority_queue<Candidate> queue;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0)
      return;
    const Symbol &l = symbols[left], &r = symbols[l.next];
    auto it = merges_.find((uint64_t(uint32_t(l.id)) << 32) | uint32_t(r.id));
    if (it != merges_.end())
      queue.push(Candidate{it->second.rank, left, l.id, r.id});
  };
  for (int32_t i = 0; i + 1 < int32_t(symbols.size()); ++i)
    consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol &l = symbols[c.left];
    // Skip candidates made stale by an earlier merge.
    if (l.id != c.leftId || l.next < 0 || symbols[l.next].id != c.rightId)
      continue;
    const int32_t right = l.next;
    l.id = merges_.at((uint64_t(uint32_t(c.leftId)) << 32) |
                      uint32_t(c.rightId))
               .result;
    l.next = symbols[right].next;
    if (l.next >= 0)
      symbols[l.next].prev = c.left;
    symbols[right].id = -1; // Dead: can never match a candidate again.
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    out.push_back(symbols[i].id);
}

void Tokenizer::encodePlain(std::string_view text,
                            std::vector<int32_t> &out) const {
  // Words repeat a lot in real text; remember their ids for this call.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;
  std::vector<int32_t> scratch;
  for (std::string_view word : preTokenize(text)) {
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), scratch.begin() + it->second.first,
                 scratch.begin() + it->second.second);
      continue;
    }
    const size_t begin = scratch.size();
    encodeWord(word, scratch);
    cache.emplace(word, std::make_pair(begin, scratch.size()));
    out.insert(out.end(), scratch.begin() + begin, scratch.end());
  }
}

void Tokenizer::encodeSentencePiece(std::string_view text,
                                    std::vector<int32_t> &out) const {
  if (text.empty())
    return;
  std::string escaped;
  escaped.reserve(text.size() + kSpaceSymbol.size());
  if (addSpacePrefix_)
    escaped += kSpaceSymbol;
  for (char c : text) {
    if (c == ' ')
      escaped += kSpaceSymbol;
    else
      escaped += c;
  }
  // Symbol indices are int32: a (never seen) fragment of 1 GiB or more is
  // encoded in parts cut between characters, with no merge across a cut.
  constexpr size_t kMaxPart = size_t(1) << 30;
  std::string_view rest = escaped;
  while (rest.size() > kMaxPart) {
    size_t cut = kMaxPart;
    while (cut > kMaxPart - 4 && (uint8_t(rest[cut]) & 0xC0) == 0x80)
      --cut;
    encodeSentencePiecePart(rest.substr(0, cut), out);
    rest.remove_prefix(cut);
  }
  encodeSentencePiecePart(rest, out);
}

void Tokenizer::encodeSentencePiecePart(std::string_view text,
                                        std::vector<int32_t> &out) const {
  // Live symbols form a linked list over `symbols`; a merge grows the left
  // one and empties the right. Every symbol records the node of the merge
  // tree it is, so that an Unused token can be split back.
  struct Symbol {
    uint32_t start;
    uint32_t size; // 0 once merged into its left neighbour.
    int32_t prev;
    int32_t next;
    int32_t node;
  };
  struct Node {
    uint32_t start;
    uint32_t size;
    int32_t left; // Children, -1 for a single character.
    int32_t right;
  };
  struct Candidate {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;
    // Max-heap on score, then the leftmost pair (SentencePiece's
    // SymbolPairComparator and llama.cpp's llm_bigram_spm::comparator).
    bool operator<(const Candidate &o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Symbol> symbols;
  std::vector<Node> nodes;
  symbols.reserve(text.size());
  nodes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const size_t len = unicode::decodeUtf8(text, pos, cp);
    const int32_t index = int32_t(symbols.size());
    symbols.push_back(Symbol{uint32_t(pos), uint32_t(len), index - 1,
                             pos + len < text.size() ? index + 1 : -1, index});
    nodes.push_back(Node{uint32_t(pos), uint32_t(len), -1, -1});
    pos += len;
  }

  std::string key; // Reused: candidate texts are looked up by value.
  const auto lookup = [&](uint32_t start, uint32_t size) {
    key.assign(text.data() + start, size);
    auto it = vocab_.find(key);
    return it == vocab_.end() ? -1 : it->second;
  };
  std::priority_queue<Candidate> queue;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[size_t(left)].next < 0)
      return;
    const Symbol &l = symbols[size_t(left)];
    const uint32_t size = l.size + symbols[size_t(l.next)].size;
    if (size > maxPieceBytes_)
      return;
    const int32_t id = lookup(l.start, size);
    if (id >= 0 && isMergeable(types_[size_t(id)]))
      queue.push(Candidate{scores_[size_t(id)], left, l.next, size});
  };
  for (int32_t i = 0; i + 1 < int32_t(symbols.size()); ++i)
    consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol &l = symbols[size_t(c.left)];
    // Skip candidates made stale by an earlier merge.
    if (l.size == 0 || l.next != c.right ||
        l.size + symbols[size_t(c.right)].size != c.size)
      continue;
    Symbol &r = symbols[size_t(c.right)];
    nodes.push_back(Node{l.start, c.size, l.node, r.node});
    l.node = int32_t(nodes.size()) - 1;
    l.size = c.size;
    l.next = r.next;
    if (r.next >= 0)
      symbols[size_t(r.next)].prev = c.left;
    r.size = 0;
    consider(l.prev);
    consider(c.left);
  }

  std::vector<int32_t> pending;
  for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) {
    pending.push_back(symbols[size_t(i)].node);
    while (!pending.empty()) {
      const Node node = nodes[size_t(pending.back())];
      pending.pop_back();
      const int32_t id = lookup(node.start, node.size);
      if (id >= 0 &&
          (types_[size_t(id)] != TokenType::Unused || node.left < 0)) {
        out.push_back(id);
      } else if (node.left >= 0) {
        pending.push_back(node.right);
        pending.push_back(node.left);
      } else {
        // Byte fallback; a byte without a token is unk, or dropped.
        for (uint32_t k = 0; k < node.size; ++k) {
          int32_t byte = byteTokens_[uint8_t(text[node.start + k])];
          if (byte < 0)
            byte = unkId_;
          if (byte >= 0)
            out.push_back(byte);
        }
      }
    }
  }
}

int32_t Tokenizer::matchSpecial(std::string_view text, size_t pos,
                                bool parseSpecial) const {
  if (!specialStart_[uint8_t(text[pos])])
    return -1;
  int32_t node = 0, matched = -1;
  for (size_t k = pos; k < text.size(); ++k) {
    auto it = specialEdges_.find((uint64_t(node) << 8) | uint8_t(text[k]));
    if (it == specialEdges_.end())
      break;
    node = it->second;
    if (int32_t id = specialIds_[size_t(node)][parseSpecial ? 0 : 1]; id >= 0)
      matched = id;
  }
  return matched;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text,
                                       bool parseSpecial,
                                       bool addSpecial) const {
  std::vector<int32_t> out;
  if (addSpecial && addBos_)
    out.push_back(bosId_);
  const auto plain = [&](std::string_view fragment) {
    if (model_ == TokenizerModel::SentencePiece)
      encodeSentencePiece(fragment, out);
    else
      encodePlain(fragment, out);
  };
  // Cut out special-token texts: leftmost match, longest at that position.
  size_t plainStart = 0;
  for (size_t pos = 0; pos < text.size();) {
    const int32_t matched = matchSpecial(text, pos, parseSpecial);
    if (matched < 0) {
      ++pos;
      continue;
    }
    plain(text.substr(plainStart, pos - plainStart));
    out.push_back(matched);
    pos += tokens_[size_t(matched)].size();
    plainStart = pos;
  }
  plain(text.substr(plainStart));
  if (addSpecial && addEos_)
    out.push_back(eosId_);
  return out;
}

//===----------------------------------------------------------------------===//
// Decoding and lookup
//===----------------------------------------------------------------------===//

std::string Tokenizer::tokenToPiece(int32_t id, bool renderSpecial) const {
  if (id < 0 || id >= vocabSize())
    return std::string();
  if (!renderSpecial && types_[id] == TokenType::Control)
    return std::string();
  return pieces_[id];
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids,
                              bool renderSpecial) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocabSize())
      continue;
    if (!renderSpecial && types_[id] == TokenType::Control)
      continue;
    out += pieces_[id];
  }
  return out;
}

const std::string &Tokenizer::tokenText(int32_t id) const {
  static const std::string empty;
  return id >= 0 && id < vocabSize() ? tokens_[id] : empty;
}

TokenType Tokenizer::tokenType(int32_t id) const {
  return id >= 0 && id < vocabSize() ? types_[id] : TokenType::Undefined;
}

int32_t Tokenizer::byteToken(uint8_t byte) const { return byteTokens_[byte]; }

int32_t Tokenizer::findToken(std::string_view text) const {
  auto it = vocab_.find(std::string(text));
  return it == vocab_.end() ? -1 : it->second;
}

} // namespace condensate::model

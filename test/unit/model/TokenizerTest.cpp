//===- TokenizerTest.cpp - Byte-level and SentencePiece BPE tokenizers ----===//

#include "ModelTestSupport.h"

#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include <time.h>

using namespace condensate;
using namespace condensate::model;
using namespace condensate::model::testsupport;

namespace {

std::string utf8(uint32_t cp) {
  std::string out;
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
  return out;
}

/// GPT-2's byte-to-unicode table, written out independently of the library.
std::string byteLevel(uint8_t byte) {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256, 0);
    std::vector<bool> printable(256, false);
    for (int b = '!'; b <= '~'; ++b)
      printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b)
      printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b)
      printable[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b)
      t[b] = printable[b] ? uint32_t(b) : next++;
    return t;
  }();
  return utf8(table[byte]);
}

std::string byteLevel(std::string_view text) {
  std::string out;
  for (char c : text)
    out += byteLevel(uint8_t(c));
  return out;
}

/// A small vocabulary: three control tokens, the 256 byte tokens, and a few
/// merges (given in plain text, converted to byte-level form).
TokenizerConfig smallConfig(
    const std::vector<std::pair<std::string, std::string>> &merges = {
        {" ", "t"}, {"h", "e"}, {" t", "he"}, {"t", "he"}, {"i", "n"},
        {" ", "c"}, {"a", "t"}, {" c", "at"}, {" ", " "}, {"1", "2"},
        {"'", "s"}}) {
  TokenizerConfig c;
  c.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  c.tokenTypes = {3, 3, 3};
  for (int b = 0; b < 256; ++b) {
    c.tokens.push_back(byteLevel(uint8_t(b)));
    c.tokenTypes.push_back(1);
  }
  for (const auto &[l, r] : merges) {
    c.merges.push_back(byteLevel(l) + " " + byteLevel(r));
    c.tokens.push_back(byteLevel(l + r));
    c.tokenTypes.push_back(1);
  }
  c.bosId = 1;
  c.eosId = 2;
  c.unkId = 0;
  c.padId = 2;
  return c;
}

Tokenizer smallTokenizer() {
  Result<Tokenizer> t = Tokenizer::create(smallConfig());
  EXPECT_TRUE(t.ok()) << t.message();
  return t.take();
}

std::vector<std::string> texts(const std::vector<int32_t> &ids,
                               const Tokenizer &t) {
  std::vector<std::string> out;
  for (int32_t id : ids)
    out.push_back(t.tokenToPiece(id));
  return out;
}

/// ChatML's special-token texts (SmolLM2, Qwen2.5) and near misses.
const std::vector<std::string> &chatMlSpecials() {
  static const std::vector<std::string> specials = {
      "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "|>"};
  return specials;
}

/// Random valid UTF-8 mixing the character kinds the pre-tokenizer treats
/// differently: letters of many scripts, digits of many kinds, combining
/// marks, emoji, whitespace of every kind, punctuation, contractions and
/// code points from every plane; `withSpecials` mixes in `specials`.
std::string randomUtf8(std::mt19937 &rng, size_t maxUnits,
                       bool withSpecials = false,
                       const std::vector<std::string> &specials =
                           chatMlSpecials()) {
  static const std::vector<uint32_t> spaces = {
      ' ',    '\t',   '\n',   '\r',   0x0B,   0x0C,   0x85,   0xA0,
      0x1680, 0x2000, 0x2007, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
      0x3000, 0x1C,   0x1F,   0x200B, 0xFEFF};
  static const std::vector<uint32_t> digits = {
      '0',    '5',    '9',    0xB2,   0xB9,   0xBD,   0x660,  0x669,
      0x966,  0xFF10, 0xFF19, 0x2155, 0x2160, 0x3007, 0x1D7CE, 0x10107};
  static const std::vector<std::string> pieces = {
      "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "''", "  ",
      "\n\n", " \n", "...", "!?", "http://x.y/z?q=1", "e\xCC\x81", "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9"};
  std::string out;
  const size_t units = rng() % (maxUnits + 1);
  for (size_t u = 0; u < units; ++u) {
    uint32_t cp;
    switch (rng() % 16) {
    case 0: case 1: case 2: case 3:
      cp = 0x20 + rng() % 95; // Printable ASCII.
      break;
    case 4:
      cp = spaces[rng() % spaces.size()];
      break;
    case 5:
      cp = digits[rng() % digits.size()];
      break;
    case 6:
      cp = 0xA0 + rng() % (0x250 - 0xA0); // Latin-1 and Latin extended.
      break;
    case 7:
      cp = 0x300 + rng() % 0x70; // Combining marks.
      break;
    case 8:
      cp = (rng() % 2 ? 0x4E00 + rng() % 0x5200 : 0xAC00 + rng() % 0x2BA4);
      break;
    case 9:
      cp = 0x1F300 + rng() % 0x800; // Emoji and symbols.
      break;
    case 10:
      cp = 0x370 + rng() % 0x500; // Greek, Cyrillic, Armenian, Hebrew, Arabic.
      break;
    case 11: {
      // Any plane. Skip surrogates, and U+11DE0..11DE9 / U+16FF4..16FF6:
      // numbers only since Unicode 17, which tokenizers' Digits (Rust std)
      // knows but its regex (and our Unicode 16 tables) do not.
      do {
        cp = 0x80 + rng() % (0x110000 - 0x80);
      } while ((cp >= 0xD800 && cp <= 0xDFFF) ||
               (cp >= 0x11DE0 && cp <= 0x11DE9) ||
               (cp >= 0x16FF4 && cp <= 0x16FF6));
      break;
    }
    case 12:
    case 13:
      out += pieces[rng() % pieces.size()];
      continue;
    case 14:
      if (rng() % 4 == 0) {
        cp = rng() % 2 ? rng() % 0x20 : 0x7F; // C0 controls and DEL.
        break;
      }
      if (withSpecials) {
        out += specials[rng() % specials.size()];
        continue;
      }
      cp = 'a' + rng() % 26;
      break;
    default:
      cp = 'a' + rng() % 26;
      break;
    }
    out += utf8(cp);
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Pre-tokenisation (expected splits checked against tokenizers' Sequence[
// Digits(individual_digits=True), ByteLevel(use_regex=True)])
//===----------------------------------------------------------------------===//

TEST(TokenizerPreTokenize, GPT2RegexWithDigitSplit) {
  const Tokenizer t = smallTokenizer();
  using V = std::vector<std::string_view>;
  const std::vector<std::pair<std::string, V>> cases = {
      {"Hello world", {"Hello", " world"}},
      {"I'm 12 years old's", {"I", "'m", " ", "1", "2", " years", " old", "'s"}},
      {"a  b", {"a", " ", " b"}},
      {"a \n\nb", {"a", " \n", "\n", "b"}},
      {"x   ", {"x", "   "}},
      {"   ", {"   "}},
      {"   x", {"  ", " x"}},
      {"hello!!! ??", {"hello", "!!!", " ??"}},
      {"x\xC2\xB2\xC2\xB3", {"x", "\xC2\xB2", "\xC2\xB3"}},
      {"na\xC3\xAFve caf\xC3\xA9", {"na\xC3\xAFve", " caf\xC3\xA9"}},
      {"e\xCC\x81", {"e", "\xCC\x81"}},
      {"don't 'S", {"don", "'t", " '", "S"}},
      {"''s", {"''", "s"}},
      {"'ll'LL", {"'ll", "'", "LL"}},
      {"\t\tfoo", {"\t", "\t", "foo"}},
      {"a\xC2\xA0" "b", {"a", "\xC2\xA0", "b"}},
      {"a\x1C" "b", {"a", "\x1C", "b"}},
      {"a 1", {"a", " ", "1"}},
      {"x  1", {"x", "  ", "1"}},
      {"\n\n\n", {"\n\n\n"}},
      {"$12.5%", {"$", "1", "2", ".", "5", "%"}},
      {"\xFF\xFE" "ab \xC3", {"\xFF\xFE", "ab", " \xC3"}},
      {"", {}},
  };
  for (const auto &[text, expected] : cases)
    EXPECT_EQ(t.preTokenize(text), expected) << "text: " << text;
}

// Llama 3's regex (llama.cpp's LLAMA3; QWEN2 with single digits), case by
// case: each alternative, and where it differs from GPT-2's.
TEST(TokenizerPreTokenize, Qwen2AndLlama3Regex) {
  using V = std::vector<std::string_view>;
  for (const char *pre : {"qwen2", "llama-bpe"}) {
    SCOPED_TRACE(pre);
    TokenizerConfig c = smallConfig();
    c.preTokenizer = pre;
    Result<Tokenizer> t = Tokenizer::create(c);
    ASSERT_TRUE(t.ok()) << t.message();
    const bool qwen = std::string(pre) == "qwen2";
    const std::vector<std::pair<std::string, V>> cases = {
        {"Hello world", {"Hello", " world"}},
        // Contractions are case-insensitive.
        {"I'M HE'LL we'Re", {"I", "'M", " HE", "'LL", " we", "'Re"}},
        // A word takes one leading non-letter, non-digit, non-newline
        // (one only: " \tx" is a space, then "\tx").
        {"(hello) \tx .y", {"(hello", ")", " ", "\tx", " .", "y"}},
        {"\nword", {"\n", "word"}},
        // Punctuation takes an optional space and the line breaks after it.
        {"a !!\n\nb", {"a", " !!\n\n", "b"}},
        // Whitespace: up to its last line break, else less its last space
        // before a non-space.
        {"a \n \n  b", {"a", " \n \n", " ", " b"}},
        {"x   ", {"x", "   "}},
        {"a 1", {"a", " ", "1"}},
        {"na\xC3\xAFve caf\xC3\xA9", {"na\xC3\xAFve", " caf\xC3\xA9"}},
        {"", {}},
    };
    for (const auto &[text, expected] : cases)
      EXPECT_EQ(t->preTokenize(text), expected) << "text: " << text;
    const V digits = qwen ? V{"1", "2", "3", "4", "5"} : V{"123", "45"};
    EXPECT_EQ(t->preTokenize("12345"), digits);
  }
}

TEST(TokenizerPreTokenize, GPT2ModeKeepsDigitRuns) {
  TokenizerConfig c = smallConfig();
  c.preTokenizer = "gpt-2";
  Result<Tokenizer> t = Tokenizer::create(c);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->preTokenize("I have 123 apples"),
            (std::vector<std::string_view>{"I", " have", " 123", " apples"}));
}

//===----------------------------------------------------------------------===//
// BPE
//===----------------------------------------------------------------------===//

TEST(TokenizerBPE, MergesByRank) {
  const Tokenizer t = smallTokenizer();
  EXPECT_EQ(texts(t.encode("the cat"), t),
            (std::vector<std::string>{"the", " cat"}));
  EXPECT_EQ(texts(t.encode("  the"), t), (std::vector<std::string>{" ", " the"}));
  // Digits are split before BPE, so the "1 2" merge never applies.
  EXPECT_EQ(texts(t.encode("12's"), t), (std::vector<std::string>{"1", "2", "'s"}));

  // Rank, not position, decides: "b c" (rank 0) beats "a b" (rank 1).
  Result<Tokenizer> r = Tokenizer::create(smallConfig({{"b", "c"}, {"a", "b"}}));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(texts(r->encode("abc"), *r), (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(texts(r->encode("abab"), *r), (std::vector<std::string>{"ab", "ab"}));
  Result<Tokenizer> l = Tokenizer::create(smallConfig({{"a", "b"}, {"b", "c"}}));
  ASSERT_TRUE(l.ok()) << l.message();
  EXPECT_EQ(texts(l->encode("abc"), *l), (std::vector<std::string>{"ab", "c"}));
  // Equal pairs merge left to right.
  Result<Tokenizer> a = Tokenizer::create(smallConfig({{"a", "a"}}));
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(texts(a->encode("aaaaa"), *a),
            (std::vector<std::string>{"aa", "aa", "a"}));
}

TEST(TokenizerBPE, EveryByteHasAToken) {
  const Tokenizer t = smallTokenizer();
  for (int b = 0; b < 256; ++b) {
    const std::string s(1, char(b));
    const std::vector<int32_t> ids = t.encode(s);
    ASSERT_EQ(ids.size(), 1u) << b;
    EXPECT_EQ(t.tokenText(ids[0]), byteLevel(uint8_t(b)));
    EXPECT_EQ(t.decode(ids), s);
  }
}

TEST(TokenizerBPE, BytesWithoutTokensAreDropped) {
  // As in tokenizers' BPE without unk token: the byte vanishes before the
  // merges, so its neighbours can merge.
  TokenizerConfig c = smallConfig({{"?", "?"}});
  c.tokens[3 + '!'] = "<no bang>";
  Result<Tokenizer> t = Tokenizer::create(c);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->byteToken('!'), -1);
  EXPECT_EQ(t->byteToken('?'), 3 + '?');
  EXPECT_EQ(texts(t->encode("?!?"), *t), (std::vector<std::string>{"??"}));
  EXPECT_TRUE(t->encode("!").empty());
  EXPECT_TRUE(t->encode("!!!").empty());
  EXPECT_EQ(t->decode(t->encode("a!b! c")), "ab c");
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(TokenizerRoundTrip, RandomUtf8) {
  const Tokenizer t = smallTokenizer();
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    const std::string s = randomUtf8(rng, 80, /*withSpecials=*/i % 2);
    for (bool parseSpecial : {false, true}) {
      const std::vector<int32_t> ids = t.encode(s, parseSpecial);
      ASSERT_EQ(t.decode(ids), s) << "parseSpecial " << parseSpecial;
      std::string pieces;
      for (int32_t id : ids)
        pieces += t.tokenToPiece(id);
      ASSERT_EQ(pieces, s);
    }
  }
}

TEST(TokenizerRoundTrip, InvalidUtf8AndEmpty) {
  const Tokenizer t = smallTokenizer();
  EXPECT_TRUE(t.encode("").empty());
  EXPECT_EQ(t.decode({}), "");
  const std::vector<std::string> samples = {
      "\xFF", "\xC3", "a\xC3", "\xED\xA0\x80", "\xC0\xAF", "\xE0\x80\xAF",
      "\xF4\x90\x80\x80", "\xF0\x9F\x98", "\x80\x80 x", "\xF8\x88\x80\x80\x80",
      std::string("\0a\0", 3)};
  for (const std::string &s : samples)
    EXPECT_EQ(t.decode(t.encode(s)), s);
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char &c : s)
      c = char(rng());
    ASSERT_EQ(t.decode(t.encode(s, true)), s);
  }
}

//===----------------------------------------------------------------------===//
// Special tokens
//===----------------------------------------------------------------------===//

TEST(TokenizerSpecial, ControlTokensOnlyWhenParsing) {
  const Tokenizer t = smallTokenizer();
  const std::string chat = "<|im_start|>user\nthe cat<|im_end|>\n<|endoftext|>";
  const std::vector<int32_t> ids = t.encode(chat, /*parseSpecial=*/true);
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 0);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 2), ids.end());
  EXPECT_EQ(t.decode(ids), chat);
  EXPECT_EQ(t.decode(ids, /*renderSpecial=*/false), "user\nthe cat\n");

  const std::vector<int32_t> plain = t.encode(chat, /*parseSpecial=*/false);
  for (int32_t id : plain)
    EXPECT_GT(id, 2);
  EXPECT_EQ(t.decode(plain), chat);
  EXPECT_EQ(t.tokenType(1), TokenType::Control);
  EXPECT_EQ(t.findToken("<|im_end|>"), 2);
}

TEST(TokenizerSpecial, LeftmostLongestAndUserDefined) {
  TokenizerConfig c = smallConfig();
  c.tokens.push_back("<a>");
  c.tokenTypes.push_back(3);
  c.tokens.push_back("<a>b");
  c.tokenTypes.push_back(3);
  c.tokens.push_back("[USR]");
  c.tokenTypes.push_back(4);
  const int32_t a = int32_t(c.tokens.size()) - 3, ab = a + 1, usr = a + 2;
  Result<Tokenizer> t = Tokenizer::create(c);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->encode("<a>b<a>", true), (std::vector<int32_t>{ab, a}));
  // User-defined tokens are recognised even without parseSpecial.
  const std::vector<int32_t> ids = t->encode("x[USR]y", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], usr);
  EXPECT_EQ(t->decode(ids, /*renderSpecial=*/false), "x[USR]y");
}

TEST(TokenizerSpecial, AddSpecialAndBadIds) {
  TokenizerConfig c = smallConfig();
  c.addBosToken = true;
  Result<Tokenizer> t = Tokenizer::create(c);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->encode("", false, /*addSpecial=*/true), std::vector<int32_t>{1});
  EXPECT_TRUE(t->encode("", false, /*addSpecial=*/false).empty());
  EXPECT_EQ(t->decode({-5, 100000, 1}), "<|im_start|>");
  EXPECT_EQ(t->tokenToPiece(-1), "");
  EXPECT_EQ(t->tokenText(1 << 30), "");
}

//===----------------------------------------------------------------------===//
// Construction errors
//===----------------------------------------------------------------------===//

TEST(TokenizerErrors, InvalidConfigurations) {
  TokenizerConfig c = smallConfig();
  c.merges.push_back("x zz");
  Result<Tokenizer> t = Tokenizer::create(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.message(),
            "tokenizer: merge #11 'x zz': 'zz' is not in the vocabulary");

  c = smallConfig();
  c.merges.push_back("xyz");
  EXPECT_NE(Tokenizer::create(c).message().find("is not two tokens"),
            std::string::npos);

  c = smallConfig();
  c.preTokenizer = "deepseek-llm";
  EXPECT_EQ(Tokenizer::create(c).message(),
            "tokenizer: unsupported pre-tokenizer 'deepseek-llm', expected "
            "'smollm', 'gpt-2', 'qwen2' or 'llama-bpe'");

  c = smallConfig();
  c.eosId = 1 << 20;
  EXPECT_NE(Tokenizer::create(c).message().find("EOS id 1048576 is outside"),
            std::string::npos);

  c = smallConfig();
  c.tokenTypes.pop_back();
  EXPECT_FALSE(Tokenizer::create(c).ok());
  EXPECT_FALSE(Tokenizer::create(TokenizerConfig()).ok());
}

TEST(TokenizerErrors, FromGGUFNamesTheKey) {
  GGUFBuilder b;
  b.addString("tokenizer.ggml.model", "bert");
  Result<GGUFFile> f = GGUFFile::fromBuffer(b.build(), "tok.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(Tokenizer::fromGGUF(*f).message(),
            "tok.gguf: tokenizer.ggml.model is 'bert', expected 'gpt2' "
            "(byte-level BPE) or 'llama' (SentencePiece)");

  const TokenizerConfig c = smallConfig();
  GGUFBuilder g;
  g.addString("tokenizer.ggml.model", "gpt2")
      .addString("tokenizer.ggml.pre", "smollm")
      .addStringArray("tokenizer.ggml.tokens", c.tokens)
      .addArray<int32_t>("tokenizer.ggml.token_type", ValueType::Int32,
                         c.tokenTypes)
      .addStringArray("tokenizer.ggml.merges", c.merges)
      .addU32("tokenizer.ggml.bos_token_id", 1)
      .addU32("tokenizer.ggml.eos_token_id", 2)
      .addBool("tokenizer.ggml.add_bos_token", true);
  f = GGUFFile::fromBuffer(g.build(), "tok.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::fromGGUF(*f);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->vocabSize(), int32_t(c.tokens.size()));
  EXPECT_TRUE(t->addBosToken());
  EXPECT_EQ(t->encode("the", false, true).front(), 1);

  g.addU32("tokenizer.ggml.unknown_token_id", 999999);
  f = GGUFFile::fromBuffer(g.build(), "tok.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(Tokenizer::fromGGUF(*f).message(),
            "tok.gguf: key 'tokenizer.ggml.unknown_token_id' is 999999, "
            "outside the " + std::to_string(c.tokens.size()) +
                "-token vocabulary");
}

//===----------------------------------------------------------------------===//
// SentencePiece BPE (tokenizer.ggml.model "llama")
//===----------------------------------------------------------------------===//

namespace {

const std::string kSpm = "\xE2\x96\x81"; // U+2581, SentencePiece's space.

/// A small SentencePiece vocabulary laid out like Gemma 3's: control tokens,
/// <unk>, user-defined runs of spaces and newlines and an HTML tag, the 256
/// byte tokens, then scored pieces ("_" stands for "▁").
struct SpmVocab {
  TokenizerConfig config;
  int32_t pad = 0, eos = 1, bos = 2, unk = 3, startTurn = 4, endTurn = 5;
  int32_t nl = 6, nl2 = 7, sp2 = 8, sp3 = 9, table = 10;
  int32_t byte0 = 11; // <0x00>; byte b is byte0 + b.

  SpmVocab() {
    auto add = [&](std::string text, TokenType type, float score) {
      config.tokens.push_back(std::move(text));
      config.tokenTypes.push_back(int32_t(type));
      config.scores.push_back(score);
    };
    config.model = TokenizerModel::SentencePiece;
    add("<pad>", TokenType::Control, -1000);
    add("<eos>", TokenType::Control, -1000);
    add("<bos>", TokenType::Control, -1000);
    add("<unk>", TokenType::Unknown, -1000);
    add("<start_of_turn>", TokenType::Control, -1000);
    add("<end_of_turn>", TokenType::Control, -1000);
    add("\n", TokenType::UserDefined, -1000);
    add("\n\n", TokenType::UserDefined, -1000);
    add("  ", TokenType::UserDefined, -1000);
    add("   ", TokenType::UserDefined, -1000);
    add("<table>", TokenType::UserDefined, -1000);
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
      add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">",
          TokenType::Byte, 0);
    // Single characters, then merged pieces. Scores are what decides.
    for (const char *c : {"_", "a", "b", "c", "d", "e", "h", "o", "s", "t",
                          "u", "r", "<", ">", "x", "y"})
      add(spm(c), TokenType::Normal, -100);
    for (const auto &[text, score] : std::vector<std::pair<std::string, float>>{
             {"ab", -5}, {"bc", -1},          // "abc": best score, not left.
             {"xy", -3}, {"yx", -3},          // Equal scores: leftmost.
             {"_t", -2}, {"he", -1}, {"_the", -3}, {"_a", -4},
             {"aa", -6}, {"aaaa", -7},
             {"<b", -8}, {"os", -8}, {"os>", -9}}) // Never <bos> (control).
      add(spm(text), TokenType::Normal, score);
    config.bosId = bos;
    config.eosId = eos;
    config.unkId = unk;
    config.padId = pad;
    config.addBosToken = true;
    config.addSpacePrefix = false;
  }
  /// "_" -> "▁".
  static std::string spm(std::string_view text) {
    std::string out;
    for (char c : text)
      out += c == '_' ? kSpm : std::string(1, c);
    return out;
  }
  Tokenizer make() const {
    Result<Tokenizer> t = Tokenizer::create(config);
    EXPECT_TRUE(t.ok()) << t.message();
    return t.take();
  }
};

/// Stored token texts with "▁" shown as "_" (byte tokens as <0xXX>).
std::vector<std::string> spmTexts(const std::vector<int32_t> &ids,
                                  const Tokenizer &t) {
  std::vector<std::string> out;
  for (int32_t id : ids) {
    std::string text = t.tokenText(id);
    for (size_t pos; (pos = text.find(kSpm)) != std::string::npos;)
      text.replace(pos, kSpm.size(), "_");
    out.push_back(text);
  }
  return out;
}

using Texts = std::vector<std::string>;

} // namespace

TEST(TokenizerSentencePiece, MergesByScoreNotPosition) {
  const SpmVocab v;
  const Tokenizer t = v.make();
  EXPECT_EQ(t.model(), TokenizerModel::SentencePiece);
  // "bc" (-1) beats "ab" (-5) although "ab" is leftmost: greedy left to
  // right would give "ab c".
  EXPECT_EQ(spmTexts(t.encode("abc"), t), (Texts{"a", "bc"}));
  EXPECT_EQ(spmTexts(t.encode("abcabc"), t), (Texts{"a", "bc", "a", "bc"}));
  // Swap the scores and "ab" wins.
  SpmVocab swapped;
  swapped.config.scores[size_t(t.findToken("ab"))] = -1;
  swapped.config.scores[size_t(t.findToken("bc"))] = -5;
  const Tokenizer s = swapped.make();
  EXPECT_EQ(spmTexts(s.encode("abc"), s), (Texts{"ab", "c"}));
  // A lower-scored merge waits until no better one is left: "_t" (-2) and
  // "he" (-1) come first, then "_the" (-3), before "_a" (-4).
  EXPECT_EQ(spmTexts(t.encode(" the"), t), (Texts{"_the"}));
  EXPECT_EQ(spmTexts(t.encode(" thea"), t), (Texts{"_the", "a"}));
  EXPECT_EQ(spmTexts(t.encode(" a the"), t), (Texts{"_a", "_the"}));
  // Merged pieces merge again: "aa" twice, then "aaaa".
  EXPECT_EQ(spmTexts(t.encode("aaaaa"), t), (Texts{"aaaa", "a"}));
  EXPECT_EQ(t.preTokenize("a b"), (std::vector<std::string_view>{"a b"}));
  EXPECT_TRUE(t.preTokenize("").empty());
}

TEST(TokenizerSentencePiece, EqualScoresMergeLeftmostFirst) {
  const Tokenizer t = SpmVocab().make();
  // "xy" and "yx" score the same: in "xyx" the left pair merges.
  EXPECT_EQ(spmTexts(t.encode("xyx"), t), (Texts{"xy", "x"}));
  EXPECT_EQ(spmTexts(t.encode("yxy"), t), (Texts{"yx", "y"}));
  EXPECT_EQ(spmTexts(t.encode("xyxyx"), t), (Texts{"xy", "xy", "x"}));
  // "aa" pairs left to right, then the two "aa" into "aaaa".
  EXPECT_EQ(spmTexts(t.encode("aaa"), t), (Texts{"aa", "a"}));
  EXPECT_EQ(spmTexts(t.encode("aaaaaaa"), t), (Texts{"aaaa", "aa", "a"}));
}

TEST(TokenizerSentencePiece, ByteFallbackAndUnk) {
  SpmVocab v;
  const Tokenizer t = v.make();
  // "é" (C3 A9) and "z" have no token: their bytes' tokens.
  EXPECT_EQ(t.encode("a\xC3\xA9z"),
            (std::vector<int32_t>{t.findToken("a"), v.byte0 + 0xC3,
                                  v.byte0 + 0xA9, v.byte0 + 'z'}));
  EXPECT_EQ(t.byteToken(0xA9), v.byte0 + 0xA9);
  EXPECT_EQ(t.decode(t.encode("a\xC3\xA9z")), "a\xC3\xA9z");
  // Invalid UTF-8 bytes are characters of their own.
  EXPECT_EQ(t.encode("\xC3" "a"),
            (std::vector<int32_t>{v.byte0 + 0xC3, t.findToken("a")}));

  // Without the <0xA9> token that byte becomes <unk>...
  v.config.tokens[size_t(v.byte0 + 0xA9)] = "<not a byte>";
  Result<Tokenizer> u = Tokenizer::create(v.config);
  ASSERT_TRUE(u.ok()) << u.message();
  EXPECT_EQ(u->byteToken(0xA9), -1);
  EXPECT_EQ(u->encode("\xC3\xA9" "a"),
            (std::vector<int32_t>{v.byte0 + 0xC3, v.unk, u->findToken("a")}));
  // ... and without an unk token it is dropped.
  v.config.unkId = -1;
  u = Tokenizer::create(v.config);
  ASSERT_TRUE(u.ok()) << u.message();
  EXPECT_EQ(u->encode("\xC3\xA9" "a"),
            (std::vector<int32_t>{v.byte0 + 0xC3, u->findToken("a")}));
}

TEST(TokenizerSentencePiece, UnusedPiecesAreSplitBack) {
  // An Unused piece may be merged through but is never emitted: "ab" is
  // split back into "a" "b" unless it merges on into "abd".
  SpmVocab v;
  v.config.tokenTypes[size_t(v.make().findToken("ab"))] =
      int32_t(TokenType::Unused);
  v.config.tokens.push_back("abd");
  v.config.tokenTypes.push_back(int32_t(TokenType::Normal));
  v.config.scores.push_back(-5.5);
  const Tokenizer t = v.make();
  EXPECT_EQ(spmTexts(t.encode("ab"), t), (Texts{"a", "b"}));
  EXPECT_EQ(spmTexts(t.encode("abd"), t), (Texts{"abd"}));
}

TEST(TokenizerSentencePiece, UserDefinedRunsOfSpacesAndNewlines) {
  const SpmVocab v;
  const Tokenizer t = v.make();
  // Cut out before spaces become "▁", longest first, with or without
  // parseSpecial.
  for (bool parseSpecial : {false, true}) {
    EXPECT_EQ(t.encode("a  b", parseSpecial),
              (std::vector<int32_t>{t.findToken("a"), v.sp2,
                                    t.findToken("b")}));
    EXPECT_EQ(spmTexts(t.encode("a    b\n\n\nc", parseSpecial), t),
              (Texts{"a", "   ", "_", "b", "\n\n", "\n", "c"}));
  }
  EXPECT_EQ(spmTexts(t.encode(" x <table>"), t),
            (Texts{"_", "x", "_", "<table>"}));
  EXPECT_EQ(t.decode(t.encode("a    b\n\n\nc <table>")),
            "a    b\n\n\nc <table>");
  EXPECT_EQ(t.tokenToPiece(v.sp3), "   ");
  EXPECT_EQ(t.tokenToPiece(v.sp3, /*renderSpecial=*/false), "   ");
}

TEST(TokenizerSentencePiece, ControlTokensOnlyWhenParsing) {
  const SpmVocab v;
  const Tokenizer t = v.make();
  const std::string chat = "<start_of_turn>user\nthe<end_of_turn>\n";
  EXPECT_EQ(t.encode(chat, /*parseSpecial=*/true),
            (std::vector<int32_t>{v.startTurn, t.findToken("u"),
                                  t.findToken("s"), t.findToken("e"),
                                  t.findToken("r"), v.nl, t.findToken("t"),
                                  t.findToken("he"), v.endTurn, v.nl}));
  EXPECT_EQ(t.decode(t.encode(chat, true)), chat);
  EXPECT_EQ(t.decode(t.encode(chat, true), /*renderSpecial=*/false),
            "user\nthe\n");
  // As plain text the control texts are characters and bytes; "<b" "os>"
  // never become <bos>, which is a control token, not a merge result.
  const std::vector<int32_t> plain = t.encode(chat, /*parseSpecial=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), v.startTurn), 0);
  EXPECT_EQ(t.decode(plain), chat);
  EXPECT_EQ(spmTexts(t.encode("<bos>"), t), (Texts{"<b", "os>"}));
  EXPECT_EQ(t.encode("<bos>", true), (std::vector<int32_t>{v.bos}));
  // addSpecial: BOS as add_bos_token says.
  EXPECT_EQ(t.encode("", false, /*addSpecial=*/true),
            (std::vector<int32_t>{v.bos}));
  EXPECT_EQ(t.encode("ab", false, true).front(), v.bos);
  EXPECT_EQ(t.tokenToPiece(v.bos), "<bos>");
  EXPECT_EQ(t.tokenToPiece(v.bos, /*renderSpecial=*/false), "");
}

TEST(TokenizerSentencePiece, SpacePrefix) {
  SpmVocab v;
  const Tokenizer off = v.make();
  EXPECT_EQ(spmTexts(off.encode("the"), off), (Texts{"t", "he"}));
  EXPECT_EQ(spmTexts(off.encode(" the"), off), (Texts{"_the"}));
  EXPECT_EQ(off.decode(off.encode(" the")), " the");
  v.config.addSpacePrefix = true;
  const Tokenizer on = v.make();
  EXPECT_EQ(spmTexts(on.encode("the"), on), (Texts{"_the"}));
  EXPECT_EQ(spmTexts(on.encode(" the"), on), (Texts{"_", "_the"}));
  EXPECT_EQ(on.decode(on.encode("the")), " the");
  EXPECT_TRUE(on.encode("").empty());
  // As llama.cpp does, every plain fragment gets one: each starts the text
  // or follows a control or user-defined token.
  EXPECT_EQ(spmTexts(on.encode("the<end_of_turn>the\nthe", true), on),
            (Texts{"_the", "<end_of_turn>", "_the", "\n", "_the"}));
  EXPECT_EQ(spmTexts(on.encode("<start_of_turn>", true), on),
            (Texts{"<start_of_turn>"}));
}

TEST(TokenizerSentencePiece, RoundTrip) {
  const SpmVocab v;
  const Tokenizer t = v.make();
  const std::vector<std::string> specials = {
      "<start_of_turn>", "<end_of_turn>", "<bos>", "<start_of_turn", "  ",
      "\n\n", "<table>", "<0x41>"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const std::string s = randomUtf8(rng, 80, i % 2, specials);
    if (s.find(kSpm) != std::string::npos)
      continue; // A literal "▁" decodes as ' '.
    for (bool parseSpecial : {false, true}) {
      const std::vector<int32_t> ids = t.encode(s, parseSpecial);
      ASSERT_EQ(t.decode(ids), s) << "parseSpecial " << parseSpecial;
      std::string pieces;
      for (int32_t id : ids)
        pieces += t.tokenToPiece(id);
      ASSERT_EQ(pieces, s);
    }
  }
  // Any bytes at all, invalid UTF-8 included.
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char &c : s)
      c = char(rng());
    if (s.find(kSpm) != std::string::npos)
      continue;
    ASSERT_EQ(t.decode(t.encode(s, true)), s);
  }
  EXPECT_EQ(t.decode(t.encode("a \xE2\x96\x81" "b")), "a  b");
}

TEST(TokenizerSentencePiece, MegabytesInLinearithmicTime) {
  const Tokenizer t = SpmVocab().make();
  // Hostile shapes: one long merge cascade, one long unmergeable run, and
  // a prefix of a special token over and over.
  // Growth, not speed, is what this checks (the machine may be slow, loaded
  // or sanitised): 8x the input may take at most 24x the time (quadratic
  // work takes 64x; 0.25 s covers the timer's noise on a short run), and
  // no input more than 60 s. Times are this process's CPU seconds (the
  // encoder runs on the calling thread), so other jobs sharing the cores do
  // not count; the short input takes the best of three.
  auto cpuSeconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  for (const std::string &unit : {std::string("a"), std::string("zq"),
                                  std::string("<start_of_tur")}) {
    double seconds[2] = {0.0, 0.0};
    for (int big = 0; big < 2; ++big) {
      std::string text;
      while (text.size() < (big ? 2 * 1024 * 1024 : 256 * 1024))
        text += unit;
      seconds[big] = std::numeric_limits<double>::infinity();
      for (int rep = 0; rep < (big ? 1 : 3); ++rep) {
        const double start = cpuSeconds();
        const std::vector<int32_t> ids = t.encode(text, true);
        seconds[big] = std::min(seconds[big], cpuSeconds() - start);
        EXPECT_EQ(t.decode(ids), text);
      }
    }
    EXPECT_LT(seconds[1], 24.0 * seconds[0] + 0.25) << unit;
    EXPECT_LT(seconds[1], 60.0) << unit;
  }
}

TEST(TokenizerSentencePiece, InvalidConfigurations) {
  SpmVocab v;
  v.config.scores.pop_back();
  const size_t n = v.config.tokens.size();
  EXPECT_EQ(Tokenizer::create(v.config).message(),
            "tokenizer: " + std::to_string(n - 1) + " scores for " +
                std::to_string(n) + " tokens");
  v = SpmVocab();
  v.config.scores[20] = std::nanf("");
  EXPECT_EQ(Tokenizer::create(v.config).message(),
            "tokenizer: the score of token #20 is NaN");
  v = SpmVocab();
  v.config.merges = {"a b"};
  EXPECT_EQ(Tokenizer::create(v.config).message(),
            "tokenizer: 1 merges given to a SentencePiece vocabulary, which "
            "merges by score");
  // Byte-level BPE needs no scores and ignores them.
  TokenizerConfig bpe = smallConfig();
  bpe.scores = {1.0f};
  EXPECT_TRUE(Tokenizer::create(bpe).ok());
}

TEST(TokenizerSentencePiece, FromGGUF) {
  const SpmVocab v;
  std::vector<float> scores = v.config.scores;
  const auto build = [&](bool withScores, size_t dropScores) {
    GGUFBuilder g;
    g.addString("tokenizer.ggml.model", "llama")
        .addString("tokenizer.ggml.pre", "default")
        .addStringArray("tokenizer.ggml.tokens", v.config.tokens)
        .addArray<int32_t>("tokenizer.ggml.token_type", ValueType::Int32,
                           v.config.tokenTypes)
        .addU32("tokenizer.ggml.bos_token_id", uint32_t(v.bos))
        .addU32("tokenizer.ggml.eos_token_id", uint32_t(v.eos))
        .addU32("tokenizer.ggml.unknown_token_id", uint32_t(v.unk))
        .addBool("tokenizer.ggml.add_bos_token", true)
        .addBool("tokenizer.ggml.add_space_prefix", false);
    if (withScores)
      g.addArray<float>(
          "tokenizer.ggml.scores", ValueType::Float32,
          std::vector<float>(scores.begin(), scores.end() - dropScores));
    return GGUFFile::fromBuffer(g.build(), "spm.gguf");
  };
  Result<GGUFFile> f = build(true, 0);
  ASSERT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::fromGGUF(*f);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->model(), TokenizerModel::SentencePiece);
  EXPECT_EQ(t->encode(" the", false, true),
            (std::vector<int32_t>{v.bos, t->findToken(kSpm + "the")}));
  EXPECT_EQ(t->unkId(), v.unk);

  f = build(false, 0);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(Tokenizer::fromGGUF(*f).message(),
            "spm.gguf: missing key 'tokenizer.ggml.scores'");
  f = build(true, 2);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(Tokenizer::fromGGUF(*f).message(),
            "spm.gguf: key 'tokenizer.ggml.scores' has " +
                std::to_string(scores.size() - 2) + " values for " +
                std::to_string(scores.size()) + " tokens");
  expectOneLineError(Tokenizer::fromGGUF(*f).status(), "spm.gguf");
}

//===----------------------------------------------------------------------===//
// The real model
//===----------------------------------------------------------------------===//

namespace {

/// Fixed texts compared with the reference, including the awkward cases.
const std::vector<std::string> &fixedTexts() {
  static const std::vector<std::string> texts = {
      "",
      "The capital of France is",
      "Hello, world! How's it going? I'm fine, they'll see, we've won, you'd know.",
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
      "trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
      "<|im_end|>\n<|im_start|>assistant\n",
      "In 1889, 3.14159 and 1,000,000 and 0x1F and 42nd and -7e-3.",
      "def f(x):\n    return x ** 2  # square\n\n\n\tif x:\n\t\tpass\n",
      "    leading spaces and trailing spaces    ",
      "line1\r\nline2\n\nline3 \n \n",
      "na\xC3\xAFve caf\xC3\xA9 r\xC3\xA9sum\xC3\xA9 \xC3\x9C" "ber Stra\xC3\x9F" "e",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD"
      "\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x82\xE4\xB8\xAD\xE6\x96\x87\xE3\x80\x82"
      " \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80"
      " \xCE\x93\xCE\xB5\xCE\xB9\xCE\xAC \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85 "
      "\xD9\xA1\xD9\xA2\xD9\xA3",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7"
      " \xE2\x9D\xA4\xEF\xB8\x8F",
      "x\xC2\xB2 + y\xC2\xB3 = \xC2\xBD \xE2\x85\xA0 \xEF\xBC\x91\xEF\xBC\x92",
      "e\xCC\x81 a\xCC\x8A\xCC\x81 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5"
      "\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "nbsp\xC2\xA0here, ideographic\xE3\x80\x80space, em\xE2\x80\x83space,"
      " zwsp\xE2\x80\x8Bhere \x1C\x1D\x1E\x1F sep\xE2\x80\xA8line",
      "'s 't 're 've 'm 'll 'd 'S 'T ''s '''' it's-'tis",
      "http://example.com/path?query=1&b=2#frag <tag attr=\"v\">text</tag>",
      "!!!??? ... --- *** ~~~ $$$ %%% ^^^ &&& @@@ ### ||| \\\\ ///",
      "<|im_start|><|im_end|><|endoftext|><|im_start <|im_end|",
      "<repo_name>x<file_sep>y<filename>z<gh_stars>10",
      // Bytes without a token: dropped, neighbours then merge.
      "!\x04! a\x06\x13" "b \x16\x1D ??\x14??",
      "plane 4: \xF1\x80\x80\x80 plane 11: \xF2\xBF\xBF\xBD end",
      "\n",
      " ",
      "a",
  };
  return texts;
}

struct RealTokenizer {
  std::string path;
  Result<Tokenizer> tokenizer = Status::error("not loaded");
};

/// The tokenizer of the GGUF at `path` ("" when the model is absent: then
/// path stays empty).
RealTokenizer loadRealTokenizer(const std::string &path) {
  RealTokenizer r;
  r.path = path;
  if (r.path.empty())
    return r;
  Result<GGUFFile> f = GGUFFile::open(r.path);
  if (!f) {
    r.tokenizer = f.status();
    return r;
  }
  r.tokenizer = Tokenizer::fromGGUF(*f);
  return r;
}

RealTokenizer &realTokenizer() {
  static RealTokenizer real = loadRealTokenizer(modelPath());
  return real;
}

} // namespace

TEST(TokenizerRealModel, Vocabulary) {
  RealTokenizer &real = realTokenizer();
  if (real.path.empty())
    GTEST_SKIP() << modelSkipMessage();
  ASSERT_TRUE(real.tokenizer.ok()) << real.tokenizer.message();
  const Tokenizer &t = *real.tokenizer;
  EXPECT_EQ(t.vocabSize(), 49152);
  EXPECT_EQ(t.bosId(), 1);
  EXPECT_EQ(t.eosId(), 2);
  EXPECT_EQ(t.unkId(), 0);
  EXPECT_EQ(t.padId(), 2);
  EXPECT_FALSE(t.addBosToken());
  EXPECT_EQ(t.tokenText(1), "<|im_start|>");
  EXPECT_EQ(t.tokenType(1), TokenType::Control);
  EXPECT_EQ(t.tokenToPiece(7042), " Paris");

  // The 21 bytes this vocabulary has no token for.
  std::string missing;
  for (int b = 0; b < 256; ++b)
    if (t.byteToken(uint8_t(b)) < 0)
      missing += char(b);
  EXPECT_EQ(missing, "\x04\x06\x13\x14\x16\x1D\xC0\xC1\xF1\xF2\xF5\xF6\xF7"
                     "\xF8\xF9\xFA\xFB\xFC\xFD\xFE\xFF");

  // Round trip, except that bytes without a token disappear.
  std::mt19937 rng(11);
  for (int i = 0; i < 1000; ++i) {
    const std::string s = randomUtf8(rng, 60, true);
    std::string kept;
    for (char c : s)
      if (t.byteToken(uint8_t(c)) >= 0)
        kept += c;
    ASSERT_EQ(t.decode(t.encode(s, true)), kept);
    ASSERT_EQ(t.decode(t.encode(s, false)), kept);
  }
}

/// Token ids of `t` (the tokenizer of the GGUF at `path`) equal those of
/// the independent Python reference on the fixed texts, `extraTexts` and 400
/// random ones (a third of them with `specials` mixed in), parsing special
/// tokens and not. Returns how many texts were compared in each mode.
size_t expectMatchesReference(
    const std::string &path, const Tokenizer &t,
    const std::vector<std::string> &extraTexts = {},
    const std::vector<std::string> &specials = chatMlSpecials()) {
  std::vector<std::string> inputs = fixedTexts();
  inputs.insert(inputs.end(), extraTexts.begin(), extraTexts.end());
  std::mt19937 rng(2024);
  for (int i = 0; i < 400; ++i)
    inputs.push_back(
        randomUtf8(rng, i < 300 ? 40 : 400, i % 3 == 0, specials));
  const TempPath textsPath("tok_texts.json");
  const std::string json = nlohmann::json(inputs).dump();
  writeFile(textsPath, json.data(), json.size());

  for (bool parseSpecial : {true, false}) {
    SCOPED_TRACE(parseSpecial ? "parseSpecial" : "plain");
    const TempPath out("tok_ids.json");
    std::string log;
    const int rc = runReference("tokenize " + shellQuote(path) +
                                    " --texts-file " + shellQuote(textsPath) +
                                    (parseSpecial ? "" : " --no-special") +
                                    " --out " + shellQuote(out),
                                log);
    EXPECT_EQ(rc, 0) << log;
    if (rc != 0)
      return 0;
    const nlohmann::json ids = nlohmann::json::parse(readFile(out))["ids"];
    EXPECT_EQ(ids.size(), inputs.size());
    if (ids.size() != inputs.size())
      return 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<int32_t> expected = ids[i].get<std::vector<int32_t>>();
      const std::vector<int32_t> mine = t.encode(inputs[i], parseSpecial);
      EXPECT_EQ(mine, expected) << "text #" << i << ": "
                                << nlohmann::json(inputs[i]).dump();
      if (mine != expected)
        return 0;
    }
  }
  return inputs.size();
}

TEST(TokenizerRealModel, MatchesPythonTokenizers) {
  RealTokenizer &real = realTokenizer();
  if (real.path.empty())
    GTEST_SKIP() << modelSkipMessage();
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  ASSERT_TRUE(real.tokenizer.ok()) << real.tokenizer.message();
  expectMatchesReference(real.path, *real.tokenizer);
}

// The second family: Qwen2's pre-tokenizer (Llama 3's regex, one digit a
// piece, case-insensitive contractions, a punctuation or space prefix on
// words), its 151,936-token vocabulary and its special tokens.
TEST(TokenizerQwen2Model, MatchesPythonTokenizers) {
  const std::string path = qwenModelPath();
  if (path.empty())
    GTEST_SKIP() << qwenSkipMessage();
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  Result<GGUFFile> f = GGUFFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::fromGGUF(*f);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->vocabSize(), 151936);
  EXPECT_EQ(t->eosId(), 151645);
  EXPECT_EQ(t->tokenText(151644), "<|im_start|>");
  EXPECT_EQ(t->preTokenize("It's 2024, isn't IT'S?\n\n  x"),
            (std::vector<std::string_view>{"It", "'s", " ", "2", "0", "2",
                                           "4", ",", " isn", "'t", " IT",
                                           "'S", "?\n\n", " ", " x"}));
  expectMatchesReference(path, *t);
}

TEST(TokenizerRealModel, HundredKilobytesUnderASecond) {
  RealTokenizer &real = realTokenizer();
  if (real.path.empty())
    GTEST_SKIP() << modelSkipMessage();
  ASSERT_TRUE(real.tokenizer.ok()) << real.tokenizer.message();
  std::mt19937 rng(5);
  std::string text;
  while (text.size() < 100 * 1024) {
    text += fixedTexts()[rng() % fixedTexts().size()];
    text += randomUtf8(rng, 40);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = real.tokenizer->encode(text, true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("encoded %zu bytes into %zu tokens in %.3f s\n", text.size(),
              ids.size(), seconds);
  std::string kept;
  for (char c : text)
    if (real.tokenizer->byteToken(uint8_t(c)) >= 0)
      kept += c;
  EXPECT_EQ(real.tokenizer->decode(ids), kept);
  EXPECT_LT(seconds, 1.0);
}

//===----------------------------------------------------------------------===//
// Gemma 3: SentencePiece BPE checked against the `sentencepiece` library
//===----------------------------------------------------------------------===//

namespace {

/// The reference's SentencePiece path needs sentencepiece and protobuf
/// besides numpy and gguf.
bool sentencePieceReferenceAvailable() {
  static const bool available =
      std::system((shellQuote(python()) +
                   " -c 'import numpy, gguf, sentencepiece; from "
                   "sentencepiece import sentencepiece_model_pb2' "
                   ">/dev/null 2>&1")
                      .c_str()) == 0;
  return available;
}

std::string sentencePieceSkipMessage() {
  return "Python reference unavailable: '" + python() +
         " -c \"import numpy, gguf, sentencepiece; from sentencepiece import "
         "sentencepiece_model_pb2\"' failed (pip install numpy gguf "
         "sentencepiece protobuf, or set CONDENSATE_PYTHON)";
}

/// Gemma 3's control and user-defined texts, and near misses, for the
/// random texts.
const std::vector<std::string> &gemmaSpecials() {
  static const std::vector<std::string> specials = {
      "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>",
      "<unk>", "<mask>", "<unused17>", "<start_of_image>", "[multimodal]",
      "<start_of_turn", "<table>", "</td>", "<b>", "\n\n", "\t\t\t", "   ",
      "<0x41>", "<unused6241>", "<end_of_turn"};
  return specials;
}

/// Fixed texts for Gemma besides fixedTexts(). A literal "▁▁" is left out:
/// there llama.cpp (and Tokenizer) see two spaces' worth of BPE input while
/// sentencepiece matches its user-defined piece "▁▁" (llama.cpp's converter
/// turned that into the "  " this vocabulary has).
const std::vector<std::string> &gemmaTexts() {
  static const std::vector<std::string> texts = {
      "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
      "<start_of_turn>model\n",
      "<start_of_turn>user\n<start_of_image>[multimodal]<end_of_image>"
      "<end_of_turn>",
      "<table><tr><td>a</td><td> b </td></tr></table> <b>bold</b><i>x</i>",
      "a  b   c    d     e" + std::string(40, ' ') + "f" +
          std::string(33, ' '),
      "\t\t\tindent\n\n\n\n\n\nsix\n" + std::string(40, '\n') + "end",
      " \n \n\n  \t \t\t  x",
      "<unused0><unused6241><mask><pad><unk><eos><bos>",
      "<start_of_turn <end_of_turn> <bo s> <0x41><0xFF> <unused99",
      "The capital of France is",
      " leading space and trailing space ",
      "\xE2\x96\x81literal lower block\xE2\x96\x81x",
      "\x01\x02\x7F control \x1B[31mred\x1B[0m",
      "\xF0\x9F\x98\x80\xF0\x9F\xA4\x96\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D"
      "\xF0\x9F\x8C\x88 \xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA"
      "\xE0\xB8\x94\xE0\xB8\xB5",
      "for (int i = 0; i < n; ++i) {\n    sum += a[i] * b[i];\n}\n",
      "1234567890 12,345.67 \xD9\xA1\xD9\xA2 \xE2\x85\xAB 007",
  };
  return texts;
}

RealTokenizer &gemmaTokenizer() {
  static RealTokenizer real = loadRealTokenizer(gemmaModelPath());
  return real;
}

} // namespace

// The synthetic vocabulary above, written as a GGUF: the same ids as the
// sentencepiece library on random texts (no model file needed).
TEST(TokenizerSentencePiece, SmallVocabularyMatchesSentencePiece) {
  if (!sentencePieceReferenceAvailable())
    GTEST_SKIP() << sentencePieceSkipMessage();
  const SpmVocab v;
  GGUFBuilder g;
  g.addString("tokenizer.ggml.model", "llama")
      .addStringArray("tokenizer.ggml.tokens", v.config.tokens)
      .addArray<int32_t>("tokenizer.ggml.token_type", ValueType::Int32,
                         v.config.tokenTypes)
      .addArray<float>("tokenizer.ggml.scores", ValueType::Float32,
                       v.config.scores)
      .addU32("tokenizer.ggml.bos_token_id", uint32_t(v.bos))
      .addU32("tokenizer.ggml.eos_token_id", uint32_t(v.eos))
      .addU32("tokenizer.ggml.unknown_token_id", uint32_t(v.unk))
      .addBool("tokenizer.ggml.add_space_prefix", false);
  const TempPath path("spm_small.gguf");
  const std::vector<uint8_t> bytes = g.build();
  writeFile(path, bytes.data(), bytes.size());
  Result<GGUFFile> f = GGUFFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::fromGGUF(*f);
  ASSERT_TRUE(t.ok()) << t.message();
  std::vector<std::string> texts = {"abc", "abcabc", " the", " a the",
                                    "aaaaaaa", "xyxyx", "<bos>", "ab  \n\n\nc"};
  std::mt19937 rng(99);
  const std::string alphabet = "abcdehorstuxy_<> \n";
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (size_t k = rng() % 30; k > 0; --k)
      s += alphabet[rng() % alphabet.size()];
    texts.push_back(s);
  }
  const size_t compared = expectMatchesReference(
      path, *t, texts,
      {"<start_of_turn>", "<end_of_turn>", "<bos>", "<table>", "  ", "\n"});
  std::printf("%zu texts equal to sentencepiece's ids\n", compared);
}

TEST(TokenizerGemma3Model, Vocabulary) {
  RealTokenizer &real = gemmaTokenizer();
  if (real.path.empty())
    GTEST_SKIP() << gemmaSkipMessage();
  ASSERT_TRUE(real.tokenizer.ok()) << real.tokenizer.message();
  const Tokenizer &t = *real.tokenizer;
  EXPECT_EQ(t.model(), TokenizerModel::SentencePiece);
  EXPECT_EQ(t.vocabSize(), 262144);
  EXPECT_EQ(t.bosId(), 2);
  EXPECT_EQ(t.eosId(), 1);
  EXPECT_EQ(t.unkId(), 3);
  EXPECT_EQ(t.padId(), 0);
  EXPECT_TRUE(t.addBosToken());
  EXPECT_EQ(t.tokenText(105), "<start_of_turn>");
  EXPECT_EQ(t.tokenType(105), TokenType::Control);
  EXPECT_EQ(t.tokenType(108), TokenType::UserDefined);
  EXPECT_EQ(t.byteToken(0x0A), 248);
  EXPECT_EQ(t.tokenToPiece(248), "\n");
  for (int b = 0; b < 256; ++b)
    EXPECT_GE(t.byteToken(uint8_t(b)), 0) << b;
  // The ids sentencepiece gives (checked by hand with the reference).
  EXPECT_EQ(t.encode("The capital of France is", true, true),
            (std::vector<int32_t>{2, 818, 5279, 529, 7001, 563}));
  EXPECT_EQ(t.tokenToPiece(7001), " France");
  EXPECT_EQ(t.encode("<start_of_turn>user\n", true),
            (std::vector<int32_t>{105, 2364, 107}));

  // decode(encode(s)) == s without a literal "▁" (add_space_prefix is off).
  std::mt19937 rng(17);
  size_t compared = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string s = randomUtf8(rng, 60, i % 2, gemmaSpecials());
    if (s.find("\xE2\x96\x81") != std::string::npos)
      continue;
    ASSERT_EQ(t.decode(t.encode(s, true)), s);
    ASSERT_EQ(t.decode(t.encode(s, false)), s);
    ++compared;
  }
  EXPECT_GT(compared, 1900u);
}

TEST(TokenizerGemma3Model, MatchesSentencePiece) {
  RealTokenizer &real = gemmaTokenizer();
  if (real.path.empty())
    GTEST_SKIP() << gemmaSkipMessage();
  if (!sentencePieceReferenceAvailable())
    GTEST_SKIP() << sentencePieceSkipMessage();
  ASSERT_TRUE(real.tokenizer.ok()) << real.tokenizer.message();
  const size_t compared = expectMatchesReference(
      real.path, *real.tokenizer, gemmaTexts(), gemmaSpecials());
  std::printf("%zu texts equal to sentencepiece's ids, parsing special "
              "tokens and not\n",
              compared);
}

TEST(TokenizerGemma3Model, MegabyteUnderTwoSeconds) {
  RealTokenizer &real = gemmaTokenizer();
  if (real.path.empty())
    GTEST_SKIP() << gemmaSkipMessage();
  ASSERT_TRUE(real.tokenizer.ok()) << real.tokenizer.message();
  std::mt19937 rng(5);
  std::string text;
  while (text.size() < 1024 * 1024) {
    text += gemmaTexts()[rng() % gemmaTexts().size()];
    text += randomUtf8(rng, 40, true, gemmaSpecials());
  }
  for (size_t pos; (pos = text.find("\xE2\x96\x81")) != std::string::npos;)
    text.erase(pos, 3);
  // And one fragment with no special token and no space in it at all.
  std::string word;
  while (word.size() < 1024 * 1024)
    word += "abc\xC3\xA9\xE4\xB8\xAD";
  for (const std::string *input : {&text, &word}) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = real.tokenizer->encode(*input, true);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("encoded %zu bytes into %zu tokens in %.3f s\n",
                input->size(), ids.size(), seconds);
    EXPECT_EQ(real.tokenizer->decode(ids), *input);
    EXPECT_LT(seconds, 2.0);
  }
}

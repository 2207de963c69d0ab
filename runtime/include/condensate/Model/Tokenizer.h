//===- Tokenizer.h - Byte-level and SentencePiece BPE from GGUF -----------===//
//
// Two kinds of vocabulary, chosen by tokenizer.ggml.model:
//
// "gpt2": GPT-2 style byte-level BPE (SmolLM2, Qwen2.5). Encoding matches
// Hugging Face `tokenizers` with pre_tokenizers Sequence[Digits(
// individual_digits=true), ByteLevel(add_prefix_space=false, use_regex=true)]
// (tokenizer.ggml.pre "smollm"; see TokenizerConfig for the others):
//   1. control tokens (and user-defined tokens) are cut out of the text,
//   2. every Unicode number character becomes a piece of its own,
//   3. the rest is split by the GPT-2 regex
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   4. each piece's bytes are merged by BPE rank.
// Decoding is the exact inverse: decode(encode(s)) == s for every byte string,
// including invalid UTF-8 (such bytes become single-byte tokens), provided
// the vocabulary has a token for each byte of s. A byte without one is
// dropped, as tokenizers' BPE without an unk token drops it. SmolLM2's
// vocabulary lacks 21 bytes: 0x04 0x06 0x13 0x14 0x16 0x1D (control
// characters), 0xF1 0xF2 (lead bytes of U+40000..U+BFFFF, planes 4-11, all
// unassigned) and 0xC0 0xC1 0xF5..0xFF (never in valid UTF-8); see byteToken.
//
// "llama": SentencePiece BPE (llama.cpp's SPM vocabulary; Gemma 3). Encoding
// matches llama.cpp's llm_tokenizer_spm and SentencePiece's BPE model with
// byte fallback:
//   1. control tokens (only with parseSpecial) and user-defined tokens are
//      cut out of the text as above,
//   2. each remaining fragment gets a leading space when add_space_prefix is
//      set (as in llama.cpp every fragment does, each one starting the text
//      or following a cut-out token; SentencePiece adds one per text), and
//      every ' ' becomes U+2581 "▁",
//   3. starting from its UTF-8 characters (an invalid byte is one of its
//      own; llama.cpp takes a lead byte's length unchecked), the adjacent
//      pair whose concatenation is a Normal, UserDefined or Unused token of
//      the highest score is merged, leftmost first among equal scores, until
//      none is (SentencePiece's rule; llama.cpp also merges into control and
//      byte tokens, which no Gemma 3 text can reach),
//   4. a resulting piece with no token becomes the <0xXX> tokens of its
//      bytes, or the unk token for a byte without one (dropped when there is
//      no unk token either); an Unused piece is split back into the two
//      pieces it was merged from.
// Decoding maps "▁" back to ' ' and byte tokens to their byte, so
// decode(encode(s)) == s for text without "▁" when add_space_prefix is off
// and every byte of s that needs one has a byte token; invalid UTF-8 bytes
// are characters of their own, so they round-trip too.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_MODEL_TOKENIZER_H
#define CONDENSATE_MODEL_TOKENIZER_H

#include "condensate/Support/Status.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace condensate::model {

class GGUFFile;

/// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

/// The kind of vocabulary (GGUF tokenizer.ggml.model).
enum class TokenizerModel : uint8_t {
  ByteLevelBPE,  ///< "gpt2": byte-level text, merges by rank.
  SentencePiece, ///< "llama": "▁" for spaces, merges by score, <0xXX> bytes.
};

/// Everything a Tokenizer is built from; fromGGUF fills it from metadata.
struct TokenizerConfig {
  TokenizerModel model = TokenizerModel::ByteLevelBPE;
  /// Token texts as stored, indexed by id: byte-level form ("Ġthe" for
  /// " the") or SentencePiece form ("▁the", "<0x0A>").
  std::vector<std::string> tokens;
  /// Per-token TokenType codes; empty means all Normal.
  std::vector<int32_t> tokenTypes;
  /// ByteLevelBPE only: "left right" pairs, highest priority first.
  std::vector<std::string> merges;
  /// ByteLevelBPE only, GGUF tokenizer.ggml.pre: "smollm" (GPT-2's regex,
  /// digits split one by one), "gpt-2" (no digit split), "qwen2" (Llama 3's
  /// regex with single digits) or "llama-bpe" / "llama3" (Llama 3's regex,
  /// digits in threes).
  std::string preTokenizer = "smollm";
  /// SentencePiece only, one per token (tokenizer.ggml.scores): merges
  /// forming a higher-scored token happen first.
  std::vector<float> scores;
  /// SentencePiece only (tokenizer.ggml.add_space_prefix, which llama.cpp
  /// defaults to true): a space before each plain-text fragment.
  bool addSpacePrefix = true;
  /// Special token ids, -1 when absent.
  int32_t bosId = -1, eosId = -1, unkId = -1, padId = -1;
  bool addBosToken = false;
  bool addEosToken = false;
};

class Tokenizer {
public:
  /// Reads tokenizer.ggml.* keys; errors name the offending key.
  static Result<Tokenizer> fromGGUF(const GGUFFile &file);
  /// Validates `config` (every merge and its result must be in the
  /// vocabulary, one score per SentencePiece token, special ids in range).
  static Result<Tokenizer> create(TokenizerConfig config);

  /// Token ids for `text`. With `parseSpecial`, control-token texts such as
  /// "<|im_start|>" in `text` become their single ids; without it they are
  /// tokenised as plain text. User-defined tokens are always recognised.
  /// `addSpecial` adds BOS/EOS where the model's add_bos/add_eos flags say so.
  std::vector<int32_t> encode(std::string_view text, bool parseSpecial = false,
                              bool addSpecial = false) const;

  /// Bytes of the concatenated tokens. Control tokens are rendered as their
  /// text unless `renderSpecial` is false; ids out of range are skipped.
  std::string decode(const std::vector<int32_t> &ids,
                     bool renderSpecial = true) const;
  /// Bytes of one token (possibly part of a UTF-8 sequence); empty for an id
  /// out of range.
  std::string tokenToPiece(int32_t id, bool renderSpecial = true) const;

  int32_t vocabSize() const { return int32_t(tokens_.size()); }
  TokenizerModel model() const { return model_; }
  /// The stored (byte-level or "▁") text of a token; empty for an id out of
  /// range.
  const std::string &tokenText(int32_t id) const;
  TokenType tokenType(int32_t id) const;
  /// The token of a single byte (SentencePiece: "<0xXX>"), or -1 if the
  /// vocabulary has none (encode then drops the byte, or for SentencePiece
  /// uses the unk token).
  int32_t byteToken(uint8_t byte) const;
  /// The id whose stored text is exactly `text`, or -1.
  int32_t findToken(std::string_view text) const;

  int32_t bosId() const { return bosId_; }
  int32_t eosId() const { return eosId_; }
  int32_t unkId() const { return unkId_; }
  int32_t padId() const { return padId_; }
  bool addBosToken() const { return addBos_; }
  bool addEosToken() const { return addEos_; }

  /// Byte-level BPE's steps 2-3 above on plain text (no special tokens): the
  /// pieces BPE sees, as views into `text`. SentencePiece merges across the
  /// whole text: one piece (none for empty text).
  std::vector<std::string_view> preTokenize(std::string_view text) const;

private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  Tokenizer() = default;
  /// The id of the longest special token whose text starts text[pos], or -1.
  int32_t matchSpecial(std::string_view text, size_t pos,
                       bool parseSpecial) const;
  void encodePlain(std::string_view text, std::vector<int32_t> &out) const;
  void encodeWord(std::string_view word, std::vector<int32_t> &out) const;
  void encodeSentencePiece(std::string_view text,
                           std::vector<int32_t> &out) const;
  void encodeSentencePiecePart(std::string_view text,
                               std::vector<int32_t> &out) const;

  TokenizerModel model_ = TokenizerModel::ByteLevelBPE;
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<std::string> pieces_; // Decoded bytes of each token.
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_; // (left << 32 | right).
  std::array<int32_t, 256> byteTokens_{};
  /// A byte trie of the control and user-defined token texts. Node 0 is the
  /// root; an edge is (node << 8 | byte) -> node. Each node holds the first
  /// token id spelt by its path, of any special type and user-defined only
  /// (-1 where none): user-defined tokens are matched always, control ones
  /// only with parseSpecial.
  std::unordered_map<uint64_t, int32_t> specialEdges_;
  std::vector<std::array<int32_t, 2>> specialIds_;
  std::array<bool, 256> specialStart_{}; // Bytes with an edge from the root.
  bool splitDigits_ = true;
  /// Llama 3's regex (qwen2, llama-bpe) instead of GPT-2's, and how many
  /// digits one of its number pieces holds.
  bool llama3Regex_ = false;
  size_t maxDigits_ = 3;
  std::vector<float> scores_;
  bool addSpacePrefix_ = false;
  size_t maxPieceBytes_ = 0; // Longest mergeable SentencePiece token.
  int32_t bosId_ = -1, eosId_ = -1, unkId_ = -1, padId_ = -1;
  bool addBos_ = false, addEos_ = false;
};

} // namespace condensate::model

#endif // CONDENSATE_MODEL_TOKENIZER_H

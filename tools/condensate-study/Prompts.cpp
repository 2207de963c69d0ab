//===- Prompts.cpp - Fidelity-study prompts: generation and loading -------===//
//
// Filler and natural text come from plain-text files every Debian 12 system
// has (/usr/share/common-licenses, /usr/share/doc/*/copyright) and from the
// C++ standard library headers (/usr/include/c++/12/bits). Randomness is a
// SplitMix64 stream reduced by modulo, not <random>'s distributions, whose
// output differs between standard libraries: the same seed gives the same
// prompts with any compiler.
//
//===----------------------------------------------------------------------===//
#include "Prompts.h"

#include "ToolSupport.h"

#include "condensate/Decoder/Chat.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace condensate::study {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// SplitMix64: a tiny, portable, well-mixed generator.
class Rng {
public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform-enough integer in [0, n) (n far below 2^64: bias negligible).
  int64_t below(int64_t n) { return int64_t(next() % uint64_t(n)); }
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }

private:
  uint64_t state_;
};

bool validUtf8(const std::string &s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2
                                               : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + size_t(extra) >= s.size())
      return false;
    for (int k = 1; k <= extra; ++k)
      if ((static_cast<unsigned char>(s[i + size_t(k)]) >> 6) != 2)
        return false;
    // Control characters other than tab/newline make poor prompts.
    if (c < 0x20 && c != '\n' && c != '\t')
      return false;
    i += size_t(extra) + 1;
  }
  return true;
}

std::optional<std::string> readText(const fs::path &p) {
  auto content = readFile(p.string());
  if (!content)
    return std::nullopt;
  std::string s = std::move(*content);
  s.erase(std::remove(s.begin(), s.end(), '\r'), s.end());
  if (s.empty() || !validUtf8(s))
    return std::nullopt;
  return s;
}

/// Lines of a corpus, each remembering its file.
struct Corpus {
  std::string name;
  std::vector<std::string> lines;
  std::vector<int32_t> fileOf;
  std::vector<std::string> files;

  void addFile(const fs::path &p) {
    auto text = readText(p);
    if (!text)
      return;
    files.push_back(p.string());
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      lines.push_back(line);
      fileOf.push_back(int32_t(files.size() - 1));
    }
    lines.emplace_back(); // a blank line between files
    fileOf.push_back(int32_t(files.size() - 1));
  }
};

/// Regular files (not symlinks) matching `filter` under `dir`, sorted.
std::vector<fs::path> listFiles(const fs::path &dir, bool recursive,
                                bool (*filter)(const fs::path &)) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return out;
  auto visit = [&](const fs::directory_entry &e) {
    std::error_code ec2;
    if (e.is_symlink(ec2) || !e.is_regular_file(ec2))
      return;
    if (filter(e.path()))
      out.push_back(e.path());
  };
  if (recursive) {
    for (auto it = fs::recursive_directory_iterator(
             dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      visit(*it);
  } else {
    for (auto it = fs::directory_iterator(dir, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec))
      visit(*it);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Corpus licences() {
  Corpus c;
  c.name = "licences";
  for (const fs::path &p :
       listFiles("/usr/share/common-licenses", false,
                 [](const fs::path &) { return true; }))
    c.addFile(p);
  return c;
}

/// Whether a file reads as prose: most non-empty lines hold several words.
/// Some copyright files are long lists of source paths, which make poor
/// filler and poor natural text.
bool prose(const fs::path &p) {
  auto text = readText(p);
  if (!text || text->size() > 200000)
    return false;
  std::istringstream in(*text);
  std::string line;
  int64_t lines = 0, wordy = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    ++lines;
    std::istringstream ws(line);
    std::string w;
    int words = 0;
    while (ws >> w)
      ++words;
    wordy += words >= 5;
  }
  return lines >= 10 && wordy * 10 >= lines * 7;
}

Corpus copyrights() {
  Corpus c;
  c.name = "copyright";
  for (const fs::path &p :
       listFiles("/usr/share/doc", true, [](const fs::path &p) {
         return p.filename() == "copyright" && prose(p);
       }))
    c.addFile(p);
  return c;
}

Corpus headers() {
  Corpus c;
  c.name = "code";
  for (const fs::path &p :
       listFiles("/usr/include/c++/12/bits", false, [](const fs::path &p) {
         return p.extension() == ".h" || p.extension() == ".tcc";
       }))
    c.addFile(p);
  return c;
}

std::string joinLines(const std::vector<std::string> &lines, size_t from,
                      size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) {
    s += lines[i];
    s += '\n';
  }
  return s;
}

std::string sourceOf(const Corpus &c, size_t from, size_t to) {
  std::vector<int32_t> ids;
  for (size_t i = from; i < to; ++i)
    if (ids.empty() || ids.back() != c.fileOf[i])
      ids.push_back(c.fileOf[i]);
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 4; ++i)
    s += (i ? ", " : "") + c.files[size_t(ids[i])];
  if (ids.size() > 4)
    s += ", ... (" + std::to_string(ids.size()) + " files)";
  return s;
}

/// A QA prompt under construction: filler lines with facts inserted at
/// fractional positions, framed by an instruction and a question.
struct QASpec {
  std::string task, answer, instruction, question;
  /// (position in [0, 1], line) pairs inserted into the filler.
  std::vector<std::pair<double, std::string>> inserts;
};

class Generator {
public:
  Generator(const model::GGUFFile &file, const model::Tokenizer &tok,
            const PromptPlan &plan, uint64_t seed)
      : file_(file), tok_(tok), plan_(plan), rng_(seed) {}

  Result<std::vector<PromptRecord>> run();

private:
  int64_t countTokens(const std::string &text) const {
    PromptRecord p;
    p.text = text;
    return int64_t(promptTokens(tok_, p).size());
  }
  Result<std::string> render(const QASpec &spec, const Corpus &c,
                             size_t start, size_t count) const;
  Result<PromptRecord> makeQA(const QASpec &spec, int64_t context,
                              const std::string &id);
  Result<PromptRecord> makeNatural(const Corpus &c, int64_t context,
                                   const std::string &id);
  std::string number() { return std::to_string(rng_.between(10000, 99999)); }
  std::string name();
  std::string varName();
  std::string code();

  const model::GGUFFile &file_;
  const model::Tokenizer &tok_;
  const PromptPlan &plan_;
  Rng rng_;
  Corpus filler_, licences_, copyrights_, headers_;
};

std::string Generator::name() {
  static constexpr const char *kAdj[] = {
      "amber", "silent", "crimson", "golden", "hollow", "northern", "velvet",
      "rusty", "frozen", "hidden", "copper", "lunar", "quiet", "scarlet"};
  static constexpr const char *kNoun[] = {
      "falcon", "harbor", "lantern", "meadow", "orchid", "river", "summit",
      "tiger", "violin", "willow", "canyon", "ember", "glacier", "pepper"};
  return std::string(kAdj[rng_.below(14)]) + " " + kNoun[rng_.below(14)];
}

std::string Generator::varName() {
  std::string s;
  for (int i = 0; i < 3; ++i)
    s += char('A' + rng_.below(26));
  return s;
}

std::string Generator::code() {
  static constexpr const char kAlpha[] =
      "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789";
  std::string s;
  for (int g = 0; g < 3; ++g) {
    if (g)
      s += '-';
    for (int i = 0; i < 4; ++i)
      s += kAlpha[rng_.below(int64_t(sizeof kAlpha) - 1)];
  }
  return s;
}

Result<std::string> Generator::render(const QASpec &spec, const Corpus &c,
                                      size_t start, size_t count) const {
  std::vector<std::string> body;
  body.reserve(count + spec.inserts.size());
  for (size_t i = 0; i < count; ++i)
    body.push_back(c.lines[(start + i) % c.lines.size()]);
  // Insert from the back so earlier positions stay valid; equal positions
  // keep their given order.
  std::vector<std::pair<double, std::string>> ins = spec.inserts;
  std::stable_sort(ins.begin(), ins.end(),
                   [](auto &a, auto &b) { return a.first < b.first; });
  for (auto it = ins.rbegin(); it != ins.rend(); ++it) {
    auto at = size_t(std::llround(it->first * double(body.size())));
    body.insert(body.begin() + std::ptrdiff_t(std::min(at, body.size())),
                it->second);
  }
  std::string user = spec.instruction + "\n\n" + joinLines(body, 0, body.size()) +
                     "\n" + spec.question;
  return decoder::applyChatTemplate(file_, user);
}

Result<PromptRecord> Generator::makeQA(const QASpec &spec, int64_t context,
                                       const std::string &id) {
  const Corpus &c = filler_;
  const int64_t target = context - plan_.answerReserve;
  const size_t start = size_t(rng_.below(int64_t(c.lines.size())));
  // Grow the filler line count by bisection on the exact token count.
  size_t lo = 0, hi = 16;
  auto tokensFor = [&](size_t n) -> Result<int64_t> {
    Result<std::string> t = render(spec, c, start, n);
    if (!t)
      return t.status();
    return countTokens(*t);
  };
  for (;;) {
    Result<int64_t> n = tokensFor(hi);
    if (!n)
      return n.status();
    if (*n > target)
      break;
    lo = hi;
    hi *= 2;
    if (hi > c.lines.size())
      return Status::error("filler corpus too small for " + id);
  }
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    Result<int64_t> n = tokensFor(mid);
    if (!n)
      return n.status();
    (*n > target ? hi : lo) = mid;
  }
  Result<std::string> text = render(spec, c, start, lo);
  if (!text)
    return text.status();
  PromptRecord p;
  p.id = id;
  p.task = spec.task;
  p.context = context;
  p.text = text.take();
  p.tokens = countTokens(p.text);
  p.answer = spec.answer;
  p.source = sourceOf(c, start % c.lines.size(),
                      std::min(c.lines.size(), start + lo));
  return p;
}

Result<PromptRecord> Generator::makeNatural(const Corpus &c, int64_t context,
                                            const std::string &id) {
  const int64_t target = context - plan_.naturalReserve;
  const int64_t need = plan_.continuationTokens;
  // A cut is clean after line i when line i + 1 starts a new pre-token
  // (non-empty, no leading space): the tokenisation of prompt + rest then
  // splits exactly there. Checked below anyway.
  auto cleanCut = [&](size_t next) {
    return next < c.lines.size() && !c.lines[next].empty() &&
           !std::isspace(static_cast<unsigned char>(c.lines[next][0]));
  };
  for (int attempt = 0; attempt < 64; ++attempt) {
    const size_t start = size_t(rng_.below(int64_t(c.lines.size())));
    // Lines enough for the target plus the continuation (per-line counts
    // overestimate: indentation merges with newlines in running text).
    int64_t total = 0;
    size_t end = start;
    while (end < c.lines.size() && total < target + target / 2 + 4 * need) {
      total += int64_t(tok_.encode(c.lines[end] + "\n", true).size());
      ++end;
    }
    if (total < target + target / 2 + 4 * need)
      continue; // ran off the end of the corpus
    std::vector<size_t> cuts;
    for (size_t i = start + 1; i + 1 < end; ++i)
      if (cleanCut(i))
        cuts.push_back(i);
    // The last clean cut whose prompt fits (exact counts, bisection).
    size_t lo = 0, hi = cuts.size(); // answer in [lo, hi): fits(cuts[lo])?
    auto fits = [&](size_t k) {
      return countTokens(joinLines(c.lines, start, cuts[k])) <= target;
    };
    if (cuts.empty() || !fits(0))
      continue;
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    const size_t cut = cuts[lo];
    const int64_t count = countTokens(joinLines(c.lines, start, cut));
    if (count < target - 64)
      continue;
    const std::string prompt = joinLines(c.lines, start, cut);
    const std::string rest = joinLines(c.lines, cut, end);
    std::vector<int32_t> a = tok_.encode(prompt, true),
                         b = tok_.encode(rest, true),
                         ab = tok_.encode(prompt + rest, true);
    if (int64_t(b.size()) < need || ab.size() < a.size() + size_t(need) ||
        !std::equal(a.begin(), a.end(), ab.begin()) ||
        !std::equal(b.begin(), b.begin() + need,
                    ab.begin() + std::ptrdiff_t(a.size())))
      continue; // the cut does not split the tokenisation cleanly
    PromptRecord p;
    p.id = id;
    p.task = "natural";
    p.context = context;
    p.text = prompt;
    p.tokens = countTokens(prompt);
    p.continuation.assign(b.begin(), b.begin() + need);
    p.source = c.name + ": " + sourceOf(c, start, cut);
    return p;
  }
  return Status::error("no clean natural-text window found for " + id);
}

Result<std::vector<PromptRecord>> Generator::run() {
  licences_ = licences();
  copyrights_ = copyrights();
  headers_ = headers();
  if (licences_.lines.size() < 1000 || copyrights_.lines.size() < 1000 ||
      headers_.lines.size() < 1000)
    return Status::error(
        "too little text under /usr/share/common-licenses, "
        "/usr/share/doc/*/copyright or /usr/include/c++/12/bits");
  // QA filler: licences and copyright files (prose, not code).
  filler_ = licences_;
  filler_.name = "filler";
  for (size_t i = 0; i < copyrights_.lines.size(); ++i) {
    filler_.lines.push_back(copyrights_.lines[i]);
    filler_.fileOf.push_back(int32_t(filler_.files.size()) +
                             copyrights_.fileOf[i]);
  }
  filler_.files.insert(filler_.files.end(), copyrights_.files.begin(),
                       copyrights_.files.end());
  const Corpus *natural[] = {&licences_, &headers_, &copyrights_};

  std::vector<PromptRecord> out;
  auto add = [&](Result<PromptRecord> r) -> Status {
    if (!r)
      return r.status();
    out.push_back(r.take());
    return Status::success();
  };
  int64_t naturalIndex = 0;
  for (size_t ci = 0; ci < plan_.contexts.size(); ++ci) {
    const int64_t ctx = plan_.contexts[ci];
    const std::string cs = std::to_string(ctx);
    for (int64_t depth : plan_.depths) {
      QASpec s;
      s.task = "passkey";
      s.answer = number();
      s.instruction = "There is an important pass key hidden inside a lot of "
                      "irrelevant text. Find it and memorize it. I will quiz "
                      "you about it.";
      s.question = "What is the pass key? Answer with the number only.";
      s.inserts.push_back({double(depth) / 100.0,
                           "The pass key is " + s.answer + ". Remember it. " +
                               s.answer + " is the pass key."});
      Result<PromptRecord> r =
          makeQA(s, ctx, "passkey-" + cs + "-d" + std::to_string(depth));
      if (r)
        r->depth = depth;
      CONDENSATE_RETURN_IF_ERROR(add(std::move(r)));
    }
    for (int64_t i = 0; i < plan_.multikey[ci]; ++i) {
      QASpec s;
      s.task = "multikey";
      s.instruction = "Hidden inside the following text are several secret "
                      "numbers, each belonging to a name. Memorize them. I "
                      "will quiz you about one of them.";
      std::vector<std::string> names;
      while (names.size() < 6) {
        std::string n = name();
        if (std::find(names.begin(), names.end(), n) == names.end())
          names.push_back(n);
      }
      const size_t asked = size_t(rng_.below(6));
      for (size_t k = 0; k < names.size(); ++k) {
        std::string v = number();
        if (k == asked)
          s.answer = v;
        s.inserts.push_back({double(rng_.below(1001)) / 1000.0,
                             "The secret number for the " + names[k] +
                                 " is " + v + "."});
      }
      s.question = "What is the secret number for the " + names[asked] +
                   "? Answer with the number only.";
      CONDENSATE_RETURN_IF_ERROR(
          add(makeQA(s, ctx, "multikey-" + cs + "-" + std::to_string(i))));
    }
    for (int64_t i = 0; i < plan_.vartrack[ci]; ++i) {
      QASpec s;
      s.task = "vartrack";
      s.instruction = "The following text contains variable assignments "
                      "(lines starting with VAR). Keep track of them. I will "
                      "ask you about one variable.";
      std::vector<std::string> vars;
      while (vars.size() < 6) {
        std::string v = varName();
        if (std::find(vars.begin(), vars.end(), v) == vars.end())
          vars.push_back(v);
      }
      // Chain A: vars 0..2 carrying the answer; chain B: 3..5, a distractor.
      // Each chain's statements appear in order, interleaved at random.
      for (int chain = 0; chain < 2; ++chain) {
        std::string value = number();
        if (chain == 0)
          s.answer = value;
        std::vector<double> at;
        for (int k = 0; k < 3; ++k)
          at.push_back(double(rng_.below(1001)) / 1000.0);
        std::sort(at.begin(), at.end());
        const size_t b = size_t(chain) * 3;
        s.inserts.push_back({at[0], "VAR " + vars[b] + " = " + value + "."});
        s.inserts.push_back(
            {at[1], "VAR " + vars[b + 1] + " = VAR " + vars[b] + "."});
        s.inserts.push_back(
            {at[2], "VAR " + vars[b + 2] + " = VAR " + vars[b + 1] + "."});
      }
      s.question = "What is the numeric value of VAR " + vars[2] +
                   "? Answer with the number only.";
      CONDENSATE_RETURN_IF_ERROR(
          add(makeQA(s, ctx, "vartrack-" + cs + "-" + std::to_string(i))));
    }
    for (int64_t i = 0; i < plan_.copy[ci]; ++i) {
      QASpec s;
      s.task = "copy";
      s.answer = code();
      s.instruction = "Memorize the reference string given at the start of "
                      "the text.\n\nThe reference string is: " +
                      s.answer;
      s.question = "Repeat the reference string exactly.";
      CONDENSATE_RETURN_IF_ERROR(
          add(makeQA(s, ctx, "copy-" + cs + "-" + std::to_string(i))));
    }
    for (int64_t i = 0; i < plan_.natural[ci]; ++i) {
      const Corpus &c = *natural[size_t(naturalIndex++ % 3)];
      CONDENSATE_RETURN_IF_ERROR(add(
          makeNatural(c, ctx, "natural-" + cs + "-" + std::to_string(i))));
    }
  }
  return out;
}

} // namespace

PromptPlan defaultPlan() {
  PromptPlan p;
  p.contexts = {512, 1024, 2048, 4096, 8192};
  p.depths = {0, 25, 50, 75, 100};
  // Sized to run in under an hour on 2 cores (8K prefills cost ~1 min
  // each): every passkey depth everywhere, the other tasks thinner.
  p.multikey = {1, 1, 1, 1, 0};
  p.vartrack = {1, 1, 1, 1, 0};
  p.copy = {1, 1, 1, 1, 0};
  p.natural = {4, 4, 3, 2, 1};
  return p;
}

Result<PromptPlan> planFor(const std::vector<int64_t> &contexts) {
  const PromptPlan full = defaultPlan();
  if (contexts.empty())
    return full;
  PromptPlan p = full;
  p.contexts.clear();
  p.multikey.clear();
  p.vartrack.clear();
  p.copy.clear();
  p.natural.clear();
  for (int64_t ctx : contexts) {
    if (ctx < kMinPlanContext || ctx > kMaxPlanContext)
      return Status::error("context " + std::to_string(ctx) + " is outside [" +
                           std::to_string(kMinPlanContext) + ", " +
                           std::to_string(kMaxPlanContext) + "]");
    if (std::find(p.contexts.begin(), p.contexts.end(), ctx) !=
        p.contexts.end())
      return Status::error("context " + std::to_string(ctx) +
                           " is listed twice");
    p.contexts.push_back(ctx);
    auto it = std::find(full.contexts.begin(), full.contexts.end(), ctx);
    if (it != full.contexts.end()) {
      size_t i = size_t(it - full.contexts.begin());
      p.multikey.push_back(full.multikey[i]);
      p.vartrack.push_back(full.vartrack[i]);
      p.copy.push_back(full.copy[i]);
      p.natural.push_back(full.natural[i]);
      continue;
    }
    // Other lengths: every passkey depth, one multi-needle prompt and one
    // natural-text window (longer contexts: each prefill costs minutes).
    p.multikey.push_back(1);
    p.vartrack.push_back(ctx <= 4096 ? 1 : 0);
    p.copy.push_back(ctx <= 4096 ? 1 : 0);
    p.natural.push_back(1);
  }
  return p;
}

std::vector<int32_t> promptTokens(const model::Tokenizer &tok,
                                  const PromptRecord &p) {
  std::vector<int32_t> ids = tok.encode(p.text, /*parseSpecial=*/true);
  if (tok.addBosToken() && tok.bosId() >= 0)
    ids.insert(ids.begin(), tok.bosId());
  return ids;
}

Result<std::vector<PromptRecord>> generatePrompts(const model::GGUFFile &file,
                                                  const model::Tokenizer &tok,
                                                  const PromptPlan &plan,
                                                  uint64_t seed) {
  Generator g(file, tok, plan, seed);
  return g.run();
}

Status writePrompts(const std::string &path,
                    const std::vector<PromptRecord> &prompts) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return Status::error("cannot write '" + path + "'");
  for (const PromptRecord &p : prompts) {
    json j;
    j["id"] = p.id;
    j["task"] = p.task;
    j["context"] = p.context;
    if (p.depth >= 0)
      j["depth"] = p.depth;
    j["tokens"] = p.tokens;
    if (!p.answer.empty())
      j["answer"] = p.answer;
    if (!p.continuation.empty())
      j["continuation"] = p.continuation;
    j["source"] = p.source;
    j["text"] = p.text;
    out << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.close();
  if (!out)
    return Status::error("error writing '" + path + "'");
  return Status::success();
}

Result<std::vector<PromptRecord>> readPrompts(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot read '" + path + "'");
  std::vector<PromptRecord> out;
  std::string line;
  int64_t lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty())
      continue;
    try {
      json j = json::parse(line);
      PromptRecord p;
      p.id = j.at("id").get<std::string>();
      p.task = j.at("task").get<std::string>();
      p.context = j.at("context").get<int64_t>();
      p.depth = j.value("depth", int64_t(-1));
      p.tokens = j.at("tokens").get<int64_t>();
      p.answer = j.value("answer", std::string());
      if (j.contains("continuation"))
        p.continuation = j["continuation"].get<std::vector<int32_t>>();
      p.source = j.value("source", std::string());
      p.text = j.at("text").get<std::string>();
      out.push_back(std::move(p));
    } catch (const std::exception &e) {
      return Status::error(path + ":" + std::to_string(lineNo) + ": " +
                           e.what());
    }
  }
  return out;
}

bool scoreAnswer(const std::string &task, const std::string &expected,
                 const std::string &answer) {
  if (task == "copy")
    return answer.find(expected) != std::string::npos;
  size_t i = 0;
  while (i < answer.size() && !std::isdigit(static_cast<unsigned char>(answer[i])))
    ++i;
  size_t j = i;
  while (j < answer.size() && std::isdigit(static_cast<unsigned char>(answer[j])))
    ++j;
  return j > i && answer.substr(i, j - i) == expected;
}

} // namespace condensate::study

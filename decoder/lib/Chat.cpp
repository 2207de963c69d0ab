//===- Chat.cpp - A model's ChatML chat template --------------------------===//
//
// Recognises ChatML and Gemma templates and renders one user turn plus the
// assistant generation prompt, as the template would.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Chat.h"

#include "condensate/Model/GGUF.h"

namespace condensate::decoder {

namespace {

/// Template string literals spell a newline either as a real one or as the
/// two characters backslash, n.
std::string unescape(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

} // namespace

std::string defaultSystemPrompt(const std::string &tmpl) {
  for (const char *open : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
    size_t start = tmpl.find(open);
    if (start == std::string::npos)
      continue;
    start += std::string(open).size();
    size_t end = tmpl.find("<|im_end|>", start);
    if (end == std::string::npos)
      return "";
    std::string text = tmpl.substr(start, end - start);
    // A Jinja expression (e.g. message['content']) is no default prompt.
    if (text.find('\'') != std::string::npos ||
        text.find('{') != std::string::npos)
      return "";
    return unescape(text);
  }
  return "";
}

Result<std::string> applyChatTemplate(const std::string &tmpl,
                                      const std::string &user,
                                      const std::string &system) {
  if (tmpl.find("<start_of_turn>") != std::string::npos) {
    // Gemma's turns; a system prompt opens the first user turn.
    std::string first = system.empty() ? user : system + "\n\n" + user;
    return "<start_of_turn>user\n" + first +
           "<end_of_turn>\n<start_of_turn>model\n";
  }
  if (!tmpl.empty() && tmpl.find("<|im_start|>") == std::string::npos)
    return Status::error("the model's chat template is neither ChatML "
                         "(<|im_start|>...<|im_end|>) nor Gemma's "
                         "(<start_of_turn>...<end_of_turn>); only those are "
                         "supported");
  std::string sys = system.empty() ? defaultSystemPrompt(tmpl) : system;
  std::string out;
  if (!sys.empty())
    out += "<|im_start|>system\n" + sys + "<|im_end|>\n";
  out += "<|im_start|>user\n" + user + "<|im_end|>\n";
  out += "<|im_start|>assistant\n";
  return out;
}

Result<std::string> applyChatTemplate(const model::GGUFFile &file,
                                      const std::string &user,
                                      const std::string &system) {
  std::string tmpl;
  if (file.has("tokenizer.chat_template")) {
    Result<std::string> t = file.getString("tokenizer.chat_template");
    if (!t)
      return t.status();
    tmpl = *t;
  } else if (file.has("general.architecture")) {
    // A Gemma file without a template (a base model) still speaks Gemma's.
    Result<std::string> arch = file.getString("general.architecture");
    if (arch && arch->rfind("gemma", 0) == 0)
      tmpl = "<start_of_turn>";
  }
  return applyChatTemplate(tmpl, user, system);
}

} // namespace condensate::decoder

//===- Chat.h - A model's ChatML chat template -----------------*- C++ -*-===//
//
// condensate does not interpret Jinja. It recognises ChatML templates
// (`<|im_start|>role\n...<|im_end|>\n`, as SmolLM2 and Qwen2 ship) and
// Gemma's (`<start_of_turn>role\n...<end_of_turn>\n`, the system prompt
// opening the first user turn; also for a Gemma file with no template) and
// reproduces what they render for one user message with the generation
// prompt, including the default system prompt a ChatML template inserts
// when the conversation has none.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_CHAT_H
#define CONDENSATE_DECODER_CHAT_H

#include "condensate/Support/Status.h"

#include <string>

namespace condensate::model {
class GGUFFile;
} // namespace condensate::model

namespace condensate::decoder {

/// The system prompt a ChatML template inserts when the first message is
/// not a system message (the literal after "<|im_start|>system\n"), or "".
std::string defaultSystemPrompt(const std::string &chatTemplate);

/// `user` rendered by the template `chatTemplate` (empty: plain ChatML)
/// with the assistant generation prompt appended. An explicit non-empty
/// `system` replaces the template's default. Errors if the template is
/// neither ChatML nor Gemma's.
Result<std::string> applyChatTemplate(const std::string &chatTemplate,
                                      const std::string &user,
                                      const std::string &system = "");

/// applyChatTemplate with the file's tokenizer.chat_template.
Result<std::string> applyChatTemplate(const model::GGUFFile &file,
                                      const std::string &user,
                                      const std::string &system = "");

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_CHAT_H

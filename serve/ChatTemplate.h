//===- ChatTemplate.h - chat messages to a prompt ---------------*- C++ -*-===//
//
// /v1/chat/completions turns messages into one prompt with the model's chat
// format. Hugging Face keeps that format as a Jinja template in
// tokenizer_config.json, which the artifact does not carry and which would
// need a Jinja engine (none is packaged for Debian); the formats the common
// families' templates produce are written out here instead, chosen by the
// special tokens the tokenizer has (or --chat-template):
//
//   chatml   <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
//            (SmolLM2, Qwen, ...; stop at <|im_end|>)
//   llama3   <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
//            (stop at <|eot_id|>)
//   llama2   [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer</s><s>[INST] ...
//            (Llama 2, Mistral v0.1; only by --chat-template)
//   gemma    <start_of_turn>user\ncontent<end_of_turn>\n ... <start_of_turn>model\n
//            (the system message opens the first user turn; stop at <end_of_turn>)
//   phi3     <|role|>\ncontent<|end|>\n ... <|assistant|>\n (stop at <|end|>)
//   plain    "User: content\n" ... "Assistant:" for tokenizers without chat
//            tokens (the demo model); stops at "\nUser:"
//
// BOS is not written: the tokenizer adds it as it does for any prompt.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_SERVE_CHATTEMPLATE_H
#define QCC_SERVE_CHATTEMPLATE_H

#include "runtime/text/Tokenizer.h"

#include <optional>
#include <string>
#include <vector>

namespace qcc::serve {

enum class ChatFormat { ChatML, Llama3, Llama2, Gemma, Phi3, Plain };

struct ChatMessage {
  std::string role; ///< system, user or assistant
  std::string content;
};

/// "chatml", "llama3", ...; and back (nullopt for an unknown name).
const char *chatFormatName(ChatFormat format);
std::optional<ChatFormat> parseChatFormat(const std::string &name);
/// The names, comma-separated (for --help and errors).
std::string chatFormatList();

/// The format whose special tokens `tokenizer` has; Plain when none.
ChatFormat detectChatFormat(const rt::Tokenizer &tokenizer);

struct ChatPrompt {
  std::string text;                   ///< to encode with special tokens
  std::vector<int64_t> stopIds;       ///< end of turn (beside EOS)
  std::vector<std::string> stopTexts; ///< Plain's "\nUser:"
};

/// The prompt for `messages` followed by the opening of the assistant's
/// turn. Throws std::invalid_argument naming the message for a role other
/// than system, user or assistant.
ChatPrompt renderChat(ChatFormat format,
                      const std::vector<ChatMessage> &messages,
                      const rt::Tokenizer &tokenizer);

} // namespace qcc::serve

#endif // QCC_SERVE_CHATTEMPLATE_H

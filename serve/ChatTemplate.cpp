//===- ChatTemplate.cpp ---------------------------------------------------===//
#include "serve/ChatTemplate.h"

#include <stdexcept>

using namespace qcc::serve;

namespace {

struct FormatName {
  ChatFormat format;
  const char *name;
};
constexpr FormatName kFormats[] = {
    {ChatFormat::ChatML, "chatml"}, {ChatFormat::Llama3, "llama3"},
    {ChatFormat::Llama2, "llama2"}, {ChatFormat::Gemma, "gemma"},
    {ChatFormat::Phi3, "phi3"},     {ChatFormat::Plain, "plain"}};

bool has(const qcc::rt::Tokenizer &t, const char *token) {
  return t.tokenId(token) >= 0;
}

/// Jinja's `trim` (Python's strip()): the templates of Llama 2 and 3 and of
/// Gemma apply it to each message's content.
std::string trim(const std::string &s) {
  const char *ws = " \t\n\r\f\v";
  size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos)
    return "";
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

} // namespace

const char *qcc::serve::chatFormatName(ChatFormat f) {
  for (const FormatName &n : kFormats)
    if (n.format == f)
      return n.name;
  return "plain";
}

std::optional<ChatFormat> qcc::serve::parseChatFormat(const std::string &s) {
  for (const FormatName &n : kFormats)
    if (s == n.name)
      return n.format;
  return std::nullopt;
}

std::string qcc::serve::chatFormatList() {
  std::string out;
  for (const FormatName &n : kFormats)
    out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

ChatFormat qcc::serve::detectChatFormat(const rt::Tokenizer &t) {
  if (has(t, "<|im_start|>") && has(t, "<|im_end|>"))
    return ChatFormat::ChatML;
  if (has(t, "<|start_header_id|>") && has(t, "<|eot_id|>"))
    return ChatFormat::Llama3;
  if (has(t, "<start_of_turn>") && has(t, "<end_of_turn>"))
    return ChatFormat::Gemma;
  if (has(t, "<|user|>") && has(t, "<|assistant|>") && has(t, "<|end|>"))
    return ChatFormat::Phi3;
  return ChatFormat::Plain;
}

ChatPrompt qcc::serve::renderChat(ChatFormat format,
                                  const std::vector<ChatMessage> &messages,
                                  const rt::Tokenizer &tokenizer) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string &role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      throw std::invalid_argument("messages[" + std::to_string(i) +
                                  "].role: '" + role +
                                  "' is not system, user or assistant");
  }
  ChatPrompt p;
  auto stopToken = [&](const char *token) {
    int64_t id = tokenizer.tokenId(token);
    if (id >= 0)
      p.stopIds.push_back(id);
  };
  switch (format) {
  case ChatFormat::ChatML:
    for (const ChatMessage &m : messages)
      p.text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    p.text += "<|im_start|>assistant\n";
    stopToken("<|im_end|>");
    break;
  case ChatFormat::Llama3:
    for (const ChatMessage &m : messages)
      p.text += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" +
                trim(m.content) + "<|eot_id|>";
    p.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    stopToken("<|eot_id|>");
    break;
  case ChatFormat::Llama2: {
    // Llama 2's template: the system message inside the first [INST]; every
    // user turn after the first opens with BOS again.
    std::string system;
    bool first = true;
    for (const ChatMessage &m : messages) {
      if (m.role == "system") {
        system += m.content;
      } else if (m.role == "user") {
        std::string content = m.content;
        if (!system.empty())
          content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
        system.clear();
        p.text += std::string(first ? "" : "<s>") + "[INST] " + trim(content) +
                  " [/INST]";
        first = false;
      } else {
        // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on
        // " " + string + " </s>".
        p.text += ' ';
        p.text += trim(m.content);
        p.text += " </s>";
      }
    }
    break;
  }
  case ChatFormat::Gemma: {
    std::string system;
    for (const ChatMessage &m : messages) {
      if (m.role == "system") {
        system += m.content + "\n\n";
        continue;
      }
      std::string content = trim(m.content);
      if (m.role == "user") {
        content = system + content;
        system.clear();
      }
      p.text += "<start_of_turn>" +
                std::string(m.role == "assistant" ? "model" : "user") + "\n" +
                content + "<end_of_turn>\n";
    }
    p.text += "<start_of_turn>model\n";
    stopToken("<end_of_turn>");
    break;
  }
  case ChatFormat::Phi3:
    for (const ChatMessage &m : messages)
      p.text += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    p.text += "<|assistant|>\n";
    stopToken("<|end|>");
    break;
  case ChatFormat::Plain:
    for (const ChatMessage &m : messages) {
      std::string role = m.role;
      role[0] = (char)(role[0] - 'a' + 'A');
      p.text += role + ": " + m.content + "\n";
    }
    p.text += "Assistant:";
    p.stopTexts.push_back("\nUser:");
    break;
  }
  return p;
}

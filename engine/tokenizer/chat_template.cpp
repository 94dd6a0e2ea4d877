#include "engine/tokenizer/chat_template.h"

#include <array>
#include <cstddef>
#include <string>

namespace lifeline::chat_template {
namespace {

struct FamilyName {
  Family family;
  const char* name;
};

constexpr std::array<FamilyName, 7> kFamilyNames = {{
    {Family::kChatML, "chatml"},
    {Family::kLlama2, "llama2"},
    {Family::kLlama3, "llama3"},
    {Family::kMistral, "mistral"},
    {Family::kGemma, "gemma"},
    {Family::kPhi3, "phi3"},
    {Family::kZephyr, "zephyr"},
}};

// ---- Python str.strip() over UTF-8 ----------------------------------------------------------

// The code points Python's str.isspace() accepts (what str.strip() and Jinja's trim remove).
bool IsPythonWhitespace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x1C && cp <= 0x20) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return false;
  }
}

// Decodes the well-formed sequence starting at s[i]; returns its length, 0 when malformed
// (malformed bytes are never whitespace, so strip stops there).
size_t DecodeAt(std::string_view s, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  size_t len = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3
                         : (b0 & 0xF8) == 0xF0     ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t v = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3F);
  }
  constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMinForLen[len]) return 0;  // overlong encodings are malformed, not whitespace
  *cp = v;
  return len;
}

std::string_view PyStrip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    uint32_t cp = 0;
    const size_t len = DecodeAt(s, begin, &cp);
    if (len == 0 || !IsPythonWhitespace(cp)) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // walk back to the lead byte of the last character
    while (start > begin && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) {
      --start;
    }
    uint32_t cp = 0;
    const size_t len = DecodeAt(s, start, &cp);
    if (len != end - start || !IsPythonWhitespace(cp)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

// ---- validation -----------------------------------------------------------------------------

bool Contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

Status BadRole(size_t i, std::string_view role, Family family, const char* allowed) {
  return InvalidArgument("messages[" + std::to_string(i) + "].role: '" + std::string(role) +
                         "' is not supported by chat template '" + Name(family) +
                         "' (allowed: " + allowed + ")");
}

// Roles any of system/user/assistant (plus tool when allow_tool), in any order.
Status CheckRolesFree(Family family, std::span<const Message> messages, bool allow_tool) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r == "system" || r == "user" || r == "assistant") continue;
    if (allow_tool && r == "tool") continue;
    return BadRole(i, r, family, allow_tool ? "system, user, assistant, tool"
                                            : "system, user, assistant");
  }
  return Status::Ok();
}

// The rule the Llama 2, Mistral and Gemma templates enforce with raise_exception: an optional
// leading system message, then user/assistant strictly alternating starting with user.
Status CheckAlternating(Family family, std::span<const Message> messages) {
  const size_t first = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant") {
      return BadRole(i, r, family, "system, user, assistant");
    }
    const char* expected = (i - first) % 2 == 0 ? "user" : "assistant";
    if (r != expected) {
      return InvalidArgument("messages[" + std::to_string(i) + "].role: expected '" + expected +
                             "' but got '" + r + "'; chat template '" + Name(family) +
                             "' needs an optional first system message, then alternating "
                             "user/assistant turns starting with user");
    }
  }
  return Status::Ok();
}

// ---- renderers ------------------------------------------------------------------------------

std::string RenderChatML(std::span<const Message> messages, bool add_generation_prompt) {
  std::string out;
  for (const Message& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderLlama2(std::span<const Message> messages, std::string_view bos,
                         std::string_view eos) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  std::string out;
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    // The system block joins the first turn before stripping, exactly as the template does.
    std::string content = (has_system && i == 1)
                              ? "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + m.content
                              : m.content;
    if (m.role == "user") {
      out.append(bos).append("[INST] ").append(PyStrip(content)).append(" [/INST]");
    } else {
      out.append(" ").append(PyStrip(content)).append(" ").append(eos);
    }
  }
  return out;
}

std::string RenderLlama3(std::span<const Message> messages, bool add_generation_prompt,
                         std::string_view bos) {
  std::string out;
  if (!messages.empty()) out.append(bos);
  for (const Message& m : messages) {
    out.append("<|start_header_id|>").append(m.role).append("<|end_header_id|>\n\n");
    out.append(PyStrip(m.content)).append("<|eot_id|>");
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string RenderMistral(std::span<const Message> messages, std::string_view bos,
                          std::string_view eos) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  std::string out(bos);
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (m.role == "user") {
      out += " [INST] ";
      if (has_system && i == 1) out += messages[0].content + "\n\n";
      out += m.content + " [/INST]";
    } else {
      out.append(" ").append(m.content).append(eos);
    }
  }
  return out;
}

std::string RenderGemma(std::span<const Message> messages, bool add_generation_prompt,
                        std::string_view bos) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  std::string out(bos);
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    out += "<start_of_turn>";
    out += m.role == "assistant" ? "model" : m.role;
    out += "\n";
    // The system text is not trimmed, only the message content (Gemma 3 template).
    if (has_system && i == 1) out += messages[0].content + "\n\n";
    out.append(PyStrip(m.content)).append("<end_of_turn>\n");
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string RenderPhi3(std::span<const Message> messages, bool add_generation_prompt,
                       std::string_view eos) {
  std::string out;
  for (const Message& m : messages) {
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  if (add_generation_prompt) {
    out += "<|assistant|>\n";
  } else {
    out.append(eos);
  }
  return out;
}

std::string RenderZephyr(std::span<const Message> messages, bool add_generation_prompt,
                         std::string_view eos) {
  std::string out;
  for (const Message& m : messages) {
    out.append("<|").append(m.role).append("|>\n").append(m.content).append(eos).append("\n");
  }
  // The template emits this inside its loop on the last message, so only with a message.
  if (add_generation_prompt && !messages.empty()) out += "<|assistant|>\n";
  return out;
}

}  // namespace

Family Detect(std::string_view t) {
  if (Contains(t, "<|im_start|>")) return Family::kChatML;
  if (Contains(t, "[INST]")) return Contains(t, "<<SYS>>") ? Family::kLlama2 : Family::kMistral;
  if (Contains(t, "<|start_header_id|>")) return Family::kLlama3;
  if (Contains(t, "<start_of_turn>")) return Family::kGemma;
  if (Contains(t, "<|user|>")) {
    if (Contains(t, "<|end|>")) return Family::kPhi3;
    if (Contains(t, "</s>") || Contains(t, "eos_token") || Contains(t, "<|endoftext|>")) {
      return Family::kZephyr;
    }
  }
  return Family::kChatML;
}

Result<Family> FromName(std::string_view name) {
  std::string known;
  for (const FamilyName& f : kFamilyNames) {
    if (name == f.name) return f.family;
    known += known.empty() ? "" : ", ";
    known += f.name;
  }
  return InvalidArgument("chat_template: unknown name '" + std::string(name) +
                         "' (known: " + known + ")");
}

const char* Name(Family family) {
  for (const FamilyName& f : kFamilyNames) {
    if (f.family == family) return f.name;
  }
  return "unknown";
}

Result<std::string> Render(Family family, std::span<const Message> messages,
                           bool add_generation_prompt, std::string_view bos_token,
                           std::string_view eos_token) {
  switch (family) {
    case Family::kChatML:
      LL_RETURN_IF_ERROR(CheckRolesFree(family, messages, /*allow_tool=*/true));
      return RenderChatML(messages, add_generation_prompt);
    case Family::kLlama2:
      LL_RETURN_IF_ERROR(CheckAlternating(family, messages));
      return RenderLlama2(messages, bos_token, eos_token);
    case Family::kLlama3:
      LL_RETURN_IF_ERROR(CheckRolesFree(family, messages, /*allow_tool=*/false));
      return RenderLlama3(messages, add_generation_prompt, bos_token);
    case Family::kMistral:
      LL_RETURN_IF_ERROR(CheckAlternating(family, messages));
      return RenderMistral(messages, bos_token, eos_token);
    case Family::kGemma:
      LL_RETURN_IF_ERROR(CheckAlternating(family, messages));
      return RenderGemma(messages, add_generation_prompt, bos_token);
    case Family::kPhi3:
      LL_RETURN_IF_ERROR(CheckRolesFree(family, messages, /*allow_tool=*/false));
      return RenderPhi3(messages, add_generation_prompt, eos_token);
    case Family::kZephyr:
      LL_RETURN_IF_ERROR(CheckRolesFree(family, messages, /*allow_tool=*/false));
      return RenderZephyr(messages, add_generation_prompt, eos_token);
  }
  return Internal("chat_template: unhandled family " + std::to_string(static_cast<int>(family)));
}

}  // namespace lifeline::chat_template

#include "engine/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline::chat_template {
namespace {

// The conversation every family is rendered for.
const std::vector<Message> kConversation = {
    {"system", "You are terse."},
    {"user", "Hello!"},
    {"assistant", "Hi."},
    {"user", "What is 2+2?"},
};

std::string MustRender(Family f, const std::vector<Message>& msgs, bool gen,
                       std::string_view bos, std::string_view eos) {
  Result<std::string> r = Render(f, msgs, gen, bos, eos);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::string();
}

// Expected strings below are written out by hand from each family's documented format.

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(MustRender(Family::kChatML, kConversation, true, "<s>", "</s>"),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\nHi.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(MustRender(Family::kChatML, {{"user", " keep spaces "}}, false, "", ""),
            "<|im_start|>user\n keep spaces <|im_end|>\n");
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(MustRender(Family::kLlama2, kConversation, true, "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello! [/INST] Hi. </s>"
            "<s>[INST] What is 2+2? [/INST]");
  // Without a system message; contents are stripped; there is no generation prompt.
  EXPECT_EQ(MustRender(Family::kLlama2, {{"user", "  a \n"}, {"assistant", "\tb "}}, false,
                       "<s>", "</s>"),
            "<s>[INST] a [/INST] b </s>");
}

TEST(ChatTemplate, Llama2StripsTheJoinedSystemBlockAsOneString) {
  // strip() applies to "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + user: only the user's
  // trailing space goes; the system's own spaces sit inside and stay.
  EXPECT_EQ(MustRender(Family::kLlama2, {{"system", " S "}, {"user", "U "}}, true, "<s>", "</s>"),
            "<s>[INST] <<SYS>>\n S \n<</SYS>>\n\nU [/INST]");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(MustRender(Family::kLlama3, kConversation, true, "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(MustRender(Family::kLlama3, {{"user", "\n  hi  \n"}}, false, "", ""),
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
}

TEST(ChatTemplate, Mistral) {
  EXPECT_EQ(MustRender(Family::kMistral, kConversation, true, "<s>", "</s>"),
            "<s> [INST] You are terse.\n\nHello! [/INST] Hi.</s> [INST] What is 2+2? [/INST]");
  // Mistral's published v1 example: "<s> [INST] Hello, how are you? [/INST] Fine, and
  // you?</s> [INST] I'm doing great! [/INST] Glad to hear!</s>".
  EXPECT_EQ(MustRender(Family::kMistral,
                       {{"user", "Hello, how are you?"},
                        {"assistant", "Fine, and you?"},
                        {"user", "I'm doing great!"},
                        {"assistant", "Glad to hear!"}},
                       false, "<s>", "</s>"),
            "<s> [INST] Hello, how are you? [/INST] Fine, and you?</s> [INST] I'm doing great! "
            "[/INST] Glad to hear!</s>");
}

TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(MustRender(Family::kGemma, kConversation, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nYou are terse.\n\nHello!<end_of_turn>\n"
            "<start_of_turn>model\nHi.<end_of_turn>\n"
            "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
  // google/gemma-7b-it output as published with llama.cpp's template list (no BOS there).
  EXPECT_EQ(MustRender(Family::kGemma,
                       {{"user", "hello"},
                        {"assistant", "response"},
                        {"user", "again"},
                        {"assistant", "response"}},
                       false, "", ""),
            "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\nresponse<end_of_turn>\n"
            "<start_of_turn>user\nagain<end_of_turn>\n<start_of_turn>model\nresponse<end_of_turn>\n");
}

TEST(ChatTemplate, Phi3) {
  const std::string body =
      "<|system|>\nYou are terse.<|end|>\n"
      "<|user|>\nHello!<|end|>\n"
      "<|assistant|>\nHi.<|end|>\n"
      "<|user|>\nWhat is 2+2?<|end|>\n";
  EXPECT_EQ(MustRender(Family::kPhi3, kConversation, true, "<s>", "<|endoftext|>"),
            body + "<|assistant|>\n");
  // Without a generation prompt the template closes with eos_token.
  EXPECT_EQ(MustRender(Family::kPhi3, kConversation, false, "<s>", "<|endoftext|>"),
            body + "<|endoftext|>");
}

TEST(ChatTemplate, Zephyr) {
  EXPECT_EQ(MustRender(Family::kZephyr, kConversation, true, "<s>", "</s>"),
            "<|system|>\nYou are terse.</s>\n"
            "<|user|>\nHello!</s>\n"
            "<|assistant|>\nHi.</s>\n"
            "<|user|>\nWhat is 2+2?</s>\n"
            "<|assistant|>\n");
  EXPECT_EQ(MustRender(Family::kZephyr, {{"user", "x"}}, false, "<s>", "</s>"),
            "<|user|>\nx</s>\n");
}

TEST(ChatTemplate, TrimFollowsPythonWhitespace) {
  // U+3000 ideographic space, U+00A0 no-break space and U+2028 line separator are whitespace
  // for Python's str.strip(); U+200B zero-width space is not.
  EXPECT_EQ(MustRender(Family::kLlama3, {{"user", "\u3000\u00a0hi\u2028 "}}, false, "", ""),
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
  EXPECT_EQ(MustRender(Family::kLlama3, {{"user", "\u200bhi"}}, false, "", ""),
            "<|start_header_id|>user<|end_header_id|>\n\n\u200bhi<|eot_id|>");
  EXPECT_EQ(MustRender(Family::kGemma, {{"user", " \t\n "}}, false, "", ""),
            "<start_of_turn>user\n<end_of_turn>\n");
}

TEST(ChatTemplate, GenerationPromptOnlyWhereTheFamilyHasOne) {
  const std::vector<Message> one = {{"user", "q"}};
  EXPECT_EQ(MustRender(Family::kChatML, one, false, "", ""), "<|im_start|>user\nq<|im_end|>\n");
  EXPECT_EQ(MustRender(Family::kGemma, one, false, "", ""), "<start_of_turn>user\nq<end_of_turn>\n");
  // Llama 2 and Mistral user turns already end in [/INST].
  EXPECT_EQ(MustRender(Family::kMistral, one, true, "<s>", "</s>"),
            MustRender(Family::kMistral, one, false, "<s>", "</s>"));
}

TEST(ChatTemplate, RejectsUnknownRolesNamingTheIndex) {
  const std::vector<Message> msgs = {{"system", "s"}, {"user", "u"}, {"robot", "r"}};
  for (Family f : {Family::kChatML, Family::kLlama2, Family::kLlama3, Family::kMistral,
                   Family::kGemma, Family::kPhi3, Family::kZephyr}) {
    Result<std::string> r = Render(f, msgs, true, "<s>", "</s>");
    ASSERT_FALSE(r.ok()) << Name(f);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("messages[2].role"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("robot"), std::string::npos) << r.status().message();
  }
}

TEST(ChatTemplate, ToolRoleOnlyWhereSupported) {
  const std::vector<Message> msgs = {{"user", "u"}, {"tool", "{\"x\":1}"}};
  EXPECT_EQ(MustRender(Family::kChatML, msgs, false, "", ""),
            "<|im_start|>user\nu<|im_end|>\n<|im_start|>tool\n{\"x\":1}<|im_end|>\n");
  Result<std::string> r = Render(Family::kLlama3, msgs, false, "", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("messages[1].role"), std::string::npos);
}

TEST(ChatTemplate, AlternationEnforcedWhereTheOfficialTemplateRaises) {
  struct Case {
    Family family;
    std::vector<Message> msgs;
    const char* field;
  };
  const std::vector<Case> cases = {
      {Family::kLlama2, {{"user", "a"}, {"user", "b"}}, "messages[1].role"},
      {Family::kMistral, {{"assistant", "a"}}, "messages[0].role"},
      {Family::kMistral, {{"user", "a"}, {"system", "b"}}, "messages[1].role"},
      {Family::kGemma, {{"system", "s"}, {"assistant", "a"}}, "messages[1].role"},
  };
  for (const Case& c : cases) {
    Result<std::string> r = Render(c.family, c.msgs, true, "<s>", "</s>");
    ASSERT_FALSE(r.ok()) << Name(c.family);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
  }
  // Families whose templates accept any order still render it.
  const std::vector<Message> two_users = {{"user", "a"}, {"user", "b"}};
  EXPECT_TRUE(Render(Family::kChatML, two_users, true, "", "").ok());
  EXPECT_TRUE(Render(Family::kLlama3, two_users, true, "", "").ok());
}

// ---- detection from real template text -------------------------------------------------------

TEST(ChatTemplateDetect, RealTemplates) {
  // teknium/OpenHermes-2.5-Mistral-7B
  const char* chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  // meta-llama/Llama-2-7b-chat-hf
  const char* llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
      "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
      "{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
      "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
      "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
      "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] "
      "' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + "
      "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
  // mistralai/Mistral-7B-Instruct-v0.1
  const char* mistral =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
      "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
      "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
      "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
      "{{ message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and "
      "assistant roles are supported!') }}{% endif %}{% endfor %}";
  // meta-llama/Meta-Llama-3-8B-Instruct
  const char* llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] "
      "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
      "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  // google/gemma-7b-it
  const char* gemma =
      "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
      "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
      "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% "
      "endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
      "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{'<start_of_turn>model\\n'}}{% endif %}";
  // microsoft/Phi-3-mini-4k-instruct
  const char* phi3 =
      "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + "
      "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}"
      "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == "
      "'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}"
      "{{ eos_token }}{% endif %}";
  // HuggingFaceH4/zephyr-7b-beta
  const char* zephyr =
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
      "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
      "'<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
      "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
      "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
      "{% endfor %}";
  EXPECT_EQ(Detect(chatml), Family::kChatML);
  EXPECT_EQ(Detect(llama2), Family::kLlama2);
  EXPECT_EQ(Detect(mistral), Family::kMistral);
  EXPECT_EQ(Detect(llama3), Family::kLlama3);
  EXPECT_EQ(Detect(gemma), Family::kGemma);
  EXPECT_EQ(Detect(phi3), Family::kPhi3);
  EXPECT_EQ(Detect(zephyr), Family::kZephyr);
  EXPECT_EQ(Detect("<|user|>\n{{ content }}</s>"), Family::kZephyr);
}

TEST(ChatTemplateDetect, UnknownFallsBackToChatML) {
  EXPECT_EQ(Detect(""), Family::kChatML);
  EXPECT_EQ(Detect("{% for m in messages %}USER: {{ m.content }}\n{% endfor %}"), Family::kChatML);
}

TEST(ChatTemplateNames, RoundTripAndUnknown) {
  for (Family f : {Family::kChatML, Family::kLlama2, Family::kLlama3, Family::kMistral,
                   Family::kGemma, Family::kPhi3, Family::kZephyr}) {
    Result<Family> back = FromName(Name(f));
    ASSERT_TRUE(back.ok()) << Name(f);
    EXPECT_EQ(back.value(), f);
  }
  EXPECT_EQ(FromName("chatml").value(), Family::kChatML);
  Result<Family> bad = FromName("vicuna");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("vicuna"), std::string::npos);
  EXPECT_NE(bad.status().message().find("chatml"), std::string::npos);
}

}  // namespace
}  // namespace lifeline::chat_template

// Hugging Face globals and the shapes of real chat templates; strftime_now with a fixed clock.
//
// Every expected string in this file was produced by Python jinja2 3.x configured the way
// Hugging Face transformers configures it (ImmutableSandboxedEnvironment, trim_blocks=True,
// lstrip_blocks=True, jinja2.ext.loopcontrols, tojson = json.dumps(ensure_ascii=False),
// raise_exception, strftime_now at a fixed instant), never written by hand. Globals are JSON
// text parsed in order (nlohmann::ordered_json), as json.loads keeps dict order in Python.
#include <string>

#include <gtest/gtest.h>

#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

// strftime_now formats the injected clock in UTC (2024-07-26T12:00:00Z).
TEST(JinjaClock, StrftimeNowUsesInjectedClock) {
  EXPECT_EQ(RAt("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
  EXPECT_EQ(RAt("{{ strftime_now('%Y-%m-%d') }}"), "2024-07-26");
  EXPECT_EQ(RAt("{{ strftime_now('%H:%M:%S %A %B') }}"), "12:00:00 Friday July");
  EXPECT_EQ(RAt("{%- set date_string = strftime_now('%d %B %Y') %}Today Date: {{ date_string }}"),
            "Today Date: 26 July 2024");
}

// The Llama-3 instruct template: bos_token once, header per message, trimmed content.
TEST(JinjaHuggingFace, Llama3StyleTemplate) {
  EXPECT_EQ(R(R"({% set loop_messages = messages %}{% for message in loop_messages %})"
              R"({% set content = '<|start_header_id|>' + message['role'] + )"
              R"('<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %})"
              R"({% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %})"
              R"({{ content }}{% endfor %}{% if add_generation_prompt %})"
              R"({{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})",
              J(R"({"bos_token": "<|begin_of_text|>", "add_generation_prompt": true, )"
              R"("messages": [{"role": "system", "content": "Be brief. "}, {"role": "user", )"
              R"("content": " Hi"}, {"role": "assistant", "content": "Hello."}, )"
              R"({"role": "user", "content": "2+2?"}]})")),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
            "\n"
            "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
            "\n"
            "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
            "\n"
            "Hello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
            "\n"
            "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
            "\n");
}

// messages[0]['role'] == 'system' picks the system prompt and loops over the rest.
TEST(JinjaHuggingFace, SystemMessageSplitOff) {
  const char* const kTemplate =
      R"j({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = 'You are a helpful assistant.' %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '<|im_start|>system\n' + system_message + '<|im_end|>\n' }}
{%- for message in loop_messages %}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)j";
  EXPECT_EQ(R(kTemplate,
              J(R"({"add_generation_prompt": true, "messages": [{"role": "system", )"
              R"("content": "S"}, {"role": "user", "content": "U"}]})")),
            "<|im_start|>system\n"
            "S<|im_end|>\n"
            "<|im_start|>user\n"
            "U<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(R(kTemplate,
              J(R"({"add_generation_prompt": false, "messages": [{"role": "user", )"
              R"("content": "U"}, {"role": "assistant", "content": "A"}]})")),
            "<|im_start|>system\n"
            "You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n"
            "U<|im_end|>\n"
            "<|im_start|>assistant\n"
            "A<|im_end|>\n");
}

// Content may be a string or a list of typed parts.
TEST(JinjaHuggingFace, ContentPartsCheckedWithIsString) {
  EXPECT_EQ(R(R"j({%- for message in messages %}
{{- message.role }}:
{%- if message.content is string %}
{{- message.content }}
{%- else %}
{%- for part in message.content %}
{%- if part.type == 'text' %}{{ part.text }}{% elif part.type == 'image' %}<image>{% endif %}
{%- endfor %}
{%- endif %}
|
{%- endfor %})j",
              J(R"({"messages": [{"role": "user", "content": "plain"}, {"role": "user", )"
              R"("content": [{"type": "image"}, {"type": "text", "text": "describe"}]}, )"
              R"({"role": "assistant", "content": [{"type": "text", "text": "a "}, )"
              R"({"type": "text", "text": "cat"}]}]})")),
            "user:plain|user:<image>describe|assistant:a cat|");
}

// Qwen-style tools block and tool_calls rendered with tojson.
TEST(JinjaHuggingFace, ToolsAndToolCalls) {
  EXPECT_EQ(R(R"j({%- if tools %}
{{- '<tools>' }}
{%- for tool in tools %}
{{- '\n' }}{{ tool | tojson }}
{%- endfor %}
{{- '\n</tools>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' and message.tool_calls is defined %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '<tool_call>{"name": "' }}{{ tool_call.name }}{{ '", "arguments": ' }}{{ tool_call.arguments | tojson }}{{ '}</tool_call>' }}
{%- endfor %}
{%- elif message.role == 'tool' %}
{{- '<tool_response>' ~ message.content ~ '</tool_response>' }}
{%- else %}
{{- message.role ~ ': ' ~ message.content ~ '\n' }}
{%- endif %}
{%- endfor %})j",
              J(R"({"tools": [{"type": "function", "function": {"name": "get_weather", )"
              R"("description": "Weather in a city — été", "parameters": {"type": "object", )"
              R"("properties": {"city": {"type": "string"}}}}}], )"
              R"("messages": [{"role": "user", "content": "Weather in Paris?"}, )"
              R"({"role": "assistant", "tool_calls": [{"type": "function", )"
              R"("function": {"name": "get_weather", "arguments": {"city": "Paris", )"
              R"("days": 2, "temp": 21.5}}}]}, {"role": "tool", "content": "sunny"}]})")),
            "<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
            "\"description\": \"Weather in a city — été\", \"parameters\": {\"type\": "
            "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n"
            "</tools>\n"
            "user: Weather in Paris?\n"
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
            "\"days\": 2, \"temp\": 21.5}}</tool_call><tool_response>sunny</tool_response>");
}

// The Mistral/Llama-2 guard only raises on a broken conversation.
TEST(JinjaHuggingFace, RoleAlternationCheckPassesWhenRolesAlternate) {
  EXPECT_EQ(R("{% for message in messages %}"
              "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
              "{{ raise_exception('Conversation roles must alternate "
              "user/assistant/user/assistant/...') }}"
              "{% endif %}{% if message['role'] == 'user' %}"
              "{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
              "{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
              J(R"({"bos_token": "<s>", "eos_token": "</s>", "messages": [{"role": "user", )"
              R"("content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", )"
              R"("content": "c"}]})")),
            "<s>[INST] a [/INST]b</s><s>[INST] c [/INST]");
}

}  // namespace
}  // namespace lifeline::jinja

// POST /v1/messages's translation (api/messages_api.h): Anthropic's blocks onto chat
// messages, errors naming the field, a chat answer as a `message`, a chat stream as the
// Messages event sequence.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/messages_api.h"

namespace lifeline::api {
namespace {

using nlohmann::json;

TEST(MessagesToChat, BlocksBecomeChatMessages) {
  auto r = MessagesToChat(json::parse(R"({
    "model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
    "stop_sequences": ["END"], "thinking": {"type": "enabled", "budget_tokens": 32},
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": ""},
                                        {"type": "text", "text": "Calling."},
                                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                    "content": [{"type": "text", "text": "ok"}]}]}]})"));
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<ApiError>(r).message;
  const json& c = std::get<json>(r);
  ASSERT_EQ(c["messages"].size(), 4u);
  EXPECT_EQ(c["messages"][0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(c["messages"][2]["content"], "Calling.");
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(c["messages"][3], json({{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "ok"}}));
  EXPECT_EQ(c["stop"], json::array({"END"}));
  EXPECT_EQ(c["thinking_budget_tokens"], 32);
  EXPECT_EQ(c["tool_choice"], "required");
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(c["tools"][0]["function"]["parameters"]["type"], "object");
}

TEST(MessagesToChat, ErrorsNameTheField) {
  auto param = [](const json& b) {
    auto r = MessagesToChat(b);
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).param : "OK";
  };
  const json msgs = json::array({{{"role", "user"}, {"content", "x"}}});
  EXPECT_EQ(param(json{{"messages", msgs}}), "max_tokens");
  EXPECT_EQ(param(json{{"max_tokens", 3}}), "messages");
  EXPECT_EQ(param(json{{"max_tokens", 3}, {"messages", msgs}, {"bogus", 1}}), "bogus");
  EXPECT_EQ(param(json{{"max_tokens", 3},
                       {"messages", json::array({{{"role", "system"}, {"content", "x"}}})}}),
            "messages[0].role");
  EXPECT_EQ(param(json{{"max_tokens", 3},
                       {"messages", json::array({{{"role", "user"},
                                                  {"content", json::array({{{"type", "image"}}})}}})}}),
            "messages[0].content[0].type");
  EXPECT_EQ(param(json{{"max_tokens", 3}, {"messages", msgs}, {"thinking", {{"type", "maybe"}}}}),
            "thinking.type");
}

TEST(ChatToMessage, BlocksStopReasonUsage) {
  const json m = ChatToMessage(json::parse(R"({"id": "chatcmpl-q", "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
      "reasoning_content": "hm", "content": "Sure.",
      "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":2}"}}]}}],
    "usage": {"prompt_tokens": 4, "completion_tokens": 6}})"));
  EXPECT_EQ(m["id"], "msg_q");
  EXPECT_EQ(m["type"], "message");
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][1]["text"], "Sure.");
  EXPECT_EQ(m["content"][2]["input"], json({{"a", 2}}));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"], json({{"input_tokens", 4}, {"output_tokens", 6}}));
}

TEST(MessagesStream, ChatChunksBecomeTheEventSequence) {
  MessagesStream s;
  auto chunk = [](json delta, json finish = nullptr) {
    return json{{"id", "chatcmpl-x"}, {"model", "m"},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
  };
  std::vector<std::string> names;
  std::string text;
  auto take = [&](const std::vector<MessagesStream::Event>& evs) {
    for (const auto& [name, data] : evs) {
      names.push_back(name);
      EXPECT_EQ(data["type"], name);
      if (name == "content_block_delta" && data["delta"]["type"] == "text_delta") {
        text += data["delta"]["text"].get<std::string>();
      }
    }
  };
  take(s.Feed(chunk({{"reasoning_content", "hm"}})));
  take(s.Feed(chunk({{"content", "Hel"}})));
  take(s.Feed(chunk({{"content", "lo"}})));
  take(s.Feed(chunk({{"tool_calls", json::array({{{"index", 0}, {"id", "c"},
                                                 {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}},
                    "stop")));
  const auto end = s.Finish();
  take(end);
  EXPECT_EQ(text, "Hello");
  const std::vector<std::string> expected = {
      "message_start", "content_block_start", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
      "message_stop"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(end[end.size() - 2].second["delta"]["stop_reason"], "tool_use");
}

}  // namespace
}  // namespace lifeline::api

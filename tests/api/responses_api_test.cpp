// POST /v1/responses's translation (api/responses_api.h): request items onto chat messages
// and fields, errors naming the field; a chat answer as a response object; a chat stream as
// the Responses event sequence.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/responses_api.h"

namespace lifeline::api {
namespace {

using nlohmann::json;

json Chat(const json& body) {
  auto r = ResponsesToChat(body);
  EXPECT_TRUE(std::holds_alternative<json>(r)) << std::get<ApiError>(r).message;
  return std::holds_alternative<json>(r) ? std::get<json>(r) : json();
}

std::string ErrorParam(const json& body) {
  auto r = ResponsesToChat(body);
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).param : "OK";
}

TEST(ResponsesToChat, ItemsBecomeMessagesAndFieldsCarryOver) {
  const json chat = Chat(json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 9, "temperature": 0.5,
    "stream": true, "reasoning": {"effort": "low"},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "f"},
    "input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi "},
                                                      {"type": "input_text", "text": "there"}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{\"a\":1}"},
      {"type": "function_call_output", "call_id": "c1", "output": "ok"}]})"));
  ASSERT_EQ(chat["messages"].size(), 5u);
  EXPECT_EQ(chat["messages"][0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(chat["messages"][1]["role"], "system");
  EXPECT_EQ(chat["messages"][2]["content"], "Hi there");
  EXPECT_EQ(chat["messages"][3]["tool_calls"].size(), 2u) << "consecutive calls: one turn";
  EXPECT_EQ(chat["messages"][3]["tool_calls"][1]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(chat["messages"][4], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}));
  EXPECT_EQ(chat["max_tokens"], 9);
  EXPECT_EQ(chat["reasoning_effort"], "low");
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(chat["tool_choice"]["function"]["name"], "f");
  EXPECT_EQ(Chat(json{{"input", "x"}})["messages"][0], json({{"role", "user"}, {"content", "x"}}));
}

TEST(ResponsesToChat, ErrorsNameTheField) {
  EXPECT_EQ(ErrorParam(json{{"input", "x"}, {"bogus", 1}}), "bogus");
  EXPECT_EQ(ErrorParam(json::object()), "input");
  EXPECT_EQ(ErrorParam(json{{"input", 5}}), "input");
  EXPECT_EQ(ErrorParam(json{{"input", "x"}, {"previous_response_id", "resp_1"}}), "previous_response_id");
  EXPECT_EQ(ErrorParam(json{{"input", "x"}, {"store", true}}), "store");
  EXPECT_EQ(ErrorParam(json{{"input", json::array({{{"type", "image"}}})}}), "input[0].type");
  EXPECT_EQ(ErrorParam(json{{"input", json::array({{{"role", "robot"}, {"content", "x"}}})}}),
            "input[0].role");
  EXPECT_EQ(ErrorParam(json{{"input", "x"}, {"tools", json::array({{{"type", "web_search"}}})}}),
            "tools[0].type");
}

TEST(ChatToResponse, MessageCallsUsageAndIncomplete) {
  const json r = ChatToResponse(json::parse(R"({
    "id": "chatcmpl-abc", "created": 7, "model": "m",
    "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant",
      "reasoning_content": "hmm", "content": "Hi",
      "tool_calls": [{"id": "call_1", "type": "function",
                      "function": {"name": "f", "arguments": "{}"}}]}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3,
              "completion_tokens_details": {"reasoning_tokens": 1}}})"));
  EXPECT_EQ(r["id"], "resp_abc");
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hi");
  EXPECT_EQ(r["output"][2]["call_id"], "call_1");
  EXPECT_EQ(r["usage"]["total_tokens"], 8);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 1);
}

TEST(ResponsesStream, ChatChunksBecomeTheEventSequence) {
  ResponsesStream s;
  auto chunk = [](json delta, json finish = nullptr) {
    return json{{"id", "chatcmpl-x"}, {"model", "m"}, {"created", 1},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
  };
  std::vector<std::string> types;
  std::string text;
  int64_t seq = -1;
  auto take = [&](const std::vector<ResponsesStream::Event>& evs) {
    for (const auto& [name, data] : evs) {
      types.push_back(name);
      EXPECT_EQ(data["type"], name);
      EXPECT_EQ(data["sequence_number"], ++seq) << "numbered in order";
      if (name == "response.output_text.delta") text += data["delta"].get<std::string>();
    }
  };
  take(s.Feed(chunk({{"role", "assistant"}, {"content", "Hel"}})));
  take(s.Feed(chunk({{"content", "lo"}})));
  take(s.Feed(chunk({{"tool_calls", json::array({{{"index", 0}, {"id", "call_9"},
                                                 {"function", {{"name", "f"}, {"arguments", "{\"a\""}}}}})}})));
  take(s.Feed(chunk({{"tool_calls", json::array({{{"index", 0}, {"function", {{"arguments", ":1}"}}}}})}},
                    "tool_calls")));
  std::vector<ResponsesStream::Event> end = s.Finish();
  take(end);
  EXPECT_EQ(text, "Hello");
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added",
      "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done", "response.completed"};
  EXPECT_EQ(types, expected);
  const json& done = end.back().second["response"];
  EXPECT_EQ(done["output"][1]["arguments"], "{\"a\":1}");
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(NamedSseEvent("e", json{{"a", 1}}), "event: e\ndata: {\"a\":1}\n\n");
}

}  // namespace
}  // namespace lifeline::api

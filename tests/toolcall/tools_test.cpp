// Validation of `tools` and `tool_choice`: OpenAI's shapes accepted, everything else refused
// with the field path as the JSON body spells it.
#include <string>

#include <gtest/gtest.h>

#include "text/toolcall/tools.h"

namespace lifeline::toolcall {
namespace {

using ojson = nlohmann::ordered_json;

ojson Tool(const std::string& name) {
  return ojson{{"type", "function"},
               {"function",
                {{"name", name},
                 {"description", "d"},
                 {"parameters", {{"type", "object"}, {"properties", {{"z", {{"type", "string"}}}, {"a", {{"type", "integer"}}}}}}}}}};
}

std::string PathOfError(const ojson& tools) {
  auto r = ParseTools(tools);
  EXPECT_FALSE(r.ok()) << tools.dump();
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return ErrorFieldPath(r.status());
}

TEST(ToolSpecs, AcceptsOpenAiShapes) {
  ojson tools = ojson::array({Tool("get_weather"), Tool("get-time_2")});
  tools[1]["function"]["strict"] = true;
  tools[1]["function"]["x-vendor"] = 1;  // extra keys are the template's business
  auto r = ParseTools(tools);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "get_weather");
  EXPECT_EQ((*r)[0].description, "d");
  EXPECT_FALSE((*r)[0].strict);
  EXPECT_TRUE((*r)[1].strict);
  // Property order as the client wrote it.
  EXPECT_EQ((*r)[0].parameters.dump(),
            R"({"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}})");
  // No parameters: a function without arguments.
  auto bare = ParseTools(ojson::parse(R"([{"type": "function", "function": {"name": "ping"}}])"));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)[0].parameters.dump(), R"({"type":"object","properties":{}})");
  // nlohmann::json input works too.
  EXPECT_TRUE(ParseTools(nlohmann::json::parse(R"([{"type": "function", "function": {"name": "p"}}])")).ok());
  EXPECT_TRUE(ParseTools(ojson::array()).ok());
}

TEST(ToolSpecs, ErrorsNameTheField) {
  EXPECT_EQ(PathOfError(ojson::object()), "tools");
  ojson t = ojson::array({Tool("a"), Tool("b"), Tool("c")});
  t[2]["type"] = "retrieval";
  EXPECT_EQ(PathOfError(t), "tools[2].type");
  t[2].erase("type");
  EXPECT_EQ(PathOfError(t), "tools[2].type");
  t = ojson::array({Tool("a"), 5});
  EXPECT_EQ(PathOfError(t), "tools[1]");
  t = ojson::array({Tool("a")});
  t[0]["function"] = "a";
  EXPECT_EQ(PathOfError(t), "tools[0].function");
  for (const char* bad : {"", "has space", "dots.are.not.ok", "ünï"}) {
    t = ojson::array({Tool(bad)});
    EXPECT_EQ(PathOfError(t), "tools[0].function.name") << bad;
  }
  t = ojson::array({Tool(std::string(65, 'x'))});
  EXPECT_EQ(PathOfError(t), "tools[0].function.name");
  EXPECT_TRUE(ParseTools(ojson::array({Tool(std::string(64, 'x'))})).ok());
  t = ojson::array({Tool("a")});
  t[0]["function"]["name"] = 3;
  EXPECT_EQ(PathOfError(t), "tools[0].function.name");
  t = ojson::array({Tool("a"), Tool("b"), Tool("a")});
  auto dup = ParseTools(t);
  EXPECT_EQ(ErrorFieldPath(dup.status()), "tools[2].function.name");
  EXPECT_NE(dup.status().message().find("tools[0]"), std::string::npos) << dup.status().message();
  t = ojson::array({Tool("a")});
  t[0]["function"]["parameters"] = ojson::array();
  EXPECT_EQ(PathOfError(t), "tools[0].function.parameters");
  t[0]["function"]["parameters"] = ojson{{"type", "string"}};
  EXPECT_EQ(PathOfError(t), "tools[0].function.parameters.type");
  t[0]["function"]["parameters"] = ojson::object();
  t[0]["function"]["description"] = 1;
  EXPECT_EQ(PathOfError(t), "tools[0].function.description");
  t[0]["function"]["description"] = "ok";
  t[0]["function"]["strict"] = "yes";
  EXPECT_EQ(PathOfError(t), "tools[0].function.strict");
}

TEST(ToolSpecs, Caps) {
  ojson many = ojson::array();
  for (size_t i = 0; i <= kMaxTools; ++i) many.push_back(Tool("f" + std::to_string(i)));
  auto r = ParseTools(many);
  EXPECT_EQ(ErrorFieldPath(r.status()), "tools");
  EXPECT_NE(r.status().message().find("at most 128"), std::string::npos) << r.status().message();
  many.erase(many.size() - 1);
  EXPECT_TRUE(ParseTools(many).ok());
  ojson big = ojson::array({Tool("a")});
  big[0]["function"]["description"] = std::string(kMaxToolsBytes, 'x');
  auto b = ParseTools(big);
  EXPECT_EQ(ErrorFieldPath(b.status()), "tools");
  EXPECT_NE(b.status().message().find("bytes"), std::string::npos);
}

TEST(ToolChoices, Modes) {
  auto tools = *ParseTools(ojson::array({Tool("get_weather")}));
  using M = ToolChoice::Mode;
  EXPECT_EQ(*ParseToolChoice(ojson(nullptr), tools), (ToolChoice{M::kAuto, ""}));
  EXPECT_EQ(*ParseToolChoice(ojson(nullptr), {}), (ToolChoice{M::kNone, ""}));
  EXPECT_EQ(*ParseToolChoice(ojson("auto"), tools), (ToolChoice{M::kAuto, ""}));
  EXPECT_EQ(*ParseToolChoice(ojson("none"), tools), (ToolChoice{M::kNone, ""}));
  EXPECT_EQ(*ParseToolChoice(ojson("required"), tools), (ToolChoice{M::kRequired, ""}));
  EXPECT_EQ(*ParseToolChoice(ojson::parse(R"({"type": "function", "function": {"name": "get_weather"}})"), tools),
            (ToolChoice{M::kFunction, "get_weather"}));
  EXPECT_EQ(*ParseToolChoice(nlohmann::json("auto"), tools), (ToolChoice{M::kAuto, ""}));
}

TEST(ToolChoices, ErrorsNameTheField) {
  auto tools = *ParseTools(ojson::array({Tool("get_weather")}));
  auto path = [&](const ojson& v, const std::vector<ToolSpec>& t) {
    auto r = ParseToolChoice(v, t);
    EXPECT_FALSE(r.ok()) << v.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return ErrorFieldPath(r.status());
  };
  EXPECT_EQ(path(ojson("always"), tools), "tool_choice");
  EXPECT_EQ(path(ojson(3), tools), "tool_choice");
  EXPECT_EQ(path(ojson("required"), {}), "tool_choice");
  EXPECT_EQ(path(ojson::parse(R"({"type": "allowed_tools"})"), tools), "tool_choice.type");
  EXPECT_EQ(path(ojson::parse(R"({"type": "function"})"), tools), "tool_choice.function");
  EXPECT_EQ(path(ojson::parse(R"({"type": "function", "function": {"name": 1}})"), tools),
            "tool_choice.function.name");
  auto r = ParseToolChoice(ojson::parse(R"({"type": "function", "function": {"name": "get_time"}})"), tools);
  EXPECT_EQ(ErrorFieldPath(r.status()), "tool_choice.function.name");
  EXPECT_NE(r.status().message().find("get_time"), std::string::npos);
}

TEST(ToolSpecs, ErrorFieldPathOfOtherMessages) {
  EXPECT_EQ(ErrorFieldPath(InvalidArgument("no quotes")), "");
  EXPECT_EQ(ErrorFieldPath(InvalidArgument("'unterminated")), "");
  EXPECT_EQ(ErrorFieldPath(Status()), "");
}

}  // namespace
}  // namespace lifeline::toolcall

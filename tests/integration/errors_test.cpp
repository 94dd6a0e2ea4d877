// Error statuses of the real server: OpenAI-shaped bodies naming the offending `param`, for
// bad fields, context overflow (streaming or not: a plain HTTP 400 with no SSE bytes),
// unknown models and routes, wrong methods, oversize bodies and wrong media types.
#include <string>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;

// Checks the OpenAI error body shape and returns the inner object.
json ExpectError(const std::optional<HttpReply>& reply, int status) {
  EXPECT_TRUE(reply.has_value());
  if (!reply) return json::object();
  EXPECT_EQ(reply->status, status) << reply->body;
  EXPECT_EQ(reply->Header("content-type").rfind("application/json", 0), 0u)
      << reply->Header("content-type");
  const json body = reply->Json();
  EXPECT_TRUE(body.is_object() && body.contains("error")) << reply->body;
  if (!body.is_object() || !body.contains("error")) return json::object();
  const json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string()) << reply->body;
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  EXPECT_TRUE(e["type"].is_string()) << reply->body;
  EXPECT_TRUE(e.contains("param")) << reply->body;
  EXPECT_TRUE(e.contains("code")) << reply->body;
  return e;
}

// 64 positions of context and a 1000-byte body cap, so both limits are easy to cross.
class ErrorTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--ctx", "64", "--max-body-bytes", "1000"});
    return args;
  }
};

TEST_F(ErrorTest, NegativeTemperatureIs400NamingTheField) {
  json req = GreedyCompletion("Once upon a time", 4);
  req["temperature"] = -1;
  const json e = ExpectError(Post("/v1/completions", req), 400);
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "temperature");
}

TEST_F(ErrorTest, MaxTokensBeyondTheContextIs400ContextLengthExceeded) {
  // "Once upon a time" is 5 tokens with BOS; 5 + 60 > 64.
  const json e =
      ExpectError(Post("/v1/completions", GreedyCompletion("Once upon a time", 60)), 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["param"], "max_tokens");
  // 5 + 59 = 64 fits exactly.
  auto fits = Post("/v1/completions", GreedyCompletion("Once upon a time", 59));
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
}

TEST_F(ErrorTest, PromptBeyondTheContextIs400NamingThePrompt) {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "The dog ran to the park. ";  // > 64 tokens, < 1000 bytes
  json req = GreedyCompletion(prompt, 1);
  const json e = ExpectError(Post("/v1/completions", req), 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["param"], "prompt");
}

TEST_F(ErrorTest, ContextErrorOnAStreamIsAPlainHttp400) {
  auto r = Post("/v1/completions", GreedyCompletion("Once upon a time", 60, /*stream=*/true));
  const json e = ExpectError(r, 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.find("data:"), std::string::npos) << r->body;
}

TEST_F(ErrorTest, UnknownModelIs404) {
  json req = GreedyCompletion("Once upon a time", 4);
  req["model"] = "no-such-model";
  const json e = ExpectError(Post("/v1/completions", req), 404);
  EXPECT_EQ(e["type"], "not_found_error");
  EXPECT_EQ(e["param"], "model");
}

TEST_F(ErrorTest, UnknownRouteIs404) {
  const json e = ExpectError(Get("/v1/no-such-route"), 404);
  EXPECT_EQ(e["type"], "not_found_error");
  auto post = Roundtrip(port(), PostRequest("/v2/completions", "{}"), 10s);
  ExpectError(post, 404);
}

TEST_F(ErrorTest, WrongMethodIs405WithAllow) {
  auto r = Get("/v1/completions");
  ExpectError(r, 405);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Header("allow"), "POST");
  auto models = Roundtrip(port(), PostRequest("/v1/models", "{}"), 10s);
  ExpectError(models, 405);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->Header("allow"), "GET, HEAD");  // HEAD is served wherever GET is
}

TEST_F(ErrorTest, BodyOverTheCapIs413) {
  json req = GreedyCompletion(std::string(1200, 'a'), 4);
  const json e = ExpectError(Post("/v1/completions", req), 413);
  EXPECT_EQ(e["code"], "body_too_large");
  // A body under the cap still works afterwards.
  auto ok = Post("/v1/completions", GreedyCompletion("Once upon a time", 4));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ErrorTest, NonJsonContentTypeIs415) {
  const std::string body = GreedyCompletion("Once upon a time", 4).dump();
  const json e = ExpectError(
      Roundtrip(port(), PostRequest("/v1/completions", body, "", "text/plain"), 10s), 415);
  EXPECT_EQ(e["code"], "unsupported_media_type");
}

}  // namespace
}  // namespace lifeline::integration

// The API-completeness endpoints of the real server on stories260K: POST /tokenize and
// /detokenize against the reference data of ../shared/reference/logits (recorded by
// llama.cpp), GET /v1/models/{id}, HEAD, and X-Request-Id echoed on a 200 and on a 400.
#include <string>
#include <vector>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;

// stories260K as "stories", plus a remote member "far" that is never contacted (its tokenizer
// lives on the remote server, so the token endpoints refuse it).
class ApiEndpointsTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--remote", "far=http://127.0.0.1:9/v1#m"});
    return args;
  }
};

json OkJson(const std::optional<HttpReply>& reply) {
  EXPECT_TRUE(reply);
  if (!reply) return json();
  EXPECT_EQ(reply->status, 200) << reply->body;
  return reply->Json();
}

TEST_F(ApiEndpointsTest, TokenizeGivesTheReferencePromptTokens) {
  const json ref = ReferenceJson("stories260K.p1");
  ASSERT_FALSE(ref.is_discarded());
  const std::string prompt = ref["prompt"];  // "Once upon a time"
  const json expected = ref["prompt_tokens"];  // BOS (1) first: the vocab adds it
  ASSERT_EQ(expected[0], 1);
  EXPECT_EQ(OkJson(Post("/tokenize", {{"model", "stories"}, {"content", prompt},
                                      {"add_special", true}}))["tokens"],
            expected);
  // add_special defaults to false: the same pieces without BOS.
  json no_bos = expected;
  no_bos.erase(0);
  EXPECT_EQ(OkJson(Post("/tokenize", {{"content", prompt}}))["tokens"], no_bos);
  // parse_special: the BOS text "<s>" is BOS itself, or plain characters when off.
  const json parsed = OkJson(Post("/tokenize", {{"content", "<s>"}}))["tokens"];
  EXPECT_EQ(parsed, json::array({1}));
  const json literal =
      OkJson(Post("/tokenize", {{"content", "<s>"}, {"parse_special", false}}))["tokens"];
  EXPECT_GT(literal.size(), 1u);
  for (const json& id : literal) EXPECT_NE(id, 1);
}

TEST_F(ApiEndpointsTest, DetokenizeRoundTripsTheReferenceText) {
  const json ref = ReferenceJson("stories260K.p1");
  ASSERT_FALSE(ref.is_discarded());
  // SentencePiece's decoding of [BOS, "▁Once", "▁upon", "▁a", "▁time"]: BOS is a control
  // token (no text) and the U+2581 that the encoder's dummy prefix put before "Once" is not
  // output, so the text is the reference prompt exactly, without a leading space.
  const std::string prompt = ref["prompt"];
  ASSERT_NE(prompt.front(), ' ');
  EXPECT_EQ(OkJson(Post("/detokenize", {{"tokens", ref["prompt_tokens"]}}))["content"], prompt);
  json no_bos = ref["prompt_tokens"];
  no_bos.erase(0);
  EXPECT_EQ(OkJson(Post("/detokenize", {{"model", "stories"}, {"tokens", no_bos}}))["content"],
            prompt);
  // The reference's greedy continuation starts with "," (no word-start marker), so it
  // decodes to the reference's greedy_text as recorded.
  const json greedy = ref["greedy"];
  std::string greedy_text = ref["greedy_text"];
  ASSERT_NE(greedy_text.find(", there was"), std::string::npos);
  EXPECT_EQ(OkJson(Post("/detokenize", {{"tokens", greedy}}))["content"], greedy_text);
}

TEST_F(ApiEndpointsTest, TokenErrorsNameTheFieldAndTheVocabulary) {
  const json ref = ReferenceJson("stories260K.p1");
  const int n_vocab = ref["n_vocab"];  // 512
  auto outside = Post("/detokenize", {{"tokens", {1, n_vocab}}});
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->status, 400);
  const json e = outside->Json()["error"];
  EXPECT_EQ(e["param"], "tokens[1]");
  EXPECT_NE(e["message"].get<std::string>().find(std::to_string(n_vocab)), std::string::npos)
      << e;
  // The last id of the vocabulary is fine.
  EXPECT_EQ(OkJson(Post("/detokenize", {{"tokens", {n_vocab - 1}}})).contains("content"), true);
  auto remote = Post("/tokenize", {{"model", "far"}, {"content", "x"}});
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->status, 400);
  EXPECT_EQ(remote->Json()["error"]["param"], "model");
  auto unknown = Post("/detokenize", {{"model", "nope"}, {"tokens", {1}}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->Json()["error"]["param"], "model");
}

TEST_F(ApiEndpointsTest, OneModelByIdAndHeadOnTheSameConnection) {
  const json list = OkJson(Get("/v1/models"));
  ASSERT_TRUE(list["data"].is_array());
  const json one = OkJson(Get("/v1/models/stories"));
  EXPECT_EQ(one, list["data"][0]);
  EXPECT_EQ(one["id"], "stories");
  EXPECT_EQ(one["object"], "model");
  EXPECT_GT(one["meta"]["context_length"].get<int64_t>(), 0);
  EXPECT_EQ(OkJson(Get("/v1/models/far"))["id"], "far");
  auto unknown = Get("/v1/models/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->Json()["error"]["code"], "model_not_found");
  EXPECT_EQ(unknown->Json()["error"]["param"], "model");

  HttpTestClient c(port());
  ASSERT_TRUE(c.Send(lifeline::testing::HeadRequest("/v1/models/stories")));
  auto head = c.ReadResponse(10s, /*to_head=*/true);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("content-length"), std::to_string(one.dump().size()));
  ASSERT_TRUE(c.Send(GetRequest("/v1/models/stories")));
  auto get = c.ReadResponse(10s);
  ASSERT_TRUE(get);
  EXPECT_EQ(get->Json(), one);
  EXPECT_FALSE(get->closed);
}

TEST_F(ApiEndpointsTest, ClientRequestIdIsEchoedOnSuccessAndOnError) {
  const std::string id = "it-7f3a:b.c_d";
  const std::string header = "X-Request-Id: " + id + "\r\n";
  auto gen = Roundtrip(port(), PostRequest("/v1/completions",
                                           GreedyCompletion("Once upon a time", 2).dump(), header),
                       30s);
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->status, 200) << gen->body;
  EXPECT_EQ(gen->Header("x-request-id"), id);
  EXPECT_EQ(gen->Json()["id"].get<std::string>().rfind("cmpl-", 0), 0u);  // ours stays
  auto tok = Roundtrip(port(), PostRequest("/tokenize", R"({"content":"a"})", header), 10s);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->status, 200);
  EXPECT_EQ(tok->Header("x-request-id"), id);
  auto bad = Roundtrip(port(), PostRequest("/v1/completions", R"({"prompt":"x","top_p":7})",
                                           header), 10s);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->Header("x-request-id"), id);
  // Without one, the answer still names itself.
  auto plain = Get("/health");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->Header("x-request-id").rfind("req-", 0), 0u);
}

}  // namespace
}  // namespace lifeline::integration

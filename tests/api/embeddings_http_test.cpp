// POST /v1/embeddings, /v1/rerank and /rerank end to end: a real HttpServer over the fake
// engine, which answers each prompt with one embedding event (fake_engine.h). The request the
// engine receives, the answer's wire shape, the header overrides, the refusals made before
// Submit, and the ledger (ServerTest's TearDown) all checked.
#include <string>
#include <vector>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

using nlohmann::json;

class PoolingServerTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    ModelInfo embedder{"fake-model", "lifeline", 1700000000, 2048};
    embedder.embedding_length = 4;
    embedder.pooling = "rank";
    embedder.rerank_outputs = 1;
    engine_.SetModels({embedder, ModelInfo{"fake-light", "lifeline", 1700000000, 1024}});
  }

  // The fake answers with these vectors (one per prompt), prompt tokens 9.
  void Answer(std::vector<std::vector<float>> vectors) {
    FakeScript s;
    s.embeddings = std::move(vectors);
    s.usage = Usage{9, 0};
    engine_.SetScript(s);
  }

  std::vector<float> Floats(const json& array) {
    std::vector<float> out;
    for (const json& x : array) out.push_back(x.get<float>());
    return out;
  }
};

TEST_F(PoolingServerTest, EmbeddingsAnswerTheOpenAiList) {
  Answer({{3, 4, 0, 0}, {0, 0, 0, 2}});
  auto reply = Roundtrip(PostRequest(
      "/v1/embeddings", R"({"model":"fake-model","input":["a","b"],"slo_class":"bulk"})",
      "X-SLO-Class: interactive\r\n"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  const json body = reply->Json();
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 9}, {"total_tokens", 9}}));
  EXPECT_TRUE(body["timings"].contains("server_total_ms"));
  ASSERT_EQ(body["data"].size(), 2u);
  EXPECT_EQ(body["data"][0]["object"], "embedding");
  EXPECT_EQ(body["data"][1]["index"], 1);
  const std::vector<float> a = Floats(body["data"][0]["embedding"]);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_FLOAT_EQ(a[0], 0.6f);  // (3, 4, 0, 0) / 5
  EXPECT_FLOAT_EQ(a[1], 0.8f);
  EXPECT_EQ(Floats(body["data"][1]["embedding"]), (std::vector<float>{0, 0, 0, 1}));
  EXPECT_EQ(reply->Header("x-request-id").rfind("embd-", 0), 0u) << reply->Header("x-request-id");
  EXPECT_EQ(reply->Header("x-served-model"), "fake-model");

  const std::vector<GenerationRequest> sent = engine_.submitted();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].task, Task::kEmbed);
  EXPECT_FALSE(sent[0].is_chat);
  EXPECT_EQ(sent[0].n, 1);
  ASSERT_EQ(sent[0].prompts.size(), 2u);
  EXPECT_EQ(sent[0].prompts[1].text, "b");
  EXPECT_EQ(sent[0].slo_class, "interactive") << "the header overrides the body";
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().completed, 1u);
}

TEST_F(PoolingServerTest, EmbeddingsInBase64TruncatedAndTokenInputs) {
  Answer({{3, 4, 12, 1}});
  auto reply = Roundtrip(PostRequest(
      "/v1/embeddings", R"({"input":[[1,2,3]],"encoding_format":"base64","dimensions":2})"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  // (3, 4) / 5 as little-endian float32: 0.6f = 0x3F19999A, 0.8f = 0x3F4CCCCD.
  EXPECT_EQ(reply->Json()["data"][0]["embedding"], "mpkZP83MTD8=");
  const std::vector<GenerationRequest> sent = engine_.submitted();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].model, "fake-model") << "the first model by default";
  ASSERT_EQ(sent[0].prompts.size(), 1u);
  EXPECT_TRUE(sent[0].prompts[0].is_tokens);
  EXPECT_EQ(sent[0].prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
}

TEST_F(PoolingServerTest, RefusedBeforeSubmitNamingTheField) {
  Answer({{1, 0, 0, 0}});
  auto wide = Roundtrip(PostRequest("/v1/embeddings", R"({"input":"a","dimensions":5})"));
  ASSERT_TRUE(wide);
  const json e = ExpectErrorBody(*wide, 400);
  EXPECT_EQ(e["param"], "dimensions");
  EXPECT_NE(e["message"].get<std::string>().find("at most 4"), std::string::npos) << e;
  EXPECT_EQ(wide->Header("x-request-id").rfind("embd-", 0), 0u);

  auto unknown = Roundtrip(PostRequest("/v1/embeddings", R"({"input":"a","stream":true})"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(ExpectErrorBody(*unknown, 400)["param"], "stream");

  auto not_reranker = Roundtrip(PostRequest(
      "/v1/rerank", R"({"model":"fake-light","query":"q","documents":["d"]})"));
  ASSERT_TRUE(not_reranker);
  const json r = ExpectErrorBody(*not_reranker, 400);
  EXPECT_EQ(r["param"], "model");
  EXPECT_EQ(r["code"], "model_not_reranker");

  auto no_query = Roundtrip(PostRequest("/rerank", R"({"documents":["d"]})"));
  ASSERT_TRUE(no_query);
  EXPECT_EQ(ExpectErrorBody(*no_query, 400)["param"], "query");

  auto unknown_model = Roundtrip(PostRequest("/v1/embeddings", R"({"model":"nope","input":"a"})"));
  ASSERT_TRUE(unknown_model);
  EXPECT_EQ(ExpectErrorBody(*unknown_model, 404)["code"], "model_not_found");
  EXPECT_TRUE(engine_.submitted().empty()) << "nothing reached the engine";
}

TEST_F(PoolingServerTest, RerankOnBothPathsRanksAndReturnsDocuments) {
  for (const std::string path : {"/v1/rerank", "/rerank"}) {
    SCOPED_TRACE(path);
    Answer({{0.2f}, {0.9f}, {0.5f}});
    auto reply = Roundtrip(PostRequest(
        path, R"({"query":"cats","documents":["a",{"text":"b"},"c"],"top_n":2,)"
              R"("return_documents":true})"));
    ASSERT_TRUE(reply);
    ASSERT_EQ(reply->status, 200) << reply->body;
    const json body = reply->Json();
    EXPECT_EQ(body["object"], "list");
    EXPECT_EQ(body["model"], "fake-model");
    EXPECT_EQ(body["usage"], json({{"prompt_tokens", 9}, {"total_tokens", 9}}));
    ASSERT_EQ(body["results"].size(), 2u);
    EXPECT_EQ(body["results"][0]["index"], 1);
    EXPECT_FLOAT_EQ(body["results"][0]["relevance_score"].get<float>(), 0.9f);
    EXPECT_EQ(body["results"][0]["document"], json({{"text", "b"}}));
    EXPECT_EQ(body["results"][1]["index"], 2);
    EXPECT_EQ(reply->Header("x-request-id").rfind("rerank-", 0), 0u);
    const GenerationRequest sent = engine_.submitted().back();
    EXPECT_EQ(sent.task, Task::kRerank);
    EXPECT_EQ(sent.rerank_query, "cats");
    ASSERT_EQ(sent.prompts.size(), 3u);
    EXPECT_EQ(sent.prompts[1].text, "b");
  }
}

TEST_F(PoolingServerTest, ModelsListTheirEmbeddingWidthAndRerankOutputs) {
  auto reply = Roundtrip(GetRequest("/v1/models"));
  ASSERT_TRUE(reply);
  const json data = reply->Json()["data"];
  EXPECT_EQ(data[0]["meta"]["embedding_length"], 4);
  EXPECT_EQ(data[0]["meta"]["pooling"], "rank");
  EXPECT_EQ(data[0]["meta"]["rerank_outputs"], 1);
  EXPECT_FALSE(data[1]["meta"].contains("embedding_length"));
  EXPECT_FALSE(data[1]["meta"].contains("rerank_outputs"));
}

}  // namespace
}  // namespace lifeline::api::testing

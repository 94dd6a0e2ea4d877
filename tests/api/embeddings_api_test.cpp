// POST /v1/embeddings and /v1/rerank (api/embeddings_api.h): every input form onto the
// completions-style request, every refusal naming its field, the model checks made before
// Submit, and the answers built from a text_completion body whose choices carry `embedding`
// (normalisation, Matryoshka truncation and base64 checked against values worked out here).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api/embeddings_api.h"

namespace lifeline::api {
namespace {

using nlohmann::json;

struct Embed {
  std::optional<ApiError> error;
  GenerationRequest request;
  EmbeddingsOptions options;
};

Embed ParseEmbed(const json& body) {
  Embed e;
  e.error = ParseEmbeddingsRequest(body.dump(), RequestLimits{}, &e.request, &e.options);
  return e;
}

std::string EmbedParam(const json& body) {
  Embed e = ParseEmbed(body);
  return e.error ? e.error->param : "OK";
}

struct Rerank {
  std::optional<ApiError> error;
  GenerationRequest request;
  RerankOptions options;
};

Rerank ParseRerank(const json& body) {
  Rerank r;
  r.error = ParseRerankRequest(body.dump(), RequestLimits{}, &r.request, &r.options);
  return r;
}

std::string RerankParam(const json& body) {
  Rerank r = ParseRerank(body);
  return r.error ? r.error->param : "OK";
}

// The standard base64 alphabet with padding, decoded by hand; nullopt on anything else.
std::optional<std::vector<float>> DecodeFloats(const std::string& b64) {
  const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (b64.size() % 4 != 0) return std::nullopt;
  std::vector<unsigned char> bytes;
  for (size_t i = 0; i < b64.size(); i += 4) {
    uint32_t group = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = b64[i + k];
      uint32_t six = 0;
      if (c == '=') {
        ++pad;
      } else {
        const size_t at = alphabet.find(c);
        if (at == std::string::npos || pad > 0) return std::nullopt;
        six = static_cast<uint32_t>(at);
      }
      group = (group << 6) | six;
    }
    for (int k = 0; k < 3 - pad; ++k) bytes.push_back((group >> (16 - 8 * k)) & 0xff);
  }
  if (bytes.size() % 4 != 0) return std::nullopt;
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t bits = bytes[4 * i] | (bytes[4 * i + 1] << 8) | (bytes[4 * i + 2] << 16) |
                          (static_cast<uint32_t>(bytes[4 * i + 3]) << 24);
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

std::vector<float> Floats(const json& array) {
  std::vector<float> out;
  for (const json& x : array) out.push_back(x.get<float>());
  return out;
}

// The text_completion body the ChoiceAssembler makes for these requests.
json Completion(const std::vector<std::vector<float>>& vectors) {
  json choices = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json c = {{"index", i}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", "stop"},
              {"lifeline", {{"truncated", false}}}};
    if (!vectors[i].empty()) c["embedding"] = vectors[i];
    choices.push_back(std::move(c));
  }
  return {{"id", "embd-1"},
          {"object", "text_completion"},
          {"created", 1700000000},
          {"model", "m"},
          {"choices", std::move(choices)},
          {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 0}, {"total_tokens", 7}}},
          {"timings", {{"prefill_ms", 3.5}}}};
}

// --- Embeddings requests ------------------------------------------------------------------

TEST(EmbeddingsRequest, EveryInputFormBecomesPrompts) {
  Embed one = ParseEmbed({{"input", "hello"}});
  ASSERT_FALSE(one.error) << one.error->message;
  EXPECT_EQ(one.request.task, Task::kEmbed);
  EXPECT_FALSE(one.request.is_chat);
  EXPECT_EQ(one.request.n, 1);
  ASSERT_EQ(one.request.prompts.size(), 1u);
  EXPECT_EQ(one.request.prompts[0].text, "hello");
  EXPECT_FALSE(one.request.prompts[0].is_tokens);
  EXPECT_EQ(one.options.encoding, EmbeddingEncoding::kFloat);
  EXPECT_EQ(one.options.dimensions, 0);
  EXPECT_TRUE(one.options.normalize);

  Embed texts = ParseEmbed({{"input", {"a", "b", "c"}}});
  ASSERT_FALSE(texts.error);
  ASSERT_EQ(texts.request.prompts.size(), 3u);
  EXPECT_EQ(texts.request.prompts[2].text, "c");

  Embed ids = ParseEmbed({{"input", {5, 0, 2147483647}}});
  ASSERT_FALSE(ids.error) << ids.error->message;
  ASSERT_EQ(ids.request.prompts.size(), 1u);
  EXPECT_TRUE(ids.request.prompts[0].is_tokens);
  EXPECT_EQ(ids.request.prompts[0].tokens, (std::vector<int32_t>{5, 0, 2147483647}));

  Embed id_lists = ParseEmbed({{"input", json::array({{1, 2}, {3}})}});
  ASSERT_FALSE(id_lists.error);
  ASSERT_EQ(id_lists.request.prompts.size(), 2u);
  EXPECT_EQ(id_lists.request.prompts[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(id_lists.request.prompts[1].tokens, (std::vector<int32_t>{3}));

  EXPECT_EQ(EmbedParam({{"input", std::vector<std::string>(2048, "x")}}), "OK");
}

TEST(EmbeddingsRequest, OptionsAndSharedFields) {
  Embed e = ParseEmbed({{"input", "x"}, {"model", "emb"}, {"encoding_format", "base64"},
                        {"dimensions", 8}, {"normalize", false}, {"user", "u-1"},
                        {"slo_class", "bulk"}, {"user_role", "free"}});
  ASSERT_FALSE(e.error) << e.error->message;
  EXPECT_EQ(e.request.model, "emb");
  EXPECT_EQ(e.request.slo_class, "bulk");
  EXPECT_EQ(e.request.user_role, "free");
  EXPECT_EQ(e.options.encoding, EmbeddingEncoding::kBase64);
  EXPECT_EQ(e.options.dimensions, 8);
  EXPECT_FALSE(e.options.normalize);
  // null means "default", as on every route.
  Embed nulls = ParseEmbed({{"input", "x"}, {"encoding_format", nullptr}, {"dimensions", nullptr}});
  ASSERT_FALSE(nulls.error);
  EXPECT_EQ(nulls.options.encoding, EmbeddingEncoding::kFloat);
  EXPECT_EQ(ParseEmbed({{"input", "x"}, {"encoding_format", "float"}}).options.encoding,
            EmbeddingEncoding::kFloat);
}

TEST(EmbeddingsRequest, EveryRefusalNamesItsField) {
  EXPECT_EQ(EmbedParam(json::object()), "input");
  EXPECT_EQ(EmbedParam({{"input", ""}}), "input");
  EXPECT_EQ(EmbedParam({{"input", json::array()}}), "input");
  EXPECT_EQ(EmbedParam({{"input", 5}}), "input");
  EXPECT_EQ(EmbedParam({{"input", std::vector<std::string>(2049, "x")}}), "input");
  EXPECT_EQ(EmbedParam({{"input", {"a", ""}}}), "input[1]");
  EXPECT_EQ(EmbedParam({{"input", {"a", 7}}}), "input[1]");
  EXPECT_EQ(EmbedParam({{"input", {1, 2.5}}}), "input[1]");
  EXPECT_EQ(EmbedParam({{"input", {1.5, 2}}}), "input[0]");
  EXPECT_EQ(EmbedParam({{"input", {-1}}}), "input[0]");
  EXPECT_EQ(EmbedParam({{"input", {2147483648ll}}}), "input[0]");
  EXPECT_EQ(EmbedParam({{"input", json::array({{3}, {4, -1}})}}), "input[1][1]");
  EXPECT_EQ(EmbedParam({{"input", json::array({{3}, {4, 0.5}})}}), "input[1][1]");
  EXPECT_EQ(EmbedParam({{"input", json::array({json::array()})}}), "input[0]");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"encoding_format", "int8"}}), "encoding_format");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"encoding_format", 1}}), "encoding_format");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"dimensions", 0}}), "dimensions");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"dimensions", -4}}), "dimensions");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"dimensions", 2.5}}), "dimensions");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"dimensions", "8"}}), "dimensions");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"dimensions", 4294967296ll}}), "dimensions");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"normalize", "yes"}}), "normalize");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"model", 3}}), "model");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"slo_class", "no spaces"}}), "slo_class");
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"user", 1}}), "user");

  Embed unknown = ParseEmbed({{"input", "x"}, {"bogus", 1}});
  ASSERT_TRUE(unknown.error);
  EXPECT_EQ(unknown.error->param, "bogus");
  EXPECT_EQ(unknown.error->code, "unknown_parameter");
  EXPECT_EQ(unknown.error->http_status, 400);
  Embed stream = ParseEmbed({{"input", "x"}, {"stream", false}});
  ASSERT_TRUE(stream.error);
  EXPECT_EQ(stream.error->param, "stream");
  EXPECT_NE(stream.error->message.find("does not stream"), std::string::npos);
  // A completions field is not an embeddings field.
  EXPECT_EQ(EmbedParam({{"input", "x"}, {"max_tokens", 3}}), "max_tokens");

  Embed many = ParseEmbed({{"input", std::vector<std::string>(2049, "x")}});
  ASSERT_TRUE(many.error);
  EXPECT_NE(many.error->message.find("2048"), std::string::npos) << many.error->message;
}

TEST(EmbeddingsRequest, TheBodyChecksAreEveryRoutes) {
  GenerationRequest r;
  EmbeddingsOptions o;
  auto bad = ParseEmbeddingsRequest("{\"input\": ", RequestLimits{}, &r, &o);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->code, "invalid_json");
  auto dup = ParseEmbeddingsRequest(R"({"input":"a","input":"b"})", RequestLimits{}, &r, &o);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->code, "duplicate_key");
  auto array = ParseEmbeddingsRequest(R"(["a"])", RequestLimits{}, &r, &o);
  ASSERT_TRUE(array);
  EXPECT_EQ(array->code, "invalid_type");
}

// --- Rerank requests ----------------------------------------------------------------------

TEST(RerankRequest, DocumentsBecomePromptsAndTheQueryRides) {
  Rerank r = ParseRerank({{"model", "rr"}, {"query", "what is a cat"},
                          {"documents", json::array({"a cat", {{"text", "a dog"}}})},
                          {"top_n", 1}, {"return_documents", true}, {"slo_class", "bulk"}});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.request.task, Task::kRerank);
  EXPECT_EQ(r.request.model, "rr");
  EXPECT_EQ(r.request.rerank_query, "what is a cat");
  EXPECT_EQ(r.request.slo_class, "bulk");
  EXPECT_FALSE(r.request.is_chat);
  EXPECT_EQ(r.request.n, 1);
  ASSERT_EQ(r.request.prompts.size(), 2u);
  EXPECT_EQ(r.request.prompts[0].text, "a cat");
  EXPECT_EQ(r.request.prompts[1].text, "a dog");
  EXPECT_EQ(r.options.top_n, 1);
  EXPECT_TRUE(r.options.return_documents);
  EXPECT_EQ(r.options.documents, (std::vector<std::string>{"a cat", "a dog"}));

  Rerank texts = ParseRerank({{"query", "q"}, {"texts", {"x", "y", "z"}}});
  ASSERT_FALSE(texts.error) << texts.error->message;
  EXPECT_EQ(texts.request.prompts.size(), 3u);
  EXPECT_EQ(texts.options.top_n, 0);
  EXPECT_FALSE(texts.options.return_documents);
  EXPECT_TRUE(texts.options.documents.empty()) << "kept only when they are returned";
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", std::vector<std::string>(1024, "d")}}), "OK");
}

TEST(RerankRequest, EveryRefusalNamesItsField) {
  const json docs = {"a", "b"};
  EXPECT_EQ(RerankParam({{"documents", docs}}), "query");
  EXPECT_EQ(RerankParam({{"query", ""}, {"documents", docs}}), "query");
  EXPECT_EQ(RerankParam({{"query", 3}, {"documents", docs}}), "query");
  EXPECT_EQ(RerankParam({{"query", "q"}}), "documents");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", docs}, {"texts", docs}}), "texts");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", json::array()}}), "documents");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"texts", json::array()}}), "texts");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", "a"}}), "documents");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", std::vector<std::string>(1025, "d")}}),
            "documents");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", json::array({"a", 3})}}), "documents[1]");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", json::array({"a", json::object()})}}),
            "documents[1].text");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", json::array({{{"text", 3}}})}}),
            "documents[0].text");
  EXPECT_EQ(RerankParam({{"query", "q"},
                         {"documents", json::array({{{"text", "a"}, {"title", "t"}}})}}),
            "documents[0].title");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", docs}, {"top_n", 0}}), "top_n");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", docs}, {"top_n", 1.5}}), "top_n");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", docs}, {"return_documents", 1}}),
            "return_documents");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", docs}, {"rank_fields", {"text"}}}),
            "rank_fields");
  EXPECT_EQ(RerankParam({{"query", "q"}, {"documents", docs}, {"stream", true}}), "stream");
  Rerank missing = ParseRerank({{"documents", docs}});
  ASSERT_TRUE(missing.error);
  EXPECT_EQ(missing.error->code, "missing_required_parameter");
}

// --- Checks against the resolved model ----------------------------------------------------

TEST(EmbeddingsCheckModel, DimensionsAboveTheWidthNameTheLimit) {
  ModelInfo m;
  m.id = "emb";
  m.embedding_length = 8;
  EXPECT_FALSE(EmbeddingsTranslation({EmbeddingEncoding::kFloat, 8, true}).CheckModel(m));
  EXPECT_FALSE(EmbeddingsTranslation({EmbeddingEncoding::kFloat, 0, true}).CheckModel(m));
  auto err = EmbeddingsTranslation({EmbeddingEncoding::kFloat, 9, true}).CheckModel(m);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "dimensions");
  EXPECT_EQ(err->http_status, 400);
  EXPECT_NE(err->message.find("9"), std::string::npos) << err->message;
  EXPECT_NE(err->message.find("at most 8"), std::string::npos) << err->message;
  m.embedding_length = 0;  // unknown here (a remote member): its server judges
  EXPECT_FALSE(EmbeddingsTranslation({EmbeddingEncoding::kFloat, 9, true}).CheckModel(m));
}

TEST(RerankCheckModel, OnlyARerankerServesIt) {
  ModelInfo m;
  m.id = "chatty";
  auto err = RerankTranslation({}).CheckModel(m);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "model");
  EXPECT_EQ(err->code, "model_not_reranker");
  EXPECT_EQ(err->http_status, 400);
  EXPECT_NE(err->message.find("chatty"), std::string::npos);
  m.rerank_outputs = 1;
  EXPECT_FALSE(RerankTranslation({}).CheckModel(m));
}

TEST(ParsePoolingRequest, PicksTheParserAndTheTranslation) {
  auto e = ParsePoolingRequest(ApiShape::kEmbeddings, R"({"input":"x","dimensions":3})", {});
  ASSERT_TRUE(std::holds_alternative<PoolingRequest>(e));
  EXPECT_EQ(std::get<PoolingRequest>(e).request.task, Task::kEmbed);
  ModelInfo narrow;
  narrow.embedding_length = 2;
  EXPECT_TRUE(std::get<PoolingRequest>(e).translation->CheckModel(narrow));
  auto r = ParsePoolingRequest(ApiShape::kRerank, R"({"query":"q","documents":["d"]})", {});
  ASSERT_TRUE(std::holds_alternative<PoolingRequest>(r));
  EXPECT_EQ(std::get<PoolingRequest>(r).request.task, Task::kRerank);
  auto bad = ParsePoolingRequest(ApiShape::kRerank, R"({"input":"x"})", {});
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "input");
}

// --- Answers ------------------------------------------------------------------------------

TEST(EmbeddingsAnswer, ShapeAndNormalisedVectors) {
  // (3, 4) has norm 5: (0.6, 0.8). (0, 0, 2) has norm 2: (0, 0, 1).
  const json r = EmbeddingsTranslation({}).Whole(Completion({{3, 4}, {0, 0, 2}}));
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "m");
  EXPECT_EQ(r["usage"], json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  EXPECT_EQ(r["timings"]["prefill_ms"], 3.5);
  EXPECT_FALSE(r.contains("choices"));
  ASSERT_EQ(r["data"].size(), 2u);
  EXPECT_EQ(r["data"][0]["object"], "embedding");
  EXPECT_EQ(r["data"][0]["index"], 0);
  EXPECT_EQ(r["data"][1]["index"], 1);
  const std::vector<float> a = Floats(r["data"][0]["embedding"]);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_FLOAT_EQ(a[0], 0.6f);
  EXPECT_FLOAT_EQ(a[1], 0.8f);
  EXPECT_EQ(Floats(r["data"][1]["embedding"]), (std::vector<float>{0, 0, 1}));
}

TEST(EmbeddingsAnswer, DimensionsTruncateBeforeNormalising) {
  // (3, 4, 12) has norm 13; its first two values (3, 4) have norm 5: truncation comes first,
  // so the answer is (0.6, 0.8), not (3/13, 4/13).
  const json r = EmbeddingsTranslation({EmbeddingEncoding::kFloat, 2, true})
                     .Whole(Completion({{3, 4, 12}}));
  const std::vector<float> v = Floats(r["data"][0]["embedding"]);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  // The whole vector without dimensions.
  const std::vector<float> whole =
      Floats(EmbeddingsTranslation({}).Whole(Completion({{3, 4, 12}}))["data"][0]["embedding"]);
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_FLOAT_EQ(whole[2], 12.0f / 13.0f);
  // dimensions at or above the width: the whole vector.
  EXPECT_EQ(Floats(EmbeddingsTranslation({EmbeddingEncoding::kFloat, 5, false})
                       .Whole(Completion({{3, 4, 12}}))["data"][0]["embedding"]),
            (std::vector<float>{3, 4, 12}));
}

TEST(EmbeddingsAnswer, RawVectorsAndZeroVectors) {
  const json raw = EmbeddingsTranslation({EmbeddingEncoding::kFloat, 2, false})
                       .Whole(Completion({{3, 4, 12}, {0, 0, 0}}));
  EXPECT_EQ(Floats(raw["data"][0]["embedding"]), (std::vector<float>{3, 4}));
  const json zero = EmbeddingsTranslation({}).Whole(Completion({{0, 0, 0}}));
  EXPECT_EQ(Floats(zero["data"][0]["embedding"]), (std::vector<float>{0, 0, 0}))
      << "a zero vector stays zero (no NaN)";
  // A float is written in its shortest form, read back as the same float.
  const json tenth = EmbeddingsTranslation({EmbeddingEncoding::kFloat, 0, false})
                         .Whole(Completion({{0.1f, -1.5e-7f}}));
  const std::string text = tenth["data"][0]["embedding"].dump();
  EXPECT_EQ(text, "[0.1,-1.5e-07]");
  EXPECT_EQ(Floats(json::parse(text)), (std::vector<float>{0.1f, -1.5e-7f}));
}

TEST(EmbeddingsAnswer, Base64IsTheLittleEndianFloat32Bytes) {
  EXPECT_EQ(Base64Float32({1.0f}), "AACAPw==");  // 00 00 80 3f
  EXPECT_EQ(Base64Float32({}), "");
  const std::vector<float> raw = {1.0f, -2.5f, 0.1f, 3.0e-12f, 1234.5f};
  for (size_t n = 1; n <= raw.size(); ++n) {  // 4, 8, 12, ... bytes: every padding
    const std::vector<float> v(raw.begin(), raw.begin() + static_cast<long>(n));
    const json r = EmbeddingsTranslation({EmbeddingEncoding::kBase64, 0, false})
                       .Whole(Completion({v}));
    ASSERT_TRUE(r["data"][0]["embedding"].is_string());
    auto decoded = DecodeFloats(r["data"][0]["embedding"].get<std::string>());
    ASSERT_TRUE(decoded) << r["data"][0]["embedding"];
    EXPECT_EQ(*decoded, v);
  }
  // Normalised and truncated first, then encoded.
  const json r = EmbeddingsTranslation({EmbeddingEncoding::kBase64, 2, true})
                     .Whole(Completion({{3, 4, 12}}));
  auto decoded = DecodeFloats(r["data"][0]["embedding"].get<std::string>());
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_FLOAT_EQ((*decoded)[0], 0.6f);
  EXPECT_FLOAT_EQ((*decoded)[1], 0.8f);
}

TEST(RerankAnswer, SortedByScoreTiesByIndexCutToTopN) {
  // Scores 0.1, 0.9, 0.5, 0.9; document 4 sends two outputs, the first is its score.
  const json completion = Completion({{0.1f}, {0.9f}, {0.5f}, {0.9f}, {0.7f, 5.0f}});
  const json all = RerankTranslation({}).Whole(completion);
  EXPECT_EQ(all["object"], "list");
  EXPECT_EQ(all["model"], "m");
  EXPECT_EQ(all["usage"], json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  EXPECT_EQ(all["timings"]["prefill_ms"], 3.5);
  std::vector<int64_t> order;
  for (const json& r : all["results"]) order.push_back(r["index"].get<int64_t>());
  EXPECT_EQ(order, (std::vector<int64_t>{1, 3, 4, 2, 0}));
  EXPECT_FLOAT_EQ(all["results"][0]["relevance_score"].get<float>(), 0.9f);
  EXPECT_FLOAT_EQ(all["results"][2]["relevance_score"].get<float>(), 0.7f);
  EXPECT_FALSE(all["results"][0].contains("document"));

  RerankOptions top;
  top.top_n = 2;
  top.return_documents = true;
  top.documents = {"d0", "d1", "d2", "d3", "d4"};
  const json cut = RerankTranslation(top).Whole(completion);
  ASSERT_EQ(cut["results"].size(), 2u);
  EXPECT_EQ(cut["results"][0]["index"], 1);
  EXPECT_EQ(cut["results"][0]["document"], json({{"text", "d1"}}));
  EXPECT_EQ(cut["results"][1]["index"], 3);
  EXPECT_EQ(cut["results"][1]["document"], json({{"text", "d3"}}));
  top.top_n = 9;  // more than there are: all of them
  EXPECT_EQ(RerankTranslation(top).Whole(completion)["results"].size(), 5u);
}

TEST(RerankAnswer, ADocumentWithoutAScoreComesLast) {
  const json r = RerankTranslation({}).Whole(Completion({{}, {-2.0f}}));
  ASSERT_EQ(r["results"].size(), 2u);
  EXPECT_EQ(r["results"][0]["index"], 1);
  EXPECT_EQ(r["results"][1]["index"], 0);
  EXPECT_TRUE(r["results"][1]["relevance_score"].is_null());
}

TEST(PoolingTranslation, NothingStreams) {
  EmbeddingsTranslation t({});
  EXPECT_TRUE(t.Feed(json::object()).empty());
  EXPECT_TRUE(t.Finish().empty());
}

}  // namespace
}  // namespace lifeline::api

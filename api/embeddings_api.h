// POST /v1/embeddings (OpenAI's shape) and POST /v1/rerank (also /rerank: the shape
// llama.cpp, Jina and Cohere share) as requests on the completions path: one prompt per input
// or document (GenerationRequest::task kEmbed / kRerank, n = 1, not chat), answered by the
// engine with one token event per choice that carries `embedding` (serving_api.h) and no
// text. The ChoiceAssembler puts each vector in its choice (`choices[i].embedding`); the
// translations here turn that text_completion body into the route's answer.
//
// Embeddings request: `model`, `input` (a string, an array of strings, an array of token ids,
// or an array of arrays of token ids; 1..2048 inputs, strings non-empty), `encoding_format`
// ("float" | "base64"), `dimensions` (>= 1: the first d values, Matryoshka-style, then
// normalised), `user` (accepted, not used), `slo_class`, `user_role`, and Lifeline's
// `normalize` (default true: each vector L2-normalised; false: the raw pooled vector).
// Answer: {"object": "list", "data": [{"object": "embedding", "index": i, "embedding":
// [floats] | "base64"}], "model", "usage": {"prompt_tokens", "total_tokens"}, "timings"}.
//
// Rerank request: `model`, `query` (non-empty string), `documents` (1..1024 strings or
// {"text": string}; `texts` is TEI's name for it, not both), `top_n` (>= 1, default all),
// `return_documents` (default false), `slo_class`, `user_role`. Answer: {"object": "list",
// "model", "results": [{"index", "relevance_score", "document"?: {"text"}}] by score
// descending (ties by index), at most top_n, "usage", "timings"}. The relevance score is the
// first value of the document's scores.
//
// Neither route streams (`stream` is refused as unknown). Any field a route does not read is
// a 400 `unknown_parameter` naming it, as on the other routes; every refusal names its field.
//
// Thread-safety: pure functions; a translation object belongs to one request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_translation.h"
#include "api/errors.h"
#include "api/openai.h"
#include "api/serving_api.h"

namespace lifeline::api {

// kMaxEmbeddingInputs (serving_api.h): the most `input` entries.
inline constexpr size_t kMaxRerankDocuments = 1024;  // entries in `documents`
static_assert(kMaxRerankDocuments <= kMaxEmbeddingInputs, "the engine's room covers both");

enum class EmbeddingEncoding : uint8_t { kFloat, kBase64 };

struct EmbeddingsOptions {
  EmbeddingEncoding encoding = EmbeddingEncoding::kFloat;
  int64_t dimensions = 0;  // 0: the whole vector
  bool normalize = true;
};

struct RerankOptions {
  int64_t top_n = 0;  // 0: every document
  bool return_documents = false;
  std::vector<std::string> documents;  // the documents' texts, kept only for return_documents
};

// The body of POST /v1/embeddings -> `out` (task kEmbed, prompts, model as sent, slo_class,
// user_role) and `options`. The body checks are every JSON route's (openai.h).
std::optional<ApiError> ParseEmbeddingsRequest(std::string_view body, const RequestLimits& limits,
                                               GenerationRequest* out, EmbeddingsOptions* options);
// The body of POST /v1/rerank -> `out` (task kRerank, rerank_query, one prompt per document)
// and `options`.
std::optional<ApiError> ParseRerankRequest(std::string_view body, const RequestLimits& limits,
                                           GenerationRequest* out, RerankOptions* options);

// A vector as it is answered: its first `dimensions` values (all when 0 or at least its
// width), then divided by its L2 norm when `normalize` (a zero vector stays zero).
std::vector<float> ShapeEmbedding(std::vector<float> raw, int64_t dimensions, bool normalize);
// The values' little-endian float32 bytes in standard base64 with padding: what the OpenAI
// SDKs ask for by default (encoding_format "base64") and decode.
std::string Base64Float32(const std::vector<float>& values);

// An answer that is one JSON body: nothing to stream.
class PoolingTranslation : public ApiTranslation {
 public:
  std::vector<Event> Feed(const nlohmann::json&) override { return {}; }
  std::vector<Event> Finish() override { return {}; }
  // On the prep thread, once the model is resolved and before Submit: what the request asks
  // that this model cannot give (a 400 naming the field and the limit).
  virtual std::optional<ApiError> CheckModel(const ModelInfo& model) const = 0;
};

class EmbeddingsTranslation final : public PoolingTranslation {
 public:
  explicit EmbeddingsTranslation(EmbeddingsOptions options) : options_(options) {}
  // The text_completion body (choices[i].embedding: the raw pooled vectors) as the list of
  // embeddings.
  nlohmann::json Whole(const nlohmann::json& completion) const override;
  // `dimensions` above the model's width (when the model knows it) is a 400.
  std::optional<ApiError> CheckModel(const ModelInfo& model) const override;

 private:
  EmbeddingsOptions options_;
};

class RerankTranslation final : public PoolingTranslation {
 public:
  explicit RerankTranslation(RerankOptions options) : options_(std::move(options)) {}
  // The text_completion body (choices[i].embedding: document i's scores) as the ranked results.
  nlohmann::json Whole(const nlohmann::json& completion) const override;
  // A model without a classification head (rerank_outputs 0) is a 400 naming `model`.
  std::optional<ApiError> CheckModel(const ModelInfo& model) const override;

 private:
  RerankOptions options_;
};

// What the prep thread makes of a kEmbeddings / kRerank body: the request to submit and the
// translation of its answer.
struct PoolingRequest {
  GenerationRequest request;
  std::unique_ptr<PoolingTranslation> translation;
};
std::variant<PoolingRequest, ApiError> ParsePoolingRequest(ApiShape shape, std::string_view body,
                                                           const RequestLimits& limits);

}  // namespace lifeline::api

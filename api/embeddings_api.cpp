#include "api/embeddings_api.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <utility>

#include "base/excerpt.h"
#include "api/openai_util.h"

namespace lifeline::api {

using nlohmann::json;
using namespace detail;

namespace {

constexpr std::string_view kEmbeddingsFields[] = {"model", "input", "encoding_format",
                                                  "dimensions", "user", "normalize",
                                                  "slo_class", "user_role"};
constexpr std::string_view kRerankFields[] = {"model", "top_n", "query", "documents", "texts",
                                              "return_documents", "slo_class", "user_role"};
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

// --- Parsing ------------------------------------------------------------------------------

// 400 for a field the route does not read: never accepted and silently ignored, as on the
// other generation routes (openai.cpp).
std::optional<ApiError> RejectUnknownFields(const json& doc, std::span<const std::string_view> known,
                                            std::string_view route) {
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    const std::string name = Utf8Prefix(it.key(), 64);
    const std::string hint =
        name == "stream" ? "; " + std::string(route) + " answers in one body, it does not stream"
                         : "";
    return InvalidRequestError(name,
                               "unrecognized request argument '" + name + "' on " +
                                   std::string(route) + hint +
                                   " (api/README.md lists the supported fields)",
                               "unknown_parameter");
  }
  return std::nullopt;
}

// model, user, slo_class, user_role: checked and applied as the completions route does.
std::optional<ApiError> ApplySharedFields(const json& doc, std::initializer_list<std::string_view> names,
                                          const RequestLimits& limits, GenerationRequest* out) {
  for (std::string_view name : names) {
    if (auto err = ApplySharedField(name, doc, limits, out)) return err;
  }
  return std::nullopt;
}

// The value of `name` when present and not null (null means "default", as everywhere).
const json* Present(const json& doc, const char* name) {
  auto it = doc.find(name);
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

ApiError Missing(const std::string& name) {
  return InvalidRequestError(name, "missing required parameter '" + name + "'",
                             "missing_required_parameter");
}

// An integer in [1, 2^31): dimensions, top_n.
std::optional<ApiError> PositiveInt(const json& v, const std::string& name, int64_t* out) {
  if (!v.is_number_integer()) return TypeError(name, "an integer", v);
  const bool in_range = v.is_number_unsigned()
                            ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t{kI32Max}
                            : v.get<int64_t>() >= 1 && v.get<int64_t>() <= kI32Max;
  if (!in_range) {
    return InvalidRequestError(name, "'" + name + "' is " + Echo(v) +
                                         ", outside the allowed range [1, " +
                                         std::to_string(kI32Max) + "]",
                               "out_of_range");
  }
  *out = v.get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> Boolean(const json& doc, const char* name, bool* out) {
  const json* v = Present(doc, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return TypeError(name, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

// One text input; an empty one has nothing to embed.
std::optional<ApiError> TextInput(const json& v, const std::string& param, PromptInput* out) {
  if (v.get_ref<const std::string&>().empty()) {
    return InvalidRequestError(param, "'" + param + "' is an empty string; an input needs text",
                               "out_of_range");
  }
  out->text = v.get<std::string>();
  return std::nullopt;
}

// input: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]; input i is prompt i.
std::optional<ApiError> ParseInputs(const json& v, const RequestLimits& limits,
                                    std::vector<PromptInput>* out) {
  constexpr std::string_view kForms =
      "a string, an array of strings, an array of token ids, or an array of arrays of token ids";
  PromptInput one;
  if (v.is_string()) {
    if (auto err = TextInput(v, "input", &one)) return err;
    out->push_back(std::move(one));
    return std::nullopt;
  }
  if (!v.is_array()) return TypeError("input", kForms, v);
  if (v.empty()) {
    return InvalidRequestError("input", "'input' is an empty array; send 1.." +
                                            std::to_string(kMaxEmbeddingInputs) + " inputs",
                               "out_of_range");
  }
  if (v[0].is_number()) {  // one input of token ids (a float in it is refused by its index)
    if (auto err = ParseTokenPrompt(v, "input", limits, &one)) return err;
    out->push_back(std::move(one));
    return std::nullopt;
  }
  if (v.size() > kMaxEmbeddingInputs) {
    return InvalidRequestError("input", "'input' holds " + std::to_string(v.size()) +
                                            " inputs; at most " +
                                            std::to_string(kMaxEmbeddingInputs),
                               "out_of_range");
  }
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "input[" + std::to_string(i) + "]";
    PromptInput in;
    if (v[i].is_string()) {
      if (auto err = TextInput(v[i], p, &in)) return err;
    } else if (v[i].is_array() && !v[i].empty()) {
      if (auto err = ParseTokenPrompt(v[i], p, limits, &in)) return err;
    } else if (v[i].is_array()) {
      return InvalidRequestError(p, "'" + p + "' is an empty array of token ids", "out_of_range");
    } else {
      return TypeError(p, "a string or an array of token ids", v[i]);
    }
    out->push_back(std::move(in));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseEncoding(const json& doc, EmbeddingEncoding* out) {
  const json* v = Present(doc, "encoding_format");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return TypeError("encoding_format", "\"float\" or \"base64\"", *v);
  if (*v == "float") {
    *out = EmbeddingEncoding::kFloat;
  } else if (*v == "base64") {
    *out = EmbeddingEncoding::kBase64;
  } else {
    return InvalidRequestError("encoding_format", "'encoding_format' is " + Echo(*v) +
                                                      "; supported: \"float\", \"base64\"",
                               "unsupported_value");
  }
  return std::nullopt;
}

// One document: "text" or {"text": "..."} (Jina's and Cohere's object form).
std::optional<ApiError> ParseDocument(const json& v, const std::string& param, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_object()) return TypeError(param, "a string or an object {\"text\": string}", v);
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "text") continue;
    const std::string p = param + "." + Utf8Prefix(it.key(), 64);
    return InvalidRequestError(p, "unrecognized argument '" + p + "'; a document object is "
                                  "{\"text\": string}",
                               "unknown_parameter");
  }
  auto text = v.find("text");
  if (text == v.end() || text->is_null()) {
    return InvalidRequestError(param + ".text",
                               "missing '" + param + ".text'; a document object is {\"text\": "
                               "string}",
                               "missing_required_parameter");
  }
  if (!text->is_string()) return TypeError(param + ".text", "a string", *text);
  *out = text->get<std::string>();
  return std::nullopt;
}

// documents (or TEI's `texts`, not both): 1..kMaxRerankDocuments documents.
std::optional<ApiError> ParseDocuments(const json& doc, std::vector<std::string>* out) {
  const json* documents = Present(doc, "documents");
  const json* texts = Present(doc, "texts");
  if (documents != nullptr && texts != nullptr) {
    return InvalidRequestError("texts", "'documents' and 'texts' (TEI's name for the same list) "
                                        "exclude each other; send one",
                               "invalid_value");
  }
  if (documents == nullptr && texts == nullptr) return Missing("documents");
  const std::string name = documents != nullptr ? "documents" : "texts";
  const json& v = documents != nullptr ? *documents : *texts;
  if (!v.is_array()) return TypeError(name, "an array of strings or {\"text\": string} objects", v);
  if (v.empty() || v.size() > kMaxRerankDocuments) {
    return InvalidRequestError(name, "'" + name + "' has " + std::to_string(v.size()) +
                                         " entries; allowed 1.." +
                                         std::to_string(kMaxRerankDocuments),
                               "out_of_range");
  }
  out->resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (auto err = ParseDocument(v[i], name + "[" + std::to_string(i) + "]", &(*out)[i])) {
      return err;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParseQuery(const json& doc, std::string* out) {
  const json* v = Present(doc, "query");
  if (v == nullptr) return Missing("query");
  if (!v->is_string()) return TypeError("query", "a string", *v);
  if (v->get_ref<const std::string&>().empty()) {
    return InvalidRequestError("query", "'query' is an empty string; the documents are ranked "
                                        "against its text",
                               "out_of_range");
  }
  *out = v->get<std::string>();
  return std::nullopt;
}

// --- Answers ------------------------------------------------------------------------------

// The float as the double its shortest decimal form reads as: a client parsing the JSON gets
// this float back, written in about 9 digits instead of the 17 its exact double value takes.
double WireFloat(float f) {
  if (!std::isfinite(f)) return f;
  char buf[32];
  const auto written = std::to_chars(buf, buf + sizeof buf, f);
  double d = f;
  std::from_chars(buf, written.ptr, d);
  return d;
}

json FloatArray(const std::vector<float>& values) {
  json out = json::array();
  for (float f : values) out.push_back(WireFloat(f));
  return out;
}

const json& Choices(const json& completion) {
  static const json kNone = json::array();
  auto it = completion.find("choices");
  return it != completion.end() && it->is_array() ? *it : kNone;
}

// A choice's `embedding` (the assembler's exact float values); empty when it has none.
std::vector<float> ChoiceVector(const json& choice) {
  std::vector<float> out;
  auto it = choice.find("embedding");
  if (it == choice.end() || !it->is_array()) return out;
  out.reserve(it->size());
  for (const json& x : *it) out.push_back(x.is_number() ? x.get<float>() : std::nanf(""));
  return out;
}

// {prompt_tokens, total_tokens}: what OpenAI's embeddings and the rerankers report.
json PoolingUsage(const json& completion) {
  const json usage = completion.value("usage", json::object());
  const int64_t prompt = usage.is_object() ? usage.value("prompt_tokens", int64_t{0}) : 0;
  const int64_t completion_tokens =
      usage.is_object() ? usage.value("completion_tokens", int64_t{0}) : 0;
  return {{"prompt_tokens", prompt}, {"total_tokens", prompt + completion_tokens}};
}

// The envelope both answers share; `timings` is Lifeline's, carried over as on the other
// translated routes.
json ListBody(const json& completion, const char* items_key, json items) {
  json body = {{"object", "list"},
               {items_key, std::move(items)},
               {"model", completion.value("model", std::string())},
               {"usage", PoolingUsage(completion)}};
  if (auto t = completion.find("timings"); t != completion.end() && t->is_object()) {
    body["timings"] = *t;
  }
  return body;
}

}  // namespace

std::optional<ApiError> ParseEmbeddingsRequest(std::string_view body, const RequestLimits& limits,
                                               GenerationRequest* out, EmbeddingsOptions* options) {
  json doc;
  if (auto err = ParseJsonObject(body, limits, &doc)) return err;
  if (auto err = RejectUnknownFields(doc, kEmbeddingsFields, "/v1/embeddings")) return err;
  if (auto err = ApplySharedFields(doc, {"model", "user", "slo_class", "user_role"}, limits, out)) {
    return err;
  }
  const json* input = Present(doc, "input");
  if (input == nullptr) return Missing("input");
  if (auto err = ParseInputs(*input, limits, &out->prompts)) return err;
  if (auto err = ParseEncoding(doc, &options->encoding)) return err;
  if (const json* d = Present(doc, "dimensions")) {
    if (auto err = PositiveInt(*d, "dimensions", &options->dimensions)) return err;
  }
  if (auto err = Boolean(doc, "normalize", &options->normalize)) return err;
  out->task = Task::kEmbed;
  out->is_chat = false;
  out->n = 1;
  return std::nullopt;
}

std::optional<ApiError> ParseRerankRequest(std::string_view body, const RequestLimits& limits,
                                           GenerationRequest* out, RerankOptions* options) {
  json doc;
  if (auto err = ParseJsonObject(body, limits, &doc)) return err;
  if (auto err = RejectUnknownFields(doc, kRerankFields, "/v1/rerank")) return err;
  if (auto err = ApplySharedFields(doc, {"model", "slo_class", "user_role"}, limits, out)) {
    return err;
  }
  if (auto err = ParseQuery(doc, &out->rerank_query)) return err;
  std::vector<std::string> documents;
  if (auto err = ParseDocuments(doc, &documents)) return err;
  if (const json* n = Present(doc, "top_n")) {
    if (auto err = PositiveInt(*n, "top_n", &options->top_n)) return err;
  }
  if (auto err = Boolean(doc, "return_documents", &options->return_documents)) return err;
  out->task = Task::kRerank;
  out->is_chat = false;
  out->n = 1;
  out->prompts.reserve(documents.size());
  for (const std::string& d : documents) out->prompts.push_back(PromptInput{d, {}, false});
  if (options->return_documents) options->documents = std::move(documents);
  return std::nullopt;
}

std::vector<float> ShapeEmbedding(std::vector<float> raw, int64_t dimensions, bool normalize) {
  if (dimensions > 0 && static_cast<uint64_t>(dimensions) < raw.size()) {
    raw.resize(static_cast<size_t>(dimensions));
  }
  if (!normalize) return raw;
  double sum_sq = 0;  // in double: 4096 squares of float sum without losing the small ones
  for (float x : raw) sum_sq += static_cast<double>(x) * x;
  if (sum_sq <= 0 || !std::isfinite(sum_sq)) return raw;  // zero stays zero
  const double inv_norm = 1.0 / std::sqrt(sum_sq);
  for (float& x : raw) x = static_cast<float>(x * inv_norm);
  return raw;
}

std::string Base64Float32(const std::vector<float>& values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (float f : values) {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k) {
      group = (group << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    }
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 0x3f] : '=');
    }
  }
  return out;
}

json EmbeddingsTranslation::Whole(const json& completion) const {
  json data = json::array();
  for (const json& choice : Choices(completion)) {
    const std::vector<float> v =
        ShapeEmbedding(ChoiceVector(choice), options_.dimensions, options_.normalize);
    json item = {{"object", "embedding"}, {"index", choice.value("index", int64_t{0})}};
    item["embedding"] = options_.encoding == EmbeddingEncoding::kBase64 ? json(Base64Float32(v))
                                                                        : FloatArray(v);
    data.push_back(std::move(item));
  }
  return ListBody(completion, "data", std::move(data));
}

std::optional<ApiError> EmbeddingsTranslation::CheckModel(const ModelInfo& model) const {
  // 0: the width is not known here (a remote member); its server judges `dimensions`.
  if (options_.dimensions <= 0 || model.embedding_length <= 0 ||
      options_.dimensions <= model.embedding_length) {
    return std::nullopt;
  }
  return InvalidRequestError("dimensions", "'dimensions' is " +
                                               std::to_string(options_.dimensions) + "; model '" +
                                               model.id + "' embeds in at most " +
                                               std::to_string(model.embedding_length) +
                                               " dimensions (its embedding_length)",
                             "out_of_range");
}

json RerankTranslation::Whole(const json& completion) const {
  struct Scored {
    int64_t index;
    std::optional<float> score;  // none: the engine sent no (finite) score for it
  };
  std::vector<Scored> scored;
  for (const json& choice : Choices(completion)) {
    const std::vector<float> v = ChoiceVector(choice);
    Scored s{choice.value("index", int64_t{0}), std::nullopt};
    if (!v.empty() && std::isfinite(v[0])) s.score = v[0];
    scored.push_back(s);
  }
  // Best first, equal scores in the documents' order; a document without a score last.
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.score.has_value() != b.score.has_value()) return a.score.has_value();
    if (a.score && *a.score != *b.score) return *a.score > *b.score;
    return a.index < b.index;
  });
  if (options_.top_n > 0 && static_cast<uint64_t>(options_.top_n) < scored.size()) {
    scored.resize(static_cast<size_t>(options_.top_n));
  }
  json results = json::array();
  for (const Scored& s : scored) {
    json r = {{"index", s.index},
              {"relevance_score", s.score ? json(WireFloat(*s.score)) : json(nullptr)}};
    if (options_.return_documents && s.index >= 0 &&
        static_cast<size_t>(s.index) < options_.documents.size()) {
      r["document"] = {{"text", options_.documents[static_cast<size_t>(s.index)]}};
    }
    results.push_back(std::move(r));
  }
  return ListBody(completion, "results", std::move(results));
}

std::optional<ApiError> RerankTranslation::CheckModel(const ModelInfo& model) const {
  if (model.rerank_outputs > 0) return std::nullopt;
  return InvalidRequestError("model", "model '" + model.id + "' is not a reranker: it has no "
                                          "classification head (meta.rerank_outputs in "
                                          "GET /v1/models); serve a reranking model for "
                                          "/v1/rerank",
                             "model_not_reranker");
}

std::variant<PoolingRequest, ApiError> ParsePoolingRequest(ApiShape shape, std::string_view body,
                                                           const RequestLimits& limits) {
  PoolingRequest out;
  if (shape == ApiShape::kRerank) {
    RerankOptions options;
    if (auto err = ParseRerankRequest(body, limits, &out.request, &options)) return *err;
    out.translation = std::make_unique<RerankTranslation>(std::move(options));
    return out;
  }
  EmbeddingsOptions options;
  if (auto err = ParseEmbeddingsRequest(body, limits, &out.request, &options)) return *err;
  out.translation = std::make_unique<EmbeddingsTranslation>(options);
  return out;
}

}  // namespace lifeline::api

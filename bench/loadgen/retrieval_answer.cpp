#include "bench/loadgen/retrieval_answer.h"

#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::loadgen {

namespace {

std::string Entry(const char* array, size_t i, const char* field) {
  return std::string(array) + "[" + std::to_string(i) + "]." + field;
}

// The body as a JSON object, with the fields every retrieval answer shares copied into *x;
// "" or why there is no answer to check.
std::string ReadAnswer(HttpExchange* x, nlohmann::json* j) {
  if (x->body_bytes > static_cast<int64_t>(x->body.size())) {
    return "answer of " + std::to_string(x->body_bytes) + " bytes is longer than the " +
           std::to_string(x->body.size()) + " bytes the client keeps to check it";
  }
  *j = nlohmann::json::parse(x->body, nullptr, false);
  if (!j->is_object()) return "answer is not a JSON object";
  if (auto m = j->find("model"); x->served_model.empty() && m != j->end() && m->is_string()) {
    x->served_model = m->get<std::string>();
  }
  x->completion_tokens = 0;
  if (auto u = j->find("usage"); u != j->end() && u->is_object()) {
    for (const char* key : {"prompt_tokens", "total_tokens"}) {
      auto t = u->find(key);
      if (t != u->end() && t->is_number_integer() && t->get<int64_t>() >= 0) {
        x->prompt_tokens = t->get<int64_t>();
        break;
      }
    }
  }
  if (auto t = j->find("timings"); t != j->end() && t->is_object()) x->timings = *t;
  return "";
}

// Index i of `count` entries seen once: "" or why not.
std::string CheckIndex(const nlohmann::json& entry, const char* array, size_t i, int64_t count,
                       std::vector<bool>* seen) {
  auto it = entry.find("index");
  if (it == entry.end() || !it->is_number_integer()) {
    return Entry(array, i, "index") + " is not an integer";
  }
  const int64_t index = it->get<int64_t>();
  if (index < 0 || index >= count) {
    return Entry(array, i, "index") + " " + std::to_string(index) + " is outside [0, " +
           std::to_string(count) + ")";
  }
  if ((*seen)[static_cast<size_t>(index)]) {
    return Entry(array, i, "index") + " " + std::to_string(index) + " appears twice";
  }
  (*seen)[static_cast<size_t>(index)] = true;
  return "";
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '+' || c == '/';
}

// The number of float32 values a base64 embedding holds, or -1 when it is not standard padded
// base64 of whole float32 values (what OpenAI's SDKs decode).
int64_t Base64Floats(const std::string& s) {
  if (s.empty() || s.size() % 4 != 0) return -1;
  size_t pad = 0;
  while (pad < 2 && s[s.size() - 1 - pad] == '=') ++pad;
  for (size_t i = 0; i + pad < s.size(); ++i) {
    if (!IsBase64Char(s[i])) return -1;
  }
  const size_t bytes = s.size() / 4 * 3 - pad;
  return bytes % 4 == 0 ? static_cast<int64_t>(bytes / 4) : -1;
}

// The width of one embedding, or -1 when it is not a non-empty vector in the asked encoding.
int64_t EmbeddingWidth(const nlohmann::json& e, bool base64) {
  if (base64) return e.is_string() ? Base64Floats(e.get_ref<const std::string&>()) : -1;
  if (!e.is_array() || e.empty()) return -1;
  for (const nlohmann::json& v : e) {
    if (!v.is_number()) return -1;
  }
  return static_cast<int64_t>(e.size());
}

}  // namespace

std::string CheckEmbeddingsAnswer(int64_t inputs, bool base64, HttpExchange* x) {
  nlohmann::json j;
  if (std::string why = ReadAnswer(x, &j); !why.empty()) return why;
  auto data = j.find("data");
  if (data == j.end() || !data->is_array()) return "answer has no \"data\" array";
  if (static_cast<int64_t>(data->size()) != inputs) {
    return std::to_string(data->size()) + " data entries for " + std::to_string(inputs) +
           " inputs";
  }
  std::vector<bool> seen(static_cast<size_t>(inputs), false);
  int64_t width = -1;
  for (size_t i = 0; i < data->size(); ++i) {
    const nlohmann::json& d = (*data)[i];
    if (!d.is_object()) return "data[" + std::to_string(i) + "] is not an object";
    if (std::string why = CheckIndex(d, "data", i, inputs, &seen); !why.empty()) return why;
    auto e = d.find("embedding");
    const int64_t w = e == d.end() ? -1 : EmbeddingWidth(*e, base64);
    if (w <= 0) {
      return Entry("data", i, "embedding") +
             (base64 ? " is not a non-empty base64 string of float32 values"
                     : " is not a non-empty array of numbers");
    }
    if (width >= 0 && w != width) {
      return Entry("data", i, "embedding") + " has " + std::to_string(w) + " values, data[0] " +
             std::to_string(width);
    }
    width = w;
  }
  return "";
}

std::string CheckRerankAnswer(int64_t documents, int64_t results, HttpExchange* x) {
  nlohmann::json j;
  if (std::string why = ReadAnswer(x, &j); !why.empty()) return why;
  auto res = j.find("results");
  if (res == j.end() || !res->is_array()) return "answer has no \"results\" array";
  if (static_cast<int64_t>(res->size()) != results) {
    return std::to_string(res->size()) + " results for " + std::to_string(results) +
           (results == documents ? " documents" : " (top_n of " + std::to_string(documents) +
                                                      " documents)");
  }
  std::vector<bool> seen(static_cast<size_t>(documents), false);
  for (size_t i = 0; i < res->size(); ++i) {
    const nlohmann::json& r = (*res)[i];
    if (!r.is_object()) return "results[" + std::to_string(i) + "] is not an object";
    if (std::string why = CheckIndex(r, "results", i, documents, &seen); !why.empty()) return why;
    auto s = r.find("relevance_score");
    if (s == r.end() || !s->is_number() || !std::isfinite(s->get<double>())) {
      return Entry("results", i, "relevance_score") + " is not a number";
    }
  }
  return "";
}

}  // namespace lifeline::loadgen

// Constrained-decoding micro-benchmark: milliseconds per token mask (GrammarMatcher::ApplyMask
// on a logits array of the vocabulary's size) for a JSON-schema grammar and the json_object
// grammar, at chosen points of a JSON document, on real vocabularies. Thread CPU time, so that
// other work on a shared machine does not count. Not a test: no assertions.
//
//   grammar_bench [--shared DIR] [--reps N] [VOCAB.gguf ...]
// Default vocabularies: DIR/models/llama-2-tiny-random.gguf (32k SPM),
// DIR/reference/tokenizer/ggml-vocab-llama-bpe.gguf (128k BPE), .../ggml-vocab-qwen2.gguf.
//
// Per vocabulary it prints: GrammarVocab::Build time; per-request setup (schema -> GBNF ->
// ParseGbnf -> GrammarMatcher); then per point of the document the first mask there on a
// fresh vocabulary memo (cold: the position masks are computed by trie walks) and the median
// of N masks at the same state (warm: what every later token at such a state costs), and the
// median / p99 over a whole document walked token by token (greedy longest allowed token).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "text/grammar/grammar.h"
#include "text/grammar/grammar_matcher.h"
#include "text/grammar/grammar_vocab.h"
#include "text/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline::grammar {
namespace {

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "age":{"type":"integer"},
  "score":{"type":["number","null"]},
  "kind":{"enum":["cat","dog","bird"]},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string"}},"required":["street","city"],"additionalProperties":false}},
  "required":["name","tags","age","score","kind","address"],"additionalProperties":false})";

const char* kDoc =
    "{\"name\": \"Zoë Martin, customer since 2019\", \"tags\": [\"vip\", \"late delivery\"], "
    "\"age\": 42, \"score\": 0.875, \"kind\": \"dog\", \"address\": {\"street\": \"12 Rue de la "
    "Paix\", \"city\": \"Paris\"}}";

struct Point {
  const char* name;
  const char* prefix;  // document prefix after which the mask is measured
};

const Point kSchemaPoints[] = {
    {"start of document", ""},
    {"after a key", "{\"name\""},
    {"value start (after \": \")", "{\"name\": "},
    {"inside a string", "{\"name\": \"Zoë Mar"},
    {"inside a number", "{\"name\": \"x\", \"tags\": [], \"age\": 4"},
    {"after a value", "{\"name\": \"x\", \"tags\": [], \"age\": 42"},
};

const char* kObjectDoc =
    "{\"order\": {\"id\": 1234, \"items\": [{\"sku\": \"A-17\", \"qty\": 2, \"price\": 9.99}], "
    "\"note\": \"leave at the door\"}, \"ok\": true}";

const Point kObjectPoints[] = {
    {"start of document", ""},
    {"after a key", "{\"order\""},
    {"value start (after \": \")", "{\"order\": "},
    {"inside a string", "{\"order\": {\"note\": \"leave at"},
    {"inside a number", "{\"order\": {\"id\": 12"},
    {"after a value", "{\"order\": {\"id\": 1234"},
};

struct Vocab {
  std::string name;
  std::vector<std::string> pieces;
  std::vector<int32_t> eog;
  std::unordered_map<std::string, int32_t> by_piece;
};

bool LoadVocab(const std::string& path, Vocab* v) {
  auto file = GgufFile::Open(path);
  if (!file.ok()) return false;
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return false;
  v->name = path.substr(path.find_last_of('/') + 1);
  for (int32_t id = 0; id < (*tok)->n_vocab(); ++id) {
    v->pieces.push_back((*tok)->TokenToPiece(id));
    if ((*tok)->IsEndOfGeneration(id)) v->eog.push_back(id);
    if (!v->pieces.back().empty()) v->by_piece.emplace(v->pieces.back(), id);
  }
  return true;
}

std::shared_ptr<const GrammarVocab> BuildVocab(const Vocab& v) {
  return *GrammarVocab::Build(v.pieces, v.eog);
}

// Masks at each point: cold (fresh memo, first mask) and warm (median of reps).
void MeasurePoints(const Vocab& v, const std::string& gbnf, const Point* points, size_t n_points,
                   int reps) {
  auto grammar = *ParseGbnf(gbnf);
  std::vector<float> logits(v.pieces.size());
  for (size_t p = 0; p < n_points; ++p) {
    auto vocab = BuildVocab(v);  // empty memo: the cold figure includes the trie walks
    GrammarMatcher m(grammar, vocab);
    if (!m.AcceptBytes(points[p].prefix).ok()) {
      std::printf("| %s | (prefix refused) | | |\n", points[p].name);
      continue;
    }
    std::fill(logits.begin(), logits.end(), 0.0f);
    double t0 = ThreadCpuMs();
    int32_t allowed = m.ApplyMask(logits.data(), static_cast<int32_t>(logits.size()));
    double cold = ThreadCpuMs() - t0;
    std::vector<double> warm;
    for (int r = 0; r < reps; ++r) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      t0 = ThreadCpuMs();
      m.ApplyMask(logits.data(), static_cast<int32_t>(logits.size()));
      warm.push_back(ThreadCpuMs() - t0);
    }
    std::printf("| %s | %d | %.3f | %.4f |\n", points[p].name, allowed, cold, Quantile(warm, 0.5));
  }
}

// The document walked token by token: the longest allowed piece that matches the text next.
void MeasureDocument(const Vocab& v, const std::shared_ptr<const GrammarVocab>& vocab,
                     const std::string& gbnf, const std::string& doc, const char* label) {
  auto grammar = *ParseGbnf(gbnf);
  GrammarMatcher m(grammar, vocab);
  std::vector<float> logits(v.pieces.size());
  std::vector<double> ms;
  size_t pos = 0;
  while (pos < doc.size()) {
    double t0 = ThreadCpuMs();
    m.ApplyMask(logits.data(), static_cast<int32_t>(logits.size()));
    ms.push_back(ThreadCpuMs() - t0);
    int32_t pick = -1;
    for (size_t len = std::min<size_t>(24, doc.size() - pos); len > 0 && pick < 0; --len) {
      auto it = v.by_piece.find(doc.substr(pos, len));
      if (it != v.by_piece.end() && m.IsAllowed(it->second)) {
        pick = it->second;
        pos += len;
      }
    }
    if (pick < 0 || !m.Accept(pick).ok()) {
      std::printf("| %s | (stuck at byte %zu) | | | |\n", label, pos);
      return;
    }
  }
  double total = 0;
  for (double x : ms) total += x;
  std::printf("| %s | %zu | %.4f | %.4f | %.3f |\n", label, ms.size(), Quantile(ms, 0.5),
              Quantile(ms, 0.99), total);
}

void RunVocab(const std::string& path, int reps) {
  Vocab v;
  if (!LoadVocab(path, &v)) {
    std::printf("\n%s: cannot load, skipped\n", path.c_str());
    return;
  }
  double t0 = ThreadCpuMs();
  auto vocab = BuildVocab(v);
  double build_ms = ThreadCpuMs() - t0;
  std::printf("\n### %s (%zu tokens)\n\nGrammarVocab::Build: %.1f ms (once per model)\n",
              v.name.c_str(), v.pieces.size(), build_ms);

  std::vector<double> setup;
  for (int r = 0; r < 20; ++r) {
    t0 = ThreadCpuMs();
    auto text = JsonSchemaTextToGbnf(kSchema);
    auto g = ParseGbnf(*text);
    GrammarMatcher m(*g, vocab);
    setup.push_back(ThreadCpuMs() - t0);
  }
  std::printf("Per-request setup (schema -> GBNF -> ParseGbnf -> GrammarMatcher): %.3f ms\n\n",
              Quantile(setup, 0.5));

  const std::string schema_gbnf = *JsonSchemaTextToGbnf(kSchema);
  const std::string object_gbnf = JsonObjectGbnf();
  std::printf("| point (JSON schema grammar) | tokens allowed | cold ms | warm ms (median) |\n");
  std::printf("| --- | ---: | ---: | ---: |\n");
  MeasurePoints(v, schema_gbnf, kSchemaPoints, std::size(kSchemaPoints), reps);
  std::printf("\n| point (json_object grammar) | tokens allowed | cold ms | warm ms (median) |\n");
  std::printf("| --- | ---: | ---: | ---: |\n");
  MeasurePoints(v, object_gbnf, kObjectPoints, std::size(kObjectPoints), reps);

  std::printf("\n| whole document, token by token | masks | median ms | p99 ms | total ms |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  auto fresh = BuildVocab(v);
  MeasureDocument(v, fresh, schema_gbnf, kDoc, "schema, 1st request (cold memo)");
  MeasureDocument(v, fresh, schema_gbnf, kDoc, "schema, 2nd request (memo warm)");
  fresh = BuildVocab(v);
  MeasureDocument(v, fresh, object_gbnf, kObjectDoc, "json_object, 1st request (cold memo)");
  MeasureDocument(v, fresh, object_gbnf, kObjectDoc, "json_object, 2nd request");
  // What a server would do once at model load: precompute the json_object grammar.
  fresh = BuildVocab(v);
  t0 = ThreadCpuMs();
  GrammarMatcher pre(*ParseGbnf(object_gbnf), fresh);
  int32_t positions = pre.Precompute();
  double pre_ms = ThreadCpuMs() - t0;
  MeasureDocument(v, fresh, schema_gbnf, kDoc, "schema, 1st request after precompute");
  std::printf("\nPrecompute of the json_object grammar (once per model): %d positions, %.1f ms\n",
              positions, pre_ms);
}

}  // namespace
}  // namespace lifeline::grammar

int main(int argc, char** argv) {
  std::string shared = "../shared";
  int reps = 200;
  std::vector<std::string> vocabs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--shared") && i + 1 < argc) {
      shared = argv[++i];
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      vocabs.push_back(argv[i]);
    }
  }
  if (vocabs.empty()) {
    vocabs = {shared + "/models/llama-2-tiny-random.gguf",
              shared + "/reference/tokenizer/ggml-vocab-llama-bpe.gguf",
              shared + "/reference/tokenizer/ggml-vocab-qwen2.gguf"};
  }
  std::printf("grammar_bench: ms of thread CPU per GrammarMatcher::ApplyMask\n");
  for (const auto& path : vocabs) lifeline::grammar::RunVocab(path, reps);
  return 0;
}

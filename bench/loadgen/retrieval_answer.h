// The checks of a retrieval answer (--api embeddings / rerank): a response counts as served
// only when it is the answer asked for, so a server that answers 200 with too few vectors, an
// empty one or a ranking of the wrong documents fails the request ("malformed_answer") instead
// of being timed as a success. Shapes (OpenAI's embeddings; the rerank shape Lifeline,
// llama.cpp, vLLM, Jina and Cohere share):
//
//   embeddings  {"data": [{"index": i, "embedding": [numbers] | "base64"}], "model",
//                "usage": {"prompt_tokens", "total_tokens"}, "timings"?}
//   rerank      {"results": [{"index": i, "relevance_score": number}], "model", "usage", ...}
//
// Each check also fills what the record keeps: prompt tokens (usage.prompt_tokens, else
// usage.total_tokens: vLLM's rerank usage has only the total, and an embedding has no output
// tokens), no completion tokens, the model and the server's timings.
//
// Ownership: values. Thread-safety: pure functions. Failure: the returned text ("" = valid).
#pragma once

#include <cstdint>
#include <string>

#include "bench/loadgen/http_client.h"

namespace lifeline::loadgen {

// How much of a retrieval answer the client keeps to check it: a batch of 2048 float vectors
// of width 4096 in JSON is about 100 MiB, so this bounds the batches of very wide models
// (base64 is a third of the size); a longer body fails with a message saying so.
constexpr size_t kMaxRetrievalBodyBytes = size_t{256} << 20;

// `inputs` entries in `data`, indices 0..inputs-1 each once, every embedding a non-empty
// array of numbers (`base64`: a non-empty base64 string of whole float32 values), all of one
// width.
std::string CheckEmbeddingsAnswer(int64_t inputs, bool base64, HttpExchange* x);

// `results` entries (`documents`, or fewer when the body asked for a smaller top_n), each a
// distinct index in [0, documents) with a finite relevance_score.
std::string CheckRerankAnswer(int64_t documents, int64_t results, HttpExchange* x);

}  // namespace lifeline::loadgen

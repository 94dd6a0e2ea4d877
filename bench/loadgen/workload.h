// What the load generator sends: target specs (--target URL,model=...,label=...), the workload
// (API, length distributions, SLO headers, prompts) and the request body of request i. Request
// i is a pure function of (seed, step, i), so every target receives identical requests and a
// fixed seed reproduces the run's schedule and prompts.
//
// A thinking model's requests may carry `thinking_budget_tokens` / `reasoning_effort` (chat
// only): set for every request by the workload, or per prompt by a JSONL prompts file.
//
// Prompt lengths are counted in words (the client cannot tokenize for an arbitrary server);
// the server's usage.prompt_tokens is recorded next to it when the server reports it.
//
// Besides generation (completions, chat) the workload may be retrieval: `--api embeddings`
// (POST /v1/embeddings, `--batch-inputs` inputs of `--prompt-len` words each) or `--api rerank`
// (POST /v1/rerank, a query of `--prompt-len` words and `--documents` documents of
// `--document-words` words). Neither streams: the answer is one JSON body, checked by
// retrieval_answer.h.
//
// Ownership: values. Thread-safety: immutable after construction. Failure: Parse* and
// LoadPromptsFile return InvalidArgument / NotFound / Io naming the flag, the value and the
// limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/loadgen/distributions.h"
#include "bench/loadgen/http_client.h"

namespace lifeline::loadgen {

struct TargetSpec {
  std::string text;   // as given
  Url url;
  std::string model;  // "" = the server's default model (body field omitted)
  std::string label;  // defaults to "HOST:PORT"
  // Facts the server may not report (GET /v1/models), given on the command line.
  std::string params;
  std::string quant;
  std::string hardware;
};

// "URL[,model=NAME][,label=NAME][,params=N][,quant=Q][,hw=TEXT]".
Result<TargetSpec> ParseTargetSpec(const std::string& flag, const std::string& text);

enum class Api { kCompletions, kChat, kEmbeddings, kRerank };

// "completions", "chat", "embeddings", "rerank".
const char* ApiName(Api api);
// The inverse; errors name the flag and the four names.
Result<Api> ParseApi(const std::string& flag, const std::string& text);
// Embeddings or rerank: one non-streamed POST whose answer is not a completion.
bool IsRetrievalApi(Api api);

// Defaults and limits of the retrieval flags. The input and document caps are Lifeline's
// (api/README.md: 1..2048 inputs, 1..1024 documents); a server that takes more is still
// measured within them.
constexpr int64_t kDefaultBatchInputs = 1;
constexpr int64_t kMaxBatchInputs = 2048;
constexpr int64_t kDefaultDocuments = 8;
constexpr int64_t kMaxDocuments = 1024;
constexpr int64_t kDefaultDocumentWords = 64;
constexpr int64_t kMaxDocumentWords = 100000;

// What a request asks of a thinking model; unset fields are not sent. Lifeline and llama.cpp
// read `thinking_budget_tokens`, OpenAI-style servers `reasoning_effort`; both are chat fields.
struct ThinkingParams {
  std::optional<int64_t> budget_tokens;  // thinking_budget_tokens: -1 unlimited, 0 none, N
  std::string reasoning_effort;          // "" (not sent), minimal, low, medium or high
  bool any() const { return budget_tokens.has_value() || !reasoning_effort.empty(); }
};

// Budget in [-1, 2147483647], effort one of minimal / low / medium / high; errors start with
// `where` (a flag, or a prompts file and line).
Status ValidateThinking(const std::string& where, const ThinkingParams& t);

struct WorkloadSpec {
  Api api = Api::kCompletions;
  LengthDist prompt_words{LengthDist::Kind::kFixed, 32, 0};
  LengthDist output_tokens{LengthDist::Kind::kFixed, 64, 0};
  bool stream = true;
  bool include_usage = true;  // stream_options.include_usage
  bool ignore_eos = false;
  std::string slo_class;      // X-SLO-Class header ("" = none)
  std::string user_role;      // X-User-Role header
  bool slo_in_body = false;   // also send slo_class / user_role body fields
  std::string api_key;        // Authorization: Bearer
  std::vector<std::pair<std::string, std::string>> headers;  // extra, verbatim
  nlohmann::json extra_body = nlohmann::json::object();      // merged into every body
  std::vector<std::string> prompts;  // from --prompts; empty = generated words
  ThinkingParams thinking;           // --thinking-budget / --reasoning-effort: every request
  // Per prompt, from a JSONL prompts file's "thinking_budget_tokens" / "reasoning_effort":
  // each set field overrides `thinking` for the requests that draw that prompt. Empty, or one
  // entry per prompt.
  std::vector<ThinkingParams> prompt_thinking;
  // Conversations (`--conversations N`): N users, each a conversation that grows by one turn
  // per request, closed loop (user u's next turn is sent think_time_ms after its last answer).
  // Request i is turn i / N of user i % N; every user's prompt starts with the same system
  // text of system_words words, then its own history: per earlier turn its message
  // (prompt_words words) and a reply of reply_words words (synthetic: the bench does not
  // resend the server's real answer, so a server's cache matches up to the previous prompt),
  // then the new message. 0: off (independent requests).
  int64_t conversations = 0;
  double think_time_ms = 0;
  int64_t system_words = 200;
  int64_t reply_words = 32;
  // Agent loops (`--agent-tool-words N`, with --conversations): each user is an agent that
  // called a tool at every earlier step: after the system text and the user's task (turn 0's
  // message), per earlier turn an assistant tool call (`lookup`, a short query) and the tool's
  // result of agent_tool_words words; no new user message after the first. The request
  // carries the `lookup` tool. 0: off (plain conversations).
  int64_t agent_tool_words = 0;
  // Retrieval (--api embeddings / rerank). Unset: the flag was not given (the default above
  // applies); a flag of one API given with another is refused, so a typo in --api cannot
  // silently drop it.
  std::optional<int64_t> batch_inputs;    // --batch-inputs: inputs per embeddings request
  std::string encoding_format;            // --encoding-format: "" (float), float or base64
  std::optional<int64_t> documents;       // --documents: documents per rerank request
  std::optional<int64_t> document_words;  // --document-words: words of each document
};

// Thinking fields only where the body can carry them: chat requests (servers refuse them on
// completions). Retrieval flags only with their API and within their ranges; generation-only
// settings (--conversations, --ignore-eos, --no-stream, --no-usage) not with a retrieval API.
// Errors name the flag or the prompts file.
Status ValidateWorkload(const WorkloadSpec& w);

// The values a retrieval request uses: the flag's, else its default.
int64_t BatchInputs(const WorkloadSpec& w);
int64_t Documents(const WorkloadSpec& w);
int64_t DocumentWords(const WorkloadSpec& w);
bool RequestsBase64(const WorkloadSpec& w);  // --encoding-format base64

// One request as planned (identical for every target).
struct PlannedRequest {
  int64_t index = 0;
  int64_t prompt_words = 0;
  int64_t max_tokens = 0;
  std::string prompt;
  ThinkingParams thinking;  // the workload's, with the drawn prompt's own fields over it
  // Conversations: the turn (0 = the user's first), the user, and the chat messages
  // (system, then user / assistant alternating, ending with the new user message); for
  // /v1/completions `prompt` holds them as one transcript.
  int64_t turn = -1;
  int64_t user = -1;
  std::vector<std::pair<std::string, std::string>> messages;
  // Retrieval: the embeddings inputs, or the rerank documents (the query is `prompt`);
  // prompt_words then counts every word sent (inputs, or query and documents), and max_tokens
  // is 0. Empty for generation.
  std::vector<std::string> inputs;
};

PlannedRequest PlanRequest(const WorkloadSpec& w, uint64_t seed, int step, int64_t index);

// Whether the requests ask for a streamed response: never for a retrieval API (its answer is
// one body); else `--extra-body`'s boolean "stream" when it has one (it is merged last, so it
// is what the server sees), else `stream` (--no-stream).
bool RequestsStream(const WorkloadSpec& w);

// The JSON body for `target` (model field only when the target names one).
std::string RequestBody(const WorkloadSpec& w, const TargetSpec& target, const PlannedRequest& r);

// Path and headers of a request to `target`; a retrieval request also carries the check of
// its answer (retrieval_answer.h) and a larger cap on the body the client keeps.
HttpRequestSpec RequestSpec(const WorkloadSpec& w, const TargetSpec& target,
                            const PlannedRequest& r, double timeout_s);

// One prompt per non-empty line; a line starting with '{' is JSON with a string "prompt" (or
// "text"), and optionally "thinking_budget_tokens" (integer) and "reasoning_effort" (string),
// checked by ValidateThinking. At most 1,000,000 prompts. With `thinking`, one entry per
// prompt is appended to it (empty for plain lines and lines without those fields).
Result<std::vector<std::string>> LoadPromptsFile(const std::string& path,
                                                 std::vector<ThinkingParams>* thinking = nullptr);

// Number of whitespace-separated words.
int64_t CountWords(const std::string& text);

// "NAME: VALUE" -> pair; errors name the flag.
Result<std::pair<std::string, std::string>> ParseHeader(const std::string& flag,
                                                       const std::string& text);

}  // namespace lifeline::loadgen

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

enum class Api { kCompletions, kChat };

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
};

// Thinking fields only where the body can carry them: chat requests (servers refuse them on
// completions). Errors name the flag or the prompts file.
Status ValidateWorkload(const WorkloadSpec& w);

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
};

PlannedRequest PlanRequest(const WorkloadSpec& w, uint64_t seed, int step, int64_t index);

// Whether the requests ask for a streamed response: `--extra-body`'s boolean "stream" when it
// has one (it is merged last, so it is what the server sees), else `stream` (--no-stream).
bool RequestsStream(const WorkloadSpec& w);

// The JSON body for `target` (model field only when the target names one).
std::string RequestBody(const WorkloadSpec& w, const TargetSpec& target, const PlannedRequest& r);

// Path and headers of a request to `target`.
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

// The boundary between the HTTP/OpenAI front end (api/) and whatever generates tokens
// (the engine + scheduler). The server validates and parses requests, then hands a
// GenerationRequest to an ServingApi; the engine tokenizes, schedules, generates and reports
// back through a sink. Nothing in this header knows about sockets or HTTP framing.
//
// Ownership: the server borrows the ServingApi (it must outlive the HttpServer). Each Submit
// passes the request by value and a sink the engine owns until it has delivered the terminal
// event (then it should drop it).
//
// Thread-safety: every ServingApi method may be called concurrently from any thread: the HTTP
// I/O threads call the cheap ones (Models, Ready, Cancel, MetricsText, ...), the server's prep
// threads Submit, ApplyTemplate, Tokenize and Detokenize, whose cost grows with the request
// (template, tokens, grammar). Implementations must be thread-safe and must never block on
// compute: Submit prepares the request on the calling thread, then enqueues and returns. The sink may be invoked on any engine thread; the server re-posts each
// event onto the connection's own executor, so the sink is cheap and never blocks.
//
// Failure: a request the engine refuses up front (queue full, context too long, unknown
// model) is a SubmitResult holding an ApiError; a failure after acceptance is a terminal
// GenerationEvent of kind kError. Exactly one terminal event (kDone or kError) follows every
// accepted Submit, including after Cancel (the server ignores anything after Cancel).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/errors.h"

namespace lifeline::api {

// One chat turn. `content` is the concatenated text (text parts of an array are joined);
// `object` is the message as the client sent it, keys in their order (content string or text
// parts, name, tool_calls, tool_call_id, ...), with role "developer" written as "system":
// what the chat template sees, the way Hugging Face passes messages.
struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant" | "developer" | "tool"
  std::string content;
  nlohmann::ordered_json object = nullptr;  // null: built in-process, role + content only
};

// Sampling knobs, already range-checked by the server (see api/openai.h for the table).
struct SamplingFields {
  double temperature = 1.0;        // [0, 2]; 0 means greedy
  double top_p = 1.0;              // (0, 1]
  int32_t top_k = 0;               // >= 0; 0 disables
  double min_p = 0.0;              // [0, 1]
  std::optional<int64_t> seed;     // unset: engine picks
  double presence_penalty = 0.0;   // [-2, 2]
  double frequency_penalty = 0.0;  // [-2, 2]
  double repeat_penalty = 1.0;     // (0, 10]; 1 disables
};

// One prompt of a completions request: text, or token ids sent by the client (checked
// against the vocabulary by the engine).
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

// What the generated text must be (response_format, or llama.cpp's `grammar` /
// `json_schema` fields): enforced token by token by a grammar over the vocabulary.
struct OutputConstraint {
  enum class Kind : uint8_t { kNone, kJsonObject, kJsonSchema, kGrammar };
  Kind kind = Kind::kNone;
  nlohmann::ordered_json schema;  // kJsonSchema: the schema, key order as sent
  bool strict = false;            // response_format.json_schema.strict
  std::string grammar;            // kGrammar: GBNF text
  std::string param;              // the field it came from, named in errors
};

// The request timeline as far as the server has seen it (steady clock).
struct RequestTimeline {
  using Clock = std::chrono::steady_clock;
  Clock::time_point first_byte;     // first byte of the request arrived
  Clock::time_point headers_read;   // header block parsed
  Clock::time_point body_read;      // body complete
  Clock::time_point validated;      // JSON parsed and validated; Submit follows at once
  // Set when a queued request that could no longer meet its budget was moved to another
  // model (docs/slo.md, "Late requests"): its time before this counts as queue_ms there.
  Clock::time_point rerouted{};
};

// What a request asks of the model. kGenerate: text (completions, chat, infill). kEmbed
// (POST /v1/embeddings): each prompt's pooled hidden state, the model's pooling (mean, last,
// cls; serving/embedding.h), unnormalised -- the server truncates and normalises. kRerank
// (POST /v1/rerank): each prompt is a document, formatted with `rerank_query` the way the
// model was trained to read a pair, and answered with its relevance score(s). Neither
// generates a token: a prompt's choice ends with one token event carrying `embedding`, then
// its kChoiceDone / the kDone ("stop"); usage.completion_tokens is 0.
enum class Task : uint8_t { kGenerate, kEmbed, kRerank };
// Inputs of one kEmbed request at most (OpenAI's limit on `input` entries); a kRerank request's
// documents are fewer (api/embeddings_api.h). The engine's scheduler keeps room for them.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// A validated generation request. Tokenization and the chat template are NOT applied here:
// the engine side owns the vocabulary and the template.
struct GenerationRequest {
  std::string model;                  // resolved id (never empty when submitted)
  Task task = Task::kGenerate;
  std::string rerank_query;           // kRerank: the query every document is scored against
  bool is_chat = false;
  bool is_infill = false;             // POST /infill (prompts[0] is input_prefix)
  std::vector<PromptInput> prompts;   // completions: >= 1 (an array of prompts: one each)
  std::vector<ChatMessage> messages;  // chat only, >= 1 entry
  // Chat only, for the template (as sent, key order kept): tools / documents (null: none),
  // chat_template_kwargs (object; never rebinds messages, tools, documents,
  // add_generation_prompt, bos_token, eos_token).
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  // Chat only: how long the model may think (docs/reasoning.md). reasoning_effort
  // ("minimal" | "low" | "medium" | "high", "" unset) maps to a token budget the class
  // configures; thinking_budget_tokens (llama.cpp's field; -1 unlimited, 0 no thinking) is
  // exact and wins over the effort.
  std::string reasoning_effort;
  std::optional<int32_t> thinking_budget_tokens;
  // Chat only: tool_choice as sent ("auto" | "none" | "required" | {"type":"function",...};
  // null: auto when there are tools) and parallel_tool_calls.
  nlohmann::ordered_json tool_choice;
  bool parallel_tool_calls = true;
  OutputConstraint constraint;
  // Completions: fill-in-the-middle text after the cursor (`suffix`, /infill's input_suffix).
  std::optional<std::string> suffix;
  bool echo = false;                  // completions: the prompt text starts each choice
  int32_t n = 1;                      // choices per prompt, 1..16
  bool logprobs = false;              // per-token log-probabilities in the answer
  int32_t top_logprobs = 0;           // alternatives per token (chat 0..20, completions 0..5)
  // Token id -> added logit, in [-100, 100] (-100 bans, as OpenAI); ids checked by the engine.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<int32_t> max_tokens;  // unset: engine default (bounded by its context)
  SamplingFields sampling;
  std::vector<std::string> stop;      // <= 16 entries, each 1..1024 bytes
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool ignore_eos = false;
  std::string slo_class;              // "" = server default class
  std::string user_role;              // "" = none; scales the class budget
  std::optional<int64_t> deadline_ms; // relative to timeline.first_byte
  // Chat only: at ladder level >= trim_context the engine may drop the oldest turns between
  // the system prompt(s) and the last user turn so the prompt fits its budget (docs/slo.md).
  bool allow_context_trim = false;
  // The client's X-Request-Id when it sent a valid one, else the response id ("cmpl-..." /
  // "chatcmpl-..."); what logs and a remote member's X-Request-Id carry.
  std::string request_id;
  RequestTimeline timeline;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t reasoning_tokens = 0;  // completion tokens spent thinking (all choices)
};

// One generated token's log-probability (log-softmax of the logits the sampler saw, before
// temperature) and the most likely alternatives at that step. `token` holds the token's own
// bytes (maybe half a UTF-8 character).
struct LogprobEntry {
  std::string token;
  float logprob = 0;
};
struct TokenLogprobs {
  std::string token;
  float logprob = 0;
  std::vector<LogprobEntry> top;  // highest first, at most top_logprobs
};

// One event from the engine. Token events carry UTF-8 text deltas (possibly empty while the
// detokenizer holds back half a character); invalid UTF-8 is replaced, never fatal.
struct GenerationEvent {
  // kChoiceDone (only for requests with several choices): choice `index` finished with
  // `finish_reason`; not terminal. The terminal kDone follows once every choice has finished
  // (its finish_reason then applies to choices without a kChoiceDone of their own).
  // kRouted (before any token): the request moved to another model, named in `text` (a
  // queued request that could no longer meet its budget where it was, docs/slo.md); not
  // terminal: the answer now comes from that model and names it.
  enum class Kind : uint8_t { kToken, kDone, kError, kChoiceDone, kRouted };
  Kind kind = Kind::kToken;
  int32_t index = 0;  // kToken / kChoiceDone: the choice
  // kToken: answer text, and a thinking model's reasoning text (chat; it always comes
  // before the choice's first answer text).
  std::string text;
  std::string reasoning;
  int32_t token_id = -1;
  std::vector<TokenLogprobs> logprobs;  // the tokens this text came from (logprobs requested)
  // kToken of a kEmbed / kRerank request: choice `index`'s pooled vector (n_embd floats, not
  // normalised) or its scores (kRerank: the classifier's outputs; the first is the relevance).
  std::vector<float> embedding;
  // kDone
  std::string finish_reason;  // "stop" | "length" | "deadline" | ...
  Usage usage;
  nlohmann::json timings = nlohmann::json::object();  // members ending "_ms" feed Server-Timing
  // kError
  ApiError error;
  // kChoiceDone: the choice's `lifeline` object; kDone: the object of the choices without a
  // kChoiceDone of their own. {"truncated": false}, or {"truncated": true, "reason":
  // "max_tokens_cap" | "deadline", "max_tokens", "requested_max_tokens", "detail"}: what
  // the SLO ladder did to the choice. null: nothing reported (the server assumes "not
  // truncated" unless timings.lifeline says otherwise).
  nlohmann::json lifeline;
  // kDone: when the engine's last timed phase ended (steady clock; unset = unknown). The
  // server charges the hand-off from there to its own handling of the event as handoff_ms,
  // so the timing phases still sum to server_total_ms.
  std::chrono::steady_clock::time_point timed_until{};

  static GenerationEvent Token(std::string text, int32_t token_id) {
    GenerationEvent e;
    e.kind = Kind::kToken;
    e.text = std::move(text);
    e.token_id = token_id;
    return e;
  }
  static GenerationEvent Done(std::string finish_reason, Usage usage,
                              nlohmann::json timings = nlohmann::json::object()) {
    GenerationEvent e;
    e.kind = Kind::kDone;
    e.finish_reason = std::move(finish_reason);
    e.usage = usage;
    e.timings = std::move(timings);
    return e;
  }
  static GenerationEvent Error(ApiError error) {
    GenerationEvent e;
    e.kind = Kind::kError;
    e.error = std::move(error);
    return e;
  }
  static GenerationEvent ChoiceDone(int32_t index, std::string finish_reason,
                                    nlohmann::json lifeline = nullptr) {
    GenerationEvent e;
    e.kind = Kind::kChoiceDone;
    e.index = index;
    e.finish_reason = std::move(finish_reason);
    e.lifeline = std::move(lifeline);
    return e;
  }
  static GenerationEvent Routed(std::string served_model) {
    GenerationEvent e;
    e.kind = Kind::kRouted;
    e.text = std::move(served_model);
    return e;
  }
  bool terminal() const { return kind == Kind::kDone || kind == Kind::kError; }
};

using RequestHandle = uint64_t;
using GenerationSink = std::function<void(GenerationEvent)>;

// What Submit answers: accepted (a handle, and the model that will actually serve it, which
// may be a lighter fallback) or refused with an error (nothing else will be delivered).
struct SubmitResult {
  RequestHandle handle = 0;
  std::string served_model;  // "" = the requested model
  // The SLO class the request was judged under (the server's default when it named none);
  // "" when it was refused before its class was resolved, or by an engine without classes.
  std::string slo_class;
  std::optional<ApiError> error;

  static SubmitResult Accept(RequestHandle h, std::string served_model = {}) {
    SubmitResult r;
    r.handle = h;
    r.served_model = std::move(served_model);
    return r;
  }
  static SubmitResult Reject(ApiError e) {
    SubmitResult r;
    r.error = std::move(e);
    return r;
  }
  bool accepted() const { return !error.has_value(); }
};

struct ModelInfo {
  std::string id;
  std::string owned_by = "lifeline";
  int64_t created_unix_s = 0;
  int64_t context_length_tokens = 0;  // 0 = unknown
  // The chat template in use: source "gguf" | "preset" | "file" ("" for a remote model, whose
  // template lives on the remote server), and its name (preset name, file path, GGUF key).
  std::string chat_template_source = "";
  std::string chat_template_name = "";
  // How the chat template writes tool calls (text/toolcall's format names: "hermes",
  // "llama3_json", ...; "" when unknown or remote): the server parses calls in that syntax.
  std::string tool_call_format = "";
  std::string reasoning_format = "";  // how its chat answers split thinking ("" / "none": no split)
  // Embeddings and reranking (0 / "" for a remote model): the pooled vector's width
  // (n_embd; `dimensions` may ask for at most this), the pooling ("mean" | "cls" | "last" |
  // "rank"), and the number of scores a rerank answers per document (0: not a reranker).
  int64_t embedding_length = 0;
  std::string pooling = "";
  int32_t rerank_outputs = 0;
};

// POST /tokenize (llama.cpp's shape), already validated by the server: `model` resolved,
// `content` a string (bounded by max_body_bytes).
struct TokenizeRequest {
  std::string model;
  std::string content;
  bool add_special = false;   // prepend BOS where the vocab adds one (as a prompt gets it)
  bool parse_special = true;  // control-token text (e.g. "<s>") becomes those ids
};

// POST /detokenize: `tokens` are integers in [0, 2^31) (at most max_detokenize_tokens); the
// engine checks them against its vocabulary.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

class ServingApi {
 public:
  virtual ~ServingApi() = default;
  // Models that requests may name; the first one is the default for requests without `model`.
  virtual std::vector<ModelInfo> Models() const = 0;
  // True when a model is loaded and the engine loop is alive (engine heartbeat fresh).
  virtual bool Ready() const = 0;
  // When not Ready(): why, if the engine knows (e.g. a model whose file changed under it);
  // "" otherwise. GET /ready puts it in its 503.
  virtual std::string NotReadyReason() const { return {}; }
  // Non-blocking. On acceptance the engine later calls `sink` with token events and exactly
  // one terminal event (kDone or kError), never after that one.
  virtual SubmitResult Submit(GenerationRequest request, GenerationSink sink) = 0;
  // Non-blocking, idempotent; unknown or finished handles are ignored. The server calls it at
  // most once per handle (client disconnect, slow reader, shutdown).
  virtual void Cancel(RequestHandle handle) = 0;
  // Prometheus text exposition the server appends to its own /metrics output.
  virtual std::string MetricsText() const = 0;
  // POST /apply-template: the prompt text the model named in `request` would see for this chat
  // request (template applied, nothing tokenized or generated). The default: 404 for
  // engines that render no templates themselves.
  virtual std::variant<std::string, ApiError> ApplyTemplate(const GenerationRequest& request) const {
    return MakeError(ErrorKind::kNotFound, "not_supported",
                     "this engine does not render chat templates");
  }
  // POST /tokenize and /detokenize: the model's tokenizer, on the calling prep thread (nothing
  // is queued). Errors name the field (`tokens[i]` outside the vocabulary: 400). The
  // defaults: 404 for engines without a tokenizer of their own.
  virtual std::variant<std::vector<int32_t>, ApiError> Tokenize(
      const TokenizeRequest& request) const {
    return MakeError(ErrorKind::kNotFound, "not_supported", "this engine does not tokenize");
  }
  virtual std::variant<std::string, ApiError> Detokenize(const DetokenizeRequest& request) const {
    return MakeError(ErrorKind::kNotFound, "not_supported", "this engine does not detokenize");
  }
  // The JSON body of GET /v1/slo (SLO classes, levels, events); none (the default) -> 404.
  virtual std::optional<std::string> SloStatusJson() const { return std::nullopt; }
  // The engine's part of GET /v1/dashboard (api/dashboard.h): {"slo": the /v1/slo object
  // of the same instant, "models": per-model gauges and counters, "outcomes": admission
  // counters, "attainment": per class/model counts within target}. None (the default): the
  // dashboard shows the server's own counters only.
  virtual std::optional<nlohmann::json> DashboardJson() const { return std::nullopt; }
};

}  // namespace lifeline::api

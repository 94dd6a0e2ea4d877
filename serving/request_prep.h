// Request preparation: a validated api::GenerationRequest becomes what the engine loop
// runs -- prompt tokens per prompt, the choices, sampling, stop, logit bias, log-probability
// and tool-call settings -- with every refusal decided here, on the calling (HTTP) thread,
// before anything is queued.
//
//   chat:        the model's chat template renders the messages (template_error on a raise)
//   completions: each prompt's text is encoded (special-token text parsed), or its token ids
//                are checked against the vocabulary; `suffix` (and /infill) builds the
//                fill-in-the-middle prompt  [FIM_PRE] prefix [FIM_SUF] suffix [FIM_MID]
//                from the vocabulary's FIM tokens (400 naming `suffix` without them)
//   limits:      prompt + max_tokens within the context and the KV pool; logit_bias ids
//                inside the vocabulary (400 naming logit_bias.<id>)
//   constraint:  response_format json_object / json_schema, `grammar` (GBNF), or tool_choice
//                "required" / a named function (the template's call format around each
//                function's parameters schema) compiled to a grammar once per request
//                (400 naming the field for a schema or grammar that does not compile)
//
// Ownership: PrepContext borrows the engine's tokenizer and template (they outlive every
// request); PreparedRequest owns plain values. Thread-safety: pure functions of their
// inputs; safe on any thread. Failure: api::ApiError naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "text/grammar/grammar.h"
#include "text/grammar/grammar_vocab.h"
#include "engine/model/model_config.h"
#include "engine/sampler/sampler.h"
#include "text/template/chat.h"
#include "engine/tokenizer/tokenizer.h"
#include "text/toolcall/format.h"
#include "text/toolcall/reasoning.h"
#include "api/serving_api.h"
#include "serving/request_timing.h"
#include "slo/slo_config.h"

namespace lifeline::serving {

// A model's thinking syntax as its vocabulary writes it (BuildReasoningSetup, once per model).
struct ReasoningSetup {
  toolcall::ReasoningFormat format = toolcall::ReasoningFormat::kNone;
  // What ends the thinking when its budget runs out ("\n</think>\n\n" for think tags):
  // forced token by token, so the answer starts.
  std::vector<int32_t> close_ids;
  // Markers that are control tokens (invisible unless rendered): the detokenizer writes them.
  std::vector<int32_t> marker_ids;
  // Tokens that may begin an answer's thinking block: whitespace, or a piece that is a
  // prefix of (or starts with) the opening marker. With a grammar on the answer, these stay
  // allowed until the answer starts (the grammar applies to the answer, not the thinking).
  std::vector<std::pair<int32_t, std::string>> start_pieces;
};

std::shared_ptr<const ReasoningSetup> BuildReasoningSetup(const Tokenizer& tokenizer,
                                                          toolcall::ReasoningFormat format);

// What one model offers request preparation.
struct PrepContext {
  const Tokenizer* tokenizer = nullptr;
  const chat::ChatTemplate* chat_template = nullptr;
  std::string model_name;
  int64_t n_ctx = 0;               // positions per sequence
  int64_t capacity_tokens = 0;     // the whole KV pool, positions
  int32_t default_max_tokens = 256;
  toolcall::ToolCallFormat tool_format = toolcall::ToolCallFormat::kNone;  // of the template
  // The template's thinking syntax (or --reasoning-format's); null: no split.
  std::shared_ptr<const ReasoningSetup> reasoning;
  // The vocabulary as the grammar matcher sees it (built once per model); null: no grammar.
  std::shared_ptr<const grammar::GrammarVocab> grammar_vocab;
  // Embeddings and reranking (docs/embeddings.md): the pooling in force (the file's, or
  // --pooling; kMean when neither says), the classifier's outputs (0: not a reranker) and the
  // file's rerank prompt (tokenizer.chat_template.rerank: "{query}" and "{document}" are
  // replaced; empty: llama.cpp's [BOS] query [EOS] [SEP] document [EOS]).
  PoolingType pooling = PoolingType::kMean;
  int64_t rerank_outputs = 0;
  std::string rerank_template;
};

struct PreparedPrompt {
  std::vector<int32_t> tokens;  // [n_prompt]
  std::string echo_text;        // echo: the text each of this prompt's choices starts with
};

struct PreparedRequest {
  api::Task task = api::Task::kGenerate;
  // kEmbed / kRerank: how each prompt's hidden rows become its answer (kRank for kRerank).
  PoolingType pooling = PoolingType::kMean;
  std::vector<PreparedPrompt> prompts;  // >= 1
  int32_t n = 1;                        // choices per prompt; choice i*n + j is prompt i's j-th
  int64_t max_tokens = 0;               // per choice
  SamplerParams sampler;                // choice k draws with seed + k when a seed was given
  std::vector<std::string> stop;
  std::vector<std::pair<int32_t, float>> logit_bias;  // ids inside the vocabulary
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool ignore_eos = false;
  // Tool calls: the template's call format and the marker tokens the detokenizer must write
  // (they are often control tokens that are otherwise invisible).
  toolcall::ToolCallFormat tool_format = toolcall::ToolCallFormat::kNone;
  std::vector<int32_t> render_ids;
  // The output constraint (response_format, grammar, or a forced tool call), compiled; null
  // when the output is free. Each choice runs its own matcher over it.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::GrammarVocab> grammar_vocab;
  // tool_choice "auto" with a format whose calls start with a marker (Hermes / Qwen
  // "<tool_call>", Mistral "[TOOL_CALLS]"): the output is free until the marker appears, then
  // the call must be well formed -- the grammar of a required call, applied from the marker on
  // (llama.cpp's lazy grammar). Null otherwise.
  std::shared_ptr<const grammar::Grammar> lazy_grammar;
  std::string grammar_trigger;
  // Chat with a thinking model: the output splits into reasoning and answer (null: all
  // answer). starts_in_reasoning: the prompt opened the thinking block (R1's "<think>\n").
  // reasoning_budget_tokens: thinking tokens before the close is forced (-1: unlimited), set
  // by ApplyThinkingPolicy: what was asked (reasoning_requested_tokens, from
  // reasoning_budget_source), lowered by the class ceiling or the SLO rung
  // (reasoning_shortened_by "class_max" / "slo"; "" when not lowered).
  std::shared_ptr<const ReasoningSetup> reasoning;
  bool starts_in_reasoning = false;
  int64_t reasoning_budget_tokens = -1;
  int64_t reasoning_requested_tokens = -1;
  std::string reasoning_budget_source = "none";  // request | effort | enable_thinking | class | none
  std::string reasoning_shortened_by;

  int32_t n_choices() const { return static_cast<int32_t>(prompts.size()) * n; }
  int64_t prompt_tokens_total() const;
};

// The vocabulary as a grammar sees it: each token's output bytes (control tokens none, except
// the tool-call markers of `format`, which forced calls must be able to write), the
// end-of-generation ids. Once per model; null with *status set on failure.
std::shared_ptr<const grammar::GrammarVocab> BuildGrammarVocab(const Tokenizer& tokenizer,
                                                               toolcall::ToolCallFormat format,
                                                               Status* status);

// Text of token ids as SentencePiece decodes them, so that it equals the text the ids were
// encoded from: control tokens (BOS, EOS) give nothing, and an SPM vocabulary's dummy-prefix
// space before the first word is dropped. (POST /detokenize, echo of token-id prompts.)
std::string DecodeAsSentencePiece(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// The chat prompt of `req` through the model's template; `drop[i] != 0` leaves message i out
// (context trimming). A template's raise is a 400 template_error naming its message (500 when
// the template hit its own evaluation budget).
std::optional<api::ApiError> RenderChat(const PrepContext& ctx,
                                           const api::GenerationRequest& req,
                                           const std::vector<uint8_t>* drop, std::string* text);

// Tokens of a rendered chat prompt, or of a completion prompt's text (BOS per the vocab).
std::vector<int32_t> EncodePromptText(const PrepContext& ctx, bool is_chat,
                                      const std::string& text);

// Everything but the prompt limits (CheckPromptLimits, after any trimming) and the SLO
// decisions (admission, trimming, caps), which the engine applies to the result. `timing` (may be null) is charged template_ms after rendering and tokenize_ms
// after encoding.
std::optional<api::ApiError> PrepareRequest(const PrepContext& ctx,
                                               const api::GenerationRequest& req,
                                               PreparedRequest* out, RequestTiming* timing);

// The thinking budget of a prepared chat request with a reasoning setup (else nothing):
// thinking_budget_tokens, else reasoning_effort's entry of the policy, else 0 when
// chat_template_kwargs.enable_thinking is false, else the policy's default; at most the
// policy's ceiling; then times the policy's scale (the SLO ladder's thinking rung), an
// unlimited budget being taken as max_tokens. Call after CheckPromptLimits.
void ApplyThinkingPolicy(const slo::ThinkingPolicy& policy, const api::GenerationRequest& req,
                         PreparedRequest* out);

// Checks prompt + max_tokens against the context and the KV pool, and fills out->max_tokens
// (the request's, or the default bounded by the context).
std::optional<api::ApiError> CheckPromptLimits(const PrepContext& ctx,
                                                  const api::GenerationRequest& req,
                                                  PreparedRequest* out);

}  // namespace lifeline::serving

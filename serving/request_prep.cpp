#include "serving/request_prep.h"

#include <algorithm>

#include "text/grammar/json_schema.h"
#include "engine/sampler/stop.h"
#include "text/toolcall/grammar.h"
#include "text/toolcall/tools.h"
#include "serving/chat_setup.h"

namespace lifeline::serving {

using api::ApiError;

namespace {

ApiError BadRequest(std::string message, std::string param, std::string code = "") {
  return api::InvalidRequestError(std::move(param), std::move(message), std::move(code));
}

std::string PromptParam(const api::GenerationRequest& req, size_t i) {
  if (req.task == api::Task::kEmbed) return "input[" + std::to_string(i) + "]";
  if (req.task == api::Task::kRerank) return "documents[" + std::to_string(i) + "]";
  if (req.is_chat) return "messages";
  if (req.is_infill) return "input_prefix";
  return req.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt";
}

// A token-id input checked against the vocabulary.
std::optional<ApiError> CheckTokenIds(const Tokenizer& tok, const api::GenerationRequest& req,
                                      size_t i, const std::vector<int32_t>& tokens) {
  for (size_t k = 0; k < tokens.size(); ++k) {
    if (tokens[k] >= tok.n_vocab()) {
      const std::string param = PromptParam(req, i) + "[" + std::to_string(k) + "]";
      return BadRequest("'" + param + "' is token id " + std::to_string(tokens[k]) +
                            "; the vocabulary has " + std::to_string(tok.n_vocab()) + " tokens",
                        param, "out_of_range");
    }
  }
  return std::nullopt;
}

// [FIM_PRE] prefix [FIM_SUF] suffix [FIM_MID] (the prefix-suffix-middle order that
// CodeLlama, StarCoder, DeepSeek-Coder and Qwen-Coder were trained with), BOS first where the
// vocabulary adds one, as llama.cpp's infill builds it.
std::optional<ApiError> BuildInfill(const PrepContext& ctx, const std::string& prefix,
                                    const std::string& suffix, bool is_infill,
                                    std::vector<int32_t>* out) {
  const Tokenizer& tok = *ctx.tokenizer;
  const int32_t pre = tok.fim_pre_id(), suf = tok.fim_suf_id(), mid = tok.fim_mid_id();
  if (pre < 0 || suf < 0 || mid < 0) {
    return BadRequest("model '" + ctx.model_name +
                          "' has no fill-in-the-middle tokens (tokenizer.ggml.fim_pre/suf/mid "
                          "or <|fim_prefix|>-style tokens), so it cannot complete with a suffix",
                      is_infill ? "input_suffix" : "suffix", "unsupported_value");
  }
  out->clear();
  if (tok.add_bos() && tok.bos_id() >= 0) out->push_back(tok.bos_id());
  out->push_back(pre);
  for (int32_t id : tok.Encode(prefix, false, false)) out->push_back(id);
  out->push_back(suf);
  for (int32_t id : tok.Encode(suffix, false, false)) out->push_back(id);
  out->push_back(mid);
  return std::nullopt;
}

// Marker tokens of a tool-call format that exist in the vocabulary as single tokens.
std::vector<int32_t> MarkerIds(const Tokenizer& tok, toolcall::ToolCallFormat format) {
  std::vector<int32_t> ids;
  for (std::string_view marker : toolcall::ToolCallMarkers(format)) {
    if (int32_t id = tok.FindToken(marker); id >= 0) ids.push_back(id);
  }
  return ids;
}

}  // namespace

std::shared_ptr<const grammar::GrammarVocab> BuildGrammarVocab(const Tokenizer& tok,
                                                               toolcall::ToolCallFormat format,
                                                               Status* status) {
  const std::vector<int32_t> markers = MarkerIds(tok, format);
  std::vector<std::string> bytes(static_cast<size_t>(tok.n_vocab()));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const bool marker = std::find(markers.begin(), markers.end(), id) != markers.end();
    // Control tokens have no text (never allowed), except the format's call markers.
    bytes[static_cast<size_t>(id)] = tok.TokenToPiece(id, marker);
    if (tok.IsEndOfGeneration(id)) eog.push_back(id);
  }
  auto vocab = grammar::GrammarVocab::Build(std::move(bytes), std::move(eog));
  if (!vocab.ok()) {
    *status = vocab.status();
    return nullptr;
  }
  return std::move(vocab).value();
}

std::shared_ptr<const ReasoningSetup> BuildReasoningSetup(const Tokenizer& tok,
                                                          toolcall::ReasoningFormat format) {
  if (format == toolcall::ReasoningFormat::kNone) return nullptr;
  auto setup = std::make_shared<ReasoningSetup>();
  setup->format = format;
  const toolcall::ReasoningMarkers m = toolcall::MarkersOf(format);
  for (std::string_view marker : {m.open, m.close}) {
    const int32_t id = tok.FindToken(marker);
    if (id >= 0 && tok.TokenToPiece(id, /*render_special=*/false).empty()) {
      setup->marker_ids.push_back(id);
    }
  }
  // The close as the template writes it after thinking: a line break before, a blank line
  // after (R1, Qwen3, SmolLM3); Granite's marker starts its own line too.
  const std::string close_text = format == toolcall::ReasoningFormat::kBracketThink
                                     ? std::string(m.close)
                                     : "\n" + std::string(m.close) + "\n\n";
  setup->close_ids = tok.Encode(close_text, /*add_bos=*/false, /*parse_special=*/true);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.IsEndOfGeneration(id)) continue;
    const std::string piece = tok.TokenToPiece(id, /*render_special=*/true);
    if (piece.empty()) continue;
    const bool blank = piece.find_first_not_of(" \t\r\n") == std::string::npos;
    const std::string_view rest = std::string_view(piece).substr(
        std::min(piece.size(), piece.find_first_not_of(" \t\r\n")));
    // Blank, inside the marker, or the marker's end followed by the thinking.
    bool candidate = blank || m.open.find(rest) != std::string_view::npos;
    for (size_t k = 0; !candidate && k < m.open.size(); ++k) {
      candidate = rest.starts_with(m.open.substr(k));
    }
    if (candidate) setup->start_pieces.emplace_back(id, piece);
  }
  return setup;
}

namespace {

// The trigger text of a format whose calls begin with a marker, or "" (JSON-at-start formats:
// a JSON answer may be content, so nothing says a call has begun).
std::string_view CallTrigger(toolcall::ToolCallFormat format) {
  switch (format) {
    case toolcall::ToolCallFormat::kHermes:
      return "<tool_call>";
    case toolcall::ToolCallFormat::kMistralNemo:
    case toolcall::ToolCallFormat::kMistralArgs:
      return "[TOOL_CALLS]";
    default:
      return "";
  }
}

// The schema converter for tool parameters: a schema with listed properties is followed
// strictly (no keys the function does not declare); a free-form object keeps its extra keys.
// Keywords the grammar does not enforce (minimum, pattern, ...) are common in real tool
// definitions and only narrow values: they are skipped, not refused.
Result<std::string> ParametersToGbnf(const nlohmann::ordered_json& schema, const std::string& prefix) {
  grammar::JsonSchemaOptions o;
  o.rule_prefix = prefix;
  o.strict = schema.is_object() && schema.contains("properties");
  o.ignore_unknown_keywords = true;
  return grammar::JsonSchemaToGbnf(schema, o);
}

// The grammar text of the request's constraint ("" when the output is free), and the field
// to name when it does not compile.
std::optional<ApiError> ConstraintGbnf(const PrepContext& ctx, const api::GenerationRequest& req,
                                       std::string* gbnf, std::string* param) {
  using Kind = api::OutputConstraint::Kind;
  *param = req.constraint.param;
  switch (req.constraint.kind) {
    case Kind::kJsonObject:
      *gbnf = grammar::JsonObjectGbnf();
      return std::nullopt;
    case Kind::kGrammar:
      *gbnf = req.constraint.grammar;
      return std::nullopt;
    case Kind::kJsonSchema: {
      grammar::JsonSchemaOptions o;
      o.strict = req.constraint.strict;
      // strict: true promises the schema exactly, so a keyword it cannot enforce is a 400;
      // without strict the answer follows the schema as far as the grammar can.
      o.ignore_unknown_keywords = !req.constraint.strict;
      auto text = grammar::JsonSchemaToGbnf(req.constraint.schema, o);
      if (!text.ok()) return BadRequest(*param + ": " + text.status().message(), *param);
      *gbnf = std::move(text).value();
      return std::nullopt;
    }
    case Kind::kNone:
      break;
  }
  if (!req.is_chat || !req.tools.is_array() || req.tools.empty()) return std::nullopt;
  auto tools = toolcall::ParseTools(req.tools);
  if (!tools.ok()) return BadRequest(tools.status().message(), "tools");
  auto choice = toolcall::ParseToolChoice(req.tool_choice, *tools);
  if (!choice.ok()) return BadRequest(choice.status().message(), "tool_choice");
  *param = "tool_choice";
  // A named function is one call to it (as OpenAI answers tool_choice {"function": ...}).
  const bool parallel =
      req.parallel_tool_calls && choice->mode != toolcall::ToolChoice::Mode::kFunction;
  auto text = toolcall::ToolCallGbnf(ctx.tool_format, *tools, *choice, parallel, ParametersToGbnf);
  if (!text.ok()) return BadRequest(text.status().message(), "tools");
  *gbnf = std::move(text).value();
  return std::nullopt;
}

bool ToolsInPlay(const api::GenerationRequest& req);

// tool_choice "auto": a required call's grammar, applied once the format's marker appears.
std::optional<ApiError> LazyCallGrammar(const PrepContext& ctx, const api::GenerationRequest& req,
                                        PreparedRequest* out) {
  const std::string_view trigger = CallTrigger(ctx.tool_format);
  if (out->grammar != nullptr || !ToolsInPlay(req) || trigger.empty() ||
      ctx.grammar_vocab == nullptr) {
    return std::nullopt;
  }
  auto tools = toolcall::ParseTools(req.tools);
  if (!tools.ok()) return BadRequest(tools.status().message(), "tools");
  auto choice = toolcall::ParseToolChoice(req.tool_choice, *tools);
  if (!choice.ok() || choice->mode != toolcall::ToolChoice::Mode::kAuto) return std::nullopt;
  // Best effort: under "auto" nothing was promised, so tools whose schemas do not compile
  // leave the output free rather than failing the request.
  auto text = toolcall::ToolCallGbnf(ctx.tool_format, *tools,
                                     toolcall::ToolChoice{toolcall::ToolChoice::Mode::kRequired, ""},
                                     req.parallel_tool_calls, ParametersToGbnf);
  if (!text.ok()) return std::nullopt;
  auto compiled = grammar::ParseGbnf(*text);
  if (!compiled.ok()) return std::nullopt;
  out->lazy_grammar = std::move(compiled).value();
  out->grammar_trigger = std::string(trigger);
  out->grammar_vocab = ctx.grammar_vocab;
  return std::nullopt;
}

bool ToolsInPlay(const api::GenerationRequest& req) {
  if (!req.is_chat || !req.tools.is_array() || req.tools.empty()) return false;
  return !(req.tool_choice.is_string() && req.tool_choice == "none");
}

}  // namespace

std::string DecodeAsSentencePiece(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string text = tok.Decode(ids);
  // SentencePiece marks word starts with U+2581 and, for a vocab with add_space_prefix,
  // added one before the input; its decoder drops that one again from the first piece that
  // produces text. Only a U+2581 does (a <0x20> byte token is a real space).
  constexpr std::string_view kSpm = "\xE2\x96\x81";
  if (tok.model_name() == "llama" && tok.add_space_prefix() && !text.empty() &&
      text.front() == ' ') {
    for (int32_t id : ids) {
      if (tok.TokenToPiece(id).empty()) continue;
      if (tok.TokenText(id).starts_with(kSpm)) text.erase(0, 1);
      break;
    }
  }
  return text;
}

int64_t PreparedRequest::prompt_tokens_total() const {
  int64_t n_tokens = 0;
  for (const PreparedPrompt& p : prompts) n_tokens += static_cast<int64_t>(p.tokens.size());
  return n_tokens;
}

std::optional<ApiError> RenderChat(const PrepContext& ctx, const api::GenerationRequest& req,
                                   const std::vector<uint8_t>* drop, std::string* text) {
  chat::ChatInput in;
  for (size_t i = 0; i < req.messages.size(); ++i) {
    if (drop != nullptr && (*drop)[i] != 0) continue;
    const api::ChatMessage& m = req.messages[i];
    if (m.object.is_object()) {
      in.messages.push_back(m.object);
    } else {  // built in-process (tests, tools) without the client's JSON: role + content
      in.messages.push_back({{"role", m.role == "developer" ? "system" : m.role},
                             {"content", m.content}});
    }
  }
  in.tools = req.tools;
  in.documents = req.documents;
  in.add_generation_prompt = req.add_generation_prompt;
  in.kwargs = req.chat_template_kwargs.is_object() ? req.chat_template_kwargs
                                                   : nlohmann::ordered_json::object();
  auto rendered = ctx.chat_template->Render(in);
  if (rendered.ok()) {
    *text = std::move(rendered).value();
    return std::nullopt;
  }
  const std::string& m = rendered.status().message();
  if (rendered.status().code() == StatusCode::kResourceExhausted) {
    return api::MakeError(api::ErrorKind::kInternal, "template_error",
                             "model '" + ctx.model_name +
                                 "': the chat template exceeded its evaluation budget: " + m);
  }
  // The template refused this conversation (its raise_exception) or cannot evaluate it (e.g.
  // content parts where it concatenates strings): the request's to change.
  return BadRequest("model '" + ctx.model_name + "' chat template: " + m, "messages",
                    "template_error");
}

std::vector<int32_t> EncodePromptText(const PrepContext& ctx, bool is_chat,
                                      const std::string& text) {
  // Special-token text is parsed: templates and completion prompts use it (as llama.cpp's
  // server does). Byte cap already enforced by the HTTP body limit.
  if (is_chat) return EncodeChatPrompt(*ctx.tokenizer, *ctx.chat_template, text);
  return ctx.tokenizer->Encode(text, ctx.tokenizer->add_bos(), /*parse_special=*/true);
}

std::optional<ApiError> CheckPromptLimits(const PrepContext& ctx,
                                          const api::GenerationRequest& req,
                                          PreparedRequest* out) {
  if (req.task != api::Task::kGenerate) {
    // No token is generated, but the scheduler runs a prompt as a request of at least one
    // step past it: the input must leave that position free.
    for (size_t i = 0; i < out->prompts.size(); ++i) {
      const int64_t n_prompt = static_cast<int64_t>(out->prompts[i].tokens.size());
      const std::string param = PromptParam(req, i);
      if (n_prompt == 0) return BadRequest("the input encodes to no tokens", param);
      if (n_prompt >= ctx.n_ctx || n_prompt >= ctx.capacity_tokens) {
        return BadRequest("'" + param + "' is " + std::to_string(n_prompt) +
                              " tokens; the model takes at most " +
                              std::to_string(std::min(ctx.n_ctx, ctx.capacity_tokens) - 1) +
                              " per input (its context or KV cache)",
                          param, "context_length_exceeded");
      }
    }
    out->max_tokens = 1;
    return std::nullopt;
  }
  int64_t longest = 0;
  for (size_t i = 0; i < out->prompts.size(); ++i) {
    const int64_t n_prompt = static_cast<int64_t>(out->prompts[i].tokens.size());
    const std::string param = PromptParam(req, i);
    if (n_prompt == 0) return BadRequest("the prompt encodes to no tokens", param);
    if (n_prompt >= ctx.n_ctx) {
      return BadRequest("the prompt is " + std::to_string(n_prompt) +
                            " tokens; the model's context holds " + std::to_string(ctx.n_ctx) +
                            " (at least one generated token must fit)",
                        param, "context_length_exceeded");
    }
    longest = std::max(longest, n_prompt);
  }
  if (req.max_tokens) {
    if (*req.max_tokens < 1) return BadRequest("max_tokens: must be >= 1", "max_tokens");
    if (longest + *req.max_tokens > ctx.n_ctx) {
      return BadRequest("prompt (" + std::to_string(longest) + " tokens) + max_tokens (" +
                            std::to_string(*req.max_tokens) + ") = " +
                            std::to_string(longest + *req.max_tokens) +
                            " exceeds the context of " + std::to_string(ctx.n_ctx) + " tokens",
                        "max_tokens", "context_length_exceeded");
    }
    out->max_tokens = *req.max_tokens;
  } else {
    out->max_tokens = std::min<int64_t>(ctx.default_max_tokens, ctx.n_ctx - longest);
  }
  if (longest + out->max_tokens > ctx.capacity_tokens) {
    return BadRequest("prompt + max_tokens = " + std::to_string(longest + out->max_tokens) +
                          " exceeds the KV cache of " + std::to_string(ctx.capacity_tokens) +
                          " tokens (--kv-memory)",
                      "max_tokens", "context_length_exceeded");
  }
  return std::nullopt;
}

namespace {

// One query / document pair as the reranker reads it: the file's rerank template with the
// two texts in place (special-token text parsed, as a prompt), else llama.cpp's
// [BOS] query [EOS] [SEP] document [EOS] (each marker only where the vocabulary has it and,
// for BOS / EOS, adds it).
std::vector<int32_t> RerankPair(const PrepContext& ctx, const std::string& query,
                                const std::string& document) {
  const Tokenizer& tok = *ctx.tokenizer;
  if (!ctx.rerank_template.empty()) {
    std::string text;
    const std::string& t = ctx.rerank_template;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 7, "{query}") == 0) {
        text += query;
        i += 7;
      } else if (t.compare(i, 10, "{document}") == 0) {
        text += document;
        i += 10;
      } else {
        text += t[i++];
      }
    }
    return tok.Encode(text, tok.add_bos(), /*parse_special=*/true);
  }
  std::vector<int32_t> out;
  if (tok.add_bos() && tok.bos_id() >= 0) out.push_back(tok.bos_id());
  const std::vector<int32_t> q = tok.Encode(query, false, /*parse_special=*/false);
  out.insert(out.end(), q.begin(), q.end());
  const int32_t eos = tok.eos_id() >= 0 ? tok.eos_id() : tok.sep_id();
  if (eos >= 0) out.push_back(eos);
  if (tok.sep_id() >= 0 && tok.sep_id() != eos) out.push_back(tok.sep_id());
  const std::vector<int32_t> d = tok.Encode(document, false, /*parse_special=*/false);
  out.insert(out.end(), d.begin(), d.end());
  if (eos >= 0) out.push_back(eos);
  return out;
}

// POST /v1/embeddings and /v1/rerank: each input (document) is one prompt of one choice,
// encoded as the model reads it; nothing of the sampler applies.
std::optional<ApiError> PrepareEmbedRequest(const PrepContext& ctx,
                                            const api::GenerationRequest& req,
                                            PreparedRequest* out, RequestTiming* timing) {
  const Tokenizer& tok = *ctx.tokenizer;
  out->task = req.task;
  out->n = 1;
  if (req.prompts.empty()) return BadRequest("missing input", PromptParam(req, 0));
  if (req.task == api::Task::kRerank) {
    if (ctx.rerank_outputs == 0) {
      return BadRequest("model '" + ctx.model_name + "' is not a reranker (its file has no "
                        "classifier head: cls.output.weight)", "model", "model_not_reranker");
    }
    out->pooling = PoolingType::kRank;
  } else {
    // A reranker's hidden state is still an embedding: pooled by its last token.
    out->pooling = ctx.pooling == PoolingType::kRank ? PoolingType::kLast : ctx.pooling;
  }
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    const api::PromptInput& in = req.prompts[i];
    PreparedPrompt p;
    if (req.task == api::Task::kRerank) {
      p.tokens = RerankPair(ctx, req.rerank_query, in.text);
    } else if (in.is_tokens) {
      if (auto err = CheckTokenIds(tok, req, i, in.tokens)) return err;
      p.tokens = in.tokens;
    } else {
      // As llama.cpp embeds: BOS and EOS where the vocabulary adds them (Qwen3-Embedding
      // pools the state at its closing <|endoftext|>).
      p.tokens = tok.Encode(in.text, tok.add_bos(), /*parse_special=*/true);
      if (tok.add_eos() && tok.eos_id() >= 0) p.tokens.push_back(tok.eos_id());
    }
    out->prompts.push_back(std::move(p));
  }
  if (timing != nullptr) timing->Charge(&timing->tokenize_ms, Clock::now());
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> PrepareRequest(const PrepContext& ctx,
                                       const api::GenerationRequest& req,
                                       PreparedRequest* out, RequestTiming* timing) {
  const Tokenizer& tok = *ctx.tokenizer;
  out->prompts.clear();
  if (req.task != api::Task::kGenerate) return PrepareEmbedRequest(ctx, req, out, timing);
  if (req.is_chat) {
    std::string text;
    if (auto err = RenderChat(ctx, req, nullptr, &text)) return err;
    if (timing != nullptr) timing->Charge(&timing->template_ms, Clock::now());
    if (ctx.reasoning != nullptr) {
      out->reasoning = ctx.reasoning;
      out->starts_in_reasoning = toolcall::StartsInReasoning(ctx.reasoning->format, text);
    }
    out->prompts.push_back({EncodePromptText(ctx, true, text), ""});
  } else {
    if (req.prompts.empty()) return BadRequest("missing prompt", PromptParam(req, 0));
    for (size_t i = 0; i < req.prompts.size(); ++i) {
      const api::PromptInput& in = req.prompts[i];
      PreparedPrompt p;
      if (in.is_tokens) {
        if (auto err = CheckTokenIds(tok, req, i, in.tokens)) return err;
        p.tokens = in.tokens;
        if (req.echo) p.echo_text = DecodeAsSentencePiece(tok, in.tokens);
      } else if (req.suffix) {
        if (auto err = BuildInfill(ctx, in.text, *req.suffix, req.is_infill, &p.tokens)) {
          return err;
        }
        if (req.echo) p.echo_text = in.text;
      } else {
        p.tokens = EncodePromptText(ctx, false, in.text);
        if (req.echo) p.echo_text = in.text;
      }
      out->prompts.push_back(std::move(p));
    }
  }
  if (timing != nullptr) timing->Charge(&timing->tokenize_ms, Clock::now());

  for (const auto& [id, bias] : req.logit_bias) {
    if (id >= tok.n_vocab()) {
      const std::string param = "logit_bias." + std::to_string(id);
      return BadRequest("'" + param + "': token id " + std::to_string(id) +
                            " is outside the vocabulary of " + std::to_string(tok.n_vocab()) +
                            " tokens",
                        param, "out_of_range");
    }
  }
  out->logit_bias = req.logit_bias;

  SamplerParams& sp = out->sampler;
  sp.temperature = static_cast<float>(req.sampling.temperature);
  sp.top_p = static_cast<float>(req.sampling.top_p);
  sp.top_k = req.sampling.top_k;
  sp.min_p = static_cast<float>(req.sampling.min_p);
  sp.presence_penalty = static_cast<float>(req.sampling.presence_penalty);
  sp.frequency_penalty = static_cast<float>(req.sampling.frequency_penalty);
  sp.repeat_penalty = static_cast<float>(req.sampling.repeat_penalty);
  if (req.sampling.seed) sp.seed = static_cast<uint64_t>(*req.sampling.seed);
  if (Status s = ValidateSamplerParams(sp); !s.ok()) return BadRequest(s.message(), "sampling");
  if (Status s = ValidateStopSequences(req.stop); !s.ok()) return BadRequest(s.message(), "stop");
  out->stop = req.stop;
  out->n = req.n;
  out->logprobs = req.logprobs;
  out->top_logprobs = req.top_logprobs;
  out->ignore_eos = req.ignore_eos;
  if (ToolsInPlay(req)) {
    out->tool_format = ctx.tool_format;
    out->render_ids = MarkerIds(tok, ctx.tool_format);
  }
  if (out->reasoning != nullptr) {
    for (int32_t id : out->reasoning->marker_ids) out->render_ids.push_back(id);
  }
  std::string gbnf, param;
  if (auto err = ConstraintGbnf(ctx, req, &gbnf, &param)) return err;
  if (!gbnf.empty()) {
    if (ctx.grammar_vocab == nullptr) {
      return BadRequest("model '" + ctx.model_name + "' cannot constrain its output", param,
                        "unsupported_value");
    }
    auto compiled = grammar::ParseGbnf(gbnf);
    if (!compiled.ok()) {
      return BadRequest(param + ": " + compiled.status().message(), param);
    }
    out->grammar = std::move(compiled).value();
    out->grammar_vocab = ctx.grammar_vocab;
  }
  if (auto err = LazyCallGrammar(ctx, req, out)) return err;
  return std::nullopt;
}

void ApplyThinkingPolicy(const slo::ThinkingPolicy& policy, const api::GenerationRequest& req,
                         PreparedRequest* out) {
  if (out->reasoning == nullptr) return;
  int64_t asked = policy.default_budget_tokens;
  std::string source = asked >= 0 ? "class" : "none";
  static constexpr std::string_view kEfforts[] = {"minimal", "low", "medium", "high"};
  const auto& kw = req.chat_template_kwargs;
  if (req.thinking_budget_tokens) {
    asked = std::max<int64_t>(-1, *req.thinking_budget_tokens);
    source = "request";
  } else if (!req.reasoning_effort.empty()) {
    for (size_t i = 0; i < 4; ++i) {
      if (req.reasoning_effort == kEfforts[i]) asked = policy.effort_budget_tokens[i];
    }
    source = "effort";
  } else if (kw.is_object() && kw.contains("enable_thinking") &&
             kw["enable_thinking"].is_boolean() && !kw["enable_thinking"].get<bool>()) {
    // A template without the switch then still cannot think.
    asked = 0;
    source = "enable_thinking";
  }
  out->reasoning_requested_tokens = asked;
  out->reasoning_budget_source = source;
  out->reasoning_shortened_by.clear();
  int64_t budget = asked;
  if (policy.max_budget_tokens >= 0 && (budget < 0 || budget > policy.max_budget_tokens)) {
    budget = policy.max_budget_tokens;
    out->reasoning_shortened_by = "class_max";
  }
  if (policy.scale < 1.0 && budget != 0) {
    const int64_t base = budget >= 0 ? budget : out->max_tokens;
    const auto scaled = static_cast<int64_t>(static_cast<double>(base) * std::max(0.0, policy.scale));
    if (budget < 0 || scaled < budget) {
      budget = scaled;
      out->reasoning_shortened_by = "slo";
    }
  }
  out->reasoning_budget_tokens = budget;
}

}  // namespace lifeline::serving

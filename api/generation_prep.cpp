#include "api/generation_prep.h"

#include <chrono>
#include <ctime>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "text/toolcall/format.h"
#include "api/api_translation.h"
#include "api/embeddings_api.h"

namespace lifeline::api {

namespace {

bool IsPoolingShape(ApiShape shape) {
  return shape == ApiShape::kEmbeddings || shape == ApiShape::kRerank;
}

// What the resolved model cannot give an embeddings / rerank request (a `dimensions` above
// its width, a rerank to a model without a classification head), refused before Submit.
std::optional<ApiError> CheckPoolingModel(const std::vector<ModelInfo>& models,
                                          const std::string& model,
                                          const PoolingTranslation& translation) {
  for (const ModelInfo& m : models) {
    if (m.id == model) return translation.CheckModel(m);
  }
  return std::nullopt;  // gone since ResolveModel: Submit answers for it
}

}  // namespace

PrepOutcome PrepareGeneration(ServingApi& engine, const RequestLimits& limits,
                              GenerationInput in) {
  PrepOutcome out;
  bool accepted = false;
  try {
    GenerationRequest request;
    std::unique_ptr<PoolingTranslation> pooling;
    if (IsPoolingShape(in.shape)) {
      // Not a chat or completions body: its own parser, onto a completions-style request.
      auto parsed = ParsePoolingRequest(in.shape, in.body, limits);
      if (auto* err = std::get_if<ApiError>(&parsed)) {
        out.error = std::move(*err);
        return out;
      }
      request = std::move(std::get<PoolingRequest>(parsed).request);
      pooling = std::move(std::get<PoolingRequest>(parsed).translation);
    } else if (in.shape != ApiShape::kChat) {
      const nlohmann::json body = nlohmann::json::parse(in.body, nullptr, false);
      if (body.is_discarded()) {
        out.error = InvalidRequestError("body", "the body is not valid JSON", "invalid_json");
        return out;
      }
      auto chat = TranslateToChat(in.shape, body);
      if (auto* err = std::get_if<ApiError>(&chat)) {
        out.error = std::move(*err);
        return out;
      }
      in.body = std::get<nlohmann::json>(chat).dump();
      in.endpoint = Endpoint::kChatCompletions;
    }
    if (!pooling) {
      if (auto err = ParseGenerationRequest(in.body, in.endpoint, limits, &request)) {
        out.error = std::move(err);
        return out;
      }
    }
    in.body = std::string();  // the parsed request holds what it needs
    if (in.slo_class_header) request.slo_class = *in.slo_class_header;
    if (in.user_role_header) request.user_role = *in.user_role_header;
    const std::vector<ModelInfo> models = engine.Models();
    if (auto err = ResolveModel(models, request.model, &request.model)) {
      out.error = std::move(err);
      return out;
    }
    if (pooling) {
      if (auto err = CheckPoolingModel(models, request.model, *pooling)) {
        out.error = std::move(err);
        return out;
      }
    }
    out.requested_model = request.model;
    out.slo_class = request.slo_class;
    out.user_role = request.user_role;
    out.validated = std::chrono::steady_clock::now();
    request.timeline = in.timeline;
    request.timeline.validated = out.validated;
    request.request_id = in.request_id;
    out.stream = request.stream;
    out.include_usage = request.include_usage;
    AssemblerOptions& ao = out.assembler;
    ao.reasoning_field = in.reasoning_field;
    ao.ctx.id = in.response_id;
    ao.ctx.model = request.model;
    ao.ctx.created_unix_s = static_cast<int64_t>(std::time(nullptr));
    ao.ctx.is_chat = request.is_chat;
    // An embeddings / rerank request: one choice per input or document (n is 1).
    ao.n_choices = pooling ? static_cast<int32_t>(request.prompts.size())
                           : request.n * (request.is_chat ? 1 : static_cast<int32_t>(
                                                                    request.prompts.size()));
    ao.logprobs = request.logprobs;
    ao.infill = in.endpoint == Endpoint::kInfill;
    const bool tools_in_play = request.is_chat && request.tools.is_array() &&
                               !request.tools.empty() &&
                               !(request.tool_choice.is_string() && request.tool_choice == "none");
    out.submitted = engine.Submit(std::move(request), std::move(in.sink));
    if (!out.submitted.slo_class.empty()) out.slo_class = out.submitted.slo_class;
    if (!out.submitted.accepted()) {
      out.error = *out.submitted.error;
      return out;
    }
    accepted = true;
    out.translation = std::move(pooling);
    if (!out.submitted.served_model.empty()) ao.ctx.model = out.submitted.served_model;
    if (tools_in_play) {
      // The serving model's template says how its calls look.
      for (const ModelInfo& m : engine.Models()) {
        if (m.id == ao.ctx.model) {
          ao.tool_format = toolcall::ToolCallFormatFromName(m.tool_call_format)
                               .value_or(toolcall::ToolCallFormat::kNone);
        }
      }
      ao.tool_call_id_seed = std::hash<std::string>{}(in.response_id) ^ in.serial;
    }
  } catch (const std::exception& e) {
    // Our own code does not throw on purpose; a dependency's exception (e.g. bad_alloc)
    // becomes a 500 for this request only. An accepted request stays accepted: the engine
    // owes it a terminal event, which answers it.
    if (!accepted) out.error = InternalError(std::string("internal error: ") + e.what());
  }
  return out;
}

HttpResponse ApplyTemplateResponse(const ServingApi& engine,
                                   std::optional<std::string_view> content_type,
                                   std::string_view body, const RequestLimits& limits) {
  if (auto err = CheckContentType(content_type)) return ErrorResponse(*err);
  GenerationRequest request;
  if (auto err = ParseGenerationRequest(body, Endpoint::kChatCompletions, limits, &request)) {
    return ErrorResponse(*err);
  }
  if (auto err = ResolveModel(engine.Models(), request.model, &request.model)) {
    return ErrorResponse(*err);
  }
  auto prompt = engine.ApplyTemplate(request);
  if (auto* err = std::get_if<ApiError>(&prompt)) return ErrorResponse(*err);
  return JsonResponse(200, {{"prompt", std::get<std::string>(prompt)}});
}

}  // namespace lifeline::api

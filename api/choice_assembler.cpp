#include "api/choice_assembler.h"

#include <utility>

#include "text/toolcall/parser.h"

namespace lifeline::api {

using json = nlohmann::json;

struct ChoiceAssembler::Choice {
  int32_t index = 0;
  std::string text;                       // content so far (non-streamed answers)
  std::string reasoning;                  // thinking so far (non-streamed answers)
  std::vector<toolcall::ToolCall> calls;  // non-streamed answers
  std::unique_ptr<toolcall::ToolCallStreamParser> parser;  // tools in play
  std::vector<TokenLogprobs> logprobs;    // non-streamed answers
  std::vector<size_t> offsets;            // text_offset of each entry (completions)
  // An embeddings / rerank request's vector or scores (the last token event that carried one).
  std::vector<float> embedding;
  size_t text_bytes = 0;                  // model text so far (for text_offset)
  bool role_sent = false;
  bool closed = false;
  std::string finish_reason;
  nlohmann::json lifeline = {{"truncated", false}};
};

namespace {

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

ChoiceAssembler::ChoiceAssembler(AssemblerOptions options) : opts_(std::move(options)) {
  for (int32_t i = 0; i < std::max<int32_t>(1, opts_.n_choices); ++i) {
    auto c = std::make_unique<Choice>();
    c->index = i;
    if (opts_.ctx.is_chat && opts_.tool_format != toolcall::ToolCallFormat::kNone) {
      toolcall::ToolCallParseOptions po;
      po.id_seed = opts_.tool_call_id_seed + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
      c->parser = std::make_unique<toolcall::ToolCallStreamParser>(opts_.tool_format, po);
    }
    choices_.push_back(std::move(c));
  }
}

ChoiceAssembler::~ChoiceAssembler() = default;

ChoiceAssembler::Choice& ChoiceAssembler::At(int32_t index) {
  // The engine sends indices below n_choices; anything else lands on choice 0 rather than
  // growing the answer.
  if (index < 0 || index >= static_cast<int32_t>(choices_.size())) index = 0;
  return *choices_[static_cast<size_t>(index)];
}

json ChoiceAssembler::Chunk(const Choice& c, json delta_or_text) const {
  json out = ResponseEnvelope(opts_.ctx, /*chunk=*/true);
  json choice = {{"index", c.index}};
  if (opts_.ctx.is_chat) {
    choice["delta"] = std::move(delta_or_text);
  } else {
    choice["text"] = std::move(delta_or_text);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  out["choices"] = json::array({std::move(choice)});
  return out;
}

json ChoiceAssembler::LogprobsJson(const std::vector<TokenLogprobs>& entries,
                                   size_t text_offset) const {
  if (opts_.ctx.is_chat) {
    json content = json::array();
    for (const TokenLogprobs& e : entries) {
      json top = json::array();
      for (const LogprobEntry& t : e.top) {
        top.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", Bytes(t.token)}});
      }
      content.push_back({{"token", e.token}, {"logprob", e.logprob}, {"bytes", Bytes(e.token)},
                         {"top_logprobs", std::move(top)}});
    }
    return json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  size_t offset = text_offset;
  for (const TokenLogprobs& e : entries) {
    tokens.push_back(e.token);
    token_logprobs.push_back(e.logprob);
    json alternatives = json::object();
    for (const LogprobEntry& t : e.top) {
      if (!alternatives.contains(t.token)) alternatives[t.token] = t.logprob;
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += e.token.size();
  }
  return json{{"tokens", std::move(tokens)}, {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top)}, {"text_offset", std::move(offsets)}};
}

void ChoiceAssembler::Route(Choice& c, std::string_view text, bool stream,
                            std::vector<json>* out) {
  auto content = [&](std::string_view t) {
    if (t.empty()) return;
    if (!stream) {
      c.text += t;
      return;
    }
    if (!opts_.ctx.is_chat) {
      out->push_back(Chunk(c, std::string(t)));
      return;
    }
    json delta = {{"content", std::string(t)}};
    if (!c.role_sent) delta["role"] = "assistant";
    c.role_sent = true;
    out->push_back(Chunk(c, std::move(delta)));
  };
  if (c.parser == nullptr) return content(text);
  std::vector<toolcall::ToolCallDelta> deltas =
      text.empty() ? c.parser->Finish() : c.parser->Push(text);
  for (toolcall::ToolCallDelta& d : deltas) {
    if (d.kind == toolcall::ToolCallDelta::Kind::kContent) {
      content(d.text);
      continue;
    }
    if (!stream) {
      if (d.first) c.calls.push_back({d.id, d.name, ""});
      if (d.index < c.calls.size()) c.calls[d.index].arguments += d.text;
      continue;
    }
    json call = {{"index", d.index}};
    if (d.first) {
      call["id"] = d.id;
      call["type"] = "function";
      call["function"] = {{"name", d.name}, {"arguments", d.text}};
    } else {
      call["function"] = {{"arguments", d.text}};
    }
    json delta = {{"tool_calls", json::array({std::move(call)})}};
    if (!c.role_sent) delta["role"] = "assistant";
    c.role_sent = true;
    out->push_back(Chunk(c, std::move(delta)));
  }
}

std::vector<json> ChoiceAssembler::OnToken(const GenerationEvent& event, bool stream) {
  std::vector<json> out;
  Choice& c = At(event.index);
  if (c.closed) return out;
  if (!event.embedding.empty()) c.embedding = event.embedding;
  const size_t offset = c.text_bytes;
  c.text_bytes += event.reasoning.size() + event.text.size();
  if (!event.reasoning.empty()) {  // thinking: never content, never a tool call
    if (!stream) {
      c.reasoning += event.reasoning;
    } else if (opts_.ctx.is_chat) {
      json delta = {{opts_.reasoning_field, event.reasoning}};
      if (!c.role_sent) delta["role"] = "assistant";
      c.role_sent = true;
      out.push_back(Chunk(c, std::move(delta)));
    }
  }
  if (!event.text.empty()) Route(c, event.text, stream, &out);
  if (!opts_.logprobs || event.logprobs.empty()) return out;
  if (!stream) {
    size_t o = offset;
    for (const TokenLogprobs& e : event.logprobs) {
      c.logprobs.push_back(e);
      c.offsets.push_back(o);
      o += e.token.size();
    }
    return out;
  }
  // The entries ride on the first chunk this text made, or on an empty one when the text is
  // still held (a possible tool-call marker).
  if (out.empty()) {
    out.push_back(Chunk(c, opts_.ctx.is_chat ? json::object() : json("")));
  }
  out.front()["choices"][0]["logprobs"] = LogprobsJson(event.logprobs, offset);
  return out;
}

void ChoiceAssembler::CloseChoice(Choice& c, const std::string& finish_reason,
                                  const json& lifeline, bool stream, std::vector<json>* out) {
  if (c.closed) return;
  if (c.parser != nullptr) Route(c, "", stream, out);  // the held text, unfinished calls
  c.closed = true;
  c.finish_reason = finish_reason;
  if (lifeline.is_object() && lifeline.contains("truncated")) c.lifeline = lifeline;
  // A model that called tools and stopped by itself finished "tool_calls" (a call cut by
  // max_tokens stays "length").
  if (c.parser != nullptr && c.parser->calls_emitted() > 0 && finish_reason == "stop") {
    c.finish_reason = "tool_calls";
  }
  if (!stream) return;
  json last = Chunk(c, opts_.ctx.is_chat ? json::object() : json(""));
  last["choices"][0]["finish_reason"] = c.finish_reason;
  last["choices"][0]["lifeline"] = c.lifeline;
  out->push_back(std::move(last));
}

std::vector<json> ChoiceAssembler::OnChoiceDone(int32_t index, const std::string& finish_reason,
                                                bool stream, const json& lifeline) {
  std::vector<json> out;
  CloseChoice(At(index), finish_reason, lifeline, stream, &out);
  return out;
}

namespace {

// The object of the choices closed by the terminal event: the event's own, else (an engine
// that reports only the request-level timings.lifeline, e.g. a remote member) that one.
json DoneLifeline(const GenerationEvent& done) {
  if (done.lifeline.is_object()) return done.lifeline;
  if (done.timings.is_object() && done.timings.contains("lifeline") &&
      done.timings["lifeline"].is_object() && done.timings["lifeline"].value("truncated", false)) {
    json j = done.timings["lifeline"];
    if (j.contains("reason") && j["reason"] != "deadline") {
      j["detail"] = j["reason"];
      j["reason"] = "max_tokens_cap";
    }
    return j;
  }
  return nullptr;
}

}  // namespace

std::vector<json> ChoiceAssembler::StreamEnd(const GenerationEvent& done, bool include_usage,
                                             const json& timings) {
  std::vector<json> out;
  const json lifeline = DoneLifeline(done);
  for (auto& c : choices_) CloseChoice(*c, done.finish_reason, lifeline, /*stream=*/true, &out);
  if (include_usage) {
    json usage = ResponseEnvelope(opts_.ctx, /*chunk=*/true);
    usage["choices"] = json::array();
    usage["usage"] = UsageJson(done.usage);
    usage["timings"] = timings;
    out.push_back(std::move(usage));
  } else if (!out.empty()) {
    out.back()["timings"] = timings;
  }
  // A stream's headers left before anyone knew: its last event says what was cut.
  json cut = json::array();
  for (const auto& c : choices_) {
    if (c->lifeline.value("truncated", false)) {
      json one = c->lifeline;
      one["index"] = c->index;
      cut.push_back(std::move(one));
    }
  }
  if (!cut.empty()) {
    json last = ResponseEnvelope(opts_.ctx, /*chunk=*/true);
    last["choices"] = json::array();
    last["lifeline"] = {{"truncated", true}, {"choices", std::move(cut)}};
    out.push_back(std::move(last));
  }
  return out;
}

std::string ChoiceAssembler::TruncatedReasons() const {
  std::string out;
  for (const auto& c : choices_) {
    if (!c->lifeline.value("truncated", false)) continue;
    const std::string reason = c->lifeline.value("reason", std::string("truncated"));
    if (("," + out + ",").find("," + reason + ",") != std::string::npos) continue;
    if (!out.empty()) out += ",";
    out += reason;
  }
  return out;
}

json ChoiceAssembler::FinalBody(const GenerationEvent& done, const json& timings) {
  std::vector<json> ignored;
  const json lifeline = DoneLifeline(done);
  for (auto& c : choices_) {
    CloseChoice(*c, done.finish_reason, lifeline, /*stream=*/false, &ignored);
  }
  json body = ResponseEnvelope(opts_.ctx, /*chunk=*/false);
  json choices = json::array();
  for (const auto& c : choices_) {
    json choice = {{"index", c->index}};
    const json logprobs = opts_.logprobs ? LogprobsJson(c->logprobs, c->offsets.empty() ? 0 : c->offsets.front())
                                         : json(nullptr);
    if (opts_.ctx.is_chat) {
      json message = {{"role", "assistant"}};
      // OpenAI: content is null when the answer is only tool calls.
      message["content"] = c->text.empty() && !c->calls.empty() ? json(nullptr) : json(c->text);
      if (!c->reasoning.empty()) message[opts_.reasoning_field] = c->reasoning;
      if (!c->calls.empty()) {
        json calls = json::array();
        for (const toolcall::ToolCall& call : c->calls) {
          calls.push_back({{"id", call.id}, {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
      }
      message["refusal"] = nullptr;
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c->text;
    }
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = c->finish_reason.empty() ? json(nullptr) : json(c->finish_reason);
    choice["lifeline"] = c->lifeline;
    // Each float as its exact double: the translation (embeddings_api.h) reads back the very
    // floats the engine pooled before it truncates, normalises and writes them.
    if (!c->embedding.empty()) choice["embedding"] = c->embedding;
    choices.push_back(std::move(choice));
  }
  body["choices"] = std::move(choices);
  body["usage"] = UsageJson(done.usage);
  body["timings"] = timings.is_object() ? timings : json::object();
  if (opts_.infill && !choices_.empty()) body["content"] = choices_.front()->text;
  return body;
}

}  // namespace lifeline::api

// The tool-call parser is one byte-driven state machine (ToolCallStreamParser::Impl);
// ParseToolCalls pushes the whole output through it. Modes:
//
//   kStart        (JSON-at-start formats) before the first non-space byte: '{' (or '[' for
//                 kGeneric) opens a call candidate, anything else makes the rest content.
//   kContent      text is content, except a marker (<tool_call>, [TOOL_CALLS], <|python_tag|>,
//                 and a thinking opener at the start). A tail that may be a marker's start
//                 is held until it is decided.
//   kThink        thinking text, content up to and including the closing tag.
//   kAfterMarker  (Mistral) after [TOOL_CALLS]: a JSON array / object, or a function name.
//   kArgsName, kArgsTag, kArgsId   (Mistral) name[CALL_ID]id[ARGS].
//   kPreJson      whitespace before the call's JSON.
//   kJson         the call's JSON, fed to a JsonScanner until it closes.
//   kHermesClose  after a Hermes call: whitespace and </tool_call> are consumed if present.
//   kLlamaSep     after a Llama call: ';' and whitespace, then maybe another call.
//
// A byte that ends a mode without belonging to it is stepped again in the next mode (Step
// returns false); bytes given back (whitespace and a partial tag held after a Hermes call) are
// stepped again before it. Every byte is stepped a bounded number of times, so parsing is
// linear in the output.
#include "text/toolcall/parser.h"

#include <algorithm>
#include <array>
#include <exception>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "text/toolcall/call_id.h"
#include "text/toolcall/json_scanner.h"

namespace lifeline::toolcall {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kMistralThinkOpen = "[THINK]";
constexpr std::string_view kMistralThinkClose = "[/THINK]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr size_t kMaxNameBytes = 64;

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-';
}
bool IsMistral(ToolCallFormat f) {
  return f == ToolCallFormat::kMistralNemo || f == ToolCallFormat::kMistralArgs;
}

// True when `text` (surrounding whitespace allowed) is exactly one JSON object or array no
// deeper than kMaxCallDepth: checked before nlohmann's recursive parser sees text that came
// from inside a JSON string.
bool IsBoundedJson(std::string_view text) {
  JsonScanner scanner(/*allow_array=*/true, kMaxCallDepth);
  size_t i = 0;
  while (i < text.size() && IsWs(text[i])) ++i;
  for (; i < text.size(); ++i) {
    if (scanner.Feed(text[i]) != JsonScanner::State::kRunning) break;
  }
  if (scanner.state() != JsonScanner::State::kDone) return false;
  for (++i; i < text.size(); ++i) {
    if (!IsWs(text[i])) return false;
  }
  return true;
}

// {"name": "f", "arguments": {...}} (or "parameters"; the arguments may be a JSON string
// holding an object). Other keys ("id", "type") are ignored. The id is filled in later.
std::optional<ToolCall> CallFromObject(const ojson& v) {
  if (!v.is_object()) return std::nullopt;
  auto name = v.find("name");
  if (name == v.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  auto a = v.find("arguments");
  auto p = v.find("parameters");
  if ((a == v.end()) == (p == v.end())) return std::nullopt;  // neither, or both
  const ojson& raw = a != v.end() ? *a : *p;
  ojson parsed;
  const ojson* args = &raw;
  if (raw.is_string()) {
    const std::string& s = raw.get_ref<const std::string&>();
    if (!IsBoundedJson(s)) return std::nullopt;
    parsed = ojson::parse(s, nullptr, /*allow_exceptions=*/false);
    args = &parsed;
  }
  if (!args->is_object()) return std::nullopt;
  return ToolCall{"", name->get<std::string>(),
                  args->dump(-1, ' ', false, ojson::error_handler_t::replace)};
}

// An object holding one call, or a non-empty array whose every element is one.
std::optional<std::vector<ToolCall>> CallsFromValue(const ojson& v, bool allow_array) {
  std::vector<ToolCall> calls;
  if (v.is_array() && allow_array && !v.empty()) {
    for (const ojson& e : v) {
      auto call = CallFromObject(e);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  auto call = CallFromObject(v);
  if (!call) return std::nullopt;
  calls.push_back(std::move(*call));
  return calls;
}

// For the JSON-at-start formats, where no marker says "this is a call": does the JSON begin
// like one ({"name" as the first key)? Decides whether a failure is reported as malformed.
bool LooksLikeCall(std::string_view json) {
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < json.size() && IsWs(json[i])) ++i;
  };
  if (i < json.size() && json[i] == '[') {
    ++i;
    skip_ws();
  }
  if (i >= json.size() || json[i] != '{') return false;
  ++i;
  skip_ws();
  return json.substr(i).starts_with("\"name\"");
}

}  // namespace

struct ToolCallStreamParser::Impl {
  enum class Mode : uint8_t {
    kStart, kContent, kThink, kAfterMarker, kArgsName, kArgsTag, kArgsId, kPreJson, kJson,
    kHermesClose, kLlamaSep,
  };

  Impl(ToolCallFormat f, const ToolCallParseOptions& options) : format(f), ids(options.id_seed) {
    const bool at_start = f == ToolCallFormat::kLlama3Json || f == ToolCallFormat::kGeneric;
    mode = at_start ? Mode::kStart : Mode::kContent;
    if (options.starts_in_thinking && (f == ToolCallFormat::kHermes || IsMistral(f))) {
      mode = Mode::kThink;
      think_seen = true;
    }
  }

  // --- output -----------------------------------------------------------------------------
  void EmitContent(std::string_view s) {
    for (char c : s) {
      if (IsWs(c)) {
        if (content_started) pending_ws.push_back(c);
        continue;
      }
      content_run += pending_ws;
      pending_ws.clear();
      content_run.push_back(c);
      content_started = true;
    }
  }
  void FlushContent() {
    if (content_run.empty()) return;
    ToolCallDelta d;
    d.text = std::move(content_run);
    content_run.clear();
    out.push_back(std::move(d));
  }
  void EmitCall(ToolCall call) {
    FlushContent();
    ToolCallDelta head;
    head.kind = ToolCallDelta::Kind::kToolCall;
    head.index = calls;
    head.first = true;
    head.id = ids.Next(format);
    head.name = std::move(call.name);
    out.push_back(std::move(head));
    ToolCallDelta args;
    args.kind = ToolCallDelta::Kind::kToolCall;
    args.index = calls;
    args.text = std::move(call.arguments);
    out.push_back(std::move(args));
    ++calls;
  }

  // --- markers in content -----------------------------------------------------------------
  // The markers that open something in the current mode. The thinking opener counts only
  // before any content or call, as models write it first.
  size_t ActiveMarkers(std::array<std::string_view, 2>& m) const {
    if (mode == Mode::kThink) {
      m[0] = format == ToolCallFormat::kHermes ? kThinkClose : kMistralThinkClose;
      return 1;
    }
    const bool think_ok = !think_seen && !content_started && calls == 0;
    switch (format) {
      case ToolCallFormat::kHermes:
        m[0] = kToolCallOpen;
        m[1] = kThinkOpen;
        return think_ok ? 2 : 1;
      case ToolCallFormat::kMistralNemo:
      case ToolCallFormat::kMistralArgs:
        m[0] = kMistralCalls;
        m[1] = kMistralThinkOpen;
        return think_ok ? 2 : 1;
      case ToolCallFormat::kLlama3Json:
        m[0] = kPythonTag;
        return 1;
      case ToolCallFormat::kGeneric:
      case ToolCallFormat::kNone:
        break;
    }
    return 0;
  }

  void OnMarker(std::string_view marker) {
    if (marker == kThinkOpen || marker == kMistralThinkOpen) {
      EmitContent(marker);
      think_seen = true;
      mode = Mode::kThink;
    } else if (marker == kThinkClose || marker == kMistralThinkClose) {
      EmitContent(marker);
      mode = Mode::kContent;
    } else {
      BeginCall(marker, /*from_marker=*/true);
      mode = IsMistral(format) ? Mode::kAfterMarker : Mode::kPreJson;
    }
  }

  void StepMarkers(char c) {
    std::array<std::string_view, 2> markers;
    const size_t n = ActiveMarkers(markers);
    if (n == 0) {
      EmitContent(std::string_view(&c, 1));
      return;
    }
    hold.push_back(c);
    auto is_prefix = [&](std::string_view s) {
      for (size_t i = 0; i < n; ++i) {
        if (markers[i].starts_with(s)) return true;
      }
      return false;
    };
    for (size_t i = 0; i < n; ++i) {
      if (hold == markers[i]) {
        hold.clear();
        OnMarker(markers[i]);
        return;
      }
    }
    if (is_prefix(hold)) return;
    // Release all but the longest tail that may still start a marker. No marker is a
    // substring of another, so that tail is never a whole marker.
    size_t keep = hold.size() - 1;
    while (keep > 0 && !is_prefix(std::string_view(hold).substr(hold.size() - keep))) --keep;
    EmitContent(std::string_view(hold).substr(0, hold.size() - keep));
    hold.erase(0, hold.size() - keep);
  }

  // --- calls ------------------------------------------------------------------------------
  void BeginCall(std::string_view prefix, bool from_marker) {
    seg.assign(prefix);
    json.clear();
    name.clear();
    tag.clear();
    id_seen = false;
    seg_from_marker = from_marker;
  }

  void StartJson(char c) {
    // Arrays of calls: Mistral's JSON form (no name read before it) and kGeneric.
    const bool allow_array =
        (IsMistral(format) && name.empty()) || format == ToolCallFormat::kGeneric;
    scanner = JsonScanner(allow_array, kMaxCallDepth);
    mode = Mode::kJson;
    FeedJson(c);
  }

  // The call's text is not a call: it becomes content. `c`, if any, is stepped again.
  bool Fail(bool consumed) {
    if (seg_from_marker || LooksLikeCall(json)) malformed = true;
    EmitContent(seg);
    seg.clear();
    json.clear();
    mode = Mode::kContent;
    return consumed;
  }

  bool FeedJson(char c) {
    if (seg.size() >= kMaxCallBytes) return Fail(false);
    const JsonScanner::State st = scanner.Feed(c);
    if (st == JsonScanner::State::kError) return Fail(false);
    seg.push_back(c);
    json.push_back(c);
    if (st == JsonScanner::State::kDone) CompleteJson();
    return true;
  }

  // The calls the complete JSON holds, if it is what the format expects there.
  std::optional<std::vector<ToolCall>> CallsFromJson() const {
    try {
      ojson v = ojson::parse(json, nullptr, /*allow_exceptions=*/false);
      if (v.is_discarded()) return std::nullopt;
      if (name.empty()) {
        return CallsFromValue(v, IsMistral(format) || format == ToolCallFormat::kGeneric);
      }
      if (!v.is_object()) return std::nullopt;  // Mistral name[ARGS]{...}
      return std::vector<ToolCall>{
          ToolCall{"", name, v.dump(-1, ' ', false, ojson::error_handler_t::replace)}};
    } catch (const std::exception&) {  // nlohmann promises not to; stay total regardless
      return std::nullopt;
    }
  }

  void CompleteJson() {
    std::optional<std::vector<ToolCall>> found = CallsFromJson();
    if (!found) {
      Fail(true);
      return;
    }
    for (ToolCall& call : *found) EmitCall(std::move(call));
    seg.clear();
    json.clear();
    switch (format) {
      case ToolCallFormat::kHermes: mode = Mode::kHermesClose; break;
      case ToolCallFormat::kLlama3Json: mode = Mode::kLlamaSep; break;
      default: mode = Mode::kContent; break;
    }
  }

  // Consumes whitespace and a </tool_call> after a Hermes call; anything else goes back to
  // content, the held bytes first.
  bool StepHermesClose(char c) {
    if (tag.empty() && IsWs(c) && post.size() < kMaxCallBytes) {
      post.push_back(c);
      return true;
    }
    tag.push_back(c);
    if (kToolCallClose.starts_with(tag)) {
      if (tag.size() == kToolCallClose.size()) {
        tag.clear();
        post.clear();
        mode = Mode::kContent;
      }
      return true;
    }
    tag.pop_back();
    Requeue(post + tag);
    post.clear();
    tag.clear();
    mode = Mode::kContent;
    return false;
  }

  bool StepLlamaSep(char c) {
    if ((IsWs(c) || c == ';') && sep.size() < kMaxCallBytes) {
      sep.push_back(c);
      return true;
    }
    if (c == '{') {
      BeginCall(sep, /*from_marker=*/false);
      sep.clear();
      StartJson(c);
      return true;
    }
    EmitContent(sep);
    sep.clear();
    mode = Mode::kContent;
    return false;
  }

  bool StepMistral(char c) {
    if (seg.size() >= kMaxCallBytes) return Fail(false);
    switch (mode) {
      case Mode::kAfterMarker:
        if (IsWs(c)) break;
        if (c == '[' || c == '{') {
          StartJson(c);
          return true;
        }
        if (!IsNameChar(c)) return Fail(false);
        mode = Mode::kArgsName;
        return false;
      case Mode::kArgsName:
        if (IsNameChar(c) && name.size() < kMaxNameBytes) {
          name.push_back(c);
          break;
        }
        if (c != '[') return Fail(false);
        tag = "[";
        mode = Mode::kArgsTag;
        break;
      case Mode::kArgsTag: {
        tag.push_back(c);
        const bool args = kMistralArgs.starts_with(tag);
        const bool id = !id_seen && kMistralCallId.starts_with(tag);
        if (!args && !id) {
          tag.pop_back();
          return Fail(false);
        }
        if (tag == kMistralArgs) {
          mode = Mode::kPreJson;
        } else if (tag == kMistralCallId) {
          id_seen = true;
          mode = Mode::kArgsId;
        }
        break;
      }
      case Mode::kArgsId:
        // The model's id is checked for shape only; ids come from CallIdGenerator.
        if (IsNameChar(c) && tag.size() < kMistralCallId.size() + kMaxNameBytes) {
          tag.push_back(c);
          break;
        }
        if (c != '[') return Fail(false);
        tag = "[";
        mode = Mode::kArgsTag;
        break;
      default:
        break;
    }
    seg.push_back(c);
    return true;
  }

  bool Step(char c) {
    switch (mode) {
      case Mode::kStart:
        if (IsWs(c)) {
          EmitContent(std::string_view(&c, 1));
          return true;
        }
        if (c == '{' || (c == '[' && format == ToolCallFormat::kGeneric)) {
          BeginCall("", /*from_marker=*/false);
          StartJson(c);
          return true;
        }
        mode = Mode::kContent;
        return false;
      case Mode::kContent:
      case Mode::kThink:
        StepMarkers(c);
        return true;
      case Mode::kAfterMarker:
      case Mode::kArgsName:
      case Mode::kArgsTag:
      case Mode::kArgsId:
        return StepMistral(c);
      case Mode::kPreJson:
        if (IsWs(c) && seg.size() < kMaxCallBytes) {
          seg.push_back(c);
          return true;
        }
        if (c == '{') {
          StartJson(c);
          return true;
        }
        return Fail(false);
      case Mode::kJson:
        return FeedJson(c);
      case Mode::kHermesClose:
        return StepHermesClose(c);
      case Mode::kLlamaSep:
        return StepLlamaSep(c);
    }
    return true;
  }

  // Bytes given back are stepped before the byte that gave them back (still unconsumed).
  void Requeue(const std::string& s) {
    redo.erase(0, redo_pos);
    redo.insert(0, s);
    redo_pos = 0;
  }

  void Run(std::string_view chunk) {
    size_t pos = 0;
    while (true) {
      if (redo_pos < redo.size()) {
        if (Step(redo[redo_pos])) ++redo_pos;
        continue;
      }
      redo.clear();
      redo_pos = 0;
      if (pos >= chunk.size()) break;
      if (Step(chunk[pos])) ++pos;
    }
  }

  void End() {
    switch (mode) {
      case Mode::kContent:
      case Mode::kThink:
        EmitContent(hold);
        hold.clear();
        break;
      case Mode::kAfterMarker:
      case Mode::kArgsName:
      case Mode::kArgsTag:
      case Mode::kArgsId:
      case Mode::kPreJson:
      case Mode::kJson:
        Fail(true);  // cut off inside a call
        break;
      case Mode::kHermesClose:  // a missing or cut-off </tool_call> after a complete call
      case Mode::kLlamaSep:
      case Mode::kStart:
        break;
    }
    pending_ws.clear();
    FlushContent();
  }

  ToolCallFormat format;
  CallIdGenerator ids;
  Mode mode = Mode::kContent;
  bool finished = false;
  std::vector<ToolCallDelta> out;

  std::string content_run;  // content since the last delta
  bool content_started = false;
  std::string pending_ws;   // whitespace that is content only if more content follows

  size_t calls = 0;
  bool malformed = false;
  bool think_seen = false;

  std::string redo;  // bytes given back, stepped before the rest of the chunk
  size_t redo_pos = 0;

  std::string hold;  // kContent / kThink: a tail that may start a marker
  std::string seg;   // the current call's raw text, content if it fails
  std::string json;  // the current call's JSON text
  JsonScanner scanner;
  bool seg_from_marker = false;
  std::string name;  // Mistral name[ARGS] form
  std::string tag;   // partial [ARGS] / [CALL_ID]<id> / </tool_call>
  bool id_seen = false;
  std::string post;  // whitespace after a Hermes call
  std::string sep;   // separators after a Llama call
};

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format,
                                           const ToolCallParseOptions& options)
    : impl_(std::make_unique<Impl>(format, options)) {}
ToolCallStreamParser::~ToolCallStreamParser() = default;
ToolCallStreamParser::ToolCallStreamParser(ToolCallStreamParser&&) noexcept = default;
ToolCallStreamParser& ToolCallStreamParser::operator=(ToolCallStreamParser&&) noexcept = default;

std::vector<ToolCallDelta> ToolCallStreamParser::Push(std::string_view text_delta) {
  Impl& p = *impl_;
  if (p.finished || text_delta.empty()) return {};
  if (p.format == ToolCallFormat::kNone) {
    ToolCallDelta d;
    d.text.assign(text_delta);
    return {std::move(d)};
  }
  p.Run(text_delta);
  p.FlushContent();
  return std::exchange(p.out, {});
}

std::vector<ToolCallDelta> ToolCallStreamParser::Finish() {
  Impl& p = *impl_;
  if (p.finished) return {};
  p.finished = true;
  if (p.format == ToolCallFormat::kNone) return {};
  p.End();
  return std::exchange(p.out, {});
}

size_t ToolCallStreamParser::calls_emitted() const { return impl_->calls; }
bool ToolCallStreamParser::malformed() const { return impl_->malformed; }

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view output,
                               const ToolCallParseOptions& options) {
  ToolCallStreamParser parser(format, options);
  std::vector<ToolCallDelta> deltas = parser.Push(output);
  std::vector<ToolCallDelta> rest = parser.Finish();
  deltas.insert(deltas.end(), std::make_move_iterator(rest.begin()),
                std::make_move_iterator(rest.end()));
  ParsedToolCalls result;
  for (ToolCallDelta& d : deltas) {
    if (d.kind == ToolCallDelta::Kind::kContent) {
      result.content += d.text;
    } else if (d.first) {
      result.calls.push_back(ToolCall{std::move(d.id), std::move(d.name), ""});
    } else {
      LL_CHECK(!result.calls.empty() && d.index + 1 == result.calls.size());
      result.calls.back().arguments += d.text;
    }
  }
  result.malformed = parser.malformed();
  return result;
}

}  // namespace lifeline::toolcall

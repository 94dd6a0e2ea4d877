#include "text/toolcall/format.h"

#include <array>

namespace lifeline::toolcall {
namespace {

bool Has(std::string_view src, std::string_view needle) {
  return src.find(needle) != std::string_view::npos;
}

constexpr std::array<std::string_view, 1> kLlama3Markers = {"<|python_tag|>"};
constexpr std::array<std::string_view, 4> kHermesMarkers = {"<tool_call>", "</tool_call>",
                                                            "<think>", "</think>"};
constexpr std::array<std::string_view, 5> kMistralMarkers = {"[TOOL_CALLS]", "[ARGS]",
                                                             "[CALL_ID]", "[THINK]", "[/THINK]"};

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kLlama3Json: return "llama3-json";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kMistralNemo: return "mistral-nemo";
    case ToolCallFormat::kMistralArgs: return "mistral-args";
    case ToolCallFormat::kGeneric: return "generic";
  }
  return "none";
}

std::optional<ToolCallFormat> ToolCallFormatFromName(std::string_view name) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kLlama3Json,
                           ToolCallFormat::kHermes, ToolCallFormat::kMistralNemo,
                           ToolCallFormat::kMistralArgs, ToolCallFormat::kGeneric}) {
    if (ToolCallFormatName(f) == name) return f;
  }
  return std::nullopt;
}

ToolCallFormat DetectToolCallFormat(std::string_view src) {
  if (Has(src, "[TOOL_CALLS]")) {
    // Small 3.2 / Devstral / Magistral write "[TOOL_CALLS]name[ARGS]{...}"; the older Mistral
    // templates write a JSON array after the marker.
    return Has(src, "[ARGS]") ? ToolCallFormat::kMistralArgs : ToolCallFormat::kMistralNemo;
  }
  if (Has(src, "<tool_call>")) {
    // Qwen3-Coder (<function=name><parameter=k>v) and GLM-4.5 (<arg_key>/<arg_value>) wrap XML,
    // not JSON, in the same tag; llama.cpp gives them their own parsers, we fall back.
    const bool qwen3_coder_xml = Has(src, "<function=") && Has(src, "<parameter=");
    const bool glm_xml = Has(src, "<arg_key>");
    if (!qwen3_coder_xml && !glm_xml) return ToolCallFormat::kHermes;
    return ToolCallFormat::kGeneric;
  }
  if (Has(src, "<|start_header_id|>ipython<|end_header_id|>") && !Has(src, "<function=")) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kGeneric;
}

std::span<const std::string_view> ToolCallMarkers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3Json: return kLlama3Markers;
    case ToolCallFormat::kHermes: return kHermesMarkers;
    case ToolCallFormat::kMistralNemo:
    case ToolCallFormat::kMistralArgs: return kMistralMarkers;
    case ToolCallFormat::kNone:
    case ToolCallFormat::kGeneric: break;
  }
  return {};
}

}  // namespace lifeline::toolcall

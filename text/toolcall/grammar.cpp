#include "text/toolcall/grammar.h"

#include <cctype>
#include <cstdio>
#include <set>

namespace lifeline::toolcall {
namespace {

struct Wrapper {
  std::string before_name;  // literal text before the function name
  std::string after_name;   // literal text between the name and ARGS
  std::string after_args;   // literal text after ARGS
};

Wrapper WrapperFor(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>"};
    case ToolCallFormat::kLlama3Json:
      return {"{\"name\": \"", "\", \"parameters\": ", "}"};
    case ToolCallFormat::kMistralNemo:
      return {"{\"name\": \"", "\", \"arguments\": ", ", \"id\": \""};  // + tool-id "\"}"
    case ToolCallFormat::kMistralArgs:
      return {"[TOOL_CALLS]", "[ARGS]", ""};
    case ToolCallFormat::kGeneric:
    case ToolCallFormat::kNone:
      break;
  }
  return {"{\"name\": \"", "\", \"arguments\": ", "}"};
}

// The root rule: how calls are wrapped and joined. Parallel calls are at most
// kMaxParallelToolCalls: a small model under a forced call otherwise repeated calls until
// max_tokens cut the list, and a cut list parses as no call at all.
std::string RootRule(ToolCallFormat format, bool parallel) {
  const std::string more = "{0," + std::to_string(kMaxParallelToolCalls - 1) + "}";
  switch (format) {
    case ToolCallFormat::kHermes:
      return parallel ? "tool-call ( \"\\n\" tool-call )" + more : "tool-call";
    case ToolCallFormat::kLlama3Json:
      return parallel ? "tool-call ( \"; \" tool-call )" + more : "tool-call";
    case ToolCallFormat::kMistralNemo:
      return parallel ? "\"[TOOL_CALLS][\" tool-call ( \", \" tool-call )" + more + " \"]\""
                      : "\"[TOOL_CALLS][\" tool-call \"]\"";
    case ToolCallFormat::kMistralArgs:
      return parallel ? "tool-call{1," + std::to_string(kMaxParallelToolCalls) + "}"
                      : "tool-call";
    case ToolCallFormat::kGeneric:
    case ToolCallFormat::kNone:
      break;
  }
  return parallel ? "tool-call | \"[\" tool-call ( \", \" tool-call )" + more + " \"]\""
                  : "tool-call";
}

// The names a GBNF text defines ("name ::= ..." at the start of a line).
std::vector<std::string> DefinedRules(const std::string& gbnf) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < gbnf.size()) {
    size_t eol = gbnf.find('\n', pos);
    if (eol == std::string::npos) eol = gbnf.size();
    std::string_view line(gbnf.data() + pos, eol - pos);
    size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && (std::isalnum(static_cast<unsigned char>(line[j])) || line[j] == '-')) ++j;
    size_t k = j;
    while (k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
    if (j > i && line.substr(k).starts_with("::=")) names.emplace_back(line.substr(i, j - i));
    pos = eol + 1;
  }
  return names;
}

std::string ParamsPath(size_t i) {
  return "tools[" + std::to_string(i) + "].function.parameters";
}

}  // namespace


Result<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                 const ToolChoice& choice, bool parallel_tool_calls,
                                 const SchemaToGbnf& schema_to_gbnf) {
  using Mode = ToolChoice::Mode;
  if (choice.mode == Mode::kAuto || choice.mode == Mode::kNone) return std::string();
  if (format == ToolCallFormat::kNone) {
    return InvalidArgument("tool-call format 'none' has no call syntax to enforce");
  }
  std::vector<size_t> chosen;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (choice.mode == Mode::kRequired || tools[i].name == choice.function_name) {
      chosen.push_back(i);
    }
  }
  if (chosen.empty()) {
    return InvalidArgument(choice.mode == Mode::kRequired
                               ? "'tool_choice' is \"required\" but no tools were given"
                               : "'tool_choice.function.name' \"" + choice.function_name +
                                     "\" is not the name of a function in 'tools'");
  }
  const Wrapper w = WrapperFor(format);
  std::string alternatives;
  std::string per_tool;
  std::string schemas;
  std::set<std::string> defined = {"root", "tool-call", "tool-id"};
  for (size_t i : chosen) {
    const std::string prefix = "tool" + std::to_string(i) + "-args-";
    Result<std::string> rules = schema_to_gbnf(tools[i].parameters, prefix);
    if (!rules.ok()) {
      return Status(rules.status().code(),
                    "'" + ParamsPath(i) + "': " + rules.status().message());
    }
    bool has_root = false;
    for (const std::string& name : DefinedRules(*rules)) {
      if (!name.starts_with(prefix) || !defined.insert(name).second) {
        return Internal("'" + ParamsPath(i) + "': the schema converter defined rule '" + name +
                        "', outside its prefix '" + prefix + "' or twice");
      }
      has_root = has_root || name == prefix + "root";
    }
    if (!has_root) {
      return Internal("'" + ParamsPath(i) + "': the schema converter defined no '" + prefix +
                      "root' rule");
    }
    const std::string call = "tool" + std::to_string(i) + "-call";
    defined.insert(call);
    std::string body = GbnfLiteral(w.before_name + tools[i].name + w.after_name) + " " +
                       prefix + "root";
    if (format == ToolCallFormat::kMistralNemo) {
      body += " " + GbnfLiteral(w.after_args) + " tool-id \"\\\"}\"";
    } else if (!w.after_args.empty()) {
      body += " " + GbnfLiteral(w.after_args);
    }
    per_tool += call + " ::= " + body + "\n";
    alternatives += (alternatives.empty() ? "" : " | ") + call;
    schemas += *rules;
    if (!schemas.empty() && schemas.back() != '\n') schemas += "\n";
  }
  std::string g;
  g += "# Forced tool call: format " + std::string(ToolCallFormatName(format)) + ", " +
       std::to_string(chosen.size()) + " function(s), " +
       (parallel_tool_calls ? "1 to " + std::to_string(kMaxParallelToolCalls) + " calls"
                           : std::string("one call")) + "\n";
  g += "root ::= " + RootRule(format, parallel_tool_calls) + "\n";
  g += "tool-call ::= " + alternatives + "\n";
  g += per_tool;
  if (format == ToolCallFormat::kMistralNemo) {
    // Nemo's and Small 3.2's templates demand 9 alphanumerics; written out rather than with
    // {9} so that any GBNF reader takes it.
    std::string id;
    for (int k = 0; k < 9; ++k) id += (k ? " " : "") + std::string("[a-zA-Z0-9]");
    g += "tool-id ::= " + id + "\n";
  }
  g += schemas;
  return g;
}

}  // namespace lifeline::toolcall

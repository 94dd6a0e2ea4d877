#include "text/toolcall/tools.h"

#include <unordered_map>

namespace lifeline::toolcall {
namespace {

using ojson = nlohmann::ordered_json;

Status FieldError(const std::string& path, const std::string& what) {
  return InvalidArgument("'" + path + "' " + what);
}

// A value as it appears in a message, cut to a readable length.
std::string Shown(const ojson& v) {
  std::string s = v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

Result<ToolSpec> ParseOneTool(const ojson& tool, const std::string& path) {
  if (!tool.is_object()) return FieldError(path, "must be an object, got " + Shown(tool));
  auto type = tool.find("type");
  if (type == tool.end()) return FieldError(path + ".type", "is required and must be \"function\"");
  if (*type != "function") {
    return FieldError(path + ".type", "must be \"function\", got " + Shown(*type));
  }
  const std::string fpath = path + ".function";
  auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) {
    return FieldError(fpath, "must be an object, got " +
                                 (fn == tool.end() ? std::string("nothing") : Shown(*fn)));
  }
  ToolSpec spec;
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() ||
      !IsValidToolName(name->get_ref<const std::string&>())) {
    return FieldError(fpath + ".name", "must match ^[a-zA-Z0-9_-]{1,64}$, got " +
                                           (name == fn->end() ? std::string("nothing")
                                                              : Shown(*name)));
  }
  spec.name = name->get<std::string>();
  if (auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
    if (!d->is_string()) {
      return FieldError(fpath + ".description", "must be a string, got " + Shown(*d));
    }
    spec.description = d->get<std::string>();
  }
  if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
    if (!p->is_object()) {
      return FieldError(fpath + ".parameters", "must be a JSON Schema object, got " + Shown(*p));
    }
    if (auto t = p->find("type"); t != p->end() && *t != "object") {
      return FieldError(fpath + ".parameters.type",
                        "must be \"object\" (arguments are an object), got " + Shown(*t));
    }
    spec.parameters = *p;
  } else {
    spec.parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};
  }
  if (auto s = fn->find("strict"); s != fn->end() && !s->is_null()) {
    if (!s->is_boolean()) return FieldError(fpath + ".strict", "must be a boolean, got " + Shown(*s));
    spec.strict = s->get<bool>();
  }
  return spec;
}

}  // namespace

bool IsValidToolName(std::string_view name) {
  if (name.empty() || name.size() > kMaxToolNameBytes) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<std::vector<ToolSpec>> ParseTools(const ojson& tools) {
  if (!tools.is_array()) return FieldError("tools", "must be an array, got " + Shown(tools));
  if (tools.size() > kMaxTools) {
    return FieldError("tools", "has " + std::to_string(tools.size()) + " entries; at most " +
                                   std::to_string(kMaxTools));
  }
  const size_t bytes = tools.dump(-1, ' ', false, ojson::error_handler_t::replace).size();
  if (bytes > kMaxToolsBytes) {
    return FieldError("tools", "is " + std::to_string(bytes) + " bytes as JSON; at most " +
                                   std::to_string(kMaxToolsBytes));
  }
  std::vector<ToolSpec> specs;
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = "tools[" + std::to_string(i) + "]";
    Result<ToolSpec> spec = ParseOneTool(tools[i], path);
    if (!spec.ok()) return spec.status();
    auto [it, inserted] = seen.emplace(spec->name, i);
    if (!inserted) {
      return FieldError(path + ".function.name",
                        "\"" + spec->name + "\" duplicates tools[" + std::to_string(it->second) +
                            "].function.name");
    }
    specs.push_back(std::move(spec).value());
  }
  return specs;
}

Result<std::vector<ToolSpec>> ParseTools(const nlohmann::json& tools) {
  return ParseTools(ojson(tools));
}

Result<ToolChoice> ParseToolChoice(const ojson& choice, const std::vector<ToolSpec>& tools) {
  ToolChoice out;
  if (choice.is_null()) {
    out.mode = tools.empty() ? ToolChoice::Mode::kNone : ToolChoice::Mode::kAuto;
    return out;
  }
  if (choice.is_string()) {
    const std::string& s = choice.get_ref<const std::string&>();
    if (s == "auto") {
      out.mode = ToolChoice::Mode::kAuto;
    } else if (s == "none") {
      out.mode = ToolChoice::Mode::kNone;
    } else if (s == "required") {
      if (tools.empty()) return FieldError("tool_choice", "is \"required\" but no tools were given");
      out.mode = ToolChoice::Mode::kRequired;
    } else {
      return FieldError("tool_choice",
                        "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}, got " + Shown(choice));
    }
    return out;
  }
  if (!choice.is_object()) {
    return FieldError("tool_choice", "must be a string or an object, got " + Shown(choice));
  }
  auto type = choice.find("type");
  if (type == choice.end() || *type != "function") {
    return FieldError("tool_choice.type",
                      "must be \"function\", got " +
                          (type == choice.end() ? std::string("nothing") : Shown(*type)));
  }
  auto fn = choice.find("function");
  if (fn == choice.end() || !fn->is_object()) {
    return FieldError("tool_choice.function",
                      "must be an object, got " +
                          (fn == choice.end() ? std::string("nothing") : Shown(*fn)));
  }
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string()) {
    return FieldError("tool_choice.function.name",
                      "must be a string, got " +
                          (name == fn->end() ? std::string("nothing") : Shown(*name)));
  }
  const std::string& n = name->get_ref<const std::string&>();
  bool known = false;
  for (const ToolSpec& t : tools) known = known || t.name == n;
  if (!known) {
    return FieldError("tool_choice.function.name",
                      Shown(*name) + " is not the name of a function in 'tools'");
  }
  out.mode = ToolChoice::Mode::kFunction;
  out.function_name = n;
  return out;
}

Result<ToolChoice> ParseToolChoice(const nlohmann::json& choice,
                                   const std::vector<ToolSpec>& tools) {
  return ParseToolChoice(ojson(choice), tools);
}

std::string ErrorFieldPath(const Status& status) {
  const std::string& m = status.message();
  if (m.empty() || m[0] != '\'') return "";
  const size_t end = m.find('\'', 1);
  return end == std::string::npos ? "" : m.substr(1, end - 1);
}

}  // namespace lifeline::toolcall

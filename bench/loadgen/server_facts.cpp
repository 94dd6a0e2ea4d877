#include "bench/loadgen/server_facts.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace lifeline::loadgen {

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

const nlohmann::json* Find(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string FormatParameterCount(double n) {
  const char* suffix = "";
  double v = n;
  if (n >= 1e12) { v = n / 1e12; suffix = "T"; }
  else if (n >= 1e9) { v = n / 1e9; suffix = "B"; }
  else if (n >= 1e6) { v = n / 1e6; suffix = "M"; }
  else if (n >= 1e3) { v = n / 1e3; suffix = "K"; }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%s", v, suffix);
  return buf;
}

std::string ParametersFromName(const std::string& name) {
  const std::string s = Lower(name);
  for (size_t i = 0; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) continue;
    if (i > 0 && (std::isdigit(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '.')) continue;
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
      ++j;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    }
    if (j < s.size() && (s[j] == 'k' || s[j] == 'm' || s[j] == 'b' || s[j] == 't') &&
        (j + 1 == s.size() || !IsAlnum(s[j + 1]))) {
      return Upper(s.substr(i, j + 1 - i));
    }
  }
  return {};
}

std::string QuantizationFromName(const std::string& name) {
  const std::string s = Lower(name);
  auto at_boundary = [&](size_t i) { return i == 0 || !IsAlnum(s[i - 1]); };
  for (size_t i = 0; i < s.size(); ++i) {
    if (!at_boundary(i)) continue;
    size_t j = i;
    if (s.compare(i, 2, "iq") == 0) j = i + 2;
    else if (s[i] == 'q') j = i + 1;
    if (j > i && j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
      size_t e = j;
      while (e < s.size() && (IsAlnum(s[e]) || s[e] == '_')) ++e;
      return Upper(s.substr(i, e - i));
    }
    for (const char* f : {"bf16", "fp16", "f16", "f32", "fp32"}) {
      const size_t n = std::char_traits<char>::length(f);
      if (s.compare(i, n, f) == 0 && (i + n == s.size() || !IsAlnum(s[i + n]))) {
        return Upper(f);
      }
    }
  }
  return {};
}

ModelFacts FactsFromModelsList(const nlohmann::json& body, const std::string& wanted) {
  ModelFacts f;
  const nlohmann::json* data = Find(body, "data");
  if (data == nullptr || !data->is_array() || data->empty()) return f;
  const nlohmann::json* entry = &(*data)[0];
  for (const nlohmann::json& e : *data) {
    const nlohmann::json* id = Find(e, "id");
    if (!wanted.empty() && id != nullptr && id->is_string() && id->get<std::string>() == wanted) {
      entry = &e;
      break;
    }
  }
  if (const nlohmann::json* id = Find(*entry, "id"); id != nullptr && id->is_string()) {
    f.id = id->get<std::string>();
  }
  f.source = "/v1/models";
  const nlohmann::json* meta = Find(*entry, "meta");
  auto number = [&](const char* key) -> double {
    for (const nlohmann::json* where : {meta, entry}) {
      if (where == nullptr) continue;
      if (const nlohmann::json* v = Find(*where, key); v != nullptr && v->is_number()) {
        return v->get<double>();
      }
    }
    return 0;
  };
  auto text = [&](const char* key) -> std::string {
    for (const nlohmann::json* where : {meta, entry}) {
      if (where == nullptr) continue;
      if (const nlohmann::json* v = Find(*where, key); v != nullptr && v->is_string()) {
        return v->get<std::string>();
      }
    }
    return {};
  };
  if (double n = number("n_params"); n > 0) f.parameters = FormatParameterCount(n);
  if (f.parameters.empty()) f.parameters = text("parameters");
  f.quantization = text("quantization");
  if (f.quantization.empty()) f.quantization = text("ftype");
  for (const char* key : {"context_length", "max_model_len", "n_ctx_train", "n_ctx"}) {
    if (double n = number(key); n > 0) {
      f.context_length = static_cast<int64_t>(n);
      break;
    }
  }
  return f;
}

ModelFacts FactsFromInspectJson(const nlohmann::json& inspect) {
  ModelFacts f;
  f.source = "gguf";
  const nlohmann::json* tensors = Find(inspect, "tensors");
  if (tensors == nullptr || !tensors->is_array()) return f;
  double params = 0;
  std::map<std::string, double> bytes_by_type;
  for (const nlohmann::json& t : *tensors) {
    double n = 1;
    if (const nlohmann::json* shape = Find(t, "shape"); shape != nullptr && shape->is_array()) {
      for (const nlohmann::json& d : *shape) n *= d.is_number() ? d.get<double>() : 0;
    }
    params += n;
    const nlohmann::json* type = Find(t, "type");
    const nlohmann::json* size = Find(t, "size_bytes");
    if (type != nullptr && type->is_string() && size != nullptr && size->is_number()) {
      bytes_by_type[type->get<std::string>()] += size->get<double>();
    }
  }
  if (params > 0) f.parameters = FormatParameterCount(params);
  double best = -1;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > best) {
      best = bytes;
      f.quantization = Upper(type);
    }
  }
  if (const nlohmann::json* meta = Find(inspect, "metadata"); meta != nullptr && meta->is_object()) {
    for (auto it = meta->begin(); it != meta->end(); ++it) {
      if (it.key().ends_with(".context_length") && it->is_number_integer()) {
        f.context_length = it->get<int64_t>();
      }
    }
  }
  return f;
}

HardwareFacts ParseCpuInfo(const std::string& text) {
  HardwareFacts h;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    if (key == "processor") ++h.logical_cores;
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = Trim(line.substr(colon + 1));
  }
  return h;
}

HardwareFacts LocalHardware() {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseCpuInfo(ss.str());
}

std::vector<SloEvent> ParseSloEvents(const nlohmann::json& body, int64_t run_start_unix_ms,
                                     double fetched_at_run_ms) {
  std::vector<SloEvent> out;
  const nlohmann::json* list = body.is_array() ? &body : nullptr;
  for (const char* key : {"events", "degradations"}) {
    if (list == nullptr) {
      if (const nlohmann::json* v = Find(body, key); v != nullptr && v->is_array()) list = v;
    }
  }
  if (list == nullptr) return out;
  auto first_string = [](const nlohmann::json& e, std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      if (const nlohmann::json* v = Find(e, k); v != nullptr && v->is_string()) {
        return v->get<std::string>();
      }
    }
    return std::string();
  };
  for (const nlohmann::json& e : *list) {
    SloEvent ev;
    bool timed = false;
    if (const nlohmann::json* age = Find(e, "age_ms"); age != nullptr && age->is_number()) {
      ev.t_ms = fetched_at_run_ms - age->get<double>();
      timed = true;
    }
    for (const char* k : {"unix_ms", "time_unix_ms", "at_unix_ms", "timestamp_ms"}) {
      if (timed) break;
      if (const nlohmann::json* v = Find(e, k); v != nullptr && v->is_number()) {
        ev.t_ms = v->get<double>() - static_cast<double>(run_start_unix_ms);
        timed = true;
      }
    }
    for (const char* k : {"unix_s", "timestamp"}) {
      if (timed) break;
      if (const nlohmann::json* v = Find(e, k); v != nullptr && v->is_number()) {
        ev.t_ms = v->get<double>() * 1000.0 - static_cast<double>(run_start_unix_ms);
        timed = true;
      }
    }
    if (!timed) continue;
    ev.kind = first_string(e, {"kind", "type", "event", "level"});
    const std::string to = first_string(e, {"to"});
    if (ev.kind.empty() && !to.empty()) {
      const std::string cls = first_string(e, {"class"});
      ev.kind = (cls.empty() ? "" : cls + ": ") + first_string(e, {"from"}) + " -> " + to;
    }
    ev.detail = first_string(e, {"message", "detail", "reason"});
    if (ev.kind.empty()) ev.kind = "event";
    out.push_back(std::move(ev));
  }
  return out;
}

namespace {

HttpExchange Get(const Url& url, const std::string& path, const std::string& api_key,
                 double timeout_s) {
  HttpRequestSpec spec;
  spec.method = "GET";
  spec.url = url;
  spec.path = path;
  spec.timeout_s = timeout_s;
  if (!api_key.empty()) spec.headers.emplace_back("Authorization", "Bearer " + api_key);
  return FetchOnce(std::move(spec));
}

std::string Outcome(const HttpExchange& x) {
  if (x.error.empty()) return "ok";
  if (x.error == "http_status") return "http " + std::to_string(x.http_status);
  return x.error + ": " + x.error_detail;
}

}  // namespace

TargetFacts FetchModelFacts(const Url& url, const std::string& model, const std::string& api_key,
                            double timeout_s, bool* reachable) {
  TargetFacts facts;
  const HttpExchange x = Get(url, "/v1/models", api_key, timeout_s);
  *reachable = x.error != "connect" && x.error != "timeout";
  facts.models_status = Outcome(x);
  facts.slo_status = "not fetched";
  if (x.error.empty()) {
    facts.model = FactsFromModelsList(nlohmann::json::parse(x.body, nullptr, false), model);
  }
  if (facts.model.id.empty()) facts.model.id = model;
  return facts;
}

void FetchSloEvents(const Url& url, const std::string& api_key, double timeout_s,
                    int64_t run_start_unix_ms, TargetFacts* facts) {
  const HttpExchange x = Get(url, "/v1/slo", api_key, timeout_s);
  const int64_t now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  facts->slo_status = Outcome(x);
  if (x.error.empty()) {
    facts->slo_events = ParseSloEvents(nlohmann::json::parse(x.body, nullptr, false),
                                       run_start_unix_ms,
                                       static_cast<double>(now_unix_ms - run_start_unix_ms));
  }
}

}  // namespace lifeline::loadgen

#include "grammar/grammar_test_util.h"

#include <cmath>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline::grammar::testing {

std::shared_ptr<const GrammarVocab> ByteVocab() {
  static const std::shared_ptr<const GrammarVocab> v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    t.push_back("");
    auto r = GrammarVocab::Build(std::move(t), {kByteEog});
    return r.ok() ? *r : nullptr;
  }();
  return v;
}

RealVocab LoadGgufVocab(const std::string& path) {
  RealVocab out;
  auto file = GgufFile::Open(path);
  if (!file.ok()) return out;
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return out;
  for (int32_t id = 0; id < (*tok)->n_vocab(); ++id) {
    out.pieces.push_back((*tok)->TokenToPiece(id));
    if ((*tok)->IsEndOfGeneration(id)) out.eog.push_back(id);
  }
  auto v = GrammarVocab::Build(out.pieces, out.eog);
  if (v.ok()) out.vocab = *v;
  return out;
}

std::shared_ptr<const Grammar> MustParse(std::string_view gbnf, const GrammarLimits& limits) {
  auto g = ParseGbnf(gbnf, limits);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<const Grammar> SchemaGrammar(const std::string& schema_json,
                                             const JsonSchemaOptions& opts) {
  auto text = JsonSchemaTextToGbnf(schema_json, opts);
  EXPECT_TRUE(text.ok()) << text.status().ToString() << "\n" << schema_json;
  if (!text.ok()) return nullptr;
  return MustParse(*text);
}

bool IsPrefix(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  GrammarMatcher m(g, ByteVocab());
  return m.AcceptBytes(text).ok();
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  GrammarMatcher m(g, ByteVocab());
  return m.AcceptBytes(text).ok() && m.CanEnd();
}

namespace {
double ByteWeight(uint8_t b, size_t len) {
  const double growth = 1.0 + static_cast<double>(len) / 8.0;
  if (b == '"' || b == ']' || b == '}') return 2.0 * growth;
  if (b == ',' || b == '[' || b == '{') return 1.0 / growth;
  if (b == ' ' || b == '\n' || b == '\t') return 0.15;
  if (b == '\\') return 0.3;
  if (b >= 0x80) return 0.04;  // some UTF-8, and always the continuation bytes when needed
  if (b < 0x20 || b == 0x7F) return 0.05;
  return 1.0;
}
}  // namespace

Generated RandomSentence(const std::shared_ptr<const Grammar>& g, std::mt19937* rng,
                         size_t max_bytes) {
  Generated out;
  GrammarMatcher m(g, ByteVocab());
  std::vector<uint8_t> allowed;
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  while (out.text.size() < max_bytes) {
    if (m.CanEnd() && (m.MustEnd() || uni(*rng) < 0.5)) {
      out.ok = true;
      return out;
    }
    m.FillAllowed(&allowed);
    double total = 0;
    for (int b = 0; b < 256; ++b) total += allowed[b] ? ByteWeight(b, out.text.size()) : 0;
    if (total == 0) return out;  // stuck: cannot happen for a well-formed grammar
    double r = uni(*rng) * total;
    int pick = -1;
    for (int b = 0; b < 256; ++b) {
      if (!allowed[b]) continue;
      pick = b;
      r -= ByteWeight(b, out.text.size());
      if (r <= 0) break;
    }
    if (!m.Accept(pick).ok()) return out;
    out.text += static_cast<char>(pick);
  }
  return out;
}

namespace {

using OJson = nlohmann::ordered_json;

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool TypeOk(const std::string& t, const nlohmann::json& v) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

const OJson* Resolve(const OJson& root, const std::string& ref) {
  const OJson* cur = &root;
  if (ref == "#") return cur;
  size_t pos = 2;
  while (pos <= ref.size()) {
    size_t slash = ref.find('/', pos);
    std::string key = ref.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    cur = &(*cur)[key];
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return cur;
}

std::string Check(const OJson& root, const OJson& s, const nlohmann::json& v,
                  const std::string& at) {
  if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
  if (s.contains("$ref")) {
    const OJson* t = Resolve(root, s["$ref"].get<std::string>());
    if (!t) return at + ": unresolved ref";
    return Check(root, *t, v, at);
  }
  if (s.contains("enum")) {
    bool found = false;
    for (const OJson& e : s["enum"]) found = found || nlohmann::json::parse(e.dump()) == v;
    if (!found) return at + ": not in enum";
  }
  if (s.contains("const") && nlohmann::json::parse(s["const"].dump()) != v) return at + ": not const";
  if (s.contains("anyOf")) {
    bool any = false;
    for (const OJson& alt : s["anyOf"]) any = any || Check(root, alt, v, at).empty();
    if (!any) return at + ": no anyOf branch";
  }
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = TypeOk(s["type"].get<std::string>(), v);
    for (const OJson& t : s["type"].is_array() ? s["type"] : OJson::array())
      ok = ok || TypeOk(t.get<std::string>(), v);
    if (!ok) return at + ": wrong type for " + v.dump();
  }
  if (v.is_object()) {
    const OJson props = s.value("properties", OJson::object());
    for (const OJson& r : s.value("required", OJson::array()))
      if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        std::string e = Check(root, props[it.key()], it.value(), at + "." + it.key());
        if (!e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        const OJson& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) return at + ": extra property " + it.key();
        if (ap.is_object()) {
          std::string e = Check(root, ap, it.value(), at + "." + it.key());
          if (!e.empty()) return e;
        }
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": too many items";
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) {
        std::string e = Check(root, s["items"], v[i], at + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return at + ": below minimum";
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return at + ": above maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
      return at + ": not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>())
      return at + ": not below exclusiveMaximum";
  }
  if (v.is_string()) {
    size_t n = CodePoints(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": too short";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": too long";
  }
  return "";
}

}  // namespace

std::string ValidateSchema(const nlohmann::ordered_json& schema, const nlohmann::json& doc) {
  return Check(schema, schema, doc, "$");
}

}  // namespace lifeline::grammar::testing

// Helpers shared by the jinja interpreter tests (tests/template/jinja_*_test.cpp).
#pragma once

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/template/jinja.h"

namespace lifeline::jinja {

// Globals keep their insertion order, as Python dicts do (the interpreter takes ordered_json).
using Json = nlohmann::ordered_json;

// tests/template/data: the real templates, conversations and jinja2's renderings.
inline std::filesystem::path TemplateDataDir() {
  return std::filesystem::path(LIFELINE_TESTS_DIR) / "template" / "data";
}

// A whole file, bytes as they are ("" if unreadable).
inline std::string ReadFileBytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Globals written as JSON text.
inline Json J(std::string_view text) { return Json::parse(text); }

// A small system/user/assistant conversation several tests share.
inline Json ThreeMessages() {
  return J(R"({"messages": [{"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "Hi"},
                            {"role": "assistant", "content": "Hello."}]})");
}

// 2024-07-26T12:00:00Z, the instant the reference strftime_now formats.
inline Clock FixedClock() {
  return [] { return std::chrono::system_clock::time_point(std::chrono::seconds(1721995200)); };
}

// Parses with `options` and renders; a failure at either step is a test failure, and the
// returned text then names it so the EXPECT_EQ around the call also fails.
inline std::string RenderWith(std::string_view tmpl, const Json& globals,
                              const ParseOptions& options, const Clock& clock = {}) {
  Result<Template> t = Template::Parse(tmpl, options);
  if (!t.ok()) {
    ADD_FAILURE() << "Parse failed: " << t.status().ToString() << "\n  template: " << tmpl;
    return "<parse failed: " + t.status().ToString() + ">";
  }
  Result<std::string> out = t->Render(globals, RenderLimits{}, clock);
  if (!out.ok()) {
    ADD_FAILURE() << "Render failed: " << out.status().ToString() << "\n  template: " << tmpl;
    return "<render failed: " + out.status().ToString() + ">";
  }
  return out.value();
}

// Default ParseOptions (trim_blocks and lstrip_blocks on, as Hugging Face configures jinja2).
inline std::string R(std::string_view tmpl, const Json& globals = Json::object()) {
  return RenderWith(tmpl, globals, ParseOptions{});
}

// trim_blocks and lstrip_blocks both off (plain jinja2 defaults).
inline std::string RNoOpts(std::string_view tmpl, const Json& globals = Json::object()) {
  ParseOptions options;
  options.trim_blocks = false;
  options.lstrip_blocks = false;
  return RenderWith(tmpl, globals, options);
}

// Renders with the clock fixed at 2024-07-26T12:00:00Z.
inline std::string RAt(std::string_view tmpl, const Json& globals = Json::object()) {
  return RenderWith(tmpl, globals, ParseOptions{}, FixedClock());
}

// The status of a Parse that must fail (Ok, plus a test failure, when it parses).
inline Status ParseError(std::string_view tmpl) {
  Result<Template> t = Template::Parse(tmpl);
  if (t.ok()) {
    ADD_FAILURE() << "Parse unexpectedly succeeded\n  template: " << tmpl;
    return Status::Ok();
  }
  return t.status();
}

// The status of a Render that must fail after a successful Parse.
inline Status RenderError(std::string_view tmpl, const Json& globals = Json::object(),
                          const RenderLimits& limits = {}) {
  Result<Template> t = Template::Parse(tmpl);
  if (!t.ok()) {
    ADD_FAILURE() << "Parse failed (expected a render failure): " << t.status().ToString()
                  << "\n  template: " << tmpl;
    return t.status();
  }
  Result<std::string> out = t->Render(globals, limits);
  if (out.ok()) {
    ADD_FAILURE() << "Render unexpectedly succeeded with \"" << out.value().substr(0, 200)
                  << "\"\n  template: " << tmpl;
    return Status::Ok();
  }
  return out.status();
}

// The status of whichever of Parse or Render fails (jinja2 itself reports some errors, such
// as an unknown filter, when compiling; an interpreter may find them at either step).
inline Status AnyError(std::string_view tmpl, const Json& globals = Json::object(),
                       const RenderLimits& limits = {}) {
  Result<Template> t = Template::Parse(tmpl);
  if (!t.ok()) return t.status();
  Result<std::string> out = t->Render(globals, limits);
  if (out.ok()) {
    ADD_FAILURE() << "Parse and Render unexpectedly succeeded with \""
                  << out.value().substr(0, 200) << "\"\n  template: " << tmpl;
    return Status::Ok();
  }
  return out.status();
}

// Whether s's message names template line `line` ("line 3", not "line 30").
inline ::testing::AssertionResult HasLine(const Status& s, int line) {
  const std::string needle = "line " + std::to_string(line);
  const std::string& m = s.message();
  for (size_t at = m.find(needle); at != std::string::npos; at = m.find(needle, at + 1)) {
    size_t end = at + needle.size();
    if (end == m.size() || !std::isdigit(static_cast<unsigned char>(m[end]))) {
      return ::testing::AssertionSuccess();
    }
  }
  return ::testing::AssertionFailure() << "expected \"" << needle << "\" in: " << s.ToString();
}

// Whether s's message contains `word`, ignoring ASCII case.
inline ::testing::AssertionResult Mentions(const Status& s, std::string_view word) {
  auto lower = [](std::string_view v) {
    std::string r(v);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
  };
  if (lower(s.message()).find(lower(word)) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected \"" << word << "\" in: " << s.ToString();
}

}  // namespace lifeline::jinja

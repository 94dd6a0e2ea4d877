// JsonScanner against nlohmann::json::accept (an independent JSON parser) on hand-picked
// texts and on random values with random one-byte edits.
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/toolcall/json_scanner.h"

namespace lifeline::toolcall {
namespace {

// Feeds all of `s`; true when the value ends exactly at the last byte or only whitespace
// follows (what nlohmann::json::accept calls valid).
bool ScannerAccepts(const std::string& s) {
  JsonScanner scanner(/*allow_array=*/true, 64);
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (scanner.Feed(s[i]) != JsonScanner::State::kRunning) break;
  }
  if (scanner.state() != JsonScanner::State::kDone) return false;
  for (++i; i < s.size(); ++i) {
    if (s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r') return false;
  }
  return true;
}

TEST(JsonScanner, HandPicked) {
  for (const char* ok : {"{}", "[]", "{\"a\":1}", "[1,2.5,-0,1e5,1E+2,0.1e-3,true,false,null]",
                         "{\"a\" : [ {\"b\" : \"}\"} ] , \"c\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"}",
                         "[[[[[]]]]]", "[ ] \n"}) {
    EXPECT_TRUE(ScannerAccepts(ok)) << ok;
    EXPECT_TRUE(nlohmann::json::accept(ok)) << ok;
  }
  for (const char* bad : {"{", "[1,]", "{\"a\"}", "{\"a\":}", "{a:1}", "[01]", "[1.]", "[.5]",
                          "[1e]", "[-]", "[tru]", "[nul]", "{\"a\":1,}", "[\"\\x\"]",
                          "[\"\\u12g4\"]", "[\"a\nb\"]", "{}}", "[1 2]", "{\"a\" 1}", "[+1]"}) {
    EXPECT_FALSE(ScannerAccepts(bad)) << bad;
    EXPECT_FALSE(nlohmann::json::accept(bad)) << bad;  // the reference agrees
  }
  // Depth cap.
  JsonScanner shallow(true, 3);
  EXPECT_EQ(shallow.Feed('['), JsonScanner::State::kRunning);
  EXPECT_EQ(shallow.Feed('['), JsonScanner::State::kRunning);
  EXPECT_EQ(shallow.Feed('['), JsonScanner::State::kRunning);
  EXPECT_EQ(shallow.Feed('['), JsonScanner::State::kError);
  // Objects only unless arrays are allowed; nothing after the end.
  JsonScanner objects_only;
  EXPECT_EQ(objects_only.Feed('['), JsonScanner::State::kError);
  JsonScanner done;
  done.Feed('{');
  EXPECT_EQ(done.Feed('}'), JsonScanner::State::kDone);
  EXPECT_EQ(done.Feed(' '), JsonScanner::State::kError);
}

std::string RandomValue(std::mt19937& rng, int depth) {
  static const char* kAtoms[] = {"0", "-12", "3.25", "1e9", "-0.5E-2", "true", "false", "null",
                                 "\"\"", "\"a b\"", "\"\\\"q\\\"\"", "\"\\u00e9\\n\"", "\"}]\""};
  const int pick = depth > 4 ? 0 : static_cast<int>(rng() % 4);
  if (pick == 0) return kAtoms[rng() % (sizeof(kAtoms) / sizeof(kAtoms[0]))];
  const bool object = pick == 1;
  std::string s = object ? "{" : "[";
  const int n = static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    if (i) s += rng() % 2 ? "," : " , ";
    if (object) s += "\"k" + std::to_string(i) + "\"" + (rng() % 2 ? ":" : " : ");
    s += RandomValue(rng, depth + 1);
  }
  return s + (object ? "}" : "]");
}

TEST(JsonScanner, AgreesWithNlohmannOnRandomEdits) {
  std::mt19937 rng(1234);
  // No 'd' / 'D': a random \u escape can then never be a lone surrogate, which only
  // nlohmann checks.
  const std::string alphabet = "{}[]\",:0123456789-+.eEtrufalsn \\/bx\n";
  int valid = 0, invalid = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const bool object = rng() % 2;
    std::string s = std::string(object ? "{\"v\":" : "[") + RandomValue(rng, 0) + (object ? "}" : "]");
    const int edits = static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng() % s.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: s[at] = c; break;
        case 1: s.insert(s.begin() + at, c); break;
        default: s.erase(at, 1); break;
      }
    }
    if (s.empty() || (s[0] != '{' && s[0] != '[')) continue;
    // A number too large for a double is valid syntax that nlohmann refuses (out_of_range
    // 406); the scanner checks syntax only, the parser's nlohmann pass refuses it later.
    try {
      const nlohmann::json parsed = nlohmann::json::parse(s);
      (void)parsed;
    } catch (const nlohmann::json::out_of_range&) {
      continue;
    } catch (const nlohmann::json::exception&) {
    }
    const bool ref = nlohmann::json::accept(s);
    ASSERT_EQ(ScannerAccepts(s), ref) << s;
    (ref ? valid : invalid)++;
  }
  EXPECT_GT(valid, 5000);
  EXPECT_GT(invalid, 5000);
}

}  // namespace
}  // namespace lifeline::toolcall

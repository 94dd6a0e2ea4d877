// libFuzzer harness for the grammar engine (not part of the default build; the test suite runs
// a deterministic mutation pass, tests/grammar/grammar_limits_test.cpp).
//
// Build and run from the repository root, e.g.:
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -I. tests/fuzz/grammar_fuzz.cpp text/grammar/*.cpp base/status.cpp -o grammar_fuzz
//   ./grammar_fuzz -max_len=8192 -rss_limit_mb=512 -malloc_limit_mb=256 -timeout=5 \
//     tests/fuzz/grammar_corpus/
// Input: the first byte chooses the mode, the rest is the text.
//   'j': JSON Schema text -> JsonSchemaToGbnf -> ParseGbnf;  anything else: GBNF -> ParseGbnf.
// A compiled grammar then drives a matcher over a small vocabulary (single bytes, multi-byte
// pieces, partial UTF-8) for a few steps, picking allowed tokens with bytes of the input.
// Invariants (abort when violated): failures carry a message; every token the mask allows is
// accepted or refused only for a cap (ResourceExhausted); a refused token leaves the mask as it
// was; EOG is allowed exactly when CanEnd().
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/grammar/grammar.h"
#include "text/grammar/grammar_matcher.h"
#include "text/grammar/json_schema.h"

namespace {

using namespace lifeline::grammar;

std::shared_ptr<const GrammarVocab> FuzzVocab() {
  static const std::shared_ptr<const GrammarVocab> v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"\"", "\":", "\",", "{\"", "}", "]", "true", "null", " \"", "12", "\\n",
                          "\xE4\xB8", "\x80", "\xC3\xA9", "ab", "a\"", ""})
      t.push_back(p);
    const int32_t eog = static_cast<int32_t>(t.size()) - 1;
    return *GrammarVocab::Build(std::move(t), {eog});
  }();
  return v;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char mode = static_cast<char>(data[0]);
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  GrammarLimits limits;
  limits.max_states = 1 << 15;
  limits.max_repetition = 200;
  // ASan makes compiling ~20x slower; a smaller work budget (~25 ms here, ~0.5 s under ASan)
  // keeps one input well under the harness's 5 s timeout on a busy machine (the default budget
  // is checked in GrammarLimits.CompileWorkIsCapped).
  limits.max_compile_work = int64_t{1} << 20;
  std::string gbnf(text);
  if (mode == 'j') {
    JsonSchemaOptions opts;
    opts.max_repetition = 50;
    opts.max_grammar_bytes = 1 << 16;
    auto r = JsonSchemaTextToGbnf(text, opts);
    if (!r.ok()) {
      Check(!r.status().message().empty());
      return 0;
    }
    gbnf = *r;
  }
  auto g = ParseGbnf(gbnf, limits);
  if (!g.ok()) {
    Check(!g.status().message().empty());
    return 0;
  }
  auto vocab = FuzzVocab();
  const int32_t eog = vocab->n_vocab() - 1;
  GrammarMatcher m(*g, vocab);
  if (!m.status().ok()) return 0;
  std::vector<uint8_t> mask, again;
  for (size_t step = 0; step < 24; ++step) {
    m.FillAllowed(&mask);
    Check(mask[eog] == (m.CanEnd() ? 1 : 0));
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < eog; ++id)
      if (mask[id]) allowed.push_back(id);
    // A refused token leaves the state unchanged.
    for (int32_t id = 0; id < eog; ++id) {
      if (mask[id]) continue;
      Check(!m.IsAllowed(id));
      Check(!m.Accept(id).ok());
      break;
    }
    m.FillAllowed(&again);
    Check(again == mask);
    if (allowed.empty()) break;
    const int32_t pick = allowed[data[step % size] % allowed.size()];
    lifeline::Status s = m.Accept(pick);
    Check(s.ok() || s.code() == lifeline::StatusCode::kResourceExhausted);
    if (!s.ok()) break;
  }
  return 0;
}

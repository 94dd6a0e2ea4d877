// The tokenizer test vectors recorded from llama.cpp (../shared/reference/tokenizer): every
// input must give exactly the recorded ids (no BOS, no special parsing), and decoding must
// give the input back.
#include <gtest/gtest.h>

#include "test_paths.h"
#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

using testing::IdsToString;
using testing::Printable;

struct Vectors {
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> expected;
};

Vectors LoadVectors(const std::string& name) {
  const std::string base = "reference/tokenizer/ggml-vocab-" + name + ".gguf";
  Vectors v;
  v.tok = testing::LoadSharedTokenizer(base);
  v.inputs = testing::ParseVocabInputs(testing::ReadFileOrDie(lifeline::testing::SharedPath(base + ".inp")));
  v.expected = testing::ParseVocabOutputs(testing::ReadFileOrDie(lifeline::testing::SharedPath(base + ".out")));
  return v;
}

class VocabVectorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectorTest, EveryInputGivesTheRecordedIds) {
  Vectors v = LoadVectors(GetParam());
  ASSERT_NE(v.tok, nullptr);
  // The files hold 46 cases each; a parse that finds fewer would make the test vacuous.
  ASSERT_EQ(v.inputs.size(), 46u);
  ASSERT_EQ(v.inputs.size(), v.expected.size());
  std::string report;
  int mismatches = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const std::vector<int32_t> got = v.tok->Encode(v.inputs[i], /*add_bos=*/false, /*parse_special=*/false);
    if (got != v.expected[i]) {
      ++mismatches;
      report += "\n  #" + std::to_string(i) + " input \"" + Printable(v.inputs[i]) + "\"\n    got      [" +
                IdsToString(got) + "]\n    expected [" + IdsToString(v.expected[i]) + "]";
    }
  }
  EXPECT_EQ(mismatches, 0) << GetParam() << ": " << mismatches << " of " << v.inputs.size()
                           << " inputs differ:" << report;
}

TEST_P(VocabVectorTest, DecodeGivesTheInputBack) {
  Vectors v = LoadVectors(GetParam());
  ASSERT_NE(v.tok, nullptr);
  std::string report;
  for (const std::string& input : v.inputs) {
    const std::string decoded = v.tok->Decode(v.tok->Encode(input, false, false));
    // SentencePiece vocabs add one space in front of the text (documented in tokenizer.h).
    const std::string want = (v.tok->add_space_prefix() && !input.empty()) ? " " + input : input;
    if (decoded != want) report += "\n  \"" + Printable(input) + "\" -> \"" + Printable(decoded) + "\"";
  }
  EXPECT_TRUE(report.empty()) << GetParam() << ":" << report;
}

INSTANTIATE_TEST_SUITE_P(Reference, VocabVectorTest,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-llm", "falcon", "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST(VocabVectorFiles, ModelAndPreTokenizerAreTheOnesUnderTest) {
  // Guards against a vocab silently falling back to another pre-tokenizer.
  const std::pair<const char*, const char*> cases[] = {
      {"llama-spm", "llama"}, {"gpt-2", "gpt2"}, {"deepseek-llm", "gpt2"}, {"falcon", "gpt2"}, {"starcoder", "gpt2"}};
  for (const auto& [name, model] : cases) {
    auto tok = testing::LoadSharedTokenizer(std::string("reference/tokenizer/ggml-vocab-") + name + ".gguf");
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->model_name(), model) << name;
    if (std::string_view(model) == "gpt2") {
      EXPECT_EQ(tok->pre_name(), name) << name;
    }
  }
}

}  // namespace
}  // namespace lifeline

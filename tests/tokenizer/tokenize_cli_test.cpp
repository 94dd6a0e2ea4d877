// `lifeline tokenize`: runs the real binary on vector-file inputs and compares its stdout
// with the ids llama.cpp recorded; errors give one stderr line and exit status 1.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "test_paths.h"
#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

RunResult RunTokenize(const std::string& args, const std::string& stdin_text, const std::string& tag) {
  const std::string dir = ::testing::TempDir();
  // The pid keeps parallel test processes' files apart.
  const std::string stem = dir + "/lifeline_tok_cli_" + std::to_string(::getpid()) + "_" + tag;
  const std::string in = stem + ".in";
  const std::string out = stem + ".out";
  const std::string err = stem + ".err";
  std::ofstream(in, std::ios::binary) << stdin_text;
  const std::string cmd = Quote(lifeline::testing::LifelineBinary()) + " tokenize " + args + " < " + Quote(in) +
                          " > " + Quote(out) + " 2> " + Quote(err);
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = testing::ReadFileOrDie(out);
  r.err = testing::ReadFileOrDie(err);
  return r;
}

TEST(TokenizeCli, MatchesReferenceVectors) {
  for (const char* name : {"llama-spm", "gpt-2"}) {
    const std::string base = lifeline::testing::SharedPath(std::string("reference/tokenizer/ggml-vocab-") + name + ".gguf");
    const auto inputs = testing::ParseVocabInputs(testing::ReadFileOrDie(base + ".inp"));
    const auto expected = testing::ParseVocabOutputs(testing::ReadFileOrDie(base + ".out"));
    ASSERT_EQ(inputs.size(), expected.size());
    // A few inputs with spaces, newlines, multi-byte text and an empty one.
    for (size_t i : {size_t{2}, size_t{8}, size_t{12}, size_t{20}, inputs.size() - 5}) {
      ASSERT_LT(i, inputs.size());
      const RunResult r = RunTokenize("-m " + Quote(base) + " --no-bos --no-special", inputs[i],
                                      std::string(name) + "_" + std::to_string(i));
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, testing::IdsToString(expected[i]) + "\n")
          << name << " input #" << i << " \"" << testing::Printable(inputs[i]) << "\"";
    }
  }
}

TEST(TokenizeCli, AddsBosByDefaultAndParsesSpecialText) {
  const std::string model = Quote(lifeline::testing::SharedPath("models/stories260K.gguf"));
  RunResult r = RunTokenize("-m " + model, "Once upon a time", "bos");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 403 407 261 378\n");
  r = RunTokenize("-m " + model + " --no-bos", "<s>Once", "special");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 403\n");
  r = RunTokenize("-m " + model + " --no-bos --no-special", "<s>", "nospecial");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("1 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.rfind('\n'), std::string::npos);
}

TEST(TokenizeCli, ErrorsAreOneLineAndExitOne) {
  RunResult r = RunTokenize("-m /nonexistent/model.gguf", "hi", "missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;

  // A file that is not GGUF at all.
  const std::string junk = ::testing::TempDir() + "/lifeline_tok_cli_junk_" + std::to_string(::getpid()) + ".gguf";
  std::ofstream(junk, std::ios::binary) << "definitely not a gguf file";
  r = RunTokenize("-m " + Quote(junk), "hi", "junk");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace
}  // namespace lifeline

// The make-model and quantize subcommands through the real binary: exit codes and the one-line
// errors that name the flag.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "test_paths.h"
#include "modelgen/modelgen_test_util.h"

namespace lifeline {
namespace {

struct CliResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Runs `lifeline ARGS`, capturing stderr (stdout discarded).
CliResult RunCli(const std::string& args) {
  const std::string cmd = testing::LifelineBinary() + " " + args + " 2>&1 >/dev/null";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) r.stderr_text += buf.data();
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kTiny = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 ";

void ExpectFlagError(const std::string& args, const std::string& needle) {
  const CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(needle), std::string::npos) << args << "\n" << r.stderr_text;
  // One line.
  EXPECT_EQ(r.stderr_text.find('\n'), r.stderr_text.size() - 1) << r.stderr_text;
}

TEST(ToolsCli, MakeModelWritesALoadableFile) {
  const std::string out = testing::ScratchPath("cli.gguf");
  const CliResult r = RunCli("make-model " + kTiny + "--type q8_0 --seed 3 -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto f = GgufFile::Open(out);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->GetUint("general.file_type").value(), 7u);
  std::remove(out.c_str());
}

TEST(ToolsCli, MakeModelFlagErrors) {
  const std::string o = " --seed 1 -o " + testing::ScratchPath("x.gguf");
  ExpectFlagError("make-model " + kTiny + "--type q4_9" + o, "--type 'q4_9' is not one of");
  ExpectFlagError("make-model --dim 64 --layers 2 --heads 5 --ffn 128 --type f32" + o,
                  "--heads 5 does not divide --dim 64");
  ExpectFlagError("make-model --dim 64 --layers 2 --heads 8 --kv-heads 3 --ffn 128 --type f32" + o,
                  "--kv-heads 3 does not divide --heads 8");
  ExpectFlagError("make-model --dim 48 --layers 2 --heads 4 --ffn 128 --type q4_0" + o,
                  "--dim 48 must be a multiple of 32");
  ExpectFlagError("make-model --dim abc --layers 2 --heads 4 --ffn 128 --type f32" + o,
                  "--dim 'abc' is not an integer");
  ExpectFlagError("make-model --layers 2 --heads 4 --ffn 128 --type f32" + o, "--dim is required");
  ExpectFlagError("make-model " + kTiny + "--type f32 -o /tmp/x.gguf", "--seed is required");
  ExpectFlagError("make-model " + kTiny + "--type f32 --seed 1", "-o is required");
  ExpectFlagError("make-model " + kTiny + "--type f32 --rope-base -5" + o, "--rope-base");
  ExpectFlagError("make-model " + kTiny + "--type f32 --threads 0" + o, "--threads 0");
  ExpectFlagError("make-model " + kTiny + "--vocab-from a.gguf --type f32" + o,
                  "--vocab and --vocab-from exclude each other");
}

TEST(ToolsCli, MakeModelUnwritableOutputExits1) {
  const CliResult r =
      RunCli("make-model " + kTiny + "--type f32 --seed 1 -o /nonexistent-dir/x.gguf");
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("/nonexistent-dir/x.gguf"), std::string::npos) << r.stderr_text;
}

TEST(ToolsCli, Quantize) {
  const std::string in = testing::SharedPath("reference/models/syn-a-f32.gguf");
  const std::string out = testing::ScratchPath("cli-q.gguf");
  CliResult r = RunCli("quantize " + in + " " + out + " --type q4_k_m --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto f = GgufFile::Open(out);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->GetUint("general.file_type").value(), 15u);

  // Requantizing works and warns once.
  const std::string out2 = testing::ScratchPath("cli-q2.gguf");
  r = RunCli("quantize " + out + " " + out2 + " --type q8_0");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  size_t n_warn = 0;
  for (size_t at = 0; (at = r.stderr_text.find("warning:", at)) != std::string::npos; ++at) {
    ++n_warn;
  }
  EXPECT_EQ(n_warn, 1u) << r.stderr_text;

  ExpectFlagError("quantize " + in + " " + out + " --type q9", "--type 'q9'");
  ExpectFlagError("quantize " + in + " " + out, "--type is required");
  ExpectFlagError("quantize " + in + " --type q4_0", "OUT");

  r = RunCli("quantize /nonexistent-dir/in.gguf " + out + " --type q4_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("/nonexistent-dir/in.gguf"), std::string::npos) << r.stderr_text;
  std::remove(out.c_str());
  std::remove(out2.c_str());
}

}  // namespace
}  // namespace lifeline

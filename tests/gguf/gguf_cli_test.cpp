// `lifeline inspect` run as a process: exit status and output on a valid and a corrupt file.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

struct RunResult {
  int exit_code = -1;  // -1 when the process did not exit normally (signal)
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  const std::vector<uint8_t> b = testing::ReadFileBytes(path);
  return std::string(b.begin(), b.end());
}

RunResult RunInspect(const std::string& args) {
  const std::string out_path = testing::TempPath("out.txt");
  const std::string err_path = testing::TempPath("err.txt");
  const std::string cmd = "'" + lifeline::testing::LifelineBinary() + "' inspect " + args +
                          " >'" + out_path + "' 2>'" + err_path + "'";
  const int status = std::system(cmd.c_str());
  RunResult r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = Slurp(out_path);
  r.err = Slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

TEST(GgufCli, InspectPrintsAValidModel) {
  const RunResult r = RunInspect("'" + lifeline::testing::SharedPath("models/stories260K.gguf") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("GGUF version 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data offset 14176"), std::string::npos);
  EXPECT_NE(r.out.find("19 metadata keys"), std::string::npos);
  EXPECT_NE(r.out.find("48 tensors"), std::string::npos);
  EXPECT_NE(r.out.find("[string x 512]"), std::string::npos);
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
}

TEST(GgufCli, InspectJsonIsOneObject) {
  const RunResult r =
      RunInspect("--json '" + lifeline::testing::SharedPath("models/stories260K.gguf") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 200);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["alignment"], 32);
  EXPECT_EQ(j["metadata"].size(), 19u);
  EXPECT_EQ(j["metadata"]["llama.embedding_length"], 64);
  EXPECT_EQ(j["metadata"]["general.architecture"], "llama");
  const auto& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(tokens["count"], 512);
  ASSERT_EQ(tokens["values"].size(), 16u);
  EXPECT_EQ(tokens["values"][1], "<s>");
  ASSERT_EQ(j["tensors"].size(), 48u);
  const auto& t0 = j["tensors"][0];
  EXPECT_EQ(t0["name"], "token_embd.weight");
  EXPECT_EQ(t0["type"], "f32");
  EXPECT_EQ(t0["shape"], nlohmann::json::array({64, 512}));
  EXPECT_EQ(t0["size_bytes"], 64 * 512 * 4);
}

TEST(GgufCli, InspectRejectsACorruptFileWithOneLine) {
  std::vector<uint8_t> bytes = testing::WriteSmallWithWriter();
  testing::PatchU32(&bytes, testing::BuildSmallRaw().at("t0.ndims"), 5);
  const std::string path = testing::TempPath("corrupt.gguf");
  testing::WriteFileBytes(path, bytes);
  const RunResult r = RunInspect("'" + path + "'");
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.rfind("lifeline inspect: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("n_dims 5"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "expected exactly one line: " << r.err;
}

TEST(GgufCli, InspectRejectsAMissingFile) {
  const RunResult r = RunInspect("/nonexistent/x.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("lifeline inspect: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace lifeline

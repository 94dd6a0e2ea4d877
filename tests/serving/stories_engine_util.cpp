#include "stories_engine.h"

#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace lifeline::testing {

std::unique_ptr<LlamaModel> LoadTestModel(const std::string& path, std::unique_ptr<Tokenizer>* tok) {
  auto file = GgufFile::Open(path, GgufOpenOptions{});
  EXPECT_TRUE(file.ok()) << path << ": " << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto t = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return nullptr;
  auto model = LlamaModel::Load(std::move(file).value(), ReferenceKernels());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  *tok = std::move(t).value();
  return std::move(model).value();
}

std::unique_ptr<serving::ModelEngine> MakeStoriesEngine(serving::ModelEngineOptions o) {
  std::unique_ptr<Tokenizer> tok;
  auto model = LoadTestModel(lifeline::testing::SharedPath("models/stories260K.gguf"), &tok);
  if (model == nullptr) return nullptr;
  o.threads = 1;
  o.kv_memory_bytes = 8ull << 20;
  auto engine = serving::ModelEngine::Create(std::move(model), std::move(tok), o);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

}  // namespace lifeline::testing

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

std::unique_ptr<serving::ModelEngine> MakeStoriesEngine(serving::ModelEngineOptions o) {
  const std::string path = lifeline::testing::SharedPath("models/stories260K.gguf");
  auto file = GgufFile::Open(path, GgufOpenOptions{});
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  auto model = LlamaModel::Load(std::move(file).value(), ReferenceKernels());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!tok.ok() || !model.ok()) return nullptr;
  o.threads = 1;
  o.kv_memory_bytes = 8ull << 20;
  auto engine = serving::ModelEngine::Create(std::move(model).value(), std::move(tok).value(), o);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

}  // namespace lifeline::testing

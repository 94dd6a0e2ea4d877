// A ModelEngine over the shared stories260K model with the reference kernels and a small KV
// pool, for serving tests that need a real (tiny) model behind the engine loop.
#pragma once

#include <memory>
#include <string>

#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/model_engine.h"

namespace lifeline::testing {

// Adds a gtest failure and returns nullptr when the model cannot be loaded. `o.name`,
// `o.max_running`, `o.max_step_tokens` and `o.chat_template` are the caller's; threads,
// and the KV pool size are set here (1 thread, 8 MiB).
std::unique_ptr<serving::ModelEngine> MakeStoriesEngine(serving::ModelEngineOptions o);

// The GGUF at `path` as a model on the reference kernels, and its tokenizer in *tok; adds a
// gtest failure and returns nullptr when either cannot be loaded.
std::unique_ptr<LlamaModel> LoadTestModel(const std::string& path, std::unique_ptr<Tokenizer>* tok);

}  // namespace lifeline::testing

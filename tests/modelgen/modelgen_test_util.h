// Helpers shared by the tools tests: scratch paths, whole-file reads, dequantized tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"

namespace lifeline::testing {

// A fresh path under the test temp dir (unique per process and call); the file isn't created.
std::string ScratchPath(const std::string& stem);
// Whole file contents; empty when unreadable.
std::vector<uint8_t> ReadAll(const std::string& path);
// Every element of a tensor as f32 (row by row through ref::DequantizeRow).
std::vector<float> DequantizeTensor(const GgufTensorInfo& t);

}  // namespace lifeline::testing

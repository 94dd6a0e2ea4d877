// quantize: re-encodes a GGUF model's weight matrices to a "mostly X" file type, streaming.
//
// Every 2-D tensor named "*weight" that isn't a norm gets the type the shared policy
// (quant_policy.h) picks; each row is dequantized to f32 and encoded with ref::QuantizeRow. A
// tensor whose type doesn't change, and every other tensor (norms, biases), is copied byte for
// byte. Every metadata key is copied in order; general.file_type and
// general.quantization_version are set (replaced in place, appended when absent).
//
// Memory: the input is memory-mapped and each tensor's input pages are released once it is
// written; the output is produced one tensor at a time inside the GGUF writer's fill callback,
// so peak memory is about the largest output tensor plus the largest input tensor.
// Thread-safety: no shared state; uses `threads` threads of its own.
// Failures: the reader's Status (prefixed with the input path) for an invalid input, Unimplemented
// naming the tensor for a type we can't decode, InvalidArgument for bad options or when the
// output would overwrite the input, the writer's Status for an unwritable output.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "modelgen/quant_policy.h"

namespace lifeline::modelgen {

struct QuantizeOptions {
  std::string in_path;
  std::string out_path;
  FileType ftype = FileType::kMostlyQ8_0;
  int threads = 1;
  // Called once, before writing, when a weight that is already block-quantized gets re-encoded
  // to another block-quantized type (quality loss compounds). May be empty.
  std::function<void(const std::string&)> warn;
};

struct QuantizeStats {
  int tensors_converted = 0;  // re-encoded row by row
  int tensors_copied = 0;     // type unchanged, bytes copied
  int tensors_requantized = 0;  // block-quantized -> another block-quantized type
};

Result<QuantizeStats> QuantizeModel(const QuantizeOptions& opts);

}  // namespace lifeline::modelgen

// Helpers shared by the tokenizer tests: reading the llama.cpp vocab test vectors, loading a
// tokenizer from a shared GGUF file, and writing small GGUF vocab files for bad-input tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline::testing {

std::string ReadFileOrDie(const std::string& path);

// `.inp` files: each input is followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> ParseVocabInputs(const std::string& inp);
// `.out` files: one line of space-separated ids per input (an empty line for no ids).
std::vector<std::vector<int32_t>> ParseVocabOutputs(const std::string& out);

std::string IdsToString(const std::vector<int32_t>& ids);

// Opens ../shared/<rel> and builds its tokenizer; fails the current test on error.
std::unique_ptr<Tokenizer> LoadSharedTokenizer(const std::string& rel);

// Writes `w` (metadata only, no tensors) to a fresh file under the test temp dir.
std::string WriteTempGguf(const GgufWriter& w, const std::string& name);

// Opens a GGUF file and runs Tokenizer::FromGguf on it.
Result<std::unique_ptr<Tokenizer>> TokenizerFromGgufPath(const std::string& path);

// Escapes non-printable bytes, for readable failure messages.
std::string Printable(const std::string& s);

}  // namespace lifeline::testing

// lifeline tokenize -m MODEL.gguf [--no-bos] [--no-special]
// Reads all of stdin as UTF-8 (bytes taken as they are, trailing newline included) and prints
// the token ids separated by single spaces, then a newline. Errors: one line on stderr, exit 1.
#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline::app {
namespace {

struct TokenizeOptions {
  std::string model;
  bool no_bos = false;
  bool no_special = false;
};

// Refuses to buffer an unbounded stream; far above any context window.
constexpr size_t kMaxInputBytes = size_t{256} << 20;

int Fail(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "lifeline tokenize: %s\n", line.c_str());
  return 1;
}

Result<std::string> ReadAllStdin() {
  std::string text;
  char buf[1 << 16];
  while (true) {
    const size_t n = std::fread(buf, 1, sizeof(buf), stdin);
    if (n > 0) {
      if (text.size() + n > kMaxInputBytes) {
        return ResourceExhausted("stdin is larger than the limit of " +
                                 std::to_string(kMaxInputBytes) + " bytes");
      }
      text.append(buf, n);
    }
    if (n < sizeof(buf)) {
      if (std::ferror(stdin)) return IoError("reading stdin failed");
      break;
    }
  }
  return text;
}

int RunTokenize(const TokenizeOptions& opts) {
  auto file = GgufFile::Open(opts.model);
  if (!file.ok()) return Fail(opts.model + ": " + file.status().ToString());
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return Fail(opts.model + ": " + tok.status().ToString());
  auto text = ReadAllStdin();
  if (!text.ok()) return Fail(text.status().ToString());

  const bool add_bos = (*tok)->add_bos() && !opts.no_bos;
  const std::vector<int32_t> ids = (*tok)->Encode(*text, add_bos, !opts.no_special);
  std::string line;
  line.reserve(ids.size() * 6 + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() || std::fflush(stdout) != 0) {
    return Fail("writing stdout failed");
  }
  return 0;
}

}  // namespace

CommandFn RegisterTokenize(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "tokenize", "Tokenize stdin (raw UTF-8 bytes) with a model's vocabulary and print token ids");
  auto opts = std::make_shared<TokenizeOptions>();
  cmd->add_option("-m,--model", opts->model, "GGUF file holding the vocabulary")->required();
  cmd->add_flag("--no-bos", opts->no_bos, "Do not add the BOS token even if the vocab asks for it");
  cmd->add_flag("--no-special", opts->no_special,
                "Treat control-token text (e.g. <s>) as plain text");
  return [opts] { return RunTokenize(*opts); };
}

}  // namespace lifeline::app

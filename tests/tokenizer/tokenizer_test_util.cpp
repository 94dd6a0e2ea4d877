#include "tokenizer/tokenizer_test_util.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/gguf/gguf_file.h"
#include "test_paths.h"

namespace lifeline::testing {

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> ParseVocabInputs(const std::string& inp) {
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp.find(kSep, pos);
    if (hit == std::string::npos) break;
    out.push_back(inp.substr(pos, hit - pos));
    pos = hit + kSep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> ParseVocabOutputs(const std::string& out) {
  std::vector<std::vector<int32_t>> lines;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    std::vector<int32_t> ids;
    std::stringstream ls(line);
    long long id;
    while (ls >> id) ids.push_back(static_cast<int32_t>(id));
    lines.push_back(std::move(ids));
  }
  return lines;
}

std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

Result<std::unique_ptr<Tokenizer>> TokenizerFromGgufPath(const std::string& path) {
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

std::unique_ptr<Tokenizer> LoadSharedTokenizer(const std::string& rel) {
  auto tok = TokenizerFromGgufPath(SharedPath(rel));
  if (!tok.ok()) {
    ADD_FAILURE() << rel << ": " << tok.status().ToString();
    return nullptr;
  }
  return std::move(tok).value();
}

std::string WriteTempGguf(const GgufWriter& w, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/lifeline_tok_" + std::to_string(::getpid()) + "_" + name + ".gguf";
  Status s = w.Write(path, [](size_t, uint8_t*, uint64_t) { return Status::Ok(); });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace lifeline::testing

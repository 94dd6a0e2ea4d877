#include "engine/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <initializer_list>

namespace lifeline::tokenizer_internal {
namespace {

// GPT-2. llama.cpp uses it without the final `|\s+`; a lone whitespace character that the
// regex leaves unmatched becomes a gap piece, which gives the same words.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3 (tiktoken cl100k style). The contractions are spelled out case by case as in
// llama.cpp, rather than (?i:...), which under Unicode rules would also match e.g. U+017F.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: Llama 3 with single digits.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o (o200k): case-aware letter runs with an optional trailing contraction. PCRE2 runs
// the tokenizer.json pattern as is (llama.cpp has to approximate it for std::regex).
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Mistral Tekken: like GPT-4o without contractions and with single digits.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM: the cased-letter ranges (Lu/Ll/Lt of an older Unicode) spelled out in its
// tokenizer.json. Written as \x{...} escapes: several of these code points (U+1F7D, U+1FBE,
// U+1FD3, U+1FDB, U+2126, U+212A) have canonical singletons, and any editor or tool that
// NFC-normalizes literal characters would silently change the ranges.
constexpr const char* kDeepSeekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-)"
    R"(\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-)"
    R"(\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-)"
    R"(\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-)"
    R"(\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-)"
    R"(\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-)"
    R"(\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126})"
    R"(\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})"
    R"(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2})"
    R"(\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-)"
    R"(\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-)"
    R"(\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2})"
    R"(\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepSeekPunct = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kCjkHangul = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr const char* kCjkKana = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";

// BLOOM-style: anything up to whitespace or sentence punctuation.
constexpr const char* kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";

struct NamedConfig {
  std::initializer_list<std::string_view> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges;
  bool add_bos;
};

const NamedConfig kConfigs[] = {
    {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false, false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3}, true, true},
    {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}, false, false},
    {{"deepseek-llm"},
     {"[\r\n]", kDeepSeekLetters, kDeepSeekPunct, R"(\s+$)", kCjkHangul, R"(\p{N}+)"},
     false,
     false},
    {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}, false, false},
    {{"deepseek-v3"},
     {R"(\p{N}{1,3})", kCjkKana,
      R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
     false,
     false},
    {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, false, false},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
     {R"(\p{N})", kGpt2},
     false,
     false},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
      "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"},
     {kGpt2},
     false,
     false},
    {{"qwen2", "stablelm2", "megrez"}, {kQwen2}, false, false},
    {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}, false, false},
    {{"viking"}, {kBloom, R"(\p{N})"}, false, false},
    {{"tekken"}, {kTekken}, true, true},
    {{"gpt-4o"}, {kGpt4o}, false, false},
};

}  // namespace

struct PreTokenizer::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

Result<PreTokenizerConfig> PreTokenizerConfigFor(std::string_view pre) {
  for (const NamedConfig& c : kConfigs) {
    if (std::find(c.names.begin(), c.names.end(), pre) == c.names.end()) continue;
    PreTokenizerConfig out;
    for (const char* r : c.regexes) out.regexes.emplace_back(r);
    out.ignore_merges = c.ignore_merges;
    out.add_bos = c.add_bos;
    return out;
  }
  return Unimplemented("tokenizer.ggml.pre = '" + std::string(pre) +
                       "' is not a supported pre-tokenizer");
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pre) {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  LL_ASSIGN_OR_RETURN(p->config_, PreTokenizerConfigFor(pre));
  for (const std::string& regex : p->config_.regexes) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    auto pat = std::make_unique<Pattern>();
    // DOLLAR_ENDONLY: `$` means the end of the word, never "before a final newline".
    pat->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset,
                              nullptr);
    if (pat->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return Internal("pre-tokenizer '" + std::string(pre) + "': regex does not compile at offset " +
                      std::to_string(err_offset) + ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(pat->code, PCRE2_JIT_COMPLETE);  // optional speed-up; interpreter otherwise
    p->patterns_.push_back(std::move(pat));
  }
  return p;
}

PreTokenizer::~PreTokenizer() = default;

namespace {

size_t NextCharEnd(std::string_view s, size_t pos) {
  ++pos;
  while (pos < s.size() && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

// Splits text[begin, end) by one pattern, appending matches and the gaps between them.
void SplitWord(pcre2_code* code, pcre2_match_data* md, std::string_view text, size_t begin,
               size_t end, std::vector<std::pair<size_t, size_t>>* out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
  const std::string_view word = text.substr(begin, end - begin);
  const size_t len = word.size();
  size_t start = 0;     // where the next search starts
  size_t covered = 0;   // everything before this is already emitted
  while (start < len) {
    int rc = pcre2_match(code, subject, len, start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, len, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc < 0) break;  // no match, or a resource limit: the rest is one gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0];
    const size_t me = ov[1];
    if (me <= ms) {  // empty match: search again one character later
      start = NextCharEnd(word, ms);
      continue;
    }
    if (ms > covered) out->emplace_back(begin + covered, begin + ms);
    out->emplace_back(begin + ms, begin + me);
    covered = me;
    start = me;
  }
  if (covered < len) out->emplace_back(begin + covered, begin + len);
}

}  // namespace

void PreTokenizer::Split(std::string_view text,
                         std::vector<std::pair<size_t, size_t>>* words) const {
  std::vector<std::pair<size_t, size_t>> cur;
  if (!text.empty()) cur.emplace_back(0, text.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (const auto& pat : patterns_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(pat->code, nullptr);
    if (md == nullptr) break;  // out of memory: keep the coarser split
    next.clear();
    next.reserve(cur.size() * 2);
    for (const auto& [b, e] : cur) SplitWord(pat->code, md, text, b, e, &next);
    pcre2_match_data_free(md);
    cur.swap(next);
  }
  words->insert(words->end(), cur.begin(), cur.end());
}

}  // namespace lifeline::tokenizer_internal

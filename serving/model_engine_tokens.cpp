// ModelEngine::Tokenize / Detokenize (POST /tokenize, /detokenize): the model's tokenizer on
// the calling I/O thread. Both only read the immutable tokenizer, so no engine-thread state is
// touched and nothing is queued.
#include <string>
#include <string_view>

#include "serving/model_engine.h"

namespace lifeline::serving {

std::variant<std::vector<int32_t>, server::ApiError> ModelEngine::Tokenize(
    const server::TokenizeRequest& req) const {
  // The same call EncodePrompt makes for a completion prompt, so add_special's ids are the
  // prompt's ids. (EOS is never appended to prompts here, so not here either.)
  return tokenizer_->Encode(req.content, req.add_special && tokenizer_->add_bos(),
                            req.parse_special);
}

std::variant<std::string, server::ApiError> ModelEngine::Detokenize(
    const server::DetokenizeRequest& req) const {
  const int32_t n_vocab = tokenizer_->n_vocab();
  for (size_t i = 0; i < req.tokens.size(); ++i) {
    const int32_t id = req.tokens[i];
    if (id < 0 || id >= n_vocab) {
      const std::string param = "tokens[" + std::to_string(i) + "]";
      return server::ApiError{400, "invalid_request_error", "out_of_range",
                              "'" + param + "' is " + std::to_string(id) +
                                  ", outside the vocabulary of model '" + options_.name +
                                  "' ([0, " + std::to_string(n_vocab) + "))",
                              param, 0};
    }
  }
  // Control tokens (BOS, EOS) contribute nothing, as in SentencePiece's DecodeIds.
  std::string text = tokenizer_->Decode(req.tokens);
  // SentencePiece marks word starts with U+2581 and, for a vocab with add_space_prefix,
  // added one before the input; its decoder drops that one again from the first piece that
  // produces text. Only a U+2581 does (a <0x20> byte token is a real space).
  constexpr std::string_view kSpm = "\xE2\x96\x81";
  if (tokenizer_->model_name() == "llama" && tokenizer_->add_space_prefix() && !text.empty() &&
      text.front() == ' ') {
    for (int32_t id : req.tokens) {
      if (tokenizer_->TokenToPiece(id).empty()) continue;
      if (tokenizer_->TokenText(id).starts_with(kSpm)) text.erase(0, 1);
      break;
    }
  }
  return text;
}

}  // namespace lifeline::serving

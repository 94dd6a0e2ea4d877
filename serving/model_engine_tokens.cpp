// ModelEngine::Tokenize / Detokenize (POST /tokenize, /detokenize): the model's tokenizer on
// the calling thread (one of the server's prep threads). Both only read the immutable
// tokenizer, so no engine-thread state is touched and nothing is queued.
#include <string>
#include <string_view>

#include "serving/model_engine.h"

namespace lifeline::serving {

std::variant<std::vector<int32_t>, api::ApiError> ModelEngine::Tokenize(
    const api::TokenizeRequest& req) const {
  // The same call EncodePrompt makes for a completion prompt, so add_special's ids are the
  // prompt's ids. (EOS is never appended to prompts here, so not here either.)
  return tokenizer_->Encode(req.content, req.add_special && tokenizer_->add_bos(),
                            req.parse_special);
}

std::variant<std::string, api::ApiError> ModelEngine::Detokenize(
    const api::DetokenizeRequest& req) const {
  const int32_t n_vocab = tokenizer_->n_vocab();
  for (size_t i = 0; i < req.tokens.size(); ++i) {
    const int32_t id = req.tokens[i];
    if (id < 0 || id >= n_vocab) {
      const std::string param = "tokens[" + std::to_string(i) + "]";
      return api::InvalidRequestError(param,
                                         "'" + param + "' is " + std::to_string(id) +
                                             ", outside the vocabulary of model '" +
                                             options_.name + "' ([0, " +
                                             std::to_string(n_vocab) + "))",
                                         "out_of_range");
    }
  }
  return DecodeAsSentencePiece(*tokenizer_, req.tokens);
}

}  // namespace lifeline::serving

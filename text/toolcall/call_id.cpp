#include "text/toolcall/call_id.h"

#include "base/rng.h"

namespace lifeline::toolcall {

// splitmix64: every seed gives a full-period, well-mixed sequence.
uint64_t CallIdGenerator::NextU64() { return SplitMix64(&state_); }

std::string CallIdGenerator::Next(ToolCallFormat format) {
  static constexpr char kAlnum[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  constexpr uint64_t kN = sizeof(kAlnum) - 1;  // 62
  // Rejection sampling keeps the 62 characters equally likely.
  constexpr uint64_t kLimit = UINT64_MAX - UINT64_MAX % kN;
  const bool mistral =
      format == ToolCallFormat::kMistralNemo || format == ToolCallFormat::kMistralArgs;
  std::string id = mistral ? "" : "call_";
  const size_t total = id.size() + (mistral ? kMistralIdChars : kOpenAiIdChars);
  while (id.size() < total) {
    uint64_t r = NextU64();
    if (r >= kLimit) continue;
    id.push_back(kAlnum[r % kN]);
  }
  return id;
}

}  // namespace lifeline::toolcall

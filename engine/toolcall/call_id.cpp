#include "engine/toolcall/call_id.h"

namespace lifeline::toolcall {

uint64_t CallIdGenerator::NextU64() {
  // splitmix64 (Steele, Lea, Flood 2014): every seed gives a full-period, well-mixed sequence.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

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

#include "engine/tokenizer/utf8.h"

namespace lifeline::utf8 {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Allowed range of the second byte for a given lead (RFC 3629 table 3-7); this is what rules
// out overlongs, surrogates and code points above U+10FFFF.
bool SecondByteOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return IsContinuation(b);
  }
}

// Expected length for a valid lead byte, 0 for bytes that can never start a character.
size_t ValidLeadLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Number of bytes from pos that form a valid (possibly incomplete) prefix of one character:
// returns {prefix_len, need}; prefix_len == need means a complete character.
struct PrefixInfo {
  size_t prefix_len;
  size_t need;
};

PrefixInfo ValidPrefix(std::string_view s, size_t pos) {
  const uint8_t lead = static_cast<uint8_t>(s[pos]);
  const size_t need = ValidLeadLength(lead);
  if (need == 0) return {0, 1};
  size_t got = 1;
  while (got < need && pos + got < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[pos + got]);
    const bool ok = got == 1 ? SecondByteOk(lead, b) : IsContinuation(b);
    if (!ok) break;
    ++got;
  }
  return {got, need};
}

constexpr std::array<uint32_t, 256> BuildByteToCodepoint() {
  std::array<uint32_t, 256> map{};
  std::array<bool, 256> direct{};
  for (int b = 0; b < 256; ++b) {
    direct[b] = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  }
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) map[b] = direct[b] ? static_cast<uint32_t>(b) : next++;
  return map;
}

constexpr std::array<uint32_t, 256> kByteToCodepoint = BuildByteToCodepoint();

// The alphabet's code points are all below 0x144.
constexpr std::array<int16_t, 0x144> BuildCodepointToByte() {
  std::array<int16_t, 0x144> inv{};
  for (auto& x : inv) x = -1;
  for (int b = 0; b < 256; ++b) inv[kByteToCodepoint[b]] = static_cast<int16_t>(b);
  return inv;
}

constexpr std::array<int16_t, 0x144> kCodepointToByte = BuildCodepointToByte();

}  // namespace

bool DecodeUtf8(std::string_view s, size_t pos, uint32_t* cp, size_t* len) {
  if (pos >= s.size()) return false;
  const PrefixInfo p = ValidPrefix(s, pos);
  if (p.prefix_len == 0 || p.prefix_len != p.need) return false;
  const uint8_t lead = static_cast<uint8_t>(s[pos]);
  uint32_t v;
  switch (p.need) {
    case 1: v = lead; break;
    case 2: v = lead & 0x1F; break;
    case 3: v = lead & 0x0F; break;
    default: v = lead & 0x07; break;
  }
  for (size_t i = 1; i < p.need; ++i) v = (v << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  *cp = v;
  *len = p.need;
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp;
    size_t len;
    if (DecodeUtf8(s, pos, &cp, &len)) {
      out.append(s.substr(pos, len));
      pos += len;
    } else {
      out.append(kReplacementUtf8);
      pos += 1;
    }
  }
  return out;
}

size_t CompletePrefixLength(std::string_view s) {
  // Only the last (at most 3) bytes can be the start of an unfinished character.
  const size_t first = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = first; pos < s.size(); ++pos) {
    const PrefixInfo p = ValidPrefix(s, pos);
    if (p.prefix_len > 0 && p.prefix_len < p.need && pos + p.prefix_len == s.size()) return pos;
  }
  return s.size();
}

void AppendWithReplacement(std::string_view s, std::string* out) {
  size_t pos = 0;
  while (pos < s.size()) {
    const PrefixInfo p = ValidPrefix(s, pos);
    if (p.prefix_len != 0 && p.prefix_len == p.need) {
      out->append(s.substr(pos, p.need));
      pos += p.need;
    } else {
      out->append(kReplacementUtf8);
      pos += p.prefix_len == 0 ? 1 : p.prefix_len;
    }
  }
}

const std::array<uint32_t, 256>& ByteToCodepoint() { return kByteToCodepoint; }

int CodepointToByte(uint32_t cp) { return cp < kCodepointToByte.size() ? kCodepointToByte[cp] : -1; }

}  // namespace lifeline::utf8

// UTF-8 helpers for the tokenizers (internal to engine/tokenizer).
//
// Strict RFC 3629 decoding (no overlongs, no surrogates, <= U+10FFFF) is the one notion of
// "character" here. The SentencePiece-style tokenizer cuts text into such characters and
// keeps every invalid byte as a symbol of its own (so it survives via byte tokens); the
// regex pre-tokenizer needs text PCRE2 accepts, so there invalid bytes are first replaced
// by U+FFFD, one per byte (what llama.cpp does for undecodable bytes).
//
// Pure functions over caller-owned buffers; no state; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lifeline::utf8 {

inline constexpr uint32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Strictly decodes the character starting at s[pos]. On success stores the code point and
// its byte length and returns true; returns false for an invalid or truncated sequence.
bool DecodeUtf8(std::string_view s, size_t pos, uint32_t* cp, size_t* len);

// Appends the UTF-8 encoding of cp (cp must be <= 0x10FFFF and not a surrogate).
void AppendUtf8(uint32_t cp, std::string* out);

// Returns s with every byte that does not start a valid sequence replaced by U+FFFD.
// Valid input is returned unchanged (byte for byte).
std::string SanitizeUtf8(std::string_view s);

// How a byte buffer ends, for streaming: the number of leading bytes that can be emitted
// now. A trailing sequence that is a valid-so-far prefix of a character is held back.
// Invalid bytes inside that prefix are not held back (the caller replaces them).
size_t CompletePrefixLength(std::string_view s);

// Appends s to out, replacing each maximal invalid subpart by one U+FFFD (the Unicode
// "substitution of maximal subparts" practice). A truncated sequence at the end counts as
// one invalid subpart.
void AppendWithReplacement(std::string_view s, std::string* out);

// GPT-2 byte-level BPE alphabet: byte b is represented by code point ByteToCodepoint()[b]
// (printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100..U+0143).
const std::array<uint32_t, 256>& ByteToCodepoint();
// Inverse of ByteToCodepoint: the byte cp stands for, or -1 if cp is not in the alphabet.
int CodepointToByte(uint32_t cp);

}  // namespace lifeline::utf8

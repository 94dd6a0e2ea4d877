// Code point ranges -> UTF-8 byte-range sequences (internal). A range of code points is split
// into pieces whose encodings share a length and differ only within aligned blocks, so each
// piece is one sequence of per-byte ranges (the construction of RE2 and Rust's regex-syntax).
#pragma once

#include <cstdint>
#include <vector>

namespace lifeline::grammar {

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;
};

// Appends to `out` the sequences whose union is exactly the UTF-8 encodings of [lo, hi]
// (lo <= hi <= 0x10FFFF; surrogates must already be excluded by the caller).
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>* out);

// UTF-8 encoding of one code point (<= 0x10FFFF).
int EncodeUtf8(uint32_t cp, uint8_t out[4]);

}  // namespace lifeline::grammar

// The invariant check of the fuzz harnesses: a broken invariant prints what broke and aborts,
// which libFuzzer records as a crash and the corpus replay (Fuzz.<name>.Corpus) as a failure.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace lifeline::fuzz {

inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace lifeline::fuzz

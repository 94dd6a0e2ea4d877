// Always-on invariant checks guarding memory safety. For conditions derived from files or
// requests use Status instead; LL_CHECK is for "our own code broke a promise".
#pragma once

#include <cstdio>
#include <cstdlib>

#define LL_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "lifeline: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#ifdef NDEBUG
#define LL_DCHECK(cond) ((void)0)
#else
#define LL_DCHECK(cond) LL_CHECK(cond)
#endif

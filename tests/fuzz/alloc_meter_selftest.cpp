// Self-test of the memory-growth meter (alloc_meter.h), in a binary of its own since the meter
// replaces the global operator new: growth within the bound passes, and an input that makes
// the process hold far more than its bound aborts (checked in a child process, as libFuzzer
// and the corpus replay would see it).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <vector>

#include "fuzz/alloc_meter.h"

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "alloc_meter selftest: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  using lifeline::fuzz::GrowthScope;
  {
    // 1 KiB of input may hold 64 KiB + 4 MiB: a 1 MiB vector is fine, and freed memory does
    // not count once gone.
    const GrowthScope scope(1024, "selftest");
    std::vector<char> v(1 << 20);
    v[0] = 1;
  }
  if (lifeline::fuzz::g_live_bytes.load() > (1u << 16)) return Fail("freed bytes still counted");
  const pid_t child = fork();
  if (child < 0) return Fail("fork failed");
  if (child == 0) {
    {
      // 16 bytes of input holding 64 MiB in small pieces: over the bound, the scope aborts.
      const GrowthScope scope(16, "selftest");
      std::vector<std::unique_ptr<std::vector<char>>> pieces;
      for (int i = 0; i < 1024; ++i) pieces.push_back(std::make_unique<std::vector<char>>(1 << 16));
    }
    _exit(0);  // not reached when the meter works: the scope's end aborts first
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return Fail("waitpid failed");
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
    return Fail("64 MiB held for a 16-byte input did not abort");
  }
  std::puts("alloc_meter selftest: ok");
  return 0;
}

#include "engine/gguf/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace lifeline {

namespace {

struct Slot {
  std::atomic<bool> claimed{false};
  std::atomic<uintptr_t> begin{0};  // 0: not guarding (published last)
  std::atomic<uintptr_t> end{0};
  std::atomic<int> faulted{0};
  std::atomic<uint64_t> fault_offset{0};
  char path[256] = {};
};

Slot g_slots[kMaxGuardedMappings];
struct sigaction g_previous {};
std::once_flag g_install_once;

// Async-signal-safe output: the pieces go out with write(2), numbers formatted by hand.
void WriteText(const char* s) { (void)!::write(2, s, std::strlen(s)); }

void WriteNumber(uint64_t v) {
  char buf[24];
  int i = sizeof buf;
  buf[--i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 0);
  WriteText(buf + i);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    const uintptr_t e = s.end.load(std::memory_order_acquire);
    if (b == 0 || addr < b || addr >= e) continue;
    int expected = 0;
    if (s.faulted.compare_exchange_strong(expected, 1)) {
      s.fault_offset.store(addr - b);
      WriteText("lifeline: read fault (SIGBUS) in the mapped file ");
      WriteText(s.path);
      WriteText(" at byte ");
      WriteNumber(addr - b);
      WriteText(": the file was truncated or replaced in place while in use; its model fails\n");
    }
    // Zero pages instead of the file: the read that faulted (and any other) completes.
    void* r = ::mmap(reinterpret_cast<void*>(b), e - b, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r != MAP_FAILED) return;
    break;  // could not patch the range: die as without a guard
  }
  // Not ours: what would have happened without the guard.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);  // the faulting instruction runs again and ends us
}

void Install() {
  struct sigaction sa {};
  sa.sa_sigaction = &OnSigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

int GuardMapping(const void* base, uint64_t bytes, const std::string& path) {
  if (base == nullptr || bytes == 0) return -1;
  std::call_once(g_install_once, Install);
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t span = (bytes + page - 1) / page * page;
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    Slot& s = g_slots[i];
    bool expected = false;
    if (!s.claimed.compare_exchange_strong(expected, true)) continue;
    std::strncpy(s.path, path.c_str(), sizeof s.path - 1);
    s.path[sizeof s.path - 1] = '\0';
    s.faulted.store(0);
    s.fault_offset.store(0);
    s.end.store(reinterpret_cast<uintptr_t>(base) + span, std::memory_order_release);
    s.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return i;
  }
  return -1;
}

void UnguardMapping(int slot) {
  if (slot < 0 || slot >= kMaxGuardedMappings) return;
  Slot& s = g_slots[slot];
  s.begin.store(0, std::memory_order_release);
  s.end.store(0, std::memory_order_release);
  s.claimed.store(false);
}

bool MappingFaulted(int slot) {
  if (slot < 0 || slot >= kMaxGuardedMappings) return false;
  return g_slots[slot].faulted.load() != 0;
}

uint64_t MappingFaultOffset(int slot) {
  if (slot < 0 || slot >= kMaxGuardedMappings) return 0;
  return g_slots[slot].fault_offset.load();
}

}  // namespace lifeline

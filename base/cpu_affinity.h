// CPU affinity for compute threads: parsing a CPU list ("0-3,6"), the CPUs this process may
// run on, and pinning the calling thread. Pinning keeps a compute thread on one core (its L1/L2
// stay warm across ops, the scheduler does not migrate it mid-product) when the operator asks
// for it; nothing is pinned by default.
//
// Linux only (sched_getaffinity / pthread_setaffinity_np); elsewhere AllowedCpus() is empty
// and PinCurrentThread() fails, so callers report "pinning unsupported" instead of pretending.
// Thread-safety: free functions, no shared state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lifeline {

// Highest CPU id accepted in a list (the size of the kernel's fixed cpu_set_t).
inline constexpr int kMaxCpuId = 1023;

// "0-3,6" -> {0, 1, 2, 3, 6}, in the order written. Ranges are inclusive; ids in
// [0, kMaxCpuId]; no id twice. Errors name `what` (e.g. "--cpus") and the bad piece.
Result<std::vector<int>> ParseCpuList(std::string_view list, std::string_view what);

// The CPUs the calling thread may run on, ascending (empty where unsupported).
std::vector<int> AllowedCpus();

// Binds the calling thread to `cpu`; false when the OS refuses (not allowed, unsupported).
bool PinCurrentThread(int cpu);

// The CPUs the calling thread is bound to now, ascending (empty where unsupported).
std::vector<int> CurrentThreadCpus();

// The pin list for `n_threads` compute threads: the parsed `cpus_flag` when given, else (when
// `pin`) the first n_threads CPUs this process may run on, else empty (no pinning). Errors:
// fewer CPUs than threads (two compute threads on one core wait on each other), or a listed
// CPU this process may not use. `flag` names the option in messages.
Result<std::vector<int>> ResolvePinCpus(bool pin, std::string_view cpus_flag, int n_threads,
                                        std::string_view flag);

// "0,1,4" for messages and reports.
std::string CpuListString(const std::vector<int>& cpus);

}  // namespace lifeline

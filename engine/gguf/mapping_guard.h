// Guards read-only file mappings against the file changing underneath them. A mapped file
// that someone truncates makes every read of a page past the new end raise SIGBUS, which by
// default kills the process without a word (and every request in flight with it).
//
// A guarded mapping is registered here; the first guard installs a SIGBUS handler. When a
// fault lands inside a guarded range, the handler replaces the whole range with anonymous
// zero pages (one mmap(MAP_FIXED) system call), marks the mapping faulted, writes one line
// naming the file to stderr, and returns: the faulting read then sees zeros instead of
// killing the process. The owner checks Faulted() after each use of the bytes (the engine
// after each forward pass) and fails what it computed from them; nothing read after the
// fault is trusted. A fault outside every guarded range keeps the default meaning: the
// previous disposition is restored and the fault re-raised.
//
// This handles the fault on whatever thread takes it (compute pool workers included), with
// no longjmp out of the middle of a kernel. mmap is not on POSIX's list of async-signal-safe
// functions, but on Linux it is a plain system call with no user-space lock.
//
// Ownership: the registry is process-wide and fixed-size (kMaxGuardedMappings slots); a slot
// holds addresses and a copy of the path, never a pointer to the caller's memory.
// Thread-safety: Guard / Unguard / Faulted from any thread; the handler reads only atomics
// and the path bytes published before the range. Failure: with every slot taken, Guard
// returns -1 and the mapping is simply unguarded (the caller may log it).
#pragma once

#include <cstdint>
#include <string>

namespace lifeline {

inline constexpr int kMaxGuardedMappings = 64;

// Registers [base, base + bytes) (page-aligned base, as mmap returns) mapped from `path`.
// Returns the slot, or -1 when no slot is free.
int GuardMapping(const void* base, uint64_t bytes, const std::string& path);
// Forgets the slot (before the caller unmaps the range). -1 is ignored.
void UnguardMapping(int slot);
// True once a SIGBUS landed in the slot's range (its bytes are zeros from then on).
bool MappingFaulted(int slot);
// The file offset of the first fault in the slot (0 when none).
uint64_t MappingFaultOffset(int slot);

}  // namespace lifeline

// The pushdown side of matching (internal): parse stacks as persistent linked frames, and the
// byte step that advances a set of stacks.
//
// A stack is the id of its top frame; a frame is (rule DFA state, parent frame). Frames are
// never modified, so stacks share their lower parts and advancing one byte allocates only the
// frames that change. A "waiting" stack is one whose top state has byte edges: the set of
// waiting stacks is the matcher's state. Frames live in a FrameArena that callers truncate back
// to a mark when a speculative walk is done (walks are depth-first, so truncation is exact).
//
// Thread-safety: a FrameArena and a StackStepper belong to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "text/grammar/grammar_internal.h"

namespace lifeline::grammar {

struct Frame {
  int32_t parent = -1;  // -1: bottom of the stack
  int32_t state = -1;
  int32_t depth = 0;    // frames in the stack, this one included
  uint64_t hash = 0;    // of (state, parent's hash): equal stacks hash equally
};

class FrameArena {
 public:
  int32_t Add(int32_t parent, int32_t state) {
    Frame f;
    f.parent = parent;
    f.state = state;
    uint64_t ph = 0x6A09E667F3BCC909ull;
    if (parent >= 0) {
      f.depth = frames_[parent].depth + 1;
      ph = frames_[parent].hash;
    } else {
      f.depth = 1;
    }
    uint64_t x = (ph ^ (static_cast<uint64_t>(static_cast<uint32_t>(state)) + 0x9E3779B97F4A7C15ull)) *
                 0xBF58476D1CE4E5B9ull;
    f.hash = x ^ (x >> 31);
    frames_.push_back(f);
    return static_cast<int32_t>(frames_.size() - 1);
  }
  const Frame& operator[](int32_t id) const { return frames_[static_cast<size_t>(id)]; }
  size_t Mark() const { return frames_.size(); }
  void Reset(size_t mark) { frames_.resize(mark); }
  size_t size() const { return frames_.size(); }
  void Clear() { frames_.clear(); }

 private:
  std::vector<Frame> frames_;
};

class StackStepper {
 public:
  explicit StackStepper(const Grammar& g) : g_(g) {}

  // Adds to `out` every waiting stack reachable from frame `f` (whose state was just entered)
  // by calling rules and returning from finished ones, without consuming a byte. Sets *bottom
  // when the bottom frame can return (the text so far completes the bottom rule). Returns false
  // when max_closure_steps was exceeded (the caller treats the byte as not allowed). `out` is
  // not deduplicated.
  bool Expand(FrameArena& arena, int32_t f, std::vector<int32_t>* out, bool* bottom) {
    budget_ = g_.limits.max_closure_steps;
    return Closure(arena, f, out, bottom);
  }

  // Advances every stack of in[0..n) by `byte`; `out` receives the waiting stacks, without
  // duplicates. False when max_closure_steps was hit: `out` is cleared. (max_stacks is the
  // matcher's to enforce: a walk from one position cannot see how many stacks there are.)
  bool Advance(FrameArena& arena, const int32_t* in, size_t n, uint8_t byte,
               std::vector<int32_t>* out, bool* bottom);

  // Removes stacks equal to an earlier one (same frames, bottom to top).
  void Dedup(const FrameArena& arena, std::vector<int32_t>* stacks);

  const Grammar& grammar() const { return g_; }

 private:
  bool Closure(FrameArena& arena, int32_t f, std::vector<int32_t>* out, bool* bottom);

  const Grammar& g_;
  std::vector<int32_t> todo_;
  int64_t budget_ = 0;
};

}  // namespace lifeline::grammar

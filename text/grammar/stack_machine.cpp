#include "text/grammar/stack_machine.h"

#include <algorithm>

namespace lifeline::grammar {

bool StackStepper::Closure(FrameArena& arena, int32_t f, std::vector<int32_t>* out, bool* bottom) {
  todo_.clear();
  todo_.push_back(f);
  while (!todo_.empty()) {
    if (--budget_ < 0) return false;
    int32_t cur = todo_.back();
    todo_.pop_back();
    const Frame fr = arena[cur];
    const DfaState& s = g_.states[fr.state];
    if (s.has_bytes()) out->push_back(cur);
    for (uint32_t i = s.ref_begin; i < s.ref_end; ++i) {
      const RefEdge& r = g_.refs[i];
      int32_t ret = arena.Add(fr.parent, r.target);
      todo_.push_back(arena.Add(ret, g_.rule_start(r.rule)));
    }
    if (s.final) {
      if (fr.parent < 0) {
        *bottom = true;
      } else {
        todo_.push_back(fr.parent);
      }
    }
  }
  return true;
}

bool StackStepper::Advance(FrameArena& arena, const int32_t* in, size_t n, uint8_t byte,
                           std::vector<int32_t>* out, bool* bottom) {
  out->clear();
  budget_ = g_.limits.max_closure_steps;
  for (size_t i = 0; i < n; ++i) {
    const Frame& fr = arena[in[i]];
    int32_t t = g_.Next(fr.state, byte);
    if (t < 0) continue;
    // A loop back to the same state leaves the frame as it was: reuse it.
    int32_t f = t == fr.state ? in[i] : arena.Add(fr.parent, t);
    if (!Closure(arena, f, out, bottom)) {
      out->clear();
      *bottom = false;
      return false;
    }
  }
  if (out->size() > 1) Dedup(arena, out);
  return true;
}

namespace {
bool SameStack(const FrameArena& arena, int32_t a, int32_t b) {
  while (a != b) {
    if (a < 0 || b < 0) return false;
    const Frame& fa = arena[a];
    const Frame& fb = arena[b];
    if (fa.state != fb.state || fa.hash != fb.hash) return false;
    a = fa.parent;
    b = fb.parent;
  }
  return true;
}
}  // namespace

void StackStepper::Dedup(const FrameArena& arena, std::vector<int32_t>* stacks) {
  auto& v = *stacks;
  if (v.size() == 2) {
    if (SameStack(arena, v[0], v[1])) v.pop_back();
    return;
  }
  std::sort(v.begin(), v.end(), [&](int32_t a, int32_t b) {
    const uint64_t ha = arena[a].hash, hb = arena[b].hash;
    return ha != hb ? ha < hb : a < b;
  });
  size_t w = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    bool dup = false;
    for (size_t j = w; j-- > 0 && arena[v[j]].hash == arena[v[i]].hash;) {
      if (SameStack(arena, v[j], v[i])) {
        dup = true;
        break;
      }
    }
    if (!dup) v[w++] = v[i];
  }
  v.resize(w);
}

}  // namespace lifeline::grammar

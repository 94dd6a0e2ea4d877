#include "text/grammar/grammar_matcher.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "text/grammar/grammar_internal.h"
#include "text/grammar/mask_internal.h"
#include "text/grammar/stack_machine.h"
#include "text/grammar/token_walk.h"

namespace lifeline::grammar {

namespace {
// Live frames are a few per stack; past this the arena is copied down to them.
constexpr size_t kCompactFrames = 4096;

void SetBit(uint64_t* bits, int32_t id) { bits[id >> 6] |= uint64_t{1} << (id & 63); }
}  // namespace

struct GrammarMatcher::Impl {
  std::shared_ptr<const Grammar> g;
  std::shared_ptr<const GrammarVocab> vocab;
  mutable FrameArena arena;
  std::vector<int32_t> stacks;  // waiting stacks (top frame ids)
  bool can_end = false;
  bool finished = false;
  bool capped = false;  // a matcher cap was hit at start
  mutable std::unique_ptr<TokenWalker> walker;
  // A position's mask and, for this grammar, the trie of its tokens that outlive the rule.
  struct Local {
    std::shared_ptr<const PositionMask> mask;
    VocabTrie suffixes;
  };
  std::unordered_map<int32_t, std::shared_ptr<const Local>> masks;  // by state
  MatcherStats stats;
  mutable std::vector<int32_t> cur, next;
  std::vector<int32_t> parents, group;
  std::vector<uint64_t> bits;

  Impl(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> v)
      : g(std::move(grammar)), vocab(std::move(v)) {
    LL_CHECK(g != nullptr && vocab != nullptr);
    walker = std::make_unique<TokenWalker>(*g, *vocab);
  }

  Impl(const Impl& o)
      : g(o.g), vocab(o.vocab), arena(o.arena), stacks(o.stacks), can_end(o.can_end),
        finished(o.finished), capped(o.capped), masks(o.masks), stats(o.stats) {
    walker = std::make_unique<TokenWalker>(*g, *vocab);
  }

  void Start() {
    int32_t f = arena.Add(-1, g->rule_start(g->root_rule));
    bool bottom = false;
    if (!walker->stepper().Expand(arena, f, &stacks, &bottom) ||
        static_cast<int64_t>(stacks.size()) > g->limits.max_stacks) {
      stacks.clear();
      capped = true;
      return;
    }
    walker->stepper().Dedup(arena, &stacks);
    can_end = bottom;
  }

  const Local& MaskOf(int32_t state) {
    auto it = masks.find(state);
    if (it != masks.end()) return *it->second;
    const int32_t rule = g->states[state].rule;
    MaskKey key{g->rule_fp_lo[rule], g->rule_fp_hi[rule], state - g->rule_first_state[rule]};
    const bool shareable = (key.lo | key.hi) != 0;
    auto local = std::make_shared<Local>();
    if (shareable) local->mask = vocab->memo().Find(key);
    if (local->mask) {
      ++stats.positions_shared;
    } else {
      local->mask = walker->BuildMask(state);
      ++stats.positions_built;
      if (shareable) vocab->memo().Insert(key, local->mask);
    }
    if (!local->mask->escapes.empty()) local->suffixes = walker->SuffixTrie(*local->mask, rule);
    return *masks.emplace(state, std::move(local)).first->second;
  }

  int32_t ComputeBits() {
    const int32_t n_vocab = vocab->n_vocab();
    bits.assign((static_cast<size_t>(n_vocab) + 63) / 64, 0);
    ++stats.masks;
    if (!finished) {
      std::vector<int32_t> order = stacks;
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return arena[a].state < arena[b].state; });
      for (size_t i = 0; i < order.size();) {
        const int32_t state = arena[order[i]].state;
        group.clear();
        for (; i < order.size() && arena[order[i]].state == state; ++i) group.push_back(order[i]);
        AddPosition(state);
      }
    }
    if (can_end || finished)
      for (int32_t id : vocab->eog_ids()) SetBit(bits.data(), id);
    int32_t count = 0;
    for (uint64_t w : bits) count += std::popcount(w);
    return count;
  }

  // Tokens allowed from the stacks in `group`, all with their top frame at `state`.
  void AddPosition(int32_t state) {
    const Local& local = MaskOf(state);
    const PositionMask& m = *local.mask;
    if (!m.bits.empty()) {
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= m.bits[w];
    } else {
      for (int32_t id : m.ids) SetBit(bits.data(), id);
    }
    if (local.suffixes.n_nodes() <= 1) return;
    // Tokens that outlive the top frame: walk them again from the frames below it.
    const size_t mark = arena.Mark();
    parents.clear();
    StackStepper& stepper = walker->stepper();
    for (int32_t top : group) {
      int32_t below = arena[top].parent;
      bool bottom = false;
      if (below >= 0 && !stepper.Expand(arena, below, &parents, &bottom)) parents.clear();
    }
    if (parents.size() > 1) stepper.Dedup(arena, &parents);
    if (!parents.empty()) {
      walker->WalkTrie(arena, parents, local.suffixes, bits.data());
      ++stats.suffix_walks;
    }
    arena.Reset(mark);
  }

  // Runs `bytes` through the stacks. On success *stacks_out / *bottom_out describe the state
  // after them (frames left in the arena); on failure the arena is restored.
  // With enforce_caps, more than max_stacks stacks after a byte is ResourceExhausted; without
  // (IsAllowed), the answer is the mask's, which cannot see that cap.
  Status Run(std::string_view bytes, std::vector<int32_t>* stacks_out, bool* bottom_out,
             bool enforce_caps) const {
    const size_t mark = arena.Mark();
    cur = stacks;
    bool bottom = can_end;
    StackStepper& stepper = walker->stepper();
    for (size_t i = 0; i < bytes.size(); ++i) {
      const uint8_t b = static_cast<uint8_t>(bytes[i]);
      if (cur.empty()) {
        arena.Reset(mark);
        return InvalidArgument("grammar: byte " + std::to_string(i) + " follows a complete text");
      }
      bottom = false;
      if (!stepper.Advance(arena, cur.data(), cur.size(), b, &next, &bottom) ||
          (enforce_caps && static_cast<int64_t>(next.size()) > g->limits.max_stacks)) {
        arena.Reset(mark);
        return ResourceExhausted(
            "grammar: the parse needs more than max_stacks / max_closure_steps");
      }
      if (next.empty() && !bottom) {
        arena.Reset(mark);
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        return InvalidArgument("grammar: byte " + std::to_string(i) + " (" + hex +
                               ") is not allowed here");
      }
      cur.swap(next);
    }
    *stacks_out = cur;
    *bottom_out = bottom;
    return Status::Ok();
  }

  void Compact() {
    FrameArena fresh;
    std::unordered_map<int32_t, int32_t> remap;
    std::vector<int32_t> chain;
    for (int32_t& s : stacks) {
      chain.clear();
      int32_t x = s;
      while (x >= 0 && !remap.count(x)) {
        chain.push_back(x);
        x = arena[x].parent;
      }
      int32_t base = x < 0 ? -1 : remap[x];
      for (size_t i = chain.size(); i-- > 0;) {
        base = fresh.Add(base, arena[chain[i]].state);
        remap[chain[i]] = base;
      }
      s = remap[s];
    }
    arena = std::move(fresh);
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const GrammarVocab> vocab)
    : impl_(std::make_unique<Impl>(std::move(grammar), std::move(vocab))) {
  impl_->Start();
}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(const GrammarMatcher& other)
    : impl_(std::make_unique<Impl>(*other.impl_)) {}
GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

int32_t GrammarMatcher::ApplyMask(float* logits, int32_t n_vocab) {
  const int32_t count = impl_->ComputeBits();
  const int32_t known = std::min(n_vocab, impl_->vocab->n_vocab());
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const uint64_t* bits = impl_->bits.data();
  for (int32_t base = 0; base < known; base += 64) {
    uint64_t keep = bits[base >> 6];
    if (keep == ~uint64_t{0}) continue;
    const int32_t n = std::min(64, known - base);
    for (int32_t j = 0; j < n; ++j)
      if (!((keep >> j) & 1)) logits[base + j] = neg_inf;
  }
  for (int32_t id = known; id < n_vocab; ++id) logits[id] = neg_inf;
  return count;
}

void GrammarMatcher::FillAllowed(std::vector<uint8_t>* allowed) {
  impl_->ComputeBits();
  const int32_t n = impl_->vocab->n_vocab();
  allowed->assign(static_cast<size_t>(n), 0);
  for (int32_t id = 0; id < n; ++id) (*allowed)[id] = (impl_->bits[id >> 6] >> (id & 63)) & 1;
}

int32_t GrammarMatcher::FillBitmask(std::vector<uint64_t>* bits) {
  int32_t count = impl_->ComputeBits();
  *bits = impl_->bits;
  return count;
}

bool GrammarMatcher::IsAllowed(int32_t token) const {
  const Impl& m = *impl_;
  if (token < 0 || token >= m.vocab->n_vocab()) return false;
  if (m.vocab->is_eog(token)) return m.can_end || m.finished;
  const std::string& bytes = m.vocab->token_bytes(token);
  if (m.finished || bytes.empty()) return false;
  const size_t mark = m.arena.Mark();
  std::vector<int32_t> after;
  bool bottom = false;
  bool ok = m.Run(bytes, &after, &bottom, /*enforce_caps=*/false).ok();
  m.arena.Reset(mark);
  return ok;
}

Status GrammarMatcher::Accept(int32_t token) {
  Impl& m = *impl_;
  if (token < 0 || token >= m.vocab->n_vocab()) {
    return InvalidArgument("grammar: token " + std::to_string(token) + " outside [0, " +
                           std::to_string(m.vocab->n_vocab()) + ")");
  }
  if (m.finished) return InvalidArgument("grammar: generation already ended");
  if (m.capped) return status();
  if (m.vocab->is_eog(token)) {
    if (!m.can_end) {
      return InvalidArgument("grammar: end of generation (token " + std::to_string(token) +
                             ") before the text completes the grammar");
    }
    m.finished = true;
    m.stacks.clear();
    return Status::Ok();
  }
  const std::string& bytes = m.vocab->token_bytes(token);
  if (bytes.empty()) {
    return InvalidArgument("grammar: token " + std::to_string(token) +
                           " adds no text (control token) and is never allowed");
  }
  Status s = AcceptBytes(bytes);
  if (!s.ok()) return Status(s.code(), s.message() + " (token " + std::to_string(token) + ")");
  return s;
}

Status GrammarMatcher::AcceptBytes(std::string_view bytes) {
  Impl& m = *impl_;
  if (m.finished) return InvalidArgument("grammar: generation already ended");
  if (m.capped) return status();
  if (bytes.empty()) return Status::Ok();
  std::vector<int32_t> after;
  bool bottom = false;
  const size_t mark = m.arena.Mark();
  LL_RETURN_IF_ERROR(m.Run(bytes, &after, &bottom, /*enforce_caps=*/true));
  // Nesting is checked here rather than inside the byte step, so that a mask never depends on
  // how deep the stack below a position is (position masks are computed from one frame).
  for (int32_t top : after) {
    if (m.arena[top].depth > m.g->limits.max_stack_depth) {
      m.arena.Reset(mark);
      return ResourceExhausted("grammar: the text nests rules more than " +
                               std::to_string(m.g->limits.max_stack_depth) +
                               " deep (max_stack_depth)");
    }
  }
  m.stacks = std::move(after);
  m.can_end = bottom;
  if (m.arena.size() > kCompactFrames) m.Compact();
  return Status::Ok();
}

Status GrammarMatcher::status() const {
  if (!impl_->capped) return Status::Ok();
  return ResourceExhausted(
      "grammar: the start of the grammar needs more than max_stacks / "
      "max_closure_steps");
}

bool GrammarMatcher::CanEnd() const { return impl_->can_end || impl_->finished; }
bool GrammarMatcher::MustEnd() const {
  return impl_->finished || (impl_->can_end && impl_->stacks.empty());
}
bool GrammarMatcher::finished() const { return impl_->finished; }
int32_t GrammarMatcher::Precompute() {
  int32_t n = 0;
  const Grammar& g = *impl_->g;
  for (int32_t s = 0; s < static_cast<int32_t>(g.states.size()); ++s) {
    if (!g.states[s].has_bytes()) continue;
    impl_->MaskOf(s);
    ++n;
  }
  return n;
}

const MatcherStats& GrammarMatcher::stats() const { return impl_->stats; }

}  // namespace lifeline::grammar

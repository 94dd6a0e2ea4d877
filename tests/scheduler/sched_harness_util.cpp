#include "sched_harness.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace lifeline::testing {

int32_t FakeToken(RequestId id, int64_t n_generated) {
  return static_cast<int32_t>(1 + (id * 7919 + n_generated * 104729) % 30000);
}

SchedulerConfig Config(int32_t n_blocks, int32_t max_running, int64_t max_step_tokens) {
  SchedulerConfig c;
  c.n_blocks = n_blocks;
  c.max_running = max_running;
  c.max_step_tokens = max_step_tokens;
  return c;
}

FakeKv::FakeKv(int32_t n_blocks)
    : slots_(static_cast<size_t>(n_blocks) * static_cast<size_t>(kKvBlockTokens)),
      prefix_fp_(static_cast<size_t>(n_blocks), 0) {}

FakeKv::BlockImage FakeKv::Save(BlockId block) const {
  BlockImage im;
  const auto first = slots_.begin() + static_cast<std::ptrdiff_t>(block) * kKvBlockTokens;
  im.slots.assign(first, first + kKvBlockTokens);
  im.prefix_fp = prefix_fp_[static_cast<size_t>(block)];
  return im;
}

void FakeKv::Load(BlockId block, const BlockImage& im) {
  std::copy(im.slots.begin(), im.slots.end(),
            slots_.begin() + static_cast<std::ptrdiff_t>(block) * kKvBlockTokens);
  prefix_fp_[static_cast<size_t>(block)] = im.prefix_fp;
}

std::string FakeKv::Apply(const StepEntry& e, std::span<const int32_t> expected,
                          const BlockManager& bm) {
  const int64_t b_tokens = kKvBlockTokens;
  const int64_t n = e.end_pos - e.start_pos;
  const int64_t n_draft = static_cast<int64_t>(e.draft.size());
  const std::string who = "request " + std::to_string(e.id) + ": ";
  if (e.start_pos < 0 || n <= 0) return who + "empty or negative range";
  if (static_cast<int64_t>(expected.size()) < e.end_pos - n_draft) {
    return who + "end_pos " + std::to_string(e.end_pos) + " beyond its " +
           std::to_string(expected.size()) + " known tokens";
  }
  if (n_draft > 0 && (!e.is_decode || n != 1 + n_draft ||
                      e.start_pos + 1 != static_cast<int64_t>(expected.size()))) {
    return who + "a draft on an entry that is not the decode of the last known token";
  }
  if (static_cast<int64_t>(e.tokens.size()) != n ||
      static_cast<int64_t>(e.want_logits.size()) != n) {
    return who + "tokens/want_logits sizes do not match the range";
  }
  // The sequence as this entry computes it: known tokens, then the draft.
  std::vector<int32_t> seq(expected.begin(), expected.begin() + e.start_pos);
  seq.insert(seq.end(), e.tokens.begin(), e.tokens.end());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = e.start_pos + i;
    if (i < n - n_draft && e.tokens[static_cast<size_t>(i)] != expected[static_cast<size_t>(p)]) {
      return who + "plan token at position " + std::to_string(p) + " is wrong";
    }
    if (i >= n - n_draft && e.tokens[static_cast<size_t>(i)] != e.draft[static_cast<size_t>(i - (n - n_draft))]) {
      return who + "plan token at drafted position " + std::to_string(p) + " is not the draft's";
    }
    const bool last = i == n - 1;
    const bool want = n_draft > 0 || (last && e.end_pos == static_cast<int64_t>(expected.size()));
    if ((e.want_logits[static_cast<size_t>(i)] != 0) != want) {
      return who + "want_logits wrong at position " + std::to_string(p);
    }
  }
  if (static_cast<int64_t>(e.block_table.size()) < (e.end_pos + b_tokens - 1) / b_tokens) {
    return who + "block table too short for end_pos " + std::to_string(e.end_pos);
  }
  // FNV-1a over the 32-bit token values: fp[k] fingerprints seq[0, k).
  std::vector<uint64_t> fp(static_cast<size_t>(e.end_pos) + 1);
  fp[0] = 1469598103934665603ULL;
  for (int64_t k = 0; k < e.end_pos; ++k) {
    fp[static_cast<size_t>(k) + 1] =
        (fp[static_cast<size_t>(k)] ^ static_cast<uint32_t>(seq[static_cast<size_t>(k)])) *
        1099511628211ULL;
  }
  for (int64_t p = 0; p < e.start_pos; ++p) {
    const BlockId b = e.block_table[static_cast<size_t>(p / b_tokens)];
    const Slot& s = slots_[static_cast<size_t>(b * b_tokens + p % b_tokens)];
    if (s.token != expected[static_cast<size_t>(p)] || s.pos != p) {
      return who + "position " + std::to_string(p) + " reads (token " +
             std::to_string(s.token) + ", pos " + std::to_string(s.pos) + ") from block " +
             std::to_string(b) + ", expected token " +
             std::to_string(expected[static_cast<size_t>(p)]);
    }
    if (p % b_tokens == 0 && prefix_fp_[static_cast<size_t>(b)] != fp[static_cast<size_t>(p)]) {
      return who + "block " + std::to_string(b) + " was computed under another prefix";
    }
  }
  for (int64_t p = e.start_pos; p < e.end_pos; ++p) {
    const BlockId b = e.block_table[static_cast<size_t>(p / b_tokens)];
    if (bm.RefCount(b) != 1) {
      return who + "writes position " + std::to_string(p) + " into shared block " +
             std::to_string(b);
    }
    slots_[static_cast<size_t>(b * b_tokens + p % b_tokens)] = {seq[static_cast<size_t>(p)], p};
    if (p % b_tokens == 0) prefix_fp_[static_cast<size_t>(b)] = fp[static_cast<size_t>(p)];
  }
  return "";
}

Harness::Harness(const SchedulerConfig& config, int64_t step_us)
    : config_(config), kv_(config.n_blocks), step_us_(step_us) {
  auto s = Scheduler::Create(config);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (s.ok()) sched_ = std::move(s).value();
}

Result<RequestId> Harness::TrySubmit(std::vector<int32_t> prompt, int64_t max_tokens,
                                     int32_t priority, std::optional<int64_t> deadline_us) {
  NewRequest nr;
  nr.prompt_tokens = prompt;
  nr.max_tokens = max_tokens;
  nr.arrival_us = now_us_;
  nr.deadline_us = deadline_us;
  nr.priority = priority;
  nr.reuse_prefix = reuse_prefix_;
  Result<RequestId> id = sched_->Submit(std::move(nr));
  if (id.ok()) {
    expected_[*id] = std::move(prompt);
    ++n_submitted_;
  }
  return id;
}

RequestId Harness::Submit(std::vector<int32_t> prompt, int64_t max_tokens, int32_t priority,
                          std::optional<int64_t> deadline_us) {
  Result<RequestId> id = TrySubmit(std::move(prompt), max_tokens, priority, deadline_us);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : -1;
}

void Harness::Record(Request r) {
  EXPECT_TRUE(r.finished());
  EXPECT_EQ(finished_.count(r.id), 0u) << "request " << r.id << " finished twice";
  const auto& exp = expected_[r.id];
  // The scheduler's token record is what the fake model produced (a prefix when a token
  // was produced for a request cancelled before Update).
  EXPECT_LE(r.tokens.size(), exp.size());
  EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), exp.begin()))
      << "request " << r.id << " token history differs from the model's";
  if (KindOf(r.finish_reason) == FinishKind::kCompleted) {
    EXPECT_EQ(r.tokens, exp);
  }
  if (r.finish_reason == FinishReason::kLength) {
    EXPECT_EQ(r.n_generated(), r.max_tokens);
  }
  finished_.emplace(r.id, std::move(r));
}

int64_t Harness::finished_count(FinishKind kind) const {
  return std::count_if(finished_.begin(), finished_.end(),
                       [&](const auto& kv) { return KindOf(kv.second.finish_reason) == kind; });
}

StepPlan Harness::Step() {
  StepPlan plan = sched_->Schedule(now_us_);
  const SchedulerKnobs knobs = sched_->knobs();
  EXPECT_LE(plan.n_tokens, knobs.max_step_tokens);
  EXPECT_LE(static_cast<int64_t>(plan.entries.size()), int64_t{knobs.max_running});
  bool seen_prefill = false;
  std::vector<RequestId> ids;
  for (const StepEntry& e : plan.entries) {
    if (e.is_decode) {
      EXPECT_FALSE(seen_prefill) << "decode after a prefill chunk";
    }
    seen_prefill = seen_prefill || !e.is_decode;
    ids.push_back(e.id);
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "request twice in a step";
  // A step that had to preempt admits nobody (only already-admitted requests run in it).
  for (RequestId id : plan.preempted) admitted_.erase(id);
  for (const StepEntry& e : plan.entries) {
    if (!plan.preempted.empty()) {
      EXPECT_EQ(admitted_.count(e.id), 1u)
          << "request " << e.id << " admitted in a step that preempted";
    }
    admitted_.insert(e.id);
  }
  for (Request& r : plan.cancelled) Record(r);
  for (Request& r : plan.expired) Record(r);

  std::vector<StepResult> results;
  for (const StepEntry& e : plan.entries) {
    auto& exp = expected_[e.id];
    const std::string err = kv_.Apply(e, exp, sched_->block_manager());
    EXPECT_EQ(err, "") << "step " << plan.step_index;
    auto fail = std::find(fail_next_.begin(), fail_next_.end(), e.id);
    if (fail != fail_next_.end()) {
      fail_next_.erase(fail);
      results.push_back({e.id, std::nullopt, FinishReason::kError, "injected fault"});
      continue;
    }
    if (!e.wants_token()) continue;
    const Request* live = sched_->Find(e.id);
    EXPECT_NE(live, nullptr);
    if (live == nullptr) continue;
    // Row by row as the engine samples: a sample equal to the draft at that row is accepted
    // and the next row is read; the first other sample (or the one after the whole draft)
    // ends the step, as does the stop rule.
    StepResult res{e.id, std::nullopt, FinishReason::kNone, "", {}};
    for (size_t row = 0; row <= e.draft.size(); ++row) {
      const int64_t n_gen = static_cast<int64_t>(exp.size()) - live->n_prompt_tokens;
      const int32_t tok = token_fn_(e.id, n_gen);
      exp.push_back(tok);
      const bool stop = stop_rule_ && stop_rule_(e.id, tok, n_gen + 1);
      if (!stop && row < e.draft.size() && tok == e.draft[row]) {
        res.tokens_ahead.push_back(tok);
        continue;
      }
      res.token = tok;
      if (stop) res.finish = FinishReason::kStop;
      break;
    }
    results.push_back(std::move(res));
  }
  for (Request& r : sched_->Update(results, now_us_)) Record(std::move(r));
  const Status st = sched_->CheckInvariants();
  EXPECT_TRUE(st.ok()) << st.ToString();

  StepPlan slim = plan;
  for (StepEntry& e : slim.entries) {
    e.block_table.clear();
    e.tokens.clear();
  }
  slim.cancelled.clear();
  slim.expired.clear();
  plans_.push_back(std::move(slim));
  now_us_ += step_us_;
  return plan;
}

int64_t Harness::RunUntilIdle(int64_t max_steps) {
  int64_t steps = 0;
  while (steps < max_steps) {
    const SchedulerStats s = sched_->stats();
    if (s.waiting + s.running == 0 && static_cast<int64_t>(finished_.size()) == n_submitted_) {
      break;
    }
    Step();
    ++steps;
    if (::testing::Test::HasFailure()) break;
  }
  return steps;
}

}  // namespace lifeline::testing

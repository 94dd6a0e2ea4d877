// Speculative decoding in the scheduler: prompt-lookup drafts (checked against a brute-force
// search), decodes that carry drafts, the engine's accepted prefix turned into computed
// positions, and rejected drafts never read back as valid K/V (the harness's FakeKv stores
// each drafted token at its position and fails any later step that reads a position holding
// something other than the request's real token).
#include <algorithm>
#include <numeric>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "sched_harness.h"
#include "scheduler/draft.h"

namespace lifeline {
namespace {

using testing::Config;
using testing::Harness;

// Independent of PromptLookupDraft's loop: every (n, start) pair, keeping the best by
// (longest n, then latest start).
std::vector<int32_t> BruteForceDraft(const std::vector<int32_t>& t, const DraftOptions& o) {
  const int64_t n = static_cast<int64_t>(t.size());
  int64_t best_g = 0, best_s = -1;
  for (int64_t g = o.min_ngram; g <= o.max_ngram; ++g) {
    if (g >= n) break;
    for (int64_t s = std::max<int64_t>(0, n - o.window_tokens); s + g < n; ++s) {
      bool same = true;
      for (int64_t i = 0; i < g; ++i) same = same && t[s + i] == t[n - g + i];
      if (same && (g > best_g || (g == best_g && s > best_s))) {
        best_g = g;
        best_s = s;
      }
    }
  }
  if (best_s < 0) return {};
  const int64_t from = best_s + best_g;
  const int64_t count = std::min<int64_t>(o.max_tokens, n - from);
  return std::vector<int32_t>(t.begin() + from, t.begin() + from + count);
}

TEST(PromptLookupDraft, ContinuesTheLatestEarlierOccurrenceOfTheLongestTail) {
  DraftOptions o;
  o.max_tokens = 4;
  // "5 6 7" occurs earlier twice; the later occurrence (followed by 9 9) wins.
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{5, 6, 7, 1, 2, 5, 6, 7, 9, 9, 3, 5, 6, 7}, o),
            (std::vector<int32_t>{9, 9, 3, 5}));
  // A longer tail match beats a later shorter one: "1 2 3" -> 4 (n = 3) over "3" -> 8 (n = 1).
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{1, 2, 3, 4, 0, 3, 8, 1, 2, 3}, o),
            (std::vector<int32_t>{4, 0, 3, 8}));
  // Near the end: fewer than max_tokens follow.
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{7, 7}, o), (std::vector<int32_t>{7}));
  EXPECT_TRUE(PromptLookupDraft(std::vector<int32_t>{1, 2, 3, 4}, o).empty());
  EXPECT_TRUE(PromptLookupDraft(std::vector<int32_t>{1}, o).empty());
  o.max_tokens = 0;
  EXPECT_TRUE(PromptLookupDraft(std::vector<int32_t>{1, 1, 1}, o).empty());
}

TEST(PromptLookupDraft, MatchesABruteForceSearch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    DraftOptions o;
    o.max_tokens = 1 + static_cast<int32_t>(rng() % 6);
    o.min_ngram = 1 + static_cast<int32_t>(rng() % 2);
    o.max_ngram = o.min_ngram + static_cast<int32_t>(rng() % 3);
    o.window_tokens = 4 + static_cast<int64_t>(rng() % 40);
    std::vector<int32_t> t(rng() % 50);
    const int32_t alphabet = 2 + static_cast<int32_t>(rng() % 5);
    for (int32_t& v : t) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(alphabet));
    ASSERT_EQ(PromptLookupDraft(t, o), BruteForceDraft(t, o)) << "trial " << trial;
  }
}

SchedulerKnobs SpecKnobs(int32_t max_running, int64_t max_step_tokens, int32_t spec_tokens,
                         int64_t spec_step_tokens = 16) {
  SchedulerKnobs k;
  k.max_running = max_running;
  k.max_step_tokens = max_step_tokens;
  k.spec_tokens = spec_tokens;
  k.spec_step_tokens = spec_step_tokens;
  return k;
}

// A model that repeats its prompt's last 8 tokens (so prompt lookup guesses right), except
// that every 13th token of request `id` is something new (so some drafts are rejected).
int32_t RepeatingToken(const std::vector<int32_t>& prompt, RequestId id, int64_t n_gen) {
  if (n_gen % 13 == 12) return static_cast<int32_t>(20000 + id * 100 + n_gen % 97);
  return prompt[prompt.size() - 8 + static_cast<size_t>(n_gen % 8)];
}

TEST(SchedulerSpeculation, DraftsAreVerifiedAndFewerStepsGiveTheSameTokens) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  int64_t steps[2] = {0, 0};
  std::vector<int32_t> tokens[2];
  for (int spec = 0; spec < 2; ++spec) {
    Harness h(Config(64, 4, 64));
    ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(4, 64, spec ? 4 : 0)).ok());
    h.set_token_fn([&](RequestId id, int64_t n) { return RepeatingToken(prompt, id, n); });
    const RequestId id = h.Submit(prompt, 100);
    steps[spec] = h.RunUntilIdle(1000);
    ASSERT_EQ(h.finished().count(id), 1u);
    const Request& r = h.finished().at(id);
    EXPECT_EQ(r.finish_reason, FinishReason::kLength);
    EXPECT_EQ(r.n_generated(), 100);
    tokens[spec] = r.tokens;
    const SchedulerStats s = h.sched().stats();
    if (spec) {
      EXPECT_GT(s.spec_accepted, 50) << "drafted " << s.spec_drafted;
      EXPECT_GT(s.spec_drafted, s.spec_accepted) << "no draft was ever rejected";
      EXPECT_EQ(r.spec_drafted, s.spec_drafted);
      EXPECT_EQ(r.spec_accepted, s.spec_accepted);
      for (const StepPlan& p : h.plans()) {
        for (const StepEntry& e : p.entries) EXPECT_LE(e.draft.size(), 4u);
      }
    } else {
      EXPECT_EQ(s.spec_drafted, 0);
    }
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_LT(steps[1] * 2, steps[0]) << "with drafts " << steps[1] << " steps, without " << steps[0];
}

TEST(SchedulerSpeculation, NoDraftsWhileARequestWaitsOrBeyondTheStepCap) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  // A 2-sequence batch so the third request waits; a step cap of 5 verification tokens.
  Harness h(Config(64, 2, 64));
  ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(2, 64, 4, 5)).ok());
  h.set_token_fn([&](RequestId id, int64_t n) { return RepeatingToken(prompt, id, n); });
  for (int i = 0; i < 3; ++i) h.Submit(prompt, 40);
  h.RunUntilIdle(1000);
  EXPECT_EQ(h.finished().size(), 3u);
  bool any_draft = false;
  const auto& plans = h.plans();
  for (size_t i = 0; i < plans.size(); ++i) {
    int64_t verify = 0;
    for (const StepEntry& e : plans[i].entries) {
      if (!e.draft.empty()) verify += 1 + static_cast<int64_t>(e.draft.size());
    }
    any_draft = any_draft || verify > 0;
    // Each drafted decode's own token and its draft come out of the cap of 5.
    EXPECT_LE(verify, 5) << "step " << i;
  }
  EXPECT_TRUE(any_draft);
  // While request 3 waited (the first two running), nobody drafted: find the steps before
  // request 3's first entry.
  for (const StepPlan& p : plans) {
    const bool third_runs = std::any_of(p.entries.begin(), p.entries.end(),
                                        [](const StepEntry& e) { return e.id == 3; });
    if (third_runs) break;
    for (const StepEntry& e : p.entries) EXPECT_TRUE(e.draft.empty()) << "step " << p.step_index;
  }
}

TEST(SchedulerSpeculation, EngineAcceptingSomethingOtherThanTheDraftFailsThatRequest) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 1, 2, 3, 4};
  auto sched = Scheduler::Create(Config(16, 2, 64));
  ASSERT_TRUE(sched.ok());
  Scheduler& s = **sched;
  ASSERT_TRUE(s.SetKnobs(SpecKnobs(2, 64, 3)).ok());
  NewRequest nr;
  nr.prompt_tokens = prompt;
  nr.max_tokens = 20;
  ASSERT_TRUE(s.Submit(nr).ok());
  StepPlan p = s.Schedule(0);  // prefill, samples the first token
  ASSERT_EQ(p.entries.size(), 1u);
  std::vector<StepResult> res = {{p.entries[0].id, 1, FinishReason::kNone, "", {}}};
  EXPECT_TRUE(s.Update(res, 1).empty());
  p = s.Schedule(2);  // "... 4 1" -> draft "2 3 4"
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].draft, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(p.entries[0].tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(p.entries[0].end_pos - p.entries[0].start_pos, 4);
  res = {{p.entries[0].id, 9, FinishReason::kNone, "", {2, 7}}};
  const std::vector<Request> done = s.Update(res, 3);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish_reason, FinishReason::kError);
  EXPECT_NE(done[0].error_message.find("not a prefix"), std::string::npos) << done[0].error_message;
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerSpeculation, RandomLoadWithDraftsKeepsTheCacheConsistent) {
  SchedulerConfig c = Config(40, 6, 48);  // a small pool: preemption under drafts too
  c.max_waiting = 24;
  c.max_waiting_tokens = 4000;
  Harness h(c, 1000);
  std::mt19937 rng(99);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Each request's output cycles through a few values (drafts often right), with deviations.
  h.set_token_fn([](RequestId id, int64_t n) {
    return static_cast<int32_t>(n % 11 == 10 ? 5000 + (id * 31 + n) % 200 : 1 + (id + n) % 5);
  });
  h.set_stop_rule([](RequestId id, int32_t token, int64_t) { return (token + id) % 53 == 0; });
  for (int step = 0; step < 2500; ++step) {
    if (pick(0, 3) == 0) {
      std::vector<int32_t> prompt;
      for (int i = 0, n = pick(1, 120); i < n; ++i) prompt.push_back(pick(1, 6));
      (void)h.TrySubmit(prompt, pick(1, 150), pick(0, 2));
    }
    if (pick(0, 19) == 0 && h.n_submitted() > 0) h.sched().Cancel(pick(1, static_cast<int>(h.n_submitted())));
    if (pick(0, 49) == 0) {
      ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(pick(1, 8), pick(8, 64), pick(0, 6), pick(1, 24))).ok());
    }
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(6, 48, 4)).ok());
  h.RunUntilIdle(20000);
  const SchedulerStats s = h.sched().stats();
  EXPECT_EQ(static_cast<int64_t>(h.finished().size()), h.n_submitted());
  EXPECT_EQ(s.completed + s.errored + s.cancelled, s.submitted);
  EXPECT_EQ(s.errored, 0);
  EXPECT_GT(s.spec_accepted, 0);
  EXPECT_GT(s.spec_drafted, s.spec_accepted);
  EXPECT_GT(s.preemptions, 0);
  EXPECT_TRUE(h.sched().CheckInvariants().ok());
}

// The cost model: drafts only where they raise the step's expected tokens per millisecond.
TEST(SchedulerSpeculation, DraftLengthFollowsTheCostOfLongerPasses) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  struct Case {
    std::vector<double> cost_ms;
    size_t first_draft;  // length of the first draft (acceptance prior 1/2)
  };
  // Passes that cost as much per token as single steps: never worth it. Nearly flat: the
  // longest. 1, 1.05, 1.1, 1.2 ms: (1 + .5) / 1.05 = 1.43, (1 + .75) / 1.1 = 1.59,
  // (1 + .875) / 1.2 = 1.56 tokens per ms -> 2 drafted tokens.
  const std::vector<Case> cases = {{{1, 2, 3, 4}, 0}, {{1, 1, 1, 1}, 3}, {{1, 1.05, 1.1, 1.2}, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.cost_ms));
    Harness h(Config(64, 4, 64));
    ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(4, 64, 3)).ok());
    h.sched().SetSpecCost(c.cost_ms);
    h.set_token_fn([&](RequestId id, int64_t n) { return RepeatingToken(prompt, id, n); });
    h.Submit(prompt, 60);
    h.RunUntilIdle(1000);
    size_t first = 0;
    for (const StepPlan& p : h.plans()) {
      for (const StepEntry& e : p.entries) {
        if (first == 0 && !e.draft.empty()) first = e.draft.size();
      }
    }
    EXPECT_EQ(first, c.first_draft);
    if (c.first_draft == 0) EXPECT_EQ(h.sched().stats().spec_drafted, 0);
  }
}

// The measured steps move the table: decode passes of 2-4 tokens that turn out 10x slower than
// the calibration said make drafting stop.
TEST(SchedulerSpeculation, ObservedSlowPassesTurnDraftingOff) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  Harness h(Config(64, 4, 64));
  ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(4, 64, 3)).ok());
  h.sched().SetSpecCost({1, 1, 1, 1});
  h.set_token_fn([&](RequestId id, int64_t n) { return RepeatingToken(prompt, id, n); });
  h.Submit(prompt, 200);
  for (int i = 0; i < 6; ++i) h.Step();
  const int64_t drafted = h.sched().stats().spec_drafted;
  EXPECT_GT(drafted, 0);
  for (int i = 0; i < 200; ++i) {
    for (int64_t n = 2; n <= 4; ++n) h.sched().ObserveSpecCost(n, 10.0);
  }
  h.sched().ObserveSpecCost(9, 1.0);  // beyond the table: ignored
  h.RunUntilIdle(1000);
  EXPECT_EQ(h.sched().stats().spec_drafted, drafted);
}

// A drafter that knows the model but always gets its third guess wrong, proposes more than
// asked, and records what it was told.
class OracleDrafter final : public Drafter {
 public:
  explicit OracleDrafter(std::vector<int32_t> prompt, double ms_per_token = 0)
      : prompt_(std::move(prompt)), ms_per_token_(ms_per_token) {}
  std::vector<int32_t> Draft(int64_t id, std::span<const int32_t> tokens,
                             int32_t max_tokens) override {
    ++calls;
    max_asked = std::max(max_asked, max_tokens);
    const int64_t n_gen = static_cast<int64_t>(tokens.size() - prompt_.size());
    std::vector<int32_t> d;
    for (int32_t i = 0; i < max_tokens + 2; ++i) {  // more than asked: the scheduler trims
      const int32_t right = RepeatingToken(prompt_, id, n_gen + i);
      d.push_back(i == 2 ? right + 1 : right);       // the third guess is always wrong
    }
    return d;
  }
  void Forget(int64_t id) override { forgotten.push_back(id); }
  double ms_per_token() const override { return ms_per_token_; }

  int64_t calls = 0;
  int32_t max_asked = 0;
  std::vector<int64_t> forgotten;

 private:
  std::vector<int32_t> prompt_;
  double ms_per_token_;
};

// Drafts come from the drafter the scheduler was given: the accepted ones are exactly the
// drafted tokens before its first wrong guess, the tokens are those of decoding one at a
// time, every finished request is forgotten once, and no draft exceeds spec_tokens.
TEST(SchedulerSpeculation, DraftsComeFromTheGivenDrafterWhichForgetsFinishedRequests) {
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12, 13, 14, 15, 16, 17};
  std::vector<int32_t> tokens[2];
  for (int spec = 0; spec < 2; ++spec) {
    Harness h(Config(64, 4, 64));
    ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(4, 64, spec ? 4 : 0)).ok());
    auto drafter = std::make_unique<OracleDrafter>(prompt);
    OracleDrafter* d = drafter.get();
    h.sched().SetDrafter(std::move(drafter));
    h.set_token_fn([&](RequestId id, int64_t n) { return RepeatingToken(prompt, id, n); });
    const RequestId a = h.Submit(prompt, 40);
    h.RunUntilIdle(1000);
    const RequestId b = h.Submit(prompt, 5);
    h.RunUntilIdle(1000);
    ASSERT_EQ(h.finished().count(a), 1u);
    ASSERT_EQ(h.finished().count(b), 1u);
    tokens[spec] = h.finished().at(a).tokens;
    EXPECT_EQ(d->forgotten, (std::vector<int64_t>{a, b}));
    if (!spec) {
      EXPECT_EQ(d->calls, 0);
      continue;
    }
    EXPECT_GT(d->calls, 0);
    EXPECT_LE(d->max_asked, 4);
    const SchedulerStats s = h.sched().stats();
    EXPECT_GT(s.spec_accepted, 0);
    EXPECT_LT(s.spec_accepted, s.spec_drafted) << "the third guess is wrong";
    for (const StepPlan& p : h.plans()) {
      for (const StepEntry& e : p.entries) EXPECT_LE(e.draft.size(), 4u);
    }
  }
  EXPECT_EQ(tokens[0], tokens[1]);
}

// A drafter's own cost counts: with flat verification passes, a free drafter drafts, one
// whose token costs as much as a pass does not.
TEST(SchedulerSpeculation, ADrafterThatCostsAsMuchAsAPassIsNotUsed) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  for (const double draft_ms : {0.0, 0.05, 1.0}) {
    SCOPED_TRACE(draft_ms);
    Harness h(Config(64, 4, 64));
    ASSERT_TRUE(h.sched().SetKnobs(SpecKnobs(4, 64, 3)).ok());
    h.sched().SetSpecCost({1, 1, 1, 1});
    h.sched().SetDrafter(std::make_unique<OracleDrafter>(prompt, draft_ms));
    h.set_token_fn([&](RequestId id, int64_t n) { return RepeatingToken(prompt, id, n); });
    h.Submit(prompt, 30);
    h.RunUntilIdle(1000);
    // At the prior acceptance 1/2: k drafted tokens gain 1 - 2^-k for k * draft_ms more;
    // 1 ms per token never pays ((1 + .5) / 2 < 1), 0.05 ms does.
    if (draft_ms < 1.0) {
      EXPECT_GT(h.sched().stats().spec_drafted, 0);
    } else {
      EXPECT_EQ(h.sched().stats().spec_drafted, 0);
    }
  }
}

TEST(SchedulerSpeculation, SetKnobsValidatesTheSpeculationKnobs) {
  auto sched = Scheduler::Create(Config(16, 2, 64));
  ASSERT_TRUE(sched.ok());
  EXPECT_FALSE((*sched)->SetKnobs(SpecKnobs(2, 64, -1)).ok());
  EXPECT_FALSE((*sched)->SetKnobs(SpecKnobs(2, 64, kMaxSpecTokens + 1)).ok());
  EXPECT_FALSE((*sched)->SetKnobs(SpecKnobs(2, 64, 4, 0)).ok());
  EXPECT_TRUE((*sched)->SetKnobs(SpecKnobs(2, 64, kMaxSpecTokens)).ok());
}

}  // namespace
}  // namespace lifeline

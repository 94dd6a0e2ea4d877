// ModelDrafter on the real stories260K model: its drafts are the draft model's own greedy
// continuation (checked against a Session that decodes the same tokens one call at a time),
// also after a partly accepted draft, between interleaved requests and when a request's
// state was evicted; and a draft of another vocabulary is refused.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/model/session.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/model_drafter.h"
#include "test_paths.h"

namespace lifeline::serving {
namespace {

struct Loaded {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded Load(const std::string& rel) {
  Loaded out;
  auto file = GgufFile::Open(lifeline::testing::SharedPath(rel), {});
  EXPECT_TRUE(file.ok()) << rel;
  if (!file.ok()) return out;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok());
  if (!tok.ok()) return out;
  auto model = LlamaModel::Load(std::move(file).value(), ReferenceKernels());
  EXPECT_TRUE(model.ok());
  if (!model.ok()) return out;
  out.model = std::move(model).value();
  out.tokenizer = std::move(tok).value();
  return out;
}

int32_t Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The reference: a fresh Session fed `prefix` as one prompt, then `steps` more tokens one at a
// time, then k greedy tokens, one decode each.
std::vector<int32_t> Greedy(const LlamaModel& model, ComputePool& pool,
                            const std::vector<int32_t>& prefix, const std::vector<int32_t>& steps,
                            int k) {
  auto s = Session::Create(model, pool);
  EXPECT_TRUE(s.ok());
  auto logits = (*s)->Prefill(prefix);
  EXPECT_TRUE(logits.ok());
  for (int32_t t : steps) logits = (*s)->Decode(t);
  std::vector<int32_t> out;
  for (int i = 0; i < k; ++i) {
    EXPECT_TRUE(logits.ok());
    out.push_back(Argmax(*logits));
    if (i + 1 < k) logits = (*s)->Decode(out.back());
  }
  return out;
}

class ModelDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reference_ = Load("models/stories260K.gguf");
    Loaded draft = Load("models/stories260K.gguf");
    ASSERT_TRUE(reference_.model && draft.model);
    tokenizer_ = std::move(draft.tokenizer);
    prompt_ = tokenizer_->Encode("Once upon a time, there was a little", true, true);
    ASSERT_GT(prompt_.size(), 4u);
  }
  std::unique_ptr<ModelDrafter> MakeDrafter(int32_t max_sequences, int64_t chunk_tokens = 64) {
    Loaded draft = Load("models/stories260K.gguf");
    ModelDrafterOptions o;
    o.max_batch_tokens = chunk_tokens;
    o.n_ctx = 256;
    o.max_sequences = max_sequences;
    o.kv_memory_bytes = 8u << 20;
    auto d = ModelDrafter::Create(std::move(draft.model), pool_, o);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(d).value() : nullptr;
  }

  ComputePool pool_{1};
  Loaded reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> prompt_;
};

TEST_F(ModelDrafterTest, DraftsAreTheGreedyContinuationAlsoAfterAPartlyAcceptedDraft) {
  auto d = MakeDrafter(4);
  ASSERT_NE(d, nullptr);
  const std::vector<int32_t> first = d->Draft(1, prompt_, 6);
  ASSERT_EQ(first, Greedy(*reference_.model, pool_, prompt_, {}, 6));
  // The target took two of the drafted tokens and then sampled something else: the drafter
  // drops the rest of its positions and continues from the target's token.
  std::vector<int32_t> tokens = prompt_;
  tokens.insert(tokens.end(), first.begin(), first.begin() + 2);
  const int32_t other = first[2] == 5 ? 6 : 5;
  tokens.push_back(other);
  const std::vector<int32_t> second = d->Draft(1, tokens, 4);
  EXPECT_EQ(second, Greedy(*reference_.model, pool_, prompt_, {first[0], first[1], other}, 4));
  EXPECT_EQ(d->sequences_kept(), 1);
  EXPECT_GT(d->TakeElapsedMs(), 0.0);
  EXPECT_EQ(d->TakeElapsedMs(), 0.0);
  EXPECT_GT(d->ms_per_token(), 0.0);
  d->Forget(1);
  EXPECT_EQ(d->sequences_kept(), 0);
}

TEST_F(ModelDrafterTest, InterleavedAndEvictedRequestsStillGetTheirOwnContinuation) {
  const std::vector<int32_t> other_prompt = tokenizer_->Encode("Tom had a red ball. Tom", true, true);
  const std::vector<int32_t> want_a = Greedy(*reference_.model, pool_, prompt_, {}, 3);
  const std::vector<int32_t> want_b = Greedy(*reference_.model, pool_, other_prompt, {}, 3);
  for (const int32_t max_sequences : {4, 1}) {  // 1: each call evicts the other request
    SCOPED_TRACE(max_sequences);
    auto d = MakeDrafter(max_sequences);
    ASSERT_NE(d, nullptr);
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(d->Draft(10, prompt_, 3), want_a);
      EXPECT_EQ(d->Draft(11, other_prompt, 3), want_b);
    }
    EXPECT_EQ(d->sequences_kept(), max_sequences == 1 ? 1 : 2);
  }
}

// A backlog longer than one chunk is fed a chunk per call, with no draft until caught up;
// then the draft is the same greedy continuation.
TEST_F(ModelDrafterTest, ALongBacklogIsFedAChunkPerCallBeforeDrafting) {
  auto d = MakeDrafter(2, /*chunk_tokens=*/4);
  ASSERT_NE(d, nullptr);
  std::vector<int32_t> prompt = prompt_;
  for (int i = 0; prompt.size() < 14; ++i) prompt.push_back(prompt_[1 + i % (prompt_.size() - 1)]);
  int empty_calls = 0;
  std::vector<int32_t> draft;
  for (int call = 0; call < 10 && draft.empty(); ++call) {
    draft = d->Draft(1, prompt, 3);
    if (draft.empty()) ++empty_calls;
  }
  // 14 tokens in chunks of 4: 4, 8 and 12 fed without a draft, then the last 2 and the draft.
  EXPECT_EQ(empty_calls, 3);
  EXPECT_EQ(draft, Greedy(*reference_.model, pool_, prompt, {}, 3));
  EXPECT_EQ(d->sequences_kept(), 1);
}

TEST_F(ModelDrafterTest, NoDraftPastTheContextOrForNothing) {
  auto d = MakeDrafter(2);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->Draft(1, {}, 4).empty());
  EXPECT_TRUE(d->Draft(1, prompt_, 0).empty());
  std::vector<int32_t> long_tokens(254, 5);
  EXPECT_TRUE(d->Draft(1, long_tokens, 3).empty()) << "254 + 3 positions > n_ctx 256";
  std::vector<int32_t> draft;  // 254 tokens: fed in chunks of 64 first
  for (int call = 0; call < 8 && draft.empty(); ++call) draft = d->Draft(1, long_tokens, 2);
  EXPECT_EQ(draft.size(), 2u);
}

TEST(DraftVocab, ADraftOfAnotherVocabularyIsRefusedNamingBothSizes) {
  Loaded stories = Load("models/stories260K.gguf");
  Loaded random = Load("models/llama-2-tiny-random.gguf");
  ASSERT_TRUE(stories.tokenizer && random.tokenizer);
  EXPECT_TRUE(CheckSameVocab(*stories.tokenizer, *stories.tokenizer).ok());
  const Status s = CheckSameVocab(*random.tokenizer, *stories.tokenizer);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("512"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("32000"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lifeline::serving

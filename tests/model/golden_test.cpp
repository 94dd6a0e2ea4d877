// Golden tests: our forward pass against logits recorded from llama.cpp for the shared tiny
// models (../shared/reference/logits/*.json). Expected values come only from those files.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/model/session.h"
#include "model/model_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

namespace fs = std::filesystem;

struct GoldenCase {
  std::string json_path;
  std::string model_name;
};

std::vector<GoldenCase> ListCases() {
  std::vector<GoldenCase> cases;
  const fs::path dir = testing::SharedPath("reference/logits");
  if (!fs::exists(dir)) return cases;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    // "<model>.p1.json" -> "<model>"
    const std::string stem = e.path().stem().string();  // "<model>.p1"
    cases.push_back({e.path().string(), stem.substr(0, stem.rfind('.'))});
  }
  std::sort(cases.begin(), cases.end(),
            [](const GoldenCase& a, const GoldenCase& b) { return a.json_path < b.json_path; });
  return cases;
}

std::string ModelPath(const std::string& name) {
  for (const char* dir : {"reference/models/", "models/"}) {
    const std::string p = testing::SharedPath(std::string(dir) + name + ".gguf");
    if (fs::exists(p)) return p;
  }
  return "";
}

struct Top2 {
  int32_t id1 = -1;
  float v1 = -INFINITY;
  float v2 = -INFINITY;
  float margin() const { return v1 - v2; }
};

Top2 TopTwo(const float* logits, int64_t n) {
  Top2 t;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] > t.v1) {
      t.v2 = t.v1;
      t.v1 = logits[i];
      t.id1 = static_cast<int32_t>(i);
    } else if (logits[i] > t.v2) {
      t.v2 = logits[i];
    }
  }
  return t;
}

struct GoldenResult {
  int greedy_matched = 0;   // leading greedy tokens equal to the reference
  int greedy_asserted = 0;  // of those, how many had our margin >= tolerance
  bool greedy_stopped_on_margin = false;
  double max_abs_err = 0;
  double tol = 0;
};

// Compares one reference file against the model under `kernels`. Returns what it measured so
// callers can add model-specific expectations.
GoldenResult RunGolden(const GoldenCase& gc, const KernelTable& kernels) {
  GoldenResult r;
  std::ifstream in(gc.json_path);
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string model_path = ModelPath(gc.model_name);
  EXPECT_FALSE(model_path.empty()) << "no model file for " << gc.model_name;
  if (model_path.empty()) return r;

  auto file = GgufFile::Open(model_path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return r;
  const GgmlType wtype = DominantWeightType(**file);
  auto model = LlamaModel::Load(std::move(*file), kernels);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return r;
  const ModelConfig& cfg = (*model)->config();
  const int64_t n_vocab = cfg.n_vocab;
  EXPECT_EQ(n_vocab, ref["n_vocab"].get<int64_t>());

  const std::vector<int32_t> prompt = ref["prompt_tokens"].get<std::vector<int32_t>>();
  const auto& positions = ref["positions"];
  EXPECT_EQ(positions.size(), prompt.size());

  // One thread: the suite is about numbers, and a busy shared CPU makes a fork-join pool
  // wait on descheduled workers. Threaded attention/matmul splits are covered in forward_test.
  ComputePool pool(1);
  ContextOptions opts;
  opts.n_ctx = 128;
  auto session = Session::Create(**model, pool, opts);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return r;
  LlamaContext& ctx = (*session)->context();

  // Whole prompt in one batch, logits for every position.
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back({prompt[i], static_cast<int64_t>(i), (*session)->sequence(), true});
  }
  std::vector<float> logits(prompt.size() * static_cast<size_t>(n_vocab));  // [n_prompt, n_vocab]
  const Status st = (*model)->Eval(batch, ctx, pool, logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return r;

  for (size_t p = 0; p < positions.size(); ++p) {
    const float* row = logits.data() + p * static_cast<size_t>(n_vocab);
    const auto& pos = positions[p];
    const auto& top = pos["top"];
    const double ref_top1 = top[0][1].get<double>();
    const double ref_top2 = top[1][1].get<double>();
    const double tol = LogitTolerance(wtype, pos["logit_sum"].get<double>(),
                                      pos["logit_sumsq"].get<double>(), n_vocab);
    r.tol = std::max(r.tol, tol);
    for (const auto& entry : top) {
      const int32_t id = entry[0].get<int32_t>();
      const double want = entry[1].get<double>();
      const double err = std::fabs(row[id] - want);
      r.max_abs_err = std::max(r.max_abs_err, err);
      EXPECT_LE(err, tol) << gc.json_path << " pos " << p << " token " << id << ": ours "
                          << row[id] << " reference " << want;
    }
    if (ref_top1 - ref_top2 > 2 * tol) {
      EXPECT_EQ(TopTwo(row, n_vocab).id1, top[0][0].get<int32_t>())
          << gc.json_path << " pos " << p << ": top-1 differs with reference gap "
          << ref_top1 - ref_top2;
    }
    // Whole-vocabulary sums: each logit may be off by up to tol, and the reference rounds
    // these to 6 significant digits.
    double sum = 0, sumsq = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      sum += row[i];
      sumsq += static_cast<double>(row[i]) * row[i];
    }
    const double ref_sum = pos["logit_sum"].get<double>();
    const double ref_sumsq = pos["logit_sumsq"].get<double>();
    EXPECT_NEAR(sum, ref_sum, tol * n_vocab + 1e-5 * std::fabs(ref_sum))
        << gc.json_path << " pos " << p;
    EXPECT_NEAR(sumsq, ref_sumsq, 2 * tol * std::sqrt(ref_sumsq * n_vocab) + 1e-5 * ref_sumsq)
        << gc.json_path << " pos " << p;
  }

  // Greedy decode one token at a time, continuing the prompt's cached sequence. Equality is
  // asserted while our top1-top2 margin is at least the tolerance (below it, a legitimate
  // rounding difference may flip the choice); after that we keep counting matches until the
  // first difference, for the report and for models whose every token must match.
  const std::vector<int32_t> greedy = ref["greedy"].get<std::vector<int32_t>>();
  Top2 cur = TopTwo(logits.data() + (prompt.size() - 1) * static_cast<size_t>(n_vocab), n_vocab);
  for (size_t step = 0; step < greedy.size(); ++step) {
    if (cur.margin() < r.tol && !r.greedy_stopped_on_margin) {
      r.greedy_stopped_on_margin = true;
      r.greedy_asserted = r.greedy_matched;
    }
    if (!r.greedy_stopped_on_margin) {
      EXPECT_EQ(cur.id1, greedy[step]) << gc.json_path << " greedy step " << step;
    }
    if (cur.id1 != greedy[step]) break;
    ++r.greedy_matched;
    auto next = (*session)->Decode(cur.id1);
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok()) break;
    cur = TopTwo(next->data(), n_vocab);
  }
  if (!r.greedy_stopped_on_margin) r.greedy_asserted = r.greedy_matched;
  std::printf("[golden] %-28s %-6s tol %.2e max err %.2e greedy matched %2d/%zu (asserted %d)\n",
              fs::path(gc.json_path).filename().c_str(),
              std::string(IsaLevelName(kernels.isa)).c_str(), r.tol, r.max_abs_err,
              r.greedy_matched, greedy.size(), r.greedy_asserted);
  return r;
}

void RunAllGolden(const KernelTable& kernels) {
  const std::vector<GoldenCase> cases = ListCases();
  ASSERT_GE(cases.size(), 4u) << "reference logits missing under " << testing::SharedDir();
  for (const GoldenCase& gc : cases) {
    SCOPED_TRACE(gc.json_path);
    const GoldenResult r = RunGolden(gc, kernels);
    // The trained model has wide margins: every greedy token must match.
    if (gc.model_name == "stories260K") {
      EXPECT_EQ(r.greedy_matched, 32) << gc.json_path;
    }
  }
}

TEST(Golden, AllReferenceLogitsReferenceKernels) { RunAllGolden(ReferenceKernels()); }

// The kernels the engine really runs on this CPU (SIMD when available; they quantize
// activations like llama.cpp does), held to the same tolerances.
TEST(Golden, AllReferenceLogitsBestKernels) { RunAllGolden(BestKernels()); }

// Every lower SIMD level this CPU also runs (AVX2 on an AVX-512 machine), with the matrices
// that level repacks in its row-interleaved layout: the same tolerances, so a level that only
// ships to other CPUs is held to the independent reference too.
TEST(Golden, AllReferenceLogitsEveryLowerSimdLevel) {
  int ran = 0;
  for (IsaLevel level : {IsaLevel::kAvx2}) {
    if (level >= DetectIsa() || level == BestKernels().isa) continue;
    SCOPED_TRACE(std::string(IsaLevelName(level)));
    RunAllGolden(KernelsFor(level));
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no SIMD level below the best one on this CPU";
}

}  // namespace
}  // namespace lifeline

// LatencyTracker: per (class, model) windows, class-level merges, cumulative totals, threads.
#include "slo/latency_tracker.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline::slo {
namespace {

constexpr double kErr = LogHistogram::kRelativeError;

TEST(LatencyTrackerTest, PerModelAndMergedClassPercentiles) {
  LatencyTracker t(WindowSpec{1'000'000, 10});
  for (int i = 1; i <= 100; ++i) t.Record("chat", "big", Metric::kTtft, 500'000, i);
  for (int i = 101; i <= 200; ++i) t.Record("chat", "small", Metric::kTtft, 500'000, i);
  t.Record("medical", "big", Metric::kE2e, 500'000, 42);
  const TrackerSnapshot s = t.Snapshot(900'000);
  ASSERT_EQ(s.by_class_model.size(), 3u);
  ASSERT_EQ(s.by_class.size(), 2u);
  const SeriesSnapshot* big = s.Find("chat", "big");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ((*big)[Metric::kTtft].count, 100u);
  EXPECT_NEAR((*big)[Metric::kTtft].p95_ms, 95, 95 * kErr);    // 95th of 1..100
  EXPECT_NEAR((*big)[Metric::kTtft].p50_ms, 50, 50 * kErr);
  EXPECT_DOUBLE_EQ((*big)[Metric::kTtft].mean_ms, 50.5);
  const SeriesSnapshot* small = s.Find("chat", "small");
  EXPECT_NEAR((*small)[Metric::kTtft].p99_ms, 199, 199 * kErr);  // 99th of 101..200
  const SeriesSnapshot* chat = s.FindClass("chat");
  ASSERT_NE(chat, nullptr);
  EXPECT_TRUE(chat->model.empty());
  EXPECT_EQ((*chat)[Metric::kTtft].count, 200u);
  EXPECT_NEAR((*chat)[Metric::kTtft].p95_ms, 190, 190 * kErr);   // 190th of 1..200
  EXPECT_EQ((*chat)[Metric::kE2e].count, 0u);
  EXPECT_EQ(s.FindClass("medical")->window[static_cast<size_t>(Metric::kE2e)].count, 1u);
  EXPECT_EQ(s.Find("chat", "nope"), nullptr);
  // Class rows carry the merged cumulative histograms too.
  EXPECT_EQ(chat->total[static_cast<size_t>(Metric::kTtft)].count(), 200u);
}

TEST(LatencyTrackerTest, RecordRequestFansOutAndWindowsExpireButTotalsDoNot) {
  LatencyTracker t(WindowSpec{1'000'000, 5});
  const std::vector<double> itl = {10, 20, 30};
  RequestSample full;
  full.ttft_ms = 100;
  full.tpot_ms = 20;
  full.queue_ms = 5;
  full.e2e_ms = 160;
  full.itl_ms = itl;
  t.RecordRequest("chat", "m", 0, full);
  RequestSample rejected;  // rejected before a token
  rejected.queue_ms = 7;
  t.RecordRequest("chat", "m", 0, rejected);
  TrackerSnapshot s = t.Snapshot(100);
  const SeriesSnapshot* m = s.Find("chat", "m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ((*m)[Metric::kTtft].count, 1u);
  EXPECT_EQ((*m)[Metric::kTpot].count, 1u);
  EXPECT_EQ((*m)[Metric::kQueue].count, 2u);
  EXPECT_EQ((*m)[Metric::kE2e].count, 1u);
  EXPECT_EQ((*m)[Metric::kItl].count, 3u);
  EXPECT_NEAR((*m)[Metric::kItl].p50_ms, 20, 20 * kErr);
  EXPECT_DOUBLE_EQ((*m)[Metric::kE2e].p95_ms, 160);  // one value: exact

  s = t.Snapshot(5'000'000);  // epoch 5: epoch 0 is out of a 5-bucket window
  m = s.Find("chat", "m");
  EXPECT_EQ((*m)[Metric::kTtft].count, 0u);
  EXPECT_EQ(m->total[static_cast<size_t>(Metric::kTtft)].count(), 1u);
  EXPECT_EQ(m->total[static_cast<size_t>(Metric::kItl)].count(), 3u);
  EXPECT_NEAR(m->total[static_cast<size_t>(Metric::kItl)].sum_s(), 0.06, 1e-12);
}

TEST(LatencyTrackerTest, ConcurrentRecordersLoseNothing) {
  LatencyTracker t;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&t, i] {
      for (int k = 0; k < kPerThread; ++k) {
        t.Record(i % 2 ? "chat" : "medical", "m", Metric::kItl, 1000, 1 + k % 50);
        if (k % 500 == 0) (void)t.Snapshot(1000);
      }
    });
  }
  for (auto& th : threads) th.join();
  const TrackerSnapshot s = t.Snapshot(1000);
  EXPECT_EQ(s.FindClass("chat")->window[static_cast<size_t>(Metric::kItl)].count,
            uint64_t{kThreads / 2 * kPerThread});
  EXPECT_EQ(s.FindClass("medical")->window[static_cast<size_t>(Metric::kItl)].count,
            uint64_t{kThreads / 2 * kPerThread});
}

TEST(LatencyTrackerTest, MetricNames) {
  EXPECT_EQ(MetricName(Metric::kTtft), "ttft");
  EXPECT_EQ(MetricName(Metric::kTpot), "tpot");
  EXPECT_EQ(MetricName(Metric::kItl), "itl");
  EXPECT_EQ(MetricName(Metric::kQueue), "queue");
  EXPECT_EQ(MetricName(Metric::kE2e), "e2e");
  EXPECT_EQ(MetricName(Metric::kTtfa), "ttfa");
  EXPECT_EQ(MetricName(Metric::kThink), "think");
}

// Every metric's window is the tracker's: time to first answer and thinking time expire with
// the others (they once kept a default-length window and held an idle ladder up).
TEST(LatencyTrackerTest, EveryMetricWindowExpiresTogether) {
  LatencyTracker t(WindowSpec{1'000'000, 5});
  RequestSample r;
  r.ttft_ms = 10;
  r.e2e_ms = 900;
  r.ttfa_ms = 600;
  r.think_ms = 590;
  t.RecordRequest("chat", "m", 0, r);
  TrackerSnapshot s = t.Snapshot(100);
  EXPECT_EQ((*s.Find("chat", "m"))[Metric::kTtfa].count, 1u);
  EXPECT_DOUBLE_EQ((*s.Find("chat", "m"))[Metric::kThink].p95_ms, 590);
  s = t.Snapshot(5'000'000);
  for (Metric m : kAllMetrics) {
    EXPECT_EQ((*s.Find("chat", "m"))[m].count, 0u) << MetricName(m);
  }
  EXPECT_EQ(s.Find("chat", "m")->total[static_cast<size_t>(Metric::kTtfa)].count(), 1u);
}

// A request still thinking (first token out, no answer yet) is a lower bound of its TTFA:
// a ladder on TTFA sees a thinking request age, not only the answers that finally came.
TEST(LatencyTrackerInFlightTest, RequestsWithoutAnAnswerCensorTtfa) {
  LatencyTracker t(WindowSpec{1'000'000, 10});
  RequestSample r;
  r.ttfa_ms = 100;
  t.RecordRequest("chat", "m", 9'000'000, r);
  const std::vector<InFlightRequest> in_flight = {
      {"chat", "m", 4'000'000, true, false},  // thinking for 6 s
      {"chat", "m", 9'000'000, true, true},   // answering
  };
  LatencyTracker::SnapshotOptions o;
  o.has_in_flight = true;
  o.in_flight = in_flight;
  const TrackerSnapshot s = t.Snapshot(10'000'000, o);
  const WindowStats& ttfa = (*s.Find("chat", "m")->censored)[static_cast<size_t>(Metric::kTtfa)];
  EXPECT_EQ(ttfa.count, 2u);
  EXPECT_DOUBLE_EQ(ttfa.p99_ms, 6000);
  EXPECT_EQ((*s.Find("chat", "m")->censored)[static_cast<size_t>(Metric::kTtft)].count, 0u)
      << "both have their first token";
}

TEST(LatencyTrackerTest, SinceChangeCoversOnlyNamedClassesAndNewerBuckets) {
  LatencyTracker t(WindowSpec{1'000'000, 10});
  for (int i = 0; i < 10; ++i) t.Record("chat", "big", Metric::kTtft, 500'000, 1000);   // epoch 0
  for (int i = 0; i < 5; ++i) t.Record("chat", "small", Metric::kTtft, 2'500'000, 10);  // epoch 2
  t.Record("medical", "big", Metric::kTtft, 2'500'000, 7);
  const LatencyTracker::SinceByClass since = {{"chat", 1'000'000}};
  const TrackerSnapshot s = t.Snapshot(3'000'000, &since);
  const SeriesSnapshot* chat = s.FindClass("chat");
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ((*chat)[Metric::kTtft].count, 15u);  // the whole window, both models
  ASSERT_TRUE(chat->since_change.has_value());
  const WindowStats& fresh = (*chat->since_change)[static_cast<size_t>(Metric::kTtft)];
  EXPECT_EQ(fresh.count, 5u);  // only epoch 2's samples, merged over models
  EXPECT_NEAR(fresh.p95_ms, 10, 0.2);
  const SeriesSnapshot* medical = s.FindClass("medical");
  ASSERT_NE(medical, nullptr);
  EXPECT_FALSE(medical->since_change.has_value());  // not asked for
  EXPECT_FALSE(t.Snapshot(3'000'000).FindClass("chat")->since_change.has_value());
}

}  // namespace
}  // namespace lifeline::slo

namespace lifeline::slo {
namespace {

// Requests in flight: their ages are lower bounds (TTFT for the waiting, e2e for all), a
// (class, model) with requests in flight but no sample yet gets a row, and the top ages are
// listed oldest first.
TEST(LatencyTrackerInFlightTest, AgesAreCensoredSamplesAndRowsExistBeforeTheFirstSample) {
  LatencyTracker t(WindowSpec{1'000'000, 10});
  for (int i = 0; i < 8; ++i) t.Record("chat", "a", Metric::kTtft, 9'000'000, 100);
  const std::vector<InFlightRequest> in_flight = {
      {"chat", "a", 7'000'000, false},  // waiting 3 s
      {"chat", "a", 9'500'000, true},   // first token out, 0.5 s old
      {"chat", "b", 8'000'000, false},  // a model with no sample yet, waiting 2 s
  };
  LatencyTracker::SnapshotOptions o;
  o.has_in_flight = true;
  o.in_flight = in_flight;
  const TrackerSnapshot s = t.Snapshot(10'000'000, o);
  EXPECT_TRUE(s.has_in_flight);
  const SeriesSnapshot* a = s.Find("chat", "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->in_flight.requests, 2);
  EXPECT_EQ(a->in_flight.waiting, 1);
  EXPECT_EQ(a->in_flight.waiting_ages_ms, (std::vector<double>{3000}));
  EXPECT_EQ(a->in_flight.ages_ms, (std::vector<double>{3000, 500}));
  ASSERT_TRUE(a->censored.has_value());
  const WindowStats& ttft = (*a->censored)[static_cast<size_t>(Metric::kTtft)];
  EXPECT_EQ(ttft.count, 9u);  // 8 samples + 1 waiting
  EXPECT_DOUBLE_EQ(ttft.p99_ms, 3000);  // the max is exact
  EXPECT_EQ((*a->censored)[static_cast<size_t>(Metric::kE2e)].count, 2u);
  EXPECT_EQ((*a)[Metric::kTtft].count, 8u);  // the window itself is untouched
  const SeriesSnapshot* b = s.Find("chat", "b");
  ASSERT_NE(b, nullptr) << "a model with requests in flight has a row";
  EXPECT_EQ(b->in_flight.waiting, 1);
  EXPECT_EQ((*b)[Metric::kTtft].count, 0u);
  const SeriesSnapshot* chat = s.FindClass("chat");
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->in_flight.requests, 3);
  EXPECT_EQ(chat->in_flight.waiting_ages_ms, (std::vector<double>{3000, 2000}));
  // Without the in-flight set nothing is censored.
  EXPECT_FALSE(t.Snapshot(10'000'000).Find("chat", "a")->censored.has_value());
}

// A request dropped as late leaves a lower bound of its TTFT for the controller's window, but
// not in the cumulative histograms /metrics shows as served latencies.
TEST(LatencyTrackerInFlightTest, LowerBoundsGoToTheWindowOnly) {
  LatencyTracker t;
  t.RecordLowerBound("chat", "a", Metric::kTtft, 1000, 900);
  const TrackerSnapshot s = t.Snapshot(2000);
  const SeriesSnapshot* a = s.Find("chat", "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ((*a)[Metric::kTtft].count, 1u);
  EXPECT_EQ(a->total[static_cast<size_t>(Metric::kTtft)].count(), 0u);
  EXPECT_EQ(a->last_record_us, 1000);
}

}  // namespace
}  // namespace lifeline::slo

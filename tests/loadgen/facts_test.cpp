// Model facts from /v1/models bodies of several servers and from `inspect --json`, name
// heuristics, /proc/cpuinfo, /v1/slo events and the serve listening line.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/loadgen/local_server.h"
#include "bench/loadgen/server_facts.h"

namespace lifeline::loadgen {
namespace {

TEST(ModelFacts, LifelineLlamaCppAndVllmBodies) {
  const nlohmann::json lifeline = nlohmann::json::parse(R"({"object":"list","data":[
      {"id":"a","object":"model"},
      {"id":"stories","object":"model","meta":{"context_length":2048}}]})");
  ModelFacts f = FactsFromModelsList(lifeline, "stories");
  EXPECT_EQ(f.id, "stories");
  EXPECT_EQ(f.context_length, 2048);
  EXPECT_EQ(f.parameters, "");
  EXPECT_EQ(FactsFromModelsList(lifeline, "").id, "a");        // first by default
  EXPECT_EQ(FactsFromModelsList(lifeline, "missing").id, "a");

  // llama.cpp: meta.n_params = 6738415616 -> 6.74B (three significant digits).
  const nlohmann::json llama = nlohmann::json::parse(R"({"data":[{"id":"llama-2-7b.Q4_0.gguf",
      "meta":{"n_params":6738415616,"n_ctx_train":4096,"size":3825065984}}]})");
  f = FactsFromModelsList(llama, "");
  EXPECT_EQ(f.parameters, "6.74B");
  EXPECT_EQ(f.context_length, 4096);

  const nlohmann::json vllm = nlohmann::json::parse(
      R"({"data":[{"id":"Qwen/Qwen2-0.5B","max_model_len":32768}]})");
  EXPECT_EQ(FactsFromModelsList(vllm, "").context_length, 32768);
  EXPECT_EQ(FactsFromModelsList(nlohmann::json::parse("{}"), "").id, "");
}

TEST(ModelFacts, FromInspectJson) {
  // Tensors: 64 x 512 f32 (131072 bytes) and 64 x 64 q8_0 (4352 bytes):
  // 32768 + 4096 = 36864 parameters -> "36.9K"; most bytes in F32.
  const nlohmann::json j = nlohmann::json::parse(R"({"metadata":{"llama.context_length":2048},
      "tensors":[{"name":"a","type":"f32","shape":[64,512],"size_bytes":131072},
                 {"name":"b","type":"q8_0","shape":[64,64],"size_bytes":4352}]})");
  const ModelFacts f = FactsFromInspectJson(j);
  EXPECT_EQ(f.parameters, "36.9K");
  EXPECT_EQ(f.quantization, "F32");
  EXPECT_EQ(f.context_length, 2048);
}

TEST(ModelFacts, NameHeuristics) {
  EXPECT_EQ(ParametersFromName("stories260K"), "260K");
  EXPECT_EQ(ParametersFromName("Llama-3.1-8B-Instruct"), "8B");
  EXPECT_EQ(ParametersFromName("qwen2.5-0.5b-instruct"), "0.5B");
  EXPECT_EQ(ParametersFromName("model"), "");
  EXPECT_EQ(QuantizationFromName("llama-7b-q4_k_m.gguf"), "Q4_K_M");
  EXPECT_EQ(QuantizationFromName("Mistral-7B.Q8_0"), "Q8_0");
  EXPECT_EQ(QuantizationFromName("phi-3-IQ2_XS"), "IQ2_XS");
  EXPECT_EQ(QuantizationFromName("tiny-f16"), "F16");
  EXPECT_EQ(QuantizationFromName("qwen2"), "");
  EXPECT_EQ(FormatParameterCount(260000), "260K");
  EXPECT_EQ(FormatParameterCount(950), "950");
}

TEST(Hardware, CpuInfo) {
  const std::string text =
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Example CPU @ 2.00GHz\n\n"
      "processor\t: 1\nmodel name\t: Example CPU @ 2.00GHz\n\n";
  const HardwareFacts h = ParseCpuInfo(text);
  EXPECT_EQ(h.cpu_model, "Example CPU @ 2.00GHz");
  EXPECT_EQ(h.logical_cores, 2);
  EXPECT_EQ(ParseCpuInfo("").logical_cores, 0);
}

TEST(SloEvents, ShapesAndTimes) {
  // Run started at unix ms 1,000,000: an event at 1,000,250 ms is at +250 ms; one given in
  // seconds (1000.5 s) is at +500 ms; an entry without a time is dropped.
  const nlohmann::json body = nlohmann::json::parse(R"({"events":[
      {"unix_ms":1000250,"kind":"degraded","message":"queue"},
      {"timestamp":1000.5,"type":"recovered"},
      {"kind":"no time"}]})");
  const auto ev = ParseSloEvents(body, 1000000, 0);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_DOUBLE_EQ(ev[0].t_ms, 250);
  EXPECT_EQ(ev[0].kind, "degraded");
  EXPECT_EQ(ev[0].detail, "queue");
  EXPECT_DOUBLE_EQ(ev[1].t_ms, 500);
  EXPECT_EQ(ev[1].kind, "recovered");
  const auto bare = ParseSloEvents(nlohmann::json::parse(R"([{"time_unix_ms":5}])"), 0, 0);
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].kind, "event");
  EXPECT_TRUE(ParseSloEvents(nlohmann::json::parse(R"({"error":"x"})"), 0, 0).empty());
}

TEST(SloEvents, LifelineLadderEventsByAge) {
  // The response arrived 5000 ms into the run; an event 1200 ms old happened at 3800 ms.
  // at_ms is on the server's own clock and is not used.
  const nlohmann::json body = nlohmann::json::parse(R"({"events_total":1,"events":[
      {"at_ms":987654.0,"age_ms":1200.0,"class":"interactive","from":"normal","to":"truncate",
       "from_level":0,"to_level":1,"reason":"ttft p95 over target","metric":"ttft",
       "p95_ms":450.0,"target_ms":387.0}]})");
  const auto ev = ParseSloEvents(body, 123, 5000);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_DOUBLE_EQ(ev[0].t_ms, 3800);
  EXPECT_EQ(ev[0].kind, "interactive: normal -> truncate");
  EXPECT_EQ(ev[0].detail, "ttft p95 over target");
}

TEST(LocalServer, ListeningLine) {
  EXPECT_EQ(ParseListeningLine("lifeline serve: listening on http://127.0.0.1:41234\n"),
            "http://127.0.0.1:41234");
  EXPECT_EQ(ParseListeningLine("lifeline serve: model 'x' from y"), "");
  EXPECT_EQ(ParseListeningLine("lifeline serve: listening on http://127.0.0.1:abc"), "");
}

}  // namespace
}  // namespace lifeline::loadgen

// --api embeddings / rerank: the planned inputs and the bodies sent (shape, counts, no
// generation fields), runs against a scripted server that answers the two routes (TTFT = e2e,
// usage.prompt_tokens recorded, inputs/s and documents/s in the reports), the error accounting
// of short and malformed answers, and the flag checks. Nothing here depends on how fast the
// machine is: only counts, shapes and the equality of TTFT and e2e are asserted.
#include <cmath>
#include <map>
#include <mutex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/loadgen/report.h"
#include "bench/loadgen/retrieval_answer.h"
#include "bench/loadgen/runner.h"
#include "loadgen/script_server.h"

namespace lifeline::loadgen {
namespace {

using testing::EmbeddingsBody;
using testing::JsonResponse;
using testing::RerankBody;
using testing::RetrievalScript;
using testing::Script;
using testing::ScriptServer;

std::string Body(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }
std::string RequestLine(const std::string& request) {
  return request.substr(0, request.find("\r\n"));
}

WorkloadSpec Embeddings(int64_t batch) {
  WorkloadSpec w;
  w.api = Api::kEmbeddings;
  w.prompt_words = *ParseLengthDist("--prompt-len", "uniform:3:9");
  w.batch_inputs = batch;
  return w;
}

WorkloadSpec Rerank(int64_t documents, int64_t words) {
  WorkloadSpec w;
  w.api = Api::kRerank;
  w.prompt_words = *ParseLengthDist("--prompt-len", "5");
  w.documents = documents;
  w.document_words = words;
  return w;
}

RunOptions Options(const ScriptServer& s, WorkloadSpec w) {
  RunOptions o;
  o.targets.push_back(*ParseTargetSpec("--target", s.url() + ",model=emb,label=A"));
  o.workload = std::move(w);
  o.metric = DefaultSloMetric(o.workload);
  o.mode = LoadMode::kConcurrency;
  o.loads = {2};
  o.requests = 6;
  o.timeout_s = 5;
  o.seed = 5;
  // Fast loopback answers stay far below this; the test is about counts, not speed.
  o.threshold_ms = 60000;
  return o;
}

HttpExchange WithBody(const std::string& body) {
  HttpExchange x;
  x.body = body;
  x.body_bytes = static_cast<int64_t>(body.size());
  return x;
}

TEST(Retrieval, EmbeddingsBodyHoldsTheBatchAndNoGenerationFields) {
  const WorkloadSpec w = Embeddings(3);
  ASSERT_TRUE(ValidateWorkload(w).ok());
  const TargetSpec t = *ParseTargetSpec("--target", "http://127.0.0.1:1,model=emb");
  for (int64_t i = 0; i < 20; ++i) {
    const PlannedRequest r = PlanRequest(w, 9, 0, i);
    ASSERT_EQ(r.inputs.size(), 3u);
    int64_t words = 0;
    for (const std::string& in : r.inputs) {
      EXPECT_GE(CountWords(in), 3);
      EXPECT_LE(CountWords(in), 9);
      words += CountWords(in);
    }
    EXPECT_EQ(r.prompt_words, words);
    EXPECT_EQ(r.max_tokens, 0);
    EXPECT_EQ(PlanRequest(w, 9, 0, i).inputs, r.inputs) << "a function of (seed, step, index)";
    const nlohmann::json b = nlohmann::json::parse(RequestBody(w, t, r));
    EXPECT_EQ(b["model"], "emb");
    EXPECT_EQ(b["input"], nlohmann::json(r.inputs));
    EXPECT_EQ(b["encoding_format"], "float");
    for (const char* gen : {"prompt", "messages", "max_tokens", "stream", "stream_options"}) {
      EXPECT_FALSE(b.contains(gen)) << gen;
    }
  }
  const HttpRequestSpec spec = RequestSpec(w, t, PlanRequest(w, 9, 0, 0), 5);
  EXPECT_EQ(spec.path, "/v1/embeddings");
  EXPECT_TRUE(spec.check_body != nullptr);
  bool json_accept = false;
  for (const auto& [k, v] : spec.headers) json_accept |= k == "Accept" && v == "application/json";
  EXPECT_TRUE(json_accept);
  EXPECT_FALSE(RequestsStream(w));
  EXPECT_EQ(DefaultSloMetric(w), SloMetric::kE2e);

  WorkloadSpec b64 = Embeddings(1);
  b64.encoding_format = "base64";
  const nlohmann::json b = nlohmann::json::parse(RequestBody(b64, t, PlanRequest(b64, 9, 0, 0)));
  EXPECT_EQ(b["encoding_format"], "base64");
  EXPECT_EQ(b["input"].size(), 1u) << "a batch of one is still an array";
}

TEST(Retrieval, RerankBodyHoldsTheQueryAndDocuments) {
  WorkloadSpec w = Rerank(5, 7);
  w.slo_class = "batch";
  w.slo_in_body = true;
  ASSERT_TRUE(ValidateWorkload(w).ok());
  const TargetSpec t = *ParseTargetSpec("--target", "http://127.0.0.1:1");
  const PlannedRequest r = PlanRequest(w, 3, 1, 4);
  EXPECT_EQ(CountWords(r.prompt), 5);
  ASSERT_EQ(r.inputs.size(), 5u);
  for (const std::string& d : r.inputs) EXPECT_EQ(CountWords(d), 7);
  EXPECT_EQ(r.prompt_words, 5 + 5 * 7);
  const nlohmann::json b = nlohmann::json::parse(RequestBody(w, t, r));
  EXPECT_FALSE(b.contains("model")) << "no model= on the target: the server's default";
  EXPECT_EQ(b["query"], r.prompt);
  EXPECT_EQ(b["documents"], nlohmann::json(r.inputs));
  EXPECT_EQ(b["slo_class"], "batch");
  EXPECT_FALSE(b.contains("max_tokens"));
  EXPECT_FALSE(b.contains("stream"));
  EXPECT_EQ(RequestSpec(w, t, r, 5).path, "/v1/rerank");
  // Defaults: 8 documents of 64 words.
  WorkloadSpec d;
  d.api = Api::kRerank;
  const PlannedRequest rd = PlanRequest(d, 1, 0, 0);
  ASSERT_EQ(rd.inputs.size(), 8u);
  EXPECT_EQ(CountWords(rd.inputs[0]), 64);
}

TEST(Retrieval, EmbeddingsRunCountsInputsAndPromptTokens) {
  std::mutex mu;
  std::vector<std::string> requests;
  ScriptServer s([&](const std::string& req) {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(req);
    return RetrievalScript(req, 8);
  });
  RunOptions o = Options(s, Embeddings(4));
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->records.size(), 6u);
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.x.error, "") << r.x.error_detail;
    EXPECT_EQ(r.inputs, 4);
    EXPECT_EQ(r.prompt_tokens, r.prompt_words) << "the fake counts a token per word";
    EXPECT_EQ(r.output_tokens, 0);
    EXPECT_EQ(r.x.served_model, "scripted");
    EXPECT_GE(r.x.ttft_ms, 0);
    EXPECT_EQ(r.x.ttft_ms, r.x.e2e_ms) << "the time to the answer is the whole request";
    EXPECT_EQ(r.x.ttfa_ms, r.x.e2e_ms);
    EXPECT_TRUE(r.x.itl_ms.empty());
  }
  ASSERT_EQ(requests.size(), 6u);
  for (const std::string& req : requests) {
    EXPECT_TRUE(RequestLine(req).starts_with("POST /v1/embeddings ")) << req;
    const nlohmann::json b = nlohmann::json::parse(Body(req));
    EXPECT_EQ(b["input"].size(), 4u);
    EXPECT_EQ(b["model"], "emb");
  }

  ReportInputs in;
  in.options = &o;
  in.run = &*run;
  in.facts.resize(1);
  const Report rep = BuildReport(in);
  const TargetStepSummary& sum = rep.summaries[0];
  EXPECT_EQ(sum.ok, 6);
  EXPECT_EQ(sum.errors, 0);
  EXPECT_DOUBLE_EQ(sum.inputs_per_s, 4 * sum.throughput_rps);
  const nlohmann::json j = ReportJson(in, rep);
  EXPECT_EQ(j["config"]["api"], "embeddings");
  EXPECT_EQ(j["config"]["batch_inputs"], 4);
  EXPECT_EQ(j["config"]["encoding_format"], "float");
  EXPECT_TRUE(j["config"]["output_tokens"].is_null());
  EXPECT_EQ(j["config"]["slo_metric"], "e2e");
  EXPECT_DOUBLE_EQ(j["summaries"][0]["inputs_per_s"].get<double>(), sum.inputs_per_s);
  EXPECT_EQ(j["requests"][0]["inputs"], 4);
  const std::string md = ReportMarkdown(in, rep);
  EXPECT_NE(md.find("API: embeddings (POST /v1/embeddings), 4 input(s)"), std::string::npos) << md;
  EXPECT_NE(md.find("| req/s | inputs/s |"), std::string::npos) << md;
  EXPECT_EQ(md.find("output tok/s"), std::string::npos) << md;
}

TEST(Retrieval, Base64EmbeddingsAreCheckedAsFloat32) {
  ScriptServer s([](const std::string& req) { return RetrievalScript(req, 3); });
  WorkloadSpec w = Embeddings(2);
  w.encoding_format = "base64";
  RunOptions o = Options(s, w);
  o.requests = 2;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  for (const RequestRecord& r : run->records) EXPECT_EQ(r.x.error, "") << r.x.error_detail;

  // Float arrays where base64 was asked, and base64 that is not whole float32 values, fail.
  HttpExchange floats = WithBody(EmbeddingsBody(1, 3, false, 1));
  EXPECT_NE(CheckEmbeddingsAnswer(1, true, &floats).find("base64"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(EmbeddingsBody(1, 3, true, 1));
  j["data"][0]["embedding"] = testing::Base64("abcdef");  // 6 bytes: not whole floats
  HttpExchange ragged = WithBody(j.dump());
  EXPECT_NE(CheckEmbeddingsAnswer(1, true, &ragged), "");
  j["data"][0]["embedding"] = "AAAA*AAA";
  HttpExchange alphabet = WithBody(j.dump());
  EXPECT_NE(CheckEmbeddingsAnswer(1, true, &alphabet), "");
}

TEST(Retrieval, RerankRunCountsDocuments) {
  std::mutex mu;
  std::vector<std::string> requests;
  ScriptServer s([&](const std::string& req) {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(req);
    return RetrievalScript(req);
  });
  RunOptions o = Options(s, Rerank(6, 10));
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->records.size(), 6u);
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.x.error, "") << r.x.error_detail;
    EXPECT_EQ(r.inputs, 6);
    EXPECT_EQ(r.prompt_tokens, 5 + 6 * 10);
    EXPECT_EQ(r.x.ttft_ms, r.x.e2e_ms);
  }
  for (const std::string& req : requests) {
    EXPECT_TRUE(RequestLine(req).starts_with("POST /v1/rerank ")) << req;
    const nlohmann::json b = nlohmann::json::parse(Body(req));
    EXPECT_EQ(b["documents"].size(), 6u);
    EXPECT_TRUE(b["query"].is_string());
  }
  ReportInputs in;
  in.options = &o;
  in.run = &*run;
  in.facts.resize(1);
  const Report rep = BuildReport(in);
  EXPECT_DOUBLE_EQ(rep.summaries[0].inputs_per_s, 6 * rep.summaries[0].throughput_rps);
  const nlohmann::json j = ReportJson(in, rep);
  EXPECT_EQ(j["config"]["api"], "rerank");
  EXPECT_EQ(j["config"]["documents"], 6);
  EXPECT_EQ(j["config"]["document_words"], 10);
  EXPECT_TRUE(j["summaries"][0].contains("documents_per_s"));
  const std::string md = ReportMarkdown(in, rep);
  EXPECT_NE(md.find("API: rerank (POST /v1/rerank), a query of 5 words and 6 documents of 10 "
                    "words"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| req/s | documents/s |"), std::string::npos) << md;
}

// --extra-body's top_n asks for fewer results: that many is the right answer, more is not.
TEST(Retrieval, RerankTopNFromExtraBody) {
  ScriptServer s([](const std::string& req) { return RetrievalScript(req); });
  WorkloadSpec w = Rerank(6, 4);
  w.extra_body = {{"top_n", 2}};
  RunOptions o = Options(s, w);
  o.requests = 2;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) EXPECT_EQ(r.x.error, "") << r.x.error_detail;
  HttpExchange all = WithBody(RerankBody(6, 1));
  EXPECT_EQ(CheckRerankAnswer(6, 2, &all), "6 results for 2 (top_n of 6 documents)");
}

// A 200 that is not the answer asked for fails the request, and the reports count it as a
// failure (not refused), so the SLO P95 of a step where every answer is short is infinite.
TEST(Retrieval, ShortAndMalformedAnswersAreErrors) {
  struct Case {
    std::string name, body, detail;
  };
  nlohmann::json empty_vec = nlohmann::json::parse(EmbeddingsBody(3, 4, false, 9));
  empty_vec["data"][1]["embedding"] = nlohmann::json::array();
  nlohmann::json dup = nlohmann::json::parse(EmbeddingsBody(3, 4, false, 9));
  dup["data"][2]["index"] = 0;
  nlohmann::json ragged = nlohmann::json::parse(EmbeddingsBody(3, 4, false, 9));
  ragged["data"][2]["embedding"] = {0.1, 0.2};
  nlohmann::json text = nlohmann::json::parse(EmbeddingsBody(3, 4, false, 9));
  text["data"][0]["embedding"][1] = "x";
  const Case cases[] = {
      {"short", EmbeddingsBody(2, 4, false, 9), "2 data entries for 3 inputs"},
      {"not json", "{\"data\": [", "answer is not a JSON object"},
      {"no data", R"({"object":"list"})", "answer has no \"data\" array"},
      {"empty vector", empty_vec.dump(), "data[1].embedding is not a non-empty array of numbers"},
      {"duplicate index", dup.dump(), "data[2].index 0 appears twice"},
      {"ragged widths", ragged.dump(), "data[2].embedding has 2 values, data[0] 4"},
      {"a string value", text.dump(), "data[0].embedding is not a non-empty array of numbers"},
  };
  for (const Case& c : cases) {
    ScriptServer s([&](const std::string&) {
      return Script{{{0, JsonResponse(200, "OK", c.body)}}};
    });
    RunOptions o = Options(s, Embeddings(3));
    o.requests = 4;
    auto run = RunLoad(o, nullptr);
    ASSERT_TRUE(run.ok()) << c.name;
    ASSERT_EQ(run->records.size(), 4u) << c.name;
    for (const RequestRecord& r : run->records) {
      EXPECT_EQ(r.x.error, "malformed_answer") << c.name;
      EXPECT_EQ(r.x.error_detail, c.detail) << c.name;
      EXPECT_EQ(r.x.http_status, 200) << c.name;
    }
    ReportInputs in;
    in.options = &o;
    in.run = &*run;
    in.facts.resize(1);
    const Report rep = BuildReport(in);
    const TargetStepSummary& sum = rep.summaries[0];
    EXPECT_EQ(sum.ok, 0) << c.name;
    EXPECT_EQ(sum.errors, 4) << c.name;
    EXPECT_EQ(sum.failed, 4) << c.name;
    EXPECT_EQ(sum.refused, 0) << c.name;
    EXPECT_EQ(sum.errors_by_kind.at("malformed_answer"), 4) << c.name;
    EXPECT_EQ(sum.inputs_per_s, 0) << c.name;
    EXPECT_TRUE(std::isinf(sum.slo_p95_ms)) << c.name;
  }
}

TEST(Retrieval, MalformedRerankAnswers) {
  nlohmann::json no_score = nlohmann::json::parse(RerankBody(3, 5));
  no_score["results"][1].erase("relevance_score");
  nlohmann::json null_score = nlohmann::json::parse(RerankBody(3, 5));
  null_score["results"][0]["relevance_score"] = nullptr;  // a choice without a score
  nlohmann::json outside = nlohmann::json::parse(RerankBody(3, 5));
  outside["results"][0]["index"] = 3;
  const std::pair<std::string, std::string> cases[] = {
      {RerankBody(2, 5), "2 results for 3 documents"},
      {no_score.dump(), "results[1].relevance_score is not a number"},
      {null_score.dump(), "results[0].relevance_score is not a number"},
      {outside.dump(), "results[0].index 3 is outside [0, 3)"},
      {R"({"data":[]})", "answer has no \"results\" array"},
  };
  for (const auto& [body, detail] : cases) {
    HttpExchange x = WithBody(body);
    EXPECT_EQ(CheckRerankAnswer(3, 3, &x), detail) << body;
  }
  // vLLM's rerank usage has only total_tokens: that is the input then.
  HttpExchange vllm = WithBody(R"({"results":[{"index":0,"relevance_score":0.5}],)"
                               R"("usage":{"total_tokens":12}})");
  EXPECT_EQ(CheckRerankAnswer(1, 1, &vllm), "");
  EXPECT_EQ(vllm.prompt_tokens, 12);
  // Through the client: a rerank server that answers too few results.
  ScriptServer s([](const std::string&) {
    return Script{{{0, JsonResponse(200, "OK", RerankBody(3, 5))}}};
  });
  RunOptions o = Options(s, Rerank(4, 2));
  o.requests = 2;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.x.error, "malformed_answer");
    EXPECT_EQ(r.x.error_detail, "3 results for 4 documents");
  }
}

// An answer longer than the client keeps cannot be checked: it fails, saying why.
TEST(Retrieval, AnswerCutByTheClientCapIsAnError) {
  HttpExchange x = WithBody(EmbeddingsBody(1, 4, false, 1));
  x.body_bytes += 100;
  EXPECT_NE(CheckEmbeddingsAnswer(1, false, &x).find("longer than"), std::string::npos);
  EXPECT_GT(RequestSpec(Embeddings(1), TargetSpec{}, PlanRequest(Embeddings(1), 1, 0, 0), 5)
                .max_body_kept_bytes,
            kDefaultMaxBodyKeptBytes);
}

// HTTP errors stay HTTP errors: a server without the route answers 404.
TEST(Retrieval, ServerWithoutTheRouteIsAnHttpError) {
  ScriptServer s([](const std::string&) {
    return Script{{{0, JsonResponse(404, "Not Found", R"({"error":{"message":"no route"}})")}}};
  });
  RunOptions o = Options(s, Rerank(2, 2));
  o.requests = 1;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->records[0].x.error, "http_status");
  EXPECT_EQ(run->records[0].x.http_status, 404);
}

TEST(Retrieval, FlagsAreCheckedByName) {
  struct Case {
    std::string name;
    WorkloadSpec w;
    std::string needle;
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, WorkloadSpec w, std::string needle) {
    cases.push_back({std::move(name), std::move(w), std::move(needle)});
  };
  WorkloadSpec w;
  w.batch_inputs = 2;  // completions
  add("batch without embeddings", w,
      "--batch-inputs: applies to --api embeddings, not --api completions");
  w = Rerank(4, 4);
  w.batch_inputs = 2;
  add("batch with rerank", w, "--batch-inputs: applies to --api embeddings, not --api rerank");
  w = Embeddings(1);
  w.documents = 3;
  add("documents with embeddings", w, "--documents: applies to --api rerank");
  w = Embeddings(1);
  w.document_words = 3;
  add("document words with embeddings", w, "--document-words: applies to --api rerank");
  w = Rerank(4, 4);
  w.encoding_format = "base64";
  add("encoding with rerank", w, "--encoding-format: applies to --api embeddings");
  add("batch 0", Embeddings(0), "--batch-inputs: 0 outside [1, 2048]");
  add("batch 2049", Embeddings(2049), "--batch-inputs: 2049 outside [1, 2048]");
  add("documents 1025", Rerank(1025, 4), "--documents: 1025 outside [1, 1024]");
  add("document words 0", Rerank(4, 0), "--document-words: 0 outside [1, 100000]");
  w = Embeddings(1);
  w.encoding_format = "int8";
  add("encoding", w, "--encoding-format 'int8': expected float or base64");
  w = Embeddings(1);
  w.conversations = 2;
  add("conversations", w, "--conversations");
  w = Rerank(2, 2);
  w.ignore_eos = true;
  add("ignore eos", w, "--ignore-eos");
  w = Embeddings(1);
  w.stream = false;
  add("no stream", w, "--no-stream");
  w = Rerank(2, 2);
  w.include_usage = false;
  add("no usage", w, "--no-usage");
  w = Embeddings(1);
  w.thinking.budget_tokens = 8;
  add("thinking", w, "--thinking-budget");
  for (const Case& c : cases) {
    const Status s = ValidateWorkload(c.w);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.name << ": " << s.message();
  }
  auto api = ParseApi("--api", "embedding");
  ASSERT_FALSE(api.ok());
  EXPECT_NE(api.status().message().find("completions, chat, embeddings or rerank"),
            std::string::npos);
  EXPECT_EQ(*ParseApi("--api", "rerank"), Api::kRerank);
  EXPECT_TRUE(ValidateWorkload(Rerank(kMaxDocuments, kMaxDocumentWords)).ok());
  EXPECT_TRUE(ValidateWorkload(Embeddings(kMaxBatchInputs)).ok());
}

}  // namespace
}  // namespace lifeline::loadgen

// Completions through the real server process: greedy text against llama.cpp's reference
// continuation, streaming vs non-streaming, concurrent batching vs one at a time, prefix
// caching, Server-Timing attribution, chat, and two models served at once.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;

// What a stream of SSE events adds up to.
struct StreamResult {
  std::string text;             // concatenated choices[0].text / delta.content
  std::vector<json> events;     // parsed JSON events, [DONE] excluded
  bool done = false;            // the last event was [DONE]
};

StreamResult ParseStream(const std::string& body, bool chat = false) {
  StreamResult out;
  for (const std::string& data : SseData(body)) {
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    EXPECT_FALSE(out.done) << "event after [DONE]: " << data;
    json ev = json::parse(data, nullptr, false);
    EXPECT_TRUE(ev.is_object()) << data;
    if (!ev.is_object()) continue;
    if (ev.contains("choices") && !ev["choices"].empty()) {
      const json& c = ev["choices"][0];
      if (chat && c.contains("delta") && c["delta"].contains("content")) {
        out.text += c["delta"]["content"].get<std::string>();
      } else if (!chat && c.contains("text")) {
        out.text += c["text"].get<std::string>();
      }
    }
    out.events.push_back(std::move(ev));
  }
  return out;
}

// The non-streaming completion text, with the status checked.
std::string CompletionText(const std::optional<HttpReply>& r) {
  EXPECT_TRUE(r.has_value());
  if (!r) return "<no reply>";
  EXPECT_EQ(r->status, 200) << r->body;
  const json j = r->Json();
  if (!j.is_object() || !j.contains("choices")) return "<bad body: " + r->body + ">";
  return j["choices"][0]["text"].get<std::string>();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

using CompletionTest = LiveServerTest;

TEST_F(CompletionTest, GreedyCompletionMatchesReferenceStreamingAndNot) {
  const json ref = ReferenceJson("stories260K.p1");
  ASSERT_TRUE(ref.is_object()) << "reference/logits/stories260K.p1.json unreadable";
  const std::string prompt = ref["prompt"];
  const std::string expected = ref["greedy_text"];
  const int64_t prompt_tokens = static_cast<int64_t>(ref["prompt_tokens"].size());
  ASSERT_EQ(ref["greedy"].size(), 32u);

  auto plain = Post("/v1/completions", GreedyCompletion(prompt, 32));
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  const json body = plain->Json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "stories");
  EXPECT_EQ(body["choices"][0]["text"], expected);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(body["usage"]["completion_tokens"], 32);
  EXPECT_EQ(body["usage"]["total_tokens"], prompt_tokens + 32);
  EXPECT_EQ(body["timings"]["tokens"]["generated"], 32);

  auto streamed = Post("/v1/completions", GreedyCompletion(prompt, 32, /*stream=*/true));
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  EXPECT_EQ(streamed->Header("content-type").rfind("text/event-stream", 0), 0u);
  const StreamResult s = ParseStream(streamed->body);
  EXPECT_TRUE(s.done) << streamed->body;
  EXPECT_EQ(s.text, body["choices"][0]["text"]);
  EXPECT_EQ(s.text, expected);
  ASSERT_FALSE(s.events.empty());
  const json& last = s.events.back();
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length") << last.dump();
  ASSERT_TRUE(last.contains("timings") && last["timings"].is_object()) << last.dump();
  EXPECT_EQ(last["timings"]["tokens"]["generated"], 32);
  EXPECT_EQ(last["timings"]["tokens"]["prompt"], prompt_tokens);
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    EXPECT_TRUE(s.events[i]["choices"][0]["finish_reason"].is_null()) << s.events[i].dump();
  }

  // With include_usage the usage numbers arrive in a final choice-less chunk before [DONE].
  json with_usage = GreedyCompletion(prompt, 32, /*stream=*/true);
  with_usage["stream_options"] = {{"include_usage", true}};
  auto u = Post("/v1/completions", with_usage);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, 200) << u->body;
  const StreamResult su = ParseStream(u->body);
  EXPECT_TRUE(su.done);
  EXPECT_EQ(su.text, expected);
  ASSERT_FALSE(su.events.empty());
  const json& usage_event = su.events.back();
  EXPECT_TRUE(usage_event["choices"].empty()) << usage_event.dump();
  EXPECT_EQ(usage_event["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(usage_event["usage"]["completion_tokens"], 32);
  EXPECT_TRUE(usage_event.contains("timings")) << usage_event.dump();
}

TEST_F(CompletionTest, ConcurrentGreedyRequestsEqualSequentialOnes) {
  const json p1 = ReferenceJson("stories260K.p1");
  const json p2 = ReferenceJson("stories260K.p2");
  ASSERT_TRUE(p1.is_object() && p2.is_object());
  // Reference prompts mixed with others of different lengths, so sequences in one batch sit
  // at different positions.
  const std::vector<std::string> prompts = {
      p1["prompt"], p2["prompt"], "One day", p1["prompt"].get<std::string>() + " there",
      "The little dog", p2["prompt"], "Tom and his mom went to the park. They", "Lily"};
  constexpr int kMaxTokens = 32;

  std::vector<std::string> sequential;
  for (const std::string& p : prompts) {
    sequential.push_back(CompletionText(Post("/v1/completions", GreedyCompletion(p, kMaxTokens))));
  }
  // Independent anchor: the reference prompts alone give llama.cpp's continuations.
  EXPECT_EQ(sequential[0], p1["greedy_text"]);
  EXPECT_EQ(sequential[1], p2["greedy_text"]);

  std::vector<std::optional<HttpReply>> replies(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      replies[i] = PostJson(port(), "/v1/completions", GreedyCompletion(prompts[i], kMaxTokens));
    });
  }
  for (std::thread& t : threads) t.join();

  int max_batch = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(CompletionText(replies[i]), sequential[i]) << "prompt " << i << ": " << prompts[i];
    if (!replies[i]) continue;
    const json t = replies[i]->Json()["timings"];
    if (t.is_object() && t.contains("batch")) {
      for (const json& n : t["batch"]["sizes"]) max_batch = std::max(max_batch, n.get<int>());
    }
  }
  // Otherwise the comparison above proves nothing about batching.
  EXPECT_GT(max_batch, 1) << "no step ran two sequences together";
}

// A prompt of >= 100 tokens made of story sentences, starting with `name` so prompts with
// different names share no KV block.
std::string LongPrompt(const std::string& name) {
  std::string s = name + " was a little girl. ";
  for (int i = 0; i < 5; ++i) {
    s += "She loved to play outside in the park with her friends. One day, she saw a big red "
         "ball. ";
  }
  return s;
}

TEST_F(CompletionTest, SharedPrefixIsServedFromTheCacheAndPrefillsFaster) {
  std::vector<double> first_prefill_ms, second_prefill_ms;
  for (const std::string name : {"Sue", "Max", "Ben"}) {
    const std::string base = LongPrompt(name);
    auto first = Post("/v1/completions", GreedyCompletion(base, 1));
    auto second = Post("/v1/completions", GreedyCompletion(base + "Then she ran home.", 1));
    ASSERT_TRUE(first && second);
    ASSERT_EQ(first->status, 200) << first->body;
    ASSERT_EQ(second->status, 200) << second->body;
    const json a = first->Json(), b = second->Json();
    ASSERT_GE(a["usage"]["prompt_tokens"].get<int>(), 100) << "prompt too short for the test";
    EXPECT_GT(b["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"]);
    EXPECT_EQ(a["timings"]["tokens"]["cached"], 0) << name << ": fresh prefix";
    // The first prompt's full 16-position blocks (96+ positions) are shared.
    EXPECT_GE(b["timings"]["tokens"]["cached"].get<int>(), 64) << b["timings"].dump();
    first_prefill_ms.push_back(a["timings"]["prefill_ms"].get<double>());
    second_prefill_ms.push_back(b["timings"]["prefill_ms"].get<double>());
  }
  const double m1 = Median(first_prefill_ms), m2 = Median(second_prefill_ms);
  std::printf("prefill_ms medians: uncached %.3f, cached prefix %.3f\n", m1, m2);
  EXPECT_LT(m2, m1);
}

// One response's Server-Timing: the sum of the attributed phases and server_total.
struct TimingSums {
  double phases_ms = 0;
  double total_ms = 0;
  std::string header;
};

void ReadTimingSums(const HttpReply& r, TimingSums* out) {
  out->header = r.Header("server-timing");
  ASSERT_FALSE(out->header.empty());
  const auto entries = ParseServerTiming(out->header);
  auto find = [&](const std::string& name) -> std::optional<double> {
    for (const auto& [n, ms] : entries) {
      if (n == name) return ms;
    }
    return std::nullopt;
  };
  const char* kPhases[] = {"http_read", "validate",   "template", "tokenize", "queue",
                           "kv_alloc",  "model_load", "prefill",  "decode",   "sampling",
                           "handoff"};
  for (const char* phase : kPhases) {
    const auto ms = find(phase);
    ASSERT_TRUE(ms.has_value()) << "Server-Timing lacks " << phase << ": " << out->header;
    EXPECT_GE(*ms, 0.0) << phase;
    out->phases_ms += *ms;
  }
  EXPECT_GT(find("prefill").value_or(0), 0.0) << out->header;
  EXPECT_GT(find("decode").value_or(0), 0.0) << out->header;
  const auto total_ms = find("server_total");
  ASSERT_TRUE(total_ms.has_value()) << out->header;
  out->total_ms = *total_ms;
}

double TimingTolerance(double total_ms) { return std::max(1.0, 0.02 * total_ms); }

// The phases tile the request's life without overlap (handoff_ms covers the hop of the
// terminal event from the engine thread to the connection's I/O thread), so they add up to the
// total on every response.
TEST_F(CompletionTest, ServerTimingPhasesAddUpToTheTotal) {
  double best_gap_ms = 1e9;
  std::string best_header;
  for (int i = 0; i < 5; ++i) {
    auto r = Post("/v1/completions", GreedyCompletion("Once upon a time", 32));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    TimingSums t;
    ASSERT_NO_FATAL_FAILURE(ReadTimingSums(*r, &t));
    EXPECT_LE(t.phases_ms, t.total_ms + TimingTolerance(t.total_ms)) << t.header;
    const double gap_ms = std::abs(t.total_ms - t.phases_ms) - TimingTolerance(t.total_ms);
    if (gap_ms < best_gap_ms) {
      best_gap_ms = gap_ms;
      best_header = t.header;
    }
  }
  EXPECT_LE(best_gap_ms, 0.0) << "best response's unattributed time beyond tolerance: "
                              << best_header;
}

TEST_F(CompletionTest, ServerTimingPhasesAddUpToTheTotalOnEveryResponse) {
  for (int i = 0; i < 5; ++i) {
    auto r = Post("/v1/completions", GreedyCompletion("Once upon a time", 32));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    TimingSums t;
    ASSERT_NO_FATAL_FAILURE(ReadTimingSums(*r, &t));
    EXPECT_NEAR(t.phases_ms, t.total_ms, TimingTolerance(t.total_ms)) << t.header;
  }
}

TEST_F(CompletionTest, ChatCompletionUsesTheChatmlDefault) {
  auto chat = Post("/v1/chat/completions",
                   {{"model", "stories"},
                    {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                    {"temperature", 0},
                    {"max_tokens", 16}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const json c = chat->Json();
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["model"], "stories");
  EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
  ASSERT_TRUE(c["choices"][0]["message"]["content"].is_string());
  const std::string reason = c["choices"][0]["finish_reason"];
  EXPECT_TRUE(reason == "stop" || reason == "length") << reason;

  // The model has no template, so the prompt is ChatML (written out here by hand): the same
  // text as a plain completion gives the same tokens and the same greedy answer.
  const std::string chatml =
      "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n";
  auto plain = Post("/v1/completions", GreedyCompletion(chatml, 16));
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  const json p = plain->Json();
  EXPECT_EQ(c["usage"]["prompt_tokens"], p["usage"]["prompt_tokens"]);
  EXPECT_EQ(c["choices"][0]["message"]["content"], p["choices"][0]["text"]);
  EXPECT_EQ(c["usage"]["completion_tokens"], p["usage"]["completion_tokens"]);

  // Streaming chat: chunks carry deltas, the first with the role.
  auto streamed = Post("/v1/chat/completions",
                       {{"model", "stories"},
                        {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                        {"temperature", 0},
                        {"max_tokens", 16},
                        {"stream", true}});
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const StreamResult s = ParseStream(streamed->body, /*chat=*/true);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, c["choices"][0]["message"]["content"]);
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.front()["object"], "chat.completion.chunk");
  if (!s.text.empty()) {
    EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  }
}

class TwoModelTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    return {"--model", "a=" + ModelPath("stories260K.gguf"),
            "--model", "b=" + ModelPath("llama-2-tiny-random.gguf"),
            "--threads", "1", "--kv-memory", "16"};
  }
};

TEST_F(TwoModelTest, RequestsRouteByModelAndBothAreListed) {
  auto models = Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  std::set<std::string> ids;
  const json listing = models->Json();
  for (const json& m : listing["data"]) ids.insert(m["id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"a", "b"}));

  // The two vocabularies split the second reference prompt differently; the reference files
  // say how (stories260K: 15 tokens, llama-2-tiny-random: 13).
  const json ref_a = ReferenceJson("stories260K.p2");
  const json ref_b = ReferenceJson("llama-2-tiny-random.p2");
  ASSERT_TRUE(ref_a.is_object() && ref_b.is_object());
  ASSERT_NE(ref_a["prompt_tokens"].size(), ref_b["prompt_tokens"].size());
  const std::string prompt = ref_a["prompt"];
  ASSERT_EQ(prompt, ref_b["prompt"].get<std::string>());

  for (const auto& [name, ref] : {std::pair{"a", ref_a}, std::pair{"b", ref_b}}) {
    json req = GreedyCompletion(prompt, 8);
    req["model"] = name;
    auto r = Post("/v1/completions", req);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = r->Json();
    EXPECT_EQ(j["model"], name);
    EXPECT_EQ(j["usage"]["prompt_tokens"], ref["prompt_tokens"].size()) << name;
  }
  // Model a is the trained one: its greedy text is the reference continuation.
  json req = GreedyCompletion(prompt, 32);
  req["model"] = "a";
  EXPECT_EQ(CompletionText(Post("/v1/completions", req)), ref_a["greedy_text"]);
  // No model named: the first one serves.
  json unnamed = GreedyCompletion(prompt, 4);
  unnamed.erase("model");
  auto r = Post("/v1/completions", unnamed);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Json()["model"], "a") << r->body;
}

}  // namespace
}  // namespace lifeline::integration

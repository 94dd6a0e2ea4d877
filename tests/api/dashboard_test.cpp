// The dashboard's server side: the page (self-contained, public, locked down by its CSP), the
// state at GET /v1/dashboard (key-protected, ETag / If-None-Match -> 304 without a body), the
// ring of recent requests' three-layer splits (bounded; each entry equals the `timings` the
// client got, regrouped by hand here), and the 304 framing.
#include <regex>
#include <set>
#include <string>

#include "api/dashboard.h"
#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

using nlohmann::json;

const std::string kCompletion = R"({"prompt":"hi","max_tokens":3})";

TEST(DashboardPage, LoadsNothingFromElsewhere) {
  const std::string page(DashboardPageHtml());
  ASSERT_GT(page.size(), 1000u);
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_EQ(page.find("/*@CSS@*/"), std::string::npos);  // both parts were inlined
  EXPECT_EQ(page.find("/*@JS@*/"), std::string::npos);
  EXPECT_NE(page.find("/v1/dashboard"), std::string::npos);
  // No external scripts, styles, images, fonts or imports: every URL-ish string is the SVG
  // namespace or the fallback server for a page opened from a file.
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  const std::set<std::string> allowed = {"http://www.w3.org/2000/svg", "http://127.0.0.1:8080"};
  const std::regex url(R"(https?://[A-Za-z0-9.:/\-]+)");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), url); it != std::sregex_iterator();
       ++it) {
    std::string u = it->str();
    while (!u.empty() && u.back() == '/') u.pop_back();
    EXPECT_TRUE(allowed.contains(u)) << u;
  }
  for (const std::string attr : {"src=", "href="}) {
    size_t at = 0;
    while ((at = page.find(attr, at)) != std::string::npos) {
      EXPECT_EQ(page.compare(at, attr.size() + 6, attr + "\"data:"), 0) << page.substr(at, 40);
      at += attr.size();
    }
  }
}

TEST(DashboardPage, ResponseCarriesARestrictivePolicy) {
  const HttpResponse r = DashboardPageResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  std::string csp;
  for (const auto& [k, v] : r.headers) {
    if (k == "Content-Security-Policy") csp = v;
  }
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
}

TEST(RecentRequests, SplitGroupsTheTimingsPhases) {
  const json t = json::parse(R"({
    "http_read_ms": 0.5, "validate_ms": 0.25, "template_ms": 1, "tokenize_ms": 2, "queue_ms": 4,
    "kv_alloc_ms": 8, "model_load_ms": 0, "handoff_ms": 0.125, "prefill_ms": 16, "decode_ms": 32,
    "sampling_ms": 64, "server_total_ms": 127.875,
    "latency": {"ttft_ms": 20.5}, "tokens": {"prompt": 9, "cached": 3, "generated": 5}})");
  const RequestSplit s = SplitOfTimings(t);
  EXPECT_DOUBLE_EQ(s.network_ms, 0.5);
  EXPECT_DOUBLE_EQ(s.service_ms, 0.25 + 1 + 2 + 4 + 8 + 0.125);
  EXPECT_DOUBLE_EQ(s.compute_ms, 16 + 32 + 64);
  EXPECT_DOUBLE_EQ(s.remote_ms, 0);
  EXPECT_DOUBLE_EQ(s.total_ms, 127.875);
  EXPECT_DOUBLE_EQ(s.ttft_ms, 20.5);
  EXPECT_EQ(s.prompt_tokens, 9);
  EXPECT_EQ(s.cached_tokens, 3);
  EXPECT_EQ(s.generated_tokens, 5);
  // Junk is counted as 0, never NaN or negative.
  const RequestSplit junk = SplitOfTimings(json::parse(
      R"({"http_read_ms": -3, "queue_ms": "x", "remote_ms": 7, "latency": 1, "tokens": {"prompt": -1}})"));
  EXPECT_DOUBLE_EQ(junk.network_ms, 0);
  EXPECT_DOUBLE_EQ(junk.service_ms, 0);
  EXPECT_DOUBLE_EQ(junk.remote_ms, 7);
  EXPECT_DOUBLE_EQ(junk.ttft_ms, -1);
  EXPECT_EQ(junk.prompt_tokens, 0);
}

TEST(RecentRequests, KeepsTheNewestInABoundedRing) {
  RecentRequests ring;
  EXPECT_EQ(ring.Json().size(), 0u);
  for (int i = 0; i < 1000; ++i) {
    ring.Record("req-" + std::to_string(i), std::string(1000, 'm'),
                SplitOfTimings({{"http_read_ms", static_cast<double>(i)}}), i);
  }
  EXPECT_EQ(ring.recorded(), 1000u);
  const json newest = ring.Json(64);
  ASSERT_EQ(newest.size(), 64u);
  EXPECT_EQ(newest.front()["id"], "req-936");  // oldest first
  EXPECT_EQ(newest.back()["id"], "req-999");
  EXPECT_EQ(newest.back()["network_ms"], 999.0);
  EXPECT_EQ(newest.back()["model"].get<std::string>().size(), 256u);  // names are capped
  EXPECT_EQ(ring.Json(100000).size(), RecentRequests::kCapacity);
}

TEST(DashboardEtag, IgnoresOnlyTheClocks) {
  json state = json::parse(R"({"object":"dashboard.state","unix_ms":1,"slo":{"now_ms":5,
    "classes":[{"name":"chat","level":1,"level_age_ms":10,"healthy_ticks":2}],
    "events":[{"class":"chat","at_ms":3,"age_ms":2}]}})");
  const std::string tag = DashboardEtag(state);
  EXPECT_EQ(tag.size(), 18u);
  EXPECT_EQ(tag.front(), '"');
  json later = state;
  later["unix_ms"] = 1000;
  later["slo"]["now_ms"] = 999;
  later["slo"]["classes"][0]["level_age_ms"] = 1004;
  later["slo"]["classes"][0]["healthy_ticks"] = 7;
  later["slo"]["events"][0]["age_ms"] = 996;
  EXPECT_EQ(DashboardEtag(later), tag);
  json moved = state;
  moved["slo"]["classes"][0]["level"] = 2;
  EXPECT_NE(DashboardEtag(moved), tag);
  json event = state;
  event["slo"]["events"][0]["at_ms"] = 4;
  EXPECT_NE(DashboardEtag(event), tag);
}

TEST(DashboardEtag, IfNoneMatchLists) {
  EXPECT_TRUE(EtagMatches("\"abc\"", "\"abc\""));
  EXPECT_TRUE(EtagMatches("\"x\", W/\"abc\"", "\"abc\""));
  EXPECT_TRUE(EtagMatches("*", "\"abc\""));
  EXPECT_FALSE(EtagMatches("\"abd\"", "\"abc\""));
  EXPECT_FALSE(EtagMatches("abc", "\"abc\""));
  EXPECT_FALSE(EtagMatches("", "\"abc\""));
}

TEST(HttpMessage, NotModifiedHasNoBodyAndNoLength) {
  HttpResponse r;
  r.status = 304;
  r.content_type.clear();
  r.headers.emplace_back("ETag", "\"a\"");
  const std::string wire = SerializeResponse(r, true);
  EXPECT_EQ(wire.rfind("HTTP/1.1 304 Not Modified\r\n", 0), 0u) << wire;
  EXPECT_EQ(wire.find("Content-Length"), std::string::npos) << wire;
  EXPECT_TRUE(wire.ends_with("\r\n\r\n"));
}

TEST_F(ServerTest, DashboardPageIsPublicAndTheStateNeedsTheKey) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.api_keys = {"s3cret-key"};
  StartServer(o);
  for (const char* path : {"/", "/dashboard", "/dashboard?server=x"}) {
    auto page = Roundtrip(GetRequest(path));
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200) << path;
    EXPECT_EQ(page->Header("content-type"), "text/html; charset=utf-8");
    EXPECT_EQ(page->body, std::string(DashboardPageHtml()));
  }
  auto denied = Roundtrip(GetRequest("/v1/dashboard"));
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  auto state = Roundtrip(GetRequest("/v1/dashboard", "Authorization: Bearer s3cret-key\r\n"));
  ASSERT_TRUE(state);
  EXPECT_EQ(state->status, 200);
  EXPECT_EQ(state->Json()["object"], "dashboard.state");
}

TEST_F(ServerTest, DashboardStateAnswers304WhenNothingButTheClockMoved) {
  auto first = Roundtrip(GetRequest("/v1/dashboard"));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200);
  const std::string tag = first->Header("etag");
  ASSERT_FALSE(tag.empty());
  EXPECT_EQ(first->Header("cache-control"), "no-cache");
  const json s = first->Json();
  EXPECT_EQ(s["server"]["completed"], 0);
  EXPECT_TRUE(s["recent"].is_array());
  EXPECT_EQ(s["recent"].size(), 0u);
  EXPECT_EQ(s["instance"].get<std::string>().size(), 16u);

  auto same = Roundtrip(GetRequest("/v1/dashboard", "If-None-Match: " + tag + "\r\n"));
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 304);
  EXPECT_EQ(same->body, "");
  EXPECT_EQ(same->Header("etag"), tag);

  // A finished request changes the state: 200 with a new tag and the request's split.
  auto done = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;
  auto changed = Roundtrip(GetRequest("/v1/dashboard", "If-None-Match: " + tag + "\r\n"));
  ASSERT_TRUE(changed);
  ASSERT_EQ(changed->status, 200);
  EXPECT_NE(changed->Header("etag"), tag);
  const json state = changed->Json();
  EXPECT_EQ(state["server"]["completed"], 1);
  ASSERT_EQ(state["recent"].size(), 1u);
  const json& entry = state["recent"][0];
  const json t = done->Json()["timings"];
  EXPECT_EQ(entry["id"], done->Header("x-request-id"));
  EXPECT_EQ(entry["model"], done->Json()["model"]);
  EXPECT_DOUBLE_EQ(entry["network_ms"].get<double>(), t["http_read_ms"].get<double>());
  EXPECT_DOUBLE_EQ(entry["compute_ms"].get<double>(), 12.25 + 30.0);  // the fake's timings
  // The fake sets no hand-off instant, so the response has no handoff_ms.
  EXPECT_DOUBLE_EQ(entry["service_ms"].get<double>(),
                   t["validate_ms"].get<double>() + 1.5 + t.value("handoff_ms", 0.0));
  EXPECT_DOUBLE_EQ(entry["total_ms"].get<double>(), t["server_total_ms"].get<double>());
}

TEST_F(ServerTest, DashboardCountsShedRequestsOfGenerationRoutesOnly) {
  FakeScript shed;
  shed.reject = ApiError{429, "overloaded_error", "slo_shed", "shed", "", 1};
  engine_.SetScript(shed);
  std::vector<ModelInfo> models = engine_.Models();
  models[0].rerank_outputs = 1;  // a reranker, so /v1/rerank reaches Submit
  engine_.SetModels(models);
  const std::pair<const char*, const char*> routes[] = {
      {"/v1/completions", kCompletion.c_str()},
      {"/v1/completions", kCompletion.c_str()},
      {"/v1/completions", kCompletion.c_str()},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})"},
      {"/infill", R"({"input_prefix":"a"})"},
      {"/v1/responses", R"({"input":"hi"})"},
      {"/v1/messages", R"({"max_tokens":3,"messages":[{"role":"user","content":"hi"}]})"},
      {"/v1/embeddings", R"({"input":"hi"})"},
      {"/v1/rerank", R"({"query":"q","documents":["d"]})"},
      {"/rerank", R"({"query":"q","documents":["d"]})"}};
  for (const auto& [path, body] : routes) {
    auto r = Roundtrip(PostRequest(path, body));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << path << " " << r->body;
  }
  auto state = Roundtrip(GetRequest("/v1/dashboard"));
  ASSERT_TRUE(state);
  const json s = state->Json();
  EXPECT_EQ(s["server"]["responses_429"], std::size(routes));
  EXPECT_EQ(s["server"]["accepted"], 0);
  // The fake engine has no dashboard part: the page still gets a well-formed state.
  EXPECT_TRUE(s["slo"].is_null());
  EXPECT_EQ(s["models"], json::array());
}

}  // namespace
}  // namespace lifeline::api::testing

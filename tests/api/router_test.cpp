#include "api/router.h"

#include <set>

#include <gtest/gtest.h>

namespace lifeline::api {
namespace {

using nlohmann::json;

TEST(MatchRoute, KnownRoutesUnknownPathsAndWrongMethods) {
  EXPECT_EQ(MatchRoute("POST", "/v1/completions").spec->route, Route::kCompletions);
  EXPECT_EQ(MatchRoute("POST", "/v1/chat/completions").spec->route, Route::kChatCompletions);
  EXPECT_EQ(MatchRoute("GET", "/v1/models").spec->route, Route::kModels);
  EXPECT_EQ(MatchRoute("GET", "/livez").spec->route, Route::kHealth);
  EXPECT_EQ(MatchRoute("GET", "/readyz?verbose=1").spec->route, Route::kReady);
  RouteMatch wrong = MatchRoute("GET", "/v1/completions");
  ASSERT_TRUE(wrong.error);
  EXPECT_EQ(wrong.error->http_status, 405);
  EXPECT_EQ(wrong.allow, "POST");
  EXPECT_EQ(wrong.label, "/v1/completions");
  RouteMatch unknown = MatchRoute("GET", "/v2/everything");
  ASSERT_TRUE(unknown.error);
  EXPECT_EQ(unknown.error->http_status, 404);
  EXPECT_EQ(unknown.error->type, "not_found_error");
  EXPECT_EQ(unknown.label, "other");  // unknown paths never become metric labels
  EXPECT_EQ(MatchRoute("DELETE", "/health").error->http_status, 405);
}

TEST(MatchRoute, ModelIdIsAPrefixRouteWithTheRestOfThePath) {
  RouteMatch one = MatchRoute("GET", "/v1/models/stories");
  ASSERT_TRUE(one.spec) << one.error->message;
  EXPECT_EQ(one.spec->route, Route::kModel);
  EXPECT_EQ(one.id, "stories");
  EXPECT_EQ(one.label, "/v1/models/{id}");  // bounded metric labels
  RouteMatch org = MatchRoute("GET", "/v1/models/org/model-7B.q4_0?verbose=1#x");
  ASSERT_TRUE(org.spec);
  EXPECT_EQ(org.id, "org/model-7B.q4_0");
  EXPECT_EQ(MatchRoute("GET", "/v1/models").spec->route, Route::kModels);  // exact stays exact
  EXPECT_EQ(MatchRoute("GET", "/v1/models/").error->http_status, 404);    // no id
  EXPECT_EQ(MatchRoute("GET", "/v1/modelsx").error->http_status, 404);
  RouteMatch post = MatchRoute("POST", "/v1/models/stories");
  ASSERT_TRUE(post.error);
  EXPECT_EQ(post.error->http_status, 405);
  EXPECT_EQ(post.allow, "GET, HEAD");
  EXPECT_EQ(post.label, "/v1/models/{id}");
}

TEST(MatchRoute, HeadMatchesEveryGetRouteAndOnlyThose) {
  for (const RouteSpec& r : RouteTable()) {
    const std::string path =
        r.path.ends_with(kIdParam) ? "/v1/models/m" : std::string(r.path);
    RouteMatch head = MatchRoute("HEAD", path);
    if (r.method == "GET") {
      ASSERT_TRUE(head.spec) << r.path;
      EXPECT_EQ(head.spec->route, r.route);
    } else {
      ASSERT_TRUE(head.error) << r.path;
      EXPECT_EQ(head.error->http_status, 405);
      EXPECT_EQ(head.allow, r.method);
    }
  }
  EXPECT_EQ(MatchRoute("DELETE", "/health").allow, "GET, HEAD");
  EXPECT_EQ(MatchRoute("HEAD", "/nope").error->http_status, 404);
  EXPECT_EQ(MatchRoute("POST", "/tokenize").spec->route, Route::kTokenize);
  EXPECT_EQ(MatchRoute("POST", "/detokenize").spec->route, Route::kDetokenize);
  const std::vector<std::string> origins = {"http://ok.example"};
  auto pre = PreflightResponse("/v1/models/x", "http://ok.example", origins);
  ASSERT_TRUE(pre);
  bool found = false;
  for (const auto& [name, value] : pre->headers) {
    if (name == "Access-Control-Allow-Methods") {
      found = true;
      EXPECT_EQ(value, "GET, HEAD");
    }
  }
  EXPECT_TRUE(found);
}

TEST(HttpMessage, HeadResponseKeepsContentLengthAndDropsTheBody) {
  HttpResponse r = JsonResponse(200, {{"status", "ok"}});
  const std::string get = SerializeResponse(r, true);
  const std::string head = SerializeResponse(r, true, /*head=*/true);
  EXPECT_EQ(get, head + r.body);
  EXPECT_NE(head.find("Content-Length: " + std::to_string(r.body.size()) + "\r\n"),
            std::string::npos);
  EXPECT_TRUE(head.ends_with("\r\n\r\n"));
}

TEST(ClientRequestId, OneTo128OfTheSafeCharacters) {
  EXPECT_TRUE(ValidClientRequestId("a"));
  EXPECT_TRUE(ValidClientRequestId("AZaz09._:-"));
  EXPECT_TRUE(ValidClientRequestId(std::string(128, 'x')));
  EXPECT_FALSE(ValidClientRequestId(""));
  EXPECT_FALSE(ValidClientRequestId(std::string(129, 'x')));
  for (const char* bad : {"a b", "a/b", "a;b", "a\"b", "a\r\nX-Evil: 1", "caf\xC3\xA9", "a,b"}) {
    EXPECT_FALSE(ValidClientRequestId(bad)) << bad;
  }
}

TEST(SmallEndpoints, OneModelOr404NamingModel) {
  const std::vector<ModelInfo> models = {{"a", "me", 5, 2048, "gguf", "tokenizer.chat_template"},
                                         {"org/b", "me", 6, 0, "", ""}};
  const json list = json::parse(ModelsResponse(models).body);
  HttpResponse a = ModelResponse(models, "a");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(json::parse(a.body), list["data"][0]);
  EXPECT_EQ(json::parse(ModelResponse(models, "org/b").body), list["data"][1]);
  HttpResponse missing = ModelResponse(models, "c");
  EXPECT_EQ(missing.status, 404);
  const json e = json::parse(missing.body)["error"];
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_EQ(e["param"], "model");
  EXPECT_EQ(e["type"], "not_found_error");
}

TEST(RouteTable, OnlyHealthAndReadinessArePublic) {
  const std::set<std::string_view> expected_public = {"/health", "/livez", "/ready", "/readyz",
                                                      "/", "/dashboard"};
  for (const RouteSpec& r : RouteTable()) {
    EXPECT_EQ(r.public_access, expected_public.contains(r.path)) << r.path;
  }
}

TEST(ConstantTimeEquals, ComparesExactly) {
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3creT", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cre", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3crett", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("", "s3cret"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  // A given value whose first bytes match the key plus NULs must not pass.
  EXPECT_FALSE(ConstantTimeEquals(std::string_view("ab\0", 3), "ab"));
}

TEST(CheckApiKey, BearerSchemeExactKey) {
  using V = std::vector<std::string_view>;
  using K = std::vector<std::string>;
  EXPECT_FALSE(CheckApiKey(K{}, V{}));  // no key configured: open
  EXPECT_FALSE(CheckApiKey(K{"k3y"}, V{"Bearer k3y"}));
  EXPECT_FALSE(CheckApiKey(K{"k3y"}, V{"bearer k3y"}));  // scheme is case-insensitive
  for (const V& bad : {V{}, V{"Bearer K3Y"}, V{"Bearer k3y "}, V{"k3y"}, V{"Basic k3y"},
                       V{"Bearer"}, V{"Bearer k3y", "Bearer k3y"}, V{"Bearer k3y", "Bearer x"}}) {
    auto err = CheckApiKey(K{"k3y"}, bad);
    ASSERT_TRUE(err) << (bad.empty() ? "none" : bad[0]);
    EXPECT_EQ(err->http_status, 401);
    EXPECT_EQ(err->type, "authentication_error");
  }
}

TEST(CheckApiKey, AnyOfSeveralKeys) {
  using V = std::vector<std::string_view>;
  const std::vector<std::string> keys = {"team-a-key", "team-b-key", "k"};
  EXPECT_FALSE(CheckApiKey(keys, V{"Bearer team-a-key"}));
  EXPECT_FALSE(CheckApiKey(keys, V{"Bearer team-b-key"}));
  EXPECT_FALSE(CheckApiKey(keys, V{"Bearer k"}));
  EXPECT_TRUE(CheckApiKey(keys, V{"Bearer team-c-key"}));
  EXPECT_TRUE(CheckApiKey(keys, V{"Bearer team-a-key team-b-key"}));
  EXPECT_TRUE(CheckApiKey(keys, V{"Bearer "}));
}

TEST(Cors, OffByDefaultAndExactAllowList) {
  EXPECT_TRUE(CorsHeaders("http://evil.example", {}).empty());
  const std::vector<std::string> allowed = {"http://ok.example"};
  EXPECT_TRUE(CorsHeaders("http://evil.example", allowed).empty());
  EXPECT_TRUE(CorsHeaders(std::nullopt, allowed).empty());
  auto h = CorsHeaders("http://ok.example", allowed);
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(h[0].first, "Access-Control-Allow-Origin");
  EXPECT_EQ(h[0].second, "http://ok.example");
  for (const auto& [name, value] : h) EXPECT_NE(name, "Access-Control-Allow-Credentials");
  EXPECT_FALSE(PreflightResponse("/v1/completions", "http://evil.example", allowed));
  EXPECT_FALSE(PreflightResponse("/nope", "http://ok.example", allowed));
  auto pre = PreflightResponse("/v1/completions", "http://ok.example", allowed);
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
}

TEST(SmallEndpoints, ReadinessHealthModelsMetrics) {
  EXPECT_EQ(HealthResponse().status, 200);
  EXPECT_EQ(ReadyResponse(true, false).status, 200);
  HttpResponse not_ready = ReadyResponse(false, false);
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_EQ(json::parse(not_ready.body)["error"]["type"], "unavailable");
  HttpResponse draining = ReadyResponse(true, true);
  EXPECT_EQ(draining.status, 503);
  EXPECT_EQ(json::parse(draining.body)["error"]["code"], "shutting_down");

  json models = json::parse(ModelsResponse({{"a", "me", 5, 2048}, {"b", "me", 6, 0}}).body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][0]["id"], "a");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["meta"]["context_length"], 2048);
  EXPECT_FALSE(models["data"][1].contains("meta"));

  ServerMetrics metrics;
  metrics.CountResponse("/v1/completions", 200);
  metrics.CountResponse("/v1/completions", 200);
  metrics.CountAccepted();
  metrics.CountAccepted();
  metrics.CountCompleted();
  HttpResponse m = MetricsResponse(metrics, "engine_thing 1");
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u);
  EXPECT_NE(m.body.find("lifeline_http_responses_total{route=\"/v1/completions\",status=\"200\"} 2\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("lifeline_requests_in_flight 1\n"), std::string::npos);
  EXPECT_NE(m.body.find("engine_thing 1\n"), std::string::npos);
}

TEST(SmallEndpoints, SloStatusOr404) {
  HttpResponse none = SloResponse(std::nullopt);
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(none.body.find("SLO"), std::string::npos) << none.body;
  HttpResponse some = SloResponse(std::string(R"({"object":"slo.status"})"));
  EXPECT_EQ(some.status, 200);
  EXPECT_EQ(some.content_type, "application/json");
  EXPECT_EQ(some.body, R"({"object":"slo.status"})");
}

TEST(ServerMetrics, LedgerCountsEachOutcome) {
  ServerMetrics m;
  for (int i = 0; i < 4; ++i) m.CountAccepted();
  m.CountCompleted();
  m.CountErrored("context_length_exceeded");
  m.CountCancelled(CancelReason::kClientDisconnect);
  LedgerSnapshot l = m.Ledger();
  EXPECT_EQ(l.accepted, 4u);
  EXPECT_EQ(l.completed + l.errored + l.cancelled, 3u);
  EXPECT_EQ(l.in_flight(), 1u);
  EXPECT_EQ(l.errored_by_code.at("context_length_exceeded"), 1u);
  EXPECT_EQ(l.cancelled_by_reason.at("client_disconnect"), 1u);
  const std::string text = m.PrometheusText();
  EXPECT_NE(text.find("lifeline_requests_errored_total{code=\"context_length_exceeded\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("lifeline_requests_cancelled_total{reason=\"client_disconnect\"} 1\n"),
            std::string::npos);
}


TEST(Cors, WildcardExposedHeadersAndSdkPreflight) {
  const std::vector<std::string> any = {"*"};
  auto h = CorsHeaders("http://localhost:3000", any);
  auto header = [](const auto& headers, std::string_view name) -> std::string {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return "<absent>";
  };
  EXPECT_EQ(header(h, "Access-Control-Allow-Origin"), "*");
  EXPECT_NE(header(h, "Access-Control-Expose-Headers").find("X-Request-Id"), std::string::npos);
  EXPECT_TRUE(CorsHeaders(std::nullopt, any).empty());  // not a CORS request

  // What the OpenAI JS SDK's preflight asks for.
  auto pre = PreflightResponse(
      "/v1/chat/completions", "http://localhost:3000", any,
      "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,"
      "x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
      "x-stainless-runtime-version,x-stainless-timeout");
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  const std::string allowed = header(pre->headers, "Access-Control-Allow-Headers");
  for (std::string_view name : {"Authorization", "Content-Type", "X-SLO-Class", "X-User-Role",
                                "x-stainless-arch", "x-stainless-retry-count",
                                "x-stainless-timeout"}) {
    EXPECT_NE(allowed.find(name), std::string::npos) << name << " in " << allowed;
  }
  EXPECT_EQ(header(pre->headers, "Access-Control-Allow-Methods"), "POST");
  // Anything else the preflight names is not allowed by echo, and odd names are dropped.
  auto odd = PreflightResponse("/v1/completions", "http://localhost:3000", any,
                               "x-custom, x-stainless-a b, x-stainless-\r\nset-cookie");
  ASSERT_TRUE(odd);
  const std::string odd_allowed = header(odd->headers, "Access-Control-Allow-Headers");
  EXPECT_EQ(odd_allowed.find("x-custom"), std::string::npos);
  EXPECT_EQ(odd_allowed.find("set-cookie"), std::string::npos);
  EXPECT_EQ(odd_allowed.find("a b"), std::string::npos);
}

TEST(ServeFlags, CorsOriginsAreOriginsOrTheWildcard) {
  for (std::string_view ok : {"*", "http://localhost:3000", "https://app.example.com",
                              "http://[::1]:8080", "http://10.0.0.2"}) {
    EXPECT_TRUE(CheckCorsOrigin(ok).ok()) << ok;
  }
  for (std::string_view bad : {"", "localhost:3000", "http://", "http://app.example/",
                               "http://app.example/path", "ftp://x", "http://u@host",
                               "http://a b", "**"}) {
    Status s = CheckCorsOrigin(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--cors-origin"), std::string::npos) << s.message();
  }
}

TEST(ServeFlags, ApiKeyFileLinesCommentsAndErrors) {
  auto keys = ParseApiKeys("# team keys\nkey-one\n\n  key-two  \r\n#key-three\n", "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(*keys, (std::vector<std::string>{"key-one", "key-two"}));
  auto spaced = ParseApiKeys("good\nbad key\n", "keys.txt");
  ASSERT_FALSE(spaced.ok());
  EXPECT_NE(spaced.status().message().find("keys.txt line 2"), std::string::npos);
  EXPECT_FALSE(ParseApiKeys("# only comments\n\n", "keys.txt").ok());
  EXPECT_FALSE(ParseApiKeys(std::string(257, 'k'), "keys.txt").ok());
  EXPECT_TRUE(ParseApiKeys(std::string(256, 'k'), "keys.txt").ok());
}
}  // namespace
}  // namespace lifeline::api

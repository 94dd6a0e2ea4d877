// The server over real sockets with a FakeEngine: response shapes, streaming, error statuses,
// keep-alive, auth, CORS and metrics.
#include <string>
#include <thread>
#include <vector>

#include "api/router.h"
#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

using nlohmann::json;

const std::string kCompletion = R"({"prompt":"hi","max_tokens":3})";
const std::string kChat = R"({"model":"fake-model","messages":[{"role":"user","content":"hi"}]})";

TEST_F(ServerTest, SloHeadersOverrideTheBodyAndServedModelIsAHeader) {
  auto reply = Roundtrip(PostRequest(
      "/v1/completions", R"({"prompt":"hi","max_tokens":3,"slo_class":"chat","user_role":"user"})",
      "X-SLO-Class: medical\r\nx-user-role: doctor\r\n"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(reply->Header("x-served-model"), "fake-model");
  auto submitted = engine_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].slo_class, "medical");
  EXPECT_EQ(submitted[0].user_role, "doctor");

  // Without headers the body fields stand.
  reply = Roundtrip(PostRequest("/v1/completions",
                                R"({"prompt":"hi","max_tokens":3,"slo_class":"chat"})"));
  ASSERT_TRUE(reply);
  submitted = engine_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_EQ(submitted[1].slo_class, "chat");
  EXPECT_EQ(submitted[1].user_role, "");
}

// A late request moved to a lighter model before its first token (kRouted): the answer, its
// chunks and X-Served-Model name the model that served it, streamed or not.
TEST_F(ServerTest, ARoutedRequestNamesTheModelThatServedIt) {
  FakeScript s;
  s.routed_to = "light";
  engine_.SetScript(s);
  auto reply = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(reply->Header("x-served-model"), "light");
  EXPECT_EQ(json::parse(reply->body)["model"], "light");
  EXPECT_EQ(json::parse(reply->body)["choices"][0]["text"], "Hello, world");

  reply = Roundtrip(PostRequest("/v1/chat/completions",
                                R"({"messages":[{"role":"user","content":"hi"}],"stream":true})"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(reply->Header("x-served-model"), "light");
  int chunks = 0;
  for (const std::string& data : lifeline::testing::SseData(reply->body)) {
    if (data.empty() || data[0] != '{') continue;  // [DONE]
    EXPECT_EQ(json::parse(data)["model"], "light") << data;
    ++chunks;
  }
  EXPECT_GT(chunks, 0) << reply->body;
}

TEST_F(ServerTest, NonStreamingCompletion) {
  auto reply = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(reply->Header("content-type"), "application/json");
  json body = reply->Json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "fake-model");  // default model resolved by the server
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(reply->Header("x-request-id"), body["id"]);
  EXPECT_TRUE(body["created"].is_number_integer());
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], "Hello, world");  // the script's three tokens
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"], json::parse(R"({"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,
                                           "prompt_tokens_details":{"cached_tokens":0},
                                           "completion_tokens_details":{"reasoning_tokens":0}})"));
  EXPECT_EQ(body["timings"]["prefill_ms"], 12.25);     // passed through from the engine
  EXPECT_TRUE(body["timings"]["http_read_ms"].is_number());  // added by the server
  const std::string st = reply->Header("server-timing");
  EXPECT_NE(st.find("queue;dur=1.5"), std::string::npos) << st;
  EXPECT_NE(st.find("prefill;dur=12.25"), std::string::npos) << st;
  EXPECT_NE(st.find("decode;dur=30"), std::string::npos) << st;

  auto submitted = engine_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].prompts.at(0).text, "hi");
  EXPECT_EQ(submitted[0].max_tokens, 3);
  EXPECT_EQ(submitted[0].model, "fake-model");
  EXPECT_EQ(submitted[0].request_id, body["id"]);
  EXPECT_LE(submitted[0].timeline.first_byte, submitted[0].timeline.validated);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().completed, 1u);
}

TEST_F(ServerTest, NonStreamingChat) {
  auto reply = Roundtrip(PostRequest("/v1/chat/completions", kChat));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  json body = reply->Json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["choices"][0]["message"],
            json::parse(R"({"role":"assistant","content":"Hello, world","refusal":null})"));
  auto submitted = engine_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_TRUE(submitted[0].is_chat);
  ASSERT_EQ(submitted[0].messages.size(), 1u);
  EXPECT_EQ(submitted[0].messages[0].content, "hi");
}

TEST_F(ServerTest, StreamingCompletionWithUsage) {
  auto reply = Roundtrip(PostRequest(
      "/v1/completions",
      R"({"prompt":"hi","stream":true,"stream_options":{"include_usage":true}})"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200);
  EXPECT_EQ(reply->Header("content-type"), "text/event-stream");
  EXPECT_EQ(reply->Header("transfer-encoding"), "chunked");
  auto events = SseEvents(reply->body);
  // 3 deltas, the finish chunk, the usage chunk, [DONE].
  ASSERT_EQ(events.size(), 6u) << reply->body;
  std::string text;
  for (int i = 0; i < 3; ++i) {
    json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
    text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello, world");
  json finish = json::parse(events[3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  json usage = json::parse(events[4]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 10);
  EXPECT_EQ(usage["timings"]["queue_ms"], 1.5);  // timings ride on the last data event
  EXPECT_EQ(events[5], "[DONE]");
}

TEST_F(ServerTest, StreamingChatUsesDelta) {
  auto reply = Roundtrip(PostRequest(
      "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"x"}],"stream":true})"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200);
  auto events = SseEvents(reply->body);
  ASSERT_EQ(events.size(), 5u) << reply->body;  // 3 deltas, finish, [DONE]
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "Hello");
  EXPECT_FALSE(json::parse(events[1])["choices"][0]["delta"].contains("role"));
  json finish = json::parse(events[3]);
  EXPECT_EQ(finish["choices"][0]["delta"], json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(finish["timings"].is_object());
  EXPECT_EQ(events[4], "[DONE]");
}

TEST_F(ServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  TestClient c(server_->port());
  const std::vector<std::string> requests = {
      GetRequest("/health"), PostRequest("/v1/completions", kCompletion),
      PostRequest("/v1/completions", R"({"prompt":"s","stream":true})"),
      GetRequest("/v1/models"), PostRequest("/v1/chat/completions", kChat)};
  for (const std::string& r : requests) {
    ASSERT_TRUE(c.Send(r));
    auto reply = c.ReadResponse();
    ASSERT_TRUE(reply) << r;
    EXPECT_EQ(reply->status, 200) << r;
    EXPECT_FALSE(reply->closed);
  }
  // Two requests in one write (pipelining) are answered in order.
  ASSERT_TRUE(c.Send(GetRequest("/health") + GetRequest("/v1/models")));
  auto a = c.ReadResponse();
  auto b = c.ReadResponse();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->Json()["status"], "ok");
  EXPECT_EQ(b->Json()["object"], "list");
  const std::string metrics = server_->metrics().PrometheusText();
  EXPECT_NE(metrics.find("lifeline_http_connections_total 1\n"), std::string::npos) << metrics;
}

TEST_F(ServerTest, ErrorStatusesHaveOpenAiBodies) {
  struct Case {
    std::string name, request;
    int status;
    std::string type, param;
  };
  const std::string deep(100000, '[');
  const std::vector<Case> cases = {
      {"malformed json", PostRequest("/v1/completions", R"({"prompt":)"), 400,
       "invalid_request_error", ""},
      {"deep nesting", PostRequest("/v1/completions", deep), 400, "invalid_request_error", ""},
      {"invalid utf-8", PostRequest("/v1/completions", "{\"prompt\":\"\xFF\"}"), 400,
       "invalid_request_error", ""},
      {"wrong type", PostRequest("/v1/completions", R"({"prompt":"x","temperature":"hot"})"),
       400, "invalid_request_error", "temperature"},
      {"out of range", PostRequest("/v1/completions", R"({"prompt":"x","top_p":1.5})"), 400,
       "invalid_request_error", "top_p"},
      {"negative max_tokens", PostRequest("/v1/completions", R"({"prompt":"x","max_tokens":-1})"),
       400, "invalid_request_error", "max_tokens"},
      {"n=17", PostRequest("/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"x"}],"n":17})"),
       400, "invalid_request_error", "n"},
      {"unknown field", PostRequest("/v1/chat/completions",
                                    R"({"messages":[{"role":"user","content":"x"}],"foo":1})"),
       400, "invalid_request_error", "foo"},
      {"unknown response_format", PostRequest("/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}})"),
       400, "invalid_request_error", "response_format.type"},
      {"unknown model", PostRequest("/v1/completions", R"({"prompt":"x","model":"gpt-9"})"), 404,
       "not_found_error", "model"},
      {"unknown route", GetRequest("/v1/engines"), 404, "not_found_error", ""},
      {"wrong method", GetRequest("/v1/completions"), 405, "invalid_request_error", ""},
      {"wrong content type", PostRequest("/v1/completions", kCompletion, "", "text/plain"), 415,
       "invalid_request_error", ""},
      {"missing content type", PostRequest("/v1/completions", kCompletion, "", ""), 415,
       "invalid_request_error", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto reply = Roundtrip(c.request);
    ASSERT_TRUE(reply);
    json e = ExpectErrorBody(*reply, c.status);
    EXPECT_EQ(e["type"], c.type);
    if (c.param.empty()) {
      EXPECT_TRUE(e["param"].is_null());
    } else {
      EXPECT_EQ(e["param"], c.param);
    }
    if (c.status == 405) {
      EXPECT_EQ(reply->Header("allow"), "POST");
    }
  }
  EXPECT_EQ(engine_.submitted().size(), 0u);  // none of them reached the engine
}

TEST_F(ServerTest, EngineNotReady) {
  engine_.SetReady(false);
  auto ready = Roundtrip(GetRequest("/ready"));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ExpectErrorBody(*ready, 503)["type"], "unavailable");
  auto readyz = Roundtrip(GetRequest("/readyz"));
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 503);
  auto health = Roundtrip(GetRequest("/livez"));
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);  // liveness is about the process, not the model
  auto gen = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(gen);
  ExpectErrorBody(*gen, 503);
  EXPECT_EQ(gen->Header("retry-after"), "1");
  engine_.SetReady(true);
  auto ok = Roundtrip(GetRequest("/ready"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// A model whose file changed under the server: its new requests get the documented 503
// model_failed from the engine, not a generic not_ready from the server, and the engine's
// other models stay served (before: every generation request was 503 not_ready while
// /ready said why).
TEST_F(ServerTest, AFailedModelsRequestsGetModelFailedAndOtherModelsAreServed) {
  engine_.FailModel("fake-model", "its file was modified in place");
  auto ready = Roundtrip(GetRequest("/ready"));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ExpectErrorBody(*ready, 503)["type"], "unavailable");
  EXPECT_NE(ready->body.find("modified in place"), std::string::npos) << ready->body;
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    auto failed = Roundtrip(PostRequest(
        "/v1/completions", stream ? R"({"prompt":"x","stream":true})" : kCompletion));
    ASSERT_TRUE(failed);
    const json e = ExpectErrorBody(*failed, 503);
    EXPECT_EQ(e["code"], "model_failed");
    EXPECT_EQ(e["type"], "unavailable");
    EXPECT_NE(e["message"].get<std::string>().find("fake-model"), std::string::npos);
  }
  auto other = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x","model":"fake-light"})"));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200) << other->body;
  // An engine that is not ready and cannot say why is still refused by the server.
  engine_.FailModel("", "");
  engine_.SetReady(false);
  auto unready = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(unready);
  EXPECT_EQ(ExpectErrorBody(*unready, 503)["code"], "not_ready");
}

TEST_F(ServerTest, EngineRejectionKeepsItsStatusAndRetryAfter) {
  FakeScript script;
  script.reject = ApiError{429, "overloaded", "queue_full", "queue is full (64 waiting)", "", 2};
  engine_.SetScript(script);
  auto reply = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(reply);
  json e = ExpectErrorBody(*reply, 429);
  EXPECT_EQ(e["code"], "queue_full");
  EXPECT_EQ(reply->Header("retry-after"), "2");
  EXPECT_EQ(server_->Ledger().accepted, 0u);  // refused requests never enter the ledger
}

TEST_F(ServerTest, ErrorBeforeFirstTokenIsPlainHttpForStreamsToo) {
  FakeScript script;
  script.tokens.clear();
  script.error_at_end = ApiError{400, "invalid_request_error", "context_length_exceeded",
                                 "prompt 3000 tokens + max_tokens 100 > context 2048", "prompt", 0};
  engine_.SetScript(script);
  for (const char* body : {R"({"prompt":"x"})", R"({"prompt":"x","stream":true})"}) {
    auto reply = Roundtrip(PostRequest("/v1/completions", body));
    ASSERT_TRUE(reply);
    json e = ExpectErrorBody(*reply, 400);
    EXPECT_EQ(e["code"], "context_length_exceeded");
    EXPECT_EQ(e["param"], "prompt");
    EXPECT_EQ(reply->Header("content-type"), "application/json");
  }
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().errored_by_code.at("context_length_exceeded"), 2u);
}

TEST_F(ServerTest, ErrorMidStreamIsATerminalEventWithoutDone) {
  FakeScript script;
  script.tokens = {"a", "b"};
  script.error_at_end = ApiError{500, "internal_error", "decode_failed", "NaN logits", "", 0};
  engine_.SetScript(script);
  TestClient c(server_->port());
  ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x","stream":true})")));
  auto reply = c.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  auto events = SseEvents(reply->body);
  ASSERT_EQ(events.size(), 3u) << reply->body;
  json err = json::parse(events[2]);
  EXPECT_EQ(err["error"]["code"], "decode_failed");
  EXPECT_EQ(err["error"]["type"], "internal_error");
  EXPECT_EQ(reply->body.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(c.WaitForClose(2s));  // the connection is not reused after a failed stream
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().errored_by_code.at("decode_failed"), 1u);
}

// POST /apply-template: a chat body in, {"prompt"} out, validated like a chat request; the
// engine's refusal (a template's raise) is its 400.
TEST_F(ServerTest, ApplyTemplateAnswersThePromptTheEngineRenders) {
  auto ok = Roundtrip(PostRequest("/apply-template",
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]})"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok->body), nlohmann::json({{"prompt", "<system>s<user>u<assistant>"}}));
  auto no_gen = Roundtrip(PostRequest("/apply-template",
      R"({"messages":[{"role":"user","content":"u"}],"add_generation_prompt":false})"));
  ASSERT_TRUE(no_gen);
  EXPECT_EQ(nlohmann::json::parse(no_gen->body)["prompt"], "<user>u");
  auto raised = Roundtrip(PostRequest("/apply-template",
      R"({"messages":[{"role":"user","content":"raise"}]})"));
  ASSERT_TRUE(raised);
  EXPECT_EQ(raised->status, 400);
  EXPECT_EQ(nlohmann::json::parse(raised->body)["error"]["code"], "template_error");
  auto bad = Roundtrip(PostRequest("/apply-template", R"({"messages":[{"role":"wizard","content":"u"}]})"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(nlohmann::json::parse(bad->body)["error"]["param"], "messages[0].role");
  auto unknown = Roundtrip(PostRequest("/apply-template",
      R"({"model":"nope","messages":[{"role":"user","content":"u"}]})"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(engine_.accepted(), 0);  // nothing was submitted for generation
}

// Anthropic's clients send the key as x-api-key: accepted when no Authorization header came;
// with one, the Authorization header decides.
TEST_F(ServerTest, AnXApiKeyHeaderIsAKeyToo) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.api_keys = {"s3cret-key"};
  StartServer(o);
  auto right = Roundtrip(GetRequest("/v1/models", "x-api-key: s3cret-key\r\n"));
  auto wrong = Roundtrip(GetRequest("/v1/models", "x-api-key: s3cret-kez\r\n"));
  auto both = Roundtrip(GetRequest("/v1/models",
                                   "Authorization: Bearer nope\r\nx-api-key: s3cret-key\r\n"));
  ASSERT_TRUE(right && wrong && both);
  EXPECT_EQ(right->status, 200);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(both->status, 401);
}

TEST_F(ServerTest, ApiKeyProtectsEveryRouteButHealthAndReadiness) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.api_keys = {"other-key", "s3cret-key"};
  o.economics = std::make_shared<RecordingEconomics>();
  StartServer(o);
  std::vector<ModelInfo> models = engine_.Models();
  models[0].rerank_outputs = 1;  // so that /v1/rerank and /rerank serve it
  engine_.SetModels(models);
  for (const RouteSpec& r : RouteTable()) {
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.path));
    std::string body = kCompletion;
    if (r.route == Route::kChatCompletions || r.route == Route::kApplyTemplate) body = kChat;
    if (r.route == Route::kTokenize) body = R"({"content":"hi"})";
    if (r.route == Route::kDetokenize) body = R"({"tokens":[104,105]})";
    if (r.route == Route::kInfill) body = R"({"input_prefix":"a","input_suffix":"b"})";
    if (r.route == Route::kResponses) body = R"({"input":"hi","max_output_tokens":3})";
    if (r.route == Route::kMessages) body = R"({"max_tokens":3,"messages":[{"role":"user","content":"hi"}]})";
    if (r.route == Route::kOutcomes) body = R"({"events":[{"request_id":"a","type":"clicked"}]})";
    if (r.route == Route::kEmbeddings) body = R"({"input":"hi"})";
    if (r.route == Route::kRerank) body = R"({"query":"q","documents":["hi"]})";
    const std::string path = r.route == Route::kModel ? "/v1/models/fake-model" : std::string(r.path);
    auto make = [&](const std::string& headers) {
      return r.method == "POST" ? PostRequest(path, body, headers) : GetRequest(path, headers);
    };
    auto none = Roundtrip(make(""));
    auto wrong = Roundtrip(make("Authorization: Bearer s3cret-kez\r\n"));
    auto right = Roundtrip(make("Authorization: Bearer s3cret-key\r\n"));
    ASSERT_TRUE(none && wrong && right);
    EXPECT_EQ(right->status, 200);
    if (r.public_access) {
      EXPECT_EQ(none->status, 200);
      EXPECT_EQ(wrong->status, 200);
    } else {
      EXPECT_EQ(ExpectErrorBody(*none, 401)["type"], "authentication_error");
      EXPECT_EQ(none->Header("www-authenticate"), "Bearer");
      ExpectErrorBody(*wrong, 401);
    }
  }
}

TEST_F(ServerTest, CorsOffByDefaultAndAllowListed) {
  auto plain = Roundtrip(GetRequest("/v1/models", "Origin: http://evil.example\r\n"));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200);
  EXPECT_EQ(plain->Header("access-control-allow-origin"), "");
  auto preflight = Roundtrip("OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\n"
                             "Origin: http://evil.example\r\n\r\n");
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 405);
  EXPECT_EQ(preflight->Header("access-control-allow-origin"), "");

  server_->Stop();
  ServerOptions o = TestOptions();
  o.cors_allowed_origins = {"http://app.example"};
  StartServer(o);
  auto allowed = Roundtrip("OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\n"
                           "Origin: http://app.example\r\n\r\n");
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->status, 204);
  EXPECT_EQ(allowed->Header("access-control-allow-origin"), "http://app.example");
  auto evil = Roundtrip(GetRequest("/v1/models", "Origin: http://evil.example\r\n"));
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->Header("access-control-allow-origin"), "");
  auto good = Roundtrip(GetRequest("/v1/models", "Origin: http://app.example\r\n"));
  ASSERT_TRUE(good);
  EXPECT_EQ(good->Header("access-control-allow-origin"), "http://app.example");
}

TEST_F(ServerTest, MetricsExposeRoutesLedgerAndEngineText) {
  ASSERT_TRUE(Roundtrip(PostRequest("/v1/completions", kCompletion)));
  ASSERT_TRUE(Roundtrip(GetRequest("/nope")));
  ASSERT_TRUE(WaitIdle());
  auto reply = Roundtrip(GetRequest("/metrics"));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200);
  const std::string& m = reply->body;
  EXPECT_NE(m.find("lifeline_http_responses_total{route=\"/v1/completions\",status=\"200\"} 1\n"),
            std::string::npos) << m;
  EXPECT_NE(m.find("lifeline_http_responses_total{route=\"other\",status=\"404\"} 1\n"),
            std::string::npos) << m;
  EXPECT_NE(m.find("lifeline_requests_accepted_total 1\n"), std::string::npos);
  EXPECT_NE(m.find("lifeline_requests_completed_total 1\n"), std::string::npos);
  EXPECT_NE(m.find("fake_engine_steps_total 42\n"), std::string::npos);
}

TEST_F(ServerTest, ExpectContinueAndHttp10) {
  TestClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Expect: 100-continue\r\nContent-Length: " +
                     std::to_string(kCompletion.size()) + "\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntil("100 Continue", 2s));
  ASSERT_TRUE(c.Send(kCompletion));
  auto reply = c.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);

  // HTTP/1.0 stream: no chunking, the body ends when the server closes.
  const std::string body = R"({"prompt":"x","stream":true})";
  TestClient old(server_->port());
  ASSERT_TRUE(old.Send("POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                       "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  auto streamed = old.ReadResponse();
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->Header("transfer-encoding"), "");
  auto events = SseEvents(streamed->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
}

}  // namespace
}  // namespace lifeline::api::testing

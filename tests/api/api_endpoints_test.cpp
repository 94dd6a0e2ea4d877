// The API-completeness endpoints over real sockets with a FakeEngine: POST /tokenize and
// /detokenize (llama.cpp's shapes, validation naming the field), GET /v1/models/{id}, HEAD
// wherever GET is (framing intact on a kept-alive connection) and X-Request-Id on every answer.
#include <set>
#include <string>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

using nlohmann::json;
using lifeline::testing::HeadRequest;

const std::string kCompletion = R"({"prompt":"hi","max_tokens":3})";

json OkJson(const std::optional<HttpReply>& reply) {
  EXPECT_TRUE(reply);
  if (!reply) return json();
  EXPECT_EQ(reply->status, 200) << reply->body;
  return reply->Json();
}

TEST_F(ServerTest, TokenizeAndDetokenizeGoThroughTheEnginesTokenizer) {
  auto plain = Roundtrip(PostRequest("/tokenize", R"({"content":"hi"})"));
  EXPECT_EQ(OkJson(plain), json::parse(R"({"tokens":[104,105]})"));
  EXPECT_EQ(engine_.last_token_model(), "fake-model");  // the default model, resolved
  // add_special defaults to false, parse_special to true; both reach the engine.
  auto special = Roundtrip(PostRequest("/tokenize", R"({"content":"<s>a","add_special":true})"));
  EXPECT_EQ(OkJson(special)["tokens"], json::parse("[256,256,97]"));
  auto literal = Roundtrip(PostRequest(
      "/tokenize", R"({"model":"fake-light","content":"<s>","parse_special":false})"));
  EXPECT_EQ(OkJson(literal)["tokens"], json::parse("[60,115,62]"));
  EXPECT_EQ(engine_.last_token_model(), "fake-light");
  auto nulls = Roundtrip(PostRequest(
      "/tokenize", R"({"content":"a","add_special":null,"parse_special":null,"with_pieces":1})"));
  EXPECT_EQ(OkJson(nulls)["tokens"], json::parse("[97]"));  // null = default; extras ignored

  auto text = Roundtrip(PostRequest("/detokenize", R"({"tokens":[256,104,105]})"));
  EXPECT_EQ(OkJson(text), json::parse(R"({"content":"hi"})"));
  auto empty = Roundtrip(PostRequest("/detokenize", R"({"tokens":[]})"));
  EXPECT_EQ(OkJson(empty)["content"], "");
  // Half a UTF-8 character is replaced in the JSON, never a broken body.
  auto half = Roundtrip(PostRequest("/detokenize", R"({"tokens":[226,130]})"));
  EXPECT_EQ(OkJson(half)["content"], "\xEF\xBF\xBD");
  EXPECT_EQ(engine_.accepted(), 0);  // nothing was queued for generation
}

TEST_F(ServerTest, TokenizeAndDetokenizeErrorsNameTheField) {
  struct Case {
    std::string name, path, body;
    int status;
    std::string param, code;
  };
  const std::vector<Case> cases = {
      {"no content", "/tokenize", R"({})", 400, "content", "missing_required_parameter"},
      {"null content", "/tokenize", R"({"content":null})", 400, "content",
       "missing_required_parameter"},
      {"content not a string", "/tokenize", R"({"content":[1]})", 400, "content", "invalid_type"},
      {"add_special not a bool", "/tokenize", R"({"content":"a","add_special":"yes"})", 400,
       "add_special", "invalid_type"},
      {"parse_special not a bool", "/tokenize", R"({"content":"a","parse_special":1})", 400,
       "parse_special", "invalid_type"},
      {"model not a string", "/tokenize", R"({"content":"a","model":7})", 400, "model",
       "invalid_type"},
      {"unknown model", "/tokenize", R"({"content":"a","model":"gpt-9"})", 404, "model",
       "model_not_found"},
      {"duplicate key", "/tokenize", R"({"content":"a","content":"b"})", 400, "content",
       "duplicate_key"},
      {"no tokens", "/detokenize", R"({})", 400, "tokens", "missing_required_parameter"},
      {"tokens not an array", "/detokenize", R"({"tokens":"104"})", 400, "tokens",
       "invalid_type"},
      {"a float id", "/detokenize", R"({"tokens":[1,2.5]})", 400, "tokens[1]", "invalid_type"},
      {"a string id", "/detokenize", R"({"tokens":["1"]})", 400, "tokens[0]", "invalid_type"},
      {"a negative id", "/detokenize", R"({"tokens":[1,2,-1]})", 400, "tokens[2]",
       "out_of_range"},
      {"an id above int32", "/detokenize", R"({"tokens":[3000000000]})", 400, "tokens[0]",
       "out_of_range"},
      {"an id above uint64", "/detokenize", R"({"tokens":[18446744073709551615]})", 400,
       "tokens[0]", "out_of_range"},
      {"outside the vocabulary", "/detokenize", R"({"tokens":[1,300]})", 400, "tokens[1]",
       "out_of_range"},
      {"unknown model", "/detokenize", R"({"tokens":[1],"model":"gpt-9"})", 404, "model",
       "model_not_found"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto reply = Roundtrip(PostRequest(c.path, c.body));
    ASSERT_TRUE(reply);
    json e = ExpectErrorBody(*reply, c.status);
    EXPECT_EQ(e["param"], c.param);
    EXPECT_EQ(e["code"], c.code);
  }
  auto not_json = Roundtrip(PostRequest("/tokenize", R"({"content":"a"})", "", "text/plain"));
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 415);
  auto get = Roundtrip(GetRequest("/tokenize"));
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->Header("allow"), "POST");
}

TEST_F(ServerTest, DetokenizeCapsTheNumberOfTokens) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.request_limits.max_detokenize_tokens = 4;
  StartServer(o);
  EXPECT_EQ(OkJson(Roundtrip(PostRequest("/detokenize", R"({"tokens":[97,98,99,100]})")))
                ["content"], "abcd");
  auto over = Roundtrip(PostRequest("/detokenize", R"({"tokens":[97,98,99,100,101]})"));
  ASSERT_TRUE(over);
  json e = ExpectErrorBody(*over, 400);
  EXPECT_EQ(e["param"], "tokens");
  const std::string message = e["message"];
  EXPECT_NE(message.find("5 entries"), std::string::npos) << message;
  EXPECT_NE(message.find("max_detokenize_tokens = 4"), std::string::npos) << message;
}

TEST_F(ServerTest, OneModelByIdIsItsListEntry) {
  engine_.SetModels({ModelInfo{"fake-model", "lifeline", 1700000000, 2048, "preset", "chatml"},
                     ModelInfo{"org/light-1.5", "lifeline", 1700000001, 0, "", ""}});
  auto list = Roundtrip(GetRequest("/v1/models"));
  ASSERT_TRUE(list);
  const json data = list->Json()["data"];
  auto one = Roundtrip(GetRequest("/v1/models/fake-model"));
  EXPECT_EQ(OkJson(one), data[0]);  // same object, meta included
  EXPECT_EQ(data[0]["meta"]["chat_template"]["name"], "chatml");
  // An id with '/' is the rest of the path; a query string is not part of it.
  auto slash = Roundtrip(GetRequest("/v1/models/org/light-1.5?x=1"));
  EXPECT_EQ(OkJson(slash), data[1]);

  auto unknown = Roundtrip(GetRequest("/v1/models/gpt-9"));
  ASSERT_TRUE(unknown);
  json e = ExpectErrorBody(*unknown, 404);
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_EQ(e["param"], "model");
  EXPECT_NE(e["message"].get<std::string>().find("gpt-9"), std::string::npos);
  // Percent-encoding is not decoded: "org%2Flight-1.5" is not "org/light-1.5".
  auto encoded = Roundtrip(GetRequest("/v1/models/org%2Flight-1.5"));
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->status, 404);
  auto post = Roundtrip(PostRequest("/v1/models/fake-model", "{}"));
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->Header("allow"), "GET, HEAD");
  // The metrics label is the pattern: ids never become label values.
  const std::string m = server_->metrics().PrometheusText();
  EXPECT_NE(m.find("route=\"/v1/models/{id}\",status=\"200\"} 2"), std::string::npos) << m;
  EXPECT_EQ(m.find("gpt-9"), std::string::npos) << m;
}

TEST_F(ServerTest, HeadAnswersLikeGetWithoutTheBodyAndKeepsTheConnection) {
  TestClient c(server_->port());
  for (const char* path : {"/v1/models", "/v1/models/fake-light", "/health", "/metrics",
                           "/v1/slo", "/ready"}) {
    SCOPED_TRACE(path);
    ASSERT_TRUE(c.Send(GetRequest(path)));
    auto get = c.ReadResponse();
    ASSERT_TRUE(get);
    ASSERT_TRUE(c.Send(HeadRequest(path)));
    auto head = c.ReadResponse(5s, /*to_head=*/true);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, get->status);
    EXPECT_EQ(head->Header("content-type"), get->Header("content-type"));
    if (std::string(path) != "/metrics") {  // /metrics counts the GET itself in between
      EXPECT_EQ(head->Header("content-length"), std::to_string(get->body.size()));
    }
    EXPECT_EQ(head->body, "");
    EXPECT_FALSE(head->closed);
  }
  // Errors too: status and headers, no body. A body sent anyway would be read as the next
  // response's status line below.
  ASSERT_TRUE(c.Send(HeadRequest("/nope")));
  auto missing = c.ReadResponse(5s, true);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  ASSERT_TRUE(c.Send(HeadRequest("/v1/completions")));
  auto wrong = c.ReadResponse(5s, true);
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->Header("allow"), "POST");
  // Two more on the same connection, pipelined: HEAD then GET.
  ASSERT_TRUE(c.Send(HeadRequest("/health") + GetRequest("/health")));
  auto h = c.ReadResponse(5s, true);
  auto g = c.ReadResponse();
  ASSERT_TRUE(h && g);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(g->Json()["status"], "ok");
  const std::string m = server_->metrics().PrometheusText();
  EXPECT_NE(m.find("lifeline_http_connections_total 1\n"), std::string::npos) << m;
}

TEST_F(ServerTest, ClientRequestIdIsEchoedOnEveryAnswer) {
  const std::string id = "trace-42:a.b_C";
  const std::string header = "X-Request-Id: " + id + "\r\n";
  // Generation: the header is the client's; the body's id stays ours; the engine sees the
  // client's as the request id.
  auto ok = Roundtrip(PostRequest("/v1/completions", kCompletion, header));
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200);
  EXPECT_EQ(ok->Header("x-request-id"), id);
  EXPECT_EQ(ok->Json()["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(engine_.submitted().size(), 1u);
  EXPECT_EQ(engine_.submitted()[0].request_id, id);
  auto stream = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x","stream":true})",
                                      "x-request-id: " + id + "\r\n"));
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->Header("x-request-id"), id);
  // Errors and small endpoints.
  for (const std::string& request : std::vector<std::string>{
           PostRequest("/v1/completions", R"({"prompt":1})", header), GetRequest("/health", header),
        GetRequest("/nope", header), PostRequest("/tokenize", R"({"content":"a"})", header),
        GetRequest("/v1/models/gpt-9", header), HeadRequest("/v1/models", header)}) {
    SCOPED_TRACE(request);
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send(request));
    auto reply = c.ReadResponse(5s, request.starts_with("HEAD"));
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->Header("x-request-id"), id);
  }
  ASSERT_TRUE(WaitIdle());
}

TEST_F(ServerTest, WithoutAValidClientIdEachAnswerGetsAFreshOne) {
  // No header: generation answers carry their completion id, errors included.
  auto ok = Roundtrip(PostRequest("/v1/chat/completions",
                                  R"({"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->Header("x-request-id"), ok->Json()["id"]);
  auto bad = Roundtrip(PostRequest("/v1/completions", R"({"prompt":1})"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->Header("x-request-id").rfind("cmpl-", 0), 0u) << bad->Header("x-request-id");
  // Other routes: "req-<hex>", different every time; invalid client ids are ignored.
  const std::string too_long(129, 'a');
  std::set<std::string> seen;
  for (const std::string& headers :
       std::vector<std::string>{"", "X-Request-Id: has space\r\n", "X-Request-Id: semi;colon\r\n",
        "X-Request-Id: " + too_long + "\r\n", "X-Request-Id: \r\n"}) {
    SCOPED_TRACE(headers);
    auto reply = Roundtrip(GetRequest("/health", headers));
    ASSERT_TRUE(reply);
    const std::string rid = reply->Header("x-request-id");
    EXPECT_EQ(rid.rfind("req-", 0), 0u) << rid;
    EXPECT_TRUE(seen.insert(rid).second) << rid;
  }
  // 128 characters is still valid.
  const std::string longest(128, 'z');
  auto edge = Roundtrip(GetRequest("/health", "X-Request-Id: " + longest + "\r\n"));
  ASSERT_TRUE(edge);
  EXPECT_EQ(edge->Header("x-request-id"), longest);
  // A request refused while reading (413: Content-Length over the limit) has one too.
  TestClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "X-Request-Id: big-1\r\nContent-Length: 99999999\r\n\r\n"));
  auto big = c.ReadResponse();
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(big->Header("x-request-id"), "big-1");
}

}  // namespace
}  // namespace lifeline::api::testing

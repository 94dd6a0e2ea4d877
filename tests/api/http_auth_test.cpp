// API keys decided from the request's header alone, over real sockets: a client without a
// valid key is answered 401 before any body byte is read, the server discards at most
// max_unauthenticated_body_bytes of what it sends after that, and a public route takes no
// more body than that from it either.
#include <cstdio>
#include <string>
#include <thread>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

const std::string kCompletion = R"({"prompt":"x"})";

class ApiKeyTest : public ServerTest {
 protected:
  void SetUp() override {}  // each test starts its server with keys

  static ServerOptions KeyOptions() {
    ServerOptions o = TestOptions();
    o.api_keys = {"s3cret-key"};
    return o;
  }

  // Waits until no connection is open on the server side.
  bool WaitNoConnections(std::chrono::milliseconds timeout) {
    return engine_.WaitFor([&] { return server_->metrics().OpenConnections() == 0; }, timeout);
  }
};

// Before: the body was read first (here: waited for until the body deadline, then 408), and
// a 100 Continue invited the client to send it.
TEST_F(ApiKeyTest, WithoutAValidKeyTheAnswerIs401BeforeTheBodyIsRead) {
  StartServer(KeyOptions());
  struct Case {
    std::string name, framing;
  };
  for (const Case& c : {Case{"content-length", "Content-Length: 524288\r\n"},
                        Case{"chunked", "Transfer-Encoding: chunked\r\n"},
                        Case{"expect 100-continue",
                             "Content-Length: 524288\r\nExpect: 100-continue\r\n"}}) {
    for (const std::string auth : {"", "Authorization: Bearer wrong-key\r\n"}) {
      SCOPED_TRACE(c.name + " / " + (auth.empty() ? "no key" : "wrong key"));
      TestClient client(server_->port());
      // The header only: no body byte is ever sent.
      ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                              "Content-Type: application/json\r\n" +
                              auth + c.framing + "\r\n"));
      auto reply = client.ReadResponse(5s);
      ASSERT_TRUE(reply);
      EXPECT_EQ(ExpectErrorBody(*reply, 401)["type"], "authentication_error");
      EXPECT_EQ(reply->Header("www-authenticate"), "Bearer");
      EXPECT_TRUE(reply->closed) << "the unread body must not be taken for the next request";
      EXPECT_EQ(client.raw().find("100 Continue"), std::string::npos) << client.raw();
      EXPECT_TRUE(client.WaitForClose(5s));
    }
  }
  // With the key, the same header waits for its body and is served.
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          "Content-Type: application/json\r\nAuthorization: Bearer s3cret-key\r\n"
                          "Expect: 100-continue\r\nContent-Length: " +
                          std::to_string(kCompletion.size()) + "\r\n\r\n"));
  ASSERT_TRUE(client.ReadUntil("100 Continue", 5s));
  ASSERT_TRUE(client.Send(kCompletion));
  auto reply = client.ReadResponse(5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(engine_.accepted(), 1);
}

// After the 401 the server reads (and discards) what the client still sends only up to
// max_unauthenticated_body_bytes, then closes. The linger deadline is set far beyond the
// test's wait, so only that byte bound can end the connection in time (before: 4 MiB were
// drained from anyone, and the body was read before the key was checked at all).
TEST_F(ApiKeyTest, AfterA401AtMostTheUnauthenticatedBoundIsDiscardedThenTheConnectionCloses) {
  ServerOptions o = KeyOptions();
  o.limits.max_unauthenticated_body_bytes = 16 * 1024;
  o.limits.linger_timeout = std::chrono::minutes(10);
  StartServer(o);
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          "Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"));
  auto reply = client.ReadResponse(5s);
  ASSERT_TRUE(reply);
  ExpectErrorBody(*reply, 401);
  // 64 KiB of the announced body, four times the bound; the client stays connected.
  client.Send(std::string(64 * 1024, 'a'));  // may fail once the server has closed
  EXPECT_TRUE(WaitNoConnections(20s)) << server_->metrics().OpenConnections();
  EXPECT_EQ(engine_.accepted(), 0);
}

// A request without a valid key may use a public route, but not to make the server hold a
// large body (before: up to max_body_bytes, read and ignored).
TEST_F(ApiKeyTest, APublicRouteTakesAtMostTheUnauthenticatedBodyWithoutAKey) {
  StartServer(KeyOptions());
  const size_t bound = TestOptions().limits.max_unauthenticated_body_bytes;
  ASSERT_EQ(bound, 64u * 1024u);  // the documented default
  const std::string big(bound + 1, 'a');
  auto get_with_body = [&](const std::string& auth, const std::string& body) {
    return "GET /health HTTP/1.1\r\nHost: x\r\n" + auth +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  auto at = Roundtrip(get_with_body("", std::string(bound, 'a')));
  ASSERT_TRUE(at);
  EXPECT_EQ(at->status, 200) << at->body;
  // Content-Length over the bound: refused from the header, before the body is read.
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(big.size()) + "\r\n\r\n"));
  auto over = client.ReadResponse(5s);
  ASSERT_TRUE(over);
  const nlohmann::json e = ExpectErrorBody(*over, 413);
  EXPECT_EQ(e["code"], "body_too_large");
  EXPECT_NE(e["message"].get<std::string>().find("max_unauthenticated_body_bytes = 65536"),
            std::string::npos) << e["message"];
  EXPECT_TRUE(over->closed);
  // A chunked body is cut off at the same bound.
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", big.size());
  auto chunked = Roundtrip("GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                           std::string(size) + big + "\r\n0\r\n\r\n");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(ExpectErrorBody(*chunked, 413)["code"], "body_too_large");
  // With the key the ordinary body limit applies.
  auto keyed = Roundtrip(get_with_body("Authorization: Bearer s3cret-key\r\n", big));
  ASSERT_TRUE(keyed);
  EXPECT_EQ(keyed->status, 200) << keyed->body;
}

// Without keys configured nothing changes: every client is "authenticated".
TEST_F(ApiKeyTest, WithoutKeysConfiguredBodiesAreReadAsBefore) {
  StartServer(TestOptions());
  auto reply = Roundtrip("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 131072\r\n\r\n" +
                         std::string(128 * 1024, 'a'));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  auto completion = Roundtrip(PostRequest("/v1/completions", kCompletion));
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200);
}

}  // namespace
}  // namespace lifeline::api::testing

// Request framing over real sockets: Transfer-Encoding values that could make the server and
// a proxy in front of it disagree about where a request ends (request smuggling, RFC 9112
// 6.1 and 6.3), and absolute-form request targets (RFC 9112 3.2.2).
#include <string>
#include <utility>
#include <vector>

#include "server/errors.h"
#include "server/http_message.h"
#include "server/server_fixture.h"

namespace lifeline::server::testing {
namespace {

// A POST whose framing header is `te_lines` (each ending CRLF), followed on the same
// connection by a hidden second request: if the server takes the POST's body to be empty it
// answers the hidden GET as a request of its own.
std::string SmuggleAttempt(const std::string& te_lines) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         te_lines + "\r\n" + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
}

struct FramingCase {
  std::string te_lines;
  int status;
};

TEST_F(ServerTest, TransferEncodingOtherThanAFinalChunkedIsRefusedAndClosed) {
  const std::vector<FramingCase> cases = {
      {"Transfer-Encoding: identity\r\n", 400},
      {"Transfer-Encoding: xchunked\r\n", 400},
      {"Transfer-Encoding: gzip\r\n", 400},
      {"Transfer-Encoding: chunked, identity\r\n", 400},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", 400},
      {"Transfer-Encoding: chunked, chunked\r\n", 400},
      {"Transfer-Encoding: chunked;ext=1\r\n", 400},
      {"Transfer-Encoding: \r\n", 400},
      // An empty line beside a chunked one (found by the HTTP fuzzer: it was accepted).
      {"Transfer-Encoding: \r\nTransfer-Encoding: chunked\r\n", 400},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: \r\n", 400},
      {"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", 400},
      // A coding we do not decode in front of chunked: never read as if it were plain.
      {"Transfer-Encoding: gzip, chunked\r\n", 501},
  };
  for (const FramingCase& c : cases) {
    SCOPED_TRACE(c.te_lines);
    TestClient client(server_->port());
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(client.Send(SmuggleAttempt(c.te_lines)));
    auto reply = client.ReadResponse(2s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, c.status) << reply->body;
    // The status line carries the standard reason phrase (501 used to say "Unknown").
    const std::string status_line = "HTTP/1.1 " + std::to_string(c.status) + " " +
                                    std::string(StatusReason(c.status)) + "\r\n";
    EXPECT_EQ(client.raw().rfind(status_line, 0), 0u) << client.raw();
    EXPECT_TRUE(reply->closed) << "the connection must not be reused";
    // Nothing else comes back: the hidden GET is never answered.
    EXPECT_TRUE(client.WaitForClose(2s));
    EXPECT_EQ(client.raw().find("\"object\":\"list\""), std::string::npos) << client.raw();
  }
  EXPECT_EQ(engine_.accepted(), 0);
}

// Every status an error can map to is written with its standard reason phrase (499 labels a
// client that left, so it is never written).
TEST(StatusReasonTest, EveryErrorStatusHasItsReasonPhrase) {
  const std::vector<std::pair<ErrorKind, std::string>> expected = {
      {ErrorKind::kInvalidRequest, "Bad Request"},
      {ErrorKind::kUnauthorized, "Unauthorized"},
      {ErrorKind::kNotFound, "Not Found"},
      {ErrorKind::kMethodNotAllowed, "Method Not Allowed"},
      {ErrorKind::kRequestTimeout, "Request Timeout"},
      {ErrorKind::kPayloadTooLarge, "Content Too Large"},
      {ErrorKind::kUnsupportedMediaType, "Unsupported Media Type"},
      {ErrorKind::kHeadersTooLarge, "Request Header Fields Too Large"},
      {ErrorKind::kOverloaded, "Too Many Requests"},
      {ErrorKind::kInternal, "Internal Server Error"},
      {ErrorKind::kNotImplemented, "Not Implemented"},
      {ErrorKind::kUpstream, "Bad Gateway"},
      {ErrorKind::kUnavailable, "Service Unavailable"},
  };
  for (const auto& [kind, reason] : expected) {
    EXPECT_EQ(StatusReason(ClassOf(kind).http_status), reason) << ClassOf(kind).http_status;
  }
}

TEST_F(ServerTest, ChunkedAloneStillFramesTheBodyInAnyCase) {
  for (const std::string te : {"chunked", "Chunked", "  CHUNKED  ", "chunked,"}) {
    SCOPED_TRACE(te);
    const std::string body = R"({"prompt":"x"})";
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", body.size());
    TestClient client(server_->port());
    ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                            "Content-Type: application/json\r\nTransfer-Encoding: " +
                            te + "\r\n\r\n" + size + body + "\r\n0\r\n\r\n"));
    auto reply = client.ReadResponse(3s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << reply->body;
  }
}

TEST_F(ServerTest, AbsoluteFormTargetsAreServedLikeOriginForm) {
  const std::string host = "http://127.0.0.1:" + std::to_string(server_->port());
  auto models = Roundtrip("GET " + host + "/v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200) << models->body;
  EXPECT_EQ(models->Json()["object"], "list");
  auto health = Roundtrip("GET HTTP://example.com/health?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  const std::string body = R"({"prompt":"x"})";
  auto completion = Roundtrip("POST " + host + "/v1/completions HTTP/1.1\r\nHost: x\r\n"
                              "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200) << completion->body;
  auto unknown = Roundtrip("GET http://example.com/nope HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  ASSERT_TRUE(WaitIdle());
}

}  // namespace
}  // namespace lifeline::server::testing

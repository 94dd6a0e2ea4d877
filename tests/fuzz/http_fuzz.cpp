// libFuzzer harness for what the server does with a request's bytes before any engine: Beast's
// HTTP/1.1 parser under the server's header / body limits, then the framing rules
// (http_framing.h: Transfer-Encoding, smuggling), the absolute-form target, the route table,
// the API-key and X-Request-Id checks, CORS, Content-Type, and the generation / token
// endpoints' body validation (openai.h; embeddings / rerank: embeddings_api.h). Pipelined requests in one input are parsed one
// after another, as the connection does. A chunked body also goes through the framing meter
// (ChunkedBodyMeter) that the connection runs before the parser sees a byte. Built by
// -DLIFELINE_FUZZ=ON and, over its committed corpus, by the default test run
// (Fuzz.http.Corpus).
//
// Invariants (abort when violated): every refusal is an ApiError with a status in
// [400, 599] and a message; a request the framing rules accept and that parsed completely
// has a body no larger than the body limit; a chunked request is only accepted with
// Transfer-Encoding exactly "chunked"; an accepted HTTP/1.1 request has exactly one Host;
// the meter and the parser agree on where a chunked body ends: a body the parser finishes
// is one the meter finished at the same byte, and framing the meter calls malformed is
// never a finished body, so that no byte of a body reaches the parser uncounted (a body the
// meter ended that the parser still reads is refused by the connection, as here).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "fuzz/alloc_meter.h"
#include "fuzz/fuzz_check.h"
#include "api/embeddings_api.h"
#include "api/http_framing.h"
#include "api/openai.h"
#include "api/router.h"

namespace {

namespace http = boost::beast::http;
using namespace lifeline::api;

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kBodyLimit = 64 * 1024;
constexpr size_t kFramingLineLimit = 4 * 1024;
constexpr size_t kTrailerLimit = 8 * 1024;

using lifeline::fuzz::Check;

void CheckError(const std::optional<ApiError>& e) {
  if (!e) return;
  Check(e->http_status >= 400 && e->http_status <= 599, "an error status outside 4xx/5xx");
  Check(!e->message.empty(), "an error without a message");
}

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

// One parsed request through everything the session does before the engine.
void Serve(const http::request<http::string_body>& req, bool complete) {
  std::vector<std::string_view> te;
  for (const auto& f : req) {
    if (f.name() == http::field::transfer_encoding) te.push_back(View(f.value()));
  }
  const std::optional<ApiError> framing = CheckTransferEncoding(
      te, static_cast<int>(req.version()), req.find(http::field::content_length) != req.end());
  CheckError(framing);
  if (framing || !complete) return;
  Check(req.body().size() <= kBodyLimit, "a body over the limit was accepted");
  const std::string target = OriginFormTarget(View(req.target()));
  RouteMatch m = MatchRoute(View(req.method_string()), target);
  CheckError(m.error);
  if (auto it = req.find("x-request-id"); it != req.end()) {
    (void)ValidClientRequestId(View(it->value()));
  }
  std::vector<std::string_view> auth;
  for (const auto& f : req) {
    if (f.name() == http::field::authorization) auth.push_back(View(f.value()));
  }
  static const std::vector<std::string> kKeys = {"key-1", "key-2"};
  static const std::vector<std::string> kOrigins = {"https://app.example", "*"};
  CheckError(CheckApiKey(kKeys, auth));
  std::optional<std::string_view> origin;
  if (auto it = req.find(http::field::origin); it != req.end()) origin = View(it->value());
  (void)CorsHeaders(origin, kOrigins);
  if (m.error) return;
  std::optional<std::string_view> ct;
  if (auto it = req.find(http::field::content_type); it != req.end()) ct = View(it->value());
  CheckError(CheckContentType(ct));
  const RequestLimits limits;
  GenerationRequest out;
  switch (m.spec->route) {
    case Route::kCompletions:
      CheckError(ParseGenerationRequest(req.body(), Endpoint::kCompletions, limits, &out));
      break;
    case Route::kChatCompletions:
    case Route::kApplyTemplate:
      CheckError(ParseGenerationRequest(req.body(), Endpoint::kChatCompletions, limits, &out));
      break;
    case Route::kInfill:
      CheckError(ParseGenerationRequest(req.body(), Endpoint::kInfill, limits, &out));
      break;
    case Route::kEmbeddings:
    case Route::kRerank: {
      auto parsed = ParsePoolingRequest(
          m.spec->route == Route::kRerank ? ApiShape::kRerank : ApiShape::kEmbeddings,
          req.body(), limits);
      if (auto* err = std::get_if<ApiError>(&parsed)) CheckError(*err);
      break;
    }
    default: {
      nlohmann::json j;
      CheckError(ParseJsonObject(req.body(), limits, &j));
      break;
    }
  }
}

}  // namespace

// Puts rest[*used..] into the parser until it is done, stops (not eager: after the header),
// needs more than there is, or fails; the last real error in *ec.
void Parse(http::request_parser<http::string_body>& parser, std::string_view rest, size_t* used,
           boost::system::error_code* ec) {
  while (!parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(rest.data() + *used, rest.size() - *used), *ec);
    *used += n;
    if (*ec == http::error::need_more) {
      *ec = {};
      return;
    }
    if (*ec || n == 0 || (!parser.eager() && parser.is_header_done())) return;
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const lifeline::fuzz::GrowthScope growth(size, "http");
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int requests = 0; requests < 8 && !rest.empty(); ++requests) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(kHeaderLimit));
    parser.body_limit(kBodyLimit);
    boost::system::error_code ec;
    size_t used = 0;
    // The header alone first, so that the body's first byte is known, as the connection
    // reads it.
    Parse(parser, rest, &used, &ec);
    bool refused = false;
    if (parser.is_header_done() && !ec) {
      size_t hosts = 0;
      for (const auto& f : parser.get()) hosts += f.name() == http::field::host;
      const int version = static_cast<int>(parser.get().version());
      const std::optional<ApiError> host = CheckHost(hosts, version);
      CheckError(host);
      Check(host || hosts == 1 || version < 11, "an HTTP/1.1 request without one Host accepted");
      Check(host || hosts <= 1, "a request with two Hosts accepted");
      refused = host.has_value();
    }
    std::optional<ChunkedBodyMeter> meter;
    std::optional<ApiError> meter_error;
    size_t meter_used = 0;
    const size_t body_start = used;
    if (!refused && parser.is_header_done() && !ec && !parser.is_done() && parser.chunked()) {
      ChunkedLimits limits;
      limits.max_body_bytes = kBodyLimit;
      limits.max_framing_line_bytes = kFramingLineLimit;
      limits.max_trailer_bytes = kTrailerLimit;
      meter.emplace(limits);
      meter_error = meter->Feed(rest.substr(body_start), &meter_used);
      CheckError(meter_error);
    }
    if (!refused && parser.is_header_done() && !ec && !parser.is_done()) {
      parser.eager(true);
      Parse(parser, rest, &used, &ec);
    }
    if (used >= rest.size() && parser.is_header_done() && !parser.is_done() && !ec) {
      parser.put_eof(ec);
    }
    if (meter && (!meter_error || meter_error->code == "bad_http_request")) {
      if (parser.is_done()) {
        Check(!meter_error && meter->done() && used - body_start == meter_used,
              "the parser finished a chunked body the meter did not end at the same byte");
      }
    }
    // The connection stops at a refused Host, at a meter's refusal, and when the parser
    // still wants bytes of a body the meter saw end (http_session.cpp ParseBody): the parser
    // never gets the rest.
    refused = refused || meter_error.has_value() ||
              (meter && meter->done() && !parser.is_done() && !ec);
    if (parser.is_header_done()) Serve(parser.get(), parser.is_done() && !ec && !refused);
    if (!parser.is_done() || ec || refused) break;
    // A refused framing closes the connection: nothing after it is parsed.
    const auto& req = parser.get();
    std::vector<std::string_view> te;
    for (const auto& f : req) {
      if (f.name() == http::field::transfer_encoding) te.push_back(View(f.value()));
    }
    if (CheckTransferEncoding(te, static_cast<int>(req.version()),
                              req.find(http::field::content_length) != req.end())) {
      break;
    }
    if (!te.empty()) {
      // Accepted: every line non-empty, and all of them together exactly one chunked.
      std::string joined;
      for (std::string_view v : te) {
        Check(v.find_first_not_of(" \t") != std::string_view::npos,
              "an empty TE line was accepted");
        joined.append(joined.empty() ? "" : ",").append(v);
      }
      const auto codings = TransferCodings(joined);
      Check(codings.size() == 1 && codings[0] == "chunked", "a non-chunked TE was accepted");
    }
    rest.remove_prefix(used);
  }
  return 0;
}

// Request framing rules that do not need a socket (RFC 9112 6.1, 6.3, 3.2.2), shared by the
// connection code (http_session.cpp) and the HTTP fuzz harness:
//   - CheckTransferEncoding: a body is framed by Content-Length, or by a Transfer-Encoding
//     whose last coding is chunked (once). Anything else is refused before a body byte is
//     read, and the connection must then close: a Transfer-Encoding the server does not
//     take as framing while a proxy in front of it does (identity, xchunked, gzip, "chunked,
//     identity", chunked with Content-Length) is how a hidden second request is smuggled in.
//   - TransferCodings: the coding list, trimmed, lower-cased, empty elements skipped.
//   - CheckHost (RFC 9112 3.2): an HTTP/1.1 request carries exactly one Host field line, any
//     request at most one; HTTP/1.0 may omit it.
//   - ChunkedBodyMeter (RFC 9112 7.1): counts a chunked body's bytes as they arrive, before
//     the parser buffers them, so that no framing element (a chunk-size line with its
//     extensions, a trailer field line, the trailer section) can make the connection hold
//     more than its cap, and so that the framing counts against the body limit. Beast's
//     parser keeps a chunk-size line or the whole trailer section in the read buffer until
//     it ends, with no limit of its own.
// (Absolute-form targets: OriginFormTarget in router.h.)
//
// Ownership: none (pure functions; a meter owns its counters). Thread-safety: functions from
// any thread, a meter from one. Failure: an ApiError naming the header value or the limit
// (400 bad_transfer_encoding, 501 unsupported_transfer_coding, 400 bad_host, 400
// framing_too_large, 400 bad_http_request, 413 body_too_large).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/serving_api.h"

namespace lifeline::api {

std::vector<std::string> TransferCodings(std::string_view value);

// `te_values`: every Transfer-Encoding field value of the request, in order (empty: no such
// header); `http_version`: 10 or 11; `has_content_length`: a Content-Length field is present.
std::optional<ApiError> CheckTransferEncoding(const std::vector<std::string_view>& te_values,
                                              int http_version, bool has_content_length);

// `host_lines`: how many Host field lines the request has. 400 bad_host for none in
// HTTP/1.1 (`http_version` 11) and for more than one in any version.
std::optional<ApiError> CheckHost(size_t host_lines, int http_version);

struct ChunkedLimits {
  // Every byte of the chunked body, from the first chunk-size digit to the CRLF that ends the
  // trailer section: chunk data, size lines, extensions, CRLFs, trailers. Above: 413
  // body_too_large naming `body_limit_name`.
  uint64_t max_body_bytes = 0;
  std::string body_limit_name = "max_body_bytes";
  // One framing line, its CRLF included: a chunk-size line (size digits and extensions) or
  // one trailer field line. Above: 400 framing_too_large.
  size_t max_framing_line_bytes = 0;
  // The trailer section: every byte after the last chunk's size line. Above: 400
  // framing_too_large.
  size_t max_trailer_bytes = 0;
};

// Follows the chunked framing byte by byte (chunk data in bulk) without holding any of it.
// The grammar it checks is the part it needs to stay in step with the parser: a size line
// starts with a hex digit and fits 64 bits, every CR is followed by LF, chunk data is
// followed by CRLF, the trailer section ends at its first empty line. Whatever else the
// parser refuses (bad extension syntax, bad trailer fields) it refuses on its own.
class ChunkedBodyMeter {
 public:
  explicit ChunkedBodyMeter(ChunkedLimits limits) : limits_(std::move(limits)) {}

  // Counts the next bytes received after the request's header. Returns an error once a
  // limit is passed or the framing is malformed (and the same error on every later call);
  // `*body_bytes_used` (optional) gets how many of `bytes` belong to the body: all of them
  // until the body's last CRLF, then none (what follows is the next request).
  std::optional<ApiError> Feed(std::string_view bytes, size_t* body_bytes_used = nullptr);

  bool done() const { return state_ == State::kDone; }
  uint64_t body_bytes() const { return body_bytes_; }

 private:
  enum class State : uint8_t { kSize, kLine, kLineLf, kData, kDataCr, kDataLf, kDone, kFailed };
  std::optional<ApiError> Fail(ApiError error);

  ChunkedLimits limits_;
  State state_ = State::kSize;
  bool in_trailer_ = false;    // the current line is a trailer line (after the last chunk)
  bool size_digits_ = false;   // the current size line has a digit
  uint64_t chunk_bytes_ = 0;   // the size line's value; then the chunk data still to come
  size_t line_bytes_ = 0;      // bytes of the current framing line so far
  size_t trailer_bytes_ = 0;
  uint64_t body_bytes_ = 0;
  std::optional<ApiError> error_;
};

}  // namespace lifeline::api

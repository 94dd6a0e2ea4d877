// Request framing rules that do not need a socket (RFC 9112 6.1, 6.3, 3.2.2), shared by the
// connection code (http_session.cpp) and the HTTP fuzz harness:
//   - CheckTransferEncoding: a body is framed by Content-Length, or by a Transfer-Encoding
//     whose last coding is chunked (once). Anything else is refused before a body byte is
//     read, and the connection must then close: a Transfer-Encoding the server does not
//     take as framing while a proxy in front of it does (identity, xchunked, gzip, "chunked,
//     identity", chunked with Content-Length) is how a hidden second request is smuggled in.
//   - TransferCodings: the coding list, trimmed, lower-cased, empty elements skipped.
// (Absolute-form targets: OriginFormTarget in router.h.)
//
// Ownership: none (pure functions). Thread-safety: any thread. Failure: an ApiError (400
// bad_transfer_encoding, 501 unsupported_transfer_coding) naming the header value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/engine_api.h"

namespace lifeline::server {

std::vector<std::string> TransferCodings(std::string_view value);

// `te_values`: every Transfer-Encoding field value of the request, in order (empty: no such
// header); `http_version`: 10 or 11; `has_content_length`: a Content-Length field is present.
std::optional<ApiError> CheckTransferEncoding(const std::vector<std::string_view>& te_values,
                                              int http_version, bool has_content_length);

}  // namespace lifeline::server

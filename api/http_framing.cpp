#include "api/http_framing.h"

#include <algorithm>
#include <limits>

#include "api/errors.h"

namespace lifeline::api {

std::vector<std::string> TransferCodings(std::string_view value) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= value.size()) {
    size_t end = value.find(',', i);
    if (end == std::string_view::npos) end = value.size();
    std::string_view item = value.substr(i, end - i);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) {
      // A coding with parameters stays whole ("chunked;x=1"), so it is never taken for
      // chunked.
      std::string lower(item);
      for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
      out.push_back(std::move(lower));
    }
    i = end + 1;
  }
  return out;
}

std::optional<ApiError> CheckTransferEncoding(const std::vector<std::string_view>& te_values,
                                              int http_version, bool has_content_length) {
  if (te_values.empty()) return std::nullopt;
  std::string codings;
  for (std::string_view v : te_values) {
    if (!codings.empty()) codings += ",";
    codings += v;
  }
  // kInvalidRequest: the framing is wrong (400); kNotImplemented: a coding this server does
  // not decode (501).
  constexpr ErrorKind kBad = ErrorKind::kInvalidRequest;
  auto refuse = [](ErrorKind kind, std::string message) {
    return MakeError(kind,
                     kind == ErrorKind::kNotImplemented ? "unsupported_transfer_coding"
                                                        : "bad_transfer_encoding",
                     std::move(message));
  };
  const std::string shown = "Transfer-Encoding '" + codings.substr(0, 128) + "'";
  // An empty field line is refused wherever it stands: joined with a chunked line it would
  // vanish here (", chunked"), while an intermediary may read the empty line on its own.
  for (std::string_view v : te_values) {
    if (v.find_first_not_of(" \t") == std::string_view::npos) {
      return refuse(kBad, "an empty Transfer-Encoding field line");
    }
  }
  if (http_version < 11) return refuse(kBad, shown + " in an HTTP/1.0 request");
  if (has_content_length) return refuse(kBad, shown + " together with Content-Length");
  const std::vector<std::string> list = TransferCodings(codings);
  if (list.empty() || list.back() != "chunked") {
    return refuse(kBad, shown + " does not end in chunked: the body length cannot be "
                                "determined (RFC 9112 6.3)");
  }
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    if (list[i] == "chunked") return refuse(kBad, shown + " applies chunked twice");
  }
  if (list.size() > 1) {
    return refuse(ErrorKind::kNotImplemented, shown + ": only chunked is supported, the coding '" +
                                                  list.front().substr(0, 32) + "' is not");
  }
  return std::nullopt;
}

std::optional<ApiError> CheckHost(size_t host_lines, int http_version) {
  // RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host and to any
  // request with more than one Host line (two Hosts are how a request is routed one way by
  // a proxy and another way here).
  if (host_lines > 1) {
    return MakeError(ErrorKind::kInvalidRequest, "bad_host",
                     std::to_string(host_lines) +
                         " Host header lines: a request has at most one (RFC 9112 3.2)");
  }
  if (host_lines == 0 && http_version >= 11) {
    return MakeError(ErrorKind::kInvalidRequest, "bad_host",
                     "an HTTP/1.1 request without a Host header (RFC 9112 3.2)");
  }
  return std::nullopt;
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

ApiError Malformed(const char* what) {
  return MakeError(ErrorKind::kInvalidRequest, "bad_http_request",
                   std::string("malformed chunked body: ") + what);
}

}  // namespace

std::optional<ApiError> ChunkedBodyMeter::Fail(ApiError error) {
  state_ = State::kFailed;
  error_ = std::move(error);
  return error_;
}

std::optional<ApiError> ChunkedBodyMeter::Feed(std::string_view bytes, size_t* body_bytes_used) {
  size_t i = 0;
  // Whatever happens below, the caller learns how far the body reached.
  struct Report {
    size_t* out;
    const size_t& used;
    ~Report() {
      if (out != nullptr) *out = used;
    }
  } report{body_bytes_used, i};
  if (state_ == State::kFailed) return error_;
  // 413 names the body limit; 400 names the element's own cap: an element that long is not
  // content a client meant to send, so a smaller body would not help (see http_server.h).
  auto over_body = [&] {
    return MakeError(ErrorKind::kPayloadTooLarge, "body_too_large",
                     "request body exceeds " + limits_.body_limit_name + " = " +
                         std::to_string(limits_.max_body_bytes) +
                         " (a chunked body counts its size lines, extensions and trailers)");
  };
  auto over_line = [&] {
    return MakeError(ErrorKind::kInvalidRequest, "framing_too_large",
                     std::string(in_trailer_ ? "a trailer field line"
                                             : "a chunk-size line (size and extensions)") +
                         " exceeds max_framing_line_bytes = " +
                         std::to_string(limits_.max_framing_line_bytes));
  };
  while (i < bytes.size() && state_ != State::kDone) {
    if (state_ == State::kData) {
      const uint64_t take = std::min<uint64_t>(chunk_bytes_, bytes.size() - i);
      body_bytes_ += take;
      i += static_cast<size_t>(take);
      chunk_bytes_ -= take;
      if (body_bytes_ > limits_.max_body_bytes) return Fail(over_body());
      if (chunk_bytes_ == 0) state_ = State::kDataCr;
      continue;
    }
    const char c = bytes[i++];
    ++body_bytes_;
    if (state_ == State::kDataCr || state_ == State::kDataLf) {
      if (c != (state_ == State::kDataCr ? '\r' : '\n')) {
        return Fail(Malformed("chunk data is not followed by CRLF"));
      }
      if (body_bytes_ > limits_.max_body_bytes) return Fail(over_body());
      if (state_ == State::kDataLf) {
        state_ = State::kSize;
        size_digits_ = false;
        chunk_bytes_ = 0;
        line_bytes_ = 0;
      } else {
        state_ = State::kDataLf;
      }
      continue;
    }
    // A framing line: a size line (kSize, then kLine for its extensions) or a trailer line.
    ++line_bytes_;
    if (in_trailer_ && ++trailer_bytes_ > limits_.max_trailer_bytes) {
      return Fail(MakeError(ErrorKind::kInvalidRequest, "framing_too_large",
                            "the trailer section exceeds max_trailer_bytes = " +
                                std::to_string(limits_.max_trailer_bytes)));
    }
    if (line_bytes_ > limits_.max_framing_line_bytes) return Fail(over_line());
    if (body_bytes_ > limits_.max_body_bytes) return Fail(over_body());
    if (state_ == State::kSize) {
      const int digit = HexValue(c);
      if (digit >= 0) {
        if (chunk_bytes_ > (std::numeric_limits<uint64_t>::max() >> 4)) {
          return Fail(Malformed("the chunk size does not fit 64 bits"));
        }
        chunk_bytes_ = chunk_bytes_ * 16 + static_cast<uint64_t>(digit);
        size_digits_ = true;
        continue;
      }
      if (!size_digits_) return Fail(Malformed("a chunk-size line does not start with a hex digit"));
      // The size is known: data that cannot fit the body limit is refused before it comes.
      if (chunk_bytes_ > limits_.max_body_bytes - body_bytes_) return Fail(over_body());
      state_ = State::kLine;
    }
    if (state_ == State::kLine) {
      if (c == '\r') state_ = State::kLineLf;
      continue;
    }
    // kLineLf: the line ends here.
    if (c != '\n') return Fail(Malformed("a CR is not followed by LF"));
    const bool empty_line = line_bytes_ == 2;
    line_bytes_ = 0;
    if (in_trailer_) {
      state_ = empty_line ? State::kDone : State::kLine;
    } else if (chunk_bytes_ > 0) {
      state_ = State::kData;
    } else {
      in_trailer_ = true;  // the last chunk: trailer lines follow, then an empty line
      state_ = State::kLine;
    }
  }
  return std::nullopt;
}

}  // namespace lifeline::api

// http:// URLs of OpenAI-compatible servers (`--remote NAME=URL#MODEL`, `bench --target`):
// http://HOST[:PORT][/PREFIX]. https is refused (no TLS library: put a TLS-terminating proxy
// in front); so are user info, a query or fragment, and spaces or non-ASCII in the path.
//
// Thread-safety: pure functions. Failure: InvalidArgument whose message starts with the field
// or flag given ("url: 'http://h:0' has a port outside [1, 65535]").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lifeline::net {

struct HttpUrl {
  std::string host;       // name or address (IPv6 without brackets)
  uint16_t port = 80;
  std::string base_path;  // "" or "/v1" (no trailing slash)

  std::string PortText() const { return std::to_string(port); }
  // "host:port", IPv6 in brackets: the Host header, and a label.
  std::string Authority() const;
  std::string ToString() const { return "http://" + Authority() + base_path; }
};

Result<HttpUrl> ParseHttpUrl(std::string_view text, std::string_view field);

}  // namespace lifeline::net

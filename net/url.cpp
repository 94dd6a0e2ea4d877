#include "net/url.h"

#include <charconv>

#include "base/excerpt.h"

namespace lifeline::net {

std::string HttpUrl::Authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + PortText();
}

Result<HttpUrl> ParseHttpUrl(std::string_view url, std::string_view field) {
  const std::string f(field);
  auto bad = [&](const std::string& why) {
    return InvalidArgument(f + ": '" + Excerpt(url, 200) + "' " + why);
  };
  if (url.starts_with("https://")) {
    return bad("- https:// is not supported (no TLS library); use http://, e.g. through a "
               "local TLS-terminating proxy");
  }
  if (!url.starts_with("http://")) return bad("must start with http:// (http://HOST[:PORT][/PATH])");
  std::string_view rest = url.substr(7);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return bad("must not carry user info");
  if (path.find_first_of("?#") != std::string_view::npos) {
    return bad("must not carry a query or fragment");
  }
  HttpUrl out;
  std::string_view port_text;
  if (authority.starts_with('[')) {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("has an unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("has junk after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("has an empty port");
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("has an empty port");
    }
  }
  if (out.host.empty()) return bad("has no host");
  for (char c : out.host) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == '/' || c == '\\' || c == ',') {
      return bad("has a bad host");
    }
  }
  if (!port_text.empty()) {
    uint32_t port = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return bad("has a port outside [1, 65535]");
    }
    out.port = static_cast<uint16_t>(port);
  }
  while (path.ends_with('/')) path.remove_suffix(1);
  for (char c : path) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return bad("has a space or non-ASCII byte in the path");
    }
  }
  out.base_path = std::string(path);
  return out;
}

}  // namespace lifeline::net

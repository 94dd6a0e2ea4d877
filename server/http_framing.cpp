#include "server/http_framing.h"

#include "server/errors.h"

namespace lifeline::server {

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

}  // namespace lifeline::server

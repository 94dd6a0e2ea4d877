// GbnfLiteral: text as a GBNF string literal, quotes included ("\"" -> "\\\"", newline ->
// "\\n", other control bytes and DEL -> "\\xHH"; other bytes, UTF-8 included, as they are).
// The one escaper of the two grammar writers, text/grammar (JSON Schema -> GBNF) and
// text/toolcall (forced tool-call grammars), which do not depend on each other; two copies
// had drifted apart (one left DEL raw).
//
// Thread-safety: pure. Failure: none.
#pragma once

#include <string>
#include <string_view>

namespace lifeline {

std::string GbnfLiteral(std::string_view text);

}  // namespace lifeline

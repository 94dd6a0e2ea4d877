#include "text/toolcall/json_scanner.h"

namespace lifeline::toolcall {
namespace {

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

JsonScanner::State JsonScanner::Open(char bracket) {
  if (stack_.size() >= max_depth_) return Fail();
  stack_.push_back(bracket);
  mode_ = bracket == '{' ? Mode::kObjectKeyOrEnd : Mode::kArrayValueOrEnd;
  return state_;
}

JsonScanner::State JsonScanner::Close(char bracket) {
  if (stack_.empty() || stack_.back() != bracket) return Fail();
  stack_.pop_back();
  if (stack_.empty()) return state_ = State::kDone;
  mode_ = Mode::kAfterValue;
  return state_;
}

JsonScanner::State JsonScanner::StartValue(char c) {
  switch (c) {
    case '{': return Open('{');
    case '[': return Open('[');
    case '"':
      string_is_key_ = false;
      mode_ = Mode::kString;
      return state_;
    case '-': mode_ = Mode::kNumMinus; return state_;
    case '0': mode_ = Mode::kNumZero; return state_;
    case 't': literal_ = "true"; break;
    case 'f': literal_ = "false"; break;
    case 'n': literal_ = "null"; break;
    default:
      if (IsDigit(c)) {
        mode_ = Mode::kNumInt;
        return state_;
      }
      return Fail();
  }
  literal_pos_ = 1;
  mode_ = Mode::kLiteral;
  return state_;
}

JsonScanner::State JsonScanner::AfterValue(char c) {
  if (IsWs(c)) return state_;
  const bool in_object = stack_.back() == '{';
  if (c == ',') {
    mode_ = in_object ? Mode::kObjectKey : Mode::kValue;
    return state_;
  }
  if (c == '}' || c == ']') return Close(c == '}' ? '{' : '[');
  return Fail();
}

// The byte after a number's last digit belongs to what follows the number.
JsonScanner::State JsonScanner::EndNumber(char c) {
  mode_ = Mode::kAfterValue;
  return AfterValue(c);
}

JsonScanner::State JsonScanner::Feed(char c) {
  if (state_ != State::kRunning) return state_ = State::kError;
  switch (mode_) {
    case Mode::kStart:
      if (c == '{' || (allow_array_ && c == '[')) return Open(c);
      return Fail();
    case Mode::kValue:
      if (IsWs(c)) return state_;
      return StartValue(c);
    case Mode::kArrayValueOrEnd:
      if (IsWs(c)) return state_;
      if (c == ']') return Close('[');
      return StartValue(c);
    case Mode::kObjectKeyOrEnd:
      if (IsWs(c)) return state_;
      if (c == '}') return Close('{');
      [[fallthrough]];
    case Mode::kObjectKey:
      if (IsWs(c)) return state_;
      if (c != '"') return Fail();
      string_is_key_ = true;
      mode_ = Mode::kString;
      return state_;
    case Mode::kColon:
      if (IsWs(c)) return state_;
      if (c != ':') return Fail();
      mode_ = Mode::kValue;
      return state_;
    case Mode::kAfterValue:
      return AfterValue(c);
    case Mode::kString:
      if (c == '"') {
        mode_ = string_is_key_ ? Mode::kColon : Mode::kAfterValue;
      } else if (c == '\\') {
        mode_ = Mode::kEscape;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return Fail();
      }
      return state_;
    case Mode::kEscape:
      if (c == 'u') {
        unicode_left_ = 4;
        mode_ = Mode::kUnicode;
        return state_;
      }
      switch (c) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          mode_ = Mode::kString;
          return state_;
        default:
          return Fail();
      }
    case Mode::kUnicode:
      if (!IsHex(c)) return Fail();
      if (--unicode_left_ == 0) mode_ = Mode::kString;
      return state_;
    case Mode::kNumMinus:
      if (c == '0') mode_ = Mode::kNumZero;
      else if (IsDigit(c)) mode_ = Mode::kNumInt;
      else return Fail();
      return state_;
    case Mode::kNumZero:
      if (c == '.') mode_ = Mode::kNumDot;
      else if (c == 'e' || c == 'E') mode_ = Mode::kNumE;
      else return EndNumber(c);
      return state_;
    case Mode::kNumInt:
      if (IsDigit(c)) return state_;
      if (c == '.') mode_ = Mode::kNumDot;
      else if (c == 'e' || c == 'E') mode_ = Mode::kNumE;
      else return EndNumber(c);
      return state_;
    case Mode::kNumDot:
      if (!IsDigit(c)) return Fail();
      mode_ = Mode::kNumFrac;
      return state_;
    case Mode::kNumFrac:
      if (IsDigit(c)) return state_;
      if (c == 'e' || c == 'E') {
        mode_ = Mode::kNumE;
        return state_;
      }
      return EndNumber(c);
    case Mode::kNumE:
      if (c == '+' || c == '-') mode_ = Mode::kNumExpSign;
      else if (IsDigit(c)) mode_ = Mode::kNumExp;
      else return Fail();
      return state_;
    case Mode::kNumExpSign:
      if (!IsDigit(c)) return Fail();
      mode_ = Mode::kNumExp;
      return state_;
    case Mode::kNumExp:
      if (IsDigit(c)) return state_;
      return EndNumber(c);
    case Mode::kLiteral:
      if (c != literal_[literal_pos_]) return Fail();
      if (literal_[++literal_pos_] == '\0') mode_ = Mode::kAfterValue;
      return state_;
  }
  return Fail();
}

}  // namespace lifeline::toolcall

#include "net/sse.h"

#include "base/excerpt.h"

namespace lifeline::net {

bool SseParser::Feed(std::string_view bytes, std::vector<SseEvent>* out) {
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the LF of a CRLF pair: the line already ended at CR
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      OnLine(line_, out);
      line_.clear();
      continue;
    }
    if (line_.size() >= max_line_bytes_) return false;
    line_ += c;
  }
  return true;
}

void SseParser::Finish(std::vector<SseEvent>* out) {
  if (!line_.empty()) OnLine(line_, out);
  line_.clear();
  OnLine("", out);
}

void SseParser::OnLine(std::string_view line, std::vector<SseEvent>* out) {
  if (line.empty()) {  // blank line: dispatch
    if (has_data_) out->push_back(std::move(event_));
    event_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (heartbeat)
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{}
                                                           : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) event_.data += '\n';
    event_.data += value;
    has_data_ = true;
  } else if (field == "event") {
    event_.event = std::string(value);
  }
  // id / retry / unknown fields carry nothing the benchmark needs.
}

std::string ErrorBodyMessage(std::string_view body) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    auto err = doc.find("error");
    if (err != doc.end()) {
      if (err->is_string()) return Excerpt(err->get<std::string>(), 500);
      if (err->is_object()) {
        auto m = err->find("message");
        if (m != err->end() && m->is_string()) return Excerpt(m->get<std::string>(), 500);
      }
    }
    auto m = doc.find("message");
    if (m != doc.end() && m->is_string()) return Excerpt(m->get<std::string>(), 500);
  }
  return body.empty() ? std::string("(empty body)") : "body: " + Excerpt(body, 200);
}

StreamChunk ParseStreamChunk(std::string_view data) {
  using json = nlohmann::json;
  StreamChunk info;
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) {
    trimmed.remove_suffix(1);
  }
  if (trimmed == "[DONE]") {
    info.done = true;
    return info;
  }
  const json j = json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    info.malformed = "not a JSON object: '" + Excerpt(trimmed, 120) + "'";
    return info;
  }
  if (auto m = j.find("model"); m != j.end() && m->is_string()) info.model = m->get<std::string>();
  if (auto err = j.find("error"); err != j.end() && !err->is_null()) {
    info.error = ErrorBodyMessage(trimmed);
    return info;
  }
  if (auto choices = j.find("choices"); choices != j.end() && !choices->is_null()) {
    if (!choices->is_array()) {
      info.malformed = "'choices' is not an array";
      return info;
    }
    if (!choices->empty()) {
      const json& c = choices->front();
      if (!c.is_object()) {
        info.malformed = "choices[0] is not an object";
        return info;
      }
      const json* text = nullptr;
      const char* where = "choices[0].text";
      if (auto t = c.find("text"); t != c.end()) {
        text = &*t;
      } else if (auto delta = c.find("delta"); delta != c.end() && delta->is_object()) {
        if (auto content = delta->find("content"); content != delta->end()) {
          text = &*content;
          where = "choices[0].delta.content";
        }
        for (const char* key : {"reasoning_content", "reasoning"}) {
          auto r = delta->find(key);
          if (r == delta->end() || r->is_null()) continue;
          if (!r->is_string()) {
            info.malformed = std::string("choices[0].delta.") + key + " is not a string";
            return info;
          }
          info.reasoning = r->get<std::string>();
          break;
        }
        if (auto calls = delta->find("tool_calls"); calls != delta->end()) {
          info.tool_calls = calls->is_array() && !calls->empty();
        }
      }
      if (text != nullptr && !text->is_null()) {
        if (!text->is_string()) {
          info.malformed = std::string(where) + " is not a string";
          return info;
        }
        info.text = text->get<std::string>();
      }
      if (auto fr = c.find("finish_reason"); fr != c.end() && fr->is_string()) {
        info.finish_reason = fr->get<std::string>();
      }
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    auto p = u->find("prompt_tokens");
    auto g = u->find("completion_tokens");
    if (p != u->end() && p->is_number_integer() && g != u->end() && g->is_number_integer() &&
        p->get<int64_t>() >= 0 && g->get<int64_t>() >= 0) {
      info.prompt_tokens = p->get<int64_t>();
      info.completion_tokens = g->get<int64_t>();
    }
  }
  if (auto t = j.find("timings"); t != j.end() && t->is_object()) info.timings = *t;
  return info;
}

}  // namespace lifeline::net

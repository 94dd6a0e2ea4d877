// A sandboxed Jinja2 interpreter for chat templates: the subset of the language that real
// Hugging Face chat templates use, evaluated the way transformers' apply_chat_template
// configures jinja2 (ImmutableSandboxedEnvironment, trim_blocks=True, lstrip_blocks=True,
// the loopcontrols extension, `tojson` as json.dumps(ensure_ascii=False), the globals
// raise_exception(msg) and strftime_now(fmt), a no-op {% generation %} block).
//
// Values follow Python's semantics where the rendered text can show them: `{{ none }}` prints
// "None", `{{ [1, 'a'] }}` prints "[1, 'a']", floats print as Python's repr, an undefined name
// prints "", dicts keep insertion order, string methods (strip, split, startswith, ...) act on
// Unicode code points as str's do.
//
// Sandbox: a template reaches only the globals it is given and the built-in filters, tests and
// methods; there is no attribute walk to host objects (attributes starting with "_" reach
// nothing but a dict's own keys, as in jinja2's sandbox), no file or environment access. Every
// render runs under RenderLimits: output bytes, bytes of strings built, evaluation steps (each
// statement, expression node and loop iteration), macro depth and CPU time; a render that
// hits one fails with ResourceExhausted naming the limit and the template line.
//
// Errors: Parse returns InvalidArgument "template line L: ..." for syntax errors. Render
// returns InvalidArgument "template line L: ..." for evaluation errors (unknown filter, wrong
// types, undefined attribute of an undefined value), and for raise_exception(msg) a Status
// whose message is "template raised: msg" (IsTemplateRaise tells it apart).
//
// Ownership: a Template owns its parsed program (immutable, shared by copies).
// Thread-safety: Render is const and may run concurrently from any number of threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::jinja {

struct ParseOptions {
  bool trim_blocks = true;    // drop the first newline after a block tag (Hugging Face: on)
  bool lstrip_blocks = true;  // strip spaces/tabs before a block tag on its line (HF: on)
};

struct RenderLimits {
  uint64_t max_output_bytes = 4u << 20;  // rendered text (and any one string value)
  uint64_t max_built_bytes = 64u << 20;  // all strings built during the render, together
  uint64_t max_steps = 2'000'000;        // statements + expression nodes evaluated
  int32_t max_depth = 64;                // nested macro calls / filter blocks / deep values
  double max_time_ms = 50.0;             // CPU time of the rendering thread for one render
};

// Where strftime_now reads the time; defaults to the system clock. Tests inject a fixed one.
using Clock = std::function<std::chrono::system_clock::time_point()>;

struct ProgramNode;  // the parsed template (private to the interpreter)

class Template {
 public:
  static Result<Template> Parse(std::string_view source, const ParseOptions& options = {});

  // `globals` must be a JSON object (ordered: dict order is visible through tojson and
  // iteration, as in Python); its members become the template's global names
  // (e.g. messages, add_generation_prompt, bos_token, eos_token, tools, documents).
  // strftime_now formats `clock()` (system clock when empty) in UTC.
  Result<std::string> Render(const nlohmann::ordered_json& globals, const RenderLimits& limits = {},
                             const Clock& clock = {}) const;

  const std::string& source() const;

 private:
  std::shared_ptr<const ProgramNode> program_;
  std::shared_ptr<const std::string> source_;
};

// True when `s` is the failure of a template's own raise_exception call.
bool IsTemplateRaise(const Status& s);

}  // namespace lifeline::jinja

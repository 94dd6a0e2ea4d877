// The evaluator's interface to the built-in filters, tests and methods (private to
// text/template; jinja_eval.cpp implements Interp, jinja_filters.cpp, jinja_methods.cpp and
// jinja_builtins.cpp the built-ins).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "text/template/jinja_ast.h"

namespace lifeline::jinja {

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

Status RuntimeError(int line, const std::string& what);
double ThreadCpuMs();

class Interp {
 public:
  Interp(const ProgramNode& program, const nlohmann::ordered_json& globals,
         const RenderLimits& limits, const Clock& clock);

  Result<std::string> Run();

  // Budgets, charged by the evaluator and by built-ins that loop or build strings.
  Status Step(int line, uint64_t n = 1);
  // A string of `bytes` is about to be built: over max_output_bytes alone, or over
  // max_built_bytes with everything built before, fails naming the limit.
  Status Built(uint64_t bytes, int line);

  // Calls a macro (or a builtin global given by value) with evaluated arguments.
  Result<Value> Call(const Value& callee, Args args, Kwargs kwargs, int line);

  std::chrono::system_clock::time_point Now() const;

 private:
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    Value* Find(std::string_view name);
    void Set(const std::string& name, Value v);
  };

  Result<Flow> Exec(const Body& body, std::string* out);
  Result<Flow> ExecStmt(const Stmt& s, std::string* out);
  Status ExecFor(const Stmt& s, std::string* out);
  Result<Value> Eval(const Expr& e);      // recursion-counted wrapper of EvalNode
  Result<Value> EvalNode(const Expr& e);
  Result<Value> EvalCall(const Expr& e);
  Status EvalArgs(const Expr& e, Args* args, Kwargs* kwargs);  // call/filter arguments
  Result<bool> Compare(const std::string& op, const Value& a, const Value& b, int line);
  Result<Value> EvalBinary(const std::string& op, const Value& a, const Value& b, int line);
  Result<Value> GetAttr(const Value& obj, const std::string& name, int line);
  Result<Value> GetItem(const Value& obj, const Value& key, int line);
  Result<Value> Slice(const Value& obj, const Expr& e);
  Result<Value> CallBuiltin(const std::string& name, Args args, Kwargs kwargs, int line);
  Result<Value> ApplyFilterChain(const std::vector<ExprPtr>& filters, Value v);
  Value Lookup(const std::string& name);
  void Assign(const std::string& name, Value v);
  Status Append(std::string* out, std::string_view s, int line);

  const ProgramNode& program_;
  Value globals_;
  RenderLimits limits_;
  const Clock& clock_;
  std::vector<Frame> frames_;
  size_t frame_base_ = 0;  // first frame visible to the running macro (0: template level)
  uint64_t steps_ = 0;
  uint64_t built_bytes_ = 0;
  int32_t depth_ = 0;
  // C++ recursion of Eval/Exec together: macros (max_depth) times statement and expression
  // nesting could otherwise exceed a thread's stack; ~1 KiB of stack per level at most.
  static constexpr int32_t kMaxRecursion = 3000;
  int32_t recursion_ = 0;
  const Body* caller_body_ = nullptr;  // {% call %} body while its macro runs
  size_t caller_base_ = 0;       // frames_.size() at the {% call %}
  size_t caller_site_base_ = 0;  // frame_base_ at the {% call %}
  double deadline_cpu_ms_ = 0;  // ThreadCpuMs() at which the render stops
};

Result<Value> ApplyFilter(Interp& in, const std::string& name, const Value& subject,
                          const Args& args, const Kwargs& kwargs, int line);
Result<bool> ApplyTest(Interp& in, const std::string& name, const Value& subject,
                       const Args& args, int line);
// obj.name(args): str, dict and list methods. Fails naming the method when there is none.
Result<Value> CallMethod(Interp& in, const Value& obj, const std::string& name,
                         const Args& args, const Kwargs& kwargs, int line);
// Whether obj.name is a method (attribute lookup prefers methods over dict keys, as jinja2's
// getattr does).
bool IsMethod(const Value& obj, const std::string& name);
// Iteration as Python's iter(): list items, dict keys, string code points; undefined and
// none... undefined iterates as empty, others fail.
Result<List> Iterate(const Value& v, int line);

}  // namespace lifeline::jinja

// The evaluator: statements write into the output string, expressions yield Values, every
// node is charged to the step budget, every string built to the byte budgets.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "text/template/jinja_interp.h"

namespace lifeline::jinja {

namespace {
constexpr const char* kRaisePrefix = "template raised: ";
constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox refuses larger range() too
}  // namespace

// CPU time of the calling thread: a render's time budget is the CPU it burns, so a busy
// machine that preempts the rendering thread does not fail an honest template.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

Status RuntimeError(int line, const std::string& what) {
  return InvalidArgument("template line " + std::to_string(line) + ": " + what);
}

bool IsTemplateRaise(const Status& s) {
  return !s.ok() && s.message().rfind(kRaisePrefix, 0) == 0;
}

Value* Interp::Frame::Find(std::string_view name) {
  for (auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Interp::Frame::Set(const std::string& name, Value v) {
  if (Value* p = Find(name)) {
    *p = std::move(v);
  } else {
    vars.emplace_back(name, std::move(v));
  }
}

Interp::Interp(const ProgramNode& program, const nlohmann::ordered_json& globals,
               const RenderLimits& limits, const Clock& clock)
    : program_(program), globals_(Value::FromJson(globals)), limits_(limits), clock_(clock) {}

std::chrono::system_clock::time_point Interp::Now() const {
  return clock_ ? clock_() : std::chrono::system_clock::now();
}

Status Interp::Step(int line, uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    return ResourceExhausted("template line " + std::to_string(line) +
                             ": evaluation exceeded max_steps (" +
                             std::to_string(limits_.max_steps) + ")");
  }
  if ((steps_ & 1023) < n || n > 1023) {
    if (ThreadCpuMs() > deadline_cpu_ms_) {
      char ms[32];
      std::snprintf(ms, sizeof(ms), "%g", limits_.max_time_ms);
      return ResourceExhausted("template line " + std::to_string(line) +
                               ": evaluation exceeded max_time_ms (" + ms + " ms of CPU)");
    }
  }
  return Status::Ok();
}

Status Interp::Built(uint64_t bytes, int line) {
  if (bytes > limits_.max_output_bytes) {
    return ResourceExhausted("template line " + std::to_string(line) + ": a string of " +
                             std::to_string(bytes) + " bytes exceeds max_output_bytes (" +
                             std::to_string(limits_.max_output_bytes) + ")");
  }
  built_bytes_ += bytes;
  if (built_bytes_ > limits_.max_built_bytes) {
    return ResourceExhausted("template line " + std::to_string(line) +
                             ": strings built exceed max_built_bytes (" +
                             std::to_string(limits_.max_built_bytes) + ")");
  }
  return Status::Ok();
}

Status Interp::Append(std::string* out, std::string_view s, int line) {
  if (out->size() + s.size() > limits_.max_output_bytes) {
    return ResourceExhausted("template line " + std::to_string(line) +
                             ": rendered text exceeds max_output_bytes (" +
                             std::to_string(limits_.max_output_bytes) + ")");
  }
  out->append(s);
  return Status::Ok();
}

Result<std::string> Interp::Run() {
  if (!globals_.is_dict()) return InvalidArgument("template globals must be a JSON object");
  deadline_cpu_ms_ = ThreadCpuMs() + limits_.max_time_ms;
  frames_.clear();
  frames_.emplace_back();
  std::string out;
  auto flow = Exec(program_.body, &out);
  // Namespaces may hold themselves through lists; drop their contents so no cycle outlives
  // the render.
  for (auto& f : frames_) {
    for (auto& [k, v] : f.vars) {
      if (v.is_dict() && v.dict().is_namespace) v.mutable_dict().items.clear();
    }
  }
  frames_.clear();
  if (!flow.ok()) return flow.status();
  return out;
}

Value Interp::Lookup(const std::string& name) {
  for (size_t i = frames_.size(); i-- > frame_base_;) {
    if (Value* v = frames_[i].Find(name)) return *v;
  }
  if (frame_base_ > 0) {
    if (Value* v = frames_[0].Find(name)) return *v;
  }
  if (const Value* g = globals_.dict().Find(name)) return *g;
  static const char* kBuiltins[] = {"range", "namespace", "raise_exception", "strftime_now",
                                    "dict", "joiner", "cycler"};
  for (const char* b : kBuiltins) {
    if (name == b) {
      auto c = std::make_shared<Callable>();
      c->builtin = b;
      return Value(std::move(c));
    }
  }
  if (name == "caller" && caller_body_ != nullptr) {
    auto c = std::make_shared<Callable>();
    c->builtin = "caller";
    return Value(std::move(c));
  }
  return Value::MakeUndefined(name);
}

void Interp::Assign(const std::string& name, Value v) { frames_.back().Set(name, std::move(v)); }

Result<Interp::Flow> Interp::Exec(const Body& body, std::string* out) {
  if (++recursion_ > kMaxRecursion) {
    --recursion_;
    return ResourceExhausted("template line " + std::to_string(body.empty() ? 0 : body[0]->line) +
                             ": evaluation nested deeper than " + std::to_string(kMaxRecursion));
  }
  Flow flow = Flow::kNormal;
  Status st = Status::Ok();
  for (const StmtPtr& s : body) {
    auto f = ExecStmt(*s, out);
    if (!f.ok()) {
      st = f.status();
      break;
    }
    if (*f != Flow::kNormal) {
      flow = *f;
      break;
    }
  }
  --recursion_;
  LL_RETURN_IF_ERROR(st);
  return flow;
}

Status Interp::EvalArgs(const Expr& e, Args* args, Kwargs* kwargs) {
  for (const ExprPtr& a : e.args) {
    LL_ASSIGN_OR_RETURN(Value x, Eval(*a));
    args->push_back(std::move(x));
  }
  for (const auto& [k, a] : e.kwargs) {
    LL_ASSIGN_OR_RETURN(Value x, Eval(*a));
    kwargs->emplace_back(k, std::move(x));
  }
  return Status::Ok();
}

Result<Value> Interp::ApplyFilterChain(const std::vector<ExprPtr>& filters, Value v) {
  for (const ExprPtr& f : filters) {
    Args args;
    Kwargs kwargs;
    LL_RETURN_IF_ERROR(EvalArgs(*f, &args, &kwargs));
    LL_ASSIGN_OR_RETURN(v, ApplyFilter(*this, f->name, v, args, kwargs, f->line));
  }
  return v;
}

Result<Interp::Flow> Interp::ExecStmt(const Stmt& s, std::string* out) {
  LL_RETURN_IF_ERROR(Step(s.line));
  switch (s.kind) {
    case StmtKind::kText:
      LL_RETURN_IF_ERROR(Append(out, s.text, s.line));
      return Flow::kNormal;
    case StmtKind::kOutput: {
      LL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      if (v.is_string()) {
        LL_RETURN_IF_ERROR(Append(out, v.str(), s.line));
      } else {
        const std::string text = ToStr(v);
        LL_RETURN_IF_ERROR(Append(out, text, s.line));
      }
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        bool take = true;
        if (cond) {
          LL_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          take = c.Truthy();
        }
        if (take) return Exec(body, out);
      }
      return Flow::kNormal;
    case StmtKind::kFor:
      LL_RETURN_IF_ERROR(ExecFor(s, out));
      return Flow::kNormal;
    case StmtKind::kSet: {
      LL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      if (!s.attr.empty()) {
        Value target = Lookup(s.targets[0]);
        if (!target.is_dict() || !target.dict().is_namespace) {
          return RuntimeError(s.line, "cannot assign attribute on non-namespace object '" +
                                          s.targets[0] + "'");
        }
        target.mutable_dict().Set(s.attr, std::move(v));
        return Flow::kNormal;
      }
      if (s.targets.size() == 1) {
        Assign(s.targets[0], std::move(v));
        return Flow::kNormal;
      }
      LL_ASSIGN_OR_RETURN(List items, Iterate(v, s.line));
      if (items.size() != s.targets.size()) {
        return RuntimeError(s.line, "cannot unpack " + std::to_string(items.size()) +
                                        " values into " + std::to_string(s.targets.size()));
      }
      for (size_t i = 0; i < items.size(); ++i) Assign(s.targets[i], std::move(items[i]));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      std::string captured;
      LL_RETURN_IF_ERROR(Exec(s.body, &captured).status());
      LL_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(s.filters, Value(std::move(captured))));
      Assign(s.targets[0], std::move(v));
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      auto c = std::make_shared<Callable>();
      c->macro = s.macro.get();
      Assign(s.macro->name, Value(std::move(c)));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      if (++depth_ > limits_.max_depth) {
        --depth_;
        return ResourceExhausted("template line " + std::to_string(s.line) +
                                 ": nesting exceeded max_depth (" +
                                 std::to_string(limits_.max_depth) + ")");
      }
      std::string captured;
      auto st = Exec(s.body, &captured);
      --depth_;
      LL_RETURN_IF_ERROR(st.status());
      LL_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(s.filters, Value(std::move(captured))));
      const std::string text = ToStr(v);
      LL_RETURN_IF_ERROR(Append(out, text, s.line));
      return Flow::kNormal;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kBlock: return Exec(s.body, out);
    case StmtKind::kCallBlock: {
      const Body* saved = caller_body_;
      const size_t saved_top = caller_base_, saved_site = caller_site_base_;
      caller_body_ = &s.body;
      caller_base_ = frames_.size();       // frames [caller_site_base_, caller_base_) are the
      caller_site_base_ = frame_base_;     // call site's scope, which caller() runs in
      auto v = Eval(*s.expr);
      caller_body_ = saved;
      caller_base_ = saved_top;
      caller_site_base_ = saved_site;
      LL_RETURN_IF_ERROR(v.status());
      const std::string text = ToStr(*v);
      LL_RETURN_IF_ERROR(Append(out, text, s.line));
      return Flow::kNormal;
    }
  }
  return Flow::kNormal;
}

Status Interp::ExecFor(const Stmt& s, std::string* out) {
  LL_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr));
  if (seq.is_undefined() && seq.undefined_name().empty()) {}
  LL_ASSIGN_OR_RETURN(List items, Iterate(seq, s.line));
  frames_.emplace_back();
  const size_t frame = frames_.size() - 1;
  auto bind = [&](const Value& item) -> Status {
    if (s.targets.size() == 1) {
      frames_[frame].Set(s.targets[0], item);
      return Status::Ok();
    }
    LL_ASSIGN_OR_RETURN(List parts, Iterate(item, s.line));
    if (parts.size() != s.targets.size()) {
      return RuntimeError(s.line, "cannot unpack " + std::to_string(parts.size()) +
                                      " values into " + std::to_string(s.targets.size()) +
                                      " loop variables");
    }
    for (size_t i = 0; i < parts.size(); ++i) frames_[frame].Set(s.targets[i], parts[i]);
    return Status::Ok();
  };
  Status st = Status::Ok();
  if (s.cond) {  // `for x in xs if c`: filtered first, so loop.length counts what is kept
    List kept;
    for (const Value& item : items) {
      st = bind(item);
      if (!st.ok()) break;
      auto c = Eval(*s.cond);
      if (!c.ok()) {
        st = c.status();
        break;
      }
      if (c->Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; st.ok() && i < n; ++i) {
    // Every iteration is charged, so nested loops with empty bodies still meet the budgets.
    st = Step(s.line);
    if (!st.ok()) break;
    // Each iteration starts from a fresh scope (jinja2: a {% set %} in one iteration is not
    // seen by the next; state that must carry over lives in a namespace()).
    frames_[frame].vars.clear();
    st = bind(items[static_cast<size_t>(i)]);
    if (!st.ok()) break;
    if (!s.uses_loop) {
      auto f = Exec(s.body, out);
      if (!f.ok()) {
        st = f.status();
        break;
      }
      if (*f == Flow::kBreak) break;
      continue;
    }
    auto cycle = std::make_shared<Callable>();
    cycle->builtin = "loop.cycle";
    cycle->bound.push_back(Value(i));
    auto loop = std::make_shared<Dict>();
    loop->items = {{"index", Value(i + 1)},
                   {"index0", Value(i)},
                   {"revindex", Value(n - i)},
                   {"revindex0", Value(n - i - 1)},
                   {"first", Value(i == 0)},
                   {"last", Value(i == n - 1)},
                   {"length", Value(n)},
                   {"depth", Value(1)},
                   {"depth0", Value(0)},
                   {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::MakeUndefined("previtem")},
                   {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::MakeUndefined("nextitem")},
                   {"cycle", Value(std::move(cycle))}};
    frames_[frame].Set("loop", Value(std::move(loop)));
    auto f = Exec(s.body, out);
    if (!f.ok()) {
      st = f.status();
      break;
    }
    if (*f == Flow::kBreak) break;
  }
  if (st.ok() && n == 0 && !s.else_body.empty()) {
    auto f = Exec(s.else_body, out);
    if (!f.ok()) st = f.status();
  }
  frames_.pop_back();
  return st;
}

Result<Value> Interp::Eval(const Expr& e) {
  if (++recursion_ > kMaxRecursion) {
    --recursion_;
    return ResourceExhausted("template line " + std::to_string(e.line) +
                             ": evaluation nested deeper than " + std::to_string(kMaxRecursion));
  }
  auto v = EvalNode(e);
  --recursion_;
  return v;
}

Result<Value> Interp::EvalNode(const Expr& e) {
  LL_RETURN_IF_ERROR(Step(e.line));
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: return Lookup(e.name);
    case ExprKind::kList: {
      List l;
      l.reserve(e.args.size());
      for (const ExprPtr& a : e.args) {
        LL_ASSIGN_OR_RETURN(Value v, Eval(*a));
        l.push_back(std::move(v));
      }
      Value v = e.name == "tuple" ? Value::Tuple(std::move(l)) : Value(std::move(l));
      if (v.depth() > kMaxValueDepth) {
        return RuntimeError(e.line, "value nested deeper than " + std::to_string(kMaxValueDepth));
      }
      return v;
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        LL_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
        LL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
        if (!k.is_string() && !k.is_number() && !k.is_none()) {
          return RuntimeError(e.line, std::string("unhashable dict key of type '") + TypeName(k) + "'");
        }
        d->SetKey(k, std::move(v));
      }
      Value v(std::move(d));
      if (v.depth() > kMaxValueDepth) {
        return RuntimeError(e.line, "value nested deeper than " + std::to_string(kMaxValueDepth));
      }
      return v;
    }
    case ExprKind::kGetAttr: {
      LL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
      return GetAttr(obj, e.name, e.line);
    }
    case ExprKind::kGetItem: {
      LL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
      LL_ASSIGN_OR_RETURN(Value key, Eval(*e.b));
      return GetItem(obj, key, e.line);
    }
    case ExprKind::kSlice: {
      LL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
      return Slice(obj, e);
    }
    case ExprKind::kCall: return EvalCall(e);
    case ExprKind::kFilter: {
      Value subject;
      if (e.a) {
        LL_ASSIGN_OR_RETURN(subject, Eval(*e.a));
      }
      Args args;
      Kwargs kwargs;
      LL_RETURN_IF_ERROR(EvalArgs(e, &args, &kwargs));
      LL_ASSIGN_OR_RETURN(Value v, ApplyFilter(*this, e.name, subject, args, kwargs, e.line));
      if (v.depth() > kMaxValueDepth) {
        return RuntimeError(e.line, "value nested deeper than " + std::to_string(kMaxValueDepth));
      }
      return v;
    }
    case ExprKind::kTest: {
      LL_ASSIGN_OR_RETURN(Value subject, Eval(*e.a));
      Args args;
      for (const ExprPtr& a : e.args) {
        LL_ASSIGN_OR_RETURN(Value x, Eval(*a));
        args.push_back(std::move(x));
      }
      LL_ASSIGN_OR_RETURN(bool r, ApplyTest(*this, e.name, subject, args, e.line));
      return Value(r != e.negated);
    }
    case ExprKind::kNot: {
      LL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      return Value(!a.Truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      LL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      const bool neg = e.kind == ExprKind::kNeg;
      if (a.kind() == Value::kFloat) return Value(neg ? -a.as_float() : a.as_float());
      if (a.kind() == Value::kInt || a.kind() == Value::kBool) {
        const int64_t x = a.ToInt();
        if (neg && x == INT64_MIN) return RuntimeError(e.line, "integer overflow");
        return Value(neg ? -x : x);
      }
      if (a.is_undefined()) return RuntimeError(e.line, "'" + a.undefined_name() + "' is undefined");
      return RuntimeError(e.line, std::string("bad operand type for unary ") + (neg ? "-" : "+") +
                                      ": '" + TypeName(a) + "'");
    }
    case ExprKind::kBinary: {
      LL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      LL_ASSIGN_OR_RETURN(Value b, Eval(*e.b));
      LL_ASSIGN_OR_RETURN(Value v, EvalBinary(e.name, a, b, e.line));
      if (v.depth() > kMaxValueDepth) {
        return RuntimeError(e.line, "value nested deeper than " + std::to_string(kMaxValueDepth));
      }
      return v;
    }
    case ExprKind::kConcat: {
      LL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      LL_ASSIGN_OR_RETURN(Value b, Eval(*e.b));
      std::string sa = a.is_string() ? a.str() : ToStr(a);
      const std::string sb = b.is_string() ? b.str() : ToStr(b);
      LL_RETURN_IF_ERROR(Built(sa.size() + sb.size(), e.line));
      sa += sb;
      return Value(std::move(sa));
    }
    case ExprKind::kCompare: {
      LL_ASSIGN_OR_RETURN(Value left, Eval(*e.a));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        LL_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i]));
        LL_ASSIGN_OR_RETURN(bool r, Compare(e.ops[i], left, right, e.line));
        if (!r) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kAnd: {
      LL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      if (!a.Truthy()) return a;
      return Eval(*e.b);
    }
    case ExprKind::kOr: {
      LL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      if (a.Truthy()) return a;
      return Eval(*e.b);
    }
    case ExprKind::kCond: {
      LL_ASSIGN_OR_RETURN(Value c, Eval(*e.b));
      if (c.Truthy()) return Eval(*e.a);
      if (e.c) return Eval(*e.c);
      return Value::MakeUndefined("");
    }
  }
  return RuntimeError(e.line, "unknown expression");
}

Result<bool> Interp::Compare(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        return RuntimeError(line, std::string("'in <string>' requires string as left operand, not ") + TypeName(a));
      }
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& x : b.list()) {
        if (Equal(a, x)) {
          found = true;
          break;
        }
      }
      LL_RETURN_IF_ERROR(Step(line, b.list().size() / 16));
    } else if (b.is_dict() && !b.dict().is_namespace) {
      found = b.dict().Find(KeyId(a)) != nullptr;
    } else if (b.is_undefined()) {
      found = false;  // jinja2's Undefined iterates as empty
    } else {
      return RuntimeError(line, std::string("argument of type '") + TypeName(b) + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined() || b.is_undefined()) {
    return RuntimeError(line, "'" + (a.is_undefined() ? a.undefined_name() : b.undefined_name()) + "' is undefined");
  }
  Result<bool> r = false;
  if (op == "<") r = Less(a, b);
  else if (op == ">") r = Less(b, a);
  else if (op == "<=") {
    r = Less(b, a);
    if (r.ok()) r = !*r;
  } else if (op == ">=") {
    r = Less(a, b);
    if (r.ok()) r = !*r;
  }
  if (!r.ok()) return RuntimeError(line, r.status().message());
  return *r;
}

Result<Value> Interp::EvalBinary(const std::string& op, const Value& a, const Value& b, int line) {
  if (a.is_undefined() || b.is_undefined()) {
    const std::string& n = a.is_undefined() ? a.undefined_name() : b.undefined_name();
    return RuntimeError(line, "'" + n + "' is undefined");
  }
  auto type_error = [&]() {
    return RuntimeError(line, "unsupported operand type(s) for " + op + ": '" + TypeName(a) +
                                  "' and '" + TypeName(b) + "'");
  };
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.kind() == Value::kFloat || b.kind() == Value::kFloat);
  if (op == "+") {
    if (nums) {
      if (floats) return Value(a.ToDouble() + b.ToDouble());
      int64_t r;
      if (__builtin_add_overflow(a.ToInt(), b.ToInt(), &r)) return RuntimeError(line, "integer overflow");
      return Value(r);
    }
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup()) {  // Markup + str escapes the str, either side
        std::string r = EscapeForMarkup(a) + EscapeForMarkup(b);
        LL_RETURN_IF_ERROR(Built(r.size(), line));
        return Value::Markup(std::move(r));
      }
      LL_RETURN_IF_ERROR(Built(a.str().size() + b.str().size(), line));
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list()) {
      LL_RETURN_IF_ERROR(Step(line, (a.list().size() + b.list().size()) / 8));
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value(std::move(l));
    }
    return type_error();
  }
  if (op == "-") {
    if (!nums) return type_error();
    if (floats) return Value(a.ToDouble() - b.ToDouble());
    int64_t r;
    if (__builtin_sub_overflow(a.ToInt(), b.ToInt(), &r)) return RuntimeError(line, "integer overflow");
    return Value(r);
  }
  if (op == "*") {
    if (nums) {
      if (floats) return Value(a.ToDouble() * b.ToDouble());
      int64_t r;
      if (__builtin_mul_overflow(a.ToInt(), b.ToInt(), &r)) return RuntimeError(line, "integer overflow");
      return Value(r);
    }
    const Value* seq = a.is_number() ? &b : &a;
    const Value* count = a.is_number() ? &a : &b;
    if (!count->is_number() || count->kind() == Value::kFloat) return type_error();
    const int64_t n = std::max<int64_t>(0, count->ToInt());
    if (seq->is_string()) {
      const uint64_t size = seq->str().size();
      if (size != 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / size + 1) {
        return Built(limits_.max_output_bytes + 1, line);
      }
      LL_RETURN_IF_ERROR(Built(size * static_cast<uint64_t>(n), line));
      std::string s;
      s.reserve(size * static_cast<uint64_t>(n));
      for (int64_t i = 0; i < n; ++i) s += seq->str();
      return Value(std::move(s));
    }
    if (seq->is_list()) {
      const uint64_t size = seq->list().size();
      if (size != 0 && static_cast<uint64_t>(n) > limits_.max_steps / size + 1) {
        return Step(line, limits_.max_steps + 1);
      }
      LL_RETURN_IF_ERROR(Step(line, size * static_cast<uint64_t>(n)));
      List l;
      for (int64_t i = 0; i < n; ++i) l.insert(l.end(), seq->list().begin(), seq->list().end());
      return Value(std::move(l));
    }
    return type_error();
  }
  if (!nums) {
    if (op == "%" && a.is_string()) {  // 'x=%s' % v, 'a%sb%s' % (x, y)
      Args args;
      if (b.is_list() && b.is_tuple()) {
        args = b.list();
      } else {
        args.push_back(b);
      }
      if (a.is_markup()) {  // Markup % args escapes string arguments
        for (Value& x : args) {
          if (x.is_string() && !x.is_markup()) x = Value(HtmlEscape(x.str()));
        }
        LL_ASSIGN_OR_RETURN(Value r, ApplyFilter(*this, "format", a, args, {}, line));
        return Value::Markup(r.str());
      }
      return ApplyFilter(*this, "format", a, args, {}, line);
    }
    return type_error();
  }
  if (op == "/") {
    if (b.ToDouble() == 0.0) return RuntimeError(line, "division by zero");
    return Value(a.ToDouble() / b.ToDouble());
  }
  if (op == "//" || op == "%") {
    if (floats) {
      const double x = a.ToDouble(), y = b.ToDouble();
      if (y == 0.0) return RuntimeError(line, "float division by zero");
      const double q = std::floor(x / y);
      if (op == "//") return Value(q);
      double m = std::fmod(x, y);
      if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    const int64_t x = a.ToInt(), y = b.ToInt();
    if (y == 0) return RuntimeError(line, "integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return RuntimeError(line, "integer overflow");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      q -= 1;
      m += y;
    }
    return Value(op == "//" ? q : m);
  }
  if (op == "**") {
    if (!floats && b.ToInt() >= 0) {
      int64_t r = 1, base = a.ToInt();
      for (int64_t e = b.ToInt(); e > 0; --e) {
        if (__builtin_mul_overflow(r, base, &r)) return RuntimeError(line, "integer overflow");
        if (r == 0 || r == 1) break;
      }
      return Value(r);
    }
    return Value(std::pow(a.ToDouble(), b.ToDouble()));
  }
  return type_error();
}

namespace {

// Byte offsets of each code point of s, plus s.size() at the end.
std::vector<size_t> CodePointOffsets(const std::string& s) {
  std::vector<size_t> off;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) off.push_back(i);
  }
  off.push_back(s.size());
  return off;
}

}  // namespace

Result<Value> Interp::GetAttr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) {
    return RuntimeError(line, "'" + obj.undefined_name() + "' is undefined");
  }
  // Sandbox: there are no host objects to walk to; "_" names reach only a dict's own keys
  // (as jinja2's getattr falls back to obj[name]), never a method.
  if (!name.empty() && name[0] == '_' && !obj.is_dict()) return Value::MakeUndefined(name);
  if (IsMethod(obj, name)) {
    auto c = std::make_shared<Callable>();
    c->builtin = name;
    c->bound.push_back(obj);
    return Value(std::move(c));
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  }
  return Value::MakeUndefined(name);
}

Result<Value> Interp::GetItem(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) {
    return RuntimeError(line, "'" + obj.undefined_name() + "' is undefined");
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(KeyId(key))) return *v;
    // jinja2's getitem falls back to getattr: d['items'] on a dict without that key is the
    // items method (JSON schemas without "items" meet this in real templates).
    if (key.is_string() && IsMethod(obj, key.str())) return GetAttr(obj, key.str(), line);
    return Value::MakeUndefined(ToStr(key));
  }
  if ((obj.is_list() || obj.is_string()) && (key.kind() == Value::kInt || key.kind() == Value::kBool)) {
    int64_t i = key.ToInt();
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::MakeUndefined("[" + std::to_string(key.ToInt()) + "]");
      return obj.list()[static_cast<size_t>(i)];
    }
    const std::vector<size_t> off = CodePointOffsets(obj.str());
    const int64_t n = static_cast<int64_t>(off.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::MakeUndefined("[" + std::to_string(key.ToInt()) + "]");
    const size_t b = off[static_cast<size_t>(i)], en = off[static_cast<size_t>(i) + 1];
    return Value(obj.str().substr(b, en - b));
  }
  if (key.is_string()) return GetAttr(obj, key.str(), line);
  return Value::MakeUndefined(ToStr(key));
}

Result<Value> Interp::Slice(const Value& obj, const Expr& e) {
  if (obj.is_undefined()) return RuntimeError(e.line, "'" + obj.undefined_name() + "' is undefined");
  if (!obj.is_list() && !obj.is_string()) {
    return RuntimeError(e.line, std::string("'") + TypeName(obj) + "' object is not subscriptable");
  }
  std::optional<int64_t> parts[3];
  const Expr* exprs[3] = {e.b.get(), e.c.get(), e.d.get()};
  for (int k = 0; k < 3; ++k) {
    if (exprs[k] == nullptr) continue;
    LL_ASSIGN_OR_RETURN(Value v, Eval(*exprs[k]));
    if (v.is_none()) continue;
    if (v.kind() != Value::kInt && v.kind() != Value::kBool) {
      return RuntimeError(e.line, "slice indices must be integers or None");
    }
    parts[k] = v.ToInt();
  }
  const int64_t step = parts[2].value_or(1);
  if (step == 0) return RuntimeError(e.line, "slice step cannot be zero");
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_string()) {
    off = CodePointOffsets(obj.str());
    n = static_cast<int64_t>(off.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.list().size());
  }
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(parts[0], step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(parts[1], step > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
  LL_RETURN_IF_ERROR(Step(e.line, idx.size() / 8));
  if (obj.is_string()) {
    std::string s;
    if (step == 1) {
      if (start < stop) s = obj.str().substr(off[start], off[stop] - off[start]);
    } else {
      for (int64_t i : idx) s += obj.str().substr(off[i], off[i + 1] - off[i]);
    }
    return Value(std::move(s));
  }
  List l;
  for (int64_t i : idx) l.push_back(obj.list()[static_cast<size_t>(i)]);
  return Value(std::move(l));
}

Result<Value> Interp::EvalCall(const Expr& e) {
  Args args;
  Kwargs kwargs;
  auto eval_args = [&]() { return EvalArgs(e, &args, &kwargs); };
  if (e.a->kind == ExprKind::kGetAttr) {  // obj.method(...) without a bound-method value
    LL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a->a));
    if (obj.is_undefined()) {
      return RuntimeError(e.line, "'" + obj.undefined_name() + "' is undefined");
    }
    if (IsMethod(obj, e.a->name)) {
      LL_RETURN_IF_ERROR(eval_args());
      LL_ASSIGN_OR_RETURN(Value v, CallMethod(*this, obj, e.a->name, args, kwargs, e.line));
      return v;
    }
    LL_ASSIGN_OR_RETURN(Value callee, GetAttr(obj, e.a->name, e.line));
    LL_RETURN_IF_ERROR(eval_args());
    if (callee.is_undefined()) {
      return RuntimeError(e.line, std::string("'") + TypeName(obj) + "' object has no attribute '" +
                                      e.a->name + "'");
    }
    return Call(callee, std::move(args), std::move(kwargs), e.line);
  }
  LL_ASSIGN_OR_RETURN(Value callee, Eval(*e.a));
  LL_RETURN_IF_ERROR(eval_args());
  return Call(callee, std::move(args), std::move(kwargs), e.line);
}

Result<Value> Interp::Call(const Value& callee, Args args, Kwargs kwargs, int line) {
  if (callee.kind() != Value::kCallable) {
    if (callee.is_undefined()) {
      return RuntimeError(line, "'" + callee.undefined_name() + "' is undefined");
    }
    return RuntimeError(line, std::string("'") + TypeName(callee) + "' object is not callable");
  }
  const Callable& c = callee.callable();
  if (c.builtin == "loop.cycle") {
    if (args.empty()) return RuntimeError(line, "loop.cycle needs at least one value");
    return args[static_cast<size_t>(c.bound[0].as_int()) % args.size()];
  }
  if (!c.bound.empty()) return CallMethod(*this, c.bound[0], c.builtin, args, kwargs, line);
  if (c.macro == nullptr) return CallBuiltin(c.builtin, std::move(args), std::move(kwargs), line);
  const MacroNode& m = *c.macro;
  if (++depth_ > limits_.max_depth) {
    --depth_;
    return ResourceExhausted("template line " + std::to_string(line) + ": macro '" + m.name +
                             "' nested deeper than max_depth (" +
                             std::to_string(limits_.max_depth) + ")");
  }
  const size_t saved_base = frame_base_;
  frames_.emplace_back();
  frame_base_ = frames_.size() - 1;
  Status st = Status::Ok();
  List varargs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i < m.params.size()) {
      frames_.back().Set(m.params[i], std::move(args[i]));
    } else {
      varargs.push_back(std::move(args[i]));
    }
  }
  auto extra = std::make_shared<Dict>();
  for (auto& [k, v] : kwargs) {
    bool is_param = false;
    for (size_t i = 0; i < m.params.size(); ++i) {
      if (m.params[i] == k) {
        if (i < args.size()) {
          st = RuntimeError(line, "macro '" + m.name + "' got multiple values for argument '" + k + "'");
        }
        is_param = true;
      }
    }
    if (is_param) {
      frames_.back().Set(k, std::move(v));
    } else {
      extra->items.emplace_back(k, std::move(v));
    }
  }
  for (size_t i = 0; st.ok() && i < m.params.size(); ++i) {
    if (frames_.back().Find(m.params[i]) != nullptr) continue;
    if (m.defaults[i]) {
      auto d = Eval(*m.defaults[i]);
      if (!d.ok()) {
        st = d.status();
        break;
      }
      frames_.back().Set(m.params[i], std::move(*d));
    } else {
      frames_.back().Set(m.params[i], Value::MakeUndefined(m.params[i]));
    }
  }
  frames_.back().Set("varargs", Value::Tuple(std::move(varargs)));
  frames_.back().Set("kwargs", Value(std::move(extra)));
  std::string out;
  if (st.ok()) {
    auto f = Exec(m.body, &out);
    if (!f.ok()) st = f.status();
  }
  frames_.pop_back();
  frame_base_ = saved_base;
  --depth_;
  LL_RETURN_IF_ERROR(st);
  LL_RETURN_IF_ERROR(Built(out.size(), line));
  return Value(std::move(out));
}

namespace {
const Value* Kwarg(const Kwargs& kw, std::string_view name) {
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}
}  // namespace

Result<Value> Interp::CallBuiltin(const std::string& name, Args args, Kwargs kwargs, int line) {
  if (name == "range") {
    if (args.empty() || args.size() > 3) return RuntimeError(line, "range expected 1 to 3 arguments");
    for (const Value& a : args) {
      if (a.kind() != Value::kInt && a.kind() != Value::kBool) {
        return RuntimeError(line, std::string("range: '") + TypeName(a) + "' object cannot be interpreted as an integer");
      }
    }
    int64_t start = 0, stop, step = 1;
    if (args.size() == 1) {
      stop = args[0].ToInt();
    } else {
      start = args[0].ToInt();
      stop = args[1].ToInt();
      if (args.size() == 3) step = args[2].ToInt();
    }
    if (step == 0) return RuntimeError(line, "range() arg 3 must not be zero");
    const long double count_ld =
        step > 0 ? (stop > start ? (static_cast<long double>(stop) - start + step - 1) / step : 0)
                 : (start > stop ? (static_cast<long double>(start) - stop - step - 1) / -step : 0);
    const int64_t count = static_cast<int64_t>(count_ld);
    if (count > kMaxRange) {
      return RuntimeError(line, "range too big: " + std::to_string(count) + " items (the sandbox allows " +
                                    std::to_string(kMaxRange) + ")");
    }
    LL_RETURN_IF_ERROR(Step(line, static_cast<uint64_t>(count) / 8));
    List l;
    l.reserve(static_cast<size_t>(count));
    for (int64_t i = 0, v = start; i < count; ++i, v += step) l.push_back(Value(v));
    return Value(std::move(l));
  }
  if (name == "namespace" || name == "dict") {
    auto d = std::make_shared<Dict>();
    d->is_namespace = name == "namespace";
    for (const Value& a : args) {
      if (!a.is_dict()) return RuntimeError(line, name + "() takes keyword arguments or a dict");
      for (size_t i = 0; i < a.dict().items.size(); ++i) d->SetKey(a.dict().KeyAt(i), a.dict().items[i].second);
    }
    for (auto& [k, v] : kwargs) d->Set(k, std::move(v));
    return Value(std::move(d));
  }
  if (name == "raise_exception") {
    const std::string msg = args.empty() ? "" : ToStr(args[0]);
    return InvalidArgument(kRaisePrefix + msg);
  }
  if (name == "strftime_now") {
    if (args.empty() || !args[0].is_string()) return RuntimeError(line, "strftime_now(format) needs a format string");
    const std::time_t t = std::chrono::system_clock::to_time_t(Now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[512];
    const size_t n = std::strftime(buf, sizeof(buf), args[0].str().c_str(), &tm);
    if (n == 0 && !args[0].str().empty()) return RuntimeError(line, "strftime_now: format too long");
    return Value(std::string(buf, n));
  }
  if (name == "caller") {
    if (caller_body_ == nullptr) return RuntimeError(line, "'caller' is undefined");
    // The body runs in the scope of the {% call %}: the macro's frames are set aside meanwhile.
    std::string out;
    const Body* body = caller_body_;
    const size_t top = std::min(caller_base_, frames_.size());
    std::vector<Frame> hidden(std::make_move_iterator(frames_.begin() + static_cast<std::ptrdiff_t>(top)),
                              std::make_move_iterator(frames_.end()));
    frames_.resize(top);
    const size_t saved_base = frame_base_;
    frame_base_ = caller_site_base_;
    frames_.emplace_back();
    auto f = Exec(*body, &out);
    frames_.resize(top);
    for (Frame& fr : hidden) frames_.push_back(std::move(fr));
    frame_base_ = saved_base;
    LL_RETURN_IF_ERROR(f.status());
    LL_RETURN_IF_ERROR(Built(out.size(), line));
    return Value(std::move(out));
  }
  (void)Kwarg;
  return RuntimeError(line, "'" + name + "' is not supported in chat templates");
}

// ---------------------------------------------------------------------------------------

Result<Template> Template::Parse(std::string_view source, const ParseOptions& options) {
  LL_ASSIGN_OR_RETURN(std::shared_ptr<const ProgramNode> program, ParseProgram(source, options));
  Template t;
  t.program_ = std::move(program);
  t.source_ = std::make_shared<const std::string>(source);
  return t;
}

namespace {

// Nesting of a JSON value, walked without recursion (a hostile 10^5-deep array must not
// overflow the stack here, nor later in the recursive conversion and destruction of Values).
size_t JsonDepth(const nlohmann::ordered_json& root) {
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> stack{{&root, 1}};
  size_t deepest = 0;
  while (!stack.empty()) {
    auto [j, d] = stack.back();
    stack.pop_back();
    if (!j->is_structured()) continue;
    deepest = std::max(deepest, d);
    for (const auto& child : *j) stack.emplace_back(&child, d + 1);
  }
  return deepest;
}

}  // namespace

Result<std::string> Template::Render(const nlohmann::ordered_json& globals,
                                     const RenderLimits& limits, const Clock& clock) const {
  if (!program_) return InvalidArgument("template: not parsed");
  if (!globals.is_object()) return InvalidArgument("template globals must be a JSON object");
  if (JsonDepth(globals) > kMaxValueDepth) {
    return InvalidArgument("template globals are nested deeper than " +
                           std::to_string(kMaxValueDepth) + " levels");
  }
  Interp interp(*program_, globals, limits, clock);
  return interp.Run();
}

const std::string& Template::source() const {
  static const std::string kEmpty;
  return source_ ? *source_ : kEmpty;
}

}  // namespace lifeline::jinja

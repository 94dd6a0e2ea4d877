// The parsed form of a template (private to text/template): expressions and statements as
// one node type each, every node carrying its source line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/template/jinja.h"
#include "text/template/jinja_value.h"

namespace lifeline::jinja {

enum class ExprKind : uint8_t {
  kLiteral,   // value
  kName,      // name
  kList,      // args; name "tuple" for (a, b) and bare a, b
  kDict,      // kwargs: keys are the evaluated `args[2i]`, values `args[2i+1]`
  kGetAttr,   // a.name
  kGetItem,   // a[b]
  kSlice,     // a[b:c:d] (absent parts are null)
  kCall,      // a(args, kwargs)
  kFilter,    // a | name(args, kwargs)
  kTest,      // a is [not] name(args)
  kNot,       // not a
  kNeg,       // -a
  kPos,       // +a
  kBinary,    // a op b: + - * / // % **
  kConcat,    // a ~ b
  kCompare,   // a ops[0] args[0] ops[1] args[1] ...: == != < > <= >= in "not in"
  kAnd,       // a and b
  kOr,        // a or b
  kCond,      // a if b else c (c null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;                                          // kLiteral
  std::string name;                                     // kName, attr, filter/test name, op
  bool negated = false;                                 // kTest: "is not"
  ExprPtr a, b, c, d;                                   // operands
  std::vector<ExprPtr> args;                            // list items, call/filter/test args
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // call/filter keyword args
  std::vector<std::string> ops;                         // kCompare operators
  int height = 1;                                       // longest path to a leaf
};

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches
  kFor,          // targets in expr [if cond]: body [else else_body]
  kSet,          // targets (or target.attr) = expr
  kSetBlock,     // {% set name %}body{% endset %}
  kMacro,        // macro
  kFilterBlock,  // {% filter f|g %}body{% endfilter %}: filters
  kBreak,
  kContinue,
  kBlock,        // a body rendered in place ({% generation %})
  kCallBlock,    // {% call macro(args) %}body{% endcall %}: expr is the call
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroNode {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // parallel to params; null where none
  Body body;
  int line = 0;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, cond;
  std::vector<std::string> targets;
  std::string attr;  // kSet on a namespace: targets[0].attr
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::unique_ptr<MacroNode> macro;
  std::vector<ExprPtr> filters;  // kFilterBlock: kFilter nodes whose `a` is null
  bool uses_loop = false;        // kFor: the body names `loop` (else no loop object is built)
};

struct ProgramNode {
  Body body;
};

// Parser nesting cap (blocks inside blocks, parentheses inside parentheses): a hostile source
// fails with an error instead of exhausting the stack.
inline constexpr int kMaxParseDepth = 200;
// Expression height cap: left-leaning chains (a + b + c ..., x|f|g ..., a.b.c ...) are parsed
// iteratively but evaluated recursively, and their trees are freed recursively.
inline constexpr int kMaxExprHeight = 500;

Result<std::shared_ptr<const ProgramNode>> ParseProgram(std::string_view source,
                                                         const ParseOptions& options);

}  // namespace lifeline::jinja

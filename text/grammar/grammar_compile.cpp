// GbnfAst -> Grammar: per rule a Thompson NFA over bytes (code points expanded to UTF-8
// sequences, small loop-free rules inlined), then a subset construction into a DFA whose
// symbols are byte ranges and rule references. Then the checks that keep the matcher finite:
// the root must be able to complete, and no rule may reach itself without consuming a byte.
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "text/grammar/gbnf_ast.h"
#include "text/grammar/grammar_internal.h"
#include "text/grammar/utf8_ranges.h"

namespace lifeline::grammar {
namespace {

// Rules of at most this many NFA states, not recursive and without unbounded repetition, are
// copied into their callers: matching them then needs no push/pop, and the token masks of the
// caller's positions see through them (e.g. `space` after a string, `char` inside it).
constexpr int64_t kInlineMaxStates = 128;
constexpr int kMaxInlineDepth = 32;
// Fingerprints cover a rule and all it can call; past this many states they are skipped.
constexpr int32_t kFingerprintMaxStates = 4096;

struct NfaState {
  std::vector<int32_t> eps;
  struct Bytes { uint8_t lo, hi; int32_t to; };
  std::vector<Bytes> bytes;
  struct Ref { int32_t rule, to; };  // rule: compiled rule id
  std::vector<Ref> refs;
};

class Compiler {
 public:
  Compiler(const GbnfAst& ast, const GrammarLimits& limits)
      : ast_(ast), limits_(limits), state_cap_(limits.max_states) {}

  Result<std::shared_ptr<const Grammar>> Run() {
    int32_t root = -1;
    for (size_t r = 0; r < ast_.rule_names.size(); ++r)
      if (ast_.rule_names[r] == "root") root = static_cast<int32_t>(r);
    if (root < 0) return InvalidArgument("grammar has no rule named 'root' (the entry rule)");
    FindRecursiveRules();
    auto g = std::make_shared<Grammar>();
    g->limits = limits_;
    g_ = g.get();
    CompiledId(root);
    while (!pending_.empty()) {
      int32_t c = pending_.front();
      pending_.pop_front();
      LL_RETURN_IF_ERROR(CompileRule(c));
    }
    g->root_rule = 0;
    LL_RETURN_IF_ERROR(CheckTermination());
    ComputeFollowSets();
    ComputeFingerprints();
    return std::shared_ptr<const Grammar>(std::move(g));
  }

 private:
  std::string RuleWhere(int32_t ast_rule) const {
    return "line " + std::to_string(ast_.rule_def_line[ast_rule]) + ", column " +
           std::to_string(ast_.rule_def_col[ast_rule]) + ": ";
  }

  // Tarjan's SCC over the rule reference graph: a rule in a cycle is never inlined.
  void FindRecursiveRules() {
    size_t n = ast_.rule_names.size();
    std::vector<std::vector<int32_t>> calls(n);
    for (size_t r = 0; r < n; ++r) CollectRefs(ast_.rule_body[r], &calls[r]);
    recursive_.assign(n, false);
    std::vector<int32_t> index(n, -1), low(n, 0), stack;
    std::vector<bool> on_stack(n, false);
    int32_t counter = 0;
    struct Frame { int32_t v; size_t next; };
    for (size_t s = 0; s < n; ++s) {
      if (index[s] >= 0) continue;
      std::vector<Frame> dfs{{static_cast<int32_t>(s), 0}};
      index[s] = low[s] = counter++;
      stack.push_back(static_cast<int32_t>(s));
      on_stack[s] = true;
      while (!dfs.empty()) {
        Frame& f = dfs.back();
        if (f.next < calls[f.v].size()) {
          int32_t w = calls[f.v][f.next++];
          if (w == f.v) recursive_[w] = true;
          if (index[w] < 0) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack[w] = true;
            dfs.push_back({w, 0});
          } else if (on_stack[w]) {
            low[f.v] = std::min(low[f.v], index[w]);
          }
          continue;
        }
        int32_t v = f.v;
        dfs.pop_back();
        if (!dfs.empty()) low[dfs.back().v] = std::min(low[dfs.back().v], low[v]);
        if (low[v] == index[v]) {
          std::vector<int32_t> scc;
          int32_t w;
          do {
            w = stack.back();
            stack.pop_back();
            on_stack[w] = false;
            scc.push_back(w);
          } while (w != v);
          if (scc.size() > 1)
            for (int32_t x : scc) recursive_[x] = true;
        }
      }
    }
  }

  void CollectRefs(int32_t node, std::vector<int32_t>* out) const {
    if (node < 0) return;
    std::vector<int32_t> todo{node};
    while (!todo.empty()) {
      const AstNode& n = ast_.nodes[todo.back()];
      todo.pop_back();
      if (n.kind == AstKind::kRef) out->push_back(n.ref);
      for (int32_t k : n.kids) todo.push_back(k);
    }
  }

  bool HasUnboundedRepetition(int32_t node) const {
    std::vector<int32_t> todo{node};
    while (!todo.empty()) {
      const AstNode& n = ast_.nodes[todo.back()];
      todo.pop_back();
      if (n.kind == AstKind::kRepeat && n.max < 0) return true;
      for (int32_t k : n.kids) todo.push_back(k);
    }
    return false;
  }

  // Whether references to `rule` are replaced by a copy of its automaton: not recursive, no
  // unbounded repetition, and at most kInlineMaxStates NFA states when built alone (measured
  // by building it into a scratch automaton under that cap).
  bool Inlinable(int32_t rule) {
    if (recursive_[rule] || ast_.rule_names[rule] == "root") return false;
    auto it = inline_.find(rule);
    if (it != inline_.end()) return it->second;
    if (inline_depth_ >= kMaxInlineDepth) return false;  // not memoized: depends on the path
    bool ok = false;
    if (!HasUnboundedRepetition(ast_.rule_body[rule])) {
      std::vector<NfaState> saved;
      saved.swap(nfa_);
      const bool saved_overflow = overflow_;
      const int64_t saved_cap = state_cap_;
      overflow_ = false;
      state_cap_ = kInlineMaxStates;
      ++inline_depth_;
      Build(ast_.rule_body[rule], NewState(), 0);
      --inline_depth_;
      ok = !overflow_;
      nfa_.swap(saved);
      overflow_ = saved_overflow;
      state_cap_ = saved_cap;
    }
    inline_[rule] = ok;
    return ok;
  }

  int32_t CompiledId(int32_t ast_rule) {
    auto it = compiled_.find(ast_rule);
    if (it != compiled_.end()) return it->second;
    int32_t id = static_cast<int32_t>(g_->rule_names.size());
    compiled_[ast_rule] = id;
    ast_of_compiled_.push_back(ast_rule);
    g_->rule_names.push_back(ast_.rule_names[ast_rule]);
    g_->rule_first_state.push_back(-1);
    g_->rule_state_count.push_back(0);
    pending_.push_back(id);
    return id;
  }

  int32_t NewState() {
    nfa_.emplace_back();
    if (static_cast<int64_t>(nfa_.size()) > state_cap_) overflow_ = true;
    return static_cast<int32_t>(nfa_.size() - 1);
  }

  const std::vector<std::vector<ByteRange>>& ClassSequences(int32_t node) {
    auto it = class_seqs_.find(node);
    if (it != class_seqs_.end()) return it->second;
    std::vector<std::vector<ByteRange>> seqs;
    for (const CpRange& r : ast_.nodes[node].ranges) Utf8Sequences(r.lo, r.hi, &seqs);
    return class_seqs_.emplace(node, std::move(seqs)).first->second;
  }

  // Thompson construction: adds the states of `node` starting at `s`, returns its end state.
  int32_t Build(int32_t node, int32_t s, int depth) {
    if (overflow_) return s;
    const AstNode& n = ast_.nodes[node];
    switch (n.kind) {
      case AstKind::kEmpty: return s;
      case AstKind::kLiteral: {
        for (const CpRange& cp : n.ranges) {
          uint8_t b[4];
          int len = EncodeUtf8(cp.lo, b);
          for (int i = 0; i < len && !overflow_; ++i) {
            int32_t t = NewState();
            nfa_[s].bytes.push_back({b[i], b[i], t});
            s = t;
          }
        }
        return s;
      }
      case AstKind::kClass: {
        int32_t end = NewState();
        for (const auto& seq : ClassSequences(node)) {
          int32_t cur = s;
          for (size_t i = 0; i < seq.size() && !overflow_; ++i) {
            int32_t next = i + 1 == seq.size() ? end : NewState();
            nfa_[cur].bytes.push_back({seq[i].lo, seq[i].hi, next});
            cur = next;
          }
        }
        return end;
      }
      case AstKind::kRef: {
        // Depth guard: inlining follows only non-recursive rules, so this is at most the
        // number of rules deep; the cap keeps the native stack bounded regardless.
        if (depth < 256 && Inlinable(n.ref)) return Build(ast_.rule_body[n.ref], s, depth + 1);
        int32_t t = NewState();
        nfa_[s].refs.push_back({CompiledId(n.ref), t});
        return t;
      }
      case AstKind::kSeq:
        for (int32_t k : n.kids) s = Build(k, s, depth + 1);
        return s;
      case AstKind::kAlt: {
        int32_t end = NewState();
        for (int32_t k : n.kids) {
          if (overflow_) break;
          int32_t t = NewState();
          nfa_[s].eps.push_back(t);
          int32_t e = Build(k, t, depth + 1);
          nfa_[e].eps.push_back(end);
        }
        return end;
      }
      case AstKind::kRepeat: {
        int32_t kid = n.kids[0];
        for (int32_t i = 0; i < n.min && !overflow_; ++i) s = Build(kid, s, depth + 1);
        if (n.max < 0) {
          int32_t head = NewState();
          nfa_[s].eps.push_back(head);
          int32_t e = Build(kid, head, depth + 1);
          nfa_[e].eps.push_back(head);
          return head;
        }
        int32_t end = NewState();
        for (int32_t i = n.min; i < n.max && !overflow_; ++i) {
          nfa_[s].eps.push_back(end);
          s = Build(kid, s, depth + 1);
        }
        nfa_[s].eps.push_back(end);
        return end;
      }
    }
    return s;
  }

  void EpsClosure(std::vector<int32_t>* set) {
    work_ += static_cast<int64_t>(set->size());
    std::vector<int32_t> todo(*set);
    for (int32_t s : *set) mark_[s] = mark_gen_;
    while (!todo.empty()) {
      int32_t s = todo.back();
      todo.pop_back();
      for (int32_t t : nfa_[s].eps) {
        if (mark_[t] != mark_gen_) {
          mark_[t] = mark_gen_;
          set->push_back(t);
          todo.push_back(t);
        }
      }
    }
    ++mark_gen_;
    // The sort and the interning hash: about n log n and n more.
    work_ += 2 * static_cast<int64_t>(set->size()) + 8;
    std::sort(set->begin(), set->end());
  }

  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 1469598103934665603ull;
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
      return h;
    }
  };

  Status TooMuchWork() const {
    return ResourceExhausted("grammar needs more than " + std::to_string(limits_.max_compile_work) +
                             " steps to compile (max_compile_work); reduce repetition counts "
                             "or overlapping alternatives");
  }

  Status Overflow() const {
    return ResourceExhausted("grammar expands to more than " + std::to_string(limits_.max_states) +
                             " automaton states (max_states); reduce repetition counts or "
                             "rule sizes");
  }

  Status CompileRule(int32_t rule) {
    int32_t ast_rule = ast_of_compiled_[rule];
    nfa_.clear();
    int32_t start = NewState();
    int32_t accept = Build(ast_.rule_body[ast_rule], start, 0);
    if (overflow_) return Overflow();
    mark_.assign(nfa_.size(), 0);
    mark_gen_ = 1;

    const int32_t first = static_cast<int32_t>(g_->states.size());
    std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids;
    std::vector<std::vector<int32_t>> sets;
    auto intern = [&](std::vector<int32_t> set) -> int32_t {
      EpsClosure(&set);
      auto it = ids.find(set);
      if (it != ids.end()) return it->second;
      int32_t id = static_cast<int32_t>(sets.size());
      ids.emplace(set, id);
      sets.push_back(std::move(set));
      return id;
    };
    intern({start});
    struct Pending { std::vector<ByteEdge> edges; std::vector<RefEdge> refs; bool final; };
    std::vector<Pending> out;
    for (size_t d = 0; d < sets.size(); ++d) {
      if (first + static_cast<int64_t>(sets.size()) > limits_.max_states) return Overflow();
      if (work_ > limits_.max_compile_work) return TooMuchWork();
      Pending p;
      std::vector<NfaState::Bytes> edges;
      std::map<int32_t, std::vector<int32_t>> refs;
      p.final = false;
      for (int32_t s : sets[d]) {
        if (s == accept) p.final = true;
        work_ += 1 + static_cast<int64_t>(nfa_[s].bytes.size() + nfa_[s].refs.size());
        edges.insert(edges.end(), nfa_[s].bytes.begin(), nfa_[s].bytes.end());
        for (const auto& r : nfa_[s].refs) refs[r.rule].push_back(r.to);
      }
      std::vector<int> points;
      for (const auto& e : edges) {
        points.push_back(e.lo);
        points.push_back(e.hi + 1);
      }
      std::sort(points.begin(), points.end());
      points.erase(std::unique(points.begin(), points.end()), points.end());
      work_ += static_cast<int64_t>(points.size()) * static_cast<int64_t>(edges.size());
      if (work_ > limits_.max_compile_work) return TooMuchWork();
      for (size_t i = 0; i + 1 < points.size(); ++i) {
        int lo = points[i], hi = points[i + 1] - 1;
        std::vector<int32_t> targets;
        for (const auto& e : edges)
          if (e.lo <= lo && e.hi >= hi) targets.push_back(e.to);
        if (targets.empty()) continue;
        int32_t t = intern(std::move(targets));
        if (!p.edges.empty() && p.edges.back().target == t && p.edges.back().hi + 1 == lo) {
          p.edges.back().hi = static_cast<uint8_t>(hi);
        } else {
          p.edges.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), t});
        }
      }
      for (auto& [r, targets] : refs) p.refs.push_back({r, intern(std::move(targets))});
      out.push_back(std::move(p));
    }
    if (first + static_cast<int64_t>(out.size()) > limits_.max_states) return Overflow();
    g_->rule_first_state[rule] = first;
    g_->rule_state_count[rule] = static_cast<int32_t>(out.size());
    for (const Pending& p : out) {
      DfaState s;
      s.rule = rule;
      s.final = p.final;
      s.edge_begin = static_cast<uint32_t>(g_->edges.size());
      for (ByteEdge e : p.edges) {
        e.target += first;
        g_->edges.push_back(e);
      }
      s.edge_end = static_cast<uint32_t>(g_->edges.size());
      s.ref_begin = static_cast<uint32_t>(g_->refs.size());
      for (RefEdge r : p.refs) {
        r.target += first;
        g_->refs.push_back(r);
      }
      s.ref_end = static_cast<uint32_t>(g_->refs.size());
      g_->states.push_back(s);
    }
    return Status::Ok();
  }

  // Fixpoint over rules: can `rule` go from its start to a final state using byte edges
  // (when `bytes_ok`) and references to rules already in `yes`?
  std::vector<bool> RuleFixpoint(bool bytes_ok) const {
    const Grammar& g = *g_;
    size_t n = g.rule_names.size();
    std::vector<bool> yes(n, false);
    std::vector<int32_t> seen(g.states.size(), -1);
    int32_t gen = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (yes[r]) continue;
        ++gen;
        std::vector<int32_t> todo{g.rule_start(static_cast<int32_t>(r))};
        seen[todo[0]] = gen;
        bool reached = false;
        while (!todo.empty() && !reached) {
          const DfaState& s = g.states[todo.back()];
          todo.pop_back();
          if (s.final) reached = true;
          auto visit = [&](int32_t t) {
            if (seen[t] != gen) {
              seen[t] = gen;
              todo.push_back(t);
            }
          };
          if (bytes_ok)
            for (uint32_t i = s.edge_begin; i < s.edge_end; ++i) visit(g.edges[i].target);
          for (uint32_t i = s.ref_begin; i < s.ref_end; ++i)
            if (yes[g.refs[i].rule]) visit(g.refs[i].target);
        }
        if (reached) {
          yes[r] = true;
          changed = true;
        }
      }
    }
    return yes;
  }

  // Refuses grammars on which the matcher's closure (pushes and returns without consuming a
  // byte) would not terminate: a cycle of "call rule Q" / "skip nullable rule Q" edges.
  Status CheckTermination() {
    const Grammar& g = *g_;
    std::vector<bool> nullable = RuleFixpoint(false);
    size_t n = g.states.size();
    std::vector<uint8_t> color(n, 0);  // 0 white, 1 on the DFS path, 2 done
    struct Frame { int32_t s; uint32_t next; };
    for (size_t root = 0; root < n; ++root) {
      if (color[root]) continue;
      std::vector<Frame> dfs{{static_cast<int32_t>(root), 0}};
      color[root] = 1;
      while (!dfs.empty()) {
        Frame& f = dfs.back();
        const DfaState& s = g.states[f.s];
        uint32_t n_refs = s.ref_end - s.ref_begin;
        if (f.next >= 2 * n_refs) {
          color[f.s] = 2;
          dfs.pop_back();
          continue;
        }
        const RefEdge& r = g.refs[s.ref_begin + f.next / 2];
        bool enter = f.next % 2 == 0;
        ++f.next;
        int32_t t = enter ? g.rule_start(r.rule) : (nullable[r.rule] ? r.target : -1);
        if (t < 0 || color[t] == 2) continue;
        if (color[t] == 1) {
          int32_t rule = g.states[t].rule;
          return InvalidArgument(
              RuleWhere(ast_of_compiled_[rule]) + "rule '" + g.rule_names[rule] +
              "' can reach itself without consuming input (left recursion, or a repetition of "
              "something that can match the empty string)");
        }
        color[t] = 1;
        dfs.push_back({t, 0});
      }
    }
    std::vector<bool> productive = RuleFixpoint(true);
    if (!productive[g.root_rule]) {
      return InvalidArgument(RuleWhere(ast_of_compiled_[g.root_rule]) +
                             "rule 'root' can never complete (no text matches the grammar)");
    }
    return Status::Ok();
  }

  // FIRST per state (bytes consumable first, through calls and skipping nullable calls), then
  // FOLLOW per rule, both as fixpoints (no recursion: the skip graph is acyclic by now, but may
  // be deep).
  void ComputeFollowSets() {
    Grammar& g = *g_;
    using Bits = std::array<uint64_t, 4>;
    const size_t n = g.states.size();
    std::vector<Bits> first(n, Bits{});
    std::vector<bool> ends(n, false);
    auto merge = [](Bits* into, const Bits& from) {
      bool changed = false;
      for (int i = 0; i < 4; ++i) {
        uint64_t v = (*into)[i] | from[i];
        changed |= v != (*into)[i];
        (*into)[i] = v;
      }
      return changed;
    };
    for (size_t s = 0; s < n; ++s) {
      const DfaState& st = g.states[s];
      ends[s] = st.final;
      for (uint32_t e = st.edge_begin; e < st.edge_end; ++e)
        for (int b = g.edges[e].lo; b <= g.edges[e].hi; ++b) first[s][b >> 6] |= uint64_t{1} << (b & 63);
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = n; s-- > 0;) {
        const DfaState& st = g.states[s];
        for (uint32_t k = st.ref_begin; k < st.ref_end; ++k) {
          const RefEdge& r = g.refs[k];
          const int32_t q0 = g.rule_start(r.rule);
          changed |= merge(&first[s], first[q0]);
          if (ends[q0]) {
            changed |= merge(&first[s], first[r.target]);
            if (ends[r.target] && !ends[s]) {
              ends[s] = true;
              changed = true;
            }
          }
        }
      }
    }
    g.rule_follow.assign(g.rule_names.size(), Bits{});
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        const DfaState& st = g.states[s];
        for (uint32_t k = st.ref_begin; k < st.ref_end; ++k) {
          const RefEdge& r = g.refs[k];
          changed |= merge(&g.rule_follow[r.rule], first[r.target]);
          if (ends[r.target]) changed |= merge(&g.rule_follow[r.rule], g.rule_follow[st.rule]);
        }
      }
    }
  }

  static uint64_t Mix(uint64_t h, uint64_t v, uint64_t seed) {
    uint64_t x = (h ^ (v + seed)) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 29);
  }

  void ComputeFingerprints() {
    Grammar& g = *g_;
    size_t n = g.rule_names.size();
    g.rule_fp_lo.assign(n, 0);
    g.rule_fp_hi.assign(n, 0);
    for (size_t r = 0; r < n; ++r) {
      std::vector<int32_t> order{static_cast<int32_t>(r)};
      std::unordered_map<int32_t, int32_t> local{{static_cast<int32_t>(r), 0}};
      int64_t states = 0;
      bool too_big = false;
      uint64_t lo = 0x243F6A8885A308D3ull, hi = 0x13198A2E03707344ull;
      auto put = [&](uint64_t v) {
        lo = Mix(lo, v, 0xA4093822299F31D0ull);
        hi = Mix(hi, v, 0x082EFA98EC4E6C89ull);
      };
      for (size_t i = 0; i < order.size() && !too_big; ++i) {
        int32_t rule = order[i];
        int32_t first = g.rule_first_state[rule], count = g.rule_state_count[rule];
        states += count;
        if (states > kFingerprintMaxStates) too_big = true;
        put(0xFFFF0000u + static_cast<uint64_t>(count));
        for (int32_t s = first; s < first + count && !too_big; ++s) {
          const DfaState& st = g.states[s];
          put(st.final ? 1 : 2);
          put(st.edge_end - st.edge_begin);
          for (uint32_t e = st.edge_begin; e < st.edge_end; ++e) {
            put((static_cast<uint64_t>(g.edges[e].lo) << 8) | g.edges[e].hi);
            put(static_cast<uint64_t>(g.edges[e].target - first));
          }
          put(st.ref_end - st.ref_begin);
          for (uint32_t k = st.ref_begin; k < st.ref_end; ++k) {
            int32_t callee = g.refs[k].rule;
            auto [it, inserted] = local.emplace(callee, static_cast<int32_t>(order.size()));
            if (inserted) order.push_back(callee);
            put(static_cast<uint64_t>(it->second));
            put(static_cast<uint64_t>(g.refs[k].target - first));
          }
        }
      }
      if (!too_big && (lo | hi) != 0) {
        g.rule_fp_lo[r] = lo;
        g.rule_fp_hi[r] = hi;
      }
    }
  }

  const GbnfAst& ast_;
  const GrammarLimits& limits_;
  Grammar* g_ = nullptr;
  std::vector<bool> recursive_;
  std::unordered_map<int32_t, bool> inline_;
  int inline_depth_ = 0;
  int64_t state_cap_ = 0;  // NFA states allowed: max_states, or the inlining cap while measuring
  std::unordered_map<int32_t, int32_t> compiled_;
  std::vector<int32_t> ast_of_compiled_;
  std::deque<int32_t> pending_;
  std::vector<NfaState> nfa_;
  bool overflow_ = false;
  int64_t work_ = 0;  // determinization steps so far (GrammarLimits::max_compile_work)
  std::unordered_map<int32_t, std::vector<std::vector<ByteRange>>> class_seqs_;
  std::vector<int32_t> mark_;
  int32_t mark_gen_ = 1;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits) {
  LL_ASSIGN_OR_RETURN(GbnfAst ast, ParseGbnfAst(text, limits));
  return Compiler(ast, limits).Run();
}

GrammarStats GetGrammarStats(const Grammar& grammar) {
  GrammarStats s;
  s.rules = static_cast<int32_t>(grammar.rule_names.size());
  s.states = static_cast<int32_t>(grammar.states.size());
  return s;
}

}  // namespace lifeline::grammar

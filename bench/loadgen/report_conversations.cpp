// The conversations section of a bench report (WorkloadSpec::conversations): per target and
// step, the TTFT of first turns (nothing of the conversation cached yet) against that of
// returning turns, and how much of the returning turns' prompts the server served from its
// prefix cache (timings.tokens.cached) and, of that, restored from a tier below its KV pool
// (timings.tokens.restored: Lifeline's docs/prefix-cache.md). Servers that report no token
// counts show "-".
#include <cmath>
#include <vector>

#include "bench/loadgen/report.h"
#include "bench/loadgen/stats.h"

namespace lifeline::loadgen {
namespace {

int64_t TokensField(const nlohmann::json& timings, const char* key) {
  if (!timings.is_object()) return -1;
  auto t = timings.find("tokens");
  if (t == timings.end() || !t->is_object()) return -1;
  auto v = t->find(key);
  return v != t->end() && v->is_number_integer() ? v->get<int64_t>() : -1;
}

}  // namespace

std::vector<ConversationRow> ConversationRows(const ReportInputs& in) {
  std::vector<ConversationRow> rows;
  const RunOptions& o = *in.options;
  const int64_t users = o.workload.conversations;
  if (users <= 0) return rows;
  for (size_t s = 0; s < in.run->steps.size(); ++s) {
    for (size_t k = 0; k < o.targets.size(); ++k) {
      if (!in.run->steps[s].targets[k].ran) continue;
      ConversationRow row;
      row.step = static_cast<int>(s);
      row.target = static_cast<int>(k);
      std::vector<double> first, later;
      int64_t prompt = 0, cached = 0, restored = 0;
      bool counted = false;
      for (const RequestRecord& r : in.run->records) {
        if (r.step != row.step || r.target != row.target || !r.ok()) continue;
        const double ttft = TtftOrE2e(r);
        if (r.index / users == 0) {
          first.push_back(ttft);
          continue;
        }
        later.push_back(ttft);
        row.max_turn = std::max(row.max_turn, r.index / users);
        const int64_t p = TokensField(r.x.timings, "prompt"), c = TokensField(r.x.timings, "cached");
        if (p > 0 && c >= 0) {
          counted = true;
          prompt += p;
          cached += c;
          restored += std::max<int64_t>(0, TokensField(r.x.timings, "restored"));
        }
      }
      row.first_turns = static_cast<int64_t>(first.size());
      row.returning_turns = static_cast<int64_t>(later.size());
      row.first = Summarize(first);
      row.returning = Summarize(later);
      if (counted) {
        row.returning_prompt_tokens = prompt;
        row.cached_share = static_cast<double>(cached) / static_cast<double>(prompt);
        row.restored_share = static_cast<double>(restored) / static_cast<double>(prompt);
      }
      rows.push_back(row);
    }
  }
  return rows;
}

std::string ConversationsMarkdown(const ReportInputs& in, const std::vector<ConversationRow>& rows) {
  if (rows.empty()) return "";
  const RunOptions& o = *in.options;
  std::string md = "\n## Conversations\n\n";
  const std::string history =
      o.workload.agent_tool_words > 0
          ? "an agent loop: its task, then per earlier step a tool call and a synthetic " +
                std::to_string(o.workload.agent_tool_words) + "-word tool result"
          : "synthetic " + std::to_string(o.workload.reply_words) + "-word replies in the history";
  md += std::to_string(o.workload.conversations) + " users, each a growing conversation (a " +
        std::to_string(o.workload.system_words) + "-word shared system text, " + history + ", " +
        FormatMs(o.workload.think_time_ms) +
        " ms think time). Returning turns resend the whole history: their TTFT shows what the "
        "server's prefix cache saves. Cached / restored: shares of the returning turns' prompt "
        "tokens the server reported as served from its cache / restored from a tier below its "
        "KV pool.\n\n";
  md += "| load | target | first turns | TTFT P50 | TTFT P95 | returning turns | TTFT P50 | TTFT P95 | "
        "cached | restored |\n";
  md += "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ConversationRow& r : rows) {
    const double load = in.run->steps[static_cast<size_t>(r.step)].load;
    auto share = [](double v) {
      return std::isfinite(v) ? FormatShare(static_cast<int64_t>(std::llround(v * 1000)), 1000)
                              : std::string("-");
    };
    md += "| " + LoadName(o.mode, load) + " | " +
          TableCell(o.targets[static_cast<size_t>(r.target)].label) + " | " +
          std::to_string(r.first_turns) + " | " + FormatMs(r.first.p50) + " | " +
          FormatMs(r.first.p95) + " | " + std::to_string(r.returning_turns) + " | " +
          FormatMs(r.returning.p50) + " | " + FormatMs(r.returning.p95) + " | " +
          share(r.cached_share) + " | " + share(r.restored_share) + " |\n";
  }
  return md;
}

nlohmann::json ConversationsJson(const std::vector<ConversationRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const ConversationRow& r : rows) {
    out.push_back({{"step", r.step},
                   {"target", r.target},
                   {"first_turns", r.first_turns},
                   {"returning_turns", r.returning_turns},
                   {"max_turn", r.max_turn},
                   {"first_ttft_ms", {{"p50", num(r.first.p50)}, {"p95", num(r.first.p95)}}},
                   {"returning_ttft_ms",
                    {{"p50", num(r.returning.p50)}, {"p95", num(r.returning.p95)}}},
                   {"returning_prompt_tokens", r.returning_prompt_tokens},
                   {"cached_share", num(r.cached_share)},
                   {"restored_share", num(r.restored_share)}});
  }
  return out;
}

}  // namespace lifeline::loadgen

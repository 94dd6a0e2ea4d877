#include "bench/loadgen/workload.h"

#include <algorithm>
#include <fstream>

#include "bench/loadgen/retrieval_answer.h"

namespace lifeline::loadgen {

namespace {

// An agent's tool call in PlannedRequest::messages (its text: the call's arguments as JSON);
// RequestBody writes it as an assistant message with tool_calls.
constexpr std::string_view kToolCallRole = "tool_call";

// Plain words that most tokenizers (including small story-model vocabularies) split into few
// tokens, so a word count stays a rough proxy for a token count.
constexpr const char* kWords[] = {
    "once", "upon", "a", "time", "there", "was", "little", "girl", "named", "lily", "she",
    "liked", "to", "play", "in", "the", "park", "with", "her", "dog", "one", "day", "they",
    "saw", "big", "red", "ball", "and", "ran", "after", "it", "mom", "said", "be", "careful",
    "sun", "was", "warm", "boy", "tom", "found", "box", "of", "toys", "he", "shared", "them",
    "friend", "happy", "tree", "bird", "sang", "song", "cat", "sat", "on", "mat", "went",
    "home", "ate", "cake", "slept", "night", "moon"};
constexpr int64_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<TargetSpec> ParseTargetSpec(const std::string& flag, const std::string& text) {
  TargetSpec t;
  t.text = text;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  LL_ASSIGN_OR_RETURN(t.url, net::ParseHttpUrl(parts[0], flag));
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == parts[i].size()) {
      return InvalidArgument(flag + " '" + text + "': '" + parts[i] +
                             "' is not KEY=VALUE (keys: model, label, params, quant, hw)");
    }
    const std::string key = parts[i].substr(0, eq);
    const std::string value = parts[i].substr(eq + 1);
    if (key == "model") t.model = value;
    else if (key == "label") t.label = value;
    else if (key == "params") t.params = value;
    else if (key == "quant") t.quant = value;
    else if (key == "hw") t.hardware = value;
    else {
      return InvalidArgument(flag + " '" + text + "': unknown key '" + key +
                             "' (keys: model, label, params, quant, hw)");
    }
  }
  if (t.label.empty()) t.label = t.url.host + ":" + t.url.PortText();
  return t;
}

const char* ApiName(Api api) {
  switch (api) {
    case Api::kCompletions: return "completions";
    case Api::kChat: return "chat";
    case Api::kEmbeddings: return "embeddings";
    case Api::kRerank: break;
  }
  return "rerank";
}

Result<Api> ParseApi(const std::string& flag, const std::string& text) {
  for (Api api : {Api::kCompletions, Api::kChat, Api::kEmbeddings, Api::kRerank}) {
    if (text == ApiName(api)) return api;
  }
  return InvalidArgument(flag + " '" + text +
                         "': expected completions, chat, embeddings or rerank");
}

bool IsRetrievalApi(Api api) { return api == Api::kEmbeddings || api == Api::kRerank; }

int64_t BatchInputs(const WorkloadSpec& w) { return w.batch_inputs.value_or(kDefaultBatchInputs); }
int64_t Documents(const WorkloadSpec& w) { return w.documents.value_or(kDefaultDocuments); }
int64_t DocumentWords(const WorkloadSpec& w) {
  return w.document_words.value_or(kDefaultDocumentWords);
}
bool RequestsBase64(const WorkloadSpec& w) { return w.encoding_format == "base64"; }

Status ValidateThinking(const std::string& where, const ThinkingParams& t) {
  if (t.budget_tokens && (*t.budget_tokens < -1 || *t.budget_tokens > 2147483647)) {
    return InvalidArgument(where + ": thinking budget " + std::to_string(*t.budget_tokens) +
                           " is out of range: -1 (unlimited), 0 (no thinking) or up to "
                           "2147483647 tokens");
  }
  const std::string& e = t.reasoning_effort;
  if (!e.empty() && e != "minimal" && e != "low" && e != "medium" && e != "high") {
    return InvalidArgument(where + ": reasoning effort '" + e +
                           "': expected minimal, low, medium or high");
  }
  return Status::Ok();
}

namespace {

Status CheckRange(const char* flag, const std::optional<int64_t>& v, int64_t hi) {
  if (!v || (*v >= 1 && *v <= hi)) return Status::Ok();
  return InvalidArgument(std::string(flag) + ": " + std::to_string(*v) + " outside [1, " +
                         std::to_string(hi) + "]");
}

// A retrieval flag belongs to one API: given with another, it would silently do nothing.
Status CheckFlagApi(const char* flag, bool given, Api api, const WorkloadSpec& w) {
  if (!given || w.api == api) return Status::Ok();
  return InvalidArgument(std::string(flag) + ": applies to --api " + ApiName(api) +
                         ", not --api " + ApiName(w.api));
}

// The retrieval flags, and the generation settings a retrieval request cannot carry.
Status ValidateRetrieval(const WorkloadSpec& w) {
  const Api emb = Api::kEmbeddings;
  const Api rerank = Api::kRerank;
  LL_RETURN_IF_ERROR(CheckFlagApi("--batch-inputs", w.batch_inputs.has_value(), emb, w));
  LL_RETURN_IF_ERROR(CheckFlagApi("--encoding-format", !w.encoding_format.empty(), emb, w));
  LL_RETURN_IF_ERROR(CheckFlagApi("--documents", w.documents.has_value(), rerank, w));
  LL_RETURN_IF_ERROR(CheckFlagApi("--document-words", w.document_words.has_value(), rerank, w));
  LL_RETURN_IF_ERROR(CheckRange("--batch-inputs", w.batch_inputs, kMaxBatchInputs));
  LL_RETURN_IF_ERROR(CheckRange("--documents", w.documents, kMaxDocuments));
  LL_RETURN_IF_ERROR(CheckRange("--document-words", w.document_words, kMaxDocumentWords));
  const std::string& enc = w.encoding_format;
  if (!enc.empty() && enc != "float" && enc != "base64") {
    return InvalidArgument("--encoding-format '" + w.encoding_format +
                           "': expected float or base64");
  }
  if (!IsRetrievalApi(w.api)) return Status::Ok();
  const std::string api = std::string("--api ") + ApiName(w.api);
  if (w.conversations > 0) {
    return InvalidArgument("--conversations: chat turns; " + api + " sends independent requests");
  }
  if (w.ignore_eos) {
    return InvalidArgument("--ignore-eos: a generation field; " + api + " generates nothing");
  }
  if (!w.stream) return InvalidArgument("--no-stream: " + api + " answers never stream; drop it");
  if (!w.include_usage) {
    return InvalidArgument("--no-usage: " + api + " answers never stream; drop it");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateWorkload(const WorkloadSpec& w) {
  LL_RETURN_IF_ERROR(ValidateRetrieval(w));
  if (w.conversations < 0 || w.conversations > 100000) {
    return InvalidArgument("--conversations: " + std::to_string(w.conversations) +
                           " outside [0, 100000]");
  }
  if (!(w.think_time_ms >= 0) || w.think_time_ms > 3600e3) {
    return InvalidArgument("--think-time-ms: outside [0, 3600000]");
  }
  if (w.system_words < 0 || w.system_words > 100000 || w.reply_words < 0 ||
      w.reply_words > 100000) {
    return InvalidArgument("--system-words / --reply-words: outside [0, 100000]");
  }
  if (w.agent_tool_words < 0 || w.agent_tool_words > 100000) {
    return InvalidArgument("--agent-tool-words: " + std::to_string(w.agent_tool_words) +
                           " outside [0, 100000]");
  }
  if (w.agent_tool_words > 0 && w.conversations == 0) {
    return InvalidArgument("--agent-tool-words: agents are conversations; add --conversations N");
  }
  if (w.conversations > 0 && !w.prompts.empty()) {
    return InvalidArgument("--conversations: generates its own prompts; drop --prompts");
  }
  LL_RETURN_IF_ERROR(ValidateThinking("--thinking-budget / --reasoning-effort", w.thinking));
  if (!w.prompt_thinking.empty() && w.prompt_thinking.size() != w.prompts.size()) {
    return InvalidArgument("--prompts: " + std::to_string(w.prompt_thinking.size()) +
                           " thinking entries for " + std::to_string(w.prompts.size()) +
                           " prompts");
  }
  if (w.api == Api::kChat) return Status::Ok();
  if (w.thinking.any()) {
    return InvalidArgument("--thinking-budget / --reasoning-effort: chat fields; add --api chat "
                           "(servers refuse them on completions)");
  }
  for (const ThinkingParams& t : w.prompt_thinking) {
    if (t.any()) {
      return InvalidArgument("--prompts: a line sets thinking_budget_tokens or "
                             "reasoning_effort, chat fields; add --api chat");
    }
  }
  return Status::Ok();
}

namespace {

std::string Words(Rng& rng, int64_t n) {
  std::string s;
  s.reserve(static_cast<size_t>(n) * 6);
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) s += ' ';
    s += kWords[rng.UniformInt(0, kNumWords - 1)];
  }
  return s;
}

// Turn `turn` of user `user`: the same text for every target and every later turn that
// repeats it (each piece has its own seed), so a server's prefix cache can serve the history.
PlannedRequest PlanTurn(const WorkloadSpec& w, uint64_t seed, int step, int64_t user,
                        int64_t turn) {
  PlannedRequest r;
  r.user = user;
  r.turn = turn;
  Rng sys_rng(MixSeed(seed, static_cast<uint64_t>(step), 0x5157));
  r.messages.emplace_back("system", "You are a helpful assistant. " + Words(sys_rng, w.system_words));
  if (w.agent_tool_words > 0) {
    // An agent: the task, then one tool call and its result per earlier step.
    Rng task_rng(MixSeed(seed, static_cast<uint64_t>(user) * 1000003 + 11, 0));
    r.messages.emplace_back("user", "User " + std::to_string(user) + " task: " +
                                        Words(task_rng, w.prompt_words.Sample(task_rng)));
    for (int64_t t = 0; t < turn; ++t) {
      Rng call_rng(MixSeed(seed, static_cast<uint64_t>(user) * 1000003 + 19, static_cast<uint64_t>(t)));
      r.messages.emplace_back(std::string(kToolCallRole),
                              nlohmann::json({{"query", Words(call_rng, 3)}}).dump());
      Rng result_rng(MixSeed(seed, static_cast<uint64_t>(user) * 1000003 + 23, static_cast<uint64_t>(t)));
      r.messages.emplace_back("tool", "Result: " + Words(result_rng, w.agent_tool_words));
    }
  }
  for (int64_t t = 0; t <= turn && w.agent_tool_words == 0; ++t) {
    Rng user_rng(MixSeed(seed, static_cast<uint64_t>(user) * 1000003 + 11, static_cast<uint64_t>(t)));
    r.messages.emplace_back("user", "User " + std::to_string(user) + " turn " + std::to_string(t) +
                                        ": " + Words(user_rng, w.prompt_words.Sample(user_rng)));
    if (t == turn) break;
    Rng reply_rng(MixSeed(seed, static_cast<uint64_t>(user) * 1000003 + 13, static_cast<uint64_t>(t)));
    r.messages.emplace_back("assistant", Words(reply_rng, w.reply_words));
  }
  Rng out_rng(MixSeed(seed, static_cast<uint64_t>(user) * 1000003 + 17, static_cast<uint64_t>(turn)));
  r.max_tokens = w.output_tokens.Sample(out_rng);
  r.thinking = w.thinking;
  for (const auto& [role, text] : r.messages) {
    r.prompt += (r.prompt.empty() ? "" : "\n") + role + ": " + text;
  }
  if (w.api == Api::kCompletions) r.prompt += "\nassistant:";
  r.prompt_words = CountWords(r.prompt);
  return r;
}

// A prompt: drawn from --prompts when given, else generated words of --prompt-len.
std::string DrawPrompt(const WorkloadSpec& w, Rng& rng) {
  if (w.prompts.empty()) return Words(rng, w.prompt_words.Sample(rng));
  const int64_t last = static_cast<int64_t>(w.prompts.size()) - 1;
  return w.prompts[static_cast<size_t>(rng.UniformInt(0, last))];
}

// An embeddings request's inputs, or a rerank request's query and documents, from the request's
// own seed like any other request.
PlannedRequest PlanRetrieval(const WorkloadSpec& w, Rng& rng) {
  PlannedRequest r;
  if (w.api == Api::kEmbeddings) {
    for (int64_t i = 0; i < BatchInputs(w); ++i) r.inputs.push_back(DrawPrompt(w, rng));
  } else {
    r.prompt = DrawPrompt(w, rng);
    r.prompt_words = CountWords(r.prompt);
    for (int64_t i = 0; i < Documents(w); ++i) r.inputs.push_back(Words(rng, DocumentWords(w)));
  }
  for (const std::string& in : r.inputs) r.prompt_words += CountWords(in);
  return r;
}

}  // namespace

PlannedRequest PlanRequest(const WorkloadSpec& w, uint64_t seed, int step, int64_t index) {
  if (IsRetrievalApi(w.api)) {
    Rng rng(MixSeed(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(index)));
    PlannedRequest r = PlanRetrieval(w, rng);
    r.index = index;
    return r;
  }
  if (w.conversations > 0) {
    PlannedRequest r = PlanTurn(w, seed, step, index % w.conversations, index / w.conversations);
    r.index = index;
    return r;
  }
  Rng rng(MixSeed(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(index)));
  PlannedRequest r;
  r.index = index;
  r.max_tokens = w.output_tokens.Sample(rng);
  r.thinking = w.thinking;
  if (!w.prompts.empty()) {
    const size_t pick =
        static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(w.prompts.size()) - 1));
    r.prompt = w.prompts[pick];
    r.prompt_words = CountWords(r.prompt);
    if (pick < w.prompt_thinking.size()) {
      const ThinkingParams& own = w.prompt_thinking[pick];
      if (own.budget_tokens) r.thinking.budget_tokens = own.budget_tokens;
      if (!own.reasoning_effort.empty()) r.thinking.reasoning_effort = own.reasoning_effort;
    }
    return r;
  }
  r.prompt_words = w.prompt_words.Sample(rng);
  r.prompt.reserve(static_cast<size_t>(r.prompt_words) * 6);
  for (int64_t i = 0; i < r.prompt_words; ++i) {
    if (i > 0) r.prompt += ' ';
    r.prompt += kWords[rng.UniformInt(0, kNumWords - 1)];
  }
  return r;
}

bool RequestsStream(const WorkloadSpec& w) {
  if (IsRetrievalApi(w.api)) return false;
  if (w.extra_body.is_object()) {
    auto it = w.extra_body.find("stream");
    if (it != w.extra_body.end() && it->is_boolean()) return it->get<bool>();
  }
  return w.stream;
}

namespace {

// The fields every body may end with: the SLO class and role when asked, then --extra-body.
void FinishBody(const WorkloadSpec& w, nlohmann::json* body) {
  if (w.slo_in_body && !w.slo_class.empty()) (*body)["slo_class"] = w.slo_class;
  if (w.slo_in_body && !w.user_role.empty()) (*body)["user_role"] = w.user_role;
  if (w.extra_body.is_object()) {
    for (auto it = w.extra_body.begin(); it != w.extra_body.end(); ++it) (*body)[it.key()] = *it;
  }
}

// Embeddings: the inputs always as an array (every server takes one, and a batch of 1 is then
// the same request shape as a batch of 8); rerank: the query and the documents as strings.
std::string RetrievalBody(const WorkloadSpec& w, const TargetSpec& target,
                          const PlannedRequest& r) {
  nlohmann::json body = nlohmann::json::object();
  if (!target.model.empty()) body["model"] = target.model;
  if (w.api == Api::kEmbeddings) {
    body["input"] = r.inputs;
    body["encoding_format"] = RequestsBase64(w) ? "base64" : "float";
  } else {
    body["query"] = r.prompt;
    body["documents"] = r.inputs;
  }
  FinishBody(w, &body);
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The results a rerank answer must hold: every document, or --extra-body's top_n when that is
// smaller.
int64_t ExpectedRerankResults(const WorkloadSpec& w, int64_t documents) {
  if (!w.extra_body.is_object()) return documents;
  auto it = w.extra_body.find("top_n");
  if (it == w.extra_body.end() || !it->is_number_integer() || it->get<int64_t>() < 1) {
    return documents;
  }
  return std::min(documents, it->get<int64_t>());
}

BodyCheckFn AnswerCheck(const WorkloadSpec& w, const PlannedRequest& r) {
  const int64_t n = static_cast<int64_t>(r.inputs.size());
  if (w.api == Api::kEmbeddings) {
    const bool base64 = RequestsBase64(w);
    return [n, base64](HttpExchange* x) { return CheckEmbeddingsAnswer(n, base64, x); };
  }
  const int64_t results = ExpectedRerankResults(w, n);
  return [n, results](HttpExchange* x) { return CheckRerankAnswer(n, results, x); };
}

const char* ApiPath(Api api) {
  switch (api) {
    case Api::kCompletions: return "/v1/completions";
    case Api::kChat: return "/v1/chat/completions";
    case Api::kEmbeddings: return "/v1/embeddings";
    case Api::kRerank: break;
  }
  return "/v1/rerank";
}

}  // namespace

std::string RequestBody(const WorkloadSpec& w, const TargetSpec& target, const PlannedRequest& r) {
  if (IsRetrievalApi(w.api)) return RetrievalBody(w, target, r);
  nlohmann::json body = nlohmann::json::object();
  if (!target.model.empty()) body["model"] = target.model;
  if (w.api == Api::kChat && !r.messages.empty()) {
    body["messages"] = nlohmann::json::array();
    // An agent's steps: call k is "call_k", and its result answers it (tool_call_id).
    int calls = 0;
    for (const auto& [role, text] : r.messages) {
      if (role == kToolCallRole) {
        const std::string id = "call_" + std::to_string(calls++);
        body["messages"].push_back(
            {{"role", "assistant"},
             // "" rather than null: chat templates that concatenate content (ChatML's among
             // them) fail on None; OpenAI-compatible servers accept both.
             {"content", ""},
             {"tool_calls", {{{"id", id}, {"type", "function"},
                              {"function", {{"name", "lookup"}, {"arguments", text}}}}}}});
      } else if (role == "tool") {
        body["messages"].push_back(
            {{"role", "tool"}, {"tool_call_id", "call_" + std::to_string(calls - 1)}, {"content", text}});
      } else {
        body["messages"].push_back({{"role", role}, {"content", text}});
      }
    }
    if (w.agent_tool_words > 0) {
      body["tools"] = {{{"type", "function"},
                        {"function",
                         {{"name", "lookup"},
                          {"description", "Looks a query up and returns what it finds."},
                          {"parameters",
                           {{"type", "object"},
                            {"properties", {{"query", {{"type", "string"}}}}},
                            {"required", {"query"}}}}}}}};
    }
  } else if (w.api == Api::kChat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
  } else {
    body["prompt"] = r.prompt;
  }
  body["max_tokens"] = r.max_tokens;
  const bool stream = RequestsStream(w);
  body["stream"] = stream;
  // Servers such as vLLM reject stream_options on a request that does not stream.
  if (stream && w.include_usage) body["stream_options"] = {{"include_usage", true}};
  if (w.ignore_eos) body["ignore_eos"] = true;
  if (r.thinking.budget_tokens) body["thinking_budget_tokens"] = *r.thinking.budget_tokens;
  if (!r.thinking.reasoning_effort.empty()) body["reasoning_effort"] = r.thinking.reasoning_effort;
  FinishBody(w, &body);
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpRequestSpec RequestSpec(const WorkloadSpec& w, const TargetSpec& target,
                            const PlannedRequest& r, double timeout_s) {
  HttpRequestSpec s;
  s.method = "POST";
  s.url = target.url;
  s.path = ApiPath(w.api);
  s.timeout_s = timeout_s;
  s.body = RequestBody(w, target, r);
  if (IsRetrievalApi(w.api)) {
    s.check_body = AnswerCheck(w, r);
    s.max_body_kept_bytes = kMaxRetrievalBodyBytes;
  }
  s.headers.emplace_back("Accept", RequestsStream(w) ? "text/event-stream" : "application/json");
  if (!w.api_key.empty()) s.headers.emplace_back("Authorization", "Bearer " + w.api_key);
  if (!w.slo_class.empty()) s.headers.emplace_back("X-SLO-Class", w.slo_class);
  if (!w.user_role.empty()) s.headers.emplace_back("X-User-Role", w.user_role);
  // A conversation's turns say which conversation they belong to, so a balancer can keep them
  // on one replica (scripts/replicas.sh --session-affinity).
  if (r.user >= 0) s.headers.emplace_back("X-Session-Id", "bench-user-" + std::to_string(r.user));
  for (const auto& h : w.headers) s.headers.push_back(h);
  return s;
}

Result<std::vector<std::string>> LoadPromptsFile(const std::string& path,
                                                 std::vector<ThinkingParams>* thinking) {
  constexpr size_t kMaxPrompts = 1'000'000;
  std::ifstream in(path);
  if (!in) return NotFound("--prompts '" + path + "': cannot open");
  std::vector<std::string> out;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = Trim(line);
    if (t.empty()) continue;
    if (t.front() == '{') {
      const nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
      std::string prompt;
      for (const char* key : {"prompt", "text"}) {
        if (j.is_object() && j.contains(key) && j[key].is_string()) {
          prompt = j[key].get<std::string>();
          break;
        }
      }
      const std::string where = "--prompts '" + path + "' line " + std::to_string(line_no);
      if (prompt.empty()) {
        return InvalidArgument(where + ": JSON line needs a non-empty string \"prompt\" or \"text\"");
      }
      ThinkingParams own;
      if (auto b = j.find("thinking_budget_tokens"); b != j.end()) {
        if (!b->is_number_integer()) {
          return InvalidArgument(where + ": \"thinking_budget_tokens\" must be an integer");
        }
        own.budget_tokens = b->get<int64_t>();
      }
      if (auto e = j.find("reasoning_effort"); e != j.end()) {
        if (!e->is_string()) return InvalidArgument(where + ": \"reasoning_effort\" must be a string");
        own.reasoning_effort = e->get<std::string>();
      }
      LL_RETURN_IF_ERROR(ValidateThinking(where, own));
      out.push_back(std::move(prompt));
      if (thinking != nullptr) thinking->push_back(std::move(own));
    } else {
      out.push_back(t);
      if (thinking != nullptr) thinking->emplace_back();
    }
    if (out.size() > kMaxPrompts) {
      return InvalidArgument("--prompts '" + path + "': more than 1000000 prompts");
    }
  }
  if (in.bad()) return IoError("--prompts '" + path + "': read error");
  if (out.empty()) return InvalidArgument("--prompts '" + path + "': no prompts in the file");
  return out;
}

int64_t CountWords(const std::string& text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

Result<std::pair<std::string, std::string>> ParseHeader(const std::string& flag,
                                                       const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(flag + " '" + text + "': expected 'NAME: VALUE'");
  }
  const std::string name = Trim(text.substr(0, colon));
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return InvalidArgument(flag + " '" + text + "': bad character in header name");
  }
  const std::string value = Trim(text.substr(colon + 1));
  for (char c : value) {
    if (c == '\r' || c == '\n') return InvalidArgument(flag + " '" + text + "': line break in value");
  }
  return std::make_pair(name, value);
}

}  // namespace lifeline::loadgen

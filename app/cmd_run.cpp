// lifeline run: load a model, encode a prompt, prefill it in one batch, then sample and
// stream text until -n tokens, an end-of-generation token or the context limit. With --chat
// the prompt is a user message (after an optional --system one) rendered through the model's
// chat template and encoded exactly as `lifeline serve` encodes a chat request.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli_common.h"
#include "app/commands.h"
#include "engine/kernels/compute_pool.h"
#include "engine/model/llama_context.h"
#include "engine/sampler/sampler.h"
#include "text/template/chat.h"
#include "serving/chat_setup.h"

namespace lifeline::app {
namespace {

struct RunFlags {
  std::string model_path;
  std::string prompt;
  int32_t n_predict = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int64_t seed = -1;
  int64_t n_ctx = 0;
  bool ignore_eos = false;
  bool json = false;
  int logits_top = 0;
  bool no_bos = false;
  bool chat = false;
  std::string system;  // --system: the system message of a --chat prompt ("" = none)
  serving::ChatTemplateChoice chat_template;
  bool mlock = false;
  bool quiet = false;
  EngineFlags engine;  // -t, --isa, --kv-type, --pin / --cpus
};

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One reference-shaped position record: top-k [id, logit] pairs plus the sums over the
// whole vocabulary (the same fields as ../shared/reference/logits/*.json).
nlohmann::json PositionRecord(int64_t pos, const float* logits, int64_t n_vocab, int k) {
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) ids[i] = static_cast<int32_t>(i);
  const int64_t kk = std::min<int64_t>(k, n_vocab);
  std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double sum = 0, sumsq = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    sum += logits[i];
    sumsq += static_cast<double>(logits[i]) * logits[i];
  }
  nlohmann::json top = nlohmann::json::array();
  for (int64_t i = 0; i < kk; ++i) top.push_back({ids[i], logits[ids[i]]});
  return {{"pos", pos}, {"logit_sum", sum}, {"logit_sumsq", sumsq}, {"top", top}};
}

int Fail(const Status& s) {
  std::fprintf(stderr, "lifeline run: %s\n", s.ToString().c_str());
  return 1;
}

// The chat flags only mean something together; refused before the (slow) model load.
Status CheckChatFlags(const RunFlags& f) {
  if (!f.chat) {
    if (!f.system.empty()) return InvalidArgument("--system: needs --chat");
    if (!f.chat_template.preset.empty()) return InvalidArgument("--chat-template: needs --chat");
    if (!f.chat_template.file.empty()) return InvalidArgument("--chat-template-file: needs --chat");
    return Status::Ok();
  }
  if (f.no_bos) {
    // The server's rule decides BOS for a chat prompt (one, unless the template's text already
    // starts with it); dropping it would make the prompt differ from what serve feeds the model.
    return InvalidArgument("--no-bos: cannot be used with --chat (the chat template decides BOS)");
  }
  return CheckChatTemplateChoice(f.chat_template);
}

// The --chat prompt: [system,] user rendered with the generation prompt opened, then encoded
// by serve's rule (special-token text parsed, no second BOS).
Result<std::vector<int32_t>> EncodeChat(const RunFlags& f, const LlamaModel& model,
                                        const Tokenizer& tok) {
  LL_ASSIGN_OR_RETURN(serving::ResolvedChatTemplate resolved,
                      serving::ResolveChatTemplate(model.file(), tok, f.chat_template));
  if (!f.quiet) {
    std::fprintf(stderr, "lifeline run: chat template: %s\n",
                 serving::DescribeChatTemplate(resolved.tmpl).c_str());
    if (!resolved.fallback_note.empty()) {
      std::fprintf(stderr, "lifeline run: note: %s\n", resolved.fallback_note.c_str());
    }
  }
  chat::ChatInput input;
  if (!f.system.empty()) {
    input.messages.push_back({{"role", "system"}, {"content", f.system}});
  }
  input.messages.push_back({{"role", "user"}, {"content", f.prompt}});
  input.add_generation_prompt = true;
  auto text = resolved.tmpl.Render(input);
  if (!text.ok()) return InvalidArgument("--chat: " + text.status().message());
  return serving::EncodeChatPrompt(tok, resolved.tmpl, *text);
}

int RunCommand(const RunFlags& f) {
  SamplerParams sp;
  sp.temperature = f.temperature;
  sp.top_k = f.top_k;
  sp.top_p = f.top_p;
  sp.min_p = f.min_p;
  sp.repeat_penalty = f.repeat_penalty;
  sp.seed = f.seed < 0 ? kSamplerRandomSeed : static_cast<uint64_t>(f.seed);
  if (Status s = ValidateSamplerParams(sp); !s.ok()) return Fail(s);
  if (f.n_predict < 0) return Fail(InvalidArgument("-n: must be >= 0, got " + std::to_string(f.n_predict)));
  if (f.logits_top < 0) return Fail(InvalidArgument("--logits-top: must be >= 0"));
  if (Status s = CheckChatFlags(f); !s.ok()) return Fail(s);

  // Flags are checked before the (slow) model load.
  auto engine = ResolveEngineFlags(f.engine);
  if (!engine.ok()) return Fail(engine.status());
  const auto t_load = Clock::now();
  auto loaded = LoadModel(f.model_path, *engine->kernels, f.mlock);
  if (!loaded.ok()) return Fail(loaded.status());
  const LlamaModel& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  const double load_ms = MsSince(t_load);

  std::vector<int32_t> prompt;
  if (f.chat) {
    auto chat_prompt = EncodeChat(f, model, tok);
    if (!chat_prompt.ok()) return Fail(chat_prompt.status());
    prompt = std::move(*chat_prompt);
  } else {
    prompt = tok.Encode(f.prompt, tok.add_bos() && !f.no_bos, true);
  }
  if (prompt.empty()) return Fail(InvalidArgument("-p: the prompt encodes to no tokens"));

  ContextOptions copts;
  copts.n_ctx = f.n_ctx;
  copts.max_batch_tokens = std::clamp<int64_t>(static_cast<int64_t>(prompt.size()), 1, 512);
  copts.kv_type = engine->kv_type;
  auto ctx = LlamaContext::Create(model.config(), copts);
  if (!ctx.ok()) return Fail(ctx.status());
  const int64_t n_ctx = (*ctx)->n_ctx();
  if (static_cast<int64_t>(prompt.size()) > n_ctx) {
    return Fail(OutOfRange("-p: prompt is " + std::to_string(prompt.size()) +
                           " tokens, the context holds " + std::to_string(n_ctx)));
  }
  const SeqId seq = (*ctx)->NewSequence();
  ComputePool pool(engine->threads, engine->pin_cpus);
  const int64_t n_vocab = model.config().n_vocab;

  // Prefill: one batch; logits for every position only when they are printed.
  const bool all_logits = f.logits_top > 0;
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back({prompt[i], static_cast<int64_t>(i), seq,
                     all_logits || i + 1 == prompt.size()});
  }
  const int64_t n_out = all_logits ? static_cast<int64_t>(prompt.size()) : 1;
  std::vector<float> logits(static_cast<size_t>(n_out * n_vocab));  // [n_out, n_vocab]
  const auto t_prefill = Clock::now();
  if (Status s = model.Eval(batch, **ctx, pool, logits); !s.ok()) return Fail(s);
  const double prefill_ms = MsSince(t_prefill);

  nlohmann::json positions = nlohmann::json::array();
  if (all_logits) {
    for (int64_t i = 0; i < n_out; ++i) {
      positions.push_back(PositionRecord(i, logits.data() + i * n_vocab, n_vocab, f.logits_top));
    }
  }
  std::vector<float> last(logits.end() - n_vocab, logits.end());  // [n_vocab]

  Sampler sampler(sp);
  for (int32_t id : prompt) sampler.Accept(id);
  IncrementalDetokenizer detok(tok);
  std::vector<int32_t> generated;
  std::string text;
  std::string finish_reason = "length";
  const auto t_decode = Clock::now();
  for (int32_t i = 0; i < f.n_predict; ++i) {
    const int32_t id = sampler.Sample(last.data(), static_cast<int32_t>(n_vocab));
    if (!f.ignore_eos && tok.IsEndOfGeneration(id)) {
      finish_reason = "stop";
      break;
    }
    sampler.Accept(id);
    generated.push_back(id);
    const std::string piece = detok.Push(id);
    text += piece;
    if (!f.json && !piece.empty()) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    if (i + 1 == f.n_predict) break;
    const int64_t pos = static_cast<int64_t>(prompt.size() + generated.size()) - 1;
    if (pos >= n_ctx) {
      finish_reason = "context";
      break;
    }
    const BatchToken next{id, pos, seq, true};
    if (Status s = model.Eval({&next, 1}, **ctx, pool, last); !s.ok()) return Fail(s);
  }
  const std::string rest = detok.Flush();
  text += rest;
  const double decode_ms = MsSince(t_decode);

  if (f.json) {
    nlohmann::json out = {{"prompt_tokens", prompt}, {"tokens", generated}, {"text", text},
                          {"finish_reason", finish_reason}};
    if (all_logits) out["positions"] = positions;
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
  }
  if (!f.quiet) {
    const double n_gen = static_cast<double>(generated.size());
    std::fprintf(stderr,
                 "lifeline run: isa=%s threads=%d load %.1f ms | prompt %zu tokens in %.1f ms "
                 "(%.1f tok/s) | generated %zu tokens in %.1f ms (%.1f tok/s) | finish=%s\n",
                 std::string(IsaLevelName(engine->kernels->isa)).c_str(), pool.n_threads(), load_ms,
                 prompt.size(), prefill_ms, prompt.size() * 1000.0 / std::max(prefill_ms, 1e-3),
                 generated.size(), decode_ms, n_gen * 1000.0 / std::max(decode_ms, 1e-3),
                 finish_reason.c_str());
  }
  return 0;
}

}  // namespace

CommandFn RegisterRun(CLI::App& root) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = root.add_subcommand("run", "Generate text from a prompt");
  cmd->add_option("-m,--model", flags->model_path, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", flags->prompt,
                  "Prompt text (special-token text is parsed); with --chat, the user message")
      ->required();
  cmd->add_option("-n,--n-predict", flags->n_predict, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temp", flags->temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", flags->top_k, "Top-k; <= 0 disables")->capture_default_str();
  cmd->add_option("--top-p", flags->top_p, "Top-p; 1 disables")->capture_default_str();
  cmd->add_option("--min-p", flags->min_p, "Min-p; 0 disables")->capture_default_str();
  cmd->add_option("--repeat-penalty", flags->repeat_penalty, "Repetition penalty; 1 disables")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "RNG seed; -1 = random")->capture_default_str();
  AddEngineFlags(cmd, &flags->engine);
  cmd->add_option("-c,--ctx", flags->n_ctx, "Context positions (default min(train ctx, 4096))");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "Keep generating past end-of-generation tokens");
  cmd->add_flag("--json", flags->json,
                "Print one JSON object {prompt_tokens, tokens, text, positions} instead of text");
  cmd->add_option("--logits-top", flags->logits_top,
                  "With --json: the K highest logits at every prompt position");
  cmd->add_flag("--no-bos", flags->no_bos,
                "Do not add BOS even if the vocab asks for it (not with --chat)");
  cmd->add_flag("--chat", flags->chat,
                "Render -p as a user message through the chat template, as `serve` does");
  cmd->add_option("--system", flags->system, "With --chat: a system message before the user's");
  AddChatTemplateFlags(cmd, &flags->chat_template);
  cmd->add_flag("--mlock", flags->mlock, "Lock the model's pages in memory");
  cmd->add_flag("-q,--quiet", flags->quiet, "No timing summary on stderr");
  return [flags] { return RunCommand(*flags); };
}

}  // namespace lifeline::app

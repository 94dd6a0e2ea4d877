// A generation request between the moment its connection hands it to the prep pool
// (prep_pool.h: parse, validate, ServingApi::Submit) and the moment the connection handles
// what came of it. Two threads meet here: the prep thread that learns the outcome, and the
// connection's strand, which may give up on the request first (the client disconnected, a
// write stalled, the server stops). They learn of each other's side in either order; whoever
// sees both accounts for the request, so that an accepted request is counted exactly once in
// the ledger (server_metrics.h):
//
//   Deliver, then Take      the connection answers it as always (it counts it accepted)
//   Deliver, then GiveUp    GiveUp counts it accepted and cancelled, and calls Cancel
//   GiveUp, then Deliver    Deliver does the same
//   Take, then GiveUp       nothing here: the connection owns the request now
//
// A refused outcome (an error before or from Submit) was never accepted and is never counted.
//
// Ownership: shared by the prep job and the connection (shared_ptr); borrows the metrics and
// the engine, which outlive both (the prep pool is joined before they go). Thread-safety:
// every method may be called from any thread (one mutex). Failure: none.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "api/api_translation.h"
#include "api/choice_assembler.h"
#include "api/serving_api.h"
#include "api/server_metrics.h"

namespace lifeline::api {

// What the prep pool hands back for a generation request: refused (before or by Submit;
// nothing was accepted) or accepted, with what the answer needs to know.
struct PrepOutcome {
  std::optional<ApiError> error;
  SubmitResult submitted;                         // accepted when !error
  std::chrono::steady_clock::time_point validated{};  // body parsed; Submit followed at once
  bool stream = false;
  bool include_usage = false;
  AssemblerOptions assembler;  // ctx.model: the model that serves it
  // For the request log: the model asked for (resolved), the class it was judged under (the
  // one it asked for when it was refused before Submit resolved it), its role.
  std::string requested_model;
  std::string slo_class;
  std::string user_role;
  // The answer's translation when it depends on the request (POST /v1/embeddings, /v1/rerank:
  // dimensions, encoding, top_n, the documents; embeddings_api.h), made where the body was
  // parsed; null when the connection's own (MakeApiTranslation) serves.
  std::unique_ptr<ApiTranslation> translation;
  bool accepted() const { return !error.has_value(); }
};

class PendingSubmit {
 public:
  PendingSubmit(ServerMetrics& metrics, ServingApi& engine) : metrics_(metrics), engine_(engine) {}
  PendingSubmit(const PendingSubmit&) = delete;
  PendingSubmit& operator=(const PendingSubmit&) = delete;

  // Prep thread: the outcome is known. True: the connection should be told (it will Take);
  // false: it gave up first, and the outcome has been accounted for here.
  bool Deliver(PrepOutcome outcome);
  // Connection: the outcome, unless it has not arrived or the connection already gave up.
  // After a Take nothing is accounted here any more.
  std::optional<PrepOutcome> Take();
  // Connection: the client is gone or the server stops. An outcome that already arrived is
  // accounted now; otherwise Deliver will. Idempotent (the first reason counts).
  void GiveUp(CancelReason reason);
  // Prep thread, before starting: true once the connection gave up, so the request's work
  // (parse, template, tokens, schema) need not be done at all. A false answer may be stale
  // by the time the work ends; Deliver still accounts for that.
  bool GivenUp() const;

 private:
  // An accepted request whose client the connection gave up on: accepted, then cancelled
  // for `reason`, and the engine told once.
  void AccountAbandoned(const PrepOutcome& outcome, CancelReason reason);

  ServerMetrics& metrics_;
  ServingApi& engine_;
  mutable std::mutex mu_;
  std::optional<PrepOutcome> outcome_;  // delivered, not yet taken
  bool taken_ = false;
  std::optional<CancelReason> gave_up_;
};

}  // namespace lifeline::api

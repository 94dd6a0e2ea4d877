// Internal to api/: the state every connection of one HttpServer shares, and the entry
// point that runs a connection. Includes Asio, so only http_server.cpp and http_session.cpp
// include it (keeps Asio/Beast out of headers the rest of the tree compiles).
//
// Ownership: HttpServer::Impl owns the ServerCore via shared_ptr; each connection holds a
// shared_ptr too, so the core outlives the last handler; prep jobs borrow it (the pool is
// part of it and joins its threads first). Thread-safety: options are immutable after Start;
// counters and the registry are atomics / mutex-guarded; SinkGate is read-locked by engine
// and prep threads and write-locked once by Stop; the prep pool is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>

#include "api/serving_api.h"
#include "api/http_server.h"
#include "api/prep_pool.h"
#include "api/recent_requests.h"
#include "api/server_metrics.h"

namespace lifeline::api {

// Engine sinks and prep jobs hold this; once Stop() closes it nothing posts into the (dying)
// io_context.
struct SinkGate {
  std::shared_mutex mu;
  bool open = true;
};

// What the server needs from a live connection during shutdown.
class ConnectionHandle {
 public:
  virtual ~ConnectionHandle() = default;
  // Posts onto the connection's executor: end any in-flight request (cancel + terminal
  // error) and close.
  virtual void PostShutdown() = 0;
  // After the I/O threads are joined: drop self-references so the object can be freed.
  virtual void ReleaseAfterStop() = 0;
};

struct ServerCore {
  ServerCore(ServerOptions o, ServingApi* e) : options(std::move(o)), engine(e) {}

  const ServerOptions options;
  ServingApi* const engine;
  ServerMetrics metrics;
  RecentRequests recent;  // the dashboard's three-layer split of the latest requests
  std::shared_ptr<SinkGate> gate = std::make_shared<SinkGate>();
  std::atomic<bool> draining{false};
  std::atomic<int> open_connections{0};
  std::atomic<uint64_t> next_id{1};
  uint64_t id_salt = 0;  // random per server, makes request ids unguessable across restarts

  std::mutex registry_mu;
  std::unordered_map<uint64_t, std::weak_ptr<ConnectionHandle>> registry;

  // Created by Start, shut down by Stop before the gate closes. Declared last: its jobs use
  // the members above (engine, metrics, gate, options), so it goes (joining its threads)
  // before they do.
  std::unique_ptr<PrepPool> prep;
};

// Runs one accepted connection until it closes (registers itself in core->registry).
void StartConnection(const std::shared_ptr<ServerCore>& core,
                     boost::asio::ip::tcp::socket socket);
// Writes a 503 and closes; used above max_connections.
void RejectConnection(const std::shared_ptr<ServerCore>& core,
                      boost::asio::ip::tcp::socket socket);

}  // namespace lifeline::api

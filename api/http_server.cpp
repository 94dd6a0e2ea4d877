// HttpServer: the acceptor, the I/O thread pool and the graceful stop sequence. Connections
// themselves live in http_session.cpp.
#include "api/http_server.h"

#include <future>
#include <optional>
#include <random>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "api/server_core.h"

namespace lifeline::api {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = boost::system::error_code;

struct HttpServer::Impl {
  Impl(ServerOptions options, ServingApi* engine)
      : core(std::make_shared<ServerCore>(std::move(options), engine)),
        acceptor(net::make_strand(ioc)) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](ErrorCode ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) OnAccepted(std::move(socket));
      // Other accept errors (e.g. EMFILE) are transient: keep accepting.
      Accept();
    });
  }

  void OnAccepted(tcp::socket socket) {
    ErrorCode ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // latency first: no Nagle delay
    const ServerLimits& limits = core->options.limits;
    if (limits.socket_send_buffer_bytes > 0) {
      socket.set_option(net::socket_base::send_buffer_size(limits.socket_send_buffer_bytes),
                        ignored);
    }
    if (core->open_connections.load() >= limits.max_connections) {
      return RejectConnection(core, std::move(socket));
    }
    StartConnection(core, std::move(socket));
  }

  std::vector<std::shared_ptr<ConnectionHandle>> LiveConnections() {
    std::vector<std::shared_ptr<ConnectionHandle>> out;
    std::lock_guard lock(core->registry_mu);
    for (auto& [id, weak] : core->registry) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }

  // Polls `done` every few ms until it holds or `timeout` passes; Stop() is not a hot path.
  template <typename Pred>
  static void WaitUntil(Pred done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  net::io_context ioc;  // declared before everything that holds its executors
  std::shared_ptr<ServerCore> core;
  tcp::acceptor acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  uint16_t bound_port = 0;
  bool started = false;
  bool stopped = false;
};

HttpServer::HttpServer(ServerOptions options, ServingApi* engine)
    : impl_(std::make_unique<Impl>(std::move(options), engine)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.started) return Status(StatusCode::kInternal, "HttpServer::Start called twice");
  const ServerOptions& o = s.core->options;
  if (o.io_threads < 1 || o.io_threads > 64) {
    return InvalidArgument("io_threads is " + std::to_string(o.io_threads) + "; allowed 1..64");
  }
  if (o.prep_threads < 1 || o.prep_threads > 64) {
    return InvalidArgument("prep_threads is " + std::to_string(o.prep_threads) +
                           "; allowed 1..64");
  }
  const std::string where = o.bind_address + ":" + std::to_string(o.port);
  ErrorCode ec;
  const auto address = net::ip::make_address(o.bind_address, ec);
  if (ec) return InvalidArgument("bind address '" + o.bind_address + "': " + ec.message());
  const tcp::endpoint endpoint(address, o.port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return IoError("cannot listen on " + where + ": " + ec.message());
  s.bound_port = s.acceptor.local_endpoint(ec).port();
  s.core->id_salt = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  s.started = true;
  s.core->prep = std::make_unique<PrepPool>(o.prep_threads, o.limits.max_prep_queued);
  s.work.emplace(s.ioc.get_executor());
  s.Accept();
  for (int i = 0; i < o.io_threads; ++i) {
    s.threads.emplace_back([&s] {
      // A handler that throws must not take the I/O thread down with it.
      for (;;) {
        try {
          s.ioc.run();
          return;
        } catch (const std::exception&) {
        }
      }
    });
  }
  return Status::Ok();
}

uint16_t HttpServer::port() const { return impl_->bound_port; }

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  ServerCore& core = *s.core;
  core.draining.store(true);
  // 1. Let in-flight requests finish on their own, those still being prepared (parsed,
  //    submitted) included. The listener stays open meanwhile: a new connection is answered
  //    (503 + Retry-After for /ready and generation, Connection: close) rather than
  //    refused, so a load balancer can tell draining from dead.
  Impl::WaitUntil(
      [&] { return core.metrics.Ledger().in_flight() == 0 && core.prep->Stats().idle(); },
      core.options.limits.drain_timeout);
  {
    std::promise<void> closed;
    net::post(s.acceptor.get_executor(), [&s, &closed] {
      ErrorCode ignored;
      s.acceptor.close(ignored);
      closed.set_value();
    });
    closed.get_future().wait();
  }
  // 2. End the rest (terminal error + Cancel) and close every connection; give the final
  //    writes a moment to flush.
  for (auto& c : s.LiveConnections()) c->PostShutdown();
  Impl::WaitUntil(
      [&] {
        std::lock_guard lock(core.registry_mu);
        return core.registry.empty();
      },
      std::chrono::milliseconds(1000));
  // 3. The prep pool: a job still queued is answered shutting_down, a running one finishes.
  //    Their connections have given up on them (step 2), so an accepted Submit is counted
  //    cancelled{shutdown} and cancelled; whatever they post back still finds the strands.
  core.prep->Shutdown();
  // 4. No engine event may reach the io_context from now on.
  {
    std::unique_lock lock(core.gate->mu);
    core.gate->open = false;
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // 5. Break the self-references of connections whose handlers never ran; their pending
  //    handlers are destroyed with the io_context.
  for (auto& c : s.LiveConnections()) c->ReleaseAfterStop();
}

LedgerSnapshot HttpServer::Ledger() const { return impl_->core->metrics.Ledger(); }

const ServerMetrics& HttpServer::metrics() const { return impl_->core->metrics; }

PrepStats HttpServer::PrepPoolStats() const {
  const auto& prep = impl_->core->prep;
  return prep ? prep->Stats() : PrepStats{};
}

}  // namespace lifeline::api

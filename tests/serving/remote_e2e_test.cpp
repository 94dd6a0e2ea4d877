// End to end with two real `lifeline serve` processes: A serves stories260K; B serves it
// locally as "heavy" and has A as the remote member "light" (--remote, --cascade
// heavy,light) with a class whose TTFT target no request meets and max_level 3, so its
// ladder settles at "cascade". Requests for "heavy" then come back from A: `model` and
// X-Served-Model say "light", the text equals A's own greedy answer, and the timing phases
// (http_read + validate + remote + handoff) add up to server_total. With A gone, B answers
// 502 upstream_error naming "light" and stays ready.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_test_client.h"
#include "serving/remote_fake_upstream.h"
#include "test_paths.h"

extern char** environ;

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// `lifeline serve --port 0 ...`, its port read from the "listening on" line; SIGTERM (then
// SIGKILL) on Stop / destruction.
class Serve {
 public:
  ~Serve() { Stop(); }
  std::string Start(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {lifeline::testing::LifelineBinary(), "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int out[2];
    if (pipe(out) != 0) return "pipe failed";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    const int rc = posix_spawn(&pid_, cargv[0], &fa, &attr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      pid_ = -1;
      return "spawn failed";
    }
    std::string text;
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      const size_t at = text.find("listening on http://");
      const size_t nl = at == std::string::npos ? at : text.find('\n', at);
      if (nl != std::string::npos) {
        port_ = static_cast<uint16_t>(std::stoi(text.substr(text.rfind(':', nl) + 1)));
        ::close(out[0]);
        return "";
      }
    }
    ::close(out[0]);
    return "no listening line; stdout: " + text;
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

using lifeline::testing::HttpReply;

// One request on a fresh connection (Connection: close), through the shared test client.
std::optional<HttpReply> Http(uint16_t port, const std::string& method, const std::string& path,
                              const std::string& body = "") {
  lifeline::testing::HttpTestClient client(port);
  if (!client.connected()) return std::nullopt;
  const std::string request =
      method == "GET" ? lifeline::testing::GetRequest(path, "Connection: close\r\n")
                      : lifeline::testing::PostRequest(path, body, "Connection: close\r\n");
  if (!client.Send(request)) return std::nullopt;
  return client.ReadResponse(30s);
}

std::string Completion(const std::string& model) {
  return json{{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", 12},
              {"temperature", 0}}.dump();
}

// name -> dur from a Server-Timing header.
std::map<std::string, double> ServerTiming(const std::string& header) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while (pos < header.size()) {
    size_t comma = header.find(',', pos);
    if (comma == std::string::npos) comma = header.size();
    const std::string item = header.substr(pos, comma - pos);
    const size_t semi = item.find(";dur=");
    if (semi != std::string::npos) {
      std::string name = item.substr(0, semi);
      name.erase(0, name.find_first_not_of(' '));
      out[name] = std::stod(item.substr(semi + 5));
    }
    pos = comma + 1;
  }
  return out;
}

TEST(RemoteEndToEndTest, CascadeToARemoteLifelineServesAndNamesTheLightModel) {
  const std::string model = lifeline::testing::SharedPath("models/stories260K.gguf");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
  Serve a;
  ASSERT_EQ(a.Start({"-m", "stories=" + model, "-t", "1"}), "");
  const auto direct = Http(a.port(), "POST", "/v1/completions", Completion("stories"));
  ASSERT_TRUE(direct && direct->status == 200) << (direct ? direct->body : "no reply");
  const std::string want_text = json::parse(direct->body)["choices"][0]["text"];

  const auto config = std::filesystem::temp_directory_path() /
                      ("lifeline_remote_e2e_" + std::to_string(::getpid()) + ".toml");
  {
    std::ofstream f(config);
    f << "default_class = \"tight\"\n[classes.tight]\nttft_p95_ms = 0.001\nmax_level = 3\n"
         "[controller]\ntick_ms = 20\nmin_samples = 1\n"
         "[ladder]\nmin_dwell_ms = 600000\nraise_interval_ms = 0\n"
         // Short buckets: each raise waits for samples newer than the previous one.
         "[window]\nbucket_ms = 100\nbuckets = 10\n"
         "[admission]\npredictive = false\n";
  }
  Serve b;
  const std::string start_b = b.Start(
      {"-m", "heavy=" + model, "-t", "1", "--remote",
       "light=http://127.0.0.1:" + std::to_string(a.port()) + "/v1#stories", "--cascade",
       "heavy,light", "--config", config.string()});
  std::filesystem::remove(config);
  ASSERT_EQ(start_b, "");

  const auto models = Http(b.port(), "GET", "/v1/models");
  ASSERT_TRUE(models && models->status == 200);
  EXPECT_NE(models->body.find("\"id\":\"light\""), std::string::npos) << models->body;

  // The first requests are served locally and push the ladder up; once it is at level 3,
  // requests for "heavy" are routed to the remote member.
  std::optional<HttpReply> routed;
  for (int i = 0; i < 100 && !routed; ++i) {
    auto r = Http(b.port(), "POST", "/v1/completions", Completion("heavy"));
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->status, 200) << r->body;
    if (r->headers["x-served-model"] == "light") routed = r;
    else std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(routed.has_value()) << "never routed to the remote member";
  const json body = json::parse(routed->body);
  EXPECT_EQ(body["model"], "light");
  EXPECT_EQ(body["choices"][0]["text"], want_text);
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  const auto st = ServerTiming(routed->headers["server-timing"]);
  ASSERT_TRUE(st.count("remote") && st.count("server_total") && st.count("handoff"))
      << routed->headers["server-timing"];
  const double phases = st.at("http_read") + st.at("validate") + st.at("remote") + st.at("handoff");
  EXPECT_NEAR(phases, st.at("server_total"), std::max(1.0, 0.02 * st.at("server_total")))
      << routed->headers["server-timing"];

  const auto metrics = Http(b.port(), "GET", "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->body.find("lifeline_slo_requests_total{class=\"tight\",model=\"light\","
                               "outcome=\"admitted\"}"),
            std::string::npos);

  // The remote goes away: one 502 naming the member; B stays ready.
  a.Stop();
  const auto failed = Http(b.port(), "POST", "/v1/completions", Completion("light"));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status, 502) << failed->body;
  EXPECT_NE(failed->body.find("upstream_error"), std::string::npos) << failed->body;
  EXPECT_NE(failed->body.find("upstream 'light'"), std::string::npos) << failed->body;
  const auto ready = Http(b.port(), "GET", "/ready");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200) << ready->body;
}

// The case through a real server: a remote member that streams on past the client's
// max_tokens 8 (529 chunks were relayed until the 300 s remote timeout). The client's stream
// has 8 text deltas and finish_reason "length"; the upstream connection is closed.
TEST(RemoteEndToEndTest, ARunawayRemoteIsCutAtTheClientsMaxTokens) {
  lifeline::testing::FakeUpstream up([](const lifeline::testing::FakeUpstream::Conn& c,
                                        const std::string&) {
    bool open = c.Send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                       "Connection: close\r\n\r\n");
    for (int i = 0; open && !c.Stopping(); ++i) {
      open = c.Send("data: {\"choices\":[{\"index\":0,\"text\":\"t" + std::to_string(i) +
                    " \",\"finish_reason\":null}]}\n\n");
    }
    c.HoldUntilClosed(10s);
  });
  Serve s;
  ASSERT_EQ(s.Start({"--remote", "runaway=" + up.Url() + "#upstream-model"}), "");
  const std::string body = json{{"model", "runaway"}, {"prompt", "Hi"}, {"max_tokens", 8},
                                {"stream", true}}.dump();
  const auto reply = Http(s.port(), "POST", "/v1/completions", body);
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->status, 200) << reply->body;
  std::string text;
  std::string finish;
  int deltas = 0;
  bool done = false;
  for (const std::string& data : lifeline::testing::SseData(reply->body)) {
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const json chunk = json::parse(data, nullptr, false);
    ASSERT_TRUE(chunk.is_object()) << data;
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice.contains("text") && choice["text"].is_string() && !choice["text"].get<std::string>().empty()) {
      text += choice["text"].get<std::string>();
      ++deltas;
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(deltas, 8) << reply->body;
  EXPECT_EQ(text, "t0 t1 t2 t3 t4 t5 t6 t7 ");
  EXPECT_EQ(finish, "length") << reply->body;
  EXPECT_TRUE(done) << reply->body;
  EXPECT_TRUE(up.WaitPeerClosed(5s)) << "the upstream connection stayed open";
}

}  // namespace
}  // namespace lifeline::serving

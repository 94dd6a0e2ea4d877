// `lifeline analyze` through the built binary: simulate -> threshold/decay -> JSON contract,
// the emitted TOML loaded by the real `serve --config` loader, impact on a report, CSV errors
// naming line and column, and a cross-check against an independent python3 implementation
// (tests/analysis/reference_fit.py; skipped without python3).
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "slo/slo_config.h"
#include "test_paths.h"

namespace lifeline {
namespace {

struct Out {
  int code = -1;
  std::string text;
};

Out Sh(const std::string& cmd) {
  Out r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.text.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return r;
}

class AnalyzeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lifeline_analyze_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  static std::string Bin() { return testing::LifelineBinary() + " analyze "; }
  std::filesystem::path dir_;
};

TEST_F(AnalyzeCli, ThresholdJsonAndEmittedConfigLoadInServe) {
  ASSERT_EQ(Sh(Bin() + "simulate --kind sessions --seed 2 --out " + P("s.csv") +
               " --scenario name=search,knee=387,rows=12000"
               " --scenario 'name=Code Completion,knee=200,median=150,below=0.15,above=0.25,rows=12000'"
               " --scenario name=batch,knee=none,rows=6000").code, 0);
  const Out r = Sh(Bin() + "threshold --input " + P("s.csv") + " --json --bootstrap 100 "
                   "--null-replicates 99 --alpha 0.02 --emit-config " + P("slo.toml") + " --plot " + P("t.svg"));
  ASSERT_EQ(r.code, 0) << r.text;
  const auto j = nlohmann::json::parse(r.text);
  ASSERT_EQ(j["scenarios"].size(), 3u);
  const auto& s = j["scenarios"][0];
  EXPECT_EQ(s["name"], "search");
  EXPECT_EQ(s["n"], 12000);
  EXPECT_NEAR(s["threshold_ms"].get<double>(), 387, 15);
  EXPECT_LE(s["ci95_ms"][0].get<double>(), s["threshold_ms"].get<double>());
  for (const char* k : {"rate_below", "rate_above", "relative_increase", "p_value"}) {
    EXPECT_TRUE(s[k].is_number()) << k;
  }
  EXPECT_TRUE(j["scenarios"][2]["threshold_ms"].is_null());
  // The real loader of `serve --config` reads what --emit-config wrote.
  auto c = slo::LoadSloConfigFile(P("slo.toml"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const slo::SloClass* search = c->FindClass("search");
  ASSERT_NE(search, nullptr);
  EXPECT_LT(search->ttft_p95_ms.value_or(1e9), s["threshold_ms"].get<double>());
  EXPECT_NE(c->FindClass("code-completion"), nullptr);
  EXPECT_EQ(c->FindClass("batch"), nullptr);
  std::ifstream svg(P("t.svg"));
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("threshold"), std::string::npos);
}

// `serve --request-log` lines read directly: sessions with a planted knee written as the
// server logs them (an abandoned session is a request its client hung up on before the first
// token, after waiting its latency; a kept one completed with that TTFT), among lines that
// must not count (refusals, errors, shutdowns -- all at high latency, all "disconnected"-
// looking, so counting them would move the knee).
TEST_F(AnalyzeCli, ThresholdReadsTheServersRequestLog) {
  ASSERT_EQ(Sh(Bin() + "simulate --kind sessions --seed 3 --out " + P("s.csv") +
               " --scenario name=search,knee=387,below=0.1,above=0.3,rows=8000").code, 0);
  std::ifstream in(P("s.csv"));
  std::ofstream log(P("requests.jsonl"));
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line, "session_id,user_id,scenario,latency_ms,abandoned");
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cell;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cell.push_back(c);
    ASSERT_EQ(cell.size(), 5u) << line;
    const double latency = std::stod(cell[3]);
    const bool left = cell[4] == "1";
    nlohmann::json j = {{"id", "req-" + cell[0]},       {"class", cell[2]},
                        {"outcome", left ? "cancelled" : "completed"},
                        {"cancel_reason", left ? nlohmann::json("client_disconnect") : nullptr},
                        {"ttft_ms", left ? nlohmann::json() : nlohmann::json(latency)},
                        {"e2e_ms", left ? latency : latency + 500},
                        {"client_disconnected", left}};
    log << j.dump() << "\n";
    if (++n % 4 == 0) {
      // Not sessions: a shed, a failure and a shutdown at high latency.
      j["ttft_ms"] = nullptr;
      j["e2e_ms"] = 900;
      j["client_disconnected"] = true;
      j["outcome"] = "refused";
      log << j.dump() << "\n";
      j["outcome"] = "error";
      log << j.dump() << "\n";
      j["outcome"] = "cancelled";
      j["cancel_reason"] = "shutdown";
      j["client_disconnected"] = false;
      log << j.dump() << "\n";
    }
  }
  log.close();
  const Out r = Sh(Bin() + "threshold --input " + P("requests.jsonl") +
                   " --json --bootstrap 100 --null-replicates 99 --alpha 0.02");
  ASSERT_EQ(r.code, 0) << r.text;
  const auto j = nlohmann::json::parse(r.text);
  ASSERT_EQ(j["scenarios"].size(), 1u);
  const auto& s = j["scenarios"][0];
  EXPECT_EQ(s["name"], "search");  // the class column
  EXPECT_EQ(s["n"], 8000);         // only the sessions
  EXPECT_NEAR(s["threshold_ms"].get<double>(), 387, 15);
  EXPECT_LE(s["ci95_ms"][0].get<double>(), 387 + 15);
  EXPECT_GE(s["ci95_ms"][1].get<double>(), 387 - 15);

  // A line that is not a JSON object is refused naming its line.
  { std::ofstream(P("bad.jsonl")) << "{\"outcome\":\"completed\"}\n[1,2]\n"; }
  const Out bad = Sh(Bin() + "threshold --input " + P("bad.jsonl"));
  EXPECT_EQ(bad.code, 2) << bad.text;
  EXPECT_NE(bad.text.find("bad.jsonl:2"), std::string::npos) << bad.text;
}

// `analyze decay` on a request log whose clicks and conversions were posted to /v1/outcomes
// (outcome lines joined by request id) fits exactly what it fits on the same impressions as
// a CSV: the log is read as the data, nothing is lost or added.
TEST_F(AnalyzeCli, DecayReadsPostedOutcomesFromTheRequestLog) {
  ASSERT_EQ(Sh(Bin() + "simulate --kind events --seed 4 --rows 20000 --out " + P("e.csv")).code, 0);
  std::ifstream in(P("e.csv"));
  std::ofstream log(P("requests.jsonl"));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) header.push_back(c);
  }
  auto index = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t lat = index("latency_ms"), clk = index("clicked"), cnv = index("converted");
  ASSERT_LT(std::max({lat, clk, cnv}), header.size()) << line;
  int n = 0;
  std::vector<std::string> outcomes;
  while (std::getline(in, line)) {
    std::vector<std::string> cell;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cell.push_back(c);
    const std::string id = "req-" + std::to_string(n++);
    log << nlohmann::json({{"id", id}, {"class", "shop"}, {"outcome", "completed"},
                           {"cancel_reason", nullptr}, {"ttft_ms", std::stod(cell[lat])},
                           {"e2e_ms", std::stod(cell[lat]) + 200}, {"client_disconnected", false}})
               .dump()
        << "\n";
    // Posted later, out of order with the requests, as an application would.
    if (cell[clk] == "1") outcomes.push_back(nlohmann::json({{"event", "outcome"}, {"id", id}, {"type", "clicked"}}).dump());
    if (cell[cnv] == "1") outcomes.push_back(nlohmann::json({{"event", "outcome"}, {"id", id}, {"type", "converted"}}).dump());
  }
  for (auto it = outcomes.rbegin(); it != outcomes.rend(); ++it) log << *it << "\n";
  log.close();
  const Out csv = Sh(Bin() + "decay --input " + P("e.csv") + " --json");
  const Out jsonl = Sh(Bin() + "decay --input " + P("requests.jsonl") + " --json");
  ASSERT_EQ(csv.code, 0) << csv.text;
  ASSERT_EQ(jsonl.code, 0) << jsonl.text;
  auto a = nlohmann::json::parse(csv.text), b = nlohmann::json::parse(jsonl.text);
  EXPECT_EQ(a["n"], b["n"]);
  EXPECT_EQ(a["clicks"], b["clicks"]);
  EXPECT_EQ(a["conversions"], b["conversions"]);
  EXPECT_EQ(a.dump(), b.dump());
}

TEST_F(AnalyzeCli, DecayJsonContractAndImpact) {
  ASSERT_EQ(Sh(Bin() + "simulate --kind events --rows 30000 --out " + P("e.csv")).code, 0);
  const Out d = Sh(Bin() + "decay --input " + P("e.csv") + " --json --plot " + P("d.svg"));
  ASSERT_EQ(d.code, 0) << d.text;
  const auto j = nlohmann::json::parse(d.text);
  for (const char* k : {"c0", "a"}) EXPECT_TRUE(j["ctr"][k].is_number()) << k;
  for (const char* k : {"v0", "b", "g"}) EXPECT_TRUE(j["cvr"][k].is_number()) << k;
  for (const char* k : {"a", "b", "g", "r2"}) EXPECT_TRUE(j["joint"][k].is_number()) << k;
  EXPECT_TRUE(j["independent"]["r2"].is_number());
  std::ofstream(P("fit.json")) << d.text;
  std::ofstream(P("report.json")) << R"({"config":{"slo_metric":"ttft"},"targets":[{"label":"A"}],
    "steps":[{"load":1}],"requests":[{"step":0,"target":0,"ttft_ms":120,"e2e_ms":300,"error":null}]})";
  const Out im = Sh(Bin() + "impact --report " + P("report.json") + " --fit " + P("fit.json") +
                    " --json");
  ASSERT_EQ(im.code, 0) << im.text;
  const auto ij = nlohmann::json::parse(im.text);
  EXPECT_EQ(ij["baseline"], "zero latency");
  const double c0 = j["ctr"]["c0"], a = j["ctr"]["a"];
  EXPECT_NEAR(ij["rows"][0]["expected"]["ctr"].get<double>(), c0 * std::exp(-a * 120), 1e-9);
}

// `analyze impact --report requests.jsonl`: the server's own traffic, one row per class; a
// completed request counts at its TTFT, one whose client hung up before a token at the time it
// waited, a refusal as failed (abandoned, no click), a shutdown not at all. Expected CTR is
// checked against the decay fit's formula computed here from the same latencies.
TEST_F(AnalyzeCli, ImpactReadsTheServersRequestLog) {
  ASSERT_EQ(Sh(Bin() + "simulate --kind events --rows 30000 --out " + P("e.csv")).code, 0);
  const Out d = Sh(Bin() + "decay --input " + P("e.csv") + " --json");
  ASSERT_EQ(d.code, 0) << d.text;
  std::ofstream(P("fit.json")) << d.text;
  const auto fit = nlohmann::json::parse(d.text);
  const double c0 = fit["ctr"]["c0"], a = fit["ctr"]["a"];
  {
    std::ofstream log(P("requests.jsonl"));
    auto line = [&](const char* cls, const char* outcome, const char* reason, nlohmann::json ttft,
                    double e2e) {
      log << nlohmann::json({{"id", "r"}, {"class", cls}, {"outcome", outcome},
                             {"cancel_reason", reason ? nlohmann::json(reason) : nlohmann::json()},
                             {"ttft_ms", ttft}, {"ttfa_ms", nullptr}, {"e2e_ms", e2e},
                             {"client_disconnected", reason != nullptr && std::string(reason) == "client_disconnect"}})
                 .dump()
          << "\n";
    };
    line("search", "completed", nullptr, 100.0, 900);
    line("search", "cancelled", "client_disconnect", nullptr, 300);  // no token: waited 300 ms
    line("search", "refused", nullptr, nullptr, 1);                  // failed
    line("search", "cancelled", "shutdown", nullptr, 50);            // left out
    line("chat", "completed", nullptr, 200.0, 700);
    log << R"({"event":"outcome","id":"r","type":"clicked","time_unix_ms":1765000000000})" << "\n";
  }
  const Out im = Sh(Bin() + "impact --report " + P("requests.jsonl") + " --fit " + P("fit.json") + " --json");
  ASSERT_EQ(im.code, 0) << im.text;
  const auto ij = nlohmann::json::parse(im.text);
  ASSERT_EQ(ij["rows"].size(), 2u) << ij.dump();
  const nlohmann::json* search = nullptr;
  const nlohmann::json* chat = nullptr;
  for (const auto& r : ij["rows"]) {
    if (r["label"] == "class search") search = &r;
    if (r["label"] == "class chat") chat = &r;
  }
  ASSERT_TRUE(search && chat) << ij.dump();
  EXPECT_EQ((*search)["expected"]["requests"], 3);
  EXPECT_EQ((*search)["expected"]["failed"], 1);
  // CTR over the three: the two served at 100 and 300 ms, the refused one with none.
  EXPECT_NEAR((*search)["expected"]["ctr"].get<double>(),
              (c0 * std::exp(-a * 100) + c0 * std::exp(-a * 300)) / 3, 1e-9);
  EXPECT_NEAR((*chat)["expected"]["ctr"].get<double>(), c0 * std::exp(-a * 200), 1e-9);
}

TEST_F(AnalyzeCli, BadCellsNameLineAndColumn) {
  std::ofstream(P("bad.csv")) << "scenario,latency_ms,abandoned\ns,100,0\ns,12x,1\n";
  const Out r = Sh(Bin() + "threshold --input " + P("bad.csv"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.text.find("bad.csv:3: column 2 (latency_ms): '12x' is not a number"),
            std::string::npos) << r.text;
  std::ofstream(P("one.csv")) << "latency_ms,abandoned\n100,0\n200,0\n";
  const Out o = Sh(Bin() + "threshold --input " + P("one.csv"));
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.text.find("column 2 (abandoned): all 2 rows (lines 2-3) are 0"), std::string::npos)
      << o.text;
  std::ofstream(P("empty.csv")) << "";
  const Out e = Sh(Bin() + "decay --input " + P("empty.csv"));
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.text.find("empty file"), std::string::npos) << e.text;
  const Out f = Sh(Bin() + "threshold --input " + P("one.csv") + " --bootstrap 5");
  EXPECT_EQ(f.code, 2);
  EXPECT_NE(f.text.find("--bootstrap 5 is outside [20, 100000]"), std::string::npos) << f.text;
}

// The breakpoint profile and the CTR fit against tests/analysis/reference_fit.py, which
// searches every cut exhaustively and fits with its own Newton iterations.
TEST_F(AnalyzeCli, MatchesIndependentPythonReference) {
  if (Sh("command -v python3").code != 0) GTEST_SKIP() << "python3 not installed";
  const std::string script = std::string(LIFELINE_SOURCE_DIR) + "/tests/analysis/reference_fit.py";
  ASSERT_EQ(Sh(Bin() + "simulate --kind sessions --seed 9 --out " + P("s.csv") +
               " --scenario name=s,knee=320,below=0.1,above=0.22,median=300,sigma=0.2,rows=1500")
                .code, 0);
  const Out ours = Sh(Bin() + "threshold --input " + P("s.csv") +
                      " --json --bootstrap 20 --null-replicates 19");
  ASSERT_EQ(ours.code, 0) << ours.text;
  const Out ref = Sh("python3 " + script + " threshold " + P("s.csv"));
  ASSERT_EQ(ref.code, 0) << ref.text;
  const auto o = nlohmann::json::parse(ours.text)["scenarios"][0];
  const auto p = nlohmann::json::parse(ref.text);
  EXPECT_EQ(o["candidate_ms"].get<double>(), p["candidate_ms"].get<double>());
  EXPECT_NEAR(o["lr_statistic"].get<double>(), p["lr_statistic"].get<double>(), 1e-3);

  ASSERT_EQ(Sh(Bin() + "simulate --kind events --seed 9 --rows 3000 --c0 0.4 --a 0.001 --out " +
               P("e.csv")).code, 0);
  const Out d = Sh(Bin() + "decay --input " + P("e.csv") + " --json");
  ASSERT_EQ(d.code, 0) << d.text;
  const Out dr = Sh("python3 " + script + " ctr " + P("e.csv"));
  ASSERT_EQ(dr.code, 0) << dr.text;
  const auto dj = nlohmann::json::parse(d.text), pj = nlohmann::json::parse(dr.text);
  EXPECT_NEAR(dj["ctr"]["c0"].get<double>(), pj["c0"].get<double>(), 1e-5);
  EXPECT_NEAR(dj["ctr"]["a"].get<double>(), pj["a"].get<double>(), 1e-7);
}

// `bench --fit/--threshold-fit`: the latency-economics section in all three reports, its
// numbers recomputed here from the report's own requests.
TEST_F(AnalyzeCli, BenchFitAddsLatencyEconomicsToTheReports) {
  const std::string model = testing::SharedPath("models/stories260K.gguf");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
  std::ofstream(P("fit.json"))
      << R"({"ctr":{"c0":0.4,"a":0.002},"cvr":{"v0":0.2,"b":0.001,"g":1e-6,"base":"clicks"}})";
  std::ofstream(P("t.json")) << R"({"scenarios":[{"name":"interactive","n":100,"threshold_ms":30,
      "ci95_ms":[25,35],"rate_below":0.1,"rate_above":0.3,"relative_increase":2,"p_value":0.001}]})";
  const std::string bench = testing::LifelineBinary() + " bench --serve " + model +
                            " --serve-arg=--threads --serve-arg=1 --rate 20 --requests 6 "
                            "--prompt-len 8 --output-len 4 --slo-class interactive "
                            "--progress never ";
  std::ofstream(P("bad.json")) << R"({"ctr":{"c0":0.4}})";
  const Out bad = Sh(bench + "--fit " + P("bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.text.find("ctr.a: missing"), std::string::npos) << bad.text;

  const Out r = Sh(bench + "--fit " + P("fit.json") + " --threshold-fit " + P("t.json") +
                   " --out " + P("out"));
  ASSERT_EQ(r.code, 0) << r.text;
  std::ifstream jf(P("out/report.json"));
  const auto j = nlohmann::json::parse(jf);
  ASSERT_TRUE(j.contains("impact")) << j.dump().substr(0, 400);
  double ctr = 0, ab = 0;
  int n = 0;
  for (const auto& req : j["requests"]) {
    ASSERT_TRUE(req["error"].is_null());
    const double t = req["ttft_ms"].get<double>();
    ctr += 0.4 * std::exp(-0.002 * t);
    ab += t >= 30 ? 0.3 : 0.1;
    ++n;
  }
  const auto& row = j["impact"]["rows"][0];
  EXPECT_NEAR(row["expected"]["ctr"].get<double>(), ctr / n, 1e-9);
  EXPECT_NEAR(row["expected"]["abandonment"].get<double>(), ab / n, 1e-9);
  EXPECT_EQ(j["impact"]["baseline"], "every request at the threshold (30 ms)");
  std::ifstream mf(P("out/report.md")), hf(P("out/report.html"));
  const std::string md((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
  const std::string html((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("## Latency economics"), std::string::npos);
  EXPECT_NE(md.find("lifeline: this configuration"), std::string::npos) << md;
  EXPECT_NE(html.find("<h2>Latency economics</h2>"), std::string::npos);
  EXPECT_NE(html.find("Expected rates vs ttft latency"), std::string::npos);
}

// A click rate that rises with latency fits a negative rate: the printed model keeps one sign
// per term ("exp(+1.8e-05 t)"), not "exp(--1.8e-05 t)".
TEST_F(AnalyzeCli, DecayPrintsANegativeRateWithItsSign) {
  {
    std::ofstream csv(P("e.csv"));
    csv << "latency_ms,clicked,converted\n";
    for (int i = 0; i < 4000; ++i) {
      const int t = 50 + (i % 40) * 25;                 // 50 .. 1025 ms
      const bool clicked = (i * 7919) % 1000 < 200 + t / 5;  // rises with t
      const bool converted = clicked && (i * 104729) % 1000 < 300;
      csv << t << "," << (clicked ? 1 : 0) << "," << (converted ? 1 : 0) << "\n";
    }
  }
  const Out r = Sh(Bin() + "decay --input " + P("e.csv"));
  ASSERT_EQ(r.code, 0) << r.text;
  EXPECT_EQ(r.text.find("--"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("exp(+"), std::string::npos) << r.text;
}

}  // namespace
}  // namespace lifeline

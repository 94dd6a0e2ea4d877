// POST /v1/outcomes and GET /v1/economics at the HTTP boundary (api/outcomes.h): the body's
// validation names the field and the limit, events reach the EconomicsApi, every finished
// generation request is handed over with its X-Session-Id, and a server without the
// economics plane says so.
#include "api/outcomes.h"

#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

using nlohmann::json;

std::string ParseError(const json& body) {
  auto r = ParseOutcomes(body);
  if (auto* e = std::get_if<ApiError>(&r)) return e->param + ": " + e->message;
  return "";
}

TEST(OutcomesParseTest, ValidEventsParse) {
  auto r = ParseOutcomes(json::parse(R"({"events":[
      {"request_id":"cmpl-1","type":"clicked","time":1765000000000},
      {"session_id":"s.2","type":"abandoned"},
      {"request_id":"x","type":"converted","time":null}]})"));
  ASSERT_TRUE(std::holds_alternative<std::vector<OutcomeEvent>>(r)) << std::get<ApiError>(r).message;
  const auto& ev = std::get<std::vector<OutcomeEvent>>(r);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].request_id, "cmpl-1");
  EXPECT_EQ(ev[0].type, OutcomeType::kClicked);
  EXPECT_EQ(ev[0].time_unix_ms, 1765000000000);
  EXPECT_EQ(ev[1].session_id, "s.2");
  EXPECT_EQ(ev[1].type, OutcomeType::kAbandoned);
  EXPECT_FALSE(ev[2].time_unix_ms.has_value());
}

TEST(OutcomesParseTest, BadBodiesNameTheFieldAndTheLimit) {
  EXPECT_NE(ParseError(json::parse(R"({})")).find("events: 'events' is required"), std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":{}})")).find("must be an array"), std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[],"extra":1})")).find("extra: unknown field"),
            std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[{"type":"clicked"}]})"))
                .find("events[0]: 'events[0]' needs exactly one of request_id and session_id"),
            std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[{"request_id":"a","session_id":"b","type":"clicked"}]})"))
                .find("exactly one"),
            std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[{"request_id":"a","type":"bought"}]})"))
                .find("events[0].type"),
            std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[{"request_id":"a b","type":"clicked"}]})"))
                .find("events[0].request_id"),
            std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[{"request_id":"a","type":"clicked","time":1765000000}]})"))
                .find("events[0].time: 'events[0].time' must be unix time in milliseconds"),
            std::string::npos);
  EXPECT_NE(ParseError(json::parse(R"({"events":[{"request_id":"a","type":"clicked","why":1}]})"))
                .find("events[0].why"),
            std::string::npos);
  json many = {{"events", json::array()}};
  for (size_t i = 0; i <= kMaxOutcomeEvents; ++i) {
    many["events"].push_back({{"request_id", "a"}, {"type", "clicked"}});
  }
  EXPECT_NE(ParseError(many).find("at most 1000 per call"), std::string::npos) << ParseError(many);
}

class OutcomesServerTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerOptions o = TestOptions();
    o.economics = economics_;
    StartServer(std::move(o));
  }
  std::shared_ptr<RecordingEconomics> economics_ = std::make_shared<RecordingEconomics>();
};

TEST_F(OutcomesServerTest, FinishedRequestsAndPostedEventsReachTheEconomics) {
  auto r = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x"})", "X-Session-Id: conv-7\r\n"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(engine_.WaitFor([&] {
    std::lock_guard lock(economics_->mu);
    return economics_->finished.size() == 1;
  }));
  {
    std::lock_guard lock(economics_->mu);
    EXPECT_EQ(economics_->finished[0].session_id, "conv-7");
    EXPECT_EQ(economics_->finished[0].id, r->Header("x-request-id"));
    EXPECT_EQ(economics_->finished[0].outcome, "completed");
  }
  auto posted = Roundtrip(PostRequest(
      "/v1/outcomes", R"({"events":[{"session_id":"conv-7","type":"converted"}]})"));
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 200) << posted->body;
  EXPECT_EQ(json::parse(posted->body)["joined"], 1);
  {
    std::lock_guard lock(economics_->mu);
    ASSERT_EQ(economics_->events.size(), 1u);
    EXPECT_EQ(economics_->events[0].type, OutcomeType::kConverted);
  }
  auto bad = Roundtrip(PostRequest("/v1/outcomes", R"({"events":[{"type":"converted"}]})"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("events[0]"), std::string::npos) << bad->body;
  auto got = Roundtrip(GetRequest("/v1/economics"));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(json::parse(got->body)["object"], "economics");
  auto metrics = Roundtrip(GetRequest("/metrics"));
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("lifeline_test_economics 1"), std::string::npos);
}

TEST_F(ServerTest, WithoutTheEconomicsPlaneTheRoutesSaySo) {
  auto posted = Roundtrip(PostRequest("/v1/outcomes", R"({"events":[]})"));
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 404);
  EXPECT_NE(posted->body.find("economics_off"), std::string::npos) << posted->body;
  auto got = Roundtrip(GetRequest("/v1/economics"));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 404);
}

}  // namespace
}  // namespace lifeline::api::testing

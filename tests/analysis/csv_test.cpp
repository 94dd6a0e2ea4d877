// CSV reading: quoting, line ends, and every refusal names the file, line, column and name.
#include "analysis/csv.h"

#include <gtest/gtest.h>

namespace lifeline::analysis {
namespace {

TEST(AnalysisCsv, QuotedCellsCrlfAndBlankLines) {
  auto t = ParseCsv("scenario,latency_ms,abandoned\r\n\"a, b\",12.5,1\r\n\r\n\"say \"\"hi\"\"\",3,0\n",
                    "s.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0][0], "a, b");
  EXPECT_EQ(t->rows[1][0], "say \"hi\"");
  EXPECT_EQ(t->lines[1], 4);
  auto lat = LatencyColumn(*t, 1);
  ASSERT_TRUE(lat.ok());
  EXPECT_DOUBLE_EQ((*lat)[0], 12.5);
  auto y = BinaryColumn(*t, 2);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ((*y)[0], 1);
  EXPECT_EQ((*y)[1], 0);
}

TEST(AnalysisCsv, NonNumericCellNamesLineAndColumn) {
  auto t = ParseCsv("session,latency_ms,abandoned\n1,100,0\n2,abc,1\n", "sessions.csv");
  ASSERT_TRUE(t.ok());
  auto lat = LatencyColumn(*t, 1);
  ASSERT_FALSE(lat.ok());
  EXPECT_EQ(lat.status().message(),
            "sessions.csv:3: column 2 (latency_ms): 'abc' is not a number");
}

TEST(AnalysisCsv, BadValuesAreRefused) {
  auto t = ParseCsv("latency_ms,abandoned\n-5,yes\n1e300,2\n,1\n", "x.csv");
  ASSERT_TRUE(t.ok());
  auto lat = LatencyColumn(*t, 0);
  ASSERT_FALSE(lat.ok());
  EXPECT_NE(lat.status().message().find("x.csv:2: column 1 (latency_ms): '-5' is outside"),
            std::string::npos) << lat.status().message();
  auto y = BinaryColumn(*t, 1);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("x.csv:2: column 2 (abandoned): 'yes' is not an outcome"),
            std::string::npos) << y.status().message();
}

TEST(AnalysisCsv, EmptyInputsAreErrors) {
  auto empty = ParseCsv("", "e.csv");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "e.csv: empty file (no header line)");
  auto header_only = ParseCsv("latency_ms,abandoned\n", "h.csv");
  ASSERT_FALSE(header_only.ok());
  EXPECT_EQ(header_only.status().message(), "h.csv: no data rows after the header");
  auto ragged = ParseCsv("a,b\n1,2\n3\n", "r.csv");
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.status().message(), "r.csv:3: 1 cells, the header has 2");
  auto quote = ParseCsv("a,b\n\"x,2\n", "q.csv");
  ASSERT_FALSE(quote.ok());
  EXPECT_NE(quote.status().message().find("q.csv:2: column 1: unterminated"), std::string::npos);
}

TEST(AnalysisCsv, OneClassOutcomeIsRefusedWithItsLines) {
  auto t = ParseCsv("scenario,latency_ms,abandoned\na,1,0\na,2,0\nb,3,1\nb,4,0\n", "o.csv");
  ASSERT_TRUE(t.ok());
  auto y = BinaryColumn(*t, 2);
  ASSERT_TRUE(y.ok());
  EXPECT_TRUE(RequireBothClasses(*t, 2, *y, {}, "").ok());
  Status s = RequireBothClasses(*t, 2, *y, {0, 1}, "scenario 'a'");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "o.csv: column 3 (abandoned), scenario 'a': all 2 rows (lines 2-3) are 0; the fit "
            "needs both outcomes");
}

TEST(AnalysisCsv, MissingColumnListsTheHeader) {
  auto t = ParseCsv("lat,abandoned\n1,0\n", "m.csv");
  ASSERT_TRUE(t.ok());
  auto c = FindColumn(*t, "latency_ms", "--latency-col");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--latency-col 'latency_ms': no such column in m.csv (header: lat, abandoned)");
}

}  // namespace
}  // namespace lifeline::analysis

namespace lifeline::analysis {
namespace {

TEST(AnalysisJsonLines, KeysBecomeColumnsAndNullsEmptyCells) {
  auto t = ParseJsonLines("{\"a\":1,\"b\":\"x\",\"c\":true}\n\n{\"b\":\"y\",\"a\":2.5,\"d\":null}\r\n"
                          "{\"a\":3,\"c\":false,\"e\":{\"nested\":1}}\n",
                          "log.jsonl");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->header, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  ASSERT_EQ(t->rows.size(), 3u);
  EXPECT_EQ(t->rows[0], (std::vector<std::string>{"1", "x", "true", "", ""}));
  EXPECT_EQ(t->rows[1], (std::vector<std::string>{"2.5", "y", "", "", ""}));
  EXPECT_EQ(t->rows[2], (std::vector<std::string>{"3", "", "false", "", ""}));
  EXPECT_EQ(t->lines, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_FALSE(IsRequestLog(*t));
}

TEST(AnalysisJsonLines, ALineThatIsNotAnObjectIsRefusedByNumber) {
  auto t = ParseJsonLines("{\"a\":1}\n{\"a\":\n", "log.jsonl");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("log.jsonl:2"), std::string::npos) << t.status().message();
  EXPECT_FALSE(ParseJsonLines("\n\n", "empty.jsonl").ok());
}

TEST(AnalysisJsonLines, RequestLogKeepsCompletedAndAbandonedRequests) {
  auto log = ParseJsonLines(
      "{\"outcome\":\"completed\",\"ttft_ms\":120,\"e2e_ms\":900,\"client_disconnected\":false,\"cancel_reason\":null,\"class\":\"chat\"}\n"
      "{\"outcome\":\"cancelled\",\"ttft_ms\":null,\"e2e_ms\":450,\"client_disconnected\":true,\"cancel_reason\":\"client_disconnect\",\"class\":null}\n"
      "{\"outcome\":\"cancelled\",\"ttft_ms\":80,\"e2e_ms\":300,\"client_disconnected\":true,\"cancel_reason\":\"client_disconnect\",\"class\":\"chat\"}\n"
      "{\"outcome\":\"cancelled\",\"ttft_ms\":null,\"e2e_ms\":700,\"client_disconnected\":false,\"cancel_reason\":\"shutdown\",\"class\":\"chat\"}\n"
      "{\"outcome\":\"refused\",\"ttft_ms\":null,\"e2e_ms\":1,\"client_disconnected\":false,\"cancel_reason\":null,\"class\":\"chat\"}\n"
      "{\"outcome\":\"error\",\"ttft_ms\":null,\"e2e_ms\":5,\"client_disconnected\":false,\"cancel_reason\":null,\"class\":\"chat\"}\n",
      "r.jsonl");
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_TRUE(IsRequestLog(*log));
  auto s = RequestLogSessions(*log);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->rows.size(), 3u);
  EXPECT_EQ(s->lines, (std::vector<int64_t>{1, 2, 3}));
  auto wait = FindColumn(*s, "wait_ms", "--latency-col");
  auto cls = FindColumn(*s, "class", "--scenario-col");
  ASSERT_TRUE(wait.ok() && cls.ok());
  // TTFT when a token came, else how long the client waited.
  EXPECT_EQ(s->rows[0][*wait], "120");
  EXPECT_EQ(s->rows[1][*wait], "450");
  EXPECT_EQ(s->rows[2][*wait], "80");
  EXPECT_EQ(s->rows[1][*cls], "unclassified");
}

}  // namespace
}  // namespace lifeline::analysis

namespace lifeline::analysis {
namespace {

// Outcome lines (`"event": "outcome"`, posted to /v1/outcomes) join their requests by id:
// the latest abandoned / completed overrides the disconnect, clicks and conversions count.
TEST(AnalysisJsonLines, PostedOutcomesJoinTheirRequests) {
  auto log = ParseJsonLines(
      "{\"id\":\"a\",\"outcome\":\"completed\",\"ttft_ms\":100,\"e2e_ms\":500,\"client_disconnected\":false,\"cancel_reason\":null,\"class\":\"s\"}\n"
      "{\"id\":\"b\",\"outcome\":\"cancelled\",\"ttft_ms\":null,\"e2e_ms\":800,\"client_disconnected\":true,\"cancel_reason\":\"client_disconnect\",\"class\":\"s\"}\n"
      "{\"id\":\"c\",\"outcome\":\"completed\",\"ttft_ms\":300,\"e2e_ms\":900,\"client_disconnected\":false,\"cancel_reason\":null,\"class\":\"s\"}\n"
      "{\"event\":\"outcome\",\"id\":\"a\",\"type\":\"clicked\",\"time_unix_ms\":1765000000000}\n"
      "{\"event\":\"outcome\",\"id\":\"a\",\"type\":\"converted\",\"time_unix_ms\":1765000000001}\n"
      "{\"event\":\"outcome\",\"id\":\"b\",\"type\":\"completed\",\"time_unix_ms\":1765000000002}\n"
      "{\"event\":\"outcome\",\"id\":\"c\",\"type\":\"completed\",\"time_unix_ms\":1765000000003}\n"
      "{\"event\":\"outcome\",\"id\":\"c\",\"type\":\"abandoned\",\"time_unix_ms\":1765000000004}\n"
      "{\"event\":\"outcome\",\"id\":null,\"type\":\"clicked\",\"time_unix_ms\":1765000000005}\n",
      "r.jsonl");
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto s = RequestLogSessions(*log);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->rows.size(), 3u);  // the outcome lines are not requests
  auto col = [&](const char* name) { return *FindColumn(*s, name, "test"); };
  const size_t ab = col("abandoned"), cl = col("clicked"), cv = col("converted");
  EXPECT_EQ(s->rows[0][ab], "0");
  EXPECT_EQ(s->rows[0][cl], "1");
  EXPECT_EQ(s->rows[0][cv], "1");
  EXPECT_EQ(s->rows[1][ab], "0");  // it hung up, but the application says completed
  EXPECT_EQ(s->rows[2][ab], "1");  // the latest posted outcome wins
  EXPECT_EQ(s->rows[2][cl], "0");
}

}  // namespace
}  // namespace lifeline::analysis

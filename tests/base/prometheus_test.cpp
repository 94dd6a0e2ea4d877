// base/prometheus: the one writer of the text exposition format. Expected lines are written
// from the format's specification (0.0.4: label values escape \, " and newline; +Inf / NaN).
#include "base/prometheus.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace lifeline::prom {
namespace {

TEST(PromTextTest, NumbersAndEscapes) {
  EXPECT_EQ(Number(0.387), "0.387");
  EXPECT_EQ(Number(1.0), "1");
  EXPECT_EQ(Number(12345678.0), "12345678");
  EXPECT_EQ(Number(INFINITY), "+Inf");
  EXPECT_EQ(Number(-INFINITY), "-Inf");
  EXPECT_EQ(Number(NAN), "NaN");
  EXPECT_EQ(Escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  std::string out;
  Family(&out, "m", "gauge", "Help.");
  Sample(&out, "m", "", 2.5);
  EXPECT_EQ(out, "# HELP m Help.\n# TYPE m gauge\nm 2.5\n");
}

TEST(PromTextTest, LabelsEscapeEveryValue) {
  // A model or class name is operator input: a quote in it must not end the label value.
  EXPECT_EQ(Labels({{"model", "a\"b"}, {"state", "free"}}), "model=\"a\\\"b\",state=\"free\"");
  EXPECT_EQ(Labels({}), "");
  std::string out;
  Sample(&out, "lifeline_kv_blocks", Labels({{"model", "m\n"}}), 3);
  EXPECT_EQ(out, "lifeline_kv_blocks{model=\"m\\n\"} 3\n");
}

}  // namespace
}  // namespace lifeline::prom

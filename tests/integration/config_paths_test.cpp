// Start-up checks of the real `lifeline serve` process against its --config file
// (docs/slo.md "[[models]]", docs/reliability.md): a [[models]] entry whose path names no
// readable file stops the start with a non-zero exit and one line naming the config file
// (and the entry's line), the entry and the path.
#include <algorithm>
#include <string>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

// A [[models]] path in the config file that names no readable file.
class ConfigModelPathTest : public ::testing::Test {
 protected:
  // Starts serve with `toml` as its --config; expects the start to fail and returns its
  // stderr.
  std::string FailedStart(const std::string& toml) {
    config_ = dir_.Write("slo.toml", toml);
    const std::string err = server_.Start({"--model", "stories=" + ModelPath("stories260K.gguf"),
                                           "--threads", "1", "--kv-memory", "16",
                                           "--config", config_});
    EXPECT_NE(err, "") << "serve started with a missing [[models]] path";
    EXPECT_TRUE(server_.exit_status().has_value());
    EXPECT_NE(server_.exit_status().value_or(0), 0);
    return server_.StderrText();
  }

  TempDir dir_;
  std::string config_;
  ServerProcess server_;
};

TEST_F(ConfigModelPathTest, AMissingModelPathStopsTheStartNamingFileEntryAndPath) {
  const std::string missing = dir_.path() + "/no-such-model.gguf";
  const std::string log = FailedStart("[[models]]\nname = \"stories\"\npath = \"" +
                                      ModelPath("stories260K.gguf") +
                                      "\"\n\n[[models]]\nname = \"light\"\npath = \"" + missing +
                                      "\"\n");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find(config_ + ":5:"), std::string::npos) << log;
  EXPECT_NE(log.find("models[1] ('light').path"), std::string::npos) << log;
  EXPECT_NE(log.find("'" + missing + "' does not exist"), std::string::npos) << log;
}

TEST_F(ConfigModelPathTest, ADirectoryAsModelPathStopsTheStart) {
  const std::string log =
      FailedStart("[[models]]\nname = \"stories\"\npath = \"" + dir_.path() + "\"\n");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find(config_ + ":1: models[0] ('stories').path: '" + dir_.path() +
                     "' is a directory, not a file"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace lifeline::integration

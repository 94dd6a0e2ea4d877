// Real chat templates rendered by our engine against the renderings Python jinja2 produced
// with Hugging Face's configuration (tests/template/gen_reference.py wrote data/reference.json;
// the templates are the model repositories' own, data/templates/SOURCES.md).
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/template/chat.h"
#include "template/jinja_test_util.h"

namespace lifeline::chat {
namespace {

using ojson = nlohmann::ordered_json;

// The instant gen_reference.py's strftime_now formats.
std::chrono::system_clock::time_point FixedNow() {
  return std::chrono::system_clock::time_point(std::chrono::seconds(1721995200));  // 2024-07-26T12:00:00Z
}

ChatInput InputFor(const ojson& conv) {
  ChatInput in;
  in.messages = conv.at("messages");
  if (conv.contains("tools")) in.tools = conv["tools"];
  if (conv.contains("documents")) in.documents = conv["documents"];
  in.add_generation_prompt = conv.value("add_generation_prompt", true);
  if (conv.contains("kwargs")) in.kwargs = conv["kwargs"];
  return in;
}

TEST(ChatTemplateReference, EveryRealTemplateRendersLikeJinja2) {
  const auto data = jinja::TemplateDataDir();
  const ojson ref = ojson::parse(jinja::ReadFileBytes(data / "reference.json"));
  const ojson convs = ojson::parse(jinja::ReadFileBytes(data / "conversations.json"));
  std::map<std::string, ojson> by_name;
  for (const ojson& c : convs) by_name[c.at("name").get<std::string>()] = c;
  ASSERT_GE(ref.at("cases").size(), 100u);
  std::map<std::string, ChatTemplate> templates;
  int rendered = 0, refused = 0, mismatches = 0;
  for (const ojson& c : ref.at("cases")) {
    const std::string name = c.at("template");
    const std::string conv = c.at("conversation");
    SCOPED_TRACE(name + " x " + conv);
    auto it = templates.find(name);
    if (it == templates.end()) {
      auto t = ChatTemplate::Create(jinja::ReadFileBytes(data / "templates" / (name + ".jinja")),
                                    Origin::kFile, name, c.at("bos_token"), c.at("eos_token"));
      ASSERT_TRUE(t.ok()) << t.status().message();
      it = templates.emplace(name, std::move(*t)).first;
    }
    ASSERT_TRUE(by_name.contains(conv));
    auto out = it->second.Render(InputFor(by_name[conv]), {}, FixedNow);
    if (c.contains("expected")) {
      ++rendered;
      if (!out.ok()) {
        ++mismatches;
        ADD_FAILURE() << "render failed: " << out.status().message();
      } else if (*out != c["expected"].get<std::string>()) {
        ++mismatches;
        const std::string& want = c["expected"].get_ref<const std::string&>();
        size_t at = 0;
        while (at < out->size() && at < want.size() && (*out)[at] == want[at]) ++at;
        const size_t from = at < 60 ? 0 : at - 60;
        ADD_FAILURE() << "first difference at byte " << at << " of " << want.size()
                      << "\n  jinja2: " << nlohmann::json(want.substr(from, 120)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                      << "\n  ours:   " << nlohmann::json(out->substr(from, 120)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      continue;
    }
    ++refused;
    ASSERT_FALSE(out.ok()) << "jinja2 failed with " << c["error"] << " but we rendered:\n" << *out;
    if (c.value("error_type", "") == "TemplateError") {
      // raise_exception: the template's own message, carried through unchanged.
      EXPECT_TRUE(jinja::IsTemplateRaise(out.status())) << out.status().message();
      EXPECT_EQ(out.status().message(), "template raised: " + c["error"].get<std::string>());
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << rendered << " renderings";
  std::cout << "reference cases: " << rendered << " rendered, " << refused << " refused\n";
}

}  // namespace
}  // namespace lifeline::chat

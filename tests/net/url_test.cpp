// http:// URLs as both OpenAI-compatible clients take them (remote members, bench targets).
#include "net/url.h"

#include <gtest/gtest.h>

namespace lifeline::net {
namespace {

TEST(HttpUrl, ParsesHostPortAndBasePath) {
  auto u = ParseHttpUrl("http://10.0.0.2:8000/v1/", "url");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "10.0.0.2");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->base_path, "/v1");
  auto d = ParseHttpUrl("http://example.com", "url");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 80);
  EXPECT_EQ(d->base_path, "");
  auto v6 = ParseHttpUrl("http://[::1]:9000/v1", "url");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 9000);
  EXPECT_EQ(v6->ToString(), "http://[::1]:9000/v1");
  EXPECT_EQ(v6->Authority(), "[::1]:9000");
}

TEST(HttpUrl, RejectsHttpsAndMalformedUrlsNamingTheField) {
  auto tls = ParseHttpUrl("https://api.example.com/v1", "models[cloud].url");
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("models[cloud].url"), std::string::npos);
  EXPECT_NE(tls.status().message().find("https:// is not supported"), std::string::npos)
      << tls.status().message();
  for (const char* bad : {"ftp://h/v1", "http://", "http://h:0/v1", "http://h:70000/",
                          "http://h:/v1", "http://u@h/v1", "http://h/v1?x=1", "h:80/v1"}) {
    auto r = ParseHttpUrl(bad, "url");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().rfind("url: ", 0), 0u) << r.status().message();
    }
  }
  // A comma would end a `bench --target URL,model=M` spec early: never part of a host.
  EXPECT_FALSE(ParseHttpUrl("http://x:1,color=red", "--target").ok());
}

}  // namespace
}  // namespace lifeline::net

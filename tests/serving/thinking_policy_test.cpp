// ApplyThinkingPolicy: which thinking budget a request gets -- its own, its effort's, none
// (enable_thinking false), the class default -- the class ceiling, and the SLO rung's scale
// (an unlimited budget is scaled from max_tokens), with what was asked and why it was lowered.
#include <gtest/gtest.h>

#include "serving/request_prep.h"

namespace lifeline::serving {
namespace {

struct Case {
  api::GenerationRequest req;
  slo::ThinkingPolicy policy;
  PreparedRequest out;
};

Case Thinking() {
  Case c;
  c.req.is_chat = true;
  c.out.reasoning = std::make_shared<ReasoningSetup>();
  c.out.max_tokens = 1000;
  return c;
}

TEST(ThinkingPolicy, TheRequestsOwnBudgetWinsThenItsEffortThenTheSwitchThenTheClass) {
  Case c = Thinking();
  c.policy.default_budget_tokens = 300;
  c.req.thinking_budget_tokens = 40;
  c.req.reasoning_effort = "high";
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 40);
  EXPECT_EQ(c.out.reasoning_budget_source, "request");

  c.req.thinking_budget_tokens.reset();
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 8192);
  EXPECT_EQ(c.out.reasoning_budget_source, "effort");
  c.policy.effort_budget_tokens = {1, 2, 3, 4};
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 4) << "the class's effort table";

  c.req.reasoning_effort.clear();
  c.req.chat_template_kwargs = {{"enable_thinking", false}};
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 0);
  EXPECT_EQ(c.out.reasoning_budget_source, "enable_thinking");

  c.req.chat_template_kwargs = nlohmann::ordered_json::object();
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 300);
  EXPECT_EQ(c.out.reasoning_budget_source, "class");
  c.policy.default_budget_tokens = -1;
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, -1);
  EXPECT_EQ(c.out.reasoning_budget_source, "none");
  EXPECT_EQ(c.out.reasoning_shortened_by, "");
}

TEST(ThinkingPolicy, TheCeilingThenTheRungLowerItAndSaySo) {
  Case c = Thinking();
  c.policy.max_budget_tokens = 500;
  c.req.thinking_budget_tokens = 2000;
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 500);
  EXPECT_EQ(c.out.reasoning_requested_tokens, 2000);
  EXPECT_EQ(c.out.reasoning_shortened_by, "class_max");

  c.policy.scale = 0.25;
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 125);
  EXPECT_EQ(c.out.reasoning_shortened_by, "slo");

  // Unlimited: the rung scales what max_tokens allows.
  c.policy.max_budget_tokens = -1;
  c.req.thinking_budget_tokens = -1;
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 250);
  // No thinking stays no thinking.
  c.req.thinking_budget_tokens = 0;
  ApplyThinkingPolicy(c.policy, c.req, &c.out);
  EXPECT_EQ(c.out.reasoning_budget_tokens, 0);
  EXPECT_EQ(c.out.reasoning_shortened_by, "");
}

TEST(ThinkingPolicy, ARequestWithoutAThinkingSetupIsLeftAlone) {
  api::GenerationRequest req;
  req.thinking_budget_tokens = 5;
  PreparedRequest out;
  ApplyThinkingPolicy(slo::ThinkingPolicy{}, req, &out);
  EXPECT_EQ(out.reasoning_budget_tokens, -1);
  EXPECT_EQ(out.reasoning_budget_source, "none");
}

}  // namespace
}  // namespace lifeline::serving

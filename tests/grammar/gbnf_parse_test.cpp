// GBNF parser and compiler: every construct of the dialect, escapes, repetitions, and the
// errors (line:column and what was expected), undefined rules, left recursion, limits.
// Acceptance is checked byte by byte through a matcher over a one-byte-per-token vocabulary.
#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"

namespace lifeline::grammar {
namespace {

using testing::IsPrefix;
using testing::Matches;
using testing::MustParse;

std::string ErrorOf(std::string_view gbnf, const GrammarLimits& limits = {}) {
  auto g = ParseGbnf(gbnf, limits);
  return g.ok() ? std::string("OK") : g.status().ToString();
}

TEST(GbnfParse, LiteralsSequencesAlternatives) {
  auto g = MustParse("root ::= \"ab\" \"c\" | \"x\"\n");
  EXPECT_TRUE(Matches(g, "abc"));
  EXPECT_TRUE(Matches(g, "x"));
  EXPECT_FALSE(Matches(g, "ab"));
  EXPECT_TRUE(IsPrefix(g, "ab"));
  EXPECT_FALSE(IsPrefix(g, "abx"));
  EXPECT_FALSE(Matches(g, "abcx"));
  EXPECT_FALSE(Matches(g, ""));
}

TEST(GbnfParse, RuleReferencesAndComments) {
  auto g = MustParse(R"g(# a comment line
root ::= greeting " " name   # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)g");
  EXPECT_TRUE(Matches(g, "hi Bob"));
  EXPECT_TRUE(Matches(g, "hello X"));
  EXPECT_FALSE(Matches(g, "hello bob"));
  EXPECT_FALSE(Matches(g, "hey Bob"));
}

TEST(GbnfParse, CharacterClassesRangesNegation) {
  auto g = MustParse("root ::= [a-cx] [^0-9a-z] [-] [a-]\n");
  EXPECT_TRUE(Matches(g, "bQ-a"));
  EXPECT_TRUE(Matches(g, "x!--"));
  EXPECT_FALSE(Matches(g, "d!--"));   // d not in [a-cx]
  EXPECT_FALSE(Matches(g, "a5--"));   // digit negated
  EXPECT_FALSE(Matches(g, "aq--"));   // lowercase negated
  EXPECT_FALSE(Matches(g, "a!-b"));   // [a-] is a or -
}

TEST(GbnfParse, AnyCharIsOneCodePoint) {
  auto g = MustParse("root ::= \"<\" . \">\"\n");
  EXPECT_TRUE(Matches(g, "<a>"));
  EXPECT_TRUE(Matches(g, "<\xC3\xA9>"));          // é: two bytes, one character
  EXPECT_TRUE(Matches(g, "<\xF0\x9F\x98\x80>"));  // U+1F600: four bytes
  EXPECT_FALSE(Matches(g, "<ab>"));
  EXPECT_FALSE(Matches(g, "<\xC3>"));             // truncated character
  EXPECT_FALSE(Matches(g, "<\xED\xA0\x80>"));     // encoded surrogate: not UTF-8
  EXPECT_FALSE(Matches(g, "<\xC0\x80>"));         // overlong encoding
}

TEST(GbnfParse, Escapes) {
  auto g = MustParse(R"g(root ::= "\n\t\r\\\"" [\[\]] "\x41\u00e9\U0001F600"
)g");
  EXPECT_TRUE(Matches(g, "\n\t\r\\\"[A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Matches(g, "\n\t\r\\\"]A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(g, "\n\t\r\\\"[a\xC3\xA9\xF0\x9F\x98\x80"));
  auto cls = MustParse(R"g(root ::= [\x00-\x1F\u4e00-\u4e01]
)g");
  EXPECT_TRUE(Matches(cls, std::string(1, '\0')));
  EXPECT_TRUE(Matches(cls, "\x1F"));
  EXPECT_TRUE(Matches(cls, "\xE4\xB8\x80"));  // U+4E00
  EXPECT_TRUE(Matches(cls, "\xE4\xB8\x81"));  // U+4E01
  EXPECT_FALSE(Matches(cls, "\xE4\xB8\x82"));
  EXPECT_FALSE(Matches(cls, " "));
}

TEST(GbnfParse, RawUtf8InLiteralsAndClasses) {
  auto g = MustParse("root ::= \"日本\" [ぁ-ゖ]+\n");
  EXPECT_TRUE(Matches(g, "日本ご"));
  EXPECT_TRUE(Matches(g, "日本ごはん"));
  EXPECT_FALSE(Matches(g, "日本"));
  EXPECT_FALSE(Matches(g, "日本カ"));  // katakana outside the hiragana range
}

TEST(GbnfParse, Repetitions) {
  auto g = MustParse("root ::= \"a\"* \"b\"+ \"c\"? \"d\"{2} \"e\"{1,} \"f\"{0,2}\n");
  EXPECT_TRUE(Matches(g, "bdde"));
  EXPECT_TRUE(Matches(g, "aaabbcddeeeff"));
  EXPECT_FALSE(Matches(g, "dde"));          // b+ needs one
  EXPECT_FALSE(Matches(g, "bccdde"));       // c? at most one
  EXPECT_FALSE(Matches(g, "bddde"));        // d{2} exactly two
  EXPECT_FALSE(Matches(g, "bdd"));          // e{1,} at least one
  EXPECT_FALSE(Matches(g, "bddefff"));      // f{0,2} at most two
  auto r = MustParse("root ::= ( \"ab\" | \"c\" ){2,3}\n");
  EXPECT_TRUE(Matches(r, "abc"));
  EXPECT_TRUE(Matches(r, "cabc"));
  EXPECT_FALSE(Matches(r, "c"));
  EXPECT_FALSE(Matches(r, "cccc"));
  auto zero = MustParse("root ::= \"x\" \"y\"{0} \"z\"{0,0}\n");
  EXPECT_TRUE(Matches(zero, "x"));
  EXPECT_FALSE(Matches(zero, "xy"));
}

TEST(GbnfParse, GroupsSpanLinesAndAlternativesContinue) {
  auto g = MustParse(R"g(root ::= (
    "a"
  | "b" ) "!"
  | "c"
other ::= "unused"
)g");
  EXPECT_TRUE(Matches(g, "a!"));
  EXPECT_TRUE(Matches(g, "b!"));
  EXPECT_TRUE(Matches(g, "c"));
  EXPECT_FALSE(Matches(g, "c!"));
}

TEST(GbnfParse, RecursionThatConsumesIsFine) {
  auto g = MustParse(R"g(root ::= "(" root* ")" | "x"
)g");
  EXPECT_TRUE(Matches(g, "x"));
  EXPECT_TRUE(Matches(g, "(x(x())x)"));
  EXPECT_FALSE(Matches(g, "(x"));
  EXPECT_FALSE(Matches(g, "(x))"));
  auto expr = MustParse(R"g(root ::= term ("+" term)*
term ::= [0-9]+ | "(" root ")"
)g");
  EXPECT_TRUE(Matches(expr, "1+(2+34)+5"));
  EXPECT_FALSE(Matches(expr, "1+"));
}

TEST(GbnfParse, EmptyAlternativesAndEmptyLiteral) {
  auto g = MustParse("root ::= \"a\" opt \"b\"\nopt ::= | \"x\" | \"\"\n");
  EXPECT_TRUE(Matches(g, "ab"));
  EXPECT_TRUE(Matches(g, "axb"));
  EXPECT_FALSE(Matches(g, "axxb"));
}

TEST(GbnfParse, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("root ::= [a-z"),
            "invalid_argument: line 1, column 14: expected ']' to close the class started at "
            "line 1, column 10");
  EXPECT_EQ(ErrorOf("root ::= \"abc"),
            "invalid_argument: line 1, column 14: expected '\"' to close the string started at "
            "line 1, column 10");
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nx = \"b\""),
            "invalid_argument: line 2, column 3: expected '::=' after rule name 'x', found '='");
  EXPECT_EQ(ErrorOf("root ::= ( \"a\" \n"),
            "invalid_argument: line 2, column 1: expected ')' to close the '(' at line 1, "
            "column 10, found end of input");
  EXPECT_EQ(ErrorOf("root ::= \"a\" )"),
            "invalid_argument: line 1, column 14: expected an item, '|' or the end of the line, "
            "found ')'");
  EXPECT_EQ(ErrorOf("root ::= * \"a\""),
            "invalid_argument: line 1, column 10: expected an item before '*'");
  EXPECT_EQ(ErrorOf("root ::= \"\\q\""),
            "invalid_argument: line 1, column 11: unknown escape '\\q' (expected one of \\n \\r "
            "\\t \\\\ \\\" \\[ \\] \\x \\u \\U)");
  EXPECT_EQ(ErrorOf("root ::= \"\\x4\""),
            "invalid_argument: line 1, column 14: expected 2 hex digits after '\\x', found '\"'");
  EXPECT_EQ(ErrorOf("root ::= [z-a]"),
            "invalid_argument: line 1, column 11: character range with its end below its start");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{3,2}"),
            "invalid_argument: line 1, column 13: repetition {3,2}: expected the maximum to be at "
            "least the minimum");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{x}"),
            "invalid_argument: line 1, column 14: expected a number, found 'x'");
  EXPECT_EQ(ErrorOf("root ::= <[42]>"),
            "invalid_argument: line 1, column 10: token references are not supported (the "
            "grammar knows no vocabulary)");
  EXPECT_EQ(ErrorOf("  ::= \"a\""),
            "invalid_argument: line 1, column 3: expected a rule name, found ':'");
  EXPECT_EQ(ErrorOf("root ::= \"\\U00110000\""),
            "invalid_argument: line 1, column 11: code point above U+10FFFF");
  EXPECT_EQ(ErrorOf(std::string("root ::= \"\xC3\"")), "invalid_argument: line 1, column 11: invalid UTF-8");
}

TEST(GbnfParse, UndefinedDuplicateAndMissingRoot) {
  EXPECT_EQ(ErrorOf("root ::= a b\na ::= \"x\"\n"),
            "invalid_argument: line 1, column 12: undefined rule 'b'");
  EXPECT_EQ(ErrorOf("root ::= \"x\"\nroot ::= \"y\"\n"),
            "invalid_argument: line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(ErrorOf("start ::= \"x\"\n"),
            "invalid_argument: grammar has no rule named 'root' (the entry rule)");
  EXPECT_EQ(ErrorOf(""), "invalid_argument: grammar has no rule named 'root' (the entry rule)");
}

TEST(GbnfParse, LeftRecursionIsRefusedAtParseTime) {
  const std::string kMsg =
      "' can reach itself without consuming input (left recursion, or a repetition of "
      "something that can match the empty string)";
  EXPECT_EQ(ErrorOf("root ::= root \"a\" | \"b\"\n"),
            "invalid_argument: line 1, column 1: rule 'root" + kMsg);
  // Through another rule, and through a rule that can match nothing.
  EXPECT_EQ(ErrorOf("root ::= expr\nexpr ::= term \"+\" expr | term\nterm ::= expr \"*\" | \"1\"\n"),
            "invalid_argument: line 2, column 1: rule 'expr" + kMsg);
  EXPECT_EQ(ErrorOf("root ::= ws root \"x\" | \"y\"\nws ::= [ ]*\n"),
            "invalid_argument: line 1, column 1: rule 'root" + kMsg);
  // A repetition of a rule that can match the empty string loops without input too.
  EXPECT_EQ(ErrorOf("root ::= ws*\nws ::= [ ]*\n"),
            "invalid_argument: line 1, column 1: rule 'root" + kMsg);
  // The same shapes with input first are fine.
  EXPECT_EQ(ErrorOf("root ::= \"a\" root | \"b\"\n"), "OK");
  EXPECT_EQ(ErrorOf("root ::= (\"a\"?)*\n"), "OK");  // inlined: an empty loop inside one rule
}

TEST(GbnfParse, RootThatNeverCompletesIsRefused) {
  EXPECT_EQ(ErrorOf("root ::= \"a\" root\n"),
            "invalid_argument: line 1, column 1: rule 'root' can never complete (no text matches "
            "the grammar)");
  EXPECT_EQ(ErrorOf("root ::= [^\\x00-\\U0010FFFF]\n"),
            "invalid_argument: line 1, column 1: rule 'root' can never complete (no text matches "
            "the grammar)");
}

TEST(GbnfParse, Limits) {
  GrammarLimits small;
  small.max_text_bytes = 16;
  EXPECT_EQ(ErrorOf("root ::= \"0123456789\"", small),
            "resource_exhausted: grammar text is 21 bytes, above the limit of 16 (max_text_bytes)");
  small = {};
  small.max_rules = 2;
  EXPECT_EQ(ErrorOf("root ::= a b\na ::= \"x\"\nb ::= \"y\"\n", small),
            "resource_exhausted: line 1, column 12: grammar has more than 2 rules (max_rules)");
  small = {};
  small.max_repetition = 10;
  EXPECT_EQ(ErrorOf("root ::= \"a\"{11}", small),
            "resource_exhausted: line 1, column 13: repetition count above 10 (max_repetition)");
  small = {};
  small.max_nesting = 3;
  EXPECT_EQ(ErrorOf("root ::= ((((\"a\"))))", small),
            "resource_exhausted: line 1, column 13: grammar has more than 3 nested parentheses "
            "(max_nesting)");
  small = {};
  small.max_alternatives = 2;
  EXPECT_EQ(ErrorOf("root ::= \"a\" | \"b\" | \"c\" | \"d\"", small),
            "resource_exhausted: line 1, column 26: grammar has more than 2 alternatives "
            "(max_alternatives)");
  small = {};
  small.max_elements = 5;
  EXPECT_EQ(ErrorOf("root ::= \"abcdefgh\"", small),
            "resource_exhausted: line 1, column 16: grammar has more than 5 elements (max_elements)");
  // Repetitions multiply: 2000 x 2000 copies would be 4M states.
  EXPECT_EQ(ErrorOf("root ::= (\"a\"{2000}){2000}"),
            "resource_exhausted: grammar expands to more than 262144 automaton states "
            "(max_states); reduce repetition counts or rule sizes");
  EXPECT_EQ(ErrorOf("root ::= \"a\"*+?*+"),
            "invalid_argument: line 1, column 17: too many repetition operators on one item (at "
            "most 4)");
}

TEST(GbnfParse, SmallRulesAreInlinedLoopsAndRecursionStay) {
  auto g = MustParse(R"g(root ::= "{" ws item ("," ws item)* "}"
item ::= str | obj
str ::= "\"" [a-z]* "\""
obj ::= "{" ws "}" | root
ws ::= [ ]?
)g");
  // ws (small, finite) is inlined; str has a loop; item/obj/root are recursive.
  GrammarStats s = GetGrammarStats(*g);
  EXPECT_EQ(s.rules, 4);
  EXPECT_TRUE(Matches(g, "{ \"ab\", {{}}}"));
}

}  // namespace
}  // namespace lifeline::grammar

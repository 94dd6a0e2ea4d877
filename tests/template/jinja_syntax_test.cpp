// Output of values, control flow, whitespace control and expressions.
//
// Every expected string in this file was produced by Python jinja2 3.x configured the way
// Hugging Face transformers configures it (ImmutableSandboxedEnvironment, trim_blocks=True,
// lstrip_blocks=True, jinja2.ext.loopcontrols, tojson = json.dumps(ensure_ascii=False),
// raise_exception, strftime_now at a fixed instant), never written by hand. Globals are JSON
// text parsed in order (nlohmann::ordered_json), as json.loads keeps dict order in Python.
#include <string>

#include <gtest/gtest.h>

#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

// Plain text and string expressions are emitted byte for byte (UTF-8 untouched).
TEST(JinjaOutput, StringsAndTextPassThrough) {
  EXPECT_EQ(R("hello"), "hello");
  EXPECT_EQ(R("{{ 'abc' }}"), "abc");
  EXPECT_EQ(R(R"({{ "déjà vu — 你好" }})"), "déjà vu — 你好");
  EXPECT_EQ(R("a{{ '' }}b"), "ab");
}

// Ints keep no decimal point; negatives keep their sign.
TEST(JinjaOutput, IntsPrintAsPythonInts) {
  EXPECT_EQ(R("{{ 42 }}"), "42");
  EXPECT_EQ(R("{{ -7 }}"), "-7");
  EXPECT_EQ(R("{{ 0 }}"), "0");
  EXPECT_EQ(R("{{ 1234567890123 }}"), "1234567890123");
  EXPECT_EQ(R("{{ n }}", J(R"({"n": -5})")), "-5");
}

// Python's float repr: shortest round-trip digits, '.0' on whole values, exponent outside [1e-4,
// 1e16).
TEST(JinjaOutput, FloatsPrintAsPythonRepr) {
  EXPECT_EQ(R("{{ 1.0 }}"), "1.0");
  EXPECT_EQ(R("{{ 0.1 }}"), "0.1");
  EXPECT_EQ(R("{{ 1e-5 }}"), "1e-05");
  EXPECT_EQ(R("{{ 1e20 }}"), "1e+20");
  EXPECT_EQ(R("{{ -0.0 }}"), "-0.0");
  EXPECT_EQ(R("{{ 2.5 }}"), "2.5");
  EXPECT_EQ(R("{{ 1E3 }}"), "1000.0");
  EXPECT_EQ(R("{{ 123456789.125 }}"), "123456789.125");
  EXPECT_EQ(R("{{ 0.0001 }}"), "0.0001");
  EXPECT_EQ(R("{{ 1e16 }}"), "1e+16");
  EXPECT_EQ(R("{{ 1e15 }}"), "1000000000000000.0");
  EXPECT_EQ(R("{{ 0.1 + 0.2 }}"), "0.30000000000000004");
  EXPECT_EQ(R("{{ a }} {{ b }} {{ c }} {{ d }}",
              J(R"({"a": 1.0, "b": 0.00001, "c": 1e20, "d": 3.14159})")),
            "1.0 1e-05 1e+20 3.14159");
}

// Python spellings, whichever literal case was used.
TEST(JinjaOutput, NoneAndBooleansPrintCapitalized) {
  EXPECT_EQ(R("{{ none }} {{ None }}"), "None None");
  EXPECT_EQ(R("{{ true }} {{ True }} {{ false }} {{ False }}"), "True True False False");
  EXPECT_EQ(R("{{ n }} {{ t }} {{ f }}", J(R"({"n": null, "t": true, "f": false})")),
            "None True False");
}

// Containers print like Python's repr, nested, strings quoted.
TEST(JinjaOutput, ListsAndDictsPrintAsPythonRepr) {
  EXPECT_EQ(R("{{ [1, 'a', None] }}"), "[1, 'a', None]");
  EXPECT_EQ(R("{{ {'a': 1} }}"), "{'a': 1}");
  EXPECT_EQ(R("{{ [] }}{{ {} }}"), "[]{}");
  EXPECT_EQ(R("{{ {'a': [1, 2.0, {'b': none}], 'c': true} }}"),
            "{'a': [1, 2.0, {'b': None}], 'c': True}");
  EXPECT_EQ(R("{{ messages[0] }}", J(R"({"messages": [{"role": "user", "content": "hi"}]})")),
            "{'role': 'user', 'content': 'hi'}");
  EXPECT_EQ(R("{{ x }}", J(R"({"x": [[1, [2]], {"k": ["v"]}]})")), "[[1, [2]], {'k': ['v']}]");
}

// repr picks double quotes when the string holds a single quote, and escapes newlines and
// backslashes.
TEST(JinjaOutput, ReprOfStringsInsideContainersFollowsPython) {
  EXPECT_EQ(R(R"({{ ["it's"] }})"), R"(["it's"])");
  EXPECT_EQ(R(R"({{ ['a"b'] }})"), R"(['a"b'])");
  EXPECT_EQ(R(R"({{ ['a\nb'] }})"), R"(['a\nb'])");
  EXPECT_EQ(R(R"({{ ['back\\slash'] }})"), R"(['back\\slash'])");
  EXPECT_EQ(R("{{ ['é'] }}"), "['é']");
}

// jinja2's default Undefined renders as the empty string.
TEST(JinjaOutput, UndefinedNamesPrintNothing) {
  EXPECT_EQ(R("[{{ nothing }}]"), "[]");
  EXPECT_EQ(R("[{{ nothing|default('') }}]"), "[]");
  EXPECT_EQ(R("{{ nothing is defined }}"), "False");
  EXPECT_EQ(R("[{{ m.missing }}][{{ m['missing'] }}]", J(R"({"m": {"role": "user"}})")), "[][]");
}

// Only the first true branch renders.
TEST(JinjaControl, IfElifElseTakesFirstTrueBranch) {
  const char* const kTemplate =
      "{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 2 %}dup{% else %}other{% endif %}";
  EXPECT_EQ(R(kTemplate, J(R"({"x": 1})")), "one");
  EXPECT_EQ(R(kTemplate, J(R"({"x": 2})")), "two");
  EXPECT_EQ(R(kTemplate, J(R"({"x": 9})")), "other");
  EXPECT_EQ(R("{% if false %}no{% endif %}|"), "|");
  EXPECT_EQ(R("{% if true %}{% if false %}a{% else %}b{% endif %}{% endif %}"), "b");
}

// Empty containers/strings, 0, 0.0 and none are false; 'False' is a true string.
TEST(JinjaControl, TruthinessFollowsPython) {
  EXPECT_EQ(R("{% for v in [[], {}, '', 0, 0.0, none, [0], {'a': 0}, ' ', 1, -1, 0.5, 'False'] "
              "%}"
              "{{ 'T' if v else 'F' }}{% endfor %}"),
            "FFFFFFTTTTTTT");
  EXPECT_EQ(R("{% if undefined_thing %}T{% else %}F{% endif %}"), "F");
}

// A dict iterates its keys (insertion order); a string its code points.
TEST(JinjaControl, ForIteratesListsDictKeysAndStrings) {
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ x }},{% endfor %}"), "1,2,3,");
  EXPECT_EQ(R("{% for k in {'b': 1, 'a': 2} %}{{ k }},{% endfor %}"), "b,a,");
  EXPECT_EQ(R("{% for c in 'hé!' %}[{{ c }}]{% endfor %}"), "[h][é][!]");
  EXPECT_EQ(R("{% for x in (1, 2) %}{{ x }}{% endfor %}"), "12");
  EXPECT_EQ(R("{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(2, 9, 3) %}{{ i }}"
              "{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}"),
            "012|258|321");
}

// The inline `if` filters items before loop.* counts; `else` runs on an empty loop.
TEST(JinjaControl, ForWithFilterConditionAndElse) {
  EXPECT_EQ(R("{% for x in [1, 2, 3, 4, 5] if x is odd %}{{ loop.index }}:{{ x }}/"
              "{{ loop.length }} {% endfor %}"),
            "1:1/3 2:3/3 3:5/3 ");
  EXPECT_EQ(R("{% for x in [] %}item{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in [1, 2] if x > 5 %}item{% else %}none matched{% endfor %}"),
            "none matched");
  EXPECT_EQ(R("{% for x in [1] %}item{% else %}empty{% endfor %}"), "item");
  EXPECT_EQ(R("{% for x in missing %}item{% else %}empty{% endfor %}"), "empty");
}

// loop.index/index0/first/last/length/revindex/revindex0/previtem/nextitem/cycle.
TEST(JinjaControl, LoopVariables) {
  EXPECT_EQ(R("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
              "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};"
              "{% endfor %}"),
            "10TrueFalse332;21FalseFalse321;32FalseTrue310;");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"),
            "-2,1-3,2-,");
  EXPECT_EQ(R("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
  EXPECT_EQ(R("{% for x in [1, 2] %}{% for y in [3, 4] %}{{ loop.index }}{% endfor %}"
              "{{ loop.index }}|{% endfor %}"),
            "121|122|");
}

// loopcontrols extension, as Hugging Face enables it.
TEST(JinjaControl, BreakAndContinue) {
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "012");
  EXPECT_EQ(R("{% for x in range(6) %}{% if x is even %}{% continue %}{% endif %}{{ x }}"
              "{% endfor %}"),
            "135");
  EXPECT_EQ(R("{% for x in [1, 2] %}{% for y in [1, 2, 3] %}{% if y == 2 %}{% break %}"
              "{% endif %}{{ x }}{{ y }} {% endfor %}{% endfor %}"),
            "11 21 ");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{% if loop.last %}{% break %}{% endif %}{{ x }}"
              "{% else %}never{% endfor %}"),
            "12");
}

// for k, v in d.items() and over lists of pairs.
TEST(JinjaControl, TupleUnpackingInFor) {
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=[2];");
  EXPECT_EQ(R("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}"), "3,7,");
  EXPECT_EQ(R("{% for a, b in [(1, 'x'), (2, 'y')] %}{{ b }}{{ a }}{% endfor %}"), "x1y2");
  EXPECT_EQ(R("{% for k, v in tools.items() %}{{ k }}:{{ v }} {% endfor %}",
              J(R"({"tools": {"a": 1, "b": "two"}})")),
            "a:1 b:two ");
}

// set, tuple set, and {% set x %}...{% endset %} capturing rendered text.
TEST(JinjaControl, SetAssignsAndBlockSetCaptures) {
  EXPECT_EQ(R("{% set x = 'v' %}{{ x }}"), "v");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(R("{% set x %}Hello {{ 'world' }}!{% endset %}[{{ x }}]"), "[Hello world!]");
  EXPECT_EQ(R("{% set x | upper %}abc{% endset %}{{ x }}"), "ABC");
  EXPECT_EQ(R("{% set x = 1 %}{% set x = x + 1 %}{{ x }}"), "2");
  EXPECT_EQ(R("{% set name = user ~ '!' %}{{ name }}", J(R"({"user": "Ann"})")), "Ann!");
}

// Each loop iteration has its own scope; `if` does not make one.
TEST(JinjaControl, SetInsideForDoesNotLeakOut) {
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [5, 6] %}{% set x = i %}{{ x }}{% endfor %}{{ x }}"),
            "561");
  EXPECT_EQ(R("{% for i in [1] %}{% set inner = 'in' %}{% endfor %}[{{ inner }}]"), "[]");
  EXPECT_EQ(R("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
  EXPECT_EQ(R("{% set x = 'outer' %}{% for i in [1, 2] %}{{ x }}{% set x = 'inner' ~ i %}"
              "{{ x }} {% endfor %}{{ x }}"),
            "outerinner1 outerinner2 outer");
}

// namespace() attributes set in a loop stay set after it (the HF idiom).
TEST(JinjaControl, NamespaceCarriesStateOutOfLoops) {
  EXPECT_EQ(R("{% set ns = namespace(found=false) %}{% for m in [1, 2, 3] %}{% if m == 2 %}"
              "{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}"),
            "True");
  EXPECT_EQ(R("{% set ns = namespace(count=0, text='') %}{% for c in 'abc' %}"
              "{% set ns.count = ns.count + 1 %}{% set ns.text = ns.text ~ c|upper %}"
              "{% endfor %}{{ ns.count }} {{ ns.text }}"),
            "3 ABC");
  EXPECT_EQ(R("{% set ns = namespace() %}{% set ns.x = 5 %}{{ ns.x }}"), "5");
  EXPECT_EQ(R("{% set ns = namespace(last_user=-1) %}{% for m in messages %}"
              "{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}"
              "{% endfor %}{{ ns.last_user }}",
              ThreeMessages()),
            "1");
}

// Macro calls bind positional, keyword and default arguments.
TEST(JinjaControl, MacrosWithDefaultsAndKeywordArguments) {
  EXPECT_EQ(R("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!"
              "{% endmacro %}{{ greet('Bob') }} {{ greet('Ann', greeting='Hi') }} "
              "{{ greet('Cy', 'Yo') }}"),
            "Hello, Bob! Hi, Ann! Yo, Cy!");
  EXPECT_EQ(R("{% macro m() %}[{{ x }}]{% endmacro %}{% set x = 'seen' %}{{ m() }}"), "[seen]");
  EXPECT_EQ(R("{% macro role_of(m) %}{{ m.role|upper }}{% endmacro %}{% for m in messages %}"
              "{{ role_of(m) }} {% endfor %}",
              ThreeMessages()),
            "SYSTEM USER ASSISTANT ");
  EXPECT_EQ(R("{% macro f(a, b=2) %}{{ a * b }}{% endmacro %}{{ f(3) ~ '|' ~ f(3, b=5) }}"),
            "6|15");
}

// Recursion works while it stays under max_depth.
TEST(JinjaControl, RecursiveMacroWithinDepthLimit) {
  EXPECT_EQ(R("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}"
              "{% endmacro %}{{ fact(10) }}"),
            "3628800");
  EXPECT_EQ(R("{% macro walk(x) %}{% if x is mapping %}{{ '{' }}{% for k, v in x.items() %}"
              "{{ k }}:{{ walk(v) }}{% endfor %}{{ '}' }}{% else %}{{ x }}{% endif %}"
              "{% endmacro %}{{ walk({'a': {'b': {'c': 1}}, 'd': 2}) }}"),
            "{a:{b:{c:1}}d:2}");
}

// {% call %} passes its body as caller().
TEST(JinjaControl, MacroCallerBlock) {
  EXPECT_EQ(R("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
              "{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}"),
            "<b>bold 2</b>");
}

// {% filter %} runs a filter over its rendered body.
TEST(JinjaControl, FilterBlockAppliesToRenderedBody) {
  EXPECT_EQ(R("{% filter upper %}hello {{ 'world' }}{% endfilter %}!"), "HELLO WORLD!");
  EXPECT_EQ(R("{% filter trim %}   spaced   {% endfilter %}|"), "spaced|");
  EXPECT_EQ(R("{% filter replace('a', 'o') %}banana{% endfilter %}"), "bonono");
}

// {% raw %} emits template syntax unevaluated.
TEST(JinjaControl, RawBlockIsVerbatim) {
  EXPECT_EQ(R("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

// transformers' {% generation %} tag renders its body unchanged.
TEST(JinjaControl, GenerationBlockIsTransparent) {
  EXPECT_EQ(R("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
              "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|"
              "{% endfor %}",
              ThreeMessages()),
            "Be brief.|Hi|Hello.|");
  EXPECT_EQ(R(R"j(a
{% generation %}
b
{% endgeneration %}
c)j"),
            "a\nb\nc");
}

// trim_blocks: the first newline after %} goes; after }} it stays.
TEST(JinjaWhitespace, TrimBlocksDropsNewlineAfterBlockTags) {
  EXPECT_EQ(R("{% if true %}\nX\n{% endif %}\nY"), "X\nY");
  EXPECT_EQ(R("{{ 'a' }}\nb"), "a\nb");
  EXPECT_EQ(R("{% set x = 1 %}\n\n{{ x }}"), "\n1");
  EXPECT_EQ(R("{% for i in [1, 2] %}\n{{ i }}\n{% endfor %}\n"), "1\n2\n");
}

// lstrip_blocks: spaces/tabs from line start to a block tag go; not before }}.
TEST(JinjaWhitespace, LstripBlocksStripsIndentBeforeBlockTags) {
  EXPECT_EQ(R("  {% if true %}\nX\n  {% endif %}\n"), "X\n");
  EXPECT_EQ(R("\t{% if true %}\n  {{ 'kept' }}\n\t{% endif %}\n"), "  kept\n");
  EXPECT_EQ(R("a  {% if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(R("  {%+ if true %}X{% endif %}"), "  X");
}

// {%- -%} and {{- -}} eat all whitespace incl. newlines on that side.
TEST(JinjaWhitespace, DashTrimsAdjacentWhitespace) {
  EXPECT_EQ(R("a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c"), "abc");
  EXPECT_EQ(R(R"j(x

{{- 'y' -}}

z)j"),
            "xyz");
  EXPECT_EQ(R("{{ 'a' -}}   \n   {{- 'b' }}"), "ab");
  EXPECT_EQ(R("{% for i in [1, 2, 3] -%}\n  {{ i }}\n{%- endfor %}"), "123");
}

// {# #} vanishes; a comment alone on a line takes the line with it; {#- -#} trims.
TEST(JinjaWhitespace, CommentsRenderNothing) {
  EXPECT_EQ(R("a{# hidden {{ x }} #}b"), "ab");
  EXPECT_EQ(R("x\n  {# own line #}\ny"), "x\ny");
  EXPECT_EQ(R("a  {#- trimmed -#}  \n  b"), "ab");
  EXPECT_EQ(R("{# multi\nline #}z"), "z");
}

// jinja2's keep_trailing_newline=False (HF keeps the default): one final newline of the source
// goes.
TEST(JinjaWhitespace, SingleTrailingNewlineIsDropped) {
  EXPECT_EQ(R("a\n"), "a");
  EXPECT_EQ(R("a\n\n"), "a\n");
  EXPECT_EQ(R("{{ 'x' }}\n"), "x");
  EXPECT_EQ(R("a\nb"), "a\nb");
  EXPECT_EQ(R(R"({{ 'x\n' }})"), "x\n");
}

// jinja2 normalizes \r\n in template text to \n (newline_sequence), so trim_blocks works on them
// too.
TEST(JinjaWhitespace, CrlfLineEndingsBecomeNewlines) {
  EXPECT_EQ(R("a\r\nb\r\nc"), "a\nb\nc");
  EXPECT_EQ(R("{% if true %}\r\nX\r\n{% endif %}\r\nY"), "X\nY");
}

// With trim_blocks/lstrip_blocks off, newlines and indents stay.
TEST(JinjaWhitespace, OptionsOffKeepWhitespace) {
  EXPECT_EQ(RNoOpts("  {% if true %}\nX\n  {% endif %}\n"), "  \nX\n  ");
  EXPECT_EQ(RNoOpts("{% for i in [1, 2] %}\n{{ i }}\n{% endfor %}\n"), "\n1\n\n2\n");
}

// Int/float mixing, true division, floor division and modulo round toward -inf.
TEST(JinjaExpr, ArithmeticFollowsPython) {
  EXPECT_EQ(R("{{ 1 + 2 }} {{ 10 - 3 * 2 }} {{ (10 - 3) * 2 }} {{ 2 ** 10 }}"), "3 4 14 1024");
  EXPECT_EQ(R("{{ 7 / 2 }} {{ 6 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} "
              "{{ 7 % -3 }}"),
            "3.5 3.0 3 -4 1 2 -2");
  EXPECT_EQ(R("{{ 1 + 2.0 }} {{ 7.5 // 2 }} {{ 2 ** -1 }} {{ 2.0 * 3 }} {{ 5.5 % 2 }} "
              "{{ -7.0 // 2 }}"),
            "3.0 3.0 0.5 6.0 1.5 -4.0");
  EXPECT_EQ(R("{{ -3 + 1 }} {{ - (2 + 3) }} {{ +4 }} {{ 10 / 4 * 2 }}"), "-2 -5 4 5.0");
  EXPECT_EQ(R("{{ n * 2 }} {{ n / 4 }} {{ f + 1 }}", J(R"({"n": 6, "f": 0.5})")), "12 1.5 1.5");
}

// Unlike Python, jinja2 parses a ** b ** c as (a ** b) ** c.
TEST(JinjaExpr, PowerIsLeftAssociativeInJinja) {
  EXPECT_EQ(R("{{ 2 ** 3 ** 2 }}"), "64");
}

// ==, !=, <, <=, >, >= on numbers, strings, lists; 1 == 1.0; '1' != 1.
TEST(JinjaExpr, Comparisons) {
  EXPECT_EQ(R("{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 4 >= 5 }} {{ 1 == 1.0 }} {{ '1' == 1 }} "
              "{{ 1 != 2 }}"),
            "True True False False True False True");
  EXPECT_EQ(R("{{ 'a' < 'b' }} {{ 'B' < 'a' }} {{ [1, 2] == [1, 2] }} "
              "{{ {'a': 1} == {'a': 1} }} {{ none == none }} {{ 'abc' == 'abc' }}"),
            "True True True True True True");
}

// Substring, list membership and dict keys.
TEST(JinjaExpr, InAndNotIn) {
  EXPECT_EQ(R("{{ 'ell' in 'hello' }} {{ 'z' in 'hello' }} {{ 2 in [1, 2] }} "
              "{{ 'a' in {'a': 1} }} {{ 1 in {'a': 1} }}"),
            "True False True True False");
  EXPECT_EQ(R("{{ 'x' not in 'abc' }} {{ not 'a' in 'abc' }} {{ 3 not in [1, 2] }} "
              "{{ '' in 'abc' }}"),
            "True False True True");
  EXPECT_EQ(R("{{ 'tools' in g }} {{ 'role' in messages[0] }}",
              J(R"({"g": {"tools": []}, "messages": [{"role": "user"}]})")),
            "True True");
}

// and/or return the deciding operand, as in Python; not returns a bool.
TEST(JinjaExpr, AndOrReturnOperandsNotBooleans) {
  EXPECT_EQ(R("{{ '' or 'x' }} {{ 'a' and 'b' }} {{ 0 and 1 }} {{ none or [] }} "
              "{{ 'a' or 'b' }} {{ [] and 'x' }}"),
            "x b 0 [] a []");
  EXPECT_EQ(R("{{ not [] }} {{ not 'a' }} {{ not none }} {{ true and not false }}"),
            "True False True True");
  EXPECT_EQ(R("{{ missing or 'fallback' }}"), "fallback");
}

// x if c else y; x if c alone yields undefined (prints nothing).
TEST(JinjaExpr, ConditionalExpressions) {
  EXPECT_EQ(R("{{ 'yes' if true else 'no' }} {{ 'yes' if 0 else 'no' }}"), "yes no");
  EXPECT_EQ(R("[{{ 'x' if false }}]"), "[]");
  EXPECT_EQ(R("{{ 'a' if false else 'b' if true else 'c' }}"), "b");
  EXPECT_EQ(R("{{ ('p' if true else 'q') ~ '!' }}"), "p!");
}

// + joins same types, ~ stringifies anything, * repeats strings and lists.
TEST(JinjaExpr, ConcatenationAndRepetition) {
  EXPECT_EQ(R("{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none ~ true }} {{ [1] + [2] }} {{ 1 ~ 2 }}"),
            "ab a1NoneTrue [1, 2] 12");
  EXPECT_EQ(R("{{ 'ab' * 3 }} {{ 3 * 'ab' }} {{ [0] * 3 }} {{ 'x' * 0 }}|"),
            "ababab ababab [0, 0, 0] |");
  EXPECT_EQ(R("{{ 'v' ~ 1.5 ~ [1] ~ {'a': 'b'} }}"), "v1.5[1]{'a': 'b'}");
  EXPECT_EQ(R("{{ 'n=' ~ missing ~ '.' }}"), "n=.");
}

// Negative indices, [a:b:c] slices of strings and lists, out of range is undefined.
TEST(JinjaExpr, IndexingAndSlicing) {
  EXPECT_EQ(R("{{ 'hello'[::-1] }} {{ 'hello'[1:] }} {{ 'hello'[:-1] }} {{ 'hello'[-1] }} "
              "{{ 'hello'[1:4] }} {{ 'hello'[::2] }}"),
            "olleh ello hell o ell hlo");
  EXPECT_EQ(R("{{ [1, 2, 3, 4][1:3] }} {{ [1, 2, 3, 4][::-2] }} {{ [1, 2, 3][-1] }} "
              "{{ [1, 2, 3][5:] }} {{ [1, 2, 3][-10:2] }}"),
            "[2, 3] [4, 2] 3 [] [1, 2]");
  EXPECT_EQ(R("[{{ [1, 2][5] }}][{{ 'abc'[10] }}]"), "[][]");
  EXPECT_EQ(R("{{ messages[-1].content }} {{ messages[1:]|length }} {{ messages[0]['role'] }}",
              ThreeMessages()),
            "Hello. 2 system");
  EXPECT_EQ(R("{{ 'héllo'[1] }} {{ 'héllo'[::-1] }} {{ 'héllo'[:2] }}"), "é olléh hé");
}

// m.role and m['role'] both reach dict members; missing ones are undefined.
TEST(JinjaExpr, AttributeAndItemAccess) {
  EXPECT_EQ(R("{{ m.role }} {{ m['role'] }} {{ m.content.text }} [{{ m.nope }}]",
              J(R"({"m": {"role": "user", "content": {"text": "t"}}})")),
            "user user t []");
  EXPECT_EQ(R("{{ m.nope is defined }} {{ m.role is defined }} {{ m['nope'] is undefined }} "
              "{{ nothing is defined }}",
              J(R"({"m": {"role": "user"}})")),
            "False True True False");
  EXPECT_EQ(R("{% set k = 'role' %}{{ m[k] }}", J(R"({"m": {"role": "user"}})")), "user");
  EXPECT_EQ(R("{{ items[0].name }}", J(R"({"items": [{"name": "n0"}]})")), "n0");
}

// List, dict and tuple literals, bool/none literals in either case.
TEST(JinjaExpr, Literals) {
  EXPECT_EQ(R("{{ [1, [2, 3], 'x'][1][0] }} {{ {'k': 'v'}['k'] }} {{ (1, 2, 3)[1] }} "
              "{{ ['a', 'b',]|length }}"),
            "2 v 2 2");
  EXPECT_EQ(R("{{ [true, True, false, False, none, None] }}"),
            "[True, True, False, False, None, None]");
  EXPECT_EQ(R("{{ {'a': 1, 'b': 2}|length }} {{ (1,)|length }}"), "2 1");
}

// Backslash escapes in quoted literals, both quote styles.
TEST(JinjaExpr, StringEscapesInLiterals) {
  EXPECT_EQ(R(R"({{ 'a\nb' }})"), "a\nb");
  EXPECT_EQ(R(R"({{ "\"" }})"), R"(")");
  EXPECT_EQ(R(R"({{ 'it\'s' }})"), "it's");
  EXPECT_EQ(R(R"({{ '\\' }})"), R"(\)");
  EXPECT_EQ(R(R"({{ 'tab\there' }})"), "tab\there");
  EXPECT_EQ(R(R"({{ "single ' inside" }})"), "single ' inside");
}

// range, dict and namespace are jinja2's built-in globals.
TEST(JinjaExpr, GlobalFunctions) {
  EXPECT_EQ(R("{{ range(4)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} "
              "{{ range(0)|list }}"),
            "[0, 1, 2, 3] [1, 2, 3] [10, 7, 4, 1] []");
  EXPECT_EQ(R("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  EXPECT_EQ(R("{% set ns = namespace(a=1) %}{{ ns.a }}"), "1");
}

}  // namespace
}  // namespace lifeline::jinja

// Tests (`is ...`), filters and the str/dict/list methods templates call.
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

// defined/undefined/none/string/mapping/iterable/sequence/number/integer/float/boolean.
TEST(JinjaTests, TypeTests) {
  EXPECT_EQ(R("{{ x is defined }} {{ x is undefined }} {% set x = 1 %}{{ x is defined }}"),
            "False True True");
  EXPECT_EQ(R("{{ none is none }} {{ 0 is none }} {{ 'a' is string }} {{ 1 is string }} "
              "{{ ['a'] is string }}"),
            "True False True False False");
  EXPECT_EQ(R("{{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} "
              "{{ 'a' is iterable }} {{ {} is iterable }} {{ 1 is iterable }}"),
            "True False True True True False");
  EXPECT_EQ(R("{{ [] is sequence }} {{ 'a' is sequence }} {{ {} is sequence }} "
              "{{ 5 is sequence }}"),
            "True True True False");
  EXPECT_EQ(R("{{ 1 is number }} {{ 1.5 is number }} {{ 'a' is number }} {{ 1 is integer }} "
              "{{ 1.0 is integer }} {{ 1.0 is float }} {{ 1 is float }}"),
            "True True False True False True False");
  EXPECT_EQ(R("{{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 1 is true }} "
              "{{ false is false }} {{ 0 is false }}"),
            "True False True False True False");
  EXPECT_EQ(R("{{ c is string }} {{ p is string }} {{ p is iterable }} {{ p[0] is mapping }} "
              "{{ n is none }} {{ n is defined }}",
              J(R"({"c": "text", "p": [{"type": "text", "text": "x"}], "n": null})")),
            "True False True True True True");
}

// jinja2: bool is a Number, but `integer` excludes True/False.
TEST(JinjaTests, BooleansAreNumbersButNotIntegers) {
  EXPECT_EQ(R("{{ true is number }} {{ true is integer }} {{ false is float }}"),
            "True False False");
}

// equalto/eq/==, odd, even, divisibleby, in, lower, upper, sameas.
TEST(JinjaTests, ValueTests) {
  EXPECT_EQ(R("{{ 3 is equalto 3 }} {{ 3 is eq 4 }} {{ 'a' is equalto('a') }} {{ 3 is odd }} "
              "{{ 4 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}"),
            "True False True True False True True False");
  EXPECT_EQ(R("{{ 2 is in [1, 2] }} {{ 'b' is in 'abc' }} {{ 'abc' is lower }} "
              "{{ 'aBc' is lower }} {{ 'ABC' is upper }} {{ none is sameas none }}"),
            "True True True False True True");
  EXPECT_EQ(R("{{ 3 is ne 4 }} {{ 3 is lt 4 }} {{ 3 is gt 4 }} {{ 3 is ge 3 }} {{ 3 is le 2 }}"),
            "True True False True False");
}

// `is not` negates any test.
TEST(JinjaTests, IsNotNegates) {
  EXPECT_EQ(R("{{ x is not defined }} {{ none is not none }} {{ 'a' is not string }} "
              "{{ 3 is not odd }} {{ 2 is not in [1] }}"),
            "True False False False True");
  EXPECT_EQ(R("{% if tools is not none %}T{% endif %}{% if docs is not defined %}D{% endif %}",
              J(R"({"tools": []})")),
            "TD");
}

// trim strips whitespace (or the given chars); length/count count code points, items, keys.
TEST(JinjaFilters, TrimAndLength) {
  EXPECT_EQ(R(R"([{{ '  x y \n'|trim }}] [{{ 'xxaxx'|trim('x') }}])"), "[x y] [a]");
  EXPECT_EQ(R("{{ 'héllo'|length }} {{ [1, 2, 3]|length }} {{ {'a': 1}|length }} "
              "{{ ''|length }} {{ 'abc'|count }}"),
            "5 3 1 0 3");
  EXPECT_EQ(R("{{ messages|length }}", ThreeMessages()), "3");
}

// HF's tojson is json.dumps(ensure_ascii=False): ', ' and ': ' separators, key order kept, ints vs
// floats.
TEST(JinjaFilters, ToJsonMatchesJsonDumps) {
  EXPECT_EQ(R("{{ {'z': 1, 'a': 2.0, 'm': [true, none, 'x']}|tojson }}"),
            R"({"z": 1, "a": 2.0, "m": [true, null, "x"]})");
  EXPECT_EQ(R("{{ 'héllo 你好'|tojson }}"), R"("héllo 你好")");
  EXPECT_EQ(R(R"({{ 'q"b\\s\nl\tt'|tojson }})"), R"("q\"b\\s\nl\tt")");
  EXPECT_EQ(R(R"({{ '<a href="x">&</a>'|tojson }})"), R"("<a href=\"x\">&</a>")");
  EXPECT_EQ(R("{{ 1|tojson }} {{ 1.0|tojson }} {{ 1e-05|tojson }} {{ 1e20|tojson }} "
              "{{ none|tojson }} {{ false|tojson }} {{ []|tojson }} {{ {}|tojson }}"),
            "1 1.0 1e-05 1e+20 null false [] {}");
  EXPECT_EQ(R("{{ tools|tojson }}",
              J(R"({"tools": [{"type": "function", "function": {"name": "get_weather", )"
              R"("parameters": {"type": "object", )"
              R"("properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})")),
            R"([{"type": "function", "function": {"name": "get_weather", "parameters": )"
            R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": )"
            R"(["city"]}}}])");
}

// indent=2 puts one item per line; separators and sort_keys pass through.
TEST(JinjaFilters, ToJsonIndentSeparatorsSortKeys) {
  EXPECT_EQ(R("{{ {'a': [1, 2], 'b': {}, 'c': []}|tojson(indent=2) }}"),
            "{\n"
            "  \"a\": [\n"
            "    1,\n"
            "    2\n"
            "  ],\n"
            "  \"b\": {},\n"
            "  \"c\": []\n"
            "}");
  EXPECT_EQ(R("{{ {'a': {'b': 'c'}}|tojson(indent=4) }}"),
            "{\n"
            "    \"a\": {\n"
            "        \"b\": \"c\"\n"
            "    }\n"
            "}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1, 2]}|tojson(separators=(',', ':')) }}"), R"({"b":1,"a":[1,2]})");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
  EXPECT_EQ(R("{{ tools[0]|tojson(indent=2) }}",
              J(R"({"tools": [{"name": "f", "args": {"x": 1}}]})")),
            "{\n"
            "  \"name\": \"f\",\n"
            "  \"args\": {\n"
            "    \"x\": 1\n"
            "  }\n"
            "}");
}

// upper, lower, title (jinja2's word split, unlike str.title), capitalize.
TEST(JinjaFilters, CaseFilters) {
  EXPECT_EQ(R("{{ 'Hello'|upper }} {{ 'HeLLo'|lower }} {{ 'hello wORLD'|title }} "
              "{{ 'hELLO world'|capitalize }}"),
            "HELLO hello Hello World Hello world");
  EXPECT_EQ(R(R"({{ "they're here"|title }} {{ 'a-b c(d'|title }})"), "They're Here A-B C(D");
}

// replace(old, new[, count]).
TEST(JinjaFilters, Replace) {
  EXPECT_EQ(R("{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} "
              "{{ 'hello'|replace('l', '') }} {{ 'abc'|replace('', '-') }}"),
            "bbb bba heo -a-b-c-");
}

// join with and without separator and attribute=.
TEST(JinjaFilters, Join) {
  EXPECT_EQ(R("{{ [1, 2, 3]|join }} {{ ['a', 'b']|join(', ') }} {{ []|join('x') }}|"
              "{{ 'abc'|join('.') }}"),
            "123 a, b |a.b.c");
  EXPECT_EQ(R("{{ messages|join(' / ', attribute='role') }}", ThreeMessages()),
            "system / user / assistant");
  EXPECT_EQ(R("{{ tools|map(attribute='name')|join(', ') }}",
              J(R"({"tools": [{"name": "a"}, {"name": "b"}]})")),
            "a, b");
}

// first/last of lists and strings; of an empty list, undefined.
TEST(JinjaFilters, FirstAndLast) {
  EXPECT_EQ(R("{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} ["
              "{{ []|first }}]"),
            "1 3 a c []");
  EXPECT_EQ(R("{{ (messages|first).role }} {{ (messages|last)['content'] }}", ThreeMessages()),
            "system Hello.");
}

// default replaces undefined only; default(x, true) also replaces falsy values.
TEST(JinjaFilters, Default) {
  EXPECT_EQ(R("{{ missing|default('x') }} {{ ''|default('x') }}| {{ none|default('x') }} "
              "{{ ''|default('x', true) }} {{ 0|default(5, true) }} {{ 'v'|d('x') }}"),
            "x | None x 5 v");
  EXPECT_EQ(R("{{ m.content|default('none given') }} {{ m.role|default('?') }}",
              J(R"({"m": {"role": "user"}})")),
            "none given user");
}

// items yields key/value pairs; list materializes strings, dicts (keys) and ranges.
TEST(JinjaFilters, ItemsAndList) {
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}{{ v }}{% endfor %}"), "a1b2");
  EXPECT_EQ(R("{{ 'abc'|list }} {{ {'x': 1, 'y': 2}|list }} {{ range(3)|list }} {{ [1]|list }}"),
            "['a', 'b', 'c'] ['x', 'y'] [0, 1, 2] [1]");
}

// With a test, with 'defined', and with no test (truthiness).
TEST(JinjaFilters, SelectattrAndRejectattr) {
  EXPECT_EQ(R("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list "
              "}}",
              ThreeMessages()),
            "['Hi']");
  EXPECT_EQ(R("{{ messages|rejectattr('role', 'equalto', 'system')|list|length }}",
              ThreeMessages()),
            "2");
  EXPECT_EQ(R("{{ xs|selectattr('tool_calls', 'defined')|map(attribute='id')|list }} "
              "{{ xs|rejectattr('tool_calls', 'defined')|map(attribute='id')|list }}",
              J(R"({"xs": [{"id": 1, "tool_calls": []}, {"id": 2}, {"id": 3, )"
              R"("tool_calls": [1]}]})")),
            "[1, 3] [2]");
  EXPECT_EQ(R("{{ xs|selectattr('flag')|map(attribute='id')|list }} "
              "{{ xs|rejectattr('flag')|map(attribute='id')|list }}",
              J(R"({"xs": [{"id": 1, "flag": true}, {"id": 2, "flag": false}, {"id": 3}]})")),
            "[1] [2, 3]");
  EXPECT_EQ(R("{{ xs|selectattr('n', 'gt', 1)|list|length }}",
              J(R"({"xs": [{"n": 1}, {"n": 2}, {"n": 3}]})")),
            "2");
}

// select/reject apply a test to the items themselves.
TEST(JinjaFilters, SelectAndReject) {
  EXPECT_EQ(R("{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} "
              "{{ [0, 1, '', 'a', none]|select|list }}"),
            "[1, 3] [2, 4] [1, 'a']");
}

// map(attribute=...) and map('filter', args...).
TEST(JinjaFilters, Map) {
  EXPECT_EQ(R("{{ messages|map(attribute='role')|list }}", ThreeMessages()),
            "['system', 'user', 'assistant']");
  EXPECT_EQ(R("{{ ['a', 'b']|map('upper')|list }} {{ [' a ', 'b ']|map('trim')|join }} "
              "{{ [1, 2]|map('string')|join('+') }}"),
            "['A', 'B'] ab 1+2");
  EXPECT_EQ(R("{{ ['ab', 'cd']|map('replace', 'a', 'x')|list }}"), "['xb', 'cd']");
  EXPECT_EQ(R("{{ xs|map(attribute='missing', default='d')|list }}", J(R"({"xs": [{"a": 1}]})")),
            "['d']");
}

// string, int, float, safe, abs.
TEST(JinjaFilters, Conversions) {
  EXPECT_EQ(R("{{ 1|string ~ 'a' }} {{ [1, 'b']|string }} {{ none|string }} {{ '<b>'|safe }}"),
            "1a [1, 'b'] None <b>");
  EXPECT_EQ(R("{{ '42'|int + 1 }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.7|int }} {{ '3.7'|int }} "
              "{{ -3.7|int }} {{ true|int }} {{ ' 12 '|int }}"),
            "43 0 7 3 3 -3 1 12");
  EXPECT_EQ(R("{{ '1.5'|float }} {{ 3|float }} {{ 'x'|float }} {{ '1e3'|float }}"),
            "1.5 3.0 0.0 1000.0");
  EXPECT_EQ(R("{{ -3|abs }} {{ (-3.5)|abs }} {{ 4|abs }}"), "3 3.5 4");
}

// round uses Python's round(): 2.5 -> 2.0, returns floats.
TEST(JinjaFilters, RoundHalfToEvenLikePython) {
  EXPECT_EQ(R("{{ 2.567|round(2) }} {{ 3.7|round }} {{ 3.7|round|int }} {{ 2.5|round }} "
              "{{ 3.5|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }} "
              "{{ 5|round }}"),
            "2.57 4.0 4 2.0 4.0 3.0 2.0 5");
}

// unique and sort are case-insensitive by default; dictsort sorts by key.
TEST(JinjaFilters, UniqueDictsortSort) {
  EXPECT_EQ(R("{{ ['a', 'A', 'b', 'a']|unique|list }} {{ [3, 1, 3, 2]|unique|list }}"),
            "['a', 'b'] [3, 1, 2]");
  EXPECT_EQ(R("{{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} "
              "{{ ['b', 'A']|sort(case_sensitive=true) }}"),
            "['A', 'b', 'c'] [3, 2, 1] ['A', 'b']");
  EXPECT_EQ(R("{{ xs|sort(attribute='n')|map(attribute='id')|join }}",
              J(R"({"xs": [{"id": "a", "n": 3}, {"id": "b", "n": 1}, {"id": "c", "n": 2}]})")),
            "bca");
  EXPECT_EQ(R("{% for k, v in {'b': 1, 'A': 2, 'c': 0}|dictsort %}{{ k }}{{ v }} {% endfor %}"),
            "A2 b1 c0 ");
  EXPECT_EQ(R("{% for k, v in {'b': 1, 'a': 2, 'c': 0}|dictsort(by='value') %}{{ k }}"
              "{% endfor %}"),
            "cba");
}

// indent skips the first line and blank lines unless told otherwise.
TEST(JinjaFilters, Indent) {
  EXPECT_EQ(R(R"({{ 'a\nb\n\nc'|indent(2) }})"), "a\n  b\n\n  c");
  EXPECT_EQ(R(R"({{ 'a\nb'|indent(2, first=true) }})"), "  a\n  b");
  EXPECT_EQ(R(R"({{ 'a\n\nb'|indent(2, blank=true) }})"), "a\n  \n  b");
  EXPECT_EQ(R(R"({{ 'x\ny'|indent }})"), "x\n    y");
  EXPECT_EQ(R(R"({{ 'x\ny'|indent('> ') }})"), "x\n> y");
}

// sum (with attribute= and start), min/max (case-insensitive for strings).
TEST(JinjaFilters, SumMinMax) {
  EXPECT_EQ(R("{{ [1, 2, 3]|sum }} {{ [0.1, 0.2]|sum }} {{ [1, 2]|sum(start=10) }} {{ []|sum }}"),
            "6 0.30000000000000004 13 0");
  EXPECT_EQ(R("{{ xs|sum(attribute='n') }}", J(R"({"xs": [{"n": 2}, {"n": 5}]})")), "7");
  EXPECT_EQ(R("{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A', 'c']|min }} "
              "{{ ['b', 'A', 'C']|max }}"),
            "1 3 A C");
}

// reverse of a string is a string; of a list, an iterable.
TEST(JinjaFilters, Reverse) {
  EXPECT_EQ(R("{{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }} {{ [1, 2, 3]|reverse|join }}"),
            "cba [3, 2, 1] 321");
}

// The less common ones that still appear in templates.
TEST(JinjaFilters, BatchWordcountCenterFormat) {
  EXPECT_EQ(R("{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ 'a b  c'|wordcount }} ["
              "{{ 'ab'|center(6) }}] {{ '%s-%d'|format('a', 1) }}"),
            "[[1, 2], [3, 4], [5]] 3 [  ab  ] a-1");
}

// strip/lstrip/rstrip with and without a character set.
TEST(JinjaMethods, StripFamily) {
  EXPECT_EQ(R("[{{ '  a b  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}]"),
            "[a b][a  ][  a]");
  EXPECT_EQ(R(R"([{{ 'xxaxx'.strip('x') }}][{{ 'xyaxy'.lstrip('yx') }}][)"
              R"({{ 'a\n\n'.rstrip('\n') }}][{{ '\n\t a \r\n'.strip() }}])"),
            "[a][axy][a][a]");
}

// split on whitespace runs, on a separator (keeping empties), with maxsplit; rsplit.
TEST(JinjaMethods, Split) {
  EXPECT_EQ(R("{{ 'a b  c'.split() }} {{ '  lead'.split() }} {{ 'a,b,,c'.split(',') }} "
              "{{ 'a,b,c'.split(',', 1) }} {{ ' a b '.split(none, 1) }}"),
            "['a', 'b', 'c'] ['lead'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a', 'b ']");
  EXPECT_EQ(R("{{ 'a::b::c'.split('::') }} {{ ''.split(',') }} {{ ''.split() }} "
              "{{ 'a,b,c'.rsplit(',', 1) }}"),
            "['a', 'b', 'c'] [''] [] ['a,b', 'c']");
  EXPECT_EQ(R("{{ '<think>x</think>rest'.split('</think>')[-1] }}"), "rest");
}

// startswith/endswith accept a string or a tuple of strings.
TEST(JinjaMethods, StartsEndsWith) {
  EXPECT_EQ(R("{{ 'hello'.startswith('he') }} {{ 'hello'.startswith('lo') }} "
              "{{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} "
              "{{ 'hello'.endswith(('a', 'b')) }} {{ 'hello'.startswith('') }}"),
            "True False True True False True");
}

// upper/lower/title/capitalize/replace as str does them.
TEST(JinjaMethods, CaseAndReplace) {
  EXPECT_EQ(R(R"({{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ "they're here".title() }} )"
              R"({{ 'hELLO'.capitalize() }} {{ 'aaa'.replace('a', 'b') }} )"
              R"({{ 'aaa'.replace('a', 'b', 1) }})"),
            "ABC abc They'Re Here Hello bbb baa");
}

// find (-1 when absent), count, join, splitlines.
TEST(JinjaMethods, FindCountJoinSplitlines) {
  EXPECT_EQ(R("{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} "
              "{{ 'banana'.count('a') }} {{ 'banana'.count('an') }}"),
            "2 -1 2 3 2");
  EXPECT_EQ(R(R"({{ ', '.join(['a', 'b']) }} {{ ''.join('abc') }} )"
              R"({{ 'a\nb\r\nc\n'.splitlines() }})"),
            "a, b abc ['a', 'b', 'c']");
}

// items(), keys(), values(), get(k), get(k, default).
TEST(JinjaMethods, DictMethods) {
  EXPECT_EQ(R("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{{ d.keys()|list }} "
              "{{ d.values()|list }}",
              J(R"({"d": {"a": 1, "b": [2]}})")),
            "a=1 b=[2] ['a', 'b'] [1, [2]]");
  EXPECT_EQ(R("{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} "
              "{{ d.get('a', 'dflt') }}",
              J(R"({"d": {"a": 1}})")),
            "1 None dflt 1");
  EXPECT_EQ(R("{{ m.get('content', '') }}|{{ m.get('tool_calls') is none }}",
              J(R"({"m": {"role": "user"}})")),
            "|True");
}

// index and count work under the immutable sandbox.
TEST(JinjaMethods, ListMethodsThatDoNotMutate) {
  EXPECT_EQ(R("{{ [1, 2, 3].index(2) }} {{ [1, 2, 2].count(2) }} {{ ['a', 'b'].index('b') }}"),
            "1 2 1");
}

}  // namespace
}  // namespace lifeline::jinja

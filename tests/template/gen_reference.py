#!/usr/bin/env python3
"""Generate reference renderings of real chat templates for the C++ Jinja engine tests.

What it does
------------
For every template in data/templates/*.jinja and every conversation in
data/conversations.json, render the template with Python jinja2 configured the
way Hugging Face transformers' ``apply_chat_template`` configures it
(transformers/utils/chat_template_utils.py, ``_compile_jinja_template`` and
``render_jinja_template``), and write the results to data/reference.json.

  * ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[<generation tag>, jinja2.ext.loopcontrols])``
  * ``{% generation %}...{% endgeneration %}`` renders its body (as
    transformers' AssistantTracker does when not tracking assistant masks).
  * filter ``tojson`` = ``json.dumps(x, ensure_ascii=False, indent=indent,
    separators=separators, sort_keys=sort_keys)`` (overrides jinja2's HTML-safe
    tojson, exactly as transformers does).
  * globals ``raise_exception(msg)`` (raises jinja2.TemplateError(msg)) and
    ``strftime_now(fmt)``, which here formats the FIXED instant
    2024-07-26 12:00:00 UTC so the output is deterministic (the C++ test injects
    the same instant).
  * ``template.render(messages=..., tools=..., documents=...,
    add_generation_prompt=..., bos_token=..., eos_token=..., **kwargs)``;
    tools / documents are None when a conversation has none (as transformers
    passes them). bos/eos come from data/templates/tokens.json ("" where the
    model has no such token).

When a template refuses a conversation (raise_exception) or jinja2 fails
(TypeError on None content, UndefinedError, ...), the case records
``"error": "<message>"`` and ``"error_type"`` (``"TemplateError"`` for
raise_exception(), whose message is portable; otherwise the Python exception
class, whose wording is Python-specific) instead of ``"expected"``.

The output, data/reference.json, is COMMITTED TEST DATA. Re-running this script
(no network, paths relative to this file) rewrites it byte-identically for the
same jinja2 version. Run: ``python3 tests/template/gen_reference.py``
(add ``--summary`` to print a template x conversation ok/error table).
"""

import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
TEMPLATES = os.path.join(DATA, "templates")

FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 0, 0, tzinfo=datetime.timezone.utc)


class GenerationTag(jinja2.ext.Extension):
    """Equivalent of transformers' AssistantTracker with tracking inactive:
    ``{% generation %}body{% endgeneration %}`` renders ``body``."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return FIXED_NOW.strftime(format)


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_template(name):
    # newline="" keeps the text byte-exact (no newline translation).
    with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8", newline="") as f:
        return f.read()


def render_case(env, source, conv, bos, eos):
    template = env.from_string(source)
    return template.render(
        messages=conv["messages"],
        tools=conv.get("tools"),
        documents=conv.get("documents"),
        add_generation_prompt=conv.get("add_generation_prompt", True),
        bos_token=bos,
        eos_token=eos,
        **conv.get("kwargs", {}),
    )


def main(argv):
    tokens = load_json(os.path.join(TEMPLATES, "tokens.json"))
    conversations = load_json(os.path.join(DATA, "conversations.json"))
    names = sorted(f[: -len(".jinja")] for f in os.listdir(TEMPLATES) if f.endswith(".jinja"))
    missing = [n for n in names if n not in tokens]
    if missing:
        sys.exit("tokens.json lacks: " + ", ".join(missing))
    conv_names = [c["name"] for c in conversations]
    if len(set(conv_names)) != len(conv_names):
        sys.exit("duplicate conversation names")

    env = make_env()
    # self-check of the transformers-equivalent configuration
    assert env.from_string("{% generation %}a{% endgeneration %}b").render() == "ab"
    assert env.from_string("{{ strftime_now('%d %b %Y') }}").render() == "26 Jul 2024"
    assert env.from_string("{{ x | tojson }}").render(x={"k": "é<"}) == '{"k": "é<"}'
    assert env.from_string("  {% if 1 %}\nx{% endif %}").render() == "x"  # trim/lstrip blocks
    cases = []
    for name in names:
        source = read_template(name)
        env.parse(source)  # every collected template must at least parse
        bos = tokens[name]["bos_token"]
        eos = tokens[name]["eos_token"]
        for conv in sorted(conversations, key=lambda c: c["name"]):
            case = {"template": name, "conversation": conv["name"], "bos_token": bos, "eos_token": eos}
            try:
                # deep-copy through JSON so a template can never see another case's data
                case["expected"] = render_case(env, source, json.loads(json.dumps(conv)), bos, eos)
            except Exception as e:  # TemplateError from raise_exception, TypeError, UndefinedError...
                case["error"] = str(e) if str(e) else type(e).__name__
                # "TemplateError" == raised by the template via raise_exception(): the message is
                # the template's own text and is portable. Anything else (TypeError,
                # UndefinedError, ...) is a Python runtime failure whose wording is Python's.
                case["error_type"] = type(e).__name__
            cases.append(case)

    out = {
        "generator": "tests/template/gen_reference.py",
        "jinja2_version": jinja2.__version__,
        "strftime_now_utc": "2024-07-26T12:00:00Z",
        "cases": cases,
    }
    path = os.path.join(DATA, "reference.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")

    n_err = sum(1 for c in cases if "error" in c)
    print(f"wrote {os.path.relpath(path, os.getcwd())}: {len(cases)} cases "
          f"({len(cases) - n_err} ok, {n_err} error), jinja2 {jinja2.__version__}")

    if "--summary" in argv:
        convs = sorted(conv_names)
        by = {(c["template"], c["conversation"]): ("ok" if "expected" in c else "ERR") for c in cases}
        w = max(len(n) for n in names)
        print(" " * w + "  " + " ".join(f"{i:>3}" for i in range(len(convs))))
        for n in names:
            print(n.ljust(w) + "  " + " ".join(f"{by[(n, c)]:>3}" for c in convs))
        for i, c in enumerate(convs):
            print(f"  {i:>2} = {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

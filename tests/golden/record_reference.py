#!/usr/bin/env python3
"""Records llama.cpp's reference outputs for the golden tests of the model families.

For every recipe of tests/golden/recipes.json (a `lifeline make-model` command line), this
script makes the model file, starts llama.cpp's llama-server on it (`-t 2 -c 512`, one model at
a time), and for each fixed prompt records llama.cpp's tokenization of the prompt and a greedy
continuation with the top-k log-probabilities of every generated step (`/completion` with
`temperature 0`, `n_probs` and `cache_prompt false`). The result goes to
tests/golden/data/<name>.json beside the recipe it came from; the golden tests regenerate the
model from the same recipe at test time and compare Lifeline against the recorded numbers. The
GGUF files are never committed.

Random-weight models emit arbitrary tokens, and llama-server refuses (HTTP 500) to return a
completion whose text is not valid UTF-8. The recorder therefore bans (logit bias `false`) the
tokens that are not valid UTF-8 on their own (SentencePiece byte tokens <0x80>..<0xFF>,
byte-level BPE pieces that are partial characters), the control tokens and the
end-of-generation tokens, so that every continuation is complete and 32 tokens long. The bias only steers which token greedy picks: the recorded
log-probabilities are llama.cpp's full distribution before sampling (`post_sampling_probs`
false). The banned ids are recorded so the test applies the same rule to its own greedy run.

Usage: tests/golden/record_reference.py [--lifeline build/lifeline]
           [--server ../shared/peers/llama-server] [--only NAME ...] [--port 18230]
Needs only the Python 3 standard library. The server and the model files live in a temporary
directory that is removed at the end.
"""
import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# GGUF metadata value types.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}


def read_gguf_metadata(path):
    """The key/value metadata of a GGUF file (v2/v3), tensors skipped."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(path + ": not a GGUF file")
        version, = struct.unpack("<I", f.read(4))
        if version not in (2, 3):
            raise ValueError(path + ": GGUF version %d" % version)
        _n_tensors, n_kv = struct.unpack("<QQ", f.read(16))

        def read_str():
            n, = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", errors="surrogateescape")

        def read_value(t):
            if t in _SCALARS:
                fmt = _SCALARS[t]
                return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
            if t == 8:
                return read_str()
            if t == 9:
                at, n = struct.unpack("<IQ", f.read(12))
                return [read_value(at) for _ in range(n)]
            raise ValueError(path + ": metadata type %d" % t)

        meta = {}
        for _ in range(n_kv):
            key = read_str()
            t, = struct.unpack("<I", f.read(4))
            meta[key] = read_value(t)
        return meta


def _bpe_byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: the byte-level BPE alphabet -> byte values."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def banned_tokens(meta):
    """Ids whose text is not valid UTF-8 by itself, plus the control tokens (llama.cpp ends
    generation on some of them by their text alone, e.g. <|endoftext|>) and the stated
    end-of-generation ids."""
    tokens = meta["tokenizer.ggml.tokens"]
    model = meta.get("tokenizer.ggml.model", "llama")
    banned = set()
    if model == "llama":
        for i, t in enumerate(tokens):
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">") and int(t[3:5], 16) >= 0x80:
                banned.add(i)
    elif model == "gpt2":
        dec = _bpe_byte_decoder()
        for i, t in enumerate(tokens):
            if any(c not in dec for c in t):
                continue  # added / special tokens are plain text
            try:
                bytes(dec[c] for c in t).decode("utf-8")
            except UnicodeDecodeError:
                banned.add(i)
    else:
        raise ValueError("tokenizer model %r" % model)
    for i, t in enumerate(meta.get("tokenizer.ggml.token_type", [])):
        if t == 3:  # control
            banned.add(i)
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                "tokenizer.ggml.eom_token_id"):
        if key in meta:
            banned.add(int(meta[key]))
    return sorted(banned)


def as_ranges(ids):
    """[1, 2, 3, 7] -> [[1, 3], [7, 7]]."""
    out = []
    for i in ids:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def post(port, path, body, timeout=120):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def start_server(server, model, port, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen([server, "-m", model, "-t", "2", "--port", str(port), "-c", "512",
                             "--host", "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("llama-server exited (%d); see %s" % (proc.returncode, log_path))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return proc
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("llama-server did not become healthy; see " + log_path)


def record_prompt(port, text, n_predict, n_probs, banned):
    tokens = post(port, "/tokenize", {"content": text, "add_special": True})["tokens"]
    body = {"prompt": tokens, "n_predict": n_predict, "temperature": 0, "n_probs": n_probs,
            "cache_prompt": False, "logit_bias": [[i, False] for i in banned]}
    out = post(port, "/completion", body)
    steps = []
    for p in out["completion_probabilities"]:
        steps.append({"token": p["id"],
                      "top": [[t["id"], round(t["logprob"], 6)] for t in p["top_logprobs"]]})
    if len(steps) != n_predict:
        raise RuntimeError("%r: %d steps, wanted %d" % (text, len(steps), n_predict))
    # Greedy with the bias: the chosen token must be the most likely allowed one of the top-k.
    ban = set(banned)
    for i, s in enumerate(steps):
        allowed = [t for t in s["top"] if t[0] not in ban]
        if allowed and allowed[0][0] != s["token"] and allowed[0][1] > s["top"][0][1] - 1e-9:
            raise RuntimeError("%r step %d: chose %d, top allowed %d" %
                               (text, i, s["token"], allowed[0][0]))
    return {"text": text, "prompt_tokens": tokens, "steps": steps}


def dump_compact(doc):
    """JSON with one generated step per line (readable diffs, a third of indent=1's size)."""
    head = {k: v for k, v in doc.items() if k != "prompts"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(v)))
    lines.append(' "prompts": [')
    for pi, p in enumerate(doc["prompts"]):
        lines.append("  {")
        lines.append("   \"text\": %s," % json.dumps(p["text"]))
        lines.append("   \"prompt_tokens\": %s," % json.dumps(p["prompt_tokens"]))
        lines.append("   \"steps\": [")
        for si, s in enumerate(p["steps"]):
            lines.append("    " + json.dumps(s, separators=(",", ":")) +
                         ("," if si + 1 < len(p["steps"]) else ""))
        lines.append("   ]")
        lines.append("  }" + ("," if pi + 1 < len(doc["prompts"]) else ""))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lifeline", default=os.path.join(ROOT, "build", "lifeline"))
    ap.add_argument("--server", default=os.path.join(ROOT, "..", "shared", "peers", "llama-server"))
    ap.add_argument("--recipes", default=os.path.join(HERE, "recipes.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--port", type=int, default=18230)
    args = ap.parse_args()

    with open(args.recipes) as f:
        spec = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lifeline_golden_") as tmp:
        for r in spec["recipes"]:
            if args.only and r["name"] not in args.only:
                continue
            model = os.path.join(tmp, r["name"] + ".gguf")
            argv = shlex.split(r["make_model"])
            subprocess.run([args.lifeline, "make-model"] + argv + ["-o", model], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            banned = banned_tokens(read_gguf_metadata(model))
            proc = start_server(args.server, model, args.port, os.path.join(tmp, "server.log"))
            try:
                prompts = [record_prompt(args.port, p, spec["n_predict"], spec["n_probs"], banned)
                           for p in spec["prompts"]]
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            doc = {
                "name": r["name"],
                "make_model": r["make_model"],
                "recorded_with": "llama.cpp llama-server d32676d, -t 2 -c 512, /completion "
                                 "temperature 0, cache_prompt false",
                "n_probs": spec["n_probs"],
                "banned_ranges": as_ranges(banned),
                "prompts": prompts,
            }
            path = os.path.join(args.out, r["name"] + ".json")
            with open(path, "w") as f:
                f.write(dump_compact(doc))
            print("recorded", path, file=sys.stderr)


if __name__ == "__main__":
    main()

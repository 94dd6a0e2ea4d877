#!/usr/bin/env python3
"""Writes the hand-made seed corpora of the fuzz harnesses under tests/fuzz/corpus/ (the
files are committed; this script documents how they were made and can remake them).

  python3 tests/fuzz/make_seeds.py            # from the repository root

GGUF images are packed here byte by byte from the GGUF v3 layout (not by the code under
test); the tokenizer inputs follow tokenizer_fuzz.cpp's layout; HTTP requests are written
out literally (including the request-smuggling shapes of issue reports); OpenAI bodies and
TOML configs are small valid and invalid examples. Python's standard library only."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(kind, name, data):
    d = os.path.join(ROOT, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


# --- GGUF ------------------------------------------------------------------------------------

def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, v):
    return kv(key, 4, struct.pack("<I", v))


def kv_str(key, v):
    return kv(key, 8, gstr(v))


def kv_arr(key, etype, elems):
    return kv(key, 9, struct.pack("<IQ", etype, len(elems)) + b"".join(elems))


def gguf(kvs, tensors=(), alignment=32, version=3):
    """tensors: (name, dims, ggml_type, raw bytes)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    infos, data, offset = b"", b"", 0
    for name, dims, gtype, raw in tensors:
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", gtype, offset)
        pad = (-len(raw)) % alignment
        data += raw + b"\0" * pad
        offset += len(raw) + pad
    body = head + infos
    body += b"\0" * ((-len(body)) % alignment)
    return body + data


def gguf_seeds():
    every_type = [
        kv("u8", 0, b"\x07"), kv("i8", 1, b"\xfd"), kv("u16", 2, struct.pack("<H", 500)),
        kv("i16", 3, struct.pack("<h", -5)), kv_u32("u32", 70000), kv("i32", 5, struct.pack("<i", -7)),
        kv("f32", 6, struct.pack("<f", 1.5)), kv("bool", 7, b"\x01"), kv_str("str", "llama"),
        kv("u64", 10, struct.pack("<Q", 1 << 40)), kv("i64", 11, struct.pack("<q", -(1 << 40))),
        kv("f64", 12, struct.pack("<d", 2.25)),
        kv_arr("strs", 8, [gstr("a"), gstr("bc")]),
        kv_arr("nested", 9, [struct.pack("<IQ", 4, 2) + struct.pack("<II", 1, 2)]),
    ]
    write("gguf", "every_value_type", gguf(every_type))
    f32 = struct.pack("<16f", *[i * 0.5 for i in range(16)])
    write("gguf", "one_f32_tensor",
          gguf([kv_u32("general.alignment", 32), kv_str("general.architecture", "llama")],
               [("w", [4, 4], 0, f32)]))
    q8 = struct.pack("<e", 0.25) + bytes(range(32))  # one Q8_0 block: f16 scale + 32 int8
    write("gguf", "q8_0_and_f32",
          gguf([kv_str("general.architecture", "llama")],
               [("a", [32], 8, q8), ("b", [4, 2], 0, f32[:32])]))
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "\u2581a"]
    vocab = [
        kv_str("general.architecture", "llama"), kv_str("tokenizer.ggml.model", "llama"),
        kv_arr("tokenizer.ggml.tokens", 8, [gstr(t) for t in toks]),
        kv_arr("tokenizer.ggml.scores", 6, [struct.pack("<f", 0.0)] * len(toks)),
        kv_arr("tokenizer.ggml.token_type", 5,
               [struct.pack("<i", t) for t in [2, 3, 3] + [6] * 256 + [1, 1]]),
        kv_u32("tokenizer.ggml.bos_token_id", 1), kv_u32("tokenizer.ggml.eos_token_id", 2),
    ]
    write("gguf", "spm_vocab_only", gguf(vocab))
    write("gguf", "version2", gguf([kv_str("k", "v")], version=2))
    full = gguf(every_type, [("w", [4, 4], 0, f32)])
    write("gguf", "truncated", full[: len(full) - 40])
    write("gguf", "huge_count", b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 1 << 60))
    write("gguf", "empty", b"")


# --- tokenizer (tokenizer_fuzz.cpp layout) -----------------------------------------------------

def tok_input(mode, extras, types, merges, text):
    out = bytes([mode, len(extras)])
    for e in extras:
        out += e.encode("utf-8") + b"\x01"
    out += bytes(types)
    for a, b in merges:
        out += bytes([a, b])
    return out + text.encode("utf-8")


def tokenizer_seeds():
    text = "Hello world! Once upon a time, 12345 \u00e9t\u00e9 \u4f60\u597d \U0001F600\n\ttabs  "
    write("tokenizer", "spm_base_plain.bin", tok_input(64, [], [], [], text))
    write("tokenizer", "spm_base_words.bin",
          tok_input(64 | 16 | 32, ["\u2581Hello", "\u2581world", "ll", "<tool>"], [1, 1, 1 + 8 * 20, 4], [],
                    text + " <tool> </s>"))
    write("tokenizer", "spm_no_base.bin", tok_input(0, ["a", "b", "ab"], [1, 1, 1], [], "abab"))
    write("tokenizer", "spm_bad_type.bin", tok_input(64, ["x"], [7], [], "x"))
    for pre in range(8):
        write("tokenizer", "bpe_base_pre%d.bin" % pre,
              tok_input(1 | (pre << 1) | 64, ["\u0120w", "or", "\u0120wor", "ld"], [1, 1, 1, 1],
                        [(0, 1), (2, 3)], text + " don't 'll"))
    write("tokenizer", "bpe_special.bin",
          tok_input(1 | 64 | 16, ["<|endoftext|>", "He", "llo"], [3, 1, 1], [(1, 2)],
                    "Hello<|endoftext|>Hello"))
    write("tokenizer", "bpe_bad_merge.bin", tok_input(1, ["a"], [1], [(0, 0)], "aaa"))
    write("tokenizer", "invalid_utf8.bin", tok_input(64, [], [], [], "") + b"\xff\xfe\xc3(\xe2\x82")


# --- HTTP --------------------------------------------------------------------------------------

def http_seeds():
    body = '{"prompt":"Once upon a time","max_tokens":8}'
    post = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n%s" % (len(body), body))
    write("http", "post_completions", post)
    chat = '{"messages":[{"role":"user","content":"Hi"}],"stream":true}'
    write("http", "post_chat_chunked",
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(chat), chat))
    hidden = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    for i, te in enumerate(["identity", "xchunked", "gzip", "chunked, identity", "gzip, chunked",
                            "chunked, chunked", "chunked;x=1"]):
        write("http", "smuggle_%d" % i,
              "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n%s" % (te, hidden))
    write("http", "smuggle_te_and_cl",
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
          "Content-Length: 4\r\n\r\n0\r\n\r\n" + hidden)
    write("http", "absolute_form", "GET http://127.0.0.1:8080/v1/models?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    write("http", "pipelined", post + post.replace("completions", "chat/completions") + hidden)
    write("http", "head_and_options",
          "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nOPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\n"
          "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n\r\n")
    write("http", "auth_and_ids",
          "GET /v1/models/org/model HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-1\r\n"
          "Authorization: Bearer nope\r\nX-Request-Id: abc.DEF:1-2\r\n\r\n")
    write("http", "http10_keepalive", "GET /ready HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    write("http", "tokenize",
          "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; charset=utf-8\r\n"
          "Content-Length: 21\r\n\r\n{\"content\":\"a b c\"}  ")
    write("http", "garbage", "GARBAGE\r\n\r\n\x00\x01\x02")
    write("http", "huge_content_length",
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{}")
    write("http", "folded_header", "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n")
    # Chunked framing elements (the meter's caps): extensions, trailers, leading zeros, an
    # extension past max_framing_line_bytes, then a pipelined request after a trailer.
    chunked = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Transfer-Encoding: chunked\r\n\r\n")
    write("http", "chunk_extensions_and_trailers",
          chunked + "%x;a=b;q=\"c d\"\r\n%s\r\n0000;last\r\nX-Sum: 1\r\nX-B: 2\r\n\r\n"
          % (len(body), body) + hidden)
    write("http", "chunk_extension_over_cap", chunked + "1;a=" + "e" * 5000 + "\r\nx\r\n0\r\n\r\n")
    write("http", "chunk_bad_crlf", chunked + "2\r\n{}x\r\n0\r\n\r\n")
    # Beast reads an unclosed quoted extension value on past the line's end; the meter does not.
    write("http", "chunk_unclosed_quote", chunked + "2;q=\"x\r\n{}\r\n0\r\n\r\n" + hidden)
    # Host (RFC 9112 3.2): none in HTTP/1.1, two, none in HTTP/1.0.
    write("http", "host_missing_and_double",
          "GET /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    write("http", "host_http10", "GET /health HTTP/1.0\r\n\r\n")


# --- OpenAI request bodies (byte 0: 0 completions, 1 chat, 2 infill) --------------------------

def openai_seeds():
    cases = [
        (0, '{"prompt":"Once upon a time","max_tokens":16,"temperature":0.7,"top_p":0.9,"seed":3}'),
        (0, '{"prompt":["a","b"],"n":2,"logprobs":3,"echo":true,"stop":["\\n","END"]}'),
        (0, '{"prompt":[1,2,3],"logit_bias":{"5":-100,"7":2.5},"suffix":"x"}'),
        (0, '{"prompt":[[1,2],[3]],"max_tokens":0}'),
        (0, '{"prompt":"x","max_tokens":1.0,"unknown":1}'),
        (0, '{"prompt":"x","prompt":"y"}'),
        (1, '{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],'
            '"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3}'),
        (1, '{"messages":[{"role":"user","content":"w"}],"tools":[{"type":"function","function":'
            '{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},'
            '"required":["city"]}}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}'),
        (1, '{"messages":[{"role":"user","content":"p"}],"response_format":{"type":"json_schema",'
            '"json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":'
            '{"age":{"type":"integer"}},"required":["age"],"additionalProperties":false}}}}'),
        (1, '{"messages":[{"role":"user","content":"g"}],"grammar":"root ::= \\"yes\\" | \\"no\\""}'),
        (1, '{"messages":[],"slo_class":"chat","user_role":"doctor","deadline_ms":500,'
            '"allow_context_trim":true}'),
        (1, '{"messages":[{"role":"tool","content":"42","tool_call_id":"c1"}],'
            '"chat_template_kwargs":{"enable_thinking":false},"documents":[{"t":"d"}]}'),
        (2, '{"input_prefix":"def f(","input_suffix":"):\\n  return x","max_tokens":8}'),
        (2, '{"input_suffix":"x"}'),
        (0, '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]'),
        (1, '{"messages":[{"role":"user","content":"\\ud800"}]}'),
    ]
    for i, (ep, body) in enumerate(cases):
        write("openai", "case_%02d" % i, bytes([ep]) + body.encode("utf-8"))
    write("openai", "invalid_utf8", b"\x00{\"prompt\":\"\xff\xfe\"}")


# --- SLO config TOML ---------------------------------------------------------------------------

def slo_seeds():
    write("slo_config", "empty.toml", "")
    write("slo_config", "full.toml", """default_class = "chat"
use_presets = true

[classes.chat]
ttft_p95_ms = 350
e2e_p95_ms = 8000
tpot_p95_ms = 60
priority = 2
max_level = 3

[classes.batch-jobs]
e2e_p95_ms = 600000

[roles]
doctor = 0.8
vip = 0.5

[[models]]
name = "heavy"
path = "heavy.gguf"
max_queue_requests = 64

[[models]]
name = "light"
url = "http://10.0.0.2:8000/v1"
model = "llama"

[window]
bucket_ms = 1000
buckets = 30

[controller]
tick_ms = 100
min_samples = 10
batch_high_ratio = 1.2
batch_low_ratio = 0.8

[batching]
initial = 16
floor = 2
cap = 64
preferred_batch_sizes = [4, 8, 16]
max_queue_delay_ms = 5

[ladder]
enter_ratio = 1.1
recover_ratio = 0.8
recover_ticks = 5
min_dwell_ms = 1000
truncate_max_tokens = 128
truncate_min_tokens = 32
trim_to_tokens = 1024

[admission]
predictive = true
prediction_margin = 1.2
speed_stale_ms = 2000
""")
    write("slo_config", "bad_range.toml", "[ladder]\nrecover_ticks = 0\n")
    write("slo_config", "bad_key.toml", "[ladder]\nbogus = 1\n")
    write("slo_config", "no_presets.toml",
          "use_presets = false\ndefault_class = \"x\"\n[classes.x]\nttft_p95_ms = 0.001\n")
    write("slo_config", "bad_syntax.toml", "[classes.chat\nttft_p95_ms = = 3\n")
    write("slo_config", "hysteresis.toml", "[ladder]\nenter_ratio = 0.5\nrecover_ratio = 0.9\n")


if __name__ == "__main__":
    gguf_seeds()
    tokenizer_seeds()
    http_seeds()
    openai_seeds()
    slo_seeds()

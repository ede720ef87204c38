#!/usr/bin/env python3
"""llama.cpp's own `llama-server` on the prompts of `examples/bench.rs`, for the speed comparison
of BENCHMARKS.md ("Kestrel's engine against llama-server").

Setup (once, outside the repository; nothing here is a dependency of the crate). The llama.cpp
that `llama-cpp-sys-2` vendors has no server sources, so the server is built from the llama.cpp
that PyPI's `llama-cpp-python` sdist vendors, for AVX2 like our engine (`GGML_NATIVE=OFF`):

    pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: -d /tmp/x
    cd /tmp/x && tar xzf llama_cpp_python-0.3.36.tar.gz
    cd llama_cpp_python-0.3.36/vendor/llama.cpp
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_BUILD_SERVER=ON \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DBUILD_SHARED_LIBS=OFF
    cmake --build build --target llama-server -j2

Run:

    python3 crates/kestrel-llama/bench/llama_server.py <llama-server> <model.gguf> \
      [--runs 5] [--tokens 128] [--threads 2] [--ctx 2048]

The server runs on 127.0.0.1 with the same threads, context and batch (512) as the bench, and
is asked through `/v1/chat/completions` with the bench's two prompts (rendered by the server
from the GGUF's chat template: the token counts printed should equal the bench's), greedy,
`cache_prompt: false` so that every run evaluates its whole prompt, and `ignore_eos` so the
short prompt decodes exactly `--tokens` tokens. The figures are the server's own `timings`:
`predicted_per_second` (decode) and `prompt_per_second` (prefill); time to first token is the
wall time from the request to the first streamed delta. Medians [min-max] over the runs, after
one warm-up request.
"""

import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ESSAY = "Write a detailed essay about the history of the printing press."
PARAGRAPH = (
    "The printing press, developed by Johannes Gutenberg around 1440, transformed the spread of "
    "knowledge across Europe. Movable metal type allowed books to be produced faster and more "
    "cheaply than ever before, and literacy rose as printed material became widely available. "
)
LONG = "Summarize the following text in one sentence. " + PARAGRAPH * 7


def arg(args, name, default):
    if name in args:
        return int(args[args.index(name) + 1])
    return default


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    return urllib.request.urlopen(request, timeout=600)


def request_body(text, tokens, stream=False):
    return {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": tokens,
        "temperature": 0,
        "cache_prompt": False,
        "ignore_eos": True,
        "stream": stream,
    }


def chat(base, text, tokens):
    with post(base + "/v1/chat/completions", request_body(text, tokens)) as response:
        return json.load(response)


def first_delta_ms(base, text, tokens):
    started = time.perf_counter()
    first = None
    with post(base + "/v1/chat/completions", request_body(text, tokens, stream=True)) as response:
        for line in response:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            delta = (event.get("choices") or [{}])[0].get("delta", {})
            if first is None and delta.get("content"):
                first = (time.perf_counter() - started) * 1e3
    return first


def report(label, values):
    print(f"{label:<44} {statistics.median(values):>8.1f}  [{min(values):.1f}-{max(values):.1f}]")


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        sys.exit(2)
    server, model = args[0], args[1]
    runs = arg(args, "--runs", 5)
    tokens = arg(args, "--tokens", 128)
    threads = arg(args, "--threads", 2)
    ctx = arg(args, "--ctx", 2048)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [server, "-m", model, "--host", "127.0.0.1", "--port", str(port),
         "-t", str(threads), "-tb", str(threads), "-c", str(ctx), "-b", "512", "-ub", "512",
         "-np", "1", "--no-webui"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            sys.exit("llama-server did not become healthy")
        chat(base, ESSAY, 8)  # warm-up
        decode, prompt_short, prompt_long, ttft = [], [], [], []
        short_n = long_n = generated = 0
        for _ in range(runs):
            t = chat(base, ESSAY, tokens)["timings"]
            decode.append(t["predicted_per_second"])
            prompt_short.append(t["prompt_per_second"])
            short_n, generated = t["prompt_n"], t["predicted_n"]
        for _ in range(runs):
            ttft.append(first_delta_ms(base, ESSAY, 4))
        for _ in range(runs):
            t = chat(base, LONG, 2)["timings"]
            prompt_long.append(t["prompt_per_second"])
            long_n = t["prompt_n"]
        print(f"llama-server {server}, {threads} threads, ctx {ctx}")
        print(f"{'':<44} {'median':>8}  [min-max] over {runs} runs")
        report(f"decode tok/s ({generated} tokens, greedy)", decode)
        report(f"time to first token, ms ({short_n}-token prompt)", ttft)
        report(f"prompt tok/s ({short_n}-token prompt)", prompt_short)
        report(f"prompt tok/s ({long_n}-token prompt)", prompt_long)
        print(f"peak RSS of the server {peak_rss_mb(process.pid):.0f} MB")
    finally:
        process.terminate()
        process.wait(timeout=30)


def peak_rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


if __name__ == "__main__":
    main()

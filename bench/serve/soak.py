#!/usr/bin/env python3
"""Soak test for `stoke serve` (not CI): mixed valid and invalid traffic and
client disconnects for a while, sampling the server's RSS; prints the RSS
series and its drift after the warm-up minute (target: within +-10%).

    bench/serve/soak.py --stoke build/release/apps/stoke/stoke --model DIR [--minutes 10] [--clients 16]
"""
import argparse
import json
import random
import re
import signal
import socket
import subprocess
import threading
import time
import http.client

BAD_BODIES = [
    b'{"inputs": ',                      # malformed
    b'{"inputs": []}',                   # empty
    b'{"inputs": 5}',                    # wrong type
    b'{"inputs": "a", "dimensions": -1}',
    b'[' * 5000 + b']' * 5000,           # nesting bomb
    b'{"inputs": "\xff\xfe"}',           # invalid UTF-8
]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def client(port, texts, stop, counts, seed):
    rng = random.Random(seed)
    conn = None
    while not stop.is_set():
        kind = rng.random()
        try:
            if kind < 0.05:  # a client that sends half a body and disconnects
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 1000\r\n\r\n{\"inputs\": [\"abc")
                s.close()
                counts["disconnects"] += 1
                continue
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            if kind < 0.20:
                body = rng.choice(BAD_BODIES)
            else:
                n = rng.choice([1, 1, 2, 4, 8, 16])
                body = json.dumps({"inputs": [rng.choice(texts) for _ in range(n)]}).encode()
            conn.request("POST", "/embed", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            counts["ok" if r.status == 200 else "refused"] += 1
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            counts["errors"] += 1
            conn = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stoke", default="build/release/apps/stoke/stoke")
    ap.add_argument("--model", default="../shared/fixtures/models/tiny-bert")
    ap.add_argument("--fortunes", default="../shared/fixtures/corpus/fortunes-multilingual.jsonl")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--sample-seconds", type=float, default=10)
    a = ap.parse_args()
    texts = []
    with open(a.fortunes, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)["text"]
            if t:
                texts.append(t)
            if len(texts) >= 5000:
                break
    proc = subprocess.Popen([a.stoke, "serve", "--model", a.model, "--port", "0", "--auto-truncate"],
                            stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready" in line:
            break
    stop = threading.Event()
    counts = {"ok": 0, "refused": 0, "errors": 0, "disconnects": 0}
    threads = [threading.Thread(target=client, args=(port, texts, stop, counts, i)) for i in range(a.clients)]
    for t in threads:
        t.start()
    samples = []
    end = time.time() + a.minutes * 60
    while time.time() < end:
        time.sleep(a.sample_seconds)
        samples.append((time.time(), rss_kib(proc.pid)))
        print(f"t={samples[-1][0] - samples[0][0]:6.0f}s rss={samples[-1][1] / 1024:8.1f} MiB {counts}", flush=True)
    stop.set()
    for t in threads:
        t.join()
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    status = proc.wait(timeout=120)
    steady = [r for (t, r) in samples if t - samples[0][0] >= 60] or [r for _, r in samples]
    lo, hi = min(steady), max(steady)
    print(f"RSS after the first minute: min {lo / 1024:.1f} MiB, max {hi / 1024:.1f} MiB, "
          f"spread {100 * (hi - lo) / lo:.1f}% ; exit status {status}; {counts}")
    print(rest.strip().splitlines()[-1] if rest.strip() else "")


if __name__ == "__main__":
    main()

"""Real clients against `stoke serve`, unchanged: the openai package's
client.embeddings.create (float and base64) and huggingface_hub's
InferenceClient(...).feature_extraction (it posts to the base URL, which
dispatches to /embed). Vectors are checked against `stoke embed` on the same
texts (relative L2 <= 1e-6 per row). Skipped, with the reason, when the
packages are not importable.

Environment: STOKE_BINARY (the stoke executable), STOKE_FIXTURES (the shared
fixtures folder).
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
openai = pytest.importorskip("openai")
huggingface_hub = pytest.importorskip("huggingface_hub")

STOKE = os.environ.get("STOKE_BINARY", "stoke")
FIXTURES = Path(os.environ.get("STOKE_FIXTURES", "../shared/fixtures"))
MODEL = FIXTURES / "models" / "tiny-bert"


def texts():
    out = []
    with open(FIXTURES / "golden" / "texts.jsonl", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)["text"]
            if t:
                out.append(t)
    return out[:24]


def offline(tmp, flags):
    inp = Path(tmp) / "texts.jsonl"
    with open(inp, "w", encoding="utf-8") as f:
        for t in texts():
            f.write(json.dumps({"text": t}) + "\n")
    out = Path(tmp) / ("out" + "".join(flags).replace("-", "_"))
    subprocess.run([STOKE, "embed", "--quiet", "--model", str(MODEL), "--input", str(inp), "--output", str(out),
                    *flags], check=True, timeout=300)
    return np.load(out / "embeddings-00000.npy")


def rel_l2(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return np.linalg.norm(got - want, axis=-1) / np.linalg.norm(want, axis=-1)


@pytest.fixture(scope="module")
def server():
    err = tempfile.NamedTemporaryFile(prefix="stoke-serve-", suffix=".err", delete=False)
    proc = subprocess.Popen([STOKE, "serve", "--model", str(MODEL), "--port", "0", "--auto-truncate"],
                            stdout=subprocess.DEVNULL, stderr=err)
    port = None
    deadline = time.time() + 120
    while time.time() < deadline and port is None and proc.poll() is None:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", Path(err.name).read_text())
        if m:
            port = int(m.group(1))
        time.sleep(0.02)
    assert port, Path(err.name).read_text()
    import urllib.request
    while time.time() < deadline:  # ready once the warm-up pass is done
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200:
                break
        except OSError:
            time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, Path(err.name).read_text()
    os.unlink(err.name)


def test_openai_embeddings_float_and_base64(server, tmp_path):
    want = offline(tmp_path, [])
    client = openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)
    for fmt in ("float", "base64"):
        r = client.embeddings.create(model="tiny-bert", input=texts(), encoding_format=fmt)
        got = [d.embedding for d in r.data]
        if fmt == "base64" and isinstance(got[0], str):  # older clients hand base64 back as it came
            import base64
            got = [np.frombuffer(base64.b64decode(g), dtype="<f4") for g in got]
        assert len(got) == len(want)
        assert max(rel_l2(got, want)) <= 1e-6, fmt
        assert [d.index for d in r.data] == list(range(len(want)))
        assert r.usage.prompt_tokens > 0
    # The client's default (base64 when numpy is installed, decoded for the caller).
    r = client.embeddings.create(model="tiny-bert", input=texts()[0])
    assert max(rel_l2([r.data[0].embedding], want[:1])) <= 1e-6
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny-bert"]


def test_openai_errors_are_openai_shaped(server):
    client = openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.embeddings.create(model="tiny-bert", input="a", dimensions=100000)
    assert "dimensions" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="tiny-bert", input=[])


def test_huggingface_hub_feature_extraction(server, tmp_path):
    want = offline(tmp_path, ["--normalize"])
    client = huggingface_hub.InferenceClient(server)
    for i, t in enumerate(texts()[:8]):
        got = np.asarray(client.feature_extraction(t)).reshape(-1)
        assert rel_l2(got, want[i]) <= 1e-6, i
    got = np.asarray(client.feature_extraction(texts()[0], normalize=False)).reshape(-1)
    raw = offline(tmp_path, ["--no-normalize"])
    assert rel_l2(got, raw[0]) <= 1e-6

#!/usr/bin/env python3
"""Checks the Kubernetes manifests docs/scale-out.md shows, and runs them.

    check_manifests.py [--run STOKE_BINARY MODEL_DIR INPUT_JSONL] [--dir DIR]

Without a cluster: parses embed-job.yaml and verify-job.yaml (beside this
file) and checks the fields stoke depends on — an Indexed Job whose pods run
`stoke embed --shard-index auto --num-shards auto` (the index from
JOB_COMPLETION_INDEX) with STOKE_NUM_TASKS equal to completions, one output
folder per index, --resume, restartPolicy Never where backoffLimitPerIndex
needs it, and volumes that resolve (each mount names a volume, the claim names
the PVC). With --run it then does what the Job's pods would: runs the
container's command through /bin/sh for every completion index, with the
manifest's environment (JOB pointed at a temp folder holding MODEL_DIR and
INPUT_JSONL, STOKE_EMBED_FLAGS set to --device cpu), then the verify Job's
command, which must pass. Exit status 1 names the first field that is wrong;
77 when PyYAML (Debian: python3-yaml) is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:
    print("check_manifests: skipped: PyYAML is not installed (Debian: python3-yaml)")
    sys.exit(77)

HERE = Path(__file__).resolve().parent


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def field(doc, path, file):
    """doc at a dotted path ("spec.template.spec"); list items by number."""
    node = doc
    for part in path.split("."):
        if isinstance(node, list):
            need(part.isdigit() and int(part) < len(node), f"{file}: {path}: no item {part}")
            node = node[int(part)]
        else:
            need(isinstance(node, dict) and part in node, f"{file}: {path}: missing")
            node = node[part]
    return node


def by_kind(docs, kind, file):
    found = [d for d in docs if d and d.get("kind") == kind]
    need(len(found) == 1, f"{file}: expected one {kind}, found {len(found)}")
    return found[0]


def pod_checks(job, file, pvcs):
    """The pod template's single container, after the checks every Job here needs."""
    pod = field(job, "spec.template.spec", file)
    containers = field(pod, "containers", file)
    need(len(containers) == 1, f"{file}: expected one container, found {len(containers)}")
    c = containers[0]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        need(m["name"] in volumes, f"{file}: volumeMount {m['name']!r} names no volume")
        claim = volumes[m["name"]].get("persistentVolumeClaim", {}).get("claimName")
        need(claim in pvcs, f"{file}: volume {m['name']!r} claims {claim!r}, not the PVC {sorted(pvcs)}")
    need(c.get("command", [])[:2] == ["/bin/sh", "-c"], f"{file}: command: expected [/bin/sh, -c]")
    return pod, c


def env_of(c):
    return {e["name"]: str(e["value"]) for e in c.get("env", []) if "value" in e}


def script_of(c, file):
    parts = c["command"][2:] + c.get("args", [])
    need(len(parts) == 1, f"{file}: expected one shell script after /bin/sh -c, found {len(parts)}")
    return parts[0]


def check(embed_file, verify_file):
    embed_docs = list(yaml.safe_load_all(embed_file.read_text()))
    pvc = by_kind(embed_docs, "PersistentVolumeClaim", embed_file.name)
    need("ReadWriteMany" in field(pvc, "spec.accessModes", embed_file.name),
         f"{embed_file.name}: the PVC must be ReadWriteMany (pods on several nodes write to it)")
    pvcs = {field(pvc, "metadata.name", embed_file.name)}
    job = by_kind(embed_docs, "Job", embed_file.name)
    f = embed_file.name
    need(field(job, "apiVersion", f) == "batch/v1", f"{f}: apiVersion: expected batch/v1")
    need(field(job, "spec.completionMode", f) == "Indexed", f"{f}: spec.completionMode: expected Indexed")
    completions = field(job, "spec.completions", f)
    need(isinstance(completions, int) and completions >= 1, f"{f}: spec.completions: expected a count >= 1")
    parallelism = job["spec"].get("parallelism", 1)
    need(1 <= parallelism <= completions, f"{f}: spec.parallelism {parallelism}: expected 1 to completions")
    pod, c = pod_checks(job, f, pvcs)
    if "backoffLimitPerIndex" in job["spec"]:
        need(pod.get("restartPolicy") == "Never", f"{f}: backoffLimitPerIndex needs restartPolicy: Never")
    env = env_of(c)
    need(env.get("STOKE_NUM_TASKS") == str(completions),
         f"{f}: env STOKE_NUM_TASKS is {env.get('STOKE_NUM_TASKS')!r}, expected spec.completions ({completions})")
    script = script_of(c, f)
    words = script.split()
    need(words[:3] == ["exec", "stoke", "embed"], f"{f}: the script must run `exec stoke embed`")
    need("--shard-index auto --num-shards auto" in script,
         f"{f}: expected --shard-index auto --num-shards auto (the index from JOB_COMPLETION_INDEX)")
    need("task-$JOB_COMPLETION_INDEX" in script, f"{f}: --output must differ per index (task-$JOB_COMPLETION_INDEX)")
    need("--resume" in words, f"{f}: expected --resume (a retried pod continues its task)")

    verify_docs = list(yaml.safe_load_all(verify_file.read_text()))
    vjob = by_kind(verify_docs, "Job", verify_file.name)
    vf = verify_file.name
    need(vjob["spec"].get("backoffLimit") == 0, f"{vf}: spec.backoffLimit: expected 0 (verify's failure is the answer)")
    _, vc = pod_checks(vjob, vf, pvcs)
    need("stoke verify" in script_of(vc, vf), f"{vf}: the script must run stoke verify")
    return completions, env, script, env_of(vc), script_of(vc, vf)


def run(stoke, model, corpus, completions, env, script, venv, vscript):
    tmp = Path(tempfile.mkdtemp(prefix="stoke-k8s-"))
    try:
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "stoke").symlink_to(Path(stoke).resolve())
        job = tmp / "job"
        (job / "models").mkdir(parents=True)
        (job / "input").mkdir()
        (job / "models" / "multilingual-e5-base").symlink_to(Path(model).resolve())
        lines = Path(corpus).read_text(encoding="utf-8").splitlines(keepends=True)[:400]
        (job / "input" / "texts.jsonl").write_text("".join(lines), encoding="utf-8")
        base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
        for i in range(completions):
            pod_env = {**base, **env, "JOB": str(job), "JOB_COMPLETION_INDEX": str(i),
                       "STOKE_EMBED_FLAGS": "--device cpu"}
            r = subprocess.run(["/bin/sh", "-c", script], env=pod_env, capture_output=True, text=True, timeout=300)
            need(r.returncode == 0, f"pod {i}: exit {r.returncode}: {r.stderr.strip()}")
        r = subprocess.run(["/bin/sh", "-c", vscript], env={**base, **venv, "JOB": str(job)}, capture_output=True,
                           text=True, timeout=300)
        need(r.returncode == 0, f"verify pod: exit {r.returncode}: {r.stderr.strip()}")
        print(f"check_manifests: {completions} pods and the verify pod ran: {r.stdout.strip()}")
        manifest = (job / "out" / "task-0" / "manifest.json").read_text()
        need('"source": "kubernetes"' in manifest, "task-0's manifest does not record task.source kubernetes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs=3, metavar=("STOKE_BINARY", "MODEL_DIR", "INPUT_JSONL"))
    ap.add_argument("--dir", type=Path, default=HERE, help="where the two manifests are (tests: altered copies)")
    args = ap.parse_args()
    try:
        completions, env, script, venv, vscript = check(args.dir / "embed-job.yaml", args.dir / "verify-job.yaml")
        print(f"check_manifests: embed-job.yaml (Indexed, {completions} completions) and verify-job.yaml are well formed")
        if args.run:
            run(*args.run, completions, env, script, venv, vscript)
    except Bad as e:
        print(f"check_manifests: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

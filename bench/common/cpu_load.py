"""Shared by the CPU benchmarks' report.py (bench/embed_cpu, bench/train_cpu):
the closing line that says how long the benchmark took and how busy the
machine was meanwhile with other work (run.sh measures it: bench/common/cpu_peer.sh)."""


def load_line(total_s, others_s):
    """'whole benchmark: N s; other processes ... used M CPU seconds ...'."""
    line = f"whole benchmark: {total_s} s"
    if others_s is None:
        return line
    share = max(others_s, 0) / max(total_s, 1)
    return (line + f"; other processes on this machine used {max(others_s, 0):.0f} CPU seconds meanwhile "
            f"({share:.2f} of a core on average: "
            + ("quiet enough)" if share <= 0.1 else "too busy for these numbers, rerun on a quiet machine)"))

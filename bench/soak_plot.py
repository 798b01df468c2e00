#!/usr/bin/env python3
"""Draws the CSV of rlx-soak (bench/soak.c) to a PNG and prints the
resident-memory growth over the last part of the run.

    soak_plot.py [soak.csv] [soak.png] [--budget BYTES] [--tail FRACTION]

Growth is the least-squares slope of resident MiB over the last FRACTION
(default 2/3) of the samples, in MiB per hour. Needs matplotlib for the PNG
(python3-matplotlib); without it only the figures are printed.
"""
import argparse
import csv


def slope(xs, ys):
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default="soak.csv")
    ap.add_argument("png", nargs="?", default="soak.png")
    ap.add_argument("--budget", type=float, default=None, help="the kernel-cache budget in bytes (drawn as a line)")
    ap.add_argument("--tail", type=float, default=2 / 3, help="fraction of the run the growth is fitted over")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    t = [float(r["seconds"]) for r in rows]
    rss = [float(r["resident_mib"]) for r in rows]
    kc = [float(r["kernel_cache_bytes"]) / 2**20 for r in rows]
    pc = [float(r["plan_cache_bytes"]) / 2**20 for r in rows]
    # by time, not by sample: a round longer than a second delays samples, which then come in bursts
    first = next(i for i, x in enumerate(t) if x >= t[-1] * (1 - a.tail))
    growth = slope(t[first:], rss[first:]) * 3600
    print(f"{len(t)} samples over {t[-1]:.0f} s; resident {rss[0]:.1f} -> {rss[-1]:.1f} MiB (max {max(rss):.1f}); "
          f"growth over the last {t[-1] - t[first]:.0f} s: {growth:+.2f} MiB/hour; "
          f"kernel cache max {max(kc):.2f} MiB" + (f" (budget {a.budget / 2**20:.2f} MiB, "
                                                  f"over it in {sum(k * 2**20 > a.budget for k in kc)} samples)"
                                                  if a.budget else ""))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no PNG (apt-get install python3-matplotlib)")
        return
    for key, what in (("malloc_held_mib", "malloc held"), ("malloc_used_mib", "malloc in use"),
                      ("rss_anon_mib", "anonymous resident"), ("rss_file_mib", "file resident"),
                      ("mappings", "mappings")):
        if key in rows[0]:  # columns rlx-soak added over time
            ys = [float(r[key]) for r in rows]
            print(f"  {what}: {ys[0]:.1f} -> {ys[-1]:.1f}, over the last {t[-1] - t[first]:.0f} s "
                  f"{slope(t[first:], ys[first:]) * 3600:+.2f} per hour")
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot([x / 60 for x in t], rss, label="resident memory (MiB)")
    ax.plot([x / 60 for x in t], kc, label="kernel cache (MiB)")
    ax.plot([x / 60 for x in t], pc, label="plan cache (MiB)")
    if "malloc_held_mib" in rows[0]:  # rlx-soak's glibc figures, when it had them
        for key, what in (("malloc_held_mib", "malloc held"), ("malloc_used_mib", "malloc in use"),
                          ("rss_anon_mib", "anonymous resident")):
            if key not in rows[0]:
                continue
            ax.plot([x / 60 for x in t], [float(r[key]) for r in rows], label=f"{what} (MiB)")
    if a.budget:
        ax.axhline(a.budget / 2**20, color="gray", linestyle=":", label="kernel-cache budget")
    ax.set_xlabel("minutes")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.set_title(f"rlx-soak: {t[-1] / 60:.0f} min, growth over the last {(t[-1] - t[first]) / 60:.0f} min "
                 f"{growth:+.1f} MiB/hour")
    ax.legend(loc="center right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.png, dpi=100)
    print(f"wrote {a.png}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Per-stage warp-stall and instruction table of a fused kernel from ncu's source page.

The kernel's profile stamps (SPRINTNET_FUSED_PROFILE) read %globaltimer, so in the SASS each stamp is a
`CS2R ..., SR_GLOBALTIMERLO`: the instructions between two stamps are one stage (in code order). For each
stage this prints its share of the warp-stall samples (about its share of the step's time when every warp
runs the same stage), the instructions a warp executes there a step, and the top stall reasons.

  ncu --clock-control none -k regex:rows_epoch_kernel --launch-skip 1 --launch-count 1 \\
      --section SourceCounters -o rows epoch_bench ... --epochs 2
  ncu -i rows.ncu-rep --page source --csv --print-source sass > source.csv
  stage_stalls.py source.csv --warps 128 --steps 468 --step-us 11.8 [--names a,b,...]
"""
import argparse
import csv


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("--warps", type=int, required=True, help="warps of the launch (blocks x warps a block)")
    p.add_argument("--steps", type=int, required=True, help="steps of the profiled launch")
    p.add_argument("--step-us", type=float, default=0.0, help="the step's time, to turn shares into us")
    p.add_argument("--names", default="", help="comma-separated names of the stages, in code order")
    a = p.parse_args()
    rows = list(csv.reader(open(a.csv)))
    header = rows[1]
    col = {h: i for i, h in enumerate(header)}
    data = [r for r in rows[2:] if len(r) >= len(header)]
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def value(r, key):
        try:
            return float(r[col[key]] or 0)
        except ValueError:
            return 0.0

    marks = [i for i, r in enumerate(data) if "GLOBALTIMER" in r[col["Source"]]]
    bounds = [0] + marks + [len(data)]
    names = a.names.split(",") if a.names else []
    total = sum(value(r, "Warp Stall Sampling (All Samples)") for r in data)
    per_warp_step = a.warps * a.steps
    print(f"{'stage':32s} {'share':>6s} {'us':>6s} {'instr/warp':>10s}  top stalls")
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        part = data[lo:hi]
        share = sum(value(r, "Warp Stall Sampling (All Samples)") for r in part) / total
        instructions = sum(value(r, "Instructions Executed") for r in part) / per_warp_step
        top = sorted(((s[6:], sum(value(r, s) for r in part)) for s in stalls), key=lambda x: -x[1])[:3]
        name = names[k] if k < len(names) else f"after stamp {k - 1}" if k else "before the first stamp"
        spent = f"{share * a.step_us:6.2f}" if a.step_us else "      "
        print(f"{name:32s} {100 * share:5.1f}% {spent} {instructions:10.1f}  "
              + " ".join(f"{s}:{100 * v / total:.1f}%" for s, v in top))


if __name__ == "__main__":
    main()

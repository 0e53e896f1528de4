"""What made fp16-10k.txt, bf16-10k.txt and fp16-100k.txt here: torch's profiler over five
training updates (after five unprofiled ones) of benchmarks/gpu_speed.py's plain cuDNN stack and
of lmlow's AWD-LSTM, paper preset, batch 80 x 70. Run from the repo root on a GPU machine:
    python3 benchmarks/results/gpu-h100-2026-11-26b/profiles/profile.py float16 10000
(was run as prof_tmp.py from the root; the printed tables are the files next to this one)."""
import sys, torch
sys.path.insert(0, "benchmarks")
import gpu_speed as g
from torch.profiler import profile, ProfilerActivity
from lmlow.config import build_config
from lmlow.checkpoint import fast_matmuls
fast_matmuls(torch.device("cuda"))
cfg = build_config(preset="paper")
orig = g.timed
def prof_timed(step, steps, repeats, device):
    for _ in range(5): step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        for _ in range(5): step()
        torch.cuda.synchronize()
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=60))
    return 1.0
g.timed = prof_timed
for name in ("plain", "lmlow"):
    print("=====", name, sys.argv[1])
    g.measure(name, cfg, int(sys.argv[2]), 80, 70, getattr(torch, sys.argv[1]), torch.device("cuda"), 5, 1)

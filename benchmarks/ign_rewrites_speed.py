"""Sampling speed of the folded IGN network with and without the exact layer rewrites (inference.py).

    python benchmarks/ign_rewrites_speed.py

The network forward alone (fp32, batch 256 of ign-mnist noise), median of 7 x 10 passes, 4 rounds alternating.
"""
import time, statistics, torch, genzoo
from genzoo_ign import inference
m = genzoo.load("ign-mnist")
with_rewrites = inference.fold(m.net, "noise")
orig = inference._cheaper
inference._cheaper = lambda layer: layer
without = inference.fold(m.net, "noise")
inference._cheaper = orig
z = torch.randn(256, 1, 28, 28)
def rate(net):
    with torch.inference_mode():
        for _ in range(3): net(z)
        times = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(10): net(z)
            times.append(time.perf_counter() - t)
    return 2560 / statistics.median(times)
for _ in range(4):
    print(f"folded, no rewrites: {rate(without):.0f} img/s; with rewrites: {rate(with_rewrites):.0f} img/s")

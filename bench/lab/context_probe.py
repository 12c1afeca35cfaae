#!/usr/bin/env python3
"""How CUDA contexts on several GPUs start and end (issue 11's 4-GPU sweep; docs/SWEEP.md).
Each mode creates one context a GPU (cudaSetDevice + cudaFree(0), then a 64 MB allocation, as a
run holds its data set) and reports when each is ready and when the whole launch has exited:
  threads     one process, a thread a GPU (the sweep before this probe)
  procs-all   a process a GPU, each seeing every GPU
  procs-one   a process a GPU, each seeing only its own (CUDA_VISIBLE_DEVICES)
  sequential  one process, the contexts created one after another by one thread, while a second
              thread allocates, clears and frees 1 MB on GPU 0 in a loop once its context is up
              (does work on a ready GPU wait for the other GPUs' context creation?)
and one-gpu and threads again with CUDA_DEVICE_MAX_CONNECTIONS of 1, 2 and 4 (the default is 8).
  python3 bench/lab/context_probe.py [GPUS] [ROUNDS]"""
import ctypes, os, subprocess, sys, threading, time

CHILD = r"""
import ctypes, sys, threading, time
t0 = float(sys.argv[1]); devices = [int(d) for d in sys.argv[2].split(',')]
lib = ctypes.CDLL('libcudart.so')
ready = {}
def start(d):
    assert lib.cudaSetDevice(d) == 0
    assert lib.cudaFree(ctypes.c_void_p(0)) == 0
    p = ctypes.c_void_p()
    assert lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0
    assert lib.cudaDeviceSynchronize() == 0
    ready[d] = time.time() - t0
threads = [threading.Thread(target=start, args=(d,)) for d in devices]
for t in threads: t.start()
for t in threads: t.join()
print(' '.join(f'{d}:{ready[d]:.3f}' for d in devices), flush=True)
"""

SEQUENTIAL = r"""
import ctypes, sys, threading, time
t0 = float(sys.argv[1]); gpus = int(sys.argv[2])
lib = ctypes.CDLL('libcudart.so')
ready, done, lat = [], threading.Event(), []
first = threading.Event()
def worker():
    first.wait()
    assert lib.cudaSetDevice(0) == 0
    while not done.is_set():
        s = time.time(); p = ctypes.c_void_p()
        assert lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
        assert lib.cudaMemset(p, 0, ctypes.c_size_t(1 << 20)) == 0
        assert lib.cudaDeviceSynchronize() == 0
        assert lib.cudaFree(p) == 0
        lat.append(time.time() - s)
w = threading.Thread(target=worker); w.start()
for d in range(gpus):
    assert lib.cudaSetDevice(d) == 0
    assert lib.cudaFree(ctypes.c_void_p(0)) == 0
    ready.append(f'{d}:{time.time() - t0:.3f}')
    if d == 0: first.set()
done.set(); w.join()
print(' '.join(ready), f'| GPU 0 loop meanwhile: {len(lat)} iterations, max {max(lat) * 1000:.1f} ms', flush=True)
"""

def launch(mode, gpus, extra_env=None):
    t0 = time.time()
    procs = []
    if mode == "sequential":
        procs.append(subprocess.Popen([sys.executable, "-c", SEQUENTIAL, str(t0), str(gpus)], stdout=subprocess.PIPE,
                                      text=True))
    if mode == "threads":
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, str(t0), ",".join(map(str, range(gpus)))],
                                      stdout=subprocess.PIPE, text=True, env=dict(os.environ, **(extra_env or {}))))
    for d in range(gpus if mode.startswith("procs") else 0):
        env = dict(os.environ, **(extra_env or {}))
        device = d
        if mode == "procs-one":
            env["CUDA_VISIBLE_DEVICES"] = str(d)
            device = 0
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, str(t0), str(device)], stdout=subprocess.PIPE,
                                      text=True, env=env))
    outs = [p.communicate()[0].strip() for p in procs]
    return time.time() - t0, outs

gpus = int(sys.argv[1]) if len(sys.argv) > 1 else 4
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
for r in range(rounds):
    cases = [("one-gpu", 1, {}), ("threads", gpus, {}), ("procs-all", gpus, {}), ("procs-one", gpus, {}),
             ("sequential", gpus, {})]
    cases += [(m, n, {"CUDA_DEVICE_MAX_CONNECTIONS": c}) for c in ("1", "2", "4") for m, n in (("one-gpu", 1), ("threads", gpus))]
    for mode, n, env in cases:
        wall, outs = launch("procs-one" if mode == "one-gpu" else mode, n, env)
        print(f"round {r} {mode:9s} {env.get('CUDA_DEVICE_MAX_CONNECTIONS', '')} ready (s after launch): {' | '.join(outs):60s} all exited {wall:.3f}", flush=True)

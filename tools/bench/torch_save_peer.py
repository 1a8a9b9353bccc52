#!/usr/bin/python3
"""torch.save of checkpoint_bench's large workload: the peer a save is
compared with (Debian's python3-torch; not part of the build or tests).

Saves 64 float32 tensors of 16 MiB (1 GiB) with torch.save, then fsyncs the
file and its directory, as the Save op's commit makes its database durable.
Like checkpoint_bench, each run first deletes its previous output, syncs and
sleeps, so every timed write starts from the same state; --churn_mib touches
and frees that much memory first, as checkpoint_bench's flag of that name
does (compare runs made with the same value). Prints MB/s per run and the
median.

  /usr/bin/python3 tools/bench/torch_save_peer.py [--dir DIR] [--runs N]
      [--churn_mib MIB]
"""
import argparse
import mmap
import os
import statistics
import tempfile
import time

import torch


def churn(mib):
    """Touches `mib` MiB of fresh anonymous memory, then frees it."""
    if mib <= 0:
        return
    memory = mmap.mmap(-1, mib << 20)
    chunk = b"\1" * (1 << 20)
    for i in range(mib):
        memory[i << 20:(i + 1) << 20] = chunk
    memory.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(),
                                                      "jobgraph_torch_peer"))
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--blobs", type=int, default=64)
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--settle_ms", type=int, default=1000)
    parser.add_argument("--churn_mib", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    numel = args.mib * (1 << 20) // 4
    tensors = {"blob_%03d" % i: torch.full((numel,), float(i))
               for i in range(args.blobs)}
    size = args.blobs * args.mib * (1 << 20)
    path = os.path.join(args.dir, "checkpoint.pt")
    rates = []
    for run in range(-1, args.runs):  # run -1: warm-up, not counted
        if os.path.exists(path):
            os.remove(path)
        churn(args.churn_mib)
        os.sync()
        time.sleep(args.settle_ms / 1000)
        start = time.perf_counter()
        cpu = time.process_time()
        with open(path, "wb") as f:
            torch.save(tensors, f)
            f.flush()
            os.fsync(f.fileno())
        dir_fd = os.open(args.dir, os.O_RDONLY)
        os.fsync(dir_fd)
        os.close(dir_fd)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        if run >= 0:
            rates.append(size / seconds / 1e6)
            print("run %d: torch.save+fsync %.0f MB/s (%.3f s, cpu %.3f s)" %
                  (run + 1, rates[-1], seconds, cpu))
    os.remove(path)
    print("torch_save_peer: median %.0f MB/s (%.0f-%.0f) over %d runs of %.1f MB"
          % (statistics.median(rates), min(rates), max(rates), len(rates),
             size / 1e6))


if __name__ == "__main__":
    main()

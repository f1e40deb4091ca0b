#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Throughput of the weights pipeline against a plain sequential read of the same files.

  LLMOPS_TEST_VENV_PYTHON=.cache/engine-venv/bin/python  # make engine-venv
  $LLMOPS_TEST_VENV_PYTHON bench/weights_io.py [--mib 384] [--shards 4] [--repeat 3] [--workdir DIR] [--out FILE]

Makes a pickle .bin checkpoint of --mib MiB (bf16 tensors in Qwen's names, --shards shards written
with torch.save plus pytorch_model.bin.index.json, the layout of tests/fixtures/weights/make_bin_model.py),
then times, on the same files:
  read      plain sequential read (1 MiB reads), the floor any step pays for its input
  sha256    weights.sha256_file per file (what a manifest and a full verify cost)
  verify    weights.verify(mode=full) against the recorded manifest (hash + compare)
  cheap     weights.verify(mode=cheap) (size and mtime only)
  convert   weights.convert_bin: .bin -> sharded safetensors, one shard in memory at a time
each with the page cache warm, then cold (pages dropped with posix_fadvise before each run), and writes a Markdown table (median of --repeat runs; MiB/s of source bytes).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "module_utils"))
import weights  # noqa: E402  pylint: disable=wrong-import-position


def make_checkpoint(folder, mib, shards):
    import torch
    hidden = 1024
    per_layer = 4 * hidden * hidden * 2  # q, k, v, o projections in bf16
    layers = max(shards, (mib * 1024 * 1024) // per_layer)
    names = []
    for i in range(layers):
        names += ["model.layers.%d.self_attn.%s_proj.weight" % (i, p) for p in "qkvo"]
    per = (len(names) + shards - 1) // shards
    wmap, total = {}, 0
    g = torch.Generator().manual_seed(0)
    for s in range(shards):
        part = names[s * per:(s + 1) * per]
        fname = "pytorch_model-%05d-of-%05d.bin" % (s + 1, shards)
        state = dict((k, torch.randn(hidden, hidden, generator=g).to(torch.bfloat16)) for k in part)
        torch.save(state, os.path.join(folder, fname))
        wmap.update((k, fname) for k in part)
        total += sum(t.numel() * t.element_size() for t in state.values())
    with open(os.path.join(folder, "pytorch_model.bin.index.json"), "w") as f:
        json.dump(dict(metadata=dict(total_size=total), weight_map=wmap), f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(architectures=["Qwen3ForCausalLM"]), f)


def shard_paths(folder):
    _, shards = weights.weight_files(folder)
    return [os.path.join(folder, s) for s in shards]


def plain_read(paths):
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass


def evict(paths):
    """Drop the files' clean pages from the page cache (no root needed), for a cold read."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(fn, repeat, before=None):
    runs = []
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=384)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "weights_io.md"))
    a = ap.parse_args()
    import torch
    work = tempfile.mkdtemp(prefix="weights-io-", dir=a.workdir)
    src = os.path.join(work, "src")
    os.makedirs(src)
    try:
        make_checkpoint(src, a.mib, a.shards)
        paths = shard_paths(src)
        size = sum(os.path.getsize(p) for p in paths)
        plain_read(paths)  # warm the page cache once, for every step alike
        manifest = weights.make_manifest(src)

        def convert():
            out = os.path.join(work, "out")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            weights.convert_bin(src, out)

        def verify_full():
            problems = weights.verify(src, manifest, "full", skip=())
            assert not problems, problems

        def verify_cheap():
            problems = weights.verify(src, manifest, "cheap", skip=())
            assert not problems, problems

        steps = [
            ("read", "plain sequential read, 1 MiB reads", lambda: plain_read(paths)),
            ("sha256", "weights.sha256_file per shard", lambda: [weights.sha256_file(p) for p in paths]),
            ("verify full", "weights.verify(mode=full) against the manifest", verify_full),
            ("verify cheap", "weights.verify(mode=cheap): size and mtime", verify_cheap),
            ("convert", "weights.convert_bin: .bin -> sharded safetensors", convert),
        ]
        rows = []
        for cache in ("warm", "cold"):
            base = None
            for name, what, fn in steps:
                if cache == "cold" and name == "verify cheap":
                    continue
                s = timed(fn, a.repeat, (lambda: evict(paths)) if cache == "cold" else None)
                mibs = size / s / 2 ** 20
                if base is None:
                    base = mibs
                rows.append((name, cache, what, s, mibs, mibs / base))
                print("%-13s %s %8.3f s %9.1f MiB/s  %5.2fx read" % (name, cache, s, mibs, mibs / base), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cmd = "$LLMOPS_TEST_VENV_PYTHON bench/weights_io.py --mib %d --shards %d --repeat %d" % (a.mib, a.shards, a.repeat)
    lines = [
        "# Weights I/O: conversion and hashing against a plain read",
        "",
        "Command: `make engine-venv && %s`" % cmd,
        "",
        "Checkpoint: %d pickle .bin shards, %.0f MiB of bf16 tensors (torch.save, as the fixture script writes them); "
        "page cache warm (files read once before), or cold (the shards' pages dropped with "
        "posix_fadvise(DONTNEED) before each run); median of %d runs; MiB/s of source bytes. "
        "verify cheap reads only metadata (stat), so its rate is not a disk figure."
        % (len(paths), size / 2 ** 20, a.repeat),
        "Machine: %d cores (load average %.1f at the end: shared with other jobs), Python %s, torch %s, %s; %s."
        % (os.cpu_count(), os.getloadavg()[0], platform.python_version(), torch.__version__, platform.machine(),
           datetime.date.today().isoformat()),
        "",
        "| step | page cache | what | s | MiB/s | vs plain read |",
        "|---|---|---|---|---|---|",
    ]
    for name, cache, what, secs, mibs, rel in rows:
        if name == "verify cheap":  # stat only: no bytes read, no rate to speak of
            lines.append("| %s | %s | %s | %.4f | n/a (stat only) | n/a |" % (name, cache, what, secs))
        else:
            lines.append("| %s | %s | %s | %.3f | %.1f | %.2fx |" % (name, cache, what, secs, mibs, rel))
    lines.append("")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main()

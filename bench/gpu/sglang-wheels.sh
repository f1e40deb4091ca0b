#!/usr/bin/env bash
# The wheels `ENGINE=sglang bench/gpu/h200-validate.sh` installs on the lent H200 host (torch 2.11.0,
# triton 3.6.0 and the rest of the image stay the image's), exactly as carried on 2026-12-03
# (bench/results/h200-sglang-20261203/carried-wheels.txt), cut into pieces that fit one device call
# beside the working tree. Run here (PyPI reachable), from the collection's root:
#   bench/gpu/sglang-wheels.sh [DEST]        # DEST defaults to .gpu (git-ignored)
# -> DEST/wheels/*.whl and DEST/part00, part01, ... (uncompressed tars of whole wheels, each at most
# PIECE bytes, default 47,500,000: with the ~16.5 MB working tree under the 64 MiB of one call).
# On the host: `tar xf .gpu/partNN -C /root/wheels` per call (carry: [".gpu/partNN"]).
# How the list was made: `uv pip compile` of sglang==0.5.17 for Python 3.12 / manylinux_2_35 (torch
# 2.11.0 pinned by SGLang itself), less what the image has (its pip freeze is in the results folder;
# carried anyway: transformers 5.12.1, which SGLang pins, and tokenizers 0.22.2, which that
# transformers needs (<= 0.23.0); the image has 5.17.0 and 0.23.2), less the optional heavy extras SGLang 0.5.17 serves a Qwen3 model without (tokenspeed-*,
# nvidia-cutlass-dsl*, nvidia-nvvm, nvidia-cuda-nvcc/crt/nvdisasm/cccl, nvidia-mathdx, tilelang,
# z3-solver, helion, humming-kernels, flash-attn-4, quack-kernels, kernels, torchcodec, cuda-tile,
# filecheck, modelscope, py-spy, nvidia-cudnn-frontend, nccl4py, mistral-common and its pycountry,
# pydantic-extra-types), plus ansible-core 2.19.14 and resolvelib 1.2.1 for the playbooks. The
# sglang-kernel wheel loses sgl_kernel/flash_ops.abi3.so (FA3, 1.12 GB unpacked: the profile's args
# pick triton attention instead), sgl_kernel/sm100/ (the H200 loads sm90/) and infllm_ops (loaded
# lazily, MiniCPM4 only): 383 MB -> 18 MB.
set -euo pipefail
DEST=${1:-.gpu}
PIECE=${PIECE:-47500000}
LIST=bench/results/h200-sglang-20261203/carried-wheels.txt
# shellcheck source=bench/gpu/carried-wheels.sh
. "$(dirname "$0")/carried-wheels.sh"
carried_wheels "$LIST" "$DEST"
python3 - "$DEST" "$PIECE" <<'PY'
import os, sys, tarfile, zipfile
dest, piece = sys.argv[1], int(sys.argv[2])
wheels = os.path.join(dest, "wheels")
kernel = os.path.join(wheels, "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl")
drop = ("sgl_kernel/flash_ops.abi3.so", "sgl_kernel/sm100/common_ops.abi3.so",
        "sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so")
with zipfile.ZipFile(kernel) as zin:
    names = zin.namelist()
    if any(name in names for name in drop):
        with zipfile.ZipFile(kernel + ".tmp", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
            for info in zin.infolist():
                if info.filename in drop:
                    continue
                data = zin.read(info.filename)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"\n".join(line for line in data.split(b"\n") if line.split(b",")[0].decode() not in drop)
                zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
        os.replace(kernel + ".tmp", kernel)
wanted = set(line.split()[1] for line in open("bench/results/h200-sglang-20261203/carried-wheels.txt")
             if not line.startswith("#"))
have = set(f for f in os.listdir(wheels) if f.endswith(".whl"))
if wanted - have:
    sys.exit("missing wheels: %s" % ", ".join(sorted(wanted - have)))
# first fit, largest first: whole wheels per piece, so each piece unpacks on its own
bins = []
for size, name in sorted(((os.path.getsize(os.path.join(wheels, f)), f) for f in wanted), reverse=True):
    for b in bins:
        if b[0] + size + 1024 <= piece:
            b[0] += size + 1024
            b[1].append(name)
            break
    else:
        bins.append([size + 1024, [name]])
for i, (size, names) in enumerate(bins):
    with tarfile.open(os.path.join(dest, "part%02d" % i), "w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(names):
            tar.add(os.path.join(wheels, name), arcname=name)
    print("%s/part%02d: %d wheels, %d bytes" % (dest, i, len(names), os.path.getsize(os.path.join(dest, "part%02d" % i))))
PY

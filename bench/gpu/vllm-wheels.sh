#!/usr/bin/env bash
# The wheels vLLM 0.26.0 needs on the lent H200 host over the image's torch 2.11.0+cu130 (the shared
# GPU recipe, section 1: `uv pip compile vllm==0.26.0` for Python 3.12 / manylinux_2_35, less what
# the image has, less the optional heavy extras; plus ansible-core 2.19.14 and resolvelib 1.2.1),
# as carried for bench/results/h200-calibration-20261203 (carried-wheels.txt there: 91 wheels), cut
# into pieces that fit one device call beside the working tree. Run here (PyPI reachable), from the
# collection's root:
#   bench/gpu/vllm-wheels.sh [DEST]          # DEST defaults to .gpu/calib (git-ignored)
# -> DEST/wheels/*.whl and DEST/part00, part01, ...: one uncompressed tar of all wheels cut into
# pieces of at most PIECE bytes (default 41,500,000: with the ~17 MB working tree well under the
# 64 MiB of one call). On the host: `cat .gpu/calib/partNN >> /root/wheels.tar` per call (carry:
# [".gpu/calib/partNN"]), then `tar xf /root/wheels.tar -C /root/wheels`.
# The vLLM wheel (303,698,761 bytes on PyPI) loses vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so (FA2:
# on Hopper vLLM 0.26 picks FA3, "Using FLASH_ATTN attention backend") and the deep_gemm _C
# libraries for Pythons other than 3.12, as in the runs of tests/fixtures/gpu/holdout (2026-12-01).
set -euo pipefail
DEST=${1:-.gpu/calib}
PIECE=${PIECE:-41500000}
LIST=bench/results/h200-calibration-20261203/carried-wheels.txt
mkdir -p "$DEST/wheels"
grep -v '^#' "$LIST" | awk '{print $2}' | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' > "$DEST/wheels.txt"
platforms=()
for tag in manylinux1 manylinux2010 manylinux2014 manylinux_2_5 manylinux_2_12 manylinux_2_17 manylinux_2_24 \
           manylinux_2_26 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
  platforms+=(--platform "${tag}_x86_64")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --abi cp312 --abi abi3 --abi none "${platforms[@]}" --platform any -d "$DEST/wheels" -r "$DEST/wheels.txt"
python3 - "$DEST" "$PIECE" "$LIST" <<'PY'
import os, sys, tarfile, zipfile
dest, piece, listing = sys.argv[1], int(sys.argv[2]), sys.argv[3]
wheels = os.path.join(dest, "wheels")
wanted = set(line.split()[1] for line in open(listing) if line.strip() and not line.startswith("#"))
vllm = os.path.join(wheels, [w for w in wanted if w.startswith("vllm-0.26.0-")][0])
def dropped(name):
    if name == "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so":
        return True
    return name.startswith("vllm/third_party/deep_gemm/_C.cpython-") and "-312-" not in name
with zipfile.ZipFile(vllm) as zin:
    if any(dropped(name) for name in zin.namelist()):
        with zipfile.ZipFile(vllm + ".tmp", "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                if dropped(info.filename):
                    continue
                data = zin.read(info.filename)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"\n".join(line for line in data.split(b"\n")
                                      if not (line and dropped(line.split(b",")[0].decode())))
                zout.writestr(info, data, compress_type=info.compress_type)
        os.replace(vllm + ".tmp", vllm)
have = set(f for f in os.listdir(wheels) if f.endswith(".whl"))
if wanted - have:
    sys.exit("missing wheels: %s" % ", ".join(sorted(wanted - have)))
# one tar of all wheels (the trimmed vLLM wheel alone is larger than a piece), cut into pieces of
# at most PIECE bytes that are concatenated again on the host
whole = os.path.join(dest, "wheels.tar")
with tarfile.open(whole, "w", format=tarfile.GNU_FORMAT) as tar:
    for name in sorted(wanted):
        tar.add(os.path.join(wheels, name), arcname=name)
with open(whole, "rb") as handle:
    i = 0
    while True:
        data = handle.read(piece)
        if not data:
            break
        with open(os.path.join(dest, "part%02d" % i), "wb") as out:
            out.write(data)
        print("%s/part%02d: %d bytes" % (dest, i, len(data)))
        i += 1
os.remove(whole)
PY

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
# 64 MiB of one call), and DEST/wheels.sha256 (of the whole tar, as /root/wheels.tar). On the host:
# `cat .gpu/calib/partNN >> /root/wheels.tar` per call (carry: [".gpu/calib/partNN"]), check the
# sha256, then `tar xf /root/wheels.tar -C /root/wheels`.
# The vLLM wheel (303,698,761 bytes on PyPI) loses vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so (FA2:
# on Hopper vLLM 0.26 picks FA3, "Using FLASH_ATTN attention backend") and the deep_gemm _C
# libraries for Pythons other than 3.12, as in the runs of tests/fixtures/gpu/holdout (2026-12-01).
# Options (environment):
#   PIECE=N     bytes a piece; PIECE=tree: as much as one call takes beside the working tree (64 MiB
#               less the tracked and untracked files git does not ignore, less 1.5 MB of room)
#   DROP=PATHS  more members the vLLM wheel loses (space-separated), e.g. DROP=vllm/vllm-rs (the
#               Rust frontend binary, 15.6 MB compressed; `vllm serve` runs it only with
#               VLLM_USE_RUST_FRONTEND=1: vllm/envs.py _resolve_rust_frontend_path of the wheel)
#   SRC=DIR     the wheels of an earlier run (SRC/wheels, e.g. .gpu/calib) instead of a download;
#               the vLLM wheel is then trimmed in a copy in DEST and SRC is left as it is
# e.g. the five pieces of bench/results/h200-hybrid-20261207:
#   SRC=.gpu/calib DROP=vllm/vllm-rs PIECE=46639104 bench/gpu/vllm-wheels.sh .gpu/hybrid
set -euo pipefail
DEST=${1:-.gpu/calib}
SRC=${SRC:-$DEST}
DROP=${DROP:-}
PIECE=${PIECE:-41500000}
if [ "$PIECE" = tree ]; then
  TREE=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null |
          awk '{s += $1} END {print s}')
  PIECE=$(( 67108864 - TREE - 1500000 ))
fi
LIST=bench/results/h200-calibration-20261203/carried-wheels.txt
# the vLLM wheel trimmed, one tar of all wheels cut into DEST/partNN, and the tar's sha256
pieces() {
  rm -f "$DEST"/part[0-9][0-9]
  python3 - "$DEST" "$PIECE" "$LIST" "$SRC" "$DROP" <<'PY'
import hashlib, os, sys, tarfile, zipfile
dest, piece, listing, src, drop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].split()
wheels = os.path.join(src, "wheels")
wanted = set(line.split()[1] for line in open(listing) if line.strip() and not line.startswith("#"))
vllm_name = [w for w in wanted if w.startswith("vllm-0.26.0-")][0]
vllm = os.path.join(wheels, vllm_name)
# trimmed in place in a download of its own; in a copy in DEST when the wheels are SRC's
trimmed = vllm if src == dest else os.path.join(dest, vllm_name)
def dropped(name):
    if name == "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" or name in drop:
        return True
    return name.startswith("vllm/third_party/deep_gemm/_C.cpython-") and "-312-" not in name
with zipfile.ZipFile(vllm) as zin:
    if any(dropped(name) for name in zin.namelist()):
        with zipfile.ZipFile(trimmed + ".tmp", "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                if dropped(info.filename):
                    continue
                data = zin.read(info.filename)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"\n".join(line for line in data.split(b"\n")
                                      if not (line and dropped(line.split(b",")[0].decode())))
                zout.writestr(info, data, compress_type=info.compress_type)
        os.replace(trimmed + ".tmp", trimmed)
    else:
        trimmed = vllm
have = set(f for f in os.listdir(wheels) if f.endswith(".whl"))
if wanted - have:
    sys.exit("missing wheels: %s" % ", ".join(sorted(wanted - have)))
# one tar of all wheels (the trimmed vLLM wheel alone is larger than a piece), cut into pieces of
# at most PIECE bytes that are concatenated again on the host
whole = os.path.join(dest, "wheels.tar")
with tarfile.open(whole, "w", format=tarfile.GNU_FORMAT) as tar:
    for name in sorted(wanted):
        tar.add(trimmed if name == vllm_name else os.path.join(wheels, name), arcname=name)
if trimmed != vllm:
    os.remove(trimmed)
digest = hashlib.sha256()
with open(whole, "rb") as handle:
    i = 0
    while True:
        data = handle.read(piece)
        if not data:
            break
        digest.update(data)
        with open(os.path.join(dest, "part%02d" % i), "wb") as out:
            out.write(data)
        print("%s/part%02d: %d bytes" % (dest, i, len(data)))
        i += 1
os.remove(whole)
with open(os.path.join(dest, "wheels.sha256"), "w") as out:
    out.write("%s  /root/wheels.tar\n" % digest.hexdigest())
print("%d wheels, sha256 %s" % (len(wanted), digest.hexdigest()))
PY
}
if [ "$SRC" != "$DEST" ]; then
  mkdir -p "$DEST"
  pieces
  exit
fi
# shellcheck source=bench/gpu/carried-wheels.sh
. "$(dirname "$0")/carried-wheels.sh"
carried_wheels "$LIST" "$DEST"
pieces

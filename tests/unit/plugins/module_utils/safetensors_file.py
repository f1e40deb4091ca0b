# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test helper: the bytes of a small, valid safetensors file."""
import json
import struct


def safetensors_bytes(tensors):
    """A valid safetensors file: {name: (shape, dtype, data bytes)}."""
    header, data = {}, b""
    for name, (shape, dtype, blob) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    raw = json.dumps(header).encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw + data

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: NVIDIA GPUs, driver, CUDA driver version and interconnect of a host
version_added: "0.1.0"
description:
  - Reads the GPUs through NVML (the C(pynvml) module of the C(nvidia-ml-py) package) when it
    imports, else through C(nvidia-smi -q -x) plus C(nvidia-smi --query-gpu=compute_cap).
  - Reports the driver version and branch, the CUDA driver API version, and per GPU the name,
    UUID, PCI bus id, memory (total, driver-reserved, usable by CUDA), compute capability,
    persistence mode and MIG mode.
  - Reads the link matrix from C(nvidia-smi topo -m) (NVLink, PCIe) and detects NVSwitch
    fabrics (NVML NVLink remote type, fabric state, C(/proc/driver/nvidia-nvswitch)); on NVSwitch
    systems it reports the fabric state and the C(nvidia-fabricmanager) unit.
  - A host without GPUs is a valid answer (RV(gpu_count=0)); the module fails only with
    O(require_gpus=true). NVIDIA GPUs on the PCI bus without a working driver are counted in
    RV(pci_gpu_count).
  - Returns its facts under C(ansible_facts.llmops_gpu), as C(*_facts) modules do, and, for
    compatibility with results registered by earlier versions, also as top-level keys of the
    result (the same data).
  - Changes nothing on the host.
author:
  - llmops.serving maintainers (@llmops)
options:
  require_gpus:
    description:
      - Fail when no GPU is visible through NVML or nvidia-smi.
    type: bool
    default: false
  prefer:
    description:
      - Which source to read. V(auto) tries NVML, then nvidia-smi.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  nvidia_smi_path:
    description:
      - Path of nvidia-smi; found on the PATH when not given.
    type: path
extends_documentation_fragment:
  - llmops.serving.read_only
seealso:
  - module: llmops.serving.serving_plan
"""

EXAMPLES = r"""
- name: Read the GPUs
  llmops.serving.gpu_facts:
  register: __gpus

- name: Fail on hosts where a GPU stack has no GPU
  llmops.serving.gpu_facts:
    require_gpus: true

- name: Force the nvidia-smi path (for example when NVML's Python binding is broken)
  llmops.serving.gpu_facts:
    prefer: nvidia-smi
"""

RETURN = r"""
# Every key below but ansible_facts is also returned as ansible_facts.llmops_gpu.<key>: the facts
# convention. The top-level keys remain for results registered by earlier versions.
ansible_facts:
  description: The facts, by the C(*_facts) convention; set as host facts when the task succeeds.
  returned: always
  type: dict
  contains:
    llmops_gpu:
      description: Every other key of this result (C(gpu_count), C(gpus), C(topology) ...), the
        same data as the top-level keys.
      returned: always
      type: dict
      sample: {gpu_count: 2, source: nvml, driver_version: 580.159.04, driver_branch: 580}
gpu_count:
  description: GPUs visible to NVML or nvidia-smi.
  returned: always
  type: int
  sample: 2
pci_gpu_count:
  description: NVIDIA display/3D controllers on the PCI bus, with or without a driver.
  returned: always
  type: int
  sample: 2
pci_gpus:
  description: The NVIDIA display/3D controllers on the PCI bus, each with its bus id, PCI device
    id and the kernel driver bound to it (null when none is).
  returned: always
  type: list
  elements: dict
  sample:
    - {bus_id: "0000:00:06.0", device_id: "0x2335", driver: nvidia}
source:
  description: Where the facts came from.
  returned: always
  type: str
  sample: nvml
driver_version:
  description: NVIDIA driver version, null without GPUs.
  returned: always
  type: str
  sample: 580.159.04
driver_branch:
  description: Major number of the driver version.
  returned: always
  type: int
  sample: 580
cuda_driver_version:
  description: Highest CUDA version the driver's API supports.
  returned: always
  type: str
  sample: "13.0"
gpus:
  description: One entry per GPU.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H200
      uuid: GPU-6cddd06f-8784-75c0-bba2-de77592df22f
      pci_bus_id: 00000000:00:06.0
      architecture: Hopper
      compute_capability: "9.0"
      memory_total_bytes: 150754820096
      memory_total_mib: 143771
      memory_reserved_bytes: 644939776
      memory_usable_bytes: 150109880320
      memory_used_bytes: 0
      persistence_mode: true
      mig_mode: {current: false, pending: false}
      fabric: {state: Completed, status: Success}
gpu_names:
  description: The distinct GPU model names, sorted (more than one is a mixed host).
  returned: always
  type: list
  elements: str
  sample: [NVIDIA H200]
memory_total_bytes_min:
  description: Smallest total memory among the GPUs (NVML or nvidia-smi total, driver-reserved
    memory included); 0 without GPUs.
  returned: always
  type: int
  sample: 150754820096
memory_usable_bytes_min:
  description: Smallest CUDA-usable memory among the GPUs (NVML total minus driver-reserved); 0
    without GPUs.
  returned: always
  type: int
  sample: 150109880320
topology:
  description: Interconnect summary (none, single, pcie, nvlink, nvlink-partial, nvswitch), the
    GPU pairs with their link code, the topo matrix and CPU/NUMA affinity.
  returned: always
  type: dict
  sample:
    interconnect: nvswitch
    links: [{a: 0, b: 1, type: NVLink, code: NV18, nvlinks: 18}]
fabric_manager:
  description: NVSwitch presence, fabric states, the nvidia-fabricmanager unit state and whether
    the fabric is ready (null when it cannot be told).
  returned: always
  type: dict
  sample: {nvswitch: true, states: [Completed], service: absent, ready: true}
problems:
  description: What needs fixing, each with check, variable, msg and fix.
  returned: always
  type: list
  elements: dict
notices:
  description: Things worth knowing that need no fix.
  returned: always
  type: list
  elements: str
errors:
  description: Why a source that was tried failed (NVML raising, C(nvidia-smi -q -x) failing, or
    the source O(prefer) names missing); empty when the first source tried answered or none was
    there to try.
  returned: always
  type: list
  elements: str
  sample: ["NVML: the pynvml module (package nvidia-ml-py) is not importable"]
summary:
  description: Human-readable lines (driver, one per GPU, interconnect).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils.gpu import (
    gather_gpu_facts,
    gpu_summary_lines,
    import_pynvml,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            require_gpus=dict(type="bool", default=False),
            prefer=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia-smi"]),
            nvidia_smi_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    prefer = module.params["prefer"]
    nvml = import_pynvml() if prefer in ("auto", "nvml") else None
    smi = module.params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    facts = gather_gpu_facts(module.run_command, nvml=nvml, nvidia_smi=smi,
                             systemctl=module.get_bin_path("systemctl"), prefer=prefer)
    facts["summary"] = gpu_summary_lines(facts)
    # ansible_facts by the *_facts convention; the same keys stay top-level for compatibility.
    result = dict(facts, ansible_facts={"llmops_gpu": dict(facts)})
    if module.params["require_gpus"] and not facts["gpu_count"]:
        why = "; ".join(facts["errors"] + facts["notices"]) or "no NVML, no nvidia-smi"
        module.fail_json(msg="no NVIDIA GPU visible (%s): install the driver (nvidia_driver role) "
                             "or, for a CPU host, set serving_stack: cpu" % why, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()

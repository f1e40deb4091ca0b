# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts from NVML (nvidia-ml-py) or, as a fallback, from nvidia-smi.

Pure logic, no Ansible objects: callers hand in a ``run_command(argv) -> (rc, out, err)`` callable
(AnsibleModule.run_command fits) and, optionally, the ``pynvml`` module object, so the unit tests
can replay recorded outputs of real machines.

Sources, in order of preference:
  * NVML through ``pynvml`` (package nvidia-ml-py) when it imports and nvmlInit() succeeds;
  * ``nvidia-smi -q -x`` (XML) for driver, CUDA driver version and per-GPU data, plus
    ``nvidia-smi --query-gpu=index,compute_cap --format=csv`` for the compute capability (the XML
    does not carry it);
  * ``nvidia-smi topo -m`` for the link matrix (NVLink / PCIe) in both cases.
No GPU (no NVML, no nvidia-smi, or zero devices) is a valid answer: gpu_count 0.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import json
import os
import re
import xml.etree.ElementTree as ET

MIB = 1024 * 1024
GIB = 1024 * MIB

# NVML architecture enum (nvmlDeviceGetArchitecture) -> name, as in nvml.h.
NVML_ARCHITECTURES = {
    2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
    8: "Ada Lovelace", 9: "Hopper", 10: "Blackwell",
}
# nvmlDeviceGetNvLinkRemoteDeviceType
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
NVML_NVLINK_MAX_LINKS = 18
FABRIC_SERVICE = "nvidia-fabricmanager"
NVSWITCH_PROC_DIR = "/proc/driver/nvidia-nvswitch/devices"

# nvmlGpuFabricState_t
NVML_FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}


def _text(value):
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    value = str(value).strip()
    return value


def _na(value):
    """None for nvidia-smi's placeholders."""
    value = _text(value)
    if value in (None, "", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "None"):
        return None
    return value


def driver_branch(driver_version):
    """'580.159.04' -> 580 (None when unknown)."""
    match = re.match(r"\s*(\d+)", driver_version or "")
    return int(match.group(1)) if match else None


def cuda_version_from_int(value):
    """NVML's 13000 -> '13.0', 12040 -> '12.4'."""
    if value is None:
        return None
    value = int(value)
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def _mib_to_bytes(text):
    """'143771 MiB' -> bytes (None for N/A)."""
    text = _na(text)
    if text is None:
        return None
    match = re.match(r"([\d.]+)\s*(MiB|GiB|KiB|B)?", text)
    if not match:
        return None
    number = float(match.group(1))
    unit = match.group(2) or "MiB"
    factor = {"B": 1, "KiB": 1024, "MiB": MIB, "GiB": GIB}[unit]
    return int(number * factor)


def _enabled(text):
    text = _na(text)
    if text is None:
        return None
    return text.lower() in ("enabled", "on", "1", "true", "yes")


def _find(elem, path):
    if elem is None:
        return None
    found = elem.find(path)
    return None if found is None else found.text


def _gpu_entry(index, name, uuid, pci_bus_id, total, reserved, used, cc, persistence, mig_current,
               mig_pending, architecture=None, fabric_state=None, fabric_status=None):
    usable = None
    if total is not None:
        usable = total - (reserved or 0)
    return {
        "index": index,
        "name": name,
        "uuid": uuid,
        "pci_bus_id": pci_bus_id,
        "architecture": architecture,
        "compute_capability": cc,
        "memory_total_bytes": total,
        "memory_total_mib": None if total is None else total // MIB,
        # Memory the driver keeps for itself (NVML v2 / nvidia-smi "Reserved"). CUDA's own
        # cudaMemGetInfo total (what torch and the engines budget with) is total - reserved.
        "memory_reserved_bytes": reserved,
        "memory_usable_bytes": usable,
        "memory_used_bytes": used,
        "persistence_mode": persistence,
        "mig_mode": {"current": mig_current, "pending": mig_pending},
        "fabric": {"state": fabric_state, "status": fabric_status},
    }


# --------------------------------------------------------------------------------------- parsers
def parse_smi_xml(text):
    """Parse ``nvidia-smi -q -x``. Returns dict(driver_version, cuda_driver_version, gpus)."""
    root = ET.fromstring(text)
    gpus = []
    for position, gpu in enumerate(root.findall("gpu")):
        minor = _na(_find(gpu, "minor_number"))
        pci = _na(_find(gpu, "pci/pci_bus_id")) or _na(gpu.get("id"))
        gpus.append(_gpu_entry(
            index=position,
            name=_na(_find(gpu, "product_name")),
            uuid=_na(_find(gpu, "uuid")),
            pci_bus_id=pci,
            total=_mib_to_bytes(_find(gpu, "fb_memory_usage/total")),
            reserved=_mib_to_bytes(_find(gpu, "fb_memory_usage/reserved")),
            used=_mib_to_bytes(_find(gpu, "fb_memory_usage/used")),
            cc=None,
            persistence=_enabled(_find(gpu, "persistence_mode")),
            mig_current=_enabled(_find(gpu, "mig_mode/current_mig")),
            mig_pending=_enabled(_find(gpu, "mig_mode/pending_mig")),
            architecture=_na(_find(gpu, "product_architecture")),
            fabric_state=_na(_find(gpu, "fabric/state")),
            fabric_status=_na(_find(gpu, "fabric/status")),
        ))
        gpus[-1]["minor_number"] = None if minor is None else int(minor)
    return {
        "driver_version": _na(_find(root, "driver_version")),
        "cuda_driver_version": _na(_find(root, "cuda_version")),
        "gpus": gpus,
    }


def parse_query_csv(text):
    """Parse ``nvidia-smi --query-gpu=... --format=csv`` (with header). -> list of dicts keyed by
    the header names without units (``memory.total``), values without units."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return []
    header = [re.sub(r"\s*\[.*\]$", "", col.strip()) for col in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        cols = [col.strip() for col in line.split(",")]
        row = {}
        for key, value in zip(header, cols):
            value = re.sub(r"\s+(MiB|W|MHz|%)$", "", value)
            row[key] = value
        rows.append(row)
    return rows


def parse_topo(text):
    """Parse ``nvidia-smi topo -m``. Returns dict(devices, matrix, links, affinity) where links
    lists each GPU pair once: {a, b, type, nvlinks}."""
    # nvidia-smi underlines the header with ANSI escapes even when writing to a pipe
    text = re.sub(r"\x1b\[[0-9;]*m", "", text or "")
    lines = [line.rstrip("\n") for line in text.splitlines()]
    header_cols = None
    rows = {}
    affinity = {}
    for line in lines:
        if not line.strip():
            if rows:
                break
            continue
        cols = [col.strip() for col in line.split("\t") if col.strip() != ""] if "\t" in line \
            else line.split()
        if header_cols is None:
            if cols and cols[0].startswith("GPU"):
                header_cols = cols
            continue
        if not cols or not re.match(r"^(GPU|NIC|mlx)", cols[0]):
            break
        name = cols[0]
        devices = [col for col in header_cols if re.match(r"^(GPU\d+|NIC\d+|mlx\S+)$", col)]
        cells = cols[1:1 + len(devices)]
        rows[name] = dict(zip(devices, cells))
        extra = cols[1 + len(devices):]
        if name.startswith("GPU"):
            affinity[name] = {"cpu": extra[0] if len(extra) > 0 else None,
                              "numa": extra[1] if len(extra) > 1 else None}
    gpus = sorted([name for name in rows if name.startswith("GPU")], key=lambda n: int(n[3:]))
    links = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            kind = rows.get(a, {}).get(b)
            if kind is None:
                continue
            nvlinks = int(kind[2:]) if kind.startswith("NV") else 0
            links.append({"a": int(a[3:]), "b": int(b[3:]),
                          "type": "NVLink" if nvlinks else kind, "code": kind, "nvlinks": nvlinks})
    return {"devices": gpus, "matrix": rows, "links": links, "affinity": affinity}


def summarize_topology(gpu_count, links, nvswitch):
    """One word for how the GPUs talk: none, single, nvswitch, nvlink, nvlink-partial, pcie."""
    if gpu_count == 0:
        return "none"
    if gpu_count == 1:
        return "nvswitch" if nvswitch else "single"
    if nvswitch:
        return "nvswitch"
    pairs = gpu_count * (gpu_count - 1) // 2
    nv_pairs = len([link for link in links if link.get("nvlinks")])
    if links and nv_pairs == pairs:
        return "nvlink"
    if nv_pairs:
        return "nvlink-partial"
    return "pcie" if links else "unknown"


# ----------------------------------------------------------------------------------- collectors
def collect_nvml(nvml):
    """Read everything from an initialised-or-not pynvml module. Raises on NVML failure."""
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = None
        for getter in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            if hasattr(nvml, getter):
                try:
                    cuda = cuda_version_from_int(getattr(nvml, getter)())
                    break
                except Exception:  # pylint: disable=broad-except
                    continue
        count = int(nvml.nvmlDeviceGetCount())
        gpus = []
        handles = []
        nvlink_remote = {}
        switch_links = 0
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            handles.append(handle)
            reserved = None
            try:
                mem = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
                reserved = int(getattr(mem, "reserved", 0)) or None
            except Exception:  # pylint: disable=broad-except
                mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            cc = None
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = "%d.%d" % (major, minor)
            except Exception:  # pylint: disable=broad-except
                pass
            persistence = None
            try:
                persistence = bool(nvml.nvmlDeviceGetPersistenceMode(handle))
            except Exception:  # pylint: disable=broad-except
                pass
            mig_current = mig_pending = None
            try:
                mig_current, mig_pending = [bool(x) for x in nvml.nvmlDeviceGetMigMode(handle)]
            except Exception:  # pylint: disable=broad-except
                pass
            architecture = None
            try:
                architecture = NVML_ARCHITECTURES.get(int(nvml.nvmlDeviceGetArchitecture(handle)))
            except Exception:  # pylint: disable=broad-except
                pass
            fabric_state, fabric_status = nvml_fabric_info(nvml, handle)
            pci = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
            remotes = []
            for link in range(NVML_NVLINK_MAX_LINKS):
                try:
                    if not nvml.nvmlDeviceGetNvLinkState(handle, link):
                        continue
                except Exception:  # pylint: disable=broad-except
                    continue
                remote = None
                try:
                    remote = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
                except Exception:  # pylint: disable=broad-except
                    pass
                try:
                    if int(nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)) == \
                            NVML_NVLINK_DEVICE_TYPE_SWITCH:
                        switch_links += 1
                except Exception:  # pylint: disable=broad-except
                    pass
                remotes.append(remote)
            nvlink_remote[index] = remotes
            gpus.append(_gpu_entry(
                index=index,
                name=_text(nvml.nvmlDeviceGetName(handle)),
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                pci_bus_id=pci,
                total=int(mem.total),
                reserved=reserved,
                used=int(mem.used),
                cc=cc,
                persistence=persistence,
                mig_current=mig_current,
                mig_pending=mig_pending,
                architecture=architecture,
                fabric_state=fabric_state,
                fabric_status=fabric_status,
            ))
        links = []
        for i in range(count):
            for j in range(i + 1, count):
                # NVLink count between a pair: links of i whose remote is j (direct NVLink only;
                # through NVSwitch the remote is the switch, handled by the nvswitch flag).
                pci_j = (gpus[j]["pci_bus_id"] or "").lower()
                direct = len([r for r in nvlink_remote.get(i, []) if r and r.lower() == pci_j])
                links.append({"a": i, "b": j, "type": "NVLink" if direct else "unknown",
                              "code": "NV%d" % direct if direct else None, "nvlinks": direct})
        return {
            "driver_version": driver,
            "cuda_driver_version": cuda,
            "gpus": gpus,
            "nvml_links": links,
            "nvlink_active": dict((i, len(r)) for i, r in nvlink_remote.items()),
            "nvlink_switch_links": switch_links,
        }
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # pylint: disable=broad-except
            pass


def nvml_fabric_info(nvml, handle):
    """(state, status) of the GPU's NVSwitch fabric registration, (None, None) when the GPU is not
    on an NVSwitch fabric or this NVML cannot tell. Older nvidia-ml-py wrappers return the struct;
    current ones take a pointer to it (ctypes.byref, never the struct by value)."""
    getter = getattr(nvml, "nvmlDeviceGetGpuFabricInfo", None)
    if getter is None:
        return None, None
    try:
        info = getter(handle)
    except TypeError:
        struct_type = getattr(nvml, "c_nvmlGpuFabricInfo_t", None)
        if struct_type is None:
            return None, None
        info = struct_type()
        try:
            getter(handle, ctypes.byref(info))
        except Exception:  # pylint: disable=broad-except
            return None, None
    except Exception:  # pylint: disable=broad-except
        return None, None
    try:
        state = NVML_FABRIC_STATES.get(int(info.state), str(info.state))
        status = int(info.status)
    except (AttributeError, TypeError, ValueError):
        return None, None
    if state == "Not Supported":
        return None, None
    return state, ("Success" if status == 0 else "Error %d" % status)


def import_pynvml():
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
        return pynvml
    except Exception:  # pylint: disable=broad-except
        return None


def _fabric_service_state(run_command, systemctl):
    if not systemctl:
        return "unknown"
    rc, out, _err = run_command([systemctl, "is-active", FABRIC_SERVICE])
    if rc == 0:
        return "active"
    # systemctl answers "inactive" (rc 3) for units that do not exist too: ask whether it does.
    rc2, out2, _err2 = run_command([systemctl, "list-unit-files", FABRIC_SERVICE + ".service",
                                    "--no-legend"])
    if rc2 != 0 or FABRIC_SERVICE not in (out2 or ""):
        return "absent"
    state = (out or "").strip().splitlines()
    return state[0] if state else "inactive"


def gather_gpu_facts(run_command, nvml=None, nvidia_smi=None, systemctl=None, prefer="auto",
                     nvswitch_dir=NVSWITCH_PROC_DIR, sys_root="/sys"):
    """All GPU facts. ``nvml``: the pynvml module (None: not available). ``nvidia_smi`` and
    ``systemctl``: absolute paths or None. Never raises for "no GPU"; returns gpu_count 0."""
    warnings = []
    data = None
    source = "none"
    errors = []
    if prefer in ("auto", "nvml") and nvml is not None:
        try:
            data = collect_nvml(nvml)
            source = "nvml"
        except Exception as exc:  # pylint: disable=broad-except
            errors.append("NVML: %s" % exc)
            data = None
    elif prefer == "nvml":
        errors.append("NVML: the pynvml module (package nvidia-ml-py) is not importable")
    if data is None and prefer in ("auto", "nvidia-smi") and nvidia_smi:
        rc, out, err = run_command([nvidia_smi, "-q", "-x"])
        if rc == 0 and out.strip():
            try:
                data = parse_smi_xml(out)
                source = "nvidia-smi"
            except ET.ParseError as exc:
                errors.append("nvidia-smi -q -x: unparsable XML (%s)" % exc)
        else:
            errors.append("nvidia-smi -q -x: rc=%s %s" % (rc, (err or out or "").strip()[:300]))
        if data is not None and data["gpus"]:
            rc, out, _err = run_command([nvidia_smi, "--query-gpu=index,pci.bus_id,compute_cap",
                                         "--format=csv"])
            if rc == 0:
                by_bus = dict(((row.get("pci.bus_id") or "").lower(), row)
                              for row in parse_query_csv(out))
                for gpu in data["gpus"]:
                    row = by_bus.get((gpu["pci_bus_id"] or "").lower())
                    if row and _na(row.get("compute_cap")):
                        gpu["compute_capability"] = row["compute_cap"]
            else:
                warnings.append("nvidia-smi has no compute_cap query field (driver too old?): "
                                "compute capability unknown")
    elif data is None and prefer == "nvidia-smi" and not nvidia_smi:
        errors.append("nvidia-smi: not found on PATH")
    if data is None:
        data = {"driver_version": None, "cuda_driver_version": None, "gpus": []}

    gpus = data["gpus"]
    topo = {"devices": [], "matrix": {}, "links": [], "affinity": {}}
    if len(gpus) > 1 and nvidia_smi:
        rc, out, _err = run_command([nvidia_smi, "topo", "-m"])
        if rc == 0:
            topo = parse_topo(out)
        else:
            warnings.append("nvidia-smi topo -m failed: link matrix unknown")
    links = topo["links"] or data.get("nvml_links", [])
    topo_source = "nvidia-smi topo -m" if topo["links"] else ("nvml" if links else None)

    switch_suspected = bool(data.get("nvlink_switch_links")) or bool(
        nvswitch_dir and os.path.isdir(nvswitch_dir) and os.listdir(nvswitch_dir))
    if source == "nvml" and switch_suspected and nvidia_smi and \
            not any(g["fabric"]["state"] for g in gpus):
        # this NVML binding could not read the fabric state: nvidia-smi's XML carries it
        rc, out, _err = run_command([nvidia_smi, "-q", "-x"])
        if rc == 0:
            try:
                by_bus = dict(((g["pci_bus_id"] or "").lower(), g["fabric"])
                              for g in parse_smi_xml(out)["gpus"])
                for gpu in gpus:
                    gpu["fabric"] = by_bus.get((gpu["pci_bus_id"] or "").lower(), gpu["fabric"])
            except ET.ParseError:
                pass
    fabric_states = [g["fabric"]["state"] for g in gpus if g["fabric"]["state"]]
    switch_devices = []
    if nvswitch_dir and os.path.isdir(nvswitch_dir):
        switch_devices = sorted(os.listdir(nvswitch_dir))
    nvswitch = bool(fabric_states) or bool(switch_devices) or \
        bool(data.get("nvlink_switch_links"))
    fabric = {
        "nvswitch": nvswitch,
        "nvswitch_devices_local": len(switch_devices),
        "states": sorted(set(fabric_states)),
        "statuses": sorted(set(g["fabric"]["status"] for g in gpus if g["fabric"]["status"])),
        "service": None,
        "ready": None,
    }
    problems = []
    if nvswitch:
        fabric["service"] = _fabric_service_state(run_command, systemctl)
        states_ok = fabric_states and all(s == "Completed" for s in fabric_states) and \
            all(g["fabric"]["status"] in (None, "Success") for g in gpus if g["fabric"]["state"])
        if fabric_states:
            fabric["ready"] = bool(states_ok)
        elif fabric["service"] == "active":
            fabric["ready"] = True
        elif fabric["service"] in ("inactive", "failed"):
            fabric["ready"] = False
        else:
            # VM slices of HGX boards run the fabric manager on the hypervisor: no local unit.
            warnings.append("NVSwitch system: fabric state not reported and no local %s unit "
                            "(%s); if CUDA fails to initialise, check the fabric manager"
                            % (FABRIC_SERVICE, fabric["service"]))
        if fabric["ready"] is False:
            problems.append({
                "check": "fabric_manager",
                "variable": "nvidia_driver_branch",
                "msg": "NVSwitch system but the GPU fabric is not ready (states %s, service %s): "
                       "CUDA calls fail until nvidia-fabricmanager runs" % (
                           fabric["states"] or "unknown", fabric["service"]),
                "fix": "install nvidia-fabricmanager of exactly the driver's version (%s) and start "
                       "it; the nvidia_driver role does both" % data["driver_version"],
            })
    for gpu in gpus:
        if gpu["persistence_mode"] is False:
            problems.append({
                "check": "persistence_mode", "variable": "nvidia_driver_persistence",
                "msg": "GPU %d (%s): persistence mode is off" % (gpu["index"], gpu["pci_bus_id"]),
                "fix": "enable nvidia-persistenced (the nvidia_driver role does); without it the "
                       "first CUDA call after idle pays the driver load",
            })
        if gpu["mig_mode"]["current"]:
            problems.append({
                "check": "mig", "variable": "serving_tensor_parallel",
                "msg": "GPU %d (%s): MIG is enabled; whole-GPU memory figures do not apply"
                       % (gpu["index"], gpu["pci_bus_id"]),
                "fix": "disable MIG (nvidia-smi -i %d -mig 0, then reset the GPU) or plan per MIG "
                       "slice" % gpu["index"],
            })
    pci = pci_nvidia_gpus(sys_root) if sys_root else []
    if pci and not gpus:
        warnings.append("%d NVIDIA GPU(s) on the PCI bus (%s) but no working driver: NVML and "
                        "nvidia-smi see none" % (len(pci), ", ".join(
                            "%s bound to %s" % (d["bus_id"], d["driver"] or "no driver")
                            for d in pci)))
    names = sorted(set(g["name"] for g in gpus if g["name"]))
    if len(names) > 1:
        warnings.append("mixed GPU models %s: plans use the smallest memory" % ", ".join(names))
    return {
        "gpu_count": len(gpus),
        "pci_gpu_count": len(pci),
        "pci_gpus": pci,
        "source": source,
        "driver_version": data["driver_version"],
        "driver_branch": driver_branch(data["driver_version"]),
        "cuda_driver_version": data["cuda_driver_version"],
        "gpus": gpus,
        "gpu_names": names,
        "memory_total_bytes_min": min([g["memory_total_bytes"] for g in gpus
                                       if g["memory_total_bytes"]] or [0]),
        "memory_usable_bytes_min": min([g["memory_usable_bytes"] for g in gpus
                                        if g["memory_usable_bytes"]] or [0]),
        "topology": {
            "interconnect": summarize_topology(len(gpus), links, nvswitch),
            "links": links,
            "matrix": topo["matrix"],
            "affinity": topo["affinity"],
            "source": topo_source,
        },
        "fabric_manager": fabric,
        "problems": problems,
        "notices": warnings,
        "errors": errors,
    }


def pci_nvidia_gpus(sys_root="/sys"):
    """NVIDIA display/3D controllers on the PCI bus, driver or not: [{bus_id, device_id, driver}].
    Tells "GPUs without a working driver yet" (a fresh host) from "no GPUs"."""
    base = os.path.join(sys_root, "bus/pci/devices")
    found = []
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return found
    for entry in entries:
        path = os.path.join(base, entry)

        def read(name):
            try:
                with open(os.path.join(path, name)) as handle:
                    return handle.read().strip().lower()
            except (IOError, OSError):
                return ""
        # class 0x0300xx VGA controller, 0x0302xx 3D controller (data-centre GPUs)
        if read("vendor") != "0x10de" or not read("class").startswith(("0x0300", "0x0302")):
            continue
        driver = None
        if os.path.islink(os.path.join(path, "driver")):
            driver = os.path.basename(os.readlink(os.path.join(path, "driver")))
        found.append({"bus_id": entry, "device_id": read("device"), "driver": driver})
    return found


def gpu_summary_lines(facts):
    """Human lines for summaries: one per GPU plus topology."""
    if not facts.get("gpu_count"):
        why = "; ".join(facts.get("errors") or []) or "no NVML, no nvidia-smi"
        return ["GPUs: none found (%s)" % why]
    lines = ["driver %s (branch %s), CUDA driver API %s, source %s" % (
        facts["driver_version"], facts["driver_branch"], facts["cuda_driver_version"],
        facts["source"])]
    for gpu in facts["gpus"]:
        total = gpu["memory_total_bytes"] or 0
        lines.append("GPU%d %s cc %s %d MiB (%.2f GiB usable) bus %s persistence %s MIG %s" % (
            gpu["index"], gpu["name"], gpu["compute_capability"], total // MIB,
            (gpu["memory_usable_bytes"] or 0) / float(GIB), gpu["pci_bus_id"],
            "on" if gpu["persistence_mode"] else "off",
            "on" if gpu["mig_mode"]["current"] else "off"))
    topo = facts["topology"]
    codes = sorted(set(link.get("code") or link["type"] for link in topo["links"]))
    lines.append("interconnect %s%s; NVSwitch %s%s" % (
        topo["interconnect"], (" (" + ", ".join(codes) + ")") if codes else "",
        "yes" if facts["fabric_manager"]["nvswitch"] else "no",
        (", fabric %s" % ",".join(facts["fabric_manager"]["states"]))
        if facts["fabric_manager"]["states"] else ""))
    return lines


def to_json(facts):
    return json.dumps(facts, indent=1, sort_keys=True)

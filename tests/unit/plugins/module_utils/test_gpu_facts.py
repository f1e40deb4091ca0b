# -*- coding: utf-8 -*-
"""gpu_facts logic on real H200 recordings (tests/fixtures/gpu): the nvidia-smi fallback with
run_command replayed, NVML through a fake pynvml built from the recorded NVML dumps, and the
failure shapes of hosts without GPUs."""
import ctypes
import json
import os

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import gpu

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "gpu")
H200 = os.path.join(FIX, "h200-x2")
LIVE = os.path.join(FIX, "h200-x2-live")


def read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


class Replay(object):
    """run_command that answers from recorded outputs, keyed by the argv after the binary."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        key = " ".join(argv[1:])
        for prefix, answer in self.answers.items():
            if key.startswith(prefix):
                return answer
        return 127, "", "%s: not recorded" % key


def smi_replay(folder=H200, xml=None):
    return Replay({
        "-q -x": (0, xml if xml is not None else read(folder, "nvidia-smi-q.xml"), ""),
        "--query-gpu": (0, read(folder, "query.csv"), ""),
        "topo -m": (0, read(folder, "topo.txt"), ""),
        "is-active": (4, "inactive\n", ""),
        "list-unit-files": (1, "", ""),
    })


# ------------------------------------------------------------------ a fake pynvml from recordings
class _Obj(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


class NVMLError(Exception):
    pass


class FakeNVML(object):
    """Just the pynvml surface gpu.collect_nvml uses, fed by an NVML dump. Shared fixture format
    (mem_total/mem_used/cc/pci/persistence/mig) and the richer live format (mem_v1/mem_v2,
    nvlinks with remote types) are both accepted."""

    nvmlMemory_v2 = 0x02000028

    def __init__(self, dump, fabric_two_args=True):
        self.dump = dump
        self.fabric_two_args = fabric_two_args
        self.inited = False

    class c_nvmlGpuFabricInfo_t(ctypes.Structure):  # noqa: N801 - pynvml's name
        _fields_ = [("state", ctypes.c_uint8), ("status", ctypes.c_uint32)]

    def nvmlInit(self):
        self.inited = True

    def nvmlShutdown(self):
        self.inited = False

    def nvmlSystemGetDriverVersion(self):
        return self.dump["driver"]

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.dump["cuda_driver_version"]

    def nvmlDeviceGetCount(self):
        return len(self.dump["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.dump["gpus"][index]

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if "mem_v2" in h:
            mem = h["mem_v2"] if version else h["mem_v1"]
            return _Obj(**mem)
        if version:
            raise NVMLError("Function Not Found")  # an NVML without the v2 struct
        return _Obj(total=h["mem_total"], used=h["mem_used"], free=h["mem_total"] - h["mem_used"])

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return tuple(h["cc"])

    def nvmlDeviceGetPersistenceMode(self, h):
        return h["persistence"]

    def nvmlDeviceGetMigMode(self, h):
        return tuple(h["mig"])

    def nvmlDeviceGetArchitecture(self, h):
        return h.get("arch", 9)

    def nvmlDeviceGetPciInfo(self, h):
        return _Obj(busId=h["pci"])

    def nvmlDeviceGetGpuFabricInfo(self, h, info=None):
        if self.fabric_two_args and info is None:
            raise TypeError("nvmlDeviceGetGpuFabricInfo() missing 1 required positional "
                            "argument: 'gpuFabricInfo'")
        fabric = h.get("fabric_recorded")
        if not fabric:
            raise NVMLError("Not Supported")
        target = info._obj if info is not None else self.c_nvmlGpuFabricInfo_t()  # byref()
        target.state, target.status = fabric
        return None if info is not None else target  # older wrappers returned the struct

    def _link(self, h, link):
        links = h.get("nvlinks") or []
        if link >= len(links) or not isinstance(links[link].get("state"), int):
            raise NVMLError("Not Supported")
        return links[link]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return self._link(h, link)["state"]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        return _Obj(busId=self._link(h, link)["remote_pci"])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        return self._link(h, link)["remote_type"]


# ------------------------------------------------------------------------------------- parsers
def test_smi_xml_of_real_h200_host():
    data = gpu.parse_smi_xml(read(H200, "nvidia-smi-q.xml"))
    assert data["driver_version"] == "580.159.04"
    assert data["cuda_driver_version"] == "13.0"
    assert [g["pci_bus_id"] for g in data["gpus"]] == ["00000000:00:06.0", "00000000:00:07.0"]
    first = data["gpus"][0]
    assert first["name"] == "NVIDIA H200"
    assert first["uuid"] == "GPU-6cddd06f-8784-75c0-bba2-de77592df22f"
    assert first["memory_total_mib"] == 143771
    assert first["memory_total_bytes"] == 143771 * 1024 * 1024
    assert first["memory_reserved_bytes"] == 616 * 1024 * 1024
    assert first["memory_usable_bytes"] == (143771 - 616) * 1024 * 1024
    assert first["persistence_mode"] is True
    assert first["mig_mode"] == {"current": False, "pending": False}
    assert first["fabric"] == {"state": "Completed", "status": "Success"}
    assert first["architecture"] == "Hopper"


def test_topology_matrix_with_and_without_ansi_underline():
    recorded = gpu.parse_topo(read(H200, "topo.txt"))
    live = gpu.parse_topo(read(LIVE, "topo.txt"))  # nvidia-smi underlines its header in pipes too
    assert "\x1b[" in read(LIVE, "topo.txt")
    for topo in (recorded, live):
        assert topo["devices"] == ["GPU0", "GPU1"]
        assert topo["links"] == [{"a": 0, "b": 1, "type": "NVLink", "code": "NV18", "nvlinks": 18}]
        assert topo["affinity"]["GPU1"] == {"cpu": "0-31", "numa": "0"}


def test_topology_of_a_pcie_box():
    text = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tPHB\tSYS\t0-15\t0\n"
            "GPU1\tPHB\t X \tSYS\t0-15\t0\n"
            "GPU2\tSYS\tSYS\t X \t16-31\t1\n\nLegend:\n")
    topo = gpu.parse_topo(text)
    assert [link["code"] for link in topo["links"]] == ["PHB", "SYS", "SYS"]
    assert gpu.summarize_topology(3, topo["links"], False) == "pcie"
    assert gpu.summarize_topology(2, [{"nvlinks": 4}], False) == "nvlink"
    assert gpu.summarize_topology(3, [{"nvlinks": 4}, {"nvlinks": 0}, {"nvlinks": 0}], False) \
        == "nvlink-partial"


def test_query_csv_units_are_stripped():
    rows = gpu.parse_query_csv(read(H200, "query.csv"))
    assert rows[1]["memory.total"] == "143771"
    assert rows[1]["compute_cap"] == "9.0"
    assert rows[1]["pci.bus_id"] == "00000000:00:07.0"


@pytest.mark.parametrize("text,expected", [("580.159.04", 580), ("550.163.01", 550),
                                           ("", None), (None, None)])
def test_driver_branch(text, expected):
    assert gpu.driver_branch(text) == expected


def test_cuda_version_from_nvml_integer():
    assert gpu.cuda_version_from_int(13000) == "13.0"
    assert gpu.cuda_version_from_int(12040) == "12.4"


# --------------------------------------------------------------------------------- whole gather
def test_nvidia_smi_fallback_on_h200(tmp_path):
    run = smi_replay()
    facts = gpu.gather_gpu_facts(run, nvml=None, nvidia_smi="/usr/bin/nvidia-smi",
                                 systemctl="/bin/systemctl", nvswitch_dir=str(tmp_path),
                                 sys_root=None)
    assert facts["source"] == "nvidia-smi"
    assert facts["gpu_count"] == 2
    assert facts["driver_branch"] == 580
    assert [g["compute_capability"] for g in facts["gpus"]] == ["9.0", "9.0"]
    assert facts["topology"]["interconnect"] == "nvswitch"
    assert facts["topology"]["links"][0]["code"] == "NV18"
    # fabric state comes from the XML; the local unit is absent (fabric manager on the hypervisor)
    assert facts["fabric_manager"]["states"] == ["Completed"]
    assert facts["fabric_manager"]["ready"] is True
    assert facts["fabric_manager"]["service"] == "absent"
    assert facts["problems"] == []
    assert ["/usr/bin/nvidia-smi", "topo", "-m"] in run.calls


def test_nvml_matches_the_nvidia_smi_view():
    dump = json.loads(read(H200, "nvml.json"))
    facts = gpu.gather_gpu_facts(smi_replay(), nvml=FakeNVML(dump), nvidia_smi="/x/nvidia-smi",
                                 sys_root=None, nvswitch_dir=None)
    smi = gpu.gather_gpu_facts(smi_replay(), nvml=None, nvidia_smi="/x/nvidia-smi",
                               sys_root=None, nvswitch_dir=None)
    assert facts["source"] == "nvml"
    assert facts["cuda_driver_version"] == smi["cuda_driver_version"] == "13.0"
    for a, b in zip(facts["gpus"], smi["gpus"]):
        for key in ("name", "uuid", "pci_bus_id", "compute_capability", "memory_total_bytes",
                    "persistence_mode", "mig_mode"):
            assert a[key] == b[key], key
    # this older dump has no v2 memory struct: reserved is unknown, usable falls back to total
    assert facts["gpus"][0]["memory_reserved_bytes"] is None
    assert facts["topology"]["links"][0]["code"] == "NV18"  # matrix still from topo -m


def test_nvml_live_recording_usable_memory_equals_cuda_total():
    dump = json.loads(read(LIVE, "nvml.json"))
    measured = json.loads(read(LIVE, "torch.json"))
    facts = gpu.gather_gpu_facts(Replay({}), nvml=FakeNVML(dump), nvidia_smi=None,
                                 sys_root=None, nvswitch_dir=None)
    assert facts["gpu_count"] == 2
    # NVML total - reserved is what CUDA (torch.cuda.mem_get_info) reports as the total
    for g, d in zip(facts["gpus"], measured["devices"]):
        assert g["memory_usable_bytes"] == d["cuda_total"]
        assert g["memory_total_bytes"] > g["memory_usable_bytes"]
    # every NVLink of these GPUs ends at a switch: NVSwitch system, even with no fabric state
    assert facts["fabric_manager"]["nvswitch"] is True
    assert facts["topology"]["interconnect"] == "nvswitch"
    assert facts["fabric_manager"]["ready"] is None
    assert any("fabric" in n for n in facts["notices"])


def test_nvml_without_fabric_reads_it_from_nvidia_smi():
    """The live H200 case: this pynvml could not read the fabric, nvidia-smi's XML has it."""
    dump = json.loads(read(LIVE, "nvml.json"))
    run = smi_replay(LIVE)
    facts = gpu.gather_gpu_facts(run, nvml=FakeNVML(dump), nvidia_smi="/x/nvidia-smi",
                                 sys_root=None, nvswitch_dir=None)
    assert facts["source"] == "nvml"
    assert ["/x/nvidia-smi", "-q", "-x"] in run.calls
    assert facts["fabric_manager"]["states"] == ["Completed"]
    assert facts["fabric_manager"]["ready"] is True
    assert facts["notices"] == []


def test_nvml_fabric_struct_argument_and_states():
    dump = json.loads(read(LIVE, "nvml.json"))
    for g in dump["gpus"]:
        g["fabric_recorded"] = (3, 0)
    facts = gpu.gather_gpu_facts(Replay({}), nvml=FakeNVML(dump, fabric_two_args=True),
                                 sys_root=None, nvswitch_dir=None)
    assert facts["fabric_manager"]["states"] == ["Completed"]
    assert facts["fabric_manager"]["ready"] is True
    for g in dump["gpus"]:
        g["fabric_recorded"] = (2, 0)
    unit = "nvidia-fabricmanager.service enabled enabled\n"
    facts = gpu.gather_gpu_facts(Replay({"is-active": (3, "inactive\n", ""),
                                         "list-unit-files": (0, unit, "")}),
                                 nvml=FakeNVML(dump, fabric_two_args=False), systemctl="/bin/sc",
                                 sys_root=None, nvswitch_dir=None)
    assert facts["fabric_manager"]["ready"] is False
    problem = [p for p in facts["problems"] if p["check"] == "fabric_manager"][0]
    assert "In Progress" in problem["msg"] and "580.159.04" in problem["fix"]
    assert facts["fabric_manager"]["service"] == "inactive"


def test_nvml_failure_falls_back_to_nvidia_smi():
    class Broken(FakeNVML):
        def nvmlInit(self):
            raise NVMLError("Driver Not Loaded")

    facts = gpu.gather_gpu_facts(smi_replay(), nvml=Broken({}), nvidia_smi="/x/nvidia-smi",
                                 sys_root=None, nvswitch_dir=None)
    assert facts["source"] == "nvidia-smi"
    assert facts["gpu_count"] == 2
    assert "Driver Not Loaded" in facts["errors"][0]


def test_no_gpu_is_a_valid_answer():
    facts = gpu.gather_gpu_facts(Replay({}), nvml=None, nvidia_smi=None, sys_root=None,
                                 nvswitch_dir=None)
    assert facts["gpu_count"] == 0
    assert facts["driver_version"] is None
    assert facts["topology"]["interconnect"] == "none"
    assert facts["memory_usable_bytes_min"] == 0
    assert gpu.gpu_summary_lines(facts)[0].startswith("GPUs: none found")


def test_nvidia_smi_without_driver():
    failure = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    run = Replay({"-q -x": (9, failure, "")})
    facts = gpu.gather_gpu_facts(run, nvml=None, nvidia_smi="/x/nvidia-smi", sys_root=None,
                                 nvswitch_dir=None)
    assert facts["gpu_count"] == 0
    assert "couldn't communicate" in facts["errors"][0]


def _pci_device(root, bus, vendor, klass, driver=None):
    path = root / "bus" / "pci" / "devices" / bus
    path.mkdir(parents=True)
    (path / "vendor").write_text(vendor + "\n")
    (path / "class").write_text(klass + "\n")
    (path / "device").write_text("0x2335\n")
    if driver:
        target = root / "bus" / "pci" / "drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        (path / "driver").symlink_to(target)


def test_gpus_on_the_pci_bus_without_a_driver(tmp_path):
    _pci_device(tmp_path, "0000:00:06.0", "0x10de", "0x030200")             # H200, no driver
    _pci_device(tmp_path, "0000:00:07.0", "0x10de", "0x030200", "nouveau")  # bound to nouveau
    _pci_device(tmp_path, "0000:00:01.0", "0x8086", "0x030000")             # not NVIDIA
    _pci_device(tmp_path, "0000:00:08.0", "0x10de", "0x068000")             # NVSwitch bridge
    facts = gpu.gather_gpu_facts(Replay({}), nvml=None, nvidia_smi=None, sys_root=str(tmp_path),
                                 nvswitch_dir=None)
    assert facts["gpu_count"] == 0
    assert facts["pci_gpu_count"] == 2
    assert [d["driver"] for d in facts["pci_gpus"]] == [None, "nouveau"]
    assert "no working driver" in facts["notices"][0]


def test_persistence_off_and_mig_on_are_problems():
    xml = read(H200, "nvidia-smi-q.xml")
    xml = xml.replace("<persistence_mode>Enabled</persistence_mode>",
                      "<persistence_mode>Disabled</persistence_mode>", 1)
    xml = xml.replace("<current_mig>Disabled</current_mig>", "<current_mig>Enabled</current_mig>", 1)
    facts = gpu.gather_gpu_facts(smi_replay(xml=xml), nvml=None, nvidia_smi="/x/nvidia-smi",
                                 sys_root=None, nvswitch_dir=None)
    checks = sorted(p["check"] for p in facts["problems"])
    assert checks == ["mig", "persistence_mode"]
    assert all(p["variable"] and p["fix"] for p in facts["problems"])


def test_fabric_in_progress_from_xml_is_a_problem():
    xml = read(H200, "nvidia-smi-q.xml").replace("<state>Completed</state>",
                                                 "<state>In Progress</state>")
    facts = gpu.gather_gpu_facts(smi_replay(xml=xml), nvml=None, nvidia_smi="/x/nvidia-smi",
                                 systemctl="/bin/systemctl", sys_root=None, nvswitch_dir=None)
    assert facts["fabric_manager"]["ready"] is False
    assert facts["problems"][0]["check"] == "fabric_manager"


def test_summary_lines_name_driver_gpus_and_links():
    facts = gpu.gather_gpu_facts(smi_replay(), nvml=None, nvidia_smi="/x/nvidia-smi",
                                 sys_root=None, nvswitch_dir=None)
    lines = gpu.gpu_summary_lines(facts)
    assert "580.159.04" in lines[0] and "13.0" in lines[0]
    assert lines[1].startswith("GPU0 NVIDIA H200 cc 9.0 143771 MiB")
    assert "NV18" in lines[-1] and "nvswitch" in lines[-1]

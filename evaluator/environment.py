"""Environment digest of an evaluation run: device, driver, versions, host, clocks.

Imports neither torch nor triton (versions come from the installed distributions), so
the runner process stays light; GPU facts come from ``nvidia-smi`` when it exists.
"""

from __future__ import annotations

import functools
import platform
import shutil
import socket
import subprocess
from importlib import metadata
from typing import Any

from evaluator import HARNESS_VERSION

_SMI_TIMEOUT_S = 10


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _nvidia_smi(fields: str) -> list[list[str]] | None:
    """Rows of ``nvidia-smi --query-gpu=<fields>`` as CSV cells, or None if unavailable."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    try:
        completed = subprocess.run(
            [binary, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=_SMI_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return [
        [cell.strip() for cell in line.split(",")]
        for line in completed.stdout.splitlines()
        if line.strip()
    ]


def gpu_clocks(index: int = 0) -> dict[str, Any] | None:
    """SM and memory clocks (MHz), temperature and power of one GPU, or None without one."""
    rows = _nvidia_smi("clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw")
    if not rows or index >= len(rows):
        return None
    keys = ("sm_mhz", "mem_mhz", "max_sm_mhz", "temperature_c", "power_w")
    clocks: dict[str, Any] = {}
    for key, cell in zip(keys, rows[index], strict=False):
        try:
            clocks[key] = float(cell)
        except ValueError:
            clocks[key] = None
    return clocks


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def _device_identity(cuda: bool) -> tuple[str | None, str | None]:
    """The device's name and driver: asked once per process (``nvidia-smi`` on a GPU), as
    they cannot change while it runs; a campaign's evaluator server runs many rounds."""
    if not cuda:
        return _cpu_name(), None
    rows = _nvidia_smi("name,driver_version")
    if not rows:
        return None, None
    return rows[0][0], rows[0][1] if len(rows[0]) > 1 else None


def collect_environment(device: str) -> dict[str, Any]:
    """The ``environment`` block of results.json (``clocks_end`` is filled at the end)."""
    device_name, driver = _device_identity(device.startswith("cuda"))
    return {
        "device": device,
        "device_name": device_name,
        "driver": driver,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "harness_version": HARNESS_VERSION,
        "clocks_start": gpu_clocks() if device.startswith("cuda") else None,
        "clocks_end": None,
    }

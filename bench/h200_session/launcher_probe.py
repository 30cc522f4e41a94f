"""Why the CUDA fallback monitor's kernels come out with no launching host op on the H200
(tests/evaluator/test_fallback_cuda.py::test_the_first_call_is_watched_for_its_device_activity_only,
session 12): the raw profiler events of one call, after a device-only profile and without."""

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from evaluator.fallback_cuda import _activity_type, activities_from_profile

x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()


def work():
    y = x * 2
    z = torch.zeros(1 << 16, device="cuda")
    return y.sum() + z.sum()


for label, first in (("fresh", False), ("after a device-only profile", True)):
    if first:
        with profile(activities=[ProfilerActivity.CUDA]):
            work()
            torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    print(f"== {label}")
    events = prof.profiler.kineto_results.events()
    for e in events:
        dev = "cpu" if e.device_type() == DeviceType.CPU else "cuda"
        print(
            f"  {dev:4s} corr={e.correlation_id():6d} linked={e.linked_correlation_id():6d} "
            f"type={_activity_type(e)!r:22s} {e.name()[:70]}"
        )
    for a in activities_from_profile(prof):
        print(f"  activity {a.kind:7s} launched_by={a.launched_by!r} {a.name[:60]}")

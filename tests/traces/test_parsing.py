"""Reading uploads: torch.profiler JSON (plain and gzipped), the CSV, and every bad input."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from traces.kineto import iter_document
from traces.parsing import Limits, TraceFormatError, parse_trace


def parse(data: bytes, **kwargs):
    return parse_trace(io.BytesIO(data), name="upload", **kwargs)


def error_of(data: bytes, **kwargs) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as caught:
        parse(data, **kwargs)
    return caught.value


def summary(parsed) -> dict:
    return {row.shape_key: (row.calls, round(row.time_us, 3)) for row in parsed.rows}


def test_gzipped_and_plain_json_give_the_same_rows(vllm_moe_trace):
    gzipped = vllm_moe_trace.read_bytes()
    plain = gzip.decompress(gzipped)
    from_gzip, from_json = parse(gzipped), parse(plain)
    assert from_gzip.format == from_json.format == "kineto"
    assert from_gzip.rows and summary(from_gzip) == summary(from_json)
    assert from_gzip.metadata["recording"]["model"] == "qwen3-30b-a3b"
    assert from_gzip.metadata["recording"]["script"] == "scripts/record_trace.py"


@pytest.mark.slow
def test_streamed_reading_matches_json_loads_whatever_the_chunking(plain_trace):
    text = plain_trace.read_text(encoding="utf-8")
    expected = json.loads(text)
    for size in (7, 4096):
        chunks = iter([text[i : i + size] for i in range(0, len(text), size)])
        events = [item for kind, item in iter_document(chunks, "t") if kind == "event"]
        assert events == expected["traceEvents"]


def test_csv_rows_are_summed_per_application_and_shape_and_unmapped_rows_kept():
    text = (
        "application,operator,init_kwargs,input_kwargs,calls,gpu_time_us,name\n"
        'chat,rms_norm,"{""eps"": 1e-06}","{""token_count"": 8, ""hidden_size"": 4096}",10,120.5,\n'
        'chat,rms_norm,"{""eps"": 1e-06}","{""hidden_size"": 4096, ""token_count"": 8}",5,30,\n'
        'code,rms_norm,"{""eps"": 1e-06}","{""token_count"": 8, ""hidden_size"": 4096}",1,1,\n'
        "chat,,,,3,400,aten::mm\n"
    )
    parsed = parse(text.encode())
    assert parsed.format == parsed.time_basis == "csv"
    by_app = {(row.application, row.calls): row.time_us for row in parsed.rows}
    assert by_app == {("chat", 15): 150.5, ("code", 1): 1.0}
    assert [(u.name, u.time_us, u.application) for u in parsed.unmapped] == [
        ("aten::mm", 400.0, "chat")
    ]
    assert parsed.mapped_time_us == 151.5 and parsed.total_time_us == 551.5


def test_csv_with_bad_rows_names_each_line_and_imports_nothing():
    text = (
        "operator,input_kwargs,calls,gpu_time_us\n"
        'rms_norm,"{""token_count"": 8}",ten,1\n'
        "rms_norm,not json,1,1\n"
        'rms_norm,"{""token_count"": 8}",1,-5\n'
    )
    error = error_of(text.encode())
    assert error.code == "trace:csv-invalid"
    assert "3 row(s)" in error.message
    for line in ("line 2", "line 3", "line 4"):
        assert line in error.message


def test_csv_with_a_wrong_header_says_which_columns():
    error = error_of(b"op,shape,time\nrms_norm,{},1\n", format="csv")
    assert error.code == "trace:csv-invalid"
    assert "missing column(s) operator, input_kwargs, calls, gpu_time_us" in error.message


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b"", "trace:empty", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "trace:not-json", "not UTF-8"),
        (b"hello world\n", "trace:not-json", "neither JSON nor a trace CSV"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op" oops}]}',
            "trace:not-json",
            "not valid JSON",
        ),
        (b'[{"ph": "X", "name": "x"}]', "trace:other-tool", "another tool"),
        (b'{"version": 1, "nodes": []}', "trace:other-tool", 'without "traceEvents"'),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "gpu_op", "name": "k", "ts": 1, "dur": 2}]}',
            "trace:other-tool",
            "no PyTorch operator events",
        ),
    ],
)
def test_bad_inputs_get_a_clear_error(data, code, words):
    error = error_of(data)
    assert error.code == code
    assert words in error.message


def test_truncated_json_and_truncated_gzip_are_reported_as_truncated(plain_trace):
    text = plain_trace.read_bytes()
    cut = text[: len(text) // 2]
    assert error_of(cut).code == "trace:truncated"
    gz = gzip.compress(text)
    error = error_of(gz[: len(gz) // 2])
    assert error.code == "trace:truncated"
    assert "cut short" in error.message or "ends early" in error.message


def test_a_trace_recorded_without_record_shapes_is_refused(plain_trace):
    data = json.loads(plain_trace.read_text(encoding="utf-8"))
    for event in data["traceEvents"]:
        for key in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides"):
            event.get("args", {}).pop(key, None)
    error = error_of(json.dumps(data).encode())
    assert error.code == "trace:no-shapes"
    assert "record_shapes=True" in error.message


def test_an_enormous_trace_stops_at_the_size_cap_even_gzipped(plain_trace):
    text = plain_trace.read_bytes()
    error = error_of(text, limits=Limits(max_bytes=len(text) // 3))
    assert error.code == "trace:too-large"
    # A gzip bomb: 64 MiB of spaces in a few KB stops at the cap, not in memory.
    bomb = gzip.compress(b"{" + b" " * (64 << 20))
    assert len(bomb) < 200_000
    error = error_of(bomb, limits=Limits(max_bytes=1 << 20))
    assert error.code == "trace:too-large" and "once decompressed" in error.message


def test_the_event_cap_stops_a_trace_with_too_many_events(plain_trace):
    error = error_of(plain_trace.read_bytes(), limits=Limits(max_events=100))
    assert error.code == "trace:too-large" and "100 events" in error.message

"""Function names defined by ELF shared objects, and the partial C++ demangling that reads
them (stdlib only: web-safe).

The CUDA fallback monitor (``evaluator.fallback_cuda``) counts a kernel as the
submission's own when a shared object built from the bundle's sources defines it; this
module reads those names from the files (symbol tables, and the mangled registration names
in read-only data and CUDA fat binaries) and reduces signatures and Itanium-mangled symbols
to a qualified name (``ns::kernel``) that the profiler's kernel names can be matched on.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import sys
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

_REAL_PATHS: Mapping[str, str] = MappingProxyType({})
"""Real paths of files in folders the candidate cannot change (``remember_real_paths``)."""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def remember_real_paths(paths: Iterable[str], roots: Iterable[str]) -> None:
    """Resolve ``paths`` once, for ``real_path``: each that lies under one of ``roots``
    both as named and as resolved (the standard library and site-packages, which no
    candidate can write, so their links cannot change). Called once in the child, before
    any candidate code runs and before the integrity snapshot (which watches this
    module's globals, so the mapping cannot be swapped; it is read-only itself).

    The fallback monitor resolves every loaded module's file and every mapped shared
    object at each shape's report: about 0.1-0.15 s a shape on the H200, 0.5 s on a
    loaded CPU, nearly all in ``os.path.realpath``'s ``lstat`` calls (harness 0.2.4)."""
    global _REAL_PATHS
    roots = tuple(roots)
    known: dict[str, str] = {}
    for path in paths:
        if path in known or not any(_under(path, root) for root in roots):
            continue
        real = os.path.realpath(path)
        if any(_under(real, root) for root in roots):
            known[path] = real
    _REAL_PATHS = MappingProxyType(known)


def real_path(path: str) -> str:
    """``os.path.realpath(path)``, from ``remember_real_paths``'s table where it has it."""
    known = _REAL_PATHS.get(path)
    return known if known is not None else os.path.realpath(path)


def real_path_resolver() -> Callable[[str], str]:
    """``real_path`` for one pass over many files (the fallback monitor's scan of every
    loaded module, per shape): each folder is resolved once, a file's real path being its
    folder's real path joined with its name unless the file itself is a link (one
    ``lstat``, then resolved in full). The same answers as ``os.path.realpath``, without
    an ``lstat`` of every component of every module's path: thousands of modules lie in
    tens of folders."""
    known = _REAL_PATHS
    folders: dict[str, str] = {}

    def resolve(path: str) -> str:
        remembered = known.get(path)
        if remembered is not None:
            return remembered
        folder, name = os.path.split(path)
        if name in ("", ".", ".."):
            return os.path.realpath(path)
        real_folder = folders.get(folder)
        if real_folder is None:
            real_folder = folders[folder] = os.path.realpath(folder)
        joined = os.path.join(real_folder, name)
        return os.path.realpath(joined) if os.path.islink(joined) else joined

    return resolve


def mapped_shared_object_names() -> list[str] | None:
    """The file names of the shared objects mapped into this process, as /proc/self/maps
    names them (each once; the kernel names a mapping by its file's resolved path); None
    where there is no such file."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return None
    names: dict[str, None] = {}
    # A process with CUDA maps thousands of regions, most of them anonymous: only the
    # lines that name a shared object are split.
    for line in text.splitlines():
        if ".so" in line:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and ".so" in fields[5]:
                names[fields[5].strip()] = None
    return list(names)


def cxx_qualified_name(demangled: str) -> str:
    """``ns::kernel`` from a demangled signature (``void ns::kernel<float>(float*, int)``)."""
    text = demangled.replace("(anonymous namespace)", "\0anon\0")
    depth, head = 0, []
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if char == "(":
                break
            head.append(char)
    words = "".join(head).split()
    return words[-1].replace("\0anon\0", "(anonymous namespace)") if words else ""


def itanium_qualified_name(symbol: str) -> str | None:
    """``ns::kernel`` from an Itanium-mangled symbol (``_ZN2ns6kernelIfEEvPT_``); plain
    identifiers (``extern "C"``) as they are; None for what this partial reader skips."""
    if not symbol.startswith("_Z"):
        return symbol if symbol.isidentifier() else None
    text, index, parts = symbol[2:], 0, []
    if text.startswith("L"):
        index = 1
    nested = text.startswith("N", index)
    if nested:
        index += 1
        while index < len(text) and text[index] in "rVKRO":
            index += 1
        if text.startswith("St", index):
            parts.append("std")
            index += 2
    while index < len(text) and text[index].isdigit():
        end = index
        while end < len(text) and text[end].isdigit():
            end += 1
        length = int(text[index:end])
        name = text[end : end + length]
        if len(name) != length:
            return None
        parts.append("(anonymous namespace)" if name.startswith("_GLOBAL__N") else name)
        index = end + length
        if not nested:
            break
    return "::".join(parts) or None


def loaded_shared_objects() -> set[str]:
    """Real paths of the shared objects loaded in this process.

    /proc/self/maps names every one, the Python extension modules among them, by the
    path the kernel resolved when it was mapped, taken as it is: a link changed later does
    not move a mapping (harness 0.3.8; before, each name was resolved again at every
    shape's report, and every module's file read, a few ms a report). Where there is no
    such file (not Linux), the extension modules' files in ``sys.modules``, resolved."""
    mapped = mapped_shared_object_names()
    if mapped is not None:
        return set(mapped)
    files = (vars(m).get("__file__") for m in list(sys.modules.values()) if m is not None)
    return {real_path(f) for f in files if isinstance(f, str) and f.endswith(".so")}


_ELF_CACHE: dict[tuple[str, float], frozenset[str]] = {}
_MANGLED = re.compile(rb"_Z[A-Za-z0-9_]{3,}")


def shared_object_function_names(path: str) -> frozenset[str]:
    """Qualified names of the functions a 64-bit little-endian ELF file defines.

    Read from its symbol tables (defined FUNC symbols of .symtab and .dynsym) and from
    the mangled names in its read-only data and CUDA fat binary (where the kernels'
    registration names live, so a stripped library still names its kernels).
    """
    try:
        key = (path, os.stat(path).st_mtime)
    except OSError:
        return frozenset()
    if key not in _ELF_CACHE:
        try:
            _ELF_CACHE[key] = frozenset(_elf_names(path))
        except (OSError, ValueError, struct.error):
            _ELF_CACHE[key] = frozenset()
    return _ELF_CACHE[key]


def _elf_names(path: str) -> set[str]:
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
        ]

        def text_at(table: int, offset: int) -> str:
            start = sections[table][4] + offset
            end = data.find(b"\0", start)
            return data[start:end].decode("ascii", "replace")

        names: set[str] = set()
        for header in sections:
            name_offset, kind, _, _, offset, size, link, _, _, entsize = header
            section = text_at(shstrndx, name_offset)
            if kind in (2, 11) and entsize:  # SHT_SYMTAB, SHT_DYNSYM
                for at in range(offset, offset + size, entsize):
                    st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", data, at)
                    if st_shndx != 0 and st_info & 0xF == 2:  # defined STT_FUNC
                        qualified = itanium_qualified_name(text_at(link, st_name))
                        if qualified:
                            names.add(qualified)
            elif section in (".rodata", ".nv_fatbin", "__nv_relfatbin"):
                for match in _MANGLED.finditer(data, offset, offset + size):
                    qualified = itanium_qualified_name(match.group().decode("ascii"))
                    if qualified:
                        names.add(qualified)
        return names

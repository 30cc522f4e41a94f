"""Static scan of a bundle's Python sources for patterns that deserve a reviewer's look.

Pure stdlib (``ast``). Nothing here decides a score: each finding is a warning, written
``file:line: pattern: why``, recorded once per operator in results.json. The patterns:
a try/except around a kernel launch with PyTorch in the handler; imports of the
reference or the harness; torch.compile, dynamo, inductor; dynamic lookups (importlib,
``__import__``, ``getattr(torch, <computed name>)``); ``torch.ops.aten``; another
module's ``Model`` subclassed or instantiated; assignments to attributes of torch, time
or triton (monkeypatching timers, events, synchronisation); threads, processes, shells
and ctypes; writes to files and descriptors; side CUDA streams; profiler introspection;
other array libraries (NumPy, CuPy, JAX, ...); the garbage collector's object lists.

Honest kernels trigger none of these (the example Triton bundle is tested clean), but a
warning is a hint, not proof: code can hide from any syntactic scan.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

REFERENCE_MODULES = ("evaluator", "reference")
COMPILER_MODULES = ("torch._dynamo", "torch._inductor")
CONCURRENCY_MODULES = (
    "threading", "_thread", "multiprocessing", "subprocess", "_posixsubprocess", "ctypes"
)  # fmt: skip
PATCHABLE_ROOTS = ("torch", "time", "triton")
STREAM_NAMES = frozenset({"Stream", "ExternalStream", "stream", "set_stream"})
SHELL_CALLS = frozenset(
    {"os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp"}
)
FD_WRITES = frozenset(
    {"os.write", "os.writev", "os.pwrite", "os.dup2", "os.fdopen", "os.open", "os.truncate"}
)
PROFILER_NAMES = ("torch.profiler", "torch.autograd.profiler", "torch._C._autograd")
ARRAY_LIBRARIES = ("numpy", "cupy", "jax", "scipy", "numba", "tensorflow")
"""Other array libraries: compute there is not the bundle's kernel (on the CPU the fallback
monitor counts it as not the bundle's own; on the GPU it is not even device time)."""
WRITE_MODE_CHARS = frozenset("wax+")


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _under(name: str | None, prefix: str) -> bool:
    return name is not None and (name == prefix or name.startswith(prefix + "."))


class _Scanner(ast.NodeVisitor):
    """Collects (line, pattern, why) findings of one file."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        """Local name -> the dotted module path or object it stands for."""
        self.findings: list[tuple[int, str, str]] = []

    # ---------------------------------------------------------------- helpers

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted path an expression names, through import aliases."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    def add(self, node: ast.AST, pattern: str, why: str) -> None:
        self.findings.append((getattr(node, "lineno", 0), pattern, why))

    def _import_target(self, node: ast.AST, module: str) -> None:
        if any(_under(module, m) for m in REFERENCE_MODULES):
            self.add(node, "reference import", f"imports {module} (the reference or the harness)")
        if any(_under(module, m) for m in COMPILER_MODULES) or module == "torch.compile":
            self.add(node, "torch.compile", f"imports {module}: compiled PyTorch, not a kernel")
        if _under(module, "importlib"):
            self.add(node, "dynamic import", f"imports {module}")
        if any(_under(module, m) for m in CONCURRENCY_MODULES) or _under(
            module, "concurrent.futures"
        ):
            self.add(node, "threads/processes", f"imports {module}")
        if any(_under(module, m) for m in PROFILER_NAMES):
            self.add(node, "profiler introspection", f"imports {module}")
        if _under(module, "gc"):
            self.add(
                node, "object introspection", f"imports {module}: it reaches the harness's objects"
            )
        if any(_under(module, m) for m in ARRAY_LIBRARIES):
            self.add(node, "other array library", f"imports {module}: its compute is not a kernel")

    # ---------------------------------------------------------------- imports

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import_target(node, alias.name)
            local = alias.asname or alias.name.partition(".")[0]
            self.aliases[local] = alias.name if alias.asname else local
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return  # a relative import: the bundle's own module
        module = node.module or ""
        before = len(self.findings)
        self._import_target(node, module)
        for alias in node.names:
            if alias.name == "*":
                continue
            full = f"{module}.{alias.name}"
            if len(self.findings) == before:  # one finding per statement is enough
                self._import_target(node, full)
            self.aliases[alias.asname or alias.name] = full

    # ---------------------------------------------------------------- names

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.resolve(node)
        if name is None:  # a chain over a call or a subscript: look inside it
            self.generic_visit(node)
            return
        # A plain chain over a name: check it whole (``torch.cuda.Stream``), not its prefixes.
        self._check_name(node, name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases:
            resolved = self.aliases[node.id]
            if resolved != node.id:
                self._check_name(node, resolved)
        if node.id == "__import__":
            self.add(node, "dynamic import", "uses __import__")

    def _check_name(self, node: ast.AST, name: str) -> None:
        if name in ("torch.compile",) or any(_under(name, m) for m in COMPILER_MODULES):
            self.add(node, "torch.compile", f"uses {name}: compiled PyTorch, not a kernel")
        if _under(name, "torch.ops.aten") or _under(name, "torch.ops.prims"):
            self.add(node, "torch.ops.aten", f"uses {name}: a PyTorch kernel reached directly")
        if _under(name, "torch.cuda") and name.rpartition(".")[2] in STREAM_NAMES:
            self.add(node, "side stream", f"uses {name}")
        if name in SHELL_CALLS or name.startswith(("os.exec", "os.spawn")):
            self.add(node, "threads/processes", f"uses {name}")
        if name in FD_WRITES:
            self.add(node, "file write", f"uses {name}")
        if name in ("sys.stdout.write", "sys.stderr.write", "sys.__stdout__.write"):
            self.add(node, "file write", f"uses {name}")
        if _under(name, "importlib"):
            self.add(node, "dynamic import", f"uses {name}")
        if any(_under(name, m) for m in PROFILER_NAMES):
            self.add(node, "profiler introspection", f"uses {name}")

    # ---------------------------------------------------------------- calls

    def visit_Call(self, node: ast.Call) -> None:
        func = self.resolve(node.func)
        if func in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            target = self.resolve(node.args[0])
            root = (target or "").partition(".")[0]
            computed = not (
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            )
            if func == "getattr" and root in PATCHABLE_ROOTS and computed:
                self.add(node, "dynamic getattr", f"getattr({target}, <computed name>)")
            if func in ("setattr", "delattr") and root in PATCHABLE_ROOTS:
                self.add(node, "monkeypatch", f"{func}({target}, ...)")
        if func == "open":
            self._check_open(node)
        if func == "print":
            for keyword in node.keywords:
                target = self.resolve(keyword.value) if keyword.arg == "file" else None
                if keyword.arg == "file" and target != "sys.stdout":
                    self.add(node, "file write", f"print(file={target or '<expression>'})")
        if isinstance(node.func, ast.Attribute) and node.func.attr in (
            "write_text",
            "write_bytes",
        ):
            self.add(node, "file write", f".{node.func.attr}(...)")
        if func is not None:
            self._check_model(node, func, "instantiates")
        self.generic_visit(node)

    def _check_open(self, node: ast.Call) -> None:
        mode: ast.AST | None = node.args[1] if len(node.args) >= 2 else None
        for keyword in node.keywords:
            if keyword.arg == "mode":
                mode = keyword.value
        if mode is None:
            return
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
            self.add(node, "file write", "open() with a computed mode")
        elif WRITE_MODE_CHARS & set(mode.value):
            self.add(node, "file write", f"open(..., {mode.value!r})")

    def _check_model(self, node: ast.AST, name: str, verb: str) -> None:
        if name.rpartition(".")[2] == "Model" and "." in name and not name.startswith("self."):
            self.add(node, "another Model", f"{verb} {name}")

    # ---------------------------------------------------------------- definitions

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            name = self.resolve(base)
            if name is not None:
                self._check_model(base, name, "subclasses")
        self.generic_visit(node)

    def _check_assignment_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_assignment_target(element)
            return
        if isinstance(target, ast.Attribute):
            name = self.resolve(target)
            if name is not None and name.partition(".")[0] in PATCHABLE_ROOTS:
                self.add(target, "monkeypatch", f"assigns {name}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_assignment_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_assignment_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_assignment_target(node.target)
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if any(_launches_kernel(stmt) for stmt in node.body):
            for handler in node.handlers:
                if any(self._uses_torch(stmt) for stmt in handler.body):
                    self.add(
                        handler,
                        "guarded fallback",
                        "a kernel launch in try/except with PyTorch in the handler",
                    )
                    break
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def _uses_torch(self, tree: ast.AST) -> bool:
        for sub in ast.walk(tree):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                return True
            if isinstance(sub, ast.Name | ast.Attribute):
                name = self.resolve(sub)
                if _under(name, "torch"):
                    return True
        return False


def _launches_kernel(tree: ast.AST) -> bool:
    """Whether a statement launches a Triton-style kernel (``kernel[grid](...)``)."""
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript) for sub in ast.walk(tree)
    )


def scan_source(name: str, source: str) -> list[str]:
    """Warnings for one file's source (a syntax error is itself a warning)."""
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        return [f"{name}:{exc.lineno or 0}: syntax error: {exc.msg}"]
    scanner = _Scanner()
    scanner.visit(tree)
    seen: set[tuple[int, str, str]] = set()
    warnings = []
    for line, pattern, why in sorted(scanner.findings):
        if (line, pattern, why) not in seen:
            seen.add((line, pattern, why))
            warnings.append(f"{name}:{line}: {pattern}: {why}")
    return warnings


def scan_sources(files: Mapping[str, str]) -> list[str]:
    """Warnings for a bundle's Python files (``{relative path: source}``), file by file."""
    warnings: list[str] = []
    for name in sorted(files):
        warnings.extend(scan_source(name, files[name]))
    return warnings


def _bundle_module_files(bundle_dir: Path) -> Iterator[tuple[str, Path]]:
    root = os.path.realpath(bundle_dir)
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or not filename.endswith(".py"):
            continue
        real = os.path.realpath(filename)
        if real.startswith(root + os.sep):
            yield os.path.relpath(real, root), Path(real)


def scan_candidate(module: ModuleType, bundle_dir: Path) -> list[str]:
    """Warnings for an imported candidate: its file and the bundle's modules it loaded."""
    files: dict[str, str] = {}
    candidates = list(_bundle_module_files(bundle_dir))
    own = getattr(module, "__file__", None)
    if isinstance(own, str):
        real = os.path.realpath(own)
        candidates.append((os.path.relpath(real, os.path.realpath(bundle_dir)), Path(real)))
    for relative, path in candidates:
        if relative in files:
            continue
        try:
            files[relative] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return scan_sources(files)

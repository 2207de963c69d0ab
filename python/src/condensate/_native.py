"""ctypes bindings of condensate's two C APIs.

libCondensateRuntime.so (condensate/Runtime/condensate_c.h) loads AOT kernel
libraries and launches them with no LLVM or MLIR; libCondensateCompiler.so
(condensate/Compiler/condensate_compiler_c.h) adds the JIT for the GPU and
the CPU. The libraries come from the package's lib/ folder, or only from
$CONDENSATE_LIBRARY_DIR when it is set.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_S = ctypes.c_char_p
_SZ = ctypes.c_size_t
_ERR = 1024


class CondensateError(RuntimeError):
    """An error reported by condensate: the runtime's one-line message."""


def _library_dirs() -> list[pathlib.Path]:
    """$CONDENSATE_LIBRARY_DIR alone when set (so a folder holding only the
    runtime means no compiler), else the package's lib/."""
    env = os.environ.get("CONDENSATE_LIBRARY_DIR")
    if env:
        return [pathlib.Path(env)]
    return [pathlib.Path(__file__).resolve().parent / "lib"]


def _find(name: str) -> pathlib.Path | None:
    for d in _library_dirs():
        path = d / name
        if path.is_file():
            return path
    return None


_lock = threading.Lock()
_runtime: ctypes.CDLL | None = None
_compiler: ctypes.CDLL | None = None
_compiler_missing = False


def _declare(lib: ctypes.CDLL, name: str, args: list, res=ctypes.c_int):
    fn = getattr(lib, name)
    fn.argtypes = args
    fn.restype = res


_ATTEND = [_I64, _I64, _I64, _I64, _P, _P, _P, _P, _P, _P, _P, _P, _P]
_APPEND = [_I64, _I64, _I64, _P, _P, _P, _P, _P, _P, _P]
_PREFILL = [_I64, _I64, _I64, _I64, _I64, _P, _P, _P, _P, _P, _P, _P]


def runtime() -> ctypes.CDLL:
    """The MLIR-free runtime library (loaded once)."""
    global _runtime
    with _lock:
        if _runtime is None:
            path = _find("libCondensateRuntime.so")
            if path is None:
                raise CondensateError(
                    "libCondensateRuntime.so not found in "
                    + ", ".join(str(d) for d in _library_dirs())
                    + ": install the package from a condensate build "
                    "(pip install ./python) or set CONDENSATE_LIBRARY_DIR")
            lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            _declare(lib, "condensate_gpu_load",
                     [_S, _S, ctypes.POINTER(_P), _S, _SZ])
            _declare(lib, "condensate_gpu_load_library",
                     [_S, ctypes.POINTER(_P), _S, _SZ])
            _declare(lib, "condensate_gpu_free", [_P], None)
            _declare(lib, "condensate_gpu_reserve", [_P, _I64, _I64, _I64, _S, _SZ])
            _declare(lib, "condensate_gpu_attend", [_P] + _ATTEND + [_P, _S, _SZ])
            _declare(lib, "condensate_gpu_append", [_P] + _APPEND + [_P, _S, _SZ])
            _declare(lib, "condensate_gpu_prefill", [_P] + _PREFILL + [_P, _S, _SZ])
            _declare(lib, "condensate_gpu_describe",
                     [_P, ctypes.POINTER(_P), _S, _SZ])
            _declare(lib, "condensate_gpu_launch_count", [_P, _I64])
            _declare(lib, "condensate_free", [_P], None)
            _runtime = lib
        return _runtime


def compiler() -> ctypes.CDLL:
    """The compiler library (JIT); an error when the package has none."""
    global _compiler, _compiler_missing
    runtime()
    with _lock:
        if _compiler is None:
            path = _find("libCondensateCompiler.so")
            if path is None:
                _compiler_missing = True
                raise CondensateError(
                    "libCondensateCompiler.so not found: this installation "
                    "loads AOT libraries only (condensate.load); compiling a "
                    "plan needs the compiler library")
            lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            _declare(lib, "condensate_gpu_compile",
                     [_S, _S, _S, ctypes.POINTER(_P),
                      ctypes.POINTER(ctypes.c_double),
                      ctypes.POINTER(ctypes.c_int), _S, _SZ])
            _declare(lib, "condensate_model_text",
                     [_S, _S, ctypes.POINTER(_P), _S, _SZ])
            _declare(lib, "condensate_cpu_compile",
                     [_S, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_double),
                      _S, _SZ])
            _declare(lib, "condensate_cpu_free", [_P], None)
            _declare(lib, "condensate_cpu_describe",
                     [_P, ctypes.POINTER(_P), _S, _SZ])
            _declare(lib, "condensate_cpu_attend", [_P] + _ATTEND + [_S, _SZ])
            _declare(lib, "condensate_cpu_append", [_P] + _APPEND + [_S, _SZ])
            _declare(lib, "condensate_cpu_prefill", [_P] + _PREFILL + [_S, _SZ])
            _declare(lib, "condensate_bytes_read",
                     [_S, ctypes.c_int64, ctypes.c_int64, _P, _P,
                      ctypes.POINTER(ctypes.c_double),
                      ctypes.POINTER(ctypes.c_double), _S, _SZ])
            _compiler = lib
        return _compiler


def have_compiler() -> bool:
    try:
        compiler()
        return True
    except CondensateError:
        return False


class ErrorBuffer:
    """One caller-owned message buffer, reused across calls."""

    def __init__(self):
        self.buf = ctypes.create_string_buffer(_ERR)

    def check(self, rc: int, what: str):
        if rc != 0:
            msg = self.buf.value.decode("utf-8", "replace") or "unknown error"
            raise CondensateError(f"{what}: {msg}")


def take_string(fn, *args) -> str:
    """Calls `fn(*args, &out, error, size)`, a C function that returns a
    malloc'd string in `out`, and releases the string."""
    out = _P()
    err = ErrorBuffer()
    err.check(fn(*args, ctypes.byref(out), err.buf, _ERR), fn.__name__)
    try:
        return ctypes.string_at(out.value).decode("utf-8")
    finally:
        runtime().condensate_free(out)

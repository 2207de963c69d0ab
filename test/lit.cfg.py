# The lit configuration of the condensate IR tests. lit.site.cfg.py (from
# lit.site.cfg.py.in) sets the paths; this file sets everything else.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "condensate"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.condensate_obj_root, "test")

# unit/, python/ and fuzz/ are GoogleTest, Python and libFuzzer tests run
# elsewhere.
config.excludes = ["unit", "python", "fuzz", "Inputs", "CMakeLists.txt",
                   "lit.cfg.py", "lit.site.cfg.py"]

llvm_config.use_default_substitutions()

# `%ulimit_v N;` caps a command's address space; AddressSanitizer reserves
# terabytes of shadow, so a sanitizer build (CONDENSATE_SANITIZE) runs the
# same commands uncapped.
sanitized = getattr(config, "condensate_sanitize", False)
config.substitutions.append(("%ulimit_v", "true" if sanitized else "ulimit -v"))
if sanitized:
    config.available_features.add("sanitized")
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# Our tools live in bin/ or next to their sources' build folder. A tool that
# is not built gets no substitution and no feature, so the tests that need it
# (`REQUIRES: <tool>`) are UNSUPPORTED instead of failing.
def find_tool_dir(name):
    for d in [config.condensate_tools_dir,
              os.path.join(config.condensate_obj_root, "bin"),
              os.path.join(config.condensate_obj_root, "tools", name)]:
        if os.path.isfile(os.path.join(d, name)) and \
                os.access(os.path.join(d, name), os.X_OK):
            return d
    return None

tools = []
tool_dirs = []
for name in ["condensate-opt", "condensate-translate", "condensate-decode",
             "condensate-bench", "condensate-study", "condensate-tune"]:
    d = find_tool_dir(name)
    if d is None:
        continue
    config.available_features.add(name)
    tools.append(ToolSubst(name, unresolved="fatal"))
    tool_dirs.append(d)
    llvm_config.with_environment("PATH", d, append_path=True)

if "condensate-opt" not in config.available_features:
    lit_config.fatal("condensate-opt is not built; run "
                     "`ninja condensate-opt` in " + config.condensate_obj_root)

llvm_config.add_tool_substitutions(tools, tool_dirs)

# The PTX pipeline links libdevice from the CUDA toolkit named by CUDA_ROOT,
# CUDA_HOME or CUDA_PATH, else /usr/local/cuda or /usr/lib/cuda (the same
# search as condensate::findLibdevice). Pass the variables through and mark
# whether libdevice is there: without it the math calls stay unresolved.
cuda_vars = ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"]
llvm_config.with_system_environment(cuda_vars)
cuda_roots = [os.environ[v] for v in cuda_vars if os.environ.get(v)]
for root in cuda_roots + ["/usr/local/cuda", "/usr/lib/cuda"]:
    if os.path.isfile(os.path.join(root, "nvvm", "libdevice",
                                   "libdevice.10.bc")):
        config.available_features.add("libdevice")
        break
# The default toolkit location alone (the case with no variables set).
for root in ["/usr/local/cuda", "/usr/lib/cuda"]:
    if os.path.isfile(os.path.join(root, "nvvm", "libdevice",
                                   "libdevice.10.bc")):
        config.available_features.add("default-libdevice")
        break

# Execution tests (mlir-runner with the MLIR runner utilities) need these.
config.substitutions.append(("%llvm_lib_dir", config.llvm_lib_dir))
for name in ["split-file", "mlir-runner"]:
    if os.path.isfile(os.path.join(config.llvm_tools_dir, name)):
        config.available_features.add(name)
        llvm_config.add_tool_substitutions([name], [config.llvm_tools_dir])

# The default model (scripts/default-model.env; scripts/setup.sh fetches it):
# `REQUIRES: smollm2` and `%smollm2` for the tests that run it; without it
# they are UNSUPPORTED.
smollm2 = os.path.join(config.condensate_src_root,
                       config.condensate_default_model)
if os.path.isfile(smollm2):
    config.available_features.add("smollm2")
    config.substitutions.append(("%smollm2", smollm2))

# The independent model reference (test/python/gguf_reference.py) needs
# numpy, gguf and tokenizers, which scripts/setup.sh installs for the
# python3 on PATH: `REQUIRES: gguf-reference` and `%gguf_reference` for the
# tests that run it.
import shutil
import subprocess
python3 = shutil.which("python3")
if python3 and subprocess.run([python3, "-c", "import numpy, gguf, tokenizers"],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("gguf-reference")
    config.substitutions.append(
        ("%gguf_reference", python3 + " " + os.path.join(
            config.condensate_src_root, "test", "python", "gguf_reference.py")))

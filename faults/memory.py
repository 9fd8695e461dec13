"""Out of memory: the accelerator's (PyTorch's CUDA caching allocator, cuBLAS, Marian, MXNet, TensorFlow and its
CUDA driver calls, XLA, TPU HBM) and the host's (PyTorch's CPU allocator). Tag `oom`."""

from __future__ import annotations

import re

from trainwarden.faults.model import FORMAT, Sample, Signature, Source, size_words

OOM = "oom"
GPU_REMEDY = (
    "reduce the batch size (use gradient accumulation to keep the effective batch) or enable activation checkpointing"
)

_TORCH_OOM = re.compile(r"CUDA out of memory\. Tried to allocate ([\d.]+ ?[KMGT]?i?B)")
# torch >= 2.1 says `GPU 5 has a total capacity of 23.65 GiB of which 208.06 MiB is free`; older ones
# `(GPU 0; 10.76 GiB total capacity; 9.12 GiB already allocated; 18.56 MiB free; ...)`
_TORCH_GPU = re.compile(
    r"GPU (\d+) has a total capacity of ([\d.]+ ?[KMGT]?i?B) of which ([\d.]+ ?[KMGT]?i?B) is free"
    r"|\(GPU (\d+); ([\d.]+ ?[KMGT]?i?B) total capacity;.*?([\d.]+ ?[KMGT]?i?B) free"
)


def _cuda_oom(line: str) -> str | None:
    """`CUDA out of memory. Tried to allocate 2.00 GiB on GPU 5 (23.65 GiB total, 208.06 MiB free)`."""
    found = _TORCH_OOM.search(line)
    if found is None:
        return None
    gpu = _TORCH_GPU.search(line, found.end())
    where = ""
    if gpu is not None:
        index, total, free = (gpu.group(1), gpu.group(2), gpu.group(3)) if gpu.group(1) else gpu.group(4, 5, 6)
        where = f" on GPU {index} ({total} total, {free} free)"
    return f"CUDA out of memory. Tried to allocate {found.group(1)}{where}"


_TF_OOM = re.compile(r"OOM when allocating tensor with shape ?\[([^\]]*)\]")
_TF_DEVICE = re.compile(r"device:(GPU:\d+)")


def _tf_oom(line: str) -> str | None:
    """`OOM when allocating tensor with shape[295,64,256,256] on GPU:0`."""
    found = _TF_OOM.search(line)
    if found is None:
        return None
    device = _TF_DEVICE.search(line, found.end())
    return f"OOM when allocating tensor with shape[{found.group(1)}]" + (f" on {device.group(1)}" if device else "")


_TF_DRIVER = re.compile(r"failed to allocate (\S+) \((\d+) bytes\)")


def _tf_driver_oom(line: str) -> str | None:
    """`out of memory (GPU, TensorFlow): failed to allocate 1.51G (CUDA_ERROR_OUT_OF_MEMORY)`."""
    found = _TF_DRIVER.search(line)
    size = "" if found is None else f": failed to allocate {size_words(int(found.group(2)))}"
    return f"out of memory (GPU, TensorFlow){size} (CUDA_ERROR_OUT_OF_MEMORY)"


_CPU_BYTES = re.compile(r"you tried to allocate (\d+) bytes")


def _cpu_oom(line: str) -> str | None:
    found = _CPU_BYTES.search(line)
    return None if found is None else f"out of memory (host): tried to allocate {size_words(int(found.group(1)))}"


_XLA_BYTES = re.compile(r"Out of (host )?memory while trying to allocate (\d+) bytes|allocate ([\d.]+ ?[KMGT]i?B)")


def _xla_oom(line: str) -> str | None:
    found = _XLA_BYTES.search(line)
    if found is None:
        return None
    size = size_words(int(found.group(2))) if found.group(2) else found.group(3)
    return f"out of {'host ' if found.group(1) else 'accelerator '}memory (XLA): tried to allocate {size}"


_HBM = re.compile(r"Used ([\d.]+[KMGT]?) of ([\d.]+[KMGT]?) hbm")


def _hbm(line: str) -> str | None:
    found = _HBM.search(line)
    return (
        None
        if found is None
        else f"TPU HBM out of memory at compile time: {found.group(1)}B needed of {found.group(2)}B"
    )


# Marian's CUDA_CHECK: `CUDA error 2 'out of memory' - /path/src/tensors/gpu/device.cu:32: cudaMalloc(&data_, size)`
_MARIAN = re.compile(r"CUDA error 2 'out of memory' - (?:\S*/)?([^/\s:]+):(\d+): (.+?)\s*$")


def _marian_oom(line: str) -> str | None:
    """`CUDA out of memory (Marian: cudaMalloc(&data_, size) at device.cu:32)`."""
    found = _MARIAN.search(line)
    if found is None:
        return None
    file, number, expr = found.groups()
    return f"CUDA out of memory (Marian: {expr} at {file}:{number})"


def _cudamalloc_oom(line: str) -> str | None:
    """MXNet's pooled storage manager: `cudaMalloc failed` (the first try) or `cudaMalloc retry failed` (after
    it released its pool)."""
    if "cudaMalloc retry failed" in line:
        return "CUDA out of memory (MXNet: cudaMalloc failed again after releasing its memory pool)"
    if "pooled_storage_manager" in line:
        return "CUDA out of memory (MXNet: cudaMalloc failed in its GPU memory pool)"
    return None


SIGNATURES = (
    Signature(
        id="cuda_oom",
        tag=OOM,
        pattern=r"CUDA out of memory",
        hints=("CUDA out of memory",),
        severity="critical",
        what="CUDA out of memory",
        remedy=GPU_REMEDY,
        source=Source("pytorch/pytorch", "c10/cuda/CUDACachingAllocator.cpp", "CUDA out of memory. Tried to allocate "),
        describe=_cuda_oom,
        samples=(
            Sample(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 5 has a total capacity "
                "of 23.65 GiB of which 208.06 MiB is free. Including non-PyTorch memory, this process has 23.44 GiB "
                "memory in use.",
                "CUDA out of memory. Tried to allocate 270.00 MiB on GPU 5 (23.65 GiB total, 208.06 MiB free)",
                "tests/data/real/llamafactory_rank_prefixed_oom_eval.log line 5",
            ),
            Sample(
                "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total capacity; 9.12 "
                "GiB already allocated; 18.56 MiB free; 9.66 GiB reserved in total by PyTorch)",
                "CUDA out of memory. Tried to allocate 20.00 MiB on GPU 0 (10.76 GiB total, 18.56 MiB free)",
                "built from the torch < 2.1 format of the same file",
            ),
        ),
    ),
    Signature(
        id="torch_oom_error",
        tag=OOM,
        pattern=r"OutOfMemoryError",
        hints=("OutOfMemory",),
        severity="critical",
        what="out of memory (torch.OutOfMemoryError)",
        remedy=GPU_REMEDY,
        source=Source("pytorch/pytorch", "torch/csrc/Exceptions.cpp", "torch.OutOfMemoryError"),
        samples=(Sample("torch.OutOfMemoryError", None, "the exception class alone, as a traceback's last line"),),
    ),
    Signature(
        id="cuda_error_oom",
        tag=OOM,
        pattern=r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED",
        hints=("CUDA error: out of memory", "CUBLAS_STATUS_ALLOC"),
        severity="critical",
        what="CUDA out of memory (outside the caching allocator: a CUDA context, cuBLAS or a kernel's workspace)",
        remedy=GPU_REMEDY + "; check that no other process holds memory on the GPU (nvidia-smi)",
        source=Source("pytorch/pytorch", "c10/cuda/CUDAException.cpp", "CUDA error: "),
        samples=(
            Sample("RuntimeError: CUDA error: out of memory", None, FORMAT),
            Sample(
                "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
                None,
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="thc_cuda_oom",
        tag=OOM,
        pattern=r"cuda runtime error \(2\) : out of memory|THCudaCheck FAIL .*error=2 : out of memory",
        hints=("cuda runtime error (2)", "THCudaCheck FAIL"),
        severity="critical",
        what="CUDA out of memory (PyTorch before 1.0: THC's cudaMalloc)",
        remedy=GPU_REMEDY,
        # THCudaCheck: "THCudaCheck FAIL file=%s line=%i error=%i : %s"
        # THError: "cuda runtime error (%d) : %s at %s:%d"
        source=Source("pytorch/pytorch", "torch/lib/THC/THCGeneral.c", "cuda runtime error (%d) : %s at %s:%d"),
        samples=(
            Sample(
                "RuntimeError: cuda runtime error (2) : out of memory at "
                "/b/wheel/pytorch-src/torch/lib/THC/generic/THCStorage.cu:66",
                None,
                "tests/data/real/loop_tqdm_bar_thcudacheck_out_of_memory.log line 13",
            ),
        ),
    ),
    Signature(
        id="marian_cuda_oom",
        tag=OOM,
        pattern=r"CUDA error 2 'out of memory'",
        hints=("CUDA error 2 'out of memory'",),
        severity="critical",
        what="CUDA out of memory (Marian)",
        remedy="Marian reserves its --workspace (MB per GPU) up front and extends it: lower --workspace (-w), or "
        "--mini-batch / --mini-batch-words (with --mini-batch-fit, a smaller --workspace makes the batches "
        "smaller); check that no other process holds memory on the GPU (nvidia-smi)",
        # CUDA_CHECK(expr): ABORT_IF(rc != cudaSuccess, "CUDA error {} '{}' - {}:{}: {}", rc,
        # cudaGetErrorString(rc), __FILE__, __LINE__, #expr); cudaErrorMemoryAllocation is 2
        source=Source("marian-nmt/marian-dev", "src/tensors/gpu/cuda_helpers.h", "CUDA error {} '{}' - {}:{}: {}"),
        describe=_marian_oom,
        samples=(
            Sample(
                "[2019-04-15 08:34:14] Error: CUDA error 2 'out of memory' - "
                "/data/home/mt/tools/marian/src/tensors/gpu/device.cu:32: cudaMalloc(&data_, size)",
                "CUDA out of memory (Marian: cudaMalloc(&data_, size) at device.cu:32)",
                "tests/data/real/marian_valid_then_cuda_oom_tcmalloc.log line 10 "
                "(https://github.com/marian-nmt/marian-dev/issues/439)",
            ),
            Sample(
                "[2020-05-05 18:48:50] Error: CUDA error 2 'out of memory' - "
                "/home/imo/news-translit-nmt-master/tools/marian-dev/src/tensors/gpu/device.cu:38: "
                "cudaMalloc(&data_, size)",
                "CUDA out of memory (Marian: cudaMalloc(&data_, size) at device.cu:38)",
                "tests/data/real/marian_startup_workspace_cuda_oom_bare.log line 12 "
                "(https://github.com/marian-nmt/marian/issues/270)",
            ),
        ),
        not_samples=(
            "[2020-05-05 18:48:50] Error: Aborted from virtual void marian::gpu::Device::reserve(size_t) in "
            "/home/imo/news-translit-nmt-master/tools/marian-dev/src/tensors/gpu/device.cu:38",
        ),
    ),
    Signature(
        id="cudamalloc_oom",
        tag=OOM,
        pattern=r"cudaMalloc (?:retry )?failed: out of memory",
        hints=("failed: out of memory",),
        severity="critical",
        what="CUDA out of memory (cudaMalloc failed)",
        remedy=GPU_REMEDY + "; MXNet: MXNET_GPU_MEM_POOL_TYPE=Round lowers its memory pool's fragmentation; check "
        "that no other process holds memory on the GPU (nvidia-smi)",
        # LOG(FATAL) << "cudaMalloc failed: " << cudaGetErrorString(e); since 1.6 also "cudaMalloc retry failed: "
        # after ReleaseAll() (src/storage/pooled_storage_manager.h:107 in MXNet 1.1.0)
        source=Source("apache/mxnet", "src/storage/pooled_storage_manager.h", "cudaMalloc failed: "),
        describe=_cudamalloc_oom,
        samples=(
            Sample(
                "  what():  [23:40:15] src/engine/./threaded_engine.h:359: [23:40:15] "
                "src/storage/./pooled_storage_manager.h:107: cudaMalloc failed: out of memory",
                "CUDA out of memory (MXNet: cudaMalloc failed in its GPU memory pool)",
                "tests/data/real/sockeye1_training_started_cudamalloc_oom_bare.log line 5 "
                "(https://github.com/awslabs/sockeye/issues/395)",
            ),
            Sample(
                "mxnet.base.MXNetError: [11:18:15] src/storage/./pooled_storage_manager.h:157: cudaMalloc failed: out "
                "of memory",
                "CUDA out of memory (MXNet: cudaMalloc failed in its GPU memory pool)",
                "https://github.com/apache/mxnet/issues/675",
            ),
            Sample(
                "MXNetError: cudaMalloc retry failed: out of memory",
                "CUDA out of memory (MXNet: cudaMalloc failed again after releasing its memory pool)",
                "https://github.com/deepinsight/insightface/issues/1240",
            ),
        ),
    ),
    Signature(
        id="cpu_oom",
        tag=OOM,
        pattern=r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)",
        hints=("DefaultCPUAllocator",),
        severity="critical",
        what="out of memory (host)",
        remedy="the host ran out of RAM: lower the batch size or the DataLoader's num_workers/prefetch_factor, load "
        "the model or dataset lazily (mmap, streaming), or move to a machine with more memory",
        source=Source(
            "pytorch/pytorch",
            "c10/core/impl/alloc_cpu.cpp",
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate ",
        ),
        describe=_cpu_oom,
        samples=(
            Sample(
                "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. "
                "DefaultCPUAllocator: can't allocate memory: "
                "you tried to allocate 4611686018427387904 bytes. Error code 12 (Cannot allocate memory)",
                "out of memory (host): tried to allocate 4.00 EiB",
                "torch 2.13.0 here: torch.empty(2**62, dtype=torch.uint8) (tests/faults/test_fault_processes.py)",
            ),
        ),
    ),
    Signature(
        id="tf_oom",
        tag=OOM,
        pattern=r"OOM when allocating tensor|ResourceExhaustedError",
        hints=("OOM when", "ResourceExhausted"),
        severity="critical",
        what="out of memory (TensorFlow)",
        remedy=GPU_REMEDY,
        source=Source(
            "tensorflow/tensorflow", "tensorflow/core/framework/op_kernel.cc", "OOM when allocating tensor with shape"
        ),
        describe=_tf_oom,
        samples=(
            Sample(
                "2019-06-25 10:14:10.590005: W tensorflow/core/framework/op_kernel.cc:1401] OP_REQUIRES failed at "
                "conv_ops.cc:446 : Resource exhausted: OOM when allocating tensor with shape[295,64,256,256] and type "
                "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
                "OOM when allocating tensor with shape[295,64,256,256] on GPU:0",
                "tests/data/real/keras_tf_fit_generator_oom.log line 4",
            ),
            Sample(
                "tensorflow.python.framework.errors_impl.ResourceExhaustedError: failed to allocate memory",
                None,
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="tf_cuda_driver_oom",
        tag=OOM,
        # the CUDA driver's CUresult name, as TensorFlow's StreamExecutor logs a failed cuMemAlloc (TF 1.x and 2.x)
        pattern=r"CUDA_ERROR_OUT_OF_MEMORY",
        hints=("CUDA_ERROR_OUT_OF_MEMORY",),
        severity="critical",
        what="out of memory (GPU, TensorFlow: CUDA_ERROR_OUT_OF_MEMORY)",
        remedy=GPU_REMEDY + "; with TensorFlow, let it grow its GPU memory "
        "(tf.config.experimental.set_memory_growth, or TF_FORCE_GPU_ALLOW_GROWTH=true) and check that no other "
        "process holds the GPU (nvidia-smi)",
        source=Source("tensorflow/tensorflow", "tensorflow/stream_executor/cuda/cuda_driver.cc", "failed to allocate "),
        describe=_tf_driver_oom,
        samples=(
            Sample(
                "2017-08-12 08:25:16.508376: E tensorflow/stream_executor/cuda/cuda_driver.cc:924] failed to allocate "
                "1.51G (1617277696 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY",
                "out of memory (GPU, TensorFlow): failed to allocate 1.51 GiB (CUDA_ERROR_OUT_OF_MEMORY)",
                "https://github.com/tensorflow/tensorflow/issues/12237",
            ),
            Sample(
                "2019-07-21 23:23:06.228049: E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate "
                "32.00M (33554432 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                "out of memory (GPU, TensorFlow): failed to allocate 32.00 MiB (CUDA_ERROR_OUT_OF_MEMORY)",
                "https://github.com/tensorflow/tensorflow/issues/30912",
            ),
        ),
    ),
    Signature(
        id="xla_oom",
        tag=OOM,
        pattern=r"RESOURCE_EXHAUSTED: Out of (?:host )?memory",
        hints=("RESOURCE_EXHAUSTED",),
        severity="critical",
        what="out of memory (XLA)",
        remedy=GPU_REMEDY + "; for JAX on GPU, check XLA_PYTHON_CLIENT_MEM_FRACTION and that no other process holds "
        "the device",
        source=Source(
            "openxla/xla",
            "xla/stream_executor/integrations/tf_allocator_adapter.cc",
            "memory while trying to allocate ",
        ),
        describe=_xla_oom,
        ignore_case=True,
        samples=(
            Sample(
                "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                "33762398024 bytes.",
                "out of accelerator memory (XLA): tried to allocate 31.44 GiB",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="tpu_hbm_oom",
        tag=OOM,
        pattern=r"Ran out of memory in memory space hbm|Hbm usage: .*exceeding available bytes",
        hints=("memory space hbm", "Hbm usage"),
        severity="critical",
        what="TPU HBM out of memory at compile time",
        remedy="the compiled program does not fit in the TPU's HBM: reduce the batch size, shard the largest tensors "
        "(check the mesh and sharding annotations), use jax.checkpoint (remat) or bfloat16",
        source=Source("openxla/xla", "docs/errors/error_1000.md", "Ran out of memory in memory space hbm"),
        describe=_hbm,
        samples=(
            Sample(
                "XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
                "Ran out of memory in memory space "
                "hbm. Used 20.93G of 15.48G hbm. Exceeded hbm capacity by 5.45G.",
                "TPU HBM out of memory at compile time: 20.93GB needed of 15.48GB",
                "openxla/xla docs/errors/error_1000.md (XLA error E1000)",
            ),
        ),
    ),
)

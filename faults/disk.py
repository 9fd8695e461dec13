"""A disk the run writes to filling up: no space left, a quota exceeded, torch.save failing to write its zip.
Tag `disk_full`."""

from __future__ import annotations

from trainwarden.faults.model import FORMAT, Sample, Signature, Source

DISK_FULL = "disk_full"
SAVE_CONTEXT = (
    (r"torch\.save|save_checkpoint|save_pretrained|save_model|serialization\.py|checkpoint", " at a checkpoint save"),
)

SIGNATURES = (
    Signature(
        id="disk_full",
        tag=DISK_FULL,
        pattern=r"No space left on device|\bENOSPC\b",
        hints=("No space left", "ENOSPC"),
        severity="critical",
        what="disk full (No space left on device)",
        remedy="free space on the disk the run writes to (old checkpoints, caches), keep fewer checkpoints "
        "(save_total_limit), or point the output directory at a larger disk; then resume from the last checkpoint "
        "that was written whole",
        source=Source("torvalds/linux", "include/uapi/asm-generic/errno-base.h", "No space left on device"),
        context=SAVE_CONTEXT,
        samples=(
            Sample(
                "OSError: [Errno 28] No space left on device",
                None,
                "torch 2.13.0 here: torch.save to an open /dev/full",
            ),
        ),
    ),
    Signature(
        id="disk_quota",
        tag=DISK_FULL,
        pattern=r"Disk quota exceeded|\bEDQUOT\b",
        hints=("quota exceeded", "EDQUOT"),
        severity="critical",
        what="disk quota exceeded",
        remedy="free space within the quota (old checkpoints, caches) or ask for a larger quota; keep fewer "
        "checkpoints (save_total_limit); then resume from the last checkpoint that was written whole",
        source=Source("bminor/glibc", "sysdeps/gnu/errlist.h", "Disk quota exceeded"),
        context=SAVE_CONTEXT,
        samples=(Sample("OSError: [Errno 122] Disk quota exceeded", None, FORMAT),),
    ),
    Signature(
        id="torch_save_failed",
        tag=DISK_FULL,
        # a small state dict is buffered whole: the failed write surfaces at the zip's end, from the C++ stream
        pattern=r"PytorchStreamWriter failed writing file|inline_container\.cc:\d+\] \. unexpected pos"
        r"|RuntimeError: basic_ios::clear: iostream error",
        hints=("PytorchStreamWriter", "unexpected pos", "basic_ios::clear"),
        severity="critical",
        what="torch.save could not write the checkpoint (the disk is most likely full or over its quota)",
        remedy="check the free space and quota of the checkpoint directory (df -h, quota -s); free space or save "
        "elsewhere, then resume from the last checkpoint that was written whole",
        source=Source(
            "pytorch/pytorch", "caffe2/serialize/inline_container.cc", "PytorchStreamWriter failed writing file "
        ),
        samples=(
            Sample(
                "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
                None,
                "torch 2.13.0 here: torch.save(obj, '/dev/full')",
            ),
            Sample(
                "RuntimeError: basic_ios::clear: iostream error",
                None,
                "torch 2.13.0 here: torch.save(model.state_dict(), '/dev/full') of a small model "
                "(tests/conformance/frameworks/faults.py disk_full)",
            ),
            Sample(
                "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file "
                "data/2: file write failed",
                None,
                FORMAT,
            ),
        ),
    ),
)

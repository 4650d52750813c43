"""The MJCF test corpus (issue 43): dm_control's suite and locomotion walkers, only their XML and
mesh files, unpacked from dm_control's wheel into ``.cache/mjcf/`` (git-ignored) by ``make
mjcf-corpus`` (a prerequisite of ``make test``). dm_control itself is never installed: it pulls
MuJoCo's binaries and much else, and rbdgen needs none of it.

``python tests/mjcf_corpus.py unpack WHEEL DIR`` unpacks (the Makefile's step). The tests find the
files with :func:`corpus_dir`; where they are missing, :func:`require` skips with the command to
run — or fails, under ``RBDGEN_REQUIRE_MJCF=1`` (``make test`` sets it: a missing corpus is then
a failure, not a silent skip).
"""
from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

#: the pinned dm_control release (its files are the corpus: a new release is a deliberate change)
DM_CONTROL_VERSION = "1.0.50"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "mjcf" / f"dm_control-{DM_CONTROL_VERSION}"
#: written last by unpack(): the folder is complete
COMPLETE = ".complete"

#: case → path below the wheel's dm_control/ folder. The issue's models: the suite's cheetah,
#: walker, hopper, humanoid, humanoid_CMU and dog (with a second top-level body, its ball), the
#: locomotion walkers' CMU humanoid, rodent, dog and fruitfly (108 DoF, meshes in MuJoCo's .msh)
MODELS = {
    "cheetah": "suite/cheetah.xml",
    "walker": "suite/walker.xml",
    "hopper": "suite/hopper.xml",
    "humanoid": "suite/humanoid.xml",
    "humanoid_CMU": "suite/humanoid_CMU.xml",
    "dog_suite": "suite/dog.xml",
    "humanoid_CMU_V2020": "locomotion/walkers/assets/humanoid_CMU_V2020.xml",
    "rodent": "locomotion/walkers/assets/rodent.xml",
    "dog": "locomotion/walkers/assets/dog_v2/dog.xml",
    "fruitfly": "locomotion/walkers/assets/fruitfly_v2/fruitfly.xml",
}

#: what is unpacked: the models, the files they include, their meshes
_KEEP_SUFFIX = {
    "dm_control/suite/common/": (".xml",),
    "dm_control/suite/dog_assets/": (".stl",),
    "dm_control/locomotion/walkers/assets/fruitfly_v2/": (".msh",),
}


def _wanted(name: str) -> bool:
    if name in {f"dm_control/{p}" for p in MODELS.values()}:
        return True
    return any(name.startswith(d) and name.endswith(sfx) for d, sfx in _KEEP_SUFFIX.items())


def unpack(wheel: str, dest: str) -> int:
    """Extract the corpus files of ``wheel`` below ``dest`` (``dest/dm_control/...``); the
    marker file last. Returns the number of files."""
    dest_p = Path(dest)
    n = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not _wanted(info.filename):
                continue
            target = (dest_p / info.filename).resolve()
            if dest_p.resolve() not in target.parents:  # a hostile member name
                raise SystemExit(f"refusing to unpack {info.filename!r} outside {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(z.read(info))
            os.replace(tmp, target)
            n += 1
    missing = [p for p in MODELS.values() if not (dest_p / "dm_control" / p).is_file()]
    if missing:
        raise SystemExit(f"{wheel} lacks {', '.join(missing)}")
    (dest_p / COMPLETE).write_text(f"dm_control {DM_CONTROL_VERSION}: {n} files\n")
    return n


def corpus_dir() -> Path:
    return ROOT / "dm_control"


def available() -> bool:
    return (ROOT / COMPLETE).is_file()


def require():
    """Skip the calling test (or fail it under RBDGEN_REQUIRE_MJCF=1) when the corpus is absent."""
    import pytest

    if available():
        return
    why = (f"the MJCF corpus (dm_control {DM_CONTROL_VERSION}'s XML and mesh files) is not in {ROOT}: "
           f"run `make mjcf-corpus`")
    if os.environ.get("RBDGEN_REQUIRE_MJCF") == "1":
        pytest.fail(why + " (RBDGEN_REQUIRE_MJCF=1: required)")
    pytest.skip(why)


def path(case: str) -> Path:
    return corpus_dir() / MODELS[case]


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "unpack":
        raise SystemExit("usage: python tests/mjcf_corpus.py unpack WHEEL DIR")
    print(f"mjcf corpus: {unpack(sys.argv[2], sys.argv[3])} files in {sys.argv[3]}")

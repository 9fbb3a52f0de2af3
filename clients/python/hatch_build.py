"""Puts the generated stubs (gen/python/lockstream/v1, made by scripts/gen-polyglot.sh) into the
package as lockstream.v1. Built from an sdist, they are in src/lockstream/v1 already."""

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        generated = Path(self.root, "..", "..", "gen", "python", "lockstream", "v1").resolve()
        if not generated.is_dir():
            if not Path(self.root, "src", "lockstream", "v1").is_dir():
                raise RuntimeError(f"the generated stubs are missing: {generated} (run scripts/gen-polyglot.sh)")
            return
        target = "lockstream/v1" if self.target_name == "wheel" else "src/lockstream/v1"
        for stub in sorted(generated.glob("*.py*")):
            build_data["force_include"][str(stub)] = f"{target}/{stub.name}"
        build_data["force_include"][str(Path(self.root, "src", "lockstream", "_v1_init.py"))] = f"{target}/__init__.py"

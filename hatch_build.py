"""Ship `openipu.pth` at the root of site-packages, in regular and editable installs.

The .pth file runs `openipu._startup` when any interpreter starts, which is
what lets unmodified IPU programs import `tensorflow.python.ipu` and use
`tf.keras.ipu` without importing openipu themselves.
"""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class StartupFileHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        build_data["force_include"]["src/openipu.pth"] = "openipu.pth"
        # Editable installs put `src` on sys.path, which already holds this module.
        build_data["force_include"]["src/_openipu_startup.py"] = "_openipu_startup.py"
        build_data["force_include_editable"]["src/openipu.pth"] = "openipu.pth"

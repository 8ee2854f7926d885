"""The execution engine: compiled regions and the device loop every front end runs on."""

from openipu._src.integration import autograph_bypass as _autograph_bypass

# Autograph converts no openipu function, as it converted none of the original's (which
# lived in the `tensorflow` package): see the patch's module.
_autograph_bypass.install()

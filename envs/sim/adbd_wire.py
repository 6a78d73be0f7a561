"""The adbd wire protocol's numbers: message commands, protocol versions, payload sizes, shell
protocol v2 packet ids, the device's features and properties, service names (part of
:mod:`darwin.envs.sim.adbd`).
"""

from __future__ import annotations

import struct

# --------------------------------------------------------------------------------------
# Wire constants (system/core/adb/adb.h)
# --------------------------------------------------------------------------------------

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_STLS = 0x534C5453

_COMMAND_NAMES = {
    A_CNXN: "CNXN",
    A_AUTH: "AUTH",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_CLSE: "CLSE",
    A_WRTE: "WRTE",
    A_STLS: "STLS",
}

A_VERSION_MIN = 0x01000000
A_VERSION_SKIP_CHECKSUM = 0x01000001
A_VERSION = 0x01000001
MAX_PAYLOAD_V1 = 4 * 1024
MAX_PAYLOAD = 1024 * 1024
_MIN_NEGOTIATED_PAYLOAD = 64

_HEADER = struct.Struct("<6I")

# Shell protocol v2 packet ids (system/core/adb/shell_protocol.h).
SHELL_STDIN = 0
SHELL_STDOUT = 1
SHELL_STDERR = 2
SHELL_EXIT = 3
SHELL_CLOSE_STDIN = 4
SHELL_WINDOW_SIZE_CHANGE = 5
_SHELL_HEADER = struct.Struct("<BI")

#: Features advertised in the CNXN banner: only what this server implements.
DEVICE_FEATURES = ("shell_v2", "cmd")

#: Exit code of a command whose backend (or ``before_command`` hook) raised
#: (``EX_SOFTWARE`` from sysexits.h); the error text is sent on stderr.
BACKEND_ERROR_EXIT_CODE = 70
#: Exit code for shell syntax this server does not support (what ``sh`` uses for
#: syntax errors).
SYNTAX_ERROR_EXIT_CODE = 2

_DEFAULT_PROPS = {
    "ro.product.name": "darwin_sim",
    "ro.product.model": "DarwinSim",
    "ro.product.device": "darwin_sim",
}


def _split_service(service: str) -> tuple[str, list[str]]:
    name, *args = service.split(",")
    return name, args

"""Opens a TCP connection to a loopback port at import (the test listens there) and would
send it the first secret it finds. In the sandbox the child has no usable network."""

import json
import socket
from pathlib import Path

from torch import nn

_target = json.loads((Path(__file__).parent / "target.json").read_text())
with socket.create_connection(("127.0.0.1", _target["port"]), timeout=5) as _sock:
    _sock.sendall(b"exfiltrated")


class Model(nn.Module):
    def __init__(self, **init_kwargs):
        super().__init__()

    def forward(self, *args, **kwargs):
        raise NotImplementedError

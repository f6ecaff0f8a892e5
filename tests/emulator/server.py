"""gpustack's local AWS emulator: moto's server (all services) plus the extensions in ext/.

Run with the venv made by setup.sh:

    tests/emulator/.venv/bin/python tests/emulator/server.py [--port N] [--host 127.0.0.1]

Port 0 (the default) picks a free port. Once the socket is listening it prints exactly one line,
``GPUSTACK_EMULATOR_READY port=<port>``, to stdout. No access log; errors go to stderr. Exits 0 on
SIGTERM or SIGINT.

AWS managed IAM policies are loaded (MOTO_IAM_LOAD_MANAGED_POLICIES=true unless already set).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


class _Stop(Exception):
    pass


def _on_signal(signum: int, frame: Any) -> None:
    raise _Stop()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=0, help="port (0: pick a free one)")
    args = parser.parse_args(argv)
    if not _is_loopback(args.host):
        parser.error(f"--host must be a loopback address, not {args.host!r}")

    # moto 5 leaves AWS managed policies (arn:aws:iam::aws:policy/...) out unless asked; the engine
    # attaches e.g. AmazonEKSClusterPolicy, so load them (about 0.3 s, once per account).
    os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    from werkzeug.serving import make_server

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    import ext

    class QuietHandler(MotoRequestHandler):
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            pass

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    ext.load_all()
    app = ext.wrap_wsgi(DomainDispatcherApplication(create_backend_app))

    server = make_server(
        args.host, args.port, app, threaded=True, request_handler=QuietHandler
    )
    port = server.server_port
    # moto sends some requests to itself (e.g. SQS -> Lambda); it reads the port from here.
    os.environ["MOTO_PORT"] = str(port)

    try:
        sys.stdout.write(f"GPUSTACK_EMULATOR_READY port={port}\n")
        sys.stdout.flush()
        server.serve_forever()
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    code = main()
    # Tearing down moto's module state takes ~2 s of interpreter finalisation and there is nothing
    # to save, so leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

"""A TCP relay on 127.0.0.1 that can stop passing bytes on, for as long as a test says: a
database that is up but does not answer (a stalled network, a host under swap), which neither a
refused connection nor a killed session imitates."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from types import TracebackType

CHUNK = 65536


class StallingRelay:
    """Relays every connection made to `port` to `target`; `stall()` holds the bytes in both
    directions until `resume()`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:  # closed: the relay is over
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(CHUNK):
                self._flowing.wait()
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):  # one side gone: the other goes too
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> StallingRelay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.resume()
        self._server.close()
        with self._lock:
            for end in self._sockets:
                with suppress(OSError):
                    end.close()

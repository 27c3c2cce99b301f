"""A TCP relay for the tests: every connection made to it is passed on to a target, byte for
byte, by two threads. The many-servers test reaches PostgreSQL from other network namespaces
through one; a test can also `stall()` it, for a database that is up but does not answer (a
stalled network, a host under swap), which neither a refused connection nor a killed session
imitates."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from types import TracebackType

BACKLOG = 64
CHUNK = 1 << 16


class Relay:
    """Relays every connection made to `listen` (its port: `port`) to `target`, until closed;
    `stall()` holds the bytes in both directions until `resume()`."""

    def __init__(self, target: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)):
        self._target = target
        self._server = socket.create_server(listen, backlog=BACKLOG)
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

    def close(self) -> None:
        self.resume()
        with suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
        self._server.close()
        with self._lock:
            for end in self._sockets:
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

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

    def __enter__(self) -> Relay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""A fork server for tests that run many `mlmkit` processes (the README test).

Each `mlmkit` process spends about 3 seconds of CPU importing torch and transformers before
it does anything; the README's examples start some forty of them. The server imports them
once, then forks a child per request. A child is a real process (its own pid, signals,
exit status, the caller's stdin/stdout/stderr, working directory and environment) that
runs `mlmkit.cli.main()` (or a Python file as `__main__`) exactly as a fresh process would,
minus the imports. The server itself never runs a torch operation, so forking it is safe.

A shim named `mlmkit`, put first on PATH, sends its argv, cwd, environment and its three
file descriptors to the server, forwards the signals it gets (SIGTERM, SIGINT, ...; not
SIGKILL) to the child and exits with the child's status; when the server is not reachable
it execs the real `mlmkit`. A test that must SIGKILL a process asks the server directly
(`Server.start`: the child's own pid). `MLMKIT_TEST_REAL_PROCESSES=1` turns the server
off.

    python tests/forkserver.py SOCKET OWNER_PID   # serve until killed or the owner ends
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

SHIM = '''#!{python} -I
"""{name} through the test fork server (tests/forkserver.py), or the real one."""
import json, os, socket, struct, sys
path = os.environ.get("MLMKIT_FORKSERVER", "")
try:
    if not ({forwarded}):
        raise OSError("not a form the server runs")
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(path)
except OSError:
    os.execv({real!r}, [{real!r}] + sys.argv[1:])
message = json.dumps({{"kind": {kind!r}, "argv": {argv},
                      "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(conn, [struct.pack("!Q", len(message)) + message], [0, 1, 2])
def read_int():
    reply = b""
    while len(reply) < 4:
        try:
            chunk = conn.recv(4 - len(reply))
        except InterruptedError:
            continue
        if not chunk:  # the child died of a signal: so does this process
            if forwarded:
                signal.signal(forwarded[-1], signal.SIG_DFL)
                os.kill(os.getpid(), forwarded[-1])
            sys.exit("{name} (test fork server): the child died without a status")
        reply += chunk
    return struct.unpack("!i", reply)[0]
import signal
forwarded = []
child = read_int()
def forward(number, frame):
    forwarded.append(number)
    os.kill(child, number)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2):  # what this process is sent, its child gets (not SIGKILL)
    signal.signal(sig, forward)
sys.exit(read_int())
'''

PRELOAD = ("torch", "transformers", "tokenizers", "numpy",
           # what commands import when they need it: plots, fine-tuning data, LoRA, serving
           "matplotlib.pyplot", "datasets", "peft", "fastapi")
PRELOAD_ATTRIBUTES = (
    # transformers loads model code lazily; the README's families, loaded once here.
    "BertForMaskedLM", "RobertaForMaskedLM", "ModernBertForMaskedLM", "ElectraForMaskedLM",
    "ElectraForPreTraining", "AutoTokenizer", "PreTrainedTokenizerFast",
)


def disabled() -> bool:
    return os.environ.get("MLMKIT_TEST_REAL_PROCESSES", "") not in ("", "0")


# What each shim sends the server: the kind of child, the condition under which it asks the
# server at all (else it execs the real program), and the child's argv.
SHIMS = {
    "mlmkit": ("mlmkit", "True", '["mlmkit"] + sys.argv[1:]'),
    # `python -c CODE ...` and `python - ...` (a script on stdin) only; any other form runs
    # the real interpreter
    "python": ("python", 'sys.argv[1:2] == ["-"] or sys.argv[1:2] == ["-c"] and len(sys.argv) > 2',
               "sys.argv[1:]"),
}


def write_shim(directory: Path, real: str, name: str = "mlmkit") -> Path:
    """The shim `name` (a key of SHIMS) in `directory`, falling back to the program `real`."""
    kind, forwarded, argv = SHIMS[name]
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / name
    shim.write_text(SHIM.format(python=sys.executable, real=real, name=name, kind=kind,
                                forwarded=forwarded, argv=argv), encoding="utf-8")
    shim.chmod(0o755)
    return shim


class Child:
    """A process the server forked for `Server.start`: its pid, and its exit status once it
    ends (None when it died of a signal: it never reported one)."""

    def __init__(self, conn: socket.socket):
        self._conn = conn
        (self.pid,) = struct.unpack("!i", conn.recv(4, socket.MSG_WAITALL))

    def running(self) -> bool:
        """Whether it has neither reported its status nor died (either ends the wait)."""
        readable, _, _ = select.select([self._conn], [], [], 0)
        return not readable

    def wait(self, timeout: float) -> int | None:
        self._conn.settimeout(timeout)
        status = self._conn.recv(4, socket.MSG_WAITALL)
        self._conn.close()
        return struct.unpack("!i", status)[0] if len(status) == 4 else None


class Server:
    """The running server process: start it (or find it started), wait until it listens,
    stop it.

    `owner` is the pid of the process whose lifetime the server shares: it exits soon after
    that process does (under pytest-xdist, the controller, so that every worker uses the one
    server that the first of them started)."""

    def __init__(self, socket_path: Path, env: dict[str, str], shim_dir: Path, owner: int):
        self.socket_path = socket_path
        self.shim_dir = shim_dir  # holds the `mlmkit` shim that talks to this server
        self.process = None
        if self._listening():
            return
        socket_path.unlink(missing_ok=True)  # a server of an earlier run that has gone
        self.process = subprocess.Popen([sys.executable, __file__, str(socket_path),
                                         str(owner)], env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while not socket_path.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the test fork server did not start")
            time.sleep(0.05)

    def _listening(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(self.socket_path))
        except OSError:
            return False
        return True

    def _request(self, kind: str, argv: list[str], cwd: Path, env: dict[str, str],
                 fds: list[int]) -> socket.socket:
        """Ask for a child with `fds` as its stdin, stdout and stderr; the connection that
        brings its pid, then its exit status."""
        conn = socket.socket(socket.AF_UNIX)
        conn.connect(str(self.socket_path))
        message = json.dumps({"kind": kind, "argv": argv, "cwd": str(cwd), "env": env}).encode()
        socket.send_fds(conn, [struct.pack("!Q", len(message)) + message], fds)
        return conn

    def start(self, kind: str, argv: list[str], cwd: Path, env: dict[str, str],
              stderr: int) -> Child:
        """A child started without waiting for it (stdin and stdout /dev/null, stderr the
        file descriptor `stderr`): unlike a process started through the shim, it can be
        sent SIGKILL."""
        null = os.open(os.devnull, os.O_RDWR)
        try:
            return Child(self._request(kind, argv, cwd, env, [null, null, stderr]))
        finally:
            os.close(null)

    def run(self, kind: str, argv: list[str], cwd: Path, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess:
        """Like subprocess.run(capture_output=True, text=True), through the server."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            conn = self._request(kind, argv, cwd, env, [null, out_w, err_w])
        finally:
            for fd in (out_w, err_w, null):
                os.close(fd)
        with open(out_r, "rb") as out, open(err_r, "rb") as err:
            # Both pipes must be drained together or a child filling one blocks.
            stderr_bytes: list[bytes] = []
            reader = threading.Thread(target=lambda: stderr_bytes.append(err.read()))
            reader.start()
            stdout = out.read()
            reader.join(timeout)
        conn.settimeout(timeout)
        status = conn.recv(8, socket.MSG_WAITALL)  # the child's pid, then its exit status
        conn.close()
        code = struct.unpack("!i", status[4:])[0] if len(status) == 8 else -1
        return subprocess.CompletedProcess(argv, code, stdout.decode(errors="replace"),
                                           b"".join(stderr_bytes).decode(errors="replace"))

    def stop(self) -> None:
        """Stop the server if this object started it."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.socket_path.unlink(missing_ok=True)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    header, fds, _, _ = socket.recv_fds(conn, 8, 3)
    if len(header) < 8:  # a caller that only looked whether the server listens
        for fd in fds:
            os.close(fd)
        raise ConnectionError("no request")
    (length,) = struct.unpack("!Q", header)
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ConnectionError("short request")
        body += chunk
    return json.loads(body), fds


def _child(request: dict, fds: list[int], conn: socket.socket) -> None:
    """In the forked child: become the requested process, report the status, exit."""
    conn.sendall(struct.pack("!i", os.getpid()))  # the caller forwards its signals here
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    code = 0
    try:
        if request["kind"] == "mlmkit":
            from mlmkit.cli import main

            main()
        elif sys.argv[0] in ("-c", "-"):
            _run_code(sys.argv[1] if sys.argv[0] == "-c" else sys.stdin.read(), sys.argv[0])
        else:
            import runpy

            sys.path.insert(0, str(Path(sys.argv[0]).resolve().parent))
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # a fresh interpreter prints the traceback and exits 1
        import traceback

        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    log = os.environ.get("MLMKIT_FORKSERVER_LOG")
    if log:  # what each process cost: CPU seconds since the fork, exit status, argv
        cpu = os.times()
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{cpu.user + cpu.system:7.2f}s cpu  exit {code}  {' '.join(sys.argv)}\n")
    try:
        conn.sendall(struct.pack("!i", code))
    finally:
        os._exit(code)


def _run_code(code: str, flag: str) -> None:
    """`python -c CODE ARGS` or `python - ARGS` (CODE on stdin): CODE runs as a fresh
    interpreter's `__main__`, with sys.argv and sys.path[0] as that interpreter sets them."""
    import types

    if flag == "-c":
        del sys.argv[1]  # python -c CODE A B: sys.argv == ["-c", "A", "B"]
    sys.path.insert(0, "")
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    exec(compile(code, "<string>" if flag == "-c" else "<stdin>", "exec"), main.__dict__)


def _preload() -> None:
    """Import what a command would: torch, transformers' model code, every mlmkit module."""
    import importlib
    import pkgutil

    from mlmkit import cli

    cli._quiet_libraries()  # the environment transformers reads when it is imported
    import matplotlib

    matplotlib.use("Agg")  # as mlmkit's plots do: no display
    for name in PRELOAD:
        importlib.import_module(name)
    import transformers

    import mlmkit

    for name in PRELOAD_ATTRIBUTES:
        getattr(transformers, name, None)
    for module in pkgutil.walk_packages(mlmkit.__path__, "mlmkit."):
        try:
            importlib.import_module(module.name)
        except Exception:  # a module that fails here fails in the child too, visibly
            pass


def serve(socket_path: str, owner: int) -> None:
    _preload()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(socket_path + ".tmp")
    listener.listen(16)
    listener.settimeout(1.0)  # to look after the owner now and then
    os.rename(socket_path + ".tmp", socket_path)  # exists only once it listens
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if not _alive(owner):
                os._exit(0)
            continue
        conn.settimeout(None)
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            _child(request, fds, conn)
        for fd in fds:
            os.close(fd)
        conn.close()
        while True:  # reap finished children
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


if __name__ == "__main__":  # forkserver.py SOCKET OWNER_PID
    serve(sys.argv[1], int(sys.argv[2]))

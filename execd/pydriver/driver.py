# AstraBox code-context driver: a persistent Python interpreter that runs
# notebook-style cells for execd. The protocol is described in pydriver.go.
#
# fd 0 is /dev/null, fds 1 and 2 are pipes execd reads as the cell's output
# (subprocesses write there too), fd 3 carries requests (one JSON object per
# line) and fd 4 carries control messages back (one JSON object per line).
# This file runs in its own namespace; the cells run in a fresh __main__.

import ast
import builtins
import json
import linecache
import os
import signal
import sys
import traceback
import types

CONTROL_FD = 4
DRIVER_FILES = ("<astrabox-driver>", "<string>")
MAX_TEXT = 4 << 20


def send(msg):
    data = (json.dumps(msg) + "\n").encode("utf-8", "backslashreplace")
    while data:
        n = os.write(CONTROL_FD, data)
        data = data[n:]


def clip(text):
    if len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + "... [truncated]"
    return text


def describe(exc):
    """Turns an exception into an error message, without driver frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in DRIVER_FILES:
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        value = str(exc)
    except BaseException:  # a broken __str__
        text, value = type(exc).__name__, ""
    return {
        "type": "error",
        "ename": type(exc).__name__,
        "evalue": clip(value),
        "traceback": clip(text).rstrip("\n").split("\n"),
    }


def represent(value):
    data = {"text/plain": clip(repr(value))}
    html = getattr(type(value), "_repr_html_", None)
    if callable(html):
        try:
            h = html(value)
            if isinstance(h, str):
                data["text/html"] = clip(h)
        except Exception:
            pass
    return data


def execute(code, name, ns):
    """Runs a cell; returns (True, value) when it ends with an expression."""
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), ns)
    if last is None:
        return False, None
    return True, eval(compile(last, name, "eval"), ns)


def flush_streams():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            s.flush()
        except BaseException:
            pass


def run(req, n, ns):
    err = None
    has, value = False, None
    try:
        try:
            # SIGINT (an interrupt from execd) raises KeyboardInterrupt
            # only while the cell runs; execd sends it after "started".
            signal.signal(signal.SIGINT, signal.default_int_handler)
            send({"type": "started", "n": n})
            has, value = execute(req["code"], "<cell-%d>" % n, ns)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except BaseException as e:
        err = e
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if err is None and has and value is not None:
        try:
            ns["_"] = value
            send({"type": "result", "data": represent(value)})
        except BaseException as e:
            err = e
    finish(req, err)


def finish(req, err):
    """Reports err, if any, marks the end of the output and says done."""
    if err is not None:
        send(describe(err))
    flush_streams()
    marker = req["marker"].encode("utf-8") + b"\n"
    marked = []
    for fd in (1, 2):
        try:
            # A cell may have pointed the fd elsewhere (os.dup2): then
            # execd would wait for a marker in vain.
            if identity(fd) != OUTPUTS[fd]:
                continue
            os.write(fd, marker)
            marked.append(fd)
        except OSError:
            pass
    send({"type": "done", "marked": marked})


def identity(fd):
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


OUTPUTS = {}


def main(requests):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in (3, CONTROL_FD):
        os.set_inheritable(fd, False)
    for fd in (1, 2):
        OUTPUTS[fd] = identity(fd)
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    sys.argv = [""]
    ns = main_mod.__dict__
    send({"type": "ready", "python": sys.version.split()[0]})
    n = 0
    while True:
        line = requests.readline()
        if not line:
            return
        n += 1
        req = json.loads(line)
        try:
            run(req, n, ns)
        except KeyboardInterrupt as e:
            # A second interrupt that hit the driver itself, before it
            # ignored SIGINT again: nothing was reported yet.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            finish(req, e)


main(REQUESTS)  # noqa: F821 (given by the bootstrap)

"""The grading worker: runs a student's exercise cells inside the sandbox, and nothing else.

This file is copied into the sandbox's job folder together with ``grading/codec.py`` (as ``course_codec.py``)
and run there as a plain script: it imports nothing of the course package, which is not on the
sandbox's file system. It reads one command per line (JSON) on standard input and answers each on
the file descriptor named by its first argument; what the student's code prints goes to standard output and error, which the grader
drains and caps. Commands, all sent by the grader:

    {"op": "exec", "source": ..., "label": ..., "timeout": s}    run code in the notebook namespace
        (+ "forbidden": [...]: under the watch, which the answer reports)
    {"op": "given", "id": ..., "source": ..., "name": ...}       define a class that cases use as input
    {"op": "call", "exercise": ..., "name": ..., "kind": ..., "cases": [...], "timeout": s,
     "forbidden": [...]}                                         call the student's object on the cases

Nothing here is trusted by the grader: the answers are plain data that the grader decodes strictly and
compares in its own process, with expected values that never enter this process.
"""

import builtins
import contextlib
import json
import os
import signal
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # course_codec, beside this file

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import course_codec as codec

_FD = int(sys.argv[1])
_CHANNEL = os.fdopen(os.dup(_FD), "w", encoding="utf-8")
os.close(_FD)
_COMMANDS = sys.stdin.buffer
sys.stdin = open(os.devnull, encoding="utf-8")  # the student's code reads nothing of the protocol


class TimeLimit(BaseException):
    """Raised in the main thread when a cell or a call runs past its time limit."""


def _on_alarm(signum, frame):
    raise TimeLimit()


signal.signal(signal.SIGALRM, _on_alarm)


# IPython's display, which notebooks call without importing it: here it prints what it is given. Defined in a scope
# of its own, whose only names are print and repr, so that nothing of this module is reachable from it (a function
# defined here would carry this module's globals, and with them the answer channel, into the student's namespace).
_DISPLAY = "def display(*objects, **options):\n    for obj in objects:\n        print(repr(obj))\n"
_display_scope: dict = {"__builtins__": {"print": print, "repr": repr}}
exec(compile(_DISPLAY, "<display>", "exec"), _display_scope)

namespace = {"__name__": "__main__", "__builtins__": builtins, "display": _display_scope["display"]}
given_classes: dict = {}


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _line(exc: BaseException, filename: str) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return frames[-1].lineno if frames else None


def _norm(name: str) -> str:
    return name.lower().lstrip("_")


class _Watch:
    """Records the forbidden PyTorch built-ins that are called, at the Python level and at the operator level."""

    def __init__(self, forbidden) -> None:
        self.ops = {_norm(f) for f in forbidden}
        self.seen: list[str] = []
        # What has been judged already: a training loop calls the same few functions and operators thousands of
        # times, and judging each of those calls by its name again added to every one of them.
        self.judged: set = set()

    def _first_time(self, func) -> bool:
        try:
            if func in self.judged:
                return False
            self.judged.add(func)
        except TypeError:  # an unhashable callable: judged at every call
            pass
        return True

    def function(self, func) -> None:
        if not self._first_time(func):
            return
        # the name and its family: _scaled_dot_product_attention_math is scaled_dot_product_attention's
        name = getattr(func, "__name__", "")
        plain = _norm(name)
        if any(plain == f or plain.startswith(f + "_") for f in self.ops) and name not in self.seen:
            self.seen.append(name)

    def op(self, func) -> None:
        if not self._first_time(func):
            return
        schema = getattr(func, "_schema", None)
        name = schema.name.split("::")[-1] if schema is not None else getattr(func, "__name__", "")
        base = _norm(name.split(".")[0])
        for f in self.ops:
            if base.startswith(f) or ("scaled_dot_product" in f and "scaled_dot_product" in base):
                label = f"torch.ops.aten.{name.split('.')[0]}"
                if label not in self.seen:
                    self.seen.append(label)


class _FunctionMode(TorchFunctionMode):
    def __init__(self, watch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.watch.function(func)
        return func(*args, **(kwargs or {}))


class _DispatchMode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch otherwise wraps __torch_dispatch__ in torch._dynamo.disable: importing torch._dynamo added about
        # 2 s to the worker's start, and the wrapper a cost to every operation. Graded code cannot reach
        # torch.compile (closed_world), so there is nothing for dynamo to trace here.
        return False

    def __init__(self, watch):
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.watch.op(func)
        return func(*args, **(kwargs or {}))


def _decode_input(value):
    """Case inputs: the codec's values, plus {"__given__": id, "init": ..., "state": ...} for a given module."""
    if isinstance(value, dict) and "__given__" in value:
        cls = given_classes[value["__given__"]]
        module = cls(*codec.decode(value["init"])).double()
        module.load_state_dict(codec.decode(value["state"]))
        return module.eval()
    if isinstance(value, dict) and "__seq__" in value and isinstance(value.get("items"), list):
        items = [_decode_input(v) for v in value["items"]]
        return tuple(items) if value["__seq__"] == "tuple" else items
    return codec.decode(value)


def _run_case(kind: str, name: str, obj, case: dict, grad: bool = False):
    """(what obj returns on the case, the places of the inputs it changed in place: positions and keywords)."""
    args, kwargs = _decode_input(case["args"]), _decode_input(case["kwargs"])
    before = codec.snapshot((args, kwargs))
    value = _call_case(kind, name, obj, case, args, kwargs, grad)
    return value, codec.changed_inputs(before, args, kwargs)


def _call_case(kind: str, name: str, obj, case: dict, args, kwargs, grad: bool):
    if kind == "module":
        if not isinstance(obj, type):
            raise TypeError(f"{name} should be a class (an nn.Module), got {type(obj).__name__}")
        module = obj(**_decode_input(case["init"] or {"__dict__": {}}))
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{name} should be a subclass of torch.nn.Module")
        module = module.double()
        if case["state"] is not None:
            module.load_state_dict(_decode_input(case["state"]))
        module.eval()
        with torch.no_grad():
            return module(*args, **kwargs)
    if not callable(obj):
        raise TypeError(f"{name} should be a function, got {type(obj).__name__}")
    with torch.set_grad_enabled(grad):  # an experiment may measure gradients or train; a function may not need to
        return obj(*args, **kwargs)


def _exec(command: dict) -> dict:
    """Run code in the namespace; with "forbidden", under the watch from its first line (the witness's run of a
    cell, ``host/witness.py``), and the answer says what it saw."""
    watch = _Watch(command.get("forbidden", ()))
    answer = _run_code(command, watch)
    return {**answer, "forbidden": watch.seen} if watch.seen else answer


def _run_code(command: dict, watch: "_Watch") -> dict:
    filename = f"<{command.get('label', 'cell')}>"
    try:
        code = compile(command["source"], filename, "exec")
    except SyntaxError as exc:
        return {"error": f"SyntaxError: {exc.msg} (line {exc.lineno})"}
    signal.setitimer(signal.ITIMER_REAL, float(command.get("timeout", 60)))
    try:
        with _watching(watch):
            exec(code, namespace)
    except TimeLimit:
        return {"error": "the cell ran past the time limit and was stopped", "timeout": True}
    except BaseException as exc:  # noqa: BLE001 - student code may raise anything, SystemExit included
        line = _line(exc, filename)
        return {"error": _describe(exc) + (f" (line {line} of your cell)" if line else "")}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"ok": True}


def _given(command: dict) -> dict:
    scope = {"__name__": "__given__", "__builtins__": builtins}
    exec(compile(command["source"], f"<given {command['id']}>", "exec"), scope)
    given_classes[command["id"]] = scope[command["name"]]
    return {"ok": True}


@contextlib.contextmanager
def _watching(watch: _Watch):
    if not watch.ops:
        yield
        return
    with _FunctionMode(watch), _DispatchMode(watch):
        yield


def _call(command: dict) -> dict:
    name, kind = command["name"], command["kind"]
    if name not in namespace:
        return {"error": f"the exercise cell does not define `{name}`"}
    obj = namespace[name]
    watch = _Watch(command.get("forbidden", ()))
    results = []
    signal.setitimer(signal.ITIMER_REAL, float(command.get("timeout", 60)))
    try:
        for case in command["cases"]:
            try:
                # The watches only where built-ins are forbidden: they intercept every operation (a training under
                # them, as in 8.6, takes about twice as long).
                with _watching(watch):
                    value, changed = _run_case(kind, name, obj, case, bool(command.get("grad")))
                results.append({"value": codec.encode(value, strict=True), **({"changed": changed} if changed else {})})
            except NotImplementedError:
                results.append({"error": "not attempted (NotImplementedError)", "not_attempted": True})
            except TimeLimit:
                results.append({"error": "it ran past the time limit and was stopped", "timeout": True})
                break
            except codec.CodecError as exc:
                results.append({"error": f"the result cannot be graded: {exc}"})
            except BaseException as exc:  # noqa: BLE001
                results.append({"error": f"your code raised {_describe(exc)}"})
    except TimeLimit:
        results.append({"error": "it ran past the time limit and was stopped", "timeout": True})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"results": results, "forbidden": watch.seen}


def _warm_up() -> None:
    """Enter both watches once, so that PyTorch's lazy imports count against start-up, not a student's call."""
    watch = _Watch(())
    with torch.no_grad(), _FunctionMode(watch), _DispatchMode(watch):
        (torch.ones(2, 2, dtype=torch.float64) @ torch.ones(2, 2, dtype=torch.float64)).softmax(-1)


def main() -> None:
    handlers = {"exec": _exec, "given": _given, "call": _call}
    _warm_up()
    _CHANNEL.write(json.dumps({"ready": True}) + "\n")
    _CHANNEL.flush()
    for line in _COMMANDS:
        command = json.loads(line)
        if command.get("op") == "quit":
            break
        try:
            answer = handlers[command["op"]](command)
        except TimeLimit:
            answer = {"error": "the time limit ran out", "timeout": True}
        except BaseException as exc:  # noqa: BLE001 - a broken namespace must still answer
            answer = {"error": f"the grading worker failed: {_describe(exc)}"}
        try:
            text = json.dumps(answer)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"error": f"the answer could not be sent: {exc}"})
        _CHANNEL.write(text + "\n")
        _CHANNEL.flush()
    os._exit(0)  # no clean-up code of the student's (atexit, finalisers) runs after the last answer


if __name__ == "__main__":
    main()

"""Running a model's own code fenced, so that only its model comes back.

An import runs code tmsim did not write: a model file's module as it is imported, a builder,
the forward pass under the tracer. :func:`fenced` runs it so that:

- what it writes to ``sys.stdout`` and ``sys.stderr`` (prints, warnings shown, records of log
  handlers that write to either) is dropped: tmsim's own output (``--json``) stays a clean
  document and an error stays one line;
- Python warnings are ignored, and PyTorch's fake-tensor logger, which logs the traceback of
  every op that fails on fake tensors before the tracer raises its one-line reason, is off;
- a :class:`SystemExit` (``sys.exit``, ``exit()``) or another :class:`BaseException` that is
  no :class:`Exception` becomes a :class:`TorchImportError` naming what ran: an import never
  ends the process silently. :class:`KeyboardInterrupt` passes (Ctrl-C interrupts, as
  everywhere in tmsim), and so does any :class:`Exception`, which the caller words as its own
  one-line reason.

Everything is restored on the way out, on error too. The streams, the warning filters and the
logger are the process's: code fenced in one thread also silences other threads meanwhile.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator

from tmsim.errors import one_line
from tmsim.workload.torchimport.errors import TorchImportError

#: The logger PyTorch's fake tensors log a failing op's traceback to.
FAKE_TENSOR_LOGGER = "torch._subclasses.fake_tensor"


class _Discard(io.TextIOBase):
    """A text stream that takes everything and keeps nothing (UTF-8, as code that asks for
    ``sys.stdout.encoding`` expects one)."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        return len(text)

    def writable(self) -> bool:
        return True


@contextlib.contextmanager
def fenced(what: str) -> Iterator[None]:
    """Run the body as a model's own code (module documentation); ``what`` starts the
    message of the :class:`TorchImportError` an exit becomes (``"model 'm.py:build'"``)."""
    logger = logging.getLogger(FAKE_TENSOR_LOGGER)
    was_disabled = logger.disabled
    sink = _Discard()
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            warnings.simplefilter("ignore")
            logger.disabled = True
            yield
    except (Exception, KeyboardInterrupt):
        raise
    except SystemExit as exc:
        raise TorchImportError(
            one_line(f"{what}: the model's code exited (sys.exit({exc.code!r}))")
        ) from None
    except BaseException as exc:
        text = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
        raise TorchImportError(one_line(f"{what}: the model's code raised {reason}")) from None
    finally:
        logger.disabled = was_disabled

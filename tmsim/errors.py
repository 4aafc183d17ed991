"""Exceptions tmsim raises for bad input.

Every error a user can cause derives from :class:`TmsimError`; the CLI turns these into a
one-line message and a non-zero exit, never a traceback.
"""


class TmsimError(Exception):
    """Base class of every error caused by bad input to tmsim."""


class GraphError(TmsimError, ValueError):
    """A graph is malformed; the message names the kernel or tensor at fault."""


class GraphFileError(TmsimError, ValueError):
    """A graph file cannot be read; the message names the file and the field or tensor."""


class NoPlanError(TmsimError):
    """A planner found no plan within the fast-memory limit; the message names the kernel."""


class InfeasibleError(NoPlanError):
    """No plan can exist: the message names the kernel and the bytes of fast memory missing."""


class PlanError(TmsimError, ValueError):
    """A plan breaks the rules of :mod:`tmsim.plans.values`; the message names what is at fault."""


#: What :func:`one_line` escapes: every character ``str.splitlines`` breaks a line at.
_LINE_BREAKS = {
    ord(c): c.encode("unicode_escape").decode("ascii")
    for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
}


def shown_path(name: str) -> str:
    r"""A file name as one-line messages show it: its line breaks escaped (:func:`one_line`),
    and quoted (``repr``) when it is empty or starts or ends with white space, which would
    otherwise not be seen.

    >>> print(shown_path("g.json"), shown_path("g.json "), shown_path("a\nb"))
    g.json 'g.json ' a\nb
    """
    return one_line(name) if name and name == name.strip() else repr(name)


def one_line(text: str) -> str:
    """``text`` with every line break written as its escape (``\\n``, ``\\x85`` ...), so it
    prints as one line."""
    return text.translate(_LINE_BREAKS)

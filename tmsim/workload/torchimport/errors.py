"""The error of the PyTorch importer (torch-free, so the package can raise it without torch)."""

from tmsim.errors import TmsimError


class TorchImportError(TmsimError, ValueError):
    """A model cannot be imported: torch is missing, an argument is bad, or PyTorch could not
    trace the model's training step; the message is one line and names what is at fault."""

"""Load a policy model (TorchScript ``.pt`` or ``torch.export`` ``.pt2``) and check it.

Checks, in order: the file exists, its sha256 equals the card's, it deserialises, and one
dry inference on a zero observation of the card's size returns the card's action size.
Inference runs on the calling thread alone, in ``torch.inference_mode``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from simops_core.command_line import ConfigError
from simops_core.policy_card import PolicyCard, file_sha256
from simops_core.torch_threads import run_torch_ops_on_this_thread

FORMATS = {'.pt': 'TorchScript', '.pt2': 'torch.export'}


class PolicyModelError(ConfigError):
    """The model file is missing, corrupt, or disagrees with its policy card."""

    hint = 're-export the model or fix its card'


class PolicyModel:
    """A loaded, checked policy: :meth:`infer` maps an observation to a raw action.

    The observation has shape (card.observation_size,), float32; the action has shape
    (card.action.size,), float64, exactly as the model returned it (possibly non-finite).
    """

    def __init__(self, module: Callable[..., torch.Tensor], card: PolicyCard,
                 path: Path) -> None:
        self.card = card
        self.path = path
        self._module = module
        self._input = torch.zeros(1, card.observation_size)
        self._input_np = self._input.numpy()  # shares memory with the tensor
        self._images = [torch.zeros(1, 3, t.height, t.width) for t in card.images]
        self._images_np = [image.numpy() for image in self._images]

    def infer(self, observation: np.ndarray, images: Sequence[np.ndarray] = ()) -> np.ndarray:
        """One forward pass; raises PolicyModelError if the output has the wrong size.

        ``images``: one (3, height, width) float32 input per image term of the card (the
        observation builder's :class:`~simops_core.observation.ImageBuilder` inputs).
        """
        if len(images) != len(self._images):
            raise PolicyModelError(f'{self.path.name} takes {len(self._images)} images '
                             f'({", ".join(t.topic for t in self.card.images)}), given '
                             f'{len(images)}; image policies run in the policy node')
        run_torch_ops_on_this_thread()
        self._input_np[0] = observation
        for buffer, image in zip(self._images_np, images, strict=True):
            buffer[0] = image
        with torch.inference_mode():
            output = self._module(self._input, *self._images)
        if not isinstance(output, torch.Tensor) or output.numel() != self.card.action.size:
            shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output)
            raise PolicyModelError(f'{self.path.name} returned {shape}, the card describes '
                             f'{self.card.action.size} action values {self.card.action.fields}')
        return output.detach().reshape(-1).numpy().astype(np.float64)


def load_policy(path: Path, card: PolicyCard) -> PolicyModel:
    """Load ``path``, verify it against ``card`` and dry-run it; raise :class:`PolicyModelError`."""
    if path.suffix not in FORMATS:
        raise PolicyModelError(f'model {path} must be a TorchScript .pt or a torch.export '
                               '.pt2 file')
    if not path.is_file():
        raise PolicyModelError(f'model {path} does not exist')
    digest = file_sha256(path)
    if digest != card.sha256:
        raise PolicyModelError(f'model {path.name} has sha256 {digest}, its card '
                               f'{card.source.name} says {card.sha256}')
    try:
        with _quiet_torch():
            if path.suffix == '.pt':
                module = torch.jit.load(str(path), map_location='cpu')
                module.eval()
            else:
                module = torch.export.load(str(path)).module()
    except Exception as exc:  # torch raises many types for a corrupt archive
        raise PolicyModelError(f'cannot load {FORMATS[path.suffix]} model {path}: '
                         f'{_first_line(exc)}') from None
    model = PolicyModel(module, card, path)
    images = [np.zeros((3, t.height, t.width), dtype=np.float32) for t in card.images]
    try:
        model.infer(np.zeros(card.observation_size, dtype=np.float32), images)
    except PolicyModelError:
        raise
    except Exception as exc:  # any failure of the dry run is a mismatch
        shapes = ''.join(f' and a (1, 3, {t.height}, {t.width}) image' for t in card.images)
        raise PolicyModelError(f'dry inference of {path.name} on a ({card.observation_size},) '
                         f'observation (the card\'s {card.history} x {card.frame_size} values)'
                         f'{shapes} failed: {_first_line(exc)}') from None
    return model


def _first_line(exc: BaseException) -> str:
    """The line that says what went wrong (TorchScript puts it last, after its traceback)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if 'Error: ' in line]
    return errors[-1] if errors else lines[0] if lines else type(exc).__name__


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """torch.export logs tracebacks at WARNING while loading a bad file; we report one line."""
    logger = logging.getLogger('torch')
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)

"""Feature networks for the metrics: looked up by name or dataset, loaded, and run once per image set.

Inception weights cannot be downloaded offline, so each dataset has a network of genzoo's own,
registered by a plugin through ``register_feature_extractors`` (``features-mnist``, ...);
``inception`` (torchmetrics' FID Inception) works where its weights can be fetched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import GenzooError
from ..plugins import get_host
from ..progress import progress_bar


@dataclass
class FeatureSpace:
    """A loaded feature network and what identifies it in reports."""

    name: str
    module: nn.Module
    sha256: str | None

    @property
    def num_features(self) -> int:
        return int(self.module.num_features)

    def can_classify(self) -> bool:
        return hasattr(self.module, "classify")


def feature_space(name: str | None = None, *, dataset: str | None = None, device: torch.device | str = "cpu") -> FeatureSpace:
    """The feature network called ``name``, or the one registered for ``dataset``."""
    if name == "inception":
        return _inception(device)
    host = get_host()
    record = host.feature_extractor(name, dataset=dataset)
    module = record.factory().to(device).eval().requires_grad_(False)
    if not isinstance(getattr(module, "num_features", None), int):
        raise GenzooError(f"feature network {record.name!r} must have an integer num_features attribute")
    sha = None
    model_entry = host.all_models().get(record.name)
    if model_entry is not None:
        sha = model_entry.files.get("model.safetensors")
    return FeatureSpace(record.name, module, sha)


def _inception(device) -> FeatureSpace:
    try:
        from torchmetrics.image.fid import NoTrainInceptionV3

        net = NoTrainInceptionV3(name="inception-v3-compat", features_list=["2048"])
    except ModuleNotFoundError:
        raise GenzooError("--features inception needs torch-fidelity: pip install torch-fidelity") from None
    except Exception as exc:
        raise GenzooError(
            f"--features inception could not load the Inception weights ({str(exc).splitlines()[0][:100]}); "
            f"they are downloaded on first use, so run once online or use genzoo's own features"
        ) from None

    class Inception(nn.Module):
        num_features = 2048

        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
            return self.net(torch.round(x.clamp(0, 1) * 255).to(torch.uint8)).reshape(x.shape[0], -1)

    return FeatureSpace("inception", Inception().to(device).eval(), None)


@torch.no_grad()
def extract(space: FeatureSpace, images: torch.Tensor, *, batch_size: int = 500, progress: bool = False,
            desc: str = "features") -> tuple[torch.Tensor, torch.Tensor | None]:
    """Features (N, D) and, if the network classifies, class probabilities (N, C), on the CPU."""
    device = next(space.module.parameters(), torch.empty(0)).device
    feats, probs = [], []
    for start in progress_bar(range(0, len(images), batch_size), progress, desc=desc, unit="batch", leave=False):
        batch = images[start:start + batch_size].to(device).float()
        f = space.module(batch)
        feats.append(f.float().cpu())
        if space.can_classify():
            probs.append(torch.softmax(space.module.classify(batch).float(), 1).cpu())
    return torch.cat(feats), (torch.cat(probs) if probs else None)

"""Building blocks methods share, built-in plugins and outside ones alike: plain PyTorch, no training loop.

- ``unet``: a small U-Net F(x, c_noise) with group norm and a sinusoidal noise-level embedding (``UNet``)
- ``karras``: Karras et al.'s noise levels and EDM preconditioning (``karras_sigmas``, ``edm_scalings``, ``c_noise``)
- ``denoiser``: the Config fields and checks of a U-Net denoiser on those levels (``DenoiserConfig``) and
  D(x, sigma) at one level for a batch, labels bound in (``LevelDenoiser``)
- ``sampling``: samplers as functions of a denoiser, a start and the levels (``heun`` with EDM's ``Churn``), and
  guidance that mixes two denoisers (``guided``: autoguidance, classifier-free guidance)
- ``dcgan``: DCGAN-like encoders and decoders for 28, 32 and 64 pixel images (IGN's f, the GAN's two networks),
  and DCGAN's initialisation
- ``fastconv``: exact matrix-product (and sub-pixel) forms of convolutions that oneDNN runs slowly,
  swapped in by one call (``speed_up``)
- ``batchnorm``: batch norm with population statistics per input source, and recomputing any network's
  batch-norm statistics on the inputs sampling feeds it (``SourceBatchNorm2d``, ``calibrate``)
- ``pixels``: images between genzoo's [0, 1] and the networks' [-1, 1] (``to_signed``, ``to_unit``)
"""

from .batchnorm import SourceBatchNorm2d, calibrate
from .denoiser import DenoiserConfig, LevelDenoiser
from .fastconv import speed_up
from .karras import c_noise, edm_scalings, karras_sigmas
from .pixels import to_signed, to_unit
from .sampling import Churn, Denoiser, guided, heun
from .unet import NO_LABEL, UNet, check_shape

__all__ = ["NO_LABEL", "Churn", "Denoiser", "DenoiserConfig", "LevelDenoiser", "SourceBatchNorm2d", "UNet", "c_noise",
           "calibrate", "check_shape", "edm_scalings", "guided", "heun", "karras_sigmas", "speed_up", "to_signed",
           "to_unit"]

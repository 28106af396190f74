"""The Method contract: what every generative method in the zoo declares and implements.

A method is an ``nn.Module``. Subclasses declare class attributes (``name``, ``summary``,
``Config``, ``capabilities``, ...) and implement the per-batch hooks; :mod:`genzoo.inference` runs them
(options checked once, labels, batching, seeding, precision, progress) for every method alike.

Images cross every public boundary as float NCHW in [0, 1].
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Sequence, TypeVar

import torch
from torch import nn

from . import inputs
from .configs import build_config
from .declaration import VERBS, check_declaration
from .errors import GenzooError, UnsupportedVerb
from .progress import progress_bar
from .seeding import Noise

# The defaults of every verb that runs a model on images (sample, refine, eval); their options
# dataclasses and the keywords below read them from here.
BATCH_SIZE = 256  # images per forward pass (a sample does not depend on it)
INFERENCE_PRECISION = "fp32"  # the same images on every machine, up to float rounding

T = TypeVar("T")


class Method(nn.Module):
    """Base class of every genzoo method.

    Subclasses set:
      name, summary         the method's registry name and a one-line description
      Config                a dataclass holding every hyperparameter; config.json is exactly this
      capabilities          a subset of {"fit", "sample", "refine"}
      default_model         the registry model that ``genzoo sample <name>`` loads (or None)
      paper                 BibTeX of the paper the method implements
      needs_data            False for methods that train without a dataset
      sample_options        {keyword: type} extra keyword arguments of sample (CLI ``--opt``); a type may carry
                            a range, ``Annotated[float, Positive]`` (:mod:`genzoo.configs`), checked on every call
      refine_options        the same for refine (CLI ``--opt`` of refine, ``--refine-opt`` of sample and eval)

      ema_modules           submodules whose weights the EMA averages (None: all; e.g. ("generator",))
      sampling_modules      submodules sampling needs (None: all); export and push leave the others out (a
                            GAN's discriminator), and loading a model without them still works
      init_from             other methods whose models ``fit --init`` may start from (same network)
      unoptimized           prefixes of trainable parameter names that no optimiser updates on purpose
      update_period         steps within which ``update`` steps every optimiser at least once (e.g. 5 for a
                            critic stepped every step and a generator every 5th); the kit's window covers it
      fp32_training         why the method must train in fp32 ("" if it need not): ``--precision auto`` then
                            keeps fp32, and an explicit bf16 or fp16 is warned about with this reason
      compile_modules       submodules ``fit --compile`` compiles (None: every child module with parameters)
      preview_images        how many images a preview takes (fit's sample grids, push's samples.png): fewer for a
                            method whose sampling is slow (an autoregressive one)

    and implement the hooks for their capabilities:
      sample_batch(noise, labels, **options)             -> images in [0, 1]
      refine_batch(x, labels, noise, steps, **options)   -> images in [0, 1]
      training_step(batch) -> {"loss": tensor, ...}, or update(step) -> {name: scalar}  (fit; one of the two)
      configure_optimizers(total_steps); setup_fit(data)

    ``sample_batch`` and ``refine_batch`` run in eval mode under ``torch.no_grad()``, with options that
    :meth:`check_options` has passed; a hook that
    needs input gradients (a refiner) opens ``torch.enable_grad()`` itself. ``forward`` is free for
    the method's own use: the training loop calls ``training_step`` through a wrapper. A hook that
    loops over many steps (a diffusion sampler, an iterative refiner) wraps the loop in
    :meth:`track`, so that ``genzoo sample``/``refine``/``eval`` show how far each batch has got.

    A Config may define ``channels``, ``image_size`` and ``num_classes`` (0 = unconditional);
    optional training fields read by the shared loop: ``ema_decay`` and ``grad_clip``.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Config: ClassVar[type] = type(None)
    capabilities: ClassVar[frozenset[str]] = frozenset()
    default_model: ClassVar[str | None] = None
    paper: ClassVar[str] = ""
    needs_data: ClassVar[bool] = True
    sample_options: ClassVar[dict[str, type]] = {}
    refine_options: ClassVar[dict[str, type]] = {}
    ema_modules: ClassVar[tuple[str, ...] | None] = None
    sampling_modules: ClassVar[tuple[str, ...] | None] = None
    init_from: ClassVar[tuple[str, ...]] = ()
    unoptimized: ClassVar[tuple[str, ...]] = ()
    update_period: ClassVar[int] = 1
    fp32_training: ClassVar[str] = ""
    compile_modules: ClassVar[tuple[str, ...] | None] = None
    preview_images: ClassVar[int] = 64
    plugin_name: ClassVar[str] = ""  # the distribution that registered it; set by the plugin host
    fit_steps: int | None = None  # deprecated: set for a configure_optimizers() that takes no total_steps
    _steps_shown: bool = False  # whether track() shows a bar: set while sample/refine run with progress

    def __init__(self, config: Any = None):
        super().__init__()
        if config is None:
            config = self.Config()
        elif isinstance(config, dict):
            config = build_config(self.Config, config, where=f"{self.name} config")
        elif not isinstance(config, self.Config):
            raise GenzooError(f"{self.name} expects a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config

    # -- declaration ---------------------------------------------------------------------------

    @classmethod
    def check_declaration(cls) -> None:
        """Raise if the subclass's declaration is incomplete (called when a plugin registers it)."""
        check_declaration(cls, Method)

    @classmethod
    def training_only(cls, keys: Any) -> set[str]:
        """The state-dict keys among ``keys`` under submodules that sampling does not need (``sampling_modules``)."""
        if cls.sampling_modules is None:
            return set()
        return {key for key in keys if "." in key and key.split(".")[0] not in cls.sampling_modules}

    @classmethod
    def owns_update(cls) -> bool:
        """Whether the method makes its own optimisation step (``update``) instead of returning one loss."""
        return cls.update is not Method.update

    @classmethod
    def require(cls, verb: str) -> None:
        if verb not in cls.capabilities:
            supported = ", ".join(v for v in VERBS if v in cls.capabilities) or "none"
            raise UnsupportedVerb(f"method {cls.name!r} does not support {verb!r}; it supports: {supported}")

    @property
    def num_classes(self) -> int:
        return int(getattr(self.config, "num_classes", 0) or 0)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        c = getattr(self.config, "channels", None)
        s = getattr(self.config, "image_size", None)
        if c is None or s is None:
            raise GenzooError(f"method {self.name!r} has no image shape (its Config lacks channels/image_size)")
        return (int(c), int(s), int(s))

    @property
    def device(self) -> torch.device:
        for tensor in self.parameters():
            return tensor.device
        for tensor in self.buffers():
            return tensor.device
        return torch.device("cpu")

    # -- public verbs -------------------------------------------------------------------------

    def sample(
        self,
        n: int,
        *,
        labels: Sequence[int] | torch.Tensor | int | None = None,
        seed: int | None = None,
        start: int = 0,
        generator: torch.Generator | None = None,
        batch_size: int = BATCH_SIZE,
        device: torch.device | str | None = None,
        precision: str = INFERENCE_PRECISION,
        progress: bool = False,
        **options: Any,
    ) -> torch.Tensor:
        """``n`` images as float NCHW in [0, 1] on the CPU.

        Image i depends only on (seed, i): the first 16 of ``n=64, seed=0`` equal ``n=16, seed=0``,
        whatever ``batch_size`` or device. ``start`` skips ahead: ``sample(16, seed=0, start=48)``
        is the last 16 of ``sample(64, seed=0)``. Without a seed, one is drawn from ``generator``
        (or torch's global RNG). Conditional methods default to labels ``i mod num_classes``.
        ``precision`` is fp32, bf16, fp16 (GPUs) or auto (see :mod:`genzoo.precision`). ``progress``
        shows a bar of the batches (and of a many-step method's steps, :meth:`track`) on a terminal.
        """
        from . import inference

        return inference.sample(self, n, labels=labels, seed=seed, start=start, generator=generator,
                                batch_size=batch_size, device=device, precision=precision, progress=progress,
                                options=options)

    def refine(
        self,
        x: torch.Tensor,
        *,
        labels: Sequence[int] | torch.Tensor | int | None = None,
        steps: int | None = None,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        batch_size: int = BATCH_SIZE,
        device: torch.device | str | None = None,
        precision: str = INFERENCE_PRECISION,
        progress: bool = False,
        **options: Any,
    ) -> torch.Tensor:
        """Map images (float NCHW in [0, 1]) to refined images in [0, 1], on the CPU.

        ``steps`` is the method's notion of refinement effort (None = its default; 0 = identity
        for methods that iterate). Randomness, if any, is drawn per image as in :meth:`sample`.
        """
        from . import inference

        return inference.refine(self, x, labels=labels, steps=steps, seed=seed, generator=generator,
                                batch_size=batch_size, device=device, precision=precision, progress=progress,
                                options=options)

    # -- hooks for subclasses -----------------------------------------------------------------

    def sample_batch(self, noise: Noise, labels: torch.Tensor | None, **options: Any) -> torch.Tensor:
        raise NotImplementedError

    def refine_batch(
        self, x: torch.Tensor, labels: torch.Tensor | None, noise: Noise, steps: int | None, **options: Any
    ) -> torch.Tensor:
        raise NotImplementedError

    def training_step(self, batch: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor]:
        """One step's losses: ``{"loss": scalar to minimise, other scalars to log}``.

        ``batch["x"]`` is float NCHW in [0, 1] on the training device, ``batch["y"]`` the labels
        (or None), ``batch["size"]`` the batch size of this process, ``batch["step"]`` the index of
        the optimisation step (0-based) and ``batch["steps"]`` the run's total (for a curriculum that a
        method keeps itself: declare it in :meth:`follows_total_steps`); methods with ``needs_data =
        False`` get ``{"x": None, "y": None, "size": n, "step": t, "steps": T}``. Every scalar
        besides ``loss`` is logged.
        """
        raise NotImplementedError

    def update(self, step: Any) -> dict[str, torch.Tensor]:
        """One whole optimisation step, for a method that owns it (a GAN alternating two networks).

        ``step`` is a :class:`genzoo.TrainStep`: ``step.batches`` (this process's micro-batches, each like
        ``training_step``'s batch), ``step.index``, ``step.optimizers`` (as ``configure_optimizers``
        returned them), ``step.backward(loss)``, ``step.accumulate(loss_of)``, ``step.step(optimizer)``,
        ``step.zero_grad(...)`` and ``step.frozen(module)``. Returns the scalars to log, each named by what
        it measures (``loss_d``, ``loss_g``). Defining it replaces ``training_step``.
        """
        raise NotImplementedError

    def configure_optimizers(self, total_steps: int) -> Any:
        """The optimiser(s) for a run of ``total_steps`` (``--steps``), optionally with learning-rate scheduler(s):
        one optimiser, a list of them, or ``(optimizers, schedulers)``. Schedulers step once per optimisation step
        (see :func:`genzoo.schedules.warmup_cosine`). A method may leave out ``total_steps``; genzoo then sets
        ``self.fit_steps`` before calling it (deprecated)."""
        raise NotImplementedError(f"method {self.name!r} does not define configure_optimizers()")

    def follows_total_steps(self) -> str:
        """What of the method's training, besides its schedulers, is spread over the run's total ``--steps`` (e.g.
        "a curriculum"; "" for nothing): a ``--resume`` that changes ``--steps`` is then refused."""
        return ""

    def check_options(self, verb: str, options: dict[str, Any], steps: int | None = None) -> None:
        """Refuse, in one sentence (GenzooError), ``verb``'s options (typed and range-checked already) or refine's
        ``steps`` where they are wrong for this model: what a declared range cannot say, such as a level
        within the config's own bounds. Called once per request, before any image is made."""

    def setup_fit(self, data: Any) -> None:
        """Called once before training with the training data (None for data-free methods)."""

    def prepare_export(self) -> None:
        """Called before the training loop samples a grid or writes a model directory.

        For state that inference needs but training does not keep current (e.g. population
        statistics). It must not draw from the global RNG, so resumed runs stay exact.
        """

    def track(self, steps: Iterable[T] | int, desc: str = "steps") -> Iterable[T]:
        """The steps of one batch's work (an iterable, or a count), shown as a bar under the batch bar.

        A many-step sampler or refiner loops ``for t in self.track(range(num_steps), "denoising")``.
        While :meth:`sample` or :meth:`refine` runs with ``progress=True`` (``genzoo sample``,
        ``refine`` and ``eval`` unless ``--no-progress``) and stderr is a terminal, the bar shows how
        far the current batch has got; otherwise the steps come back unchanged.
        """
        iterable = range(steps) if isinstance(steps, int) else steps
        if not self._steps_shown:
            return iterable
        return progress_bar(iterable, True, desc=desc, unit="step", leave=False, position=1)

    # -- helpers ------------------------------------------------------------------------------

    def check_input_images(self, x: torch.Tensor) -> torch.Tensor:
        """Images for refine as float NCHW in [0, 1] of this method's shape (uint8 scaled), or one clear error."""
        return inputs.check_input_images(self, x)

    def labels_for(self, n: int, labels: Any, default: bool = True, first: int = 0) -> torch.Tensor | None:
        """The labels of ``n`` images (:func:`genzoo.inputs.labels_for`)."""
        return inputs.labels_for(self, n, labels, default=default, first=first)

    @property
    def class_names(self) -> tuple[str, ...]:
        """What each label means (the Config's ``class_names``, which fit takes from a dataset that names them)."""
        return tuple(getattr(self.config, "class_names", ()) or ())

    def label_indices(self, labels: Sequence[int | str]) -> list[int]:
        """Class names (and integers) as label indices; an unknown name is refused, naming the classes."""
        return inputs.label_indices(self, labels)

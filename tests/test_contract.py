"""The training contract v2: a method may own its update (tests/tinygan.py and the built-in gan), and the
kit's checks catch each way of getting it wrong, with the rule, the step and the parameter named."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import genzoo
from genzoo.errors import GenzooError
from genzoo.testing import (check_fit_resumes_exactly, check_method, check_optimizers_own_parameters,
                            check_several_processes, check_training_step, registered)
from genzoo.training.step import TrainStep
from tinygan import TinyGAN


@pytest.fixture
def digits_npz(tmp_path):
    rng = np.random.default_rng(0)
    x = (rng.random((32, 8, 8)) * 255).astype(np.uint8)
    path = tmp_path / "digits.npz"
    np.savez(path, x=x)
    return f"npz:{path}"


def _fit(method, out, dataset, steps, **kw):
    kw.setdefault("checkpoint_every", 2)
    return genzoo.fit(method, steps=steps, out=out, dataset=dataset, batch_size=8, sample_every=0, progress=False,
                      precision="fp32", **kw)


def test_the_tiny_gan_passes_every_check():
    check_method(TinyGAN)


def test_an_update_logs_what_each_loss_measures_and_the_ema_averages_the_generator_only(tmp_path, digits_npz):
    out = _fit(TinyGAN, tmp_path / "run", digits_npz, 4)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [sorted(line) for line in lines] == [["loss_d", "step"], ["loss_g", "step"]] * 2
    checkpoint = out / "checkpoints" / "step-00000004"
    raw, ema = load_file(str(checkpoint / "model.safetensors")), load_file(str(checkpoint / "ema.safetensors"))
    assert all(torch.equal(raw[k], ema[k]) for k in raw if k.startswith("discriminator."))
    assert not all(torch.equal(raw[k], ema[k]) for k in raw if k.startswith("generator."))
    with registered(TinyGAN):
        assert genzoo.load(out).sample(2, seed=0).shape == (2, 1, 8, 8)


def test_a_resume_whose_optimiser_count_differs_is_refused_in_one_sentence(tmp_path, digits_npz):
    _fit(TinyGAN, tmp_path / "run", digits_npz, 2)

    class OneOptimiser(TinyGAN):
        def configure_optimizers(self):
            return [torch.optim.Adam(self.parameters())]

    with pytest.raises(GenzooError, match="holds 2 optimiser\\(s\\), the method now configures 1"):
        _fit(OneOptimiser, tmp_path / "run", digits_npz, 4, resume=True)


def test_accumulated_micro_batches_give_the_gradient_of_their_whole_batch():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 1)
    x = torch.randn(16, 4)

    def loss_of(batch):
        return net(batch["x"]).square().mean()

    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    whole = TrainStep(net, 0, [{"x": x}], [optimizer])
    whole.accumulate(loss_of)
    expected = [p.grad.clone() for p in net.parameters()]
    net.zero_grad(set_to_none=True)
    halves = TrainStep(net, 0, [{"x": x[:8]}, {"x": x[8:]}], [optimizer])
    halves.accumulate(loss_of)
    assert all(torch.allclose(a, p.grad, atol=1e-7) for a, p in zip(expected, net.parameters()))


# -- the faults the kit catches ----------------------------------------------------------------


class ForgetsAnOptimiser(TinyGAN):
    """Broken on purpose: configure_optimizers never returns the discriminator's optimiser."""

    def configure_optimizers(self):
        return [torch.optim.Adam(self.generator[2].parameters()), torch.optim.Adam(self.generator[0].parameters())]


class BothOverEverything(TinyGAN):
    """Broken on purpose: both optimisers hold every parameter, so a generator step moves the discriminator."""

    def configure_optimizers(self):
        return [torch.optim.Adam(self.parameters()), torch.optim.Adam(self.parameters())]


class LeaksIntoTheDiscriminator(TinyGAN):
    """Broken on purpose: the generator's loss is computed without freezing the discriminator."""

    def update(self, step):
        d_opt, g_opt = step.optimizers
        if step.index % 2 == 0:
            loss = step.accumulate(self.discriminator_loss)
            step.step(d_opt)
            return {"loss_d": loss}
        loss = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_g": loss}


class CountsItsOwnCalls(TinyGAN):
    """Broken on purpose: alternates on a counter of its own, which restarts at 0 when a run resumes."""

    calls = 0

    def update(self, step):
        d_opt, g_opt = step.optimizers
        self.calls += 1
        if self.calls % 2:
            loss = step.accumulate(self.discriminator_loss)
            step.step(d_opt)
            return {"loss_d": loss}
        with step.frozen(self.discriminator):
            loss = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_g": loss}


class StepsNothing(TinyGAN):
    """Broken on purpose: computes its losses but steps no optimiser."""

    def update(self, step):
        return {"loss_d": step.accumulate(self.discriminator_loss)}


@pytest.mark.parametrize("broken, check, fragments", [
    (ForgetsAnOptimiser, check_optimizers_own_parameters,
     ["check_optimizers_own_parameters", "'discriminator.0.weight'", "in no optimiser"]),
    (BothOverEverything, check_optimizers_own_parameters,
     ["check_optimizers_own_parameters", "'generator.0.weight' belongs to optimisers [0, 1]"]),
    (LeaksIntoTheDiscriminator, check_training_step,
     ["check_training_step", "step 1", "'discriminator.0.weight'", "step.frozen"]),
    (CountsItsOwnCalls, check_fit_resumes_exactly, ["check_fit_resumes_exactly", "resumed at step 3 of 5"]),
    (StepsNothing, check_training_step, ["check_training_step", "step 0", "stepped no optimiser"]),
])
def test_each_fault_of_a_gan_fails_its_check_with_the_rule_step_and_parameter(broken, check, fragments):
    with pytest.raises(AssertionError) as info:
        check(broken, None)
    assert all(fragment in str(info.value) for fragment in fragments), str(info.value)


class AlternatesInOneLoss(genzoo.Method):
    """Broken on purpose, the way the contract's single loss forced it: a GAN in training_step that
    switches network on the step, so each step leaves one network without a gradient."""

    name = "alternates-in-one-loss"
    summary = "a GAN squeezed into training_step"
    Config = TinyGAN.Config
    capabilities = frozenset({"fit", "sample"})
    sample_batch = TinyGAN.sample_batch
    fake = TinyGAN.fake
    discriminator_loss = TinyGAN.discriminator_loss

    def __init__(self, config=None):
        super().__init__(config)
        d = self.config.image_size ** 2
        self.generator = torch.nn.Sequential(torch.nn.Linear(self.config.latent, d), torch.nn.Tanh())
        self.discriminator = torch.nn.Linear(d, 1)

    def training_step(self, batch):
        if batch["step"] % 2 == 0:
            return {"loss": self.discriminator_loss(batch)}
        logits = torch.func.functional_call(self.discriminator, {k: v.detach() for k, v in
                                                                 self.discriminator.named_parameters()},
                                            (self.fake(batch["size"]),))
        return {"loss": torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


@pytest.mark.slow
def test_several_processes_pass_for_an_update_and_for_a_single_loss_that_leaves_a_network_out():
    """One engine averages gradients for both contracts: a parameter no process graded stays None (Adam
    leaves it alone), so even a single loss that alternates networks trains the same on every process."""
    check_several_processes(TinyGAN, None)
    check_several_processes(AlternatesInOneLoss, None)


class CriticEveryStep(TinyGAN):
    """A WGAN-style schedule: the critic every step, the generator every 5th (n_critic = 5)."""

    update_period = 5

    def update(self, step):
        d_opt, g_opt = step.optimizers
        logged = {"loss_d": step.accumulate(self.discriminator_loss)}
        step.step(d_opt)
        if step.index % 5 == 4:
            with step.frozen(self.discriminator):
                logged["loss_g"] = step.accumulate(self.generator_loss)
            step.step(g_opt)
        return logged


class ForgetsItsPeriod(CriticEveryStep):
    update_period = 1


def test_a_method_that_steps_a_network_every_nth_step_declares_its_period_and_the_kit_covers_it():
    assert check_training_step(CriticEveryStep, None) is None
    with pytest.raises(AssertionError, match=r"optimiser 1 \(generator\.\*\) was never stepped in steps 0-3; .* "
                                             r"declares update_period"):
        check_training_step(ForgetsItsPeriod, None)


class CriticStepsTwice(TinyGAN):
    """Two critic steps in one update (step.step twice on one optimiser), then the generator."""

    def update(self, step):
        d_opt, g_opt = step.optimizers
        for _ in range(2):
            loss_d = step.accumulate(self.discriminator_loss)
            step.step(d_opt)
        with step.frozen(self.discriminator):
            loss_g = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_d": loss_d, "loss_g": loss_g}


@pytest.mark.parametrize("scaled", [False, True])
def test_an_optimiser_may_be_stepped_more_than_once_in_one_update(scaled):
    model = CriticStepsTwice()
    optimizers = model.configure_optimizers()
    scaler = torch.amp.GradScaler("cpu") if scaled else None
    step = TrainStep(model, 0, [{"x": torch.rand(4, 1, 8, 8), "y": None, "size": 4, "step": 0}], optimizers,
                     scaler=scaler)
    before = [p.detach().clone() for p in model.discriminator.parameters()]
    logged = step.finish(model.update(step))
    assert step.stepped == [0, 0, 1] and sorted(logged) == ["loss_d", "loss_g"]
    assert any(not torch.equal(a, p) for a, p in zip(before, model.discriminator.parameters()))


def test_a_step_gives_its_process_and_generators_drawn_from_seed_step_micro_batch_and_process():
    model = TinyGAN()
    batches = [{"x": None, "y": None, "size": 2, "step": 3}] * 2

    def step(process, index=3, seed=7):
        return TrainStep(model, index, batches, [], processes=2, process=process, seed=seed)

    def draw(generator):
        return torch.rand(4, generator=generator)

    assert (step(1).process, step(1).processes) == (1, 2)
    assert torch.equal(draw(step(0).generator(1)), draw(step(0).generator(1)))  # a function of its inputs alone
    others = [draw(step(0).generator(0)), draw(step(1).generator(1)), draw(step(0, index=4).generator(1)),
              draw(step(0, seed=8).generator(1)), draw(step(0).generator(1, stream="z"))]
    assert all(not torch.equal(draw(step(0).generator(1)), other) for other in others)
    assert torch.equal(draw(step(0).shared_generator(1)), draw(step(1).shared_generator(1)))


def test_accumulate_averages_the_extra_scalars_a_loss_function_returns_over_the_micro_batches():
    net = torch.nn.Linear(4, 1)
    x = torch.arange(32, dtype=torch.float32).view(8, 4)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)

    def losses(batch):
        return {"loss": net(batch["x"]).square().mean(), "mean_x": batch["x"].mean()}

    step = TrainStep(net, 0, [{"x": x[:4]}, {"x": x[4:]}], [optimizer])
    logged = step.accumulate(losses)
    assert sorted(logged) == ["loss", "mean_x"] and float(logged["mean_x"]) == pytest.approx(float(x.mean()))
    step.step(optimizer)
    assert sorted(step.finish({"critic": logged})) == ["critic.loss", "critic.mean_x"]
    with pytest.raises(GenzooError, match="without a 'loss' entry"):
        TrainStep(net, 0, [{"x": x}], [optimizer]).accumulate(lambda batch: {"mean_x": batch["x"].mean()})


def test_update_mistakes_are_refused_in_one_sentence():
    model = TinyGAN()
    d_opt, g_opt = model.configure_optimizers()
    step = TrainStep(model, 0, [{"x": torch.rand(2, 1, 8, 8), "y": None, "size": 2, "step": 0}], [d_opt, g_opt])
    with pytest.raises(GenzooError, match="none of its parameters received a gradient"):
        step.step(g_opt)
    with pytest.raises(GenzooError, match="not one of step.optimizers"):
        step.step(torch.optim.SGD(model.parameters(), lr=1.0))
    with pytest.raises(GenzooError, match="takes a scalar loss"):
        step.backward(torch.ones(3))
    step.stepped.append(0)
    with pytest.raises(GenzooError, match="must return a dict of scalars"):
        step.finish(1.0)


def _launch(args, env_extra=None, port=29541):
    import os
    import subprocess
    import sys

    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", **(env_extra or {})}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
              str(port), "-m", "genzoo"]
    return subprocess.run(launch + args, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_built_in_gan_trains_under_accelerate_launch_with_two_processes(tmp_path, digits_npz):
    """The exact command line a user runs on two CPU processes; both networks update in every step."""
    small = ["--set", "width=8", "--set", "bottleneck=4", "--set", "image_size=32"]
    np_path = tmp_path / "colour.npz"
    np.savez(np_path, x=(np.random.default_rng(1).random((16, 32, 32)) * 255).astype(np.uint8))
    args = ["fit", "gan", "--dataset", f"npz:{np_path}", "--steps", "3", "--batch-size", "4", "--precision", "fp32",
            "--checkpoint-every", "3", "--sample-every", "0", "--no-progress", "--out", str(tmp_path / "run"), *small]
    done = _launch(args)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "run" / "fit.json").read_text())
    assert record["processes"] == 2
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [sorted(line) for line in lines] == [["loss_d", "loss_g", "step"]] * 3


@pytest.mark.slow
def test_a_damaged_file_of_the_second_process_is_named_and_resume_falls_back(tmp_path, digits_npz):
    from conftest import make_distribution

    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "genzoo-tinygan", "tinygan", Path(__file__).parent / "tinygan.py", "tinygan")

    def fit(out, steps, *extra):
        return _launch(["fit", "tiny-gan", "--dataset", digits_npz, "--steps", str(steps), "--batch-size", "4",
                        "--precision", "fp32", "--checkpoint-every", "2", "--sample-every", "0", "--no-progress",
                        "--out", str(out), *extra], {"PYTHONPATH": str(site)})

    straight = fit(tmp_path / "straight", 6)
    assert straight.returncode == 0, straight.stderr[-3000:]
    first = fit(tmp_path / "run", 4)
    assert first.returncode == 0, first.stderr[-3000:]
    rng = tmp_path / "run" / "checkpoints" / "step-00000004" / "rng-rank1.safetensors"
    rng.write_bytes(rng.read_bytes()[:40])
    resumed = fit(tmp_path / "run", 6, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "checkpoint step-00000004: rng-rank1.safetensors has 40 bytes" in resumed.stderr
    a, b = (load_file(str(tmp_path / run / "model.safetensors")) for run in ("straight", "run"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_export_leaves_the_training_only_network_out_and_the_model_still_loads(tmp_path):
    from genzoo.testing import registered
    from genzoo.weights import WeightsError, load_model_dir, save_pretrained

    model = TinyGAN()
    with registered(TinyGAN):
        full = save_pretrained(model, tmp_path / "full")
        exported = genzoo.export(full, tmp_path / "exported")
        kept = load_file(str(exported / "model.safetensors"))
        assert kept and all(key.startswith("generator.") for key in kept)
        assert set(load_file(str(full / "model.safetensors"))) - set(kept) == {
            key for key in model.state_dict() if key.startswith("discriminator.")}
        loaded = load_model_dir(exported)
        assert torch.equal(loaded.sample(3, seed=1), model.sample(3, seed=1))
        assert torch.equal(load_model_dir(full).discriminator[0].weight, model.discriminator[0].weight)
        broken = dict(kept)
        broken.pop("generator.0.weight")
        from genzoo.tensorfile import write_tensors

        write_tensors(broken, exported / "model.safetensors")
        with pytest.raises(WeightsError, match="generator.0.weight"):
            load_model_dir(exported)

"""genzoo.blocks: the building blocks methods share (the U-Net denoisers' config, the DCGAN networks, the [-1, 1]
conversion, batch-norm calibration), and the optimiser fields of genzoo.configs, as the built-in plugins and an
outside one use them."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from genzoo.blocks import DenoiserConfig, batchnorm, calibrate, to_signed, to_unit
from genzoo.configs import OptimiserConfig, build_config, config_to_dict
from genzoo_consistency import ConsistencyConfig
from genzoo_edm import EDMConfig
from genzoo_gan.model import GAN, GANConfig
from genzoo_gan.networks import discriminator, generator
from genzoo_ign.model import IGNConfig
from genzoo_ign.network import build_network

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"


def test_to_signed_and_to_unit_convert_between_0_1_and_minus_1_1():
    x = torch.tensor([0.0, 0.25, 1.0])
    assert torch.equal(to_signed(x), torch.tensor([-1.0, -0.5, 1.0]))
    assert torch.equal(to_unit(to_signed(x)), x)
    assert torch.equal(to_unit(torch.tensor([-3.0, 0.0, 2.0]), clamp=True), torch.tensor([0.0, 0.5, 1.0]))
    assert torch.equal(to_unit(torch.tensor([-3.0])), torch.tensor([-1.0]))  # no clamp unless asked


def test_edm_and_consistency_share_their_common_config_fields_once_with_their_own_defaults():
    shared = {f.name for f in dataclasses.fields(DenoiserConfig)}
    assert {"channels", "width", "levels", "sigma_min", "sigma_max", "sigma_data", "rho", "refine_sigma", "lr",
            "ema_decay", "grad_clip"} <= shared
    for cls in (EDMConfig, ConsistencyConfig):
        assert issubclass(cls, DenoiserConfig)
        own = set(vars(cls)["__annotations__"])
        assert own & shared <= {"p_mean", "p_std", "lr", "width", "dropout", "label_dropout"}  # declared again only for another default
    assert (EDMConfig().p_mean, EDMConfig().p_std, EDMConfig().lr, EDMConfig().width) == (-1.2, 1.2, 1e-3, 64)
    assert (ConsistencyConfig().p_mean, ConsistencyConfig().p_std, ConsistencyConfig().lr) == (-1.1, 2.0, 1e-4)
    with pytest.raises(ValueError, match="refine_sigma must lie in"):
        ConsistencyConfig(refine_sigma=100.0)
    with pytest.raises(ValueError, match="divisible by 2"):
        EDMConfig(image_size=30)


def test_ign_the_gan_and_the_denoisers_inherit_the_optimiser_fields_once():
    optimiser = {f.name for f in dataclasses.fields(OptimiserConfig)}
    assert optimiser == {"beta1", "beta2", "ema_decay", "grad_clip"}
    for cls in (IGNConfig, GANConfig, DenoiserConfig):
        assert issubclass(cls, OptimiserConfig)
        assert set(vars(cls)["__annotations__"]) & optimiser <= {"beta1"}  # declared again only for another default
    assert (IGNConfig().beta1, GANConfig().beta1, DenoiserConfig().beta1, EDMConfig().beta1) == (0.5, 0.5, 0.9, 0.9)
    with pytest.raises(Exception, match="ema_decay"):
        build_config(IGNConfig, {"ema_decay": "1.5"})


def test_ign_and_the_gan_build_their_networks_from_the_same_dcgan_stages():
    """The GAN's generator is IGN's decoder and its discriminator IGN's encoder to one logit (genzoo.blocks.dcgan)."""
    f = build_network(3, 32, 100, 64, "group")
    g, d = generator(3, 32, 64, 100, "group"), discriminator(3, 32, 64, "group")
    assert {k: v.shape for k, v in g.state_dict().items()} == {k: v.shape for k, v in f[1].state_dict().items()}
    encoder = {k: v.shape for k, v in f[0].state_dict().items()}
    last = list(encoder)[-1].split(".")[0]  # the bottleneck conv: 100 channels in IGN, one logit in the GAN
    assert {k: v.shape for k, v in d.state_dict().items()} == {
        k: (1, *v[1:]) if k.startswith(f"{last}.") else v for k, v in encoder.items()}
    assert d(torch.zeros(2, 3, 32, 32)).shape == (2, 1)


@pytest.mark.parametrize("method", ["edm", "consistency"])
def test_every_bundled_config_reads_back_field_for_field(method):
    cls = {"edm": EDMConfig, "consistency": ConsistencyConfig}[method]
    files = sorted((PLUGINS / f"genzoo_{method}" / "weights").glob("*/config.json"))
    assert files
    for path in files:
        stored = json.loads(path.read_text())["config"]
        config = build_config(cls, stored, where=str(path), strict=True)
        written = json.loads(json.dumps(config_to_dict(config)))  # as config.json holds it (a tuple as a list)
        assert {k: v for k, v in written.items() if k in stored} == stored


@pytest.mark.parametrize("cls, method", [(EDMConfig, "edm"), (ConsistencyConfig, "consistency")])
def test_the_refine_level_is_checked_in_one_place(cls, method):
    config = cls(image_size=8, levels=2, width=8)
    assert config.refine_level(None, method) == config.refine_sigma and config.refine_level(2, method) == 2.0
    with pytest.raises(Exception, match=rf"^{method} refine: sigma must lie in \(sigma_min, sigma_max\] = "
                                        r"\(0.002, 80\], got 100$"):
        config.refine_level(100, method)


def _draw(count, generator):
    return torch.randn(count, 3, 1, 1, generator=generator)


def test_calibrate_gives_plain_batch_norms_the_population_statistics_of_their_inputs():
    torch.manual_seed(0)
    net = nn.Sequential(nn.ConvTranspose2d(3, 4, 2), nn.BatchNorm2d(4), nn.ReLU())
    tracked = net[1].num_batches_tracked.clone()
    rng = torch.random.get_rng_state()
    calibrate(net, _draw, count=96, batch=40)
    assert torch.equal(torch.random.get_rng_state(), rng) and net.training
    generator = torch.Generator().manual_seed(0)
    z = torch.cat([_draw(n, generator) for n in (40, 40, 16)])
    with torch.no_grad():
        inputs = net[0](z).double()
    assert torch.allclose(net[1].running_mean, inputs.mean((0, 2, 3)).float(), atol=1e-6)
    assert torch.allclose(net[1].running_var, inputs.var((0, 2, 3), unbiased=False).float(), atol=1e-6)
    assert torch.equal(net[1].num_batches_tracked, tracked)


def test_the_gan_exports_its_generator_with_the_shared_calibration(monkeypatch):
    calls = []
    monkeypatch.setattr("genzoo_gan.model.calibrate", lambda net, draw, **kw: calls.append((net, kw)))
    model = GAN({"width": 16, "bottleneck": 8})
    model.prepare_export()
    assert calls == [(model.generator, {"count": 4096})]


def test_source_batch_norm_keeps_noise_and_image_statistics_apart():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 3, 1), batchnorm.SourceBatchNorm2d(3), nn.Tanh())
    calibrate(net, lambda n, g: 5 + torch.randn(n, 3, 2, 2, generator=g), count=64, batch=32)
    layer = batchnorm.layers(net)[0]
    assert not torch.allclose(layer.noise_mean, layer.image_mean)
    net.eval()
    x = torch.randn(4, 3, 2, 2)
    with torch.no_grad(), batchnorm.source(net, "image"):
        as_image = net(x)
    assert layer.source == "noise" and not torch.allclose(net(x), as_image)


def test_a_unet_without_attention_keeps_its_tensors_and_one_with_it_starts_as_the_same_function():
    from genzoo.blocks import UNet

    torch.manual_seed(0)
    plain = UNet(1, 8, 2, 1, 0.0)
    attending = UNet(1, 8, 2, 1, 0.0, attention=True)
    assert not any("attention" in key for key in plain.state_dict())  # bundled weights load as before
    added = set(attending.state_dict()) - set(plain.state_dict())
    assert added and all("attention" in key for key in added)
    with torch.no_grad():
        nn.init.normal_(plain.out.weight)
    attending.load_state_dict(plain.state_dict(), strict=False)  # attention's output projections are still zero
    x, c = torch.randn(2, 1, 8, 8), torch.randn(2)
    assert torch.equal(plain(x, c), attending(x, c))


def test_self_attention_lets_every_pixel_see_every_other_in_one_block():
    from genzoo.blocks.unet import SelfAttention

    torch.manual_seed(0)
    attend = SelfAttention(128)
    assert attend.heads == 2
    with torch.no_grad():
        nn.init.normal_(attend.proj.weight)
        x = torch.randn(1, 128, 7, 7)
        moved = x.clone()
        moved[0, :, 0, 0] += 1.0
        assert (attend(moved) - attend(x))[0, :, 6, 6].abs().max() > 1e-4  # a 3x3 convolution would reach 1 pixel


def test_an_edm_model_with_attention_saves_and_loads_whole(tmp_path):
    import genzoo
    from genzoo_edm import EDM

    torch.manual_seed(0)
    model = EDM({"width": 8, "levels": 2, "image_size": 8, "attention": True}).eval()
    with torch.no_grad():
        for p in model.net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    genzoo.save_pretrained(model, tmp_path / "m")
    loaded = genzoo.load(str(tmp_path / "m"))
    assert loaded.config.attention
    assert torch.equal(model.sample(2, seed=0), loaded.sample(2, seed=0))

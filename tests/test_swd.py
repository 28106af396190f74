"""The sliced Wasserstein distance on Laplacian-pyramid patches: exact on equal sets, repeatable, and
ordered as blur and noise should order it."""

import pytest
import torch
import torch.nn.functional as F

from genzoo.metrics.swd import laplacian_pyramid, patches_per_image, pyramid_levels, swd


def _smooth_images(n: int, size: int = 32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, size // 4, size // 4, generator=g)
    return F.interpolate(coarse, size=size, mode="bilinear", align_corners=False).clamp(0, 1)


def test_the_pyramid_levels_sum_back_to_the_image():
    from genzoo.metrics.swd import _up

    images = _smooth_images(4, 32) + 0.05 * torch.rand(4, 3, 32, 32)
    bands = laplacian_pyramid(images, 2)
    assert [b.shape[-1] for b in bands] == [32, 16]
    assert torch.allclose(bands[0] + _up(bands[1], (32, 32)), images, atol=1e-5)


def test_pyramid_depth_and_patch_counts_follow_the_image_and_set_sizes():
    assert [pyramid_levels(s) for s in (28, 32, 64, 128)] == [2, 2, 3, 4]
    assert patches_per_image(1000) == 128 and patches_per_image(10_000) == 27 and patches_per_image(10**6) == 16


def test_equal_sets_score_zero_and_a_figure_repeats_exactly():
    images = _smooth_images(64)
    zero = swd(images, images.clone(), descriptors=2048)
    assert set(zero) == {"swd_32", "swd_16", "swd"} and all(v == 0.0 for v in zero.values())
    other = _smooth_images(64, seed=1)
    first, second = swd(images, other, seed=3, descriptors=2048), swd(images, other, seed=3, descriptors=2048)
    assert first == second and first["swd"] > 0
    assert swd(images, other, seed=4, descriptors=2048) != first


@pytest.mark.slow  # over 5 s on 2 cores: the default suite stays under 3 minutes
def test_blur_and_noise_move_the_finest_level_most():
    real, held_out = _smooth_images(200, seed=0), _smooth_images(200, seed=1)
    sharp_real, sharp_held = (x + 0.1 * torch.rand(x.shape, generator=torch.Generator().manual_seed(i))
                              for i, x in enumerate((real, held_out)))
    blurred = F.avg_pool2d(F.pad(sharp_held, (2, 2, 2, 2), mode="replicate"), 5, 1)
    noisy = (sharp_held + 0.3 * torch.randn(sharp_held.shape, generator=torch.Generator().manual_seed(5))).clamp(0, 1)
    base = swd(sharp_real.clamp(0, 1), sharp_held.clamp(0, 1), descriptors=8192)
    for degraded in (blurred, noisy):
        score = swd(sharp_real.clamp(0, 1), degraded.clamp(0, 1), descriptors=8192)
        assert score["swd_32"] > 2 * base["swd_32"]
        assert score["swd_32"] - base["swd_32"] > score["swd_16"] - base["swd_16"]
        assert score["swd"] > base["swd"]


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        swd(torch.rand(4, 3, 32, 32), torch.rand(4, 1, 32, 32))


def test_genzoo_eval_reports_swd_from_the_reference_pixels(toy_site, toy_npz):
    """--metrics swd needs no features: the reference's own images score below blurred ones, per level and mean."""
    import numpy as np

    import genzoo

    data = np.load(toy_npz)
    x = torch.from_numpy(data["x"]).float().unsqueeze(1) / 255
    common = dict(n=len(x), ref=f"npz:{toy_npz}", features="toy-features", metrics="swd", progress=False)
    same = genzoo.evaluate(x, **common)["metrics"]
    blurred = genzoo.evaluate(F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), 3, 1), **common)["metrics"]
    assert set(same["swd_per_level"]) == {"swd_8"}  # 8x8 images: one level of 7x7 neighbourhoods
    assert 0 <= same["swd"] < blurred["swd"]


def test_faces_are_scored_first_in_pixels_and_other_datasets_keep_the_feature_metrics():
    from genzoo.metrics.evaluation import EvalOptions

    faces = [e.name for e in EvalOptions(ref="celeba64:test").metric_entries(can_classify=False)]
    digits = [e.name for e in EvalOptions(ref="mnist:test").metric_entries(can_classify=True)]
    files = [e.name for e in EvalOptions(ref="npz:somewhere.npz").metric_entries(can_classify=False)]
    assert faces[0] == "swd" and "fid" in faces
    assert digits == ["fid", "kid", "precision", "recall", "accuracy"]
    assert files == ["fid", "kid", "precision", "recall"]

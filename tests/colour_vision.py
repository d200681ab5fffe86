"""How a colour looks to a reader with a colour-vision deficiency, and how far apart two colours look.

- simulate(): Machado, Oliveira & Fernandes (2009), "A physiologically-based model for simulation of color
  vision deficiency", their matrices for the full deficiency (severity 1.0), applied in linear RGB.
- delta_e(): the CIEDE2000 colour difference (Sharma, Wu & Dalal 2005), on CIELAB (D65).
"""

from __future__ import annotations

import numpy as np

MACHADO = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779],
                            [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}  # fmt: skip
SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                        [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])  # fmt: skip
WHITE_D65 = np.array([0.95047, 1.0, 1.08883])


def linear(rgb) -> np.ndarray:
    """sRGB (0-255) to linear light (0-1)."""
    c = np.asarray(rgb, dtype=float) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def gamma(light) -> np.ndarray:
    """Linear light (0-1, clipped) to sRGB (0-255)."""
    c = np.clip(light, 0, 1)
    return 255 * np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


def simulate(rgb, deficiency: str) -> np.ndarray:
    return gamma(linear(rgb) @ MACHADO[deficiency].T)


def lab(rgb) -> np.ndarray:
    xyz = linear(rgb) @ SRGB_TO_XYZ.T / WHITE_D65
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def delta_e(lab1, lab2) -> np.ndarray:
    """CIEDE2000 between CIELAB colours (broadcast over leading axes)."""
    L1, a1, b1 = np.moveaxis(np.asarray(lab1, dtype=float), -1, 0)
    L2, a2, b2 = np.moveaxis(np.asarray(lab2, dtype=float), -1, 0)
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = np.hypot(a1, b1), np.hypot(a2, b2)
    h1, h2 = np.degrees(np.arctan2(b1, a1)) % 360, np.degrees(np.arctan2(b2, a2)) % 360
    grey = c1 * c2 == 0  # a hue is undefined for a grey
    dh = h2 - h1
    dh = np.where(dh > 180, dh - 360, np.where(dh < -180, dh + 360, dh))
    dh = np.where(grey, 0, dh)
    d_hue = 2 * np.sqrt(c1 * c2) * np.sin(np.radians(dh / 2))
    l_mean, c_mean = (L1 + L2) / 2, (c1 + c2) / 2
    h_sum = h1 + h2
    h_mean = np.where(np.abs(h1 - h2) <= 180, h_sum / 2, np.where(h_sum < 360, (h_sum + 360) / 2, (h_sum - 360) / 2))
    h_mean = np.where(grey, h_sum, h_mean)
    t = (1 - 0.17 * np.cos(np.radians(h_mean - 30)) + 0.24 * np.cos(np.radians(2 * h_mean))
         + 0.32 * np.cos(np.radians(3 * h_mean + 6)) - 0.20 * np.cos(np.radians(4 * h_mean - 63)))  # fmt: skip
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / np.sqrt(20 + (l_mean - 50) ** 2)
    s_c = 1 + 0.045 * c_mean
    s_h = 1 + 0.015 * c_mean * t
    turn = 30 * np.exp(-(((h_mean - 275) / 25) ** 2))  # degrees: the blue region's hue rotation
    rotation = -np.sin(np.radians(2 * turn)) * 2 * np.sqrt(c_mean**7 / (c_mean**7 + 25**7))
    dl, dc, dhh = (L2 - L1) / s_l, (c2 - c1) / s_c, d_hue / s_h
    return np.sqrt(dl**2 + dc**2 + dhh**2 + rotation * dc * dhh)
